"""A SPIR-V module under construction, its binary encoding and its text form.

The builder hands out ids, keeps types and constants unique (asking twice for ``i32`` or
the constant 1 gives the same id) and records the capabilities and extensions of what is
used: every instruction and every enumerant operand (storage classes, built-ins,
decorations, scopes, ...) names the capabilities that enable it in the Khronos grammar
(``grammar``), and the first use of one that no declared capability enables declares the
first of them; type widths add theirs (``Int8``, ``Int16``, ``Int64``, ``Float16``,
``Float64``).  So the module declares exactly what its instructions need, nothing else.

Instructions are kept as records (opcode name, result type, result, operands) in the
sections of the logical layout of the SPIR-V specification (2.4), and written either as
words (``binary``: little-endian, header with the version and the id bound) or as text
in the style of ``spirv-dis`` (``text``).  Operands are ids (``int``), literals
(``Lit``: a 32-bit word or, with ``words``, a wider number), strings (``str``) and
enumerants (``Enum``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import grammar


# ---- the grammar tables ------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    value: int
    #: capabilities any one of which enables it
    capabilities: Tuple[str, ...] = ()
    extensions: Tuple[str, ...] = ()
    #: the first SPIR-V version whose core has it; None: only its extensions have it
    version: Optional[Tuple[int, int]] = (1, 0)


def _parse(text: str) -> Dict[str, Entry]:
    out: Dict[str, Entry] = {}
    for tok in text.split():
        tok, _, exts = tok.partition("+")
        tok, _, caps = tok.partition(":")
        tok, _, version = tok.partition("@")
        name, _, value = tok.partition("=")
        core = None if version == "-" else tuple(int(x) for x in (version or "1.0").split("."))
        out[name] = Entry(int(value), tuple(caps.split(",")) if caps else (),
                          tuple(exts.split(",")) if exts else (), core)
    return out


@lru_cache(maxsize=None)
def opcodes() -> Dict[str, Entry]:
    """Instruction name without ``Op`` -> its entry."""
    return _parse(grammar.OPCODES)


@lru_cache(maxsize=None)
def enum(kind: str) -> Dict[str, Entry]:
    return _parse(grammar.ENUMS[kind])


@lru_cache(maxsize=None)
def opencl_std() -> Dict[str, int]:
    return {k: e.value for k, e in _parse(grammar.OPENCL_STD).items()}


# ---- operands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lit:
    """A literal number of ``words`` 32-bit words (low word first); ``text`` is how the
    text form writes it, where not as the integer (a float, an extended instruction)."""

    value: int
    words: int = 1
    text: Optional[str] = None


@dataclass(frozen=True)
class Enum:
    """An enumerant of an operand kind; a BitEnum may name several (``"A|B"``), or none
    (``"None"``)."""

    kind: str
    name: str

    def names(self) -> List[str]:
        return [] if self.name == "None" else self.name.split("|")

    @property
    def value(self) -> int:
        table = enum(self.kind)
        v = 0
        for n in self.names():
            v |= table[n].value
        return v


Operand = Union[int, Lit, str, Enum]


@dataclass
class Inst:
    op: str
    result_type: Optional[int]
    result: Optional[int]
    operands: List[Operand] = field(default_factory=list)


#: (exponent bits, mantissa bits) of the float widths
_FLOATS = {16: (5, 10), 32: (8, 23), 64: (11, 52)}


def float_text(bits: int, width: int) -> Optional[str]:
    """A float constant as SPIRV-Tools' assembler reads it: a hexadecimal float, with
    infinities and quiet NaNs written with the exponent one past the largest (None for a
    NaN with another payload)."""
    e_bits, m_bits = _FLOATS[width]
    sign = "-" if bits >> (width - 1) else ""
    exponent = (bits >> m_bits) & ((1 << e_bits) - 1)
    mantissa = bits & ((1 << m_bits) - 1)
    if exponent == (1 << e_bits) - 1:
        emax = 1 << (e_bits - 1)
        if mantissa == 0:
            return f"{sign}0x1p+{emax}"
        return f"{sign}0x1.8p+{emax}" if mantissa == 1 << (m_bits - 1) else None
    fmt = {16: "<e", 32: "<f", 64: "<d"}[width]
    packed = struct.pack({16: "<H", 32: "<I", 64: "<Q"}[width], bits)
    return float(struct.unpack(fmt, packed)[0]).hex()


def _string_words(s: str) -> List[int]:
    data = s.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def _words(inst: Inst) -> List[int]:
    body: List[int] = []
    for x in ((inst.result_type,) if inst.result_type is not None else ()) + \
             ((inst.result,) if inst.result is not None else ()):
        body.append(x)
    for o in inst.operands:
        if isinstance(o, Lit):
            v = o.value & ((1 << (32 * o.words)) - 1)
            body.extend((v >> (32 * k)) & 0xFFFFFFFF for k in range(o.words))
        elif isinstance(o, str):
            body.extend(_string_words(o))
        elif isinstance(o, Enum):
            body.append(o.value)
        else:
            body.append(int(o))
    return [((len(body) + 1) << 16) | opcodes()[inst.op].value] + body


def _text_operand(o: Operand) -> str:
    if isinstance(o, Lit):
        return o.text if o.text is not None else str(o.value)
    if isinstance(o, str):
        return '"' + o.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(o, Enum):
        return o.name
    return f"%{o}"


#: sections of the logical layout, in order
SECTIONS = ("capability", "extension", "import", "memory_model", "entry_point", "execution_mode",
            "debug", "annotation", "global", "function")


class Module:
    """A SPIR-V module for the OpenCL Kernel environment: Physical64 addressing, the
    OpenCL memory model.

    It is written as SPIR-V ``version`` unless something used is in the core of a later
    version only (no extension adds it), such as the GroupNonUniform instructions of
    1.3: then as the first version that has it, up to ``newest``.  So a module is as
    old as its instructions allow, and only those that need a newer one ask consumers
    for it."""

    def __init__(self, version: Tuple[int, int] = (1, 2), newest: Tuple[int, int] = (1, 3)):
        self.version = version
        self.newest = newest
        self.bound = 1
        self.sections: Dict[str, List[Inst]] = {s: [] for s in SECTIONS}
        self.capabilities: List[str] = []
        self.extensions: List[str] = []
        self._imports: Dict[str, int] = {}
        self._unique: Dict[tuple, int] = {}
        #: the declared capabilities and those they imply
        self._enabled: set = set()
        #: built-in input variables by BuiltIn name (shared by the kernels of the module)
        self.builtins: Dict[str, int] = {}
        self.require_capability("Kernel")
        self.require_capability("Addresses")
        self.add("memory_model", "MemoryModel", None, None, Enum("AddressingModel", "Physical64"),
                 Enum("MemoryModel", "OpenCL"))

    # ---- ids, capabilities, extensions --------------------------------------------------------
    def id(self) -> int:
        self.bound += 1
        return self.bound - 1

    def require_capability(self, *alternatives: str) -> None:
        """Declare the first of ``alternatives`` unless a declared capability enables one
        (is it, or implies it)."""
        if not alternatives or any(c in self._enabled for c in alternatives):
            return
        cap = alternatives[0]
        self.capabilities.append(cap)
        self.sections["capability"].append(Inst("Capability", None, None,
                                                [Enum("Capability", cap)]))
        todo = [cap]
        while todo:
            c = todo.pop()
            if c not in self._enabled:
                self._enabled.add(c)
                todo.extend(enum("Capability")[c].capabilities)
        self._require(enum("Capability")[cap])

    def require_extension(self, name: str) -> None:
        if name not in self.extensions:
            self.extensions.append(name)
            self.sections["extension"].append(Inst("Extension", None, None, [name]))

    def _require(self, entry: Entry) -> None:
        """Declare what an instruction or enumerant needs: a capability enabling it, and,
        where the module's version does not have it in its core, its extension or else
        the version that has it (up to ``newest``)."""
        if entry.capabilities:
            self.require_capability(*entry.capabilities)
        if entry.version is not None and entry.version <= self.version:
            return
        if entry.extensions:
            self.require_extension(entry.extensions[0])
        elif entry.version is not None and entry.version <= self.newest:
            self.version = entry.version
        elif not entry.capabilities:  # else the capability's extension brings it
            raise AssertionError(f"{entry} is not in SPIR-V {self.version}")

    # ---- instructions ------------------------------------------------------------------------
    def add(self, section: str, op: str, result_type: Optional[int], result: Optional[int],
            *operands: Operand) -> Optional[int]:
        """Append an instruction to a section, declaring what it needs; its result id."""
        self._require(opcodes()[op])
        for o in operands:
            if isinstance(o, Enum):
                table = enum(o.kind)
                for n in o.names():
                    e = table[n]
                    # an operand kind an extension adds (its enumerants in no SPIR-V
                    # version, needing nothing): the instruction's extension brings it
                    if e.capabilities or e.extensions or e.version is not None:
                        self._require(e)
        self.sections[section].append(Inst(op, result_type, result, list(operands)))
        return result

    def unique(self, op: str, result_type: Optional[int], *operands: Operand) -> int:
        """The result of a global instruction (type, constant), made once."""
        key = (op, result_type, tuple(operands))
        if key not in self._unique:
            self._unique[key] = self.add("global", op, result_type, self.id(), *operands)
        return self._unique[key]

    def import_ext(self, name: str) -> int:
        if name not in self._imports:
            self._imports[name] = self.add("import", "ExtInstImport", None, self.id(), name)
        return self._imports[name]

    # ---- types -------------------------------------------------------------------------------
    def type_void(self) -> int:
        return self.unique("TypeVoid", None)

    def type_bool(self) -> int:
        return self.unique("TypeBool", None)

    def type_int(self, bits: int) -> int:
        if bits in (8, 16, 64):
            self.require_capability(f"Int{bits}")
        return self.unique("TypeInt", None, Lit(bits), Lit(0))

    def type_float(self, bits: int) -> int:
        if bits in (16, 64):
            self.require_capability(f"Float{bits}")
        return self.unique("TypeFloat", None, Lit(bits))

    def type_vector(self, component: int, count: int) -> int:
        if count in (8, 16):
            self.require_capability("Vector16")
        return self.unique("TypeVector", None, component, Lit(count))

    def type_array(self, element: int, length: int) -> int:
        return self.unique("TypeArray", None, element, self.constant(self.type_int(32), length))

    def type_pointer(self, storage: str, pointee: int) -> int:
        return self.unique("TypePointer", None, Enum("StorageClass", storage), pointee)

    def type_function(self, result: int, params: Sequence[int]) -> int:
        return self.unique("TypeFunction", None, result, *params)

    # ---- constants ---------------------------------------------------------------------------
    def constant(self, type_id: int, bits: int, width: int = 32,
                 text: Optional[str] = None) -> int:
        """A number constant of a type of ``width`` bits given by its bit pattern (``text``:
        how the text form writes it, ``float_text`` for floats)."""
        return self.unique("Constant", type_id, Lit(bits, 2 if width == 64 else 1, text))

    def constant_bool(self, value: bool) -> int:
        return self.unique("ConstantTrue" if value else "ConstantFalse", self.type_bool())

    def null(self, type_id: int) -> int:
        return self.unique("ConstantNull", type_id)

    # ---- annotations and debug names -----------------------------------------------------------
    def decorate(self, target: int, decoration: str, *literals: Operand) -> None:
        self.add("annotation", "Decorate", None, None, target, Enum("Decoration", decoration),
                 *literals)

    def name(self, target: int, name: str) -> None:
        self.add("debug", "Name", None, None, target, name)

    # ---- output ------------------------------------------------------------------------------
    def instructions(self) -> List[Inst]:
        return [i for s in SECTIONS for i in self.sections[s]]

    def binary(self) -> bytes:
        major, minor = self.version
        words = [grammar.MAGIC, (major << 16) | (minor << 8), 0, self.bound, 0]
        for inst in self.instructions():
            words.extend(_words(inst))
        return struct.pack(f"<{len(words)}I", *words)

    def text(self) -> str:
        """The module as text, one instruction a line, like ``spirv-dis --raw-id``."""
        major, minor = self.version
        lines = ["; SPIR-V", f"; Version: {major}.{minor}", "; Generator: ttlc",
                 f"; Bound: {self.bound}", "; Schema: 0"]
        for inst in self.instructions():
            ops = " ".join(_text_operand(o) for o in
                           ([inst.result_type] if inst.result_type is not None else [])
                           + inst.operands)
            lhs = f"%{inst.result} = " if inst.result is not None else ""
            lines.append(f"{lhs:>14}Op{inst.op}{' ' + ops if ops else ''}")
        return "\n".join(lines) + "\n"
