#!/usr/bin/env python3
"""Check, print and run every example program; exits 1 if any example fails.

For each ``examples/*.ir``: ``ttlc.check(text)`` parses and verifies the program, the
canonical print (``str(program)``) is shown with the time taken, and the print is parsed
again to confirm it is a fixed point.  Then each kernel with a NumPy reference below runs

- on the reference interpreter over a small batch (the interpreter is slow), and
- compiled for target cpu over a realistic batch, timed (median of several launches, the
  first launch excluded) next to the same computation written with NumPy;

every result is compared with NumPy.  Then the flash-attention template
(``examples/flash_attention.template``) is specialised with the preprocessor for f16 and
bf16 at head dimensions 64 and 128, run on both targets and timed next to NumPy and, where
installed, PyTorch's ``scaled_dot_product_attention``.  ``make bench``
(benchmarks/suite.py) measures more kernels against NumPy, PyTorch and LIBXSMM.

    python examples/demo.py [--repeat N] [--scale S] [FILE.ir ...]
"""
from __future__ import annotations

import argparse
import statistics
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


def aligned(rng, shape, dtype, alignment=64):
    """A random Fortran-ordered array whose base address is a multiple of alignment."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    raw = np.empty(count * dtype.itemsize + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape, order="F")
    out[...] = rng.standard_normal(shape)
    return out


def batched(x):
    """A column-major (m, n, batch) array as NumPy's (batch, m, n) stack (a view)."""
    return np.moveaxis(x, -1, 0)


# Each case builds the arguments of one kernel for a batch and says how NumPy computes the
# same thing: ``numpy(args)`` returns {argument index: expected value} from the inputs
# (called before the kernel changes its outputs, and timed as NumPy's time).

def case_gemm_batched(rng, batch):
    A, B = fortran(rng, (64, 32, batch), np.float32), fortran(rng, (32, 48, batch), np.float32)
    C = fortran(rng, (64, 48, batch), np.float32)

    def numpy(args):
        alpha, A, B, beta, C = args
        return {4: alpha * np.matmul(batched(A), batched(B)) + beta * batched(C)}
    return [np.float32(1.5), A, B, np.float32(0.5), C], numpy, 2 * 64 * 48 * 32 * batch


def case_gemm_batched_group(rng, batch):
    # the group arguments promise alignment=64
    sizes = [(8 + k % 5, 4 + k % 3, 6 + k % 4) for k in range(batch)]  # m, k, n per entry
    A = [aligned(rng, (m, k), np.float64) for m, k, n in sizes]
    B = [aligned(rng, (n, k), np.float64) for m, k, n in sizes]
    C = [aligned(rng, (m, n), np.float64) for m, k, n in sizes]

    def numpy(args):
        alpha, A, B, beta, C = args
        return {4: [alpha * a @ b.T + beta * c for a, b, c in zip(A, B, C)]}
    return [2.0, A, B, -1.0, C], numpy, sum(2 * m * k * n for m, k, n in sizes)


def case_fused(rng, batch):
    A, B = fortran(rng, (32, 16, batch), np.float32), fortran(rng, (8, 16, batch), np.float32)
    C, D = fortran(rng, (8, 24, batch), np.float32), fortran(rng, (32, 24, batch), np.float32)

    def numpy(args):
        alpha, A, B, C, D = args
        T = np.matmul(batched(A), batched(B).transpose(0, 2, 1))
        return {4: batched(D) + alpha * np.matmul(T, batched(C))}
    return [np.float32(0.5), A, B, C, D], numpy, 2 * (32 * 8 * 16 + 32 * 24 * 8) * batch


def case_attention(rng, batch):
    Q, K, V = (fortran(rng, (n, 16, batch), np.float16) for n in (16, 64, 64))
    O = np.asfortranarray(np.zeros((16, 16, batch), np.float32))

    def numpy(args):
        q, k, v = (batched(x).astype(np.float32) for x in args[:3])
        s = np.matmul(q, k.transpose(0, 2, 1)) / 4.0
        p = np.exp(s - s.max(axis=2, keepdims=True))
        return {3: np.matmul(p, v) / p.sum(axis=2, keepdims=True)}
    return [Q, K, V, O], numpy, 4 * 16 * 64 * 16 * batch


def case_axpby_sum(rng, batch):
    A, x = fortran(rng, (32, 16, batch), np.float64), fortran(rng, (16, batch), np.float64)
    b = fortran(rng, (32,), np.float64)
    y, s, t = (np.asfortranarray(np.zeros(shape)) for shape in ((32, batch), (batch,), (16, batch)))
    total = np.zeros(())

    def numpy(args):
        alpha, A, x, b, y, s, t, total = args
        y_ref = np.einsum("ijb,jb->ib", A, x) + alpha * b[:, None]
        return {4: y_ref, 5: y_ref.sum(axis=0), 6: A.sum(axis=0), 7: total + y_ref.sum()}
    return [0.25, A, x, b, y, s, t, total], numpy, 2 * 32 * 16 * batch


#: kernel name -> (input builder returning (arguments, NumPy reference, flops),
#:                 batch on the interpreter, batch on target cpu, tolerance)
CASES = {
    "gemm_batched": (case_gemm_batched, 16, 8192, 1e-4),
    "gemm_batched_group": (case_gemm_batched_group, 16, 2000, 1e-4),
    "fused": (case_fused, 16, 20000, 1e-4),
    "attention": (case_attention, 8, 20000, 2e-2),
    "axpby_sum": (case_axpby_sum, 16, 100000, 1e-4),
}


def median_time(fn, repeat: int) -> float:
    """Median seconds of `repeat` calls after one untimed call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def max_error(args, expected) -> float:
    """The largest difference to NumPy, relative to the largest expected magnitude."""
    worst = 0.0
    for index, ref in expected.items():
        got = args[index]
        pairs = zip(got, ref) if isinstance(got, list) else [(got, ref)]
        for g, r in pairs:
            g = np.asarray(g, np.float64)
            g = batched(g) if g.ndim == np.ndim(r) and g.shape != np.shape(r) else g
            scale = max(1.0, float(np.abs(r).max()))
            worst = max(worst, float(np.abs(g - r).max()) / scale)
    return worst


def execute(program, repeat: int, scale: float) -> bool:
    """Run the kernels of a program that have a reference; compare and time them."""
    ok = True
    modules = {"interp": ttlc.compile(program, target="interp")}
    start = time.perf_counter()
    modules["cpu"] = ttlc.compile(program, target="cpu")
    compile_ms = 1e3 * (time.perf_counter() - start)
    hit = " (cache hit)" if getattr(modules["cpu"], "cache_hit", False) else ""
    print(f"-- compiled for cpu in {compile_ms:.0f} ms{hit}")
    for name in modules["cpu"]:
        if name not in CASES:
            continue
        build, interp_batch, cpu_batch, tolerance = CASES[name]
        for target, batch in (("interp", interp_batch), ("cpu", max(1, int(cpu_batch * scale)))):
            args, numpy, flops = build(np.random.default_rng(0), batch)
            expected = numpy(args)
            kernel = modules[target][name]
            start = time.perf_counter()
            kernel(*args, grid=(batch, 1, 1))
            first = time.perf_counter() - start
            worst = max_error(args, expected)
            status = "ok" if worst <= tolerance else "MISMATCH"
            ok = ok and status == "ok"
            line = f"-- @{name} on {target:6s} {batch:6d} work-groups: "
            if target == "interp":
                line += f"{1e3 * first:9.1f} ms, {flops / first / 1e9:7.3f} GFLOP/s"
            else:
                t_ttlc = median_time(lambda: kernel(*args, grid=(batch, 1, 1)), repeat)
                t_numpy = median_time(lambda: numpy(args), repeat)
                line += (f"{1e3 * t_ttlc:9.3f} ms, {flops / t_ttlc / 1e9:7.2f} GFLOP/s | NumPy "
                         f"{1e3 * t_numpy:9.3f} ms, {flops / t_numpy / 1e9:7.2f} GFLOP/s | "
                         f"{t_numpy / t_ttlc:5.2f}x NumPy")
            print(f"{line}; max relative error vs NumPy {worst:.1e} ({status})")
    return ok


def run(path: Path, repeat: int, scale: float) -> bool:
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
    try:
        ok = execute(program, repeat, scale)
    except ttlc.CompileError as e:
        print(f"== {path.name}: FAILED to compile for cpu", file=sys.stderr)
        print(e, file=sys.stderr)
        ok = False
    print()
    return ok


# ---- the flash-attention template -----------------------------------------------------
FLASH = [("f16", 64), ("f16", 128), ("bf16", 64), ("bf16", 128)]
#: (sequence length, heads, batch) on the interpreter and on target cpu
FLASH_SIZES = {"interp": (40, 2, 1), "cpu": (512, 4, 2)}


def flash_inputs(rng, dtype, headdim, n, heads, batch):
    """Q, K, V, O as d x N x H x B column-major arrays of the element type, and the scale."""
    import ml_dtypes

    np_dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    shape = (headdim, n, heads, batch)
    Q, K, V = (np.asfortranarray(rng.standard_normal(shape).astype(np_dtype)) for _ in range(3))
    return [Q, K, V, np.asfortranarray(np.zeros(shape, np_dtype)), np.float32(headdim ** -0.5)]


def flash_numpy(args):
    """softmax(Q^T K scale) V per head, in float32 with batched matmuls: (H, B, N, d) views."""
    Q, K, V, _, scale = args
    q, k, v = (np.ascontiguousarray(X.transpose(2, 3, 1, 0), dtype=np.float32) for X in (Q, K, V))
    s = np.matmul(q, k.transpose(0, 1, 3, 2)) * scale
    p = np.exp(s - s.max(axis=3, keepdims=True))
    out = np.matmul(p, v) / p.sum(axis=3, keepdims=True)
    return {3: out.transpose(3, 2, 0, 1)}


def flash_torch(args):
    """PyTorch's scaled_dot_product_attention on the same data, or None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    Q, K, V, _, scale = args
    q, k, v = (torch.from_numpy(np.ascontiguousarray(X.transpose(2, 3, 1, 0), np.float32))
               for X in (Q, K, V))
    torch_dtype = torch.float16 if Q.dtype == np.float16 else torch.bfloat16
    q, k, v = (x.to(torch_dtype) for x in (q, k, v))
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=float(scale))


def flash_attention(repeat: int, scale: float) -> bool:
    path = Path(__file__).resolve().parent / "flash_attention.template"
    text = path.read_text(encoding="utf-8")
    print(f"== {path.name}: the template specialised with defines={{dtype, headdim}}")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("-- (PyTorch is not installed: no scaled_dot_product_attention to compare with)")
    ok = True
    for dtype, headdim in FLASH:
        defines = {"dtype": dtype, "headdim": headdim}
        try:
            modules = {t: ttlc.compile(text, target=t, defines=defines) for t in FLASH_SIZES}
        except ttlc.CompileError as e:
            print(f"== {path.name} {defines}: FAILED to compile", file=sys.stderr)
            print(e, file=sys.stderr)
            return False
        for target, (n, heads, batch) in FLASH_SIZES.items():
            if target == "cpu":
                n = max(16, int(n * scale))
            args = flash_inputs(np.random.default_rng(0), dtype, headdim, n, heads, batch)
            kernel = modules[target]["flash_attention"]
            grid = ((n + 15) // 16, heads, batch)
            expected = flash_numpy(args)
            start = time.perf_counter()
            kernel(*args, grid=grid)
            first = time.perf_counter() - start
            got = np.asarray(args[3], np.float64)
            worst = float(np.abs(got - expected[3]).max() / np.abs(expected[3]).max())
            tolerance = 1e-2 if dtype == "f16" else 5e-2  # P and O rounded to the type
            status = "ok" if worst <= tolerance else "MISMATCH"
            ok = ok and status == "ok"
            flops = 4 * n * n * headdim * heads * batch
            line = f"-- {dtype} d={headdim:3d} on {target:6s} N={n} H={heads} B={batch}: "
            if target == "interp":
                line += f"{1e3 * first:9.1f} ms"
            else:
                t_ttlc = median_time(lambda: kernel(*args, grid=grid), repeat)
                t_numpy = median_time(lambda: flash_numpy(args), repeat)
                line += (f"{1e3 * t_ttlc:8.2f} ms, {flops / t_ttlc / 1e9:6.1f} GFLOP/s | NumPy "
                         f"{1e3 * t_numpy:8.2f} ms ({t_numpy / t_ttlc:4.1f}x)")
                sdpa = flash_torch(args)
                if sdpa is not None:
                    t_torch = median_time(sdpa, repeat)
                    line += f" | PyTorch sdpa {1e3 * t_torch:8.2f} ms ({t_torch / t_ttlc:4.1f}x)"
            print(f"{line}; max relative error vs NumPy {worst:.1e} ({status})")
    print()
    return ok


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="programs to run (default: examples/*.ir)")
    ap.add_argument("--repeat", type=int, default=7, help="timed launches per kernel (median)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the cpu batch sizes")
    opts = ap.parse_args(argv)
    here = Path(__file__).resolve().parent
    paths = opts.files or sorted(here.glob("*.ir"))
    if not paths:
        print("no examples found", file=sys.stderr)
        return 1
    failed = [p.name for p in paths if not run(p, max(1, opts.repeat), opts.scale)]
    if not opts.files:
        paths.append(Path("flash_attention.template"))
        if not flash_attention(max(1, opts.repeat), opts.scale):
            failed.append(paths[-1].name)
    print(f"{len(paths) - len(failed)} of {len(paths)} examples passed")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
