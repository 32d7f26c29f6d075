"""Lexer: program text to tokens with source ranges (spec section "Core rules").

Shapes are written without spaces (``memref<f32x4x?>``, ``expand %0[1->2x8]``), so
a scalar type name or a number directly followed by ``x`` ends before the ``x``,
and an ``x`` followed by a digit is a token of its own.
"""
from __future__ import annotations

import math
import re
from bisect import bisect_right
from itertools import accumulate
from typing import List, Tuple

from ..diagnostics import CompileError, Diagnostic
from ..ir.core import Location

_SCALAR_PREFIXES = ("index", "bf16", "i16", "i32", "i64", "f16", "f32", "f64", "c32", "c64", "i8")

_HEX_FLOAT = r"0[xX](?:[0-9a-fA-F]*\.[0-9a-fA-F]+(?:[pP][+-]?[0-9]+)?|[0-9a-fA-F]+\.(?:[pP][+-]?[0-9]+)?|[0-9a-fA-F]+[pP][+-]?[0-9]+)"
_DEC_FLOAT = r"(?:[0-9]*\.[0-9]+|[0-9]+\.)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
_NUMBER = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<float>" + _HEX_FLOAT + "|" + _DEC_FLOAT + r")|(?P<int>[0-9]+)"
    r"|(?P<special>inf|nan)(?![A-Za-z0-9_]))")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[0-9]+")
_PUNCT2 = ("->", "<=")
_PUNCT1 = "()[]{}<>,=:.?x"


class Token:
    """One token: ``kind`` is word, local, global, int, float, string, punct or eof;
    ``value`` is the parsed value of int / float tokens, the name of local / global ones
    and the contents of strings.

    The lexer's fast path passes ``loc`` as a pair (offset in the text, offsets of the
    line starts); the Location is computed when first asked for (many tokens never are).
    """

    __slots__ = ("kind", "text", "_loc", "value")

    def __init__(self, kind: str, text: str, loc, value: object = None):
        self.kind = kind
        self.text = text
        self._loc = loc
        self.value = value

    @property
    def loc(self) -> Location:
        loc = self._loc
        if loc.__class__ is tuple:
            offset, line_starts = loc
            line = bisect_right(line_starts, offset)
            col = offset - line_starts[line - 1] + 1
            loc = self._loc = Location(line, col, line, col + len(self.text) - 1)
        return loc

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        return f"'{self.text}'"

    def __eq__(self, other) -> bool:
        if other.__class__ is not Token:
            return NotImplemented
        return (self.kind, self.text, self.loc, self.value) == \
            (other.kind, other.text, other.loc, other.value)

    __hash__ = None  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.loc!r}, {self.value!r})"


#: every token of valid text, in the order the slow path tries them, each with the blanks
#: and line breaks after it; anything else is "bad" and sends the whole text through the slow path, which
#: reports the error.  No group nests inside another: ``lastindex`` names the token kind.
_FAST = re.compile(
    r"(?:(?P<skip>[ \t\r\n]+|;[^\n]*)"
    r"|(?P<local>%(?:[A-Za-z][A-Za-z0-9_]*|[0-9]+))"
    r"|(?P<global>@(?:[A-Za-z][A-Za-z0-9_]*|[0-9]+))"
    r'|(?P<string>"[ !#-~]*")'
    r"|(?P<punct2>->|<=)"
    r"|(?P<float>[+-]?(?:" + _HEX_FLOAT + "|" + _DEC_FLOAT + r"|(?:inf|nan)(?![A-Za-z0-9_])))"
    r"|(?P<int>[+-]?[0-9]+)"
    # a scalar type directly followed by a shape: f32x4, f32x?
    r"|(?P<scalar>(?:" + "|".join(_SCALAR_PREFIXES) + r")(?=x(?:[0-9]|(?![A-Za-z0-9_]))))"
    r"|(?P<x>x(?![A-Za-z_]))"
    r"|(?P<word>[A-Za-z][A-Za-z0-9_]*)"
    r"|(?P<punct>[()\[\]{}<>,=:.?])"
    r"|(?P<bad>[\s\S]))[ \t\r\n]*")
_KIND = {index: name for name, index in _FAST.groupindex.items()}
_KIND = tuple(_KIND.get(i) for i in range(max(_KIND) + 1))


#: a scanned token: (kind, text, value, where), ``where`` being the offset of its first
#: character in the text, or its Location
RawToken = Tuple[str, str, object, object]


def scan(text: str) -> Tuple[List[RawToken], List[int], Location]:
    """The tokens of text as plain tuples (what the parser works on), the offsets of the
    line starts, and the location of the end of input; raises CompileError on bad input."""
    # offsets of the first character of each line, for the locations
    line_starts = [0]
    line_starts.extend(accumulate(map(_plus_one, map(len, text.split("\n")))))
    tokens: List[RawToken] = []
    append = tokens.append
    kinds = _KIND
    for m in _FAST.finditer(text):
        index = m.lastindex
        kind = kinds[index]
        if kind == "word" or kind == "scalar":
            append(("word", m.group(index), None, m.start()))
        elif kind == "punct" or kind == "punct2" or kind == "x":
            append(("punct", m.group(index), None, m.start()))
        elif kind == "local" or kind == "global":
            tok = m.group(index)
            append((kind, tok, tok[1:], m.start()))
        elif kind == "skip":
            continue
        elif kind == "int":
            tok = m.group(index)
            append(("int", tok, _int_value(tok), m.start()))
        elif kind == "string":
            tok = m.group(index)
            append(("string", tok, tok[1:-1], m.start()))
        elif kind == "float":
            try:
                value = _float_value(_NUMBER.match(text, m.start()))
            except OverflowError:
                return _scan_slow(text)  # reports the error
            append(("float", m.group(index), value, m.start()))
        else:
            return _scan_slow(text)  # reports the error
    if tokens:
        last = location(tokens[-1], line_starts)
        eof = Location(last.end_line, last.end_col + 1, last.end_line, last.end_col + 1)
    else:
        eof = Location(1, 1, 1, 1)
    return tokens, line_starts, eof


def location(tok: RawToken, line_starts: List[int]) -> Location:
    """The source range of a scanned token."""
    offset = tok[3]
    if offset.__class__ is not int:
        return offset
    line = bisect_right(line_starts, offset)
    col = offset - line_starts[line - 1] + 1
    return Location(line, col, line, col + len(tok[1]) - 1)


def _scan_slow(text: str) -> Tuple[List[RawToken], List[int], Location]:
    tokens = _tokenize_slow(text)
    eof = tokens.pop()
    return [(t.kind, t.text, t.value, t.loc) for t in tokens], [0], eof.loc


def tokenize(text: str) -> List[Token]:
    """The tokens of text, ending with an eof token; raises CompileError on bad input."""
    raw, line_starts, eof = scan(text)
    tokens = [Token(kind, tok, (where, line_starts) if where.__class__ is int else where, value)
              for kind, tok, value, where in raw]
    tokens.append(Token("eof", "", eof))
    return tokens


_plus_one = (1).__add__


def _error(line: int, col: int, end_col: int, message: str) -> CompileError:
    return CompileError([Diagnostic(Location(line, col, line, end_col), message)])


def _tokenize_slow(text: str) -> List[Token]:
    """Character by character, with a precise error for every kind of bad input."""
    tokens: List[Token] = []
    pos, line, line_start, n = 0, 1, 0, len(text)
    while pos < n:
        ch = text[pos]
        col = pos - line_start + 1
        if ch == "\n":
            pos += 1
            line, line_start = line + 1, pos
            continue
        if ch in " \t\r":
            pos += 1
            continue
        if ch == ";":
            end = text.find("\n", pos)
            pos = n if end < 0 else end
            continue

        def emit(kind, length, value=None):
            nonlocal pos
            tok_text = text[pos:pos + length]
            tokens.append(Token(kind, tok_text, Location(line, col, line, col + length - 1), value))
            pos += length

        if ch in "%@":
            m = _IDENT.match(text, pos + 1)
            if not m:
                if pos + 1 < n and text[pos + 1] > "~":
                    raise _error(line, col + 1, col + 1, f"non-ASCII character "
                                 f"{_char_name(text[pos + 1])} is only allowed in comments")
                raise _error(line, col, col, f"expected an identifier after '{ch}'")
            emit("local" if ch == "%" else "global", 1 + len(m.group()), m.group())
            continue
        if ch == '"':
            end = pos + 1
            while end < n and text[end] != '"':
                c = text[end]
                if c == "\n" or (c == "\r" and text.startswith("\n", end + 1)):
                    raise _error(line, col, end - line_start,
                                 "unterminated string (missing closing '\"' before the end of the line)")
                if not (" " <= c <= "~"):
                    bad = end - line_start + 1
                    raise _error(line, bad, bad, f"character {_char_name(c)} is not allowed in a "
                                 "string (only printable ASCII characters are)")
                end += 1
            if end >= n:
                raise _error(line, col, end - line_start,
                             "unterminated string (missing closing '\"' before the end of the input)")
            emit("string", end + 1 - pos, text[pos + 1:end])
            continue
        if text.startswith(_PUNCT2, pos):
            emit("punct", 2)
            continue
        m = _NUMBER.match(text, pos)
        if m and (m.group("float") or m.group("int") or m.group("special")):
            if m.group("int") is not None:
                emit("int", len(m.group()), _int_value(m.group()))
            else:
                try:
                    value = _float_value(m)
                except OverflowError:
                    raise _error(line, col, col + len(m.group()) - 1,
                                 "floating-point constant out of the range of double precision")
                emit("float", len(m.group()), value)
            continue
        m = _WORD.match(text, pos)
        if m:
            word = m.group()
            if word[0] == "x" and len(word) > 1 and word[1].isdigit():
                emit("punct", 1)
                continue
            for prefix in _SCALAR_PREFIXES:
                if word.startswith(prefix) and word[len(prefix):len(prefix) + 1] == "x" \
                        and (len(word) == len(prefix) + 1 or word[len(prefix) + 1].isdigit()):
                    word = prefix
                    break
            if word == "x":
                emit("punct", 1)
            else:
                emit("word", len(word))
            continue
        if ch in _PUNCT1 or ch in "+-":
            if ch in "+-":
                raise _error(line, col, col, f"unexpected '{ch}': a sign must be followed by a number")
            emit("punct", 1)
            continue
        if ch > "~":
            raise _error(line, col, col, f"non-ASCII character {_char_name(ch)} is only allowed "
                         "in comments")
        raise _error(line, col, col, f"unexpected character {_char_name(ch)}")
    # end of input: just after the last token, so that diagnostics show a source line
    if tokens:
        last = tokens[-1].loc
        eof = Location(last.end_line, last.end_col + 1, last.end_line, last.end_col + 1)
    else:
        eof = Location(1, 1, 1, 1)
    tokens.append(Token("eof", "", eof))
    return tokens


def _char_name(c: str) -> str:
    if c == "\0":
        return "NUL"
    if " " < c <= "~":
        return repr(c)
    return f"U+{ord(c):04X}"


def _int_value(text: str) -> int:
    """The integer a literal spells.  Literals longer than any 64-bit value are not
    converted (Python refuses huge int strings, and it would be slow): they become 2**64
    with their sign, which the parser reports as out of range."""
    digits = text.lstrip("+-").lstrip("0")
    sign = -1 if text.startswith("-") else 1
    if len(digits) > 20:
        return sign * 2**64
    return sign * int(digits or "0")


def _float_value(m: "re.Match") -> float:
    sign = -1.0 if m.group("sign") == "-" else 1.0
    special = m.group("special")
    if special:
        return sign * float(special)
    body = m.group("float")
    try:
        value = float.fromhex(body) if body[:2] in ("0x", "0X") else float(body)
    except (OverflowError, ValueError):
        value = math.inf
    if math.isinf(value):
        raise OverflowError(body)
    return sign * value
