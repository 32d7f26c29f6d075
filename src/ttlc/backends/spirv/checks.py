"""Checked SPIR-V: the run-time tests of checked code (``compile(..., checked=True)``).

A checked kernel takes one more argument, last: a ``__global long *`` to its error buffer
(``error_buffer`` makes it): a header, then ``RECORDS`` records of ``findings.ERR_SLOTS``
int64s each (``runtime.findings`` describes a record; the host words it as the
interpreter words the same finding).  A test that fails (``fail_if``) calls the
kernel's report function (``finish``: one per kernel, so that each test costs a branch
and a call), which lowers the header's lowest work-group id with a finding (an atomic
minimum); the work-item that
lowered it takes the next record (an atomic counter) and writes the finding there: code,
work-group id, instruction, work-item (-1 in collective code), details.  The host reports
the record of the lowest work-group (``first_finding``), as the interpreter and target
cpu report the first finding in work-group order.

The access a finding concerns is not performed (``guarded``: a load gives zero), and a
work-item that made a finding performs no memory access after it (a private flag), so
that a view the tests found broken (a subview past its memref, an expand of the wrong
size) never reaches memory outside the arguments.  What is tested: the index of every
element access (loads, stores, atomics; collective instructions are such accesses after
``lower-simt``) against its memref's sizes, null memrefs, local memory after its
``lifetime_stop`` (``alloca``, ``lifetime_stop``), group indices, the slices of
subviews, expand and fuse consistency, the shape rules of BLAS instructions with
dynamic sizes (``check_shapes``), integer division by zero and ``for`` loops whose step
never ends them; with GroupNonUniform ballots (SPIR-V 1.3, ``cl_khr_subgroup_ballot``:
``_ballots`` notes the first instruction needing them), operands that must be uniform
in the subgroup (``uniform``), ``subgroup_broadcast`` sources (``broadcast``), and
coopmatrix instructions as a whole (``whole_subgroup``, on the instructions lower-simt
replaces them by: ``mark``, ``at_marks``): reached by the whole subgroup, uniform
operands, and for loads, stores and atomics the components outside the memref
(``coop_access``), so that the element accesses they became are not tested one by one.
Data races are not tested (target cpu and the interpreter find those).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from ...ir.builder import Builder
from ...ir.core import Instruction, Location, Program, Region, Value
from ...ir.layout import layout_of
from ...ir.rewrite import replace, walk_with_parent
from ...ir.traits import blas_shape_rules, shapes_of
from ...ir.types import CoopMatrixType, ScalarType
from ...runtime.findings import (E_BROADCAST, E_COOP_BOUNDS, E_COOP_DIV_ZERO, E_DIV_ZERO,
                                 E_EXPAND, E_FUSE, E_GROUP_INDEX, E_INDEX, E_LIFETIME, E_NULL,
                                 E_PARTIAL, E_SHAPES, E_STEP, E_SUBVIEW, E_UNIFORM, ERR_DETAILS,
                                 ERR_SLOTS,
                                 UNIFORM_OPERANDS, UNIFORM_SLOTS, WHOLE_SUBGROUP, InstRef)
from .builder import Enum, Lit
from .function import GroupVal, Kernel, MemVal, Static


#: int64s before the records in the error buffer: the lowest linear work-group id with a
#: finding (low 32 bits; ``NO_GROUP`` before any) and the number of records written
HEADER = 2
#: records in the error buffer, reused in turn (a work-group writes one only when it is
#: lower than every work-group that wrote one before: few ever do)
RECORDS = 32
#: the header's first word before any finding; linear ids past it count as NO_GROUP - 1
NO_GROUP = 0xFFFFFFFF


def error_buffer():
    """The error buffer of a launch, as the kernel expects it before running."""
    import numpy as np

    out = np.zeros(HEADER + RECORDS * ERR_SLOTS, np.int64)
    out[0] = NO_GROUP
    return out


def first_finding(buffer) -> Optional[list]:
    """The record of the lowest work-group with a finding (None: no finding)."""
    written = min(int(buffer[1]), RECORDS)
    records = [buffer[HEADER + j * ERR_SLOTS:HEADER + (j + 1) * ERR_SLOTS] for j in range(written)]
    if not records:
        return None
    return list(min(records, key=lambda r: (int(r[3]), int(r[2]), int(r[1]))))


def setup(k: Kernel, record: int) -> None:
    """At the start of a checked kernel: the error buffer argument and the flag of this
    work-item's findings (false)."""
    k.record = record
    k.tested = []  # the Marked locations tested (``at_marks``)
    k.failed = k.variable(k.m.type_bool())
    k.op("Store", None, k.failed, k.m.constant_bool(False))
    #: allocas (and views of them) -> their index in ``k.locals``; index -> the variable
    #: holding the lifetime_stop that ended it (-1: alive), where the kernel has one
    k.allocas, k.lifetimes = {}, {}
    k.stops = any(i.opcode == "lifetime_stop" for i in k.func.body.walk())


def inst_id(k: Kernel, inst: Instruction) -> int:
    """The index of an instruction in the kernel's table (``k.instructions``)."""
    key = id(inst)
    if key not in k.inst_ids:
        k.inst_ids[key] = len(k.instructions)
        k.instructions.append(InstRef.of(inst))
    return k.inst_ids[key]


@dataclass(frozen=True)
class _Id:
    """An i64 id where a Static could be (a code or detail chosen at run time)."""

    id: int


def _i64(k: Kernel, x) -> int:
    """An i64 id of a Static, an _Id, an i64 id or a narrower integer id (of type
    ``bits``)."""
    if isinstance(x, tuple):  # (id, bits) of a narrower integer
        return k.op("SConvert", k.i64(), x[0]) if x[1] != 64 else x[0]
    if isinstance(x, _Id):
        return x.id
    return k.ival(x) if isinstance(x, Static) else x


def _or(k: Kernel, a: Optional[int], b: int) -> int:
    return b if a is None else k.op("LogicalOr", k.m.type_bool(), a, b)


def _slot(k: Kernel, j: int) -> int:
    """A pointer to int64 j of the error buffer (j an i64 id)."""
    t = k.i64()
    return k.op("PtrAccessChain", k.m.type_pointer("CrossWorkgroup", t), k.record, j)


def _word(k: Kernel, j: int) -> int:
    """A pointer to the low half of int64 j of the header (little-endian devices): the
    32-bit atomics every OpenCL device has."""
    t = k.i32()
    words = k.op("Bitcast", k.m.type_pointer("CrossWorkgroup", t), k.record)
    return k.op("InBoundsPtrAccessChain", k.m.type_pointer("CrossWorkgroup", t), words,
                k.c64(2 * j))


def fail_if(k: Kernel, bad: int, code, details: Sequence = (),
            item: Optional[int] = None, inst: Optional[int] = None) -> None:
    """Where ``bad`` holds: note the finding in this work-item's flag and report it
    through the kernel's report function (``finish``; code: an ``E_*``, or an ``_Id`` of
    one chosen at run time; details: Statics, ``_Id``s or ids, i64 unless given as (id,
    bits); ``item``: the work-item named, if not this one; ``inst``: the instruction's
    index (an i64 id), if not the current one's)."""
    code = k.c64(code) if isinstance(code, int) else code.id
    values = [_i64(k, d) for d in details][:ERR_DETAILS]
    values += [k.c64(0)] * (ERR_DETAILS - len(values))
    if k.report is None:
        k.report = k.m.id()

    def report() -> List[int]:
        k.op("Store", None, k.failed, k.m.constant_bool(True))
        k.op("FunctionCall", k.m.type_void(), k.report, k.record, code,
             k.c64(inst_id(k, k.current)) if inst is None else inst,
             k.c64(CALLER if k.spmd else -1) if item is None else item, *values)
        return []
    k.select(bad, report, [], [])


#: the work-item a test passes to name the one that calls the report function (which
#: computes its linear id there, once, rather than each test before its call)
CALLER = -2


def finish(k: Kernel) -> None:
    """After the kernel's function: the function its tests call to report a finding
    (parameters: the error buffer, the code, the instruction, the work-item (``CALLER``:
    this one) and the details).  If this work-group is the lowest to make a finding so
    far, it writes the finding into a record of its own."""
    if k.report is None:
        return
    m = k.m
    i32, i64, bt, void = k.i32(), k.i64(), m.type_bool(), m.type_void()
    buffer_t = m.type_pointer("CrossWorkgroup", i64)
    params = [buffer_t] + [i64] * (3 + ERR_DETAILS)
    m.add("function", "Function", void, k.report, Enum("FunctionControl", "None"),
          m.type_function(void, params))
    ids = [m.add("function", "FunctionParameter", t, m.id()) for t in params]
    m.name(k.report, "ttlc.report")
    k.block(m.id())
    kernel_buffer, k.record = k.record, ids[0]
    group, count = k.builtin("WorkgroupId"), k.builtin("NumWorkgroups")
    gid = [k.op("CompositeExtract", i64, group, Lit(j)) for j in range(3)]
    nx, ny = (k.op("CompositeExtract", i64, count, Lit(j)) for j in range(2))
    linear = k.op("IAdd", i64, gid[0], k.op("IMul", i64, nx, k.op(
        "IAdd", i64, gid[1], k.op("IMul", i64, ny, gid[2]))))
    top = k.c64(NO_GROUP - 1)
    key = k.op("UConvert", i32, k.op("Select", i64, k.op("UGreaterThan", bt, linear, top),
                                     top, linear))
    none = k.c32(Enum("MemorySemantics", "None").value)
    device = k.c32(1)
    lowest = k.op("AtomicUMin", i32, _word(k, 0), device, none, key)

    def write() -> List[int]:
        n = k.op("AtomicIAdd", i32, _word(k, 1), device, none, k.c32(1))
        at = k.op("IAdd", i64, k.c64(HEADER), k.op("IMul", i64, k.c64(ERR_SLOTS), k.op(
            "UConvert", i64, k.op("UMod", i32, n, k.c32(RECORDS)))))
        code, inst, lane, *details = ids[1:]
        lane = k.op("Select", i64, k.op("IEqual", bt, lane, k.c64(CALLER)), work_item(k, True),
                    lane)
        for j, v in enumerate([code, *gid, inst, lane, *details]):
            k.op("Store", None, _slot(k, k.op("IAdd", i64, at, k.c64(j))), v)
        return []
    k.select(k.op("ULessThan", bt, key, lowest), write, [], [])
    k.op("Return", None)
    k.op("FunctionEnd", None)
    k.record = kernel_buffer


def work_item(k: Kernel, spmd: bool = False) -> int:
    """The work-item a finding names: its linear id in SPMD code (``spmd``: here), -1 in
    collective code (whose values every work-item shares)."""
    if not (k.spmd or spmd):
        return k.c64(-1)
    i64 = k.i64()
    local = k.builtin("LocalInvocationId")
    x, y = (k.op("CompositeExtract", i64, local, Lit(d)) for d in (0, 1))
    return k.op("IAdd", i64, x, k.op("IMul", i64, y, k.c64(k.cfg.work_group_size[0])))


def guarded(k: Kernel, bad: Optional[int], perform: Callable[[], List[int]],
            types: List[int]) -> List[int]:
    """The ids perform() gives, run only where neither ``bad`` holds nor this work-item
    made a finding before; zeros elsewhere."""
    bt = k.m.type_bool()
    stop = _or(k, bad, k.op("Load", bt, k.failed))
    return k.select(k.op("LogicalNot", bt, stop), perform, types, [k.m.null(t) for t in types])


def _outside(k: Kernel, i, n) -> int:
    """i < 0 or i >= n (Statics or i64 ids); one unsigned comparison where n is known
    not to be negative (a negative i is then a number past it)."""
    bt = k.m.type_bool()
    if isinstance(n, Static) and n.value >= 0:
        return k.op("UGreaterThanEqual", bt, k.ival(i), k.ival(n))
    i, n = k.ival(i), k.ival(n)
    return k.op("LogicalOr", bt, k.op("SLessThan", bt, i, k.c64(0)),
                k.op("SGreaterThanEqual", bt, i, n))


def _static_inside(i, n) -> bool:
    return isinstance(i, Static) and isinstance(n, Static) and 0 <= i.value < n.value


def access(k: Kernel, inst: Instruction) -> Optional[int]:
    """Test an element access (a null memref, then each index against its mode's size,
    then local memory after its lifetime); the condition under which it must not happen
    (None: never).  An access a coopmatrix instruction became is not tested: the test of
    the instruction (``coop_access``) finds exactly the components it accesses outside
    the memref, and a subgroup that found anything accesses no memory after it."""
    if _from_coop_access(inst):
        return None
    m = k.get(inst.slots["tensor"])
    null = None
    if m.type.space == "global":
        null = k.op("IEqual", k.m.type_bool(), k.op("ConvertPtrToU", k.i64(), m.ptr), k.c64(0))
    index = [k.index(i) for i in inst.slots["index"]]
    outside = [(_outside(k, i, n), [Static(mode), i, n])
               for mode, (i, n) in enumerate(zip(index, m.shape)) if not _static_inside(i, n)]
    out = None
    for o, _ in outside:
        out = _or(k, out, o)
    bad = out if null is None else _or(k, out, null)
    if bad is not None:
        _first_finding(k, bad, out, outside, index)
    _alive(k, inst.slots["tensor"], None, None)
    return bad


def _first_finding(k: Kernel, bad: int, out: Optional[int], outside: list, index: list) -> None:
    """One report of an access's first finding, in the interpreter's order: the first
    index outside its mode (``outside``: (condition, [mode, index, size]) of each mode
    tested; ``out``: any of them), else the null memref."""
    if out is None:
        fail_if(k, bad, E_NULL)
        return
    code = E_INDEX if out == bad else _Id(k.op("Select", k.i64(), out, k.c64(E_INDEX),
                                               k.c64(E_NULL)))
    which = outside[-1][1]
    for o, details in reversed(outside[:-1]):
        which = [a if a == b else _Id(k.op("Select", k.i64(), o, _i64(k, a), _i64(k, b)))
                 for a, b in zip(details, which)]
    shown = [k.ival(i) for i in index[:ERR_DETAILS - 4]]
    fail_if(k, bad, code, [*which, Static(len(index)), *shown])


def member_index(k: Kernel, g: GroupVal, i) -> Optional[int]:
    """Test a group index against the group's size; the condition under which the member
    must not be read."""
    if _static_inside(i, g.size):
        return None
    out = _outside(k, i, g.size)
    fail_if(k, out, E_GROUP_INDEX, [i, g.size])
    return out


def subview(k: Kernel, m: MemVal, inst: Instruction) -> None:
    """The spec's rules of each slice (as the interpreter's): offset non-negative, size
    positive where dynamic, the slice inside the mode."""
    i64, bt = k.i64(), k.m.type_bool()
    for mode, (o, size) in enumerate(inst.slots["slices"]):
        dynamic = not isinstance(size, int)
        off, n, e = k.index(o), k.index(size), m.shape[mode]
        if all(isinstance(x, Static) for x in (off, n, e)):
            continue  # the verifier's business
        ov, nv, ev = (k.ival(x) for x in (off, n, e))
        one = k.c64(1)
        end = k.op("IAdd", i64, ov, k.op("Select", i64, k.op("SLessThan", bt, nv, one), one, nv))
        bad = k.op("LogicalOr", bt, k.op("SLessThan", bt, nv, k.c64(0)),
                   k.op("LogicalOr", bt, k.op("SLessThan", bt, ov, k.c64(0)),
                        k.op("SGreaterThan", bt, end, ev)))
        if dynamic:
            bad = k.op("LogicalOr", bt, bad, k.op("IEqual", bt, nv, k.c64(0)))
        fail_if(k, bad, E_SUBVIEW, [Static(mode), off, n, e, Static(int(dynamic))])


def _unequal(k: Kernel, a, b) -> Optional[int]:
    if isinstance(a, Static) and isinstance(b, Static):
        return None  # the verifier's business
    return k.op("INotEqual", k.m.type_bool(), k.ival(a), k.ival(b))


def expand(k: Kernel, m: MemVal, inst: Instruction) -> None:
    """The product of an expand's sizes equals the size of the mode it expands."""
    total = Static(1)
    for e in inst.slots["shape"]:
        total = k.imul(total, k.index(e))
    size = m.shape[inst.attrs["mode"]]
    bad = _unequal(k, total, size)
    if bad is not None:
        fail_if(k, bad, E_EXPAND, [total, size])


def fuse(k: Kernel, m: MemVal, inst: Instruction) -> None:
    """Each fused mode's stride times size is the next one's stride."""
    for j in range(inst.attrs["from"], inst.attrs["to"]):
        bad = _unequal(k, k.imul(m.stride[j], m.shape[j]), m.stride[j + 1])
        if bad is not None:
            fail_if(k, bad, E_FUSE, [Static(j)])


def emit_check_shapes(k: Kernel, inst: Instruction) -> None:
    """The shape rules of a BLAS instruction on its sizes at run time (``check_shapes``,
    which only checked code has); the record carries the sizes, from which the message
    is made."""
    sizes = [k.index(v) for v in inst.slots["sizes"]]
    shapes = shapes_of(inst.attrs["orders"], range(len(sizes)))
    bad = None
    for left, right, _ in blas_shape_rules(inst.modifier("rule"), shapes, inst.modifier("ta"),
                                           inst.modifier("tb")):
        for i, j in zip(left, right):
            unequal = _unequal(k, sizes[i], sizes[j])
            if unequal is not None:
                bad = _or(k, bad, unequal)
    if bad is not None:
        fail_if(k, bad, E_SHAPES, sizes)


def division(k: Kernel, t, a: int, b: int, coop: Optional[tuple] = None) -> None:
    """Integer division or remainder by zero (``binary`` then divides by 1); ``coop``:
    (coopmatrix type, component) of a coopmatrix operation, whose finding names the entry
    (padding, which holds zeros, is not tested)."""
    zero = k.op("IEqual", k.m.type_bool(), b, k.const(k.scalar(t), 0, t.bits))
    if coop is None:
        fail_if(k, zero, E_DIV_ZERO, [(a, t.bits)])
        return
    row, col = k.entry_index(*coop)
    where = present(k, *coop)
    if where is not None:
        zero = k.op("LogicalAnd", k.m.type_bool(), zero, where)
    fail_if(k, zero, E_COOP_DIV_ZERO, [(a, t.bits), row, col])


def may_be_zero(v: Value) -> bool:
    """A divisor that is not a constant other than zero (such as the ones lower-simt
    divides lane ids by), which ``division`` tests."""
    owner = v.owner
    value = owner.attrs.get("value") if owner is not None and owner.opcode == "constant" \
        else None
    return not (isinstance(value, int) and not isinstance(value, bool) and value != 0)


def present(k: Kernel, t, v: int) -> Optional[int]:
    """Where component v of a coopmatrix of type t is an entry, not padding (None:
    everywhere)."""
    layout = layout_of(t, k.S)
    if not layout.padded(v):
        return None
    return k.op("SLessThan", k.m.type_bool(), k.entry_index(t, v)[1], k.c64(layout.cols))


def loop_step(k: Kernel, lo: int, hi: int, step: int, bits: int) -> int:
    """A ``for`` loop that would run with a step <= 0 never ends: report it and give the
    upper bound the loop runs to instead (lo: none of its iterations)."""
    bt, t = k.m.type_bool(), k.m.type_int(bits)
    runs = k.op("SLessThan", bt, lo, hi)
    bad = k.op("LogicalAnd", bt, runs, k.op("SLessThanEqual", bt, step, k.const(t, 0, bits)))
    fail_if(k, bad, E_STEP, [(step, bits)])
    return k.op("Select", t, bad, lo, hi)


SUBGROUP = 3  # Scope Subgroup


def _ballots(k: Kernel) -> None:
    """Note the first instruction whose test takes ballots (GroupNonUniform instructions:
    SPIR-V 1.3 and ``cl_khr_subgroup_ballot``), which target opencl names where its
    device lacks them."""
    if k.m.ballots is None:
        k.m.ballots = k.current


def _elect(k: Kernel) -> int:
    """The first active work-item of the subgroup, which the interpreter names."""
    _ballots(k)
    return k.op("GroupNonUniformElect", k.m.type_bool(), k.c32(SUBGROUP))


def _unless(k: Kernel, bad: int, found: Optional[int]) -> int:
    """bad where nothing was found before (``found``: a condition or None)."""
    if found is None:
        return bad
    bt = k.m.type_bool()
    return k.op("LogicalAnd", bt, bad, k.op("LogicalNot", bt, found))


def uniform(k: Kernel, x: int, bits: int, what: str, float_bytes: int = 0,
            found: Optional[int] = None) -> Optional[int]:
    """An operand the spec requires to be dynamically uniform in the subgroup (SPMD code
    only: collective values are uniform; x an integer of ``bits``, a float's bits with
    ``float_bytes``): the first active work-item whose value differs from the first
    active one's reports both, as the interpreter does, unless ``found``.  Ballots rather
    than OpGroupNonUniformAllEqual, which cannot say which work-item reports or what the
    first value was.  Where some work-item differs (the same in the whole subgroup)."""
    if not k.spmd:
        return found
    _ballots(k)
    i32, bt, scope = k.i32(), k.m.type_bool(), k.c32(SUBGROUP)
    lid = k.builtin("SubgroupLocalInvocationId")
    first = k.op("GroupNonUniformBroadcastFirst", k.m.type_int(bits), scope, x)
    first_id = k.op("GroupNonUniformBroadcastFirst", i32, scope, lid)
    differ = k.op("INotEqual", bt, x, first)
    ballot = k.op("GroupNonUniformBallot", k.m.type_vector(i32, 4), scope, differ)
    bad = k.op("LogicalAnd", bt, differ, k.op("IEqual", bt, lid, lowest(k, ballot)))
    fail_if(k, _unless(k, bad, found), E_UNIFORM,
            [Static(UNIFORM_OPERANDS.index(what)), (x, bits), (first, bits), (first_id, 32),
             _subgroup(k), Static(float_bytes)])
    count = k.op("GroupNonUniformBallotBitCount", i32, scope, Enum("GroupOperation", "Reduce"),
                 ballot)
    return _or(k, found, k.op("INotEqual", bt, count, k.c32(0)))


def lowest(k: Kernel, ballot: int) -> int:
    """The lowest subgroup-local id in a ballot (128 if none)."""
    u4 = k.m.type_vector(k.i32(), 4)
    # bit 127, no work-item's: FindLSB of no bit is undefined (Intel's CPU runtime then
    # drops the rest of the kernel)
    top = k.m.unique("ConstantComposite", u4, *([k.c32(0)] * 3 + [k.c32(1 << 31)]))
    return k.op("GroupNonUniformBallotFindLSB", k.i32(), k.c32(SUBGROUP),
                k.op("BitwiseOr", u4, ballot, top))


#: coopmatrix instructions with a number the spec requires uniform: (slot, as E_UNIFORM
#: names it)
UNIFORM_NUMBERS = {op: UNIFORM_SLOTS[op][0] for op in ("cooperative_matrix_construct",
                                                    "cooperative_matrix_scale")}


def uniform_number(k: Kernel, v: Value, what: str) -> None:
    """A number operand the spec requires uniform (the number of a coopmatrix construct,
    the scalar of a scale), compared bit for bit as target cpu does; one defined outside
    SPMD code or constant is uniform, as the interpreter knows."""
    if not k.spmd or _uniform_by_definition(k, v):
        return
    t: ScalarType = v.type
    x = k.get(v)
    parts = [x.re, x.im] if t.is_complex else [x]
    t = t.component
    width = 32 if t.name == "bf16" else t.bits  # bf16: an f32 in registers
    for part in parts:
        if t.is_float:
            part = k.op("Bitcast", k.m.type_int(width), part)
        uniform(k, part, width, what, width // 8 if t.is_float else 0)


def _uniform_by_definition(k: Kernel, v: Value) -> bool:
    """An argument, a constant, or a value folded into one."""
    return v.owner is None or v.owner.opcode == "constant" or v not in k.values


def _subgroup(k: Kernel) -> int:
    """The subgroup of this work-item in its work-group (i64), as the interpreter counts
    (the linear work-item id over S: SubgroupId)."""
    return k.op("UConvert", k.i64(), k.builtin("SubgroupId"))


def broadcast(k: Kernel, inst: Instruction, lane: int) -> None:
    """subgroup_broadcast: its lane uniform (E_UNIFORM), then a work-item of the subgroup
    (kind 0 of E_BROADCAST) that is active (kind 1), named by the first active work-item
    with the lane it holds, as the interpreter tests.  The broadcasts a coopmatrix
    instruction became are tested with the instruction (``whole_subgroup``)."""
    if isinstance(inst.loc, Marked):
        return
    v = inst.slots["lane"]
    static = v.owner.attrs.get("value") if getattr(v.owner, "opcode", None) == "constant" \
        else None
    found = None if static is not None else uniform(k, lane, 32, "the lane index")
    m, i32, i64, bt, scope = k.m, k.i32(), k.i64(), k.m.type_bool(), k.c32(SUBGROUP)
    outside = k.op("LogicalOr", bt, k.op("SLessThan", bt, lane, k.c32(0)),
                   k.op("SGreaterThanEqual", bt, lane, k.c32(k.S)))
    active = k.op("GroupNonUniformBallot", m.type_vector(i32, 4), scope, m.constant_bool(True))
    source = k.op("Select", i32, outside, k.c32(0), lane)
    inactive = k.op("LogicalNot", bt, k.op("GroupNonUniformBallotBitExtract", bt, scope, active,
                                           source))
    bad = k.op("LogicalAnd", bt, _elect(k), k.op("LogicalOr", bt, outside, inactive))
    kind = k.op("Select", i64, outside, k.c64(0), k.c64(1))
    fail_if(k, _unless(k, bad, found), E_BROADCAST, [kind, (lane, 32), Static(k.S)])


# ---- local memory: lifetimes --------------------------------------------------------------------
def alloca(k: Kernel, inst: Instruction, name: Optional[str], size: int, element: int) -> None:
    """An alloca in checked code: named for findings (``k.locals``, as
    ``findings.kernel_error`` takes them); alive from here on where the kernel has a
    lifetime_stop."""
    k.allocas[inst.results[0]] = len(k.locals)
    if k.stops:
        var = k.lifetimes[len(k.locals)] = k.variable(k.i64())
        k.op("Store", None, var, k.c64(-1))
    k.locals.append((0, size, element, f"%{name}" if name is not None else None))


def lifetime_stop(k: Kernel, inst: Instruction) -> None:
    """Note in the alloca's variable the instruction that ended its lifetime."""
    var = k.lifetimes.get(k.allocas.get(inst.slots["object"], -1))
    if var is not None:
        k.op("Store", None, var, k.c64(inst_id(k, inst)))


def derive(k: Kernel, inst: Instruction) -> None:
    """A view of an alloca is of the alloca (lifetimes)."""
    source = inst.slots.get("tensor")
    if isinstance(source, Value) and source in k.allocas:
        for r in inst.results:
            k.allocas[r] = k.allocas[source]


def _alive(k: Kernel, memref: Value, found: Optional[int], item: Optional[int]) -> Optional[int]:
    """An access to an alloca after its lifetime_stop (E_LIFETIME), named by the first
    active work-item; where it was found (None: the memref is no alloca with one)."""
    index = k.allocas.get(memref, -1)
    var = k.lifetimes.get(index)
    if var is None:
        return None
    bt = k.m.type_bool()
    ended = k.op("Load", k.i64(), var)
    dead = k.op("SGreaterThanEqual", bt, ended, k.c64(0))
    bad = k.op("LogicalAnd", bt, _elect(k), dead) if k.spmd else dead
    fail_if(k, _unless(k, bad, found), E_LIFETIME, [ended, Static(index)], item=item)
    return dead


# ---- coopmatrix instructions: whole subgroups, uniform operands, bounds ------------------------
#: coopmatrix instructions that access memory, tested as a whole (``coop_access``)
_MEMORY = tuple(op for op, operands in WHOLE_SUBGROUP.items()
                if operands and op != "cooperative_matrix_prefetch")


class Marked(Location):
    """The location of a coopmatrix instruction before lower-simt, which hands it on to
    the instructions that replace it: the first of them emitted tests the instruction
    (``whole_subgroup``) there.  Compared by identity; pickled as a plain Location."""

    __slots__ = ("inst",)

    def __init__(self, inst: Instruction):
        loc = inst.loc
        super().__init__(loc.line, loc.col, loc.end_line, loc.end_col)
        self.inst = inst


def _from_coop_access(inst: Instruction) -> bool:
    return isinstance(inst.loc, Marked) and inst.loc.inst.opcode in _MEMORY


def mark(program: Program) -> None:
    """Before lower-coopmatrix: mark the coopmatrix instructions ``WHOLE_SUBGROUP`` tests.
    A prefetch, which lower-coopmatrix drops, leaves in its place an unused
    subgroup_local_id carrying its mark: where its test is emitted."""
    for func in program.functions:
        for region, inst in walk_with_parent(func.body):
            if inst.opcode not in WHOLE_SUBGROUP:
                continue
            marked = Marked(inst)
            if inst.opcode == "cooperative_matrix_prefetch":
                inst = Builder(Region()).subgroup_local_id().owner
                replace(region, marked.inst, [inst])
            inst.loc = marked


def at_marks(emitters: dict) -> dict:
    """The emitters of checked code: each first tests the coopmatrix instruction its
    instruction replaces, if it is the first of them emitted, and the numbers of
    ``UNIFORM_NUMBERS``; views of an alloca are of the alloca (``derive``)."""
    def wrap(emit: Callable) -> Callable:
        def run(k: Kernel, inst: Instruction):
            loc = inst.loc
            if isinstance(loc, Marked) and loc not in k.tested:
                k.tested.append(loc)
                k.current = loc.inst
                whole_subgroup(k, loc.inst)
                k.current = inst
            if inst.opcode in UNIFORM_NUMBERS:
                slot, what = UNIFORM_NUMBERS[inst.opcode]
                uniform_number(k, inst.slots[slot], what)
            result = emit(k, inst)
            derive(k, inst)
            return result
        return run
    return {op: wrap(emit) for op, emit in emitters.items()}


def whole_subgroup(k: Kernel, inst: Instruction) -> None:
    """A coopmatrix instruction in SPMD code: reached by the whole subgroup (else the
    first active work-item names the first inactive one, E_PARTIAL), then its operands
    uniform (E_UNIFORM), then its memory access (``coop_access``), in the interpreter's
    order, each tested only where none before found anything; a subgroup that found
    something accesses no memory after it.  Operands defined outside SPMD code
    (arguments, constants) are uniform."""
    if not k.spmd:
        return
    m, i32, i64, bt, scope = k.m, k.i32(), k.i64(), k.m.type_bool(), k.c32(SUBGROUP)
    u4 = m.type_vector(i32, 4)
    active = k.op("GroupNonUniformBallot", u4, scope, m.constant_bool(True))
    count = k.op("GroupNonUniformBallotBitCount", i32, scope, Enum("GroupOperation", "Reduce"),
                 active)
    inactive = k.op("GroupNonUniformBallotFindLSB", i32, scope, k.op("Not", u4, active))
    found = k.op("INotEqual", bt, count, k.c32(k.S))
    g = _subgroup(k)
    item = k.op("IAdd", i64, k.op("IMul", i64, g, k.c64(k.S)), k.op("UConvert", i64, inactive))
    fail_if(k, k.op("LogicalAnd", bt, _elect(k), found), E_PARTIAL, [g], item=item)
    for slot, what in WHOLE_SUBGROUP[inst.opcode]:
        v = inst.slots[slot]
        if _uniform_by_definition(k, v):
            continue
        x = k.values[v]
        if isinstance(x, MemVal):
            parts = [k.op("ConvertPtrToU", i64, x.ptr), *x.shape, *x.stride]
        else:
            parts = [k.index(v)]
        for part in parts:
            if not isinstance(part, Static):
                found = uniform(k, part, 64, what, found=found)
    if inst.opcode in _MEMORY:
        found = coop_access(k, inst, found)
    k.op("Store", None, k.failed, _or(k, found, k.op("Load", bt, k.failed)))


class _Fold:
    """Index arithmetic and comparisons on Statics (folded here) or i64 ids; conditions
    are Python bools or bool ids."""

    def __init__(self, k: Kernel):
        self.k, self.bt, self.i64 = k, k.m.type_bool(), k.i64()

    def add(self, a, b):
        return self.k.iadd(a, b)

    def sub(self, a, b):
        if isinstance(a, Static) and isinstance(b, Static):
            return Static(a.value - b.value)
        return self.k.op("ISub", self.i64, self.k.ival(a), self.k.ival(b))

    def lt(self, a, b):
        if isinstance(a, Static) and isinstance(b, Static):
            return a.value < b.value
        return self.k.op("SLessThan", self.bt, self.k.ival(a), self.k.ival(b))

    def id_of(self, c) -> int:
        return self.k.m.constant_bool(c) if isinstance(c, bool) else c

    def not_(self, c):
        return (not c) if isinstance(c, bool) else self.k.op("LogicalNot", self.bt, c)

    def and_(self, a, b):
        if isinstance(a, bool) or isinstance(b, bool):
            c, other = (a, b) if isinstance(a, bool) else (b, a)
            return other if c else False
        return self.k.op("LogicalAnd", self.bt, a, b)

    def or_(self, a, b):
        if isinstance(a, bool) or isinstance(b, bool):
            c, other = (a, b) if isinstance(a, bool) else (b, a)
            return True if c else other
        return self.k.op("LogicalOr", self.bt, a, b)

    def pick(self, c, a, b):
        if isinstance(c, bool):
            return a if c else b
        if a == b:
            return a
        return self.k.op("Select", self.i64, c, self.k.ival(a), self.k.ival(b))


def coop_access(k: Kernel, inst: Instruction, found: int) -> int:
    """A coopmatrix load, store or atomic: its first component (row-major) outside the
    memref that the checked flag does not exclude (E_COOP_BOUNDS), then a null memref
    (E_NULL) and local memory after its lifetime (E_LIFETIME), as the interpreter tests
    them, reported by the first active work-item (the positions and the memref are
    uniform); where anything was found.  The components outside the memref are found in
    closed form: with P(i) = 0 <= position + i < size along the mode component row i
    indexes, and Q(j) along the one of column j, component (i, j) is outside when not
    P(i) and Q(j), and rows_checked (cols_checked) skips it unless P(i) (Q(j))."""
    m: MemVal = k.get(inst.slots["tensor"])
    t: CoopMatrixType = (inst.slots["value"] if "value" in inst.slots else inst.results[0]).type
    i64, bt = k.i64(), k.m.type_bool()
    f = _Fold(k)
    x, y = (k.index(inst.slots[s]) for s in "xy")
    s1, s2 = m.shape
    transpose = inst.modifier("ta") == "t"
    (pi, ni), (pj, nj) = ((y, s2), (x, s1)) if transpose else ((x, s1), (y, s2))
    checked = inst.modifier("checked") or ""
    rows, cols = checked in ("rows_checked", "both_checked"), checked in ("cols_checked",
                                                                          "both_checked")
    R, C, zero = Static(t.rows), Static(t.cols), Static(0)

    def first_in(p, n, count):  # the first i < count with 0 <= p + i < n, else count
        i = f.pick(f.lt(p, zero), f.sub(zero, p), zero)
        return f.pick(f.and_(f.lt(i, count), f.lt(f.add(p, i), n)), i, count)

    def first_out(p, n, count):  # the first i < count with p + i outside [0, n), else count
        rest = f.sub(n, p)
        return f.pick(f.or_(f.lt(p, zero), f.not_(f.lt(p, n))), zero,
                      f.pick(f.lt(rest, count), rest, count))

    if not (rows and cols):
        if rows:
            a, b = first_in(pi, ni, R), first_out(pj, nj, C)
        elif cols:
            a, b = first_out(pi, ni, R), first_in(pj, nj, C)
        else:  # the rows outside, or every row where some column is outside
            oi, oj = first_out(pi, ni, R), first_out(pj, nj, C)
            row = f.pick(f.lt(oj, C), zero, R)
            a = f.pick(f.lt(oi, row), oi, row)
            b = f.pick(f.not_(f.or_(f.lt(a, oi), f.lt(oi, a))), zero, oj)
        outside = f.and_(f.lt(a, R), f.lt(b, C))
        if outside is not False:
            outside = f.id_of(outside)
            r = f.add(x, b if transpose else a)
            c = f.add(y, a if transpose else b)
            fail_if(k, _unless(k, k.op("LogicalAnd", bt, _elect(k), outside), found),
                    E_COOP_BOUNDS, [a, b, r, c, s1, s2])
            found = _or(k, found, outside)
    if m.type.space == "global":
        null = k.op("IEqual", bt, k.op("ConvertPtrToU", i64, m.ptr), k.c64(0))
        fail_if(k, _unless(k, k.op("LogicalAnd", bt, _elect(k), null), found), E_NULL,
                item=k.c64(-1))
        found = _or(k, found, null)
    dead = _alive(k, inst.slots["tensor"], found, k.c64(-1))
    return found if dead is None else _or(k, found, dead)
