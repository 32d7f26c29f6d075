"""Coopmatrix loads, stores, atomics and prefetches on the CPU.

Each is executed per subgroup when any of its work-items is active, at the position and
through the memref of the subgroup's first active work-item (``_access``; the operands
must be dynamically uniform).  A column-major memref with unit stride is read and written
column by column: plain vectors where the rows are known (``stored_rows``,
``_store_pieces``; a small local temporary read back in the same pieces, ``pieces_of``),
masked ones otherwise; transposed tiles of 16-bit values a row word at a time
(``_row_words``); other layouts through masked gathers and scatters.  ``rows_checked`` /
``cols_checked`` mask the components outside the memref (they read as 0).  The matrices
themselves: ``coop.py``.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Tuple

from llvmlite import ir

from ...ir.core import Instruction
from ...ir.types import CoopMatrixType, MemrefType
from ...runtime.findings import E_COOP_BOUNDS, E_NULL
from . import races
from .coop import (_consts, _map, _rows, column_of, first_lane, memref_in, pinned, shuffle,
                   subgroup_active, subgroups, uniform_in, whole_subgroups)
from .function import FunctionCodegen, lane_loop
from .memory import (_align, _masked_store, _note_write, atomic_store_element, atomic_update,
                     check_alive, elem_type, is_null, lt_size, prefetch_block)
from .scratch import column_loop, shared_scratch
from .values import I1, I32, I64, LLTYPE, CoopVal, Cplx, HeldMatrix, MemVal, VectorConstant, \
    parts, undef_of, zero_of
from .vectors import (Valid, concat, constant_prefix, gather, in_range, inside, masked_load,
                      narrow, register_lanes, splat_n)


def _access(cg: FunctionCodegen, inst: Instruction, t: CoopMatrixType, g: int, fn) -> None:
    """Call fn(m, offsets, valid, contiguous, at) for subgroup g, under its activity.

    offsets() (i64 x M*N): element offsets of the components from m.ptr; valid (``Valid``):
    the components accessed (the checked flags and the subgroup's activity);
    contiguous: which runs of the matrix are contiguous in memory (the memref's row
    stride is 1): "columns" (not transposed), "rows" (transposed) or None; at(r, c): a
    pointer to component (r, c) (plain address arithmetic, no vector of offsets).  The
    vectors of indices and offsets are made only where used: accesses of whole tiles
    through ``at`` need none of them, and writing them out for LLVM to delete was a
    large part of the code generated for coopmatrix kernels."""
    b = cg.b
    lane = first_lane(cg, g)
    m = memref_in(cg, cg.get(inst.slots["tensor"]), lane, g, "the memref")
    x = uniform_in(cg, cg.get(inst.slots["x"]), lane, g, "the row position")
    y = uniform_in(cg, cg.get(inst.slots["y"]), lane, g, "the column position")
    transpose = inst.modifier("ta") == "t"
    checked = inst.modifier("checked")
    M, N = t.rows, t.cols
    n = M * N
    s0, s1 = (cg.ival(s) for s in m.shape)
    st0, st1 = (cg.ival(s) for s in m.stride)
    made = {}

    def indices():
        """(row indices, column indices) of the components in the memref."""
        if "indices" not in made:
            i_vec = _consts([e % M for e in range(n)], I64)
            j_vec = _consts([e // M for e in range(n)], I64)
            xs, ys = splat_n(cg, x, n), splat_n(cg, y, n)
            made["indices"] = ((b.add(xs, j_vec), b.add(ys, i_vec)) if transpose else
                               (b.add(xs, i_vec), b.add(ys, j_vec)))
        return made["indices"]

    def offsets():
        if "offsets" not in made:
            ri, ci = indices()
            made["offsets"] = b.add(b.mul(ri, splat_n(cg, st0, n)), b.mul(ci, splat_n(cg, st1, n)))
        return made["offsets"]

    valid = VectorConstant(I1, [1] * n)
    whole = cg.checked or not narrow(cg)
    if cg.checked or (whole and checked is not None):
        ri, ci = indices()
        in_rows, in_cols = in_range(cg, ri, s0), in_range(cg, ci, s1)
        row_guard, col_guard = (in_cols, in_rows) if transpose else (in_rows, in_cols)
        if checked in ("rows_checked", "both_checked"):
            valid = b.and_(valid, row_guard)
        if checked in ("cols_checked", "both_checked"):
            valid = b.and_(valid, col_guard)
    active = subgroup_active(cg, g)
    if cg.checked:
        null = b.and_(is_null(cg, m), cg.reduce_or(valid))
        if active is not None:
            null = b.and_(null, active)
        saved, cg.mask = cg.mask, None
        cg.fail_if(null, E_NULL, lane=lane)
        cg.mask = saved
        bad = b.and_(valid, b.xor(b.and_(in_rows, in_cols), VectorConstant(I1, [1] * n)))
        # the first bad component in row-major order (as the interpreter reports it)
        by_rows = [c * M + r for r in range(M) for c in range(N)]
        k = cg.first_lane(b.shuffle_vector(bad, bad, _consts(by_rows)))
        k = b.select(b.icmp_unsigned("<", k, ir.Constant(I32, n)), k, ir.Constant(I32, 0))
        e = b.extract_element(_consts(by_rows), k)
        details = [b.udiv(k, ir.Constant(I32, N)), b.urem(k, ir.Constant(I32, N)),
                   b.extract_element(ri, e), b.extract_element(ci, e), s0, s1]
        any_bad = cg.reduce_or(bad)
        if active is not None:
            any_bad = b.and_(any_bad, active)
        saved, cg.mask = cg.mask, None
        cg.fail_if(any_bad, E_COOP_BOUNDS, details, lane=lane)
        cg.mask = saved
        check_alive(cg, inst.slots["tensor"])
    if whole:
        if active is not None:
            valid = b.and_(valid, splat_n(cg, active, n))
        valid = Valid(cg, M, N, whole=valid)
    else:
        # the matrix's rows are the memref's columns where it is transposed
        (pr, br), (pc, bc) = ((y, s1), (x, s0)) if transpose else ((x, s0), (y, s1))
        rows_checked = checked in ("rows_checked", "both_checked")
        cols_checked = checked in ("cols_checked", "both_checked")
        rows = inside(cg, pr, br, M) if rows_checked else None
        cols = inside(cg, pc, bc, N) if cols_checked else None
        # the columns inside where they are known here: the first ones
        cols_inside = N if cols is None and active is None else None
        if cols is not None and active is None and isinstance(pc, ir.Constant) \
                and isinstance(bc, ir.Constant):
            cols_inside = max(0, min(N, bc.constant - pc.constant))
        if active is not None:
            on = splat_n(cg, active, N)
            cols = on if cols is None else b.and_(cols, on)
        valid = Valid(cg, M, N, rows, cols, row_span=(pr, br) if rows_checked else None,
                      cols_inside=cols_inside)
    contiguous = ("rows" if transpose else "columns") if _unit_row_stride(m) else None

    origin = []
    et = elem_type(t.component)

    def at(r: int, c: int) -> ir.Value:
        """Pointer to component (r, c): the tile's origin (``_origin``) plus an offset
        that is a constant for static strides, so that the accesses of a tile address
        memory as register + displacement."""
        if not origin:
            origin.append(_origin(cg, m, x, y, st0, st1, et))
        p, fixed = origin[0]
        i, j = (c, r) if transpose else (r, c)
        if not fixed and i == 0 and j == 0:
            return p
        offset = b.add(b.mul(ir.Constant(I64, i), st0), b.mul(ir.Constant(I64, j), st1))
        if fixed:
            offset = b.add(ir.Constant(I64, fixed), offset)
        return b.gep(p, [offset], source_etype=et)
    if cg.races is not None and races.is_local(m.type):
        size = splat_n(cg, ir.Constant(I64, m.type.element.size), n)
        addrs = b.add(splat_n(cg, b.ptrtoint(m.ptr, I64), n), b.mul(offsets(), size))
        me = b.add(b.load(cg.races.base, typ=I64), b.zext(lane, I64))
        races.track(cg, inst, addrs, valid.whole, splat_n(cg, me, n), list(indices()),
                    lambda k: lane)
    fn(m, offsets, valid, contiguous, at)


def _origin(cg: FunctionCodegen, m: MemVal, x, y, st0, st1,
            et: ir.Type) -> Tuple[ir.Value, int]:
    """(pointer, elements after it) of a tile's component (0, 0) at row x and column y
    of m (``_access``'s ``at``).  Where the work-group has one subgroup the pointer is
    ``pinned`` and leaves out the static part of the position (a static row or column
    times a static stride: the elements after it), and the tiles of one block whose
    pointers are equal share one (``FunctionCodegen.pinned_origins``): the products of
    a K step of a static K (``matmul.k_parts``) and a K loop's steps unrolled read each
    column of B through one register, not one register each."""
    b = cg.b
    if subgroups(cg) != 1:  # LLVM merges the equal origins of the subgroups' tiles
        return b.gep(m.ptr, [b.add(b.mul(x, st0), b.mul(y, st1))], source_etype=et), 0
    fixed, terms = 0, []
    for position, stride in ((x, st0), (y, st1)):
        if isinstance(position, ir.Constant) and isinstance(stride, ir.Constant):
            fixed += position.constant * stride.constant
        else:
            terms.append((position, stride))
    key = (b.block, m.ptr, *terms)
    if key not in cg.pinned_origins:
        p = m.ptr
        if terms:
            start = [b.mul(position, stride) for position, stride in terms]
            p = b.gep(p, [start[0] if len(start) == 1 else b.add(*start)], source_etype=et)
        cg.pinned_origins[key] = pinned(cg, p)
    return cg.pinned_origins[key], fixed


def _row(cg: FunctionCodegen, v, r: int, M: int, N: int):
    """Row r of the column-major M x N matrix v."""
    return shuffle(cg, v, v, range(r, M * N, M))


def _unit_row_stride(m: MemVal) -> bool:
    return isinstance(m.stride[0], int) and m.stride[0] == 1


def load_matrix(cg: FunctionCodegen, inst: Instruction, t: CoopMatrixType) -> CoopVal:
    b = cg.b
    comp = t.component
    lt = LLTYPE[comp.name]
    M, N = t.rows, t.cols
    # mul_add broadcasts each entry of B: unmasked, they are loaded one by one (in any
    # layout), so that each broadcast becomes a broadcasting load (no shuffles, no gather)
    by_entry = (t.use == "matrix_b" and not comp.is_complex
                and inst.modifier("checked") is None and cg.mask is None)
    whole_subgroups(cg)
    mats = []
    for g in range(subgroups(cg)):
        result = {}

        def load(m: MemVal, offsets, valid, contiguous, at):
            if by_entry:
                v = undef_of(ir.VectorType(lt, M * N))
                for c in range(N):
                    for r in range(M):
                        p = at(r, c)
                        e = b.load(p, typ=lt, align=_align(comp))
                        v = b.insert_element(v, e, ir.Constant(I32, c * M + r))
                result["v"] = v
                return
            if contiguous == "columns" and not comp.is_complex:
                cols = []
                for c in range(N):
                    p, mask = at(0, c), valid.column(c)
                    pieces = pieces_of(m.type, mask, M, lt)
                    cols.append(masked_load(cg, lt, p, mask, M) if pieces is None
                                else _load_pieces(cg, lt, p, pieces, M))
                result["v"] = concat(cg, cols)
                return
            if contiguous == "rows" and not comp.is_complex:
                # a transposed tile of a memref with unit row stride: each row of the
                # matrix is contiguous (N components), loaded as one word (``_row_words``)
                # or vector; one shuffle makes the rows columns (a gather of M N
                # components is scalarized where the CPU has no fast gather, and is slow
                # to compile)
                rows = _row_words(cg, m, lt, at, valid, M, N)
                if rows is None:
                    rows = [masked_load(cg, lt, at(r, 0), valid.row(r), N) for r in range(M)]
                by_rows = concat(cg, rows)
                result["v"] = shuffle(cg, by_rows, by_rows,
                                      [(e % M) * N + e // M for e in range(M * N)])
                return
            ptrs = b.gep(splat_n(cg, m.ptr, M * N), [offsets()], source_etype=elem_type(comp))
            if comp.is_complex:
                pi = b.gep(ptrs, [_consts([1] * (M * N), I64)], source_etype=lt)
                result["v"] = Cplx(gather(cg, lt, ptrs, valid.whole),
                                   gather(cg, lt, pi, valid.whole))
            else:
                result["v"] = gather(cg, lt, ptrs, valid.whole)
        _access(cg, inst, t, g, load)
        mats.append(result["v"])
    return CoopVal(mats, t)


#: bytes of a row of a transposed tile that ``_row_words`` loads as one integer
ROW_WORD_BYTES = (2, 4, 8)


def _row_words(cg: FunctionCodegen, m: MemVal, lt: ir.Type, at, valid: Valid, M: int,
               N: int) -> Optional[List[ir.Value]]:
    """The M rows of a transposed tile (each N components contiguous in memory), in
    order, as vectors of a register's worth of whole rows, where a row is one of
    ``ROW_WORD_BYTES`` (a K step of one, two or four 16-bit values) and masks go by rows
    and columns (``Valid``); else None.

    Where the columns inside are known at compile time (``Valid.cols_inside``: all of
    them in the K loop's steps, the first few in a static K's remainder) each row is one
    integer load of those (a row outside a ``rows_checked`` tile reads a word of zeros:
    its address is selected, no mask); else (K's remainder with K known at run time)
    the rows are loaded one by one in a loop LLVM keeps rolled, into scratch memory read
    back a register at a time (that loop took a fifth of the time of f16 37x21x19 t.n,
    straight loads of a static remainder's rows none).  As
    vectors of N components joined by shuffles (a 64 x 4 tile of bf16: 64 loads, their
    masks and the joining), a transposed A was most of a 16-bit gemm's LLVM IR and
    compile time, in each copy of the tile code (whole tiles, edges, K remainder).  The
    parts are vectors of lt so that the shuffles taking columns or pairs of k out of the
    tile trace back to one or two of them (``values.FoldingBuilder``).  Gathers of the
    words compiled faster still but ran at 0.6-0.7 of these loads' speed on Zen 4 (bf16
    and f16 64^3 t.n, 32 x 8 tiles).  A row of one 16-bit value (f32 FMAs take one k a
    step where K is known at run time) was a masked load of one component, a branch in
    machine code: f16 ?x?x? t.n compiled in 340-390 ms, as words 190-210."""
    width = N * lt_size(lt)
    if width not in ROW_WORD_BYTES or not valid.by_lines:
        return None
    b = cg.b
    word = ir.IntType(8 * width)
    per = register_lanes(width)  # rows of a register
    parts = [(r0, min(per, M - r0)) for r0 in range(0, M, per)]
    origin, stride = at(0, 0), cg.ival(m.stride[1])
    # the word of zeros rows outside read, or the rows of the rolled loop below
    scratch = shared_scratch(cg, "row words", M * width) \
        if valid.rows is not None or valid.cols_inside is None else None
    as_rows = lambda v, n: b.bitcast(v, ir.VectorType(lt, n * N))  # noqa: E731
    count = valid.cols_inside
    if count is not None:
        part = ir.IntType(8 * count * lt_size(lt)) if count else None  # (i48: 3 of 4)
        if valid.rows is not None:
            b.store(ir.Constant(word, 0), scratch, align=width)
        # each row's address: a constant displacement from the origin where the stride is
        # static; else the row before's plus the stride (``pinned``: LLVM made r * stride
        # for every row, a register each across the K loop, and spilled them)
        chained = not isinstance(m.stride[1], int)
        out, p = [], origin
        for r0, n in parts:
            v = undef_of(ir.VectorType(word, n))
            for r in range(n):
                if not chained:
                    p = at(r0 + r, 0)
                elif r0 + r:
                    p = pinned(cg, b.gep(p, [stride], source_etype=lt))
                row = p
                if valid.rows is not None:
                    row = b.select(valid.row_inside(r0 + r), p, scratch)
                w = ir.Constant(word, 0)
                if part is not None:
                    w = b.load(row, typ=part, align=lt_size(lt))
                    w = w if part == word else b.zext(w, word)
                v = b.insert_element(v, w, ir.Constant(I32, r))
            out.append(as_rows(v, n))
        return out

    def row(r: ir.Value) -> None:
        mask = valid.cols
        if valid.rows is not None:
            mask = b.and_(mask, splat_n(cg, valid.row_inside(r), N))
        v = masked_load(cg, lt, b.gep(origin, [b.mul(r, stride)], source_etype=lt), mask, N)
        b.store(b.bitcast(v, word), b.gep(scratch, [r], source_etype=word), align=width)
    column_loop(cg, M, row)
    return [as_rows(b.load(b.gep(scratch, [ir.Constant(I64, r0)], source_etype=word),
                           typ=ir.VectorType(word, n), align=min(64, n * width)), n)
            for r0, n in parts]


def _scatter_n(cg: FunctionCodegen, v, ptrs, mask) -> None:
    cg.intrinsic("llvm.masked.scatter", ir.VoidType(),
                 [v, ptrs, ir.Constant(I32, lt_size(v.type.element)), mask], [v.type, ptrs.type])


def emit_load(cg: FunctionCodegen, inst: Instruction):
    return load_matrix(cg, inst, inst.results[0].type)


def emit_store(cg: FunctionCodegen, inst: Instruction):
    b = cg.b
    value: CoopVal = cg.get(inst.slots["value"])
    whole_subgroups(cg)
    if isinstance(value, HeldMatrix):  # a loop's result still in AMX tiles
        _note_write(cg, inst)
        return value.store(cg, inst)
    t = value.type
    comp = t.component
    lt = LLTYPE[comp.name]
    M, N = t.rows, t.cols
    _note_write(cg, inst)
    rows = None if cg.mask is not None else stored_rows(inst, M)  # (else a masked store)
    pieces = _store_pieces(rows or 0, lt)
    for g in range(subgroups(cg)):

        def store(m: MemVal, offsets, valid, contiguous, at):
            if contiguous == "columns" and not comp.is_complex:
                for c in range(N):
                    column = column_of(cg, value, g, c)
                    if rows is None:
                        _masked_store(cg, column, at(0, c), valid.column(c))
                    for r0, lanes in pieces:
                        _masked_store(cg, _rows(cg, column, 0, M, r0, lanes), at(r0, c), None)
                return
            mat = value.mats[g]
            if contiguous == "rows" and not comp.is_complex:
                # rows of a transposed tile are contiguous (see load_matrix)
                for r in range(M):
                    _masked_store(cg, _row(cg, mat, r, M, N), at(r, 0), valid.row(r))
                return
            ptrs = b.gep(splat_n(cg, m.ptr, M * N), [offsets()], source_etype=elem_type(comp))
            if comp.is_complex:
                pi = b.gep(ptrs, [_consts([1] * (M * N), I64)], source_etype=lt)
                _scatter_n(cg, mat.re, ptrs, valid.whole)
                _scatter_n(cg, mat.im, pi, valid.whole)
            else:
                _scatter_n(cg, mat, ptrs, valid.whole)
        _access(cg, inst, t, g, store)


def stored_rows(inst: Instruction, M: int) -> Optional[int]:
    """The rows of each column a store (not transposed) writes where they are known at
    compile time: all M of an unchecked store, those of a rows_checked one at a constant
    row position of at least 0 in static rows; else None.  Where every work-item is
    active they are stored as plain vectors (``_store_pieces``): without AVX-512 a masked
    store is ``vmaskmovps``, which held f32 9x56 ger (one masked row per column) to 0.39x
    LIBXSMM's speed on Zen 4.  (The rows a store observes: ``mul_add.observed_rows``.)"""
    checked = inst.modifier("checked")
    if inst.modifier("ta") == "t":
        return None
    if checked is None:
        return M
    x, rows = inst.slots["x"], inst.slots["tensor"].type.shape[0]
    if (checked != "rows_checked" or rows is None or x.owner is None
            or x.owner.opcode != "constant" or x.owner.attrs["value"] < 0):
        return None
    return max(0, min(M, rows - x.owner.attrs["value"]))


#: the most stores (a column's ``_store_pieces`` times the columns) of a static local
#: memref whose columns of a constant number of rows are loaded in those pieces
#: (``pieces_of``); measured, see there
LOCAL_STORES = 32


def pieces_of(t: MemrefType, mask, M: int, lt: ir.Type) -> Optional[List[Tuple[int, int]]]:
    """The pieces (``_store_pieces``) in which ``emit_store`` stores the rows of a column
    of local memref t that a load's constant `mask` takes (its first k, not all M of the
    tile's), where the load takes them in those pieces (``_load_pieces``); else None.
    A work-group's temporary (a chain A B C through local memory) is read right after it
    is written: a register loaded across two stores still in the store queue (one masked
    load of 9 f32 rows written as 8 + 1) is not forwarded from them and waits until both
    reach the cache.  Against LIBXSMM on
    Zen 4, AVX-512: f32 9x1x3x2 0.65 -> 1.5-1.9, f64 3x3x3x1 0.67 -> 1.9, f64 5x1x1x6
    0.75 -> 1.46, 50 random chains with m not a power of two 1.09x as fast (the least
    0.91x, 0.96-1.05x measured again); AVX2 (x86-64-v3): f32 3x1x5x3 1.07 -> 2.14, 40
    random chains 1.07x.  A temporary of many stores has reached the cache before it is
    read, and the pieces then only add loads and shuffles: beyond LOCAL_STORES, f64
    3x9x18x5 (36 stores) 0.95x, f32 23x4x27x1 (108) 0.92x."""
    if t.space != "local" or not all(isinstance(d, int) for d in t.shape):
        return None
    k = constant_prefix(mask)
    if k is None or not 0 < k < M:
        return None
    pieces = _store_pieces(k, lt)
    return None if math.prod(t.shape[1:]) * len(pieces) > LOCAL_STORES else pieces


def _load_pieces(cg: FunctionCodegen, lt: ir.Type, p: ir.Value, pieces: List[Tuple[int, int]],
                 M: int):
    """The rows of the column at p in `pieces` (first, length), the rest of M rows 0."""
    b = cg.b
    v = zero_of(ir.VectorType(lt, M))
    for r0, lanes in pieces:
        piece = b.load(b.gep(p, [ir.Constant(I64, r0)], source_etype=lt),
                       typ=ir.VectorType(lt, lanes), align=lt_size(lt))
        wide = shuffle(cg, piece, piece, [min(r, lanes - 1) for r in range(M)])
        v = shuffle(cg, v, wide, [M + r - r0 if r0 <= r < r0 + lanes else r for r in range(M)])
    return v


def _store_pieces(n: int, lt: ir.Type) -> List[Tuple[int, int]]:
    """(first, length) of the plain stores of n rows of a column of type lt, in the order
    of their addresses: powers of two, largest first, each at most one register's lanes,
    so that no store returns to a cache line an earlier one left: 11 rows -> 8, 2, 1; 16
    rows of f64 on AVX-512 -> 8, 8 (LLVM stored a vector of 16 as its high register,
    then its low one: in a loop writing f64 56x56 matrices 16 bytes off a cache line, as
    NumPy allocates them, that order took 1.2x the time of address order)."""
    width = register_lanes(lt_size(lt))
    out, first = [], 0
    for bit in reversed(range(n.bit_length())):
        if n >> bit & 1:
            out += [(first + k, min(width, (1 << bit) - k)) for k in range(0, 1 << bit, width)]
            first += 1 << bit
    return out


def _entry_loop(cg: FunctionCodegen, n: int, valid, fn, result_types) -> list:
    """for e in 0..n-1 where valid[e]: results[e] = fn(e) (an LLVM loop, in order)."""
    saved_W = cg.W
    cg.W = n  # lane_loop works on vectors of cg.W lanes
    try:
        return lane_loop(cg, valid, fn, result_types)
    finally:
        cg.W = saved_W


def emit_atomic(cg: FunctionCodegen, inst: Instruction):
    """Component by component, each a real atomic instruction (other work-groups run
    concurrently); the update variants return the previous values (0 where not accessed)."""
    b = cg.b
    value: CoopVal = cg.get(inst.slots["value"])
    t = value.type
    comp = t.component
    M, N = t.rows, t.cols
    ordering = "monotonic" if inst.modifier("semantics") == "relaxed" else "seq_cst"
    op = inst.opcode.rsplit("_", 1)[1]
    _note_write(cg, inst)
    whole_subgroups(cg)
    olds = []
    for g in range(subgroups(cg)):
        mat = value.mats[g]
        out = {}

        def update(m: MemVal, offsets, valid, contiguous, at):
            ptrs = b.gep(splat_n(cg, m.ptr, M * N), [offsets()], source_etype=elem_type(comp))

            def one(e):
                p = b.extract_element(ptrs, e)
                v = _map(lambda x: b.extract_element(x, e), mat)
                if op == "store":
                    atomic_store_element(cg, comp, p, v, ordering)
                    return []
                return parts(atomic_update(cg, op, comp, p, v, ordering))
            types = [] if op == "store" else [LLTYPE[comp.name]] * (2 if comp.is_complex else 1)
            res = _entry_loop(cg, M * N, valid.whole, one, types)
            if op != "store":
                # components not accessed give 0
                res = [b.select(valid.whole, r, zero_of(r.type)) for r in res]
                out["v"] = Cplx(*res) if comp.is_complex else res[0]
        _access(cg, inst, t, g, update)
        olds.append(out.get("v"))
    if op == "store":
        return None
    return CoopVal(olds, t)


def emit_prefetch(cg: FunctionCodegen, inst: Instruction):
    """A hint (``memory.prefetch_block``), each subgroup's block; checked code tests what
    the instruction needs: whole subgroups, dynamically uniform operands."""
    if cg.checked:
        whole_subgroups(cg)
    for g in range(subgroups(cg)):
        lane = first_lane(cg, g)
        x = uniform_in(cg, cg.get(inst.slots["x"]), lane, g, "the row position")
        y = uniform_in(cg, cg.get(inst.slots["y"]), lane, g, "the column position")
        m = memref_in(cg, cg.get(inst.slots["tensor"]), lane, g, "the memref")
        prefetch_block(cg, m, x, y, inst.attrs["rows"], inst.attrs["cols"],
                       inst.attrs["cache_level"])
    return None


#: the coopmatrix instructions that access memory
EMITTERS: Dict[str, Callable] = {
    **dict.fromkeys(("cooperative_matrix_load", "cooperative_matrix_atomic_load"), emit_load),
    "cooperative_matrix_store": emit_store,
    **dict.fromkeys(("cooperative_matrix_atomic_store", "cooperative_matrix_atomic_add",
                     "cooperative_matrix_atomic_max", "cooperative_matrix_atomic_min"),
                    emit_atomic),
    "cooperative_matrix_prefetch": emit_prefetch,
}
