"""constant-propagation: fold instructions whose operands are constants.

Every fold computes exactly what the reference interpreter computes: the arithmetic,
comparison, cast and math instructions are evaluated by the interpreter's own semantic
functions (``ttlc.interp.semantics``) on the constant operands, so wrap-around, C
division, shift amounts modulo the width, saturating float-to-integer casts, fmin/fmax
NaN rules and bf16/f16 rounding cannot drift apart.

A folded result becomes a new ``constant`` inserted before the instruction, and the
instruction's uses are redirected to it (the instruction itself stays, dead, for
dead-code-elimination, as in the reference implementation).  Identities redirect uses to
an operand (``x + 0``) or insert a simpler instruction (``x * -1`` is ``neg x``).

Identities hold for every value of the type (integers, bool); for floating types only the
exact ones apply (``x * 1``, ``x / 1``, ``x * -1``, ``x + -0.0``, ``x - 0.0``) unless
``-funsafe-fp-math``, which adds ``x + 0``, ``x - 0`` and ``x * 0 = 0`` (wrong for NaN,
infinities and signed zeros) and the complex identities (``x * (1,0)`` is not exact:
``(1,inf) * (1,0)`` is ``(nan,inf)``).

Also folded: builtins fixed by the function's attributes (``subgroup_size``,
``num_subgroups``), ``subgroup_id.z`` (always 0), ``size`` of static modes,
``subgroup_broadcast`` of a constant, ``cooperative_matrix_construct``/``scale`` of
constants, ``cast`` to the operand's own type, the variable of a ``for`` loop that runs
exactly once, the results of a loop that never runs (its initial values) or that passes
a loop-carried value through unchanged, and an ``if`` whose branches yield the same value.
Results that cannot be written as a constant (``-2^63``) are left alone.

An integer division or remainder by a constant zero is an error.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np

from ..diagnostics import error
from ..interp.table import SEMANTICS
from ..runtime.values import dtype_of
from ..ir import rewrite
from ..ir.builder import Builder
from ..ir.core import Function, Instruction, Region, Value
from ..ir.numerics import shift_amount, wrap
from ..ir.ops import static_size
from ..ir.types import BoolType, CoopMatrixType, ScalarType, Type

INT64_MIN = -(2 ** 63)  # not writable as a constant (the grammar's range starts at -2^63+1)

#: instructions folded by evaluating the interpreter's semantics on constant operands
EVALUATED = {"arith_binary", "arith_unary", "compare", "cast", "math", "coop_scale"}


class _Constants:
    """Stands in for the interpreter's work-group: values of the operands, unchecked."""

    checked = False

    def __init__(self, values: Dict[Value, Any]):
        self.values = values

    def get(self, v: Value):
        return self.values[v]


def _scalar_type(t: Type):
    """The scalar type of a scalar/bool, the component of a coopmatrix, else None."""
    if isinstance(t, CoopMatrixType):
        return t.component
    if isinstance(t, (ScalarType, BoolType)):
        return t
    return None


def _to_python(x, t: Type):
    """A NumPy result as the Python value of a constant of type t (None: not writable)."""
    s = _scalar_type(t)
    x = np.asarray(x)
    if x.ndim:  # a coopmatrix computed as an array: constant only if every entry agrees
        flat = x.reshape(-1)
        first = flat[0]
        if not all(_same(y, first) for y in flat[1:]):
            return None
        x = first
    x = np.asarray(x)[()]
    if isinstance(s, BoolType):
        return bool(x)
    if s.is_int:
        value = int(x)
        return None if value == INT64_MIN else value
    if s.is_float:
        return float(x)
    return complex(x)


def _same(a, b) -> bool:
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _is(value, target, s) -> bool:
    """value is exactly target in scalar type s (signed zeros are told apart)."""
    if isinstance(s, BoolType):
        return value is target
    if s.is_int:
        return value == target
    if s.is_float:
        return _float_is(value, target)
    target = complex(target)
    return _float_is(value.real, target.real) and _float_is(value.imag, target.imag)


def _float_is(x: float, target: float) -> bool:
    if x != target:
        return False
    return x != 0 or math.copysign(1.0, x) == math.copysign(1.0, target)


class _Fold:
    """What an instruction folds to."""

    __slots__ = ("value", "const", "op")

    def __init__(self, value: Optional[Value] = None, const: Any = None, op: Optional[str] = None):
        self.value = value  # an existing value
        self.const = const  # a constant (Python value)
        self.op = op  # a unary instruction (neg/not) applied to value


class _Folder:
    def __init__(self, func: Function, unsafe: bool):
        self.func = func
        self.unsafe = unsafe
        #: results redirected so far (applied to the function at the end)
        self.subst: Dict[Value, Value] = {}

    # ---- values -------------------------------------------------------------------------
    def resolve(self, v: Value) -> Value:
        while v in self.subst:
            v = self.subst[v]
        return v

    def const(self, v: Any):
        """The constant value v has (a Python number), or None."""
        if not isinstance(v, Value):
            return None
        owner = self.resolve(v).owner
        if owner is not None and owner.opcode == "constant":
            return owner.attrs["value"]
        return None

    # ---- the walk -------------------------------------------------------------------------
    def region(self, region: Region) -> None:
        new: Dict[Instruction, List[Instruction]] = {}
        for inst in region.instructions:
            if inst.opcode == "for":
                self.single_trip(inst)
            for r in inst.regions:
                self.region(r)
            made = self.fold(inst)
            if made:
                new[inst] = made
        rewrite.insert_before_each(region, new)

    def fold(self, inst: Instruction) -> List[Instruction]:
        """Fold inst: record redirected results; return instructions to insert before it."""
        opdef = inst.opdef
        fam = opdef.family
        if inst.opcode in ("div", "rem"):
            self.check_division(inst)
        if inst.opcode == "for":
            self.pass_through(inst)
            return []
        if inst.opcode == "if":
            self.same_yield(inst)
            return []
        if len(inst.results) != 1 or inst.opcode == "constant":
            return []
        result = inst.results[0]
        if _scalar_type(result.type) is None:
            return []
        fold = None
        if fam in EVALUATED:
            fold = self.evaluate(inst)
            if fold is None:
                fold = self.identity(inst)
        elif fam == "builtin":
            fold = self.builtin(inst)
        elif fam == "size":
            fold = self.size(inst)
        elif fam == "subgroup_broadcast":
            if self.const(inst.slots["a"]) is not None:
                fold = _Fold(value=self.resolve(inst.slots["a"]))
        elif fam == "coop_construct":
            value = self.const(inst.slots["a"])
            if value is not None:
                fold = self.evaluate_with(inst, lambda env: np.asarray(
                    env.get(inst.slots["a"])).astype(dtype_of(result.type))[()])
        if fold is None:
            return []
        return self.apply(inst, fold)

    def apply(self, inst: Instruction, fold: _Fold) -> List[Instruction]:
        result = inst.results[0]
        if fold.op is None and fold.value is not None:
            self.subst[result] = fold.value
            return []
        scratch = Region()
        b = Builder(scratch)
        if fold.op is not None:
            new = b.op(fold.op, fold.value, result=result.type)
        else:
            new = b.op("constant", fold.const, result=result.type)
        for i in scratch.instructions:
            i.loc = inst.loc
        self.subst[result] = new
        return list(scratch.instructions)

    # ---- evaluation with the interpreter's semantics -------------------------------------
    def evaluate(self, inst: Instruction) -> Optional[_Fold]:
        operands = [v for v in inst.operands]
        if not operands or any(self.const(v) is None for v in operands):
            return None
        return self.evaluate_with(inst, lambda env: SEMANTICS[inst.opcode](env, inst, None))

    def evaluate_with(self, inst: Instruction, fn) -> Optional[_Fold]:
        values = {}
        for v in inst.operands:
            dtype = dtype_of(v.type)
            values[v] = np.array(self.const(v), dtype=dtype)[()]
        with np.errstate(all="ignore"):
            out = fn(_Constants(values))
        value = _to_python(out, inst.results[0].type)
        if value is None:
            return None
        return _Fold(const=value)

    def check_division(self, inst: Instruction) -> None:
        s = _scalar_type(inst.results[0].type)
        if isinstance(s, ScalarType) and s.is_int and self.const(inst.slots["b"]) == 0:
            raise error(inst.loc, "Division by zero detected")

    # ---- identities -----------------------------------------------------------------------
    def identity(self, inst: Instruction) -> Optional[_Fold]:
        op = inst.opcode
        if op == "cast":
            a = self.resolve(inst.slots["a"])
            return _Fold(value=a) if a.type == inst.results[0].type else None
        if op == "cooperative_matrix_scale":
            return self.scale_identity(inst)
        if inst.opdef.family != "arith_binary":
            return None
        s = _scalar_type(inst.results[0].type)
        a, b = self.resolve(inst.slots["a"]), self.resolve(inst.slots["b"])
        ca, cb = self.const(a), self.const(b)
        if ca is None and cb is None:
            return None
        if isinstance(s, BoolType):
            return self.bool_identity(op, a, b, ca, cb)
        if s.is_int:
            return self.int_identity(op, a, b, ca, cb, s)
        return self.float_identity(op, a, b, ca, cb, s)

    def bool_identity(self, op, a, b, ca, cb) -> Optional[_Fold]:
        for x, c in ((a, cb), (b, ca)):  # x op c, c op x: all three are commutative
            if c is None:
                continue
            if op == "and":
                return _Fold(value=x) if c else _Fold(const=False)
            if op == "or":
                return _Fold(const=True) if c else _Fold(value=x)
            if op == "xor":
                return _Fold(value=x, op="not") if c else _Fold(value=x)
        return None

    def int_identity(self, op, a, b, ca, cb, s: ScalarType) -> Optional[_Fold]:
        commutative = op in ("add", "mul", "and", "or", "xor")
        pairs = [(a, cb)] + ([(b, ca)] if commutative else [])
        for x, c in pairs:  # x op c
            if c is None:
                continue
            if op in ("add", "sub", "or", "xor") and c == 0:
                return _Fold(value=x)
            if op in ("mul", "and") and c == 0:
                return _Fold(const=0)
            if op in ("mul", "div") and c == 1:
                return _Fold(value=x)
            if op == "mul" and c == -1:
                return _Fold(value=x, op="neg")
            if op == "rem" and c in (1, -1):
                return _Fold(const=0)
            if op in ("shl", "shr") and shift_amount(c, s.bits) == 0:
                return _Fold(value=x)
            if op == "and" and c == -1:
                return _Fold(value=x)
            if op == "or" and c == -1:
                return _Fold(const=-1)
        if op in ("shl", "shr") and ca == 0:
            return _Fold(const=0)
        return None

    def float_identity(self, op, a, b, ca, cb, s: ScalarType) -> Optional[_Fold]:
        """Floating and complex types: exact identities, more with unsafe math."""
        real = s.is_float
        commutative = op in ("add", "mul")
        pairs = [(a, cb)] + ([(b, ca)] if commutative else [])
        for x, c in pairs:  # x op c
            if c is None:
                continue
            if real and op in ("mul", "div") and _is(c, 1.0, s):
                return _Fold(value=x)
            if real and op == "mul" and _is(c, -1.0, s):
                return _Fold(value=x, op="neg")
            if op == "add" and _is(c, complex(-0.0, -0.0) if not real else -0.0, s):
                return _Fold(value=x)
            if op == "sub" and _is(c, 0.0, s):
                return _Fold(value=x)
            if not self.unsafe:
                continue
            if op in ("add", "sub") and c == 0:
                return _Fold(value=x)
            if op == "mul" and c == 0:
                return _Fold(const=0.0 if real else 0j)
            if op in ("mul", "div") and c == 1:
                return _Fold(value=x)
        return None

    def scale_identity(self, inst: Instruction) -> Optional[_Fold]:
        s = _scalar_type(inst.results[0].type)
        c = self.const(inst.slots["a"])
        if c is None:
            return None
        b = self.resolve(inst.slots["b"])
        if s.is_int:
            if c == 1:
                return _Fold(value=b)
            if c == 0:
                return _Fold(const=0)
            return None
        if s.is_float and _is(c, 1.0, s):
            return _Fold(value=b)
        if self.unsafe and c == 1:
            return _Fold(value=b)
        if self.unsafe and c == 0:
            return _Fold(const=0.0 if s.is_float else 0j)
        return None

    # ---- known values -----------------------------------------------------------------
    def builtin(self, inst: Instruction) -> Optional[_Fold]:
        op = inst.opcode
        sgs, wgs = self.func.subgroup_size, self.func.work_group_size
        if op == "subgroup_size" and sgs is not None:
            return _Fold(const=sgs)
        if op == "num_subgroups":
            dim = inst.modifier("dim")
            if dim == "z":
                return _Fold(const=1)
            if dim == "y" and wgs is not None:
                return _Fold(const=wgs[1])
            if dim == "x" and wgs is not None and sgs is not None:
                return _Fold(const=wgs[0] // sgs)
        if op == "subgroup_id" and inst.modifier("dim") == "z":
            return _Fold(const=0)
        return None

    def size(self, inst: Instruction) -> Optional[_Fold]:
        n = static_size(inst)
        return None if n is None else _Fold(const=n)

    # ---- control flow ---------------------------------------------------------------------
    def single_trip(self, inst: Instruction) -> None:
        """A loop with constant bounds that runs exactly once: its variable is ``from``."""
        lo, hi = self.const(inst.slots["from"]), self.const(inst.slots["to"])
        step = self.const(inst.slots["step"]) if "step" in inst.slots else 1
        if lo is None or hi is None or step is None:
            return
        bits = inst.slots["from"].type.bits
        if lo < hi and wrap(lo + step, bits) >= hi:
            self.subst[inst.regions[0].args[0]] = self.resolve(inst.slots["from"])

    def pass_through(self, inst: Instruction) -> None:
        """Loop-carried values yielded unchanged, or a loop that never runs (constant
        bounds, ``from >= to``): the results are the initial values."""
        if not inst.results:
            return
        lo, hi = self.const(inst.slots["from"]), self.const(inst.slots["to"])
        if lo is not None and hi is not None and lo >= hi:
            for r, init in zip(inst.results, inst.slots["init"]):
                self.subst[r] = self.resolve(init)
            return
        body = inst.regions[0]
        if not body.instructions or body.instructions[-1].opcode != "yield":
            return
        iter_args = body.args[1:]
        yielded = body.instructions[-1].slots["values"]
        for r, arg, y, init in zip(inst.results, iter_args, yielded, inst.slots["init"]):
            if self.resolve(y) is arg:
                self.subst[r] = self.resolve(init)

    def same_yield(self, inst: Instruction) -> None:
        """Both branches yield the same value (necessarily defined before the if)."""
        if not inst.results or len(inst.regions) != 2:
            return
        ends = [r.instructions[-1] if r.instructions else None for r in inst.regions]
        if any(e is None or e.opcode != "yield" for e in ends):
            return
        for r, x, y in zip(inst.results, ends[0].slots["values"], ends[1].slots["values"]):
            x, y = self.resolve(x), self.resolve(y)
            if x is y:
                self.subst[r] = x


def constant_propagation(program, ctx):
    """Fold constants through arithmetic, casts, comparisons, math and known builtins."""
    for func in program.functions:
        folder = _Folder(func, ctx.unsafe_fp_math)
        folder.region(func.body)
        rewrite.replace_uses(func.body, rewrite.resolve(folder.subst))
