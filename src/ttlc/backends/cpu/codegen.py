"""LLVM IR for the CPU: one table from opcode to an emitter, like the interpreter's.

Execution model
---------------
One call of a generated kernel runs a contiguous range of work-groups on one thread.
Inside a work-group, the work-items are the lanes of SIMD vectors executed in lockstep:

* a *uniform* value (every value of a collective region, and values of SPMD regions that
  do not depend on the work-item) is an LLVM scalar; a *varying* value is an LLVM vector
  of W lanes, W the work-group size (``work_group_size[0] * work_group_size[1]``, lane
  ``x + work_group_size[0] * y``; subgroup ``lane // subgroup_size``).  Which values vary is
  decided before code generation (``analyze_varying``) so that loop-carried values and
  the results of ``if`` get one representation; uniform values are broadcast on use;
* divergent control flow runs under a lane mask (``<W x i1>``): both sides of an ``if``
  run, each when any of its lanes is active, and merge their results with ``select``; a
  ``for`` with varying bounds loops while any lane is active and merges loop-carried
  values with ``select``.  Memory accesses are masked (``llvm.masked.*``); a varying
  index is a gather/scatter, or a plain vector load/store when the lanes turn out to
  access consecutive elements (checked at run time, folded away when LLVM can prove it);
* ``barrier`` costs nothing: the lanes are always in step;
* atomics of an SPMD region run one lane after the other, in lane order, each a real
  atomic instruction (other work-groups run on other threads);
* ``alloca`` memory lives in a per-thread scratch block given by the runtime (offsets
  are fixed at compile time), not allocated per work-group;
* integers that are known per lane up to a uniform term (work-item ids, the variables of
  loops over them) are kept as ``Lanes`` (a scalar base plus constant lane offsets), so
  consecutive accesses are plain vector loads and stores without any run-time check;
* coopmatrix values hold each subgroup's whole matrix as a vector (``coop.py``).

Numbers: integers are LLVM integers (``index`` is i64) with wrap-around arithmetic,
C division with a zero divisor giving 0, shift amounts modulo the width; ``f16`` is
``half``; ``bf16`` is kept as its 16 bits (``i16``) and computed in f32 with one
round-to-nearest-even per instruction, as the interpreter does; complex numbers are
(re, im) pairs of values, stored interleaved in memory.  Float to integer casts use
``llvm.fptosi.sat`` (truncate, saturate, NaN to 0); float min/max are
``llvm.minnum/maxnum`` (the other operand when one is NaN).

Kernel ABI
----------
Each kernel ``@name`` becomes ``i32 @ttlc.<name>(ptr args, i64 first, i64 end,
ptr local, ptr err)`` and runs the work-groups with linear ids ``first <= id < end``
(``id = x + nx * (y + ny * z)``).  ``args`` is an array of 8-byte slots (see
``abi.arg_layout``): slots 0-2 hold the grid size ``nx, ny, nz``, then per argument

* memref of order n: the data pointer (the first element, null for ``None``), the n
  mode sizes, the n strides (in elements);
* group of order n: a pointer to the member data pointers (group offset applied), a
  pointer to an int64 array with ``2 n`` entries per member (sizes, then strides), the
  number of members, and 1/0 for associated;
* scalar: its value in the slot's first bytes (``bool`` as one byte, ``bf16``/``f16``
  as their 16 bits, ``c32`` as two floats); ``c64`` takes two slots.

``local`` points to ``local_bytes`` bytes of scratch memory (64-byte aligned) for the
kernel's ``alloca``s.  The result is 0, or 1 when checked code found an error: ``err``
(16 int64) then holds the error code, the instruction, the lane and details, which the
runtime turns into a KernelError (codes ``abi.E_*``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from llvmlite import ir

from ...diagnostics import CompileError, Diagnostic
from ...ir.core import Function, Instruction, Program, Region, Value
from ...ir.layout import layout_of
from ...ir.numerics import accumulate_type, fold_int, wrap
from ...ir.ops import SUBGROUP_OPS
from ...ir.types import (DYNAMIC, SCALAR_TYPES, BoolType, CoopMatrixType, GroupType, MemrefType,
                         ScalarType, Type)
from ...analysis.uniformity import analyze_varying
from ...target import ExecConfig, get_target
from .abi import (E_BARRIER, E_BROADCAST, E_COOP_DIV_ZERO, E_DIV_ZERO,  # noqa: F401
                  E_EXPAND, E_FUSE, E_GROUP_INDEX, E_INDEX, E_NULL, E_STEP, ERR_SLOTS,
                  HEADER_SLOTS, ArgSlots, InstRef, KernelInfo, arg_layout)

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

#: storage type of each scalar type (complex: of one component)
LLTYPE = {"i8": I8, "i16": I16, "i32": I32, "i64": I64, "index": I64, "bf16": I16,
          "f16": F16, "f32": F32, "f64": F64, "c32": F32, "c64": F64}
COMPONENT = {"c32": "f32", "c64": "f64"}


class VectorConstant(ir.Constant):
    """``ir.Constant(ir.VectorType(elem, n), values)``, made and printed much faster.

    llvmlite makes one Constant per element and formats each anew; the long shuffle
    masks and splats of coopmatrix code made that the largest part of code generation.
    Here the elements (and their text) come from a cache.  A splat (every element the
    same number) prints as ``splat (<elem> <value>)``, which LLVM reads as the same
    constant as the list of elements llvmlite writes: most of the IR text of coopmatrix
    code was such lists, and LLVM parses the short form much faster."""

    _cache: Dict[tuple, Tuple[ir.Value, str]] = {}

    def __init__(self, elem: ir.Type, values: Sequence[Any]):
        name, cache = str(elem), VectorConstant._cache
        if len(cache) > 100_000:
            cache.clear()
        values = values if isinstance(values, (list, tuple)) else list(values)
        splat = _is_splat(values)  # most vector constants: one lookup for all lanes
        parts, texts = [], []
        for v in values[:1] if splat else values:
            if isinstance(v, ir.Value):
                parts.append(v)
                texts.append(f"{v.type} {v.get_reference()}")
                continue
            key = (name, type(v), v, repr(v))  # repr: 0.0 and -0.0 are equal keys otherwise
            hit = cache.get(key)
            if hit is None:
                c = ir.Constant(elem, v)
                hit = cache[key] = (c, f"{name} {c.get_reference()}")
            parts.append(hit[0])
            texts.append(hit[1])
        if splat:
            parts = parts * len(values)
        self.type = ir.VectorType(elem, len(parts))
        self.constant = parts
        self._text = f"splat ({texts[0]})" if splat else "<" + ", ".join(texts) + ">"

    def _get_reference(self) -> str:
        return self._text


class UndefVector(ir.Constant):
    """``ir.Constant(vector_type, ir.Undefined)``, printed as ``undef`` (the same LLVM
    constant as the list of undef elements llvmlite writes, in far less text)."""

    def __init__(self, vt: ir.VectorType):
        super().__init__(vt, ir.Undefined)

    def _get_reference(self) -> str:
        return "undef"


def _is_splat(values: Sequence[Any]) -> bool:
    """All entries the same Python number, of one type (0.0 and -0.0 differ; NaNs count
    as the same only when they are the same object, else they are listed one by one)."""
    if len(values) < 2:
        return False
    first = values[0]
    kind = type(first)
    if kind not in (int, float, bool) or values.count(first) != len(values):
        return False
    if any(type(v) is not kind for v in values):
        return False
    return kind is not float or first != 0.0 or len({math.copysign(1.0, v) for v in values}) == 1


class Unsupported(Exception):
    pass


# ---- representation of values ------------------------------------------------------------
@dataclass
class Cplx:
    """A complex number (or one per lane): real and imaginary part."""

    re: ir.Value
    im: ir.Value


@dataclass
class Lanes:
    """A varying integer known up to a uniform term: lane l holds ``base + offsets[l]``
    (wrapping in the type).  Work-item ids and the loop variables of loops over them
    stay in this form, so that accesses to consecutive elements are found at compile
    time (a plain vector load instead of a gather).  ``base`` None means 0."""

    base: Optional[ir.Value]
    offsets: Tuple[int, ...]
    type: ir.IntType

    def consecutive(self) -> bool:
        first = self.offsets[0]
        return all(o - first == k for k, o in enumerate(self.offsets))


IndexLike = Union[int, ir.Value, Lanes]


@dataclass
class MemVal:
    """A memref: data pointer (scalar or per lane), sizes and strides (int when static)."""

    ptr: ir.Value
    shape: List[IndexLike]
    stride: List[IndexLike]
    type: MemrefType


@dataclass
class GroupVal:
    ptrs: ir.Value
    dopes: ir.Value
    count: ir.Value
    assoc: ir.Value
    type: GroupType


def is_vec(x) -> bool:
    return isinstance(x, Lanes) or isinstance(getattr(x, "type", None), ir.VectorType)


def parts(x) -> list:
    if isinstance(x, Cplx):
        return [x.re, x.im]
    mats = getattr(x, "mats", None)  # a coopmatrix (coop.CoopVal)
    if mats is not None:
        return [p for m in mats for p in parts(m)]
    return [x]


def mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise AssertionError(t)


def elem_bytes(t: ScalarType) -> int:
    return t.size


# ---- the emitter table -----------------------------------------------------------------------
EMITTERS: Dict[str, Callable] = {}


def emits(*opcodes: str):
    def register(fn):
        for op in opcodes:
            EMITTERS[op] = fn
        return fn
    return register


ORDERING = {"relaxed": "monotonic"}


class FunctionCodegen:
    """Emits one kernel into an LLVM module."""

    def __init__(self, module: ir.Module, func: Function, symbol: str, checked: bool):
        self.module = module
        self.func = func
        self.symbol = symbol
        self.checked = checked
        self.cfg = ExecConfig.of(func, get_target("cpu"))
        self.W = self.cfg.lanes
        self.wgx = self.cfg.work_group_size[0]
        self.S = self.cfg.subgroup_size
        self.varying = analyze_varying(func)
        self.env: Dict[Value, Any] = {}
        self.mask: Optional[ir.Value] = None
        self.spmd = False
        self.instructions: List[InstRef] = []
        self.inst_ids: Dict[int, int] = {}
        self.local_bytes = 0
        self.current: Optional[Instruction] = None
        self.error_block: Optional[ir.Block] = None
        self.roots: Dict[Value, Optional[int]] = {}
        self.writes: Dict[int, InstRef] = {}
        #: called once the function is complete (e.g. to add set-up code to its entry
        #: block and clean-up before its returns, as the AMX tile configuration needs)
        self.finish_hooks: List[Callable[[], None]] = []

    # ---- small helpers -------------------------------------------------------------------
    @property
    def b(self) -> ir.IRBuilder:
        return self.builder

    def vt(self, t: ir.Type) -> ir.VectorType:
        return ir.VectorType(t, self.W)

    def like(self, x, t: ir.Type) -> ir.Type:
        """t, or a vector of t with as many lanes as x."""
        return ir.VectorType(t, x.type.count) if is_vec(x) else t

    def const_like(self, x, t: ir.Type, value) -> ir.Value:
        if is_vec(x):
            return ir.Constant(ir.VectorType(t, x.type.count), [value] * x.type.count)
        return ir.Constant(t, value)

    def block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Value],
                  overloads: Sequence[ir.Type] = ()) -> ir.Value:
        full = name + "".join("." + mangle(t) for t in overloads)
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, [a.type for a in args]), full)
        return self.b.call(fn, list(args))

    def extern(self, name: str, ret: ir.Type, argtypes: Sequence[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(argtypes)), name)
        return fn

    def splat(self, x):
        if isinstance(x, Lanes):
            return self.vector(x)
        if hasattr(x, "mats"):  # a coopmatrix has one representation
            return x
        if isinstance(x, Cplx):
            return Cplx(self.splat(x.re), self.splat(x.im))
        if is_vec(x):
            return x
        vt = self.vt(x.type)
        if isinstance(x, ir.Constant) and not isinstance(x.type, ir.PointerType):
            return VectorConstant(x.type, [x.constant] * self.W)
        v = self.b.insert_element(UndefVector(vt), x, ir.Constant(I32, 0))
        return self.b.shuffle_vector(v, UndefVector(vt), VectorConstant(I32, [0] * self.W))

    def match(self, *xs):
        """Broadcast scalars to vectors when any operand is a vector."""
        if any(any(is_vec(p) for p in parts(x)) for x in xs):
            return [self.splat(x) for x in xs]
        return list(xs)

    def varying_repr(self, x):
        return isinstance(x, Lanes) or any(is_vec(p) for p in parts(x))

    def coerce(self, x, varying: bool):
        if hasattr(x, "mats"):
            return x
        if varying:
            return self.splat(x)
        assert not self.varying_repr(x), "internal error: a varying value where a uniform one is expected"
        return x

    def iota(self, t: ir.IntType = I64) -> ir.Constant:
        return ir.Constant(self.vt(t), list(range(self.W)))

    def reduce_or(self, m: ir.Value) -> ir.Value:
        if not is_vec(m):
            return m
        return self.intrinsic("llvm.vector.reduce.or", I1, [m], [m.type])

    def reduce_and(self, m: ir.Value) -> ir.Value:
        if not is_vec(m):
            return m
        return self.intrinsic("llvm.vector.reduce.and", I1, [m], [m.type])

    def and_mask(self, m: Optional[ir.Value], c: ir.Value) -> ir.Value:
        if m is None:
            return c
        m, c = self.match(m, c)
        return self.b.and_(m, c)

    def lane(self, x, l: ir.Value):
        """The value of lane l (a scalar i32) of x."""
        if isinstance(x, Cplx):
            return Cplx(self.lane(x.re, l), self.lane(x.im, l))
        return self.b.extract_element(x, l) if is_vec(x) else x

    # index arithmetic on Python ints (static) and LLVM i64 values (scalar or vector)
    def ival(self, x: IndexLike) -> ir.Value:
        if isinstance(x, Lanes):
            return self.vector(x)
        return ir.Constant(I64, x) if isinstance(x, int) else x

    def iadd(self, a: IndexLike, c: IndexLike) -> IndexLike:
        if isinstance(a, int) and isinstance(c, int):
            return a + c
        if isinstance(a, int) and a == 0:
            return c
        if isinstance(c, int) and c == 0:
            return a
        if isinstance(a, Lanes) or isinstance(c, Lanes):
            r = self.lanes_binary("add", a, c, 64)
            if r is not None:
                return r
        x, y = self.match(self.ival(a), self.ival(c))
        return self.b.add(x, y)

    def imul(self, a: IndexLike, c: IndexLike) -> IndexLike:
        if isinstance(a, int) and isinstance(c, int):
            return a * c
        if isinstance(a, int) and a in (0, 1):
            return 0 if a == 0 else c
        if isinstance(c, int) and c in (0, 1):
            return 0 if c == 0 else a
        if isinstance(a, Lanes) or isinstance(c, Lanes):
            r = self.lanes_binary("mul", a, c, 64)
            if r is not None:
                return r
        x, y = self.match(self.ival(a), self.ival(c))
        return self.b.mul(x, y)

    def get(self, v: Value):
        """The value as LLVM values (Lanes become vectors)."""
        x = self.env[v]
        return self.vector(x) if isinstance(x, Lanes) else x

    def raw(self, v: Value):
        """The value as stored: Lanes stay Lanes."""
        return self.env[v]

    def index_of(self, x) -> IndexLike:
        """An int attribute or an index value (Lanes kept)."""
        return x if isinstance(x, int) else self.raw(x)

    def vector(self, x: Lanes) -> ir.Value:
        c = ir.Constant(self.vt(x.type), list(x.offsets))
        if x.base is None:
            return c
        return self.b.add(self.splat(x.base), c)

    def as_lanes(self, x) -> Optional[Lanes]:
        """x as Lanes when it is Lanes, a uniform integer or an int (as i64); else None."""
        if isinstance(x, Lanes):
            return x
        if isinstance(x, int):
            return Lanes(ir.Constant(I64, x), (0,) * self.W, I64)
        if isinstance(x, ir.Value) and isinstance(x.type, ir.IntType):
            return Lanes(x, (0,) * self.W, x.type)
        return None

    def scalar_op(self, op: str, a: Optional[ir.Value], c: Optional[ir.Value], t: ir.IntType):
        """a op c on uniform integers (None is 0), folded when both are constants."""
        if op in ("add", "sub"):
            if c is None:
                return a
            if a is None:
                return c if op == "add" else self.scalar_op("sub", ir.Constant(t, 0), c, t)
        if isinstance(a, ir.Constant) and isinstance(c, ir.Constant):
            return ir.Constant(t, fold_int(op, int(a.constant), int(c.constant), t.width))
        return {"add": self.b.add, "sub": self.b.sub, "mul": self.b.mul}[op](a, c)

    def lanes_binary(self, op: str, a, c, bits: int) -> Optional[Lanes]:
        """An integer instruction on Lanes operands, when the result is Lanes too."""
        la, lc = self.as_lanes(a), self.as_lanes(c)
        if la is None or lc is None:
            return None
        t = la.type
        if la.base is None and lc.base is None or (
                isinstance(la.base, ir.Constant) and isinstance(lc.base, ir.Constant)):
            # every lane known: fold
            ba = 0 if la.base is None else int(la.base.constant)
            bc = 0 if lc.base is None else int(lc.base.constant)
            out = []
            for x, y in zip(la.offsets, lc.offsets):
                r = fold_int(op, wrap(ba + x, bits), wrap(bc + y, bits), bits)
                if r is None:
                    return None
                out.append(r)
            return Lanes(None, tuple(out), t)
        if op in ("add", "sub"):
            sign = 1 if op == "add" else -1
            return Lanes(self.scalar_op(op, la.base, lc.base, t),
                         tuple(wrap(x + sign * y, bits) for x, y in zip(la.offsets, lc.offsets)), t)
        if op in ("mul", "shl"):
            for x, y in ((la, lc), (lc, la)):
                if not any(y.offsets) and isinstance(y.base, ir.Constant):
                    k = int(y.base.constant)
                    if op == "shl":
                        if x is not la:
                            return None
                        k = 1 << (k & (bits - 1))
                    base = None if x.base is None else self.scalar_op(
                        "mul", x.base, ir.Constant(t, wrap(k, bits)), t)
                    return Lanes(base, tuple(wrap(o * k, bits) for o in x.offsets), t)
        return None

    def lanes_cast(self, x: Lanes, dst: ir.IntType) -> Optional[Lanes]:
        src = x.type
        if dst.width == src.width:
            return x
        if dst.width < src.width:
            base = None if x.base is None else self.b.trunc(x.base, dst)
            return Lanes(base, tuple(wrap(o, dst.width) for o in x.offsets), dst)
        if x.base is None or isinstance(x.base, ir.Constant):
            b0 = 0 if x.base is None else int(x.base.constant)
            return Lanes(None, tuple(wrap(b0 + o, src.width) for o in x.offsets), dst)
        return None  # sign extension of base + offset is not base' + offset'

    # ---- representation of types -----------------------------------------------------------
    def part_types(self, t: Type, varying: bool) -> List[ir.Type]:
        if isinstance(t, CoopMatrixType):
            vt = ir.VectorType(LLTYPE[t.component.name], t.rows * t.cols)
            return [vt] * ((2 if t.component.is_complex else 1) * (self.W // self.S))
        if isinstance(t, BoolType):
            base = [I1]
        elif isinstance(t, ScalarType):
            base = [LLTYPE[t.name]] * (2 if t.is_complex else 1)
        else:
            raise Unsupported(f"values of type {t}")
        return [self.vt(x) for x in base] if varying else base

    def from_parts(self, t: Type, ps: list):
        if isinstance(t, CoopMatrixType):
            from .coop import CoopVal

            if t.component.is_complex:
                return CoopVal([Cplx(ps[k], ps[k + 1]) for k in range(0, len(ps), 2)], t)
            return CoopVal(list(ps), t)
        return Cplx(ps[0], ps[1]) if isinstance(t, ScalarType) and t.is_complex else ps[0]

    def zero(self, t: Type, varying: bool):
        return self.from_parts(t, [ir.Constant(x, None) for x in self.part_types(t, varying)])

    def phi(self, t: Type, varying: bool):
        return self.from_parts(t, [self.b.phi(x) for x in self.part_types(t, varying)])

    def add_incoming(self, phi, value, block: ir.Block) -> None:
        for p, v in zip(parts(phi), parts(value)):
            p.add_incoming(v, block)

    def select(self, cond, a, c):
        if hasattr(a, "mats"):
            from .coop import select

            return select(self, cond, a, c)
        if isinstance(a, Cplx):
            return Cplx(self.select(cond, a.re, c.re), self.select(cond, a.im, c.im))
        cond, a, c = self.match(cond, a, c)
        return self.b.select(cond, a, c)

    # ---- bf16 and friends ---------------------------------------------------------------------
    def bf16_to_f32(self, x: ir.Value) -> ir.Value:
        wide = self.b.zext(x, self.like(x, I32))
        return self.b.bitcast(self.b.shl(wide, self.const_like(x, I32, 16)), self.like(x, F32))

    def f32_to_bf16(self, x: ir.Value) -> ir.Value:
        """Round to nearest even (as ml_dtypes); NaN stays a quiet NaN."""
        b = self.b
        i32 = self.like(x, I32)
        bits = b.bitcast(x, i32)
        hi = b.lshr(bits, self.const_like(x, I32, 16))
        lsb = b.and_(hi, self.const_like(x, I32, 1))
        rounded = b.lshr(b.add(bits, b.add(lsb, self.const_like(x, I32, 0x7FFF))),
                         self.const_like(x, I32, 16))
        nan = b.fcmp_unordered("uno", x, x)
        quiet = b.or_(hi, self.const_like(x, I32, 0x40))
        return b.trunc(b.select(nan, quiet, rounded), self.like(x, I16))

    def to_compute(self, t: ScalarType, x):
        """Operand in its compute type: bf16 as f32; everything else unchanged."""
        return self.bf16_to_f32(x) if t.name == "bf16" else x

    def from_compute(self, t: ScalarType, x):
        return self.f32_to_bf16(x) if t.name == "bf16" else x

    # ---- errors of checked code ----------------------------------------------------------------
    def inst_id(self, inst: Instruction) -> int:
        key = id(inst)
        if key not in self.inst_ids:
            self.inst_ids[key] = len(self.instructions)
            self.instructions.append(InstRef.of(inst))
        return self.inst_ids[key]

    def fail_if(self, bad: ir.Value, code: int, details: Sequence[Any] = (),
                lane: Optional[ir.Value] = None) -> None:
        """Checked code: report error `code` when `bad` (per lane: in an active lane);
        ``lane`` (i32) names the work-item when bad is uniform."""
        b = self.b
        details = [self.ival(d) if not isinstance(d, ir.Value) else d for d in details]
        if not is_vec(bad) and any(is_vec(d) for d in details):
            bad = self.splat(bad)  # a uniform condition, varying details: the first lane's
        if is_vec(bad) and self.mask is not None:
            bad = b.and_(bad, self.mask)
        any_bad = self.reduce_or(bad)
        fail = self.block("check.fail")
        ok = self.block("check.ok")
        b.cbranch(any_bad, fail, ok)
        b.position_at_end(fail)
        if is_vec(bad):
            lane = self.first_lane(bad)
            lane_i64 = b.zext(lane, I64)
        elif lane is not None:
            lane_i64 = b.zext(lane, I64)
        else:
            lane_i64 = ir.Constant(I64, -1)
        values = [ir.Constant(I64, self.inst_id(self.current)), lane_i64]
        for v in details:
            if is_vec(v):
                v = b.extract_element(v, lane)
            if isinstance(v.type, ir.IntType) and v.type.width < 64:
                v = b.sext(v, I64)
            values.append(v)
        b.store(ir.Constant(I64, code), self.err)
        for k, v in enumerate(values[:ERR_SLOTS - 4]):
            b.store(v, b.gep(self.err, [ir.Constant(I64, 4 + k)], source_etype=I64))
        b.branch(self.error_exit())
        b.position_at_end(ok)

    def first_lane(self, m: ir.Value) -> ir.Value:
        """Index (i32) of the first true lane of a mask (W if none)."""
        b = self.b
        bits = b.bitcast(m, ir.IntType(m.type.count))
        n = self.intrinsic("llvm.cttz", bits.type, [bits, ir.Constant(I1, 0)], [bits.type])
        if bits.type.width > 32:
            return b.trunc(n, I32)
        if bits.type.width < 32:
            return b.zext(n, I32)
        return n

    def error_exit(self) -> ir.Block:
        if self.error_block is None:
            self.error_block = self.fn.append_basic_block("error")
            saved = self.b.block
            self.b.position_at_end(self.error_block)
            for k, g in enumerate(self.gid):
                self.b.store(g, self.b.gep(self.err, [ir.Constant(I64, 1 + k)], source_etype=I64))
            self.b.ret(ir.Constant(I32, 1))
            self.b.position_at_end(saved)
        return self.error_block

    # ---- the function ---------------------------------------------------------------------------
    def build(self) -> KernelInfo:
        self.check_supported(self.func.body)
        layout, nslots = arg_layout(self.func)
        fnty = ir.FunctionType(I32, [PTR, I64, I64, PTR, PTR])
        self.fn = ir.Function(self.module, fnty, self.symbol)
        args, first, end, local, err = self.fn.args
        args.name, first.name, end.name, local.name, err.name = "args", "first", "end", "local", "err"
        self.local, self.err = local, err
        entry = self.fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(entry)
        b = self.b

        def slot(k: int) -> ir.Value:
            return b.gep(args, [ir.Constant(I64, k)], source_etype=I64)

        self.num_groups = [b.load(slot(k), typ=I64, name=f"ng{'xyz'[k]}") for k in range(3)]
        for index, (a, lay) in enumerate(zip(self.func.args, layout)):
            self.roots[a.value] = index
            self.env[a.value] = self.unpack_arg(a.value.type, lay, slot)
        header = self.block("groups")
        body = self.block("group")
        done = self.block("done")
        # the group's (x, y, z) from the linear id once, then counted along with it (no
        # division per work-group: a 64-bit div costs as much as a small gemm's FMAs)
        nx, ny, _ = self.num_groups
        rest0 = b.udiv(first, nx)
        start = (b.urem(first, nx), b.urem(rest0, ny), b.udiv(rest0, ny))
        pre = b.block
        b.branch(header)
        b.position_at_end(header)
        gid = b.phi(I64, name="gid")
        gid.add_incoming(first, pre)
        coords = [b.phi(I64, name=f"g{'xyz'[k]}") for k in range(3)]
        for c, s in zip(coords, start):
            c.add_incoming(s, pre)
        b.cbranch(b.icmp_signed("<", gid, end), body, done)
        b.position_at_end(body)
        self.gid = tuple(coords)
        self.emit_region(self.func.body)
        one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)
        gx, gy, gz = coords
        x1, y1 = b.add(gx, one), b.add(gy, one)
        wrap_x = b.icmp_unsigned("==", x1, nx)
        wrap_y = b.and_(wrap_x, b.icmp_unsigned("==", y1, ny))
        nxt = [b.select(wrap_x, zero, x1), b.select(wrap_x, b.select(wrap_y, zero, y1), gy),
               b.select(wrap_y, b.add(gz, one), gz)]
        for c, v in zip(coords, nxt):
            c.add_incoming(v, b.block)
        gid.add_incoming(b.add(gid, one), b.block)
        b.branch(header)
        b.position_at_end(done)
        b.ret(ir.Constant(I32, 0))
        for hook in self.finish_hooks:
            hook()
        return KernelInfo(self.func.name, self.symbol, self.cfg, layout, nslots,
                          self.local_bytes, self.instructions, self.writes)

    def check_supported(self, region: Region) -> None:
        for inst in region.walk():
            if inst.opcode not in EMITTERS and inst.opcode != "yield":
                raise Unsupported(inst)

    def unpack_arg(self, t: Type, lay: ArgSlots, slot):
        b = self.b
        k = lay.first
        if isinstance(t, MemrefType):
            ptr = b.load(slot(k), typ=PTR)
            n = t.order
            shape = [s if s is not DYNAMIC else b.load(slot(k + 1 + i), typ=I64)
                     for i, s in enumerate(t.shape)]
            stride = [s if s is not DYNAMIC else b.load(slot(k + 1 + n + i), typ=I64)
                      for i, s in enumerate(t.stride)]
            return MemVal(ptr, shape, stride, t)
        if isinstance(t, GroupType):
            ptrs = b.load(slot(k), typ=PTR)
            dopes = b.load(slot(k + 1), typ=PTR)
            count = b.load(slot(k + 2), typ=I64)
            assoc = b.icmp_signed("!=", b.load(slot(k + 3), typ=I64), ir.Constant(I64, 0))
            return GroupVal(ptrs, dopes, count, assoc, t)
        if isinstance(t, BoolType):
            return b.icmp_signed("!=", b.load(slot(k), typ=I8), ir.Constant(I8, 0))
        assert isinstance(t, ScalarType)
        lt = LLTYPE[t.name]
        if t.is_complex:
            re_ = b.load(slot(k), typ=lt)
            im_ptr = b.gep(slot(k), [ir.Constant(I64, 1)], source_etype=lt)
            return Cplx(re_, b.load(im_ptr, typ=lt))
        return b.load(slot(k), typ=lt)

    # ---- regions ------------------------------------------------------------------------------
    def emit_region(self, region: Region, mask: Optional[ir.Value] = None,
                    keep_mask: bool = True) -> Optional[list]:
        saved = self.mask
        if not keep_mask or mask is not None:
            self.mask = mask
        result = None
        try:
            for inst in region.instructions:
                if inst.opcode == "yield":
                    result = [self.get(v) for v in inst.slots["values"]]
                    break
                self.current = inst
                out = EMITTERS[inst.opcode](self, inst)
                if inst.results:
                    if len(inst.results) == 1 and inst.opcode not in ("for", "if"):
                        out = [out]
                    for r, v in zip(inst.results, out):
                        self.env[r] = v
        finally:
            self.mask = saved
        return result


# ==== constants and builtins ======================================================================
@emits("constant")
def emit_constant(cg: FunctionCodegen, inst: Instruction):
    t = inst.results[0].type
    if isinstance(t, CoopMatrixType):
        from . import coop

        return coop.constant(cg, t, inst.attrs["value"])
    return constant(t, inst.attrs["value"])


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


@emits("group_id", "num_groups", "num_subgroups", "subgroup_size", "subgroup_id",
       "subgroup_linear_id", "subgroup_local_id")
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


def _float_binary(cg: FunctionCodegen, op: str, a, c):
    b = cg.b
    if op == "add":
        return b.fadd(a, c)
    if op == "sub":
        return b.fsub(a, c)
    if op == "mul":
        return b.fmul(a, c)
    if op == "div":
        return b.fdiv(a, c)
    if op == "rem":
        return b.frem(a, c)
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
        if op == "add":
            return b.add(a, c)
        if op == "sub":
            return b.sub(a, c)
        if op == "mul":
            return b.mul(a, c)
        if op in ("div", "rem"):
            return _int_divrem(cg, op, a, c, bits)
        if op == "max":
            return b.select(b.icmp_signed(">", a, c), a, c)
        if op == "min":
            return b.select(b.icmp_signed("<", a, c), a, c)
        if op in ("shl", "shr"):
            amount = b.and_(c, cg.const_like(c, c.type.element if is_vec(c) else c.type, bits - 1))
            return b.shl(a, amount) if op == "shl" else b.ashr(a, amount)
        if op == "and":
            return b.and_(a, c)
        if op == "or":
            return b.or_(a, c)
        if op == "xor":
            return b.xor(a, c)
        raise AssertionError(op)
    assert isinstance(t, ScalarType)
    if t.is_complex:
        return _complex_binary(cg, op, a, c)
    return cg.from_compute(t, _float_binary(cg, op, cg.to_compute(t, a), cg.to_compute(t, c)))


@emits("add", "sub", "mul", "div", "rem", "max", "min", "shl", "shr", "and", "or", "xor")
def emit_binary(cg: FunctionCodegen, inst: Instruction):
    t = inst.results[0].type
    if isinstance(t, CoopMatrixType):
        from . import coop

        a, c = cg.get(inst.slots["a"]), cg.get(inst.slots["b"])
        if cg.checked and inst.opcode in ("div", "rem") and t.component.is_int:
            _check_coop_divisor(cg, t, a, c)
        return coop.elementwise_binary(cg, inst.opcode, t, a, c)
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


def _check_coop_divisor(cg: FunctionCodegen, t: CoopMatrixType, a, c) -> None:
    """Checked code: no component held by an active work-item divides by zero (reported
    with the first such entry, its dividend and the work-item holding it)."""
    from . import coop

    b = cg.b
    M, N = t.rows, t.cols
    n = M * N
    owner = layout_of(t, cg.S).owners
    # entries in row-major order (the interpreter's): entry k is component by_rows[k]
    by_rows = [col * M + row for row in range(M) for col in range(N)]
    order = ir.Constant(ir.VectorType(I32, n), by_rows)
    saved, cg.mask = cg.mask, None
    try:
        for g, (x, y) in enumerate(zip(a.mats, c.mats)):
            zero = b.icmp_signed("==", y, ir.Constant(y.type, [0] * n))
            if saved is not None:
                zero = b.and_(zero, coop.owner_mask(cg, t, saved, g))
            k = cg.first_lane(b.shuffle_vector(zero, zero, order))  # n when none: clamp
            k = b.select(b.icmp_unsigned("<", k, ir.Constant(I32, n)), k, ir.Constant(I32, 0))
            owners = ir.Constant(ir.VectorType(I32, n), [g * cg.S + int(owner[e % M, e // M])
                                                         for e in by_rows])
            cg.fail_if(cg.reduce_or(zero), E_COOP_DIV_ZERO,
                       [b.extract_element(x, b.extract_element(order, k)),
                        b.udiv(k, ir.Constant(I32, N)), b.urem(k, ir.Constant(I32, N))],
                       lane=b.extract_element(owners, k))
    finally:
        cg.mask = saved


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


@emits("abs", "neg", "not", "conj", "im", "re")
def emit_unary(cg: FunctionCodegen, inst: Instruction):
    t = inst.slots["a"].type
    a = cg.get(inst.slots["a"])
    if isinstance(t, CoopMatrixType):
        from .coop import CoopVal

        return CoopVal([unary(cg, inst.opcode, t.component, m) for m in a.mats],
                       inst.results[0].type)
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


@emits(*_ICMP)
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
    """The cast table (see ttlc.interp.semantics.convert)."""
    b = cg.b
    if src == dst:
        return x
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


@emits("cast")
def emit_cast(cg: FunctionCodegen, inst: Instruction):
    src, dst = inst.slots["a"].type, inst.results[0].type
    if isinstance(dst, CoopMatrixType):
        from . import coop

        return coop.cast(cg, cg.get(inst.slots["a"]), dst)
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
            v = b.insert_element(ir.Constant(v2, ir.Undefined), re_, ir.Constant(I32, 0))
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
        x = b.shuffle_vector(x, x, ir.Constant(ir.VectorType(I32, total),
                                               [k if k < W else 0 for k in range(total)]))
    vt = ir.VectorType(elem, n)
    callee = cg.extern(symbol, vt, [vt])
    pieces = []
    for k in range(0, total, n):
        piece = b.shuffle_vector(x, x, ir.Constant(ir.VectorType(I32, n), list(range(k, k + n))))
        pieces.append(b.call(callee, [piece]))
    while len(pieces) > 1:
        m = pieces[0].type.count
        cat = ir.Constant(ir.VectorType(I32, 2 * m), list(range(2 * m)))
        nxt = [b.shuffle_vector(pieces[i], pieces[i + 1], cat) for i in range(0, len(pieces) - 1, 2)]
        if len(pieces) % 2:
            last = pieces[-1]
            pad = b.shuffle_vector(last, last, ir.Constant(ir.VectorType(I32, 2 * m),
                                                           [k % m for k in range(2 * m)]))
            nxt.append(pad)
        pieces = nxt
    out = pieces[0]
    if out.type.count != W:
        out = b.shuffle_vector(out, out, ir.Constant(ir.VectorType(I32, W), list(range(W))))
    return out


@emits(*_MATH, *("native_" + k for k in _MATH))
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


# ==== memory ===============================================================================
def _derive(cg: FunctionCodegen, inst: Instruction, source: Value) -> None:
    for r in inst.results:
        cg.roots[r] = cg.roots.get(source)


def _note_write(cg: FunctionCodegen, inst: Instruction) -> None:
    root = cg.roots.get(inst.slots["tensor"])
    if root is not None and root not in cg.writes:
        cg.writes[root] = InstRef.of(inst)


def elem_type(t: ScalarType) -> ir.Type:
    lt = LLTYPE[t.name]
    return ir.ArrayType(lt, 2) if t.is_complex else lt


def _offset(cg: FunctionCodegen, m: MemVal, index: List) -> IndexLike:
    off: IndexLike = 0
    for i, s in zip(index, m.stride):
        off = cg.iadd(off, cg.imul(i, s))
    return off


def _check_access(cg: FunctionCodegen, m: MemVal, index: List) -> None:
    """Checked code: no null memref, every index within the shape."""
    b = cg.b
    null = b.icmp_unsigned("==", m.ptr, ir.Constant(PTR, None)) if not is_vec(m.ptr) else \
        b.icmp_unsigned("==", b.ptrtoint(m.ptr, cg.vt(I64)), cg.const_like(m.ptr, I64, 0))
    cg.fail_if(null, E_NULL)
    for mode, (i, size) in enumerate(zip(index, m.shape)):
        iv, sv = cg.match(cg.ival(i), cg.ival(size))
        bad = b.or_(b.icmp_signed("<", iv, cg.const_like(iv, I64, 0)), b.icmp_signed(">=", iv, sv))
        details = [ir.Constant(I64, mode), iv, sv, ir.Constant(I64, len(index))]
        details += [cg.ival(x) for x in index[:8]]
        cg.fail_if(bad, E_INDEX, details)


def _gep(cg: FunctionCodegen, t: ScalarType, ptr, off: IndexLike):
    et = elem_type(t)
    if isinstance(off, int) and off == 0:
        return ptr
    if isinstance(off, Lanes):
        off = cg.vector(off)
    if is_vec(ptr) or is_vec(off):
        ptr, offv = cg.match(ptr, cg.ival(off))
        return cg.b.gep(ptr, [offv], source_etype=et)
    return cg.b.gep(ptr, [cg.ival(off)], source_etype=et)


def _component_ptrs(cg: FunctionCodegen, t: ScalarType, p):
    """Pointers to the real and imaginary part of complex elements."""
    lt = LLTYPE[t.name]
    one = cg.const_like(p, I64, 1) if is_vec(p) else ir.Constant(I64, 1)
    return p, cg.b.gep(p, [one], source_etype=lt)


def _align(t: ScalarType) -> int:
    return t.component.size if t.is_complex else t.size


def _masked_load(cg: FunctionCodegen, lt: ir.Type, p, mask, n: int):
    vt = ir.VectorType(lt, n)
    if mask is None:
        return cg.b.load(p, typ=vt, align=lt_size(lt))
    return cg.intrinsic("llvm.masked.load", vt, [p, ir.Constant(I32, lt_size(lt)), mask,
                                                 ir.Constant(vt, None)], [vt, PTR])


def _short_lanes(lt: ir.Type, n: int) -> int:
    """Lanes to widen a masked store of n elements of type lt to: 16 bytes when n 8- or
    16-bit elements fill less.  LLVM 22 for x86 miscompiles such a store (the vector is
    promoted to wider elements first) whose mask it can fold to one lane into a scalar
    store of the promoted width: ``movl`` for an i16, overwriting the next element."""
    size = lt_size(lt)
    return 16 // size if size < 4 and n * size < 16 else n


def _masked_store(cg: FunctionCodegen, v, p, mask) -> None:
    lt = v.type.element
    if mask is None:
        cg.b.store(v, p, align=lt_size(lt))
        return
    n = v.type.count
    if lt == I16:
        # LLVM 22 for x86 folds a truncation (i32 -> i16, e.g. the rounding to bf16) into
        # the masked store, and a mask it can fold to one lane into a scalar store of the
        # *untruncated* width (``vmovd``), overwriting the next element at any length;
        # storing the same bits as half hides the truncation
        v = cg.b.bitcast(v, ir.VectorType(F16, n))
        lt = F16
    wide = _short_lanes(lt, n)
    if wide != n:  # the extra lanes are masked off: never written
        pick = ir.Constant(ir.VectorType(I32, wide), [k if k < n else n for k in range(wide)])
        v = cg.b.shuffle_vector(v, ir.Constant(v.type, None), pick)
        mask = cg.b.shuffle_vector(mask, ir.Constant(mask.type, None), pick)
    cg.intrinsic("llvm.masked.store", ir.VoidType(), [v, p, ir.Constant(I32, lt_size(lt)), mask],
                 [v.type, PTR])


def lt_size(lt: ir.Type) -> int:
    if isinstance(lt, ir.IntType):
        return max(1, lt.width // 8)
    return {F16: 2, F32: 4, F64: 8}.get(lt, 8) if not isinstance(lt, ir.PointerType) else 8


def _gather(cg: FunctionCodegen, lt: ir.Type, ptrs, mask):
    vt = cg.vt(lt)
    m = mask if mask is not None else cg.const_like(ptrs, I1, 1)
    return cg.intrinsic("llvm.masked.gather", vt, [ptrs, ir.Constant(I32, lt_size(lt)), m,
                                                   ir.Constant(vt, None)], [vt, ptrs.type])


def _scatter(cg: FunctionCodegen, v, ptrs, mask) -> None:
    m = mask if mask is not None else cg.const_like(ptrs, I1, 1)
    cg.intrinsic("llvm.masked.scatter", ir.VoidType(),
                 [v, ptrs, ir.Constant(I32, lt_size(v.type.element)), m], [v.type, ptrs.type])


def _interleave_masks(W: int):
    even = list(range(0, 2 * W, 2))
    odd = list(range(1, 2 * W, 2))
    inter = [k // 2 + (W if k % 2 else 0) for k in range(2 * W)]
    return even, odd, inter


def _contiguous(cg: FunctionCodegen, off: ir.Value):
    """(all lanes access consecutive elements, offset of lane 0) for an offset vector."""
    b = cg.b
    d = b.sub(off, cg.iota(I64))
    d0 = b.extract_element(d, ir.Constant(I32, 0))
    same = b.icmp_signed("==", d, cg.splat(d0))
    return cg.reduce_and(same), d0


def _first_offset(cg: FunctionCodegen, off: Lanes) -> ir.Value:
    """The offset of lane 0 of consecutive Lanes, as an i64 scalar."""
    first = ir.Constant(off.type, off.offsets[0])
    v = first if off.base is None else cg.scalar_op("add", off.base, first, off.type)
    return v if off.type.width == 64 else cg.b.sext(v, I64)


def _double_mask(cg: FunctionCodegen, mask):
    """A lane mask for the 2W components of W complex numbers."""
    if mask is None:
        return None
    return cg.b.shuffle_vector(mask, mask, ir.Constant(ir.VectorType(I32, 2 * cg.W),
                                                       [k // 2 for k in range(2 * cg.W)]))


def _load_contiguous(cg: FunctionCodegen, t: ScalarType, ptr, first, mask):
    """W consecutive elements from ptr + first."""
    b = cg.b
    lt = LLTYPE[t.name]
    p = _gep(cg, t, ptr, first)
    if not t.is_complex:
        return _masked_load(cg, lt, p, mask, cg.W)
    even, odd, _ = _interleave_masks(cg.W)
    both = _masked_load(cg, lt, p, _double_mask(cg, mask), 2 * cg.W)
    return Cplx(b.shuffle_vector(both, both, ir.Constant(ir.VectorType(I32, cg.W), even)),
                b.shuffle_vector(both, both, ir.Constant(ir.VectorType(I32, cg.W), odd)))


def _store_contiguous(cg: FunctionCodegen, t: ScalarType, value, ptr, first, mask) -> None:
    b = cg.b
    p = _gep(cg, t, ptr, first)
    if not t.is_complex:
        _masked_store(cg, value, p, mask)
        return
    _, _, inter = _interleave_masks(cg.W)
    both = b.shuffle_vector(value.re, value.im, ir.Constant(ir.VectorType(I32, 2 * cg.W), inter))
    _masked_store(cg, both, p, _double_mask(cg, mask))


def _gathered(cg: FunctionCodegen, t: ScalarType, ptr, off, mask):
    lt = LLTYPE[t.name]
    ptrs = _gep(cg, t, cg.splat(ptr), off)
    if t.is_complex:
        pr, pi = _component_ptrs(cg, t, ptrs)
        return Cplx(_gather(cg, lt, pr, mask), _gather(cg, lt, pi, mask))
    return _gather(cg, lt, ptrs, mask)


def _scattered(cg: FunctionCodegen, t: ScalarType, value, ptr, off, mask) -> None:
    ptrs = _gep(cg, t, cg.splat(ptr), off)
    if t.is_complex:
        pr, pi = _component_ptrs(cg, t, ptrs)
        _scatter(cg, value.re, pr, mask)
        _scatter(cg, value.im, pi, mask)
    else:
        _scatter(cg, value, ptrs, mask)


def load_element(cg: FunctionCodegen, t: ScalarType, ptr, off: IndexLike, mask):
    """Load elements of type t at ptr + off (per lane when either varies).

    Lanes offsets of consecutive elements are a vector load; other varying offsets of a
    uniform pointer check at run time whether the lanes are consecutive (a vector load)
    or not (a gather)."""
    b = cg.b
    lt = LLTYPE[t.name]
    if not is_vec(ptr) and not is_vec(off):
        p = _gep(cg, t, ptr, off)
        if t.is_complex:
            pr, pi = _component_ptrs(cg, t, p)
            return Cplx(b.load(pr, typ=lt, align=_align(t)), b.load(pi, typ=lt, align=_align(t)))
        return b.load(p, typ=lt, align=_align(t))
    if is_vec(ptr):
        return _gathered(cg, t, ptr, off, mask)
    if isinstance(off, Lanes):
        if off.consecutive():
            return _load_contiguous(cg, t, ptr, _first_offset(cg, off), mask)
        return _gathered(cg, t, ptr, off, mask)
    contiguous, first = _contiguous(cg, off)
    fast, slow, merge = cg.block("load.contiguous"), cg.block("load.gather"), cg.block("load.merge")
    b.cbranch(contiguous, fast, slow)
    b.position_at_end(fast)
    fast_v = _load_contiguous(cg, t, ptr, first, mask)
    fast_end = b.block
    b.branch(merge)
    b.position_at_end(slow)
    slow_v = _gathered(cg, t, ptr, off, mask)
    slow_end = b.block
    b.branch(merge)
    b.position_at_end(merge)
    out = cg.phi(t, True)
    cg.add_incoming(out, fast_v, fast_end)
    cg.add_incoming(out, slow_v, slow_end)
    return out


def store_element(cg: FunctionCodegen, t: ScalarType, value, ptr, off: IndexLike, mask) -> None:
    b = cg.b
    if not is_vec(ptr) and not is_vec(off) and not cg.varying_repr(value):
        p = _gep(cg, t, ptr, off)
        if t.is_complex:
            pr, pi = _component_ptrs(cg, t, p)
            b.store(value.re, pr, align=_align(t))
            b.store(value.im, pi, align=_align(t))
        else:
            b.store(value, p, align=_align(t))
        return
    value = cg.splat(value)
    if is_vec(ptr):
        _scattered(cg, t, value, ptr, off, mask)
        return
    if isinstance(off, Lanes):
        if off.consecutive():
            _store_contiguous(cg, t, value, ptr, _first_offset(cg, off), mask)
        else:
            _scattered(cg, t, value, ptr, off, mask)
        return
    if not is_vec(off):  # a varying value stored to one element: the last lane wins
        _scattered(cg, t, value, ptr, cg.splat(cg.ival(off)), mask)
        return
    contiguous, first = _contiguous(cg, off)
    fast, slow, merge = cg.block("store.contiguous"), cg.block("store.scatter"), cg.block("store.merge")
    b.cbranch(contiguous, fast, slow)
    b.position_at_end(fast)
    _store_contiguous(cg, t, value, ptr, first, mask)
    b.branch(merge)
    b.position_at_end(slow)
    _scattered(cg, t, value, ptr, off, mask)
    b.branch(merge)
    b.position_at_end(merge)


def _index_list(cg: FunctionCodegen, inst: Instruction) -> list:
    return [cg.raw(v) for v in inst.slots["index"]]


@emits("load")
def emit_load(cg: FunctionCodegen, inst: Instruction):
    src = cg.get(inst.slots["tensor"])
    index = _index_list(cg, inst)
    if isinstance(src, GroupVal):
        _derive(cg, inst, inst.slots["tensor"])
        return load_group(cg, src, index[0])
    if cg.checked:
        _check_access(cg, src, index)
    return load_element(cg, src.type.element, src.ptr, _offset(cg, src, index), cg.mask)


def load_group(cg: FunctionCodegen, g: GroupVal, i):
    b = cg.b
    t = g.type.memref
    if isinstance(i, Lanes):
        i = cg.vector(i)
    if cg.checked:
        iv, cv = cg.match(i, g.count)
        bad = b.or_(b.icmp_signed("<", iv, cg.const_like(iv, I64, 0)), b.icmp_signed(">=", iv, cv))
        cg.fail_if(bad, E_GROUP_INDEX, [iv, cv])
    mask = cg.mask
    if is_vec(i):
        ptrs = b.gep(cg.splat(g.ptrs), [i], source_etype=PTR)
        ptr = _gather(cg, PTR, ptrs, mask)
    else:
        ptr = b.load(b.gep(g.ptrs, [i], source_etype=PTR), typ=PTR)
    n = t.order
    base = cg.imul(i, 2 * n)
    shape: List[IndexLike] = []
    stride: List[IndexLike] = []
    for k in range(2 * n):
        static = t.shape[k] if k < n else t.stride[k - n]
        if static is not DYNAMIC:
            v: IndexLike = static
        else:
            off = cg.iadd(base, k)
            if is_vec(off):
                v = _gather(cg, I64, b.gep(cg.splat(g.dopes), [off], source_etype=I64), mask)
            else:
                v = b.load(b.gep(g.dopes, [cg.ival(off)], source_etype=I64), typ=I64)
        (shape if k < n else stride).append(v)
    return MemVal(ptr, shape, stride, t)


@emits("store")
def emit_store(cg: FunctionCodegen, inst: Instruction):
    m = cg.get(inst.slots["tensor"])
    index = _index_list(cg, inst)
    _note_write(cg, inst)
    if cg.checked:
        _check_access(cg, m, index)
    store_element(cg, m.type.element, cg.get(inst.slots["value"]), m.ptr, _offset(cg, m, index),
                  cg.mask)


def _ordering(inst: Instruction) -> str:
    return "monotonic" if inst.modifier("semantics") == "relaxed" else "seq_cst"


def lane_loop(cg: FunctionCodegen, mask, fn, result_types: Sequence[ir.Type],
              lanes: Optional[int] = None) -> list:
    """for l in 0..n-1, when lane l is active: results[l] = fn(l) (scalars), in lane order;
    n is the work-group size W, or ``lanes`` (vectors of another length: coopmatrices)."""
    b = cg.b
    n = cg.W if lanes is None else lanes
    vt = lambda t: ir.VectorType(t, n)  # noqa: E731
    pre = b.block
    header, body, latch, done = (cg.block("lanes"), cg.block("lane"), cg.block("lane.next"),
                                 cg.block("lanes.done"))
    b.branch(header)
    b.position_at_end(header)
    lane = b.phi(I32, name="lane")
    lane.add_incoming(ir.Constant(I32, 0), pre)
    acc = [b.phi(vt(t)) for t in result_types]
    for p, t in zip(acc, result_types):
        p.add_incoming(ir.Constant(vt(t), None), pre)
    active = b.extract_element(mask, lane) if mask is not None else ir.Constant(I1, 1)
    b.cbranch(active, body, latch)
    b.position_at_end(body)
    vals = fn(lane)
    new = [b.insert_element(a, v, lane) for a, v in zip(acc, vals)]
    body_end = b.block
    b.branch(latch)
    b.position_at_end(latch)
    merged = []
    for a, n_, t in zip(acc, new, result_types):
        m = b.phi(vt(t))
        m.add_incoming(a, header)
        m.add_incoming(n_, body_end)
        merged.append(m)
    nxt = b.add(lane, ir.Constant(I32, 1))
    lane.add_incoming(nxt, latch)
    for a, m in zip(acc, merged):
        a.add_incoming(m, latch)
    b.cbranch(b.icmp_signed("<", nxt, ir.Constant(I32, n)), header, done)
    b.position_at_end(done)
    return merged


def _int_bits(lt: ir.Type) -> ir.IntType:
    return ir.IntType(lt_size(lt) * 8) if not isinstance(lt, ir.IntType) else lt


def atomic_update(cg: FunctionCodegen, op: str, t: ScalarType, p, v, ordering: str):
    """One read-modify-write at the scalar pointer p; returns the old value."""
    b = cg.b
    lt = LLTYPE[t.name]
    if t.is_complex:  # component-wise (the spec allows this "pseudo-atomic" update)
        pr, pi = _component_ptrs(cg, t, p)
        return Cplx(b.atomic_rmw("fadd", pr, v.re, ordering), b.atomic_rmw("fadd", pi, v.im, ordering))
    if t.is_int:
        kind = {"add": "add", "max": "max", "min": "min"}[op]
        return b.atomic_rmw(kind, p, v, ordering)
    if op == "add" and t.name in ("f32", "f64"):
        return b.atomic_rmw("fadd", p, v, ordering)
    # a compare-exchange loop computing exactly what the non-atomic instruction computes
    it = _int_bits(lt)
    pre = b.block
    first = b.load_atomic(p, "monotonic", _align(t), typ=it)
    loop, done = cg.block("cas"), cg.block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(it)
    old.add_incoming(first, pre)
    old_v = old if lt == it else b.bitcast(old, lt)
    new_v = binary(cg, op, t, old_v, v)
    new = new_v if lt == it else b.bitcast(new_v, it)
    pair = b.cmpxchg(p, old, new, ordering, "monotonic")
    seen = b.extract_value(pair, 0)
    ok = b.extract_value(pair, 1)
    old.add_incoming(seen, b.block)
    b.cbranch(ok, done, loop)
    b.position_at_end(done)
    return old_v


@emits("atomic_add", "atomic_max", "atomic_min")
def emit_atomic_update(cg: FunctionCodegen, inst: Instruction):
    m = cg.get(inst.slots["tensor"])
    t = m.type.element
    index = _index_list(cg, inst)
    _note_write(cg, inst)
    if cg.checked:
        _check_access(cg, m, index)
    value = cg.get(inst.slots["value"])
    op = inst.opcode[len("atomic_"):]
    ordering = _ordering(inst)
    ptrs = _gep(cg, t, m.ptr, _offset(cg, m, index))
    if not cg.spmd:
        return atomic_update(cg, op, t, ptrs, value, ordering)

    def one(lane):
        r = atomic_update(cg, op, t, cg.lane(ptrs, lane), cg.lane(value, lane), ordering)
        return parts(r)
    out = lane_loop(cg, cg.mask, one, cg.part_types(t, False))
    return cg.from_parts(t, out)


def _atomic_load_scalar(cg: FunctionCodegen, t: ScalarType, p, ordering: str):
    b = cg.b
    lt = LLTYPE[t.name]
    if t.is_complex:
        pr, pi = _component_ptrs(cg, t, p)
        return Cplx(b.load_atomic(pr, ordering, _align(t), typ=lt),
                    b.load_atomic(pi, ordering, _align(t), typ=lt))
    return b.load_atomic(p, ordering, _align(t), typ=lt)


@emits("atomic_load")
def emit_atomic_load(cg: FunctionCodegen, inst: Instruction):
    m = cg.get(inst.slots["tensor"])
    t = m.type.element
    index = _index_list(cg, inst)
    if cg.checked:
        _check_access(cg, m, index)
    ordering = _ordering(inst)
    ptrs = _gep(cg, t, m.ptr, _offset(cg, m, index))
    if not is_vec(ptrs):
        return _atomic_load_scalar(cg, t, ptrs, ordering)
    out = lane_loop(cg, cg.mask, lambda lane: parts(_atomic_load_scalar(
        cg, t, cg.b.extract_element(ptrs, lane), ordering)), cg.part_types(t, False))
    return cg.from_parts(t, out)


def _store_atomic(b: ir.IRBuilder, value, ptr, ordering: str, align: int) -> None:
    """``store atomic`` (IRBuilder.store_atomic needs typed pointers)."""
    from llvmlite.ir import instructions

    b._insert(instructions.StoreAtomicInstr(b.block, value, ptr, ordering, align))


@emits("atomic_store")
def emit_atomic_store(cg: FunctionCodegen, inst: Instruction):
    m = cg.get(inst.slots["tensor"])
    t = m.type.element
    index = _index_list(cg, inst)
    _note_write(cg, inst)
    if cg.checked:
        _check_access(cg, m, index)
    ordering = _ordering(inst)
    value = cg.get(inst.slots["value"])
    ptrs = _gep(cg, t, m.ptr, _offset(cg, m, index))
    b = cg.b

    def store(p, v):
        if t.is_complex:
            pr, pi = _component_ptrs(cg, t, p)
            _store_atomic(b, v.re, pr, ordering, _align(t))
            _store_atomic(b, v.im, pi, ordering, _align(t))
        else:
            _store_atomic(b, v, p, ordering, _align(t))

    if not is_vec(ptrs) and not cg.varying_repr(value):
        store(ptrs, value)
        return None

    def one(lane):
        store(cg.lane(ptrs, lane), cg.lane(value, lane))
        return []
    lane_loop(cg, cg.mask, one, [])
    return None


@emits("alloca")
def emit_alloca(cg: FunctionCodegen, inst: Instruction):
    t: MemrefType = inst.results[0].type
    align = (inst.attrs.get("attributes") or {}).get("alignment") or 64
    align = max(int(align), 64)
    offset = -(-cg.local_bytes // align) * align
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride))
    cg.local_bytes = offset + extent * t.element.size
    ptr = cg.b.gep(cg.local, [ir.Constant(I64, offset)], source_etype=I8)
    cg.roots[inst.results[0]] = None
    return MemVal(ptr, list(t.shape), list(t.stride), t)


@emits("lifetime_stop")
def emit_lifetime_stop(cg: FunctionCodegen, inst: Instruction):
    return None


@emits("barrier")
def emit_barrier(cg: FunctionCodegen, inst: Instruction):
    if cg.checked and cg.mask is not None:
        b = cg.b
        first64 = b.zext(cg.first_lane(cg.mask), I64)
        missing = b.xor(cg.mask, cg.const_like(cg.mask, I1, 1))
        saved = cg.mask
        cg.mask = None
        cg.fail_if(missing, E_BARRIER, [first64])
        cg.mask = saved
    return None


@emits("associated")
def emit_associated(cg: FunctionCodegen, inst: Instruction):
    x = cg.get(inst.slots["tensor"])
    if isinstance(x, GroupVal):
        return x.assoc
    b = cg.b
    if is_vec(x.ptr):
        return b.icmp_unsigned("!=", b.ptrtoint(x.ptr, cg.vt(I64)), cg.const_like(x.ptr, I64, 0))
    return b.icmp_unsigned("!=", x.ptr, ir.Constant(PTR, None))


@emits("size")
def emit_size(cg: FunctionCodegen, inst: Instruction):
    x = cg.get(inst.slots["tensor"])
    if isinstance(x, GroupVal):
        return x.count
    return cg.ival(x.shape[inst.attrs["mode"]])


def _static_or(dim, computed: IndexLike) -> IndexLike:
    return dim if dim is not DYNAMIC else computed


@emits("subview")
def emit_subview(cg: FunctionCodegen, inst: Instruction):
    m: MemVal = cg.get(inst.slots["tensor"])
    rt: MemrefType = inst.results[0].type
    off: IndexLike = 0
    shape: List[IndexLike] = []
    stride: List[IndexLike] = []
    for mode, (o, size) in enumerate(inst.slots["slices"]):
        off = cg.iadd(off, cg.imul(cg.index_of(o), m.stride[mode]))
        if isinstance(size, int) and size == 0:
            continue
        shape.append(size if isinstance(size, int) else cg.get(size))
        stride.append(m.stride[mode])
    shape = [_static_or(d, s) for d, s in zip(rt.shape, shape)]
    stride = [_static_or(d, s) for d, s in zip(rt.stride, stride)]
    _derive(cg, inst, inst.slots["tensor"])
    return MemVal(_gep(cg, m.type.element, m.ptr, off), shape, stride, rt)


@emits("expand")
def emit_expand(cg: FunctionCodegen, inst: Instruction):
    m: MemVal = cg.get(inst.slots["tensor"])
    mode = inst.attrs["mode"]
    dims = [e if isinstance(e, int) else cg.get(e) for e in inst.slots["shape"]]
    strides, s = [], m.stride[mode]
    for d in dims:
        strides.append(s)
        s = cg.imul(s, d)
    if cg.checked:
        total: IndexLike = 1
        for d in dims:
            total = cg.imul(total, d)
        if not (isinstance(total, int) and isinstance(m.shape[mode], int)):
            tv, sv = cg.match(cg.ival(total), cg.ival(m.shape[mode]))
            cg.fail_if(cg.b.icmp_signed("!=", tv, sv), E_EXPAND, [tv, sv])
    shape = m.shape[:mode] + dims + m.shape[mode + 1:]
    stride = m.stride[:mode] + strides + m.stride[mode + 1:]
    return _view(cg, inst, m.ptr, shape, stride)


def _view(cg: FunctionCodegen, inst: Instruction, ptr, shape, stride) -> MemVal:
    """The result of expand/fuse: static entries of the result type win over computed ones."""
    rt: MemrefType = inst.results[0].type
    shape = [_static_or(d, x) for d, x in zip(rt.shape, shape)]
    stride = [_static_or(d, x) for d, x in zip(rt.stride, stride)]
    _derive(cg, inst, inst.slots["tensor"])
    return MemVal(ptr, shape, stride, rt)


@emits("fuse")
def emit_fuse(cg: FunctionCodegen, inst: Instruction):
    m: MemVal = cg.get(inst.slots["tensor"])
    lo, hi = inst.attrs["from"], inst.attrs["to"]
    size: IndexLike = 1
    for d in m.shape[lo:hi + 1]:
        size = cg.imul(size, d)
    if cg.checked:
        for k in range(lo, hi):
            prod = cg.imul(m.stride[k], m.shape[k])
            if isinstance(prod, int) and isinstance(m.stride[k + 1], int):
                continue
            pv, sv = cg.match(cg.ival(prod), cg.ival(m.stride[k + 1]))
            cg.fail_if(cg.b.icmp_signed("!=", pv, sv), E_FUSE, [ir.Constant(I64, k)])
    shape = m.shape[:lo] + [size] + m.shape[hi + 1:]
    stride = m.stride[:lo + 1] + m.stride[hi + 1:]
    return _view(cg, inst, m.ptr, shape, stride)


# ==== control flow ============================================================================
@emits("parallel")
def emit_parallel(cg: FunctionCodegen, inst: Instruction):
    saved = cg.spmd
    cg.spmd = True
    try:
        cg.emit_region(inst.regions[0], None, keep_mask=False)
    finally:
        cg.spmd = saved
    return None


#: functions (cg, for instruction) -> {index: carrier}: carried values of a uniform loop
#: that a backend feature holds outside LLVM values for the whole loop (``amx.claim_loop``:
#: accumulators in tile registers).  ``carrier.unroll`` is how many copies of the body per
#: iteration it would like (given when the trip count is a constant multiple of it);
#: ``carrier.enter(cg, init, copies)`` before the loop gives the body's value, which the
#: body updates in place; ``carrier.leave(cg)`` after it, the result.
LOOP_CARRIERS: List[Callable[[Any, Instruction], Dict[int, Any]]] = []


@emits("for")
def emit_for(cg: FunctionCodegen, inst: Instruction):
    """A loop: uniform bounds loop as usual; varying bounds loop while any lane is active.

    A varying loop whose start is Lanes (``for %i = %work_item, %n, %W``, the loops
    lower-foreach makes) and whose end and step are uniform keeps its variable as Lanes
    with a uniform base, so that accesses through it stay vector loads and stores.  Its
    lanes all advance together; a lane that has left the range stays inactive (a sticky
    mask), which is what freezing it (the interpreter) means for everything observable."""
    b = cg.b
    body = inst.regions[0]
    lt = inst.slots["from"].type
    ll = LLTYPE[lt.name]
    raw_lo = cg.raw(inst.slots["from"])
    hi = cg.get(inst.slots["to"])
    step = cg.get(inst.slots["step"]) if "step" in inst.slots else ir.Constant(ll, 1)
    inits = [cg.get(v) for v in inst.slots.get("init", [])]
    types = [r.type for r in inst.results]
    res_var = [r in cg.varying for r in inst.results]
    varying = cg.spmd and (body.args[0] in cg.varying
                           or any(is_vec(x) for x in (raw_lo, hi, step)))
    affine = varying and isinstance(raw_lo, Lanes) and not is_vec(hi) and not is_vec(step)
    if varying:
        res_var = [True] * len(types)
        hi, step = cg.splat(hi), (step if affine else cg.splat(step))
    lo = raw_lo if affine else (cg.splat(raw_lo) if varying else cg.get(inst.slots["from"]))
    inits = [cg.coerce(x, v) for x, v in zip(inits, res_var)]
    held = {} if varying else {k: c for claim in LOOP_CARRIERS for k, c in claim(cg, inst).items()}
    copies = max([c.unroll for c in held.values()], default=1)
    trip = [x.constant for x in (lo, hi, step) if isinstance(x, ir.Constant)]
    if copies > 1 and not (len(trip) == 3 and trip[2] > 0
                           and max(0, -(-(trip[1] - trip[0]) // trip[2])) % copies == 0):
        copies = 1
    held = {k: c.enter(cg, inits[k], copies) for k, c in held.items()}
    prev0 = cg.mask if cg.mask is not None else ir.Constant(cg.vt(I1), [1] * cg.W)
    pre = b.block
    header, body_bb, done = cg.block("for"), cg.block("for.body"), cg.block("for.done")
    b.branch(header)
    b.position_at_end(header)
    if affine:
        i = b.phi(ll, name="i.base")
        i.add_incoming(lo.base if lo.base is not None else ir.Constant(ll, 0), pre)
        prev = b.phi(cg.vt(I1), name="active")
        prev.add_incoming(prev0, pre)
        var = Lanes(i, lo.offsets, ll)
    else:
        i = b.phi(lo.type, name="i")
        i.add_incoming(lo, pre)
        var = i
    carried = []
    for k, (t, v, x) in enumerate(zip(types, res_var, inits)):
        if k in held:
            carried.append(held[k])
            continue
        p = cg.phi(t, v)
        cg.add_incoming(p, x, pre)
        carried.append(p)
    if affine:
        active = b.and_(prev, b.icmp_signed("<", cg.vector(var), hi))
        b.cbranch(cg.reduce_or(active), body_bb, done)
    elif varying:
        active = cg.and_mask(cg.mask, b.icmp_signed("<", i, hi))
        b.cbranch(cg.reduce_or(active), body_bb, done)
    else:
        active = None
        b.cbranch(b.icmp_signed("<", i, hi), body_bb, done)
    b.position_at_end(body_bb)
    if cg.checked:
        zero = cg.const_like(step, ll, 0)
        saved = cg.mask
        cg.mask = active if varying else cg.mask
        cg.fail_if(b.icmp_signed("<=", step, zero), E_STEP, [step])
        cg.mask = saved
    cg.env[body.args[0]] = var
    for a, p in zip(body.args[1:], carried):
        cg.env[a] = p
    out = (cg.emit_region(body, active) if varying else cg.emit_region(body)) or []
    i_last = i
    for _ in range(1, copies):  # (uniform loops only: held is empty otherwise)
        i_last = b.add(i_last, step)
        cg.env[body.args[0]] = i_last
        for k, (a, o, v) in enumerate(zip(body.args[1:], out, res_var)):
            cg.env[a] = o if k in held else cg.coerce(o, v)
        out = cg.emit_region(body) or []
    if varying:
        new = [cg.select(active, cg.coerce(o, True), c) for o, c in zip(out, carried)]
        nxt = b.add(i, step) if affine else b.select(active, b.add(i, step), i)
    else:
        new = [o if k in held else cg.coerce(o, v) for k, (o, v) in enumerate(zip(out, res_var))]
        nxt = b.add(i_last, step)
    end = b.block
    i.add_incoming(nxt, end)
    if affine:
        prev.add_incoming(active, end)
    for k, (p, v) in enumerate(zip(carried, new)):
        if k not in held:
            cg.add_incoming(p, v, end)
    b.branch(header)
    b.position_at_end(done)
    return [held[k].leave(cg) if k in held else p for k, p in enumerate(carried)]


@emits("if")
def emit_if(cg: FunctionCodegen, inst: Instruction):
    b = cg.b
    cond = cg.get(inst.slots["condition"])
    then_r = inst.regions[0]
    else_r = inst.regions[1] if len(inst.regions) > 1 else None
    types = [r.type for r in inst.results]
    res_var = [r in cg.varying for r in inst.results]
    if not is_vec(cond):
        then_bb = cg.block("then")
        else_bb = cg.block("else") if else_r is not None else None
        merge = cg.block("endif")
        b.cbranch(cond, then_bb, else_bb or merge)
        incoming = []
        b.position_at_end(then_bb)
        out = cg.emit_region(then_r) or []
        incoming.append(([cg.coerce(o, v) for o, v in zip(out, res_var)], b.block))
        b.branch(merge)
        if else_bb is not None:
            b.position_at_end(else_bb)
            out = cg.emit_region(else_r) or []
            incoming.append(([cg.coerce(o, v) for o, v in zip(out, res_var)], b.block))
            b.branch(merge)
        b.position_at_end(merge)
        results = []
        for k, (t, v) in enumerate(zip(types, res_var)):
            p = cg.phi(t, v)
            for vals, blk in incoming:
                cg.add_incoming(p, vals[k], blk)
            results.append(p)
        return results
    # divergent: each side runs under its mask, when any of its lanes is active
    then_mask = cg.and_mask(cg.mask, cond)
    not_cond = b.xor(cond, cg.const_like(cond, I1, 1))
    else_mask = cg.and_mask(cg.mask, not_cond)

    def side(region, mask, name):
        if region is None:
            return [cg.zero(t, True) for t in types]
        pre = b.block
        run, after = cg.block(name), cg.block(name + ".end")
        b.cbranch(cg.reduce_or(mask), run, after)
        b.position_at_end(run)
        out = cg.emit_region(region, mask) or []
        out = [cg.coerce(o, True) for o in out]
        end = b.block
        b.branch(after)
        b.position_at_end(after)
        vals = []
        for t, o in zip(types, out):
            p = cg.phi(t, True)
            cg.add_incoming(p, o, end)
            cg.add_incoming(p, cg.zero(t, True), pre)
            vals.append(p)
        return vals

    then_vals = side(then_r, then_mask, "then")
    else_vals = side(else_r, else_mask, "else")
    return [cg.select(cond, tv, ev) for tv, ev in zip(then_vals, else_vals)]


# ==== subgroup operations ======================================================================
def _subgroup_lanes(cg: FunctionCodegen, k: int) -> ir.Constant:
    """Shuffle mask picking lane k of every subgroup (one entry per subgroup)."""
    G = cg.W // cg.S
    return ir.Constant(ir.VectorType(I32, G), [g * cg.S + k for g in range(G)])


@emits(*SUBGROUP_OPS)
def emit_subgroup_op(cg: FunctionCodegen, inst: Instruction):
    """Scans and reductions in subgroup-local id order; inactive lanes give the identity."""
    b = cg.b
    t: ScalarType = inst.results[0].type
    kind, op = inst.opcode[len("subgroup_"):].rsplit("_", 1)
    x = cg.splat(cg.get(inst.slots["a"]))
    G, S = cg.W // cg.S, cg.S
    # combine 16-bit floats in f32 (accumulate_type), round every result once
    wide = accumulate_type(t) != t

    def widen(v):
        if t.name == "bf16":
            return cg.bf16_to_f32(v)
        if t.name == "f16":
            return b.fpext(v, cg.like(v, F32))
        return v

    def narrow(v):
        if t.name == "bf16":
            return cg.f32_to_bf16(v)
        if t.name == "f16":
            return b.fptrunc(v, cg.like(v, F16))
        return v

    xs = [widen(p) for p in parts(x)]
    elem = xs[0].type.element
    if op == "add":
        ident = 0 if isinstance(elem, ir.IntType) else 0.0
    elif isinstance(elem, ir.IntType):
        bits = elem.width
        ident = -(1 << (bits - 1)) if op == "max" else (1 << (bits - 1)) - 1
    else:
        ident = -math.inf if op == "max" else math.inf
    if cg.mask is not None:
        xs = [b.select(cg.mask, p, cg.const_like(p, elem, ident)) for p in xs]
    cst = SCALAR_TYPES["f32"] if wide else t
    pick = [[b.shuffle_vector(p, p, _subgroup_lanes(cg, k)) for p in xs] for k in range(S)]
    acc = None
    prefix = []
    for k in range(S):
        cur = pick[k]
        if acc is None:
            acc = cur
        else:
            combined = binary(cg, op, cst, cst_value(cst, acc), cst_value(cst, cur))
            acc = parts(combined)
        prefix.append(acc)
    ident_g = [ir.Constant(ir.VectorType(elem, G), [ident] * G) for _ in xs]
    if kind == "reduce":
        per_k = [prefix[-1]] * S
    elif kind == "inclusive_scan":
        per_k = prefix
    else:
        per_k = [ident_g] + prefix[:-1]
    outs = [narrow(_transpose_back(cg, [per_k[k][c] for k in range(S)]))
            for c in range(len(xs))]
    return cg.from_parts(t, outs)


def _transpose_back(cg: FunctionCodegen, per_k: List[ir.Value]) -> ir.Value:
    """S vectors of G lanes (entry g of vector k for lane g*S + k) as one vector of W lanes."""
    b = cg.b
    S = len(per_k)
    G = per_k[0].type.count
    vecs = list(per_k)
    while len(vecs) > 1:  # concatenate pairwise: the order of the vectors is kept
        n = vecs[0].type.count
        cat = ir.Constant(ir.VectorType(I32, 2 * n), list(range(2 * n)))
        vecs = [b.shuffle_vector(vecs[i], vecs[i + 1], cat) for i in range(0, len(vecs), 2)]
    # vecs[0][k * G + g] is lane g * S + k
    perm = [(lane % S) * G + lane // S for lane in range(S * G)]
    return b.shuffle_vector(vecs[0], vecs[0], ir.Constant(ir.VectorType(I32, S * G), perm))


def cst_value(t: ScalarType, ps: list):
    return Cplx(ps[0], ps[1]) if t.is_complex else ps[0]


def _check_broadcast(cg: FunctionCodegen, lane) -> None:
    """Checked code: every executing subgroup broadcasts from an active work-item of
    itself (the lane as its first active work-item sees it)."""
    from .coop import first_lane, subgroup_active

    b = cg.b
    if isinstance(lane, Lanes):
        lane = cg.vector(lane)
    saved = cg.mask
    for g in range(cg.W // cg.S):
        first = first_lane(cg, g)
        src = b.extract_element(lane, first) if is_vec(lane) else lane
        outside = b.or_(b.icmp_signed("<", src, ir.Constant(I32, 0)),
                        b.icmp_signed(">=", src, ir.Constant(I32, cg.S)))
        executing = subgroup_active(cg, g)
        if saved is not None:
            index = b.add(b.select(outside, ir.Constant(I32, 0), src), ir.Constant(I32, g * cg.S))
            inactive = b.xor(b.extract_element(saved, index), ir.Constant(I1, 1))
        else:
            inactive = ir.Constant(I1, 0)
        cg.mask = None
        try:
            for kind, bad in enumerate((outside, inactive)):
                if executing is not None:
                    bad = b.and_(bad, executing)
                cg.fail_if(bad, E_BROADCAST, [ir.Constant(I64, kind), src,
                                              ir.Constant(I64, cg.S)], lane=first)
        finally:
            cg.mask = saved


@emits("subgroup_broadcast")
def emit_subgroup_broadcast(cg: FunctionCodegen, inst: Instruction):
    b = cg.b
    t: ScalarType = inst.results[0].type
    a = cg.get(inst.slots["a"])
    lane = cg.get(inst.slots["lane"])
    G, S = cg.W // cg.S, cg.S
    if cg.checked:
        _check_broadcast(cg, lane)
    if not cg.varying_repr(a):
        return a
    lane = cg.splat(lane)
    # the lane index of the first active work-item of each subgroup
    mask = cg.mask
    outs = []
    for p in parts(a):
        vec = ir.Constant(ir.VectorType(p.type.element, G), ir.Undefined)
        for g in range(G):
            if mask is None:
                src_l = b.extract_element(lane, ir.Constant(I32, g * S))
            else:
                sub = b.shuffle_vector(mask, mask, ir.Constant(ir.VectorType(I32, S),
                                                               list(range(g * S, g * S + S))))
                first = cg.first_lane(sub)
                # an inactive subgroup: take its first lane (any value will do)
                first = b.select(b.icmp_unsigned("==", first, ir.Constant(I32, S)),
                                 ir.Constant(I32, 0), first)
                src_l = b.extract_element(lane, b.add(first, ir.Constant(I32, g * S)))
            bad = b.or_(b.icmp_signed("<", src_l, ir.Constant(I32, 0)),
                        b.icmp_signed(">=", src_l, ir.Constant(I32, S)))
            idx = b.add(b.select(bad, ir.Constant(I32, 0), src_l), ir.Constant(I32, g * S))
            val = b.select(bad, ir.Constant(p.type.element, None), b.extract_element(p, idx))
            vec = b.insert_element(vec, val, ir.Constant(I32, g))
        # every lane of subgroup g takes entry g
        outs.append(b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, cg.W),
                                                           [lane // S for lane in range(cg.W)])))
    return cg.from_parts(t, outs)


from . import coop as _coop  # noqa: E402,F401  (registers the coopmatrix emitters)
from . import amx as _amx  # noqa: E402,F401  (registers its LOOP_CARRIERS entry)


# ==== the module ===================================================================================
def symbol_of(name: str) -> str:
    return "ttlc." + name


def generate(program: Program, checked: bool) -> Tuple[str, Dict[str, KernelInfo]]:
    """LLVM IR text for every kernel of a (lowered) program, and how to call them."""
    from . import jit

    module = ir.Module(name="ttlc")
    module.triple = jit.triple()
    module.data_layout = jit.data_layout()
    kernels: Dict[str, KernelInfo] = {}
    for func in program.functions:
        cg = FunctionCodegen(module, func, symbol_of(func.name), checked)
        try:
            kernels[func.name] = cg.build()
        except Unsupported as e:
            what = e.args[0]
            if isinstance(what, Instruction):
                raise CompileError([Diagnostic(what.loc, "not supported on target cpu yet: "
                                               f"{what.opcode}")],
                                   program.source, program.filename) from None
            loc = cg.current.loc if cg.current is not None else func.loc
            raise CompileError([Diagnostic(loc, f"not supported on target cpu yet: {what}")],
                               program.source, program.filename) from None
    text = str(module)
    attrs = jit.function_attributes()
    if attrs:
        text = re.sub(r'^(define i32 @"ttlc\.[^"]*"\(.*\))$', r"\1 #0", text, flags=re.M)
        text += "\nattributes #0 = { nounwind " + " ".join(attrs) + " }\n"
    return text, kernels
