"""Lexer: program text to tokens with source ranges (spec section "Core rules").

Shapes are written without spaces (``memref<f32x4x?>``, ``expand %0[1->2x8]``), so
a scalar type name or a number directly followed by ``x`` ends before the ``x``,
and an ``x`` followed by a digit is a token of its own.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import List

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


@dataclass
class Token:
    kind: str  # word, local, global, int, float, string, punct, eof
    text: str
    loc: Location
    #: the parsed value for int / float tokens and the name for local / global
    value: object = None

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        return f"'{self.text}'"


def _error(line: int, col: int, end_col: int, message: str) -> CompileError:
    return CompileError([Diagnostic(Location(line, col, line, end_col), message)])


def tokenize(text: str) -> List[Token]:
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
                raise _error(line, col, col, f"expected an identifier after '{ch}'")
            emit("local" if ch == "%" else "global", 1 + len(m.group()), m.group())
            continue
        if ch == '"':
            end = pos + 1
            while end < n and text[end] != '"':
                c = text[end]
                if not (" " <= c <= "~"):
                    raise _error(line, col, end - line_start + 1,
                                 "unterminated string or character not allowed in a string "
                                 f"({_char_name(c)})")
                end += 1
            if end >= n:
                raise _error(line, col, end - line_start, "unterminated string")
            emit("string", end + 1 - pos, text[pos + 1:end])
            continue
        if text.startswith(_PUNCT2, pos):
            emit("punct", 2)
            continue
        m = _NUMBER.match(text, pos)
        if m and (m.group("float") or m.group("int") or m.group("special")):
            if m.group("int") is not None:
                emit("int", len(m.group()), int(m.group()))
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
        raise _error(line, col, col, f"unexpected character {_char_name(ch)}")
    col = pos - line_start + 1
    tokens.append(Token("eof", "", Location(line, col, line, col)))
    return tokens


def _char_name(c: str) -> str:
    if c == "\0":
        return "NUL"
    if " " < c <= "~":
        return repr(c)
    return f"U+{ord(c):04X}"


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
