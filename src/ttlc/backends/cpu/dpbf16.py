"""bf16 cooperative_matrix_mul_add on the AVX512-BF16 dot-product instruction.

Where the CPU has AVX512-BF16 but AMX is not used (Zen 4, Cooper Lake; ``amx.py`` keeps
priority where it is usable), ``D = A B + C`` with bf16 A and B and an f32 (or bf16)
accumulator runs on ``vdpbf16ps``: each f32 lane of the accumulator takes the products
of one pair of bf16 values of each operand, ``acc[i] += a[2i+1] b[2i+1]``, then
``acc[i] += a[2i] b[2i]``.  The vector path's microkernel (``coop.Microkernel``) with
pairs of k per step instead of single k:

* Pair layout: row m of A's operand of step k holds ``A[m, k], A[m, k+1]`` in one 32-bit
  lane (columns k and k+1 of the column-major matrix interleaved by one shuffle); B's
  operand is the broadcast of ``B[k, j], B[k+1, j]``, which are adjacent in B's
  column-major storage (one 32-bit broadcast).  An odd K pads the last pair with zeros.
* Register blocking: an accumulator column is cut into pieces of 16, 8 or 4 rows (one
  zmm, ymm or xmm: ``dpbf16ps.512/.256/.128``; rows past M are zeros, cut off at the
  end).  Where all accumulators fit in ``ACCUMULATOR_REGISTERS`` vector registers (the
  tiles the gemm lowering chooses; the benchmark's 16 x 16 tile: 16 zmm, one B pair
  broadcast from memory by each vdpbf16ps), they are one block; larger ones are updated
  in blocks of at most ``BLOCK_PIECES`` pieces times ``ACCUMULATOR_REGISTERS / pieces``
  columns over all of K, with a scheduling barrier between blocks (without it LLVM
  interleaves them again: a 16 x 40 tile spilled 5x more).  A coopmatrix value is the
  whole matrix, so tiles whose A and accumulator exceed the 32 registers spill anyway,
  as on the vector path.

Numerics: each addition is rounded to nearest even in f32 (the products of bf16 values
are exact); the odd member of a pair is added before the even one, pairs in order of k;
denormal inputs (A, B and the accumulator) count as zero and denormal results are
flushed to zero (the instruction ignores MXCSR).  So the results agree with the vector
path's (one FMA per k, in order) up to the accumulation order and the flushing of
denormals, within the tolerance the interpreter comparison allows for reassociation.
NaN payloads are not modelled, and a result is flushed when it is denormal after
rounding (whether the instruction decides before rounding, for results just below the
normal range, could not be checked).

``make bench`` measures its speed where the CPU has the instruction (benchmarks/gemm16.py
and the bf16 rows of benchmarks/suite.py name the path that ran; docs/performance.md,
"16-bit gemm", has the Zen 4 numbers).

``dpbf16ps`` is the one step, with two implementations: the instruction
(``llvm.x86.avx512bf16.dpbf16ps.*``), and an emulation in plain LLVM IR with the same
semantics (DAZ, FTZ, the order of the two additions), which tests select with
``jit.EMULATE_DPBF16PS`` to run this path on machines without the instruction.
"""
from __future__ import annotations

from typing import List, Tuple

from llvmlite import ir

from ...ir.types import ScalarType
from . import jit
from .coop import Microkernel, _consts, splat_n
from .function import FunctionCodegen
from .values import I16, I32, zero_of

#: vector registers (of AVX-512's 32) that hold the accumulators of a block; the others
#: hold the block's A pairs of a step and B's broadcasts
ACCUMULATOR_REGISTERS = 24
#: accumulator registers of the tiles lower-linalg makes for this path (16 x 1 f32 each):
#: half the register file, as for the FMA path's tiles, so that a step's A pairs fit too
GEMM_ACCUMULATORS = 16
#: pieces of rows per block: each of a step's broadcasts of B serves this many products
BLOCK_PIECES = 2
#: f32 lanes of a piece -> the vector width of the instruction
WIDTHS = {4: 128, 8: 256, 16: 512}


def eligible(a_type: str, b_type: str, acc_type: str) -> bool:
    """mul_add with these component types runs on the dot-product path (AMX is asked
    first, by the caller)."""
    return (a_type == "bf16" and b_type == "bf16" and acc_type in ("f32", "bf16")
            and jit.bf16_dot() is not None)


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite has no such type): the instruction's operand type."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash(_BFloat)


def _opaque(cg: FunctionCodegen, pairs: ir.Value) -> ir.Value:
    """The bf16 pairs (i16 bits) as the instruction's bfloat operand.  They pass an empty
    asm on their way to bfloat: without it LLVM may move the bitcast before the shuffle
    that makes them (a shuffle of a whole loaded bfloat matrix, or of a pair of B's
    entries loaded with a mask), which its x86 instruction selection aborts on (LLVM 22:
    a bf16 gemm of 16 x 1 x 33 with a bf16 result killed the process).  Measured at equal
    speed on a 64^3 gemm."""
    x = cg.b.asm(ir.FunctionType(pairs.type, [pairs.type]), "", "=v,0", [pairs], False)
    return cg.b.bitcast(x, ir.VectorType(_BFloat(), pairs.type.count))


def _instruction(cg: FunctionCodegen, acc: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """vdpbf16ps of the vector width of acc (a, b: ``_opaque``)."""
    return cg.intrinsic(f"llvm.x86.avx512bf16.dpbf16ps.{WIDTHS[acc.type.count]}", acc.type,
                        [acc, a, b])


def _flush(cg: FunctionCodegen, x: ir.Value) -> ir.Value:
    """The floats x with denormals replaced by zeros of their sign (DAZ, FTZ)."""
    b = cg.b
    n = x.type.count
    bits = b.bitcast(x, ir.VectorType(I32, n))
    tiny = b.icmp_unsigned("==", b.and_(bits, _consts([0x7F800000] * n)), _consts([0] * n))
    signed_zero = b.and_(bits, _consts([0x80000000] * n))
    return b.bitcast(b.select(tiny, signed_zero, bits), x.type)


def _members(cg: FunctionCodegen, pairs: ir.Value) -> Tuple[ir.Value, ir.Value]:
    """The odd and the even members of the bf16 pairs, as f32 with denormals flushed."""
    n = pairs.type.count // 2
    return tuple(_flush(cg, cg.bf16_to_f32(cg.b.shuffle_vector(
        pairs, pairs, _consts(range(odd, 2 * n, 2))))) for odd in (1, 0))


def _emulated(cg: FunctionCodegen, acc: ir.Value, a, b) -> ir.Value:
    """vdpbf16ps in plain LLVM IR: per lane, two fused multiply-adds (exact product, one
    rounding to nearest even), the odd members of the pairs first, with denormal inputs
    and results flushed to zero (a, b: ``_members``)."""
    acc = _flush(cg, acc)
    for x, y in zip(a, b):
        acc = _flush(cg, cg.intrinsic("llvm.fma", acc.type, [x, y, acc], [acc.type]))
    return acc


#: jit.bf16_dot() -> the implementation of the step: (the operand made of bf16 pairs, the
#: step on such operands); each operand is made once and taken by all products that use it
IMPLEMENTATIONS = {"vdpbf16ps": (_opaque, _instruction), "emulated": (_members, _emulated)}


def operand(cg: FunctionCodegen, pairs: ir.Value):
    """The bf16 pairs (2n i16 bits) as ``dpbf16ps`` takes them."""
    return IMPLEMENTATIONS[jit.bf16_dot()][0](cg, pairs)


def dpbf16ps(cg: FunctionCodegen, acc: ir.Value, a, b) -> ir.Value:
    """acc (n floats) plus the dot products of the bf16 pairs of a and b (``operand``),
    as vdpbf16ps computes them."""
    return IMPLEMENTATIONS[jit.bf16_dot()][1](cg, acc, a, b)


class _Broadcast:
    """B's pair of a step for one column (32 bits), broadcast as ``operand`` once per
    width of the pieces that take it."""

    def __init__(self, pair: ir.Value):
        self.pair = pair
        self.by_lanes: dict = {}

    def at(self, cg: FunctionCodegen, lanes: int):
        if lanes not in self.by_lanes:
            pairs = cg.b.bitcast(splat_n(cg, self.pair, lanes), ir.VectorType(I16, 2 * lanes))
            self.by_lanes[lanes] = operand(cg, pairs)
        return self.by_lanes[lanes]


class PairKernel(Microkernel):
    """The microkernel on bf16 pairs: A's operand in pair layout, B's pair broadcast,
    one dpbf16ps per step (see the module docstring)."""

    k_step = 2

    def pieces(self, M: int) -> List[Tuple[int, int]]:
        """16 rows each; the rest in the narrowest width that holds it."""
        out, r0 = [], 0
        while r0 < M:
            lanes = min(w for w in WIDTHS if w >= min(M - r0, max(WIDTHS)))
            out.append((r0, lanes))
            r0 += lanes
        return out

    def blocks(self, pieces: int, N: int) -> List[Tuple[range, range]]:
        if pieces * N <= ACCUMULATOR_REGISTERS:
            return [(range(pieces), range(N))]
        out = []
        for p0 in range(0, pieces, BLOCK_PIECES):
            ps = range(p0, min(p0 + BLOCK_PIECES, pieces))
            count = -(-N // max(1, ACCUMULATOR_REGISTERS // len(ps)))  # of equal widths
            out += [(ps, range(N * i // count, N * (i + 1) // count)) for i in range(count)]
        return out

    def prepare(self, cg: FunctionCodegen, a, t: ScalarType, cd: ScalarType):
        return a  # the bf16 bits

    def a_operand(self, cg: FunctionCodegen, a, M: int, K: int, k: int, r0: int, lanes: int):
        """Rows r0 .. r0 + lanes - 1 of columns k and k + 1 of A, interleaved (zeros
        past M and K)."""
        zero = a.type.count  # (lane 0 of the zero vector)
        idx = [c * M + r if r < M and c < K else zero
               for r in range(r0, r0 + lanes) for c in (k, k + 1)]
        return operand(cg, cg.b.shuffle_vector(a, zero_of(a.type), _consts(idx)))

    def b_operand(self, cg: FunctionCodegen, b, t: ScalarType, K: int, k: int, j: int,
                  cd: ScalarType):
        """B[k, j] and B[k + 1, j] (0 past K) as one 32-bit value: built with zext, shl
        and or, which LLVM turns into one 32-bit load that vdpbf16ps broadcasts itself
        ({1to16}); a <2 x i16> shuffle bitcast to i32 gave separate broadcasts, 60 more
        instructions per 16 x 16 x 16 step (``_Broadcast``)."""
        bb = cg.b
        lo = bb.zext(bb.extract_element(b, ir.Constant(I32, j * K + k)), I32)
        if k + 1 < K:
            hi = bb.zext(bb.extract_element(b, ir.Constant(I32, j * K + k + 1)), I32)
            lo = bb.or_(lo, bb.shl(hi, ir.Constant(I32, 16)))
        return _Broadcast(lo)

    def step(self, cg: FunctionCodegen, cd: ScalarType, acc, a_op, b_op, lanes: int):
        return dpbf16ps(cg, acc, a_op, b_op.at(cg, lanes))


KERNEL = PairKernel()
