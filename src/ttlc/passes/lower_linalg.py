"""lower-linalg: gemm, gemv, ger, hadamard, axpby, sum and cumsum as SPMD code.

gemm, gemv and ger become ``foreach_tile`` loops over cooperative matrices (tiles from
``linalg.tiles.choose_tiles``, which reads the target's register budget and subgroup
sizes); axpby, hadamard, sum and cumsum become ``foreach``/``parallel`` regions of
scalar code.  Static shapes give fully static code; dynamic shapes check the remainder
tiles at run time.  Every lowered instruction is exactly one SPMD region (possibly
under ``if beta == 0`` for a non-constant beta) in which subgroups and work-items write
disjoint elements, so no barrier is needed inside it; ordering between neighbouring
instructions (the implicit barrier between collective instructions) is left to
insert-barrier.  See ``ttlc.passes.linalg`` for the pieces.
"""
from __future__ import annotations

from .linalg import lower_function


def lower_linalg(program, ctx):
    """Lower the collective BLAS instructions to foreach_tile/foreach/parallel code."""
    for func in program.functions:
        lower_function(program, func, ctx)
