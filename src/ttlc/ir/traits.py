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
from typing import Tuple, Union

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
