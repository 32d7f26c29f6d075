"""The language's integer and accumulation rules, each defined once.

Every part that computes (constant folding in passes, the interpreter, back ends
folding constants or choosing instructions) reads these, so a rule cannot differ
between them (docs/language-notes.md, "Execution"):

- integers wrap around at their width (two's complement);
- ``div`` truncates toward zero and ``rem`` takes the sign of the dividend (C); a zero
  divisor gives 0 for both (checked mode reports it before this rule applies);
- shift amounts are taken modulo the width (OpenCL);
- sums of 16-bit floats are formed in f32 (BLAS instructions, coopmatrix mul_add and
  reduce, subgroup scans and reductions).

``c_divmod`` and ``shift_amount`` use only operators that Python ints and NumPy integer
arrays share, so the interpreter applies them elementwise (in the arrays' width) and
folds apply them exactly.
"""
from __future__ import annotations

from typing import Optional

from .types import BF16, F16, F32, ScalarType


def wrap(x: int, bits: int) -> int:
    """x as a two's complement integer of ``bits`` bits; a 1-bit integer is a bool (0 or 1)."""
    x &= (1 << bits) - 1
    return x - (1 << bits) if bits > 1 and x >> (bits - 1) else x


def c_divmod(a, b):
    """C's quotient (truncated toward zero) and remainder (the dividend's sign) of a by b.

    A zero divisor gives 0 and 0.  Works on Python ints and elementwise on NumPy integer
    arrays of one dtype; an overflowing quotient (the minimum divided by -1) is not
    wrapped here."""
    nonzero = b != 0
    d = b + (b == 0)  # the divisor, with 1 in place of 0
    q = a // d  # floor division rounds toward -inf: one too small where C truncates up
    r = a - q * d
    fix = (r != 0) & ((a < 0) != (d < 0))
    return (q + fix) * nonzero, (r - fix * d) * nonzero


def shift_amount(c, bits: int):
    """The bits a shift by c moves: c modulo the width (an int or a NumPy integer array)."""
    return c & (bits - 1)


def fold_int(op: str, a: int, c: int, bits: int) -> Optional[int]:
    """The result of binary instruction ``op`` on integers a and c of width ``bits``.

    None for an opcode that is not an integer binary instruction."""
    if op == "add":
        r = a + c
    elif op == "sub":
        r = a - c
    elif op == "mul":
        r = a * c
    elif op == "div":
        r = c_divmod(a, c)[0]
    elif op == "rem":
        r = c_divmod(a, c)[1]
    elif op == "max":
        r = max(a, c)
    elif op == "min":
        r = min(a, c)
    elif op == "and":
        r = a & c
    elif op == "or":
        r = a | c
    elif op == "xor":
        r = a ^ c
    elif op == "shl":
        r = a << shift_amount(c, bits)
    elif op == "shr":
        r = a >> shift_amount(c, bits)
    else:
        return None
    return wrap(r, bits)


def accumulate_type(t: ScalarType) -> ScalarType:
    """The type sums of t are formed in: f32 for the 16-bit floats, t itself otherwise."""
    return F32 if t in (F16, BF16) else t
