"""A NumPy simulator of the MLIR modules target xevm emits: a test tool that checks what
an emitted module means without an Intel GPU (docs/xevm.md, *Simulator*).

``parse`` reads the subset of MLIR the emitter writes (``gpu.module``, ``gpu.func``
kernels, ``llvm.mlir.global`` in address space 3, ``llvm.func`` declarations of the
OpenCL subgroup builtins of ``builtin``, and the ``arith``, ``math``, ``llvm``, ``scf``,
``gpu`` and ``xevm`` operations of ``SEMANTICS``); any other operation is a
``SimulationError`` naming it and its line.  ``run`` executes one kernel on a grid:
every work-item of every work-group runs the kernel body, all of them in lockstep, one
NumPy array per SSA value with one entry per work-item (``(work-items, n)`` for
``vector<n x T>``), and a mask of the work-items that are active in divergent
``scf.if``/``scf.for``.  Work-items are numbered work-group by work-group, then
``local_id.y``, then ``local_id.x``, so that the ``S`` consecutive ones form a subgroup
(``lane_id`` is the position among them): subgroup operations (``gpu.shuffle``, the
subgroup builtins, the 2-D block operations, ``xevm.mma``) reshape a value to
``(subgroups, S)``.  Values of inactive lanes are never read as if defined: a shuffle that
would is a ``KernelError``.  Lockstep is one
of the schedules the hardware may choose, so ``gpu.barrier`` only checks that the whole
work-group reaches it.

Memory is bytes at addresses: the arrays of the arguments where they lie in host memory
(marshalled by ``ttlc.runtime.args``, as every target does), the tables of group
arguments, and one copy of every work-group global per work-group.  An access outside
all of them is a ``KernelError``.  Atomic updates are applied one work-item after
another.

The xevm operations follow the XeVM dialect's definitions, with the lane distribution
of Intel's 2-D block and DPAS instructions: a 2-D block (``tile_height`` rows of ``tile_width``
elements, ``v_blocks`` of them side by side) is laid out row after row, block after
block (transposed first with ``transpose``, or with ``pack_register`` ``f = 32 / bits``
consecutive rows interleaved element by element into 32-bit units: ``[M, N] -> [M/f, N,
f]``), and its bytes are dealt to the lanes in units of the vector's element type: unit
``i * S + l`` is element ``i`` of lane ``l``.  Elements outside the base matrix
(``base_width`` bytes by ``base_height`` rows, ``base_pitch`` bytes apart) read as 0 and
are not written.  ``xevm.mma`` takes A (M x K) and C, D (M x N) as such row-major
layouts and B (K x N) packed as ``pack_register`` packs it; D = C + A B computed in
float64 (integers: int64, wrapped to i32) and rounded once.
"""
from __future__ import annotations

import ctypes
import functools
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import ml_dtypes
import numpy as np

from ..backends.simt import pointer_arguments
from ..diagnostics import KernelError
from ..ir.types import BoolType, GroupType, MemrefType
from ..target import get_target
from ..runtime import Module, check_grid
from ..runtime.args import marshal, memref_address
from ..runtime.values import Memory as Buffers

#: NumPy dtype of each MLIR scalar type (pointers are int64 addresses)
DTYPE = {"i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
         "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "f16": np.dtype(np.float16),
         "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
         "f64": np.dtype(np.float64)}
#: the work-items simulated at once (whole work-groups); larger grids run in batches
BATCH = 4096


class SimulationError(ValueError):
    """The module is outside what the simulator knows, or breaks a rule it checks."""


# ---- types ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class VType:
    """An MLIR value type: scalar (``n`` None) or ``vector<n x T>``; pointers are i64."""

    name: str
    n: Optional[int] = None

    @property
    def dtype(self) -> np.dtype:
        return DTYPE[self.name]


@functools.lru_cache(maxsize=None)
def vtype(text: str) -> VType:
    text = text.strip()
    if text.startswith("!llvm.ptr"):
        return VType("i64")
    m = re.fullmatch(r"vector<(\d+)x(\w+)>", text)
    if m:
        return VType(m.group(2), int(m.group(1)))
    m = re.fullmatch(r"!llvm\.array<(\d+) x (.+)>", text)
    if m:  # an array in memory: its bytes
        inner = vtype(m.group(2))
        return VType("i8", int(m.group(1)) * size_of(inner))
    if text == "index":
        return VType("i64")
    if text not in DTYPE:
        raise SimulationError(f"unknown type {text}")
    return VType(text)


def size_of(t: VType) -> int:
    """Bytes of a value of type t in memory (i1 is a byte)."""
    return t.dtype.itemsize * (t.n or 1)


# ---- the module ------------------------------------------------------------------------------
@dataclass
class Op:
    name: str
    results: List[str]
    text: str  # what follows the name
    line: int
    regions: List[List["Op"]] = field(default_factory=list)
    step: Optional[Callable] = None

    def where(self) -> str:
        return f"line {self.line}: {self.name}"


@dataclass
class Func:
    name: str
    params: List[Tuple[str, VType]]
    work_group: Tuple[int, int]
    subgroup_size: int
    body: List[Op]


@dataclass
class SimModule:
    functions: Dict[str, Func]
    #: work-group globals: name -> bytes per work-group
    globals: Dict[str, int]


_NAME = r"%[\w$.#-]+"
_RESULT = re.compile(rf"^({_NAME})(?::(\d+))?((?:, {_NAME})*) = ([\w.]+)\s*(.*)$")
_OP = re.compile(r"^([\w.]+)\s*(.*)$")


def parse(text: str) -> SimModule:
    """The kernels and globals of an emitted module; SimulationError for anything else."""
    lines = [(n + 1, ln.strip()) for n, ln in enumerate(text.splitlines())]
    lines = [(n, ln) for n, ln in lines if ln and not ln.startswith("//")]
    functions: Dict[str, Func] = {}
    globals_: Dict[str, int] = {}
    declared: set = set()
    pos = 0
    while pos < len(lines):
        n, ln = lines[pos]
        pos += 1
        if ln.startswith(("module", "gpu.module")) or ln == "}":
            continue
        m = re.match(r"llvm\.mlir\.global \w+ @([\w$.\"-]+)\(\) \{addr_space = 3 : i32\} : "
                     r"(.+)$", ln)
        if m:
            globals_[m.group(1).strip('"')] = size_of(vtype(m.group(2)))
            continue
        m = re.match(r"llvm\.func spir_funccc @(\w+)\((.*)\) -> (\S+) attributes \{.*\}$", ln)
        if m:  # the declaration of an OpenCL builtin
            builtin(m.group(1), [t.strip() for t in m.group(2).split(",")], m.group(3),
                    f"line {n}")
            declared.add(m.group(1))
            continue
        m = re.match(r"gpu\.func @([\w$.\"-]+)\((.*)\) kernel attributes \{(.*)\} \{$", ln)
        if not m:
            raise SimulationError(f"line {n}: not part of the simulated subset: {ln}")
        attrs = m.group(3)
        block = re.search(r"known_block_size = array<i32: (\d+), (\d+), (\d+)>", attrs)
        size = re.search(r"intel_reqd_sub_group_size = (\d+)", attrs)
        if not block or not size or block.group(3) != "1":
            raise SimulationError(f"line {n}: a kernel needs known_block_size = array<i32: x, "
                                  "y, 1> and intel_reqd_sub_group_size")
        params = [(p.split(":")[0].strip(), vtype(p.split(":", 1)[1]))
                  for p in m.group(2).split(", ") if p]
        body, pos, end = _block(lines, pos)
        func = Func(m.group(1).strip('"'), params, (int(block.group(1)), int(block.group(2))),
                    int(size.group(1)), body)
        if func.work_group[0] % func.subgroup_size:
            raise SimulationError(f"line {n}: the work-group's x size {func.work_group[0]} is "
                                  f"not a multiple of the subgroup size {func.subgroup_size}")
        functions[func.name] = func
    for func in functions.values():
        _prepare(func.body, declared)
    return SimModule(functions, globals_)


def _block(lines, pos) -> Tuple[List[Op], int, str]:
    """The operations up to the closing ``}`` (or ``} else {``): (ops, next line, closer)."""
    ops: List[Op] = []
    while pos < len(lines):
        n, ln = lines[pos]
        pos += 1
        if ln in ("}", "} else {"):
            return ops, pos, ln
        m = _RESULT.match(ln)
        if m:
            first, count, more, name, rest = m.groups()
            results = ([f"{first}#{i}" for i in range(int(count))] if count else
                       [first] + [x.strip() for x in more.split(",") if x.strip()])
        else:
            m = _OP.match(ln)
            if not m:
                raise SimulationError(f"line {n}: cannot read {ln!r}")
            name, rest = m.groups()
            results = []
        op = Op(name, results, rest, n)
        if rest.endswith("{"):
            while True:
                region, pos, closer = _block(lines, pos)
                op.regions.append(region)
                if closer == "}":
                    break
        ops.append(op)
    raise SimulationError("the module ends inside a region")


def _prepare(ops: List[Op], declared: set) -> None:
    for op in ops:
        build = SEMANTICS.get(op.name)
        if build is None:
            raise SimulationError(f"line {op.line}: operation {op.name} is not simulated "
                                  "(not part of what target xevm emits)")
        callee = re.match(r"\w+ @(\w+)", op.text) if op.name == "llvm.call" else None
        if callee and callee.group(1) not in declared:
            raise SimulationError(f"{op.where()}: @{callee.group(1)} is not declared")
        try:
            op.step = build(op)
        except SimulationError:
            raise
        except Exception as e:  # a malformed operation
            raise SimulationError(f"{op.where()}: cannot read {op.text!r} ({e})") from None
        for region in op.regions:
            _prepare(region, declared)


# ---- memory ----------------------------------------------------------------------------------
class Memory:
    """Byte windows at addresses: host arrays, group tables and work-group memory."""

    def __init__(self):
        self.starts = np.zeros(0, np.int64)
        self.ends = np.zeros(0, np.int64)
        self.windows: List[np.ndarray] = []
        self.keep: List[object] = []

    def add(self, array: np.ndarray) -> int:
        """Make an array's bytes addressable where they lie; its address.  Windows that
        overlap (views of one array) become one."""
        self.keep.append(array)
        lo = int(array.__array_interface__["data"][0])
        hi = lo + array.nbytes
        if array.nbytes == 0:
            return lo
        overlap = (self.starts < hi) & (self.ends > lo)
        if overlap.any():
            lo = min(lo, int(self.starts[overlap].min()))
            hi = max(hi, int(self.ends[overlap].max()))
        keep = ~overlap
        self.windows = [w for w, k in zip(self.windows, keep) if k]
        self.starts, self.ends = self.starts[keep], self.ends[keep]
        order = int(np.searchsorted(self.starts, lo))
        self.starts = np.insert(self.starts, order, lo)
        self.ends = np.insert(self.ends, order, hi)
        self.windows.insert(order, np.ctypeslib.as_array(
            (ctypes.c_uint8 * (hi - lo)).from_address(lo)))
        return int(array.__array_interface__["data"][0])

    def _locate(self, addresses: np.ndarray, size: int, where: str):
        k = np.searchsorted(self.starts, addresses, side="right") - 1
        ok = (k >= 0) & (addresses + size <= self.ends[np.maximum(k, 0)]) if len(self.starts) \
            else np.zeros(addresses.shape, bool)
        if not np.all(ok):
            bad = int(addresses[~ok][0])
            raise KernelError(f"{where}: an access of {size} bytes at address {bad:#x} is "
                              "outside the memory the kernel was given")
        return k

    def read(self, addresses: np.ndarray, size: int, where: str) -> np.ndarray:
        """The `size` bytes at each address: (n, size) uint8."""
        addresses = np.asarray(addresses, np.int64).reshape(-1)
        out = np.zeros((addresses.size, size), np.uint8)
        if addresses.size == 0:
            return out
        k = self._locate(addresses, size, where)
        for w in np.unique(k):
            sel = k == w
            offsets = addresses[sel] - self.starts[w]
            out[sel] = self.windows[w][offsets[:, None] + np.arange(size)]
        return out

    def write(self, addresses: np.ndarray, data: np.ndarray, where: str) -> None:
        """Write data (n, size) uint8 at the addresses, in order (the last write wins)."""
        addresses = np.asarray(addresses, np.int64).reshape(-1)
        if addresses.size == 0:
            return
        k = self._locate(addresses, data.shape[1], where)
        for w in np.unique(k):
            sel = k == w
            offsets = addresses[sel] - self.starts[w]
            self.windows[w][offsets[:, None] + np.arange(data.shape[1])] = data[sel]


def as_bytes(values: np.ndarray, t: VType) -> np.ndarray:
    """(work-items, bytes) of values of type t."""
    x = np.ascontiguousarray(values.astype(t.dtype, copy=False))
    if t.name == "i1":
        x = x.astype(np.uint8)
    return x.view(np.uint8).reshape(len(values), size_of(t))


def from_bytes(data: np.ndarray, t: VType) -> np.ndarray:
    if t.name == "i1":
        return (data[:, 0] & 1).astype(bool)
    x = np.ascontiguousarray(data).view(t.dtype)
    return x.reshape(len(data), t.n) if t.n else x.reshape(len(data))


# ---- execution state -------------------------------------------------------------------------
class Frame:
    """The state of a batch of work-groups running in lockstep."""

    def __init__(self, memory: Memory, func: Func, groups: np.ndarray, grid, globals_):
        self.memory, self.func = memory, func
        wgx, wgy = func.work_group
        size = wgx * wgy
        self.S = func.subgroup_size
        self.W = len(groups) * size
        local = np.tile(np.arange(size), len(groups))
        group = np.repeat(groups, size)
        i32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
        self.ids = {
            "local_id.x": i32(local % wgx), "local_id.y": i32(local // wgx),
            "local_id.z": i32(np.zeros(self.W)),
            "group_id.x": i32(group % grid[0]), "group_id.y": i32(group // grid[0] % grid[1]),
            "group_id.z": i32(group // (grid[0] * grid[1])),
            "lane_id": i32(local % self.S), "subgroup_id": i32(local // self.S),
            **{f"group_count.{d}": i32(np.full(self.W, g)) for d, g in zip("xyz", grid)},
            **{f"local_size.{d}": i32(np.full(self.W, s)) for d, s in zip("xyz", (wgx, wgy, 1))},
            "subgroup_size": i32(np.full(self.W, self.S)),
        }
        self.values: Dict[str, np.ndarray] = {}
        self.mask = np.ones(self.W, bool)
        #: work-group memory: each global's address per work-item
        self.globals: Dict[str, np.ndarray] = {}
        for name, nbytes in globals_.items():
            stride = -(-max(nbytes, 1) // 64) * 64
            buf = np.zeros(stride * len(groups) + 64, np.uint8)
            base = memory.add(buf)
            base += -base % 64
            self.globals[name] = np.repeat(base + stride * np.arange(len(groups)), size)
        self.yielded: List[np.ndarray] = []

    def get(self, name: str) -> np.ndarray:
        try:
            return self.values[name]
        except KeyError:
            raise SimulationError(f"the value {name} is used before it is defined") from None

    def full(self, value, dtype) -> np.ndarray:
        return np.full(self.W, value, dtype)

    def subgroups(self, x: np.ndarray) -> np.ndarray:
        return x.reshape((self.W // self.S, self.S) + x.shape[1:])


def run_ops(f: Frame, ops: List[Op]) -> None:
    for op in ops:
        op.step(f)


# ---- operations ------------------------------------------------------------------------------
SEMANTICS: Dict[str, Callable[[Op], Callable[[Frame], None]]] = {}


def _sem(*names):
    """Register a builder of the step of the operations `names`."""
    return lambda build: SEMANTICS.update(dict.fromkeys(names, build)) or build


def _split(text: str) -> Tuple[List[str], str]:
    """``%a, %b : type`` -> ([%a, %b], type)."""
    operands, _, ty = text.rpartition(" : ")
    return [x.strip() for x in operands.split(",") if x.strip()], ty.strip()


def _unsigned(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "i" else x


def _wide(x: np.ndarray) -> np.ndarray:
    """16-bit floats are computed in f32 and rounded once (exact for + - * / fmod min max)."""
    return x.astype(np.float32) if x.dtype.kind == "f" and x.dtype.itemsize == 2 or \
        x.dtype == DTYPE["bf16"] else x


def _trunc_div(a, b):
    b = np.where(b == 0, 1, b).astype(a.dtype)
    return (a - np.fmod(a, b)) // b


def _shift(kind):
    def fn(a, b):
        amount = (b.astype(np.int64) % (a.dtype.itemsize * 8)).astype(a.dtype)
        if kind == "shli":
            return np.left_shift(a, amount)
        if kind == "shrui":
            return np.right_shift(_unsigned(a), _unsigned(amount)).view(a.dtype)
        return np.right_shift(a, amount)
    return fn


_BINARY = {
    "addi": np.add, "subi": np.subtract, "muli": np.multiply,
    "andi": np.bitwise_and, "ori": np.bitwise_or, "xori": np.bitwise_xor,
    "maxsi": np.maximum, "minsi": np.minimum,
    "maxui": lambda a, b: np.maximum(_unsigned(a), _unsigned(b)).view(a.dtype),
    "minui": lambda a, b: np.minimum(_unsigned(a), _unsigned(b)).view(a.dtype),
    "divsi": _trunc_div, "remsi": lambda a, b: np.fmod(a, np.where(b == 0, 1, b).astype(a.dtype)),
    "divui": lambda a, b: (_unsigned(a) // np.maximum(_unsigned(b), 1).astype(
        _unsigned(a).dtype)).view(a.dtype),
    "remui": lambda a, b: (_unsigned(a) % np.maximum(_unsigned(b), 1).astype(
        _unsigned(a).dtype)).view(a.dtype),
    "shli": _shift("shli"), "shrsi": _shift("shrsi"), "shrui": _shift("shrui"),
    "addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide,
    "remf": np.fmod, "maxnumf": np.fmax, "minnumf": np.fmin, "maximumf": np.maximum,
    "minimumf": np.minimum,
}


@_sem(*(f"arith.{n}" for n in _BINARY))
def _arith_binary(op: Op):
    (a, b), ty = _split(op.text)
    fn, t, r = _BINARY[op.name[6:]], vtype(ty), op.results[0]

    def step(f: Frame):
        with np.errstate(all="ignore"):
            x = fn(_wide(f.get(a)), _wide(f.get(b)))
        f.values[r] = np.asarray(x).astype(t.dtype)
    return step


_UNARY = {"arith.negf": np.negative, "math.absf": np.abs, "math.absi": np.abs,
          "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2,
          "math.sin": np.sin, "math.cos": np.cos, "math.sqrt": np.sqrt, "math.floor": np.floor,
          "math.ceil": np.ceil, "math.tanh": np.tanh}


@_sem(*_UNARY)
def _unary(op: Op):
    (a,), ty = _split(op.text)
    fn, t, r = _UNARY[op.name], vtype(ty), op.results[0]

    def step(f: Frame):
        with np.errstate(all="ignore"):
            f.values[r] = np.asarray(fn(_wide(f.get(a)))).astype(t.dtype)
    return step


_CMPI = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
         "sgt": np.greater, "sge": np.greater_equal}
_CMPF = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
         "gt": np.greater, "ge": np.greater_equal}


def _compare(pred: str, a: np.ndarray, b: np.ndarray, floats: bool) -> np.ndarray:
    if not floats:
        if pred in _CMPI:
            return _CMPI[pred](a, b)
        if pred[0] == "u" and "s" + pred[1:] in _CMPI:
            return _CMPI["s" + pred[1:]](_unsigned(a), _unsigned(b))
        raise SimulationError(f"unknown integer predicate {pred}")
    a, b = _wide(a), _wide(b)
    nan = np.isnan(a) | np.isnan(b)
    if pred in ("true", "false"):
        return np.full(a.shape, pred == "true")
    if pred in ("ord", "uno"):
        return nan if pred == "uno" else ~nan
    if pred[1:] not in _CMPF:
        raise SimulationError(f"unknown float predicate {pred}")
    r = _CMPF[pred[1:]](a, b)
    return (r | nan) if pred[0] == "u" else (r & ~nan)


@_sem("arith.cmpi", "arith.cmpf", "llvm.icmp")
def _cmp(op: Op):
    pred, rest = re.match(r'("\w+"|\w+),?\s+(.*)', op.text).groups()
    (a, b), _ = _split(rest)
    pred, r, floats = pred.strip().strip('"'), op.results[0], op.name == "arith.cmpf"
    _compare(pred, np.zeros(1), np.zeros(1), floats)  # an unknown predicate fails here

    def step(f: Frame):
        with np.errstate(all="ignore"):
            f.values[r] = _compare(pred, f.get(a), f.get(b), floats)
    return step


@_sem("arith.select")
def _select(op: Op):
    (c, a, b), ty = _split(op.text)
    t, r = vtype(ty), op.results[0]

    def step(f: Frame):
        x, y, cond = f.get(a), f.get(b), f.get(c)
        if cond.ndim < x.ndim:  # one condition for a whole vector
            cond = cond[:, None]
        f.values[r] = np.where(cond, x, y).astype(t.dtype)
    return step


@_sem("arith.constant")
def _constant(op: Op):
    text, r = op.text.strip(), op.results[0]
    if text in ("true", "false"):
        value = np.bool_(text == "true")
    else:
        literal, ty = (x.strip() for x in text.rsplit(" : ", 1))
        t = vtype(ty)
        if literal.lower().startswith("0x") and t.dtype.kind not in "iu":
            bits = np.array([int(literal, 16)], np.dtype(f"u{t.dtype.itemsize}"))
            value = bits.view(t.dtype)[0]
        else:
            value = np.array([int(literal, 0) if t.dtype.kind in "iub" else float(literal)]
                             ).astype(t.dtype)[0]

    def step(f: Frame):
        f.values[r] = f.full(value, np.asarray(value).dtype)
    return step


def _convert(kind: str, x: np.ndarray, t: VType) -> np.ndarray:
    if kind in ("extui", "uitofp"):
        x = x.astype(np.uint8) if x.dtype == np.bool_ else _unsigned(x)
    elif kind in ("extsi", "sitofp") and x.dtype == np.bool_:
        x = -x.astype(np.int8)  # true is -1
    elif kind == "trunci" and t.name == "i1":
        return (x & 1).astype(bool)
    elif kind in ("fptosi", "fptoui"):
        x = np.trunc(x.astype(np.float64))
    elif kind in ("extf", "truncf") and x.dtype != np.float64 and t.name in ("bf16", "f16"):
        x = x.astype(np.float32)  # f16 <-> bf16 does not occur; f32 -> 16 rounds once
    return x.astype(t.dtype)


@_sem(*(f"arith.{k}" for k in ("extsi", "extui", "trunci", "sitofp", "uitofp", "extf",
                               "truncf", "fptosi", "fptoui", "index_cast")))
def _cast(op: Op):
    head, _, to = op.text.rpartition(" to ")
    (a,), _ = _split(head)
    kind, t, r = op.name[6:], vtype(to), op.results[0]

    def step(f: Frame):
        with np.errstate(all="ignore"):
            f.values[r] = _convert(kind, f.get(a), t)
    return step


@_sem("arith.bitcast", "llvm.bitcast")
def _bitcast(op: Op):
    """The same bytes as another type (vectors too)."""
    head, _, to = op.text.rpartition(" to ")
    (a,), ty = _split(head)
    source, t, r = vtype(ty), vtype(to), op.results[0]
    if size_of(source) != size_of(t):
        raise SimulationError(f"{op.where()}: {ty} and {to} differ in size")

    def step(f: Frame):
        f.values[r] = from_bytes(as_bytes(f.get(a), source), t)
    return step


@_sem("llvm.mlir.poison", "llvm.mlir.undef")
def _poison(op: Op):
    """Any value will do: zeros."""
    t, r = vtype(op.text.rpartition(":")[2]), op.results[0]

    def step(f: Frame):
        f.values[r] = np.zeros((f.W, t.n) if t.n else f.W, t.dtype)
    return step


_ELEMENT = re.compile(rf"(?:({_NAME}), )?({_NAME})\[({_NAME}) : \w+\] : (.+)$")


@_sem("llvm.extractelement", "llvm.insertelement")
def _element(op: Op):
    """Element i of a vector (i per work-item), or the vector with it replaced."""
    value, vec, index = _ELEMENT.match(op.text.strip()).group(1, 2, 3)
    r = op.results[0]

    def step(f: Frame):
        v, i = f.get(vec), f.get(index).astype(np.int64)
        if np.any(f.mask & ((i < 0) | (i >= v.shape[1]))):
            raise KernelError(f"{op.where()}: an element index outside the vector")
        i = np.clip(i, 0, v.shape[1] - 1)
        rows = np.arange(f.W)
        if value is None:
            f.values[r] = v[rows, i]
        else:
            out = v.copy()
            out[rows, i] = f.get(value)
            f.values[r] = out
    return step


# ---- ids ---------------------------------------------------------------------------------------
_IDS = ("group_id", "group_count", "local_id", "local_size")


@_sem(*(f"xevm.{n}.{d}" for n in _IDS for d in "xyz"), "xevm.lane_id", "xevm.subgroup_id",
      "xevm.subgroup_size")
def _id(op: Op):
    key, r = op.name[5:], op.results[0]
    width = vtype(op.text.rpartition(":")[2])

    def step(f: Frame):
        f.values[r] = f.ids[key].astype(width.dtype)
    return step


@_sem("xevm.memfence", "gpu.return")
def _nothing(op: Op):
    return lambda f: None


@_sem("gpu.barrier")
def _barrier(op: Op):
    """Lockstep execution orders memory at every operation; a work-group must reach the
    barrier whole."""
    def step(f: Frame):
        wg = f.func.work_group[0] * f.func.work_group[1]
        m = f.mask.reshape(-1, wg)
        if np.any(m.any(1) & ~m.all(1)):
            raise KernelError(f"{op.where()}: a barrier reached by part of a work-group")
    return step


# ---- memory operations -------------------------------------------------------------------------
@_sem("llvm.mlir.zero")
def _zero(op: Op):
    r = op.results[0]
    return lambda f: f.values.__setitem__(r, f.full(0, np.int64))


@_sem("llvm.mlir.addressof")
def _addressof(op: Op):
    name, r = op.text.split(":")[0].strip().lstrip("@").strip('"'), op.results[0]

    def step(f: Frame):
        if name not in f.globals:
            raise SimulationError(f"{op.where()}: no work-group global @{name}")
        f.values[r] = f.globals[name]
    return step


@_sem("llvm.getelementptr")
def _gep(op: Op):
    m = re.fullmatch(r"(\S+)\[(.+)\] : \(.*\) -> [^,]+(?:<[^>]*>)?, (.+)", op.text.strip())
    base, index, elem = m.group(1), m.group(2).strip(), vtype(m.group(3))
    size, r = size_of(elem), op.results[0]

    def step(f: Frame):
        i = np.int64(int(index)) if not index.startswith("%") else f.get(index).astype(np.int64)
        f.values[r] = f.get(base) + i * size
    return step


_ORDERINGS = ("monotonic", "acquire", "release", "acq_rel", "seq_cst", "unordered")


def _strip_atomic(text: str) -> str:
    """The operands of a load or store without ``atomic <ordering> {alignment...}``."""
    text = re.sub(r"\{[^}]*\}", "", text)
    return re.sub(r"\batomic\b|\bvolatile\b|\b(" + "|".join(_ORDERINGS) + r")\b", "", text)


@_sem("llvm.load")
def _load(op: Op):
    head, _, to = _strip_atomic(op.text).rpartition("->")
    (ptr,), _ = _split(head)
    t, r = vtype(to), op.results[0]

    def step(f: Frame):
        out = np.zeros((f.W, size_of(t)), np.uint8)
        out[f.mask] = f.memory.read(f.get(ptr)[f.mask], size_of(t), op.where())
        f.values[r] = from_bytes(out, t)
    return step


@_sem("llvm.store")
def _store(op: Op):
    (value, ptr), types = _split(_strip_atomic(op.text))
    t = vtype(types.split(",")[0])

    def step(f: Frame):
        data = as_bytes(f.get(value), t)
        f.memory.write(f.get(ptr)[f.mask], data[f.mask], op.where())
    return step


_RMW = {"add": np.add, "sub": np.subtract, "xchg": lambda old, v: v, "max": np.maximum,
        "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
        "umax": lambda a, b: np.maximum(_unsigned(a), _unsigned(b)).view(a.dtype),
        "umin": lambda a, b: np.minimum(_unsigned(a), _unsigned(b)).view(a.dtype),
        "fadd": np.add, "fsub": np.subtract, "fmax": np.fmax, "fmin": np.fmin}


@_sem("llvm.atomicrmw")
def _atomicrmw(op: Op):
    """The update of each active work-item in turn (in the order of the work-items)."""
    kind, rest = op.text.split(None, 1)
    (ptr, value), types = _split(_strip_atomic(rest))
    t, fn, r = vtype(types.split(",")[1]), _RMW[kind], (op.results or [None])[0]

    def step(f: Frame):
        p, v = f.get(ptr), f.get(value)
        old = np.zeros(f.W, t.dtype)
        for w in np.flatnonzero(f.mask):
            before = from_bytes(f.memory.read(p[w:w + 1], size_of(t), op.where()), t)
            with np.errstate(all="ignore"):
                after = np.asarray(fn(_wide(before), _wide(v[w:w + 1]))).astype(t.dtype)
            f.memory.write(p[w:w + 1], as_bytes(after, t), op.where())
            old[w] = before[0]
        if r:
            f.values[r] = old
    return step


# ---- control flow ------------------------------------------------------------------------------
@_sem("scf.yield")
def _yield(op: Op):
    names, _ = _split(op.text) if op.text else ([], "")

    def step(f: Frame):
        f.yielded = [f.get(n) for n in names]
    return step


def _region(f: Frame, ops: List[Op], mask: np.ndarray) -> List[np.ndarray]:
    """Run a region for the work-items of `mask`; the values it yields."""
    outer = f.mask
    f.mask, f.yielded = mask, []
    try:
        run_ops(f, ops)
        return f.yielded
    finally:
        f.mask = outer


@_sem("scf.if")
def _if(op: Op):
    cond = op.text.split()[0]
    results = op.results

    def step(f: Frame):
        c = f.get(cond).astype(bool)
        taken = [f.mask & c, f.mask & ~c]
        outs = []
        for region, mask in zip(op.regions, taken):
            outs.append(_region(f, region, mask) if mask.any() else None)
        for k, r in enumerate(results):
            then = outs[0][k] if outs[0] is not None else None
            other = outs[1][k] if len(outs) > 1 and outs[1] is not None else None
            if then is None:
                f.values[r] = other
            elif other is None:
                f.values[r] = then
            else:
                cc = c.reshape((-1,) + (1,) * (then.ndim - 1))
                f.values[r] = np.where(cc, then, other)
    return step


_FOR = re.compile(rf"({_NAME}) = ({_NAME}) to ({_NAME}) step ({_NAME})"
                  rf"(?: iter_args\((.*)\) -> \(.*\))? : \S+ \{{$")


@_sem("scf.for")
def _for(op: Op):
    """Each work-item iterates while its variable is below its bound; the loop runs while
    any does."""
    m = _FOR.match(op.text)
    iv, lo, hi, st = m.group(1, 2, 3, 4)
    carried = [tuple(x.strip() for x in a.split("=")) for a in (m.group(5) or "").split(",")
               if a.strip()]
    body, results = op.regions[0], op.results

    def step(f: Frame):
        i, end, inc = f.get(lo), f.get(hi), f.get(st)
        values = [f.get(init) for _, init in carried]
        active = f.mask & (i < end)
        if np.any(active & (inc <= 0)):
            raise KernelError(f"{op.where()}: a step that is not positive")
        while active.any():
            f.values[iv] = i
            for (name, _), v in zip(carried, values):
                f.values[name] = v
            new = _region(f, body, active)
            values = [np.where(active.reshape((-1,) + (1,) * (v.ndim - 1)), n, v)
                      for n, v in zip(new, values)]
            i = np.where(active, i + inc, i)
            active = active & (i < end)
        for r, v in zip(results, values):
            f.values[r] = v
    return step


# ---- subgroup operations -----------------------------------------------------------------------
def _uniform(f: Frame, x: np.ndarray, what: str, op: Op) -> np.ndarray:
    """The value of each subgroup (x is the same on its lanes)."""
    g = f.subgroups(x)
    if np.any(g != g[:, :1]):
        raise KernelError(f"{op.where()}: {what} differs between the lanes of a subgroup")
    return g[:, 0]


def _whole_subgroups(f: Frame, op: Op) -> np.ndarray:
    """Which subgroups run a subgroup operation (they must be whole)."""
    m = f.subgroups(f.mask)
    if np.any(m.any(1) & ~m.all(1)):
        raise KernelError(f"{op.where()}: reached by part of a subgroup")
    return m[:, 0]


@_sem("gpu.shuffle")
def _shuffle(op: Op):
    """The gpu dialect's shuffle, defined only when the first ``width`` lanes of the
    subgroup are all active: a subgroup reaching it with some of them inactive is a
    KernelError (in divergent code it would read undefined values)."""
    mode, rest = op.text.split(None, 1)
    (x, lane, width), _ = _split(rest)
    r, valid = op.results

    def step(f: Frame):
        me = f.ids["lane_id"].astype(np.int64)
        arg = f.get(lane).astype(np.int64)
        src = {"idx": arg, "xor": me ^ arg, "down": me + arg, "up": me - arg}[mode]
        w = f.get(width).astype(np.int64)
        base = np.arange(f.W) - me
        idle = f.subgroups(f.mask).any(1)[:, None] & f.subgroups(~f.mask & (me < w))
        if idle.any():
            g, l = (int(i[0]) for i in np.nonzero(idle))
            raise KernelError(f"{op.where()}: lane {l} of subgroup {g} is not active, so the "
                              "shuffle is undefined (the first width lanes must be)")
        ok = (src >= 0) & (src < w)
        f.values[r] = f.get(x)[base + np.where(ok, src, me)]
        f.values[valid] = ok
    return step


# ---- OpenCL subgroup builtins ------------------------------------------------------------------
#: Itanium mangling of OpenCL's scalar types: code -> (MLIR type, unsigned)
_OPENCL_TYPES = {"c": ("i8", False), "a": ("i8", False), "h": ("i8", True),
                 "s": ("i16", False), "t": ("i16", True), "i": ("i32", False),
                 "j": ("i32", True), "l": ("i64", False), "m": ("i64", True),
                 "Dh": ("f16", False), "f": ("f32", False), "d": ("f64", False)}


def demangle(symbol: str, where: str) -> Tuple[str, List[Tuple[str, bool]]]:
    """``_Z<length><name><parameter codes>`` -> (name, [(MLIR type, unsigned)])."""
    m = re.fullmatch(r"_Z(\d+)(\w+)", symbol)
    if not m or len(m.group(2)) <= int(m.group(1)):
        raise SimulationError(f"{where}: {symbol} is not a mangled OpenCL builtin")
    name, codes = m.group(2)[:int(m.group(1))], m.group(2)[int(m.group(1)):]
    params = []
    for code in re.findall(r"Dh|.", codes):
        if code not in _OPENCL_TYPES:
            raise SimulationError(f"{where}: {symbol}: unknown parameter code {code!r}")
        params.append(_OPENCL_TYPES[code])
    return name, params


def builtin(symbol: str, types: Sequence[str], result: str, where: str):
    """The step function of OpenCL builtin `symbol` called with MLIR argument types
    `types`; SimulationError for a builtin not simulated or types its mangling denies."""
    name, params = demangle(symbol, where)
    if [t for t, _ in params] != list(types):
        raise SimulationError(f"{where}: {symbol} takes ({', '.join(t for t, _ in params)}), "
                              f"not ({', '.join(types)})")
    m = re.fullmatch(r"sub_group_non_uniform_(reduce|scan_inclusive|scan_exclusive)_(add|max|"
                     r"min)", name)
    if m and len(params) == 1 and result == types[0]:
        return _non_uniform(m.group(1), m.group(2), params[0][1])
    if name == "sub_group_shuffle" and len(params) == 2 and params[1] == ("i32", True) \
            and result == types[0]:
        return _sub_group_shuffle
    raise SimulationError(f"{where}: builtin {name}({', '.join(types)}) -> {result} is not "
                          "simulated")


def _non_uniform(kind: str, op: str, unsigned: bool):
    """``cl_khr_subgroup_non_uniform_arithmetic``: the operation over the values of the
    active lanes of each subgroup, in lane order; an exclusive scan gives the first active
    lane the identity (0, the type's lowest or highest value, -inf or +inf)."""
    def fn(f: Frame, where: str, x: np.ndarray) -> np.ndarray:
        dt = x.dtype
        v = _unsigned(x) if unsigned else x
        if op == "add":
            ident, ufunc = 0, np.add
        elif v.dtype.kind == "f":
            ident, ufunc = (-np.inf, np.fmax) if op == "max" else (np.inf, np.fmin)
        else:
            info = np.iinfo(v.dtype)
            ident, ufunc = (info.min, np.maximum) if op == "max" else (info.max, np.minimum)
        vals = np.where(f.subgroups(f.mask), f.subgroups(v), np.array(ident, v.dtype))
        with np.errstate(all="ignore"):
            acc = ufunc.accumulate(vals, axis=1, dtype=v.dtype)
        if kind == "reduce":
            out = np.repeat(acc[:, -1:], f.S, axis=1)
        elif kind == "scan_inclusive":
            out = acc
        else:
            out = np.concatenate([np.full((len(acc), 1), ident, v.dtype), acc[:, :-1]], 1)
        return out.reshape(-1).view(dt)
    return fn


def _sub_group_shuffle(f: Frame, where: str, x: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``cl_khr_subgroup_shuffle``: the value of lane `index`; undefined (a KernelError)
    when that lane is not an active lane of the subgroup."""
    me = f.ids["lane_id"].astype(np.int64)
    src = index.astype(np.int64) & 0xFFFFFFFF
    base = np.arange(f.W) - me
    inside = src < f.S
    source = base + np.where(inside, src, 0)
    bad = f.mask & ~(inside & f.mask[source])
    if bad.any():
        w = int(np.flatnonzero(bad)[0])
        raise KernelError(f"{where}: lane {int(me[w])} reads lane {int(src[w])}, which is not "
                          "an active lane of its subgroup: the result is undefined")
    return x[source]


_CALL = re.compile(rf"spir_funccc @(\w+)\(([^)]*)\) \{{[^}}]*\}} : \(([^)]*)\) -> (\S+)$")


@_sem("llvm.call")
def _call(op: Op):
    m = _CALL.match(op.text.strip())
    if not m:
        raise SimulationError(f"{op.where()}: only calls of OpenCL builtins are simulated")
    symbol, args, types, result = m.groups()
    args = [a.strip() for a in args.split(",") if a.strip()]
    fn = builtin(symbol, [t.strip() for t in types.split(",") if t.strip()], result,
                 op.where())
    r, where = op.results[0], op.where()

    def step(f: Frame):
        f.values[r] = fn(f, where, *(f.get(a) for a in args))
    return step


# ---- 2-D blocks and DPAS -----------------------------------------------------------------------
def _attrs(text: str) -> Dict[str, str]:
    m = re.search(r"<\{(.*)\}>", text) or re.search(r"\{(.*)\}", text)
    out = {}
    for part in re.split(r",\s*(?![^<]*>)", m.group(1) if m else ""):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.split(":")[0].strip()
    return out


def _flag(value: str) -> bool:
    return value in ("true", "1")


@dataclass
class Block2D:
    """The attributes of a 2-D block operation."""

    bits: int
    width: int
    height: int
    v_blocks: int = 1
    transpose: bool = False
    pack: bool = False

    @classmethod
    def of(cls, op: Op) -> "Block2D":
        a = _attrs(op.text)
        b = cls(int(a["elem_size_in_bits"]), int(a["tile_width"]), int(a["tile_height"]),
                int(a.get("v_blocks", 1)), _flag(a.get("transpose", "false")),
                _flag(a.get("pack_register", "false")))
        if b.bits not in (8, 16, 32, 64) or b.transpose and b.pack:
            raise SimulationError(f"{op.where()}: elem_size_in_bits {b.bits}, transpose "
                                  f"{b.transpose}, pack_register {b.pack} are not allowed")
        if b.pack and (b.bits >= 32 or b.height % (32 // b.bits)):
            raise SimulationError(f"{op.where()}: pack_register needs elements under 32 bits "
                                  f"and a height that is a multiple of {32 // max(b.bits, 1)}")
        return b

    def addresses(self, ptr, base_width, base_height, pitch, x, y):
        """Addresses (v_blocks, height, width) of the block and which lie in the matrix."""
        e = self.bits // 8
        rows = y + np.arange(self.height)[None, :, None]
        cols = x + (np.arange(self.v_blocks)[:, None, None] * self.width
                    + np.arange(self.width)[None, None, :])
        inside = (rows >= 0) & (rows < base_height) & (cols >= 0) & ((cols + 1) * e <= base_width)
        return ptr + rows * pitch + cols * e, np.broadcast_to(inside, (self.v_blocks, self.height,
                                                                        self.width))

    def arrange(self, data: np.ndarray) -> np.ndarray:
        """The bytes (v, h, w, e) of the blocks in register order."""
        v, h, w, e = data.shape
        if self.transpose:
            data = data.transpose(0, 2, 1, 3)
        elif self.pack:
            f = 4 // e
            data = data.reshape(v, h // f, f, w, e).transpose(0, 1, 3, 2, 4)
        return data.reshape(-1)


def deal(data: np.ndarray, t: VType, S: int, what: str) -> np.ndarray:
    """Register bytes to lanes: unit i * S + l of type t is element i of lane l -> (S, n)."""
    n = t.n or 1
    if data.size != S * n * t.dtype.itemsize:
        raise SimulationError(f"{what}: the block has {data.size} bytes, {S} lanes of {t.n or 1}"
                              f" x {t.name} hold {S * n * t.dtype.itemsize}")
    return np.ascontiguousarray(data).view(t.dtype).reshape(n, S).T


def gather(lanes: np.ndarray, t: VType) -> np.ndarray:
    """The inverse of ``deal``: the register bytes of a subgroup's values (S, n)."""
    x = np.ascontiguousarray(lanes.astype(t.dtype, copy=False).reshape(lanes.shape[0], -1).T)
    return x.view(np.uint8).reshape(-1)


def _block_operands(op: Op):
    """The operand names and the type after ``:`` of a 2-D block operation."""
    return _split(re.sub(r"<\{.*\}>", "", op.text))


def _geometry(f: Frame, op: Op, names: Sequence[str], live: np.ndarray):
    """Per running subgroup: (index, ptr, base width, height, pitch, x, y)."""
    ptr, bw, bh, pitch, x, y = (_uniform(f, f.get(n).astype(np.int64), f"operand {n}", op)
                                for n in names[:6])
    for s in np.flatnonzero(live):
        if bw[s] <= 0 or bh[s] <= 0 or pitch[s] < bw[s]:
            raise KernelError(f"{op.where()}: base width {bw[s]}, height {bh[s]} and pitch "
                              f"{pitch[s]} do not describe a matrix")
        yield s, ptr[s], bw[s], bh[s], pitch[s], x[s], y[s]


@_sem("xevm.blockload2d")
def _blockload2d(op: Op):
    names, types = _block_operands(op)
    block, t, r = Block2D.of(op), vtype(types.rpartition("->")[2]), op.results[0]
    e = block.bits // 8

    def step(f: Frame):
        live = _whole_subgroups(f, op)
        out = np.zeros((f.W // f.S, f.S, t.n or 1), t.dtype)
        for s, ptr, bw, bh, pitch, x, y in _geometry(f, op, names, live):
            address, inside = block.addresses(ptr, bw, bh, pitch, x, y)
            data = np.zeros(address.shape + (e,), np.uint8)
            data[inside] = f.memory.read(address[inside], e, op.where())
            out[s] = deal(block.arrange(data), t, f.S, op.where())
        f.values[r] = out.reshape(f.W, -1) if t.n else out.reshape(f.W)
    return step


@_sem("xevm.blockstore2d")
def _blockstore2d(op: Op):
    names, types = _block_operands(op)
    block = Block2D.of(op)
    t = vtype(types.strip("() ").split(",")[-1])
    if block.v_blocks != 1 or block.transpose or block.pack:
        raise SimulationError(f"{op.where()}: a block store has one block, untransformed")
    e = block.bits // 8

    def step(f: Frame):
        live = _whole_subgroups(f, op)
        values = f.subgroups(f.get(names[6]))
        for s, ptr, bw, bh, pitch, x, y in _geometry(f, op, names, live):
            address, inside = block.addresses(ptr, bw, bh, pitch, x, y)
            data = gather(values[s], t)
            if data.size != address.size * e:
                raise SimulationError(f"{op.where()}: the block has {address.size * e} bytes, "
                                      f"the lanes hold {data.size}")
            data = data.reshape(address.shape + (e,))
            f.memory.write(address[inside], data[inside], op.where())
    return step


@_sem("xevm.blockload", "xevm.blockstore")
def _block1d(op: Op):
    """Subgroup block load and store: element i of lane l is at ptr[l + i S] (elements of
    the vector's type); ptr is the same on every lane."""
    names, types = _split(re.sub(r"<\{.*\}>", "", op.text))
    load = op.name == "xevm.blockload"
    t = vtype(types.rpartition("->")[2] if load else types.strip("() ").split(",")[-1])
    e, n = t.dtype.itemsize, t.n or 1

    def step(f: Frame):
        live = _whole_subgroups(f, op)
        ptr = _uniform(f, f.get(names[0]).astype(np.int64), f"operand {names[0]}", op)
        lanes = f.subgroups(f.get(names[1]) if not load else np.zeros((f.W, n), t.dtype))
        out = np.zeros((f.W // f.S, f.S, n), t.dtype)
        for s in np.flatnonzero(live):
            address = ptr[s] + e * (np.arange(f.S)[:, None] + f.S * np.arange(n)[None, :])
            if load:
                data = f.memory.read(address.reshape(-1), e, op.where())
                out[s] = data.view(t.dtype).reshape(f.S, n)
            else:
                values = np.ascontiguousarray(lanes[s].reshape(f.S, n).astype(t.dtype))
                f.memory.write(address.reshape(-1), values.view(np.uint8).reshape(-1, e),
                               op.where())
        if load:
            f.values[op.results[0]] = out.reshape(f.W, -1) if t.n else out.reshape(f.W)
    return step


@_sem("xevm.blockprefetch2d")
def _blockprefetch2d(op: Op):
    """A prefetch changes nothing; its operands are checked as for a load."""
    names, _ = _block_operands(op)
    Block2D.of(op)

    def step(f: Frame):
        for _ in _geometry(f, op, names, _whole_subgroups(f, op)):
            pass
    return step


#: xevm.mma element types: (NumPy dtype, integer)
_MMA_TYPES = {"f32": (DTYPE["f32"], False), "f16": (DTYPE["f16"], False),
              "bf16": (DTYPE["bf16"], False), "s8": (np.dtype(np.int8), True),
              "u8": (np.dtype(np.uint8), True), "s32": (np.dtype(np.int32), True),
              "i32": (np.dtype(np.int32), True), "i8": (np.dtype(np.int8), True)}


@_sem("xevm.mma")
def _mma(op: Op):
    names, types = _split(re.sub(r"\{[^}]*\}", "", op.text))
    shape = dict(re.findall(r"(\w)=(\d+)", re.search(r"shape\s*=\s*<([^>]*)>", op.text).group(1)))
    kinds = dict(re.findall(r"(\w)=(\w+)", re.search(r"types\s*=\s*<([^>]*)>", op.text).group(1)))
    M, N, K = int(shape["m"]), int(shape["n"]), int(shape["k"])
    operand_types = [vtype(x) for x in types.split("->")[0].strip("() ").split(",")]
    t = vtype(types.split("->")[1])
    for role in ("a", "b", "d") + (("c",) if len(names) > 2 else ()):
        if kinds.get(role) not in _MMA_TYPES:
            raise SimulationError(f"{op.where()}: {role}={kinds.get(role)} is not simulated")
    ad, bd, dd = (_MMA_TYPES[kinds[x]][0] for x in "abd")
    integer = _MMA_TYPES[kinds["d"]][1]
    f_b = max(1, 4 // bd.itemsize)
    r = op.results[0]

    def matrix(lanes, vt, dt, rows, cols):
        data = gather(lanes, vt)
        if data.size != rows * cols * dt.itemsize:
            raise SimulationError(f"{op.where()}: {rows}x{cols} {dt} needs "
                                  f"{rows * cols * dt.itemsize} bytes, the lanes hold {data.size}")
        return data.view(dt).reshape(rows, cols)

    def step(f: Frame):
        live = _whole_subgroups(f, op)
        ops = [f.subgroups(f.get(n)) for n in names]
        out = np.zeros((f.W // f.S, f.S, t.n or 1), t.dtype)
        wide = np.int64 if integer else np.float64
        for s in np.flatnonzero(live):
            A = matrix(ops[0][s], operand_types[0], ad, M, K).astype(wide)
            Bp = matrix(ops[1][s], operand_types[1], bd, K // f_b, N * f_b)
            B = Bp.reshape(K // f_b, N, f_b).transpose(0, 2, 1).reshape(K, N).astype(wide)
            C = (matrix(ops[2][s], operand_types[2], _MMA_TYPES[kinds["c"]][0], M, N).astype(wide)
                 if len(names) > 2 else np.zeros((M, N), wide))
            D = C + A @ B
            if integer:
                D = (D + 2 ** 31) % 2 ** 32 - 2 ** 31
            data = np.ascontiguousarray(D.astype(dd)).view(np.uint8).reshape(-1)
            out[s] = deal(data, t, f.S, op.where())
        f.values[r] = out.reshape(f.W, -1) if t.n else out.reshape(f.W)
    return step


# ---- launches ----------------------------------------------------------------------------------
def run(module: SimModule, name: str, params: Sequence, grid: Sequence[int],
        memory: Memory) -> None:
    """Run kernel `name` on every work-group of `grid` with the kernel arguments `params`
    (numbers; pointers are addresses in `memory`)."""
    func = module.functions.get(name)
    if func is None:
        raise KeyError(f"no kernel @{name} in the module (kernels: "
                       f"{', '.join('@' + k for k in module.functions)})")
    if len(params) != len(func.params):
        raise TypeError(f"kernel @{name} takes {len(func.params)} arguments, got {len(params)}")
    grid = check_grid(grid, get_target("pvc").max_grid)
    per_group = func.work_group[0] * func.work_group[1]
    total = grid[0] * grid[1] * grid[2]
    step = max(1, BATCH // per_group)
    for first in range(0, total, step):
        groups = np.arange(first, min(first + step, total))
        f = Frame(memory, func, groups, grid, module.globals)
        for (pname, t), value in zip(func.params, params):
            if t.n:  # a vector (complex numbers: their real and imaginary parts)
                parts = np.asarray(value).reshape(-1)
                if parts.dtype.kind == "c":
                    parts = np.stack([parts.real, parts.imag], -1).reshape(-1)
                f.values[pname] = np.tile(parts.astype(t.dtype), (f.W, 1))
            else:
                f.values[pname] = f.full(value, t.dtype)
        run_ops(f, func.body)


def simulate(mlir: str, name: str, args: Sequence, grid: Sequence[int] = (1, 1, 1)) -> None:
    """Run a kernel of a module written by hand: a NumPy array is passed as the address of
    its first element (and written in place), anything else as a number."""
    memory = Memory()
    params = [memory.add(np.asarray(a)) if isinstance(a, np.ndarray) else a for a in args]
    run(parse(mlir), name, params, grid, memory)


# ---- ttlc programs -----------------------------------------------------------------------------
@dataclass
class _Places:
    """Where the kernel arguments point (``simt.pointer_arguments``): host addresses,
    the group tables made addressable in the simulator's memory."""

    memory: Buffers
    sim: Memory
    null = 0

    def address(self, m) -> Optional[int]:
        return memref_address(m, self.memory) if int(m.buffer) >= 0 else None

    @staticmethod
    def pointer(address: int) -> int:
        return address

    def table(self, table: np.ndarray, relocate) -> int:
        return self.sim.add(table)


def kernel_arguments(t, v, places: _Places) -> list:
    """The kernel arguments of one marshalled parameter (docs/xevm.md, *Kernel ABI*)."""
    if isinstance(t, (MemrefType, GroupType)):
        return pointer_arguments(t, v, places)
    if isinstance(t, BoolType):
        return [np.int8(bool(v))]
    return [v]


class SimulatedModule(Module):
    """A program's xevm module, whose kernels run on the simulator: ``module[name](*args,
    grid=...)`` as for a module of ``ttlc.compile`` (the same argument checks)."""

    target = "xevm (simulated)"

    def __init__(self, program, machine):
        from ..backends.xevm.codegen import emit

        super().__init__(program, False, machine.max_grid)
        #: the emitted module's text, and as the simulator read it
        self.mlir = emit(program, "mlir", machine, False)
        self.sim = parse(self.mlir)

    def launch(self, kernel, args, grid) -> None:
        buffers = Buffers()
        values = marshal(args, kernel.func.args, buffers, kernel.name)
        sim = Memory()
        for b in buffers.buffers:
            if b is not None and b.nbytes:
                sim.add(b)
        places = _Places(buffers, sim)
        params = [p for a, v in zip(kernel.func.args, values)
                  for p in kernel_arguments(a.value.type, v, places)]
        run(self.sim, kernel.name, params, grid, sim)


def compile(text_or_program, filename: str = "<input>"):
    """A checked program's xevm module on the simulator (CompileError where target xevm
    does not translate the program)."""
    from .. import api
    from ..backends import get_backend

    return SimulatedModule(api.check(text_or_program, filename), get_backend("xevm").target())
