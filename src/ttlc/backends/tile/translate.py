"""ttlc IR to a Tile IR module: every function an ``entry``, one tile block per work-group.

A work-group's collective instructions run once per tile block, as Tile IR runs a whole
program per block, and group ids are tile block ids.  The kernel ABI (how arguments
arrive) is described in ``docs/cuda-tile.md``: a scalar is a rank-0 tile, a memref a
pointer followed by its dynamic sizes and dynamic strides as ``tile<i64>``.

Inside, a memref is a ``Memref``: a pointer tile and its sizes and strides, each a Python
int (static) or an ``i64`` tile.  A collective BLAS instruction becomes loops over the
tiles of its output (``extent``: a mode of static size s is one tile of the next power of
two up to ``MAX_TILE``, a dynamic mode tiles of ``DYNAMIC_TILE``), an inner loop over the
tiles of a contracted mode where it has one, tile loads through partition views padded
with zeros, and a store of ``alpha * value + beta * C`` masked by the view's bounds.
Memory operations are ordered by one chain of tokens, which loops and branches carry.

What this translation does not cover is a ``CompileError`` naming the instruction and the
target; the tables of ``scalar``, ``spmd``, ``blas``, ``coop``, ``atomics`` list what it
covers (``complexes`` holds the complex arithmetic the scalar rules use).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ...diagnostics import CompileError, error
from ...ir.core import Function as IRFunction
from ...ir.core import Instruction, Region
from ...ir.core import Value as IRValue
from ...ir.types import BoolType, CoopMatrixType, GroupType, MemrefType, ScalarType
from ...target import ExecConfig
from . import checks, races
from .ops import TOKEN, PartitionView, Ptr, Scalar, TensorView, Tile
from .tir import Block, Builder, Entry, Value

TARGET = "cuda-tile"
#: the largest tile extent along a mode of static size, and the extent along a dynamic mode
MAX_TILE = 64
DYNAMIC_TILE = 32

Size = Union[int, Value]  # static, or an i64 tile
#: how an instruction is translated (the tables of ``scalar``, ``spmd`` and ``blas``)
Rule = Callable[["Translator", Instruction], None]


def element_name(t, loc, what: str) -> str:
    """The Tile IR element type of a ttlc scalar or bool type (or of a coopmatrix's
    components)."""
    if isinstance(t, CoopMatrixType):
        t = t.component
    if isinstance(t, BoolType):
        return "i1"
    if isinstance(t, ScalarType) and not t.is_complex:
        return "i64" if t.name == "index" else t.name
    raise error(loc, f"{what}: type {t} is not supported on target {TARGET}")


def unsupported(inst: Instruction, what: str = "the instruction is") -> CompileError:
    """The error for an instruction (or a form of it: `what`) the translation lacks."""
    return error(inst.loc, f"{inst.opcode}: {what} not supported on target {TARGET}")


def next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


class Pair(NamedTuple):
    """A complex value (Tile IR has no complex type): tiles of its real and imaginary
    parts, of the component type (f32 for c32, f64 for c64)."""

    re: Value
    im: Value


#: the component type of each complex type
COMPONENT = {"c32": "f32", "c64": "f64"}


def is_complex(t) -> bool:
    """Whether a ttlc type is complex, or a coopmatrix of complex numbers."""
    t = t.component if isinstance(t, CoopMatrixType) else t
    return isinstance(t, ScalarType) and t.is_complex


def component_name(t, loc, what: str) -> str:
    """The Tile IR element type of a ttlc number type, the parts' type for a complex one."""
    t = t.component if isinstance(t, CoopMatrixType) else t
    return COMPONENT[t.name] if is_complex(t) else element_name(t, loc, what)


def each(fn: Callable[[Value], Value], v):
    """`fn` of a value, or of each part of a complex one."""
    return Pair(fn(v.re), fn(v.im)) if isinstance(v, Pair) else fn(v)


def first(v) -> Value:
    """A value, or the real part of a complex one (whose parts have one tile type)."""
    return v.re if isinstance(v, Pair) else v


def flatten(values) -> List[Value]:
    """Values with each complex one as its two parts (what loops and branches carry)."""
    return [p for v in values for p in (v if isinstance(v, Pair) else (v,))]


def regroup(like, flat: Sequence[Value]) -> List:
    """The inverse of ``flatten``: `flat` grouped as the values `like` are."""
    it = iter(flat)
    return [Pair(next(it), next(it)) if isinstance(v, Pair) else next(it) for v in like]


@dataclass
class Memref:
    """A memref: ``element`` is the type of the tiles read from it (the component type
    for ``complex`` memrefs, whose elements are pairs of it: offsets count twice)."""

    element: str
    ptr: Value
    shape: List[Size]
    strides: List[Size]
    complex: bool = False
    #: checked code: whether the memref is null (an i1 tile; None: it is not)
    null: Optional[Value] = None
    #: checked code: the alloca it views whose lifetime a lifetime_stop may end (its
    #: index in ``checks.Checked.locals``; None: an argument's memory, or never ended)
    alloca: Optional[int] = None

    def view_type(self) -> TensorView:
        """A rank-0 memref is viewed as one element of a vector."""
        shape, strides = (self.shape, self.strides) if self.shape else ([1], [1])
        return TensorView(Scalar(self.element), tuple(d if isinstance(d, int) else None for d in shape),
                          tuple(s if isinstance(s, int) else None for s in strides))

    def view_shape(self) -> List[Size]:
        return self.shape or [1]

    @property
    def number(self) -> str:
        """The language's element type (c32 or c64 for a complex memref)."""
        return {v: k for k, v in COMPONENT.items()}[self.element] if self.complex else self.element


@dataclass
class Group:
    """A group argument: the members' addresses (an array of i64), the member type's
    sizes and strides (static, or an array of i64 with one entry per member), the
    group's size and the offset added to every member."""

    element: str
    addresses: Value
    shape: List[Union[int, Value]]
    strides: List[Union[int, Value]]
    size: Size
    offset: Size
    complex: bool = False


def extent(size: Size) -> int:
    """The tile extent along a mode of this size."""
    return min(next_pow2(size), MAX_TILE) if isinstance(size, int) else DYNAMIC_TILE


class Translator:
    """Translates one function into an entry."""

    def __init__(self, function: IRFunction, rules: Dict[str, "Rule"],
                 config: Callable[[], ExecConfig], checked: bool = False):
        self.function = function
        #: of checked code, the error record and the instruction table (``checks``)
        self.checks: Optional[checks.Checked] = checks.Checked(checks.record_parameter()) \
            if checked else None
        #: of checked code that accesses local memory, its race detection (``races``)
        self.races: Optional[races.Races] = None
        self.rules = rules
        #: the subgroup and work-group sizes (``num_subgroups`` and ``subgroup_size``),
        #: computed where they are used: a size the machine lacks is an error only there
        self.config = config
        self.values: Dict[IRValue, Union[Value, Memref]] = {}
        self.token: Optional[Value] = None
        #: the values of the last ``yield`` translated
        self.yielded: List[Value] = []
        self.b = Builder(Block())
        #: in an SPMD region, the tile extent of the work-items (the work-group's size
        #: rounded up to a power of two; 0 outside) and which of them run (None: all)
        self.lanes = 0
        self.active: Optional[Value] = None
        #: in the region of a ``cooperative_matrix_apply``, the shape of the matrix tile
        #: whose entries the region runs over (in place of the work-items), and how a
        #: value of the work-items becomes one of the entries (``coop.to_entries``)
        self.items: Optional[Tuple[int, ...]] = None
        self.to_items: Optional[Callable[[Value], Value]] = None

    # ---- small builders --------------------------------------------------------------
    def const(self, element: str, value, shape: Sequence[int] = ()) -> Value:
        """A constant tile with every element `value` (a ``Pair`` for a complex type)."""
        if element in COMPONENT:
            value = complex(value)
            return Pair(*(self.const(COMPONENT[element], v, shape) for v in (value.real, value.imag)))
        return self.b.one("constant", Tile(Scalar(element), tuple(shape)), value=(element, value))

    def shaped(self, name: str, v: Value, shape: Sequence[int]) -> Value:
        """``reshape`` or ``broadcast`` of `v` (of each part of a complex value)."""
        if isinstance(v, Pair):
            return Pair(*(self.shaped(name, p, shape) for p in v))
        return self.b.one(name, Tile(v.type.element, tuple(shape)), source=v)

    def i64(self, x: Size) -> Value:
        return self.const("i64", x) if isinstance(x, int) else x

    def binary(self, name: str, a: Value, b: Value, **attrs) -> Value:
        a, b = self.matched(a, b)
        return self.b.one(name, a.type, lhs=a, rhs=b, **attrs)

    def matched(self, *vs: Value) -> List[Value]:
        """Operands of one shape: a work-item tile's, rank-0 ones broadcast to it."""
        shape = max((v.type.shape for v in vs), key=len)
        return [self.splat(v, shape) if v.type.shape != shape else v for v in vs]

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        if isinstance(a, Pair):
            return Pair(*(self.select(cond, x, y) for x, y in zip(a, b)))
        cond, a, b = self.matched(cond, a, b)
        return self.b.one("select", a.type, cond=cond, val_if_true=a, val_if_false=b)

    def per_lane(self, v: Value) -> Value:
        """`v` as a tile of the SPMD region's work-items (of the matrix entries in the
        region of a ``cooperative_matrix_apply``)."""
        if isinstance(v, Pair):
            return Pair(*(self.per_lane(p) for p in v))
        return self.splat(v, self.items or (self.lanes,)) if not v.type.shape else v

    def arith(self, op: str, a: Value, b: Value) -> Value:
        """``add`` or ``mul`` of two tiles of any number type (integers wrap around;
        complex numbers as pairs)."""
        if isinstance(a, Pair):
            if op == "add":
                return Pair(*(self.arith("add", x, y) for x, y in zip(a, b)))
            return Pair(self.binary("subf", self.arith("mul", a.re, b.re), self.arith("mul", a.im, b.im)),
                        self.arith("add", self.arith("mul", a.re, b.im), self.arith("mul", a.im, b.re)))
        return self.binary(op + ("f" if a.type.element.is_float else "i"), a, b)

    def compare(self, predicate: str, a: Value, b: Value) -> Value:
        """A comparison (``ENUMS["predicate"]``) of two number tiles, as the language
        compares: integers signed, floats ordered except ``not_equal`` (true with NaN)."""
        a, b = self.matched(a, b)
        i1 = Tile(Scalar("i1"), a.type.shape)
        if a.type.element.is_float:
            ordering = "unordered" if predicate == "not_equal" else "ordered"
            return self.b.one("cmpf", i1, lhs=a, rhs=b, comparison_predicate=predicate,
                              comparison_ordering=ordering)
        return self.b.one("cmpi", i1, lhs=a, rhs=b, comparison_predicate=predicate,
                          signedness="signed")

    def mul_index(self, a: Size, b: Size) -> Size:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        return self.binary("muli", self.i64(a), self.i64(b))

    def add_index(self, a: Size, b: Size) -> Size:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(a, int) and a == 0:
            return b
        return self.binary("addi", self.i64(a), self.i64(b))

    def convert(self, v: Value, element: str) -> Value:
        """`v` with another element type (the casts of the language; a complex type
        makes a ``Pair``, a real number's imaginary part 0)."""
        if element in COMPONENT:
            part = COMPONENT[element]
            if isinstance(v, Pair):
                return Pair(*(self.convert(p, part) for p in v))
            re = self.convert(v, part)
            return Pair(re, self.const(part, 0.0, re.type.shape))
        src = v.type.element
        if src.name == element:
            return v
        dst = Scalar(element)
        to = Tile(dst, v.type.shape)
        if src.is_float and dst.is_float:
            return self.b.one("ftof", to, from_=v)
        if dst.is_float:
            return self.b.one("itof", to, from_=v, signedness="signed")
        if src.is_float:
            return self.b.one("ftoi", to, from_=v, signedness="signed")
        if dst.bits > src.bits:
            return self.b.one("exti", to, from_=v, signedness="unsigned" if src.name == "i1" else "signed")
        if dst.bits < src.bits:
            return self.b.one("trunci", to, from_=v)
        return v

    def splat(self, v: Value, shape: Sequence[int]) -> Value:
        """A rank-0 tile broadcast to `shape`."""
        if isinstance(v, Pair):
            return Pair(*(self.splat(p, shape) for p in v))
        if not shape:
            return v
        ones = self.b.one("reshape", Tile(v.type.element, (1,) * len(shape)), source=v)
        return self.b.one("broadcast", Tile(v.type.element, tuple(shape)), source=ones)

    def along(self, name: str, tile: Value, dim: int, combine: Callable[[Value, Value], Value],
              identity) -> Value:
        """``reduce`` (or inclusive ``scan``) of `tile` along mode `dim` by `combine`
        (of each part of a complex tile)."""
        if isinstance(tile, Pair):
            return Pair(*(self.along(name, p, dim, combine, identity) for p in tile))
        element = tile.type.element
        block = Block([Value(Tile(element)), Value(Tile(element))])
        outer, self.b.block = self.b.block, block
        self.b.op("yield", operands=[combine(*block.args)])
        self.b.block = outer
        shape = tile.type.shape
        if name == "reduce":
            shape = shape[:dim] + shape[dim + 1:]
        attrs = {"reverse": False} if name == "scan" else {}
        return self.b.op(name, [Tile(element, shape)], regions=[block], operands=[tile], dim=dim,
                         identities=[(element.name, identity)], **attrs)[0]

    def complex_mma(self, a: Pair, b: Pair, acc: Pair) -> Pair:
        """`acc` + `a` `b` for complex tiles of f32 or f64 parts: four real ``mmaf``."""
        re = self.b.one("mmaf", acc.re.type, lhs=a.re, rhs=b.re, acc=acc.re)
        re = self.b.one("mmaf", re.type, lhs=self.b.one("negf", a.im.type, source=a.im), rhs=b.im, acc=re)
        im = self.b.one("mmaf", acc.im.type, lhs=a.re, rhs=b.im, acc=acc.im)
        return Pair(re, self.b.one("mmaf", im.type, lhs=a.im, rhs=b.re, acc=im))

    def products(self, a: Value, b: Value, acc: Value) -> Value:
        """`acc` + `a` `b` for matrix tiles (a batch of them when of rank 3) of `acc`'s
        element type, as the sum of the outer products of a's column k and b's row k, k
        in order: what the matrix units do not multiply (integers other than i8)."""
        *batch, M, K = a.type.shape
        N = b.type.shape[-1]
        lead = [self.const("i32", 0)] * len(batch)

        def step(k: Value, carried: List[Value]) -> List[Value]:
            zero = self.const("i32", 0)
            col = self.b.one("extract", Tile(a.type.element, (*batch, M, 1)), source=a,
                             indices=lead + [zero, k])
            row = self.b.one("extract", Tile(b.type.element, (*batch, 1, N)), source=b,
                             indices=lead + [k, zero])
            shape = acc.type.shape
            term = self.arith("mul", *(self.b.one("broadcast", Tile(v.type.element, shape), source=v)
                                       for v in (col, row)))
            return [self.arith("add", carried[0], term)]
        return self.loop(self.const("i32", K), [acc], step)[0]

    # ---- loops -------------------------------------------------------------------------
    def loop(self, upper: Value, inits: List[Value],
             body: Callable[[Value, List[Value]], List[Value]],
             lower: Optional[Value] = None, step: Optional[Value] = None) -> List[Value]:
        """A ``for`` from `lower` (0) to `upper` by `step` (1) carrying the token and
        `inits`; `body(induction variable, carried values)` gives the next values."""
        element = upper.type.element.name
        iv = Value(upper.type)
        flat = flatten(inits)
        args = [Value(TOKEN)] + [Value(v.type) for v in flat]
        block = Block([iv] + args)
        results = self.b.op("for", [TOKEN] + [v.type for v in flat], regions=[block],
                            lowerBound=lower or self.const(element, 0), upperBound=upper,
                            step=step or self.const(element, 1), initValues=[self.token] + flat)
        outer = self.b.block
        self.b.block, self.token = block, args[0]
        carried = body(iv, regroup(inits, args[1:]))
        self.b.op("continue", operands=[self.token] + flatten(carried))
        self.b.block, self.token = outer, results[0]
        return regroup(inits, results[1:])

    def branches(self, condition: Value, regions: Sequence[Callable[[], List[Value]]],
                 types: Sequence) -> List[Value]:
        """An ``if`` whose two branches (each giving the values it yields) carry the token;
        `types` are those of the values flattened (``flatten``)."""
        blocks = [Block(), Block()]
        results = self.b.op("if", [TOKEN, *types], regions=blocks, condition=condition)
        outer, start = self.b.block, self.token
        yielded = []
        for block, branch in zip(blocks, regions):
            self.b.block, self.token = block, start
            yielded = branch()
            self.b.op("yield", operands=[self.token, *flatten(yielded)])
        self.b.block, self.token = outer, results[0]
        return regroup(yielded, results[1:])

    def tile_count(self, size: Size, ext: int) -> Union[int, Value]:
        if isinstance(size, int):
            return -(-size // ext)
        n = self.binary("divi", self.binary("addi", size, self.const("i64", ext - 1)),
                        self.const("i64", ext), signedness="signed")
        return self.b.one("trunci", Tile(Scalar("i32")), from_=n)

    def over_tiles(self, sizes: Sequence[Size], exts: Sequence[int],
                   body: Callable[[List[Value]], None], indices: Sequence[Value] = ()) -> None:
        """Run `body` with the tile indices of every tile of a space, one loop per mode
        with more than one tile."""
        k = len(indices)
        if k == len(sizes):
            body(list(indices))
            return
        count = self.tile_count(sizes[k], exts[k])
        if isinstance(count, int) and count <= 1:
            self.over_tiles(sizes, exts, body, [*indices, self.const("i32", 0)])
            return
        upper = self.const("i32", count) if isinstance(count, int) else count

        def step(iv, _):
            self.over_tiles(sizes, exts, body, [*indices, iv])
            return []
        self.loop(upper, [], step)

    def accumulate(self, size: Size, ext: int, init: Value,
                   step: Callable[[Value, Value], Value]) -> Value:
        """`init` updated by `step(tile index, acc)` for every tile of a contracted mode."""
        count = self.tile_count(size, ext)
        if isinstance(count, int) and count <= 1:
            return step(self.const("i32", 0), init)
        upper = self.const("i32", count) if isinstance(count, int) else count
        return self.loop(upper, [init], lambda iv, acc: [step(iv, acc[0])])[0]

    # ---- memory ------------------------------------------------------------------------
    def view(self, m: Memref, exts: Sequence[int], padded: bool) -> Value:
        vt = m.view_type()
        dyn = [d for d in m.view_shape() if not isinstance(d, int)]
        dyn_strides = [s for s in (m.strides or [1]) if not isinstance(s, int)]
        tv = self.b.one("make_tensor_view", vt, base=m.ptr, dynamicShape=dyn,
                        dynamicStrides=dyn_strides)
        return self.b.one("make_partition_view", PartitionView(tuple(exts), vt, "zero" if padded else None),
                          tensor_view=tv)

    def parts(self, m: Memref) -> List[Memref]:
        """A complex memref as the memrefs of its real and imaginary parts."""
        strides = [self.mul_index(s, 2) for s in m.strides]
        return [replace(m, ptr=self.offset(m.ptr, k), strides=strides, complex=False) for k in (0, 1)]

    def load(self, m: Memref, exts: Sequence[int], index: Sequence[Value]) -> Value:
        """The tile of `m` at tile index `index` (zeros outside the memref)."""
        if m.complex:
            return Pair(*(self.load(p, exts, index) for p in self.parts(m)))
        tile = Tile(Scalar(m.element), tuple(exts))
        if self.checks:  # zeros once the launch has a finding
            return self.branches(checks.ok(self), [lambda: [self._load_view(m, exts, index)],
                                                   lambda: [self.const(m.element, 0, exts)]], [tile])[0]
        return self._load_view(m, exts, index)

    def _load_view(self, m: Memref, exts: Sequence[int], index: Sequence[Value]) -> Value:
        pv = self.view(m, exts, padded=True)
        return self.b.op("load_view_tko", [Tile(Scalar(m.element), tuple(exts)), TOKEN], view=pv,
                         index=list(index), token=self.token, memory_ordering_semantics="weak")[0]

    def store(self, m: Memref, exts: Sequence[int], index: Sequence[Value], tile: Value) -> None:
        if m.complex:
            for p, v in zip(self.parts(m), tile):
                self.store(p, exts, index, v)
            return
        if self.checks:  # nothing once the launch has a finding
            self.branches(checks.ok(self), [lambda: self._store_view(m, exts, index, tile) or [],
                                            lambda: []], [])
            return
        self._store_view(m, exts, index, tile)

    def _store_view(self, m: Memref, exts: Sequence[int], index: Sequence[Value], tile: Value) -> None:
        pv = self.view(m, exts, padded=False)
        self.token = self.b.one("store_view_tko", TOKEN, tile=tile, view=pv, index=list(index),
                                token=self.token, memory_ordering_semantics="weak")

    def load_op(self, m: Memref, transpose: bool, exts: Sequence[int], index: Sequence[Value],
                element: str) -> Value:
        """The tile of op(m) (m transposed if `transpose` and a matrix), as `element`."""
        def permuted(v: Value) -> Value:
            if isinstance(v, Pair):
                return Pair(*map(permuted, v))
            return self.b.one("permute", Tile(v.type.element, tuple(exts)), source=v, permutation=[1, 0])
        if transpose and len(m.shape) == 2:
            t = permuted(self.load(m, exts[::-1], index[::-1]))
        else:
            t = self.load(m, exts, index)
        return self.convert(t, element)

    def element_ptr(self, m: Memref, index: Sequence[Size]) -> Value:
        """The pointer to element `index` of `m`."""
        offset: Size = 0
        for i, stride in zip(index, m.strides):
            offset = self.add_index(offset, self.mul_index(i, stride))
        return self.offset(m.ptr, self.mul_index(offset, 2) if m.complex else offset)

    def offset(self, ptr: Value, offset: Size) -> Value:
        """`ptr` moved by `offset` elements (a tile of pointers if either is one)."""
        if isinstance(offset, int) and offset == 0:
            return ptr
        ptr, offset = self.matched(ptr, self.i64(offset))
        return self.b.one("offset", ptr.type, ptr=ptr, offset=offset)

    def element_ptrs(self, m: Memref, exts: Sequence[int], index: Sequence[Value]):
        """The pointers to the elements of tile `index` of `m` and which of them lie in it."""
        i64, i1 = Scalar("i64"), Scalar("i1")
        shape = tuple(exts)
        offsets = mask = None
        for k, (ext, size, stride) in enumerate(zip(exts, m.view_shape(), m.strides or [1])):
            first = self.binary("muli", self.convert(index[k], "i64"), self.const("i64", ext))
            coord = self.binary("addi", self.b.one("iota", Tile(i64, (ext,))),
                                self.splat(first, (ext,)))
            inside = self.b.one("cmpi", Tile(i1, (ext,)), lhs=coord,
                                rhs=self.splat(self.i64(size), (ext,)),
                                comparison_predicate="less_than", signedness="signed")
            offset = self.binary("muli", coord, self.splat(self.i64(stride), (ext,)))
            along = tuple(e if j == k else 1 for j, e in enumerate(shape))
            offset, inside = (self.b.one("broadcast", Tile(v.type.element, shape),
                                         source=self.b.one("reshape", Tile(v.type.element, along), source=v))
                              for v in (offset, inside))
            offsets = offset if offsets is None else self.binary("addi", offsets, offset)
            mask = inside if mask is None else self.binary("andi", mask, inside)
        if self.checks:
            mask = self.binary("andi", mask, checks.ok(self))
        base = self.b.one("broadcast", Tile(m.ptr.type.element, shape),
                          source=self.b.one("reshape", Tile(m.ptr.type.element, (1,) * len(shape)),
                                            source=m.ptr))
        return self.b.one("offset", base.type, ptr=base, offset=offsets), mask

    def atomic_add(self, m: Memref, exts: Sequence[int], index: Sequence[Value], tile: Value) -> None:
        """Add `tile` to tile `index` of `m`, element by element, atomically (a complex
        number part by part)."""
        if m.complex:
            for p, v in zip(self.parts(m), tile):
                self.atomic_add(p, exts, index, v)
            return
        ptrs, mask = self.element_ptrs(m, exts, index)
        mode = "addf" if tile.type.element.is_float else "add"
        self.token = self.b.op("atomic_rmw_tko", [tile.type, TOKEN], pointers=ptrs, arg=tile,
                               mask=mask, token=self.token, memory_ordering_semantics="relaxed",
                               memory_scope="device", mode=mode)[1]

    def atomic_store(self, m: Memref, exts: Sequence[int], index: Sequence[Value], tile: Value) -> None:
        """Store `tile` as tile `index` of `m`, each element atomically."""
        if m.complex:
            for p, v in zip(self.parts(m), tile):
                self.atomic_store(p, exts, index, v)
            return
        ptrs, mask = self.element_ptrs(m, exts, index)
        self.token = self.b.one("store_ptr_tko", TOKEN, destination=ptrs, value=tile, mask=mask,
                                token=self.token, memory_ordering_semantics="relaxed",
                                memory_scope="device")

    def load_scalar(self, ptr: Value, inside: Optional[Value] = None) -> Value:
        """The element at `ptr`; in an SPMD region under divergence, or from a tile of
        pointers, a gather by the work-items that run (checked code: whose index is
        `inside`, while the launch has no finding)."""
        if self.lanes and (ptr.type.shape or self.active is not None or inside is not None):
            ptr = self.per_lane(ptr)
        element = ptr.type.element.pointee
        value, self.token = self.b.op(  # chained: a later store must not overtake it
            "load_ptr_tko", [Tile(element, ptr.type.shape), TOKEN], source=ptr,
            mask=self.access_mask(ptr, inside), token=self.token,
            memory_ordering_semantics="weak")
        return value

    def store_scalar(self, ptr: Value, value: Value, inside: Optional[Value] = None) -> None:
        """A store; a scatter by the work-items that run in an SPMD region (checked code:
        whose index is `inside`, while the launch has no finding)."""
        if self.lanes and (ptr.type.shape or value.type.shape or self.active is not None
                           or inside is not None):
            ptr, value = self.per_lane(ptr), self.per_lane(value)
        self.token = self.b.one("store_ptr_tko", TOKEN, destination=ptr, value=value,
                                mask=self.access_mask(ptr, inside),
                                token=self.token, memory_ordering_semantics="weak")

    def access_mask(self, ptr: Value, inside: Optional[Value]) -> Optional[Value]:
        """The mask of a gather or scatter through `ptr`: the work-items that run, and in
        checked code whose index is `inside`, while the launch has no finding."""
        mask = self.active if ptr.type.shape else None
        if not self.checks:
            return mask
        for m in (inside, checks.ok(self)):
            if m is not None:
                m = self.splat(m, ptr.type.shape) if m.type.shape != ptr.type.shape else m
                mask = m if mask is None else self.binary("andi", mask, m)
        return mask

    def member(self, g: Group, index: Size) -> Memref:
        """Member `index` of a group, as a memref (in an SPMD region, one per work-item
        where the index differs between them: its address, sizes and strides are then
        gathered by the work-items that run)."""
        if self.checks:
            checks.check_group_index(self, index, g.size)

        def fetch(array: Value) -> Value:
            return self.load_scalar(self.offset(array, index))

        address = fetch(g.addresses)
        ptr = self.b.one("int_to_ptr", Tile(Ptr(Scalar(g.element)), address.type.shape), source=address)
        ptr = self.offset(ptr, self.mul_index(g.offset, 2) if g.complex else g.offset)
        return Memref(g.element, ptr, [d if isinstance(d, int) else fetch(d) for d in g.shape],
                      [d if isinstance(d, int) else fetch(d) for d in g.strides], g.complex,
                      checks.is_null(self, address) if self.checks else None)

    # ---- values ------------------------------------------------------------------------
    def tile_of(self, v: IRValue) -> Value:
        x = self.values[v]
        return Pair(*(self._adapt(p) for p in x)) if isinstance(x, Pair) else self._adapt(x)

    def _adapt(self, x):
        """A value where it is used: in the region of a coopmatrix apply, one of the
        work-items as one of the entries; in an SPMD region, a coopmatrix made outside
        as the matrix of every subgroup."""
        if self.items and isinstance(x, Value) and x.type.shape == (self.lanes,):
            return self.to_items(x)  # a work-item's value, used by the entries it holds
        if self.lanes and isinstance(x, Value) and len(x.type.shape) == 3 and x.type.shape[0] == 1:
            # a coopmatrix made outside the SPMD region: every subgroup's matrix
            G = self.lanes // self.config().subgroup_size
            if G > 1:
                return self.b.one("broadcast", Tile(x.type.element, (G,) + x.type.shape[1:]), source=x)
        return x

    def memref(self, v: IRValue) -> Memref:
        return self.values[v]

    def scalar_as(self, v: IRValue, element: str) -> Value:
        return self.convert(self.tile_of(v), element)

    # ---- the function ------------------------------------------------------------------
    def entry(self) -> Entry:
        """The entry; its arguments as ``docs/cuda-tile.md`` describes them."""
        args: List[Value] = []
        if not self.function.name[0].isalpha():  # tileiras rejects such symbols
            raise error(self.function.loc, f"function @{self.function.name}: names starting "
                                           f"with a digit are not supported on target {TARGET}")

        def dynamic(dims, t: Tile) -> List[Union[int, Value]]:
            out = [d if d is not None else Value(t) for d in dims]
            args.extend(d for d in out if isinstance(d, Value))
            return out

        i64, i64_array = Tile(Scalar("i64")), Tile(Ptr(Scalar("i64")))
        null_args: List[Memref] = []  # memref arguments, whose nullness checked code tests
        for a in self.function.args:
            t = a.value.type
            what = f"argument %{a.value.name}"
            if isinstance(t, MemrefType):
                element = component_name(t.element, a.value.loc, what)
                ptr = Value(Tile(Ptr(Scalar(element))))
                args.append(ptr)
                self.values[a.value] = Memref(element, ptr, dynamic(t.shape, i64),
                                              dynamic(t.stride, i64), is_complex(t.element))
                null_args.append(self.values[a.value])
            elif isinstance(t, GroupType):
                element = component_name(t.memref.element, a.value.loc, what)
                addresses = Value(i64_array)
                args.append(addresses)
                shape, strides = dynamic(t.memref.shape, i64_array), dynamic(t.memref.stride, i64_array)
                size, offset = dynamic([t.size, t.offset], i64)
                self.values[a.value] = Group(element, addresses, shape, strides, size, offset,
                                             is_complex(t.memref.element))
            elif isinstance(t, (ScalarType, BoolType)):
                part = Tile(Scalar(component_name(t, a.value.loc, what)))
                v = Pair(Value(part), Value(part)) if is_complex(t) else Value(part)
                args.extend(flatten([v]))
                self.values[a.value] = v
            else:
                raise error(a.value.loc, f"argument %{a.value.name}: {t} arguments are not "
                                         f"supported on target {TARGET} yet")
        self.token = self.b.one("make_token", TOKEN)
        if self.checks:
            args.append(self.checks.record)
            self.races = races.setup(self)
            for m in null_args:
                m.null = checks.is_null(self, self.b.one("ptr_to_int", Tile(Scalar("i64")), source=m.ptr))
        self.region(self.function.body)
        self.b.op("return", operands=[])
        if self.checks:  # names work-items in findings, which only SPMD regions make
            try:
                self.checks.work_group_size = tuple(self.config().work_group_size)
            except CompileError:  # sizes the function never needed
                pass
        return Entry(self.function.name, args, self.b.block, self.checks)

    def region(self, region: Region) -> None:
        for inst in region.instructions:
            rule = self.rules.get(inst.opcode)
            if rule is None:
                raise unsupported(inst)
            if self.checks:  # findings name the instruction being translated
                outer = self.checks.current
                self.checks.enter(inst)
            rule(self, inst)
            if self.checks:
                self.checks.current = outer



def registrar(table: Dict[str, Rule]):
    """A decorator adding a function to `table` as the rule of the given opcodes."""
    def rule(*opcodes: str):
        def add(fn):
            for op in opcodes:
                table[op] = fn
            return fn
        return add
    return rule
