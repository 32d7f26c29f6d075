"""The memory model every target shares: buffers, memrefs, groups and element dtypes.

``runtime.args`` turns a launch's arguments into these values; the reference
interpreter computes with them and target cpu packs them into its kernel ABI.

Memory is a list of flat NumPy buffers; a memref is a pointer into one of them
(buffer id and element offset) plus shape and strides.  Inside SPMD regions of the
interpreter any of these fields may vary per work-item (a NumPy array over the lanes
of the work-group), which is how subviews with per-item offsets and group loads with
per-item indices stay true views that write through.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple, Union

import ml_dtypes
import numpy as np

from ..ir.types import BoolType, CoopMatrixType, ScalarType, Type

DTYPES = {
    "i8": np.dtype(np.int8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64), "index": np.dtype(np.int64), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "c32": np.dtype(np.complex64), "c64": np.dtype(np.complex128),
}


def dtype_of(t: Type) -> np.dtype:
    if isinstance(t, BoolType):
        return np.dtype(np.bool_)
    if isinstance(t, CoopMatrixType):
        return DTYPES[t.component.name]
    assert isinstance(t, ScalarType), t
    return DTYPES[t.name]


class OutOfBounds(Exception):
    """A memory access outside the buffer it belongs to (never performed)."""


PerLane = Union[int, np.ndarray]  # uniform integer or one integer per work-item


@dataclass
class MemRef:
    """A view: element (buffer, offset) + shape and strides, each uniform or per lane."""

    buffer: PerLane  # index into Memory.buffers
    offset: PerLane
    shape: Tuple[PerLane, ...]
    stride: Tuple[PerLane, ...]
    dtype: np.dtype

    @property
    def uniform(self) -> bool:
        return all(np.ndim(x) == 0 for x in (self.buffer, self.offset, *self.shape, *self.stride))


@dataclass
class GroupValue:
    """A group at run time: one MemRef per member (offset already applied).  (The
    argument a caller passes is ``ttlc.Group``, in ``runtime.args``.)"""

    members: List[MemRef]
    #: False for a null group (``None`` passed for the argument): associated gives false
    associated: bool = True


class Memory:
    """All buffers a kernel launch may touch: the arguments' and local allocations."""

    def __init__(self):
        self.buffers: List[np.ndarray] = []
        self.spaces: List[str] = []

    def add(self, flat: np.ndarray, space: str = "global") -> int:
        self.buffers.append(flat)
        self.spaces.append(space)
        return len(self.buffers) - 1

    def free(self, buffer_id: int) -> None:
        self.buffers[buffer_id] = None  # type: ignore[assignment]

    def ndarray(self, m: MemRef) -> np.ndarray:
        """A NumPy view of a uniform memref (for collective instructions)."""
        assert m.uniform
        buf = self.buffers[int(m.buffer)]
        item = buf.itemsize
        shape = tuple(int(s) for s in m.shape)
        if any(s == 0 for s in shape):
            return np.empty(shape, dtype=buf.dtype)
        last = int(m.offset) + sum((s - 1) * int(st) for s, st in zip(shape, m.stride))
        if int(m.offset) < 0 or last >= len(buf):
            raise OutOfBounds(f"a view of shape {shape} at element offset {int(m.offset)} reaches "
                              f"element {last} of a buffer of {len(buf)} elements")
        # np.ndarray over the buffer is a view (writes land in the buffer) and is much
        # cheaper to make than as_strided; the range was checked above
        return np.ndarray(shape, buf.dtype, buffer=buf, offset=int(m.offset) * item,
                          strides=tuple(int(s) * item for s in m.stride))
