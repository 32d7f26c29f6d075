"""Batched small gemm on target cpu (spec: tensor-language.txt, gemm; one work-group per
matrix through group_id and subview, as benchmarks/suite.py runs it) against NumPy.

Covers the shapes of the benchmark (8x8x8, 16x8x8, 16x16x16, 32x32x32, 64x64x64) and
odd ones (7x5x3, 24x40x12), f32 and f64, every transpose pair, beta 0 with NaN in C
(C must not be read), beta 1 (C is read), one and several threads (a thread's chunk of
work-groups starts inside the grid), and grids of two and three dimensions (group ids
counted along the chunk).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ttlc
from ttlc.testing.cpu_model import host_runs, run_for_cpu_model
from ttlc.testing.kernels import chain_kernel

pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

SHAPES = [(8, 8, 8), (16, 8, 8), (16, 16, 16), (32, 32, 32), (64, 64, 64), (7, 5, 3),
          (24, 40, 12)]
DTYPES = {"f32": np.float32, "f64": np.float64}
TOL = {"f32": 1e-5, "f64": 1e-13}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ttlc-cache"))


def batched(t: str, M: int, N: int, K: int, ta: str, tb: str, beta: str) -> str:
    a = (M, K) if ta == "n" else (K, M)
    b = (K, N) if tb == "n" else (N, K)
    return f"""
func @gemm(%A: memref<{t}x{a[0]}x{a[1]}x?>, %B: memref<{t}x{b[0]}x{b[1]}x?>,
           %C: memref<{t}x{M}x{N}x?>) {{
    %k = group_id.x : index
    %a = subview %A[0:{a[0]},0:{a[1]},%k] : memref<{t}x{a[0]}x{a[1]}>
    %b = subview %B[0:{b[0]},0:{b[1]},%k] : memref<{t}x{b[0]}x{b[1]}>
    %c = subview %C[0:{M},0:{N},%k] : memref<{t}x{M}x{N}>
    %one = constant 1.0 : {t}
    %beta = constant {beta} : {t}
    gemm.{ta}.{tb} %one, %a, %b, %beta, %c
}}
"""


def operands(t, M, N, K, ta, tb, batch, seed):
    rng = np.random.default_rng(seed)
    dt = DTYPES[t]
    a = (M, K) if ta == "n" else (K, M)
    b = (K, N) if tb == "n" else (N, K)
    A = np.asfortranarray(rng.standard_normal(a + (batch,)).astype(dt))
    B = np.asfortranarray(rng.standard_normal(b + (batch,)).astype(dt))
    C = np.asfortranarray(rng.standard_normal((M, N, batch)).astype(dt))
    return A, B, C


def expected(A, B, C, ta, tb, beta):
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    if ta == "t":
        A64 = A64.transpose(1, 0, 2)
    if tb == "t":
        B64 = B64.transpose(1, 0, 2)
    out = np.einsum("ikb,kjb->ijb", A64, B64)
    return out if beta == 0 else out + beta * C.astype(np.float64)


@pytest.mark.parametrize("t", sorted(DTYPES))
@pytest.mark.parametrize("M,N,K", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("ta,tb", [("n", "n"), ("t", "n"), ("n", "t"), ("t", "t")],
                         ids=["nn", "tn", "nt", "tt"])
def test_batched_gemm_beta0_never_reads_c(t, M, N, K, ta, tb, monkeypatch):
    monkeypatch.setenv("TTLC_NUM_THREADS", "3")
    batch = 7
    kernel = ttlc.compile(batched(t, M, N, K, ta, tb, "0.0"), target="cpu")["gemm"]
    A, B, C = operands(t, M, N, K, ta, tb, batch, seed=M * 100 + N + K)
    want = expected(A, B, C, ta, tb, 0)
    C[...] = np.nan
    kernel(A, B, C, grid=(batch,))
    assert not np.isnan(C).any()
    np.testing.assert_allclose(C, want, rtol=TOL[t], atol=TOL[t] * np.abs(want).max())


@pytest.mark.parametrize("t", sorted(DTYPES))
@pytest.mark.parametrize("M,N,K", [(16, 8, 8), (7, 5, 3), (64, 64, 64)],
                         ids=["16x8x8", "7x5x3", "64x64x64"])
@pytest.mark.parametrize("threads", ["1", "2", "5"])
def test_batched_gemm_beta1_reads_c(t, M, N, K, threads, monkeypatch):
    monkeypatch.setenv("TTLC_NUM_THREADS", threads)
    batch = 11
    kernel = ttlc.compile(batched(t, M, N, K, "n", "n", "1.0"), target="cpu")["gemm"]
    A, B, C = operands(t, M, N, K, "n", "n", batch, seed=3)
    want = expected(A, B, C, "n", "n", 1.0)
    kernel(A, B, C, grid=(batch,))
    np.testing.assert_allclose(C, want, rtol=TOL[t], atol=TOL[t] * np.abs(want).max())


GRID_IDS = """
func @ids(%O: memref<i64x3x?>) {
    %gx = group_id.x : index
    %gy = group_id.y : index
    %gz = group_id.z : index
    %nx = num_groups.x : index
    %ny = num_groups.y : index
    %t1 = mul %gz, %ny : index
    %t2 = add %t1, %gy : index
    %t3 = mul %t2, %nx : index
    %g = add %t3, %gx : index
    %x = cast %gx : i64
    %y = cast %gy : i64
    %z = cast %gz : i64
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    store %x, %O[%c0, %g]
    store %y, %O[%c1, %g]
    store %z, %O[%c2, %g]
}
"""


@pytest.mark.parametrize("grid", [(5, 1, 1), (3, 4, 1), (2, 3, 4), (1, 1, 6), (4, 1, 3)],
                         ids=lambda g: "x".join(map(str, g)))
@pytest.mark.parametrize("threads", ["1", "2", "5"])
def test_group_ids_of_every_chunk(grid, threads, monkeypatch):
    """Each work-group sees its own (x, y, z), also where a thread's chunk of the grid
    starts inside a row or plane (the ids are counted along the chunk)."""
    monkeypatch.setenv("TTLC_NUM_THREADS", threads)
    nx, ny, nz = grid
    O = np.asfortranarray(np.full((3, nx * ny * nz), -1, np.int64))
    ttlc.compile(GRID_IDS, target="cpu")["ids"](O, grid=grid)
    g = np.arange(nx * ny * nz)
    want = np.stack([g % nx, (g // nx) % ny, g // (nx * ny)])
    np.testing.assert_array_equal(O, want)


DYNAMIC = """
func @gemm(%alpha: {t}, %A: memref<{t}x?x?,strided<1,?>>, %B: memref<{t}x?x?,strided<1,?>>,
           %beta: {t}, %C: memref<{t}x?x?,strided<1,?>>) attributes{{subgroup_size={s}, work_group_size=[{s},1]}} {{
    gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C
}}
"""


VIEW_CASES = [("n", "n", False), ("t", "n", False), ("n", "t", False), ("t", "t", False),
              ("t", "n", True)]


@pytest.mark.parametrize("t,s", [("f32", 16), ("f64", 8)])
@pytest.mark.parametrize("ta,tb,checked", VIEW_CASES,
                         ids=[f"{a}{b}{'-checked' if c else ''}" for a, b, c in VIEW_CASES])
@pytest.mark.parametrize("M,N,K", [(16, 16, 16), (37, 21, 19)], ids=["16x16x16", "37x21x19"])
def test_one_subgroup_gemm_on_strided_views(t, s, ta, tb, checked, M, N, K):
    """A work-group of one subgroup (tile origins in registers of their own) on views
    whose column strides are only known at run time; alpha and beta arguments."""
    rng = np.random.default_rng(M + N + K)
    dt = DTYPES[t]
    a = (M, K) if ta == "n" else (K, M)
    b = (K, N) if tb == "n" else (N, K)

    def view(rows, cols):  # the first rows of a taller column-major array
        full = np.asfortranarray(rng.standard_normal((rows + 3, cols)).astype(dt))
        return full, full[:rows]
    (_, A), (_, B), (Cf, C) = view(*a), view(*b), view(M, N)
    below = Cf[M:].copy()
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    want = 2.0 * ((A64.T if ta == "t" else A64) @ (B64.T if tb == "t" else B64)) \
        + 0.5 * C.astype(np.float64)
    kernel = ttlc.compile(DYNAMIC.format(t=t, s=s, ta=ta, tb=tb), target="cpu",
                          checked=checked)["gemm"]
    kernel(2.0, A, B, 0.5, C)
    np.testing.assert_allclose(C, want, rtol=TOL[t], atol=TOL[t] * np.abs(want).max())
    assert np.array_equal(Cf[M:], below)  # rows beyond the view untouched


#: shapes of applications (a DG code's 9 quantities; M, N, K not powers of two): the
#: remainders of M, N and K get tiles of their own (passes/linalg/tiles.py, row_pieces);
#: 100x100x100: f32 tiles of 64 rows over an A beyond L1 (tiles.STREAM_ROW_BYTES), then 32
#: and the last 4 rows checked; 2x85x12, 6x40x30, and one row of f32 K 7 and f64 K 3:
#: subgroups of one ymm register's lanes with AVX-512 (target.config.narrow_lanes)
APP_SHAPES = [(35, 9, 35), (56, 9, 56), (9, 9, 56), (84, 9, 84), (10, 9, 10), (20, 9, 20),
              (120, 9, 120), (1, 1, 1), (17, 13, 11), (3, 100, 5), (100, 100, 100),
              (2, 85, 12), (6, 40, 30), (1, 40, 7), (1, 40, 3)]

SHARED = """
func @gemm(%A: memref<{t}x{M}x{K}>, %B: memref<{t}x{K}x{N}x?>, %C: memref<{t}x{M}x{N}x?>) {{
    %i = group_id.x : index
    %b = subview %B[0:{K},0:{N},%i] : memref<{t}x{K}x{N}>
    %c = subview %C[0:{M},0:{N},%i] : memref<{t}x{M}x{N}>
    %alpha = constant 1.5 : {t}
    %beta = constant {beta} : {t}
    gemm %alpha, %A, %b, %beta, %c
}}
"""


@pytest.mark.parametrize("t", sorted(DTYPES))
@pytest.mark.parametrize("M,N,K", APP_SHAPES, ids=["x".join(map(str, s)) for s in APP_SHAPES])
def test_application_shapes_batched_and_shared(t, M, N, K):
    """Every operand batched (beta 0, C never read), and A shared by all members (beta 1,
    alpha 1.5), default attributes, against NumPy."""
    batch = 5
    A, B, C = operands(t, M, N, K, "n", "n", batch, seed=M + 7 * N + 31 * K)
    want = expected(A, B, C, "n", "n", 0)
    out = np.full_like(C, np.nan)
    ttlc.compile(batched(t, M, N, K, "n", "n", "0.0"), target="cpu")["gemm"](
        A, B, out, grid=(batch,))
    np.testing.assert_allclose(out, want, rtol=TOL[t], atol=TOL[t] * np.abs(want).max())
    shared = np.asfortranarray(A[:, :, 0])
    want = 1.5 * np.einsum("ik,kjb->ijb", shared.astype(np.float64), B.astype(np.float64)) \
        + C.astype(np.float64)
    ttlc.compile(SHARED.format(t=t, M=M, N=N, K=K, beta="1.0"), target="cpu")["gemm"](
        shared, B, C, grid=(batch,))
    np.testing.assert_allclose(C, want, rtol=TOL[t], atol=TOL[t] * np.abs(want).max())


@pytest.mark.parametrize("t", sorted(DTYPES))
def test_chain_through_local_memory(t):
    """D_i = A B_i C_i (56x56, 56x9, 9x9) through a local temporary, against NumPy: the
    kernel benchmarks/small_gemm.py times."""
    m, k, n, p, batch = 56, 56, 9, 9, 4
    rng = np.random.default_rng(11)
    A = np.asfortranarray(rng.standard_normal((m, k)).astype(DTYPES[t]))
    B = np.asfortranarray(rng.standard_normal((k, n, batch)).astype(DTYPES[t]))
    C = np.asfortranarray(rng.standard_normal((n, p, batch)).astype(DTYPES[t]))
    D = np.asfortranarray(np.full((m, p, batch), np.nan, DTYPES[t]))
    ttlc.compile(chain_kernel(t, m, k, n, p), target="cpu")["chain"](
        A, B, C, D, grid=(batch,))
    want = np.einsum("ik,kjb,jlb->ilb", A.astype(np.float64), B.astype(np.float64),
                     C.astype(np.float64))
    np.testing.assert_allclose(D, want, rtol=10 * TOL[t], atol=10 * TOL[t] * np.abs(want).max())


#: run in a fresh process for TTLC_CPU=x86-64-v3: each application shape, f32 and f64,
#: against NumPy; prints the subgroup size and the tiles (rows, columns) of each kernel
AVX2_RUN = """
import json, sys
import numpy as np
import ttlc
from ttlc.api import check
from ttlc.backends.cpu import module
sys.path.insert(0, sys.argv[1])
from test_cpu_gemm_batched import APP_SHAPES, DTYPES, TOL, batched, expected, operands
out = {}
for t in sorted(DTYPES):
    for M, N, K in APP_SHAPES:
        text = batched(t, M, N, K, "n", "n", "0.0")
        A, B, C = operands(t, M, N, K, "n", "n", 3, seed=M + N + K)
        got = np.full_like(C, np.nan)
        ttlc.compile(text, target="cpu")["gemm"](A, B, got, grid=(3,))
        want = expected(A, B, C, "n", "n", 0)
        np.testing.assert_allclose(got, want, rtol=TOL[t], atol=TOL[t] * np.abs(want).max())
        func = module.Artifacts(check(text), False).lowered.functions[0]
        tiles = sorted({(i.results[0].type.rows, i.results[0].type.cols)
                        for i in func.body.walk() if i.opcode == "cooperative_matrix_mul_add"})
        out[f"{t} {M}x{N}x{K}"] = {"subgroup": func.subgroup_size, "tiles": tiles}
print(json.dumps(out))
"""


def test_application_shapes_without_avx512():
    """Code for a CPU without AVX-512 (TTLC_CPU=x86-64-v3, in a fresh process): every
    application shape against NumPy, with subgroups of one ymm register (8 f32, 4 f64
    lanes) and tiles chosen register by register (f32 56x9x56: 32x3, then the last 24
    rows in one partial 32x3 tile, three ymm; the 32x3 tiles take A's column one register
    at a time)."""
    if not host_runs("x86-64-v3"):
        pytest.skip("this machine cannot run code for x86-64-v3")
    got = run_for_cpu_model("x86-64-v3", AVX2_RUN, str(Path(__file__).parent))
    assert {k: v["subgroup"] for k, v in got.items()} == \
        {f"{t} {M}x{N}x{K}": 8 if t == "f32" else 4 for t in DTYPES for M, N, K in APP_SHAPES}
    assert got["f32 56x9x56"]["tiles"] == [[32, 3]]


#: run in a fresh process for TTLC_CPU=x86-64-v3: for each kernel of sys.argv[2] (names
#: below), whether its K loops of StreamedA tiles are kept loops (llvm.loop.unroll.disable),
#: its vector stack accesses (spills) in the assembly, and its result against NumPy
AVX2_K_LOOPS = """
import json, sys
import numpy as np
import ttlc
from ttlc.backends.cpu import jit
from ttlc.backends.cpu.module import Artifacts
sys.path.insert(0, sys.argv[1])
from small_gemm import GEMM_SUBVIEW
from ttlc.testing.cpu_model import vector_stack_accesses
from ttlc.testing.kernels import chain_kernel, member_kernel
cases = {}
for t, dt in (("f32", np.float32), ("f64", np.float64)):
    cases[f"chain {t}"] = ("chain", dt, chain_kernel(t, 56, 56, 9, 9),
                           ((56, 56), (56, 9, 3), (9, 9, 3)), (56, 9, 3), "ik,kjb,jlb->ilb")
    for M, N, K in ((56, 9, 9), (2, 85, 12), (8, 85, 12), (4, 51, 29), (124, 11, 94),
                    (76, 6, 118), (88, 23, 62), (9, 9, 56), (12, 13, 56), (20, 9, 20),
                    (100, 100, 100)):
        cases[f"gemm {t} {M}x{N}x{K}"] = ("gemm", dt, GEMM_SUBVIEW.format(t=t, M=M, N=N, K=K),
                                          ((M, K, 3), (K, N, 3)), (M, N, 3), "ikb,kjb->ijb")
    for M, N, K in ((8, 17, 79),):  # B shared by the members
        operands = [("A", (M, K), False), ("B", (K, N), True), ("C", (M, N), False)]
        cases[f"gemm-b {t} {M}x{N}x{K}"] = ("member", dt, member_kernel(t, "gemm", operands),
                                            ((M, K, 3), (K, N)), (M, N, 3), "ikb,kj->ijb")
out = {}
rng = np.random.default_rng(5)
for case in json.loads(sys.argv[2]):
    entry, dt, text, shapes, result, spec = cases[case]
    art = Artifacts(ttlc.check(text), checked=False)
    spills = vector_stack_accesses(jit.emit_assembly(art.optimized()))
    args = [np.asfortranarray(rng.standard_normal(s).astype(dt)) for s in shapes]
    got = np.full(result, np.nan, dt, order="F")
    ttlc.compile(text, target="cpu")[entry](*args, got, grid=(3,))
    want = np.einsum(spec, *[a.astype(np.float64) for a in args])
    out[case] = {"rolled": art.optimized_ir().count("llvm.loop.unroll.disable"),
                 "spills": spills,
                 "error": float(np.abs(got - want).max() / np.abs(want).max())}
print(json.dumps(out))
"""


def for_cpu_model(cpu: str, script: str, cases) -> dict:
    """What `script` prints (JSON) for `cases`, run in a fresh process for TTLC_CPU=`cpu`
    (sys.argv[1]: the benchmarks' directory, sys.argv[2]: the cases as JSON)."""
    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    return run_for_cpu_model(cpu, script, str(bench), json.dumps(cases))


def avx2_kernels(cases):
    """AVX2_K_LOOPS's findings for `cases` (TTLC_CPU=x86-64-v3, a fresh process), or a
    skip where this machine cannot run code for x86-64-v3."""
    if not host_runs("x86-64-v3"):
        pytest.skip("this machine cannot run code for x86-64-v3")
    got = for_cpu_model("x86-64-v3", AVX2_K_LOOPS, cases)
    assert sorted(got) == sorted(cases)
    for name, v in got.items():
        assert v["spills"] == [], (name, v["spills"][:5])
        assert v["error"] < TOL[name.split()[1]] * 10, (name, v["error"])
    return got


def test_avx2_k_loops_stay_loops_without_spills():
    """Code for a CPU without AVX-512 (TTLC_CPU=x86-64-v3, in a fresh process): the K loops
    of tiles that take A one register at a time (32x3 f32, 16x3 f64) are not unrolled by
    LLVM, which joined the registers of a fully unrolled K = 9 into whole columns, held
    all nine at once and spilled (36-41 vector stack accesses in each of these kernels);
    now none, and the results match NumPy."""
    got = avx2_kernels(["chain f32", "chain f64", "gemm f32 56x9x9", "gemm f64 56x9x9"])
    for name, v in got.items():
        assert v["rolled"] >= 1, name


def test_avx2_few_rows_without_spills():
    """Code for a CPU without AVX-512: gemm of 2-8 rows and many columns in one ymm
    register of rows, 13 columns with A's register (and its mask where rows are checked)
    and K steps of one, keeps its accumulators in registers (K steps of two spilled: 24
    vector stack accesses in the K loop of f64 2x85x12) and matches NumPy."""
    avx2_kernels([f"gemm {t} {s}" for t in ("f32", "f64")
                  for s in ("2x85x12", "8x85x12", "4x51x29")])


def test_avx2_tiles_of_two_lines_of_a_without_spills():
    """Code for a CPU without AVX-512: tiles of two cache lines of A's column per K step
    (f64 16x3, f32 32x3: four ymm by three columns, A taken a register at a time, with
    remainders of 8 and 4 rows; f64 100x100x100, each member's A larger than
    REREAD_A_BYTES: 16x3 and the last column and rows beside) keep their accumulators in
    registers and match NumPy."""
    avx2_kernels(["gemm f64 124x11x94", "gemm f64 76x6x118", "gemm f32 88x23x62",
                  "gemm f64 100x100x100"])


#: run in a fresh process for TTLC_CPU=skylake-avx512 (compiled, not run): the vector
#: stack accesses (spills) in the assembly of each batched gemm of sys.argv[2] (t, M, N, K)
AVX512_SPILLS = """
import json, sys
import ttlc
from ttlc.backends.cpu import jit
from ttlc.backends.cpu.module import Artifacts
from ttlc.testing.cpu_model import vector_stack_accesses
sys.path.insert(0, sys.argv[1])
from small_gemm import GEMM_SUBVIEW
out = {}
for t, M, N, K in json.loads(sys.argv[2]):
    art = Artifacts(ttlc.check(GEMM_SUBVIEW.format(t=t, M=M, N=N, K=K)), checked=False)
    out[f"{t} {M}x{N}x{K}"] = vector_stack_accesses(jit.emit_assembly(art.optimized()))
print(json.dumps(out))
"""


def test_avx512_one_pass_tiles_without_spills():
    """Code for a CPU with AVX-512 (TTLC_CPU=skylake-avx512, compiled in a fresh process):
    a tile of all of M and all of N beside one of A's columns (``tiles.one_pass``: f32
    35x9x35 and f64 20x9x20, 27 zmm of accumulators; f64 43x4x86, 24; f32 72x5x77, 25),
    and two zmm of rows by 8 and 7 columns (FEWEST_PASSES_COLUMNS: f32 25x15x60, f64
    12x15x60) keep their accumulators in registers: no vector stack access (the results:
    the tests of test_pass_linalg.py)."""
    cases = [["f32", 35, 9, 35], ["f64", 20, 9, 20], ["f64", 43, 4, 86], ["f32", 72, 5, 77],
             ["f32", 25, 15, 60], ["f64", 12, 15, 60]]
    got = for_cpu_model("skylake-avx512", AVX512_SPILLS, cases)
    assert sorted(got) == sorted(f"{t} {M}x{N}x{K}" for t, M, N, K in cases)
    for name, spills in got.items():
        assert spills == [], (name, spills[:5])


def test_avx2_partial_tiles_of_few_rows_without_spills():
    """Code for a CPU without AVX-512: all of M in one partial tile that computes only the
    registers of M's rows (f64 9 rows: three ymm, the last with one row; f64 12 rows:
    three whole ymm by 4 columns; f32 20 rows: three ymm, the last half) keeps its
    accumulators in registers and matches NumPy."""
    avx2_kernels(["gemm f64 9x9x56", "gemm f64 12x13x56", "gemm f32 20x9x20"])


def test_avx2_steps_of_two_column_by_column_without_spills():
    """Code for a CPU without AVX-512: a tile of one ymm of rows by 9 columns in K steps
    of two (f32 8x17x79 with B shared: 9 accumulators, two of A's registers, a broadcast)
    computes each column's two steps one after the other and keeps its accumulators in
    registers (step by step, LLVM kept each column's first sums apart and put three
    accumulators on the stack, in the K loop's chain: 0.71 of LIBXSMM's speed, 1.77
    without); f64 8x6 tiles in steps of one too.  Results match NumPy."""
    avx2_kernels(["gemm-b f32 8x17x79", "gemm-b f64 8x17x79"])


ONE_ROW = """
func @gemm(%alpha: {t}, %A: memref<{t}x{a},strided<1,?>>, %B: memref<{t}x{b}>, %beta: {t},
           %C: memref<{t}x1x{n},strided<1,?>>) {{
    gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C
}}
"""
#: (N, K, whether their sizes are static): K long enough for dot products (gemv.t of B),
#: K too short for them (a matmul of one row), run-time sizes
ONE_ROW_SHAPES = [(85, 12, True), (9, 56, True), (7, 3, True), (33, 20, False)]


@pytest.mark.parametrize("t", sorted(DTYPES))
@pytest.mark.parametrize("ta,tb", [("n", "n"), ("t", "n"), ("n", "t"), ("t", "t")],
                         ids=["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("N,K,static", ONE_ROW_SHAPES,
                         ids=[f"1x{n}x{k}{'' if s else '-dynamic'}" for n, k, s in ONE_ROW_SHAPES])
@pytest.mark.parametrize("checked", [False, True], ids=["", "checked"])
def test_one_row_gemm_on_row_views(t, ta, tb, N, K, static, checked):
    """gemm of one row (M = 1: lowered as a gemv of B, passes/linalg/matmul.py
    one_row_as_gemv) on rows of taller arrays (A's row and C's row strided), alpha and
    beta arguments, against NumPy; the rows beyond the views are untouched."""
    rng = np.random.default_rng(N + K)
    dt = DTYPES[t]
    a = (1, K) if ta == "n" else (K, 1)
    b = (K, N) if tb == "n" else (N, K)
    dims = (lambda *s: "x".join(str(x) if static else "?" for x in s))
    text = ONE_ROW.format(t=t, ta=ta, tb=tb, n=N if static else "?",
                          a=dims(*a) if ta == "t" else "1x" + dims(K),
                          b=dims(*b))
    Af = np.asfortranarray(rng.standard_normal((a[0] + 2, a[1])).astype(dt))
    Cf = np.asfortranarray(rng.standard_normal((3, N)).astype(dt))
    B = np.asfortranarray(rng.standard_normal(b).astype(dt))
    A, C = Af[1:1 + a[0]], Cf[1:2]
    rest = Cf.copy()
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    want = 2.0 * ((A64.T if ta == "t" else A64) @ (B64.T if tb == "t" else B64)) \
        - 0.5 * C.astype(np.float64)
    ttlc.compile(text, target="cpu", checked=checked)["gemm"](2.0, A, B, -0.5, C)
    np.testing.assert_allclose(C, want, rtol=TOL[t], atol=TOL[t] * np.abs(want).max())
    rest[1:2] = C
    assert np.array_equal(Cf, rest)  # rows 0 and 2 untouched
