"""The instruction table: every instruction of the language, described once.

An entry says the instruction's region kind (collective, SPMD or mixed), its dotted
modifiers, its operand syntax (a sequence of ``ttlc.ir.syntax`` elements), the
types of the region arguments it declares, and a line of documentation.  The
parser, the printer, the builder and the structural checks of the verifier are
all derived from this table; semantic checks live in ``ttlc.check``.

Entries also carry facts that the rest of the compiler reads here instead of keeping
its own list of opcodes (the traits, ``ttlc.ir.traits``): the memory each instruction
reads and writes, the operand roles of BLAS instructions, and the rule giving the
result type (``ttlc.ir.infer``).  The sets of opcodes that several parts treat alike
(``SUBGROUP_OPS``, ``SPMD_REGION_OPS``, ...) are defined at the end, once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from . import infer
from . import syntax as S
from .core import Instruction
from .traits import BlasOperands, MemoryEffect, reads, writes
from .types import BOOL, INDEX, SCALAR_TYPES, CoopMatrixType, GroupType, I32, MemrefType, Type

COLLECTIVE, SPMD, MIXED = "collective", "spmd", "mixed"


@dataclass(frozen=True)
class Mod:
    """A dotted modifier slot such as the transpose of gemm or the scope of an atomic.

    ``flag`` slots hold a bool (``.atomic``); others hold one of ``choices`` or the
    default.  ``required`` slots have no default (``group_id.x``).
    """

    slot: str
    choices: Tuple[str, ...]
    default: Optional[str] = None
    flag: bool = False
    required: bool = False

    @property
    def unset(self):
        return False if self.flag else self.default


ATOMIC = Mod("atomic", ("atomic",), flag=True)
TRANSPOSE_A = Mod("ta", ("n", "t"), "n")
TRANSPOSE_B = Mod("tb", ("n", "t"), "n")
CHECKED = Mod("checked", ("rows_checked", "cols_checked", "both_checked"), None)
SCOPE = Mod("scope", ("cross_device", "device", "work_group", "subgroup"), "work_group")
SEMANTICS = Mod("semantics", ("relaxed", "acquire", "release", "acquire_release",
                              "sequentially_consistent"), "relaxed")
DIM = Mod("dim", ("x", "y", "z"), required=True)
REDUCE_MODE = Mod("mode", ("row", "column"), required=True)


@dataclass
class OpDef:
    name: str
    kind: str
    syntax: Tuple[S.Element, ...]
    doc: str
    family: str
    modifiers: Tuple[Mod, ...] = ()
    #: types of the region arguments, from the operand slots and result types
    region_arg_types: Optional[Callable[[dict, List[Type]], List[Type]]] = None
    #: no side effects: may be removed when its results are unused
    pure: bool = False
    #: the memory it reads and writes; None: not declared (it takes no memref operand)
    effects: Optional[Tuple[MemoryEffect, ...]] = None
    #: a collective BLAS instruction: the memref operands it reads and writes
    blas: Optional[BlasOperands] = None
    #: the result type its operands fix (``ttlc.ir.infer``); None: always given
    infer_type: Optional[infer.Rule] = None

    def __post_init__(self):
        if self.blas is not None and self.effects is None:
            self.effects = self.blas.effects()
        self.elements = tuple(S.flatten(self.syntax))
        self.regions = tuple(e for e in self.elements if isinstance(e, S.RegionEl))
        #: the elements that declare region arguments, in order
        self.arg_elements = tuple(e for e in self.elements if isinstance(e, (S.Args, S.InitList)))
        self.slots = tuple(e.slot for e in self.elements
                           if isinstance(e, (S.Opnd, S.OpndList, S.Slices, S.ExpandShape, S.InitList)))
        self.has_results = any(isinstance(e, (S.Result, S.ResultTypes)) for e in self.elements)
        #: operand slots holding a memref or group (``effects`` says what is done with them)
        self.memory_slots = tuple(e.slot for e in self.elements
                                  if isinstance(e, S.Opnd) and e.memory)

    def result_type(self, slots: dict, attrs: dict, modifiers: dict) -> Optional[Type]:
        """The result type the operands fix (``infer_type``), or None."""
        if self.infer_type is None:
            return None
        modifiers = {m.slot: modifiers.get(m.slot, m.unset) for m in self.modifiers}
        return self.infer_type(slots, attrs, modifiers)

    def arg_offset(self, inst: Instruction, group: str) -> int:
        offset = 0
        for e in self.elements:
            if getattr(e, "group", None) == group:
                return offset
            if isinstance(e, S.Args):
                offset += e.size(inst)
            elif isinstance(e, S.InitList):
                offset += len(inst.slots[e.slot])
        raise KeyError(group)

    def print_modifiers(self, modifiers: Dict[str, object]) -> str:
        """Dotted suffixes; a default is written only where a later suffix needs its place."""
        out: List[str] = []
        later_choices: set = set()
        for mod in reversed(self.modifiers):
            value = modifiers.get(mod.slot, mod.unset)
            if mod.flag:
                if value:
                    out.append("." + mod.choices[0])
                    later_choices.update(mod.choices)
                continue
            if value is None:
                continue
            if mod.required or value != mod.default or later_choices & set(mod.choices):
                out.append("." + str(value))
                later_choices.update(mod.choices)
        return "".join(reversed(out))


OPS: Dict[str, OpDef] = {}

#: alternative spellings found in the reference's own examples: ``cmp.lt``, ``math.exp``
ALIASES: Dict[str, Dict[str, str]] = {"cmp": {}, "math": {}}


def _op(name, kind, syntax, doc, family, modifiers=(), region_arg_types=None, pure=False,
        **traits):
    OPS[name] = OpDef(name, kind, tuple(syntax), doc, family, tuple(modifiers), region_arg_types,
                      pure, **traits)


# ---- shorthands for common syntax ---------------------------------------------------
C = S.Lit(",", ", ")
COLON = S.Lit(":", " : ")
RES = (COLON, S.Result())


def _operands(*slots, memory=()):
    out: List[S.Element] = []
    for i, slot in enumerate(slots):
        if i:
            out.append(C)
        out.append(S.Opnd(slot, memory=slot in memory))
    return out


def _memref(slot="tensor"):
    return S.Opnd(slot, memory=True)


def _indexed():
    return [_memref(), S.Lit("["), S.OpndList("index"), S.Lit("]")]


def _position():
    return [_memref(), S.Lit("["), S.Opnd("x"), S.Lit(","), S.Opnd("y"), S.Lit("]")]


# ---- collective instructions ---------------------------------------------------------
_op("alloca", COLLECTIVE,
    [S.Optional_([S.DictAttr("attributes")], lambda i: bool(i.attrs.get("attributes"))), *RES],
    "Allocate local memory for the rest of the enclosing region.", "alloca", pure=True)

#: (operands, modifiers, the spec's names of the memref operands A, B(, C), doc)
_BLAS = {
    "axpby": (("alpha", "A", "beta", "B"), (ATOMIC, TRANSPOSE_A), "AB",
              "B := alpha op(A) + beta B"),
    "gemm": (("alpha", "A", "B", "beta", "C"), (ATOMIC, TRANSPOSE_A, TRANSPOSE_B), "ABC",
             "C := alpha op1(A) op2(B) + beta C"),
    "gemv": (("alpha", "A", "B", "beta", "C"), (ATOMIC, TRANSPOSE_A), "Abc",
             "c := alpha op(A) b + beta c"),
    "ger": (("alpha", "A", "B", "beta", "C"), (ATOMIC,), "abC", "C := alpha a b^T + beta C"),
    "hadamard": (("alpha", "A", "B", "beta", "C"), (ATOMIC,), "ABC", "C := alpha A .* B + beta C"),
    "sum": (("alpha", "A", "beta", "B"), (ATOMIC, TRANSPOSE_A), "Ab",
            "b := alpha op(A) 1 + beta b"),
}
_BLAS_MEMREFS = ("A", "B", "C")  # as far as present; the last one is written

for _name, (_slots, _mods, _names, _doc) in _BLAS.items():
    _memrefs = tuple(s for s in _slots if s in _BLAS_MEMREFS)
    _op(_name, COLLECTIVE, _operands(*_slots, memory=_memrefs), _doc, "blas", _mods,
        blas=BlasOperands(_memrefs[:-1], _memrefs[-1], tuple(_names)))

_op("cumsum", COLLECTIVE,
    [S.Opnd("alpha"), C, _memref("A"), C, S.Int("mode"), C, S.Opnd("beta"), C, _memref("B")],
    "B := alpha (cumulative sum of A along a mode) + beta B", "blas", (ATOMIC,),
    blas=BlasOperands(("A",), "B", ("A", "B")))

# ttlc's own: what checked code tests of a BLAS instruction's operand sizes at run time
# (docs/language-notes.md); inserted by the pass insert-shape-checks, never written by hand
_op("check_shapes", COLLECTIVE,
    [S.Lit("["), S.IntList("orders"), S.Lit("]", "] "), S.CommaValues("sizes")],
    "Checked code: the sizes (A's, B's(, C's) modes, in order) of a BLAS instruction's "
    "operands satisfy its shape rules.", "check_shapes",
    (Mod("rule", tuple(_BLAS) + ("cumsum",), required=True), TRANSPOSE_A, TRANSPOSE_B))

# ttlc's own: where a new point (tile) of a foreach (foreach_tile) body begins, for checked
# code's race detection once lower-foreach has made the body a loop (docs/language-notes.md);
# inserted by the pass insert-iteration-marks, never written by hand
_op("check_iteration", SPMD, [],
    "Checked code: the local memory accesses that follow are made for a new point of the "
    "iteration space, by other work-items than those before.", "check_iteration")

_op("foreach", COLLECTIVE,
    [S.Lit("("), S.Args("vars", "from"), S.Lit(")"), S.Lit("="), S.Lit("("), S.OpndList("from"),
     S.Lit(")"), S.Lit(","), S.Lit("("), S.OpndList("to"), S.Lit(")"), S.RegionEl("spmd")],
    "Run an SPMD region over every point of an iteration space, in no particular order.",
    "foreach", region_arg_types=lambda slots, results: [v.type for v in slots["from"]])

_op("foreach_tile", COLLECTIVE,
    [S.Lit("("), S.Args("vars", "from"), S.Lit(")"), S.Lit("="), S.Lit("("), S.OpndList("from"),
     S.Lit(")"), S.Lit(","), S.Lit("("), S.OpndList("to"), S.Lit(")"), S.Lit("as", " as "), S.Lit("("),
     S.Args("sizes", "from"), S.Lit(")"), S.Lit("<="), S.Lit("("), S.IntList("tile_shape"),
     S.Lit(")"), S.RegionEl("spmd")],
    "Run an SPMD region once per tile of an iteration space; sizes give the tile extent.",
    "foreach", region_arg_types=lambda slots, results: [v.type for v in slots["from"]] * 2)

_op("parallel", COLLECTIVE, [S.RegionEl("spmd")], "Open an SPMD region.", "parallel")

_op("lifetime_stop", COLLECTIVE, [_memref("object")], "End the lifetime of an alloca.",
    "lifetime_stop", effects=())

# ---- mixed instructions --------------------------------------------------------------
ARITH_BINARY = {
    "add": "Sum", "sub": "Difference", "mul": "Product", "div": "Quotient",
    "rem": "Remainder", "max": "Maximum", "min": "Minimum",
    "shl": "Left shift", "shr": "Arithmetic right shift",
    "and": "Bitwise and", "or": "Bitwise or", "xor": "Bitwise xor",
}
for _name, _doc in ARITH_BINARY.items():
    _op(_name, MIXED, [*_operands("a", "b"), *RES], _doc + " of the operands.", "arith_binary",
        pure=True, infer_type=infer.same_as("a"))

ARITH_UNARY = {"abs": "Absolute value", "neg": "Negation", "not": "Bitwise not",
               "conj": "Complex conjugate", "im": "Imaginary part", "re": "Real part"}
for _name, _doc in ARITH_UNARY.items():
    _op(_name, MIXED, [S.Opnd("a"), *RES], _doc + " of the operand.", "arith_unary", pure=True,
        infer_type=infer.real_part if _name in ("abs", "im", "re") else infer.same_as("a"))

_op("associated", MIXED, [_memref(), *RES],
    "True if the memref or group has a non-null base address.", "associated", pure=True,
    effects=(), infer_type=infer.fixed(BOOL))

_ATOMIC_MODS = (SCOPE, SEMANTICS)
_op("atomic_load", MIXED, [*_indexed(), *RES], "Load an element atomically.", "atomic_load",
    _ATOMIC_MODS, effects=(reads("tensor", atomic=True),), infer_type=infer.element)
_op("atomic_store", MIXED, [S.Opnd("value"), C, *_indexed()], "Store an element atomically.",
    "atomic_store", _ATOMIC_MODS, effects=(writes("tensor", atomic=True),))
ATOMIC_UPDATES = ("atomic_add", "atomic_max", "atomic_min")
for _name in ATOMIC_UPDATES:
    _op(_name, MIXED, [S.Opnd("value"), C, *_indexed(), *RES],
        "Atomically update an element and return its previous value.", "atomic_update",
        _ATOMIC_MODS, effects=(writes("tensor", atomic=True),), infer_type=infer.element)

_op("barrier", MIXED, [], "Wait for all work-items of the work-group; fence global/local memory.",
    "barrier", (Mod("global", ("global",), flag=True), Mod("local", ("local",), flag=True)))

BUILTIN_TYPES = {"group_id": "index", "num_groups": "index", "num_subgroups": "i32",
                 "subgroup_size": "i32", "subgroup_id": "i32", "subgroup_linear_id": "i32",
                 "subgroup_local_id": "i32"}
for _name in ("group_id", "num_groups", "num_subgroups", "subgroup_size"):
    _op(_name, MIXED, list(RES), f"The {_name.replace('_', ' ')} builtin.", "builtin",
        (DIM,) if _name != "subgroup_size" else (), pure=True,
        infer_type=infer.fixed(SCALAR_TYPES[BUILTIN_TYPES[_name]]))
for _name in ("subgroup_id", "subgroup_linear_id", "subgroup_local_id"):
    _op(_name, SPMD, list(RES), f"The {_name.replace('_', ' ')} builtin.", "builtin",
        (DIM,) if _name == "subgroup_id" else (), pure=True,
        infer_type=infer.fixed(SCALAR_TYPES[BUILTIN_TYPES[_name]]))

_op("cast", MIXED, [S.Opnd("a"), *RES], "Convert a scalar or coopmatrix to another type.", "cast",
    pure=True)

COMPARISONS = {"equal": "eq", "not_equal": "ne", "greater_than": "gt",
               "greater_than_equal": "ge", "less_than": "lt", "less_than_equal": "le"}
for _name, _short in COMPARISONS.items():
    _op(_name, MIXED, [*_operands("a", "b"), *RES], f"Compare the operands ({_short}).",
        "compare", pure=True, infer_type=infer.fixed(BOOL))
    ALIASES["cmp"][_short] = _name

_op("constant", MIXED, [S.ConstantLiteral(), *RES], "A constant scalar or coopmatrix.",
    "constant", pure=True)

_op("expand", MIXED,
    [_memref(), S.Lit("["), S.Int("mode"), S.Lit("->"), S.ExpandShape("shape"), S.Lit("]"),
     *RES], "View one mode of a memref as several modes.", "expand", pure=True, effects=(),
    infer_type=infer.expand)

_op("for", MIXED,
    [S.Args("loop_var"), S.Lit("="), S.Opnd("from"), S.Lit(","), S.Opnd("to"),
     S.Optional_([S.Lit(","), S.Opnd("step")], lambda i: "step" in i.slots),
     S.Optional_([S.Lit("init", " init"), S.Lit("("), S.InitList("iter_args", "init"), S.Lit(")"),
                  S.Lit("->", " -> "), S.ResultTypes()], lambda i: bool(i.slots.get("init"))),
     S.RegionEl("inherit"),
     S.Optional_([S.Lit("attributes", " attributes"), S.DictAttr("attributes")],
                 lambda i: bool(i.attrs.get("attributes")))],
    "A sequential loop with optional loop-carried values.", "for",
    region_arg_types=lambda slots, results: [slots["from"].type] + list(results))

_op("fuse", MIXED,
    [_memref(), S.Lit("["), S.Int("from"), S.Lit(","), S.Int("to"), S.Lit("]"), *RES],
    "View adjacent modes of a memref as one mode.", "fuse", pure=True, effects=(),
    infer_type=infer.fuse)

_op("if", MIXED,
    [S.Opnd("condition"),
     S.Optional_([S.Lit("->", " -> "), S.ResultTypes()], lambda i: bool(i.results)),
     S.RegionEl("inherit", 0),
     S.Optional_([S.Lit("else", " else"), S.RegionEl("inherit", 1)], lambda i: len(i.regions) > 1)],
    "Run one of two regions; both may yield results.", "if")

_op("load", MIXED, [*_indexed(), *RES], "Load an element of a memref or a memref of a group.",
    "load", pure=True, effects=(reads("tensor"),), infer_type=infer.loaded)

MATH_UNARY = ("cos", "sin", "exp", "exp2", "log", "log2", "native_cos", "native_sin",
              "native_exp", "native_exp2", "native_log", "native_log2")
for _name in MATH_UNARY:
    _op(_name, MIXED, [S.Opnd("a"), *RES], f"The {_name} math function.", "math", pure=True,
        infer_type=infer.same_as("a"))
    ALIASES["math"][_name] = _name

_op("size", MIXED, [_memref(), S.Lit("["), S.Int("mode"), S.Lit("]"), *RES],
    "A mode size of a memref or the size of a group.", "size", pure=True, effects=(),
    infer_type=infer.fixed(INDEX))

_op("subview", MIXED, [_memref(), S.Lit("["), S.Slices("slices"), S.Lit("]"), *RES],
    "View a block of a memref.", "subview", pure=True, effects=(), infer_type=infer.subview)

_op("store", MIXED, [S.Opnd("value"), C, *_indexed()], "Store an element in a memref.", "store",
    effects=(writes("tensor"),))

_op("yield", MIXED, [S.Lit("(", " ("), S.CommaValues("values"), S.Lit(")")],
    "Return values from the region of for, if or cooperative_matrix_apply.", "yield")

# ---- SPMD instructions ---------------------------------------------------------------
_op("cooperative_matrix_apply", SPMD,
    [S.Lit("("), S.Args("ijv", 3), S.Lit(")"), S.Lit("=", aliases=("in",)), S.Opnd("a"),
     S.Lit("->", " -> "), S.Result(), S.RegionEl("inherit")],
    "Replace every component of a coopmatrix by the value its region yields.", "coop_apply",
    infer_type=infer.same_as("a"),
    region_arg_types=lambda slots, results: [I32, I32, results[0].component]
    if results and isinstance(results[0], CoopMatrixType) else [I32, I32, I32])

_COOP_MEM_MODS = (TRANSPOSE_A, CHECKED)
_op("cooperative_matrix_load", SPMD, [*_position(), *RES], "Load a coopmatrix from a memref.",
    "coop_load", _COOP_MEM_MODS, effects=(reads("tensor"),))
_op("cooperative_matrix_atomic_load", SPMD, [*_position(), *RES],
    "Load a coopmatrix component-wise atomically.", "coop_load", _COOP_MEM_MODS + _ATOMIC_MODS,
    effects=(reads("tensor", atomic=True),))
_op("cooperative_matrix_store", SPMD, [S.Opnd("value"), C, *_position()],
    "Store a coopmatrix in a memref.", "coop_store", _COOP_MEM_MODS, effects=(writes("tensor"),))
_op("cooperative_matrix_atomic_store", SPMD, [S.Opnd("value"), C, *_position()],
    "Store a coopmatrix component-wise atomically.", "coop_store", _COOP_MEM_MODS + _ATOMIC_MODS,
    effects=(writes("tensor", atomic=True),))
for _name in ("cooperative_matrix_atomic_add", "cooperative_matrix_atomic_max",
              "cooperative_matrix_atomic_min"):
    _op(_name, SPMD, [S.Opnd("value"), C, *_position(), *RES],
        "Update a memref block component-wise atomically; returns the previous values.",
        "coop_atomic_update", _COOP_MEM_MODS + _ATOMIC_MODS,
        effects=(writes("tensor", atomic=True),), infer_type=infer.same_as("value"))

_op("cooperative_matrix_construct", SPMD, [S.Opnd("a"), *RES],
    "A coopmatrix with every entry set to a uniform number.", "coop_construct", pure=True)
_op("cooperative_matrix_extract", SPMD,
    [S.Opnd("matrix"), S.Lit("["), S.Int("index"), S.Lit("]"), *RES],
    "An entry of the work-item's part of a coopmatrix.", "coop_extract", pure=True,
    infer_type=infer.component)
_op("cooperative_matrix_insert", SPMD,
    [S.Opnd("value"), C, S.Opnd("matrix"), S.Lit("["), S.Int("index"), S.Lit("]"), *RES],
    "A copy of a coopmatrix with one entry of the work-item's part replaced.", "coop_insert",
    pure=True, infer_type=infer.same_as("matrix"))
_op("cooperative_matrix_mul_add", SPMD, [*_operands("a", "b", "c"), *RES], "D := A B + C",
    "coop_mul_add", pure=True, infer_type=infer.same_as("c"))
_op("cooperative_matrix_prefetch", SPMD,
    [S.Int("cache_level"), C, *_position(), C, S.Int("rows"), C, S.Int("cols")],
    "Prefetch a block of a memref into a cache level (a hint).", "coop_prefetch", effects=())
for _name in ("cooperative_matrix_reduce_add", "cooperative_matrix_reduce_max",
              "cooperative_matrix_reduce_min"):
    _op(_name, SPMD, [S.Opnd("a"), *RES], "Reduce the rows or columns of a coopmatrix.",
        "coop_reduce", (REDUCE_MODE,), pure=True, infer_type=infer.reduced)
_op("cooperative_matrix_scale", SPMD, [*_operands("a", "b"), *RES],
    "Multiply a coopmatrix by a scalar.", "coop_scale", pure=True, infer_type=infer.same_as("b"))

_op("subgroup_broadcast", SPMD, [*_operands("a", "lane"), *RES],
    "The value of one work-item, given to every work-item of the subgroup.", "subgroup_broadcast",
    pure=True, infer_type=infer.same_as("a"))
#: scans and reductions over a subgroup
SUBGROUP_OPS = tuple(f"subgroup_{k}_{op}" for k in ("exclusive_scan", "inclusive_scan", "reduce")
                     for op in ("add", "max", "min"))
for _name in SUBGROUP_OPS:
    _op(_name, SPMD, [S.Opnd("a"), *RES], "A scan or reduction over the subgroup.", "subgroup_op",
        pure=True, infer_type=infer.same_as("a"))


KEYWORDS = frozenset(OPS) | frozenset(ALIASES)

# ---- sets of instructions that several parts of the compiler treat alike -----------------
#: collective instructions opening an SPMD region
SPMD_REGION_OPS = ("parallel", "foreach", "foreach_tile")
#: SPMD regions over an iteration space
FOREACH_OPS = ("foreach", "foreach_tile")
#: instructions whose regions end with a ``yield`` of the instruction's results
YIELDING_OPS = ("for", "if", "cooperative_matrix_apply")
#: views of a memref operand's memory
VIEW_OPS = ("subview", "expand", "fuse")
#: the views whose sizes may be operands, and the slot holding them (a subview's slices
#: are (offset, size) pairs, expand's shape entries are sizes)
SIZED_VIEWS = {"subview": "slices", "expand": "shape"}
#: ttlc's own instructions, not the language's: what passes insert for checked code
INTERNAL_OPS = ("check_shapes", "check_iteration")
#: instructions with regions; their effects are those of their regions (none of their own)
REGION_OPS = tuple(name for name, d in OPS.items() if d.regions)


def view_sizes(inst: Instruction) -> list:
    """The values a view takes its sizes from (none for ``fuse`` and other instructions)."""
    slot = SIZED_VIEWS.get(inst.opcode)
    if slot is None:
        return []
    entries = inst.slots[slot]
    sizes = [size for _, size in entries] if inst.opcode == "subview" else entries
    return [v for v in sizes if not isinstance(v, int)]


def static_size(inst: Instruction) -> Optional[int]:
    """The value a ``size`` instruction has at compile time: a static mode of its memref
    or the static size of its group; None when the operand's type leaves it open (or the
    mode is out of range, which the verifier reports)."""
    t, mode = inst.slots["tensor"].type, inst.attrs["mode"]
    if isinstance(t, MemrefType):
        return t.shape[mode] if 0 <= mode < t.order else None
    return t.size if isinstance(t, GroupType) else None


assert all((d.effects is None) == (not d.memory_slots) for d in OPS.values()), \
    "an instruction takes a memref operand exactly when it declares its memory effects"



def compose_tables(*tables: Dict[str, Callable]) -> Dict[str, Callable]:
    """One opcode -> implementation table from the tables of several modules (a back end's
    emitters, the interpreter's semantics); an opcode claimed twice is a mistake."""
    out: Dict[str, Callable] = {}
    for table in tables:
        for op, fn in table.items():
            if op in out:
                raise AssertionError(f"two implementations of {op}: {out[op].__module__}."
                                     f"{out[op].__name__} and {fn.__module__}.{fn.__name__}")
            out[op] = fn
    return out


#: attribute names written without quotes (spec section "Attributes")
KNOWN_ATTRIBUTE_NAMES = ("alignment", "shape_gcd", "stride_gcd", "subgroup_size", "unroll",
                         "work_group_size")
