"""Numbers in SPIR-V: constants, the work-item built-ins, arithmetic, comparisons, casts
and math functions, on numbers and (component by component) on coopmatrices.

The language's rules (``ttlc.ir.numerics``): integers wrap (SPIR-V's integer
instructions do); ``div``/``rem`` truncate with a zero divisor giving 0 and the minimum
divided by -1 wrapping (the divisor is replaced by 1 in both cases, which gives exactly
those results); shift amounts are taken modulo the width; float ``rem`` is C's fmod
(OpFRem); float min/max return the other operand when one is NaN (OpenCL.std fmin/fmax);
float to integer casts saturate with NaN giving 0 (OpConvertFToS decorated
SaturatedConversion).  Integers are signed.
"""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.ops import ARITH_BINARY, ARITH_UNARY, COMPARISONS, MATH_UNARY
from ...ir.types import BoolType, CoopMatrixType, ScalarType, Type, element_type
from ..simt import COOPMATRIX_EMITTERS, conversion_emitters, each as _each
from . import checks, cplx
from .builder import Lit
from .function import Cplx, Kernel, Unsupported


# ---- constants ---------------------------------------------------------------------------------
def constant_of(k: Kernel, t: ScalarType, value):
    """The id of a constant number (or bool) of type t (a Cplx for complex types)."""
    if isinstance(t, ScalarType) and t.is_complex:
        value = complex(value)
        return Cplx(k.number(t.component, value.real), k.number(t.component, value.imag))
    return k.number(t, value)


def emit_constant(k: Kernel, inst: Instruction):
    t = inst.results[0].type
    if isinstance(t, CoopMatrixType):
        return [constant_of(k, t.component, inst.attrs["value"])] * k.components(t)
    return constant_of(k, t, inst.attrs["value"])


# ---- built-ins ---------------------------------------------------------------------------------
_AXIS = {"x": 0, "y": 1, "z": 2}


def emit_builtin(k: Kernel, inst: Instruction):
    op = inst.opcode
    wgx, wgy = k.cfg.work_group_size
    i64, i32 = k.i64(), k.i32()
    if op in ("group_id", "num_groups"):
        vec = k.builtin("WorkgroupId" if op == "group_id" else "NumWorkgroups")
        return k.op("CompositeExtract", i64, vec, Lit(_AXIS[inst.modifier("dim")]))
    if op == "num_subgroups":
        return k.c32({"x": wgx // k.S, "y": wgy, "z": 1}[inst.modifier("dim")])
    if op == "subgroup_size":
        return k.c32(k.S)
    if op == "subgroup_linear_id":
        return k.builtin("SubgroupId")
    if op == "subgroup_local_id":
        return k.builtin("SubgroupLocalInvocationId")
    # subgroup_id: from SubgroupId (linear = x + y * num_subgroups.x), so that it names the
    # subgroup the device formed.  Not from LocalInvocationId.x / S: Intel's CPU runtime
    # miscompiles a branch on that quotient narrowed to i32 and widened again (only one
    # work-item of the subgroup takes it), which `cast ... : index` of it does.
    dim, per_row = inst.modifier("dim"), wgx // k.S
    if dim == "z" or (dim == "x" and per_row == 1):
        return k.c32(0)
    linear = k.builtin("SubgroupId")
    if per_row == 1:
        return linear
    return k.op("UMod" if dim == "x" else "UDiv", i32, linear, k.c32(per_row))


# ---- arithmetic on one number ------------------------------------------------------------------
def rounded(k: Kernel, t: ScalarType, x: int) -> int:
    """A float result computed in the register type of t, rounded to t (bf16 values are
    computed in f32 and rounded once per instruction, as the interpreter does)."""
    return k.round_bf16(x) if t.name == "bf16" else x


def binary(k: Kernel, op: str, t: Type, a: int, b: int) -> int:
    """a op b for numbers (or bools) of type t."""
    if isinstance(t, ScalarType) and t.is_complex:
        return cplx.binary(k, op, t, a, b)
    tid = k.scalar(t)
    if isinstance(t, BoolType):
        name = {"and": "LogicalAnd", "or": "LogicalOr", "xor": "LogicalNotEqual"}.get(op)
        if name is None:
            raise Unsupported(k.current, f"{op} on bool")
        return k.op(name, tid, a, b)
    if t.is_float:
        if op in ("max", "min"):
            return k.ext("f" + op, tid, a, b)
        name = {"add": "FAdd", "sub": "FSub", "mul": "FMul", "div": "FDiv", "rem": "FRem"}.get(op)
        if name is None:
            raise Unsupported(k.current, f"{op} on {t}")
        return rounded(k, t, k.op(name, tid, a, b))
    if not t.is_int:
        raise Unsupported(k.current, f"{op} on {t}")
    if op in ("max", "min"):
        return k.ext("s_" + op, tid, a, b)
    if op in ("div", "rem"):
        bool_t = k.m.type_bool()
        zero = k.op("IEqual", bool_t, b, k.const(tid, 0, t.bits))
        overflow = k.op("LogicalAnd", bool_t,
                        k.op("IEqual", bool_t, a, k.const(tid, 1 << (t.bits - 1), t.bits)),
                        k.op("IEqual", bool_t, b, k.const(tid, -1, t.bits)))
        d = k.op("Select", tid, k.op("LogicalOr", bool_t, zero, overflow),
                 k.const(tid, 1, t.bits), b)
        if op == "rem":
            return k.op("SRem", tid, a, d)
        return k.op("Select", tid, zero, k.const(tid, 0, t.bits), k.op("SDiv", tid, a, d))
    if op in ("shl", "shr"):
        amount = k.op("BitwiseAnd", tid, b, k.const(tid, t.bits - 1, t.bits))
        return k.op("ShiftLeftLogical" if op == "shl" else "ShiftRightArithmetic", tid, a, amount)
    name = {"add": "IAdd", "sub": "ISub", "mul": "IMul", "and": "BitwiseAnd",
            "or": "BitwiseOr", "xor": "BitwiseXor"}[op]
    return k.op(name, tid, a, b)


def unary(k: Kernel, op: str, t: Type, a: int) -> int:
    if isinstance(t, ScalarType) and t.is_complex:
        return cplx.unary(k, op, t, a)
    tid = k.scalar(t)
    if isinstance(t, BoolType):
        if op != "not":
            raise Unsupported(k.current, f"{op} on bool")
        return k.op("LogicalNot", tid, a)
    if op == "re":
        return a
    if op == "im":
        return constant_of(k, t, 0)
    if op == "conj":
        return a
    if t.is_float:
        if op == "abs":
            return k.ext("fabs", tid, a)
        if op == "neg":
            return k.op("FNegate", tid, a)
        if op in MATH_UNARY and t.bits == 16:  # computed in f32, rounded once
            f32 = k.m.type_float(32)
            x = a if t.name == "bf16" else k.op("FConvert", f32, a)
            r = k.ext(op, f32, x)
            return k.round_bf16(r) if t.name == "bf16" else k.op("FConvert", tid, r)
        if op in MATH_UNARY:
            return k.ext(op, tid, a)
    elif op == "abs":
        return k.ext("s_abs", tid, a)
    elif op == "neg":
        return k.op("SNegate", tid, a)
    elif op == "not":
        return k.op("Not", tid, a)
    raise Unsupported(k.current, f"{op} on {t}")


_CMP_INT = {"equal": "IEqual", "not_equal": "INotEqual", "greater_than": "SGreaterThan",
            "greater_than_equal": "SGreaterThanEqual", "less_than": "SLessThan",
            "less_than_equal": "SLessThanEqual"}
_CMP_FLOAT = {"equal": "FOrdEqual", "not_equal": "FUnordNotEqual",
              "greater_than": "FOrdGreaterThan", "greater_than_equal": "FOrdGreaterThanEqual",
              "less_than": "FOrdLessThan", "less_than_equal": "FOrdLessThanEqual"}
_CMP_BOOL = {"equal": "LogicalEqual", "not_equal": "LogicalNotEqual"}


def compare(k: Kernel, op: str, t: Type, a: int, b: int) -> int:
    if isinstance(t, ScalarType) and t.is_complex:
        return cplx.compare(k, op, t, a, b)
    table = _CMP_BOOL if isinstance(t, BoolType) else _CMP_FLOAT if t.is_float else \
        _CMP_INT if t.is_int else {}
    if op not in table:
        raise Unsupported(k.current, f"{op} on {t}")
    k.scalar(t)
    return k.op(table[op], k.m.type_bool(), a, b)


def convert(k: Kernel, src: ScalarType, dst: ScalarType, a: int) -> int:
    """A value of type src as type dst (the language's cast)."""
    if src == dst or (src.is_int and dst.is_int and src.bits == dst.bits):
        return a
    if dst.is_complex:
        return cplx.convert(k, src, dst, a, lambda s, d, x: convert(k, s, d, x))
    tid = k.scalar(dst)
    if k.scalar(src) == tid and src.is_float and dst.is_float:  # bf16 <-> f32
        return rounded(k, dst, a)
    if src.is_int and dst.is_int:
        return k.op("SConvert", tid, a)
    if src.is_int and dst.is_float:
        return rounded(k, dst, k.op("ConvertSToF", tid, a))
    if src.is_float and dst.is_int:
        r = k.op("ConvertFToS", tid, a)
        k.m.decorate(r, "SaturatedConversion")
        return r
    if src.is_float and dst.is_float:
        return rounded(k, dst, k.op("FConvert", tid, a))
    raise Unsupported(k.current, f"cast from {src} to {dst}")


# ---- emitters: numbers and coopmatrices alike ---------------------------------------------------
def emit_binary(k: Kernel, inst: Instruction):
    t = inst.slots["a"].type
    t = element_type(t) or t
    if (k.checked and inst.opcode in ("div", "rem") and isinstance(t, ScalarType) and t.is_int
            and checks.may_be_zero(inst.slots["b"])):
        rt = inst.results[0].type
        where = iter([(rt, v) for v in range(k.components(rt))]
                     if isinstance(rt, CoopMatrixType) else [None])

        def checked(a, b):
            checks.division(k, t, a, b, next(where))
            return binary(k, inst.opcode, t, a, b)
        return _each(k, inst, checked, "a", "b")
    return _each(k, inst, lambda a, b: binary(k, inst.opcode, t, a, b), "a", "b")


def emit_unary(k: Kernel, inst: Instruction):
    t = inst.slots["a"].type
    t = element_type(t) or t
    return _each(k, inst, lambda a: unary(k, inst.opcode, t, a), "a")


def emit_compare(k: Kernel, inst: Instruction):
    return compare(k, inst.opcode, inst.slots["a"].type, k.get(inst.slots["a"]),
                   k.get(inst.slots["b"]))


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
