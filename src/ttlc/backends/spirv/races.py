"""Checked SPIR-V: data races on local memory, found as the interpreter finds them.

The rule is the interpreter's (``ttlc.interp.checks``): two accesses to one element of
local memory race when they come from different work-items, at least one writes, they
are not both atomic, and no ``barrier.local`` lies between them (the start of an SPMD
region ends an interval too).  Coopmatrix accesses (the element accesses lower-simt
makes of them, which carry a ``checks.Marked`` location) are their subgroup's, so they
race only with other subgroups; the points of a foreach are different work-items even
when one work-item runs several of them (``check_iteration`` at the top of each lowered
body, as on target cpu).  Lowered BLAS instructions (``DISJOINT`` SPMD regions) and
collective code are not tracked, as the interpreter does not track them.

Only kernels that access local memory pay, and only in checked code.  Such a kernel gets
a shadow in Workgroup memory next to its allocas: for each kind of access it makes
(``RACE_CLASSES``) and each element of each alloca, two 64-bit keys and the
last instruction.  A work-item counts the intervals it went through (``interval``, the
same in every work-item, since barriers are reached by whole work-groups) and, within
an SPMD region, the foreach points it ran before (``chunk``: the work-group size per
point); its *actor* is ``chunk`` plus its linear id (for coopmatrix accesses, the first
id of its subgroup).  The keys are ``interval << 32 | (2**32 - 1 - actor)`` (the
smallest actor of the newest interval wins an atomic maximum) and ``interval << 32 |
actor`` (the largest): keys of an older interval are stale, so nothing is cleared at a
barrier; the shadow is zeroed once at the start of the kernel.

Work-items run at once, so each access first records itself (OpAtomicSMax, sequentially
consistent: whichever of two conflicting accesses records second sees the first) and
then compares the actors it finds for the kinds it conflicts with: for its own kind the
keys the atomics replaced and the smallest actor read back, for the others atomic
loads.  A function per kind of access does this (``_checker``), so that an access costs
a call.  The lowest work-item of the
subgroup that finds a race reports it (``checks.fail_if``, E_RACE with the details of
``findings.RACE_FIXED_DETAILS``), worded by ``findings.race_words`` as the interpreter
words it.  Which of two racing accesses is reported depends on the order the
device ran them in: the one that came second.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from ...analysis.effects import (DISJOINT, RACE_CLASSES, accesses, conflicts, is_local,
                                 race_class)
from ...ir.core import Instruction
from ...runtime.findings import E_RACE, ERR_DETAILS, RACE_FIXED_DETAILS
from . import checks
from .builder import Enum
from .function import Kernel, MemVal

WORKGROUP = 2  # Scope Workgroup
LOW = 0xFFFFFFFF  # the low 32 bits of a key: the actor (or its complement)
#: bytes of shadow per element of local memory and kind of access: two keys, an instruction
BYTES = 20
#: the device extension the shadow's atomics need
EXTENSION = "cl_khr_int64_extended_atomics"


def class_of(inst: Instruction) -> int:
    """The kind of access (``RACE_CLASSES``) of an element access: its coopmatrix
    instruction's, if lower-simt made it of one."""
    loc = inst.loc
    return race_class(loc.inst if isinstance(loc, checks.Marked) else inst)


class Shadow:
    """The shadow of one kernel's local memory and this work-item's interval registers."""

    def __init__(self, k: Kernel, allocas: List[Instruction], classes: List[int]):
        self.classes = classes
        #: per alloca: (first shadow element, elements); ``locals`` the table the host
        #: words races with (``findings.kernel_error``)
        self.spans: Dict[Instruction, tuple] = {}
        self.locals: List[tuple] = []
        n = 0
        for inst in allocas:
            t = inst.results[0].type
            count = max(1, t.extent)
            self.spans[inst] = (n, count, t.element.size)
            name = inst.results[0].name
            self.locals.append((n, count, 1, f"%{name}" if name else None))
            n += count
        self.elements = n
        #: the Workgroup variable of each alloca emitted so far (``emit_alloca``)
        self.variables: Dict[Instruction, int] = {}
        #: the function (id) checking each kind of access (``_checker``)
        self.checkers: Dict[int, int] = {}
        m, i64, i32 = k.m, k.i64(), k.i32()
        m.require_capability("Int64Atomics")
        size = len(classes) * n

        def workgroup(t: int, length: int) -> int:
            return m.add("global", "Variable", m.type_pointer("Workgroup", m.type_array(t, length)),
                         m.id(), Enum("StorageClass", "Workgroup"))
        self.keys, self.insts = workgroup(i64, 2 * size), workgroup(i32, size)
        k.local_bytes += BYTES * size
        self.interval, self.chunk, self.unfenced = (k.variable(i64) for _ in range(3))
        for var, v in ((self.interval, 1), (self.chunk, 0), (self.unfenced, -1)):
            k.op("Store", None, var, k.c64(v))
        # zero the keys (interval 0: stale), each work-item its share, before any access
        W = k.cfg.lanes
        _loop(k, checks.work_item(k, True), k.c64(2 * size), k.c64(W),
              lambda j: k.op("Store", None, self._at(k, self.keys, i64, j), k.c64(0)))
        scope = k.c32(WORKGROUP)
        k.op("ControlBarrier", None, scope, scope,
             k.c32(Enum("MemorySemantics", "AcquireRelease|WorkgroupMemory").value))

    @staticmethod
    def _at(k: Kernel, var: int, t: int, j: int) -> int:
        return k.op("AccessChain", k.m.type_pointer("Workgroup", t), var, j)

    def key(self, k: Kernel, cls: int, e: int, high: bool) -> int:
        at = k.op("IMul", k.i64(), k.op("IAdd", k.i64(), k.c64(self.classes.index(cls) *
                                                               self.elements), e), k.c64(2))
        return self._at(k, self.keys, k.i64(), k.op("IAdd", k.i64(), at, k.c64(int(high))))

    def inst(self, k: Kernel, cls: int, e: int) -> int:
        at = k.op("IAdd", k.i64(), k.c64(self.classes.index(cls) * self.elements), e)
        return self._at(k, self.insts, k.i32(), at)

    def element(self, k: Kernel, addr: int) -> int:
        """The shadow element (i64) of the address (i64) of an element of an alloca: the
        alloca whose bytes hold it (allocas are Workgroup variables of their own)."""
        i64, bt = k.i64(), k.m.type_bool()
        e = None
        for inst, var in self.variables.items():
            first, count, size = self.spans[inst]
            rel = k.op("ISub", i64, addr, k.op("ConvertPtrToU", i64, var))
            here = k.op("IAdd", i64, k.c64(first), k.op("UDiv", i64, rel, k.c64(size)))
            if e is None:
                e = here
            else:
                inside = k.op("ULessThan", bt, rel, k.c64(count * size))
                e = k.op("Select", i64, inside, here, e)
        return e


def _loop(k: Kernel, start: int, end: int, step: int, body) -> None:
    """for (j = start; j < end; j += step) body(j), on i64 ids."""
    i64 = k.i64()
    pre = k.label
    header, inner, cont, merge = (k.m.id() for _ in range(4))
    k.branch(header)
    k.block(header)
    k.m.add("function", "Phi", i64, k.m.id())
    phi = k.m.sections["function"][-1]
    cond = k.op("SLessThan", k.m.type_bool(), phi.result, end)
    k.op("LoopMerge", None, merge, cont, Enum("LoopControl", "None"))
    k.op("BranchConditional", None, cond, inner, merge)
    k.block(inner)
    body(phi.result)
    k.branch(cont)
    k.block(cont)
    nxt = k.op("IAdd", i64, phi.result, step)
    k.branch(header)
    phi.operands = [start, pre, nxt, cont]
    k.block(merge)


def setup(k: Kernel) -> None:
    """At the start of a checked kernel: the shadow, if it accesses local memory in SPMD
    code (``k.races``; None for others)."""
    allocas, classes = [], set()

    def walk(region, spmd: bool) -> None:
        for inst in region.instructions:
            if inst.opcode == "alloca" and is_local(inst.results[0].type):
                allocas.append(inst)
            if spmd and any(is_local(v.type) for v, _ in accesses(inst)):
                classes.add(class_of(inst))
            inner = spmd or (inst.opcode == "parallel" and not inst.attrs.get(DISJOINT))
            for r in inst.regions:
                walk(r, inner)
    walk(k.func.body, False)
    k.races = Shadow(k, allocas, sorted(classes)) if allocas and classes else None


def alloca(k: Kernel, inst: Instruction, var: int) -> None:
    if k.races is not None:
        k.races.variables[inst] = var


# ---- intervals ----------------------------------------------------------------------------------
def _add(k: Kernel, var: int, n: int) -> None:
    k.op("Store", None, var, k.op("IAdd", k.i64(), k.op("Load", k.i64(), var), k.c64(n)))


def enter_parallel(k: Kernel, inst: Instruction) -> Optional[Shadow]:
    """An SPMD region begins an interval (its foreach points counted from 0); a lowered
    BLAS instruction is not tracked.  The shadow to restore after the region."""
    sh = k.races
    if sh is None:
        return None
    if inst.attrs.get(DISJOINT):
        k.races = None
        return sh
    _add(k, sh.interval, 1)
    k.op("Store", None, sh.chunk, k.c64(0))
    k.op("Store", None, sh.unfenced, k.c64(-1))
    return sh


def barrier(k: Kernel, inst: Instruction) -> None:
    """After a barrier in SPMD code: barrier.local begins an interval; a barrier without
    it is remembered for the message."""
    sh = k.races
    if sh is None or not k.spmd:
        return
    if inst.modifier("local"):
        _add(k, sh.interval, 1)
        k.op("Store", None, sh.unfenced, k.c64(-1))
    else:
        k.op("Store", None, sh.unfenced, k.c64(checks.inst_id(k, inst)))


def emit_check_iteration(k: Kernel, inst: Instruction):
    """A new foreach point: the accesses after it are by new actors."""
    if k.races is not None:
        _add(k, k.races.chunk, k.cfg.lanes)


# ---- accesses -----------------------------------------------------------------------------------
#: index values an E_RACE record holds
ROOM = ERR_DETAILS - RACE_FIXED_DETAILS


def tracks(k: Kernel, m: MemVal) -> bool:
    """Whether accesses to m here are tracked: checked SPMD code, local memory."""
    return k.races is not None and k.spmd > 0 and is_local(m.type)


def access(k: Kernel, inst: Instruction, m: MemVal, ptr: int, index: Sequence) -> None:
    """The access of ``inst`` to the element at ``ptr`` of ``m`` (through ``index``,
    Values), where ``tracks``: record it and report a race with an earlier access of this
    interval, by a call of the checker of its kind of access (``_checker``), so that an
    access costs little more than a call.  Call it where the access is performed."""
    sh: Shadow = k.races
    i64 = k.i64()
    mine = class_of(inst)
    lane = (k.op("IMul", i64, checks._subgroup(k), k.c64(k.S)) if RACE_CLASSES[mine][1]
            else checks.work_item(k))
    checks._ballots(k)  # the checker's
    me = k.op("IAdd", i64, k.op("Load", i64, sh.chunk), lane)
    if mine not in sh.checkers:
        sh.checkers[mine] = k.m.id()
    index = [k.ival(k.index(i)) for i in index][:ROOM]
    index += [k.c64(0)] * (ROOM - len(index))
    k.op("FunctionCall", k.m.type_void(), sh.checkers[mine], k.op("ConvertPtrToU", i64, ptr),
         me, lane, k.op("Load", i64, sh.interval), k.op("Load", i64, sh.unfenced),
         k.c64(checks.inst_id(k, inst)), k.c64(len(inst.slots["index"])), *index, k.failed,
         k.record)


def finish(k: Kernel) -> None:
    """After the kernel's function: the checkers its accesses call."""
    if k.races is None:
        return
    failed, record = k.failed, k.record
    for mine, fid in k.races.checkers.items():
        _checker(k, mine, fid)
    k.failed, k.record = failed, record


def _checker(k: Kernel, mine: int, fid: int) -> None:
    """The function that records an access of kind ``mine`` (parameters: its address,
    actor, work-item, the interval, the barrier without .local fence, the instruction,
    the number of index values and the first ``ROOM`` of them, the work-item's finding
    flag and the error buffer) and reports the race it makes, if any.  Its own kind is
    compared with the keys its atomics replaced (accesses before it) and with the
    smallest actor read back (lanes of one instruction, which the device may merge into
    one atomic); other kinds with atomic loads.  The first race in the order of
    ``classes`` is reported, by the work-item of lowest subgroup-local id that finds
    one."""
    sh: Shadow = k.races
    m, i64, i32, bt = k.m, k.i64(), k.i32(), k.m.type_bool()
    params = [i64] * (7 + ROOM) + [m.type_pointer("Function", bt),
                                   m.type_pointer("CrossWorkgroup", i64)]
    m.add("function", "Function", m.type_void(), fid, Enum("FunctionControl", "DontInline"),
          m.type_function(m.type_void(), params))
    addr, me, lane, interval, unfenced, inst, order, *rest = (
        m.add("function", "FunctionParameter", t, m.id()) for t in params)
    index, (k.failed, k.record) = rest[:ROOM], rest[ROOM:]
    m.name(fid, f"ttlc.race.{mine}")
    k.block(m.id())
    e = sh.element(k, addr)
    interval = k.op("ShiftLeftLogical", i64, interval, k.c64(32))
    kind, coop = RACE_CLASSES[mine]
    scope = k.c32(WORKGROUP)
    sem = k.c32(Enum("MemorySemantics", "SequentiallyConsistent|WorkgroupMemory").value)
    relaxed = k.c32(0)
    keys = (k.op("IAdd", i64, interval, k.op("ISub", i64, k.c64(LOW), me)),
            k.op("IAdd", i64, interval, me))
    old = [k.op("AtomicSMax", i64, sh.key(k, mine, e, high), scope, sem, key)
           for high, key in enumerate(keys)]
    old_inst = k.op("AtomicExchange", i32, sh.inst(k, mine, e), scope, relaxed,
                    k.op("UConvert", i32, inst))
    other, packed = k.c64(0), k.c64(-1)
    for cls in sh.classes:
        other_kind, other_coop = RACE_CLASSES[cls]
        if not conflicts(kind, other_kind):
            continue
        if cls == mine:
            back = k.op("AtomicLoad", i64, sh.key(k, mine, e, False), scope, sem)
            keys, other_inst = [old[0], old[1], back], old_inst
        else:
            keys = [k.op("AtomicLoad", i64, sh.key(k, cls, e, h), scope, sem)
                    for h in (False, True)]
            other_inst = k.op("AtomicLoad", i32, sh.inst(k, cls, e), scope, relaxed)
        unit = k.c64(k.S if coop or other_coop else 1)
        me_u = k.op("UDiv", i64, me, unit)
        # the first key (in the order above) of this interval whose actor is not this one
        for j, key in reversed(list(enumerate(keys))):
            bits = k.op("BitwiseAnd", i64, key, k.c64(LOW))
            actor = bits if j == 1 else k.op("ISub", i64, k.c64(LOW), bits)
            current = k.op("IEqual", bt, k.op("ShiftLeftLogical", i64, k.op(
                "ShiftRightLogical", i64, key, k.c64(32)), k.c64(32)), interval)
            differs = k.op("LogicalAnd", bt, current, k.op(
                "INotEqual", bt, k.op("UDiv", i64, actor, unit), me_u))
            if j == len(keys) - 1:
                bad, by = differs, actor
            else:
                bad, by = (k.op("LogicalOr", bt, differs, bad),
                           k.op("Select", i64, differs, actor, by))
        code = k.op("IAdd", i64, k.op("IMul", i64, k.op("SConvert", i64, other_inst),
                                      k.c64(64)), k.c64(cls * 8 + mine))
        take = k.op("LogicalAnd", bt, k.op("SLessThan", bt, packed, k.c64(0)), bad)
        other = k.op("Select", i64, take, by, other)
        packed = k.op("Select", i64, take, code, packed)
    bad = k.op("SGreaterThanEqual", bt, packed, k.c64(0))
    ballot = k.op("GroupNonUniformBallot", m.type_vector(i32, 4), k.c32(checks.SUBGROUP), bad)
    first = k.op("IEqual", bt, k.builtin("SubgroupLocalInvocationId"), checks.lowest(k, ballot))
    checks.fail_if(k, k.op("LogicalAnd", bt, bad, first), E_RACE,
                   [e, other, packed, me, unfenced, order, *index], item=lane, inst=inst)
    k.op("Return", None)
    k.op("FunctionEnd", None)
