"""One kernel in SPIR-V: its arguments (the kernel ABI of docs/spirv.md), the
representation of ttlc values, the walk over its regions and the structured control flow
(``for``, ``if``, ``parallel``).

Values: a number or bool is one id; ``index`` is i64; a memref is a ``MemVal`` (pointer to
its first element, mode sizes and strides, each a Python int when static, else an i64 id);
a group a ``GroupVal``; a coopmatrix the list of ids of the V components this work-item
holds (``lower-simt`` leaves only instructions that act on each component: extract and
insert with constant indices cost nothing, and no vector type of a length SPIR-V's Kernel
environment lacks is needed).
"""
from __future__ import annotations

import struct

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from ...diagnostics import CompileError, Diagnostic
from ...ir.layout import layout_of
from ...ir.core import Function, Instruction, Program, Region, Value
from ...ir.types import BoolType, CoopMatrixType, MemrefType, ScalarType, Type
from ...target import ExecConfig, Target
from .. import simt
from ..pairs import Pair as Cplx  # a complex number: the ids of its parts (``cplx``)
from ..simt import GroupVal, MemVal, Unsupported
from .builder import Enum, Inst, Lit, Module, float_text, opencl_std


class Lacking(Unsupported):
    """What the target description does not offer (a type, atomics on a type), rather than
    what this back end does not translate yet: (instruction or None, what, what it has)."""


@dataclass(frozen=True)
class Static:
    """A static size or stride, kept apart from ids (which are ints too)."""

    value: int


def storage_class(t: MemrefType) -> str:
    return "Workgroup" if t.space == "local" else "CrossWorkgroup"


#: built-in input variables: name -> (components, bits)
BUILTINS = {"WorkgroupId": (3, 64), "NumWorkgroups": (3, 64), "LocalInvocationId": (3, 64),
            "SubgroupId": (1, 32), "SubgroupLocalInvocationId": (1, 32)}


class Kernel:
    """The state of one kernel while its instructions are emitted."""

    def __init__(self, module: Module, program: Program, func: Function, target: Target,
                 emitters: Dict[str, Callable], checked: bool = False):
        self.m = module
        self.program = program
        self.func = func
        self.target = target
        self.emitters = emitters
        self.cfg = ExecConfig.of(func, target, program)
        self.S = self.cfg.subgroup_size
        self.values: Dict[Value, object] = {}
        #: depth of SPMD regions (parallel) around the instruction being emitted: 0 in
        #: collective code, which every work-item runs with uniform values
        self.spmd = 0
        self.current: Optional[Instruction] = None
        self.label: int = 0
        #: the OpEntryPoint of the kernel, whose interface lists the built-ins it uses
        self.entry: Optional[Inst] = None
        #: where the next Function variable goes in the function section (``variable``)
        self.variables_at = 0
        #: checked code (``checks``): the error buffer argument, the variable flagging
        #: this work-item's findings, the table of instructions findings name
        self.checked = checked
        self.record: Optional[int] = None
        self.failed: Optional[int] = None
        self.instructions: List = []
        #: the id of the function reporting a finding (``checks.finish`` defines it)
        self.report: Optional[int] = None
        self.inst_ids: Dict[int, int] = {}
        #: checked code accessing local memory: its shadow (``races``)
        self.races = None
        #: bytes of Workgroup memory the kernel's variables take
        self.local_bytes = 0
        #: the allocas, as findings name them (``checks.alloca``)
        self.locals: List[tuple] = []

    # ---- types -------------------------------------------------------------------------------
    def scalar(self, t: Type) -> int:
        """The SPIR-V type of a number or bool in registers (bf16: an f32 holding a bf16
        value)."""
        if isinstance(t, BoolType):
            return self.m.type_bool()
        if not isinstance(t, ScalarType):
            raise Unsupported(self.current, f"values of type {t}")
        self.supported(t)
        if t.is_int:
            return self.m.type_int(t.bits)
        if t.name == "bf16":
            return self.m.type_float(32)
        if t.is_float:
            return self.m.type_float(t.bits)
        raise Unsupported(self.current, f"type {t}")

    # ---- values as lists of ids (phis of loops and ifs) -------------------------------------
    def part_types(self, t: Type) -> List[int]:
        """The SPIR-V types of the ids making up a value of type t, in ``flatten`` order."""
        if isinstance(t, CoopMatrixType):
            return self.part_types(t.component) * self.components(t)
        if isinstance(t, ScalarType) and t.is_complex:
            return [self.scalar(t.component)] * 2
        return [self.scalar(t)]

    def flatten(self, value) -> List[int]:
        if isinstance(value, list):
            return [x for v in value for x in self.flatten(v)]
        if isinstance(value, Cplx):
            return [value.re, value.im]
        return [value]

    def rebuild(self, t: Type, ids) -> object:
        """The value of type t made of the next ids of an iterator (``flatten``'s inverse)."""
        if isinstance(t, CoopMatrixType):
            return [self.rebuild(t.component, ids) for _ in range(self.components(t))]
        if isinstance(t, ScalarType) and t.is_complex:
            return Cplx(next(ids), next(ids))
        return next(ids)

    def memory_type(self, t: ScalarType) -> int:
        """The SPIR-V type of a number in memory and in kernel arguments (bf16: its 16
        bits as an i16)."""
        if t.name == "bf16":
            self.supported(t)
            return self.m.type_int(16)
        if t.is_complex:
            self.supported(t)
            return self.scalar(t.component)
        return self.scalar(t)

    # ---- bf16: f32 values rounded to bf16 ----------------------------------------------------
    def from_memory(self, t: ScalarType, x: int) -> int:
        """A value of type t as loaded (bf16: its bits widened into an f32)."""
        if t.name != "bf16":
            return x
        wide = self.op("UConvert", self.i32(), x)
        return self.op("Bitcast", self.m.type_float(32),
                       self.op("ShiftLeftLogical", self.i32(), wide, self.c32(16)))

    def to_memory(self, t: ScalarType, x: int) -> int:
        """A value of type t as stored (bf16: the high half of the rounded f32)."""
        if t.name != "bf16":
            return x
        bits = self.op("Bitcast", self.i32(), x)
        return self.op("UConvert", self.m.type_int(16),
                       self.op("ShiftRightLogical", self.i32(), bits, self.c32(16)))

    def round_bf16(self, x: int) -> int:
        """An f32 rounded to the nearest bf16 (ties to even; NaN stays a quiet NaN)."""
        i32 = self.i32()
        bits = self.op("Bitcast", i32, x)
        odd = self.op("BitwiseAnd", i32, self.op("ShiftRightLogical", i32, bits, self.c32(16)),
                      self.c32(1))
        up = self.op("IAdd", i32, self.op("IAdd", i32, bits, self.c32(0x7FFF)), odd)
        nan = self.op("BitwiseOr", i32, bits, self.c32(0x00400000))
        r = self.op("Select", i32, self.op("IsNan", self.m.type_bool(), x), nan, up)
        return self.op("Bitcast", self.m.type_float(32),
                       self.op("BitwiseAnd", i32, r, self.c32(0xFFFF0000)))

    def supported(self, t: ScalarType) -> None:
        if self.target.types is not None and t.name not in self.target.types:
            raise Lacking(self.current, f"type {t}", ", ".join(self.target.types))

    def components(self, t: CoopMatrixType) -> int:
        """Components of a coopmatrix each work-item holds (the language's layout, which
        lower-simt leaves for targets without a matrix unit)."""
        return layout_of(t, self.S).registers

    def subgroup_lane(self) -> int:
        """This work-item's id in its subgroup (i64)."""
        return self.op("UConvert", self.i64(), self.builtin("SubgroupLocalInvocationId"))

    def entry_index(self, t: CoopMatrixType, v: int, lane: Optional[int] = None) -> List[int]:
        """The (row, column) of the entry this work-item holds in component v of a
        coopmatrix of type t (i64 ids: the layout's index as a function of ``lane``, an
        id of ``subgroup_lane()``, made here if not given)."""
        i64 = self.i64()
        lane = self.subgroup_lane() if lane is None else lane
        out = []
        for offset, divisor, tile, scale in layout_of(t, self.S).nested.lane_terms(v):
            index = self.c64(offset)
            if divisor:
                part = self.op("UMod", i64, self.op("UDiv", i64, lane, self.c64(divisor)),
                               self.c64(tile))
                index = self.op("IAdd", i64, index, self.op("IMul", i64, part, self.c64(scale)))
            out.append(index)
        return out

    def i64(self) -> int:
        return self.m.type_int(64)

    def i32(self) -> int:
        return self.m.type_int(32)

    def pointer(self, t: MemrefType) -> int:
        return self.m.type_pointer(storage_class(t), self.memory_type(t.element))

    def const(self, type_id: int, bits: int, width: int) -> int:
        return self.m.constant(type_id, bits & ((1 << width) - 1), width)

    def number(self, t: Type, value) -> int:
        """The id of a constant real number or bool of type t (bf16: the f32 of the
        nearest bf16, as the interpreter rounds constants)."""
        if isinstance(t, BoolType):
            return self.m.constant_bool(bool(value))
        tid = self.scalar(t)
        if t.is_int:
            return self.const(tid, int(value), t.bits)
        if t.name == "bf16":
            import ml_dtypes  # the nearest bf16, as the interpreter rounds it
            import numpy as np

            value = float(np.float32(ml_dtypes.bfloat16(value)))
        width = 32 if t.name == "bf16" else t.bits
        fmt = {16: ("<e", "<H"), 32: ("<f", "<I"), 64: ("<d", "<Q")}[width]
        bits = struct.unpack(fmt[1], struct.pack(fmt[0], float(value)))[0]
        return self.m.constant(tid, bits, width, float_text(bits, width))

    def c64(self, value: int) -> int:
        return self.const(self.i64(), value, 64)

    def c32(self, value: int) -> int:
        return self.const(self.i32(), value, 32)

    # ---- instructions ------------------------------------------------------------------------
    def variable(self, type_id: int) -> int:
        """A pointer to a new Function variable of the type (declared, as SPIR-V asks, at
        the start of the function's first block)."""
        var = self.m.id()
        self.m.sections["function"].insert(self.variables_at, Inst(
            "Variable", self.m.type_pointer("Function", type_id), var,
            [Enum("StorageClass", "Function")]))
        self.variables_at += 1
        return var

    def op(self, name: str, result_type: Optional[int], *operands) -> int:
        """Append an instruction to the function; its result id (None without a type)."""
        rid = self.m.id() if result_type is not None else None
        self.m.add("function", name, result_type, rid, *operands)
        return rid

    def ext(self, name: str, result_type: int, *args: int) -> int:
        """An OpenCL.std extended instruction."""
        return self.op("ExtInst", result_type, self.m.import_ext("OpenCL.std"),
                       Lit(opencl_std()[name], text=name), *args)

    def block(self, label: int) -> None:
        self.m.add("function", "Label", None, label)
        self.label = label

    def branch(self, label: int) -> None:
        self.op("Branch", None, label)

    def builtin(self, name: str) -> int:
        """The loaded value of a built-in input variable (vector of 3 or scalar)."""
        var = self.m.builtins.get(name)
        n, bits = BUILTINS[name]
        t = self.m.type_int(bits)
        vt = self.m.type_vector(t, n) if n > 1 else t
        if var is None:
            var = self.m.add("global", "Variable", self.m.type_pointer("Input", vt), self.m.id(),
                             Enum("StorageClass", "Input"))
            self.m.decorate(var, "BuiltIn", Enum("BuiltIn", name))
            self.m.decorate(var, "Constant")
            self.m.builtins[name] = var
        if var not in self.entry.operands:
            self.entry.operands.append(var)
        return self.op("Load", vt, var)

    def once(self, make: Callable[[], int], type_id: int) -> int:
        """make() run by work-item (0, 0) of the work-group only, its result given to all
        (OpGroupBroadcast): a side effect of collective code, such as an atomic update,
        happens once per work-group, as the language says."""
        i64, bt = self.i64(), self.m.type_bool()
        local = self.builtin("LocalInvocationId")
        x, y = (self.op("CompositeExtract", i64, local, Lit(d)) for d in (0, 1))
        first = self.op("IEqual", bt, self.op("BitwiseOr", i64, x, y), self.c64(0))
        [phi] = self.select(first, lambda: [make()], [type_id],
                            [self.m.unique("Undef", type_id)])
        origin = self.m.null(self.m.type_vector(i64, 3))
        return self.op("GroupBroadcast", type_id, self.c32(2), phi, origin)

    def select(self, cond: int, then: Callable[[], List[int]], types: List[int],
               otherwise) -> List[int]:
        """A structured selection: the values then() gives where cond holds, else those
        ``otherwise`` gives (a function emitted in the other branch, or a list of ids
        defined before), one OpPhi each."""
        then_label, merge = self.m.id(), self.m.id()
        other_label = self.m.id() if callable(otherwise) else merge
        pre = self.label
        self.op("SelectionMerge", None, merge, Enum("SelectionControl", "None"))
        self.op("BranchConditional", None, cond, then_label, other_label)
        incoming = []
        for label, make in ((then_label, then), (other_label, otherwise)):
            if not callable(make):
                incoming.append((make, pre))
                continue
            self.block(label)
            incoming.append((make(), self.label))
            self.branch(merge)
        self.block(merge)
        (a, a_end), (b, b_end) = incoming
        return [self.op("Phi", t, x, a_end, y, b_end) for t, x, y in zip(types, a, b)]

    # ---- index arithmetic on static or dynamic sizes --------------------------------------------
    static = Static

    def ival(self, x) -> int:
        """An i64 id for a static (Static) or dynamic (id) index."""
        return self.c64(x.value) if isinstance(x, Static) else x

    def iadd(self, a, b):
        if isinstance(a, Static) and isinstance(b, Static):
            return Static(a.value + b.value)
        if isinstance(a, Static) and a.value == 0:
            return b
        if isinstance(b, Static) and b.value == 0:
            return a
        return self.op("IAdd", self.i64(), self.ival(a), self.ival(b))

    def imul(self, a, b):
        if isinstance(a, Static) and isinstance(b, Static):
            return Static(a.value * b.value)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Static) and x.value == 1:
                return y
            if isinstance(x, Static) and x.value == 0:
                return Static(0)
        return self.op("IMul", self.i64(), self.ival(a), self.ival(b))

    def index(self, v) -> object:
        """An index operand (a Value or an int of a structured slot) as Static or i64 id."""
        if isinstance(v, int):
            return Static(v)
        owner = v.owner
        value = owner.attrs.get("value") if owner is not None and owner.opcode == "constant" \
            else None
        if isinstance(value, int) and not isinstance(value, bool):
            return Static(value)
        return self.to_i64(self.get(v), v.type)

    def to_i64(self, x: int, t: Type) -> int:
        if isinstance(t, ScalarType) and t.bits != 64:
            return self.op("SConvert", self.i64(), x)
        return x

    # ---- values ------------------------------------------------------------------------------
    def get(self, v: Value):
        return self.values[v]

    def bind(self, values: Sequence[Value], results) -> None:
        simt.bind(self, values, results)

    # ---- the walk ----------------------------------------------------------------------------
    def emit_region(self, region: Region) -> List[object]:
        """Emit a region's instructions; the values its ``yield`` gives (if any)."""
        return simt.emit_region(self, region)

    # ---- errors ------------------------------------------------------------------------------
    def error(self, e: Unsupported) -> CompileError:
        inst, what = e.args[:2]
        loc = inst.loc if inst is not None else self.func.loc
        name = f"{inst.opcode}: " if inst is not None else ""
        if isinstance(e, Lacking):
            message = (f"{name}{what}: not supported by target spirv ({self.target.name}), "
                       f"which has {e.args[2]}")
        else:
            message = f"not supported on target spirv ({self.target.name}) yet: {name}{what}"
        return CompileError([Diagnostic(loc, message)], self.program.source,
                            self.program.filename)
