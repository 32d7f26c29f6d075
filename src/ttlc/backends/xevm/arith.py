"""Numbers in MLIR (arith, math): constants, the work-item ids (xevm id operations),
arithmetic, comparisons and casts, on numbers and component by component on
coopmatrices.

The language's rules (``ttlc.ir.numerics``), as target spirv keeps them: integers wrap;
``div``/``rem`` divide by 1 where the divisor is 0 or the minimum is divided by -1 (which
gives the language's results); shift amounts are taken modulo the width; float ``rem`` is
C's fmod (``arith.remf``); float min/max return the other operand for a NaN
(``arith.minnumf``); 16-bit floats' math functions are computed in f32, rounded once.
Complex numbers are pairs of reals (``ttlc.backends.pairs``, over ``Reals``).
"""
from __future__ import annotations

import math
from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.ops import ARITH_BINARY, ARITH_UNARY, COMPARISONS, MATH_UNARY
from ...ir.types import F32, F64, BoolType, CoopMatrixType, ScalarType, Type, element_type
from .. import pairs
from ..simt import COOPMATRIX_EMITTERS, conversion_emitters, each as _each
from .kernel import Kernel, Unsupported


class Reals:
    """The real operations on the component type of a complex type (``pairs.Reals``)."""

    def __init__(self, k: Kernel, t: ScalarType):
        self.k, self.t, self.mt = k, t.component, k.type(t.component)

    def const(self, value: float) -> str:
        return self.k.const(self.t, value)

    def arith(self, op: str, x: str, y: str) -> str:
        return self.k.op(f"arith.{_FLOAT[op]} {x}, {y} : {self.mt}")

    def neg(self, x: str) -> str:
        return self.k.op(f"arith.negf {x} : {self.mt}")

    def fn(self, name: str, *xs: str) -> str:
        if name == "hypot":  # max * sqrt(1 + (min / max)^2); 0 and inf as they are
            a, b = (self.fn("abs", x) for x in xs)
            big = self.k.op(f"arith.maximumf {a}, {b} : {self.mt}")
            small = self.k.op(f"arith.minimumf {a}, {b} : {self.mt}")
            q = self.arith("div", small, big)
            root = self.fn("sqrt", self.arith("add", self.const(1.0), self.arith("mul", q, q)))
            edge = self.logic("or", self.equal(big, self.const(0.0), True),
                              self.equal(big, self.const(math.inf), True))
            return self.select(edge, big, self.arith("mul", big, root))
        name = {"abs": "absf"}.get(name, name)
        return self.k.op(f"math.{name} {', '.join(xs)} : {self.mt}")

    def ge(self, x: str, y: str) -> str:
        return self.k.op(f"arith.cmpf oge, {x}, {y} : {self.mt}")

    def equal(self, x: str, y: str, ordered: bool) -> str:
        return self.k.op(f"arith.cmpf {'oeq' if ordered else 'une'}, {x}, {y} : {self.mt}")

    def logic(self, op: str, p: str, q: str) -> str:
        return self.k.op(f"arith.{op}i {p}, {q} : i1")

    def select(self, c: str, x: str, y: str) -> str:
        return self.k.op(f"arith.select {c}, {x}, {y} : {self.mt}")


def _complex(k: Kernel, t: Type, result):
    """The result of a complex operation, or the CompileError for one without."""
    if result is None:
        raise Unsupported(k.current, f"this operation on {t}")
    return result


def emit_constant(k: Kernel, inst: Instruction):
    t = inst.results[0].type
    if isinstance(t, CoopMatrixType):
        return [k.const(t.component, inst.attrs["value"])] * k.components(t)
    return k.const(t, inst.attrs["value"])


def _id(k: Kernel, op: str, wide: bool) -> str:
    x = k.op(f"xevm.{op} : i32")
    return k.op(f"arith.extui {x} : i32 to i64") if wide else x


def emit_builtin(k: Kernel, inst: Instruction):
    """Ids from xevm's id operations; sizes fixed at compile time are constants."""
    op = inst.opcode
    wgx, wgy = k.cfg.work_group_size
    dim = inst.modifier("dim") if op in ("group_id", "num_groups", "num_subgroups",
                                         "subgroup_id") else None
    if op == "group_id":
        return _id(k, f"group_id.{dim}", True)
    if op == "num_groups":
        return _id(k, f"group_count.{dim}", True)
    if op == "num_subgroups":
        return k.op(f"arith.constant {dict(x=wgx // k.S, y=wgy, z=1)[dim]} : i32")
    if op == "subgroup_size":
        return k.op(f"arith.constant {k.S} : i32")
    if op == "subgroup_linear_id":
        return _id(k, "subgroup_id", False)
    if op == "subgroup_local_id":
        return _id(k, "lane_id", False)
    if dim == "z":  # subgroup_id
        return k.op("arith.constant 0 : i32")
    # from the subgroup the hardware formed (spec, "Builtin": linear = x + y * num_x),
    # not local_id.x / S: Intel's OpenCL CPU runtime miscompiles branches on the latter
    linear = _id(k, "subgroup_id", False)
    per_row = k.op(f"arith.constant {wgx // k.S} : i32")
    return k.op(f"arith.{'remui' if dim == 'x' else 'divui'} {linear}, {per_row} : i32")


_INT = {"add": "addi", "sub": "subi", "mul": "muli", "and": "andi", "or": "ori",
        "xor": "xori", "max": "maxsi", "min": "minsi"}
_FLOAT = {"add": "addf", "sub": "subf", "mul": "mulf", "div": "divf", "rem": "remf",
          "max": "maxnumf", "min": "minnumf"}
_BOOL = {"and": "andi", "or": "ori", "xor": "xori"}


def binary(k: Kernel, op: str, t: Type, a: str, b: str) -> str:
    if isinstance(t, ScalarType) and t.is_complex:
        return _complex(k, t, pairs.binary(Reals(k, t), op, a, b))
    mt = k.type(t)
    table = _BOOL if isinstance(t, BoolType) else _FLOAT if t.is_float else _INT
    if op in table:
        return k.op(f"arith.{table[op]} {a}, {b} : {mt}")
    if isinstance(t, BoolType) or t.is_float:
        raise Unsupported(k.current, f"{op} on {t}")
    if op in ("shl", "shr"):
        amount = k.op(f"arith.andi {b}, {k.const(t, t.bits - 1)} : {mt}")
        return k.op(f"arith.{'shli' if op == 'shl' else 'shrsi'} {a}, {amount} : {mt}")
    zero = k.op(f"arith.cmpi eq, {b}, {k.const(t, 0)} : {mt}")
    low = k.op(f"arith.cmpi eq, {a}, {k.const(t, 1 << (t.bits - 1))} : {mt}")
    minus = k.op(f"arith.cmpi eq, {b}, {k.const(t, -1)} : {mt}")
    bad = k.op(f"arith.ori {zero}, {k.op(f'arith.andi {low}, {minus} : i1')} : i1")
    d = k.op(f"arith.select {bad}, {k.const(t, 1)}, {b} : {mt}")
    if op == "rem":
        return k.op(f"arith.remsi {a}, {d} : {mt}")
    q = k.op(f"arith.divsi {a}, {d} : {mt}")
    return k.op(f"arith.select {zero}, {k.const(t, 0)}, {q} : {mt}")


def unary(k: Kernel, op: str, t: Type, a: str) -> str:
    if isinstance(t, ScalarType) and t.is_complex:
        return _complex(k, t, pairs.unary(Reals(k, t), op, a))
    mt = k.type(t)
    if op in ("re", "conj"):
        return a
    if op == "im":
        return k.const(t, 0)
    if isinstance(t, BoolType):
        if op != "not":
            raise Unsupported(k.current, f"{op} on bool")
        return k.op(f"arith.xori {a}, {k.const(t, True)} : i1")
    if t.is_float:
        if op == "abs":
            return k.op(f"math.absf {a} : {mt}")
        if op == "neg":
            return k.op(f"arith.negf {a} : {mt}")
        name = op.replace("native_", "")
        if t.bits == 16:  # computed in f32, rounded once
            x = k.op(f"arith.extf {a} : {mt} to f32")
            return k.op(f"arith.truncf {k.op(f'math.{name} {x} : f32')} : f32 to {mt}")
        return k.op(f"math.{name} {a} : {mt}")
    if op == "abs":
        return k.op(f"math.absi {a} : {mt}")
    if op == "neg":
        return k.op(f"arith.subi {k.const(t, 0)}, {a} : {mt}")
    if op == "not":
        return k.op(f"arith.xori {a}, {k.const(t, -1)} : {mt}")
    raise Unsupported(k.current, f"{op} on {t}")


_CMP_INT = {"equal": "eq", "not_equal": "ne", "greater_than": "sgt",
            "greater_than_equal": "sge", "less_than": "slt", "less_than_equal": "sle"}
_CMP_FLOAT = {"equal": "oeq", "not_equal": "une", "greater_than": "ogt",
              "greater_than_equal": "oge", "less_than": "olt", "less_than_equal": "ole"}


def emit_compare(k: Kernel, inst: Instruction):
    t = inst.slots["a"].type
    a, b = k.get(inst.slots["a"]), k.get(inst.slots["b"])
    if isinstance(t, ScalarType) and t.is_complex:
        return _complex(k, t, pairs.compare(Reals(k, t), inst.opcode, a, b))
    mt = k.type(t)
    if isinstance(t, ScalarType) and t.is_float:
        return k.op(f"arith.cmpf {_CMP_FLOAT[inst.opcode]}, {a}, {b} : {mt}")
    return k.op(f"arith.cmpi {_CMP_INT[inst.opcode]}, {a}, {b} : {mt}")


def convert(k: Kernel, src: ScalarType, dst: ScalarType, a: str) -> str:
    """A value of type src as type dst (the language's cast; float to integer saturates,
    NaN giving 0; a real becomes a complex number with imaginary part 0)."""
    if dst.is_complex:
        if src.is_complex:
            return pairs.each(lambda x: convert(k, src.component, dst.component, x), a)
        return pairs.Pair(convert(k, src, dst.component, a), k.const(dst.component, 0.0))
    s, d = k.type(src), k.type(dst)
    if s == d:
        return a
    if src.is_int and dst.is_int:
        bits = lambda t: 64 if t.name == "index" else t.bits  # noqa: E731
        return k.op(f"arith.{'extsi' if bits(dst) > bits(src) else 'trunci'} {a} : {s} to {d}")
    if src.is_int and dst.is_float:
        return k.op(f"arith.sitofp {a} : {s} to {d}")
    if src.is_float and dst.is_float:
        if src.bits == dst.bits:  # f16 <-> bf16 through f32
            return convert(k, F32, dst, convert(k, src, F32, a))
        return k.op(f"arith.{'extf' if dst.bits > src.bits else 'truncf'} {a} : {s} to {d}")
    if src.is_float and dst.is_int:
        w = "f64" if src.bits == 64 else "f32"
        x = a if s == w else k.op(f"arith.extf {a} : {s} to {w}")
        lo, hi = (k.const(F64 if w == "f64" else F32, float(v)) for v in (-(1 << (dst.bits - 1)),
                                                                 1 << (dst.bits - 1)))
        big = k.op(f"arith.cmpf oge, {x}, {hi} : {w}")
        clamped = k.op(f"arith.maxnumf {x}, {lo} : {w}")
        r = k.op(f"arith.fptosi {clamped} : {w} to {d}")
        r = k.op(f"arith.select {big}, {k.const(dst, (1 << (dst.bits - 1)) - 1)}, {r} : {d}")
        nan = k.op(f"arith.cmpf uno, {x}, {x} : {w}")
        return k.op(f"arith.select {nan}, {k.const(dst, 0)}, {r} : {d}")
    raise Unsupported(k.current, f"cast from {src} to {dst}")


def _operand_type(inst: Instruction) -> Type:
    t = inst.slots["a"].type
    return element_type(t) or t


def emit_binary(k: Kernel, inst: Instruction):
    t = _operand_type(inst)
    return _each(k, inst, lambda a, b: binary(k, inst.opcode, t, a, b), "a", "b")


def emit_unary(k: Kernel, inst: Instruction):
    t = _operand_type(inst)
    return _each(k, inst, lambda a: unary(k, inst.opcode, t, a), "a")


EMITTERS: Dict[str, Callable] = {
    "constant": emit_constant,
    **dict.fromkeys(("group_id", "num_groups", "num_subgroups", "subgroup_size", "subgroup_id",
                     "subgroup_linear_id", "subgroup_local_id"), emit_builtin),
    **dict.fromkeys(ARITH_BINARY, emit_binary),
    **dict.fromkeys(ARITH_UNARY, emit_unary),
    **dict.fromkeys(MATH_UNARY, emit_unary),
    **dict.fromkeys(COMPARISONS, emit_compare),
    **conversion_emitters(convert, binary),
    **COOPMATRIX_EMITTERS,
}
