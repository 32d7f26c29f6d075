"""Checked Tile IR: what the language requires of the work-items of a subgroup.

In an SPMD region the work-items are the elements of a tile (``spmd``), so a subgroup is
a row of that tile reshaped to (subgroups x subgroup size), and what the interpreter
asks of a subgroup is a reduction along the row:

* a coopmatrix instruction (``findings.WHOLE_SUBGROUP``) is reached by all work-items
  of a subgroup or by none (E_PARTIAL, naming the first that does not run);
* an operand the spec requires to be dynamically uniform (``findings.UNIFORM_SLOTS``:
  positions, memrefs, a construct's number, a scale's scalar, a broadcast's lane) has
  the value of the subgroup's first running work-item in every running work-item
  (E_UNIFORM, naming the first that differs and both values);
* ``subgroup_broadcast`` reads a lane inside the subgroup that runs (E_BROADCAST,
  reported by the subgroup's first running work-item).

The tests run in the interpreter's order: E_PARTIAL, then the operands in the table's
order (a memref's address, sizes, strides), then the instruction's own.  Outside SPMD
regions every value is one tile block's, hence uniform: nothing is tested.
"""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from ...runtime.findings import (E_BROADCAST, E_PARTIAL, E_UNIFORM, UNIFORM_OPERANDS, UNIFORM_SLOTS,
                                 WHOLE_SUBGROUP)
from . import checks
from .layout import bcast, equal, first_active, first_running, iota, pick, reshape, subgroups
from .ops import Ptr, Scalar, Tile
from .tir import Value
from .translate import Memref, Pair, Rule, Translator

I32, I64 = Scalar("i32"), Scalar("i64")


def _spmd(t: Translator) -> bool:
    """Whether the code being translated is a subgroup's (not collective, not the
    region of a ``cooperative_matrix_apply``, whose work-items are its matrix's)."""
    return bool(t.checks) and bool(t.lanes) and t.items is None


def _running(t: Translator) -> Value:
    """Which work-items run, as (subgroups x subgroup size)."""
    active = t.active if t.active is not None else t.const("i1", True, (t.lanes,))
    return subgroups(t, active)


def _reduce(t: Translator, x: Value, name: str, identity) -> Value:
    """`x` (G x S) combined by `name` over each subgroup: a tile (G,)."""
    signed = {"signedness": "signed"} if name == "mini" else {}
    return t.along("reduce", x, 1, lambda a, b: t.binary(name, a, b, **signed), identity)


def _index(t: Translator, G: int) -> Value:
    """The subgroups' numbers, 0 to G - 1."""
    return t.b.one("iota", Tile(I32, (G,)))


def _not(t: Translator, x: Value) -> Value:
    return t.binary("xori", x, t.const("i1", True, x.type.shape))


def _who(t: Translator, lane: Value) -> Callable[[Value], Value]:
    """The work-item a finding of subgroup k names: ``k * S + lane[k]`` (an i32)."""
    S = t.config().subgroup_size

    def item(k: Value) -> Value:
        one = t.b.one("extract", Tile(I32, (1,)), source=lane, indices=[k])
        return t.binary("addi", t.binary("muli", k, t.const("i32", S)),
                        t.b.one("reshape", Tile(I32), source=one))
    return item


def whole_subgroup(t: Translator) -> None:
    """E_PARTIAL: a subgroup of which some work-items run and some do not, naming its
    first that does not (as the interpreter's ``coop_subgroups``)."""
    if not _spmd(t) or t.active is None:
        return
    m = _running(t)
    G, S = m.type.shape
    some = _reduce(t, m, "ori", False)
    every = _reduce(t, m, "andi", True)
    partial = t.binary("andi", some, _not(t, every))
    lanes = bcast(t, iota(t, S, 2, 1), (G, S))
    idle = _reduce(t, t.select(m, t.const("i32", S - 1, (G, S)), lanes), "mini", S - 1)
    checks.fail_if(t, partial, E_PARTIAL, [t.convert(_index(t, G), "i64")], item=_who(t, idle))


def _comparable(t: Translator, v: Value):
    """`v` as i64 bits for the record, and how many bytes of a float they hold (0: an
    integer or address; a bf16 as the f32 of its value, the record's floats being IEEE)."""
    element = v.type.element
    if isinstance(element, Ptr):
        return t.b.one("ptr_to_int", Tile(I64, v.type.shape), source=v), 0
    if element.name == "bf16":
        return _comparable(t, t.convert(v, "f32"))
    if element.is_float:
        bits = t.b.one("bitcast", Tile(Scalar(f"i{element.bits}"), v.type.shape), source=v)
        return t.convert(bits, "i64"), element.bits // 8
    return t.convert(v, "i64"), 0


def _same(t: Translator, a: Value, b: Value) -> Value:
    """Float equality as the interpreter tests it: by value, NaN equal to NaN."""
    nan = lambda x: t.compare("not_equal", x, x)  # noqa: E731
    return t.binary("ori", t.compare("equal", a, b), t.binary("andi", nan(a), nan(b)))


def uniform(t: Translator, v: Value, what: str) -> None:
    """E_UNIFORM: the first running work-item whose value of an operand differs from its
    subgroup's first running one's, with both values (a value of one per tile block is
    uniform)."""
    if not _spmd(t) or not v.type.shape:
        return
    m = _running(t)
    G, S = m.type.shape
    across = lambda x: bcast(t, reshape(t, x, (G, 1)), (G, S))  # noqa: E731  (G,) -> G x S
    bits, float_bytes = _comparable(t, v)
    first = first_running(t, bits)
    if float_bytes:
        same = _same(t, subgroups(t, v), across(first_running(t, v)))
    else:
        same = t.compare("equal", subgroups(t, bits), across(first))
    differ = t.binary("andi", m, _not(t, same))
    flat = lambda x: reshape(t, across(x), (t.lanes,))  # noqa: E731
    checks.fail_if(t, reshape(t, differ, (t.lanes,)), E_UNIFORM,
                   [UNIFORM_OPERANDS.index(what), bits, flat(first), flat(t.convert(first_active(t), "i64")),
                    flat(t.convert(_index(t, G), "i64")), float_bytes])


def uniform_operand(t: Translator, x, what: str) -> None:
    """``uniform`` of an operand's every part: a memref's address, sizes and strides,
    a complex number's parts."""
    if isinstance(x, Memref):
        parts = [x.ptr, *x.shape, *x.strides]
    elif isinstance(x, Pair):
        parts = list(x)
    else:
        parts = [x]
    for p in parts:
        if isinstance(p, Value):
            uniform(t, p, what)


def broadcast_lane(t: Translator, lane: Value) -> None:
    """E_BROADCAST: a running subgroup's (uniform) `lane` (an i32, rank 0 or one per
    work-item) outside the subgroup or of a work-item that does not run."""
    if not _spmd(t):
        return
    m = _running(t)
    G, S = m.type.shape
    lane = first_running(t, lane) if lane.type.shape else t.splat(lane, (G,))
    outside = t.binary("ori", t.compare("less_than", lane, t.const("i32", 0)),
                       t.compare("greater_than_or_equal", lane, t.const("i32", S)))
    chosen = equal(t, iota(t, S, 2, 1), reshape(t, lane, (G, 1)))
    source_runs = pick(t, chosen, m, [1])
    runs = _reduce(t, m, "ori", False)
    idle = _not(t, source_runs)
    bad = t.binary("andi", runs, t.binary("ori", outside, idle))
    kind = t.select(outside, t.const("i64", 0, (G,)), t.const("i64", 1, (G,)))
    checks.fail_if(t, bad, E_BROADCAST, [kind, t.convert(lane, "i64"), S], item=_who(t, first_active(t)))


def checked_rules(rules: Dict[str, Rule]) -> Dict[str, Rule]:
    """`rules` with those of the instructions ``WHOLE_SUBGROUP`` and ``UNIFORM_SLOTS``
    name first testing them in checked code (unchecked code is what the rule emits)."""
    def wrap(rule: Rule, whole: bool, slots) -> Rule:
        def run(t: Translator, inst: Instruction) -> None:
            if t.checks:
                if whole:
                    whole_subgroup(t)
                for slot, what in slots:
                    v = inst.slots[slot]
                    uniform_operand(t, t.memref(v) if slot == "tensor" else t.tile_of(v), what)
            rule(t, inst)
        return run
    out = dict(rules)
    for op in set(WHOLE_SUBGROUP) | set(UNIFORM_SLOTS):
        if op in rules:
            out[op] = wrap(rules[op], op in WHOLE_SUBGROUP,
                           WHOLE_SUBGROUP.get(op, ()) + UNIFORM_SLOTS.get(op, ()))
    return out
