"""Groups given as lists of many arrays, on every target: results and error messages.

Target cpu checks the members of a list all at once (``ttlc.runtime.args``); every
target must accept the same lists, compute the same results, and reject the same lists
with a message naming the argument and the member, before anything runs.  Expected
results come from NumPy (``einsum`` in float64).
"""
from __future__ import annotations

import numpy as np
import pytest

import ttlc
from interp_testing import compile_for_target

# C_k := A_k B_k for every member k (one work-group per member)
GEMM = """
func @gemm(%A: group<memref<f32x?x?>x?>, %B: group<memref<f32x?x?>x?>,
           %C: group<memref<f32x?x?>x?>) {
    %k = group_id.x : index
    %a = load %A[%k] : memref<f32x?x?>
    %b = load %B[%k] : memref<f32x?x?>
    %c = load %C[%k] : memref<f32x?x?>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    gemm %one, %a, %b, %zero, %c
}
"""
# the same with static sizes and a static member count
GEMM_STATIC = GEMM.replace("f32x?x?>x?", "f32x4x4>x?").replace("memref<f32x?x?>", "memref<f32x4x4>")
GEMM_THREE = GEMM_STATIC.replace("x4x4>x?", "x4x4>x3")

COUNT = 37


def F(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return np.asfortranarray(rng.integers(-4, 5, size=shape).astype(dtype))


def expected(As, Bs):
    return [np.asarray(a, np.float64) @ np.asarray(b, np.float64) for a, b in zip(As, Bs)]


def views(X):
    return [X[:, :, k] for k in range(X.shape[2])]


@pytest.fixture
def gemm():
    return compile_for_target(GEMM)["gemm"]


@pytest.fixture
def gemm_static():
    return compile_for_target(GEMM_STATIC)["gemm"]


@pytest.mark.parametrize("kind", [list, tuple])
def test_views_of_one_array(gemm_static, kind):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    gemm_static(*(kind(views(X)) for X in (A, B, C)), grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))


def test_members_of_several_arrays_with_their_own_sizes(gemm):
    """Mixed bases, sizes, slices (dynamic strides) and separate arrays in one list."""
    rng = np.random.default_rng(3)
    big = [F((9, 9, 4), 10 + s) for s in range(3)]
    As, Bs, Cs = [], [], []
    for k in range(COUNT):
        m, n, kk = (int(x) for x in rng.integers(1, 7, size=3))
        kind = k % 3
        if kind == 0:  # views of shared 3-d arrays, with row slices (stride 9)
            As.append(big[0][:m, :kk, k % 4])
            Bs.append(big[1][1:kk + 1, :n, k % 4])
        elif kind == 1:  # separate arrays
            As.append(F((m, kk), 100 + k))
            Bs.append(F((kk, n), 200 + k))
        else:  # every other column of a wider array
            As.append(F((m, 2 * kk), 300 + k)[:, ::2])
            Bs.append(F((kk, n), 400 + k))
        Cs.append(np.asfortranarray(np.full((m, n), 5, np.float32)))
    gemm(As, Bs, Cs, grid=(COUNT,))
    for c, want in zip(Cs, expected(As, Bs)):
        np.testing.assert_array_equal(c, want)


def test_empty_group():
    """A group of no members is a valid argument: the launch gets past the argument
    checks, and only its access to member 0 is a finding."""
    checked = compile_for_target(GEMM, checked=True)["gemm"]
    with pytest.raises(ttlc.KernelError, match="out of bounds"):
        checked([], [], [], grid=(1,))


def _bad_member(kind: str, X: np.ndarray, k: int):
    """A member k that the %A of GEMM/GEMM_STATIC refuses, and (exception, message)."""
    good = X[:, :, k]
    return {
        "dtype": (good.astype(np.float64, order="F"), TypeError,
                  "expected an array of dtype float32"),
        "order": (np.zeros(16, np.float32), ValueError, "expected an array of order 2"),
        "size": (np.zeros((4, 5), np.float32, order="F"), ValueError, "mode 1 must have size 4"),
        "row-major": (np.ascontiguousarray(X[:, :, k]) + np.eye(4, dtype=np.float32), ValueError,
                      "the array is not in column-major order"),
        "stride": (np.asfortranarray(np.zeros((8, 4), np.float32))[::2], ValueError,
                   "mode 0 must have stride 1 elements"),
        "negative": (good[::-1], ValueError, "strides must be positive"),
        "non-array": ("text", TypeError, "expected an array (NumPy, DLPack or buffer protocol), "
                                         "got str"),
        "number": (3.0, TypeError, "expected an array"),
    }[kind]


@pytest.mark.parametrize("kind", ["dtype", "order", "size", "row-major", "stride", "negative",
                                  "non-array", "number"])
@pytest.mark.parametrize("k", [0, 17, COUNT - 1])
def test_bad_member_is_named(gemm_static, kind, k):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    As = views(A)
    As[k], exc, what = _bad_member(kind, A, k)
    with pytest.raises(exc) as info:
        gemm_static(As, views(B), views(C), grid=(COUNT,))
    assert f"argument 0 (%A) of @gemm, member {k}: {what}" in str(info.value)
    assert (C == 7).all()  # nothing ran


def test_bad_member_in_a_group_with_dynamic_sizes(gemm):
    """The %A of GEMM takes members of any size: a wrong stride is still named."""
    A = F((4, 4, COUNT), 1)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    As = views(A)
    As[5] = np.asfortranarray(np.zeros((8, 4), np.float32))[::2]
    with pytest.raises(ValueError, match=r"argument 0 \(%A\) of @gemm, member 5: mode 0 must "
                                         "have stride 1"):
        gemm(As, views(A), views(C), grid=(COUNT,))
    assert (C == 7).all()


def test_member_count_of_a_static_group():
    k = compile_for_target(GEMM_THREE)["gemm"]
    A = F((4, 4, 3), 1)
    for n in (0, 2, 4):
        with pytest.raises(ValueError, match=rf"argument 0 \(%A\) of @gemm: expected 3 members "
                                             rf".*got {n}"):
            k(views(A)[:n] + [A[:, :, 0]] * max(0, n - 3), views(A), views(A), grid=(3,))


def test_read_only_member_written(gemm_static, target):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    Cs = views(C)
    Cs[20] = Cs[20].view()
    Cs[20].flags.writeable = False
    with pytest.raises(ttlc.KernelError, match="write to a read-only array") as info:
        gemm_static(views(A), views(B), Cs, grid=(COUNT,))
    if target == "cpu":  # (checked before anything runs)
        assert "argument 2, %C, member 20, is not writeable" in str(info.value)
        assert (C == 7).all()
    assert (C[:, :, 20] == 7).all()
    # read-only members of a group the kernel only reads are fine
    As = views(A)
    for a in As:
        a.flags.writeable = False
    gemm_static(As, views(B), views(C), grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))


# ---- prepared groups (ttlc.PreparedGroup) ------------------------------------------------------
def prepared(*arrays):
    """One prepared group of the views of each 3-d array."""
    return [ttlc.PreparedGroup(views(X)) for X in arrays]


@pytest.mark.parametrize("checked", [False, True])
def test_prepared_groups_compute_what_lists_do(checked):
    k = compile_for_target(GEMM_STATIC, checked=checked)["gemm"]
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    groups = prepared(A, B, C)
    for seed in (3, 4):  # a second launch sees the new contents: the memory is shared
        A[...] = F((4, 4, COUNT), seed)
        k(*groups, grid=(COUNT,))
        np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))


def test_prepared_members_of_several_sizes(gemm):
    rng = np.random.default_rng(8)
    As, Bs, Cs = [], [], []
    for k in range(COUNT):
        m, n, kk = (int(x) for x in rng.integers(1, 7, size=3))
        As.append(F((m, 2 * kk), 300 + k)[:, ::2])  # (dynamic strides)
        Bs.append(F((kk, n), 400 + k))
        Cs.append(np.asfortranarray(np.full((m, n), 5, np.float32)))
    gemm(*(ttlc.PreparedGroup(x) for x in (As, Bs, Cs)), grid=(COUNT,))
    for c, want in zip(Cs, expected(As, Bs)):
        np.testing.assert_array_equal(c, want)


# B_k := A_k for members stored `offset` elements into their buffers
COPY_OFFSET = """
func @copy(%A: group<memref<f32x4x?>x?, offset: ?>, %B: group<memref<f32x4x?>x?>) {
    %k = group_id.x : index
    %a = load %A[%k] : memref<f32x4x?>
    %b = load %B[%k] : memref<f32x4x?>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    axpby %one, %a, %zero, %b
}
"""


def test_prepared_group_with_an_offset_and_shapes():
    k = compile_for_target(COPY_OFFSET)["copy"]
    widths = [3, 1, 5]
    bufs = [np.arange(8 + 4 * w, dtype=np.float32) + 100 * i for i, w in enumerate(widths)]
    outs = [np.zeros((4, w), np.float32, order="F") for w in widths]
    shapes = [[4, w] for w in widths]  # (lists: copied as tuples)
    A = ttlc.PreparedGroup(bufs, offset=8, shapes=shapes)
    shapes[0][1] = 99  # changes nothing: the shapes were copied
    assert A.shapes == ((4, 3), (4, 1), (4, 5)) and A.offset == 8 and len(A) == 3
    k(A, ttlc.PreparedGroup(outs), grid=(3,))
    for buf, out, w in zip(bufs, outs, widths):
        np.testing.assert_array_equal(out, buf[8:].reshape((4, w), order="F"))
    with pytest.raises(ValueError, match=r"argument 0 \(%A\) of @copy, member 2: the memref "
                                         r"\(24 elements from offset 8\) does not fit"):
        k(ttlc.PreparedGroup(bufs, offset=8, shapes=[(4, 3), (4, 1), (4, 6)]),
          ttlc.PreparedGroup(outs), grid=(3,))


def test_changing_the_list_after_preparing_changes_nothing(gemm_static):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    As = views(A)
    group = ttlc.PreparedGroup(As)
    As[3] = np.zeros((4, 5), np.float32)  # would be refused (size), if it were seen
    As.append(As[0])
    gemm_static(group, *prepared(B, C), grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))


def test_changing_a_member_array_after_preparing_changes_nothing(gemm):
    """A private view: a new shape of the caller's array does not reach the group."""
    A, B = F((4, 4), 1), F((4, 4), 2)
    C = np.zeros((4, 4), np.float32, order="F")
    group = ttlc.PreparedGroup([A])
    A.shape = (4, 2, 2)
    with pytest.raises(ValueError, match="member 0: expected an array of order 2"):
        gemm([A], [B], [C], grid=(1,))  # (the list sees it)
    gemm(group, [B], [C], grid=(1,))
    np.testing.assert_array_equal(C, F((4, 4), 1).astype(np.float64) @ B)


def test_a_prepared_group_keeps_its_memory():
    """The caller's arrays may go; resizing one while it is prepared is refused."""
    k = compile_for_target(GEMM_STATIC)["gemm"]
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    want = np.einsum("ikb,kjb->ijb", A.astype(np.float64), B)
    groups = [ttlc.PreparedGroup([X[:, :, i].copy(order="F") for i in range(COUNT)])
              for X in (A, B)]
    del A, B
    import gc
    gc.collect()
    C = np.asfortranarray(np.zeros((4, 4, COUNT), np.float32))
    k(*groups, ttlc.PreparedGroup(views(C)), grid=(COUNT,))
    np.testing.assert_array_equal(C, want)
    own = np.zeros((4, 4), np.float32, order="F")
    group = ttlc.PreparedGroup([own])
    with pytest.raises(ValueError, match="cannot resize an array that references or is "
                                         "referenced"):
        own.resize((64, 64))
    del group
    own.resize((64, 64))  # (refused above only because of the group)


def test_read_only_member_of_a_prepared_group_written(gemm_static, target):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    Cs = views(C)
    Cs[20] = Cs[20].view()
    Cs[20].flags.writeable = False
    group = ttlc.PreparedGroup(Cs)
    for _ in range(2):  # (also once the group's tables exist)
        with pytest.raises(ttlc.KernelError, match="write to a read-only array") as info:
            gemm_static(*prepared(A, B), group, grid=(COUNT,))
        if target == "cpu":
            assert "argument 2, %C, member 20, is not writeable" in str(info.value)
            assert (C == 7).all()
    # the group is read-only for kernels that write it, fine for one that reads it
    C[...] = 7  # (the interpreter wrote the members before member 20)
    D = np.asfortranarray(np.zeros((4, 4, COUNT), np.float32))
    gemm_static(group, *prepared(B, D), grid=(COUNT,))
    np.testing.assert_array_equal(D, np.einsum("ikb,kjb->ijb", np.full((4, 4, COUNT), 7.0), B))


def test_writeability_is_read_when_preparing(gemm_static):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    Cs = views(C)
    group = ttlc.PreparedGroup(Cs)
    Cs[5].flags.writeable = False  # after preparing: the group's own view stays writeable
    gemm_static(*prepared(A, B), group, grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))


ALIGNED = GEMM_STATIC.replace("%A: group<memref<f32x4x4>x?>",
                              "%A: group<memref<f32x4x4>x?> {alignment=64}")


@pytest.mark.parametrize("kind", ["dtype", "size", "stride", "negative"])
def test_bad_member_of_a_prepared_group_is_named(gemm_static, kind):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    As = views(A)
    As[9], exc, what = _bad_member(kind, A, 9)
    group = ttlc.PreparedGroup(As)
    for _ in range(2):  # every launch: a group that fails is not remembered as valid
        with pytest.raises(exc) as info:
            gemm_static(group, *prepared(B, C), grid=(COUNT,))
        assert f"argument 0 (%A) of @gemm, member 9: {what}" in str(info.value)
    assert (C == 7).all()


def test_one_prepared_group_for_kernels_of_other_types():
    """Checked per parameter type: valid for one kernel, refused by another."""
    plain = compile_for_target(GEMM_STATIC)["gemm"]
    aligned = compile_for_target(ALIGNED, filename="aligned.ir")["gemm"]
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    raw = np.zeros(16 * COUNT + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + 4  # every member 16 bytes past a 64-byte boundary
    A_odd = raw[start:start + 16 * COUNT].reshape((4, 4, COUNT), order="F")
    A_odd[...] = A
    group, Bs, Cs = ttlc.PreparedGroup(views(A_odd)), *prepared(B, C)
    plain(group, Bs, Cs, grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))
    C[...] = 7
    for _ in range(2):
        with pytest.raises(ValueError, match=r"argument 0 \(%A\) of @gemm, member 0: base "
                                             r"address 0x[0-9a-f]+ is not aligned to 64 bytes"):
            aligned(group, Bs, Cs, grid=(COUNT,))
    assert (C == 7).all()
    plain(group, Bs, Cs, grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))


def test_member_count_and_offset_of_a_prepared_group():
    three = compile_for_target(GEMM_THREE)["gemm"]
    A = F((4, 4, 4), 1)
    with pytest.raises(ValueError, match=r"argument 1 \(%B\) of @gemm: expected 3 members "
                                         r"for group<memref<f32x4x4>x3>, got 4"):
        three(ttlc.PreparedGroup(views(A)[:3]), ttlc.PreparedGroup(views(A)), views(A)[:3],
              grid=(3,))
    static = compile_for_target("func @o(%g: group<memref<f32x4>x?, offset: 2>) {}")["o"]
    static(ttlc.PreparedGroup([np.zeros(6, np.float32)]), grid=(1,))
    with pytest.raises(ValueError, match=r"argument 0 \(%g\) of @o: .* has the static offset "
                                         "2, got offset 1"):
        static(ttlc.PreparedGroup([np.zeros(6, np.float32)], offset=1), grid=(1,))


@pytest.mark.parametrize("arrays, options, exc, message", [
    (["text"], {}, TypeError, "ttlc.PreparedGroup, member 0: expected an array (NumPy, DLPack "
                              "or buffer protocol), got str"),
    (np.zeros((4, 4, 2)), {}, TypeError, "ttlc.PreparedGroup: the members of the group must be "
                                         "given as a list of arrays, got ndarray"),
    ([np.zeros(4)], {"offset": -1}, ValueError, "the group offset must not be negative, got -1"),
    ([np.zeros(4)], {"offset": 1.5}, TypeError, "the group offset must be an integer, got float"),
    ([np.zeros(4)] * 2, {"shapes": [(4,)]}, ValueError, "shapes must give one shape per member "
                                                        "(2 members)"),
    ([np.zeros(4)], {"shapes": [(2, -1)]}, ValueError, "ttlc.PreparedGroup, member 0: shape "
                                                       "(2, -1) has a negative size"),
    ([np.zeros(4)], {"shapes": [3]}, TypeError, "member 0: shape 3 must be a tuple of integers"),
])
def test_errors_when_preparing(arrays, options, exc, message):
    with pytest.raises(exc) as info:
        ttlc.PreparedGroup(arrays, **options)
    assert message in str(info.value)


# out_k := A_k[0, 0]
FIRST = """
func @first(%A: group<memref<f32x4x4>x?>, %out: memref<f32x?>) {
    %k = group_id.x : index
    %a = load %A[%k] : memref<f32x4x4>
    %z = constant 0 : index
    %v = load %a[%z, %z] : f32
    store %v, %out[%k]
}
"""


def test_null_member_of_a_prepared_group():
    A = F((4, 4, 5), 1)
    As = views(A)
    out = np.zeros(5, np.float32)
    compile_for_target(FIRST)["first"](ttlc.PreparedGroup(As), out, grid=(5,))
    np.testing.assert_array_equal(out, A[0, 0, :])
    As[3] = None  # a null memref: access through it is an error in checked code
    checked = compile_for_target(FIRST, checked=True)["first"]
    with pytest.raises(ttlc.KernelError, match=r"group \(3, 0, 0\): access through a null "
                                               "memref"):
        checked(ttlc.PreparedGroup(As), out, grid=(5,))


def test_null_and_empty_groups_next_to_prepared_ones(gemm):
    """Null groups and empty prepared ones pass the argument checks (only the accesses
    to their members are findings)."""
    checked = compile_for_target(GEMM, checked=True)["gemm"]
    for args in ((None, None, None), (ttlc.PreparedGroup([]), [], None),
                 (ttlc.PreparedGroup([]), [], [])):
        with pytest.raises(ttlc.KernelError, match="out of bounds|null"):
            checked(*args, grid=(1,))


class Producer:
    """A DLPack producer whose memory can be replaced, as torch's ``resize_`` does; it
    counts its exports."""

    def __init__(self, array):
        self.array, self.exports = array, 0

    def __dlpack__(self, **kwargs):
        self.exports += 1
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_reallocated_dlpack_member_is_refused(gemm_static):
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    As = [Producer(a) for a in views(A)]
    group = ttlc.PreparedGroup(As)
    gemm_static(group, *prepared(B, C), grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))
    C[...] = 7
    As[11].array = A[:, :, 11].copy(order="F")  # the producer's memory moved
    for _ in range(2):
        with pytest.raises(ValueError, match=r"argument 0 \(%A\) of @gemm, member 11: the "
                                             r"Producer's data moved from 0x[0-9a-f]+ to "
                                             r"0x[0-9a-f]+ since the group was prepared"):
            gemm_static(group, *prepared(B, C), grid=(COUNT,))
    assert (C == 7).all()
    gemm_static(ttlc.PreparedGroup(As), *prepared(B, C), grid=(COUNT,))  # prepared again
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))


def test_resized_torch_tensor_member_is_refused(gemm_static):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the bench extra)")
    A, B = F((4, 4, COUNT), 1), F((4, 4, COUNT), 2)
    # column-major tensors whose storage torch owns (it may reallocate it)
    tensors = [torch.from_numpy(np.ascontiguousarray(A[:, :, i].T)).clone().T
               for i in range(COUNT)]
    C = np.asfortranarray(np.full((4, 4, COUNT), 7, np.float32))
    group = ttlc.PreparedGroup(tensors)
    gemm_static(group, *prepared(B, C), grid=(COUNT,))
    np.testing.assert_array_equal(C, np.einsum("ikb,kjb->ijb", A.astype(np.float64), B))
    C[...] = 7
    tensors[30].resize_(64, 64)  # frees the memory the group's view of member 30 pointed to
    with pytest.raises(ValueError, match=r"argument 0 \(%A\) of @gemm, member 30: the Tensor's "
                                         "data moved"):
        gemm_static(group, *prepared(B, C), grid=(COUNT,))
    assert (C == 7).all()
