#!/usr/bin/env python3
"""ttlc's CPU code against NumPy, PyTorch and LIBXSMM, in one process, side by side.

    .venv/bin/python benchmarks/suite.py [--quick] [--only gemm,fused,...] [--compare OLD.json]

Sections (``--only``): ``limits`` (the machine's practical peak: a large SGEMM/DGEMM and a
bf16 GEMM through NumPy/PyTorch, raised to the best rate another library reaches on the
cached batches; its bandwidth: a STREAM-like triad), ``gemm`` (batched
GEMM, one work-group per matrix, through a subview of a 3-d memref and through prepared
groups, f32 and f64, a memory-bound batch and one that fits in L2), ``groups`` (the launch
cost of groups: the same batched GEMM over a 3-d memref, a ``ttlc.PreparedGroup`` and a
list of arrays, 4096 to 65536 matrices), ``fused`` (D += alpha A B^T C),
``mix`` (gemv/axpby/sum), ``bf16`` (cooperative-matrix mul_add against torch's bf16 bmm;
the output and the JSON name what computed ttlc's: AMX, AVX512-BF16 or f32 FMA),
``compile`` (cold: empty cache; warm: cache hit), ``overhead`` (the Python cost of
launching one work-group).

Every result that is timed is first compared with NumPy; a mismatch stops the suite with
an error.  Times are medians of several samples after an untimed first call; the
implementations of one configuration are measured in turns (the machine may be shared and
loaded).  Implementations that are not installed (torch, LIBXSMM,
matplotlib) are skipped with a printed reason.  The table, the targets (pass/miss), a JSON
summary (``benchmarks/results/suite-<time>.json``, also ``latest.json``; give an older one to
``--compare``) and a PNG plot of GFLOP/s are written.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import idle_threads  # noqa: E402, F401  (before NumPy: its BLAS threads sleep when idle)
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
try:
    import ttlc
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))
    import ttlc
sys.path.insert(0, str(HERE))
import native  # noqa: E402

SECTIONS = ("limits", "gemm", "groups", "fused", "mix", "bf16", "checked", "compile",
            "overhead")
SHAPES = [(8, 8, 8), (16, 16, 16), (32, 32, 32), (64, 64, 64), (16, 8, 8)]  # (M, N, K)
DTYPES = {"f32": np.float32, "f64": np.float64}
#: relative tolerance of the check against NumPy (times the largest magnitude)
TOLERANCE = {"f32": 1e-5, "f64": 1e-12, "bf16": 1e-2}


def write_summary(folder: Path, name: str, latest: str, data: dict) -> Path:
    """Write a benchmark's JSON summary as folder/name and again as folder/latest."""
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1)
    (folder / name).write_text(text)
    (folder / latest).write_text(text)
    return folder / name


class Mismatch(AssertionError):
    """A timed implementation computed a wrong result."""


# ---- configuration and measurement ---------------------------------------------------------
@dataclass
class Config:
    quick: bool
    repeat: int
    memory_batch: int          # the batch of the memory-bound regime (grown past the L3)
    memory_bytes: tuple        # (least, most) bytes of a memory-bound working set
    l2_bytes: int              # the L2 of one core: the compute-bound working set per thread
    group_batches: tuple       # the batches of the groups section
    sample_seconds: float      # a sample repeats the call until it takes this long
    threads: int
    shapes: List[tuple]
    dtypes: List[str]


def make_config(opts) -> Config:
    threads = ttlc_threads()
    shapes = SHAPES
    if opts.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in opts.shapes.split(",")]
    dtypes = opts.dtypes.split(",") if opts.dtypes else list(DTYPES)
    if opts.quick:
        return Config(True, opts.repeat or 3, 256, (0, 4 << 20), 256 << 10, (4096,), 0.002,
                      threads, shapes, dtypes)
    return Config(False, opts.repeat or 7, 100_000, (256 << 20, 512 << 20), l2_size(),
                  (4096, 16384, 65536), 0.02, threads, shapes, dtypes)


def ttlc_threads() -> int:
    from ttlc.backends.cpu.module import num_threads

    return num_threads()


def l2_size() -> int:
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text().strip()
        return int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]]
    except (OSError, ValueError, KeyError):
        return 1 << 20


def check(what: str, got, expected, tolerance: float) -> float:
    """The largest difference relative to the largest expected magnitude; raises on a miss."""
    got = np.asarray(got, np.float64)
    expected = np.asarray(expected, np.float64)
    if got.shape != expected.shape:
        raise Mismatch(f"{what}: shape {got.shape} differs from NumPy's {expected.shape}")
    scale = max(1e-30, float(np.abs(expected).max(initial=0.0)))
    error = float(np.abs(got - expected).max(initial=0.0)) / scale
    if not error <= tolerance:  # also catches NaN
        raise Mismatch(f"{what}: result differs from NumPy (max relative error {error:.2e} > "
                       f"{tolerance:.0e})")
    return error


@dataclass
class Row:
    """One timed implementation of one kernel configuration."""
    section: str
    kernel: str
    impl: str
    dtype: str
    shape: str
    batch: int
    regime: str             # "memory", "compute", or "" (no limit applies)
    seconds: float
    flops: float = 0.0
    nbytes: float = 0.0
    error: float = 0.0      # relative error against NumPy (checked)
    note: str = ""

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.flops else 0.0

    @property
    def gbytes(self) -> float:
        return self.nbytes / self.seconds / 1e9 if self.nbytes else 0.0

    def key(self) -> str:
        return "|".join([self.section, self.kernel, self.impl, self.dtype, self.shape, self.regime,
                         str(self.batch)])


@dataclass
class Entry:
    """An implementation to check and time: fn() computes, verify() compares the result
    with NumPy (returns the error, raises Mismatch), prepare() resets the outputs."""
    row: Row
    fn: Callable[[], object]
    verify: Callable[[], float]
    prepare: Optional[Callable[[], None]] = None


@dataclass
class Suite:
    cfg: Config
    rows: List[Row] = field(default_factory=list)
    limits: Dict[str, object] = field(default_factory=dict)  # rates, and where they come from
    skipped: Dict[str, str] = field(default_factory=dict)
    checks: int = 0
    targets: List[dict] = field(default_factory=list)
    compile_ms: Dict[str, Dict[str, float]] = field(default_factory=dict)
    overhead_us: Dict[str, float] = field(default_factory=dict)
    bf16_path: str = ""     # what computed ttlc's bf16 mul_add (AMX, AVX512-BF16, f32 FMA)
    group_ratios: List[dict] = field(default_factory=list)  # group_vs_memref's
    checked_ratios: List[dict] = field(default_factory=list)  # checked_cost's

    def compare(self, entries: List["Entry"]) -> List[Row]:
        """Check each implementation's first call against NumPy (after its prepare), then
        time them all, interleaved sample by sample so that a burst of load from elsewhere
        on the machine hits each alike.  A sample repeats a call until it lasts about
        cfg.sample_seconds; a row's time is the median sample per call."""
        timed = []
        for e in entries:
            if e.prepare is not None:
                e.prepare()
            start = time.perf_counter()
            e.fn()  # untimed, checked
            once = max(time.perf_counter() - start, 1e-7)
            e.row.error = e.verify()
            self.checks += 1
            timed.append((e, max(1, min(10_000, int(self.cfg.sample_seconds / once))), []))
        for _ in range(self.cfg.repeat):
            for e, inner, samples in timed:
                start = time.perf_counter()
                for _ in range(inner):
                    e.fn()
                samples.append((time.perf_counter() - start) / inner)
        for e, inner, samples in timed:
            row = e.row
            row.seconds = statistics.median(samples)
            self.rows.append(row)
            print(f"  {row.kernel:18s} {row.impl:11s} {row.dtype:5s} {row.shape:9s} "
                  f"{row.batch:>7d} {1e3 * row.seconds:10.4f} ms {row.gflops:8.2f} GFLOP/s "
                  f"{row.gbytes:7.2f} GB/s" + (f"  ({row.note})" if row.note else ""), flush=True)
        return [e.row for e in entries]

    def skip(self, what: str, reason: str) -> None:
        if what not in self.skipped:
            print(f"  skipped {what}: {reason}")
        self.skipped[what] = reason


# ---- optional implementations ---------------------------------------------------------------
def load_torch(suite: Suite):
    try:
        import torch
    except ImportError as e:
        suite.skip("torch", f"PyTorch not installed ({e}); pip install -e '.[bench]'")
        return None
    torch.set_num_threads(suite.cfg.threads)
    return torch


def fortran(rng, shape, dtype):
    return np.asfortranarray(rng.standard_normal(shape).astype(dtype))


def rows_of(x):
    """A column-major (m, n, batch) array as the row-major (batch, n, m) stack of the
    transposed matrices (the same memory): C = A B is then C^T = B^T A^T."""
    return x.T


# ---- limits --------------------------------------------------------------------------------
def bench_limits(suite: Suite, torch, lib: native.Native) -> None:
    cfg = suite.cfg
    print("machine limits:")
    n = 512 if cfg.quick else 2048
    rng = np.random.default_rng(1)
    for name, dtype in DTYPES.items():
        a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
        impls = {"numpy": lambda: np.matmul(a, b)}
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            impls["torch"] = lambda: torch.matmul(ta, tb)
        ref = a.astype(np.float64) @ b
        rows = suite.compare([
            Entry(Row("limits", "peak gemm", impl, name, f"{n}^3", 1, "", 0.0, flops=2.0 * n ** 3),
                  fn, lambda impl=impl, fn=fn: check(f"{impl} {name} gemm", np.asarray(fn()), ref,
                                                     TOLERANCE[name] * 10))
            for impl, fn in impls.items()])
        suite.limits[f"peak_{name}_gflops"] = max(r.gflops for r in rows)
    if torch is not None:
        a = torch.randn(n, n, dtype=torch.bfloat16)
        b = torch.randn(n, n, dtype=torch.bfloat16)
        ref = a.float().numpy().astype(np.float64) @ b.float().numpy()
        [row] = suite.compare([Entry(
            Row("limits", "peak gemm", "torch", "bf16", f"{n}^3", 1, "", 0.0, flops=2.0 * n ** 3),
            lambda: torch.matmul(a, b),
            lambda: check("torch bf16 gemm", torch.matmul(a, b).float().numpy(), ref,
                          TOLERANCE["bf16"]))])
        suite.limits["peak_bf16_gflops"] = row.gflops
    count = (1 << 20) if cfg.quick else (1 << 24)  # 3 x 128 MiB: well past the L3
    b, c = rng.standard_normal(count), rng.standard_normal(count)
    a = np.empty(count)
    ref = b + 3.0 * c
    impls = {}
    if lib.has_triad:
        impls["C"] = lambda: lib.triad(a, b, c, 3.0, cfg.threads)
    else:
        suite.skip("triad in C", lib.reasons.get("triad", "not built"))
    if torch is not None:
        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
        impls["torch"] = lambda: torch.add(tb, tc, alpha=3.0, out=ta)
    if not impls:  # NumPy needs two passes; it underestimates the bandwidth
        impls["numpy"] = lambda: (np.multiply(c, 3.0, out=a), np.add(a, b, out=a))
    rows = suite.compare([
        Entry(Row("limits", "triad", impl, "f64", str(count), 1, "", 0.0, flops=2.0 * count,
                  nbytes=24.0 * count),
              fn, lambda impl=impl: check(f"{impl} triad", a, ref, 1e-14),
              prepare=lambda: a.fill(np.nan))
        for impl, fn in impls.items()])
    suite.limits["bandwidth_gbs"] = max(r.gbytes for r in rows)
    suite.limits["bandwidth_from"] = "triad"


# ---- batched GEMM --------------------------------------------------------------------------
GEMM_SUBVIEW = """
func @gemm(%A: memref<{t}x{M}x{K}x?>, %B: memref<{t}x{K}x{N}x?>, %C: memref<{t}x{M}x{N}x?>) {{
    %k = group_id.x : index
    %a = subview %A[0:{M},0:{K},%k] : memref<{t}x{M}x{K}>
    %b = subview %B[0:{K},0:{N},%k] : memref<{t}x{K}x{N}>
    %c = subview %C[0:{M},0:{N},%k] : memref<{t}x{M}x{N}>
    %one = constant 1.0 : {t}
    %zero = constant 0.0 : {t}
    gemm %one, %a, %b, %zero, %c
}}
"""

GEMM_GROUP = """
func @gemm(%A: group<memref<{t}x{M}x{K}>x?>, %B: group<memref<{t}x{K}x{N}>x?>,
           %C: group<memref<{t}x{M}x{N}>x?>) {{
    %k = group_id.x : index
    %a = load %A[%k] : memref<{t}x{M}x{K}>
    %b = load %B[%k] : memref<{t}x{K}x{N}>
    %c = load %C[%k] : memref<{t}x{M}x{N}>
    %one = constant 1.0 : {t}
    %zero = constant 0.0 : {t}
    gemm %one, %a, %b, %zero, %c
}}
"""


def gemm_batches(cfg: Config, entry_bytes: int) -> Dict[str, int]:
    """regime -> batch: memory-bound (cfg.memory_batch, grown or cut to put the working
    set within cfg.memory_bytes) and compute-bound (half an L2 per thread)."""
    least, most = cfg.memory_bytes
    memory = max(cfg.memory_batch, -(-least // entry_bytes))
    memory = max(1, min(memory, most // entry_bytes))
    compute = max(cfg.threads, cfg.threads * (cfg.l2_bytes // 2) // entry_bytes)
    return {"memory": memory, "compute": compute}


def bench_gemm(suite: Suite, torch, lib: native.Native) -> None:
    cfg = suite.cfg
    print("batched gemm C_k = A_k B_k (column-major, one work-group per matrix):")
    if not lib.has_libxsmm:
        suite.skip("libxsmm", lib.reasons.get("libxsmm", "not available"))
    rng = np.random.default_rng(2)
    for dname in cfg.dtypes:
        dtype = DTYPES[dname]
        for M, N, K in cfg.shapes:
            fields = dict(t=dname, M=M, N=N, K=K)
            kernels = gemm_kernels(dname, M, N, K)
            entry = gemm_entry_bytes(dname, M, N, K)
            for regime, batch in gemm_batches(cfg, entry).items():
                A, B, C, ref = gemm_data(rng, dname, M, N, K, batch)
                At, Bt, Ct = rows_of(A), rows_of(B), rows_of(C)
                runs = ttlc_gemm_runs(kernels, A, B, C)
                runs["numpy"] = (lambda: np.matmul(Bt, At, out=Ct), "matmul")
                if torch is not None:
                    tA, tB, tC = (torch.from_numpy(x) for x in (At, Bt, Ct))
                    runs["torch"] = (lambda: torch.bmm(tB, tA, out=tC), "bmm")
                if lib.has_libxsmm:
                    runs["libxsmm"] = (lambda: lib.xsmm_gemm(A, B, C, M, N, K, batch, cfg.threads),
                                       "")
                compare_gemm(suite, "gemm", runs, dname, (M, N, K), batch, regime, C, ref)
                del A, B, C, runs


def gemm_kernels(dname: str, M: int, N: int, K: int, checked: bool = False) -> Dict[str, object]:
    """The batched GEMM over a 3-d memref ("ttlc") and over groups ("ttlc group")."""
    fields = dict(t=dname, M=M, N=N, K=K)
    return {impl: ttlc.compile(text.format(**fields), target="cpu", checked=checked)["gemm"]
            for impl, text in (("ttlc", GEMM_SUBVIEW), ("ttlc group", GEMM_GROUP))}


def gemm_entry_bytes(dname: str, M: int, N: int, K: int) -> int:
    return (M * K + K * N + M * N) * np.dtype(DTYPES[dname]).itemsize


def gemm_data(rng, dname: str, M: int, N: int, K: int, batch: int):
    """A, B, an output C (column-major (rows, cols, batch)) and the float64 A_k B_k."""
    dtype = DTYPES[dname]
    A, B = fortran(rng, (M, K, batch), dtype), fortran(rng, (K, N, batch), dtype)
    C = np.asfortranarray(np.empty((M, N, batch), dtype))
    return A, B, C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B.astype(np.float64))


def ttlc_gemm_runs(kernels, A, B, C, lists: bool = False) -> dict:
    """impl -> (call, note): the memref kernel on A, B, C; the group kernel on prepared
    groups of their matrices (prepared here, once) and on plain lists (every call checks
    each member)."""
    batch = A.shape[2]
    grid = (batch,)
    runs = {"ttlc": (lambda: kernels["ttlc"](A, B, C, grid=grid), "")}
    views = [[X[:, :, k] for k in range(batch)] for X in (A, B, C)]
    groups = [ttlc.PreparedGroup(v) for v in views]
    runs["ttlc group"] = (lambda: kernels["ttlc group"](*groups, grid=grid), "ttlc.PreparedGroup")
    if lists:
        runs["ttlc list"] = (lambda: kernels["ttlc group"](*views, grid=grid),
                             "lists: every call checks each member")
    return runs


def compare_gemm(suite: Suite, section: str, runs: dict, dname: str, mnk: tuple, batch: int,
                 regime: str, C, ref) -> None:
    """Check and time batched GEMM implementations (``runs``: impl -> (call, note)) that
    all write C."""
    M, N, K = mnk
    entry = gemm_entry_bytes(dname, M, N, K)
    suite.compare([
        Entry(Row(section, "batched gemm", impl, dname, f"{M}x{N}x{K}", batch, regime, 0.0,
                  flops=2.0 * M * N * K * batch, nbytes=float(entry * batch), note=note),
              fn, lambda impl=impl: check(f"{impl} {dname} {M}x{N}x{K}", C, ref, TOLERANCE[dname]),
              prepare=lambda: C.fill(1e3))
        for impl, (fn, note) in runs.items()])


#: the GEMM of the groups section: the smallest matrices, where launch costs show most
GROUPS_SHAPE = (8, 8, 8)


def bench_groups(suite: Suite) -> None:
    """The launch cost of groups: the same batched GEMM over a 3-d memref, over prepared
    groups and over lists of the matrices, for batches of 4096 matrices and more."""
    cfg = suite.cfg
    M, N, K = GROUPS_SHAPE
    print(f"groups: batched gemm {M}x{N}x{K} over a 3-d memref, a ttlc.PreparedGroup and lists:")
    rng = np.random.default_rng(5)
    for dname in cfg.dtypes:
        kernels = gemm_kernels(dname, M, N, K)
        for batch in cfg.group_batches:
            A, B, C, ref = gemm_data(rng, dname, M, N, K, batch)
            runs = ttlc_gemm_runs(kernels, A, B, C, lists=True)
            compare_gemm(suite, "groups", runs, dname, (M, N, K), batch, "", C, ref)
            del A, B, C, runs


#: the GEMMs of the checked section: in cache, where the checks' instructions show most
CHECKED_SHAPES = ((8, 8, 8), (16, 16, 16), (64, 64, 64))


def bench_checked(suite: Suite) -> None:
    """The cost of checked mode: batched GEMMs compiled with and without the run-time
    checks, in cache (the fused and mix sections time their kernels checked too)."""
    cfg = suite.cfg
    print("checked mode: batched gemm f32 in cache, checked and unchecked:")
    rng = np.random.default_rng(6)
    for M, N, K in [s for s in CHECKED_SHAPES if s in cfg.shapes] or cfg.shapes[:1]:
        plain, checked = gemm_kernels("f32", M, N, K), gemm_kernels("f32", M, N, K, checked=True)
        batch = gemm_batches(cfg, gemm_entry_bytes("f32", M, N, K))["compute"]
        A, B, C, ref = gemm_data(rng, "f32", M, N, K, batch)
        runs = {"ttlc": (lambda: plain["ttlc"](A, B, C, grid=(batch,)), ""),
                "ttlc checked": (lambda: checked["ttlc"](A, B, C, grid=(batch,)), "checked=True")}
        compare_gemm(suite, "checked", runs, "f32", (M, N, K), batch, "compute", C, ref)
    bench_checked_local(suite)


#: a batched 32x32 transpose through local memory: checked code tracks every access of it
#: for data races (the other kernels of the section access no local memory)
TRANSPOSE_LOCAL = """func @transpose(%A: memref<f32x32x32x?>, %B: memref<f32x32x32x?>) attributes {subgroup_size=16, work_group_size=[32,4]} {
    %g = group_id.x : index
    %a = subview %A[0:32,0:32,%g] : memref<f32x32x32>
    %b = subview %B[0:32,0:32,%g] : memref<f32x32x32>
    %tmp = alloca : memref<f32x32x32,local>
    parallel {
        %sx = subgroup_id.x : i32
        %c16 = constant 16 : i32
        %lid = subgroup_local_id : i32
        %x0 = mul %sx, %c16 : i32
        %x = add %x0, %lid : i32
        %i = cast %x : index
        %y = subgroup_id.y : i32
        %j0 = cast %y : index
        %c0 = constant 0 : index
        %c4 = constant 4 : index
        %c32 = constant 32 : index
        for %k = %c0, %c32, %c4 {
            %j = add %j0, %k : index
            %v = load %a[%i, %j] : f32
            store %v, %tmp[%i, %j]
        }
        barrier.local
        for %k = %c0, %c32, %c4 {
            %j = add %j0, %k : index
            %v = load %tmp[%j, %i] : f32
            store %v, %b[%i, %j]
        }
    }
}"""


def bench_checked_local(suite: Suite) -> None:
    """The cost of race detection: a transpose through local memory, checked and not."""
    batch = 64 if suite.cfg.quick else 4000
    print(f"checked mode: transpose 32x32 f32 through local memory, batch {batch}:")
    rng = np.random.default_rng(7)
    A = fortran(rng, (32, 32, batch), np.float32)
    B = np.zeros_like(A)
    ref = A.transpose(1, 0, 2)
    runs = {impl: (lambda k=ttlc.compile(TRANSPOSE_LOCAL, target="cpu", checked=checked)
                   ["transpose"]: k(A, B, grid=(batch,)))
            for impl, checked in (("ttlc", False), ("ttlc checked", True))}
    suite.compare([
        Entry(Row("checked", "transpose local", impl, "f32", "32x32", batch, "",
                  0.0, nbytes=2 * A.nbytes),
              fn, lambda impl=impl: check(f"{impl} transpose", B, ref, 0.0),
              prepare=lambda: B.fill(0))
        for impl, fn in runs.items()])


def checked_cost(suite: Suite) -> List[dict]:
    """Checked time over unchecked time of each kernel timed both ways."""
    out = []
    for c in suite.rows:
        if c.impl != "ttlc checked":
            continue
        m = find(suite, section=c.section, kernel=c.kernel, impl="ttlc", dtype=c.dtype,
                 shape=c.shape, regime=c.regime, batch=c.batch)
        if m is not None:
            out.append(dict(section=c.section, kernel=c.kernel, dtype=c.dtype, shape=c.shape,
                            batch=c.batch, checked_ms=1e3 * c.seconds,
                            unchecked_ms=1e3 * m.seconds, ratio=c.seconds / m.seconds))
    return out


# ---- fused sample, gemv/axpby/sum mix ------------------------------------------------------
def example(name: str, checked: bool = False):
    return ttlc.compile((ROOT / "examples" / f"{name}.ir").read_text(), target="cpu",
                        checked=checked)


def bench_fused(suite: Suite, torch) -> None:
    """D_k += alpha A_k B_k^T C_k with A 32x16, B 8x16, C 8x24, D 32x24 (examples/fused.ir)."""
    cfg = suite.cfg
    batch = 256 if cfg.quick else 20_000
    print(f"fused D += alpha A B^T C (examples/fused.ir), batch {batch}:")
    kernel = example("fused")["fused"]
    rng = np.random.default_rng(3)
    A, B = fortran(rng, (32, 16, batch), np.float32), fortran(rng, (8, 16, batch), np.float32)
    C, D0 = fortran(rng, (8, 24, batch), np.float32), fortran(rng, (32, 24, batch), np.float32)
    D = D0.copy(order="F")
    alpha = np.float32(0.5)
    f64 = [x.astype(np.float64) for x in (A, B, C, D0)]
    ref = f64[3] + 0.5 * np.einsum("ikb,jkb,jlb->ilb", *f64[:3])
    At, Bt, Ct, Dt = (rows_of(x) for x in (A, B, C, D))  # row-major transposes: D^T += a C^T B A^T
    Tt = np.empty((batch, 8, 32), np.float32)
    Ut = np.empty((batch, 24, 32), np.float32)

    def numpy_fused():
        np.matmul(Bt.transpose(0, 2, 1), At, out=Tt)
        np.matmul(Ct, Tt, out=Ut)
        np.multiply(Ut, alpha, out=Ut)
        np.add(Dt, Ut, out=Dt)
    checked = example("fused", checked=True)["fused"]
    runs = {"ttlc": lambda: kernel(alpha, A, B, C, D, grid=(batch,)), "numpy": numpy_fused,
            "ttlc checked": lambda: checked(alpha, A, B, C, D, grid=(batch,))}
    if torch is not None:
        tA, tB, tC, tD, tT = (torch.from_numpy(x) for x in (At, Bt, Ct, Dt, Tt))

        def torch_fused():
            torch.bmm(tB.transpose(1, 2), tA, out=tT)
            tD.baddbmm_(tC, tT, alpha=float(alpha))
        runs["torch"] = torch_fused
    flops = 2.0 * (32 * 8 * 16 + 32 * 24 * 8 + 32 * 24) * batch
    nbytes = 4.0 * (32 * 16 + 8 * 16 + 8 * 24 + 2 * 32 * 24) * batch
    suite.compare([
        Entry(Row("fused", "fused", impl, "f32", "32x24x16", batch, "", 0.0, flops=flops,
                  nbytes=nbytes),
              fn, lambda impl=impl: check(f"{impl} fused", D, ref, TOLERANCE["f32"]),
              prepare=lambda: np.copyto(D, D0))
        for impl, fn in runs.items()])


def bench_mix(suite: Suite, torch) -> None:
    """examples/axpby_sum.ir: y = A x + alpha b, s = sum y, t = A^T 1, total += sum y."""
    cfg = suite.cfg
    batch = 512 if cfg.quick else 200_000
    print(f"gemv/axpby/sum mix (examples/axpby_sum.ir), f64, batch {batch}:")
    kernel = example("axpby_sum")["axpby_sum"]
    rng = np.random.default_rng(4)
    A, x = fortran(rng, (32, 16, batch), np.float64), fortran(rng, (16, batch), np.float64)
    b = fortran(rng, (32,), np.float64)
    y, s, t = (np.asfortranarray(np.empty(shape)) for shape in ((32, batch), (batch,), (16, batch)))
    total = np.zeros(())
    alpha = 0.25
    y_ref = np.einsum("ijb,jb->ib", A, x) + alpha * b[:, None]
    refs = {"y": y_ref, "s": y_ref.sum(axis=0), "t": A.sum(axis=0), "total": y_ref.sum()}
    outs = {"y": y, "s": s, "t": t, "total": total}
    At, xt, yt, tt = rows_of(A), x.T, y.T, t.T  # (batch, 16, 32), (batch, 16), ...

    def numpy_mix():
        np.matmul(At.transpose(0, 2, 1), xt[:, :, None], out=yt[:, :, None])
        np.add(yt, alpha * b, out=yt)
        np.sum(yt, axis=1, out=s)
        np.sum(At, axis=2, out=tt)
        total[...] += s.sum()
    checked = example("axpby_sum", checked=True)["axpby_sum"]
    runs = {"ttlc": lambda: kernel(alpha, A, x, b, y, s, t, total, grid=(batch,)),
            "numpy": numpy_mix,
            "ttlc checked": lambda: checked(alpha, A, x, b, y, s, t, total, grid=(batch,))}
    if torch is not None:
        tA, tx, ty, ts, tt_, ttot, tb = (torch.from_numpy(v) for v in (At, xt, yt, s, tt, total, b))

        def torch_mix():
            torch.bmm(tA.transpose(1, 2), tx.unsqueeze(2), out=ty.unsqueeze(2))
            ty.add_(tb, alpha=alpha)
            torch.sum(ty, dim=1, out=ts)
            torch.sum(tA, dim=2, out=tt_)
            ttot.add_(ts.sum())
        runs["torch"] = torch_mix

    def verify(impl):
        return max(check(f"{impl} mix {k}", outs[k], refs[k], TOLERANCE["f64"]) for k in refs)

    def reset():
        for v in (y, s, t):
            v.fill(1e3)
        total[...] = 0.0
    flops = 2.0 * (32 * 16 + 32 + 32 + 32 * 16 + 32) * batch
    nbytes = 8.0 * (32 * 16 + 16 + 32 + 1 + 16) * batch
    suite.compare([
        Entry(Row("mix", "gemv/axpby/sum", impl, "f64", "32x16", batch, "memory", 0.0,
                  flops=flops, nbytes=nbytes), fn, lambda impl=impl: verify(impl), reset)
        for impl, fn in runs.items()])


# ---- bf16 cooperative matrices ---------------------------------------------------------------
BF16_GEMM = """
func @bf16_gemm(%A: memref<bf16x{n}x{n}x?>, %B: memref<bf16x{n}x{n}x?>, %C: memref<f32x{n}x{n}x?>)
        attributes{{subgroup_size=16, work_group_size=[16,1]}} {{
    %bt = group_id.x : index
    %a = subview %A[0:{n},0:{n},%bt] : memref<bf16x{n}x{n}>
    %b = subview %B[0:{n},0:{n},%bt] : memref<bf16x{n}x{n}>
    %c = subview %C[0:{n},0:{n},%bt] : memref<f32x{n}x{n}>
    parallel {{
        %c0 = constant 0 : index
        %c16 = constant 16 : index
        %size = constant {n} : index
        %zero = constant 0.0 : coopmatrix<f32x16x16,matrix_acc>
        for %i = %c0, %size, %c16 {{
            for %j = %c0, %size, %c16 {{
                %acc = for %k = %c0, %size, %c16 init(%x=%zero)
                        -> (coopmatrix<f32x16x16,matrix_acc>) {{
                    %ta = cooperative_matrix_load %a[%i,%k] : coopmatrix<bf16x16x16,matrix_a>
                    %tb = cooperative_matrix_load %b[%k,%j] : coopmatrix<bf16x16x16,matrix_b>
                    %y = cooperative_matrix_mul_add %ta, %tb, %x : coopmatrix<f32x16x16,matrix_acc>
                    yield (%y)
                }}
                cooperative_matrix_store %acc, %c[%i,%j]
            }}
        }}
    }}
}}
"""


def bf16_path() -> str:
    """What computes ttlc's bf16 mul_add on this machine: AMX, AVX512-BF16 or f32 FMA."""
    from ttlc.backends.cpu.mul_add import mul_add_path

    path = mul_add_path("bf16", "bf16", "f32")
    return "f32 FMA" if path == "FMA" else path


def bench_bf16(suite: Suite, torch) -> None:
    """C_k = A_k B_k, bf16 inputs, f32 results: 16x16x16 cooperative-matrix tiles."""
    import ml_dtypes

    cfg = suite.cfg
    n, batch = (32, 64) if cfg.quick else (64, 2048)
    kernel = ttlc.compile(BF16_GEMM.format(n=n), target="cpu")["bf16_gemm"]
    path = suite.bf16_path = bf16_path()
    print(f"bf16 cooperative-matrix gemm {n}x{n}x{n}, f32 accumulation, batch {batch}, "
          f"ttlc on {path}:")
    rng = np.random.default_rng(5)
    A, B = (fortran(rng, (n, n, batch), ml_dtypes.bfloat16) for _ in range(2))
    C = np.asfortranarray(np.empty((n, n, batch), np.float32))
    ref = np.einsum("ikb,kjb->ijb", A.astype(np.float64), B.astype(np.float64))
    runs = {"ttlc": lambda: kernel(A, B, C, grid=(batch,))}
    if torch is not None:  # torch has bf16 results: f32 accumulation, rounded at the end
        tA, tB = (torch.from_numpy(rows_of(x).view(np.int16)).view(torch.bfloat16) for x in (A, B))
        tC = torch.empty((batch, n, n), dtype=torch.bfloat16)
        runs["torch"] = lambda: torch.bmm(tB, tA, out=tC)
    flops, nbytes = 2.0 * n ** 3 * batch, (2 * 2 + 4) * n * n * batch
    def verify(impl):
        got = C if impl == "ttlc" else rows_of(tC.float().numpy())
        # ttlc accumulates and stores f32; torch rounds its results to bf16
        return check(f"{impl} bf16 gemm", got, ref,
                     TOLERANCE["f32"] if impl == "ttlc" else TOLERANCE["bf16"])
    suite.compare([
        Entry(Row("bf16", "coopmatrix gemm", impl, "bf16", f"{n}x{n}x{n}", batch, "compute",
                  0.0, flops=flops, nbytes=float(nbytes), note=path if impl == "ttlc" else ""),
              fn, lambda impl=impl: verify(impl), prepare=lambda: C.fill(1e3))
        for impl, fn in runs.items()])


# ---- compile time and call overhead ---------------------------------------------------------
@contextlib.contextmanager
def environment(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: a cooperative-matrix gemm tiled by foreach_tile, with a GPU's work-group size {X}: the
#: tiles go to the subgroups as the implementation likes, so the work-group's size does
#: not change its results (on cpu: nor its code, compile time or speed)
TILED_GEMM = """
func @gemm(%A: memref<f32x64x64x?>, %B: memref<f32x64x64x?>, %C: memref<f32x64x64x?>)
        attributes{{subgroup_size=16, work_group_size=[{X},1]}} {{
    %k = group_id.x : index
    %a = subview %A[0:64,0:64,%k] : memref<f32x64x64>
    %b = subview %B[0:64,0:64,%k] : memref<f32x64x64>
    %c = subview %C[0:64,0:64,%k] : memref<f32x64x64>
    %c0 = constant 0 : index
    %c64 = constant 64 : index
    foreach_tile (%i, %j) = (%c0, %c0), (%c64, %c64) as (%tm, %tn) <= (16, 16) {{
        %zero = constant 0.0 : f32
        %init = cooperative_matrix_construct %zero : coopmatrix<f32x16x16,matrix_acc>
        %c8 = constant 8 : index
        %acc = for %l = %c0, %c64, %c8 init(%x = %init) -> (coopmatrix<f32x16x16,matrix_acc>) {{
            %ta = cooperative_matrix_load %a[%i, %l] : coopmatrix<f32x16x8,matrix_a>
            %tb = cooperative_matrix_load %b[%l, %j] : coopmatrix<f32x8x16,matrix_b>
            %y = cooperative_matrix_mul_add %ta, %tb, %x : coopmatrix<f32x16x16,matrix_acc>
            yield (%y)
        }}
        cooperative_matrix_store %acc, %c[%i, %j]
    }}
}}
"""
TILED_WORK_GROUPS = (16, 1024)
#: examples/staged_gemm.template (a gemm staging slices of A and B through local memory
#: between barriers) with 1 and 64 subgroups, [16,1] and [1024,1], on 128 x 128 matrices:
#: on cpu the subgroups of a parallel region with barriers run one after the other, phase
#: by phase, so compile time and speed should not depend on the work-group either
STAGED_TILES = {16: 1, 1024: 8}
STAGED_N = 128


def staged_gemm(x: int) -> str:
    """The staged gemm's program text for work-group [x,1]."""
    template = (ROOT / "examples" / "staged_gemm.template").read_text()
    return str(ttlc.parse(template, defines={"tiles": STAGED_TILES[x], "n": STAGED_N}))


def bench_compile(suite: Suite) -> None:
    """Cold: a fresh, empty cache directory (LLVM runs); warm: the same text again (a hit).
    Then the tiled gemm's speed with each work-group size."""
    cfg = suite.cfg
    print("compile time for target cpu (median; cold = empty cache, warm = cache hit):")
    texts = {"gemm 16x16x16 f32": GEMM_SUBVIEW.format(t="f32", M=16, N=16, K=16),
             "fused": (ROOT / "examples" / "fused.ir").read_text(),
             "axpby_sum": (ROOT / "examples" / "axpby_sum.ir").read_text(),
             **{f"tiled gemm [{x},1]": TILED_GEMM.format(X=x) for x in TILED_WORK_GROUPS},
             **{f"staged gemm [{x},1]": staged_gemm(x) for x in STAGED_TILES}}
    repeat = 1 if cfg.quick else 3
    for name, text in texts.items():
        cold, warm = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory(prefix="ttlc-bench-cache-") as d, \
                    environment(TTLC_CACHE="1", TTLC_CACHE_DIR=d):
                start = time.perf_counter()
                module = ttlc.compile(text, target="cpu")
                cold.append(time.perf_counter() - start)
                if module.cache_hit:
                    raise Mismatch(f"compile {name}: a fresh cache directory gave a cache hit")
                for _ in range(3 if cfg.quick else 7):
                    start = time.perf_counter()
                    module = ttlc.compile(text, target="cpu")
                    warm.append(time.perf_counter() - start)
                    if not module.cache_hit:
                        raise Mismatch(f"compile {name}: the second compilation missed the cache")
        suite.compile_ms[name] = {"cold": 1e3 * statistics.median(cold),
                                  "warm": 1e3 * statistics.median(warm)}
        print(f"  {name:20s} cold {suite.compile_ms[name]['cold']:9.1f} ms   "
              f"warm {suite.compile_ms[name]['warm']:7.2f} ms")
    print("tiled coopmatrix gemm 64x64x64 f32 by work-group size:")
    A, B, C, ref = gemm_data(np.random.default_rng(6), "f32", 64, 64, 64, 256)
    runs = {f"ttlc [{x},1]": ttlc.compile(TILED_GEMM.format(X=x), target="cpu")["gemm"]
            for x in TILED_WORK_GROUPS}
    compare_gemm(suite, "compile", {impl: (lambda k=k: k(A, B, C, grid=(256,)), "")
                                    for impl, k in runs.items()},
                 "f32", (64, 64, 64), 256, "compute", C, ref)
    print(f"gemm staged through local memory {STAGED_N}^3 f32 by work-group size:")
    batch = 16 if cfg.quick else 64
    A, B, C, ref = gemm_data(np.random.default_rng(7), "f32", STAGED_N, STAGED_N, STAGED_N, batch)
    runs = {}
    for x, tiles in STAGED_TILES.items():
        blocks = STAGED_N // (16 * tiles)
        kernel = ttlc.compile(staged_gemm(x), target="cpu")["staged_gemm"]
        runs[f"ttlc staged [{x},1]"] = (lambda k=kernel, g=(blocks, blocks, batch):
                                        k(A, B, C, grid=g), "")
    compare_gemm(suite, "compile", runs, "f32", (STAGED_N,) * 3, batch, "compute", C, ref)


TINY = """
func @tiny(%alpha: f32, %X: memref<f32x16>) {
    %zero = constant 0.0 : f32
    axpby %alpha, %X, %zero, %X
}
"""


def bench_overhead(suite: Suite, torch) -> None:
    """The cost of one launch of a 16-element kernel on one work-group, from Python."""
    print("call overhead (one work-group, 16 elements):")
    kernel = ttlc.compile(TINY, target="cpu")["tiny"]
    x = np.ones(16, np.float32)
    alpha = np.float32(1.0)
    runs = {"ttlc": lambda: kernel(alpha, x, grid=(1,)),
            "numpy": lambda: np.multiply(x, alpha, out=x)}
    if torch is not None:
        tx = torch.from_numpy(x)
        runs["torch"] = lambda: tx.mul_(1.0)
    rows = suite.compare([
        Entry(Row("overhead", "tiny", impl, "f32", "16", 1, "", 0.0),
              fn, lambda impl=impl: check(f"{impl} tiny", x, np.ones(16), 0.0))
        for impl, fn in runs.items()])
    suite.overhead_us.update((r.impl, 1e6 * r.seconds) for r in rows)


# ---- targets, table, JSON, plot -------------------------------------------------------------
def find(suite: Suite, **match) -> Optional[Row]:
    for r in suite.rows:
        if all(getattr(r, k) == v for k, v in match.items()):
            return r
    return None


def practical_peaks(suite: Suite) -> None:
    """The practical peak of a type is the best GEMM rate any other library reached here:
    a large GEMM, or small ones whose data stays in cache (often faster on a loaded machine,
    where the large GEMM also waits for memory)."""
    for dname in DTYPES:
        rates = [(r.gflops, f"{r.impl} {r.kernel} {r.shape} {r.regime}".rstrip())
                 for r in suite.rows if r.dtype == dname and r.regime != "memory"
                 and r.kernel in ("peak gemm", "batched gemm") and not r.impl.startswith("ttlc")]
        if rates:
            best, source = max(rates)
            suite.limits[f"peak_{dname}_gflops"] = best
            suite.limits[f"peak_{dname}_from"] = source


def practical_bandwidth(suite: Suite) -> None:
    """The bandwidth limit is the triad's, raised to the best rate another library
    reached on a bandwidth-bound batch: on a shared machine the triad's rate varies from
    run to run, and what a library measurably moves is within reach."""
    lim = suite.limits
    if not lim.get("bandwidth_gbs"):
        return
    rates = [(r.gbytes, f"{r.impl} {r.kernel} {r.dtype} {r.shape}") for r in suite.rows
             if r.regime == "memory" and not r.impl.startswith("ttlc")
             and binding_limit(suite, r) == "bandwidth"]
    if rates and max(rates)[0] > lim["bandwidth_gbs"]:
        lim["bandwidth_gbs"], lim["bandwidth_from"] = max(rates)


def evaluate_targets(suite: Suite) -> None:
    """The performance goals, each with its value, threshold and pass/miss."""
    def goal(name, value, threshold, unit="x", at_most=False):
        if value is None:
            return
        passed = value <= threshold if at_most else value >= threshold
        suite.targets.append(dict(name=name, value=value, threshold=threshold, unit=unit,
                                  op="<=" if at_most else ">=", passed=bool(passed)))

    lim = suite.limits
    practical_peaks(suite)
    practical_bandwidth(suite)
    for r in [r for r in suite.rows if r.section == "gemm" and r.impl == "ttlc"]:
        base = dict(section="gemm", dtype=r.dtype, shape=r.shape, regime=r.regime)
        label = f"gemm {r.dtype} {r.shape} {r.regime}"
        for impl, need in (("numpy", 2.0), ("torch", 1.5), ("libxsmm", 1.0)):
            other = find(suite, impl=impl, **base)
            goal(f"{label} vs {impl}", other.seconds / r.seconds if other else None, need)
        bound = binding_limit(suite, r)
        if bound == "bandwidth":
            goal(f"{label} % bandwidth", limit_percent(suite, r), 85.0, "%")
        elif bound == "peak":
            goal(f"{label} % peak" + (" (compute-bound at this intensity)"
                                      if r.regime == "memory" else ""),
                 limit_percent(suite, r), 60.0, "%")
    suite.group_ratios = group_vs_memref(suite)
    if suite.group_ratios:
        goal(f"group launches within 1.25x of memref launches (worst of "
             f"{len(suite.group_ratios)})", max(r["ratio"] for r in suite.group_ratios), 1.25,
             at_most=True)
    mine = find(suite, section="fused", impl="ttlc")
    others = [r for r in suite.rows if r.section == "fused" and r.impl in ("numpy", "torch")]
    if mine and others:
        goal("fused vs best of numpy/torch", min(o.seconds for o in others) / mine.seconds, 1.3)
    mine = find(suite, section="bf16", impl="ttlc")
    other = find(suite, section="bf16", impl="torch")
    if mine and other:
        goal(f"bf16 coopmatrix % of torch bf16 ({mine.note})", 100 * other.seconds / mine.seconds,
             50.0, "%")
    for name, ms in suite.compile_ms.items():
        goal(f"compile {name} cold", ms["cold"], 150.0, "ms", at_most=True)
        goal(f"compile {name} warm", ms["warm"], 5.0, "ms", at_most=True)
    for kind in ("tiled gemm", "staged gemm"):  # compile time independent of the work-group
        small, large = (suite.compile_ms.get(f"{kind} [{x},1]") for x in (16, 1024))
        if small and large:
            goal(f"compile {kind} [1024,1] / [16,1] cold", large["cold"] / small["cold"], 2.0,
                 at_most=True)
    if "ttlc" in suite.overhead_us:
        goal("call overhead (1 work-group)", suite.overhead_us["ttlc"], 20.0, "us", at_most=True)


#: the least batch at which group launches are held to memref launches
GROUP_TARGET_BATCH = 4096


def group_vs_memref(suite: Suite) -> List[dict]:
    """The time of each batched GEMM over a prepared group over the time of the same
    work over a 3-d memref, for batches of at least GROUP_TARGET_BATCH matrices."""
    out = []
    for g in suite.rows:
        if g.impl != "ttlc group" or g.batch < GROUP_TARGET_BATCH:
            continue
        m = find(suite, section=g.section, kernel=g.kernel, impl="ttlc", dtype=g.dtype,
                 shape=g.shape, regime=g.regime, batch=g.batch)
        if m is not None:
            out.append(dict(section=g.section, dtype=g.dtype, shape=g.shape, regime=g.regime,
                            batch=g.batch, group_ms=1e3 * g.seconds, memref_ms=1e3 * m.seconds,
                            ratio=g.seconds / m.seconds))
    return out


def binding_limit(suite: Suite, r: Row) -> Optional[str]:
    """Which limit bounds a row (roofline): "bandwidth" when its bytes at the measured
    bandwidth take longer than its flops at the practical peak, else "peak"; in the
    compute regime (data in cache) always "peak"; None when the limit is unknown.  A
    large batch of a high-intensity shape (f64 64x64x64: 5.3 flop/byte) is compute-bound
    even though its data streams from memory."""
    peak = suite.limits.get(f"peak_{r.dtype}_gflops")
    bandwidth = suite.limits.get("bandwidth_gbs")
    if r.regime == "compute":
        return "peak" if peak else None
    if r.regime != "memory" or not bandwidth:
        return None
    if peak and r.flops and r.nbytes and bandwidth * r.flops / r.nbytes > peak:
        return "peak"
    return "bandwidth"


def limit_percent(suite: Suite, r: Row) -> Optional[float]:
    """The row's rate in percent of the limit that binds it (``binding_limit``)."""
    bound = binding_limit(suite, r)
    if bound == "bandwidth":
        return 100 * r.gbytes / suite.limits["bandwidth_gbs"]
    if bound == "peak":
        return 100 * r.gflops / suite.limits[f"peak_{r.dtype}_gflops"]
    return None


def print_table(suite: Suite) -> None:
    print()
    print(f"{'kernel':18s} {'impl':11s} {'type':5s} {'shape':9s} {'regime':7s} {'batch':>7s} "
          f"{'time ms':>10s} {'GFLOP/s':>8s} {'GB/s':>7s} {'%limit':>6s} {'ttlc is':>8s}")
    for r in suite.rows:
        mine = find(suite, section=r.section, kernel=r.kernel, impl="ttlc", dtype=r.dtype,
                    shape=r.shape, regime=r.regime, batch=r.batch)
        speed = f"{r.seconds / mine.seconds:7.2f}x" if mine and r.impl != "ttlc" else ""
        pct = limit_percent(suite, r)
        print(f"{r.kernel:18s} {r.impl:11s} {r.dtype:5s} {r.shape:9s} {r.regime:7s} {r.batch:7d} "
              f"{1e3 * r.seconds:10.4f} {r.gflops:8.2f} {r.gbytes:7.2f} "
              f"{'' if pct is None else f'{pct:5.1f}%':>6s} {speed:>8s}")
    print("('ttlc is' = that implementation's time / ttlc's time: above 1, ttlc is faster)")
    lim = suite.limits
    if "bandwidth_gbs" in lim:
        print(f"%limit of memory-bound rows: of {lim['bandwidth_gbs']:.2f} GB/s "
              f"({lim.get('bandwidth_from', 'triad')})")
    if suite.bf16_path:
        print(f"bf16 coopmatrix gemm of ttlc on {suite.bf16_path}")
    for dname in DTYPES:
        if f"peak_{dname}_gflops" in lim:
            print(f"%limit of compute-bound {dname} rows: of {lim[f'peak_{dname}_gflops']:.2f} "
                  f"GFLOP/s ({lim[f'peak_{dname}_from']})")
    if suite.group_ratios:
        print(f"\nprepared-group launches / memref launches (batches >= {GROUP_TARGET_BATCH}):")
        for r in suite.group_ratios:
            print(f"  {r['section']:6s} {r['dtype']:4s} {r['shape']:9s} {r['regime']:7s} "
                  f"{r['batch']:7d}  {r['group_ms']:9.4f} ms / {r['memref_ms']:9.4f} ms = "
                  f"{r['ratio']:5.2f}x")
    if suite.checked_ratios:
        print("\nchecked mode: checked time / unchecked time")
        for r in suite.checked_ratios:
            print(f"  {r['kernel']:18s} {r['dtype']:4s} {r['shape']:9s} {r['batch']:7d}  "
                  f"{r['checked_ms']:9.4f} ms / {r['unchecked_ms']:9.4f} ms = {r['ratio']:5.2f}x")
    if suite.compile_ms or suite.overhead_us:
        print()
    for name, ms in suite.compile_ms.items():
        print(f"compile {name}: cold {ms['cold']:.1f} ms, warm {ms['warm']:.2f} ms")
    for impl, us in suite.overhead_us.items():
        print(f"call overhead {impl}: {us:.2f} us")
    print()
    print("targets:")
    for t in suite.targets:
        print(f"  {'pass' if t['passed'] else 'MISS':4s}  {t['name']:40s} {t['value']:9.2f} "
              f"{t['unit']:2s} "
              f"(target {t['op']} {t['threshold']:g} {t['unit']})")
    passed = sum(t["passed"] for t in suite.targets)
    print(f"{passed} of {len(suite.targets)} targets met; "
          f"{suite.checks} results checked against NumPy")
    for what, why in suite.skipped.items():
        print(f"skipped {what}: {why}")


def summary(suite: Suite) -> dict:
    import llvmlite

    versions = {"ttlc": ttlc.__version__, "numpy": np.__version__, "llvmlite": llvmlite.__version__,
                "python": platform.python_version()}
    with contextlib.suppress(ImportError):
        import torch
        versions["torch"] = torch.__version__
    rows = []
    for r in suite.rows:
        d = asdict(r)
        d.update(key=r.key(), gflops=r.gflops, gbytes_per_s=r.gbytes,
                 limit_percent=limit_percent(suite, r))
        rows.append(d)
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"meta": {"date": now.isoformat(timespec="seconds"),
                     "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                     "threads": suite.cfg.threads, "versions": versions,
                     "config": asdict(suite.cfg)},
            "limits": suite.limits, "results": rows, "compile_ms": suite.compile_ms,
            "overhead_us": suite.overhead_us, "bf16_path": suite.bf16_path,
            "group_vs_memref": suite.group_ratios, "checked_cost": suite.checked_ratios,
            "targets": suite.targets,
            "skipped": suite.skipped, "checks": {"count": suite.checks, "failed": 0}}


def plot(suite: Suite, path: Path) -> Optional[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        suite.skip("plot", f"matplotlib not installed ({e}); pip install -e '.[bench]'")
        return None
    panels = sorted({(r.section, r.dtype, r.regime) for r in suite.rows
                     if r.flops and r.section not in ("limits", "groups")},
                    key=lambda p: (SECTIONS.index(p[0]), p[1:]))
    if not panels:
        return None
    impls = sorted({r.impl for r in suite.rows}, key=lambda s: (not s.startswith("ttlc"), s))
    colours = {impl: f"C{i}" for i, impl in enumerate(impls)}
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3 * len(panels)), squeeze=False)
    for ax, (section, dtype, regime) in zip(axes[:, 0], panels):
        rows = [r for r in suite.rows if (r.section, r.dtype, r.regime) == (section, dtype, regime)]
        shapes = list(dict.fromkeys(r.shape for r in rows))
        present = [i for i in impls if any(r.impl == i for r in rows)]
        width = 0.8 / len(present)
        rates = [r.gflops for r in rows if r.gflops > 0]
        if rates and max(rates) > 30 * min(rates):  # a wide range: log scale
            ax.set_yscale("log")
            ax.set_ylim(min(rates) / 3, max(rates) * 3)
            ax.set_ylabel("GFLOP/s (log)")
        else:
            ax.set_ylabel("GFLOP/s")
        for i, impl in enumerate(present):
            values = [next((r.gflops for r in rows if r.shape == s and r.impl == impl), 0.0)
                      for s in shapes]
            ax.bar(np.arange(len(shapes)) + i * width, values, width, label=impl,
                   color=colours[impl])
        peak = suite.limits.get(f"peak_{dtype}_gflops")
        if regime == "compute" and peak:
            ax.axhline(peak, color="grey", linestyle="--", linewidth=1, label=f"{dtype} peak")
        ax.set_xticks(np.arange(len(shapes)) + 0.4 - width / 2, shapes)
        ax.set_title(f"{rows[0].kernel}, {dtype}" + (f", {regime}-bound batch" if regime else ""))
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def compare(suite: Suite, old_path: Path) -> None:
    """Time ratios against an earlier JSON summary (above 1: faster now)."""
    old = {r["key"]: r for r in json.loads(old_path.read_text())["results"]}
    print(f"\ncompared with {old_path} (old time / new time):")
    for r in suite.rows:
        if r.key() in old:
            print(f"  {r.key():70s} {old[r.key()]['seconds'] / r.seconds:6.2f}x")


SECTION_FUNCTIONS = {
    "limits": lambda s, torch, lib: bench_limits(s, torch, lib),
    "gemm": lambda s, torch, lib: bench_gemm(s, torch, lib),
    "groups": lambda s, torch, lib: bench_groups(s),
    "fused": lambda s, torch, lib: bench_fused(s, torch),
    "mix": lambda s, torch, lib: bench_mix(s, torch),
    "bf16": lambda s, torch, lib: bench_bf16(s, torch),
    "checked": lambda s, torch, lib: bench_checked(s),
    "compile": lambda s, torch, lib: bench_compile(s),
    "overhead": lambda s, torch, lib: bench_overhead(s, torch),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small batches and few repeats (a smoke test)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"sections: {','.join(SECTIONS)}")
    ap.add_argument("--shapes", help="gemm shapes MxNxK,... (default: all five)")
    ap.add_argument("--dtypes", help="gemm types: f32,f64")
    ap.add_argument("--repeat", type=int, help="timed samples per measurement (median)")
    ap.add_argument("--out", type=Path, default=HERE / "results", help="folder for JSON and PNG")
    ap.add_argument("--compare", type=Path, help="an earlier JSON summary to compare with")
    opts = ap.parse_args(argv)
    sections = [s for s in opts.only.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown or (opts.dtypes and set(opts.dtypes.split(",")) - set(DTYPES)):
        ap.error(f"unknown section or type: {', '.join(unknown) or opts.dtypes}")
    if opts.shapes and not all(len(s.split("x")) == 3 and all(x.isdigit() and int(x) > 0
                                                              for x in s.split("x"))
                               for s in opts.shapes.split(",")):
        ap.error(f"--shapes takes MxNxK,... with positive sizes, not {opts.shapes!r}")
    suite = Suite(make_config(opts))
    load = os.getloadavg()[0]
    print(f"ttlc {ttlc.__version__}, {suite.cfg.threads} threads, numpy {np.__version__}, "
          f"load average {load:.2f} on {os.cpu_count()} CPUs"
          + (" (quick)" if suite.cfg.quick else ""))
    torch = load_torch(suite)
    lib = native.load()
    try:
        for name in SECTIONS:
            if name in sections:
                SECTION_FUNCTIONS[name](suite, torch, lib)
    except Mismatch as e:
        print(f"\nFAILED: {e}", file=sys.stderr)
        return 1
    evaluate_targets(suite)
    suite.checked_ratios = checked_cost(suite)
    print_table(suite)
    opts.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    picture = plot(suite, opts.out / f"suite-{stamp}.png")
    data = summary(suite)
    data["meta"]["load_average"] = {"start": load, "end": os.getloadavg()[0]}
    path = write_summary(opts.out, f"suite-{stamp}.json", "latest.json", data)
    print(f"\nwrote {path}" + (f" and {picture}" if picture else ""))
    if opts.compare:
        compare(suite, opts.compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
