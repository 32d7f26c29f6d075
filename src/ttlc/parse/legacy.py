"""The legacy dialect of the language, read and rewritten in the current one (``ttlc upgrade``).

The previous dialect wrote operand types after the operands (``gemm.n.t 1.0, %a, %b, 0.0,
%c : f32, memref<...>, ...``), took immediate constants as operands, had ``group_id``
without a mode, ``alloca -> memref<...>``, ``cmp.lt``, ``hadamard_product``, function
attributes ``work_group_size(x,y)`` and unsigned integer types.  This module parses it
into IR with the builder, which gives every result its type as the current language
infers it; immediates become ``constant`` instructions, names are kept.

A construct without an equivalent is an error on its line, not a guess: the current
language's integers are signed, so an unsigned type is accepted only where signedness
does not change the result (wrapping arithmetic, loads, stores, BLAS), and division,
remainder, ordered comparison and widening or float casts of unsigned values are errors.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ..diagnostics import CompileError, Diagnostic
from ..ir.builder import Builder, ProgramBuilder, memref
from ..ir.core import UNKNOWN_LOCATION, Location, Program, Region, Value
from ..ir.ops import ALIASES
from ..ir.types import (BOOL, DYNAMIC, F32, F64, I8, I16, I32, I64, INDEX, GroupType, MemrefType,
                        ScalarType, Type, dim_product)
from .lexer import location
from .parser import scan_template
from .preprocess import needs_preprocessing, preprocess

#: legacy scalar type name -> (current type, unsigned?)
_SCALARS = {"bool": (BOOL, False), "i1": (BOOL, False), "u1": (BOOL, False),
            "index": (INDEX, False), "f32": (F32, False), "f64": (F64, False)}
for _bits, _t in ((8, I8), (16, I16), (32, I32), (64, I64)):
    _SCALARS[f"i{_bits}"] = (_t, False)
    _SCALARS[f"u{_bits}"] = (_t, True)
#: a word the lexer left whole because its scalar type is not one of the current
#: language's (``u32x4``): the type, the static sizes in it, and a trailing ``x``
_SHAPED_WORD = re.compile(r"([iu](?:1|8|16|32|64))((?:x[0-9]+)*)(x?)\Z")
_BINARY = ("add", "sub", "mul", "div", "rem")
#: instructions written the same in both dialects (for telling legacy text apart)
_SHARED = ("if", "for", "barrier", "lifetime_stop")
#: BLAS-like instructions: legacy name -> (current name, transpose modifiers, operands:
#: s a scalar, m a memref)
_BLAS = {"axpby": ("axpby", 1, "smsm"), "gemm": ("gemm", 2, "smmsm"), "gemv": ("gemv", 1, "smmsm"),
         "ger": ("ger", 0, "smmsm"), "hadamard_product": ("hadamard", 0, "smmsm"),
         "sum": ("sum", 1, "smsm")}

#: a legacy type: the current type and whether the legacy one was unsigned
LType = Tuple[Type, bool]


class NoEquivalent(CompileError):
    """A valid legacy construct that the current language cannot express."""


def parse_legacy(text: str, filename: str = "<input>", defines=None) -> Program:
    """The program of a legacy-dialect text (not yet verified: ``ttlc.api.upgrade`` does
    both); raises CompileError (at the legacy text's lines) for invalid text or a
    construct without an equivalent."""
    program = LegacyParser(text, filename, defines).parse_program()
    program.source, program.filename = text, filename
    return program


def print_upgraded(program: Program) -> str:
    """The canonical print, with floating-point constants in decimal where that is exact
    (always: Python's repr of a double reads back as the same double)."""
    return re.sub(r"(constant )(-?0x[0-9a-fA-F.]+p[+-]?[0-9]+)( :)",
                  lambda m: m.group(1) + repr(float.fromhex(m.group(2))) + m.group(3),
                  str(program))


def is_legacy(text: str, defines=None) -> bool:
    """Whether text reads as the legacy dialect and uses a construct the current language
    writes differently (called when the current parser fails)."""
    try:
        parser = LegacyParser(text, "<input>", defines)
        parser.parse_program()
    except NoEquivalent:
        return True
    except Exception:  # any failure means: not (readable) legacy text
        return False
    return parser.distinct


class LegacyParser:
    def __init__(self, text: str, filename: str, defines=None):
        expansion = None
        if defines or needs_preprocessing(text):
            expansion = preprocess(text, defines, filename)
        self.text, self.filename = text, filename
        try:
            self.tokens, self.line_starts, eof = scan_template(
                text if expansion is None else expansion.text, expansion)
        except CompileError as e:
            raise CompileError(e.diagnostics, text, filename) from None
        self.tokens.append(("eof", "", None, eof))
        self.pos = 0
        self.used = {t[2] for t in self.tokens if t[0] == "local"}
        self.scopes: List[Dict[str, Tuple[Value, bool]]] = []
        self.b: Optional[Builder] = None
        self.pb = ProgramBuilder()
        #: whether a construct was read that the current language writes differently
        self.distinct = False

    # ---- tokens --------------------------------------------------------------------
    def loc(self, pos: Optional[int] = None) -> Location:
        return location(self.tokens[self.pos if pos is None else pos], self.line_starts)

    def fail(self, message: str, loc: Optional[Location] = None, kind=CompileError):
        return kind([Diagnostic(loc or self.loc(), message)], self.text, self.filename)

    def peek(self, text: str) -> bool:
        kind, tok = self.tokens[self.pos][:2]
        return tok == text and kind in ("punct", "word")

    def accept(self, text: str) -> bool:
        if self.peek(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.unexpected(f"'{text}'")

    def unexpected(self, what: str):
        kind, tok = self.tokens[self.pos][:2]
        return self.fail(f"unexpected {'end of input' if kind == 'eof' else repr(tok)}, "
                         f"expected {what}")

    def take(self, kind: str, what: str):
        tok = self.tokens[self.pos]
        if tok[0] != kind:
            raise self.unexpected(what)
        self.pos += 1
        return tok[2] if kind != "word" else tok[1]

    def word(self) -> str:
        return self.take("word", "a keyword")

    def integer(self) -> int:
        return self.take("int", "an integer constant")

    # ---- names ---------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        n = 0
        while f"{hint}{n}" in self.used:
            n += 1
        self.used.add(f"{hint}{n}")
        return f"{hint}{n}"

    def define(self, name: str, value: Value, unsigned: bool, loc: Location) -> None:
        if any(name in s for s in self.scopes):
            raise self.fail(f"redefinition of %{name}", loc)
        value.loc = loc
        self.scopes[-1][name] = (value, unsigned)

    def lookup(self) -> Tuple[Value, bool]:
        loc = self.loc()
        name = self.take("local", "a local identifier (%name)")
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.fail(f"use of undefined value %{name}", loc)

    # ---- types ---------------------------------------------------------------------
    def scalar_type(self) -> LType:
        loc, name = self.loc(), self.word()
        if name not in _SCALARS:
            raise self.fail(f"unknown scalar type '{name}' (the legacy dialect has bool, "
                            "i1..i64, u1..u64, index, f32 and f64)", loc)
        return _SCALARS[name]

    def type_(self) -> LType:
        if self.accept("group"):
            self.distinct = True  # no size: group<memref<...>>
            self.expect("<")
            m, unsigned = self.memref_type()
            self.expect(">")
            return GroupType(m, DYNAMIC, 0), unsigned
        if self.peek("memref"):
            return self.memref_type()
        return self.scalar_type()

    def memref_type(self) -> LType:
        start = self.loc()
        self.expect("memref")
        self.expect("<")
        shape: List[int] = []
        loc, name = self.loc(), self.word()
        m = _SHAPED_WORD.match(name) if name not in _SCALARS else None
        if m:
            name = m.group(1)
            shape += [int(d) for d in m.group(2).split("x")[1:]]
            if m.group(3):
                shape.append(self.dim())
        if name not in _SCALARS:
            raise self.fail(f"unknown scalar type '{name}'", loc)
        element, unsigned = _SCALARS[name]
        if element is BOOL:
            raise self.fail("a memref of bool has no equivalent in the current language "
                            "(memref elements are numbers)", loc, NoEquivalent)
        while self.accept("x"):
            shape.append(self.dim())
        stride = None
        if self.accept(","):
            self.expect("strided")
            self.expect("<")
            stride = self.comma_list(lambda: self.dim(zero=True), ">")
            self.expect(">")
        self.expect(">")
        try:
            return memref(element, *shape, stride=stride), unsigned
        except (TypeError, ValueError) as e:
            raise self.fail(str(e), start.span(self.loc(self.pos - 1))) from None

    def dim(self, zero: bool = False):
        if self.accept("?"):
            return None
        loc, d = self.loc(), self.integer()
        if d < (0 if zero else 1):
            raise self.fail(f"{'stride' if zero else 'mode size'} {d} out of range", loc)
        return d

    def annotation(self, value: Value, loc: Location) -> None:
        """``: type`` after a memref or group operand: it must be the operand's type (up to
        the address space, which the legacy dialect does not write)."""
        self.expect(":")
        t, _ = self.type_()
        if not _same_type(t, value.type):
            raise self.fail(f"the operand has type {value.type}, not {t}", loc)

    # ---- operands ------------------------------------------------------------------
    def operand(self, t: LType) -> Value:
        """A local identifier, or a constant materialised as type t."""
        kind, tok, value, _ = self.tokens[self.pos]
        if kind == "local":
            return self.lookup()[0]
        loc = self.loc()
        if kind in ("int", "float"):
            self.pos += 1
        elif tok in ("true", "false") and kind == "word":
            self.pos += 1
            value = tok == "true"
        else:
            raise self.unexpected("a local identifier or a constant")
        scalar, unsigned = t
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(scalar, ScalarType) \
                and scalar.is_int and unsigned and value >= 2 ** (scalar.bits - 1):
            value -= 2 ** scalar.bits  # the same bits as a signed integer
        if isinstance(value, float) and not (isinstance(scalar, ScalarType) and scalar.is_float):
            raise self.fail(f"floating-point constant for type {scalar}", loc)
        try:
            return self.b.constant(value, scalar, name=self.fresh("c"))
        except (TypeError, ValueError) as e:
            raise self.fail(str(e), loc) from None

    def index_operand(self) -> Value:
        return self.operand((INDEX, False))

    def index_list(self) -> List[Value]:
        return self.comma_list(self.index_operand, "]")

    def comma_list(self, item, end: Optional[str] = None) -> list:
        """item, item, ...: none if the next token is end."""
        if end is not None and self.peek(end):
            return []
        out = [item()]
        while self.accept(","):
            out.append(item())
        return out

    def tensor_access(self, inside):
        """``%tensor[...] : type``: the tensor, whether unsigned, and what ``inside`` reads
        between the brackets; the annotation must be the tensor's type."""
        tloc = self.loc()
        v, unsigned = self.lookup()
        self.expect("[")
        between = inside()
        self.expect("]")
        self.annotation(v, tloc)
        return v, unsigned, between

    def modifiers(self) -> List[str]:
        words = []
        while self.accept("."):
            words.append(self.word())
        return words

    # ---- program -------------------------------------------------------------------
    def parse_program(self) -> Program:
        while self.tokens[self.pos][0] != "eof":
            self.function()
        return self.pb.build()

    def function(self) -> None:
        loc = self.loc()
        self.expect("func")
        name = self.take("global", "a function name (@name)")
        self.expect("(")
        params, unsigned, locs = [], [], []
        while not self.accept(")"):
            if params:
                self.expect(",")
            locs.append(self.loc())
            pname = self.take("local", "a parameter (%name)")
            self.expect(":")
            t, u = self.type_()
            params.append((pname, t))
            unsigned.append(u)
        attributes = {}
        while self.tokens[self.pos][0] == "word" and not self.peek("{"):
            aloc, attr = self.loc(), self.word()
            self.distinct = True
            if attr == "work_group_size":
                self.expect("(")
                x = self.integer()
                self.expect(",")
                y = self.integer()
                self.expect(")")
                attributes["work_group_size"] = [x, y]
            elif attr == "subgroup_size":
                self.expect("(")
                attributes["subgroup_size"] = self.integer()
                self.expect(")")
            else:
                raise self.fail(f"unknown function attribute '{attr}' (the legacy dialect has "
                                "work_group_size(x,y) and subgroup_size(s))", aloc)
        if any(f.name == name for f in self.pb.program.functions):
            raise self.fail(f"redefinition of @{name}", loc)
        with self.pb.function(name, params, attributes) as (b, *values):
            self.b = b
            self.pb.program.functions[-1].loc = loc
            self.scopes.append({})
            for (pname, _), v, u, l in zip(params, values, unsigned, locs):
                self.define(pname, v, u, l)
            self.region(b.insertion_region)
            self.scopes.pop()

    def region(self, region: Region) -> None:
        self.expect("{")
        self.scopes.append({})
        while not self.accept("}"):
            start, loc = len(region.instructions), self.loc()
            self.instruction()
            for inst in region.instructions[start:]:
                if inst.loc is UNKNOWN_LOCATION:
                    inst.loc = loc
        self.scopes.pop()

    def instruction(self) -> None:
        names: List[Tuple[str, Location]] = []
        if self.tokens[self.pos][0] == "local":
            names.append((self.take("local", ""), self.loc(self.pos - 1)))
            while self.accept(","):
                names.append((self.take("local", "a local identifier"), self.loc(self.pos - 1)))
            self.expect("=")
        loc, opcode = self.loc(), self.word()
        self.distinct |= opcode not in _SHARED
        method = getattr(self, "op_" + opcode, None)
        if opcode in _BINARY:
            method = self.op_binary
        elif opcode in _BLAS:
            method = self.op_blas
        if method is None:
            raise self.fail(f"unknown instruction '{opcode}'", loc)
        try:
            results = method(opcode, loc)
        except (TypeError, ValueError) as e:  # the builder's: wrong kinds of operands
            raise self.fail(f"{opcode}: {e}", loc) from None
        results = [] if results is None else results if isinstance(results, list) else [results]
        if len(names) != len(results):
            raise self.fail(f"'{opcode}' returns {len(results)} values, {len(names)} names given",
                            loc)
        for (name, nloc), (value, unsigned) in zip(names, results):
            value.name = name
            self.define(name, value, unsigned, nloc)

    # ---- instructions: each returns its results as (Value, unsigned) ------------------
    def op_alloca(self, opcode, loc):
        self.expect("->")
        m, unsigned = self.memref_type()
        if any(d is DYNAMIC for d in m.shape):
            raise self.fail("alloca needs a memref of static size", loc)
        return self.b.alloca(result=MemrefType(m.element, m.shape, m.stride, "local")), unsigned

    def op_binary(self, opcode, loc):
        t = self._type_after_operands(2)
        self._no_unsigned(t, opcode in ("div", "rem"), f"{opcode} of unsigned integers", loc)
        a = self.operand(t)
        self.expect(",")
        b = self.operand(t)
        self.expect(":")
        self.scalar_type()
        return self.b.op(opcode, a, b, result=t[0]), t[1]

    def op_neg(self, opcode, loc):
        t = self._type_after_operands(1)
        a = self.operand(t)
        self.expect(":")
        self.scalar_type()
        return self.b.neg(a, result=t[0]), t[1]

    def op_cast(self, opcode, loc):
        t = self._type_after_operands(1)
        a = self.operand(t)
        self.expect(":")
        self.scalar_type()
        self.expect("->")
        to = self.scalar_type()
        src, dst = t[0], to[0]
        narrowing = isinstance(src, ScalarType) and isinstance(dst, ScalarType) and \
            src.is_int and dst.is_int and dst.bits <= src.bits
        self._no_unsigned(t, not narrowing, f"cast from unsigned {src} to {dst}", loc)
        self._no_unsigned(to, isinstance(src, ScalarType) and src.is_float,
                          f"cast from {src} to an unsigned integer", loc)
        return self.b.cast(a, result=dst), to[1]

    def op_cmp(self, opcode, loc):
        cond = self.modifiers()
        if len(cond) != 1 or cond[0] not in ALIASES["cmp"]:
            raise self.fail("cmp needs one of .eq .ne .gt .ge .lt .le", loc)
        t = self._type_after_operands(2)
        self._no_unsigned(t, cond[0] not in ("eq", "ne"), f"ordered comparison of unsigned "
                          "integers", loc)
        a = self.operand(t)
        self.expect(",")
        b = self.operand(t)
        self.expect(":")
        self.scalar_type()
        return self.b.op(ALIASES["cmp"][cond[0]], a, b), False

    def op_group_id(self, opcode, loc):
        return self.b.group_id("x"), False

    def op_group_size(self, opcode, loc):
        return self.b.num_groups("x"), False

    def op_size(self, opcode, loc):
        v, _, mode = self.tensor_access(self.integer)
        return self.b.size(v, mode), False

    def op_load(self, opcode, loc):
        v, unsigned, index = self.tensor_access(self.index_list)
        return self.b.load(v, index), unsigned

    def op_store(self, opcode, loc):
        value, _ = self.lookup()
        self.expect(",")
        v, _, index = self.tensor_access(self.index_list)
        self.b.store(value, v, index)

    def op_fuse(self, opcode, loc):
        v, unsigned, modes = self.tensor_access(lambda: self.comma_list(self.integer))
        if len(modes) != 2:
            raise self.fail("fuse takes the first and the last mode: fuse %x[from,to]", loc)
        return self.b.fuse(v, *modes), unsigned

    def op_expand(self, opcode, loc):
        def shape():
            mode = self.integer()
            self.expect("->")
            entries = [self._expand_entry()]
            while self.accept("x"):
                entries.append(self._expand_entry())
            return mode, entries

        v, unsigned, (mode, entries) = self.tensor_access(shape)
        m = v.type
        if not isinstance(m, MemrefType) or not 0 <= mode < m.order:
            raise self.fail(f"expand of mode {mode} of {m}", loc)
        if sum(e is None for e in entries) > 1:
            raise self.fail("at most one entry of the expand shape may be '?'", loc)
        if None in entries:  # the size that makes the product the mode size
            others = [e for e in entries if e is not None]
            size = m.shape[mode]
            if size is not DYNAMIC and all(isinstance(e, int) for e in others):
                known = dim_product(others)
                if size % known:
                    raise self.fail(f"the expand shape does not divide mode size {size}", loc)
                missing = size // known
            else:
                missing = self.b.size(v, mode)
                for e in others:
                    e = e if isinstance(e, Value) else self.b.constant(e, INDEX,
                                                                       name=self.fresh("c"))
                    missing = self.b.div(missing, e)
            entries[entries.index(None)] = missing
        return self.b.expand(v, mode, entries), unsigned

    def _expand_entry(self):
        if self.accept("?"):
            return None
        if self.tokens[self.pos][0] == "local":
            return self.lookup()[0]
        return self.integer()

    def op_subview(self, opcode, loc):
        v, unsigned, entries = self.tensor_access(lambda: self.comma_list(self._slice, "]"))
        m = v.type
        if not isinstance(m, MemrefType) or len(entries) != m.order:
            raise self.fail(f"{len(entries)} indices given for {m}", loc)
        slices = []
        for mode, (offset, size) in enumerate(entries):
            if size is None:  # '?': the rest of the mode
                if m.shape[mode] is not DYNAMIC and isinstance(offset, int):
                    size = m.shape[mode] - offset
                    if size <= 0:
                        raise self.fail(f"offset {offset} is past mode {mode} of {m}", loc)
                else:
                    total = self.b.size(v, mode)
                    if isinstance(offset, Value):
                        size = self.b.sub(total, offset)
                    else:
                        size = self.b.sub(total, self.b.constant(offset, INDEX,
                                                                 name=self.fresh("c")))
            slices.append(offset if size == 0 and not isinstance(size, Value) else (offset, size))
        return self.b.subview(v, slices), unsigned

    def _slice(self):
        """(offset, size): size 0 for a single index, None for '?' (and a plain ':')."""
        if self.accept(":"):
            return 0, None
        offset = self._int_or_local()
        if not self.accept(":"):
            return offset, 0
        if self.accept("?"):
            return offset, None
        size = self._int_or_local()
        if isinstance(size, int) and size <= 0:
            raise self.fail("a slice's size must be positive", self.loc(self.pos - 1))
        return offset, size

    def _int_or_local(self):
        if self.tokens[self.pos][0] == "local":
            return self.lookup()[0]
        return self.integer()

    def op_if(self, opcode, loc):
        cond = self.operand((BOOL, False))
        types: List[LType] = []
        if self.accept("->"):
            self.expect("(")
            types = self.comma_list(self.scalar_type)
            self.expect(")")
        op = self.b.if_(cond, results=[t for t, _ in types])
        with op:
            self.region(op.inst.regions[0])
        if self.accept("else"):
            with op.else_():
                self.region(op.inst.regions[1])
        return [(v, u) for v, (_, u) in zip(op.results, types)]

    def op_yield(self, opcode, loc):
        start = self.pos
        self._skip_to(":")  # the types come last
        self.pos += 1
        types = self.comma_list(self.scalar_type, "}")
        end, self.pos = self.pos, start
        values = []
        for i, t in enumerate(types):
            if i:
                self.expect(",")
            values.append(self.operand(t))
        self.expect(":")
        self.pos = end
        self.b.yield_(values)

    def op_for(self, opcode, loc):
        return self._loop(opcode, loc, step=True)

    def op_foreach(self, opcode, loc):
        return self._loop(opcode, loc, step=False)

    def _loop(self, opcode, loc, step: bool):
        vloc = self.loc()
        var = self.take("local", "the loop variable (%name)")
        self.expect("=")
        start = self.pos
        self._skip_to("{")
        t: LType = (INDEX, False)
        if self.tokens[self.pos - 2][1] == ":":  # [":" integer-type] before the region
            self.pos -= 1
            t = self.scalar_type()
        end, self.pos = self.pos, start
        bounds = [self.operand(t)]
        self.expect(",")
        bounds.append(self.operand(t))
        if step and self.accept(","):
            bounds.append(self.operand(t))
        self.pos = end
        if step:
            op = self.b.for_(*bounds, arg_names=[var])
        else:
            op = self.b.foreach([bounds[0]], [bounds[1]], arg_names=[var])
        with op as args:
            self.scopes.append({})
            self.define(var, args[0], t[1], vloc)
            self.region(op.inst.regions[0])
            self.scopes.pop()

    def op_barrier(self, opcode, loc):
        # the legacy barrier made all memory accesses visible: both fences
        self.b.barrier(global_=True, local=True)

    def op_lifetime_stop(self, opcode, loc):
        v, _ = self.lookup()
        self.b.lifetime_stop(v)

    def op_blas(self, opcode, loc):
        name, transposes, kinds = _BLAS[opcode]
        words = self.modifiers()
        trans = [w for w in words if w in ("n", "t")]
        rest = [w for w in words if w not in ("n", "t")]
        if opcode == "gemm" and len(trans) == 1:
            name, transposes = "gemv", 1  # the reference's grammar spells gemv "gemm.n"
        if len(trans) != transposes or rest not in ([], ["atomic"]):
            raise self.fail(f"{opcode} takes {transposes} transpose modifier(s) (.n or .t) and "
                            f"optionally .atomic, not {'.'.join([''] + words)}", loc)
        self.accept(",")  # the reference's grammar writes a comma here, its examples do not
        start = self.pos
        self._skip_to(":")
        self.pos += 1
        types = self.comma_list(self.type_)
        if len(types) != len(kinds):
            raise self.fail(f"{opcode} needs {len(kinds)} types after ':', got {len(types)}", loc)
        end, self.pos = self.pos, start
        operands = []
        for i, (k, t) in enumerate(zip(kinds, types)):
            if i:
                self.expect(",")
            oloc = self.loc()
            if k == "s":
                operands.append(self.operand(t))
            else:
                v, _ = self.lookup()
                if not _same_type(t[0], v.type):
                    raise self.fail(f"the operand has type {v.type}, not {t[0]}", oloc)
                operands.append(v)
        self.expect(":")
        self.pos = end
        self.b.op(".".join([name] + (["atomic"] if rest else []) + trans), *operands)

    # ---- helpers -------------------------------------------------------------------
    def _type_after_operands(self, count: int) -> LType:
        """The scalar type written after ``count`` operands, read ahead."""
        start = self.pos
        self.pos += 2 * count - 1
        if not self.accept(":"):
            self.pos = start + 2 * count - 1
            raise self.unexpected("':' and a type")
        t = self.scalar_type()
        self.pos = start
        return t

    def _skip_to(self, text: str) -> None:
        while not self.peek(text):
            if self.tokens[self.pos][0] == "eof":
                raise self.unexpected(f"'{text}'")
            self.pos += 1

    def _no_unsigned(self, t: LType, sensitive: bool, what: str, loc: Location) -> None:
        if t[1] and sensitive:
            raise self.fail(f"{what} has no equivalent in the current language (its integers "
                            "are signed)", loc, NoEquivalent)


def _same_type(a: Type, b: Type) -> bool:
    """Equal types, up to the address space of memrefs."""
    if isinstance(a, GroupType) and isinstance(b, GroupType):
        return _same_type(a.memref, b.memref)
    if isinstance(a, MemrefType) and isinstance(b, MemrefType):
        return (a.element, a.shape, a.stride) == (b.element, b.shape, b.stride)
    return a == b
