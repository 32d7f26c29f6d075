"""How the CPU back end represents ttlc values as LLVM values.

The LLVM types, the fast vector constants, and the Python-side shapes of values that are
more than one LLVM value: complex numbers (``Cplx``), integers known per lane up to a
uniform term (``Lanes``), memrefs and groups with their sizes and strides (``MemVal``,
``GroupVal``) and coopmatrices (``CoopVal``).  Every other module of the back end builds
on these; this one imports none of them.
"""
from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from llvmlite import ir

from ...ir.numerics import fold_int
from ...ir.types import CoopMatrixType, GroupType, MemrefType

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

#: storage type of each scalar type (complex: of one component)
LLTYPE = {"i8": I8, "i16": I16, "i32": I32, "i64": I64, "index": I64, "bf16": I16,
          "f16": F16, "f32": F32, "f64": F64, "c32": F32, "c64": F64}
COMPONENT = {"c32": "f32", "c64": "f64"}


class VectorConstant(ir.Constant):
    """``ir.Constant(ir.VectorType(elem, n), values)``, made and printed much faster.

    llvmlite makes one Constant per element and formats each anew; the long shuffle
    masks and splats of coopmatrix code made that the largest part of code generation.
    Here the elements (and their text) come from a cache, and integer vectors (shuffle
    masks, most of the constants) are made once per process: constants are immutable,
    so one object serves every instruction that uses it.  A splat (every element the
    same number) prints as ``splat (<elem> <value>)``, which LLVM reads as the same
    constant as the list of elements llvmlite writes: most of the IR text of coopmatrix
    code was such lists, and LLVM parses the short form much faster."""

    _cache: Dict[tuple, Tuple[ir.Value, str]] = {}
    #: (element type, values, their types) -> VectorConstant, for integer elements
    _vectors: Dict[tuple, "VectorConstant"] = {}

    def __new__(cls, elem: ir.Type, values: Sequence[Any]):
        values = tuple(values)
        if isinstance(elem, ir.IntType) and set(map(type, values)) <= _INTEGERS:
            key = (elem.width, values, tuple(map(type, values)))
            hit = cls._vectors.get(key)
            if hit is None:
                if len(cls._vectors) > 10_000:
                    cls._vectors.clear()
                hit = cls._vectors[key] = cls._make(elem, values)
            return hit
        return cls._make(elem, values)

    @classmethod
    def _make(cls, elem: ir.Type, values: tuple) -> "VectorConstant":
        self = object.__new__(cls)
        name, cache = str(elem), cls._cache
        if len(cache) > 100_000:
            cache.clear()
        splat = _is_splat(values)  # most vector constants: one lookup for all lanes
        parts, texts = [], []
        for v in values[:1] if splat else values:
            if isinstance(v, ir.Value):
                parts.append(v)
                texts.append(f"{v.type} {v.get_reference()}")
                continue
            key = (name, type(v), v, repr(v))  # repr: 0.0 and -0.0 are equal keys otherwise
            hit = cache.get(key)
            if hit is None:
                c = ir.Constant(elem, v)
                hit = cache[key] = (c, f"{name} {c.get_reference()}")
            parts.append(hit[0])
            texts.append(hit[1])
        if splat:
            parts = parts * len(values)
        self.type = ir.VectorType(elem, len(parts))
        self.constant = parts
        #: the values, where all are Python integers of an integer type (for folding)
        self.ints = values if isinstance(elem, ir.IntType) and \
            set(map(type, values)) <= _INTEGERS else None
        self._text = f"splat ({texts[0]})" if splat else "<" + ", ".join(texts) + ">"
        return self

    def __init__(self, elem: ir.Type, values: Sequence[Any]):
        pass  # made by __new__ (perhaps an existing one)

    def _get_reference(self) -> str:
        return self._text


#: the Python types of integer constants VectorConstant makes once per process
_INTEGERS = frozenset((int, bool))


class UndefVector(ir.Constant):
    """``ir.Constant(vector_type, ir.Undefined)``, printed as ``undef`` (the same LLVM
    constant as the list of undef elements llvmlite writes, in far less text)."""

    def __init__(self, vt: ir.VectorType):
        super().__init__(vt, ir.Undefined)

    def _get_reference(self) -> str:
        return "undef"


class ZeroVector(ir.Constant):
    """``ir.Constant(vector_type, None)``, printed as ``zeroinitializer`` (llvmlite lists
    every zero)."""

    def __init__(self, vt: ir.VectorType):
        super().__init__(vt, None)

    def _get_reference(self) -> str:
        return "zeroinitializer"


def zero_of(t: ir.Type) -> ir.Constant:
    """The zero (null) constant of type t, in short form for vectors."""
    return ZeroVector(t) if isinstance(t, ir.VectorType) else ir.Constant(t, None)


def undef_of(t: ir.Type) -> ir.Constant:
    """The undef constant of type t, in short form for vectors."""
    return UndefVector(t) if isinstance(t, ir.VectorType) else ir.Constant(t, ir.Undefined)


class FoldingBuilder(ir.IRBuilder):
    """An IRBuilder whose integer ``add``, ``sub``, ``mul``, comparisons, ``and`` of i1
    and ``shuffle_vector`` of constants give the constant (wrapped to the type's width),
    ``x + 0``, ``x - 0``, ``x * 1`` give x, and ``extract_element`` of an inserted entry
    gives that entry.

    Address arithmetic of unrolled coopmatrix code is mostly such instructions (offsets
    ``r * 1 + c * ld`` with constant r and c): written out, they were a third of the LLVM
    IR, which LLVM parsed and folded again for every kernel.  The masks of accesses to
    static rows so become constants their loads can see (``vectors.masked_load``)."""

    def __init__(self, block: Optional[ir.Block] = None):
        super().__init__(block)
        #: id of a shuffle this builder made -> [the shuffle, its lanes' ``_origins``], or
        #: [the shuffle, its operands, its mask] until they are asked for
        self._traced: Dict[int, list] = {}
        #: id of a vector extracted from -> [the vector, {lane: the value inserted there}]
        self._inserted: Dict[int, list] = {}

    def add(self, lhs, rhs, name="", flags=()):
        folded = _fold("add", lhs, rhs, 0, (lhs, rhs))
        return super().add(lhs, rhs, name, flags) if folded is None else folded

    def sub(self, lhs, rhs, name="", flags=()):
        folded = _fold("sub", lhs, rhs, 0, (lhs,))
        return super().sub(lhs, rhs, name, flags) if folded is None else folded

    def mul(self, lhs, rhs, name="", flags=()):
        folded = _fold("mul", lhs, rhs, 1, (lhs, rhs))
        return super().mul(lhs, rhs, name, flags) if folded is None else folded

    def icmp_signed(self, cmpop, lhs, rhs, name=""):
        folded = _fold_compare(cmpop, True, lhs, rhs)
        return super().icmp_signed(cmpop, lhs, rhs, name) if folded is None else folded

    def icmp_unsigned(self, cmpop, lhs, rhs, name=""):
        folded = _fold_compare(cmpop, False, lhs, rhs)
        return super().icmp_unsigned(cmpop, lhs, rhs, name) if folded is None else folded

    def and_(self, lhs, rhs, name="", flags=()):
        """i1 constants anded are the constant; ``x and true`` is x."""
        if lhs.type == rhs.type and getattr(lhs.type, "element", lhs.type) == I1:
            a, b = _ints(lhs), _ints(rhs)
            if a is not None and b is not None:
                return _i1_constant(lhs.type, [x & y & 1 for x, y in zip(a, b)])
            for x, other in ((lhs, b), (rhs, a)):
                if other is not None and all(v & 1 for v in other):
                    return x
        return super().and_(lhs, rhs, name, flags)

    def extract_element(self, vector, idx, name=""):
        """An entry of a vector built by insertelements at constant positions (B's
        entries in mul_add) is the value inserted there.  The chain is read once per
        vector: a 16x16 matrix's 256 entries asked one by one would walk it 256 times."""
        at = _ints(idx)
        if at is not None:
            hit = self._inserted.get(id(vector))
            if hit is None:
                hit = self._inserted[id(vector)] = [vector, _inserted_lanes(vector)]
            value = hit[1].get(at[0])
            if value is not None:
                return value
        return super().extract_element(vector, idx, name)

    def shuffle_vector(self, vector1, vector2, mask, name=""):
        """A shuffle of integer constants (the masks of unmasked coopmatrix accesses) is
        the constant it picks.  Otherwise each lane is traced back through the shuffles
        this builder made to the vector it comes from (``_origins``): a shuffle that picks
        a whole vector in order is that vector, and one that picks from at most two
        vectors (and zeros) is one shuffle of those.  A coopmatrix joined from its pieces
        and then taken apart again (a mul_add's result stored, a tile's columns) is so
        the pieces again, not a chain of shuffles over the whole matrix for LLVM to undo."""
        a, b, picks = _ints(vector1), _ints(vector2), _ints(mask)
        if a is not None and b is not None and picks is not None and \
                isinstance(vector1, VectorConstant) and max(picks) < 2 * len(a):
            pool = a + b
            return VectorConstant(vector1.type.element, [pool[k] for k in picks])
        if picks is None:
            return super().shuffle_vector(vector1, vector2, mask, name)
        n, traced = vector1.type.count, self._traced
        if len(picks) == n and picks[0] in (0, n) and picks == _lanes(picks[0], picks[0] + n):
            return vector1 if picks[0] == 0 else vector2  # the whole of one operand
        joined = len(picks) == 2 * n and vector1 is not vector2 and picks == _lanes(0, 2 * n)
        if not joined and (id(vector1) in traced or id(vector2) in traced):
            # (two vectors joined whole are taken apart later, not simplified here)
            first, second = self._origins(vector1), self._origins(vector2)
            lanes = [first[k] if k < n else second[k - n] for k in picks]
            sources = list({id(src): src for src, _ in lanes if src is not ZERO}.values())
            if not sources:
                return zero_of(ir.VectorType(vector1.type.element, len(lanes)))
            one = sources[0] if len(sources) == 1 else None
            if one is not None and one.type.count == len(lanes) and all(
                    src is one and lane == k for k, (src, lane) in enumerate(lanes)):
                return one
            operands = None
            if one is not None:
                operands = one, zero_of(one.type)
            elif len(sources) == 2 and sources[0].type == sources[1].type and \
                    all(src is not ZERO for src, _ in lanes):
                operands = sources
            if operands is not None:
                vector1, vector2 = operands
                width = vector1.type.count
                mask = VectorConstant(I32, [width if src is ZERO else
                                            lane + (width if src is vector2 else 0)
                                            for src, lane in lanes])
                picks = mask.ints
        out = super().shuffle_vector(vector1, vector2, mask, name)
        traced[id(out)] = [out, vector1, vector2, picks]  # its lanes when first asked
        return out

    def mark(self) -> tuple:
        """Where the builder is: (block, the instruction before, None at the start)."""
        return self.block, self.block.instructions[self._anchor - 1] if self._anchor else None

    def emit_at(self, mark: tuple, fn: Callable[[], Any]):
        """fn() with its instructions placed at `mark` (``mark``), then back where the
        builder was (after them, where that is in the same block and not before)."""
        block, before = mark
        saved_block, saved_anchor = self._block, self._anchor
        if before is None:
            self.position_at_start(block)
        else:
            self.position_after(before)
        start = self._anchor
        try:
            return fn()
        finally:
            added = self._anchor - start
            self._block = saved_block
            self._anchor = saved_anchor + (added if saved_block is block and saved_anchor >= start
                                           else 0)

    def _origins(self, v) -> list:
        """(source vector, lane) of each lane of v: through the shuffles this builder
        made; ``(ZERO, 0)`` for a lane of a zero vector; v's own lanes otherwise."""
        hit = self._traced.get(id(v))
        if hit is not None:
            if len(hit) > 2:  # worked out once
                _, x, y, picks = hit
                n = x.type.count
                first, second = self._origins(x), self._origins(y)
                hit[1:] = [[first[k] if k < n else second[k - n] for k in picks]]
            return hit[1]
        if isinstance(v, ZeroVector):
            return [(ZERO, 0)] * v.type.count
        return [(v, k) for k in range(v.type.count)]



@functools.lru_cache(maxsize=None)
def _lanes(start: int, end: int) -> Tuple[int, ...]:
    return tuple(range(start, end))


def _inserted_lanes(v) -> Dict[int, ir.Value]:
    """lane -> the value the last insertelement at that constant lane put into v, for the
    chain of insertelements that built v, up to the first whose lane is not a constant."""
    lanes: Dict[int, ir.Value] = {}
    while isinstance(v, ir.instructions.InsertElement):
        where = _ints(v.operands[2])
        if where is None:
            break
        lanes.setdefault(where[0], v.operands[1])
        v = v.operands[0]
    return lanes


#: the source of the lanes of zero vectors in ``FoldingBuilder._origins``
ZERO = object()


def _ints(x: ir.Value) -> Optional[Tuple[int, ...]]:
    """The integers an integer constant (scalar: one; vector: one per lane) holds."""
    if isinstance(x, VectorConstant):
        return x.ints
    if type(x) is ir.Constant and isinstance(x.type, ir.IntType) and type(x.constant) is int:
        return (x.constant,)
    return None


#: FoldingBuilder's operations on the lanes of vector constants
_FOLDED = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}


def _fold(op: str, lhs, rhs, identity: int, keep: tuple) -> Optional[ir.Value]:
    """lhs op rhs as a constant, or the operand of `keep` whose other operand is the
    identity; None where the instruction is needed."""
    elem = getattr(lhs.type, "element", lhs.type)
    if lhs.type != rhs.type or not isinstance(elem, ir.IntType) or elem.width < 2:
        return None
    a, b = _ints(lhs), _ints(rhs)
    if a is not None and b is not None:
        if not isinstance(lhs.type, ir.VectorType):
            return ir.Constant(elem, fold_int(op, a[0], b[0], elem.width))
        fn, half = _FOLDED[op], 1 << (elem.width - 1)  # (v + half) mod 2^w - half: wrapped
        mask = 2 * half - 1
        return VectorConstant(elem, [((fn(x, y) + half) & mask) - half for x, y in zip(a, b)])
    for x, other in ((lhs, b), (rhs, a)):
        if any(x is k for k in keep) and other is not None and set(other) == {identity}:
            return x
    return None


#: the comparisons FoldingBuilder folds, by llvmlite's names
_COMPARED = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
             "==": operator.eq, "!=": operator.ne}


def _fold_compare(op: str, signed: bool, lhs, rhs) -> Optional[ir.Value]:
    """lhs op rhs (i1, one per lane) where both are integer constants, else None."""
    elem = getattr(lhs.type, "element", lhs.type)
    if lhs.type != rhs.type or not isinstance(elem, ir.IntType) or op not in _COMPARED:
        return None
    a, b = (((0,) * x.type.count if isinstance(x, ZeroVector) else _ints(x)) for x in (lhs, rhs))
    if a is None or b is None:
        return None
    span = 1 << elem.width

    def value(v: int) -> int:  # the integer the lane's bits stand for
        v %= span
        return v - span if signed and v >= span // 2 else v
    return _i1_constant(lhs.type, [int(_COMPARED[op](value(x), value(y))) for x, y in zip(a, b)])


def _i1_constant(like: ir.Type, bits: Sequence[int]) -> ir.Value:
    """An i1 constant (a vector where `like` is one) of the given bits."""
    if isinstance(like, ir.VectorType):
        return VectorConstant(I1, bits)
    return ir.Constant(I1, bits[0])


def _is_splat(values: Sequence[Any]) -> bool:
    """All entries the same Python number, of one type (0.0 and -0.0 differ; NaNs count
    as the same only when they are the same object, else they are listed one by one)."""
    if len(values) < 2:
        return False
    first = values[0]
    kind = type(first)
    if kind not in (int, float, bool) or values.count(first) != len(values):
        return False
    if any(type(v) is not kind for v in values):
        return False
    return kind is not float or first != 0.0 or len({math.copysign(1.0, v) for v in values}) == 1


class Unsupported(Exception):
    pass


# ---- representation of values ------------------------------------------------------------
@dataclass
class Cplx:
    """A complex number (or one per lane): real and imaginary part."""

    re: ir.Value
    im: ir.Value


@dataclass
class Lanes:
    """A varying integer known up to a uniform term: lane l holds ``base + offsets[l]``
    (wrapping in the type).  Work-item ids and the loop variables of loops over them
    stay in this form, so that accesses to consecutive elements are found at compile
    time (a plain vector load instead of a gather).  ``base`` None means 0."""

    base: Optional[ir.Value]
    offsets: Tuple[int, ...]
    type: ir.IntType

    def consecutive(self) -> bool:
        first = self.offsets[0]
        return all(o - first == k for k, o in enumerate(self.offsets))


IndexLike = Union[int, ir.Value, Lanes]


@dataclass
class MemVal:
    """A memref: data pointer (scalar or per lane), sizes and strides (int when static)."""

    ptr: ir.Value
    shape: List[IndexLike]
    stride: List[IndexLike]
    type: MemrefType


@dataclass
class GroupVal:
    ptrs: ir.Value
    dopes: ir.Value
    count: ir.Value
    assoc: ir.Value
    type: GroupType


def is_vec(x) -> bool:
    return isinstance(x, Lanes) or isinstance(getattr(x, "type", None), ir.VectorType)


def parts(x) -> list:
    if isinstance(x, Cplx):
        return [x.re, x.im]
    mats = getattr(x, "mats", None)  # a coopmatrix (CoopVal)
    if mats is not None:
        return [p for m in mats for p in parts(m)]
    return [x]


def mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise AssertionError(t)


@dataclass
class CoopVal:
    """A coopmatrix: per subgroup, the matrix as a vector of M*N components (column-major;
    ``coop.py`` describes the representation)."""

    mats: List[Any]  # G entries: ir vector or Cplx of vectors
    type: CoopMatrixType


class HeldMatrix:
    """A coopmatrix result still held outside LLVM values (``amx.TileResult``: in AMX tile
    registers after a loop); ``store(cg, inst)`` writes it for a cooperative_matrix_store."""

    def store(self, cg, inst) -> None:
        raise NotImplementedError
