"""Constant values: rounding to a type's precision and the canonical spelling.

Floating-point constants are rounded to their type when they enter the IR, so the
canonical print shows the value the program computes with (``0.1 : f32`` prints as
``0x1.99999ap-4``).  Floats print as exact hexadecimal literals.
"""
from __future__ import annotations

import math
from typing import Union

from .types import BoolType, CoopMatrixType, ScalarType, Type

# significand bits (without the implicit one), minimum and maximum normal exponent
_FORMATS = {"bf16": (7, -126, 127), "f16": (10, -14, 15), "f32": (23, -126, 127)}

Number = Union[bool, int, float, complex]


def round_float(x: float, type_name: str) -> float:
    """Round a double to bf16, f16 or f32 (round half to even); f64 is unchanged."""
    fmt = _FORMATS.get(type_name)
    if fmt is None or x == 0 or not math.isfinite(x):
        return x
    mant, emin, emax = fmt
    exponent = math.frexp(abs(x))[1] - 1
    quantum = max(exponent, emin) - mant
    rounded = math.ldexp(round(math.ldexp(abs(x), -quantum)), quantum)
    if rounded >= math.ldexp(1.0, emax + 1):
        rounded = math.inf
    return math.copysign(rounded, x)


def scalar_of(t: Type):
    return t.component if isinstance(t, CoopMatrixType) else t


def literal_fits(value: Number, t: Type) -> bool:
    """Whether a literal has the right kind for a type (bool, integer, float, complex)."""
    s = scalar_of(t)
    if isinstance(s, BoolType):
        return isinstance(value, bool)
    if not isinstance(s, ScalarType) or isinstance(value, bool):
        return False
    if s.is_int:
        return isinstance(value, int)
    if s.is_float:
        return isinstance(value, float)
    return isinstance(value, complex)


def canonical(value: Number, t: Type) -> Number:
    """The value a literal of the right kind has in type t (floats rounded).

    Raises OverflowError when a finite literal is too large for the type.
    """
    s = scalar_of(t)
    if not isinstance(s, ScalarType) or not literal_fits(value, t):
        return value
    if s.is_float:
        return _round_checked(value, s.name)
    if s.is_complex:
        part = s.component.name
        return complex(_round_checked(value.real, part), _round_checked(value.imag, part))
    return value


def _round_checked(x: float, type_name: str) -> float:
    y = round_float(x, type_name)
    if math.isinf(y) and math.isfinite(x):
        raise OverflowError(f"{x!r} is too large for {type_name}")
    return y


def format_float(x: float) -> str:
    """Exact hexadecimal spelling: ``0x1.8p+1``, ``-0x0p+0``, ``inf``, ``nan``."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = x.hex()  # e.g. '0x1.8000000000000p+1'
    sign = "-" if text.startswith("-") else ""
    body = text.lstrip("-")[2:]
    mantissa, exponent = body.split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{sign}0x{mantissa}p{exponent}"


def format_constant(value: Number) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, complex):
        return f"[{format_float(value.real)},{format_float(value.imag)}]"
    return format_float(value)
