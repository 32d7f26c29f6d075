"""Launch-time specialisation of kernels with dynamic sizes (``backends.cpu.specialize``)
and the static views it relies on (pass static-views): every launch computes what NumPy
computes, before and after the copy for its arrays exists, and the copy has the static
types the arrays give."""
from __future__ import annotations

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

from ttlc.backends.cpu import specialize  # noqa: E402
from ttlc.ir.types import MemrefType  # noqa: E402
from ttlc.testing.kernels import DYNAMIC_GEMM  # noqa: E402
from ttlc.target.config import observed_sizes  # noqa: E402

def _operands(rng, M, N, K, batch, dtype):
    A = np.asfortranarray(rng.standard_normal((M, K, batch)).astype(dtype))
    B = np.asfortranarray(rng.standard_normal((K, N, batch)).astype(dtype))
    return A, B, np.einsum("mkb,knb->mnb", A.astype(np.float64), B)


def _copies(kernel):
    return kernel._launch.copies


@pytest.fixture(autouse=True)
def _specialising(monkeypatch):
    monkeypatch.setenv("TTLC_SPECIALIZE", "1")


@pytest.mark.parametrize("t,M,N,K", [("f64", 56, 9, 56), ("f32", 9, 9, 56), ("f64", 17, 13, 11),
                                     ("f32", 1, 40, 7), ("f64", 35, 9, 35)])
def test_every_launch_matches_numpy_before_and_after_the_copy(t, M, N, K):
    kernel = ttlc.compile(DYNAMIC_GEMM.format(t=t), target="cpu")["gemm"]
    rng = np.random.default_rng(M * N * K)
    A, B, want = _operands(rng, M, N, K, 37, np.dtype(t.replace("f", "float")))
    for launch in range(specialize.SPECIALIZE_AFTER + 2):
        C = np.full((M, N, 37), np.nan, A.dtype, order="F")
        kernel(A, B, C, grid=(37,))
        np.testing.assert_allclose(C, want, rtol=1e-5 if t == "f32" else 1e-12,
                                   atol=1e-5 if t == "f32" else 1e-12)
        copies = _copies(kernel)
        assert len(copies.copies) == (launch + 1 >= specialize.SPECIALIZE_AFTER)
    (launcher,) = copies.copies.values()
    assert launcher is not None and not hasattr(launcher, "copies")  # no copies of copies
    # the copy's parameters: the sizes static, the batch too (37 <= SPECIALIZED_SIZE),
    # the strides those of the packed arrays
    (key,) = copies.copies
    assert key[0] == ((M, K, 37), (1, M, M * K))
    assert key[1] == ((K, N, 37), (1, K, K * N))


def test_the_copy_has_static_types_and_static_views():
    module = ttlc.compile(DYNAMIC_GEMM.format(t="f64"), target="cpu")
    kernel = module["gemm"]
    A, B, want = _operands(np.random.default_rng(1), 8, 8, 8, 500, np.float64)
    C = np.zeros((8, 8, 500), order="F")
    for _ in range(specialize.SPECIALIZE_AFTER):
        kernel(A, B, C, grid=(500,))
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)
    copies = _copies(kernel)
    (key,) = copies.copies
    # the batch of 500 stays dynamic; its stride is static
    assert key[0] == ((8, 8, None), (1, 8, 64))
    program = copies.program_for(key)
    element = module.program.functions[0].args[0].value.type.element
    assert [a.value.type for a in program.functions[0].args] == [
        MemrefType.get(element, (8, 8, None), (1, 8, 64))] * 3
    # a gemm alone does not observe its work-group: the copy's sizes are chosen for it
    assert not observed_sizes(program.functions[0])
    assert "work_group_size" not in program.functions[0].attrs
    lowered = str(ttlc.backends.cpu.module.lower(program))
    assert "subview %A[0:8,0:8,%i] : memref<f64x8x8>" in lowered, lowered


#: C_i = A_i B_i with the sizes given as index parameters, as a Fortran code passes them
SIZES_AS_PARAMETERS = """
func @gemm(%m: index, %n: index, %k: index, %A: memref<f64x?x?x?>, %B: memref<f64x?x?x?>,
           %C: memref<f64x?x?x?>) {
    %i = group_id.x : index
    %a = subview %A[0:%m,0:%k,%i] : memref<f64x?x?>
    %b = subview %B[0:%k,0:%n,%i] : memref<f64x?x?>
    %c = subview %C[0:%m,0:%n,%i] : memref<f64x?x?>
    %one = constant 1.0 : f64
    %zero = constant 0.0 : f64
    gemm %one, %a, %b, %zero, %c
}
"""


def test_sizes_given_as_parameters_are_constants_in_the_copy():
    """The index parameters that views take sizes from are part of the key: the copy
    has them as constants, so its views are static; other values get copies of their
    own (the views of a larger array: m = 4 of A's 6 rows)."""
    kernel = ttlc.compile(SIZES_AS_PARAMETERS, target="cpu")["gemm"]
    rng = np.random.default_rng(10)
    A, B, _ = _operands(rng, 6, 5, 3, 200, np.float64)
    for m in (6, 4):
        want = np.einsum("mkb,knb->mnb", A[:m], B)
        for _ in range(specialize.SPECIALIZE_AFTER + 1):
            C = np.zeros((6, 5, 200), order="F")
            kernel(m, 5, 3, A, B, C, grid=(200,))
            np.testing.assert_allclose(C[:m], want, rtol=1e-12, atol=1e-12)
            assert not C[m:].any()
    copies = _copies(kernel)
    assert sorted(k[3:] for k in copies.copies) == [(4, 5, 3), (6, 5, 3)]
    key = next(k for k in copies.copies if k[3] == 4)
    lowered = str(ttlc.backends.cpu.module.lower(copies.program_for(key)))
    assert "subview %A[0:4,0:3,%i] : memref<f64x4x3,strided<1,6>>" in lowered, lowered


def test_strided_arrays_get_copies_of_their_own():
    """Views with other strides (the first rows of a larger array) are a new key: the
    copy for packed arrays is never run on them."""
    kernel = ttlc.compile(DYNAMIC_GEMM.format(t="f64"), target="cpu")["gemm"]
    rng = np.random.default_rng(2)
    A, B, want = _operands(rng, 6, 5, 4, 20, np.float64)
    big = np.asfortranarray(rng.standard_normal((12, 4, 20)))
    As = big[:6]
    want_s = np.einsum("mkb,knb->mnb", As, B)
    for _ in range(specialize.SPECIALIZE_AFTER + 1):
        for a, w in ((A, want), (As, want_s)):
            C = np.zeros((6, 5, 20), order="F")
            kernel(a, B, C, grid=(20,))
            np.testing.assert_allclose(C, w, rtol=1e-12, atol=1e-12)
    keys = set(_copies(kernel).copies)
    assert {k[0][1] for k in keys} == {(1, 6, 24), (1, 12, 48)}


def test_results_that_depend_on_the_work_group_size_stay_as_they_were():
    """A kernel that writes the subgroup size and the work-group's size next to a gemm:
    the copy runs with the sizes the kernel was compiled with."""
    text = """
func @k(%A: memref<f32x?x?>, %B: memref<f32x?x?>, %C: memref<f32x?x?>, %s: memref<i32x2>) {
    %m = size %A[0] : index
    %k = size %A[1] : index
    %n = size %B[1] : index
    %a = subview %A[0:%m,0:%k] : memref<f32x?x?>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    gemm %one, %a, %B, %zero, %C
    %sgs = subgroup_size : i32
    %nsg = num_subgroups.x : i32
    %z = constant 0 : index
    %o = constant 1 : index
    store %sgs, %s[%z]
    store %nsg, %s[%o]
}
"""
    kernel = ttlc.compile(text, target="cpu")["k"]
    rng = np.random.default_rng(3)
    A = np.asfortranarray(rng.standard_normal((3, 2)).astype(np.float32))
    B = np.asfortranarray(rng.standard_normal((2, 5)).astype(np.float32))
    seen = []
    for _ in range(specialize.SPECIALIZE_AFTER + 1):
        C = np.zeros((3, 5), np.float32, order="F")
        s = np.zeros(2, np.int32)
        kernel(A, B, C, s)
        np.testing.assert_allclose(C, A @ B, rtol=1e-6)
        seen.append(tuple(s))
    assert len(_copies(kernel).copies) == 1
    assert len(set(seen)) == 1, seen


def test_a_copy_that_does_not_observe_its_sizes_chooses_them():
    """f32 1x40x7: the kernel as compiled runs subgroups of 16 lanes, a kernel compiled
    for these sizes 8 (one ymm register of the short K, ``config.narrow_lanes``); so does
    the copy, and it computes what NumPy computes."""
    module = ttlc.compile(DYNAMIC_GEMM.format(t="f32"), target="cpu")
    kernel = module["gemm"]
    A, B, want = _operands(np.random.default_rng(7), 1, 40, 7, 300, np.float32)
    for _ in range(specialize.SPECIALIZE_AFTER + 1):
        C = np.zeros((1, 40, 300), np.float32, order="F")
        kernel(A, B, C, grid=(300,))
        np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-5)
    copies = _copies(kernel)
    (key,) = copies.copies
    lower = ttlc.backends.cpu.module.lower
    static = DYNAMIC_GEMM.format(t="f32")
    for name, sizes in (("A", "1x7"), ("B", "7x40"), ("C", "1x40")):
        static = static.replace(f"%{name}: memref<f32x?x?x?>", f"%{name}: memref<f32x{sizes}x?>")
    static = ttlc.check(static)
    sizes = lower(static).functions[0].attrs["subgroup_size"]
    assert lower(copies.program_for(key)).functions[0].attrs["subgroup_size"] == sizes
    assert lower(module.program).functions[0].attrs["subgroup_size"] != sizes


def test_key_parts_are_remembered_per_array_layout():
    """``Specializer.key`` computes a NumPy array's part once per (parameter, dtype,
    shape, byte strides): arrays of one layout share it, another dtype of the same shape
    and byte strides (int64 for f64) is its own layout and still refused by the kernel's
    own message, and the memory starts again after LAYOUTS layouts."""
    kernel = ttlc.compile(DYNAMIC_GEMM.format(t="f64"), target="cpu")["gemm"]
    rng = np.random.default_rng(3)
    A, B, want = _operands(rng, 5, 4, 3, 6, np.float64)
    A2, B2, want2 = _operands(rng, 5, 4, 3, 6, np.float64)
    for a, b, w in ((A, B, want), (A2, B2, want2)) * specialize.SPECIALIZE_AFTER:
        C = np.zeros((5, 4, 6), order="F")
        kernel(a, b, C, grid=(6,))
        np.testing.assert_allclose(C, w, rtol=1e-12, atol=1e-12)
    copies = _copies(kernel)
    assert len(copies.copies) == 1 and len(copies.layouts) == 3  # A, B and C
    ((sizes, strides), _, _), = copies.copies
    assert sizes == (5, 3, 6) and strides == (1, 5, 15)  # A: 5 x 3 x 6, column-major
    with pytest.raises(TypeError, match="dtype"):
        kernel(A.astype(np.int64), B, np.zeros((5, 4, 6), order="F"), grid=(6,))
    assert len(copies.layouts) == 4 and copies.layouts[(0, np.dtype(np.int64), A.shape,
                                                        A.strides)] is None
    for batch in range(1, specialize.LAYOUTS):
        copies.key((np.zeros((2, 2, batch), order="F"), B, C))
    assert len(copies.layouts) <= specialize.LAYOUTS


def test_arguments_that_are_no_arrays_of_the_order_run_the_kernel_as_compiled():
    kernel = ttlc.compile(DYNAMIC_GEMM.format(t="f64"), target="cpu")["gemm"]
    A, B, _ = _operands(np.random.default_rng(4), 4, 4, 4, 3, np.float64)
    for _ in range(specialize.SPECIALIZE_AFTER + 1):
        with pytest.raises(ValueError, match="order 3"):
            kernel(A[:, :, 0], B, np.zeros((4, 4, 3), order="F"), grid=(3,))
        with pytest.raises(TypeError, match="dtype"):
            kernel(A.astype(np.float32), B, np.zeros((4, 4, 3), order="F"), grid=(3,))
    assert not _copies(kernel).copies


def test_static_sizes_and_strides_are_checked_as_declared_after_the_copy():
    """An array whose static size or stride differs from the declared type is refused
    with the kernel's own message, never run by a copy made for arrays that fit."""
    kernel = ttlc.compile("""
func @g(%A: memref<f64x?x4,strided<1,8>>, %B: memref<f64x4x?>, %C: memref<f64x?x?>) {
    %one = constant 1.0 : f64
    %zero = constant 0.0 : f64
    gemm %one, %A, %B, %zero, %C
}""", target="cpu")["g"]
    rng = np.random.default_rng(8)
    A = np.asfortranarray(rng.standard_normal((8, 4)))[:3]  # stride 8 between columns
    B = np.asfortranarray(rng.standard_normal((4, 5)))
    for _ in range(specialize.SPECIALIZE_AFTER + 1):
        C = np.zeros((3, 5), order="F")
        kernel(A, B, C)
        np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)
    assert len(_copies(kernel).copies) == 1
    with pytest.raises(ValueError, match=r"mode 1 must have stride 8 elements for "
                                         r"memref<f64x\?x4,strided<1,8>>"):
        kernel(np.asfortranarray(A), B, np.zeros((3, 5), order="F"))
    wide = np.asfortranarray(rng.standard_normal((8, 5)))[:3]
    with pytest.raises(ValueError, match=r"mode 1 must have size 4 for memref<f64x\?x4"):
        kernel(wide, B, np.zeros((3, 5), order="F"))
    assert len(_copies(kernel).copies) == 1


def test_modes_of_one_entry_keep_dynamic_strides():
    """A mode of one entry addresses nothing, and the packed stride NumPy's layout gives
    it (8 here, after the 1 x 8 of mode 1) would break the order of the declared static
    strides around it: the copy keeps it dynamic, and is made."""
    kernel = ttlc.compile("""
func @k(%A: memref<f64x6x1x?x?,strided<1,8,?,8>>, %y: memref<f64x6>) {
    %z = constant 0 : index
    %a = subview %A[0:6,%z,%z,%z] : memref<f64x6>
    %one = constant 1.0 : f64
    axpby %one, %a, %one, %y
}""", target="cpu")["k"]
    memory = np.arange(16, dtype=np.float64)
    A = np.lib.stride_tricks.as_strided(memory, shape=(6, 1, 1, 2), strides=(8, 64, 48, 64))
    y = np.zeros(6)
    for _ in range(specialize.SPECIALIZE_AFTER):
        kernel(A, y)
    np.testing.assert_array_equal(y, specialize.SPECIALIZE_AFTER * memory[:6])
    (launcher,) = _copies(kernel).copies.values()
    assert launcher is not None


def test_at_most_max_variants_copies():
    kernel = ttlc.compile(DYNAMIC_GEMM.format(t="f32"), target="cpu")["gemm"]
    rng = np.random.default_rng(5)
    for M in range(1, specialize.MAX_VARIANTS + 3):
        A, B, want = _operands(rng, M, 2, 3, 4, np.float32)
        for _ in range(specialize.SPECIALIZE_AFTER):
            C = np.zeros((M, 2, 4), np.float32, order="F")
            kernel(A, B, C, grid=(4,))
            np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-5)
    assert len(_copies(kernel).copies) == specialize.MAX_VARIANTS


def test_large_sizes_static_kernels_checked_kernels_and_the_switch_are_not_specialised(
        monkeypatch):
    big = specialize.SPECIALIZED_SIZE + 1
    kernel = ttlc.compile("""
func @gemm(%A: memref<f32x?x?>, %B: memref<f32x?x?>, %C: memref<f32x?x?>) {
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    gemm %one, %A, %B, %zero, %C
}""", target="cpu")["gemm"]
    rng = np.random.default_rng(6)
    A, B = (np.asfortranarray(rng.standard_normal((big, big)).astype(np.float32))
            for _ in range(2))
    for _ in range(specialize.SPECIALIZE_AFTER):
        C = np.zeros((big, big), np.float32, order="F")
        kernel(A, B, C)
        np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    assert not _copies(kernel).copies
    static = ttlc.compile(DYNAMIC_GEMM.format(t="f32").replace("?x?x?", "2x2x1"),
                          target="cpu")["gemm"]
    static(*(np.zeros((2, 2, 1), np.float32, order="F") for _ in range(3)))
    assert not hasattr(static._launch, "copies")
    checked = ttlc.compile(DYNAMIC_GEMM.format(t="f32"), target="cpu", checked=True)["gemm"]
    checked(*(np.zeros((2, 2, 1), np.float32, order="F") for _ in range(3)))
    assert not hasattr(checked._launch, "copies")
    monkeypatch.setenv("TTLC_SPECIALIZE", "0")
    off = ttlc.compile(DYNAMIC_GEMM.format(t="f32"), target="cpu")["gemm"]
    off(*(np.zeros((2, 2, 1), np.float32, order="F") for _ in range(3)))
    assert not hasattr(off._launch, "copies")
