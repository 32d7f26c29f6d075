"""The verifier: every rule the language reference states, checked on the IR.

Structural rules come from the instruction table (region kinds, SSA visibility,
region arguments); each instruction family has one function below with the
"Restrictions" list of its spec section.  All errors of a program are collected;
each points at the offending instruction's source range, with notes pointing at the
definitions of the values involved.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Set

from ..diagnostics import CompileError, Diagnostic
from ..ir.constants import literal_fits
from ..ir.core import Function, Instruction, Location, Program, Region, Value
from ..ir.layout import layout_of
from ..ir.ops import COLLECTIVE, KNOWN_ATTRIBUTE_NAMES, OPS, SPMD, YIELDING_OPS
from ..ir.traits import blas_shape_rules, shapes_of
from ..ir.types import (BOOL, DYNAMIC, I32, INDEX, BoolType, CoopMatrixType, GroupType,
                        MemrefType, ScalarType, Type, VoidType, cast_allowed, promotable, promote,
                        stride_error)

#: largest alignment alloca may request, in bytes (the default alignment of local memory)
ALLOCA_MAX_ALIGNMENT = 64


class Invalid(Exception):
    """One violated rule; carries the message and the values to point at."""

    def __init__(self, message: str, *values: Value):
        super().__init__(message)
        self.message = message
        self.values = values


def _name(v: Value) -> str:
    return "%" + (v.name if v.name is not None else "?")


def _dims(shape) -> str:
    return "x".join("?" if d is DYNAMIC else str(d) for d in shape) or "scalar"


def _same_dim(a, b) -> bool:
    return a is DYNAMIC or b is DYNAMIC or a == b


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(_same_dim(x, y) for x, y in zip(a, b))


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _is_int_attr(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _plural(n: int, word: str, plural: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _attr(x) -> str:
    """An attribute value as written in the program text."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, str):
        return f'"{x}"'
    if isinstance(x, list):
        return "[" + ",".join(_attr(y) for y in x) + "]"
    if isinstance(x, dict):
        return "{" + ",".join(f"{k}={_attr(v)}" for k, v in x.items()) + "}"
    return str(x)


# ---- type helpers used by the family checks ---------------------------------------------
def scalar(v: Value, what: str) -> ScalarType:
    if not isinstance(v.type, ScalarType):
        raise Invalid(f"{what} must have a number type, but {_name(v)} has type {v.type}", v)
    return v.type


def memref(v: Value, what: str) -> MemrefType:
    if not isinstance(v.type, MemrefType):
        raise Invalid(f"{what} must be a memref, but {_name(v)} has type {v.type}", v)
    return v.type


def coopmatrix(v: Value, what: str) -> CoopMatrixType:
    if not isinstance(v.type, CoopMatrixType):
        raise Invalid(f"{what} must be a coopmatrix, but {_name(v)} has type {v.type}", v)
    return v.type


def integer(v: Value, what: str) -> ScalarType:
    t = v.type
    if not (isinstance(t, ScalarType) and t.is_int):
        raise Invalid(f"{what} must have an integer type, but {_name(v)} has type {t}", v)
    return t


def index_values(values: Sequence[Value], what: str) -> None:
    for v in values:
        if v.type != INDEX:
            raise Invalid(f"{what} must have type index, but {_name(v)} has type {v.type}", v)


def expect_type(inst: Instruction, expected: Type, what: str = "the result type") -> None:
    got = inst.results[0].type
    if got != expected:
        raise Invalid(f"{what} must be {expected}, not {got}")


def inferred(inst: Instruction) -> Type:
    """The result type the instruction table's rule gives (after the operands are checked)."""
    t = inst.opdef.result_type(inst.slots, inst.attrs, inst.modifiers)
    assert t is not None, f"no result type rule fits checked '{inst.opcode}'"
    return t


def expect_inferred(inst: Instruction, what: str = "the result type") -> None:
    expect_type(inst, inferred(inst), what)


def require_order(t: MemrefType, orders, what: str) -> None:
    if t.order not in orders:
        want = ", ".join(str(o) for o in orders[:-1]) + (" or " if len(orders) > 1 else "") \
            + str(orders[-1])
        raise Invalid(f"{what} must have order {want}, but has order {t.order} ({t})")


def require_promotable(a: ScalarType, b: ScalarType, what_a: str, what_b: str) -> None:
    if not promotable(a, b):
        raise Invalid(f"type {a} of {what_a} cannot be promoted to type {b} of {what_b}")


def _dtype_name(t: ScalarType) -> str:
    return {"int": "integer", "float": "floating-point", "complex": "complex"}[t.kind]


def _constant_value(v: Value):
    owner = v.owner
    if owner is not None and owner.opcode == "constant":
        return owner.attrs.get("value")
    return None


# ---- the verifier -----------------------------------------------------------------------
class Verifier:
    def __init__(self, program: Program):
        self.program = program
        self.diagnostics: List[Diagnostic] = []
        self.func: Optional[Function] = None

    def report(self, loc: Location, message: str, values: Sequence[Value] = ()) -> None:
        notes = [(v.loc, f"{_name(v)} is {'declared' if v.owner is None else 'defined'} here")
                 for v in values if v.loc.line]
        self.diagnostics.append(Diagnostic(loc, message, notes))

    @property
    def subgroup_size(self) -> Optional[int]:
        """The function's subgroup size when it is valid (an invalid one is reported once,
        at the attribute; the rules that depend on it are then not checked)."""
        sgs = self.func.subgroup_size if self.func else None
        return sgs if _is_int_attr(sgs) and _is_pow2(sgs) else None

    # ---- functions ---------------------------------------------------------------
    def verify(self) -> None:
        for func in self.program.functions:
            self.func = func
            self.verify_function(func)
        if self.diagnostics:
            raise CompileError(self.diagnostics, self.program.source, self.program.filename)

    def verify_function(self, func: Function) -> None:
        try:
            self.check_function_attributes(func)
        except Invalid as e:
            self.report(func.attrs_loc, e.message)
        visible: Set[Value] = set()
        for arg in func.args:
            v = arg.value
            try:
                if isinstance(v.type, CoopMatrixType):
                    raise Invalid("function arguments must not have coopmatrix type")
                if isinstance(v.type, VoidType):
                    raise Invalid("function arguments must not have void type")
                self.check_type(v.type)
                self.check_parameter_attributes(arg.attrs, v.type)
            except Invalid as e:
                self.report(v.loc if not arg.attrs else v.loc.span(arg.attrs_loc), e.message)
            visible.add(v)
        self.verify_region(func.body, COLLECTIVE, visible, None)

    def check_function_attributes(self, func: Function) -> None:
        for key, value in func.attrs.items():
            if key == "subgroup_size":
                if not _is_int_attr(value) or not _is_pow2(value):
                    raise Invalid("subgroup_size must be a positive power of two, not "
                                  f"{_attr(value)}")
            elif key == "work_group_size":
                if not (isinstance(value, list) and len(value) == 2
                        and all(_is_int_attr(x) and x > 0 for x in value)):
                    raise Invalid("work_group_size must be an array of two positive integers, not "
                                  f"{_attr(value)}")
            elif key in KNOWN_ATTRIBUTE_NAMES:
                raise Invalid(f"attribute '{key}' is not valid on a function "
                              "(allowed: subgroup_size, work_group_size)")
        sgs, wgs = func.subgroup_size, func.work_group_size
        if sgs and wgs and wgs[0] % sgs:
            raise Invalid(f"work_group_size[0] = {wgs[0]} must be a multiple of the subgroup "
                          f"size {sgs}")

    def check_parameter_attributes(self, attrs: dict, t: Type) -> None:
        if not attrs:
            return
        mt = t.memref if isinstance(t, GroupType) else t
        if not isinstance(mt, MemrefType):
            raise Invalid(f"only memref and group arguments take attributes, not {t}")
        for key, value in attrs.items():
            if key == "alignment":
                self.check_alignment(value, mt.element)
            elif key in ("shape_gcd", "stride_gcd"):
                dims = mt.shape if key == "shape_gcd" else mt.stride
                what = "mode sizes" if key == "shape_gcd" else "strides"
                if not (isinstance(value, list) and all(_is_int_attr(x) and x > 0 for x in value)):
                    raise Invalid(f"{key} must be an array of positive integers, not "
                                  f"{_attr(value)}")
                if len(value) > len(dims):
                    raise Invalid(f"{key} has {_plural(len(value), 'entry', 'entries')} but the "
                                  f"memref has order {len(dims)}")
                for i, (d, g) in enumerate(zip(dims, value)):
                    if d is not DYNAMIC and d % g:
                        raise Invalid(f"{key}[{i}] = {g} does not divide the static {what[:-1]} {d}")
            elif key in KNOWN_ATTRIBUTE_NAMES:
                raise Invalid(f"attribute '{key}' is not valid on an argument "
                              "(allowed: alignment, shape_gcd, stride_gcd)")

    @staticmethod
    def check_alignment(value, element: ScalarType) -> None:
        if not _is_int_attr(value) or not _is_pow2(value):
            raise Invalid(f"alignment must be a positive power of two, not {_attr(value)}")
        if value % element.size:
            raise Invalid(f"alignment {value} must be a multiple of the size of {element} "
                          f"({element.size} bytes)")

    def check_type(self, t: Type) -> None:
        """Rules of a type that the parser cannot see for builder-made IR."""
        if isinstance(t, GroupType):
            self.check_type(t.memref)
            if t.size is not DYNAMIC and t.size <= 0:
                raise Invalid("group size must be positive")
        elif isinstance(t, MemrefType):
            if len(t.stride) != len(t.shape):
                raise Invalid(f"strided layout has {len(t.stride)} entries but the memref has "
                              f"order {len(t.shape)}")
            if any(s is not DYNAMIC and s <= 0 for s in t.shape):
                raise Invalid("memref mode sizes must be positive")
            problem = stride_error(t.shape, t.stride)
            if problem:
                raise Invalid(problem)
        elif isinstance(t, CoopMatrixType):
            if t.rows <= 0 or t.cols <= 0:
                raise Invalid("coopmatrix rows and columns must be positive")
            if not _is_pow2(t.rows):
                raise Invalid(f"coopmatrix rows must be a power of two (the distribution over "
                              f"the subgroup requires it), not {t.rows}")

    # ---- regions -----------------------------------------------------------------
    def verify_region(self, region: Region, kind: str, visible: Set[Value],
                      parent: Optional[Instruction]) -> None:
        inner = set(visible)
        inner.update(region.args)
        last = len(region.instructions) - 1
        for i, inst in enumerate(region.instructions):
            if inst.opcode == "yield" and (i != last or parent is None
                                           or parent.opcode not in YIELDING_OPS):
                where = "as the last instruction of" if parent is not None \
                    and parent.opcode in YIELDING_OPS else "inside"
                self.report(inst.loc, f"yield is only allowed {where} the region of for, if or "
                            "cooperative_matrix_apply")
            self.verify_instruction(inst, kind, inner)
            inner.update(inst.results)

    def verify_instruction(self, inst: Instruction, kind: str, visible: Set[Value]) -> None:
        opdef = OPS.get(inst.opcode)
        if opdef is None:
            self.report(inst.loc, f"unknown instruction '{inst.opcode}'")
            return
        try:
            if opdef.kind == COLLECTIVE and kind == SPMD:
                raise Invalid(f"collective instruction '{inst.opcode}' must not be called from an "
                              "SPMD region")
            if opdef.kind == SPMD and kind != SPMD:
                raise Invalid(f"SPMD instruction '{inst.opcode}' must not be called from a "
                              "collective region (use it inside parallel, foreach or foreach_tile)")
            for v in inst.operands:
                if v not in visible:
                    raise Invalid(f"{_name(v)} is used where it is not defined: values are visible "
                                  "only after their definition and inside nested regions", v)
            for r in inst.results:
                self.check_type(r.type)
            if len(inst.regions) < len([e for e in opdef.regions if e.index == 0]):
                raise Invalid(f"'{inst.opcode}' needs a region")
            CHECKS[opdef.family](self, inst)
        except Invalid as e:
            self.report(inst.loc, e.message, e.values)
        for element, region in zip(opdef.regions, inst.regions):
            self.verify_region(region, SPMD if element.kind == SPMD else kind, visible, inst)

    # ---- yields ------------------------------------------------------------------
    def check_yield(self, inst: Instruction, region: Region, types: List[Type], what: str) -> None:
        last = region.instructions[-1] if region.instructions else None
        if last is None or last.opcode != "yield":
            if types:
                raise Invalid(f"{what} must end with a yield of {len(types)} value"
                              f"{'s' if len(types) != 1 else ''} ({', '.join(map(str, types))})")
            return
        values = last.slots.get("values", [])
        got = [v.type for v in values]
        if got != list(types):
            raise Invalid(f"{what} yields ({', '.join(map(str, got))}) but "
                          f"({', '.join(map(str, types))}) is expected", *values)


# ---- the instruction families (spec: "Restrictions" of each section) --------------------
def check_alloca(vf: Verifier, inst: Instruction) -> None:
    t = inst.results[0].type
    if not isinstance(t, MemrefType):
        raise Invalid(f"alloca must return a memref, not {t}")
    if DYNAMIC in t.shape or DYNAMIC in t.stride:
        raise Invalid(f"alloca needs a size known at compile time, but {t} has dynamic modes or strides")
    if t.space != "local":
        raise Invalid(f"alloca returns local memory: the type must have address space local ({t})")
    for key, value in inst.attrs.get("attributes", {}).items():
        if key == "alignment":
            vf.check_alignment(value, t.element)
            if value > ALLOCA_MAX_ALIGNMENT:
                raise Invalid(f"alloca alignment {value} is larger than the default alignment "
                              f"{ALLOCA_MAX_ALIGNMENT}")
        elif key in KNOWN_ATTRIBUTE_NAMES:
            raise Invalid(f"attribute '{key}' is not valid on alloca (allowed: alignment)")


def _check_atomic_beta(inst: Instruction) -> None:
    if inst.modifier("atomic"):
        beta = inst.slots["beta"]
        value = _constant_value(beta)
        if value is None or isinstance(value, bool):
            raise Invalid(f"with .atomic, beta must be a constant 0 or 1, but {_name(beta)} is "
                          "not a constant", beta)
        if value not in (0, 1):
            shown = f"[{value.real},{value.imag}]" if isinstance(value, complex) else str(value)
            raise Invalid(f"with .atomic, beta must be a constant 0 or 1, but {_name(beta)} is "
                          f"{shown}", beta)


def check_blas(vf: Verifier, inst: Instruction) -> None:
    op = inst.opcode
    roles = inst.opdef.blas
    names = roles.names
    alpha = scalar(inst.slots["alpha"], "alpha")
    beta = scalar(inst.slots["beta"], "beta")
    A = memref(inst.slots["A"], names[0])
    out = memref(inst.slots[roles.written], names[-1])
    ta, tb = (inst.modifier(t) if any(m.slot == t for m in inst.opdef.modifiers) else "n"
              for t in ("ta", "tb"))
    B = memref(inst.slots["B"], names[1]) if "B" in roles.reads else None
    if op == "axpby":
        require_order(out, (0, 1, 2), "B")
    elif op == "cumsum":
        if A.order < 1:
            raise Invalid(f"A must have order 1 or more, but has order 0 ({A})")
        mode = inst.attrs["mode"]
        if not 0 <= mode < A.order:
            raise Invalid(f"summation mode {mode} is out of range for A of order {A.order}")
    elif op == "sum":
        require_order(out, (0, 1), "b")
        if A.order != out.order + 1:
            raise Invalid(f"A must have order {out.order + 1} (one more than b), not {A.order}")
    elif op == "gemm":
        for t, name in ((A, "A"), (B, "B"), (out, "C")):
            require_order(t, (2,), name)
    elif op == "gemv":
        require_order(A, (2,), "A")
        require_order(B, (1,), "b")
        require_order(out, (1,), "c")
    elif op == "ger":
        require_order(A, (1,), "a")
        require_order(B, (1,), "b")
        require_order(out, (2,), "C")
    else:  # hadamard
        require_order(A, (1, 2), "A")
        if not (A.order == B.order == out.order):
            raise Invalid(f"A, B and C must have the same order ({A.order}, {B.order}, {out.order})")
    shapes = {slot: inst.slots[slot].type.shape for slot in roles.slots}
    for left, right, message in blas_shape_rules(op, shapes, ta, tb):
        if not _same_shape(left, right):
            raise Invalid(message)
    if B is None:
        require_promotable(alpha, A.element, "alpha", "A")
        require_promotable(A.element, out.element, "A", names[1])
        require_promotable(beta, out.element, "beta", names[1])
        _check_atomic_beta(inst)
        return
    a, b, c = names
    ab = promote(A.element, B.element)
    if ab is None:
        raise Invalid(f"element types {A.element} of {a} and {B.element} of {b} cannot be "
                      "promoted to a common type")
    require_promotable(alpha, ab, "alpha", f"promote({a}, {b})")
    require_promotable(ab, out.element, f"promote({a}, {b})", c)
    require_promotable(beta, out.element, "beta", c)
    _check_atomic_beta(inst)


def check_foreach(vf: Verifier, inst: Instruction) -> None:
    lower, upper = inst.slots["from"], inst.slots["to"]
    if not lower or len(lower) != len(upper):
        raise Invalid(f"the from and to lists must have the same, non-zero length "
                      f"({len(lower)} and {len(upper)})")
    for a, b in zip(lower, upper):
        integer(a, "a loop bound")
        if a.type != b.type:
            raise Invalid(f"from and to must have the same integer type ({_name(a)}: {a.type}, "
                          f"{_name(b)}: {b.type})", a, b)
    n = len(lower)
    tiled = inst.opcode == "foreach_tile"
    expected = [v.type for v in lower] * (2 if tiled else 1)
    args = inst.regions[0].args
    if len(args) != len(expected) or [a.type for a in args] != expected:
        raise Invalid(f"{n} loop variable{'s' if n != 1 else ''}"
                      f"{' and as many tile sizes' if tiled else ''} must be declared, with the "
                      "types of the loop bounds")
    if tiled:
        shape = inst.attrs["tile_shape"]
        if len(shape) != n:
            raise Invalid(f"the tile shape has {_plural(len(shape), 'entry', 'entries')} but the "
                          f"loop has {_plural(n, 'mode')}")
        if any(s <= 0 for s in shape):
            raise Invalid("tile shape entries must be positive")
        sgs = vf.subgroup_size
        if sgs and shape[0] % sgs:
            raise Invalid(f"the first tile shape entry ({shape[0]}) must be a multiple of the "
                          f"subgroup size {sgs}")


def check_parallel(vf: Verifier, inst: Instruction) -> None:
    pass


def check_lifetime_stop(vf: Verifier, inst: Instruction) -> None:
    v = inst.slots["object"]
    if v.owner is None or v.owner.opcode != "alloca":
        raise Invalid(f"lifetime_stop needs a value returned by alloca ({_name(v)} is not)", v)


_BOOL_OPS = ("and", "or", "xor", "not")
_INT_ONLY = ("shl", "shr")
_NO_COMPLEX = ("rem", "max", "min")


def _arith_element(inst: Instruction, t: Type) -> Type:
    if isinstance(t, CoopMatrixType):
        return t.component
    if isinstance(t, (ScalarType, BoolType)):
        return t
    raise Invalid(f"'{inst.opcode}' needs a boolean, number or coopmatrix operand, not {t}")


def _allowed_for_arith(op: str, e: Type, is_matrix: bool) -> None:
    if isinstance(e, BoolType):
        if op not in _BOOL_OPS or is_matrix:
            raise Invalid(f"boolean type is not supported by '{op}'")
        return
    assert isinstance(e, ScalarType)
    if op in _BOOL_OPS + _INT_ONLY and not e.is_int:
        raise Invalid(f"{_dtype_name(e)} type is not supported by '{op}' (only integer types"
                      f"{' or bool' if op in _BOOL_OPS else ''})")
    if op in _NO_COMPLEX + ("conj", "im", "re") and e.is_complex != (op in ("conj", "im", "re")):
        if op in _NO_COMPLEX:
            raise Invalid(f"complex type is not supported by '{op}'")
        raise Invalid(f"'{op}' needs a complex operand, not {e}")


def check_arith_binary(vf: Verifier, inst: Instruction) -> None:
    a, b = inst.slots["a"], inst.slots["b"]
    if a.type != b.type:
        raise Invalid(f"operands must have the same type ({_name(a)}: {a.type}, "
                      f"{_name(b)}: {b.type})", a, b)
    _allowed_for_arith(inst.opcode, _arith_element(inst, a.type), isinstance(a.type, CoopMatrixType))
    expect_inferred(inst, "the result type (the operands' type)")


def check_arith_unary(vf: Verifier, inst: Instruction) -> None:
    a = inst.slots["a"]
    e = _arith_element(inst, a.type)
    _allowed_for_arith(inst.opcode, e, isinstance(a.type, CoopMatrixType))
    if inst.opcode in ("abs", "neg", "conj", "im", "re") and isinstance(e, BoolType):
        raise Invalid(f"boolean type is not supported by '{inst.opcode}'")
    expect_inferred(inst)


def check_associated(vf: Verifier, inst: Instruction) -> None:
    v = inst.slots["tensor"]
    if not isinstance(v.type, (MemrefType, GroupType)):
        raise Invalid(f"associated needs a memref or group, but {_name(v)} has type {v.type}", v)
    expect_inferred(inst)


def _check_indexed(inst: Instruction, allow_group: bool) -> Type:
    """Index list of load/store/atomics; returns the type an element access yields."""
    v, idx = inst.slots["tensor"], inst.slots["index"]
    index_values(idx, "indices")
    if isinstance(v.type, GroupType) and allow_group:
        if len(idx) != 1:
            raise Invalid(f"a group is indexed by one index, not {len(idx)}")
        return v.type.memref
    if allow_group and not isinstance(v.type, MemrefType):
        raise Invalid(f"the tensor operand must be a memref or group, but {_name(v)} has type "
                      f"{v.type}", v)
    t = memref(v, "the tensor operand")
    if len(idx) != t.order:
        raise Invalid(f"{_plural(len(idx), 'index', 'indices')} given for a memref of order "
                      f"{t.order} ({t})")
    return t.element


def check_load(vf: Verifier, inst: Instruction) -> None:
    _check_indexed(inst, allow_group=inst.opcode == "load")
    expected = inferred(inst)
    what = "the group's memref type" if isinstance(expected, MemrefType) else "the element type"
    expect_type(inst, expected, f"the result type ({what})")


def check_store(vf: Verifier, inst: Instruction) -> None:
    element = _check_indexed(inst, allow_group=False)
    value = inst.slots["value"]
    if value.type != element:
        raise Invalid(f"the stored value has type {value.type} but the memref holds {element}", value)
    if inst.opdef.family == "atomic_update":
        if inst.opcode != "atomic_add" and element.is_complex:
            raise Invalid(f"complex type is not supported by '{inst.opcode}'")
        expect_inferred(inst, "the result type (the element type)")


def check_builtin(vf: Verifier, inst: Instruction) -> None:
    expect_inferred(inst, f"the type of {inst.opcode}")


def check_cast(vf: Verifier, inst: Instruction) -> None:
    a = inst.slots["a"]
    src, dst = a.type, inst.results[0].type
    if isinstance(src, CoopMatrixType) or isinstance(dst, CoopMatrixType):
        if not (isinstance(src, CoopMatrixType) and isinstance(dst, CoopMatrixType)):
            raise Invalid(f"cast between a coopmatrix and a scalar ({src} to {dst})", a)
        if src.shape != dst.shape:
            raise Invalid(f"cast must keep the coopmatrix shape ({_dims(src.shape)} to "
                          f"{_dims(dst.shape)})", a)
        if src.use != dst.use and not (src.use == "matrix_acc" and dst.use in ("matrix_a", "matrix_b")):
            raise Invalid(f"cast from {src.use} to {dst.use} is not allowed (only matrix_acc to "
                          "matrix_a or matrix_b changes the use)", a)
        src, dst = src.component, dst.component
    if not isinstance(src, ScalarType) or not isinstance(dst, ScalarType):
        raise Invalid(f"cast converts number types, not {src} to {dst}", a)
    if not cast_allowed(src, dst):
        raise Invalid(f"forbidden cast from complex type {src} to non-complex type {dst}", a)


def check_compare(vf: Verifier, inst: Instruction) -> None:
    a, b = inst.slots["a"], inst.slots["b"]
    if a.type != b.type:
        raise Invalid(f"operands must have the same type ({_name(a)}: {a.type}, "
                      f"{_name(b)}: {b.type})", a, b)
    t = scalar(a, "the operands")
    if t.is_complex and inst.opcode not in ("equal", "not_equal"):
        raise Invalid(f"complex numbers are not ordered: '{inst.opcode}' does not support {t}")
    expect_inferred(inst)


def check_constant(vf: Verifier, inst: Instruction) -> None:
    t = inst.results[0].type
    value = inst.attrs["value"]
    e = t.component if isinstance(t, CoopMatrixType) else t
    if not isinstance(e, (ScalarType, BoolType)):
        raise Invalid(f"a constant must have boolean, number or coopmatrix type, not {t}")
    if not literal_fits(value, t):
        need = {"int": "an integer constant", "float": "a floating-point constant (e.g. 1.0)",
                "complex": "a complex constant [re, im]"}
        want = "true or false" if isinstance(e, BoolType) else need[e.kind]
        raise Invalid(f"type {t} requires {want}")
    if isinstance(e, ScalarType) and e.is_int:
        lo, hi = -(1 << (e.bits - 1)), (1 << (e.bits - 1)) - 1
        if not lo <= value <= hi:
            raise Invalid(f"integer constant {value} does not fit in {e} ({lo} to {hi})")


def check_expand(vf: Verifier, inst: Instruction) -> None:
    t = memref(inst.slots["tensor"], "the expanded operand")
    mode, shape = inst.attrs["mode"], inst.slots["shape"]
    if not 0 <= mode < t.order:
        raise Invalid(f"mode {mode} is out of range for a memref of order {t.order}")
    if len(shape) < 2:
        raise Invalid("the expand shape needs at least two entries")
    dims = []
    for e in shape:
        if isinstance(e, Value):
            index_values([e], "dynamic expand sizes")
            dims.append(DYNAMIC)
        elif e <= 0:
            raise Invalid(f"expand sizes must be positive, not {e}")
        else:
            dims.append(e)
    size = t.shape[mode]
    static = [d for d in dims if d is not DYNAMIC]
    product = 1
    for d in static:
        product *= d
    if size is not DYNAMIC:
        if len(static) == len(dims) and product != size:
            raise Invalid(f"the expand shape {_dims(dims)} has {product} elements but mode {mode} "
                          f"has size {size}")
        if size % product:
            raise Invalid(f"the static part of the expand shape ({product}) does not divide the "
                          f"size {size} of mode {mode}")
    _check_view_type(inst, inferred(inst))


def _check_view_type(inst: Instruction, expected: MemrefType, hint: str = "") -> None:
    """Result of subview/expand/fuse: shape as computed; each stride as computed or '?'."""
    got = inst.results[0].type
    if not isinstance(got, MemrefType):
        raise Invalid(f"the result must be a memref, not {got}")
    ok = (got.element == expected.element and got.space == expected.space
          and got.shape == expected.shape and len(got.stride) == len(expected.stride)
          and all(g is DYNAMIC or g == e for g, e in zip(got.stride, expected.stride)))
    if not ok:
        hint = hint if got.order != expected.order else ""
        raise Invalid(f"the result type must be {expected} (strides may be replaced by ?), "
                      f"not {got}{hint}")


def check_for(vf: Verifier, inst: Instruction) -> None:
    lower, upper, step = inst.slots["from"], inst.slots["to"], inst.slots.get("step")
    t = integer(lower, "the loop range")
    for v in (upper, step):
        if v is not None and v.type != t:
            raise Invalid(f"from, to and step must have the same integer type ({_name(lower)}: {t}, "
                          f"{_name(v)}: {v.type})", lower, v)
    init = inst.slots.get("init", [])
    types = [r.type for r in inst.results]
    if len(init) != len(types):
        raise Invalid(f"{len(init)} loop-carried value{'s' if len(init) != 1 else ''} but "
                      f"{len(types)} result type{'s' if len(types) != 1 else ''}")
    for v, rt in zip(init, types):
        if v.type != rt:
            raise Invalid(f"initial value {_name(v)} has type {v.type} but the loop-carried value "
                          f"has type {rt}", v)
        if not isinstance(rt, (BoolType, ScalarType, CoopMatrixType)):
            raise Invalid(f"loop-carried values must be booleans, numbers or coopmatrices, not {rt}")
    args = inst.regions[0].args
    if [a.type for a in args] != [t] + types:
        raise Invalid("the region arguments must be the loop variable and the loop-carried values")
    for key, value in inst.attrs.get("attributes", {}).items():
        if key == "unroll":
            if not (isinstance(value, bool) or (_is_int_attr(value) and value > 0)):
                raise Invalid("unroll must be true, false or a positive unroll count, not "
                              f"{_attr(value)}")
        elif key in KNOWN_ATTRIBUTE_NAMES:
            raise Invalid(f"attribute '{key}' is not valid on for (allowed: unroll)")
    vf.check_yield(inst, inst.regions[0], types, "the loop body")


def check_fuse(vf: Verifier, inst: Instruction) -> None:
    t = memref(inst.slots["tensor"], "the fused operand")
    lo, hi = inst.attrs["from"], inst.attrs["to"]
    if not 0 <= lo < hi < t.order:
        raise Invalid(f"fused modes [{lo},{hi}] must satisfy 0 <= from < to < order ({t.order})")
    for k in range(lo, hi):
        a, s, b = t.stride[k], t.shape[k], t.stride[k + 1]
        if DYNAMIC not in (a, s, b) and a * s != b:
            raise Invalid(f"modes {k} and {k + 1} cannot be fused: stride {a} times size {s} is not "
                          f"stride {b}")
    _check_view_type(inst, inferred(inst))


def check_if(vf: Verifier, inst: Instruction) -> None:
    cond = inst.slots["condition"]
    if cond.type != BOOL:
        raise Invalid(f"the condition must be bool, but {_name(cond)} has type {cond.type}", cond)
    types = [r.type for r in inst.results]
    if types and len(inst.regions) < 2:
        raise Invalid("an if that returns values needs an else region")
    for r in types:
        if not isinstance(r, (BoolType, ScalarType, CoopMatrixType)):
            raise Invalid(f"if may return booleans, numbers or coopmatrices, not {r}")
    vf.check_yield(inst, inst.regions[0], types, "the then-region")
    if len(inst.regions) > 1:
        vf.check_yield(inst, inst.regions[1], types, "the else-region")


MATH_COMPLEX = ("exp", "exp2", "native_exp", "native_exp2")


def check_math(vf: Verifier, inst: Instruction) -> None:
    t = scalar(inst.slots["a"], "the operand")
    if t.is_int or (t.is_complex and inst.opcode not in MATH_COMPLEX):
        allowed = "floating-point or complex" if inst.opcode in MATH_COMPLEX else "floating-point"
        raise Invalid(f"'{inst.opcode}' needs a {allowed} operand, not {t}")
    expect_inferred(inst, "the result type (the operand's type)")


def check_size(vf: Verifier, inst: Instruction) -> None:
    v, mode = inst.slots["tensor"], inst.attrs["mode"]
    if isinstance(v.type, GroupType):
        if mode != 0:
            raise Invalid(f"the size of a group is mode 0, not {mode}")
    else:
        if not isinstance(v.type, MemrefType):
            raise Invalid(f"the operand of size must be a memref or group, but {_name(v)} has "
                          f"type {v.type}", v)
        t = v.type
        if not 0 <= mode < t.order:
            raise Invalid(f"mode {mode} is out of range for a memref of order {t.order}")
    expect_inferred(inst)


def check_subview(vf: Verifier, inst: Instruction) -> None:
    t = memref(inst.slots["tensor"], "the operand of subview")
    slices = inst.slots["slices"]
    if len(slices) != t.order:
        raise Invalid(f"{_plural(len(slices), 'index or slice', 'indices or slices')} given for "
                      f"a memref of order {t.order}")
    for mode, (offset, size) in enumerate(slices):
        for x, what in ((offset, "offset"), (size, "size")):
            if isinstance(x, Value):
                index_values([x], f"a dynamic {what}")
            elif x < 0:
                raise Invalid(f"the {what} of mode {mode} must not be negative")
    reduced = [m for m, (_, size) in enumerate(slices) if isinstance(size, int) and size == 0]
    hint = (f"; a single index (offset without ':size') removes its mode, as in mode"
            f"{'s' if len(reduced) > 1 else ''} {', '.join(map(str, reduced))} here: write "
            "offset:size to keep a mode") if reduced else ""
    _check_view_type(inst, inferred(inst), hint)


def check_yield(vf: Verifier, inst: Instruction) -> None:
    pass  # checked by the instruction owning the region (check_yield of the Verifier)


def check_coop_apply(vf: Verifier, inst: Instruction) -> None:
    a = inst.slots["a"]
    t = coopmatrix(a, "the operand")
    expect_inferred(inst, "the result type (the operand's type)")
    args = inst.regions[0].args
    if [x.type for x in args] != [I32, I32, t.component]:
        raise Invalid(f"the region must declare 3 arguments (row: i32, column: i32, value: "
                      f"{t.component}), not {len(args)}")
    vf.check_yield(inst, inst.regions[0], [t.component], "the region")


def check_coop_load(vf: Verifier, inst: Instruction) -> None:
    m = memref(inst.slots["tensor"], "the memref operand")
    require_order(m, (2,), "the memref")
    index_values([inst.slots["x"], inst.slots["y"]], "the position")
    r = inst.results[0].type
    if not isinstance(r, CoopMatrixType):
        raise Invalid(f"the result must be a coopmatrix, not {r}")
    if r.component != m.element:
        raise Invalid(f"component type {r.component} does not match the memref's element type {m.element}")


def check_coop_store(vf: Verifier, inst: Instruction) -> None:
    v = inst.slots["value"]
    t = coopmatrix(v, "the stored value")
    m = memref(inst.slots["tensor"], "the memref operand")
    require_order(m, (2,), "the memref")
    index_values([inst.slots["x"], inst.slots["y"]], "the position")
    if t.component != m.element:
        raise Invalid(f"component type {t.component} does not match the memref's element type {m.element}", v)
    if inst.opdef.has_results:
        if inst.opcode != "cooperative_matrix_atomic_add" and t.component.is_complex:
            raise Invalid(f"complex type is not supported by '{inst.opcode}'")
        expect_inferred(inst, "the result type (the stored value's type)")


def check_coop_construct(vf: Verifier, inst: Instruction) -> None:
    r = inst.results[0].type
    if not isinstance(r, CoopMatrixType):
        raise Invalid(f"the result must be a coopmatrix, not {r}")
    a = inst.slots["a"]
    if a.type != r.component:
        raise Invalid(f"the number has type {a.type} but the component type is {r.component}", a)


def _work_item_length(vf: Verifier, t: CoopMatrixType) -> Optional[int]:
    """Entries per work-item (``ttlc.ir.layout``), when the subgroup size is known."""
    sgs = vf.subgroup_size
    if not sgs or not _is_pow2(t.rows):  # (invalid rows are reported where the type is)
        return None
    return layout_of(t, sgs).registers


def _check_work_item_index(vf: Verifier, inst: Instruction, t: CoopMatrixType) -> None:
    index = inst.attrs["index"]
    length = _work_item_length(vf, t)
    if index < 0 or (length is not None and index >= length):
        bound = f"0 to {length - 1}" if length is not None else "indices are non-negative"
        raise Invalid(f"index {index} is outside the work-item's part of {t} ({bound})")


def check_coop_extract(vf: Verifier, inst: Instruction) -> None:
    t = coopmatrix(inst.slots["matrix"], "the operand")
    _check_work_item_index(vf, inst, t)
    expect_inferred(inst, "the result type (the component type)")


def check_coop_insert(vf: Verifier, inst: Instruction) -> None:
    t = coopmatrix(inst.slots["matrix"], "the matrix operand")
    v = inst.slots["value"]
    if v.type != t.component:
        raise Invalid(f"the inserted value has type {v.type} but the component type is {t.component}", v)
    _check_work_item_index(vf, inst, t)
    expect_inferred(inst, "the result type (the matrix's type)")


def check_coop_mul_add(vf: Verifier, inst: Instruction) -> None:
    A = coopmatrix(inst.slots["a"], "A")
    B = coopmatrix(inst.slots["b"], "B")
    Cm = coopmatrix(inst.slots["c"], "C")
    D = inst.results[0].type
    for t, use, name in ((A, "matrix_a", "A"), (B, "matrix_b", "B"), (Cm, "matrix_acc", "C")):
        if t.use != use:
            raise Invalid(f"{name} must have use {use}, not {t.use}")
    if not isinstance(D, CoopMatrixType) or D.use != "matrix_acc":
        raise Invalid(f"the result must be a matrix_acc coopmatrix, not {D}")
    if A.cols != B.rows:
        raise Invalid(f"columns of A ({A.cols}) do not match rows of B ({B.rows})")
    if Cm.shape != (A.rows, B.cols):
        raise Invalid(f"C is {_dims(Cm.shape)} but A B is {_dims((A.rows, B.cols))}")
    if D.shape != Cm.shape:
        raise Invalid(f"the result is {_dims(D.shape)} but C is {_dims(Cm.shape)}")
    sgs = vf.subgroup_size
    if sgs and A.rows % sgs:
        raise Invalid(f"rows of A, C and the result ({A.rows}) must be a multiple of the subgroup "
                      f"size {sgs}")
    ab = promote(A.component, B.component)
    if ab is None:
        raise Invalid(f"component types {A.component} of A and {B.component} of B cannot be "
                      "promoted to a common type")
    require_promotable(ab, Cm.component, "promote(A, B)", "C")
    if not cast_allowed(Cm.component, D.component):
        raise Invalid(f"the result component type {D.component} cannot be cast from {Cm.component}")


def check_coop_prefetch(vf: Verifier, inst: Instruction) -> None:
    if inst.attrs["cache_level"] < 0:
        raise Invalid("the cache level must not be negative")
    m = memref(inst.slots["tensor"], "the memref operand")
    require_order(m, (2,), "the memref")
    index_values([inst.slots["x"], inst.slots["y"]], "the position")
    if inst.attrs["rows"] <= 0 or inst.attrs["cols"] <= 0:
        raise Invalid("the prefetched block must have a positive number of rows and columns")


def check_coop_reduce(vf: Verifier, inst: Instruction) -> None:
    a = coopmatrix(inst.slots["a"], "the operand")
    r = inst.results[0].type
    if inst.opcode != "cooperative_matrix_reduce_add" and a.component.is_complex:
        raise Invalid(f"complex type is not supported by '{inst.opcode}'")
    expect_inferred(inst)
    sgs = vf.subgroup_size
    if sgs and a.rows % sgs:
        raise Invalid(f"rows of the operand ({a.rows}) must be a multiple of the subgroup size {sgs}")


def check_coop_scale(vf: Verifier, inst: Instruction) -> None:
    s, m = inst.slots["a"], inst.slots["b"]
    t = coopmatrix(m, "the matrix operand")
    if s.type != t.component:
        raise Invalid(f"the scalar has type {s.type} but the component type is {t.component}", s)
    expect_inferred(inst, "the result type (the matrix's type)")


def check_subgroup_broadcast(vf: Verifier, inst: Instruction) -> None:
    a = inst.slots["a"]
    scalar(a, "the broadcast value")
    lane = inst.slots["lane"]
    if lane.type != I32:
        raise Invalid(f"the lane index must have type i32, but {_name(lane)} has type {lane.type}", lane)
    expect_inferred(inst, "the result type (the value's type)")


def check_subgroup_op(vf: Verifier, inst: Instruction) -> None:
    t = scalar(inst.slots["a"], "the operand")
    if t.is_complex and not inst.opcode.endswith("_add"):
        raise Invalid(f"complex type is not supported by '{inst.opcode}'")
    expect_inferred(inst, "the result type (the operand's type)")


def check_barrier(vf: Verifier, inst: Instruction) -> None:
    pass


def check_check_shapes(vf: Verifier, inst: Instruction) -> None:
    rule, orders, sizes = inst.modifier("rule"), inst.attrs["orders"], inst.slots["sizes"]
    index_values(sizes, "the sizes")
    operands = len(OPS[rule].blas.slots)
    if len(orders) != operands or any(n < 0 for n in orders) or sum(orders) != len(sizes):
        raise Invalid(f"{rule} has {operands} memref operands: give as many orders, and as "
                      f"many sizes as the orders add up to ({len(sizes)} given)")
    try:
        blas_shape_rules(rule, shapes_of(orders, range(len(sizes))))
    except IndexError:
        raise Invalid(f"operands of orders {orders} do not fit the shape rules of {rule}") from None


CHECKS: Dict[str, Callable[[Verifier, Instruction], None]] = {
    "alloca": check_alloca, "blas": check_blas, "foreach": check_foreach,
    "parallel": check_parallel, "lifetime_stop": check_lifetime_stop,
    "arith_binary": check_arith_binary, "arith_unary": check_arith_unary,
    "associated": check_associated, "atomic_load": check_load, "atomic_store": check_store,
    "atomic_update": check_store, "barrier": check_barrier, "builtin": check_builtin,
    "cast": check_cast, "compare": check_compare, "constant": check_constant,
    "expand": check_expand, "for": check_for, "fuse": check_fuse, "if": check_if,
    "load": check_load, "math": check_math, "size": check_size, "subview": check_subview,
    "store": check_store, "yield": check_yield, "coop_apply": check_coop_apply,
    "coop_load": check_coop_load, "coop_store": check_coop_store,
    "coop_atomic_update": check_coop_store, "coop_construct": check_coop_construct,
    "coop_extract": check_coop_extract, "coop_insert": check_coop_insert,
    "coop_mul_add": check_coop_mul_add, "coop_prefetch": check_coop_prefetch,
    "coop_reduce": check_coop_reduce, "coop_scale": check_coop_scale,
    "subgroup_broadcast": check_subgroup_broadcast, "subgroup_op": check_subgroup_op,
    "check_shapes": check_check_shapes, "check_iteration": check_barrier,
}

assert set(CHECKS) == {d.family for d in OPS.values()}, "every family needs a check"


def verify(program: Program) -> Program:
    """Check every rule; raise CompileError listing all violations."""
    Verifier(program).verify()
    return program
