"""Checked code: data races on local memory, found as the interpreter finds them.

The rule is the interpreter's (``ttlc.interp.checks``): two accesses to one element of
local memory race when they come from different work-items, at least one writes, they are
not both atomic, and no ``barrier.local`` lies between them (the start of an SPMD region
ends an interval too).  Coopmatrix accesses are their subgroup's, so they race only with
other subgroups; the points (tiles) of a foreach are different work-items even when one
work-item runs several of them (``check_iteration`` at the top of each lowered body).

Only kernels that access local memory pay, and only in checked code.  Such a kernel gets
shadow memory after its ``alloca`` data in the per-thread scratch block: for each kind of
access it makes (``CLASSES``: read, write, atomic read, atomic write; scalar or coopmatrix)
and each element, the smallest and largest *actor* that accessed it in this interval and
the instruction that did.  An actor is ``base + lane``: ``base`` grows by the work-group
size at every interval start and every new foreach point and never goes back, so entries
from earlier intervals are those whose largest actor is below the interval's first
(``floor``), and nothing needs clearing at a barrier.  The shadow is cleared once per
kernel call.  Each access gathers the entries of the kinds it conflicts with, compares
actors (by subgroup where a coopmatrix access is involved) and scatters its own: all
lanes of an instruction at once (the smallest actor of lanes sharing an element wins the
reversed scatter, the largest the ordered one).  A plain write of one element by two
lanes of one instruction is found by reading the smallest actor back.

Accesses are numbered, and for each alloca and kind of access a register keeps the number
of the first in the interval: where an access conflicts with several kinds, the one
reported is the kind first made to the alloca, as the interpreter looks for them (two
lanes of one write last).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from llvmlite import ir

from ...analysis.effects import COOP_MEMORY, WRITE, accesses, alloca_of, conflicts, is_local
from ...analysis.effects import RACE_CLASSES as CLASSES
from ...analysis.effects import race_class as class_of
from ...ir.core import Function, Instruction
from ...runtime.findings import E_RACE, ERR_DETAILS, RACE_FIXED_DETAILS
from .values import I1, I8, I32, I64, PTR, VectorConstant, undef_of
from .vectors import gather, masked_load, splat_n

#: details of an E_RACE record before the index values (worded by ``findings.race_words``)
FIXED_DETAILS = RACE_FIXED_DETAILS
#: a number above every access's
LAST = 1 << 62


class Shadow:
    """The shadow memory of one kernel and the registers of the current interval."""

    def __init__(self, cg, classes: List[int], granule: int, allocas: List[Instruction]):
        self.classes = classes
        self.shift = granule.bit_length() - 1
        b = cg.b
        # where the shadow starts and how many elements it covers are known once every
        # alloca is placed: constants the finish hook fills in (LLVM folds the loads)
        self.consts = []
        for what in ("offset", "entries"):
            gv = ir.GlobalVariable(cg.module, I64, f"{cg.symbol}.race.{what}")
            gv.global_constant = True
            gv.linkage = "internal"
            self.consts.append(gv)
        offset, entries = (b.load(gv, typ=I64) for gv in self.consts)
        self.data_end = offset
        start = b.gep(cg.local, [offset], source_etype=I8)
        n = len(classes)
        self.low = [b.gep(start, [b.mul(entries, ir.Constant(I64, 16 * j))], source_etype=I8)
                    for j in range(n)]
        self.high = [b.gep(start, [b.mul(entries, ir.Constant(I64, 16 * j + 8))], source_etype=I8)
                     for j in range(n)]
        self.inst = [b.gep(start, [b.mul(entries, ir.Constant(I64, 16 * n + 4 * j))],
                           source_etype=I8) for j in range(n)]
        size = b.mul(entries, ir.Constant(I64, 20 * n))
        cg.intrinsic("llvm.memset", ir.VoidType(), [start, ir.Constant(I8, 0), size,
                                                    ir.Constant(I1, 0)], [PTR, I64])
        self.base, self.floor, self.unfenced, self.seq, self.seq_floor = (
            b.alloca(I64, name=f"race.{x}")
            for x in ("base", "floor", "unfenced", "seq", "seq_floor"))
        for reg, v in ((self.base, 0), (self.floor, 0), (self.unfenced, -1), (self.seq, 0),
                       (self.seq_floor, 1)):
            b.store(ir.Constant(I64, v), reg)
        #: per (alloca, class): the register of the number of the interval's first access
        self.first = {}
        for a in allocas:
            for cls in classes:
                reg = self.first[a, cls] = b.alloca(I64, name="race.first")
                b.store(ir.Constant(I64, 0), reg)

        def finish() -> None:
            data = -(-cg.local_bytes // 64) * 64
            count = -(-data >> self.shift)
            self.consts[0].initializer = ir.Constant(I64, data)
            self.consts[1].initializer = ir.Constant(I64, count)
            cg.local_bytes = data + 20 * n * count
        cg.finish_hooks.append(finish)


def setup(cg) -> Optional[Shadow]:
    """The shadow of a checked kernel that accesses local memory (None for others); called
    in the entry block."""
    func: Function = cg.func
    classes, allocas = set(), []
    for inst in func.body.walk():
        if inst.opcode == "alloca" and is_local(inst.results[0].type):
            allocas.append(inst)
        if any(is_local(v.type) for v, _ in accesses(inst)):
            classes.add(class_of(inst))
    if not classes or not allocas:
        return None
    granule = min(a.results[0].type.element.size for a in allocas)
    return Shadow(cg, sorted(classes), granule, allocas)


# ---- the interval ---------------------------------------------------------------------------
def _next_actors(cg, sh: Shadow) -> ir.Value:
    b = cg.b
    base = b.add(b.load(sh.base, typ=I64), ir.Constant(I64, cg.W))
    b.store(base, sh.base)
    return base


def interval(cg) -> None:
    """A new interval begins (an SPMD region, a barrier.local): earlier accesses are ordered."""
    sh: Shadow = cg.races
    b = cg.b
    b.store(_next_actors(cg, sh), sh.floor)
    b.store(ir.Constant(I64, -1), sh.unfenced)
    b.store(b.add(b.load(sh.seq, typ=I64), ir.Constant(I64, 1)), sh.seq_floor)


def barrier(cg, inst: Instruction) -> None:
    """barrier.local ends the interval; a barrier without it is remembered for the message."""
    if inst.modifier("local"):
        interval(cg)
    else:
        cg.b.store(ir.Constant(I64, cg.inst_id(inst)), cg.races.unfenced)


def emit_check_iteration(cg, inst: Instruction) -> None:
    """A new foreach point: the accesses after it are by new actors."""
    if cg.races is not None:
        _next_actors(cg, cg.races)


# ---- accesses ---------------------------------------------------------------------------------
def _gather(cg, base: ir.Value, idx: ir.Value, width: int, mask: ir.Value) -> ir.Value:
    et = ir.IntType(8 * width)
    n = idx.type.count
    return gather(cg, et, cg.b.gep(splat_n(cg, base, n), [idx], source_etype=et), mask)


def _scatter(cg, base: ir.Value, idx: ir.Value, value: ir.Value, mask: ir.Value,
             reverse: bool = False) -> None:
    """Masked scatter; with several lanes on one element the last one (in lane order, or
    reversed) wins."""
    n = idx.type.count
    et = value.type.element
    if reverse:
        order = VectorConstant(I32, list(range(n - 1, -1, -1)))
        idx, value, mask = (cg.b.shuffle_vector(x, undef_of(x.type), order)
                            for x in (idx, value, mask))
    ptrs = cg.b.gep(splat_n(cg, base, n), [idx], source_etype=et)
    cg.intrinsic("llvm.masked.scatter", ir.VoidType(),
                 [value, ptrs, ir.Constant(I32, et.width // 8), mask], [value.type, ptrs.type])


def _masked_load(cg, base: ir.Value, first: ir.Value, vt: ir.VectorType, mask: ir.Value):
    p = cg.b.gep(base, [first], source_etype=vt.element)
    return masked_load(cg, vt.element, p, mask, vt.count)


def _masked_store(cg, base: ir.Value, first: ir.Value, value: ir.Value, mask: ir.Value) -> None:
    et = value.type.element
    p = cg.b.gep(base, [first], source_etype=et)
    cg.intrinsic("llvm.masked.store", ir.VoidType(),
                 [value, p, ir.Constant(I32, et.width // 8), mask], [value.type, PTR])


def track(cg, inst: Instruction, addrs: ir.Value, active: Optional[ir.Value], me: ir.Value,
          index: Sequence[ir.Value], work_item: Callable[[ir.Value], ir.Value],
          consecutive: bool = False) -> None:
    """Checked code: the accesses of ``inst`` to local memory at the element addresses
    ``addrs`` (<n x i64>) where ``active``, by actors ``me`` (<n x i64>): report a race
    with an earlier access of this interval (or, for plain writes, of this instruction),
    else record them.  ``index`` (<n x i64> each) is the index each was made through and
    ``work_item(k)`` the lane (i32) that made access k, for the message.  ``consecutive``:
    the caller knows that the lanes access consecutive elements (of one alloca), so that
    their shadow entries are consecutive too when the elements are as large as the
    shadow's granule: vector loads and stores instead of gathers and scatters, and no two
    lanes share an element."""
    sh: Shadow = cg.races
    b = cg.b
    n = addrs.type.count
    vt = ir.VectorType(I64, n)
    mine = class_of(inst)
    kind, coop = CLASSES[mine]
    rel = b.sub(addrs, splat_n(cg, b.ptrtoint(cg.local, I64), n))
    inside = b.icmp_unsigned("<", rel, splat_n(cg, sh.data_end, n))  # (defensive)
    act = inside if active is None else b.and_(active, inside)
    idx = b.lshr(rel, ir.Constant(vt, [sh.shift] * n))
    size = inst.slots["tensor"].type.element.size
    first = b.extract_element(idx, ir.Constant(I32, 0)) if consecutive and size == 1 << sh.shift \
        else None

    def load(base: ir.Value, width: int) -> ir.Value:
        if first is None:
            return _gather(cg, base, idx, width, act)
        return _masked_load(cg, base, first, ir.VectorType(ir.IntType(8 * width), n), act)

    def store(base: ir.Value, value: ir.Value, reverse: bool = False) -> None:
        if first is None:
            _scatter(cg, base, idx, value, act, reverse)
        else:
            _masked_store(cg, base, first, value, act)
    floor = splat_n(cg, b.load(sh.floor, typ=I64), n)
    inst_id = cg.inst_id(inst)

    def report(bad: ir.Value, other: ir.Value, packed: ir.Value, lowest: bool = False) -> None:
        """Report the first access where ``bad`` (``lowest``: of the lowest such element,
        as the interpreter picks among the writes of one instruction)."""
        if lowest:
            at_least = ir.Constant(vt, [-1] * n)
            first = cg.intrinsic("llvm.vector.reduce.umin", I64, [b.select(bad, idx, at_least)],
                                 [vt])
            bad = b.and_(bad, b.icmp_unsigned("==", idx, splat_n(cg, first, n)))
        k = cg.first_lane(bad)
        k = b.select(b.icmp_unsigned("<", k, ir.Constant(I32, n)), k, ir.Constant(I32, 0))
        at = lambda v: b.extract_element(v, k)  # noqa: E731
        room = ERR_DETAILS - FIXED_DETAILS
        details = [at(rel), at(other), at(packed), at(me), b.load(sh.unfenced, typ=I64),
                   ir.Constant(I64, len(index))] + [at(v) for v in index[:room]]
        cg.fail_if(cg.reduce_or(bad), E_RACE, details, lane=work_item(k))

    def unit(v: ir.Value, size: int) -> ir.Value:
        return v if size == 1 else b.udiv(v, ir.Constant(vt, [size] * n))

    seq = b.add(b.load(sh.seq, typ=I64), ir.Constant(I64, 1))
    b.store(seq, sh.seq)
    alloca = alloca_of(inst.slots["tensor"])
    # of the kinds this access conflicts with, the one first made in the interval
    best = ir.Constant(I64, LAST)
    chosen = None  # (bad, other actor, packed)
    for j, cls in enumerate(sh.classes):
        other_kind, other_coop = CLASSES[cls]
        if not conflicts(kind, other_kind):
            continue
        group = cg.S if coop or other_coop else 1
        low, high = (load(p[j], 8) for p in (sh.low, sh.high))
        me_u = unit(me, group)
        differ_low = b.icmp_unsigned("!=", unit(low, group), me_u)
        differ = b.or_(differ_low, b.icmp_unsigned("!=", unit(high, group), me_u))
        bad = b.and_(b.and_(act, b.icmp_signed(">=", high, floor)), differ)
        other_inst = b.sext(load(sh.inst[j], 4), vt)
        packed = b.add(b.mul(b.add(b.mul(other_inst, ir.Constant(vt, [8] * n)),
                                   ir.Constant(vt, [cls] * n)), ir.Constant(vt, [8] * n)),
                       ir.Constant(vt, [mine] * n))
        found = (bad, b.select(differ_low, low, high), packed)
        made = b.load(sh.first[alloca, cls], typ=I64)
        better = b.and_(cg.reduce_or(bad), b.icmp_signed("<", made, best))
        # (the first candidate stands until a better one: nothing to select it against)
        chosen = found if chosen is None else \
            tuple(b.select(better, x, y) for x, y in zip(found, chosen))
        best = b.select(better, made, best)
    if chosen is not None:
        report(*chosen)
    first_made = sh.first[alloca, mine]  # this access's number if it is the first
    made = b.load(first_made, typ=I64)
    keep = b.or_(b.icmp_signed(">=", made, b.load(sh.seq_floor, typ=I64)),
                 b.not_(cg.reduce_or(act)))
    b.store(b.select(keep, made, seq), first_made)
    j = sh.classes.index(mine)
    low, high = (load(p[j], 8) for p in (sh.low, sh.high))
    stale = b.icmp_signed("<", high, floor)
    smaller = b.icmp_signed("<", low, me)
    larger = b.icmp_signed(">", high, me)
    new_low = b.select(b.and_(b.xor(stale, ir.Constant(stale.type, [1] * n)), smaller), low, me)
    new_high = b.select(b.and_(b.xor(stale, ir.Constant(stale.type, [1] * n)), larger), high, me)
    store(sh.high[j], new_high)
    store(sh.low[j], new_low, reverse=True)
    store(sh.inst[j], VectorConstant(I32, [inst_id] * n))
    if kind == WRITE and not coop and first is None:  # two lanes writing one element
        first = _gather(cg, sh.low[j], idx, 8, act)
        packed = ir.Constant(vt, [(inst_id * 8 + mine) * 8 + mine] * n)
        report(b.and_(act, b.icmp_unsigned("!=", first, me)), first, packed, lowest=True)
