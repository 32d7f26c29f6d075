"""Integer bookkeeping for lowering passes: fold what is known, emit what is not.

Lowering passes compute loop bounds, tile offsets and coopmatrix coordinates.  Many of
the operands are known when the pass runs (work-group sizes, tile shapes, constant loop
bounds), others only at run time.  ``IndexMath`` takes either a Python ``int`` (known)
or a ``Value`` (emitted) for every operand, folds known operands with the language's
semantics (``ttlc.ir.numerics``: wrap-around, C division) and the obvious identities
(``x + 0``, ``x * 1``, ``x rem 1``), and appends instructions through a ``Builder``
only where something is unknown.  The generated code then needs no constant
propagation to be readable, and static cases come out fully specialised.

Also here: ``require_sizes``, how lowering passes obtain the subgroup and work-group
sizes of a function, and ``set_locations``.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

from ..diagnostics import error
from ..ir.builder import Builder
from ..ir.core import UNKNOWN_LOCATION, Function, Location, Program, Region, Value
from ..ir.numerics import fold_int, wrap
from ..ir.types import BOOL, GroupType, MemrefType, ScalarType
from ..target.config import ExecConfig

Int = Union[int, Value]
Bool = Union[bool, Value]


def known(v: Int) -> Optional[int]:
    """The value of v when it is a Python int or the result of an integer constant."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if not isinstance(v, Value) or v.owner is None:
        return None
    inst = v.owner
    if inst.opcode == "constant":
        c = inst.attrs.get("value")
        if isinstance(c, int) and not isinstance(c, bool):
            return c
    elif inst.opcode == "size":
        # the size of a static mode (the launch checks arrays against static sizes)
        t = inst.slots["tensor"].type
        if isinstance(t, MemrefType) and 0 <= inst.attrs["mode"] < t.order:
            return t.shape[inst.attrs["mode"]]
        if isinstance(t, GroupType):
            return t.size
    return None


class IndexMath:
    """Folding integer and boolean arithmetic on top of a Builder (``self.b``)."""

    def __init__(self, b: Builder):
        self.b = b

    # ---- values ---------------------------------------------------------------------
    def value(self, x: Int, t: ScalarType) -> Value:
        """x as an SSA value of type t (a constant instruction for a known int)."""
        if isinstance(x, Value):
            return x
        return self.b.constant(wrap(x, t.bits), t)

    def flag(self, x: Bool) -> Value:
        if isinstance(x, Value):
            return x
        return self.b.constant(bool(x), BOOL)

    def cast(self, x: Int, src: ScalarType, dst: ScalarType) -> Int:
        k = known(x)
        if k is not None:
            return wrap(k, dst.bits)
        if src == dst:
            return x
        return self.b.cast(x, dst)

    # ---- integer arithmetic ---------------------------------------------------------------
    def add(self, a: Int, c: Int, t: ScalarType) -> Int:
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None:
            return fold_int("add", ka, kc, t.bits)
        if ka == 0:
            return c
        if kc == 0:
            return a
        return self.b.add(self.value(a, t), self.value(c, t))

    def sub(self, a: Int, c: Int, t: ScalarType) -> Int:
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None:
            return fold_int("sub", ka, kc, t.bits)
        if kc == 0:
            return a
        if a is c:
            return 0
        return self.b.sub(self.value(a, t), self.value(c, t))

    def mul(self, a: Int, c: Int, t: ScalarType) -> Int:
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None:
            return fold_int("mul", ka, kc, t.bits)
        if ka == 0 or kc == 0:
            return 0
        if ka == 1:
            return c
        if kc == 1:
            return a
        return self.b.mul(self.value(a, t), self.value(c, t))

    def div(self, a: Int, c: Int, t: ScalarType) -> Int:
        """Division truncating toward zero (C); c must not be zero when both are known."""
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None and kc != 0:
            return fold_int("div", ka, kc, t.bits)
        if kc == 1:
            return a
        return self.b.div(self.value(a, t), self.value(c, t))

    def rem(self, a: Int, c: Int, t: ScalarType) -> Int:
        """Remainder with the sign of the dividend (C)."""
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None and kc != 0:
            return fold_int("rem", ka, kc, t.bits)
        if kc == 1 or kc == -1:
            return 0
        return self.b.rem(self.value(a, t), self.value(c, t))

    def min(self, a: Int, c: Int, t: ScalarType) -> Int:
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None:
            return min(ka, kc)
        return self.b.min(self.value(a, t), self.value(c, t))

    # ---- comparisons and logic -----------------------------------------------------------
    def less_than(self, a: Int, c: Int, t: ScalarType) -> Bool:
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None:
            return ka < kc
        if a is c:
            return False
        return self.b.less_than(self.value(a, t), self.value(c, t))

    def less_equal(self, a: Int, c: Int, t: ScalarType) -> Bool:
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None:
            return ka <= kc
        if a is c:
            return True
        return self.b.less_than_equal(self.value(a, t), self.value(c, t))

    def equal(self, a: Int, c: Int, t: ScalarType) -> Bool:
        ka, kc = known(a), known(c)
        if ka is not None and kc is not None:
            return ka == kc
        if a is c:
            return True
        return self.b.equal(self.value(a, t), self.value(c, t))

    def and_(self, a: Bool, c: Bool) -> Bool:
        if isinstance(a, bool):
            return c if a else False
        if isinstance(c, bool):
            return a if c else False
        return self.b.op("and", a, c)


def require_sizes(program: Program, func: Function, loc: Location, pass_name: str,
                  ctx) -> Tuple[int, Tuple[int, int]]:
    """The subgroup size and work-group size of ``func`` for pass ``pass_name``: those of
    ``ExecConfig.of`` once the work-group-size pass has run (it runs here if it has not).
    Sizes a lowering cannot use (possible in unverified programs) are an error naming
    the pass, never a crash."""
    from . import ensure

    ensure(program, "work-group-size", ctx)
    config = ExecConfig.of(func, ctx.target, program)
    problem = config.problem(func.name)
    if problem is not None:
        raise error(loc, f"{pass_name}: {problem}")
    return config.subgroup_size, config.work_group_size


def set_locations(region: Region, loc: Location) -> None:
    """Instructions a pass made (no location yet) point at the instruction they lower."""
    for inst in region.walk():
        if inst.loc == UNKNOWN_LOCATION:
            inst.loc = loc


__all__ = ["IndexMath", "Int", "Bool", "known", "wrap", "require_sizes", "set_locations"]
