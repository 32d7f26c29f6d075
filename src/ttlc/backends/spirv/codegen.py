"""SPIR-V for OpenCL devices: the emitter table and the stages of target spirv.

``EMITTERS`` is one table from opcode to emitter, composed from the tables of the modules
that emit each kind of instruction (``arith``: numbers, built-ins, coopmatrix components;
``memory``: elements, atomics, views, alloca; ``control``: for, if, parallel, barrier;
``subgroup``); an emitter takes the kernel state (``function.Kernel``) and the instruction
and returns the representation of its results.

The input is the program after ``lower-simt`` for the target description: collective
instructions are loops, coopmatrix values per-work-item components, barriers explicit.
An instruction or type this back end does not translate yet is a CompileError naming it
and the target (never a module that fails validation).  Stages: ``lowered`` (ttlc text),
``spirv-text`` (the module as text) and ``spirv`` (the binary module).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, Union

from ...ir.core import Program
from ...ir.ops import compose_tables
from ...target import Target
from . import arith, checks, control, memory, subgroup, xe
from .abi import define_kernel
from .builder import Module
from .function import Kernel, Unsupported

#: opcode -> emitter (kernel, instruction) -> its result(s)
EMITTERS: Dict[str, Callable] = compose_tables(arith.EMITTERS, memory.EMITTERS, control.EMITTERS,
                                               subgroup.EMITTERS, xe.EMITTERS)

#: the SPIR-V version written: 1.2, what OpenCL 2.2 consumes (spirv-val --target-env
#: opencl2.2) and every OpenCL 3.0 device that takes SPIR-V accepts
VERSION = (1, 2)


#: capabilities the OpenCL 2.2 Full Profile leaves to device extensions (cl_khr_fp16,
#: cl_khr_int64_base_atomics), which ``spirv-val --target-env opencl2.2`` therefore refuses
OPTIONAL_CAPABILITIES = ("Float16", "Int64Atomics", "SubgroupMatrixMultiplyAccumulateINTEL",
                         "Subgroup2DBlockIOINTEL")


def validation_env(module: Module) -> str:
    """The environment to validate a module in: ``opencl2.2``, or, where the module needs
    a device extension the OpenCL profile check does not know or a SPIR-V version newer
    than the profile's (1.3 for the GroupNonUniform instructions), the universal
    environment of its SPIR-V version (same rules without the capability list of the
    profile)."""
    if module.version > VERSION or any(c in OPTIONAL_CAPABILITIES for c in module.capabilities):
        return "spv{}.{}".format(*module.version)
    return "opencl2.2"


def lower(program: Program, machine: Target, checked: bool = False) -> Program:
    """A copy of the program after the ``lower-simt`` pipeline for ``machine``, with the
    sizes every function runs with written into it.  Checked code (``checks``) tests the
    shape rules of BLAS instructions before they become loops and keeps unused
    instructions (an unused load out of bounds is still a finding), as on target cpu."""
    from ...passes import expand, lower_copy

    names = expand(["lower-simt"])
    target = block_io_of_spirv(machine, checked)
    if not checked:
        return lower_copy(program, names, target)
    at = names.index("lower-linalg")
    names[at:at] = ["insert-shape-checks", "insert-iteration-marks"]
    names = [n for n in names if n != "dead-code-elimination"]
    # coopmatrix instructions marked before they become per-work-item code
    return lower_copy(program, names, target, before={"lower-coopmatrix": checks.mark})


def block_io_of_spirv(machine: Target, checked: bool = False) -> Target:
    """machine with the 2-D block accesses its matrix unit has that this back end's block
    path emits (``xe.py``): loads and stores, neither checked nor transposed, no
    prefetch (those take the generic path).  Checked code has none: its accesses are
    element accesses, each tested."""
    unit = machine.matrix
    if unit.block_io is None:
        return machine
    io = None if checked else replace(unit.block_io, checked=False, prefetch=False,
                                      transpose_bytes=0)
    return replace(machine, matrix=replace(unit, block_io=io))


def generate(program: Program, machine: Target, checked: bool = False) -> Module:
    """The SPIR-V module of a lowered program: one kernel entry point per function; for
    checked code, ``module.findings`` gives each kernel's table of the instructions
    its findings name."""
    module = Module(VERSION)
    module.findings, module.locals = {}, {}
    #: per kernel: its allocas as data-race findings name them, its Workgroup memory
    module.race_locals, module.local_bytes = {}, {}
    #: the first instruction whose checks take ballots (``checks``; None: none does)
    module.ballots = None
    if not program.functions:
        module.require_capability("Linkage")  # a module without entry points is a library
    for func in program.functions:
        k = Kernel(module, program, func, machine,
                   checks.at_marks(EMITTERS) if checked else EMITTERS, checked)
        try:
            define_kernel(k)
        except Unsupported as e:
            raise k.error(e) from None
        module.findings[func.name], module.locals[func.name] = k.instructions, k.locals
        module.race_locals[func.name] = k.races.locals if k.races is not None else []
        module.local_bytes[func.name] = k.local_bytes
    return module


def emit(program: Program, stage: str, machine: Target, checked: bool) -> Union[str, bytes]:
    lowered = lower(program, machine, checked)
    if stage == "lowered":
        return str(lowered)
    module = generate(lowered, machine, checked)
    return module.text() if stage == "spirv-text" else module.binary()
