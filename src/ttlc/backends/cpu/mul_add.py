"""Which unit computes a cooperative_matrix_mul_add, and the instruction's emitter.

bf16 x bf16 (AMX-BF16) and f16 x f16 (AMX-FP16) into f32 run on AMX tiles (``amx.py``)
where the machine has them and the process may use them, else bf16 on vdpbf16ps where it
has AVX512-BF16 (``dpbf16.py``); every other product, and these where neither is there, on
the vector path's FMA microkernel (``coop.microkernel``).  The choice sits above the three
paths, which build on ``coop.py`` and know nothing of each other.
"""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.numerics import accumulate_type
from ...ir.types import CoopMatrixType
from ...target import MatrixInstruction, MatrixUnit
from . import amx, coop, dpbf16
from .arith import convert
from .function import FunctionCodegen
from .values import CoopVal


def mul_add_path(a_type: str, b_type: str, acc_type: str) -> str:
    """What computes mul_add with these component types here: "AMX" (``amx.py``),
    "AVX512-BF16" (``dpbf16.py``) or "FMA" (the vector path: FMAs in the accumulation
    type, f32 for 16-bit floats)."""
    if amx.eligible(a_type, b_type, acc_type):
        return "AMX"
    if dpbf16.eligible(a_type, b_type, acc_type):
        return "AVX512-BF16"
    return "FMA"


#: mul_add_path -> the grain of its products (rows, columns, k of one instruction), the
#: products of that grain its accumulators hold at once, for lower-linalg's tiles, and
#: whether those tiles suit a B loaded transposed (not on AMX: LLVM takes minutes to
#: optimize the code of a 32 x 32 x 32 AMX mul_add whose B is loaded with .t)
GRAINS = {
    "AMX": (amx.TILE_ROWS, amx.TILE_ROWS, amx.MAX_K_STEP, amx.ACCUMULATOR_TILES, False),
    "AVX512-BF16": (max(dpbf16.WIDTHS), 1, dpbf16.KERNEL.k_step, dpbf16.GEMM_ACCUMULATORS, True),
}
#: the products of 16-bit operands gemm accumulates in f32 (``accumulate_type``)
SIXTEEN_BIT_PRODUCTS = (("bf16", "bf16", "f32"), ("f16", "f16", "f32"))


def matrix_unit() -> MatrixUnit:
    """This CPU's matrix or dot-product unit as the middle end sees it (``Target.matrix``
    of the cpu description, ``module.lower``): for each 16-bit product that runs on AMX or
    AVX512-BF16 here (``mul_add_path``), the grain of that path, so that gemm's tiles are
    whole blocks of it (``linalg.unit_tiles``).  f16 has one only with AMX-FP16:
    AVX512-FP16 multiplies and accumulates in f16 only, while gemm accumulates 16-bit
    floats in f32, so elsewhere f16 products are f32 FMAs on converted operands."""
    found = [(mul_add_path(*types), types) for types in SIXTEEN_BIT_PRODUCTS]
    found = [(path, types) for path, types in found if path in GRAINS]
    if not found:
        return MatrixUnit()
    insts = tuple(MatrixInstruction(*GRAINS[path][:3], *types, 0) for path, types in found)
    *_, accumulators, transposed_b = GRAINS[found[0][0]]
    return MatrixUnit(found[0][0], insts, accumulators=accumulators, transposed_b=transposed_b)


def emit_mul_add(cg: FunctionCodegen, inst: Instruction):
    """D = A B + C per subgroup, in C's type (16-bit floats in f32), then cast to D's.

    The register-blocked outer-product microkernel (``microkernel``): the accumulator
    columns ``D[:, j]`` start as C's columns and take, for k = 0 .. K-1 in order,
    ``A[:, k] * B[k, j]`` (a column of A times a broadcast entry of B) with one FMA each;
    LLVM keeps the N columns in registers.  16-bit products into f32 run on AMX tiles where
    the machine has them (``amx.py``), else bf16 on vdpbf16ps where it has AVX512-BF16
    (``dpbf16.py``)."""
    coop.whole_subgroups(cg)
    A: CoopVal = cg.get(inst.slots["a"])
    B: CoopVal = cg.get(inst.slots["b"])
    C: CoopVal = cg.get(inst.slots["c"])
    D: CoopMatrixType = inst.results[0].type
    ct = C.type.component
    cd = accumulate_type(ct)
    M, K, N = A.type.rows, A.type.cols, B.type.cols
    if isinstance(C, amx.TileAccumulator):  # held in tile registers across a loop
        return C.mul_add(cg, inst, A, B)
    path = mul_add_path(A.type.component.name, B.type.component.name, ct.name)
    kernel = dpbf16.KERNEL if path == "AVX512-BF16" else coop.fma_kernel(M, N, cd)
    out = []
    for g in range(coop.subgroups(cg)):
        if path == "AMX":  # 16-bit products into f32 on the tile unit
            d = amx.mul_add(cg, A.type.component.name, A.mats[g], B.mats[g], C.mats[g], M, K, N)
        else:
            d = coop.microkernel(cg, kernel, A, B, g, convert(cg, C.mats[g], ct, cd), cd)
        if cd != ct:
            d = convert(cg, d, cd, ct)
        out.append(convert(cg, d, ct, D.component))
    return CoopVal(out, D)


#: the product of coopmatrices
EMITTERS: Dict[str, Callable] = {"cooperative_matrix_mul_add": emit_mul_add}
