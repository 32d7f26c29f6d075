#!/usr/bin/env python3
"""Front-end benchmark (``make bench``): lexing/parsing, verification and printing speed.

Generates a large valid program (200 kernels of about 300 lines mixing constants,
arithmetic, loads/stores in parallel regions, subviews, BLAS instructions, for loops with
loop-carried values, if/else, coopmatrix tiles), checks it, and measures (median of
--runs runs):

* parse + verify (``ttlc.check``), the headline number, against a target of 20,000 lines/s;
* parse alone (``ttlc.parse``) and print alone (``str(program)``);
* start-up of ``python -m ttlc check`` on a tiny file.

It also asserts that the front end does not import numpy or llvmlite.  Results go to
benchmarks/results/frontend.json.  Exit status 1 when an assertion fails (not when a
target is missed: that is reported in the table).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

import ttlc  # noqa: E402

TARGET_LINES_PER_S = 20_000
HEAVY_MODULES = ("numpy", "llvmlite")

HEADER = """\
func @kernel{f}(%alpha: f32, %beta: f32, %A: memref<f32x64x64>, %B: memref<f32x64x64> {{alignment=64}},
        %C: memref<f32x64x64>, %V: memref<f32x64x?>, %n: index, %flag: bool,
        %G: group<memref<f32x64x64>x?>, %H: memref<f16x64x64>)
        attributes {{subgroup_size=16, work_group_size=[32,2]}} {{
    %gid = group_id.x : index
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c16 = constant 16 : index
    %c64 = constant 64 : index
    %zero = constant 0.0 : f32
    %one = constant 1.0 : f32
"""

BLOCKS = {
    "blas": """\
    ; collective BLAS on views
    %Ag{s} = load %G[%gid] : memref<f32x64x64>
    %sa{s} = subview %A[0:32,0:64] : memref<f32x32x64,strided<1,64>>
    %sc{s} = subview %C[0:32,0:64] : memref<f32x32x64,strided<1,64>>
    gemm %alpha, %sa{s}, %B, %beta, %sc{s}
    gemm.n.t %alpha, %Ag{s}, %B, %one, %C
    %col{s} = subview %C[0:64,{k}] : memref<f32x64>
    %b0{s} = subview %B[0:64,0] : memref<f32x64>
    gemv %alpha, %A, %b0{s}, %beta, %col{s}
    axpby.t %alpha, %B, %beta, %C
    %e{s} = expand %A[1->8x8] : memref<f32x64x8x8>
    %f{s} = fuse %e{s}[1,2] : memref<f32x64x64>
    %sz{s} = size %V[1] : index
    %a{s} = constant 1.5 : f32
    %b{s} = mul %a{s}, %alpha : f32
    %d{s} = add %b{s}, %beta : f32
    hadamard %d{s}, %A, %f{s}, %zero, %C
    ger %alpha, %col{s}, %b0{s}, %one, %C
""",
    "spmd": """\
    parallel {{
        %lid{s} = subgroup_local_id : i32
        %sgid{s} = subgroup_linear_id : i32
        %i{s} = cast %lid{s} : index
        %j{s} = cast %sgid{s} : index
        %v{s} = load %A[%i{s}, %j{s}] : f32
        %w{s} = load %B[%j{s}, %i{s}] : f32
        %x{s} = mul %v{s}, %w{s} : f32
        %y{s} = add %x{s}, %alpha : f32
        %z{s} = max %y{s}, %zero : f32
        store %z{s}, %C[%i{s}, %j{s}]
        %r{s}, %q{s} = for %k{s} = %c0, %c64, %c1 init(%acc{s} = %zero, %cnt{s} = %lid{s}) -> (f32, i32) {{
            %t{s} = load %A[%i{s}, %k{s}] : f32
            %u{s} = load %B[%k{s}, %j{s}] : f32
            %p{s} = mul %t{s}, %u{s} : f32
            %acc2{s} = add %acc{s}, %p{s} : f32
            %one32{s} = constant 1 : i32
            %cnt2{s} = add %cnt{s}, %one32{s} : i32
            yield (%acc2{s}, %cnt2{s})
        }}
        %pos{s} = greater_than %r{s}, %zero : bool
        %o{s} = if %pos{s} -> (f32) {{
            %ex{s} = exp %r{s} : f32
            yield (%ex{s})
        }} else {{
            %ng{s} = neg %r{s} : f32
            yield (%ng{s})
        }}
        %red{s} = subgroup_reduce_add %o{s} : f32
        store %red{s}, %C[%i{s}, %j{s}]
        barrier.global
    }}
""",
    "coop": """\
    foreach_tile (%ti{s}, %tj{s}) = (%c0, %c0), (%c64, %c64) as (%si{s}, %sj{s}) <= (32, 16) {{
        %acc0{s} = cooperative_matrix_construct %zero : coopmatrix<f32x32x16,matrix_acc>
        %acc{s} = for %kk{s} = %c0, %c64, %c16 init(%cc{s} = %acc0{s}) -> (coopmatrix<f32x32x16,matrix_acc>) {{
            %ma{s} = cooperative_matrix_load %H[%ti{s}, %kk{s}] : coopmatrix<f16x32x16,matrix_a>
            %mb{s} = cooperative_matrix_load.t %H[%kk{s}, %tj{s}] : coopmatrix<f16x16x16,matrix_b>
            %md{s} = cooperative_matrix_mul_add %ma{s}, %mb{s}, %cc{s} : coopmatrix<f32x32x16,matrix_acc>
            yield (%md{s})
        }}
        %scl{s} = cooperative_matrix_scale %alpha, %acc{s} : coopmatrix<f32x32x16,matrix_acc>
        %old{s} = cooperative_matrix_load %C[%ti{s}, %tj{s}] : coopmatrix<f32x32x16,matrix_acc>
        %sum{s} = add %scl{s}, %old{s} : coopmatrix<f32x32x16,matrix_acc>
        %el{s} = cooperative_matrix_extract %sum{s}[0] : f32
        %ins{s} = cooperative_matrix_insert %el{s}, %sum{s}[1] : coopmatrix<f32x32x16,matrix_acc>
        cooperative_matrix_store.rows_checked %ins{s}, %C[%ti{s}, %tj{s}]
    }}
""",
    "control": """\
    %cv{s} = subview %C[0:64,1] : memref<f32x64>
    for %it{s} = %c0, %n, %c1 {{
        %sv{s} = subview %V[0:64,%it{s}] : memref<f32x64>
        axpby %alpha, %sv{s}, %one, %cv{s}
    }} attributes {{unroll=2}}
    %m{s} = if %flag -> (f32) {{
        %h{s} = constant 0.5 : f32
        yield (%h{s})
    }} else {{
        yield (%alpha)
    }}
    %tile{s} = alloca : memref<f32x32x32,local>
    %st{s} = subview %A[0:32,0:32] : memref<f32x32x32,strided<1,64>>
    axpby %m{s}, %st{s}, %zero, %tile{s}
    gemm %one, %tile{s}, %st{s}, %zero, %tile{s}
    %cnt{s} = constant {k} : i64
    %cnt2{s} = shl %cnt{s}, %cnt{s} : i64
    %ok{s} = less_than %cnt2{s}, %cnt{s} : bool
    lifetime_stop %tile{s}
""",
}
ORDER = ("blas", "spmd", "coop", "control", "spmd", "blas", "coop", "spmd", "control", "spmd")


def make_program(functions: int = 200, blocks: int = 10) -> str:
    out = []
    for f in range(functions):
        parts = [HEADER.format(f=f)]
        for b in range(blocks):
            kind = ORDER[(b + f) % len(ORDER)]
            parts.append(BLOCKS[kind].format(s=f"_{b}", k=(b * 7 + f) % 64))
        parts.append("}\n")
        out.append("".join(parts))
    return "\n".join(out)


def timed(fn, runs: int):
    """Median wall-clock and CPU seconds of fn() over runs, each from a collected heap (as
    in a fresh process: the garbage of the previous run is not charged to the next)."""
    wall, cpu = [], []
    result = None
    for _ in range(runs):
        result = None
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu), result


def machine_speed() -> float:
    """Millions of simple interpreter loop iterations per CPU second (best of 5): to tell a
    slow front end from a busy or slow machine when comparing results."""
    best = float("inf")
    for _ in range(5):
        c0 = time.process_time()
        x = 0
        for i in range(1_000_000):
            x += i
        best = min(best, time.process_time() - c0)
    return 1.0 / best


def startup(runs: int) -> dict:
    """Median wall time of ``python -m ttlc check`` on a tiny file, and what it imports."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tiny.ir"
        path.write_text("func @tiny(%a: f32) {\n    %b = add %a, %a : f32\n}\n")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        cmd = [sys.executable, "-m", "ttlc", "check", str(path)]
        subprocess.run(cmd, env=env, check=True)  # warm the bytecode cache
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True)
            times.append(time.perf_counter() - t0)
        bare = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            bare.append(time.perf_counter() - t0)
        # -X importtime lists every module the command imports (on stderr)
        proc = subprocess.run([sys.executable, "-X", "importtime"] + cmd[1:], env=env,
                              capture_output=True, text=True, check=True)
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time:") and "|" in line}
        imported.discard("package")
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY_MODULES)
    ttlc_modules = sorted(m.strip() for m in imported if m.strip().startswith("ttlc"))
    return {"check_tiny_s": statistics.median(times), "python_bare_s": statistics.median(bare),
            "heavy_imports": heavy, "ttlc_modules": ttlc_modules}


def front_end_imports() -> list:
    """Heavy modules present after importing ttlc and running parse/check/print in-process."""
    code = ("import sys, ttlc\n"
            "p = ttlc.check('func @f(%a: f32) { %b = add %a, %a : f32 }')\n"
            "str(p)\n"
            f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY_MODULES!r})))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    return [m for m in out.split(",") if m]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--functions", type=int, default=200)
    ap.add_argument("--blocks", type=int, default=10, help="code blocks per function")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--startup-runs", type=int, default=10)
    ap.add_argument("--profile", action="store_true", help="cProfile one check + print")
    ap.add_argument("--out", default=str(HERE / "results" / "frontend.json"))
    args = ap.parse_args(argv)

    text = make_program(args.functions, args.blocks)
    lines = text.count("\n") + 1
    program = ttlc.check(text)  # must be valid
    printed = str(program)
    assert str(ttlc.check(printed)) == printed, "printing is not a fixed point on the benchmark"

    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        str(ttlc.check(text))
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0

    program = None
    speed_before = machine_speed()
    t_check, c_check, _ = timed(lambda: ttlc.check(text), args.runs)
    t_parse, c_parse, program = timed(lambda: ttlc.parse(text), args.runs)
    t_print, c_print, _ = timed(lambda: str(program), args.runs)
    t_verify, c_verify, _ = timed(lambda: ttlc.check(program), args.runs)
    speed = min(speed_before, machine_speed())
    st = startup(args.startup_runs)
    heavy_in_process = front_end_imports()

    rows = [
        ("parse + verify (ttlc.check)", t_check, c_check),
        ("parse (ttlc.parse)", t_parse, c_parse),
        ("verify (ttlc.check on IR)", t_verify, c_verify),
        ("print (str(program))", t_print, c_print),
    ]
    print(f"front-end benchmark: {args.functions} functions, {lines} lines, "
          f"{len(text) / 1e6:.2f} MB, median of {args.runs} runs "
          f"(Python {platform.python_version()}, {os.cpu_count()} CPUs)")
    print(f"machine speed: {speed:.1f} M loop iterations per CPU second (an idle modern x86 "
          "core does about 20-30; much less means a busy machine)")
    print()
    print(f"{'phase':<30}{'wall (s)':>10}{'lines/s':>12}{'cpu (s)':>10}{'lines/cpu-s':>13}")
    print("-" * 75)
    for name, t, c in rows:
        print(f"{name:<30}{t:>10.3f}{lines / t:>12,.0f}{c:>10.3f}{lines / c:>13,.0f}")
    print("-" * 75)
    rate = lines / t_check
    verdict = "meets" if rate >= TARGET_LINES_PER_S else "MISSES"
    print(f"parse + verify {rate:,.0f} lines/s (wall clock) {verdict} the target of "
          f"{TARGET_LINES_PER_S:,} lines/s")
    if rate < TARGET_LINES_PER_S <= lines / c_check:
        print(f"  (CPU time gives {lines / c_check:,.0f} lines/s: the machine is busy; "
              "rerun when it is idle)")
    print()
    print(f"start-up: python -m ttlc check tiny.ir  {st['check_tiny_s'] * 1000:7.1f} ms (median of "
          f"{args.startup_runs}; bare python -c pass {st['python_bare_s'] * 1000:.1f} ms)")
    print(f"          ttlc modules imported: {len(st['ttlc_modules'])}")
    heavy = sorted(set(st["heavy_imports"]) | set(heavy_in_process))
    ok = not heavy
    print(f"assert: the front end imports neither numpy nor llvmlite ... "
          f"{'ok' if ok else 'FAILED: ' + ', '.join(heavy)}")

    result = {
        "lines": lines, "bytes": len(text), "functions": args.functions, "runs": args.runs,
        "seconds": {"check": t_check, "parse": t_parse, "verify": t_verify, "print": t_print},
        "cpu_seconds": {"check": c_check, "parse": c_parse, "verify": c_verify, "print": c_print},
        "lines_per_s": {"check": lines / t_check, "parse": lines / t_parse,
                        "verify": lines / t_verify, "print": lines / t_print},
        "target_lines_per_s": TARGET_LINES_PER_S, "meets_target": rate >= TARGET_LINES_PER_S,
        "startup": st, "heavy_imports": heavy, "machine_mloops_per_s": speed, "python": platform.python_version(),
        "machine": platform.machine(), "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results written to {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
