"""Complex numbers as pairs: a ``Cplx`` of two ids of the component type (f32 for c32,
f64 for c64), stored interleaved in memory (real part first), passed to kernels as a
2-vector (``float2``/``double2``).

Products and quotients use the formulas NumPy uses (``(ac - bd) + (ad + bc)i``, Smith's
quotient), math functions their textbook identities over OpenCL.std (exp, log via hypot
and atan2, sin and cos via sinh and cosh); results may differ from NumPy's in the last
bits, as those of the real math functions do.
"""
from __future__ import annotations

import math
from typing import Callable

from ...ir.types import ScalarType
from .function import Cplx, Kernel, Unsupported


def component(k: Kernel, t: ScalarType) -> int:
    return k.scalar(t.component)


def fconst(k: Kernel, t: ScalarType, value: float) -> int:
    return k.number(t.component, value)


def binary(k: Kernel, op: str, t: ScalarType, a: Cplx, b: Cplx) -> Cplx:
    f = component(k, t)

    def o(name, x, y):
        return k.op(name, f, x, y)

    if op in ("add", "sub"):
        name = "FAdd" if op == "add" else "FSub"
        return Cplx(o(name, a.re, b.re), o(name, a.im, b.im))
    if op == "mul":
        return Cplx(o("FSub", o("FMul", a.re, b.re), o("FMul", a.im, b.im)),
                    o("FAdd", o("FMul", a.re, b.im), o("FMul", a.im, b.re)))
    if op == "div":
        # Smith: scale by the larger of |c| and |d|
        c, d = b.re, b.im
        wide = k.op("FOrdGreaterThanEqual", k.m.type_bool(), k.ext("fabs", f, c),
                    k.ext("fabs", f, d))
        r1 = o("FDiv", d, c)
        den1 = o("FAdd", c, o("FMul", d, r1))
        re1 = o("FDiv", o("FAdd", a.re, o("FMul", a.im, r1)), den1)
        im1 = o("FDiv", o("FSub", a.im, o("FMul", a.re, r1)), den1)
        r2 = o("FDiv", c, d)
        den2 = o("FAdd", o("FMul", c, r2), d)
        re2 = o("FDiv", o("FAdd", o("FMul", a.re, r2), a.im), den2)
        im2 = o("FDiv", o("FSub", o("FMul", a.im, r2), a.re), den2)
        return Cplx(k.op("Select", f, wide, re1, re2), k.op("Select", f, wide, im1, im2))
    raise Unsupported(k.current, f"{op} on {t}")


def _exp(k: Kernel, f: int, z: Cplx) -> Cplx:
    e = k.ext("exp", f, z.re)
    return Cplx(k.op("FMul", f, e, k.ext("cos", f, z.im)),
                k.op("FMul", f, e, k.ext("sin", f, z.im)))


def _log(k: Kernel, f: int, z: Cplx) -> Cplx:
    return Cplx(k.ext("log", f, k.ext("hypot", f, z.re, z.im)), k.ext("atan2", f, z.im, z.re))


def _scale(k: Kernel, f: int, z: Cplx, s: int) -> Cplx:
    return Cplx(k.op("FMul", f, z.re, s), k.op("FMul", f, z.im, s))


def unary(k: Kernel, op: str, t: ScalarType, a: Cplx):
    """A unary instruction or math function on a complex number (``abs``, ``re`` and
    ``im`` give a real)."""
    f = component(k, t)
    base = op[len("native_"):] if op.startswith("native_") else op
    if op == "neg":
        return Cplx(k.op("FNegate", f, a.re), k.op("FNegate", f, a.im))
    if op == "conj":
        return Cplx(a.re, k.op("FNegate", f, a.im))
    if op == "re":
        return a.re
    if op == "im":
        return a.im
    if op == "abs":
        return k.ext("hypot", f, a.re, a.im)
    if base == "exp":
        return _exp(k, f, a)
    if base == "exp2":
        return _exp(k, f, _scale(k, f, a, fconst(k, t, math.log(2.0))))
    if base == "log":
        return _log(k, f, a)
    if base == "log2":
        return _scale(k, f, _log(k, f, a), fconst(k, t, 1 / math.log(2.0)))
    if base in ("sin", "cos"):
        ch, sh = k.ext("cosh", f, a.im), k.ext("sinh", f, a.im)
        s, c = k.ext("sin", f, a.re), k.ext("cos", f, a.re)
        if base == "sin":
            return Cplx(k.op("FMul", f, s, ch), k.op("FMul", f, c, sh))
        return Cplx(k.op("FMul", f, c, ch), k.op("FNegate", f, k.op("FMul", f, s, sh)))
    raise Unsupported(k.current, f"{op} on {t}")


def compare(k: Kernel, op: str, a: Cplx, b: Cplx) -> int:
    bt = k.m.type_bool()
    if op == "equal":
        return k.op("LogicalAnd", bt, k.op("FOrdEqual", bt, a.re, b.re),
                    k.op("FOrdEqual", bt, a.im, b.im))
    if op == "not_equal":
        return k.op("LogicalOr", bt, k.op("FUnordNotEqual", bt, a.re, b.re),
                    k.op("FUnordNotEqual", bt, a.im, b.im))
    raise Unsupported(k.current, f"{op} on complex numbers")


def convert(k: Kernel, src: ScalarType, dst: ScalarType, a, real: Callable) -> Cplx:
    """A value of type src as complex type dst; ``real(src, dst, x)`` converts reals."""
    if src.is_complex:
        return Cplx(real(src.component, dst.component, a.re),
                    real(src.component, dst.component, a.im))
    return Cplx(real(src, dst.component, a), fconst(k, dst, 0.0))


def each(fn: Callable[[int], int], z: Cplx) -> Cplx:
    return Cplx(fn(z.re), fn(z.im))
