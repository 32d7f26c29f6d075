"""insert-iteration-marks: checked code keeps telling the points of a foreach apart.

Checked code reports data races on local memory between different work-items.  In a
``foreach`` (``foreach_tile``) two different points (tiles) of the iteration space are
different work-items for that purpose, whichever work-item the implementation runs them
on (the interpreter runs them in chunks of a work-group's size).  lower-foreach makes the
body a loop in which one work-item runs many points; so, for checked code only, this pass
puts ``check_iteration`` (an instruction of ttlc's own, docs/language-notes.md) at the top
of every foreach body before it is lowered: back ends that detect races count the
accesses after it as made by new work-items.  Lowered BLAS instructions, whose work-items
write disjoint elements, get none (run the pass before lower-linalg).
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Program, Region
from ..ir.ops import FOREACH_OPS
from ..ir.rewrite import insert_before
from .index_math import set_locations


def _mark(region: Region) -> None:
    for inst in region.instructions:
        for r in inst.regions:
            _mark(r)
        if inst.opcode in FOREACH_OPS:
            body = inst.regions[0]
            scratch = Region([])
            Builder(scratch).op("check_iteration")
            set_locations(scratch, inst.loc)
            insert_before(body, body.instructions[0] if body.instructions else None,
                          scratch.instructions)


def insert_iteration_marks(program: Program, ctx) -> None:
    """At the top of each foreach body, mark where a new point begins (checked code)."""
    for func in program.functions:
        _mark(func.body)
