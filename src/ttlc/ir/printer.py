"""The canonical printer.

Named values keep their names; unnamed ones are numbered %0, %1, ... per function
in textual order.  A name that would clash with a visible value (possible after
passes copy code) gets a suffix.  Printing is a fixed point: parsing the output and
printing it again gives the same text.
"""
from __future__ import annotations

from typing import Dict, List

from .constants import format_constant
from .core import Function, Instruction, Program, Region, Value
from .ops import KNOWN_ATTRIBUTE_NAMES, OPS

INDENT = "    "


class Printer:
    def __init__(self):
        self.names: Dict[Value, str] = {}
        self.scopes: List[set] = [set()]
        self.counter = 0
        self.indent = 0
        #: when a dict, one-line texts of every printed instruction (regions as {...})
        self.headers = None
        #: names of the region arguments declared so far in the header being printed
        self.header: set = set()

    # ---- names -----------------------------------------------------------------------
    def _fresh(self, value: Value, taken=()) -> str:
        """A name for value: its hint unless visible here or in ``taken``, else numbered."""
        name = value.name
        if name is None or name.isdigit():
            name = str(self.counter)
            self.counter += 1
            return name
        # membership per scope: building the union for every value would be quadratic
        def visible(n: str) -> bool:
            return n in taken or any(n in scope for scope in self.scopes)

        if visible(name):
            k = 1
            while visible(f"{name}_{k}"):
                k += 1
            name = f"{name}_{k}"
        return name

    def define(self, value: Value, visible_here: bool = True) -> str:
        """Name a defined value; region arguments become visible only inside their region."""
        name = self._fresh(value)
        self.names[value] = name
        if visible_here:
            self.scopes[-1].add(name)
        return "%" + name

    def define_region_arg(self, value: Value) -> str:
        # the arguments of one header share a scope: hints must not repeat among them
        name = self._fresh(value, self.header)
        self.names[value] = name
        self.header.add(name)
        return "%" + name

    def value(self, value: Value) -> str:
        name = self.names.get(value)
        if name is None:  # a use of a value not defined in the printed text (builder misuse)
            name = f"<undefined {value.name or '?'}>"
        return "%" + name

    # ---- pieces ----------------------------------------------------------------------
    def dictionary(self, attrs: dict) -> str:
        return format_dictionary(attrs)

    def constant(self, value, type) -> str:
        return format_constant(value)

    def region(self, region: Region) -> str:
        self.scopes.append(set())
        for a in region.args:  # already named by the header; make them visible here
            self.scopes[-1].add(self.names.get(a, ""))
        self.indent += 1
        lines = [self.instruction(inst) for inst in region.instructions]
        self.indent -= 1
        self.scopes.pop()
        body = "".join(INDENT * (self.indent + 1) + line + "\n" for line in lines)
        return "{\n" + body + INDENT * self.indent + "}"

    def instruction(self, inst: Instruction) -> str:
        opdef = OPS[inst.opcode]
        # results come first in the text, but are visible only after the instruction
        result_names: List[str] = []
        for r in inst.results:
            result_names.append(self._fresh(r, result_names))
            self.names[r] = result_names[-1]
        outer_header, self.header = self.header, set()
        text = ""
        if result_names:
            text = ", ".join("%" + n for n in result_names) + " = "
        text += inst.opcode + opdef.print_modifiers(inst.modifiers)
        body = "".join(e.print(self, inst) for e in opdef.syntax)
        self.header = outer_header
        if body:
            text += body if body.startswith(" ") else " " + body
        for n in result_names:
            self.scopes[-1].add(n)
        if self.headers is not None:
            first = text.split("\n", 1)[0]
            self.headers[inst] = first[:-1] + "{...}" if inst.regions and first.endswith("{") else first
        return text

    def function(self, func: Function) -> str:
        return self.function_header(func) + " " + self.region(func.body)

    def function_header(self, func: Function) -> str:
        """``func @name(%arg: type {attrs}, ...) attributes{...}`` (starts a new scope)."""
        self.counter = 0
        self.scopes = [set()]
        params = []
        for arg in func.args:
            text = self.define(arg.value) + ": " + str(arg.value.type)
            if arg.attrs:
                text += " " + format_dictionary(arg.attrs)
            params.append(text)
        head = f"func @{func.name}(" + ", ".join(params) + ")"
        if func.attrs:
            head += " attributes" + format_dictionary(func.attrs)
        return head


def format_attribute(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return format_dictionary(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_attribute(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value + '"'
    raise TypeError(f"not an attribute value: {value!r}")


def _format_name(name: str) -> str:
    return name if name in KNOWN_ATTRIBUTE_NAMES else '"' + name + '"'


def format_dictionary(attrs: dict) -> str:
    return "{" + ", ".join(_format_name(k) + "=" + format_attribute(v) for k, v in attrs.items()) + "}"


def print_program(program: Program) -> str:
    printer = Printer()
    return "\n".join(printer.function(f) for f in program.functions) + ("\n" if program.functions else "")


def print_function(func: Function) -> str:
    return Printer().function(func) + "\n"


def signature(func: Function) -> str:
    """A function's first line without its body: its name, parameters and attributes."""
    return Printer().function_header(func)
