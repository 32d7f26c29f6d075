"""The template preprocessor (docs/language-guide.md, "Templates"): ``$name = text``,
``$name``, ``!calc(...)``, definitions from outside, and diagnostics at the template's line."""
from __future__ import annotations

import numpy as np
import pytest

import ttlc
from ttlc.parse.preprocess import preprocess

AXPY = """\
$dtype = f32
; b := alpha * a + b on $n elements
func @axpy(%alpha: $dtype, %a: memref<$dtype x $n>, %b: memref<$dtype x $n>) {
  %one = constant 1.0 : $dtype
  axpby %alpha, %a, %one, %b
}
"""


def calc(expr: str) -> str:
    return preprocess(f"x !calc({expr})").text[2:]


@pytest.mark.parametrize("expr, value", [
    ("2 3 +", "5"), ("2 3 -", "-1"), ("6 7 *", "42"), ("7 2 /", "3"), ("7 2 %", "1"),
    ("-7 2 /", "-3"), ("-7 2 %", "-1"), ("7 -2 /", "-3"),   # C's rounding toward zero
    ("1 2 3 * +", "7"), ("1 2 + 3 *", "9"), ("64 32 / 16 *", "32"), ("+5", "5"),
])
def test_calc_evaluates_reverse_polish(expr, value):
    assert calc(expr) == value


def test_definitions_expand_once_and_keep_lines():
    exp = preprocess("$a = 4\n$b = !calc($a $a *)\n\nx $b y ${a}z ; $undefined in a comment\n")
    assert exp.text.split("\n") == ["", "", "", "x 16 y 4z ; $undefined in a comment", ""]


def test_strings_are_left_alone():
    text = 'func @f() attributes {"cost $x"=1} {\n}\n'
    assert '"cost $x"=1' in str(ttlc.parse(text))


def test_defines_override_the_text_and_run(tmp_path):
    module = ttlc.compile(AXPY, target="interp", defines={"n": 8, "dtype": "f64"})
    a, b = np.arange(8.0), np.ones(8)
    module["axpy"](2.5, a, b)
    np.testing.assert_array_equal(b, 2.5 * np.arange(8.0) + 1.0)
    assert "memref<f64x8>" in str(ttlc.parse(AXPY, defines={"n": 8, "dtype": "f64"}))
    assert "memref<f32x3>" in str(ttlc.check(AXPY, defines={"n": "3"}))


@pytest.mark.parametrize("text, where, message", [
    ("func @f(%a: memref<f32x$n>) {\n}\n", (1, 24, 25), "$n is not defined"),
    ("$n = 1\n$n = 2\n", (2, 2, 2), "$n is already defined on line 1"),
    ("$n = !calc(4 0 %)\n", (1, 16, 16), "!calc: division by zero (4 0 %)"),
    ("$n = !calc(4 +)\n", (1, 14, 14), "!calc: '+' needs two operands"),
    ("$n = !calc(4 5)\n", (1, 12, 14), "!calc: the expression leaves 2 values"),
    ("$n = !calc(4 f32 +)\n", (1, 14, 16), "!calc: 'f32' is not a 64-bit integer"),
    ("$n = !calc(4 5 +\n", (1, 6, 16), "!calc( is not closed"),
    ("x = $ 4\n", (1, 5, 5), "'$' must be followed by a name"),
])
def test_errors_point_into_the_template(text, where, message):
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.check(text)
    (line, col, end, msg), = info.value.diagnostics
    assert (line, col, end) == where and msg.startswith(message), info.value.format()
    assert text.split("\n")[line - 1] in info.value.format()


def test_later_errors_use_template_coordinates():
    """A verifier error after expansion: the line of the template, the substituted name."""
    text = "$t = i32\nfunc @f() {\n  %x = constant 1.5 : $t\n}\n"
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.check(text)
    d = info.value.diagnostics[0]
    assert (d.loc.line, d.loc.col, d.loc.end_col) == (3, 8, 24)   # %x ... $t, by hand
    assert "constant 1.5 : $t" in info.value.format()


@pytest.mark.parametrize("defines, exc", [
    ({"1n": 4}, ValueError), ({"n": "4\n5"}, ValueError), ({"n": 4.5}, TypeError),
])
def test_bad_defines_are_value_errors(defines, exc):
    with pytest.raises(exc, match="n"):
        ttlc.parse(AXPY, defines=defines)


def test_defines_need_text():
    with pytest.raises(ValueError, match="program text"):
        ttlc.check(ttlc.parse(AXPY, defines={"n": 2}), defines={"n": 2})


@pytest.mark.parametrize("text, message", [
    ("$n = !calc(9223372036854775807 1 +)\n", "out of the range of 64-bit integers"),
    ("$n = !calc(" + "9" * 5000 + ")\n", "is not a 64-bit integer"),
    ("$a = " + "x" * 5000 + "\n" + "".join(f"${c} = ${p}${p}${p}${p}\n" for p, c in
                                          zip("abcdefgh", "bcdefghi")), "longer than"),
])
def test_absurd_templates_are_diagnostics(text, message):
    with pytest.raises(ttlc.CompileError, match=message):
        ttlc.parse(text)
