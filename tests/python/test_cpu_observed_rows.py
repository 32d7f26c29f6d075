"""Rows of a coopmatrix nothing observes are not computed (target cpu:
backends/cpu/mul_add.py ``observed_rows`` and ``fma_kernel``).

Language reference, "Cooperative matrix load" / "Cooperative matrix store" (``rows_checked``:
components outside the memref are not accessed) and "Cooperative matrix mul add": a tile
of 32 f64 rows (64 f32) stored with its rows checked at a constant position into a
memref of 24 (48) rows writes only those; mul_add's row r depends only on row r of A and
C.  The K loop then runs FMAs on three registers of each column instead of four (counted
as lanes of ``llvm.fmuladd`` in the loop's LLVM IR), and every use that can see the other
rows -- a store without the check, a store at a position known only when run -- keeps
them computed: its results are compared, all rows, with NumPy's in float64 on the same
inputs.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

from ttlc.backends.cpu.module import Artifacts  # noqa: E402

#: C (24 x 4 f64 or 48 x 4 f32) += A B in tiles of 32 (64) rows, K in steps of 2, the
#: accumulator starting at 1 everywhere (rows past A's read A as 0: they stay 1)
KERNEL = """func @k(%A: memref<{t}x{M}x{K}>, %B: memref<{t}x{K}x{N}>, %C: memref<{t}x{M}x{N}>,
               %S: memref<{t}x{tm}x{N}>) attributes{{subgroup_size={sg}, work_group_size=[{sg},1]}} {{
    %gid = group_id.x : index
    parallel {{
        %c0 = constant 0 : index
        %c8 = constant 8 : index
        %c2 = constant 2 : index
        %ck = constant {K} : index
        %one = constant 1.0 : {t}
        %init = cooperative_matrix_construct %one : coopmatrix<{t}x{tm}x{N},matrix_acc>
        %acc = for %k = %c0, %ck, %c2 init(%x=%init) -> (coopmatrix<{t}x{tm}x{N},matrix_acc>) {{
            %a = cooperative_matrix_load.rows_checked %A[%c0,%k] : coopmatrix<{t}x{tm}x2,matrix_a>
            %b = cooperative_matrix_load %B[%k,%c0] : coopmatrix<{t}x2x{N},matrix_b>
            %y = cooperative_matrix_mul_add %a, %b, %x : coopmatrix<{t}x{tm}x{N},matrix_acc>
            yield (%y)
        }}
        {after}
    }}
}}
"""
K = 6
#: the types: (M, the tile's rows, subgroup size)
SIZES = {"f64": (24, 32, 8), "f32": (48, 64, 16)}
DTYPES = {"f32": np.float32, "f64": np.float64}

STORED = "cooperative_matrix_store.rows_checked %acc, %C[%c0,%c0]"
#: also stored whole: every row observed
ALSO_WHOLE = STORED + "\n        cooperative_matrix_store %acc, %S[%c0,%c0]"
#: stored 8 rows down: the tile's first M - 8 rows observed
LOWER = "cooperative_matrix_store.rows_checked %acc, %C[%c8,%c0]"
#: at a row position known only when run (0 for the one group): every row observed
RUN_TIME = "cooperative_matrix_store.rows_checked %acc, %C[%gid,%c0]"
#: through an if's result
THROUGH_IF = """%p = less_than %gid, %c2 : bool
        %r = if %p -> (coopmatrix<{t}x{tm}x{N},matrix_acc>) {{
            yield (%acc)
        }} else {{
            yield (%init)
        }}
        cooperative_matrix_store.rows_checked %r, %C[%c0,%c0]"""


def _text(t, after, M=None, tm=None, N=4):
    """The kernel of type t, M rows of C in tiles of tm (the type's SIZES unless given)
    and N columns."""
    sizes_M, sizes_tm, sg = SIZES[t]
    M, tm = M or sizes_M, tm or sizes_tm
    return KERNEL.format(t=t, M=M, K=K, N=N, tm=tm, sg=sg, after=after.format(t=t, tm=tm, N=N))


def _fma_lanes(text, t) -> int:
    """Lanes of the kernel's fmuladd calls (the K loop's one mul_add: rows x 4 x 2)."""
    elem = "f64" if t == "f64" else "f32"
    ir = Artifacts(ttlc.check(text), False).ir
    calls = re.findall(rf"call <(\d+) x (?:double|float)> @\"?llvm\.fmuladd\.v\d+{elem}\"?\(", ir)
    return sum(int(lanes) for lanes in calls)


def _run(text, t, M=None, tm=None, N=4):
    """Run the kernel on random A, B and C of zeros; returns C, S and A B + 1 of the
    tile (rows past A's: 1)."""
    M, tm = M or SIZES[t][0], tm or SIZES[t][1]
    rng = np.random.default_rng(M)
    A = np.asfortranarray(rng.standard_normal((M, K)).astype(DTYPES[t]))
    B = np.asfortranarray(rng.standard_normal((K, N)).astype(DTYPES[t]))
    C = np.zeros((M, N), DTYPES[t], order="F")
    S = np.zeros((tm, N), DTYPES[t], order="F")
    ttlc.compile(text, target="cpu")["k"](A, B, C, S, grid=1)
    tile = np.ones((tm, N))
    tile[:M] += A.astype(np.float64) @ B
    return C, S, tile


def _close(got, want, t):
    eps = np.finfo(DTYPES[t]).eps
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 4 * K * eps * max(1.0, np.abs(want).max())


@pytest.mark.parametrize("t", ["f64", "f32"])
def test_rows_outside_a_checked_store_are_not_computed(t):
    M, tm, _ = SIZES[t]
    text = _text(t, STORED)
    assert _fma_lanes(text, t) == M * 4 * 2  # three registers of each column, not four
    C, _, tile = _run(text, t)
    _close(C, tile[:M], t)


@pytest.mark.parametrize("t", ["f64", "f32"])
def test_rows_a_second_store_sees_are_computed(t):
    M, tm, _ = SIZES[t]
    text = _text(t, ALSO_WHOLE)
    assert _fma_lanes(text, t) == tm * 4 * 2
    C, S, tile = _run(text, t)
    _close(C, tile[:M], t)
    _close(S, tile, t)  # rows past M: 1 + 0 * B, computed
    assert (S[M:] == 1).all()


def test_a_store_further_down_observes_fewer_rows():
    M, tm, _ = SIZES["f64"]
    text = _text("f64", LOWER)
    assert _fma_lanes(text, "f64") == (M - 8) * 4 * 2
    C, _, tile = _run(text, "f64")
    _close(C[8:], tile[:M - 8], "f64")
    assert (C[:8] == 0).all()


@pytest.mark.parametrize("after,observed", [(RUN_TIME, 32), (THROUGH_IF, 24)],
                         ids=["store at a run-time row", "through an if"])
def test_rows_observed_at_run_time_positions_and_through_an_if(after, observed):
    """A store at a row known only when run observes all 32 rows of the tile; the checked
    store of an if's result the 24 inside C, as the loop's result would."""
    text = _text("f64", after)
    assert _fma_lanes(text, "f64") == observed * 4 * 2
    C, _, tile = _run(text, "f64")
    _close(C, tile[:24], "f64")


#: (type, rows observed, tile rows, columns) -> the lanes of each column's FMAs with
#: AVX-512 (by hand: the whole zmm registers of the rows, then the rows past them in the
#: narrowest power of two of lanes, f64 9 rows as 8 + 1; a tile whose accumulator, A's
#: column twice and a broadcast register per column pass the 32 registers keeps whole
#: registers: f64 16x12 over 10 rows, 2 x 12 + 4 + 12 = 40)
NARROW_LAST = {("f64", 9, 16, 4): 9, ("f64", 10, 16, 4): 10, ("f64", 12, 16, 4): 12,
               ("f64", 13, 16, 4): 16, ("f64", 25, 32, 4): 25, ("f32", 17, 32, 4): 17,
               ("f32", 20, 32, 4): 20, ("f32", 24, 32, 4): 24, ("f64", 9, 16, 9): 9,
               ("f64", 10, 16, 12): 16, ("f32", 24, 32, 12): 32}


@pytest.mark.parametrize("case", list(NARROW_LAST), ids=lambda c: "%s %d of %dx%d" % c)
def test_rows_past_the_last_whole_register_take_narrower_fmas(case):
    """With AVX-512 (zmm FMAs take two cycles of Zen 4's 256-bit units, xmm and ymm
    FMAs one) the rows observed past the last whole register are computed in a vector of
    their own, as few lanes as hold them, where the registers allow: f64 9x9x56 with B
    shared ran 1.10-1.12x as fast.  Other CPUs compute whole registers.  Every stored
    row is compared with NumPy's."""
    from ttlc.backends.cpu import jit

    t, M, tm, N = case
    bits = jit.vector_bits()
    lanes = bits // 8 // (8 if t == "f64" else 4)
    want = NARROW_LAST[case] if bits == 512 else -(-M // lanes) * lanes
    text = _text(t, STORED, M=M, tm=tm, N=N)
    assert _fma_lanes(text, t) == want * N * 2
    C, _, tile = _run(text, t, M=M, tm=tm, N=N)
    _close(C, tile[:M], t)
