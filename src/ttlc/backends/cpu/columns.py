"""Coopmatrices in memory, worked on column by column in vectors of the machine's width.

``coop.py`` holds a subgroup's matrix as one LLVM vector of all its components.  For the
16 x 16 tiles of AMX that is up to 4096 lanes (a 32 x 32 f32 tile: 1024), which LLVM
legalises slowly: the scaling, conversion, checked loads and stores of a gemm's update
on such vectors took most of the compile time of its AMX kernels.  The AMX path keeps its
matrices in memory instead:

* ``Place``: where one subgroup's matrix of a cooperative_matrix_load or _store is in a
  memref with contiguous columns (``in_memory``), with the bounds of its checked flags:
  a column, or a piece of one, is one (masked) vector load or store there.
* ``Columns``: a matrix value as a function of (column, first row, rows) giving that
  piece as a vector: an AMX product's result stored from its tiles to the kernel's
  scratch memory, a load (read where its store writes, or copied to the scratch first),
  and the elementwise updates gemm makes of them (scale, add, cast) on the way to their
  store, each done piece by piece in a loop over the columns where the store (or an
  AMX product taking it as C) asks for it.  Pieces are at most two registers wide
  (``Columns.pieces``).  A value becomes ``Columns`` only where every use of it, and of
  what is computed from it, is such an update, a store, such a product or a yield of a
  uniform ``if`` (whose branches' buffers are merged by a phi of their addresses,
  ``merge``) (``web``): no other instruction ever sees one, so nothing else needs to
  know them.

The buffers in the scratch memory are each value's own (``private_scratch``), written
once where the value is made: a piece read later reads what was there then, whatever
the code between wrote elsewhere.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple, Union

from llvmlite import ir

from ...ir.core import Instruction, Region, Value
from ...ir.types import CoopMatrixType
from . import jit
from .amx_products import runs_on_amx
from .arith import binary, convert
from .coop import concat, first_lane, memref_in, uniform_in
from .coop_memory import emit_store
from .memory import _masked_store
from .scratch import at, column_loop, private_scratch
from .values import I1, I8, I32, I64, LLTYPE, CoopVal, HeldMatrix, VectorConstant, zero_of
from .vectors import lt_size, masked_load, splat_n


def widen(b: ir.IRBuilder, col: ir.Value, length: int) -> ir.Value:
    """The vector col zero-extended to ``length`` components."""
    rows = col.type.count
    if rows == length:
        return col
    idx = [r if r < rows else rows for r in range(length)]
    return b.shuffle_vector(col, zero_of(col.type), VectorConstant(I32, idx))


# ---- places in memrefs ----------------------------------------------------------------------
#: a column index: known at compile time, or an i64 (a loop's variable)
Column = Union[int, ir.Value]
#: (r, c) -> address of the memref's entry (r, c) relative to an access's position, and
#: the byte stride of the memref's columns
TileSource = Callable[[int, Column], Tuple[ir.Value, ir.Value]]


def i64(c: Column) -> ir.Value:
    return ir.Constant(I64, c) if isinstance(c, int) else c


def address(cg, base: ir.Value, stride: int, c: Column, offset: int) -> ir.Value:
    """base + c stride + offset (bytes): in a buffer of columns ``stride`` bytes apart."""
    b = cg.b
    if isinstance(c, int):
        return at(b, base, c * stride + offset)
    return b.gep(base, [b.add(b.mul(i64(c), ir.Constant(I64, stride)), ir.Constant(I64, offset))],
                 source_etype=I8)


class Place:
    """Where one subgroup's matrix is in memory: ``at`` (a ``TileSource`` of the memref
    at the access's position (x, y)); whether the matrix is the transpose of that block
    (an access with ``.t``: the matrix's rows are the memref's contiguous columns); and
    for a checked access, ``bounds``: (x, y, the memref's rows or None, its columns or
    None), outside which entries read as zeros (and are not written).  Rows and columns
    here are the memref's, whichever way the matrix is."""

    def __init__(self, at: TileSource, transposed: bool = False, bounds=None):
        self.at = at
        self.transposed = transposed
        self.bounds = bounds

    @staticmethod
    def in_buffer(cg, base: ir.Value, stride: int, size: int,
                  transposed: bool = False) -> "Place":
        """A matrix of ``size``-byte components in a buffer at base, its columns ``stride``
        bytes apart (unchecked)."""
        return Place(lambda r, c: (address(cg, base, stride, c, r * size),
                                   ir.Constant(I64, stride)), transposed)

    @property
    def tiles(self) -> bool:
        """Tiles can be loaded from here as they are (untransposed, unchecked)."""
        return not self.transposed and self.bounds is None

    def rows_inside(self, cg, r0: int, n: int, limit: Optional[int] = None):
        """i1 x n: which of the rows r0 .. r0 + n - 1 are below ``limit`` and inside the
        memref (None: all are)."""
        b = cg.b
        ok = None
        if limit is not None and r0 + n > limit:
            ok = VectorConstant(I1, [r0 + i < limit for i in range(n)])
        if self.bounds is not None and self.bounds[2] is not None:
            x, s0 = self.bounds[0], self.bounds[2]
            r = b.add(splat_n(cg, b.add(x, ir.Constant(I64, r0)), n),
                      VectorConstant(I64, list(range(n))))
            inside = _below(b, r, splat_n(cg, s0, n))
            ok = inside if ok is None else b.and_(ok, inside)
        return ok

    def column_inside(self, cg, c: Column) -> Optional[ir.Value]:
        """i1: column c is inside the memref (None: it is)."""
        if self.bounds is None or self.bounds[3] is None:
            return None
        y, s1 = self.bounds[1], self.bounds[3]
        return _below(cg.b, cg.b.add(y, i64(c)), s1)

    def column(self, cg, elem: ir.Type, c: Column, rows: int, length: int,
               row_mask=False) -> ir.Value:
        """Rows 0 .. rows - 1 of column c, zero-extended to ``length`` components; zeros
        outside the memref where the access is checked (``row_mask``: the rows'
        ``rows_inside``, where already made)."""
        if row_mask is False:
            row_mask = self.rows_inside(cg, 0, rows)
        mask = _both(cg, row_mask, self.column_inside(cg, c), rows)
        return widen(cg.b, masked_load(cg, elem, self.at(0, c)[0], mask, rows), length)

    def staged(self, cg, elem: ir.Type, cols: int, rows: int, length: int, dst: ir.Value,
               padded: int = 0) -> "Place":
        """Columns 0 .. cols - 1 (rows 0 .. rows - 1 of each, zeros past them and outside
        the memref) copied to dst as columns of ``length`` components, in a loop, then
        zero columns up to ``padded``: the unchecked ``Place`` of the copy, transposed as
        this one (a checked operand of AMX products is staged so, then read as an
        unchecked one)."""
        b = cg.b
        size = lt_size(elem)
        row_mask = self.rows_inside(cg, 0, rows)
        column_loop(cg, cols, lambda c: b.store(
            self.column(cg, elem, c, rows, length, row_mask),
            address(cg, dst, length * size, c, 0), align=size))
        for c in range(cols, padded):
            b.store(zero_of(ir.VectorType(elem, length)), at(b, dst, c * length * size),
                    align=size)
        return Place.in_buffer(cg, dst, length * size, size, self.transposed)


def _below(b: ir.IRBuilder, i: ir.Value, size: ir.Value) -> ir.Value:
    """0 <= i < size for a memref's size (never negative): one unsigned compare, where a
    negative i is above every size."""
    return b.icmp_unsigned("<", i, size)


def _both(cg, rows: Optional[ir.Value], column: Optional[ir.Value], n: int):
    """The mask of rows where the column is inside (None: every lane)."""
    if column is None:
        return rows
    column = splat_n(cg, column, n)
    return column if rows is None else cg.b.and_(rows, column)


def in_memory(cg, access: Instruction, elem: str, g: int,
              transposed: bool = False) -> Optional[Place]:
    """Where subgroup g's matrix of the cooperative_matrix_load/store ``access`` is in
    memory (a ``Place``): when every work-item is active, the kernel is not in checked
    mode (there every access goes through ``coop_memory._access``, which checks it), the
    access is on ``elem`` components, untransposed (or ``transposed`` allowed), through a
    memref with unit row stride (its columns are contiguous: the rows of their transpose,
    a tile's rows).  None otherwise."""
    component = access.slots["tensor"].type.element
    is_t = access.modifier("ta") == "t"
    checked = access.modifier("checked")
    if (cg.mask is not None or cg.checked or component.name != elem
            or (is_t and not transposed)):
        return None
    lane = ir.Constant(I32, g * cg.S)
    m = memref_in(cg, cg.get(access.slots["tensor"]), lane)
    if m.stride[0] != 1:
        return None
    b = cg.b
    x = uniform_in(cg, cg.get(access.slots["x"]), lane)
    y = uniform_in(cg, cg.get(access.slots["y"]), lane)
    st1 = cg.ival(m.stride[1])
    size = ir.Constant(I64, component.size)
    stride = b.mul(st1, size)
    # the access's position, once: a column's address is one multiply and add from it
    origin = b.gep(m.ptr, [b.mul(b.add(x, b.mul(y, st1)), size)], source_etype=I8)

    def at_(r0: int, c0: Column) -> Tuple[ir.Value, ir.Value]:
        # column c0's address, then row r0 as a constant offset from it: in a loop over
        # the columns, one induction variable serves every row (LLVM's loop strength
        # reduction took long over one per row)
        column = origin if isinstance(c0, int) and c0 == 0 else b.gep(
            origin, [b.mul(i64(c0), stride)], source_etype=I8)
        return (at(b, column, r0 * component.size) if r0 else column), stride
    bounds = None
    if checked is not None:
        s0, s1 = (cg.ival(v) for v in m.shape)
        # the matrix's rows are the memref's columns where it is transposed
        rows, cols = ("cols_checked", "rows_checked") if is_t else ("rows_checked", "cols_checked")
        bounds = (x, y, s0 if checked in (rows, "both_checked") else None,
                  s1 if checked in (cols, "both_checked") else None)
    return Place(at_, is_t, bounds)


# ---- matrices column by column ----------------------------------------------------------------
#: (column, first row, rows) -> that piece of a subgroup's matrix, a vector
Piece = Callable[[Column, int, int], ir.Value]


class Columns(HeldMatrix):
    """A coopmatrix value as per subgroup a ``Piece`` (see the module's docstring); where
    it is a buffer as it is, ``bases`` (per subgroup) and ``stride`` (bytes from one
    column to the next)."""

    def __init__(self, t: CoopMatrixType, parts: List[Piece],
                 bases: Optional[List[ir.Value]] = None, stride: int = 0):
        self.type = t
        self.parts = parts
        self.bases = bases
        self.stride = stride

    @staticmethod
    def in_buffers(cg, t: CoopMatrixType, bases: List[ir.Value], stride: int) -> "Columns":
        """The matrices at bases (one per subgroup), column-major, ``stride`` bytes from
        one column to the next."""
        lt = LLTYPE[t.component.name]
        size = lt_size(lt)

        def part(base: ir.Value) -> Piece:
            return lambda c, r0, n: cg.b.load(address(cg, base, stride, c, r0 * size),
                                              typ=ir.VectorType(lt, n), align=size)
        return Columns(t, [part(base) for base in bases], bases, stride)

    @staticmethod
    def of(cg, x) -> "Columns":
        """x as Columns: x itself, or a CoopVal's vectors stored to buffers."""
        if isinstance(x, Columns):
            return x
        t = x.type
        size = lt_size(LLTYPE[t.component.name])
        bases = []
        for v in x.mats:
            bases.append(private_scratch(cg, t.rows * t.cols * size))
            cg.b.store(v, bases[-1], align=size)
        return Columns.in_buffers(cg, t, bases, t.rows * size)

    def pieces(self, registers: int = 2) -> List[Tuple[int, int]]:
        """(first row, rows) of the pieces of a column: two registers of f32 (or of the
        component where wider) each, which LLVM splits in two without effort (a column
        of 32 f32 in one piece: the update loops' code was 0.9x as long to compile as
        with pieces of one register), or ``registers``."""
        lanes = registers * max(1, jit.vector_bits() // 8 // max(4, self.type.component.size))
        M = self.type.rows
        return [(r0, min(lanes, M - r0)) for r0 in range(0, M, lanes)]

    def map(self, t: CoopMatrixType, fn: Callable[..., ir.Value],
            *others: "Columns") -> "Columns":
        """The matrices of type t whose pieces are fn(g, piece) of this one's (and of
        others', passed after it)."""
        def part(g: int) -> Piece:
            srcs = [self.parts[g]] + [o.parts[g] for o in others]
            return lambda c, r0, n: fn(g, *[p(c, r0, n) for p in srcs])
        return Columns(t, [part(g) for g in range(len(self.parts))])

    def materialize(self, cg) -> CoopVal:
        """The CoopVal of coop.py's representation (a vector per subgroup)."""
        M, N = self.type.rows, self.type.cols
        return CoopVal([concat(cg, [p(c, 0, M) for c in range(N)]) for p in self.parts],
                       self.type)

    def buffers(self, cg, stride: int, cols: int) -> List[ir.Value]:
        """The matrices in buffers of ``cols`` columns ``stride`` bytes apart (what is past
        the type's rows and columns undefined): this one's own, or written to new ones
        column by column."""
        if self.bases is not None and self.stride == stride:
            return self.bases
        t = self.type
        out = [private_scratch(cg, stride * cols) for _ in self.parts]
        size = lt_size(LLTYPE[t.component.name])
        for base, part in zip(out, self.parts):
            def body(c: ir.Value, part=part, base=base) -> None:
                for r0, n in self.pieces():
                    cg.b.store(part(c, r0, n), address(cg, base, stride, c, r0 * size),
                               align=size)
            column_loop(cg, t.cols, body)
        return out

    def store(self, cg, inst: Instruction) -> None:
        """The store column by column in a loop, piece by piece (masked by its checked
        flags), or as coop.py stores where its memref has no ``Place``."""
        comp = self.type.component
        places = [in_memory(cg, inst, comp.name, g) for g in range(len(self.parts))]
        if any(p is None for p in places):
            cg.env[inst.slots["value"]] = self.materialize(cg)
            return emit_store(cg, inst)
        pieces = self.pieces()
        for place, part in zip(places, self.parts):
            row_masks = {r0: place.rows_inside(cg, r0, n) for r0, n in pieces}

            def body(c: ir.Value, place=place, part=part, row_masks=row_masks) -> None:
                inside = place.column_inside(cg, c)
                for r0, n in pieces:
                    _masked_store(cg, part(c, r0, n), place.at(r0, c)[0],
                                  _both(cg, row_masks[r0], inside, n))
            column_loop(cg, self.type.cols, body)
        return None


def stage(cg, place: Place, t: CoopMatrixType) -> ir.Value:
    """Subgroup's matrix of type t at place copied column by column to a buffer of its
    own, zeros outside the memref; the buffer's address (columns t.rows apart)."""
    lt = LLTYPE[t.component.name]
    size = lt_size(lt)
    buf = private_scratch(cg, t.rows * t.cols * size)
    # one register a piece: LLVM 22 (built with assertions) aborts on a masked load of two
    # AVX2 registers (split into two vmaskmovps) stored to the scratch ("unknown
    # LocationSize")
    pieces = Columns(t, []).pieces(registers=1)
    row_masks = {r0: place.rows_inside(cg, r0, n) for r0, n in pieces}

    def body(c: ir.Value) -> None:
        inside = place.column_inside(cg, c)
        for r0, n in pieces:
            v = masked_load(cg, lt, place.at(r0, c)[0], _both(cg, row_masks[r0], inside, n), n)
            cg.b.store(v, address(cg, buf, t.rows * size, c, r0 * size), align=size)
    column_loop(cg, t.cols, body)
    return buf


# ---- the kernel's instructions: who uses a value, which region holds one ----------------------
def users_of(cg) -> Dict[Value, List[Instruction]]:
    """The kernel's values and the instructions that use them."""
    users = getattr(cg, "kernel_users", None)
    if users is None:
        users = cg.kernel_users = {}
        for i in cg.func.body.walk():
            for v in i.operands:
                users.setdefault(v, []).append(i)
    return users


def region_of(cg, inst: Instruction) -> Optional[Region]:
    """The region of the kernel whose instruction list holds inst."""
    parents = getattr(cg, "region_parents", None)
    if parents is None:
        parents = cg.region_parents = {}

        def visit(region: Region) -> None:
            for i in region.instructions:
                parents[id(i)] = region
                for r in i.regions:
                    visit(r)
        visit(cg.func.body)
    return parents.get(id(inst))


# ---- which values are Columns ----------------------------------------------------------------
#: the elementwise instructions on matrices done piece by piece
BINARY = ("add", "sub", "mul")


def web(cg, value: Value) -> Optional[List[Instruction]]:
    """The instructions that compute from value (transitively) when each is an update
    done piece by piece (cooperative_matrix_scale of it, cast, ``BINARY`` of real float
    matrices), a cooperative_matrix_store of it, an AMX product taking it as C or a
    yield of a uniform if (its result then checked in turn), and the kernel has no
    barrier (a value held across one would have to be saved between phases); else
    None."""
    memo: Dict[Value, Optional[List[Instruction]]] = cg.__dict__.setdefault("columns_web", {})
    if value in memo:
        return memo[value]
    if "columns_barrier" not in cg.__dict__:
        cg.columns_barrier = any(i.opcode == "barrier" for i in cg.func.body.walk())
    out: Optional[List[Instruction]] = None if cg.columns_barrier else []
    todo, seen = [value], set()
    while todo and out is not None:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        t = v.type
        if not (isinstance(t, CoopMatrixType) and t.component.is_float):
            out = None
            break
        for user in users_of(cg).get(v, []):
            op = user.opcode
            if ((op == "cooperative_matrix_store" and user.slots["value"] is v)
                    or (op == "cooperative_matrix_mul_add" and user.slots["c"] is v
                        and v not in (user.slots["a"], user.slots["b"])
                        and runs_on_amx(user))):
                out.append(user)  # (a product loads its tiles from the buffer)
                continue
            if op == "yield":  # the result of a uniform if (``merge``)
                owner = owner_of(cg, user)
                if owner is None or owner.opcode != "if" or owner.slots["condition"] in cg.varying:
                    out = None
                    break
                out.append(user)
                todo.extend(r for r, y in zip(owner.results, user.operands) if y is v)
                continue
            if not ((op == "cooperative_matrix_scale" and user.slots["b"] is v)
                    or op == "cast" or op in BINARY):
                out = None
                break
            out.append(user)
            todo.append(user.results[0])
    memo[value] = out
    return out


def owner_of(cg, inst: Instruction) -> Optional[Instruction]:
    """The instruction whose region holds inst (None at the kernel's top level)."""
    owners = getattr(cg, "columns_owners", None)
    if owners is None:
        owners = cg.columns_owners = {}
        for i in cg.func.body.walk():
            for r in i.regions:
                for j in r.instructions:
                    owners[id(j)] = i
    return owners.get(id(inst))


def settle(cg, x) -> "Columns":
    """x (a coopmatrix a uniform if yields, its result only updated and stored: ``web``)
    as Columns in buffers of columns its rows apart, for ``merge``: its own buffers, or
    its pieces written to new ones here, before the branch leaves."""
    x = Columns.of(cg, x)
    stride = x.type.rows * lt_size(LLTYPE[x.type.component.name])
    return Columns.in_buffers(cg, x.type, x.buffers(cg, stride, x.type.cols), stride)


def merge(cg, values: List[Tuple["Columns", ir.Block]]) -> "Columns":
    """The result of a uniform if from what its branches yield (``settle``d, each with
    the block it leaves from): a phi of the buffers' addresses per subgroup."""
    first = values[0][0]
    phis = []
    for g in range(len(first.bases)):
        p = cg.b.phi(first.bases[g].type)
        for x, block in values:
            p.add_incoming(x.bases[g], block)
        phis.append(p)
    return Columns.in_buffers(cg, first.type, phis, first.stride)


def _scale(cg, inst: Instruction) -> Optional[Columns]:
    x = cg.raw(inst.slots["b"])
    if not isinstance(x, Columns):
        return None
    t: CoopMatrixType = inst.results[0].type
    a = cg.get(inst.slots["a"])
    scalars = [uniform_in(cg, a, first_lane(cg, g) if cg.varying_repr(a) else None, g,
                          "the scalar") for g in range(len(x.parts))]
    return x.map(t, lambda g, p: binary(cg, "mul", t.component,
                                        splat_n(cg, scalars[g], p.type.count), p))


def _cast(cg, inst: Instruction) -> Optional[Columns]:
    x = cg.raw(inst.slots["a"])
    t = inst.results[0].type
    if not isinstance(x, Columns) or not isinstance(t, CoopMatrixType):
        return None
    return x.map(t, lambda g, p: convert(cg, p, x.type.component, t.component))


def _binary(cg, inst: Instruction) -> Optional[Columns]:
    xs = [cg.raw(inst.slots[k]) for k in ("a", "b")]
    t = inst.results[0].type
    if not any(isinstance(x, Columns) for x in xs) or not isinstance(t, CoopMatrixType):
        return None
    x, y = (Columns.of(cg, v) for v in xs)
    return x.map(t, lambda g, p, q: binary(cg, inst.opcode, t.component, p, q), y)


def _load(cg, inst: Instruction) -> Optional[Columns]:
    """A load whose value meets ``Columns`` in an update (added to an AMX product's
    result) and is only updated and stored (``web``): read piece by piece where its
    store asks for them when that store writes where it reads (``_stored_in_place``),
    else copied to a buffer first (``stage``)."""
    value = inst.results[0]
    t = value.type
    uses = web(cg, value) if isinstance(t, CoopMatrixType) else None
    if not uses or not any(u.opcode in BINARY and any(
            isinstance(cg.env.get(v), Columns) for v in u.operands) for u in uses):
        return None
    G = cg.W // cg.S
    places = [in_memory(cg, inst, t.component.name, g) for g in range(G)]
    if any(p is None for p in places):
        return None
    if not _stored_in_place(cg, inst, uses):
        return Columns.in_buffers(cg, t, [stage(cg, p, t) for p in places],
                                  t.rows * t.component.size)
    lt = LLTYPE[t.component.name]
    pieces = Columns(t, []).pieces()

    def part(place: Place) -> Piece:
        row_masks = {r0: place.rows_inside(cg, r0, n) for r0, n in pieces}
        return lambda c, r0, n: masked_load(
            cg, lt, place.at(r0, c)[0], _both(cg, row_masks[r0], place.column_inside(cg, c), n), n)
    return Columns(t, [part(p) for p in places])


def _stored_in_place(cg, load: Instruction, uses: List[Instruction]) -> bool:
    """The loaded matrix, updated, is stored where it was read (the same memref, position
    and flags), later in the load's region, with nothing between but pure instructions
    and its updates: a store piece then reads each piece of it just before writing it,
    and what it reads is what the load would have read.  (The memref's columns never
    overlap, whatever its strides: a memref's modes do not overlap, which the verifier
    checks of static strides and the runtime of an argument's, ``types.stride_error``;
    and a piece reads and writes only rows inside the memref, or the access would be
    out of bounds.  Its row stride is 1, ``in_memory``.)"""
    stores = [u for u in uses if u.opcode == "cooperative_matrix_store"]
    if len(stores) != 1 or any(u.opcode == "cooperative_matrix_mul_add" for u in uses):
        return False
    store = stores[0]
    region = region_of(cg, load)
    if (region is None or region_of(cg, store) is not region
            or any(store.slots[k] is not load.slots[k] for k in ("tensor", "x", "y"))
            or any(store.modifier(m) != load.modifier(m) for m in ("checked", "ta"))):
        return False
    between = region.instructions[region.instructions.index(load) + 1:
                                  region.instructions.index(store)]
    return (all(u in between for u in uses if u is not store)
            and all(i in uses or i.opdef.pure for i in between))


#: opcode -> its emitter on Columns, giving None where the operands are not Columns (and
#: the instruction is emitted as coop.py does)
EMITTERS: Dict[str, Callable] = {
    "cooperative_matrix_scale": _scale,
    "cast": _cast,
    **dict.fromkeys(BINARY, _binary),
    "cooperative_matrix_load": _load,
}
