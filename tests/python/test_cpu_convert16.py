"""Casts of coopmatrices to and from 16-bit floats on the CPU, against NumPy and ml_dtypes.

Language reference, "Cast" (component-wise for coopmatrix types): f32 to f16 and bf16
rounds to nearest, ties to even; NaN stays NaN, infinities and signed zeros stay, what
overflows becomes an infinity, what is below the type's smallest denormal becomes zero.
The CPU converts a matrix of more than 64 components column by column
(``coop.by_columns``) and a vector of more than 64 lanes (a long column) in pieces of 64
(``vectors.pieces``): the shapes below take each way, through memrefs whose rows are not
a multiple of 64 or of a register (checked accesses: ``coop.Valid``).
"""
from __future__ import annotations

import numpy as np
import pytest

import ttlc

ml_dtypes = pytest.importorskip("ml_dtypes")
pytest.importorskip("llvmlite")

DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}

#: values whose rounding is decided at the edges: ties (to even: down, then up), the
#: largest finite numbers and the first ones past them, denormals of f16 and of f32
SPECIAL = {
    "f16": [1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11), 65504.0, 65519.0, 65520.0,
            -65520.0, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 2 ** -14 - 2 ** -24, 1e-40],
    "bf16": [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 3.3895314e38, 3.4028235e38,
             -3.4028235e38, 2 ** -133, 2 ** -134, 1e-40, 1e-45, 2 ** -126, 1 + 2 ** -9],
}
COMMON = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5]

#: M x N memrefs through coopmatrices of R >= M rows (checked: rows past M read as 0 and
#: are not written)
KERNEL = """func @k(%A: memref<f32x{M}x{N}>, %H: memref<{t}x{M}x{N}>, %B: memref<f32x{M}x{N}>,
                  %s: f32) {{
    parallel {{
        %c0 = constant 0 : index
        %a = cooperative_matrix_load.rows_checked %A[%c0, %c0] : coopmatrix<f32x{R}x{N},matrix_acc>
        %h = cast %a : coopmatrix<{t}x{R}x{N},matrix_acc>
        cooperative_matrix_store.rows_checked %h, %H[%c0, %c0]
        %g = cooperative_matrix_load.rows_checked %H[%c0, %c0] : coopmatrix<{t}x{R}x{N},matrix_acc>
        %b = cast %g : coopmatrix<f32x{R}x{N},matrix_acc>
        %sb = cooperative_matrix_scale %s, %b : coopmatrix<f32x{R}x{N},matrix_acc>
        cooperative_matrix_store.rows_checked %sb, %B[%c0, %c0]
    }}
}}"""


def _inputs(t: str, M: int, N: int) -> np.ndarray:
    """f32 M x N: the special values, then numbers of every magnitude the type holds."""
    rng = np.random.default_rng(M * N)
    x = rng.standard_normal(M * N) * np.exp2(rng.integers(-30, 30, M * N))
    special = COMMON + SPECIAL[t]
    x[:len(special)] = special
    x[-len(special):] = special[::-1]  # (also in the last, padded piece)
    return np.asfortranarray(x.astype(np.float32).reshape((M, N), order="F"))


@pytest.mark.parametrize("M,N,R", [(37, 5, 64), (100, 1, 128), (130, 2, 256), (16, 4, 16)])
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_cast_to_16_bits_and_back_matches_numpy(t, M, N, R):
    A = _inputs(t, M, N)
    H = np.asfortranarray(np.zeros((M, N), DTYPES[t]))
    B = np.asfortranarray(np.zeros((M, N), np.float32))
    with np.errstate(all="ignore"):
        want_h = A.astype(DTYPES[t])
        want_b = np.float32(-0.5) * want_h.astype(np.float32)
    ttlc.compile(KERNEL.format(t=t, M=M, N=N, R=R), target="cpu")["k"](A, H, B, -0.5, grid=1)
    wh, gh = want_h.astype(np.float32), H.astype(np.float32)
    nan = np.isnan(wh)
    np.testing.assert_array_equal(np.isnan(gh), nan)
    np.testing.assert_array_equal(gh[~nan], wh[~nan])
    np.testing.assert_array_equal(np.signbit(gh[~nan]), np.signbit(wh[~nan]))  # (-0.0)
    np.testing.assert_array_equal(B, want_b)
