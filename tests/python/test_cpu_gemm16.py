"""The tiles of 16-bit gemm on the CPU (``linalg.unit_tiles``, ``cpu/mul_add.matrix_unit``).

Language reference, "GEMM" (bf16 and f16 operands into f32).  Tile shapes are read from the
lowered program of CPU models named through TTLC_CPU, in a fresh process each (the unit
comes from the CPU's features): AMX-BF16 (sapphirerapids) and AMX-FP16 (graniterapids), their
description forced, as this machine may not grant the tiles (compiled to objects and
inspected, not run); AVX512-BF16; and AVX512-FP16 without AMX-FP16, which has no f16 product
into f32 sums, so f16 keeps the FMA path (its code compiled, not run).  The AMX code runs
here against NumPy with its tile instructions emulated where the CPU has no AMX
(``amx_testing``).  Results on every target: test_interp_gemm16.py.
"""
from __future__ import annotations

import json

import pytest

from amx_testing import amx  # noqa: F401 (fixture)
from test_interp_gemm16 import rand, source
from ttlc.testing.cpu_model import run_for_cpu_model

pytest.importorskip("llvmlite")

# ---- the tiles on the CPU ----------------------------------------------------------------------
LOWER = """
import json, re, sys
from ttlc.api import check
from ttlc.backends.cpu import jit, module
from ttlc.backends.cpu.mul_add import matrix_unit
if sys.argv[1] == "amx":
    jit.amx_usable = lambda: True  # the description an AMX CPU gets (nothing runs)
out = {"unit": matrix_unit().name,
       "instructions": [[i.a, i.b, i.acc, i.m, i.n, i.k] for i in matrix_unit().instructions]}
for name, text in json.loads(sys.stdin.read()).items():
    art = module.Artifacts(check(text), False)
    shapes = set()
    for inst in art.lowered.functions[0].body.walk():
        if inst.opcode == "cooperative_matrix_mul_add":
            a, b = inst.slots["a"].type, inst.slots["b"].type
            shapes.add((a.rows, b.cols, a.cols))
    ir = art.optimized_ir()
    asm = jit.emit_assembly(art.optimized())
    # the K loop: the blocks of the assembly that hold the tile products
    loops = [blk for blk in re.split(r"\\n(?=\\.LBB)", asm) if re.search(r"\\ttdp", blk)]
    out[name] = {"tiles": sorted(shapes), "object": len(art.object_code()),
                 "products": {k: len(re.findall(r"\\t%s\\b" % k, asm))
                              for k in ("tdpbf16ps", "tdpfp16ps", "tileloadd", "tilezero")},
                 # the products of each block that has some (a K step each)
                 "step products": sorted({len(re.findall(r"\\ttdp", blk)) for blk in loops}),
                 "loop spills tiles": any(re.search(r"\\ttile(loadd|stored)[^\\n]*\\(%rsp", blk)
                                          for blk in loops),
                 "f32 fma": bool(re.search(r"@llvm\\.(fma|fmuladd)\\.v\\d+f32", ir)),
                 "f16 arithmetic": bool(re.search(
                     r"@llvm\\.(fma|fmuladd)\\.v\\d+f16|(fmul|fadd)[a-z ]* (<\\d+ x )?half", ir))}
print(json.dumps(out))
"""

KERNELS = {f"{ab}{M}x{N}x{K}": source(ab, "f32", "n", "n", M, N, K)
           for ab in ("bf16", "f16") for M, N, K in ((64, 64, 64), (16, 64, 16), (37, 21, 1))}
KERNELS["bf16 B^T"] = source("bf16", "f32", "n", "t", 64, 64, 64)
KERNELS["bf16100x70x50"] = source("bf16", "f32", "n", "n", 100, 70, 50)
KERNELS.update({f"{ab} run-time sizes": source(ab, "f32", "n", "n", "?", "?", "?")
                for ab in ("bf16", "f16")})


def _lowered(cpu: str, amx: bool = False) -> dict:
    """The CPU's unit and, for each kernel compiled (to an object, not run) in a fresh
    process for the CPU model ``cpu`` (TTLC_CPU): its tile products (m, n, k), whether
    its optimized LLVM IR has f32 FMAs and f16 arithmetic, and the object's size."""
    return run_for_cpu_model(cpu, LOWER, "amx" if amx else "", stdin=json.dumps(KERNELS))


def test_gemm16_tiles_on_amx():
    """AMX (16 x 16 x 32 products, four accumulator tiles): 2 x 2 blocks with K steps of 32
    (16 for K = 16), a row of four for M = 16, also for a B loaded transposed; no f16
    instruction."""
    got = _lowered("sapphirerapids", amx=True)
    assert got["unit"] == "AMX" and got["instructions"] == [["bf16", "bf16", "f32", 16, 16, 32]]
    assert got["bf1664x64x64"]["tiles"] == [[32, 32, 32]]
    assert got["bf1616x64x16"]["tiles"] == [[16, 64, 16]]
    # M = 37 (two 32-row tiles), N = 21 (a 32-column tile, checked), K = 1
    assert got["bf1637x21x1"]["tiles"] == [[32, 32, 1]]
    # B loaded transposed: the same whole tiles (its rows staged by gathers of pairs)
    assert got["bf16 B^T"]["tiles"] == [[32, 32, 32]]
    _four_products_per_step(got["bf16 B^T"], "tdpbf16ps")
    assert not got["bf16 B^T"]["loop spills tiles"]


def test_gemm16_tiles_with_avx512_bf16():
    """vdpbf16ps (16 rows x 1 column x a pair of k, 16 accumulator registers): 64 x 4
    tiles with K steps of 4 for 64^3 (4 x 4 registers), 16 x 16 with K steps of 16 for
    M = K = 16 (the A tile's 8 pairs of columns beside the 16 accumulators)."""
    got = _lowered("znver4")
    assert got["unit"] == "AVX512-BF16"
    assert got["instructions"] == [["bf16", "bf16", "f32", 16, 1, 2]]
    assert got["bf1664x64x64"]["tiles"] == [[64, 4, 4]]
    assert got["bf1616x64x16"]["tiles"] == [[16, 16, 16]]
    # M = 37, N = 21: tiles of at least 12 accumulators (``BUSY_BLOCKS``), the fewest
    # products and operands over all of C: 2 x 3 tiles of 32 x 7 (2 x 7 registers; 6 x 25
    # step costs against 6 x 28 for 32 x 8, 7 x 23 for 64 x 3, 6 x 30 for 16 x 14), one
    # edge (M) where 32 x 8 had two; K = 1: one (padded) pair
    assert got["bf1637x21x1"]["tiles"] == [[32, 7, 1]]
    # 100 x 70: 4 x 10 tiles of 32 x 7 (cost 1000) against 4 x 9 of 32 x 8 (1008) and 7 x 5
    # of 16 x 14 (1050)
    assert got["bf16100x70x50"]["tiles"] == [[32, 7, 4]]
    assert got["bf16 B^T"]["tiles"] == [[64, 4, 4]]
    # sizes known at run time: the tiles of 256 x 256, K steps of one pair; f16 (f32
    # FMAs) keeps the FMA path's tiles, K steps of one
    assert got["bf16 run-time sizes"]["tiles"] == [[64, 4, 2]]
    assert got["f16 run-time sizes"]["tiles"] == [[64, 4, 1]]


def test_gemm16_f16_with_avx512_fp16_uses_f32_fmas():
    """A CPU with AVX512-FP16 (sapphirerapids, named through TTLC_CPU; its AMX not granted
    here) has no instruction multiplying f16 into f32 sums: f16 gemm keeps the tiles of the
    FMA path, and its code, compiled (not run), has f32 FMAs and no f16 arithmetic."""
    got = _lowered("sapphirerapids")
    assert all(i[0] == "bf16" for i in got["instructions"])
    znver4 = _lowered("znver4")  # no AVX512-FP16: the same f16 tiles
    for name in KERNELS:
        if name.startswith("f16"):
            assert got[name]["tiles"] == znver4[name]["tiles"], name
            assert got[name]["f32 fma"] and not got[name]["f16 arithmetic"], name
            assert got[name]["object"] > 0, name


def test_gemm16_f16_on_amx_fp16():
    """AMX-FP16 (graniterapids: tdpfp16ps multiplies f16 pairs into f32 sums, as tdpbf16ps
    does bf16): f16 gets the tiles of bf16, 2 x 2 accumulator tiles of 16 x 16 with K steps
    of 32; the 64^3 kernel's machine code holds them in tile registers across the K loop
    (zeroed before it, four products per step, no tile spilled to the stack), with no f16
    arithmetic and no f32 FMA.  Compiled to an object, not run (no such CPU here)."""
    got = _lowered("graniterapids", amx=True)
    assert got["unit"] == "AMX"
    assert sorted(got["instructions"]) == [["bf16", "bf16", "f32", 16, 16, 32],
                                           ["f16", "f16", "f32", 16, 16, 32]]
    for ab, product in (("bf16", "tdpbf16ps"), ("f16", "tdpfp16ps")):
        k = got[f"{ab}64x64x64"]
        assert k["tiles"] == [[32, 32, 32]], ab
        _four_products_per_step(k, product)
        assert not k["loop spills tiles"], ab
        assert got[f"{ab}16x64x16"]["tiles"] == [[16, 64, 16]], ab
    f16 = got["f1664x64x64"]
    assert not f16["f32 fma"] and not f16["f16 arithmetic"]
    assert f16["products"]["tdpbf16ps"] == 0


def _four_products_per_step(k: dict, product: str) -> None:
    """Each K step of the kernel k runs four products on the 2 x 2 accumulator tiles,
    zeroed before the loop: one K loop, or one per value of the beta test where LLVM
    takes that test out of the tile loops (a copy of the loops for each)."""
    assert k["step products"] == [4], k
    assert k["products"][product] in (4, 8), k
    assert k["products"]["tilezero"] == k["products"][product], k


def test_gemm16_bf16_on_amx_keeps_tiles_in_registers():
    """sapphirerapids: the 64^3 bf16 kernel's K loop runs four tdpbf16ps on the 2 x 2
    accumulator tiles, which stay in tile registers (no tile spilled to the stack)."""
    got = _lowered("sapphirerapids", amx=True)["bf1664x64x64"]
    _four_products_per_step(got, "tdpbf16ps")
    assert got["products"]["tdpfp16ps"] == 0 and not got["loop spills tiles"]


# ---- results of the AMX code --------------------------------------------------------------------
@pytest.mark.parametrize("ab,c,ta,tb,M,N,K", [
    *[(ab, c, "n", "n", M, N, K) for ab, c in (("bf16", "f32"), ("bf16", "bf16"),
                                               ("f16", "f32"), ("f16", "f16"))
      for M, N, K in ((64, 64, 64), (37, 21, 19))],
    *[("bf16", "f32", ta, tb, M, N, K) for ta, tb in (("t", "n"), ("n", "t"), ("t", "t"))
      for M, N, K in ((64, 64, 64), (16, 5, 33))],
    ("f16", "f32", "t", "t", 16, 64, 16),
    # edges in every dimension, a K loop and its remainder (a product whose C is the
    # loop's result), transposed A with checked flags, 16-bit C, K = 1
    *[(ab, c, ta, tb, 100, 70, 50) for ab, c in (("bf16", "bf16"), ("f16", "f32"))
      for ta, tb in (("n", "n"), ("t", "n"), ("t", "t"))],
    ("bf16", "bf16", "t", "n", 37, 21, 19), ("f16", "f16", "t", "t", 37, 21, 1)])
@pytest.mark.parametrize("beta", [-2.0, 0.0])
def test_gemm16_on_amx_matches_numpy(amx, ab, c, ta, tb, M, N, K, beta):
    """gemm with 16-bit operands on AMX (bf16 and f16 products, real or emulated), beta
    known only at run time (C read, or not): the inputs are multiples of 1/8 (``rand``),
    so every f32 sum is exact and the result must equal NumPy's float64 product, rounded
    once for a 16-bit C."""
    import numpy as np

    import ttlc

    A = rand((M, K) if ta == "n" else (K, M), ab, 1)
    B = rand((K, N) if tb == "n" else (N, K), ab, 2)
    C = rand((M, N), c, 3)
    a = A.astype(np.float64).T if ta == "t" else A.astype(np.float64)
    b = B.astype(np.float64).T if tb == "t" else B.astype(np.float64)
    exact = 0.5 * (a @ b) + beta * C.astype(np.float64)
    text = source(ab, c, ta, tb, M, N, K)
    from ttlc.backends.cpu.module import Artifacts

    assert "tdp%sps" % ("bf16" if ab == "bf16" else "fp16") in Artifacts(
        ttlc.check(text), False).ir
    ttlc.compile(text, target="cpu")["k"](0.5, A, B, beta, C, grid=1)
    np.testing.assert_array_equal(C, exact.astype(C.dtype))


@pytest.mark.parametrize("ab,c,ta,tb,M,N,K", [("bf16", "bf16", "t", "n", 37, 21, 19),
                                              ("f16", "f32", "n", "n", 100, 70, 50)])
def test_gemm16_update_on_amx_is_column_by_column(amx, ab, c, ta, tb, M, N, K):
    """The update after the AMX products (alpha and beta at run time, C checked at the
    edges, converted to 16 bits) and the staging of a checked transposed A are done a
    column piece at a time (``columns.py``): no vector in the kernel's LLVM IR has more
    than 64 components (a 32 x 32 f32 tile as one vector has 1024)."""
    import re

    import ttlc
    from ttlc.backends.cpu.module import Artifacts

    ir = Artifacts(ttlc.check(source(ab, c, ta, tb, M, N, K)), False).ir
    assert "tdp%sps" % ("bf16" if ab == "bf16" else "fp16") in ir
    assert max(int(n) for n in re.findall(r"<(\d+) x ", ir)) <= 64


#: the instructions of an update and of conversions (the operands of ``_widest``)
_ELEMENTWISE = r"(?:fpext|fptrunc|fmul|fadd|fsub|trunc|zext|shl|lshr|select|icmp|fcmp)"


def _widest(ir: str) -> int:
    """Components of the widest vector an elementwise instruction of the LLVM IR ir
    works on."""
    import re

    return max(int(n) for n in re.findall(r"= %s[a-z ]* <(\d+) x " % _ELEMENTWISE, ir))


@pytest.mark.parametrize("ab,c,ta,tb,M,N,K", [
    ("f16", "f16", "n", "n", 37, 21, 1), ("bf16", "bf16", "t", "n", 16, 5, 33),
    ("bf16", "bf16", "n", "n", 37, 21, 19), ("f16", "f32", "t", "t", 100, 70, 50)])
def test_gemm16_update_on_vectors_is_column_by_column(ab, c, ta, tb, M, N, K):
    """Without AMX (the vector path of this CPU, or of TTLC_CPU), the update of a 16-bit
    gemm's tiles (alpha and beta at run time, C checked at the edges and converted from
    and to 16 bits) works a column at a time (``coop.by_columns``): no elementwise
    instruction of the kernel's LLVM IR has more than 64 components (a 64 x 3 tile of
    half as one vector has 192, which LLVM's instruction selection took apart slowly)."""
    import ttlc
    from ttlc.backends.cpu import jit
    from ttlc.backends.cpu.module import Artifacts

    if jit.amx_usable():
        pytest.skip("the CPU has AMX: test_gemm16_update_on_amx_is_column_by_column")
    assert _widest(Artifacts(ttlc.check(source(ab, c, ta, tb, M, N, K)), False).ir) <= 64


@pytest.mark.parametrize("ab,c,ta", [("bf16", "bf16", "t"), ("f16", "f32", "n")])
def test_gemm16_on_amx_with_sizes_known_at_run_time_matches_numpy(amx, ab, c, ta):
    """Sizes known only at run time: the K remainder is an ``if`` after the K loop, whose
    branches yield the product's result and the loop's, merged as buffers
    (``columns.merge``); equal to NumPy's product."""
    import re

    import numpy as np

    import ttlc

    M, N, K = 37, 21, 50
    text = source(ab, c, ta, "n", M, N, K)
    for size in (M, N, K):
        text = text.replace(f"x{size}x", "x?x").replace(f"x{size}>", "x?>")
    assert "x?x?>" in text and "37" not in text
    from ttlc.backends.cpu.module import Artifacts

    ir = Artifacts(ttlc.check(text), False).ir  # no vector of a whole tile
    assert max(int(n) for n in re.findall(r"<(\d+) x ", ir)) <= 64
    A, B, C = rand((M, K) if ta == "n" else (K, M), ab, 7), rand((K, N), ab, 8), rand((M, N), c, 9)
    a = A.astype(np.float64).T if ta == "t" else A.astype(np.float64)
    exact = 0.5 * (a @ B.astype(np.float64)) - 2.0 * C.astype(np.float64)
    ttlc.compile(text, target="cpu")["k"](0.5, A, B, -2.0, C, grid=1)
    np.testing.assert_array_equal(C, exact.astype(C.dtype))


DYNAMIC = """func @k(%alpha: {ab}, %A: memref<{ab}x?x?,strided<1,?>>,
                      %B: memref<{ab}x?x?,strided<1,?>>, %beta: {c},
                      %C: memref<{c}x?x?,strided<1,?>>) {{
        gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C
    }}"""


@pytest.mark.parametrize("ab,c,ta,tb", [("bf16", "f32", "n", "n"), ("bf16", "bf16", "t", "t"),
                                        ("f16", "f16", "n", "t"), ("f16", "f32", "t", "n")])
def test_gemm16_on_amx_with_run_time_sizes_and_strides_matches_numpy(amx, ab, c, ta, tb):
    """One kernel, every size and column stride known only at run time (views of larger
    arrays): whole tiles with a K loop and no remainder, edges in M and N with a K
    remainder, K below one step (no K loop iteration), one row and column; the edge
    tiles are checked tiles alone (``lower_foreach``: a remainder tile is never full)
    and C is updated where it is read (``columns._stored_in_place``)."""
    _run_time_sizes_match_numpy(ab, c, ta, tb)


@pytest.mark.parametrize("ab,c,ta,tb", [("bf16", "f32", "n", "n"), ("bf16", "bf16", "n", "t"),
                                        ("f16", "f32", "n", "n"), ("f16", "f16", "t", "n")])
def test_gemm16_on_vectors_with_run_time_sizes_and_strides_matches_numpy(ab, c, ta, tb):
    """Without AMX (vdpbf16ps where the CPU has AVX512-BF16, else f32 FMAs): the K
    remainder of a tile of run-time K is an ``if`` whose branches give the accumulators
    as pieces, merged piece by piece (``mul_add.merged_pieces``): no phi of a whole tile
    in the LLVM IR (a 64 x 4 f32 tile as one vector: 256 components), and the results
    those of NumPy, for sizes with and without remainders in M, N and K."""
    import re

    import ttlc
    from ttlc.backends.cpu import jit
    from ttlc.backends.cpu.module import Artifacts

    if jit.amx_usable():
        pytest.skip("the CPU has AMX: test_gemm16_on_amx_with_run_time_sizes_and_strides...")
    ir = Artifacts(ttlc.check(DYNAMIC.format(ab=ab, c=c, ta=ta, tb=tb)), False).ir
    assert max(int(n) for n in re.findall(r"= phi\s+<(\d+) x ", ir)) <= 64
    _run_time_sizes_match_numpy(ab, c, ta, tb)


def _run_time_sizes_match_numpy(ab: str, c: str, ta: str, tb: str) -> None:
    """The gemm of ``DYNAMIC`` against NumPy: beta -2 and 0 at run time; inputs exact
    (``rand``), so the result equals NumPy's float64 product rounded once."""
    import numpy as np

    import ttlc

    k = ttlc.compile(DYNAMIC.format(ab=ab, c=c, ta=ta, tb=tb), target="cpu")["k"]
    for seed, (M, N, K) in enumerate(((64, 64, 96), (37, 21, 50), (100, 70, 19), (1, 1, 1))):
        ashape = (M, K) if ta == "n" else (K, M)
        bshape = (K, N) if tb == "n" else (N, K)
        # each operand the top-left block of a larger Fortran array: column stride above
        # its rows; C's own neighbours must keep their values
        A = rand((ashape[0] + 3, ashape[1]), ab, seed)[:ashape[0]]
        B = rand((bshape[0] + 5, bshape[1]), ab, seed + 10)[:bshape[0]]
        big = rand((M + 7, N + 1), c, seed + 20)
        before = big.copy()
        C = big[:M, :N]
        a = A.astype(np.float64).T if ta == "t" else A.astype(np.float64)
        bm = B.astype(np.float64).T if tb == "t" else B.astype(np.float64)
        for beta in (-2.0, 0.0):
            exact = 0.5 * (a @ bm) + beta * C.astype(np.float64)
            k(0.5, A, B, beta, C, grid=1)
            np.testing.assert_array_equal(C, exact.astype(C.dtype), err_msg=f"{M}x{N}x{K}")
        big[:M, :N] = before[:M, :N]
        np.testing.assert_array_equal(big, before)


@pytest.mark.parametrize("ta", ["n", "t"])
def test_gemm16_on_amx_in_checked_mode_matches_numpy(amx, ta):
    """Checked code keeps coop.py's checked accesses (no ``Place``): the AMX products'
    results leave their buffers as vectors there, and agree with NumPy."""
    import numpy as np

    import ttlc

    M, N, K = 37, 21, 19
    A = rand((M, K) if ta == "n" else (K, M), "bf16", 4)
    B, C = rand((K, N), "bf16", 5), rand((M, N), "bf16", 6)
    a = A.astype(np.float64).T if ta == "t" else A.astype(np.float64)
    exact = 0.5 * (a @ B.astype(np.float64)) - 2.0 * C.astype(np.float64)
    text = source("bf16", "bf16", ta, "n", M, N, K)
    from ttlc.backends.cpu.module import Artifacts

    assert "tdpbf16ps" in Artifacts(ttlc.check(text), True).ir
    ttlc.compile(text, target="cpu", checked=True)["k"](0.5, A, B, -2.0, C, grid=1)
    np.testing.assert_array_equal(C, exact.astype(C.dtype))


@pytest.mark.parametrize("ab,c", [("bf16", "bf16"), ("f16", "f16"), ("bf16", "f32")])
def test_gemm16_batched_result_from_tiles(amx, ab, c):
    """One gemm per batch member with alpha 1 and beta 0 (the README's batched form): the
    accumulator tiles are stored straight into C after the K loop, converted to a 16-bit
    C column by column (``amx.TileResult``); equal to NumPy's product rounded once."""
    import numpy as np

    import ttlc
    from ttlc.backends.cpu.module import Artifacts

    text = """func @k(%A: memref<{t}x32x64x?>, %B: memref<{t}x64x32x?>, %C: memref<{r}x32x32x?>) {{
        %i = group_id.x : index
        %a = subview %A[0:32,0:64,%i] : memref<{t}x32x64>
        %b = subview %B[0:64,0:32,%i] : memref<{t}x64x32>
        %c = subview %C[0:32,0:32,%i] : memref<{r}x32x32>
        %one = constant 1.0 : {t}
        %zero = constant 0.0 : {t}
        gemm %one, %a, %b, %zero, %c
    }}""".format(t=ab, r=c)
    ir = Artifacts(ttlc.check(text), False).ir
    assert "tilestored64" in ir and "tdp" in ir
    assert "<1024 x" not in ir  # no vector of a whole 32 x 32 tile
    A, B, C = rand((32, 64, 3), ab, 4), rand((64, 32, 3), ab, 5), rand((32, 32, 3), c, 6)
    ttlc.compile(text, target="cpu")["k"](A, B, C, grid=(3, 1, 1))
    exact = np.einsum("mkb,knb->mnb", A.astype(np.float64), B.astype(np.float64))
    np.testing.assert_array_equal(C, exact.astype(C.dtype))


def test_if_of_a_16bit_kernels_matrix_and_a_scalar():
    """Language reference, "if" (several results): a uniform ``if`` yielding an f32
    matrix of a 16-bit kernel, merged by groups of columns (``mul_add.merged_columns``,
    which joins the groups in the block after the ``if``), and a scalar after it: every
    phi stays at the block's start (``FunctionCodegen.phi_of``; the scalar's came after
    the join and LLVM rejected the function).  The matrix is used whole (column sums)."""
    import numpy as np

    import ttlc
    from interp_testing import DTYPES, farray

    text = """func @k(%A: memref<f32x64x4>, %H: memref<bf16x64x4>, %S: memref<f32x1x4>,
                      %x: memref<f32x1>, %c: i32)
            attributes{subgroup_size=16, work_group_size=[16,1]} {
        parallel {
            %z = constant 0 : index
            %zero = constant 0 : i32
            %cond = equal %c, %zero : bool
            %h = cooperative_matrix_load %H[%z,%z] : coopmatrix<bf16x64x4,matrix_acc>
            %m, %s = if %cond -> (coopmatrix<f32x64x4,matrix_acc>, f32) {
                %a = cooperative_matrix_load %A[%z,%z] : coopmatrix<f32x64x4,matrix_acc>
                %one = constant 1.0 : f32
                yield (%a, %one)
            } else {
                %b = cast %h : coopmatrix<f32x64x4,matrix_acc>
                %two = constant 2.0 : f32
                yield (%b, %two)
            }
            %r = cooperative_matrix_reduce_add.column %m : coopmatrix<f32x1x4,matrix_acc>
            cooperative_matrix_store %r, %S[%z,%z]
            store %s, %x[%z]
        }
    }"""
    k = ttlc.compile(text, target="cpu")["k"]
    A = rand((64, 4), "f32", 1)
    H = rand((64, 4), "bf16", 2)
    for c, src, scalar in ((0, A, 1.0), (1, H, 2.0)):
        S = farray(np.full((1, 4), np.nan), DTYPES["f32"])
        x = farray(np.full((1,), np.nan), DTYPES["f32"])
        k(A, H, S, x, c, grid=1)
        np.testing.assert_array_equal(S[0], src.astype(np.float64).sum(axis=0))
        assert x[0] == scalar
