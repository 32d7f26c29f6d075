"""axpby, hadamard, sum and cumsum as per-work-item scalar code.

These do O(1) work per element loaded, so there is nothing for a coopmatrix microkernel
to reuse; a ``foreach`` over the output's elements (one element per work-item, mapped
by lower-foreach) is the fast shape, and it handles every element type (complex and
integer included) and any order.  Reductions and scans that produce few outputs use
one subgroup's work-items cooperatively:

* axpby, hadamard: ``foreach`` over the elements of the output (order 0: one iteration).
* sum, vector result: ``foreach`` over the rows; each work-item adds its row in a loop.
* sum, scalar result: subgroup 0 strides over A, each work-item keeps a partial sum,
  ``subgroup_reduce_add`` combines them, work-item 0 writes.
* cumsum, order >= 2: ``foreach`` over the other modes; each work-item scans its line.
* cumsum, order 1: subgroup 0 walks A in chunks of one element per work-item:
  ``subgroup_inclusive_scan_add`` plus the running total of earlier chunks (broadcast
  from the last work-item).

The beta cases (read the output or not, when beta is not a constant) are decided once
outside the loops.  Each work-item (or subgroup 0 alone) owns the output elements it
writes, so the instruction becomes one SPMD region and needs no barrier inside.
"""
from __future__ import annotations

from typing import Sequence

from ...ir.core import Value
from ...ir.numerics import accumulate_type
from ...ir.types import I32, INDEX, ScalarType
from ..index_math import Int
from .emit import Emitter


def _load(em: Emitter, m: Value, index: Sequence[Value], acc: ScalarType) -> Value:
    return em.cast(em.b.load(m, list(index)), acc)


def _foreach(em: Emitter, sizes: Sequence[Int]):
    """``foreach`` over [0, size) per mode (one iteration for an empty list)."""
    if not sizes:
        sizes = [1]
    zero = em.index(0)
    names = ["i", "j", "k", "l", "m", "n"][:len(sizes)]
    return em.b.foreach([zero] * len(sizes), [em.index(s) for s in sizes], arg_names=names)


def lower_axpby(em: Emitter) -> None:
    """B := alpha op(A) + beta B."""
    inst = em.inst
    A, B = inst.slots["A"], inst.slots["B"]
    acc = accumulate_type(B.type.element)
    transpose = inst.modifier("ta") == "t" and A.type.order == 2
    order = B.type.order
    if order == 2:
        sizes = [em.pick_dim((B, 0), (A, 1 if transpose else 0)),
                 em.pick_dim((B, 1), (A, 0 if transpose else 1))]
    elif order == 1:
        sizes = [em.pick_dim((B, 0), (A, 0))]
    else:
        sizes = []

    def emit(read: bool) -> None:
        with _foreach(em, sizes) as ids:
            index = list(ids)[:order]
            a_index = list(reversed(index)) if transpose else index
            em.update_scalar(_load(em, A, a_index, acc), B, index, read)
    em.beta_cases(emit)


def lower_hadamard(em: Emitter) -> None:
    """C := alpha A .* B + beta C (vectors or matrices)."""
    inst = em.inst
    A, B, C = inst.slots["A"], inst.slots["B"], inst.slots["C"]
    acc = accumulate_type(C.type.element)
    sizes = [em.pick_dim((C, d), (A, d), (B, d)) for d in range(C.type.order)]

    def emit(read: bool) -> None:
        with _foreach(em, sizes) as ids:
            index = list(ids)
            product = em.b.mul(_load(em, A, index, acc), _load(em, B, index, acc))
            em.update_scalar(product, C, index, read)
    em.beta_cases(emit)


def lower_sum(em: Emitter) -> None:
    """b := alpha op(A) 1 + beta b (row sums), or b := alpha <A, 1> + beta b (a scalar)."""
    inst = em.inst
    A, Bv = inst.slots["A"], inst.slots["B"]
    acc = accumulate_type(Bv.type.element)
    b = em.b
    if Bv.type.order == 1:
        transpose = inst.modifier("ta") == "t"
        rows = em.pick_dim((Bv, 0), (A, 1 if transpose else 0))
        cols = em.dim(A, 0 if transpose else 1)

        def emit(read: bool) -> None:
            with _foreach(em, [rows]) as (i,):
                loop = b.for_(em.index(0), em.index(cols), em.index(1),
                              init=[em.const(0, acc)], arg_names=["j", "s"], names=["s"])
                with loop as (j, s):
                    a = _load(em, A, [j, i] if transpose else [i, j], acc)
                    b.yield_([b.add(s, a)])
                em.update_scalar(loop.result, Bv, [i], read)
        em.beta_cases(emit)
        return

    n = em.dim(A, 0)

    def emit(read: bool) -> None:
        with _first_subgroup(em) as (lane, lane_index, stride):
            loop = b.for_(em.index(0), em.index(n), stride, init=[em.const(0, acc)],
                          arg_names=["k", "s"], names=["s"])
            with loop as (k, s):
                idx, inside = _chunk_index(em, k, lane_index, n)
                a = _masked_load(em, A, idx, inside, acc)
                b.yield_([b.add(s, a)])
            total = b.subgroup_reduce_add(loop.result)
            with b.if_(b.equal(lane, em.const(0, I32))):
                em.update_scalar(total, Bv, [], read)
    em.beta_cases(emit)


def lower_cumsum(em: Emitter) -> None:
    """B := alpha (cumulative sum of A along mode n) + beta B."""
    inst = em.inst
    A, B = inst.slots["A"], inst.slots["B"]
    mode = inst.attrs["mode"]
    acc = accumulate_type(B.type.element)
    b = em.b
    order = A.type.order
    sizes = [em.pick_dim((B, d), (A, d)) for d in range(order)]
    n = sizes[mode]

    if order >= 2:
        others = [s for d, s in enumerate(sizes) if d != mode]

        def emit(read: bool) -> None:
            with _foreach(em, others) as ids:
                ids = list(ids)
                loop = b.for_(em.index(0), em.index(n), em.index(1), init=[em.const(0, acc)],
                              arg_names=["k", "s"])
                with loop as (k, s):
                    index = ids[:mode] + [k] + ids[mode:]
                    total = b.add(s, _load(em, A, index, acc))
                    em.update_scalar(total, B, index, read)
                    b.yield_([total])
        em.beta_cases(emit)
        return

    def emit(read: bool) -> None:
        with _first_subgroup(em) as (lane, lane_index, stride):
            last = em.last_lane()
            loop = b.for_(em.index(0), em.index(n), stride, init=[em.const(0, acc)],
                          arg_names=["k", "carry"])
            with loop as (k, carry):
                idx, inside = _chunk_index(em, k, lane_index, n)
                a = _masked_load(em, A, idx, inside, acc)
                total = b.add(b.subgroup_inclusive_scan_add(a), carry)
                with b.if_(inside):
                    em.update_scalar(total, B, [idx], read)
                b.yield_([b.subgroup_broadcast(total, last)])
    em.beta_cases(emit)


# ---- one subgroup working together ----------------------------------------------------------
class _FirstSubgroup:
    """``parallel { if subgroup_linear_id == 0 { ... } }``: gives the work-item's
    subgroup-local id (i32 and index) and the subgroup size as an index (the loop
    stride of chunked loops)."""

    def __init__(self, em: Emitter):
        self.em = em

    def __enter__(self):
        em, b = self.em, self.em.b
        self.par = b.parallel()
        self.par.__enter__()
        first = b.equal(b.subgroup_linear_id(), em.const(0, I32))
        self.branch = b.if_(first)
        self.branch.__enter__()
        lane = b.subgroup_local_id()
        return lane, b.cast(lane, INDEX), em.subgroup_size_index()

    def __exit__(self, *exc):
        self.branch.__exit__(*exc)
        self.par.__exit__(*exc)


def _first_subgroup(em: Emitter) -> _FirstSubgroup:
    return _FirstSubgroup(em)


def _chunk_index(em: Emitter, k: Value, lane_index: Value, n: Int):
    """Element k + lane of a chunked loop and whether it is below n."""
    idx = em.b.add(k, lane_index)
    return idx, em.b.less_than(idx, em.index(n))


def _masked_load(em: Emitter, m: Value, idx: Value, inside: Value, acc: ScalarType) -> Value:
    """m[idx] in the accumulator type where inside, else 0."""
    b = em.b
    branch = b.if_(inside, results=[acc])
    with branch:
        b.yield_([_load(em, m, [idx], acc)])
    with branch.else_():
        b.yield_([em.const(0, acc)])
    return branch.result
