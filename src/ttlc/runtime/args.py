"""Argument marshalling: Python values to kernel arguments, checked before anything runs.

Shared by every target.  A memref takes a NumPy array (or any DLPack or buffer-protocol
exporter, viewed without a copy) whose dtype is the element type; static sizes and
strides of the memref type must match the array; dynamic ones are taken from it.
Strides are in elements and must be positive and non-overlapping in column-major
order (``np.asfortranarray`` gives the packed layout).  A group takes a sequence of
such arrays, or a ``ttlc.Group`` (see ``Group``) when it needs an offset.  Scalars are
checked for kind and range.  Every mismatch raises TypeError or ValueError naming the
argument.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..ir.core import Argument
from ..ir.types import DYNAMIC, BoolType, GroupType, MemrefType, ScalarType, Type
from ..interp.values import DTYPES, Group as GroupValue, Memory, MemRef


@dataclass
class Group:
    """A group argument: member arrays plus the group's element offset.

    Member ``i`` of the kernel is the memref that starts ``offset`` elements after the
    first element of ``arrays[i]``; its dynamic sizes come from ``shapes[i]`` (or from
    the array itself when the offset is 0 and no shapes are given).  The memref must lie
    inside the array's memory: this is checked for every member before the kernel runs.
    """

    arrays: Sequence[Any]
    offset: int = 0
    shapes: Optional[Sequence[Tuple[int, ...]]] = None


def as_array(x: Any, what: str) -> np.ndarray:
    """A NumPy view of an array-like without copying (DLPack or buffer protocol)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except Exception as e:  # exporter-specific failures (device arrays, ...)
            raise TypeError(f"{what}: cannot view the DLPack array on the CPU without a copy ({e})") from None
    try:
        memoryview(x)
    except TypeError:
        raise TypeError(f"{what}: expected an array (NumPy, DLPack or buffer protocol), got "
                        f"{type(x).__name__}") from None
    return np.asarray(memoryview(x))


def _extent(shape, stride) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def _flat_view(arr: np.ndarray, start: int, extent: int) -> np.ndarray:
    """The 1-D memory of an array from its first element on (a view, no copy)."""
    item = arr.itemsize
    if extent == 0:
        return np.empty(0, dtype=arr.dtype)
    return np.lib.stride_tricks.as_strided(arr, shape=(start + extent,), strides=(item,),
                                           writeable=arr.flags.writeable)[start:]


def _element_strides(arr: np.ndarray, what: str) -> Tuple[int, ...]:
    item = arr.itemsize
    strides = []
    packed = 1
    for size, st in zip(arr.shape, arr.strides):
        if size == 1:
            strides.append(packed)  # any stride addresses the same element
        else:
            if st % item or st <= 0:
                raise ValueError(f"{what}: strides must be positive multiples of the element size "
                                 f"(got {arr.strides} bytes for {item}-byte elements)")
            strides.append(st // item)
        packed = strides[-1] * size
    for i in range(1, len(strides)):
        if arr.shape[i - 1] > 1 and arr.shape[i] > 1 and strides[i - 1] * arr.shape[i - 1] > strides[i]:
            raise ValueError(f"{what}: the array is not in column-major order (strides "
                             f"{tuple(strides)} elements for shape {arr.shape}); pass "
                             "np.asfortranarray(x) or a Fortran-ordered array")
    return tuple(strides)


def _check_attrs(arr_ptr: int, shape, stride, attrs: dict, element: ScalarType, what: str) -> None:
    alignment = attrs.get("alignment")
    if alignment and arr_ptr % alignment:
        raise ValueError(f"{what}: base address is not aligned to {alignment} bytes as the "
                         "alignment attribute promises")
    for key, dims in (("shape_gcd", shape), ("stride_gcd", stride)):
        for i, (d, g) in enumerate(zip(dims, attrs.get(key, []))):
            if d % g:
                raise ValueError(f"{what}: {key}[{i}] = {g} does not divide {d}")


def memref_arg(x: Any, t: MemrefType, attrs: dict, memory: Memory, what: str,
               offset: int = 0, shape: Optional[Tuple[int, ...]] = None) -> MemRef:
    if x is None:
        return MemRef(-1, 0, tuple(s or 0 for s in t.shape), tuple(s or 0 for s in t.stride),
                      DTYPES[t.element.name])
    arr = as_array(x, what)
    want = DTYPES[t.element.name]
    if arr.dtype != want:
        raise TypeError(f"{what}: expected dtype {want} for {t}, got {arr.dtype}")
    if shape is None:
        if arr.ndim != t.order:
            raise ValueError(f"{what}: expected an array of order {t.order} for {t}, got shape "
                             f"{arr.shape}")
        shape = tuple(arr.shape)
        stride = _element_strides(arr, what)
    else:
        shape = tuple(int(s) for s in shape)
        if len(shape) != t.order:
            raise ValueError(f"{what}: shape {shape} has order {len(shape)}, expected {t.order}")
        stride = tuple(MemrefType.packed_stride(shape))
        stride = tuple(s if s is not DYNAMIC else p for s, p in zip(t.stride, stride))
    for i, (want_s, got) in enumerate(zip(t.shape, shape)):
        if want_s is not DYNAMIC and want_s != got:
            raise ValueError(f"{what}: mode {i} must have size {want_s} for {t}, got {got} "
                             f"(shape {shape})")
    for i, (want_s, got) in enumerate(zip(t.stride, stride)):
        if want_s is not DYNAMIC and want_s != got and shape[i] > 1:
            raise ValueError(f"{what}: mode {i} must have stride {want_s} elements for {t}, got "
                             f"{got}")
    stride = tuple(got if want_s is DYNAMIC else want_s for want_s, got in zip(t.stride, stride))
    _check_attrs(arr.ctypes.data + offset * arr.itemsize, shape, stride, attrs, t.element, what)
    extent = _extent(shape, stride)
    available = _extent(arr.shape, _element_strides(arr, what)) if arr.ndim else 1
    if offset < 0 or offset + extent > available:
        raise ValueError(f"{what}: the memref ({extent} elements from offset {offset}) does not "
                         f"fit in the array's {available} elements")
    buffer_id = memory.add(_flat_view(arr.reshape(-1) if arr.ndim == 0 else arr, 0, available))
    return MemRef(buffer_id, offset, shape, stride, want)


def group_arg(x: Any, t: GroupType, attrs: dict, memory: Memory, what: str) -> GroupValue:
    offset, shapes = 0, None
    if isinstance(x, Group):
        offset, shapes, arrays = int(x.offset), x.shapes, list(x.arrays)
    elif isinstance(x, (list, tuple)):
        arrays = list(x)
    else:
        raise TypeError(f"{what}: expected a sequence of arrays or ttlc.Group for {t}, got "
                        f"{type(x).__name__}")
    if t.offset is not DYNAMIC and offset not in (0, t.offset):
        raise ValueError(f"{what}: the group type has static offset {t.offset}, got offset {offset}")
    if t.offset is not DYNAMIC:
        offset = t.offset
    if t.size is not DYNAMIC and len(arrays) != t.size:
        raise ValueError(f"{what}: expected {t.size} members for {t}, got {len(arrays)}")
    if shapes is not None and len(shapes) != len(arrays):
        raise ValueError(f"{what}: {len(shapes)} shapes given for {len(arrays)} members")
    members = [memref_arg(a, t.memref, attrs, memory, f"{what}[{i}]", offset,
                          shapes[i] if shapes is not None else (None if offset == 0 else t.memref.shape))
               for i, a in enumerate(arrays)]
    return GroupValue(members)


def scalar_arg(x: Any, t: Type, what: str):
    if isinstance(t, BoolType):
        if not isinstance(x, (bool, np.bool_)):
            raise TypeError(f"{what}: expected a bool, got {type(x).__name__}")
        return np.bool_(x)
    assert isinstance(t, ScalarType)
    dtype = DTYPES[t.name]
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, complex, np.number)):
        raise TypeError(f"{what}: expected a number for {t}, got {type(x).__name__}")
    if t.is_int:
        if not (isinstance(x, (int, np.integer))):
            raise TypeError(f"{what}: expected an integer for {t}, got {type(x).__name__}")
        info = np.iinfo(dtype)
        if not info.min <= int(x) <= info.max:
            raise ValueError(f"{what}: {int(x)} is out of range for {t} ({info.min} to {info.max})")
        return dtype.type(int(x))
    if t.is_float and isinstance(x, (complex, np.complexfloating)):
        raise TypeError(f"{what}: expected a real number for {t}, got a complex number")
    value = np.asarray(x).astype(dtype)[()]
    if np.isfinite(x) and not np.all(np.isfinite(value)):
        raise ValueError(f"{what}: {x} is out of range for {t}")
    return value


def marshal(args: Sequence[Any], params: List[Argument], memory: Memory, kernel: str) -> list:
    if len(args) != len(params):
        raise TypeError(f"kernel @{kernel} takes {len(params)} argument"
                        f"{'s' if len(params) != 1 else ''}, got {len(args)}")
    out = []
    for i, (x, p) in enumerate(zip(args, params)):
        what = f"argument {i} (%{p.value.name}) of @{kernel}"
        t = p.value.type
        if isinstance(t, MemrefType):
            out.append(memref_arg(x, t, p.attrs, memory, what))
        elif isinstance(t, GroupType):
            out.append(group_arg(x, t, p.attrs, memory, what))
        else:
            out.append(scalar_arg(x, t, what))
    return out
