"""16-bit gemm on every target (interp, cpu), against NumPy, and its tiles on the CPU.

Language reference, "GEMM": C := alpha op1(A) op2(B) + beta C with bf16 or f16 A and B,
``promote(A, B) <= C``: C in f32 or in the operands' type; ttlc sums in f32 (16-bit results
rounded once).  The inputs are multiples of 1/8 in [-2, 2], so every product and every
partial sum of K <= 64 terms is exact in f32: f32 results must equal NumPy's float64 product
exactly, 16-bit ones that product rounded once to their type.  Shapes are multiples of the
CPU's tiles and not (odd K: a bf16 pair padded), with transposed operands.  On the CPU the
tiles come from ``linalg.unit_tiles`` where the CPU has a unit for bf16 (AVX512-BF16, AMX);
``make test-cpu-models`` runs these again under TTLC_CPU=x86-64-v2/v3 (no AVX-512: f32
FMAs).  The tile choice itself: test_cpu_gemm16.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from interp_testing import DTYPES, farray, run


def rand(shape, ty: str, seed: int) -> np.ndarray:
    """Multiples of 1/8 in [-2, 2]: exact in bf16 and f16, exact products and sums in f32."""
    x = np.random.default_rng(seed).integers(-16, 17, shape) / 8
    return farray(x, DTYPES[ty])


def source(ab: str, c: str, ta: str, tb: str, M: int, N: int, K: int) -> str:
    ashape = (M, K) if ta == "n" else (K, M)
    bshape = (K, N) if tb == "n" else (N, K)
    return f"""func @k(%alpha: {ab}, %A: memref<{ab}x{ashape[0]}x{ashape[1]}>,
                      %B: memref<{ab}x{bshape[0]}x{bshape[1]}>, %beta: {c},
                      %C: memref<{c}x{M}x{N}>) {{
        gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C
    }}"""


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (37, 21, 19), (16, 5, 33)])
@pytest.mark.parametrize("ta,tb", [("n", "n"), ("t", "n"), ("n", "t"), ("t", "t")])
@pytest.mark.parametrize("ab,c", [("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32"),
                                  ("f16", "f16")])
def test_gemm16_against_numpy(ab, c, ta, tb, M, N, K):
    A = rand((M, K) if ta == "n" else (K, M), ab, 1)
    B = rand((K, N) if tb == "n" else (N, K), ab, 2)
    C = rand((M, N), c, 3)
    alpha, beta = 0.5, -2.0
    a = A.astype(np.float64).T if ta == "t" else A.astype(np.float64)
    b = B.astype(np.float64).T if tb == "t" else B.astype(np.float64)
    exact = alpha * (a @ b) + beta * C.astype(np.float64)
    run(source(ab, c, ta, tb, M, N, K), alpha, A, B, beta, C)
    assert C.dtype == DTYPES[c]
    np.testing.assert_array_equal(C, exact.astype(DTYPES[c]))
