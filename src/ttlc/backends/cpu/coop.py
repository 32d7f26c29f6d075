"""Coopmatrix instructions on the CPU.

A coopmatrix value (``CoopVal``) holds, for each of the G subgroups of the work-group, the
whole M x N matrix as one LLVM vector of M*N components in column-major order (entry
``c * M + r``; complex matrices as a (re, im) pair of such vectors).  A matrix made in
uniform code (a constant, a construct from a uniform number) holds G equal copies.

* Load, store, the atomics and prefetch (``coop_memory.py``) are executed per subgroup
  when any of its work-items is active, at the position and through the memref of the
  subgroup's first active work-item (the operands must be dynamically uniform).
* mul_add is an outer-product microkernel: ``D[:, j] = C[:, j] + sum_k A[:, k] B[k, j]``
  on M-lane vectors, one FMA per (k, j) with B's entry broadcast, in C's type (16-bit
  floats in f32), then cast to D's type.  bf16 x bf16 runs on AMX tiles (``amx.py``) or
  on the same microkernel with vdpbf16ps on pairs of k (``dpbf16.py``) where the CPU
  has them (``Microkernel``: the loop is shared, the steps differ; ``mul_add.py`` chooses).
* Work-item views (extract, insert, apply: ``coop_items.py``) and the merging of
  divergent control flow go through the distribution of ``ttlc.ir.layout``: each is a
  shuffle with a constant mask between the W-lane vectors of work-items and the matrices.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from llvmlite import ir

from ...ir.layout import layout_of
from ...ir.numerics import accumulate_type
from ...ir.core import Instruction
from ...ir.ops import ARITH_BINARY, ARITH_UNARY
from ...ir.types import CoopMatrixType, ScalarType
from ...runtime.findings import E_COOP_DIV_ZERO, E_PARTIAL, E_UNIFORM, UNIFORM_OPERANDS
from .arith import binary, convert, unary
from .arith import constant as scalar_constant
from .function import FunctionCodegen
from .memory import lt_size
from .values import I1, I32, I64, LLTYPE, CoopVal, Cplx, Lanes, MemVal, VectorConstant, is_vec, \
    parts, zero_of
from .vectors import column_group, concat, splat_n


def _vt(t: CoopMatrixType) -> ir.VectorType:
    return ir.VectorType(LLTYPE[t.component.name], t.rows * t.cols)


def _consts(values, t: ir.Type = I32) -> ir.Constant:
    return VectorConstant(t, [int(v) for v in values])


def _map(fn, *xs):
    """fn on every part (re/im) of the given per-subgroup matrices."""
    if isinstance(xs[0], Cplx):
        return Cplx(fn(*[x.re for x in xs]), fn(*[x.im for x in xs]))
    return fn(*xs)


def shuffle(cg: FunctionCodegen, x, y, indices) -> Any:
    """shufflevector on plain or complex vectors."""
    mask = _consts(indices)
    if isinstance(x, Cplx):
        return Cplx(cg.b.shuffle_vector(x.re, y.re, mask), cg.b.shuffle_vector(x.im, y.im, mask))
    return cg.b.shuffle_vector(x, y, mask)


def zero_mat(t: CoopMatrixType):
    z = zero_of(_vt(t))
    return Cplx(z, z) if t.component.is_complex else z


# ---- per-subgroup operands --------------------------------------------------------------------
def subgroups(cg: FunctionCodegen) -> int:
    return cg.W // cg.S


def first_lane(cg: FunctionCodegen, g: int) -> ir.Value:
    """Lane (i32) of the first active work-item of subgroup g (its first one if none is)."""
    S = cg.S
    if cg.mask is None:
        return ir.Constant(I32, g * S)
    b = cg.b
    sub = b.shuffle_vector(cg.mask, cg.mask, _consts(range(g * S, g * S + S)))
    first = cg.first_lane(sub)
    first = b.select(b.icmp_unsigned("==", first, ir.Constant(I32, S)), ir.Constant(I32, 0), first)
    return b.add(first, ir.Constant(I32, g * S))


def whole_subgroups(cg: FunctionCodegen) -> None:
    """Checked code: a coopmatrix instruction is executed by whole subgroups (uniform
    control flow); report (E_PARTIAL) a subgroup of which only some work-items are active,
    naming its first inactive one, as the interpreter's ``coop_subgroups`` does."""
    if not cg.checked or cg.mask is None:
        return
    b, S = cg.b, cg.S
    ones = VectorConstant(I1, [1] * S)
    saved, cg.mask = cg.mask, None
    for g in range(subgroups(cg)):
        sub = b.shuffle_vector(saved, saved, _consts(range(g * S, g * S + S)))
        partial = b.and_(cg.reduce_or(sub), b.xor(cg.reduce_and(sub), ir.Constant(I1, 1)))
        inactive = b.add(cg.first_lane(b.xor(sub, ones)), ir.Constant(I32, g * S))
        cg.fail_if(partial, E_PARTIAL, [ir.Constant(I64, g)], lane=inactive)
    cg.mask = saved


def subgroup_active(cg: FunctionCodegen, g: int) -> Optional[ir.Value]:
    """i1: does any work-item of subgroup g execute (None: all do)."""
    if cg.mask is None:
        return None
    sub = cg.b.shuffle_vector(cg.mask, cg.mask, _consts(range(g * cg.S, g * cg.S + cg.S)))
    return cg.reduce_or(sub)


def uniform_in(cg: FunctionCodegen, x, lane: Optional[ir.Value], g: int = 0,
               what: Optional[str] = None):
    """The value of a (dynamically uniform) operand for subgroup g: that of its work-item
    ``lane``.  Checked code named ``what`` the operand tests that the active work-items
    of the subgroup agree (``check_uniform``)."""
    if isinstance(x, Lanes):
        x = cg.vector(x)
    if isinstance(x, Cplx):
        return Cplx(uniform_in(cg, x.re, lane, g, what), uniform_in(cg, x.im, lane, g, what))
    if is_vec(x):
        if what is not None and cg.checked:
            check_uniform(cg, x, lane, g, what)
        return cg.b.extract_element(x, lane)
    return x


def check_uniform(cg: FunctionCodegen, x: ir.Value, lane: ir.Value, g: int, what: str) -> None:
    """Checked code: report (E_UNIFORM) an active work-item of subgroup g whose value of x
    differs from that of work-item ``lane`` (values compared bit for bit)."""
    b = cg.b
    # how the message shows the values: integers, or the bits of a float of this many bytes
    float_bytes = 0
    if isinstance(x.type.element, ir.PointerType):
        x = b.ptrtoint(x, cg.vt(I64))
    elif not isinstance(x.type.element, ir.IntType):
        float_bytes = lt_size(x.type.element)
        x = b.bitcast(x, ir.VectorType(ir.IntType(float_bytes * 8), x.type.count))
    ref = b.extract_element(x, lane)
    differ = b.icmp_unsigned("!=", x, cg.splat(ref))
    inside = VectorConstant(I1, [g * cg.S <= k < (g + 1) * cg.S for k in range(cg.W)])
    cg.fail_if(b.and_(differ, inside), E_UNIFORM,
               [ir.Constant(I64, UNIFORM_OPERANDS.index(what)), x, ref,
                b.sub(lane, ir.Constant(I32, g * cg.S)), ir.Constant(I64, g),
                ir.Constant(I64, float_bytes)])


def memref_in(cg: FunctionCodegen, m: MemVal, lane, g: int = 0,
              what: Optional[str] = None) -> MemVal:
    pick = lambda v: v if isinstance(v, int) else uniform_in(cg, v, lane, g, what)  # noqa: E731
    return MemVal(uniform_in(cg, m.ptr, lane, g, what), [pick(s) for s in m.shape],
                  [pick(s) for s in m.stride], m.type)


def owner_mask(cg: FunctionCodegen, t: CoopMatrixType, lane_mask: ir.Value, g: int) -> ir.Value:
    """Per component of subgroup g's matrix: is the work-item holding it in lane_mask?"""
    owner = layout_of(t, cg.S).owners  # rows x cols
    idx = [g * cg.S + int(owner[r, c]) for c in range(t.cols) for r in range(t.rows)]
    if not is_vec(lane_mask):
        return splat_n(cg, lane_mask, t.rows * t.cols)
    return cg.b.shuffle_vector(lane_mask, lane_mask, _consts(idx))


def select(cg: FunctionCodegen, cond, a: CoopVal, c: CoopVal) -> CoopVal:
    out = []
    for g, (x, y) in enumerate(zip(a.mats, c.mats)):
        m = owner_mask(cg, a.type, cond, g)
        out.append(_map(lambda p, q: cg.b.select(m, p, q), x, y))
    return CoopVal(out, a.type)


# ---- values ---------------------------------------------------------------------------------------
def constant(cg: FunctionCodegen, t: CoopMatrixType, value) -> CoopVal:
    x = scalar_constant(t.component, value)
    mat = splat_n(cg, x, t.rows * t.cols)
    return CoopVal([mat] * subgroups(cg), t)


def emit_construct(cg: FunctionCodegen, inst: Instruction):
    t: CoopMatrixType = inst.results[0].type
    a = cg.get(inst.slots["a"])
    mats = [splat_n(cg, uniform_in(cg, a, first_lane(cg, g) if cg.varying_repr(a) else None,
                                   g, "the number"), t.rows * t.cols)
            for g in range(subgroups(cg))]
    return CoopVal(mats, t)


def emit_scale(cg: FunctionCodegen, inst: Instruction):
    t: CoopMatrixType = inst.results[0].type
    a = cg.get(inst.slots["a"])
    m: CoopVal = cg.get(inst.slots["b"])
    out = []
    for g in range(len(m.mats)):
        s = uniform_in(cg, a, first_lane(cg, g) if cg.varying_repr(a) else None, g, "the scalar")
        out.append(by_columns(cg, m, g, lambda x, s=s: binary(
            cg, "mul", t.component, splat_n(cg, s, parts(x)[0].type.count), x)))
    return CoopVal(out, t)


#: the elementwise operations done on two matrices' accumulators piece by piece
#: (``elementwise_binary``): the padding of partial pieces stays finite
PIECEWISE_OPS = ("add", "sub", "mul")


def elementwise_binary(cg: FunctionCodegen, op: str, t: CoopMatrixType, a: CoopVal, c: CoopVal):
    """a op c.  Two real matrices of accumulators in the same pieces (the sets of a K loop
    added after it, ``matmul``) are added piece by piece, a register each: joined into
    one vector of the tile, a 4 x 3 f64 tile's sum was 12 lanes, which LLVM made two
    columns to a zmm, and then the FMAs before it (f64 4x3x15 with B shared: a
    vinsertf32x4 and a vpermpd for each of B's broadcasts, 0.82 of LIBXSMM's speed)."""
    if (op in PIECEWISE_OPS and isinstance(a, PiecesVal) and isinstance(c, PiecesVal)
            and a.type == c.type == t and not t.component.is_complex
            and a.kernel.pieces(t.rows) == c.kernel.pieces(t.rows)
            and all(x.type.element == LLTYPE[t.component.name]
                    for acc in a.pieces + c.pieces for x in acc.values())):
        return PiecesVal(cg, a.kernel, [
            {key: binary(cg, op, t.component, x, y[key]) for key, x in acc.items()}
            for acc, y in zip(a.pieces, c.pieces)], t)
    return CoopVal([by_columns(cg, a, g, lambda x, y: binary(cg, op, t.component, x, y), c)
                    for g in range(len(a.mats))], t)


def cast(cg: FunctionCodegen, x: CoopVal, dst: CoopMatrixType) -> CoopVal:
    return CoopVal([by_columns(cg, x, g, lambda v: convert(cg, v, x.type.component,
                                                          dst.component))
                    for g in range(len(x.mats))], dst)


def by_columns(cg: FunctionCodegen, x: CoopVal, g: int, fn, *others: CoopVal):
    """fn on subgroup g's matrix x (and others of its shape): on the whole vector where it
    has at most ``widest()`` components or the kernel is not ``narrow``, else on groups of
    whole columns of at most that many (one column where a column is longer), the results
    joined (``concat``).  The columns are those a load or a mul_add made (``column_of``;
    a join taken apart again is its pieces, ``FoldingBuilder``).  A gemm's update (scale,
    conversion from and to 16 bits, addition) on a whole tile was one vector of up to
    1024 lanes, which LLVM's instruction selection took apart slowly where they were half
    (no native arithmetic without AVX512-FP16: an f16 37 x 21 update with beta in 64 x 3
    tiles took 100 ms)."""
    per = column_group(cg, x.type)
    if not per:
        return fn(x.mats[g], *[o.mats[g] for o in others])
    return concat(cg, [fn(*[column_block(cg, v, g, c0, per) for v in (x,) + others])
                       for c0 in range(0, x.type.cols, per)])


def column_block(cg: FunctionCodegen, v: CoopVal, g: int, c0: int, n: int):
    """Columns c0 .. c0 + n - 1 of subgroup g's matrix v, as one vector."""
    if n == 1 or isinstance(v, PiecesVal):
        return concat(cg, [column_of(cg, v, g, c) for c in range(c0, c0 + n)])
    M = v.type.rows
    return shuffle(cg, v.mats[g], v.mats[g], range(c0 * M, (c0 + n) * M))


# ---- memory -----------------------------------------------------------------------------------------
def pinned(cg: FunctionCodegen, p: ir.Value) -> ir.Value:
    """p, as a value LLVM cannot see through (an empty inline asm), so it stays one
    register: otherwise x86 folds base + index into every access of a tile, and an FMA
    with a base + index memory operand takes two micro-ops instead of one (unlaminated),
    which made the 16x16 microkernel a third slower.  LLVM does not merge two such
    values, so only tiles no other subgroup also reads get one."""
    return cg.b.asm(ir.FunctionType(p.type, [p.type]), "", "=r,0", [p], False)


def _column(cg: FunctionCodegen, v, c: int, M: int):
    return shuffle(cg, v, v, range(c * M, c * M + M))


# ---- arithmetic -----------------------------------------------------------------------------------
def _fma(cg: FunctionCodegen, t: ScalarType, a, c, acc):
    """a * c + acc on vectors of t: one fused multiply-add for real floats (rounded once,
    as the FMA units compute it), a product and a sum otherwise."""
    if t.is_float:
        return cg.intrinsic("llvm.fmuladd", a.type, [a, c, acc], [a.type])
    return binary(cg, "add", t, binary(cg, "mul", t, a, c), acc)


class Microkernel:
    """How mul_add computes its products: the register-blocked outer-product loop of
    ``microkernel`` is shared, the operands and the step are the kernel's.

    The accumulator's columns are split into pieces of rows (one vector each, padded with
    zeros); a block of pieces and columns is updated over all of K, step by step (``k_step``
    entries of K each, in order), with A's operand of the step for each piece and B's
    operand of the step for each column; a scheduling barrier separates the blocks.  This
    base is the FMA kernel: the whole column is one piece, all columns one block (LLVM
    keeps them in registers), each step one FMA of a column of A (in the accumulation
    type) and a broadcast entry of B.  Pieces hold the first ``rows`` of a column where
    nothing observes the others (``fma_kernel``); they are not computed."""

    #: entries of K per step
    k_step = 1
    #: whether a step takes B's operands for all columns before A's (``StreamedA``)
    b_first = False

    def __init__(self, rows: Optional[int] = None, lanes: int = 1):
        self.rows = rows  # the rows computed, the first of each column (None: all)
        self.lanes = lanes  # a register's (rows past the last whole one: a narrower piece)

    def pieces(self, M: int) -> List[Tuple[int, int]]:
        """The pieces (first row, lanes) of an accumulator column: where not all rows are
        computed, equal powers of two (LLVM's code for vectors of 24 f64 was 5x longer),
        then the narrower piece of the rows past the last whole register (``fma_kernel``)."""
        rows = min(M, self.rows or M)
        tail = rows & (self.lanes - 1) if rows < M else 0
        whole = rows - tail
        return ([(r, whole & -whole) for r in range(0, whole, whole & -whole or 1)]
                + ([(whole, tail)] if tail else []))

    def blocks(self, pieces: int, N: int) -> List[Tuple[range, range]]:
        """The (pieces, columns) whose accumulators are updated together over all of K."""
        return [(range(pieces), range(N))]

    def prepare(self, cg: FunctionCodegen, a, t: ScalarType, cd: ScalarType):
        """A's matrix as the operands are taken from it."""
        return convert(cg, a, t, cd)

    def a_operand(self, cg: FunctionCodegen, a, M: int, K: int, k: int, r0: int, lanes: int):
        return _rows(cg, a, k, M, r0, lanes)

    def b_operand(self, cg: FunctionCodegen, b, t: ScalarType, K: int, k: int, j: int,
                  cd: ScalarType):
        # B's entry is taken in its own type and converted as a scalar: LLVM 22 for x86
        # (AVX-512) miscompiles broadcasts of lanes of a sign-extended masked gather
        # (i8 -> i64: entry B[1, j] read as B[0, j])
        bkj = _map(lambda v: cg.b.extract_element(v, ir.Constant(I32, j * K + k)), b)
        return convert(cg, bkj, t, cd)

    def step(self, cg: FunctionCodegen, cd: ScalarType, acc, a_op, b_op, lanes: int):
        return _fma(cg, cd, a_op, splat_n(cg, b_op, lanes), acc)


def scheduling_barrier(cg: FunctionCodegen) -> None:
    """An empty inline asm that may touch memory: no memory access moves across it."""
    cg.b.asm(ir.FunctionType(ir.VoidType(), []), "", "~{memory}", [], True)


def _rows(cg: FunctionCodegen, v, c: int, M: int, r0: int, lanes: int):
    """Rows r0 .. r0 + lanes - 1 of column c of the column-major matrix v (M rows); rows
    past M read as 0."""
    if (r0, lanes) == (0, M):
        return _column(cg, v, c, M)
    n = (v.re if isinstance(v, Cplx) else v).type.count
    zero = _map(lambda x: zero_of(x.type), v)
    return shuffle(cg, v, zero, [c * M + r if r < M else n for r in range(r0, r0 + lanes)])


def microkernel(cg: FunctionCodegen, kernel: Microkernel, A: CoopVal, B: CoopVal, g: int,
                c, cd: ScalarType):
    """A B + c for subgroup g with ``kernel`` (c, the result: column-major in cd)."""
    M, N = A.type.rows, B.type.cols
    acc = accumulator_pieces(cg, kernel, c, M, N)
    update_pieces(cg, kernel, A, B, g, acc, cd)
    return joined_pieces(cg, kernel, acc, M, N)


def accumulator_pieces(cg: FunctionCodegen, kernel: Microkernel, c, M: int, N: int) -> dict:
    """The column-major M x N matrix c as the kernel's accumulators: {(piece, column):
    vector of the piece's rows}."""
    return {(p, j): _rows(cg, c, j, M, r0, lanes)
            for j in range(N) for p, (r0, lanes) in enumerate(kernel.pieces(M))}


def joined_pieces(cg: FunctionCodegen, kernel: Microkernel, acc: dict, M: int, N: int):
    """The accumulators ``acc`` back as one column-major M x N matrix."""
    return concat(cg, [_joined_column(cg, kernel, acc, M, j) for j in range(N)])


def _joined_column(cg: FunctionCodegen, kernel: Microkernel, acc: dict, M: int, j: int):
    """Column j of the M-row matrix held as the accumulators ``acc``."""
    pieces = kernel.pieces(M)
    width = pieces[0][1]  # (a narrower last piece widened with zeros to the others')
    col = concat(cg, [acc[p, j] if lanes == width else _rows(cg, acc[p, j], 0, lanes, 0, width)
                      for p, (_, lanes) in enumerate(pieces)])
    held = width * len(pieces)
    # the padding of the last piece cut off, zeros for the rows not computed
    return col if held == M else _rows(cg, col, 0, held, 0, M)


class PiecesVal(CoopVal):
    """A coopmatrix as the FMA kernel's accumulators (``accumulator_pieces``, per
    subgroup), as a mul_add or a K loop leaves it.  Stores and mul_adds take the pieces;
    the matrix (``mats``) is joined from them only when something else needs it, placed
    where the value was made: a tile joined after its K loop only for its store to take
    it apart again was a fifth of a gemm's code generation."""

    def __init__(self, cg: FunctionCodegen, kernel: Microkernel, pieces: List[dict],
                 t: CoopMatrixType):
        self.type, self.kernel, self.pieces = t, kernel, pieces
        self._cg, self._mark, self._mats = cg, cg.b.mark(), None

    @property
    def mats(self) -> List[Any]:
        if self._mats is None:
            t, cg = self.type, self._cg
            self._mats = cg.b.emit_at(self._mark, lambda: [
                joined_pieces(cg, self.kernel, acc, t.rows, t.cols) for acc in self.pieces])
        return self._mats

    def pieces_for(self, kernel: Microkernel, g: int) -> Optional[dict]:
        """Subgroup g's accumulators, where `kernel` splits the columns as this one does."""
        same = kernel.pieces(self.type.rows) == self.kernel.pieces(self.type.rows)
        return dict(self.pieces[g]) if same else None


def column_of(cg: FunctionCodegen, value: CoopVal, g: int, c: int):
    """Column c of subgroup g's matrix (from its pieces where it has them)."""
    M = value.type.rows
    if not isinstance(value, PiecesVal):
        return _column(cg, value.mats[g], c, M)
    return _joined_column(cg, value.kernel, value.pieces[g], M, c)


#: the most K steps of a mul_add computed column by column (``update_pieces``), each
#: column's steps one after the other; longer ones step by step.  A's operands of all
#: steps are made first either way.  Step by step, in K steps of two, LLVM kept each
#: column's first sums in registers of their own and spilled accumulators into the K
#: loop's chain where the tile took most of the 16 ymm (f32 8x17x79 with B shared, 8x9
#: tiles: three on the stack, 0.71 of LIBXSMM's speed; column by column none, 1.77).
#: Column by column, longer steps hold A's operands of every step across all the columns
#: and spilled them (hand-written mul_adds with AVX-512: f32 32x8x8, 16 accumulators and
#: 16 registers of A of 32 zmm, 25 stack accesses, 104 against 164 GFLOP/s; bf16 16x8x32
#: on vdpbf16ps 146 against 166); making A's operands step by step instead spilled bf16
#: 16x8x32 too (20 stack accesses, 81-111 against 104-156)
COLUMN_BY_COLUMN_STEPS = 2


def update_pieces(cg: FunctionCodegen, kernel: Microkernel, A: CoopVal, B: CoopVal, g: int,
                  acc: dict, cd: ScalarType) -> None:
    """acc += A B for subgroup g, in place (``accumulator_pieces``)."""
    M, K, N = A.type.rows, A.type.cols, B.type.cols
    a = kernel.prepare(cg, A.mats[g], A.type.component, cd)
    pieces = kernel.pieces(M)
    steps = range(0, K, kernel.k_step)

    for n, (ps, cols) in enumerate(kernel.blocks(len(pieces), N)):
        if n:  # LLVM's scheduler would interleave the blocks again (and spill)
            scheduling_barrier(cg)
        if kernel.b_first:  # each step: B's operands, then A's piece by piece
            for k in steps:
                b_ops = {j: kernel.b_operand(cg, B.mats[g], B.type.component, K, k, j, cd)
                         for j in cols}
                for p in ps:
                    a_op = kernel.a_operand(cg, a, M, K, k, *pieces[p])
                    for j in cols:
                        acc[p, j] = kernel.step(cg, cd, acc[p, j], a_op, b_ops[j], pieces[p][1])
            continue
        a_ops = {(p, k): kernel.a_operand(cg, a, M, K, k, *pieces[p]) for k in steps for p in ps}
        if len(steps) <= COLUMN_BY_COLUMN_STEPS:
            order = [(j, k) for j in cols for k in steps]
        else:
            order = [(j, k) for k in steps for j in cols]
        for j, k in order:
            b_op = kernel.b_operand(cg, B.mats[g], B.type.component, K, k, j, cd)
            for p in ps:
                acc[p, j] = kernel.step(cg, cd, acc[p, j], a_ops[p, k], b_op, pieces[p][1])


class StreamedA(Microkernel):
    """The FMA kernel with A's column taken one register at a time: each step broadcasts
    B's entries of all columns first and keeps them, then multiplies each register of A's
    column into every column.  Where FMAs take no broadcast operand (AVX2) and a tile has
    fewer columns than registers per column, this keeps n broadcasts and one register of
    A beside the accumulator instead of r registers of A and one broadcast: an f32 32x3
    tile takes 12 + 3 + 1 of the 16 ymm registers (LIBXSMM's AVX2 blocking), where LLVM
    spilled accumulators when the whole column was loaded."""

    b_first = True

    def __init__(self, lanes: int, rows: Optional[int] = None):
        self.lanes, self.rows = lanes, rows

    def pieces(self, M: int) -> List[Tuple[int, int]]:
        return [(r, min(self.lanes, M - r)) for r in range(0, min(M, self.rows or M), self.lanes)]


def emit_reduce(cg: FunctionCodegen, inst: Instruction):
    """Rows (mode row: an M x 1 result) or columns (1 x N): the rows of each column are
    combined by halving (``_halve``), the columns in order."""
    whole_subgroups(cg)
    a: CoopVal = cg.get(inst.slots["a"])
    t: CoopMatrixType = inst.results[0].type
    comp = a.type.component
    cd = accumulate_type(comp)
    op = inst.opcode.rsplit("_", 1)[1]
    M, N = a.type.rows, a.type.cols
    out = []
    for mat in a.mats:
        x = convert(cg, mat, comp, cd)
        if inst.modifier("mode") == "row":
            acc = _column(cg, x, 0, M)
            for c in range(1, N):
                acc = binary(cg, op, cd, acc, _column(cg, x, c, M))
        else:
            acc = _halve(cg, op, cd, x, M, N)
        if cd != comp:
            acc = convert(cg, acc, cd, comp)
        out.append(acc)
    return CoopVal(out, t)


def _halve(cg: FunctionCodegen, op: str, cd: ScalarType, x, M: int, N: int):
    """The M rows (a power of two, as the verifier requires) of each column of the
    column-major M x N matrix x combined: while there are several, the lower half of
    every column with the upper half, all columns in one vector operation (log2 M steps,
    where a sum per column in order took M - 1 dependent scalar steps and as many
    extracts: f64 8 x 8, 21 instructions for 8 columns)."""
    assert M & (M - 1) == 0, M
    while M > 1:
        h = M // 2
        lo = shuffle(cg, x, x, [c * M + r for c in range(N) for r in range(h)])
        hi = shuffle(cg, x, x, [c * M + h + r for c in range(N) for r in range(h)])
        x, M = binary(cg, op, cd, lo, hi), h
    return x


# ---- the coopmatrix forms of the instructions on numbers ------------------------------------------
def emit_constant(cg: FunctionCodegen, inst: Instruction):
    return constant(cg, inst.results[0].type, inst.attrs["value"])


def emit_binary(cg: FunctionCodegen, inst: Instruction):
    t = inst.results[0].type
    a, c = cg.get(inst.slots["a"]), cg.get(inst.slots["b"])
    if cg.checked and inst.opcode in ("div", "rem") and t.component.is_int:
        _check_divisor(cg, t, a, c)
    return elementwise_binary(cg, inst.opcode, t, a, c)


def _check_divisor(cg: FunctionCodegen, t: CoopMatrixType, a, c) -> None:
    """Checked code: no component held by an active work-item divides by zero (reported
    with the first such entry, its dividend and the work-item holding it)."""
    b = cg.b
    M, N = t.rows, t.cols
    n = M * N
    owner = layout_of(t, cg.S).owners
    # entries in row-major order (the interpreter's): entry k is component by_rows[k]
    by_rows = [col * M + row for row in range(M) for col in range(N)]
    order = VectorConstant(I32, by_rows)
    saved, cg.mask = cg.mask, None
    try:
        for g, (x, y) in enumerate(zip(a.mats, c.mats)):
            zero = b.icmp_signed("==", y, ir.Constant(y.type, [0] * n))
            if saved is not None:
                zero = b.and_(zero, owner_mask(cg, t, saved, g))
            k = cg.first_lane(b.shuffle_vector(zero, zero, order))  # n when none: clamp
            k = b.select(b.icmp_unsigned("<", k, ir.Constant(I32, n)), k, ir.Constant(I32, 0))
            owners = VectorConstant(I32, [g * cg.S + int(owner[e % M, e // M])
                                          for e in by_rows])
            cg.fail_if(cg.reduce_or(zero), E_COOP_DIV_ZERO,
                       [b.extract_element(x, b.extract_element(order, k)),
                        b.udiv(k, ir.Constant(I32, N)), b.urem(k, ir.Constant(I32, N))],
                       lane=b.extract_element(owners, k))
    finally:
        cg.mask = saved


def emit_unary(cg: FunctionCodegen, inst: Instruction):
    t = inst.slots["a"].type
    a = cg.get(inst.slots["a"])
    return CoopVal([unary(cg, inst.opcode, t.component, m) for m in a.mats], inst.results[0].type)


def emit_cast(cg: FunctionCodegen, inst: Instruction):
    return cast(cg, cg.get(inst.slots["a"]), inst.results[0].type)


#: opcode -> emitter of its coopmatrix form, for the opcodes whose other forms are
#: ``arith.EMITTERS`` (``codegen`` picks by the result type)
ELEMENTWISE: Dict[str, Callable] = {
    "constant": emit_constant,
    **dict.fromkeys(ARITH_BINARY, emit_binary),
    **dict.fromkeys(ARITH_UNARY, emit_unary),
    "cast": emit_cast,
}


#: the coopmatrix instructions (but mul_add: ``mul_add.EMITTERS``; the work-item views:
#: ``coop_items.EMITTERS``; the accesses to memory: ``coop_memory.EMITTERS``)
EMITTERS: Dict[str, Callable] = {
    "cooperative_matrix_construct": emit_construct,
    "cooperative_matrix_scale": emit_scale,
    **dict.fromkeys(("cooperative_matrix_reduce_add", "cooperative_matrix_reduce_max",
                     "cooperative_matrix_reduce_min"), emit_reduce),
}
