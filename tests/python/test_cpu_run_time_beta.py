"""gemm with beta known only at run time, on the CPU.

Language reference, "GEMM" and the BLAS update: beta 0 never reads C (NaN and inf in it
are overwritten, 0 * NaN is not propagated).  The lowering makes one update for both
cases, beta C added under ``if beta != 0`` (``Emitter.update_tile``), and the edge tiles
of run-time sizes share one copy of the tile code (``lower_foreach``).  Inputs are
multiples of 1/8, so products and sums are exact and NumPy's float64 result, rounded
once, is the expected value bit for bit, signed zeros included.
"""
from __future__ import annotations

import numpy as np
import pytest

from interp_testing import DTYPES
from test_interp_gemm16 import rand

pytest.importorskip("llvmlite")

import ttlc  # noqa: E402

#: (operand type, result type)
TYPES = [("f32", "f32"), ("f64", "f64"), ("c64", "c64"), ("bf16", "bf16"), ("f16", "f32")]
#: sizes of one problem: edges in M and N and a K remainder; whole tiles; one entry
SIZES = [(37, 21, 19), (64, 64, 8), (1, 1, 1)]


def kernel(ab: str, c: str, ta: str, shape) -> object:
    """gemm.ta.n with memrefs of the given M x N x K (None: every size and column stride
    known only at run time)."""
    def memref(t: str, rows, cols) -> str:
        if shape is None:
            return f"memref<{t}x?x?,strided<1,?>>"
        return f"memref<{t}x{rows}x{cols}>"
    M, N, K = shape or (None, None, None)
    a = memref(ab, *((M, K) if ta == "n" else (K, M)))
    src = (f"func @k(%alpha: {ab}, %A: {a}, %B: {memref(ab, K, N)}, %beta: {c}, "
           f"%C: {memref(c, M, N)}) {{\n    gemm.{ta}.n %alpha, %A, %B, %beta, %C\n}}")
    return ttlc.compile(src, target="cpu")["k"]


def operand(shape, ty: str, seed: int, pad: int) -> np.ndarray:
    """Exact entries (``rand``), the top rows of a Fortran array with `pad` more rows."""
    rows, cols = shape[0] + pad, shape[1]
    if ty != "c64":
        return rand((rows, cols), ty, seed)[:shape[0]]
    z = rand((rows, cols), "f64", seed) + 1j * rand((rows, cols), "f64", seed + 50)
    return np.asfortranarray(z.astype(DTYPES[ty]))[:shape[0]]


@pytest.mark.parametrize("ab,c", TYPES, ids=[f"{a}-{c}" for a, c in TYPES])
@pytest.mark.parametrize("ta", ["n", "t"])
@pytest.mark.parametrize("static", [True, False], ids=["static", "run-time-sizes"])
def test_run_time_beta_zero_overwrites_and_nonzero_adds(ab, c, ta, static):
    """beta 0: C full of NaN and inf is overwritten, and a zero row of A times a negative
    alpha stores -0 (alpha * +0, nothing added); beta 2: beta C is added (on the result
    of the first call).  Every entry compared bit for bit, C's neighbours
    (run-time sizes: a view of a larger array) untouched."""
    sizes = SIZES[:1] if static else SIZES
    k = kernel(ab, c, ta, sizes[0] if static else None)
    alpha = -0.5
    for seed, (M, N, K) in enumerate(sizes):
        ashape = (M, K) if ta == "n" else (K, M)
        A = operand(ashape, ab, seed, 0 if static else 3)
        if ta == "n":
            A[M // 2, :] = 0
        else:
            A[:, M // 2] = 0
        B = operand((K, N), ab, seed + 10, 0 if static else 2)
        a = A.astype(np.complex128 if c == "c64" else np.float64)
        product = alpha * ((a.T if ta == "t" else a) @ B.astype(a.dtype))
        big = np.asfortranarray(np.full((M + (0 if static else 5), N + 1), 7, DTYPES[c]))
        before = big.copy()
        C = big[:M, :N]
        C[...] = np.nan
        C[-1, -1] = np.inf
        k(alpha, A, B, 0.0, C, grid=1)
        want = product.astype(DTYPES[c])
        assert np.isfinite(C).all(), f"{M}x{N}x{K}: NaN or inf of C kept with beta 0"
        np.testing.assert_array_equal(C, want, err_msg=f"{M}x{N}x{K} beta 0")
        if c != "c64":
            assert np.signbit(C[M // 2, :]).all(), "alpha * +0 with beta 0 is -0"
            assert (np.signbit(C) == np.signbit(want)).all()
        k(alpha, A, B, 2.0, C, grid=1)
        want2 = (product + 2 * want.astype(product.dtype)).astype(DTYPES[c])
        np.testing.assert_array_equal(C, want2, err_msg=f"{M}x{N}x{K} beta 2")
        if c != "c64":
            assert (np.signbit(C) == np.signbit(want2)).all()
        np.testing.assert_array_equal(big[M:], before[M:])
        np.testing.assert_array_equal(big[:, N:], before[:, N:])
