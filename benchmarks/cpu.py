"""Target cpu against the interpreter and NumPy on simple kernels.

    .venv/bin/python benchmarks/cpu.py [--n 16777216]

Prints the time per launch (best of several) and the effective bandwidth.  The first
launch of each kernel is not timed (JIT compilation and the cache are measured apart).
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


GEMM = """
func @gemm(%A: group<memref<f32x128x128>x?>, %B: group<memref<f32x128x128>x?>, %C: group<memref<f32x128x128>x?>) {
    %g = group_id.x : index
    %a = load %A[%g] : memref<f32x128x128>
    %b = load %B[%g] : memref<f32x128x128>
    %c = load %C[%g] : memref<f32x128x128>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    gemm %one, %a, %b, %zero, %c
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

    t = time.perf_counter()
    os.environ["TTLC_CACHE"] = "0"
    cpu = ttlc.compile(AXPY, target="cpu")
    print(f"compile axpy for cpu (no cache): {1e3 * (time.perf_counter() - t):.1f} ms")
    del os.environ["TTLC_CACHE"]
    ttlc.compile(AXPY, target="cpu")
    t = time.perf_counter()
    ttlc.compile(AXPY, target="cpu")
    print(f"compile axpy for cpu (cache hit): {1e3 * (time.perf_counter() - t):.1f} ms")
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

    print("batched gemm, 64 x (128 x 128 x 128) f32 (lowered to coopmatrix code):")
    batch = 64
    As = [np.asfortranarray(rng.standard_normal((128, 128)).astype(np.float32)) for _ in range(batch)]
    Bs = [np.asfortranarray(rng.standard_normal((128, 128)).astype(np.float32)) for _ in range(batch)]
    Cs = [np.zeros((128, 128), np.float32, order="F") for _ in range(batch)]
    t = time.perf_counter()
    cpu_g = ttlc.compile(GEMM, target="cpu")
    print(f"  compile: {1e3 * (time.perf_counter() - t):.1f} ms")
    cpu_g["gemm"](As, Bs, Cs, grid=(batch,))
    flops = 2 * 128 ** 3 * batch
    tg = best(lambda: cpu_g["gemm"](As, Bs, Cs, grid=(batch,)))
    print(f"  {'cpu':28s} {1e3 * tg:9.3f} ms  {flops / tg / 1e9:7.2f} GFLOP/s")
    A3, B3 = np.stack(As), np.stack(Bs)
    tn = best(lambda: np.matmul(A3, B3))
    print(f"  {'numpy matmul (BLAS)':28s} {1e3 * tn:9.3f} ms  {flops / tn / 1e9:7.2f} GFLOP/s")
    ref = np.matmul(A3, B3)
    print(f"  max difference to numpy: {max(float(np.abs(c - r).max()) for c, r in zip(Cs, ref)):.2e}")

    print("launch overhead (1 work-group):")
    one = x[:4096].copy()
    cpu["axpy"](2.0, one, one, grid=(1,))
    t = best(lambda: cpu["axpy"](2.0, one, one, grid=(1,)), 50)
    print(f"  cpu: {1e6 * t:.1f} us per launch")


if __name__ == "__main__":
    main()
