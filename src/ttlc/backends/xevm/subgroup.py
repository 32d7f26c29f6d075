"""Subgroup operations as calls of OpenCL's subgroup builtins, declared as ``llvm.func``
(what ``convert-gpu-to-llvm-spv`` itself makes of ``gpu.shuffle``; a SPIR-V consumer
turns them into OpGroupNonUniform* instructions).

Why builtins and not the gpu dialect: the language's subgroup operations combine the
values of the *active* work-items (inactive ones contribute the identity), and they occur
in divergent code.  ``gpu.shuffle`` is defined only when the first ``width`` lanes are all
active, and a butterfly of shuffles would read the undefined values of inactive lanes;
``gpu.subgroup_reduce`` has no lowering to the LLVM dialect for Intel GPUs, and no scans.
The non-uniform builtins of ``cl_khr_subgroup_non_uniform_arithmetic``
(``sub_group_non_uniform_reduce_add`` ..., OpGroupNonUniformIAdd/FMax/... with the Reduce,
InclusiveScan and ExclusiveScan group operations) are defined over the active lanes,
exactly the language's meaning, and the hardware does them natively.
``subgroup_broadcast`` is ``sub_group_shuffle`` (``cl_khr_subgroup_shuffle``,
OpGroupNonUniformShuffle), defined whenever the source lane is active, as the language
requires.

Types: 8- and 16-bit integers are combined as i32 and narrowed back (the identity of a
max or min exclusive scan, the first active lane's result, is then i32's: clamping to
the narrow type's range gives the narrow identity and changes no other result); 16-bit
floats are combined in f32 and rounded once (``accumulate_type``); a complex number
(add only) part by part.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

from ...ir.core import Instruction
from ...ir.numerics import accumulate_type
from ...ir.ops import SUBGROUP_OPS
from ...ir.types import I32, ScalarType
from ..pairs import Pair, each
from .arith import convert
from .kernel import Kernel

#: Itanium mangling of the OpenCL type of each MLIR type a builtin takes
_MANGLED = {"i32": "i", "i64": "l", "f32": "f", "f64": "d"}
#: language operation kind -> the infix of its OpenCL builtin
_KINDS = {"reduce": "reduce", "inclusive_scan": "scan_inclusive",
          "exclusive_scan": "scan_exclusive"}
_ATTRS = "{convergent, no_unwind, will_return}"


def call(k: Kernel, name: str, args: List[Tuple[str, str]], result: str,
         unsigned: Tuple[int, ...] = ()) -> str:
    """Call OpenCL builtin `name` on (value, MLIR type) args (those at positions
    `unsigned` are OpenCL uint), declaring it in the module once."""
    codes = "".join("j" if i in unsigned else _MANGLED[t] for i, (_, t) in enumerate(args))
    symbol = f"@_Z{len(name)}{name}{codes}"
    types = ", ".join(t for _, t in args)
    decl = f"    llvm.func spir_funccc {symbol}({types}) -> {result} attributes {_ATTRS}"
    if decl not in k.globals:
        k.globals.append(decl)
    values = ", ".join(v for v, _ in args)
    return k.op(f"llvm.call spir_funccc {symbol}({values}) {_ATTRS} : ({types}) -> {result}")


def _wide(t: ScalarType) -> ScalarType:
    return I32 if t.is_int and t.bits < 32 else accumulate_type(t)


def emit_broadcast(k: Kernel, inst: Instruction):
    t = inst.results[0].type
    a, lane = k.get(inst.slots["a"]), k.get(inst.slots["lane"])

    def one(t: ScalarType, x: str) -> str:
        w = _wide(t)
        r = call(k, "sub_group_shuffle", [(convert(k, t, w, x), k.type(w)), (lane, "i32")],
                 k.type(w), unsigned=(1,))
        return convert(k, w, t, r)
    if isinstance(a, Pair):
        return each(lambda x: one(t.component, x), a)
    return one(t, a)


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
    mw = k.type(w)
    r = call(k, f"sub_group_non_uniform_{_KINDS[kind]}_{op}", [(convert(k, t, w, a), mw)], mw)
    if kind == "exclusive_scan" and op != "add" and t.is_int and w != t:
        bound = -(1 << (t.bits - 1)) if op == "max" else (1 << (t.bits - 1)) - 1
        r = k.op(f"arith.{op}si {r}, {k.const(w, bound)} : {mw}")
    return convert(k, w, t, r)


EMITTERS: Dict[str, Callable] = {
    "subgroup_broadcast": emit_broadcast,
    **dict.fromkeys(SUBGROUP_OPS, emit_group_op),
}
