"""gemm's tiles made of a matrix unit's products: ``fit_to_unit``.

Where the target's matrix unit multiplies the operand types at hand
(``MatrixUnit.instruction``: on the CPU, AMX tiles or AVX512-BF16 dot products for bf16,
``backends/cpu/mul_add.matrix_unit``) and says how many of its m x n products its
accumulators hold at once (``MatrixUnit.accumulators``), the tile of C that
``choose_tiles`` sized for vector FMAs is replaced by a block of ``bm x bn`` such products:

* ``bm * bn`` at most the unit's accumulators (divided among the work-group's subgroups
  where they run in lockstep on one thread, as in ``choose_tiles``); the rows ``bm * m`` a
  power of two and a multiple of the subgroup size;
* where the unit stages its operands through memory (AMX, ``MatrixUnit.staged_operands``:
  the costs below are those of operands in registers, and AMX's speed was not measured
  here), the block covering the most of C (cells inside M x N; a dynamic size counts as
  ``ASSUMED_SIZE``), then the squarest (least ``bm + bn``), then the taller;
* elsewhere, among those with at least ``BUSY_BLOCKS`` of the accumulators (or holding
  all of C), the blocks whose K steps over all of C cost least: the number of tiles
  times the products and operand loads of one step (``bm * bn + A_OPERAND * bm + bn``;
  ``TRANSPOSED_A_OPERAND`` for a transposed A),
  then the fewest edges (tiles checked in M or N: each is one more copy of the tile
  code), then the squarest, then the taller.  Tiles that cover the most of C each (the
  rule before) left edges in both M and N where fewer columns divide N: a bf16 37 x 21
  gemm in 32 x 8 tiles was four copies of the tile code, in 32 x 7 tiles it is two, as
  fast to run and half as long to compile;
* the K step: ``choose_tiles``' rounded up to whole steps of the instruction's k, at most
  the next power of two of a static K, and that power of two where a static K is more
  than one step and less than two (one product, where a step and a checked remainder
  would be two, each staged on its own, for as many of the unit's products); for a K
  known only at run time one step of the instruction's k (each of the four copies of
  the tile code of run-time M and N has a K loop and a checked remainder: a step of
  two pairs for vdpbf16ps doubled the code of both, for no gain in speed).

Where no unit multiplies the operand types, ``choose_tiles``' tiles stay, but on SIMD
lanes (``Target.vector_bytes``: the CPU) 16-bit floats, converted to f32 for the FMAs
(``cpu/coop.Microkernel.prepare``), take a K known only at run time one k at a time:
there is then no K remainder, and each copy of the tile code is one product instead of
a loop of four k and a checked remainder of four (an f16 gemm with every size known at
run time compiled in half the time, and ran as fast or faster: f16 64 x 64 x 256 and
37 x 21 x 19, samples of both in turns).  With A transposed, a static K's remainder is
unchecked steps of smaller powers of two (``tiles.k_steps``), as for f32: a checked
step's rows of A are partial words, each widened on its own (f16 -> f32 100 x 70 x 50
t.n compiled in 350 ms, with these steps 165 ms; run time 1.08x as fast there, 0.85x
for f16 16 x 5 x 33 t.n, the same within noise for 37 x 21 x 19); with A not
transposed the checked step stays, its columns are masked loads, and the smaller steps
ran 0.8-0.9x as fast).

So on AMX (16 x 16 products of k 32, four accumulator tiles) a 64^3 gemm gets tiles of
32 x 32 with K steps of 32, where the vector path's 64 x 4 x 4 would be padded to
64 x 16 x 16 (1/16 of each tile product useful); on AVX512-BF16 (16 x 1 x 2 per
vdpbf16ps, 16 accumulator registers) 64 x 4 with K steps of 4.  Targets whose unit gives no
``accumulators`` keep ``choose_tiles``' tiles, and so does a B loaded transposed on a unit
whose tiles do not suit it (``MatrixUnit.transposed_b``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Tuple, Union

from ...ir.types import ScalarType
from ...target import Target
from .tiles import ASSUMED_SIZE, Tiles, _ceil_div, _next_pow2, k_steps, widened_floats


#: the least share of the unit's accumulators a tile keeps busy: the products of one
#: accumulator depend on each other, so fewer tiles in flight leave the unit waiting
#: (vdpbf16ps 16 x 7 tiles of a 37 x 21 gemm ran at 0.8x the speed of 32 x 8 ones)
BUSY_BLOCKS = 0.75
#: the cost of A's operand of a row of blocks in a K step, in products (B's operand of a
#: column of blocks: one): two loads and a shuffle into pairs for vdpbf16ps
A_OPERAND = 2
#: the same for a transposed A: its 16 rows are one load and one insert each
#: (``cpu/coop_memory._row_words``).  bf16 64^3 gemm.t.n on Zen 4: 32x8 tiles ran in 121 us, 64x4
#: (A_OPERAND's choice) in 165, 16x16 in 146-157; gemm.t.t (B's pairs transposed too, two
#: loads each): 125, 171, 303-835.  With 4 or more, 100x70x50 took 16x14 tiles: t.t
#: 915-1021 us against 190 in 32x7 (3 and 2 choose those)
TRANSPOSED_A_OPERAND = 3


def staged_edges(target: Target, a: ScalarType, b: ScalarType, acc: ScalarType) -> bool:
    """A tile checked in M or N (at an edge of C) takes K's remainder as one more checked
    step of its K loop, not as a product after it: where the unit's products of a x b
    into acc stage every operand through memory (AMX, ``MatrixUnit.staged_operands``),
    an edge tile's operands are staged with masks in every step anyway, and the product
    after the loop was one more copy of that staging for each edge (a bf16 gemm with
    every size known at run time: a quarter of its LLVM IR)."""
    unit = target.matrix
    return unit.staged_operands and unit.instruction(a.name, b.name, acc.name) is not None


def fit_to_unit(target: Target, tiles: Tiles, subgroup_size: int,
                num_subgroups: Union[int, Tuple[int, int]], M: Optional[int],
                N: Optional[int], K: Optional[int], acc: ScalarType, a: ScalarType,
                b: ScalarType, transposed_b: bool = False, transposed_a: bool = False) -> Tiles:
    """``tiles`` (from ``choose_tiles``) as whole blocks of the target's matrix unit's
    products of a x b into acc where it has such products (see the module docstring);
    unchanged for a B loaded transposed where the unit says its tiles do not suit it
    (``MatrixUnit.transposed_b``).  ``transposed_a``: A is loaded transposed (its operand
    costs ``TRANSPOSED_A_OPERAND``)."""
    unit = target.matrix
    inst = unit.instruction(a.name, b.name, acc.name) if unit.accumulators else None
    if inst is None or (transposed_b and not unit.transposed_b):
        if target.vector_bytes and widened_floats(acc, a, b):  # (16-bit floats on f32 FMAs)
            if K is None:
                return replace(tiles, k=1)
            if transposed_a:
                k, k_rest = k_steps(K, tiles.k)
                return replace(tiles, k=k, k_rest=k_rest)
        return tiles
    G = max(1, num_subgroups[0] * num_subgroups[1] if isinstance(num_subgroups, tuple)
            else num_subgroups)
    blocks = max(1, unit.accumulators // (G if target.vector_bytes else 1))
    Mm = M if M is not None else ASSUMED_SIZE
    Nm = N if N is not None else ASSUMED_SIZE
    bm_min = max(1, subgroup_size // inst.m)
    m_cap = max(bm_min * inst.m, _next_pow2(Mm))
    bn_cap = _ceil_div(Nm, inst.n)
    a_operand = TRANSPOSED_A_OPERAND if transposed_a else A_OPERAND
    shapes = []
    bm = bm_min
    while bm == bm_min or (bm * inst.m <= m_cap and bm <= blocks):
        shapes += [(bm, bn) for bn in range(1, max(1, min(blocks // bm, bn_cap)) + 1)]
        bm *= 2
    # enough accumulators to hide the products' latency, unless fewer hold all of C
    busy = [(bm, bn) for bm, bn in shapes if bm * bn >= blocks * BUSY_BLOCKS
            or (bm * inst.m >= Mm and bn * inst.n >= Nm)]

    def key(shape):
        bm, bn = shape
        m, n = bm * inst.m, bn * inst.n
        steps = _ceil_div(Mm, m) * _ceil_div(Nm, n) * (bm * bn + a_operand * bm + bn)
        return (steps, (Mm % m != 0) + (Nm % n != 0), bm + bn, -bm)

    def staged_key(shape):  # (see the module docstring)
        bm, bn = shape
        return (-min(bm * inst.m, Mm) * min(bn * inst.n, Nm), bm + bn, -bm)

    if unit.staged_operands:
        bm, bn = min(shapes, key=staged_key)
    else:
        bm, bn = min(busy or shapes, key=key)
    m, n = bm * inst.m, bn * inst.n
    k = max(inst.k, _ceil_div(tiles.k, inst.k) * inst.k) if K is not None else inst.k
    if K is not None:
        k = min(k, _next_pow2(K))
        if k < K < 2 * k:  # (see the module docstring)
            k = _next_pow2(K)
    return Tiles(m, n, k)
