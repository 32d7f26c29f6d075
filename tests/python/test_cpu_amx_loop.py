"""AMX accumulators held in tile registers across a loop (target cpu, backends/cpu/amx.py).

Language reference, "Cooperative matrix mul add" and "for" (loop-carried values): a K loop
whose carried f32 accumulator is only the C of a bf16 mul_add whose result is only
yielded keeps the accumulator in tiles for the whole loop; B is loaded into its tile
straight from memory where it came from a plain load, and a result stored right after
the loop is stored from the tiles.  Every variant that must fall back (the accumulator
used elsewhere, another product in the body, checked accesses, padding, TTLC_AMX=0)
is checked for its results too.  Expected values come from NumPy in float64 on the same
bf16 inputs.  Where the CPU has no AMX the tile instructions are emulated (``amx_testing``):
the generated code is otherwise the same.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import ttlc
from amx_testing import amx  # noqa: F401 (fixture)

jit = pytest.importorskip("ttlc.backends.cpu.jit")

#: AMX on this CPU, else emulated (``amx_testing``)
needs_amx = pytest.mark.usefixtures("amx")

KERNEL = """func @mm(%A: memref<{ab}x{M}x{K}>, %B: memref<{ab}x{K}x{N}>, %C: memref<{c}x{M}x{N}>)
        attributes{{subgroup_size={S}, work_group_size=[{wg},1]}} {{
    parallel {{
        %c0 = constant 0 : index
        %sm = constant {M} : index
        %sn = constant {N} : index
        %sk = constant {K} : index
        %tm = constant {tm} : index
        %tn = constant {tn} : index
        %tk = constant {tk} : index
        %two = constant 2.0 : f32
        for %i = %c0, %sm, %tm {{
            for %j = %c0, %sn, %tn {{
                {init}
                %acc = for %k = %c0, %sk, %tk init(%x=%init)
                        -> (coopmatrix<{acc}x{tm}x{tn},matrix_acc>) {{
                    %ta = cooperative_matrix_load{flag} %A[%i,%k]
                        : coopmatrix<{ab}x{tm}x{tk},matrix_a>
                    %tb = cooperative_matrix_load{flag} %B[%k,%j]
                        : coopmatrix<{ab}x{tk}x{tn},matrix_b>
                    %y = cooperative_matrix_mul_add %ta, %tb, %x
                        : coopmatrix<{acc}x{tm}x{tn},matrix_acc>
                    {body}
                    yield (%y)
                }}
                {after}
            }}
        }}
    }}
}}
"""

ZERO = "%init = constant 0.0 : coopmatrix<f32x{tm}x{tn},matrix_acc>"
FROM_C = "%init = cooperative_matrix_load{flag} %C[%i,%j] : coopmatrix<f32x{tm}x{tn},matrix_acc>"
STORE = "cooperative_matrix_store{flag} %acc, %C[%i,%j]"


def _kernel(M, K, N, tm, tk, tn, wg=16, init=ZERO, body="", after=STORE, flag="", ab="bf16",
            c="f32", S=16, acc="f32"):
    """A K loop of mul_adds of ab (bf16) A and B into an acc (f32) accumulator per tile of
    the c (f32) matrix C."""
    fmt = dict(M=M, K=K, N=N, tm=tm, tk=tk, tn=tn, wg=wg, flag=flag, ab=ab, c=c, S=S, acc=acc)
    return KERNEL.format(init=init.format(**fmt), body=body.format(**fmt),
                         after=after.format(**fmt), **fmt)


def _inputs(M, K, N):
    rng = np.random.default_rng(M * 10007 + K * 101 + N)
    A = np.asfortranarray(rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16))
    B = np.asfortranarray(rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16))
    C = np.asfortranarray(rng.standard_normal((M, N)).astype(np.float32))
    return A, B, C


def _run(text, M, K, N, checked=False, *extra):
    A, B, C = _inputs(M, K, N)
    C0 = C.astype(np.float64)
    ttlc.compile(text, target="cpu", checked=checked)["mm"](A, B, C, *extra, grid=1)
    return A.astype(np.float64), B.astype(np.float64), C0, C.astype(np.float64)


def _close(got, expected, K):
    # f32 sums of K products of magnitude ~1, in another order than float64
    tol = K * 2.0 ** -20 * max(1.0, np.abs(expected).max())
    assert np.abs(got - expected).max() <= tol, np.abs(got - expected).max()


def _ir(text, checked=False) -> str:
    from ttlc.backends.cpu.module import Artifacts

    return Artifacts(ttlc.check(text), checked=checked).ir


def _calls(ir_text, name, args="") -> int:
    """Calls of the intrinsic llvm.x86.<name> (or its emulation) whose arguments start
    with args."""
    return len(re.findall(r'@"?(?:llvm\.x86|ttlc\.amx\.emulated)\.%s"?\(%s'
                          % (name, re.escape(args)), ir_text))


def _zeroed(ir_text) -> bool:
    """A loop's accumulator tiles start as zeros (it is held in tiles)."""
    return _calls(ir_text, "tilezero") > 0


def _c_tile_loads(ir_text) -> int:
    """Loads into the accumulator tile 0: a mul_add that loads its C from memory."""
    return _calls(ir_text, "tileloadd64", "i8 0,")


@pytest.fixture
def no_cache(monkeypatch):
    monkeypatch.setenv("TTLC_CACHE", "0")


#: (M, K, N, tm, tk, tn, wg): 16 x 16 x 16 products (k step 16) in an even and an odd
#: number of steps, K = 32 steps, 2 x 2 accumulator tiles, a tall one, and two
#: subgroups with one tile each
RESIDENT = [(64, 64, 64, 16, 16, 16, 16), (32, 48, 32, 16, 16, 16, 16),
            (32, 96, 32, 16, 32, 16, 16), (64, 32, 64, 32, 16, 32, 16),
            (64, 48, 32, 32, 16, 16, 16), (32, 32, 32, 16, 16, 16, 32)]


def _paired(ir_text) -> bool:
    """Products of two successive k steps run together: accumulator tile 0 also takes
    the product of operand tiles 5 and 7 (else those hold C tile 3's operands)."""
    return _calls(ir_text, "tdpbf16ps", "i8 0, i8 5, i8 7") > 0


@needs_amx
@pytest.mark.parametrize("M,K,N,tm,tk,tn,wg", RESIDENT)
def test_resident_accumulator_matches_numpy(no_cache, M, K, N, tm, tk, tn, wg):
    text = _kernel(M, K, N, tm, tk, tn, wg)
    ir_text = _ir(text)
    assert _zeroed(ir_text) and _c_tile_loads(ir_text) == 0
    # a single accumulator tile pairs the steps of a loop with an even trip count
    assert _paired(ir_text) == (tm == tn == 16 and wg == 16 and (K // tk) % 2 == 0)
    A, B, _, got = _run(text, M, K, N)
    _close(got, A @ B, K)


@needs_amx
@pytest.mark.parametrize("K", [32, 48])
def test_trip_count_known_only_at_run_time(no_cache, K):
    """No pairing of steps without a constant trip count (it could be odd)."""
    text = _kernel(32, 64, 32, 16, 16, 16).replace(
        "%C: memref<f32x32x32>)", "%C: memref<f32x32x32>, %nk: index)").replace(
        "%sk = constant 64 : index", "%sk = add %nk, %c0 : index")
    ir_text = _ir(text)
    assert _zeroed(ir_text) and not _paired(ir_text)
    A, B, _, got = _run(text, 32, 64, 32, False, K)
    _close(got, A[:, :K] @ B[:K, :], K)


@needs_amx
def test_initial_value_from_memory_and_result_used_by_arithmetic(no_cache):
    """The tiles start from a loaded C; the result is scaled before the store (so it
    leaves the tiles as a vector)."""
    after = ("%s = cooperative_matrix_scale %two, %acc : coopmatrix<f32x{tm}x{tn},matrix_acc>\n"
             "                cooperative_matrix_store %s, %C[%i,%j]")
    text = _kernel(32, 64, 32, 16, 16, 16, init=FROM_C, after=after)
    assert not _zeroed(_ir(text))
    A, B, C0, got = _run(text, 32, 64, 32)
    _close(got, 2 * (A @ B + C0), 64)


@needs_amx
@pytest.mark.parametrize("body", [
    # the carried value is also read in the body (C is overwritten after the loop)
    "cooperative_matrix_store %x, %C[%i,%j]",
    # the product is also used other than by the yield
    "cooperative_matrix_store %y, %C[%i,%j]",
    # another AMX product in the body would overwrite the accumulator tiles
    "%w = cooperative_matrix_mul_add %ta, %tb, %init : coopmatrix<f32x{tm}x{tn},matrix_acc>\n"
    "cooperative_matrix_store %w, %C[%i,%j]",
])
def test_accumulator_used_elsewhere_falls_back(no_cache, body):
    text = _kernel(32, 32, 32, 16, 16, 16, body=body)
    ir_text = _ir(text)
    # the loop's product loads its accumulator tiles in every step (not held in them);
    # only a product outside the loop's tiles with a zero C starts from tilezero
    assert _c_tile_loads(ir_text) > 0
    assert _zeroed(ir_text) == ("mul_add" in body)
    A, B, _, got = _run(text, 32, 32, 32)
    _close(got, A @ B, 32)


MIXED = """func @mm(%A: memref<bf16x32x64>, %B: memref<bf16x64x32>, %C: memref<f32x32x32>)
        attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %c16 = constant 16 : index
        %c32 = constant 32 : index
        %c64 = constant 64 : index
        %zero = constant 0.0 : coopmatrix<f32x16x32,matrix_acc>
        for %i = %c0, %c32, %c16 {
            %acc = for %k = %c0, %c64, %c32 init(%x=%zero) -> (coopmatrix<f32x16x32,matrix_acc>) {
                %ta = cooperative_matrix_load %A[%i,%k] : coopmatrix<bf16x16x32,matrix_a>
                %tb = cooperative_matrix_load %B[%k,%c0] : coopmatrix<bf16x32x32,matrix_b>
                %y = cooperative_matrix_mul_add %ta, %tb, %x : coopmatrix<f32x16x32,matrix_acc>
                yield (%y)
            }
            cooperative_matrix_store %acc, %C[%i,%c0]
        }
        for %j = %c0, %c32, %c16 {
            %c = cooperative_matrix_load %C[%c0,%j] : coopmatrix<f32x32x16,matrix_acc>
            %acc2 = for %k = %c0, %c32, %c16 init(%x=%c) -> (coopmatrix<f32x32x16,matrix_acc>) {
                %ta = cooperative_matrix_load %A[%c0,%k] : coopmatrix<bf16x32x16,matrix_a>
                %tb = cooperative_matrix_load %B[%k,%j] : coopmatrix<bf16x16x16,matrix_b>
                %y = cooperative_matrix_mul_add %ta, %tb, %x : coopmatrix<f32x32x16,matrix_acc>
                yield (%y)
            }
            %ta = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<bf16x32x8,matrix_a>
            %tb = cooperative_matrix_load %B[%c0,%j] : coopmatrix<bf16x8x16,matrix_b>
            %d = cooperative_matrix_mul_add %ta, %tb, %acc2 : coopmatrix<f32x32x16,matrix_acc>
            cooperative_matrix_store %d, %C[%c0,%j]
        }
    }
}
"""


@needs_amx
def test_mixed_shapes_in_one_kernel(no_cache):
    """Products with K = 32, 16 and 8 (straight-line, after a loop) in one kernel: the
    operand tiles are 32 wide, the smaller products padded with zeros."""
    A, B, _, got = _run(MIXED, 32, 64, 32)
    expected = A @ B + A[:, :32] @ B[:32, :] + A[:, :8] @ B[:8, :]
    _close(got, expected, 64)


@needs_amx
@pytest.mark.parametrize("flag,M,K,N", [(".both_checked", 40, 40, 40),
                                        (".rows_checked", 40, 32, 32),
                                        (".cols_checked", 32, 32, 40)])
def test_checked_accesses_at_the_edges(no_cache, flag, M, K, N):
    """Sizes that are not multiples of the 16 x 16 x 16 tiles: the checked loads read zeros
    outside the memrefs (B is staged, not loaded as a tile) and the checked store writes
    only inside C (from a vector, not from the tiles)."""
    text = _kernel(M, K, N, 16, 16, 16, flag=flag)
    A, B, _, got = _run(text, M, K, N)
    _close(got, A @ B, K)


@needs_amx
def test_padded_accumulator_tiles(no_cache):
    """16 x 8 accumulators and K = 8 steps: tiles padded with zeros (stored as vectors)."""
    text = _kernel(32, 24, 16, 16, 8, 8)
    assert _zeroed(_ir(text))
    A, B, _, got = _run(text, 32, 24, 16)
    _close(got, A @ B, 24)


@needs_amx
def test_checked_mode(no_cache):
    text = _kernel(32, 32, 32, 16, 16, 16)
    A, B, _, got = _run(text, 32, 32, 32, checked=True)
    _close(got, A @ B, 32)


def test_vector_path_when_amx_is_disabled(no_cache, monkeypatch):
    text = _kernel(32, 32, 32, 16, 16, 16)
    monkeypatch.setenv("TTLC_AMX", "0")
    jit.amx_usable.cache_clear()
    try:
        ir = _ir(text)
        # no AMX instruction (a CPU with AVX512-BF16 takes vdpbf16ps on the vector path)
        amx = ("llvm.x86.ldtilecfg", "llvm.x86.tdp", "llvm.x86.tile")
        assert not [name for name in amx if name in ir]
        A, B, _, got = _run(text, 32, 32, 32)
        _close(got, A @ B, 32)
    finally:
        monkeypatch.delenv("TTLC_AMX")
        jit.amx_usable.cache_clear()
