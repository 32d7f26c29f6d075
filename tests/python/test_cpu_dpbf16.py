"""bf16 cooperative_matrix_mul_add on vdpbf16ps (target cpu, backends/cpu/dpbf16.py).

Language reference, "Cooperative matrix mul add": D = A B + C, here with bf16 A and B and
an f32 (or bf16) accumulator.  Where the CPU lacks AVX512-BF16 (this suite's usual
machine) the path runs with the instruction emulated (``jit.EMULATE_DPBF16PS``), so the
pair layout, the blocking, the padding and the order of the additions are all executed
and compared bit for bit with ``dot_reference``, a NumPy model of the instruction's
semantics (pairs of k, the odd member first, denormals flushed); NumPy in float64 and
the interpreter check the results within the tolerance of reassociation.  Code for CPU
models with the instruction (znver4, cooperlake) is compiled, not run, in a subprocess
(``TTLC_CPU``) and its IR and assembly inspected.
"""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

import ttlc
from ttlc.testing.cpu_model import run_for_cpu_model

jit = pytest.importorskip("ttlc.backends.cpu.jit")
import test_cpu_amx_loop as loop  # noqa: E402  (its K-loop kernels)

BF16 = ml_dtypes.bfloat16

KERNEL = """func @mm(%A: memref<bf16x{ar}x{ac}>, %B: memref<bf16x{br}x{bc}>, %C: memref<{acc}x{M}x{N}>)
        attributes{{subgroup_size={S}, work_group_size=[{wg},1]}} {{
    parallel {{
        %c0 = constant 0 : index
        %a = cooperative_matrix_load{ta} %A[%c0,%c0] : coopmatrix<bf16x{M}x{K},matrix_a>
        %b = cooperative_matrix_load{tb} %B[%c0,%c0] : coopmatrix<bf16x{K}x{N},matrix_b>
        %c = cooperative_matrix_load %C[%c0,%c0] : coopmatrix<{acc}x{M}x{N},matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<{acc}x{M}x{N},matrix_acc>
        cooperative_matrix_store %d, %C[%c0,%c0]
    }}
}}
"""


def _kernel(M, K, N, acc="f32", S=16, wg=None, ta=False, tb=False) -> str:
    """One mul_add; A (B) stored transposed and loaded with ``.t`` when ta (tb)."""
    ar, ac = (K, M) if ta else (M, K)
    br, bc = (N, K) if tb else (K, N)
    return KERNEL.format(M=M, K=K, N=N, acc=acc, S=S, wg=wg or S, ar=ar, ac=ac, br=br, bc=bc,
                         ta=".t" if ta else "", tb=".t" if tb else "")


def _flush(x) -> np.ndarray:
    """f32 values with denormals replaced by zeros of their sign (DAZ, FTZ)."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x)


def dot_reference(A, B, C, odd_first=True, flush=True) -> np.ndarray:
    """A B + C in f32 as the dot-product path computes it: K padded to pairs with zeros,
    the pairs in order of k, the odd member's products added first, each addition rounded
    (products of bf16 values are exact in f32), denormals flushed.  odd_first=False,
    flush=False is the vector path's order (one FMA per k, in order)."""
    f = _flush if flush else (lambda x: np.asarray(x, np.float32))
    K = A.shape[1]
    a = np.zeros((A.shape[0], K + K % 2), np.float32)
    b = np.zeros((K + K % 2, B.shape[1]), np.float32)
    a[:, :K], b[:K] = f(A.astype(np.float32)), f(B.astype(np.float32))
    acc = f(C.astype(np.float32))
    for k in range(0, K, 2):
        for kk in (k + 1, k) if odd_first else (k, k + 1):
            acc = f(acc + np.outer(a[:, kk], b[kk]))
    return acc


def _inputs(M, K, N, acc="f32", spread=8):
    """Random bf16 A and B (magnitudes over 2^-spread .. 2^spread, so that the order of
    the additions shows in the last bits) and C."""
    rng = np.random.default_rng(M * 10007 + K * 101 + N)

    def rand(shape):
        return (rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape))

    A, B = (np.asfortranarray(rand(s).astype(BF16)) for s in ((M, K), (K, N)))
    C = np.asfortranarray(rand((M, N)).astype(np.float32 if acc == "f32" else BF16))
    return A, B, C


def _run(text, A, B, C, checked=False, ta=False, tb=False, target="cpu"):
    """C after the kernel (A, B given untransposed; stored transposed for ``.t``)."""
    out = C.copy(order="F")
    args = [np.asfortranarray(A.T) if ta else A, np.asfortranarray(B.T) if tb else B, out]
    ttlc.compile(text, target=target, checked=checked)["mm"](*args, grid=1)
    return out


def _ir(text, checked=False) -> str:
    from ttlc.backends.cpu.module import Artifacts

    return Artifacts(ttlc.check(text), checked=checked).ir


def _on_dot_path(text) -> bool:
    """The mul_add runs on the (emulated) dot-product path: fused multiply-adds with the
    instruction's flushing, no FMA of the vector path."""
    ir_text = _ir(text)
    return "llvm.fma.v" in ir_text and "fmuladd" not in ir_text


def _same(got, expected) -> None:
    """Bit for bit (but +0 == -0)."""
    got, expected = np.asarray(got, np.float32), np.asarray(expected, np.float32)
    bad = np.argwhere(got != expected)
    assert not len(bad), f"{len(bad)} entries differ, first at {tuple(bad[0])}: " \
                         f"{got[tuple(bad[0])]!r} != {expected[tuple(bad[0])]!r}"


def _close(got, A, B, C, K) -> None:
    """Within f32 reassociation error of A B + C in float64."""
    a, b = A.astype(np.float64), B.astype(np.float64)
    expected = a @ b + C.astype(np.float64)
    scale = np.abs(a) @ np.abs(b) + np.abs(C.astype(np.float64))
    assert np.all(np.abs(got.astype(np.float64) - expected) <= (K + 1) * 2.0 ** -23 * scale)


@pytest.fixture
def emulated(monkeypatch):
    """The dot-product path with the instruction emulated, AMX off, no disk cache."""
    monkeypatch.setenv("TTLC_CACHE", "0")
    monkeypatch.setenv("TTLC_AMX", "0")
    monkeypatch.setattr(jit, "EMULATE_DPBF16PS", True)
    jit.amx_usable.cache_clear()
    yield
    monkeypatch.undo()
    jit.amx_usable.cache_clear()


#: (M, K, N, S, wg): a 16 x 16 tile (one block), K = 1 (padded to a pair), columns past
#: the registers (two blocks), two row pieces (blocks of 2 x 12 columns), a 256-bit and
#: a 128-bit piece, rows padded up to a 128-bit piece, two subgroups
SHAPES = [(16, 16, 16, 16, 16), (16, 1, 5, 16, 16), (16, 8, 40, 16, 16), (32, 4, 26, 16, 16),
          (8, 8, 8, 8, 8), (4, 4, 4, 4, 4), (2, 2, 3, 2, 2), (16, 8, 8, 16, 32)]


@pytest.mark.parametrize("M,K,N,S,wg", SHAPES)
def test_results_are_those_of_the_instruction(emulated, M, K, N, S, wg):
    text = _kernel(M, K, N, S=S, wg=wg)
    assert _on_dot_path(text)
    A, B, C = _inputs(M, K, N)
    got = _run(text, A, B, C)
    _same(got, dot_reference(A, B, C))
    _close(got, A, B, C, K)
    if M * K * N >= 128:  # enough data to tell the orders of the additions apart
        assert not np.array_equal(dot_reference(A, B, C), dot_reference(A, B, C, odd_first=False))


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_transposed_operands(emulated, ta, tb):
    text = _kernel(16, 8, 12, ta=ta, tb=tb)
    A, B, C = _inputs(16, 8, 12)
    _same(_run(text, A, B, C, ta=ta, tb=tb), dot_reference(A, B, C))


def test_bf16_accumulator_is_rounded_once(emulated):
    text = _kernel(16, 8, 8, acc="bf16")
    assert _on_dot_path(text)
    A, B, C = _inputs(16, 8, 8, acc="bf16")
    _same(_run(text, A, B, C).astype(np.float32), dot_reference(A, B, C).astype(BF16))


def test_denormals_are_flushed(emulated):
    """Denormal inputs count as zero and denormal results become zero, also between the
    two additions of a pair.  Each group of four rows takes the products of its columns
    of A: a denormal entry of A times 2^100 (2^-30 unflushed) and 2^-140 in the last
    step; 2^-127 then 2^-126 in one pair (1.5 2^-126 unflushed); a denormal C plus
    2^-126 in the first step (1.5 2^-126 unflushed); 2^100 times a denormal entry of B."""
    M, K, N = 16, 8, 4
    A = np.asfortranarray(np.zeros((M, K), BF16))
    B = np.asfortranarray(np.zeros((K, N), BF16))
    C = np.asfortranarray(np.zeros((M, N), np.float32))
    B[:, :] = np.array([2.0 ** 100, 2.0 ** -63, 2.0 ** -63, 2.0 ** -63, 0, 2.0 ** -130,
                        2.0 ** -70, 0], BF16)[:, None]
    A[:4, 0], A[:4, 6] = BF16(2.0 ** -130), BF16(2.0 ** -70)
    A[4:8, 2], A[4:8, 3] = BF16(2.0 ** -63), BF16(2.0 ** -64)
    A[8:12, 1], C[8:12, :] = BF16(2.0 ** -63), 2.0 ** -127
    A[12:, 5] = BF16(2.0 ** 100)
    got = _run(_kernel(M, K, N), A, B, C)
    _same(got, dot_reference(A, B, C))
    rows = lambda *values: np.repeat(np.float32(values), 4)[:, None] * np.ones(N)  # noqa: E731
    _same(got, rows(0, 2.0 ** -126, 2.0 ** -126, 0))
    _same(dot_reference(A, B, C, flush=False),
          rows(2.0 ** -30, 1.5 * 2.0 ** -126, 1.5 * 2.0 ** -126, 2.0 ** -30))


def test_vector_path_differs_only_in_order_and_flushing(monkeypatch):
    """Where the dot-product path is not taken, the vector path computes the same model
    with one FMA per k in order and denormals kept."""
    monkeypatch.setenv("TTLC_CACHE", "0")
    if jit.bf16_dot() is not None or jit.amx_usable():
        pytest.skip("bf16 mul_add does not take the vector path on this CPU")
    text = _kernel(16, 8, 8)
    assert not _on_dot_path(text)
    A, B, C = _inputs(16, 8, 8)
    _same(_run(text, A, B, C), dot_reference(A, B, C, odd_first=False, flush=False))


def test_agrees_with_the_interpreter(emulated):
    text = _kernel(16, 8, 12)
    A, B, C = _inputs(16, 8, 12, spread=0)
    got, want = _run(text, A, B, C), _run(text, A, B, C, target="interp")
    assert np.abs(got - want).max() <= 8 * 2.0 ** -23 * max(1.0, np.abs(want).max())


#: K loops as loop.RESIDENT: (M, K, N, tm, tk, tn): the benchmark's 16 x 16 x 16 steps, a
#: 32-row accumulator and K steps of 32
LOOPS = [(64, 64, 64, 16, 16, 16), (64, 32, 32, 32, 16, 16), (32, 64, 16, 16, 32, 16)]


@pytest.mark.parametrize("M,K,N,tm,tk,tn", LOOPS)
def test_k_loop(emulated, M, K, N, tm, tk, tn):
    text = loop._kernel(M, K, N, tm, tk, tn)
    A, B, _ = _inputs(M, K, N)
    got = _run(text, A, B, np.asfortranarray(np.zeros((M, N), np.float32)))
    _same(got, dot_reference(A, B, np.zeros((M, N), np.float32)))


@pytest.mark.parametrize("flag,M,K,N", [(".both_checked", 40, 40, 40),
                                        (".rows_checked", 40, 32, 32),
                                        (".cols_checked", 32, 32, 40)])
def test_checked_accesses_at_the_edges_in_checked_mode(emulated, flag, M, K, N):
    """Partial tiles: the checked loads read zeros outside the memrefs (pairs of zeros
    add nothing), the checked store writes only inside C; compiled with checks."""
    text = loop._kernel(M, K, N, 16, 16, 16, flag=flag)
    A, B, _ = _inputs(M, K, N)
    zero = np.asfortranarray(np.zeros((M, N), np.float32))
    _same(_run(text, A, B, zero, checked=True), dot_reference(A, B, zero))


def test_the_path_is_part_of_the_cache_key(monkeypatch):
    before = jit.versions()
    monkeypatch.setattr(jit, "EMULATE_DPBF16PS", True)
    assert jit.versions() != before and "bf16 dot emulated" in jit.versions()


@pytest.mark.skipif(not (jit.machine().is_host and jit.has_feature("avx512bf16")),
                    reason="no AVX512-BF16 on this CPU")
@pytest.mark.parametrize("M,K,N,S,wg", SHAPES)
def test_emulation_matches_the_instruction(monkeypatch, M, K, N, S, wg):
    monkeypatch.setenv("TTLC_CACHE", "0")
    monkeypatch.setenv("TTLC_AMX", "0")
    jit.amx_usable.cache_clear()
    try:
        text = _kernel(M, K, N, S=S, wg=wg)
        A, B, C = _inputs(M, K, N)
        A[:2, 0], C[2:4, :] = BF16(2.0 ** -130), np.float32(2.0 ** -140)  # denormals
        assert "dpbf16ps" in _ir(text)
        real = _run(text, A, B, C)
        monkeypatch.setattr(jit, "EMULATE_DPBF16PS", True)
        assert _on_dot_path(text)
        _same(_run(text, A, B, C), real)
    finally:
        monkeypatch.undo()
        jit.amx_usable.cache_clear()


@pytest.mark.skipif(not jit.amx_usable(), reason="no AMX-BF16 on this CPU")
def test_amx_keeps_priority(monkeypatch):
    monkeypatch.setattr(jit, "EMULATE_DPBF16PS", True)
    ir_text = _ir(_kernel(16, 16, 16))
    assert "tdpbf16ps" in ir_text and "dpbf16ps.5" not in ir_text and "llvm.fma.v" not in ir_text


# ---- code for CPU models with the instruction (compiled, not run) ------------------------
INSPECT = """
import json, re, sys
import ttlc
from ttlc.backends.cpu import jit
from ttlc.backends.cpu.module import Artifacts

out = {}
for name, text in json.loads(sys.stdin.read()).items():
    art = Artifacts(ttlc.check(text), checked=False)
    ir_text = art.optimized_ir()
    asm = jit.emit_assembly(art.optimized())
    dp = [line.split()[-1] for line in asm.splitlines() if line.strip().startswith("vdpbf16ps")]
    out[name] = {"intrinsics": sorted(set(re.findall(r"llvm\\.x86\\.avx512bf16\\.dpbf16ps\\.\\d+", ir_text))),
                 "vdpbf16ps": len(dp), "registers": sorted({r[:4] for r in dp}),
                 "fma": len(re.findall(r"\\bvfmadd", asm))}
print(json.dumps(out))
"""

MODEL_KERNELS = {"loop": loop._kernel(64, 64, 64, 16, 16, 16), "m8": _kernel(8, 8, 8, S=8),
                 "m4": _kernel(4, 4, 4, S=4), "odd": _kernel(16, 1, 5)}


def _inspect(cpu: str, features: str = "") -> dict:
    return run_for_cpu_model(cpu, INSPECT, stdin=json.dumps(MODEL_KERNELS), features=features)


@pytest.mark.parametrize("cpu", ["znver4", "cooperlake"])
def test_code_for_cpus_with_the_instruction(cpu):
    got = _inspect(cpu)
    loop_code = got["loop"]
    assert loop_code["intrinsics"] == ["llvm.x86.avx512bf16.dpbf16ps.512"]
    # the K loop's 16 x 16 x 16 step: 8 pairs of k times 16 columns, on zmm registers,
    # and no FMA of the vector path
    assert loop_code["vdpbf16ps"] == 128 and loop_code["registers"] == ["%zmm"]
    assert loop_code["fma"] == 0
    assert got["m8"]["intrinsics"] == ["llvm.x86.avx512bf16.dpbf16ps.256"]
    assert got["m8"]["registers"] == ["%ymm"] and got["m8"]["vdpbf16ps"] == 4 * 8
    assert got["m4"]["intrinsics"] == ["llvm.x86.avx512bf16.dpbf16ps.128"]
    assert got["m4"]["registers"] == ["%xmm"] and got["m4"]["vdpbf16ps"] == 2 * 4
    assert got["odd"]["vdpbf16ps"] == 5  # K = 1: one (padded) pair per column


@pytest.mark.parametrize("cpu,features", [("x86-64-v3", ""), ("znver4", "-avx512bf16"),
                                          ("znver4", "-avx512vl")])
def test_no_instruction_for_cpus_without_it(cpu, features):
    """Also for a model whose feature TTLC_CPU_FEATURES removes (AVX512-VL: the 128- and
    256-bit forms)."""
    for name, code in _inspect(cpu, features).items():
        assert code["intrinsics"] == [] and code["vdpbf16ps"] == 0, name
        assert code["fma"] > 0, name
