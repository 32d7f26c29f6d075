"""Back end "opencl": target spirv's module built by an OpenCL device and launched on it.

``compile`` lowers and emits the program as target spirv does (``spirv.codegen``),
validates the module with ``spirv-val`` where SPIRV-Tools is installed (OpenCL runtimes
do not validate SPIR-V: an invalid module runs wrong or ends the process), and builds it
with ``clCreateProgramWithIL`` on the device ``device.find`` chose.

A launch checks the arguments with ``ttlc.runtime.args`` (the same checks and errors as
every target), then copies the memory they refer to into one shared-virtual-memory
allocation of the device, the *arena*: each stretch of host memory that arguments
cover (overlapping arrays merged into one stretch, so that views of one array stay one
memory), then the tables of the groups (member pointers, their dynamic sizes and
strides).  Kernel arguments follow the kernel ABI of docs/spirv.md with pointers into
the arena.  After the kernel, the stretches holding arguments the kernel writes are
copied back (whole stretches: elements a strided view skips are written back unchanged).

Checked modules (``spirv.checks``) take an error buffer as their last argument, placed in
the arena like a group table; after the kernel the finding of the lowest work-group in
it, if any, is raised as the ``ttlc.KernelError`` the other targets raise
(``runtime.findings``), after the arguments were copied back.  Checked code whose tests
take subgroup ballots is refused on a device without them (``device.lacks_ballots``).
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import sysconfig
import tempfile
import threading
import warnings
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import pyopencl as cl

from ...diagnostics import CompileError, Diagnostic
from ...ir.core import Function, Location, Program
from ...ir.types import BoolType, GroupType, MemrefType, ScalarType
from ...runtime import Module
from ...runtime.args import marshal
from ...runtime.findings import kernel_error, race_words
from ...runtime.values import Memory, MemRef
from ...target import Target
from ...target.config import ExecConfig
from ..copies import check_writable, members, stretches, written
from ..simt import pointer_arguments
from ..spirv import checks, codegen, races
from . import device as devices

#: alignment of everything in the arena (bytes): the largest any element type needs
ALIGN = 128


def _error(program: Program, message: str) -> CompileError:
    loc = program.functions[0].loc if program.functions else Location(1, 1, 1, 1)
    return CompileError([Diagnostic(loc, message)], program.source, program.filename)


def _fits(program: Program, spirv, dev: "devices.Device") -> None:
    """Each kernel's local memory (in checked code with the shadow that finds data races,
    which needs 64-bit atomics) fits the device: else a CompileError saying why."""
    for name, used in spirv.local_bytes.items():
        shadow = bool(spirv.race_locals[name])
        if shadow and races.EXTENSION not in dev.extensions:
            raise _error(program, f"kernel @{name}: checked code finds data races on local "
                                  f"memory with 64-bit atomics, which {dev.name} lacks "
                                  f"({races.EXTENSION}); run it unchecked or on target cpu")
        limit = dev.device.local_mem_size
        if used > limit:
            extra = (f", with the {races.BYTES} bytes per element and kind of access that "
                     "checked code keeps to find data races" if shadow else "")
            raise _error(program, f"kernel @{name} needs {used} bytes of local memory{extra}; "
                                  f"{dev.name} has {limit}")


def _spirv_val() -> Optional[str]:
    here = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "bin" / "spirv-val"
    return str(here) if here.exists() else shutil.which("spirv-val")


def _invalid(module: "codegen.Module", binary: bytes) -> Optional[str]:
    """spirv-val's complaint about the module (None: valid, or no spirv-val installed)."""
    val = _spirv_val()
    if val is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(binary)
        f.flush()
        out = subprocess.run([val, "--target-env", codegen.validation_env(module), f.name],
                             capture_output=True, text=True)
    return None if out.returncode == 0 else (out.stdout + out.stderr).strip()[:2000]


def _local_argument(func: Function) -> Optional[str]:
    for a in func.args:
        t = a.value.type
        t = t.memref if isinstance(t, GroupType) else t
        if isinstance(t, MemrefType) and t.space != "global":
            return a.value.name
    return None


class _Arena:
    """The device copy of a launch's memory (see the module docstring)."""

    def __init__(self, memory: Memory, dev: "devices.Device"):
        spans, regions = stretches(memory.buffers)
        self.regions: List[Tuple[int, int, int]] = []  # (host start, bytes, arena offset)
        size = 0
        for start, end in regions:
            self.regions.append((start, end - start, size))
            size += -(-(end - start) // ALIGN) * ALIGN
        self.spans = spans
        self.itemsizes = [b.itemsize if b is not None else 1 for b in memory.buffers]
        #: (arena offset, int64 table, which entries are arena offsets to relocate)
        self.tables: List[Tuple[int, np.ndarray, Optional[np.ndarray]]] = []
        self.size = size
        self.dev = dev
        self.alloc = None

    def region_of(self, buffer: int) -> int:
        start = self.spans[buffer][0]
        return next(k for k, (s, n, _) in enumerate(self.regions) if s <= start < s + n)

    def offset(self, buffer: int) -> int:
        """Where a buffer's first byte is in the arena."""
        s, _, at = self.regions[self.region_of(buffer)]
        return at + self.spans[buffer][0] - s

    # where the kernel arguments point (``simt.pointer_arguments``): ("at", arena offset)
    null = None

    def address(self, m: MemRef) -> Optional[int]:
        """The arena offset of a memref's first element; None for a null memref."""
        b = int(m.buffer)
        if b < 0:
            return None
        if self.spans[b] is None:  # no elements: any valid address
            return 0
        return self.offset(b) + int(m.offset) * self.itemsizes[b]

    @staticmethod
    def pointer(offset: int):
        return ("at", offset)

    def table(self, table: np.ndarray, relocate: Optional[np.ndarray]):
        return ("at", self.add_table(table, relocate))

    def add_table(self, table: np.ndarray, relocate: Optional[np.ndarray] = None) -> int:
        """Place an int64 table; entries where `relocate` is true are arena offsets that
        become device addresses."""
        at = self.size
        self.tables.append((at, table, relocate))
        self.size += -(-max(table.nbytes, 8) // ALIGN) * ALIGN
        return at

    def allocate(self) -> int:
        """The arena's device address (after every table was added)."""
        self.alloc = cl.SVMAllocation(self.dev.context, max(self.size, ALIGN), ALIGN,
                                      cl.svm_mem_flags.READ_WRITE)
        return self.alloc.svm_ptr

    def copy_in(self) -> None:
        staging = np.zeros(max(self.size, ALIGN), np.uint8)
        for start, n, at in self.regions:
            staging[at:at + n] = _host(start, n)
        base = self.alloc.svm_ptr
        for at, table, relocate in self.tables:
            if relocate is not None:
                table = table + np.where(relocate, base, 0).astype(np.int64)
            staging[at:at + table.nbytes] = table.view(np.uint8)
        cl.enqueue_copy(self.dev.queue, self.alloc, staging)

    def copy_out(self, regions) -> np.ndarray:
        """Copy the regions back to the host; the whole arena as it is after the kernel."""
        staging = np.empty(max(self.size, ALIGN), np.uint8)
        cl.enqueue_copy(self.dev.queue, staging, self.alloc)
        self.dev.queue.finish()
        for k in sorted(regions):
            start, n, at = self.regions[k]
            _host(start, n)[:] = staging[at:at + n]
        return staging


def _host(address: int, n: int) -> np.ndarray:
    """The bytes of host memory at an address (of arrays the launch holds)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(address))


def _pointer(address: int):
    """A kernel argument pointing at a device address in the arena."""
    return cl.SVM(_host(address, 1))


class OpenCLModule(Module):
    target = "opencl"

    def __init__(self, program: Program, machine: Target, dev: "devices.Device",
                 checked: bool = False):
        super().__init__(program, checked, machine.max_grid)
        self.dev = dev
        try:
            lowered = codegen.lower(program, machine, checked)
            spirv = codegen.generate(lowered, machine, checked)
            self.binary = spirv.binary()
            #: per kernel, the instructions and allocas its findings name (checked code)
            self.instructions, self.locals = spirv.findings, spirv.locals
        except (CompileError, RecursionError):
            raise
        except Exception as e:  # a bug in a pass or the emitter: never a raw exception
            raise _error(program, f"internal compiler error on target opencl ({type(e).__name__}: "
                                  f"{e})") from e
        self.configs = {f.name: ExecConfig.of(f, machine, lowered) for f in lowered.functions}
        _fits(program, spirv, dev)
        #: per kernel, its allocas as data-race findings name them
        self.race_locals = spirv.race_locals
        lacks = devices.lacks_ballots(dev) if spirv.ballots is not None else None
        if lacks is not None:
            inst = spirv.ballots
            raise CompileError([Diagnostic(
                inst.loc, f"{inst.opcode}: checked code tests it with subgroup ballots, which "
                          f"need SPIR-V 1.3 and {devices.BALLOT_EXTENSION}; the OpenCL device "
                          f"{dev.name} lacks {lacks} (compile it unchecked, or check it on "
                          "target interp or cpu)")], program.source, program.filename)
        problem = _invalid(spirv, self.binary)
        if problem is not None:
            raise _error(program, "internal compiler error on target opencl: the SPIR-V module "
                                  f"fails spirv-val: {problem}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the runtime's build notes
                self.cl_program = cl.Program(dev.context, self.binary).build()
        except cl.Error as e:
            raise _error(program, f"the OpenCL device {dev.name} cannot build the SPIR-V "
                                  f"module: {e}") from None
        self.writes = {f.name: written(f) for f in program.functions}
        self.cl_kernels = {f.name: getattr(self.cl_program, f.name) for f in program.functions}
        self._lock = threading.Lock()

    def launch(self, kernel, args, grid) -> None:
        func = kernel.func
        memory = Memory()
        values = marshal(args, func.args, memory, func.name)
        writes = self.writes[func.name]
        check_writable(self.program, func, writes, values, memory)
        arena = _Arena(memory, self.dev)
        pending = []  # kernel arguments; ("at", arena offset) until the arena exists
        for a, v in zip(func.args, values):
            pending += self._arguments(a.value.type, v, arena)
        record = None
        if self.checked:  # the error buffer, last (``spirv.checks``)
            errors = checks.error_buffer()
            record = arena.add_table(errors)
            pending.append(("at", record))
        with self._lock:
            base = arena.allocate()
            cl_kernel = self.cl_kernels[func.name]
            cl_kernel.set_args(*[_pointer(base + x[1]) if isinstance(x, tuple) else x
                                 for x in pending])
            arena.copy_in()
            wx, wy = self.configs[func.name].work_group_size
            cl.enqueue_nd_range_kernel(self.dev.queue, cl_kernel,
                                       (grid[0] * wx, grid[1] * wy, grid[2]), (wx, wy, 1))
            back = {arena.region_of(int(m.buffer)) for i in writes
                    for m in members(values[i]) if int(m.buffer) >= 0
                    and arena.spans[int(m.buffer)] is not None}
            staging = arena.copy_out(back)
        if record is not None:
            found = checks.first_finding(staging[record:record + errors.nbytes].view(np.int64))
            if found is not None:
                instructions, config = self.instructions[func.name], self.configs[func.name]
                raise kernel_error(self.program.filename, func.name, found, instructions,
                                   config.work_group_size,
                                   [name for *_, name in self.locals[func.name]],
                                   lambda d: race_words(d, self.race_locals[func.name],
                                                        instructions, config.work_group_size,
                                                        config.subgroup_size))

    @staticmethod
    def _arguments(t, v, arena: _Arena) -> list:
        """The kernel arguments of one parameter (docs/spirv.md, "Kernel ABI")."""
        if isinstance(t, (MemrefType, GroupType)):
            return pointer_arguments(t, v, arena)
        if isinstance(t, BoolType):
            return [np.int8(bool(v))]
        assert isinstance(t, ScalarType), t
        if t.name == "bf16":
            return [np.asarray(v).view(np.uint16)[()]]
        return [v]


# ---- the registry's entry point (``ttlc.backends``) ------------------------------------------------
def compile(program: Program, machine: Target, checked: bool) -> OpenCLModule:
    name = next((f"@{f.name}, argument %{_local_argument(f)}" for f in program.functions
                 if _local_argument(f)), None)
    if name is not None:
        raise _error(program, f"target opencl cannot pass memrefs in local memory as kernel "
                              f"arguments yet ({name})")
    dev, why = devices.find()
    if dev is None:
        raise _error(program, f"target opencl: {why}; {devices.INSTALL}")
    return OpenCLModule(program, dev.target(machine), dev, checked)
