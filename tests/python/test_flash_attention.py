"""The flash-attention template (examples/flash_attention.template), specialised with the
preprocessor for f16 and bf16 at head dimensions 64 and 128, against a NumPy attention
softmax(Q^T K * scale) V per head, on the interpreter and on target cpu."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ttlc

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bf16 arrays need ml_dtypes")
TEMPLATE = (Path(__file__).resolve().parents[2] / "examples" / "flash_attention.template").read_text()
DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def attention(Q, K, V, scale):
    """O[:, :, h, b] = V softmax(Q^T K scale)^T, the softmax over keys, in float64."""
    d, n, heads, batch = Q.shape
    O = np.empty((d, n, heads, batch))
    for h in range(heads):
        for b in range(batch):
            q, k, v = (X[:, :, h, b].astype(np.float64) for X in (Q, K, V))
            S = q.T @ k * scale
            P = np.exp(S - S.max(axis=1, keepdims=True))
            O[:, :, h, b] = v @ (P / P.sum(axis=1, keepdims=True)).T
    return O


@pytest.mark.parametrize("target", ["interp", "cpu"])
@pytest.mark.parametrize("headdim", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_flash_attention_matches_numpy(dtype, headdim, target):
    np_dtype = DTYPES[dtype]
    rng = np.random.default_rng(headdim)
    n, heads, batch = 37, 2, 2   # 37: a last block of 5 queries and a last tile of 5 keys
    Q, K, V = (np.asfortranarray(rng.standard_normal((headdim, n, heads, batch)).astype(np_dtype))
               for _ in range(3))
    O = np.asfortranarray(np.full((headdim, n, heads, batch), np.nan, np_dtype))
    scale = 1.0 / np.sqrt(headdim)
    module = ttlc.compile(TEMPLATE, target=target, checked=target == "interp",
                          defines={"dtype": dtype, "headdim": headdim})
    module["flash_attention"](Q, K, V, O, np.float32(scale), grid=((n + 15) // 16, heads, batch))
    want = attention(Q, K, V, scale)
    # P and O are rounded to the element type: a few units of its epsilon
    eps = float(ml_dtypes.finfo(np_dtype).eps)
    assert np.abs(O.astype(np.float64) - want).max() <= 4 * eps * np.abs(want).max()


@pytest.mark.parametrize("target", ["interp", "cpu"])
@pytest.mark.parametrize("dtype,headdim", [("f16", 64), ("bf16", 128)])
def test_flash_attention_with_8_subgroups_matches_numpy(dtype, headdim, target):
    """$subgroups = 8: a work-group of [128,1], barriers inside the loop over keys, which
    target cpu runs subgroup after subgroup, phase by phase; 150 queries: a full block of
    128 and one of 22, whose last subgroups have no query."""
    np_dtype = DTYPES[dtype]
    rng = np.random.default_rng(headdim + 1)
    n, heads, batch = 150, 2, 1
    Q, K, V = (np.asfortranarray(rng.standard_normal((headdim, n, heads, batch)).astype(np_dtype))
               for _ in range(3))
    O = np.asfortranarray(np.full((headdim, n, heads, batch), np.nan, np_dtype))
    scale = 1.0 / np.sqrt(headdim)
    module = ttlc.compile(TEMPLATE, target=target, checked=target == "interp",
                          defines={"dtype": dtype, "headdim": headdim, "subgroups": 8})
    module["flash_attention"](Q, K, V, O, np.float32(scale), grid=((n + 127) // 128, heads, batch))
    want = attention(Q, K, V, scale)
    eps = float(ml_dtypes.finfo(np_dtype).eps)
    assert np.abs(O.astype(np.float64) - want).max() <= 4 * eps * np.abs(want).max()
