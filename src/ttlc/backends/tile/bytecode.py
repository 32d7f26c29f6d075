"""The Tile IR Binary Format (bytecode) of a module, written from the operation table.

Layout (NVIDIA's ``BytecodeWriter.cpp`` describes it): a header (magic ``\\x7fTileIR\\0``,
version major, minor and a 2-byte tag), then sections, each an id byte (high bit: aligned),
a varint length, an optional alignment with 0xCB padding, and its data: functions (each a
name, a signature type, flags, a location index and its body), constants, types and
strings, each table a count, a table of offsets and the concatenated entries; a 0 byte ends
the file.  An operation is its opcode, its result types (a count first for variadic ones),
a flags varint when it has optional parts, its attributes in order, its operands (a count
first where a group can vary, group by group for segmented operations) and its regions.
Values are numbered in order of definition; a block's arguments and operations are
numbered after the values visible where it starts, and the numbers are reused after it.
No debug section is written: every location is the reserved "unknown" index 0.
"""
from __future__ import annotations

from typing import Dict

from ...runtime.values import DTYPES
from .ops import (DYNAMIC, ELEMENTS, ENUMS, PADDING, TAG_FUNCTION, TAG_PARTITION_VIEW, TAG_PTR,
                  TAG_TENSOR_VIEW, TAG_TILE, TAG_TOKEN, VERSION, Function, PartitionView, Ptr,
                  Scalar, TensorView, Tile, Token, Type)
from .tir import Block, Entry, Module, Op, Value

SECTION_END, SECTION_STRING, SECTION_FUNC, SECTION_CONSTANT, SECTION_TYPE = 0, 1, 2, 4, 5
ATTR_INTEGER, ATTR_FLOAT = 1, 2
PAD = b"\xcb"
KIND_KERNEL = 0x02


def varint(x: int, out: bytearray) -> None:
    assert x >= 0
    while True:
        byte = x & 0x7F
        x >>= 7
        out.append(byte | (0x80 if x else 0))
        if not x:
            return


def signed_varint(x: int, out: bytearray) -> None:
    """Zig-zag encoding of a 64-bit integer."""
    x = (x + (1 << 63)) % (1 << 64) - (1 << 63)
    varint(((x << 1) ^ (x >> 63)) & ((1 << 64) - 1), out)


def int_list(values, width: int, out: bytearray) -> None:
    varint(len(values), out)
    for v in values:
        out += int(v).to_bytes(width, "little", signed=True)


def scalar_bytes(name: str, value) -> bytes:
    """The little-endian bytes of a scalar constant of element type `name` (floats
    rounded to the nearest number of the type)."""
    if Scalar(name).is_float:
        return DTYPES[name].type(value).tobytes()
    if name == "i1":
        return bytes([1 if value else 0])
    bits = int(name[1:])
    return (int(value) % (1 << bits)).to_bytes(bits // 8, "little")


def rounded(name: str, value) -> float:
    """`value` as the nearest number of the float type `name`."""
    return float(DTYPES[name].type(value))


class _Table:
    """Entries numbered in order of first use (strings, types, constants)."""

    def __init__(self):
        self.index: Dict[bytes, int] = {}

    def add(self, data: bytes) -> int:
        return self.index.setdefault(data, len(self.index))

    def section(self, offset_width: int) -> bytearray:
        out = bytearray()
        varint(len(self.index), out)
        out += PAD * (-len(out) % offset_width)
        offset = 0
        for data in self.index:
            out += offset.to_bytes(offset_width, "little")
            offset += len(data)
        for data in self.index:
            out += data
        return out


class Writer:
    def __init__(self):
        self.strings = _Table()
        self.types = _Table()
        self.constants = _Table()

    # ---- types ---------------------------------------------------------------------
    def type(self, t: Type) -> int:
        """The index of `t` in the type table (the types it refers to come first)."""
        out = bytearray()
        if isinstance(t, Scalar):
            varint(ELEMENTS[t.name], out)
        elif isinstance(t, Ptr):
            varint(TAG_PTR, out)
            varint(self.type(t.pointee), out)
        elif isinstance(t, Tile):
            varint(TAG_TILE, out)
            varint(self.type(t.element), out)
            int_list(t.shape, 8, out)
        elif isinstance(t, TensorView):
            varint(TAG_TENSOR_VIEW, out)
            varint(self.type(t.element), out)
            int_list([DYNAMIC if d is None else d for d in t.shape], 8, out)
            int_list([DYNAMIC if d is None else d for d in t.strides], 8, out)
        elif isinstance(t, PartitionView):
            varint(TAG_PARTITION_VIEW, out)
            varint(1 if t.padding else 0, out)  # flags: padding value present
            int_list(t.tile, 4, out)
            varint(self.type(t.view), out)
            int_list(range(len(t.tile)), 4, out)  # dim_map: the identity
            if t.padding:
                varint(PADDING.index(t.padding), out)
        elif isinstance(t, Token):
            varint(TAG_TOKEN, out)
        elif isinstance(t, Function):
            varint(TAG_FUNCTION, out)
            for group in (t.inputs, t.results):
                varint(len(group), out)
                for x in group:
                    varint(self.type(x), out)
        else:
            raise TypeError(f"no bytecode for type {t!r}")
        return self.types.add(bytes(out))

    # ---- attributes ----------------------------------------------------------------
    def constant(self, element: str, value) -> int:
        """A splat constant: one element's bytes.  Of i1, true is 0xFF: MLIR reads one
        byte of i1 data as a splat only if it is 0x00 or 0xFF, else as packed bits (0x01:
        true, then false in every other element)."""
        data = b"\xff" if element == "i1" and value else scalar_bytes(element, value)
        out = bytearray()
        varint(len(data), out)
        return self.constants.add(bytes(out + data))

    def tagged_scalar(self, element: str, value, out: bytearray) -> None:
        """A self-describing integer or float attribute (reduction identities)."""
        is_float = Scalar(element).is_float
        varint(ATTR_FLOAT if is_float else ATTR_INTEGER, out)
        varint(self.type(Scalar(element)), out)
        if is_float:
            bits = int.from_bytes(scalar_bytes(element, value), "little")
            signed_varint(bits, out)
        else:
            varint(int(value) % (1 << Scalar(element).bits), out)  # the bits of its width

    def attr(self, op: Op, kind: str, enum: str, value, out: bytearray) -> None:
        if kind == "enum":
            varint(ENUMS[enum].index(value), out)
        elif kind == "int":
            varint(value, out)
        elif kind == "bool":
            out.append(1 if value else 0)
        elif kind == "dense":  # (element name, value)
            varint(self.constant(*value), out)
        elif kind == "i32s":
            int_list(value, 4, out)
        elif kind == "identities":  # [(element name, value)]
            varint(len(value), out)
            for element, v in value:
                self.tagged_scalar(element, v, out)
        else:
            raise AssertionError(f"attribute kind {kind} of {op.spec.name}")

    # ---- operations ----------------------------------------------------------------
    def op(self, op: Op, numbers: Dict[Value, int], out: bytearray) -> None:
        spec = op.spec
        varint(spec.opcode, out)
        if spec.variadic_results:
            varint(len(op.results), out)
        for r in op.results:
            varint(self.type(r.type), out)
        if spec.has_flags:
            varint(sum(1 << i for i, name in enumerate(spec.flags) if op.present(name)), out)
        for a in spec.attrs:
            if a.kind != "unit" and (a.name not in spec.flags or op.present(a.name)):
                self.attr(op, a.kind, a.enum, op.attrs[a.name], out)
        if spec.segmented:
            for g in spec.operands:
                values = op.group(g.name)
                if g.arity == "many":
                    varint(len(values), out)
                for v in values:
                    varint(numbers[v], out)
        elif spec.operands:
            values = [v for g in spec.operands for v in op.group(g.name)]
            if spec.variadic_operands:
                varint(len(values), out)
            for v in values:
                varint(numbers[v], out)
        if spec.regions:
            varint(len(op.regions), out)
            for block in op.regions:
                varint(1, out)  # one block per region
                self.block(block, numbers, out)
        for v in op.results:  # numbered after the values of its regions
            numbers[v] = len(numbers)

    def block(self, block: Block, numbers: Dict[Value, int], out: bytearray) -> None:
        inner = dict(numbers)
        varint(len(block.args), out)
        for a in block.args:
            varint(self.type(a.type), out)
            inner[a] = len(inner)
        varint(len(block.ops), out)
        for op in block.ops:
            self.op(op, inner, out)

    def entry(self, entry: Entry, out: bytearray) -> None:
        varint(self.strings.add(entry.name.encode()), out)
        varint(self.type(Function(tuple(a.type for a in entry.args))), out)
        out.append(KIND_KERNEL)
        varint(0, out)  # location: unknown
        body = bytearray()
        numbers = {a: i for i, a in enumerate(entry.args)}
        for op in entry.body.ops:
            self.op(op, numbers, body)
        varint(len(body), out)
        out += body


def _section(ident: int, data: bytes, alignment: int, out: bytearray) -> None:
    out.append(ident | (0x80 if alignment > 1 else 0))
    varint(len(data), out)
    if alignment > 1:
        varint(alignment, out)
        out += PAD * (-len(out) % alignment)
    out += data


def write(module: Module) -> bytes:
    """The bytecode of `module`."""
    w = Writer()
    functions = bytearray()
    varint(len(module.entries), functions)
    for e in module.entries:
        w.entry(e, functions)
    out = bytearray(b"\x7fTileIR\x00")
    out += bytes([VERSION[0], VERSION[1]]) + VERSION[2].to_bytes(2, "little")
    functions += PAD * (-len(functions) % 8)
    _section(SECTION_FUNC, functions, 8, out)
    if w.constants.index:
        _section(SECTION_CONSTANT, w.constants.section(8), 8, out)
    _section(SECTION_TYPE, w.types.section(4), 4, out)
    _section(SECTION_STRING, w.strings.section(4), 4, out)
    out.append(SECTION_END)
    return bytes(out)
