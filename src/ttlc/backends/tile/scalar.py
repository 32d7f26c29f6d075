"""Scalar instructions, builtins, memref views and loops as Tile IR on rank-0 tiles.

Integers are signed and wrap around (``overflow`` none); shift amounts are taken modulo
the width as the language says (``ttlc.ir.numerics``); a float ``not_equal`` is an
unordered comparison (true with a NaN operand), the others ordered.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List

from ...ir.core import Instruction
from ...runtime.findings import E_DIV_ZERO, E_STEP
from ...ir.types import CoopMatrixType
from .ops import Ptr, Scalar, Tile
from . import coop
from .coop import matrix_tile
from .spmd import divergent_for, exec_config, masked_if
from . import checks, complexes, races
from .translate import (Group, Memref, Pair, Rule, Translator, component_name, element_name,
                        is_complex, registrar, unsupported)

RULES: Dict[str, Rule] = {}
_rule = registrar(RULES)


def _element(inst: Instruction) -> str:
    return element_name(inst.results[0].type, inst.loc, inst.opcode)


_FLOAT_BINARY = {"add": "addf", "sub": "subf", "mul": "mulf", "div": "divf", "rem": "remf",
                 "max": "maxf", "min": "minf"}
_INT_BINARY = {"add": "addi", "sub": "subi", "mul": "muli", "div": "divi", "rem": "remi",
               "max": "maxi", "min": "mini", "shl": "shli", "shr": "shri", "and": "andi",
               "or": "ori", "xor": "xori"}
_SIGNED = ("divi", "remi", "maxi", "mini", "shri")


@_rule(*_INT_BINARY)
def arith_binary(t: Translator, inst: Instruction) -> None:
    if is_complex(inst.results[0].type):
        return complexes.binary(t, inst)
    element = _element(inst)
    a, b = t.tile_of(inst.slots["a"]), t.tile_of(inst.slots["b"])
    if Scalar(element).is_float:
        name = _FLOAT_BINARY.get(inst.opcode)
        if name is None:
            raise unsupported(inst, f"{element} operands are")
        t.values[inst.results[0]] = t.binary(name, a, b)
        return
    name = _INT_BINARY[inst.opcode]
    if name in ("shli", "shri"):  # the amount modulo the width
        b = t.binary("andi", b, t.const(element, Scalar(element).bits - 1))
    if t.checks and name in ("divi", "remi"):  # report a zero divisor, then divide by 1
        a, b = t.matched(a, b)
        zero = t.compare("equal", b, t.const(element, 0))
        ct = inst.results[0].type
        if isinstance(ct, CoopMatrixType) and not t.items:
            coop.check_division(t, ct, a, zero)
        else:
            checks.fail_if(t, zero, E_DIV_ZERO, [a])
        b = t.select(zero, t.const(element, 1, b.type.shape), b)
    attrs = {"signedness": "signed"} if name in _SIGNED else {}
    t.values[inst.results[0]] = t.binary(name, a, b, **attrs)


@_rule("abs", "neg", "not", "conj", "re", "im")
def arith_unary(t: Translator, inst: Instruction) -> None:
    if is_complex(inst.slots["a"].type):
        return complexes.unary(t, inst)
    if inst.opcode in ("conj", "re", "im"):  # of a real number
        a = t.tile_of(inst.slots["a"])
        t.values[inst.results[0]] = t.const(a.type.element.name, 0.0, a.type.shape) \
            if inst.opcode == "im" else a
        return
    element = _element(inst)
    a = t.tile_of(inst.slots["a"])
    is_float = Scalar(element).is_float
    if inst.opcode == "not":
        r = t.binary("xori", a, t.const(element, 1 if element == "i1" else -1))
    else:
        name = {"abs": "absf" if is_float else "absi", "neg": "negf" if is_float else "negi"}
        r = t.b.one(name[inst.opcode], a.type, source=a)
    t.values[inst.results[0]] = r


_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sin": "sin", "cos": "cos"}


@_rule(*_MATH, *("native_" + m for m in _MATH))
def math(t: Translator, inst: Instruction) -> None:
    if is_complex(inst.results[0].type):
        return complexes.math_function(t, inst)
    a = t.tile_of(inst.slots["a"])
    t.values[inst.results[0]] = t.b.one(_MATH[inst.opcode.replace("native_", "")], a.type, source=a)


_PREDICATES = {"equal": "equal", "not_equal": "not_equal", "greater_than": "greater_than",
               "greater_than_equal": "greater_than_or_equal", "less_than": "less_than",
               "less_than_equal": "less_than_or_equal"}


@_rule(*_PREDICATES)
def compare(t: Translator, inst: Instruction) -> None:
    if is_complex(inst.slots["a"].type):
        return complexes.compare(t, inst, _PREDICATES[inst.opcode])
    t.values[inst.results[0]] = t.compare(_PREDICATES[inst.opcode], t.tile_of(inst.slots["a"]),
                                          t.tile_of(inst.slots["b"]))


@_rule("cast")
def cast(t: Translator, inst: Instruction) -> None:
    rt = inst.results[0].type
    number = rt.component if isinstance(rt, CoopMatrixType) else rt
    element = number.name if is_complex(rt) else _element(inst)
    t.values[inst.results[0]] = t.convert(t.tile_of(inst.slots["a"]), element)


@_rule("constant")
def constant(t: Translator, inst: Instruction) -> None:
    value = inst.attrs["value"]
    rt = inst.results[0].type
    shape = matrix_tile(t, inst, rt).shape if isinstance(rt, CoopMatrixType) else ()
    if is_complex(rt):
        return complexes.constant(t, inst, value, shape)
    t.values[inst.results[0]] = t.const(_element(inst), value, shape)


@_rule("group_id", "num_groups")
def builtin(t: Translator, inst: Instruction) -> None:
    name = "get_tile_block_id" if inst.opcode == "group_id" else "get_num_tile_blocks"
    xyz = t.b.op(name, [Tile(Scalar("i32"))] * 3)
    t.values[inst.results[0]] = t.convert(xyz["xyz".index(inst.modifier("dim"))], "i64")


@_rule("subgroup_size", "num_subgroups")
def sizes(t: Translator, inst: Instruction) -> None:
    """Constants of the function's execution configuration."""
    config = exec_config(t, inst)
    if inst.opcode == "subgroup_size":
        value = config.subgroup_size
    else:
        x, y = config.work_group_size
        value = x // config.subgroup_size if inst.modifier("dim") == "x" else y
    t.values[inst.results[0]] = t.const("i32", value)


@_rule("expand")
def expand(t: Translator, inst: Instruction) -> None:
    """One mode viewed as several: sizes as given, strides growing from the mode's."""
    m, mode = t.memref(inst.slots["tensor"]), inst.attrs["mode"]
    dims = [_index(t, d) for d in inst.slots["shape"]]
    strides, s = [], m.strides[mode]
    for d in dims:
        strides.append(s)
        s = t.mul_index(s, d)
    if t.checks:
        total = 1
        for d in dims:
            total = t.mul_index(total, d)
        checks.check_expand(t, total, m.shape[mode])
    t.values[inst.results[0]] = replace(m, shape=m.shape[:mode] + dims + m.shape[mode + 1:],
                                        strides=m.strides[:mode] + strides + m.strides[mode + 1:])


@_rule("fuse")
def fuse(t: Translator, inst: Instruction) -> None:
    """Modes from..to viewed as one: the product of their sizes, the first one's stride."""
    m, lo, hi = t.memref(inst.slots["tensor"]), inst.attrs["from"], inst.attrs["to"]
    if t.checks:
        checks.check_fuse(t, m, lo, hi)
    size = 1
    for d in m.shape[lo:hi + 1]:
        size = t.mul_index(size, d)
    t.values[inst.results[0]] = replace(m, shape=m.shape[:lo] + [size] + m.shape[hi + 1:],
                                        strides=m.strides[:lo + 1] + m.strides[hi + 1:])


@_rule("alloca")
def alloca(t: Translator, inst: Instruction) -> None:
    """Memory of the tile block (Tile IR's ``alloca``, alive until the end of the block
    it is in: the function's body or a loop's, as the language's lifetime)."""
    mt = inst.results[0].type
    element = component_name(mt.element, inst.loc, "alloca")
    alignment = 64  # the language's default, which an alloca's alignment may not exceed
    pair = is_complex(mt.element)
    ptr = t.b.one("alloca", Tile(Ptr(Scalar(element))), num_elem=mt.extent * (2 if pair else 1),
                  alignment=alignment)
    races.alloca(t, inst, ptr, Scalar(element).bits // 8 * (2 if pair else 1))
    name = inst.results[0].name
    t.values[inst.results[0]] = Memref(element, ptr, list(mt.shape), list(mt.stride), pair,
                                       alloca=checks.new_local(t, f"%{name}" if name is not None else None))


@_rule("check_shapes")
def check_shapes(t: Translator, inst: Instruction) -> None:
    """Checked code: the shape rules of the BLAS instruction that follows."""
    checks.check_shapes(t, inst)


@_rule("lifetime_stop")
def lifetime_stop(t: Translator, inst: Instruction) -> None:
    """An alloca lives until the end of its block; checked code notes the end of its
    lifetime (``checks.check_memref`` reports later accesses)."""
    k = t.memref(inst.slots["object"]).alloca
    if k is not None:
        checks.end(t, k, t.checks.current)


@_rule("barrier")
def barrier(t: Translator, inst: Instruction) -> None:
    """Nothing to do: the tile block's memory operations are already ordered by the
    token chain, each run by all the work-items of an SPMD region together, which is
    all a barrier adds (checked code tests that all arrive and orders the race
    detection's intervals: ``races``)."""
    races.barrier(t, inst)


@_rule("size")
def size(t: Translator, inst: Instruction) -> None:
    src = t.values[inst.slots["tensor"]]
    t.values[inst.results[0]] = t.i64(src.size if isinstance(src, Group)
                                      else src.shape[inst.attrs["mode"]])


def _index(t: Translator, x):
    return x if isinstance(x, int) else t.convert(t.tile_of(x), "i64")


@_rule("associated")
def associated(t: Translator, inst: Instruction) -> None:
    """Whether the base address (of a memref, or of a group's address table) is not 0."""
    src = t.values[inst.slots["tensor"]]
    ptr = src.addresses if isinstance(src, Group) else src.ptr
    address = t.b.one("ptr_to_int", Tile(Scalar("i64")), source=ptr)
    t.values[inst.results[0]] = t.b.one("cmpi", Tile(Scalar("i1")), lhs=address, rhs=t.const("i64", 0),
                                        comparison_predicate="not_equal", signedness="unsigned")


@_rule("load")
def load(t: Translator, inst: Instruction) -> None:
    """A member of a group, or an element of a memref."""
    src = t.values[inst.slots["tensor"]]
    index = [_index(t, v) for v in inst.slots["index"]]
    if isinstance(src, Group):
        t.values[inst.results[0]] = t.member(src, index[0])
    else:
        inside = checks.check_access(t, src, index) if t.checks else None
        ptr = t.element_ptr(src, index)
        races.element(t, inst, ptr, inside, index)
        t.values[inst.results[0]] = Pair(t.load_scalar(ptr, inside),
                                         t.load_scalar(t.offset(ptr, 1), inside)) \
            if src.complex else t.load_scalar(ptr, inside)


@_rule("store")
def store(t: Translator, inst: Instruction) -> None:
    m = t.memref(inst.slots["tensor"])
    index = [_index(t, v) for v in inst.slots["index"]]
    inside = checks.check_access(t, m, index) if t.checks else None
    ptr = t.element_ptr(m, index)
    races.element(t, inst, ptr, inside, index)
    if m.complex:
        value = t.convert(t.tile_of(inst.slots["value"]), m.number)
        t.store_scalar(ptr, value.re, inside)
        t.store_scalar(t.offset(ptr, 1), value.im, inside)
        return
    t.store_scalar(ptr, t.convert(t.tile_of(inst.slots["value"]), m.element), inside)


@_rule("subview")
def subview(t: Translator, inst: Instruction) -> None:
    m = t.memref(inst.slots["tensor"])
    offset, shape, strides = 0, [], []
    for mode, ((start, size), stride) in enumerate(zip(inst.slots["slices"], m.strides)):
        start = _index(t, start)
        if t.checks:
            checks.check_slice(t, mode, start, _index(t, size), m.shape[mode],
                               not isinstance(size, int))
        if not (isinstance(start, int) and start == 0):
            offset = t.add_index(offset, t.mul_index(start, stride))
        if not (isinstance(size, int) and size == 0):  # size 0: the mode is removed
            shape.append(_index(t, size))
            strides.append(stride)
    offset = t.mul_index(offset, 2) if m.complex else offset
    t.values[inst.results[0]] = replace(m, ptr=t.offset(m.ptr, offset), shape=shape, strides=strides)


@_rule("for")
def for_loop(t: Translator, inst: Instruction) -> None:
    """In an SPMD region the values carried are tiles of the work-items (and bounds that
    differ between them make a ``divergent_for``)."""
    lower, upper = t.tile_of(inst.slots["from"]), t.tile_of(inst.slots["to"])
    step = t.tile_of(inst.slots["step"]) if "step" in inst.slots else None
    region = inst.regions[0]
    inits = [t.tile_of(v) for v in inst.slots.get("init") or []]
    if t.lanes:
        inits = [t.per_lane(v) for v in inits]
    if t.checks and step is not None:  # a step that never ends a loop that runs: no trip
        endless = t.binary("andi", *t.matched(t.compare("less_than", lower, upper),
                                              t.compare("less_than_or_equal", step,
                                                        t.const(step.type.element.name, 0))))
        checks.fail_if(t, endless, E_STEP, [step])
        upper = t.select(endless, *t.matched(lower, upper))
    if any(v is not None and v.type.shape for v in (lower, upper, step)):
        for r, v in zip(inst.results, divergent_for(t, inst, lower, upper, step, inits)):
            t.values[r] = v
        return

    def body(iv, carried) -> List:
        t.values[region.args[0]] = iv
        for arg, v in zip(region.args[1:], carried):
            t.values[arg] = v
        t.yielded = []  # a loop without values has no yield
        t.region(region)
        return [t.per_lane(v) for v in t.yielded] if t.lanes else t.yielded

    results = t.loop(upper, inits, body, lower=lower, step=step)
    for r, v in zip(inst.results, results):
        t.values[r] = v


@_rule("if")
def if_(t: Translator, inst: Instruction) -> None:
    if t.lanes:
        return masked_if(t, inst)
    def branch(k):
        def run():
            t.yielded = []
            if k < len(inst.regions):
                t.region(inst.regions[k])
            return t.yielded
        return run

    types = []
    for r in inst.results:
        part = matrix_tile(t, inst, r.type) if isinstance(r.type, CoopMatrixType) else \
            Tile(Scalar(component_name(r.type, inst.loc, "if")))
        types += [part, part] if is_complex(r.type) else [part]
    results = t.branches(t.tile_of(inst.slots["condition"]), [branch(0), branch(1)], types)
    for r, v in zip(inst.results, results):
        t.values[r] = v


@_rule("yield")
def yield_(t: Translator, inst: Instruction) -> None:
    t.yielded = [t.tile_of(v) for v in inst.slots["values"]]
