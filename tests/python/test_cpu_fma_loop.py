"""FMA accumulators held as their pieces across a loop, and loops around loops left rolled
(target cpu: backends/cpu/mul_add.py ``HeldPieces``, control.py ``stays_loop``).

Language reference, "Cooperative matrix mul add" and "for" (loop-carried values): a K loop
whose carried f32/f64 accumulator is only the C of an FMA mul_add whose result is only
yielded carries one LLVM value per piece of a column (no phi of the whole tile); every
variant that must fall back (the accumulator used elsewhere in the body, a result of
another type) carries the whole tile and computes the same.  A loop around a loop that
stays a loop (a long or unknown trip count, or a K loop of a tile of 3 to 7 steps, itself
kept a loop) is not unrolled.  Expected values come from
NumPy in float64 on the same inputs.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

from ttlc.backends.cpu.module import Artifacts  # noqa: E402

KERNEL = """func @mm(%A: memref<{t}x{M}x{K}>, %B: memref<{t}x{K}x{N}>, %C: memref<{t}x{M}x{N}>,
                %S: memref<{t}x{tm}x{tn}>) attributes{{subgroup_size={sg}, work_group_size=[{sg},1]}} {{
    %gid = group_id.x : index
    parallel {{
        {constants}
        for %i = %c0, %sm, %tm {{
            for %j = %c0, %sn, %tn {{
                %init = cooperative_matrix_load %C[%i,%j] : coopmatrix<{t}x{tm}x{tn},matrix_acc>
                %acc = for %k = %c0, %sk, %tk init(%x=%init) -> (coopmatrix<{t}x{tm}x{tn},matrix_acc>) {{
                    %ta = cooperative_matrix_load %A[%i,%k] : coopmatrix<{t}x{tm}x{tk},matrix_a>
                    %tb = cooperative_matrix_load %B[%k,%j] : coopmatrix<{t}x{tk}x{tn},matrix_b>
                    %y = cooperative_matrix_mul_add %ta, %tb, %x : coopmatrix<{t}x{tm}x{tn},matrix_acc>
                    {body}
                    yield (%y)
                }}
                {after}
            }}
        }}
    }}
}}
"""

#: a second use of the accumulator in the body: it cannot be held as pieces
ALSO_STORED = "cooperative_matrix_store %x, %S[%c0,%c0]"
DTYPES = {"f32": np.float32, "f64": np.float64}


#: the loop's result stored as it is (from its pieces)
STORED = "cooperative_matrix_store %acc, %C[%i,%j]"
#: the loop's result needed whole inside a branch (doubled, stored to C) and after it
#: (halved, stored to S, which keeps the last tile's); the condition is known only when run
WHOLE_IN_A_BRANCH = """%p = greater_than %sk, %gid : bool
                if %p {{
                    %two = constant 2.0 : {t}
                    %d = cooperative_matrix_scale %two, %acc : coopmatrix<{t}x{tm}x{tn},matrix_acc>
                    cooperative_matrix_store %d, %C[%i,%j]
                }}
                %half = constant 0.5 : {t}
                %e = cooperative_matrix_scale %half, %acc : coopmatrix<{t}x{tm}x{tn},matrix_acc>
                cooperative_matrix_store %e, %S[%c0,%c0]"""


def _kernel(t, M, K, N, tm, tk, tn, body="", after=STORED):
    sizes = dict(c0=0, sm=M, sn=N, sk=K, tm=tm, tn=tn, tk=tk)
    constants = "\n        ".join(f"%{k} = constant {v} : index" for k, v in sizes.items())
    return KERNEL.format(t=t, M=M, K=K, N=N, tm=tm, tk=tk, tn=tn, sg=8, body=body,
                         constants=constants,
                         after=after.format(t=t, tm=tm, tn=tn) if after != STORED else after)


def _run(text, t, M, K, N, tm, tn, scale=1.0):
    """Run the kernel; C must be scale * (A B + C) after it; returns S."""
    rng = np.random.default_rng(M * 1009 + K * 31 + N)
    A, B, C = (np.asfortranarray(rng.standard_normal(s).astype(DTYPES[t]))
               for s in ((M, K), (K, N), (M, N)))
    S = np.zeros((tm, tn), DTYPES[t], order="F")
    want = A.astype(np.float64) @ B + C
    ttlc.compile(text, target="cpu")["mm"](A, B, C, S, grid=1)
    _close(C, scale * want, t, K)
    return S, want


def _close(got, want, t, K):
    eps = np.finfo(DTYPES[t]).eps
    assert np.abs(got - want).max() <= 4 * K * eps * max(1.0, np.abs(want).max())


def _whole_tile_phis(text, t, tm, tn) -> int:
    """phis of LLVM vectors of the whole tm x tn tile (or its padding to a power of two)."""
    lanes = tm * tn
    wide = 1 << (lanes - 1).bit_length()
    elem = "float" if t == "f32" else "double"
    ir = Artifacts(ttlc.check(text), False).ir
    return len(re.findall(rf"phi\s+<({lanes}|{wide}) x {elem}>", ir))


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("shape", [(32, 24, 6, 16, 2, 3), (64, 20, 6, 32, 1, 3),
                                   (24, 40, 10, 8, 4, 5)],
                         ids=lambda s: "x".join(map(str, s)))
def test_accumulator_held_as_pieces(t, shape):
    M, K, N, tm, tk, tn = shape
    text = _kernel(t, M, K, N, tm, tk, tn)
    assert _whole_tile_phis(text, t, tm, tn) == 0
    _run(text, t, M, K, N, tm, tn)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_accumulator_used_elsewhere_is_carried_whole(t):
    M, K, N, tm, tk, tn = 32, 24, 6, 16, 2, 3
    text = _kernel(t, M, K, N, tm, tk, tn, body=ALSO_STORED)
    assert _whole_tile_phis(text, t, tm, tn) == 1
    _run(text, t, M, K, N, tm, tn)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_result_needed_whole_in_a_branch_and_after_it(t):
    """The loop's result, held as pieces, is joined into the matrix where the loop ends,
    so that a use inside a branch and one after it both see it."""
    M, K, N, tm, tk, tn = 32, 24, 6, 16, 2, 3
    S, want = _run(_kernel(t, M, K, N, tm, tk, tn, after=WHOLE_IN_A_BRANCH), t, M, K, N, tm,
                   tn, scale=2.0)
    _close(S, 0.5 * want[M - tm:, N - tn:], t, K)


def test_result_kept_across_a_barrier_of_subgroups_run_in_turn():
    """Eight subgroups run phase by phase (``phases``): the loop's result, held as pieces,
    is kept across the barrier as the matrix."""
    M, K, N, tm, tk, tn = 32, 24, 6, 16, 2, 3
    text = _kernel("f64", M, K, N, tm, tk, tn,
                   after="barrier.local\n                " + STORED)
    text = text.replace("work_group_size=[8,1]", "work_group_size=[64,1]")
    assert "work_group_size=[64,1]" in text
    _run(text, "f64", M, K, N, tm, tn)


def _unroll_disabled(text) -> int:
    """Loops of the kernel told not to unroll (each has its loop metadata)."""
    return Artifacts(ttlc.check(text), False).ir.count("!llvm.loop !")


def test_loops_around_a_long_loop_stay_rolled():
    """The two tile loops around a K loop of 12 iterations are told not to unroll; around
    a K loop of 2 they are LLVM's to unroll.  (8 x 3 f64 tiles: A's column is one or two
    registers, so the K loop itself is LLVM's to unroll on every CPU.)"""
    long_k = _kernel("f64", 16, 24, 6, 8, 2, 3)
    short_k = _kernel("f64", 16, 4, 6, 8, 2, 3)
    assert _unroll_disabled(long_k) == 2
    assert _unroll_disabled(short_k) == 0
    _run(long_k, "f64", 16, 24, 6, 8, 3)
    _run(short_k, "f64", 16, 4, 6, 8, 3)


@pytest.mark.parametrize("K, kept", [(4, 0), (6, 3), (14, 3), (16, 2)])
def test_short_k_loops_of_tiles_stay_rolled(K, kept):
    """A K loop of 3 to 7 steps carrying a tile (``control.short_tile_loop``) is told not
    to unroll, and so are the two tile loops around it; one of 2 steps is LLVM's to
    unroll, and one of 8 or more stays a loop anyway (only the loops around it are told)."""
    text = _kernel("f64", 16, K, 6, 8, 2, 3)
    assert _unroll_disabled(text) == kept
    _run(text, "f64", 16, K, 6, 8, 3)
