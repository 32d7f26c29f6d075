"""Checked execution: data races on local memory.

Everything here runs only when ``wg.checked`` is set (``ttlc.compile(...,
checked=True)``), so unchecked interpretation pays nothing for it.  The other
findings of checked mode live next to the semantics they guard: bounds, group
indices, division by zero, lifetimes and barriers in ``semantics.py``, endless loops in
``machine.py``, uniform operands, subgroup convergence and coopmatrix bounds in
``coop.py`` (``uniform_per_subgroup``, ``coop_subgroups``).

``RaceTracker`` remembers, per local buffer and element, who read and wrote it since
the last ``barrier.local`` or the start of the SPMD region (``parallel``, ``foreach``,
``foreach_tile``: collective instructions have implicit barriers).  Two accesses race
if they come from different work-items, at least one writes, and they are not both
atomic.  A ``barrier`` without the ``.local`` fence synchronises control but does not
make local memory accesses visible, so it does not end the interval.  Scalar
accesses are attributed to their work-item; coopmatrix accesses to their subgroup
(the language does not say which work-item of a subgroup touches which element of a
block), so a subgroup does not race with its own coopmatrix accesses.  In
``foreach`` (whose mapping of iterations to work-items is implementation-defined)
iterations in different chunks count as different work-items.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..analysis.effects import ATOMIC_READ, READ, WRITE, access_kind, conflicts, race_message
from ..ir.core import Instruction

#: families of the coopmatrix memory instructions (a block per subgroup, tracked after it ran)
_COOP_MEMORY = ("coop_load", "coop_store", "coop_atomic_update")

# ---- helpers ----------------------------------------------------------------------------------
def work_item(wg, lane: int) -> str:
    return f"({int(wg.lane_x[lane])}, {int(wg.lane_y[lane])})"


def _show(x) -> str:
    x = np.asarray(x)[()]
    return str(int(x)) if isinstance(x, np.integer) else str(x)


# ---- data races on local memory ---------------------------------------------------------------
class _Access:
    """Who accessed each element of one buffer in one way since the last barrier."""

    __slots__ = ("low", "high", "inst")

    def __init__(self, n: int):
        self.low = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)   # smallest actor
        self.high = np.full(n, -1, dtype=np.int64)                      # largest actor
        self.inst = np.full(n, -1, dtype=np.int32)                      # last instruction


class RaceTracker:
    """Per local buffer: accesses by (kind, coop) since the last barrier.local."""

    def __init__(self):
        self.buffers: Dict[int, Dict[tuple, _Access]] = {}
        self.insts: List[Instruction] = []
        self.inst_ids: Dict[int, int] = {}
        #: the last barrier without .local fence in this interval (for the message)
        self.unfenced = None

    def reset(self) -> None:
        self.buffers.clear()
        self.unfenced = None

    def inst_id(self, inst: Instruction) -> int:
        key = id(inst)
        if key not in self.inst_ids:
            self.inst_ids[key] = len(self.insts)
            self.insts.append(inst)
        return self.inst_ids[key]


def region_boundary(wg) -> None:
    """Start or end of an SPMD region (implicit barrier): forget all accesses."""
    if wg.checked:
        wg.races.reset()


def barrier(wg, inst: Instruction) -> None:
    if inst.modifier("local"):
        wg.races.reset()
    else:
        wg.races.unfenced = inst


def _local_name(wg, bid: int) -> str:
    name = wg.local_names.get(bid)
    return f"local memory {name}" if name else "local memory"


def track(wg, bid: int, flat: np.ndarray, lanes: np.ndarray, kind: str, coop: bool,
          describe: Callable[[int], str]) -> None:
    """Record accesses of local buffer ``bid`` at elements ``flat`` by work-items ``lanes``
    (for coopmatrix accesses: any work-item of the accessing subgroup) and raise on a race.

    ``describe(k)`` gives the index through which access k was made (for the message)."""
    if wg.memory.spaces[bid] != "local" or len(flat) == 0:
        return
    races: RaceTracker = wg.races
    flat = np.asarray(flat, dtype=np.int64)
    lanes = np.asarray(lanes, dtype=np.int64)
    actors = wg.actor_base + lanes
    S = wg.cfg.subgroup_size
    n = len(wg.memory.buffers[bid])
    state = races.buffers.setdefault(bid, {})

    def report(k: int, other_actor: int, other_kind: str, other_inst: Optional[Instruction]):
        lane = int(lanes[k])
        me = work_item(wg, lane) + (f" (subgroup {lane // S})" if coop else "")
        other = work_item(wg, int(other_actor) % wg.cfg.lanes)
        if wg.actor_base // wg.cfg.lanes != int(other_actor) // wg.cfg.lanes:
            other += " in another chunk of foreach iterations"
        unfenced = races.unfenced.loc if races.unfenced is not None else None
        return wg.fail(race_message(_local_name(wg, bid), kind, describe(k), int(flat[k]), me,
                                    other_kind, other,
                                    other_inst.loc if other_inst is not None else None,
                                    unfenced), lane)

    # against earlier accesses in this interval
    for (other_kind, other_coop), acc in state.items():
        if not conflicts(kind, other_kind):
            continue
        low, high = acc.low[flat], acc.high[flat]
        unit = S if coop or other_coop else 1  # coopmatrix accesses: subgroup granularity
        me = actors // unit
        bad = (high >= 0) & ((low // unit != me) | (high // unit != me))
        if bad.any():
            k = int(np.argmax(bad))
            other = int(low[k]) if int(low[k]) // unit != int(me[k]) else int(high[k])
            i = int(acc.inst[flat[k]])
            raise report(k, other, other_kind, races.insts[i] if i >= 0 else None)
    # within this instruction: plain writes of one element by different work-items
    if kind == WRITE and len(flat) > 1:
        who = actors // S if coop else actors
        order = np.lexsort((who, flat))
        f, w = flat[order], who[order]
        dup = (f[1:] == f[:-1]) & (w[1:] != w[:-1])
        if dup.any():
            j = int(np.argmax(dup))
            k = int(order[j + 1])
            raise report(k, int(actors[order[j]]), kind, wg.current)
    acc = state.get((kind, coop))
    if acc is None:
        acc = state[(kind, coop)] = _Access(n)
    np.minimum.at(acc.low, flat, actors)
    np.maximum.at(acc.high, flat, actors)
    acc.inst[flat] = races.inst_id(wg.current)


def track_scalar(wg, inst: Instruction, bid: int, flat, lanes, index: Sequence) -> None:
    """Race tracking for a scalar load/store/atomic by work-items ``lanes`` (SPMD regions)
    of elements ``flat`` of buffer ``bid``; ``index`` is the instruction's index list."""
    kind = access_kind(inst, "tensor")
    if kind is None or wg.memory.spaces[bid] != "local":
        return
    lanes = np.asarray(lanes)
    cols = [wg.lanes(i)[lanes] for i in index]

    def describe(k):
        return "[" + ", ".join(_show(c[k]) for c in cols) + "]"
    track(wg, bid, flat, lanes, kind, False, describe)


# ---- coopmatrix memory accesses ---------------------------------------------------------------
#: (transpose, checked flag) -> memref modes whose bounds the flag guards
_GUARDED = {("n", "rows_checked"): (0,), ("n", "cols_checked"): (1,),
            ("t", "rows_checked"): (1,), ("t", "cols_checked"): (0,),
            ("n", "both_checked"): (0, 1), ("t", "both_checked"): (0, 1)}


def track_coop(wg, inst: Instruction, mask: Optional[np.ndarray]) -> None:
    """Race tracking for a coopmatrix load/store/atomic that has run (so its operands are
    known to be uniform and its accesses in bounds): one block per executing subgroup."""
    from .coop import memref_per_subgroup, uniform_per_subgroup

    kind = access_kind(inst, "tensor")
    G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
    m = mask.reshape(G, S) if mask is not None else np.ones((G, S), dtype=bool)
    active = m.any(axis=1)
    if not active.any():
        return
    refs = memref_per_subgroup(wg, wg.get(inst.slots["tensor"]), mask, "the memref")
    if not any(wg.memory.spaces[r.buffer] == "local" for r in refs if r.buffer >= 0):
        return
    xs = uniform_per_subgroup(wg, wg.get(inst.slots["x"]), mask, "the row position")
    ys = uniform_per_subgroup(wg, wg.get(inst.slots["y"]), mask, "the column position")
    t = inst.results[0].type if kind in (READ, ATOMIC_READ) else inst.slots["value"].type
    trans = inst.modifier("ta")
    guarded = _GUARDED.get((trans, inst.modifier("checked")), ())
    first = np.argmax(m, axis=1)
    i, j = np.meshgrid(np.arange(t.rows), np.arange(t.cols), indexing="ij")
    for g in np.nonzero(active)[0]:
        ref = refs[g]
        if ref.buffer < 0 or wg.memory.spaces[ref.buffer] != "local":
            continue
        x, y = int(xs[g]), int(ys[g])
        rows, cols = (x + i, y + j) if trans == "n" else (x + j, y + i)
        valid = np.ones(i.shape, dtype=bool)
        for mode, idx in enumerate((rows, cols)):
            if mode in guarded:
                valid &= (idx >= 0) & (idx < ref.shape[mode])
        r, c = rows[valid], cols[valid]
        flat = ref.offset + r * ref.stride[0] + c * ref.stride[1]
        track(wg, ref.buffer, flat, np.full(flat.size, g * S + int(first[g])), kind, True,
              lambda k, r=r, c=c: f"[{int(r[k])}, {int(c[k])}]")


def after(wg, inst: Instruction, mask: Optional[np.ndarray]) -> None:
    """Checked mode, SPMD regions: bookkeeping after ``inst`` ran successfully."""
    if inst.opdef.family in _COOP_MEMORY:
        track_coop(wg, inst, mask)
