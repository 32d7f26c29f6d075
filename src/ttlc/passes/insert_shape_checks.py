"""insert-shape-checks: checked code tests the shape rules of BLAS instructions at run time.

The verifier checks a BLAS instruction's shape rules (``ttlc.ir.traits.blas_shape_rules``)
where the sizes are static; a dynamic size can break them only at run time, which the
spec leaves undefined.  Checked code must report it, and the lowering of BLAS
instructions (lower-linalg) turns them into loops that would run on with whatever sizes
they get.  So, for checked code only, this pass puts before every BLAS instruction whose
operands have a dynamic size ``check_shapes`` (an instruction of ttlc's own,
docs/language-notes.md) with the sizes of all its memref operands: ``size`` for the
dynamic modes, constants for the static ones.  Back ends that run checked code report a
broken rule as a KernelError naming the rule, at the BLAS instruction's source location.
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Instruction, Program, Region
from ..ir.rewrite import insert_before_each
from ..ir.types import DYNAMIC, INDEX, MemrefType
from .index_math import set_locations


def _checks(inst: Instruction) -> Region:
    """The size queries and the check_shapes instruction for one BLAS instruction."""
    scratch = Region([])
    b = Builder(scratch)
    sizes, orders = [], []
    for slot in inst.opdef.blas.slots:
        m = inst.slots[slot]
        t: MemrefType = m.type
        orders.append(t.order)
        for mode, dim in enumerate(t.shape):
            sizes.append(b.size(m, mode, INDEX) if dim is DYNAMIC else b.constant(dim, INDEX))
    modifiers = {m.slot: inst.modifier(m.slot) for m in inst.opdef.modifiers
                 if m.slot in ("ta", "tb")}
    b.op("check_shapes", inst.opcode, orders=orders, sizes=sizes, **modifiers)
    set_locations(scratch, inst.loc)
    return scratch


def _dynamic(inst: Instruction) -> bool:
    return any(DYNAMIC in inst.slots[s].type.shape for s in inst.opdef.blas.slots)


def _insert(region: Region) -> None:
    new = {}
    for inst in region.instructions:
        for r in inst.regions:
            _insert(r)
        if inst.opdef.blas is not None and _dynamic(inst):
            new[inst] = _checks(inst).instructions
    insert_before_each(region, new)


def insert_shape_checks(program: Program, ctx) -> None:
    """Before each BLAS instruction with dynamic sizes, check its shape rules (checked code)."""
    for func in program.functions:
        _insert(func.body)
