"""Argument marshalling: Python values to kernel arguments, checked before anything runs.

Shared by every target.  A memref takes a NumPy array (or any DLPack or buffer-protocol
exporter, viewed without a copy) whose dtype is the element type; static sizes and
strides of the memref type must match the array; dynamic ones are taken from it.
Strides are in elements and must be positive and non-overlapping in column-major
order (``np.asfortranarray`` gives the packed layout; slices such as ``F[::2]`` of a
Fortran-ordered ``F`` are fine for memrefs with dynamic strides).  ``None`` passes a null
memref (``associated`` gives false).  A group takes a sequence of such arrays, a
``ttlc.Group`` (see ``Group``) when it needs an offset, or a ``ttlc.PreparedGroup``
(checked once, for launches over many members).  Scalars are checked for kind
and range.  Every mismatch raises TypeError or ValueError naming the argument (its
position, its name and the kernel) and what differs.
"""
from __future__ import annotations

import ctypes
import operator
import struct
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Collection, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..ir.core import Argument
from ..ir.types import DYNAMIC, BoolType, GroupType, MemrefType, ScalarType, Type
from .values import DTYPES, GroupValue, Memory, MemRef


@dataclass
class Group:
    """A group argument given with an element offset (``ttlc.Group``).

    ``Group(arrays, offset=k, shapes=[s0, s1, ...])`` passes the group whose member
    ``i`` is the memref starting ``k`` elements after the first element of
    ``arrays[i]`` (the C analogue: ``float** g`` with ``g[i] + k``), exactly as the
    language defines ``group<memref<...> x n, offset: k>``:

    * ``arrays`` -- one array per member (NumPy, DLPack or buffer protocol), of the
      memref's element type.  With an offset or explicit shapes an array is only the
      memory the member points into: it must be contiguous (any order) and is
      addressed as flat memory from its first element.  ``None`` is a null member.
    * ``offset`` -- the element offset, a non-negative integer.  Required for a
      dynamic offset (``offset: ?``; ``None`` there means 0).  For a static offset it
      may be omitted (``None``) or must equal the type's offset.  A plain list of
      arrays is ``Group(arrays)``: offset as the type says, each member's shape
      and strides from its array when the offset is 0.
    * ``shapes`` -- the shape of each member's memref (one tuple per member).  Needed
      whenever the offset is non-zero and the memref type has dynamic sizes; optional
      when all sizes are static (the type's shape).  The member's layout is the
      type's static strides, and the packed column-major layout for dynamic ones.

    Every member is checked before the kernel runs: element type, static sizes, the
    argument's alignment/shape_gcd/stride_gcd attributes, and that the memref fits in
    the member's array after the offset (``offset + extent <= array.size``).  This
    happens at every launch; a group passed to many launches is better prepared once
    (``PreparedGroup``, which takes the same arguments).

    Example: ``group<memref<f32x4x?>x?, offset: ?>`` with members of shape 4x3 and
    4x5 stored 8 elements into two buffers::

        bufs = [np.zeros(8 + 12, np.float32), np.zeros(8 + 20, np.float32)]
        kernel(ttlc.Group(bufs, offset=8, shapes=[(4, 3), (4, 5)]), grid=(2,))
    """

    arrays: Sequence[Any]
    offset: Optional[int] = None
    shapes: Optional[Sequence[Tuple[int, ...]]] = None


class PreparedGroup:
    """A group argument checked once and passed to many launches (``ttlc.PreparedGroup``).

    ``PreparedGroup(arrays, offset=None, shapes=None)`` takes what ``Group`` takes.  A
    list of arrays (or a ``Group``) is checked member by member at every launch, which
    costs about a microsecond per member and dominates a launch over thousands of small
    matrices.  A prepared group is checked against a kernel parameter's type at its
    first launch for that type (element type, static sizes and strides, the parameter's
    alignment/shape_gcd/stride_gcd attributes, that each memref fits its array: the
    checks and messages of a list); the table of member pointers and the table of their
    sizes and strides are built then, kept, and reused by every later launch of target
    cpu, whose cost no longer depends on the member count.  Target interp checks the
    members at every launch, as for a list.

    Preparing copies what later changes must not reach:

    * the list: the group keeps its own tuple of members; ``shapes`` are copied too;
    * each member: a private view of the array, so a later ``a.shape = ...`` on the
      caller's array changes nothing here; the views keep the memory alive, and NumPy
      refuses ``a.resize(...)`` of an array that is viewed elsewhere;
    * writeability, read once now: a kernel that writes the group raises
      ``ttlc.KernelError`` for a member that was read-only when prepared; making an
      array read-only afterwards does not reach the group;
    * DLPack members (e.g. torch tensors) whose producer may reallocate its memory in
      place (torch's ``resize_``, which frees the memory the view points to): the
      producer and its data address are kept, and every launch compares the addresses
      of these members (of these only) and refuses a changed one with ValueError.
      Prepare the group again after such a change.

    Raises TypeError/ValueError now for what does not depend on a kernel: a member that
    is not an array, a negative offset, ``shapes`` not one per member.
    """

    __slots__ = ("_arrays", "_offset", "_shapes", "_producers", "_tables")

    def __init__(self, arrays: Sequence[Any], offset: Optional[int] = None,
                 shapes: Optional[Sequence[Optional[Tuple[int, ...]]]] = None):
        what = "ttlc.PreparedGroup"
        arrays, offset, shapes = _group_parts(arrays, offset, shapes, what)
        views: List[Optional[np.ndarray]] = []
        producers = []
        for i, x in enumerate(arrays):
            member = f"{what}, member {i}"
            arr = None if x is None else as_array(x, member).view()
            views.append(arr)
            if arr is not None and not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
                producers.append((i, x, arr.ctypes.data, _data_address(x, arr.ctypes.data)))
        self._arrays = tuple(views)
        self._offset = offset
        self._shapes = (None if shapes is None else
                        tuple(None if sh is None else _as_shape(sh, f"{what}, member {i}")
                              for i, sh in enumerate(shapes)))
        #: (member, producer, its data address when prepared, a function giving it now)
        self._producers = tuple(producers)
        #: the quick path's slots per parameter type (``_quick_prepared``)
        self._tables: dict = {}

    arrays = property(lambda self: self._arrays, doc="the private views of the members")
    offset = property(lambda self: self._offset, doc="the offset given (None: the type's)")
    shapes = property(lambda self: self._shapes, doc="the shapes given (None: from the arrays)")

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        return f"<ttlc.PreparedGroup of {len(self._arrays)} members, offset {self._offset}>"

    def _moved(self) -> Optional[str]:
        """Why a DLPack member's memory is no longer what was prepared (the first such
        member), or None."""
        for i, producer, address, now in self._producers:
            kind = type(producer).__name__
            try:
                current = now()
            except Exception as e:  # the producer's own failures (e.g. freed storage)
                return (f"member {i}: the {kind} can no longer be viewed ({e}); prepare the "
                        "group again")
            if current != address:
                return (f"member {i}: the {kind}'s data moved from {address:#x} to {current:#x} "
                        "since the group was prepared (reallocated, e.g. by resize_); prepare "
                        "the group again")
        return None

    def check_current(self, what: str) -> None:
        """Raise ValueError naming the argument when a DLPack member was reallocated."""
        moved = self._moved() if self._producers else None
        if moved is not None:
            raise ValueError(f"{what}, {moved}")


def _data_address(producer: Any, address: int):
    """A function giving a DLPack producer's current data address: its ``data_ptr()``
    (PyTorch: a tenth of a microsecond) when that gives the address DLPack gave, else a
    new DLPack view (a few microseconds)."""
    data_ptr = getattr(producer, "data_ptr", None)
    if callable(data_ptr):
        try:
            if data_ptr() == address:
                return data_ptr
        except Exception:  # not the method this expects: take the DLPack view
            pass
    return lambda: _from_dlpack(producer).ctypes.data


def _from_dlpack(x: Any) -> np.ndarray:
    """NumPy's view of a DLPack producer, or ttlc's own (``runtime.dlpack``) for the types
    NumPy does not take (bfloat16)."""
    try:
        return np.from_dlpack(x)
    except Exception as first:  # exporter-specific failures (device arrays, types, ...)
        from . import dlpack
        try:
            return dlpack.view(x)
        except Exception as e:
            raise TypeError(f"{first}; {e}") from None


def as_array(x: Any, what: str) -> np.ndarray:
    """A NumPy view of an array-like without copying (DLPack or buffer protocol)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        try:
            arr = _from_dlpack(x)
        except TypeError as e:
            raise TypeError(f"{what}: cannot view the DLPack array on the CPU without a copy "
                            f"({e})") from None
        if not isinstance(arr, np.ndarray):  # pragma: no cover - defensive
            raise TypeError(f"{what}: DLPack export of {type(x).__name__} is not an array")
        return arr
    try:
        view = memoryview(x)
    except TypeError:
        raise TypeError(f"{what}: expected an array (NumPy, DLPack or buffer protocol), got "
                        f"{type(x).__name__}") from None
    try:
        return np.asarray(view)
    except Exception as e:
        raise TypeError(f"{what}: cannot view the {type(x).__name__} buffer as an array "
                        f"({e})") from None


def _extent(shape, stride) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def _flat_view(arr: np.ndarray, extent: int) -> np.ndarray:
    """The 1-D memory of an array from its first element on (a view, no copy)."""
    if extent == 0:
        return np.empty(0, dtype=arr.dtype)
    return np.lib.stride_tricks.as_strided(arr, shape=(extent,), strides=(arr.itemsize,),
                                           writeable=arr.flags.writeable)


def element_strides(arr: np.ndarray, what: str) -> Tuple[int, ...]:
    """The array's strides in elements, checked to be positive and column-major.

    Modes of size 1 get the packed stride (any stride addresses the same element); an
    empty array gets the packed strides (no element is ever addressed)."""
    item = arr.itemsize
    if arr.size == 0:
        return tuple(MemrefType.packed_stride(tuple(max(s, 1) for s in arr.shape)))
    strides: List[int] = []
    packed = 1  # smallest stride the next mode may have
    for i, (size, st) in enumerate(zip(arr.shape, arr.strides)):
        if size == 1:
            strides.append(packed)
        else:
            if st <= 0 or st % item:
                raise ValueError(f"{what}: strides must be positive multiples of the element size "
                                 f"(got {arr.strides} bytes for {item}-byte elements and shape "
                                 f"{arr.shape}); pass a copy made with np.asfortranarray(x)")
            if st // item < packed:
                raise ValueError(f"{what}: the array is not in column-major order (strides "
                                 f"{tuple(s // item for s in arr.strides)} elements for shape "
                                 f"{arr.shape}); {_column_major_hint(arr)}")
            strides.append(st // item)
        packed = strides[-1] * size
    return tuple(strides)


def _column_major_hint(arr: np.ndarray) -> str:
    """What to pass instead of an array that is not column-major: its transpose when that
    is (a row-major array: the same memory, no copy), else a column-major copy."""
    if arr.T.flags.f_contiguous or list(arr.strides) == sorted(arr.strides, reverse=True):
        return (f"x.T views the same memory in column-major order, shape "
                f"{tuple(reversed(arr.shape))}, with no copy (a row-major stack of matrices "
                "is the column-major stack of their transposes: compute C^T = B^T A^T, "
                "README 'Row-major arrays'); np.asfortranarray(x) makes a column-major copy")
    return "pass np.asfortranarray(x), a column-major copy"


def _check_attrs(address: int, shape, stride, attrs: dict, what: str) -> None:
    alignment = attrs.get("alignment")
    if alignment and address % alignment:
        raise ValueError(f"{what}: base address {address:#x} is not aligned to {alignment} bytes "
                         "as the alignment attribute promises")
    for key, dims in (("shape_gcd", shape), ("stride_gcd", stride)):
        for i, (d, g) in enumerate(zip(dims, attrs.get(key, []))):
            if d % g:
                name = "size" if key == "shape_gcd" else "stride"
                raise ValueError(f"{what}: {key}[{i}] = {g} does not divide the {name} {d} of "
                                 f"mode {i}")


def _as_shape(shape: Any, what: str) -> Tuple[int, ...]:
    """A member's shape given in ``shapes=[...]`` as a tuple of non-negative integers."""
    try:
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{what}: shape {shape!r} must be a tuple of integers") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"{what}: shape {shape} has a negative size")
    return shape


def _null_memref(t: MemrefType) -> MemRef:
    return MemRef(-1, 0, tuple(s or 0 for s in t.shape), tuple(s or 0 for s in t.stride),
                  DTYPES[t.element.name])


def memref_arg(x: Any, t: MemrefType, attrs: dict, memory: Memory, what: str,
               offset: int = 0, shape: Optional[Tuple[int, ...]] = None) -> MemRef:
    """A memref argument; with ``offset``/``shape`` (group members) the array is memory."""
    if x is None:
        return _null_memref(t)
    arr = as_array(x, what)
    want = DTYPES[t.element.name]
    if arr.dtype != want:
        raise TypeError(f"{what}: expected an array of dtype {want} for {t}, got dtype {arr.dtype}")
    if shape is None and offset == 0:
        if arr.ndim != t.order:
            raise ValueError(f"{what}: expected an array of order {t.order} for {t}, got an array "
                             f"of order {arr.ndim} (shape {arr.shape})")
        shape = tuple(arr.shape)
        stride = element_strides(arr, what)
        available = _extent(shape, stride) if arr.ndim else 1
        flat = arr.reshape(-1) if arr.ndim == 0 else arr
    else:
        if shape is None:
            raise ValueError(f"{what}: the shape of the memref is needed: {t} has dynamic sizes "
                             "(give shapes=[...] in ttlc.Group)")
        shape = _as_shape(shape, what)
        if len(shape) != t.order:
            raise ValueError(f"{what}: shape {shape} has order {len(shape)}, expected {t.order} "
                             f"for {t}")
        if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
            raise ValueError(f"{what}: a group member with an offset or an explicit shape is "
                             "addressed as flat memory and must be a contiguous array")
        packed = MemrefType.packed_stride(shape)
        stride = tuple(p if s is DYNAMIC else s for s, p in zip(t.stride, packed))
        available = arr.size
        flat = arr.reshape(-1) if arr.ndim == 0 else arr.ravel(order="K")
    for i, (want_s, got) in enumerate(zip(t.shape, shape)):
        if want_s is not DYNAMIC and want_s != got:
            raise ValueError(f"{what}: mode {i} must have size {want_s} for {t}, got {got} "
                             f"(shape {shape})")
    for i, (want_s, got) in enumerate(zip(t.stride, stride)):
        if want_s is not DYNAMIC and want_s != got and shape[i] > 1:
            raise ValueError(f"{what}: mode {i} must have stride {want_s} elements for {t}, got "
                             f"stride {got} (strides {stride}); dynamic strides need "
                             "strided<...,?> in the type")
    stride = tuple(got if want_s is DYNAMIC else want_s for want_s, got in zip(t.stride, stride))
    _check_attrs(arr.ctypes.data + offset * arr.itemsize, shape, stride, attrs, what)
    extent = _extent(shape, stride)
    if offset < 0 or offset + extent > available:
        raise ValueError(f"{what}: the memref ({extent} elements from offset {offset}) does not "
                         f"fit in the array's {available} elements")
    buffer_id = memory.add(_flat_view(flat, available))
    return MemRef(buffer_id, offset, shape, stride, want)


def _group_parts(arrays: Any, offset: Any, shapes: Any, what: str,
                 of: str = "the group") -> Tuple[list, Optional[int], Optional[Sequence[Any]]]:
    """The members (a new list), the offset (None or a non-negative integer) and the
    shapes (None or one entry per member) of a group, checked for what does not
    depend on the group's type (`of` names that type in messages)."""
    if isinstance(arrays, np.ndarray) or not isinstance(arrays, Sequence):
        raise TypeError(f"{what}: the members of {of} must be given as a list of arrays, got "
                        f"{type(arrays).__name__}")
    arrays = list(arrays)
    if offset is not None:
        try:
            offset = operator.index(offset)
        except TypeError:
            raise TypeError(f"{what}: the group offset must be an integer, got "
                            f"{type(offset).__name__}") from None
        if offset < 0:
            raise ValueError(f"{what}: the group offset must not be negative, got {offset}")
    if shapes is not None:
        if (isinstance(shapes, np.ndarray) or not isinstance(shapes, Sequence)
                or len(shapes) != len(arrays)):
            raise ValueError(f"{what}: shapes must give one shape per member ({len(arrays)} "
                             f"members), got {shapes!r}")
    return arrays, offset, shapes


def group_arg(x: Any, t: GroupType, attrs: dict, memory: Memory, what: str) -> GroupValue:
    if x is None:
        return GroupValue([], associated=False)
    if isinstance(x, PreparedGroup):
        x.check_current(what)
        arrays, offset, shapes = list(x.arrays), x.offset, x.shapes
    elif isinstance(x, (Group, list, tuple)):
        arrays, offset, shapes = ((x.arrays, x.offset, x.shapes) if isinstance(x, Group)
                                  else (x, None, None))
        arrays, offset, shapes = _group_parts(arrays, offset, shapes, what, str(t))
    else:
        raise TypeError(f"{what}: expected a list of arrays, a ttlc.Group or a "
                        f"ttlc.PreparedGroup for {t}, got {type(x).__name__}")
    if t.offset is not DYNAMIC:
        if offset is not None and offset != t.offset:
            raise ValueError(f"{what}: {t} has the static offset {t.offset}, got offset {offset}")
        offset = t.offset
    elif offset is None:
        offset = 0
    if t.size is not DYNAMIC and len(arrays) != t.size:
        raise ValueError(f"{what}: expected {t.size} members for {t}, got {len(arrays)}")
    members = []
    for i, a in enumerate(arrays):
        shape = shapes[i] if shapes is not None else None
        if shape is None and offset != 0 and DYNAMIC not in t.memref.shape:
            shape = t.memref.shape
        members.append(memref_arg(a, t.memref, attrs, memory, f"{what}, member {i}", offset, shape))
    return GroupValue(members)


def _plain_number(x: Any) -> Any:
    """NumPy 0-d arrays and scalars (incl. ml_dtypes) as Python or NumPy numbers."""
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, np.generic) and not isinstance(x, (np.number, np.bool_)):
        kind = x.dtype.kind  # ml_dtypes floats report kind 'V'; convert through float64
        if x.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2") or kind == "f":
            return float(x)
    return x


def scalar_arg(x: Any, t: Type, what: str):
    x = _plain_number(x)
    if isinstance(t, BoolType):
        if not isinstance(x, (bool, np.bool_)):
            raise TypeError(f"{what}: expected a bool, got {type(x).__name__}")
        return np.bool_(x)
    assert isinstance(t, ScalarType)
    dtype = DTYPES[t.name]
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, complex, np.number)):
        raise TypeError(f"{what}: expected a number for {t}, got {type(x).__name__}")
    if t.is_int:
        if not isinstance(x, (int, np.integer)):
            raise TypeError(f"{what}: expected an integer for {t}, got {type(x).__name__}")
        info = np.iinfo(dtype)
        if not info.min <= int(x) <= info.max:
            raise ValueError(f"{what}: {int(x)} is out of range for {t} ({info.min} to {info.max})")
        return dtype.type(int(x))
    if t.is_float and isinstance(x, (complex, np.complexfloating)):
        raise TypeError(f"{what}: expected a real number for {t}, got a complex number")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = np.asarray(x).astype(dtype)[()]
            finite_in = np.isfinite(complex(x)) if isinstance(x, (complex, np.complexfloating)) \
                else np.isfinite(float(x))
    except OverflowError:
        raise ValueError(f"{what}: {x} is out of range for {t}") from None
    if finite_in and not np.all(np.isfinite(value)):
        raise ValueError(f"{what}: {x} is out of range for {t}")
    return value


def marshal(args: Sequence[Any], params: List[Argument], memory: Memory, kernel: str) -> list:
    """Check and convert every argument; raises before anything runs."""
    if len(args) != len(params):
        names = ", ".join(f"%{p.value.name}" for p in params)
        raise TypeError(f"kernel @{kernel} takes {len(params)} argument"
                        f"{'s' if len(params) != 1 else ''} ({names}), got {len(args)}")
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


# ---- quick path -------------------------------------------------------------------------------
# Launch overhead matters for small kernels, and ``marshal`` builds views and Memory entries
# that a compiled target does not need.  ``quick`` specialises the checks of the common
# arguments to a kernel's parameter types.  It never raises and never decides that an
# argument is wrong: anything it does not recognise as valid (every argument ``marshal``
# rejects, and valid ones it does not handle) makes it answer None, and the caller then
# runs ``marshal``, which makes every decision and gives every error message.

#: the largest magnitude of a double that rounds to a finite f32 (2**128 - 2**103 rounds up)
_F32_LIMIT = 2.0 ** 128 - 2.0 ** 103
#: per floating-point type: the magnitudes below which a finite double stays finite in it
#: (f16: 65520 = 2**16 - 2**4 rounds up to infinity; bf16: its further rounding is
#: checked by ``_bf16_bits``)
_FINITE_LIMIT = {"f32": _F32_LIMIT, "c32": _F32_LIMIT, "bf16": _F32_LIMIT,
                 "f16": 2.0 ** 16 - 2.0 ** 4}
_NUMPY_INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


def _data_field() -> Optional[int]:
    """Where an ndarray object holds its data pointer (``PyArrayObject_fields.data``, which
    NumPy's inline ``PyArray_DATA`` reads, so its place is part of NumPy's binary
    interface), found and checked on probe arrays; None elsewhere than on CPython (where
    ``id`` is not an address) or if no place matches.  Reading it is ten times faster
    than ``x.ctypes.data``, the largest cost of a small launch."""
    if sys.implementation.name != "cpython":
        return None
    base = np.zeros((4, 6))
    probes = [np.zeros(1, np.uint8), np.zeros(100), base, base[1:, 2:], base.T[3:]]
    for offset in range(8, 64, 8):  # an ndarray object is larger than 64 bytes
        if all(ctypes.c_void_p.from_address(id(p) + offset).value == p.ctypes.data
               for p in probes):
            return offset
    return None


_DATA_FIELD = _data_field()


class _Span:
    """``count`` values of a NumPy type (``typestr``) in memory from ``address`` on, for
    ``np.asarray``; nothing is read until the array is indexed."""

    def __init__(self, address: int, count: int, typestr: str):
        self.__array_interface__ = {"version": 3, "data": (address, True), "shape": (count,),
                                    "typestr": typestr}


#: the process's memory as read-only int64 words (64-bit CPython): ``_WORDS[a // 8 - 1]``
#: is the word at address ``a`` (8-byte aligned).  Only what is indexed is ever read.
_WORDS = (np.asarray(_Span(8, 2 ** 60 - 1, np.dtype(np.int64).str))
          if _DATA_FIELD is not None and np.dtype(np.intp).itemsize == 8 else None)

#: ``_WORDS`` as a memoryview, whose items are Python ints (read in 70 ns, a
#: ``ctypes.c_void_p.from_address(...).value`` in 100 ns), and the index in it of an
#: ndarray's data pointer less ``id(x) >> 3``
_WORD_VIEW = memoryview(_WORDS) if _WORDS is not None else None
_DATA_WORD = _DATA_FIELD // 8 - 1 if _WORDS is not None else 0

#: the words of an ndarray object's ``PyArrayObject_fields`` from ``data`` on that
#: ``_array_words`` reads, as word offsets from ``data``: data, nd, dimensions, strides,
#: descr, flags (nd and flags are C ints: the low halves of their words on little-endian
#: machines)
_HEADER = np.array([0, 1, 2, 3, 5, 6], np.int64)
_DATA, _ND, _DIMS, _STRIDES, _DESCR, _FLAGS = range(6)
#: NPY_ARRAY_WRITEABLE, the flag of a writeable array
_WRITEABLE = 0x0400


def _array_words(objects: np.ndarray) -> Optional[np.ndarray]:
    """The ``_HEADER`` words of each object of an object array, (6, n) int64, when all
    are exactly ndarrays (their type is read first: every object's header has it just
    before where an ndarray has ``data``); else None.  Needs ``_FIELDS_OK``."""
    data = np.frombuffer(objects, np.int64) >> 3  # (objects are 8-byte aligned)
    data += _DATA_FIELD // 8 - 1  # the index in _WORDS of each object's data pointer
    if (_WORDS[data - 1] != id(np.ndarray)).any():
        return None
    return _WORDS[_HEADER[:, None] + data]


def _mode_words(words: np.ndarray, order: int) -> np.ndarray:
    """(2 order, n): the sizes, then the strides (in bytes) of arrays (their
    ``_array_words``, all of this order)."""
    first = (words[_DIMS:_STRIDES + 1] >> 3) - 1  # (2, n): where sizes and strides start
    index = first[:, None, :] + np.arange(order)[:, None]
    return _WORDS[index.reshape(2 * order, words.shape[1])]


def _fields_ok() -> bool:
    """Whether ``_array_words`` and ``_mode_words`` read what NumPy's attributes say, on
    probe arrays: ``PyArrayObject_fields`` (which NumPy's inline accessors read, so its
    layout is part of NumPy's binary interface) and object headers as on 64-bit
    little-endian CPython.  Reading them lets ``_quick_members`` check thousands of group
    members with a few NumPy operations instead of attribute by attribute."""
    if (_WORDS is None or sys.byteorder != "little"
            or _DATA_FIELD > object.__basicsize__  # (the type word is in every header)
            or _DATA_FIELD + 8 * _HEADER[-1] + 4 > np.ndarray.__basicsize__):
        return False
    others = (1.5, [], "text", object(), np.zeros(2), np.float32(1))
    if any(_WORDS[(id(x) + _DATA_FIELD - 8) // 8 - 1] != id(type(x)) for x in others):
        return False
    base = np.zeros((5, 6, 7), np.float32, order="F")
    frozen = base[1:, ::2, 3]
    frozen.flags.writeable = False
    probes = [np.zeros(3, np.int8), base, base[1:, ::2], frozen, np.zeros((2, 3)).T, np.ones(())]
    if _array_words(np.fromiter([1.5, *probes], object, len(probes) + 1)) is not None:
        return False
    for x in probes:
        words = _array_words(np.fromiter([x], object, 1))
        if words is None:
            return False
        data, nd, _, _, descr, flags = words[:, 0]
        modes = _mode_words(words, x.ndim)[:, 0]
        if (data != x.ctypes.data or nd & 0xFFFFFFFF != x.ndim or descr != id(x.dtype)
                or bool(flags & _WRITEABLE) != x.flags.writeable
                or tuple(modes) != x.shape + x.strides):
            return False
    return True


_FIELDS_OK = _fields_ok()


class _Rules:
    """What a memref parameter requires of an array, precomputed once per kernel."""

    def __init__(self, t: MemrefType, attrs: dict, writes: bool):
        self.dtype = DTYPES[t.element.name]
        self.item, self.order = self.dtype.itemsize, t.order
        self.static_shape = [(i, s) for i, s in enumerate(t.shape) if s is not DYNAMIC]
        self.static_stride = [(i, s) for i, s in enumerate(t.stride) if s is not DYNAMIC]
        self.alignment = attrs.get("alignment") or 0
        # (of the shape, mode, divisor)
        self.gcds = [(key == "shape_gcd", i, g) for key in ("shape_gcd", "stride_gcd")
                     for i, g in enumerate(attrs.get(key, [])[:t.order])]
        self.writes = writes  # the kernel writes the argument: read-only arrays take marshal
        self.usable = (isinstance(self.alignment, int) and
                       all(isinstance(g, int) and g > 0 for _, _, g in self.gcds))


#: the most array layouts a memref parameter's quick check remembers (``_quick_memref``)
_LAYOUTS = 64


def _quick_memref(t: MemrefType, attrs: dict, writes: bool = False):
    """A plain NumPy array with a non-empty shape, or a DLPack or buffer-protocol
    exporter (viewed as ``marshal`` views it, the view appended to `keep`; not for group
    members, which have no `keep`); [address, *shape, *strides] or None.

    What depends on the array's sizes and byte strides alone (order, size-1 and static
    modes, column-major strides, shape_gcd and stride_gcd) is decided once per layout
    and remembered (``_LAYOUTS`` of them); each call reads the array's dtype, shape,
    strides and flags, and its data pointer (from the object's field through
    ``_WORD_VIEW`` on CPython)."""
    r = _Rules(t, attrs, writes)
    if not r.usable:
        return None
    want, alignment = r.dtype, r.alignment
    layouts: dict = {}
    words, data, ndarray = _WORD_VIEW, _DATA_WORD, np.ndarray

    def convert(x, keep=None):
        if type(x) is not ndarray:
            if keep is None or x is None or isinstance(x, ndarray):
                return None  # (ndarray subclasses take marshal)
            try:
                x = as_array(x, "")
            except Exception:  # not an array: marshal names what it is
                return None
            keep.append(x)
        dtype = x.dtype
        if dtype is not want and dtype != want:
            return None
        key = (x.shape, x.strides)
        tail = layouts.get(key)
        if tail is None:
            if len(layouts) >= _LAYOUTS:
                layouts.clear()
            tail = layouts[key] = _layout(r, *key)
        if tail is False:
            return None
        address = x.ctypes.data if words is None else words[(id(x) >> 3) + data]  # (_address)
        if writes and not x.flags.writeable:
            return None
        if alignment and address % alignment:
            return None
        return [address, *tail]
    return convert


def _layout(r: _Rules, shape: Tuple[int, ...], strides: Tuple[int, ...]) -> Union[tuple, bool]:
    """(*shape, *strides in elements) of an array of this shape and byte strides when the
    memref parameter (`r`) takes it, else False (``_quick_memref``)."""
    item = r.item
    if len(shape) != r.order:
        return False
    stride, packed = [], 1
    for size, st in zip(shape, strides):  # as element_strides
        if size == 1:
            stride.append(packed)
            continue
        if size == 0 or st <= 0 or st % item or st // item < packed:
            return False
        stride.append(st // item)
        packed = st // item * size
    for i, s in r.static_shape:
        if shape[i] != s:
            return False
    for i, s in r.static_stride:
        if stride[i] != s:
            if shape[i] > 1:
                return False
            stride[i] = s
    for is_shape, i, g in r.gcds:
        if (shape[i] if is_shape else stride[i]) % g:
            return False
    return (*shape, *stride)


def _address(x: np.ndarray) -> int:
    """The data pointer of an ndarray."""
    return x.ctypes.data if _WORD_VIEW is None else _WORD_VIEW[(id(x) >> 3) + _DATA_WORD]


def _quick_scalar(t: Type):
    """bool, integers, floats and complex numbers given as Python (or NumPy) numbers;
    [value] or None (a function of the argument and an unused `keep`, as
    ``_quick_group``'s).  The values are what ``cpu.module``'s slot formats pack.

    f32, f64 and f16 are returned as the Python float that rounds (to nearest) to the
    value (f16 packed by ``struct``'s "e", rounded once as NumPy rounds), bf16 as its
    bits (``_bf16_bits``), a complex number as its two parts."""
    if isinstance(t, BoolType):
        return lambda x, keep=None: [x] if type(x) is bool else None
    if not isinstance(t, ScalarType):
        return None
    if t.is_int:
        info = np.iinfo(DTYPES[t.name])
        lo, hi = int(info.min), int(info.max)

        def convert_int(x, keep=None):
            if type(x) is not int:
                if type(x) not in _NUMPY_INTS:
                    return None
                x = int(x)
            return [x] if lo <= x <= hi else None
        return convert_int
    limit = _FINITE_LIMIT.get(t.name)  # (f64, c64: any double, inf and NaN too)
    if t.name in ("f64", "f32", "f16"):
        def convert_float(x, keep=None):
            x = _real(x)
            if x is None or limit and not -limit < x < limit:  # overflow, infinities, NaN
                return None
            return [x]
        return convert_float
    if t.name == "bf16":
        def convert_bf16(x, keep=None):
            x = _real(x)
            return None if x is None or not -limit < x < limit else _bf16_bits(x)
        return convert_bf16
    if t.name in ("c32", "c64"):
        def convert_complex(x, keep=None):
            kind = type(x)
            if kind is complex or kind is np.complex128 or kind is np.complex64:
                re, im = float(x.real), float(x.imag)
            else:
                re, im = _real(x), 0.0
                if re is None:
                    return None
            if limit and not (-limit < re < limit and -limit < im < limit):
                return None
            return [re, im]
        return convert_complex
    return None


def _real(x: Any) -> Optional[float]:
    """A Python or NumPy real number (not bool) as the Python float equal to it; None for
    other kinds and for integers a float does not hold exactly (beyond 2**53)."""
    kind = type(x)
    if kind is float or kind is np.float64 or kind is np.float32 or kind is np.float16 \
            or kind is _BF16:
        return float(x)
    if kind is int and -2 ** 53 <= x <= 2 ** 53:  # exact: rounded once, as by NumPy
        return float(x)
    return None


_BF16 = DTYPES["bf16"].type
#: a double as f32 bytes, rounded to nearest (``_bf16_bits``)
_F32_BITS = struct.Struct("<f")


def _bf16_bits(x: float) -> Optional[list]:
    """[the bits of `x` as bf16] for |x| < _F32_LIMIT, rounded to f32 and then to bf16
    (to nearest, ties to even, both times) as a NumPy cast to ``ml_dtypes.bfloat16``
    rounds; None where that is infinite."""
    f32 = int.from_bytes(_F32_BITS.pack(x), "little")
    bits = (f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16
    return None if bits & 0x7F80 == 0x7F80 else [bits]


def _quick_members(t: MemrefType, attrs: dict, writes: bool):
    """``_quick_memref``'s checks on all members of a group at once, from their fields
    (``_array_words``): (the members' addresses, their sizes and strides: 2 order int64
    per member) as int64 arrays, or None.  None without ``_FIELDS_OK``."""
    r = _Rules(t, attrs, writes)
    member = _quick_memref(t, attrs, writes)
    if not _FIELDS_OK or member is None:
        return None
    order, item = r.order, r.item
    descr = id(r.dtype)  # (an equal dtype given by another object: None)
    # (modes, sizes or strides), for comparing columns of members
    static_shape, static_stride = ((np.array([i for i, _ in pairs], np.intp),
                                    np.array([[s] for _, s in pairs], np.int64).reshape(-1, 1))
                                   for pairs in (r.static_shape, r.static_stride))

    def in_elements(dope: np.ndarray) -> bool:
        """Whether sizes and byte strides (``_mode_words``) are valid; the strides are
        turned into elements (in place)."""
        shape, stride = dope[:order], dope[order:]
        if not shape.all() or (shape[static_shape[0]] != static_shape[1]).any():
            return False
        packed = np.ones(dope.shape[1], np.int64)
        for i in range(order):  # as element_strides
            size, st = shape[i], stride[i]
            one = size == 1
            if (~one & ((st <= 0) | (st % item != 0) | (st < packed * item))).any():
                return False
            np.floor_divide(st, item, out=st)
            np.copyto(st, packed, where=one)
            packed = st * size
        rows, values = static_stride
        if ((stride[rows] != values) & (shape[rows] > 1)).any():
            return False
        stride[rows] = values
        return not any(((shape if is_shape else stride)[i] % g).any()
                       for is_shape, i, g in r.gcds)

    def convert(x) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        try:
            members = np.fromiter(x, object, len(x))  # holds every member while it is read
        except ValueError:  # (the list shrank meanwhile, in another thread)
            return None
        words = _array_words(members)
        if (words is None or (words[_DESCR] != descr).any()
                or ((words[_ND] & 0xFFFFFFFF) != order).any()):
            return None
        address = words[_DATA]
        if not address.all() or (r.alignment and (address % r.alignment).any()):
            return None
        if r.writes and not (words[_FLAGS] & _WRITEABLE).all():
            return None
        dope = _mode_words(words, order)
        if (dope == dope[:, :1]).all():  # alike views of one array, the usual case: all
            first = member(members[0])  # members are valid when the first is
            if first is None:
                return None
            return address, np.repeat(np.array([first[1:]], np.int64), len(x), axis=0)
        if not in_elements(dope):
            return None
        return address, np.ascontiguousarray(dope.T)
    return convert


#: the member count from which checking all members at once is faster than one by one
#: (``_quick_members`` costs some 30 small NumPy operations, as much as checking 16
#: arrays one by one, and then well under a microsecond per member)
_AT_ONCE = 16


def _quick_list(t: GroupType, attrs: dict, writes: bool):
    """A non-empty list (or tuple) of arrays for a group without offset (static 0 or
    dynamic); [address of the member addresses, address of the members' sizes and
    strides (2 order int64 per member), the member count, 1 (associated)] or None.  The
    two int64 arrays are appended to `keep`: they must live until the kernel is done.

    From ``_AT_ONCE`` members on, all are checked at once (``_quick_members``); fewer, or
    where that answers None (no ``_FIELDS_OK``, a dtype given by another equal object, or
    an invalid member), member by member (``_quick_memref``)."""
    if t.offset is not DYNAMIC and t.offset != 0:
        return None
    member = _quick_memref(t.memref, attrs, writes)
    if member is None:
        return None
    at_once = _quick_members(t.memref, attrs, writes)
    size = t.size

    def one_by_one(x) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        rows = []
        for a in x:
            m = member(a)
            if m is None:
                return None
            rows.append(m)
        table = np.array(rows, np.int64)
        return np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1:])

    def convert(x, keep: list):
        if type(x) is not list and type(x) is not tuple:
            return None
        n = len(x)
        if not n or (size is not DYNAMIC and n != size):
            return None
        table = at_once(x) if at_once is not None and n >= _AT_ONCE else None
        if table is None:
            table = one_by_one(x)
            if table is None:
                return None
        keep += table
        return [_address(table[0]), _address(table[1]), n, 1]
    return convert


def _quick_prepared(t: GroupType, attrs: dict, writes: bool):
    """A ``PreparedGroup``: the slots ``_quick_list`` describes, built at the group's
    first launch for this parameter type and attributes and kept on the group (with the
    tables they point to), so that later launches cost the same for any member count;
    or None when the group is invalid for the type (``group_arg`` decides), a DLPack
    member was reallocated, or the kernel writes a group with a read-only member."""
    key = f"{t} {sorted(attrs.items())}"  # (a string: its hash is computed once)
    lists = _quick_list(t, attrs, False)  # the tables of valid plain lists, quickly

    def build(g: PreparedGroup) -> Optional[Tuple[list, bool, list]]:
        """(slots, whether every member is writeable, the tables)."""
        keep: list = []
        slots = None
        if lists is not None and g.offset in (None, 0) and g.shapes is None:
            slots = lists(g.arrays, keep)
        if slots is None:  # offsets, shapes, null or empty members, or an invalid member
            memory = Memory()
            try:
                value = group_arg(g, t, attrs, memory, "")
            except (TypeError, ValueError):
                return None
            keep = list(group_tables(value.members, memory, t.memref.order))
            slots = [_address(keep[0]), _address(keep[1]), len(value.members), 1]
        return slots, all(a is None or a.flags.writeable for a in g.arrays), keep

    def convert(g: PreparedGroup) -> Optional[list]:
        if g._producers and g._moved() is not None:
            return None
        entry = g._tables.get(key)
        if entry is None:
            entry = build(g)
            if entry is None:
                return None
            g._tables[key] = entry
        slots, writeable, _ = entry
        return None if writes and not writeable else slots
    return convert


def _quick_group(t: GroupType, attrs: dict, writes: bool):
    """A group: a ``PreparedGroup`` (``_quick_prepared``) or a list (``_quick_list``,
    where there is a quick path for lists of this type)."""
    prepared = _quick_prepared(t, attrs, writes)
    lists = _quick_list(t, attrs, writes)

    def convert(x, keep: list):
        if type(x) is PreparedGroup:
            return prepared(x)
        return None if lists is None else lists(x, keep)
    return convert


#: a non-null, 64-byte aligned address for memrefs with no elements (never accessed)
_EMPTY = np.zeros(16, dtype=np.uint64)
_EMPTY_ADDRESS = (_EMPTY.ctypes.data + 63) // 64 * 64


def memref_address(m: MemRef, memory: Memory) -> int:
    """The kernel ABI's data pointer of a memref ``marshal`` made: its first element;
    0 for a null memref, a valid address for one with no elements."""
    if int(m.buffer) < 0:
        return 0
    buf = memory.buffers[int(m.buffer)]
    if buf.size == 0:
        return _EMPTY_ADDRESS
    return buf.__array_interface__["data"][0] + int(m.offset) * buf.itemsize


def group_tables(members: Sequence[MemRef], memory: Memory,
                 order: int) -> Tuple[np.ndarray, np.ndarray]:
    """The kernel ABI's tables of a group ``marshal`` made: the members' data pointers,
    and their sizes then strides (2 order int64 per member); one zero row for no
    members (the slots must point somewhere)."""
    ptrs = np.array([memref_address(m, memory) for m in members] or [0], dtype=np.int64)
    dopes = np.array([[int(s) for s in m.shape] + [int(s) for s in m.stride]
                      for m in members] or [[0] * (2 * order)], dtype=np.int64)
    return ptrs, dopes


def quick(params: List[Argument], writes: Collection[int] = ()):
    """A function of a launch's arguments and a list, giving the flat list of what
    ``marshal`` would make of them -- per memref its address, sizes and strides (in
    elements), per scalar its value, per group the slots ``_quick_group`` describes
    (what it allocates is added to the list) -- or None whenever ``marshal`` is needed,
    also for a read-only array given for an argument the kernel writes (`writes`: their
    positions).  None when some parameter type has no quick path."""
    converters = []  # functions of (argument, keep)
    for k, p in enumerate(params):
        t = p.value.type
        c = (_quick_memref(t, p.attrs, k in writes) if isinstance(t, MemrefType) else
             _quick_group(t, p.attrs, k in writes) if isinstance(t, GroupType) else
             _quick_scalar(t))
        if c is None:
            return None
        converters.append(c)
    count = len(converters)

    def convert(args: Sequence[Any], keep: list) -> Optional[list]:
        if len(args) != count:
            return None
        out: list = []
        for c, x in zip(converters, args):
            v = c(x, keep)
            if v is None:
                return None
            out += v
        return out
    return convert
