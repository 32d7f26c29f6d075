"""The integer and accumulation rules (ttlc.ir.numerics) against references written
independently: C's truncating division from Python's ``math`` on exact integers,
wrap-around and shifts from NumPy's fixed-width arithmetic.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from ttlc.ir.numerics import accumulate_type, c_divmod, fold_int, shift_amount, wrap
from ttlc.ir.types import BF16, C32, C64, F16, F32, F64, I8, I16, I32, I64, INDEX

DTYPES = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
EDGES = {bits: [-(1 << (bits - 1)), -(1 << (bits - 1)) + 1, -7, -2, -1, 0, 1, 2, 3, 7,
                (1 << (bits - 1)) - 1] for bits in DTYPES}


def c_reference(a: int, b: int):
    """C99: a / b truncates toward zero and (a / b) * b + a % b == a; b == 0 gives 0, 0."""
    if b == 0:
        return 0, 0
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return q, a - q * b


def test_c_divmod_of_python_ints_is_c_division():
    values = range(-40, 41)
    for a, b in itertools.product(values, values):
        assert c_divmod(a, b) == c_reference(a, b), (a, b)
        if b:  # C's fmod and trunc agree on exact integers
            assert c_divmod(a, b) == (math.trunc(a / b), int(math.fmod(a, b))), (a, b)


def test_c_divmod_of_negative_numbers():
    assert c_divmod(-7, 2) == (-3, -1)
    assert c_divmod(7, -2) == (-3, 1)
    assert c_divmod(-7, -2) == (3, -1)
    assert c_divmod(1, -100) == (0, 1)
    assert c_divmod(-(2 ** 70), 3) == (-(2 ** 70 // 3), -(2 ** 70 % 3))
    assert c_divmod(5, 0) == (0, 0)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_c_divmod_of_arrays_matches_python_ints(bits):
    """Elementwise on NumPy arrays, in their width: the exact result wrapped."""
    dtype = DTYPES[bits]
    pairs = list(itertools.product(EDGES[bits], repeat=2))
    a = np.array([p[0] for p in pairs], dtype=dtype)
    b = np.array([p[1] for p in pairs], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the minimum divided by -1 overflows
        q, r = c_divmod(a, b)
    for k, (x, y) in enumerate(pairs):
        eq, er = c_reference(x, y)
        assert (int(q[k]), int(r[k])) == (wrap(eq, bits), wrap(er, bits)), (x, y)


def test_c_divmod_of_every_i8_pair():
    a, b = (x.ravel() for x in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q, r = c_divmod(a.astype(np.int8), b.astype(np.int8))
    expected = np.array([[wrap(v, 8) for v in c_reference(int(x), int(y))]
                         for x, y in zip(a, b)])
    assert np.array_equal(np.stack([q, r], axis=1).astype(np.int64), expected)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_wrap_matches_numpy_casts(bits):
    big = [2 ** 63 + 5, -(2 ** 64) - 3, 2 ** 100 + 12345, 255, 128, -129, 3 * 2 ** bits + 1]
    for x in big + EDGES[bits]:
        expected = int(np.array(x % 2 ** 64, dtype=np.uint64).astype(DTYPES[bits]))
        assert wrap(x, bits) == expected, x


def test_a_one_bit_integer_is_a_bool():
    assert [wrap(x, 1) for x in (0, 1, 2, 3, -1)] == [0, 1, 0, 1, 1]


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_shifts_take_the_amount_modulo_the_width(bits):
    dtype = DTYPES[bits]
    amounts = [0, 1, 3, bits - 1, bits, bits + 1, 2 * bits + 3, -1]
    for a, c in itertools.product(EDGES[bits], amounts):
        amount = int(np.array(c, dtype=dtype)) & (bits - 1)  # OpenCL: modulo the width
        assert shift_amount(c, bits) == amount
        left = np.left_shift(np.array(a, dtype=dtype), np.array(amount, dtype=dtype))
        right = np.right_shift(np.array(a, dtype=dtype), np.array(amount, dtype=dtype))
        assert fold_int("shl", a, c, bits) == int(left), (a, c)
        assert fold_int("shr", a, c, bits) == int(right), (a, c)
    assert fold_int("shl", 1, bits, bits) == 1
    assert fold_int("shl", 1, bits - 1, bits) == -(1 << (bits - 1))


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_fold_int_matches_numpy_arithmetic(bits):
    dtype = DTYPES[bits]
    numpy_ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
                 "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
                 "xor": np.bitwise_xor}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for op, fn in numpy_ops.items():
            for a, c in itertools.product(EDGES[bits], repeat=2):
                expected = int(fn(np.array(a, dtype=dtype), np.array(c, dtype=dtype)))
                assert fold_int(op, a, c, bits) == expected, (op, a, c)
    for a, c in itertools.product(EDGES[bits], repeat=2):
        q, r = c_reference(a, c)
        assert fold_int("div", a, c, bits) == wrap(q, bits)
        assert fold_int("rem", a, c, bits) == wrap(r, bits)
    assert fold_int("cast", 1, 2, bits) is None


def test_sixteen_bit_floats_accumulate_in_f32():
    assert accumulate_type(F16) == F32
    assert accumulate_type(BF16) == F32
    for t in (F32, F64, C32, C64, I8, I16, I32, I64, INDEX):
        assert accumulate_type(t) == t
