"""Complex numbers as pairs of tiles.

Tile IR has no complex type, so a c32 (c64) value is a ``Pair`` of f32 (f64) tiles, its
real and imaginary parts; in memory a complex element is its two parts side by side, as
the language stores them (``Memref.complex``: element offsets count twice).  Loops and
branches carry both parts (``flatten``).  The operations are the textbook formulas, in
the component type: ``(a + bi)(c + di) = (ac - bd) + (ad + bc)i``, division by
``c^2 + d^2``, ``exp(a + bi) = e^a (cos b + i sin b)``, ``2^z = exp(z ln 2)``,
``|a + bi| = sqrt(a^2 + b^2)``.
"""
from __future__ import annotations

import math

from ...ir.core import Instruction
from .translate import Pair, Translator, component_name, unsupported


def _parts(t: Translator, inst: Instruction, slot: str) -> Pair:
    """An operand as a pair (a real one with imaginary part 0)."""
    v = t.tile_of(inst.slots[slot])
    if isinstance(v, Pair):
        return v
    return t.convert(v, "c64" if v.type.element.name == "f64" else "c32")


def _f(t: Translator, name: str, a, b):
    return t.binary(name, a, b)


def _times(t: Translator, a: Pair, b: Pair) -> Pair:
    return Pair(_f(t, "subf", _f(t, "mulf", a.re, b.re), _f(t, "mulf", a.im, b.im)),
                _f(t, "addf", _f(t, "mulf", a.re, b.im), _f(t, "mulf", a.im, b.re)))


def _quotient(t: Translator, a: Pair, b: Pair) -> Pair:
    norm = _f(t, "addf", _f(t, "mulf", b.re, b.re), _f(t, "mulf", b.im, b.im))
    re = _f(t, "addf", _f(t, "mulf", a.re, b.re), _f(t, "mulf", a.im, b.im))
    im = _f(t, "subf", _f(t, "mulf", a.im, b.re), _f(t, "mulf", a.re, b.im))
    return Pair(_f(t, "divf", re, norm), _f(t, "divf", im, norm))


_BINARY = {
    "add": lambda t, a, b: Pair(_f(t, "addf", a.re, b.re), _f(t, "addf", a.im, b.im)),
    "sub": lambda t, a, b: Pair(_f(t, "subf", a.re, b.re), _f(t, "subf", a.im, b.im)),
    "mul": _times,
    "div": _quotient,
}


def binary(t: Translator, inst: Instruction) -> None:
    rule = _BINARY.get(inst.opcode)
    if rule is None:
        raise unsupported(inst, "complex operands are")
    t.values[inst.results[0]] = rule(t, _parts(t, inst, "a"), _parts(t, inst, "b"))


def _negate(t: Translator, v):
    return t.b.one("negf", v.type, source=v)


def _abs(t: Translator, a: Pair):
    square = _f(t, "addf", _f(t, "mulf", a.re, a.re), _f(t, "mulf", a.im, a.im))
    return t.b.one("sqrt", square.type, source=square)


_UNARY = {
    "neg": lambda t, a: Pair(_negate(t, a.re), _negate(t, a.im)),
    "conj": lambda t, a: Pair(a.re, _negate(t, a.im)),
    "re": lambda t, a: a.re,
    "im": lambda t, a: a.im,
    "abs": _abs,
}


def unary(t: Translator, inst: Instruction) -> None:
    rule = _UNARY.get(inst.opcode)
    if rule is None:
        raise unsupported(inst, "complex operands are")
    t.values[inst.results[0]] = rule(t, _parts(t, inst, "a"))


def _polar(t: Translator, magnitude, angle) -> Pair:
    """magnitude * (cos angle + i sin angle)."""
    return Pair(_f(t, "mulf", magnitude, t.b.one("cos", angle.type, source=angle)),
                _f(t, "mulf", magnitude, t.b.one("sin", angle.type, source=angle)))


def math_function(t: Translator, inst: Instruction) -> None:
    """exp and exp2 (and their native forms), the complex functions of the language."""
    a = _parts(t, inst, "a")
    name = inst.opcode.replace("native_", "")
    if name == "exp":
        value = _polar(t, t.b.one("exp", a.re.type, source=a.re), a.im)
    elif name == "exp2":
        element = a.re.type.element.name
        angle = _f(t, "mulf", a.im, t.const(element, math.log(2.0)))
        value = _polar(t, t.b.one("exp2", a.re.type, source=a.re), angle)
    else:
        raise unsupported(inst, "complex operands are")
    t.values[inst.results[0]] = value


def compare(t: Translator, inst: Instruction, predicate: str) -> None:
    """equal: both parts equal; not_equal: either part differs."""
    a, b = _parts(t, inst, "a"), _parts(t, inst, "b")
    if predicate not in ("equal", "not_equal"):
        raise unsupported(inst, "complex operands are")
    re, im = (t.compare(predicate, x, y) for x, y in zip(a, b))
    t.values[inst.results[0]] = t.binary("andi" if predicate == "equal" else "ori", re, im)


def constant(t: Translator, inst: Instruction, value, shape=()) -> None:
    element = component_name(inst.results[0].type, inst.loc, inst.opcode)
    re, im = (value.real, value.imag) if isinstance(value, complex) else \
        (value if isinstance(value, (list, tuple)) else (value, 0.0))
    t.values[inst.results[0]] = Pair(t.const(element, float(re), shape),
                                     t.const(element, float(im), shape))
