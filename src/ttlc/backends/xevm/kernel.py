"""One kernel as MLIR text: the representation of ttlc values, the kernel ABI (the
arguments of docs/spirv.md, the same order; docs/xevm.md), and the walk over the regions
of the lowered program.

Values: a number is an SSA name (``index`` is i64, ``bool`` i1); a memref a ``MemVal``
(pointer, and per mode a size and stride: a Python int when static, else an i64 SSA
name); a group a ``GroupVal``; a coopmatrix the list of the components the work-item
holds (``lower-simt`` leaves only per-component instructions for them).
"""
from __future__ import annotations

import re
import struct
from typing import Callable, Dict, List, Optional

from ...diagnostics import CompileError, Diagnostic
from ...ir.core import Function, Instruction, Program, Region, Value
from ...ir.types import (BOOL, DYNAMIC, BoolType, CoopMatrixType, GroupType, MemrefType,
                         ScalarType, Type)
from ...target import ExecConfig, Target
from .. import simt
from ..simt import GroupVal, MemVal, Unsupported


def symbol(name: str) -> str:
    """An MLIR symbol reference for a ttlc name (quoted where MLIR's bare form cannot
    spell it)."""
    return f"@{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name) else f'@"{name}"'


def dynamic_dims(t: MemrefType) -> int:
    return sum(d is DYNAMIC for d in t.shape) + sum(d is DYNAMIC for d in t.stride)


class Kernel:
    """The state of one kernel while its instructions are written."""

    def __init__(self, program: Program, func: Function, target: Target,
                 emitters: Dict[str, Callable], globals_: List[str]):
        self.program, self.func, self.target, self.emitters = program, func, target, emitters
        self.cfg = ExecConfig.of(func, target, program)
        self.S = self.cfg.subgroup_size
        self.values: Dict[Value, object] = {}
        self.lines: List[str] = []
        self.globals = globals_  # module-level definitions (work-group memory)
        self.depth = 3
        self.n = 0
        self.current: Optional[Instruction] = None
        #: depth of SPMD regions (parallel) around the instruction: 0 in collective code
        self.spmd = 0
        self._used: Optional[set] = None

    # ---- types -------------------------------------------------------------------------------
    def type(self, t: Type) -> str:
        """The MLIR type of a number or bool in registers."""
        if isinstance(t, BoolType):
            return "i1"
        if not isinstance(t, ScalarType) or t.is_complex:
            raise Unsupported(self.current, f"values of type {t}")
        if self.target.types is not None and t.name not in self.target.types:
            raise Unsupported(self.current, f"type {t}")
        return "i64" if t.name == "index" else t.name

    def memory_type(self, t: ScalarType) -> str:
        """The type a pointer steps over (a complex number: its two components)."""
        if isinstance(t, ScalarType) and t.is_complex:
            return f"!llvm.array<2 x {self.type(t.component)}>"
        return "i8" if isinstance(t, BoolType) else self.type(t)

    @staticmethod
    def pointer(t: MemrefType) -> str:
        return "!llvm.ptr<3>" if t.space == "local" else "!llvm.ptr<1>"

    def components(self, t: CoopMatrixType) -> int:
        """Components of a coopmatrix a work-item holds (the target's storage layout)."""
        return self.target.storage_layout(t, self.S).registers

    def part_types(self, t: Type) -> List[str]:
        if isinstance(t, CoopMatrixType):
            return [self.type(t.component)] * self.components(t)
        return [self.type(t)]

    def flatten(self, value) -> List[str]:
        return [x for v in value for x in self.flatten(v)] if isinstance(value, list) \
            else [value]

    def rebuild(self, t: Type, names) -> object:
        if isinstance(t, CoopMatrixType):
            return [next(names) for _ in range(self.components(t))]
        return next(names)

    # ---- text --------------------------------------------------------------------------------
    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def op(self, text: str, results: int = 1) -> str:
        """Write ``name = text``; the result name (``name#i`` for several: use ``multi``)."""
        name = self.fresh()
        self.line(f"{name}{':%d' % results if results > 1 else ''} = {text}")
        return name

    def const(self, t: Type, value) -> str:
        """A constant number (floats by their bit pattern, so the value is exact)."""
        mt = self.type(t)
        if isinstance(t, BoolType):
            return self.op(f"arith.constant {'true' if value else 'false'}")
        if t.is_int:
            bits = 64 if t.name == "index" else t.bits
            v = int(value) & ((1 << bits) - 1)
            v = v - (1 << bits) if v >> (bits - 1) else v
            return self.op(f"arith.constant {v} : {mt}")
        import numpy as np
        if t.name == "bf16":
            import ml_dtypes
            bits = int(np.array(value, dtype=ml_dtypes.bfloat16).view(np.uint16))
            return self.op(f"arith.constant 0x{bits:04X} : bf16")
        fmt = {16: ("<e", "<H", 4), 32: ("<f", "<I", 8), 64: ("<d", "<Q", 16)}[t.bits]
        bits = struct.unpack(fmt[1], struct.pack(fmt[0], float(value)))[0]
        return self.op(f"arith.constant 0x{bits:0{fmt[2]}X} : {mt}")

    def c64(self, value: int) -> str:
        return self.op(f"arith.constant {value} : i64")

    # ---- index arithmetic on static (int) or dynamic (i64 name) sizes -------------------------
    @staticmethod
    def static(n: int) -> int:
        return n

    def ival(self, x) -> str:
        return self.c64(x) if isinstance(x, int) else x

    def iadd(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if a == 0:
            return b
        if b == 0:
            return a
        return self.op(f"arith.addi {self.ival(a)}, {self.ival(b)} : i64")

    def imul(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        for x, y in ((a, b), (b, a)):
            if x == 1:
                return y
            if x == 0:
                return 0
        return self.op(f"arith.muli {self.ival(a)}, {self.ival(b)} : i64")

    def index(self, v) -> object:
        """An index operand (a Value, or an int of a structured slot) as int or i64 name."""
        if isinstance(v, int):
            return v
        owner = v.owner
        value = owner.attrs.get("value") if owner is not None and owner.opcode == "constant" \
            else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        x, t = self.get(v), self.type(v.type)
        return x if t == "i64" else self.op(f"arith.extsi {x} : {t} to i64")

    # ---- values and the walk -----------------------------------------------------------------
    def used(self) -> set:
        """The values some instruction of the function uses (computed once)."""
        if self._used is None:
            self._used = {v for i in self.func.body.walk() for v in i.operands}
        return self._used

    def get(self, v: Value):
        return self.values[v]

    def emit_region(self, region: Region) -> List[object]:
        """Write a region's instructions; the values its ``yield`` gives (if any)."""
        return simt.emit_region(self, region)

    # ---- the kernel ABI ----------------------------------------------------------------------
    def parameters(self) -> List[str]:
        """``%name: type`` of every kernel argument, binding the function's parameters."""
        out: List[str] = []

        def arg(mtype: str) -> str:
            name = f"%a{len(out)}"
            out.append(f"{name}: {mtype}")
            return name

        for a in self.func.args:
            t = a.value.type
            if t == BOOL:
                self.values[a.value] = ("bool", arg("i8"))
            elif isinstance(t, ScalarType):
                self.values[a.value] = arg(self.type(t))
            elif isinstance(t, MemrefType):
                ptr = arg(self.pointer(t))
                shape = [d if d is not DYNAMIC else arg("i64") for d in t.shape]
                stride = [d if d is not DYNAMIC else arg("i64") for d in t.stride]
                self.values[a.value] = MemVal(ptr, shape, stride, t)
            elif isinstance(t, GroupType):
                ptrs = arg("!llvm.ptr<1>")
                dope = arg("!llvm.ptr<1>") if dynamic_dims(t.memref) else None
                size = t.size if t.size is not DYNAMIC else arg("i64")
                offset = t.offset if t.offset is not DYNAMIC else arg("i64")
                self.values[a.value] = GroupVal(ptrs, dope, size, offset, t)
            else:
                raise Unsupported(None, f"argument %{a.value.name} of type {t}")
        return out

    def define(self) -> List[str]:
        """The gpu.func of the kernel: its arguments, sizes and body."""
        params = self.parameters()
        for v, x in list(self.values.items()):
            if isinstance(x, tuple):  # bool arrives as i8: 0 or 1
                zero = self.op("arith.constant 0 : i8")
                self.values[v] = self.op(f"arith.cmpi ne, {x[1]}, {zero} : i8")
        self.emit_region(self.func.body)
        wgx, wgy = self.cfg.work_group_size
        head = (f"    gpu.func {symbol(self.func.name)}({', '.join(params)}) kernel attributes "
                f"{{known_block_size = array<i32: {wgx}, {wgy}, 1>, "
                f"intel_reqd_sub_group_size = {self.S} : i32}} {{")
        return [head] + self.lines + ["      gpu.return", "    }"]

    # ---- errors ------------------------------------------------------------------------------
    def error(self, what: str, inst: Optional[Instruction]) -> CompileError:
        loc = inst.loc if inst is not None else self.func.loc
        name = f"{inst.opcode}: " if inst is not None else ""
        return CompileError([Diagnostic(loc, f"not supported on target xevm "
                                             f"({self.target.name}) yet: {name}{what}")],
                            self.program.source, self.program.filename)
