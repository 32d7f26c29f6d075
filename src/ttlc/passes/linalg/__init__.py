"""lower-linalg: the collective BLAS instructions as SPMD code (see ``lower_function``).

* ``matmul``: gemm, gemv, ger as tiled loops over cooperative matrices;
* ``elementwise``: axpby, hadamard, sum, cumsum as per-work-item scalar code;
* ``tiles``: ``choose_tiles``, the one place tile shapes come from;
* ``emit``: what they share (sizes, constants, alpha/beta, the BLAS update).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

from ...diagnostics import error
from ...ir.core import Function, Instruction, Program, Region
from ...ir.rewrite import replace, walk_with_parent
from .elementwise import lower_axpby, lower_cumsum, lower_hadamard, lower_sum
from .emit import Emitter
from .matmul import lower_gemm, lower_gemv, lower_ger
from .tiles import Tiles, choose_tiles

LOWERINGS: Dict[str, Callable[[Emitter], None]] = {
    "gemm": lower_gemm, "gemv": lower_gemv, "ger": lower_ger,
    "axpby": lower_axpby, "hadamard": lower_hadamard, "sum": lower_sum, "cumsum": lower_cumsum,
}


def execution_sizes(program: Program, func: Function, ctx, loc) -> Tuple[int, Tuple[int, int], bool]:
    """Subgroup size, work-group size and whether the function fixes the subgroup size.

    Runs work-group-size first when that pass exists; without it, a function lacking the
    attributes gets the target's preferred subgroup size (one dividing work_group_size[0]
    if that is set) and a work-group of one subgroup, as the interpreter does.
    """
    from .. import ensure

    if "work-group-size" not in ctx.done:
        try:
            ensure(program, "work-group-size", ctx)
        except ModuleNotFoundError as e:  # the pass is not written yet
            if not (e.name or "").endswith("work_group_size"):
                raise
    sgs, wgs = func.subgroup_size, func.work_group_size
    fixed = sgs is not None
    if sgs is None:
        sizes = ctx.target.subgroup_sizes
        fitting = [s for s in sizes if wgs is None or wgs[0] % s == 0]
        if not fitting:
            raise error(loc, f"lower-linalg: work_group_size[0] = {wgs[0]} of @{func.name} is "
                             f"not a multiple of a subgroup size of target {ctx.target.name} "
                             f"({', '.join(map(str, sizes))}); set subgroup_size")
        sgs = fitting[0]
    if sgs <= 0 or sgs & (sgs - 1):
        raise error(loc, f"lower-linalg: subgroup_size {sgs} of @{func.name} is not a power of two")
    if wgs is None:
        wgs = (sgs, 1)
    if wgs[0] <= 0 or wgs[1] <= 0 or wgs[0] % sgs:
        raise error(loc, f"lower-linalg: work_group_size [{wgs[0]},{wgs[1]}] of @{func.name} "
                         f"must be positive with its first entry a multiple of the subgroup "
                         f"size {sgs}")
    return sgs, wgs, fixed


def lower_function(program: Program, func: Function, ctx) -> int:
    """Replace every BLAS instruction of ``func``; returns how many were lowered."""
    found: List[Tuple[Region, Instruction]] = [
        (region, inst) for region, inst in walk_with_parent(func.body) if inst.opcode in LOWERINGS]
    if not found:
        return 0
    sgs, wgs, fixed = execution_sizes(program, func, ctx, found[0][1].loc)
    subgroups = (wgs[0] // sgs, wgs[1])  # the grid foreach_tile spreads tiles over
    for region, inst in found:
        em = Emitter(inst, ctx.target, sgs, subgroups, fixed)
        LOWERINGS[inst.opcode](em)
        new = em.instructions()
        for x in new:
            _set_loc(x, inst.loc)
        replace(region, inst, new)
    return len(found)


def _set_loc(inst: Instruction, loc) -> None:
    """New instructions carry the location of the instruction they implement."""
    inst.loc = loc
    for r in inst.regions:
        r.loc = loc
        for x in r.instructions:
            _set_loc(x, loc)


__all__ = ["lower_function", "choose_tiles", "Tiles", "LOWERINGS", "execution_sizes"]
