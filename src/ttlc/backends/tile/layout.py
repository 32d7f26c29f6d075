"""Which work-item holds which entry of a cooperative matrix, as tile code.

A coopmatrix is a tile of the subgroups' matrices (``coop``); extract, insert, apply and
the merging of divergent values see the entries through the work-items that hold them,
as the language's layout (``ttlc.ir.layout``) distributes them.  The layout's own
formulas (``NestedLayout.element``, ``locate``) run here on ``_Int`` tiles, so that the
same arithmetic places entries in every back end.  An entry is moved between the
work-items' tile and the matrix tile by a one-hot ``select`` and a ``reduce`` over the
subgroup (``pick``): the sum of one value and identities, which is that value exactly.
"""
from __future__ import annotations

from typing import Sequence, Tuple, Union

from ...ir.layout import MatrixLayout, layout_of
from ...ir.types import CoopMatrixType
from .ops import Scalar, Tile
from .tir import Value
from .translate import Translator, next_pow2

Shape = Tuple[int, ...]


def bcast(t: Translator, v: Value, shape: Sequence[int]) -> Value:
    """`v` broadcast to `shape` (a rank-0 tile, or one of the same rank with modes of 1)."""
    shape = tuple(shape)
    if v.type.shape == shape:
        return v
    if not v.type.shape:
        return t.splat(v, shape)
    return t.b.one("broadcast", Tile(v.type.element, shape), source=v)


def common(*vs: Value) -> Shape:
    """The shape that tiles of one rank (or rank 0) broadcast to."""
    shapes = [v.type.shape for v in vs if v.type.shape]
    return tuple(max(d) for d in zip(*shapes)) if shapes else ()


def reshape(t: Translator, v: Value, shape: Sequence[int]) -> Value:
    return t.b.one("reshape", Tile(v.type.element, tuple(shape)), source=v)


def iota(t: Translator, n: int, rank: int, dim: int) -> Value:
    """0..n-1 along mode `dim` of a tile of `rank` modes (the others of extent 1)."""
    v = t.b.one("iota", Tile(Scalar("i32"), (n,)))
    return reshape(t, v, tuple(n if k == dim else 1 for k in range(rank)))


class _Int:
    """An i32 tile with Python's integer operators (on non-negative values), so that the
    layout's formulas, written for ints and NumPy arrays, emit tile code."""

    def __init__(self, t: Translator, v: Value):
        self.t, self.v = t, v

    def _op(self, name: str, other: Union[int, "_Int"]) -> "_Int":
        t = self.t
        o = other.v if isinstance(other, _Int) else t.const("i32", other)
        shape = common(self.v, o)
        a, b = bcast(t, self.v, shape), bcast(t, o, shape)
        attrs = {"signedness": "signed"} if name in ("divi", "remi") else {}
        return _Int(t, t.b.one(name, a.type, lhs=a, rhs=b, **attrs))

    def __add__(self, other):
        return self if isinstance(other, int) and other == 0 else self._op("addi", other)

    __radd__ = __add__

    def __mul__(self, other):
        if isinstance(other, int) and other in (0, 1):
            return 0 if other == 0 else self
        return self._op("muli", other)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return self if other == 1 else self._op("divi", other)

    def __mod__(self, other):
        return 0 if other == 1 else self._op("remi", other)


def _tile(t: Translator, x: Union[int, _Int]) -> Value:
    return x.v if isinstance(x, _Int) else t.const("i32", x)


def layout(t: Translator, ct: CoopMatrixType) -> MatrixLayout:
    return layout_of(ct, t.config().subgroup_size)


def both(t: Translator, name: str, a: Value, b: Value, **attrs) -> Value:
    """A binary operation on tiles broadcast to their common shape."""
    shape = common(a, b)
    a, b = bcast(t, a, shape), bcast(t, b, shape)
    return t.b.one(name, Tile(Scalar("i1") if name == "cmpi" else a.type.element, shape),
                   lhs=a, rhs=b, **attrs)


def equal(t: Translator, a: Value, b: Value) -> Value:
    return both(t, "cmpi", a, b, comparison_predicate="equal", signedness="signed")


def held(t: Translator, ct: CoopMatrixType, register: int) -> Value:
    """Which work-item of a subgroup holds which entry of the padded matrix at
    `register`: an i1 tile (S x rows' x cols'), false for entries that no work-item
    holds there (padding)."""
    lay = layout(t, ct)
    lane = _Int(t, iota(t, lay.subgroup_size, 3, 0)) % lay.nested.lanes
    row, col = (_tile(t, x) for x in lay.element(lane, register))
    rows, cols = iota(t, next_pow2(ct.rows), 3, 1), iota(t, next_pow2(ct.cols), 3, 2)
    hit = both(t, "andi", equal(t, row, rows), equal(t, col, cols))
    inside = both(t, "cmpi", col, t.const("i32", ct.cols), comparison_predicate="less_than",
                  signedness="signed")
    return bcast(t, both(t, "andi", hit, inside), _held_shape(t, ct))


def owners(t: Translator, ct: CoopMatrixType) -> Value:
    """Which work-item of a subgroup holds each entry: an i1 tile (S x rows' x cols'),
    the lane ``NestedLayout.locate`` gives (the sum over modes of the thread coordinate
    times its stride)."""
    nested = layout(t, ct).nested
    lane: Union[int, _Int] = 0
    for d, n in enumerate((ct.rows, ct.cols)):
        x = _Int(t, iota(t, next_pow2(n), 3, d + 1))
        lane = lane + (x // nested.element_tile[d]) % nested.thread_tile[d] * nested.thread_strides[d]
    lane = lane % nested.lanes
    return bcast(t, equal(t, iota(t, layout(t, ct).subgroup_size, 3, 0), _tile(t, lane)),
                 _held_shape(t, ct))


def _held_shape(t: Translator, ct: CoopMatrixType) -> Shape:
    return (layout(t, ct).subgroup_size, next_pow2(ct.rows), next_pow2(ct.cols))


def identity(element: Scalar):
    """The value that adding (or or-ing, for i1) leaves another unchanged."""
    return -0.0 if element.is_float else 0


def pick(t: Translator, hot: Value, x: Value, dims: Sequence[int]) -> Value:
    """The entries of `x` where `hot` holds, reduced over modes `dims` (in each of which
    at most one entry is hot): the sum of that entry and identities."""
    element = x.type.element
    shape = common(hot, x)
    x = t.select(bcast(t, hot, shape), bcast(t, x, shape), t.const(element.name, identity(element)))
    name = "ori" if element.name == "i1" else "addf" if element.is_float else "addi"
    for d in sorted(dims, reverse=True):
        x = t.along("reduce", x, d, lambda a, b: t.binary(name, a, b), identity(element))
    return x


def subgroups(t: Translator, x: Value) -> Value:
    """A tile of the work-items as (subgroups x subgroup size)."""
    S = t.config().subgroup_size
    return reshape(t, x, (t.lanes // S, S))


def first_active(t: Translator) -> Value:
    """Per subgroup, the subgroup-local id of its first running work-item (0 if none
    runs): a tile (G,) of i32."""
    S = t.config().subgroup_size
    G = t.lanes // S
    if t.active is None:
        return t.const("i32", 0, (G,))
    per = subgroups(t, t.active)
    ids = t.b.one("broadcast", Tile(Scalar("i32"), (G, S)), source=iota(t, S, 2, 1))
    ids = t.select(per, ids, t.const("i32", S, (G, S)))
    lead = t.along("reduce", ids, 1, lambda a, b: t.binary("mini", a, b, signedness="signed"), S)
    return t.select(t.compare("equal", lead, t.const("i32", S)), t.const("i32", 0, (G,)), lead)


def first_running(t: Translator, v: Value) -> Value:
    """Per subgroup, the value of `v` (one per work-item) of its first running work-item
    (of its first if none runs): a tile (G,)."""
    per = subgroups(t, v)
    G, S = per.type.shape
    hot = equal(t, iota(t, S, 2, 1), reshape(t, first_active(t), (G, 1)))
    return pick(t, hot, per, [1])


def uniform(t: Translator, v: Value, partial: bool = False) -> Value:
    """A dynamically uniform value: a rank-0 tile as it is, a value of the work-items as
    that of each subgroup's first work-item (a tile G x 1 x 1).  Of an instruction that
    part of a subgroup may run (`partial`), the first running work-item's: the others'
    values need not agree."""
    if not v.type.shape:
        return v
    per = subgroups(t, v)
    if partial and t.active is not None:
        return reshape(t, first_running(t, v), (per.type.shape[0], 1, 1))
    zero = t.const("i32", 0)
    first = t.b.one("extract", Tile(v.type.element, (per.type.shape[0], 1)), source=per,
                    indices=[zero, zero])
    return reshape(t, first, (per.type.shape[0], 1, 1))


def to_entries(t: Translator, ct: CoopMatrixType, x: Value) -> Value:
    """A value of the work-items as one per matrix entry: each entry gets the value of
    the work-item that holds it (a tile G x rows' x cols')."""
    G, S = t.lanes // layout(t, ct).subgroup_size, layout(t, ct).subgroup_size
    per = reshape(t, subgroups(t, x), (G, S, 1, 1))
    return pick(t, reshape(t, owners(t, ct), (1, S, next_pow2(ct.rows), next_pow2(ct.cols))),
                per, [1])
