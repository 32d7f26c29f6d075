"""Collective BLAS-like instructions on every target (interp, cpu), against NumPy.

gemm (every transpose combination), gemv, ger, hadamard, axpby, sum, cumsum for f32,
f64, c64 and i32, mixed precision (16-bit floats and i8 into wider outputs), static and
dynamic shapes, strided operands, beta = 0 with NaN in the output (the output is not
read: BLAS convention), and ``.atomic`` updates with beta 1 (and 0) from many
work-groups.  Expected values are computed in float64/complex128/int64.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import interp_testing
from interp_testing import DTYPES, EPS, farray, run

TYPES = ["f32", "f64", "c64", "i32"]
ALPHA = {"f32": 1.5, "f64": -0.75, "c64": 1 + 2j, "i32": 3, "f16": 1.5, "bf16": 0.5, "i8": 2}
BETA = {"f32": -0.5, "f64": 2.0, "c64": 0.5 - 1j, "i32": -2, "f16": 1.25, "bf16": -1.0, "i8": 1}


def rand(shape, ty: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ty in ("i8", "i16", "i32", "i64"):
        x = rng.integers(-9, 10, shape)
    elif ty in ("c32", "c64"):
        x = rng.integers(-8, 9, shape) / 4 + 1j * rng.integers(-8, 9, shape) / 4
    else:
        x = rng.integers(-16, 17, shape) / 8  # exact in every float type
    return farray(x, DTYPES[ty])


def wide(x) -> np.ndarray:
    """The exact value of an input array: complex128, float64 or int64."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind in "iu":
        return x.astype(np.int64)
    return x.astype(np.float64)


def check(got, expected, ty: str):
    if ty.startswith("i"):
        assert got.dtype == DTYPES[ty]
        np.testing.assert_array_equal(got.astype(np.int64), expected)
    else:
        tol = 8 * EPS[ty]
        np.testing.assert_allclose(wide(got), expected, rtol=tol, atol=tol * max(1.0, np.abs(expected).max(initial=0)))


def mtype(ty: str, shape, dynamic: bool) -> str:
    dims = "".join("x?" if dynamic else f"x{s}" for s in shape)
    return f"memref<{ty}{dims}>"


def op(x, t: str):
    return x.T if t == "t" else x


# ---- gemm -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("ta,tb", [("n", "n"), ("n", "t"), ("t", "n"), ("t", "t")])
@pytest.mark.parametrize("ty", TYPES)
def test_gemm(ty, ta, tb, dynamic):
    M, N, K = 5, 7, 3
    ashape = (M, K) if ta == "n" else (K, M)
    bshape = (K, N) if tb == "n" else (N, K)
    src = f"""func @k(%alpha: {ty}, %A: {mtype(ty, ashape, dynamic)}, %B: {mtype(ty, bshape, dynamic)},
                     %beta: {ty}, %C: {mtype(ty, (M, N), dynamic)}) {{
        gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C
    }}"""
    A, B, C = rand(ashape, ty, 1), rand(bshape, ty, 2), rand((M, N), ty, 3)
    expected = ALPHA[ty] * (op(wide(A), ta) @ op(wide(B), tb)) + BETA[ty] * wide(C)
    run(src, ALPHA[ty], A, B, BETA[ty], C)
    check(C, expected, ty)


@pytest.mark.parametrize("ta,tb", [("n", "n"), ("t", "t")])
@pytest.mark.parametrize("ab,c", [("f16", "f32"), ("bf16", "f32"), ("f16", "f64"), ("i8", "i32"),
                                  ("i16", "i64"), ("f32", "c64")])
def test_gemm_mixed_precision(ab, c, ta, tb):
    """Inputs promoted to the output type; alpha of the input type, beta of the output's."""
    M, N, K = 6, 4, 9
    ashape = (M, K) if ta == "n" else (K, M)
    bshape = (K, N) if tb == "n" else (N, K)
    src = f"""func @k(%alpha: {ab}, %A: memref<{ab}x?x?>, %B: memref<{ab}x?x?>, %beta: {c},
                     %C: memref<{c}x?x?>) {{
        gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C
    }}"""
    A, B, C = rand(ashape, ab, 4), rand(bshape, ab, 5), rand((M, N), c, 6)
    alpha, beta = ALPHA.get(ab, 2), BETA.get(c, -1)
    if c.startswith("i"):
        alpha, beta = 2, -1
    expected = alpha * (op(wide(A), ta) @ op(wide(B), tb)) + beta * wide(C)
    run(src, alpha, A, B, beta, C)
    check(C, expected, c)


@pytest.mark.parametrize("ty", ["f16", "bf16"])
def test_gemm_16bit_output(ty):
    """16-bit float outputs: accumulated in f32 and rounded once (a few ulps of the type)."""
    src = f"""func @k(%alpha: {ty}, %A: memref<{ty}x?x?>, %B: memref<{ty}x?x?>, %beta: {ty}, %C: memref<{ty}x?x?>) {{
        gemm %alpha, %A, %B, %beta, %C
    }}"""
    A, B, C = rand((8, 12), ty, 1), rand((12, 5), ty, 2), rand((8, 5), ty, 3)
    expected = 0.5 * wide(A) @ wide(B) + 1.5 * wide(C)
    run(src, 0.5, A, B, 1.5, C)
    assert C.dtype == DTYPES[ty]
    np.testing.assert_allclose(wide(C), expected, rtol=EPS[ty], atol=EPS[ty] * np.abs(expected).max())


def test_gemm_mixed_input_types():
    """promote(f32, f64) = f64: A f32, B f64, C f64; and i8 x f16 -> f32."""
    src = """func @k(%alpha: f32, %A: memref<f32x3x4>, %B: memref<f64x4x2>, %beta: f64, %C: memref<f64x3x2>) {
        gemm %alpha, %A, %B, %beta, %C
    }"""
    A, B, C = rand((3, 4), "f32", 1), rand((4, 2), "f64", 2), rand((3, 2), "f64", 3)
    expected = 0.5 * wide(A) @ wide(B) + 3.0 * wide(C)
    run(src, 0.5, A, B, 3.0, C)
    check(C, expected, "f64")
    src = """func @k(%alpha: i8, %A: memref<i8x3x4>, %B: memref<f16x4x2>, %beta: f32, %C: memref<f32x3x2>) {
        gemm %alpha, %A, %B, %beta, %C
    }"""
    A, B, C = rand((3, 4), "i8", 1), rand((4, 2), "f16", 2), rand((3, 2), "f32", 3)
    expected = 2 * wide(A) @ wide(B) + 0.25 * wide(C)
    run(src, 2, A, B, 0.25, C)
    check(C, expected, "f32")


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (17, 3, 33), (4, 9, 0), (0, 5, 3), (33, 65, 2)])
def test_gemm_dynamic_shapes(M, N, K):
    """One compiled kernel, many shapes (K = 0 leaves beta * C, empty C is a no-op)."""
    src = """func @k(%alpha: f64, %A: memref<f64x?x?>, %B: memref<f64x?x?>, %beta: f64, %C: memref<f64x?x?>) {
        gemm %alpha, %A, %B, %beta, %C
    }"""
    A, B, C = rand((M, K), "f64", 1), rand((K, N), "f64", 2), rand((M, N), "f64", 3)
    expected = 2.0 * wide(A) @ wide(B) + 0.5 * wide(C)
    run(src, 2.0, A, B, 0.5, C)
    check(C, expected, "f64")


def test_gemm_on_strided_subviews():
    """Operands are views into larger arrays (column stride > rows); only the view of C
    changes."""
    src = """func @k(%A: memref<f32x8x8>, %B: memref<f32x8x8>, %C: memref<f32x10x10>) {
        %a = subview %A[1:4, 2:5] : memref<f32x4x5,strided<1,8>>
        %b = subview %B[0:4, 3:4] : memref<f32x4x4,strided<1,8>>
        %c = subview %C[5:5, 6:4] : memref<f32x5x4,strided<1,10>>
        %alpha = constant 1.0 : f32
        %beta = constant 1.0 : f32
        gemm.t.n %alpha, %a, %b, %beta, %c
    }"""
    A, B, C = rand((8, 8), "f32", 1), rand((8, 8), "f32", 2), rand((10, 10), "f32", 3)
    expected = wide(C).copy()
    expected[5:10, 6:10] += wide(A)[1:5, 2:7].T @ wide(B)[0:4, 3:7]
    run(src, A, B, C)
    check(C, expected, "f32")


# ---- gemv, ger, hadamard -----------------------------------------------------------------
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("ta", ["n", "t"])
@pytest.mark.parametrize("ty", TYPES)
def test_gemv(ty, ta, dynamic):
    M, K = 6, 5
    ashape = (M, K) if ta == "n" else (K, M)
    src = f"""func @k(%alpha: {ty}, %A: {mtype(ty, ashape, dynamic)}, %b: {mtype(ty, (K,), dynamic)},
                     %beta: {ty}, %c: {mtype(ty, (M,), dynamic)}) {{
        gemv.{ta} %alpha, %A, %b, %beta, %c
    }}"""
    A, b, c = rand(ashape, ty, 1), rand((K,), ty, 2), rand((M,), ty, 3)
    expected = ALPHA[ty] * (op(wide(A), ta) @ wide(b)) + BETA[ty] * wide(c)
    run(src, ALPHA[ty], A, b, BETA[ty], c)
    check(c, expected, ty)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("ty", TYPES)
def test_ger(ty, dynamic):
    M, N = 7, 4
    src = f"""func @k(%alpha: {ty}, %a: {mtype(ty, (M,), dynamic)}, %b: {mtype(ty, (N,), dynamic)},
                     %beta: {ty}, %C: {mtype(ty, (M, N), dynamic)}) {{
        ger %alpha, %a, %b, %beta, %C
    }}"""
    a, b, C = rand((M,), ty, 1), rand((N,), ty, 2), rand((M, N), ty, 3)
    # a b^T: no conjugation for complex
    expected = ALPHA[ty] * (wide(a)[:, None] * wide(b)[None, :]) + BETA[ty] * wide(C)
    run(src, ALPHA[ty], a, b, BETA[ty], C)
    check(C, expected, ty)


@pytest.mark.parametrize("shape", [(11,), (6, 5)])
@pytest.mark.parametrize("ty", TYPES)
def test_hadamard(ty, shape):
    src = f"""func @k(%alpha: {ty}, %A: {mtype(ty, shape, True)}, %B: {mtype(ty, shape, False)},
                     %beta: {ty}, %C: {mtype(ty, shape, True)}) {{
        hadamard %alpha, %A, %B, %beta, %C
    }}"""
    A, B, C = rand(shape, ty, 1), rand(shape, ty, 2), rand(shape, ty, 3)
    expected = ALPHA[ty] * wide(A) * wide(B) + BETA[ty] * wide(C)
    run(src, ALPHA[ty], A, B, BETA[ty], C)
    check(C, expected, ty)


# ---- axpby, sum, cumsum --------------------------------------------------------------------
@pytest.mark.parametrize("case", ["0", "1", "2n", "2t"])
@pytest.mark.parametrize("ty", TYPES)
def test_axpby(ty, case):
    """B := alpha op(A) + beta B; .t transposes matrices and is ignored for order 0/1."""
    shapes = {"0": ((), ()), "1": ((9,), (9,)), "2n": ((4, 6), (4, 6)), "2t": ((6, 4), (4, 6))}
    ashape, bshape = shapes[case]
    t = "t" if case in ("2t", "1", "0") else "n"
    src = f"""func @k(%alpha: {ty}, %A: {mtype(ty, ashape, True)}, %beta: {ty}, %B: {mtype(ty, bshape, False)}) {{
        axpby.{t} %alpha, %A, %beta, %B
    }}"""
    A, B = rand(ashape, ty, 1), rand(bshape, ty, 2)
    expected = ALPHA[ty] * op(wide(A), "t" if case == "2t" else "n") + BETA[ty] * wide(B)
    run(src, ALPHA[ty], A, BETA[ty], B)
    check(B, expected, ty)


def test_axpby_mixed_precision():
    src = """func @k(%alpha: f16, %A: memref<f16x5x3>, %beta: f32, %B: memref<f32x3x5>) {
        axpby.t %alpha, %A, %beta, %B
    }"""
    A, B = rand((5, 3), "f16", 1), rand((3, 5), "f32", 2)
    expected = 0.5 * wide(A).T - 2.0 * wide(B)
    run(src, 0.5, A, -2.0, B)
    check(B, expected, "f32")


@pytest.mark.parametrize("case", ["vector.n", "vector.t", "scalar"])
@pytest.mark.parametrize("ty", TYPES)
def test_sum(ty, case):
    """sum to a vector (row sums of op(A)) and to a scalar (all of a vector)."""
    if case == "scalar":
        ashape, bshape, t = (13,), (), "n"
    else:
        t = case[-1]
        ashape, bshape = ((5, 8), (5,)) if t == "n" else ((8, 5), (5,))
    src = f"""func @k(%alpha: {ty}, %A: {mtype(ty, ashape, True)}, %beta: {ty}, %B: {mtype(ty, bshape, True)}) {{
        sum.{t} %alpha, %A, %beta, %B
    }}"""
    A, B = rand(ashape, ty, 1), rand(bshape, ty, 2)
    total = wide(A).sum() if case == "scalar" else op(wide(A), t).sum(axis=1)
    expected = ALPHA[ty] * total + BETA[ty] * wide(B)
    run(src, ALPHA[ty], A, BETA[ty], B)
    check(B, expected, ty)


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("ty", TYPES)
def test_cumsum_3d(ty, mode):
    shape = (4, 5, 6)
    src = f"""func @k(%alpha: {ty}, %A: {mtype(ty, shape, False)}, %beta: {ty}, %B: {mtype(ty, shape, True)}) {{
        cumsum %alpha, %A, {mode}, %beta, %B
    }}"""
    A, B = rand(shape, ty, 1), rand(shape, ty, 2)
    # B[.., j, ..] = alpha sum_{i <= j} A[.., i, ..] + beta B[.., j, ..], written as a loop
    x = wide(A)
    acc = np.zeros_like(x)
    running = np.zeros_like(np.take(x, 0, axis=mode))
    for j in range(shape[mode]):
        running = running + np.take(x, j, axis=mode)
        idx = [slice(None)] * 3
        idx[mode] = j
        acc[tuple(idx)] = running
    expected = ALPHA[ty] * acc + BETA[ty] * wide(B)
    run(src, ALPHA[ty], A, BETA[ty], B)
    check(B, expected, ty)


def test_cumsum_1d_mixed():
    src = """func @k(%alpha: f16, %A: memref<f16x?>, %beta: f32, %B: memref<f32x?>) {
        cumsum %alpha, %A, 0, %beta, %B
    }"""
    A, B = rand((20,), "f16", 1), rand((20,), "f32", 2)
    expected = 2.0 * np.cumsum(wide(A)) + 0.5 * wide(B)
    run(src, 2.0, A, 0.5, B)
    check(B, expected, "f32")


# ---- beta = 0 overwrites NaN ----------------------------------------------------------------
BETA0 = {
    "gemm": ("%alpha, %A, %B, %beta, %C", [(3, 4), (4, 5)], (3, 5),
             lambda a, A, B: a * A @ B),
    "gemm.t.t": ("%alpha, %A, %B, %beta, %C", [(4, 3), (5, 4)], (3, 5),
                 lambda a, A, B: a * A.T @ B.T),
    "gemv": ("%alpha, %A, %B, %beta, %C", [(3, 4), (4,)], (3,), lambda a, A, B: a * A @ B),
    "ger": ("%alpha, %A, %B, %beta, %C", [(3,), (4,)], (3, 4), lambda a, A, B: a * np.outer(A, B)),
    "hadamard": ("%alpha, %A, %B, %beta, %C", [(3, 4), (3, 4)], (3, 4), lambda a, A, B: a * A * B),
    "axpby": ("%alpha, %A, %beta, %C", [(3, 4)], (3, 4), lambda a, A: a * A),
    "axpby.t": ("%alpha, %A, %beta, %C", [(4, 3)], (3, 4), lambda a, A: a * A.T),
    "sum": ("%alpha, %A, %beta, %C", [(3, 4)], (3,), lambda a, A: a * A.sum(axis=1)),
    "sum.scalar": ("%alpha, %A, %beta, %C", [(7,)], (), lambda a, A: a * A.sum()),
    "cumsum": ("%alpha, %A, 1, %beta, %C", [(3, 4)], (3, 4), lambda a, A: a * np.cumsum(A, axis=1)),
}


@pytest.mark.parametrize("ty", ["f32", "f64", "c64"])
@pytest.mark.parametrize("name", list(BETA0))
def test_beta_zero_overwrites_nan(name, ty):
    """beta = 0 (a constant or an argument) never reads the output: NaN and inf in C
    are overwritten (BLAS convention), 0 * NaN is not propagated."""
    operands, in_shapes, out_shape, fn = BETA0[name]
    inst = name.replace(".scalar", "")
    letters = ["A", "B"][:len(in_shapes)]
    params = ", ".join(f"%{n}: {mtype(ty, s, True)}" for n, s in zip(letters, in_shapes))
    for beta_src in ("arg", "const"):
        beta_param = f", %beta: {ty}" if beta_src == "arg" else ""
        beta_def = "" if beta_src == "arg" else f"%beta = constant {'[0.0, 0.0]' if ty == 'c64' else '0.0'} : {ty}"
        src = f"""func @k(%alpha: {ty}, {params}, %C: {mtype(ty, out_shape, True)}{beta_param}) {{
            {beta_def}
            {inst} {operands}
        }}"""
        ins = [rand(s, ty, k + 1) for k, s in enumerate(in_shapes)]
        C = farray(np.full(out_shape, np.nan), DTYPES[ty])
        if C.size > 1:
            C.reshape(-1, order="F")[1] = np.inf
        args = [ALPHA[ty], *ins, C] + ([0.0] if beta_src == "arg" else [])
        run(src, *args)
        expected = fn(ALPHA[ty], *map(wide, ins))
        assert np.isfinite(C).all(), (name, beta_src)
        check(C, expected, ty)


# ---- .atomic ---------------------------------------------------------------------------------
ATOMIC = {
    "gemm": ("%alpha, %A, %B, %beta, %C", [(3, 4), (4, 5)], (3, 5), lambda a, A, B: a * A @ B),
    "gemm.n.t": ("%alpha, %A, %B, %beta, %C", [(3, 4), (5, 4)], (3, 5), lambda a, A, B: a * A @ B.T),
    "gemv.t": ("%alpha, %A, %B, %beta, %C", [(4, 3), (4,)], (3,), lambda a, A, B: a * A.T @ B),
    "ger": ("%alpha, %A, %B, %beta, %C", [(3,), (4,)], (3, 4), lambda a, A, B: a * np.outer(A, B)),
    "hadamard": ("%alpha, %A, %B, %beta, %C", [(6,), (6,)], (6,), lambda a, A, B: a * A * B),
    "axpby": ("%alpha, %A, %beta, %C", [(3, 4)], (3, 4), lambda a, A: a * A),
    "axpby.scalar": ("%alpha, %A, %beta, %C", [()], (), lambda a, A: a * A),
    "sum": ("%alpha, %A, %beta, %C", [(3, 4)], (3,), lambda a, A: a * A.sum(axis=1)),
    "sum.scalar": ("%alpha, %A, %beta, %C", [(9,)], (), lambda a, A: a * A.sum()),
    "cumsum": ("%alpha, %A, 0, %beta, %C", [(5, 2)], (5, 2), lambda a, A: a * np.cumsum(A, axis=0)),
}


@pytest.mark.parametrize("beta", [1, 0])
@pytest.mark.parametrize("ty", ["f32", "f64", "i32", "c64"])
@pytest.mark.parametrize("name", list(ATOMIC))
def test_atomic_accumulates_over_work_groups(name, ty, beta):
    """.atomic with constant beta 1: every work-group adds alpha op(...) to the output
    (C + G alpha AB for G groups); with beta 0 each group stores alpha AB (atomically)."""
    operands, in_shapes, out_shape, fn = ATOMIC[name]
    parts = name.replace(".scalar", "").split(".")
    inst = ".".join([parts[0], "atomic"] + parts[1:])
    letters = ["A", "B"][:len(in_shapes)]
    params = ", ".join(f"%{n}: {mtype(ty, s, True)}" for n, s in zip(letters, in_shapes))
    zero, one = {"c64": ("[0.0, 0.0]", "[1.0, 0.0]"), "i32": ("0", "1")}.get(ty, ("0.0", "1.0"))
    src = f"""func @k(%alpha: {ty}, {params}, %C: {mtype(ty, out_shape, False)}) {{
        %beta = constant {one if beta else zero} : {ty}
        {inst} {operands}
    }}"""
    ins = [rand(s, ty, k + 1) for k, s in enumerate(in_shapes)]
    C = rand(out_shape, ty, 9)
    G = (3, 2, 1)
    run(src, ALPHA[ty], *ins, C, grid=G)
    update = fn(ALPHA[ty], *map(wide, ins))
    expected = wide(rand(out_shape, ty, 9)) + 6 * update if beta else update
    check(C, expected, ty)


def test_atomic_gemm_one_output_per_group_subview():
    """Many groups, each accumulating into its own column block and into a shared total."""
    src = """func @k(%A: memref<f32x4x?>, %B: memref<f32x?x3>, %C: memref<f32x4x3x?>, %T: memref<f32x4x3>) {
        %g = group_id.x : index
        %c = subview %C[0:4, 0:3, %g] : memref<f32x4x3>
        %alpha = constant 1.0 : f32
        %zero = constant 0.0 : f32
        %one = constant 1.0 : f32
        gemm %alpha, %A, %B, %zero, %c
        gemm.atomic %alpha, %A, %B, %one, %T
    }"""
    A, B = rand((4, 5), "f32", 1), rand((5, 3), "f32", 2)
    C = farray(np.full((4, 3, 7), np.nan), np.float32)
    T = farray(np.zeros((4, 3)), np.float32)
    run(src, A, B, C, T, grid=(7, 1, 1))
    ab = wide(A) @ wide(B)
    for g in range(7):
        check(C[:, :, g], ab, "f32")
    check(T, 7 * ab, "f32")


# ---- performance sanity --------------------------------------------------------------------------
def test_perf_batched_gemm_1000_groups(capsys):
    """A 16 x 16 f32 gemm per work-group over 1000 work-groups (one matrix each, through
    group_id and subview).  The time is printed, not asserted."""
    src = """func @k(%A: memref<f32x16x16x?>, %B: memref<f32x16x16x?>, %C: memref<f32x16x16x?>) {
        %g = group_id.x : index
        %a = subview %A[0:16, 0:16, %g] : memref<f32x16x16>
        %b = subview %B[0:16, 0:16, %g] : memref<f32x16x16>
        %c = subview %C[0:16, 0:16, %g] : memref<f32x16x16>
        %alpha = constant 1.0 : f32
        %beta = constant 0.0 : f32
        gemm %alpha, %a, %b, %beta, %c
    }"""
    n = 1000
    A, B = rand((16, 16, n), "f32", 1), rand((16, 16, n), "f32", 2)
    C = farray(np.zeros((16, 16, n)), np.float32)
    run(src, A[:, :, :1], B[:, :, :1], C[:, :, :1])  # compile outside the timing
    t0 = time.perf_counter()
    run(src, A, B, C, grid=(n, 1, 1))
    dt = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\n[{interp_testing.CURRENT_TARGET} perf] 1000 x gemm 16x16 f32: {dt * 1e3:.1f} ms "
              f"({dt / n * 1e6:.1f} us per work-group)")
    expected = np.einsum("ikg,kjg->ijg", wide(A), wide(B))
    check(C, expected, "f32")
