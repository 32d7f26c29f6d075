"""A NumPy interpreter of the Tile IR that target cuda-tile emits, written from NVIDIA's
specification of each operation (the CUDA Tile IR documentation; for ``alloca``,
``atomic_rmw_tko`` and ``iota`` the descriptions in NVIDIA's ``Ops.td``), to check the
meaning of emitted modules without a GPU: tests run a module here and the program on the reference interpreter,
and compare what they write.

Every operation of ``ops.OPS`` has a function in ``SEMANTICS``.  Tiles are NumPy arrays
of their element type; a pointer is its byte address (an int64), and memory is the
arrays given as arguments, read and written where they lie (``Memory`` refuses an
address outside them).  Tile blocks run one after another; tokens order nothing here,
as every operation completes before the next.  ``run`` checks the kernel's arguments as
every target does (``runtime.args.marshal``) and passes them as target cuda does
(``abi.parameters``, the entry ABI of ``docs/cuda-tile.md``).
"""
from __future__ import annotations

import ctypes
import itertools
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...runtime import check_grid
from ...runtime.args import marshal, memref_address
from ...runtime.values import Memory as Buffers
from ...target import get_target
from . import checks
from .abi import dtype, parameters
from .tir import Block, Entry, Op

#: NumPy 2 moved it
_byte_bounds = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds


class Memory:
    """The arrays a kernel may touch, by the byte ranges they occupy."""

    def __init__(self):
        #: (first byte, end, the bytes, the array they belong to: kept alive with them)
        self.windows: List[Tuple[int, int, np.ndarray, np.ndarray]] = []

    def add(self, array: np.ndarray) -> int:
        """Register an array; the address of its first element."""
        lo, hi = _byte_bounds(array)
        window = np.ctypeslib.as_array((ctypes.c_uint8 * (hi - lo)).from_address(lo))
        self.windows.append((lo, hi, window, array))
        return lo

    def _typed(self, addresses: np.ndarray, dt: np.dtype):
        """Per array the addresses fall in: its elements as `dt`, which of the addresses
        lie in it and their element indices (a gather may span several arrays)."""
        addresses = np.asarray(addresses, np.int64).reshape(-1)
        placed = np.zeros(addresses.shape, bool)
        for lo, hi, window, _ in self.windows:
            here = ~placed & (addresses >= lo) & (addresses + dt.itemsize <= hi)
            if here.any():
                offsets = addresses[here] - lo
                if np.any(offsets % dt.itemsize):
                    raise ValueError("misaligned access")
                usable = (hi - lo) // dt.itemsize * dt.itemsize
                placed |= here
                yield window[:usable].view(dt), here, offsets // dt.itemsize
        if not placed.all():
            raise ValueError("access outside the arguments")

    def read(self, addresses: np.ndarray, dt: np.dtype) -> np.ndarray:
        out = np.zeros(np.shape(addresses), dt)
        flat = out.reshape(-1)
        for typed, here, index in self._typed(addresses, dt):
            flat[here] = typed[index]
        return out

    def write(self, addresses: np.ndarray, values: np.ndarray) -> None:
        values = np.asarray(values).reshape(-1)
        for typed, here, index in self._typed(addresses, values.dtype):
            typed[index] = values[here]


class Frame:
    def __init__(self, memory: Memory, block_id: Tuple[int, int, int], grid: Tuple[int, int, int]):
        self.memory, self.block_id, self.grid = memory, block_id, grid
        self.values: Dict[object, object] = {}


SEMANTICS: Dict[str, Callable[[Frame, Op, list], list]] = {}


def _sem(*names):
    def add(fn):
        for n in names:
            SEMANTICS[n] = fn
        return fn
    return add


def _out(op: Op, x) -> np.ndarray:
    return np.asarray(x).astype(dtype(op.results[0].type), copy=False)


_FLOAT = {"addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide,
          "remf": np.fmod, "andi": np.bitwise_and, "ori": np.bitwise_or, "xori": np.bitwise_xor,
          "addi": np.add, "subi": np.subtract, "muli": np.multiply}


@_sem(*_FLOAT)
def _binary(f, op, a):
    with np.errstate(all="ignore"):
        return [_out(op, _FLOAT[op.spec.name](a[0], a[1]))]


@_sem("maxf", "minf")
def _minmax_f(f, op, a):
    nan = op.present("propagate_nan")
    fn = {("maxf", True): np.maximum, ("maxf", False): np.fmax, ("minf", True): np.minimum,
          ("minf", False): np.fmin}[op.spec.name, nan]
    return [_out(op, fn(a[0], a[1]))]


def _signed(op: Op, x: np.ndarray) -> np.ndarray:
    """`x` read with the operation's signedness."""
    if op.attrs.get("signedness") == "unsigned" and x.dtype.kind == "i":
        return x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return x


@_sem("maxi", "mini")
def _minmax_i(f, op, a):
    x, y = _signed(op, a[0]), _signed(op, a[1])
    return [_out(op, (np.maximum if op.spec.name == "maxi" else np.minimum)(x, y))]


def _truncating_division(n: int, d: int) -> int:
    """C's quotient (rounding toward zero, the default of ``divi``); 0 for d = 0, which
    the specification leaves undefined."""
    return 0 if d == 0 else abs(n) // abs(d) * (1 if (n < 0) == (d < 0) else -1)


@_sem("divi", "remi")
def _divrem(f, op, a):
    x, y = np.broadcast_arrays(_signed(op, a[0]).astype(object), _signed(op, a[1]).astype(object))
    q = np.frompyfunc(_truncating_division, 2, 1)(x, y)
    r = q if op.spec.name == "divi" else x - q * y
    bits = a[0].dtype.itemsize * 8
    wrapped = np.frompyfunc(lambda v: (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1)), 1, 1)
    return [_out(op, np.asarray(wrapped(r), object).astype(a[0].dtype))]


@_sem("shli", "shri")
def _shift(f, op, a):
    fn = np.left_shift if op.spec.name == "shli" else np.right_shift
    return [_out(op, fn(_signed(op, a[0]), a[1].astype(_signed(op, a[0]).dtype)))]


_UNARY = {"sqrt": np.sqrt, "absf": np.abs, "absi": np.abs, "negf": np.negative, "negi": np.negative, "exp": np.exp,
          "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos}


@_sem(*_UNARY)
def _unary(f, op, a):
    with np.errstate(all="ignore"):
        return [_out(op, _UNARY[op.spec.name](a[0]))]


@_sem("fma")
def _fma(f, op, a):
    return [_out(op, a[0] * a[1] + a[2])]


_COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less_than": np.less,
            "less_than_or_equal": np.less_equal, "greater_than": np.greater,
            "greater_than_or_equal": np.greater_equal}


@_sem("cmpf", "cmpi")
def _compare(f, op, a):
    x, y = _signed(op, a[0]), _signed(op, a[1])
    r = _COMPARE[op.attrs["comparison_predicate"]](x, y)
    if op.spec.name == "cmpf":
        nan = np.isnan(x.astype(np.float64)) | np.isnan(y.astype(np.float64))
        r = (r | nan) if op.attrs["comparison_ordering"] == "unordered" else (r & ~nan)
    return [np.asarray(r)]


@_sem("select")
def _select(f, op, a):
    return [_out(op, np.where(a[0], a[1], a[2]))]


@_sem("ftof", "itof", "exti", "trunci", "ftoi")
def _convert(f, op, a):
    src = _signed(op, a[0])
    if op.spec.name == "ftoi":
        src = np.trunc(src.astype(np.float64))
    with np.errstate(all="ignore"):
        return [_out(op, src.astype(dtype(op.results[0].type)))]


@_sem("constant")
def _constant(f, op, a):
    return [np.full(op.results[0].type.shape, op.attrs["value"][1], dtype(op.results[0].type))]


@_sem("broadcast")
def _broadcast(f, op, a):
    return [np.broadcast_to(a[0], op.results[0].type.shape).copy()]


@_sem("reshape")
def _reshape(f, op, a):
    return [a[0].reshape(op.results[0].type.shape)]


@_sem("extract")
def _extract(f, op, a):
    """Slice number `indices` of the shape of the result."""
    shape = op.results[0].type.shape
    return [a[0][tuple(slice(int(i) * n, (int(i) + 1) * n) for i, n in zip(a[1:], shape))].copy()]


@_sem("permute")
def _permute(f, op, a):
    return [np.transpose(a[0], op.attrs["permutation"]).copy()]


@_sem("reduce")
def _reduce(f, op, a):
    dim, block = op.attrs["dim"], op.regions[0]
    results = []
    for x, (_, identity) in zip(a, op.attrs["identities"]):
        acc = np.full(x.shape[:dim] + x.shape[dim + 1:], identity, x.dtype)
        for i in range(x.shape[dim]):  # vectorised over the other modes
            acc = _block(f, block, [np.take(x, i, axis=dim), acc])[0]
        results.append(acc)
    return results


@_sem("scan")
def _scan(f, op, a):
    dim, block = op.attrs["dim"], op.regions[0]
    results = []
    for x, (_, identity) in zip(a, op.attrs["identities"]):
        order = range(x.shape[dim] - 1, -1, -1) if op.attrs["reverse"] else range(x.shape[dim])
        acc = np.full(x.shape[:dim] + x.shape[dim + 1:], identity, x.dtype)
        out = np.empty_like(x)
        for i in order:  # inclusive: element i combined with the accumulator before it
            acc = _block(f, block, [np.take(x, i, axis=dim), acc])[0]
            np.moveaxis(out, dim, 0)[i] = acc
        results.append(out)
    return results


@_sem("get_tile_block_id", "get_num_tile_blocks")
def _grid(f, op, a):
    xyz = f.block_id if op.spec.name == "get_tile_block_id" else f.grid
    return [np.asarray(v, np.int32) for v in xyz]


@_sem("make_token")
def _token(f, op, a):
    return [None]


@_sem("offset")
def _offset(f, op, a):
    size = dtype(op.results[0].type.element.pointee).itemsize
    return [np.asarray(a[0] + a[1].astype(np.int64) * size, np.int64)]


@_sem("int_to_ptr", "ptr_to_int")
def _int_to_ptr(f, op, a):
    return [np.asarray(a[0], np.int64)]


@_sem("alloca")
def _alloca(f, op, a):
    size = op.attrs["num_elem"] * dtype(op.results[0].type.element.pointee).itemsize
    memory = np.zeros(size + op.attrs["alignment"], np.uint8)
    address = f.memory.add(memory)
    return [np.asarray(address + (-address % op.attrs["alignment"]), np.int64)]


@_sem("make_tensor_view")
def _tensor_view(f, op, a):
    t = op.results[0].type
    dyn = iter(int(v) for v in a[1:])  # the dynamic sizes, then the dynamic strides
    shape = [d if d is not None else next(dyn) for d in t.shape]
    strides = [s if s is not None else next(dyn) for s in t.strides]
    return [(int(a[0]), shape, strides, dtype(t.element))]


@_sem("make_partition_view")
def _partition_view(f, op, a):
    return [(a[0], op.results[0].type.tile, op.results[0].type.padding)]


def _tile_addresses(view, index):
    """The addresses of a partition view's tile `index`, and which lie inside the view."""
    (base, shape, strides, dt), tile, _ = view
    grids = np.meshgrid(*[np.arange(t) + int(i) * t for t, i in zip(tile, index)], indexing="ij")
    inside = np.ones(tuple(tile), bool)
    address = np.full(tuple(tile), base, np.int64)
    for g, n, s in zip(grids, shape, strides):
        inside &= (g >= 0) & (g < n)
        address += g * s * dt.itemsize
    return address, inside, dt


@_sem("load_view_tko")
def _load_view(f, op, a):
    view = a[0]
    address, inside, dt = _tile_addresses(view, a[1:1 + len(op.group("index"))])
    out = np.zeros(address.shape, dt)  # padding_value zero (the only one emitted)
    out[inside] = f.memory.read(address[inside], dt)
    return [out, None]


@_sem("store_view_tko")
def _store_view(f, op, a):
    tile, view = a[0], a[1]
    address, inside, dt = _tile_addresses(view, a[2:2 + len(op.group("index"))])
    f.memory.write(address[inside], tile.astype(dt)[inside])
    return [None]


def _mask(op: Op, a: list, pointers: np.ndarray) -> np.ndarray:
    """The elements a gather or scatter touches: its mask operand, else all."""
    if not op.group("mask"):
        return np.ones(pointers.shape, bool)
    return np.asarray(a[[g.name for g in op.spec.operands].index("mask")])  # after fixed ones


@_sem("load_ptr_tko")
def _load_ptr(f, op, a):
    """Masked-off elements are the padding value, or (undefined) zero."""
    pointers, dt = np.asarray(a[0]), dtype(op.results[0].type)
    mask = _mask(op, a, pointers)
    out = np.zeros(pointers.shape, dt)
    if op.group("paddingValue"):
        out[...] = a[1 + bool(op.group("mask"))]
    out[mask] = f.memory.read(pointers[mask], dt)
    return [out, None]


@_sem("store_ptr_tko")
def _store_ptr(f, op, a):
    pointers, values = np.asarray(a[0]), np.asarray(a[1])
    mask = _mask(op, a, pointers)
    f.memory.write(pointers[mask], np.broadcast_to(values, pointers.shape)[mask])
    return [None]


_RMW = {"add": np.add, "addf": np.add, "max": np.maximum, "min": np.minimum,
        "umax": np.maximum, "umin": np.minimum, "xchg": lambda x, y: y}


@_sem("atomic_rmw_tko")
def _atomic_rmw(f, op, a):
    """Element by element in row-major order, one at a time (elements may share an
    address; where none do, all at once); ``umax``/``umin`` compare the bits as unsigned
    integers."""
    pointers, arg = np.asarray(a[0]), np.asarray(a[1])
    mask = np.asarray(a[2]) if op.group("mask") else np.ones(pointers.shape, bool)
    mode = op.attrs["mode"]
    unsigned = np.dtype(f"u{arg.dtype.itemsize}") if mode in ("umax", "umin") else arg.dtype
    old = np.zeros(arg.shape, arg.dtype)
    targets = pointers[mask] if arg.ndim else None
    if arg.ndim and len(np.unique(targets)) == len(targets):  # no element shared: all at once
        prev = f.memory.read(targets, arg.dtype)
        new = _RMW[mode](prev.view(unsigned), arg[mask].view(unsigned)).view(arg.dtype)
        f.memory.write(targets, new.astype(arg.dtype))
        old[mask] = prev
        return [old, None]
    for k in zip(*np.nonzero(mask)) if arg.ndim else [()]:
        if arg.ndim == 0 and not mask:
            break
        prev = f.memory.read(np.asarray([pointers[k]]), arg.dtype)
        new = _RMW[mode](prev.view(unsigned), np.asarray([arg[k]]).view(unsigned)).view(arg.dtype)
        f.memory.write(np.asarray([pointers[k]]), new.astype(arg.dtype))
        old[k] = prev[0]
    return [old, None]


@_sem("atomic_cas_tko")
def _atomic_cas(f, op, a):
    """Element by element in row-major order; a masked-off element returns ``cmp``."""
    pointers, cmp, val = (np.asarray(x) for x in a[:3])
    mask = np.asarray(a[3]) if op.group("mask") else np.ones(pointers.shape, bool)
    old = np.array(cmp, copy=True)
    for k in zip(*np.nonzero(np.atleast_1d(mask))):
        k = k if pointers.ndim else ()
        prev = f.memory.read(np.asarray([pointers[k]]), cmp.dtype)[0]
        if prev == cmp[k]:
            f.memory.write(np.asarray([pointers[k]]), np.asarray([val[k]], cmp.dtype))
        old[k] = prev
    return [old, None]


@_sem("bitcast")
def _bitcast(f, op, a):
    return [np.asarray(a[0]).view(dtype(op.results[0].type)).copy()]


@_sem("ptr_to_ptr")
def _ptr_to_ptr(f, op, a):
    return [np.asarray(a[0], np.int64)]


@_sem("iota")
def _iota(f, op, a):
    return [np.arange(op.results[0].type.shape[0]).astype(dtype(op.results[0].type))]


@_sem("mmaf", "mmai")
def _mma(f, op, a):
    """mmai: signed i8 operands, sums wrapping around in i32."""
    acc = dtype(op.results[0].type)
    wide = np.int64 if op.spec.name == "mmai" else acc
    with np.errstate(all="ignore"):
        return [_out(op, np.matmul(a[0].astype(wide), a[1].astype(wide)) + a[2])]


@_sem("for")
def _for(f, op, a):
    lower, upper, step = (int(v) for v in a[:3])
    carried = a[3:]
    for i in range(lower, upper, step):
        carried = _block(f, op.regions[0], [np.asarray(i, a[0].dtype), *carried])
    return carried


@_sem("if")
def _if(f, op, a):
    return _block(f, op.regions[0 if bool(a[0]) else 1], [])


@_sem("yield", "continue", "return")
def _terminator(f, op, a):
    return a


def _block(f: Frame, block: Block, args: Sequence) -> list:
    """Run a block; the operands of its terminator."""
    for v, x in zip(block.args, args):
        f.values[v] = x
    out: list = []
    for op in block.ops:
        operands = [f.values[v] for g in op.spec.operands for v in op.group(g.name)]
        out = SEMANTICS[op.spec.name](f, op, operands)
        for v, x in zip(op.results, out):
            f.values[v] = x
    return out


class _Place:
    """Where the entry's pointers point (``abi.parameters``): host addresses, each array
    and group table made addressable in the simulator's memory."""

    null = 0

    def __init__(self, buffers: Buffers, memory: Memory):
        self.buffers, self.memory = buffers, memory
        self.added: set = set()

    def address(self, m) -> Optional[int]:
        b = int(m.buffer)
        if b < 0:
            return None
        if b not in self.added:
            self.added.add(b)
            self.memory.add(self.buffers.buffers[b])
        return memref_address(m, self.buffers)

    @staticmethod
    def pointer(address: int) -> int:
        return address

    def table(self, table: np.ndarray, relocate) -> int:
        return self.memory.add(table)


def run(entry: Entry, func, args: Sequence, grid: Tuple[int, int, int],
        filename: str = "<input>") -> None:
    """Run an entry (translated from `func`) on every tile block of `grid` (checked as
    a launch's grid is: positive sizes within an NVIDIA GPU's limits); a checked entry's
    finding is the KernelError the interpreter raises (`filename` names the source)."""
    grid = check_grid(grid, get_target("nvidia").max_grid)
    memory, buffers = Memory(), Buffers()
    values = marshal(args, func.args, buffers, func.name)
    record = checks.new_record()
    params = parameters(entry, func, values, _Place(buffers, memory), memory.add(record))
    execute(entry, params, memory, grid)
    checks.raise_finding(entry, filename, record)


def execute(entry: Entry, params: Sequence, memory: Memory, grid: Tuple[int, int, int]) -> None:
    """Run an entry on its parameters (``abi.parameters``) on every tile block of `grid`,
    the memory they point to in `memory`."""
    for z, y, x in itertools.product(*(range(g) for g in grid[::-1])):
        frame = Frame(memory, (x, y, z), tuple(grid))
        frame.values.update(zip(entry.args, params))
        _block(frame, entry.body, [])
