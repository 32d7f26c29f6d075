"""The entry ABI of target cuda-tile (docs/cuda-tile.md, "The entry ABI"): the entry's
parameters for a launch's arguments as ``runtime.args.marshal`` checked them.

One packing for everything that runs an emitted module: the Tile IR interpreter
(``simulate``) passes host addresses, target cuda device addresses; both give a
``place`` (``simt.pointer_arguments``) saying where memrefs and group tables are.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from ...ir.types import GroupType, MemrefType
from ...runtime.values import DTYPES
from ..simt import pointer_arguments
from .ops import Ptr, Tile
from .tir import Entry

#: the NumPy type of a parameter's (or tile's) element; pointers are 64-bit addresses
DTYPE = {**{k: v for k, v in DTYPES.items() if k != "index"}, "i1": np.dtype(np.bool_)}


def dtype(t) -> np.dtype:
    element = t.element if isinstance(t, Tile) else t
    return np.dtype(np.int64) if isinstance(element, Ptr) else DTYPE[element.name]


def parameters(entry: Entry, func, values: Sequence, place,
               record: Optional[int] = None) -> List[np.generic]:
    """The entry's parameters, each a NumPy scalar of its Tile IR type: per argument of
    `func` (values from ``marshal``) a memref's or group's pointers, tables, sizes and
    strides (the tables per dynamic mode), a complex number's real and imaginary parts,
    any other number as it is; last, for a checked entry, the address of its error
    record (``checks``)."""
    out: list = []
    for a, v in zip(func.args, values):
        t = a.value.type
        if isinstance(t, (MemrefType, GroupType)):
            out += pointer_arguments(t, v, place, table_per_mode=True)
        elif np.iscomplexobj(v):
            out += [np.real(v), np.imag(v)]
        else:
            out.append(v)
    if entry.checked is not None:
        out.append(record)
    if len(out) != len(entry.args):
        raise AssertionError(f"entry @{entry.name}: {len(out)} parameters for "
                             f"{len(entry.args)} arguments of the entry")
    return [np.asarray(p).astype(dtype(e.type))[()] for p, e in zip(out, entry.args)]


def words(params: Sequence[np.generic]) -> np.ndarray:
    """The parameters as the CUDA driver takes them: each in a 64-bit word of its own,
    its bytes first (little-endian), the rest zero; ``cuLaunchKernel`` reads each
    parameter's size from the start of its word, as cuTile's launcher lays them out."""
    out = np.zeros(len(params), np.uint64)
    raw = out.view(np.uint8).reshape(-1, 8)
    for k, p in enumerate(params):
        b = np.frombuffer(p.tobytes(), np.uint8)
        raw[k, :b.size] = b
    return out
