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
than its tile is always checked; otherwise tiles test ``size == tile`` at run time (a
test that folds after lower-foreach: the full tiles' size is the tile, and the remainder
tile's never is).  On a matrix unit that stages every operand (AMX,
``unit_tiles.staged_edges``) a checked tile takes K's remainder as the last, checked
step of its K loop.
Where remainders get smaller tiles (``tiles.split_remainders``: f32 and f64 on the CPU)
and sizes are static, C is cut into pieces instead, each a foreach_tile of its own tile
shape (M: the full tiles, then smaller power-of-two multiples of the subgroup size, the
last rows checked; N: the full tiles, then one tile of the remaining columns), and the K
remainder is unchecked steps of smaller powers of two: no masked full tile, no branch.
Where one subgroup does all the work, the pieces of a static M are rows of one tile
(``fused_columns``, the FMA microkernel only): a gemv's (one column) run one K loop
together, b's entries loaded once per step; a ger's (K a single step) make a loop over
C's columns that writes each column whole, in the order of its addresses, A's blocks
loaded once where they fit the registers.  A tile whose accumulators are fewer than
MIN_ACC_BYTES carries several of them over K, added up after the loop (``chains``).
mul_add takes A and B in their own element types (promotion happens inside it), and
accumulates in the output's type (f32 for 16-bit float outputs).
Operands whose columns lie a page or more apart, each a stream of its own (a
work-group's block of rows of a tall matrix), are prefetched into L2 before the tiles
(``far_operands``), but for a block of A small enough for the hardware prefetchers
(``streams_far_a``), and so is a batch member's A of f64 that the tiles read in several
passes (``prefetched_a``).  Pieces of M take C a block of columns at a time, every
piece's tiles in a block before the next (``column_blocks``).
"""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

from ...ir.builder import coopmatrix
from ...ir.core import Value
from ...ir.layout import layout_of
from ...ir.numerics import accumulate_type
from ...ir.rewrite import set_attribute
from ...ir.types import INDEX, ScalarType
from ..index_math import Int, known
from ..lower_foreach import EDGES_IN_ONE_COPY
from .emit import Emitter, checked_flag
from .tiles import (MIN_ACC_BYTES, Tiles, accumulator_bytes, choose_tiles, column_block,
                    column_pieces, computed_rows, register_chains, split_remainders,
                    widened_floats)
from .unit_tiles import fit_to_unit, staged_edges

FULL, PARTIAL, MAYBE = "full", "partial", "maybe"
#: the columns of A a gemv.t's dot products take at once (f64 AVX-512, 56x56 and 120x120:
#: 4 and 16 columns ran at most as fast as 8, 12 (a tile of 8 left over) at a third),
#: where A is the same matrix in every work-group (``dot_columns``)
DOT_COLUMNS = 8
#: at most this many where A is a batch's member whose columns are read together
#: (``dot_columns``)
MEMBER_DOT_COLUMNS = 4
#: a gemv.t's column of A longer than this (two cache lines) is read by itself where A
#: is a batch's member (``dot_columns``)
STREAM_COLUMN_BYTES = 128
#: columns this far apart lie in pages of their own, where hardware prefetchers, which
#: follow a stream within a page, see each as a stream of its own (``far_columns``)
PAGE_BYTES = 4096
#: at most this much of an operand is prefetched, and into this cache level (L2)
PREFETCH_BYTES, PREFETCH_LEVEL = 64 * 1024, 1
#: the fewest columns of far-apart operands that are prefetched (``far_operands``)
FAR_STREAMS = 16
#: a far-apart block of A smaller than this is not prefetched (``streams_far_a``)
FAR_STREAMED_BYTES = 24 * 1024
#: a batch member's A that ``prefetched_a`` prefetches: its bytes (from, to), its
#: entries' bytes, the fewest passes over it (column tiles) and row tiles in a pass
PREFETCH_A_BYTES, PREFETCH_A_ENTRY_BYTES = (16 * 1024, PREFETCH_BYTES), 8
PREFETCH_A_PASSES, PREFETCH_A_ROW_TILES = 3, 4


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
    if known(M) == 1 and one_row_as_gemv(em, A, ak, B, tb, C, N, K):
        return
    matmul(em, A, ta, B, tb, C, M, N, K)


def one_row_as_gemv(em: Emitter, A: Value, ak: int, B: Value, tb: str, C: Value, N: Int,
                    K: Int) -> bool:
    """A gemm of one row (M = 1) lowered as the gemv ``c = alpha op(B)^T a + beta c`` (a:
    op(A)'s row, c: C's row, both vectors of memory), where remainders are split (the
    CPU's FMA path) and the gemv is a matmul (op(B) = B^T: N rows, vectors down B's
    columns) or dot products (``dot_columns``).  As a matmul of one row each tile held
    one row, a vector of a single lane per column: f32 1x85x12 with B shared ran at
    0.79 of LIBXSMM's speed with AVX-512, 0.71-0.80 with AVX2.  Returns whether it did."""
    acc = accumulate_type(C.type.element)
    if not split_remainders(em.target, acc, A.type.element, B.type.element):
        return False
    ta = "t" if tb == "n" else "n"  # op(B)^T
    if ta == "t" and not dot_columns(em, B, ta, A, C, N, K):
        return False
    gemv(em, B, ta, em.line(A, ak, K), em.line(C, 1, N), N, K)
    return True


def lower_gemv(em: Emitter) -> None:
    inst = em.inst
    A, b, c = (inst.slots[s] for s in ("A", "B", "C"))
    ta = inst.modifier("ta")
    am, ak = (0, 1) if ta == "n" else (1, 0)
    M = em.pick_dim((c, 0), (A, am))
    K = em.pick_dim((A, ak), (b, 0))
    gemv(em, A, ta, b, c, M, K)


def gemv(em: Emitter, A: Value, ta: str, b: Value, c: Value, M: Int, K: Int) -> None:
    """c := alpha op(A) b + beta c for vectors b (K) and c (M)."""
    J = dot_columns(em, A, ta, b, c, M, K)
    if J:
        dot_products(em, A, em.view_as_column(b), em.view_as_column(c), known(M), known(K), J)
        return
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
           rows: int, checked: bool, NT: int, k_full: Optional[int]) -> int:
    """How many sets of accumulators (`rows` x NT each, `checked`: rows checked) the K loop
    carries, each taking every P-th step and added up after it: where remainders are split
    (the FMA microkernel, static K), enough for MIN_ACC_BYTES of FMAs in flight, as many
    as fit the registers (``register_chains``), else one: a gemv tile of one register
    waited for each FMA's result before the next."""
    if k_full is None or not split_remainders(target, acc, ea, eb):
        return 1
    P = max(1, min(-(-MIN_ACC_BYTES // (rows * NT * acc.size)), k_full // tiles.k))
    return register_chains(target, rows, NT, checked, acc, tiles.k, P)


#: a loop step of a K loop (``k_loop``) takes K steps for at least ROUND_FMAS vector
#: FMAs, in at most ROUND_SETS rounds of its sets of accumulators (``rounds_of_sets``).
#: 48, not 32: AVX2 f32 120x9x120 in 32x3 tiles (12 FMAs a step) then takes four steps a
#: loop step, as LIBXSMM's K loop does, not three: 0.95-0.96 of LIBXSMM -> 1.00-1.01 from
#: L2 (128x9x128 0.99-1.01 -> 1.02-1.03); 24 random shapes a type, with and without
#: AVX-512, from L2 and from L3 within 1% but for AVX2 f64 from L3, 1.01 -> 1.04; cold
#: compile 3-4 ms longer at the median of the benchmark's gemm kernels
ROUND_FMAS, ROUND_SETS, ROUND_SPARE = 48, 4, 2


def rounds_of_sets(em: Emitter, tiles: Tiles, split: bool, rows: List[Rows], NT: int,
                   P: int, extent: Optional[int] = None) -> int:
    """How many rounds of its P sets of accumulators a loop step of the K loop of a full
    tile (`rows` x NT; `split`: remainders split, the FMA microkernel) takes: enough for
    ROUND_FMAS vector FMAs, at most ROUND_SETS, where the accumulators, A's registers of
    a step and ROUND_SPARE more fit the registers.  A step of few FMAs -- AVX2 f64 16x2:
    8 FMAs beside 4 loads of A and 2 broadcasts of B -- spent 5-6 more instructions on the
    loop (its counter, addresses, compare and branch), and where the members come from
    L3 or memory the loads of A fell behind: LIBXSMM's K loop takes four steps.  Against
    one round, in one process (operands at random offsets; 24 MiB batches on two
    threads): 16 random AVX2 f64 shapes of N = 2-4, M >= 40 0.86 -> 0.99 of LIBXSMM
    batched, 0.94 -> 1.00 with B shared, 1.06 -> 1.10 with A shared; 24 random shapes of
    M, N, K in 1-128 a kind, with AVX-512 f64 1.01-1.03 -> 1.02-1.04, f32 0.98-1.12 ->
    1.02-1.10, without f64 1.12-1.14 -> 1.12-1.16, f32 1.50-1.62 -> 1.54-1.64; from L2
    (512 KiB, one thread) as fast as before.  A partial tile of a static piece counts the
    registers of the rows it computes of its piece's `extent`: f32 84x9x84 with AVX-512, all of M
    one tile of 128 rows in 6 zmm by 3 columns, counted as 8 zmm stayed one step (0.78
    -> 0.96 of LIBXSMM from L3; the DG shapes of ``make bench`` f32 1.01-1.02 -> 1.05-1.07
    batched and A shared).  Only full tiles: the pieces of the remainders run far less
    often, and theirs grew cold compile by a tenth more (the kernels of ``make bench``:
    22 -> 28 ms median with AVX-512, 23 -> 29 without).  Not a tile of one column (a
    gemv's: each of A's registers feeds one FMA, the loads bound it): f64 gemv with A
    shared from L3 84x84 1.13 -> 0.71 of LIBXSMM, 100x60 1.22 -> 0.74.  Not AVX2's tiles
    that load A's column whole and broadcast B's entry for each column (few rows, many
    columns): LLVM took the next steps' broadcasts early and spilled (f64 3x117x81: 20
    vector stack accesses), and none ran faster (f32 3x117x44 2.04 -> 1.81 of
    LIBXSMM).  Not a tile whose accumulators take more than ``accumulator_bytes`` of the
    registers (``tiles.one_pass``, f32 35x9x35 in 27 zmm): compiled for Skylake-SP
    (TTLC_CPU=skylake-avx512) LLVM loaded the next step's A early and spilled (82 vector
    stack accesses), while one step a loop step runs as fast on Zen 5 (0.98-1.03)."""
    height = sum(MT for _, MT, _ in rows)
    if not split or height < tiles.m or NT < tiles.n or NT == 1:
        return 1
    # registers of a column (of a partial tile, those of the rows it computes)
    computed = computed_rows(extent, height, em.sgs) if extent is not None else height
    column = -(-computed // em.sgs)
    accumulators = column * NT * P
    if em.target.broadcast_operands:  # B's entries FMA operands from memory
        operands = column + ROUND_SPARE
    elif NT < column:  # A a register at a time (``mul_add.fma_kernel``'s StreamedA)
        operands = 1 + ROUND_SPARE
    else:  # A's column whole, a broadcast of B's entry for each column (see above)
        return 1
    # a mask for the rows of a partial tile, in a vector register without mask registers
    mask = any(checked for _, _, checked in rows) and not em.target.mask_registers
    if accumulators + operands + mask > em.target.register_budget // em.target.vector_bytes:
        return 1
    if (em.target.broadcast_operands and accumulators * em.target.vector_bytes
            > accumulator_bytes(em.target.register_budget)):
        return 1  # a ``tiles.one_pass`` tile (above)
    return max(1, min(ROUND_SETS, -(-ROUND_FMAS // (accumulators * tiles.k))))


def column_blocks(em: Emitter, m_pieces: list, row_columns: List[list]
                  ) -> Optional[Tuple[int, int]]:
    """(width, end): where one subgroup computes several pieces of a static M, C's columns
    [0, end) are taken a block of `width` (the least common multiple of the pieces'
    first column tiles) at a time, the tiles of every piece of rows in a block before the
    next block, so that all of M reads a block of B while it is in L1; the columns from
    `end` on piece by piece.  None where fewer than two blocks fit the first column piece
    of every piece of rows.  Piece after piece, each reading all of B, B came from memory
    for the first piece and from L2 for the next (AVX2 f64 24x48x53 batched, 16x3 and 8x6
    tiles: 0.80 of LIBXSMM; in blocks of 6 columns 1.00; C's columns are also written
    whole, one block after the other).  So also where the pieces' column tiles agree
    (AVX-512 f64 72x66x56 in 32x6 and 8x6, LIBXSMM's order): with the members from L3,
    the shapes whose code it changed among 24 random ones (two surveys), ttlc / LIBXSMM
    batched f64 0.98 / 1.00 -> 1.01 / 1.05, f32 0.99 / 0.92 -> 1.02 / 0.94, A shared f64
    0.97 -> 0.98, f32 1.04 -> 1.06, B shared 1.01-1.03 -> 1.03; from L2 as before."""
    if len(m_pieces) < 2 or em.subgroups != (1, 1):  # pieces of M: M is static
        return None
    firsts = [columns[0] for columns in row_columns]
    if any(known(ne) is None for _, ne, _, _ in firsts):
        return None
    return column_block([(ne, NT) for _, ne, NT, _ in firsts])


def columns_from(n0: int, columns: list) -> list:
    """The pieces of `columns` (first, extent, tile, status) from column n0 on, n0 in the
    first piece at one of its tiles' starts."""
    (first, extent, NT, _), rest = columns[0], columns[1:]
    left = first + extent - n0
    return ([(n0, left, NT, _status(left, NT))] if left else []) + rest


def row_blocks(m_pieces: list) -> List[Tuple[int, int, bool]]:
    """(first row, rows, checked) of every tile of the static pieces of M."""
    return [(m0 + t, MT, t + MT > me) for m0, me, MT, _ in m_pieces for t in range(0, me, MT)]


def column_bytes(m_pieces: list, acc: ScalarType) -> int:
    """Bytes of a column of all the row blocks of M (``row_blocks``)."""
    return sum(MT for _, MT, _ in row_blocks(m_pieces)) * acc.size


#: the most FMAs per register of rows in a loop step over C's columns where K is a single
#: step of three or more (``fused_columns``): K FMAs per column
STEP_COLUMN_FMAS = 24


def fused_columns(em: Emitter, m_pieces: list, N: Int, acc: ScalarType, single_step: bool,
                  split: bool, ta: str, k_step: int = 1, far_c: bool = False) -> int:
    """The columns of a tile made of all the row blocks of M (``row_blocks``), or 0 where
    C keeps its tiles.  One such tile runs one K loop for all rows, B's tile loaded once
    per step; with a single K step (ger), the columns are a step of the loop over C's
    columns (``matmul``'s ``rank_one``).  Only where remainders are split (``split``:
    the FMA microkernel), one subgroup does all the work and M and N are static, and then:

    * K a single step (`k_step`): as many columns as fit the accumulators' part of the
      register budget (``accumulator_bytes``, as in ``choose_tiles``), at least one (ger:
      f64 56x56 as 16x8 tiles reloaded A's column for each and wrote the last 8 rows in a
      pass of their own), none where K is two and one column of the product's row blocks
      takes more than all the registers (AVX2: f64 from 57 rows, f32 from 113; its every
      step spilled; in C's tiles, the geomean of random shapes from L2 0.80-0.89x of
      LIBXSMM -> 1.06-1.11x, from L3 0.77-0.90x -> 1.00-1.10x), and where the step is three
      or more at most STEP_COLUMN_FMAS // k_step (``tiles.whole_k``: f32 11x70x5 with B
      shared in loop steps of 4 columns, not 24, ran 1.02x as fast and compiled cold in 28
      ms, not 112; f64 49x18x3 1.04x as fast; with steps of 2 the bound cost 2-4%) and as
      many as leave A's k_step columns of all rows in registers, 0 where none does: C keeps
      its tiles (f64 77x24x5 fused in 80 rows by 2 columns spilled A's 50 registers to
      the stack and ran at 0.70-0.77x of LIBXSMM's speed in most processes; in its 32x6
      tiles at 1.10-1.24x); none where C's columns lie far apart (`far_c`, ``far_columns``:
      a block of rows of a tall matrix, whose whole columns, written one after the other,
      are each a stream of its own: with AVX-512 f64 N of 4-12 by K of 1-3 ran at
      0.61-0.87 of LIBXSMM, in C's tiles at 0.98-1.13, ten such shapes 0.85-0.86 ->
      1.01-1.03 (geometric mean; f32 4x2 in blocks of 170 rows 1.16 -> 1.06), with AVX2
      eleven 0.96-0.98 -> 1.03-1.06);
    * else a single column, A not transposed, and the accumulators fitting (gemv: f32
      56 rows as tiles of 32, 16 and 8 rows loaded b three times and were three chains
      of dependent FMAs; gemm's tiles of more columns are ``choose_tiles``' business; the
      shuffles that build transposed A tiles need the registers: f64 120x120 gemv.t
      fused took 1.36x as long as with one tile per piece)."""
    n, pieces = known(N), all(known(me) is not None for _, me, _, _ in m_pieces)
    if not split or n is None or not pieces or em.subgroups[0] * em.subgroups[1] != 1:
        return 0
    column = column_bytes(m_pieces, acc)
    fit = accumulator_bytes(em.target.register_budget) // column
    if single_step:
        if far_c:
            return 0
        if k_step == 2 and column > em.target.register_budget:
            return 0  # the product's column alone overflows the registers
        if k_step <= 2:
            return max(1, min(fit, n))
        # A's k_step columns stay in registers beside the product's
        fit = min(fit, (em.target.register_budget - k_step * column) // column)
        return max(1, min(fit, n, STEP_COLUMN_FMAS // k_step)) if fit >= 1 else 0
    return 1 if n == 1 and ta == "n" and fit and len(m_pieces) > 1 else 0


def dot_columns(em: Emitter, A: Value, ta: str, b: Value, c: Value, M: Int, K: Int) -> int:
    """The columns of A a gemv.t (vectors b and c) takes at once as dot products
    (``dot_products``), or 0 where it is a matmul.  Where remainders are split (the CPU's
    FMA path: A, b and c of one real type), M and K are static, K fills at least half a
    subgroup and A's columns are contiguous (unit row stride), c_j is A's column j
    times b lane by lane, summed once at the end: the
    outer-product kernel would build A^T's tiles from A's columns by shuffles (f64 56x56
    gemv.t: 0.64 of NumPy's dot products with AVX-512, 0.61 without; f32 9x56 with
    AVX-512, one masked step of 16 lanes: as fast or faster, a third of the compile
    time), while fewer rows leave most lanes idle (3x5: the shuffles' tiles were 1.2-1.6x
    as fast).  DOT_COLUMNS columns at once, or as many as the accumulators' share of the
    registers holds (``accumulator_bytes``).

    One column at a time where A differs between work-groups (a batch's member, not
    ``Emitter.same_in_every_group``) and its columns are longer than
    STREAM_COLUMN_BYTES: A is then read in the order of its addresses, one stream, where
    J columns at once read J streams of a few lines each, which the hardware prefetchers
    follow badly.  With the members from L3 (24 MiB batches, 2 threads) f64 56x56 ran
    1.9-2.8x as fast as with 8 columns, f32 56x56 1.9-2.6x, f32 35x35 2.2x, f64 17x13
    1.1-2.2x (8 columns: 0.62-1.56 of LIBXSMM from run to run, one: 1.4-1.75); without
    AVX-512 f64 56x56 3.7x, 120x120 2.3x.  Shorter columns gained or lost by turns (f64
    9x56, f32 17x13: 0.76-1.21x), and within a line lost (f32 9x56, f64 5x40: 0.65x).
    Where the members stay in the caches (a few hundred KB) one column at a time is up
    to a fifth slower (each column's lanes summed by themselves: f64 17x13 0.80-0.87x,
    f32 1x56x56 as a gemm 0.79-0.82x, f64 56x56 0.87-0.99x, 120x120 1.07-1.10x), still
    1.8-4.7x LIBXSMM.

    A member's columns of one or two cache lines are taken MEMBER_DOT_COLUMNS at once:
    8 columns of f64 15 or 16 rows ran at 0.59-1.18 of LIBXSMM from L3, 4 at 1.16-2.07
    (gemms 1xNx15 and 1xNx16, both CPU kinds), f64 8 rows with AVX-512 0.88 -> 1.72;
    within a line 8 stay (f64 5 and 6 rows, f32 9 and 12: 4 ran 0.87-0.98x as fast).
    Without mask registers (AVX2) a member's columns shorter than a subgroup are a
    matmul: each column one masked load alone (``vmaskmov``) ran at 0.46-0.59 of LIBXSMM
    (f64 1x40x3, f32 1x40x7), the matmul's tiles at 1.06-1.18."""
    acc = accumulate_type(c.type.element)
    m, k = known(M), known(K)
    if (ta != "t" or m is None or k is None or 2 * k < em.sgs or A.type.stride[0] != 1
            or not split_remainders(em.target, acc, A.type.element, b.type.element)):
        return 0
    most = DOT_COLUMNS
    if not em.same_in_every_group(A):
        if k < em.sgs and not em.target.mask_registers:
            return 0
        column = k * A.type.element.size
        if column > STREAM_COLUMN_BYTES:
            return 1
        if column >= em.target.cache_line:
            most = MEMBER_DOT_COLUMNS
    fit = accumulator_bytes(em.target.register_budget) // (em.sgs * acc.size)
    return max(1, min(m, fit, most))


def dot_products(em: Emitter, A: Value, b_col: Value, c_col: Value, M: int, K: int,
                 J: int) -> None:
    """c := alpha A^T b + beta c (A: K x M, b and c as columns) as dot products: each
    subgroup tile of J columns of A runs down A's rows S at a time (S: the subgroup
    size), an S x J tile of A times b's S entries lane by lane (b's part of each
    work-item put in every column: ``cooperative_matrix_insert``) added to S x J partial
    sums, in P sets where J columns keep too few sums in flight (as in ``chains``); the
    rows past the last S are one step with rows checked.  Each column's partial sums are
    then added up (``cooperative_matrix_reduce_add.column``: 1 x J) and the update
    writes the 1 x J row transposed into c's J entries."""
    b, S = em.b, em.sgs
    acc = accumulate_type(c_col.type.element)
    ea, eb = A.type.element, b_col.type.element
    k_full = K - K % S
    b_t = coopmatrix(eb, S, 1, "matrix_acc")
    lanes_b = _column_entries(b_t, S)[0]
    origin = em.index(0)
    for n0, ne, NT, _ in _pieces(M, J, column_pieces(M, J)):
        a_t, acc_t = coopmatrix(ea, S, NT, "matrix_acc"), coopmatrix(acc, S, NT, "matrix_acc")
        columns = _column_entries(a_t, S)
        P = max(1, min(-(-MIN_ACC_BYTES // (S * NT * acc.size)), k_full // S))
        # (tiles' rows are multiples of S: one tile of S in the first mode, unused)
        lo, hi = [em.index(0), em.index(n0)], [em.index(S), em.index(n0 + ne)]
        with b.foreach_tile(lo, hi, [S, NT], arg_names=["s", "j", "ts", "tj"]) as (_, j, _, _):
            def step(k: Int, xs: List[Value], checked: bool = False) -> List[Value]:
                kv, flag = em.index(k), ("rows_checked" if checked else None)
                bk = b.cooperative_matrix_load(b_col, kv, origin, b_t, checked=flag, name="b")
                spread = b.constant(0, coopmatrix(eb, S, NT, "matrix_acc"), name="zero")
                mine = b.cooperative_matrix_extract(bk, lanes_b)
                for v in columns:
                    spread = b.cooperative_matrix_insert(mine, spread, v)
                a = b.cooperative_matrix_load(A, kv, j, a_t, checked=flag, name="a")
                return [b.add(xs[0], b.mul(a, spread), name="acc")]
            zero = b.constant(-0.0, acc_t, name="zero")  # (-0.0 + x is x: no add)
            xs = k_loop(em, step, [zero], k_full, S, P)
            if K % S:
                xs = step(k_full, xs, True)
            sums = b.cooperative_matrix_reduce_add(xs[0], mode="column",
                                                   result=coopmatrix(acc, 1, NT, "matrix_acc"),
                                                   name="dots")
            v = em.scale_tile(sums)
            em.update_tile(v, c_col, j, origin, None, scaled=True, transpose=True)


def _column_entries(t, S: int) -> List[int]:
    """The entry of each work-item's part of the S x N matrix type t that holds column c
    (its row: the work-item's lane), for c = 0 .. N-1."""
    rows, cols, valid = layout_of(t, S).tables
    out = []
    for c in range(t.cols):
        v = [v for v in range(rows.shape[1]) if valid[0, v] and cols[0, v] == c]
        assert len(v) == 1 and all(rows[p, v[0]] == p and cols[p, v[0]] == c
                                   for p in range(S)), "an S x N tile: one row per lane"
        out.append(v[0])
    return out


def column_stride(V: Value) -> Union[int, Value, None]:
    """The distance of a 2-D memref's columns in elements where static; else, for a block
    (``subview``) of a matrix with contiguous columns, that matrix, whose rows (``size``
    of mode 0, known when the kernel runs) bound the distance below: its columns do not
    overlap; None where neither."""
    stride = V.type.stride[1]
    if stride is not None:
        return stride
    sub = V.owner
    if sub is None or sub.opcode != "subview":
        return None
    parent = sub.slots["tensor"]
    if parent.type.order != 2 or parent.type.stride[0] != 1:
        return None
    return parent


def far_columns(em: Emitter, V: Value) -> Union[int, Value, None]:
    """The column stride (``column_stride``) of an operand whose columns may be short
    streams the hardware prefetchers follow badly, so that ``prefetch`` asks for them
    first (or, for a small block of A, the tiles read each column once:
    ``streams_far_a``; C keeps its tiles where K is a single step: ``fused_columns``),
    or None: on the CPU (SIMD-lane subgroups), a different block of global memory in
    each work-group, whose columns are contiguous and at least PAGE_BYTES apart (a bound
    known at run time is tested then), PREFETCH_BYTES at most.  Such are the blocks of
    rows a work-group takes of a tall matrix: f64 1000000x16x16 in blocks of 100 rows, 16
    columns of A and 16 of C of 800 bytes each a block, read and written at 0.7 of
    NumPy's speed, whose blocked kernel reads A's columns in long runs."""
    t = V.type
    rows, cols = t.shape
    if not (em.target.vector_bytes and t.space == "global" and t.stride[0] == 1
            and None not in (rows, cols) and cols > 1
            and rows * cols * t.element.size <= PREFETCH_BYTES
            and not em.same_in_every_group(V)):
        return None
    stride = column_stride(V)
    if isinstance(stride, int) and stride * t.element.size < PAGE_BYTES:
        return None
    return stride


def far_operands(em: Emitter, *operands: Value) -> List[Tuple[Value, Union[int, Value]]]:
    """The operands whose columns are far apart, with their column strides
    (``far_columns``), where they have FAR_STREAMS columns or more together; none where
    fewer: the hardware prefetchers follow a few streams well, and the prefetches would
    cost as much as the FMAs (f64 111x3x8, 11 columns of A and C: 154 prefetches for 42
    vector FMAs a work-group, 0.86x as fast as without them; 26x5x4 0.91x)."""
    far = [(V, far_columns(em, V)) for V in operands]
    far = [(V, stride) for V, stride in far if stride is not None]
    return far if sum(V.type.shape[1] for V, _ in far) >= FAR_STREAMS else []


def streams_far_a(A: Value, M: Int, K: Int) -> bool:
    """Whether a far-apart block of A (``far_operands``) is left to the hardware
    prefetchers, the far operands not prefetched: a static block smaller than
    FAR_STREAMED_BYTES, which with AVX-512 the tiles read a column at a time
    (``tiles.far_column_tiles``).  With blocks of 20-250 rows of a 10^6-row A, N and K
    of 1-24 (two sets of 14 and 16 shapes, each variant in a process of its own: in one
    process a kernel's speed depended on the kernels compiled before it), prefetched
    and not: AVX-512 0.87-0.92 and 1.03-1.07 of LIBXSMM (geometric means), AVX2 0.80-0.81
    and 0.90-0.92; blocks of 27-44 KiB (f64 18x22 in 249 rows) ran at 0.76-0.90
    prefetched, 0.74-0.81 not."""
    rows, cols = known(M), known(K)
    return None not in (rows, cols) and rows * cols * A.type.element.size < FAR_STREAMED_BYTES


def prefetched_a(em: Emitter, A: Value, ta: str, tiles: Tiles, M: Int, N: Int) -> bool:
    """Whether A is prefetched into L2 before the tiles (``prefetch``): on the CPU, a
    batch member's A (a different block in each work-group, new to the caches) of f64
    (PREFETCH_A_ENTRY_BYTES) and PREFETCH_A_BYTES, with contiguous columns a static
    stride apart, which the tiles read in PREFETCH_A_PASSES or more passes (column
    tiles) of PREFETCH_A_ROW_TILES or more row tiles each.  The first pass misses on
    every line of A: a row tile reads one or two lines of each column, lines a column
    apart, and the hardware prefetchers run little ahead of such strides; prefetched,
    the misses overlap.  With the members from L3 (two threads, random shapes whose
    code it changes): without AVX-512 f64 1.05-1.08x as fast (106x17x63 in 8x6 tiles
    0.79 -> 1.05 of LIBXSMM; the least 0.95 -> 1.02), with AVX-512 1.02x (122x24x61
    0.90 -> 1.00); f32, twice the FMAs per byte of A, lost 2-5%, and so did A read in
    one or two passes (f64 41x2x57 0.92 -> 0.76 of LIBXSMM) or in two or three row tiles
    (f64 32x48x101 0.95x)."""
    t = A.type
    rows, cols, n = known(M), t.shape[1], known(N)
    if not (em.target.vector_bytes and ta == "n" and t.space == "global"
            and t.stride[0] == 1 and isinstance(t.stride[1], int)
            and None not in (rows, cols, n) and t.element.size == PREFETCH_A_ENTRY_BYTES
            and not em.same_in_every_group(A)):
        return False
    least, most = PREFETCH_A_BYTES
    return (least <= rows * cols * t.element.size <= most
            and -(-n // tiles.n) >= PREFETCH_A_PASSES
            and -(-rows // tiles.m) >= PREFETCH_A_ROW_TILES)


def prefetch(em: Emitter, operands: List[Tuple[Value, Union[int, Value]]]) -> None:
    """Prefetches of the whole of each operand (``far_operands``, ``prefetched_a``) into
    L2, before the tiles, those whose column stride is known only at run time where its
    bound (the rows of the matrix it is a block of: ``column_stride``) is PAGE_BYTES or
    more: their misses then overlap, where the tiles' loads and stores reach one column
    after the other.  With the benchmark's tall products (2 threads, AVX-512, the tiles as
    before, the kernels timed in turns in one process) f64 16x16 ran 1.22x as fast, 9x9
    1.15x, f32 16x16 1.29x, 9x9 1.02x (without AVX-512 f32 16x16 1.5x); timed in
    processes of their own, blocks of A smaller than FAR_STREAMED_BYTES ran faster without
    (``streams_far_a``)."""
    if not operands:
        return
    b, zero = em.b, em.index(0)

    def fetch(V: Value) -> None:
        rows, cols = V.type.shape
        b.cooperative_matrix_prefetch(PREFETCH_LEVEL, V, zero, zero, rows, cols)

    static = [V for V, stride in operands if isinstance(stride, int)]
    if static:
        with b.parallel():
            for V in static:
                fetch(V)
    for V, matrix in operands:
        if not isinstance(matrix, int):
            least = -(-PAGE_BYTES // V.type.element.size)  # elements a page apart
            with b.if_(em.pm.less_than(least - 1, em.dim(matrix, 0), INDEX)), b.parallel():
                fetch(V)


def k_parts(KS: int) -> List[Tuple[int, int]]:
    """(first row of B, rows) of the products a K step of KS is: one, or where KS is not
    a power of two (all of a static K in one step, ``tiles.whole_k``) one for each power
    of two in it, smallest first, chained through the accumulators.  A coopmatrix's rows
    are a power of two (the language's distribution over a subgroup: the verifier's
    rule); the FMAs are the same, for KS of 5, 9 or 17 in the order of one product's
    (``backends.cpu.coop.update_pieces``: B's rows one after the other, each for all
    columns), and B's tiles of a column are read through one register
    (``backends.cpu.coop_memory._origin``)."""
    parts, first = [], 0
    for bit in range(KS.bit_length()):
        if KS >> bit & 1:
            parts.append((first, 1 << bit))
            first += 1 << bit
    return parts


def k_loop(em: Emitter, step, zeros: List[Value], k_full: Int, KT: int, P: int,
           U: int = 1) -> List[Value]:
    """The accumulators over the K steps [0, k_full) of KT, in P sets, step s updating set
    s mod P: a loop of U rounds of P steps a loop step (U only for a static k_full), then
    a loop of one round a step for the rounds left, each straight-line where it would
    take one step, the steps left (static k_full), then the sets added pairwise.
    ``step(k, xs)`` is one step from xs.  (The rounds left after the first loop are a
    loop of their own: straight-line, LLVM interleaved their steps and spilled, f64
    14x97x43 without AVX-512.)"""
    b = em.b
    kf = known(k_full)
    if kf == 0:
        return zeros
    sets = [list(zeros) for _ in range(P)]
    if kf is None:
        sets = _k_rounds(em, step, sets, 0, k_full, KT, P)
    else:
        first = 0
        for size in sorted({U * P, P}, reverse=True):
            rounds = (kf - first) // (KT * size)
            if rounds == 1:
                for q in range(size):
                    sets[q % P] = step(first + q * KT, sets[q % P])
            elif rounds:
                sets = _k_rounds(em, step, sets, first, first + rounds * size * KT, KT, size)
            first += rounds * size * KT
        for q in range((kf - first) // KT):
            sets[q % P] = step(first + q * KT, sets[q % P])
    while len(sets) > 1:
        sets = [[b.add(x, y) for x, y in zip(*sets[p:p + 2])] if p + 1 < len(sets) else sets[p]
                for p in range(0, len(sets), 2)]
    return sets[0]


def _k_rounds(em: Emitter, step, sets: List[List[Value]], first: int, end: Int, KT: int,
              size: int) -> List[List[Value]]:
    """``k_loop``'s loop over the K steps [first, end) of KT, `size` steps a loop step,
    step s updating set s mod len(sets)."""
    P, n = len(sets), len(sets[0])
    names = ["acc"] if n * P == 1 else [f"acc{q}" for q in range(n * P)]
    loop = em.b.for_(em.index(first), em.index(end), em.index(size * KT),
                     init=[x for xs in sets for x in xs], arg_names=["k"] + names, names=names)
    with loop as (k, *carried):
        inner = [carried[p * n:(p + 1) * n] for p in range(P)]
        for q in range(size):
            inner[q % P] = step(em.m.add(k, q * KT, INDEX), inner[q % P])
        em.b.yield_([x for xs in inner for x in xs])
    return [list(loop.results[p * n:(p + 1) * n]) for p in range(P)]


def matmul(em: Emitter, A: Value, ta: str, B: Value, tb: str, C: Value,
           M: Int, N: Int, K: Int) -> None:
    """C := alpha op(A) op(B) + beta C with op(A): M x K, op(B): K x N (2-D memrefs)."""
    b, m = em.b, em.m
    acc = accumulate_type(C.type.element)
    ea, eb = A.type.element, B.type.element
    far = far_operands(em, A, B, C)
    far_a = ta == "n" and any(V is A for V, _ in far)
    streamed_a = far_a and streams_far_a(A, M, K)
    far_c = far_columns(em, C) is not None
    split = split_remainders(em.target, acc, ea, eb)
    tiles = choose_tiles(em.target, em.sgs, em.subgroups, known(M), known(N), known(K),
                         acc, ea, eb, far_a=far_a and not streamed_a,
                         new_a=not em.same_in_every_group(A),
                         shared_b=em.same_in_every_group(B), read_once_a=streamed_a,
                         far_c=far_c)
    # 16-bit products a matrix or dot-product unit computes: tiles of its grain
    tiles = fit_to_unit(em.target, tiles, em.sgs, em.subgroups, known(M), known(N), known(K),
                        acc, ea, eb, tb == "t", ta == "t")
    KT = tiles.k
    parts = k_parts(KT)  # the products of a K step of KT (a single step: ``rank_one``)
    if streamed_a:
        far = []
    elif not far and prefetched_a(em, A, ta, tiles, M, N):
        far = [(A, A.type.stride[1])]
    prefetch(em, far)
    edges_step_k = staged_edges(em.target, ea, eb, acc) and not tiles.k_rest

    # K = k_full + remainder: full steps unchecked, then the remainder: steps of smaller
    # powers of two (k_rest, static K where remainders are split) or one checked step
    k_full = em.pm.sub(K, em.pm.rem(K, KT, INDEX), INDEX)
    has_rem = False if tiles.k_rest else em.pm.less_than(k_full, K, INDEX)

    def step(rows: List[Rows], j: Value, k: Int, xs: List[Value], NT: int, KS: int,
             check_n: bool, check_k: bool) -> List[Value]:
        """One K step of KS for each block of rows: their A tiles, B's tile (once), for
        each of the step's products (``k_parts``)."""
        for first, ks in k_parts(KS):
            assert isinstance(k, int) or not first  # parts: a static K's single step
            kv = em.index(k + first if first else k)
            As = [load_a(i, kv, MT, ks, check_m, check_k) for i, MT, check_m in rows]
            bm = load_b(j, kv, NT, ks, check_n, check_k)
            xs = [b.cooperative_matrix_mul_add(a, bm, x, name="ab") for a, x in zip(As, xs)]
        return xs

    def load_b(j: Value, kv: Value, NT: int, KS: int, check_n: bool, check_k: bool) -> Value:
        b_t = coopmatrix(eb, KS, NT, "matrix_b")
        flag = checked_flag(check_k, check_n)
        if tb == "n":
            return b.cooperative_matrix_load(B, kv, j, b_t, checked=flag, name="b")
        return b.cooperative_matrix_load(B, j, kv, b_t, ta="t", checked=flag, name="b")

    def load_a(i: Value, kv: Value, MT: int, KS: int, check_m: bool, check_k: bool) -> Value:
        a_t = coopmatrix(ea, MT, KS, "matrix_a")
        flag = checked_flag(check_m, check_k)
        if ta == "n":
            return b.cooperative_matrix_load(A, i, kv, a_t, checked=flag, name="a")
        return b.cooperative_matrix_load(A, kv, i, a_t, ta="t", checked=flag, name="a")

    def zeros(rows: List[Rows], NT: int) -> List[Value]:
        # made in the tile's SPMD region: coopmatrix values live in subgroups (a
        # collective region holds no subgroup's registers)
        return [b.constant(0, coopmatrix(acc, MT, NT, "matrix_acc"), name="zero")
                for _, MT, _ in rows]

    def update(rows: List[Rows], j: Value, xs: List[Value], check_n: bool) -> None:
        for (i, _, check_m), x in zip(rows, xs):
            flag = checked_flag(check_m, check_n)
            v = em.scale_tile(x)
            em.update_tile(v, C, i, j, flag, scaled=True)

    def tile(rows: List[Rows], j: Value, NT: int, check_n: bool,
             extent: Optional[int] = None) -> None:
        """The blocks of rows `rows` of C's columns j .. j + NT - 1; `extent`: the rows
        of the static piece of a partial tile (``_status`` PARTIAL), whose rows alone the
        CPU computes (``computed_rows``)."""
        xs = zeros(rows, NT)
        if edges_step_k and (check_n or any(check_m for _, _, check_m in rows)):
            # an edge on a unit that stages its operands: every K step checked, K's
            # remainder the last (``unit_tiles.staged_edges``)
            k_all = K if known(K) is None else -(-known(K) // KT) * KT
            xs = k_loop(em, lambda k, xs: step(rows, j, k, xs, NT, KT, check_n, True), xs,
                        k_all, KT, 1)
            update(rows, j, xs, check_n)
            return
        acc_ts = [x.type for x in xs]
        P = chains(em.target, tiles, acc, ea, eb, sum(MT for _, MT, _ in rows),
                   any(check_m for _, _, check_m in rows), NT, known(k_full))
        U = rounds_of_sets(em, tiles, split, rows, NT, P, extent)
        xs = k_loop(em, lambda k, xs: step(rows, j, k, xs, NT, KT, check_n, False), xs,
                    k_full, KT, P, U)
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
        update(rows, j, xs, check_n)

    def rank_one(rows: List[Rows], As: List[Optional[List[Value]]], n0: int, ne: int,
                 NT: int) -> None:
        """Columns n0 .. n0 + ne - 1 of C, K a single step, NT columns a loop step: each
        column is B's entries times A's blocks (`As`: each block's tiles of the step's
        products, ``k_parts``, loaded once, or None: loaded for the column), each block
        multiplied and stored before the next.  C is written in the order of its
        addresses, one whole column after the other: a ger is bound by its stores, and
        stores that return to a cache line written earlier cost more (f64 56x56 with
        NumPy's arrays, 16 bytes off a line: tiles of 16x3, each column's lines written in
        four passes, took 1.1x as long as LIBXSMM, whole columns 0.98x)."""
        loop = b.for_(em.index(n0), em.index(n0 + ne), em.index(NT), arg_names=["j"])
        with loop as (j,):
            zs = zeros(rows, 1)
            for q in range(NT):
                jq = m.add(j, q, INDEX) if q else j
                bms = [load_b(jq, em.index(k0), 1, ks, False, False) for k0, ks in parts]
                for (i, MT, check_m), a_parts, x in zip(rows, As, zs):
                    for (k0, ks), a, bm in zip(parts, a_parts or [None] * len(parts), bms):
                        if a is None:
                            a = load_a(i, em.index(k0), MT, ks, check_m, False)
                        x = b.cooperative_matrix_mul_add(a, bm, x, name="ab")
                    update([(i, MT, check_m)], jq, [x], False)

    m_pieces = _pieces(M, tiles.m, tiles.m_pieces)
    single_step = known(K) == KT and not tiles.k_rest
    NT = fused_columns(em, m_pieces, N, acc, single_step, split, ta, KT, far_c)
    if NT:  # one subgroup: a parallel region is its work
        with b.parallel():
            rows = [(em.index(m0), MT, checked) for m0, MT, checked in row_blocks(m_pieces)]
            if not single_step:
                tile(rows, em.index(0), NT, False)
                return
            # A's blocks stay in registers where they fit beside a product (f32 120 rows
            # without AVX-512, 15 ymm, do not: they are loaded again for each column, from
            # L1, as a spill would be)
            As: List[Optional[List[Value]]] = [None] * len(rows)
            if column_bytes(m_pieces, acc) <= em.target.register_budget - em.target.vector_bytes:
                As = [[load_a(i, em.index(k0), MT, ks, check_m, False) for k0, ks in parts]
                      for i, MT, check_m in rows]
            n0 = 0
            for ne, nt in column_pieces(known(N), NT):
                rank_one(rows, As, n0, ne, nt)
                n0 += ne
        return
    def piece(m0: Int, me: Int, MT: int, m_status: str, n0: Union[Int, Value], ne: Int,
              NT: int, n_status: str) -> None:
        """C's rows m0 .. m0 + me - 1 by columns n0 .. n0 + ne - 1 in tiles of MT x NT."""
        n_math = m if isinstance(n0, Value) else em.pm  # a column block's start: in its loop
        lo = [em.index(m0), em.index(n0)]
        hi = [em.index(em.pm.add(m0, me, INDEX)), em.index(n_math.add(n0, ne, INDEX))]
        tiles_op = b.foreach_tile(lo, hi, [MT, NT], arg_names=["i", "j", "ti", "tj"])
        if widened_floats(acc, ea, eb):  # 16-bit products: long tile code
            set_attribute(tiles_op.inst, EDGES_IN_ONE_COPY, True)
        with tiles_op as (i, j, ti, tj):
            full: Optional[object] = True
            if m_status == MAYBE:
                full = m.and_(full, m.equal(ti, MT, INDEX))
            if n_status == MAYBE:
                full = m.and_(full, m.equal(tj, NT, INDEX))
            if full is True:
                tile([(i, MT, m_status == PARTIAL)], j, NT, n_status == PARTIAL,
                     known(me) if m_status == PARTIAL else None)
            else:
                branch = b.if_(full)
                with branch:
                    tile([(i, MT, m_status == PARTIAL)], j, NT, n_status == PARTIAL)
                with branch.else_():
                    tile([(i, MT, m_status != FULL)], j, NT, n_status != FULL)

    row_columns = [_pieces(N, tiles.n, tiles.row_n_pieces[row] if tiles.row_n_pieces
                           else tiles.n_pieces) for row in range(len(m_pieces))]
    blocks = column_blocks(em, m_pieces, row_columns)
    if blocks:
        width, end = blocks
        loop = b.for_(em.index(0), em.index(end), em.index(width), arg_names=["jb"])
        with loop as (jb,):
            for (m0, me, MT, m_status), columns in zip(m_pieces, row_columns):
                piece(m0, me, MT, m_status, jb, width, columns[0][2], FULL)
        row_columns = [columns_from(end, columns) for columns in row_columns]
    for (m0, me, MT, m_status), columns in zip(m_pieces, row_columns):
        for n0, ne, NT, n_status in columns:
            piece(m0, me, MT, m_status, n0, ne, NT, n_status)
