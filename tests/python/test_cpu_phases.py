"""Parallel regions with barriers on target cpu: with more subgroups than run in lockstep,
the region runs one subgroup after the other, split at its barriers into phases
(``backends/cpu/phases.py``).  The kernels here put barriers at the top level of the
region, in a uniform ``for`` with loop-carried scalars and coopmatrices, in a uniform
``if`` with results, and in an ``if`` inside such a ``for``; values (scalars,
coopmatrices, ids) live across barriers.  Results are checked against a NumPy model of
the spec's semantics ("Barrier", "Builtin" for the ids) and against the interpreter."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

#: the work-item's linear id w = 16 sg + l (spec, "Builtin"), in every kernel here
WORK_ITEM = """        %sg = subgroup_linear_id : i32
        %l = subgroup_local_id : i32
        %c16 = constant 16 : i32
        %base = mul %sg, %c16 : i32
        %wi = add %base, %l : i32
        %w = cast %wi : index
"""


def with_ids(kernel: str) -> str:
    return kernel.replace("        WORK_ITEM\n", WORK_ITEM)


#: W work-items, G subgroups of 16
RING = with_ids("""
func @ring(%ids: memref<i32x4x{W}>, %M: memref<f32x16x{N}>, %out: memref<f32x{W}>,
           %tiles_out: memref<f32x16x{N}>, %picked: memref<f32x{W}>, %steps: index,
           %flag: i32) attributes{{subgroup_size=16, work_group_size=[{WX},{WY}]}} {{
    %buf = alloca : memref<f32x{W},local>
    %tiles = alloca : memref<f32x16x{N},local>
    %count = alloca : memref<i32x1,local>
    parallel {{
        WORK_ITEM
        %sx = subgroup_id.x : i32
        %sy = subgroup_id.y : i32
        %g = cast %sg : index
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        %c16x = constant 16 : index
        %col = mul %g, %c16x : index
        %cW = constant {W} : index
        %cG = constant {G} : index
        %x0 = cast %wi : f32
        %half = constant 0.5 : f32
        %mine = cooperative_matrix_load %M[%c0, %col] : coopmatrix<f32x16x16,matrix_acc>
        %zero32 = constant 0 : i32
        %first = equal %wi, %zero32 : bool
        if %first {{
            store %zero32, %count[%c0]
        }}
        store %x0, %buf[%w]
        barrier.local
        ; top level: the value of work-item W-1-w, and a count by atomics
        %last = sub %cW, %c1 : index
        %mirror = sub %last, %w : index
        %rev = load %buf[%mirror] : f32
        %one = constant 1 : i32
        %old = atomic_add %one, %count[%c0] : i32
        barrier.local
        %total = load %count[%c0] : i32
        %totalf = cast %total : f32
        ; a uniform loop: s <- s + s[(w+1) mod W]; T <- T[(g+1) mod G] / 2 + M_g; every
        ; other step (a uniform if inside), s <- s + s[(w+2) mod W]
        %s, %t = for %i = %c0, %steps init(%s_it = %rev, %t_it = %mine)
                -> (f32, coopmatrix<f32x16x16,matrix_acc>) {{
            store %s_it, %buf[%w]
            cooperative_matrix_store %t_it, %tiles[%c0, %col]
            barrier.local
            %w1 = add %w, %c1 : index
            %nw = rem %w1, %cW : index
            %nx = load %buf[%nw] : f32
            %s_next = add %s_it, %nx : f32
            %g1 = add %g, %c1 : index
            %ng = rem %g1, %cG : index
            %ncol = mul %ng, %c16x : index
            %nt = cooperative_matrix_load %tiles[%c0, %ncol] : coopmatrix<f32x16x16,matrix_acc>
            %nt_half = cooperative_matrix_scale %half, %nt : coopmatrix<f32x16x16,matrix_acc>
            %t_next = add %nt_half, %mine : coopmatrix<f32x16x16,matrix_acc>
            %parity = rem %i, %c2 : index
            %even = equal %parity, %c0 : bool
            %s_out = if %even -> (f32) {{
                barrier.local
                store %s_next, %buf[%w]
                barrier.local
                %w2 = add %w, %c2 : index
                %mw = rem %w2, %cW : index
                %mx = load %buf[%mw] : f32
                %s2 = add %s_next, %mx : f32
                yield (%s2)
            }} else {{
                yield (%s_next)
            }}
            barrier.local
            yield (%s_out, %t_next)
        }}
        ; a uniform if with results: the value of work-item w+3 and the tile of g+1
        %flag_set = not_equal %flag, %zero32 : bool
        %p, %pt = if %flag_set -> (f32, coopmatrix<f32x16x16,matrix_acc>) {{
            store %s, %buf[%w]
            cooperative_matrix_store %t, %tiles[%c0, %col]
            barrier.local
            %w3 = add %w, %c3 : index
            %pw = rem %w3, %cW : index
            %px = load %buf[%pw] : f32
            %g1 = add %g, %c1 : index
            %pg = rem %g1, %cG : index
            %pcol = mul %pg, %c16x : index
            %ptile = cooperative_matrix_load %tiles[%c0, %pcol] : coopmatrix<f32x16x16,matrix_acc>
            yield (%px, %ptile)
        }} else {{
            yield (%x0, %mine)
        }}
        %with_total = add %p, %totalf : f32
        store %s, %out[%w]
        store %with_total, %picked[%w]
        cooperative_matrix_store %pt, %tiles_out[%c0, %col]
        store %sg, %ids[%c0, %w]
        store %sx, %ids[%c1, %w]
        store %sy, %ids[%c2, %w]
        store %l, %ids[%c3, %w]
    }}
}}
""")


def ring_text(wx: int, wy: int) -> str:
    W = wx * wy
    return RING.format(W=W, G=W // 16, N=W, WX=wx, WY=wy)


def ring_model(wx: int, wy: int, M: np.ndarray, steps: int, flag: bool):
    """The kernel's results computed from the spec's semantics with NumPy."""
    W, G = wx * wy, wx * wy // 16
    w = np.arange(W)
    ids = np.stack([w // 16, (w % wx) // 16, w // wx, w % 16]).astype(np.int32)
    s = (W - 1 - w).astype(np.float32)
    T = M.copy()
    for i in range(steps):
        s = s + s[(w + 1) % W]
        T = 0.5 * T[:, :, (np.arange(G) + 1) % G] + M
        if i % 2 == 0:
            s = s + s[(w + 2) % W]
    if flag:
        picked, tiles = s[(w + 3) % W], T[:, :, (np.arange(G) + 1) % G]
    else:
        picked, tiles = w.astype(np.float32), M
    return ids, s, tiles, picked + W


def run_ring(target: str, wx: int, wy: int, M: np.ndarray, steps: int, flag: bool):
    W, G = wx * wy, wx * wy // 16
    ids = np.full((4, W), -1, np.int32, order="F")
    out, picked = np.zeros(W, np.float32), np.zeros(W, np.float32)
    tiles = np.zeros((16, 16, G), np.float32, order="F")
    kernel = ttlc.compile(ring_text(wx, wy), target=target)["ring"]
    as_columns = lambda x: x.reshape(16, 16 * G, order="F")  # noqa: E731 (views)
    kernel(ids, as_columns(M), out, as_columns(tiles), picked, steps, np.int32(flag), grid=(1,))
    return ids, out, tiles, picked


SHAPES = [(32, 1), (16, 2), (64, 4), (1024, 1)]


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("wx,wy", SHAPES)
def test_barriers_in_uniform_control_flow_on_cpu_match_numpy(wx, wy, flag):
    """Values are small integers: every sum is exact, so the results are compared for
    equality; [32,1] and [16,2] run in lockstep, [64,4] and [1024,1] phase by phase."""
    G = wx * wy // 16
    M = np.asfortranarray(np.random.default_rng(G).integers(-4, 5, (16, 16, G)).astype(np.float32))
    got = run_ring("cpu", wx, wy, M, 3, flag)
    want = ring_model(wx, wy, M, 3, flag)
    for name, g, e in zip(("ids", "s", "tiles", "picked"), got, want):
        assert np.array_equal(g, e), name


@pytest.mark.parametrize("wx,wy", [(16, 2), (64, 4)])
def test_barriers_in_uniform_control_flow_on_cpu_match_the_interpreter(wx, wy):
    G = wx * wy // 16
    M = np.asfortranarray(np.random.default_rng(1).integers(-4, 5, (16, 16, G)).astype(np.float32))
    cpu = run_ring("cpu", wx, wy, M, 4, True)
    interp = run_ring("interp", wx, wy, M, 4, True)
    for name, a, b in zip(("ids", "s", "tiles", "picked"), cpu, interp):
        assert np.array_equal(a, b), name


def test_code_of_a_region_with_barriers_does_not_grow_with_the_work_group():
    """One subgroup's code, whatever the number of subgroups (the LLVM IR differs in the
    constants W and G only)."""
    from ttlc.backends.cpu.module import Artifacts

    small, large = (Artifacts(ttlc.check(ring_text(wx, 1)), checked=False).ir
                    for wx in (128, 1024))
    assert "for.wg" in large and "subgroups.done" in large
    assert len(large) < 1.05 * len(small)


STAGED_GEMM = (Path(__file__).resolve().parents[2] / "examples" / "staged_gemm.template").read_text()


@pytest.mark.parametrize("tiles,n", [(1, 64), (2, 64), (4, 64), (8, 128)])
def test_gemm_staged_through_local_memory_with_barriers(tiles, n):
    """examples/staged_gemm.template at [16,1], [64,1] (lockstep), [256,1] and [1024,1]
    (phases) against NumPy; small integers, so the products are exact."""
    module = ttlc.compile(STAGED_GEMM, target="cpu", defines={"tiles": tiles, "n": n})
    rng = np.random.default_rng(tiles)
    A, B = (np.asfortranarray(rng.integers(-3, 4, (n, n, 2)).astype(np.float32)) for _ in range(2))
    C = np.asfortranarray(np.full((n, n, 2), np.nan, np.float32))
    blocks = n // (16 * tiles)
    module["staged_gemm"](A, B, C, grid=(blocks, blocks, 2))
    assert np.array_equal(C, np.einsum("ikb,kjb->ijb", A, B))


#: values of every kind across barriers: a memref view, a varying bool, a uniform and a
#: varying complex, an index counter; a loop with barriers inside a loop with barriers,
#: its carried values swapped by the yield; an if with barriers and no else
KINDS = with_ids("""
func @kinds(%X: memref<f32x{W}x2>, %out: memref<f32x{W}>, %outc: memref<c32x{W}>,
            %count: memref<i32x{W}>, %n: index, %flag: i32)
        attributes{{subgroup_size=16, work_group_size=[{WX},{WY}]}} {{
    %buf = alloca : memref<f32x{W},local>
    parallel {{
        WORK_ITEM
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %cW = constant {W} : index
        %x0 = cast %wi : f32
        %second = subview %X[0:{W},%c1] : memref<f32x{W}>
        %one32 = constant 1 : i32
        %two32 = constant 2 : i32
        %parity = rem %wi, %two32 : i32
        %odd = equal %parity, %one32 : bool
        %z = constant [0.0, 1.0] : c32
        %zw = cast %x0 : c32
        %zero32 = constant 0 : i32
        %flag_set = not_equal %flag, %zero32 : bool
        barrier.local
        %a, %b, %k, %zc = for %i = %c0, %n init(%a_it = %x0, %b_it = %x0, %k_it = %c0, %z_it = %zw)
                -> (f32, f32, index, c32) {{
            %t = for %j = %c0, %c2 init(%t_it = %a_it) -> (f32) {{
                store %t_it, %buf[%w]
                barrier.local
                %w1 = add %w, %c1 : index
                %nw = rem %w1, %cW : index
                %nb = load %buf[%nw] : f32
                barrier.local
                %t_next = add %t_it, %nb : f32
                yield (%t_next)
            }}
            %k_next = add %k_it, %c1 : index
            %z_next = mul %z_it, %z : c32
            yield (%b_it, %t, %k_next, %z_next)
        }}
        %v = load %second[%w] : f32
        %picked = if %odd -> (f32) {{
            yield (%v)
        }} else {{
            yield (%a)
        }}
        if %flag_set {{
            barrier.local
            store %b, %buf[%w]
            barrier.local
        }}
        %last = sub %cW, %c1 : index
        %mirror = sub %last, %w : index
        %seen = load %buf[%mirror] : f32
        %result = add %picked, %seen : f32
        store %result, %out[%w]
        store %zc, %outc[%w]
        %k32 = cast %k : i32
        store %k32, %count[%w]
    }}
}}
""")


def kinds_model(W: int, X: np.ndarray, n: int, flag: bool):
    w = np.arange(W)
    a = b = w.astype(np.float32)
    buf = None  # the local memory's last contents
    for _ in range(n):
        t = a
        for _ in range(2):
            buf = t
            t = t + t[(w + 1) % W]
        a, b = b, t
    picked = np.where(w % 2 == 1, X[:, 1], a)
    if flag:
        buf = b
    seen = buf[W - 1 - w]
    return picked + seen, (w * (1j ** n)).astype(np.complex64), np.full(W, n, np.int32)


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("wx,wy", [(32, 1), (64, 4), (1024, 1)])
def test_values_of_every_kind_live_across_barriers(wx, wy, flag):
    W, n = wx * wy, 3
    X = np.asfortranarray(np.random.default_rng(W).integers(-9, 10, (W, 2)).astype(np.float32))
    out = np.zeros(W, np.float32)
    outc = np.zeros(W, np.complex64)
    count = np.zeros(W, np.int32)
    kernel = ttlc.compile(KINDS.format(W=W, WX=wx, WY=wy), target="cpu")["kinds"]
    kernel(X, out, outc, count, n, np.int32(flag), grid=(1,))
    want = kinds_model(W, X, n, flag)
    assert np.array_equal(out, want[0])
    assert np.array_equal(outc, want[1])
    assert np.array_equal(count, want[2])


HISTOGRAM = with_ids("""
func @histogram(%x: memref<i32x?>, %bins: memref<i32x8>, %last: memref<i32x8>) attributes{subgroup_size=16, work_group_size=[1024,1]} {
    parallel {
        WORK_ITEM
        %n = size %x[0] : index
        %W = constant 1024 : index
        %one = constant 1 : i32
        for %e = %w, %n, %W {
            %v = load %x[%e] : i32
            %bin = cast %v : index
            %old = atomic_add %one, %bins[%bin] : i32
            %e32 = cast %e : i32
            %mx = atomic_max %e32, %last[%bin] : i32
        }
    }
}
""")


def test_atomics_do_not_keep_the_work_group_in_lockstep():
    """Atomics order nothing between barriers (``function.loops_over_subgroups``): the 64
    subgroups run one after the other, and the counts are those of NumPy."""
    from ttlc.backends.cpu.module import Artifacts

    assert "subgroups.done" in Artifacts(ttlc.check(HISTOGRAM), checked=False).ir
    x = np.random.default_rng(3).integers(0, 8, 5000).astype(np.int32)
    bins, last = np.zeros(8, np.int32), np.full(8, -1, np.int32)
    ttlc.compile(HISTOGRAM, target="cpu")["histogram"](x, bins, last, grid=(1,))
    assert np.array_equal(bins, np.bincount(x, minlength=8))
    assert np.array_equal(last, [np.flatnonzero(x == k).max() for k in range(8)])


#: a barrier under a condition the uniformity analysis cannot prove uniform (it is true
#: for every work-item): the region keeps the work-group's lanes in lockstep
VARYING_CONDITION = with_ids("""
func @k(%out: memref<i32x256>) attributes{subgroup_size=16, work_group_size=[256,1]} {
    %buf = alloca : memref<i32x256,local>
    parallel {
        WORK_ITEM
        %zero = constant 0 : i32
        %always = greater_than_equal %sg, %zero : bool
        store %wi, %buf[%w]
        if %always {
            barrier.local
        }
        %c255 = constant 255 : index
        %mirror = sub %c255, %w : index
        %v = load %buf[%mirror] : i32
        store %v, %out[%w]
    }
}
""")


def test_a_barrier_under_a_varying_condition_keeps_lockstep():
    from ttlc.backends.cpu.module import Artifacts

    assert "subgroups.done" not in Artifacts(ttlc.check(VARYING_CONDITION), checked=False).ir
    out = np.zeros(256, np.int32)
    ttlc.compile(VARYING_CONDITION, target="cpu")["k"](out, grid=(1,))
    assert np.array_equal(out, np.arange(256)[::-1])


def test_generated_programs_with_barriers_or_atomics_agree_when_run_in_phases(monkeypatch):
    """The differential generator's programs (at most 4 subgroups, which run in lockstep)
    with every work-group of 2 or more subgroups run phase by phase instead: the same
    results as the interpreter.  The disk cache is off (it does not know the threshold)."""
    import re

    from ttlc.backends.cpu import function
    from ttlc.backends.cpu.module import Artifacts
    from ttlc.testing.differential import compare_case
    from ttlc.testing.generator import generate

    monkeypatch.setattr(function, "LOCKSTEP_SUBGROUPS", 1)
    monkeypatch.setenv("TTLC_CACHE", "0")
    sizes = re.compile(r"subgroup_size=(\d+), work_group_size=\[(\d+),(\d+)\]")
    compared = 0
    for seed in range(120):
        case = generate(seed)
        m = sizes.search(case.text)
        if not {"barrier", "atomic"} & set(case.features) or not m or \
                int(m.group(2)) * int(m.group(3)) < 2 * int(m.group(1)):
            continue
        assert "subgroups.done" in Artifacts(ttlc.check(case.text), checked=False).ir
        outcome = compare_case(case, "interp", "cpu")
        assert outcome.ok, outcome.report()
        compared += 1
    assert compared >= 10
