"""16-bit products accumulated in f32, held as their pieces across a K loop (target cpu:
backends/cpu/mul_add.py ``HeldPieces`` with the microkernels of dpbf16.py and of the
FMA path on converted operands).

Language reference, "Cooperative matrix mul add" (bf16 and f16 A and B into an f32
accumulator) and "for" (loop-carried values): a K loop whose f32 accumulator is only the
C of a mul_add of bf16 or f16 operands carries one LLVM value per piece of a column, no
phi of the whole tile, on every path the products take here: vdpbf16ps (the instruction
where the CPU has it, else emulated with ``jit.EMULATE_DPBF16PS``), bf16 on f32 FMAs
without AVX512-BF16, f16 on f32 FMAs.  The shapes are odd in M, N and K (partial tiles
and a last K step half outside, read through checked loads), the result is stored in f32
or cast to the operands' type after the loop; products of i8, i16 and f32 operands into
i32 and f64 accumulators are held the same way.  Expected values are NumPy models of the
path's order of additions (``test_cpu_dpbf16.dot_reference``: the products of 16-bit
values are exact in f32, so each model is exact), and NumPy in float64 within the error
of reassociation.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import ttlc

jit = pytest.importorskip("ttlc.backends.cpu.jit")
import test_cpu_amx_loop as loop  # noqa: E402  (its K-loop kernels)
from test_cpu_dpbf16 import _close, _ir, _same, dot_reference  # noqa: E402
from test_cpu_fma_loop import _whole_tile_phis  # noqa: E402

DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}
NUMPY = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "f32": np.float32, "f64": np.float64}

#: C's tile cast to f32 before the loop, the result cast back to C's type after it (casts of
#: f32 to f32 are no-ops)
CAST_C = """%c = cooperative_matrix_load{flag} %C[%i,%j] : coopmatrix<{c}x{tm}x{tn},matrix_acc>
                %init = cast %c : coopmatrix<f32x{tm}x{tn},matrix_acc>"""
CAST_BACK = """%r = cast %acc : coopmatrix<{c}x{tm}x{tn},matrix_acc>
                cooperative_matrix_store{flag} %r, %C[%i,%j]"""

#: (M, K, N, tm, tk, tn, subgroup size): 32-row tiles (two vdpbf16ps pieces of 16 rows)
#: over 37 rows, K steps of 4 over 19 (the last one half outside A and B), 3 columns over
#: 11; tiles of 8 x 2 x 5 (one piece of 8, K steps of one pair) over 13 x 7 x 9; tiles of
#: 2 rows (a piece of 4, its rows past 2 padding) over 5 x 3 x 7
SHAPES = [(37, 19, 11, 32, 4, 3, 8), (13, 7, 9, 8, 2, 5, 8), (5, 3, 7, 2, 2, 3, 2)]


def _kernel(ab, c, M, K, N, tm, tk, tn, S, body="") -> str:
    """C = A B + C over tiles of checked accesses, accumulating in f32."""
    return loop._kernel(M, K, N, tm, tk, tn, wg=S, init=CAST_C, body=body, after=CAST_BACK,
                        flag=".both_checked", ab=ab, c=c, S=S)


def _inputs(ab, c, M, K, N):
    """Random A, B in the 16-bit type (magnitudes 2^-4 .. 2^4: the order of the additions
    shows in the last bits) and C."""
    rng = np.random.default_rng(M * 1009 + K * 31 + N)

    def rand(shape, t):
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-4, 5, shape)
        return np.asfortranarray(x.astype(DTYPES[t]))

    return rand((M, K), ab), rand((K, N), ab), rand((M, N), c)


def _model(ab, A, B, C) -> np.ndarray:
    """The f32 result in the path's order: vdpbf16ps's (pairs of k, the odd member
    first) for bf16 where the CPU has it or it is emulated, else one FMA per k in order."""
    if ab == "bf16" and jit.bf16_dot() is not None:
        return dot_reference(A, B, C)
    return dot_reference(A, B, C, odd_first=False, flush=False)


@pytest.fixture(params=["native", "emulated"])
def dot_path(request, monkeypatch):
    """bf16 products on the CPU's own path (vdpbf16ps or f32 FMAs), then on the emulated
    vdpbf16ps; no disk cache, AMX off (it holds its accumulators its own way)."""
    monkeypatch.setenv("TTLC_CACHE", "0")
    monkeypatch.setenv("TTLC_AMX", "0")
    if request.param == "emulated":
        monkeypatch.setattr(jit, "EMULATE_DPBF16PS", True)
    jit.amx_usable.cache_clear()
    yield request.param
    monkeypatch.undo()
    jit.amx_usable.cache_clear()


@pytest.mark.parametrize("ab,c", [("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32"),
                                  ("f16", "f16")])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_k_loop_of_16_bit_products(dot_path, ab, c, shape):
    if dot_path == "emulated" and ab == "f16":
        pytest.skip("f16 products do not take the dot-product path")
    M, K, N, tm, tk, tn, S = shape
    text = _kernel(ab, c, M, K, N, tm, tk, tn, S)
    assert _whole_tile_phis(text, "f32", tm, tn) == 0
    A, B, C = _inputs(ab, c, M, K, N)
    out = C.copy(order="F")
    ttlc.compile(text, target="cpu")["mm"](A, B, out, grid=1)
    want = _model(ab, A, B, C)
    if c == "f32":
        _same(out, want)
        _close(out, A, B, C, K)
    else:
        _same(out.astype(np.float32), want.astype(DTYPES[c]).astype(np.float32))


def test_accumulator_used_elsewhere_is_carried_whole(dot_path):
    """A second use of the accumulator in the body (a store): the loop carries the whole
    tile and computes the same."""
    M, K, N, tm, tk, tn, S = SHAPES[0]
    text = _kernel("bf16", "f32", M, K, N, tm, tk, tn, S,
                   body="cooperative_matrix_store.both_checked %x, %C[%i,%j]")
    assert _whole_tile_phis(text, "f32", tm, tn) == 1
    A, B, C = _inputs("bf16", "f32", M, K, N)
    out = C.copy(order="F")
    ttlc.compile(text, target="cpu")["mm"](A, B, out, grid=1)
    _same(out, _model("bf16", A, B, C))


def test_agrees_with_the_interpreter(dot_path):
    M, K, N, tm, tk, tn, S = SHAPES[1]
    text = _kernel("bf16", "f32", M, K, N, tm, tk, tn, S)
    A, B, C = _inputs("bf16", "f32", M, K, N)
    got, want = C.copy(order="F"), C.copy(order="F")
    ttlc.compile(text, target="cpu")["mm"](A, B, got, grid=1)
    ttlc.compile(text, target="interp")["mm"](A, B, want, grid=1)
    assert np.abs(got - want).max() <= 4 * K * 2.0 ** -23 * max(1.0, np.abs(want).max())


@pytest.mark.parametrize("ab,acc", [("i8", "i32"), ("i16", "i32"), ("f32", "f64")])
def test_other_mixed_products_are_held_too(ab, acc):
    """Products of operands of another type than the accumulator's on the FMA path (the
    operands converted) are held as pieces the same way; integer-valued data, so that the
    result is exact in any order."""
    M, K, N, tm, tk, tn, S = SHAPES[1]
    init = ("%init = cooperative_matrix_load{flag} %C[%i,%j] : "
            f"coopmatrix<{acc}x{{tm}}x{{tn}},matrix_acc>")
    text = loop._kernel(M, K, N, tm, tk, tn, wg=S, init=init, flag=".both_checked", ab=ab,
                        c=acc, S=S, acc=acc)
    assert not re.search(rf"phi\s+<(40|64) x (i32|double)>", _ir(text))  # (8 x 5, padded)
    rng = np.random.default_rng(7)
    A = np.asfortranarray(rng.integers(-8, 9, (M, K)).astype(NUMPY[ab]))
    B = np.asfortranarray(rng.integers(-8, 9, (K, N)).astype(NUMPY[ab]))
    C = np.asfortranarray(rng.integers(-8, 9, (M, N)).astype(NUMPY[acc]))
    out = C.copy(order="F")
    ttlc.compile(text, target="cpu")["mm"](A, B, out, grid=1)
    assert np.array_equal(out, A.astype(np.float64) @ B.astype(np.float64) + C)
