"""Subgroup operations in MLIR (gpu dialect): ``subgroup_broadcast`` is ``gpu.shuffle idx``
over the whole subgroup; ``subgroup_reduce_*`` is a butterfly of ``gpu.shuffle xor``
(log2 of the subgroup size steps; ``gpu.subgroup_reduce`` has no lowering to the LLVM
dialect for Intel GPUs); narrow integers are combined as i32 and 16-bit floats in f32,
as target spirv does; a complex number part by part.  Scans are not translated yet."""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.types import F32, I32, ScalarType
from ..pairs import Pair, each
from .arith import binary, convert
from .kernel import Kernel, Unsupported


def _wide(t: ScalarType) -> ScalarType:
    return I32 if t.is_int and t.bits < 32 else F32 if t.is_float and t.bits < 32 else t


def shuffle(k: Kernel, mode: str, t: ScalarType, x: str, lane: str) -> str:
    width = k.op(f"arith.constant {k.S} : i32")
    r = k.fresh()
    k.line(f"{r}, {k.fresh()} = gpu.shuffle {mode} {x}, {lane}, {width} : {k.type(t)}")
    return r


def emit_broadcast(k: Kernel, inst: Instruction):
    t = inst.results[0].type
    a, lane = k.get(inst.slots["a"]), k.get(inst.slots["lane"])
    if isinstance(a, Pair):
        return each(lambda x: shuffle(k, "idx", t.component, x, lane), a)
    return shuffle(k, "idx", t, a, lane)


def emit_reduce(k: Kernel, inst: Instruction):
    t = inst.results[0].type
    if t.is_complex:  # add only: the parts summed apart
        return each(lambda x: _butterfly(k, "add", t.component, x), k.get(inst.slots["a"]))
    return _butterfly(k, inst.opcode.rsplit("_", 1)[1], t, k.get(inst.slots["a"]))


def _butterfly(k: Kernel, op: str, t: ScalarType, a: str) -> str:
    k.type(t)
    w = _wide(t)
    x = convert(k, t, w, a)
    step = 1
    while step < k.S:
        other = shuffle(k, "xor", w, x, k.op(f"arith.constant {step} : i32"))
        x = binary(k, op, w, x, other)
        step *= 2
    return convert(k, w, t, x)


def emit_scan(k: Kernel, inst: Instruction):
    raise Unsupported(inst, "subgroup scans")


EMITTERS: Dict[str, Callable] = {
    "subgroup_broadcast": emit_broadcast,
    **{f"subgroup_reduce_{op}": emit_reduce for op in ("add", "max", "min")},
    **{f"subgroup_{kind}_scan_{op}": emit_scan for kind in ("exclusive", "inclusive")
       for op in ("add", "max", "min")},
}
