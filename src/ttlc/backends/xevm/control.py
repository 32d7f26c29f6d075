"""Control flow in MLIR: ``for`` is ``scf.for`` and ``if`` is ``scf.if`` (loop-carried and
yielded values one per number, one per coopmatrix component), ``parallel`` is inline,
``barrier`` is ``gpu.barrier`` after an ``xevm.memfence`` of global memory where the
barrier fences it (gpu.barrier orders work-group memory)."""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from .kernel import Kernel


def _results(k: Kernel, name: str, types):
    parts = [p for t in types for p in k.part_types(t)]
    names = iter([f"{name}#{j}" if len(parts) > 1 else name for j in range(len(parts))])
    return tuple(k.rebuild(t, names) for t in types)


def _yield(k: Kernel, values, types) -> None:
    flat = k.flatten(list(values))
    if flat:
        k.line(f"scf.yield {', '.join(flat)} : {', '.join(types)}")


def emit_for(k: Kernel, inst: Instruction):
    region = inst.regions[0]
    iv_t = k.type(inst.slots["from"].type)
    lo, hi = k.get(inst.slots["from"]), k.get(inst.slots["to"])
    step = k.get(inst.slots["step"]) if "step" in inst.slots else \
        k.const(inst.slots["from"].type, 1)
    carried = [v.type for v in inst.slots.get("init", [])]
    init = k.flatten([k.get(v) for v in inst.slots.get("init", [])])
    types = [p for t in carried for p in k.part_types(t)]
    name, iv = k.fresh(), k.fresh()
    args = [k.fresh() for _ in init]
    head = f"scf.for {iv} = {lo} to {hi} step {step}"
    if init:
        head += (f" iter_args({', '.join(f'{a} = {x}' for a, x in zip(args, init))}) "
                 f"-> ({', '.join(types)})")
        head = f"{name}{':%d' % len(init) if len(init) > 1 else ''} = " + head
    k.line(f"{head} : {iv_t} {{")
    k.depth += 1
    k.values[region.args[0]] = iv
    it = iter(args)
    for arg, t in zip(region.args[1:], carried):
        k.values[arg] = k.rebuild(t, it)
    _yield(k, k.emit_region(region), types)
    k.depth -= 1
    k.line("}")
    return _results(k, name, carried)


def emit_if(k: Kernel, inst: Instruction):
    rtypes = [r.type for r in inst.results]
    types = [p for t in rtypes for p in k.part_types(t)]
    name = k.fresh()
    head = f"scf.if {k.get(inst.slots['condition'])}"
    if types:
        head = f"{name}{':%d' % len(types) if len(types) > 1 else ''} = {head} -> " \
               f"({', '.join(types)})"
    k.line(head + " {")
    for j, region in enumerate(inst.regions):
        if j:
            k.line("} else {")
        k.depth += 1
        _yield(k, k.emit_region(region), types)
        k.depth -= 1
    k.line("}")
    return _results(k, name, rtypes) if rtypes else ()


def emit_parallel(k: Kernel, inst: Instruction):
    k.spmd += 1
    k.emit_region(inst.regions[0])
    k.spmd -= 1


def emit_barrier(k: Kernel, inst: Instruction):
    g, l = inst.modifier("global"), inst.modifier("local")
    if g or not l:
        k.line("xevm.memfence {addrspace = #xevm.addr_space<global>, "
               "scope = #xevm.mem_scope<workgroup>}")
    k.line("gpu.barrier")


def emit_nothing(k: Kernel, inst: Instruction):
    """lifetime_stop: work-group memory is a global of its own."""


EMITTERS: Dict[str, Callable] = {
    "for": emit_for,
    "if": emit_if,
    "parallel": emit_parallel,
    "barrier": emit_barrier,
    "lifetime_stop": emit_nothing,
}
