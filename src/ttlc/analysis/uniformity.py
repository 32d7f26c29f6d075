"""Uniformity: which values may differ between the work-items of a work-group, and
which are the same in every work-group (``same_in_every_group``).

A back end that runs the work-items of a work-group together (the CPU back end: as the
lanes of SIMD vectors) decides before generating code which values vary per work-item,
so that loop-carried values and the results of ``if`` get one representation on every
path.  Everything outside a ``parallel`` region is uniform; inside one, the work-item
ids, atomic updates and subgroup operations vary, and so does everything computed from
a varying value, carried around a loop with varying bounds or chosen by a varying
condition.
"""
from __future__ import annotations

from typing import Dict, Iterable, Optional, Set

from ..ir.core import Function, Region, Value
from ..ir.ops import ATOMIC_UPDATES, SUBGROUP_OPS

VARYING_BUILTINS = ("subgroup_id", "subgroup_linear_id", "subgroup_local_id")


def varies_by_itself(opcode: str) -> bool:
    """Whether an instruction's results may differ between work-items whatever its
    operands: the work-item ids, atomic updates and subgroup operations."""
    return (opcode in VARYING_BUILTINS or opcode in ATOMIC_UPDATES or opcode in SUBGROUP_OPS
            or opcode == "subgroup_broadcast")


def analyze_varying(func: Function) -> Set[Value]:
    """Values that may differ between the work-items of a work-group (a fixed point)."""
    varying: Set[Value] = set()
    changed = True

    def mark(v: Value) -> None:
        nonlocal changed
        if v not in varying:
            varying.add(v)
            changed = True

    def yielded(region: Region, k: int) -> Optional[Value]:
        if region.instructions and region.instructions[-1].opcode == "yield":
            vals = region.instructions[-1].slots["values"]
            return vals[k] if k < len(vals) else None
        return None

    def visit(region: Region, spmd: bool) -> None:
        for inst in region.instructions:
            op = inst.opcode
            if op == "parallel":
                visit(inst.regions[0], True)
                continue
            if not spmd:
                for r in inst.regions:
                    visit(r, False)
                continue
            if op == "for":
                body = inst.regions[0]
                bounds = any(inst.slots.get(k) in varying for k in ("from", "to", "step"))
                if bounds:
                    mark(body.args[0])
                for k, (arg, res) in enumerate(zip(body.args[1:], inst.results)):
                    if bounds or inst.slots["init"][k] in varying or yielded(body, k) in varying:
                        mark(arg)
                        mark(res)
                visit(body, True)
            elif op == "if":
                cond = inst.slots["condition"] in varying
                for r in inst.regions:
                    visit(r, True)
                for k, res in enumerate(inst.results):
                    if cond or any(yielded(r, k) in varying for r in inst.regions):
                        mark(res)
            elif op == "cooperative_matrix_apply":  # row, column and value vary per work-item
                for a in inst.regions[0].args:
                    mark(a)
                for r in inst.results:
                    mark(r)
                visit(inst.regions[0], True)
            elif varies_by_itself(op):
                for r in inst.results:
                    mark(r)
            elif any(v in varying for v in inst.operands):
                for r in inst.results:
                    mark(r)

    while changed:
        changed = False
        visit(func.body, False)
    return varying


def same_in_every_group(value: Value, params: Iterable[Value]) -> bool:
    """Whether `value` is provably the same in every work-group and every time its
    instruction runs: computed from the function's parameters (`params`) and constants
    alone, through instructions without regions (a load's result too: the same memory at
    the same place).  Conservative: group and work-item ids, region arguments (loop
    variables), results of ``for`` and ``if``, atomics and subgroup operations are not.
    A memref that is not is a different matrix in each work-group (a batch's member):
    lower-linalg reads such a matrix in the order of its addresses where that matters
    (``matmul.dot_columns``)."""
    fixed = set(params)
    memo: Dict[Value, bool] = {}

    def same(v: Value) -> bool:
        if v in fixed:
            return True
        if v in memo:
            return memo[v]
        inst = v.owner
        memo[v] = False  # (SSA has no cycles outside regions; a guard all the same)
        ok = (inst is not None and not inst.regions and inst.opcode != "group_id"
              and not varies_by_itself(inst.opcode) and all(same(x) for x in inst.operands))
        memo[v] = ok
        return ok

    return same(value)
