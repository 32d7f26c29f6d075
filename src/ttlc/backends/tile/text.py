"""The MLIR text of a Tile IR module (``cuda_tile`` dialect), written from the operation
table.

The form is the dialect's custom assembly as ``tileirdisasm`` prints bytecode (the
dialect prefix left out inside the module): ``%r = name`` followed by the entry's
``syntax`` with its fields filled in.  ``make_tensor_view`` and ``for`` print fields that
are not operands one by one (static sizes, the loop's header), given by ``_CUSTOM``.
"""
from __future__ import annotations

import decimal
import re
from typing import Callable, Dict, List

import numpy as np

from ...runtime.values import DTYPES
from .bytecode import rounded, scalar_bytes
from .ops import Scalar, TensorView
from .tir import Block, Entry, Module, Op, Value

_FIELD = re.compile(r"\{(\w+)(?::(type1?))?\}")
_OPTIONAL = re.compile(r"\(\?(.*?)\?\)")


class Names:
    """``%argN`` for entry arguments, ``%N`` for everything else, in order of definition."""

    def __init__(self):
        self.names: Dict[Value, str] = {}
        self.count = 0

    def define(self, v: Value, name: str = "") -> str:
        if not name:
            name, self.count = f"%{self.count}", self.count + 1
        self.names[v] = name
        return name

    def __getitem__(self, v: Value) -> str:
        return self.names[v]


def _digits(element: str, value: float) -> str:
    """The number in the natural precision of its type, as APFloat writes it (9
    significant digits for f32, 17 for f64, rounding half up, no trailing zeros); the
    shortest digits that read back for the 16-bit types."""
    if element in _PRECISION:
        with decimal.localcontext(rounding=decimal.ROUND_HALF_UP):
            text = format(decimal.Decimal(value), f".{_PRECISION[element]}g")
        mantissa, e, exponent = text.partition("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return mantissa + e + exponent
    return np.format_float_scientific(DTYPES[element].type(value), unique=True)


_PRECISION = {"f32": 9, "f64": 17}


def float_text(element: str, value) -> str:
    """A float constant as MLIR prints it where that is simple: six significant digits
    in exponent form (written with a seventh 0) when they read back as the same number
    of its type, else the shortest digits that do (MLIR's digits may differ there, and in
    the last place: the tests compare the numbers); hexadecimal bits for infinities and
    NaN."""
    value = rounded(element, value)
    if value != value or value in (float("inf"), float("-inf")):
        return "0x" + scalar_bytes(element, value)[::-1].hex().upper()
    mantissa, exponent = f"{value:.5e}".split("e")
    short = f"{mantissa}0e{exponent}"
    return short if rounded(element, short) == value else _digits(element, value)


def scalar_text(element: str, value) -> str:
    if Scalar(element).is_float:
        return float_text(element, value)
    if element == "i1":
        return "true" if value else "false"
    return str(int(value))


def _identity_text(element: str, value) -> str:
    """A scan or reduce identity: MLIR leaves out the default types (f64, i64) and that of
    booleans, except after hexadecimal bits (infinities, NaN), which name no type."""
    text = scalar_text(element, value)
    default = element in ("f64", "i64", "i1") and not text.startswith("0x")
    return text if default else f"{text} : {element}"


def _attr_text(op: Op, name: str) -> str:
    kind = next(a for a in op.spec.attrs if a.name == name).kind
    value = op.attrs[name]
    if kind == "dense":
        element, v = value
        return f"<{element}: {scalar_text(element, v)}>"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "i32s":
        return "[" + ", ".join(map(str, value)) + "]"
    if kind == "identities":
        return "[" + ", ".join(_identity_text(e, v) for e, v in value) + "]"
    return str(value)


def _optional_attrs(op: Op) -> str:
    """The attributes the syntax does not place, after the operands (the ``{attrs}``
    field): enums without a default (``signed``), enums away from their default
    (``rounding<zero>``) and present unit attributes."""
    out = []
    for a in op.spec.attrs:
        if "{" + a.name + "}" in op.spec.syntax:
            continue
        if a.kind == "enum" and a.default is None:
            out.append(f" {op.attrs[a.name]}")
        elif a.kind == "unit" and op.present(a.name):
            out.append(" " + a.name)
        elif a.kind == "enum" and a.default is not None and op.attrs[a.name] != a.default:
            key = "rounding" if a.enum == "rounding" else a.name
            out.append(f" {key}<{op.attrs[a.name]}>")
    return "".join(out)


def _tensor_view_fields(op: Op, names: Names) -> Dict[str, str]:
    view: TensorView = op.results[0].type
    dyn = iter(op.group("dynamicShape") + op.group("dynamicStrides"))
    parts = {}
    for key, dims in (("shape", view.shape), ("strides", view.strides)):
        parts[key] = "[" + ", ".join(names[next(dyn)] if d is None else str(d) for d in dims) + "]"
    scalars = op.group("dynamicShape") + op.group("dynamicStrides")
    parts["scalars"] = f"{scalars[0].type.text()} -> " if scalars else ""
    return parts


_CUSTOM: Dict[str, Callable[[Op, Names], Dict[str, str]]] = {
    "make_tensor_view": _tensor_view_fields,
}


class Printer:
    def __init__(self):
        self.lines: List[str] = []
        self.names = Names()

    def field(self, op: Op, name: str, suffix: str, custom: Dict[str, str]) -> str:
        if suffix is None and name in custom:
            return custom[name]
        if name == "attrs":
            return _optional_attrs(op)
        if name.startswith("result"):
            results = op.results[:1] if name == "result0" else op.results
            return ", ".join(v.type.text() for v in results)
        if any(g.name == name for g in op.spec.operands):
            values = op.group(name)
            if suffix == "type1":  # one type for the whole group
                return values[0].type.text() if values else ""
            if suffix == "type":
                return ", ".join(v.type.text() for v in values)
            return ", ".join(self.names[v] for v in values)
        return _attr_text(op, name)

    def fill(self, op: Op, syntax: str) -> str:
        custom = _CUSTOM.get(op.spec.name, lambda o, n: {})(op, self.names)

        def optional(m):
            inner = m.group(1)
            present = all(f[0] in custom or f[0] == "attrs" or f[0].startswith("result")
                          or self._has(op, f[0]) for f in _FIELD.findall(inner))
            return inner if present else ""

        syntax = _OPTIONAL.sub(optional, syntax)
        return _FIELD.sub(lambda m: self.field(op, m.group(1), m.group(2), custom), syntax)

    @staticmethod
    def _has(op: Op, name: str) -> bool:
        if any(g.name == name for g in op.spec.operands):
            return bool(op.group(name))
        return name in op.attrs

    def op(self, op: Op, indent: str) -> None:
        if op.spec.packed_results and len(op.results) > 1:
            pack = self.names.define(op.results[0])
            for i, v in enumerate(op.results):
                self.names.define(v, f"{pack}#{i}")
            lhs = f"{pack}:{len(op.results)}"
        else:
            lhs = ", ".join(self.names.define(v) for v in op.results)
        head = f"{indent}{lhs + ' = ' if lhs else ''}{op.spec.name}"
        if op.spec.name == "for":
            self.for_op(op, head, indent)
            return
        if op.spec.name == "if":
            types = ", ".join(v.type.text() for v in op.results)
            self.lines.append(f"{head} {self.names[op.group('condition')[0]]}"
                              f"{f' -> ({types})' if types else ''} {{")
            self.block(op.regions[0], indent + "  ")
            self.lines.append(indent + "} else {")
            self.block(op.regions[1], indent + "  ")
            self.lines.append(indent + "}")
            return
        text = self.fill(op, op.spec.syntax)
        if op.spec.name in ("reduce", "scan"):
            block = op.regions[0]
            args = ", ".join(f"{self.names.define(a)}: {a.type.text()}" for a in block.args)
            self.lines.append(f"{head} {text}\n{indent}({args}) {{")
            self.block(block, indent + "  ")
            self.lines.append(indent + "}")
            return
        self.lines.append(f"{head} {text}".rstrip())

    def for_op(self, op: Op, head: str, indent: str) -> None:
        block = op.regions[0]
        iv, *iters = block.args
        lb, ub, step = (self.names[v] for v in (op.group("lowerBound") + op.group("upperBound")
                                                 + op.group("step")))
        text = f"{head} {self.names.define(iv)} in ({lb} to {ub}, step {step}) : {iv.type.text()}"
        inits = op.group("initValues")
        if inits:
            pairs = ", ".join(f"{self.names.define(a)} = {self.names[v]}" for a, v in zip(iters, inits))
            types = ", ".join(v.type.text() for v in op.results)
            text += f" iter_values({pairs}) -> ({types})"
        self.lines.append(text + " {")
        self.block(block, indent + "  ")
        self.lines.append(indent + "}")

    def block(self, block: Block, indent: str) -> None:
        for op in block.ops:
            self.op(op, indent)

    def entry(self, entry: Entry) -> None:
        self.names = Names()
        args = ", ".join(f"{self.names.define(a, f'%arg{i}')}: {a.type.text()}"
                         for i, a in enumerate(entry.args))
        self.lines.append(f"  entry @{entry.name}({args}) {{")
        self.block(entry.body, "    ")
        self.lines.append("  }")


def print_module(module: Module) -> str:
    p = Printer()
    p.lines.append(f"cuda_tile.module @{module.name} {{")
    for e in module.entries:
        p.entry(e)
    p.lines.append("}")
    return "\n".join(p.lines) + "\n"

