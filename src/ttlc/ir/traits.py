"""Facts the instruction table declares about instructions, besides their syntax.

Modelled on xDSL's op traits (``xdsl/traits.py``: ``MemoryReadEffect`` declared on
``memref.LoadOp`` and read back through ``get_effects``): an entry of ``ttlc.ir.ops``
says which memref operands it reads and writes, and a BLAS entry which operands it reads
and which it writes.  Analyses, passes, the interpreter and back ends read these from the
table instead of keeping their own lists of opcodes.  ``ttlc.analysis.effects`` turns
them into the accesses one instruction makes.  Result-type rules are in
``ttlc.ir.infer``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

READ, WRITE = "read", "write"


@dataclass(frozen=True)
class MemoryEffect:
    """The instruction reads or writes (``kind``) the memory of the memref in ``slot``.

    ``atomic`` is True, False, or the name of the flag modifier that makes the access
    atomic (``gemm.atomic``).  An atomic update (``atomic_add``) is one atomic write;
    views and size queries (``subview``, ``size``) declare no effect: they read no memory.
    """

    kind: str
    slot: str
    atomic: Union[bool, str] = False


def reads(slot: str, atomic: Union[bool, str] = False) -> MemoryEffect:
    return MemoryEffect(READ, slot, atomic)


def writes(slot: str, atomic: Union[bool, str] = False) -> MemoryEffect:
    return MemoryEffect(WRITE, slot, atomic)


@dataclass(frozen=True)
class BlasOperands:
    """The memref operands of a collective BLAS instruction: read, and the one written.

    ``names`` are the spec's names of ``reads + (written,)`` (``gemv``'s b and c), for
    messages.  The written operand is also read unless beta is 0; as a write it already
    conflicts with every access a read would, so it is declared as a write only.
    """

    reads: Tuple[str, ...]
    written: str
    names: Tuple[str, ...]

    @property
    def slots(self) -> Tuple[str, ...]:
        return self.reads + (self.written,)

    def effects(self) -> Tuple[MemoryEffect, ...]:
        """Reads of the inputs and a write of the output (atomic with ``.atomic``)."""
        return tuple(reads(s) for s in self.reads) + (writes(self.written, "atomic"),)


#: one equality a BLAS instruction's operand shapes must satisfy: (left, right, message)
ShapeRule = Tuple[Tuple, Tuple, str]


def _dims(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"


def _op(shape: Tuple, transpose: str) -> Tuple:
    return tuple(reversed(shape)) if transpose == "t" and len(shape) == 2 else tuple(shape)


def shapes_of(orders: Sequence[int], sizes: Sequence) -> Dict[str, Tuple]:
    """The shapes of a BLAS instruction's memref operands A, B(, C) from all their mode
    sizes in one list, ``orders`` saying how many belong to each (``check_shapes``)."""
    shapes, k = {}, 0
    for slot, n in zip("ABC", orders):
        shapes[slot], k = tuple(sizes[k:k + n]), k + n
    return shapes


def first_broken_rule(opcode: str, shapes: Dict[str, Tuple], ta: str = "n",
                      tb: str = "n") -> Optional[str]:
    """The message of the first shape rule of a BLAS instruction the shapes break, or None:
    the one place the interpreter and checked code pick what to report."""
    return next((message for left, right, message in blas_shape_rules(opcode, shapes, ta, tb)
                 if left != right), None)


def blas_shape_rules(opcode: str, shapes: Dict[str, Tuple], ta: str = "n",
                     tb: str = "n") -> List[ShapeRule]:
    """The spec's shape restrictions of a BLAS instruction whose operand orders are right,
    as equalities of dimension tuples: the verifier checks them on static types (a
    dynamic dimension, None, matches anything), the interpreter and checked code on the
    sizes at run time, so both say the same thing about the same operands.  ``shapes``
    maps the slots (A, B, C) to their shapes."""
    A = shapes["A"]
    if opcode == "axpby":
        B = shapes["B"]
        return [(B, _op(A, ta), f"shape of B ({_dims(B)}) does not match shape of op(A) "
                                f"({_dims(_op(A, ta))})")]
    if opcode == "cumsum":
        B = shapes["B"]
        return [(A, B, f"shape of A ({_dims(A)}) does not match shape of B ({_dims(B)})")]
    if opcode == "sum":
        B = shapes["B"]
        if len(B) != 1:
            return []
        return [(B[:1], _op(A, ta)[:1], f"rows of b ({_dims(B)}) do not match rows of op(A) "
                                        f"({_dims(_op(A, ta))})")]
    B, C = shapes["B"], shapes["C"]
    if opcode == "gemm":
        opA, opB = _op(A, ta), _op(B, tb)
        return [(opA[1:], opB[:1], f"columns of op(A) ({_dims(opA)}) do not match rows of "
                                   f"op(B) ({_dims(opB)})"),
                (C, (opA[0], opB[1]), f"shape of C ({_dims(C)}) does not match op(A) op(B) "
                                      f"({_dims((opA[0], opB[1]))})")]
    if opcode == "gemv":
        opA = _op(A, ta)
        return [(opA[1:], B[:1], f"columns of op(A) ({_dims(opA)}) do not match rows of b "
                                 f"({_dims(B)})"),
                (C[:1], opA[:1], f"rows of c ({_dims(C)}) do not match rows of op(A) "
                                 f"({_dims(opA)})")]
    if opcode == "ger":
        return [(C, (A[0], B[0]), f"shape of C ({_dims(C)}) does not match a b^T "
                                  f"({_dims((A[0], B[0]))})")]
    if opcode == "hadamard":
        message = (f"shapes of A ({_dims(A)}), B ({_dims(B)}) and C ({_dims(C)}) must match")
        return [(A, B, message), (A, C, message)]
    raise ValueError(f"no shape rules for {opcode}")
