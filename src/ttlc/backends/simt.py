"""What the per-work-item GPU back ends (``spirv/``, ``xevm/``) share about the program
``lower-simt`` leaves them: the walk over regions through an emitter table, the
coopmatrix as the list of the components a work-item holds, and the memref views, which
only compute sizes and strides.

A back end's kernel state provides ``values`` (Value -> representation), ``emitters``
(opcode -> emitter), ``current`` (the instruction being emitted), ``components(t)`` (the
components of a coopmatrix per work-item), index arithmetic on sizes that are static or
dynamic (``iadd``, ``imul``, ``index``) and ``static(n)`` (its representation of a
static size).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from ..ir.core import Instruction, Region, Value
from ..ir.types import DYNAMIC, CoopMatrixType, GroupType, MemrefType, element_type


class Unsupported(Exception):
    """What a back end cannot translate yet: (instruction or None, what)."""


@dataclass
class MemVal:
    """A memref: the pointer to its first element and, per mode, its size and stride
    (each a back end's static size or a dynamic i64 value)."""
    ptr: object
    shape: List[object]
    stride: List[object]
    type: MemrefType


@dataclass
class GroupVal:
    """A group: the pointer to its member pointers, the pointer to the members' dynamic
    sizes and strides (None when there are none), its size and its offset."""
    ptrs: object
    dope: Optional[object]
    size: object
    offset: object
    type: GroupType


def bind(k, values: Sequence[Value], results) -> None:
    if len(values) == 1 and not isinstance(results, tuple):
        results = (results,)
    for v, r in zip(values, results):
        k.values[v] = r


def emit_region(k, region: Region) -> List[object]:
    """Emit a region's instructions through ``k.emitters``; the values its ``yield``
    gives (if any)."""
    for inst in region.instructions:
        if inst.opcode == "yield":
            return [k.values[v] for v in inst.slots["values"]]
        k.current = inst
        emit = k.emitters.get(inst.opcode)
        if emit is None:
            raise Unsupported(inst, "no translation")
        result = emit(k, inst)
        if inst.results:
            bind(k, inst.results, result)
    return []


# ---- coopmatrices: one value per component -----------------------------------------------------
def each(k, inst: Instruction, fn: Callable, *slots: str):
    """fn applied to the operands, component by component for coopmatrices (a number
    operand goes with every component)."""
    vals = [k.values[inst.slots[s]] for s in slots]
    if isinstance(inst.results[0].type, CoopMatrixType):
        n = k.components(inst.results[0].type)
        cols = [v if isinstance(v, list) else [v] * n for v in vals]
        return [fn(*xs) for xs in zip(*cols)]
    return fn(*vals)


def emit_construct(k, inst: Instruction):
    return [k.values[inst.slots["a"]]] * k.components(inst.results[0].type)


def emit_extract(k, inst: Instruction):
    return k.values[inst.slots["matrix"]][inst.attrs["index"]]


def emit_insert(k, inst: Instruction):
    out = list(k.values[inst.slots["matrix"]])
    out[inst.attrs["index"]] = k.values[inst.slots["value"]]
    return out


def conversion_emitters(convert: Callable, binary: Callable) -> dict:
    """``cast`` and ``cooperative_matrix_scale`` through a back end's ``convert(k, src,
    dst, a)`` and ``binary(k, op, type, a, b)``, component by component."""
    def emit_cast(k, inst: Instruction):
        src, dst = element_type(inst.slots["a"].type), element_type(inst.results[0].type)
        return each(k, inst, lambda a: convert(k, src, dst, a), "a")

    def emit_scale(k, inst: Instruction):
        t = inst.results[0].type.component
        return each(k, inst, lambda a, b: binary(k, "mul", t, a, b), "a", "b")

    return {"cast": emit_cast, "cooperative_matrix_scale": emit_scale}


COOPMATRIX_EMITTERS = {"cooperative_matrix_construct": emit_construct,
                       "cooperative_matrix_extract": emit_extract,
                       "cooperative_matrix_insert": emit_insert}


# ---- memref views: sizes and strides ---------------------------------------------------------
def view_dims(k, inst: Instruction, shape, stride) -> Tuple[list, list]:
    """A view's sizes and strides: static entries of the result type win over computed
    ones."""
    rt: MemrefType = inst.results[0].type
    pick = lambda d, x: k.static(d) if d is not DYNAMIC else x  # noqa: E731
    return ([pick(d, x) for d, x in zip(rt.shape, shape)],
            [pick(d, x) for d, x in zip(rt.stride, stride)])


def subview(k, m, inst: Instruction):
    """(offset of the first element, sizes, strides) of a subview of memref m."""
    off = k.static(0)
    shape, stride = [], []
    for mode, (o, size) in enumerate(inst.slots["slices"]):
        off = k.iadd(off, k.imul(k.index(o), m.stride[mode]))
        if isinstance(size, int) and size == 0:
            continue
        shape.append(k.index(size))
        stride.append(m.stride[mode])
    return (off, *view_dims(k, inst, shape, stride))


def expand(k, m, inst: Instruction):
    """(sizes, strides) of an expand of memref m."""
    mode = inst.attrs["mode"]
    dims = [k.index(e) for e in inst.slots["shape"]]
    strides, s = [], m.stride[mode]
    for d in dims:
        strides.append(s)
        s = k.imul(s, d)
    return view_dims(k, inst, m.shape[:mode] + dims + m.shape[mode + 1:],
                     m.stride[:mode] + strides + m.stride[mode + 1:])


def fuse(k, m, inst: Instruction):
    """(sizes, strides) of a fuse of memref m."""
    lo, hi = inst.attrs["from"], inst.attrs["to"]
    size = k.static(1)
    for d in m.shape[lo:hi + 1]:
        size = k.imul(size, d)
    return view_dims(k, inst, m.shape[:lo] + [size] + m.shape[hi + 1:],
                     m.stride[:lo + 1] + m.stride[hi + 1:])


def emit_expand(k, inst: Instruction) -> MemVal:
    m: MemVal = k.get(inst.slots["tensor"])
    return replace(m, **dict(zip(("shape", "stride"), expand(k, m, inst))),
                   type=inst.results[0].type)


def emit_fuse(k, inst: Instruction) -> MemVal:
    m: MemVal = k.get(inst.slots["tensor"])
    return replace(m, **dict(zip(("shape", "stride"), fuse(k, m, inst))),
                   type=inst.results[0].type)


def emit_size(k, inst: Instruction):
    v = k.get(inst.slots["tensor"])
    return k.ival(v.size if isinstance(v, GroupVal) else v.shape[inst.attrs["mode"]])


VIEW_EMITTERS = {"expand": emit_expand, "fuse": emit_fuse, "size": emit_size}


# ---- the kernel ABI of memrefs and groups (docs/spirv.md, "Kernel ABI"; target xevm's) -------
def dynamic_dims(t: MemrefType, m) -> List[int]:
    """The sizes, then the strides, of memref m that its type t leaves dynamic."""
    return ([int(s) for s, d in zip(m.shape, t.shape) if d is DYNAMIC] +
            [int(s) for s, d in zip(m.stride, t.stride) if d is DYNAMIC])


def pointer_arguments(t, v, place, table_per_mode: bool = False) -> list:
    """The kernel arguments of a marshalled memref or group parameter: a memref's pointer
    and dynamic sizes and strides; a group's table of member pointers (without the
    group's offset, which the kernel adds), its table of the members' dynamic sizes and
    strides where its memref type has any (member by member; with ``table_per_mode``, as
    target cuda-tile's entry ABI has it, one table per dynamic size or stride, of one
    value per member), its dynamic size and its dynamic offset.

    ``place`` lays them out for a launch: ``place.address(memref)`` is the number of a
    memref's first element (None for a null memref), ``place.pointer(number)`` the
    argument pointing there, ``place.table(int64 array, which entries are addresses)``
    the argument pointing at a table, ``place.null`` the argument of a null pointer."""
    if isinstance(t, MemrefType):
        a = place.address(v)
        return ([place.null if a is None else place.pointer(a)] +
                [np.int64(x) for x in dynamic_dims(t, v)])
    mt = t.memref
    dynamic = sum(d is DYNAMIC for d in mt.shape + mt.stride)
    tables = dynamic if table_per_mode else min(dynamic, 1)
    offset = next((int(m.offset) for m in v.members if int(m.buffer) >= 0), 0)
    out = [place.null] * (1 + tables)
    if v.associated:
        item = np.dtype(v.members[0].dtype).itemsize if v.members else 1
        addresses = [place.address(m) for m in v.members] or [None]
        out[0] = place.table(np.array([0 if a is None else a - offset * item
                                       for a in addresses], np.int64),
                             np.array([a is not None for a in addresses]))
        if dynamic:
            dims = np.array([dynamic_dims(mt, m) for m in v.members] or [[0] * dynamic], np.int64)
            out[1:] = [place.table(np.ascontiguousarray(d), None)
                       for d in (dims.T if table_per_mode else [dims.reshape(-1)])]
    if t.size is DYNAMIC:
        out.append(np.int64(len(v.members)))
    if t.offset is DYNAMIC:
        out.append(np.int64(offset))
    return out
