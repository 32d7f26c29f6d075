"""Viewing a DLPack tensor on the CPU as a NumPy array without a copy, for the types
NumPy's own ``np.from_dlpack`` refuses (bfloat16: NumPy has no such type; ttlc uses
``ml_dtypes.bfloat16``).

``view(x)`` reads the ``DLManagedTensor`` behind ``x.__dlpack__()`` (the DLPack C
structures, ``dlpack.h``) and makes an array over its memory whose base keeps the
capsule, and with it the producer's tensor, alive; the producer's capsule destructor
frees the structure once the array is gone.  Only memory the CPU can read (device kCPU
or kCUDAHost) is viewed, unless the caller names other devices: target cuda views the
memory of CUDA devices so, to check and pass the arrays there, and never reads it on
the host (reading such an array ends the process).
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

import numpy as np


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


#: kCPU, kCUDAHost
CPU_DEVICES = (1, 3)
#: kDLCUDA, kDLCUDAManaged
CUDA_DEVICES = (2, 13)
#: DLPack type codes: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5, kDLBool 6
_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dtype(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes == 1:
        if code == 4 and bits == 16:
            import ml_dtypes
            return np.dtype(ml_dtypes.bfloat16)
        if code == 6 and bits == 8:
            return np.dtype(np.bool_)
        kind = {0: "i", 1: "u", 2: "f", 5: "c"}.get(code)
        if kind is not None:
            try:
                return np.dtype(f"{kind}{bits // 8}")
            except TypeError:
                pass
    name = f"{_CODES.get(code, f'code {code}')}{bits}" + (f"x{lanes}" if lanes != 1 else "")
    raise TypeError(f"DLPack type {name} has no NumPy counterpart")


class _Memory:
    """The bytes of a DLPack tensor, for np.asarray; holds the capsule (and producer)."""

    def __init__(self, producer: Any, capsule: Any, address: int, nbytes: int):
        self.producer, self.capsule = producer, capsule
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (address, False), "version": 3}


def view(x: Any, devices: Tuple[int, ...] = CPU_DEVICES,
         stream: Optional[int] = None) -> np.ndarray:
    """A NumPy array over the memory of DLPack producer x (TypeError when it is not on one
    of `devices`, DLPack device types, or its type has no NumPy counterpart); `stream` is
    the consumer's stream the producer is asked to order its work before (DLPack's
    ``__dlpack__(stream=...)``; 1 is CUDA's legacy default stream)."""
    capsule = x.__dlpack__() if stream is None else x.__dlpack__(stream=stream)
    t = _Tensor.from_address(_get_pointer(capsule, b"dltensor"))
    if t.device.device_type not in devices:
        where = "the CPU" if devices == CPU_DEVICES else f"device types {devices}"
        raise TypeError(f"the DLPack tensor is on device type {t.device.device_type}, not {where}")
    dtype = _dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(t.ndim))
    else:  # compact row-major
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
        strides = tuple(strides)
    if 0 in shape:
        return np.empty(shape, dtype)
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    size = dtype.itemsize
    start = t.data + t.byte_offset + low * size
    flat = np.asarray(_Memory(x, capsule, start, (high - low + 1) * size)).view(dtype)
    return np.lib.stride_tricks.as_strided(flat[-low:], shape, tuple(s * size for s in strides))
