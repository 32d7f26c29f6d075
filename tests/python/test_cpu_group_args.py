"""Target cpu: the members of a group are checked all at once.

``ttlc.runtime.args._quick_members`` reads the fields of every member array at once
(NumPy's ``PyArrayObject_fields``) and applies ``_quick_memref``'s rules to all of them;
it must accept exactly the lists whose every member ``_quick_memref`` accepts, with the
same addresses, sizes and strides (or leave them to the member-by-member path).  The
launch tests (``test_cpu_launch.agree``) compare with ``marshal``.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import ttlc
from ttlc.ir.types import DYNAMIC
from ttlc.runtime import args

pytest.importorskip("llvmlite")

from test_cpu_launch import agree  # noqa: E402
from test_interp_group_args import Producer  # noqa: E402

pytestmark = pytest.mark.skipif(not args._FIELDS_OK, reason="ndarray fields are not readable "
                                "here (not 64-bit little-endian CPython)")

#: group parameters with static and dynamic sizes and strides, attributes, orders 0 to 3
PARAMS = """
func @p(%a: group<memref<f32x?x?>x?>,
        %b: group<memref<f64x4x?>x?> {shape_gcd=[2],stride_gcd=[1,4]},
        %c: group<memref<i16x?x?x?,strided<?,?,?>>x?>,
        %d: group<memref<f32x?,strided<?>>x?> {alignment=32},
        %e: group<memref<i32x2x?,strided<1,?>>x?>, %f: group<memref<f32>x?>) {}
"""
DTYPES = {"a": np.float32, "b": np.float64, "c": np.int16, "d": np.float32, "e": np.int32,
          "f": np.float32}


@pytest.fixture(scope="module")
def params():
    module = ttlc.compile(PARAMS, target="cpu")
    return module, module["p"].func.args


def base_array(rng, dtype, order):
    shape = tuple(int(s) for s in rng.integers(1, 6, size=order)) + (int(rng.integers(2, 9)),)
    return np.asfortranarray(np.arange(int(np.prod(shape))).reshape(shape).astype(dtype))


def odd_member(rng, dtype, order, like):
    """A member unlike the others: another size or view, or one the rules may refuse."""
    kind = int(rng.integers(12))
    shape = tuple(int(s) for s in rng.integers(1, 5, size=order))
    if kind == 0:
        return np.zeros(shape, dtype, order="F")
    if kind == 1:
        return np.zeros(shape, dtype, order="C")
    if kind == 2:
        return np.zeros(shape, np.float64 if dtype != np.float64 else np.float32, order="F")
    if kind == 3:
        frozen = like.view()
        frozen.flags.writeable = False
        return frozen
    if kind == 4 and order:
        return like[::-1] if like.shape[0] > 1 else like[..., ::-1]
    if kind == 5 and order:
        return np.zeros(tuple(2 * s for s in shape), dtype, order="F")[::2]
    if kind == 6:
        return "text" if rng.random() < 0.5 else None
    if kind == 7:
        return np.zeros(shape + (1,), dtype, order="F")
    if kind == 8:
        flat = np.zeros(int(np.prod(shape)) + 1, dtype)  # an address one element further
        return flat[1:].reshape(shape, order="F")
    if kind == 9 and order:
        return np.zeros((0,) + shape[1:], dtype, order="F")
    if kind == 10:
        return np.asfortranarray(like.astype(like.dtype.newbyteorder()))
    return np.zeros(shape, dtype, order="F")[tuple(slice(None, max(1, s - 1)) for s in shape)]


def random_group(rng, dtype, order):
    """Views of one array (alike), sometimes with odd members or from several arrays."""
    X = base_array(rng, dtype, order)
    members = [X[..., k] for k in range(X.shape[-1])]
    if rng.random() < 0.3:
        Y = base_array(rng, dtype, order)
        members += [Y[..., k] for k in range(Y.shape[-1])]
    first = members[0]
    for _ in range(int(rng.choice([0, 0, 1, 2]))):
        members[int(rng.integers(len(members)))] = odd_member(rng, dtype, order, first)
    return members


def test_at_once_agrees_with_member_by_member(params):
    _, fargs = params
    rng = np.random.default_rng(5)
    accepted = {"alike": 0, "varied": 0}
    for _ in range(600):
        p = fargs[int(rng.integers(len(fargs)))]
        t = p.value.type.memref
        writes = bool(rng.random() < 0.5)
        members = random_group(rng, DTYPES[p.value.name], t.order)
        at_once = args._quick_members(t, p.attrs, writes)(members)
        one = args._quick_memref(t, p.attrs, writes)
        rows = [one(m) for m in members]
        if any(r is None for r in rows):
            assert at_once is None
            continue
        # the member-by-member path accepts: so does this one (the dtypes are NumPy's own)
        assert at_once is not None
        addresses, dope = at_once
        assert addresses.dtype == dope.dtype == np.int64 and dope.flags.c_contiguous
        assert addresses.tolist() == [r[0] for r in rows]
        assert dope.tolist() == [r[1:] for r in rows]
        accepted["alike" if len({tuple(r[1:]) for r in rows}) == 1 else "varied"] += 1
    assert accepted["alike"] > 50 and accepted["varied"] > 20, accepted


def test_slots_of_views_of_one_array():
    """The member addresses and dope vectors, computed here from the array's layout."""
    k = ttlc.compile("func @g(%x: group<memref<f32x?x?>x?>) {}", target="cpu")["g"]
    X = np.asfortranarray(np.zeros((8, 6, 1000), np.float32))[1:7]  # strides 4, 32, 192 bytes
    keep: list = []
    pointers, dopes, n, assoc = args.quick(k.func.args)([[X[:, :, i] for i in range(1000)]], keep)
    assert (n, assoc) == (1000, 1)
    got_pointers = (ctypes.c_int64 * n).from_address(pointers)[:]
    got_dopes = (ctypes.c_int64 * (4 * n)).from_address(dopes)[:]
    assert got_pointers == [X.ctypes.data + 192 * i for i in range(1000)]
    assert got_dopes == [6, 6, 1, 8] * 1000


def test_an_equal_dtype_of_another_object_goes_member_by_member():
    """A dtype equal to float32 that is another object (here: with metadata)."""
    t_args = ttlc.compile("func @g(%x: group<memref<f32x?>x?>) {}", target="cpu")["g"].func.args
    dtype = np.dtype(np.float32, metadata={"unit": "m"})
    assert dtype == np.float32 and dtype is not np.dtype(np.float32)
    members = [np.zeros(3, dtype) for _ in range(4)]
    t = t_args[0].value.type
    assert args._quick_members(t.memref, t_args[0].attrs, False)(members) is None
    keep: list = []
    assert args.quick(t_args)([members], keep)[2:] == [4, 1]


def alike(p, count):
    """`count` views of one 64-byte aligned array that parameter `p` takes (size 8 where
    it is dynamic)."""
    t = p.value.type.memref
    shape = tuple(8 if s is DYNAMIC else s for s in t.shape) + (count,)
    size, dtype = int(np.prod(shape)), np.dtype(DTYPES[p.value.name])
    buf = np.zeros(size + 64, dtype)
    start = (-buf.ctypes.data % 64) // dtype.itemsize
    X = buf[start:start + size].reshape(shape, order="F")
    return [X[..., k] for k in range(count)]


@pytest.mark.parametrize("count", [1, 2, 300])
def test_large_groups_agree_with_marshal(params, count):
    module, fargs = params
    rng = np.random.default_rng(count)
    assert agree(module, "p", [alike(p, count) for p in fargs])
    for _ in range(40):
        groups = [alike(p, count) for p in fargs]
        i, j = int(rng.integers(len(groups))), int(rng.integers(count))
        t = fargs[i].value.type.memref
        groups[i][j] = odd_member(rng, DTYPES[fargs[i].value.name], t.order, groups[i][0])
        agree(module, "p", groups)


def test_static_strides_of_modes_of_size_one():
    """A mode of size 1 takes the type's static stride, whatever the array's."""
    fargs = ttlc.compile("func @g(%x: group<memref<f32x?x?,strided<1,7>>x?>) {}",
                         target="cpu")["g"].func.args
    t, attrs = fargs[0].value.type.memref, fargs[0].attrs
    Y = np.asfortranarray(np.zeros((7, 2, 3), np.float32))
    members = [np.zeros((3, 1), np.float32, order="F"), Y[:, :, 1], np.zeros((1, 1), np.float32)]
    addresses, dope = args._quick_members(t, attrs, False)(members)
    assert addresses.tolist() == [m.ctypes.data for m in members]
    assert dope.tolist() == [[3, 1, 1, 7], [7, 2, 1, 7], [1, 1, 1, 7]]
    # a mode of size 2 must have the stride
    members.append(np.zeros((3, 2), np.float32, order="F"))
    assert args._quick_members(t, attrs, False)(members) is None


@pytest.mark.parametrize("odd, valid", [
    (np.zeros((4, 4), order="F"), True),
    (np.zeros((4, 3), order="F"), False),  # shape_gcd[1] = 2 does not divide 3
    (np.zeros((6, 2), order="F")[:4], False),  # stride_gcd[1] = 4 does not divide 6
    (np.zeros((8, 2), order="F")[:4], True),
])
def test_gcd_attributes_of_members_of_several_sizes(odd, valid):
    fargs = ttlc.compile("func @g(%x: group<memref<f64x4x?,strided<1,?>>x?> "
                         "{shape_gcd=[1,2],stride_gcd=[1,4]}) "
                         "{}", target="cpu")["g"].func.args
    t, attrs = fargs[0].value.type.memref, fargs[0].attrs
    X = np.asfortranarray(np.zeros((4, 2, 3)))
    members = [X[:, :, 0], odd, X[:, :, 2]]
    got = args._quick_members(t, attrs, False)(members)
    if not valid:
        assert got is None
        return
    assert got[1].tolist() == [[4, 2, 1, 4], [4, odd.shape[1], 1, odd.strides[1] // 8],
                               [4, 2, 1, 4]]


def test_member_by_member_gives_the_same_slots(params, monkeypatch):
    """Without readable fields (other Pythons) every member is checked on its own."""
    _, fargs = params
    groups = [alike(p, args._AT_ONCE + 4) for p in fargs]
    groups[0][2] = np.zeros((3, 7), np.float32, order="F")  # (members of several sizes)

    def slots():
        keep: list = []
        flat = args.quick(fargs)(groups, keep)
        assert flat is not None
        out = []
        for p, (pointers, dopes, n, assoc) in zip(fargs, zip(*[iter(flat)] * 4)):
            size = 2 * p.value.type.memref.order * n
            out.append(((ctypes.c_int64 * n).from_address(pointers)[:],
                        (ctypes.c_int64 * size).from_address(dopes)[:] if size else [], n, assoc))
        return out

    at_once = slots()
    monkeypatch.setattr(args, "_FIELDS_OK", False)
    assert slots() == at_once
    assert at_once[0][1][8:12] == [3, 7, 1, 3]  # member 2 of %a


# ---- prepared groups ---------------------------------------------------------------------------
GEMM = """
func @gemm(%A: group<memref<f32x4x4>x?>, %B: group<memref<f32x4x4>x?>,
           %C: group<memref<f32x4x4>x?>) {
    %k = group_id.x : index
    %a = load %A[%k] : memref<f32x4x4>
    %b = load %B[%k] : memref<f32x4x4>
    %c = load %C[%k] : memref<f32x4x4>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    gemm %one, %a, %b, %zero, %c
}
"""


def gemm_data(count):
    rng = np.random.default_rng(count)
    A, B = (np.asfortranarray(rng.integers(-4, 5, (4, 4, count)).astype(np.float32))
            for _ in range(2))
    C = np.asfortranarray(np.zeros((4, 4, count), np.float32))
    return A, B, C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B)


def test_prepared_launches_do_no_work_per_member(monkeypatch):
    """The tables are built at the first launch and reused: later launches check no
    member (every function that looks at members fails here)."""
    k = ttlc.compile(GEMM, target="cpu")["gemm"]
    count = 5000
    A, B, C, want = gemm_data(count)
    groups = [ttlc.PreparedGroup([X[:, :, i] for i in range(count)]) for X in (A, B, C)]
    k(*groups, grid=(count,))
    np.testing.assert_array_equal(C, want)
    tables = [dict(g._tables) for g in groups]
    assert all(len(t) == 1 for t in tables)

    def refuse(*_):
        raise AssertionError("a member was looked at")
    for name in ("group_arg", "memref_arg", "as_array", "_array_words", "_address"):
        monkeypatch.setattr(args, name, refuse)
    C[...] = 0
    for _ in range(3):
        k(*groups, grid=(count,))
        np.testing.assert_array_equal(C, want)
    for g, before in zip(groups, tables):
        assert g._tables.keys() == before.keys()
        assert all(g._tables[key] is before[key] for key in before)


def test_prepared_groups_give_the_slots_of_lists(params):
    """Through the quick path, the same slots as marshal makes of the lists."""
    module, fargs = params
    rng = np.random.default_rng(9)
    for count in (1, 2, 300):
        groups = [alike(p, count) for p in fargs]
        assert agree(module, "p", [ttlc.PreparedGroup(g) for g in groups])
        for _ in range(20):
            groups = [alike(p, count) for p in fargs]
            i, j = int(rng.integers(len(groups))), int(rng.integers(count))
            t = fargs[i].value.type.memref
            groups[i][j] = odd_member(rng, DTYPES[fargs[i].value.name], t.order, groups[i][0])
            try:
                prepared = [ttlc.PreparedGroup(g) for g in groups]
            except TypeError:  # (a member that is no array: refused when preparing)
                continue
            agree(module, "p", prepared)


def test_only_dlpack_members_are_checked_at_each_launch():
    k = ttlc.compile(GEMM, target="cpu")["gemm"]
    count = 100
    A, B, C, want = gemm_data(count)
    As = [A[:, :, i] for i in range(count)]
    producers = [Producer(As[7]), Producer(As[50])]
    As[7], As[50] = producers
    groups = [ttlc.PreparedGroup(x) for x in (As, [B[:, :, i] for i in range(count)],
                                             [C[:, :, i] for i in range(count)])]
    assert [p.exports for p in producers] == [1, 1]  # (the view)
    assert len(groups[0]._producers) == 2 and not groups[1]._producers
    for launch in range(1, 4):
        k(*groups, grid=(count,))
        assert [p.exports for p in producers] == [1 + launch] * 2
    np.testing.assert_array_equal(C, want)


def test_torch_members_are_checked_through_data_ptr():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the bench extra)")
    t = torch.zeros(4, 4).T
    group = ttlc.PreparedGroup([t])
    (_, producer, address, now), = group._producers
    assert producer is t and address == t.data_ptr() and now == t.data_ptr
