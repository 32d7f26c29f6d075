"""Semantics of scalar instructions on every target (interp, cpu), against NumPy/Python.

Arithmetic (binary and unary) for every allowed type, comparisons (incl. NaN), the cast
table, math functions, constants of every type, and the builtins.  Every scalar
instruction runs twice: with uniform values in the collective region (a ``for`` loop)
and with varying values in an SPMD region (``foreach``, partially masked last chunk).
Expected values are computed here, independently of ``ttlc.interp``: Python integers
wrapped to the type's width for integers, float64 rounded once to the type for floats.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from interp_testing import (BITS, COMPLEX_TYPES, COMPONENT, DTYPES, EPS, FLOAT_TYPES,
                            INT_TYPES, INTERESTING_FLOATS, MODES, NUMBER_TYPES, as_f64,
                            assert_same, bool_to_i8, elementwise_kernel, farray, int_max,
                            int_min, interesting_ints, pairs, run, wrap)

# expected values overflow to inf on purpose (e.g. 6e4 * 6e4 in f16)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def run_binary(op: str, ty: str, a, b, mode: str, rty: str | None = None) -> np.ndarray:
    rty = rty or ty
    src = elementwise_kernel(f"""
        %x = load %a[%i] : {ty}
        %y = load %b[%i] : {ty}
        %z = {op} %x, %y : {rty}
        store %z, %c[%i]
    """, f"%a: memref<{ty}x?>, %b: memref<{ty}x?>, %c: memref<{rty}x?>", mode)
    a, b = farray(a, DTYPES[ty]), farray(b, DTYPES[ty])
    c = np.zeros(len(a), DTYPES[rty])
    run(src, a, b, c)
    return c


def run_unary(op: str, ty: str, a, mode: str, rty: str | None = None) -> np.ndarray:
    rty = rty or ty
    src = elementwise_kernel(f"""
        %x = load %a[%i] : {ty}
        %z = {op} %x : {rty}
        store %z, %c[%i]
    """, f"%a: memref<{ty}x?>, %c: memref<{rty}x?>", mode)
    a = farray(a, DTYPES[ty])
    c = np.zeros(len(a), DTYPES[rty])
    run(src, a, c)
    return c


# ---- integer arithmetic -------------------------------------------------------------------
def c_div(a: int, b: int) -> int:
    """C division: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


INT_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": c_div,
    "rem": lambda a, b: a - c_div(a, b) * b,
    "max": max,
    "min": min,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", INT_TYPES)
@pytest.mark.parametrize("op", list(INT_BINARY))
def test_int_binary(op, ty, mode):
    vals = interesting_ints(ty)
    a, b = pairs(vals, vals)
    if op in ("div", "rem"):  # division by zero is undefined (checked mode reports it)
        a, b = zip(*[(x, y) for x, y in zip(a, b) if y != 0])
    got = run_binary(op, ty, a, b, mode)
    expected = [wrap(INT_BINARY[op](x, y), BITS[ty]) for x, y in zip(a, b)]
    assert got.tolist() == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", INT_TYPES)
def test_int_div_rem_edge_cases(ty, mode):
    """C semantics: truncation toward zero, rem has the sign of the dividend, and
    INT_MIN / -1 wraps to INT_MIN with remainder 0."""
    lo = int_min(ty)
    a = [7, -7, 7, -7, 1, -1, lo, lo, lo, lo + 1]
    b = [2, 2, -2, -2, 3, 3, -1, 1, lo, -1]
    assert run_binary("div", ty, a, b, mode).tolist() == [3, -3, -3, 3, 0, 0, lo, lo, 1, -(lo + 1)]
    assert run_binary("rem", ty, a, b, mode).tolist() == [1, -1, 1, -1, 1, -1, 0, 0, 0, 0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", INT_TYPES)
@pytest.mark.parametrize("op", ["shl", "shr"])
def test_int_shifts(op, ty, mode):
    """shl and shr (arithmetic) with the shift amount taken modulo the type's width.

    The reference leaves over-wide and negative shift amounts open (C and LLVM call them
    undefined/poison); ttlc defines them as OpenCL does: only the low log2(width) bits of
    the amount count, i.e. the amount is masked to width - 1."""
    w = BITS[ty]
    amounts = [0, 1, 2, 3, w - 2, w - 1, w, w + 1, w + 3, 2 * w - 1, -1, -w + 1, 100]
    amounts = [s for s in amounts if int_min(ty) <= s <= int_max(ty)]
    a, b = pairs(interesting_ints(ty), amounts)
    got = run_binary(op, ty, a, b, mode)
    if op == "shl":
        expected = [wrap(x << (s % w), w) for x, s in zip(a, b)]
    else:
        expected = [x >> (s % w) for x, s in zip(a, b)]  # Python >> is arithmetic
    assert got.tolist() == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", INT_TYPES)
@pytest.mark.parametrize("op", ["abs", "neg", "not"])
def test_int_unary(op, ty, mode):
    a = interesting_ints(ty)
    fn = {"abs": abs, "neg": lambda x: -x, "not": lambda x: ~x}[op]
    got = run_unary(op, ty, a, mode)
    assert got.tolist() == [wrap(fn(x), BITS[ty]) for x in a]  # abs/neg(INT_MIN) = INT_MIN


# ---- floating point arithmetic -------------------------------------------------------------
def typed(values, ty: str) -> np.ndarray:
    """Python numbers rounded to the type (the inputs are then exact in float64)."""
    return np.asarray(values, dtype=np.float64).astype(DTYPES[ty])


FLOAT_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "rem": np.fmod,  # C fmod: the result has the sign of the dividend
    # max/min ignore a NaN operand (IEEE maxNum/minNum, OpenCL fmax/fmin): ttlc's choice
    "max": np.fmax, "min": np.fmin,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", FLOAT_TYPES)
@pytest.mark.parametrize("op", list(FLOAT_BINARY))
def test_float_binary(op, ty, mode):
    """Correctly rounded: the exact float64 result (exact or rounded with more than
    2p+2 bits) rounded once to the type, incl. inf, NaN, signed zero and overflow."""
    a, b = pairs(INTERESTING_FLOATS, INTERESTING_FLOATS)
    a, b = typed(a, ty), typed(b, ty)
    got = run_binary(op, ty, a, b, mode)
    with np.errstate(all="ignore"):
        expected = FLOAT_BINARY[op](as_f64(a), as_f64(b)).astype(DTYPES[ty])
    assert_same(got, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", FLOAT_TYPES)
def test_float_signed_zero(ty, mode):
    a = typed([0.0, -0.0, -0.0, 1.0], ty)
    b = typed([-0.0, -0.0, 0.0, -1.0], ty)
    got = as_f64(run_binary("add", ty, a, b, mode))
    assert np.signbit(got).tolist() == [False, True, False, False]
    got = as_f64(run_unary("neg", ty, typed([0.0, -0.0], ty), mode))
    assert np.signbit(got).tolist() == [True, False]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", FLOAT_TYPES)
@pytest.mark.parametrize("op", ["abs", "neg"])
def test_float_unary(op, ty, mode):
    a = typed(INTERESTING_FLOATS, ty)
    got = run_unary(op, ty, a, mode)
    expected = (np.abs if op == "abs" else np.negative)(as_f64(a)).astype(DTYPES[ty])
    assert_same(got, expected)
    if op == "abs":
        assert not np.signbit(as_f64(got)[~np.isnan(as_f64(got))]).any()


# ---- complex arithmetic --------------------------------------------------------------------
COMPLEX_VALUES = [1 + 2j, -3.5 + 0.25j, 0.5 - 1j, 2j, -4 + 0j, 1e3 + 1e-3j, -0.125 - 8j, 3 + 3j]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", COMPLEX_TYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_complex_binary(op, ty, mode):
    a, b = pairs(COMPLEX_VALUES, COMPLEX_VALUES)
    a = np.asarray(a, DTYPES[ty])
    b = np.asarray(b, DTYPES[ty])
    got = run_binary(op, ty, a, b, mode)
    x, y = a.astype(np.complex128), b.astype(np.complex128)
    if op == "add":
        expected = [complex(p.real + q.real, p.imag + q.imag) for p, q in zip(x, y)]
    elif op == "sub":
        expected = [complex(p.real - q.real, p.imag - q.imag) for p, q in zip(x, y)]
    elif op == "mul":
        expected = [complex(p.real * q.real - p.imag * q.imag, p.real * q.imag + p.imag * q.real)
                    for p, q in zip(x, y)]
    else:
        d = [q.real ** 2 + q.imag ** 2 for q in y]
        expected = [complex((p.real * q.real + p.imag * q.imag) / n,
                            (p.imag * q.real - p.real * q.imag) / n) for p, q, n in zip(x, y, d)]
    expected = np.asarray(expected).astype(DTYPES[ty])
    if op in ("add", "sub"):
        assert_same(got, expected)
    else:
        # complex mul/div round more than once; compare componentwise relative to |result|
        err = np.abs(got.astype(np.complex128) - expected) / np.abs(expected)
        assert err.max() <= 4 * EPS[ty]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", COMPLEX_TYPES)
def test_complex_unary(ty, mode):
    a = np.asarray(COMPLEX_VALUES + [-0.0 + 0.0j, 3e-3 - 4e-3j], DTYPES[ty])
    x = a.astype(np.complex128)
    comp = COMPONENT[ty]
    # abs, im and re give the component type; neg and conj keep the complex type
    got = run_unary("abs", ty, a, mode, comp)
    assert got.dtype == DTYPES[comp]
    assert_same(got, np.hypot(x.real, x.imag).astype(DTYPES[comp]), rtol=2 * EPS[ty])
    assert_same(run_unary("re", ty, a, mode, comp), a.real)
    assert_same(run_unary("im", ty, a, mode, comp), a.imag)
    assert_same(run_unary("neg", ty, a, mode), np.asarray([complex(-z.real, -z.imag) for z in x], DTYPES[ty]))
    assert_same(run_unary("conj", ty, a, mode), np.asarray([complex(z.real, -z.imag) for z in x], DTYPES[ty]))


def test_complex_abs_is_correctly_rounded():
    """|x + iy| is the double nearest sqrt(x^2 + y^2) (computed in decimal here), on
    every target (the interpreter and cpu call C's hypot): NumPy's complex abs gives
    100.00499987500623 for |100 + 1i|, one ulp below it (a generated program's float
    rem turned that ulp into different results)."""
    from decimal import Decimal, getcontext

    values = [100 + 1j, 3.25 - 1j, 1e200 + 1e200j, -7 + 0.5j, 3 + 4j]
    getcontext().prec = 60
    want = np.asarray([float((Decimal(z.real) ** 2 + Decimal(z.imag) ** 2).sqrt())
                       for z in values])
    src = elementwise_kernel("""
        %x = load %a[%i] : c64
        %z = abs %x : f64
        store %z, %c[%i]
    """, "%a: memref<c64x?>, %c: memref<f64x?>", "spmd")
    got = np.zeros(len(values))
    run(src, np.asarray(values), got)
    np.testing.assert_array_equal(got, want)


# ---- boolean and/or/xor/not ----------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_bool_logic(mode):
    """and/or/xor on bool (from comparisons), turned into i8 through if/yield."""
    src = elementwise_kernel(f"""
        %x = load %a[%i] : i32
        %y = load %b[%i] : i32
        %zero = constant 0 : i32
        %p = not_equal %x, %zero : bool
        %q = not_equal %y, %zero : bool
        %and = and %p, %q : bool
        %or = or %p, %q : bool
        %xor = xor %p, %q : bool
        {bool_to_i8("%and", "%r0")}
        {bool_to_i8("%or", "%r1")}
        {bool_to_i8("%xor", "%r2")}
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        store %r0, %c[%i, %c0]
        store %r1, %c[%i, %c1]
        store %r2, %c[%i, %c2]
    """, "%a: memref<i32x?>, %b: memref<i32x?>, %c: memref<i8x?x3>", mode)
    a, b = pairs([0, 1, 0, 5] * 5, [0, 0, 1, 7])
    c = farray(np.full((len(a), 3), -1), np.int8)
    run(src, farray(a, np.int32), farray(b, np.int32), c)
    p, q = np.asarray(a) != 0, np.asarray(b) != 0
    assert c[:, 0].tolist() == (p & q).astype(int).tolist()
    assert c[:, 1].tolist() == (p | q).astype(int).tolist()
    assert c[:, 2].tolist() == (p ^ q).astype(int).tolist()


# ---- comparisons ---------------------------------------------------------------------------
COMPARISONS = {"equal": lambda x, y: x == y, "not_equal": lambda x, y: x != y,
               "greater_than": lambda x, y: x > y, "greater_than_equal": lambda x, y: x >= y,
               "less_than": lambda x, y: x < y, "less_than_equal": lambda x, y: x <= y}


def run_compare(op: str, ty: str, a, b, mode: str) -> list:
    src = elementwise_kernel(f"""
        %x = load %a[%i] : {ty}
        %y = load %b[%i] : {ty}
        %p = {op} %x, %y : bool
        {bool_to_i8("%p")}
        store %r, %c[%i]
    """, f"%a: memref<{ty}x?>, %b: memref<{ty}x?>, %c: memref<i8x?>", mode)
    c = np.full(len(a), -1, np.int8)
    run(src, farray(a, DTYPES[ty]), farray(b, DTYPES[ty]), c)
    return c.tolist()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", INT_TYPES + FLOAT_TYPES)
@pytest.mark.parametrize("op", list(COMPARISONS))
def test_compare(op, ty, mode):
    """Ordered comparisons: any comparison with NaN is false except not_equal."""
    if ty in INT_TYPES:
        a, b = pairs(interesting_ints(ty), interesting_ints(ty))
        expected = [int(COMPARISONS[op](x, y)) for x, y in zip(a, b)]
    else:
        a, b = pairs(INTERESTING_FLOATS, INTERESTING_FLOATS)
        a, b = typed(a, ty), typed(b, ty)
        expected = [int(COMPARISONS[op](float(x), float(y))) for x, y in zip(a, b)]
    assert run_compare(op, ty, a, b, mode) == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", COMPLEX_TYPES)
@pytest.mark.parametrize("op", ["equal", "not_equal"])
def test_compare_complex(op, ty, mode):
    vals = [1 + 2j, 1 - 2j, 2 + 1j, 0j, complex(float("nan"), 0.0)]
    a, b = pairs(vals, vals)
    expected = [int(COMPARISONS[op](x, y)) for x, y in zip(a, b)]
    assert run_compare(op, ty, a, b, mode) == expected


# ---- casts ---------------------------------------------------------------------------------
CAST_INPUTS = {
    "int": None,  # interesting_ints of the source type, plus rounding cases
    "float": [0.0, -0.0, 0.5, -0.5, 1.9, -1.9, 2.5, -2.5, 100.75, -100.75, 127.0, 128.0,
              -128.0, -129.0, 255.5, 300.0, 32767.0, 32768.0, -32769.0, 65504.0, 2049.0,
              16777217.0, 2147483520.0, 2147483648.0, -2147483904.0, 3e9, 1e10, -1e10,
              9.2233720368547758e18, -9.2233720368547758e18, 1e19, -1e19, 1e30, 3.4e38,
              1e300, float("inf"), float("-inf"), float("nan"), 1e-3, -1e-30],
}


def cast_inputs(src: str) -> list:
    if src in INT_TYPES:
        extra = [2049, -2049, 16777217, 65504, 65520, 100000, -100000, (1 << 53) + 1]
        return interesting_ints(src) + [v for v in extra if int_min(src) <= v <= int_max(src)]
    vals = typed(CAST_INPUTS["float"], src) if src in FLOAT_TYPES else None
    if src in FLOAT_TYPES:
        return list(vals)
    return [complex(v, w) for v, w in zip([1.5, -2.25, 1e3, 0.0, 1e10, 3.0],
                                          [0.5, -7.0, 0.0, -0.0, 1e-3, 1e38])]


def expected_cast(values, src: str, dst: str) -> np.ndarray:
    """The cast table, written out: int->int wraps; int->float rounds to nearest even;
    float->int truncates toward zero and saturates at the type's range, NaN gives 0
    (ttlc's documented choice; C leaves it undefined); float->float rounds to nearest even;
    int/float->complex puts the value in the real part; complex->complex rounds both parts."""
    out = DTYPES[dst]
    if src in INT_TYPES and dst in INT_TYPES:
        return np.asarray([wrap(int(v), BITS[dst]) for v in values], out)
    if dst in INT_TYPES:
        res = []
        for v in values:
            f = float(v)
            if math.isnan(f):
                res.append(0)
            elif f >= int_max(dst):
                res.append(int_max(dst))
            elif f <= int_min(dst):
                res.append(int_min(dst))
            else:
                res.append(math.trunc(f))
        return np.asarray(res, out)
    if src in INT_TYPES:
        # Python's int -> float is correctly rounded; all inputs but INT64_MAX (which is
        # 2^63 in every float type) are exact in float64, so rounding to dst happens once
        return np.asarray([float(v) for v in values], np.float64).astype(out)
    if src in FLOAT_TYPES:
        f = as_f64(np.asarray(values, DTYPES[src]))
        if dst in COMPLEX_TYPES:
            return (f + 0j).astype(out)
        return f.astype(out)
    return np.asarray(values, np.complex128).astype(out)


CASTS = [(s, d) for s in NUMBER_TYPES for d in NUMBER_TYPES
         if not (s in COMPLEX_TYPES and d not in COMPLEX_TYPES)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src,dst", CASTS)
def test_cast(src, dst, mode):
    values = cast_inputs(src)
    if src not in INT_TYPES:  # inputs rounded to the source type
        values = np.asarray(values, DTYPES[src])
    src_text = elementwise_kernel(f"""
        %x = load %a[%i] : {src}
        %z = cast %x : {dst}
        store %z, %c[%i]
    """, f"%a: memref<{src}x?>, %c: memref<{dst}x?>", mode)
    c = np.zeros(len(values), DTYPES[dst])
    run(src_text, farray(values, DTYPES[src]), c)
    expected = expected_cast(values, src, dst)
    assert_same(c, expected)


# ---- math functions ------------------------------------------------------------------------
MATH = {"cos": np.cos, "sin": np.sin, "exp": np.exp, "exp2": np.exp2, "log": np.log,
        "log2": np.log2}
MATH_INPUTS = {
    "cos": [0.0, 0.5, -1.25, 3.0, 10.0, -7.5, math.pi / 2],
    "sin": [0.0, 0.5, -1.25, 3.0, 10.0, -7.5, math.pi],
    "exp": [0.0, 1.0, -1.0, 2.5, -6.0, 10.0, 0.001],
    "exp2": [0.0, 1.0, -1.0, 2.5, -6.0, 10.0, 15.0],
    "log": [1.0, 2.0, 0.5, 10.0, 1000.0, 0.001, 0.0, -1.0, float("inf")],
    "log2": [1.0, 2.0, 0.5, 10.0, 1024.0, 0.001, 0.0, -1.0, float("inf")],
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", FLOAT_TYPES)
@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("fn", list(MATH))
def test_math_real(fn, native, ty, mode):
    """Math functions within a few ulps of float64 (native_*: implementation-defined
    error; the interpreter computes them exactly like the precise ones)."""
    x = typed(MATH_INPUTS[fn], ty)
    op = ("native_" if native else "") + fn
    got = run_unary(op, ty, x, mode)
    with np.errstate(all="ignore"):
        expected = MATH[fn](as_f64(x))
    # f16/bf16 are computed in f32 and rounded once: 1 ulp of the type
    assert_same(got, expected, rtol=2 * EPS[ty], atol=2 * EPS[ty])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", COMPLEX_TYPES)
@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("fn", ["exp", "exp2"])
def test_math_complex(fn, native, ty, mode):
    z = np.asarray([0j, 1 + 0j, 1j, -1 + 2j, 0.5 - 3j, 2.5 + 0.25j, -6 + 10j], DTYPES[ty])
    w = z.astype(np.complex128)
    if fn == "exp2":  # 2^z = e^(z ln 2) = 2^re (cos(im ln 2) + i sin(im ln 2))
        expected = [2.0 ** v.real * complex(math.cos(v.imag * math.log(2)), math.sin(v.imag * math.log(2)))
                    for v in w]
    else:
        expected = [math.exp(v.real) * complex(math.cos(v.imag), math.sin(v.imag)) for v in w]
    got = run_unary(("native_" if native else "") + fn, ty, z, mode)
    assert got.dtype == DTYPES[ty]
    err = np.abs(got.astype(np.complex128) - np.asarray(expected)) / np.abs(expected)
    assert err.max() <= 8 * EPS[ty]


# ---- constants -----------------------------------------------------------------------------
CONSTANTS = {
    "i8": [("-128", -128), ("127", 127), ("0", 0), ("-1", -1), ("+5", 5)],
    "i16": [("-32768", -32768), ("32767", 32767), ("-300", -300)],
    "i32": [("-2147483648", -2147483648), ("2147483647", 2147483647), ("42", 42)],
    "i64": [("-9223372036854775807", -9223372036854775807),
            ("9223372036854775807", 9223372036854775807), ("-7", -7)],
    "index": [("9223372036854775807", 9223372036854775807), ("-1", -1), ("12", 12)],
    "f16": [("1.5", 1.5), ("-0.0", -0.0), ("65504.0", 65504.0), ("0.1", 0.1), ("inf", math.inf),
            ("-inf", -math.inf), ("nan", math.nan), ("0x1.8p1", 3.0), ("1e-3", 1e-3)],
    "bf16": [("1.5", 1.5), ("-2.0e30", -2e30), ("0.1", 0.1), ("nan", math.nan),
             ("0x1p-10", 2.0 ** -10)],
    "f32": [("3.4028234663852886e38", 3.4028234663852886e38), ("-1.25e-3", -1.25e-3),
            ("1.4e-45", 1.4e-45), ("-inf", -math.inf), ("0x1.fffffep127", 3.4028234663852886e38),
            ("0.1", 0.1)],
    "f64": [("0.1", 0.1), ("1.7976931348623157e308", 1.7976931348623157e308),
            ("4.9e-324", 5e-324), ("-0x1.8p-3", -0.1875), ("nan", math.nan), ("+2.5", 2.5)],
    "c32": [("[1.5, -2.0]", 1.5 - 2j), ("[0.1, 1e10]", 0.1 + 1e10j), ("[-0.0, inf]", complex(-0.0, math.inf))],
    "c64": [("[1.5, -2.0]", 1.5 - 2j), ("[0.1, 1e300]", 0.1 + 1e300j), ("[0x1p-2, -3.0]", 0.25 - 3j)],
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ty", list(CONSTANTS))
def test_constants(ty, mode):
    """Each literal rounded once (from its decimal/hex value) to the type."""
    body = ["%c0 = constant 0 : index"]
    for k, (text, _) in enumerate(CONSTANTS[ty]):
        body += [f"%k{k} = constant {k} : index", f"%v{k} = constant {text} : {ty}",
                 f"store %v{k}, %c[%k{k}]"]
    body = "\n        ".join(body)
    region = f"parallel {{\n        {body}\n    }}" if mode == "spmd" else body
    src = f"func @k(%c: memref<{ty}x?>) {{\n    {region}\n}}\n"
    c = np.zeros(len(CONSTANTS[ty]), DTYPES[ty])
    run(src, c)
    expected = np.asarray([v for _, v in CONSTANTS[ty]], dtype=np.float64 if ty in FLOAT_TYPES else None)
    assert_same(c, expected.astype(DTYPES[ty]))
    if ty in FLOAT_TYPES:
        assert np.signbit(as_f64(c)).tolist() == np.signbit(as_f64(expected.astype(DTYPES[ty]))).tolist()


@pytest.mark.parametrize("mode", MODES)
def test_bool_constants(mode):
    src = f"""func @k(%c: memref<i8x2>) {{
        {"parallel {" if mode == "spmd" else ""}
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %t = constant true : bool
        %f = constant false : bool
        {bool_to_i8("%t", "%r0")}
        {bool_to_i8("%f", "%r1")}
        store %r0, %c[%c0]
        store %r1, %c[%c1]
        {"}" if mode == "spmd" else ""}
    }}"""
    c = np.full(2, -1, np.int8)
    run(src, c)
    assert c.tolist() == [1, 0]


# ---- builtins ------------------------------------------------------------------------------
def test_group_id_and_num_groups_3d_grid():
    """group_id.{x,y,z} runs over the 3-D grid exactly once each; num_groups is the grid."""
    src = """func @k(%out: memref<index x?x?x?x6>, %count: memref<i32x?x?x?>) {
        %gx = group_id.x : index
        %gy = group_id.y : index
        %gz = group_id.z : index
        %nx = num_groups.x : index
        %ny = num_groups.y : index
        %nz = num_groups.z : index
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        %c4 = constant 4 : index
        %c5 = constant 5 : index
        store %gx, %out[%gx, %gy, %gz, %c0]
        store %gy, %out[%gx, %gy, %gz, %c1]
        store %gz, %out[%gx, %gy, %gz, %c2]
        store %nx, %out[%gx, %gy, %gz, %c3]
        store %ny, %out[%gx, %gy, %gz, %c4]
        store %nz, %out[%gx, %gy, %gz, %c5]
        parallel {
            %one = constant 1 : i32
            %old = atomic_add %one, %count[%gx, %gy, %gz] : i32
        }
    }"""
    grid = (3, 2, 4)
    out = farray(np.full(grid + (6,), -1), np.int64)
    count = farray(np.zeros(grid), np.int32)
    run(src, out, count, grid=grid)
    ix, iy, iz = np.meshgrid(*map(np.arange, grid), indexing="ij")
    assert (out[..., 0] == ix).all() and (out[..., 1] == iy).all() and (out[..., 2] == iz).all()
    assert (out[..., 3] == 3).all() and (out[..., 4] == 2).all() and (out[..., 5] == 4).all()
    assert (count == 16).all()  # every work-item of every group (default [16, 1])


BUILTIN_KERNEL = """func @k(%out: memref<i32x?x8>, %counter: memref<i32>){attrs} {{
    %nsx = num_subgroups.x : i32
    %nsy = num_subgroups.y : i32
    %nsz = num_subgroups.z : i32
    %sgs = subgroup_size : i32
    parallel {{
        %one = constant 1 : i32
        %slot = atomic_add %one, %counter[] : i32
        %s = cast %slot : index
        %sx = subgroup_id.x : i32
        %sy = subgroup_id.y : i32
        %sz = subgroup_id.z : i32
        %lin = subgroup_linear_id : i32
        %loc = subgroup_local_id : i32
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        %c4 = constant 4 : index
        %c5 = constant 5 : index
        %c6 = constant 6 : index
        %c7 = constant 7 : index
        store %sx, %out[%s, %c0]
        store %sy, %out[%s, %c1]
        store %sz, %out[%s, %c2]
        store %lin, %out[%s, %c3]
        store %loc, %out[%s, %c4]
        store %nsx, %out[%s, %c5]
        store %nsy, %out[%s, %c6]
        store %sgs, %out[%s, %c7]
    }}
}}
"""


@pytest.mark.parametrize("attrs,sgs,wgs", [
    ("subgroup_size=16, work_group_size=[32,2]", 16, (32, 2)),
    ("subgroup_size=16, work_group_size=[16,3]", 16, (16, 3)),
    ("subgroup_size=8, work_group_size=[32,1]", 8, (32, 1)),
    ("work_group_size=[32,2]", 16, (32, 2)),  # subgroup size defaults to 16
    ("subgroup_size=32", 32, (32, 1)),   # work-group defaults to [subgroup_size, 1]
    ("", 16, (16, 1)),                   # defaults: subgroup 16, work-group [16, 1]
])
def test_subgroup_builtins(attrs, sgs, wgs):
    """Each work-item takes a unique slot (atomic counter) and writes its builtins; the set
    of rows must be exactly the work-group's (subgroup id, local id) pairs."""
    src = BUILTIN_KERNEL.format(attrs=f" attributes {{{attrs}}}" if attrs else "")
    W = wgs[0] * wgs[1]
    out = farray(np.full((W + 1, 8), -1), np.int32)
    counter = np.zeros((), np.int32)
    run(src, out, counter)
    assert int(counter) == W
    nsx, nsy = wgs[0] // sgs, wgs[1]
    rows = sorted(map(tuple, out[:W].tolist()))
    expected = sorted((x, y, 0, x + y * nsx, l, nsx, nsy, sgs)
                      for y in range(nsy) for x in range(nsx) for l in range(sgs))
    assert rows == expected
    assert (out[W] == -1).all()
