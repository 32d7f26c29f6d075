"""Semantics of the coopmatrix and subgroup instructions on every target (interp, cpu).

Small kernels, valid per the language reference, run on each target (see
interp_testing.py); expected results are computed here with NumPy, independently of
``ttlc.interp``, from the formulas of the reference (load/store tables, subgroup
operation definitions) and from the work-item layout of docs/language-notes.md ("Coopmatrix
distribution").
"""
from __future__ import annotations

from string import Template

import ml_dtypes
import numpy as np
import pytest

import interp_testing
import ttlc

S = 16
DT = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "index": np.int64,
      "bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64,
      "c32": np.complex64, "c64": np.complex128}
RNG = np.random.default_rng(1234)


# ---- helpers ------------------------------------------------------------------------------
def _compile(src: str, checked: bool):
    return interp_testing.compile_for_target(src, checked)


def kernel(template: str, **subst) -> str:
    return Template(template).substitute(**subst)


def run(src: str, *args, grid=(1, 1, 1), checked=False):
    _compile(src, checked)["k"](*args, grid=grid)


def F(x, dtype=None):
    return np.asfortranarray(np.asarray(x, dtype=dtype))


def zeros(shape, ty):
    return np.zeros(shape, dtype=DT[ty], order="F")


def rand(shape, ty, lo=-8, hi=8):
    """Small integer-valued entries: exact in every type, so sums are exact too."""
    x = RNG.integers(lo, hi, size=shape)
    if ty in ("c32", "c64"):
        x = x + 1j * RNG.integers(lo, hi, size=shape)
    return F(x, DT[ty])


def expected_layout(S, M, N):
    """docs/language-notes.md: element (r, c), r = i + k I, lives in work-item L mod S at index L / S
    with L = i + I c + I J k.  Returns V and {(p, v): (r, c) or None for padding}."""
    I = min(M, S)
    K = M // I
    J = -(-I * N // S) * S // I
    V = K * I * J // S
    table = {}
    for k in range(K):
        for i in range(I):
            for c in range(J):
                L = i + I * c + I * J * k
                table[(L % S, L // S)] = (i + k * I, c) if c < N else None
    assert sorted(table) == [(p, v) for p in range(S) for v in range(V)]
    return V, table


#: work-item ids inside a parallel region (%w: index of the work-item in the work-group,
#: %g: subgroup linear id as index)
IDS = """
    %sg = subgroup_linear_id : i32
    %li = subgroup_local_id : i32
    %ssz = subgroup_size : i32
    %t0 = mul %sg, %ssz : i32
    %w32 = add %t0, %li : i32
    %w = cast %w32 : index
    %g = cast %sg : index
    %c0 = constant 0 : index"""


# ---- layout -------------------------------------------------------------------------------
def test_layout_examples_of_design():
    V, t = expected_layout(16, 4, 15)
    assert V == 4
    assert [t[(0, v)] for v in range(4)] == [(0, 0), (0, 4), (0, 8), (0, 12)]
    assert [t[(15, v)] for v in range(4)] == [(3, 3), (3, 7), (3, 11), None]


EXTRACT = """func @k(%A: memref<f32x${M}x${NG}>, %B: memref<f32x${V}x${W}>) attributes {subgroup_size=${S}, work_group_size=[${W},1]} {
  parallel {${IDS}
    %cN = constant ${N} : index
    %y = mul %g, %cN : index
    %a = cooperative_matrix_load %A[%c0, %y] : coopmatrix<f32x${M}x${N},${USE}>
${BODY}
  }
}"""


@pytest.mark.parametrize("sgs,M,N,use", [(16, 16, 8, "matrix_acc"), (16, 4, 15, "matrix_acc"),
                                         (16, 32, 16, "matrix_acc"), (16, 8, 8, "matrix_a"),
                                         (16, 16, 4, "matrix_b"), (8, 4, 15, "matrix_acc"),
                                         (32, 4, 15, "matrix_acc"), (32, 64, 3, "matrix_acc")])
def test_extract_layout(sgs, M, N, use):
    G = 2
    W = G * sgs
    V, table = expected_layout(sgs, M, N)
    body = "\n".join(f"    %e{v} = cooperative_matrix_extract %a[{v}] : f32\n"
                     f"    %cv{v} = constant {v} : index\n"
                     f"    store %e{v}, %B[%cv{v}, %w]" for v in range(V))
    src = kernel(EXTRACT, M=M, N=N, NG=N * G, V=V, W=W, S=sgs, USE=use, IDS=IDS, BODY=body)
    A = F(1 + np.arange(M)[:, None] * 1000 + np.arange(N * G)[None, :], np.float32)
    B = zeros((V, W), "f32")
    run(src, A, B)
    want = np.zeros((V, W), np.float32)
    for w in range(W):
        g, p = divmod(w, sgs)
        for v in range(V):
            rc = table[(p, v)]
            want[v, w] = 0.0 if rc is None else A[rc[0], g * N + rc[1]]
    np.testing.assert_array_equal(B, want)
    if (sgs, M, N) == (16, 4, 15):  # the example of docs/language-notes.md, spelled out
        assert list(B[:, 0]) == [A[0, 0], A[0, 4], A[0, 8], A[0, 12]]
        assert list(B[:, 15]) == [A[3, 3], A[3, 7], A[3, 11], 0.0]


INSERT = """func @k(%B: memref<f32x${M}x${NG}>) attributes {subgroup_size=${S}, work_group_size=[${W},1]} {
  parallel {${IDS}
    %cN = constant ${N} : index
    %y = mul %g, %cN : index
    %m1 = constant -1.0 : f32
    %a0 = cooperative_matrix_construct %m1 : coopmatrix<f32x${M}x${N},matrix_acc>
    %wf = cast %w32 : f32
    %h = constant 100.0 : f32
    %base = mul %wf, %h : f32
${BODY}
    cooperative_matrix_store %a${V}, %B[%c0, %y]
  }
}"""


@pytest.mark.parametrize("sgs,M,N", [(16, 16, 8), (16, 4, 15), (16, 32, 16), (8, 4, 15),
                                     (32, 4, 15)])
def test_insert_layout(sgs, M, N):
    G = 2
    W = G * sgs
    V, table = expected_layout(sgs, M, N)
    body = "\n".join(f"    %k{v} = constant {v + 1}.0 : f32\n"
                     f"    %x{v} = add %base, %k{v} : f32\n"
                     f"    %a{v + 1} = cooperative_matrix_insert %x{v}, %a{v}[{v}] : "
                     f"coopmatrix<f32x{M}x{N},matrix_acc>" for v in range(V))
    src = kernel(INSERT, M=M, N=N, NG=N * G, V=V, W=W, S=sgs, IDS=IDS, BODY=body)
    B = zeros((M, N * G), "f32")
    run(src, B)
    want = np.full((M, N * G), -1.0, np.float32)
    for w in range(W):
        g, p = divmod(w, sgs)
        for v in range(V):
            rc = table[(p, v)]
            if rc is not None:  # writes to padding are ignored
                want[rc[0], g * N + rc[1]] = w * 100 + v + 1
    assert (want != -1).all()  # every entry has an owner
    np.testing.assert_array_equal(B, want)


EXTRACT_INSERT = """func @k(%A: memref<${T}x32x4>, %B: memref<${T}x32x4>) attributes {subgroup_size=16, work_group_size=[16,2]} {
  parallel {${IDS}
    %c16 = constant 16 : index
    %x = mul %g, %c16 : index
    %a0 = cooperative_matrix_load %A[%x, %c0] : coopmatrix<${T}x16x4,matrix_b>
    %two = constant ${TWO} : ${T}
${BODY}
    cooperative_matrix_store %a4, %B[%x, %c0]
  }
}"""


@pytest.mark.parametrize("ty,two", [("i8", "2"), ("i64", "2"), ("bf16", "2.0"), ("f16", "2.0"),
                                    ("c64", "[2.0, 0.0]"), ("c32", "[0.0, 1.0]")])
def test_extract_then_insert_every_entry(ty, two):
    """16 x 4 with S = 16: four entries per work-item, no padding."""
    body = "\n".join(f"    %e{v} = cooperative_matrix_extract %a{v}[{v}] : {ty}\n"
                     f"    %d{v} = mul %e{v}, %two : {ty}\n"
                     f"    %a{v + 1} = cooperative_matrix_insert %d{v}, %a{v}[{v}] : "
                     f"coopmatrix<{ty}x16x4,matrix_b>" for v in range(4))
    A = rand((32, 4), ty)
    B = zeros((32, 4), ty)
    run(kernel(EXTRACT_INSERT, T=ty, TWO=two, BODY=body, IDS=IDS), A, B)
    factor = 1j if ty == "c32" else 2
    np.testing.assert_array_equal(B, (A * factor).astype(DT[ty]))


DIVERGENT_INSERT = """func @k(%A: memref<f32x16x8>, %B: memref<f32x16x8>) attributes {subgroup_size=16} {
  parallel {${IDS}
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
    %c8 = constant 8 : i32
    %cond = less_than %li, %c8 : bool
    %b = if %cond -> (coopmatrix<f32x16x8,matrix_acc>) {
        %z = constant 0.0 : f32
        %n = cooperative_matrix_insert %z, %a[2] : coopmatrix<f32x16x8,matrix_acc>
        %two = constant 2.0 : f32
        %s = cooperative_matrix_scale %two, %n : coopmatrix<f32x16x8,matrix_acc>
        yield (%s)
    } else {
        yield (%a)
    }
    cooperative_matrix_store %b, %B[%c0, %c0]
  }
}"""


def test_divergent_branches_merge_entries_by_owner():
    """Work-items 0..7 take the then-branch: only the entries they hold change."""
    src = kernel(DIVERGENT_INSERT, IDS=IDS)
    A = rand((16, 8), "f32")
    B = zeros((16, 8), "f32")
    run(src, A, B)
    V, table = expected_layout(16, 16, 8)
    want = A.copy()
    for (p, v), (r, c) in table.items():
        if p < 8:
            want[r, c] = 0.0 if v == 2 else 2 * A[r, c]
    np.testing.assert_array_equal(B, want)


# ---- load / store -----------------------------------------------------------------------
ROUNDTRIP = """func @k(%A: memref<${T}x64x24>, %B: memref<${T}x64x24>) attributes {subgroup_size=16, work_group_size=[32,2]} {
  parallel {${IDS}
    %c16 = constant 16 : index
    %x = mul %g, %c16 : index
    %a = ${LOAD} %A[%x, %g] : coopmatrix<${T}x16x16,matrix_acc>
    ${STORE} %a, %B[%x, %g]
  }
}"""


@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize("ty", ["i8", "i32", "i64", "f16", "bf16", "f32", "f64", "c32", "c64"])
def test_load_store_roundtrip(ty, atomic):
    load = "cooperative_matrix_atomic_load" if atomic else "cooperative_matrix_load"
    store = "cooperative_matrix_atomic_store" if atomic else "cooperative_matrix_store"
    src = kernel(ROUNDTRIP, T=ty, LOAD=load, STORE=store, IDS=IDS)
    A = rand((64, 24), ty)
    B = zeros((64, 24), ty)
    run(src, A, B)
    want = zeros((64, 24), ty)
    for g in range(4):  # subgroup g moves the block at (16 g, g)
        want[16 * g:16 * g + 16, g:g + 16] = A[16 * g:16 * g + 16, g:g + 16]
    np.testing.assert_array_equal(B, want)


TRANSPOSED_LOAD = """func @k(%A: memref<f32x32x24>, %B: memref<f32x64x8>) attributes {subgroup_size=16, work_group_size=[64,1]} {
  parallel {${IDS}
    %c8 = constant 8 : index
    %c2 = constant 2 : index
    %c16 = constant 16 : index
    %x = mul %g, %c8 : index
    %y = mul %g, %c2 : index
    %z = mul %g, %c16 : index
    %a = cooperative_matrix_load.t %A[%x, %y] : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store %a, %B[%z, %c0]
  }
}"""


def test_transposed_load():
    A = rand((32, 24), "f32")
    B = zeros((64, 8), "f32")
    run(kernel(TRANSPOSED_LOAD, IDS=IDS), A, B)
    want = np.zeros((64, 8), np.float32)
    for g in range(4):  # A_ij = M[(x + j), (y + i)]
        for i in range(16):
            for j in range(8):
                want[16 * g + i, j] = A[8 * g + j, 2 * g + i]
    np.testing.assert_array_equal(B, want)


TRANSPOSED_STORE = """func @k(%A: memref<f32x64x8>, %B: memref<f32x32x64>) attributes {subgroup_size=16, work_group_size=[64,1]} {
  parallel {${IDS}
    %c8 = constant 8 : index
    %c16 = constant 16 : index
    %x = mul %g, %c8 : index
    %z = mul %g, %c16 : index
    %a = cooperative_matrix_load %A[%z, %c0] : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store.t %a, %B[%x, %z]
  }
}"""


def test_transposed_store():
    A = rand((64, 8), "f32")
    B = zeros((32, 64), "f32")
    run(kernel(TRANSPOSED_STORE, IDS=IDS), A, B)
    want = np.zeros((32, 64), np.float32)
    for g in range(4):  # M[(x + j), (y + i)] := A_ij
        for i in range(16):
            for j in range(8):
                want[8 * g + j, 16 * g + i] = A[16 * g + i, j]
    np.testing.assert_array_equal(B, want)


def reference_access(x, y, s1, s2, X, Y, transpose, flag):
    """Per component (i, j) of an X x Y coopmatrix: memref index and whether it is accessed,
    from the tables of cooperative_matrix_load/store."""
    out = {}
    for i in range(X):
        for j in range(Y):
            ri, ci = (x + j, y + i) if transpose else (x + i, y + j)
            rows_ok = (0 <= y + i < s2) if transpose else (0 <= x + i < s1)
            cols_ok = (0 <= x + j < s1) if transpose else (0 <= y + j < s2)
            ok = {None: True, "rows_checked": rows_ok, "cols_checked": cols_ok,
                  "both_checked": rows_ok and cols_ok}[flag]
            if ok:
                assert 0 <= ri < s1 and 0 <= ci < s2, "test case accesses out of bounds"
            out[(i, j)] = (ri, ci, ok)
    return out


#: (transpose, flag, x, y) for a 16 x 8 coopmatrix and a 20 x 21 memref
EDGE_CASES = [
    (False, None, 4, 13), (True, None, 12, 5),
    (False, "rows_checked", 10, 2), (False, "rows_checked", -6, 2),
    (False, "cols_checked", 2, 17), (False, "cols_checked", 2, -3),
    (False, "both_checked", 10, 17), (False, "both_checked", -5, -3),
    (False, "both_checked", 30, 40),
    (True, "rows_checked", 3, 10), (True, "rows_checked", 3, -4),
    (True, "cols_checked", 15, 2), (True, "cols_checked", -2, 2),
    (True, "both_checked", 15, 10), (True, "both_checked", -3, -5),
]


def _suffix(transpose, flag):
    return (".t" if transpose else "") + (f".{flag}" if flag else "")


CHECKED_LOAD = """func @k(%A: memref<f32x?x?>, %B: memref<f32x16x8>, %x: index, %y: index) attributes {subgroup_size=16} {
  parallel {
    %c0 = constant 0 : index
    %a = ${LOAD}${SUFFIX} %A[%x, %y] : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store %a, %B[%c0, %c0]
  }
}"""


@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize("transpose,flag,x,y", EDGE_CASES)
def test_checked_load_at_edges(transpose, flag, x, y, atomic, checked):
    load = "cooperative_matrix_atomic_load" if atomic else "cooperative_matrix_load"
    src = kernel(CHECKED_LOAD, LOAD=load, SUFFIX=_suffix(transpose, flag))
    A = rand((20, 21), "f32") + 100  # no zeros: out-of-bounds components read as 0
    B = F(np.full((16, 8), -1.0, np.float32))
    run(src, A, B, x, y, checked=checked)
    want = np.zeros((16, 8), np.float32)
    for (i, j), (ri, ci, ok) in reference_access(x, y, 20, 21, 16, 8, transpose, flag).items():
        want[i, j] = A[ri, ci] if ok else 0.0
    np.testing.assert_array_equal(B, want)


CHECKED_STORE = """func @k(%A: memref<f32x16x8>, %B: memref<f32x?x?>, %x: index, %y: index) attributes {subgroup_size=16} {
  parallel {
    %c0 = constant 0 : index
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
    ${STORE}${SUFFIX} %a, %B[%x, %y]
  }
}"""


@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize("transpose,flag,x,y", EDGE_CASES)
def test_checked_store_at_edges(transpose, flag, x, y, atomic, checked):
    store = "cooperative_matrix_atomic_store" if atomic else "cooperative_matrix_store"
    src = kernel(CHECKED_STORE, STORE=store, SUFFIX=_suffix(transpose, flag))
    A = rand((16, 8), "f32") + 100
    B = F(np.full((20, 21), -1.0, np.float32))
    run(src, A, B, x, y, checked=checked)
    want = np.full((20, 21), -1.0, np.float32)
    for (i, j), (ri, ci, ok) in reference_access(x, y, 20, 21, 16, 8, transpose, flag).items():
        if ok:
            want[ri, ci] = A[i, j]
    np.testing.assert_array_equal(B, want)


@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("store", [False, True])
@pytest.mark.parametrize("x,y", [(400, 0), (0, 30), (-1, 0), (5, 14)])
def test_unchecked_access_outside_the_buffer_is_a_kernel_error(x, y, store, checked):
    if not checked and interp_testing.CURRENT_TARGET != "interp":
        pytest.skip(interp_testing.UNCHECKED_OUT_OF_BOUNDS)
    src = kernel(CHECKED_STORE if store else CHECKED_LOAD, SUFFIX="",
                 STORE="cooperative_matrix_store", LOAD="cooperative_matrix_load")
    a, b = zeros((16, 8), "f32"), zeros((20, 21), "f32")
    args = (a, b) if store else (b, a)
    with pytest.raises(ttlc.KernelError, match="out-of-bounds|outside"):
        run(src, *args, x, y, checked=checked)


def test_unchecked_load_outside_the_shape_reads_by_the_formula():
    """Without checks, M[(x + i) S1 + (y + j) S2] is read even when x + i >= s1 (as in C),
    as long as it lies in memory; checked execution reports it."""
    src = kernel(CHECKED_LOAD, LOAD="cooperative_matrix_load", SUFFIX="")
    A = rand((20, 21), "f32")
    B = zeros((16, 8), "f32")
    run(src, A, B, 10, 2)
    flat = A.ravel(order="F")
    want = np.array([[flat[(10 + i) + (2 + j) * 20] for j in range(8)] for i in range(16)])
    np.testing.assert_array_equal(B, want)
    with pytest.raises(ttlc.KernelError, match="outside the memref"):
        run(src, A, B, 10, 2, checked=True)


# ---- atomics ------------------------------------------------------------------------------
ATOMIC_ALL = """func @k(%A: memref<${T}x64x16>, %B: memref<${T}x16x16>) attributes {subgroup_size=16, work_group_size=[32,2]} {
  parallel {${IDS}
    %c16 = constant 16 : index
    %x = mul %g, %c16 : index
    %a = cooperative_matrix_load %A[%x, %c0] : coopmatrix<${T}x16x16,matrix_acc>
    %old = cooperative_matrix_atomic_${OP} %a, %B[%c0, %c0] : coopmatrix<${T}x16x16,matrix_acc>
  }
}"""


@pytest.mark.parametrize("op,ty", [("add", "i32"), ("add", "f32"), ("add", "f64"), ("add", "c32"),
                                   ("add", "i64"), ("max", "i32"), ("max", "f32"),
                                   ("min", "i32"), ("min", "f64"), ("max", "f16")])
def test_atomic_update_from_every_subgroup(op, ty):
    """Four subgroups of two work-groups update the same block: component-wise atomics."""
    src = kernel(ATOMIC_ALL, T=ty, OP=op, IDS=IDS)
    A = rand((64, 16), ty)
    B0 = rand((16, 16), ty)
    B = B0.copy(order="F")
    run(src, A, B, grid=(2, 1, 1))
    blocks = [A[16 * g:16 * g + 16] for g in range(4)] * 2
    want = B0.copy()
    for blk in blocks:
        want = {"add": np.add, "max": np.maximum, "min": np.minimum}[op](want, blk)
    np.testing.assert_array_equal(B, want.astype(DT[ty]))


ATOMIC_OLD = """func @k(%A: memref<${T}x16x8>, %B: memref<${T}x?x?>, %C: memref<${T}x16x8>, %x: index, %y: index) attributes {subgroup_size=16} {
  parallel {
    %c0 = constant 0 : index
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<${T}x16x8,matrix_acc>
    %old = cooperative_matrix_atomic_${OP}${SUFFIX} %a, %B[%x, %y] : coopmatrix<${T}x16x8,matrix_acc>
    cooperative_matrix_store %old, %C[%c0, %c0]
  }
}"""


@pytest.mark.parametrize("op,ty", [("add", "f32"), ("max", "i32"), ("min", "f32"), ("add", "c64")])
@pytest.mark.parametrize("transpose,flag,x,y", [(False, None, 3, 4), (True, None, 2, 3),
                                               (False, "both_checked", 10, 17),
                                               (True, "rows_checked", 3, 10),
                                               (True, "both_checked", -3, -5)])
def test_atomic_update_returns_previous_values(op, ty, transpose, flag, x, y):
    src = kernel(ATOMIC_OLD, T=ty, OP=op, SUFFIX=_suffix(transpose, flag))
    A = rand((16, 8), ty)
    B0 = rand((20, 21), ty)
    B = B0.copy(order="F")
    C = F(np.full((16, 8), 77, DT[ty]))
    run(src, A, B, C, x, y)
    fn = {"add": np.add, "max": np.maximum, "min": np.minimum}[op]
    want_b, want_c = B0.copy(), np.zeros((16, 8), DT[ty])
    for (i, j), (ri, ci, ok) in reference_access(x, y, 20, 21, 16, 8, transpose, flag).items():
        if ok:
            want_c[i, j] = B0[ri, ci]
            want_b[ri, ci] = fn(B0[ri, ci], A[i, j])
    np.testing.assert_array_equal(B, want_b)
    np.testing.assert_array_equal(C, want_c)


# ---- construct, scale, prefetch -------------------------------------------------------------
CONSTRUCT = """func @k(%s: f32, %B: memref<f32x64x8>, %C: memref<f32x64x8>) attributes {subgroup_size=16, work_group_size=[32,2]} {
  parallel {${IDS}
    %c16 = constant 16 : index
    %x = mul %g, %c16 : index
    %a = cooperative_matrix_construct %s : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store %a, %B[%x, %c0]
    %gf = cast %sg : f32
    %b = cooperative_matrix_construct %gf : coopmatrix<f32x16x8,matrix_b>
    cooperative_matrix_store %b, %C[%x, %c0]
  }
}"""


def test_construct():
    B, C = zeros((64, 8), "f32"), zeros((64, 8), "f32")
    run(kernel(CONSTRUCT, IDS=IDS), np.float32(2.5), B, C)
    np.testing.assert_array_equal(B, np.full((64, 8), 2.5, np.float32))
    np.testing.assert_array_equal(C, np.repeat(np.arange(4, dtype=np.float32), 16)[:, None]
                                  * np.ones((1, 8), np.float32))


SCALE = """func @k(%s: ${T}, %A: memref<${T}x32x8>, %B: memref<${T}x32x8>, %C: memref<${T}x32x8>) attributes {subgroup_size=16, work_group_size=[16,2]} {
  parallel {${IDS}
    %c16 = constant 16 : index
    %x = mul %g, %c16 : index
    %a = cooperative_matrix_load %A[%x, %c0] : coopmatrix<${T}x16x8,matrix_a>
    %b = cooperative_matrix_scale %s, %a : coopmatrix<${T}x16x8,matrix_a>
    cooperative_matrix_store %b, %B[%x, %c0]
    %gs = cast %sg : ${T}
    %c = cooperative_matrix_scale %gs, %a : coopmatrix<${T}x16x8,matrix_a>
    cooperative_matrix_store %c, %C[%x, %c0]
  }
}"""


@pytest.mark.parametrize("ty,s", [("f32", 1.5), ("i32", -3), ("c64", 0.5 - 2j), ("i8", 100),
                                  ("f16", -0.25), ("bf16", 3.0)])
def test_scale(ty, s):
    A = rand((32, 8), ty)
    B, C = zeros((32, 8), ty), zeros((32, 8), ty)
    run(kernel(SCALE, T=ty, IDS=IDS), DT[ty](s), A, B, C)
    if ty == "i8":  # wraps at 8 bits
        want = ((A.astype(np.int64) * s + 128) % 256 - 128).astype(np.int8)
    else:
        want = (A.astype(np.complex128) * s).astype(DT[ty]) if ty == "c64" else \
            (A.astype(np.float64) * s).astype(DT[ty])
    np.testing.assert_array_equal(B, want)
    g = np.repeat([0, 1], 16)[:, None]
    np.testing.assert_array_equal(C, (A.astype(np.complex128 if ty == "c64" else np.int64 if ty[0] == "i"
                                                else np.float64) * g).astype(DT[ty]))


PREFETCH = """func @k(%A: memref<f32x?x?>, %x: index, %y: index) attributes {subgroup_size=16, work_group_size=[32,1]} {
  parallel {
    cooperative_matrix_prefetch 1, %A[%x, %y], 16, 8
    cooperative_matrix_prefetch 0, %A[%y, %x], 64, 64
  }
}"""


@pytest.mark.parametrize("checked", [False, True])
def test_prefetch_is_a_hint(checked):
    A = rand((20, 21), "f32")
    A0 = A.copy()
    run(PREFETCH, A, 0, 0, checked=checked)
    run(PREFETCH, A, 1000, -7, checked=checked)  # nothing is read: no bounds apply
    np.testing.assert_array_equal(A, A0)


# ---- apply --------------------------------------------------------------------------------
SPEC_APPLY = """func @k(%A: memref<f32x16x16>, %B: memref<f32x16x16>) attributes {subgroup_size=16} {
  parallel {
    %c0 = constant 0 : index
    %0 = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x16,matrix_acc>
    %1 = cooperative_matrix_apply (%i,%j,%v)=%0 -> coopmatrix<f32x16x16,matrix_acc> {
        %mask = cmp.le %i, %j : bool
        %exp_v_masked = if %mask -> (f32) {
            %exp_v = math.native_exp %v : f32
            yield (%exp_v)
        } else {
            %zero = constant 0.0 : f32
            yield (%zero)
        }
        yield (%exp_v_masked)
    }
    cooperative_matrix_store %1, %B[%c0, %c0]
  }
}"""


def test_apply_example_of_the_reference():
    A = F(RNG.standard_normal((16, 16)), np.float32)
    B = zeros((16, 16), "f32")
    run(SPEC_APPLY, A, B)
    i, j = np.indices((16, 16))
    want = np.where(i <= j, np.exp(A.astype(np.float64)), 0.0)
    np.testing.assert_allclose(B, want, rtol=1e-6)


APPLY = """func @k(%A: memref<i32x${M}x${NG}>, %B: memref<i32x${M}x${NG}>) attributes {subgroup_size=16, work_group_size=[32,1]} {
  parallel {${IDS}
    %cN = constant ${N} : index
    %y = mul %g, %cN : index
    %a = cooperative_matrix_load %A[%c0, %y] : coopmatrix<i32x${M}x${N},matrix_acc>
    %b = cooperative_matrix_apply (%i,%j,%v)=%a -> coopmatrix<i32x${M}x${N},matrix_acc> {
        %h = constant 1000 : i32
        %ih = mul %i, %h : i32
        %ij = add %ih, %j : i32
        %k = constant 100000 : i32
        %vk = mul %v, %k : i32
        %r = add %ij, %vk : i32
        yield (%r)
    }
    cooperative_matrix_store %b, %B[%c0, %y]
  }
}"""


@pytest.mark.parametrize("M,N", [(16, 8), (4, 15), (32, 16), (8, 3)])
def test_apply_sees_row_column_and_value(M, N):
    A = rand((M, 2 * N), "i32", 0, 20)
    B = zeros((M, 2 * N), "i32")
    run(kernel(APPLY, M=M, N=N, NG=2 * N, IDS=IDS), A, B)
    i, j = np.indices((M, 2 * N))
    np.testing.assert_array_equal(B, i * 1000 + j % N + A * 100000)


APPLY_DIVERGENT = """func @k(%A: memref<f32x16x8>, %B: memref<f32x16x8>) attributes {subgroup_size=16} {
  parallel {${IDS}
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
    %c4 = constant 4 : i32
    %cond = less_than %li, %c4 : bool
    %b = if %cond -> (coopmatrix<f32x16x8,matrix_acc>) {
        %n = cooperative_matrix_apply (%i,%j,%v)=%a -> coopmatrix<f32x16x8,matrix_acc> {
            %neg = neg %v : f32
            yield (%neg)
        }
        yield (%n)
    } else {
        yield (%a)
    }
    cooperative_matrix_store %b, %B[%c0, %c0]
  }
}"""


def test_apply_in_divergent_code_changes_the_active_work_items_entries():
    A = rand((16, 8), "f32") + 100
    B = zeros((16, 8), "f32")
    run(kernel(APPLY_DIVERGENT, IDS=IDS), A, B)
    want = A.copy()
    for (p, v), rc in expected_layout(16, 16, 8)[1].items():
        if p < 4:
            want[rc] = -A[rc]
    np.testing.assert_array_equal(B, want)


# ---- mul_add ------------------------------------------------------------------------------
MUL_ADD = """func @k(%A: memref<${TA}x${M}x${KG}>, %B: memref<${TB}x${K}x${NG}>, %C: memref<${TC}x${M}x${NG}>, %D: memref<${TD}x${M}x${NG}>) attributes {subgroup_size=16, work_group_size=[16,2]} {
  parallel {${IDS}
    %cK = constant ${K} : index
    %cN = constant ${N} : index
    %ya = mul %g, %cK : index
    %yb = mul %g, %cN : index
    %a = cooperative_matrix_load %A[%c0, %ya] : coopmatrix<${TA}x${M}x${K},matrix_a>
    %b = cooperative_matrix_load %B[%c0, %yb] : coopmatrix<${TB}x${K}x${N},matrix_b>
    %c = cooperative_matrix_load %C[%c0, %yb] : coopmatrix<${TC}x${M}x${N},matrix_acc>
    %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<${TD}x${M}x${N},matrix_acc>
    cooperative_matrix_store %d, %D[%c0, %yb]
  }
}"""


@pytest.mark.parametrize("ta,tb,tc,td,M,K,N", [
    ("f32", "f32", "f32", "f32", 16, 8, 16),
    ("f64", "f64", "f64", "f64", 32, 4, 8),
    ("f16", "f16", "f32", "f32", 16, 16, 8),
    ("f16", "f16", "f16", "f16", 16, 16, 16),
    ("f16", "f16", "f16", "f32", 16, 16, 16),
    ("bf16", "bf16", "f32", "f32", 16, 16, 8),
    ("bf16", "bf16", "bf16", "bf16", 16, 8, 8),
    ("i8", "i8", "i32", "i32", 32, 32, 16),
    ("i8", "i8", "i32", "f32", 16, 32, 8),
    ("i16", "i8", "i64", "i64", 16, 8, 8),
    ("f32", "f32", "c32", "c32", 16, 4, 4),
    ("c32", "c32", "c32", "c32", 16, 8, 4),
    ("c64", "f64", "c64", "c64", 16, 4, 8),
    ("f32", "f32", "f32", "i32", 16, 8, 8),
])
def test_mul_add(ta, tb, tc, td, M, K, N):
    src = kernel(MUL_ADD, TA=ta, TB=tb, TC=tc, TD=td, M=M, K=K, N=N, KG=2 * K, NG=2 * N, IDS=IDS)
    A, B, C = rand((M, 2 * K), ta, -4, 4), rand((K, 2 * N), tb, -4, 4), rand((M, 2 * N), tc)
    D = zeros((M, 2 * N), td)
    run(src, A, B, C, D)
    big = np.complex128 if any(t[0] == "c" for t in (ta, tb, tc)) else np.float64
    want = np.zeros((M, 2 * N), big)
    for g in range(2):  # exact: small integers
        a = A[:, g * K:(g + 1) * K].astype(big)
        b = B[:, g * N:(g + 1) * N].astype(big)
        want[:, g * N:(g + 1) * N] = a @ b + C[:, g * N:(g + 1) * N].astype(big)
    want = want.astype(DT[tc]).astype(DT[td])
    np.testing.assert_array_equal(D, want)


MUL_ADD_ROUND = """func @k(%A: memref<${T}x16x64>, %B: memref<${T}x64x8>, %C: memref<${T}x16x8>, %D: memref<${T}x16x8>) attributes {subgroup_size=16} {
  parallel {
    %c0 = constant 0 : index
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<${T}x16x64,matrix_a>
    %b = cooperative_matrix_load %B[%c0, %c0] : coopmatrix<${T}x64x8,matrix_b>
    %c = cooperative_matrix_load %C[%c0, %c0] : coopmatrix<${T}x16x8,matrix_acc>
    %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<${T}x16x8,matrix_acc>
    cooperative_matrix_store %d, %D[%c0, %c0]
  }
}"""


@pytest.mark.parametrize("ty", ["f16", "bf16"])
def test_mul_add_16bit_accumulates_in_f32(ty):
    """Many small products: a 16-bit accumulator would lose them, f32 does not."""
    A = F(np.full((16, 64), 1.0), DT[ty])
    B = F(np.full((64, 8), 2.0 ** -9), DT[ty])
    C = F(np.full((16, 8), 1.0), DT[ty])
    D = zeros((16, 8), ty)
    run(kernel(MUL_ADD_ROUND, T=ty), A, B, C, D)
    want = np.full((16, 8), 1.0 + 64 * 2.0 ** -9).astype(DT[ty])  # 1.125, exact in both
    np.testing.assert_array_equal(D, want)


# ---- reduce -------------------------------------------------------------------------------
REDUCE = """func @k(%A: memref<${T}x64x8>, %R: memref<${T}x64x1>, %C: memref<${T}x2x8>) attributes {subgroup_size=16, work_group_size=[16,2]} {
  parallel {${IDS}
    %c32 = constant 32 : index
    %x = mul %g, %c32 : index
    %a = cooperative_matrix_load %A[%x, %c0] : coopmatrix<${T}x32x8,matrix_acc>
    %r = cooperative_matrix_reduce_${OP}.row %a : coopmatrix<${T}x32x1,matrix_acc>
    cooperative_matrix_store %r, %R[%x, %c0]
    %c = cooperative_matrix_reduce_${OP}.column %a : coopmatrix<${T}x1x8,matrix_acc>
    cooperative_matrix_store %c, %C[%g, %c0]
  }
}"""


@pytest.mark.parametrize("op,ty", [(op, ty) for op in ("add", "max", "min")
                                   for ty in ("i32", "f32", "f64", "i8", "f16")]
                         + [("add", "c32"), ("add", "c64")])
def test_reduce(op, ty):
    A = rand((64, 8), ty)
    R, C = zeros((64, 1), ty), zeros((2, 8), ty)
    run(kernel(REDUCE, T=ty, OP=op, IDS=IDS), A, R, C)
    fn = {"add": np.sum, "max": np.max, "min": np.min}[op]
    big = {"c": np.complex128, "i": np.int64}.get(ty[0], np.float64)  # int64: wraps on astype
    a = A.astype(big)
    np.testing.assert_array_equal(R, fn(a, axis=1, keepdims=True).astype(DT[ty]))
    want_c = np.stack([fn(a[32 * g:32 * g + 32], axis=0) for g in range(2)])
    np.testing.assert_array_equal(C, want_c.astype(DT[ty]))


# ---- arithmetic on coopmatrices -------------------------------------------------------------
ARITH = """func @k(%A: memref<${T}x32x8>, %B: memref<${T}x32x8>, %O: memref<${T}x32x8>) attributes {subgroup_size=16, work_group_size=[32,1]} {
  parallel {${IDS}
    %c16 = constant 16 : index
    %x = mul %g, %c16 : index
    %a = cooperative_matrix_load %A[%x, %c0] : coopmatrix<${T}x16x8,matrix_acc>
    %b = cooperative_matrix_load %B[%x, %c0] : coopmatrix<${T}x16x8,matrix_acc>
    %k = constant ${K} : coopmatrix<${T}x16x8,matrix_acc>
    %t = ${OP} %a, %b : coopmatrix<${T}x16x8,matrix_acc>
    %o = ${OP2} %t, %k : coopmatrix<${T}x16x8,matrix_acc>
    cooperative_matrix_store %o, %O[%x, %c0]
  }
}"""

_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
       "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("ty,op,op2,k", [
    ("f32", "add", "mul", "2.0"), ("f32", "sub", "div", "4.0"), ("f64", "max", "min", "3.0"),
    ("i32", "mul", "add", "7"), ("i16", "sub", "max", "-2"),
    ("c32", "add", "mul", "[1.0, 2.0]"), ("c32", "mul", "add", "[0.5, -1.0]"),
    ("c64", "mul", "mul", "[0.0, 1.0]"), ("c64", "add", "div", "[2.0, 0.0]"),
])
def test_arithmetic_on_coopmatrices(ty, op, op2, k):
    """Component-wise; the constant coopmatrix is shared by all subgroups (broadcast)."""
    A, B = rand((32, 8), ty), rand((32, 8), ty)
    O = zeros((32, 8), ty)
    run(kernel(ARITH, T=ty, OP=op, OP2=op2, K=k, IDS=IDS), A, B, O)
    kv = complex(*map(float, k.strip("[]").split(","))) if "[" in k else float(k)
    big = np.complex128 if ty[0] == "c" else np.float64
    want = _NP[op2](_NP[op](A.astype(big), B.astype(big)), kv).astype(DT[ty])
    np.testing.assert_array_equal(O, want)


UNARY_CAST = """func @k(%A: memref<c32x16x8>, %Re: memref<f32x16x8>, %Ab: memref<f32x16x8>, %I: memref<i32x16x8>, %H: memref<f16x16x8>, %Cj: memref<c32x16x8>) attributes {subgroup_size=16} {
  parallel {
    %c0 = constant 0 : index
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<c32x16x8,matrix_acc>
    %re = re %a : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store %re, %Re[%c0, %c0]
    %ab = abs %a : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store %ab, %Ab[%c0, %c0]
    %n = neg %re : coopmatrix<f32x16x8,matrix_acc>
    %i = cast %n : coopmatrix<i32x16x8,matrix_acc>
    cooperative_matrix_store %i, %I[%c0, %c0]
    %h = cast %re : coopmatrix<f16x16x8,matrix_a>
    cooperative_matrix_store %h, %H[%c0, %c0]
    %cj = conj %a : coopmatrix<c32x16x8,matrix_acc>
    cooperative_matrix_store %cj, %Cj[%c0, %c0]
  }
}"""


def test_unary_and_cast_on_coopmatrices():
    A = F(RNG.standard_normal((16, 8)) * 10 + 1j * RNG.standard_normal((16, 8)), np.complex64)
    Re, Ab, H = zeros((16, 8), "f32"), zeros((16, 8), "f32"), zeros((16, 8), "f16")
    I, Cj = zeros((16, 8), "i32"), zeros((16, 8), "c32")
    run(UNARY_CAST, A, Re, Ab, I, H, Cj)
    np.testing.assert_array_equal(Re, A.real)
    np.testing.assert_allclose(Ab, np.abs(A), rtol=1e-6)
    np.testing.assert_array_equal(I, np.trunc(-A.real).astype(np.int32))
    np.testing.assert_array_equal(H, A.real.astype(np.float16))
    np.testing.assert_array_equal(Cj, np.conj(A))


INT_DIV = """func @k(%A: memref<i32x32x8>, %B: memref<i32x32x8>, %O: memref<i32x32x8>) attributes {subgroup_size=16, work_group_size=[32,1]} {
  parallel {${IDS}
    %c16 = constant 16 : index
    %x = mul %g, %c16 : index
    %a = cooperative_matrix_load %A[%x, %c0] : coopmatrix<i32x16x8,matrix_acc>
    %b = cooperative_matrix_load %B[%x, %c0] : coopmatrix<i32x16x8,matrix_acc>
    %q = div %a, %b : coopmatrix<i32x16x8,matrix_acc>
    %r = rem %a, %b : coopmatrix<i32x16x8,matrix_acc>
    %s = add %q, %r : coopmatrix<i32x16x8,matrix_acc>
    cooperative_matrix_store %s, %O[%x, %c0]
  }
}"""


@pytest.mark.parametrize("checked", [False, True])
def test_integer_division_of_coopmatrices(checked):
    A = rand((32, 8), "i32", -50, 50)
    B = rand((32, 8), "i32", 1, 9) * np.where(RNG.random((32, 8)) < 0.5, -1, 1).astype(np.int32)
    O = zeros((32, 8), "i32")
    run(kernel(INT_DIV, IDS=IDS), A, F(B), O, checked=checked)
    q = np.trunc(A / B).astype(np.int32)
    np.testing.assert_array_equal(O, q + (A - q * B))
    if checked:
        B[3, 5] = 0
        with pytest.raises(ttlc.KernelError, match="division by zero"):
            run(kernel(INT_DIV, IDS=IDS), A, F(B), O, checked=True)


LOOP = """func @k(%A: memref<f32x16x8>, %B: memref<f32x16x8>, %n: i32) attributes {subgroup_size=16} {
  parallel {
    %c0 = constant 0 : index
    %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
    %z = constant 0.0 : coopmatrix<f32x16x8,matrix_acc>
    %from = constant 0 : i32
    %s = for %i = %from, %n init(%acc = %z) -> (coopmatrix<f32x16x8,matrix_acc>) {
        %nacc = add %acc, %a : coopmatrix<f32x16x8,matrix_acc>
        yield (%nacc)
    }
    cooperative_matrix_store %s, %B[%c0, %c0]
  }
}"""


def test_coopmatrix_loop_carried_value():
    A = rand((16, 8), "f32")
    B = zeros((16, 8), "f32")
    run(LOOP, A, B, np.int32(5))
    np.testing.assert_array_equal(B, 5 * A)


# ---- subgroup_broadcast -------------------------------------------------------------------
BROADCAST = """func @k(%A: memref<${T}x64>, %B: memref<${T}x64>) attributes {subgroup_size=16, work_group_size=[32,2]} {
  parallel {${IDS}
    %x = load %A[%w] : ${T}
    %c5 = constant 5 : i32
    %c3 = constant 3 : i32
    %c15 = constant 15 : i32
    %t = mul %sg, %c5 : i32
    %t2 = add %t, %c3 : i32
    %lane = and %t2, %c15 : i32
    %y = subgroup_broadcast %x, %lane : ${T}
    store %y, %B[%w]
  }
}"""


@pytest.mark.parametrize("ty", ["i32", "i8", "f64", "c64", "bf16"])
def test_subgroup_broadcast(ty):
    A = rand(64, ty)
    B = zeros(64, ty)
    run(kernel(BROADCAST, T=ty, IDS=IDS), A, B)
    want = np.concatenate([np.full(16, A[16 * g + ((5 * g + 3) & 15)]) for g in range(4)])
    np.testing.assert_array_equal(B, want.astype(DT[ty]))


BROADCAST_BAD = """func @k(%A: memref<i32x16>, %B: memref<i32x16>, %d: i32) attributes {subgroup_size=16} {
  parallel {${IDS}
    %x = load %A[%w] : i32
    %c2 = constant 2 : i32
    %q = div %li, %c2 : i32
    %lane = mul %q, %d : i32
    %y = subgroup_broadcast %x, %lane : i32
    store %y, %B[%w]
  }
}"""


BROADCAST_FROM = """func @k(%A: memref<i32x32>, %B: memref<i32x32>, %lane: i32) attributes {subgroup_size=16, work_group_size=[32,1]} {
  parallel {${IDS}
    %x = load %A[%w] : i32
    %c4 = constant 4 : i32
    %cond = greater_than_equal %li, %c4 : bool
    if %cond {
        %y = subgroup_broadcast %x, %lane : i32
        store %y, %B[%w]
    }
  }
}"""


def test_subgroup_broadcast_in_divergent_code():
    A = rand(32, "i32")
    B = zeros(32, "i32")
    run(kernel(BROADCAST_FROM, IDS=IDS), A, B, np.int32(9), checked=True)
    li = np.arange(32) % 16
    want = np.where(li >= 4, np.repeat(A[[9, 25]], 16), 0)
    np.testing.assert_array_equal(B, want)


@pytest.mark.parametrize("lane,message", [(2, "not active"), (16, "outside the subgroup"),
                                          (-1, "outside the subgroup")])
def test_subgroup_broadcast_from_an_undefined_work_item(lane, message):
    """The value of an inactive or non-existent work-item is undefined: checked mode
    reports it; unchecked, a work-item outside the subgroup gives 0."""
    A = rand(32, "i32")
    B = zeros(32, "i32")
    run(kernel(BROADCAST_FROM, IDS=IDS), A, B, np.int32(lane))
    if lane in (16, -1):
        np.testing.assert_array_equal(B, np.zeros(32))
    with pytest.raises(ttlc.KernelError, match=message):
        run(kernel(BROADCAST_FROM, IDS=IDS), A, B, np.int32(lane), checked=True)


def test_subgroup_broadcast_lane_must_be_uniform_in_checked_mode():
    A, B = rand(16, "i32"), zeros(16, "i32")
    run(kernel(BROADCAST_BAD, IDS=IDS), A, B, np.int32(1))  # unchecked: first lane decides
    np.testing.assert_array_equal(B, np.full(16, A[0]))
    run(kernel(BROADCAST_BAD, IDS=IDS), A, B, np.int32(0), checked=True)  # uniform: fine
    with pytest.raises(ttlc.KernelError, match="dynamically uniform"):
        run(kernel(BROADCAST_BAD, IDS=IDS), A, B, np.int32(1), checked=True)


# ---- subgroup scans and reductions -----------------------------------------------------------
SUBGROUP_OP = """func @k(%A: memref<${T}x64>, %B: memref<${T}x64>) attributes {subgroup_size=${S}, work_group_size=[${WGX},${WGY}]} {
  parallel {${IDS}
    %x = load %A[%w] : ${T}
    %c7 = constant 7 : i32
    %c3 = constant 3 : i32
    %c5 = constant 5 : i32
    %zero = constant 0 : i32
    %t = mul %w32, %c7 : i32
    %t2 = add %t, %c3 : i32
    %t3 = rem %t2, %c5 : i32
    %on = not_equal %t3, %zero : bool
    %limit = constant ${LIMIT} : i32
    %small = less_than %w32, %limit : bool
    %cond = or %on, %small : bool
    if %cond {
        %y = subgroup_${OP} %x : ${T}
        store %y, %B[%w]
    }
  }
}"""


def reference_subgroup_op(x, active, op, S=16):
    kind, fn = op.rsplit("_", 1)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        ident = {"add": 0, "max": info.min, "min": info.max}[fn]
    else:
        ident = {"add": 0, "max": -np.inf, "min": np.inf}[fn]
    big = np.complex128 if x.dtype.kind == "c" else object if x.dtype.kind in "iu" else np.float64
    out = np.empty(len(x), dtype=big)
    for g in range(len(x) // S):
        vals = [x[S * g + p].item() if active[S * g + p] else ident for p in range(S)]
        acc = []
        cur = None
        for v in vals:
            cur = v if cur is None else (cur + v if fn == "add" else max(cur, v) if fn == "max"
                                         else min(cur, v))
            acc.append(cur)
        if kind == "inclusive_scan":
            res = acc
        elif kind == "exclusive_scan":
            res = [ident] + acc[:-1]
        else:
            res = [acc[-1]] * S
        out[S * g:S * g + S] = res
    return out


@pytest.mark.parametrize("divergent", [True, False])
@pytest.mark.parametrize("ty,op", [(ty, f"{k}_{f}") for ty in ("i32", "f32", "f64", "c64", "i8")
                                   for k in ("exclusive_scan", "inclusive_scan", "reduce")
                                   for f in ("add", "max", "min")
                                   if f == "add" or ty != "c64"])  # no max/min for complex
def test_subgroup_operations(ty, op, divergent):
    A = rand(64, ty, -100, 100) if ty != "f32" else F(RNG.standard_normal(64) * 10, np.float32)
    if ty == "i8":
        A[:] = np.where(A >= 0, 120, -120)  # sums wrap around
    B = F(np.full(64, 99, DT[ty]))
    limit = 0 if divergent else 64
    run(kernel(SUBGROUP_OP, T=ty, OP=op, LIMIT=limit, IDS=IDS, S=16, WGX=32, WGY=2), A, B)
    w = np.arange(64)
    active = ((w * 7 + 3) % 5 != 0) | (w < limit)
    want = reference_subgroup_op(A, active, op)
    if ty in ("i32", "i8"):
        bits = 8 if ty == "i8" else 32
        want = np.array([(int(v) + (1 << bits - 1)) % (1 << bits) - (1 << bits - 1) for v in want])
    want = want.astype(DT[ty])
    np.testing.assert_array_equal(B[~active], np.full((~active).sum(), 99, DT[ty]))
    if ty == "f32":
        np.testing.assert_allclose(B[active], want[active], rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(B[active], want[active])


SUBGROUP_BROADCAST_LAST = """func @k(%A: memref<i32x64>, %B: memref<i32x64>) attributes {subgroup_size=${S}, work_group_size=[${WGX},${WGY}]} {
  parallel {${IDS}
    %x = load %A[%w] : i32
    %one = constant 1 : i32
    %last = sub %ssz, %one : i32
    %y = subgroup_broadcast %x, %last : i32
    store %y, %B[%w]
  }
}"""


@pytest.mark.parametrize("S", [1, 2, 4, 8, 32, 64])
@pytest.mark.parametrize("op", ["reduce_add", "inclusive_scan_max", "exclusive_scan_add",
                                "broadcast"])
def test_subgroup_operations_of_every_size(S, op):
    """Subgroups of 1 to 64 work-items (64 work-items in all: [32, 2], or [64, 1]),
    divergent; broadcast from the last work-item of each subgroup."""
    wgx, wgy = (64, 1) if S == 64 else (32, 2)
    A = rand(64, "i32", -100, 100)
    B = F(np.full(64, 99, np.int32))
    if op == "broadcast":
        run(kernel(SUBGROUP_BROADCAST_LAST, IDS=IDS, S=S, WGX=wgx, WGY=wgy), A, B)
        np.testing.assert_array_equal(B, np.repeat(A[S - 1::S], S))
        return
    run(kernel(SUBGROUP_OP, T="i32", OP=op, LIMIT=0, IDS=IDS, S=S, WGX=wgx, WGY=wgy), A, B)
    w = np.arange(64)
    active = (w * 7 + 3) % 5 != 0
    want = reference_subgroup_op(A, active, op, S).astype(np.int32)
    np.testing.assert_array_equal(B[~active], 99)
    np.testing.assert_array_equal(B[active], want[active])


SUBGROUP_UNIFORM = """func @k(%B: memref<f64x32>, %s: f64) attributes {subgroup_size=16, work_group_size=[32,1]} {
  parallel {${IDS}
    %c4 = constant 4 : i32
    %cond = greater_than_equal %li, %c4 : bool
    if %cond {
        %y = subgroup_exclusive_scan_add %s : f64
        store %y, %B[%w]
    }
  }
}"""


def test_subgroup_scan_of_a_uniform_value_counts_active_work_items():
    B = zeros(32, "f64")
    run(kernel(SUBGROUP_UNIFORM, IDS=IDS), B, 2.5)
    li = np.arange(32) % 16
    np.testing.assert_array_equal(B, np.where(li >= 4, 2.5 * (li - 4), 0.0))


# ---- dynamically uniform operands and whole subgroups ------------------------------------------
VARYING_CONSTRUCT = """func @k(%B: memref<f32x16x8>) attributes {subgroup_size=16} {
  parallel {${IDS}
    %f = cast %li : f32
    %a = cooperative_matrix_construct %f : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store %a, %B[%c0, %c0]
  }
}"""

VARYING_POSITION = """func @k(%A: memref<f32x32x8>, %B: memref<f32x16x8>) attributes {subgroup_size=16} {
  parallel {${IDS}
    %c8 = constant 8 : i32
    %q = div %li, %c8 : i32
    %x = cast %q : index
    %a = cooperative_matrix_load %A[%x, %c0] : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_store %a, %B[%c0, %c0]
  }
}"""


def test_operands_must_be_dynamically_uniform_in_checked_mode():
    B = zeros((16, 8), "f32")
    run(kernel(VARYING_CONSTRUCT, IDS=IDS), B)  # unchecked: the first work-item's value
    np.testing.assert_array_equal(B, np.zeros((16, 8)))
    with pytest.raises(ttlc.KernelError, match="dynamically uniform"):
        run(kernel(VARYING_CONSTRUCT, IDS=IDS), B, checked=True)
    A = rand((32, 8), "f32")
    run(kernel(VARYING_POSITION, IDS=IDS), A, B)
    np.testing.assert_array_equal(B, A[:16])
    with pytest.raises(ttlc.KernelError, match="row position must be dynamically uniform"):
        run(kernel(VARYING_POSITION, IDS=IDS), A, B, checked=True)


PARTIAL = """func @k(%A: memref<f32x16x8>, %B: memref<f32x16x8>) attributes {subgroup_size=16} {
  parallel {${IDS}
    %c8 = constant 8 : i32
    %cond = less_than %li, %c8 : bool
    if %cond {
        %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
        cooperative_matrix_store %a, %B[%c0, %c0]
    }
  }
}"""


def test_load_in_part_of_a_subgroup_is_reported_in_checked_mode():
    A, B = rand((16, 8), "f32"), zeros((16, 8), "f32")
    run(kernel(PARTIAL, IDS=IDS), A, B)  # unchecked: the subgroup executes it
    np.testing.assert_array_equal(B, A)
    with pytest.raises(ttlc.KernelError, match="only some work-items of subgroup 0"):
        run(kernel(PARTIAL, IDS=IDS), A, B, checked=True)


PARTIAL_OTHERS = {
    "prefetch": "cooperative_matrix_prefetch 1, %A[%c0, %c0], 16, 8",
    "mul_add": "%m = cooperative_matrix_construct %one : coopmatrix<f32x16x8,matrix_acc>\n"
               "        %a = cooperative_matrix_construct %one : coopmatrix<f32x16x8,matrix_a>\n"
               "        %b = cooperative_matrix_construct %one : coopmatrix<f32x8x8,matrix_b>\n"
               "        %d = cooperative_matrix_mul_add %a, %b, %m : coopmatrix<f32x16x8,matrix_acc>",
    "reduce": "%m = cooperative_matrix_construct %one : coopmatrix<f32x16x8,matrix_acc>\n"
              "        %r = cooperative_matrix_reduce_add.row %m : coopmatrix<f32x16x1,matrix_acc>",
}


@pytest.mark.parametrize("what", sorted(PARTIAL_OTHERS))
def test_other_coopmatrix_instructions_in_part_of_a_subgroup(what):
    """Prefetch, mul_add and reduce need the whole subgroup too (the interpreter's
    ``coop_subgroups``); the work-item named is the subgroup's first inactive one."""
    src = PARTIAL.replace("%a = cooperative_matrix_load %A[%c0, %c0] : "
                          "coopmatrix<f32x16x8,matrix_acc>\n        cooperative_matrix_store %a, "
                          "%B[%c0, %c0]", "%one = constant 1.0 : f32\n        " +
                          PARTIAL_OTHERS[what])
    A, B = rand((16, 8), "f32"), zeros((16, 8), "f32")
    run(kernel(src, IDS=IDS), A, B)
    with pytest.raises(ttlc.KernelError, match=r"work-item \(8, 0\): 'cooperative_matrix_"
                                               r"\w+' reached by only some work-items"):
        run(kernel(src, IDS=IDS), A, B, checked=True)


def test_prefetch_operands_must_be_uniform_in_checked_mode():
    src = PREFETCH.replace("%A[%x, %y], 16, 8", "%A[%v, %y], 16, 8").replace(
        "parallel {", "parallel {\n    %l = subgroup_local_id : i32\n    %v = cast %l : index")
    run(src, rand((20, 21), "f32"), 0, 0)  # unchecked: a hint, nothing happens
    with pytest.raises(ttlc.KernelError, match="row position must be dynamically uniform"):
        run(src, rand((20, 21), "f32"), 0, 0, checked=True)


INACTIVE = """func @k(%A: memref<f32x32x8>, %B: memref<f32x32x8>) attributes {subgroup_size=16, work_group_size=[32,1]} {
  parallel {${IDS}
    %c1 = constant 1 : index
    %cond = equal %g, %c1 : bool
    if %cond {
        %c16 = constant 16 : index
        %a = cooperative_matrix_load %A[%c16, %c0] : coopmatrix<f32x16x8,matrix_acc>
        %two = constant 2.0 : f32
        %b = cooperative_matrix_scale %two, %a : coopmatrix<f32x16x8,matrix_acc>
        cooperative_matrix_atomic_store %b, %B[%c16, %c0]
    }
  }
}"""


@pytest.mark.parametrize("checked", [False, True])
def test_inactive_subgroups_do_not_execute_coopmatrix_instructions(checked):
    A, B = rand((32, 8), "f32"), zeros((32, 8), "f32")
    run(kernel(INACTIVE, IDS=IDS), A, B, checked=checked)
    want = np.zeros((32, 8), np.float32)
    want[16:] = 2 * A[16:]
    np.testing.assert_array_equal(B, want)


# ---- partial tiles of 16-bit types next to other data -------------------------------------------
PARTIAL_NARROW_STORE = """func @k(%A: memref<${T}x?x2>) attributes {subgroup_size=4, work_group_size=[4,1]} {
    %g = group_id.x : index
    %t = subview %A[0:1, %g] : memref<${T}x1>
    %c1 = constant 1 : index
    %t2 = expand %t[0 -> 1 x %c1] : memref<${T}x1x?>
    parallel {
        %c0 = constant 0 : index
        %gf = cast %g : f32
        %five = constant 5.0 : f32
        %v = add %gf, %five : f32
        %m = cooperative_matrix_construct %v : coopmatrix<f32x4x1,matrix_acc>
        %h = cast %m : coopmatrix<${T}x4x1,matrix_acc>
        cooperative_matrix_store.rows_checked %h, %t2[%c0, %c0]
    }
}"""


@pytest.mark.parametrize("ty", ["bf16", "f16", "i16", "i8"])
def test_partial_tile_store_of_narrow_type_writes_only_its_rows(ty):
    """A 4 x 1 tile with one row inside a 1 x 1 view: only that element is written, not
    its neighbours (the next work-group's element, and memory after the array)."""
    buf = np.full(4, 7, DT[ty])
    A = np.lib.stride_tricks.as_strided(buf, shape=(1, 2), strides=(buf.itemsize,) * 2)
    run(kernel(PARTIAL_NARROW_STORE, T=ty), A, grid=(2, 1, 1))
    np.testing.assert_array_equal(buf.astype(np.float64), [5, 6, 7, 7])
