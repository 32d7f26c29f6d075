"""The registry of back ends, which ``ttlc.compile(..., target=T)``, ``ttlc run --target T``
and ``ttlc compile --target T [--stage S]`` read.

A back end is an entry of ``BACKENDS``: its name, what it is, the target description its
passes and sizes read (``ttlc.target``), its stages in order (what ``ttlc compile`` can
write; the last is the default), whether it runs kernels, and the module implementing it.
That module is imported when the back end is first used (``Backend.load``), so listing
back ends or importing ``ttlc`` loads none of them.  It provides

- ``compile(program, machine, checked) -> ttlc.runtime.Module`` if the back end runs
  kernels, and
- ``emit(program, stage, machine, checked)``: the output of the named stage, ``str`` for
  a text stage, ``bytes`` for a binary one,

where ``machine`` is the entry's target description.  Adding a back end is adding its
folder here (``cpu/``: LLVM through llvmlite; ``spirv/``: SPIR-V modules; ``opencl/``:
those modules run through PyOpenCL) and its entry
below; the reference interpreter lives in ``ttlc.interp``, which only this registry imports.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Dict, Optional, Tuple, Union

from ..target import Target, get_target

if TYPE_CHECKING:
    from ..ir.core import Program
    from ..runtime import Module


class BackendUnavailable(ImportError):
    """A back end's Python dependencies are not installed (the message says which)."""


@dataclass(frozen=True)
class Stage:
    """One step of a back end whose output ``ttlc compile --stage`` writes."""

    name: str
    description: str
    #: bytes (object code) rather than text
    binary: bool = False


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    #: the target description (``ttlc.target.TARGETS``) its passes and sizes read
    machine: str
    #: the module implementing it (see the module docstring), imported on first use
    module: str
    #: what ``ttlc compile`` can write, in the order the back end produces them
    stages: Tuple[Stage, ...] = ()
    #: whether ``ttlc.compile`` gives a module whose kernels run
    executes: bool = False
    #: Python packages the module needs beyond ttlc's own (named when they are missing)
    requires: Tuple[str, ...] = ()

    def target(self) -> Target:
        return get_target(self.machine)

    def stage(self, name: Optional[str] = None) -> Stage:
        """The stage called `name` (None: the last); ValueError naming the stages."""
        if not self.stages:
            runs = f" (it runs kernels: ttlc run --target {self.name})" if self.executes else ""
            raise ValueError(f"target {self.name} has no stages to write{runs}")
        if name is None:
            return self.stages[-1]
        for s in self.stages:
            if s.name == name:
                return s
        raise ValueError(f"unknown stage {name!r} of target {self.name} (stages: "
                         f"{', '.join(s.name for s in self.stages)})")

    def load(self) -> ModuleType:
        """The implementing module; BackendUnavailable when a required package is missing."""
        try:
            return importlib.import_module(self.module)
        except ImportError as e:
            if not self.requires:
                raise
            raise BackendUnavailable(f"target {self.name} needs {', '.join(self.requires)} "
                                     f"({e}); install it with pip install "
                                     f"{' '.join(self.requires)}") from e

    def compile(self, program: "Program", checked: bool = False) -> "Module":
        """A verified program prepared to run (``ttlc.compile``)."""
        if not self.executes:
            raise ValueError(f"target {self.name} does not run kernels (registered targets "
                             f"that do: {', '.join(n for n, b in BACKENDS.items() if b.executes)})")
        return self.load().compile(program, self.target(), checked)

    def emit(self, program: "Program", stage: Optional[str] = None,
             checked: bool = False) -> Union[str, bytes]:
        """The output of a stage (None: the last) for a verified program."""
        name = self.stage(stage).name
        return self.load().emit(program, name, self.target(), checked)


BACKENDS: Dict[str, Backend] = {b.name: b for b in (
    Backend("cpu", "machine code for this CPU through LLVM, run on a thread pool",
            machine="cpu", module="ttlc.backends.cpu.module", executes=True,
            requires=("llvmlite",), stages=(
                Stage("lowered", "the program after the lower pipeline, as ttlc text"),
                Stage("llvm", "LLVM IR as generated"),
                Stage("llvm-opt", "LLVM IR after optimisation (O3)"),
                Stage("object", "an ELF object file with the machine code", binary=True))),
    Backend("interp", "the reference interpreter (NumPy; checked mode finds data races)",
            machine="interp", module="ttlc.interp", executes=True),
    Backend("spirv", "a SPIR-V module (OpenCL Kernel environment) for OpenCL devices with "
            "subgroups", machine="opencl", module="ttlc.backends.spirv.codegen", stages=(
                Stage("lowered", "the program after the lower-simt pipeline, as ttlc text"),
                Stage("spirv-text", "the SPIR-V module as text (spirv-dis style)"),
                Stage("spirv", "the SPIR-V module (binary)", binary=True))),
    Backend("spirv-pvc", "a SPIR-V module for Intel Xe HPC GPUs (target description pvc): "
            "DPAS and 2-D block IO where they apply (docs/spirv.md)", machine="pvc",
            module="ttlc.backends.spirv.codegen", stages=(
                Stage("lowered", "the program after the lower-simt pipeline, as ttlc text"),
                Stage("spirv-text", "the SPIR-V module as text (spirv-dis style)"),
                Stage("spirv", "the SPIR-V module (binary)", binary=True))),
    Backend("opencl", "target spirv's module run through PyOpenCL on an OpenCL device with "
            "SPIR-V and subgroups (docs/opencl.md)", machine="opencl",
            module="ttlc.backends.opencl.module", executes=True, requires=("pyopencl",)),
    Backend("iree-vector", "coopmatrix values as MLIR vectors with IREE nested layouts "
            "(docs/iree-vector.md)", machine="pvc", module="ttlc.backends.iree.export",
            stages=(Stage("mlir", "MLIR: a func.func per kernel, its coopmatrix values as "
                                  "vectors passed through iree_vector_ext.to_layout"),)),
    Backend("xevm", "MLIR for Intel GPUs in upstream dialects (gpu, llvm, arith, scf, math, "
            "xevm; docs/xevm.md)", machine="pvc", module="ttlc.backends.xevm.codegen", stages=(
                Stage("lowered", "the program after the lower-simt pipeline, as ttlc text"),
                Stage("mlir", "MLIR: one gpu.module, a gpu.func kernel per function"))),
    Backend("cuda-tile", "NVIDIA CUDA Tile IR: cuda_tile MLIR text and bytecode for tileiras",
            machine="nvidia", module="ttlc.backends.tile.backend", stages=(
                Stage("tile-text", "the module as cuda_tile MLIR text"),
                Stage("tilebc", "the module as Tile IR bytecode", binary=True))),
    Backend("cuda", "target cuda-tile's module compiled by tileiras to a cubin, run with the "
            "CUDA driver through cuda-python (docs/cuda-tile.md)", machine="nvidia",
            module="ttlc.backends.cuda.module", executes=True, requires=("cuda-python",),
            stages=(Stage("cubin", "the cubin tileiras compiles for the device's architecture "
                                   "(TTLC_CUDA_ARCH chooses another)", binary=True),)),
)}


def get_backend(name: str) -> Backend:
    """The back end called `name`; ValueError listing the registered ones."""
    backend = BACKENDS.get(name)
    if backend is not None:
        return backend
    hint = "".join(f"; {name!r} is a stage of target {b.name}" for b in BACKENDS.values()
                   if any(s.name == name for s in b.stages))
    raise ValueError(f"unknown target {name!r} (registered: {', '.join(BACKENDS)}){hint}")


__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "Stage", "get_backend"]
