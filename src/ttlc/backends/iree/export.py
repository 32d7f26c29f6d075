"""The iree-vector export: each kernel's cooperative-matrix values as MLIR vectors laid out
with IREE nested layouts (docs/iree-vector.md).

One ``func.func`` per kernel.  Every coopmatrix value of the kernel is a vector of the
shape its layout distributes (the matrix padded to whole tiles), defined once and
passed through ``iree_vector_ext.to_layout`` with the target's layout for its type
(``Target.storage_layout``: the language's layout, or the matrix unit's where it takes
the type), so that IREE checks the layout against the vector shape.  Instructions with
a whole-vector counterpart are translated on the unpadded matrices (``TRANSLATE``:
construct, scale, cast, arithmetic, mul_add, reduce); any other coopmatrix value (loads,
atomics, insert, apply, results and arguments of for and if) and every scalar operand
enters as a function argument.  Memory, control flow and per-work-item code are not
exported.  A kernel without coopmatrix values exports an empty function.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List

from ...diagnostics import CompileError, error
from ...ir.core import Function, Instruction, Program, Value
from ...ir.layout import MatrixLayout, NestedLayout
from ...ir.numerics import accumulate_type
from ...ir.types import F32, I64, CoopMatrixType, ScalarType
from ...target import ExecConfig, Target

#: MLIR's name of each real ttlc number type (complex numbers have no vector type)
ELEMENT = {"i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "index": "index",
           "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}


class _Kernel:
    """The MLIR text of one kernel, built instruction by instruction."""

    def __init__(self, target: Target, S: int, aliases: Dict[str, str]):
        self.target, self.S = target, S
        #: nested_layout attribute -> its alias in the module (``#layoutN``)
        self.aliases = aliases
        self.args: List[str] = []
        self.body: List[str] = []
        #: ttlc value -> its MLIR value (for coopmatrices: the unpadded matrix)
        self.names: Dict[Value, str] = {}
        self.count = 0

    # ---- values and types ---------------------------------------------------------------
    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def emit(self, line: str) -> str:
        """Emit ``%vN = line``; returns %vN."""
        name = self.fresh()
        self.body.append(f"    {name} = {line}")
        return name

    def element(self, t: ScalarType, inst: Instruction) -> str:
        if t.name not in ELEMENT:
            raise self.fail(inst, f"{t} has no MLIR vector element type")
        return ELEMENT[t.name]

    def vector(self, shape, t: ScalarType, inst: Instruction) -> str:
        """The vector type of a matrix of shape; a complex matrix has a last mode of 2
        (real and imaginary part)."""
        if t.is_complex:
            shape, t = tuple(shape) + (2,), t.component
        return f"vector<{'x'.join(map(str, shape))}x{self.element(t, inst)}>"

    def layout(self, t: CoopMatrixType, inst: Instruction) -> MatrixLayout:
        try:
            lay = self.target.storage_layout(t, self.S)
            # the vector: every row, at least every column (padding only at the end)
            lay.nested.check_shape((t.rows, max(t.cols, lay.nested.shape[-1])))
        except ValueError as e:
            raise self.fail(inst, str(e)) from None
        return lay

    @staticmethod
    def nested(t: CoopMatrixType, lay: MatrixLayout) -> NestedLayout:
        """The layout of t's vector: a complex component's two parts are consecutive
        registers of the lane holding it (one more mode, an element tile of 2)."""
        n = lay.nested
        if not t.component.is_complex:
            return n
        return NestedLayout(*(f + (e,) for f, e in zip(
            (n.subgroup_tile, n.batch_tile, n.outer_tile, n.thread_tile, n.element_tile,
             n.subgroup_strides, n.thread_strides), (1, 1, 1, 1, 2, 0, 0))))

    def fail(self, inst: Instruction, message: str) -> CompileError:
        return error(inst.loc, f"iree-vector: {inst.opcode}: {message} (target "
                               f"{self.target.name})")

    def value(self, v: Value, inst: Instruction) -> str:
        """The MLIR value of v (unpadded for a coopmatrix); a value defined by code the
        export does not translate becomes a function argument."""
        if v not in self.names:
            arg = f"%arg{len(self.args)}"
            t = v.type
            if isinstance(t, CoopMatrixType):
                lay = self.layout(t, inst)
                self.args.append(f"{arg}: {self.vector(lay.nested.shape, t.component, inst)}")
                x = self.annotate(arg, t, lay, inst)
                # complex matrices are never operands of translated instructions
                self.names[v] = x if t.component.is_complex else self.unpad(x, t, lay, inst)
            else:
                self.args.append(f"{arg}: {self.element(t, inst)}")
                self.names[v] = arg
        return self.names[v]

    def annotate(self, x: str, t: CoopMatrixType, lay: MatrixLayout, inst) -> str:
        nested = self.nested(t, lay)
        alias = self.aliases.setdefault(nested.to_iree(), f"#layout{len(self.aliases)}")
        return self.emit(f"iree_vector_ext.to_layout {x} to layout({alias}) : "
                         f"{self.vector(lay.nested.shape, t.component, inst)}")

    def unpad(self, x: str, t: CoopMatrixType, lay: MatrixLayout, inst) -> str:
        """The rows x cols matrix of a padded vector."""
        shape = lay.nested.shape
        if shape == t.shape:
            return x
        return self.emit(f"vector.extract_strided_slice {x} offsets = [0, 0], sizes = "
                         f"[{t.rows}, {t.cols}], strides = [1, 1] : "
                         f"{self.vector(shape, t.component, inst)} to "
                         f"{self.vector(t.shape, t.component, inst)}")

    def define(self, inst: Instruction, x: str) -> None:
        """Bind the result of inst to the unpadded matrix x: padded with zeros to the
        shape of its layout and passed through to_layout."""
        t = inst.result.type
        lay = self.layout(t, inst)
        shape = lay.nested.shape
        padded = x
        if shape != t.shape:
            zero = "0.0" if t.component.is_float else "0"
            z = self.emit(f"arith.constant dense<{zero}> : {self.vector(shape, t.component, inst)}")
            padded = self.emit(f"vector.insert_strided_slice {x}, {z} offsets = [0, 0], strides "
                               f"= [1, 1] : {self.vector(t.shape, t.component, inst)} into "
                               f"{self.vector(shape, t.component, inst)}")
        self.names[inst.result] = self.unpad(self.annotate(padded, t, lay, inst), t, lay, inst)

    # ---- element-wise helpers -----------------------------------------------------------
    def matrix(self, v: Value, like: CoopMatrixType, inst: Instruction) -> str:
        """v as an unpadded matrix of like's shape (a scalar is broadcast)."""
        x = self.value(v, inst)
        if isinstance(v.type, CoopMatrixType):
            return x
        return self.emit(f"vector.broadcast {x} : {self.element(v.type, inst)} to "
                         f"{self.vector(like.shape, v.type, inst)}")

    def convert(self, x: str, shape, src: ScalarType, dst: ScalarType, inst) -> str:
        """x (vector of src) converted element-wise to dst."""
        if src == dst:
            return x
        vt = lambda t: self.vector(shape, t, inst)  # noqa: E731
        if src.is_int and dst.is_int:
            if "index" in (src.name, dst.name):
                return self.emit(f"arith.index_cast {x} : {vt(src)} to {vt(dst)}")
            op = "arith.extsi" if dst.bits > src.bits else "arith.trunci"
            return self.emit(f"{op} {x} : {vt(src)} to {vt(dst)}")
        if src.is_float and dst.is_float:
            if dst.bits == src.bits:  # f16 <-> bf16 through f32
                return self.convert(self.convert(x, shape, src, F32, inst), shape, F32, dst, inst)
            op = "arith.extf" if dst.bits > src.bits else "arith.truncf"
            return self.emit(f"{op} {x} : {vt(src)} to {vt(dst)}")
        if src.is_int:  # to float
            if src.name == "index":
                x, src = self.convert(x, shape, src, I64, inst), I64
            return self.emit(f"arith.sitofp {x} : {vt(src)} to {vt(dst)}")
        if dst.name == "index":  # float to index
            return self.convert(self.convert(x, shape, src, I64, inst), shape, I64, dst, inst)
        return self.emit(f"arith.fptosi {x} : {vt(src)} to {vt(dst)}")


# ---- one translation per instruction ---------------------------------------------------------
Translate = Callable[[_Kernel, Instruction], str]

#: arith op per binary instruction: (float, integer); None where the type has none
_BINARY = {"add": ("arith.addf", "arith.addi"), "sub": ("arith.subf", "arith.subi"),
           "mul": ("arith.mulf", "arith.muli"), "div": ("arith.divf", "arith.divsi"),
           "rem": ("arith.remf", "arith.remsi"), "max": ("arith.maximumf", "arith.maxsi"),
           "min": ("arith.minimumf", "arith.minsi"), "shl": (None, "arith.shli"),
           "shr": (None, "arith.shrsi"), "and": (None, "arith.andi"), "or": (None, "arith.ori"),
           "xor": (None, "arith.xori")}

#: vector.multi_reduction kind per reduction: (float, integer)
_REDUCE = {"cooperative_matrix_reduce_add": ("add", "add"),
           "cooperative_matrix_reduce_max": ("maximumf", "maxsi"),
           "cooperative_matrix_reduce_min": ("minimumf", "minsi")}


def _binary(k: _Kernel, inst: Instruction) -> str:
    t = inst.result.type
    op = _BINARY[inst.opcode][0 if t.component.is_float else 1]
    if op is None:
        raise k.fail(inst, f"no {inst.opcode} of {t.component} matrices")
    a = k.matrix(inst.slots["a"], t, inst)
    b = k.matrix(inst.slots["b"], t, inst)
    return k.emit(f"{op} {a}, {b} : {k.vector(t.shape, t.component, inst)}")


def _unary(k: _Kernel, inst: Instruction) -> str:
    t = inst.result.type
    a = k.value(inst.slots["a"], inst)
    vt = k.vector(t.shape, t.component, inst)
    if inst.opcode == "abs":
        return k.emit(f"math.abs{'f' if t.component.is_float else 'i'} {a} : {vt}")
    if inst.opcode == "neg" and t.component.is_float:
        return k.emit(f"arith.negf {a} : {vt}")
    if inst.opcode == "neg":  # 0 - a
        zero = k.emit(f"arith.constant dense<0> : {vt}")
        return k.emit(f"arith.subi {zero}, {a} : {vt}")
    if inst.opcode == "not" and t.component.is_int:  # a xor -1
        ones = k.emit(f"arith.constant dense<-1> : {vt}")
        return k.emit(f"arith.xori {a}, {ones} : {vt}")
    raise k.fail(inst, f"no {inst.opcode} of {t.component} matrices")


def _cast(k: _Kernel, inst: Instruction) -> str:
    src, dst = inst.slots["a"].type, inst.result.type
    return k.convert(k.value(inst.slots["a"], inst), dst.shape, src.component, dst.component,
                     inst)


def _construct(k: _Kernel, inst: Instruction) -> str:
    return k.matrix(inst.slots["a"], inst.result.type, inst)


def _scale(k: _Kernel, inst: Instruction) -> str:
    t = inst.result.type
    a = k.matrix(inst.slots["a"], t, inst)
    b = k.value(inst.slots["b"], inst)
    op = "arith.mulf" if t.component.is_float else "arith.muli"
    return k.emit(f"{op} {a}, {b} : {k.vector(t.shape, t.component, inst)}")


def _mul_add(k: _Kernel, inst: Instruction) -> str:
    """vector.contract in C's accumulation type (A and B converted to it where their
    component types differ), then converted to D's type."""
    a, b, c = (inst.slots[s] for s in "abc")
    ta, tb, tc, td = a.type, b.type, c.type, inst.result.type
    acc = accumulate_type(tc.component)
    ops = [k.value(a, inst), k.value(b, inst)]
    comps = [ta.component, tb.component]
    if ta.component != tb.component:
        ops = [k.convert(x, t.shape, t.component, acc, inst) for x, t in zip(ops, (ta, tb))]
        comps = [acc, acc]
    x = k.convert(k.value(c, inst), tc.shape, tc.component, acc, inst)
    maps = ", ".join(f"affine_map<(m, n, k) -> ({m})>" for m in ("m, k", "k, n", "m, n"))
    r = k.emit(f"vector.contract {{indexing_maps = [{maps}], iterator_types = [\"parallel\", "
               f"\"parallel\", \"reduction\"], kind = #vector.kind<add>}} {ops[0]}, {ops[1]}, {x} : "
               f"{k.vector(ta.shape, comps[0], inst)}, {k.vector(tb.shape, comps[1], inst)} "
               f"into {k.vector(tc.shape, acc, inst)}")
    return k.convert(r, td.shape, acc, td.component, inst)


def _reduce(k: _Kernel, inst: Instruction) -> str:
    """vector.multi_reduction over the columns (.row) or rows (.column); the first
    column or row is the initial value of max and min, zero that of add."""
    t, rt = inst.slots["a"].type, inst.result.type
    a = k.value(inst.slots["a"], inst)
    dim = 1 if inst.modifier("mode") == "row" else 0
    kind = _REDUCE[inst.opcode][0 if t.component.is_float else 1]
    n = t.shape[1 - dim]
    flat = k.vector((n,), t.component, inst)
    if kind == "add":
        acc = k.emit(f"arith.constant dense<{'0.0' if t.component.is_float else '0'}> : {flat}")
    else:
        size = [t.rows, 1] if dim == 1 else [1, t.cols]
        part = k.emit(f"vector.extract_strided_slice {a} offsets = [0, 0], sizes = {size}, "
                      f"strides = [1, 1] : {k.vector(t.shape, t.component, inst)} to "
                      f"{k.vector(size, t.component, inst)}")
        acc = k.emit(f"vector.shape_cast {part} : {k.vector(size, t.component, inst)} to {flat}")
    r = k.emit(f"vector.multi_reduction <{kind}>, {a}, {acc} [{dim}] : "
               f"{k.vector(t.shape, t.component, inst)} to {flat}")
    r = k.emit(f"vector.shape_cast {r} : {flat} to {k.vector(rt.shape, t.component, inst)}")
    return k.convert(r, rt.shape, t.component, rt.component, inst)


TRANSLATE: Dict[str, Translate] = {
    **{name: _binary for name in _BINARY},
    "abs": _unary, "neg": _unary, "not": _unary,
    "cast": _cast,
    "cooperative_matrix_construct": _construct,
    "cooperative_matrix_scale": _scale,
    "cooperative_matrix_mul_add": _mul_add,
    **{name: _reduce for name in _REDUCE},
}


# ---- kernels and the module -------------------------------------------------------------------
def _symbol(name: str) -> str:
    return f"@{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name) else f'@"{name}"'


def _coop_values(func: Function) -> bool:
    return any(isinstance(v.type, CoopMatrixType) for inst in func.body.walk()
               for v in inst.results + [a for r in inst.regions for a in r.args])


def _translated(inst: Instruction) -> bool:
    """Whether inst has a translation: in TRANSLATE, one result, nothing complex (complex
    arithmetic is not element-wise on the parts, so complex values enter as arguments)."""
    types = [v.type for v in inst.operands + inst.results]
    elements = [t.component if isinstance(t, CoopMatrixType) else t for t in types]
    return (inst.opcode in TRANSLATE and len(inst.results) == 1
            and not any(isinstance(t, ScalarType) and t.is_complex for t in elements))


def export_function(func: Function, program: Program, target: Target,
                    aliases: Dict[str, str]) -> str:
    """The func.func of one kernel (layouts it uses get their alias in ``aliases``)."""
    lines: List[str] = []
    args: List[str] = []
    if _coop_values(func):
        S = ExecConfig.of(func, target, program).subgroup_size
        k = _Kernel(target, S, aliases)
        for inst in func.body.walk():
            for v in inst.results:
                if not isinstance(v.type, CoopMatrixType):
                    continue
                if _translated(inst):
                    k.body.append(f"    // %{v.name} = {inst.opcode} (line {inst.loc.line})")
                    k.define(inst, TRANSLATE[inst.opcode](k, inst))
                else:  # computed by code the export does not translate
                    k.value(v, inst)
            for region in inst.regions:
                for a in region.args:
                    if isinstance(a.type, CoopMatrixType):
                        k.value(a, inst)
        lines, args = k.body, k.args
        lines.insert(0, f"    // subgroup size {S}")
    return "\n".join([f"  func.func {_symbol(func.name)}({', '.join(args)}) {{", *lines,
                      "    return", "  }"])


def export(program: Program, target: Target) -> str:
    """The MLIR module of a verified program."""
    aliases: Dict[str, str] = {}
    try:
        funcs = [export_function(f, program, target, aliases) for f in program.functions]
    except CompileError as e:
        raise e.with_source(program.source, program.filename) from None
    return "\n".join([f"// ttlc iree-vector export of {program.filename} (target "
                      f"{target.name})", *(f"{a} = {attr}" for attr, a in aliases.items()),
                      "module {", *funcs, "}", ""])


def emit(program: Program, stage: str, machine: Target, checked: bool) -> str:
    """The registry's entry point: the one stage, ``mlir``."""
    return export(program, machine)
