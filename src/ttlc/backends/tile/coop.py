"""Cooperative matrices as tiles of the subgroups' matrices.

In an SPMD region a ``coopmatrix<T x M x N>`` is a ``tile<G x M' x N' x T>``: the
matrix of each of the G subgroups of the tile of work-items (G = work-items / subgroup
size), with M' and N' the next powers of two.  The entries beyond M x N are padding
whose value means nothing: what combines entries (``mul_add`` over the contracted
mode, ``reduce``) masks it, stores never write it, extract never reads it.

Operands the language requires to be dynamically uniform (positions, memrefs, the
scalar of construct and scale) are taken from the first work-item of each subgroup
(``uniform``).  Loads and stores are gathers and scatters of the subgroups' pointer
tiles (``load_ptr_tko``/``store_ptr_tko``), masked by the matrix's extent, the checked
flags' bounds and the subgroups that run; ``mul_add`` is a batched ``mmaf`` (``mmai``
for i8) where Tile IR has the types, else products broadcast and summed; extract,
insert and apply see entries through the work-items that hold them (``layout``).
``prefetch`` is a hint and emits nothing.
"""
from __future__ import annotations

from typing import Dict, Optional

from ...ir.core import Instruction
from ...ir.types import CoopMatrixType
from ...runtime.findings import E_COOP_BOUNDS, E_COOP_DIV_ZERO
from . import atomics, checks, races
from .blas import accumulate_type_name
from .layout import bcast, both, held, iota, layout, pick, reshape, subgroups, to_entries, uniform
from .ops import Scalar, Tile
from .spmd import COMBINE, exec_config, identity_of
from .tir import Value
from .translate import (COMPONENT, Pair, Rule, Translator, component_name, each, element_name, first,
                        is_complex, next_pow2, registrar)

RULES: Dict[str, Rule] = {}
_rule = registrar(RULES)


def matrix_tile(t: Translator, inst: Instruction, ct: CoopMatrixType) -> Tile:
    """The tile type of a coopmatrix type in the SPMD region being translated (outside
    one, where every subgroup holds the same matrix, one matrix: G = 1)."""
    G = t.lanes // exec_config(t, inst).subgroup_size if t.lanes else 1
    return Tile(Scalar(component_name(ct, inst.loc, inst.opcode)),
                (G, next_pow2(ct.rows), next_pow2(ct.cols)))


def running(t: Translator, shape) -> Optional[Value]:
    """Which subgroups run (any of their work-items active), as G x 1 x 1; None: all."""
    if t.active is None:
        return None
    any_ = t.along("reduce", subgroups(t, t.active), 1, lambda a, b: t.binary("ori", a, b), 0)
    return reshape(t, any_, (shape[0], 1, 1))


def _and(t: Translator, a: Optional[Value], b: Optional[Value]) -> Optional[Value]:
    if a is None or b is None:
        return a if b is None else b
    return both(t, "andi", a, b)


def _less(t: Translator, a: Value, b: Value) -> Value:
    return both(t, "cmpi", a, b, comparison_predicate="less_than", signedness="signed")


def inside(t: Translator, ct: CoopMatrixType, shape) -> Optional[Value]:
    """Which entries of the padded matrix tile are entries of the matrix (None: all)."""
    mask = None
    for d, n in ((1, ct.rows), (2, ct.cols)):
        if shape[d] != n:
            mask = _and(t, mask, _less(t, iota(t, shape[d], 3, d), t.const("i32", n)))
    return mask


def number(ct: CoopMatrixType, inst: Instruction) -> str:
    """The component type's name (c32, c64 for complex components)."""
    return ct.component.name if is_complex(ct) else element_name(ct, inst.loc, inst.opcode)


def _access(t: Translator, inst: Instruction, ct: CoopMatrixType, shape):
    """The pointers of the entries a load or store accesses (of each part of complex
    entries) and its mask (or None)."""
    m = t.memref(inst.slots["tensor"])
    i64 = lambda v: uniform(t, t.convert(t.i64(v), "i64"))  # noqa: E731
    x, y = i64(t.tile_of(inst.slots["x"])), i64(t.tile_of(inst.slots["y"]))
    rows, cols = (t.convert(iota(t, shape[d], 3, d), "i64") for d in (1, 2))
    transpose = inst.modifier("ta") == "t"
    ri, ci = (both(t, "addi", x, cols), both(t, "addi", y, rows)) if transpose else \
        (both(t, "addi", x, rows), both(t, "addi", y, cols))
    offsets = both(t, "addi", both(t, "muli", ri, i64(m.strides[0])),
                   both(t, "muli", ci, i64(m.strides[1])))
    if m.complex:
        offsets = both(t, "muli", offsets, t.const("i64", 2))
    ptrs = t.offset(bcast(t, uniform(t, m.ptr), shape), bcast(t, offsets, shape))
    ptrs = [ptrs, t.offset(ptrs, 1)] if m.complex else [ptrs]
    zero = t.const("i64", 0)

    def within(k: Value, size) -> Value:
        return both(t, "andi", both(t, "cmpi", k, zero, comparison_predicate="greater_than_or_equal",
                                    signedness="signed"), _less(t, k, i64(size)))
    checked = inst.modifier("checked") or ""
    row_index, col_index = (ci, ri) if transpose else (ri, ci)
    row_size, col_size = (m.shape[1], m.shape[0]) if transpose else (m.shape[0], m.shape[1])
    mask = _and(t, inside(t, ct, shape), running(t, shape))
    if checked in ("rows_checked", "both_checked"):
        mask = _and(t, mask, within(row_index, row_size))
    if checked in ("cols_checked", "both_checked"):
        mask = _and(t, mask, within(col_index, col_size))
    if t.checks:  # a null memref, the entries outside it that no *_checked guards, then none
        checks.check_memref(t, m, named=False)
        inside_memref = both(t, "andi", within(ri, m.shape[0]), within(ci, m.shape[1]))
        exists = bcast(t, mask, shape) if mask is not None else t.const("i1", True, shape)
        outside = both(t, "andi", exists, both(t, "xori", inside_memref, t.const("i1", True)))
        entry = [bcast(t, iota(t, shape[d], 3, d), shape) for d in (1, 2)]
        sg = exec_config(t, inst).subgroup_size  # the subgroup's first work-item reports
        checks.fail_if(t, bcast(t, outside, shape), E_COOP_BOUNDS,
                       [*entry, *(bcast(t, v, shape) for v in (ri, ci)),
                        *(bcast(t, i64(n), shape) for n in m.shape)],
                       lambda k: t.binary("muli", t.binary("divi", k, t.const("i32", shape[1] * shape[2]),
                                                           signedness="signed"), t.const("i32", sg)))
        mask = _and(t, _and(t, mask, inside_memref), bcast(t, checks.ok(t), shape))
    mask = None if mask is None else bcast(t, mask, shape)
    if t.checks:
        races.matrix(t, inst, ptrs[0], mask, ri, ci)
    return ptrs, mask


def check_division(t: Translator, ct: CoopMatrixType, a: Value, zero: Value) -> None:
    """Checked code: E_COOP_DIV_ZERO where an entry of the matrix (not its padding, of a
    subgroup that runs) divides by zero, naming the entry and the work-item holding it."""
    shape = a.type.shape
    zero = _and(t, zero, _and(t, inside(t, ct, shape), running(t, shape)))
    entry = [bcast(t, iota(t, shape[d], 3, d), shape) for d in (1, 2)]
    try:
        distributed = bool(t.lanes) and layout(t, ct) is not None
    except ValueError:  # a shape the language's layout does not distribute
        distributed = False
    if not distributed:  # no work-item is named
        checks.fail_if(t, bcast(t, zero, shape), E_COOP_DIV_ZERO, [a, *entry])
        return
    holder = to_entries(t, ct, t.b.one("iota", Tile(Scalar("i32"), (t.lanes,))))
    flat = reshape(t, bcast(t, holder, shape), (int(shape[0] * shape[1] * shape[2]),))

    def item(k: Value) -> Value:
        one = t.b.one("extract", Tile(Scalar("i32"), (1,)), source=flat, indices=[k])
        return t.b.one("reshape", Tile(Scalar("i32")), source=one)
    checks.fail_if(t, bcast(t, zero, shape), E_COOP_DIV_ZERO, [a, *entry], item)


def _order(inst: Instruction, kind: int) -> Dict[str, str]:
    """The memory ordering (and scope) of a load (kind 0) or store (1): of the atomic
    forms as ``atomics`` gives them, weak otherwise."""
    if "atomic" not in inst.opcode:
        return {"memory_ordering_semantics": "weak"}
    order, scope = atomics.ordering(inst, kind)
    return {"memory_ordering_semantics": order, "memory_scope": scope}


def _zero_outside(t: Translator, mask: Optional[Value], value):
    """`value` with 0 where `mask` (the entries accessed) does not hold."""
    if mask is None:
        return value
    return each(lambda v: t.select(mask, v, t.const(v.type.element.name, 0)), value)


@_rule("cooperative_matrix_load", "cooperative_matrix_atomic_load")
def load(t: Translator, inst: Instruction) -> None:
    """A gather; entries outside the checked bounds are zero."""
    ct = inst.results[0].type
    tile = matrix_tile(t, inst, ct)
    ptrs, mask = _access(t, inst, ct, tile.shape)
    parts = []
    for p in ptrs:
        value, t.token = t.b.op("load_ptr_tko", [tile, t.token.type], source=p, mask=mask,
                                token=t.token, **_order(inst, 0))
        parts.append(value)
    t.values[inst.results[0]] = _zero_outside(t, mask, Pair(*parts) if len(parts) == 2 else parts[0])


@_rule("cooperative_matrix_store", "cooperative_matrix_atomic_store")
def store(t: Translator, inst: Instruction) -> None:
    ct = inst.slots["value"].type
    tile = matrix_tile(t, inst, ct)
    ptrs, mask = _access(t, inst, ct, tile.shape)
    value = t.tile_of(inst.slots["value"])
    for p, v in zip(ptrs, value if isinstance(value, Pair) else [value]):
        t.token = t.b.one("store_ptr_tko", t.token.type, destination=p, value=v, mask=mask,
                          token=t.token, **_order(inst, 1))


@_rule(*(f"cooperative_matrix_atomic_{op}" for op in ("add", "max", "min")))
def atomic_update(t: Translator, inst: Instruction) -> None:
    """Entry by entry, as the element atomics (``atomics.update``); the previous values
    (0 where nothing is accessed)."""
    ct = inst.slots["value"].type
    tile = matrix_tile(t, inst, ct)
    ptrs, mask = _access(t, inst, ct, tile.shape)
    old = atomics.update(t, inst, ptrs, t.tile_of(inst.slots["value"]), mask)
    t.values[inst.results[0]] = _zero_outside(t, mask, old)


@_rule("cooperative_matrix_prefetch")
def prefetch(t: Translator, inst: Instruction) -> None:
    """A hint: nothing to emit."""


@_rule("cooperative_matrix_construct")
def construct(t: Translator, inst: Instruction) -> None:
    tile = matrix_tile(t, inst, inst.results[0].type)
    t.values[inst.results[0]] = each(lambda v: bcast(t, uniform(t, v, partial=True), tile.shape),
                                     t.tile_of(inst.slots["a"]))


@_rule("cooperative_matrix_scale")
def scale(t: Translator, inst: Instruction) -> None:
    tile = matrix_tile(t, inst, inst.results[0].type)
    a = each(lambda v: bcast(t, uniform(t, v, partial=True), tile.shape), t.tile_of(inst.slots["a"]))
    t.values[inst.results[0]] = t.arith("mul", a, t.tile_of(inst.slots["b"]))


#: (A's and B's component type) -> (the operation, the types it multiplies in, its sum)
_MMA = {("f16", "f16"): ("mmaf", "f16", "f32"), ("bf16", "bf16"): ("mmaf", "bf16", "f32"),
        ("f32", "f32"): ("mmaf", "f32", "f32"), ("f64", "f64"): ("mmaf", "f64", "f64"),
        ("i8", "i8"): ("mmai", "i8", "i32")}


@_rule("cooperative_matrix_mul_add")
def mul_add(t: Translator, inst: Instruction) -> None:
    """D = A B + C per subgroup, summed in C's accumulation type (f32 for 16-bit
    floats; integers wrap around), rounded to C's type and cast to D's, as the reference
    interpreter computes.  A's padding columns are zeroed, so that B's padding rows add
    nothing."""
    ta, tb, tc = (inst.slots[s].type for s in "abc")
    a, b, c = (t.tile_of(inst.slots[s]) for s in "abc")
    acc = accumulate_type_name(number(tc, inst))
    shape = first(a).type.shape
    columns = inside(t, CoopMatrixType(ta.component, next_pow2(ta.rows), ta.cols, ta.use), shape)
    if columns is not None:
        a = t.select(bcast(t, columns, shape), a, t.const(number(ta, inst), 0))
    kind = (number(ta, inst), number(tb, inst))
    name, into, total = _MMA.get(kind, (None, acc, acc))
    if acc in COMPONENT:
        d = t.complex_mma(*(t.convert(v, acc) for v in (a, b, c)))
    elif name is not None and (total == acc or name == "mmai"):
        sum_ = t.convert(t.convert(c, acc), total)
        attrs = {"signedness_lhs": "signed", "signedness_rhs": "signed"} if name == "mmai" else {}
        d = t.b.one(name, sum_.type, lhs=a, rhs=b, acc=sum_, **attrs)
    else:
        d = t.products(t.convert(a, acc), t.convert(b, acc), t.convert(c, acc))
    d = t.convert(t.convert(d, acc), number(tc, inst))
    t.values[inst.results[0]] = t.convert(d, number(inst.results[0].type, inst))


@_rule(*(f"cooperative_matrix_reduce_{op}" for op in COMBINE))
def reduce(t: Translator, inst: Instruction) -> None:
    """Over the columns (``.row``) or the rows (``.column``), in the accumulation type;
    padding entries count as the identity."""
    ct = inst.slots["a"].type
    a = t.tile_of(inst.slots["a"])
    element = number(ct, inst)
    acc = accumulate_type_name(element)
    op = inst.opcode.rsplit("_", 1)[1]
    part = Scalar(COMPONENT.get(acc, acc))  # a complex sum is the sums of the parts
    ident = identity_of(op, part)
    x = t.convert(a, acc)
    shape = list(first(a).type.shape)
    mask = inside(t, ct, shape)
    if mask is not None:
        x = t.select(bcast(t, mask, shape), x, t.const(acc, ident))
    dim = 2 if inst.modifier("mode") == "row" else 1
    name = COMBINE[op][0 if part.is_float else 1]
    signed = {"signedness": "signed"} if name in ("maxi", "mini") else {}
    r = t.along("reduce", x, dim, lambda p, q: t.binary(name, p, q, **signed), ident)
    shape[dim] = 1
    t.values[inst.results[0]] = t.convert(t.shaped("reshape", r, shape), element)


@_rule("cooperative_matrix_extract")
def extract(t: Translator, inst: Instruction) -> None:
    """Each work-item's entry at the register: the entries it holds there, picked out
    of its subgroup's matrix (zero at padding)."""
    ct = inst.slots["matrix"].type
    m = t.tile_of(inst.slots["matrix"])
    G, M, N = first(m).type.shape
    S = t.lanes // G
    hot = reshape(t, held(t, ct, inst.attrs["index"]), (1, S, M, N))
    t.values[inst.results[0]] = each(
        lambda v: reshape(t, pick(t, hot, reshape(t, v, (G, 1, M, N)), [2, 3]), (t.lanes,)), m)


@_rule("cooperative_matrix_insert")
def insert(t: Translator, inst: Instruction) -> None:
    """The entries the running work-items hold at the register replaced by their
    values."""
    ct = inst.slots["matrix"].type
    m = t.tile_of(inst.slots["matrix"])
    G, M, N = first(m).type.shape
    S = t.lanes // G
    value = t.per_lane(t.convert(t.tile_of(inst.slots["value"]), number(ct, inst)))
    hot = bcast(t, reshape(t, held(t, ct, inst.attrs["index"]), (1, S, M, N)), (G, S, M, N))
    if t.active is not None:
        hot = both(t, "andi", hot, reshape(t, t.active, (G, S, 1, 1)))
    new = each(lambda v: pick(t, hot, reshape(t, v, (G, S, 1, 1)), [1]), value)
    written = t.along("reduce", hot, 1, lambda p, q: t.binary("ori", p, q), 0)
    t.values[inst.results[0]] = t.select(written, new, m)


@_rule("cooperative_matrix_apply")
def apply(t: Translator, inst: Instruction) -> None:
    """The region runs once over the tile of entries (in place of the work-items: the
    values of work-items it uses are those of each entry's holder), under the mask of
    the entries of the matrix whose holders run."""
    ct = inst.results[0].type
    m = t.tile_of(inst.slots["a"])
    shape = first(m).type.shape
    active = inside(t, ct, shape)
    if t.active is not None:
        active = _and(t, active, to_entries(t, ct, t.active))
    active = None if active is None else bcast(t, active, shape)
    body = inst.regions[0]
    i, j = (bcast(t, iota(t, shape[d], 3, d), shape) for d in (1, 2))
    outer = (t.active, t.items, t.to_items)
    t.active, t.items, t.to_items = active, shape, lambda x: to_entries(t, ct, x)
    try:
        for arg, v in zip(body.args, (i, j, m)):
            t.values[arg] = v
        t.yielded = []
        t.region(body)
        y = t.per_lane(t.convert(t.yielded[0], number(ct, inst)))
    finally:
        t.active, t.items, t.to_items = outer
    t.values[inst.results[0]] = y if active is None else t.select(active, y, m)
