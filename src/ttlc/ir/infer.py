"""Result-type rules of the instruction table (``OpDef.infer_type``).

A rule gives the result type an instruction's operands fix: the builder fills it in
when no type is given, and the verifier requires it (views: each stride as computed or
``?``).  The one exception is ``cooperative_matrix_mul_add``, whose rule gives the
default, C's type: the verifier also allows a result with another component type.

A rule takes the operand slots, the attributes and the modifiers (defaults filled in,
``OpDef.result_type``) and returns None where the operands do not fix a type, such as an
operand of the wrong kind (the verifier reports that).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .core import Value
from .types import (DYNAMIC, CoopMatrixType, GroupType, MemrefType, ScalarType, Type,
                    dim_product)

Rule = Callable[[dict, dict, dict], Optional[Type]]


def _type(slots: dict, slot: str) -> Any:
    v = slots.get(slot)
    return v.type if isinstance(v, Value) else None


def same_as(slot: str) -> Rule:
    """The type of an operand."""
    return lambda slots, attrs, modifiers: _type(slots, slot)


def fixed(t: Type) -> Rule:
    return lambda slots, attrs, modifiers: t


def real_part(slots: dict, attrs: dict, modifiers: dict) -> Optional[Type]:
    """``abs``, ``im``, ``re``: the real type of a complex operand, else the operand's."""
    a = _type(slots, "a")
    if isinstance(a, ScalarType) and a.is_complex:
        return a.component
    if isinstance(a, CoopMatrixType) and a.component.is_complex:
        return a.with_component(a.component.component)
    return a


def element(slots: dict, attrs: dict, modifiers: dict) -> Optional[Type]:
    """The element type of the memref operand (atomics)."""
    m = _type(slots, "tensor")
    return m.element if isinstance(m, MemrefType) else None


def loaded(slots: dict, attrs: dict, modifiers: dict) -> Optional[Type]:
    """``load``: an element of a memref, or a memref of a group."""
    m = _type(slots, "tensor")
    return m.memref if isinstance(m, GroupType) else element(slots, attrs, modifiers)


def component(slots: dict, attrs: dict, modifiers: dict) -> Optional[Type]:
    """``cooperative_matrix_extract``: the component type of the matrix."""
    m = _type(slots, "matrix")
    return m.component if isinstance(m, CoopMatrixType) else None


def reduced(slots: dict, attrs: dict, modifiers: dict) -> Optional[Type]:
    """``cooperative_matrix_reduce_*``: one column (``.row``) or one row (``.column``)."""
    a = _type(slots, "a")
    if not isinstance(a, CoopMatrixType):
        return None
    rows, cols = (a.rows, 1) if modifiers.get("mode") == "row" else (1, a.cols)
    return CoopMatrixType(a.component, rows, cols, a.use)


# ---- views: shape and strides of subview, expand and fuse -------------------------------
def subview(slots: dict, attrs: dict, modifiers: dict) -> Optional[MemrefType]:
    """Modes with size 0 are removed (rank reduction); the others keep their strides."""
    m, entries = _type(slots, "tensor"), slots["slices"]
    if not isinstance(m, MemrefType) or len(entries) != m.order:
        return None
    kept = [(size if isinstance(size, int) else DYNAMIC, stride)
            for (_, size), stride in zip(entries, m.stride)
            if not (isinstance(size, int) and size == 0)]
    return MemrefType(m.element, tuple(k[0] for k in kept), tuple(k[1] for k in kept), m.space)


def expand(slots: dict, attrs: dict, modifiers: dict) -> Optional[MemrefType]:
    """One mode becomes several, packed from the mode's stride on."""
    m, mode = _type(slots, "tensor"), attrs["mode"]
    if not isinstance(m, MemrefType) or not 0 <= mode < m.order:
        return None
    sizes = tuple(e if isinstance(e, int) else DYNAMIC for e in slots["shape"])
    strides = MemrefType.packed_stride(sizes, m.stride[mode])
    return MemrefType(m.element, m.shape[:mode] + sizes + m.shape[mode + 1:],
                      m.stride[:mode] + strides + m.stride[mode + 1:], m.space)


def fuse(slots: dict, attrs: dict, modifiers: dict) -> Optional[MemrefType]:
    """Modes ``from`` to ``to`` become one, with the first one's stride."""
    m, lo, hi = _type(slots, "tensor"), attrs["from"], attrs["to"]
    if not isinstance(m, MemrefType) or not 0 <= lo < hi < m.order:
        return None
    size = dim_product(m.shape[lo:hi + 1])
    return MemrefType(m.element, m.shape[:lo] + (size,) + m.shape[hi + 1:],
                      m.stride[:lo + 1] + m.stride[hi + 1:], m.space)
