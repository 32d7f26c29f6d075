"""Control flow in SPIR-V's structured form: ``for`` as a loop with a header (OpPhi for
the loop variable and the loop-carried values, OpLoopMerge), a body and a continue block;
``if`` as a selection (OpSelectionMerge) whose results are OpPhi in the merge block;
``parallel`` inline (every work-item runs the region); ``barrier`` as OpControlBarrier.

A loop-carried or yielded coopmatrix is one OpPhi per component.
"""
from __future__ import annotations

from typing import Callable, Dict, List

from ...ir.core import Instruction
from . import barriers, checks, races
from .builder import Enum, Inst
from .function import Kernel


def _phis(k: Kernel, types: List[int]) -> List[Inst]:
    out = []
    for t in types:
        k.m.add("function", "Phi", t, k.m.id())
        out.append(k.m.sections["function"][-1])
    return out


def emit_for(k: Kernel, inst: Instruction):
    region = inst.regions[0]
    iv_t = inst.slots["from"].type
    t = k.scalar(iv_t)
    lo, hi = k.get(inst.slots["from"]), k.get(inst.slots["to"])
    step = k.get(inst.slots["step"]) if "step" in inst.slots else k.const(t, 1, iv_t.bits)
    if k.checked and "step" in inst.slots:
        hi = checks.loop_step(k, lo, hi, step, iv_t.bits)
    carried_types = [v.type for v in inst.slots.get("init", [])]
    init = k.flatten([k.get(v) for v in inst.slots.get("init", [])])
    header, body, cont, merge = (k.m.id() for _ in range(4))
    pre = k.label
    k.branch(header)
    k.block(header)
    phis = _phis(k, [t] + [p for c in carried_types for p in k.part_types(c)])
    cond = k.op("SLessThan", k.m.type_bool(), phis[0].result, hi)
    barrier = barriers.loop_has_barrier(k, inst)
    if barrier is not None:  # checked: the work-group leaves the loop if it parts
        part = barriers.parted(k, cond)
        arrive, cond = cond, k.op("LogicalAnd", k.m.type_bool(), cond,
                                  k.op("LogicalNot", k.m.type_bool(), part))
    k.op("LoopMerge", None, merge, cont, Enum("LoopControl", "None"))
    k.op("BranchConditional", None, cond, body, merge)
    k.block(body)
    k.values[region.args[0]] = phis[0].result
    ids = iter([p.result for p in phis[1:]])
    current = [k.rebuild(c, ids) for c in carried_types]
    for arg, v in zip(region.args[1:], current):
        k.values[arg] = v
    yielded = k.flatten(k.emit_region(region))
    k.branch(cont)
    k.block(cont)
    nxt = k.op("IAdd", t, phis[0].result, step)
    k.branch(header)
    for p, a, b in zip(phis, [lo] + init, [nxt] + yielded):
        p.operands = [a, pre, b, cont]
    k.block(merge)
    if barrier is not None:
        barriers.leave_if(k, part, arrive, barrier)
    return tuple(current)


def emit_if(k: Kernel, inst: Instruction):
    types = [v.type for v in inst.results]
    then, merge = k.m.id(), k.m.id()
    other = k.m.id() if len(inst.regions) > 1 else merge
    barriers.test_if(k, inst)
    k.op("SelectionMerge", None, merge, Enum("SelectionControl", "None"))
    k.op("BranchConditional", None, k.get(inst.slots["condition"]), then, other)
    incoming = []
    for label, region in zip((then, other), inst.regions):
        k.block(label)
        yielded = k.flatten(k.emit_region(region))
        incoming.append((yielded, k.label))
        k.branch(merge)
    k.block(merge)
    if not types:
        return ()
    phis = _phis(k, [p for t in types for p in k.part_types(t)])
    for j, p in enumerate(phis):
        p.operands = [x for yielded, label in incoming for x in (yielded[j], label)]
    ids = iter([p.result for p in phis])
    return tuple(k.rebuild(t, ids) for t in types)


def emit_parallel(k: Kernel, inst: Instruction):
    shadow = races.enter_parallel(k, inst)
    k.spmd += 1
    k.emit_region(inst.regions[0])
    k.spmd -= 1
    k.races = shadow


def emit_barrier(k: Kernel, inst: Instruction):
    """OpControlBarrier over the work-group; the fences the modifiers name (both when
    none is named, as the language's barrier fences global and local memory)."""
    g, l = inst.modifier("global"), inst.modifier("local")
    if not g and not l:
        g = l = True
    sem = ["AcquireRelease"] + (["CrossWorkgroupMemory"] if g else []) + \
          (["WorkgroupMemory"] if l else [])
    wg = k.c32(2)  # Scope Workgroup
    k.op("ControlBarrier", None, wg, wg,
         k.c32(Enum("MemorySemantics", "|".join(sem)).value))
    races.barrier(k, inst)


def emit_lifetime_stop(k: Kernel, inst: Instruction):
    """Nothing (the memory of an alloca is a Workgroup variable of its own); checked code
    notes that the alloca's lifetime ended (``checks.lifetime_stop``)."""
    if k.checked:
        checks.lifetime_stop(k, inst)


EMITTERS: Dict[str, Callable] = {
    "for": emit_for,
    "if": emit_if,
    "parallel": emit_parallel,
    "barrier": emit_barrier,
    "lifetime_stop": emit_lifetime_stop,
    "check_iteration": races.emit_check_iteration,
}
