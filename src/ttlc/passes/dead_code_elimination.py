"""dead-code-elimination: remove what cannot change the result, to a fixed point.

* ``if`` with a constant condition: the taken branch's instructions replace the ``if``
  (its results become the values the branch yields); no branch taken: nothing remains;
* ``for`` with constant bounds that runs zero times (``from >= to``): its results are
  its initial values;
* instructions without side effects whose results are unused: pure instructions (the
  instruction table's ``pure`` flag) and ``if``/``for``/``parallel``/``foreach``/
  ``foreach_tile``/``cooperative_matrix_apply`` whose regions hold only such
  instructions (an ``if`` with empty branches, ``parallel {}``);
* ``alloca`` used by nothing but its ``lifetime_stop`` (both go).

Stores, atomics, barriers, collective BLAS, prefetches and regions containing any of
them are never removed.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List

from ..ir import rewrite
from ..ir.core import Function, Instruction, Region, Value
from ..ir.ops import REGION_OPS


def _constant(v: Value):
    owner = v.owner
    if owner is not None and owner.opcode == "constant":
        return owner.attrs["value"]
    return None


def _side_effect_free(inst: Instruction) -> bool:
    """inst and everything nested in it could go if its results were unused."""
    if inst.opcode == "yield":
        return True
    if inst.regions:
        return inst.opcode in REGION_OPS and all(
            _side_effect_free(i) for r in inst.regions for i in r.instructions)
    return inst.opdef.pure


# ---- constant control flow -------------------------------------------------------------
def _simplify_control(region: Region, mapping: Dict[Value, Value]) -> bool:
    """Inline ifs with a constant condition, drop loops that never run (nested regions
    first); replacements of results are recorded in mapping."""
    changed = False
    new: Dict[Instruction, List[Instruction]] = {}
    for inst in region.instructions:
        for r in inst.regions:
            changed |= _simplify_control(r, mapping)
        if inst.opcode == "if":
            cond = _constant(_resolve(inst.slots["condition"], mapping))
            if isinstance(cond, bool):
                taken = inst.regions[0] if cond else (inst.regions[1] if len(inst.regions) > 1
                                                      else None)
                body = list(taken.instructions) if taken is not None else []
                if body and body[-1].opcode == "yield":
                    for r, y in zip(inst.results, body.pop().slots["values"]):
                        mapping[r] = y
                new[inst] = body
        elif inst.opcode == "for":
            lo = _constant(_resolve(inst.slots["from"], mapping))
            hi = _constant(_resolve(inst.slots["to"], mapping))
            if isinstance(lo, int) and isinstance(hi, int) and lo >= hi:
                for r, init in zip(inst.results, inst.slots.get("init", [])):
                    mapping[r] = init
                new[inst] = []
    rewrite.replace_each(region, new)
    return changed or bool(new)


def _resolve(v: Value, mapping: Dict[Value, Value]) -> Value:
    seen = set()
    while v in mapping and v not in seen:
        seen.add(v)
        v = mapping[v]
    return v


# ---- unused instructions -----------------------------------------------------------------
class _Sweep:
    def __init__(self, func: Function):
        self.counts: Counter = Counter()
        #: for each alloca result: its lifetime_stop instructions and their regions
        self.stops: Dict[Value, List] = {}
        for region, inst in rewrite.walk_with_parent(func.body):
            for v in inst.operands:
                self.counts[v] += 1
            if inst.opcode == "lifetime_stop":
                self.stops.setdefault(inst.slots["object"], []).append((region, inst))
        self.changed = False

    def region(self, region: Region) -> None:
        dead: List[Instruction] = []
        for inst in reversed(list(region.instructions)):
            for r in inst.regions:
                self.region(r)
            if self.removable(inst):
                dead.append(inst)
                self.release(inst)
        if dead:
            rewrite.erase_each(region, dead)
            self.changed = True

    def removable(self, inst: Instruction) -> bool:
        if inst.opcode == "alloca":
            stops = self.stops.get(inst.results[0], [])
            if self.counts[inst.results[0]] != len(stops):
                return False
            for region, stop in stops:  # only lifetime_stop uses it: both go
                rewrite.erase(region, stop)
            return True
        if any(self.counts[r] for r in inst.results):
            return False
        return _side_effect_free(inst) and inst.opcode != "yield"

    def release(self, inst: Instruction) -> None:
        """inst goes: its operands (and those of instructions nested in it) lose a use."""
        for v in inst.operands:
            self.counts[v] -= 1
        for r in inst.regions:
            for i in r.walk():
                for v in i.operands:
                    self.counts[v] -= 1


def dead_code_elimination(program, ctx):
    """Remove unused pure instructions, constant branches, loops that never run, unused allocas."""
    for func in program.functions:
        while True:
            mapping: Dict[Value, Value] = {}
            changed = _simplify_control(func.body, mapping)
            if mapping:
                rewrite.replace_uses(func.body, rewrite.resolve(mapping))
            sweep = _Sweep(func)
            sweep.region(func.body)
            if not (changed or sweep.changed):
                break
