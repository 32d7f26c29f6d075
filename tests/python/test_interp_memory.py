"""Memory on every target (interp, cpu): views (expand, fuse, subview), loads and stores,
groups, size, associated, alloca, and atomics.

The view tests execute the type examples of the language reference on data: a kernel
reads every element through the view into a packed array and writes a packed array
through the view; the parent array must then hold exactly what NumPy's column-major
reshape / slicing says, and memory outside the view (strided gaps) must be untouched.
"""
from __future__ import annotations

import numpy as np
import pytest

import ttlc
from interp_testing import farray, run

SENTINEL = -1.0


def view_kernel(params: str, view: str, order: int, elem: str = "f32", attrs: str = "") -> str:
    """%v is defined by ``view``; copy %v -> %out and %src -> %v, element by element."""
    idx = ", ".join(f"%i{k}" for k in range(order))
    zeros = ", ".join(["%c0"] * order)
    sizes = "\n    ".join(f"%s{k} = size %v[{k}] : index" for k in range(order))
    ups = ", ".join(f"%s{k}" for k in range(order))
    dyn = "x?" * order
    if order == 0:  # no loop: a scalar view
        return f"""func @k(%0: {params}, %src: memref<{elem}>, %out: memref<{elem}>,
                 %1: index, %2: index){attrs} {{
    {view}
    %x = load %v[] : {elem}
    store %x, %out[]
    %y = load %src[] : {elem}
    store %y, %v[]
}}
"""
    return f"""func @k(%0: {params}, %src: memref<{elem}{dyn}>, %out: memref<{elem}{dyn}>,
                 %1: index, %2: index){attrs} {{
    %c0 = constant 0 : index
    {view}
    {sizes}
    foreach ({idx}) = ({zeros}), ({ups}) {{
        %x = load %v[{idx}] : {elem}
        store %x, %out[{idx}]
        %y = load %src[{idx}] : {elem}
        store %y, %v[{idx}]
    }}
}}
"""


def strided_parent(shape, strides, dtype=np.float32, fill=None):
    """A NumPy view of the given shape and element strides into a larger sentinel-filled
    base; returns (base, view).  The parent values are distinct numbers."""
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, strides))
    base = np.full(extent, SENTINEL, dtype)
    item = base.itemsize
    view = np.lib.stride_tricks.as_strided(base, shape=shape, strides=[s * item for s in strides])
    view[...] = np.arange(1, view.size + 1).reshape(shape, order="F") if fill is None else fill
    return base, view


def check_view(src_text, parent_shape, parent_strides, view_shape, read_view, n1=0, n2=0,
               elem=np.float32):
    """Run a view kernel; read_view(P) gives the view of a parent P as a NumPy array
    (a writable view, or a copy plus a writer for reshapes)."""
    base, P = strided_parent(parent_shape, parent_strides, elem)
    before = P.copy()
    base_before = base.copy()
    src = farray(-np.arange(1, np.prod(view_shape) + 1).reshape(view_shape, order="F"), elem)
    out = farray(np.zeros(view_shape), elem)
    run(src_text, P, src, out, n1, n2)
    expected_read, write = read_view(before)
    np.testing.assert_array_equal(out, expected_read)
    expected_parent = before.copy()
    write(expected_parent, src)
    np.testing.assert_array_equal(P, expected_parent)
    # memory of the base outside the parent view stays untouched
    touched = np.zeros(base.size, bool)
    np.lib.stride_tricks.as_strided(touched, shape=parent_shape,
                                    strides=[s * touched.itemsize for s in parent_strides])[...] = True
    np.testing.assert_array_equal(base[~touched], base_before[~touched])


def reshape_view(view_shape):
    """expand and fuse are reshapes of the index space in column-major order."""
    def read_view(P):
        def write(Q, src):
            Q[...] = src.reshape(Q.shape, order="F")
        return P.reshape(view_shape, order="F"), write
    return read_view


def slice_view(index):
    """subview: NumPy basic indexing (ints drop the mode)."""
    def read_view(P):
        def write(Q, src):
            Q[index] = src.reshape(Q[index].shape, order="F")
        return P[index], write
    return read_view


def packed(shape):
    st, out = 1, []
    for s in shape:
        out.append(st)
        st *= s
    return out


# (parent type, view instruction, result order, parent shape, parent strides, view shape, %1, %2)
EXPAND_CASES = [
    ("memref<f32x32x16x8>", "%v = expand %0[1 -> 2x8] : memref<f32x32x2x8x8>",
     (32, 16, 8), None, (32, 2, 8, 8), 0, 0),
    ("memref<f32x32x16x8>", "%v = expand %0[1 -> 2x2x2x2] : memref<f32x32x2x2x2x2x8>",
     (32, 16, 8), None, (32, 2, 2, 2, 2, 8), 0, 0),
    ("memref<f32x32x?>", "%v = expand %0[1 -> %1 x 2] : memref<f32x32x?x2>",
     (32, 12), None, (32, 6, 2), 6, 0),
    ("memref<f32x32x?>", "%v = expand %0[1 -> 2 x %1] : memref<f32x32x2x?>",
     (32, 12), None, (32, 2, 6), 6, 0),
    ("memref<f32x32x16>", "%v = expand %0[1 -> %1 x 2] : memref<f32x32x?x2>",
     (32, 16), None, (32, 8, 2), 8, 0),
    ("memref<f32x32x16>", "%v = expand %0[1 -> %1 x %2 x 2] : memref<f32x32x?x?x2>",
     (32, 16), None, (32, 2, 4, 2), 2, 4),
    ("memref<f32x32x16>", "%v = expand %0[1 -> %2 x 2 x %1] : memref<f32x32x?x2x?>",
     (32, 16), None, (32, 4, 2, 2), 2, 4),
    ("memref<f32x32x?>", "%v = expand %0[1 -> %1 x %2] : memref<f32x32x?x?>",
     (32, 12), None, (32, 3, 4), 3, 4),
    ("memref<f32x32x16>", "%v = expand %0[1 -> %1 x %2] : memref<f32x32x?x?>",
     (32, 16), None, (32, 4, 4), 4, 4),
    ("memref<f32x32x7,strided<2,64>>", "%v = expand %0[0->4 x 8] : memref<f32x4x8x7,strided<2,8,64>>",
     (32, 7), (2, 64), (4, 8, 7), 0, 0),
    ("memref<f32x32x7,strided<2,64>>", "%v = expand %0[0->4 x 8] : memref<f32x4x8x7,strided<2,?,?>>",
     (32, 7), (2, 64), (4, 8, 7), 0, 0),
    ("memref<f32x?x7,strided<2,?>>", "%v = expand %0[0->%1 x 4] : memref<f32x?x4x7,strided<2,?,?>>",
     (20, 7), (2, 41), (5, 4, 7), 5, 0),
    ("memref<f32x?x7,strided<2,?>>", "%v = expand %0[0->4 x %1] : memref<f32x4x?x7,strided<2,8,?>>",
     (20, 7), (2, 41), (4, 5, 7), 5, 0),
    ("memref<f32x?x7,strided<2,?>>", "%v = expand %0[0->4 x %1] : memref<f32x4x?x7,strided<2,?,?>>",
     (20, 7), (2, 41), (4, 5, 7), 5, 0),
]


@pytest.mark.parametrize("case", EXPAND_CASES, ids=lambda c: c[1].split("= ")[1])
def test_expand_reference_examples(case):
    ptype, view, pshape, pstrides, vshape, n1, n2 = case
    src = view_kernel(ptype, view, len(vshape))
    check_view(src, pshape, pstrides or packed(pshape), vshape, reshape_view(vshape), n1, n2)


FUSE_CASES = [
    ("memref<f32x32x16x8x4x42>", "%v = fuse %0[1,3] : memref<f32x32x512x42>",
     (32, 16, 8, 4, 42), None, (32, 512, 42)),
    # the reference writes the operand as strided<1,16,?,?,?>, which breaks its own
    # column-major rule (S_2 >= S_1 s_1 = 32) and the unchanged stride 32 of the result;
    # this is the consistent variant of the example
    ("memref<f32x32x16x?x4x42,strided<1,32,?,?,?>>",
     "%v = fuse %0[1,3] : memref<f32x32x?x42,strided<1,32,?>>",
     (32, 16, 3, 4, 42), None, (32, 192, 42)),
    ("memref<f32x32x16x2x2,strided<1,48,768,1536>>",
     "%v = fuse %0[1,2] : memref<f32x32x32x2,strided<1,48,1536>>",
     (32, 16, 2, 2), (1, 48, 768, 1536), (32, 32, 2)),
    ("memref<f32x32x16x2x2,strided<1,48,768,1536>>",
     "%v = fuse %0[1,2] : memref<f32x32x32x2,strided<1,?,?>>",
     (32, 16, 2, 2), (1, 48, 768, 1536), (32, 32, 2)),
    ("memref<f32x8x?x32,strided<1,?,?>>", "%v = fuse %0[0,1] : memref<f32x?x32,strided<1,?>>",
     (8, 5, 32), (1, 8, 40), (40, 32)),
    ("memref<f32x8x?x32,strided<1,?,?>>", "%v = fuse %0[0,1] : memref<f32x?x32,strided<1,?>>",
     (8, 5, 32), (1, 8, 50), (40, 32)),  # gap between the columns of the fused mode
]


@pytest.mark.parametrize("case", FUSE_CASES, ids=lambda c: c[1].split("= ")[1] + str(c[3]))
def test_fuse_reference_examples(case):
    ptype, view, pshape, pstrides, vshape = case
    # a wide work-group keeps the 688128-point example quick
    src = view_kernel(ptype, view, len(vshape), attrs=" attributes {work_group_size=[512,1]}")
    check_view(src, pshape, pstrides or packed(pshape), vshape, reshape_view(vshape))


SUBVIEW_CASES = [
    ("memref<f32x32x16>", "%v = subview %0[4:8,8:4] : memref<f32x8x4,strided<1,32>>",
     (32, 16), None, np.s_[4:12, 8:12], 0, 0),
    ("memref<f32x32x16>", "%v = subview %0[4:8,8:4] : memref<f32x8x4,strided<1,?>>",
     (32, 16), None, np.s_[4:12, 8:12], 0, 0),
    ("memref<f32x16x8>", "%v = subview %0[2:4, %1] : memref<f32x4>",
     (16, 8), None, np.s_[2:6, 5], 5, 0),
    ("memref<f32x16x8>", "%v = subview %0[2:4, %1:0] : memref<f32x4>",
     (16, 8), None, np.s_[2:6, 7], 7, 0),
    ("memref<f64x16x8>", "%v = subview %0[2:4, %1:1] : memref<f64x4x1,strided<1,16>>",
     (16, 8), None, np.s_[2:6, 3:4], 3, 0),
    ("memref<f32x16>", "%v = subview %0[%1:4] : memref<f32x4>",
     (16,), None, np.s_[9:13], 9, 0),
    ("memref<f32x16>", "%v = subview %0[%2:%2] : memref<f32x?>",
     (16,), None, np.s_[5:10], 0, 5),
    ("memref<f32x16x42x13>", "%v = subview %0[2:4, %2:%2, 6:7] : memref<f32x4x?x7,strided<1,16,672>>",
     (16, 42, 13), None, np.s_[2:6, 11:22, 6:13], 0, 11),
    ("memref<f32x16x42x13,strided<1,?,?>>",
     "%v = subview %0[2:4, %2:%2, 6:7] : memref<f32x4x?x7,strided<1,?,?>>",
     (16, 42, 13), (1, 20, 900), np.s_[2:6, 11:22, 6:13], 0, 11),
    # rank reduction of the leading and a middle mode, and a scalar (order 0) view
    ("memref<f32x16x42x13>", "%v = subview %0[%1, 3:5, %2] : memref<f32x5,strided<16>>",
     (16, 42, 13), None, np.s_[6, 3:8, 2], 6, 2),
    ("memref<f32x16x42x13>", "%v = subview %0[%1, 3:5, 1:2] : memref<f32x5x2,strided<16,672>>",
     (16, 42, 13), None, np.s_[6, 3:8, 1:3], 6, 0),
    ("memref<f32x16x42x13>", "%v = subview %0[%1, %2, 4] : memref<f32>",
     (16, 42, 13), None, np.s_[6, 2, 4], 6, 2),
]


@pytest.mark.parametrize("case", SUBVIEW_CASES, ids=lambda c: c[1].split("= ")[1])
def test_subview_reference_examples(case):
    ptype, view, pshape, pstrides, index, n1, n2 = case
    elem = "f64" if "f64" in ptype else "f32"
    vshape = np.empty(pshape)[index].shape
    src = view_kernel(ptype, view, len(vshape), elem=elem)
    check_view(src, pshape, pstrides or packed(pshape), vshape, slice_view(index), n1, n2,
               elem=np.float64 if elem == "f64" else np.float32)


def test_views_composed_with_varying_offsets():
    """subview with a per-work-item offset, then expand and fuse of the result: every
    work-item writes its own column through a chain of views."""
    src = """func @k(%A: memref<i32x6x4x?>) {
        %c0 = constant 0 : index
        %n = size %A[2] : index
        foreach (%j) = (%c0), (%n) {
            %col = subview %A[0:6, 0:4, %j] : memref<i32x6x4>
            %f = fuse %col[0,1] : memref<i32x24>
            %e = expand %f[0 -> 3x8] : memref<i32x3x8>
            %c8 = constant 8 : index
            %c3 = constant 3 : index
            for %b = %c0, %c8 {
                for %a = %c0, %c3 {
                    %ja = cast %j : i32
                    %ai = cast %a : i32
                    %bi = cast %b : i32
                    %k3 = constant 3 : i32
                    %t = mul %bi, %k3 : i32
                    %lin = add %t, %ai : i32
                    %h = constant 100 : i32
                    %jh = mul %ja, %h : i32
                    %v = add %lin, %jh : i32
                    store %v, %e[%a, %b]
                }
            }
        }
    }"""
    A = farray(np.zeros((6, 4, 21)), np.int32)
    run(src, A)
    expected = np.arange(24).reshape(6, 4, order="F")[:, :, None] + 100 * np.arange(21)
    np.testing.assert_array_equal(A, expected)


# ---- load / store ----------------------------------------------------------------------------
def test_load_store_order0_and_strided():
    src = """func @k(%s: memref<f64>, %A: memref<f64x3x4,strided<2,10>>, %B: memref<f64x?x?,strided<1,?>>) {
        %x = load %s[] : f64
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        %y = load %A[%c2, %c3] : f64
        %z = add %x, %y : f64
        store %z, %s[]
        store %x, %A[%c0, %c1]
        store %y, %B[%c1, %c2]
    }"""
    s = np.asarray(1.5)
    base = np.arange(40, dtype=np.float64)
    A = np.lib.stride_tricks.as_strided(base, shape=(3, 4), strides=(16, 80))
    Bbase = farray(np.zeros((7, 5)), np.float64)
    B = Bbase[1:4, :]
    run(src, s, A, B)
    assert float(s) == 1.5 + 34.0
    assert base[10] == 1.5 and base[34] == 34.0
    assert Bbase[2, 2] == 34.0 and np.count_nonzero(Bbase) == 1


# ---- groups and size -------------------------------------------------------------------------
def test_group_dynamic_size_and_member_shapes():
    """group<memref<f32x4x?>x?>: one work-group per member; each member has its own
    column count; size of the group and of the member."""
    src = """func @k(%g: group<memref<f32x4x?>x?>, %sizes: memref<index x?x3>) {
        %gid = group_id.x : index
        %a = load %g[%gid] : memref<f32x4x?>
        %gs = size %g[0] : index
        %r = size %a[0] : index
        %c = size %a[1] : index
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        store %gs, %sizes[%gid, %c0]
        store %r, %sizes[%gid, %c1]
        store %c, %sizes[%gid, %c2]
        foreach (%i, %j) = (%c0, %c0), (%r, %c) {
            %x = load %a[%i, %j] : f32
            %two = constant 2.0 : f32
            %y = mul %x, %two : f32
            store %y, %a[%i, %j]
        }
    }"""
    members = [farray(np.arange(4 * n).reshape(4, n) + 1, np.float32) for n in (1, 5, 3, 8)]
    before = [m.copy() for m in members]
    sizes = farray(np.zeros((4, 3)), np.int64)
    run(src, members, sizes, grid=(4, 1, 1))
    assert sizes.tolist() == [[4, 4, n] for n in (1, 5, 3, 8)]
    for m, b in zip(members, before):
        np.testing.assert_array_equal(m, 2 * b)


def test_group_static_size_collective_axpby():
    src = """func @k(%g: group<memref<f64x6>x3>, %out: memref<index>) {
        %gid = group_id.x : index
        %a = load %g[%gid] : memref<f64x6>
        %gs = size %g[0] : index
        store %gs, %out[]
        %alpha = constant 3.0 : f64
        %beta = constant 0.0 : f64
        axpby %alpha, %a, %beta, %a
    }"""
    members = [np.arange(6, dtype=np.float64) + 10 * k for k in range(3)]
    out = np.zeros((), np.int64)
    run(src, members, out, grid=(3, 1, 1))
    assert int(out) == 3
    for k, m in enumerate(members):
        np.testing.assert_array_equal(m, 3 * (np.arange(6) + 10 * k))


@pytest.mark.parametrize("offset_type,offset", [("2", 2), ("?", 3)])
def test_group_offset(offset_type, offset):
    """group<...x?, offset: K>: member i starts K elements after arrays[i][0]."""
    src = f"""func @k(%g: group<memref<i32x4>x?, offset: {offset_type}>) {{
        %c0 = constant 0 : index
        %n = size %g[0] : index
        %c4 = constant 4 : index
        foreach (%m, %i) = (%c0, %c0), (%n, %c4) {{
            %a = load %g[%m] : memref<i32x4>
            %mi = cast %m : i32
            %ii = cast %i : i32
            %h = constant 10 : i32
            %t = mul %mi, %h : i32
            %v = add %t, %ii : i32
            store %v, %a[%i]
        }}
    }}"""
    arrays = [np.full(9, -1, np.int32) for _ in range(3)]
    run(src, ttlc.Group(arrays, offset=offset))
    for m, arr in enumerate(arrays):
        expected = np.full(9, -1)
        expected[offset:offset + 4] = 10 * m + np.arange(4)
        assert arr.tolist() == expected.tolist()


def test_group_varying_member_per_work_item():
    """Each work-item loads a different member (varying group index) with its own dynamic
    size, reads it through the per-item memref, and writes its size and a sum."""
    src = """func @k(%g: group<memref<i64x?>x?>, %out: memref<i64x?x2>) {
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %nm = size %g[0] : index
        %n = size %out[0] : index
        foreach (%i) = (%c0), (%n) {
            %m = rem %i, %nm : index
            %a = load %g[%m] : memref<i64x?>
            %len = size %a[0] : index
            %z = constant 0 : i64
            ; a[0] is written below (by one work-item per member): sum a[1:] only
            %s = for %k = %c1, %len init(%acc = %z) -> (i64) {
                %x = load %a[%k] : i64
                %acc2 = add %acc, %x : i64
                yield (%acc2)
            }
            %l = cast %len : i64
            store %l, %out[%i, %c0]
            store %s, %out[%i, %c1]
            ; write back through the varying memref: a[0] += 1
            %x0 = load %a[%c0] : i64
            %one = constant 1 : i64
            %x1 = add %x0, %one : i64
            %first = less_than %i, %nm : bool
            if %first {
                store %x1, %a[%c0]
            }
        }
    }"""
    lens = [3, 7, 1, 12, 5]
    members = [np.arange(1, n + 1, dtype=np.int64) * (k + 1) for k, n in enumerate(lens)]
    out = farray(np.zeros((37, 2)), np.int64)
    run(src, members, out)
    for i in range(37):
        k = i % 5
        assert out[i].tolist() == [lens[k], (k + 1) * (lens[k] * (lens[k] + 1) // 2 - 1)]
    for k, m in enumerate(members):
        assert m[0] == (k + 1) + 1


def test_group_load_in_uniform_for_loop():
    src = """func @k(%g: group<memref<f32x?x?>x?>, %out: memref<f32x?>) {
        %c0 = constant 0 : index
        %n = size %g[0] : index
        for %m = %c0, %n {
            %a = load %g[%m] : memref<f32x?x?>
            %o = subview %out[%m:1] : memref<f32x1>
            %r = size %a[0] : index
            %c = size %a[1] : index
            %last_r = constant 1 : index
            %rr = sub %r, %last_r : index
            %cc = sub %c, %last_r : index
            %x = load %a[%rr, %cc] : f32
            store %x, %o[%c0]
        }
    }"""
    shapes = [(2, 3), (5, 1), (1, 4)]
    members = [farray(np.arange(r * c).reshape(r, c) + 100 * k, np.float32) for k, (r, c) in enumerate(shapes)]
    out = np.zeros(3, np.float32)
    run(src, members, out)
    assert out.tolist() == [m[-1, -1] for m in members]


def test_size_of_every_mode():
    src = """func @k(%A: memref<i8x3x?x5x?>, %out: memref<index x4>) {
        %s0 = size %A[0] : index
        %s1 = size %A[1] : index
        %s2 = size %A[2] : index
        %s3 = size %A[3] : index
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        store %s0, %out[%c0]
        store %s1, %out[%c1]
        store %s2, %out[%c2]
        store %s3, %out[%c3]
    }"""
    out = np.zeros(4, np.int64)
    run(src, farray(np.zeros((3, 7, 5, 2)), np.int8), out)
    assert out.tolist() == [3, 7, 5, 2]


def test_associated():
    src = """func @k(%A: memref<f32x?>, %out: memref<i8>) {
        %p = associated %A : bool
        %r = if %p -> (i8) {
            %one = constant 1 : i8
            yield (%one)
        } else {
            %zero = constant 0 : i8
            yield (%zero)
        }
        store %r, %out[]
    }"""
    out = np.full((), -1, np.int8)
    run(src, np.zeros(3, np.float32), out)
    assert int(out) == 1
    run(src, None, out)
    assert int(out) == 0


# ---- alloca ----------------------------------------------------------------------------------
def test_alloca_local_memory_per_work_group():
    """Each work-group has its own local buffer: fill it in SPMD, reduce it with a
    collective sum, and copy it out; lifetime_stop ends it explicitly."""
    src = """func @k(%x: memref<f32x32x?>, %out: memref<f32x?>, %copy: memref<f32x32x?>)
            attributes {subgroup_size=16, work_group_size=[32,1]} {
        %g = group_id.x : index
        %tmp = alloca : memref<f32x32, local>
        %res = alloca : memref<f32, local>
        %col = subview %x[0:32, %g] : memref<f32x32>
        parallel {
            %sl = subgroup_linear_id : i32
            %l = subgroup_local_id : i32
            %s16 = constant 16 : i32
            %t = mul %sl, %s16 : i32
            %lane = add %t, %l : i32
            %li = cast %lane : index
            %v = load %col[%li] : f32
            %w = mul %v, %v : f32
            store %w, %tmp[%li]
        }
        %one = constant 1.0 : f32
        %zero = constant 0.0 : f32
        sum %one, %tmp, %zero, %res
        %r = load %res[] : f32
        store %r, %out[%g]
        %dst = subview %copy[0:32, %g] : memref<f32x32>
        axpby %one, %tmp, %zero, %dst
        lifetime_stop %tmp
    }"""
    rng = np.random.default_rng(5)
    x = farray(rng.integers(-8, 8, (32, 6)), np.float32)
    out = np.zeros(6, np.float32)
    copy = farray(np.zeros((32, 6)), np.float32)
    run(src, x, out, copy, grid=(6, 1, 1))
    np.testing.assert_array_equal(copy, x * x)
    np.testing.assert_array_equal(out, (x * x).sum(axis=0))


def test_alloca_in_loop_body():
    """An alloca inside a for body is a fresh buffer in every iteration (freed at the end
    of the block); values do not leak between iterations."""
    src = """func @k(%out: memref<i32x?>) {
        %c0 = constant 0 : index
        %n = size %out[0] : index
        for %i = %c0, %n {
            %t = alloca : memref<i32x2x3, local>
            %c1 = constant 1 : index
            %c2 = constant 2 : index
            %ii = cast %i : i32
            store %ii, %t[%c1, %c2]
            %v = load %t[%c1, %c2] : i32
            %w = add %v, %v : i32
            store %w, %out[%i]
        }
    }"""
    out = np.zeros(9, np.int32)
    run(src, out)
    assert out.tolist() == [2 * k for k in range(9)]


# ---- atomics -----------------------------------------------------------------------------
@pytest.mark.parametrize("ty", ["i32", "i64", "f32", "f64", "c32"])
def test_atomic_add_from_all_work_items(ty):
    """atomic_add from all work-items of all work-groups to one element gives the sum;
    the returned old values are the partial sums, each exactly once."""
    dt = {"i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64,
          "c32": np.complex64}[ty]
    one = "[1.0, 2.0]" if ty == "c32" else ("1.0" if ty[0] == "f" else "1")
    src = f"""func @k(%acc: memref<{ty}>, %old: memref<{ty}x?>) attributes {{subgroup_size=16, work_group_size=[32,2]}} {{
        %g = group_id.x : index
        parallel {{
            %sl = subgroup_linear_id : i32
            %l = subgroup_local_id : i32
            %s16 = constant 16 : i32
            %t = mul %sl, %s16 : i32
            %lane = add %t, %l : i32
            %li = cast %lane : index
            %c64 = constant 64 : index
            %gw = mul %g, %c64 : index
            %slot = add %gw, %li : index
            %one = constant {one} : {ty}
            %o = atomic_add %one, %acc[] : {ty}
            store %o, %old[%slot]
        }}
    }}"""
    acc = np.zeros((), dt)
    old = np.zeros(64 * 5, dt)
    run(src, acc, old, grid=(5, 1, 1))
    step = (1 + 2j) if ty == "c32" else 1
    assert acc == 320 * step
    assert sorted(old.real.tolist()) == list(range(320))


@pytest.mark.parametrize("ty", ["i32", "i64", "f32", "f64"])
@pytest.mark.parametrize("op", ["atomic_max", "atomic_min"])
def test_atomic_min_max(op, ty):
    dt = {"i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}[ty]
    src = f"""func @k(%x: memref<{ty}x?>, %acc: memref<{ty}x2>, %old: memref<{ty}x?>) {{
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %n = size %x[0] : index
        foreach (%i) = (%c0), (%n) {{
            %v = load %x[%i] : {ty}
            %o = {op} %v, %acc[%c0] : {ty}
            store %o, %old[%i]
            ; a second element only updated by every third work-item
            %three = constant 3 : index
            %r = rem %i, %three : index
            %z = equal %r, %c0 : bool
            if %z {{
                %o2 = {op} %v, %acc[%c1] : {ty}
            }}
        }}
    }}"""
    rng = np.random.default_rng(7)
    x = rng.integers(-1000, 1000, 53).astype(dt)
    init = 0
    acc = np.asarray([init, init], dt)
    old = np.zeros(53, dt)
    run(src, x, acc, old)
    f = max if op == "atomic_max" else min
    assert acc[0] == f(init, x.max() if f is max else x.min())
    assert acc[1] == f([init] + x[::3].tolist())
    # old values: the running max/min in some order: each is a value seen before
    assert set(old.tolist()) <= set([init] + x.tolist())


def test_atomic_load_store():
    src = """func @k(%flags: memref<i32x?>, %out: memref<i32x?>) {
        %c0 = constant 0 : index
        %n = size %flags[0] : index
        foreach (%i) = (%c0), (%n) {
            %ii = cast %i : i32
            %seven = constant 7 : i32
            %v = mul %ii, %seven : i32
            atomic_store %v, %flags[%i]
            %w = atomic_load %flags[%i] : i32
            %one = constant 1 : i32
            %w1 = add %w, %one : i32
            store %w1, %out[%i]
        }
        %c2 = constant 2 : index
        %x = atomic_load.device.acquire %flags[%c2] : i32
        atomic_store.work_group.release %x, %out[%c0]
    }"""
    flags = np.zeros(20, np.int32)
    out = np.zeros(20, np.int32)
    run(src, flags, out)
    assert flags.tolist() == [7 * k for k in range(20)]
    assert out.tolist() == [14] + [7 * k + 1 for k in range(1, 20)]


def test_atomic_add_on_group_members():
    """atomic_add on a memref loaded from a group, indexed per work-item."""
    src = """func @k(%g: group<memref<i32x4>x?>) {
        %c0 = constant 0 : index
        %n = size %g[0] : index
        %c4 = constant 4 : index
        %c16 = constant 16 : index
        foreach (%m, %i, %r) = (%c0, %c0, %c0), (%n, %c4, %c16) {
            %a = load %g[%m] : memref<i32x4>
            %one = constant 1 : i32
            %o = atomic_add %one, %a[%i] : i32
        }
    }"""
    arrays = [np.zeros(4, np.int32) for _ in range(3)]
    run(src, arrays)
    assert all(a.tolist() == [16] * 4 for a in arrays)
