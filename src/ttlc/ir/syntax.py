"""Syntax elements: the building blocks of an instruction's textual form.

Each entry of the instruction table (``ttlc.ir.ops``) spells its operand syntax as a
sequence of these elements.  An element knows how to parse itself into a partially
built instruction and how to print itself from a finished one, so the parser and
the printer are each one generic loop over the table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .core import Instruction, Value


class ParseState:
    """What the parser has collected for one instruction so far."""

    def __init__(self, opcode: str):
        self.opcode = opcode
        self.slots: dict = {}
        self.attrs: dict = {}
        self.attr_locs: dict = {}
        self.result_types: list = []
        self.result_type_locs: list = []
        #: region argument names (with locations) per declaring element, in order
        self.arg_names: List[Tuple[str, Any]] = []
        self.arg_groups: dict = {}
        self.regions: list = []
        #: end of the instruction's header: the last token before its first region
        self.header_end = None


class Element:
    """One piece of syntax."""

    def parse(self, p, st: ParseState) -> None:
        raise NotImplementedError

    def print(self, pr, inst: Instruction) -> str:
        raise NotImplementedError

    def starts_with(self) -> Optional[str]:
        """The literal token this element must start with, if any (for Optional)."""
        return None


@dataclass
class Lit(Element):
    """A fixed token such as ``,`` ``[`` ``->`` or a keyword such as ``init``."""

    text: str
    #: printed form (spacing around the token); defaults to the text itself
    spelling: Optional[str] = None
    #: other accepted spellings (e.g. ``in`` for ``=`` in cooperative_matrix_apply)
    aliases: Tuple[str, ...] = ()

    def parse(self, p, st):
        if self.aliases:
            p.expect_one((self.text,) + self.aliases)
        else:
            p.expect(self.text)

    def print(self, pr, inst):
        return self.spelling if self.spelling is not None else self.text

    def starts_with(self):
        return self.text


@dataclass
class Opnd(Element):
    """A single SSA value operand bound to a slot."""

    slot: str
    #: the operand is a memref (or group) whose memory the instruction may access: its
    #: table entry declares what it does with it (``OpDef.effects``)
    memory: bool = False

    def parse(self, p, st):
        st.slots[self.slot] = p.parse_value_use()

    def print(self, pr, inst):
        return pr.value(inst.slots[self.slot])


@dataclass
class OpndList(Element):
    """A comma-separated, possibly empty list of value operands."""

    slot: str

    def parse(self, p, st):
        values = []
        if p.peek_kind() == "local":
            values.append(p.parse_value_use())
            while p.accept(","):
                values.append(p.parse_value_use())
        st.slots[self.slot] = values

    def print(self, pr, inst):
        return ",".join(pr.value(v) for v in inst.slots[self.slot])


@dataclass
class CommaValues(OpndList):
    """Like OpndList but printed with a space after each comma (yield, lists in headers)."""

    def print(self, pr, inst):
        return ", ".join(pr.value(v) for v in inst.slots[self.slot])


@dataclass
class Int(Element):
    """An integer constant stored in ``attrs[slot]``."""

    slot: str

    def parse(self, p, st):
        st.attrs[self.slot], st.attr_locs[self.slot] = p.parse_integer()

    def print(self, pr, inst):
        return str(inst.attrs[self.slot])


@dataclass
class IntList(Element):
    """A comma-separated list of integer constants stored in ``attrs[slot]``."""

    slot: str

    def parse(self, p, st):
        first, loc = p.parse_integer()
        values = [first]
        while p.accept(","):
            values.append(p.parse_integer()[0])
        st.attrs[self.slot] = values
        st.attr_locs[self.slot] = loc

    def print(self, pr, inst):
        return ",".join(str(v) for v in inst.attrs[self.slot])


@dataclass
class Result(Element):
    """The single result type after the colon."""

    def parse(self, p, st):
        t, loc = p.parse_type_with_loc()
        st.result_types.append(t)
        st.result_type_locs.append(loc)

    def print(self, pr, inst):
        return str(inst.results[0].type)


@dataclass
class ResultTypes(Element):
    """A parenthesised, possibly empty list of result types: ``(i32,f32)``."""

    def parse(self, p, st):
        p.expect("(")
        if not p.peek_is(")"):
            while True:
                t, loc = p.parse_type_with_loc()
                st.result_types.append(t)
                st.result_type_locs.append(loc)
                if not p.accept(","):
                    break
        p.expect(")")

    def print(self, pr, inst):
        return "(" + ",".join(str(r.type) for r in inst.results) + ")"


@dataclass
class Args(Element):
    """Region arguments declared in the header: ``%i`` or ``%i,%j``.

    ``count`` says how many there are when printing: a number, or the name of an
    operand slot whose length gives it.
    """

    group: str
    count: Union[int, str] = 1

    def parse(self, p, st):
        names = [p.parse_local_name()]
        if self.count != 1:
            while p.accept(","):
                names.append(p.parse_local_name())
        st.arg_groups[self.group] = (len(st.arg_names), len(names))
        st.arg_names.extend(names)

    def size(self, inst: Instruction) -> int:
        return self.count if isinstance(self.count, int) else len(inst.slots[self.count])

    def print(self, pr, inst):
        start = inst.opdef.arg_offset(inst, self.group)
        args = inst.regions[0].args
        # the last name list also prints any surplus arguments (invalid IR, which the
        # verifier reports), so that every argument used in the region has its name
        end = len(args) if inst.opdef.arg_elements[-1] is self else start + self.size(inst)
        return ",".join(pr.define_region_arg(a) for a in args[start:end])


@dataclass
class InitList(Element):
    """Loop-carried values: ``%acc=%init, ...`` declares region arguments and operands."""

    group: str
    slot: str

    def parse(self, p, st):
        names, values = [], []
        while True:
            names.append(p.parse_local_name())
            p.expect("=")
            values.append(p.parse_value_use())
            if not p.accept(","):
                break
        st.arg_groups[self.group] = (len(st.arg_names), len(names))
        st.arg_names.extend(names)
        st.slots[self.slot] = values

    def print(self, pr, inst):
        start = inst.opdef.arg_offset(inst, self.group)
        args = inst.regions[0].args[start:start + len(inst.slots[self.slot])]
        return ",".join(pr.define_region_arg(a) + "=" + pr.value(v)
                        for a, v in zip(args, inst.slots[self.slot]))


@dataclass
class RegionEl(Element):
    """A region in braces. ``kind`` is "spmd" for regions that open SPMD code, "inherit"
    for regions that have the kind of the region around the instruction."""

    kind: str = "inherit"
    #: position of this region among the instruction's regions
    index: int = 0

    def parse(self, p, st):
        st.regions.append(p.parse_region_for(st, self))

    def print(self, pr, inst):
        return " " + pr.region(inst.regions[self.index])

    def starts_with(self):
        return "{"


@dataclass
class DictAttr(Element):
    """An attribute dictionary ``{name=value, ...}`` stored in ``attrs[slot]``."""

    slot: str

    def parse(self, p, st):
        st.attrs[self.slot], st.attr_locs[self.slot] = p.parse_dictionary()

    def print(self, pr, inst):
        return pr.dictionary(inst.attrs[self.slot])

    def starts_with(self):
        return "{"


@dataclass
class ConstantLiteral(Element):
    """The literal of ``constant``: bool, integer, float or ``[re, im]``."""

    slot: str = "value"

    def parse(self, p, st):
        st.attrs[self.slot], st.attr_locs[self.slot] = p.parse_constant_literal()

    def print(self, pr, inst):
        return pr.constant(inst.attrs[self.slot], inst.results[0].type)


@dataclass
class IntOrValue(Element):
    """Helper for mixed lists: an integer constant or an SSA value."""

    @staticmethod
    def parse_one(p):
        if p.peek_kind() == "local":
            return p.parse_value_use()
        return p.parse_integer()[0]

    @staticmethod
    def print_one(pr, x):
        return pr.value(x) if isinstance(x, Value) else str(x)


@dataclass
class Slices(Element):
    """The index-or-slice list of subview: entries ``offset`` or ``offset:size``.

    Stored as a list of (offset, size) pairs in ``slots[slot]``, each an int or a Value;
    a plain index is stored with size 0 and printed back without the size.
    """

    slot: str

    def parse(self, p, st):
        entries = []
        if not p.peek_is("]"):
            while True:
                offset = IntOrValue.parse_one(p)
                size: Any = IntOrValue.parse_one(p) if p.accept(":") else 0
                entries.append((offset, size))
                if not p.accept(","):
                    break
        st.slots[self.slot] = entries

    def print(self, pr, inst):
        parts = []
        for offset, size in inst.slots[self.slot]:
            text = IntOrValue.print_one(pr, offset)
            if not (isinstance(size, int) and size == 0):
                text += ":" + IntOrValue.print_one(pr, size)
            parts.append(text)
        return ",".join(parts)


@dataclass
class ExpandShape(Element):
    """The shape of expand after ``->``: integers or values separated by ``x``."""

    slot: str

    def parse(self, p, st):
        entries = [IntOrValue.parse_one(p)]
        while p.accept("x"):
            entries.append(IntOrValue.parse_one(p))
        st.slots[self.slot] = entries

    def print(self, pr, inst):
        entries = inst.slots[self.slot]
        # "%ax2" would read as one name: values need spaces around the x
        sep = " x " if any(isinstance(e, Value) for e in entries) else "x"
        return sep.join(IntOrValue.print_one(pr, e) for e in entries)


@dataclass
class Optional_(Element):
    """Elements that are present or absent together.

    Parsing: present when the next token is the first element's literal.
    Printing: present when ``present(inst)`` says so.
    """

    elements: Sequence[Element]
    present: Callable[[Instruction], bool]

    def parse(self, p, st):
        if p.peek_is(self.elements[0].starts_with()):
            for e in self.elements:
                e.parse(p, st)

    def print(self, pr, inst):
        if not self.present(inst):
            return ""
        return "".join(e.print(pr, inst) for e in self.elements)

    def starts_with(self):
        return self.elements[0].starts_with()


def flatten(elements: Sequence[Element]):
    """All elements, with optional groups opened up, in order."""
    for e in elements:
        if isinstance(e, Optional_):
            yield from flatten(e.elements)
        else:
            yield e
