"""Checked SPIR-V: barriers not reached by every work-item of the work-group (E_BARRIER),
found before they are reached.

A real barrier reached by part of a work-group hangs or is undefined, so checked code
cannot wait for one: it tests the control flow that leads to it.  A barrier is reached
by the whole work-group exactly when every ``if`` condition and ``for`` loop condition
on the way to it is uniform across the work-group.  So, in SPMD code, each ``if`` and
each ``for`` whose body contains a barrier tests its condition with work-group
collectives (OpGroupAny, OpGroupAll, Workgroup scope), which every work-item reaches:
the kernel's collective code is uniform, and the ``if`` or ``for`` around this one was
tested first.  When some work-items take the branch (enter the next iteration) and
others do not, the work-item of lowest linear id that does not arrive reports the first
barrier inside, naming the lowest that does (as the interpreter does), and the whole
work-group leaves the kernel, which every work-item knows since the collectives' results
are uniform.  Conditions that are arguments or constants are uniform and not tested.

The finding is made where the work-group parts, before the instructions of the branch
run: a barrier that the branch would skip (a loop of no iterations around it, an inner
branch nobody takes) is reported all the same, and a finding the interpreter would make
in the branch before reaching the barrier is not.
"""
from __future__ import annotations

from typing import Optional

from ...ir.core import Instruction, Region, Value
from ...runtime.findings import E_BARRIER
from . import checks
from .builder import Enum
from .function import Kernel

WORKGROUP = 2  # Scope Workgroup


def first_barrier(region: Optional[Region]) -> Optional[Instruction]:
    if region is None:
        return None
    return next((i for i in region.walk() if i.opcode == "barrier"), None)


def _uniform(v: Value) -> bool:
    return v.owner is None or v.owner.opcode == "constant"


def test_if(k: Kernel, inst: Instruction) -> None:
    """Before an ``if`` in checked SPMD code: if a barrier is inside, a work-group that
    parts at the condition reports it and leaves the kernel.  The then-branch's barrier
    is named if it has one (the interpreter runs that branch first), else the
    else-branch's."""
    cond = inst.slots["condition"]
    if not k.checked or not k.spmd or _uniform(cond):
        return
    then = first_barrier(inst.regions[0])
    other = first_barrier(inst.regions[1]) if len(inst.regions) > 1 else None
    if then is None and other is None:
        return
    arrive = k.get(cond)
    if then is None:
        arrive = k.op("LogicalNot", k.m.type_bool(), arrive)
    leave_if(k, parted(k, arrive), arrive, then or other)


def loop_has_barrier(k: Kernel, inst: Instruction) -> Optional[Instruction]:
    """The barrier a ``for`` of checked SPMD code must test its condition for (None: no
    test)."""
    slots = [inst.slots[s] for s in ("from", "to", "step") if s in inst.slots]
    if not k.checked or not k.spmd or all(_uniform(v) for v in slots):
        return None
    return first_barrier(inst.regions[0])


def parted(k: Kernel, arrive: int) -> int:
    """Whether some work-items of the work-group arrive and some do not (uniform)."""
    bt, scope = k.m.type_bool(), k.c32(WORKGROUP)
    some = k.op("GroupAny", bt, scope, arrive)
    every = k.op("GroupAll", bt, scope, arrive)
    return k.op("LogicalAnd", bt, some, k.op("LogicalNot", bt, every))


def leave_if(k: Kernel, part: int, arrive: int, barrier: Instruction) -> None:
    """Where the work-group parts (``part``, uniform): the lowest work-item that does not
    arrive at ``barrier`` reports it, naming the lowest that does; then the whole
    work-group returns."""
    i64, bt = k.i64(), k.m.type_bool()
    report, merge = k.m.id(), k.m.id()
    k.op("SelectionMerge", None, merge, Enum("SelectionControl", "None"))
    k.op("BranchConditional", None, part, report, merge)
    k.block(report)
    me, none = checks.work_item(k, True), k.c64(k.cfg.lanes)
    scope, reduce = k.c32(WORKGROUP), Enum("GroupOperation", "Reduce")
    absent = k.op("GroupSMin", i64, scope, reduce, k.op("Select", i64, arrive, none, me))
    arrived = k.op("GroupSMin", i64, scope, reduce, k.op("Select", i64, arrive, me, none))
    current, k.current = k.current, barrier
    checks.fail_if(k, k.op("IEqual", bt, me, absent), E_BARRIER, [arrived])
    k.current = current
    k.op("Return", None)
    k.block(merge)

