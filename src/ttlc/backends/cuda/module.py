"""Back end "cuda": target cuda-tile's module compiled by NVIDIA's ``tileiras`` to a
cubin, loaded and launched with the CUDA driver (docs/cuda-tile.md, "Running kernels").

``compile`` finds the device (``driver.find``; none is a CompileError saying why),
translates the program to Tile IR (``tile.backend.translate``), writes its bytecode and
has ``tileiras`` compile it for the device's architecture (``TTLC_CUDA_ARCH`` chooses
another), then loads the cubin with ``cuLibraryLoadData`` and each kernel with
``cuLibraryGetKernel``.

A launch is what ``cuda.tile.launch`` of NVIDIA's cuTile does with the cubins tileiras
makes: ``cuLaunchKernel`` on a grid of (gx, gy, gz) tile blocks, one per work-group,
with blocks of (1, 1, 1) threads (tileiras decides the threads of a tile block) and no
dynamic shared memory, each parameter in a 64-bit word of its own (``abi.words``).  It
runs on the legacy default stream and waits for the kernel before returning.

Arguments are checked by ``ttlc.runtime.args`` as on every target and passed by the
entry ABI (``tile.abi.parameters``, the packing the Tile IR interpreter runs too).  A
DLPack array on the device (PyTorch, CuPy: ``__dlpack_device__`` says CUDA) is passed
where it lies, with no copy; other arrays (NumPy) are copied to the device before the
kernel, each stretch of host memory they cover as one (``copies.stretches``), and the
stretches holding arguments the kernel writes are copied back after it.
"""
from __future__ import annotations

import os
import threading
from typing import List, Optional, Sequence, Set, Tuple

import numpy as np

from ...diagnostics import CompileError, Diagnostic, KernelError
from ...ir.core import Location, Program
from ...runtime import Module
from ...runtime import dlpack
from ...runtime.args import Group, marshal, memref_address
from ...runtime.values import Memory
from ...target import Target
from ..copies import check_writable, members, stretches, written
from ..tile import bytecode, checks
from ..tile.abi import parameters, words
from ..tile.backend import translate
from ..tile.tir import Module as TileModule
from ..tile.tools import tileiras
from . import driver

#: the environment variable naming the architecture to compile for (``sm_90``)
ARCH_VARIABLE = "TTLC_CUDA_ARCH"
#: DLPack's number of CUDA's legacy default stream, on which kernels run
LEGACY_STREAM = 1


def _error(program: Program, message: str) -> CompileError:
    loc = program.functions[0].loc if program.functions else Location(1, 1, 1, 1)
    return CompileError([Diagnostic(loc, message)], program.source, program.filename)


def cubin(program: Program, module: TileModule, arch: str) -> bytes:
    """The cubin of the program's Tile IR module for a GPU architecture; CompileError for
    a missing tileiras or a module tileiras refuses."""
    code = bytecode.write(module)
    try:
        out, log = tileiras(code, arch)
    except FileNotFoundError as e:
        raise _error(program, f"target cuda: {e}") from None
    if out is None:
        raise _error(program, f"internal compiler error on target cuda: tileiras "
                              f"--gpu-name={arch} refused the module: {log.strip()[:2000]}")
    return out


def _arch(program: Program, dev: Optional["driver.Device"], why: str = "") -> str:
    arch = os.environ.get(ARCH_VARIABLE)
    if arch:
        return arch
    if dev is None:
        raise _error(program, f"target cuda: no architecture to compile for: {why}; set "
                              f"{ARCH_VARIABLE} (e.g. sm_90) to compile without a device")
    return dev.arch


def emit(program: Program, stage: str, machine: Target, checked: bool) -> bytes:
    """Stage ``cubin``: the cubin for ``TTLC_CUDA_ARCH``, else for the device's architecture."""
    dev, why = (None, "") if os.environ.get(ARCH_VARIABLE) else driver.find()
    return cubin(program, translate(program, machine, checked), _arch(program, dev, why))


def compile(program: Program, machine: Target, checked: bool) -> "CudaModule":
    dev, why = driver.find()
    if dev is None:
        raise _error(program, f"target cuda: {why}; {driver.INSTALL}")
    return CudaModule(program, machine, dev, checked)


class _DeviceCopies:
    """Where the entry's pointers point (``abi.parameters``): device addresses.  Arrays
    on the device are where they lie; the stretches of host memory the others cover are
    copied to allocations of the device, and the group tables too."""

    null = 0

    def __init__(self, memory: Memory, on_device: Set[int]):
        self.memory = memory
        self.allocations: List[int] = []
        self.device = [bool(s) and s[0] in on_device for s in stretches(memory.buffers)[0]]
        self.host = [None if d else b for b, d in zip(memory.buffers, self.device)]
        #: (host start, end, device address) of each stretch of host memory
        self.stretches: List[Tuple[int, int, int]] = []

    def copy_in(self) -> None:
        """Allocate the stretches of host memory on the device and copy them there."""
        for start, end in stretches(self.host)[1]:
            self.stretches.append((start, end, self._copy_in(start, end - start)))

    def _copy_in(self, host: int, n: int) -> int:
        at = int(driver.call("cuMemAlloc", n))
        self.allocations.append(at)
        driver.call("cuMemcpyHtoD", at, host, n)
        return at

    def _on_device(self, address: int) -> int:
        for start, end, at in self.stretches:
            if start <= address < end:
                return at + address - start
        return address  # on the device already, or of a memref with no elements

    def address(self, m) -> Optional[int]:
        return None if int(m.buffer) < 0 else self._on_device(memref_address(m, self.memory))

    @staticmethod
    def pointer(address: int) -> int:
        return address

    def table(self, table: np.ndarray, relocate) -> int:
        table = np.ascontiguousarray(table, np.int64)  # never empty (simt.pointer_arguments)
        return self._copy_in(table.ctypes.data, table.nbytes)

    def record(self, record: np.ndarray) -> int:
        """A checked entry's error record on the device (zero: no finding yet)."""
        return self._copy_in(record.ctypes.data, record.nbytes)

    def copy_back(self, buffers: Sequence[int]) -> None:
        """Copy the stretches holding these host buffers back to the host."""
        starts = {self.memory.buffers[b].__array_interface__["data"][0] for b in buffers
                  if not self.device[b] and self.memory.buffers[b].nbytes}
        for start, end, at in self.stretches:
            if any(start <= s < end for s in starts):
                driver.call("cuMemcpyDtoH", start, at, end - start)

    def free(self) -> None:
        for at in self.allocations:
            driver.call("cuMemFree", at)
        self.allocations = []


class CudaModule(Module):
    target = "cuda"

    def __init__(self, program: Program, machine: Target, dev: "driver.Device",
                 checked: bool = False):
        super().__init__(program, checked, dev.max_grid)
        self.dev = dev
        self.arch = _arch(program, dev)
        self.tile = translate(program, machine, checked)
        self.cubin = cubin(program, self.tile, self.arch)
        self.entries = {e.name: e for e in self.tile.entries}
        self.writes = {f.name: written(f) for f in program.functions}
        try:
            with dev:
                self.library = driver.call("cuLibraryLoadData", self.cubin, None, None, 0,
                                           None, None, 0)
                self.functions = {e.name: driver.call("cuKernelGetFunction", driver.call(
                    "cuLibraryGetKernel", self.library, e.name.encode()))
                    for e in self.tile.entries}
        except driver.CudaError as e:
            raise _error(program, f"target cuda: {dev.name} cannot load the cubin for "
                                  f"{self.arch}: {e}") from None
        self._lock = threading.Lock()

    def launch(self, kernel, args, grid) -> None:
        func = kernel.func
        on_device: Set[int] = set()
        if len(args) == len(func.args):  # else marshal says what is wrong
            args = [self._device_view(x, f"argument {i} (%{a.value.name}) of @{func.name}",
                                      on_device) for i, (x, a) in enumerate(zip(args, func.args))]
        memory = Memory()
        values = marshal(args, func.args, memory, func.name)
        writes = self.writes[func.name]
        check_writable(self.program, func, writes, values, memory)
        copies = _DeviceCopies(memory, on_device)
        try:
            with self._lock, self.dev:
                try:
                    copies.copy_in()
                    entry = self.entries[func.name]
                    record = checks.new_record()
                    at = copies.record(record) if entry.checked is not None else None
                    params = words(parameters(entry, func, values, copies, at))
                    pointers = params.ctypes.data + 8 * np.arange(max(len(params), 1),
                                                                  dtype=np.uint64)
                    driver.call("cuLaunchKernel", self.functions[func.name], *grid, 1, 1, 1, 0, 0,
                                pointers, 0)
                    driver.call("cuCtxSynchronize")
                    copies.copy_back([int(m.buffer) for i in writes for m in members(values[i])
                                      if int(m.buffer) >= 0])
                    if at is not None:
                        driver.call("cuMemcpyDtoH", record.ctypes.data, at, record.nbytes)
                finally:
                    copies.free()
        except driver.CudaError as e:  # out of memory, a failed launch, ...
            raise KernelError(f"{self.program.filename}:{func.loc}: kernel @{func.name} on "
                              f"{self.dev.name}: {e}") from None
        checks.raise_finding(entry, self.program.filename, record)

    def _device_view(self, x, what: str, on_device: Set[int]):
        """`x` with the DLPack arrays on a CUDA device (its members, for a group) as NumPy
        arrays over their device memory, which ``marshal`` checks as any array and which
        nothing reads on the host; their addresses are added to `on_device` (``marshal``'s
        buffers start where their arrays do)."""
        if isinstance(x, (list, tuple)):
            return type(x)(self._device_view(m, f"{what}, member {i}", on_device)
                           for i, m in enumerate(x))
        if isinstance(x, Group):
            return Group(self._device_view(list(x.arrays), what, on_device), x.offset, x.shapes)
        if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack_device__"):
            return x
        kind, ordinal = x.__dlpack_device__()
        if int(kind) not in dlpack.CUDA_DEVICES:
            return x
        if int(ordinal) != self.dev.ordinal:
            raise ValueError(f"{what}: the array is on CUDA device {int(ordinal)}, the module "
                             f"on {self.dev.name}")
        try:
            arr = dlpack.view(x, dlpack.CUDA_DEVICES, stream=LEGACY_STREAM)
        except TypeError as e:
            raise TypeError(f"{what}: {e}") from None
        on_device.add(arr.__array_interface__["data"][0])
        return arr
