"""Loads of a small local temporary on the CPU (backends/cpu/coop_memory.py,
``pieces_of``): a column of a static number of rows that is not a whole tile is loaded in
the pieces its store wrote (f32 9 rows: 8 + 1), so that the CPU forwards the stores still
in flight to the loads; a masked load across both waits until they reach the cache (f32
chain 9x1x3x2: 0.65 of LIBXSMM's speed, 1.5-1.9 in pieces).  Spec:
cooperative_matrix_load, cooperative_matrix_store (rows_checked), alloca (local memory)."""
import numpy as np
import pytest

import ttlc
from ttlc.testing.kernels import chain_kernel

pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

#: (m, k, n, p): temporaries of 8 + 1, 2 + 1, 4 + 1, 16 + 4 and 16 + 8 + 4 + 1 rows (f32
#: on AVX-512), and f64 3x18, 36 stores (beyond ``LOCAL_STORES``: masked loads)
SHAPES = [(9, 1, 3, 2), (3, 3, 3, 1), (5, 1, 1, 6), (20, 2, 3, 3), (29, 8, 4, 3), (3, 9, 18, 5)]


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_local_loads_in_pieces_match_numpy(t, shape):
    """Each chain through a local temporary against NumPy, D filled with NaN first."""
    m, k, n, p = shape
    dt, batch = {"f32": np.float32, "f64": np.float64}[t], 5
    rng = np.random.default_rng(m * 1000 + k * 100 + n * 10 + p)
    A = np.asfortranarray(rng.standard_normal((m, k)).astype(dt))
    B = np.asfortranarray(rng.standard_normal((k, n, batch)).astype(dt))
    C = np.asfortranarray(rng.standard_normal((n, p, batch)).astype(dt))
    D = np.full((m, p, batch), np.nan, dt, order="F")
    ttlc.compile(chain_kernel(t, *shape), target="cpu")["chain"](A, B, C, D, grid=(batch,))
    want = np.einsum("ik,kjb,jlb->ilb", *(x.astype(np.float64) for x in (A, B, C)))
    tol = 1e-5 if t == "f32" else 1e-13
    np.testing.assert_allclose(D, want, rtol=tol, atol=tol * np.abs(want).max())


def masked_loads(text):
    """llvm.masked.load calls in the LLVM IR of `text`, before LLVM's optimizations."""
    ir = ttlc.compile(text, target="cpu").artifacts.stage("llvm")
    return sum(" call " in line and "llvm.masked.load" in line for line in ir.splitlines())


@pytest.mark.parametrize("t,shape,in_pieces", [("f32", (9, 1, 3, 2), True),
                                               ("f64", (5, 1, 1, 6), True),
                                               ("f64", (3, 9, 18, 5), False)])
def test_local_temporary_loads_in_its_stores_pieces(t, shape, in_pieces):
    """The same chain with its temporary in local memory and in a global operand: the
    local one's columns are loaded in pieces, the global one's masked (on AVX-512, f32
    9x1x3x2: A's column masked in both, the temporary's three columns in the global one
    only); f64 3x9x18x5 writes its temporary in 36 stores (AVX-512), beyond
    ``LOCAL_STORES``: masked in both."""
    local, global_ = (masked_loads(chain_kernel(t, *shape, temporary=where))
                      for where in ("local", "global"))
    assert (local < global_ if in_pieces else local == global_ > 0), (local, global_)
