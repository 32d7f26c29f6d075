"""16-bit gemm with a transposed A (gemm.t.n, gemm.t.t) on the CPU, against NumPy.

Language reference, "GEMM": C := alpha op1(A) op2(B) + beta C with bf16 or f16 A and B, C
in f32 or in the operands' type, summed in f32.  The cpu back end loads the rows of a
transposed 16-bit tile (a K step of two or four values) as one word each, and the rows
cut by K's remainder in a loop (``coop_memory._row_words``); these tests run that code with odd
M, N and K (edge tiles, a K remainder, K below one step), every size and column stride
known only at run time on views of larger arrays, and in checked mode.  A's last column
ends where readable memory ends (the next page is inaccessible): a read of a row or
column the masks exclude faults.  Inputs are multiples of 1/8 in [-2, 2] and K <= 64, so
every f32 sum is exact: f32 results equal NumPy's float64 product, 16-bit ones that
product rounded once.  bf16 runs on the CPU's own path and on the emulated vdpbf16ps;
``make test-cpu-models`` runs the file again without AVX-512 (f32 FMAs).
"""
from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest

import ttlc
from interp_testing import DTYPES, farray

jit = pytest.importorskip("ttlc.backends.cpu.jit")
# the host's bf16 path and the emulated vdpbf16ps, no disk cache, AMX off (it stages
# transposed operands its own way: test_cpu_gemm16.py)
from test_cpu_held16 import dot_path  # noqa: E402,F401

#: M x N x K: edges in M and N with a K remainder; all below one tile; whole tiles and K
#: steps; K below one step; a K step and a remainder of 2
SHAPES = [(37, 21, 19), (5, 3, 7), (64, 24, 16), (33, 9, 1), (100, 70, 50)]
TYPES = [("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32"), ("f16", "f16")]

DYNAMIC = """func @k(%alpha: {ab}, %A: memref<{ab}x?x?,strided<1,?>>,
                      %B: memref<{ab}x?x?,strided<1,?>>, %beta: {c},
                      %C: memref<{c}x?x?,strided<1,?>>) {{
    gemm.t.{tb} %alpha, %A, %B, %beta, %C
}}"""

#: the inaccessible pages under the arrays of ``at_page_end`` (kept mapped for the process)
_GUARDED: list = []


def at_page_end(shape, dtype) -> np.ndarray:
    """A zeroed column-major array whose last byte is the last readable one: the page
    after it is mapped without access."""
    page = mmap.PAGESIZE
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    total = -(-nbytes // page) * page + page
    mem = mmap.mmap(-1, total)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    assert libc.mprotect(base + total - page, page, 0) == 0  # PROT_NONE
    _GUARDED.append(mem)
    raw = np.frombuffer(mem, np.uint8, count=nbytes, offset=total - page - nbytes)
    return raw.view(dtype).reshape(shape, order="F")


def exact(shape, ty: str, rng) -> np.ndarray:
    """Multiples of 1/8 in [-2, 2]: exact in bf16 and f16, exact products and sums in f32."""
    return farray(rng.integers(-16, 17, shape) / 8, DTYPES[ty])


def operands(ab: str, c: str, tb: str, M: int, N: int, K: int, seed: int):
    """A (K x M, a view ending at the end of readable memory), B and C (views of larger
    arrays), all with unit row stride, and C's parent array."""
    rng = np.random.default_rng(seed)
    parent = at_page_end((K + 2, M + 1), DTYPES[ab])
    parent[...] = exact(parent.shape, ab, rng)
    A = parent[2:, 1:]
    bshape = (K, N) if tb == "n" else (N, K)
    B = exact((bshape[0] + 3, bshape[1] + 2), ab, rng)[1:1 + bshape[0], 2:]
    Cp = exact((M + 4, N + 3), c, rng)
    return A, B, Cp[3:3 + M, 1:1 + N], Cp


def check(kernel, ab: str, c: str, tb: str, M: int, N: int, K: int, seed: int) -> None:
    """C := 0.5 A^T op(B) - 2 C through `kernel`, against NumPy in float64 (rounded once
    to a 16-bit C); C's neighbours in its parent array keep their values."""
    A, B, C, Cp = operands(ab, c, tb, M, N, K, seed)
    opb = B.astype(np.float64) if tb == "n" else B.astype(np.float64).T
    want = 0.5 * (A.astype(np.float64).T @ opb) - 2.0 * C.astype(np.float64)
    before = Cp.copy()
    kernel(0.5, A, B, -2.0, C, grid=1)
    np.testing.assert_array_equal(C.astype(np.float64), want.astype(DTYPES[c]).astype(np.float64),
                                  err_msg=f"{ab}->{c} t.{tb} {M}x{N}x{K}")
    outside = np.ones(Cp.shape, bool)
    outside[3:3 + M, 1:1 + N] = False
    np.testing.assert_array_equal(Cp[outside], before[outside])


@pytest.mark.parametrize("tb", ["n", "t"])
@pytest.mark.parametrize("ab,c", TYPES)
def test_transposed_gemm16_with_run_time_sizes(dot_path, ab, c, tb):
    if dot_path == "emulated" and ab == "f16":
        pytest.skip("f16 products do not take the dot-product path")
    kernel = ttlc.compile(DYNAMIC.format(ab=ab, c=c, tb=tb), target="cpu")["k"]
    for seed, (M, N, K) in enumerate(SHAPES):
        check(kernel, ab, c, tb, M, N, K, seed)


@pytest.mark.parametrize("tb", ["n", "t"])
@pytest.mark.parametrize("ab,c", [("bf16", "bf16"), ("f16", "f32")])
def test_transposed_gemm16_static_and_checked(ab, c, tb):
    """Static sizes (the shapes' own tile pieces) and checked mode (masks over every
    component: the rows are loaded as vectors there)."""
    M, N, K = 37, 21, 19
    rows, cols = (K, N) if tb == "n" else (N, K)
    static = f"""func @k(%alpha: {ab}, %A: memref<{ab}x{K}x{M},strided<1,?>>,
                        %B: memref<{ab}x{rows}x{cols},strided<1,?>>,
                        %beta: {c}, %C: memref<{c}x{M}x{N},strided<1,?>>) {{
        gemm.t.{tb} %alpha, %A, %B, %beta, %C
    }}"""
    check(ttlc.compile(static, target="cpu")["k"], ab, c, tb, M, N, K, 1)
    checked = ttlc.compile(DYNAMIC.format(ab=ab, c=c, tb=tb), target="cpu", checked=True)["k"]
    for seed, (M, N, K) in enumerate(SHAPES[:4]):
        check(checked, ab, c, tb, M, N, K, seed)


@pytest.mark.parametrize("ty", ["bf16", "f16"])
@pytest.mark.parametrize("flag,x,y", [("rows_checked", 0, 3), ("both_checked", 2, 3)])
@pytest.mark.parametrize("cols", [4, 1])
def test_transposed_gemm16_tile_reads_zeros_outside(ty, flag, x, y, cols):
    """Language reference, "Cooperative matrix load": a checked load reads 0 for the
    components outside the memref; a transposed 16 x 4 (or 16 x 1: a K step of one k on
    f32 FMAs) tile of an A whose rows (A's columns) end within it, and (both_checked)
    whose last columns (A's rows) do too.  A tile of one column loads each row as one
    16-bit word at a selected address, no masked load (one of a single component per
    row, each a branch in machine code, was most of the code of f16 ?x?x? t.n)."""
    from ttlc.backends.cpu.module import Artifacts

    text = f"""func @k(%A: memref<{ty}x5x6>, %O: memref<{ty}x16x{cols}>)
            attributes{{subgroup_size=16, work_group_size=[16,1]}} {{
        parallel {{
            %x = constant {x} : index
            %y = constant {y} : index
            %z = constant 0 : index
            %a = cooperative_matrix_load.t.{flag} %A[%x,%y] : coopmatrix<{ty}x16x{cols},matrix_acc>
            cooperative_matrix_store %a, %O[%z,%z]
        }}
    }}"""
    if cols == 1:
        assert "llvm.masked.load" not in Artifacts(ttlc.check(text), False).ir
    A = at_page_end((5, 6), DTYPES[ty])
    A[...] = exact(A.shape, ty, np.random.default_rng(7))
    out = farray(np.full((16, cols), np.nan), DTYPES[ty])
    ttlc.compile(text, target="cpu")["k"](A, out, grid=1)
    want = np.zeros((16, cols))
    inside = A[x:x + cols, y:y + 16].astype(np.float64).T
    want[:inside.shape[0], :inside.shape[1]] = inside
    np.testing.assert_array_equal(out.astype(np.float64), want)
