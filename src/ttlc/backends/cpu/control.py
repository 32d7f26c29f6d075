"""Control flow on the CPU: parallel regions, for, if and barrier.

Uniform control flow is LLVM control flow; divergent control flow (a varying condition
or loop bounds) runs under a lane mask and merges its values with ``select``, and a loop
over work-items keeps its variable as ``Lanes``.  A uniform loop lets the back end's
loop carriers (``FunctionCodegen.loop_carriers``) hold carried values elsewhere, and one
carrying the accumulators of tiles whose A is taken a register at a time stays a loop
(``mul_add.rolled``: LLVM's unrolled code spilled them).
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

from llvmlite import ir

from ...analysis.effects import DISJOINT
from ...ir.core import Instruction
from ...ir.types import CoopMatrixType
from . import columns, coop, mul_add, races
from ...runtime.findings import E_BARRIER, E_STEP
from .function import FunctionCodegen, not_unrolled
from .phases import Phases
from .values import I1, I64, LLTYPE, Cplx, Lanes, is_vec


def select(cg: FunctionCodegen, cond, a, c):
    """a where cond, else c (per lane when cond varies): the merge of divergent paths."""
    if hasattr(a, "mats"):
        return coop.select(cg, cond, a, c)
    if isinstance(a, Cplx):
        return Cplx(select(cg, cond, a.re, c.re), select(cg, cond, a.im, c.im))
    cond, a, c = cg.match(cond, a, c)
    return cg.b.select(cond, a, c)


def emit_parallel(cg: FunctionCodegen, inst: Instruction):
    """An SPMD region; checked code looks for data races in it unless it is a lowered BLAS
    instruction (``DISJOINT``: none can happen there)."""
    saved, saved_races = cg.spmd, cg.races
    cg.spmd = True
    if inst.attrs.get(DISJOINT):
        cg.races = None
    elif cg.races is not None:  # checked code accessing local memory
        races.interval(cg)
    try:
        if cg.subgroup_loop > 1:  # one subgroup after the other, phase by phase
            saved_mask, cg.mask = cg.mask, None
            try:
                Phases(cg, inst.regions[0])
            finally:
                cg.mask = saved_mask
        else:
            cg.emit_region(inst.regions[0], None, keep_mask=False)
    finally:
        cg.spmd, cg.races = saved, saved_races
    return None


def emit_for(cg: FunctionCodegen, inst: Instruction):
    """A loop: uniform bounds loop as usual; varying bounds loop while any lane is active.

    A varying loop whose start is Lanes (``for %i = %work_item, %n, %W``, the loops
    lower-foreach makes) and whose end and step are uniform keeps its variable as Lanes
    with a uniform base, so that accesses through it stay vector loads and stores.  Its
    lanes all advance together; a lane that has left the range stays inactive (a sticky
    mask), which is what freezing it (the interpreter) means for everything observable."""
    b = cg.b
    body = inst.regions[0]
    lt = inst.slots["from"].type
    ll = LLTYPE[lt.name]
    raw_lo = cg.raw(inst.slots["from"])
    hi = cg.get(inst.slots["to"])
    step = cg.get(inst.slots["step"]) if "step" in inst.slots else ir.Constant(ll, 1)
    inits = [cg.get(v) for v in inst.slots.get("init", [])]
    types = [r.type for r in inst.results]
    res_var = [r in cg.varying for r in inst.results]
    varying = cg.spmd and (body.args[0] in cg.varying
                           or any(is_vec(x) for x in (raw_lo, hi, step)))
    affine = varying and isinstance(raw_lo, Lanes) and not is_vec(hi) and not is_vec(step)
    if varying:
        res_var = [True] * len(types)
        hi, step = cg.splat(hi), (step if affine else cg.splat(step))
    lo = raw_lo if affine else (cg.splat(raw_lo) if varying else cg.get(inst.slots["from"]))
    inits = [cg.coerce(x, v) for x, v in zip(inits, res_var)]
    held = {} if varying else {k: c for claim in cg.loop_carriers
                               for k, c in claim(cg, inst).items()}
    copies = max([c.unroll for c in held.values()], default=1)
    trip = [x.constant for x in (lo, hi, step) if isinstance(x, ir.Constant)]
    if copies > 1 and not (len(trip) == 3 and trip[2] > 0
                           and max(0, -(-(trip[1] - trip[0]) // trip[2])) % copies == 0):
        copies = 1
    held = {k: c.enter(cg, inits[k], copies) for k, c in held.items()}
    prev0 = cg.mask if cg.mask is not None else ir.Constant(cg.vt(I1), [1] * cg.W)
    pre = b.block
    header, body_bb, done = cg.block("for"), cg.block("for.body"), cg.block("for.done")
    b.branch(header)
    b.position_at_end(header)
    if affine:
        i = b.phi(ll, name="i.base")
        i.add_incoming(lo.base if lo.base is not None else ir.Constant(ll, 0), pre)
        prev = b.phi(cg.vt(I1), name="active")
        prev.add_incoming(prev0, pre)
        var = Lanes(i, lo.offsets, ll)
    else:
        i = b.phi(lo.type, name="i")
        i.add_incoming(lo, pre)
        var = i
    carried = []
    for k, (t, v, x) in enumerate(zip(types, res_var, inits)):
        if k in held:
            held[k].header(cg, pre)
            carried.append(held[k])
            continue
        p = cg.phi(t, v)
        cg.add_incoming(p, x, pre)
        carried.append(p)
    if affine:
        active = b.and_(prev, b.icmp_signed("<", cg.vector(var), hi))
        b.cbranch(cg.reduce_or(active), body_bb, done)
    elif varying:
        active = cg.and_mask(cg.mask, b.icmp_signed("<", i, hi))
        b.cbranch(cg.reduce_or(active), body_bb, done)
    else:
        active = None
        b.cbranch(b.icmp_signed("<", i, hi), body_bb, done)
    b.position_at_end(body_bb)
    first_block = len(cg.fn.blocks)
    if cg.checked:
        zero = cg.const_like(step, ll, 0)
        saved = cg.mask
        cg.mask = active if varying else cg.mask
        cg.fail_if(b.icmp_signed("<=", step, zero), E_STEP, [step])
        cg.mask = saved
    cg.env[body.args[0]] = var
    for a, p in zip(body.args[1:], carried):
        cg.env[a] = p
    out = (cg.emit_region(body, active) if varying else cg.emit_region(body)) or []
    i_last = i
    for _ in range(1, copies):  # (uniform loops only: held is empty otherwise)
        i_last = b.add(i_last, step)
        cg.env[body.args[0]] = i_last
        for k, (a, o, v) in enumerate(zip(body.args[1:], out, res_var)):
            cg.env[a] = o if k in held else cg.coerce(o, v)
        out = cg.emit_region(body) or []
    if varying:
        new = [select(cg, active, cg.coerce(o, True), c) for o, c in zip(out, carried)]
        nxt = b.add(i, step) if affine else b.select(active, b.add(i, step), i)
    else:
        new = [o if k in held else cg.coerce(o, v) for k, (o, v) in enumerate(zip(out, res_var))]
        nxt = b.add(i_last, step)
    end = b.block
    i.add_incoming(nxt, end)
    if affine:
        prev.add_incoming(active, end)
    for k, (p, v) in enumerate(zip(carried, new)):
        if k in held:
            held[k].latch(cg, end)
        else:
            cg.add_incoming(p, v, end)
    latch = b.branch(header)
    if mul_add.rolled([t for k, t in enumerate(types) if k not in held]) or \
            any(c.rolled for c in held.values()) or \
            any(i.opcode == "for" and stays_loop(i) for i in body.walk()) or \
            _holds_rolled_loop(cg.fn.blocks[first_block:]) or short_tile_loop(inst):
        not_unrolled(latch)
    b.position_at_end(done)
    return [held[k].leave(cg) if k in held else p for k, p in enumerate(carried)]


def _holds_rolled_loop(blocks) -> bool:
    """Some block of a loop's body ends a loop LLVM is told not to unroll (``not_unrolled``:
    a held accumulator's K loop, the column loops of ``columns``): unrolling the loop
    around it would copy it whole, as ``stays_loop`` says (a bf16 64^3 gemm on AMX: eight
    copies of its K loop, 1.7x the compile time)."""
    return any(blk.terminator is not None and "llvm.loop" in blk.terminator.metadata
               for blk in blocks)


#: loops of at least this many iterations are taken to stay loops in LLVM
LONG_LOOP = 8
#: a loop carrying a coopmatrix (a tile's K loop) of at least this many steps, and fewer
#: than LONG_LOOP, is kept a loop (``short_tile_loop``)
SHORT_TILE_LOOP = 3


def _trip_count(loop: Instruction) -> Optional[int]:
    """The iterations of a ``for`` of constant bounds and positive step; None otherwise."""
    bounds = [loop.slots[k] for k in ("from", "to", "step") if k in loop.slots]
    values = [v.owner.attrs["value"] if v.owner is not None and v.owner.opcode == "constant"
              else None for v in bounds]
    if None in values:
        return None
    start, end, step = values if len(values) == 3 else values + [1]
    return max(0, -(-(end - start) // step)) if step > 0 else None


def short_tile_loop(loop: Instruction) -> bool:
    """Whether `loop` carries a coopmatrix (a tile's K loop) over SHORT_TILE_LOOP to
    LONG_LOOP - 1 steps: LLVM is told not to unroll it (``not_unrolled``), nor the loops
    around it (``stays_loop``).  LLVM unrolls such a loop fully -- the chains' second
    product, K = 9 in four steps of two and one of one: four copies of each tile's
    microkernel -- and its later passes and instruction selection take as long on every
    copy, while the tile runs as fast as a loop (a branch per step of 10-30 FMAs): cold
    compile of f32 56x56.56x9.9x9 95 -> 80 ms, 84x84.84x9.9x9 94 -> 84, f64 1x56x56
    24-26 -> 20-21, with products of L2 and of L3 at the same speed."""
    steps = _trip_count(loop)
    return (steps is not None and SHORT_TILE_LOOP <= steps < LONG_LOOP
            and any(isinstance(r.type, CoopMatrixType) for r in loop.results))


def stays_loop(loop: Instruction) -> bool:
    """Whether a ``for`` stays a loop in LLVM, and so does every loop around it (LLVM's
    unroller told not to unroll them, ``not_unrolled``): one carrying the accumulator of a
    tile whose A is taken a register at a time (``mul_add.rolled``), a tile's K loop of a
    few steps (``short_tile_loop``), or one of an unknown or long trip count
    (``LONG_LOOP``).  Unrolling a loop around such a loop -- LLVM
    unrolls loops of a few iterations fully, a gemm's loops over its tiles around the K
    loop -- copies the inner loop whole: no faster (the K loop does the work, the outer
    loop's branch is one per tile), but LLVM's later passes and instruction selection
    take as long on every copy (f32 84x84.84x9.9x9 without AVX-512: six copies of each K
    loop, half of its compile)."""
    if mul_add.rolled([r.type for r in loop.results]) or short_tile_loop(loop):
        return True
    steps = _trip_count(loop)
    return steps is None or steps >= LONG_LOOP


def emit_if(cg: FunctionCodegen, inst: Instruction):
    b = cg.b
    cond = cg.get(inst.slots["condition"])
    then_r = inst.regions[0]
    else_r = inst.regions[1] if len(inst.regions) > 1 else None
    types = [r.type for r in inst.results]
    res_var = [r in cg.varying for r in inst.results]
    if not is_vec(cond):
        # a result the first branch yields as Columns (an AMX product's, only updated and
        # stored) stays in memory: a phi of buffers (``columns.merge``)
        in_memory: list = [None] * len(types)

        def leave(out) -> list:
            vals = []
            for k, (o, v) in enumerate(zip(out, res_var)):
                if in_memory[k] is None:
                    in_memory[k] = isinstance(o, columns.Columns)
                if in_memory[k]:
                    o = columns.settle(cg, o)
                elif isinstance(o, columns.Columns):  # (the other branch's is a vector)
                    o = o.materialize(cg)
                vals.append(o if in_memory[k] else cg.coerce(o, v))
            return vals
        then_bb = cg.block("then")
        else_bb = cg.block("else") if else_r is not None else None
        merge = cg.block("endif")
        b.cbranch(cond, then_bb, else_bb or merge)
        incoming = []
        b.position_at_end(then_bb)
        incoming.append((leave(cg.emit_region(then_r) or []), b.block))
        b.branch(merge)
        if else_bb is not None:
            b.position_at_end(else_bb)
            incoming.append((leave(cg.emit_region(else_r) or []), b.block))
            b.branch(merge)
        b.position_at_end(merge)
        results = []
        for k, (t, v) in enumerate(zip(types, res_var)):
            if in_memory[k]:
                results.append(columns.merge(cg, [(vals[k], blk) for vals, blk in incoming]))
                continue
            branches = [(vals[k], blk) for vals, blk in incoming]
            held = mul_add.merged_pieces(cg, branches, t) or mul_add.merged_columns(cg, branches, t)
            if held is not None:
                results.append(held)
                continue
            p = cg.phi(t, v)
            for vals, blk in incoming:
                cg.add_incoming(p, vals[k], blk)
            results.append(p)
        return results
    # divergent: each side runs under its mask, when any of its lanes is active
    then_mask = cg.and_mask(cg.mask, cond)
    not_cond = b.xor(cond, cg.const_like(cond, I1, 1))
    else_mask = cg.and_mask(cg.mask, not_cond)

    def side(region, mask, name):
        if region is None:
            return [cg.zero(t, True) for t in types]
        pre = b.block
        run, after = cg.block(name), cg.block(name + ".end")
        b.cbranch(cg.reduce_or(mask), run, after)
        b.position_at_end(run)
        out = cg.emit_region(region, mask) or []
        out = [cg.coerce(o, True) for o in out]
        end = b.block
        b.branch(after)
        b.position_at_end(after)
        vals = []
        for t, o in zip(types, out):
            p = cg.phi(t, True)
            cg.add_incoming(p, o, end)
            cg.add_incoming(p, cg.zero(t, True), pre)
            vals.append(p)
        return vals

    then_vals = side(then_r, then_mask, "then")
    else_vals = side(else_r, else_mask, "else")
    return [select(cg, cond, tv, ev) for tv, ev in zip(then_vals, else_vals)]



def emit_barrier(cg: FunctionCodegen, inst: Instruction):
    if cg.checked and cg.mask is not None:
        b = cg.b
        first64 = b.zext(cg.first_lane(cg.mask), I64)
        missing = b.xor(cg.mask, cg.const_like(cg.mask, I1, 1))
        saved = cg.mask
        cg.mask = None
        cg.fail_if(missing, E_BARRIER, [first64])
        cg.mask = saved
    if cg.spmd and cg.races is not None:
        races.barrier(cg, inst)
    return None


#: the control-flow instructions
EMITTERS: Dict[str, Callable] = {
    "parallel": emit_parallel,
    "for": emit_for,
    "if": emit_if,
    "barrier": emit_barrier,
    "check_iteration": races.emit_check_iteration,
}
