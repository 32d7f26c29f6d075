"""Subgroup operations as SPIR-V 1.3's GroupNonUniform instructions with Subgroup scope:
``subgroup_broadcast`` is OpGroupNonUniformShuffle, the reductions and scans are
OpGroupNonUniformIAdd/FAdd/SMax/FMax/SMin/FMin with the Reduce, InclusiveScan and
ExclusiveScan group operations (OpenCL's ``cl_khr_subgroup_shuffle`` and
``cl_khr_subgroup_non_uniform_arithmetic``; the module becomes SPIR-V 1.3 where it uses
them, ``builder.Module``).

Why not the Groups instructions (OpGroupIAdd ...): every work-item of the subgroup must
reach those, so under an ``if`` that only some take they are undefined.  The language's
subgroup operations occur in divergent code and combine the *active* work-items (inactive
ones contribute the identity, as the interpreter computes); the non-uniform instructions
are defined over exactly those.  A broadcast is a shuffle, defined whenever the source
work-item is active, as the language requires.

Types, as on target xevm: 8- and 16-bit integers are combined as i32 (no 8- or 16-bit
instruction asked of the device) and narrowed back: the identity of a max or min exclusive scan, the
result of the first active work-item, is then i32's, and clamping to the narrow type's
range gives the narrow identity and changes no other result.  16-bit floats are combined
in f32 and rounded once (``ttlc.ir.numerics.accumulate_type``); a complex number (add
only) part by part.  A target description without these instructions (``subgroup_ops``:
target opencl narrows it to its device) refuses them with a CompileError naming the
instruction and the target.
"""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.numerics import accumulate_type
from ...ir.ops import SUBGROUP_OPS
from ...ir.types import I32, ScalarType
from ..pairs import each
from .arith import binary, constant_of, convert
from . import checks
from .builder import Enum
from .function import Kernel, Lacking

_SUBGROUP = checks.SUBGROUP

#: (operation, integer?) -> the GroupNonUniform instruction combining with it
_GROUP_OPS = {("add", True): "GroupNonUniformIAdd", ("add", False): "GroupNonUniformFAdd",
              ("max", True): "GroupNonUniformSMax", ("max", False): "GroupNonUniformFMax",
              ("min", True): "GroupNonUniformSMin", ("min", False): "GroupNonUniformFMin"}
_KINDS = {"reduce": "Reduce", "inclusive_scan": "InclusiveScan",
          "exclusive_scan": "ExclusiveScan"}


def wide_type(t: ScalarType) -> ScalarType:
    """The type a subgroup instruction takes t in (i32 for narrow integers; 16-bit floats
    are combined in f32, as the interpreter does), and the
    work-group broadcasts of ``Kernel.once`` too (Intel's CPU runtime fails to build one
    of a 16-bit float)."""
    if t.is_int and t.bits < 32:
        return I32
    return accumulate_type(t)


def _offered(k: Kernel, inst: Instruction) -> None:
    """Refuse a subgroup instruction the target description leaves out."""
    have = k.target.subgroup_ops
    if have is not None and inst.opcode not in have:
        raise Lacking(inst, "this subgroup operation (a GroupNonUniform instruction of "
                            "SPIR-V 1.3)",
                      f"subgroup operations {', '.join(have)}" if have
                      else "no subgroup operations")


def emit_broadcast(k: Kernel, inst: Instruction):
    _offered(k, inst)
    t: ScalarType = inst.results[0].type
    lane = k.get(inst.slots["lane"])
    if k.checked:
        checks.broadcast(k, inst, lane)

    def one(t: ScalarType, x: int) -> int:
        w = wide_type(t)
        r = k.op("GroupNonUniformShuffle", k.scalar(w), k.c32(_SUBGROUP),
                 convert(k, t, w, x), lane)
        return convert(k, w, t, r)
    if t.is_complex:
        return each(lambda x: one(t.component, x), k.get(inst.slots["a"]))
    return one(t, k.get(inst.slots["a"]))


def emit_group_op(k: Kernel, inst: Instruction):
    """subgroup_reduce_* and the scans; a complex number (add only) part by part."""
    _offered(k, inst)
    t: ScalarType = inst.results[0].type
    kind, op = inst.opcode[len("subgroup_"):].rsplit("_", 1)
    if t.is_complex:
        return each(lambda x: _combine(k, kind, "add", t.component, x), k.get(inst.slots["a"]))
    return _combine(k, kind, op, t, k.get(inst.slots["a"]))


def _combine(k: Kernel, kind: str, op: str, t: ScalarType, a: int) -> int:
    w = wide_type(t)
    r = k.op(_GROUP_OPS[op, t.is_int], k.scalar(w), k.c32(_SUBGROUP),
             Enum("GroupOperation", _KINDS[kind]), convert(k, t, w, a))
    if kind == "exclusive_scan" and op != "add" and t.is_int and w != t:
        bound = -(1 << (t.bits - 1)) if op == "max" else (1 << (t.bits - 1)) - 1
        r = binary(k, op, w, r, constant_of(k, w, bound))
    return convert(k, w, t, r)


EMITTERS: Dict[str, Callable] = {
    "subgroup_broadcast": emit_broadcast,
    **dict.fromkeys(SUBGROUP_OPS, emit_group_op),
}
