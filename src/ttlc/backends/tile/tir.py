"""The Tile IR module model: values, operations, blocks, entries, and a builder.

An ``Op`` names its entry of the operation table (``ops.OPS``) and holds its operand groups
and attributes by the names the entry gives them; the printer and the bytecode writer read
the entry to lay them out.  Result types are always given by whoever builds the op (the
translation knows every tile shape), so nothing here infers types.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Union

from .ops import OPS, Type, TileOp


class Value:
    """An SSA value of a Tile IR function."""

    __slots__ = ("type",)

    def __init__(self, type: Type):
        self.type = type

    def __repr__(self) -> str:
        return f"<tile value : {self.type}>"


Group = Union[Value, List[Value], None]


@dataclass
class Block:
    args: List[Value] = field(default_factory=list)
    ops: List["Op"] = field(default_factory=list)


@dataclass
class Op:
    spec: TileOp
    operands: Dict[str, Group]
    attrs: Dict[str, object]
    results: List[Value]
    regions: List[Block] = field(default_factory=list)

    def group(self, name: str) -> List[Value]:
        """The values of an operand group as a list (empty when an optional one is absent)."""
        g = self.operands.get(name)
        if g is None:
            return []
        return list(g) if isinstance(g, list) else [g]

    def present(self, name: str) -> bool:
        """Whether an optional attribute or operand group (a flag bit) is there."""
        if name in self.attrs:
            return bool(self.attrs[name]) if self.attrs[name] is not None else False
        return bool(self.group(name))


@dataclass
class Entry:
    """A kernel (``entry``): arguments and a body ending with ``return``."""

    name: str
    args: List[Value]
    body: Block
    #: of a checked entry, what its error record needs (``checks.Checked``); None unchecked
    checked: object = None


@dataclass
class Module:
    name: str
    entries: List[Entry] = field(default_factory=list)


class Builder:
    """Appends operations to a block; ``block`` switches where they go."""

    def __init__(self, block: Block):
        self.block = block

    def op(self, name: str, results: Sequence[Type] = (), regions: Sequence[Block] = (),
           **parts) -> List[Value]:
        """Append operation `name` with its operand groups and attributes given by their
        table names; returns the result values."""
        spec = OPS[name]
        groups = {g.name for g in spec.operands}
        operands = {k.rstrip("_"): v for k, v in parts.items() if k.rstrip("_") in groups}
        attrs = {k: v for k, v in parts.items() if k.rstrip("_") not in groups}
        unknown = set(attrs) - {a.name for a in spec.attrs}
        assert not unknown, f"{name} has no operand or attribute {sorted(unknown)}"
        for a in spec.attrs:
            if a.name not in attrs and a.default is not None:
                attrs[a.name] = a.default
        values = [Value(t) for t in results]
        self.block.ops.append(Op(spec, operands, attrs, values, list(regions)))
        return values

    def one(self, name: str, result: Type, **parts) -> Value:
        """An operation with one result, returned."""
        return self.op(name, [result], **parts)[0]
