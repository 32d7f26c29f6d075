"""The order of a cooperative_matrix_mul_add's FMAs on the CPU (backends/cpu/coop.py,
``update_pieces``, ``COLUMN_BY_COLUMN_STEPS``): K steps of two column by column, longer
steps step by step, and in both no accumulator or operand of A on the stack.  Code for
CPU models with AVX-512 (znver4: AVX512-BF16, no AMX) is compiled in a subprocess, not
run, so that the test holds on any x86-64 host; its results are checked where the host
runs it (spec: cooperative_matrix_mul_add)."""
import json

import numpy as np
import pytest

import ttlc
from ttlc.testing.cpu_model import run_for_cpu_model

import test_cpu_amx_loop as loop  # noqa: E402  (its K-loop kernels)

#: (operand type, m, n, k): K steps of two and of 8 and 32, where the order matters
CASES = [("f32", 32, 8, 2), ("f32", 32, 8, 8), ("f32", 16, 8, 32), ("bf16", 16, 8, 32),
         ("bf16", 32, 8, 8)]

SPILLS = """
import json, sys
import ttlc
from ttlc.backends.cpu import jit
from ttlc.backends.cpu.module import Artifacts
from ttlc.testing.cpu_model import vector_stack_accesses
out = {}
for name, text in json.loads(sys.stdin.read()).items():
    art = Artifacts(ttlc.check(text), checked=False)
    out[name] = vector_stack_accesses(jit.emit_assembly(art.optimized()))
print(json.dumps(out))
"""


def _text(t, m, n, k):
    """C = A B of 64 x 64 x 64 in tiles of m x n, K steps of k, f32 accumulators."""
    return loop._kernel(64, 64, 64, m, k, n, ab=t)


def test_mul_adds_keep_accumulators_and_operands_in_registers():
    """znver4: f32 32x8x8 (16 accumulators and 16 zmm of A's operands, of 32) held A's
    operands of every step across the columns when computed column by column (25 stack
    accesses, 0.63x the speed); bf16 16x8x32 on vdpbf16ps spilled with A's operands made
    step by step (20 stack accesses).  Now none."""
    texts = {f"{t} {m}x{n}x{k}": _text(t, m, n, k) for t, m, n, k in CASES}
    got = run_for_cpu_model("znver4", SPILLS, stdin=json.dumps(texts))
    assert sorted(got) == sorted(texts)
    for name, spills in got.items():
        assert spills == [], (name, spills[:5])


@pytest.mark.parametrize("t,m,n,k", CASES, ids=[f"{t}-{m}x{n}x{k}" for t, m, n, k in CASES])
def test_mul_adds_match_numpy(t, m, n, k):
    """The same kernels on this host against NumPy's float64 products."""
    import ml_dtypes
    dt = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}[t]
    rng = np.random.default_rng(m + n + k)
    A, B = (np.asfortranarray(rng.standard_normal((64, 64)).astype(dt)) for _ in range(2))
    C = np.full((64, 64), np.nan, np.float32, order="F")
    ttlc.compile(_text(t, m, n, k), target="cpu")["mm"](A, B, C)
    want = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(C - want).max() <= 1e-5 * np.abs(want).max()


def test_sets_of_accumulators_are_added_a_register_at_a_time():
    """A K loop with several sets of accumulators (``matmul``: f64 4x3x15 with B shared,
    4 x 3 tiles) adds the sets after the loop piece by piece (``coop.elementwise_binary``):
    no addition wider than a register, which LLVM took for two columns to a zmm and
    carried into the FMAs before it (a vinsertf32x4 and a vpermpd for each broadcast of
    B, 0.82 of LIBXSMM's speed; 1.14-1.42 now): at most a column of 4 rows (a register
    with AVX2 or AVX-512, two with SSE).  The results against NumPy."""
    import re
    from ttlc.testing.kernels import member_kernel
    text = member_kernel("f64", "gemm", [("A", (4, 15), False), ("B", (15, 3), True),
                                         ("C", (4, 3), False)])
    module = ttlc.compile(text, target="cpu")
    widths = [int(w) for w in re.findall(r"fadd <(\d+) x double>", module.artifacts.stage("llvm"))]
    assert widths and max(widths) <= 4, widths
    rng = np.random.default_rng(4)
    A = np.asfortranarray(rng.standard_normal((4, 15, 6)))
    B = np.asfortranarray(rng.standard_normal((15, 3)))
    C = np.full((4, 3, 6), np.nan, order="F")
    module["member"](A, B, C, grid=(6,))
    want = np.einsum("ikb,kj->ijb", A, B)
    assert np.abs(C - want).max() <= 1e-13 * np.abs(want).max()
