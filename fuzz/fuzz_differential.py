#!/usr/bin/env python3
"""Long-running differential fuzzer: target cpu against the interpreter (``make fuzz``).

Program number i is ``ttlc.testing.generate(seed + i)``; each runs with the same inputs
on both targets and the results are compared (``ttlc.testing.differential``: integers
exactly, floats within a tolerance).  Work is spread over --jobs processes.  Every
failing program is saved to fuzz/crashes/ (``diff-<seed>.ir`` with the program,
``diff-<seed>.txt`` with what differed); exits 1 when something was found.

    python fuzz/fuzz_differential.py --programs 3000 [--seed 0] [--jobs 2]
    python fuzz/fuzz_differential.py --only 1234        # one program, printed
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from ttlc.testing.differential import compare_seed  # noqa: E402


def _one(seed: int):
    t0 = time.perf_counter()
    outcome = compare_seed(seed)
    return outcome, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--programs", type=int, default=1000, help="number of programs (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="first generator seed (default 0)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="worker processes (default 2)")
    ap.add_argument("--only", type=int, metavar="SEED", help="run one seed and print its program")
    ap.add_argument("--out", default=str(HERE / "crashes"), help="where findings go")
    ap.add_argument("--cache", action="store_true",
                    help="keep the object code in the disk cache (off: every program is new)")
    args = ap.parse_args(argv)
    if not args.cache:
        os.environ["TTLC_CACHE"] = "0"
    if args.only is not None:
        outcome, dt = _one(args.only)
        print(outcome.text)
        print(f"seed {args.only}: {outcome.status} ({dt:.1f} s) {outcome.detail}")
        return 0 if outcome.ok else 1
    seeds = range(args.seed, args.seed + args.programs)
    print(f"differential fuzzing interp vs cpu: {len(seeds)} programs from seed {args.seed}, "
          f"{args.jobs} job(s)", flush=True)
    out = Path(args.out)
    counts: Counter = Counter()
    failures, times = [], []
    start = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.jobs, maxtasksperchild=200) as pool:
        _run(pool, seeds, counts, failures, times, out, start)
    slowest = ", ".join(f"{s} ({t:.1f} s)" for t, s in sorted(times, reverse=True)[:5])
    print(f"{counts['agree']} of {len(seeds)} programs agree (seeds {args.seed}.."
          f"{args.seed + len(seeds) - 1}); differ: {counts['differ']}, error: {counts['error']}; "
          f"{time.perf_counter() - start:.0f} s; slowest: {slowest}")
    if failures:
        print(f"findings saved to {out}/diff-<seed>.ir/.txt")
    return 1 if failures else 0


def _run(pool, seeds, counts, failures, times, out, start) -> None:
    """Compare every seed on the pool, saving and printing each finding as it comes."""
    for n, (outcome, dt) in enumerate(pool.imap_unordered(_one, seeds, chunksize=2), 1):
        counts[outcome.status] += 1
        times.append((dt, outcome.seed))
        if not outcome.ok:
            failures.append(outcome)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"diff-{outcome.seed}.ir").write_text(outcome.text)
            (out / f"diff-{outcome.seed}.txt").write_text(outcome.report())
            print(f"seed {outcome.seed}: {outcome.status}: {outcome.detail[:300]}", flush=True)
        if n % 100 == 0:
            print(f"  {n}/{len(seeds)} programs, {counts['agree']} agree "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
