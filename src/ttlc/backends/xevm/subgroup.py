"""Subgroup operations in MLIR (gpu dialect): ``subgroup_broadcast`` is ``gpu.shuffle idx``
over the whole subgroup; ``subgroup_reduce_*`` is a butterfly of ``gpu.shuffle xor``
(log2 of the subgroup size steps; ``gpu.subgroup_reduce`` has no lowering to the LLVM
dialect for Intel GPUs); narrow integers are combined as i32 and 16-bit floats in f32,
as target spirv does; a complex number part by part.  Scans are a Hillis-Steele ladder
of ``gpu.shuffle up`` (log2 of the subgroup size steps); an exclusive scan shifts the
inclusive one up by a lane, lane 0 taking the operation's identity."""
from __future__ import annotations

import math
from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.types import F32, I32, ScalarType
from ..pairs import Pair, each
from .arith import binary, convert
from .kernel import Kernel


def _wide(t: ScalarType) -> ScalarType:
    return I32 if t.is_int and t.bits < 32 else F32 if t.is_float and t.bits < 32 else t


def shuffle(k: Kernel, mode: str, t: ScalarType, x: str, lane: str, valid: bool = False):
    """gpu.shuffle's value (and, with valid, whether its source lane exists)."""
    width = k.op(f"arith.constant {k.S} : i32")
    r, ok = k.fresh(), k.fresh()
    k.line(f"{r}, {ok} = gpu.shuffle {mode} {x}, {lane}, {width} : {k.type(t)}")
    return (r, ok) if valid else r


def emit_broadcast(k: Kernel, inst: Instruction):
    t = inst.results[0].type
    a, lane = k.get(inst.slots["a"]), k.get(inst.slots["lane"])
    if isinstance(a, Pair):
        return each(lambda x: shuffle(k, "idx", t.component, x, lane), a)
    return shuffle(k, "idx", t, a, lane)


def emit_group_op(k: Kernel, inst: Instruction):
    """subgroup_reduce_* and the scans; a complex number (add only) part by part."""
    t = inst.results[0].type
    kind, op = inst.opcode[len("subgroup_"):].rsplit("_", 1)
    if t.is_complex:
        return each(lambda x: _combine(k, kind, "add", t.component, x), k.get(inst.slots["a"]))
    return _combine(k, kind, op, t, k.get(inst.slots["a"]))


def _combine(k: Kernel, kind: str, op: str, t: ScalarType, a: str) -> str:
    k.type(t)
    w = _wide(t)
    x = convert(k, t, w, a)
    step = 1
    while step < k.S:
        by = k.op(f"arith.constant {step} : i32")
        if kind == "reduce":
            x = binary(k, op, w, x, shuffle(k, "xor", w, x, by))
        else:
            other, valid = shuffle(k, "up", w, x, by, valid=True)
            x = k.op(f"arith.select {valid}, {binary(k, op, w, x, other)}, {x} : {k.type(w)}")
        step *= 2
    if kind == "exclusive_scan":
        other, valid = shuffle(k, "up", w, x, k.op("arith.constant 1 : i32"), valid=True)
        x = k.op(f"arith.select {valid}, {other}, {_identity(k, op, t, w)} : {k.type(w)}")
    return convert(k, w, t, x)


def _identity(k: Kernel, op: str, t: ScalarType, w: ScalarType) -> str:
    """The identity of op on values of t, as type w."""
    if op == "add":
        return k.const(w, 0)
    if t.is_float:
        return k.const(w, -math.inf if op == "max" else math.inf)
    return k.const(w, -(1 << (t.bits - 1)) if op == "max" else (1 << (t.bits - 1)) - 1)


EMITTERS: Dict[str, Callable] = {
    "subgroup_broadcast": emit_broadcast,
    **{f"subgroup_{kind}_{op}": emit_group_op
       for kind in ("reduce", "exclusive_scan", "inclusive_scan") for op in ("add", "max", "min")},
}
