"""Work-item views of coopmatrices on the CPU: extract, insert and apply.

Each work-item's part of a matrix (``ttlc.ir.layout``) is taken from or put into the
subgroup's whole-matrix vector (``coop.py``) by a shuffle with a constant mask.
"""
from __future__ import annotations

from typing import Callable, Dict

from ...ir.core import Instruction
from ...ir.layout import layout_of
from ...ir.types import CoopMatrixType
from .coop import _consts, _map, concat, shuffle, subgroups
from .function import FunctionCodegen
from .values import I1, I32, CoopVal, Lanes, zero_of


def extract(cg: FunctionCodegen, m: CoopVal, v: int):
    """Entry v of every work-item's part (W lanes; padding reads as 0)."""
    rows, cols, valid = layout_of(m.type, cg.S).tables
    M = m.type.rows
    n = M * m.type.cols
    pieces = []
    for mat in m.mats:
        idx = [int(cols[p, v]) * M + int(rows[p, v]) if valid[p, v] else n
               for p in range(cg.S)]
        zero = _map(lambda x: zero_of(x.type), mat)
        pieces.append(shuffle(cg, mat, zero, idx))
    return concat(cg, pieces)


def insert(cg: FunctionCodegen, m: CoopVal, value, v: int, mask) -> CoopVal:
    """The matrix with entry v of every active work-item's part replaced by its value."""
    b = cg.b
    t = m.type
    lay = layout_of(t, cg.S)
    M, N = t.rows, t.cols
    value = cg.splat(value)
    out = []
    for g, mat in enumerate(m.mats):
        src, here = [], []
        for c in range(N):
            for r in range(M):
                p, w = lay.locate(r, c)
                src.append(g * cg.S + p)
                here.append(w == v)
        picked = shuffle(cg, value, value, src)
        sel = _consts([1 if h else 0 for h in here], I1)
        if mask is not None:
            sel = b.and_(sel, b.shuffle_vector(mask, mask, _consts(src)))
        out.append(_map(lambda new, old: b.select(sel, new, old), picked, mat))
    return CoopVal(out, t)


def emit_extract(cg: FunctionCodegen, inst: Instruction):
    return extract(cg, cg.get(inst.slots["matrix"]), inst.attrs["index"])


def emit_insert(cg: FunctionCodegen, inst: Instruction):
    return insert(cg, cg.get(inst.slots["matrix"]), cg.get(inst.slots["value"]),
                  inst.attrs["index"], cg.mask)


def emit_apply(cg: FunctionCodegen, inst: Instruction):
    """The region once per entry index v of the work-items' parts, under the mask of the
    work-items whose entry v is not padding; the yielded values are inserted."""
    b = cg.b
    t: CoopMatrixType = inst.results[0].type
    m: CoopVal = cg.get(inst.slots["a"])
    body = inst.regions[0]
    arg_i, arg_j, arg_v = body.args
    lay = layout_of(t, cg.S)
    row_of, col_of, valid_at = lay.tables
    G, S = subgroups(cg), cg.S
    for v in range(lay.registers):
        valid = [bool(valid_at[p, v]) for _ in range(G) for p in range(S)]
        if not any(valid):
            continue
        rows = tuple(int(row_of[p, v]) for _ in range(G) for p in range(S))
        cols = tuple(int(col_of[p, v]) for _ in range(G) for p in range(S))
        run_mask = _consts([1 if x else 0 for x in valid], I1)
        if cg.mask is not None:
            run_mask = b.and_(run_mask, cg.mask)
        current = extract(cg, m, v)
        pre = b.block
        run, after = cg.block("apply"), cg.block("apply.end")
        b.cbranch(cg.reduce_or(run_mask), run, after)
        b.position_at_end(run)
        cg.env[arg_i] = Lanes(None, rows, I32)
        cg.env[arg_j] = Lanes(None, cols, I32)
        cg.env[arg_v] = current
        (y,) = cg.emit_region(body, run_mask)
        cg.current = inst
        new = insert(cg, m, y, v, run_mask)
        end = b.block
        b.branch(after)
        b.position_at_end(after)
        merged = cg.phi(t, True)
        cg.add_incoming(merged, new, end)
        cg.add_incoming(merged, m, pre)
        m = merged
    return CoopVal(list(m.mats), t)


#: the coopmatrix instructions on work-items' parts
EMITTERS: Dict[str, Callable] = {
    "cooperative_matrix_extract": emit_extract,
    "cooperative_matrix_insert": emit_insert,
    "cooperative_matrix_apply": emit_apply,
}
