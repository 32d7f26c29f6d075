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

from typing import List, Optional, Tuple

from ...ir.builder import coopmatrix
from ...ir.core import Value
from ...ir.numerics import accumulate_type
from ...ir.types import INDEX, ScalarType
from ..index_math import Int, known
from .emit import Emitter, checked_flag
from .tiles import MIN_ACC_BYTES, Tiles, choose_tiles, split_remainders
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


#: a block of rows of one tile: (first row, rows, rows checked)
Rows = Tuple[Value, int, bool]


def chains(target, tiles: Tiles, acc: ScalarType, ea: ScalarType, eb: ScalarType,
           acc_bytes: int, k_full: Optional[int]) -> int:
    """How many sets of accumulators (``acc_bytes`` each) the K loop carries, each taking
    every P-th step and added up after it: where remainders are split (the FMA
    microkernel, static K), enough for MIN_ACC_BYTES of FMAs in flight, else one.  A
    gemv tile has a single column: f32 56x56 in one K loop of 2 accumulators was 28
    dependent FMAs per register."""
    if k_full is None or not split_remainders(target, acc, ea, eb):
        return 1
    return max(1, min(-(-MIN_ACC_BYTES // acc_bytes), k_full // tiles.k))


def fused_rows(em: Emitter, m_pieces: list, n_pieces: list, acc: ScalarType) -> bool:
    """Whether the pieces of M, each a single tile, are computed as one tile of several
    blocks of rows (one K loop, B's tile loaded once per step for all of them): where
    one subgroup does all the work, N is one tile and the accumulators of all pieces
    fit half the register budget (gemv: f32 56 rows as 32 + 16 + 8 loaded b three
    times, the load ports' limit before the FMAs')."""
    if len(m_pieces) < 2 or len(n_pieces) != 1 or em.subgroups[0] * em.subgroups[1] != 1:
        return False
    ne, NT = known(n_pieces[0][1]), n_pieces[0][2]
    rows = sum(tile for _, _, tile, _ in m_pieces)
    return (ne is not None and ne <= NT and all(extent <= tile for _, extent, tile, _ in m_pieces)
            and rows * NT * acc.size <= em.target.register_budget // 2)


def k_loop(em: Emitter, step, zeros: List[Value], k_full: Int, KT: int, P: int) -> List[Value]:
    """The accumulators over the K steps [0, k_full) of KT, in P sets, step s updating set
    s mod P: a loop of P steps a round (straight-line for one round), the steps left
    (static k_full), then the sets added pairwise.  ``step(k, xs)`` is one step from xs."""
    b = em.b
    kf = known(k_full)
    if kf == 0:
        return zeros
    n = len(zeros)
    sets = [list(zeros) for _ in range(P)]
    rounds = kf // (KT * P) if kf is not None else None
    if rounds == 1:
        sets = [step(p * KT, xs) for p, xs in enumerate(sets)]
    else:
        end = k_full if rounds is None else rounds * P * KT
        names = ["acc"] if n * P == 1 else [f"acc{q}" for q in range(n * P)]
        loop = b.for_(em.index(0), em.index(end), em.index(P * KT),
                      init=[x for xs in sets for x in xs], arg_names=["k"] + names, names=names)
        with loop as (k, *carried):
            b.yield_([x for p in range(P)
                      for x in step(em.m.add(k, p * KT, INDEX), carried[p * n:(p + 1) * n])])
        sets = [list(loop.results[p * n:(p + 1) * n]) for p in range(P)]
    if rounds is not None:
        first = rounds * P * KT
        for q in range((kf - first) // KT):
            sets[q] = step(first + q * KT, sets[q])
    while len(sets) > 1:
        sets = [[b.add(x, y) for x, y in zip(*sets[p:p + 2])] if p + 1 < len(sets) else sets[p]
                for p in range(0, len(sets), 2)]
    return sets[0]


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

    def step(rows: List[Rows], j: Value, k: Int, xs: List[Value], NT: int, KS: int,
             check_n: bool, check_k: bool) -> List[Value]:
        """One K step of KS for each block of rows: their A tiles, B's tile (once)."""
        kv = em.index(k)
        b_t = coopmatrix(eb, KS, NT, "matrix_b")
        b_flag = checked_flag(check_k, check_n)
        As = []
        for i, MT, check_m in rows:
            a_t = coopmatrix(ea, MT, KS, "matrix_a")
            a_flag = checked_flag(check_m, check_k)
            if ta == "n":
                As.append(b.cooperative_matrix_load(A, i, kv, a_t, checked=a_flag, name="a"))
            else:
                As.append(b.cooperative_matrix_load(A, kv, i, a_t, ta="t", checked=a_flag,
                                                    name="a"))
        if tb == "n":
            bm = b.cooperative_matrix_load(B, kv, j, b_t, checked=b_flag, name="b")
        else:
            bm = b.cooperative_matrix_load(B, j, kv, b_t, ta="t", checked=b_flag, name="b")
        return [b.cooperative_matrix_mul_add(a, bm, x, name="ab") for a, x in zip(As, xs)]

    def tile(rows: List[Rows], j: Value, NT: int, check_n: bool) -> None:
        """The blocks of rows `rows` of C's columns j .. j + NT - 1."""
        # the zero accumulators are made in the tile's SPMD region: coopmatrix values
        # live in subgroups (a collective region holds no subgroup's registers)
        acc_ts = [coopmatrix(acc, MT, NT, "matrix_acc") for _, MT, _ in rows]
        xs = [b.constant(0, t, name="zero") for t in acc_ts]
        P = chains(em.target, tiles, acc, ea, eb, sum(MT for _, MT, _ in rows) * NT * acc.size,
                   known(k_full))
        xs = k_loop(em, lambda k, xs: step(rows, j, k, xs, NT, KT, check_n, False), xs,
                    k_full, KT, P)
        k = known(k_full)
        for ks in tiles.k_rest:
            xs = step(rows, j, k, xs, NT, ks, check_n, False)
            k += ks
        if has_rem is True:
            xs = step(rows, j, k_full, xs, NT, KT, check_n, True)
        elif isinstance(has_rem, Value):
            branch = b.if_(has_rem, results=acc_ts, names=["acc"] * len(rows))
            with branch:
                b.yield_(step(rows, j, k_full, xs, NT, KT, check_n, True))
            with branch.else_():
                b.yield_(xs)
            xs = list(branch.results)
        for (i, _, check_m), x in zip(rows, xs):
            flag = checked_flag(check_m, check_n)
            v = em.scale_tile(x)
            em.beta_cases(lambda read: em.update_tile(v, C, i, j, flag, read, scaled=True))

    m_pieces, n_pieces = _pieces(M, tiles.m, tiles.m_pieces), _pieces(N, tiles.n, tiles.n_pieces)
    if fused_rows(em, m_pieces, n_pieces, acc):
        (_, me, MT, _), (n0, ne, NT, n_status) = m_pieces[0], n_pieces[0]
        lo, hi = [em.index(0), em.index(n0)], [em.index(me), em.index(em.pm.add(n0, ne, INDEX))]
        with b.foreach_tile(lo, hi, [MT, NT], arg_names=["i", "j", "ti", "tj"]) as (i, j, _, _):
            tile([(em.index(m0), mt, status == PARTIAL) for m0, _, mt, status in m_pieces],
                 j, NT, n_status == PARTIAL)
        return
    for m0, me, MT, m_status in m_pieces:
        for n0, ne, NT, n_status in n_pieces:
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
                    tile([(i, MT, m_status == PARTIAL)], j, NT, n_status == PARTIAL)
                else:
                    branch = b.if_(full)
                    with branch:
                        tile([(i, MT, m_status == PARTIAL)], j, NT, n_status == PARTIAL)
                    with branch.else_():
                        tile([(i, MT, m_status != FULL)], j, NT, n_status != FULL)
