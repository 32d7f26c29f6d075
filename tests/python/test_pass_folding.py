"""constant-propagation and dead-code-elimination never change what a program computes.

Every program here runs on the interpreter before and after the passes; the results must
be identical (bit for bit, except that NaN equals any NaN), the optimised program must
verify and print as a fixed point, and where a fold is expected it must have happened
(the arithmetic is gone).  Covered: every arithmetic instruction on every type it allows
(wrap-around, C division, shift amounts modulo the width, fmin/fmax with NaN, bf16/f16
rounding, complex numbers), comparisons with NaN, the whole cast table (saturation of
float to integer, NaN to 0, rounding to bf16/f16), math functions, the algebraic
identities (safe ones with special inputs such as NaN, -0.0 and INT_MIN; unsafe ones
with ordinary inputs), builtins, size, loops, branches, coopmatrices, division by zero,
and random programs of ``ttlc.testing.generate`` (``TTLC_FOLD_SEEDS`` seeds, default 40).
"""
from __future__ import annotations

import math
import os
import re
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttlc
from ttlc.ir.constants import round_float
from ttlc.passes import PassContext, run_passes
from ttlc.testing import generate

from interp_testing import BITS, COMPONENT, DTYPES, INTERESTING_FLOATS, int_max, int_min

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BOTH = ("constant-propagation", "dead-code-elimination")
INT_TYPES = ["i8", "i16", "i32", "i64", "index"]
FLOAT_TYPES = ["bf16", "f16", "f32", "f64"]
COMPLEX_TYPES = ["c32", "c64"]
NUMBER_TYPES = INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES
INT_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "shl", "shr", "and", "or", "xor"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min"]
COMPLEX_BINARY = ["add", "sub", "mul", "div"]
COMPARISONS = ["equal", "not_equal", "greater_than", "greater_than_equal", "less_than",
               "less_than_equal"]
MATH = ["cos", "sin", "exp", "exp2", "log", "log2", "native_cos", "native_sin", "native_exp",
        "native_exp2", "native_log", "native_log2"]
MATH_COMPLEX = ["exp", "exp2", "native_exp", "native_exp2"]
ARITH = set(INT_BINARY + ["abs", "neg", "not", "conj", "im", "re", "cast"] + COMPARISONS + MATH)
INT64_MIN = -(2 ** 63)


# ---- running and comparing -----------------------------------------------------------------
def optimise(text: str, passes=BOTH, unsafe: bool = False) -> str:
    program = ttlc.check(text)
    run_passes(program, list(passes), PassContext(unsafe_fp_math=unsafe))
    out = str(program)
    ttlc.check(out)  # the result verifies
    assert str(ttlc.parse(out)) == out, "printing the optimised program is not a fixed point"
    return out


def outputs(text: str, make_args, grid=(1, 1, 1)) -> list:
    module = ttlc.compile(text, target="interp")
    args = make_args()
    module[next(iter(module))](*args, grid=grid)
    return [a for a in args if isinstance(a, np.ndarray)]


def _bits(x: np.ndarray):
    """(bit patterns, NaN mask) of an array, complex numbers as pairs of reals."""
    x = np.ascontiguousarray(x)
    if x.dtype.kind == "c":
        x = x.view(np.float32 if x.dtype == np.complex64 else np.float64)
    if x.dtype.kind in "iub":
        return x.view(f"u{x.dtype.itemsize}"), np.zeros(x.shape, bool)
    nan = np.isnan(x.astype(np.float64))
    return x.view(f"u{x.dtype.itemsize}"), nan


def _reals(x: np.ndarray) -> np.ndarray:
    """float64 values, complex numbers as pairs of reals (the layout of _bits)."""
    x = np.ascontiguousarray(x)
    if x.dtype.kind == "c":
        x = x.view(np.float32 if x.dtype == np.complex64 else np.float64)
    return x.astype(np.float64)


def assert_same(before: list, after: list, where: str = "", signed_zeros: bool = True) -> None:
    """Bit-identical, NaN equal to NaN (and -0.0 to 0.0 unless signed_zeros)."""
    assert len(before) == len(after)
    for k, (x, y) in enumerate(zip(before, after)):
        bx, nx = _bits(x)
        by, ny = _bits(y)
        differ = ~((bx == by) | (nx & ny))
        if not signed_zeros and x.dtype.kind not in "iub":
            differ &= ~(_reals(x) == _reals(y))
        if differ.any():
            i = np.argwhere(differ)[0]
            raise AssertionError(f"{where}output {k} differs at {tuple(i)}: before "
                                 f"{x.reshape(-1)[np.ravel_multi_index(tuple(i), x.shape)] if x.ndim else x}"
                                 f", after {y.reshape(-1)[np.ravel_multi_index(tuple(i), y.shape)] if y.ndim else y}")


def equivalent(text: str, make_args, passes=BOTH, unsafe: bool = False, grid=(1, 1, 1)):
    """Run before and after the passes; the results must agree (with -funsafe-fp-math, up
    to the sign of zeros). Returns (optimised text, results)."""
    before = outputs(text, make_args, grid)
    folded = optimise(text, passes, unsafe)
    after = outputs(folded, make_args, grid)
    assert_same(before, after, signed_zeros=not unsafe)
    return folded, before


def remaining(text: str, opcodes=ARITH) -> list:
    """Instructions with one of the opcodes left in a printed program."""
    return [l.strip() for l in text.splitlines()
            if re.match(r"\s*%[\w.]+ = (\w+)", l) and re.match(r"\s*%[\w.]+ = (\w+)", l).group(1)
            in opcodes]


# ---- literals ------------------------------------------------------------------------------
def flit(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x).hex()


def lit(v, ty: str) -> str:
    if ty == "bool":
        return "true" if v else "false"
    if ty in INT_TYPES:
        return str(int(v))
    if ty in COMPLEX_TYPES:
        return f"[{flit(v.real)},{flit(v.imag)}]"
    return flit(v)


def fits(x: float, ty: str) -> bool:
    """A finite literal must not overflow its type."""
    part = COMPONENT.get(ty, ty)
    vals = [x.real, x.imag] if isinstance(x, complex) else [x]
    return all(not math.isfinite(v) or math.isfinite(round_float(v, part)) for v in vals)


def int_values(ty: str) -> list:
    lo, hi = int_min(ty), int_max(ty)
    vals = [0, 1, -1, -3, 7, BITS[ty] - 1, BITS[ty], hi, lo, lo + 1]
    if ty in ("i64", "index"):
        lo = lo + 1  # -2^63 cannot be written as a constant
    return [v for v in dict.fromkeys(vals) if lo <= v <= hi]


FLOATS = [0.0, -0.0, 1.0, -2.75, 0.1, float("inf"), float("-inf"), float("nan")]
#: per type: a tiny (subnormal) value, a large one, values whose sums and products round
FLOAT_EXTRA = {"bf16": [2.0 ** -133, 3.3e38, 3 * 2 ** -8], "f16": [2.0 ** -24, 65504.0, 3 * 2 ** -11],
               "f32": [2.0 ** -149, 3.4e38, 1.0 + 2 ** -23], "f64": [5e-324, 1e300, 1.0 + 2 ** -52]}


def float_values(ty: str) -> list:
    return [x for x in FLOATS + FLOAT_EXTRA[ty] if fits(x, ty)]


def complex_values(ty: str) -> list:
    parts = [0.0, -0.0, 1.0, -2.5, 0.1, float("inf"), float("nan")]
    return [complex(a, b) for a in parts for b in parts][::6] + [complex(3, 2), complex(1, 5)]


def values(ty: str) -> list:
    if ty in INT_TYPES:
        return int_values(ty)
    if ty in FLOAT_TYPES:
        return float_values(ty)
    if ty == "bool":
        return [False, True]
    return complex_values(ty)


# ---- a kernel of constants stored into one output array per result type -----------------
class Kernel:
    """Builds ``func @k(%out_T: memref<Txn>, ...)`` storing every result it computes."""

    def __init__(self, attrs: str = ""):
        self.lines = []
        self.count = 0
        self.stored = {}  # type -> number of stores
        self.attrs = attrs
        self.index = {}
        self.params = []  # extra (name, type, array factory)

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def emit(self, expr: str, ty: str) -> str:
        name = self.fresh()
        self.lines.append(f"{name} = {expr} : {ty}")
        return name

    def const(self, value, ty: str) -> str:
        return self.emit(f"constant {lit(value, ty)}", ty)

    def idx(self, k: int) -> str:
        if k not in self.index:
            self.index[k] = self.emit(f"constant {k}", "index")
        return self.index[k]

    def store(self, value: str, ty: str) -> None:
        if ty == "bool":
            one, zero = self.fresh(), self.fresh()
            out = self.fresh()
            self.lines.append(f"{out} = if {value} -> (i8) {{\n    {one} = constant 1 : i8\n"
                              f"    yield ({one})\n}} else {{\n    {zero} = constant 0 : i8\n"
                              f"    yield ({zero})\n}}")
            value, ty = out, "i8"
        k = self.stored.get(ty, 0)
        self.stored[ty] = k + 1
        self.lines.append(f"store {value}, %out_{ty}[{self.idx(k)}]")

    def text(self) -> str:
        params = [f"%out_{ty}: memref<{ty}x{n}>" for ty, n in self.stored.items()]
        params += [f"{name}: {ty}" for name, ty, _ in self.params]
        attrs = f" attributes {{{self.attrs}}}" if self.attrs else ""
        body = textwrap.indent("\n".join(self.lines), "    ")
        return f"func @k({', '.join(params)}){attrs} {{\n{body}\n}}\n"

    def make_args(self):
        out = [np.zeros(n, DTYPES[ty]) for ty, n in self.stored.items()]
        return out + [f() for _, _, f in self.params]


def check_constants_fold(kernel: Kernel) -> str:
    """Before and after agree and no arithmetic is left (except results of -2^63)."""
    folded, before = equivalent(kernel.text(), kernel.make_args)
    left = remaining(folded)
    unwritable = sum(int(np.sum(a == INT64_MIN)) for a in before if a.dtype == np.int64)
    assert len(left) <= unwritable, f"not folded: {left[:5]}"
    return folded


# ---- constants through every instruction ----------------------------------------------------
def binary_ops(ty: str) -> list:
    if ty in INT_TYPES:
        return INT_BINARY
    if ty in FLOAT_TYPES:
        return FLOAT_BINARY
    return COMPLEX_BINARY


@pytest.mark.parametrize("ty", NUMBER_TYPES)
def test_binary_arithmetic_of_constants(ty):
    k = Kernel()
    vals = values(ty)
    consts = [k.const(v, ty) for v in vals]
    for op in binary_ops(ty):
        for x, a in zip(vals, consts):
            for y, b in zip(vals, consts):
                if op in ("div", "rem") and ty in INT_TYPES and y == 0:
                    continue  # a compile-time error (test_division_by_zero)
                k.store(k.emit(f"{op} {a}, {b}", ty), ty)
    check_constants_fold(k)


@pytest.mark.parametrize("ty", NUMBER_TYPES + ["bool"])
def test_unary_arithmetic_of_constants(ty):
    ops = {"bool": ["not"]}.get(ty, ["abs", "neg", "not"] if ty in INT_TYPES else
                                ["abs", "neg"] if ty in FLOAT_TYPES else
                                ["abs", "neg", "conj", "im", "re"])
    k = Kernel()
    for v in values(ty):
        c = k.const(v, ty)
        for op in ops:
            rty = COMPONENT[ty] if op in ("abs", "im", "re") and ty in COMPLEX_TYPES else ty
            k.store(k.emit(f"{op} {c}", rty), rty)
    check_constants_fold(k)


def test_boolean_arithmetic_of_constants():
    k = Kernel()
    for x in (False, True):
        for y in (False, True):
            a, b = k.const(x, "bool"), k.const(y, "bool")
            for op in ("and", "or", "xor"):
                k.store(k.emit(f"{op} {a}, {b}", "bool"), "bool")
    folded = check_constants_fold(k)
    assert "if" not in folded  # the branches on constant conditions went too


@pytest.mark.parametrize("ty", NUMBER_TYPES)
def test_comparisons_of_constants(ty):
    ops = ["equal", "not_equal"] if ty in COMPLEX_TYPES else COMPARISONS
    k = Kernel()
    vals = values(ty)
    if ty in INT_TYPES:
        vals = [0, 1, -1, int_max(ty), int_min(ty) + (ty in ("i64", "index"))]
    elif ty in FLOAT_TYPES:
        vals = [0.0, -0.0, 1.0, -2.75, float("inf"), float("-inf"), float("nan")]
    consts = [k.const(v, ty) for v in vals]
    for op in ops:
        for a in consts:
            for b in consts:
                k.store(k.emit(f"{op} {a}, {b}", "bool"), "bool")
    check_constants_fold(k)


def cast_values(ty: str) -> list:
    if ty in INT_TYPES:
        return int_values(ty) + [v for v in (255, 256, 257, 32768, 65535, 2 ** 24 + 1, 2 ** 31,
                                            2 ** 53 + 1, -(2 ** 31) - 1)
                                 if int_min(ty) <= v <= int_max(ty)]
    if ty in FLOAT_TYPES:
        extra = [300.5, -129.5, 127.9, -128.9, 2.5, -0.5, 0.99, 65535.5, 65536.0, 1e10, -1e10,
                 2.0 ** 31, -(2.0 ** 31) - 1e3, 2.0 ** 63, -(2.0 ** 63), 1e20, 1e-8,
                 1.0 + 2 ** -9, 1.0 + 3 * 2 ** -9]
        return [x for x in float_values(ty) + extra if fits(x, ty)]
    return complex_values(ty) + [complex(1e20, -1e-20), complex(70000.5, 1.0 + 2 ** -9)]


@pytest.mark.parametrize("src", NUMBER_TYPES)
def test_casts_of_constants(src):
    k = Kernel()
    for v in cast_values(src):
        c = k.const(v, src)
        for dst in NUMBER_TYPES:
            if src in COMPLEX_TYPES and dst not in COMPLEX_TYPES:
                continue
            k.store(k.emit(f"cast {c}", dst), dst)
    check_constants_fold(k)


@pytest.mark.parametrize("ty", FLOAT_TYPES + COMPLEX_TYPES)
def test_math_of_constants(ty):
    k = Kernel()
    vals = values(ty) + ([0.5, 2.0, 8.0, -0.5, 100.0, 1e4] if ty in FLOAT_TYPES else [])
    for v in vals:
        if not fits(v, ty):
            continue
        c = k.const(v, ty)
        for op in (MATH if ty in FLOAT_TYPES else MATH_COMPLEX):
            k.store(k.emit(f"{op} {c}", ty), ty)
    check_constants_fold(k)


def test_chains_fold_completely():
    """Results of folds feed further folds (bf16 rounding at every step)."""
    text = """
    func @k(%out: memref<bf16x4>, %o2: memref<i8x2>) {
        %a = constant 1.0 : bf16
        %b = constant 0x1.8p-7 : bf16
        %0 = add %a, %b : bf16
        %1 = add %0, %b : bf16
        %2 = mul %1, %1 : bf16
        %3 = sub %2, %a : bf16
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        store %0, %out[%c0]
        store %1, %out[%c1]
        store %2, %out[%c2]
        store %3, %out[%c3]
        %x = cast %3 : f32
        %y = constant 1000.0 : f32
        %z = mul %x, %y : f32
        %i = cast %z : i8
        %m = constant 100 : i8
        %j = add %i, %m : i8
        store %i, %o2[%c0]
        store %j, %o2[%c1]
    }
    """
    make = lambda: [np.zeros(4, DTYPES["bf16"]), np.zeros(2, np.int8)]  # noqa: E731
    folded, before = equivalent(text, make)
    assert not remaining(folded)
    assert before[0].astype(np.float64).tolist()[0] == 1.0 + 2 ** -6  # tie to even
    assert before[0].astype(np.float64).tolist() == [1.015625, 1.03125, 1.0625, 0.0625]
    assert before[1].tolist() == [62, -94]  # 62 + 100 wraps


# ---- identities with unknown operands ---------------------------------------------------------
def identity_constants(ty: str) -> list:
    if ty in INT_TYPES:
        return [0, 1, -1, 2, BITS[ty], BITS[ty] - 1, -BITS[ty], int_max(ty), int_min(ty) + 1]
    if ty in FLOAT_TYPES:
        return [0.0, -0.0, 1.0, -1.0, 2.0, float("inf"), float("nan")]
    return [0j, complex(-0.0, -0.0), complex(0.0, -0.0), 1 + 0j, complex(1, -0.0), -1 + 0j, 1j]


def identity_inputs(ty: str) -> list:
    if ty in INT_TYPES:
        return int_values(ty) + [int_min(ty)]
    if ty in FLOAT_TYPES:
        return [x for x in INTERESTING_FLOATS + [5e-324, 2.0 ** -140] if fits(x, ty)]
    parts = [0.0, -0.0, 1.5, -2.0, float("inf"), float("-inf"), float("nan")]
    return [complex(a, b) for a in parts for b in parts]


def identity_kernel(ty: str, xs: list, consts: list, ops: list):
    """For every x of xs (loaded: unknown to the passes) and constant c: x op c, c op x."""
    n = len(xs)
    lines, cnames, idx = [], [], {}
    for j, c in enumerate(consts):
        lines.append(f"%k{j} = constant {lit(c, ty)} : {ty}")
        cnames.append(f"%k{j}")
    body, m = [], 0
    for op in ops:
        for c, cn in zip(consts, cnames):
            for a, b in (("%x", cn), (cn, "%x")):
                if op in ("div", "rem") and ty in INT_TYPES and b == cn and c == 0:
                    continue  # a compile-time error
                body.append(f"%r{m} = {op} {a}, {b} : {ty}")
                body.append(f"store %r{m}, %out[%i, %j{m}]")
                m += 1
    for j in range(m):
        lines.append(f"%j{j} = constant {j} : index")
    text = (f"func @k(%X: memref<{ty}x{n}>, %out: memref<{ty}x{n}x{m}>) {{\n"
            + "".join(f"    {l}\n" for l in lines)
            + f"    %c0 = constant 0 : index\n    %n = constant {n} : index\n"
            + "    for %i = %c0, %n {\n"
            + f"        %x = load %X[%i] : {ty}\n"
            + "".join(f"        {l}\n" for l in body)
            + "    }\n}\n")
    dtype = DTYPES[ty]
    make = lambda: [np.array(xs, dtype=dtype), np.zeros((n, m), dtype=dtype, order="F")]  # noqa: E731
    return text, make


@pytest.mark.parametrize("ty", NUMBER_TYPES)
def test_safe_identities_keep_results(ty):
    """Identities applied without -funsafe-fp-math are exact for every input (NaN, -0.0,
    infinities, INT_MIN included)."""
    text, make = identity_kernel(ty, identity_inputs(ty), identity_constants(ty), binary_ops(ty))
    folded, _ = equivalent(text, make)
    if ty in INT_TYPES:
        # x+0, x*1, x*0, x/1, x rem 1, x shl bits, x and 0, x or 0, x xor 0, ... are gone
        for pattern in ("add %x, %k0 ", "mul %x, %k1 ", "mul %k0, %x", "div %x, %k1 ",
                        "rem %x, %k1 ", "shl %x, %k4 ", "shr %k0, %x", "and %x, %k0 ",
                        "or %k0, %x", "xor %x, %k0 "):
            assert pattern not in folded, pattern
        assert "neg %x" in folded  # x * -1
    elif ty in FLOAT_TYPES:
        assert "mul %x, %k2 " not in folded and "div %x, %k2 " not in folded  # x*1, x/1
        assert "add %x, %k1 " not in folded and "sub %x, %k0 " not in folded  # x+-0, x-0
        assert "add %x, %k0 " in folded and "mul %x, %k0 " in folded  # not exact: kept
    else:
        assert "add %x, %k1 " not in folded and "sub %x, %k0 " not in folded
        assert "mul %x, %k3 " in folded  # (1,inf) * (1,0) is (nan,inf): kept


@pytest.mark.parametrize("ty", FLOAT_TYPES + COMPLEX_TYPES)
def test_unsafe_identities_with_ordinary_inputs(ty):
    """-funsafe-fp-math identities agree for finite non-zero inputs and do fold."""
    if ty in FLOAT_TYPES:
        xs, consts = [1.5, -2.0, 0.1, 3.25, -7.75], [0.0, -0.0, 1.0, -1.0]
    else:
        xs = [complex(1.5, -2.0), complex(-0.5, 3.0), complex(2.0, 0.25)]
        consts = [0j, complex(-0.0, -0.0), 1 + 0j]
    xs = [x for x in xs if fits(x, ty)]
    text, make = identity_kernel(ty, xs, consts, ["add", "sub", "mul"])
    folded, _ = equivalent(text, make, unsafe=True)
    for pattern in ("add %x, %k0 ", "add %k0, %x", "sub %x, %k0 ", "mul %x, %k0 ",
                    "mul %k0, %x", "mul %x, %k2 ", "mul %k2, %x"):
        assert pattern not in folded, pattern


def test_boolean_identities():
    xs = [-5, 0, 3, 7]
    lines = []
    m = 0
    for c in ("%t", "%f"):
        for op in ("and", "or", "xor"):
            for a, b in (("%p", c), (c, "%p")):
                lines.append(f"%b{m} = {op} {a}, {b} : bool")
                lines.append(f"%r{m} = if %b{m} -> (i32) {{\n yield (%one)\n }} else {{\n "
                             f"yield (%zero)\n }}")
                lines.append(f"store %r{m}, %out[%i, %j{m}]")
                m += 1
    text = (f"func @k(%X: memref<i32x{len(xs)}>, %out: memref<i32x{len(xs)}x{m}>) {{\n"
            "    %t = constant true : bool\n    %f = constant false : bool\n"
            "    %one = constant 1 : i32\n    %zero = constant 0 : i32\n"
            "    %c0 = constant 0 : index\n    %c2 = constant 2 : i32\n"
            + "".join(f"    %j{j} = constant {j} : index\n" for j in range(m))
            + f"    %n = constant {len(xs)} : index\n    for %i = %c0, %n {{\n"
            "        %x = load %X[%i] : i32\n        %p = less_than %x, %c2 : bool\n"
            + "".join(f"        {l}\n" for l in lines) + "    }\n}\n")
    make = lambda: [np.array(xs, np.int32), np.zeros((len(xs), m), np.int32, order="F")]  # noqa: E731
    folded, _ = equivalent(text, make)
    assert not re.search(r"= (and|or|xor) ", folded)
    assert folded.count("not %p") == 2  # xor with true


# ---- division by zero ---------------------------------------------------------------------------
@pytest.mark.parametrize("src", [
    "%z = constant 0 : i32\n    %r = div %x, %z : i32",
    "%z = constant 0 : i32\n    %r = rem %x, %z : i32",
    "%z = constant 0 : i32\n    %y = mul %x, %z : i32\n    %r = div %x, %y : i32",
    "%z = constant 0 : i32\n    %o = constant 5 : i32\n    %r = rem %o, %z : i32",
    "%a = constant 3 : i32\n    %b = constant 3 : i32\n    %y = sub %a, %b : i32\n"
    "    %r = div %x, %y : i32",
    "%z = constant 0 : i32\n    %y = and %x, %z : i32\n    %r = div %x, %y : i32",
])
def test_division_by_zero_is_an_error(src):
    text = f"func @k(%x: i32, %out: memref<i32>) {{\n    {src}\n    store %r, %out[]\n}}\n"
    program = ttlc.check(text)
    with pytest.raises(ttlc.CompileError) as info:
        run_passes(program, ["constant-propagation"])
    (diag,) = info.value.diagnostics
    line = next(i + 1 for i, l in enumerate(text.splitlines()) if "%r =" in l)
    assert diag.message == "Division by zero detected"
    assert diag[0] == line and diag[1] == 10  # the instruction, after "    %r = "


def test_division_by_zero_in_coopmatrix_is_an_error():
    text = """func @k() {
    parallel {
        %a = constant 7 : coopmatrix<i32x16x4,matrix_acc>
        %z = constant 0 : coopmatrix<i32x16x4,matrix_acc>
        %r = div %a, %z : coopmatrix<i32x16x4,matrix_acc>
    }
}
"""
    with pytest.raises(ttlc.CompileError, match="Division by zero detected"):
        run_passes(ttlc.check(text), ["constant-propagation"])


def test_float_division_by_zero_folds():
    text = """func @k(%out: memref<f32x3>) {
    %a = constant 1.0 : f32
    %m = constant -1.0 : f32
    %z = constant 0.0 : f32
    %0 = div %a, %z : f32
    %1 = div %m, %z : f32
    %2 = div %z, %z : f32
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    store %0, %out[%c0]
    store %1, %out[%c1]
    store %2, %out[%c2]
}
"""
    folded, before = equivalent(text, lambda: [np.zeros(3, np.float32)])
    assert not remaining(folded)
    assert before[0][0] == np.inf and before[0][1] == -np.inf and np.isnan(before[0][2])


# ---- known values -----------------------------------------------------------------------------
def test_builtins_and_sizes():
    text = """func @k(%out: memref<i32x5>, %sz: memref<indexx3>, %A: memref<f32x8x?>,
             %G: group<memref<f32x4>x3>) attributes {subgroup_size=16, work_group_size=[32,2]} {
    %0 = subgroup_size : i32
    %1 = num_subgroups.x : i32
    %2 = num_subgroups.y : i32
    %3 = num_subgroups.z : i32
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    %c3 = constant 3 : index
    %c4 = constant 4 : index
    store %0, %out[%c0]
    store %1, %out[%c1]
    store %2, %out[%c2]
    store %3, %out[%c3]
    %s0 = size %A[0] : index
    %s1 = size %A[1] : index
    %s2 = size %G[0] : index
    store %s0, %sz[%c0]
    store %s1, %sz[%c1]
    store %s2, %sz[%c2]
    parallel {
        %z = subgroup_id.z : i32
        %l = subgroup_local_id : i32
        %w = add %z, %l : i32
        %b = subgroup_broadcast %w, %z : i32
        %cz = constant 0 : i32
        %q = equal %z, %cz : bool
        if %q {
            %f = constant 4 : index
            %e = equal %l, %cz : bool
            if %e {
               store %b, %out[%f]
            }
        }
    }
}
"""
    def make():
        return [np.zeros(5, np.int32), np.zeros(3, np.int64),
                np.zeros((8, 5), np.float32, order="F"),
                [np.zeros(4, np.float32) for _ in range(3)]]
    folded, before = equivalent(text, make)
    assert before[0].tolist() == [16, 2, 2, 1, 0] and before[1].tolist() == [8, 5, 3]
    assert not remaining(folded, {"subgroup_size", "num_subgroups", "subgroup_id"})
    assert "size %A[1]" in folded  # dynamic: kept
    assert "size %A[0]" not in folded and "size %G" not in folded


def test_builtins_unknown_without_attributes():
    text = """func @k(%out: memref<i32x2>) attributes {subgroup_size=16} {
    %0 = num_subgroups.x : i32
    %1 = num_subgroups.y : i32
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    store %0, %out[%c0]
    store %1, %out[%c1]
}
"""
    folded, _ = equivalent(text, lambda: [np.zeros(2, np.int32)])
    assert "num_subgroups.x" in folded and "num_subgroups.y" in folded


def test_subgroup_broadcast_of_constant():
    text = """func @k(%out: memref<i32x32>) attributes {work_group_size=[32,1]} {
    parallel {
        %c5 = constant 5 : i32
        %0 = subgroup_broadcast %c5, %c5 : i32
        %1 = neg %0 : i32
        %i = subgroup_linear_id : i32
        %s = subgroup_size : i32
        %l = subgroup_local_id : i32
        %m = mul %i, %s : i32
        %k = add %m, %l : i32
        %x = cast %k : index
        store %1, %out[%x]
    }
}
"""
    folded, before = equivalent(text, lambda: [np.zeros(32, np.int32)])
    assert (before[0] == -5).all()
    assert "subgroup_broadcast" not in folded and "neg" not in folded


def test_coopmatrix_constants():
    text = """func @k(%out: memref<i32x16x4>, %o2: memref<f32x16x4>) attributes {subgroup_size=16} {
    parallel {
        %a = constant 2.5 : coopmatrix<f32x16x4,matrix_acc>
        %b = constant -1.25 : coopmatrix<f32x16x4,matrix_acc>
        %c = mul %a, %b : coopmatrix<f32x16x4,matrix_acc>
        %n = neg %c : coopmatrix<f32x16x4,matrix_acc>
        %s = constant 3.0 : f32
        %d = cooperative_matrix_scale %s, %n : coopmatrix<f32x16x4,matrix_acc>
        %one = constant 1.0 : f32
        %e = cooperative_matrix_scale %one, %d : coopmatrix<f32x16x4,matrix_acc>
        %h = cast %e : coopmatrix<f16x16x4,matrix_acc>
        %i = cast %h : coopmatrix<i32x16x4,matrix_acc>
        %v = constant 7 : i32
        %m = cooperative_matrix_construct %v : coopmatrix<i32x16x4,matrix_acc>
        %r = rem %i, %m : coopmatrix<i32x16x4,matrix_acc>
        %k0 = constant 0 : index
        cooperative_matrix_store %r, %out[%k0, %k0]
        cooperative_matrix_store %e, %o2[%k0, %k0]
    }
}
"""
    make = lambda: [np.zeros((16, 4), np.int32, order="F"), np.zeros((16, 4), np.float32, order="F")]  # noqa: E731
    folded, before = equivalent(text, make)
    assert (before[0] == 2).all() and (before[1] == 9.375).all()
    assert not remaining(folded, ARITH | {"cooperative_matrix_scale", "cooperative_matrix_construct"})


def test_coopmatrix_identities():
    text = """func @k(%A: memref<i32x16x4>, %out: memref<i32x16x4>) attributes {subgroup_size=16} {
    parallel {
        %k0 = constant 0 : index
        %x = cooperative_matrix_load %A[%k0, %k0] : coopmatrix<i32x16x4,matrix_acc>
        %z = constant 0 : coopmatrix<i32x16x4,matrix_acc>
        %one = constant 1 : coopmatrix<i32x16x4,matrix_acc>
        %a = add %x, %z : coopmatrix<i32x16x4,matrix_acc>
        %b = mul %one, %a : coopmatrix<i32x16x4,matrix_acc>
        %m = constant -1 : coopmatrix<i32x16x4,matrix_acc>
        %c = mul %b, %m : coopmatrix<i32x16x4,matrix_acc>
        %s = constant 1 : i32
        %d = cooperative_matrix_scale %s, %c : coopmatrix<i32x16x4,matrix_acc>
        cooperative_matrix_store %d, %out[%k0, %k0]
    }
}
"""
    rng = np.random.default_rng(0)
    make = lambda: [np.asfortranarray(rng.integers(-100, 100, (16, 4)).astype(np.int32)),  # noqa: E731
                    np.zeros((16, 4), np.int32, order="F")]
    folded = optimise(text)
    assert "neg %x" in folded and not remaining(folded, {"add", "mul", "cooperative_matrix_scale"})
    args = make()
    before = outputs(text, lambda: [a.copy(order="A") for a in args])
    after = outputs(folded, lambda: [a.copy(order="A") for a in args])
    assert_same(before, after)


# ---- loops and branches -----------------------------------------------------------------------
def test_loops():
    text = """func @k(%out: memref<i64x16>, %X: memref<i64x16>) {
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c3 = constant 3 : index
    %c4 = constant 4 : index
    %c16 = constant 16 : index
    for %i = %c3, %c4 {
        %v = cast %i : i64
        store %v, %out[%i]
    }
    for %i = %c3, %c16, %c16 {
        %v = cast %i : i64
        %w = mul %v, %v : i64
        store %w, %out[%c0]
    }
    %n = for %i = %c0, %c0 init(%a = %c1) -> (index) {
        %b = add %a, %a : index
        yield (%b)
    }
    %m, %p = for %i = %c0, %c16 init(%a = %c4, %q = %c0) -> (index, index) {
        %x = load %X[%i] : i64
        %y = cast %x : index
        %s = add %q, %y : index
        yield (%a, %s)
    }
    %e = add %n, %m : index
    %f = cast %e : i64
    %g = cast %p : i64
    store %f, %out[%c1]
    %c2 = constant 2 : index
    store %g, %out[%c2]
    %i8a = constant 100 : i8
    %i8b = constant 120 : i8
    %i8s = constant 27 : i8
    for %j = %i8a, %i8b, %i8s {
        %jj = cast %j : index
        %v = cast %j : i64
        %k = sub %jj, %c1 : index
        store %v, %out[%c4]
    }
}
"""
    make = lambda: [np.zeros(16, np.int64), np.arange(16, dtype=np.int64)]  # noqa: E731
    folded, before = equivalent(text, make)
    assert before[0][:5].tolist() == [9, 5, 120, 3, 100]
    assert "%n" not in folded  # the loop that never runs is gone
    assert "%e" not in folded  # its result (the initial value) and a pass-through value fold
    # loops that run once: the variable is the lower bound (3 -> 3, 9; i8 100 -> 100)
    assert "cast %i" not in folded and "cast %j" not in folded


def test_if_with_constant_conditions_and_yields():
    text = """func @k(%out: memref<f64x4>, %x: f64) {
    %t = constant true : bool
    %f = constant false : bool
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    %c3 = constant 3 : index
    %a = if %f -> (f64) {
        %c42 = constant 42.0 : f64
        yield (%c42)
    } else {
        %b, %c = if %t -> (f64, f64) {
            %c44 = constant 44.0 : f64
            yield (%c44, %x)
        } else {
            %c46 = constant 46.0 : f64
            yield (%c46, %c46)
        }
        %d = add %b, %c : f64
        yield (%d)
    }
    store %a, %out[%c0]
    %lt = less_than %x, %a : bool
    %e = if %lt -> (f64) {
        yield (%x)
    } else {
        yield (%x)
    }
    store %e, %out[%c1]
    if %f {
        store %x, %out[%c2]
    }
    if %t {
        store %x, %out[%c3]
    } else {
        store %a, %out[%c3]
    }
}
"""
    folded, before = equivalent(text, lambda: [np.zeros(4), 1.5])
    assert before[0].tolist() == [45.5, 1.5, 0.0, 1.5]
    assert "if" not in folded


# ---- dead code ------------------------------------------------------------------------------
def test_dead_code_keeps_effects():
    text = """func @k(%A: memref<i32x64>, %B: memref<i32x64>) attributes {work_group_size=[16,1]} {
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c64 = constant 64 : index
    %unused = load %A[%c0] : i32
    %u2 = add %unused, %unused : i32
    %tmp = alloca : memref<i32x64,local>
    lifetime_stop %tmp
    %tmp2 = alloca : memref<i32x64,local>
    %one = constant 1 : i32
    axpby %one, %A, %one, %tmp2
    axpby %one, %tmp2, %one, %B
    lifetime_stop %tmp2
    parallel {
    }
    parallel {
        %i = subgroup_local_id : i32
        %x = cast %i : index
        %v = load %A[%x] : i32
        %n = neg %v : i32
    }
    foreach (%i) = (%c0), (%c64) {
        %v = load %A[%i] : i32
    }
    %s = for %i = %c0, %c64 init(%acc = %one) -> (i32) {
        %w = add %acc, %acc : i32
        yield (%w)
    }
    %lt = less_than %c0, %c1 : bool
    if %lt {
    } else {
    }
    parallel {
        %i = subgroup_local_id : i32
        %x = cast %i : index
        %old = atomic_add %one, %B[%x] : i32
        barrier.local
        %v = load %B[%x] : i32
        store %v, %A[%x]
    }
    for %i = %c0, %c1 {
        store %one, %B[%i]
    }
}
"""
    rng = np.random.default_rng(1)
    a = rng.integers(-50, 50, 64).astype(np.int32)
    make = lambda: [a.copy(), np.zeros(64, np.int32)]  # noqa: E731
    folded, _ = equivalent(text, make, passes=["dead-code-elimination"])
    assert "%unused" not in folded and "%u2" not in folded
    assert "alloca : memref<i32x64,local>" in folded and folded.count("alloca") == 1
    assert folded.count("lifetime_stop") == 1 and folded.count("parallel") == 1
    assert "foreach" not in folded and "init(" not in folded and "less_than" not in folded
    for kept in ("axpby", "atomic_add", "barrier.local", "store %v, %A", "store %one, %B"):
        assert kept in folded


def test_pipeline_is_idempotent():
    case = generate(3)
    once = optimise(case.text)
    assert optimise(once) == once


# ---- random programs -------------------------------------------------------------------------
N_SEEDS = int(os.environ.get("TTLC_FOLD_SEEDS", "40"))
FIRST_SEED = int(os.environ.get("TTLC_FOLD_FIRST_SEED", "0"))


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + N_SEEDS))
def test_generated_programs(seed):
    case = generate(seed)
    for unsafe in (False,):
        equivalent(case.text, case.make_args, grid=case.grid, unsafe=unsafe)


# ---- hypothesis: random constants through random instructions -------------------------------
@st.composite
def binary_case(draw):
    ty = draw(st.sampled_from(NUMBER_TYPES))
    ops = binary_ops(ty) + (COMPARISONS if ty not in COMPLEX_TYPES else ["equal", "not_equal"])
    op = draw(st.sampled_from(ops))
    if ty in INT_TYPES:
        lo = int_min(ty) + (1 if ty in ("i64", "index") else 0)
        num = st.integers(lo, int_max(ty))
    else:
        part = COMPONENT.get(ty, ty)
        width = 16 if part in ("f16", "bf16") else 32 if part == "f32" else 64
        num = st.floats(width=32 if width == 16 else width).filter(lambda x: fits(x, part))
        if ty in COMPLEX_TYPES:
            num = st.builds(complex, num, num)
    a, b = draw(num), draw(num)
    if op in ("div", "rem") and ty in INT_TYPES and b == 0:
        b = 1
    return ty, op, a, b


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(binary_case())
def test_random_binary_constants(case):
    ty, op, a, b = case
    rty = "bool" if op in COMPARISONS else ty
    k = Kernel()
    x, y = k.const(a, ty), k.const(b, ty)
    r = k.emit(f"{op} {x}, {y}", rty)
    k.store(r, rty)
    check_constants_fold(k)
