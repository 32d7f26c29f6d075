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

from typing import Dict

from ...diagnostics import CompileError
from ...ir.core import Instruction
from ...target import ExecConfig
from .ops import Scalar, Tile
from .translate import Rule, Translator, element_name, next_pow2, registrar, unsupported

RULES: Dict[str, Rule] = {}
_rule = registrar(RULES)


def exec_config(t: Translator, inst: Instruction) -> ExecConfig:
    """The function's subgroup and work-group sizes; an error naming `inst` without them."""
    try:
        return t.config()
    except CompileError as e:
        raise unsupported(inst, f"its sizes ({e.diagnostics[0][3]}) are") from None


@_rule("parallel")
def parallel(t: Translator, inst: Instruction) -> None:
    x, y = exec_config(t, inst).work_group_size
    t.lanes, t.active = next_pow2(x * y), None
    if t.lanes != x * y:
        t.active = t.compare("less_than", t.b.one("iota", Tile(Scalar("i32"), (t.lanes,))),
                             t.const("i32", x * y))
    try:
        t.region(inst.regions[0])
    finally:
        t.lanes, t.active = 0, None


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
        element_name(r.type, inst.loc, "if")
        a, b = t.per_lane(a), t.per_lane(b)
        t.values[r] = t.b.one("select", a.type, cond=cond, val_if_true=a, val_if_false=b)
