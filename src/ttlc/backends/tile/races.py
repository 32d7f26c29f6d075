"""Checked Tile IR: data races on local memory and barriers not reached by the whole
work-group, found as the interpreter finds them (``ttlc.interp.checks``, ``semantics``).

Races.  Two accesses to one element of local memory race when they come from different
work-items, at least one writes, they are not both atomic, and no ``barrier.local`` lies
between them (the start of an SPMD region ends an interval too); coopmatrix accesses are
their subgroup's, and the points (tiles) of a ``foreach`` are different work-items even
when one work-item runs several of them.  Only checked entries that access local memory
pay.  Each local ``alloca`` gets a shadow alloca of i64: for each kind of access the
kernel makes (``RACE_CLASSES``) and each element, the largest and smallest *actor* that
accessed it in this interval and the last instruction that did.  An actor is ``base +
w`` for work-item w (for a coopmatrix access, its subgroup's first running work-item):
``base`` grows by the tile of work-items' size L at every interval and every trip of a
``foreach`` and never goes back, and an interval starts at ``floor``, so that entries
whose largest actor is below ``floor`` are stale and nothing is cleared at a barrier
(the largest actors are zeroed once, where the alloca is made).  ``base``, ``floor`` and
the last unfenced barrier live in a small alloca of the entry, read and written through
the token chain, as loops and branches run them.

An access gathers the entries of the kinds it conflicts with at the elements of its
running lanes (a tile of work-items, or a subgroups x rows x columns tile of matrix
entries) and reports where another actor (another subgroup, where a coopmatrix access is
involved) is there.  It then records its own: lanes whose entry is stale scatter their
actor into it, and ``atomic_rmw_tko`` ``min`` and ``max`` of every lane's actor make the
smallest and largest whatever the order of lanes sharing an element.  Two lanes of one
plain write on one element (two subgroups of one coopmatrix store) are found by reading
the smallest actor back.  Accesses are numbered, and the shadow keeps per kind the number
of the first in the interval: of several conflicts, the one reported is with the kind
first made, as the interpreter looks for them.  Findings are E_RACE records worded by
``race_message``, the interpreter's words.

Barriers.  A divergent branch or loop runs under the mask of its running work-items
(``Translator.active``); a barrier reached where that mask holds some of the work-group's
work-items but not all is an E_BARRIER naming the first that does not arrive and the
first that does, as the interpreter does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from ...analysis.effects import (RACE_CLASSES, WRITE, access_kind, alloca_of, conflicts,
                                 is_local, race_class, race_message)
from ...ir.core import Instruction
from ...ir.core import Value as IRValue
from ...runtime.findings import E_BARRIER, E_RACE, ERR_DETAILS
from . import checks
from .ops import TOKEN, Ptr, Scalar, Tile
from .tir import Value

I64, I32 = Scalar("i64"), Scalar("i32")
#: details of an E_RACE record before the index: element, other actor, what (the other
#: instruction, the alloca's number, the other and this kind of access: ``RaceTable``),
#: this actor, the unfenced barrier (-1: none), the index's number of modes
FIXED_DETAILS = 6
#: bits of an E_RACE record's alloca number (``RaceTable.names``), below the instruction's
NUMBER_BITS = 16
#: the registers: the actors' base, the interval's floor, the last barrier without .local,
#: the number of the last access tracked and of the interval's first
BASE, FLOOR, UNFENCED, SEQ, SEQ_FLOOR = range(5)
#: the shadow: one entry per class, the number of the access that first made that kind of
#: access to the alloca in the interval (the order in which the interpreter looks for
#: conflicts), then arrays of one stretch of the alloca's size per class: the largest
#: actors (these and the numbers the only entries to clear), the smallest, the last
#: instructions
HIGH, LOW, INST = range(3)
#: a number above every access's
LAST = 1 << 62


@dataclass
class RaceTable:
    """What the host needs to word an E_RACE record: the names of the allocas (by the
    number a record gives) and the tile of work-items' and the subgroup's sizes."""

    lanes: int
    subgroup_size: int
    names: List[str] = field(default_factory=list)

    def message(self, d: Sequence[int], instructions, wgx: int) -> str:
        element, other, packed, me, unfenced, order = d[:FIXED_DETAILS]
        packed, mine = divmod(packed, 8)
        packed, other_class = divmod(packed, 8)
        other_inst, number = divmod(packed, 1 << NUMBER_BITS)
        kind, coop = RACE_CLASSES[mine]
        L = self.lanes
        shown = [str(x) for x in d[FIXED_DETAILS:FIXED_DETAILS + order]]
        index = "[" + ", ".join(shown + (["..."] if order > len(shown) else [])) + "]"

        def work_item(lane: int) -> str:
            return f"({lane % wgx}, {lane // wgx})"
        who = work_item(me % L) + (f" (subgroup {me % L // self.subgroup_size})" if coop else "")
        by = work_item(other % L)
        if other // L != me // L:
            by += " in another chunk of foreach iterations"
        name = self.names[number]
        return race_message(f"local memory {name}" if name else "local memory", kind, index,
                            element, who, RACE_CLASSES[other_class][0], by,
                            instructions[other_inst].loc,
                            instructions[unfenced].loc if unfenced >= 0 else None)


@dataclass
class _Shadow:
    number: int
    base: Value     # the alloca's address (i64)
    shadow: Value   # the shadow's first entry (ptr<i64>)
    entries: int    # elements of the alloca
    element: int    # bytes of one element


class Races:
    """The race detection of one checked entry (``Translator.races``)."""

    def __init__(self, t: "Translator", classes: List[int], table: RaceTable):
        self.classes = classes
        self.table = table
        self.shadows: Dict[Instruction, _Shadow] = {}
        self.registers = t.b.one("alloca", Tile(Ptr(I64)), num_elem=5, alignment=64)
        for k, v in ((BASE, 0), (FLOOR, 0), (UNFENCED, -1), (SEQ, 0), (SEQ_FLOOR, 0)):
            self.put(t, k, t.const("i64", v))

    # ---- registers -------------------------------------------------------------------------
    def get(self, t: "Translator", k: int) -> Value:
        v, t.token = t.b.op("load_ptr_tko", [Tile(I64), TOKEN], source=t.offset(self.registers, k),
                            token=t.token, memory_ordering_semantics="weak")
        return v

    def put(self, t: "Translator", k: int, v: Value) -> None:
        t.token = t.b.one("store_ptr_tko", TOKEN, destination=t.offset(self.registers, k), value=v,
                          token=t.token, memory_ordering_semantics="weak")

    def _bump(self, t: "Translator", reached: Optional[Value]) -> Value:
        """The next actors' base (where `reached`: the barrier is reached at all)."""
        old = self.get(t, BASE)
        base = t.binary("addi", old, t.const("i64", t.lanes))
        base = base if reached is None else t.select(reached, base, old)
        self.put(t, BASE, base)
        return base

    def interval(self, t: "Translator", reached: Optional[Value] = None) -> None:
        """A new interval (an SPMD region, a barrier.local reached by the work-items, where
        `reached`): earlier accesses are ordered."""
        first = t.binary("addi", self.get(t, SEQ), t.const("i64", 1))
        for k, v in ((FLOOR, self._bump(t, reached)), (UNFENCED, t.const("i64", -1)),
                     (SEQ_FLOOR, first)):
            self.put(t, k, v if reached is None else t.select(reached, v, self.get(t, k)))

    def next_point(self, t: "Translator") -> None:
        """A new trip of foreach: its points are made by other actors."""
        self._bump(t, None)

    # ---- allocas ----------------------------------------------------------------------------
    def allocated(self, t: "Translator", inst: Instruction, ptr: Value, element_bytes: int) -> None:
        """The shadow of a local alloca, its largest actors zeroed."""
        n = inst.results[0].type.extent
        C = len(self.classes)
        shadow = t.b.one("alloca", Tile(Ptr(I64)), num_elem=C + 3 * C * n, alignment=64)
        address = t.b.one("ptr_to_int", Tile(I64), source=ptr)
        self.shadows[inst] = _Shadow(len(self.table.names), address, shadow, n, element_bytes)
        name = inst.results[0].name
        self.table.names.append(f"%{name}" if name is not None else "")
        cleared = C + C * n
        ext = min(64, 1 << max(0, cleared - 1).bit_length())
        zeros, lanes = t.const("i64", 0, (ext,)), t.b.one("iota", Tile(I64, (ext,)))

        def clear(k: Value, _) -> List[Value]:
            at = t.binary("addi", lanes, t.splat(t.binary("muli", k, t.const("i64", ext)), (ext,)))
            inside = t.compare("less_than", at, t.const("i64", cleared, (ext,)))
            t.token = t.b.one("store_ptr_tko", TOKEN, destination=t.offset(shadow, at), value=zeros,
                              mask=inside, token=t.token, memory_ordering_semantics="weak")
            return []
        t.loop(t.const("i64", -(-cleared // ext)), [], clear)

    # ---- accesses ---------------------------------------------------------------------------
    def track(self, t: "Translator", inst: Instruction, ptrs: Value, active: Optional[Value],
              me: Value, index: Sequence, lanes: Optional[Value] = None) -> None:
        """The accesses of `inst` at element pointers `ptrs` (a tile) where `active` (None:
        all), by actors `me` (of ptrs' shape): report a race with an earlier access of the
        interval (or, for plain writes, of this instruction), then record them.  `index`
        (ints or i64 tiles) is the index each was made through, `lanes` (i64, of ptrs'
        shape) the work-item that made each where the tile is not one of work-items."""
        sh = self.shadows[alloca_of(inst.slots["tensor"])]
        shape = ptrs.type.shape
        address = t.b.one("ptr_to_int", Tile(I64, shape), source=ptrs)
        rel = t.binary("subi", address, sh.base)
        element = t.binary("divi", rel, t.const("i64", sh.element), signedness="signed")
        inside = t.binary("andi", t.compare("greater_than_or_equal", element, t.const("i64", 0)),
                          t.compare("less_than", element, t.const("i64", sh.entries)))
        act = inside if active is None else t.binary("andi", *t.matched(active, inside))
        mine = race_class(inst)
        kind, coop = RACE_CLASSES[mine]
        inst_id = t.checks.current
        n, S = sh.entries, self.table.subgroup_size
        floor, unfenced = self.get(t, FLOOR), self.get(t, UNFENCED)
        C = len(self.classes)

        def at(j: int, array: int) -> Value:
            start = t.const("i64", C + (array * C + j) * n)
            return t.offset(sh.shadow, t.binary("addi", element, start))

        def gather(j: int, array: int) -> Value:
            v, t.token = t.b.op("load_ptr_tko", [Tile(I64, shape), TOKEN], source=at(j, array),
                                mask=act, token=t.token, memory_ordering_semantics="weak")
            return v

        def unit(v: Value, group: int) -> Value:
            if group == 1:
                return v
            return t.binary("divi", v, t.const("i64", group), signedness="signed")

        seq = t.binary("addi", self.get(t, SEQ), t.const("i64", 1))
        self.put(t, SEQ, seq)

        def number(j: int) -> Value:
            v, t.token = t.b.op("load_ptr_tko", [Tile(I64), TOKEN], source=t.offset(sh.shadow, j),
                                token=t.token, memory_ordering_semantics="weak")
            return v

        # (bad, other actor, other instruction, other class, the class's number)
        found = []
        for j, cls in enumerate(self.classes):
            other_kind, other_coop = RACE_CLASSES[cls]
            if not conflicts(kind, other_kind):
                continue
            group = S if coop or other_coop else 1
            high, low = gather(j, HIGH), gather(j, LOW)
            me_u = unit(me, group)
            differ_low = t.compare("not_equal", unit(low, group), me_u)
            differ = t.binary("ori", differ_low, t.compare("not_equal", unit(high, group), me_u))
            fresh = t.compare("greater_than_or_equal", high, floor)
            bad = t.binary("andi", t.binary("andi", act, fresh), differ)
            found.append((bad, t.select(differ_low, low, high), gather(j, INST), cls, number(j)))
        j = self.classes.index(mine)
        first = t.binary("andi", _total(t, act, "ori", False),
                         t.compare("less_than", number(j), self.get(t, SEQ_FLOOR)))
        t.token = t.b.one("store_ptr_tko", TOKEN, destination=t.offset(sh.shadow, j), value=seq,
                          mask=first, token=t.token, memory_ordering_semantics="weak")
        stale = t.binary("andi", act, t.compare("less_than", gather(j, HIGH), floor))
        for array in (HIGH, LOW):
            t.token = t.b.one("store_ptr_tko", TOKEN, destination=at(j, array), value=me,
                              mask=stale, token=t.token, memory_ordering_semantics="weak")
        for array, mode in ((HIGH, "max"), (LOW, "min")):
            t.token = t.b.op("atomic_rmw_tko", [me.type, TOKEN], pointers=at(j, array), arg=me,
                             mask=act, token=t.token, memory_ordering_semantics="relaxed",
                             memory_scope="tl_blk", mode=mode)[1]
        here = t.const("i64", inst_id, shape)
        t.token = t.b.one("store_ptr_tko", TOKEN, destination=at(j, INST), value=here, mask=act,
                          token=t.token, memory_ordering_semantics="weak")
        if kind == WRITE:  # two lanes (subgroups) of this write on one element
            group = S if coop else 1
            low = gather(j, LOW)
            bad = t.binary("andi", act, t.compare("not_equal", unit(low, group), unit(me, group)))
            if not coop:  # the lowest such element, as the interpreter picks
                lowest = _total(t, t.select(bad, element, t.const("i64", n, shape)), "mini", n)
                bad = t.binary("andi", bad, t.compare("equal", element, t.splat(lowest, shape)))
            found.append((bad, low, here, mine, None))
        if found:
            self._report(t, found, mine, sh.number, [element, me, unfenced, *index], lanes)

    @staticmethod
    def _report(t: "Translator", found, mine: int, number: int, values: Sequence,
                lanes: Optional[Value]) -> None:
        """One E_RACE record for an access: of the conflicts `found` that hold anywhere, the
        one with the kind of access first made in the interval (the interpreter looks at
        them in that order; two lanes of this write last), at the first lane where it
        holds.  The details are picked out of their tiles here, by a one-hot
        sum over the tile's own shape (``tileiras`` -O0 takes seconds over each ``extract``
        at a computed index, or ``reshape``, of a matrix tile), so that ``checks.fail_if``
        is given rank-0 ones."""
        bad, other, other_inst, cls, _ = found[0]
        what = t.const("i64", cls * 8 + mine)
        best = t.const("i64", LAST)
        for b, o, i, c, made in found:
            anywhere = _total(t, b, "ori", False)
            if made is None:  # this write's own lanes: only where nothing else conflicts
                better = t.compare("equal", best, t.const("i64", LAST))
            else:  # the kind of access made first in the interval
                better = t.compare("less_than", made, best)
            better = t.binary("andi", anywhere, better)
            bad, other, other_inst = (t.select(better, x, y)
                                      for x, y in ((b, bad), (o, other), (i, other_inst)))
            what = t.select(better, t.const("i64", c * 8 + mine), what)
            if made is not None:
                best = t.select(better, made, best)
        shape = bad.type.shape
        position = None  # of each entry in row-major order
        for d, n in enumerate(shape):
            ones = tuple(n if k == d else 1 for k in range(len(shape)))
            along = t.b.one("reshape", Tile(I32, ones), source=t.b.one("iota", Tile(I32, (n,))))
            along = t.b.one("broadcast", Tile(I32, shape), source=along)
            position = along if position is None else t.binary(
                "addi", t.binary("muli", position, t.const("i32", n, shape)), along)
        end = t.const("i32", 1 << 30, shape)
        first = _total(t, t.select(bad, position, end), "mini", 1 << 30)
        hot = t.compare("equal", position, t.splat(first, shape))

        def pick(v) -> Value:
            if isinstance(v, int) or not v.type.shape:
                return v
            return _total(t, t.select(hot, v, t.const("i64", 0, shape)), "addi", 0)
        what = t.binary("addi", t.binary("muli", t.binary("addi", t.binary(
            "muli", pick(other_inst), t.const("i64", 1 << NUMBER_BITS)), t.const("i64", number)),
            t.const("i64", 64)), what)
        element, me, unfenced, *index = (pick(v) for v in values)
        details = [element, pick(other), what, me, unfenced, len(index), *index]
        if lanes is not None:  # one test of the whole tile: fail_if need not reshape it
            bad = t.b.one("reshape", Tile(bad.type.element, (1,)),
                          source=_total(t, bad, "ori", False))
        checks.fail_if(t, bad, E_RACE, details[:ERR_DETAILS],
                       None if lanes is None else lambda k: pick(lanes))


def _total(t: "Translator", v: Value, name: str, identity) -> Value:
    """`v` reduced over all its modes by `name` (mode by mode: no ``reshape``)."""
    signed = {"signedness": "signed"} if name == "mini" else {}
    while v.type.shape:
        v = t.along("reduce", v, len(v.type.shape) - 1, lambda x, y: t.binary(name, x, y, **signed),
                    identity)
    return v


def _tracked(inst: Instruction) -> bool:
    """Whether inst accesses local memory through its ``tensor`` operand (the element and
    coopmatrix accesses; collective instructions run between implicit barriers)."""
    v = inst.slots.get("tensor")
    return access_kind(inst, "tensor") is not None and isinstance(v, IRValue) and is_local(v.type)


#: the SPMD regions, where work-items access memory on their own
SPMD = ("parallel", "foreach", "foreach_tile")


def _spmd_accesses(region, spmd: bool = False):
    """The instructions of `region` that access local memory in SPMD regions (those
    outside run between the implicit barriers of collective code)."""
    for inst in region.instructions:
        if spmd and _tracked(inst):
            yield inst
        for r in inst.regions:
            yield from _spmd_accesses(r, spmd or inst.opcode in SPMD)


def setup(t: "Translator") -> Optional[Races]:
    """The race detection of a checked entry that accesses local memory in SPMD regions
    (None for others); called where the entry's code starts."""
    classes = sorted({race_class(inst) for inst in _spmd_accesses(t.function.body)})
    if not classes:
        return None
    t.checks.race_table = RaceTable(0, 1)
    return Races(t, classes, t.checks.race_table)


# ---- the translation's hooks ------------------------------------------------------------------
def alloca(t: "Translator", inst: Instruction, ptr: Value, element_bytes: int) -> None:
    if t.races is not None and is_local(inst.results[0].type):
        t.races.allocated(t, inst, ptr, element_bytes)


def region(t: "Translator") -> None:
    """An SPMD region starts (its tile of work-items set up): a new interval."""
    if t.races is not None:
        t.races.table.lanes, t.races.table.subgroup_size = t.lanes, t.config().subgroup_size
        t.races.interval(t)


def point(t: "Translator") -> None:
    """A trip of foreach or foreach_tile starts."""
    if t.races is not None:
        t.races.next_point(t)


def _lanes(t: "Translator") -> Value:
    """The work-items' numbers (i64)."""
    return t.convert(t.b.one("iota", Tile(I32, (t.lanes,))), "i64")


def element(t: "Translator", inst: Instruction, ptr: Value, inside: Optional[Value],
            index: Sequence) -> None:
    """A load, store or atomic of one element per running work-item at `ptr` (where
    `inside`: its index is in bounds), through `index`."""
    if t.races is None or not t.lanes or t.items or not _tracked(inst):
        return
    active = t.active
    if inside is not None:
        active = inside if active is None else t.binary("andi", *t.matched(active, inside))
    active = None if active is None else t.per_lane(active)
    me = t.binary("addi", _lanes(t), t.splat(t.races.get(t, BASE), (t.lanes,)))
    t.races.track(t, inst, t.per_lane(ptr), active, me,
                  [t.per_lane(t.i64(i)) if not isinstance(i, int) else i for i in index])


def matrix(t: "Translator", inst: Instruction, ptrs: Value, mask: Optional[Value],
           rows: Value, cols: Value) -> None:
    """A coopmatrix load, store or atomic at `ptrs` (subgroups x rows x columns) where
    `mask`, at memref indices (`rows`, `cols`): each subgroup's accesses are its first
    running work-item's."""
    if t.races is None or not t.lanes or not _tracked(inst):
        return
    shape = ptrs.type.shape
    G, S = shape[0], t.lanes // shape[0]
    lane = _lanes(t)
    if t.active is not None:  # the subgroups' first running work-items
        lane = t.select(t.active, lane, t.const("i64", t.lanes, (t.lanes,)))
    first = t.along("reduce", t.b.one("reshape", Tile(I64, (G, S)), source=lane), 1,
                    lambda x, y: t.binary("mini", x, y, signedness="signed"), t.lanes)
    first = t.b.one("broadcast", Tile(I64, shape),
                    source=t.b.one("reshape", Tile(I64, (G, 1, 1)), source=first))
    me = t.binary("addi", first, t.races.get(t, BASE))
    index = [t.b.one("broadcast", Tile(I64, shape), source=v) if v.type.shape != shape else v
             for v in (rows, cols)]
    t.races.track(t, inst, ptrs, mask, me, index, first)


def barrier(t: "Translator", inst: Instruction) -> None:
    """E_BARRIER where some but not all of the work-group's work-items reach `inst`; a
    barrier.local reached starts an interval, one without .local is remembered for the
    message."""
    if t.checks is None or not t.lanes or t.items:
        return
    reached = None
    if t.active is not None:
        active = t.active
        reached = t.along("reduce", active, 0, lambda x, y: t.binary("ori", x, y), False)
        lanes = _lanes(t)
        exists = t.compare("less_than", lanes, t.const("i64", t.config().lanes, (t.lanes,)))
        away = t.binary("xori", active, t.const("i1", True, (t.lanes,)))
        missing = t.binary("andi", exists, away)
        none = t.const("i64", t.lanes, (t.lanes,))
        first = _total(t, t.select(active, lanes, none), "mini", t.lanes)
        t.active = None  # the work-items that do not arrive report
        try:
            checks.fail_if(t, t.binary("andi", missing, t.splat(reached, (t.lanes,))), E_BARRIER,
                           [first])
        finally:
            t.active = active
    if t.races is None:
        return
    if inst.modifier("local"):
        t.races.interval(t, reached)
    else:
        here = t.const("i64", t.checks.current)
        t.races.put(t, UNFENCED, here if reached is None else
                    t.select(reached, here, t.races.get(t, UNFENCED)))
