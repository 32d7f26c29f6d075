"""Prefetches on the CPU (backends/cpu/memory.py ``prefetch_block``) and the prefetches
lower-linalg adds for far-apart columns and for a batch member's A that the tiles read
several times (passes/linalg/matmul.py ``far_operands``, ``streams_far_a``,
``prefetched_a``).

Language reference, "Cooperative matrix prefetch": the block M[(x + i) S_1 + (y + j) S_2]
for i < X, j < Y is prefetched into cache level L ("0" the closest), a level the device
lacks is ignored, and the instruction is a hint that changes no result.  The CPU emits
``llvm.prefetch`` for each cache line of each column (contiguous columns) or each element
(other strides), locality 3, 2, 1 for levels 0, 1, 2; the counts here are worked out by
hand from the block's bytes.  Results are compared with NumPy's.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

from ttlc.backends.cpu.module import Artifacts  # noqa: E402
from ttlc.testing.kernels import member_kernel, tall_kernel  # noqa: E402

PREFETCH = """func @k(%A: memref<f32x1000x16>, %R: memref<f32x8x8,strided<2,16>>, %C: memref<f32x4>) {{
    parallel {{
        %x = constant {x} : index
        %y = constant {y} : index
        cooperative_matrix_prefetch {level}, %{m}[%x, %y], {rows}, {cols}
    }}
    %one = constant 1.0 : f32
    %c0 = constant 0 : index
    store %one, %C[%c0]
}}
"""


def _prefetches(ir: str):
    """The locality argument of each llvm.prefetch call in LLVM IR."""
    return [int(x) for x in re.findall(r'call void @"?llvm\.prefetch\.p0"?\(ptr [^,]+, '
                                       r'i32 0, i32 (\d), i32 1\)', ir)]


@pytest.mark.parametrize("level, locality", [(0, 3), (1, 2), (2, 1)])
def test_a_level_is_a_locality(level, locality):
    # 100 f32 rows, 400 bytes from row 3: lines at 0, 64, ..., 384 (7) and the last
    # byte, 399 (the line after 384's where the column starts mid-line): 8 a column, the
    # columns a loop (one column's calls in its body)
    text = PREFETCH.format(level=level, m="A", x=3, y=0, rows=100, cols=16)
    assert _prefetches(Artifacts(ttlc.check(text), False).ir) == [locality] * 8


def test_a_level_the_cpu_lacks_is_ignored():
    text = PREFETCH.format(level=3, m="A", x=0, y=0, rows=16, cols=2)
    assert _prefetches(Artifacts(ttlc.check(text), False).ir) == []


def test_a_long_column_is_a_loop_of_lines():
    # 2000 rows of f32: 8000 bytes, 125 lines in a loop (one call), 7999 after it
    text = PREFETCH.format(level=0, m="A", x=0, y=0, rows=2000, cols=2)
    ir = Artifacts(ttlc.check(text), False).ir
    assert _prefetches(ir) == [3, 3]
    assert "icmp ult i64 %" in ir and ", 125" in ir and "i64 7999" in ir


def test_strided_rows_take_one_prefetch_an_element():
    # R's rows are 2 elements apart: 4 rows of a column, 4 calls (no cache-line steps)
    text = PREFETCH.format(level=1, m="R", x=0, y=0, rows=4, cols=3)
    assert _prefetches(Artifacts(ttlc.check(text), False).ir) == [2] * 4


@pytest.mark.parametrize("checked", [False, True])
def test_a_prefetch_outside_the_memref_changes_nothing(checked):
    """Rows 990..1089 and columns 10..25 of a 1000 x 16 memref: a hint, neither an
    error in checked code nor a fault."""
    text = PREFETCH.format(level=0, m="A", x=990, y=10, rows=100, cols=16)
    kernel = ttlc.compile(text, checked=checked)["k"]
    A = np.zeros((1000, 16), np.float32, order="F")
    R = np.lib.stride_tricks.as_strided(np.zeros(128, np.float32), (8, 8), (8, 64))
    C = np.zeros(4, np.float32)
    kernel(A, R, C)
    np.testing.assert_array_equal(C, [1, 0, 0, 0])


@pytest.mark.parametrize("t, M, N, K, beta, prefetched", [
    ("f64", 200, 16, 16, 0.0, True), ("f32", 400, 16, 16, 0.5, True),
    ("f64", 300, 4, 12, 1.0, True), ("f64", 100, 16, 16, 0.0, False),
    ("f32", 100, 9, 9, 0.0, False), ("f64", 41, 2, 20, 0.0, False),
    ("f32", 250, 16, 4, 0.5, False), ("f64", 37, 5, 3, 1.0, False),
    ("f64", 100, 4, 2, 0.5, False), ("f32", 170, 8, 1, 1.0, False),
    ("f32", 100, 8, 4, 0.5, False)])
def test_blocks_of_a_tall_matrix_are_prefetched_and_agree_with_numpy(t, M, N, K, beta,
                                                                     prefetched):
    """Each work-group's blocks of A and C (columns R rows apart, 4096 bytes or more) are
    prefetched before the tiles where they have 16 columns or more together
    (``far_operands``: 37x5x3 has 8) and A's block has FAR_STREAMED_BYTES (24 KiB: f64
    200x16 25.6 KB, f32 400x16 25.6 KB, f64 300x12 28.8 KB); smaller ones are left to the
    hardware prefetchers (``streams_far_a``: f64 100x16 12.8 KB, f32 250x4 4 KB), with
    AVX-512 in tiles of one register by all of N (``far_column_tiles``); K of one or two,
    a single step, in C's tiles (``fused_columns``: f64 100x4x2, f32 170x8x1), and no
    tile of all of M (``far_c``: f32 100x8x4 in 64x4); C = A B + beta C as NumPy computes
    it either way."""
    dtype = {"f32": np.float32, "f64": np.float64}[t]
    blocks = 20
    R = M * blocks
    text = tall_kernel(t, R, M, N, K, beta)
    lowered = Artifacts(ttlc.check(text), False).stage("lowered")
    assert len(re.findall(r"cooperative_matrix_prefetch 1, %[ac]\[", lowered)) == 2 * prefetched
    rng = np.random.default_rng(5)
    A = np.asfortranarray(rng.standard_normal((R, K)).astype(dtype))
    B = np.asfortranarray(rng.standard_normal((K, N)).astype(dtype))
    C0 = np.asfortranarray(rng.standard_normal((R, N)).astype(dtype))
    C = C0.copy(order="F")
    ttlc.compile(text)["gemm"](A, B, C, grid=(blocks,))
    want = A.astype(np.float64) @ B.astype(np.float64) + beta * C0.astype(np.float64)
    np.testing.assert_allclose(C, want, rtol=1e-5 if t == "f32" else 1e-12,
                               atol=1e-4 if t == "f32" else 1e-12)


@pytest.mark.parametrize("t, blocks", [("f32", 20), ("f64", 20), ("f64", 1)])
def test_blocks_of_a_matrix_of_run_time_rows_agree_with_numpy(t, blocks):
    """A and C with rows known only at run time (``memref<f64x?x8>``), blocks of A of
    FAR_STREAMED_BYTES or more (800 rows of f32 by 8, 400 of f64: 25.6 KB): the blocks
    are prefetched where A's and C's rows (a bound below the column stride) are a page or
    more (20 blocks: 16000 rows of f32, 8000 of f64; one block of f64: 3200 bytes, not),
    the test made when the kernel runs; C = A B as NumPy computes it either way."""
    dtype = {"f32": np.float32, "f64": np.float64}[t]
    M, N, K = {"f32": 800, "f64": 400}[t], 9, 8
    text = tall_kernel(t, "?", M, N, K)
    lowered = Artifacts(ttlc.check(text), False).stage("lowered")
    assert re.findall(r"= size %([AC])\[0\]", lowered) == ["A", "C"]
    assert len(re.findall(r"cooperative_matrix_prefetch 1, %[ac]\[", lowered)) == 2
    R = M * blocks
    rng = np.random.default_rng(6)
    A = np.asfortranarray(rng.standard_normal((R, K)).astype(dtype))
    B = np.asfortranarray(rng.standard_normal((K, N)).astype(dtype))
    C = np.zeros((R, N), dtype, order="F")
    ttlc.compile(text)["gemm"](A, B, C, grid=(blocks,))
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-5 if t == "f32" else 1e-12,
                               atol=1e-4 if t == "f32" else 1e-12)


@pytest.mark.parametrize("block, prefetches", [(400, 4), (96, 0)])
def test_the_tall_and_skinny_recipe_prefetches_its_blocks_of_padded_arrays(block, prefetches):
    """``ttlc.recipes.tall_and_skinny`` (A and C ``strided<1,?>``, the strides taken from
    the arrays): the full blocks of A and C are prefetched where A's and C's rows, a
    bound below the column stride, are 512 or more and A's block has FAR_STREAMED_BYTES
    (f64 400x9: 28.8 KB; 96x9, 6.9 KB, is left to the hardware prefetchers); arrays
    whose columns are padded (stride 2003 for 2000 rows) give NumPy's result, the
    partial last block too."""
    recipe = ttlc.recipes.tall_and_skinny("f64", block, 16, 9)
    lowered = Artifacts(ttlc.check(recipe.text), False).stage("lowered")
    # @gemm and @gemm_beta0, each A's and C's full block
    assert len(re.findall(r"cooperative_matrix_prefetch 1, %[ac]\[", lowered)) == prefetches
    rng = np.random.default_rng(7)
    R = 2000
    A = np.asfortranarray(rng.standard_normal((R + 3, 9)))[:R]
    B = np.asfortranarray(rng.standard_normal((9, 16)))
    C = np.asfortranarray(rng.standard_normal((R + 3, 16)))[:R]
    want = 2.0 * A @ B + 0.5 * C
    recipe(2.0, A, B, 0.5, C)
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)


#: gemv (y_blk := A_blk x + y_blk / 2) or ger (A_blk := y_blk x^T + A_blk / 2) on each
#: work-group's block of rows
GEMV_GER = """func @k(%A: memref<{t}x{R}x{K}>, %x: memref<{t}x{K}>, %y: memref<{t}x{R}>) {{
    %i = group_id.x : index
    %rows = constant {M} : index
    %first = mul %i, %rows : index
    %a = subview %A[%first:{M},0:{K}] : memref<{t}x{M}x{K},strided<1,{R}>>
    %yv = subview %y[%first:{M}] : memref<{t}x{M}>
    %one = constant 1.0 : {t}
    %half = constant 0.5 : {t}
    {instruction}
}}"""
INSTRUCTION = {"gemv": "gemv %one, %a, %x, %half, %yv", "ger": "ger %one, %yv, %x, %half, %a"}


@pytest.mark.parametrize("kind", ["gemv", "ger"])
@pytest.mark.parametrize("t, M, K", [("f64", 100, 16), ("f32", 37, 24)])
def test_gemv_and_ger_on_blocks_of_a_tall_matrix_agree_with_numpy(kind, t, M, K):
    """ger's C, a block of rows of a tall matrix (16 or more columns, a page apart), is
    prefetched as gemm's is; gemv's A, such a block of less than FAR_STREAMED_BYTES, is
    not (``streams_far_a``); y_blk = A_blk x + y_blk / 2 and A_blk = y_blk x^T + A_blk / 2
    as NumPy computes them."""
    dtype = {"f32": np.float32, "f64": np.float64}[t]
    blocks = 40
    R = M * blocks
    text = GEMV_GER.format(t=t, R=R, M=M, K=K, instruction=INSTRUCTION[kind])
    lowered = Artifacts(ttlc.check(text), False).stage("lowered")
    assert len(re.findall(r"cooperative_matrix_prefetch 1, %a\[", lowered)) == (kind == "ger")
    rng = np.random.default_rng(8)
    A = np.asfortranarray(rng.standard_normal((R, K)).astype(dtype))
    x, y = rng.standard_normal(K).astype(dtype), rng.standard_normal(R).astype(dtype)
    if kind == "gemv":
        want, got = A.astype(np.float64) @ x + 0.5 * y, y
    else:
        want, got = np.outer(y, x) + 0.5 * A, A
    ttlc.compile(text)["k"](A, x, y, grid=(blocks,))
    np.testing.assert_allclose(got, want, rtol=1e-5 if t == "f32" else 1e-12,
                               atol=1e-5 if t == "f32" else 1e-12)


@pytest.mark.parametrize("t, M, N, K, shared, prefetched", [
    ("f64", 106, 17, 63, False, True),   # 53 KiB, 3 passes of 4 or more row tiles
    ("f64", 122, 24, 61, False, True),
    ("f32", 106, 17, 63, False, False),  # f32: twice the FMAs per byte of A
    ("f64", 106, 17, 63, True, False),   # one A for all members: in the caches
    ("f64", 41, 2, 57, False, False),    # one pass over A
    ("f64", 24, 48, 53, False, False),   # 10 KiB
])
def test_a_members_a_reread_in_several_passes_is_prefetched(t, M, N, K, shared, prefetched):
    """A batch member's A of f64, 16-64 KiB, which the tiles read in three or more
    passes of four or more row tiles, is prefetched into L2 before the tiles
    (``matmul.prefetched_a``; the tiles on either CPU kind, AVX-512 or AVX2, make the
    passes: f64 106x17x63 in 32x6 or 8x6 tiles); C_i = A_i B_i as NumPy computes it."""
    dtype = {"f32": np.float32, "f64": np.float64}[t]
    text = member_kernel(t, "gemm", [("A", (M, K), shared), ("B", (K, N), False),
                                     ("C", (M, N), False)])
    lowered = Artifacts(ttlc.check(text), False).stage("lowered")
    assert len(re.findall(r"cooperative_matrix_prefetch 1, %A\[", lowered)) == prefetched
    batch = 3
    rng = np.random.default_rng(9)
    A = np.asfortranarray(rng.standard_normal((M, K) if shared else (M, K, batch)).astype(dtype))
    B = np.asfortranarray(rng.standard_normal((K, N, batch)).astype(dtype))
    C = np.full((M, N, batch), np.nan, dtype, order="F")
    ttlc.compile(text)["member"](A, B, C, grid=(batch,))
    want = np.einsum("mk" + ("" if shared else "b") + ",knb->mnb", A.astype(np.float64), B)
    np.testing.assert_allclose(C, want, rtol=1e-5 if t == "f32" else 1e-12,
                               atol=1e-4 if t == "f32" else 1e-11)
