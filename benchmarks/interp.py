"""Throughput of the reference interpreter (make bench).

The interpreter is the test oracle, so what matters is that realistic kernels run in
well under a second: work-groups per second and GFLOP/s on a batched GEMM (collective
path), an SPMD elementwise kernel and a coopmatrix GEMM, next to NumPy doing the same
work in one call.  Results are checked against NumPy before they are reported.
Writes benchmarks/results/interp.json.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
import ttlc  # noqa: E402

BATCHED_GEMM = """
func @bgemm(%A: memref<f32x16x16x?>, %B: memref<f32x16x16x?>, %C: memref<f32x16x16x?>) {
    %gid = group_id.x : index
    %a = subview %A[0:16,0:16,%gid] : memref<f32x16x16>
    %b = subview %B[0:16,0:16,%gid] : memref<f32x16x16>
    %c = subview %C[0:16,0:16,%gid] : memref<f32x16x16>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    gemm %one, %a, %b, %zero, %c
}
"""

SPMD_AXPY = """
func @axpy(%x: memref<f32x?>, %y: memref<f32x?>) attributes{subgroup_size=16, work_group_size=[64,1]} {
    %gid = group_id.x : index
    %c64 = constant 64 : index
    %base = mul %gid, %c64 : index
    %two = constant 2.0 : f32
    parallel {
        %l = subgroup_local_id : i32
        %s = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %s, %c16 : i32
        %u = add %t, %l : i32
        %ui = cast %u : index
        %i = add %base, %ui : index
        %xv = load %x[%i] : f32
        %yv = load %y[%i] : f32
        %p = mul %two, %xv : f32
        %r = add %p, %yv : f32
        store %r, %y[%i]
    }
}
"""

COOP_GEMM = """
func @cgemm(%A: memref<f32x32x32x?>, %B: memref<f32x32x32x?>, %C: memref<f32x32x32x?>) attributes{subgroup_size=16, work_group_size=[32,2]} {
    %gid = group_id.x : index
    %a = subview %A[0:32,0:32,%gid] : memref<f32x32x32>
    %b = subview %B[0:32,0:32,%gid] : memref<f32x32x32>
    %c = subview %C[0:32,0:32,%gid] : memref<f32x32x32>
    %c0 = constant 0 : index
    %c16 = constant 16 : index
    parallel {
        %sy = subgroup_id.y : i32
        %syi = cast %sy : index
        %col = mul %syi, %c16 : index
        %acc0 = constant 0.0 : coopmatrix<f32x32x16,matrix_acc>
        %ma = cooperative_matrix_load %a[%c0,%c0] : coopmatrix<f32x32x32,matrix_a>
        %mb = cooperative_matrix_load %b[%c0,%col] : coopmatrix<f32x32x16,matrix_b>
        %acc = cooperative_matrix_mul_add %ma, %mb, %acc0 : coopmatrix<f32x32x16,matrix_acc>
        cooperative_matrix_store %acc, %c[%c0,%col]
    }
}
"""


def median_time(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fortran(x):
    return np.asfortranarray(x)


def main() -> int:
    rng = np.random.default_rng(0)
    rows = []

    n = 1000
    A, B = (fortran(rng.standard_normal((16, 16, n)).astype(np.float32)) for _ in range(2))
    C = fortran(np.zeros((16, 16, n), np.float32))
    k = ttlc.compile(BATCHED_GEMM, target="interp")["bgemm"]
    t = median_time(lambda: k(A, B, C, grid=(n, 1, 1)), 3)
    ref_t = median_time(lambda: np.einsum("ikb,kjb->ijb", A, B), 5)
    assert np.allclose(C, np.einsum("ikb,kjb->ijb", A, B), rtol=1e-4, atol=1e-4)
    rows.append(("batched gemm 16x16x16 f32", n, t, 2 * 16**3 * n, ref_t))

    n = 1000
    x = rng.standard_normal(64 * n).astype(np.float32)
    y0 = rng.standard_normal(64 * n).astype(np.float32)
    y = y0.copy()
    k = ttlc.compile(SPMD_AXPY, target="interp")["axpy"]
    k(x, y, grid=(n, 1, 1))
    assert np.allclose(y, 2 * x + y0, rtol=1e-6)
    t = median_time(lambda: k(x, y, grid=(n, 1, 1)), 3)
    ref_t = median_time(lambda: 2 * x + y0, 5)
    rows.append(("spmd axpy (64 work-items)", n, t, 2 * 64 * n, ref_t))

    n = 200
    A, B = (fortran(rng.standard_normal((32, 32, n)).astype(np.float32)) for _ in range(2))
    C = fortran(np.zeros((32, 32, n), np.float32))
    k = ttlc.compile(COOP_GEMM, target="interp")["cgemm"]
    t = median_time(lambda: k(A, B, C, grid=(n, 1, 1)), 3)
    ref_t = median_time(lambda: np.einsum("ikb,kjb->ijb", A, B), 5)
    assert np.allclose(C, np.einsum("ikb,kjb->ijb", A, B), rtol=1e-4, atol=1e-3)
    rows.append(("coopmatrix gemm 32x32x32 f32", n, t, 2 * 32**3 * n, ref_t))

    print(f"{'kernel':34s} {'groups':>7s} {'time s':>8s} {'groups/s':>10s} {'GFLOP/s':>8s} "
          f"{'numpy s':>9s} {'interp/numpy':>12s}")
    summary = []
    for name, groups, t, flops, ref_t in rows:
        print(f"{name:34s} {groups:7d} {t:8.3f} {groups / t:10.0f} {flops / t / 1e9:8.3f} "
              f"{ref_t:9.5f} {t / ref_t:12.0f}x")
        summary.append({"kernel": name, "work_groups": groups, "seconds": t,
                        "work_groups_per_second": groups / t, "gflops": flops / t / 1e9,
                        "numpy_seconds": ref_t, "slowdown_vs_numpy": t / ref_t})
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "interp.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
