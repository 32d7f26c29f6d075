"""The template preprocessor: ``$name = text`` definitions, ``$name`` uses and ``!calc(...)``.

A template is program text with parameters::

    $dtype = f16                       ; a definition: the rest of the line, expanded now
    $half = !calc($n 2 /)              ; integer arithmetic in reverse Polish notation
    func @k(%a: memref<$dtype x $n>)   ; uses

Definition lines become blank lines and substitutions never add line breaks, so the
expanded program has the template's lines; a column map per line takes every location in
the expanded text back to the template (a substituted token points at its ``$name`` or
``!calc(...)``), so that all later diagnostics show the template's own text.

Definitions given from outside (``-D name=value``, ``defines={...}``) take precedence over
a definition of the same name in the text, which is then the template's default.  Defining
a name twice in the text is an error, as is using a name before it is defined.  Comments
(after ``;``) and strings are left alone.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from typing import Dict, List, Mapping, Optional, Tuple

from ..diagnostics import CompileError, Diagnostic
from ..ir.core import Location

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME_RE = re.compile(_NAME + r"\Z")
_DEFINITION = re.compile(r"[ \t]*\$(" + _NAME + r")[ \t]*=")
#: a use: $name or ${name}, or the start of !calc(
_USE = re.compile(r"\$(?:(" + _NAME + r")|\{(" + _NAME + r")\})|!calc\(|\$")
#: what !calc evaluates: (name, function); integer division and remainder round toward zero
_CALC_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    "%": lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
}
_INT = re.compile(r"[+-]?[0-9]{1,19}\Z")
#: !calc works on the language's integers; longer expansions of one line are refused
_INT_MAX = 2**63 - 1
MAX_LINE = 1 << 22


def needs_preprocessing(text: str) -> bool:
    """Whether text uses the preprocessor at all (the language itself has no ``$`` or ``!``)."""
    return "$" in text or "!calc" in text


class Expansion:
    """The expanded program text and the way back to the template's columns."""

    def __init__(self, template: str):
        self.template = template
        self.lines: List[str] = []
        #: per line: sorted starts (0-based, expanded) of its segments, and for each
        #: segment (expanded start, template start, template end, literal?)
        self._starts: List[List[int]] = []
        self._segments: List[List[Tuple[int, int, int, bool]]] = []

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def add_line(self, pieces: List[Tuple[str, int, int, bool]]) -> None:
        """A line of output from pieces (text, template start, template end, literal?)."""
        out, starts, segments, col = [], [], [], 0
        for text, start, end, literal in pieces:
            if not text:
                continue
            out.append(text)
            starts.append(col)
            segments.append((col, start, end, literal))
            col += len(text)
        self.lines.append("".join(out))
        self._starts.append(starts)
        self._segments.append(segments)

    def column(self, line: int, col: int, at_end: bool) -> int:
        """The template column (1-based) of expanded column col of line."""
        if not 1 <= line <= len(self._segments) or not self._segments[line - 1]:
            return col
        i = bisect_right(self._starts[line - 1], col - 1) - 1
        if i < 0:
            return col
        exp_start, start, end, literal = self._segments[line - 1][i]
        if literal:
            return start + (col - 1 - exp_start) + 1
        return (end if at_end else start) + 1

    def location(self, loc: Location) -> Location:
        """A range in the expanded text as a range of the template."""
        return Location(loc.line, self.column(loc.line, loc.col, False),
                        loc.end_line, max(self.column(loc.end_line, loc.end_col, True), 1))

    def error(self, e: CompileError, filename: str) -> CompileError:
        """An error found in the expanded text, pointing into the template."""
        diags = [Diagnostic(self.location(d.loc), d.message,
                            [(self.location(loc), msg) for loc, msg in d.notes])
                 for d in e.diagnostics]
        return CompileError(diags, self.template, filename)


def check_defines(defines: Optional[Mapping[str, object]]) -> Dict[str, str]:
    """Definitions from outside as text; a bad name or value is a ValueError naming it."""
    result: Dict[str, str] = {}
    for name, value in (defines or {}).items():
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"bad preprocessor name {name!r}: a letter or '_' followed by "
                             "letters, digits or '_'")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TypeError(f"preprocessor definition {name}: expected text or an integer, "
                            f"got {type(value).__name__}")
        text = str(value).strip()
        if "\n" in text or "\r" in text:
            raise ValueError(f"preprocessor definition {name}: the value must be one line")
        result[name] = text
    return result


def preprocess(text: str, defines: Optional[Mapping[str, object]] = None,
               filename: str = "<input>") -> Expansion:
    """Expand a template; raises CompileError (pointing into the template) on errors."""
    given = check_defines(defines)
    values: Dict[str, str] = dict(given)
    defined_at: Dict[str, int] = {}
    exp = Expansion(text)
    try:
        for number, line in enumerate(text.split("\n"), 1):
            code_end = _comment_start(line)
            m = _DEFINITION.match(line, 0, code_end)
            if m:
                name = m.group(1)
                if name in defined_at:
                    raise _error(number, m.start(1), m.end(1),
                                 f"${name} is already defined on line {defined_at[name]}")
                defined_at[name] = number
                if name not in given:
                    pieces = _expand(line, m.end(), code_end, number, values)
                    values[name] = "".join(p[0] for p in pieces).strip()
                exp.add_line([])
                continue
            pieces = _expand(line, 0, code_end, number, values)
            pieces.append((line[code_end:], code_end, len(line) - 1, True))
            exp.add_line(pieces)
    except CompileError as e:
        raise CompileError(e.diagnostics, text, filename) from None
    return exp


def _comment_start(line: str) -> int:
    """Where the comment of a line starts (a ';' outside a string), or its length."""
    in_string = False
    for i, c in enumerate(line):
        if c == '"':
            in_string = not in_string
        elif c == ";" and not in_string:
            return i
    return len(line)


def _error(line: int, start: int, end: int, message: str) -> CompileError:
    """An error on the 0-based half-open column range [start, end) of a line."""
    return CompileError([Diagnostic(Location(line, start + 1, line, max(end, start + 1)),
                                    message)])


def _expand(line: str, pos: int, end: int, number: int,
            values: Dict[str, str]) -> List[Tuple[str, int, int, bool]]:
    """The pieces of line[pos:end] after substitution: (text, template start, template
    end (0-based, inclusive), literal?)."""
    pieces = []
    while pos < end:
        quote = line.find('"', pos, end)
        if quote >= 0:  # strings are left alone
            close = line.find('"', quote + 1, end)
            close = end - 1 if close < 0 else close
            pieces += _expand(line, pos, quote, number, values)
            pieces.append((line[quote:close + 1], quote, close, True))
            pos = close + 1
            continue
        m = _USE.search(line, pos, end)
        if m is None:
            pieces.append((line[pos:end], pos, end - 1, True))
            break
        pieces.append((line[pos:m.start()], pos, m.start() - 1, True))
        if m.group(0) == "!calc(":
            close = line.find(")", m.end(), end)
            if close < 0:
                raise _error(number, m.start(), end, "!calc( is not closed by ')' on its line")
            value = _calc(line, m.end(), close, number, values)
            pieces.append((str(value), m.start(), close, False))
            pos = close + 1
            continue
        name = m.group(1) or m.group(2)
        if name is None:
            raise _error(number, m.start(), m.end(),
                         "'$' must be followed by a name ($name or ${name})")
        if name not in values:
            raise _error(number, m.start(), m.end(), f"${name} is not defined (define it with "
                         f"'${name} = ...' before its use, or -D {name}=...)")
        pieces.append((values[name], m.start(), m.end() - 1, False))
        pos = m.end()
        if sum(len(p[0]) for p in pieces) > MAX_LINE:
            raise _error(number, m.start(), m.end(), f"the expansion of this line is longer "
                         f"than {MAX_LINE} characters")
    return pieces


def _calc(line: str, start: int, end: int, number: int, values: Dict[str, str]) -> int:
    """Evaluate the reverse-Polish expression line[start:end]."""
    stack: List[int] = []
    for m in re.finditer(r"\S+", line[start:end]):
        word, a, b = m.group(), start + m.start(), start + m.end()
        if word in _CALC_OPS:
            if len(stack) < 2:
                raise _error(number, a, b, f"!calc: '{word}' needs two operands before it")
            y, x = stack.pop(), stack.pop()
            if word in "/%" and y == 0:
                raise _error(number, a, b, f"!calc: division by zero ({x} {y} {word})")
            value = _CALC_OPS[word](x, y)
            if abs(value) > _INT_MAX:
                raise _error(number, a, b, f"!calc: {x} {y} {word} is out of the range of "
                             "64-bit integers")
            stack.append(value)
            continue
        if word.startswith("$"):
            use = _USE.match(word)
            name = use and (use.group(1) or use.group(2))
            if not name or use.end() != len(word):
                raise _error(number, a, b, f"!calc: bad name {word!r}")
            if name not in values:
                raise _error(number, a, b, f"${name} is not defined")
            word = values[name]
        if not _INT.match(word) or abs(int(word)) > _INT_MAX:
            raise _error(number, a, b, f"!calc: {word[:40]!r} is not a 64-bit integer or one "
                         f"of {' '.join(_CALC_OPS)}")
        stack.append(int(word))
    if len(stack) != 1:
        raise _error(number, start, end, f"!calc: the expression leaves {len(stack)} values, "
                     "expected one")
    return stack[0]
