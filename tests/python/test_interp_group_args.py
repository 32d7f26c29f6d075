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
    k = compile_for_target(GEMM)["gemm"]
    k([], [], [], grid=(0,))  # a group of no members is valid
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
