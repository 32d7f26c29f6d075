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
from .blas import accumulate_type_name
from .layout import bcast, both, held, iota, pick, reshape, subgroups, to_entries, uniform
from .ops import Scalar, Tile
from .spmd import COMBINE, exec_config, identity_of
from .tir import Value
from .translate import Rule, Translator, element_name, next_pow2, registrar, unsupported

RULES: Dict[str, Rule] = {}
_rule = registrar(RULES)


def matrix_tile(t: Translator, inst: Instruction, ct: CoopMatrixType) -> Tile:
    """The tile type of a coopmatrix type in the SPMD region being translated (outside
    one, where every subgroup holds the same matrix, one matrix: G = 1)."""
    G = t.lanes // exec_config(t, inst).subgroup_size if t.lanes else 1
    return Tile(Scalar(element_name(ct, inst.loc, inst.opcode)),
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


def _access(t: Translator, inst: Instruction, ct: CoopMatrixType, shape):
    """The pointers of the entries a load or store accesses and its mask (or None)."""
    m = t.memref(inst.slots["tensor"])
    i64 = lambda v: uniform(t, t.convert(t.i64(v), "i64"))  # noqa: E731
    x, y = i64(t.tile_of(inst.slots["x"])), i64(t.tile_of(inst.slots["y"]))
    rows, cols = (t.convert(iota(t, shape[d], 3, d), "i64") for d in (1, 2))
    transpose = inst.modifier("ta") == "t"
    ri, ci = (both(t, "addi", x, cols), both(t, "addi", y, rows)) if transpose else \
        (both(t, "addi", x, rows), both(t, "addi", y, cols))
    offsets = both(t, "addi", both(t, "muli", ri, i64(m.strides[0])),
                   both(t, "muli", ci, i64(m.strides[1])))
    ptrs = t.offset(bcast(t, uniform(t, m.ptr), shape), bcast(t, offsets, shape))
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
    return ptrs, None if mask is None else bcast(t, mask, shape)


@_rule("cooperative_matrix_load")
def load(t: Translator, inst: Instruction) -> None:
    """A gather; entries outside the checked bounds are zero."""
    ct = inst.results[0].type
    tile = matrix_tile(t, inst, ct)
    ptrs, mask = _access(t, inst, ct, tile.shape)
    value, t.token = t.b.op("load_ptr_tko", [tile, t.token.type], source=ptrs, mask=mask,
                            token=t.token, memory_ordering_semantics="weak")
    if mask is not None:
        value = t.select(mask, value, t.const(tile.element.name, 0))
    t.values[inst.results[0]] = value


@_rule("cooperative_matrix_store")
def store(t: Translator, inst: Instruction) -> None:
    ct = inst.slots["value"].type
    tile = matrix_tile(t, inst, ct)
    ptrs, mask = _access(t, inst, ct, tile.shape)
    t.token = t.b.one("store_ptr_tko", t.token.type, destination=ptrs,
                      value=t.tile_of(inst.slots["value"]), mask=mask, token=t.token,
                      memory_ordering_semantics="weak")


@_rule("cooperative_matrix_prefetch")
def prefetch(t: Translator, inst: Instruction) -> None:
    """A hint: nothing to emit."""


@_rule("cooperative_matrix_construct")
def construct(t: Translator, inst: Instruction) -> None:
    tile = matrix_tile(t, inst, inst.results[0].type)
    t.values[inst.results[0]] = bcast(t, uniform(t, t.tile_of(inst.slots["a"])), tile.shape)


@_rule("cooperative_matrix_scale")
def scale(t: Translator, inst: Instruction) -> None:
    tile = matrix_tile(t, inst, inst.results[0].type)
    a = bcast(t, uniform(t, t.tile_of(inst.slots["a"])), tile.shape)
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
    acc = accumulate_type_name(element_name(tc, inst.loc, inst.opcode))
    columns = inside(t, CoopMatrixType(ta.component, next_pow2(ta.rows), ta.cols, ta.use), a.type.shape)
    if columns is not None:
        a = t.select(bcast(t, columns, a.type.shape), a, t.const(a.type.element.name, 0))
    kind = (a.type.element.name, b.type.element.name)
    name, into, total = _MMA.get(kind, (None, acc, acc))
    if name is not None and (total == acc or name == "mmai"):
        sum_ = t.convert(t.convert(c, acc), total)
        attrs = {"signedness_lhs": "signed", "signedness_rhs": "signed"} if name == "mmai" else {}
        d = t.b.one(name, sum_.type, lhs=a, rhs=b, acc=sum_, **attrs)
    else:
        d = t.products(t.convert(a, acc), t.convert(b, acc), t.convert(c, acc))
    d = t.convert(t.convert(d, acc), c.type.element.name)
    t.values[inst.results[0]] = t.convert(d, element_name(inst.results[0].type, inst.loc, inst.opcode))


@_rule(*(f"cooperative_matrix_reduce_{op}" for op in COMBINE))
def reduce(t: Translator, inst: Instruction) -> None:
    """Over the columns (``.row``) or the rows (``.column``), in the accumulation type;
    padding entries count as the identity."""
    ct = inst.slots["a"].type
    a = t.tile_of(inst.slots["a"])
    element = element_name(ct, inst.loc, inst.opcode)
    acc = Scalar(accumulate_type_name(element))
    op = inst.opcode.rsplit("_", 1)[1]
    ident = identity_of(op, acc)
    x = t.convert(a, acc.name)
    mask = inside(t, ct, a.type.shape)
    if mask is not None:
        x = t.select(bcast(t, mask, x.type.shape), x, t.const(acc.name, ident))
    dim = 2 if inst.modifier("mode") == "row" else 1
    name = COMBINE[op][0 if acc.is_float else 1]
    signed = {"signedness": "signed"} if name in ("maxi", "mini") else {}
    r = t.along("reduce", x, dim, lambda p, q: t.binary(name, p, q, **signed), ident)
    shape = list(a.type.shape)
    shape[dim] = 1
    t.values[inst.results[0]] = t.convert(reshape(t, r, shape), element)


@_rule("cooperative_matrix_extract")
def extract(t: Translator, inst: Instruction) -> None:
    """Each work-item's entry at the register: the entries it holds there, picked out
    of its subgroup's matrix (zero at padding)."""
    ct = inst.slots["matrix"].type
    m = t.tile_of(inst.slots["matrix"])
    G, M, N = m.type.shape
    S = t.lanes // G
    hot = reshape(t, held(t, ct, inst.attrs["index"]), (1, S, M, N))
    x = pick(t, hot, reshape(t, m, (G, 1, M, N)), [2, 3])
    t.values[inst.results[0]] = reshape(t, x, (t.lanes,))


@_rule("cooperative_matrix_insert")
def insert(t: Translator, inst: Instruction) -> None:
    """The entries the running work-items hold at the register replaced by their
    values."""
    ct = inst.slots["matrix"].type
    m = t.tile_of(inst.slots["matrix"])
    G, M, N = m.type.shape
    S = t.lanes // G
    value = t.per_lane(t.convert(t.tile_of(inst.slots["value"]), m.type.element.name))
    hot = bcast(t, reshape(t, held(t, ct, inst.attrs["index"]), (1, S, M, N)), (G, S, M, N))
    if t.active is not None:
        hot = both(t, "andi", hot, reshape(t, t.active, (G, S, 1, 1)))
    new = pick(t, hot, reshape(t, value, (G, S, 1, 1)), [1])
    written = t.along("reduce", hot, 1, lambda p, q: t.binary("ori", p, q), 0)
    t.values[inst.results[0]] = t.select(written, new, m)


@_rule("cooperative_matrix_apply")
def apply(t: Translator, inst: Instruction) -> None:
    """The region runs once over the tile of entries (in place of the work-items: the
    values of work-items it uses are those of each entry's holder), under the mask of
    the entries of the matrix whose holders run."""
    ct = inst.results[0].type
    m = t.tile_of(inst.slots["a"])
    shape = m.type.shape
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
        y = t.per_lane(t.convert(t.yielded[0], m.type.element.name))
    finally:
        t.active, t.items, t.to_items = outer
    t.values[inst.results[0]] = y if active is None else t.select(active, y, m)
