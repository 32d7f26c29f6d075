"""SPMD regions as tile operations over a tile of the work-group's work-items.

Inside ``parallel`` a value is either the same for every work-item (a rank-0 tile, as in
collective code) or one element per work-item: a tile of ``Translator.lanes`` elements,
the work-group's size rounded up to a power of two (Tile IR's tiles have power-of-two
extents).  Work-item ``w`` is element ``w``: its ``subgroup_local_id`` is ``w mod
subgroup_size`` and its ``subgroup_linear_id`` is ``w / subgroup_size``, as a work-group
of ``work_group_size[0] x work_group_size[1]`` numbers its subgroups (``.x`` first).
Arithmetic on such tiles is elementwise; rank-0 operands are broadcast
(``Translator.matched``).  Which work-items run is a mask (``Translator.active``: the
padding elements never run, a divergent ``if`` runs both branches, each under the mask
of its work-items, and selects the values it yields); loads and stores that differ per
work-item, or run under a mask, are gathers and scatters of the running work-items.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...diagnostics import CompileError
from ...ir.core import Instruction
from ...ir.types import CoopMatrixType
from ...target import ExecConfig
from . import races, uniformity
from .layout import bcast, both, iota, reshape, to_entries, uniform
from .ops import Scalar, Tile
from .tir import Value
from .translate import (Pair, Rule, Translator, component_name, element_name, is_complex, next_pow2,
                        registrar, unsupported)

RULES: Dict[str, Rule] = {}
_rule = registrar(RULES)


def exec_config(t: Translator, inst: Instruction) -> ExecConfig:
    """The function's subgroup and work-group sizes; an error naming `inst` without them."""
    try:
        return t.config()
    except CompileError as e:
        raise unsupported(inst, f"its sizes ({e.diagnostics[0][3]}) are") from None


def _work_items(t: Translator, inst: Instruction) -> Value:
    """Enter an SPMD region: the work-items' tile extent, and which of them exist."""
    x, y = exec_config(t, inst).work_group_size
    t.lanes = next_pow2(x * y)
    return t.compare("less_than", t.b.one("iota", Tile(Scalar("i32"), (t.lanes,))),
                     t.const("i32", x * y))


def _spmd(t: Translator, inst: Instruction, active: Optional[Value]) -> None:
    """The region of `inst` run by the work-items of mask `active`."""
    t.active = active
    try:
        t.region(inst.regions[0])
    finally:
        t.active = None


@_rule("parallel")
def parallel(t: Translator, inst: Instruction) -> None:
    exists = _work_items(t, inst)
    races.region(t)
    try:
        _spmd(t, inst, None if t.lanes == exec_config(t, inst).lanes else exists)
    finally:
        t.lanes = 0


@_rule("foreach", "foreach_tile")
def foreach(t: Translator, inst: Instruction) -> None:
    """A loop over the points (``foreach``: work-item by work-item) or the tiles
    (``foreach_tile``: subgroup by subgroup) of the iteration space, one of each per
    work-item or subgroup in a trip; point p is ``from + (p mod extents)`` mode by mode,
    the first mode fastest, as the reference interpreter numbers them."""
    config = exec_config(t, inst)
    exists = _work_items(t, inst)
    races.region(t)
    lows = [t.convert(t.tile_of(v), "i64") for v in inst.slots["from"]]
    highs = [t.convert(t.tile_of(v), "i64") for v in inst.slots["to"]]
    zero = t.const("i64", 0)
    tiles = inst.attrs.get("tile_shape") if inst.opcode == "foreach_tile" else [1] * len(lows)
    counts = []  # points or tiles along each mode
    for lo, hi, size in zip(lows, highs, tiles):
        span = t.binary("addi", t.binary("subi", hi, lo), t.const("i64", size - 1))
        counts.append(t.binary("maxi", t.binary("divi", span, t.const("i64", size), signedness="signed"),
                               zero, signedness="signed"))
    total = counts[0]
    for c in counts[1:]:
        total = t.binary("muli", total, c)
    iota = t.convert(t.b.one("iota", Tile(Scalar("i32"), (t.lanes,))), "i64")
    per_trip = config.lanes if inst.opcode == "foreach" else config.subgroups
    mine = iota if inst.opcode == "foreach" else t.binary(
        "divi", iota, t.const("i64", config.subgroup_size), signedness="signed")
    per = t.const("i64", per_trip)
    trips = t.binary("divi", t.binary("addi", total, t.const("i64", per_trip - 1)), per,
                     signedness="signed")
    region, n = inst.regions[0], len(lows)

    def trip(c: Value, _) -> List[Value]:
        races.point(t)
        rest = t.binary("addi", t.binary("muli", c, per), mine)
        active = t.binary("andi", exists, t.compare("less_than", rest, total))
        for k in range(n):
            first = t.binary("addi", lows[k], t.binary(
                "muli", t.binary("remi", rest, counts[k], signedness="signed"), t.const("i64", tiles[k])))
            rest = t.binary("divi", rest, counts[k], signedness="signed")
            element = t.tile_of(inst.slots["from"][k]).type.element.name
            t.values[region.args[k]] = t.convert(first, element)
            if inst.opcode == "foreach_tile":
                size = t.binary("mini", t.const("i64", tiles[k]), t.binary("subi", highs[k], first),
                                signedness="signed")
                t.values[region.args[n + k]] = t.convert(size, element)
        _spmd(t, inst, active)
        return []
    try:
        t.loop(trips, [], trip)
    finally:
        t.lanes = 0


@_rule("subgroup_local_id", "subgroup_linear_id", "subgroup_id")
def work_item(t: Translator, inst: Instruction) -> None:
    config = exec_config(t, inst)
    w = t.b.one("iota", Tile(Scalar("i32"), (t.lanes,)))
    size = t.const("i32", config.subgroup_size)
    if inst.opcode == "subgroup_local_id":
        t.values[inst.results[0]] = t.binary("remi", w, size, signedness="signed")
        return
    linear = t.binary("divi", w, size, signedness="signed")
    if inst.opcode == "subgroup_id":
        across = t.const("i32", config.work_group_size[0] // config.subgroup_size)
        linear = t.binary("remi" if inst.modifier("dim") == "x" else "divi", linear, across,
                          signedness="signed")
    t.values[inst.results[0]] = linear


def masked_if(t: Translator, inst: Instruction) -> None:
    """Both branches, each under the mask of the work-items whose condition selects it;
    the values yielded are selected by the condition."""
    cond = t.per_lane(t.tile_of(inst.slots["condition"]))
    outer = t.active
    not_cond = t.binary("xori", cond, t.const("i1", 1))
    yielded = []
    for k, mask in enumerate((cond, not_cond)):
        t.active = mask if outer is None else t.binary("andi", outer, mask)
        t.yielded = []
        if k < len(inst.regions):
            t.region(inst.regions[k])
        yielded.append(t.yielded)
    t.active = outer
    for r, a, b in zip(inst.results, *yielded):
        component_name(r.type, inst.loc, "if")
        t.values[r] = merge(t, r.type, cond, a, b)


def merge(t: Translator, type, mask: Value, a: Value, b: Value) -> Value:
    """`a` where the work-items of `mask` run, else `b`; a coopmatrix entry by entry,
    each as the work-item holding it runs."""
    if isinstance(type, CoopMatrixType) and not t.items:
        mask = to_entries(t, type, mask)
    return t.select(mask, t.per_lane(a), t.per_lane(b))


def divergent_for(t: Translator, inst: Instruction, lower: Value, upper: Value,
                  step: Optional[Value], inits: List[Value]) -> List[Value]:
    """A ``for`` whose bounds differ between work-items: work-item w makes ``trips[w] =
    ceil((upper - lower) / step)`` trips (at least 0; the step is positive, as the
    language requires), so a Tile IR ``for`` runs the largest count of the running
    work-items, and trip k runs those with ``k < trips``, keeping the others' values."""
    element = lower.type.element.name
    step = step if step is not None else t.const(element, 1)
    lower, upper, step = (t.per_lane(v) for v in (lower, upper, step))
    zero = t.const(element, 0)
    ceil = t.binary("addi", t.binary("subi", upper, lower), t.binary("subi", step, t.const(element, 1)))
    trips = t.binary("maxi", t.binary("divi", ceil, step, signedness="signed"), zero, signedness="signed")
    running = trips if t.active is None else t.select(t.active, trips, zero)
    count = t.along("reduce", running, 0,
                    lambda a, b: t.binary("maxi", a, b, signedness="signed"), 0)
    region, outer = inst.regions[0], t.active

    def trip(k: Value, carried: List[Value]) -> List[Value]:
        k = t.per_lane(k)
        inside = t.compare("less_than", k, trips)
        t.active = inside if outer is None else t.binary("andi", outer, inside)
        t.values[region.args[0]] = t.binary("addi", lower, t.binary("muli", k, step))
        for arg, v in zip(region.args[1:], carried):
            t.values[arg] = v
        t.yielded = []
        t.region(region)
        out = [merge(t, r.type, t.active, v, c) for r, v, c in zip(inst.results, t.yielded, carried)]
        t.active = outer
        return out
    return t.loop(count, inits, trip)


COMBINE = {"add": ("addf", "addi"), "max": ("maxf", "maxi"), "min": ("minf", "mini")}


def identity_of(op: str, element: Scalar):
    if op == "add":
        return 0.0 if element.is_float else 0
    if element.is_float:
        return float("-inf") if op == "max" else float("inf")
    bound = 1 << (element.bits - 1)
    return -bound if op == "max" else bound - 1


def _over_subgroups(t: Translator, inst: Instruction, x: Value, name: str, identity,
                    kind: str) -> Value:
    """The reduction (``reduce``) or the inclusive or exclusive scan (``inclusive_scan``,
    ``exclusive_scan``) by `name` of per-work-item `x` over each subgroup, in
    subgroup-local id order, given to its work-items.  An exclusive scan combines, for
    work-item i, the values of the work-items j < i (a mask over a subgroup x subgroup
    tile, then a reduction)."""
    if t.items:
        raise unsupported(inst, "subgroup operations in the region of cooperative_matrix_apply are")
    size = exec_config(t, inst).subgroup_size
    element, groups = x.type.element, t.lanes // size
    signed = {"signedness": "signed"} if name in ("maxi", "mini") else {}
    combine = lambda a, b: t.binary(name, a, b, **signed)  # noqa: E731
    grid = reshape(t, x, (groups, size))
    if kind == "exclusive_scan":
        square = (groups, size, size)
        before = both(t, "cmpi", iota(t, size, 3, 2), iota(t, size, 3, 1),
                      comparison_predicate="less_than", signedness="signed")
        terms = t.select(bcast(t, before, square), bcast(t, reshape(t, grid, (groups, 1, size)), square),
                         t.const(element.name, identity))
        out = t.along("reduce", terms, 2, combine, identity)
    else:
        out = t.along("scan" if kind == "inclusive_scan" else "reduce", grid, 1, combine, identity)
    if kind == "reduce":
        out = bcast(t, reshape(t, out, (groups, 1)), grid.type.shape)
    return reshape(t, out, x.type.shape)


_KINDS = ("inclusive_scan", "exclusive_scan", "reduce")


@_rule(*(f"subgroup_{k}_{op}" for k in _KINDS for op in COMBINE))
def subgroup_operation(t: Translator, inst: Instruction) -> None:
    """Formed in the accumulation type (f32 for 16-bit floats); work-items that do not
    run contribute the identity, as in the reference interpreter.  A complex sum is the
    sums of the parts."""
    rt = inst.results[0].type
    kind, op = inst.opcode[len("subgroup_"):].rsplit("_", 1)
    x = t.per_lane(t.tile_of(inst.slots["a"]))
    if is_complex(rt):
        part = component_name(rt, inst.loc, inst.opcode)
        t.values[inst.results[0]] = Pair(*(_subgroup(t, inst, p, part, kind, op) for p in x))
        return
    element = element_name(rt, inst.loc, inst.opcode)
    if element == "i1":
        raise unsupported(inst, "bool operands are")
    t.values[inst.results[0]] = _subgroup(t, inst, x, element, kind, op)


def _subgroup(t: Translator, inst: Instruction, x: Value, element: str, kind: str, op: str) -> Value:
    acc = Scalar("f32" if element in ("f16", "bf16") else element)
    identity = identity_of(op, acc)
    x = t.convert(x, acc.name)
    if t.active is not None:
        x = t.select(t.active, x, t.const(acc.name, identity))
    name = COMBINE[op][0 if acc.is_float else 1]
    return t.convert(_over_subgroups(t, inst, x, name, identity, kind), element)


@_rule("subgroup_broadcast")
def subgroup_broadcast(t: Translator, inst: Instruction) -> None:
    """The sum over the subgroup of the value of work-item `lane` and the identity
    (-0.0, 0 or false) of every other (of each part of a complex number)."""
    x = t.per_lane(t.tile_of(inst.slots["a"]))
    size = exec_config(t, inst).subgroup_size
    lane = t.convert(t.tile_of(inst.slots["lane"]), "i32")
    if t.checks:
        uniformity.broadcast_lane(t, lane)
    if lane.type.shape:  # dynamically uniform: the subgroup's first running work-item's
        lane = reshape(t, bcast(t, reshape(t, uniform(t, lane, partial=True), (t.lanes // size, 1)),
                                (t.lanes // size, size)), (t.lanes,))
    local = t.binary("remi", t.b.one("iota", Tile(Scalar("i32"), (t.lanes,))),
                     t.const("i32", size), signedness="signed")
    chosen = t.compare("equal", local, lane)

    def broadcast(x: Value) -> Value:
        element = x.type.element
        identity = -0.0 if element.is_float else 0
        x = t.select(chosen, x, t.const(element.name, identity))
        name = "addf" if element.is_float else "ori" if element.name == "i1" else "addi"
        return _over_subgroups(t, inst, x, name, identity, "reduce")
    t.values[inst.results[0]] = Pair(*map(broadcast, x)) if isinstance(x, Pair) else broadcast(x)
