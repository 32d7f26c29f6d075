"""The reference interpreter: the executable semantics of the language.

One work-group at a time.  Collective regions run once per work-group with uniform
values.  SPMD regions run all work-items of the work-group at once as NumPy lanes:
a varying value is an array of shape (W,), W the work-group size, and divergent
control flow runs under a lane mask.  A coopmatrix is an array of shape
(subgroups, rows, cols), one whole matrix per subgroup; work-item views of it
(extract, insert, apply) go through the layout of ``ttlc.ir.layout``.

Semantics of single instructions live in ``ttlc.interp.semantics`` as one table
keyed by opcode; this module holds control flow, memory and the launch.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..diagnostics import KernelError
from ..ir.core import Function, Instruction, Region, Value
from ..ir.types import CoopMatrixType, MemrefType
from ..runtime.values import GroupValue, Memory, MemRef, OutOfBounds, dtype_of
from ..target import ExecConfig
from . import checks


@functools.lru_cache(maxsize=64)
def _lane_ids(subgroup_size: int, work_group_size: Tuple[int, int]):
    """Per-lane ids of a work-group shape, computed once per shape (read-only arrays)."""
    W, S = work_group_size[0] * work_group_size[1], subgroup_size
    lane = np.arange(W)
    lane_x, lane_y = lane % work_group_size[0], lane // work_group_size[0]
    ids = (lane_x, lane_y, (lane_x % S).astype(np.int32), (lane_x // S).astype(np.int32),
           lane_y.astype(np.int32), (lane // S).astype(np.int32), np.ones(W, dtype=bool))
    for a in ids:
        a.flags.writeable = False
    return ids


class WorkGroup:
    """Executes a function body for one work-group."""

    def __init__(self, func: Function, memory: Memory, config: ExecConfig, group_id, num_groups,
                 checked: bool, kernel_name: str, source_name: str):
        self.func = func
        self.memory = memory
        self.cfg = config
        self.group_id = group_id
        self.num_groups = num_groups
        self.checked = checked
        self.kernel_name = kernel_name
        self.source_name = source_name
        self.env: Dict[Value, Any] = {}
        (self.lane_x, self.lane_y, self.local_id, self.sg_x, self.sg_y, self.sg_linear,
         self.all_lanes) = _lane_ids(config.subgroup_size, config.work_group_size)
        self.current: Optional[Instruction] = None
        # checked mode: local-memory race tracking (checks.py), names and ends of allocas
        self.races = checks.RaceTracker() if checked else None
        self.actor_base = 0  # foreach: chunk * lanes, so chunks count as other work-items
        self.local_names: Dict[int, str] = {}
        self.ended: Dict[int, str] = {}

    # ---- errors ----------------------------------------------------------------------
    def fail(self, message: str, lane: Optional[int] = None) -> KernelError:
        inst = self.current
        where = f"{self.source_name}:{inst.loc}" if inst is not None else self.source_name
        item = ""
        if lane is not None:
            item = f", work-item ({int(self.lane_x[lane])}, {int(self.lane_y[lane])})"
        return KernelError(f"{where}: kernel @{self.kernel_name}, group {tuple(self.group_id)}"
                           f"{item}: {message}")

    # ---- values ----------------------------------------------------------------------
    def get(self, v: Value):
        return self.env[v]

    def lanes(self, x) -> np.ndarray:
        """A scalar value as one entry per work-item."""
        return np.broadcast_to(x, (self.cfg.lanes,)) if np.ndim(x) == 0 else x

    def subgroup_mask(self, mask: np.ndarray) -> np.ndarray:
        return mask.reshape(self.cfg.subgroups, self.cfg.subgroup_size).any(axis=1)

    def select(self, t, mask: np.ndarray, a, b):
        """Per work-item choice between two values of type t (coopmatrix: per entry, by
        the work-item holding it in the layout of ``ttlc.ir.layout``)."""
        if isinstance(t, CoopMatrixType):
            from .coop import owner_mask

            m = owner_mask(self, t, mask)
            shape = (self.cfg.subgroups, t.rows, t.cols)
            return np.where(m, np.broadcast_to(a, shape), np.broadcast_to(b, shape))
        if isinstance(a, (MemRef, GroupValue)) or isinstance(b, (MemRef, GroupValue)):
            raise self.fail("memrefs cannot be merged across divergent control flow")
        return np.where(mask, self.lanes(a), self.lanes(b))

    # ---- execution -------------------------------------------------------------------
    def run(self, args: Sequence[Any]) -> None:
        for a, value in zip(self.func.args, args):
            self.env[a.value] = value
        self.exec_region(self.func.body, None)

    def exec_region(self, region: Region, mask: Optional[np.ndarray]) -> Optional[List[Any]]:
        """Run a region; returns the yielded values, if it ends with yield."""
        from .table import SEMANTICS

        allocas = []
        result = None
        for inst in region.instructions:
            self.current = inst
            if inst.opcode == "yield":
                result = [self.get(v) for v in inst.slots["values"]]
                break
            handler = CONTROL.get(inst.opcode) or SEMANTICS[inst.opcode]
            try:
                out = handler(self, inst, mask)
            except OutOfBounds as e:
                raise self.fail(f"out-of-bounds memory access: {e}") from None
            except ValueError as e:  # NumPy refuses to write a read-only argument array
                if "read-only" not in str(e):
                    raise
                raise self.fail("write to a read-only array (the argument's memory is not "
                                "writeable)") from None
            if inst.opcode == "alloca":
                allocas.append(out)
                if inst.results[0].name is not None:
                    self.local_names[int(out.buffer)] = f"%{inst.results[0].name}"
            elif self.checked and mask is not None:
                checks.after(self, inst, mask)
            if inst.results:
                if len(inst.results) == 1 and inst.opcode not in ("for", "if"):
                    out = [out]
                for r, v in zip(inst.results, out):
                    self.env[r] = v
        for m in allocas:  # the block ends: local memory is released
            self.memory.free(int(m.buffer))
        return result


# ---- control flow -------------------------------------------------------------------------
def _for(wg: WorkGroup, inst: Instruction, mask):
    body = inst.regions[0]
    loop_var, iter_args = body.args[0], body.args[1:]
    lo, hi = wg.get(inst.slots["from"]), wg.get(inst.slots["to"])
    step = wg.get(inst.slots["step"]) if "step" in inst.slots else np.array(1, lo.dtype)[()]
    values = [wg.get(v) for v in inst.slots.get("init", [])]
    types = [r.type for r in inst.results]
    varying = mask is not None and any(np.ndim(x) for x in (lo, hi, step))
    if not varying:
        i = lo
        while i < hi:
            if wg.checked and step <= 0:
                raise wg.fail(f"for loop with step {step} never ends")
            wg.env[loop_var] = i
            for a, v in zip(iter_args, values):
                wg.env[a] = v
            out = wg.exec_region(body, mask)
            if iter_args:
                values = out
            i = np.asarray(i + step).astype(lo.dtype)[()]
        return values
    i = wg.lanes(lo).copy()
    hi, step = wg.lanes(hi), wg.lanes(step)
    while True:
        active = mask & (i < hi)
        if not active.any():
            return values
        if wg.checked and (step[active] <= 0).any():
            lane = int(np.argmax(active & (step <= 0)))
            raise wg.fail(f"for loop with step {step[lane]} never ends", lane)
        wg.env[loop_var] = i
        for a, v in zip(iter_args, values):
            wg.env[a] = v
        out = wg.exec_region(body, active)
        if iter_args:
            values = [wg.select(t, active, new, old) for t, new, old in zip(types, out, values)]
        i = np.where(active, i + step, i).astype(i.dtype)


def _if(wg: WorkGroup, inst: Instruction, mask):
    cond = wg.get(inst.slots["condition"])
    then_r = inst.regions[0]
    else_r = inst.regions[1] if len(inst.regions) > 1 else None
    if mask is None or np.ndim(cond) == 0:
        taken = bool(cond)
        if mask is not None and not mask.any():
            taken = True  # nothing active: any branch yields ignored values
        region = then_r if taken else else_r
        if region is None:
            return []
        out = wg.exec_region(region, mask)
        return out or []
    then_mask, else_mask = mask & cond, mask & ~cond
    then_out = wg.exec_region(then_r, then_mask) if then_mask.any() or inst.results else None
    else_out = None
    if else_r is not None and (else_mask.any() or inst.results):
        else_out = wg.exec_region(else_r, else_mask)
    if not inst.results:
        return []
    return [wg.select(r.type, cond, a, b) for r, a, b in zip(inst.results, then_out, else_out)]


def _parallel(wg: WorkGroup, inst: Instruction, mask):
    checks.region_boundary(wg)
    wg.exec_region(inst.regions[0], wg.all_lanes.copy())
    checks.region_boundary(wg)


def _foreach(wg: WorkGroup, inst: Instruction, mask):
    body = inst.regions[0]
    lows = [int(wg.get(v)) for v in inst.slots["from"]]
    highs = [int(wg.get(v)) for v in inst.slots["to"]]
    types = [dtype_of(v.type) for v in inst.slots["from"]]
    n = len(lows)
    checks.region_boundary(wg)
    try:
        _foreach_chunks(wg, inst, body, lows, highs, types, n)
    finally:
        wg.actor_base = 0
    checks.region_boundary(wg)


def _foreach_chunks(wg: WorkGroup, inst: Instruction, body, lows, highs, types, n):
    if inst.opcode == "foreach":
        extents = [max(0, h - lo) for lo, h in zip(lows, highs)]
        total = math.prod(extents)
        W = wg.cfg.lanes
        for start in range(0, total, W):
            point = np.arange(start, start + W)
            active = point < total
            rest = np.where(active, point, 0)
            wg.actor_base = start
            for k in range(n):
                wg.env[body.args[k]] = (lows[k] + rest % extents[k]).astype(types[k])
                rest = rest // extents[k]
            wg.exec_region(body, active)
        return None
    tiles = inst.attrs["tile_shape"]
    counts = [max(0, -(-(h - lo) // t)) for lo, h, t in zip(lows, highs, tiles)]
    total = math.prod(counts)
    S, G = wg.cfg.subgroup_size, wg.cfg.subgroups
    sub = wg.sg_linear.astype(np.int64)
    for start in range(0, total, G):
        tile = start + sub
        wg.actor_base = start // G * wg.cfg.lanes
        active = tile < total
        rest = np.where(active, tile, 0)
        for k in range(n):
            var = lows[k] + (rest % counts[k]) * tiles[k]
            rest = rest // counts[k]
            wg.env[body.args[k]] = var.astype(types[k])
            wg.env[body.args[n + k]] = np.minimum(tiles[k], highs[k] - var).astype(types[k])
        wg.exec_region(body, active)
    return None


CONTROL = {"for": _for, "if": _if, "parallel": _parallel, "foreach": _foreach,
           "foreach_tile": _foreach}
