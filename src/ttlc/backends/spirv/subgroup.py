"""Subgroup operations as the Groups instructions of SPIR-V's Kernel environment
(OpGroupBroadcast, OpGroupIAdd/FAdd/SMax/FMax/SMin/FMin with the Reduce, InclusiveScan
and ExclusiveScan group operations, Subgroup scope), which OpenCL defines for 32- and
64-bit numbers: 8- and 16-bit integers are widened to i32 and narrowed back (an exclusive
scan's first work-item then gets the narrow type's identity), and 16-bit floats are
combined in f32 and rounded once (``ttlc.ir.numerics.accumulate_type``).
"""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.numerics import accumulate_type
from ...ir.ops import SUBGROUP_OPS
from ...ir.types import F32, I32, ScalarType
from ..pairs import each
from .arith import constant_of, convert
from .builder import Enum
from .function import Kernel

_SUBGROUP = 3  # Scope Subgroup


def wide_type(t: ScalarType) -> ScalarType:
    """The type OpenCL's group instructions combine t in (and work-group broadcasts take
    it in: Intel's CPU runtime fails to build one of a 16-bit float)."""
    if t.is_int and t.bits < 32:
        return I32
    return accumulate_type(t)


def emit_broadcast(k: Kernel, inst: Instruction):
    t: ScalarType = inst.results[0].type
    lane = k.get(inst.slots["lane"])
    if t.is_complex:
        f = k.scalar(t.component)
        return each(lambda x: k.op("GroupBroadcast", f, k.c32(_SUBGROUP), x, lane),
                    k.get(inst.slots["a"]))
    w = I32 if t.is_int and t.bits < 32 else F32 if t.name == "bf16" else t
    x = convert(k, t, w, k.get(inst.slots["a"]))
    r = k.op("GroupBroadcast", k.scalar(w), k.c32(_SUBGROUP), x, lane)
    return convert(k, w, t, r)


_GROUP_OPS = {("add", True): "GroupIAdd", ("add", False): "GroupFAdd",
              ("max", True): "GroupSMax", ("max", False): "GroupFMax",
              ("min", True): "GroupSMin", ("min", False): "GroupFMin"}
_KINDS = {"reduce": "Reduce", "inclusive_scan": "InclusiveScan",
          "exclusive_scan": "ExclusiveScan"}


def emit_group_op(k: Kernel, inst: Instruction):
    t: ScalarType = inst.results[0].type
    kind, op = inst.opcode[len("subgroup_"):].rsplit("_", 1)
    if t.is_complex:  # add only: parts summed separately
        f = k.scalar(t.component)
        how = Enum("GroupOperation", _KINDS[kind])
        return each(lambda x: k.op("GroupFAdd", f, k.c32(_SUBGROUP), how, x),
                    k.get(inst.slots["a"]))
    w = wide_type(t)
    x = convert(k, t, w, k.get(inst.slots["a"]))
    r = k.op(_GROUP_OPS[op, t.is_int], k.scalar(w), k.c32(_SUBGROUP),
             Enum("GroupOperation", _KINDS[kind]), x)
    r = convert(k, w, t, r)
    if kind == "exclusive_scan" and op != "add" and w != t and t.is_int:
        ident = -(1 << (t.bits - 1)) if op == "max" else (1 << (t.bits - 1)) - 1
        first = k.op("IEqual", k.m.type_bool(), k.builtin("SubgroupLocalInvocationId"), k.c32(0))
        r = k.op("Select", k.scalar(t), first, constant_of(k, t, ident), r)
    return r


EMITTERS: Dict[str, Callable] = {
    "subgroup_broadcast": emit_broadcast,
    **dict.fromkeys(SUBGROUP_OPS, emit_group_op),
}
