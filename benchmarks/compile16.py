#!/usr/bin/env python3
"""Cold compile time of 16-bit gemm kernels for a CPU model, which need not be this machine.

    TTLC_CPU=sapphirerapids .venv/bin/python benchmarks/compile16.py [--repeat 3] [--match RE]

Compiles each kernel to an object file (the program checked, lowered, turned into LLVM IR,
optimized at O3 and emitted: everything ``ttlc.compile`` does on a cache miss but loading
the object, which a model this machine cannot run does not allow, with the garbage
collector paused as there) with the disk cache off, in ``--repeat`` rounds that each
compile every kernel once, and prints the least CPU time of the calling thread (ttlc and
LLVM run on it) with its phases, in milliseconds.  Rounds, each in its own order, rather
than repeats one after the other: on a shared machine a burst of other work (one kernel's
samples spread 1.5x within minutes) then falls on one sample of several kernels, not on
every sample of one (nor, in a fixed order, a load that comes back with the round's
period on the same kernel each round).  Where the model has AMX its description is
forced as the tests force it (this process may not be granted the tiles: nothing runs).
Kernels: ``gemm16.py``'s batched 64^3 products, then one ``gemm`` per shape, operand and
result type and transposition (the shapes of the tests: whole tiles, edges, odd K; and
``?x?x?``, every size and column stride known only at run time).
LLVM's own start is not counted (a first kernel compiles before the measurements).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ["TTLC_CACHE"] = "0"

from gemm16 import CASES, GEMM  # noqa: E402
from ttlc.api import check  # noqa: E402
from ttlc.backends.cpu import jit, module  # noqa: E402

#: M x N x K; None: known only at run time (the memrefs' column strides too)
SHAPES = ((64, 64, 64), (37, 21, 19), (16, 5, 33), (16, 64, 16), (37, 21, 1), (100, 70, 50),
          (None, None, None))
#: the phases of a cold compile: ttlc's passes, LLVM IR generation, LLVM's parse of it,
#: LLVM's O3 pipeline, machine code
PHASES = ("lower", "codegen", "parse", "O3", "object")


def source(ab: str, c: str, ta: str, tb: str, M, N, K) -> str:
    """alpha op(A) op(B) + beta C with memrefs of the given shapes (None: ``?``, and then
    a column stride known only at run time)."""
    def memref(t: str, rows, cols) -> str:
        layout = ",strided<1,?>" if None in (rows, cols) else ""
        return f"memref<{t}x{'?' if rows is None else rows}x{'?' if cols is None else cols}{layout}>"
    ashape = (M, K) if ta == "n" else (K, M)
    bshape = (K, N) if tb == "n" else (N, K)
    return (f"func @k(%alpha: {ab}, %A: {memref(ab, *ashape)}, %B: {memref(ab, *bshape)}, "
            f"%beta: {c}, %C: {memref(c, M, N)}) {{\n"
            f"    gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C\n}}")


def kernels() -> dict:
    out = {f"batched {t}->{r} 64^3": GEMM.format(t=t, r=r, n=64) for t, r in CASES}
    for t, r in CASES:
        for M, N, K in SHAPES:
            for ta in "nt":
                for tb in "nt":
                    shape = "x".join("?" if d is None else str(d) for d in (M, N, K))
                    out[f"{t}->{r} {shape} {ta}{tb}"] = source(t, r, ta, tb, M, N, K)
    return out


def cold(text: str) -> dict:
    """CPU milliseconds of each phase (``PHASES``) of one cold compile to an object."""
    art = module.Artifacts(check(text), False)
    mod = []
    steps = (lambda: art.lowered, lambda: art.ir, lambda: mod.append(jit.parse(art.ir)),
             lambda: module.optimize(mod[0]), lambda: jit.emit_object(mod[0]))
    times = {}
    with module.collector_paused():
        for phase, step in zip(PHASES, steps):
            t = time.thread_time()
            step()
            times[phase] = (time.thread_time() - t) * 1e3
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--match", default="", help="only kernels whose name matches this regex")
    opts = ap.parse_args()
    if jit.has_feature("amx-tile"):
        jit.amx_usable = lambda: True  # the description an AMX CPU gets (nothing runs)
    print(f"CPU model {jit.machine().cpu}, load average {os.getloadavg()[0]:.1f}")
    module.Artifacts(check(source("f32", "f32", "n", "n", 2, 2, 2)), False).object_code()
    chosen = {name: text for name, text in kernels().items() if re.search(opts.match, name)}
    best = {}
    order = list(chosen)
    for round_ in range(opts.repeat):
        random.Random(round_).shuffle(order)
        for name in order:
            sample = cold(chosen[name])
            if name not in best or sum(sample.values()) < sum(best[name].values()):
                best[name] = sample
    totals = []
    for name in chosen:
        phases = best[name]
        total = sum(phases.values())
        totals.append(total)
        print(f"{name:28s} {total:7.0f}  " + "  ".join(f"{k} {phases[k]:.0f}" for k in PHASES))
    totals.sort()
    if totals:
        over = sum(t > 150 for t in totals)
        print(f"{len(totals)} kernels: median {totals[len(totals) // 2]:.0f} ms, "
              f"max {totals[-1]:.0f} ms, {over} over 150 ms")


if __name__ == "__main__":
    main()
