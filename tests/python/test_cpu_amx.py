"""bf16 cooperative_matrix_mul_add on AMX tiles (target cpu, backends/cpu/amx.py).

Language reference, "Cooperative matrix mul add": D = A B + C, here with bf16 A and B and
an f32 (or bf16) accumulator.  Expected values come from NumPy in float64 on the same
bf16 inputs; the tolerance covers f32 accumulation in another order.  Where the CPU has
no AMX the AMX path runs with its tile instructions emulated (``amx_testing``); the
vector path is checked on every machine.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ttlc
from amx_testing import REAL, amx  # noqa: F401 (fixture)

jit = pytest.importorskip("ttlc.backends.cpu.jit")

KERNEL = """func @mm(%A: memref<bf16x{M}x{K}>, %B: memref<bf16x{K}x{N}>, %C: memref<{acc}x{M}x{N}>)
        attributes{{subgroup_size=16, work_group_size=[{wg},1]}} {{
    parallel {{
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<bf16x{M}x{K},matrix_a>
        %b = cooperative_matrix_load %B[%c0,%c0] : coopmatrix<bf16x{K}x{N},matrix_b>
        %c = cooperative_matrix_load %C[%c0,%c0] : coopmatrix<{acc}x{M}x{N},matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<{acc}x{M}x{N},matrix_acc>
        cooperative_matrix_store %d, %C[%c0,%c0]
    }}
}}
"""

#: (M, K, N): whole tiles, two row tiles, and sizes that need padding (M, N < 16, K < 32)
SHAPES = [(16, 32, 16), (32, 32, 16), (16, 8, 8), (16, 8, 40), (32, 16, 8)]
#: shapes whose vector-path code compiles fast enough to run it too (coopmatrix values
#: are whole-matrix LLVM vectors: a 32 x 64 x 32 product takes LLVM half a minute)
SMALL = [(16, 32, 16), (16, 8, 40), (32, 16, 8)]
ACC = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


def _run(M, K, N, acc="f32", wg=16):
    rng = np.random.default_rng(M * 10000 + K * 100 + N)
    A = np.asfortranarray(rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16))
    B = np.asfortranarray(rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16))
    C = np.asfortranarray(rng.standard_normal((M, N)).astype(ACC[acc]))
    expected = A.astype(np.float64) @ B.astype(np.float64) + C.astype(np.float64)
    text = KERNEL.format(M=M, K=K, N=N, acc=acc, wg=wg)
    ttlc.compile(text, target="cpu")["mm"](A, B, C, grid=1)
    return C.astype(np.float64), expected, text


def _tolerance(K, acc):
    # f32 sums of K products of magnitude ~1: error ~ K * 2^-24 * |terms|; bf16 results
    # round once more (2^-8 relative)
    return (2.0 ** -8 if acc == "bf16" else 0) * 8 + K * 2.0 ** -20


def _uses_amx(text) -> bool:
    from ttlc.backends.cpu.module import Artifacts

    return "tdpbf16ps" in Artifacts(ttlc.check(text), checked=False).ir


@pytest.fixture
def no_cache(monkeypatch):
    monkeypatch.setenv("TTLC_CACHE", "0")


@pytest.mark.parametrize("M,K,N", SHAPES)
@pytest.mark.parametrize("acc", ["f32", "bf16"])
def test_bf16_mul_add_matches_numpy(no_cache, M, K, N, acc):
    got, expected, _ = _run(M, K, N, acc)
    assert np.abs(got - expected).max() <= _tolerance(K, acc) * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("M,K,N", SMALL)
def test_amx_path_is_taken_and_can_be_disabled(amx, monkeypatch, M, K, N):
    _, _, text = _run(M, K, N)
    assert _uses_amx(text)
    monkeypatch.setenv("TTLC_AMX", "0")
    jit.amx_usable.cache_clear()
    try:
        assert not _uses_amx(text)
        got, expected, _ = _run(M, K, N)
        assert np.abs(got - expected).max() <= _tolerance(K, "f32") * np.abs(expected).max()
    finally:
        monkeypatch.delenv("TTLC_AMX")
        jit.amx_usable.cache_clear()


UPDATE = """func @mm(%A: memref<bf16x20x32>, %B: memref<bf16x32x24>, %C: memref<f32x24x24>,
                %D: memref<f32x20x24>) attributes{subgroup_size=16, work_group_size=[{wg},1]} {
    parallel {
        %c0 = constant 0 : index
        %c2 = constant 2 : index
        %zero = constant 0.0 : coopmatrix<f32x32x32,matrix_acc>
        %a = cooperative_matrix_load.rows_checked %A[%c0,%c0] : coopmatrix<bf16x32x32,matrix_a>
        %b = cooperative_matrix_load.cols_checked %B[%c0,%c0] : coopmatrix<bf16x32x32,matrix_b>
        %ab = cooperative_matrix_mul_add %a, %b, %zero : coopmatrix<f32x32x32,matrix_acc>
        %c = cooperative_matrix_load.both_checked %C[%c2,%c0] : coopmatrix<f32x32x32,matrix_acc>
        %three = constant 3.0 : f32
        %c3 = cooperative_matrix_scale %three, %c : coopmatrix<f32x32x32,matrix_acc>
        %d = sub %ab, %c3 : coopmatrix<f32x32x32,matrix_acc>
        cooperative_matrix_store.both_checked %d, %D[%c0,%c0]
    }
}
"""


@pytest.mark.parametrize("wg", [16, 32])
def test_product_updated_by_another_memref_matches_numpy(amx, wg):
    """D = A B - 3 C[2:, :], all at the edges (checked): the product's result is updated
    and stored column by column (``columns.Columns``), and C, read from another memref
    than the one written, is copied to the scratch first (``columns.stage``), zeros
    outside C's 24 rows."""
    rng = np.random.default_rng(5)
    A = np.asfortranarray(rng.integers(-8, 9, (20, 32)).astype(ml_dtypes.bfloat16))
    B = np.asfortranarray(rng.integers(-8, 9, (32, 24)).astype(ml_dtypes.bfloat16))
    C = np.asfortranarray(rng.integers(-8, 9, (24, 24)).astype(np.float32))
    D = np.asfortranarray(np.zeros((20, 24), np.float32))
    text = UPDATE.replace("{wg}", str(wg))
    assert _uses_amx(text)
    ttlc.compile(text, target="cpu")["mm"](A, B, C, D, grid=1)
    # D's 20 rows take C's rows 2..21 (the tile's rows past C's 24 read as zeros, and
    # its rows and columns past D's are not stored)
    expected = A.astype(np.float64) @ B.astype(np.float64) - 3 * C[2:22].astype(np.float64)
    np.testing.assert_array_equal(D, expected)


SCALED_A = """func @mm(%A: memref<bf16x32x64>, %B: memref<bf16x64x16>, %C: memref<f32x32x16>)
        attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %two = constant 2.0 : bf16
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<bf16x32x64,matrix_a>
        %a2 = cooperative_matrix_scale %two, %a : coopmatrix<bf16x32x64,matrix_a>
        %b = cooperative_matrix_load %B[%c0,%c0] : coopmatrix<bf16x64x16,matrix_b>
        %c = cooperative_matrix_load %C[%c0,%c0] : coopmatrix<f32x32x16,matrix_acc>
        %d = cooperative_matrix_mul_add %a2, %b, %c : coopmatrix<f32x32x16,matrix_acc>
        cooperative_matrix_store %d, %C[%c0,%c0]
    }
}
"""


def test_large_vector_operand_is_staged_through_memory(amx):
    """An A that is a vector (a scaled load, not left in memory) of more than
    ``amx.SHUFFLE_LIMIT`` components (32 x 64) is stored to the scratch and its columns
    read back from there (``columns.Place.in_buffer``) to make its pairs: exact against
    NumPy on inputs whose sums are exact."""
    from ttlc.backends.cpu import amx as amx_module

    assert 32 * 64 > amx_module.SHUFFLE_LIMIT
    rng = np.random.default_rng(7)
    A = np.asfortranarray((rng.integers(-16, 17, (32, 64)) / 8).astype(ml_dtypes.bfloat16))
    B = np.asfortranarray((rng.integers(-16, 17, (64, 16)) / 8).astype(ml_dtypes.bfloat16))
    C = np.asfortranarray((rng.integers(-16, 17, (32, 16)) / 8).astype(np.float32))
    expected = 2 * A.astype(np.float64) @ B.astype(np.float64) + C
    assert _uses_amx(SCALED_A)
    ttlc.compile(SCALED_A, target="cpu")["mm"](A, B, C, grid=1)
    np.testing.assert_array_equal(C, expected)


def test_two_subgroups_each_multiply_their_own_matrix(amx):
    got, expected, _ = _run(32, 32, 16, wg=32)
    assert np.abs(got - expected).max() <= _tolerance(32, "f32") * np.abs(expected).max()


@pytest.mark.skipif(not REAL, reason="no AMX-BF16 on this CPU (or the kernel refused the "
                                     "tile-data permission)")
def test_cached_amx_code_runs_in_a_new_process(tmp_path):
    """A process that loads AMX code from the disk cache must have asked for the tile
    permission itself (else the first tile instruction kills it with SIGILL)."""
    import os
    import subprocess
    import sys

    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "import test_cpu_amx as t, numpy as np\n"
        "got, expected, _ = t._run(16, 32, 16)\n"
        "print(np.abs(got - expected).max())\n" % os.path.dirname(__file__))
    env = dict(os.environ, TTLC_CACHE_DIR=str(tmp_path), TTLC_CACHE="1")
    for _ in range(2):  # the first run fills the cache, the second loads from it
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert float(proc.stdout) <= _tolerance(32, "f32") * 8
    assert any(tmp_path.rglob("*")), "nothing was cached"
