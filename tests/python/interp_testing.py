"""Helpers shared by the semantics tests (tests/python/test_interp_*.py).

Every test of those modules runs once per execution target (ids ``[interp]`` and
``[cpu]``): the ``target`` fixture (conftest.py) sets ``CURRENT_TARGET``, which
``compile_for_target`` and ``run`` use.  A test whose finding only the interpreter can
make is marked ``@pytest.mark.interp_only(reason=...)``, with
one of the reasons below.  Kernels run on column-major NumPy arrays; expected results
are computed here independently of ttlc (Python integers for integer arithmetic, float64
for floating point, NumPy for BLAS).
"""
from __future__ import annotations

import functools
import textwrap
from typing import Sequence

import ml_dtypes
import numpy as np

import ttlc

DTYPES = {
    "i8": np.dtype(np.int8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64), "index": np.dtype(np.int64),
    "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "c32": np.dtype(np.complex64), "c64": np.dtype(np.complex128),
}
INT_TYPES = ["i8", "i16", "i32", "i64", "index"]
FLOAT_TYPES = ["bf16", "f16", "f32", "f64"]
COMPLEX_TYPES = ["c32", "c64"]
NUMBER_TYPES = INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}
COMPONENT = {"c32": "f32", "c64": "f64"}
#: machine epsilon per floating type (for tolerances)
EPS = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10, "f32": 2.0 ** -23, "f64": 2.0 ** -52,
       "c32": 2.0 ** -23, "c64": 2.0 ** -52}


#: the targets every test runs on, and the one the running test uses (set by the fixture)
TARGETS = ("interp", "cpu")
CURRENT_TARGET = "interp"
#: why a checked-mode test runs on the interpreter only (``@pytest.mark.interp_only(...)``)
UNCHECKED_OUT_OF_BOUNDS = ("an out-of-bounds access without checks is undefined behaviour on "
                           "target cpu (as in C); only the interpreter's memory traps it")


#: grids no target launches, and what the ValueError says (item 4 of the checked-mode
#: contract: positive sizes within the target's limit, never a struct error, a launch of
#: no work-group or one that cannot finish)
BAD_GRIDS = [(0, "grid mode x is 0: each grid size must be a positive integer"),
             ((1, 0, 1), "grid mode y is 0: each grid size must be a positive integer"),
             ((1, 1, 0), "grid mode z is 0: each grid size must be a positive integer"),
             (2**63, "grid mode x is 9\\d+: .* limit of 2147483647"),
             ((2**62, 4), "grid mode x is 4\\d+: .* limit of 2147483647"),
             ((2**32, 2**32), "grid mode x is 4\\d+: .* limit of 2147483647")]


@functools.lru_cache(maxsize=None)
def opencl_problem():
    """Why target opencl cannot run kernels here (None: it can), for skip reasons."""
    try:
        from ttlc.backends.opencl import device
    except ImportError as e:
        return f"pyopencl is not installed ({e}); pip install -e '.[opencl]'"
    found, why = device.find()
    return None if found is not None else why


def cannot_run(target: str):
    """Why a test of test_interp_*.py cannot run on `target` here (None: it can): target
    opencl needs PyOpenCL and a device; target cuda runs on the fake driver of
    cuda_testing.py, which needs cuda-python's bindings."""
    if target == "opencl":
        return opencl_problem()
    if target == "cuda":
        try:
            import cuda.bindings.driver  # noqa: F401
        except ImportError as e:
            return f"cuda-python is not installed ({e}); pip install -e '.[cuda]'"
    return None


@functools.lru_cache(maxsize=None)
def _compile(src: str, target: str, checked: bool, filename: str):
    return ttlc.compile(textwrap.dedent(src), target=target, checked=checked, filename=filename)


def compile_for_target(src: str, checked: bool = False, filename: str = "<input>"):
    """src compiled for the current test's target (cached)."""
    return _compile(src, CURRENT_TARGET, checked, filename)


def run(src: str, *args, grid=(1, 1, 1), kernel: str | None = None, checked: bool = False):
    """Compile src for the current target and run one of its kernels (default: the first)."""
    module = compile_for_target(src, checked)
    name = kernel or next(iter(module))
    module[name](*args, grid=grid)


def farray(x, dtype) -> np.ndarray:
    """A column-major array of the given dtype (order 0 stays order 0, unlike
    np.asfortranarray, which returns shape (1,))."""
    x = np.asarray(x, dtype=dtype)
    return x.copy() if x.ndim == 0 else np.asfortranarray(x)


def wrap(v: int, bits: int) -> int:
    """Two's complement wrap-around of a Python integer to the given width."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def int_min(ty: str) -> int:
    return -(1 << (BITS[ty] - 1))


def int_max(ty: str) -> int:
    return (1 << (BITS[ty] - 1)) - 1


def interesting_ints(ty: str) -> list:
    lo, hi = int_min(ty), int_max(ty)
    vals = [0, 1, -1, 2, -2, 3, -3, 5, 7, -7, 100, -100, hi, lo, hi - 1, lo + 1,
            1 << (BITS[ty] - 2), -(1 << (BITS[ty] - 2)) - 3]
    return [v for v in dict.fromkeys(vals) if lo <= v <= hi]


INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 1.5, -2.25, 3.0, 0.1, -7.75, 1e3, -1e4, 6e4,
                      1e-5, float("inf"), float("-inf"), float("nan")]


def as_f64(x) -> np.ndarray:
    """Any real or bf16 array as float64 (for comparisons)."""
    return np.asarray(x).astype(np.float64)


def assert_same(got, expected, ty: str | None = None, rtol: float = 0.0, atol: float = 0.0):
    """Exact (or tolerant) equality with NaN == NaN; bf16/f16 compared as float64."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.dtype.kind == "c" or expected.dtype.kind == "c":
        got, expected = got.astype(np.complex128), expected.astype(np.complex128)
    elif got.dtype.kind in "fV" or got.dtype.name == "bfloat16" or expected.dtype.name == "bfloat16":
        got, expected = as_f64(got), as_f64(expected)
    if rtol or atol:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def elementwise_kernel(body: str, params: str, mode: str, n_arg: str = "%a", attrs: str = "") -> str:
    """A kernel applying ``body`` (using the index %i) for every %i < size(n_arg).

    mode "uniform" runs the body in the collective region (a for loop: uniform values);
    mode "spmd" runs it in a foreach (varying values, 16 lanes per work-group, the last
    chunk partially masked)."""
    body = textwrap.indent(textwrap.dedent(body).strip(), " " * 8)
    if mode == "uniform":
        loop = f"    for %i = %c0, %n {{\n{body}\n    }}"
    else:
        loop = f"    foreach (%i) = (%c0), (%n) {{\n{body}\n    }}"
    attr = f" attributes {{{attrs}}}" if attrs else ""
    return (f"func @k({params}){attr} {{\n    %c0 = constant 0 : index\n"
            f"    %n = size {n_arg}[0] : index\n{loop}\n}}\n")


MODES = ["uniform", "spmd"]


def bool_to_i8(cond: str, out: str = "%r") -> str:
    """Instructions turning a bool value into an i8 0/1 value (bools cannot be stored)."""
    return (f"{out} = if {cond} -> (i8) {{\n    %t1 = constant 1 : i8\n    yield (%t1)\n}} "
            f"else {{\n    %t0 = constant 0 : i8\n    yield (%t0)\n}}")


def pairs(xs: Sequence, ys: Sequence):
    a = [x for x in xs for _ in ys]
    b = [y for _ in xs for y in ys]
    return a, b


class DLPackOnly:
    """Exposes only the DLPack protocol (like a tensor of another library)."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, *args, **kwargs):
        return self._arr.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()
