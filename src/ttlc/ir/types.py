"""Types of the Tiny Tensor Language (spec section "Types").

Types are immutable and compare by value, so they can be used as dictionary keys
and compared with ``==`` anywhere in the compiler.  ``str(t)`` is the canonical
spelling; the printer and diagnostics use it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

#: Marker for a dynamic mode size, stride or offset (``?`` in the text).
DYNAMIC = None

Dim = Optional[int]  # a static non-negative integer or DYNAMIC


def _dim(d: Dim) -> str:
    return "?" if d is DYNAMIC else str(d)


class Type:
    """Base of all types."""

    __slots__ = ()


@dataclass(frozen=True)
class VoidType(Type):
    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True)
class BoolType(Type):
    def __str__(self) -> str:
        return "bool"


@dataclass(frozen=True)
class ScalarType(Type):
    """A number type: integer, floating point or complex."""

    name: str
    kind: str  # "int", "float" or "complex"
    size: int  # bytes

    def __str__(self) -> str:
        return self.name

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def bits(self) -> int:
        return 8 * self.size

    @property
    def component(self) -> "ScalarType":
        """The real type of a complex number's parts; the type itself otherwise."""
        return {"c32": F32, "c64": F64}.get(self.name, self)


I8 = ScalarType("i8", "int", 1)
I16 = ScalarType("i16", "int", 2)
I32 = ScalarType("i32", "int", 4)
I64 = ScalarType("i64", "int", 8)
INDEX = ScalarType("index", "int", 8)
BF16 = ScalarType("bf16", "float", 2)
F16 = ScalarType("f16", "float", 2)
F32 = ScalarType("f32", "float", 4)
F64 = ScalarType("f64", "float", 8)
C32 = ScalarType("c32", "complex", 8)
C64 = ScalarType("c64", "complex", 16)
BOOL = BoolType()
VOID = VoidType()

SCALAR_TYPES = {t.name: t for t in (I8, I16, I32, I64, INDEX, BF16, F16, F32, F64, C32, C64)}


def promotable(a: ScalarType, b: ScalarType) -> bool:
    """``a ⪯ b``: every value of ``a`` is exactly representable in ``b``.

    Integers promote to wider integers and to floating types whose significand holds
    them; floats to wider floats; reals to complex numbers of at least that width.
    """
    if a == b:
        return True
    ac, bc = a.component, b.component
    if bc.is_int and not ac.is_int:
        return False
    if a.is_complex and not b.is_complex:
        return False
    if ac.is_int and bc.is_float:
        # significand bits (with the implicit one) must hold every value of a
        significand = {"bf16": 8, "f16": 11, "f32": 24, "f64": 53}[bc.name]
        return ac.bits - 1 < significand
    return ac == bc or ac.size < bc.size


def promote(a: ScalarType, b: ScalarType) -> Optional[ScalarType]:
    """promote(a, b) of the spec; None where it fails."""
    if promotable(a, b):
        return b
    if promotable(b, a):
        return a
    return None


def cast_allowed(src: ScalarType, dst: ScalarType) -> bool:
    """The cast table: everything between number types except complex to real."""
    return not (src.is_complex and not dst.is_complex)


def dim_product(dims) -> Dim:
    """The product of mode sizes or strides; DYNAMIC if any of them is."""
    product: Dim = 1
    for d in dims:
        if d is DYNAMIC:
            return DYNAMIC
        product *= d
    return product


def stride_error(shape: Tuple[Dim, ...], stride: Tuple[Dim, ...]) -> Optional[str]:
    """Which rule of the strided layout ``stride`` breaks, or None.

    The rules: ``S_1 >= 1`` and ``S_(i-1) s_(i-1) <= S_i`` (modes do not overlap), each
    checked where all its entries are static."""
    if stride and stride[0] is not DYNAMIC and stride[0] < 1:
        return "the first stride must be at least 1"
    for i in range(1, len(stride)):
        a, s, b = stride[i - 1], shape[i - 1], stride[i]
        if DYNAMIC not in (a, s, b) and a * s > b:
            return (f"stride {b} of mode {i} is smaller than stride {a} times size {s} of mode "
                    f"{i - 1}; modes must not overlap (column-major order)")
    return None


@dataclass(frozen=True)
class MemrefType(Type):
    """``memref<T x s1 x ... , strided<S1,...>, space>``.

    ``stride`` always holds the full stride vector; an omitted layout is the packed
    column-major one, so two spellings of the same layout give equal types.
    """

    element: ScalarType
    shape: Tuple[Dim, ...]
    stride: Tuple[Dim, ...]
    space: str = "global"  # "global" or "local"

    @staticmethod
    def packed_stride(shape: Tuple[Dim, ...], first: Dim = 1) -> Tuple[Dim, ...]:
        """Column-major strides of modes laid out one after another from stride ``first``."""
        stride: list = []
        s: Dim = first
        for size in shape:
            stride.append(s)
            s = dim_product((s, size))
        return tuple(stride)

    @classmethod
    def get(cls, element: ScalarType, shape, stride=None, space: str = "global") -> "MemrefType":
        shape = tuple(shape)
        stride = cls.packed_stride(shape) if stride is None else tuple(stride)
        return cls(element, shape, stride, space)

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def extent(self) -> int:
        """Elements from the first to the last one, inclusive (static shape and strides)."""
        return 1 + sum((s - 1) * st for s, st in zip(self.shape, self.stride))

    @property
    def bytes(self) -> int:
        """Bytes from the first element to the end of the last (static shape and strides)."""
        return self.extent * self.element.size

    @property
    def is_packed(self) -> bool:
        return self.stride == self.packed_stride(self.shape)

    def __str__(self) -> str:
        text = "memref<" + str(self.element) + "".join("x" + _dim(s) for s in self.shape)
        if not self.is_packed:
            text += ",strided<" + ",".join(_dim(s) for s in self.stride) + ">"
        if self.space != "global":
            text += "," + self.space
        return text + ">"


@dataclass(frozen=True)
class GroupType(Type):
    """``group<memref<...> x size, offset: off>``: pointers to memrefs."""

    memref: MemrefType
    size: Dim
    offset: Dim = 0

    def __str__(self) -> str:
        text = "group<" + str(self.memref) + "x" + _dim(self.size)
        if self.offset != 0:
            text += ", offset: " + _dim(self.offset)
        return text + ">"


MATRIX_USES = ("matrix_a", "matrix_b", "matrix_acc")


@dataclass(frozen=True)
class CoopMatrixType(Type):
    """``coopmatrix<T x rows x cols, use>``: a matrix distributed over a subgroup."""

    component: ScalarType
    rows: int
    cols: int
    use: str

    @property
    def shape(self) -> Tuple[int, int]:
        return (self.rows, self.cols)

    def with_component(self, component: ScalarType) -> "CoopMatrixType":
        return CoopMatrixType(component, self.rows, self.cols, self.use)

    def __str__(self) -> str:
        return f"coopmatrix<{self.component}x{self.rows}x{self.cols},{self.use}>"


def element_type(t: Type) -> Optional[ScalarType]:
    """The scalar type of a scalar or the component type of a coopmatrix."""
    if isinstance(t, ScalarType):
        return t
    if isinstance(t, CoopMatrixType):
        return t.component
    return None


AnyType = Union[VoidType, BoolType, ScalarType, MemrefType, GroupType, CoopMatrixType]
