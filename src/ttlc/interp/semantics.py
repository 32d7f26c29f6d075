"""What each instruction computes: one table from opcode to a NumPy implementation.

Every function takes the work-group state, the instruction and the lane mask
(None in collective regions) and returns the result value (or None).  Values are
NumPy scalars (uniform) or arrays over the work-items (varying); integer arithmetic
wraps at the type's width; division, remainder and shifts of integers follow
``ttlc.ir.numerics``.  Coopmatrix and subgroup instructions are in ``coop.py``.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List

import numpy as np

from ..ir.core import Instruction
from ..ir.layout import layout_of
from ..ir.numerics import accumulate_type, c_divmod, shift_amount
from ..ir.traits import first_broken_rule, shapes_of
from ..ir.types import CoopMatrixType, GroupType, MemrefType, Type, element_type
from . import checks
from ..runtime.values import GroupValue as Group, MemRef, OutOfBounds, dtype_of

class SemanticsTable(Dict[str, Callable]):
    """opcode -> the function giving its meaning, one table per module of the interpreter
    (``interp/table.py`` composes them); ``@TABLE.of("opcode", ...)`` adds an entry."""

    def of(self, *opcodes: str):
        def add(fn):
            for op in opcodes:
                assert op not in self, f"semantics of {op} defined twice"
                self[op] = fn
            return fn
        return add


#: the semantics of this module: scalar instructions, memory, builtins, BLAS
BASIC = SemanticsTable()


def operand(wg, inst: Instruction, slot: str):
    return wg.get(inst.slots[slot])


def result_dtype(inst: Instruction) -> np.dtype:
    return dtype_of(inst.results[0].type)


def as_type(x, dtype: np.dtype):
    """Convert to dtype with wrap-around for integers; keeps scalars scalar."""
    return np.asarray(x).astype(dtype, copy=False)[()]


def active_lanes(wg, mask) -> np.ndarray:
    return np.nonzero(mask)[0]


# ---- arithmetic ---------------------------------------------------------------------------
def _shift_amount(b, dtype):
    return shift_amount(np.asarray(b).astype(dtype), dtype.itemsize * 8)


def _binary(op: str, a, b, dtype: np.dtype):
    kind = dtype.kind
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("div", "rem"):
        if kind in "iu":
            q, r = c_divmod(np.asarray(a), np.asarray(b))
            return q if op == "div" else r
        return a / b if op == "div" else np.fmod(a, b)
    if op == "max":
        return np.maximum(a, b) if kind in "iu" else np.fmax(a, b)
    if op == "min":
        return np.minimum(a, b) if kind in "iu" else np.fmin(a, b)
    if op == "shl":
        return np.left_shift(a, _shift_amount(b, dtype))
    if op == "shr":
        return np.right_shift(a, _shift_amount(b, dtype))
    if op == "and":
        return np.bitwise_and(a, b)
    if op == "or":
        return np.bitwise_or(a, b)
    if op == "xor":
        return np.bitwise_xor(a, b)
    raise AssertionError(op)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """bf16 arithmetic runs in f32 and is rounded once per instruction."""
    return np.dtype(np.float32) if dtype.name == "bfloat16" else dtype


def _accumulate_dtype(t: Type) -> np.dtype:
    """Where sums of a scalar or coopmatrix type are formed (``numerics.accumulate_type``)."""
    return dtype_of(accumulate_type(element_type(t)))


@BASIC.of("add", "sub", "mul", "div", "rem", "max", "min", "shl", "shr", "and", "or", "xor")
def arith_binary(wg, inst, mask):
    dtype = result_dtype(inst)
    a, b = operand(wg, inst, "a"), operand(wg, inst, "b")
    if wg.checked and inst.opcode in ("div", "rem") and dtype.kind in "iu":
        _check_division(wg, inst, mask, a, b)
    cd = _compute_dtype(dtype)
    return as_type(_binary(inst.opcode, as_type(a, cd), as_type(b, cd), cd), dtype)


def _check_division(wg, inst, mask, a, b) -> None:
    """Checked mode: an integer divisor of zero, reported with the work-item and dividend."""
    zero = np.asarray(b) == 0
    if not zero.any():
        return
    t = inst.results[0].type
    if isinstance(t, CoopMatrixType):  # per entry, held by a work-item (ttlc.ir.layout)
        G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
        owner = np.arange(G)[:, None, None] * S + layout_of(t, S).owners
        zero = np.broadcast_to(zero, owner.shape)
        if mask is not None:
            zero = zero & mask[owner]
        if zero.any():
            g, r, c = np.unravel_index(int(np.argmax(zero)), zero.shape)
            num = np.broadcast_to(a, zero.shape)[g, r, c]
            raise wg.fail(f"integer division by zero in '{inst.opcode}': entry ({r}, {c}) "
                          f"divides {num} by 0", int(owner[g, r, c]))
        return
    if mask is not None:
        zero = wg.lanes(zero) & mask
    if np.any(zero):
        lane = int(np.argmax(zero)) if np.ndim(zero) else None
        num = np.asarray(a) if np.ndim(a) == 0 else np.asarray(a)[lane]
        raise wg.fail(f"integer division by zero in '{inst.opcode}': {num} divided by 0", lane)


def _abs(a):
    """|a|; of a complex number C's ``hypot`` of its parts, correctly rounded where
    NumPy's complex ``abs`` is not always (|100 + 1i|: one ulp below), and what target
    cpu calls."""
    if np.iscomplexobj(a):
        return np.hypot(np.real(a), np.imag(a))
    return np.abs(a)


@BASIC.of("abs", "neg", "not", "conj", "im", "re")
def arith_unary(wg, inst, mask):
    a = operand(wg, inst, "a")
    op = inst.opcode
    fn = {"abs": _abs, "neg": np.negative, "conj": np.conj, "im": np.imag, "re": np.real,
          "not": np.invert}[op]
    return as_type(fn(a), result_dtype(inst))


_COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "greater_than": np.greater,
            "greater_than_equal": np.greater_equal, "less_than": np.less,
            "less_than_equal": np.less_equal}


@BASIC.of(*_COMPARE)
def compare(wg, inst, mask):
    a, b = operand(wg, inst, "a"), operand(wg, inst, "b")
    cd = _compute_dtype(np.asarray(a).dtype)
    return np.asarray(_COMPARE[inst.opcode](as_type(a, cd), as_type(b, cd)))[()]


def convert(x, src: np.dtype, dst: np.dtype):
    """The cast table. Float to integer truncates toward zero and saturates (NaN gives 0)."""
    if dst.kind in "iu" and (src.kind == "f" or src.name == "bfloat16"):
        info = np.iinfo(dst)
        f = np.trunc(np.asarray(x, dtype=np.float64))
        f = np.nan_to_num(f, nan=0.0, posinf=info.max, neginf=info.min)
        # saturate by comparison: info.max of a 64-bit type is not a float64 (it rounds
        # to 2^63), so clipping in float64 and converting overflowed to INT64_MIN
        big, small = f >= float(info.max), f <= float(info.min)
        out = np.where(big | small, 0.0, f).astype(dst)
        return as_type(np.where(big, info.max, np.where(small, info.min, out)), dst)
    return as_type(x, dst)


@BASIC.of("cast")
def cast(wg, inst, mask):
    a = operand(wg, inst, "a")
    return convert(a, dtype_of(inst.slots["a"].type), result_dtype(inst))


_LN2 = math.log(2.0)


def _math(op: str, x):
    base = op[len("native_"):] if op.startswith("native_") else op
    if base == "exp2" and np.iscomplexobj(x):
        return np.exp(x * _LN2)
    return {"cos": np.cos, "sin": np.sin, "exp": np.exp, "exp2": np.exp2, "log": np.log,
            "log2": np.log2}[base](x)


@BASIC.of("cos", "sin", "exp", "exp2", "log", "log2", "native_cos", "native_sin", "native_exp",
           "native_exp2", "native_log", "native_log2")
def math_unary(wg, inst, mask):
    dtype = result_dtype(inst)
    x = operand(wg, inst, "a")
    cd = np.dtype(np.float32) if dtype.itemsize == 2 and dtype.kind != "c" else dtype
    return as_type(_math(inst.opcode, as_type(x, cd)), dtype)


@BASIC.of("constant")
def constant(wg, inst, mask):
    t = inst.results[0].type
    value = inst.attrs["value"]
    if isinstance(t, CoopMatrixType):
        return np.full((1, t.rows, t.cols), value, dtype=dtype_of(t))
    return np.array(value, dtype=dtype_of(t))[()]


# ---- builtins -----------------------------------------------------------------------------
_AXIS = {"x": 0, "y": 1, "z": 2}


@BASIC.of("group_id", "num_groups", "num_subgroups", "subgroup_size", "subgroup_id",
           "subgroup_linear_id", "subgroup_local_id")
def builtin(wg, inst, mask):
    op = inst.opcode
    dtype = result_dtype(inst)
    if op == "group_id":
        return dtype.type(wg.group_id[_AXIS[inst.modifier("dim")]])
    if op == "num_groups":
        return dtype.type(wg.num_groups[_AXIS[inst.modifier("dim")]])
    if op == "num_subgroups":
        wgx, wgy = wg.cfg.work_group_size
        return dtype.type({"x": wgx // wg.cfg.subgroup_size, "y": wgy, "z": 1}[inst.modifier("dim")])
    if op == "subgroup_size":
        return dtype.type(wg.cfg.subgroup_size)
    if op == "subgroup_id":
        dim = inst.modifier("dim")
        return wg.sg_x if dim == "x" else wg.sg_y if dim == "y" else np.zeros_like(wg.sg_x)
    if op == "subgroup_linear_id":
        return wg.sg_linear
    return wg.local_id


# ---- memory -------------------------------------------------------------------------------
def _check_indices(wg, m: MemRef, index: List, lanes):
    """Checked mode: every index within the memref's shape."""
    for mode, (i, size) in enumerate(zip(index, m.shape)):
        i = np.asarray(i) if lanes is None else wg.lanes(i)[lanes]
        size = np.asarray(size) if lanes is None else wg.lanes(size)[lanes]
        bad = (i < 0) | (i >= size)
        if np.any(bad):
            k = int(np.argmax(bad)) if np.ndim(bad) else 0
            lane = int(lanes[k]) if lanes is not None else None
            value = int(i[k]) if np.ndim(i) else int(i)
            bound = int(size[k]) if np.ndim(size) else int(size)
            full = ", ".join(str(int(np.asarray(x)[()] if np.ndim(x) == 0 or lane is None
                                         else x[lane])) for x in index)
            raise wg.fail(f"index {value} of mode {mode} is out of bounds (size {bound}); "
                          f"the index is [{full}]", lane)


def _flat_index(m: MemRef, index: List):
    flat = m.offset
    for i, s in zip(index, m.stride):
        flat = flat + np.asarray(i, dtype=np.int64) * s
    return flat


def _buffer(wg, buffer_id: int, lanes=None) -> np.ndarray:
    """The buffer of a memref; ``lanes`` (optional) are the work-items accessing it."""
    buf = wg.memory.buffers[buffer_id] if buffer_id >= 0 else None
    if buf is not None:
        return buf
    lane = int(lanes[0]) if lanes is not None and len(lanes) else None
    if buffer_id < 0:
        raise wg.fail("access through a null memref", lane)
    name = wg.local_names.get(buffer_id)
    raise wg.fail(f"access to local memory{' ' + name if name else ''} after its lifetime "
                  f"ended{wg.ended.get(buffer_id, '')}", lane)


def _in_buffer(buf: np.ndarray, flat) -> None:
    if np.any((flat < 0) | (flat >= len(buf))):
        raise OutOfBounds(f"element {int(np.min(flat)) if np.any(flat < 0) else int(np.max(flat))}"
                          f" of a buffer of {len(buf)} elements")


def access(wg, m: MemRef, index: List, mask, fn):
    """Call fn(buffer, flat indices, lanes) per buffer touched by the active lanes.

    In collective regions (mask None) lanes is None and flat is a scalar."""
    if mask is None:
        if wg.checked:
            _check_indices(wg, m, index, None)
        flat = int(_flat_index(m, index))
        buf = _buffer(wg, int(m.buffer))
        _in_buffer(buf, np.asarray(flat))
        return fn(buf, flat, None)
    lanes = active_lanes(wg, mask)
    if wg.checked:
        _check_indices(wg, m, index, lanes)
    flat = wg.lanes(_flat_index(m, index))[lanes]
    ids = wg.lanes(np.asarray(m.buffer))[lanes]
    for b in np.unique(ids):
        sel = ids == b
        buf = _buffer(wg, int(b), lanes[sel])
        _in_buffer(buf, flat[sel])
        if wg.checked:  # data races on local memory
            checks.track_scalar(wg, wg.current, int(b), flat[sel], lanes[sel], index)
        fn(buf, flat[sel], lanes[sel])


def _load_element(wg, inst, mask, m: MemRef, index):
    if mask is None:
        return access(wg, m, index, None, lambda buf, f, _: buf[f])
    out = np.zeros(wg.cfg.lanes, dtype=m.dtype)

    def gather(buf, f, lanes):
        out[lanes] = buf[f]
    access(wg, m, index, mask, gather)
    return out


@BASIC.of("load", "atomic_load")
def load(wg, inst, mask):
    src = operand(wg, inst, "tensor")
    index = [wg.get(v) for v in inst.slots["index"]]
    if isinstance(src, Group):
        return load_group(wg, inst, src, index[0], mask)
    return _load_element(wg, inst, mask, src, index)


def load_group(wg, inst, g: Group, i, mask):
    n = len(g.members)
    idx = np.asarray(i) if mask is None or np.ndim(i) == 0 else wg.lanes(i)[mask]
    bad = (idx < 0) | (idx >= n)
    if np.any(bad):
        k = int(np.argmax(bad)) if np.ndim(bad) else 0
        lane = int(np.nonzero(mask)[0][k]) if np.ndim(bad) else None
        raise wg.fail(f"group index {int(idx[k]) if np.ndim(idx) else int(idx)} is out of "
                      f"bounds (group size {n})", lane)
    if np.ndim(i) == 0:
        return g.members[int(i)]
    lanes_i = np.where(mask, wg.lanes(i), 0) if mask is not None else wg.lanes(i)
    pick = lambda field: np.array([field(g.members[k]) for k in lanes_i])  # noqa: E731
    first = g.members[0]
    return MemRef(pick(lambda m: m.buffer), pick(lambda m: m.offset),
                  tuple(pick(lambda m, d=d: m.shape[d]) for d in range(len(first.shape))),
                  tuple(pick(lambda m, d=d: m.stride[d]) for d in range(len(first.stride))),
                  first.dtype)


@BASIC.of("store", "atomic_store")
def store(wg, inst, mask):
    m = operand(wg, inst, "tensor")
    value = operand(wg, inst, "value")
    index = [wg.get(v) for v in inst.slots["index"]]

    def scatter(buf, f, lanes):
        buf[f] = value if lanes is None else wg.lanes(value)[lanes]
    access(wg, m, index, mask, scatter)


_UPDATE = {"atomic_add": np.add, "atomic_max": np.maximum, "atomic_min": np.minimum}


@BASIC.of("atomic_add", "atomic_max", "atomic_min")
def atomic_update(wg, inst, mask):
    """Read-modify-write, one work-item after the other; returns the old values."""
    m = operand(wg, inst, "tensor")
    value = operand(wg, inst, "value")
    index = [wg.get(v) for v in inst.slots["index"]]
    fn = _UPDATE[inst.opcode]
    if m.dtype.kind == "f" and inst.opcode != "atomic_add":
        fn = np.fmax if inst.opcode == "atomic_max" else np.fmin
    old = np.zeros(wg.cfg.lanes, dtype=m.dtype) if mask is not None else None
    result = {}

    def update(buf, f, lanes):
        if lanes is None:
            result["old"] = buf[f].copy()
            buf[f] = as_type(fn(buf[f], value), m.dtype)
            return
        vals = wg.lanes(value)[lanes]
        for k, lane in enumerate(lanes):
            old[lane] = buf[f[k]]
            buf[f[k]] = as_type(fn(buf[f[k]], vals[k]), m.dtype)
    access(wg, m, index, mask, update)
    return result["old"] if mask is None else old


@BASIC.of("alloca")
def alloca(wg, inst, mask):
    t: MemrefType = inst.results[0].type
    dtype = dtype_of(t.element)
    buf = np.zeros(t.extent, dtype=dtype)
    bid = wg.memory.add(buf, "local")
    return MemRef(bid, 0, tuple(t.shape), tuple(t.stride), dtype)


@BASIC.of("lifetime_stop")
def lifetime_stop(wg, inst, mask):
    bid = int(operand(wg, inst, "object").buffer)
    wg.memory.free(bid)
    wg.ended[bid] = f" (lifetime_stop at {inst.loc})"


@BASIC.of("barrier")
def barrier(wg, inst, mask):
    if wg.checked and mask is not None:
        # no active work-item: a branch run only for its (ignored) results
        if mask.any() and not mask.all():
            lane, arrived = int(np.argmin(mask)), int(np.argmax(mask))
            raise wg.fail(f"barrier not reached by all work-items of the work-group: work-item "
                          f"({int(wg.lane_x[arrived])}, {int(wg.lane_y[arrived])}) waits here "
                          f"but this work-item does not arrive", lane)
        checks.barrier(wg, inst)  # barrier.local ends the race-tracking interval


@BASIC.of("associated")
def associated(wg, inst, mask):
    x = operand(wg, inst, "tensor")
    if isinstance(x, Group):
        return np.bool_(x.associated)
    return np.asarray(x.buffer >= 0)[()]


@BASIC.of("size")
def size(wg, inst, mask):
    x = operand(wg, inst, "tensor")
    if isinstance(x, Group):
        return np.int64(len(x.members))
    s = x.shape[inst.attrs["mode"]]
    return np.asarray(s, dtype=np.int64)[()]


def _value_or_int(wg, x):
    return x if isinstance(x, int) else wg.get(x)


@BASIC.of("subview")
def subview(wg, inst, mask):
    m: MemRef = operand(wg, inst, "tensor")
    offset = m.offset
    shape, stride = [], []
    for mode, (off, size) in enumerate(inst.slots["slices"]):
        dynamic = not isinstance(size, int)
        off, size = _index_value(wg, off), _index_value(wg, size)
        _check_slice(wg, mask, mode, off, size, dynamic, m.shape[mode])
        offset = offset + off * m.stride[mode]
        if not dynamic and size == 0:
            continue
        shape.append(size)
        stride.append(m.stride[mode])
    return MemRef(m.buffer, offset, tuple(shape), tuple(stride), m.dtype)


def _check_slice(wg, mask, mode: int, off, size, dynamic: bool, extent) -> None:
    """The spec's rules of a slice (offset non-negative, size positive, the slice inside
    the mode; a single index, size 0, inside the mode) in checked code; a negative size
    always (a view of negative size does not exist)."""
    bad = np.asarray(size < 0)
    if wg.checked:
        end = off + np.maximum(size, 1)
        bad = bad | (off < 0) | (end > extent) | (dynamic and size == 0)
    if mask is not None and np.ndim(bad):
        bad = bad & mask
    if not np.any(bad):
        return
    lane = int(np.argmax(bad)) if np.ndim(bad) else None
    pick = (lambda x: int(x[lane]) if np.ndim(x) else int(x))
    o, n, e = pick(np.asarray(off)), pick(np.asarray(size)), pick(np.asarray(extent))
    what = ("a dynamic size of zero is undefined behaviour" if dynamic and n == 0
            else "a negative size" if n < 0 else "a negative offset" if o < 0
            else f"the slice overruns the mode's size {e}")
    raise wg.fail(f"subview of mode {mode} at offset {o} with size {n}: {what}", lane)


def _index_value(wg, x):
    """An int attribute or index value: a Python int when uniform, an int64 array if varying."""
    if isinstance(x, int):
        return x
    v = wg.get(x)
    return int(v) if np.ndim(v) == 0 else v.astype(np.int64, copy=False)


@BASIC.of("expand")
def expand(wg, inst, mask):
    m: MemRef = operand(wg, inst, "tensor")
    mode = inst.attrs["mode"]
    dims = [np.asarray(_value_or_int(wg, e), dtype=np.int64)[()] for e in inst.slots["shape"]]
    strides, s = [], m.stride[mode]
    for d in dims:
        strides.append(s)
        s = s * d
    if wg.checked:
        total = np.prod(np.stack(np.broadcast_arrays(*dims)), axis=0)
        if np.any(total != m.shape[mode]):
            raise wg.fail(f"expand shape product {total} does not equal the mode size "
                          f"{m.shape[mode]}")
    return MemRef(m.buffer, m.offset, m.shape[:mode] + tuple(dims) + m.shape[mode + 1:],
                  m.stride[:mode] + tuple(strides) + m.stride[mode + 1:], m.dtype)


@BASIC.of("fuse")
def fuse(wg, inst, mask):
    m: MemRef = operand(wg, inst, "tensor")
    lo, hi = inst.attrs["from"], inst.attrs["to"]
    size = 1
    for d in m.shape[lo:hi + 1]:
        size = size * d
    if wg.checked:
        for k in range(lo, hi):
            if np.any(np.asarray(m.stride[k]) * m.shape[k] != m.stride[k + 1]):
                raise wg.fail(f"modes {k} and {k + 1} cannot be fused: their strides do not match")
    return MemRef(m.buffer, m.offset, m.shape[:lo] + (np.asarray(size)[()],) + m.shape[hi + 1:],
                  m.stride[:lo + 1] + m.stride[hi + 1:], m.dtype)


# ---- collective BLAS ------------------------------------------------------------------------
def _arrays(wg, inst) -> Dict[str, np.ndarray]:
    """NumPy views of a BLAS instruction's memref operands, by slot, once their sizes
    satisfy the instruction's shape rules (a dynamic size breaking one is a KernelError,
    checked or not: never NumPy's broadcasting or its error)."""
    arrays = {}
    for slot in inst.opdef.blas.slots:
        m = operand(wg, inst, slot)
        _buffer(wg, int(m.buffer))
        arrays[slot] = wg.memory.ndarray(m)
    ta, tb = (inst.modifier(t) if any(m.slot == t for m in inst.opdef.modifiers) else "n"
              for t in ("ta", "tb"))
    broken = first_broken_rule(inst.opcode, {slot: a.shape for slot, a in arrays.items()}, ta, tb)
    if broken:
        raise wg.fail(broken)
    return arrays


@BASIC.of("check_iteration")
def check_iteration(wg, inst, mask):
    """Nothing to do: the interpreter runs foreach bodies itself and keeps their points
    apart (``WorkGroup.actor_base``); lowered code needs the mark."""


@BASIC.of("check_shapes")
def check_shapes(wg, inst, mask):
    """The shape rules a BLAS instruction's sizes must satisfy (as ``_arrays`` tests them)."""
    shapes = shapes_of(inst.attrs["orders"], [int(wg.get(v)) for v in inst.slots["sizes"]])
    broken = first_broken_rule(inst.modifier("rule"), shapes, inst.modifier("ta"),
                               inst.modifier("tb"))
    if broken:
        raise wg.fail(broken)


def _op(x: np.ndarray, transpose: str) -> np.ndarray:
    return x.T if transpose == "t" and x.ndim == 2 else x


def _blas_dtype(inst) -> np.dtype:
    """Where a BLAS instruction accumulates: its output's element type (16-bit floats in f32)."""
    return _accumulate_dtype(inst.slots[inst.opdef.blas.written].type.element)


def _update(wg, inst, out: np.ndarray, value: np.ndarray) -> None:
    """out := alpha * value + beta * out, accumulated in the output's precision.

    beta = 0 does not read out (BLAS convention: NaN in the output is overwritten)."""
    alpha, beta = operand(wg, inst, "alpha"), operand(wg, inst, "beta")
    cd = _blas_dtype(inst)
    result = np.asarray(alpha).astype(cd) * np.asarray(value).astype(cd)
    if beta != 0:
        result = result + np.asarray(beta).astype(cd) * out.astype(cd)
    out[...] = result.astype(out.dtype)


def _compute(x: np.ndarray, inst) -> np.ndarray:
    """An input converted to the precision the output accumulates in (promotion)."""
    return x.astype(_blas_dtype(inst))


@BASIC.of("axpby")
def axpby(wg, inst, mask):
    x = _arrays(wg, inst)
    _update(wg, inst, x["B"], _compute(_op(x["A"], inst.modifier("ta")), inst))


@BASIC.of("cumsum")
def cumsum(wg, inst, mask):
    x = _arrays(wg, inst)
    _update(wg, inst, x["B"], np.cumsum(_compute(x["A"], inst), axis=inst.attrs["mode"]))


@BASIC.of("sum")
def sum_(wg, inst, mask):
    x = _arrays(wg, inst)
    A, B = _compute(_op(x["A"], inst.modifier("ta")), inst), x["B"]
    _update(wg, inst, B, A.sum(axis=1) if B.ndim == 1 else A.sum())


@BASIC.of("gemm")
def gemm(wg, inst, mask):
    x = _arrays(wg, inst)
    A = _op(x["A"], inst.modifier("ta"))
    B = _op(x["B"], inst.modifier("tb"))
    _update(wg, inst, x["C"], _compute(A, inst) @ _compute(B, inst))


@BASIC.of("gemv")
def gemv(wg, inst, mask):
    x = _arrays(wg, inst)
    A = _op(x["A"], inst.modifier("ta"))
    _update(wg, inst, x["C"], _compute(A, inst) @ _compute(x["B"], inst))


@BASIC.of("ger")
def ger(wg, inst, mask):
    x = _arrays(wg, inst)
    _update(wg, inst, x["C"], np.outer(_compute(x["A"], inst), _compute(x["B"], inst)))


@BASIC.of("hadamard")
def hadamard(wg, inst, mask):
    x = _arrays(wg, inst)
    _update(wg, inst, x["C"], _compute(x["A"], inst) * _compute(x["B"], inst))
