"""The collective BLAS instructions as loops over the tiles of their output.

Each instruction's entry in ``_VALUES`` computes the tile of its result at a tile index
of the output (``op(A)`` for axpby, ``A .* B`` for hadamard, ``a b^T`` for ger, row sums
for sum, ``op(A) b`` for gemv, ``op(A) op(B)`` for gemm: the last three with a loop over
the contracted mode), in the output's accumulation type; ``_update`` then stores
``alpha * value + beta * C``.  ``beta`` = 0 does not read C (the BLAS convention the
reference interpreter follows): a constant 0 skips the load, a run-time one selects.
gemm runs on the matrix units (``mmaf``); 16-bit operands keep their type and accumulate
in f32, other mixes are converted to the accumulation type first; complex tiles (pairs
of their parts) multiply as four real ``mmaf``, integers other than i8 as sums of outer
products.  The ``.atomic`` forms add (beta 1) or store (beta 0) each element atomically.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence

from ...ir.core import Instruction
from ...ir.numerics import accumulate_type
from ...ir.types import SCALAR_TYPES, MemrefType
from . import checks
from .ops import Scalar
from .tir import Value
from .translate import COMPONENT, Memref, Pair, Rule, Translator, extent, registrar, unsupported

RULES: Dict[str, Rule] = {}
_rule = registrar(RULES)
#: element types of BLAS operands (complex ones as pairs of tiles of their parts)
_NUMBERS = ("i8", "i16", "i32", "i64", "index", "f16", "bf16", "f32", "f64", "c32", "c64")


def _transposed(inst: Instruction, slot: str) -> bool:
    return inst.modifier(slot) == "t"


def _add_along(t: Translator, name: str, tile: Value, dim: int) -> Value:
    """The sums (``reduce``) or the inclusive prefix sums (``scan``) of `tile` along mode
    `dim`."""
    return t.along(name, tile, dim, lambda a, b: t.arith("add", a, b), 0)


def _reduce_add(t: Translator, tile: Value, dim: int) -> Value:
    return _add_along(t, "reduce", tile, dim)


def _contracted(t: Translator, inst: Instruction, exts: Sequence[int], index: List[Value], ct: str,
                step: Callable[[Value, int], Value]) -> Value:
    """The sum over the tiles of op(A)'s second mode of `step(tile index, extent)`."""
    A = t.memref(inst.slots["A"])
    size = A.shape[0 if _transposed(inst, "ta") and len(A.shape) == 2 else -1]
    k_ext = extent(size)
    zeros = t.const(ct, 0, exts)
    return t.accumulate(size, k_ext, zeros, lambda k, acc: t.arith("add", acc, step(k, k_ext)))


def _axpby(t, inst, exts, index, ct):
    return t.load_op(t.memref(inst.slots["A"]), _transposed(inst, "ta"), exts, index, ct)


def _hadamard(t, inst, exts, index, ct):
    a, b = (t.load_op(t.memref(inst.slots[s]), False, exts, index, ct) for s in "AB")
    return t.arith("mul", a, b)


def _outer(t: Translator, m: Memref, exts, index: Value, ct: str, mode: int, shape) -> Value:
    """A vector tile as a row (`mode` 1) or column (`mode` 0) broadcast to `shape`."""
    v = t.load_op(m, False, [exts], [index], ct)
    ones = (exts, 1) if mode == 0 else (1, exts)
    return t.shaped("broadcast", t.shaped("reshape", v, ones), shape)


def _ger(t, inst, exts, index, ct):
    a = _outer(t, t.memref(inst.slots["A"]), exts[0], index[0], ct, 0, exts)
    b = _outer(t, t.memref(inst.slots["B"]), exts[1], index[1], ct, 1, exts)
    return t.arith("mul", a, b)


def _sum(t, inst, exts, index, ct):
    A = t.memref(inst.slots["A"])
    if len(A.shape) == 1:  # a scalar: the output is viewed as one element
        total = _contracted(t, inst, (), [], ct, lambda k, K: _reduce_add(
            t, t.load_op(A, False, [K], [k], ct), 0))
        return t.shaped("reshape", total, exts)
    return _contracted(t, inst, exts, index, ct, lambda k, K: _reduce_add(
        t, t.load_op(A, _transposed(inst, "ta"), [exts[0], K], [index[0], k], ct), 1))


def _gemv(t, inst, exts, index, ct):
    A, b = t.memref(inst.slots["A"]), t.memref(inst.slots["B"])

    def step(k, K):
        a = t.load_op(A, _transposed(inst, "ta"), [exts[0], K], [index[0], k], ct)
        return _reduce_add(t, t.arith("mul", a, _outer(t, b, K, k, ct, 1, (exts[0], K))), 1)
    return _contracted(t, inst, exts, index, ct, step)


def _gemm(t, inst, exts, index, ct):
    """On the matrix units: ``mmaf``, or ``mmai`` for i8 (sums in i32, whose low byte is
    the sum wrapped around in i8); other integers as sums of outer products."""
    A, B = t.memref(inst.slots["A"]), t.memref(inst.slots["B"])
    units = ct in COMPONENT or Scalar(ct).is_float or A.element == B.element == ct == "i8"
    same = A.number == B.number and accumulate_type_name(A.number) == ct
    element = A.number if same else ct
    acc_type = "i32" if ct == "i8" else ct
    size = A.shape[0 if _transposed(inst, "ta") else 1]
    k_ext = extent(size)

    def step(k, acc):
        a = t.load_op(A, _transposed(inst, "ta"), [exts[0], k_ext], [index[0], k], element)
        b = t.load_op(B, _transposed(inst, "tb"), [k_ext, exts[1]], [k, index[1]], element)
        if not units:
            return t.products(a, b, acc)
        if isinstance(acc, Pair):
            return t.complex_mma(a, b, acc)
        if ct == "i8":
            return t.b.one("mmai", acc.type, lhs=a, rhs=b, acc=acc, signedness_lhs="signed",
                           signedness_rhs="signed")
        return t.b.one("mmaf", acc.type, lhs=a, rhs=b, acc=acc)
    return t.convert(t.accumulate(size, k_ext, t.const(acc_type, 0, exts), step), ct)


_VALUES = {"axpby": _axpby, "hadamard": _hadamard, "ger": _ger, "sum": _sum, "gemv": _gemv,
           "gemm": _gemm}


def accumulate_type_name(element: str) -> str:
    """Where sums of `element` are formed (``ttlc.ir.numerics``)."""
    return accumulate_type(SCALAR_TYPES[element]).name


def _constant(v) -> object:
    """The value of a scalar defined by ``constant``, else None."""
    owner = v.owner
    return owner.attrs["value"] if owner is not None and owner.opcode == "constant" else None


def _update(t: Translator, inst: Instruction, out: Memref, exts, index, value: Value, ct: str):
    shape = tuple(exts)
    alpha = t.splat(t.scalar_as(inst.slots["alpha"], ct), shape)
    result = t.arith("mul", alpha, value)
    beta_value = _constant(inst.slots["beta"])
    if isinstance(beta_value, (list, tuple)):  # a complex constant
        beta_value = complex(*beta_value)
    if inst.modifier("atomic"):  # beta is a constant 0 or 1
        (t.atomic_store if beta_value == 0 else t.atomic_add)(out, exts, index,
                                                                t.convert(result, out.number))
        return
    if beta_value != 0:
        beta = t.scalar_as(inst.slots["beta"], ct)
        term = t.arith("mul", t.splat(beta, shape), t.convert(t.load(out, exts, index), ct))
        if beta_value is None:
            zero = t.const(ct, 0)
            is_zero = (t.binary("andi", *(t.compare("equal", x, y) for x, y in zip(beta, zero)))
                       if isinstance(beta, Pair) else t.compare("equal", beta, zero))
            term = t.select(t.splat(is_zero, shape), t.const(ct, 0, shape), term)
        result = t.arith("add", result, term)
    t.store(out, exts, index, t.convert(result, out.number))


def _check_operands(t: Translator, inst: Instruction) -> None:
    """What the translation covers; in checked code, operands that are not null."""
    if inst.modifier("atomic"):
        beta = _constant(inst.slots["beta"])
        if beta not in (0, 1):
            raise unsupported(inst, "atomic updates (.atomic) with a beta other than 0 or 1 are")
        out = inst.slots[inst.opdef.blas.written].type.element.name
        if beta == 1 and out in ("i8", "i16"):
            raise unsupported(inst, f"atomic additions to {out} are")
    for slot in inst.opdef.blas.slots:
        mt = inst.slots[slot].type
        if not isinstance(mt, MemrefType) or mt.element.name not in _NUMBERS:
            raise unsupported(inst, f"operands of type {mt} are")
    if t.checks:  # checked code: no operand is null
        for slot in inst.opdef.blas.slots:
            checks.check_memref(t, t.memref(inst.slots[slot]))


@_rule("cumsum")
def cumsum(t: Translator, inst: Instruction) -> None:
    """Tiles of the other modes in any order; along the summed mode in order, each tile's
    prefix sums plus the sum of the tiles before it (carried)."""
    _check_operands(t, inst)
    A, out, mode = t.memref(inst.slots["A"]), t.memref(inst.slots["B"]), inst.attrs["mode"]
    ct = accumulate_type_name(out.number)
    shape = out.view_shape()
    exts = [extent(d) for d in shape]
    others = [k for k in range(len(shape)) if k != mode]
    rest = tuple(exts[k] for k in others)
    ones = tuple(1 if k == mode else exts[k] for k in range(len(exts)))

    def along(index_others):
        def step(k, carry):
            index = list(index_others)
            index.insert(mode, k)
            tile = t.load_op(A, False, exts, index, ct)
            below = t.shaped("broadcast", t.shaped("reshape", carry, ones), exts)
            _update(t, inst, out, exts, index, t.arith("add", _add_along(t, "scan", tile, mode), below), ct)
            return t.arith("add", carry, _reduce_add(t, tile, mode))
        t.accumulate(shape[mode], exts[mode], t.const(ct, 0, rest), step)

    t.over_tiles([shape[k] for k in others], list(rest), along)


@_rule(*_VALUES)
def blas(t: Translator, inst: Instruction) -> None:
    _check_operands(t, inst)
    out = t.memref(inst.slots[inst.opdef.blas.written])
    ct = accumulate_type_name(out.number)
    shape = out.view_shape()
    exts = [extent(d) for d in shape]
    t.over_tiles(shape, exts, lambda index: _update(t, inst, out, exts, index,
                                                    _VALUES[inst.opcode](t, inst, exts, index, ct), ct))
