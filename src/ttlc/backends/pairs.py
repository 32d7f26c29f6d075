"""Complex numbers as pairs of reals, for back ends whose machines have no complex type.

A complex value is a ``Pair`` of the back end's representation of two reals of the
component type (f32 for c32, f64 for c64), the real part first, as in memory.  The
algebra is written once over ``Reals``, the few real operations a back end provides;
products and quotients use the formulas NumPy uses (``(ac - bd) + (ad + bc)i``, Smith's
quotient), math functions their textbook identities (exp, log via hypot and atan2, sin
and cos via sinh and cosh), so results may differ from NumPy's in the last bits, as those
of the real math functions do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol


@dataclass(frozen=True)
class Pair:
    """A complex number: its real and imaginary parts."""

    re: object
    im: object


class Reals(Protocol):
    """The real operations of a back end on the component type of one complex type."""

    def const(self, value: float) -> object: ...
    def arith(self, op: str, x, y) -> object: ...  # add, sub, mul, div
    def neg(self, x) -> object: ...
    def fn(self, name: str, *xs) -> object: ...  # exp, log, sin, cos, sinh, cosh, abs,
    #                                                hypot, atan2
    def ge(self, x, y) -> object: ...  # ordered x >= y, a bool
    def equal(self, x, y, ordered: bool) -> object: ...  # ordered ==, or unordered !=
    def logic(self, op: str, p, q) -> object: ...  # and, or on bools
    def select(self, c, x, y) -> object: ...


def each(fn: Callable, z: Pair) -> Pair:
    return Pair(fn(z.re), fn(z.im))


def binary(r: Reals, op: str, a: Pair, b: Pair) -> Pair:
    """add, sub, mul, div of complex numbers; None for another operation."""
    o = r.arith
    if op in ("add", "sub"):
        return Pair(o(op, a.re, b.re), o(op, a.im, b.im))
    if op == "mul":
        return Pair(o("sub", o("mul", a.re, b.re), o("mul", a.im, b.im)),
                    o("add", o("mul", a.re, b.im), o("mul", a.im, b.re)))
    if op == "div":  # Smith: scale by the larger of |c| and |d|
        c, d = b.re, b.im
        wide = r.ge(r.fn("abs", c), r.fn("abs", d))
        r1 = o("div", d, c)
        den1 = o("add", c, o("mul", d, r1))
        re1 = o("div", o("add", a.re, o("mul", a.im, r1)), den1)
        im1 = o("div", o("sub", a.im, o("mul", a.re, r1)), den1)
        r2 = o("div", c, d)
        den2 = o("add", o("mul", c, r2), d)
        re2 = o("div", o("add", o("mul", a.re, r2), a.im), den2)
        im2 = o("div", o("sub", o("mul", a.im, r2), a.re), den2)
        return Pair(r.select(wide, re1, re2), r.select(wide, im1, im2))
    return None


def _exp(r: Reals, z: Pair) -> Pair:
    """e^x (cos y + i sin y); a real argument (y = +-0) keeps its imaginary part y, as C's
    cexp and NumPy do, also where e^x overflows (inf * sin 0 would be NaN)."""
    e = r.fn("exp", z.re)
    im = r.arith("mul", e, r.fn("sin", z.im))
    real = r.equal(z.im, r.const(0.0), True)
    return Pair(r.arith("mul", e, r.fn("cos", z.im)), r.select(real, z.im, im))


def _log(r: Reals, z: Pair) -> Pair:
    return Pair(r.fn("log", r.fn("hypot", z.re, z.im)), r.fn("atan2", z.im, z.re))


def _scale(r: Reals, z: Pair, s: float) -> Pair:
    c = r.const(s)
    return each(lambda x: r.arith("mul", x, c), z)


def unary(r: Reals, op: str, a: Pair):
    """A unary instruction or math function on a complex number (``abs``, ``re`` and
    ``im`` give a real); None for another operation."""
    base = op[len("native_"):] if op.startswith("native_") else op
    if op == "neg":
        return each(r.neg, a)
    if op == "conj":
        return Pair(a.re, r.neg(a.im))
    if op == "re":
        return a.re
    if op == "im":
        return a.im
    if op == "abs":
        return r.fn("hypot", a.re, a.im)
    if base == "exp":
        return _exp(r, a)
    if base == "exp2":
        return _exp(r, _scale(r, a, math.log(2.0)))
    if base == "log":
        return _log(r, a)
    if base == "log2":
        return _scale(r, _log(r, a), 1 / math.log(2.0))
    if base in ("sin", "cos"):
        ch, sh = r.fn("cosh", a.im), r.fn("sinh", a.im)
        s, c = r.fn("sin", a.re), r.fn("cos", a.re)
        if base == "sin":
            return Pair(r.arith("mul", s, ch), r.arith("mul", c, sh))
        return Pair(r.arith("mul", c, ch), r.neg(r.arith("mul", s, sh)))
    return None


def compare(r: Reals, op: str, a: Pair, b: Pair):
    """equal and not_equal of complex numbers (a bool); None for another comparison."""
    if op == "equal":
        return r.logic("and", r.equal(a.re, b.re, True), r.equal(a.im, b.im, True))
    if op == "not_equal":
        return r.logic("or", r.equal(a.re, b.re, False), r.equal(a.im, b.im, False))
    return None
