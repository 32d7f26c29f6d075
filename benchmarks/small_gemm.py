#!/usr/bin/env python3
"""Small GEMMs of real applications: ttlc against LIBXSMM, NumPy and PyTorch, in one process.

    .venv/bin/python benchmarks/small_gemm.py [--quick]
                  [--only batched,shared,shared-b,dynamic,tall,chain,gemv,ger,call]
                  [--dtypes f64,f32] [--batch-bytes N] [--repeat N] [--sample-ms MS]
                  [--out DIR]

(``TTLC_NUM_THREADS=1`` runs every library on one thread: on a shared machine the ratios
of one thread with ``--batch-bytes 524288 --sample-ms 0 --repeat 60``, the best of 60
single calls taken in turns, vary least.)

The shapes (M x N x K, column-major) are those of a discontinuous-Galerkin code (9
quantities, 10 to 120 basis functions) and a few others between 1 and 128; each kind is
one kernel written as a user would, with default attributes: one ``gemm`` per batch member
through ``group_id`` and ``subview``.

- ``batched``: C_i = A_i B_i, every operand batched;
- ``shared``: C_i = A B_i, one A shared by all members (no batch mode);
- ``shared-b``: C_i = A_i B, one B shared by all members (a DG code's 9x9 flux matrix, or
  a stiffness matrix multiplied from the right);
- ``dynamic``: C_i = A_i B_i through one kernel of dynamic sizes for every shape
  (``DYNAMIC_GEMM``, ``memref<t x?x?x?>``): from its SPECIALIZE_AFTER-th launch with a
  shape on, a launch runs a copy compiled for it (``ttlc.backends.cpu.specialize``); the
  copy's compile (what that launch does before it runs the copy) is recorded as the
  shape's cold compile, and as its warm one the same with the copy in the disk cache;
- ``tall``: C = A B with A of 10^6 rows, one work-group per block of rows;
- ``chain``: D_i = A B_i C_i through a local temporary (A shared, as a DG stiffness matrix);
- ``gemv``: c_i = A_i b_i and c_i = A_i^T b_i (``gemv.t``), R x C matrices of the shapes
  ``VECTOR_SHAPES``, batched and with A shared by all members;
- ``ger``: C_i = a_i b_i^T (M x N), batched and with a shared by all members;
- ``call``: the cost of one call from Python, C = A B of ``CALL_SHAPE`` on one work-group,
  against NumPy's ``matmul`` of the same arrays (``out=C``), PyTorch's and one LIBXSMM
  gemm (most of each is the call itself).

LIBXSMM computes gemv and ger as a LIBXSMM user would: one small gemm per member, with
N = 1 for gemv (c^T = b^T A, M = 1, for the transposed one) and K = 1 for ger.

The 16-bit 64^3 products are measured by benchmarks/gemm16.py and appear here as
skipped.  Every implementation's result is first compared with NumPy (a mismatch
stops the run); times are the best of samples taken in turns (the machine may be shared),
and each kernel's cold compile (an empty cache) and warm one (a cache hit) are recorded,
as CPU time of the compiling thread and as wall time.  Prints GFLOP/s and the
ratios other time / ttlc time (above 1: ttlc is faster) and writes
``DIR/small_gemm-<time>.json`` and ``DIR/small_gemm-latest.json`` (DIR: benchmarks/results).
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

#: where TTLC_CPU names a model without AVX-512, the other libraries are held to the same
#: instructions (set before they load): LIBXSMM's code generator, PyTorch's kernels and
#: OpenBLAS (NumPy's and PyTorch's matmul)
WITHOUT_AVX512 = {"LIBXSMM_TARGET": "hsw", "ATEN_CPU_CAPABILITY": "avx2",
                  "OPENBLAS_CORETYPE": "Haswell"}
if os.environ.get("TTLC_CPU", "").strip() in ("x86-64-v3", "haswell", "skylake", "znver1",
                                               "znver2", "znver3"):
    for _name, _value in WITHOUT_AVX512.items():
        os.environ.setdefault(_name, _value)

import idle_threads  # noqa: E402, F401  (before NumPy: its BLAS threads sleep when idle)
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
try:
    import ttlc
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(HERE.parent / "src"))
    import ttlc
sys.path.insert(0, str(HERE))
import native  # noqa: E402
import recipes  # noqa: E402
from recipes import check, timed  # noqa: E402
from suite import GEMM_SUBVIEW, environment, write_summary  # noqa: E402
from ttlc.backends.cpu.specialize import SPECIALIZE_AFTER  # noqa: E402
from ttlc.testing.kernels import (DYNAMIC_GEMM, chain_kernel, member_kernel,  # noqa: E402
                                  tall_kernel)

DTYPES = {"f32": np.float32, "f64": np.float64}
TOLERANCE = {"f32": 1e-5, "f64": 1e-12}
#: (M, N, K) of the batched and shared-operand products
DG_SHAPES = [(56, 9, 56), (84, 9, 84), (35, 9, 35), (9, 9, 56), (20, 9, 20), (10, 9, 10),
             (120, 9, 120)]
OTHER_SHAPES = [(1, 1, 1), (1, 56, 56), (3, 5, 7), (17, 13, 11), (128, 9, 128), (64, 64, 64), (100, 100, 100)]
QUICK_SHAPES = [(56, 9, 56), (35, 9, 35), (9, 9, 56)]
#: rows of the tall-and-skinny A, and the rows each work-group takes
TALL_ROWS, TALL_BLOCK = 1_000_000, 100
#: (m, k, n, p) of D = A B C: A m x k, B k x n, C n x p
CHAINS = [(56, 56, 9, 9), (35, 35, 9, 9), (84, 84, 9, 9)]
#: (rows, columns) of gemv's A and ger's C
VECTOR_SHAPES = [(56, 56), (84, 84), (35, 35), (9, 56), (120, 120), (17, 13), (1, 1), (3, 5)]
QUICK_VECTOR_SHAPES = [(56, 56), (9, 56), (3, 5)]
KINDS = ("batched", "shared", "shared-b", "dynamic", "tall", "chain", "gemv", "ger", "call")
#: (M, N, K) of the ``call`` kind: matrices small enough that a call's cost is its time
CALL_SHAPE = (4, 4, 4)
#: the operand shared by all members in the gemm kinds ("": none)
SHARED_OPERAND = {"batched": "", "shared": "A", "shared-b": "B"}
#: the CPU time in milliseconds a kernel of this section should compile within, cold (an
#: empty cache) and warm (a cache hit)
COLD_MS, WARM_MS = 150, 5
#: the 16-bit cases, measured by their own section (against hand-written kernels and torch)
SIXTEEN_BIT = {"bf16/f16 64x64x64": "benchmarks/gemm16.py"}

def warm_up() -> None:
    """Pay the process's one-time costs of compiling -- LLVM's start (target machine,
    passes) and the import of ttlc's lowering passes -- on a kernel no row measures,
    compiled without the cache: a cache hit runs neither and leaves them to the first
    kernel's cold compile (f64 56x9x56: 185 ms of CPU time instead of 70 where Python
    writes no bytecode cache).  Then the objects made so far (the imports', PyTorch's
    above all) are left out of the garbage collector's passes (``gc.freeze``): a full
    pass over them took 111 ms and fell into whichever compile allocated when it was
    due (7 of 16 runs had a kernel over COLD_MS, a different one each time); the passes
    the compiles' own objects cause stay in their times."""
    with environment(TTLC_CACHE="0"):
        ttlc.compile(GEMM_SUBVIEW.format(t="f32", M=2, N=2, K=2), target="cpu")
    gc.collect()
    gc.freeze()


def compile_time(text: str) -> dict:
    """ttlc.compile(text) for the CPU: {"module", "cpu", "wall"} (milliseconds)."""
    cpu, wall = time.thread_time(), time.perf_counter()
    module = ttlc.compile(text, target="cpu")
    return {"module": module, "cpu": (time.thread_time() - cpu) * 1e3,
            "wall": (time.perf_counter() - wall) * 1e3}


def fortran(rng, shape, dtype):
    return np.asfortranarray(rng.standard_normal(shape).astype(dtype))


def rows_of(x):
    """The batch-first row-major view of a column-major (rows, cols[, batch]) array."""
    return x.T


class Run(recipes.Run):
    """recipes.Run (samples, threads, LIBXSMM and PyTorch or why they are missing) with
    this section's sizes, types and compile times."""

    def __init__(self, opts):
        super().__init__(opts)
        #: bytes of the operands of one batched case (about the L3: code, not memory, shows)
        self.bytes = opts.batch_bytes or ((2 << 20) if opts.quick else (24 << 20))
        self.repeat = opts.repeat or self.repeat
        if opts.sample_ms is not None:
            self.sample = opts.sample_ms / 1e3
        self.dtypes = opts.dtypes.split(",") if opts.dtypes else list(DTYPES)
        self.compile_ms = {}
        warm_up()
        for case, where in SIXTEEN_BIT.items():
            self.skip(case, f"measured by {where}")

    def compile(self, name: str, text: str, entry: str):
        """Compile `text` cold (a fresh, empty cache directory: LLVM runs) and warm (the
        same text again: a cache hit), recording both times as CPU time of the calling
        thread ("cold", "warm": ttlc and LLVM compile on it, no other thread works for
        it) and as wall time ("cold_wall", "warm_wall": on a shared machine it counts
        the time other processes had the core as well)."""
        with tempfile.TemporaryDirectory(prefix="ttlc-bench-cache-") as d, \
                environment(TTLC_CACHE="1", TTLC_CACHE_DIR=d):
            cold = compile_time(text)
            module = cold.pop("module")
            warm = min((compile_time(text) for _ in range(3)), key=lambda t: t["cpu"])
        self.compile_ms[name] = {"cold": cold["cpu"], "cold_wall": cold["wall"],
                                 "warm": warm["cpu"], "warm_wall": warm["wall"]}
        return module[entry]

    def batch(self, entry_elements: int, t: str) -> int:
        return int(min(20000, max(64, self.bytes // (entry_elements * np.dtype(DTYPES[t]).itemsize))))

    def measure(self, kind, t, shape, flops, impls, out, want):
        """Check every implementation's output against `want`, then time them."""
        for name, fn in impls.items():
            out[name][...] = np.nan
            fn()
            check(f"{kind} {t} {shape} {name}", out[name], want, TOLERANCE[t])
        # the best sample: on a shared machine the others are the load of other jobs
        seconds = timed(impls, self.repeat, self.sample, min)
        row = {"kind": kind, "dtype": t, "shape": shape, "seconds": seconds,
               "gflops": {k: flops / v / 1e9 for k, v in seconds.items()},
               "ratio": {k: v / seconds["ttlc"] for k, v in seconds.items() if k != "ttlc"},
               "compile_ms": self.compile_ms.get(f"{kind} {t} {shape}")}
        self.rows.append(row)
        ratios = "  ".join(f"vs {k} {v:5.2f}" for k, v in row["ratio"].items())
        print(f"  {kind:8s} {t:4s} {shape:26s} ttlc {row['gflops']['ttlc']:7.2f} GFLOP/s  "
              f"{ratios}", flush=True)

    def shapes(self):
        return QUICK_SHAPES if self.quick else DG_SHAPES + OTHER_SHAPES

    def batched(self, kind: str):
        """C_i = A_i B_i, the operand SHARED_OPERAND[kind] one matrix for all members."""
        shared = SHARED_OPERAND[kind]
        print(f"{kind}: C_i = {'A' if shared == 'A' else 'A_i'} {'B' if shared == 'B' else 'B_i'}"
              " (other time / ttlc time):")
        rng = np.random.default_rng(3)
        for t in self.dtypes:
            for M, N, K in self.shapes():
                batch = self.batch((0 if shared == "A" else M * K)
                                   + (0 if shared == "B" else K * N) + M * N, t)
                shape = f"{M}x{N}x{K} b{batch}"
                A = fortran(rng, (M, K) if shared == "A" else (M, K, batch), DTYPES[t])
                B = fortran(rng, (K, N) if shared == "B" else (K, N, batch), DTYPES[t])
                text = (GEMM_SUBVIEW.format(t=t, M=M, N=N, K=K) if not shared else
                        member_kernel(t, "gemm", [("A", (M, K), shared == "A"),
                                                  ("B", (K, N), shared == "B"),
                                                  ("C", (M, N), False)]))
                kernel = self.compile(f"{kind} {t} {shape}", text,
                                      "member" if shared else "gemm")
                strides = (0 if shared == "A" else M * K, 0 if shared == "B" else K * N, M * N)
                self.measure(kind, t, shape, 2.0 * M * N * K * batch,
                             *self.products(kernel, A, B, (M, N, batch), strides))

    def dynamic(self):
        """C_i = A_i B_i through DYNAMIC_GEMM, one kernel per type for all shapes, the
        copies compiled for the shapes with an empty cache (cold), then by a second
        kernel of the same text from the cache (warm)."""
        print("dynamic: C_i = A_i B_i, one kernel of dynamic sizes (other time / ttlc time):")
        rng = np.random.default_rng(8)
        for t in self.dtypes:
            with tempfile.TemporaryDirectory(prefix="ttlc-bench-cache-") as d, \
                    environment(TTLC_CACHE="1", TTLC_CACHE_DIR=d):
                kernels = [ttlc.compile(DYNAMIC_GEMM.format(t=t), target="cpu")["gemm"]
                           for _ in ("cold", "warm")]
                for M, N, K in self.shapes():
                    batch = self.batch(M * K + K * N + M * N, t)
                    shape = f"{M}x{N}x{K} b{batch}"
                    A = fortran(rng, (M, K, batch), DTYPES[t])
                    B = fortran(rng, (K, N, batch), DTYPES[t])
                    C = np.zeros((M, N, batch), DTYPES[t], order="F")
                    ms = {}
                    for what, kernel in zip(("cold", "warm"), kernels):
                        for _ in range(SPECIALIZE_AFTER - 1):
                            kernel(A, B, C, grid=(batch,))
                        # what the next launch does before it runs: make the copy
                        cpu, wall = time.thread_time(), time.perf_counter()
                        made = kernel._launch.copies.launcher((A, B, C))
                        ms[what] = (time.thread_time() - cpu) * 1e3
                        ms[f"{what}_wall"] = (time.perf_counter() - wall) * 1e3
                        assert made is not None, f"no copy of {shape}"
                    self.compile_ms[f"dynamic {t} {shape}"] = ms
                    self.measure("dynamic", t, shape, 2.0 * M * N * K * batch,
                                 *self.products(kernels[0], A, B, (M, N, batch),
                                                (M * K, K * N, M * N)))

    def products(self, kernel, A, B, out_shape, strides):
        """The implementations of C_i = A_i B_i (out_shape (M, N, batch), or (M, N) for
        one product; strides: each operand's between members, 0 where one matrix serves
        all), their outputs and the result they must give: what ``measure`` takes after
        the flops."""
        M, N, batch = (*out_shape, 1)[:3]
        K = A.shape[1]
        out = {name: np.zeros(out_shape, A.dtype, order="F")
               for name in ("ttlc", "numpy", "torch", "libxsmm")}
        At, Bt = rows_of(A), rows_of(B)  # C_i^T = B_i^T A_i^T (a shared one broadcast)
        impls = {"ttlc": lambda: kernel(A, B, out["ttlc"], grid=(batch,)),
                 "numpy": lambda: np.matmul(Bt, At, out=rows_of(out["numpy"]))}
        if self.torch is not None:
            tA, tB, tC = (self.torch.from_numpy(x) for x in (At, Bt, rows_of(out["torch"])))
            impls["torch"] = lambda: self.torch.matmul(tB, tA, out=tC)
        if self.lib.has_libxsmm:
            impls["libxsmm"] = lambda: self.lib.xsmm_strided(
                A, B, out["libxsmm"], M, N, K, (M, K, M), strides, batch, self.threads)
        return impls, out, np.matmul(Bt.astype(np.float64), At).T

    def vector_shapes(self):
        return QUICK_VECTOR_SHAPES if self.quick else VECTOR_SHAPES

    def gemv(self):
        """c_i = op(A_i) b_i and c_i = op(A) b_i, A of R x C."""
        print("gemv: c_i = op(A_i) b_i, op(A) b_i (other time / ttlc time):")
        rng = np.random.default_rng(6)
        for t in self.dtypes:
            for R, C in self.vector_shapes():
                for ta in "nt":
                    for shared in (False, True):
                        K, M = (C, R) if ta == "n" else (R, C)  # lengths of b and c
                        batch = self.batch((0 if shared else R * C) + K + M, t)
                        kind = "gemv" if ta == "n" else "gemv.t"
                        shape = f"{R}x{C}{' A shared' if shared else ''} b{batch}"
                        A = fortran(rng, (R, C) if shared else (R, C, batch), DTYPES[t])
                        b = fortran(rng, (K, batch), DTYPES[t])
                        text = member_kernel(t, kind, [("A", (R, C), shared), ("b", (K,), False),
                                                       ("c", (M,), False)])
                        kernel = self.compile(f"{kind} {t} {shape}", text, "member")
                        out = {name: np.zeros((M, batch), DTYPES[t], order="F")
                               for name in ("ttlc", "numpy", "torch", "libxsmm")}
                        # the batch-first row-major views: A_i^T is (C, R), b_i a row
                        At, bt = rows_of(A), rows_of(b)
                        if ta == "n":  # c_i^T = b_i^T A_i^T
                            def product(mm, At, bt, ct):
                                return lambda: mm(bt[..., None, :], At, out=ct[..., None, :])
                        else:  # c_i = A_i^T b_i
                            def product(mm, At, bt, ct):
                                return lambda: mm(At, bt[..., :, None], out=ct[..., :, None])
                        impls = {"ttlc": lambda: kernel(A, b, out["ttlc"], grid=(batch,)),
                                 "numpy": product(np.matmul, At, bt, rows_of(out["numpy"]))}
                        if self.torch is not None:
                            impls["torch"] = product(self.torch.matmul, *(
                                self.torch.from_numpy(x)
                                for x in (At, bt, rows_of(out["torch"]))))
                        if self.lib.has_libxsmm:
                            sa = 0 if shared else R * C
                            if ta == "n":  # (R x 1) = (R x C) (C x 1)
                                args = (A, b, out["libxsmm"], R, 1, C, (R, C, R), (sa, C, R))
                            else:  # c^T (1 x C) = b^T (1 x R) A (R x C)
                                args = (b, A, out["libxsmm"], 1, C, R, (1, R, 1), (R, sa, C))
                            impls["libxsmm"] = lambda args=args: self.lib.xsmm_strided(
                                *args, batch, self.threads)
                        a_modes = ("rc" if shared else "rcb") + (",cb->rb" if ta == "n"
                                                                 else ",rb->cb")
                        want = np.einsum(a_modes, A.astype(np.float64), b)
                        self.measure(kind, t, shape, 2.0 * R * C * batch, impls, out, want)

    def ger(self):
        """C_i = a_i b_i^T and C_i = a b_i^T, C of M x N."""
        print("ger: C_i = a_i b_i^T, a b_i^T (other time / ttlc time):")
        rng = np.random.default_rng(7)
        for t in self.dtypes:
            for M, N in self.vector_shapes():
                for shared in (False, True):
                    batch = self.batch((0 if shared else M) + N + M * N, t)
                    shape = f"{M}x{N}{' a shared' if shared else ''} b{batch}"
                    a = fortran(rng, (M,) if shared else (M, batch), DTYPES[t])
                    b = fortran(rng, (N, batch), DTYPES[t])
                    text = member_kernel(t, "ger", [("a", (M,), shared), ("b", (N,), False),
                                                    ("C", (M, N), False)])
                    kernel = self.compile(f"ger {t} {shape}", text, "member")
                    out = {name: np.zeros((M, N, batch), DTYPES[t], order="F")
                           for name in ("ttlc", "numpy", "torch", "libxsmm")}
                    at, bt = rows_of(a), rows_of(b)  # C_i^T = b_i a_i^T

                    def product(mm, at, bt, ct):
                        return lambda: mm(bt[..., :, None], at[..., None, :], out=ct)
                    impls = {"ttlc": lambda: kernel(a, b, out["ttlc"], grid=(batch,)),
                             "numpy": product(np.matmul, at, bt, rows_of(out["numpy"]))}
                    if self.torch is not None:
                        impls["torch"] = product(self.torch.matmul, *(
                            self.torch.from_numpy(x) for x in (at, bt, rows_of(out["torch"]))))
                    if self.lib.has_libxsmm:  # (M x N) = (M x 1) (1 x N)
                        impls["libxsmm"] = lambda: self.lib.xsmm_strided(
                            a, b, out["libxsmm"], M, N, 1, (M, 1, M),
                            (0 if shared else M, N, M * N), batch, self.threads)
                    want = np.einsum(("m" if shared else "mb") + ",nb->mnb",
                                     a.astype(np.float64), b)
                    self.measure("ger", t, shape, 2.0 * M * N * batch, impls, out, want)

    def call(self):
        """C = A B of CALL_SHAPE once: what a call from Python costs."""
        print("call: C = A B, one small gemm per call (other time / ttlc time):")
        rng = np.random.default_rng(8)
        M, N, K = CALL_SHAPE
        shape = f"{M}x{N}x{K}"
        for t in self.dtypes:
            A, B = fortran(rng, (M, K), DTYPES[t]), fortran(rng, (K, N), DTYPES[t])
            text = member_kernel(t, "gemm", [("A", (M, K), True), ("B", (K, N), True),
                                             ("C", (M, N), True)])
            kernel = self.compile(f"call {t} {shape}", text, "member")
            self.measure("call", t, shape, 2.0 * M * N * K,
                         *self.products(kernel, A, B, (M, N), (0, 0, 0)))

    def tall(self):
        rows = TALL_ROWS // 16 if self.quick else TALL_ROWS
        print(f"tall: C = A B, A of {rows} rows, {TALL_BLOCK} rows per work-group:")
        rng = np.random.default_rng(4)
        for t in self.dtypes:
            for N, K in ((9, 9), (16, 16)):
                M, blocks = TALL_BLOCK, rows // TALL_BLOCK
                shape = f"{rows}x{N}x{K}"
                A, B = fortran(rng, (rows, K), DTYPES[t]), fortran(rng, (K, N), DTYPES[t])
                text = tall_kernel(t, rows, M, N, K)
                kernel = self.compile(f"tall {t} {shape}", text, "gemm")
                out = {name: np.zeros((rows, N), DTYPES[t], order="F")
                       for name in ("ttlc", "numpy", "torch", "libxsmm")}
                impls = {"ttlc": lambda: kernel(A, B, out["ttlc"], grid=(blocks,)),
                         "numpy": lambda: np.matmul(B.T, A.T, out=out["numpy"].T)}
                if self.torch is not None:
                    tA, tB, tC = (self.torch.from_numpy(x) for x in (A, B, out["torch"]))
                    impls["torch"] = lambda: self.torch.matmul(tA, tB, out=tC)
                if self.lib.has_libxsmm:
                    impls["libxsmm"] = lambda: self.lib.xsmm_strided(
                        A, B, out["libxsmm"], M, N, K, (rows, K, rows), (M, 0, M), blocks,
                        self.threads)
                want = A.astype(np.float64) @ B
                self.measure("tall", t, shape, 2.0 * rows * N * K, impls, out, want)

    def chain(self):
        print("chain: D_i = A B_i C_i through a local temporary:")
        rng = np.random.default_rng(5)
        for t in self.dtypes:
            for m, k, n, p in (CHAINS[:1] if self.quick else CHAINS):
                batch = self.batch(k * n + n * p + m * p, t)
                shape = f"{m}x{k}.{k}x{n}.{n}x{p} b{batch}"
                A = fortran(rng, (m, k), DTYPES[t])
                B, C = fortran(rng, (k, n, batch), DTYPES[t]), fortran(rng, (n, p, batch), DTYPES[t])
                text = chain_kernel(t, m, k, n, p)
                kernel = self.compile(f"chain {t} {shape}", text, "chain")
                out = {name: np.zeros((m, p, batch), DTYPES[t], order="F")
                       for name in ("ttlc", "numpy", "torch", "libxsmm")}
                At, Bt, Ct = rows_of(A), rows_of(B), rows_of(C)  # D^T = C^T B^T A^T
                impls = {"ttlc": lambda: kernel(A, B, C, out["ttlc"], grid=(batch,)),
                         "numpy": lambda: np.matmul(Ct, np.matmul(Bt, At),
                                                    out=rows_of(out["numpy"]))}
                if self.torch is not None:
                    tA, tB, tC, tD = (self.torch.from_numpy(x)
                                      for x in (At, Bt, Ct, rows_of(out["torch"])))
                    impls["torch"] = lambda: self.torch.matmul(tC, self.torch.matmul(tB, tA),
                                                               out=tD)
                if self.lib.has_libxsmm:
                    impls["libxsmm"] = lambda: self.lib.xsmm_chain(
                        A, B, C, out["libxsmm"], m, k, n, p, (0, k * n, n * p, m * p), batch,
                        self.threads)
                want = np.matmul(Ct.astype(np.float64), np.matmul(Bt.astype(np.float64), At)).T
                flops = 2.0 * (m * k * n + m * n * p) * batch
                self.measure("chain", t, shape, flops, impls, out, want)


def print_compile_times(compile_ms: dict) -> None:
    """Each kernel's cold and warm compile, CPU and wall, and a summary judged on CPU time
    (``COLD_MS``, ``WARM_MS``)."""
    print("compile (ms; cold: an empty cache, warm: a cache hit; CPU time / wall time):")
    for name, v in compile_ms.items():
        print(f"  {name:40s} cold {v['cold']:6.1f} / {v['cold_wall']:6.1f}   "
              f"warm {v['warm']:5.2f} / {v['warm_wall']:5.2f}")
    summary = []
    for what, limit in (("cold", COLD_MS), ("warm", WARM_MS)):
        for clock in (what, f"{what}_wall"):
            values = sorted(v[clock] for v in compile_ms.values())
            summary.append(f"{clock} median {values[len(values) // 2]:.1f}, "
                           f"at most {values[-1]:.1f}")
        over = [k for k, v in compile_ms.items() if v[what] > limit]
        summary.append(f"{what} CPU over {limit} ms: {', '.join(over) or 'none'}")
    print(f"compile of {len(compile_ms)} kernels: " + "; ".join(summary))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few samples (a smoke test)")
    ap.add_argument("--only", help=f"comma-separated kinds of {', '.join(KINDS)}")
    ap.add_argument("--dtypes", help="comma-separated of f64, f32")
    ap.add_argument("--batch-bytes", type=int, help="bytes of a batched case's operands "
                    "(default 24 MiB, about the L3; 524288 keeps one thread's in its L2)")
    ap.add_argument("--repeat", type=int, help="samples per implementation (default 7)")
    ap.add_argument("--sample-ms", type=float, help="a sample repeats the call for this "
                    "long (default 20; 0: one call per sample)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    opts = ap.parse_args()
    kinds = opts.only.split(",") if opts.only else list(KINDS)
    run = Run(opts)
    cpu = os.environ.get("TTLC_CPU") or "host"
    print(f"small gemm on {run.threads} threads ({platform.processor() or platform.machine()}, "
          f"TTLC_CPU={cpu})")
    for kind in SHARED_OPERAND:
        if kind in kinds:
            run.batched(kind)
    if "dynamic" in kinds:
        run.dynamic()
    if "tall" in kinds:
        run.tall()
    if "chain" in kinds:
        run.chain()
    if "gemv" in kinds:
        run.gemv()
    if "ger" in kinds:
        run.ger()
    if "call" in kinds:
        run.call()
    if run.compile_ms:
        print_compile_times(run.compile_ms)
    summary = {"meta": {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                        "threads": run.threads, "quick": run.quick, "ttlc_cpu": cpu,
                        "ttlc": ttlc.__version__, "load_average": os.getloadavg(),
                        "libraries_env": {k: os.environ.get(k) for k in WITHOUT_AVX512},
                        "numpy": np.__version__,
                        "torch": getattr(run.torch, "__version__", None)},
               "skipped": run.skipped, "compile_ms": run.compile_ms, "results": run.rows}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    suffix = "" if cpu == "host" else f"-{cpu}"
    write_summary(opts.out, f"small_gemm{suffix}-{stamp}.json", f"small_gemm{suffix}-latest.json",
                  summary)
    print(f"wrote {opts.out / f'small_gemm{suffix}-latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
