"""insert-lifetime-stop: end every alloca's lifetime right after its last use.

An alloca's memory lives until the end of the region that contains it (spec, "Alloca").
``lifetime_stop %x`` ends it earlier, which lets set-stack-ptr and the backends reuse the
memory for later allocas.  For every alloca without a ``lifetime_stop``, this pass finds
the last instruction *of the alloca's own region* that uses it and inserts
``lifetime_stop`` after that instruction; a use nested in an instruction with regions
(a loop, an ``if``, a ``parallel``) counts as a use by that instruction, so the stop goes
after the whole loop.  An alloca that is never used stops right after itself.

Uses through other values count: views (``subview``, ``expand``, ``fuse``) of the alloca
and views of those -- any memref result of an instruction that takes the alloca's memory
as an operand (also ``if``/``for`` results and ``for`` iteration arguments carrying it,
should the language allow memrefs there one day).  Several allocas whose last use
is the same instruction stop in the reverse order of allocation.  A stop never goes after
the ``yield`` that ends a region (it goes before it).  Allocas that already have a
``lifetime_stop`` are left alone, so running the pass twice changes nothing.
"""
from __future__ import annotations

from typing import Dict, List, Set

from ..ir import rewrite
from ..ir.builder import Builder
from ..ir.core import Function, Instruction, Region, Value
from ..ir.types import GroupType, MemrefType


def _memory(v: Value) -> bool:
    return isinstance(v.type, (MemrefType, GroupType))


class _Uses:
    """Def-use facts of one function."""

    def __init__(self, func: Function):
        self.users = rewrite.uses(func.body)
        self.region_of: Dict[Instruction, Region] = {}
        self.parent: Dict[int, Instruction] = {}
        for region, inst in rewrite.walk_with_parent(func.body):
            self.region_of[inst] = region
            for r in inst.regions:
                self.parent[id(r)] = inst

    def derived(self, v: Value) -> Set[Value]:
        """v and every memref value that may refer to v's memory."""
        out = {v}
        work = [v]
        while work:
            x = work.pop()
            for user in self.users.get(x, ()):
                for n in self._carried(user, x):
                    if n not in out:
                        out.add(n)
                        work.append(n)
        return out

    def _carried(self, user: Instruction, x: Value) -> List[Value]:
        op = user.opcode
        if op == "lifetime_stop":
            return []
        if op == "yield":
            parent = self.parent.get(id(self.region_of.get(user)))
            if parent is None:
                return []
            out = []
            for i, y in enumerate(user.slots.get("values", [])):
                if y is x:
                    if i < len(parent.results) and _memory(parent.results[i]):
                        out.append(parent.results[i])
                    if parent.opcode == "for" and i + 1 < len(parent.regions[0].args):
                        out.append(parent.regions[0].args[i + 1])
            return out
        out = [r for r in user.results if _memory(r)]
        if op == "for":
            for i, y in enumerate(user.slots.get("init", [])):
                if y is x and i + 1 < len(user.regions[0].args):
                    out.append(user.regions[0].args[i + 1])
        return out


def _used_in(inst: Instruction) -> Set[Value]:
    """Values used by inst or anything nested in it."""
    out = set(inst.operands)
    for r in inst.regions:
        for nested in r.walk():
            out.update(nested.operands)
    return out


def insert_lifetime_stops(func: Function) -> int:
    """Insert the missing lifetime_stop instructions of func; returns how many."""
    allocas = [i for i in func.body.walk() if i.opcode == "alloca"]
    if not allocas:
        return 0
    stopped = {i.slots["object"] for i in func.body.walk() if i.opcode == "lifetime_stop"}
    facts = _Uses(func)
    count = 0
    for region in list(rewrite.functions_regions(func)):
        todo = [i for i in region.instructions if i.opcode == "alloca" and i.result not in stopped]
        if not todo:
            continue
        used = [_used_in(i) for i in region.instructions]
        after: Dict[Instruction, List[Instruction]] = {}
        before: Dict[Instruction, List[Instruction]] = {}
        for alloca in todo:
            start = region.instructions.index(alloca)
            memory = facts.derived(alloca.result)
            last = start
            for j in range(start + 1, len(region.instructions)):
                if used[j] & memory:
                    last = j
            anchor = region.instructions[last]
            stop = _lifetime_stop(alloca.result, anchor)
            if anchor.opcode == "yield":
                before.setdefault(anchor, []).insert(0, stop)
            else:
                after.setdefault(anchor, []).insert(0, stop)  # later allocas stop first
            count += 1
        rewrite.insert_after_each(region, after)
        rewrite.insert_before_each(region, before)
    return count


def _lifetime_stop(v: Value, near: Instruction) -> Instruction:
    scratch = Region()
    inst = Builder(scratch).lifetime_stop(v)
    inst.loc = near.loc
    return inst


def insert_lifetime_stop(program, ctx):
    """After the last use of every alloca, end its lifetime (lifetime_stop)."""
    for func in program.functions:
        insert_lifetime_stops(func)
