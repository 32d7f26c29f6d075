"""Deterministic arguments for any kernel: what ``ttlc run``, the pass-meaning tests and
differential testing feed a kernel they know only by its signature.

Every argument type gets a valid value: memrefs of any order (order 0 included) with
dynamic sizes set to ``dim`` (rounded up to a ``shape_gcd``), static strides honoured,
dynamic strides packed (rounded up to a ``stride_gcd``), data aligned to the argument's
``alignment`` (at least 64 bytes); groups of ``group_size`` members (or the static size)
with their static or dynamic offset; scalars 1 (1.0, 1+0j, true).  Each memref also comes
with the flat buffer behind it, gaps of strided views included, so a caller can compare
everything a kernel could write.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from .values import DTYPES
from ..ir.types import DYNAMIC, BoolType, GroupType, MemrefType
from .args import Group


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _aligned_flat(dtype: np.dtype, count: int, alignment: int) -> np.ndarray:
    raw = np.empty(count * dtype.itemsize + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + count * dtype.itemsize].view(dtype)


def _fill(flat: np.ndarray, rng: np.random.Generator) -> None:
    """Small integers (no overflow surprises), standard normal floats."""
    kind = flat.dtype.kind
    if kind in "iu":
        flat[...] = rng.integers(-8, 8, size=flat.shape)
    elif kind == "b":
        flat[...] = rng.integers(0, 2, size=flat.shape).astype(bool)
    elif kind == "c":
        flat[...] = rng.standard_normal(flat.shape) + 1j * rng.standard_normal(flat.shape)
    else:
        flat[...] = rng.standard_normal(flat.shape)


def memref_layout(t: MemrefType, attrs: dict, dim: int) -> Tuple[tuple, tuple]:
    """Shape and strides (elements) for a memref argument: dynamic sizes ``dim`` (rounded
    up to the shape_gcd), dynamic strides packed (rounded up to the stride_gcd)."""
    shape_gcd, stride_gcd = attrs.get("shape_gcd", []), attrs.get("stride_gcd", [])
    shape = [(_round_up(dim, shape_gcd[i]) if i < len(shape_gcd) else dim) if s is DYNAMIC else s
             for i, s in enumerate(t.shape)]
    stride, packed = [], 1
    for i, (n, st) in enumerate(zip(shape, t.stride)):
        if st is DYNAMIC:
            st = _round_up(packed, stride_gcd[i]) if i < len(stride_gcd) else packed
        stride.append(st)
        packed = max(packed, st * n)
    return tuple(shape), tuple(stride)


def memref_input(t: MemrefType, attrs: dict, rng: np.random.Generator, dim: int,
                 offset: int = 0):
    """(array argument, flat buffer holding it, shape) for a memref type.  With a group
    ``offset`` the argument is the flat buffer itself (the kernel adds the offset)."""
    dtype = np.dtype(DTYPES[t.element.name])
    shape, stride = memref_layout(t, attrs, dim)
    extent = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    flat = _aligned_flat(dtype, offset + extent, max(64, attrs.get("alignment", 0) or 0))
    _fill(flat, rng)
    if offset:
        return flat, flat, shape
    view = np.lib.stride_tricks.as_strided(
        flat, shape=shape, strides=tuple(s * dtype.itemsize for s in stride))
    return view, flat, shape


def generated_inputs(func, dim: int = 8, group_size: int = 3,
                     seed: int = 0) -> Tuple[list, List[np.ndarray]]:
    """Arguments for ``func`` and the flat buffers behind its memrefs (same seed, same
    values)."""
    rng = np.random.default_rng(seed)
    args, buffers = [], []
    for a in func.args:
        t = a.value.type
        if isinstance(t, MemrefType):
            view, flat, _ = memref_input(t, a.attrs, rng, dim)
            args.append(view)
            buffers.append(flat)
        elif isinstance(t, GroupType):
            n = group_size if t.size is DYNAMIC else t.size
            offset = 2 if t.offset is DYNAMIC else t.offset
            members = [memref_input(t.memref, a.attrs, rng, dim, offset) for _ in range(n)]
            buffers += [flat for _, flat, _ in members]
            if offset:
                args.append(Group([m for m, _, _ in members], offset=offset,
                                  shapes=[s for _, _, s in members]))
            else:
                args.append([m for m, _, _ in members])
        elif isinstance(t, BoolType):
            args.append(True)
        elif getattr(t, "name", "") in ("c32", "c64"):
            args.append(complex(1.0, 0.0))
        else:
            args.append(1 if t.is_int else 1.0)
    return args, buffers
