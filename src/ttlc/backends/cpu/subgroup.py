"""Subgroup operations on the CPU: scans, reductions and broadcasts.

The lanes of subgroup g are lanes ``g*S .. g*S+S-1`` of the work-group's vectors; a scan
or reduction combines them with shuffles in subgroup-local id order (16-bit floats in
f32), inactive lanes giving the identity.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List

from llvmlite import ir

from ...ir.core import Instruction
from ...ir.numerics import accumulate_type
from ...ir.ops import SUBGROUP_OPS
from ...ir.types import SCALAR_TYPES, ScalarType
from ...runtime.findings import E_BROADCAST
from .arith import binary
from .coop import first_lane, subgroup_active, uniform_in
from .function import FunctionCodegen
from .values import (F16, F32, I1, I32, I64, Cplx, Lanes, VectorConstant, is_vec, parts,
                     undef_of, zero_of)


def _subgroup_lanes(cg: FunctionCodegen, k: int) -> ir.Constant:
    """Shuffle mask picking lane k of every subgroup (one entry per subgroup)."""
    G = cg.W // cg.S
    return VectorConstant(I32, [g * cg.S + k for g in range(G)])


def emit_subgroup_op(cg: FunctionCodegen, inst: Instruction):
    """Scans and reductions in subgroup-local id order; inactive lanes give the identity."""
    b = cg.b
    t: ScalarType = inst.results[0].type
    kind, op = inst.opcode[len("subgroup_"):].rsplit("_", 1)
    x = cg.splat(cg.get(inst.slots["a"]))
    G, S = cg.W // cg.S, cg.S
    # combine 16-bit floats in f32 (accumulate_type), round every result once
    wide = accumulate_type(t) != t

    def widen(v):
        if t.name == "bf16":
            return cg.bf16_to_f32(v)
        if t.name == "f16":
            return b.fpext(v, cg.like(v, F32))
        return v

    def narrow(v):
        if t.name == "bf16":
            return cg.f32_to_bf16(v)
        if t.name == "f16":
            return b.fptrunc(v, cg.like(v, F16))
        return v

    xs = [widen(p) for p in parts(x)]
    elem = xs[0].type.element
    if op == "add":
        ident = 0 if isinstance(elem, ir.IntType) else 0.0
    elif isinstance(elem, ir.IntType):
        bits = elem.width
        ident = -(1 << (bits - 1)) if op == "max" else (1 << (bits - 1)) - 1
    else:
        ident = -math.inf if op == "max" else math.inf
    if cg.mask is not None:
        xs = [b.select(cg.mask, p, cg.const_like(p, elem, ident)) for p in xs]
    cst = SCALAR_TYPES["f32"] if wide else t
    pick = [[b.shuffle_vector(p, p, _subgroup_lanes(cg, k)) for p in xs] for k in range(S)]
    acc = None
    prefix = []
    for k in range(S):
        cur = pick[k]
        if acc is None:
            acc = cur
        else:
            combined = binary(cg, op, cst, cst_value(cst, acc), cst_value(cst, cur))
            acc = parts(combined)
        prefix.append(acc)
    ident_g = [VectorConstant(elem, [ident] * G) for _ in xs]
    if kind == "reduce":
        per_k = [prefix[-1]] * S
    elif kind == "inclusive_scan":
        per_k = prefix
    else:
        per_k = [ident_g] + prefix[:-1]
    outs = [narrow(_transpose_back(cg, [per_k[k][c] for k in range(S)]))
            for c in range(len(xs))]
    return cg.from_parts(t, outs)


def _transpose_back(cg: FunctionCodegen, per_k: List[ir.Value]) -> ir.Value:
    """S vectors of G lanes (entry g of vector k for lane g*S + k) as one vector of W lanes."""
    b = cg.b
    S = len(per_k)
    G = per_k[0].type.count
    vecs = list(per_k)
    while len(vecs) > 1:  # concatenate pairwise: the order of the vectors is kept
        n = vecs[0].type.count
        cat = VectorConstant(I32, list(range(2 * n)))
        vecs = [b.shuffle_vector(vecs[i], vecs[i + 1], cat) for i in range(0, len(vecs), 2)]
    # vecs[0][k * G + g] is lane g * S + k
    perm = [(lane % S) * G + lane // S for lane in range(S * G)]
    return b.shuffle_vector(vecs[0], vecs[0], VectorConstant(I32, perm))


def cst_value(t: ScalarType, ps: list):
    return Cplx(ps[0], ps[1]) if t.is_complex else ps[0]


def _check_broadcast(cg: FunctionCodegen, lane) -> None:
    """Checked code: every executing subgroup broadcasts from an active work-item of
    itself (the lane as its first active work-item sees it)."""
    b = cg.b
    if isinstance(lane, Lanes):
        lane = cg.vector(lane)
    saved = cg.mask
    for g in range(cg.W // cg.S):
        first = first_lane(cg, g)
        src = uniform_in(cg, lane, first, g, "the lane index")
        outside = b.or_(b.icmp_signed("<", src, ir.Constant(I32, 0)),
                        b.icmp_signed(">=", src, ir.Constant(I32, cg.S)))
        executing = subgroup_active(cg, g)
        if saved is not None:
            index = b.add(b.select(outside, ir.Constant(I32, 0), src), ir.Constant(I32, g * cg.S))
            inactive = b.xor(b.extract_element(saved, index), ir.Constant(I1, 1))
        else:
            inactive = ir.Constant(I1, 0)
        cg.mask = None
        try:
            for kind, bad in enumerate((outside, inactive)):
                if executing is not None:
                    bad = b.and_(bad, executing)
                cg.fail_if(bad, E_BROADCAST, [ir.Constant(I64, kind), src,
                                              ir.Constant(I64, cg.S)], lane=first)
        finally:
            cg.mask = saved


def emit_subgroup_broadcast(cg: FunctionCodegen, inst: Instruction):
    b = cg.b
    t: ScalarType = inst.results[0].type
    a = cg.get(inst.slots["a"])
    lane = cg.get(inst.slots["lane"])
    G, S = cg.W // cg.S, cg.S
    if cg.checked:
        _check_broadcast(cg, lane)
    if not cg.varying_repr(a):
        return a
    lane = cg.splat(lane)
    # the lane index of the first active work-item of each subgroup
    mask = cg.mask
    outs = []
    for p in parts(a):
        vec = undef_of(ir.VectorType(p.type.element, G))
        for g in range(G):
            if mask is None:
                src_l = b.extract_element(lane, ir.Constant(I32, g * S))
            else:
                sub = b.shuffle_vector(mask, mask,
                                       VectorConstant(I32, list(range(g * S, g * S + S))))
                first = cg.first_lane(sub)
                # an inactive subgroup: take its first lane (any value will do)
                first = b.select(b.icmp_unsigned("==", first, ir.Constant(I32, S)),
                                 ir.Constant(I32, 0), first)
                src_l = b.extract_element(lane, b.add(first, ir.Constant(I32, g * S)))
            bad = b.or_(b.icmp_signed("<", src_l, ir.Constant(I32, 0)),
                        b.icmp_signed(">=", src_l, ir.Constant(I32, S)))
            idx = b.add(b.select(bad, ir.Constant(I32, 0), src_l), ir.Constant(I32, g * S))
            val = b.select(bad, zero_of(p.type.element), b.extract_element(p, idx))
            vec = b.insert_element(vec, val, ir.Constant(I32, g))
        # every lane of subgroup g takes entry g
        outs.append(b.shuffle_vector(vec, vec,
                                     VectorConstant(I32, [lane // S for lane in range(cg.W)])))
    return cg.from_parts(t, outs)


#: the subgroup operations
EMITTERS: Dict[str, Callable] = {
    **dict.fromkeys(SUBGROUP_OPS, emit_subgroup_op),
    "subgroup_broadcast": emit_subgroup_broadcast,
}
