"""The in-memory IR: programs, functions, regions, instructions and SSA values.

An instruction is generic: its opcode names an entry of the instruction table
(``ttlc.ir.ops``), which says how its operands, attributes, results and regions
are laid out.  Everything that walks the IR (printer, verifier, passes) reads that
table instead of knowing every instruction by heart.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .types import Type


class Location:
    """A source range: 1-based line and column of the first and last character.

    Immutable by convention and compared by value (a hand-written value class rather
    than a frozen dataclass: the parser makes one per token it keeps, and this is
    four times faster to construct).
    """

    __slots__ = ("line", "col", "end_line", "end_col")

    def __init__(self, line: int, col: int, end_line: int, end_col: int):
        self.line = line
        self.col = col
        self.end_line = end_line
        self.end_col = end_col

    def _key(self) -> Tuple[int, int, int, int]:
        return (self.line, self.col, self.end_line, self.end_col)

    def __eq__(self, other) -> bool:
        if other.__class__ is not Location:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Location(line={self.line}, col={self.col}, end_line={self.end_line}, "
                f"end_col={self.end_col})")

    def __reduce__(self):
        return (Location, self._key())

    def span(self, other: "Location") -> "Location":
        return Location(self.line, self.col, other.end_line, other.end_col)

    def __str__(self) -> str:
        if self.line == self.end_line:
            if self.col == self.end_col:
                return f"{self.line}.{self.col}"
            return f"{self.line}.{self.col}-{self.end_col}"
        return f"{self.line}.{self.col}-{self.end_line}.{self.end_col}"


UNKNOWN_LOCATION = Location(0, 0, 0, 0)


class Value:
    """An SSA value: a function argument, a region argument or an instruction result."""

    __slots__ = ("type", "name", "loc", "owner")

    def __init__(self, type: Type, name: Optional[str] = None, loc: Location = UNKNOWN_LOCATION):
        self.type = type
        #: name hint from the source or builder; numeric names are renumbered on print
        self.name = name
        self.loc = loc
        #: the Instruction producing this value, or None for arguments
        self.owner: Optional["Instruction"] = None

    def __repr__(self) -> str:
        return f"<Value %{self.name if self.name is not None else '?'} : {self.type}>"


class Region:
    """An ordered list of instructions with optional region arguments."""

    __slots__ = ("instructions", "args", "loc")

    def __init__(self, instructions: Optional[List["Instruction"]] = None,
                 args: Optional[List[Value]] = None, loc: Location = UNKNOWN_LOCATION):
        self.instructions: List[Instruction] = instructions if instructions is not None else []
        self.args: List[Value] = args if args is not None else []
        self.loc = loc

    def append(self, inst: "Instruction") -> "Instruction":
        self.instructions.append(inst)
        return inst

    def walk(self) -> Iterator["Instruction"]:
        """All instructions of this region and of nested regions, in pre-order."""
        for inst in self.instructions:
            yield inst
            for region in inst.regions:
                yield from region.walk()


class Instruction:
    """One instruction: opcode, modifiers, operand slots, attributes, results, regions.

    ``modifiers`` holds the dotted suffixes (``gemm.t.n`` -> ``{"ta": "t", "tb": "n"}``)
    keyed by the modifier slot names of the instruction's table entry.  ``slots`` maps
    the table's operand slot names to a Value, a list of Values, or a structured list
    mixing Values and integers (subview slices, expand shapes).  ``attrs`` holds what
    is not an SSA value (integers, constants, attribute dictionaries).
    """

    __slots__ = ("opcode", "modifiers", "slots", "attrs", "results", "regions", "loc")

    def __init__(self, opcode: str, slots: Optional[Dict[str, Any]] = None,
                 results: Optional[List[Value]] = None, regions: Optional[List[Region]] = None,
                 modifiers: Optional[Dict[str, Any]] = None, attrs: Optional[Dict[str, Any]] = None,
                 loc: Location = UNKNOWN_LOCATION):
        self.opcode = opcode
        self.modifiers: Dict[str, Any] = modifiers or {}
        self.slots: Dict[str, Any] = slots or {}
        self.attrs: Dict[str, Any] = attrs or {}
        self.results: List[Value] = results or []
        self.regions: List[Region] = regions or []
        self.loc = loc
        for r in self.results:
            r.owner = self

    @property
    def opdef(self):
        from .ops import OPS

        return OPS[self.opcode]

    @property
    def operands(self) -> List[Value]:
        """Every SSA value the instruction uses, in slot order."""
        out: List[Value] = []
        for slot in self.opdef.slots:
            _collect_values(self.slots.get(slot), out)
        return out

    def modifier(self, slot: str) -> Any:
        """A modifier's value, or its default when it was not written."""
        for mod in self.opdef.modifiers:
            if mod.slot == slot:
                return self.modifiers.get(slot, mod.unset)
        raise KeyError(slot)

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self.opcode
        return self.results[0]

    def __repr__(self) -> str:
        return f"<Instruction {self.opcode} at {self.loc}>"


def _collect_values(x: Any, out: List[Value]) -> None:
    if isinstance(x, Value):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _collect_values(y, out)


@dataclass
class Argument:
    """A function parameter: its value and its parameter attributes."""

    value: Value
    attrs: Dict[str, Any] = field(default_factory=dict)
    attrs_loc: Location = UNKNOWN_LOCATION


@dataclass
class Function:
    name: str
    args: List[Argument]
    body: Region
    attrs: Dict[str, Any] = field(default_factory=dict)
    loc: Location = UNKNOWN_LOCATION
    attrs_loc: Location = UNKNOWN_LOCATION

    @property
    def subgroup_size(self) -> Optional[int]:
        sgs = self.attrs.get("subgroup_size")
        return sgs if isinstance(sgs, int) and not isinstance(sgs, bool) else None

    @property
    def work_group_size(self) -> Optional[Tuple[int, int]]:
        wgs = self.attrs.get("work_group_size")
        if isinstance(wgs, list) and len(wgs) == 2 and all(isinstance(w, int) for w in wgs):
            return (wgs[0], wgs[1])
        return None


@dataclass
class Program:
    functions: List[Function] = field(default_factory=list)
    source: Optional[str] = None
    filename: str = "<input>"

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def __str__(self) -> str:
        from .printer import print_program

        return print_program(self)
