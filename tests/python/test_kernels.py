"""What a kernel and a module say about themselves (repr, help), and ttlc.bench.

README "Running kernels": a kernel shows its signature (parameter names and types,
attributes), the target and whether it is checked; a module lists its kernels; and
``ttlc.bench`` times a kernel with warm-up, many runs, median and quartiles, and rates
from the work the caller names.
"""
from __future__ import annotations

import pydoc

import numpy as np
import pytest

import ttlc
from ttlc.runtime import check_grid

TEXT = """func @scale(%a: f32, %A: memref<f32x16x?> {alignment=64}) attributes{subgroup_size=16} {
    %k = group_id.x : index
    %v = subview %A[0:16,%k] : memref<f32x16>
    %z = constant 0.0 : f32
    axpby %a, %v, %z, %v
}
func @nothing() {
}
"""
SIGNATURE = ("func @scale(%a: f32, %A: memref<f32x16x?> {alignment=64}) "
             "attributes{subgroup_size=16}")


@pytest.mark.parametrize("target, checked", [("interp", True), ("cpu", False)])
def test_kernels_and_modules_introspect(target, checked):
    module = ttlc.compile(TEXT, target=target, checked=checked)
    kernel = module["scale"]
    assert kernel.signature == SIGNATURE
    suffix = ", checked" if checked else ""
    assert repr(kernel) == f"<ttlc kernel {SIGNATURE} on {target}{suffix}>"
    assert repr(module) == f"<ttlc module on {target}{suffix}: @scale, @nothing>"
    assert list(module) == ["scale", "nothing"]
    shown = pydoc.render_doc(kernel, renderer=pydoc.plaintext)
    assert SIGNATURE in shown and f"target {target}" in shown


def test_bench_times_warm_runs_and_gives_rates():
    kernel = ttlc.compile(TEXT)["scale"]
    raw = np.ones(16 * 64 + 16, np.float32)
    start = (-raw.ctypes.data % 64) // 4
    A = raw[start:start + 16 * 64].reshape((16, 64), order="F")  # 64-byte aligned
    calls = []
    real = kernel.module.launcher  # (a kernel's first call asks its module for its launcher)

    def counting(k):
        launch = real(k)

        def count(args, grid):
            calls.append(check_grid(grid))
            launch(args, grid)
        return count
    kernel.module.launcher = counting
    result = ttlc.bench(kernel, np.float32(1.0), A, grid=(64,), warmup=2, runs=7,
                        flops=16 * 64, nbytes=2 * 4 * 16 * 64)
    assert len(calls) == 2 + 7 and set(calls) == {(64, 1, 1)}
    assert len(result.times) == 7 and all(t > 0 for t in result.times)
    lo, hi = result.spread
    assert min(result.times) <= lo <= result.median <= hi <= max(result.times)
    assert result.gflops == pytest.approx(16 * 64 / result.median / 1e9)
    assert result.gbytes_per_s == pytest.approx(8 * 16 * 64 / result.median / 1e9)
    assert "median" in str(result) and "GFLOP/s" in str(result) and "7 runs" in str(result)
    np.testing.assert_array_equal(A, 1)  # alpha 1: the data is as it was


def test_bench_runs_at_least_five_times_and_checks_its_options():
    kernel = ttlc.compile(TEXT)["nothing"]
    assert len(ttlc.bench(kernel, seconds=0).times) == 5
    with pytest.raises(ValueError, match="runs >= 1"):
        ttlc.bench(kernel, runs=0)
