"""Which memrefs of a function may share memory.

Views (``subview``, ``expand``, ``fuse``) and memrefs loaded from a group access the
memory of their *root*: the function argument or ``alloca`` they derive from (an ``if``
result, should the language allow memref results one day, has the roots of the values
its branches yield).  Any other memref has an unknown root, which aliases everything in
its address space.  Two roots alias when

- they are the same value (two subviews of one memref always alias: no attempt is made
  to prove that index ranges are disjoint, so memrefs loaded from one group with
  different indices alias too);
- they are two allocas whose local memory may overlap: when set-stack-ptr assigned both
  a ``stack_ptr``, exactly when their byte ranges overlap; otherwise when neither is
  live where the other is allocated (any static allocator may then give them the same
  memory, and reuse after ``lifetime_stop`` must be ordered like any other conflict).

Distinct function arguments are assumed not to alias, like C ``restrict`` pointers and
like the reference implementation: passing overlapping arrays for two arguments of which
one is written is outside what ttlc guarantees on machines that run work-items in
parallel.  An argument never aliases an alloca.
"""
from __future__ import annotations

from typing import Dict, FrozenSet, List, Set, Tuple

from ..ir.core import Function, Instruction, Region, Value
from ..ir.ops import VIEW_OPS
from ..ir.types import GroupType


class _Unknown:
    """The root of a memref whose origin the analysis does not follow."""

    def __repr__(self) -> str:
        return "<unknown memory>"


UNKNOWN = _Unknown()


class Aliasing:
    """Roots of memref values and which roots may share memory, for one function."""

    def __init__(self, func: Function):
        self.args = {a.value for a in func.args}
        self.allocas: Set[Value] = set()
        #: allocas live where each alloca is allocated
        self.live_at: Dict[Value, Set[Value]] = {}
        self.parent: Dict[Region, Instruction] = {}
        self._roots: Dict[Value, FrozenSet[object]] = {}
        self._alias: Dict[Tuple[int, int], bool] = {}
        self._liveness(func.body, [])

    def _liveness(self, region: Region, live: List[Value]) -> None:
        mine: List[Value] = []
        for inst in region.instructions:
            for r in inst.regions:
                self.parent[r] = inst
                self._liveness(r, live)
            if inst.opcode == "alloca":
                v = inst.result
                self.allocas.add(v)
                self.live_at[v] = set(live)
                live.append(v)
                mine.append(v)
            elif inst.opcode == "lifetime_stop":
                v = inst.slots["object"]
                if v in live:
                    live.remove(v)
        for v in mine:  # the region ends: its allocas are freed
            if v in live:
                live.remove(v)

    def roots(self, v: Value) -> FrozenSet[object]:
        cached = self._roots.get(v)
        if cached is None:
            cached = self._roots[v] = self._compute_roots(v, 0)
        return cached

    def _compute_roots(self, v: Value, depth: int) -> FrozenSet[object]:
        inst = v.owner
        if depth > 200:
            return frozenset([UNKNOWN])
        if inst is None:
            return frozenset([v]) if v in self.args else frozenset([UNKNOWN])
        op = inst.opcode
        if op == "alloca":
            return frozenset([v])
        if op in VIEW_OPS:
            return self.roots(inst.slots["tensor"])
        if op == "load" and isinstance(inst.slots["tensor"].type, GroupType):
            return self.roots(inst.slots["tensor"])
        if op == "if":
            index = inst.results.index(v)
            out: Set[object] = set()
            for region in inst.regions:
                last = region.instructions[-1] if region.instructions else None
                if last is None or last.opcode != "yield":
                    return frozenset([UNKNOWN])
                out |= self.roots(last.slots["values"][index])
            return frozenset(out)
        return frozenset([UNKNOWN])

    def alias(self, a: object, b: object) -> bool:
        if a is UNKNOWN or b is UNKNOWN or a is b:
            return True
        if a in self.allocas and b in self.allocas:
            key = (id(a), id(b)) if id(a) < id(b) else (id(b), id(a))
            cached = self._alias.get(key)
            if cached is None:
                cached = self._alias[key] = self._allocas_alias(a, b)
            return cached
        return False

    def _allocas_alias(self, a: Value, b: Value) -> bool:
        pa, pb = a.owner.attrs.get("stack_ptr"), b.owner.attrs.get("stack_ptr")
        if isinstance(pa, int) and isinstance(pb, int):
            return pa < pb + b.type.bytes and pb < pa + a.type.bytes
        return not (a in self.live_at[b] or b in self.live_at[a])
