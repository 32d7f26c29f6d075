"""Coopmatrix and subgroup semantics of the reference interpreter.

A coopmatrix value is an array of shape (subgroups, rows, cols), one whole matrix per
subgroup, or (1, rows, cols) when every subgroup holds the same matrix (a constant or
a value made in a collective region).  Work-item views of a matrix (extract, insert,
apply) go through the distribution of the language (``ttlc.ir.layout``).

Load, store, the atomics, mul_add, reduce and prefetch are executed by a subgroup as a
whole: a subgroup takes part when any of its work-items is active, and checked mode
reports a subgroup of which only some work-items are active (``coop_subgroups``).
Construct, scale, extract, insert, apply and arithmetic act per work-item on the
entries it holds; values of divergent branches merge entry by entry, each from the
branch its holder took (``owner_mask``, used by ``WorkGroup.select``).  Operands that must be dynamically uniform
(positions, memrefs, scalars, lane indices) are read from the first active work-item
of each subgroup through ``uniform_per_subgroup``, which in checked mode also reports
work-items of a subgroup that disagree.
"""
from __future__ import annotations

from typing import List, NamedTuple, Tuple

import numpy as np

from ..ir.layout import layout_of
from ..ir.ops import SUBGROUP_OPS
from ..ir.types import CoopMatrixType
from .semantics import (SemanticsTable, _accumulate_dtype, _buffer, _compute_dtype, _in_buffer,
                        as_type, convert, operand, result_dtype)
from ..runtime.values import MemRef, dtype_of

#: the semantics of this module: coopmatrix and subgroup instructions
COOP = SemanticsTable()


def owner_mask(wg, t: CoopMatrixType, mask: np.ndarray) -> np.ndarray:
    """Per entry of a (G, rows, cols) coopmatrix: is the work-item holding it in mask?

    This is how values of divergent control flow merge (``WorkGroup.select``): every
    work-item keeps its own part of the matrix from the branch it took."""
    G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
    owner = layout_of(t, S).owners
    return np.asarray(mask).reshape(G, S)[:, owner]


# ---- helpers --------------------------------------------------------------------------------
def _mask(wg, mask) -> np.ndarray:
    return wg.all_lanes if mask is None else mask


def _first_lanes(wg, mask) -> np.ndarray:
    """Per subgroup, the first active work-item (the subgroup's first one if none is)."""
    G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
    m = _mask(wg, mask).reshape(G, S)
    return np.arange(G) * S + np.where(m.any(axis=1), np.argmax(m, axis=1), 0)


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equality that treats NaN as equal to NaN."""
    eq = np.asarray(a == b)
    if a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
        eq = eq | (np.asarray(a != a) & np.asarray(b != b))
    return eq


def uniform_per_subgroup(wg, value, mask, what: str) -> np.ndarray:
    """A value that must be dynamically uniform: one entry per subgroup (shape (G,)).

    The value of the first active work-item of each subgroup is taken.  In checked mode,
    active work-items of a subgroup holding a different value are reported."""
    G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
    if np.ndim(value) == 0:
        v = np.asarray(value)
        return np.full(G, v, dtype=v.dtype)
    vals = np.asarray(value).reshape(G, S)
    first = _first_lanes(wg, mask)
    out = np.asarray(value)[first]
    if wg.checked:
        bad = _mask(wg, mask).reshape(G, S) & ~_same(vals, out[:, None])
        if bad.any():
            lane = int(np.argmax(bad.reshape(-1)))
            g = lane // S
            raise wg.fail(f"{what} must be dynamically uniform, but work-items of subgroup {g} "
                          f"disagree ({vals.reshape(-1)[lane]} here, {out[g]} at "
                          f"subgroup-local id {int(first[g]) % S})", lane)
    return out


def coop_subgroups(wg, mask) -> np.ndarray:
    """The subgroups executing a coopmatrix instruction (any work-item active), shape (G,).

    In checked mode a subgroup of which only some work-items are active is reported:
    a coopmatrix instruction is executed by the whole subgroup (uniform control flow)."""
    G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
    m = _mask(wg, mask).reshape(G, S)
    active = m.any(axis=1)
    if wg.checked:
        partial = active & ~m.all(axis=1)
        if partial.any():
            g = int(np.argmax(partial))
            lane = g * S + int(np.argmin(m[g]))
            raise wg.fail(f"'{wg.current.opcode}' reached by only some work-items of subgroup {g} "
                          "(a coopmatrix instruction needs the whole subgroup)", lane)
    return active


def per_subgroup(wg, t: CoopMatrixType, x) -> np.ndarray:
    """A coopmatrix value as an array of shape (G, rows, cols) (possibly a read-only view)."""
    return np.broadcast_to(x, (wg.cfg.subgroups, t.rows, t.cols))


class _SubgroupMemRef(NamedTuple):
    buffer: int
    offset: int
    shape: Tuple[int, ...]
    stride: Tuple[int, ...]


def memref_per_subgroup(wg, m: MemRef, mask, what: str) -> List[_SubgroupMemRef]:
    """A memref operand that must be dynamically uniform, one per subgroup."""
    G = wg.cfg.subgroups
    fields = [m.buffer, m.offset, *m.shape, *m.stride]
    per = [uniform_per_subgroup(wg, f, mask, what) for f in fields]
    n = len(m.shape)
    out = []
    for g in range(G):
        vals = [int(p[g]) for p in per]
        out.append(_SubgroupMemRef(vals[0], vals[1], tuple(vals[2:2 + n]), tuple(vals[2 + n:])))
    return out


# ---- memory ---------------------------------------------------------------------------------
def _coop_access(wg, inst, mask, m: MemRef, t: CoopMatrixType, fn) -> None:
    """Call fn(g, buffer, flat, valid) for each executing subgroup g.

    flat (rows x cols) holds the element index of each component in the buffer, valid
    says which components are accessed (the checked flags); flat[valid] lies in the
    buffer.  Implements the tables of cooperative_matrix_load/store."""
    transpose = inst.modifier("ta") == "t"
    checked = inst.modifier("checked")
    active = coop_subgroups(wg, mask)
    xs = uniform_per_subgroup(wg, operand(wg, inst, "x"), mask, "the row position")
    ys = uniform_per_subgroup(wg, operand(wg, inst, "y"), mask, "the column position")
    refs = memref_per_subgroup(wg, m, mask, "the memref")
    first = _first_lanes(wg, mask)
    i = np.arange(t.rows, dtype=np.int64)[:, None]
    j = np.arange(t.cols, dtype=np.int64)[None, :]
    for g in np.nonzero(active)[0]:
        ref = refs[g]
        x, y = int(xs[g]), int(ys[g])
        # memref row and column index of component (i, j)
        ri, ci = (x + j, y + i) if transpose else (x + i, y + j)
        ri, ci = np.broadcast_to(ri, (t.rows, t.cols)), np.broadcast_to(ci, (t.rows, t.cols))
        s1, s2 = ref.shape
        in_rows = (ri >= 0) & (ri < s1)
        in_cols = (ci >= 0) & (ci < s2)
        # rows_checked guards the coopmatrix row index i, cols_checked the column index j
        row_guard, col_guard = (in_cols, in_rows) if transpose else (in_rows, in_cols)
        valid = np.ones((t.rows, t.cols), dtype=bool)
        if checked in ("rows_checked", "both_checked"):
            valid &= row_guard
        if checked in ("cols_checked", "both_checked"):
            valid &= col_guard
        if wg.checked:
            bad = valid & ~(in_rows & in_cols)
            if bad.any():
                a, b = np.unravel_index(int(np.argmax(bad)), bad.shape)
                raise wg.fail(f"component ({a}, {b}) accesses index ({int(ri[a, b])}, "
                              f"{int(ci[a, b])}) outside the memref of shape {s1} x {s2}",
                              int(first[g]))
        if not valid.any():
            fn(g, None, None, valid)
            continue
        flat = ref.offset + ri * ref.stride[0] + ci * ref.stride[1]
        buf = _buffer(wg, ref.buffer)
        _in_buffer(buf, flat[valid])
        fn(g, buf, flat, valid)


@COOP.of("cooperative_matrix_load", "cooperative_matrix_atomic_load")
def coop_load(wg, inst, mask):
    t: CoopMatrixType = inst.results[0].type
    out = np.zeros((wg.cfg.subgroups, t.rows, t.cols), dtype=dtype_of(t))

    def gather(g, buf, flat, valid):
        if buf is not None:
            out[g][valid] = buf[flat[valid]]
    _coop_access(wg, inst, mask, operand(wg, inst, "tensor"), t, gather)
    return out


@COOP.of("cooperative_matrix_store", "cooperative_matrix_atomic_store")
def coop_store(wg, inst, mask):
    t: CoopMatrixType = inst.slots["value"].type
    value = per_subgroup(wg, t, operand(wg, inst, "value"))

    def scatter(g, buf, flat, valid):
        if buf is not None:
            buf[flat[valid]] = value[g][valid]
    _coop_access(wg, inst, mask, operand(wg, inst, "tensor"), t, scatter)


@COOP.of("cooperative_matrix_atomic_add", "cooperative_matrix_atomic_max",
           "cooperative_matrix_atomic_min")
def coop_atomic_update(wg, inst, mask):
    """Component-wise read-modify-write; returns the previous values (0 where not accessed)."""
    t: CoopMatrixType = inst.slots["value"].type
    dtype = dtype_of(t)
    value = per_subgroup(wg, t, operand(wg, inst, "value"))
    op = inst.opcode.rsplit("_", 1)[1]
    real_float = dtype.kind == "f" or dtype.name == "bfloat16"
    fn = {"add": np.add, "max": np.fmax if real_float else np.maximum,
          "min": np.fmin if real_float else np.minimum}[op]
    cd = _compute_dtype(dtype)
    old = np.zeros((wg.cfg.subgroups, t.rows, t.cols), dtype=dtype)

    def update(g, buf, flat, valid):
        if buf is None:
            return
        f, vals = flat[valid], value[g][valid]
        prev = np.empty(len(f), dtype=dtype)
        if len(np.unique(f)) == len(f):
            prev[:] = buf[f]
            buf[f] = as_type(fn(prev.astype(cd), vals.astype(cd)), dtype)
        else:  # components aliasing one element: one after the other
            for k in range(len(f)):
                prev[k] = buf[f[k]]
                buf[f[k]] = as_type(fn(np.asarray(prev[k]).astype(cd),
                                       np.asarray(vals[k]).astype(cd)), dtype)
        old[g][valid] = prev
    _coop_access(wg, inst, mask, operand(wg, inst, "tensor"), t, update)
    return old


@COOP.of("cooperative_matrix_prefetch")
def coop_prefetch(wg, inst, mask):
    """A hint: nothing is read.  The operands must still be dynamically uniform."""
    coop_subgroups(wg, mask)
    uniform_per_subgroup(wg, operand(wg, inst, "x"), mask, "the row position")
    uniform_per_subgroup(wg, operand(wg, inst, "y"), mask, "the column position")
    memref_per_subgroup(wg, operand(wg, inst, "tensor"), mask, "the memref")


# ---- values ---------------------------------------------------------------------------------
@COOP.of("cooperative_matrix_construct")
def coop_construct(wg, inst, mask):
    t: CoopMatrixType = inst.results[0].type
    dtype = dtype_of(t)
    a = operand(wg, inst, "a")
    if np.ndim(a) == 0:
        return np.full((1, t.rows, t.cols), a, dtype=dtype)
    vals = uniform_per_subgroup(wg, a, mask, "the number").astype(dtype)
    return np.ascontiguousarray(np.broadcast_to(vals[:, None, None],
                                                (wg.cfg.subgroups, t.rows, t.cols)))


def _lane_coords(wg, t: CoopMatrixType, v: int):
    """Per work-item: subgroup, row, column and validity of vector index v."""
    S = wg.cfg.subgroup_size
    lay = layout_of(t, S)
    if not 0 <= v < lay.registers:
        raise wg.fail(f"work-item vector index {v} is out of bounds for {t} with subgroup size "
                      f"{S} ({lay.registers} entries per work-item)")
    p = wg.local_id
    row, col, valid = lay.tables
    return wg.sg_linear, row[p, v], col[p, v], valid[p, v]


@COOP.of("cooperative_matrix_extract")
def coop_extract(wg, inst, mask):
    t: CoopMatrixType = inst.slots["matrix"].type
    mat = per_subgroup(wg, t, operand(wg, inst, "matrix"))
    g, r, c, valid = _lane_coords(wg, t, inst.attrs["index"])
    return np.where(valid, mat[g, r, c], np.zeros((), dtype=mat.dtype)).astype(mat.dtype)


@COOP.of("cooperative_matrix_insert")
def coop_insert(wg, inst, mask):
    t: CoopMatrixType = inst.slots["matrix"].type
    out = per_subgroup(wg, t, operand(wg, inst, "matrix")).copy()
    value = wg.lanes(as_type(operand(wg, inst, "value"), out.dtype))
    g, r, c, valid = _lane_coords(wg, t, inst.attrs["index"])
    write = valid & _mask(wg, mask)  # padding and inactive work-items change nothing
    out[g[write], r[write], c[write]] = value[write]
    return out


@COOP.of("cooperative_matrix_apply")
def coop_apply(wg, inst, mask):
    t: CoopMatrixType = inst.results[0].type
    out = per_subgroup(wg, t, operand(wg, inst, "a")).copy()
    body = inst.regions[0]
    arg_i, arg_j, arg_v = body.args
    lay = layout_of(t, wg.cfg.subgroup_size)
    rows, cols, valid = lay.tables
    m = _mask(wg, mask)
    g, p = wg.sg_linear, wg.local_id
    for v in range(lay.registers):
        r, c = rows[p, v], cols[p, v]
        active = m & valid[p, v]
        if not active.any():
            continue
        wg.env[arg_i] = r.astype(np.int32)
        wg.env[arg_j] = c.astype(np.int32)
        wg.env[arg_v] = out[g, r, c]
        (y,) = wg.exec_region(body, active)
        wg.current = inst
        y = wg.lanes(as_type(y, out.dtype))
        out[g[active], r[active], c[active]] = y[active]
    return out


@COOP.of("cooperative_matrix_mul_add")
def coop_mul_add(wg, inst, mask):
    """D = A B + C per subgroup, in C's component type (16-bit floats in f32), then cast."""
    coop_subgroups(wg, mask)
    a, b, c = (operand(wg, inst, s) for s in ("a", "b", "c"))
    c_dtype = dtype_of(inst.slots["c"].type)
    cd = _accumulate_dtype(inst.slots["c"].type)
    acc = np.matmul(np.asarray(a).astype(cd), np.asarray(b).astype(cd)) + np.asarray(c).astype(cd)
    acc = np.asarray(acc).astype(cd)
    if cd != c_dtype:  # the sum is a value of C's type before the cast to D's
        acc = acc.astype(c_dtype)
    return convert(acc, c_dtype, result_dtype(inst))


@COOP.of("cooperative_matrix_reduce_add", "cooperative_matrix_reduce_max",
           "cooperative_matrix_reduce_min")
def coop_reduce(wg, inst, mask):
    coop_subgroups(wg, mask)
    a = np.asarray(operand(wg, inst, "a"))
    dtype = result_dtype(inst)
    axis = 2 if inst.modifier("mode") == "row" else 1
    cd = _accumulate_dtype(inst.results[0].type)
    x = a.astype(cd)
    op = inst.opcode.rsplit("_", 1)[1]
    if op == "add":
        out = np.add.reduce(x, axis=axis, keepdims=True, dtype=cd)
    elif cd.kind == "f":
        out = (np.fmax if op == "max" else np.fmin).reduce(x, axis=axis, keepdims=True)
    else:
        out = (np.maximum if op == "max" else np.minimum).reduce(x, axis=axis, keepdims=True)
    return as_type(out, dtype)


@COOP.of("cooperative_matrix_scale")
def coop_scale(wg, inst, mask):
    dtype = result_dtype(inst)
    cd = _compute_dtype(dtype)
    a = operand(wg, inst, "a")
    if np.ndim(a) != 0:
        a = uniform_per_subgroup(wg, a, mask, "the scalar")[:, None, None]
    b = np.asarray(operand(wg, inst, "b"))
    return as_type(np.asarray(a).astype(cd) * b.astype(cd), dtype)


# ---- subgroup operations --------------------------------------------------------------------
@COOP.of("subgroup_broadcast")
def subgroup_broadcast(wg, inst, mask):
    G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
    dtype = result_dtype(inst)
    a = operand(wg, inst, "a")
    lane = uniform_per_subgroup(wg, operand(wg, inst, "lane"), mask, "the lane index")
    lane = lane.astype(np.int64)
    bad = (lane < 0) | (lane >= S)
    src = np.arange(G) * S + np.where(bad, 0, lane)
    m = _mask(wg, mask)
    if wg.checked:
        executing = m.reshape(G, S).any(axis=1)
        first = _first_lanes(wg, mask)
        for g in np.nonzero(executing)[0]:
            if bad[g]:
                raise wg.fail(f"subgroup_broadcast from work-item {int(lane[g])}, outside the "
                              f"subgroup of size {S}", int(first[g]))
            if not m[src[g]]:
                raise wg.fail(f"subgroup_broadcast from work-item {int(lane[g])}, which is not "
                              "active (its value is undefined)", int(first[g]))
    if np.ndim(a) == 0:
        return as_type(a, dtype)
    vals = np.where(bad, np.zeros((), dtype=dtype), np.asarray(a)[src]).astype(dtype)
    return np.repeat(vals, S)


def _identity(op: str, dtype: np.dtype):
    if op == "add":
        return np.zeros((), dtype=dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array(info.min if op == "max" else info.max, dtype=dtype)
    return np.array(-np.inf if op == "max" else np.inf, dtype=dtype)


@COOP.of(*SUBGROUP_OPS)
def subgroup_operation(wg, inst, mask):
    """Scans and reductions over the work-items of each subgroup, in subgroup-local id order.

    Inactive work-items contribute the identity.  16-bit floats are combined in f32 and
    each result is rounded once."""
    G, S = wg.cfg.subgroups, wg.cfg.subgroup_size
    dtype = result_dtype(inst)
    kind, op = inst.opcode[len("subgroup_"):].rsplit("_", 1)
    cd = _accumulate_dtype(inst.results[0].type)
    ident = _identity(op, cd)
    x = np.asarray(wg.lanes(operand(wg, inst, "a"))).astype(cd).reshape(G, S)
    x = np.where(_mask(wg, mask).reshape(G, S), x, ident)
    if op == "add":
        ufunc = np.add
    elif cd.kind == "f":
        ufunc = np.fmax if op == "max" else np.fmin
    else:
        ufunc = np.maximum if op == "max" else np.minimum
    inclusive = ufunc.accumulate(x, axis=1, dtype=cd)
    if kind == "inclusive_scan":
        out = inclusive
    elif kind == "exclusive_scan":
        out = np.concatenate([np.full((G, 1), ident, dtype=cd), inclusive[:, :-1]], axis=1)
    else:
        out = np.repeat(inclusive[:, -1:], S, axis=1)
    return as_type(out.reshape(-1), dtype)
