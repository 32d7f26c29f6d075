"""lower-coopmatrix: coopmatrix instructions become per-work-item code in the language.

On SIMT targets a work-item holds V entries of each coopmatrix, where the language's
layout puts them (``ttlc.ir.layout``).  With S the subgroup size, I = min(M, S) rows per
block, J the padded column count and B = I*J/S entries per row block, vector index
v = k*B + w of an M x N matrix holds, on the work-item with subgroup_local_id p,

    row = p rem I + k*I,   column = p div I + w*(S/I),   present iff column < N

(``NestedLayout.lane_terms`` gives these terms, ``_Lanes.entry`` turns them into code;
``rem``/``div`` disappear when I = S; padding, column >= N, occurs only when M < S).
Every instruction that acts on whole matrices in a way that is not already one vector
instruction per work-item is rewritten here into scalar code over those V entries,
using ``cooperative_matrix_extract``/``insert`` (which see exactly this layout), unless
the target's matrix unit executes it (``Target.matrix``, ``native``): a mul_add its
multiply-add instructions tile, a load, store or prefetch its block IO allows (which
asks the gcd analysis what is known of the memref's alignment, strides and the row
position).  Those stay whole for the back end.  The rewrites:

* ``cooperative_matrix_apply``: per v, the entry's row and column, extract, a copy of
  the region with %i, %j, %v bound, insert.  Where the entry may be padding the region
  runs under ``if column < N`` (padding gets zero, which insert ignores), so the region
  runs exactly once per entry.  Nested applies are lowered innermost first.
* ``cooperative_matrix_load`` / ``atomic_load``: per v, a scalar ``load`` /
  ``atomic_load`` at the memref position of the entry (rows and columns exchanged by
  ``.t``), inserted into a zero matrix.  The entry is read only where it is present and
  passes the checked flag's bounds test (``0 <= index < size`` of the memref mode the
  flag guards); elsewhere it is zero, as the instruction's semantics say.
* ``cooperative_matrix_store`` / ``atomic_store``: per v, extract and a scalar ``store`` /
  ``atomic_store`` (same scope and memory semantics) under the same guard.
* ``cooperative_matrix_atomic_add/max/min``: per v, the scalar ``atomic_add/max/min``
  under the guard; its previous value (zero where nothing is accessed) is inserted into
  the result.
* ``cooperative_matrix_mul_add``: rows(A) = rows(C) are a multiple of S, so I = S and
  the work-item holding C(r, c) also holds all of row r of A.  Each B(r, c) sits at a
  work-item and vector index known when the pass runs; ``subgroup_broadcast`` from that
  constant (hence uniform) work-item gives it to all.  D(r, c) = sum_k A(r,k) B(k,c) +
  C(r, c) is then computed per entry in C's accumulation type (f32 for f16/bf16 C,
  rounded once to C's type), and cast to D's component type.  B is broadcast one
  column at a time, so only one column of B is live at once.  Per work-item this is
  K*N broadcasts and (M/S)*N*K multiply-adds, fully unrolled (extract indices are
  constants); sums are formed in another order than a matrix product would, so
  floating-point results may differ in the last bits (reassociation).
* ``cooperative_matrix_reduce_add/max/min``: rows(A) is a multiple of S, so every
  work-item holds whole rows.  ``.row``: each work-item folds its own entries.
  ``.column``: each work-item folds the entries of a column it holds, ``subgroup_reduce``
  combines the work-items; the work-item holding column c of the 1 x N result (a
  work-item known when the pass runs) selects that total by comparing its
  subgroup_local_id.  16-bit floats accumulate in f32.
* ``cooperative_matrix_prefetch`` is removed (a hint without effect on results).

Kept whole: construct, scale, extract, insert, cast, constant and arithmetic on
coopmatrices -- each is already one vector instruction per work-item, which a backend
emits directly.  Nothing is kept for lack of expressiveness: mul_add and reduce need
data of other work-items only from work-items fixed when the pass runs (the spec's
restriction rows mod subgroup_size = 0), which ``subgroup_broadcast`` with a constant
lane and ``subgroup_reduce`` provide.

Backends run this pass through the ``lower-simt`` pipeline; the CPU and the interpreter
keep coopmatrix values whole (their pipeline does not include it).  Invoked explicitly
(``-p lower-coopmatrix``) it lowers for any target, as the reference implementation does.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

from ..analysis.gcd import GCDAnalysis
from ..diagnostics import error
from ..ir.builder import Builder
from ..ir.core import Instruction, Program, Region, Value
from ..ir.layout import MatrixLayout, layout_of
from ..ir.numerics import accumulate_type
from ..ir.rewrite import clone_instructions, replace, replace_uses
from ..ir.types import DYNAMIC, I32, INDEX, CoopMatrixType, ScalarType
from ..target import MatrixUnit
from . import PassContext
from .index_math import Bool, IndexMath, Int, known, require_sizes, set_locations


# ---- the distribution ------------------------------------------------------------------------
def layout(t: CoopMatrixType, S: int, inst: Instruction) -> MatrixLayout:
    if t.rows <= 0 or t.rows & (t.rows - 1):
        raise error(inst.loc, f"lower-coopmatrix: coopmatrix rows must be a power of two, "
                              f"got {t.rows}")
    return layout_of(t, S)


# ---- per-work-item code -------------------------------------------------------------------
class _Lanes:
    """Builds the per-work-item code replacing one instruction: the builder, folding index
    math, and the coordinates of the entries this work-item holds (emitted on first use)."""

    def __init__(self, S: int, used: Set[Value]):
        self.S = S
        #: the values the function uses (before lowering)
        self.used = used
        self.region = Region()
        self.b = Builder(self.region)
        self.m = IndexMath(self.b)
        self._memo: Dict[tuple, Int] = {}

    def _once(self, key: tuple, make: Callable[[], Int]) -> Int:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def lane(self, ty: ScalarType) -> Int:
        """subgroup_local_id as type ty."""
        if self.S == 1:
            return 0
        lid = self._once(("lid", I32), self.b.subgroup_local_id)
        return self._once(("lid", ty), lambda: self.m.cast(lid, I32, ty))

    def entry(self, lay: MatrixLayout, v: int, ty: ScalarType, row: bool = True,
              col: bool = True) -> Tuple[Optional[Int], Optional[Int], Bool]:
        """(row, column, present) of vector index v on this work-item, in type ty.

        Row and column are computed only when asked for (the column also when the entry
        may be padding); present is True unless the entry may be padding."""
        row_terms, col_terms = lay.nested.lane_terms(v)
        padded = lay.padded(v)
        r = self.coordinate(row_terms, ty) if row else None
        c = self.coordinate(col_terms, ty) if col or padded else None
        present = self.m.less_than(c, lay.cols, ty) if padded else True
        return r, c, present

    def coordinate(self, terms: Tuple[int, int, int, int], ty: ScalarType) -> Int:
        """offset + ((lane div divisor) rem tile) * scale (``NestedLayout.lane_terms``)."""
        offset, divisor, tile, scale = terms

        def per_lane() -> Int:
            if not divisor or tile == 1:
                return 0
            x = self.lane(ty)
            if divisor > 1:
                x = self.m.div(x, divisor, ty)
            if divisor * tile < self.S:
                x = self.m.rem(x, tile, ty)
            return self.m.mul(x, scale, ty) if scale != 1 else x

        base = self._once(("lane term", divisor, tile, scale, ty), per_lane)
        return self._once(("coordinate", terms, ty), lambda: self.m.add(base, offset, ty))

    # ---- small builders ------------------------------------------------------------------
    def constant(self, x: int) -> Value:
        """An i32 constant, emitted once."""
        return self._once(("i32", x), lambda: self.b.constant(x, I32))

    def cast(self, x: Value, dst: ScalarType) -> Value:
        return x if x.type == dst else self.b.cast(x, dst)

    def zero(self, t) -> Value:
        return self.b.constant(_zero(t), t)

    def guarded(self, cond: Bool, make: Callable[[], Optional[Value]],
                ty: Optional[ScalarType] = None) -> Optional[Value]:
        """make() where cond holds; with a result type, its value there and zero elsewhere."""
        if cond is True:
            return make()
        if cond is False:
            return self.zero(ty) if ty is not None else None
        op = self.b.if_(self.m.flag(cond), results=[ty] if ty is not None else [])
        with op:
            value = make()
            if ty is not None:
                self.b.yield_([value])
        if ty is None:
            return None
        with op.else_():
            self.b.yield_([self.zero(ty)])
        return op.result

    def extract(self, a: Value, v: int, ty: Optional[ScalarType] = None) -> Value:
        """Entry v of matrix a (as type ty), emitted once (always at the top level)."""
        x = self._once(("extract", a, v), lambda: self.b.cooperative_matrix_extract(
            a, v, result=a.type.component))
        return x if ty is None else self._once(("extract", a, v, ty), lambda: self.cast(x, ty))


def _zero(t):
    c = t.component if isinstance(t, CoopMatrixType) else t
    if c.is_complex:
        return 0j
    if c.is_float:
        return 0.0
    return 0


# ---- the lowerings ------------------------------------------------------------------------------
Lowering = Callable[[_Lanes, Instruction], Optional[Value]]
LOWERINGS: Dict[str, Lowering] = {}


def lowers(*opcodes: str):
    def wrap(fn: Lowering) -> Lowering:
        for op in opcodes:
            LOWERINGS[op] = fn
        return fn
    return wrap


def lower_coopmatrix(program: Program, ctx: PassContext) -> None:
    """Rewrite coopmatrix instructions into per-work-item code (extract/insert, scalar
    memory access, subgroup operations)."""
    for func in program.functions:
        first = next((i for i in func.body.walk() if i.opcode in LOWERINGS), None)
        if first is None:
            continue
        sgs, _ = require_sizes(program, func, first.loc, "lower-coopmatrix", ctx)
        used = {v for i in func.body.walk() for v in i.operands}
        replaced: Dict[Value, Value] = {}
        unit = ctx.target.matrix
        facts = GCDAnalysis(func, ctx.target) if unit.block_io is not None else None
        _lower_region(func.body, sgs, used, replaced, lambda i: native(unit, i, sgs, facts))
        # one walk for all replacements: code made meanwhile may still use old results
        replace_uses(func.body, replaced)


def _lower_region(region: Region, S: int, used: Set[Value], replaced: Dict[Value, Value],
                  keep: Callable[[Instruction], bool]) -> None:
    """Lower every instruction of the table in region, inner ones first (post-order),
    except those the target's matrix unit executes (``keep``)."""
    for inst in list(region.instructions):
        for r in inst.regions:
            _lower_region(r, S, used, replaced, keep)
        fn = LOWERINGS.get(inst.opcode)
        if fn is None or keep(inst):
            if fn is not None:
                for r in inst.regions:
                    replace_uses(r, replaced)
            continue
        for r in inst.regions:  # a region about to be copied must use the new values
            replace_uses(r, replaced)
        lanes = _Lanes(S, used)
        result = fn(lanes, inst)
        set_locations(lanes.region, inst.loc)
        if result is not None:
            replaced[inst.results[0]] = result
        replace(region, inst, lanes.region.instructions)


def native(unit: MatrixUnit, inst: Instruction, S: int,
           facts: Optional[GCDAnalysis] = None) -> bool:
    """Whether the target's matrix unit executes inst as it stands: a mul_add its
    multiply-adds tile, a load, store or prefetch (not atomic; transposed only a load)
    that its block IO allows (checked or not: a block access reads zeros and writes
    nothing out of bounds)."""
    if inst.opcode == "cooperative_matrix_mul_add":
        a, b, c = (inst.slots[s].type for s in ("a", "b", "c"))
        return unit.mul_add(a, b, c, S) is not None
    transposed = inst.modifiers.get("ta") == "t"
    if (inst.opcode not in BLOCK_IO or unit.block_io is None
            or transposed and inst.opcode != "cooperative_matrix_load"
            or inst.modifiers.get("checked") and not unit.block_io.checked
            or inst.opcode == "cooperative_matrix_prefetch" and not unit.block_io.prefetch):
        return False
    tensor = inst.slots["tensor"]
    info = facts.info(tensor) if facts is not None else None
    if info is None:
        return False
    if inst.opcode == "cooperative_matrix_prefetch":
        rows, cols = inst.attrs["rows"], inst.attrs["cols"]
    else:
        t = (inst.results[0] if inst.results else inst.slots["value"]).type
        rows, cols = t.rows, t.cols
    return unit.block_io.allows(tensor.type.element, rows, cols, transposed, S, tensor.type,
                                info.offset_gcd, info.shape_gcd[0], info.stride_gcd[1],
                                facts.gcd(inst.slots["x"]))


#: the instructions a matrix unit's block IO may execute
BLOCK_IO = ("cooperative_matrix_load", "cooperative_matrix_store", "cooperative_matrix_prefetch")


@lowers("cooperative_matrix_apply")
def _apply(e: _Lanes, inst: Instruction) -> Value:
    t: CoopMatrixType = inst.results[0].type
    lay = layout(t, e.S, inst)
    body = inst.regions[0]
    arg_i, arg_j, arg_v = body.args
    if not body.instructions or body.instructions[-1].opcode != "yield":
        raise error(inst.loc, "lower-coopmatrix: the region of cooperative_matrix_apply must "
                              "end with yield")
    used = {v for i in body.walk() for v in i.operands}
    a: Value = inst.slots["a"]
    b = e.b
    current = a
    for v in range(lay.registers):
        row, col, present = e.entry(lay, v, I32, row=arg_i in used, col=arg_j in used)
        mapping: Dict[Value, Value] = {}
        if arg_i in used:
            mapping[arg_i] = e.m.value(row, I32)
        if arg_j in used:
            mapping[arg_j] = e.m.value(col, I32)
        if arg_v in used:
            mapping[arg_v] = e.extract(a, v)

        def region_copy(mapping=mapping) -> Value:
            insts = clone_instructions(body.instructions, mapping)
            for x in insts[:-1]:
                b.insertion_region.append(x)
            return insts[-1].slots["values"][0]
        value = e.guarded(present, region_copy, t.component)
        current = b.cooperative_matrix_insert(value, current, v, result=t)
    return current


# ---- memory -------------------------------------------------------------------------------------
def _position(e: _Lanes, inst: Instruction, lay: MatrixLayout, v: int) -> Tuple[List[Value], Bool]:
    """Memref indices of entry v on this work-item and whether it is accessed.

    Entry (i, j) is at M[x + i, y + j], with ``.t`` at M[x + j, y + i]; it is accessed if
    it is present (not padding) and within the bounds its checked flag asks for:
    rows_checked tests the memref mode the coopmatrix row index runs along, cols_checked
    the one of the column index.  Index and test of a row (column) are shared by the
    entries of that row (column)."""
    row, col, ok = e.entry(lay, v, INDEX)
    row_terms, col_terms = lay.nested.lane_terms(v)
    row_mode, col_mode = (1, 0) if inst.modifier("ta") == "t" else (0, 1)
    checked = inst.modifier("checked")
    check_row = checked in ("rows_checked", "both_checked")
    check_col = checked in ("cols_checked", "both_checked")
    index: List[Value] = [None, None]
    for mode, coord, terms, check in ((row_mode, row, row_terms, check_row),
                                      (col_mode, col, col_terms, check_col)):
        index[mode], inside = e._once(("position", mode, terms),
                                      lambda: _bounded(e, inst, mode, coord, check))
        ok = e.m.and_(ok, inside)
    return index, ok


def _bounded(e: _Lanes, inst: Instruction, mode: int, coord: Int, check: bool):
    """(position + coord as a value, 0 <= it < size of the mode, or True unchecked)."""
    m = e.m
    pos = inst.slots["xy"[mode]]
    index = m.add(pos, coord, INDEX)
    inside: Bool = True
    if check:
        p = known(pos)
        if p is None or p < 0:  # coord >= 0: only a negative position can leave below
            inside = m.less_equal(0, index, INDEX)
        size = e._once(("size", mode), lambda: _size(e, inst.slots["tensor"], mode))
        inside = m.and_(inside, m.less_than(index, size, INDEX))
    return m.value(index, INDEX), inside


def _size(e: _Lanes, tensor: Value, mode: int) -> Int:
    """The size of a memref mode: known for a static mode, else a ``size`` instruction."""
    n = tensor.type.shape[mode]
    return e.b.size(tensor, mode) if n is DYNAMIC else n


def _atomic_modifiers(inst: Instruction) -> dict:
    return {k: inst.modifiers[k] for k in ("scope", "semantics") if k in inst.modifiers}


@lowers("cooperative_matrix_load", "cooperative_matrix_atomic_load")
def _load(e: _Lanes, inst: Instruction) -> Value:
    t: CoopMatrixType = inst.results[0].type
    lay = layout(t, e.S, inst)
    tensor = inst.slots["tensor"]
    atomic = inst.opcode == "cooperative_matrix_atomic_load"
    current = e.zero(t)
    for v in range(lay.registers):
        index, ok = _position(e, inst, lay, v)
        if atomic:
            value = e.guarded(ok, lambda: e.b.atomic_load(tensor, *index,
                                                          **_atomic_modifiers(inst)), t.component)
        else:
            value = e.guarded(ok, lambda: e.b.load(tensor, *index), t.component)
        current = e.b.cooperative_matrix_insert(value, current, v, result=t)
    return current


@lowers("cooperative_matrix_store", "cooperative_matrix_atomic_store")
def _store(e: _Lanes, inst: Instruction) -> None:
    a: Value = inst.slots["value"]
    lay = layout(a.type, e.S, inst)
    tensor = inst.slots["tensor"]
    atomic = inst.opcode == "cooperative_matrix_atomic_store"
    for v in range(lay.registers):
        index, ok = _position(e, inst, lay, v)
        x = e.extract(a, v)
        if atomic:
            e.guarded(ok, lambda: e.b.atomic_store(x, tensor, *index, **_atomic_modifiers(inst)))
        else:
            e.guarded(ok, lambda: e.b.store(x, tensor, *index))
    return None


@lowers("cooperative_matrix_atomic_add", "cooperative_matrix_atomic_max",
        "cooperative_matrix_atomic_min")
def _atomic_update(e: _Lanes, inst: Instruction) -> Optional[Value]:
    a: Value = inst.slots["value"]
    t: CoopMatrixType = a.type
    lay = layout(t, e.S, inst)
    tensor = inst.slots["tensor"]
    scalar_op = inst.opcode[len("cooperative_matrix_"):]
    result = inst.results[0]
    used = result in e.used
    current = e.zero(inst.results[0].type) if used else None
    for v in range(lay.registers):
        index, ok = _position(e, inst, lay, v)
        x = e.extract(a, v)
        old = e.guarded(ok, lambda: e.b.op(scalar_op, x, tensor, *index,
                                           **_atomic_modifiers(inst)),
                        t.component if used else None)
        if used:
            current = e.b.cooperative_matrix_insert(old, current, v, result=result.type)
    return current


@lowers("cooperative_matrix_prefetch")
def _prefetch(e: _Lanes, inst: Instruction) -> None:
    return None  # a hint: dropped


# ---- work across the subgroup ---------------------------------------------------------------
def _rows_multiple(inst: Instruction, t: CoopMatrixType, S: int, what: str) -> MatrixLayout:
    lay = layout(t, S, inst)
    if t.rows % S:
        raise error(inst.loc, f"lower-coopmatrix: '{inst.opcode}' needs the rows of {what} "
                              f"({t.rows}) to be a multiple of the subgroup size {S}")
    return lay


@lowers("cooperative_matrix_mul_add")
def _mul_add(e: _Lanes, inst: Instruction) -> Value:
    A, B, C = (inst.slots[s] for s in ("a", "b", "c"))
    ta, tb, tc = A.type, B.type, C.type
    td: CoopMatrixType = inst.results[0].type
    S, b = e.S, e.b
    la = _rows_multiple(inst, ta, S, "A")
    lb, lc, ld = layout(tb, S, inst), layout(tc, S, inst), layout(td, S, inst)
    acc = accumulate_type(tc.component)
    blocks, inner, N = ta.rows // S, ta.cols, tc.cols
    current = e.zero(td)
    for c in range(N):
        column = []  # B(:, c), the same value on every work-item
        for r in range(inner):
            lane, v = lb.locate(r, c)
            x = e.extract(B, v)
            if S > 1:
                x = b.subgroup_broadcast(x, e.constant(lane))
            column.append(e.cast(x, acc))
        for k in range(blocks):  # this work-item's row k*S + p of A, C and D
            total = None
            for r in range(inner):
                p = b.mul(e.extract(A, la.locate(k * S, r)[1], acc), column[r])
                total = p if total is None else b.add(total, p)
            total = b.add(total, e.extract(C, lc.locate(k * S, c)[1], acc))
            d = e.cast(e.cast(total, tc.component), td.component)
            current = b.cooperative_matrix_insert(d, current, ld.locate(k * S, c)[1], result=td)
    return current


@lowers("cooperative_matrix_reduce_add", "cooperative_matrix_reduce_max",
        "cooperative_matrix_reduce_min")
def _reduce(e: _Lanes, inst: Instruction) -> Value:
    A: Value = inst.slots["a"]
    ta: CoopMatrixType = A.type
    tr: CoopMatrixType = inst.results[0].type
    S, b = e.S, e.b
    la = _rows_multiple(inst, ta, S, "the operand")
    lr = layout(tr, S, inst)
    op = inst.opcode.rsplit("_", 1)[1]
    acc = accumulate_type(ta.component)
    blocks, N = ta.rows // S, ta.cols

    def fold(values: List[Value]) -> Value:
        out = values[0]
        for x in values[1:]:
            out = b.op(op, out, x)
        return out

    def a(k: int, c: int) -> Value:  # A(k*S + p, c) on work-item p, in the accumulation type
        return e.extract(A, la.locate(k * S, c)[1], acc)

    current = e.zero(tr)
    if inst.modifier("mode") == "row":
        for k in range(blocks):  # row k*S + p is this work-item's, entry k of the result
            total = fold([a(k, c) for c in range(N)])
            current = b.cooperative_matrix_insert(e.cast(total, tr.component), current,
                                                  lr.locate(k * S, 0)[1], result=tr)
        return current
    totals = []  # column sums, the same on every work-item
    for c in range(N):
        part = fold([a(k, c) for k in range(blocks)])
        totals.append(b.op(f"subgroup_reduce_{op}", part) if S > 1 else part)
    for v in range(lr.registers):  # the work-item holding column c at v takes totals[c]
        held = [(c, lr.locate(0, c)[0]) for c in range(N) if lr.locate(0, c)[1] == v]
        value = totals[held[0][0]]
        for c, lane in held[1:]:
            mine = e._once(("lane is", lane), lambda: e.m.equal(e.lane(I32), lane, I32))
            value = _select(e, mine, totals[c], value)
        current = b.cooperative_matrix_insert(e.cast(value, tr.component), current, v, result=tr)
    return current


def _select(e: _Lanes, cond: Bool, yes: Value, no: Value) -> Value:
    """cond ? yes : no (the language has no select: an if yielding one of them)."""
    if cond is True:
        return yes
    if cond is False:
        return no
    op = e.b.if_(e.m.flag(cond), results=[yes.type])
    with op:
        e.b.yield_([yes])
    with op.else_():
        e.b.yield_([no])
    return op.result
