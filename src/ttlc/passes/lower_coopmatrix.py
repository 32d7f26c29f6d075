"""lower-coopmatrix: coopmatrix instructions with regions become per-work-item code.

On SIMT targets a work-item holds V entries of each coopmatrix (the distribution of
DESIGN.md, "Coopmatrix distribution"); instructions acting on whole matrices are vector
instructions on those V entries, except ``cooperative_matrix_apply``, whose region needs
each entry's row and column.  This pass rewrites

    %r = cooperative_matrix_apply (%i,%j,%v)=%a -> coopmatrix<T x M x N, use> { ... }

into, for every vector index v = 0..V-1, the row and column of the entry this
work-item holds (computed from ``subgroup_local_id``), ``cooperative_matrix_extract
%a[v]``, a copy of the region with %i, %j, %v bound, and ``cooperative_matrix_insert``
of the yielded value into the matrix built so far.  With S the subgroup size,
I = min(M, S), J the padded column count and B = I*J/S entries per row block,
vector index v = k*B + w holds

    row = subgroup_local_id rem I + k*I,   column = subgroup_local_id div I + w*(S/I)

(``rem``/``div`` disappear when I = S).  Where a column may be padding (column >= N,
possible only when M < S), the region runs under ``if column < N`` and the padding gets
zero, which insert ignores: the region runs exactly for the entries the matrix has, as
in the instruction's semantics.  Nested applies are lowered innermost first.

What is kept: load, store, the atomics and prefetch (memory instructions a backend
emits from the layout), mul_add (the target's matrix engine), reduce (it needs
communication between work-items, which the language has no shuffle for; backends
implement it on their registers), and construct, scale, extract, insert, cast, constant
and arithmetic (already one vector instruction per work-item).

Backends run this pass through the ``lower-simt`` pipeline; the CPU and the interpreter
keep coopmatrix values whole (their pipeline does not include it).  Invoked explicitly
(``-p lower-coopmatrix``) it lowers for any target, as the reference implementation does.
"""
from __future__ import annotations

from typing import Dict

from ..diagnostics import error
from ..ir.builder import Builder
from ..ir.core import Instruction, Program, Region, Value
from ..ir.rewrite import clone_instructions, replace, replace_all_uses
from ..ir.types import I32, CoopMatrixType
from . import PassContext, register
from .index_math import IndexMath, Int, require_sizes, set_locations

APPLY = "cooperative_matrix_apply"


@register("lower-coopmatrix")
def lower_coopmatrix(program: Program, ctx: PassContext) -> None:
    """Rewrite cooperative_matrix_apply into per-work-item extract/insert code."""
    for func in program.functions:
        first = next((i for i in func.body.walk() if i.opcode == APPLY), None)
        if first is None:
            continue
        sgs, _ = require_sizes(program, func, first.loc, "lower-coopmatrix", ctx,
                               need_work_group=False)
        _lower_region(func.body, func.body, sgs)


def _lower_region(region: Region, root: Region, sgs: int) -> None:
    """Lower every apply in region, inner ones first (post-order)."""
    for inst in list(region.instructions):
        for r in inst.regions:
            _lower_region(r, root, sgs)
        if inst.opcode == APPLY:
            _lower_apply(region, inst, root, sgs)


def _lower_apply(region: Region, inst: Instruction, root: Region, S: int) -> None:
    t: CoopMatrixType = inst.results[0].type
    M, N = t.rows, t.cols
    if M <= 0 or M & (M - 1):
        raise error(inst.loc, f"lower-coopmatrix: coopmatrix rows must be a power of two, "
                              f"got {M}")
    I = min(M, S)
    J = -(-I * N // S) * S // I
    block = I * J // S  # vector entries per block of I rows
    V = (M // I) * block
    per_row = S // I  # work-items sharing one row of a block (columns apart)

    body = inst.regions[0]
    arg_i, arg_j, arg_v = body.args
    if not body.instructions or body.instructions[-1].opcode != "yield":
        raise error(inst.loc, "lower-coopmatrix: the region of cooperative_matrix_apply must "
                              "end with yield")
    used = {v for i in body.walk() for v in i.operands}

    scratch = Region()
    b = Builder(scratch)
    m = IndexMath(b)
    a: Value = inst.slots["a"]
    coords: Dict[str, Int] = {}

    def lane() -> Int:  # subgroup_local_id, emitted on first use
        if "lid" not in coords:
            coords["lid"] = b.subgroup_local_id() if S > 1 else 0
        return coords["lid"]

    def row_of(k: int) -> Int:  # 0 <= lid < S: with I = S the row is lid
        if "row0" not in coords:
            coords["row0"] = lane() if I == S else m.rem(lane(), I, I32)
        return m.add(coords["row0"], k * I, I32)

    def col_of(w: int) -> Int:  # with I = S the column is w
        if "col0" not in coords:
            coords["col0"] = 0 if I == S else m.div(lane(), I, I32)
        return m.add(coords["col0"], w * per_row, I32)

    current = a
    for v in range(V):
        k, w = divmod(v, block)
        last_col = w * per_row + per_row - 1  # the largest column held at this index
        guarded = last_col >= N
        row = row_of(k) if arg_i in used else None
        col = col_of(w) if arg_j in used or guarded else None
        mapping: Dict[Value, Value] = {}
        if row is not None:
            mapping[arg_i] = m.value(row, I32)
        if arg_j in used:
            mapping[arg_j] = m.value(col, I32)
        if arg_v in used:
            mapping[arg_v] = b.cooperative_matrix_extract(a, v, result=t.component)
        if not guarded:
            insts = clone_instructions(body.instructions, mapping)
            scratch_region = b.insertion_region
            for x in insts[:-1]:
                scratch_region.append(x)
            value = insts[-1].slots["values"][0]
        else:
            inside = m.less_than(col, N, I32)
            guard = b.if_(m.flag(inside), results=[t.component])
            with guard:
                for x in clone_instructions(body.instructions, mapping):
                    b.insertion_region.append(x)
            with guard.else_():
                b.yield_([b.constant(_zero(t), t.component)])
            value = guard.result
        current = b.cooperative_matrix_insert(value, current, v, result=t)
    set_locations(scratch, inst.loc)
    replace_all_uses(root, inst.results[0], current)
    replace(region, inst, scratch.instructions)


def _zero(t: CoopMatrixType):
    c = t.component
    if c.is_complex:
        return 0j
    if c.is_float:
        return 0.0
    return 0
