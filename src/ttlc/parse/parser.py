"""Recursive-descent parser: tokens to IR (spec sections "Functions" to "Instructions").

The operand syntax of each instruction comes from the instruction table; this module
knows only the shared grammar: functions, regions, types, attributes, constants and
the left-hand side of assignments.  Names are resolved here: a use before its
definition and a redefinition in the same or an enclosing region are errors.
"""
from __future__ import annotations

import gc
from typing import Dict, List, Optional, Tuple

from ..diagnostics import CompileError, Diagnostic, error
from ..ir import syntax as S
from ..ir.constants import canonical, literal_fits
from ..ir.core import Argument, Function, Instruction, Location, Program, Region, Value
from ..ir.ops import ALIASES, KNOWN_ATTRIBUTE_NAMES, OPS
from ..ir.types import (BOOL, DYNAMIC, MATRIX_USES, SCALAR_TYPES, VOID, CoopMatrixType, GroupType,
                        MemrefType, Type, stride_error)
from .lexer import Token, location, scan
from .preprocess import Expansion, needs_preprocessing, preprocess

INT_MAX = 2**63 - 1
_PUNCT_OR_WORD = ("punct", "word")
#: regions and attributes may nest this deep; deeper input is rejected, not a crash
MAX_NESTING = 100



def scan_template(text: str, expansion: Optional[Expansion] = None):
    """``scan`` text; with an expansion, text is its output and every location (of
    tokens, hence of the IR and of diagnostics) is taken back to the template."""
    try:
        tokens, line_starts, eof = scan(text)
    except CompileError as e:
        raise e if expansion is None else expansion.error(e, "<input>") from None
    if expansion is not None:
        remap = expansion.location
        tokens = [(t[0], t[1], t[2], remap(location(t, line_starts))) for t in tokens]
        eof = remap(eof)
    return tokens, line_starts, eof


class Parser:
    def __init__(self, text: str, expansion: Optional[Expansion] = None):
        """Parse text, the output of expansion if one is given (see scan_template)."""
        tokens, self.line_starts, eof = scan_template(text, expansion)
        tokens.append(("eof", "", None, eof))
        self.tokens = tokens
        self.pos = 0
        #: every value visible here, by name: a name may not be redefined while it is
        #: visible, so one dictionary serves all enclosing scopes
        self.visible: Dict[str, Value] = {}
        #: the names defined in each open scope, innermost last (removed when it closes)
        self.scopes: List[List[str]] = []
        self.depth = 0

    # ---- token helpers -------------------------------------------------------------
    # The tokens are the lexer's tuples (kind, text, value, where); a Token object is made
    # only where one is asked for (tok, next()), which is mostly on error paths.
    def loc_at(self, pos: int) -> Location:
        return location(self.tokens[pos], self.line_starts)

    def token(self, pos: int) -> Token:
        kind, text, value, _ = self.tokens[pos]
        return Token(kind, text, self.loc_at(pos), value)

    @property
    def tok(self) -> Token:
        return self.token(self.pos)

    def next(self) -> Token:
        pos = self.pos
        if self.tokens[pos][0] != "eof":
            self.pos = pos + 1
        return self.token(pos)

    def last_loc(self) -> Location:
        return self.loc_at(self.pos - 1 if self.pos else 0)

    def peek_is(self, text: Optional[str]) -> bool:
        tok = self.tokens[self.pos]
        return tok[1] == text and tok[0] in _PUNCT_OR_WORD

    def peek_kind(self) -> str:
        return self.tokens[self.pos][0]

    def accept(self, text: str) -> bool:
        tok = self.tokens[self.pos]
        if tok[1] == text and tok[0] in _PUNCT_OR_WORD:
            self.pos += 1  # never eof: its text is empty
            return True
        return False

    def fail(self, message: str, loc: Optional[Location] = None) -> CompileError:
        return error(loc or self.loc_at(self.pos), message)

    def unexpected(self, expected: str) -> CompileError:
        return self.fail(f"unexpected {self.tok.describe()}, expected {expected}")

    def expect(self, text: str) -> None:
        tok = self.tokens[self.pos]
        if tok[1] == text and tok[0] in _PUNCT_OR_WORD:
            self.pos += 1
            return
        raise self.unexpected(f"'{text}'")

    def expect_loc(self, text: str) -> Location:
        """Like expect; returns the location of the token."""
        pos = self.pos
        self.expect(text)
        return self.loc_at(pos)

    def expect_one(self, texts) -> None:
        tok = self.tokens[self.pos]
        if tok[1] in texts and tok[0] in _PUNCT_OR_WORD:
            self.pos += 1
            return
        raise self.unexpected(" or ".join(f"'{t}'" for t in texts))

    def nest(self, loc: Location) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.fail(f"nesting deeper than {MAX_NESTING} levels is not supported", loc)

    # ---- names ---------------------------------------------------------------------
    def parse_local_name(self) -> Tuple[str, Location]:
        pos = self.pos
        tok = self.tokens[pos]
        if tok[0] != "local":
            raise self.unexpected("a local identifier (%name)")
        self.pos = pos + 1
        return tok[2], self.loc_at(pos)

    def lookup(self, name: str) -> Optional[Value]:
        return self.visible.get(name)

    def define(self, name: str, value: Value) -> None:
        previous = self.visible.get(name)
        if previous is not None:
            raise CompileError([Diagnostic(value.loc, f"redefinition of %{name}",
                                           [(previous.loc, f"%{name} is first defined here")])])
        self.visible[name] = value
        self.scopes[-1].append(name)

    def open_scope(self) -> None:
        self.scopes.append([])

    def close_scope(self) -> None:
        visible = self.visible
        for name in self.scopes.pop():
            del visible[name]

    def parse_value_use(self) -> Value:
        tok = self.tokens[self.pos]
        if tok[0] != "local":
            raise self.unexpected("a local identifier (%name)")
        self.pos += 1
        value = self.visible.get(tok[2])
        if value is None:
            raise self.fail(f"use of undefined value %{tok[2]}", self.loc_at(self.pos - 1))
        return value

    # ---- numbers -------------------------------------------------------------------
    def parse_integer(self) -> Tuple[int, Location]:
        pos = self.pos
        tok = self.tokens[pos]
        if tok[0] != "int":
            raise self.unexpected("an integer constant")
        self.pos = pos + 1
        if abs(tok[2]) > INT_MAX:
            raise self.fail("integer constant out of range (-2^63+1 to 2^63-1)", self.loc_at(pos))
        return tok[2], self.loc_at(pos)

    def parse_float(self) -> float:
        tok = self.tokens[self.pos]
        if tok[0] != "float":
            raise self.unexpected("a floating-point constant")
        self.pos += 1
        return tok[2]

    def parse_constant_literal(self):
        start = self.loc_at(self.pos)
        kind, text, value, _ = self.tokens[self.pos]
        if self.peek_is("true") or self.peek_is("false"):
            self.pos += 1
            return text == "true", start
        if kind == "int":
            return self.parse_integer()
        if kind == "float":
            self.pos += 1
            return value, start
        if self.accept("["):
            re = self.parse_float()
            self.expect(",")
            im = self.parse_float()
            self.expect("]")
            return complex(re, im), start.span(self.last_loc())
        raise self.unexpected("a constant (true, false, a number or [re, im])")

    # ---- types ---------------------------------------------------------------------
    def parse_type_with_loc(self) -> Tuple[Type, Location]:
        pos = self.pos
        kind, text, _, _ = self.tokens[pos]
        if kind == "word" and text in SCALAR_TYPES:  # the common case, one token
            self.pos = pos + 1
            return SCALAR_TYPES[text], self.loc_at(pos)
        start = self.loc_at(pos)
        t = self.parse_type()
        return t, start.span(self.last_loc())

    def parse_type(self) -> Type:
        kind, text, _, _ = self.tokens[self.pos]
        if kind == "word":
            if text in SCALAR_TYPES:
                self.pos += 1
                return SCALAR_TYPES[text]
            if text == "bool":
                self.pos += 1
                return BOOL
            if text == "void":
                self.pos += 1
                return VOID
            if text == "memref":
                return self.parse_memref()
            if text == "group":
                return self.parse_group()
            if text == "coopmatrix":
                return self.parse_coopmatrix()
        raise self.unexpected("a type")

    def parse_scalar_type(self):
        kind, text, _, _ = self.tokens[self.pos]
        if kind == "word" and text in SCALAR_TYPES:
            self.pos += 1
            return SCALAR_TYPES[text]
        raise self.unexpected("a number type (i8, i16, i32, i64, index, bf16, f16, f32, f64, c32, c64)")

    def parse_dim(self):
        if self.accept("?"):
            return DYNAMIC
        value, loc = self.parse_integer()
        if value < 0:
            raise self.fail("sizes, strides and offsets must not be negative", loc)
        return value

    def parse_memref(self) -> MemrefType:
        start = self.expect_loc("memref")
        self.expect("<")
        element = self.parse_scalar_type()
        shape = []
        while self.accept("x"):
            shape.append(self.parse_dim())
        stride = None
        space = "global"
        stride_loc = None
        while self.accept(","):
            if self.peek_is("strided") and stride is None and space == "global":
                stride_loc = self.loc_at(self.pos)
                self.pos += 1
                self.expect("<")
                stride = []
                if not self.peek_is(">"):
                    stride.append(self.parse_dim())
                    while self.accept(","):
                        stride.append(self.parse_dim())
                self.expect(">")
                stride_loc = stride_loc.span(self.last_loc())
            elif self.peek_is("global") or self.peek_is("local"):
                space = self.next().text
                break
            else:
                raise self.unexpected("'strided<...>', 'global' or 'local'")
        self.expect(">")
        loc = start.span(self.last_loc())
        for s in shape:
            if s == 0:
                raise self.fail("memref mode sizes must be positive", loc)
        if stride is not None:
            if len(stride) != len(shape):
                raise self.fail(f"strided layout has {len(stride)} entries but the memref has "
                                f"order {len(shape)}", stride_loc)
            problem = stride_error(shape, stride)
            if problem:
                raise self.fail(problem, stride_loc)
        return MemrefType.get(element, shape, stride, space)

    def parse_group(self) -> GroupType:
        start = self.expect_loc("group")
        self.expect("<")
        memref = self.parse_memref()
        self.expect("x")
        size = self.parse_dim()
        offset = 0
        if self.accept(","):
            self.expect("offset")
            self.expect(":")
            offset = self.parse_dim()
        self.expect(">")
        if size == 0:
            raise self.fail("group size must be positive", start.span(self.last_loc()))
        return GroupType(memref, size, offset)

    def parse_coopmatrix(self) -> CoopMatrixType:
        start = self.expect_loc("coopmatrix")
        self.expect("<")
        component = self.parse_scalar_type()
        self.expect("x")
        rows, _ = self.parse_integer()
        self.expect("x")
        cols, _ = self.parse_integer()
        self.expect(",")
        kind, use, _, _ = self.tokens[self.pos]
        if not (kind == "word" and use in MATRIX_USES):
            raise self.unexpected("a matrix use (matrix_a, matrix_b or matrix_acc)")
        self.pos += 1
        self.expect(">")
        if rows <= 0 or cols <= 0:
            raise self.fail("coopmatrix rows and columns must be positive", start.span(self.last_loc()))
        return CoopMatrixType(component, rows, cols, use)

    # ---- attributes ----------------------------------------------------------------
    def parse_dictionary(self) -> Tuple[dict, Location]:
        start = self.expect_loc("{")
        self.nest(start)
        result: dict = {}
        name_locs: dict = {}
        if not self.peek_is("}"):
            while True:
                name_tok = self.tok
                if name_tok.kind == "string":
                    name = self.next().value
                elif name_tok.kind == "word" and name_tok.text in KNOWN_ATTRIBUTE_NAMES:
                    name = self.next().text
                else:
                    raise self.unexpected("an attribute name (" + ", ".join(KNOWN_ATTRIBUTE_NAMES)
                                          + ' or a "string")')
                if name in result:
                    raise error(name_tok.loc, f"duplicate attribute '{name}'",
                                [(name_locs[name], f"'{name}' is first given here")])
                name_locs[name] = name_tok.loc
                self.expect("=")
                result[name] = self.parse_attribute()
                if not self.accept(","):
                    break
        self.expect("}")
        self.depth -= 1
        return result, start.span(self.last_loc())

    def parse_attribute(self):
        tok = self.tok
        if tok.kind == "int":
            return self.parse_integer()[0]
        if self.peek_is("true") or self.peek_is("false"):
            return self.next().text == "true"
        if tok.kind == "string":
            return self.next().value
        if self.peek_is("{"):
            return self.parse_dictionary()[0]
        if self.peek_is("["):
            self.nest(tok.loc)
            self.next()
            items = []
            if not self.peek_is("]"):
                items.append(self.parse_attribute())
                while self.accept(","):
                    items.append(self.parse_attribute())
            self.expect("]")
            self.depth -= 1
            return items
        raise self.unexpected("an attribute (integer, boolean, string, array or dictionary)")

    # ---- program structure ---------------------------------------------------------
    def parse_program(self) -> Program:
        program = Program()
        names = {}
        while self.tokens[self.pos][0] != "eof":
            func = self.parse_function()
            if func.name in names:
                raise CompileError([Diagnostic(func.loc, f"redefinition of function @{func.name}",
                                               [(names[func.name], "first defined here")])])
            names[func.name] = func.loc
            program.functions.append(func)
        return program

    def parse_function(self) -> Function:
        start = self.expect_loc("func")
        if self.tok.kind != "global":
            raise self.unexpected("a function name (@name)")
        name = self.next().value
        self.expect("(")
        self.open_scope()
        args: List[Argument] = []
        if not self.peek_is(")"):
            while True:
                args.append(self.parse_argument())
                if not self.accept(","):
                    break
        self.expect(")")
        loc = start.span(self.last_loc())
        attrs, attrs_loc = {}, loc
        if self.accept("attributes"):
            attrs, attrs_loc = self.parse_dictionary()
        body = self.parse_region([])
        self.close_scope()
        return Function(name, args, body, attrs, loc, attrs_loc)

    def parse_argument(self) -> Argument:
        name, loc = self.parse_local_name()
        self.expect(":")
        t, type_loc = self.parse_type_with_loc()
        value = Value(t, name, loc.span(type_loc))
        self.define(name, value)
        attrs, attrs_loc = {}, value.loc
        if self.peek_is("{"):
            attrs, attrs_loc = self.parse_dictionary()
        return Argument(value, attrs, attrs_loc)

    def parse_region(self, args: List[Value]) -> Region:
        start = self.expect_loc("{")
        self.nest(start)
        self.open_scope()
        for a in args:
            self.define(a.name, a)
        region = Region(args=args)
        while not self.peek_is("}"):
            if self.tokens[self.pos][0] == "eof":
                raise error(self.tok.loc, "unexpected end of input, expected '}' to close the "
                            f"region opened at {start}", [(start, "the region opened here")])
            region.instructions.append(self.parse_instruction())
        self.pos += 1  # the closing brace
        self.close_scope()
        self.depth -= 1
        region.loc = start.span(self.last_loc())
        return region

    def parse_region_for(self, st: S.ParseState, element: S.RegionEl) -> Region:
        """Parse a region of the instruction being built, declaring its arguments."""
        if st.header_end is None:
            st.header_end = self.last_loc()
        args: List[Value] = []
        if element.index == 0 and st.arg_names:
            self.check_arg_counts(st)
            types = OPS[st.opcode].region_arg_types(st.slots, st.result_types)
            # a count mismatch keeps every name (typed void) for the verifier to report
            types = list(types) + [VOID] * (len(st.arg_names) - len(types))
            args = [Value(t, name, loc) for (name, loc), t in zip(st.arg_names, types)]
        return self.parse_region(args)

    def check_arg_counts(self, st: S.ParseState) -> None:
        """One name per loop mode in each name list of foreach and foreach_tile.

        The region arguments are stored as one list, so a name list of the wrong length
        would shift names into the next list (tile offsets becoming tile sizes); the
        verifier could not tell, so it is reported here."""
        for e in OPS[st.opcode].elements:
            if isinstance(e, S.Args) and isinstance(e.count, str) and e.group in st.arg_groups:
                start, count = st.arg_groups[e.group]
                expected = len(st.slots.get(e.count, ()))
                if count != expected:
                    names = st.arg_names[start:start + count]
                    what = "tile size" if e.group == "sizes" else "loop variable"
                    raise self.fail(f"{count} {what}{'s' if count != 1 else ''} declared but the loop has {expected} "
                                    f"mode{'s' if expected != 1 else ''} (one per entry of the "
                                    f"{e.count} list)", names[0][1].span(names[-1][1]))

    def parse_instruction(self) -> Instruction:
        lhs: List[Tuple[str, Location]] = []
        if self.tokens[self.pos][0] == "local":
            lhs.append(self.parse_local_name())
            while self.accept(","):
                lhs.append(self.parse_local_name())
            self.expect("=")
        kind, text, _, _ = self.tokens[self.pos]
        if kind != "word":
            raise self.unexpected("an instruction")
        if text not in OPS and text not in ALIASES:
            raise self.fail(f"unknown instruction '{text}'")
        tok = self.next()
        modifiers: List[Token] = []
        while self.peek_is("."):
            self.next()
            if self.tok.kind != "word" and self.tok.text != "x":
                raise self.unexpected("a modifier after '.'")
            modifiers.append(self.next())
        opcode = tok.text
        if opcode in ALIASES:
            if not modifiers or modifiers[0].text not in ALIASES[opcode]:
                raise self.fail(f"'{opcode}' must be followed by one of: "
                                + ", ".join("." + k for k in ALIASES[opcode]), tok.loc)
            opcode = ALIASES[opcode][modifiers.pop(0).text]
        opdef = OPS[opcode]
        st = S.ParseState(opcode)
        modifier_values = self.bind_modifiers(opdef, modifiers, tok)
        for element in opdef.syntax:
            element.parse(self, st)
        end = st.header_end or self.last_loc()
        loc = tok.loc.span(end)
        if lhs and not opdef.has_results:
            raise self.fail(f"'{opcode}' does not return a value", lhs[0][1].span(lhs[-1][1]))
        if len(lhs) != len(st.result_types):
            raise self.fail(f"'{opcode}' returns {len(st.result_types)} value"
                            f"{'s' if len(st.result_types) != 1 else ''} but {len(lhs)} "
                            f"name{'s are' if len(lhs) != 1 else ' is'} assigned", loc)
        results = [Value(t, name, nloc) for (name, nloc), t in zip(lhs, st.result_types)]
        if opcode == "constant" and results and literal_fits(st.attrs["value"], results[0].type):
            try:
                st.attrs["value"] = canonical(st.attrs["value"], results[0].type)
            except OverflowError:
                raise self.fail(f"constant is out of the range of {results[0].type}",
                                st.attr_locs["value"]) from None
        inst = Instruction(opcode, st.slots, results, st.regions, modifier_values, st.attrs, loc)
        for r in results:
            self.define(r.name, r)
        return inst

    def bind_modifiers(self, opdef, words: List[Token], op_tok: Token) -> dict:
        """Assign dotted words to the modifier slots of the table entry, in order."""
        bound: dict = {}
        slot = 0
        for word in words:
            while slot < len(opdef.modifiers) and word.text not in opdef.modifiers[slot].choices:
                slot += 1
            if slot == len(opdef.modifiers):
                # one group per modifier slot: [.atomic] [.n|.t] [.n|.t]; required ones bare
                groups = ["|".join("." + c for c in m.choices) for m in opdef.modifiers]
                groups = [g if m.required else "[" + g + "]" for g, m in zip(groups, opdef.modifiers)]
                hint = (" (allowed, in this order: " + " ".join(groups) + ")"
                        if groups else " (it takes none)")
                raise self.fail(f"unexpected modifier '.{word.text}' for '{opdef.name}'{hint}",
                                word.loc)
            mod = opdef.modifiers[slot]
            bound[mod.slot] = True if mod.flag else word.text
            slot += 1
        for mod in opdef.modifiers:
            if mod.required and mod.slot not in bound:
                raise self.fail(f"'{opdef.name}' needs one of: "
                                + ", ".join("." + c for c in mod.choices), op_tok.loc)
        return bound


def parse(text: str, filename: str = "<input>", defines=None) -> Program:
    """Parse a program (a template, see ``preprocess``, when it uses ``$`` or ``!calc``, or
    when defines are given); raises CompileError with diagnostics for invalid text."""
    expansion = None
    if defines or needs_preprocessing(text):
        expansion = preprocess(text, defines, filename)
    # Parsing allocates a token and a location per word of the text, none of them garbage;
    # the cyclic collector would scan this growing heap again and again (half the time
    # of a large file), so it pauses until the program is built.
    collecting = gc.isenabled()
    gc.disable()
    try:
        program = Parser(text if expansion is None else expansion.text,
                         expansion).parse_program()
    except CompileError as e:
        raise _legacy_hint(e, text, defines).with_source(text, filename) from None
    finally:
        if collecting:
            gc.enable()
    program.source = text
    program.filename = filename
    return program


def _legacy_hint(e: CompileError, text: str, defines) -> CompileError:
    """The error, saying so when text is a program in the legacy dialect."""
    from .legacy import is_legacy

    if not is_legacy(text, defines):
        return e
    first, *rest = e.diagnostics
    hint = Diagnostic(first.loc, f"{first.message} (this program is written in the legacy "
                      "dialect of the language: `ttlc upgrade` rewrites it in the current one)",
                      first.notes)
    return CompileError([hint, *rest])


def parse_type(text: str) -> Type:
    """One type written alone (``coopmatrix<f32x8x16,matrix_acc>``), as the command line
    takes it; raises CompileError for anything else."""
    p = Parser(text)
    try:
        t = p.parse_type()
        if p.tokens[p.pos][0] != "eof":
            raise p.unexpected("the end of the type")
    except CompileError as e:
        raise e.with_source(text, "<type>") from None
    return t
