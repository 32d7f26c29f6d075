"""Complex numbers as pairs: a ``Cplx`` of two ids of the component type (f32 for c32,
f64 for c64), stored interleaved in memory (real part first), passed to kernels as a
2-vector (``float2``/``double2``).

The algebra is ``ttlc.backends.pairs``' (NumPy's formulas, Smith's quotient, textbook
identities for the math functions), over SPIR-V instructions and OpenCL.std functions.
"""
from __future__ import annotations

from typing import Callable

from ...ir.types import ScalarType
from .. import pairs
from .function import Cplx, Kernel, Unsupported

_ARITH = {"add": "FAdd", "sub": "FSub", "mul": "FMul", "div": "FDiv"}


class Reals:
    """The real operations on the component type of a complex type (``pairs.Reals``),
    as SPIR-V instructions and OpenCL.std functions."""

    def __init__(self, k: Kernel, t: ScalarType):
        self.k, self.t, self.f = k, t, k.scalar(t.component)

    def const(self, value: float) -> int:
        return self.k.number(self.t.component, value)

    def arith(self, op: str, x: int, y: int) -> int:
        return self.k.op(_ARITH[op], self.f, x, y)

    def neg(self, x: int) -> int:
        return self.k.op("FNegate", self.f, x)

    def fn(self, name: str, *xs: int) -> int:
        return self.k.ext({"abs": "fabs"}.get(name, name), self.f, *xs)

    def ge(self, x: int, y: int) -> int:
        return self.k.op("FOrdGreaterThanEqual", self.k.m.type_bool(), x, y)

    def equal(self, x: int, y: int, ordered: bool) -> int:
        return self.k.op("FOrdEqual" if ordered else "FUnordNotEqual", self.k.m.type_bool(), x, y)

    def logic(self, op: str, p: int, q: int) -> int:
        return self.k.op("LogicalAnd" if op == "and" else "LogicalOr", self.k.m.type_bool(), p, q)

    def select(self, c: int, x: int, y: int) -> int:
        return self.k.op("Select", self.f, c, x, y)


def _result(k: Kernel, what: str, result):
    if result is None:
        raise Unsupported(k.current, what)
    return result


def binary(k: Kernel, op: str, t: ScalarType, a: Cplx, b: Cplx) -> Cplx:
    return _result(k, f"{op} on {t}", pairs.binary(Reals(k, t), op, a, b))


def unary(k: Kernel, op: str, t: ScalarType, a: Cplx):
    """A unary instruction or math function on a complex number (``abs``, ``re`` and
    ``im`` give a real)."""
    return _result(k, f"{op} on {t}", pairs.unary(Reals(k, t), op, a))


def compare(k: Kernel, op: str, t: ScalarType, a: Cplx, b: Cplx) -> int:
    return _result(k, f"{op} on complex numbers", pairs.compare(Reals(k, t), op, a, b))


def convert(k: Kernel, src: ScalarType, dst: ScalarType, a, real: Callable) -> Cplx:
    """A value of type src as complex type dst; ``real(src, dst, x)`` converts reals."""
    if src.is_complex:
        return Cplx(real(src.component, dst.component, a.re),
                    real(src.component, dst.component, a.im))
    return Cplx(real(src, dst.component, a), k.number(dst.component, 0.0))
