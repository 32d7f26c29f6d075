"""Build programs from Python, driven by the instruction table.

There is no hand-written method per instruction: ``Builder.op`` reads an instruction's
table entry (``ttlc.ir.ops``) to bind operands to its syntax elements, modifiers to its
modifier slots, and to create its results and regions; the attribute-style methods
(``b.gemm(...)``, ``b.add(...)``, ``b.for_(...)``) are generated from the table, so a new
table entry is buildable at once.  The IR built here has the same shape the parser
produces for the printed text, so passes and the verifier cannot tell the two apart.

    pb = ProgramBuilder()
    with pb.function("axpy", [("a", F32), ("X", memref(F32, None)), ("Y", memref(F32, None))]) as (b, a, X, Y):
        one = b.constant(1.0, F32)
        b.axpby(a, X, one, Y)
    print(pb)

Operands are passed positionally in textual order (``b.gemm(alpha, A, B, beta, C)``),
or by their slot name.  Modifiers are keywords (``ta="t"``, ``atomic=True``,
``global_=True``), dotted suffixes of the opcode (``b.op("gemm.atomic.t", ...)``), or
positional strings (``b.group_id("x")``).  The result type is inferred where the
reference fixes it (arithmetic, comparisons, builtins, loads, views, ...); otherwise
give ``result=TYPE`` or a type as the last positional argument (``b.constant(1.5, F32)``).
Instructions with regions return a ``RegionOp``, a context manager that moves the
insertion point into the region and yields the region arguments.

Misuse (a wrong operand kind, a missing result type, a value used outside its scope, a
name the printer could not write) raises ``TypeError`` or ``ValueError`` right away,
so the printed text always parses.
"""
from __future__ import annotations

import keyword
import operator
import re
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

from . import syntax as S
from .constants import canonical, literal_fits
from .core import Argument, Function, Instruction, Program, Region, Value
from .ops import ALIASES, KNOWN_ATTRIBUTE_NAMES, OPS, OpDef
from .types import (BF16, BOOL, C32, C64, DYNAMIC, F16, F32, F64, I8, I16, I32, I64, INDEX,
                    MATRIX_USES, SCALAR_TYPES, VOID, BoolType, CoopMatrixType, GroupType,
                    MemrefType, ScalarType, Type, stride_error)

__all__ = ["Builder", "ProgramBuilder", "RegionOp", "memref", "group", "coopmatrix",
           "I8", "I16", "I32", "I64", "INDEX", "BF16", "F16", "F32", "F64", "C32", "C64",
           "BOOL", "VOID", "DYNAMIC"]

INT_MAX = 2**63 - 1
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[0-9]+")
_STRING_CHARS = re.compile(r'[ !#-~]*')  # string-attribute: printable ASCII but '"'

Dim = Union[int, None, str]


# ---- type helpers ----------------------------------------------------------------------
def _scalar(t: Union[ScalarType, str]) -> ScalarType:
    if isinstance(t, str) and t in SCALAR_TYPES:
        return SCALAR_TYPES[t]
    if isinstance(t, ScalarType):
        return t
    raise TypeError(f"expected a number type (e.g. F32 or 'f32'), got {t!r}")


def _index(x: Any) -> Optional[int]:
    """x as a Python int if it is an integer (also NumPy's), else None; bools are not."""
    if isinstance(x, bool):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _dim(d: Dim, what: str, positive: bool = True) -> Optional[int]:
    if d is None or (isinstance(d, str) and d == "?"):
        return DYNAMIC
    value = _index(d)
    if value is None:
        raise TypeError(f"{what} must be an integer or None/'?' (dynamic), got {d!r}")
    d = value
    if d < (1 if positive else 0) or d > INT_MAX:
        raise ValueError(f"{what} {d} out of range")
    return d


def memref(element: Union[ScalarType, str], *shape: Dim, stride: Optional[Sequence[Dim]] = None,
           space: str = "global") -> MemrefType:
    """``memref(F32, 16, None)`` is ``memref<f32x16x?>``; None or '?' is a dynamic size.

    Checks what the parser checks (positive sizes, non-overlapping column-major strides),
    so a type built here always prints as text that parses.
    """
    shape_t = tuple(_dim(s, "mode size") for s in shape)
    stride_t = None
    if stride is not None:
        stride_t = tuple(_dim(s, "stride", positive=False) for s in stride)
        if len(stride_t) != len(shape_t):
            raise ValueError(f"stride has {len(stride_t)} entries but the memref has order "
                             f"{len(shape_t)}")
        problem = stride_error(shape_t, stride_t)
        if problem:
            raise ValueError(problem)
    if space not in ("global", "local"):
        raise ValueError(f"address space must be 'global' or 'local', got {space!r}")
    return MemrefType.get(_scalar(element), shape_t, stride_t, space)


def group(memref_type: MemrefType, size: Dim = None, offset: Dim = 0) -> GroupType:
    """``group(memref(F32, 8), None, offset=None)`` is ``group<memref<f32x8>x?, offset: ?>``."""
    if not isinstance(memref_type, MemrefType):
        raise TypeError(f"a group holds memrefs, got {memref_type!r}")
    return GroupType(memref_type, _dim(size, "group size"),
                     _dim(offset, "group offset", positive=False))


def coopmatrix(component: Union[ScalarType, str], rows: int, cols: int, use: str) -> CoopMatrixType:
    """``coopmatrix(F32, 16, 8, "matrix_acc")`` is ``coopmatrix<f32x16x8,matrix_acc>``."""
    if use not in MATRIX_USES:
        raise ValueError(f"matrix use must be one of {', '.join(MATRIX_USES)}, got {use!r}")
    rows_, cols_ = _dim(rows, "rows"), _dim(cols, "columns")
    if rows_ is None or cols_ is None:
        raise ValueError("coopmatrix rows and columns must be static")
    return CoopMatrixType(_scalar(component), rows_, cols_, use)


# ---- what an instruction takes, read from its table entry ------------------------------
_INPUTS = (S.Opnd, S.OpndList, S.Int, S.IntList, S.Slices, S.ExpandShape, S.InitList,
           S.ConstantLiteral, S.DictAttr)


class _Signature:
    """The inputs of an instruction in textual order, and the optional group each is in."""

    def __init__(self, opdef: OpDef):
        self.inputs: List[S.Element] = []
        self.group_of: Dict[str, int] = {}  # slot -> index of its Optional_ group
        self.groups: List[S.Optional_] = []
        self._walk(opdef.syntax, None)
        self.by_slot = {e.slot: e for e in self.inputs}
        self.single_result = any(isinstance(e, S.Result) for e in opdef.elements)
        self.result_list = any(isinstance(e, S.ResultTypes) for e in opdef.elements)
        self.declares_args = any(isinstance(e, (S.Args, S.InitList)) for e in opdef.elements)

    def _walk(self, elements, group):
        for e in elements:
            if isinstance(e, S.Optional_):
                self.groups.append(e)
                self._walk(e.elements, len(self.groups) - 1)
            elif isinstance(e, _INPUTS):
                self.inputs.append(e)
                if group is not None:
                    self.group_of[e.slot] = group

    def text(self, opdef: OpDef) -> str:
        parts = []
        for e in self.inputs:
            p = e.slot + ("=None" if e.slot in self.group_of else "")
            parts.append(p if not isinstance(e, S.OpndList) or p.endswith("None") else p + "=[]")
        parts += [f"{m.slot}={'False' if m.flag else repr(m.default)}" for m in opdef.modifiers]
        if self.single_result:
            parts.append("result=None")
        elif self.result_list:
            parts.append("results=None")
        return f"{opdef.name}({', '.join(parts)})"


_SIGNATURES: Dict[str, _Signature] = {}


def _signature(opcode: str) -> _Signature:
    sig = _SIGNATURES.get(opcode)
    if sig is None:
        sig = _SIGNATURES[opcode] = _Signature(OPS[opcode])
    return sig


# ---- checks that keep the printed text parseable ---------------------------------------
def _check_name(name: Optional[str], what: str = "value") -> Optional[str]:
    if name is None:
        return None
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{what} name {name!r} is not an identifier (letter, then letters, "
                         "digits or '_'; or only digits)")
    return name


def _check_int(x: Any, what: str) -> int:
    if _index(x) is None:
        raise TypeError(f"{what} must be an integer, got {x!r}")
    x = _index(x)
    if abs(x) > INT_MAX:
        raise ValueError(f"{what} {x} out of range (-2^63+1 to 2^63-1)")
    return x


def _check_attribute(x: Any, what: str, depth: int = 0) -> Any:
    """An attribute value: int, bool, string, list or dict of those (copied)."""
    if depth > 50:
        raise ValueError(f"{what} nests too deeply")
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return _check_int(x, what)
    if isinstance(x, str):
        if not _STRING_CHARS.fullmatch(x):
            raise ValueError(f"{what}: string {x!r} may hold printable ASCII except '\"' only")
        return x
    if isinstance(x, (list, tuple)):
        return [_check_attribute(v, what, depth + 1) for v in x]
    if isinstance(x, dict):
        return _check_dictionary(x, what, depth + 1)
    raise TypeError(f"{what}: not an attribute value (int, bool, str, list, dict): {x!r}")


def _check_dictionary(d: Any, what: str, depth: int = 0) -> Dict[str, Any]:
    if not isinstance(d, dict):
        raise TypeError(f"{what} must be a dict, got {d!r}")
    out = {}
    for k, v in d.items():
        if not isinstance(k, str) or not (k in KNOWN_ATTRIBUTE_NAMES or _STRING_CHARS.fullmatch(k)):
            raise ValueError(f"{what}: bad attribute name {k!r}")
        out[k] = _check_attribute(v, f"{what} {k}", depth)
    return out


def _constant_value(value: Any, t: Type) -> Any:
    """A Python number as a literal of type t: ints widen to float/complex, then rounding."""
    scalar = t.component if isinstance(t, CoopMatrixType) else t
    if not isinstance(scalar, (ScalarType, BoolType)):
        raise TypeError(f"constant of type {t}: expected bool, a number type or a coopmatrix")
    if not isinstance(value, bool) and isinstance(scalar, ScalarType):
        if scalar.is_float and isinstance(value, int):
            value = float(value)
        elif scalar.is_complex and isinstance(value, (int, float)):
            value = complex(value)
    if not literal_fits(value, t):
        raise TypeError(f"constant {value!r} does not fit type {t}")
    if isinstance(value, int) and not isinstance(value, bool):
        _check_int(value, "integer constant")
    return canonical(value, t)


# ---- the builder ------------------------------------------------------------------------
class _Frame:
    __slots__ = ("region", "defined", "inst")

    def __init__(self, region: Region, defined: Optional[Set[Value]], inst: Optional[Instruction]):
        self.region = region
        self.defined = defined  # None: scope is not checked
        self.inst = inst  # the instruction owning the region


class RegionOp:
    """An instruction with regions, being built.

    ``with op as args:`` appends to region 0 and gives its arguments (a tuple; the RegionOp
    itself for instructions without region arguments, such as ``if``); ``op.else_()`` or
    ``op.region(i)`` enter further regions; ``op.results`` (``op.result``) are the values
    the instruction returns, usable after it.
    """

    def __init__(self, builder: "Builder", inst: Instruction):
        self._builder = builder
        self.inst = inst

    @property
    def results(self) -> Tuple[Value, ...]:
        return tuple(self.inst.results)

    @property
    def result(self) -> Value:
        if len(self.inst.results) != 1:
            raise ValueError(f"'{self.inst.opcode}' returns {len(self.inst.results)} values")
        return self.inst.results[0]

    @property
    def args(self) -> Tuple[Value, ...]:
        return tuple(self.inst.regions[0].args)

    def __enter__(self):
        self._builder._push(self.inst, 0)
        return self.args if _signature(self.inst.opcode).declares_args else self

    def __exit__(self, *exc) -> None:
        self._builder._pop()

    @contextmanager
    def region(self, index: int) -> Iterator["RegionOp"]:
        """Append to region ``index`` (created empty if the instruction has none yet)."""
        opdef = self.inst.opdef
        if not any(r.index == index for r in opdef.regions):
            raise ValueError(f"'{opdef.name}' has no region {index}")
        if index > len(self.inst.regions):
            raise ValueError(f"build region {index - 1} of '{opdef.name}' first")
        if index == len(self.inst.regions):
            self.inst.regions.append(Region())
        self._builder._push(self.inst, index)
        try:
            yield self
        finally:
            self._builder._pop()

    def else_(self):
        """The else region of ``if``."""
        return self.region(1)


class Builder:
    """Appends instructions to a region; regions of new instructions nest via ``with``.

    ``visible`` lists the values usable at the insertion point (function and enclosing
    region arguments and results); given, every operand is checked against it and the
    values the builder defines.  ``None`` turns the scope check off (e.g. for a pass that
    appends to a region in the middle of a function).
    """

    def __init__(self, region: Region, visible: Optional[Iterable[Value]] = None):
        self._frames: List[_Frame] = [_Frame(region, set(visible) if visible is not None else None,
                                             None)]
        #: the last instruction created
        self.last: Optional[Instruction] = None

    @property
    def insertion_region(self) -> Region:
        """The region new instructions are appended to."""
        return self._frames[-1].region

    # ---- scopes ----------------------------------------------------------------------
    def _push(self, inst: Instruction, index: int) -> None:
        region = inst.regions[index]
        checked = self._frames[0].defined is not None
        self._frames.append(_Frame(region, set(region.args) if checked else None, inst))

    def _pop(self) -> None:
        if len(self._frames) == 1:
            raise RuntimeError("no region to leave")
        self._frames.pop()

    def _use(self, v: Any, what: str) -> Value:
        if not isinstance(v, Value):
            raise TypeError(f"{what} must be a Value, got {v!r}")
        if self._frames[0].defined is None:
            return v
        if any(v in f.inst.results for f in self._frames[1:]):
            raise ValueError(f"{what}: {v!r} is a result of an instruction whose region is "
                             "being built; it is usable only after the instruction")
        if not any(v in f.defined for f in self._frames):
            raise ValueError(f"{what}: {v!r} is not defined in this region or an enclosing one")
        return v

    def _define(self, values: Iterable[Value]) -> None:
        frame = self._frames[-1]
        if frame.defined is not None:
            frame.defined.update(values)

    def name(self, value: Value, name: Optional[str]) -> Value:
        """Give a value a name hint (the printer keeps it unless it would clash)."""
        value.name = _check_name(name)
        return value

    # ---- the generic instruction ----------------------------------------------------------
    def op(self, opcode: str, *operands: Any, result: Optional[Type] = None,
           results: Optional[Sequence[Type]] = None, name: Optional[str] = None,
           names: Optional[Sequence[Optional[str]]] = None,
           arg_names: Optional[Sequence[Optional[str]]] = None, **kwargs: Any):
        """Append instruction ``opcode`` (may carry dotted modifiers: ``"gemm.atomic.t"``).

        Returns the result Value for instructions with one result type, a ``RegionOp`` for
        instructions with regions, and the Instruction otherwise.
        """
        if not isinstance(opcode, str):
            raise TypeError(f"opcode must be a string, got {opcode!r}")
        base, *words = opcode.split(".")
        if base in ALIASES:
            if not words or words[0] not in ALIASES[base]:
                raise ValueError(f"'{base}' needs one of: " + ", ".join("." + k for k in ALIASES[base]))
            base = ALIASES[base][words.pop(0)]
        if base not in OPS:
            raise ValueError(f"unknown instruction '{base}'")
        opdef, sig = OPS[base], _signature(base)

        args = list(operands)
        words += [a for a in args if isinstance(a, str)]
        args = [a for a in args if not isinstance(a, str)]
        if args and isinstance(args[-1], Type) and result is None and results is None \
                and (sig.single_result or sig.result_list):
            result = args.pop()
        modifiers = self._modifiers(opdef, words, kwargs)
        raw = self._bind(opdef, sig, args, kwargs)

        # operands and attributes, with optional groups present or absent as a whole
        slots: Dict[str, Any] = {}
        attrs: Dict[str, Any] = {}
        present = [any(_given(raw.get(e.slot)) for e in _inputs_of(g)) for g in sig.groups]
        result_type = result
        for e in sig.inputs:
            group_index = sig.group_of.get(e.slot)
            value = raw.get(e.slot)
            if group_index is not None and not present[group_index]:
                continue
            if not _given(value) and isinstance(e, (S.Opnd, S.Int, S.IntList, S.ExpandShape,
                                                    S.ConstantLiteral)):
                raise TypeError(f"'{base}' needs its operand '{e.slot}' ({sig.text(opdef)})")
            what = f"{base} {e.slot}"
            if isinstance(e, S.Opnd):
                slots[e.slot] = self._use(value, what)
            elif isinstance(e, (S.OpndList, S.InitList)):
                values = [] if value is None else [value] if isinstance(value, Value) else list(value)
                slots[e.slot] = [self._use(v, what) for v in values]
            elif isinstance(e, S.Int):
                attrs[e.slot] = _check_int(value, what)
            elif isinstance(e, S.IntList):
                ints = [value] if _index(value) is not None else list(value)
                if not ints:
                    raise ValueError(f"{what} must not be empty")
                attrs[e.slot] = [_check_int(i, what) for i in ints]
            elif isinstance(e, S.Slices):
                slots[e.slot] = [self._slice(x, what) for x in (value or [])]
            elif isinstance(e, S.ExpandShape):
                slots[e.slot] = [self._int_or_value(x, what) for x in value]
            elif isinstance(e, S.DictAttr):
                attrs[e.slot] = _check_dictionary(value if value is not None else {}, what)
            elif isinstance(e, S.ConstantLiteral):
                attrs[e.slot] = value  # converted once the type is known

        # results
        result_types: List[Type] = []
        if sig.single_result:
            if results is not None:
                raise TypeError(f"'{base}' returns one value: use result=, not results=")
            if result_type is None:
                result_type = opdef.result_type(slots, attrs, modifiers)
            if result_type is None:
                raise TypeError(f"'{base}' needs its result type (result=TYPE or a type as the "
                                "last argument)")
            result_types = [result_type]
        elif sig.result_list:
            if result is not None:
                results = [result]
            if results is None:  # for: the types of the loop-carried values
                results = [v.type for v in slots.get("init", [])]
            result_types = list(results)
        elif result is not None or results:
            raise TypeError(f"'{base}' returns no value")
        for rt in result_types:
            if not isinstance(rt, Type):
                raise TypeError(f"'{base}': result type must be a Type, got {rt!r}")
        if base == "constant":
            attrs["value"] = _constant_value(attrs["value"], result_types[0])

        if names is None:
            names = [name] if name is not None else []
        elif name is not None:
            raise TypeError("give name= or names=, not both")
        if len(names) > len(result_types):
            raise ValueError(f"{len(names)} names for {len(result_types)} results")
        names = list(names) + [None] * (len(result_types) - len(names))
        result_values = [Value(t, _check_name(n)) for t, n in zip(result_types, names)]

        # regions: region 0 declares the arguments of the header
        regions: List[Region] = []
        if opdef.regions:
            region_args: List[Value] = []
            if sig.declares_args:
                count = 0
                for e in opdef.elements:
                    if isinstance(e, S.Args):
                        count += e.count if isinstance(e.count, int) else len(slots[e.count])
                    elif isinstance(e, S.InitList) and e.slot in slots:
                        count += len(slots[e.slot])
                types = list(opdef.region_arg_types(slots, result_types))
                if len(types) != count:
                    raise ValueError(f"'{base}': {count} region arguments but {len(types)} types "
                                     "(do the results match the loop-carried values?)")
                hints = list(arg_names or [])
                if len(hints) > count:
                    raise ValueError(f"{len(hints)} argument names for {count} region arguments")
                hints += [None] * (count - len(hints))
                region_args = [Value(t, _check_name(n)) for t, n in zip(types, hints)]
            elif arg_names:
                raise TypeError(f"'{base}' declares no region arguments")
            regions.append(Region(args=region_args))
        elif arg_names:
            raise TypeError(f"'{base}' has no region")

        inst = Instruction(base, slots, result_values, regions, modifiers, attrs)
        self._frames[-1].region.append(inst)
        self._define(result_values)
        self.last = inst
        if opdef.regions:
            return RegionOp(self, inst)
        if sig.single_result:
            return result_values[0]
        return inst

    def _bind(self, opdef: OpDef, sig: _Signature, args: List[Any], kwargs: Dict[str, Any]) -> dict:
        """Positional operands in textual order; the last list operand takes the rest."""
        raw: Dict[str, Any] = {}
        inputs = sig.inputs
        for i, e in enumerate(inputs):
            if not args:
                break
            if i == len(inputs) - 1 and isinstance(e, S.OpndList) and len(args) > 1:
                raw[e.slot], args = list(args), []
            else:
                raw[e.slot] = args.pop(0)
        if args:
            raise TypeError(f"too many operands for '{opdef.name}' ({sig.text(opdef)})")
        for key, value in kwargs.items():
            slot = key if key in sig.by_slot else key[:-1] if key.endswith("_") else None
            if slot not in sig.by_slot:
                raise TypeError(f"'{opdef.name}' has no operand or modifier '{key}' "
                                f"({sig.text(opdef)})")
            if slot in raw:
                raise TypeError(f"'{opdef.name}': operand '{slot}' given twice")
            raw[slot] = value
        return raw

    @staticmethod
    def _modifiers(opdef: OpDef, words: List[str], kwargs: Dict[str, Any]) -> dict:
        """Dotted words bind to modifier slots in order (as in the text); keywords by slot."""
        bound: Dict[str, Any] = {}
        mods = {m.slot: m for m in opdef.modifiers}
        slot = 0
        for word in words:
            while slot < len(opdef.modifiers) and word not in opdef.modifiers[slot].choices:
                slot += 1
            if slot == len(opdef.modifiers):
                allowed = ", ".join(c for m in opdef.modifiers for c in m.choices) or "none"
                raise ValueError(f"'{opdef.name}' has no modifier '{word}' (allowed in this "
                                 f"order: {allowed})")
            mod = opdef.modifiers[slot]
            bound[mod.slot] = True if mod.flag else word
            slot += 1
        for key in list(kwargs):
            name = key if key in mods else key[:-1] if key.endswith("_") and key[:-1] in mods else None
            if name is None:
                continue
            value = kwargs.pop(key)
            mod = mods[name]
            if name in bound:
                raise TypeError(f"modifier '{name}' of '{opdef.name}' given twice")
            if mod.flag:
                if not isinstance(value, bool):
                    raise TypeError(f"modifier '{name}' of '{opdef.name}' is a flag (True/False)")
                if value:
                    bound[name] = True
            elif value is not None:
                if value not in mod.choices:
                    raise ValueError(f"modifier '{name}' of '{opdef.name}' must be one of "
                                     f"{', '.join(mod.choices)}, got {value!r}")
                bound[name] = value
        for mod in opdef.modifiers:
            if mod.required and mod.slot not in bound:
                raise TypeError(f"'{opdef.name}' needs its modifier '{mod.slot}' (one of "
                                f"{', '.join(mod.choices)})")
        return bound

    def _int_or_value(self, x: Any, what: str) -> Union[int, Value]:
        if isinstance(x, Value):
            return self._use(x, what)
        return _check_int(x, what)

    def _slice(self, x: Any, what: str) -> Tuple[Union[int, Value], Union[int, Value]]:
        """``i`` (an index: rank-reducing) or ``(offset, size)``; ints or Values."""
        if isinstance(x, (list, tuple)):
            if len(x) != 2:
                raise ValueError(f"{what}: a slice is (offset, size), got {x!r}")
            offset, size = x
        else:
            offset, size = x, 0
        entry = (self._int_or_value(offset, what), self._int_or_value(size, what))
        if any(isinstance(p, int) and p < 0 for p in entry):
            raise ValueError(f"{what}: offsets and sizes must not be negative")
        return entry


def _given(x: Any) -> bool:
    if x is None:
        return False
    if isinstance(x, (list, tuple, dict)):
        return bool(x)
    return True


def _inputs_of(group: S.Optional_):
    return [e for e in S.flatten(group.elements) if isinstance(e, _INPUTS)]


def _method_name(opcode: str) -> str:
    return opcode + "_" if keyword.iskeyword(opcode) or hasattr(Builder, opcode) else opcode


def _make_method(opcode: str):
    def method(self, *operands, **kwargs):
        return self.op(opcode, *operands, **kwargs)

    opdef = OPS[opcode]
    method.__name__ = _method_name(opcode)
    method.__qualname__ = "Builder." + method.__name__
    method.__doc__ = f"{_signature(opcode).text(opdef)}: {opdef.doc} ({opdef.kind})"
    return method


for _opcode in OPS:
    setattr(Builder, _method_name(_opcode), _make_method(_opcode))


# ---- programs and functions ---------------------------------------------------------------
Param = Union[Type, Tuple[Optional[str], Type], Tuple[Optional[str], Type, Dict[str, Any]]]


class ProgramBuilder:
    """Builds a Program function by function; ``str(pb)`` is the canonical print."""

    def __init__(self):
        self.program = Program()

    @contextmanager
    def function(self, name: str, params: Sequence[Param] = (),
                 attributes: Optional[Dict[str, Any]] = None) -> Iterator[Tuple[Any, ...]]:
        """``with pb.function("k", [("A", memref(F32, 8), {"alignment": 64})]) as (b, A):``

        A parameter is a type, ``(name, type)`` or ``(name, type, attributes)``; the
        context gives the Builder for the body followed by the parameter values.
        """
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"function name {name!r} is not an identifier")
        if any(f.name == name for f in self.program.functions):
            raise ValueError(f"function @{name} is already defined")
        args: List[Argument] = []
        for p in params:
            if isinstance(p, Type):
                p = (None, p)
            if not isinstance(p, tuple) or len(p) not in (2, 3) or not isinstance(p[1], Type):
                raise TypeError(f"a parameter is a type, (name, type) or (name, type, "
                                f"attributes); got {p!r}")
            pattrs = _check_dictionary(p[2] if len(p) == 3 else {}, f"parameter {p[0]}")
            args.append(Argument(Value(p[1], _check_name(p[0], "parameter")), pattrs))
        names = [a.value.name for a in args if a.value.name is not None
                 and not a.value.name.isdigit()]
        if len(names) != len(set(names)):
            raise ValueError(f"parameter names of @{name} must be distinct: {names}")
        func = Function(name, args, Region(),
                        _check_dictionary(attributes or {}, f"attributes of @{name}"))
        self.program.functions.append(func)
        b = Builder(func.body, [a.value for a in args])
        yield (b, *(a.value for a in args))

    def build(self) -> Program:
        return self.program

    def __str__(self) -> str:
        return str(self.program)
