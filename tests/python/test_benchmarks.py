"""Smoke test of the benchmark suite (benchmarks/suite.py --quick) on a tiny size.

PyTorch, LIBXSMM and matplotlib are optional: when one is absent the suite must skip it
with a reason (recorded in the JSON summary) and still check and time everything else.
No timing is asserted.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite.py"


def test_quick_suite_checks_times_and_writes_json(tmp_path):
    out = tmp_path / "results"
    env = dict(os.environ, TTLC_CACHE_DIR=str(tmp_path / "cache"), TTLC_NUM_THREADS="2")
    env.pop("TTLC_CACHE", None)
    proc = subprocess.run([sys.executable, str(SUITE), "--quick", "--shapes", "8x8x8", "--dtypes",
                           "f32", "--repeat", "1", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "latest.json").read_text())
    assert {"meta", "limits", "results", "compile_ms", "overhead_us", "targets", "skipped",
            "checks"} <= set(data)
    # every timed row was compared with NumPy first
    assert data["checks"]["count"] == len(data["results"]) > 0
    assert data["checks"]["failed"] == 0
    impls = {(r["section"], r["impl"]) for r in data["results"]}
    for section in ("gemm", "fused", "mix", "overhead"):
        assert {(section, "ttlc"), (section, "numpy")} <= impls, section
    assert {("gemm", "ttlc group"), ("bf16", "ttlc")} <= impls
    # the bf16 rows name what computed ttlc's mul_add
    assert data["bf16_path"] in ("AMX", "AVX512-BF16", "f32 FMA")
    assert [r["note"] for r in data["results"] if (r["section"], r["impl"]) == ("bf16", "ttlc")] \
        == [data["bf16_path"]]
    assert f"ttlc on {data['bf16_path']}" in proc.stdout
    # groups: prepared groups next to the memref for batches of 4096 and more, with ratios
    assert {("groups", "ttlc"), ("groups", "ttlc group"), ("groups", "ttlc list")} <= impls
    ratios = data["group_vs_memref"]
    assert ratios and all(r["batch"] >= 4096 and r["ratio"] > 0 for r in ratios)
    assert {r["section"] for r in ratios} == {"groups"}  # (quick gemm batches are smaller)
    assert any(t["name"].startswith("group launches within 1.25x of memref launches")
               for t in data["targets"])
    assert "prepared-group launches / memref launches" in proc.stdout
    # checked mode: each kernel timed both ways, with its ratio
    assert {("checked", "ttlc"), ("checked", "ttlc checked"), ("fused", "ttlc checked"),
            ("mix", "ttlc checked")} <= impls
    cost = data["checked_cost"]
    assert {r["section"] for r in cost} == {"checked", "fused", "mix"}
    assert all(r["ratio"] == pytest.approx(r["checked_ms"] / r["unchecked_ms"]) for r in cost)
    assert "checked mode: checked time / unchecked time" in proc.stdout
    assert set(data["compile_ms"]) and all({"cold", "warm"} <= set(v)
                                           for v in data["compile_ms"].values())
    assert {"bandwidth_gbs", "peak_f32_gflops", "peak_f64_gflops"} <= set(data["limits"])
    assert data["targets"] and all({"name", "value", "threshold", "passed"} <= set(t)
                                   for t in data["targets"])
    for row in data["results"]:
        assert row["seconds"] > 0 and row["error"] >= 0
    # optional implementations: measured when present, skipped with a reason when absent
    optional = {"torch": importlib.util.find_spec("torch") is not None,
                "plot": importlib.util.find_spec("matplotlib") is not None}
    for name, present in optional.items():
        if present:
            assert name not in data["skipped"]
        else:
            assert data["skipped"][name], f"{name} absent but no reason given"
    if optional["torch"]:
        assert ("gemm", "torch") in impls and ("bf16", "torch") in impls
    if "libxsmm" in data["skipped"]:
        assert data["skipped"]["libxsmm"]
    else:
        assert ("gemm", "libxsmm") in impls
    if optional["plot"]:
        assert list(out.glob("suite-*.png"))
    assert "results checked against NumPy" in proc.stdout


def test_roofline_names_the_limit_that_binds():
    """A memory-regime row is held to the bandwidth only when its bytes, not its flops,
    bound it: at 20 GB/s and a 100 GFLOP/s peak, 8x8x8 f64 (0.67 flop/byte) is
    bandwidth-bound and 64x64x64 f64 (5.3 flop/byte: 107 GFLOP/s at 20 GB/s) is not."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import suite
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    s = suite.Suite(cfg=None)
    s.limits.update(bandwidth_gbs=20.0, peak_f64_gflops=100.0)

    def row(n, regime, seconds):
        return suite.Row("gemm", "batched gemm", "ttlc", "f64", f"{n}x{n}x{n}", 10, regime,
                         seconds, flops=2.0 * n ** 3 * 10, nbytes=3.0 * n * n * 8 * 10)

    small, large, cached = row(8, "memory", 1e-6), row(64, "memory", 1e-4), row(8, "compute", 1e-6)
    assert suite.binding_limit(s, small) == "bandwidth"
    assert suite.binding_limit(s, large) == "peak"
    assert suite.binding_limit(s, cached) == "peak"
    # 15360 bytes in 1 us = 15.36 GB/s of 20; 5242880 flops in 100 us = 52.4 GFLOP/s of 100
    assert abs(suite.limit_percent(s, small) - 76.8) < 1e-9
    assert abs(suite.limit_percent(s, large) - 52.4288) < 1e-9
    assert suite.binding_limit(suite.Suite(cfg=None), small) is None
    # a library moving more than the triad on a bandwidth-bound batch raises the limit;
    # ttlc's own rows and compute-bound rows do not
    faster = row(8, "memory", 1e-6 / 1.5)  # 23.04 GB/s
    for impl, r in (("libxsmm", faster), ("ttlc", row(8, "memory", 1e-7)),
                    ("numpy", row(64, "memory", 1e-6))):
        r.impl = impl
        s.rows.append(r)
    suite.practical_bandwidth(s)
    assert abs(s.limits["bandwidth_gbs"] - 23.04) < 1e-9
    assert s.limits["bandwidth_from"] == "libxsmm batched gemm f64 8x8x8"


def _quick(script: str, tmp_path):
    out = tmp_path / "results"
    env = dict(os.environ, TTLC_CACHE_DIR=str(tmp_path / "cache"), TTLC_NUM_THREADS="2")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick",
                           "--out", str(out)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, out


def test_quick_recipes_benchmark_checks_and_writes_ratios(tmp_path):
    proc, out = _quick("recipes.py", tmp_path)
    data = json.loads((out / "recipes-latest.json").read_text())
    recipes = {(r["recipe"], r["dtype"]) for r in data["results"]}
    assert {(name, t) for name in ("small_gemm_batched", "tall_and_skinny")
            for t in ("f32", "f64", "c64")} <= recipes
    for row in data["results"]:
        assert set(row["ratio"]) == set(row["seconds"]) - {"ttlc"} and "numpy" in row["ratio"]
        assert all(v > 0 for v in row["seconds"].values())
    if "libxsmm" not in data["skipped"]:
        assert any("libxsmm" in r["ratio"] for r in data["results"])
    if importlib.util.find_spec("torch") is None:
        assert data["skipped"]["torch"]
    assert "vs numpy" in proc.stdout


def test_quick_gemm16_benchmark_checks_and_writes_ratios(tmp_path):
    proc, out = _quick("gemm16.py", tmp_path)
    data = json.loads((out / "gemm16-latest.json").read_text())
    assert [r["case"] for r in data["results"]] == ["bf16->f32", "bf16->bf16", "f16->f32",
                                                     "f16->f16"]
    for row in data["results"]:
        assert {"hand", "numpy"} <= set(row["ratio"]) == set(row["seconds"]) - {"ttlc"}
        assert all(v > 0 for v in row["seconds"].values())
        assert row["path"] in ("AMX", "AVX512-BF16", "f32 FMA")
    if importlib.util.find_spec("torch") is None:
        assert data["skipped"]["torch"]
    assert "vs hand" in proc.stdout


def test_quick_scale_benchmark_reports_1_and_2_workers(tmp_path):
    if importlib.util.find_spec("distributed") is None:
        pytest.skip("benchmarks/scale.py needs the extra ttlc[dask]")
    proc, out = _quick("scale.py", tmp_path)
    data = json.loads((out / "scale-latest.json").read_text())
    assert [r["workers"] for r in data["results"]] == [1, 2]
    assert all(r["entries_per_s"] > 0 for r in data["results"])
    assert "2 workers / 1 worker throughput" in proc.stdout


def test_quick_small_gemm_checks_every_kind_and_writes_json(tmp_path):
    """benchmarks/small_gemm.py: each kind checked against NumPy, timed and summarised."""
    out = tmp_path / "results"
    env = dict(os.environ, TTLC_CACHE_DIR=str(tmp_path / "cache"), TTLC_NUM_THREADS="2")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "small_gemm.py"), "--quick",
                           "--dtypes", "f64", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # small_gemm-latest.json, or small_gemm-<model>-latest.json under TTLC_CPU=<model>
    latest, = out.glob("small_gemm*-latest.json")
    data = json.loads(latest.read_text())
    assert {r["kind"] for r in data["results"]} == {"batched", "shared", "shared-b", "dynamic",
                                                     "tall", "chain", "gemv", "gemv.t", "ger",
                                                     "call"}
    assert {"shared" in r["shape"] for r in data["results"] if r["kind"] in ("gemv", "ger")} \
        == {True, False}
    for row in data["results"]:
        assert {"ttlc", "numpy"} <= set(row["seconds"]) and row["ratio"]["numpy"] > 0
        times = row["compile_ms"]
        assert all(times[k] > 0 for k in ("cold", "cold_wall", "warm", "warm_wall")), times
        assert times["warm"] < times["cold"], times  # a cache hit runs no LLVM
    assert "bf16/f16 64x64x64" in data["skipped"]
    if "libxsmm" not in data["skipped"]:
        assert all("libxsmm" in r["seconds"] for r in data["results"])


def test_small_gemm_warm_up_compiles_past_a_cache_hit(tmp_path):
    """small_gemm's warm-up loads the lowering passes even where the cache holds its kernel
    (a cache hit imports none of them), so that no kernel's cold compile counts the
    process's one-time costs."""
    env = dict(os.environ, TTLC_CACHE="1", TTLC_CACHE_DIR=str(tmp_path / "cache"))
    script = f"""
import sys
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
import ttlc, small_gemm
from suite import GEMM_SUBVIEW
if sys.argv[1] == "fill":
    ttlc.compile(GEMM_SUBVIEW.format(t="f32", M=2, N=2, K=2), target="cpu")
else:
    assert "ttlc.passes.linalg.matmul" not in sys.modules
    small_gemm.warm_up()
    assert "ttlc.passes.linalg.matmul" in sys.modules
"""
    for step in ("fill", "check"):
        proc = subprocess.run([sys.executable, "-c", script, step], capture_output=True,
                              text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
