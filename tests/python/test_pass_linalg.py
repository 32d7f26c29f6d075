"""lower-linalg: every BLAS instruction lowered to foreach_tile/foreach/parallel code gives
the interpreter's results for the original instruction.

Each case runs the original program on the interpreter (the reference semantics of the
collective instruction), then the program after lower-linalg (and after lower-linalg +
lower-foreach when that pass exists), unchecked and checked (checked mode reports
out-of-bounds accesses, races on local memory, non-uniform coopmatrix operands), and
compares the outputs with tolerances that allow reassociation only.  Inputs are small
multiples of 1/8 (or small integers), so most sums are exact anyway.

Covered: gemm (every transpose pair), gemv (both), ger, hadamard (vectors, matrices),
axpby (orders 0-2, both transposes), sum (vector and scalar results, both transposes),
cumsum (orders 1-3, every mode); static and dynamic shapes including sizes that are not
multiples of the tiles (5x7x3, 17x33x9, 1x1x1); f32, f64, c64, i32 and the mixed
f16/bf16 -> f32, i8 -> i32; alpha and beta constant or arguments (beta 0 with NaN in
the output); .atomic over several work-groups; work-groups [16,1] and [32,2] with
subgroup size 16.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import sys
from typing import Callable, List, Sequence

import numpy as np
import pytest

import ttlc
from ttlc.passes import PassContext, get_pass, run_passes
from ttlc.passes.linalg import choose_tiles
from ttlc.passes.linalg.tiles import (ACC_SHARE, FEW_COLUMN_TILES, FEWEST_PASSES_COLUMNS,
                                      FEWEST_PASSES_MIN_K, MIN_A_STEP_BYTES,
                                      ONE_PASS_MIN_REGISTERS, REREAD_A_BYTES,
                                      SPLIT_MAX_K, STREAM_A_BYTES,
                                      STREAM_ROW_BYTES, TALL_ACC_SHARE, TALL_LAST_COLUMNS,
                                      TALLER_MIN_COLUMNS,
                                      WHOLE_K_BUDGET, WHOLE_K_C_BYTES, WHOLE_K_HELD,
                                      WHOLE_K_LARGE_C,
                                      WHOLE_K_LARGE_C_YMM, WHOLE_K_MAX,
                                      WHOLE_K_TILES, Tiles, accumulator_bytes,
                                      computed_rows, k_steps, row_pieces, subgroup_registers)
from ttlc.testing.kernels import member_kernel
from ttlc.ir.types import SCALAR_TYPES
from ttlc.target import TARGETS, get_target

from interp_testing import DTYPES, EPS, farray

# ---- configurations -------------------------------------------------------------------------
#: (element type of the inputs, element type of the output)
TYPES = [("f32", "f32"), ("f64", "f64"), ("c64", "c64"), ("i32", "i32"),
         ("f16", "f32"), ("bf16", "f32"), ("i8", "i32")]
TYPE_IDS = [a if a == c else f"{a}-{c}" for a, c in TYPES]
ALPHA = {"f32": 1.5, "f64": -0.75, "c64": 1 + 2j, "i32": 3, "f16": 1.5, "bf16": 0.5, "i8": 2}
BETA = {"f32": -0.5, "f64": 2.0, "c64": 0.5 - 1j, "i32": -2}
WORK_GROUPS = [(16, 1), (32, 2)]
WG_IDS = ["wg16x1", "wg32x2"]
GEMM_SHAPES = [(5, 7, 3), (17, 33, 9), (1, 1, 1)]
#: the tile shapes of gemm, gemv and ger depend on the target: the interpreter's large
#: register budget gives one tile and no K loop for most sizes here, the CPU's small one
#: several tiles and K loops with remainders
MATMUL_TARGETS = ("interp", "cpu")
TRANSPOSES = [("n", "n"), ("n", "t"), ("t", "n"), ("t", "t")]


def _has_pass(name: str) -> bool:
    try:
        get_pass(name)
    except (KeyError, ImportError):
        return False
    return True


PIPELINES = [("lower-linalg",)]
if _has_pass("lower-foreach"):
    PIPELINES.append(("lower-linalg", "lower-foreach"))


# ---- helpers --------------------------------------------------------------------------------
def rand(shape, ty: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ty.startswith("i"):
        x = rng.integers(-9, 10, shape)
    elif ty.startswith("c"):
        x = rng.integers(-8, 9, shape) / 4 + 1j * rng.integers(-8, 9, shape) / 4
    else:
        x = rng.integers(-16, 17, shape) / 8
    return farray(x, DTYPES[ty])


def poison(x: np.ndarray) -> None:
    """Fill an output that must not be read: NaN (integers: a value that would show)."""
    x[...] = 12345 if x.dtype.kind in "iu" else np.nan


def mtype(ty: str, shape: Sequence[int], dynamic: bool) -> str:
    return f"memref<{ty}" + "".join("x?" if dynamic else f"x{s}" for s in shape) + ">"


def literal(value, ty: str) -> str:
    if ty.startswith("c"):
        value = complex(value)
        return f"[{value.real!r}, {value.imag!r}]"
    if ty.startswith("i"):
        return str(int(value))
    return repr(float(value))


def attributes(wg, sgs: int = 16) -> str:
    return f"attributes {{subgroup_size={sgs}, work_group_size=[{wg[0]},{wg[1]}]}}"


class Scalars:
    """alpha and beta of a kernel: function arguments or constants in the body.

    ``params`` are the parameter declarations, ``body`` defines the constants and
    ``args`` are the values passed at launch (for the arguments)."""

    def __init__(self, alpha, alpha_ty: str, beta, beta_ty: str, alpha_const: bool,
                 beta_const: bool):
        self.alpha, self.beta = alpha, beta
        self.params, self.body, self.args = [], [], []
        for name, value, ty, const in (("alpha", alpha, alpha_ty, alpha_const),
                                       ("beta", beta, beta_ty, beta_const)):
            if const:
                self.body.append(f"%{name} = constant {literal(value, ty)} : {ty}")
            else:
                self.params.append(f"%{name}: {ty}")
                self.args.append(value)


@functools.lru_cache(maxsize=None)
def lowered(src: str, pipeline: Sequence[str], target: str = "interp"):
    """The program after the passes, printed and parsed again (the text verifies)."""
    program = ttlc.check(src)
    run_passes(program, list(pipeline), PassContext(target=get_target(target)))
    return ttlc.check(str(program))


_COMPILED: dict = {}


def compiled(src, checked: bool):
    """A module for program text or a Program (kept alive by ``lowered``'s cache)."""
    key = (src if isinstance(src, str) else id(src), checked)
    if key not in _COMPILED:
        _COMPILED[key] = ttlc.compile(src, target="interp", checked=checked)
    return _COMPILED[key]


def close(got, expected, ty: str) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    if ty.startswith("i"):
        np.testing.assert_array_equal(got, expected)
        return
    wide = np.complex128 if ty.startswith("c") else np.float64
    g, e = got.astype(wide), expected.astype(wide)
    tol = 16 * EPS[ty]
    np.testing.assert_allclose(g, e, rtol=tol, atol=tol * max(1.0, np.abs(e).max(initial=0)),
                               equal_nan=True)


def compare(src: str, make_args: Callable[[], List], outs: Sequence[int], ty: str,
            grid=(1, 1, 1), targets: Sequence[str] = ("interp",)) -> None:
    """Run src and its lowerings (for each target's tile shapes) on fresh arguments; the
    outputs args[k] for k in outs agree."""
    expected = make_args()
    compiled(src, False)["k"](*expected, grid=grid)
    for pipeline, target in [(p, t) for p in PIPELINES for t in targets]:
        program = lowered(src, tuple(pipeline), target)
        for checked in (False, True):
            got = make_args()
            compiled(program, checked)["k"](*got, grid=grid)
            for k in outs:
                close(got[k], expected[k], ty)


def kernel(params: Sequence[str], body: Sequence[str], wg=(16, 1), sgs: int = 16) -> str:
    lines = "\n".join("    " + x for x in body)
    return f"func @k({', '.join(params)}) {attributes(wg, sgs)} {{\n{lines}\n}}\n"


# ---- gemm -----------------------------------------------------------------------------------
def gemm_case(ta, tb, shape, ab, c, dynamic, wg, scalars: Scalars, atomic=False, nan=False,
              grid=(1, 1, 1)):
    M, N, K = shape
    ashape = (M, K) if ta == "n" else (K, M)
    bshape = (K, N) if tb == "n" else (N, K)
    params = [f"%A: {mtype(ab, ashape, dynamic)}", f"%B: {mtype(ab, bshape, dynamic)}",
              f"%C: {mtype(c, (M, N), dynamic)}"] + scalars.params
    mod = ".atomic" if atomic else ""
    src = kernel(params, scalars.body + [f"gemm{mod}.{ta}.{tb} %alpha, %A, %B, %beta, %C"], wg)

    def args():
        C = rand((M, N), c, 3)
        if nan:
            poison(C)
        return [rand(ashape, ab, 1), rand(bshape, ab, 2), C] + list(scalars.args)
    compare(src, args, [2], c, grid, MATMUL_TARGETS)


@pytest.mark.parametrize("wg", WORK_GROUPS, ids=WG_IDS)
@pytest.mark.parametrize("ab,c", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=["x".join(map(str, s)) for s in GEMM_SHAPES])
@pytest.mark.parametrize("ta,tb", TRANSPOSES, ids=["".join(t) for t in TRANSPOSES])
def test_gemm(ta, tb, shape, dynamic, ab, c, wg):
    gemm_case(ta, tb, shape, ab, c, dynamic, wg,
              Scalars(ALPHA[ab], ab, BETA[c], c, alpha_const=False, beta_const=False))


#: (alpha, beta, alpha constant, beta constant, NaN in the output)
SCALAR_CASES = {
    "args": (None, None, False, False, False),
    "beta0-arg-nan": (None, 0, False, False, True),
    "beta0-const-nan": (None, 0, False, True, True),
    "beta1-const": (None, 1, False, True, False),
    "alpha1-beta-const": (1, None, True, True, False),
    "both-const": (None, None, True, True, False),
}


def scalars_for(case: str, ab: str, c: str) -> tuple:
    alpha, beta, alpha_const, beta_const, nan = SCALAR_CASES[case]
    alpha = ALPHA[ab] if alpha is None else alpha
    beta = BETA[c] if beta is None else beta
    return Scalars(alpha, ab, beta, c, alpha_const, beta_const), nan


@pytest.mark.parametrize("case", list(SCALAR_CASES))
@pytest.mark.parametrize("ab,c", [("f32", "f32"), ("c64", "c64"), ("i32", "i32"),
                                  ("f16", "f32")], ids=["f32", "c64", "i32", "f16-f32"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_gemm_alpha_beta(case, ab, c, dynamic):
    scalars, nan = scalars_for(case, ab, c)
    gemm_case("n", "t", (17, 33, 9), ab, c, dynamic, (32, 2), scalars, nan=nan)


@pytest.mark.parametrize("beta", [0, 1])
@pytest.mark.parametrize("ab,c", [("f32", "f32"), ("c64", "c64"), ("i32", "i32"),
                                  ("f16", "f32")], ids=["f32", "c64", "i32", "f16-f32"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("ta,tb", [("n", "n"), ("t", "t")], ids=["nn", "tt"])
def test_gemm_atomic(ta, tb, dynamic, ab, c, beta):
    """Several work-groups update C atomically (beta 1: the updates add up)."""
    gemm_case(ta, tb, (17, 33, 9), ab, c, dynamic, (32, 2),
              Scalars(ALPHA[ab], ab, beta, c, alpha_const=False, beta_const=True),
              atomic=True, grid=(3, 2, 1))


@pytest.mark.parametrize("M,N,K", [(0, 5, 3), (4, 9, 0), (40, 3, 70), (64, 32, 32)])
def test_gemm_more_dynamic_shapes(M, N, K):
    """Empty C, K = 0 (C := beta C), several K steps, shapes that are multiples of tiles."""
    for dynamic in (False, True):
        if dynamic is False and 0 in (M, N, K):
            continue
        gemm_case("t", "n", (M, N, K), "f64", "f64", dynamic, (32, 2),
                  Scalars(2.0, "f64", 0.5, "f64", False, False))


def test_gemm_static_and_dynamic_operands():
    """A dimension is static when any operand knows it (dynamic sizes match anything)."""
    src = kernel(["%alpha: c32", "%A: memref<c32x17x?>", "%B: memref<c32x?x33>",
                  "%beta: c32", "%C: memref<c32x?x?>"], ["gemm %alpha, %A, %B, %beta, %C"],
                 (32, 2))
    compare(src, lambda: [1 - 1j, rand((17, 9), "c32", 1), rand((9, 33), "c32", 2), 0.5j,
                          rand((17, 33), "c32", 3)], [4], "c32", targets=MATMUL_TARGETS)


def test_gemm_mixed_input_types():
    """promote(f32, f64) = f64 and promote(i8, f16) = f16 -> f32: mul_add promotes."""
    src = kernel(["%alpha: f32", "%A: memref<f32x3x4>", "%B: memref<f64x4x2>", "%beta: f64",
                  "%C: memref<f64x3x2>"], ["gemm %alpha, %A, %B, %beta, %C"])
    compare(src, lambda: [0.5, rand((3, 4), "f32", 1), rand((4, 2), "f64", 2), 3.0,
                          rand((3, 2), "f64", 3)], [4], "f64")
    src = kernel(["%alpha: i8", "%A: memref<i8x?x?>", "%B: memref<f16x?x?>", "%beta: f32",
                  "%C: memref<f32x?x?>"], ["gemm.t.t %alpha, %A, %B, %beta, %C"])
    compare(src, lambda: [2, rand((4, 3), "i8", 1), rand((2, 4), "f16", 2), 0.25,
                          rand((3, 2), "f32", 3)], [4], "f32")


@pytest.mark.parametrize("ty", ["f16", "bf16"])
def test_gemm_16bit_output(ty):
    """16-bit outputs accumulate in f32 and round once."""
    src = kernel([f"%alpha: {ty}", f"%A: memref<{ty}x?x?>", f"%B: memref<{ty}x?x?>",
                  f"%beta: {ty}", f"%C: memref<{ty}x?x?>"], ["gemm %alpha, %A, %B, %beta, %C"],
                 (32, 2))
    compare(src, lambda: [0.5, rand((18, 12), ty, 1), rand((12, 5), ty, 2), 1.5,
                          rand((18, 5), ty, 3)], [4], ty)


def test_gemm_strided_subviews():
    src = kernel(["%A: memref<f32x8x8>", "%B: memref<f32x8x8>", "%C: memref<f32x10x10>"], [
        "%a = subview %A[1:4, 2:5] : memref<f32x4x5,strided<1,8>>",
        "%b = subview %B[0:4, 3:4] : memref<f32x4x4,strided<1,8>>",
        "%c = subview %C[5:5, 6:4] : memref<f32x5x4,strided<1,10>>",
        "%alpha = constant 1.0 : f32", "%beta = constant 1.0 : f32",
        "gemm.t.n %alpha, %a, %b, %beta, %c"])
    compare(src, lambda: [rand((8, 8), "f32", 1), rand((8, 8), "f32", 2),
                          rand((10, 10), "f32", 3)], [2], "f32")


# ---- gemv and ger ---------------------------------------------------------------------------
@pytest.mark.parametrize("wg", WORK_GROUPS, ids=WG_IDS)
@pytest.mark.parametrize("ab,c", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("M,K", [(5, 3), (17, 33), (1, 1)])
@pytest.mark.parametrize("ta", ["n", "t"])
def test_gemv(ta, M, K, dynamic, ab, c, wg):
    ashape = (M, K) if ta == "n" else (K, M)
    s = Scalars(ALPHA[ab], ab, BETA[c], c, False, False)
    src = kernel([f"%A: {mtype(ab, ashape, dynamic)}", f"%b: {mtype(ab, (K,), dynamic)}",
                  f"%c: {mtype(c, (M,), dynamic)}"] + s.params,
                 [f"gemv.{ta} %alpha, %A, %b, %beta, %c"], wg)
    compare(src, lambda: [rand(ashape, ab, 1), rand((K,), ab, 2), rand((M,), c, 3)] + s.args,
            [2], c, targets=MATMUL_TARGETS)


@pytest.mark.parametrize("wg", WORK_GROUPS, ids=WG_IDS)
@pytest.mark.parametrize("ab,c", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("M,N", [(5, 7), (17, 33), (1, 1)])
def test_ger(M, N, dynamic, ab, c, wg):
    s = Scalars(ALPHA[ab], ab, BETA[c], c, False, False)
    src = kernel([f"%a: {mtype(ab, (M,), dynamic)}", f"%b: {mtype(ab, (N,), dynamic)}",
                  f"%C: {mtype(c, (M, N), dynamic)}"] + s.params,
                 ["ger %alpha, %a, %b, %beta, %C"], wg)
    compare(src, lambda: [rand((M,), ab, 1), rand((N,), ab, 2), rand((M, N), c, 3)] + s.args,
            [2], c, targets=MATMUL_TARGETS)


#: gemv and ger whose M pieces are one tile of several row blocks on the cpu with default
#: attributes (one subgroup; ``matmul.fused_columns``): (instruction, type, rows, columns)
ONE_TILE = [("gemv", "f32", 56, 56), ("gemv.t", "f64", 35, 35), ("gemv", "f64", 9, 56),
            ("gemv.t", "f32", 17, 13), ("gemv", "f64", 120, 120), ("ger", "f64", 56, 56),
            ("ger", "f32", 9, 56), ("ger", "f64", 17, 13), ("ger", "f32", 3, 5),
            ("ger", "f64", 1, 1), ("gemv", "f32", 13, 13), ("ger", "f32", 120, 120),
            ("ger", "f64", 84, 84)]


def one_tile_kernel(op: str, ty: str, R: int, C: int, beta: float, attrs: str = "") -> str:
    """op on an R x C matrix (gemv: A, ger: C), alpha an argument, beta a constant."""
    if op == "ger":
        operands = [f"%x: memref<{ty}x{R}>", f"%y: memref<{ty}x{C}>", f"%Z: memref<{ty}x{R}x{C}>"]
    else:
        K, M = (C, R) if op == "gemv" else (R, C)
        operands = [f"%x: memref<{ty}x{R}x{C}>", f"%y: memref<{ty}x{K}>", f"%Z: memref<{ty}x{M}>"]
    return (f"func @k({', '.join(operands)}, %alpha: {ty}) {attrs} {{\n"
            f"    %beta = constant {beta!r} : {ty}\n"
            f"    {op} %alpha, %x, %y, %beta, %Z\n}}\n")


@pytest.mark.parametrize("beta", [0.0, -0.5])
@pytest.mark.parametrize("op,ty,R,C", ONE_TILE)
def test_gemv_ger_as_one_tile_agree_with_numpy(op, ty, R, C, beta):
    """Compiled for the cpu with default attributes: the sums of multiples of 1/8 are exact
    in f32 and f64, whatever the order (several accumulators over K), so they match
    NumPy's; with beta 0 the output is not read (NaN in it)."""
    x = rand((R,) if op == "ger" else (R, C), ty, 1)
    y = rand((C,) if op in ("ger", "gemv") else (R,), ty, 2)
    z0 = rand((R, C) if op == "ger" else ((R,) if op == "gemv" else (C,)), ty, 3)
    z = z0.copy(order="F")
    if beta == 0:
        poison(z)
    alpha = -0.75
    ttlc.compile(one_tile_kernel(op, ty, R, C, beta), target="cpu")["k"](x, y, z, alpha)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    product = np.outer(x64, y64) if op == "ger" else (x64 if op == "gemv" else x64.T) @ y64
    want = alpha * product + (beta * z0 if beta else 0)
    close(z, want, ty)


@pytest.mark.parametrize("op,ty,R,C,blocks,column_loop", [
    ("gemv", "f32", 176, 88, "64 64 64", False), ("gemv", "f64", 88, 9, "32 32 32", False),
    ("gemv", "f64", 16, 40, "", False), ("gemv.t", "f64", 9, 56, "", False),
    ("ger", "f32", 3, 5, "16", True),
    ("ger", "f64", 88, 56, "32 32 32", True)])
def test_gemv_and_ger_of_one_subgroup_are_one_tile(op, ty, R, C, blocks, column_loop):
    """On the cpu description with one subgroup, gemv's pieces of M are one parallel
    region with one K loop (b's tile loaded once per step); ger's A blocks are loaded
    once, before the loop over C's columns (f64 88 rows, three blocks of 32 with 24 rows
    in the last, three registers computed; 56 columns in 28 steps of 2), and each column
    of a step is B's entry times the blocks, stored block after block (C written in
    address order); a gemv of one piece of M (16 rows) and a gemv.t keep their
    foreach_tile.  (Fewer rows make one tile of all of M: ``whole_m_columns``.)"""
    S = 16 if ty == "f32" else 8
    src = one_tile_kernel(op, ty, R, C, 0.0, attributes((S, 1), S))
    lines = str(lowered(src, ("lower-linalg",), "cpu")).splitlines()
    text = "\n".join(lines)
    if not blocks:
        assert "foreach_tile" in text and "parallel" not in text
        return
    rows = [line.split(f"coopmatrix<{ty}x")[1].split("x")[0] for line in lines
            if "= constant 0x0p+0 : coopmatrix" in line]
    assert "foreach_tile" not in text and text.count("parallel") == 1
    assert " ".join(rows) == blocks
    a_loads = [n for n, line in enumerate(lines) if ",matrix_a>" in line]
    b_loads = [n for n, line in enumerate(lines) if ",matrix_b>" in line]
    if not column_loop:
        assert len(a_loads) == len(rows) * len(b_loads)  # (K = 9: a step of 1 after the loop)
        return
    loops = [n for n, line in enumerate(lines) if line.strip().startswith("for %j")]
    per_column = len(blocks.split()) // len(loops)
    assert len(a_loads) == per_column and max(a_loads) < loops[0] < b_loads[0]
    stores = [line.split("%Z[")[1] for line in lines if "cooperative_matrix_store" in line]
    assert len(b_loads) == len(stores) // per_column == (2 if C == 56 else C)
    a_rows = [lines[n].split("[")[1].split(",")[0] for n in a_loads]  # 0, 16, 32, 48
    for k in range(0, len(stores), per_column):  # one column, its blocks in row order
        assert len({s.split(",")[1] for s in stores[k:k + per_column]}) == 1
        assert [s.split(",")[0] for s in stores[k:k + per_column]] == a_rows


#: gemv.t shapes (rows x columns of A) for the dot-product lowering on the cpu: rows below,
#: at and above a subgroup, multiples of it and not, columns fewer and more than a tile
DOT_SHAPES = [(1, 1), (3, 5), (17, 13), (9, 56), (35, 35), (56, 56), (120, 120), (16, 8),
              (33, 17)]


def dot_kernel(ty: str, R: int, C: int, beta, strided: bool, attrs: str = "") -> str:
    """gemv.t on an R x C matrix, alpha an argument, beta a constant or (None) an
    argument; ``strided``: A, b and c are subviews of larger arrays (``STRIDED``)."""
    if strided:
        params = [f"%X: memref<{ty}x{R + 3}x{C + 2}>", f"%Y: memref<{ty}x2x{R}>",
                  f"%W: memref<{ty}x3x{C}>"]
        views = [f"%x = subview %X[1:{R},2:{C}] : memref<{ty}x{R}x{C},strided<1,{R + 3}>>",
                 f"%y = subview %Y[1,0:{R}] : memref<{ty}x{R},strided<2>>",
                 f"%z = subview %W[2,0:{C}] : memref<{ty}x{C},strided<3>>"]
    else:
        params = [f"%x: memref<{ty}x{R}x{C}>", f"%y: memref<{ty}x{R}>", f"%z: memref<{ty}x{C}>"]
        views = []
    params.append(f"%alpha: {ty}")
    if beta is None:
        params.append(f"%beta: {ty}")
    else:
        views.append(f"%beta = constant {beta!r} : {ty}")
    body = "\n".join(f"    {line}" for line in views + ["gemv.t %alpha, %x, %y, %beta, %z"])
    return f"func @k({', '.join(params)}) {attrs} {{\n{body}\n}}\n"


def STRIDED(R: int, C: int):
    """The shapes of dot_kernel's strided arguments and the views of A, b and c in them:
    A's columns 3 entries longer than R, b every other entry, c every third."""
    shapes = ((R + 3, C + 2), (2, R), (3, C))
    views = ((slice(1, R + 1), slice(2, C + 2)), (1, slice(None)), (2, slice(None)))
    return shapes, views


@pytest.mark.parametrize("strided", [False, True], ids=["packed", "strided"])
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5, None], ids=["b0", "b1", "b-0.5", "barg"])
@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("R,C", DOT_SHAPES, ids=[f"{r}x{c}" for r, c in DOT_SHAPES])
def test_gemv_t_as_dot_products_agrees_with_numpy(R, C, ty, beta, strided):
    """gemv.t compiled for the cpu with default attributes, where A's rows fill half a
    subgroup or more lowered as dot products of A's columns with b (``matmul.dot_products``):
    c = alpha A^T b + beta c against NumPy; multiples of 1/8 sum exactly in any order.
    With beta 0 the output is not read (NaN in it)."""
    shapes, views = STRIDED(R, C) if strided else (((R, C), (R,), (C,)), (..., ..., ...))
    A, b, c0 = (rand(shape, ty, seed) for seed, shape in enumerate(shapes, 1))
    beta_value = 2.0 if beta is None else beta
    c = c0.copy(order="F")
    if beta_value == 0:
        poison(c[views[2]])
    alpha = -0.75
    args = [A, b, c, alpha] + ([beta_value] if beta is None else [])
    ttlc.compile(dot_kernel(ty, R, C, beta, strided), target="cpu")["k"](*args)
    A64, b64 = A[views[0]].astype(np.float64), b[views[1]].astype(np.float64)
    want = c0.astype(np.float64)
    want[views[2]] = alpha * (A64.T @ b64) + (beta_value * want[views[2]] if beta_value else 0)
    close(c, want, ty)


@pytest.mark.parametrize("ty,R,C,dots", [("f64", 56, 56, True), ("f64", 9, 56, True),
                                         ("f32", 9, 56, True), ("f32", 7, 56, False),
                                         ("f64", 3, 5, False), ("f32", 35, 35, True)])
def test_gemv_t_is_dot_products_where_rows_fill_a_subgroup(ty, R, C, dots):
    """On the cpu description, a gemv.t whose A has at least half a subgroup of rows is
    A's columns times b, summed by cooperative_matrix_reduce_add.column (no transposed
    load, no mul_add); one of fewer rows keeps the tiles of matmul."""
    S = 16 if ty == "f32" else 8
    text = str(lowered(dot_kernel(ty, R, C, 0.0, False, attributes((S, 1), S)),
                       ("lower-linalg",), "cpu"))
    uses = ("cooperative_matrix_reduce_add.column", "cooperative_matrix_mul_add",
            "cooperative_matrix_load.t")
    assert [u in text for u in uses] == ([True, False, False] if dots else [False, True, True])


@pytest.mark.parametrize("ta,tb,tc,talpha", [("f32", "i8", "f32", "f32"),
                                             ("f32", "f32", "f64", "f32"),
                                             ("f64", "f32", "f64", "f64"),
                                             ("i16", "f32", "f32", "f32")])
def test_gemv_t_of_mixed_types_is_no_dot_products_and_agrees_with_numpy(ta, tb, tc, talpha):
    """Dot products multiply A's columns by b lane by lane in one type: a gemv.t whose A,
    b and c differ in type (b of i8 into f32, f32 into f64) is a matmul, whose mul_add
    converts; c = 8 A^T b + 100 c against NumPy (exact: small integers).  Eight rows
    fill half a subgroup of f32 and a whole one of f64: one type would be dot products."""
    R, C = 8, 5
    text = f"""
func @g(%A: memref<{ta}x?x{C}>, %b: memref<{tb}x{R}>, %c: memref<{tc}x{C}>) {{
    %alpha = constant 8.0 : {talpha}
    %beta = constant 100.0 : {tc}
    gemv.t %alpha, %A, %b, %beta, %c
}}"""
    program = str(lowered(text, ("work-group-size", "lower-linalg"), "cpu"))
    assert "cooperative_matrix_reduce_add" not in program
    rng = np.random.default_rng(9)
    A, b, c = (np.asfortranarray(rng.integers(-4, 5, shape).astype(DTYPES[t]))
               for shape, t in (((R, C), ta), ((R,), tb), ((C,), tc)))
    want = 8 * (A.astype(np.float64).T @ b.astype(np.float64)) + 100 * c.astype(np.float64)
    ttlc.compile(text, target="cpu")["g"](A, b, c)
    np.testing.assert_array_equal(c, want)


def member_dot_kernel(ty: str, R: int, C: int, member: str, beta: float = 0.0,
                      attrs: str = "") -> str:
    """gemv.t of one batch member per work-group (``ttlc.testing.kernels.member_kernel``):
    A_i (R x C), b_i and c_i the i-th columns; `member` picks A_i: "group" (group_id.x),
    "loop" (a loop over the members in each work-group, each its own A_i), "shared" (one
    A for all)."""
    operands = [("a", (R, C), member == "shared"), ("b", (R,), False), ("c", (C,), False)]
    return member_kernel(ty, "gemv.t", operands, beta, member == "loop", attrs)


@pytest.mark.parametrize("ty,R,C,member,columns", [
    ("f64", 56, 56, "group", 1), ("f64", 17, 13, "group", 1), ("f32", 35, 35, "group", 1),
    ("f64", 56, 56, "loop", 1), ("f64", 56, 56, "shared", 8), ("f64", 17, 13, "shared", 8),
    ("f32", 17, 13, "group", 4), ("f64", 9, 56, "group", 4), ("f64", 16, 40, "loop", 4),
    ("f64", 8, 40, "group", 4), ("f64", 7, 40, "group", 8), ("f32", 9, 56, "group", 8),
    ("f64", 9, 56, "shared", 8)])
def test_gemv_t_of_a_batch_member_reads_one_column_at_a_time(ty, R, C, member, columns):
    """Where A differs between work-groups (a member of a batch, by group_id or a loop
    variable) and its columns are longer than two cache lines (f64 17 rows: 136 bytes),
    the dot products take one of A's columns at a time (A read in the order of its
    addresses, ``matmul.dot_columns``); columns of one or two lines (f32 17 rows: 68
    bytes, f64 9: 72, f64 16: 128, f64 8: 64) MEMBER_DOT_COLUMNS (4) at once; a shared A
    and columns within a line (f64 7 rows: 56 bytes, f32 9: 36) DOT_COLUMNS (8).  The
    widths of the partial sums' tiles show it."""
    S = 16 if ty == "f32" else 8
    text = str(lowered(member_dot_kernel(ty, R, C, member, attrs=attributes((S, 1), S)),
                       ("lower-linalg",), "cpu"))
    assert "cooperative_matrix_reduce_add.column" in text
    widths = {int(w) for w in re.findall(rf"coopmatrix<{ty}x{S}x(\d+),matrix_acc>", text)}
    assert max(widths) == columns, widths


@pytest.mark.parametrize("beta", [0.0, -0.5])
@pytest.mark.parametrize("member", ["group", "loop"])
@pytest.mark.parametrize("ty,R,C", [("f64", 17, 13), ("f64", 56, 56), ("f32", 35, 35),
                                    ("f64", 120, 9), ("f32", 33, 17)])
def test_gemv_t_one_column_at_a_time_agrees_with_numpy(ty, R, C, member, beta):
    """The batch members' gemv.t, one of A's columns at a time, compiled for the cpu with
    default attributes: c_i = A_i^T b_i + beta c_i against NumPy, every member; with
    beta 0 the output is not read (NaN in it)."""
    batch = 6
    A, b, c0 = rand((R, C, batch), ty, 1), rand((R, batch), ty, 2), rand((C, batch), ty, 3)
    c = c0.copy(order="F")
    if beta == 0:
        poison(c)
    groups = batch // 2 if member == "loop" else batch
    ttlc.compile(member_dot_kernel(ty, R, C, member, beta), target="cpu")["member"](
        A, b, c, grid=(groups,))
    want = np.einsum("rcb,rb->cb", A.astype(np.float64), b) + (beta * c0 if beta else 0)
    close(c, want, ty)


# ---- hadamard and axpby ---------------------------------------------------------------------
@pytest.mark.parametrize("wg", WORK_GROUPS, ids=WG_IDS)
@pytest.mark.parametrize("ab,c", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", [(1,), (37,), (5, 7), (17, 33), (1, 1)])
def test_hadamard(shape, dynamic, ab, c, wg):
    s = Scalars(ALPHA[ab], ab, BETA[c], c, False, False)
    src = kernel([f"%A: {mtype(ab, shape, dynamic)}", f"%B: {mtype(ab, shape, dynamic)}",
                  f"%C: {mtype(c, shape, dynamic)}"] + s.params,
                 ["hadamard %alpha, %A, %B, %beta, %C"], wg)
    compare(src, lambda: [rand(shape, ab, 1), rand(shape, ab, 2), rand(shape, c, 3)] + s.args,
            [2], c)


@pytest.mark.parametrize("wg", WORK_GROUPS, ids=WG_IDS)
@pytest.mark.parametrize("ab,c", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", [(), (1,), (37,), (5, 7), (17, 33), (1, 1)])
@pytest.mark.parametrize("ta", ["n", "t"])
def test_axpby(ta, shape, dynamic, ab, c, wg):
    ashape = tuple(reversed(shape)) if ta == "t" else shape
    s = Scalars(ALPHA[ab], ab, BETA[c], c, False, False)
    src = kernel([f"%A: {mtype(ab, ashape, dynamic)}", f"%B: {mtype(c, shape, dynamic)}"]
                 + s.params, [f"axpby.{ta} %alpha, %A, %beta, %B"], wg)
    compare(src, lambda: [rand(ashape, ab, 1), rand(shape, c, 3)] + s.args, [1], c)


# ---- sum and cumsum -------------------------------------------------------------------------
@pytest.mark.parametrize("wg", WORK_GROUPS, ids=WG_IDS)
@pytest.mark.parametrize("ab,c", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", [(1,), (15,), (37,), (5, 7), (17, 33), (1, 1)])
@pytest.mark.parametrize("ta", ["n", "t"])
def test_sum(ta, shape, dynamic, ab, c, wg):
    if len(shape) == 2:
        bshape = (shape[1],) if ta == "t" else (shape[0],)
    else:
        bshape = ()
    s = Scalars(ALPHA[ab], ab, BETA[c], c, False, False)
    src = kernel([f"%A: {mtype(ab, shape, dynamic)}", f"%B: {mtype(c, bshape, dynamic)}"]
                 + s.params, [f"sum.{ta} %alpha, %A, %beta, %B"], wg)
    compare(src, lambda: [rand(shape, ab, 1), rand(bshape, c, 3)] + s.args, [1], c)


CUMSUM_CASES = [((1,), 0), ((37,), 0), ((5, 7), 0), ((5, 7), 1), ((17, 3, 4), 0),
                ((17, 3, 4), 1), ((17, 3, 4), 2)]


@pytest.mark.parametrize("wg", WORK_GROUPS, ids=WG_IDS)
@pytest.mark.parametrize("ab,c", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape,mode", CUMSUM_CASES,
                         ids=[f"{'x'.join(map(str, s))}-mode{m}" for s, m in CUMSUM_CASES])
def test_cumsum(shape, mode, dynamic, ab, c, wg):
    s = Scalars(ALPHA[ab], ab, BETA[c], c, False, False)
    src = kernel([f"%A: {mtype(ab, shape, dynamic)}", f"%B: {mtype(c, shape, dynamic)}"]
                 + s.params, [f"cumsum %alpha, %A, {mode}, %beta, %B"], wg)
    compare(src, lambda: [rand(shape, ab, 1), rand(shape, c, 3)] + s.args, [1], c)


# ---- alpha/beta cases and .atomic for the scalar lowerings ----------------------------------
def _elementwise_src(op: str, ab: str, c: str, dynamic: bool, s: Scalars, atomic: bool, wg):
    mod = ".atomic" if atomic else ""
    if op == "axpby":
        shapes, call = [(17, 5), (5, 17)], f"axpby{mod}.t %alpha, %A, %beta, %B"
    elif op == "hadamard":
        shapes, call = [(17, 5), (17, 5), (17, 5)], f"hadamard{mod} %alpha, %A, %X, %beta, %B"
    elif op == "sum":
        shapes, call = [(17, 5), (17,)], f"sum{mod} %alpha, %A, %beta, %B"
    elif op == "sum0":
        shapes, call = [(37,), ()], f"sum{mod} %alpha, %A, %beta, %B"
    elif op == "cumsum":
        shapes, call = [(17, 5), (17, 5)], f"cumsum{mod} %alpha, %A, 1, %beta, %B"
    elif op == "cumsum1":
        shapes, call = [(37,), (37,)], f"cumsum{mod} %alpha, %A, 0, %beta, %B"
    elif op == "gemv":
        shapes, call = [(17, 9), (9,), (17,)], f"gemv{mod} %alpha, %A, %X, %beta, %B"
    else:  # ger
        shapes, call = [(17,), (9,), (17, 9)], f"ger{mod} %alpha, %A, %X, %beta, %B"
    names = ["A", "X", "B"] if len(shapes) == 3 else ["A", "B"]
    types = [ab] * (len(shapes) - 1) + [c]
    params = [f"%{n}: {mtype(t, sh, dynamic)}" for n, t, sh in zip(names, types, shapes)]
    return kernel(params + s.params, s.body + [call], wg), shapes, types


SCALAR_OPS = ["axpby", "hadamard", "sum", "sum0", "cumsum", "cumsum1", "gemv", "ger"]


@pytest.mark.parametrize("case", list(SCALAR_CASES))
@pytest.mark.parametrize("ab,c", [("f32", "f32"), ("c64", "c64"), ("i32", "i32")],
                         ids=["f32", "c64", "i32"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("op", SCALAR_OPS)
def test_alpha_beta(op, dynamic, ab, c, case):
    s, nan = scalars_for(case, ab, c)
    src, shapes, types = _elementwise_src(op, ab, c, dynamic, s, False, (32, 2))

    def args():
        arrays = [rand(sh, t, k + 1) for k, (sh, t) in enumerate(zip(shapes, types))]
        if nan:
            poison(arrays[-1])
        return arrays + list(s.args)
    compare(src, args, [len(shapes) - 1], c)


@pytest.mark.parametrize("beta", [0, 1])
@pytest.mark.parametrize("ab,c", [("f32", "f32"), ("c64", "c64"), ("i32", "i32"),
                                  ("bf16", "f32")], ids=["f32", "c64", "i32", "bf16-f32"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("op", SCALAR_OPS)
def test_atomic(op, dynamic, ab, c, beta):
    s = Scalars(ALPHA[ab], ab, beta, c, alpha_const=False, beta_const=True)
    src, shapes, types = _elementwise_src(op, ab, c, dynamic, s, True, (32, 2))
    compare(src, lambda: [rand(sh, t, k + 1) for k, (sh, t) in enumerate(zip(shapes, types))]
            + list(s.args), [len(shapes) - 1], c, grid=(2, 2, 1))


# ---- local memory: races between subgroups are reported in checked mode -------------------------
def test_local_memory_is_race_free():
    """gemm, gemv, ger, axpby, hadamard, sum and cumsum on local memory with 4 subgroups:
    checked mode tracks every access to local memory, so a race in the lowered code (two
    subgroups or work-items touching one element between barriers) would raise."""
    src = kernel(["%A: memref<f64x17x9>", "%B: memref<f64x9x33>", "%C: memref<f64x17x33>",
                  "%s: memref<f64x33>", "%t: memref<f64>"], [
        "%one = constant 1.0 : f64", "%zero = constant 0.0 : f64",
        "%two = constant 2.0 : f64",
        "%T = alloca : memref<f64x17x33,local>",
        "%U = alloca : memref<f64x17x33,local>",
        "%v = alloca : memref<f64x17,local>",
        "%q = alloca : memref<f64x33,local>",
        "%w = alloca : memref<f64,local>",
        "%V = alloca : memref<f64x33x17,local>",
        "axpby %one, %C, %zero, %T",
        "gemm %two, %A, %B, %one, %T",
        "hadamard %one, %T, %T, %zero, %U",
        "cumsum %one, %U, 1, %one, %T",
        "cumsum %one, %U, 0, %one, %T",
        "sum %one, %T, %zero, %v",
        "sum.t %one, %T, %zero, %q",
        "ger %one, %v, %q, %zero, %U",
        "gemv.t %one, %U, %v, %two, %q",
        "sum %one, %q, %zero, %w",
        "axpby.t %one, %T, %zero, %V",
        "axpby.t %one, %V, %one, %C",
        "axpby %one, %q, %zero, %s",
        "axpby %one, %w, %zero, %t"], (32, 2))
    compare(src, lambda: [rand((17, 9), "f64", 1), rand((9, 33), "f64", 2),
                          rand((17, 33), "f64", 3), rand((33,), "f64", 4),
                          rand((), "f64", 5)], [2, 3, 4], "f64")


# ---- the shape of the lowered code ------------------------------------------------------------
def _lower(src: str, target: str = "interp") -> str:
    program = ttlc.check(src)
    run_passes(program, ["lower-linalg"], PassContext(target=get_target(target)))
    text = str(program)
    ttlc.check(text)
    return text


def blas_src(sgs: int) -> str:
    return kernel(
        ["%A: memref<f32x17x9>", "%B: memref<f32x9x33>", "%C: memref<f32x17x33>",
         "%x: memref<f32x9>", "%y: memref<f32x17>", "%z: memref<f32>",
         "%D: memref<f32x17x17>", "%E: memref<f32x9x17>"],
        ["%alpha = constant 1.5 : f32", "%beta = constant 0.0 : f32",
         "gemm %alpha, %A, %B, %beta, %C", "gemv %alpha, %A, %x, %beta, %y",
         "ger %alpha, %y, %y, %beta, %D", "hadamard %alpha, %C, %C, %beta, %C",
         "axpby.t %alpha, %A, %beta, %E", "sum %alpha, %C, %beta, %y",
         "sum %alpha, %x, %beta, %z", "cumsum %alpha, %C, 1, %beta, %C"],
        (2 * sgs, 2), sgs)


@pytest.mark.parametrize("target", list(TARGETS))
def test_static_shapes_give_static_code(target):
    """No BLAS instruction is left, nothing asks for a size, nothing reads C when beta is
    the constant 0, and every tile fits the target's rules."""
    text = _lower(blas_src(TARGETS[target].default_subgroup_size), target)
    for op in ("gemm ", "gemv", "ger ", "hadamard", "axpby", "sum ", "cumsum", "size "):
        assert op not in text, op
    assert "%C[" in text
    assert "cooperative_matrix_load %C" not in text  # beta = 0: C not read


def test_dynamic_shapes_ask_for_sizes():
    src = kernel(["%A: memref<f32x?x?>", "%B: memref<f32x?x?>", "%C: memref<f32x?x?>"], [
        "%alpha = constant 1.5 : f32", "%beta = constant 1.0 : f32",
        "gemm %alpha, %A, %B, %beta, %C"])
    text = _lower(src)
    assert "size %C[0]" in text and "size %C[1]" in text and "size %A[1]" in text
    assert "rows_checked" in text and "cols_checked" in text  # remainder tiles
    assert "cooperative_matrix_scale %beta" not in text  # beta = 1: added without scaling


def test_beta_argument_branches_on_zero():
    src = kernel(["%alpha: f32", "%beta: f32", "%A: memref<f32x8x8>", "%C: memref<f32x8x8>"],
                 ["gemm %alpha, %A, %A, %beta, %C", "axpby %alpha, %A, %beta, %C"])
    text = _lower(src)
    assert text.count("equal %beta") == 2


def test_missing_subgroup_size_uses_target_default_or_fails():
    src = """func @k(%A: memref<f32x8x8>) attributes {work_group_size=[16,1]} {
        %one = constant 1.0 : f32
        gemm %one, %A, %A, %one, %A
    }"""
    _lower(src, "interp")
    with pytest.raises(ttlc.CompileError, match="subgroup"):
        _lower(src, "nvidia")  # warps of 32 do not divide 16 work-items


# ---- choose_tiles -----------------------------------------------------------------------------
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("sgs", [8, 16, 32])
@pytest.mark.parametrize("acc,ab", [("f32", "f32"), ("f32", "f16"), ("c64", "c64"),
                                    ("i32", "i8"), ("f64", "f64")])
@pytest.mark.parametrize("size", [None, 1, 5, 17, 64, 1000])
def test_choose_tiles_rules(target, sgs, acc, ab, size):
    t = TARGETS[target]
    acc_t, ab_t = SCALAR_TYPES[acc], SCALAR_TYPES[ab]
    tiles = choose_tiles(t, sgs, 4, size, size, size, acc_t, ab_t, ab_t)
    assert tiles.m % sgs == 0 and tiles.m & (tiles.m - 1) == 0
    assert tiles.k >= 1 and tiles.k & (tiles.k - 1) == 0
    assert tiles.n >= 1
    if size is not None:
        assert tiles.n <= size and tiles.k <= max(1, 2 * size)
        assert tiles.m <= max(sgs, 2 * size)
    half = t.register_budget // 2
    if tiles.m * tiles.n > sgs:  # beyond the minimum tile, the accumulator fits
        assert tiles.m * tiles.n * acc_t.size <= half
    if tiles.k > 1:  # one K step of operands fits (CPU: B is broadcast from memory)
        from_memory = t.vector_bytes and ab == acc and not ab_t.is_complex
        b_bytes = 0 if from_memory else tiles.n * ab_t.size
        assert tiles.k * (tiles.m * ab_t.size + b_bytes) <= half


def test_choose_tiles_cpu_microkernel():
    """AVX-512: 16 f32 lanes; B's entries are broadcast from memory, so the accumulator
    takes three quarters of the 32 zmm registers (ACC_SHARE), A's columns the rest."""
    f32 = SCALAR_TYPES["f32"]
    tiles = choose_tiles(TARGETS["cpu"], 16, 1, None, None, None, f32, f32, f32)
    assert tiles.m * tiles.n * 4 == 32 * 64 * ACC_SHARE == 24 * 64
    # 5 rows: one tile of 16 rows, checked; 7 columns: one tile; K = 3: a step of 2, then 1
    small = choose_tiles(TARGETS["cpu"], 16, 1, 5, 7, 3, f32, f32, f32)
    assert (small.m, small.n, small.k) == (16, 7, 2)
    assert (small.m_pieces, small.n_pieces, small.k_rest) == (((5, 16),), ((7, 7),), (1,))
    # B's entries are FMA memory operands, not registers: 16x16 is one tile (16 zmm), K
    # steps of SPLIT_MAX_K (2)
    square = choose_tiles(TARGETS["cpu"], 16, 1, 16, 16, 16, f32, f32, f32)
    assert (square.m, square.n, square.k) == (16, 16, SPLIT_MAX_K) == (16, 16, 2)


def test_tiles_of_a_subgroup_in_part_of_a_register_count_registers():
    """8 f32 lanes with AVX-512 (gemm of few rows: target.config.narrow_lanes): each
    column of a tile takes a whole zmm register however few of its bytes it fills, so the
    accumulators take ACC_SHARE of the 32 registers (f32 3x40x30: 8x20, 20 registers),
    not ACC_SHARE of their bytes (8x40: 40 registers, spilled); the lowering sees the
    target so (linalg.emit.Emitter)."""
    f32 = SCALAR_TYPES["f32"]
    cpu = TARGETS["cpu"]
    narrow = subgroup_registers(cpu, 8, 4)
    assert (narrow.vector_bytes, narrow.register_budget) == (32, 32 * 32)
    assert subgroup_registers(cpu, 16, 4) is cpu and subgroup_registers(cpu, 8, 8) is cpu
    tiles = choose_tiles(narrow, 8, 1, 3, 40, 30, f32, f32, f32)
    assert (tiles.m, tiles.n) == (8, 20) and tiles.n <= 32 * ACC_SHARE
    assert choose_tiles(cpu, 8, 1, 3, 40, 30, f32, f32, f32).n == 40  # counted in bytes
    text = ("func @k(%A: memref<f32x3x30>, %B: memref<f32x30x40>, %C: memref<f32x3x40>) {\n"
            "    %one = constant 1.0 : f32\n    gemm %one, %A, %B, %one, %C\n}\n")
    from ttlc.passes import expand, lower_copy

    lowered = str(lower_copy(ttlc.check(text), expand(["lower"]), cpu))  # (AVX-512 anywhere)
    assert "subgroup_size=8" in lowered and "coopmatrix<f32x8x20,matrix_acc>" in lowered


def test_choose_tiles_cpu_remainders_get_smaller_tiles():
    """f64, subgroup 8, AVX-512: a DG code's 35x9x35 is one tile of all 35 rows (five
    registers computed) by 3 columns, K in steps of 1: its accumulator (15 zmm), two of
    A's columns (10) and one more fit the 32 (``whole_m_columns``); 56x9x56 is rows 32 +
    24, the 24 in 32-row tiles of three registers by 5 and 4 columns; 20x9x19 one 32-row
    tile of three registers (24 rows computed) by all 9 columns, 27 zmm beside one of A's
    columns (``one_pass``), K in steps of 1 (a step of two would need 33); GPU targets
    keep one piece."""
    f64 = SCALAR_TYPES["f64"]
    t = choose_tiles(TARGETS["cpu"], 8, 1, 35, 9, 35, f64, f64, f64)
    assert (t.m_pieces, t.n_pieces, t.k, t.k_rest) == (((35, 64),), ((9, 3),), 1, ())
    assert computed_rows(35, 64, 8) * (t.n + 2) + 8 <= 32 * 8
    t = choose_tiles(TARGETS["cpu"], 8, 1, 20, 9, 19, f64, f64, f64)
    assert (t.m_pieces, t.n_pieces, t.k, t.k_rest) == (((20, 32),), ((9, 9),), 1, ())
    assert computed_rows(20, 32, 8) == 24 and 3 * 9 + 3 + 1 <= 32 < 3 * 9 + 2 * 3 + 1
    t = choose_tiles(TARGETS["cpu"], 8, 1, 56, 9, 56, f64, f64, f64)
    assert (t.m_pieces, t.k, t.k_rest) == (((32, 32), (24, 32)), 1, ())
    assert t.row_n_pieces == (((5, 5), (4, 4)), ((5, 5), (4, 4)))
    assert sum(e for e, _ in t.m_pieces) == 56
    assert all(sum(e for e, _ in columns) == 9 for columns in t.row_n_pieces)
    gpu = choose_tiles(TARGETS["pvc"], 16, 1, 35, 9, 35, f64, f64, f64)
    assert (gpu.m_pieces, gpu.n_pieces, gpu.k_rest) == ((), (), ())


def test_short_k_over_enough_tiles_is_one_step():
    """AVX-512 (the cpu description), one subgroup: a K of at most WHOLE_K_MAX (6) is one
    straight-line step, no loop, where C has WHOLE_K_TILES (3) tiles or more and the
    accumulator and K's operands fit WHOLE_K_BUDGET of the 32 zmm: f64 49x18x3 in 32x6
    tiles (rows 32 + 17, three column tiles: 6 tiles) holds 24 zmm of accumulator and
    3 x 4 of A's columns, 36 zmm = 1.125 x 32; f32 11x70x5 in 16x14 (5 tiles) 14 + 5.
    K loops stay for K = 7 (f64 74x2x7), one tile (f64 20x5x3) and GPU targets; beyond the
    budget where C has WHOLE_K_C_BYTES or more over several row tiles.  Without
    AVX-512 (a budget of 15 ymm) K <= WHOLE_K_HELD (3) is one step whatever the
    registers, a longer K where A's M x K block, a column of C and a broadcast fit: f64
    8x40x4 (2 ymm of rows: 2 x 4 + 2 + 1 = 11) but not f64 9x40x4 (3 x 4 + 3 + 1 = 16)
    nor f32 60x4x5 (8 x 5 + 8 + 1), or where C has WHOLE_K_C_BYTES (12 KiB) or more over
    several row tiles: f64 49x93x5 (36456 bytes, 16-row tiles), not f64 15x126x5 (15120
    bytes in one row tile) nor f64 47x26x4 (9776 bytes)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    t = choose_tiles(cpu, 8, 1, 49, 18, 3, f64, f64, f64)
    assert (t.m, t.n, t.k, t.k_rest) == (32, 6, 3, ()) and t.count() == 2 * 3
    assert (t.m * t.n + 3 * t.m) * 8 == 36 * 64 == WHOLE_K_BUDGET * cpu.register_budget
    t = choose_tiles(cpu, 16, 1, 11, 70, 5, f32, f32, f32)
    assert (t.m, t.n, t.k, t.k_rest, t.count()) == (16, 14, 5, (), 5)
    assert choose_tiles(cpu, 8, 1, 74, 2, 7, f64, f64, f64).k < 7 == WHOLE_K_MAX + 1
    one = choose_tiles(cpu, 8, 1, 20, 5, 3, f64, f64, f64)
    assert one.count() == 1 < WHOLE_K_TILES and one.k < 3
    assert choose_tiles(TARGETS["pvc"], 16, 1, 49, 18, 3, f64, f64, f64).k != 3
    # beyond the budget where C of WHOLE_K_C_BYTES spans several row tiles: f64 120x31x5
    # in 32x6 tiles (29760 bytes of C; 24 zmm of accumulator + 5 x 4 of A > 36)
    t = choose_tiles(cpu, 8, 1, 120, 31, 5, f64, f64, f64)
    assert (t.m, t.n, t.k, t.k_rest) == (32, 6, 5, ()) and 120 * 31 * 8 >= WHOLE_K_C_BYTES
    assert (t.m * t.n + 5 * t.m) * 8 > WHOLE_K_BUDGET * cpu.register_budget
    # without AVX-512 (``register_tiles``): K of 3 whatever the registers (49 rows: 13 ymm)
    t = choose_tiles(AVX2, 4, 1, 49, 18, 3, f64, f64, f64)
    assert (t.k, t.k_rest) == (3, ()) and t.count() >= WHOLE_K_TILES and WHOLE_K_HELD == 3
    assert choose_tiles(AVX2, 4, 1, 49, 18, 7, f64, f64, f64).k < 7
    # longer K only where A's block fits beside a column of C and a broadcast
    assert AVX2.register_budget == 15 * AVX2.vector_bytes
    t = choose_tiles(AVX2, 4, 1, 8, 40, 4, f64, f64, f64)
    assert (t.k, t.k_rest) == (4, ()) and t.count() >= WHOLE_K_TILES
    for S, M, N, K, ty in ((4, 9, 40, 4, f64), (8, 60, 4, 5, f32), (4, 15, 126, 5, f64),
                           (4, 47, 26, 4, f64)):
        t = choose_tiles(AVX2, S, 1, M, N, K, ty, ty, ty)
        assert t.count() >= WHOLE_K_TILES and t.k < K, (M, N, K, t)
    # ... or where a large C would be written in passes of row tiles
    t = choose_tiles(AVX2, 4, 1, 49, 93, 5, f64, f64, f64)
    assert (t.k, t.k_rest, t.m) == (5, (), 16) and 49 * 93 * 8 >= WHOLE_K_C_BYTES == 12288


def test_longer_k_over_a_large_c_is_one_step():
    """Where C has WHOLE_K_C_BYTES (12 KiB) or more over several row tiles, a K beyond
    WHOLE_K_MAX is one step too: up to WHOLE_K_LARGE_C (10) with AVX-512 (f64 115x59x7,
    54280 bytes of C in 32-row tiles; f64 103x64x9; f32 117x31x10), not K = 11 (f64
    61x105x11) nor a C of one row tile (f64 40x30x9: 9600 bytes, 40 rows in one tile of
    64); without AVX-512 up to WHOLE_K_LARGE_C_YMM (7: f32 101x51x7, not f64 92x59x8)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    assert (WHOLE_K_MAX, WHOLE_K_LARGE_C, WHOLE_K_LARGE_C_YMM) == (6, 10, 7)
    for M, N, K, ty in ((115, 59, 7, f64), (103, 64, 9, f64), (117, 31, 10, f32)):
        t = choose_tiles(cpu, 64 // ty.size, 1, M, N, K, ty, ty, ty)
        assert (t.k, t.k_rest) == (K, ()) and t.m < M, (M, N, K, t)
        assert M * N * ty.size >= WHOLE_K_C_BYTES
    for M, N, K in ((61, 105, 11), (40, 30, 9)):
        assert choose_tiles(cpu, 8, 1, M, N, K, f64, f64, f64).k < K, (M, N, K)
    t = choose_tiles(AVX2, 8, 1, 101, 51, 7, f32, f32, f32)
    assert (t.k, t.k_rest) == (7, ()) and 101 * 51 * 4 >= WHOLE_K_C_BYTES
    assert choose_tiles(AVX2, 4, 1, 92, 59, 8, f64, f64, f64).k < 8


def test_short_k_in_one_step_is_computed_a_few_columns_at_a_time():
    """With K one step (f32 11x70x5, B shared; the cpu description, AVX-512 anywhere), C
    is computed columns at a time (``matmul.fused_columns``): A's 16x5 block loaded once
    (as 16x4 and 16x1: a coopmatrix's rows, B's 5 here, are a power of two), each column
    two products of it and B's column, STEP_COLUMN_FMAS // K = 4 columns a loop step, then
    the 2 columns left (70 = 17 x 4 + 2)."""
    from ttlc.passes import expand, lower_copy
    from ttlc.passes.linalg.matmul import STEP_COLUMN_FMAS

    src = member_kernel("f32", "gemm", [("a", (11, 5), False), ("b", (5, 70), True),
                                        ("c", (11, 70), False)])
    lowered = str(lower_copy(ttlc.check(src), expand(["lower"]), TARGETS["cpu"]))
    loops = lowered.split("for %j=")[1:]
    assert len(loops) == 2 and STEP_COLUMN_FMAS // 5 == 4
    assert [loop.count("cooperative_matrix_mul_add") for loop in loops] == [4 * 2, 2 * 2]
    for a_block in ("coopmatrix<f32x16x4,matrix_a>", "coopmatrix<f32x16x1,matrix_a>"):
        # loaded before the loops, not in them
        assert a_block in lowered.split("for %j=")[0] and not any(a_block in x for x in loops)
    assert all(f"coopmatrix<f32x{k}x1,matrix_b>" in loops[0] for k in (4, 1))
    ttlc.check(lowered)  # rows of every coopmatrix a power of two


def test_a_step_of_k_rows_is_a_product_for_each_power_of_two_in_it():
    """``matmul.k_parts``: a K step is one product where it is a power of two, else one
    for each power of two in it, smallest first, covering its rows once in order."""
    from ttlc.passes.linalg.matmul import k_parts

    assert k_parts(8) == [(0, 8)] and k_parts(1) == [(0, 1)]
    assert k_parts(9) == [(0, 1), (1, 8)] and k_parts(7) == [(0, 1), (1, 2), (3, 4)]
    for ks in range(1, 130):
        parts = k_parts(ks)
        assert all(rows & (rows - 1) == 0 for _, rows in parts)
        assert [first for first, _ in parts] == [sum(r for _, r in parts[:i])
                                                 for i in range(len(parts))]
        assert sum(rows for _, rows in parts) == ks
        assert [rows for _, rows in parts] == sorted(rows for _, rows in parts)


def test_short_k_in_one_step_keeps_c_tiles_where_a_overflows_the_registers():
    """f64 77x24x5, K one step (the cpu description, AVX-512 anywhere): all of M's rows
    (80 computed) by K = 5 columns of A are 50 zmm registers, more than the 32 there are,
    so C is computed in its tiles (``choose_tiles``: 32x6, the last 13 rows in a tile of
    16), A's 32x5 blocks loaded in the tile loops, not as columns of one tile of all rows
    (``matmul.fused_columns``: 0).  f32 11x70x5 keeps its columns (the test above)."""
    from ttlc.passes import expand, lower_copy

    src = member_kernel("f64", "gemm", [("a", (77, 5), False), ("b", (5, 24), False),
                                        ("c", (77, 24), False)])
    lowered = str(lower_copy(ttlc.check(src), expand(["lower"]), TARGETS["cpu"]))
    assert "coopmatrix<f64x32x6,matrix_acc>" in lowered
    assert "coopmatrix<f64x16x6,matrix_acc>" in lowered
    assert "x1,matrix_acc>" not in lowered  # no tile of one column
    loads = [line for line in lowered.splitlines() if "matrix_a>" in line]
    assert loads and all(line.startswith(" " * 16) for line in loads)  # in the tile loops


@pytest.mark.parametrize("ty,M,N,K,operand", [
    ("f64", 77, 24, 5, "batched"), ("f32", 120, 38, 8, "A"), ("f64", 49, 18, 3, "B"),
    ("f64", 49, 18, 3, "batched"), ("f32", 11, 70, 5, "B"), ("f64", 53, 10, 4, "A"),
    ("f32", 7, 66, 5, "batched"), ("f64", 49, 93, 5, "B"), ("f32", 60, 4, 5, "batched"),
    ("f32", 101, 51, 7, "A"), ("f64", 103, 64, 9, "batched")])
def test_short_k_in_one_step_agrees_with_numpy(ty, M, N, K, operand):
    """K in one step of 3 to 9 (``whole_k``), batched or with A or B shared, on the
    cpu with default attributes: each member's C = A B against NumPy.  Also run with
    TTLC_CPU=x86-64-v3 (``make test-cpu-models``), where f64 49x93x5 and f32 101x51x7
    are one step for their large C, f32 60x4x5 and f64 103x64x9 keep their K loops."""
    member_gemm_agrees(ty, M, N, K, operand)


#: the cpu description as a CPU without AVX-512 gives it (``backends.cpu.module._this_cpu``):
#: 15 ymm registers of tiles (one kept for B's broadcast), FMAs without broadcast operands
AVX2 = dataclasses.replace(TARGETS["cpu"], register_budget=15 * 32, vector_bytes=32,
                           broadcast_operands=False, mask_registers=False)


@pytest.mark.parametrize("ty,fused,tiled", [("f64", 56, 57), ("f32", 112, 113)])
def test_k_of_two_keeps_c_tiles_where_a_product_column_overflows_the_registers(ty, fused,
                                                                               tiled):
    """AVX2, K = 2 in one step: C is computed a column at a time (``fused_columns``) where
    one column of the product's row blocks fits the 15 ymm (f64 56 rows: 14), in C's
    tiles where it takes more (f64 57 rows, four blocks of 16: 16 ymm), which spilled
    every step of the column loop."""
    from ttlc.passes import expand, lower_copy

    def accumulators(M: int) -> set:
        src = member_kernel(ty, "gemm", [("a", (M, 2), False), ("b", (2, 122), False),
                                         ("c", (M, 122), False)])
        text = str(lower_copy(ttlc.check(src), expand(["lower"]), AVX2))
        return {int(n) for n in re.findall(rf"coopmatrix<{ty}x\d+x(\d+),matrix_acc>", text)}

    assert accumulators(fused) == {1}
    assert min(accumulators(tiled)) > 1


@pytest.mark.parametrize("ty,M,N,operand", [("f64", 102, 122, "batched"), ("f64", 57, 30, "A"),
                                            ("f32", 124, 119, "B")])
def test_k_of_two_in_c_tiles_agrees_with_numpy(ty, M, N, operand):
    """K = 2 with a product column beyond the registers (C's tiles without AVX-512, run
    with TTLC_CPU=x86-64-v3 by ``make test-cpu-models``): each member's C against NumPy."""
    member_gemm_agrees(ty, M, N, 2, operand)


def test_avx2_is_the_description_a_cpu_without_avx512_gets():
    """AVX2 above is what ``_this_cpu`` makes of the cpu description for TTLC_CPU=x86-64-v3
    (a fresh process: the CPU is read once)."""
    fields = ("register_budget", "vector_bytes", "broadcast_operands", "mask_registers")
    code = ("from ttlc.target import get_target\n"
            "from ttlc.backends.cpu.module import _this_cpu\n"
            f"t = _this_cpu(get_target('cpu'))\nprint([getattr(t, f) for f in {fields!r}])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, TTLC_CPU="x86-64-v3"), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str([getattr(AVX2, f) for f in fields])


@pytest.mark.parametrize("ty,R,member,dots", [
    ("f64", 3, "group", False), ("f32", 7, "group", False), ("f32", 4, "loop", False),
    ("f64", 4, "group", True), ("f32", 9, "group", True), ("f64", 3, "shared", True),
    ("f32", 7, "shared", True)])
def test_avx2_gemv_t_of_a_member_within_a_subgroup_is_a_matmul(ty, R, member, dots):
    """AVX2 (masked loads without mask registers): a batch member's gemv.t whose columns
    are shorter than a subgroup (f64 3 rows of 4 lanes, f32 7 of 8) would read each column
    in one masked load alone: it keeps the tiles of matmul (no column sums); a column of a
    subgroup or more (f64 4, f32 9) and a shared A are dot products (``dot_columns``).
    The lowered program, run by the interpreter, agrees with NumPy for every member."""
    S, C, batch = 32 // SCALAR_TYPES[ty].size, 40, 4
    program = ttlc.check(member_dot_kernel(ty, R, C, member, attrs=attributes((S, 1), S)))
    run_passes(program, ["lower-linalg"], PassContext(target=AVX2))
    assert ("cooperative_matrix_reduce_add.column" in str(program)) == dots
    A = rand((R, C) if member == "shared" else (R, C, batch), ty, 1)
    b, c = rand((R, batch), ty, 2), np.full((C, batch), np.nan, DTYPES[ty], order="F")
    groups = batch // 2 if member == "loop" else batch
    compiled(ttlc.check(str(program)), False)["member"](A, b, c, grid=(groups,))
    want = np.einsum("rc,rb->cb" if member == "shared" else "rcb,rb->cb",
                     A.astype(np.float64), b)
    close(c, want, ty)


@pytest.mark.parametrize("ty,R,kept", [("f32", 120, False), ("f64", 84, False),
                                       ("f64", 56, True), ("f32", 9, True)])
def test_ger_loads_a_column_beyond_the_registers_for_each_column(ty, R, kept):
    """AVX2 (15 ymm, one for a product): a ger's A column of more than 14 registers (f32
    120 rows: 15, f64 84 rows: 21) is loaded for each column of C, inside the column loop,
    one of at most 14 (f64 56 rows, f32 9 rows) before it; the lowered program, run by the
    interpreter, agrees with NumPy's outer product."""
    S = 32 // SCALAR_TYPES[ty].size
    program = ttlc.check(one_tile_kernel("ger", ty, R, 7, 0.0, attributes((S, 1), S)))
    run_passes(program, ["lower-linalg"], PassContext(target=AVX2))
    lines = str(program).splitlines()
    loop = min(n for n, line in enumerate(lines) if line.strip().startswith("for %j"))
    a_loads = [n for n, line in enumerate(lines) if ",matrix_a>" in line]
    assert (max(a_loads) < loop) == kept and (min(a_loads) > loop) == (not kept)
    x, y = rand((R,), ty, 1), rand((7,), ty, 2)
    z = np.full((R, 7), np.nan, DTYPES[ty], order="F")
    compiled(ttlc.check(str(program)), False)["k"](x, y, z, -0.75)
    close(z, -0.75 * np.outer(x.astype(np.float64), y), ty)


@pytest.mark.parametrize("t,S", [("f32", 8), ("f64", 4)])
@pytest.mark.parametrize("M,N,K", [(56, 9, 56), (10, 9, 10), (20, 9, 20), (17, 13, 11),
                                   (128, 9, 128), (64, 64, 64), (3, 5, 7), (1, 1, 1),
                                   (2, 85, 12), (8, 85, 12), (4, 51, 29), (3, 14, 5)])
def test_register_tiles_fit_the_ymm_registers(t, S, M, N, K):
    """AVX2: every piece of C has tiles of its own whose accumulator and either A's column
    or B's broadcasts fit the 15 ymm registers (r n + min(r, n), r registers per column:
    of a partial tile those that hold M's rows, which alone the CPU computes; and the
    mask of a piece whose last register is partial); K steps of two only where their two
    of A's columns leave a register free; the pieces cover M and N."""
    acc = SCALAR_TYPES[t]
    tiles = choose_tiles(AVX2, S, 1, M, N, K, acc, acc, acc)
    assert sum(e for e, _ in tiles.m_pieces) == M
    assert len(tiles.row_n_pieces) == len(tiles.m_pieces)
    lanes = 32 // acc.size
    for (extent, tile), columns in zip(tiles.m_pieces, tiles.row_n_pieces):
        assert tile % S == 0 and tile & (tile - 1) == 0
        assert extent % tile == 0 or extent < tile
        assert sum(e for e, _ in columns) == N
        rows = min(extent, tile)
        r, masked = -(-rows // lanes), extent < tile and rows % lanes != 0
        for _, n in columns:
            assert r * n + tiles.k * min(r, n) + masked <= 15 - (tiles.k - 1)
    assert tiles.k in (1, 2) and sum(tiles.k_rest) < tiles.k


def test_register_tiles_compute_no_row_beyond_a_register():
    """f32 56x9x56 on AVX2 (checked by hand against LIBXSMM's AVX2 kernel: 32x3 and 24x3
    tiles, 63 FMAs per K step, 7 ymm rows x 9 columns): 32 rows in 32x3 tiles, the last
    24 rows one partial 32-row tile of three ymm by 3 columns, in blocks of 3 columns,
    where 16-lane subgroups computed 64 rows;
    f32 10x9x10: one 16-row tile (10 rows checked) in 16x5 and 16x4, not 8x9 and a masked
    8x9 (as many FMAs, more loads); f64 56x9x56: 16x3 tiles over 48 rows, then 8x5 and
    8x4 (56 = 14 ymm rows)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    t = choose_tiles(AVX2, 8, 1, 56, 9, 56, f32, f32, f32)
    assert t.m_pieces == ((32, 32), (24, 32))
    assert t.row_n_pieces == (((9, 3),), ((9, 3),))
    assert (t.k, t.k_rest) == (1, ())
    t = choose_tiles(AVX2, 8, 1, 10, 9, 10, f32, f32, f32)
    assert (t.m_pieces, t.row_n_pieces) == (((10, 16),), (((5, 5), (4, 4)),))
    t = choose_tiles(AVX2, 4, 1, 56, 9, 56, f64, f64, f64)
    assert (t.m_pieces, t.row_n_pieces) == (((48, 16), (8, 8)), (((9, 3),), ((5, 5), (4, 4))))
    # a few rows: one register of rows, as many columns as fit beside A's register (and
    # its mask where the rows are checked: 13 + 1 + 1 of 15 for f64 2 rows)
    t = choose_tiles(AVX2, 4, 1, 2, 85, 12, f64, f64, f64)
    assert (t.m_pieces, t.row_n_pieces, t.k) == (((2, 4),), (((78, 13), (7, 7)),), 1)
    t = choose_tiles(AVX2, 4, 1, 4, 51, 29, f64, f64, f64)
    assert (t.row_n_pieces, t.k) == ((((39, 13), (12, 12)),), 1)
    # K steps of two where the tile leaves room: f32 8x27x8 in 8x9 tiles (9 + 2 of 15)
    t = choose_tiles(AVX2, 8, 1, 8, 27, 8, f32, f32, f32)
    assert (t.row_n_pieces, t.k) == ((((27, 9),),), 2)
    # AVX-512 keeps one column count for all pieces
    assert choose_tiles(TARGETS["cpu"], 16, 1, 56, 9, 56, f32, f32, f32).row_n_pieces == ()


def test_register_tiles_weigh_a_load_by_the_type():
    """AVX2: a load weighs 2.5 FMAs in f32 tiles, 1.5 in f64 ones (``LOAD_COST``): f32
    100x100x100 in 32x3 tiles over 96 rows (four ymm by three columns, B's three
    broadcasts and one register of A: 16 registers, 7 loads for 12 FMAs a K step,
    LIBXSMM's AVX2 blocking; with the members from L3 1.10-1.16x as fast as 16x5, 7 for
    10), the last 4 rows in 8x3 beside them (8x10 alone, ``register_tiles``' column blocks);
    f64 100x100x100 keeps 8x5 where A is shared (its 16x3 ran at 0.94x; with each
    member's A, from memory, 16x3: ``two_line_rows``)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    t = choose_tiles(AVX2, 8, 1, 100, 100, 100, f32, f32, f32)
    assert (t.m_pieces, t.row_n_pieces) == (((96, 32), (4, 8)), (((99, 3), (1, 1)),) * 2)
    t = choose_tiles(AVX2, 4, 1, 100, 100, 100, f64, f64, f64)
    assert (t.m, t.n, t.m_pieces) == (8, 5, ((96, 8), (4, 4)))


def test_register_tiles_load_two_lines_of_a_per_k_step():
    """AVX2: where M has the rows and there is a K loop, tiles of 16 f64 or 32 f32 rows,
    two cache lines of A's column per K step (``two_line_rows``; the cost alone took 8x6
    and 16x6: one line, which with each member's A from memory ran at 0.61-0.76 of
    LIBXSMM), worked out by hand: f64 42x12x114 as 16x3 over 32 rows, then the last 10
    rows in one partial tile by 3; f32 50x61x84 in 32x3 tiles; f64 76x6x118 (A of 70
    KiB, N two column tiles of 3) in 16x3; f64 100x100x100 with each member's A (`new_a`)
    in 16x3 over 96 rows and the last 4 in 4x3, N's last column in a tile of its own.  Not
    where A is shared, larger than REREAD_A_BYTES and N takes more than FEW_COLUMN_TILES
    such tiles (f64 100x100x100: 8x5, A 78 KiB read 20 times from L2, not 34), nor without
    a K loop (ger, K = 1), nor where A's columns lie far apart
    (``far_a``: a prefetched block).  Fewer rows than 16 f64 are one partial tile of 16
    (``test_register_tiles_take_few_rows_in_one_partial_tile``), not tiles of 4."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    t = choose_tiles(AVX2, 4, 1, 42, 12, 114, f64, f64, f64)
    assert (t.m, t.m_pieces) == (16, ((32, 16), (10, 16)))
    assert t.row_n_pieces == (((12, 3),), ((12, 3),))
    t = choose_tiles(AVX2, 8, 1, 50, 61, 84, f32, f32, f32)
    assert (t.m, t.n, t.m_pieces[0]) == (32, 3, (32, 32))
    t = choose_tiles(AVX2, 4, 1, 76, 6, 118, f64, f64, f64)
    assert (t.m, t.n, t.m_pieces[0]) == (16, 3, (64, 16))
    assert 76 * 118 * 8 > REREAD_A_BYTES[8] and FEW_COLUMN_TILES >= 2
    t = choose_tiles(AVX2, 4, 1, 100, 100, 100, f64, f64, f64)
    assert 100 * 100 * 8 > REREAD_A_BYTES[8] and -(-100 // 3) > FEW_COLUMN_TILES
    assert (t.m, t.n) == (8, 5)
    t = choose_tiles(AVX2, 4, 1, 100, 100, 100, f64, f64, f64, new_a=True)
    assert (t.m_pieces, t.row_n_pieces) == (((96, 16), (4, 4)), (((99, 3), (1, 1)),) * 2)
    assert choose_tiles(AVX2, 4, 1, 42, 12, 1, f64, f64, f64).m == 8
    assert choose_tiles(AVX2, 4, 1, 12, 12, 114, f64, f64, f64).m_pieces == ((12, 16),)
    far = choose_tiles(AVX2, 4, 1, 42, 12, 114, f64, f64, f64, far_a=True)
    assert far.m == 8


@pytest.mark.parametrize("kind,S,wide", [("avx2", 4, 13), ("avx512", 8, 21)])
@pytest.mark.parametrize("member,K", [("group", 28), ("loop", 28), ("group", 64),
                                      ("shared", 28), ("group", 16), ("group", 65)])
def test_a_member_b_takes_the_columns_of_a_shared_one(kind, S, wide, member, K):
    """lower-linalg on the AVX2 and the cpu (AVX-512) description: a gemm 4x62xK of one
    register of rows takes the widest accumulator tiles the cost picks (AVX2 13 columns,
    AVX-512 21: one A register for 13 or 21 FMAs), whether B is a member's (by group_id or
    a loop variable; columns of 128 to 520 bytes) or shared.  (At most four columns of a
    member's B, once the rule for columns of three to eight cache lines, ran slower:
    docs/performance.md, "A member's B in the columns of a shared one".)  The lowered
    program, run by the interpreter, agrees with NumPy for every member."""
    batch = 4
    operands = [("a", (4, K), False), ("b", (K, 62), member == "shared"),
                ("c", (4, 62), False)]
    text = member_kernel("f64", "gemm", operands, 0.0, member == "loop", attributes((S, 1), S))
    program = ttlc.check(text)
    target = AVX2 if kind == "avx2" else TARGETS["cpu"]
    run_passes(program, ["lower-linalg"], PassContext(target=target))
    tiles = re.findall(rf"coopmatrix<f64x{S}x(\d+),matrix_acc>", str(program))
    widths = {int(w) for w in tiles}
    assert max(widths) == wide, widths
    A = rand((4, K, batch), "f64", 1)
    B = rand((K, 62) if member == "shared" else (K, 62, batch), "f64", 2)
    C = np.full((4, 62, batch), np.nan, order="F")
    groups = batch // 2 if member == "loop" else batch
    compiled(ttlc.check(str(program)), False)["member"](A, B, C, grid=(groups,))
    want = np.einsum("mkb,kn->mnb" if member == "shared" else "mkb,knb->mnb", A, B)
    close(C, want, "f64")


def _foreach_tiles(text: str):
    """The column-block loop of lowered text ((end, step) or None) and each foreach_tile's
    tile shape, with whether it lies in that loop, in the order of the text."""
    constants = dict(re.findall(r"(%\w+) = constant (\d+) : index", text))
    loop, tiles, inside = None, [], False
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if m := re.match(r"\s*for %jb=%\w+,(%\w+),(%\w+) \{", line):
            loop, inside = (int(constants[m[1]]), int(constants[m[2]])), True
        elif inside and line.strip() == "}" and indent == 4:
            inside = False
        elif m := re.search(r"foreach_tile .*<=\((\d+),(\d+)\)", line):
            tiles.append(((int(m[1]), int(m[2])), inside))
    return loop, tiles


@pytest.mark.parametrize("kind,M,N,K,loop,tiles", [
    # 16x3 and 8x6: blocks of 6 columns over all of N
    ("avx2", 24, 48, 53, (48, 6), [((16, 3), True), ((8, 6), True)]),
    # 32 rows by 16x3 over 48 columns and 16x2 over 2, 8 rows by 8x5: blocks of 15 over
    # 45 columns, then each piece's columns from 45 on
    ("avx2", 40, 50, 30, (45, 15), [((16, 3), True), ((8, 5), True), ((16, 3), False),
                                    ((16, 2), False), ((8, 5), False)]),
    # 16x3, and the last 4 rows, one register, in 4x3 beside them (4x13 alone): blocks of 3
    ("avx2", 20, 78, 54, (78, 3), [((16, 3), True), ((4, 3), True)]),
    # 16x3, the last 11 rows one partial 16-row tile in the first piece's 3 columns:
    # blocks of 3
    ("avx2", 27, 105, 58, (105, 3), [((16, 3), True), ((16, 3), True)]),
    # 32 rows by 16x3, the last 10 rows one partial tile by 3: blocks of 3 over all of N
    ("avx2", 42, 12, 114, (12, 3), [((16, 3), True), ((16, 3), True)]),
    # 16x3 and 8x5 + 8x4: a block of 15 columns is wider than N
    ("avx2", 56, 9, 56, None, [((16, 3), False), ((8, 5), False), ((8, 4), False)]),
    # AVX-512, 64 rows by 32x6 (TALL_ACC_SHARE: 24 of the 32 zmm) and 32x1, the last 5 by
    # 8x6 and 8x1: blocks of 6 over 54 columns, then each piece's last column
    ("avx512", 69, 55, 49, (54, 6), [((32, 6), True), ((8, 6), True), ((32, 1), False),
                                     ((8, 1), False)])])
def test_pieces_of_rows_take_c_in_column_blocks(kind, M, N, K, loop, tiles):
    """lower-linalg where one subgroup computes pieces of M (``matmul.column_blocks``):
    C's columns a block at a time, the block the least common multiple of the pieces'
    first column tiles, every piece's tiles in a block before the next, as far as whole
    blocks fit all pieces' first column pieces, the columns left piece by piece; on AVX2
    a later piece of one register of rows, or the partial tile of the first piece's rows,
    whose own tiles do not take all of N takes the first piece's column tiles where two
    blocks fit (``register_tiles``); AVX-512's pieces of the same column tiles take blocks
    too.  (Blocks, tile order) worked out by hand from the tiles; the lowered program, run
    by the interpreter, agrees with NumPy for every member."""
    S, batch = 4 if kind == "avx2" else 8, 3
    operands = [("a", (M, K), False), ("b", (K, N), False), ("c", (M, N), False)]
    program = ttlc.check(member_kernel("f64", "gemm", operands, attrs=attributes((S, 1), S)))
    run_passes(program, ["lower-linalg"], PassContext(target=AVX2 if kind == "avx2"
                                                      else TARGETS["cpu"]))
    got_loop, got_tiles = _foreach_tiles(str(program))
    assert (got_loop, got_tiles) == (loop, tiles)
    A, B = rand((M, K, batch), "f64", 1), rand((K, N, batch), "f64", 2)
    C = np.full((M, N, batch), np.nan, order="F")
    compiled(ttlc.check(str(program)), False)["member"](A, B, C, grid=(batch,))
    close(C, np.einsum("mkb,knb->mnb", A, B), "f64")


@pytest.mark.parametrize("ty,M,N,K,operand", [
    ("f64", 24, 48, 53, "batched"), ("f64", 40, 50, 30, "A"), ("f64", 20, 121, 15, "batched"),
    ("f32", 62, 55, 22, "B"), ("f32", 86, 83, 120, "batched"), ("f64", 58, 82, 113, "A"),
    ("f64", 20, 78, 54, "A"), ("f64", 68, 18, 8, "A"), ("f32", 99, 113, 40, "B"),
    ("f32", 88, 116, 56, "batched"), ("f32", 82, 85, 44, "A"), ("f64", 25, 81, 120, "B")])
def test_column_blocks_of_pieces_of_rows_agree_with_numpy(ty, M, N, K, operand):
    """gemms whose pieces of rows take C in column blocks without AVX-512 (column pieces
    left after the blocks: f64 40x50, 20x121, 58x82; a last piece of one register in the
    first piece's column tiles: f64 20x78, 68x18, f32 99x113 with 3 rows masked in a ymm
    of 8; the rest of M one partial tile, its last register masked but in f32 88 rows:
    f32 62, 86, 88 and 82 rows, f64 25), compiled for the cpu with default attributes,
    batched or with A or B shared: each member's C = A B against NumPy.  Also run with
    TTLC_CPU=x86-64-v3 (``make test-cpu-models``)."""
    member_gemm_agrees(ty, M, N, K, operand)


def k_loops(text: str) -> List[tuple]:
    """(K a loop step, mul_adds a loop step) of each ``for %k`` of a lowered program."""
    index = dict(re.findall(r"(%\w+) = constant (\d+) : index", text))
    return [(int(index[m[1]]), m[2].count("cooperative_matrix_mul_add"))
            for m in re.finditer(r"for %k=%\w+,%\w+,(%\w+) .*?\n(.*?)\n\s*yield", text, re.S)]


@pytest.mark.parametrize("target,ty,M,N,K,loops", [
    ("avx2", "f64", 76, 2, 43, [(4, 4), (1, 1)] * 2),
    ("avx2", "f64", 56, 9, 56, [(4, 4), (1, 1), (1, 1)]),
    ("avx2", "f64", 9, 12, 40, [(1, 1)]), ("avx2", "f32", 2, 85, 40, [(1, 1), (1, 1)]),
    ("cpu", "f64", 76, 2, 43, [(4, 4), (1, 1), (1, 1)]), ("cpu", "f32", 84, 9, 84, [(3, 3)])])
def test_k_loops_of_few_fmas_take_rounds_of_k_steps(target, ty, M, N, K, loops):
    """The K loop of a full tile takes enough K steps a loop step for ROUND_FMAS (48) vector
    FMAs, at most ROUND_SETS (4), where its registers allow (``rounds_of_sets``); the
    rounds left are a loop of one step a loop step; the pieces of the remainders keep one.
    Worked out by hand (AVX2: 15 ymm of tiles; the cpu: 32 zmm, B's entries FMA operands),
    as (K, mul_adds) a loop step of each K loop in order: AVX2 f64 76x2x43 in 16x2 tiles
    over 64 rows, then the 12 left in one partial 16x2 tile (A a register at a time: 8
    accumulators and 1 + 2 registers, the partial tile a mask more): 8 FMAs a step, so 4
    steps a loop step over 40 of K and a loop of one for the 3 left, in both; f64
    56x9x56 in 16x3 over 48 rows (12 + 3 registers, 12 FMAs a step): 4 steps over all 56
    of K, and the last 8 rows' pieces 8x5 and 8x4, one; f64 9x12x40, all of
    M in three ymm by 4 columns, A's column whole and a broadcast of B for each column
    (AVX2 keeps such tiles at one round), one; f32 2x85x40 in 8x13 tiles and the last 7
    columns in 8x7, A's register and a broadcast for each column too, one.  The cpu: f64
    76x2x43 in 32x2 over 64 rows (8 zmm of accumulators, 8 FMAs a step): 4 steps, a loop
    of one for 3, and the last 12 rows' piece one; f32 84x9x84, all of M one partial
    tile of 128 rows whose 84 the CPU computes in 6 zmm, by 3 columns (18 accumulators +
    6 + 2 of 32; counted as the tile's 8 zmm they would not fit): 18 FMAs a step, 3
    steps a loop step over all of K.  The lowered program, run by the interpreter,
    agrees with NumPy."""
    tgt = AVX2 if target == "avx2" else TARGETS["cpu"]
    S = tgt.vector_bytes // SCALAR_TYPES[ty].size
    src = member_kernel(ty, "gemm", [("a", (M, K), False), ("b", (K, N), False),
                                     ("c", (M, N), False)], attrs=attributes((S, 1), S))
    program = ttlc.check(src)
    run_passes(program, ["lower-linalg"], PassContext(target=tgt))
    assert k_loops(str(program)) == loops
    batch = 3
    A, B = rand((M, K, batch), ty, 1), rand((K, N, batch), ty, 2)
    C = np.full((M, N, batch), np.nan, DTYPES[ty], order="F")
    compiled(ttlc.check(str(program)), False)["member"](A, B, C, grid=(batch,))
    close(C, np.einsum("mkb,knb->mnb", A.astype(np.float64), B), ty)


def test_k_loop_of_a_single_column_takes_one_step():
    """A gemv's tile of one column keeps one K step a loop step, though its FMAs are few:
    f64 84x84 with A shared on the cpu, all of M in three blocks of 32 rows (12 zmm, 12
    FMAs a step; ``rounds_of_sets`` would give three steps by the FMA count), is one
    loop of one K step and three mul_adds.  The lowered program, run by the interpreter,
    agrees with NumPy."""
    src = member_kernel("f64", "gemv", [("A", (84, 84), True), ("b", (84,), False),
                                        ("c", (84,), False)], attrs=attributes((8, 1), 8))
    program = ttlc.check(src)
    run_passes(program, ["lower-linalg"], PassContext(target=TARGETS["cpu"]))
    assert k_loops(str(program)) == [(1, 3)]
    A, b = rand((84, 84), "f64", 1), rand((84, 3), "f64", 2)
    c = np.full((84, 3), np.nan, order="F")
    compiled(ttlc.check(str(program)), False)["member"](A, b, c, grid=(3,))
    close(c, A @ b, "f64")


@pytest.mark.parametrize("ty,M,N,K,operand", [
    ("f64", 76, 2, 43, "batched"), ("f64", 14, 97, 43, "B"), ("f64", 123, 2, 40, "B"),
    ("f64", 56, 9, 56, "A"), ("f32", 100, 4, 63, "batched"), ("f32", 20, 34, 41, "batched"),
    ("f64", 87, 3, 15, "batched"), ("f32", 3, 117, 44, "A")])
def test_rounds_of_k_steps_agree_with_numpy(ty, M, N, K, operand):
    """gemms whose full tiles' K loops take several K steps a loop step
    (``rounds_of_sets``), with rounds and steps left over, compiled for the cpu with
    default attributes, batched or with A or B shared: each member's C = A B against
    NumPy.  Also run with TTLC_CPU=x86-64-v3 (``make test-cpu-models``)."""
    member_gemm_agrees(ty, M, N, K, operand)


def test_register_tiles_take_the_rest_of_m_in_one_partial_tile():
    """AVX2: the rows left after the full tiles of two_line_rows' height are one partial
    tile of that height (the registers of those rows, the last masked where partial) in
    the first piece's column tiles, as LIBXSMM's AVX2 code takes them; worked out by hand:
    f32 88x116x56 as 32x3 over 64 rows and 24 rows in three ymm by 3 (not 16x4 and 8x3
    pieces; 3 x 3 + 3 of 15 registers), blocks of 3 columns up to 114; f32 82x85x44 the
    last 18 rows in three ymm, the third masked (9 + 3 + 1); f64 25x81x120 16x3 and 9
    rows in three ymm (4 + 4 + 1 rows).  Not for taller tiles than two_line_rows' (f64
    89x41x99, A of 70 KiB in 14 column tiles of 3: 8x6 over 88 rows), nor without a K loop
    (f32 115x62x1: 16x6)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    t = choose_tiles(AVX2, 8, 1, 88, 116, 56, f32, f32, f32)
    assert (t.m_pieces, t.row_n_pieces) == (((64, 32), (24, 32)), (((114, 3), (2, 2)),) * 2)
    t = choose_tiles(AVX2, 8, 1, 82, 85, 44, f32, f32, f32)
    assert (t.m_pieces, t.row_n_pieces) == (((64, 32), (18, 32)), (((84, 3), (1, 1)),) * 2)
    t = choose_tiles(AVX2, 4, 1, 25, 81, 120, f64, f64, f64)
    assert (t.m_pieces, t.row_n_pieces) == (((16, 16), (9, 16)), (((81, 3),),) * 2)
    t = choose_tiles(AVX2, 4, 1, 89, 41, 99, f64, f64, f64)
    assert (t.m, t.n, t.m_pieces) == (8, 6, ((88, 8), (1, 4)))
    assert choose_tiles(AVX2, 8, 1, 115, 62, 1, f32, f32, f32).m_pieces == ((112, 16), (3, 8))


def test_register_tiles_take_few_rows_in_one_partial_tile():
    """AVX2: all of M fewer than a tile of at most four registers of rows is one partial
    tile, costed and held by the registers of M's rows, which alone the CPU computes:
    f64 9x9x56 as 16x3 over 9 rows (three ymm by 3 columns: 9 + 3 + 1, the mask, of 15; not
    8x5 + 8x4 and a masked 4x9), f64 10x9x10 alike, f64 12 rows three whole ymm by 4
    columns (12 + 3 of 15), f32 20x9x20 as 32x3 over 20 rows, f32 17x13x11 in 32x3 and a
    last column; worked out by hand.  Not for one column of more than two registers of
    rows (a gemv's: f64 9 rows in pieces ran 1.07x as fast with A shared; f32 10 rows
    stay one tile of 16), nor where the partial tile would be more than four registers
    (f64 22 rows: pieces of 16 and 6)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    t = choose_tiles(AVX2, 4, 1, 9, 9, 56, f64, f64, f64)
    assert (t.m, t.m_pieces, t.row_n_pieces) == (16, ((9, 16),), (((9, 3),),))
    assert choose_tiles(AVX2, 4, 1, 10, 9, 10, f64, f64, f64).m_pieces == ((10, 16),)
    t = choose_tiles(AVX2, 4, 1, 12, 12, 114, f64, f64, f64)
    assert (t.m_pieces, t.row_n_pieces) == (((12, 16),), (((12, 4),),))
    t = choose_tiles(AVX2, 8, 1, 20, 9, 20, f32, f32, f32)
    assert (t.m_pieces, t.row_n_pieces) == (((20, 32),), (((9, 3),),))
    t = choose_tiles(AVX2, 8, 1, 17, 13, 11, f32, f32, f32)
    assert (t.m_pieces, t.row_n_pieces) == (((17, 32),), (((12, 3), (1, 1)),))
    assert choose_tiles(AVX2, 4, 1, 9, 1, 56, f64, f64, f64).m_pieces != ((9, 16),)
    assert choose_tiles(AVX2, 8, 1, 10, 1, 56, f32, f32, f32).m_pieces == ((10, 16),)
    assert choose_tiles(AVX2, 4, 1, 22, 46, 9, f64, f64, f64).m_pieces[0] == (16, 16)


def test_far_apart_columns_of_a_take_one_register_by_all_of_n():
    """Where A's columns lie far apart and its block is not prefetched (``read_once_a``: a
    work-group's block of a tall matrix smaller than FAR_STREAMED_BYTES), with AVX-512 one
    register's rows by all of N, K steps of one: f32 100x16x16 as 16x16 over 96 rows and
    the last 4 rows in a tile of 16 (one 128-row tile by 2 columns otherwise); f64
    100x9x9 as 8x9, f64 100x16x16 as 8x16 (32x4 otherwise).  Not where N's accumulators,
    a register of A and a broadcast exceed the 32 zmm (f32 N = 31: 33 registers), nor for
    one column (a gemv: one chain of dependent FMAs), nor without broadcast operands
    (AVX2: the other rules' tiles, f32 100x9x9 as 32x3, not 8x9).  A prefetched block
    (``far_a``) takes AVX2's register tiles of one register's rows first (f32 100x16x16:
    16x4, not the 32x2 of a block in the caches)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    t = choose_tiles(cpu, 16, 1, 100, 16, 16, f32, f32, f32, read_once_a=True)
    assert t == Tiles(16, 16, 1, ((96, 16), (4, 16)), ((16, 16),), ())
    near = choose_tiles(cpu, 16, 1, 100, 16, 16, f32, f32, f32)
    assert (near.m, near.n) == (128, 2)
    t = choose_tiles(cpu, 8, 1, 100, 9, 9, f64, f64, f64, read_once_a=True)
    assert (t.m, t.n, t.k, t.m_pieces, t.k_rest) == (8, 9, 1, ((96, 8), (4, 8)), ())
    t = choose_tiles(cpu, 8, 1, 100, 16, 16, f64, f64, f64, read_once_a=True)
    assert (t.m, t.n, t.k) == (8, 16, 1)
    near = choose_tiles(cpu, 8, 1, 100, 16, 16, f64, f64, f64)
    assert (near.m, near.n) == (32, 4)
    for S, N, K, e, target in ((16, 31, 4, f32, cpu), (16, 30, 4, f32, cpu),
                               (16, 1, 24, f32, cpu), (8, 9, 9, f32, AVX2)):
        far = choose_tiles(target, S, 1, 100, N, K, e, e, e, read_once_a=True)
        if N == 30:  # 30 accumulators, A and a broadcast: 32 zmm
            assert (far.m, far.n) == (16, 30)
        else:
            assert far == choose_tiles(target, S, 1, 100, N, K, e, e, e)
    assert (far.m, far.n) == (32, 3)
    far = choose_tiles(AVX2, 8, 1, 100, 16, 16, f32, f32, f32, far_a=True)
    near = choose_tiles(AVX2, 8, 1, 100, 16, 16, f32, f32, f32)
    assert (far.m, far.n, near.m, near.n) == (16, 4, 32, 2)


def test_far_apart_columns_of_c_take_no_tile_of_all_of_m():
    """Where C's columns lie far apart (``far_c``: a work-group's block of a tall matrix),
    no tile takes all of M: f32 100x8x4 with B shared in 64x4 tiles, the last 36 rows one
    partial tile of 64 (not one 128-row tile by 2 columns, C written two whole columns
    at a time), 100x8x2 likewise with K one step of 2; f32 62 rows, less than a tile of
    64, keep their one tile."""
    f32 = SCALAR_TYPES["f32"]
    cpu = TARGETS["cpu"]
    near = choose_tiles(cpu, 16, 1, 100, 8, 4, f32, f32, f32, new_a=True, shared_b=True)
    assert (near.m, near.n, near.m_pieces) == (128, 2, ((100, 128),))
    far = choose_tiles(cpu, 16, 1, 100, 8, 4, f32, f32, f32, new_a=True, shared_b=True,
                       far_c=True)
    assert (far.m, far.n, far.k, far.m_pieces) == (64, 4, 4, ((64, 64), (36, 64)))
    far = choose_tiles(cpu, 16, 1, 100, 8, 2, f32, f32, f32, new_a=True, shared_b=True,
                       far_c=True)
    assert (far.m, far.n, far.k) == (64, 4, 2)
    small = choose_tiles(cpu, 16, 1, 62, 7, 7, f32, f32, f32, new_a=True, shared_b=True,
                         far_c=True)
    assert small.m_pieces == ((62, 64),)


def test_choose_tiles_cpu_streams_a_large_a_in_tall_tiles():
    """AVX-512: an A larger than L1 (128x128 f64: 128 KiB) whose N one tile of 9 columns could
    take (f64 16x9, reading A once, two cache lines of a column at a time) is loaded four
    cache lines of a column per K step, N in the fewest column tiles: f64 32x5 + 32x4, f32
    64x6 + 64x3 (with each batch member's A from memory 16x9 ran at about half of LIBXSMM's
    speed; f64's of equal width, TALL_LAST_COLUMNS); an A within L1 (100x16 f64) keeps the
    tiles of fewer loads (32x4), and AVX2's 15 ymm registers have no tile of 9 columns (8x5
    and 8x4: A read twice)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    big = choose_tiles(cpu, 8, 1, 128, 9, 128, f64, f64, f64, new_a=True)
    assert big.m_pieces == ((128, 32),) and big.row_n_pieces == (((5, 5), (4, 4)),)
    assert big.m * 8 == STREAM_ROW_BYTES
    big32 = choose_tiles(cpu, 16, 1, 128, 9, 128, f32, f32, f32, new_a=True)
    assert big32.m_pieces == ((128, 64),) and big32.row_n_pieces == (((6, 6), (3, 3)),)
    small = choose_tiles(cpu, 8, 1, 100, 16, 16, f64, f64, f64)
    assert (small.m, small.n) == (32, 4)
    avx2 = dataclasses.replace(cpu, register_budget=15 * 32)
    narrow = choose_tiles(avx2, 8, 1, 128, 9, 128, f64, f64, f64)
    assert (narrow.m, narrow.n_pieces) == (8, ((5, 5), (4, 4)))


def test_choose_tiles_cpu_loads_two_lines_of_a_per_k_step():
    """AVX-512: where M has the rows, a K loop's tiles load at least MIN_A_STEP_BYTES of
    A's column per step (two cache lines): f64 72x13x11 in 32-row tiles and 8 rows left,
    not in tiles of S rows (one tile of S rows taking all of N: 0.44-0.97 of LIBXSMM's
    speed with the members from L3); f64 17x13x11 and f32 40x26x11 as one tile of three
    registers.  M below two lines is one tile of two registers (f64 9x13x11)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    t = choose_tiles(cpu, 8, 1, 72, 13, 11, f64, f64, f64)
    assert t.m_pieces == ((64, 32), (8, 8)) and t.m * 8 >= MIN_A_STEP_BYTES
    t = choose_tiles(cpu, 8, 1, 17, 13, 11, f64, f64, f64)
    assert (t.m_pieces, t.n_pieces) == (((17, 32),), ((7, 7), (6, 6)))
    assert computed_rows(17, t.m, 8) * 8 >= MIN_A_STEP_BYTES
    t = choose_tiles(cpu, 16, 1, 40, 26, 11, f32, f32, f32)
    assert t.m_pieces == ((40, 64),) and computed_rows(40, t.m, 16) * 4 >= MIN_A_STEP_BYTES
    assert choose_tiles(cpu, 8, 1, 9, 13, 11, f64, f64, f64).m_pieces == ((9, 16),)


@pytest.mark.parametrize("ty,M,N,K,pieces", [
    ("f32", 62, 4, 119, ((62, 64),)), ("f64", 30, 4, 119, ((30, 32),)),
    ("f32", 58, 43, 58, ((58, 64),)), ("f64", 31, 40, 47, ((31, 32),)),
    ("f32", 56, 9, 56, ((56, 64),)), ("f64", 56, 9, 56, ((32, 32), (24, 32))),
    ("f64", 35, 9, 35, ((35, 64),)), ("f32", 64, 64, 64, ((64, 64),)),
    ("f64", 10, 12, 112, ((10, 16),)), ("f32", 22, 16, 100, ((22, 32),)),
    ("f64", 9, 13, 11, ((9, 16),)), ("f32", 17, 13, 11, ((17, 32),)),
    ("f64", 15, 15, 15, ((15, 16),)), ("f32", 24, 24, 24, ((24, 32),))])
def test_choose_tiles_cpu_one_partial_tile_for_all_of_m(ty, M, N, K, pieces):
    """AVX-512: where M's rows fill a power of two of registers, the last partial, all of
    M may be one tile of those registers (row_pieces' partial tile): f32 62 rows as one
    tile of 64, f64 30 as 32, not 32 + 30-in-32 and 16 + 14-in-16 (with the members from
    L3: f32 62x4x119 at 0.68-0.73 of LIBXSMM against 1.01-1.04, f64 30x4x119 0.44-0.65
    against 0.76-1.06).  Seven registers (f64 56x9x56, tall tiles) are 32 rows and one
    partial tile of the rest, five (f64 35x9x35) one tile by ``whole_m_columns``; two
    too, A's column read once per K step with the last rows' FMAs beside the first's
    (f64 9x9x56 with B shared, from L3: 8 + 1 rows in two passes at 0.88-0.92 of
    LIBXSMM, one tile at 1.18-1.22; f64 15x15x15 0.69 -> 1.07)."""
    t = SCALAR_TYPES[ty]
    tiles_ = choose_tiles(TARGETS["cpu"], 64 // t.size, 1, M, N, K, t, t, t)
    assert tiles_.m_pieces == pieces
    assert sum(extent for extent, _ in pieces) == M


@pytest.mark.parametrize("ty,M,N,K,tile,n", [
    ("f64", 56, 2, 43, 64, 2), ("f64", 35, 9, 35, 64, 3), ("f32", 84, 9, 84, 128, 3),
    ("f32", 97, 2, 116, 128, 2), ("f64", 40, 13, 11, 64, 4)])
def test_choose_tiles_cpu_one_tile_takes_all_of_m_where_the_registers_allow(ty, M, N, K,
                                                                           tile, n):
    """AVX-512, one subgroup: where all of M is one tile (row_pieces) its rows may take
    more than the operands' part of the registers for A's column, with at most as many
    columns as leave two of A's columns and one register more beside the accumulator
    (``whole_m_columns``; f64 56 rows: seven zmm a column, 14 + 14 + 1 of the 32 for two
    columns, 21 + 14 + 1 for three would not fit; with fewer than TALLER_MIN_COLUMNS
    only where N has no more columns: the next test).  Not where M needs more registers
    than that leaves a column (f64 88 rows: eleven), nor where several subgroups share the
    tiles, nor on a GPU."""
    t = SCALAR_TYPES[ty]
    S = 64 // t.size
    got = choose_tiles(TARGETS["cpu"], S, 1, M, N, K, t, t, t)
    assert (got.m, got.n, got.m_pieces) == (tile, n, ((M, tile),))
    registers = computed_rows(M, tile, S) // S
    assert registers * n + 2 * registers + 1 <= 32
    assert choose_tiles(TARGETS["cpu"], 8, 1, 88, 13, 11, *[SCALAR_TYPES["f64"]] * 3).m == 32
    assert choose_tiles(TARGETS["cpu"], S, 2, M, N, K, t, t, t).m < tile
    assert choose_tiles(TARGETS["pvc"], 16, 1, M, N, K, t, t, t).m_pieces == ()


@pytest.mark.parametrize("ty,M,N,K,operand", [
    ("f64", 56, 22, 43, "batched"), ("f64", 35, 9, 35, "A"), ("f32", 84, 9, 84, "B"),
    ("f32", 97, 2, 116, "batched"), ("f64", 40, 13, 11, "A"), ("f64", 9, 9, 56, "B"),
    ("f32", 17, 13, 11, "batched"), ("f64", 10, 12, 112, "A"), ("f32", 24, 24, 24, "B"),
    ("f64", 15, 15, 15, "batched"), ("f32", 20, 9, 20, "A"), ("f64", 56, 2, 43, "A"),
    ("f32", 107, 17, 76, "batched"), ("f64", 53, 19, 58, "B")])
def test_one_tile_of_all_of_m_agrees_with_numpy(ty, M, N, K, operand):
    """The tiles of ``whole_m_columns`` and of two registers over all of M (the rows past
    the last whole register in narrower FMAs with AVX-512, ``mul_add.narrow_last``)
    compiled for the cpu with default attributes, one gemm per batch member (A or B
    shared by all, or neither): C_i = A_i B_i against NumPy for every member."""
    member_gemm_agrees(ty, M, N, K, operand)


def member_gemm_agrees(ty: str, M: int, N: int, K: int, operand: str, batch: int = 5) -> None:
    """One gemm per batch member, A or B shared by all (`operand`) or neither, compiled
    for the cpu with default attributes: C_i = A_i B_i against NumPy for every member."""
    A = rand((M, K) if operand == "A" else (M, K, batch), ty, 1)
    B = rand((K, N) if operand == "B" else (K, N, batch), ty, 2)
    C = np.zeros((M, N, batch), DTYPES[ty], order="F")
    poison(C)
    src = member_kernel(ty, "gemm", [("a", (M, K), operand == "A"), ("b", (K, N), operand == "B"),
                                     ("c", (M, N), False)])
    ttlc.compile(src, target="cpu")["member"](A, B, C, grid=(batch,))
    want = np.einsum(("mk" if operand == "A" else "mkb") + "," +
                     ("kn" if operand == "B" else "knb") + "->mnb",
                     A.astype(np.float64), B.astype(np.float64))
    close(C, want, ty)


def test_choose_tiles_cpu_streams_four_lines_of_a_large_a():
    """AVX-512: an A larger than L1 that is read once per column tile several times
    anyway (N wider than any tile) is loaded at least four cache lines (256 bytes) per K
    step, and tiles of those rows hold as many columns as TALL_ACC_SHARE of the 32 zmm
    allows beside A's column and one register more (``tall_columns``): f64 100x100x100 in
    32x6 (24 zmm, LIBXSMM's tiles), the last 4 rows a tile of one register; f32 in 64x6,
    the last 36 rows a tile of three registers; f32 64x64x64 in 64x6.  A taller tile, all
    of M, leaves two of A's columns: f32 89x72x88 in 96 rows computed (6 zmm) by 3
    columns, 18 + 12 + 1 zmm (a fourth column would need 37)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    zmm = cpu.register_budget // 32
    t = choose_tiles(cpu, 8, 1, 100, 100, 100, f64, f64, f64)
    assert (t.m, t.n) == (32, 6) and t.m * 8 == STREAM_ROW_BYTES
    assert t.m * t.n * 8 == cpu.register_budget * TALL_ACC_SHARE == 24 * zmm
    assert t.m_pieces == ((96, 32), (4, 8)) and t.n_pieces == ((96, 6), (4, 4))
    assert t.row_n_pieces == ()
    t = choose_tiles(cpu, 16, 1, 100, 100, 100, f32, f32, f32)
    assert (t.m, t.n) == (64, 6) and t.m * 4 == STREAM_ROW_BYTES
    assert t.m_pieces == ((64, 64), (36, 64)) and t.n_pieces == ((96, 6), (4, 4))
    assert t.row_n_pieces == ()
    t = choose_tiles(cpu, 16, 1, 64, 64, 64, f32, f32, f32)
    assert (t.m, t.n) == (64, 6) and t.n_pieces == ((60, 6), (4, 4))
    t = choose_tiles(cpu, 16, 1, 89, 72, 88, f32, f32, f32)
    assert (t.m, t.n) == (128, 3) and t.m_pieces == ((89, 128),)
    assert computed_rows(89, 128, 16) * 4 == 6 * zmm
    assert 6 * 3 + 2 * 6 + 1 <= 32 < 6 * 4 + 2 * 6 + 1


def test_choose_tiles_cpu_taller_tiles_take_at_least_three_columns():
    """AVX-512, every tile tall: a tile taller than the tall rows (all of M) is a
    candidate only with TALLER_MIN_COLUMNS or more columns.  f64 55x103x69: all 55 rows
    are 7 zmm, which leave room for 2 columns beside two of A's columns and a register
    (7 * 2 + 14 + 1 <= 32 < 7 * 3 + 14 + 1), so the tall rows' 32x6 and the last 23 rows
    by 6 (3 zmm) take C; f64 40x104x90: 40 rows in 5 zmm take 4 columns (20 + 10 + 1 <=
    32 < 25 + 10 + 1) and keep their one tile of all of M."""
    f64 = SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    assert TALLER_MIN_COLUMNS == 3
    t = choose_tiles(cpu, 8, 1, 55, 103, 69, f64, f64, f64)
    assert (t.m, t.n) == (32, 6) and t.m * 8 == STREAM_ROW_BYTES
    assert t.m_pieces == ((32, 32), (23, 32)) and t.n_pieces == ((102, 6), (1, 1))
    assert 7 * 2 + 14 + 1 <= 32 < 7 * 3 + 14 + 1
    t = choose_tiles(cpu, 8, 1, 40, 104, 90, f64, f64, f64)
    assert (t.m, t.n) == (64, 4) and t.m_pieces == ((40, 64),)
    assert computed_rows(40, 64, 8) == 40 and 20 + 10 + 1 <= 32 < 25 + 10 + 1


@pytest.mark.parametrize("ty,M,N,K,pieces,n", [
    ("f64", 56, 22, 43, ((32, 32), (24, 32)), 6), ("f64", 53, 19, 58, ((32, 32), (21, 32)), 5),
    ("f32", 107, 17, 76, ((64, 64), (43, 64)), 6)])
def test_choose_tiles_cpu_taller_tiles_of_two_columns_only_where_n_is_two(ty, M, N, K,
                                                                          pieces, n):
    """AVX-512, N narrower than the tall rows' tiles would take at once: all of M in one
    tile (f64 56 rows or f32 107 rows: 7 zmm) leaves room for 2 columns, fewer than
    TALLER_MIN_COLUMNS, so the tall rows (32 f64, 64 f32) and a partial tile of the rest
    take C in tiles of at least TALLER_MIN_COLUMNS (f64 22 columns: 6 + 6 + 6 + 4); with
    N = 2 the one tile of all of M (the test above)."""
    t = SCALAR_TYPES[ty]
    S = 64 // t.size
    got = choose_tiles(TARGETS["cpu"], S, 1, M, N, K, t, t, t)
    assert got.m * t.size == STREAM_ROW_BYTES and got.m_pieces == pieces
    assert got.n == n >= TALLER_MIN_COLUMNS
    one = choose_tiles(TARGETS["cpu"], S, 1, M, 2, K, t, t, t)
    assert (one.n, one.m_pieces) == (2, ((M, one.m),)) and one.m * t.size > STREAM_ROW_BYTES


def test_choose_tiles_cpu_tall_tiles_take_a_narrow_n_in_the_fewest_column_tiles():
    """AVX-512: where M has the rows for tiles of four cache lines of A's column
    (STREAM_ROW_BYTES: 32 f64, 64 f32) and N is narrower than a tile of S rows can take,
    those rows take N in the fewest column tiles (f64 9 columns: 32x5 and 32x4, f32 64x6 and
    64x3, the accumulator's 24 zmm at most) and the rows left one partial tile, N in the
    fewest column tiles of equal width (f64 24 rows: three registers by 5 and 4 columns, not
    16x9 and 8x9), also where A is beyond L1 (f64 84x9x84); not where M has fewer rows (f64
    17x13x11) or A fewer bytes (STREAM_A_BYTES), nor on a GPU."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    t = choose_tiles(cpu, 8, 1, 56, 9, 56, f64, f64, f64, new_a=True)
    assert t.m_pieces == ((32, 32), (24, 32)) and t.m * 8 == STREAM_ROW_BYTES
    assert t.row_n_pieces == (((5, 5), (4, 4)), ((5, 5), (4, 4)))
    for (extent, tile), columns in zip(t.m_pieces, t.row_n_pieces):
        rows = computed_rows(extent, tile, 8)
        assert all(rows * n * 8 <= cpu.register_budget * ACC_SHARE for _, n in columns)
    t = choose_tiles(cpu, 16, 1, 100, 9, 100, f32, f32, f32, new_a=True)
    assert t.m_pieces == ((64, 64), (36, 64))  # 36 rows: three registers by 5 and 4
    assert t.row_n_pieces == (((6, 6), (3, 3)), ((5, 5), (4, 4)))
    t = choose_tiles(cpu, 8, 1, 84, 9, 84, f64, f64, f64, new_a=True)
    assert t.m_pieces == ((64, 32), (20, 32))
    assert t.row_n_pieces == (((5, 5), (4, 4)), ((5, 5), (4, 4)))
    t = choose_tiles(cpu, 8, 1, 17, 13, 11, f64, f64, f64)
    assert (t.m_pieces, t.row_n_pieces) == (((17, 32),), ())
    # an A below STREAM_A_BYTES (56x9 f64: a chain's second product) keeps its tiles
    assert 56 * 9 * 8 < STREAM_A_BYTES
    assert choose_tiles(cpu, 8, 1, 56, 9, 9, f64, f64, f64).row_n_pieces == ()
    assert choose_tiles(cpu, 8, 1, 64, 64, 64, f64, f64, f64).m == 32
    assert choose_tiles(TARGETS["pvc"], 16, 1, 56, 9, 56, f64, f64, f64).row_n_pieces == ()


@pytest.mark.parametrize("ty,M,N,K,rows,columns", [
    ("f64", 128, 16, 128, ((128, 32),), (((12, 6), (4, 4)),)),
    ("f64", 117, 16, 61, ((96, 32), (21, 32)), (((12, 6), (4, 4)), ((16, 8),))),
    ("f64", 128, 21, 30, ((128, 32),), (((18, 6), (3, 3)),)),
    ("f32", 123, 16, 104, ((64, 64), (59, 64)), (((12, 6), (4, 4)), ((12, 6), (4, 4))))])
def test_choose_tiles_cpu_tall_tiles_pass_over_a_new_a_fewer_times(ty, M, N, K, rows, columns):
    """AVX-512, each work-group's A new to the caches (``new_a``): where the tall rows'
    widest tiles (6 columns) take N in fewer column tiles than the cost's choice, one
    piece of narrower tiles (N of 16: four 32x4 tiles, A read four times), the tall rows
    take it in the widest (6 + 6 + 4, A read three times: f64 128x16x128 from L3 at 0.79
    of LIBXSMM before, 0.95 after).  An A all work-groups share keeps the cost's tiles
    (with A shared f32 shapes from L3 ran 8% slower in the widest)."""
    t = SCALAR_TYPES[ty]
    S = 64 // t.size
    cpu = TARGETS["cpu"]
    got = choose_tiles(cpu, S, 1, M, N, K, t, t, t, new_a=True)
    assert got.m * t.size == STREAM_ROW_BYTES and M * K * t.size >= STREAM_A_BYTES
    assert (got.m_pieces, got.row_n_pieces) == (rows, columns)
    passes = sum(-(-extent // n) for extent, n in columns[0])  # over A's tall rows
    shared = choose_tiles(cpu, S, 1, M, N, K, t, t, t)
    assert shared.row_n_pieces == () and -(-N // shared.n) > passes


@pytest.mark.parametrize("kind,M,N,K,new,shared", [
    ("avx512", 128, 16, 128, {"32x6", "32x4"}, {"32x4"}),
    ("avx2", 100, 100, 100, {"16x3", "4x3", "16x1", "4x1"}, {"8x5", "4x5"})])
def test_a_new_in_each_work_group_takes_n_in_fewer_passes(kind, M, N, K, new, shared):
    """lower-linalg with each member's A (``subview`` by ``group_id``) against A shared by
    all members (``choose_tiles``' ``new_a``).  AVX-512, f64 128x16x128: 32x6 and 32x4
    tiles (A read three times), with A shared 32x4 alone.  AVX2, f64 100x100x100: 16x3
    tiles, two cache lines of A a K step (``two_line_rows``), the last 4 rows in 4x3 in the
    same blocks of three columns and the last column in 16x1 and 4x1; with A shared, which
    stays in L2, 8x5 and 4x5 (A read 20 times, not 34)."""
    from ttlc.passes import expand, lower_copy
    target = AVX2 if kind == "avx2" else TARGETS["cpu"]
    S = target.vector_bytes // 8

    def tiles_of(shared_a: bool) -> set:
        src = member_kernel("f64", "gemm", [("a", (M, K), shared_a), ("b", (K, N), False),
                                            ("c", (M, N), False)], attrs=attributes((S, 1), S))
        text = str(lower_copy(ttlc.check(src), expand(["lower"]), target))
        return set(re.findall(r"coopmatrix<f64x(\d+x\d+),matrix_acc>", text))

    assert tiles_of(False) == new
    assert tiles_of(True) == shared


@pytest.mark.parametrize("ty,M,N,K,operand", [
    ("f64", 128, 16, 128, "batched"), ("f64", 117, 16, 61, "B"), ("f32", 123, 16, 104, "batched"),
    ("f64", 128, 21, 30, "B"), ("f32", 98, 21, 51, "batched"), ("f32", 128, 7, 128, "batched"),
    ("f64", 110, 7, 80, "A"), ("f32", 120, 9, 120, "A"), ("f64", 59, 9, 115, "batched")])
def test_tall_rows_column_tiles_agree_with_numpy(ty, M, N, K, operand):
    """The tall rows' widest tiles over N of 16 and 21 (the test above), and column
    tiles of equal width (TALL_LAST_COLUMNS, A shared): each member's C = A B against
    NumPy."""
    member_gemm_agrees(ty, M, N, K, operand)


@pytest.mark.parametrize("ty,M,N,K,new_a,shared_b,columns", [
    ("f32", 35, 15, 35, True, True, ((8, 8), (7, 7))), ("f32", 35, 15, 35, True, False, ((15, 5),)),
    ("f32", 35, 15, 35, False, True, ((15, 5),)), ("f64", 17, 15, 58, True, True, ((8, 8), (7, 7))),
    ("f64", 17, 15, 58, False, False, ((15, 5),)), ("f32", 40, 15, 14, True, True, ((15, 5),)),
    ("f32", 89, 11, 69, True, True, ((9, 3), (2, 2))),
    ("f32", 25, 15, 60, True, False, ((8, 8), (7, 7))),
    ("f32", 25, 15, 60, False, False, ((8, 8), (7, 7))),
    ("f64", 12, 15, 60, True, False, ((8, 8), (7, 7))),
    ("f64", 12, 15, 60, False, True, ((8, 8), (7, 7))),
    ("f32", 25, 21, 60, True, False, ((21, 7),)), ("f64", 12, 21, 60, False, False, ((21, 7),)),
    ("f32", 25, 15, 20, True, False, ((15, 5),)), ("f32", 40, 15, 60, False, False, ((15, 5),))])
def test_choose_tiles_cpu_all_of_m_fewest_passes_over_a_new_a(ty, M, N, K, new_a, shared_b,
                                                               columns):
    """AVX-512: a tile of all of M (one piece of rows) over each work-group's own A with B
    shared takes N in the fewest column tiles its registers allow where two take it and K
    is at least FEWEST_PASSES_MIN_K, worked out by hand: f32 35 rows are three zmm (48
    rows computed), at most 8 columns (24 of the 32 zmm, and 8 leave two of A's columns and
    one more register; 15 are more than one pass takes beside one of A's columns, 9), 15
    as narrow as two tiles allow: 8 + 7 (the cost's own choice, one piece of three
    5-column tiles, with A shared or B a member's); f64 17 rows, three zmm, the same.
    Not for a K of 14 (f32 40x15x14), nor where two column tiles cannot take N (f32 89
    rows: six zmm by at most 3 columns).  Whatever is shared where the tile's column is
    two registers (f32 25 rows, f64 12: two zmm, at most 12 columns) and the two tiles
    have at most FEWEST_PASSES_COLUMNS (8): 15 as 8 + 7; not 21 (11 + 10: the cost's 7
    three times), not for a K of 20 nor for three registers (f32 40 rows)."""
    t = SCALAR_TYPES[ty]
    got = choose_tiles(TARGETS["cpu"], 64 // t.size, 1, M, N, K, t, t, t, new_a=new_a,
                       shared_b=shared_b)
    assert len(got.m_pieces) == 1 and got.m_pieces[0][0] == M
    assert got.n_pieces == columns
    assert 20 < FEWEST_PASSES_MIN_K <= 35 and 8 <= FEWEST_PASSES_COLUMNS < 11


@pytest.mark.parametrize("ty,M", [("f32", 25), ("f64", 12)])
@pytest.mark.parametrize("operand", ["batched", "A", "B"])
def test_two_register_tiles_in_two_passes_agree(ty, M, operand):
    """The tiles of two registers of rows by 8 and 7 columns (the test above), each
    member's C = A B against NumPy, whatever is shared."""
    member_gemm_agrees(ty, M, 15, 60, operand)


@pytest.mark.parametrize("shared_b,tiles", [(True, {"64x8", "64x7"}), (False, {"64x5"})])
def test_all_of_m_over_a_new_a_with_b_shared_lowers_and_agrees(shared_b, tiles):
    """lower-linalg on the cpu, f32 35x15x35 with each member's A: with B shared a tile of
    64 rows (35 computed, in three zmm) by 8 and 7 columns (the test above), with B a
    member's by 5 three times.  The compiled kernel agrees with NumPy, as does f64
    17x15x58 (8 + 7)."""
    from ttlc.passes import expand, lower_copy
    src = member_kernel("f32", "gemm", [("a", (35, 35), False), ("b", (35, 15), shared_b),
                                        ("c", (35, 15), False)])
    text = str(lower_copy(ttlc.check(src), expand(["lower"]), TARGETS["cpu"]))
    assert set(re.findall(r"coopmatrix<f32x(\d+x\d+),matrix_acc>", text)) == tiles
    member_gemm_agrees("f32", 35, 15, 35, "B" if shared_b else "batched")
    member_gemm_agrees("f64", 17, 15, 58, "B" if shared_b else "batched")


#: (type, M, N, K, C's row pieces, column pieces) of AVX-512 tiles of all of M, by hand:
#: three zmm of rows (f32 35 rows, 48 computed) by 9 columns is 27 accumulators, one of A's
#: columns (3) and a register more: 31 of the 32 zmm (two of A's columns would take 34:
#: K steps of one); six zmm (f64 43 rows) by 4: 24 + 6 + 1; five (f32 72 rows, f64 37) by
#: 5: 25 + 5 + 1.  Not four zmm by 9 (36 accumulators: f32 56x9x20 by 3), two zmm
#: (ONE_PASS_MIN_REGISTERS: f32 17x13x11 in 7 + 6, K steps of two), nor N beyond one pass
#: (f64 51 rows, 7 zmm, by at most 3: the tall rows' 32x6 and 32x5; f32 35x18: by 6)
ONE_PASS = [("f32", 35, 9, 35, ((35, 64),), ((9, 9),)), ("f64", 20, 9, 20, ((20, 32),), ((9, 9),)),
            ("f64", 43, 4, 86, ((43, 64),), ((4, 4),)), ("f32", 72, 5, 77, ((72, 128),), ((5, 5),)),
            ("f64", 37, 5, 75, ((37, 64),), ((5, 5),)), ("f32", 56, 9, 20, ((56, 64),), ((9, 3),)),
            ("f32", 17, 13, 11, ((17, 32),), ((7, 7), (6, 6))),
            ("f64", 51, 11, 37, ((32, 32), (19, 32)), ((6, 6), (5, 5))),
            ("f32", 35, 18, 58, ((35, 64),), ((18, 6),))]


@pytest.mark.parametrize("new_a,shared_b", [(True, False), (False, False), (True, True)],
                         ids=["batched", "A-shared", "B-shared"])
@pytest.mark.parametrize("ty,M,N,K,rows,columns", ONE_PASS)
def test_choose_tiles_cpu_all_of_m_and_n_in_one_pass(ty, M, N, K, rows, columns, new_a,
                                                     shared_b):
    """AVX-512: a tile of all of M of three registers or more takes all of N where its
    accumulators fit beside one of A's columns and one register (``one_pass``: C in one
    pass over A), whatever is shared (ONE_PASS above)."""
    t = SCALAR_TYPES[ty]
    got = choose_tiles(TARGETS["cpu"], 64 // t.size, 1, M, N, K, t, t, t, new_a=new_a,
                       shared_b=shared_b)
    assert got.m_pieces == rows
    assert (got.row_n_pieces[0] if got.row_n_pieces else got.n_pieces) == columns
    if len(columns) == 1 and columns[0][1] == N:
        zmm = computed_rows(M, rows[0][1], 64 // t.size) * t.size // 64
        assert zmm >= ONE_PASS_MIN_REGISTERS and zmm * N + zmm + 1 <= 32
        assert got.k == 1 or zmm * N + 2 * zmm + 1 <= 32


@pytest.mark.parametrize("operand", ["batched", "A", "B"])
def test_all_of_m_and_n_in_one_pass_lowers_and_agrees(operand):
    """lower-linalg on the cpu: f32 35x9x35 is one 64x9 accumulator tile (the test above)
    whatever is shared; the compiled kernels of ONE_PASS's one-pass shapes agree with
    NumPy."""
    from ttlc.passes import expand, lower_copy
    src = member_kernel("f32", "gemm", [("a", (35, 35), operand == "A"),
                                        ("b", (35, 9), operand == "B"), ("c", (35, 9), False)])
    text = str(lower_copy(ttlc.check(src), expand(["lower"]), TARGETS["cpu"]))
    assert set(re.findall(r"coopmatrix<f32x(\d+x\d+),matrix_acc>", text)) == {"64x9"}
    for ty, M, N, K, _, columns in ONE_PASS:
        if columns == ((N, N),):
            member_gemm_agrees(ty, M, N, K, operand)


@pytest.mark.parametrize("ty,M,N,K,new_a,columns", [
    ("f32", 120, 9, 120, True, ((6, 6), (3, 3))), ("f32", 120, 9, 120, False, ((5, 5), (4, 4))),
    ("f32", 128, 7, 128, True, ((4, 4), (3, 3))), ("f32", 118, 8, 109, True, ((6, 6), (2, 2))),
    ("f32", 118, 8, 109, False, ((8, 4),)), ("f64", 110, 7, 80, True, ((4, 4), (3, 3))),
    ("f64", 120, 10, 115, True, ((10, 5),)), ("f64", 120, 12, 115, True, ((12, 6),))])
def test_choose_tiles_cpu_tall_rows_widest_or_equal_column_tiles(ty, M, N, K, new_a, columns):
    """AVX-512: the tall rows take N in the fewest column tiles, the widest (6 columns)
    where each work-group's A is new and the last tile is at least TALL_LAST_COLUMNS wide
    (f32: 2; f64: 6, so f64's are always of equal width), else of equal width (f32 7
    columns: 4 + 3, not 6 + 1); with A shared by all work-groups always of equal width."""
    t = SCALAR_TYPES[ty]
    S = 64 // t.size
    got = choose_tiles(TARGETS["cpu"], S, 1, M, N, K, t, t, t, new_a=new_a)
    assert got.m * t.size == STREAM_ROW_BYTES and got.row_n_pieces[0] == columns
    widest = accumulator_bytes(TARGETS["cpu"].register_budget) // (got.m * t.size)
    tiles = sum(-(-extent // n) for extent, n in columns)
    assert widest == 6 and tiles == -(-N // widest)  # as few column tiles as the widest
    last = N % widest
    equal = not new_a or 0 < last < TALL_LAST_COLUMNS[ty]
    assert (columns[0][1] < widest) == (equal and last != 0)


def test_choose_tiles_cpu_tall_tiles_step_k_by_one():
    """AVX-512: tiles of STREAM_ROW_BYTES of A's column take K one step at a time, also
    where the cost picks them or N is wider than any tile (f64 62x4x119 in 32x4 tiles, f32
    100x100x100 in 64x6: in 64x4 tiles, eight lines of A a step ran at 0.71-0.76 of
    LIBXSMM's speed with the members from L3, four at 0.97-1.08), and so do tiles of three
    registers (f64 24x13x11: six lines a step would pass STREAM_ROW_BYTES); tiles of two
    registers keep their K step of two (f64 16x13x11, 9x13x11)."""
    f32, f64 = SCALAR_TYPES["f32"], SCALAR_TYPES["f64"]
    cpu = TARGETS["cpu"]
    t = choose_tiles(cpu, 8, 1, 62, 4, 119, f64, f64, f64)
    assert (t.m, t.n, t.k, t.k_rest) == (32, 4, 1, ()) and t.m * 8 == STREAM_ROW_BYTES
    t = choose_tiles(cpu, 16, 1, 100, 100, 100, f32, f32, f32)
    assert (t.m, t.n, t.k, t.k_rest) == (64, 6, 1, ())
    assert choose_tiles(cpu, 8, 1, 56, 9, 56, f64, f64, f64).k == 1  # tall_rows
    t = choose_tiles(cpu, 8, 1, 24, 13, 11, f64, f64, f64)
    assert (t.m_pieces, t.k, t.k_rest) == (((24, 32),), 1, ())
    assert computed_rows(24, 32, 8) * 8 * 2 > STREAM_ROW_BYTES
    for M in (16, 9):
        t = choose_tiles(cpu, 8, 1, M, 13, 11, f64, f64, f64)
        assert (t.m, t.k, t.k_rest) == (16, 2, (1,))


@pytest.mark.parametrize("size,tile,unit", [(35, 32, 8), (56, 32, 8), (9, 16, 16), (120, 32, 16),
                                            (7, 8, 8), (64, 32, 8), (100, 64, 16), (56, 32, 16),
                                            (84, 64, 16), (60, 32, 8), (72, 64, 16)])
def test_row_pieces_cover_the_rows_with_power_of_two_tiles(size, tile, unit):
    """The pieces cover M in order; every tile is a power-of-two multiple of the subgroup
    size, at most the main tile; only the last piece is partial, and then it leaves no
    register of `unit` rows idle: below `unit` rows, or the power of two of registers
    its rows fill (f32 56 rows in tiles of 32: 32, then 24 as 32 rows, two registers)."""
    pieces = row_pieces(size, tile, unit)
    assert sum(e for e, _ in pieces) == size
    for extent, t in pieces:
        assert t % unit == 0 and t & (t - 1) == 0 and t <= max(tile, unit)
    assert all(e % t == 0 for e, t in pieces[:-1])
    last_extent, last_tile = pieces[-1]
    assert last_extent % last_tile == 0 or last_extent < unit == last_tile or \
        unit < last_extent and -(-last_extent // unit) * unit == last_tile
    registers = sum(-(-e // unit) for e, _ in pieces)  # as many as the rows need
    assert registers == -(-size // unit)


@pytest.mark.parametrize("size,tile,unit,want", [
    (56, 32, 16, ((32, 32), (24, 32))), (84, 64, 16, ((64, 64), (20, 32))),
    (60, 32, 8, ((32, 32), (28, 32))), (52, 32, 8, ((32, 32), (16, 16), (4, 8))),
    (56, 32, 8, ((32, 32), (16, 16), (8, 8))),
    (72, 64, 16, ((64, 64), (8, 16))), (120, 32, 16, ((96, 32), (24, 32)))])
def test_row_pieces_take_a_remainder_of_registers_in_one_partial_tile(size, tile, unit, want):
    """A remainder whose registers of `unit` rows number a power of two, the last
    partial, is one partial tile (f32 56: 32, then 24 rows as 32 -- the FMAs of 16 + 8,
    one piece less); one of whole registers, or of three, keeps its pieces."""
    assert row_pieces(size, tile, unit) == want


@pytest.mark.parametrize("size,tile,unit,want,computed", [
    (56, 32, 8, ((32, 32), (24, 32)), 24), (52, 32, 8, ((32, 32), (20, 32)), 24),
    (100, 64, 16, ((64, 64), (36, 64)), 48), (17, 32, 8, ((17, 32),), 24),
    (40, 32, 8, ((32, 32), (8, 8)), 8), (48, 32, 8, ((32, 32), (16, 16)), 16),
    (72, 64, 16, ((64, 64), (8, 16)), 16), (60, 32, 8, ((32, 32), (28, 32)), 32)])
def test_row_pieces_with_idle_registers_take_any_remainder_in_one_tile(size, tile, unit, want,
                                                                      computed):
    """Where a partial tile's registers past its rows cost nothing (one subgroup on the
    CPU), a remainder of more than `unit` rows is one partial tile whatever its registers
    number (f64 56 in tiles of 32: 32, then 24 in 32, three registers computed, checked
    by hand: 24 / 8); a remainder of whole power-of-two registers or below `unit` rows is
    the tile it was."""
    pieces = row_pieces(size, tile, unit, idle=True)
    assert pieces == want and sum(e for e, _ in pieces) == size
    extent, last = pieces[-1]
    assert computed_rows(extent, last, unit) == computed


@pytest.mark.parametrize("K,k,want", [(56, 16, (8, ())), (35, 16, (16, (2, 1))), (7, 8, (4, (2, 1))),
                                      (10, 2, (2, ())), (3, 2, (2, (1,))), (1, 2, (1, ()))])
def test_k_steps(K, k, want):
    """The loop's step and the steps after it add up to K (checked by hand: 56 = 7 x 8;
    35 = 2 x 16 + 2 + 1; 7 = 4 + 2 + 1)."""
    step, rest = k_steps(K, k)
    assert (step, rest) == want and K - K % step + sum(rest) == K


@pytest.mark.parametrize("subgroups", [1, 2, 4])
def test_choose_tiles_cpu_subgroups_share_registers(subgroups):
    """On the CPU the subgroups of a work-group run in lockstep on one thread: together
    their accumulators fit the accumulator's share of the 32 zmm registers (64 bytes each;
    f64 broadcasts B from memory: ACC_SHARE)."""
    f64 = SCALAR_TYPES["f64"]
    tiles = choose_tiles(TARGETS["cpu"], 8, subgroups, 64, 64, 64, f64, f64, f64)
    assert subgroups * tiles.m * tiles.n * 8 <= 32 * 64 * ACC_SHARE
    assert subgroups * tiles.m * tiles.n * 8 > 32 * 64 * ACC_SHARE / 2  # and use that share


def test_choose_tiles_rounds_over_the_subgroup_grid():
    """Two subgroups along x share the rows of tiles: a 16-row C gets two 8-row tiles,
    one per subgroup, rather than one 16-row tile leaving a subgroup idle."""
    f64 = SCALAR_TYPES["f64"]
    tiles = choose_tiles(TARGETS["cpu"], 8, (2, 1), 16, 8, 8, f64, f64, f64)
    assert -(-16 // tiles.m) == 2 and tiles.n == 8


def test_choose_tiles_spreads_over_subgroups():
    f32 = SCALAR_TYPES["f32"]
    one = choose_tiles(TARGETS["interp"], 16, 1, 64, 64, 64, f32, f32, f32)
    four = choose_tiles(TARGETS["interp"], 16, 4, 64, 64, 64, f32, f32, f32)
    tiles = lambda t: -(-64 // t.m) * -(-64 // t.n)  # noqa: E731
    assert tiles(one) == 1 and tiles(four) >= 4
