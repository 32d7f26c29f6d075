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
  straight-line K step (where remainders are not split, below).
* Remainders (``split_remainders``: f32 and f64 products where subgroups are SIMD lanes):
  static sizes are cut into pieces with tiles of their own -- M into the full tiles and
  then one partial tile of the rest (``row_pieces``: f64 56 as 32 and 24 in 32; where
  several subgroups share the tiles, smaller power-of-two tiles unless the rest's
  registers number a power of two), all of M one tile where it takes more than one
  register or A has STREAM_A_BYTES (f32 62 as one tile of 64, f64 30 as 32, A's column
  loaded whole where 32 + 30 in 32 read it in halves; f64 9 as 16, not 8 and 1 in 8:
  the last row's FMAs beside the first rows' instead of a second pass over A, with B
  shared 1.13-1.24x as fast from L3), N into the full tiles and one tile of the
  remaining columns (``column_pieces``), each as narrow as their number allows (13 as 7
  + 6, not 8 + 5: f64 24x13x11 with the members from L3 7-13% faster; with K of
  FEWEST_PASSES_MIN_K a tile of all of M takes the widest such where two take N, over a
  member's A with B shared or, whatever is shared, where its column is two registers and
  those two have at most FEWEST_PASSES_COLUMNS),
  K into the loop's steps and smaller power-of-two steps (``k_steps``, which also
  prefers a step dividing K), or a short K over enough tiles one step (``whole_k``,
  C then computed a few columns at a time) -- and the cost above is summed over the
  pieces, each piece adding PIECE_COST (its code is compiled too), and an accumulator
  of fewer than MIN_ACC_BYTES counting as that many (its FMAs wait for each other).  With one
  subgroup, whose partial tiles the CPU stores at rows known at compile time, a partial
  tile costs and takes registers for the rows it computes, the registers holding M's
  rows (``computed_rows``: 24 rows of f64 in a tile of 32 are three zmm, LIBXSMM's
  24-row blocking).
  There the accumulator may take ACC_SHARE of the budget instead of half (only A's
  columns are operands), two of A's columns fit the rest, and K steps are at most
  SPLIT_MAX_K and load at most STREAM_ROW_BYTES of A (tiles of three or four registers a
  column step K by one).  Where A is read from beyond L1 on a CPU of
  32 vector registers (``streams_a``), a register of A costs A_LOAD_COST: the tiles that
  read A fewer times win (rows that tall tiles below leave).
* Tall tiles: where M has the rows and static M x K of A holds STREAM_A_BYTES or more,
  the tiles load STREAM_ROW_BYTES of A's column per K step (four cache lines: 32 rows of
  f64, 64 of f32).  Where N is wider than any tile, all tiles are that tall or taller,
  their accumulator TALL_ACC_SHARE of the registers where A's column and one register
  more fit beside it, two of A's columns beside a taller one, which takes at least
  TALLER_MIN_COLUMNS (``tall_columns``: f64 100x100x100 in 32x6, f32 in 64x6, LIBXSMM's
  tiles; f32 89x72x88 in one tile of all of M by 3); else those rows take N in the
  fewest column tiles (the widest, or of equal width: TALL_LAST_COLUMNS) and the rows
  left one partial tile, N in the fewest column tiles of equal width (``tall_rows``:
  f64 56x9x56 as 32x5 and 32x4, then 24 rows in 32 by 5 and 4; f32 120x9x120 as 64x6
  and 64x3, then 56 rows by 5 and 4), also where one tile of S rows would take all of
  N and read A once (f64 128x9x128: 32x5 and 32x4, not 16x9; ``STREAM_ROW_BYTES``), and
  where each work-group's A is new and they take N in fewer column tiles than the cost's
  choice (f64 128x16x128: 32x6, 32x6, 32x4, not 32x4 four times).  Tall tiles step K by
  one (STREAM_ROW_BYTES).
* All of M in one tile: where one subgroup computes only M's rows (``idle``), FMAs take
  B's entries from memory (AVX-512) and M is one tile (``row_pieces``), that tile may
  hold more of A's column than the operands' part allows, with as many columns as leave
  two of A's columns and one register more beside the accumulator
  (``whole_m_columns``: f64 56 rows by 2 columns, 35 by 3; f32 84 rows by 3; where every
  tile is tall, as many as ``tall_columns`` allows).  With the members from L3 (paired
  against the tiles without it), 12 random shapes whose tiles changed: median 1.07x
  batched (1.02-1.21), 1.13x with A shared (1.00-1.33), 1.06x with B shared
  (0.92-1.14); from L2 0.98x (0.94-1.01).  Where its column is ONE_PASS_MIN_REGISTERS
  registers or more and all of N fits beside one of A's columns and one register, the
  tile takes all of N (``one_pass``: f32 35x9 in 27 zmm, C in one pass over A, K steps
  of one).
* Where M has the rows, K is not 1, one subgroup takes every tile and no tall tiles are
  chosen, tiles load at least MIN_A_STEP_BYTES of A's column per K step (f64 72x13x11:
  32-row tiles and the last 8 rows, not 8x13).
* Without broadcast operands (``target.broadcast_operands`` false: AVX2, subgroups of one
  ymm register) and with static M and N and one subgroup, ``register_tiles`` counts
  registers instead: each piece of M takes its own column count (``Tiles.row_n_pieces``;
  a last piece of one register short of N the first piece's, for C in blocks of
  columns) and the cost weighs loads (the broadcasts of B are loads of their own); where
  M has the rows, tiles load MIN_A_STEP_BYTES of A's column per K step unless A is shared,
  large and read by many column tiles (``two_line_rows``), and the rows after their full
  tiles may be one partial tile of as many registers in the same column tiles (f32 56 as
  32x3 and 24x3).
* Far-apart columns: where A's columns lie a page or more apart (``matmul.far_operands``:
  a work-group's block of rows of a tall matrix) and lower-linalg leaves the block to the
  hardware prefetchers (``matmul.streams_far_a``: `read_once_a`), one subgroup's tiles are
  one register's rows by all of N where FMAs broadcast B's entries and those fit the
  registers (``far_column_tiles``), so that each of A's columns is read once.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

from ...ir.types import ScalarType
from ...target import Target

#: a dynamic M, N or K is assumed to be this large when comparing tile shapes
ASSUMED_SIZE = 256
#: longest K step (more only lengthens the straight-line microkernel)
MAX_K = 32
#: largest M tile as a multiple of the subgroup size
MAX_M_BLOCKS = 16
#: what each piece of C beyond the first adds to the cost (its code is compiled too: f32
#: 120x9x120 as 3 pieces of 32x9 tiles rather than 8 of 64x6, at about the same speed;
#: and where the batch comes from L3 a piece costs run time: f64 64x64x64's 32x4 tiles in
#: two pieces of columns ran 6% slower than in one, f64 56x9x56 as 32x6 + 32x3, 16x9, 8x9
#: (4 pieces) 2-3% faster than as 16x9, 8x9 (2 pieces), and no faster within L2)
PIECE_COST = 0.1
#: longest K step where remainders are split: the FMA microkernel's loop costs a few
#: integer instructions beside 10-30 FMAs, and a longer unrolled step only adds code to
#: compile (k = 2 against 32: 40% less LLVM IR for the shapes of benchmarks/small_gemm.py,
#: the same speed)
SPLIT_MAX_K = 2
#: A static K of at most WHOLE_K_MAX is one step (``whole_k``) where C has WHOLE_K_TILES
#: tiles or more and the tile's accumulator and all of K's operands take at most
#: WHOLE_K_BUDGET of the register budget.  With K one step, matmul computes C a few
#: columns at a time (``matmul.fused_columns``): each row block of A (M x K) loaded once
#: per loop step, each column K FMAs per register of rows, C written in the order of its
#: addresses -- no K loop, no tiles.  The bounds are measured, not derived.  Against
#: LIBXSMM (AVX-512, batched or with a shared operand, each A offset; K loop -> one step):
#: f64 49x18x3 0.81 -> 1.13, f64 59x73x2 0.78 -> 1.14, f64 48x35x3 with B shared 0.94 ->
#: 1.42, f64 11x46x4 B shared 0.95 -> 1.26, f32 11x70x5 B shared 0.90 -> 1.06, f32
#: 48x19x5 A shared 0.97 -> 1.14 (docs/performance.md, "Short K in one step"); 23 random
#: shapes of K <= 6 whose tiles it changes: geometric mean 1.12x, the least 0.97x (f64
#: 4x57x3 0.96 -> 0.89 in a second run).  Longer K, fewer tiles or more registers lost: f64
#: 10x5x9 with B shared 1.14 -> 1.00, f32 13x16x7 A shared 0.96 -> 0.91, f64 20x5x3 (one
#: tile) 1.02 -> 0.91, f64 61x2x3 B shared (two tiles) 0.98 -> 0.84, f64 74x2x7 B shared
#: (B's entries kept in registers across the members: spills) 1.12 -> 0.84.
WHOLE_K_MAX = 6
WHOLE_K_TILES = 3
WHOLE_K_BUDGET = 1.125
#: Without AVX-512 (``register_tiles``, 16 ymm) the bound is in the one-step code's own
#: terms: a K of at most WHOLE_K_HELD is one step whatever the registers (A's block then
#: reloaded from L1 for each column: f64 81x16x3 A shared 0.95 -> 1.48 of LIBXSMM, f32
#: 94x67x3 A shared 0.87 -> 1.09, f64 49x18x3 0.97 -> 1.37), a longer one only where
#: A's M x K block, a column of C and B's broadcast fit the register budget (M of at most
#: two registers for K from 4 to 6).  33 shapes with K from 4 to 6 whose blocks do not
#: fit ran 1.01x as fast in one step (geometric mean of three runs), scattered from 0.67x
#: (f32 39x4x6 with B shared, 1.31 -> 0.88 of LIBXSMM; f32 60x4x5 0.94 -> 0.75) to 1.83x
#: (f64 44x54x4 with B shared, 0.88 -> 1.61; the f64 ones 1.10x, the f32 ones 0.94x).
#: With the bound, 35 random shapes of K <= 6 whose tiles a short K in one step changes
#: ran 1.11x as fast as with K loops (the least f32 49x4x3, 0.97 -> 0.84 of LIBXSMM);
#: without it 1.11x too, the least 0.67x
WHOLE_K_HELD = 3
#: With or without AVX-512, the register bound does not apply where C has at least
#: WHOLE_K_C_BYTES and M more rows than a tile: the K loop's tiles then write each column
#: of C in a pass per row tile, from L2 once C outgrows L1 beside A and B, where one step
#: writes C in the order of its addresses.
#: Of 26 shapes of K from 4 to 6 whose A's block does not fit, those with C of 12 KiB or
#: more ran 1.18x as fast in one step (16 shapes, geometric mean; f32 92x121x6 0.95 ->
#: 1.49 of LIBXSMM, f64 49x93x5 0.93 -> 1.38; the least f64 96x23x5 with B shared 1.01
#: -> 0.82), those with C of 4-12 KiB 1.01x (0.82x to 1.47x), and all of M in one tile
#: row (C written in one pass either way) mostly lost (f64 9x70x5 with B shared 0.87x,
#: f32 32x49x5 A shared 0.82x).  16 further shapes it changes (C of 13-60 KiB): 1.28x,
#: the least 1.08x, all 1.03-1.44 of LIBXSMM.  With AVX-512, 16 shapes of K from 2 to 6
#: beyond WHOLE_K_BUDGET with such a C: 1.33x (0.94x to 1.63x; f64 120x31x5 A shared
#: 0.89 -> 1.41 of LIBXSMM, f32 107x35x5 0.87 -> 1.21; the least f64 78x41x5 B shared
#: 0.96 -> 0.90)
WHOLE_K_C_BYTES = 12 * 1024
#: With such a C, a K beyond WHOLE_K_MAX is one step up to WHOLE_K_LARGE_C (AVX-512) or
#: WHOLE_K_LARGE_C_YMM (``register_tiles``).  Against the K loop's tiles, over random
#: batched shapes whose tiles it changes (AVX-512): K of 7-10 1.22x and 1.30x as fast
#: (geometric means of 16 and 14 shapes; f64 115x59x7 1.00 -> 1.78 of LIBXSMM, f64
#: 103x64x9 1.04 -> 1.89; the least f64 66x75x8, 0.89x), K of 11-12 0.89x, 13-24 0.82x;
#: with A or B shared, K of 7-12: 1.16x and 1.06x.  Without AVX-512: K = 7 1.18x (16
#: shapes; f32 101x51x7 0.90 -> 1.72, the least f32 35x120x7, 0.84x), with A shared 1.07x,
#: B shared 1.20x; K = 8 (a loop of whole steps) mixed, 0.75x to 1.07x; K of 9-12 1.03x
WHOLE_K_LARGE_C = 10
WHOLE_K_LARGE_C_YMM = 7
#: the least accumulator bytes that keep the FMA units busy: 2 FMA pipes x 32 bytes x 4
#: cycles of latency (Zen 4, and AVX2 CPUs alike); 16x3 f32 tiles on AVX2 (6 ymm) ran
#: at three quarters of the speed of 16x5 ones
MIN_ACC_BYTES = 256
#: the accumulator's share of the register budget where N is wider than any tile and all
#: tiles are tall (STREAM_ROW_BYTES; one subgroup), A read once per column tile many times
#: anyway: six columns of four registers (``tall_columns``), which read A from L2 a third
#: fewer times than four.  Four columns (a share of 0.5) had kept A's stream from L2 at
#: its limit: with A's columns not 64-byte aligned (each 32 rows of f64 in five cache
#: lines), f64 96x96x96 with A and B shared ran 0.85x of LIBXSMM's 32x6 in 32x4 tiles,
#: 1.00-1.02x in 32x6.  With the members from L3 (rotated turns), f64 shapes in 96-128
#: 0.80-0.94x of LIBXSMM -> 0.93-1.02x; 24 random shapes (M >= 24) batched / A shared /
#: B shared f64 0.98 / 1.03 / 1.07 -> 1.02 / 1.03 / 1.07, f32 1.03 / 1.04 / 1.01 -> 1.06
#: / 1.03 / 1.05; from L2 batched f64 0.98 -> 1.03, f32 1.03 -> 1.05
TALL_ACC_SHARE = 0.75
#: where there are tall tiles and N has the columns, the fewest columns of a tile taller
#: than the tall rows (all of M): with two (f64 55 rows, 7 zmm by 2) A is read for every
#: two columns of C, and the tall rows' tiles and a partial one ran faster (32x6 and 24
#: rows by 6).  Where every tile is tall, the random shapes whose tiles it changed among
#: 40 (f64 M 33-64, f32 M 65-128), ttlc / LIBXSMM with the members from L3: f64 batched
#: 0.92-0.96 -> 1.02 (two surveys), A shared 0.94 -> 1.01, B shared 0.92 -> 1.01; f32
#: 0.89-0.91 -> 0.97-1.03, 0.91 -> 1.01, 0.92 -> 1.04; from L2 f64 0.94 -> 1.03, f32 0.93
#: -> 1.06.  Where N is narrower (f32 107x17x76: 128x2 -> 64x6 and 43 rows by 6; f64
#: 53x19x58: 64x2 -> 32x5 and 21 rows by 5), 16 random shapes each, batched / A shared /
#: B shared, from L2: f32 0.94 / 0.95 / 0.94 -> 1.09 / 1.06 / 1.10, f64 0.95 / 0.99 /
#: 0.95 -> 1.08 / 1.07 / 1.09; from L3 f32 0.86-0.92 / 0.94-0.96 / 0.91-0.93 -> 0.99-1.02
#: / 0.98-0.99 / 0.97-0.98, f64 0.97 / 1.00-1.03 / 0.95-0.96 -> 1.00-1.01 / 1.02-1.05 /
#: 1.01-1.04 (two runs each)
TALLER_MIN_COLUMNS = 3
#: the narrowest last column tile the tall rows' widest tiles may leave where each
#: work-group's A is new to the caches (``tall_rows``), by the accumulator's type; where
#: they would leave a narrower one, or A is shared by all work-groups, N's column tiles
#: are of equal width (as many).  With A shared both types ran faster in tiles of equal
#: width (f64 7-10 columns, M of 64 or more, from L2: 0.95 -> 1.04 of LIBXSMM; random
#: shapes of 7-12 columns, from L2 / L3: f64 1.02 / 0.98 -> 1.06 / 1.03, f32 1.05 / 1.03
#: -> 1.09 / 1.05); with each member's A f64 did too (f64 110x7x80: 32x4 and 32x3 at 1.00
#: from L2, 32x6 and 32x1 at 0.92; 128x9x128 as 32x5 and 32x4 1.02, as 32x6 and 32x3
#: 0.96), f32 in the widest but for a last tile of one column (f32 120x9x120 in 64x6 and
#: 64x3 at 1.05-1.07 from L3, in 64x5 and 64x4 at 0.97-0.99; 128x7x128 from L2 0.84-0.91
#: in 64x6 and 64x1, 0.91-0.95 in 64x4 and 64x3).  docs/performance.md, "The tall rows'
#: column tiles: the widest or of equal width"
TALL_LAST_COLUMNS = {"f32": 2, "f64": 6}
#: the least K for which a tile of all of M takes N in the fewest column tiles its
#: registers allow where each work-group's A is new to the caches and B is shared
#: (``choose_tiles``' `new_a`, `shared_b`): A's first pass comes from memory, the others
#: from L1, and with B in the caches nothing else overlaps that first pass, so fewer
#: passes over A are faster than the cost's narrower tiles in one piece (AVX-512, members
#: from L3: f32 35x9x35 in 35 rows by 5 and 4, not by 3 three times, 0.80-0.90 ->
#: 0.92-1.05 of LIBXSMM in four runs; 14 random shapes of M 9-64, N 3-24, K 32-128
#: 1.07-1.27x as fast, 0.86 -> 0.98 at the geometric mean).  A short K makes the first
#: pass short: f32 40x9x14 0.94 -> 0.75, 29x21x23 1.35-1.64 -> 1.18-1.40
#: (docs/performance.md, "All of M with B shared: the fewest passes over a member's A")
FEWEST_PASSES_MIN_K = 32
#: the most columns of the two tiles in which a tile of all of M whose column is two
#: registers (AVX-512: f32 17-32 rows, f64 9-16) takes N with K of FEWEST_PASSES_MIN_K or
#: more, whatever is shared: the fewest passes over A where the cost prefers narrower
#: tiles in one piece.  N of 15 as 8 + 7, not 5 three times: 10 random shapes a type,
#: batched and A shared, two placements each, from L3: f32 1.14x as fast at the geometric
#: mean, f64 1.12x (f32 22x15x44 with A shared 0.68-0.75 of LIBXSMM -> 1.00-1.02).  Wider
#: pairs did not gain: N of 21 as 11 + 10, not 7 three times, f32 1.00x batched and 0.96x
#: with A shared, f64 0.95x and 0.90x; nor 8 + 7 with three registers (f32 33-48 rows,
#: f64 17-24: 0.90x with A shared) (docs/performance.md, "Two registers of rows: N of 15
#: in two passes")
FEWEST_PASSES_COLUMNS = 8
#: the fewest registers of A's column (of the rows a tile computes) for which a tile of
#: all of M takes all of N in one pass over A (``choose_tiles``' ``one_pass``).  With two
#: (f32 17-32 rows by 13 or 14 columns, 26-28 zmm) against 7 + 6 or 7 + 7 columns in K
#: steps of two: f32 31x14x32 batched 0.78x as fast, 17x13x11 0.95-0.99x, 18x13x109 and
#: 27x14x54 within 5%, f64 9-16 rows by 13-14 within 1%: not taken
ONE_PASS_MIN_REGISTERS = 3
#: the accumulator's share of the register budget where B's entries come from memory
#: (f64 x 9 columns on AVX-512: 32x6 tiles, 24 zmm, instead of 32x4 and a lone 32x1)
ACC_SHARE = 0.75


def subgroup_registers(target: Target, S: int, elem_size: int) -> Target:
    """The target as a subgroup of S lanes of `elem_size` bytes sees it: where the lanes
    fill only part of a vector register (the CPU: f32 in 8 lanes with AVX-512), each
    vector of the subgroup still takes a whole register, so its registers are S *
    elem_size bytes, as many as the machine has (without this, tiles counted in bytes
    took up to twice the registers there are: f32 8x40 with AVX-512 spilled)."""
    used = S * elem_size
    if not target.vector_bytes or used >= target.vector_bytes:
        return target
    registers = target.register_budget // target.vector_bytes
    return dataclasses.replace(target, vector_bytes=used, register_budget=registers * used)


def accumulator_bytes(register_budget: int) -> int:
    """The bytes of a register budget the accumulators may take where B's entries come
    from memory (ACC_SHARE of it): one rule for ``choose_tiles`` and matmul's fused and
    dot-product columns."""
    return int(register_budget * ACC_SHARE)

#: what a load costs beside an FMA in ``register_tiles`` (AVX2), by the size of the
#: accumulator's type: f32 56x9x56 in 8x9 tiles (10 loads for 9 FMAs a K step) ran at
#: 0.83 of LIBXSMM, in 16x5 and 16x4 tiles (7 and 6 loads for 10 and 8 FMAs) and one 8x9
#: at 0.93 (at equal weights the cost preferred 8x9).  f32 tiles of four registers by
#: three columns (7 loads for 12 FMAs, LIBXSMM's AVX2 blocking) rather than two by five
#: (7 for 10), which a weight of 2.5 picks: with the members from L3 f32 100x100x100
#: 1.10-1.16x as fast, 94x8x109 1.25x, 70x100x77 1.29x; the same shapes in f64 ran at
#: 0.75-0.94x of their 8x5 tiles (94x8x109, 100x100x100, 110x80x119), so f64 keeps 1.5
LOAD_COST = {4: 2.5, 8: 1.5}


#: the registers a K step of two of an AVX2 register tile leaves free beside its own
#: (``register_tiles``).  In steps of two computed step by step LLVM kept each column's
#: first sum in a register of its own and spilled where the accumulators, two of A's
#: columns and their mask took all 15 ymm (f64 4x51x29 with B shared, 4x13 tiles: 0.85
#: of LIBXSMM, 1.33 in steps of one); each column's steps one after the other
#: (``coop.update_pieces``) do not spill, and a spare register or none then ran alike (16
#: random shapes whose tiles it changes: 1.006x, 0.88-1.07); a tile with room to spare
#: runs faster in steps of two (f32 8x27x8 in 8x9 tiles: 1.18 against 1.14)
K2_SPARE = 1


#: what loading a register of A's column costs against a broadcast of one of B's entries
#: where ``streams_a``: A is read once per column tile, a cache line per register, from L2,
#: while the K x n entries of B a column tile reads stay in L1 (f64 128x9x128 with each
#: member's A from L3: 32x3 tiles, A read three times, ran at 0.89x of LIBXSMM, 16x9
#: tiles, A read once, at 1.0x; the tall tiles of ``STREAM_ROW_BYTES`` at 1.0x too)
A_LOAD_COST = 2
#: the L1 data cache assumed: the smallest of the x86 CPUs with AVX-512 (Zen 4, Skylake-SP;
#: Ice Lake and later have 48 KiB)
L1_BYTES = 32 << 10
#: the bytes of A's column a tile loads per K step where M has the rows (four cache lines:
#: 32 rows of f64, 64 of f32).  With each batch member's A new to the caches (a batch
#: from L3) taller tiles ran faster though they read A more often; with A in L1 or L2 all
#: ran alike.  f32 100x100x100: 32x10 tiles (A read 10 times) at 0.76-0.96 of LIBXSMM,
#: 32x5, 32x6 and 32x12 no better, 64-row ones (64x5, A read 20 times; 64x4, 64x6) at
#: 0.87-1.08; f64 56x9x56: 16x9 and 8x9 at 0.92-0.99, 32x6 + 32x3 then 16x9 and 8x9 at
#: 0.98-1.05 (32x5 + 32x4: 0.97-1.02; 32x3, A read three times: 0.95-0.96).  Also where a
#: tile of S rows takes all of N and reads A once: with each member's A from memory (24 MiB
#: batches), f64 84x9x84 to 128x9x128 in 16x9 tiles (two cache lines of each column per
#: pass, A once) ran at 0.48-0.74 of LIBXSMM, in 32x6 + 32x3 at 0.87-1.11 (LIBXSMM's own:
#: 32x5 + 32x4); f32 120 and 128 rows 0.38-0.85 against 0.62-0.99; from L3 both 0.92-1.15;
#: with A shared by all members (from L2) 1.00-1.08 against 0.96-1.06.  Also the most a K
#: step loads of A: eight lines a step (tall tiles in K steps of two) ran slower from L3
#: (f64 62x4x119, 32x4 tiles: 0.71-0.76 of LIBXSMM against 0.97-1.08; f32 120x4x100
#: 0.81-0.87 against 1.04-1.07; fourteen random shapes alike or faster) and alike from
#: L2; so did six lines (f64 24x14x44 in 24-row tiles by 7, K steps of two: 8% slower
#: than 16x7 and 8x7 tiles, in steps of one 2-10% faster)
STREAM_ROW_BYTES = 256
#: the least bytes of A's column a tile loads per K step where M has the rows and no
#: tall tiles are chosen (two cache lines: 16 rows of f64, 32 of f32).  With each batch
#: member's operands new to the caches (a batch from L3), tiles of one line a step --
#: the cost's choice where one tile of S rows takes all of N, f64 17x13x11 in 8x13 --
#: ran at 0.44-0.97 of LIBXSMM, tiles of two lines (16x9 + 16x4) at 0.73-1.18 (f64 M of
#: 17-28, f32 M of 40-60, N of 13-34, A batched or shared, B batched or shared); with the
#: operands in L2 both alike (LIBXSMM's own: all of M, 17 rows as 24, by 7 and 6 columns).
#: Not for K = 1 (ger: no K loop; f64 17x13 as 16-row tiles 2% slower from L2), nor
#: where several subgroups share the tiles (fewer rows of tiles would leave one idle)
MIN_A_STEP_BYTES = 128
#: where AVX2's register tiles load MIN_A_STEP_BYTES of A's column per K step
#: (``two_line_rows``): an A new in each work-group (a batch member's), or one of at most
#: REREAD_A_BYTES, by the size of the type, or one that N's column tiles of those rows
#: read at most FEW_COLUMN_TILES times.  Such tiles (f64 16x3, f32 32x3) read A more
#: often than the one-line tiles the cost prefers (f64 8x5, 8x6; f32 16x5, 16x6), from
#: L2 where A passes L1.  An A all work-groups share stays in L2 and is read from there
#: every pass: with A shared and the members from L3 (A's base address at each offset of
#: 16 bytes in a cache line) f64 A of 48-64 KiB ran at 0.85-1.00x of the one-line tiles
#: where N took more than four column tiles (median 0.93), larger ones at 0.90-1.00x
#: (8 shapes, median 0.96); f64 A up to 48 KiB at 0.94-1.60x (median 1.12); f32 at
#: 0.93-1.89x (median 1.13) up to A's largest, 64 KiB (a 128 x 128 block).  A member's A
#: comes from memory on the first pass, which two lines a step speed up: f64 A of 48-125
#: KiB, batched or with B shared, 0.99-1.51x (30 shapes, median 1.16).
#: docs/performance.md, "AVX2: two cache lines of A per K step" and "AVX2: a member's
#: large A in two lines a step"
REREAD_A_BYTES = {4: 64 << 10, 8: 48 << 10}
FEW_COLUMN_TILES = 4
#: the least A (bytes) for STREAM_ROW_BYTES: tall tiles gained from 9.8 KiB (f64
#: 35x9x35: 2-3%) up; an A of a few KiB (M x 9 with K = 9: the chains' second product, the
#: blocks of a tall-and-skinny product; a ger's column) is a few dozen cache lines, and
#: the pieces of tall tiles cost compile time (f64 56x9x9: 40% more LLVM IR)
STREAM_A_BYTES = L1_BYTES // 4


def streams_a(target: Target, M: Optional[int], K: Optional[int], a: ScalarType) -> bool:
    """Whether tiles are costed with A's loads at A_LOAD_COST: a static A larger than L1,
    on a CPU whose register file holds 32 vectors of the subgroup's width (AVX-512: 24
    accumulators leave the choice between tiles of many rows and few columns, A read once
    per column tile, and the reverse).  An A within L1 is read again from L1 (A of
    100x16 f64: 16x8 tiles ran at 0.9x of 32x4)."""
    return (bool(target.vector_bytes) and target.register_budget >= 32 * target.vector_bytes
            and M is not None and K is not None and M * K * a.size > L1_BYTES)


#: a static dimension's pieces: (extent, tile) in order, each extent a multiple of its tile
#: or (the last) less than it
Pieces = Tuple[Tuple[int, int], ...]


@dataclass(frozen=True)
class Tiles:
    """Tile shape of one gemm: C tiles of m x n, K steps of k.  Where remainders get
    smaller tiles (``split_remainders``) and a size is static, its pieces: M's and N's
    (``m_pieces``, ``n_pieces``: the full tiles, then the rest), and the K steps after
    the loop of k steps (``k_rest``, unchecked); empty otherwise."""

    m: int
    n: int
    k: int
    m_pieces: Pieces = ()
    n_pieces: Pieces = ()
    k_rest: Tuple[int, ...] = ()
    #: where the pieces of M take column counts of their own (``register_tiles``,
    #: ``tall_rows``): N's pieces for each of ``m_pieces``; empty: ``n_pieces`` for all
    row_n_pieces: Tuple[Pieces, ...] = ()

    def count(self) -> int:
        """The tiles of C, counted over the static pieces (0 where M or N is dynamic)."""
        columns = self.row_n_pieces or (self.n_pieces,) * len(self.m_pieces)
        return sum(_ceil_div(me, mt) * sum(_ceil_div(ne, nt) for ne, nt in ns)
                   for (me, mt), ns in zip(self.m_pieces, columns))


#: the types whose remainders get smaller tiles (A, B and the accumulator alike): the FMA
#: microkernel's; matrix units (AMX, DPAS) take K in blocks of their own
SPLIT_TYPES = ("f32", "f64")


def widened_floats(acc: ScalarType, a: ScalarType, b: ScalarType) -> bool:
    """Products of floats narrower than their accumulator (16-bit floats into f32): each
    operand converted, so their tile code is long."""
    return a.is_float and b.is_float and max(a.size, b.size) < acc.size


def split_remainders(target: Target, acc: ScalarType, a: ScalarType, b: ScalarType) -> bool:
    """Whether remainders of static sizes get smaller tiles: where subgroups are SIMD
    lanes (the CPU), whose code for a masked full tile costs as much as for a full one,
    for products of one real type on the FMA path (``SPLIT_TYPES``)."""
    return bool(target.vector_bytes) and a == b == acc and acc.name in SPLIT_TYPES


def row_pieces(size: int, tile: int, unit: int, idle: bool = False) -> Pieces:
    """M split into the full tiles of `tile` rows, then the remainder in tiles of the
    largest power-of-two multiple of `unit` (the subgroup size) that fits, and what is
    left below `unit` as one partial tile of `unit` rows: 35 rows, tile 32, unit 8:
    (32, 32), (3, 8); 56 rows: (32, 32), (16, 16), (8, 8).  A remainder whose registers
    of `unit` rows number a power of two, the last partial, is one partial tile of those
    rows: 56 rows, tile 32, unit 16 (f32): (32, 32), (24, 32), as many FMAs as (16, 16),
    (8, 16) and one piece less to compile (f32 56x9x56 cold 39-42 -> 33-34 ms, the f32
    chain 56 81 -> 65), at the same speed from L2 and L3.  Where a partial tile's
    registers past its rows cost nothing (`idle`: the CPU computes only the rows its store
    writes, ``computed_rows``), so is any remainder of more than `unit` rows: f64 56 rows
    as (32, 32), (24, 32), three zmm for the last 24 as LIBXSMM takes them."""
    out = [(size - size % tile, tile)] if size >= tile else []
    rest = size % tile
    pow2_registers = _next_pow2(rest) == unit * _ceil_div(rest, unit)
    if rest > unit and rest & (rest - 1) and (idle or pow2_registers):
        return tuple(out + [(rest, _next_pow2(rest))])  # one partial tile
    while rest >= unit:
        t = unit << ((rest // unit).bit_length() - 1)
        out.append((t, t))
        rest -= t
    if rest:
        out.append((rest, unit))
    return tuple(out)


def computed_rows(extent: int, tile: int, unit: int) -> int:
    """The rows of a tile of `tile` rows over `extent` rows of M the CPU computes: the
    registers of `unit` rows that hold M's rows, where the tile's store writes only those
    (``cpu.mul_add.observed_rows``; one subgroup, rows known at compile time)."""
    return min(tile, _ceil_div(extent, unit) * unit)


def narrowest(size: int, tile: int) -> int:
    """The narrowest width that takes `size` columns in as many tiles as `tile` does (13
    in tiles of 8: 7, two tiles of 7 and 6 rather than 8 and 5)."""
    return _ceil_div(size, _ceil_div(size, tile))


def column_pieces(size: int, tile: int) -> Pieces:
    """N split into the full tiles, then the rest as one tile of exactly its columns
    (coopmatrix columns are free)."""
    out = [(size - size % tile, tile)] if size >= tile else []
    if size % tile:
        out.append((size % tile, size % tile))
    return tuple(out)


def column_block(firsts: Sequence[Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    """(width, end) of the blocks of C's columns that all pieces of M take together, from
    each piece's first column piece (extent, tile): the least common multiple of the
    tiles, up to the last whole block within every extent; None where fewer than two
    blocks fit (``matmul.column_blocks``)."""
    width = math.lcm(*(tile for _, tile in firsts))
    end = min(extent for extent, _ in firsts) // width * width
    return (width, end) if end >= 2 * width else None


def k_steps(K: int, k: int) -> Tuple[int, Tuple[int, ...]]:
    """(k, rest) for a static K: the step of the loop and the steps after it, powers of
    two, largest first.  A power of two dividing K, at least 2 and a quarter of k,
    replaces k (56 with 16: a loop of 8s, no rest); else the rest is K mod k in binary
    (35 with 16: two steps of 16, then 2 and 1)."""
    k = min(k, _pow2_at_most(K))
    divides = K & -K
    if k > divides >= max(2, k / 4):
        k = divides
    rest = K % k
    return k, tuple(1 << b for b in range(rest.bit_length() - 1, -1, -1) if rest >> b & 1)


def _next_pow2(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _pow2_at_most(x: int) -> int:
    return 1 << (max(1, x).bit_length() - 1)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=1024)
def choose_tiles(target: Target, subgroup_size: int, num_subgroups: Union[int, Tuple[int, int]],
                 M: Optional[int], N: Optional[int], K: Optional[int],
                 acc: ScalarType, a: ScalarType, b: ScalarType, far_a: bool = False,
                 new_a: bool = False, shared_b: bool = False,
                 read_once_a: bool = False, far_c: bool = False) -> Tiles:
    """The tile shape for C (M x N) += A (M x K) B (K x N) accumulating in ``acc``.

    ``num_subgroups`` is the number of subgroups of the work-group, or their grid
    ``(gx, gy)``; ``M``, ``N``, ``K`` are static sizes or None (dynamic); ``a`` and ``b``
    are the element types of A and B as loaded; ``far_a``: A's columns lie far apart and
    its block is prefetched (``register_tiles``); ``new_a``: A is a different matrix in
    each work-group (a batch member's, new to the caches), not one all work-groups share;
    ``shared_b``: B is one matrix all work-groups share; ``read_once_a``: A's columns lie
    far apart and its block is not prefetched (``far_column_tiles``); ``far_c``: C's
    columns lie far apart, each a stream of its own, and no tile takes all of M (with it,
    f32 100x8x4 in 128x2 tiles wrote C two whole columns at a time at 0.40-0.75 of
    LIBXSMM; in 64x4 1.03-1.11).  See the module docstring for the rule.
    """
    S = subgroup_size
    grid = num_subgroups if isinstance(num_subgroups, tuple) else None
    G = max(1, grid[0] * grid[1] if grid else num_subgroups)
    # where subgroups are SIMD lanes of one thread (CPUs), the G subgroups of a work-group
    # run in lockstep and hold their tiles in the same register file at the same time
    shared = G if target.vector_bytes else 1
    split = split_remainders(target, acc, a, b)
    if read_once_a and split and G == 1 and None not in (M, N, K):
        far = far_column_tiles(target, S, M, N, acc)
        if far is not None:
            return far
    # a partial tile's registers past M's rows cost nothing where one subgroup stores
    # the tiles at rows known at compile time (``computed_rows``)
    idle = split and G == 1 and M is not None
    budget = max(1, target.register_budget // shared)
    # the accumulator's part: half, or where the FMA microkernel broadcasts B from memory
    # and only A's columns are operands (``split``), ACC_SHARE
    acc_bytes = accumulator_bytes(budget) if split else budget // 2
    operands = budget - acc_bytes  # the operands' part
    acc_elems = max(S, acc_bytes // acc.size)  # at least one column of S rows
    m_cap = max(S, _next_pow2(M)) if M is not None else S * MAX_M_BLOCKS
    a_bytes = M * (K or ASSUMED_SIZE) * a.size if M is not None else 0
    one_tile = 0  # the rows of a tile that takes all of M (where one may)
    # a tile beyond M would only be cut into smaller ones, unless row_pieces makes M one
    # tile (where C's columns lie far apart, ``far_c``, neither cap nor tile)
    if split and M is not None and not far_c:
        m_cap = max(S, _pow2_at_most(M))
        whole = row_pieces(M, _next_pow2(M), S, idle)
        if len(whole) == 1 and (whole[0][1] > (S if idle else 2 * S)
                                or a_bytes >= STREAM_A_BYTES):
            m_cap = max(m_cap, whole[0][1])
            one_tile = whole[0][1]
    m_cap = min(m_cap, S * MAX_M_BLOCKS)
    if split and not target.broadcast_operands and G == 1 and M is not None and N is not None:
        return register_tiles(target, S, M, N, K, acc, a, operands, far_a, new_a)
    Mm = M if M is not None else ASSUMED_SIZE
    Nm = N if N is not None else ASSUMED_SIZE

    # FMAs in flight: a tile with fewer accumulator bytes than MIN_ACC_BYTES waits for
    # its FMAs' results (where remainders are split; GPUs hide latency with threads)
    latency = MIN_ACC_BYTES / (S * acc.size) if split else 0
    a_load = A_LOAD_COST if split and streams_a(target, M, K, a) else 1

    def computed(extent: int, tile: int) -> int:
        """The rows of a tile over `extent` rows the CPU computes (``computed_rows``)."""
        return computed_rows(extent, tile, S) if idle else tile

    def rows(m: int) -> int:
        return computed(M, m)

    def cost(m: int, n: int) -> float:
        """rounds * (m n / S + a_load m / S + n) summed over the pieces of C (one piece,
        the whole of C, where remainders are not split), m the rows computed."""
        ms = row_pieces(M, m, S, idle) if split and M is not None else ((Mm, m),)
        ns = column_pieces(N, n) if split and N is not None else ((Nm, n),)
        total = 0.0
        for me, tile in ms:
            mt = computed(me, tile)
            for ne, nt in ns:
                if grid:
                    rounds = (_ceil_div(_ceil_div(me, tile), max(1, grid[0]))
                              * _ceil_div(_ceil_div(ne, nt), max(1, grid[1])))
                else:
                    rounds = _ceil_div(_ceil_div(me, tile) * _ceil_div(ne, nt), G)
                total += rounds * (max(mt * nt / S, latency) + a_load * mt / S + nt)
        # each piece is code of its own: LLVM's time grows with it
        return total * (1 + PIECE_COST * (len(ms) * len(ns) - 1))

    def fits(m: int) -> bool:
        """Whether tiles of m rows are allowed: where remainders are split, two of A's
        columns fit the operands' part (one loaded while the other is used): a 128x3 f32
        tile filling all 32 zmm ran at 0.7x of 32x9; or the tile takes all of M and
        ``whole_m_columns`` allows a column."""
        return m == S or (rows(m) <= acc_elems and (not split or a_columns_fit(m)
                                                    or whole_m_columns(m) > 0))

    def a_columns_fit(m: int) -> bool:
        """Whether two of A's columns of a tile of m rows fit the operands' part."""
        return 2 * rows(m) * a.size <= operands

    def whole_m_columns(m: int, a_columns: int = 2) -> int:
        """The most columns of a tile of m rows that takes all of M where one subgroup
        computes only M's rows (``idle``) and FMAs take B's entries from memory
        (``target.broadcast_operands``: AVX-512): as many as leave `a_columns` of A's
        columns and one more register beside the accumulator (two: f64 56 rows: 2, 35
        rows: 3; where every tile is tall, ``tall_columns`` sets the columns instead); 0
        for other tiles.  One piece of rows, each of A's columns read whole, in the order
        of its addresses (f64 35x22x43: 40 rows by 4); where there are tall tiles, a tile
        of fewer than TALLER_MIN_COLUMNS is none (f64 56x22x43: 32x6, then 24 rows by 8
        and 6, not 64x2).  With one of A's columns: the bound of ``one_pass``."""
        if not (idle and m == one_tile and target.broadcast_operands):
            return 0
        r = rows(m)
        return (budget - a_columns * r * a.size - target.vector_bytes) // (r * acc.size)

    def column_registers(m: int) -> int:
        """The vector registers of a column of the accumulator of a tile of m rows."""
        return rows(m) * acc.size // max(1, target.vector_bytes)

    def one_pass(m: int) -> bool:
        """Whether a tile of m rows that takes all of M takes all of N as well, with one
        of A's columns beside its accumulators (``whole_m_columns``) where two would not
        fit: C in one pass over A, as LIBXSMM computes it (f32 35 rows by 9, 27 zmm of
        accumulators, not by 3 three times: f32 35x9x64 0.73-0.86 of LIBXSMM -> 1.00-1.27;
        f64 43x4x86, 6 zmm by 4 columns, not by 2 twice: 0.84-0.92 -> 1.06-1.16).  With
        the members from L3, 12 random shapes a type whose tiles it changes, batched, A
        shared and B shared, two placements each: f32 1.12x as fast at the geometric mean
        (0.90-1.33x), f64 1.06x (0.94-1.20x).  Short, dense work lost some: f64 20x9x20
        with A shared ran 1.19-1.52 of LIBXSMM in 3-column tiles, 1.02-1.12 in one.  Not
        where N takes several tiles even so: f64 51x11x37 in 3-column tiles of all of M
        ran 0.91-0.92 of LIBXSMM, its tall rows' 32x6 and 32x5 1.00-1.03
        (docs/performance.md, "All of M and all of N in one tile")."""
        return (N is not None and column_registers(m) >= ONE_PASS_MIN_REGISTERS
                and 0 < N <= whole_m_columns(m, 1))

    def tall_columns(m: int) -> int:
        """The columns of a tile of m rows where every tile is tall: as many as
        TALL_ACC_SHARE of the registers holds where A's column and one register more fit
        beside them (f64 32 rows: 6, 24 zmm as LIBXSMM's 32x6; 5 with room for two of A's
        columns ran 0.95x as fast over 24 random shapes); a taller tile, all of M, leaves
        two of A's columns as ``whole_m_columns`` does (f32 89 rows, 6 zmm: 3, not 4; with
        one, 24 random f32 shapes of M > 64 ran 0.98x as fast with A shared, 0.98x
        batched)."""
        column = rows(m) * acc.size
        room = budget - (1 if m <= tall else 2) * rows(m) * a.size - target.vector_bytes
        return max(1, min(int(budget * TALL_ACC_SHARE), room) // column)

    def rows_loading(column_bytes: int) -> int:
        """The rows of a tile that loads `column_bytes` of A's column per K step: S
        doubled until it does, or until m_cap (M's rows) or ``fits`` stops it."""
        m = S
        while rows(m) * a.size < column_bytes and m * 2 <= m_cap and fits(m * 2):
            m *= 2
        return m

    # tiles of at least STREAM_ROW_BYTES of A's column per K step where M has the rows for
    # them (static M, remainders split) and A has STREAM_A_BYTES
    tall = 0
    if split and M is not None and a_bytes >= STREAM_A_BYTES:
        tall = rows_loading(STREAM_ROW_BYTES)
        if rows(tall) * a.size < STREAM_ROW_BYTES:
            tall = 0
    best = None
    # where N is wider than any tile (A is read once per column tile several times
    # anyway), every tile is that tall; else below
    wide = bool(tall) and Nm * S > acc_elems
    m = tall if wide else S
    if split and M is not None and K != 1 and G == 1 and not tall:
        m = rows_loading(MIN_A_STEP_BYTES)
    while m <= m_cap and fits(m):
        n_max = max(1, acc_elems // rows(m))
        if split and m != S and not a_columns_fit(m):  # all of M (``fits``)
            n_max = min(n_max, whole_m_columns(m))
        if one_pass(m):
            n_max = max(n_max, N)
        if wide and idle:
            n_max = tall_columns(m)
        if N is not None:
            n_max = min(n_max, N)
        widths = range(1, n_max + 1)
        if tall and idle and m > tall and n_max < TALLER_MIN_COLUMNS <= Nm:
            widths = []  # a taller tile only with TALLER_MIN_COLUMNS or more
        elif wide and idle:
            widths = [n_max]
        elif idle and N is not None:  # as narrow as their number allows (13: 7 + 6)
            widths = [n for n in widths if n == narrowest(N, n)]
            if (m == one_tile and widths and N <= 2 * widths[-1]
                    and K is not None and K >= FEWEST_PASSES_MIN_K
                    and (new_a and shared_b or column_registers(m) == 2
                         and widths[-1] <= FEWEST_PASSES_COLUMNS)):
                widths = widths[-1:]  # the fewest passes over A (FEWEST_PASSES_MIN_K)
        for n in widths:
            key = (cost(m, n), -(rows(m) * n), abs(rows(m) / S - n))
            if best is None or key < best[0]:
                best = (key, m, n)
        m *= 2
    _, m, n = best
    # where subgroups are SIMD lanes (the CPU), mul_add takes B's entries from memory one
    # broadcast at a time (FMA memory operands) when they are real and need no
    # conversion: then only A's columns take registers
    from_memory = bool(target.vector_bytes) and b == acc and not b.is_complex
    # tall rows and the rest apart where the cost picks shorter tiles, or tiles that tall
    # but narrower than two column tiles of them would take N (f64 56x9x56: 32x5 and 32x4,
    # not 32x3 three times), or, where each work-group's A is new to the caches (`new_a`),
    # than fewer column tiles of them would: f64 128x16x128 as 32x6, 32x6, 32x4, A read
    # three times, not as four 32x4 tiles, the one piece the cost prefers (see
    # "N of 16 and 21: fewer passes over a member's A" in docs/performance.md)
    widest = acc_elems // tall if tall else 0
    if (tall and not wide and N is not None and G == 1 and tall <= M
            and (m < tall or (m == tall and n < N and (
                N <= 2 * widest or (new_a and _ceil_div(N, widest) < _ceil_div(N, n)))))):
        tiles = tall_rows(tall, acc_elems, M, N, S, acc, new_a)
        return whole_k(tiles, M, N, K, acc, rows(tall) * tiles.n * acc.size,
                       rows(tall) * a.size, WHOLE_K_BUDGET * budget, from_memory and G == 1)
    operand_bytes = rows(m) * a.size + (0 if from_memory else n * b.size)
    room = operands  # for a K step's operands: beside a ``one_pass`` tile, what it leaves
    if rows(m) * n * acc.size > acc_bytes:
        room = budget - rows(m) * n * acc.size - target.vector_bytes
    k = _k_step(SPLIT_MAX_K if split else MAX_K, operand_bytes, room)
    if idle or (tall and m >= tall):  # a K step loads at most STREAM_ROW_BYTES of A
        k = min(k, _pow2_at_most(STREAM_ROW_BYTES // (rows(m) * a.size)))
    if not split:
        if K is not None:
            k = min(k, _next_pow2(K))
        return Tiles(m, n, k)
    k_rest: Tuple[int, ...] = ()
    if K is not None:
        k, k_rest = k_steps(K, k)
    return whole_k(Tiles(m, n, k, row_pieces(M, m, S, idle) if M is not None else (),
                         column_pieces(N, n) if N is not None else (), k_rest),
                   M, N, K, acc, rows(m) * n * acc.size, operand_bytes,
                   WHOLE_K_BUDGET * budget, from_memory and G == 1)


def whole_k(tiles: Tiles, M: Optional[int], N: Optional[int], K: Optional[int],
            acc: ScalarType, acc_bytes: int, step_bytes: int, limit: Optional[float],
            broadcasts: bool, large_c_max: int = WHOLE_K_LARGE_C) -> Tiles:
    """tiles with all of a static K one step (no K loop: matmul then computes C a few
    columns at a time, ``matmul.fused_columns``; a K that is not a power of two is a
    product for each power of two in it, ``matmul.k_parts``) where one subgroup's FMAs
    take B's entries from memory (`broadcasts`: no coopmatrix of K's rows distributed
    over subgroups) and WHOLE_K_MAX, WHOLE_K_TILES and the register bound allow
    (`acc_bytes`: the accumulator, `step_bytes`: a K step's operands, together at most
    `limit` bytes; `limit` None: no register bound; none either where C of
    WHOLE_K_C_BYTES or more spans several row tiles, whose K may be up to
    `large_c_max`); else tiles as they are."""
    large_c = (M is not None and N is not None and tiles.m < M
               and M * N * acc.size >= WHOLE_K_C_BYTES)
    if (not broadcasts or K is None or tiles.k >= K
            or K > (large_c_max if large_c else WHOLE_K_MAX)
            or tiles.count() < WHOLE_K_TILES
            or (limit is not None and not large_c and acc_bytes + K * step_bytes > limit)):
        return tiles
    return dataclasses.replace(tiles, k=K, k_rest=())


def far_column_tiles(target: Target, S: int, M: int, N: int,
                     acc: ScalarType) -> Optional[Tiles]:
    """Tiles of one register's rows by all of N, K in steps of one, where A's columns lie
    far apart (``matmul.far_operands``: the work-group's block of a tall matrix, each
    column a stream of its own, not prefetched: ``matmul.streams_far_a``), so that each of
    A's columns is read once: where FMAs take B's entries from memory (AVX-512), N is two
    or more and N accumulators, a register of A and one of B's entries fit the vector
    registers; None otherwise.  With the benchmark's blocks of 100 rows (2 threads, the
    blocks then prefetched) f32 16x16 in 16x16 tiles ran 1.45x as fast as in one 128-row
    tile by 2 columns (A read eight times), f32 9x9 in 16x9 1.14x as in 64x3, f64 9x9 in
    8x9 1.12x as in 16x9 with K steps of two; not prefetched, f64 16x16 in 8x16 at
    0.98-1.02 of LIBXSMM, in 32x4 at 0.89-0.94.  A gemv's one column is a chain of
    dependent FMAs (f32 1x12 in 16x1 tiles: 0.54 of LIBXSMM); without AVX-512 a tile of
    one ymm takes a broadcast of B for each FMA (f32 9x9 in 8x9 at 0.42-0.43 of LIBXSMM,
    in the other rules' tiles 0.88-0.92)."""
    per_column = -(-S * acc.size // target.vector_bytes)  # registers of S rows
    if (N < 2 or not target.broadcast_operands
            or (N + 1) * per_column + 1 > target.register_budget // target.vector_bytes):
        return None
    return Tiles(S, N, 1, row_pieces(M, S, S, True), ((N, N),), ())


def tall_rows(tall: int, acc_elems: int, M: int, N: int, S: int, acc: ScalarType,
              new_a: bool) -> Tiles:
    """Tiles of `tall` rows over the first ``M - M % tall`` rows, N in the fewest column tiles
    (those that fit `acc_elems`: A is read once per column tile), the widest, or of equal
    width where the widest would leave a last tile narrower than TALL_LAST_COLUMNS; the rows
    left one partial tile (``computed_rows``), N in the fewest column tiles of equal width:
    f64 56x9x56 on AVX-512 as 32x5 and 32x4, then 24 rows in 32 by 5 and 4 (LIBXSMM: 32x5
    and 32x4 tiles, then 24-row ones); f32 120x9x120 with each member's A (`new_a`) as 64x6
    and 64x3, then 56 rows in 64 by 5 and 4, with A shared as 64x5 and 64x4.  With each
    member's A new to the caches (a batch from L3), 16x9 and 8x9 tiles ran at 0.92-0.99 of
    LIBXSMM, 32x6 and 32x3 for the first 32 rows at 0.98-1.05, and the last 24 rows as one
    tile, not 16x9 and 8x9, as fast or up to 9% faster again.  K steps of one (24 FMAs a step
    of a tall tile beside the loop's few integer instructions): within 1% of steps of two,
    and a fifth less LLVM IR for the pieces (f32 84x9x84 in a chain: 1562 lines against
    1742, 1643 before tall tiles; its cold compile as before them)."""
    rest = M % tall
    n = min(N, acc_elems // tall)
    if not new_a or 0 < N % n < TALL_LAST_COLUMNS.get(acc.name, 1):
        n = narrowest(N, n)
    rows, columns = ((M - rest, tall),), (column_pieces(N, n),)
    if rest:  # one tile of the rows left, N in the fewest column tiles of equal width
        tile = max(S, _next_pow2(rest))
        rows += ((rest, tile),)
        columns += (column_pieces(N, narrowest(N, acc_elems // computed_rows(rest, tile, S))),)
    return Tiles(tall, n, 1, rows, columns[0], (), columns)


def _k_step(most: int, operand_bytes: int, operands: int) -> int:
    """The largest power of two at most `most` whose K step's operands fit `operands`."""
    k = 1
    while k * 2 <= most and (k * 2) * operand_bytes <= operands:
        k *= 2
    return k


def tile_registers(r: int, n: int, masked: bool, sets: int = 1, k: int = 1) -> int:
    """The vector registers a K step of `k` of an AVX2 register tile holds
    (``register_tiles``): `sets` accumulators of r registers by n columns, k of A's
    columns (r registers each) or, where n < r, k times B's n broadcasts, and the mask of
    A's partial register where rows are `masked` (checked)."""
    return sets * r * n + k * min(r, n) + masked


def register_chains(target: Target, rows: int, n: int, masked: bool, acc: ScalarType,
                    k: int, sets: int) -> int:
    """At most `sets` sets of accumulators of a tile of `rows` x `n` in K steps of `k`:
    where FMAs take no broadcast operand (AVX2), as many as fit the registers with the
    tile's operands (``tile_registers``): f32 2x85x12's last 8x7 tile in two sets (14
    accumulators, A's register and its mask) spilled."""
    if target.broadcast_operands or not target.vector_bytes:
        return sets
    regs = target.register_budget // target.vector_bytes
    r = _ceil_div(rows * acc.size, target.vector_bytes)
    while sets > 1 and tile_registers(r, n, masked, sets, k) > regs:
        sets -= 1
    return sets


def two_line_rows(target: Target, S: int, M: int, N: int, K: Optional[int],
                  acc: ScalarType, a: ScalarType, new_a: bool) -> int:
    """The fewest rows of ``register_tiles``'s tiles: where there is a K loop, as many as
    load MIN_A_STEP_BYTES of A's column per K step (f64 16, f32 32) or, a power of two,
    as M has (f64 12 rows: tiles of 8 rows or more, not three of 4), unless A is one all
    work-groups share (not `new_a`), larger than REREAD_A_BYTES, and N takes more than
    FEW_COLUMN_TILES column tiles of those rows; else S.

    A tile of one cache line a step, reading each member's A from memory, ran at 0.57-0.76
    of LIBXSMM in many shapes (f64 42x12x114 in 8x6 tiles, f32 107x4x72 in 16x4; A's
    columns not aligned to a cache line, as NumPy allocates them, make each step's line
    two), where two lines a step (LIBXSMM's AVX2 blocking) ran at 1.0-1.05: with the
    members from L3, 24 random shapes whose tiles changed, 1.15x as fast (median,
    0.96-1.89x)."""
    m = S
    while K != 1 and m * a.size < MIN_A_STEP_BYTES and m * 2 <= _pow2_at_most(M):
        m *= 2
    if m == S or new_a:  # a member's A: two lines a step whatever its size
        return m
    regs = target.register_budget // target.vector_bytes
    r = _ceil_div(m * acc.size, target.vector_bytes)
    n = max((n for n in range(1, N + 1) if tile_registers(r, n, False) <= regs), default=1)
    if (M * (K or ASSUMED_SIZE) * a.size > REREAD_A_BYTES[acc.size]
            and _ceil_div(N, n) > FEW_COLUMN_TILES):
        return S
    return m


def register_tiles(target: Target, S: int, M: int, N: int, K: Optional[int],
                   acc: ScalarType, a: ScalarType, operands: int, far_a: bool = False,
                   new_a: bool = False) -> Tiles:
    """Tiles of static M and N for one subgroup of one vector register of lanes whose FMAs
    take no broadcast operand (``target.broadcast_operands`` false: AVX2), where each of
    B's broadcasts takes a register and a tile that does not fit the register file spills
    in the K loop.

    A tile of m rows and n columns takes ``r = m / lanes`` registers per column; it fits
    when ``r n + min(r, n)``, and one more where its rows are checked (the mask of A's
    partial register), is at most the budget's registers (``register_budget /
    vector_bytes``, which leaves one for a broadcast or a register of A): the accumulator
    and either A's column (r registers, one broadcast at a time) or, where n < r, B's n
    broadcasts with A taken one register at a time (the cpu's ``coop.StreamedA``; f32
    32x3: 12 + 3 + 1 of 16 ymm, LIBXSMM's AVX2 blocking).  K steps are of two where two
    of A's columns fit the operands' part of the budget and every tile's step of two
    leaves K2_SPARE registers free, else of one.  A K step of a tile costs
    ``max(r n, latency) + LOAD_COST (r + n)``, a load weighed by the type (an accumulator
    of fewer than MIN_ACC_BYTES waits for its FMAs) and its stores ``r n``.  For each power
    of two m from ``two_line_rows`` (which takes `new_a`; S where A's columns lie far apart,
    `far_a`: a prefetched block, whose tall kernel ran 7-22% slower in tiles of two lines)
    up to the next power of two of M, M is cut as ``row_pieces`` does, or, where all of M is
    less than a tile of at most four registers of rows and there is more than one column (or
    M is at most two registers), as one partial tile, which computes and holds only the
    registers of M's rows (f32 10 rows: one 16-row tile in 16x5 and 16x4, not 8x9 and a
    masked 8x9: as many FMAs, fewer loads; f64 9 rows: three ymm by 3 columns, not 8x5 + 8x4
    and a masked 4x9, with the members from L3 1.45x as fast; f32 20 rows: three ymm by 3,
    not 16x5 + 16x4 and 8x9, 1.06x; a gemv's one column kept its pieces, 0.93x with A
    shared; larger partial tiles, f64 22 rows in 32, leave two columns beside their
    registers and were not measured); for the first m (``two_line_rows``' rows) also as its
    full tiles and the rest in one partial tile of m rows (``row_pieces``' `idle` cut: f32
    56 rows as 32x3 and 24x3, LIBXSMM's AVX2 blocking, not 16 and 8 rows in pieces of their
    own).  Each piece of rows takes the column count that costs it least; the least total
    cost wins, each piece adding PIECE_COST.  A later piece of one register of rows, or the
    partial tile of m rows, whose own tiles do not take all of N then takes the first
    piece's column count where it fits and at least two blocks of the pieces' columns fit N:
    all of M takes C a block of columns at a time (``matmul.column_blocks``), as LIBXSMM's
    AVX2 code does (f64 20x78x54 with A shared: 16x3 and 4x13 in blocks of 39 columns ran at
    0.72 of LIBXSMM, 16x3 and 4x3 in blocks of 3 at 1.10; 25x53x45 0.83 -> 1.01; batched
    27x105x58 in 16x3, 8x5 and 4x3 in blocks of 15 0.96, in 16x3 and its last 11 rows in
    three ymm by 3, blocks of 3, 1.24; f32 88x116x56, 32x3, 16x4 and 8x3 in blocks of 12
    0.80, 32x3 and 24x3 in blocks of 3 0.92, 24x4 -- the cost's own choice for the partial
    tile -- 0.84).  One tile over all of N reads B once anyway (f64 17x13x11 in 4x3: 1.08 ->
    0.99).  The partial tile only for the first m: for a larger one it made tiles the rule of
    ``two_line_rows`` had left out (f64 89x41x99, A of 70 KiB read by 14 column tiles of
    16x3 instead of 7 of 8x6: 1.00 -> 0.93; the ger-like f32 115x62x1 in 32x3 instead of
    16x6: 1.59 -> 1.48)."""
    regs = target.register_budget // target.vector_bytes
    lanes = max(1, target.vector_bytes // acc.size)
    latency = MIN_ACC_BYTES / target.vector_bytes
    steps = K if K is not None else ASSUMED_SIZE
    load = LOAD_COST[acc.size]  # (f32 and f64 only: ``split_remainders``)

    def computed_registers(extent: int, tile: int) -> Tuple[int, bool]:
        """The registers per column a tile of `tile` rows over `extent` rows computes
        (a partial tile only those holding M's rows, ``computed_rows``), and whether the
        last is partial (its rows checked: A's partial register needs a mask)."""
        rows = computed_rows(extent, tile, lanes)
        return rows // lanes, extent < tile and extent % lanes != 0

    def columns(extent: int, tile: int) -> Optional[Tuple[float, int]]:
        """(cost, n) of the best column count for rows `extent` in tiles of `tile`."""
        r, masked = computed_registers(extent, tile)
        best = None
        for n in range(1, N + 1):
            if tile_registers(r, n, masked) > regs:
                break
            pieces = column_pieces(N, n)
            cost = sum(_ceil_div(extent, tile) * _ceil_div(ne, nt)
                       * (steps * (max(r * nt, latency) + load * (r + nt)) + r * nt) for ne, nt in pieces)
            cost *= 1 + PIECE_COST * (len(pieces) - 1)
            if best is None or cost < best[0]:
                best = (cost, n)
        return best

    best = None
    first = m = S if far_a else two_line_rows(target, S, M, N, K, acc, a, new_a)
    while m <= min(max(S, _next_pow2(M)), S * MAX_M_BLOCKS):
        full, rest = M - M % m, M % m
        cuts = {row_pieces(M, m, S)}
        if full and m == first:  # the rest one partial tile of m rows
            cuts.add(row_pieces(M, m, S, idle=True))
        if not full and S < rest and m <= 4 * S and (N > 1 or rest <= 2 * S):
            cuts.add(((rest, m),))  # all of M one partial tile
        for rows in cuts:
            chosen = [columns(extent, tile) for extent, tile in rows]
            if None in chosen:
                continue
            cost = sum(c for c, _ in chosen) * (1 + PIECE_COST * (len(rows) - 1))
            if best is None or (cost, m) < best[0]:
                best = ((cost, m), m, rows, [n for _, n in chosen])
        m *= 2
    if best is None:  # not even a column of S rows fits: the narrowest tile
        return Tiles(S, 1, 1, row_pieces(M, S, S), column_pieces(N, 1), k_steps(K, 1)[1]
                     if K is not None else ())
    _, m, rows, ns = best
    # a later piece of one register of rows, or the partial tile of m rows, whose own tiles
    # do not take all of N takes the first piece's column count where it fits and all of M
    # then takes C in at least two blocks of columns
    registers = [computed_registers(*piece) for piece in rows]
    shared = [ns[0] if i and (r == 1 or tile == m) and n < N
              and tile_registers(r, ns[0], masked) <= regs else n
              for i, ((r, masked), (_, tile), n) in enumerate(zip(registers, rows, ns))]
    if column_block([column_pieces(N, n)[0] for n in shared]):
        ns = shared
    k = _k_step(SPLIT_MAX_K, m * a.size, operands)
    k_rest: Tuple[int, ...] = ()
    if any(tile_registers(r, n, masked, 1, k) + K2_SPARE > regs
           for (r, masked), n in zip(registers, ns)):
        k = 1
    if K is not None:
        k, k_rest = k_steps(K, k)
    # a short K in one step as with AVX-512 (``whole_k``), bounded in the terms of the
    # code it gets: C computed a column at a time, each of M's registers K FMAs, A's
    # M x K block held in registers where it fits beside a column and B's broadcast
    # (WHOLE_K_HELD), else reloaded for each column -- which pays where the tiles would
    # write a large C in passes of row tiles (WHOLE_K_C_BYTES)
    tiles = Tiles(m, ns[0], k, rows, column_pieces(N, ns[0]), k_rest,
                  tuple(column_pieces(N, n) for n in ns))
    if M is None or K is None or K <= WHOLE_K_HELD:
        return whole_k(tiles, M, N, K, acc, 0, 0, None, True)
    column = _ceil_div(M, lanes) * target.vector_bytes
    return whole_k(tiles, M, N, K, acc, column, column,
                   target.register_budget - target.vector_bytes, True, WHOLE_K_LARGE_C_YMM)

