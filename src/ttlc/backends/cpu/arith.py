"""Numbers on the CPU: constants, the work-item builtins, arithmetic, comparisons, casts
and math functions, on scalars and on W-lane vectors alike.

``binary``, ``unary`` and ``convert`` compute on LLVM values of any of these shapes and
are used by the other emitters too (atomics, subgroup reductions, coopmatrix entries);
the emitters here take the instructions whose operands are numbers (the coopmatrix forms
of the same opcodes are ``coop.ELEMENTWISE``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional

import numpy as np
from llvmlite import ir

from ...ir.core import Instruction
from ...ir.ops import ARITH_BINARY, ARITH_UNARY, BUILTIN_TYPES
from ...ir.types import SCALAR_TYPES, BoolType, ScalarType, Type
from ...runtime.findings import E_DIV_ZERO
from .function import FunctionCodegen, lane_loop
from .values import (COMPONENT, F32, F64, I1, I16, I32, LLTYPE, Cplx, Lanes, VectorConstant,
                     is_vec, undef_of)
from .vectors import pieces
def emit_constant(cg: FunctionCodegen, inst: Instruction):
    return constant(inst.results[0].type, inst.attrs["value"])


def constant(t: Type, value) -> Any:
    if isinstance(t, BoolType):
        return ir.Constant(I1, int(bool(value)))
    assert isinstance(t, ScalarType)
    lt = LLTYPE[t.name]
    if t.is_int:
        return ir.Constant(lt, int(value))
    if t.is_complex:
        dt = np.float32 if t.name == "c32" else np.float64
        return Cplx(ir.Constant(lt, float(dt(value.real))), ir.Constant(lt, float(dt(value.imag))))
    if t.name == "bf16":
        import ml_dtypes

        bits = int(np.array(float(value), dtype=ml_dtypes.bfloat16).view(np.uint16))
        return ir.Constant(I16, bits - (1 << 16) if bits >= 1 << 15 else bits)
    dt = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[t.name]
    return ir.Constant(lt, float(dt(value)))


_AXIS = {"x": 0, "y": 1, "z": 2}


def emit_builtin(cg: FunctionCodegen, inst: Instruction):
    op = inst.opcode
    wgx, wgy = cg.cfg.work_group_size
    S = cg.S
    lanes = np.arange(cg.W)
    if op == "group_id":
        return cg.gid[_AXIS[inst.modifier("dim")]]
    if op == "num_groups":
        return cg.num_groups[_AXIS[inst.modifier("dim")]]
    if op == "num_subgroups":
        return ir.Constant(I32, {"x": wgx // S, "y": wgy, "z": 1}[inst.modifier("dim")])
    if op == "subgroup_size":
        return ir.Constant(I32, S)
    g = cg.subgroup_index
    if g is not None and op in ("subgroup_id", "subgroup_linear_id"):  # one subgroup's lanes
        nx = ir.Constant(I32, wgx // S)
        dim = inst.modifier("dim") if op == "subgroup_id" else "linear"
        base = {"linear": g, "x": cg.b.urem(g, nx), "y": cg.b.udiv(g, nx)}.get(dim)
        return Lanes(base, (0,) * cg.W, I32)
    if op == "subgroup_id":
        dim = inst.modifier("dim")
        vals = (lanes % wgx) // S if dim == "x" else lanes // wgx if dim == "y" else lanes * 0
    elif op == "subgroup_linear_id":
        vals = lanes // S
    else:
        vals = (lanes % wgx) % S
    return Lanes(None, tuple(int(v) for v in vals), I32)


# ==== arithmetic ===========================================================================
def _int_divrem(cg: FunctionCodegen, op: str, a, c, bits: int):
    b = cg.b
    t = a.type.element if is_vec(a) else a.type
    zero = cg.const_like(a, t, 0)
    one = cg.const_like(a, t, 1)
    is_zero = b.icmp_signed("==", c, zero)
    overflow = b.and_(b.icmp_signed("==", a, cg.const_like(a, t, -(1 << (bits - 1)))),
                      b.icmp_signed("==", c, cg.const_like(a, t, -1)))
    safe = b.select(b.or_(is_zero, overflow), one, c)
    q = b.sdiv(a, safe) if op == "div" else b.srem(a, safe)
    return b.select(is_zero, zero, q)


#: binary instructions that are one LLVM instruction: the IRBuilder method, by operand kind
_FLOAT_INSTRUCTIONS = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "rem": "frem"}
_INT_INSTRUCTIONS = {"add": "add", "sub": "sub", "mul": "mul", "and": "and_", "or": "or_",
                     "xor": "xor"}


def _float_binary(cg: FunctionCodegen, op: str, a, c):
    if op in _FLOAT_INSTRUCTIONS:
        return getattr(cg.b, _FLOAT_INSTRUCTIONS[op])(a, c)
    if op in ("max", "min"):
        return cg.intrinsic("llvm.maxnum" if op == "max" else "llvm.minnum", a.type, [a, c], [a.type])
    raise AssertionError(op)


def _complex_binary(cg: FunctionCodegen, op: str, x: Cplx, y: Cplx) -> Cplx:
    b = cg.b
    if op == "add":
        return Cplx(b.fadd(x.re, y.re), b.fadd(x.im, y.im))
    if op == "sub":
        return Cplx(b.fsub(x.re, y.re), b.fsub(x.im, y.im))
    if op == "mul":
        return Cplx(b.fsub(b.fmul(x.re, y.re), b.fmul(x.im, y.im)),
                    b.fadd(b.fmul(x.re, y.im), b.fmul(x.im, y.re)))
    if op == "div":  # Smith's algorithm, as NumPy computes it
        t = x.re.type.element if is_vec(x.re) else x.re.type
        fabs = lambda v: cg.intrinsic("llvm.fabs", v.type, [v], [v.type])  # noqa: E731
        one = cg.const_like(x.re, t, 1.0)
        zero = cg.const_like(x.re, t, 0.0)
        br_abs, bi_abs = fabs(y.re), fabs(y.im)
        real_big = b.fcmp_ordered(">=", br_abs, bi_abs)
        both_zero = b.and_(b.fcmp_ordered("==", br_abs, zero), b.fcmp_ordered("==", bi_abs, zero))
        # |br| >= |bi|
        rat1 = b.fdiv(y.im, y.re)
        scl1 = b.fdiv(one, b.fadd(y.re, b.fmul(y.im, rat1)))
        re1 = b.fmul(b.fadd(x.re, b.fmul(x.im, rat1)), scl1)
        im1 = b.fmul(b.fsub(x.im, b.fmul(x.re, rat1)), scl1)
        # both zero
        re0 = b.fdiv(x.re, br_abs)
        im0 = b.fdiv(x.im, br_abs)
        # |br| < |bi| (also when NaN is involved: the comparison is false)
        rat2 = b.fdiv(y.re, y.im)
        scl2 = b.fdiv(one, b.fadd(y.im, b.fmul(y.re, rat2)))
        re2 = b.fmul(b.fadd(b.fmul(x.re, rat2), x.im), scl2)
        im2 = b.fmul(b.fsub(b.fmul(x.im, rat2), x.re), scl2)
        re_ = b.select(real_big, b.select(both_zero, re0, re1), re2)
        im_ = b.select(real_big, b.select(both_zero, im0, im1), im2)
        return Cplx(re_, im_)
    raise AssertionError(op)


def binary(cg: FunctionCodegen, op: str, t: Type, a, c):
    """The arithmetic of one binary instruction on (broadcast) operands of type t."""
    b = cg.b
    if isinstance(t, BoolType) or (isinstance(t, ScalarType) and t.is_int):
        bits = 1 if isinstance(t, BoolType) else t.bits
        if op in _INT_INSTRUCTIONS:
            return getattr(b, _INT_INSTRUCTIONS[op])(a, c)
        if op in ("div", "rem"):
            return _int_divrem(cg, op, a, c, bits)
        if op == "max":
            return b.select(b.icmp_signed(">", a, c), a, c)
        if op == "min":
            return b.select(b.icmp_signed("<", a, c), a, c)
        if op in ("shl", "shr"):
            amount = b.and_(c, cg.const_like(c, c.type.element if is_vec(c) else c.type, bits - 1))
            return b.shl(a, amount) if op == "shl" else b.ashr(a, amount)
        raise AssertionError(op)
    assert isinstance(t, ScalarType)
    if t.is_complex:
        return _complex_binary(cg, op, a, c)
    return cg.from_compute(t, _float_binary(cg, op, cg.to_compute(t, a), cg.to_compute(t, c)))


def emit_binary(cg: FunctionCodegen, inst: Instruction):
    t = inst.results[0].type
    ra, rc = cg.raw(inst.slots["a"]), cg.raw(inst.slots["b"])
    if (isinstance(ra, Lanes) or isinstance(rc, Lanes)) and isinstance(t, ScalarType) and t.is_int:
        zero_div = inst.opcode in ("div", "rem") and not (
            isinstance(rc, ir.Constant) and int(rc.constant) != 0)
        if not (cg.checked and zero_div):
            r = cg.lanes_binary(inst.opcode, ra, rc, t.bits)
            if r is not None:
                return r
    a, c = cg.match(cg.get(inst.slots["a"]), cg.get(inst.slots["b"]))
    if (cg.checked and inst.opcode in ("div", "rem") and isinstance(t, ScalarType) and t.is_int):
        zero = cg.const_like(c, LLTYPE[t.name], 0)
        cg.fail_if(cg.b.icmp_signed("==", c, zero), E_DIV_ZERO, [a])
    return binary(cg, inst.opcode, t, a, c)


def _hypot(cg: FunctionCodegen, x: Cplx):
    t = x.re.type.element if is_vec(x.re) else x.re.type
    name = "hypotf" if t == F32 else "hypot"
    fn = cg.extern(name, t, [t, t])
    return per_lane(cg, lambda re_, im_: cg.b.call(fn, [re_, im_]), [x.re, x.im], t)


def per_lane(cg: FunctionCodegen, fn, args: list, ret: ir.Type):
    """fn applied lane by lane to vectors (or once to scalars); fn returns one scalar."""
    if not any(is_vec(a) for a in args):
        return fn(*args)
    if not all(is_vec(a) for a in args):
        args = cg.match(*args)
    return lane_loop(cg, None, lambda lane: [fn(*[cg.b.extract_element(a, lane) for a in args])],
                     [ret], args[0].type.count)[0]


def emit_unary(cg: FunctionCodegen, inst: Instruction):
    t = inst.slots["a"].type
    a = cg.get(inst.slots["a"])
    return unary(cg, inst.opcode, t, a)


def unary(cg: FunctionCodegen, op: str, t: Type, a):
    b = cg.b
    if isinstance(t, BoolType):  # not
        return b.xor(a, cg.const_like(a, I1, 1))
    assert isinstance(t, ScalarType)
    if t.is_complex:
        if op == "re":
            return a.re
        if op == "im":
            return a.im
        if op == "conj":
            return Cplx(a.re, b.fneg(a.im))
        if op == "neg":
            return Cplx(b.fneg(a.re), b.fneg(a.im))
        if op == "abs":
            return _hypot(cg, a)
    lt = LLTYPE[t.name]
    if t.is_int:
        if op == "not":
            return b.xor(a, cg.const_like(a, lt, -1))
        if op == "neg":
            return b.sub(cg.const_like(a, lt, 0), a)
        if op == "abs":
            return b.select(b.icmp_signed("<", a, cg.const_like(a, lt, 0)),
                            b.sub(cg.const_like(a, lt, 0), a), a)
    if t.name == "bf16":  # sign-bit arithmetic on the 16 bits
        if op == "neg":
            return b.xor(a, cg.const_like(a, I16, -0x8000))
        if op == "abs":
            return b.and_(a, cg.const_like(a, I16, 0x7FFF))
    if op == "neg":
        return b.fneg(a)
    if op == "abs":
        return cg.intrinsic("llvm.fabs", a.type, [a], [a.type])
    raise AssertionError(op)


_ICMP = {"equal": "==", "not_equal": "!=", "greater_than": ">", "greater_than_equal": ">=",
         "less_than": "<", "less_than_equal": "<="}


def emit_compare(cg: FunctionCodegen, inst: Instruction):
    t = inst.slots["a"].type
    a, c = cg.match(cg.get(inst.slots["a"]), cg.get(inst.slots["b"]))
    b = cg.b
    op = _ICMP[inst.opcode]
    if t.is_int:
        return b.icmp_signed(op, a, c)
    if t.is_complex:
        if op == "==":
            return b.and_(b.fcmp_ordered("==", a.re, c.re), b.fcmp_ordered("==", a.im, c.im))
        return b.or_(b.fcmp_unordered("!=", a.re, c.re), b.fcmp_unordered("!=", a.im, c.im))
    a, c = cg.to_compute(t, a), cg.to_compute(t, c)
    if op == "!=":
        return b.fcmp_unordered("!=", a, c)
    return b.fcmp_ordered(op, a, c)


def convert(cg: FunctionCodegen, x, src: ScalarType, dst: ScalarType):
    """The cast table (see ttlc.interp.semantics.convert); from or to a 16-bit float, a
    vector over ``vectors.widest()`` lanes in pieces of that many (``vectors.pieces``: a
    64 x 4 tile of half as one fpext was most of the machine-code phase of an f16 gemm
    with A transposed).  Into a complex type the real part is converted so (``pieces``
    takes real vectors)."""
    if src == dst:
        return x
    if dst.is_complex or not any(t.is_float and t.size == 2 for t in (src, dst)):
        return _convert(cg, x, src, dst)
    return pieces(cg, x, lambda p: _convert(cg, p, src, dst))


def _convert(cg: FunctionCodegen, x, src: ScalarType, dst: ScalarType):
    b = cg.b
    if dst.is_complex:
        comp = SCALAR_TYPES[COMPONENT[dst.name]]
        if src.is_complex:
            scomp = SCALAR_TYPES[COMPONENT[src.name]]
            return Cplx(convert(cg, x.re, scomp, comp), convert(cg, x.im, scomp, comp))
        re_ = convert(cg, x, src, comp)
        return Cplx(re_, cg.const_like(re_, LLTYPE[comp.name], 0.0))
    dt = LLTYPE[dst.name]
    if src.is_int and dst.is_int:
        if src.bits == dst.bits:
            return x
        return b.trunc(x, cg.like(x, dt)) if src.bits > dst.bits else b.sext(x, cg.like(x, dt))
    if src.is_int:
        if dst.name == "bf16":
            return cg.f32_to_bf16(b.sitofp(x, cg.like(x, F32)))
        return b.sitofp(x, cg.like(x, dt))
    # from a float
    if src.name == "bf16":
        x, src = cg.bf16_to_f32(x), SCALAR_TYPES["f32"]
        if dst == src:
            return x
    if dst.is_int:
        if src.name == "f16":
            x = b.fpext(x, cg.like(x, F32))
        return cg.intrinsic("llvm.fptosi.sat", cg.like(x, dt), [x], [cg.like(x, dt), x.type])
    if dst.name == "bf16":
        if src.name == "f64":
            x = b.fptrunc(x, cg.like(x, F32))
        elif src.name == "f16":
            x = b.fpext(x, cg.like(x, F32))
        return cg.f32_to_bf16(x)
    if dst.bits > src.bits:
        return b.fpext(x, cg.like(x, dt))
    return b.fptrunc(x, cg.like(x, dt))


def emit_cast(cg: FunctionCodegen, inst: Instruction):
    src, dst = inst.slots["a"].type, inst.results[0].type
    x = cg.raw(inst.slots["a"])
    if isinstance(x, Lanes) and dst.is_int:
        r = cg.lanes_cast(x, LLTYPE[dst.name])
        if r is not None:
            return r
    return convert(cg, cg.get(inst.slots["a"]), src, dst)


_MATH = {"cos": "llvm.cos", "sin": "llvm.sin", "exp": "llvm.exp", "exp2": "llvm.exp2",
         "log": "llvm.log", "log2": "llvm.log2"}


def _cexp(cg: FunctionCodegen, x: Cplx) -> Cplx:
    b = cg.b
    t = x.re.type.element if is_vec(x.re) else x.re.type
    if t == F64:
        ret = ir.LiteralStructType([F64, F64])
        fn = cg.extern("cexp", ret, [F64, F64])

        def one(re_, im_):
            r = b.call(fn, [re_, im_])
            return b.extract_value(r, 0), b.extract_value(r, 1)
    else:
        v2 = ir.VectorType(F32, 2)
        fn = cg.extern("cexpf", v2, [v2])

        def one(re_, im_):
            v = b.insert_element(undef_of(v2), re_, ir.Constant(I32, 0))
            v = b.insert_element(v, im_, ir.Constant(I32, 1))
            r = b.call(fn, [v])
            return b.extract_element(r, ir.Constant(I32, 0)), b.extract_element(r, ir.Constant(I32, 1))
    if not is_vec(x.re):
        return Cplx(*one(x.re, x.im))
    x = Cplx(*cg.match(x.re, x.im))
    out = lane_loop(cg, None, lambda lane: list(one(b.extract_element(x.re, lane),
                                                    b.extract_element(x.im, lane))), [t, t],
                    x.re.type.count)
    return Cplx(*out)


def _vector_math(cg: FunctionCodegen, fn: str, x) -> Optional[ir.Value]:
    """fn of a vector through libmvec, in pieces of its vector length (None: not there)."""
    from . import jit

    if not is_vec(x):
        return None
    elem = x.type.element
    entry = jit.vector_math().get((fn, "f32" if elem == F32 else "f64"))
    if entry is None:
        return None
    symbol, n = entry
    b = cg.b
    W = x.type.count
    total = -(-W // n) * n
    if total != W:  # pad with copies of lane 0
        x = b.shuffle_vector(x, x, VectorConstant(I32, [k if k < W else 0 for k in range(total)]))
    vt = ir.VectorType(elem, n)
    callee = cg.extern(symbol, vt, [vt])
    pieces = []
    for k in range(0, total, n):
        piece = b.shuffle_vector(x, x, VectorConstant(I32, list(range(k, k + n))))
        pieces.append(b.call(callee, [piece]))
    while len(pieces) > 1:
        m = pieces[0].type.count
        cat = VectorConstant(I32, list(range(2 * m)))
        nxt = [b.shuffle_vector(pieces[i], pieces[i + 1], cat) for i in range(0, len(pieces) - 1, 2)]
        if len(pieces) % 2:
            last = pieces[-1]
            pad = b.shuffle_vector(last, last, VectorConstant(I32, [k % m for k in range(2 * m)]))
            nxt.append(pad)
        pieces = nxt
    out = pieces[0]
    if out.type.count != W:
        out = b.shuffle_vector(out, out, VectorConstant(I32, list(range(W))))
    return out


def emit_math(cg: FunctionCodegen, inst: Instruction):
    base = inst.opcode[len("native_"):] if inst.opcode.startswith("native_") else inst.opcode
    t = inst.results[0].type
    x = cg.get(inst.slots["a"])
    b = cg.b
    if t.is_complex:
        if base == "exp2":
            lt = LLTYPE[t.name]
            ln2 = float(np.float32(math.log(2.0))) if t.name == "c32" else math.log(2.0)
            # x * ln2 as a complex product, as NumPy computes it (inf * 0 gives NaN)
            x = _complex_binary(cg, "mul", x, Cplx(cg.const_like(x.re, lt, ln2),
                                                   cg.const_like(x.re, lt, 0.0)))
        return _cexp(cg, x)
    if t.name == "bf16":
        y = cg.bf16_to_f32(x)
    elif t.name == "f16":
        y = b.fpext(x, cg.like(x, F32))
    else:
        y = x
    r = _vector_math(cg, base, y) or cg.intrinsic(_MATH[base], y.type, [y], [y.type])
    if t.name == "bf16":
        return cg.f32_to_bf16(r)
    if t.name == "f16":
        return b.fptrunc(r, x.type)
    return r


#: the instructions on numbers (of any representation but coopmatrix)
EMITTERS: Dict[str, Callable] = {
    "constant": emit_constant,
    **dict.fromkeys(BUILTIN_TYPES, emit_builtin),
    **dict.fromkeys(ARITH_BINARY, emit_binary),
    **dict.fromkeys(ARITH_UNARY, emit_unary),
    **dict.fromkeys(_ICMP, emit_compare),
    "cast": emit_cast,
    **dict.fromkeys((*_MATH, *("native_" + k for k in _MATH)), emit_math),
}
