#!/usr/bin/env python3
"""16-bit gemm: ttlc's ``gemm`` instruction against a hand-written cooperative-matrix kernel,
NumPy and PyTorch, in one process.

    .venv/bin/python benchmarks/gemm16.py [--quick] [--out DIR]

C_i = A_i B_i for a batch of 64 x 64 x 64 products (column-major, packed), A and B in bf16
or f16, C in f32 or in the operands' type.  Implementations:

* ``ttlc``: one ``gemm`` per batch member through ``group_id`` and ``subview`` (as in the
  README), default attributes: the tiles lower-linalg chooses for this CPU;
* ``hand``: the same product written with cooperative matrices by hand (``HAND``: tile loops
  over loads, mul_adds and a store, accumulating in f32), the fastest of ``HAND_TILES``
  on this machine (timed first; the row names the tiles; --quick: the first two);
* ``numpy``: an f32 ``matmul`` of the operands converted to f32 beforehand (the conversion
  is not timed);
* ``torch``: ``torch.bmm`` in the operands' type (its result in that type too).

Every result is first compared with NumPy's (float64 products of the same 16-bit data)
within the tolerance of its result type (a mismatch stops the run); times are medians of
samples taken in turns (``recipes.timed``).  Prints ratios (other time / ttlc time: above
1, ttlc is faster) and writes ``DIR/gemm16-<time>.json`` and ``DIR/gemm16-latest.json``
(DIR: benchmarks/results), with the path ttlc's mul_add took on this CPU (AMX,
AVX512-BF16 or f32 FMA).  PyTorch is skipped with a printed reason where it is missing.
"""
from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import idle_threads  # noqa: F401  (before NumPy: its BLAS threads sleep when idle)
import ml_dtypes
import numpy as np

HERE = Path(__file__).resolve().parent
try:
    import ttlc
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(HERE.parent / "src"))
    import ttlc
sys.path.insert(0, str(HERE))
from recipes import check, load_torch, rated, timed, write_results  # noqa: E402
from suite import ttlc_threads  # noqa: E402

N = 64
#: (operand type, result type) of the products measured
CASES = (("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32"), ("f16", "f16"))
NUMPY_TYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}
#: relative error allowed against the float64 products, by result type: f32 sums of exact
#: 16-bit products (64 terms), or those rounded once to the 16-bit type
TOLERANCE = {"f32": 1e-5, "bf16": 1e-2, "f16": 2e-3}
#: tile shapes (m x n x k) of the hand-written kernel tried: the vector path's, square ones
#: of the sizes AMX and the interpreter's examples use
HAND_TILES = ((64, 4, 4), (64, 4, 8), (32, 8, 8), (16, 16, 16), (32, 32, 32))

GEMM = """
func @gemm(%A: memref<{t}x{n}x{n}x?>, %B: memref<{t}x{n}x{n}x?>, %C: memref<{r}x{n}x{n}x?>) {{
    %i = group_id.x : index
    %a = subview %A[0:{n},0:{n},%i] : memref<{t}x{n}x{n}>
    %b = subview %B[0:{n},0:{n},%i] : memref<{t}x{n}x{n}>
    %c = subview %C[0:{n},0:{n},%i] : memref<{r}x{n}x{n}>
    %one = constant 1.0 : {t}
    %zero = constant 0.0 : {t}
    gemm %one, %a, %b, %zero, %c
}}
"""

HAND = """
func @hand(%A: memref<{t}x{n}x{n}x?>, %B: memref<{t}x{n}x{n}x?>, %C: memref<{r}x{n}x{n}x?>)
        attributes{{subgroup_size=16, work_group_size=[16,1]}} {{
    %bt = group_id.x : index
    %a = subview %A[0:{n},0:{n},%bt] : memref<{t}x{n}x{n}>
    %b = subview %B[0:{n},0:{n},%bt] : memref<{t}x{n}x{n}>
    %c = subview %C[0:{n},0:{n},%bt] : memref<{r}x{n}x{n}>
    parallel {{
        %c0 = constant 0 : index
        %cm = constant {m} : index
        %cn = constant {nt} : index
        %ck = constant {k} : index
        %size = constant {n} : index
        %zero = constant 0.0 : coopmatrix<f32x{m}x{nt},matrix_acc>
        for %j = %c0, %size, %cn {{
            for %i = %c0, %size, %cm {{
                %acc = for %kk = %c0, %size, %ck init(%x=%zero)
                        -> (coopmatrix<f32x{m}x{nt},matrix_acc>) {{
                    %ta = cooperative_matrix_load %a[%i,%kk] : coopmatrix<{t}x{m}x{k},matrix_a>
                    %tb = cooperative_matrix_load %b[%kk,%j] : coopmatrix<{t}x{k}x{nt},matrix_b>
                    %y = cooperative_matrix_mul_add %ta, %tb, %x : coopmatrix<f32x{m}x{nt},matrix_acc>
                    yield (%y)
                }}
                {store}
            }}
        }}
    }}
}}
"""


def hand_kernel(t: str, r: str, m: int, nt: int, k: int):
    """The hand-written kernel with m x nt tiles of C and K steps of k (f32 accumulators,
    cast once to a 16-bit result)."""
    store = ("cooperative_matrix_store %acc, %c[%i,%j]" if r == "f32" else
             f"%res = cast %acc : coopmatrix<{r}x{m}x{nt},matrix_acc>\n"
             "                cooperative_matrix_store %res, %c[%i,%j]")
    text = HAND.format(t=t, r=r, n=N, m=m, nt=nt, k=k, store=store)
    return ttlc.compile(text, target="cpu")["hand"]


def mul_add_path(t: str) -> str:
    """What computes ttlc's mul_add of t x t into f32 here: AMX, AVX512-BF16 or f32 FMA."""
    from ttlc.backends.cpu.mul_add import mul_add_path as path

    p = path(t, t, "f32")
    return "f32 FMA" if p == "FMA" else p


class Run:
    def __init__(self, opts):
        self.quick = opts.quick
        self.batch = 128 if opts.quick else 2048
        self.repeat = 3 if opts.quick else 7
        self.sample = 0.002 if opts.quick else 0.05
        self.threads = ttlc_threads()
        self.rows, self.skipped = [], {}
        self.torch = load_torch(self)

    def skip(self, what, why):
        print(f"  skipped {what}: {why}")
        self.skipped[what] = why

    def case(self, t: str, r: str) -> None:
        batch = self.batch
        rng = np.random.default_rng(16)
        A, B = (np.asfortranarray(rng.standard_normal((N, N, batch)).astype(NUMPY_TYPES[t]))
                for _ in range(2))
        out = {name: np.zeros((N, N, batch), NUMPY_TYPES[r], order="F")
               for name in ("ttlc", "hand", "torch")}
        out["numpy"] = np.zeros((N, N, batch), np.float32, order="F")
        want = np.einsum("ikb,kjb->ijb", A.astype(np.float64), B.astype(np.float64))
        gemm = ttlc.compile(GEMM.format(t=t, r=r, n=N), target="cpu")["gemm"]
        # C^T = B^T A^T on the batch-first row-major views (NumPy's and torch's layout)
        A32, B32 = (np.ascontiguousarray(x.T.astype(np.float32)) for x in (A, B))
        impls = {"ttlc": lambda: gemm(A, B, out["ttlc"], grid=(batch,)),
                 "hand": None,
                 "numpy": lambda: np.matmul(B32, A32, out=out["numpy"].T)}
        hands = {}
        for m, nt, k in HAND_TILES[:2] if self.quick else HAND_TILES:
            kernel = hand_kernel(t, r, m, nt, k)
            hands[f"{m}x{nt}x{k}"] = lambda kernel=kernel: kernel(A, B, out["hand"], grid=(batch,))
        # the fastest hand-written tiles here, each checked first
        for tiles, fn in hands.items():
            out["hand"][...] = np.nan
            fn()
            check(f"gemm16 {t}->{r} hand {tiles}", out["hand"], want, TOLERANCE[r])
        seconds = timed(hands, 1 if self.quick else 3, self.sample)
        hand_tiles = min(seconds, key=seconds.get)
        impls["hand"] = hands[hand_tiles]
        if self.torch is not None:
            torch = self.torch
            dt = {"bf16": torch.bfloat16, "f16": torch.float16}[t]
            tA, tB = (torch.from_numpy(x.T.copy().view(np.int16)).view(dt) for x in (A, B))
            tC = torch.empty((batch, N, N), dtype=dt)
            impls["torch"] = lambda: torch.bmm(tB, tA, out=tC)
        for name, fn in impls.items():
            if name in out and name != "torch":
                out[name][...] = np.nan
            fn()
            got = out[name] if name != "torch" else tC.float().numpy().T
            # torch's result is in the 16-bit type whatever r is
            tol = TOLERANCE[t if name == "torch" else ("f32" if name == "numpy" else r)]
            check(f"gemm16 {t}->{r} {name}", got, want, tol)
        seconds = timed(impls, self.repeat, self.sample)
        flops = 2.0 * N ** 3 * batch
        row, ratios = rated({"case": f"{t}->{r}", "shape": f"{N}x{N}x{N}", "batch": batch,
                             "path": mul_add_path(t), "hand_tiles": hand_tiles}, seconds, flops)
        self.rows.append(row)
        print(f"  {t:4s} -> {r:4s} {N}^3 b{batch}  ttlc {row['gflops']['ttlc']:7.1f} GFLOP/s "
              f"({row['path']})  {ratios}  (hand tiles {hand_tiles})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="small batches, few samples (a smoke test)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    opts = ap.parse_args()
    run = Run(opts)
    where = platform.processor() or platform.machine()
    print(f"16-bit gemm {N}^3 on {run.threads} threads ({where}) (other time / ttlc time):")
    for t, r in CASES:
        run.case(t, r)
    write_results(run, opts.out, "gemm16")
    return 0


if __name__ == "__main__":
    sys.exit(main())
