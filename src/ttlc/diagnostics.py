"""Diagnostics: errors that point at source ranges, printed as the command line shows them.

    FILE:LINE.COL-ENDCOL: error: MESSAGE
    <source line>
    <~~~ under the range>

A diagnostic may carry notes (``note:``), e.g. where a value it refers to is defined.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple

from .ir.core import Location


class Diagnostic(tuple):
    """``(line, column, end, message)``; ``end`` is the last column on the last line.

    ``loc`` has the full range and ``notes`` holds ``(Location, message)`` pairs.
    """

    def __new__(cls, loc: Location, message: str, notes: Sequence[Tuple[Location, str]] = ()):
        self = super().__new__(cls, (loc.line, loc.col, loc.end_col, message))
        self.loc = loc
        self.notes = tuple(notes)
        return self

    @property
    def message(self) -> str:
        return self[3]

    def format(self, source: Optional[str] = None, filename: str = "<input>") -> str:
        # split on \n only, as the lexer counts lines (splitlines also breaks at \f, \x85, ...)
        lines = source.split("\n") if source is not None else None
        out = [_format_one(self.loc, "error", self.message, lines, filename)]
        out += [_format_one(loc, "note", msg, lines, filename) for loc, msg in self.notes]
        return "\n".join(out)


def _format_one(loc: Location, severity: str, message: str, lines: Optional[List[str]],
                filename: str) -> str:
    text = f"{filename}:{loc}: {severity}: {message}"
    if lines is not None and 1 <= loc.line <= len(lines):
        src = lines[loc.line - 1].replace("\t", " ")
        end = loc.end_col if loc.end_line == loc.line else len(src)
        width = max(1, end - loc.col + 1)
        text += "\n" + src + "\n" + " " * (loc.col - 1) + "~" * width
    return text


class CompileError(Exception):
    """A program is invalid: parsing or verification found one or more errors."""

    def __init__(self, diagnostics: Iterable[Diagnostic], source: Optional[str] = None,
                 filename: str = "<input>"):
        self.diagnostics: List[Diagnostic] = list(diagnostics)
        self.source = source
        self.filename = filename
        super().__init__(self.format())

    def with_source(self, source: Optional[str], filename: str) -> "CompileError":
        """The same error, formatted against the program text it was found in."""
        return CompileError(self.diagnostics, source, filename)

    def format(self) -> str:
        return "\n".join(d.format(self.source, self.filename) for d in self.diagnostics)

    def __str__(self) -> str:
        return self.format()


def error(loc: Location, message: str, notes: Sequence[Tuple[Location, str]] = ()) -> CompileError:
    return CompileError([Diagnostic(loc, message, notes)])


class KernelError(Exception):
    """A kernel did something the language forbids at run time (found by checked
    execution, or an access outside the arrays it was given)."""
