"""MLIR for Intel GPUs in upstream dialects: the emitter table and the stages of target
xevm (docs/xevm.md).

``EMITTERS`` is one table from opcode to emitter, composed from the tables of the modules
that write each kind of instruction (``arith``: numbers, ids, coopmatrix components;
``memory``: elements, views, alloca; ``control``: for, if, parallel, barrier;
``subgroup``: OpenCL subgroup builtins; ``matrix``: block IO and DPAS for what lower-simt
keeps whole for pvc's matrix unit); an emitter takes the kernel state (``kernel.Kernel``)
and the instruction and returns its results.

The input is the program after ``lower-simt`` for the target description ``pvc``, as for
target spirv.  An instruction or type not translated yet is a CompileError naming it and
the target, never a module upstream ``mlir-opt`` rejects.  Stages: ``lowered`` (ttlc
text) and ``mlir`` (one ``gpu.module`` with a ``gpu.func`` kernel per function).
"""
from __future__ import annotations

from typing import Callable, Dict, List

from ...diagnostics import CompileError, Diagnostic
from ...ir.core import Program
from ...ir.ops import compose_tables
from ...target import Target
from . import arith, control, matrix, memory, subgroup
from .kernel import Kernel, Unsupported

#: opcode -> emitter (kernel, instruction) -> its result(s)
EMITTERS: Dict[str, Callable] = compose_tables(arith.EMITTERS, memory.EMITTERS,
                                               control.EMITTERS, subgroup.EMITTERS,
                                               matrix.EMITTERS)


def generate(program: Program, machine: Target) -> str:
    """The MLIR module of a lowered program."""
    globals_: List[str] = []
    kernels: List[str] = []
    for func in program.functions:
        k = Kernel(program, func, machine, EMITTERS, globals_)
        try:
            kernels += k.define()
        except Unsupported as e:
            inst, what = e.args
            raise k.error(what, inst) from None
    return "\n".join(["module attributes {gpu.container_module} {",
                      f"  gpu.module @kernels [#xevm.target<chip = \"{machine.name}\">] {{",
                      *globals_, *kernels, "  }", "}", ""])


def emit(program: Program, stage: str, machine: Target, checked: bool) -> str:
    if checked:
        loc = program.functions[0].loc if program.functions else None
        raise CompileError([Diagnostic(loc, "target xevm has no checked mode yet")],
                           program.source, program.filename)
    from ...passes import lower_copy

    lowered = lower_copy(program, ["lower-simt"], machine)
    if stage == "lowered":
        return str(lowered)
    return generate(lowered, machine)
