#!/usr/bin/env python3
"""Throughput of ttlc.dask.map_batches on a dask.distributed LocalCluster of 1 and 2 worker
processes (one thread each, TTLC_NUM_THREADS=1).

    .venv/bin/python benchmarks/scale.py [--quick] [--out DIR]

The job: small_gemm_batched f32 16x16x16 (C_i = A_i B_i) over a batch whose inputs the
workers generate chunk by chunk (nothing is sent but the task graph), reduced to its sum;
the result is checked against the value NumPy computes for the same inputs.  Each cluster
is started and warmed up (one run that compiles the kernel in every worker) before the
timed runs.  Prints batch entries and GFLOP/s per second for each cluster size and the
speed-up of 2 workers over 1, and writes ``DIR/scale-<time>.json`` and
``DIR/scale-latest.json`` (DIR: benchmarks/results).  Skips with a reason without Dask.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
try:
    import ttlc
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(HERE.parent / "src"))
    import ttlc
sys.path.insert(0, str(HERE))
from suite import write_summary  # noqa: E402

M = N = K = 16


def chunk_values(block_id=None, block_info=None):
    """The chunk of A or B that a worker makes: entries i of the batch hold
    (i mod 7 + 1) / 8, so that the expected sum is computable without the data."""
    info = block_info[None]
    lo, hi = info["array-location"][2]
    scale = ((np.arange(lo, hi) % 7) + 1) / 8
    return np.asfortranarray(np.broadcast_to(scale.astype(np.float32), (M, K, hi - lo)))


def expected_sum(batch: int) -> float:
    """sum over i of the 16x16 entries of A_i B_i with A_i = B_i = s_i ones: 16^3 s_i^2."""
    s = ((np.arange(batch) % 7) + 1) / 8
    return float(M * N * K * np.sum(s * s))


def run_job(client, batch: int, chunk: int) -> float:
    import dask.array as da
    import ttlc.dask

    recipe = ttlc.recipes.small_gemm_batched("f32", "n", "n", M, N, K)
    A = da.map_blocks(chunk_values, chunks=((M,), (K,), ((chunk,) * (batch // chunk))),
                      dtype=np.float32)
    C = da.zeros((M, N, batch), chunks=(M, N, chunk), dtype=np.float32)
    out = ttlc.dask.map_batches(recipe, 1.0, A, A, 0.0, C, outputs="C")
    start = time.perf_counter()
    total = client.compute(out.sum(dtype=np.float64), sync=True)
    seconds = time.perf_counter() - start
    want = expected_sum(batch)
    if not abs(total - want) <= 1e-6 * want:
        raise SystemExit(f"wrong result on the cluster: {total} != {want}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small batch (a smoke test)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    opts = ap.parse_args()
    try:
        import distributed
    except ImportError as e:
        print(f"skipped: ttlc.dask needs the extra ttlc[dask] ({e}); pip install -e '.[dask]'")
        return 0
    # 1 KiB per entry and array (A, which is also B, C and the result): chunks of 32 MiB
    # (8 MiB quick) per array, so that a task's ~1 ms of scheduling (more on a loaded
    # machine) is small beside its work; 1 GiB per array in all (16 MiB quick)
    chunk = 1 << 13 if opts.quick else 1 << 15
    batch = chunk * (2 if opts.quick else 32)
    repeat = 2 if opts.quick else 5
    os.environ["TTLC_NUM_THREADS"] = "1"  # one core per worker process
    rows = []
    print(f"map_batches: small_gemm_batched f32 {M}x{N}x{K}, batch {batch} in chunks of "
          f"{chunk}, generated on the workers, summed")
    for workers in (1, 2):
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as client:
            client.wait_for_workers(workers)
            run_job(client, chunk * 2 * workers, chunk)  # every worker compiles the kernel
            seconds = statistics.median(run_job(client, batch, chunk) for _ in range(repeat))
        row = {"workers": workers, "batch": batch, "seconds": seconds,
               "entries_per_s": batch / seconds,
               "gflops": 2.0 * M * N * K * batch / seconds / 1e9}
        rows.append(row)
        print(f"  {workers} worker{'s' if workers > 1 else ' '}  {seconds * 1e3:9.1f} ms  "
              f"{row['entries_per_s'] / 1e6:7.3f} M entries/s  {row['gflops']:7.2f} GFLOP/s",
              flush=True)
    speedup = rows[0]["seconds"] / rows[1]["seconds"]
    print(f"  2 workers / 1 worker throughput: {speedup:.2f}x")
    summary = {"meta": {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                        "quick": opts.quick, "cpus": os.cpu_count(), "ttlc": ttlc.__version__,
                        "load_average": os.getloadavg(),
                        "distributed": distributed.__version__},
               "results": rows, "speedup_2_over_1": speedup}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    write_summary(opts.out, f"scale-{stamp}.json", "scale-latest.json", summary)
    print(f"wrote {opts.out / 'scale-latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
