"""ttlc.dask.map_batches (spec: tensor-language.txt, group_id, subview, gemm): one launch per
chunk of the batch mode on Dask's local schedulers and on a dask.distributed LocalCluster
of 2 worker processes, against NumPy; a batch larger than the workers' memory streams
through; a worker killed during a run does not change the result.
"""
from __future__ import annotations

import os
import pickle
import signal
import time

import numpy as np
import pytest

import ttlc

pytest.importorskip("dask", reason="ttlc.dask needs the extra ttlc[dask] (dask, distributed)")
distributed = pytest.importorskip("distributed",
                                  reason="ttlc.dask's cluster tests need the extra ttlc[dask]")
pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

import dask  # noqa: E402
import dask.array as da  # noqa: E402

import ttlc.dask  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """A cache of the module's own, also for the worker processes (they inherit it)."""
    old = os.environ.get("TTLC_CACHE_DIR")
    os.environ["TTLC_CACHE_DIR"] = str(tmp_path_factory.mktemp("ttlc-cache"))
    yield
    if old is None:
        del os.environ["TTLC_CACHE_DIR"]
    else:
        os.environ["TTLC_CACHE_DIR"] = old


def operands(batch, seed=0, M=4, N=3, K=5):
    rng = np.random.default_rng(seed)
    A = np.asfortranarray(rng.standard_normal((M, K, batch)))
    B = np.asfortranarray(rng.standard_normal((N, K, batch)))
    C = np.asfortranarray(rng.standard_normal((M, N, batch)))
    return A, B, C, 2.0 * np.einsum("ikx,jkx->ijx", A, B) + 0.5 * C


def recipe():
    return ttlc.recipes.small_gemm_batched("f64", "n", "t", 4, 3, 5)


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_local_schedulers_equal_numpy(scheduler):
    A, B, C, want = operands(100)
    before = C.copy()
    # chunks that differ between the arrays and along the other modes are aligned
    out = ttlc.dask.map_batches(recipe(), 2.0, da.from_array(A, chunks=(4, 5, 30)),
                                da.from_array(B, chunks=(3, 2, 25)), 0.5,
                                da.from_array(C, chunks=(2, 3, 100)), outputs="C")
    assert out.chunks[2] == (30, 30, 30, 10)
    # (one process for the processes scheduler: each compiles the kernel once)
    options = {"num_workers": 1} if scheduler == "processes" else {}
    np.testing.assert_allclose(out.compute(scheduler=scheduler, **options), want, rtol=1e-13,
                               atol=1e-13)
    assert (C == before).all(), "the array behind a Dask input was written"


def test_kernels_of_the_interpreter_run_too():
    A, B, C, want = operands(12, seed=4)
    r = ttlc.recipes.small_gemm_batched("f64", "n", "t", 4, 3, 5, target="interp")
    out = ttlc.dask.map_batches(r, 2.0, da.from_array(A, chunks=(4, 5, 5)),
                                da.from_array(B, chunks=(3, 5, 5)), 0.5,
                                da.from_array(C, chunks=(4, 3, 5)), outputs="C")
    np.testing.assert_allclose(out.compute(scheduler="threads"), want, rtol=1e-13, atol=1e-13)


TWO = """
func @two(%alpha: f32, %x: memref<f32x4x?>, %w: memref<f32x4>, %y: memref<f32x4x?>,
          %z: memref<f32x4x?>) {
    %k = group_id.x : index
    %xk = subview %x[0:4,%k] : memref<f32x4>
    %yk = subview %y[0:4,%k] : memref<f32x4>
    %zk = subview %z[0:4,%k] : memref<f32x4>
    %zero = constant 0.0 : f32
    %one = constant 1.0 : f32
    axpby %alpha, %xk, %zero, %yk
    axpby %one, %w, %one, %zk
}
"""


def two_operands():
    rng = np.random.default_rng(1)
    x, y, z = (np.asfortranarray(rng.standard_normal((4, 37)).astype(np.float32))
               for _ in range(3))
    w = rng.standard_normal(4).astype(np.float32)
    return x, w, y, z


@pytest.mark.parametrize("outputs", [("y", "%z"), (3, 4)])
def test_several_outputs_scalars_and_whole_arrays(outputs):
    kernel = ttlc.compile(TWO)["two"]
    x, w, y, z = two_operands()
    dx, dy, dz = (da.from_array(a, chunks=(4, 10)) for a in (x, y, z))
    gy, gz = ttlc.dask.map_batches(kernel, np.float32(3.0), dx, w, dy, dz, outputs=outputs)
    gy, gz = dask.compute(gy, gz, scheduler="threads")
    np.testing.assert_allclose(gy, 3.0 * x, rtol=1e-6)
    np.testing.assert_allclose(gz, z + w[:, None], rtol=1e-6)


def test_an_input_the_kernel_writes_is_refused():
    """A written argument not named in outputs would change a chunk Dask holds."""
    kernel = ttlc.compile(TWO)["two"]
    x, w, y, z = two_operands()
    out = ttlc.dask.map_batches(kernel, np.float32(1.0), da.from_array(x, chunks=(4, 10)), w,
                                da.from_array(y, chunks=(4, 10)),
                                da.from_array(z, chunks=(4, 10)), outputs="y")
    with pytest.raises(ttlc.KernelError, match="read-only"):
        out.compute(scheduler="sync")


@pytest.mark.parametrize("change,error,message", [
    (dict(outputs="D"), ValueError, r"no parameter %D .*%alpha, %A, %B, %beta, %C"),
    (dict(outputs=7), ValueError, "outputs must name"),
    (dict(outputs="B", B=np.zeros((3, 5, 10))), TypeError, "output argument 2 .*Dask array"),
    (dict(C=da.zeros((4, 3, 11), chunks=(4, 3, 5))), ValueError, "11 batch entries"),
    (dict(A=np.zeros((4, 5, 10)), B=np.zeros((3, 5, 10)), outputs="beta"), TypeError,
     "output argument 3"),
    (dict(batch_axis=3), ValueError, "no batch mode 3"),
])
def test_bad_calls_name_what_is_wrong(change, error, message):
    kernel = recipe().kernel(0.5)
    args = dict(alpha=1.0, A=da.zeros((4, 5, 10), chunks=(4, 5, 5)),
                B=da.zeros((3, 5, 10), chunks=(3, 5, 5)), beta=0.5,
                C=da.zeros((4, 3, 10), chunks=(4, 3, 5)), outputs="C", batch_axis=None)
    args.update(change)
    with pytest.raises(error, match=message):
        ttlc.dask.map_batches(kernel, args["alpha"], args["A"], args["B"], args["beta"],
                              args["C"], outputs=args["outputs"], batch_axis=args["batch_axis"])


def test_wrong_arity_is_refused():
    kernel = recipe().kernel(1)
    with pytest.raises(TypeError, match="takes 5 arguments, got 2"):
        ttlc.dask.map_batches(kernel, 1.0, da.zeros((4, 5, 2)), outputs="C")
    with pytest.raises(TypeError, match="recipe small_gemm_batched takes"):
        ttlc.dask.map_batches(recipe(), 1.0, da.zeros((4, 5, 2)), outputs="C")
    with pytest.raises(ValueError, match="at least one output"):
        ttlc.dask.map_batches(kernel, 1.0, da.zeros((4, 5, 2)), da.zeros((3, 5, 2)), 0.0,
                              da.zeros((4, 3, 2)), outputs=[])


def test_tasks_carry_program_text_not_machine_code():
    r = recipe()
    out = ttlc.dask.map_batches(r, 1.0, da.zeros((4, 5, 10), chunks=(4, 5, 5)),
                                da.zeros((3, 5, 10), chunks=(3, 5, 5)), 0.0,
                                da.zeros((4, 3, 10), chunks=(4, 3, 5)), outputs="C")
    graph = out.__dask_graph__()
    launches = {id(t[0]): t[0] for layer in graph.layers.values() for t in
                (layer[k] for k in layer) if isinstance(t, tuple) and t
                and isinstance(t[0], ttlc.dask._Launch)}
    assert len(launches) == 1
    [launch] = launches.values()
    assert launch.spec == ttlc.dask.KernelSpec(str(r.module.program), "cpu", False,
                                               "gemm_beta0")
    data = pickle.dumps(launch)
    assert b"\x7fELF" not in data and len(data) < 4 * len(launch.spec.text) + 2048


# ---- dask.distributed: 2 worker processes -------------------------------------------------
MEMORY_LIMIT = 400 << 20  # per worker; a worker with ttlc and a compiled kernel takes ~180 MiB


@pytest.fixture(scope="module")
def client():
    # no spilling to disk: a batch that did not stream would exceed the limit and stop
    with dask.config.set({"distributed.worker.memory.target": False,
                          "distributed.worker.memory.spill": False,
                          "distributed.scheduler.worker-ttl": None}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           memory_limit=MEMORY_LIMIT, dashboard_address=":0")
        c = distributed.Client(cluster)
        try:
            c.wait_for_workers(2, timeout=60)
            yield c
        finally:
            c.close()
            cluster.close()


def test_cluster_equals_numpy_and_compiles_once_per_process(client):
    A, B, C, want = operands(400, seed=2)
    out = ttlc.dask.map_batches(recipe(), 2.0, da.from_array(A, chunks=(4, 5, 25)),
                                da.from_array(B, chunks=(3, 5, 25)), 0.5,
                                da.from_array(C, chunks=(4, 3, 25)), outputs="C")
    np.testing.assert_allclose(client.compute(out).result(timeout=120), want, rtol=1e-13,
                               atol=1e-13)
    counts = client.run(lambda: ttlc.dask.compiles)
    assert len(counts) == 2 and all(n <= 1 for n in counts.values())
    assert sum(counts.values()) >= 1


def _reset_peak_rss() -> None:
    """Start the worker's peak resident size over from its current one (Linux 4.0's
    clear_refs; getrusage's ru_maxrss would also count what the process was before it
    exec'd, e.g. a large test process)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _max_rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM:"))


def test_a_batch_larger_than_the_workers_memory_streams_through(client):
    n, chunk = 300_000, 4096  # 3 x 16 x 16 f32 per entry: 920 MB in all, 3 MiB per chunk
    r = ttlc.recipes.small_gemm_batched("f32", "n", "n", 16, 16, 16)
    A = da.ones((16, 16, n), chunks=(16, 16, chunk), dtype=np.float32)
    B = da.full((16, 16, n), 2.0, chunks=(16, 16, chunk), dtype=np.float32)
    C = da.zeros((16, 16, n), chunks=(16, 16, chunk), dtype=np.float32)
    total = A.nbytes + B.nbytes + C.nbytes
    assert total > 2 * MEMORY_LIMIT
    out = ttlc.dask.map_batches(r, 0.5, A, B, 0.0, C, outputs="C")
    client.run(_reset_peak_rss)
    low, high = client.compute([out.min(), out.max()], sync=True)
    assert low == high == 0.5 * 16 * 2.0
    peaks = client.run(_max_rss)
    print("peak RSS of the workers (MiB):", {w: p >> 20 for w, p in peaks.items()})
    assert len(peaks) == 2 and all(p < MEMORY_LIMIT for p in peaks.values()), peaks


def _slowly(x):
    time.sleep(0.1)
    return x


def test_a_worker_killed_during_the_run_does_not_change_the_result(client):
    A, B, C, want = operands(400, seed=3)
    slow = da.from_array(A, chunks=(4, 5, 10)).map_blocks(_slowly, dtype=A.dtype)
    out = ttlc.dask.map_batches(recipe(), 2.0, slow, da.from_array(B, chunks=(3, 5, 10)), 0.5,
                                da.from_array(C, chunks=(4, 3, 10)), outputs="C")
    future = client.compute(out)
    deadline = time.monotonic() + 60
    while True:  # wait until some of the 40 chunks are done, then kill who holds most
        held = {w: [k for k in keys if "ttlc-gemm" in str(k)]
                for w, keys in client.has_what().items()}
        if sum(map(len, held.values())) >= 4 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert future.status == "pending", "the run ended before a worker could be killed"
    victim = max(held, key=lambda w: len(held[w]))
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    np.testing.assert_allclose(future.result(timeout=120), want, rtol=1e-13, atol=1e-13)
    client.wait_for_workers(2, timeout=60)
    assert pid not in client.run(os.getpid).values()


def test_the_example_of_the_docs_runs():
    """The ```python blocks of docs/dask.md (the ```py blocks need a cluster)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "dask.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/dask.md", "exec"), {})
