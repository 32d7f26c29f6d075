"""insert-barrier: the barriers collective code needs, and no more.

Collective instructions run once per work-group with their work spread over its
work-items, so two of them that touch the same memory, one of them writing, must be
separated by a barrier (spec, "Barrier": "Barriers are inserted automatically in
collective regions").  ``parallel``, ``foreach`` and ``foreach_tile`` are collective
instructions too: their whole SPMD region is one unit seen from the collective region
around it.  This pass is what makes lowered code correct: once lower-linalg and
lower-foreach have replaced collective instructions by SPMD regions, nothing else orders
one region's stores before the next region's loads.

The analysis is a forward data-flow over the collective regions.  The state is the set
of memory accesses *pending* since the last barrier, per address space: ``(root, kind)``
pairs where the root is the memory object an access goes through (``Aliasing.roots``) and
the kind is read, write, atomic read or atomic write.  Before every collective instruction the
accesses it makes are compared with the pending ones; a conflict (read after write,
write after read, write after write; two atomic accesses never conflict, two reads
neither) in an address space asks for a barrier fencing that space (``.global``,
``.local`` or both) right before the instruction, which clears the pending accesses of
the fenced spaces.  A barrier already in the code (manual barriers) clears them just the
same, so it is respected and never doubled.

- ``if`` (collective): both branches start from the incoming state; the state after the
  ``if`` is the union of the branches' final states (and the incoming state when there
  is no ``else``).  Barriers go inside the branch that needs them.
- ``for`` (collective): the body is analysed until the state at its head is a fixed
  point of "incoming state, plus the state at the end of the body" (the back edge), so
  that a write late in the body followed by a read early in the next iteration gets its
  barrier.  A decision to place a barrier is never taken back during the iteration.
- SPMD regions are analysed with the same rules but nothing is inserted in them (SPMD
  code is the programmer's or the lowering's responsibility); an access inside that
  conflicts with an access pending from *before* the region asks for a barrier before
  the region's instruction.  A barrier inside the region ends pending accesses as it
  would anywhere (a barrier must be reached by all work-items).  Accesses still pending
  when the region ends stay pending after its instruction, so a ``parallel`` that stores
  to memory read later gets a barrier after it.

Which memrefs may share memory is ``ttlc.analysis.aliasing``; which accesses an
instruction makes, and which of them conflict, is ``ttlc.analysis.effects``.
"""
from __future__ import annotations

from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from ..analysis import effects
from ..analysis.aliasing import Aliasing
from ..analysis.effects import conflicts
from ..ir import rewrite
from ..ir.builder import Builder
from ..ir.core import Function, Instruction, Region
from ..ir.ops import SPMD_REGION_OPS

GLOBAL, LOCAL = "global", "local"
SPACES = (GLOBAL, LOCAL)

#: an access: (address space, root, kind)
Access = Tuple[str, object, str]
#: a pending access; ``outside`` marks accesses made before the SPMD region analysed
Pending = Tuple[str, object, str, bool]
State = FrozenSet[Pending]

#: bound on fixed-point rounds for one loop (the state only grows, so this is a guard)
_MAX_ROUNDS = 1000


# ---- what an instruction accesses ------------------------------------------------------------
def accesses(inst: Instruction, aliasing: Aliasing) -> List[Access]:
    """The memory accesses of one instruction, not counting nested regions."""
    return [(v.type.space, root, kind) for v, kind in effects.accesses(inst)
            for root in aliasing.roots(v)]


def fences(inst: Instruction) -> Set[str]:
    """Address spaces whose accesses a barrier instruction orders."""
    out = set()
    if inst.modifier("global"):
        out.add(GLOBAL)
    if inst.modifier("local"):
        out.add(LOCAL)
    return out


# ---- the data-flow analysis -------------------------------------------------------------------
class BarrierAnalysis:
    """Decides, for one function, before which collective instructions a barrier goes."""

    def __init__(self, func: Function):
        self.func = func
        self.aliasing = Aliasing(func)
        #: instruction -> spaces the barrier before it must fence (only grows)
        self.need: Dict[Instruction, Set[str]] = {}
        #: spaces in which the SPMD region being analysed conflicts with earlier accesses
        self.found: Set[str] = set()
        self._access_cache: Dict[int, List[Access]] = {}

    # -- state helpers
    def _accesses(self, inst: Instruction) -> List[Access]:
        key = id(inst)
        acc = self._access_cache.get(key)
        if acc is None:
            acc = self._access_cache[key] = accesses(inst, self.aliasing)
        return acc

    def _conflicting_spaces(self, state: State, acc: Iterable[Access]) -> Set[str]:
        spaces: Set[str] = set()
        for space, root, kind in acc:
            if space in spaces:
                continue
            for pspace, proot, pkind, outside in state:
                if (outside and pspace == space and conflicts(pkind, kind)
                        and self.aliasing.alias(proot, root)):
                    spaces.add(space)
                    break
        return spaces

    @staticmethod
    def _clear(state: State, spaces: Iterable[str]) -> State:
        spaces = set(spaces)
        if not spaces:
            return state
        return frozenset(p for p in state if p[0] not in spaces)

    @staticmethod
    def _add(state: State, acc: Iterable[Access], outside: bool) -> State:
        new = frozenset((s, r, k, outside) for s, r, k in acc)
        return state | new if new else state

    def _require(self, inst: Instruction, spaces: Set[str]) -> Set[str]:
        """Record that inst needs a barrier fencing spaces; returns all its fences."""
        if spaces:
            self.need.setdefault(inst, set()).update(spaces)
        return self.need.get(inst, set())

    # -- control flow shared by both kinds of region
    def _loop(self, body: Region, incoming: State,
              run: Callable[[Region, State], State]) -> State:
        """State at the head (and after the end) of a loop: a fixed point over the back
        edge.  The head state only grows, so this terminates."""
        head = incoming
        for _ in range(_MAX_ROUNDS):
            end = run(body, head)
            new = head | end
            if new == head:
                return head
            head = new
        return head  # pragma: no cover - the state space is finite

    def _branches(self, inst: Instruction, state: State,
                  run: Callable[[Region, State], State]) -> State:
        outs = [run(r, state) for r in inst.regions]
        if len(inst.regions) < 2:
            outs.append(state)
        result: State = frozenset()
        for o in outs:
            result |= o
        return result

    # -- collective regions: barriers are inserted here
    def collective(self, region: Region, state: State) -> State:
        for inst in region.instructions:
            op = inst.opcode
            if op == "barrier":
                state = self._clear(state, fences(inst))
            elif op in SPMD_REGION_OPS:
                saved, self.found = self.found, set()
                self._spmd_unit(inst, state)
                found, self.found = self.found, set()
                state = self._clear(state, self._require(inst, found))
                state = self._spmd_unit(inst, state)
                self.found = saved
                state = frozenset((s, r, k, True) for s, r, k, _ in state)
            elif op == "if":
                state = self._branches(inst, state, self.collective)
            elif op == "for":
                state = self._loop(inst.regions[0], state, self.collective)
            else:
                acc = self._accesses(inst)
                if acc:
                    spaces = self._conflicting_spaces(state, acc)
                    state = self._clear(state, self._require(inst, spaces))
                    state = self._add(state, acc, True)
                for r in inst.regions:  # no other collective instruction has regions
                    state = self._loop(r, state, self.collective)
        return state

    def _spmd_unit(self, inst: Instruction, state: State) -> State:
        """The state after parallel (its region runs once) or foreach/foreach_tile (their
        body runs any number of times per work-item, possibly never)."""
        if inst.opcode == "parallel":
            return self.spmd(inst.regions[0], state)
        return self._loop(inst.regions[0], state, self.spmd)

    # -- SPMD regions: nothing is inserted; conflicts with outside accesses are found
    def spmd(self, region: Region, state: State) -> State:
        for inst in region.instructions:
            op = inst.opcode
            if op == "barrier":
                state = self._clear(state, fences(inst))
            elif op == "if":
                state = self._branches(inst, state, self.spmd)
            elif op == "for":
                state = self._loop(inst.regions[0], state, self.spmd)
            else:
                acc = self._accesses(inst)
                if acc:
                    self.found |= self._conflicting_spaces(state, acc)
                    state = self._add(state, acc, False)
                for r in inst.regions:  # e.g. cooperative_matrix_apply: may run repeatedly
                    state = self._loop(r, state, self.spmd)
        return state

    def run(self) -> Dict[Instruction, Set[str]]:
        self.collective(self.func.body, frozenset())
        return self.need


# ---- the pass -----------------------------------------------------------------------------------
def _barrier(spaces: Set[str], loc) -> Instruction:
    scratch = Region()
    b = Builder(scratch)
    inst = b.barrier(global_=GLOBAL in spaces, local=LOCAL in spaces)
    inst.loc = loc
    return inst


def insert_barriers(func: Function) -> int:
    """Insert the barriers func needs; returns how many were inserted or strengthened."""
    need = BarrierAnalysis(func).run()
    if not need:
        return 0
    count = 0
    edits = []
    for region in rewrite.functions_regions(func):
        before: Dict[Instruction, List[Instruction]] = {}
        replaced: Dict[Instruction, List[Instruction]] = {}
        previous: Optional[Instruction] = None
        for inst in region.instructions:
            spaces = need.get(inst)
            if spaces:
                count += 1
                if previous is not None and previous.opcode == "barrier":
                    # strengthen the barrier right before instead of adding a second one
                    merged = fences(previous) | spaces
                    replaced[previous] = [_barrier(merged, previous.loc)]
                else:
                    before[inst] = [_barrier(spaces, inst.loc)]
            previous = inst
        if before or replaced:
            edits.append((region, before, replaced))
    for region, before, replaced in edits:
        rewrite.replace_each(region, replaced)
        rewrite.insert_before_each(region, before)
    return count


def insert_barrier(program, ctx):
    """Insert the barriers that collective instructions and SPMD regions need."""
    for func in program.functions:
        insert_barriers(func)
