"""Memory on the CPU: loads, stores and atomics of elements, the scratch memory of
``alloca``, and memref descriptors (size, subview, expand, fuse, group members).

A varying access is a vector load or store when its lanes access consecutive elements
(known at compile time from ``Lanes``, else checked at run time) and a gather or scatter
otherwise; atomics of an SPMD region run lane after lane.  Checked code checks every
index against the shape.
"""
from __future__ import annotations

from typing import Callable, Dict, List

from llvmlite import ir

from ...ir.core import Instruction, Value
from ...ir.traits import blas_shape_rules, shapes_of
from ...ir.types import DYNAMIC, MemrefType, ScalarType
from . import races
from ...runtime.findings import (ERR_DETAILS, E_EXPAND, E_FUSE, E_GROUP_INDEX, E_INDEX,
                                 E_LIFETIME, E_NULL, E_SHAPES, E_SUBVIEW, InstRef)
from ...target import get_target
from .arith import binary
from .function import FunctionCodegen, lane_loop
from .scratch import column_loop
from .vectors import lt_size, masked_load
from .values import (F16, I1, I8, I16, I32, I64, LLTYPE, PTR, Cplx, GroupVal, IndexLike,
                     Lanes, MemVal, VectorConstant, is_vec, parts, zero_of)


def _derive(cg: FunctionCodegen, inst: Instruction, source: Value) -> None:
    for r in inst.results:
        cg.roots[r] = cg.roots.get(source)
        if source in cg.allocas:
            cg.allocas[r] = cg.allocas[source]


def _note_write(cg: FunctionCodegen, inst: Instruction) -> None:
    root = cg.roots.get(inst.slots["tensor"])
    if root is not None and root not in cg.writes:
        cg.writes[root] = InstRef.of(inst)


def elem_type(t: ScalarType) -> ir.Type:
    lt = LLTYPE[t.name]
    return ir.ArrayType(lt, 2) if t.is_complex else lt


def _offset(cg: FunctionCodegen, m: MemVal, index: List) -> IndexLike:
    off: IndexLike = 0
    for i, s in zip(index, m.stride):
        off = cg.iadd(off, cg.imul(i, s))
    return off


def is_null(cg: FunctionCodegen, m: MemVal) -> ir.Value:
    """Whether m is a null memref (``None`` passed), per lane where m varies."""
    b = cg.b
    if not is_vec(m.ptr):
        return b.icmp_unsigned("==", m.ptr, zero_of(PTR))
    return b.icmp_unsigned("==", b.ptrtoint(m.ptr, cg.vt(I64)), cg.const_like(m.ptr, I64, 0))


def _check_access(cg: FunctionCodegen, m: MemVal, index: List) -> None:
    """Checked code: no null memref, every index within the shape."""
    b = cg.b
    cg.fail_if(is_null(cg, m), E_NULL)
    for mode, (i, size) in enumerate(zip(index, m.shape)):
        iv, sv = cg.match(cg.ival(i), cg.ival(size))
        bad = b.or_(b.icmp_signed("<", iv, cg.const_like(iv, I64, 0)), b.icmp_signed(">=", iv, sv))
        details = [ir.Constant(I64, mode), iv, sv, ir.Constant(I64, len(index))]
        details += [cg.ival(x) for x in index[:8]]
        cg.fail_if(bad, E_INDEX, details)


def _track(cg: FunctionCodegen, inst: Instruction, m: MemVal, index: List, ptrs=None) -> None:
    """Checked code in SPMD regions: race detection of an access to local memory
    (``races``); ``ptrs``: the element pointers, when already computed."""
    if cg.races is None or not cg.spmd or not races.is_local(m.type):
        return
    b = cg.b
    off = _offset(cg, m, index)
    if ptrs is None:
        ptrs = _gep(cg, m.type.element, cg.splat(m.ptr), off)
    consecutive = not is_vec(m.ptr) and isinstance(off, Lanes) and off.consecutive()
    me = b.add(cg.splat(b.load(cg.races.base, typ=I64)), cg.iota())
    idx = []
    for i in index:
        v = cg.splat(cg.ival(i))
        idx.append(v if v.type.element.width == 64 else b.sext(v, cg.vt(I64)))
    races.track(cg, inst, b.ptrtoint(cg.splat(ptrs), cg.vt(I64)), cg.mask, me, idx,
                lambda k: k, consecutive)


def _gep(cg: FunctionCodegen, t: ScalarType, ptr, off: IndexLike):
    et = elem_type(t)
    if isinstance(off, int) and off == 0:
        return ptr
    if isinstance(off, Lanes):
        off = cg.vector(off)
    if is_vec(ptr) or is_vec(off):
        ptr, offv = cg.match(ptr, cg.ival(off))
        return cg.b.gep(ptr, [offv], source_etype=et)
    return cg.b.gep(ptr, [cg.ival(off)], source_etype=et)


def _component_ptrs(cg: FunctionCodegen, t: ScalarType, p):
    """Pointers to the real and imaginary part of complex elements."""
    lt = LLTYPE[t.name]
    one = cg.const_like(p, I64, 1) if is_vec(p) else ir.Constant(I64, 1)
    return p, cg.b.gep(p, [one], source_etype=lt)


#: llvm.prefetch's locality for each cache level a prefetch names (0 the closest):
#: prefetcht0 (L1), prefetcht1 (L2), prefetcht2 (L3); other levels are ignored
PREFETCH_LOCALITY = {0: 3, 1: 2, 2: 1}
#: prefetches of a column (or rows of one) written out; more are a loop
PREFETCH_UNROLLED = 16


def prefetch_block(cg: FunctionCodegen, m: MemVal, x, y, rows: int, cols: int,
                   level: int) -> None:
    """Prefetch hints for the block ``m[x:x+rows, y:y+cols]`` into cache ``level`` (the
    elements ``cooperative_matrix_prefetch`` names): one per cache line of each column
    where columns are contiguous (a static unit row stride), else one per element, the
    columns in a loop.  Nothing is checked: a prefetch reads nothing into the program and
    never faults, also outside the memref."""
    locality = PREFETCH_LOCALITY.get(level)
    if locality is None:
        return
    b = cg.b
    line = get_target("cpu").cache_line
    size = m.type.element.size
    et = elem_type(m.type.element)
    st0, st1 = (cg.ival(s) for s in m.stride)
    origin = b.gep(m.ptr, [b.add(b.mul(cg.ival(x), st0), b.mul(cg.ival(y), st1))],
                   source_etype=et)
    if m.type.stride[0] == 1:  # a column: a line at a time, and its last byte
        span = rows * size
        count, last, step, etype = -(-span // line), span - 1, ir.Constant(I64, line), I8
    else:  # each element
        count, last, step, etype = rows, None, st0, et

    def one(p, off) -> None:
        cg.intrinsic("llvm.prefetch", ir.VoidType(),
                     [b.gep(p, [off], source_etype=etype), ir.Constant(I32, 0),
                      ir.Constant(I32, locality), ir.Constant(I32, 1)], [PTR])

    def column(j: ir.Value) -> None:
        p = b.gep(origin, [b.mul(j, st1)], source_etype=et)
        if count <= PREFETCH_UNROLLED:
            for i in range(count):
                one(p, b.mul(ir.Constant(I64, i), step))
        else:
            column_loop(cg, count, lambda i: one(p, b.mul(i, step)))
        if last is not None and last % line:  # the line past the first's alignment
            one(p, ir.Constant(I64, last))

    column_loop(cg, cols, column)


def _align(t: ScalarType) -> int:
    return t.component.size if t.is_complex else t.size


def _short_lanes(lt: ir.Type, n: int) -> int:
    """Lanes to widen a masked store of n elements of type lt to: 16 bytes when n 8- or
    16-bit elements fill less.  LLVM 22 for x86 miscompiles such a store (the vector is
    promoted to wider elements first) whose mask it can fold to one lane into a scalar
    store of the promoted width: ``movl`` for an i16, overwriting the next element."""
    size = lt_size(lt)
    return 16 // size if size < 4 and n * size < 16 else n


def _masked_store(cg: FunctionCodegen, v, p, mask) -> None:
    lt = v.type.element
    if mask is None:
        cg.b.store(v, p, align=lt_size(lt))
        return
    n = v.type.count
    if lt == I16:
        # LLVM 22 for x86 folds a truncation (i32 -> i16, e.g. the rounding to bf16) into
        # the masked store, and a mask it can fold to one lane into a scalar store of the
        # *untruncated* width (``vmovd``), overwriting the next element at any length;
        # storing the same bits as half hides the truncation
        v = cg.b.bitcast(v, ir.VectorType(F16, n))
        lt = F16
    wide = _short_lanes(lt, n)
    if wide != n:  # the extra lanes are masked off: never written
        pick = VectorConstant(I32, [k if k < n else n for k in range(wide)])
        v = cg.b.shuffle_vector(v, zero_of(v.type), pick)
        mask = cg.b.shuffle_vector(mask, zero_of(mask.type), pick)
    cg.intrinsic("llvm.masked.store", ir.VoidType(), [v, p, ir.Constant(I32, lt_size(lt)), mask],
                 [v.type, PTR])


def _gather(cg: FunctionCodegen, lt: ir.Type, ptrs, mask):
    vt = cg.vt(lt)
    m = mask if mask is not None else cg.const_like(ptrs, I1, 1)
    return cg.intrinsic("llvm.masked.gather", vt, [ptrs, ir.Constant(I32, lt_size(lt)), m,
                                                   zero_of(vt)], [vt, ptrs.type])


def _scatter(cg: FunctionCodegen, v, ptrs, mask) -> None:
    m = mask if mask is not None else cg.const_like(ptrs, I1, 1)
    cg.intrinsic("llvm.masked.scatter", ir.VoidType(),
                 [v, ptrs, ir.Constant(I32, lt_size(v.type.element)), m], [v.type, ptrs.type])


def _interleave_masks(W: int):
    even = list(range(0, 2 * W, 2))
    odd = list(range(1, 2 * W, 2))
    inter = [k // 2 + (W if k % 2 else 0) for k in range(2 * W)]
    return even, odd, inter


def _contiguous(cg: FunctionCodegen, off: ir.Value):
    """(all lanes access consecutive elements, offset of lane 0) for an offset vector."""
    b = cg.b
    d = b.sub(off, cg.iota(I64))
    d0 = b.extract_element(d, ir.Constant(I32, 0))
    same = b.icmp_signed("==", d, cg.splat(d0))
    return cg.reduce_and(same), d0


def _first_offset(cg: FunctionCodegen, off: Lanes) -> ir.Value:
    """The offset of lane 0 of consecutive Lanes, as an i64 scalar."""
    first = ir.Constant(off.type, off.offsets[0])
    v = first if off.base is None else cg.scalar_op("add", off.base, first, off.type)
    return v if off.type.width == 64 else cg.b.sext(v, I64)


def _double_mask(cg: FunctionCodegen, mask):
    """A lane mask for the 2W components of W complex numbers."""
    if mask is None:
        return None
    return cg.b.shuffle_vector(mask, mask, VectorConstant(I32, [k // 2 for k in range(2 * cg.W)]))


def _load_contiguous(cg: FunctionCodegen, t: ScalarType, ptr, first, mask):
    """W consecutive elements from ptr + first."""
    b = cg.b
    lt = LLTYPE[t.name]
    p = _gep(cg, t, ptr, first)
    if not t.is_complex:
        return masked_load(cg, lt, p, mask, cg.W)
    even, odd, _ = _interleave_masks(cg.W)
    both = masked_load(cg, lt, p, _double_mask(cg, mask), 2 * cg.W)
    return Cplx(b.shuffle_vector(both, both, VectorConstant(I32, even)),
                b.shuffle_vector(both, both, VectorConstant(I32, odd)))


def _store_contiguous(cg: FunctionCodegen, t: ScalarType, value, ptr, first, mask) -> None:
    b = cg.b
    p = _gep(cg, t, ptr, first)
    if not t.is_complex:
        _masked_store(cg, value, p, mask)
        return
    _, _, inter = _interleave_masks(cg.W)
    both = b.shuffle_vector(value.re, value.im, VectorConstant(I32, inter))
    _masked_store(cg, both, p, _double_mask(cg, mask))


def _gathered(cg: FunctionCodegen, t: ScalarType, ptr, off, mask):
    lt = LLTYPE[t.name]
    ptrs = _gep(cg, t, cg.splat(ptr), off)
    if t.is_complex:
        pr, pi = _component_ptrs(cg, t, ptrs)
        return Cplx(_gather(cg, lt, pr, mask), _gather(cg, lt, pi, mask))
    return _gather(cg, lt, ptrs, mask)


def _scattered(cg: FunctionCodegen, t: ScalarType, value, ptr, off, mask) -> None:
    ptrs = _gep(cg, t, cg.splat(ptr), off)
    if t.is_complex:
        pr, pi = _component_ptrs(cg, t, ptrs)
        _scatter(cg, value.re, pr, mask)
        _scatter(cg, value.im, pi, mask)
    else:
        _scatter(cg, value, ptrs, mask)


def load_element(cg: FunctionCodegen, t: ScalarType, ptr, off: IndexLike, mask):
    """Load elements of type t at ptr + off (per lane when either varies).

    Lanes offsets of consecutive elements are a vector load; other varying offsets of a
    uniform pointer check at run time whether the lanes are consecutive (a vector load)
    or not (a gather)."""
    b = cg.b
    lt = LLTYPE[t.name]
    if not is_vec(ptr) and not is_vec(off):
        p = _gep(cg, t, ptr, off)
        if t.is_complex:
            pr, pi = _component_ptrs(cg, t, p)
            return Cplx(b.load(pr, typ=lt, align=_align(t)), b.load(pi, typ=lt, align=_align(t)))
        return b.load(p, typ=lt, align=_align(t))
    if is_vec(ptr):
        return _gathered(cg, t, ptr, off, mask)
    if isinstance(off, Lanes):
        if off.consecutive():
            return _load_contiguous(cg, t, ptr, _first_offset(cg, off), mask)
        return _gathered(cg, t, ptr, off, mask)
    contiguous, first = _contiguous(cg, off)
    fast, slow, merge = cg.block("load.contiguous"), cg.block("load.gather"), cg.block("load.merge")
    b.cbranch(contiguous, fast, slow)
    b.position_at_end(fast)
    fast_v = _load_contiguous(cg, t, ptr, first, mask)
    fast_end = b.block
    b.branch(merge)
    b.position_at_end(slow)
    slow_v = _gathered(cg, t, ptr, off, mask)
    slow_end = b.block
    b.branch(merge)
    b.position_at_end(merge)
    out = cg.phi(t, True)
    cg.add_incoming(out, fast_v, fast_end)
    cg.add_incoming(out, slow_v, slow_end)
    return out


def store_element(cg: FunctionCodegen, t: ScalarType, value, ptr, off: IndexLike, mask) -> None:
    b = cg.b
    if not is_vec(ptr) and not is_vec(off) and not cg.varying_repr(value):
        p = _gep(cg, t, ptr, off)
        if t.is_complex:
            pr, pi = _component_ptrs(cg, t, p)
            b.store(value.re, pr, align=_align(t))
            b.store(value.im, pi, align=_align(t))
        else:
            b.store(value, p, align=_align(t))
        return
    value = cg.splat(value)
    if is_vec(ptr):
        _scattered(cg, t, value, ptr, off, mask)
        return
    if isinstance(off, Lanes):
        if off.consecutive():
            _store_contiguous(cg, t, value, ptr, _first_offset(cg, off), mask)
        else:
            _scattered(cg, t, value, ptr, off, mask)
        return
    if not is_vec(off):  # a varying value stored to one element: the last lane wins
        _scattered(cg, t, value, ptr, cg.splat(cg.ival(off)), mask)
        return
    contiguous, first = _contiguous(cg, off)
    fast, slow, merge = cg.block("store.contiguous"), cg.block("store.scatter"), cg.block("store.merge")
    b.cbranch(contiguous, fast, slow)
    b.position_at_end(fast)
    _store_contiguous(cg, t, value, ptr, first, mask)
    b.branch(merge)
    b.position_at_end(slow)
    _scattered(cg, t, value, ptr, off, mask)
    b.branch(merge)
    b.position_at_end(merge)


def _index_list(cg: FunctionCodegen, inst: Instruction) -> list:
    return [cg.raw(v) for v in inst.slots["index"]]


def emit_load(cg: FunctionCodegen, inst: Instruction):
    src = cg.get(inst.slots["tensor"])
    index = _index_list(cg, inst)
    if isinstance(src, GroupVal):
        _derive(cg, inst, inst.slots["tensor"])
        return load_group(cg, src, index[0])
    if cg.checked:
        _check_access(cg, src, index)
        check_alive(cg, inst.slots["tensor"])
        _track(cg, inst, src, index)
    return load_element(cg, src.type.element, src.ptr, _offset(cg, src, index), cg.mask)


def load_group(cg: FunctionCodegen, g: GroupVal, i):
    b = cg.b
    t = g.type.memref
    if isinstance(i, Lanes):
        i = cg.vector(i)
    if cg.checked:
        iv, cv = cg.match(i, g.count)
        bad = b.or_(b.icmp_signed("<", iv, cg.const_like(iv, I64, 0)), b.icmp_signed(">=", iv, cv))
        cg.fail_if(bad, E_GROUP_INDEX, [iv, cv])
    mask = cg.mask
    if is_vec(i):
        ptrs = b.gep(cg.splat(g.ptrs), [i], source_etype=PTR)
        ptr = _gather(cg, PTR, ptrs, mask)
    else:
        ptr = b.load(b.gep(g.ptrs, [i], source_etype=PTR), typ=PTR)
    n = t.order
    base = cg.imul(i, 2 * n)
    shape: List[IndexLike] = []
    stride: List[IndexLike] = []
    for k in range(2 * n):
        static = t.shape[k] if k < n else t.stride[k - n]
        if static is not DYNAMIC:
            v: IndexLike = static
        else:
            off = cg.iadd(base, k)
            if is_vec(off):
                v = _gather(cg, I64, b.gep(cg.splat(g.dopes), [off], source_etype=I64), mask)
            else:
                v = b.load(b.gep(g.dopes, [cg.ival(off)], source_etype=I64), typ=I64)
        (shape if k < n else stride).append(v)
    return MemVal(ptr, shape, stride, t)


def emit_store(cg: FunctionCodegen, inst: Instruction):
    m = cg.get(inst.slots["tensor"])
    index = _index_list(cg, inst)
    _note_write(cg, inst)
    if cg.checked:
        _check_access(cg, m, index)
        check_alive(cg, inst.slots["tensor"])
        _track(cg, inst, m, index)
    store_element(cg, m.type.element, cg.get(inst.slots["value"]), m.ptr, _offset(cg, m, index),
                  cg.mask)


def _ordering(inst: Instruction) -> str:
    return "monotonic" if inst.modifier("semantics") == "relaxed" else "seq_cst"


def _int_bits(lt: ir.Type) -> ir.IntType:
    return ir.IntType(lt_size(lt) * 8) if not isinstance(lt, ir.IntType) else lt


def atomic_update(cg: FunctionCodegen, op: str, t: ScalarType, p, v, ordering: str):
    """One read-modify-write at the scalar pointer p; returns the old value."""
    b = cg.b
    lt = LLTYPE[t.name]
    if t.is_complex:  # component-wise (the spec allows this "pseudo-atomic" update)
        pr, pi = _component_ptrs(cg, t, p)
        return Cplx(b.atomic_rmw("fadd", pr, v.re, ordering), b.atomic_rmw("fadd", pi, v.im, ordering))
    if t.is_int:
        kind = {"add": "add", "max": "max", "min": "min"}[op]
        return b.atomic_rmw(kind, p, v, ordering)
    if op == "add" and t.name in ("f32", "f64"):
        return b.atomic_rmw("fadd", p, v, ordering)
    # a compare-exchange loop computing exactly what the non-atomic instruction computes
    it = _int_bits(lt)
    pre = b.block
    first = b.load_atomic(p, "monotonic", _align(t), typ=it)
    loop, done = cg.block("cas"), cg.block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(it)
    old.add_incoming(first, pre)
    old_v = old if lt == it else b.bitcast(old, lt)
    new_v = binary(cg, op, t, old_v, v)
    new = new_v if lt == it else b.bitcast(new_v, it)
    pair = b.cmpxchg(p, old, new, ordering, "monotonic")
    seen = b.extract_value(pair, 0)
    ok = b.extract_value(pair, 1)
    old.add_incoming(seen, b.block)
    b.cbranch(ok, done, loop)
    b.position_at_end(done)
    return old_v


def _atomic_pointers(cg: FunctionCodegen, inst: Instruction, writes: bool):
    """(element type, pointers (per lane where they vary)) of an atomic instruction's
    access, checked in checked code; a write is noted for the read-only check."""
    m = cg.get(inst.slots["tensor"])
    index = _index_list(cg, inst)
    if writes:
        _note_write(cg, inst)
    ptrs = _gep(cg, m.type.element, m.ptr, _offset(cg, m, index))
    if cg.checked:
        _check_access(cg, m, index)
        check_alive(cg, inst.slots["tensor"])
        _track(cg, inst, m, index, ptrs)
    return m.type.element, ptrs


def emit_atomic_update(cg: FunctionCodegen, inst: Instruction):
    t, ptrs = _atomic_pointers(cg, inst, writes=True)
    value = cg.get(inst.slots["value"])
    op = inst.opcode[len("atomic_"):]
    ordering = _ordering(inst)
    if not cg.spmd:
        return atomic_update(cg, op, t, ptrs, value, ordering)

    def one(lane):
        r = atomic_update(cg, op, t, cg.lane(ptrs, lane), cg.lane(value, lane), ordering)
        return parts(r)
    out = lane_loop(cg, cg.mask, one, cg.part_types(t, False))
    return cg.from_parts(t, out)


def _atomic_load_scalar(cg: FunctionCodegen, t: ScalarType, p, ordering: str):
    b = cg.b
    lt = LLTYPE[t.name]
    if t.is_complex:
        pr, pi = _component_ptrs(cg, t, p)
        return Cplx(b.load_atomic(pr, ordering, _align(t), typ=lt),
                    b.load_atomic(pi, ordering, _align(t), typ=lt))
    return b.load_atomic(p, ordering, _align(t), typ=lt)


def emit_atomic_load(cg: FunctionCodegen, inst: Instruction):
    t, ptrs = _atomic_pointers(cg, inst, writes=False)
    ordering = _ordering(inst)
    if not is_vec(ptrs):
        return _atomic_load_scalar(cg, t, ptrs, ordering)
    out = lane_loop(cg, cg.mask, lambda lane: parts(_atomic_load_scalar(
        cg, t, cg.b.extract_element(ptrs, lane), ordering)), cg.part_types(t, False))
    return cg.from_parts(t, out)


def _store_atomic(b: ir.IRBuilder, value, ptr, ordering: str, align: int) -> None:
    """``store atomic`` (IRBuilder.store_atomic needs typed pointers)."""
    from llvmlite.ir import instructions

    b._insert(instructions.StoreAtomicInstr(b.block, value, ptr, ordering, align))


def atomic_store_element(cg: FunctionCodegen, t: ScalarType, p, v, ordering: str) -> None:
    """An element v of type t stored atomically at p (a complex one component by
    component: each part is atomic, the pair is not)."""
    if t.is_complex:
        pr, pi = _component_ptrs(cg, t, p)
        _store_atomic(cg.b, v.re, pr, ordering, _align(t))
        _store_atomic(cg.b, v.im, pi, ordering, _align(t))
    else:
        _store_atomic(cg.b, v, p, ordering, _align(t))


def emit_atomic_store(cg: FunctionCodegen, inst: Instruction):
    t, ptrs = _atomic_pointers(cg, inst, writes=True)
    ordering = _ordering(inst)
    value = cg.get(inst.slots["value"])

    def store(p, v):
        atomic_store_element(cg, t, p, v, ordering)

    if not is_vec(ptrs) and not cg.varying_repr(value):
        store(ptrs, value)
        return None

    def one(lane):
        store(cg.lane(ptrs, lane), cg.lane(value, lane))
        return []
    lane_loop(cg, cg.mask, one, [])
    return None


def emit_alloca(cg: FunctionCodegen, inst: Instruction):
    t: MemrefType = inst.results[0].type
    align = (inst.attrs.get("attributes") or {}).get("alignment") or 64
    align = max(int(align), 64)
    offset = -(-cg.local_bytes // align) * align
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride))
    cg.local_bytes = offset + extent * t.element.size
    name = inst.results[0].name
    cg.allocas[inst.results[0]] = len(cg.locals)
    if cg.checked and any(i.opcode == "lifetime_stop" for i in cg.func.body.walk()):
        # the slot lives in the entry block (an alloca in the loop over work-groups would
        # grow the stack with every work-group); alive from here on
        entry = ir.IRBuilder(cg.fn.entry_basic_block)
        entry.position_at_start(cg.fn.entry_basic_block)
        slot = cg.lifetimes[len(cg.locals)] = entry.alloca(I64, name="ended")
        cg.b.store(ir.Constant(I64, -1), slot)
    cg.locals.append((offset, extent * t.element.size, t.element.size,
                      f"%{name}" if name is not None else None))
    ptr = cg.b.gep(cg.local, [ir.Constant(I64, offset)], source_etype=I8)
    cg.roots[inst.results[0]] = None
    return MemVal(ptr, list(t.shape), list(t.stride), t)


def emit_lifetime_stop(cg: FunctionCodegen, inst: Instruction):
    """Unchecked: nothing (the memory stays the kernel's); checked code notes which
    instruction ended the alloca's lifetime, for ``check_alive``."""
    slot = cg.lifetimes.get(cg.allocas.get(inst.slots["object"], -1))
    if slot is not None:
        cg.b.store(ir.Constant(I64, cg.inst_id(inst)), slot)
    return None


def check_alive(cg: FunctionCodegen, memref: Value) -> None:
    """Checked code: report (E_LIFETIME) an access through a view of an alloca whose
    lifetime a lifetime_stop ended, naming the first active work-item in SPMD code."""
    k = cg.allocas.get(memref, -1)
    slot = cg.lifetimes.get(k)
    if slot is None:
        return
    b = cg.b
    ended = b.load(slot, typ=I64)
    lane = None
    if cg.spmd:
        lane = cg.first_lane(cg.mask) if cg.mask is not None else ir.Constant(I32, 0)
    saved, cg.mask = cg.mask, None
    cg.fail_if(b.icmp_signed(">=", ended, ir.Constant(I64, 0)), E_LIFETIME,
               [ended, ir.Constant(I64, k)], lane=lane)
    cg.mask = saved


def emit_associated(cg: FunctionCodegen, inst: Instruction):
    x = cg.get(inst.slots["tensor"])
    if isinstance(x, GroupVal):
        return x.assoc
    b = cg.b
    if is_vec(x.ptr):
        return b.icmp_unsigned("!=", b.ptrtoint(x.ptr, cg.vt(I64)), cg.const_like(x.ptr, I64, 0))
    return b.icmp_unsigned("!=", x.ptr, zero_of(PTR))


def emit_size(cg: FunctionCodegen, inst: Instruction):
    x = cg.get(inst.slots["tensor"])
    if isinstance(x, GroupVal):
        return x.count
    return cg.ival(x.shape[inst.attrs["mode"]])


def _static_or(dim, computed: IndexLike) -> IndexLike:
    return dim if dim is not DYNAMIC else computed


def emit_subview(cg: FunctionCodegen, inst: Instruction):
    m: MemVal = cg.get(inst.slots["tensor"])
    rt: MemrefType = inst.results[0].type
    off: IndexLike = 0
    shape: List[IndexLike] = []
    stride: List[IndexLike] = []
    for mode, (o, size) in enumerate(inst.slots["slices"]):
        if cg.checked:
            _check_slice(cg, mode, cg.index_of(o), size if isinstance(size, int) else
                         cg.get(size), not isinstance(size, int), m.shape[mode])
        off = cg.iadd(off, cg.imul(cg.index_of(o), m.stride[mode]))
        if isinstance(size, int) and size == 0:
            continue
        shape.append(size if isinstance(size, int) else cg.get(size))
        stride.append(m.stride[mode])
    shape = [_static_or(d, s) for d, s in zip(rt.shape, shape)]
    stride = [_static_or(d, s) for d, s in zip(rt.stride, stride)]
    _derive(cg, inst, inst.slots["tensor"])
    return MemVal(_gep(cg, m.type.element, m.ptr, off), shape, stride, rt)


def _check_slice(cg: FunctionCodegen, mode: int, off: IndexLike, size: IndexLike,
                 dynamic: bool, extent: IndexLike) -> None:
    """Checked code: the spec's rules of a slice (as the interpreter's ``_check_slice``):
    offset non-negative, size positive where dynamic, the slice inside the mode."""
    b = cg.b
    o, n, e = cg.match(cg.ival(off), cg.ival(size), cg.ival(extent))
    zero, one = cg.const_like(o, I64, 0), cg.const_like(o, I64, 1)
    end = b.add(o, b.select(b.icmp_signed("<", n, one), one, n))
    bad = b.or_(b.or_(b.icmp_signed("<", n, zero), b.icmp_signed("<", o, zero)),
                b.icmp_signed(">", end, e))
    if dynamic:
        bad = b.or_(bad, b.icmp_signed("==", n, zero))
    cg.fail_if(bad, E_SUBVIEW, [ir.Constant(I64, mode), o, n, e, ir.Constant(I64, int(dynamic))])


def emit_check_shapes(cg: FunctionCodegen, inst: Instruction) -> None:
    """Checked code: the BLAS shape rules (``blas_shape_rules``) on the sizes at run time;
    the error record carries the sizes, from which the message is made
    (``module._broken_shape_rule``).  Unchecked code tests nothing."""
    if not cg.checked:
        return
    b = cg.b
    sizes = [cg.ival(cg.get(v)) for v in inst.slots["sizes"]]
    shapes = shapes_of(inst.attrs["orders"], range(len(sizes)))
    bad = ir.Constant(I1, 0)
    for left, right, _ in blas_shape_rules(inst.modifier("rule"), shapes, inst.modifier("ta"),
                                           inst.modifier("tb")):
        for i, j in zip(left, right):
            bad = b.or_(bad, b.icmp_signed("!=", sizes[i], sizes[j]))
    cg.fail_if(bad, E_SHAPES, sizes[:ERR_DETAILS])


def emit_expand(cg: FunctionCodegen, inst: Instruction):
    m: MemVal = cg.get(inst.slots["tensor"])
    mode = inst.attrs["mode"]
    dims = [e if isinstance(e, int) else cg.get(e) for e in inst.slots["shape"]]
    strides, s = [], m.stride[mode]
    for d in dims:
        strides.append(s)
        s = cg.imul(s, d)
    if cg.checked:
        total: IndexLike = 1
        for d in dims:
            total = cg.imul(total, d)
        if not (isinstance(total, int) and isinstance(m.shape[mode], int)):
            tv, sv = cg.match(cg.ival(total), cg.ival(m.shape[mode]))
            cg.fail_if(cg.b.icmp_signed("!=", tv, sv), E_EXPAND, [tv, sv])
    shape = m.shape[:mode] + dims + m.shape[mode + 1:]
    stride = m.stride[:mode] + strides + m.stride[mode + 1:]
    return _view(cg, inst, m.ptr, shape, stride)


def _view(cg: FunctionCodegen, inst: Instruction, ptr, shape, stride) -> MemVal:
    """The result of expand/fuse: static entries of the result type win over computed ones."""
    rt: MemrefType = inst.results[0].type
    shape = [_static_or(d, x) for d, x in zip(rt.shape, shape)]
    stride = [_static_or(d, x) for d, x in zip(rt.stride, stride)]
    _derive(cg, inst, inst.slots["tensor"])
    return MemVal(ptr, shape, stride, rt)


def emit_fuse(cg: FunctionCodegen, inst: Instruction):
    m: MemVal = cg.get(inst.slots["tensor"])
    lo, hi = inst.attrs["from"], inst.attrs["to"]
    size: IndexLike = 1
    for d in m.shape[lo:hi + 1]:
        size = cg.imul(size, d)
    if cg.checked:
        for k in range(lo, hi):
            prod = cg.imul(m.stride[k], m.shape[k])
            if isinstance(prod, int) and isinstance(m.stride[k + 1], int):
                continue
            pv, sv = cg.match(cg.ival(prod), cg.ival(m.stride[k + 1]))
            cg.fail_if(cg.b.icmp_signed("!=", pv, sv), E_FUSE, [ir.Constant(I64, k)])
    shape = m.shape[:lo] + [size] + m.shape[hi + 1:]
    stride = m.stride[:lo + 1] + m.stride[hi + 1:]
    return _view(cg, inst, m.ptr, shape, stride)


#: the memory instructions on elements and memref descriptors
EMITTERS: Dict[str, Callable] = {
    "load": emit_load,
    "store": emit_store,
    **dict.fromkeys(("atomic_add", "atomic_max", "atomic_min"), emit_atomic_update),
    "atomic_load": emit_atomic_load,
    "atomic_store": emit_atomic_store,
    "alloca": emit_alloca,
    "lifetime_stop": emit_lifetime_stop,
    "associated": emit_associated,
    "size": emit_size,
    "subview": emit_subview,
    "check_shapes": emit_check_shapes,
    "expand": emit_expand,
    "fuse": emit_fuse,
}
