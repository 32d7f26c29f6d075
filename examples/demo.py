#!/usr/bin/env python3
"""Check, print and run every example program; exits 1 if any example fails.

For each ``examples/*.ir``: ``ttlc.check(text)`` parses and verifies the program, the
canonical print (``str(program)``) is shown with the time taken, and the print is parsed
again to confirm it is a fixed point.  Then each kernel with a NumPy reference below runs
on the reference interpreter over a batch of work-groups; its results are compared with
NumPy and the times of both are shown.

    python examples/demo.py [FILE.ir ...]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

try:
    import ttlc
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import ttlc


def fortran(rng, shape, dtype):
    return np.asfortranarray(rng.standard_normal(shape).astype(dtype))


def case_gemm_batched(rng, batch):
    A, B = fortran(rng, (64, 32, batch), np.float32), fortran(rng, (32, 48, batch), np.float32)
    C = fortran(rng, (64, 48, batch), np.float32)
    alpha, beta = np.float32(1.5), np.float32(0.5)
    ref = alpha * np.einsum("ikb,kjb->ijb", A, B) + beta * C
    return [alpha, A, B, beta, C], {4: ref}, 2 * 64 * 48 * 32 * batch


def aligned(rng, shape, dtype, alignment=64):
    """A random Fortran-ordered array whose base address is a multiple of alignment."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    raw = np.empty(count * dtype.itemsize + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape, order="F")
    out[...] = rng.standard_normal(shape)
    return out


def case_gemm_batched_group(rng, batch):
    # the group arguments promise alignment=64
    sizes = [(8 + k % 5, 4 + k % 3, 6 + k % 4) for k in range(batch)]  # m, k, n per entry
    A = [aligned(rng, (m, k), np.float64) for m, k, n in sizes]
    B = [aligned(rng, (n, k), np.float64) for m, k, n in sizes]
    C = [aligned(rng, (m, n), np.float64) for m, k, n in sizes]
    ref = [2.0 * a @ b.T - c for a, b, c in zip(A, B, C)]
    return [2.0, A, B, -1.0, C], {4: ref}, sum(2 * m * k * n for m, k, n in sizes)


def case_fused(rng, batch):
    A, B = fortran(rng, (32, 16, batch), np.float32), fortran(rng, (8, 16, batch), np.float32)
    C, D = fortran(rng, (8, 24, batch), np.float32), fortran(rng, (32, 24, batch), np.float32)
    alpha = np.float32(0.5)
    ref = D + alpha * np.einsum("ikb,jkb,jlb->ilb", A, B, C)
    return [alpha, A, B, C, D], {4: ref}, 2 * (32 * 8 * 16 + 32 * 24 * 8) * batch


def case_attention(rng, batch):
    Q, K, V = (fortran(rng, (n, 16, batch), np.float16) for n in (16, 64, 64))
    O = np.asfortranarray(np.zeros((16, 16, batch), np.float32))
    q, k, v = (x.astype(np.float32) for x in (Q, K, V))
    s = np.einsum("idb,jdb->ijb", q, k) / 4.0
    p = np.exp(s - s.max(axis=1, keepdims=True))
    ref = np.einsum("ijb,jdb->idb", p, v) / p.sum(axis=1, keepdims=True)
    return [Q, K, V, O], {3: ref}, 4 * 16 * 64 * 16 * batch


def case_axpby_sum(rng, batch):
    A, x = fortran(rng, (32, 16, batch), np.float64), fortran(rng, (16, batch), np.float64)
    b = fortran(rng, (32,), np.float64)
    y, s, t = (np.asfortranarray(np.zeros(shape)) for shape in ((32, batch), (batch,), (16, batch)))
    total = np.zeros(())
    y_ref = np.einsum("ijb,jb->ib", A, x) + 0.25 * b[:, None]
    refs = {4: y_ref, 5: y_ref.sum(axis=0), 6: A.sum(axis=0), 7: y_ref.sum()}
    return [0.25, A, x, b, y, s, t, total], refs, 2 * 32 * 16 * batch


#: kernel name -> input builder returning (arguments, {argument index: expected}, flops)
CASES = {"gemm_batched": case_gemm_batched, "gemm_batched_group": case_gemm_batched_group,
         "fused": case_fused, "attention": case_attention, "axpby_sum": case_axpby_sum}
BATCH = 64


def execute(program) -> bool:
    """Run the kernels of a program that have a reference; compare and time them."""
    ok = True
    module = ttlc.compile(program, target="interp")
    for name in module:
        if name not in CASES:
            continue
        rng = np.random.default_rng(0)
        args, expected, flops = CASES[name](rng, BATCH)
        start = time.perf_counter()
        module[name](*args, grid=(BATCH, 1, 1))
        elapsed = time.perf_counter() - start
        worst = 0.0
        for index, ref in expected.items():
            got = args[index]
            pairs = zip(got, ref) if isinstance(got, list) else [(got, ref)]
            for g, r in pairs:
                scale = max(1.0, float(np.abs(r).max()))
                worst = max(worst, float(np.abs(np.asarray(g, np.float64) - r).max()) / scale)
        tolerance = 2e-2 if name == "attention" else 1e-4
        status = "ok" if worst <= tolerance else "MISMATCH"
        ok = ok and status == "ok"
        print(f"-- run @{name} on interp, {BATCH} work-groups: {1e3 * elapsed:.1f} ms, "
              f"{flops / elapsed / 1e9:.3f} GFLOP/s; max relative error vs NumPy {worst:.1e} "
              f"({status})")
    return ok


def run(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    start = time.perf_counter()
    try:
        program = ttlc.check(text, filename=str(path))
    except ttlc.CompileError as e:
        print(f"== {path.name}: FAILED", file=sys.stderr)
        print(e, file=sys.stderr)
        return False
    checked = time.perf_counter()
    canonical = str(program)
    printed = time.perf_counter()
    again = str(ttlc.check(canonical, filename=f"{path.name} (canonical)"))
    if again != canonical:
        print(f"== {path.name}: FAILED: printing is not a fixed point", file=sys.stderr)
        return False
    names = ", ".join("@" + f.name for f in program.functions)
    print(f"== {path.name}: {names}")
    print(canonical, end="")
    print(f"-- parse+check {1e3 * (checked - start):.2f} ms, "
          f"print {1e3 * (printed - checked):.2f} ms")
    ok = execute(program)
    print()
    return ok


def main(argv) -> int:
    here = Path(__file__).resolve().parent
    paths = [Path(a) for a in argv] or sorted(here.glob("*.ir"))
    if not paths:
        print("no examples found", file=sys.stderr)
        return 1
    failed = [p.name for p in paths if not run(p)]
    print(f"{len(paths) - len(failed)} of {len(paths)} examples passed")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
