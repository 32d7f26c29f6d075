"""CUDA Tile IR's types and the table of its operations, described once.

Every operation ttlc emits has one entry in ``OPS``: its bytecode opcode (NVIDIA's
registry, ``BytecodeOpcodes.td`` of github.com/NVIDIA/cuda-tile), the layout of its
operands, attributes, flags and results in the Binary Format, whether it has regions, and
the custom-assembly form its MLIR text takes (as ``tileirdisasm`` prints it).  The text
printer (``text``) and the bytecode writer (``bytecode``) both walk these entries, so an
operation cannot be written one way and printed another.  Types are small value classes
that know their text and their entry of the bytecode type table.

The bytecode written is version 13.3 (``VERSION``): ``tileiras`` 13.4 reads 13.1-13.4.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

#: bytecode version (major, minor, tag)
VERSION = (13, 3, 0)

#: element types: text name -> bytecode type tag (``BytecodeTypeOpcodes.td``)
ELEMENTS = {"i1": 0, "i8": 1, "i16": 2, "i32": 3, "i64": 4, "f16": 5, "bf16": 6,
            "f32": 7, "tf32": 8, "f64": 9}
TAG_PTR, TAG_TILE, TAG_TENSOR_VIEW, TAG_PARTITION_VIEW, TAG_FUNCTION, TAG_TOKEN = 12, 13, 14, 15, 16, 17
#: the bytecode's spelling of a dynamic size or stride (MLIR's ShapedType::kDynamic)
DYNAMIC = -(1 << 63)
#: padding values of partition views (``PaddingValue``), in code order
PADDING = ("zero", "neg_zero", "nan", "pos_inf", "neg_inf")


class Type:
    """A Tile IR type: ``text`` is its print, ``key`` identifies it in the type table."""

    def text(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Scalar(Type):
    name: str  # a key of ELEMENTS

    def text(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.name[0] in "fbt"

    @property
    def bits(self) -> int:
        return 1 if self.name == "i1" else int(self.name.lstrip("ibft"))


@dataclass(frozen=True)
class Ptr(Type):
    pointee: Scalar

    def text(self) -> str:
        return f"ptr<{self.pointee.text()}>"


def _dims(dims) -> str:
    return "x".join("?" if d is None else str(d) for d in dims)


@dataclass(frozen=True)
class Tile(Type):
    element: Type  # Scalar or Ptr
    shape: Tuple[int, ...] = ()

    def text(self) -> str:
        inner = self.element.text()
        return f"tile<{_dims(self.shape)}x{inner}>" if self.shape else f"tile<{inner}>"


@dataclass(frozen=True)
class TensorView(Type):
    """Shape and strides in elements; None marks a dynamic one (an operand of
    ``make_tensor_view``)."""

    element: Scalar
    shape: Tuple[Optional[int], ...]
    strides: Tuple[Optional[int], ...]

    def text(self) -> str:
        strides = ",".join("?" if s is None else str(s) for s in self.strides)
        return f"tensor_view<{_dims(self.shape)}x{self.element.text()}, strides=[{strides}]>"


@dataclass(frozen=True)
class PartitionView(Type):
    tile: Tuple[int, ...]
    view: TensorView
    padding: Optional[str] = None  # one of PADDING

    def text(self) -> str:
        pad = f", padding_value = {self.padding}" if self.padding else ""
        return f"partition_view<tile=({_dims(self.tile)}){pad}, {self.view.text()}>"


@dataclass(frozen=True)
class Token(Type):
    def text(self) -> str:
        return "token"


@dataclass(frozen=True)
class Function(Type):
    inputs: Tuple[Type, ...]
    results: Tuple[Type, ...] = ()

    def text(self) -> str:  # not printed in text (entries print their arguments)
        return "(" + ", ".join(t.text() for t in self.inputs) + ") -> ()"


def scalar_tile(name: str) -> Tile:
    return Tile(Scalar(name))


TOKEN = Token()

# ---- enumerations (their bytecode codes are the positions) ---------------------------------
ENUMS: Dict[str, Tuple[str, ...]] = {
    "rounding": ("nearest_even", "zero", "negative_inf", "positive_inf", "approx", "full",
                 "nearest_int_to_zero", "nearest_away"),
    "signedness": ("unsigned", "signed"),
    "overflow": ("none", "nsw", "nuw", "nw"),
    "predicate": ("equal", "not_equal", "less_than", "less_than_or_equal", "greater_than",
                  "greater_than_or_equal"),
    "ordering": ("unordered", "ordered"),
    "memory_ordering": ("weak", "relaxed", "acquire", "release", "acq_rel"),
    "memory_scope": ("tl_blk", "device", "sys"),
    "atomic_mode": ("and", "or", "xor", "add", "addf", "max", "min", "umax", "umin", "xchg"),
}


@dataclass(frozen=True)
class Attr:
    """An attribute of an operation.  ``kind`` says how it is written: ``enum`` (a varint
    code of ``ENUMS[enum]``), ``int`` (a varint), ``bool`` (a byte), ``dense`` (a scalar
    constant: an index into
    the constant section), ``i32s`` (a count and 4-byte integers), ``identities`` (an array
    of tagged float or integer attributes, for reductions), ``unit`` (only a flag bit)."""

    name: str
    kind: str
    enum: str = ""
    #: the value the text leaves out (and the writer still writes)
    default: object = None


@dataclass(frozen=True)
class Operands:
    """An operand group: ``one`` value, ``many`` (a list) or ``optional`` (at most one)."""

    name: str
    arity: str = "one"


@dataclass(frozen=True)
class TileOp:
    name: str
    opcode: int
    operands: Tuple[Operands, ...] = ()
    attrs: Tuple[Attr, ...] = ()
    #: optional attributes and operand groups, in the order of their bits in the flags
    #: varint (written when the tuple is not empty)
    flags: Tuple[str, ...] = ()
    #: results written as a count and types (variadic ops) rather than types alone
    variadic_results: bool = False
    #: operands written group by group (AttrSizedOperandSegments) rather than as one list
    segmented: bool = False
    regions: int = 0
    #: several results printed as one pack (``%r:2``, used as ``%r#0``), MLIR's default
    #: for operations that do not name their results
    packed_results: bool = False
    #: the text after ``%results = name`` (see ``text``): ``{x}`` an operand group or
    #: attribute, ``{x:type}`` its type(s), ``{result:type}`` the result type(s), ``(?...?)``
    #: a part printed only when every field in it is present
    syntax: str = ""

    @property
    def has_flags(self) -> bool:
        return bool(self.flags)

    @property
    def variadic_operands(self) -> bool:
        return any(g.arity != "one" for g in self.operands)


OPS: Dict[str, TileOp] = {}


def _op(name, opcode, operands=(), attrs=(), syntax="", **kw):
    OPS[name] = TileOp(name, opcode, tuple(Operands(*o) if isinstance(o, tuple) else Operands(o)
                                           for o in operands), tuple(attrs), syntax=syntax, **kw)


_ROUND = Attr("rounding_mode", "enum", "rounding", "nearest_even")
_FTZ = Attr("flush_to_zero", "unit")
_SIGN = Attr("signedness", "enum", "signedness")
_OVERFLOW = Attr("overflow", "enum", "overflow", "none")
_BINARY = "{lhs}, {rhs}{attrs} : {result:type}"

# floating-point binary arithmetic: rounding mode and flush-to-zero
for _name, _code in (("addf", 0x02), ("subf", 0x67), ("mulf", 0x4C), ("divf", 0x14)):
    _op(_name, _code, ("lhs", "rhs"), (_ROUND, _FTZ), _BINARY, flags=("flush_to_zero",))
for _name, _code in (("maxf", 0x45), ("minf", 0x47)):
    _op(_name, _code, ("lhs", "rhs"), (Attr("propagate_nan", "unit"), _FTZ), _BINARY,
        flags=("propagate_nan", "flush_to_zero"))
_op("sqrt", 0x64, ("source",), (_ROUND, _FTZ), "{source}{attrs} : {result:type}",
    flags=("flush_to_zero",))
_op("remf", 0x59, ("lhs", "rhs"), (), _BINARY)
# integer binary arithmetic
for _name, _code in (("addi", 0x03), ("subi", 0x68), ("muli", 0x4E), ("shli", 0x60)):
    _op(_name, _code, ("lhs", "rhs"), (_OVERFLOW,), _BINARY)
for _name, _code in (("andi", 0x04), ("ori", 0x52), ("xori", 0x6C)):
    _op(_name, _code, ("lhs", "rhs"), (), _BINARY)
for _name, _code in (("maxi", 0x46), ("mini", 0x48), ("remi", 0x5A), ("shri", 0x61)):
    _op(_name, _code, ("lhs", "rhs"), (_SIGN,), _BINARY)
_op("divi", 0x15, ("lhs", "rhs"), (_SIGN, Attr("rounding", "enum", "rounding", "zero")), _BINARY)
_op("fma", 0x28, ("lhs", "rhs", "acc"), (_ROUND, _FTZ), "{lhs}, {rhs}, {acc}{attrs} : {result:type}",
    flags=("flush_to_zero",))
# unary
for _name, _code in (("absf", 0x00), ("absi", 0x01), ("negf", 0x4F), ("cos", 0x12), ("sin", 0x62),
                     ("log", 0x3F), ("log2", 0x40)):
    _op(_name, _code, ("source",), (), "{source} : {result:type}")
_op("negi", 0x50, ("source",), (_OVERFLOW,), "{source}{attrs} : {result:type}")
_op("exp", 0x17, ("source",), (Attr("rounding_mode", "enum", "rounding", "full"),),
    "{source}{attrs} : {result:type}")
_op("exp2", 0x18, ("source",), (_FTZ,), "{source}{attrs} : {result:type}", flags=("flush_to_zero",))
# comparisons and selection
_op("cmpf", 0x0E, ("lhs", "rhs"), (Attr("comparison_predicate", "enum", "predicate"),
                                   Attr("comparison_ordering", "enum", "ordering")),
    "{comparison_predicate} {comparison_ordering} {lhs}, {rhs} : {lhs:type} -> {result:type}")
_op("cmpi", 0x0F, ("lhs", "rhs"), (Attr("comparison_predicate", "enum", "predicate"), _SIGN),
    "{comparison_predicate} {lhs}, {rhs}, {signedness} : {lhs:type} -> {result:type}")
_op("select", 0x5F, ("cond", "val_if_true", "val_if_false"), (),
    "{cond}, {val_if_true}, {val_if_false} : {cond:type}, {result:type}")
# conversions
_op("ftof", 0x2A, ("from",), (_ROUND,), "{from}{attrs} : {from:type} -> {result:type}")
_op("itof", 0x3B, ("from",), (_SIGN, _ROUND), "{from} {signedness}{attrs} : {from:type} -> {result:type}")
_op("ftoi", 0x2B, ("from",), (_SIGN, Attr("rounding_mode", "enum", "rounding", "nearest_int_to_zero")),
    "{from} {signedness}{attrs} : {from:type} -> {result:type}")
_op("exti", 0x25, ("from",), (_SIGN,), "{from} {signedness} : {from:type} -> {result:type}")
_op("trunci", 0x6B, ("from",), (_OVERFLOW,), "{from}{attrs} : {from:type} -> {result:type}")
# tiles
_op("constant", 0x10, (), (Attr("value", "dense"),), "{value} : {result:type}")
_op("iota", 0x3A, syntax=": {result:type}")
_op("broadcast", 0x0B, ("source",), (), "{source} : {source:type} -> {result:type}")
_op("reshape", 0x5B, ("source",), (), "{source} : {source:type} -> {result:type}")
_op("extract", 0x26, ("source", ("indices", "many")), (),
    "{source}[{indices}] : {source:type} -> {result:type}", variadic_results=True)
_op("permute", 0x53, ("source",), (Attr("permutation", "i32s"),),
    "{source} {permutation} : {source:type} -> {result:type}")
_op("reduce", 0x58, (("operands", "many"),), (Attr("dim", "int"), Attr("identities", "identities")),
    "{operands} dim={dim} identities={identities} : {operands:type} -> {result:type}",
    variadic_results=True, regions=1)
_op("scan", 0x5E, (("operands", "many"),), (Attr("dim", "int"), Attr("reverse", "bool"),
                                            Attr("identities", "identities")),
    "{operands} dim={dim} reverse={reverse} identities={identities} : {operands:type} -> "
    "{result:type}", variadic_results=True, regions=1)
# the grid
_op("get_tile_block_id", 0x30, syntax=": {result0:type}")
_op("get_num_tile_blocks", 0x2E, syntax=": {result0:type}")
# memory
_op("make_token", 0x44, syntax=": {result:type}")
_op("offset", 0x51, ("ptr", "offset"), (), "{ptr}, {offset} : {ptr:type}, {offset:type} -> {result:type}")
_op("alloca", 0x71, (), (Attr("num_elem", "int"), Attr("alignment", "int"), Attr("global", "unit")),
    "num_elem = {num_elem}, alignment = {alignment}{attrs} : {result:type}", flags=("global",))
_op("make_tensor_view", 0x43, ("base", ("dynamicShape", "many"), ("dynamicStrides", "many")), (),
    "{base}, shape = {shape}, strides = {strides} : {scalars}{result:type}",
    variadic_results=True, segmented=True)
_op("make_partition_view", 0x42, ("tensor_view",), (), "{tensor_view} : {result:type}")
_LOAD_STORE_FLAGS = ("memory_scope", "optimization_hints", "token")
_op("load_view_tko", 0x3E, ("view", ("index", "many"), ("token", "optional")),
    (Attr("memory_ordering_semantics", "enum", "memory_ordering"),),
    "{memory_ordering_semantics} {view}[{index}](? token = {token}?) : {view:type}, {index:type1} -> "
    "{result:type}", flags=_LOAD_STORE_FLAGS, variadic_results=True, segmented=True)
_op("store_view_tko", 0x66, ("tile", "view", ("index", "many"), ("token", "optional")),
    (Attr("memory_ordering_semantics", "enum", "memory_ordering"),),
    "{memory_ordering_semantics} {tile}, {view}[{index}](? token = {token}?) : {tile:type}, "
    "{view:type}, {index:type1} -> {result:type}",
    flags=_LOAD_STORE_FLAGS, variadic_results=True, segmented=True)
_SCOPE = Attr("memory_scope", "enum", "memory_scope")  # optional: only atomic accesses have one
_op("load_ptr_tko", 0x3D, ("source", ("mask", "optional"), ("paddingValue", "optional"),
                         ("token", "optional")),
    (Attr("memory_ordering_semantics", "enum", "memory_ordering"), _SCOPE),
    "{memory_ordering_semantics}(? {memory_scope}?) {source}(?, {mask}?)(?, {paddingValue}?)(? token={token}?) : "
    "{source:type}(?, {mask:type}?)(?, {paddingValue:type}?) -> {result:type}",
    flags=("memory_scope", "optimization_hints", "mask", "paddingValue", "token"), segmented=True)
_op("store_ptr_tko", 0x65, ("destination", "value", ("mask", "optional"), ("token", "optional")),
    (Attr("memory_ordering_semantics", "enum", "memory_ordering"), _SCOPE),
    "{memory_ordering_semantics}(? {memory_scope}?) {destination}, {value}(?, {mask}?)(? token={token}?) : "
    "{destination:type}, {value:type}(?, {mask:type}?) -> {result:type}",
    flags=("memory_scope", "optimization_hints", "mask", "token"), segmented=True)
_op("atomic_rmw_tko", 0x08, ("pointers", "arg", ("mask", "optional"), ("token", "optional")),
    (Attr("memory_ordering_semantics", "enum", "memory_ordering"),
     Attr("memory_scope", "enum", "memory_scope"), Attr("mode", "enum", "atomic_mode")),
    "{memory_ordering_semantics} {memory_scope} {pointers}, {mode}, {arg}(?, {mask}?)"
    "(? token={token}?) : {pointers:type}, {arg:type}(?, {mask:type}?) -> {result:type}",
    flags=("mask", "token"), segmented=True)
_op("atomic_cas_tko", 0x07, ("pointers", "cmp", "val", ("mask", "optional"), ("token", "optional")),
    (Attr("memory_ordering_semantics", "enum", "memory_ordering"),
     Attr("memory_scope", "enum", "memory_scope")),
    "{memory_ordering_semantics} {memory_scope} {pointers}, {cmp}, {val}(?, {mask}?)"
    "(? token={token}?) : {pointers:type}, {cmp:type}(?, {mask:type}?) -> {result:type}",
    flags=("mask", "token"), segmented=True)
_op("ptr_to_ptr", 0x57, ("source",), (), "{source} : {source:type} -> {result:type}")
_op("bitcast", 0x09, ("source",), (), "{source} : {source:type} -> {result:type}")
_op("int_to_ptr", 0x33, ("source",), (), "{source} : {source:type} -> {result:type}")
_op("ptr_to_int", 0x56, ("source",), (), "{source} : {source:type} -> {result:type}")
# matrix units
_op("mmaf", 0x49, ("lhs", "rhs", "acc"), (Attr("fast_acc", "unit"),),
    "{lhs}, {rhs}, {acc} : {lhs:type}, {rhs:type}, {acc:type}", flags=("fast_acc",))
_op("mmai", 0x4A, ("lhs", "rhs", "acc"), (Attr("signedness_lhs", "enum", "signedness"),
                                           Attr("signedness_rhs", "enum", "signedness")),
    "{lhs}, {rhs}, {acc} {signedness_lhs} {signedness_rhs} : {lhs:type}, {rhs:type}, {acc:type}")
# control flow
_op("for", 0x29, ("lowerBound", "upperBound", "step", ("initValues", "many")),
    (Attr("unsignedCmp", "unit"),), "", flags=("unsignedCmp",), variadic_results=True, regions=1,
    packed_results=True)
_op("if", 0x32, ("condition",), (), "", variadic_results=True, regions=2, packed_results=True)
for _name, _code in (("yield", 0x6D), ("continue", 0x11), ("return", 0x5C)):
    _op(_name, _code, (("operands", "many"),), (), "{operands}(? : {operands:type}?)",
        variadic_results=True)

