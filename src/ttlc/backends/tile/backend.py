"""Back end "cuda-tile": the registry's entry point (``ttlc.backends``).

Stages: ``tile-text`` (the module as ``cuda_tile`` MLIR text) and ``tilebc`` (the same
module as Tile IR bytecode, what ``tileiras`` compiles to a cubin).  The program is
translated as verified, before any lowering: Tile IR is programmed over whole tiles, so
the collective instructions stay whole, and SPMD regions are run over a tile of the
work-items (``translate``, with the rules of ``scalar``, ``spmd`` and ``blas``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Union

from ...diagnostics import CompileError
from ...ir.core import Program
from ...ir.rewrite import clone_program
from ...passes.insert_shape_checks import insert_shape_checks
from ...ir.ops import compose_tables
from ...target import ExecConfig, Target, get_target
from . import atomics, blas, bytecode, coop, scalar, spmd, text, uniformity
from .tir import Module
from .translate import Translator

RULES = uniformity.checked_rules(compose_tables(scalar.RULES, blas.RULES, spmd.RULES, coop.RULES,
                                                atomics.RULES))


#: subgroup sizes a Tile IR kernel can run with: a subgroup is a slice of the tile of
#: work-items (``spmd``), not a warp, so any power of two that fits the work-group does
SUBGROUP_SIZES = (1, 2, 4, 8, 16, 32, 64)


#: the most work-items of a work-group the target chooses for a kernel that leaves its
#: sizes open: its work-items are one tile, whose size every per-work-item value and
#: every cooperative matrix of the work-group multiplies (tileiras takes 11 s at -O0 on
#: 1,024 work-items' 32 x 32 matrices, about 1 s on 128)
AUTO_WORK_GROUP_LIMIT = 128


def tile_machine(machine: Target) -> Target:
    """`machine` with the subgroup sizes of Tile IR (its preferred size first) and the
    work-group sizes it chooses."""
    sizes = machine.subgroup_sizes
    return replace(machine, subgroup_sizes=sizes + tuple(s for s in SUBGROUP_SIZES if s not in sizes),
                   auto_work_group_limit=min(machine.auto_work_group_limit or AUTO_WORK_GROUP_LIMIT,
                                             AUTO_WORK_GROUP_LIMIT))


def translate(program: Program, machine: Optional[Target] = None, checked: bool = False) -> Module:
    """The Tile IR module of a verified program; CompileError for what it cannot express.
    Checked code (``checks``) tests the shape rules of BLAS instructions with dynamic
    sizes too: ``check_shapes`` before each (the pass insert-shape-checks, on a copy)."""
    machine = tile_machine(machine or get_target("nvidia"))
    if checked:
        program = clone_program(program)
        insert_shape_checks(program, None)
    try:
        return Module("kernels", [Translator(f, RULES, lambda f=f: ExecConfig.of(f, machine, program),
                                             checked).entry() for f in program.functions])
    except CompileError as e:
        raise e.with_source(program.source, program.filename) from None


def emit(program: Program, stage: str, machine: Target, checked: bool) -> Union[str, bytes]:
    module = translate(program, machine, checked)
    return text.print_module(module) if stage == "tile-text" else bytecode.write(module)
