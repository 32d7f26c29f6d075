"""Properties of the layout object (ttlc.ir.layout) for random shapes, subgroup sizes and
layouts: the language's layout, the target descriptions' storage layouts (Xe DPAS,
NVIDIA mma) and random nested layouts.

* The ownership map is a bijection from the padded matrix onto (lane, register):
  every element of the padded shape has one owner, no two share one, and ``element``
  is its inverse.
* It is what ``cooperative_matrix_extract`` and ``insert`` see in the reference
  interpreter: a kernel that extracts every register of every lane (and one that
  inserts a distinct number at each) is run on target interp, and its results are
  compared with the layout's map.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ttlc
from ttlc.ir.layout import MatrixLayout, NestedLayout, matrix_layout
from ttlc.ir.types import SCALAR_TYPES, CoopMatrixType
from ttlc.target import get_target

POW2 = st.sampled_from([1, 2, 4, 8, 16, 32, 64])


def assert_bijection(n: NestedLayout):
    """Every index of n.shape has one (lane, register), all different, and element()
    inverts locate()."""
    grids = np.meshgrid(*[np.arange(s) for s in n.shape], indexing="ij")
    lane, reg = n.locate(tuple(g.ravel() for g in grids))
    lane = np.broadcast_to(lane, grids[0].size)
    reg = np.broadcast_to(reg, grids[0].size)
    assert n.lanes * n.registers == math.prod(n.shape)
    assert ((0 <= lane) & (lane < n.lanes)).all() and ((0 <= reg) & (reg < n.registers)).all()
    assert len(set(zip(lane.tolist(), reg.tolist()))) == math.prod(n.shape)
    back = n.element(lane, reg)
    for d, g in enumerate(grids):
        assert (np.broadcast_to(back[d], g.size) == g.ravel()).all()


@settings(max_examples=150, deadline=None)
@given(S=POW2, M=POW2, N=st.integers(1, 70))
def test_language_layout_is_a_bijection(S, M, N):
    lay = matrix_layout(M, N, S)
    assert lay.nested.shape[0] == M and lay.nested.shape[1] >= N
    assert lay.nested.lanes == S
    assert_bijection(lay.nested)


UNITS = [(name, ty, use) for name in ("pvc", "nvidia") for ty in ("f16", "bf16", "i8", "f32", "i32")
         for use in ("matrix_a", "matrix_b", "matrix_acc")]


@settings(max_examples=150, deadline=None)
@given(unit=st.sampled_from(UNITS), M=st.sampled_from([1, 2, 4, 8, 16, 32]),
       N=st.sampled_from([8, 16, 32, 48, 64, 5]), data=st.data())
def test_storage_layouts_are_bijections(unit, M, N, data):
    name, ty, use = unit
    target = get_target(name)
    S = data.draw(st.sampled_from(target.subgroup_sizes))
    lay = target.storage_layout(CoopMatrixType(SCALAR_TYPES[ty], M, N, use), S)
    assert lay.nested.shape[0] == M and lay.nested.shape[1] >= N
    assert lay.nested.lanes == S
    assert_bijection(lay.nested)


@st.composite
def nested_layouts(draw):
    """A random nested layout of one subgroup whose thread strides number the lanes in
    a random order of the modes (mixed radix), as a consistent layout must."""
    rank = draw(st.integers(1, 3))
    tile = lambda: tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=rank,
                                       max_size=rank)))
    batch, outer, thread, element = tile(), tile(), tile(), tile()
    order = draw(st.permutations(range(rank)))
    strides, stride = [0] * rank, 1
    for d in order:
        strides[d] = stride if thread[d] > 1 else 0
        stride *= thread[d]
    return NestedLayout((1,) * rank, batch, outer, thread, element, (0,) * rank, tuple(strides))


@settings(max_examples=150, deadline=None)
@given(nested_layouts())
def test_random_nested_layouts_are_bijections(n):
    assert_bijection(n)
    assert NestedLayout.from_iree(n.to_iree()) == n


def test_a_layout_whose_strides_collide_is_not_a_bijection():
    """The property can fail: two modes numbering lanes with the same stride."""
    n = NestedLayout((1, 1), (1, 1), (1, 1), (2, 2), (1, 1), (0, 0), (1, 1))
    with pytest.raises(AssertionError):
        assert_bijection(n)


# ---- agreement with extract and insert in the interpreter ----------------------------------
EXTRACT = """func @k(%A: memref<f32x{M}x{N}>, %B: memref<f32x{V}x{S}>) attributes {{subgroup_size={S}, work_group_size=[{S},1]}} {{
  parallel {{
    %li = subgroup_local_id : i32
    %p = cast %li : index
    %c0 = constant 0 : index
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x{M}x{N},matrix_acc>
{body}
  }}
}}"""

INSERT = """func @k(%B: memref<f32x{M}x{N}>) attributes {{subgroup_size={S}, work_group_size=[{S},1]}} {{
  parallel {{
    %li = subgroup_local_id : i32
    %c0 = constant 0 : index
    %lf = cast %li : f32
    %h = constant 1000.0 : f32
    %base = mul %lf, %h : f32
    %m1 = constant -1.0 : f32
    %a0 = cooperative_matrix_construct %m1 : coopmatrix<f32x{M}x{N},matrix_acc>
{body}
    cooperative_matrix_store %a{V}, %B[%c0, %c0]
  }}
}}"""

SMALL = dict(S=st.sampled_from([1, 2, 4, 8, 16, 32]), M=st.sampled_from([1, 2, 4, 8, 16]),
             N=st.integers(1, 12))


def _small_layout(S: int, M: int, N: int) -> MatrixLayout:
    """The language's layout, for kernels of at most 32 extracts or inserts."""
    lay = matrix_layout(M, N, S)
    assume(lay.registers <= 32)
    return lay


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(**SMALL)
def test_extract_sees_the_layout(S, M, N):
    lay = _small_layout(S, M, N)
    V = lay.registers
    body = "\n".join(f"    %e{v} = cooperative_matrix_extract %a[{v}] : f32\n"
                     f"    %cv{v} = constant {v} : index\n"
                     f"    store %e{v}, %B[%cv{v}, %p]" for v in range(V))
    A = np.asfortranarray(1 + np.arange(M)[:, None] * 100 + np.arange(N)[None, :], np.float32)
    B = np.asfortranarray(np.full((V, S), -1, np.float32))
    ttlc.compile(EXTRACT.format(M=M, N=N, S=S, V=V, body=body), target="interp")["k"](A, B)
    for p in range(S):
        for v in range(V):
            r, c = (int(x) for x in lay.element(p % lay.nested.lanes, v))
            assert B[v, p] == (A[r, c] if c < N else 0.0), (p, v, r, c)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(**SMALL)
def test_insert_sees_the_layout(S, M, N):
    lay = _small_layout(S, M, N)
    V = lay.registers
    t = f"coopmatrix<f32x{M}x{N},matrix_acc>"
    body = "\n".join(f"    %k{v} = constant {v + 1}.0 : f32\n"
                     f"    %x{v} = add %base, %k{v} : f32\n"
                     f"    %a{v + 1} = cooperative_matrix_insert %x{v}, %a{v}[{v}] : {t}"
                     for v in range(V))
    B = np.asfortranarray(np.zeros((M, N), np.float32))
    ttlc.compile(INSERT.format(M=M, N=N, S=S, V=V, body=body), target="interp")["k"](B)
    for r in range(M):
        for c in range(N):
            p, v = (int(x) for x in lay.locate(r, c))
            assert B[r, c] == p * 1000 + v + 1, (r, c, p, v)


@pytest.mark.parametrize("ty,k", [("f16", 16), ("bf16", 16), ("i8", 32)])
def test_nvidia_fragments_are_those_of_the_ptx_isa(ty, k):
    """mma.sync m16n8k16 (m16n8k32 for i8) fragments, written out from the PTX ISA's
    tables: g = lane / 4, t = lane % 4; E = k / 8 components per 32-bit register.
    A (16 x k): row g or g + 8, column E t + i or that + 4E.  B (k x 8): row E t + i or
    that + 4E, column g.  C (16 x 8, f32/i32): row g or g + 8, column 2 t + i."""
    nvidia = get_target("nvidia")
    E = k // 8
    acc = "i32" if ty == "i8" else "f32"
    held = {
        ("matrix_a", 16, k, ty): lambda r, c: 4 * (r % 8) + (c % (4 * E)) // E,
        ("matrix_b", k, 8, ty): lambda r, c: 4 * c + (r % (4 * E)) // E,
        ("matrix_acc", 16, 8, acc): lambda r, c: 4 * (r % 8) + c // 2,
    }
    for (use, M, N, comp), lane_of in held.items():
        lay = nvidia.storage_layout(CoopMatrixType(SCALAR_TYPES[comp], M, N, use), 32)
        assert lay.registers * 32 == M * N
        for r in range(M):
            for c in range(N):
                assert int(lay.locate(r, c)[0]) == lane_of(r, c), (use, r, c)
        # two tiles side by side: a batch of fragments
        wide = nvidia.storage_layout(CoopMatrixType(SCALAR_TYPES[comp], M, 2 * N, use), 32)
        assert wide.nested.batch_tile == (1, 2)
        assert int(wide.locate(0, N)[0]) == lane_of(0, 0)
