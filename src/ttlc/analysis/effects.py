"""The memory accesses of one instruction, from the effects its table entry declares.

An access is a memref operand and a kind: read, write, atomic read or atomic write
(``ttlc.ir.traits.MemoryEffect`` with its ``atomic`` modifier resolved).  Two accesses
to the same memory *conflict*, and need a barrier or make a data race between them,
when one writes and they are not both atomic.  insert-barrier and the interpreter's
race detection (``ttlc.interp.checks``) both decide with ``conflicts``.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ..ir.core import Instruction, Value
from ..ir.traits import READ, WRITE, MemoryEffect
from ..ir.types import MemrefType

ATOMIC_READ, ATOMIC_WRITE = "atomic read", "atomic write"
KINDS = (READ, WRITE, ATOMIC_READ, ATOMIC_WRITE)
_WRITES = (WRITE, ATOMIC_WRITE)
_ATOMICS = (ATOMIC_READ, ATOMIC_WRITE)

#: an access: the memref operand and the kind
Access = Tuple[Value, str]

__all__ = ["READ", "WRITE", "ATOMIC_READ", "ATOMIC_WRITE", "KINDS", "Access", "accesses",
           "access_kind", "conflicts", "is_atomic", "RACE_CLASSES", "COOP_MEMORY", "is_local",
           "alloca_of", "race_class"]


def _kind(inst: Instruction, effect: MemoryEffect) -> str:
    atomic = effect.atomic if isinstance(effect.atomic, bool) else inst.modifier(effect.atomic)
    if atomic:
        return ATOMIC_WRITE if effect.kind == WRITE else ATOMIC_READ
    return effect.kind


def accesses(inst: Instruction) -> List[Access]:
    """The memrefs inst reads and writes, not counting nested regions.

    Operands of other types are left out: a ``load`` from a group reads the group's
    pointers, which no instruction writes."""
    out: List[Access] = []
    for effect in inst.opdef.effects or ():
        v = inst.slots.get(effect.slot)
        if isinstance(v, Value) and isinstance(v.type, MemrefType):
            out.append((v, _kind(inst, effect)))
    return out


def access_kind(inst: Instruction, slot: str) -> Optional[str]:
    """How inst accesses the memory of operand ``slot``; None: not at all."""
    for effect in inst.opdef.effects or ():
        if effect.slot == slot:
            return _kind(inst, effect)
    return None


def conflicts(a: str, b: str) -> bool:
    """Two accesses to the same memory need ordering: one writes, not both atomic."""
    return (a in _WRITES or b in _WRITES) and not (a in _ATOMICS and b in _ATOMICS)


def is_atomic(kind: str) -> bool:
    return kind in _ATOMICS


#: the kinds of access checked code's race detection keeps apart, numbered as the error
#: records of every compiled target number them: (kind, made by a coopmatrix instruction)
RACE_CLASSES = tuple((kind, coop) for coop in (False, True) for kind in KINDS)
#: families of the coopmatrix memory instructions (accesses by a whole subgroup)
COOP_MEMORY = ("coop_load", "coop_store", "coop_atomic_update")


def is_local(t) -> bool:
    """Whether a type is a memref of local memory (what data races are looked for on)."""
    return isinstance(t, MemrefType) and t.space == "local"


def alloca_of(v: Value) -> Instruction:
    """The alloca a local memref is a view of (local memrefs come from allocas alone, and
    views name the memref they view ``tensor``): the buffer race detection keys on."""
    while v.owner.opcode != "alloca":
        v = v.owner.slots["tensor"]
    return v.owner


def race_class(inst: Instruction) -> int:
    """The index in ``RACE_CLASSES`` of inst's access to its ``tensor`` operand."""
    return RACE_CLASSES.index((access_kind(inst, "tensor"), inst.opdef.family in COOP_MEMORY))


#: attribute (not printed) of the SPMD regions lower-linalg makes of BLAS instructions, kept by
#: lower-foreach: their work-items write disjoint elements and nothing else runs in them,
#: so no data race can happen inside and checked code need not look for one
DISJOINT = "disjoint_work_items"


def race_message(memory: str, kind: str, index: str, element: int, me: str, other_kind: str,
                 other: str, other_loc, unfenced_loc=None) -> str:
    """How every target's checked code words a data race on local memory, so that the
    interpreter and the back ends report a race alike: ``memory`` names the alloca, ``me``
    and ``other`` the work-items, ``other_loc`` where the other access is (None: unknown),
    ``unfenced_loc`` a barrier without .local fence in the interval (None: none)."""
    where = f" at {other_loc}" if other_loc is not None else ""
    hint = ""
    if unfenced_loc is not None:
        hint = (f"; the barrier at {unfenced_loc} has no .local fence and does not order "
                f"local memory")
    article = "an" if is_atomic(other_kind) else "a"
    return (f"data race on {memory}: {kind} of index {index} (element {element}) by work-item "
            f"{me} conflicts with {article} {other_kind} by work-item {other}{where} with no "
            f"barrier.local in between{hint}")
