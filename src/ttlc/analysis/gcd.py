"""Divisibility facts about integers and memrefs: what passes and back ends may assume
about sizes, strides and alignment.

For an integer value ``x`` the analysis knows a number ``g`` with
``x = 0 (mod g)`` (0: x is known to be 0; 1: nothing known).  For a memref value it
knows, after the reference implementation's memref info:

- ``offset_gcd``: the address of the memref's first element, counted in elements (address
  in bytes divided by the element size), is a multiple of ``offset_gcd``.  For an argument
  this is its ``alignment`` attribute divided by the element size (1 without the
  attribute: the runtime promises no more than element alignment); for an alloca, the
  alignment of its place in local memory (local memory is aligned to
  ``target.cache_line`` bytes, 64; an alloca's place is a multiple of its ``alignment``
  attribute, or of 64 without it, or its ``stack_ptr`` when set-stack-ptr assigned one).
- ``shape_gcd[i]`` and ``stride_gcd[i]``: divisors of mode size i and stride i: the
  static size or stride where the type has one, else the ``shape_gcd``/``stride_gcd``
  parameter attribute, else 1.

Views propagate the facts: ``subview`` adds ``offset_i * stride_i`` to the offset for every
mode (so ``offset_gcd = gcd(offset_gcd, offset_i * stride_gcd_i)``) and keeps the modes it
does not remove; ``expand`` splits a mode (new strides are products of the first stride
and the sizes before); ``fuse`` multiplies sizes; a memref loaded from a group has the
group's facts (spec: "the memref attributes are equal to the attributes of the group");
an ``if`` result combines what its branches yield.  Integers: constants, ``add``/``sub``
(gcd), ``mul`` (product), ``div`` (quotient when it divides), ``rem``/``min``/``max``
(gcd), ``shl`` by a constant, ``neg``, ``abs``, integer casts, ``size`` (static size, or the memref's ``shape_gcd``), ``for`` loop variables
(``gcd(from, step)``), ``foreach_tile`` variables (``gcd(from, tile size)``) and
``subgroup_broadcast``.

``passes/gcd.py`` prints them (dump-gcd).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..ir.core import Function, Instruction, Region, Value
from ..ir.types import GroupType, MemrefType, ScalarType
from ..target import Target


@dataclass(frozen=True)
class MemrefInfo:
    offset_gcd: int
    shape_gcd: Tuple[int, ...]
    stride_gcd: Tuple[int, ...]


def _from_type(t: MemrefType, offset: int, shape_attr=(), stride_attr=()) -> MemrefInfo:
    def pick(static, attr, i):
        if static is not None:
            return static
        if i < len(attr) and isinstance(attr[i], int):
            return attr[i]
        return 1

    return MemrefInfo(offset, tuple(pick(s, shape_attr, i) for i, s in enumerate(t.shape)),
                      tuple(pick(s, stride_attr, i) for i, s in enumerate(t.stride)))


def _refine(info: MemrefInfo, t: MemrefType) -> MemrefInfo:
    """Static sizes and strides of the type are exact: they win over derived divisors."""
    shape = tuple(s if s is not None else g for s, g in zip(t.shape, info.shape_gcd))
    stride = tuple(s if s is not None else g for s, g in zip(t.stride, info.stride_gcd))
    return MemrefInfo(info.offset_gcd, shape, stride)


def _merge(a: MemrefInfo, b: MemrefInfo) -> MemrefInfo:
    return MemrefInfo(math.gcd(a.offset_gcd, b.offset_gcd),
                      tuple(math.gcd(x, y) for x, y in zip(a.shape_gcd, b.shape_gcd)),
                      tuple(math.gcd(x, y) for x, y in zip(a.stride_gcd, b.stride_gcd)))


class GCDAnalysis:
    """Divisors of the integer and memref values of one function."""

    def __init__(self, func: Function, target: Target):
        self.func = func
        self.local_alignment = target.cache_line
        self.ints: Dict[Value, int] = {}
        self.memrefs: Dict[Value, MemrefInfo] = {}
        for arg in func.args:
            t = arg.value.type
            mt = t.memref if isinstance(t, GroupType) else t
            if isinstance(mt, MemrefType):
                align = arg.attrs.get("alignment")
                offset = max(1, align // mt.element.size) if isinstance(align, int) and align > 0 else 1
                self.memrefs[arg.value] = _from_type(mt, offset, arg.attrs.get("shape_gcd", ()),
                                                     arg.attrs.get("stride_gcd", ()))
        self._region(func.body)

    # ---- queries
    def gcd(self, v) -> int:
        """Divisor of an integer value, or of an integer constant slot (an int)."""
        if isinstance(v, int):
            return abs(v)
        return self.ints.get(v, 1)

    def info(self, v: Value) -> Optional[MemrefInfo]:
        return self.memrefs.get(v)

    # ---- the walk
    def _region(self, region: Region) -> None:
        for inst in region.instructions:
            self._before_regions(inst)
            for r in inst.regions:
                self._region(r)
            self._after_regions(inst)

    def _set_int(self, v: Value, g: int) -> None:
        if isinstance(v.type, ScalarType) and v.type.is_int:
            self.ints[v] = g

    def _before_regions(self, inst: Instruction) -> None:
        op, s = inst.opcode, inst.slots
        if op == "for":
            step = s.get("step")
            self._set_int(inst.regions[0].args[0],
                          math.gcd(self.gcd(s["from"]), self.gcd(step) if step is not None else 1))
        elif op == "foreach_tile":
            args = inst.regions[0].args
            tiles = inst.attrs.get("tile_shape", [])
            for k, lo in enumerate(s["from"]):
                if k < len(tiles):
                    self._set_int(args[k], math.gcd(self.gcd(lo), tiles[k]))

    def _after_regions(self, inst: Instruction) -> None:
        op, s = inst.opcode, inst.slots
        g = self.gcd
        if op == "constant":
            value = inst.attrs.get("value")
            if isinstance(value, int) and not isinstance(value, bool):
                self._set_int(inst.result, abs(value))
        elif op in ("add", "sub", "rem", "min", "max"):
            self._set_int(inst.result, math.gcd(g(s["a"]), g(s["b"])))
        elif op == "mul":
            self._set_int(inst.result, g(s["a"]) * g(s["b"]))
        elif op == "div":
            ga, gb = g(s["a"]), g(s["b"])
            self._set_int(inst.result, ga // gb if gb and ga % gb == 0 else 1)
        elif op == "shl":
            b = s["b"].owner
            c = b.attrs.get("value") if b is not None and b.opcode == "constant" else None
            if isinstance(c, int) and 0 <= c < 63:
                self._set_int(inst.result, g(s["a"]) << c)
        elif op in ("neg", "abs", "subgroup_broadcast", "cast"):
            a = s["a"]
            if isinstance(a.type, ScalarType) and a.type.is_int:
                self._set_int(inst.result, g(a))
        elif op == "size":
            self._size(inst)
        elif op == "alloca":
            self._alloca(inst)
        elif op == "subview":
            self._subview(inst)
        elif op == "expand":
            self._expand(inst)
        elif op == "fuse":
            self._fuse(inst)
        elif op == "load":
            t = s["tensor"]
            if isinstance(t.type, GroupType) and t in self.memrefs:
                self.memrefs[inst.result] = self.memrefs[t]
        elif op == "if":
            self._if(inst)

    def _size(self, inst: Instruction) -> None:
        t = inst.slots["tensor"]
        mode = inst.attrs.get("mode", 0)
        if isinstance(t.type, MemrefType) and 0 <= mode < t.type.order:
            static = t.type.shape[mode]
            info = self.memrefs.get(t)
            self._set_int(inst.result, static if static is not None
                          else info.shape_gcd[mode] if info else 1)
        elif isinstance(t.type, GroupType) and t.type.size is not None:
            self._set_int(inst.result, t.type.size)

    def _alloca(self, inst: Instruction) -> None:
        t = inst.result.type
        if not isinstance(t, MemrefType) or None in t.shape or None in t.stride:
            return
        ptr = inst.attrs.get("stack_ptr")
        requested = inst.attrs.get("attributes", {}).get("alignment")
        if isinstance(ptr, int):
            align = math.gcd(self.local_alignment, ptr)
        elif isinstance(requested, int) and requested > 0:
            align = min(requested, self.local_alignment)
        else:
            align = self.local_alignment
        self.memrefs[inst.result] = _from_type(t, max(1, align // t.element.size))

    def _subview(self, inst: Instruction) -> None:
        parent = self.memrefs.get(inst.slots["tensor"])
        t = inst.result.type
        if parent is None or not isinstance(t, MemrefType):
            return
        offset = parent.offset_gcd
        shape: List[int] = []
        stride: List[int] = []
        for i, (start, size) in enumerate(inst.slots["slices"]):
            if i >= len(parent.stride_gcd):
                break
            offset = math.gcd(offset, self.gcd(start) * parent.stride_gcd[i])
            if isinstance(size, int) and size == 0:
                continue  # a single index removes the mode
            shape.append(self.gcd(size))
            stride.append(parent.stride_gcd[i])
        if len(shape) != t.order:
            return
        self.memrefs[inst.result] = _refine(MemrefInfo(offset, tuple(shape), tuple(stride)), t)

    def _expand(self, inst: Instruction) -> None:
        parent = self.memrefs.get(inst.slots["tensor"])
        t = inst.result.type
        mode = inst.attrs.get("mode", 0)
        if parent is None or not isinstance(t, MemrefType) or not 0 <= mode < len(parent.shape_gcd):
            return
        sizes = [self.gcd(e) for e in inst.slots["shape"]]
        strides = [parent.stride_gcd[mode]]
        for size in sizes[:-1]:
            strides.append(strides[-1] * size)
        shape = parent.shape_gcd[:mode] + tuple(sizes) + parent.shape_gcd[mode + 1:]
        stride = parent.stride_gcd[:mode] + tuple(strides) + parent.stride_gcd[mode + 1:]
        if len(shape) != t.order:
            return
        self.memrefs[inst.result] = _refine(MemrefInfo(parent.offset_gcd, shape, stride), t)

    def _fuse(self, inst: Instruction) -> None:
        parent = self.memrefs.get(inst.slots["tensor"])
        t = inst.result.type
        lo, hi = inst.attrs.get("from", 0), inst.attrs.get("to", 0)
        if parent is None or not isinstance(t, MemrefType) or not 0 <= lo <= hi < len(parent.shape_gcd):
            return
        shape = parent.shape_gcd[:lo] + (math.prod(parent.shape_gcd[lo:hi + 1]),) + parent.shape_gcd[hi + 1:]
        stride = parent.stride_gcd[:lo + 1] + parent.stride_gcd[hi + 1:]
        if len(shape) != t.order:
            return
        self.memrefs[inst.result] = _refine(MemrefInfo(parent.offset_gcd, shape, stride), t)

    def _if(self, inst: Instruction) -> None:
        yields = []
        for r in inst.regions:
            last = r.instructions[-1] if r.instructions else None
            if last is None or last.opcode != "yield":
                return
            yields.append(last.slots["values"])
        if len(yields) != 2:
            return
        for i, res in enumerate(inst.results):
            a, b = yields[0][i], yields[1][i]
            if isinstance(res.type, MemrefType):
                ia, ib = self.memrefs.get(a), self.memrefs.get(b)
                if ia is not None and ib is not None:
                    self.memrefs[res] = _refine(_merge(ia, ib), res.type)
            else:
                self._set_int(res, math.gcd(self.gcd(a), self.gcd(b)) if a in self.ints
                              and b in self.ints else 1)
