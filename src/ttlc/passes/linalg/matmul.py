"""gemm, gemv and ger as tiled loops over cooperative matrices.

All three are ``C := alpha op(A) op(B) + beta C`` on matrices: gemv views b and c as
K x 1 and M x 1 matrices, ger views a as M x 1 and b as N x 1 (transposed: 1 x N, K = 1),
with ``expand``.  The code, for tiles ``m x n x k`` from ``choose_tiles``::

    foreach_tile (%i,%j) = (0,0),(M,N) as (%ti,%tj) <= (m,n) {     ; one tile per subgroup
        if full tile {                          ; only where a tile can be partial
            body(unchecked)                     ; at run time
        } else {
            body(rows/cols checked)
        }
    }
    body:  %acc = for %k = 0, K - K mod k, k init(zero) {     ; full K steps
               %a = cooperative_matrix_load[.t] A[...] : coopmatrix<A x m x k, matrix_a>
               %b = cooperative_matrix_load[.t] B[...] : coopmatrix<B x k x n, matrix_b>
               yield (cooperative_matrix_mul_add %a, %b, %acc)   ; in the accumulator type
           }
           K remainder: one more step with the K side of the loads checked (zeros beyond K)
           update: alpha %acc (+ beta C tile unless beta is 0), cast, store
                   (.atomic: cooperative_matrix_atomic_store for beta 0, _atomic_add for 1)

Each tile of C belongs to exactly one subgroup (foreach_tile), so subgroups write disjoint
elements and no barrier is needed inside; the instruction becomes one SPMD region.
A dimension whose static size is a multiple of its tile is never checked; one smaller
than its tile is always checked; otherwise tiles test ``size == tile`` at run time.
Where remainders get smaller tiles (``tiles.split_remainders``: f32 and f64 on the CPU)
and sizes are static, C is cut into pieces instead, each a foreach_tile of its own tile
shape (M: the full tiles, then smaller power-of-two multiples of the subgroup size, the
last rows checked; N: the full tiles, then one tile of the remaining columns), and the K
remainder is unchecked steps of smaller powers of two: no masked full tile, no branch.
mul_add takes A and B in their own element types (promotion happens inside it), and
accumulates in the output's type (f32 for 16-bit float outputs).
"""
from __future__ import annotations

from typing import Optional

from ...ir.builder import coopmatrix
from ...ir.core import Value
from ...ir.numerics import accumulate_type
from ...ir.types import INDEX
from ..index_math import Int, known
from .emit import Emitter, checked_flag
from .tiles import choose_tiles
from .unit_tiles import fit_to_unit

FULL, PARTIAL, MAYBE = "full", "partial", "maybe"


def _status(size: Int, tile: int) -> str:
    """Whether the tiles of a dimension are all full, all partial, or either."""
    k = known(size)
    if k is None:
        return MAYBE
    if k % tile == 0:
        return FULL
    if k < tile:
        return PARTIAL
    return MAYBE


def lower_gemm(em: Emitter) -> None:
    inst = em.inst
    A, B, C = (inst.slots[s] for s in ("A", "B", "C"))
    ta, tb = inst.modifier("ta"), inst.modifier("tb")
    am, ak = (0, 1) if ta == "n" else (1, 0)
    bk, bn = (0, 1) if tb == "n" else (1, 0)
    M = em.pick_dim((C, 0), (A, am))
    N = em.pick_dim((C, 1), (B, bn))
    K = em.pick_dim((A, ak), (B, bk))
    matmul(em, A, ta, B, tb, C, M, N, K)


def lower_gemv(em: Emitter) -> None:
    inst = em.inst
    A, b, c = (inst.slots[s] for s in ("A", "B", "C"))
    ta = inst.modifier("ta")
    am, ak = (0, 1) if ta == "n" else (1, 0)
    M = em.pick_dim((c, 0), (A, am))
    K = em.pick_dim((A, ak), (b, 0))
    matmul(em, A, ta, em.view_as_column(b), "n", em.view_as_column(c), M, 1, K)


def lower_ger(em: Emitter) -> None:
    inst = em.inst
    a, b, C = (inst.slots[s] for s in ("A", "B", "C"))
    M = em.pick_dim((C, 0), (a, 0))
    N = em.pick_dim((C, 1), (b, 0))
    matmul(em, em.view_as_column(a), "n", em.view_as_column(b), "t", C, M, N, 1)


def _pieces(M: Int, MT: int, pieces) -> list:
    """(first, extent, tile, status) of each piece of a dimension: the tiles' pieces where
    the size is static and remainders get smaller tiles, else the whole dimension."""
    if not pieces:
        return [(0, M, MT, _status(M, MT))]
    out, first = [], 0
    for extent, tile in pieces:
        out.append((first, extent, tile, _status(extent, tile)))
        first += extent
    return out


def matmul(em: Emitter, A: Value, ta: str, B: Value, tb: str, C: Value,
           M: Int, N: Int, K: Int) -> None:
    """C := alpha op(A) op(B) + beta C with op(A): M x K, op(B): K x N (2-D memrefs)."""
    b, m = em.b, em.m
    acc = accumulate_type(C.type.element)
    ea, eb = A.type.element, B.type.element
    tiles = choose_tiles(em.target, em.sgs, em.subgroups, known(M), known(N), known(K),
                         acc, ea, eb)
    # 16-bit products a matrix or dot-product unit computes: tiles of its grain
    tiles = fit_to_unit(em.target, tiles, em.sgs, em.subgroups, known(M), known(N), known(K),
                        acc, ea, eb, tb == "t")
    KT = tiles.k

    # K = k_full + remainder: full steps unchecked, then the remainder: steps of smaller
    # powers of two (k_rest, static K where remainders are split) or one checked step
    k_full = em.pm.sub(K, em.pm.rem(K, KT, INDEX), INDEX)
    has_rem = False if tiles.k_rest else em.pm.less_than(k_full, K, INDEX)

    def step(i: Value, j: Value, k: Int, x: Value, MT: int, NT: int, KS: int,
             check_m: bool, check_n: bool, check_k: bool) -> Value:
        kv = em.index(k)
        a_t = coopmatrix(ea, MT, KS, "matrix_a")
        b_t = coopmatrix(eb, KS, NT, "matrix_b")
        a_flag = checked_flag(check_m, check_k)
        b_flag = checked_flag(check_k, check_n)
        if ta == "n":
            a = b.cooperative_matrix_load(A, i, kv, a_t, checked=a_flag, name="a")
        else:
            a = b.cooperative_matrix_load(A, kv, i, a_t, ta="t", checked=a_flag, name="a")
        if tb == "n":
            bm = b.cooperative_matrix_load(B, kv, j, b_t, checked=b_flag, name="b")
        else:
            bm = b.cooperative_matrix_load(B, j, kv, b_t, ta="t", checked=b_flag, name="b")
        return b.cooperative_matrix_mul_add(a, bm, x, name="ab")

    def tile(i: Value, j: Value, MT: int, NT: int, check_m: bool, check_n: bool) -> None:
        # the zero accumulator is made in the tile's SPMD region: coopmatrix values live
        # in subgroups (a collective region holds no subgroup's registers)
        acc_t = coopmatrix(acc, MT, NT, "matrix_acc")
        x = b.constant(0, acc_t, name="zero")
        kf = known(k_full)
        if kf is None or kf > 0:
            if kf == KT:  # a single full step: no loop
                x = step(i, j, 0, x, MT, NT, KT, check_m, check_n, False)
            else:
                loop = b.for_(em.index(0), em.index(k_full), em.index(KT), init=[x],
                              arg_names=["k", "acc"], names=["acc"])
                with loop as (k, carried):
                    b.yield_([step(i, j, k, carried, MT, NT, KT, check_m, check_n, False)])
                x = loop.result
        k = kf
        for ks in tiles.k_rest:
            x = step(i, j, k, x, MT, NT, ks, check_m, check_n, False)
            k += ks
        if has_rem is True:
            x = step(i, j, k_full, x, MT, NT, KT, check_m, check_n, True)
        elif isinstance(has_rem, Value):
            branch = b.if_(has_rem, results=[acc_t], names=["acc"])
            with branch:
                b.yield_([step(i, j, k_full, x, MT, NT, KT, check_m, check_n, True)])
            with branch.else_():
                b.yield_([x])
            x = branch.result
        flag = checked_flag(check_m, check_n)
        v = em.scale_tile(x)
        em.beta_cases(lambda read: em.update_tile(v, C, i, j, flag, read, scaled=True))

    for row, (m0, me, MT, m_status) in enumerate(_pieces(M, tiles.m, tiles.m_pieces)):
        n_pieces = tiles.row_n_pieces[row] if tiles.row_n_pieces else tiles.n_pieces
        for n0, ne, NT, n_status in _pieces(N, tiles.n, n_pieces):
            lo = [em.index(m0), em.index(n0)]
            hi = [em.index(em.pm.add(m0, me, INDEX)), em.index(em.pm.add(n0, ne, INDEX))]
            with b.foreach_tile(lo, hi, [MT, NT], arg_names=["i", "j", "ti", "tj"]) \
                    as (i, j, ti, tj):
                full: Optional[object] = True
                if m_status == MAYBE:
                    full = m.and_(full, m.equal(ti, MT, INDEX))
                if n_status == MAYBE:
                    full = m.and_(full, m.equal(tj, NT, INDEX))
                if full is True:
                    tile(i, j, MT, NT, m_status == PARTIAL, n_status == PARTIAL)
                else:
                    branch = b.if_(full)
                    with branch:
                        tile(i, j, MT, NT, m_status == PARTIAL, n_status == PARTIAL)
                    with branch.else_():
                        tile(i, j, MT, NT, m_status != FULL, n_status != FULL)
