#!/usr/bin/env python3
"""ttlc.recipes against NumPy, PyTorch and LIBXSMM, in one process.

    .venv/bin/python benchmarks/recipes.py [--quick] [--out DIR]

small_gemm_batched: C_i = A_i B_i (column-major, packed; transposes nn and tn) over a batch
of ~64 MiB, f32, f64 and c64 (LIBXSMM: nn f32/f64, the only products it is built for here).
tall_and_skinny: C = A B with M = 2^20 (2^16 quick) rows and N = K in 8, 16, 32.  Every
implementation's result is first compared with NumPy (a mismatch stops the run); times are
medians of samples taken in turns.  Prints the ratios (other time / ttlc time: above 1,
ttlc is faster) and writes ``DIR/recipes-<time>.json`` and ``DIR/recipes-latest.json``
(DIR: benchmarks/results).  Missing implementations are skipped with a printed reason.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import idle_threads  # noqa: F401  (before NumPy: its BLAS threads sleep when idle)
import numpy as np

HERE = Path(__file__).resolve().parent
try:
    import ttlc
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(HERE.parent / "src"))
    import ttlc
sys.path.insert(0, str(HERE))
import native  # noqa: E402
from suite import Mismatch, ttlc_threads, write_summary  # noqa: E402

TOLERANCE = {"f32": 1e-5, "f64": 1e-12, "c64": 1e-12}
DTYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex128}


def timed(impls, repeat: int, sample_seconds: float, statistic=statistics.median):
    """Seconds per call of each implementation (the median sample, or `statistic` of
    the samples), sampled in turns."""
    inner = {}
    for name, fn in impls.items():
        start = time.perf_counter()
        fn()
        inner[name] = max(1, int(sample_seconds / max(time.perf_counter() - start, 1e-7)))
    samples = {name: [] for name in impls}
    for _ in range(repeat):
        for name, fn in impls.items():
            start = time.perf_counter()
            for _ in range(inner[name]):
                fn()
            samples[name].append((time.perf_counter() - start) / inner[name])
    return {name: statistic(s) for name, s in samples.items()}


def check(what: str, got, want, tolerance: float) -> None:
    """Raise Mismatch when `got` differs from `want` by more than `tolerance` times the
    largest magnitude of `want` (complex values compared as such)."""
    got, want = np.asarray(got, np.complex128), np.asarray(want, np.complex128)
    error = float(np.abs(got - want).max()) / max(1e-30, float(np.abs(want).max()))
    if not error <= tolerance:  # also NaN
        raise Mismatch(f"{what}: result differs from NumPy's (relative error {error:.2e})")


def random(rng, shape, t):
    x = rng.standard_normal(shape)
    if t.startswith("c"):
        x = x + 1j * rng.standard_normal(shape)
    return np.asfortranarray(x.astype(DTYPES[t]))


def rated(fields: dict, seconds: dict, flops: float):
    """(fields with the seconds, GFLOP/s and ratios of each implementation, the ratios as
    printed): a ratio is the other's time over ttlc's (above 1, ttlc is faster)."""
    row = dict(fields, seconds=seconds,
               gflops={k: flops / v / 1e9 for k, v in seconds.items()},
               ratio={k: v / seconds["ttlc"] for k, v in seconds.items() if k != "ttlc"})
    return row, "  ".join(f"vs {k} {v:5.2f}" for k, v in row["ratio"].items())


def load_torch(run):
    """PyTorch on ttlc's threads, or None (``run.skip`` told why)."""
    try:
        import torch
    except ImportError as e:
        run.skip("torch", f"PyTorch not installed ({e}); pip install -e '.[bench]'")
        return None
    torch.set_num_threads(run.threads)
    return torch


def write_results(run, out: Path, name: str) -> None:
    """run's rows and skips with the versions and load as out/name-<time>.json and
    out/name-latest.json."""
    summary = {"meta": {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                        "threads": run.threads, "quick": run.quick,
                        "ttlc": ttlc.__version__, "load_average": os.getloadavg(),
                        "numpy": np.__version__,
                        "torch": getattr(run.torch, "__version__", None)},
               "skipped": run.skipped, "results": run.rows}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    write_summary(out, f"{name}-{stamp}.json", f"{name}-latest.json", summary)
    print(f"wrote {out / f'{name}-latest.json'}")


class Run:
    def __init__(self, opts):
        self.quick = opts.quick
        self.repeat = 3 if opts.quick else 7
        self.sample = 0.002 if opts.quick else 0.02
        self.threads = ttlc_threads()
        self.rows, self.skipped = [], {}
        self.lib = native.load()
        if not self.lib.has_libxsmm:
            self.skip("libxsmm", self.lib.reasons.get("libxsmm", "not built"))
        self.torch = load_torch(self)

    def skip(self, what, why):
        print(f"  skipped {what}: {why}")
        self.skipped[what] = why

    def measure(self, recipe, shape, t, flops, impls, outputs, want):
        """Check every implementation's output against `want`, then time them."""
        for name, fn in impls.items():
            outputs[name][...] = np.nan
            fn()
            check(f"{recipe} {t} {shape} {name}", outputs[name], want, TOLERANCE[t])
        seconds = timed(impls, self.repeat, self.sample)
        row, ratios = rated({"recipe": recipe, "dtype": t, "shape": shape}, seconds, flops)
        self.rows.append(row)
        print(f"  {recipe:18s} {t:4s} {shape:22s} ttlc {row['gflops']['ttlc']:7.2f} GFLOP/s  "
              f"{ratios}", flush=True)

    def small_gemm(self):
        print("small_gemm_batched C_i = A_i B_i (other time / ttlc time):")
        shapes = [(8, 8, 8)] if self.quick else [(8, 8, 8), (16, 16, 16), (32, 32, 32)]
        rng = np.random.default_rng(0)
        for t in DTYPES:
            for M, N, K in shapes:
                for ta in "nt":
                    entry = np.dtype(DTYPES[t]).itemsize * (M * K + K * N + M * N)
                    batch = max(16, ((1 << 22) if self.quick else (64 << 20)) // entry)
                    A = random(rng, ((M, K) if ta == "n" else (K, M)) + (batch,), t)
                    B = random(rng, (K, N, batch), t)
                    recipe = ttlc.recipes.small_gemm_batched(t, ta, "n", M, N, K)
                    out = {name: np.zeros((M, N, batch), DTYPES[t], order="F")
                           for name in ("ttlc", "numpy", "torch", "libxsmm")}
                    # batch-first row-major views of the column-major batches: C^T = B^T op(A)^T
                    At = A.T if ta == "n" else A.T.transpose(0, 2, 1)
                    impls = {"ttlc": lambda: recipe(1.0, A, B, 0.0, out["ttlc"]),
                             "numpy": lambda: np.matmul(B.T, At, out=out["numpy"].T)}
                    if self.torch is not None:
                        tA, tB, tC = (self.torch.from_numpy(x) for x in
                                      (np.ascontiguousarray(At), B.T, out["torch"].T))
                        impls["torch"] = lambda: self.torch.bmm(tB, tA, out=tC)
                    if self.lib.has_libxsmm and ta == "n" and t in ("f32", "f64"):
                        impls["libxsmm"] = lambda: self.lib.xsmm_gemm(
                            A, B, out["libxsmm"], M, N, K, batch, self.threads)
                    op = "A" if ta == "n" else "A^T"
                    want = np.matmul(B.T.astype(np.complex128), At).T
                    factor = 8 if t.startswith("c") else 2
                    self.measure("small_gemm_batched", f"{M}x{N}x{K} {op}B b{batch}", t,
                                 factor * M * N * K * batch, impls, out, want)

    def tall(self):
        print("tall_and_skinny C = A B (other time / ttlc time):")
        M = (1 << 16) if self.quick else (1 << 20)
        rng = np.random.default_rng(1)
        for t in DTYPES:
            for n in ((8,) if self.quick else (8, 16, 32)):
                A, B = random(rng, (M, n), t), random(rng, (n, n), t)
                recipe = ttlc.recipes.tall_and_skinny(t, 128, n, n)
                out = {name: np.zeros((M, n), DTYPES[t], order="F")
                       for name in ("ttlc", "numpy", "torch")}
                impls = {"ttlc": lambda: recipe(1.0, A, B, 0.0, out["ttlc"]),
                         # (C^T = B^T A^T on the row-major views: NumPy's BLAS path)
                         "numpy": lambda: np.matmul(B.T, A.T, out=out["numpy"].T)}
                if self.torch is not None:
                    tA, tB, tC = (self.torch.from_numpy(x) for x in (A, B, out["torch"]))
                    impls["torch"] = lambda: self.torch.matmul(tA, tB, out=tC)
                want = A.astype(np.complex128) @ B
                factor = 8 if t.startswith("c") else 2
                self.measure("tall_and_skinny", f"{M}x{n}x{n}", t, factor * M * n * n,
                             impls, out, want)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few samples (a smoke test)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    opts = ap.parse_args()
    run = Run(opts)
    print(f"recipes on {run.threads} threads ({platform.processor() or platform.machine()})")
    run.small_gemm()
    run.tall()
    write_results(run, opts.out, "recipes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
