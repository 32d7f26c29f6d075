"""lower-linalg: the collective BLAS instructions as SPMD code (see ``lower_function``).

* ``matmul``: gemm, gemv, ger as tiled loops over cooperative matrices;
* ``elementwise``: axpby, hadamard, sum, cumsum as per-work-item scalar code;
* ``tiles``: ``choose_tiles``, the one place tile shapes come from (``unit_tiles``:
  made whole blocks of a matrix unit's products where the target has one for the types);
* ``emit``: what they share (sizes, constants, alpha/beta, the BLAS update).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

from ...analysis.effects import DISJOINT
from ...ir.core import Function, Instruction, Program, Region
from ...ir.ops import SPMD_REGION_OPS
from ...ir.rewrite import replace, set_attribute, walk_with_parent
from ..index_math import require_sizes
from .elementwise import lower_axpby, lower_cumsum, lower_hadamard, lower_sum
from .emit import Emitter
from .matmul import lower_gemm, lower_gemv, lower_ger
from .tiles import Tiles, choose_tiles

LOWERINGS: Dict[str, Callable[[Emitter], None]] = {
    "gemm": lower_gemm, "gemv": lower_gemv, "ger": lower_ger,
    "axpby": lower_axpby, "hadamard": lower_hadamard, "sum": lower_sum, "cumsum": lower_cumsum,
}


def lower_function(program: Program, func: Function, ctx) -> int:
    """Replace every BLAS instruction of ``func``; returns how many were lowered."""
    found: List[Tuple[Region, Instruction]] = [
        (region, inst) for region, inst in walk_with_parent(func.body) if inst.opcode in LOWERINGS]
    if not found:
        return 0
    sgs, wgs = require_sizes(program, func, found[0][1].loc, "lower-linalg", ctx)
    subgroups = (wgs[0] // sgs, wgs[1])  # the grid foreach_tile spreads tiles over
    for region, inst in found:
        em = Emitter(inst, ctx.target, sgs, subgroups, [a.value for a in func.args])
        LOWERINGS[inst.opcode](em)
        new = em.instructions()
        for x in new:
            _set_loc(x, inst.loc)
            for y in [x] + [i for r in x.regions for i in r.walk()]:
                if y.opcode in SPMD_REGION_OPS:
                    set_attribute(y, DISJOINT, True)
        replace(region, inst, new)
    return len(found)


def _set_loc(inst: Instruction, loc) -> None:
    """New instructions carry the location of the instruction they implement."""
    inst.loc = loc
    for r in inst.regions:
        r.loc = loc
        for x in r.instructions:
            _set_loc(x, loc)


__all__ = ["lower_function", "choose_tiles", "Tiles", "LOWERINGS"]
