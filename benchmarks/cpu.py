"""Target cpu against the interpreter and NumPy on simple element-wise kernels.

    .venv/bin/python benchmarks/cpu.py [--n 16777216]

Prints the time per launch (best of several) and the effective bandwidth.  The first
launch of each kernel is not timed.  Batched GEMM, the fused and bf16 kernels, compile
time and call overhead are measured by benchmarks/suite.py against NumPy, PyTorch and
LIBXSMM.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import ttlc

AXPY = """
func @axpy(%a: f32, %X: memref<f32x?>, %Y: memref<f32x?>) attributes {subgroup_size=16, work_group_size=[64,1]} {
    %gid = group_id.x : index
    %chunk = constant 4096 : index
    %start = mul %gid, %chunk : index
    %x = subview %X[%start:4096] : memref<f32x4096>
    %y = subview %Y[%start:4096] : memref<f32x4096>
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %w = add %t, %lid : i32
        %i0 = cast %w : index
        %c64 = constant 64 : index
        %n = constant 4096 : index
        for %i = %i0, %n, %c64 {
            %xi = load %x[%i] : f32
            %yi = load %y[%i] : f32
            %p = mul %a, %xi : f32
            %s = add %p, %yi : f32
            store %s, %y[%i]
        }
    }
}
"""

AXPBY = """
func @axpby(%a: f32, %X: group<memref<f32x?>x?>, %Y: group<memref<f32x?>x?>) {
    %gid = group_id.x : index
    %x = load %X[%gid] : memref<f32x?>
    %y = load %Y[%gid] : memref<f32x?>
    %one = constant 1.0 : f32
    axpby %a, %x, %one, %y
}
"""

SINCOS = """
func @sincos(%X: memref<f32x?>, %Y: memref<f32x?>) attributes {subgroup_size=16, work_group_size=[64,1]} {
    %gid = group_id.x : index
    %chunk = constant 4096 : index
    %start = mul %gid, %chunk : index
    %x = subview %X[%start:4096] : memref<f32x4096>
    %y = subview %Y[%start:4096] : memref<f32x4096>
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %w = add %t, %lid : i32
        %i0 = cast %w : index
        %c64 = constant 64 : index
        %n = constant 4096 : index
        for %i = %i0, %n, %c64 {
            %xi = load %x[%i] : f32
            %s = sin %xi : f32
            %c = cos %xi : f32
            %p = mul %s, %c : f32
            store %p, %y[%i]
        }
    }
}
"""



def best(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    args = ap.parse_args()
    n = args.n // 4096 * 4096
    groups = n // 4096
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    print(f"n = {n} f32, {groups} work-groups, {os.cpu_count()} CPUs")

    cpu = ttlc.compile(AXPY, target="cpu")
    interp = ttlc.compile(AXPY, target="interp")

    def report(name, seconds, nbytes):
        print(f"  {name:28s} {1e3 * seconds:9.3f} ms  {nbytes / seconds / 1e9:7.2f} GB/s")

    print("axpy y = a x + y (hand-written SPMD loop):")
    yy = y.copy()
    cpu["axpy"](2.0, x, yy, grid=(groups,))
    report("cpu", best(lambda: cpu["axpy"](2.0, x, yy, grid=(groups,))), 12 * n)
    for threads in ("1",):
        os.environ["TTLC_NUM_THREADS"] = threads
        report(f"cpu, {threads} thread", best(lambda: cpu["axpy"](2.0, x, yy, grid=(groups,))),
               12 * n)
        del os.environ["TTLC_NUM_THREADS"]
    small = min(groups, 16)
    ti = best(lambda: interp["axpy"](2.0, x, yy, grid=(small,)), 2) * groups / small
    report("interp (extrapolated)", ti, 12 * n)

    def numpy_axpy():
        np.multiply(x, np.float32(2.0), out=tmp)
        np.add(tmp, yy, out=yy)
    tmp = np.empty_like(x)
    report("numpy (2 ufuncs, 1 thread)", best(numpy_axpy), 12 * n)

    print("axpby (collective BLAS, lowered by lower-linalg), 256 vectors of 65536:")
    cpu_b = ttlc.compile(AXPBY, target="cpu")
    xs = [x[k * 65536:(k + 1) * 65536] for k in range(min(256, n // 65536))]
    ys = [y[k * 65536:(k + 1) * 65536].copy() for k in range(len(xs))]
    cpu_b["axpby"](2.0, xs, ys, grid=(len(xs),))
    report("cpu", best(lambda: cpu_b["axpby"](2.0, xs, ys, grid=(len(xs),))), 12 * 65536 * len(xs))

    print("y = sin(x) cos(x):")
    cpu_s = ttlc.compile(SINCOS, target="cpu")
    cpu_s["sincos"](x, yy, grid=(groups,))
    report("cpu", best(lambda: cpu_s["sincos"](x, yy, grid=(groups,))), 8 * n)
    report("numpy", best(lambda: np.multiply(np.sin(x), np.cos(x), out=yy)), 8 * n)


if __name__ == "__main__":
    main()
