"""Argument marshalling of the runtime (ttlc.runtime.args), on every target.

Every mismatch must raise TypeError or ValueError naming the argument (position, %name and
kernel) and what differs, before any work-group runs: the tests pass a valid output array
together with the bad argument and check that the output is untouched.
"""
from __future__ import annotations

import array

import ml_dtypes
import numpy as np
import pytest

import ttlc
from interp_testing import BAD_GRIDS, DLPackOnly, compile_for_target

# B := A (copy through axpby, collective) -- the output %b comes first so that a bad %a is
# found after %b was already marshalled.
COPY = """
func @copy(%b: memref<f32x4x?>, %a: memref<f32x4x?>) {
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    axpby %one, %a, %zero, %b
}
"""

# out[i] := 2 * out[i] in a parallel region (writes through whatever view it is given)
DOUBLE_1D = """
func @double(%x: memref<f32x?,strided<?>>) {
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %sgs = subgroup_size : i32
        %base = mul %sg, %sgs : i32
        %id32 = add %base, %lid : i32
        %id = cast %id32 : index
        %n = size %x[0] : index
        %nsg = num_subgroups.x : i32
        %w32 = mul %nsg, %sgs : i32
        %w = cast %w32 : index
        for %i = %id, %n, %w {
            %v = load %x[%i] : f32
            %two = constant 2.0 : f32
            %d = mul %v, %two : f32
            store %d, %x[%i]
        }
    }
}
"""

# X := 2 X for a 2-D memref with dynamic strides (foreach: one point per element)
DOUBLE_2D = """
func @double2(%x: memref<f64x?x?,strided<?,?>>) {
    %c0 = constant 0 : index
    %m = size %x[0] : index
    %n = size %x[1] : index
    foreach (%i, %j) = (%c0, %c0), (%m, %n) {
        %v = load %x[%i, %j] : f64
        %d = add %v, %v : f64
        store %d, %x[%i, %j]
    }
}
"""

SCALARS = """
func @scalars(%out: memref<f64x4>, %a: i8, %b: i32, %c: f32, %d: c32, %e: bool, %f: bf16) {
    %a64 = cast %a : f64
    %b64 = cast %b : f64
    %c64 = cast %c : f64
    %d64 = re %d : f32
    %d64f = cast %d64 : f64
    %f64 = cast %f : f64
    %i0 = constant 0 : index
    %i1 = constant 1 : index
    %i2 = constant 2 : index
    %i3 = constant 3 : index
    %s = add %a64, %b64 : f64
    store %s, %out[%i0]
    store %c64, %out[%i1]
    store %d64f, %out[%i2]
    %one = constant 1.0 : f64
    %zero = constant 0.0 : f64
    %t = if %e -> (f64) {
        yield (%one)
    } else {
        yield (%zero)
    }
    %tf = add %t, %f64 : f64
    store %tf, %out[%i3]
}
"""

# member g of the group (selected by group_id.x) := its index + 1 (foreach over its elements)
GROUP_FILL = """
func @fill(%g: group<memref<f32x?>x?, offset: ?>) {
    %gid = group_id.x : index
    %m = load %g[%gid] : memref<f32x?>
    %c0 = constant 0 : index
    %n = size %m[0] : index
    foreach (%i) = (%c0), (%n) {
        %one = constant 1 : index
        %k = add %i, %one : index
        %v = cast %k : f32
        store %v, %m[%i]
    }
}
"""

GROUP_STATIC = """
func @fill3(%g: group<memref<i32x4>x2, offset: 3>) {
    %gid = group_id.x : index
    %m = load %g[%gid] : memref<i32x4>
    %c0 = constant 0 : index
    %c4 = constant 4 : index
    foreach (%i) = (%c0), (%c4) {
        %v = cast %i : i32
        store %v, %m[%i]
    }
}
"""

ASSOCIATED = """
func @assoc(%out: memref<i32x2>, %a: memref<f32x?>, %g: group<memref<f32x4>x?>) {
    %i0 = constant 0 : index
    %i1 = constant 1 : index
    %one = constant 1 : i32
    %zero = constant 0 : i32
    %ta = associated %a : bool
    %va = if %ta -> (i32) {
        yield (%one)
    } else {
        yield (%zero)
    }
    store %va, %out[%i0]
    %tg = associated %g : bool
    %vg = if %tg -> (i32) {
        yield (%one)
    } else {
        yield (%zero)
    }
    store %vg, %out[%i1]
}
"""

ATTRS = """
func @attrs(%a: memref<f32x?> {alignment=64}, %b: memref<f32x?> {shape_gcd=[4]},
            %c: memref<f32x?x?,strided<1,?>> {stride_gcd=[1,8]}) {
}
"""

GRID_IDS = """
func @ids(%out: memref<i64x?x?x?>) {
    %x = group_id.x : index
    %y = group_id.y : index
    %z = group_id.z : index
    %ten = constant 10 : index
    %hundred = constant 100 : index
    %y10 = mul %y, %ten : index
    %z100 = mul %z, %hundred : index
    %s = add %x, %y10 : index
    %t = add %s, %z100 : index
    %v = cast %t : i64
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c0 = constant 0 : i32
        %a = equal %lid, %c0 : bool
        %b = equal %sg, %c0 : bool
        %first = and %a, %b : bool
        if %first {
            store %v, %out[%x, %y, %z]
        }
    }
}
"""

DEFAULTS = """
func @defaults(%out: memref<i32x4>) {
    %sgs = subgroup_size : i32
    %nx = num_subgroups.x : i32
    %ny = num_subgroups.y : i32
    %i0 = constant 0 : index
    %i1 = constant 1 : index
    %i2 = constant 2 : index
    %i3 = constant 3 : index
    store %sgs, %out[%i0]
    store %nx, %out[%i1]
    store %ny, %out[%i2]
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c0 = constant 0 : i32
        %is0 = equal %sg, %c0 : bool
        if %is0 {
            %all = subgroup_reduce_max %lid : i32
            %cnt = add %all, %sgs : i32
            %c1 = constant 1 : i32
            %w = sub %cnt, %c1 : i32
            %l0 = equal %lid, %c0 : bool
            if %l0 {
                store %w, %out[%i3]
            }
        }
    }
}
"""


def F(shape, dtype=np.float32, start=0):
    """A Fortran-ordered array with distinct entries."""
    n = int(np.prod(shape))
    return np.asfortranarray(np.arange(start, start + n, dtype=np.float64).reshape(shape, order="F")
                             .astype(dtype))


@pytest.fixture(scope="module")
def copy():
    return compile_for_target(COPY)["copy"]


def _raises(exc, kernel, args, match_all, grid=(1,)):
    with pytest.raises(exc) as info:
        kernel(*args, grid=grid)
    msg = str(info.value)
    for m in match_all:
        assert m in msg, f"{m!r} not in {msg!r}"
    return msg


# ---- memrefs ----------------------------------------------------------------------------------
def test_valid_copy(copy):
    a, b = F((4, 3)), np.zeros((4, 3), np.float32, order="F")
    copy(b, a, grid=(1,))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad, exc, what", [
    (F((4, 3), np.float64), TypeError, "dtype"),
    (F((4, 3), np.int32), TypeError, "dtype"),
    (F((4, 3), np.float16), TypeError, "dtype"),
    (F((12,)), ValueError, "order 2"),
    (F((4, 3, 1)), ValueError, "order 2"),
    (F((5, 3)), ValueError, "mode 0 must have size 4"),
])
def test_memref_mismatch_names_argument(copy, bad, exc, what):
    b = np.full((4, 3), -1, np.float32, order="F")
    before = b.copy()
    _raises(exc, copy, (b, bad), ["argument 1 (%a) of @copy", what])
    np.testing.assert_array_equal(b, before)


def test_c_order_array_is_rejected_with_hint(copy):
    b = np.full((4, 3), -1, np.float32, order="F")
    a = np.ascontiguousarray(F((4, 3)))
    _raises(ValueError, copy, (b, a), ["argument 1 (%a) of @copy", "column-major",
                                       "np.asfortranarray"])
    assert (b == -1).all()


def test_c_order_hidden_behind_a_size_one_mode():
    k = compile_for_target("func @k(%a: memref<f32x?x?x?,strided<?,?,?>>) {}")["k"]
    k(np.zeros((3, 1, 4), np.float32, order="F"), grid=(1,))
    _raises(ValueError, k, (np.zeros((3, 1, 4), np.float32, order="C"),), ["np.asfortranarray"])


def test_static_stride_mismatch():
    k = compile_for_target("""func @k(%a: memref<f32x4x4,strided<1,8>>, %b: memref<f32x4x4>) {
        %one = constant 1.0 : f32
        %zero = constant 0.0 : f32
        axpby %one, %a, %zero, %b
    }""")["k"]
    b = np.full((4, 4), -1, np.float32, order="F")
    _raises(ValueError, k, (F((4, 4)), b), ["argument 0 (%a) of @k", "mode 1 must have stride 8"])
    assert (b == -1).all()
    big = F((8, 4))
    k(big[:4], b, grid=(1,))  # strides (1, 8): matches
    np.testing.assert_array_equal(b, big[:4])
    # a packed memref type refuses a strided view
    _raises(ValueError, k, (big[:4], F((8, 4))[:4]), ["argument 1 (%b) of @k", "stride"])


@pytest.mark.parametrize("make", [
    lambda: F((4, 3))[::-1],                                   # negative stride
    lambda: np.asfortranarray(F((4, 3))[:, ::-1]),             # copy: fine, replaced below
    lambda: np.broadcast_to(np.float32(1), (4, 3)),            # zero strides
    lambda: np.broadcast_to(F((4, 1)), (4, 3)),                # zero stride in mode 1
])
def test_negative_and_zero_strides(copy, make):
    a = make()
    b = np.full((4, 3), -1, np.float32, order="F")
    if a.flags.f_contiguous and all(s > 0 for s in a.strides):
        copy(b, a, grid=(1,))
        return
    _raises(ValueError, copy, (b, a), ["argument 1 (%a) of @copy", "strides must be positive"])
    assert (b == -1).all()


@pytest.mark.parametrize("bad", [[[1.0] * 3] * 4, {"a": 1}, "abcd", 3.0, object(), None.__class__])
def test_non_arrays_are_rejected(copy, bad):
    b = np.full((4, 3), -1, np.float32, order="F")
    _raises(TypeError, copy, (b, bad), ["argument 1 (%a) of @copy", "expected an array"])
    assert (b == -1).all()


def test_argument_count(copy):
    b = np.zeros((4, 3), np.float32, order="F")
    _raises(TypeError, copy, (b,), ["@copy", "takes 2 arguments", "got 1"])
    _raises(TypeError, copy, (b, b, b), ["@copy", "takes 2 arguments", "got 3"])


# ---- scalars ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scalars():
    return compile_for_target(SCALARS)["scalars"]


GOOD = dict(a=-5, b=7, c=1.5, d=2 + 3j, e=True, f=0.5)


def _scalar_args(out, **kw):
    args = dict(GOOD)
    args.update(kw)
    return (out, *[args[k] for k in "abcdef"])


def test_scalars_valid(scalars):
    out = np.zeros(4)
    scalars(*_scalar_args(out), grid=(1,))
    np.testing.assert_array_equal(out, [2.0, 1.5, 2.0, 1.5])
    out[:] = 0  # NumPy scalars, 0-d arrays, bfloat16 scalars and ints for floats are fine
    scalars(*_scalar_args(out, a=np.int8(-5), b=np.array(7), c=np.float32(1.5), d=2.0,
                          e=np.bool_(False), f=ml_dtypes.bfloat16(0.5)), grid=(1,))
    np.testing.assert_array_equal(out, [2.0, 1.5, 2.0, 0.5])
    scalars(*_scalar_args(out, c=3, f=-2), grid=(1,))
    np.testing.assert_array_equal(out, [2.0, 3.0, 2.0, -1.0])


@pytest.mark.parametrize("key, value, exc, where, what", [
    ("b", 1.0, TypeError, "argument 2 (%b)", "integer"),
    ("b", np.float64(1.0), TypeError, "argument 2 (%b)", "integer"),
    ("b", True, TypeError, "argument 2 (%b)", "bool"),
    ("b", np.bool_(True), TypeError, "argument 2 (%b)", "bool"),
    ("b", "3", TypeError, "argument 2 (%b)", "str"),
    ("b", None, TypeError, "argument 2 (%b)", "NoneType"),
    ("b", 2**31, ValueError, "argument 2 (%b)", "out of range for i32"),
    ("a", 300, ValueError, "argument 1 (%a)", "out of range for i8"),
    ("a", -129, ValueError, "argument 1 (%a)", "out of range for i8"),
    ("a", np.int64(128), ValueError, "argument 1 (%a)", "out of range for i8"),
    ("c", 1 + 2j, TypeError, "argument 3 (%c)", "complex"),
    ("c", np.complex64(1), TypeError, "argument 3 (%c)", "complex"),
    ("c", 1e300, ValueError, "argument 3 (%c)", "out of range for f32"),
    ("c", 10**400, ValueError, "argument 3 (%c)", "out of range for f32"),
    ("c", False, TypeError, "argument 3 (%c)", "bool"),
    ("d", 1e300 + 1j, ValueError, "argument 4 (%d)", "out of range for c32"),
    ("d", np.zeros(2), TypeError, "argument 4 (%d)", "ndarray"),
    ("e", 1, TypeError, "argument 5 (%e)", "bool"),
    ("f", 1e39, ValueError, "argument 6 (%f)", "out of range for bf16"),
])
def test_scalar_mismatch(scalars, key, value, exc, where, what):
    out = np.full(4, -1.0)
    _raises(exc, scalars, _scalar_args(out, **{key: value}), [where, "@scalars", what])
    assert (out == -1).all()


def test_infinities_and_nan_are_values(scalars):
    out = np.zeros(4)
    scalars(*_scalar_args(out, c=float("inf"), d=complex(float("nan"), 0)), grid=(1,))
    assert out[1] == np.inf and np.isnan(out[2])


# ---- groups -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fill():
    return compile_for_target(GROUP_FILL)["fill"]


def test_group_plain_list(fill):
    xs = [np.zeros(3, np.float32), np.zeros(5, np.float32)]
    fill(xs, grid=(2,))
    np.testing.assert_array_equal(xs[0], [1, 2, 3])
    np.testing.assert_array_equal(xs[1], [1, 2, 3, 4, 5])


def test_group_dynamic_offset(fill):
    bufs = [np.full(10, -1, np.float32), np.full(8, -1, np.float32)]
    fill(ttlc.Group(bufs, offset=4, shapes=[(6,), (2,)]), grid=(2,))
    np.testing.assert_array_equal(bufs[0], [-1] * 4 + [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(bufs[1], [-1] * 4 + [1, 2, -1, -1])
    # a multi-dimensional contiguous array is flat memory, whatever its order
    c = np.full((2, 3), -1, np.float32)  # C order
    fill(ttlc.Group([c], offset=1, shapes=[(4,)]), grid=(1,))
    np.testing.assert_array_equal(c.ravel(), [-1, 1, 2, 3, 4, -1])


@pytest.mark.parametrize("group, exc, what", [
    (ttlc.Group([np.zeros(10, np.float32)], offset=4, shapes=[(7,)]), ValueError,
     "does not fit in the array's 10 elements"),
    (ttlc.Group([np.zeros(10, np.float32), np.zeros(5, np.float32)], offset=4, shapes=[(6,), (2,)]),
     ValueError, "member 1: the memref (2 elements from offset 4) does not fit"),
    (ttlc.Group([np.zeros(10, np.float32)], offset=4), ValueError, "shapes="),
    (ttlc.Group([np.zeros(10, np.float32)], offset=-1, shapes=[(2,)]), ValueError, "negative"),
    (ttlc.Group([np.zeros(10, np.float32)], offset=1.0, shapes=[(2,)]), TypeError, "integer"),
    (ttlc.Group([np.zeros(10, np.float32)], offset=1, shapes=[(2,), (3,)]), ValueError,
     "one shape per member"),
    (ttlc.Group([np.zeros(10, np.float32)], offset=1, shapes=[(2, 1)]), ValueError, "order"),
    (ttlc.Group([np.zeros(20, np.float32)[::2]], offset=1, shapes=[(2,)]), ValueError,
     "contiguous"),
    (ttlc.Group([np.zeros(10, np.float32), np.zeros(10, np.float64)], offset=1,
                shapes=[(2,), (2,)]), TypeError, "member 1: expected an array of dtype float32"),
    ([np.zeros(3, np.float32), np.zeros(3, np.int32)], TypeError, "member 1"),
    ([np.zeros(3, np.float32), [1.0, 2.0]], TypeError, "member 1: expected an array"),
    (np.zeros((2, 3), np.float32), TypeError, "list of arrays"),
    ({"a": np.zeros(3, np.float32)}, TypeError, "expected a list of arrays, a ttlc.Group or a "
     "ttlc.PreparedGroup for group<memref<f32x?>x?, offset: ?>, got dict"),
])
def test_group_mismatch(fill, group, exc, what):
    msg = _raises(exc, fill, (group,), ["argument 0 (%g) of @fill", what], grid=(1,))
    assert "@fill" in msg


def test_group_member_views_are_untouched_on_error(fill):
    good = np.zeros(4, np.float32)
    bad = np.zeros(4, np.float64)
    with pytest.raises(TypeError):
        fill([good, bad], grid=(2,))
    assert (good == 0).all()


def test_group_static_offset_and_size():
    k = compile_for_target(GROUP_STATIC)["fill3"]
    xs = [np.full(7, -1, np.int32), np.full(9, -1, np.int32)]
    k(xs, grid=(2,))
    np.testing.assert_array_equal(xs[0], [-1, -1, -1, 0, 1, 2, 3])
    np.testing.assert_array_equal(xs[1], [-1, -1, -1, 0, 1, 2, 3, -1, -1])
    xs = [np.full(7, -1, np.int32), np.full(7, -1, np.int32)]
    k(ttlc.Group(xs, offset=3), grid=(2,))  # the same offset, spelled out
    assert (xs[1][3:] == [0, 1, 2, 3]).all()
    _raises(ValueError, k, (ttlc.Group(xs, offset=2),), ["argument 0 (%g)", "static offset 3"])
    _raises(ValueError, k, (xs[:1],), ["expected 2 members"])
    _raises(ValueError, k, (xs * 2,), ["expected 2 members", "got 4"])
    _raises(ValueError, k, ([np.zeros(6, np.int32)] * 2,), ["member 0", "does not fit"])
    _raises(TypeError, k, ([np.zeros(7, np.int64)] * 2,), ["member 0", "dtype"])


def test_group_static_members_with_dynamic_offset_need_no_shapes():
    k = compile_for_target(GROUP_STATIC.replace("offset: 3", "offset: ?"))["fill3"]
    xs = [np.full(6, -1, np.int32), np.full(6, -1, np.int32)]
    k(ttlc.Group(xs, offset=2), grid=(2,))
    np.testing.assert_array_equal(xs[1], [-1, -1, 0, 1, 2, 3])
    k(ttlc.Group(xs, shapes=[(4,), (4,)]), grid=(2,))  # offset 0, the arrays as memory
    np.testing.assert_array_equal(xs[1], [0, 1, 2, 3, 2, 3])
    # offset 0 without shapes: the arrays are the members and must match the type
    _raises(ValueError, k, (ttlc.Group(xs),), ["member 0", "mode 0 must have size 4"])


# ---- attributes --------------------------------------------------------------------------------
def _aligned(n, dtype=np.float32, alignment=64, shift=0):
    """n elements whose first element is at an address = shift (mod alignment)."""
    item = np.dtype(dtype).itemsize
    raw = np.zeros(n + 2 * alignment // item, dtype)
    start = (-raw.ctypes.data % alignment) // item + shift
    return raw[start:start + n]


def test_alignment_shape_gcd_stride_gcd():
    k = compile_for_target(ATTRS)["attrs"]
    a = _aligned(8)
    b = np.zeros(8, np.float32)
    c = np.zeros((16, 3), np.float32, order="F")[:5]  # stride (1, 16)
    k(a, b, c, grid=(1,))
    _raises(ValueError, k, (_aligned(8, shift=1), b, c), ["argument 0 (%a) of @attrs",
                                                          "not aligned to 64 bytes"])
    _raises(ValueError, k, (a, np.zeros(6, np.float32), c), ["argument 1 (%b)",
                                                             "shape_gcd[0] = 4 does not divide"])
    _raises(ValueError, k, (a, b, np.zeros((6, 3), np.float32, order="F")),
            ["argument 2 (%c)", "stride_gcd[1] = 8 does not divide the stride 6"])


def test_group_attributes_apply_to_members():
    k = compile_for_target("func @g(%g: group<memref<f32x?>x?> {shape_gcd=[2]}) {}")["g"]
    k([np.zeros(2, np.float32), np.zeros(4, np.float32)], grid=(1,))
    _raises(ValueError, k, ([np.zeros(2, np.float32), np.zeros(3, np.float32)],),
            ["member 1", "shape_gcd"])


# ---- null, read-only, strided views, buffer protocol, DLPack ------------------------------------
def test_none_is_a_null_memref_and_group():
    k = compile_for_target(ASSOCIATED)["assoc"]
    out = np.full(2, -1, np.int32)
    k(out, np.zeros(3, np.float32), [np.zeros(4, np.float32)], grid=(1,))
    np.testing.assert_array_equal(out, [1, 1])
    k(out, None, None, grid=(1,))
    np.testing.assert_array_equal(out, [0, 0])
    k(out, None, [None], grid=(1,))  # a group with a null member is associated
    np.testing.assert_array_equal(out, [0, 1])


def test_access_through_null_memref_is_a_kernel_error(copy):
    with pytest.raises(ttlc.KernelError, match="null"):
        copy(np.zeros((4, 3), np.float32, order="F"), None, grid=(1,))


NULL_GEMM = """func @g(%A: group<memref<f32x4x4>x?>, %B: memref<f32x4x4>, %C: memref<f32x4x4>) {
  %i = group_id.x : index
  %a = load %A[%i] : memref<f32x4x4>
  %one = constant 1.0 : f32
  %zero = constant 0.0 : f32
  gemm.n.n %one, %a, %B, %zero, %C
}"""


@pytest.mark.parametrize("null", ["B", "member"])
def test_collective_access_through_null_memref_is_a_kernel_error(null):
    """Checked code (spec: memref access through a null memref is an error): a gemm,
    lowered to cooperative-matrix loads and stores, names the null operand's group."""
    a = np.asfortranarray(np.ones((4, 4), np.float32))
    c = np.zeros((4, 4), np.float32, order="F")
    members, b = ([a, a], None) if null == "B" else ([a, None], a)
    k = compile_for_target(NULL_GEMM, checked=True)["g"]
    group = "0" if null == "B" else "1"
    with pytest.raises(ttlc.KernelError, match=rf"group \({group}, 0, 0\).*null memref"):
        k(members, b, c, grid=(2,))


@pytest.mark.parametrize("checked", [False, True])
def test_read_only_arrays(checked):
    double = compile_for_target(DOUBLE_1D, checked=checked)["double"]
    copy = compile_for_target(COPY, checked=checked)["copy"]
    x = np.arange(20, dtype=np.float32)
    x.flags.writeable = False
    with pytest.raises(ttlc.KernelError, match="read-only"):
        double(x, grid=(1,))  # SPMD store
    b = np.zeros((4, 5), np.float32, order="F")
    b.flags.writeable = False
    with pytest.raises(ttlc.KernelError, match="read-only"):
        copy(b, F((4, 5)), grid=(1,))  # collective write
    # reading a read-only array is fine (bytes are read-only buffers)
    a = np.frombuffer(F((4, 5)).tobytes(order="F"), np.float32).reshape((4, 5), order="F")
    assert not a.flags.writeable
    out = np.zeros((4, 5), np.float32, order="F")
    copy(out, a, grid=(1,))
    np.testing.assert_array_equal(out, a)


def test_strided_views_write_through():
    double = compile_for_target(DOUBLE_1D)["double"]
    x = np.arange(40, dtype=np.float32)
    double(x[3:37:3], grid=(1,))
    expect = np.arange(40, dtype=np.float32)
    expect[3:37:3] *= 2
    np.testing.assert_array_equal(x, expect)

    double2 = compile_for_target(DOUBLE_2D)["double2"]
    base = F((8, 6), np.float64)
    for view in (lambda a: a[::2], lambda a: a[1:7:3, ::2], lambda a: a[2:5, 1:], lambda a: a):
        a = base.copy(order="F")
        double2(view(a), grid=(1,))
        e = base.copy(order="F")
        view(e)[...] *= 2
        np.testing.assert_array_equal(a, e)
    # transposed (row-major) views are not column-major
    _raises(ValueError, double2, (base.T,), ["np.asfortranarray"])
    _raises(ValueError, double2, (base[::-2],), ["strides must be positive"])


def test_buffer_protocol_without_copies():
    double = compile_for_target(DOUBLE_1D)["double"]
    raw = bytearray(np.arange(6, dtype=np.float32).tobytes())
    double(np.frombuffer(raw, np.float32), grid=(1,))
    np.testing.assert_array_equal(np.frombuffer(raw, np.float32), [0, 2, 4, 6, 8, 10])
    double(memoryview(raw).cast("f"), grid=(1,))
    np.testing.assert_array_equal(np.frombuffer(raw, np.float32), [0, 4, 8, 12, 16, 20])
    arr = array.array("f", [1, 2, 3])
    double(arr, grid=(1,))
    assert list(arr) == [2, 4, 6]
    with pytest.raises(TypeError, match="dtype float32.*got dtype uint8"):
        double(raw, grid=(1,))  # raw bytes are uint8
    with pytest.raises(ttlc.KernelError, match="read-only"):
        double(np.frombuffer(bytes(raw), np.float32), grid=(1,))


class BadDevice(DLPackOnly):
    """A device tensor: it cannot be exported to the CPU."""

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, *args, **kwargs):
        raise BufferError("the tensor lives on a CUDA device")


def test_dlpack_without_copies():
    double = compile_for_target(DOUBLE_1D)["double"]
    x = np.arange(5, dtype=np.float32)
    double(DLPackOnly(x), grid=(1,))
    np.testing.assert_array_equal(x, [0, 2, 4, 6, 8])
    double(DLPackOnly(x[::2]), grid=(1,))  # strided DLPack tensors too
    np.testing.assert_array_equal(x, [0, 2, 8, 6, 16])
    double2 = compile_for_target(DOUBLE_2D)["double2"]
    a = F((3, 4), np.float64)
    double2(DLPackOnly(a), grid=(1,))
    np.testing.assert_array_equal(a, 2 * F((3, 4), np.float64))
    with pytest.raises(TypeError, match="dtype"):
        double(DLPackOnly(np.zeros(3)), grid=(1,))
    with pytest.raises(TypeError, match="argument 0 \\(%x\\) of @double.*DLPack"):
        double(BadDevice(x), grid=(1,))
    ro = np.arange(3, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ttlc.KernelError, match="read-only"):
        double(DLPackOnly(ro), grid=(1,))
    # DLPack group members
    fill = compile_for_target(GROUP_FILL)["fill"]
    m = np.zeros(3, np.float32)
    fill([DLPackOnly(m)], grid=(1,))
    np.testing.assert_array_equal(m, [1, 2, 3])


class Bf16Producer:
    """A DLPack producer of a bfloat16 tensor (type code kDLBfloat), which NumPy's own
    from_dlpack refuses: the DLPack C structures written out here with ctypes over the
    bits of an ml_dtypes array (its memory stays the producer's)."""

    def __init__(self, values, stride: int = 1, device: int = 1):
        import ctypes

        self.bits = np.asarray(values, ml_dtypes.bfloat16)
        self.n = self.bits.size // stride
        self.shape = (ctypes.c_int64 * 1)(self.n)
        self.strides = (ctypes.c_int64 * 1)(stride)

        class Tensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int),
                        ("device_id", ctypes.c_int), ("ndim", ctypes.c_int),
                        ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p),
                        ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64),
                        ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]
        self.tensor = Tensor(self.bits.ctypes.data, device, 0, 1, 4, 16, 1,
                             ctypes.addressof(self.shape), ctypes.addressof(self.strides), 0,
                             None, None)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.c_void_p]
        self._new = new

    def __dlpack__(self, *args, **kwargs):
        import ctypes
        return self._new(ctypes.addressof(self.tensor), b"dltensor", None)

    def __dlpack_device__(self):
        return (self.tensor.device_type, 0)


def test_dlpack_bfloat16_without_copies():
    """bf16 tensors of other libraries (torch.bfloat16) pass without a copy, although
    NumPy's from_dlpack has no bfloat16 (ttlc.runtime.dlpack reads the DLPack structure)."""
    double = compile_for_target(DOUBLE_1D.replace("f32", "bf16"))["double"]
    x = Bf16Producer([1.0, 2.5, -3.0, 4.0])
    double(x, grid=(1,))
    np.testing.assert_array_equal(x.bits.astype(np.float32), [2.0, 5.0, -6.0, 8.0])
    y = Bf16Producer([1.0, 9.0, 2.0, 9.0, 3.0, 9.0], stride=2)  # every other element
    double(y, grid=(1,))
    np.testing.assert_array_equal(y.bits.astype(np.float32), [2.0, 9.0, 4.0, 9.0, 6.0, 9.0])
    with pytest.raises(TypeError, match="not the CPU"):
        double(Bf16Producer([1.0], device=2), grid=(1,))


def test_torch_bfloat16_without_copies():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the bench extra)")
    double = compile_for_target(DOUBLE_1D.replace("f32", "bf16"))["double"]
    x = torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    double(x, grid=(1,))
    assert x.tolist() == [2.0, 5.0, -6.0]


ROW_MAJOR_GEMM = """
func @gemm(%A: memref<f32x?x?x?>, %B: memref<f32x?x?x?>, %C: memref<f32x?x?x?>) {
    %k = group_id.x : index
    %m = size %A[0] : index
    %n = size %B[1] : index
    %l = size %A[1] : index
    %a = subview %A[0:%m,0:%l,%k] : memref<f32x?x?,strided<1,?>>
    %b = subview %B[0:%l,0:%n,%k] : memref<f32x?x?,strided<1,?>>
    %c = subview %C[0:%m,0:%n,%k] : memref<f32x?x?,strided<1,?>>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    gemm %one, %a, %b, %zero, %c
}
"""


def test_row_major_stacks_through_transposed_views():
    """README "Row-major arrays": C-order stacks are refused with a hint that works, and
    C = A B row-major is computed as C^T = B^T A^T on the .T views, without copies."""
    gemm = compile_for_target(ROW_MAJOR_GEMM)["gemm"]
    rng = np.random.default_rng(0)
    A = rng.integers(-4, 4, (5, 8, 4)).astype(np.float32)
    B = rng.integers(-4, 4, (5, 4, 6)).astype(np.float32)
    C = np.zeros((5, 8, 6), np.float32)
    with pytest.raises(ValueError, match=r"x\.T views the same memory in column-major order, "
                                         r"shape \(4, 8, 5\)"):
        gemm(A, B, C, grid=(5,))
    gemm(B.T, A.T, C.T, grid=(5,))
    np.testing.assert_array_equal(C, A @ B)


def test_zero_d_memref():
    k = compile_for_target("""func @k(%a: memref<f32>) {
        %v = load %a[] : f32
        %w = add %v, %v : f32
        parallel {
            %lid = subgroup_local_id : i32
            %c0 = constant 0 : i32
            %first = equal %lid, %c0 : bool
            if %first {
                store %w, %a[]
            }
        }
    }""")["k"]
    a = np.array(3.0, np.float32)
    k(a, grid=(1,))
    assert a == 6.0
    _raises(ValueError, k, (np.zeros(1, np.float32),), ["order 0"])


def test_empty_arrays():
    double = compile_for_target(DOUBLE_1D)["double"]
    double(np.zeros(0, np.float32), grid=(1,))
    double2 = compile_for_target(DOUBLE_2D)["double2"]
    double2(np.zeros((0, 3)), grid=(1,))
    double2(np.zeros((3, 0)), grid=(1,))


# ---- grid ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ids():
    return compile_for_target(GRID_IDS)["ids"]


@pytest.mark.parametrize("grid, shape", [((2,), (2, 1, 1)), ((2, 3), (2, 3, 1)),
                                         ((2, 3, 4), (2, 3, 4)), (3, (3, 1, 1)),
                                         ((np.int64(2), 1), (2, 1, 1))])
def test_grid_shapes(ids, grid, shape):
    out = np.full(shape, -1, np.int64, order="F")
    ids(out, grid=grid)
    x, y, z = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    np.testing.assert_array_equal(out, x + 10 * y + 100 * z)


@pytest.mark.parametrize("grid, message", BAD_GRIDS)
def test_a_grid_no_target_launches_is_refused(ids, grid, message):
    """A grid size of 0 (almost always a wrong batch count) or past the target's limit is
    a ValueError saying why; nothing runs."""
    out = np.full((1, 1, 1), -1, np.int64)
    with pytest.raises(ValueError, match=message):
        ids(out, grid=grid)
    assert out[0, 0, 0] == -1


@pytest.mark.parametrize("grid, exc", [((-1, 1, 1), ValueError), ((1, -2), ValueError),
                                       ((), ValueError), ((1, 1, 1, 1), ValueError),
                                       ((1.5,), TypeError), ("1", TypeError), (None, TypeError)])
def test_bad_grid(ids, grid, exc):
    out = np.full((1, 1, 1), -1, np.int64)
    with pytest.raises(exc, match="grid"):
        ids(out, grid=grid)
    assert out[0, 0, 0] == -1


@pytest.mark.parametrize("grid, limit", [(2**63, "limit of 2147483647"),
                                         ((2**62, 4), "limit of 2147483647"),
                                         ((2**32, 2**32), "limit of 2147483647"),
                                         ((1, 2**31), "grid mode y .* limit of 2147483647"),
                                         ((2**31 - 1,) * 3, r"more than 2\*\*63 - 1")])
def test_grid_past_the_target_limit(ids, grid, limit):
    """A grid that cannot be launched is refused (never a struct error, a launch of no
    work-group through an overflowing product, or a launch that cannot finish)."""
    out = np.full((1, 1, 1), -1, np.int64)
    with pytest.raises(ValueError, match=limit):
        ids(out, grid=grid)
    assert out[0, 0, 0] == -1


def test_defaults_subgroup_16_work_group_16x1():
    k = compile_for_target(DEFAULTS)["defaults"]
    out = np.zeros(4, np.int32)
    k(out, grid=(1,))
    np.testing.assert_array_equal(out, [16, 1, 1, 30])
    k2 = compile_for_target(DEFAULTS.replace("(%out: memref<i32x4>)",
                                       "(%out: memref<i32x4>) attributes {subgroup_size=8, "
                                       "work_group_size=[16,2]}"))["defaults"]
    k2(out, grid=(1,))
    np.testing.assert_array_equal(out, [8, 2, 2, 14])


def test_unknown_kernel_name():
    m = compile_for_target(COPY)
    with pytest.raises(KeyError, match="@copy"):
        m["nope"]
    assert m["@copy"].name == "copy"
