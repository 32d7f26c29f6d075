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
pairs where the root is the memory object an access goes through (below) and the kind
is read, write, atomic read or atomic write.  Before every collective instruction the
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

Alias analysis.  Views (``subview``, ``expand``, ``fuse``) and memrefs loaded from a
group access the memory of their *root*: the function argument or ``alloca`` they derive
from (an ``if`` result, should the language allow memref results one day, has the roots
of the values its branches yield).  Any other memref has an unknown root, which aliases
everything in its address space.  Two roots alias when

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

from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from ..ir import rewrite
from ..ir.builder import Builder
from ..ir.core import Function, Instruction, Region, Value
from ..ir.types import GroupType, MemrefType
from . import register

# ---- access kinds -------------------------------------------------------------------------
READ, WRITE, ATOMIC_READ, ATOMIC_WRITE = "r", "w", "ar", "aw"
_WRITES = (WRITE, ATOMIC_WRITE)
_ATOMICS = (ATOMIC_READ, ATOMIC_WRITE)

GLOBAL, LOCAL = "global", "local"
SPACES = (GLOBAL, LOCAL)


def conflicts(a: str, b: str) -> bool:
    """Two accesses to the same memory need ordering: one writes, not both atomic."""
    return (a in _WRITES or b in _WRITES) and not (a in _ATOMICS and b in _ATOMICS)


class _Unknown:
    """The root of a memref whose origin the analysis does not follow."""

    def __repr__(self) -> str:
        return "<unknown memory>"


UNKNOWN = _Unknown()

#: SPMD-region instructions: collective units seen from outside
SPMD_REGION_OPS = ("parallel", "foreach", "foreach_tile")

#: scalar and coopmatrix memory instructions (operand slot "tensor") and their kind
_MEMORY_KIND = {
    "load": READ, "store": WRITE, "atomic_load": ATOMIC_READ, "atomic_store": ATOMIC_WRITE,
    "atomic_add": ATOMIC_WRITE, "atomic_max": ATOMIC_WRITE, "atomic_min": ATOMIC_WRITE,
    "cooperative_matrix_load": READ, "cooperative_matrix_store": WRITE,
    "cooperative_matrix_atomic_load": ATOMIC_READ,
    "cooperative_matrix_atomic_store": ATOMIC_WRITE,
    "cooperative_matrix_atomic_add": ATOMIC_WRITE,
    "cooperative_matrix_atomic_max": ATOMIC_WRITE,
    "cooperative_matrix_atomic_min": ATOMIC_WRITE,
}

#: collective BLAS instructions: (operands read, operand written)
_BLAS_OPERANDS = {
    "axpby": (("A",), "B"), "sum": (("A",), "B"), "cumsum": (("A",), "B"),
    "gemm": (("A", "B"), "C"), "gemv": (("A", "B"), "C"), "ger": (("A", "B"), "C"),
    "hadamard": (("A", "B"), "C"),
}

#: an access: (address space, root, kind)
Access = Tuple[str, object, str]
#: a pending access; ``outside`` marks accesses made before the SPMD region analysed
Pending = Tuple[str, object, str, bool]
State = FrozenSet[Pending]

#: bound on fixed-point rounds for one loop (the state only grows, so this is a guard)
_MAX_ROUNDS = 1000


# ---- memory roots and aliasing -------------------------------------------------------------
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
        if op in ("subview", "expand", "fuse"):
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
            return pa < pb + _bytes(b.type) and pb < pa + _bytes(a.type)
        return not (a in self.live_at[b] or b in self.live_at[a])


def _bytes(t: MemrefType) -> int:
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride))
    return extent * t.element.size


# ---- what an instruction accesses ------------------------------------------------------------
def accesses(inst: Instruction, aliasing: Aliasing) -> List[Access]:
    """The memory accesses of one instruction, not counting nested regions."""
    out: List[Access] = []

    def add(v, kind):
        if isinstance(v, Value) and isinstance(v.type, MemrefType):
            for root in aliasing.roots(v):
                out.append((v.type.space, root, kind))

    op = inst.opcode
    kind = _MEMORY_KIND.get(op)
    if kind is not None:
        add(inst.slots.get("tensor"), kind)
    elif op in _BLAS_OPERANDS:
        reads, written = _BLAS_OPERANDS[op]
        for slot in reads:
            add(inst.slots.get(slot), READ)
        add(inst.slots.get(written), ATOMIC_WRITE if inst.modifier("atomic") else WRITE)
    return out


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


@register("insert-barrier")
def insert_barrier(program, ctx):
    """Insert the barriers that collective instructions and SPMD regions need."""
    for func in program.functions:
        insert_barriers(func)
