"""The findings of checked code compiled for a machine (targets cpu and opencl): the error
record the code writes and the ``KernelError`` the host makes of it.

Compiled checked code reports its first finding as a record of ``ERR_SLOTS`` int64s: the
code (``E_*``, 0: none), the work-group id (x, y, z), the instruction (an index into the
kernel's table of ``InstRef``), the work-item (its linear id in the work-group, -1 in
collective code) and up to ``ERR_DETAILS`` values whose meaning depends on the code.
``kernel_error`` words it as the interpreter words the same finding, so that a fault reads
the same on every target.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np

from ..analysis.effects import RACE_CLASSES, race_message
from ..diagnostics import KernelError
from ..ir.core import Instruction
from ..ir.traits import first_broken_rule, shapes_of

#: int64 entries of the error record of checked code
ERR_SLOTS = 16
#: of which values an error may report (after the code, the group id, the instruction and
#: the work-item)
ERR_DETAILS = ERR_SLOTS - 6

E_INDEX, E_GROUP_INDEX, E_NULL, E_DIV_ZERO, E_STEP, E_BARRIER, E_EXPAND, E_FUSE = range(1, 9)
E_COOP_BOUNDS, E_COOP_DIV_ZERO, E_BROADCAST, E_SUBVIEW, E_SHAPES, E_UNIFORM = 9, 10, 11, 12, 13, 14
E_RACE, E_PARTIAL, E_LIFETIME = 15, 16, 17
#: operands that must be dynamically uniform in a subgroup, as E_UNIFORM names them
UNIFORM_OPERANDS = ("the row position", "the column position", "the memref", "the number",
                    "the scalar", "the lane index")
_ACCESS = (("x", "the row position"), ("y", "the column position"), ("tensor", "the memref"))
#: coopmatrix instructions that whole subgroups must execute (E_PARTIAL), with their
#: operands that must be uniform in the subgroup (slot, as E_UNIFORM names it), as the
#: interpreter tests them
WHOLE_SUBGROUP = {
    **dict.fromkeys(("cooperative_matrix_load", "cooperative_matrix_store",
                     "cooperative_matrix_atomic_load", "cooperative_matrix_atomic_store",
                     "cooperative_matrix_atomic_add", "cooperative_matrix_atomic_max",
                     "cooperative_matrix_atomic_min", "cooperative_matrix_prefetch"), _ACCESS),
    **dict.fromkeys(("cooperative_matrix_mul_add", "cooperative_matrix_reduce_add",
                     "cooperative_matrix_reduce_max", "cooperative_matrix_reduce_min"), ()),
}
#: the uniform operands of instructions that part of a subgroup may run
UNIFORM_SLOTS = {"cooperative_matrix_construct": (("a", "the number"),),
                 "cooperative_matrix_scale": (("a", "the scalar"),),
                 "subgroup_broadcast": (("lane", "the lane index"),)}


@dataclass(frozen=True)
class InstRef:
    """What error messages need of an instruction: its opcode and source location, and for
    ``check_shapes`` the rule it checks: (BLAS opcode, ta, tb, operand orders)."""

    opcode: str
    loc: Any
    shape_rule: Optional[Tuple[str, str, str, Tuple[int, ...]]] = None

    @staticmethod
    def of(inst: Instruction) -> "InstRef":
        rule = None
        if inst.opcode == "check_shapes":
            rule = (inst.modifier("rule"), inst.modifier("ta"), inst.modifier("tb"),
                    tuple(inst.attrs["orders"]))
        return InstRef(inst.opcode, inst.loc, rule)


def kernel_error(filename: str, kernel: str, record: Sequence[int],
                 instructions: Sequence[InstRef], work_group_size: Tuple[int, int],
                 local_names: Sequence[Optional[str]] = (),
                 race: Optional[Callable[[list], str]] = None) -> KernelError:
    """The KernelError of an error record; ``local_names`` names the kernel's allocas for
    E_LIFETIME, ``race`` words an E_RACE record's details."""
    code, gx, gy, gz, inst_id, lane = (int(x) for x in record[:6])
    d = [int(x) for x in record[6:]]
    inst = instructions[inst_id]
    wgx = work_group_size[0]
    where = f"{filename}:{inst.loc}"
    item = f", work-item ({lane % wgx}, {lane // wgx})" if lane >= 0 else ""
    if code == E_RACE and race is not None:
        msg = race(d)
    elif code == E_LIFETIME:
        name = local_names[d[1]]
        msg = (f"access to local memory{' ' + name if name else ''} after its lifetime "
               f"ended (lifetime_stop at {instructions[d[0]].loc})")
    else:
        msg = _message(code, d, inst, wgx)
    return KernelError(f"{where}: kernel @{kernel}, group {(gx, gy, gz)}{item}: {msg}")


#: details of an E_RACE record of targets cpu and opencl before the values of the index:
#: the element (an offset into the kernel's table of allocas, ``race_words``), the other
#: actor, (other instruction, other kind, this kind) packed, this actor, the barrier
#: without .local fence of the interval (-1: none), the number of index values
RACE_FIXED_DETAILS = 6


def race_words(d: Sequence[int], locals_: Sequence[tuple], instructions: Sequence[InstRef],
               work_group_size: Tuple[int, int], S: int) -> str:
    """The message of a data race on local memory from the details of its E_RACE record
    (``RACE_FIXED_DETAILS``); ``locals_``: the kernel's allocas (offset, extent, element
    size, name) in the units of the record's element.  Actors are work-items plus the
    work-group size for each foreach point a work-item ran before in the interval."""
    rel, other, packed, me, unfenced, order = d[:RACE_FIXED_DETAILS]
    other_inst, other_class, mine = packed // 64, packed // 8 % 8, packed % 8
    kind, coop = RACE_CLASSES[mine]
    offset, _, size, name = next(x for x in locals_ if x[0] <= rel < x[0] + x[1])
    wgx = work_group_size[0]
    W = wgx * work_group_size[1]
    shown = [str(x) for x in d[RACE_FIXED_DETAILS:RACE_FIXED_DETAILS + order]]
    index = "[" + ", ".join(shown + (["..."] if order > len(shown) else [])) + "]"

    def work_item(lane: int) -> str:
        return f"({lane % wgx}, {lane // wgx})"
    lane = me % W
    who = work_item(lane) + (f" (subgroup {lane // S})" if coop else "")
    by = work_item(other % W)
    if other // W != me // W:
        by += " in another chunk of foreach iterations"
    return race_message(f"local memory {name}" if name else "local memory", kind, index,
                        (rel - offset) // size, who, RACE_CLASSES[other_class][0], by,
                        instructions[other_inst].loc,
                        instructions[unfenced].loc if unfenced >= 0 else None)


def _message(code: int, d: list, inst: InstRef, wgx: int) -> str:
    if code == E_INDEX:
        mode, value, bound, order = d[:4]
        full = ", ".join(str(x) for x in d[4:4 + min(order, 6)])
        if order > 6:
            full += ", ..."
        return (f"index {value} of mode {mode} is out of bounds (size {bound}); the index is "
                f"[{full}]")
    if code == E_GROUP_INDEX:
        return f"group index {d[0]} is out of bounds (group size {d[1]})"
    if code == E_NULL:
        return "access through a null memref"
    if code == E_DIV_ZERO:
        return f"integer division by zero in '{inst.opcode}': {d[0]} divided by 0"
    if code == E_BROADCAST:
        return (f"subgroup_broadcast from work-item {d[1]}, " +
                (f"outside the subgroup of size {d[2]}" if d[0] == 0 else
                 "which is not active (its value is undefined)"))
    if code == E_COOP_DIV_ZERO:
        return (f"integer division by zero in '{inst.opcode}': entry ({d[1]}, {d[2]}) "
                f"divides {d[0]} by 0")
    if code == E_STEP:
        return f"for loop with step {d[0]} never ends"
    if code == E_BARRIER:
        arrived = d[0]
        return (f"barrier not reached by all work-items of the work-group: work-item "
                f"({arrived % wgx}, {arrived // wgx}) waits here but this work-item does not "
                "arrive")
    if code == E_EXPAND:
        return f"expand shape product {d[0]} does not equal the mode size {d[1]}"
    if code == E_COOP_BOUNDS:
        return (f"component ({d[0]}, {d[1]}) accesses index ({d[2]}, {d[3]}) outside the "
                f"memref of shape {d[4]} x {d[5]}")
    if code == E_FUSE:
        return f"modes {d[0]} and {d[0] + 1} cannot be fused: their strides do not match"
    if code == E_UNIFORM:
        what, here, first, first_id, g, float_bytes = d[:6]
        if float_bytes:  # the bits of two floats (sign-extended into the record)
            ftype, itype = {2: ("f2", "i2"), 4: ("f4", "i4"), 8: ("f8", "i8")}[float_bytes]
            here, first = (np.array(v).astype(itype).view(ftype)[()] for v in (here, first))
        return (f"{UNIFORM_OPERANDS[what]} must be dynamically uniform, but work-items of "
                f"subgroup {g} disagree ({here} here, {first} at subgroup-local id {first_id})")
    if code == E_SHAPES:
        return _broken_shape_rule(inst.shape_rule, d)
    if code == E_PARTIAL:
        return (f"'{inst.opcode}' reached by only some work-items of subgroup {d[0]} (a "
                "coopmatrix instruction needs the whole subgroup)")
    if code == E_SUBVIEW:
        mode, o, n, e, dynamic = d[:5]
        what = ("a dynamic size of zero is undefined behaviour" if dynamic and n == 0
                else "a negative size" if n < 0 else "a negative offset" if o < 0
                else f"the slice overruns the mode's size {e}")
        return f"subview of mode {mode} at offset {o} with size {n}: {what}"
    return f"error {code}"  # pragma: no cover - defensive


def _broken_shape_rule(shape_rule, sizes) -> str:
    """The first shape rule of a BLAS instruction the sizes break (``check_shapes``)."""
    rule, ta, tb, orders = shape_rule
    if sum(orders) > len(sizes):
        return f"the operand sizes break a shape rule of {rule}"
    return (first_broken_rule(rule, shapes_of(orders, sizes), ta, tb)
            or f"the operand sizes break a shape rule of {rule}")
