"""Atomic element instructions: ``atomic_load`` and ``atomic_store`` as gathers and
scatters with a memory ordering and scope, ``atomic_add/max/min`` as ``atomic_rmw_tko``.

In an SPMD region every running work-item makes its own access, in work-item order
where several touch one element (as the reference interpreter does them); in
collective code the instruction is made once.  Tile IR's read-modify-write modes are
``add`` (i32, i64), ``addf`` (f16, f32, f64), signed and unsigned ``max``/``min`` (i32,
i64): a float maximum is a signed integer maximum of the bits where the value is not
negative (the bits of such floats order as the floats do, and above every negative
one) and an unsigned minimum of the bits where it is (negative floats order the other
way round, and unsigned above every positive one); a minimum the mirror image.  A
complex number is updated part by part (the language allows this pseudo-atomicity).
Other element types are a CompileError naming the instruction.
"""
from __future__ import annotations

from typing import Dict, Tuple

from ...ir.core import Instruction
from . import checks, races
from .ops import TOKEN, Ptr, Scalar, Tile
from .tir import Value
from .translate import Pair, Rule, Translator, component_name, registrar, unsupported

RULES: Dict[str, Rule] = {}
_rule = registrar(RULES)

#: the language's memory scopes in Tile IR
_SCOPE = {"subgroup": "tl_blk", "work_group": "tl_blk", "device": "device", "cross_device": "sys"}
#: the language's memory semantics for loads, stores and updates (Tile IR's strongest
#: ordering stands for sequential consistency; a load cannot release, a store acquire)
_ORDER = {"relaxed": ("relaxed",) * 3, "acquire": ("acquire", "relaxed", "acquire"),
          "release": ("relaxed", "release", "release"),
          "acquire_release": ("acquire", "release", "acq_rel"),
          "sequentially_consistent": ("acquire", "release", "acq_rel")}


def ordering(inst: Instruction, kind: int) -> Tuple[str, str]:
    """(memory ordering, memory scope) of a load (kind 0), store (1) or update (2)."""
    return (_ORDER[inst.modifier("semantics") or "relaxed"][kind],
            _SCOPE[inst.modifier("scope") or "work_group"])


def _pointers(t: Translator, inst: Instruction):
    """The element's pointer (one per work-item in an SPMD region), whether the memref
    holds complex numbers, and the mask of the work-items that run."""
    m = t.memref(inst.slots["tensor"])
    index = [t.convert(t.tile_of(v), "i64") for v in inst.slots["index"]]
    inside = checks.check_access(t, m, index) if t.checks else None
    ptr = t.element_ptr(m, index)
    races.element(t, inst, ptr, inside, index)
    if t.lanes:
        ptr = t.per_lane(ptr)
    return ptr, m.complex, t.access_mask(ptr, inside) if t.checks else t.active if t.lanes else None


def _parts(ptr: Value, pair: bool, t: Translator):
    return [ptr, t.offset(ptr, 1)] if pair else [ptr]


@_rule("atomic_load")
def atomic_load(t: Translator, inst: Instruction) -> None:
    ptr, pair, mask = _pointers(t, inst)
    order, scope = ordering(inst, 0)
    values = []
    for p in _parts(ptr, pair, t):
        v, t.token = t.b.op("load_ptr_tko", [Tile(p.type.element.pointee, p.type.shape), TOKEN],
                            source=p, mask=mask, token=t.token,
                            memory_ordering_semantics=order, memory_scope=scope)
        values.append(v)
    t.values[inst.results[0]] = Pair(*values) if pair else values[0]


@_rule("atomic_store")
def atomic_store(t: Translator, inst: Instruction) -> None:
    ptr, pair, mask = _pointers(t, inst)
    order, scope = ordering(inst, 1)
    value = t.tile_of(inst.slots["value"])
    for p, v in zip(_parts(ptr, pair, t), value if pair else [value]):
        v = t.per_lane(v) if t.lanes else v
        t.token = t.b.one("store_ptr_tko", TOKEN, destination=p, value=v, mask=mask, token=t.token,
                          memory_ordering_semantics=order, memory_scope=scope)


def _rmw(t: Translator, inst: Instruction, ptr: Value, value: Value, mode: str, mask) -> Value:
    order, scope = ordering(inst, 2)
    old, t.token = t.b.op("atomic_rmw_tko", [value.type, TOKEN], pointers=ptr, arg=value,
                          mask=mask, token=t.token, memory_ordering_semantics=order,
                          memory_scope=scope, mode=mode)
    return old


def _float_extremum(t: Translator, inst: Instruction, ptr: Value, value: Value, op: str,
                    mask) -> Value:
    """A float max or min as integer ones on the bits (see the module's docstring)."""
    element = value.type.element
    bits = Scalar(f"i{element.bits}")
    as_int = t.b.one("bitcast", Tile(bits, value.type.shape), source=value)
    int_ptr = t.b.one("ptr_to_ptr", Tile(Ptr(bits), ptr.type.shape), source=ptr)
    negative = t.compare("less_than", as_int, t.const(bits.name, 0))
    positive = t.binary("xori", negative, t.const("i1", 1))
    modes = ("max", "umin") if op == "max" else ("min", "umax")
    olds = []
    for mode, where in zip(modes, (positive, negative)):
        m = where if mask is None else t.binary("andi", mask, where)
        olds.append(_rmw(t, inst, int_ptr, as_int, mode, m))
    old = t.select(positive, olds[0], olds[1])
    return t.b.one("bitcast", value.type, source=old)


def update(t: Translator, inst: Instruction, ptrs, value, mask):
    """The update of `inst` (``..._add``, ``_max``, ``_min``) of the elements at
    `ptrs` (one pointer tile, or one per part of complex values) by `value`; the previous
    values."""
    op = inst.opcode.rsplit("_", 1)[1]
    element = component_name(inst.slots["value"].type, inst.loc, inst.opcode)
    is_float = Scalar(element).is_float
    if element not in (("f16", "f32", "f64") if is_float and op == "add" else
                       ("f32", "f64") if is_float else ("i32", "i64")):
        raise unsupported(inst, f"atomic updates of {element} are")
    olds = []
    for p, v in zip(ptrs, value if isinstance(value, Pair) else [value]):
        if is_float and op != "add":
            olds.append(_float_extremum(t, inst, p, v, op, mask))
        else:
            olds.append(_rmw(t, inst, p, v, ("addf" if is_float else "add") if op == "add" else op, mask))
    return Pair(*olds) if isinstance(value, Pair) else olds[0]


@_rule("atomic_add", "atomic_max", "atomic_min")
def atomic_update(t: Translator, inst: Instruction) -> None:
    """The previous value of the element (of each work-item's element)."""
    ptr, pair, mask = _pointers(t, inst)
    value = t.tile_of(inst.slots["value"])
    value = t.per_lane(value) if t.lanes else value
    t.values[inst.results[0]] = update(t, inst, _parts(ptr, pair, t), value, mask)
