"""Target cuda without a GPU: a fake of the CUDA driver API that runs what it launches on
the Tile IR interpreter (``FakeDriver``), shared by tests/python/test_cuda.py and by the
checked-mode tests that run on every executing target (conftest.py, target ``cuda``)."""
from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np

from ttlc.backends.cuda import driver, module as cuda_module
from ttlc.backends.tile import simulate
from ttlc.backends.tile.abi import dtype

ATTRS = ("COMPUTE_CAPABILITY_MAJOR", "COMPUTE_CAPABILITY_MINOR", "MAX_GRID_DIM_X",
         "MAX_GRID_DIM_Y", "MAX_GRID_DIM_Z")
ERRORS = {2: b"CUDA_ERROR_OUT_OF_MEMORY", 100: b"CUDA_ERROR_NO_DEVICE",
          719: b"CUDA_ERROR_LAUNCH_FAILED"}


class FakeDriver:
    """``cuda.bindings.driver`` as far as target cuda uses it: one device (sm_90, CUDA's
    grid limits) whose memory is host memory (``memory``, the interpreter's)."""

    CUdevice_attribute = SimpleNamespace(**{f"CU_DEVICE_ATTRIBUTE_{a}": a for a in ATTRS})

    def __init__(self, init_error: int = 0, devices: int = 1):
        self.init_error, self.devices = init_error, devices
        self.launch_error = self.alloc_error = 0
        self.attrs = dict(zip(ATTRS, (9, 0, 2**31 - 1, 65535, 65535)))
        self.memory = simulate.Memory()
        self.allocations = {}
        self.calls = []  # (name, args)
        self.launches = []  # (function, grid, block, shared memory, stream, parameter words)
        self.entries = {}

    def _call(self, name, *args):
        self.calls.append((name, args))

    def cuInit(self, flags):
        return (self.init_error,)

    def cuDeviceGetCount(self):
        return 0, self.devices

    def cuDeviceGet(self, ordinal):
        return 0, ordinal

    def cuDeviceGetName(self, n, dev):
        return 0, b"Fake GPU".ljust(n, b"\0")

    def cuDeviceGetAttribute(self, attr, dev):
        return 0, self.attrs[attr]

    def cuDevicePrimaryCtxRetain(self, dev):
        return 0, "context"

    def cuCtxPushCurrent(self, ctx):
        self._call("cuCtxPushCurrent", ctx)
        return (0,)

    def cuCtxPopCurrent(self):
        self._call("cuCtxPopCurrent")
        return 0, "context"

    def cuLibraryLoadData(self, code, *options):
        self._call("cuLibraryLoadData", code)
        return 0, "library"

    def cuLibraryGetKernel(self, library, name):
        return 0, name.decode()

    def cuKernelGetFunction(self, kernel):
        return 0, kernel

    def cuMemAlloc(self, n):
        if self.alloc_error and self.allocations:  # the first allocation succeeds
            return self.alloc_error, 0
        block = np.zeros(n, np.uint8)
        self.memory.add(block)
        self.allocations[block.ctypes.data] = block
        return 0, block.ctypes.data

    def cuMemFree(self, at):
        del self.allocations[at]
        return (0,)

    def cuMemcpyHtoD(self, dst, src, n):
        self._call("cuMemcpyHtoD", dst, src, n)
        ctypes.memmove(dst, src, n)
        return (0,)

    def cuMemcpyDtoH(self, dst, src, n):
        self._call("cuMemcpyDtoH", dst, src, n)
        ctypes.memmove(dst, src, n)
        return (0,)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        words = [ctypes.c_uint64.from_address(int(p)).value for p in np.asarray(params)]
        self.launches.append((f, (gx, gy, gz), (bx, by, bz), shared, stream, words))
        if self.launch_error:
            return (self.launch_error,)
        entry = self.entries[f]
        raw = np.array(words[:len(entry.args)], np.uint64).view(np.uint8).reshape(-1, 8)
        values = [np.frombuffer(w[:dtype(a.type).itemsize].tobytes(), dtype(a.type))[0]
                  for w, a in zip(raw, entry.args)]
        simulate.execute(entry, values, self.memory, (gx, gy, gz))
        return (0,)

    def cuCtxSynchronize(self):
        return (0,)

    def cuGetErrorName(self, err):
        return 0, ERRORS.get(int(err), b"CUDA_ERROR_UNKNOWN")

    def read(self, address: int, dt, count: int) -> np.ndarray:
        return self.memory.read(address + np.arange(count) * np.dtype(dt).itemsize, np.dtype(dt))


def install(setattr_, dev: "FakeDriver") -> None:
    """Put ``dev`` in place of cuda-python's driver, through ``setattr_`` (a
    ``pytest.MonkeyPatch``'s, so that the test undoes it), with tileiras replaced by a
    stand-in (the fake loads no cubin: it runs the module's Tile IR)."""
    setattr_(driver, "API", dev)
    setattr_(cuda_module, "tileiras", lambda code, arch, opt=None: (b"cubin " + arch.encode(), ""))
    translate = cuda_module.translate

    def registered(*args, **kwargs):  # the fake runs the entries of every module compiled
        module = translate(*args, **kwargs)
        dev.entries.update({e.name: e for e in module.entries})
        return module
    setattr_(cuda_module, "translate", registered)
    driver.find.cache_clear()
