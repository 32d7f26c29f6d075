"""The CUDA device target cuda runs on, through the driver API of cuda-python
(``cuda.bindings.driver``): device 0 of those the process sees (``CUDA_VISIBLE_DEVICES``
chooses), found once per process, with its primary context (the one PyTorch and CuPy
use, so that their arrays are valid in it).

``API`` is the driver module every call goes through (``call``); the tests put a fake
driver there.  Importing this module needs cuda-python, not a driver: the driver library
(``libcuda.so.1``) is loaded by the first call, and its absence is a reason ``find``
gives, like a driver that sees no device.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Tuple

from cuda.bindings import driver as API  # noqa: N812 (the tests replace it)

#: what to do when there is no device (part of the CompileError's message)
INSTALL = ("target cuda needs an NVIDIA GPU with its driver (libcuda.so.1, CUDA 13.1 or "
           "later) and pip install 'ttlc[cuda]'")
#: the largest grid size per mode of a Tile IR kernel ("Grid Dimension Limitation" of
#: ``get_tile_block_id`` in NVIDIA's Tile IR specification; cuTile refuses larger grids)
TILE_MAX_GRID = 2**24 - 1


class CudaError(RuntimeError):
    """A driver call that failed: the call and the driver's name of the error."""

    def __init__(self, call: str, error: str):
        super().__init__(f"{call} failed with {error}")
        self.call, self.error = call, error


def _error_name(err) -> str:
    try:
        status, name = API.cuGetErrorName(err)
        if int(status) == 0:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # the name is only for the message
        pass
    return f"CUresult {int(err)}"


def call(name: str, *args) -> Any:
    """``API.name(*args)``; its result (None, one value or a tuple), CudaError when the
    driver reports an error."""
    out = getattr(API, name)(*args)
    if int(out[0]) != 0:
        raise CudaError(name, _error_name(out[0]))
    return None if len(out) == 1 else out[1] if len(out) == 2 else out[1:]


class Device:
    """A CUDA device: its name, architecture (``sm_XY``), largest grid per mode (the
    device's and Tile IR's limit) and primary context; ``with device:`` makes that
    context current."""

    def __init__(self, ordinal: int):
        attr = API.CUdevice_attribute
        self.handle = call("cuDeviceGet", ordinal)
        self.ordinal = ordinal
        query = lambda name: call("cuDeviceGetAttribute",  # noqa: E731
                                  getattr(attr, f"CU_DEVICE_ATTRIBUTE_{name}"), self.handle)
        name = call("cuDeviceGetName", 256, self.handle)
        name = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else name
        self.name = f"CUDA device {ordinal}: {name}"
        major, minor = query("COMPUTE_CAPABILITY_MAJOR"), query("COMPUTE_CAPABILITY_MINOR")
        self.arch = f"sm_{major}{minor}"
        self.max_grid = tuple(min(TILE_MAX_GRID, query(f"MAX_GRID_DIM_{m}")) for m in "XYZ")
        self.context = call("cuDevicePrimaryCtxRetain", self.handle)

    def __enter__(self) -> "Device":
        call("cuCtxPushCurrent", self.context)
        return self

    def __exit__(self, *exc) -> None:
        call("cuCtxPopCurrent")


@functools.lru_cache(maxsize=None)
def find() -> Tuple[Optional[Device], str]:
    """(the device, "") or (None, why there is none)."""
    try:
        call("cuInit", 0)
        count = call("cuDeviceGetCount")
        if count < 1:
            return None, "the CUDA driver sees no device (cuDeviceGetCount gives 0)"
        return Device(0), ""
    except CudaError as e:
        return None, f"the CUDA driver has no device for ttlc ({e})"
    except Exception as e:  # the driver library itself is missing or cannot be loaded
        return None, f"the CUDA driver cannot be used ({type(e).__name__}: {e})"
