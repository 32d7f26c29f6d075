"""work-group-size: write the subgroup_size and work_group_size a function leaves open.

The spec (section "Function", attributes) leaves both to the compiler unless given.  The
pass fills in what is missing with the sizes ``ttlc.target.config.choose`` gives for the
target description (``ctx.target``), whose docstring describes the heuristic; given
values are kept and checked against the target.
"""
from __future__ import annotations

from ..ir import rewrite
from ..target.config import choose


def work_group_size(program, ctx):
    """Choose subgroup and work-group sizes for functions that do not set them."""
    for func in program.functions:
        config = choose(func, ctx.target, ctx.target.max_work_group_size, program)
        if func.subgroup_size is None or func.work_group_size is None:
            rewrite.set_function_attributes(func, config.attributes(),
                                            first=("subgroup_size", "work_group_size"))
