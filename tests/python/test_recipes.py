"""ttlc.recipes (spec: tensor-language.txt, gemm, subview, size, if): the generated kernels
against NumPy for every element type and transpose pair, on targets interp and cpu.

The expected results are computed by NumPy in f64/c128 from the same inputs; the
tolerances are those of each type's rounding over K products.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import ttlc
from interp_testing import opencl_problem
from ttlc.backends import BACKENDS

TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
         "f64": np.float64, "c32": np.complex64, "c64": np.complex128}
#: relative to the largest magnitude of the result
TOL = {"f16": 5e-3, "bf16": 3e-2, "f32": 1e-5, "f64": 1e-13, "c32": 1e-5, "c64": 1e-13}
TARGETS = ["interp", "cpu"]
TRANS = list(itertools.product("nt", "nt"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ttlc-cache"))


def random(rng, shape, t):
    x = rng.standard_normal(shape)
    if t.startswith("c"):
        x = x + 1j * rng.standard_normal(shape)
    return np.asfortranarray(x.astype(TYPES[t]))


def scalars(t):
    return (1.5 - 0.5j, 0.25 + 1j) if t.startswith("c") else (1.5, 0.25)


def wide(x):
    return np.asarray(x).astype(np.complex128)


def close(got, want, t):
    got, want = wide(got), wide(want)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= TOL[t] * scale, (
        f"{t}: max error {np.abs(got - want).max():.3g} past {TOL[t]:.0e} x {scale:.3g}")


def batched_reference(alpha, A, B, beta, C, ta, tb):
    a, b = wide(A), wide(B)
    a = a.transpose(1, 0, 2) if ta == "t" else a
    b = b.transpose(1, 0, 2) if tb == "t" else b
    return alpha * np.einsum("ikx,kjx->ijx", a, b) + beta * wide(C)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("ta,tb", TRANS, ids=["".join(x) for x in TRANS])
def test_small_gemm_batched(target, t, ta, tb):
    M, N, K, batch = 5, 4, 3, 6
    recipe = ttlc.recipes.small_gemm_batched(TYPES[t], ta, tb, M, N, K, target=target)
    rng = np.random.default_rng(len(t) + ord(ta) + 3 * ord(tb))
    A = random(rng, ((M, K) if ta == "n" else (K, M)) + (batch,), t)
    B = random(rng, ((K, N) if tb == "n" else (N, K)) + (batch,), t)
    C = random(rng, (M, N, batch), t)
    alpha, beta = scalars(t)
    want = batched_reference(alpha, A, B, beta, C, ta, tb)
    recipe(alpha, A, B, beta, C)
    close(C, want, t)
    # beta = 0 runs @gemm_beta0, which never reads C
    C[...] = np.nan
    recipe(alpha, A, B, 0, C)
    close(C, batched_reference(alpha, A, B, 0, np.zeros(C.shape), ta, tb), t)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", ["f32", "c64"])
def test_small_gemm_batched_any_strides(target, t):
    """Padded columns and batch entries (static strides) and strides from the arrays
    (DYNAMIC) compute the same as packed arrays."""
    M, N, K, batch = 6, 3, 5, 4
    rng = np.random.default_rng(7)
    storeA = random(rng, (9, M, batch + 3), t)   # A stored transposed: K x M, ld 9
    storeB = random(rng, (K, N, 2 * batch), t)   # every second entry
    storeC = random(rng, (8, N, batch), t)       # ld 8
    A, B, C = storeA[:K, :, :batch], storeB[:, :, ::2], storeC[:M]
    alpha, beta = scalars(t)
    want = batched_reference(alpha, A, B, beta, C, "t", "n")
    static = ttlc.recipes.small_gemm_batched(t, "t", "n", M, N, K, ldA=9, strideA=9 * M,
                                             strideB=2 * K * N, ldC=8, target=target)
    dynamic = ttlc.recipes.small_gemm_batched(
        t, "t", "n", M, N, K, ldA=ttlc.recipes.DYNAMIC, strideA=ttlc.recipes.DYNAMIC,
        strideB=ttlc.recipes.DYNAMIC, ldC=ttlc.recipes.DYNAMIC,
        strideC=ttlc.recipes.DYNAMIC, target=target)
    original, untouched = C.copy(), storeC[M:].copy()
    for recipe in (static, dynamic):
        C[...] = original
        recipe(alpha, A, B, beta, C)
        close(C, want, t)
    assert (storeC[M:] == untouched).all(), "rows past M of the padded C were written"


def tall_reference(alpha, A, B, beta, C):
    return alpha * wide(A) @ wide(B) + beta * wide(C)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("M,fixed", [(70, False), (64, True), (75, True)],
                         ids=["dynamic-remainder", "static-exact", "static-remainder"])
def test_tall_and_skinny(target, t, M, fixed):
    N, K, block = 3, 4, 16
    recipe = ttlc.recipes.tall_and_skinny(TYPES[t], block, N, K, M=M if fixed else None,
                                          target=target)
    assert recipe.grid(np.empty((M, N))) == (-(-M // block),)
    rng = np.random.default_rng(M + len(t))
    A, B, C = random(rng, (M, K), t), random(rng, (K, N), t), random(rng, (M, N), t)
    alpha, beta = scalars(t)
    want = tall_reference(alpha, A, B, beta, C)
    recipe(alpha, A, B, beta, C)
    close(C, want, t)
    C[...] = np.nan
    recipe(alpha, A, B, 0.0, C)
    close(C, tall_reference(alpha, A, B, 0, np.zeros(C.shape)), t)


@pytest.mark.parametrize("target", TARGETS)
def test_tall_and_skinny_leading_dimensions(target):
    M, N, K = 50, 2, 3
    rng = np.random.default_rng(3)
    A = random(rng, (64, K), "f64")[:M]
    B = random(rng, (K + 2, N), "f64")[:K]
    C = random(rng, (M + 1, N), "f64")[:M]
    want = tall_reference(2.0, A, B, 1.0, C)
    recipe = ttlc.recipes.tall_and_skinny("f64", 8, N, K, ldA=64, ldB=K + 2, target=target)
    recipe(2.0, A, B, 1.0, C)
    close(C, want, "f64")


def test_sizes_of_the_work_group_are_written_into_the_program():
    recipe = ttlc.recipes.small_gemm_batched("f32", "n", "n", 16, 16, 16, target="interp",
                                             work_group_size=(16, 2), subgroup_size=16)
    function = ttlc.parse(recipe.text).function("gemm")
    assert function.work_group_size == (16, 2) and function.subgroup_size == 16


EMITTING = [name for name, b in BACKENDS.items() if b.stages and not b.executes]


@pytest.mark.parametrize("make", ["small", "tall"])
@pytest.mark.parametrize("t", list(TYPES))
def test_recipes_for_the_emitting_targets(make, t):
    """A recipe for a target that does not run kernels here holds the target's output:
    every emitting target takes every type."""
    emitted = set()
    for target in EMITTING:
        recipe = (ttlc.recipes.small_gemm_batched(t, "t", "n", 8, 4, 3, target=target)
                  if make == "small" else ttlc.recipes.tall_and_skinny(t, 16, 4, 3,
                                                                       target=target))
        assert recipe.module is None and len(recipe.artifact) > 100
        assert recipe.artifact == BACKENDS[target].emit(ttlc.check(recipe.text, "<recipe>"))
        with pytest.raises(ValueError, match=f"target {target}, which does not run kernels"):
            recipe(1.0, np.zeros((8, 3, 1)), np.zeros((4, 3, 1)), 0.0, np.zeros((8, 4, 1)))
        emitted.add(target)
    assert emitted == set(EMITTING) and {"spirv", "xevm", "cuda-tile"} <= emitted


@pytest.mark.parametrize("call,message", [
    (lambda: ttlc.recipes.small_gemm_batched("i32", "n", "n", 2, 2, 2), "f16, bf16"),
    (lambda: ttlc.recipes.small_gemm_batched("f32", "x", "n", 2, 2, 2), "transA"),
    (lambda: ttlc.recipes.small_gemm_batched("f32", "n", "n", 0, 2, 2), "M must be"),
    (lambda: ttlc.recipes.small_gemm_batched("f32", "n", "n", 4, 2, 2, ldA=3), "ldA = 3"),
    (lambda: ttlc.recipes.small_gemm_batched("f32", "n", "n", 4, 2, 2, strideC=5),
     "strideC = 5"),
    (lambda: ttlc.recipes.tall_and_skinny("f32", 16, 2, 2, ldB="x"), "ldB must be"),
    (lambda: ttlc.recipes.tall_and_skinny("f32", 16, 2, 2, work_group_size=(0, 1)),
     "work_group_size"),
    (lambda: ttlc.recipes.tall_and_skinny("f32", 16, 2, 2, work_group_size=(8, 1, 1)),
     "two positive integers"),
    (lambda: ttlc.recipes.tall_and_skinny("f32", 16, 2, 2, subgroup_size=True),
     "subgroup_size must be"),
])
def test_bad_parameters_name_what_is_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_batches_of_different_sizes_are_refused():
    recipe = ttlc.recipes.small_gemm_batched("f32", "n", "n", 2, 2, 2, target="interp")
    A = np.zeros((2, 2, 3), np.float32, order="F")
    C = np.zeros((2, 2, 4), np.float32, order="F")
    with pytest.raises(ValueError, match=r"A \(3\), B \(3\), C \(4\) differ"):
        recipe(1.0, A, A, 0.0, C)


def test_an_empty_batch_launches_nothing():
    """A batch of no matrices is nothing to compute: the recipe returns without a launch
    (whose grid of 0 work-groups would be a ValueError)."""
    recipe = ttlc.recipes.small_gemm_batched("f32", "n", "n", 2, 2, 2, target="interp")
    A = np.zeros((2, 2, 0), np.float32, order="F")
    assert recipe.grid(A) == (0,)
    recipe(1.0, A, A, 0.0, A.copy(order="F"))
    with pytest.raises(ValueError, match="grid mode x is 0"):
        recipe.kernel(0)(1.0, A, A, 0.0, A.copy(order="F"), grid=recipe.grid(A))


OPENCL = opencl_problem()


needs_opencl = pytest.mark.skipif(OPENCL is not None,
                                  reason=f"target opencl cannot run: {OPENCL}")


@needs_opencl
@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("ta", ["n", "t"])
def test_recipes_on_opencl(t, ta):
    batched = ttlc.recipes.small_gemm_batched(t, ta, "n", 5, 4, 3, target="opencl")
    rng = np.random.default_rng(11)
    A = random(rng, ((5, 3) if ta == "n" else (3, 5)) + (6,), t)
    B, C = random(rng, (3, 4, 6), t), random(rng, (5, 4, 6), t)
    want = batched_reference(1.5, A, B, 0.25, C, ta, "n")
    batched(1.5, A, B, 0.25, C)
    close(C, want, t)
    tall = ttlc.recipes.tall_and_skinny(t, 16, 4, 3, M=64, target="opencl")
    A, B, C = random(rng, (64, 3), t), random(rng, (3, 4), t), random(rng, (64, 4), t)
    want = tall_reference(1.5, A, B, 0.25, C)
    tall(1.5, A, B, 0.25, C)
    close(C, want, t)


@needs_opencl
def test_tall_and_skinny_remainder_on_opencl():
    tall = ttlc.recipes.tall_and_skinny("f32", 16, 4, 3, target="opencl")
    rng = np.random.default_rng(12)
    A, B, C = random(rng, (70, 3), "f32"), random(rng, (3, 4), "f32"), random(rng, (70, 4), "f32")
    want = tall_reference(1.5, A, B, 0.25, C)
    tall(1.5, A, B, 0.25, C)
    close(C, want, "f32")
