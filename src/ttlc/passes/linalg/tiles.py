"""Tile shapes for the coopmatrix lowering of gemm, gemv and ger: ``choose_tiles``.

Every tile shape lower-linalg uses comes from here, derived from the target description
(``ttlc.target.Target``: register budget, subgroup size) and what is known about the
problem, so no other part of the pass holds a tile constant.

The rule (documented in ``choose_tiles``):

* Constraints of the language: the accumulator tile (``m x n``) and the A tile
  (``m x k``) have ``m`` rows, a power of two and a multiple of the subgroup size
  (``cooperative_matrix_mul_add``; coopmatrix rows are powers of two); the B tile
  (``k x n``) has ``k`` rows, a power of two; columns are free.
* Registers: half of ``register_budget`` (the bytes one subgroup may keep in registers)
  holds the accumulator, ``m * n * sizeof(acc) <= budget / 2``; the other half the A and B
  tiles of one step of the K loop, ``(m * sizeof(a) + n * sizeof(b)) * k <= budget / 2``.
  Where subgroups are SIMD lanes of one thread (``target.vector_bytes``, the CPU), the
  ``G`` subgroups of a work-group run in lockstep and share that thread's registers: each
  gets ``budget / G``.
* Cost model: per tile and K step a subgroup issues ``m n / S`` vector FMAs and loads
  ``m / S + n`` registers of A and B; the tiles of C are spread over the work-group's
  ``G`` subgroups, ``ceil(tiles / G)`` rounds, or, for a grid of ``gx x gy`` subgroups
  (foreach_tile hands rows of tiles to ``subgroup_id.x`` and columns to
  ``subgroup_id.y``), ``ceil(row tiles / gx) * ceil(column tiles / gy)`` rounds.  Among
  the (m, n) allowed above, the pair with the least ``rounds * (m n / S + m / S + n)``
  wins (ties: the larger tile, then the squarer one).  A dynamic size counts as ``ASSUMED_SIZE``.  Tiles never exceed a static
  problem (``n <= N``; ``m <= max(S, next power of two of M)``), so small static problems
  get one tile without padding where the language allows it.
* ``k``: the largest power of two within the operand half of the budget, at most
  ``MAX_K`` and at most the next power of two of a static K.  Where subgroups are SIMD
  lanes and B has the accumulator's (real) type, only the A tile counts (the CPU's mul_add
  broadcasts B's entries straight from memory), so e.g. a 16x16x16 f32 gemm is one
  straight-line K step.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Tuple, Union

from ...ir.types import ScalarType
from ...target import Target

#: a dynamic M, N or K is assumed to be this large when comparing tile shapes
ASSUMED_SIZE = 256
#: longest K step (more only lengthens the straight-line microkernel)
MAX_K = 32
#: largest M tile as a multiple of the subgroup size
MAX_M_BLOCKS = 16


@dataclass(frozen=True)
class Tiles:
    """Tile shape of one gemm: C tiles of m x n, K steps of k."""

    m: int
    n: int
    k: int


def _next_pow2(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=1024)
def choose_tiles(target: Target, subgroup_size: int, num_subgroups: Union[int, Tuple[int, int]],
                 M: Optional[int], N: Optional[int], K: Optional[int],
                 acc: ScalarType, a: ScalarType, b: ScalarType) -> Tiles:
    """The tile shape for C (M x N) += A (M x K) B (K x N) accumulating in ``acc``.

    ``num_subgroups`` is the number of subgroups of the work-group, or their grid
    ``(gx, gy)``; ``M``, ``N``, ``K`` are static sizes or None (dynamic); ``a`` and ``b``
    are the element types of A and B as loaded.  See the module docstring for the rule.
    """
    S = subgroup_size
    grid = num_subgroups if isinstance(num_subgroups, tuple) else None
    G = max(1, grid[0] * grid[1] if grid else num_subgroups)
    # where subgroups are SIMD lanes of one thread (CPUs), the G subgroups of a work-group
    # run in lockstep and hold their tiles in the same register file at the same time
    shared = G if target.vector_bytes else 1
    half = max(1, target.register_budget // 2 // shared)
    acc_elems = max(S, half // acc.size)  # at least one column of S rows
    m_cap = max(S, _next_pow2(M)) if M is not None else S * MAX_M_BLOCKS
    m_cap = min(m_cap, S * MAX_M_BLOCKS)
    Mm = M if M is not None else ASSUMED_SIZE
    Nm = N if N is not None else ASSUMED_SIZE

    best = None
    m = S
    while m <= m_cap and (m == S or m <= acc_elems):
        n_max = max(1, acc_elems // m)
        if N is not None:
            n_max = min(n_max, N)
        for n in range(1, n_max + 1):
            if grid:
                rounds = (_ceil_div(_ceil_div(Mm, m), max(1, grid[0]))
                          * _ceil_div(_ceil_div(Nm, n), max(1, grid[1])))
            else:
                rounds = _ceil_div(_ceil_div(Mm, m) * _ceil_div(Nm, n), G)
            cost = rounds * (m * n / S + m / S + n)
            key = (cost, -(m * n), abs(m / S - n))
            if best is None or key < best[0]:
                best = (key, m, n)
        m *= 2
    _, m, n = best

    # where subgroups are SIMD lanes (the CPU), mul_add takes B's entries from memory one
    # broadcast at a time (FMA memory operands) when they are real and need no
    # conversion: then only A's columns take registers
    from_memory = bool(target.vector_bytes) and b == acc and not b.is_complex
    operand_bytes = m * a.size + (0 if from_memory else n * b.size)
    k = 1
    while k * 2 <= MAX_K and (k * 2) * operand_bytes <= half:
        k *= 2
    if K is not None:
        k = min(k, _next_pow2(K))
    return Tiles(m, n, k)

