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
element access (loads, stores, atomics; collective instructions and coopmatrix accesses
are such accesses after ``lower-simt``) against its memref's sizes, null memrefs, group
indices, the slices of subviews, expand and fuse consistency, the shape rules of BLAS
instructions with dynamic sizes (``check_shapes``), integer division by zero and ``for``
loops whose step never ends them; with GroupNonUniform ballots (SPIR-V 1.3), operands
that must be uniform in the subgroup (``uniform``) and coopmatrix instructions reached by
part of a subgroup (``whole_subgroup``, on the instructions lower-simt replaces them by:
``mark``, ``at_marks``).  Data races are not tested (target cpu and the interpreter
find those).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from ...ir.core import Instruction, Location, Program
from ...ir.layout import layout_of
from ...ir.traits import blas_shape_rules, shapes_of
from ...runtime.findings import (E_DIV_ZERO, E_EXPAND, E_FUSE, E_GROUP_INDEX, E_INDEX, E_NULL,
                                 E_PARTIAL, E_SHAPES, E_STEP, E_SUBVIEW, E_UNIFORM, ERR_DETAILS,
                                 ERR_SLOTS, UNIFORM_OPERANDS, InstRef)
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


def inst_id(k: Kernel, inst: Instruction) -> int:
    """The index of an instruction in the kernel's table (``k.instructions``)."""
    key = id(inst)
    if key not in k.inst_ids:
        k.inst_ids[key] = len(k.instructions)
        k.instructions.append(InstRef.of(inst))
    return k.inst_ids[key]


def _i64(k: Kernel, x) -> int:
    """An i64 id of a Static, an i64 id or a narrower integer id (of type ``bits``)."""
    if isinstance(x, tuple):  # (id, bits) of a narrower integer
        return k.op("SConvert", k.i64(), x[0]) if x[1] != 64 else x[0]
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


def fail_if(k: Kernel, bad: int, code: int, details: Sequence = (),
            item: Optional[int] = None, inst: Optional[int] = None) -> None:
    """Where ``bad`` holds: note the finding in this work-item's flag and report it
    through the kernel's report function (``finish``; details: Statics or ids, i64
    unless given as (id, bits); ``item``: the work-item named, if not this one;
    ``inst``: the instruction's index (an i64 id), if not the current one's)."""
    values = [_i64(k, d) for d in details][:ERR_DETAILS]
    values += [k.c64(0)] * (ERR_DETAILS - len(values))
    if k.report is None:
        k.report = k.m.id()

    def report() -> List[int]:
        k.op("Store", None, k.failed, k.m.constant_bool(True))
        k.op("FunctionCall", k.m.type_void(), k.report, k.record, k.c64(code),
             k.c64(inst_id(k, k.current)) if inst is None else inst,
             work_item(k) if item is None else item, *values)
        return []
    k.select(bad, report, [], [])


def finish(k: Kernel) -> None:
    """After the kernel's function: the function its tests call to report a finding
    (parameters: the error buffer, the code, the instruction, the work-item and the
    details).  If this work-group is the lowest to make a finding so far, it writes the
    finding into a record of its own."""
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
        for j, v in enumerate([code, *gid, inst, lane, *details]):
            k.op("Store", None, _slot(k, k.op("IAdd", i64, at, k.c64(j))), v)
        return []
    k.select(k.op("ULessThan", bt, key, lowest), write, [], [])
    k.op("Return", None)
    k.op("FunctionEnd", None)
    k.record = kernel_buffer


def work_item(k: Kernel) -> int:
    """The work-item a finding names: its linear id in SPMD code, -1 in collective code
    (whose values every work-item shares)."""
    return linear_id(k) if k.spmd else k.c64(-1)


def linear_id(k: Kernel) -> int:
    """This work-item's linear id in its work-group (i64), as the interpreter counts."""
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


def _outside(k: Kernel, i: int, n: int) -> int:
    """i < 0 or i >= n (i64 ids)."""
    bt = k.m.type_bool()
    return k.op("LogicalOr", bt, k.op("SLessThan", bt, i, k.c64(0)),
                k.op("SGreaterThanEqual", bt, i, n))


def _static_inside(i, n) -> bool:
    return isinstance(i, Static) and isinstance(n, Static) and 0 <= i.value < n.value


def access(k: Kernel, m: MemVal, indices: Sequence) -> Optional[int]:
    """Test an element access (a null memref, then each index against its mode's size);
    the condition under which it must not happen (None: never)."""
    bad = None
    if m.type.space == "global":
        null = k.op("IEqual", k.m.type_bool(), k.op("ConvertPtrToU", k.i64(), m.ptr), k.c64(0))
        fail_if(k, null, E_NULL)
        bad = null
    index = [k.index(i) for i in indices]
    shown = [k.ival(i) for i in index[:ERR_DETAILS - 4]]
    for mode, (i, n) in enumerate(zip(index, m.shape)):
        if _static_inside(i, n):
            continue
        out = _outside(k, k.ival(i), k.ival(n))
        fail_if(k, out, E_INDEX, [Static(mode), i, n, Static(len(index)), *shown])
        bad = _or(k, bad, out)
    return bad


def member_index(k: Kernel, g: GroupVal, i) -> Optional[int]:
    """Test a group index against the group's size; the condition under which the member
    must not be read."""
    if _static_inside(i, g.size):
        return None
    out = _outside(k, k.ival(i), k.ival(g.size))
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


def division(k: Kernel, t, a: int, b: int, present: Optional[int] = None) -> None:
    """Integer division or remainder by zero (``binary`` then divides by 1); ``present``:
    where a coopmatrix component is not padding (padding holds zeros)."""
    zero = k.op("IEqual", k.m.type_bool(), b, k.const(k.scalar(t), 0, t.bits))
    if present is not None:
        zero = k.op("LogicalAnd", k.m.type_bool(), zero, present)
    fail_if(k, zero, E_DIV_ZERO, [(a, t.bits)])


def present(k: Kernel, t, v: int) -> Optional[int]:
    """Where component v of a coopmatrix of type t is an entry, not padding (None:
    everywhere)."""
    layout = layout_of(t, k.S)
    if not layout.padded(v):
        return None
    offset, divisor, tile, scale = layout.nested.lane_terms(v)[1]
    i64 = k.i64()
    lane = k.op("UConvert", i64, k.builtin("SubgroupLocalInvocationId"))
    col = k.c64(offset)
    if divisor:
        part = k.op("UMod", i64, k.op("UDiv", i64, lane, k.c64(divisor)), k.c64(tile))
        col = k.op("IAdd", i64, col, k.op("IMul", i64, part, k.c64(scale)))
    return k.op("SLessThan", k.m.type_bool(), col, k.c64(layout.cols))


def loop_step(k: Kernel, lo: int, hi: int, step: int, bits: int) -> int:
    """A ``for`` loop that would run with a step <= 0 never ends: report it and give the
    upper bound the loop runs to instead (lo: none of its iterations)."""
    bt, t = k.m.type_bool(), k.m.type_int(bits)
    runs = k.op("SLessThan", bt, lo, hi)
    bad = k.op("LogicalAnd", bt, runs, k.op("SLessThanEqual", bt, step, k.const(t, 0, bits)))
    fail_if(k, bad, E_STEP, [(step, bits)])
    return k.op("Select", t, bad, lo, hi)


SUBGROUP = 3  # Scope Subgroup


def uniform(k: Kernel, x: int, bits: int, what: str) -> None:
    """An operand the spec requires to be dynamically uniform in the subgroup (SPMD code
    only: collective values are uniform): the first active work-item whose value differs
    from the first active one's reports both, as the interpreter does.  Ballots rather
    than OpGroupNonUniformAllEqual, which cannot say which work-item reports or what the
    first value was."""
    if not k.spmd:
        return
    i32, bt, scope = k.i32(), k.m.type_bool(), k.c32(SUBGROUP)
    lid = k.builtin("SubgroupLocalInvocationId")
    first = k.op("GroupNonUniformBroadcastFirst", k.m.type_int(bits), scope, x)
    first_id = k.op("GroupNonUniformBroadcastFirst", i32, scope, lid)
    bad = lowest_in_subgroup(k, k.op("INotEqual", bt, x, first), lid)
    fail_if(k, bad, E_UNIFORM, [Static(UNIFORM_OPERANDS.index(what)), (x, bits), (first, bits),
                                (first_id, 32), subgroup(k), Static(0)])


def lowest_in_subgroup(k: Kernel, cond: int, lid: Optional[int] = None) -> int:
    """cond, in the active work-item of lowest subgroup-local id where it holds only (the
    one the interpreter names among lanes that make the same finding); ``lid``: that id,
    if loaded already."""
    i32, bt, scope = k.i32(), k.m.type_bool(), k.c32(SUBGROUP)
    ballot = k.op("GroupNonUniformBallot", k.m.type_vector(i32, 4), scope, cond)
    lowest = k.op("GroupNonUniformBallotFindLSB", i32, scope, ballot)
    if lid is None:
        lid = k.builtin("SubgroupLocalInvocationId")
    return k.op("LogicalAnd", bt, cond, k.op("IEqual", bt, lid, lowest))


def subgroup(k: Kernel) -> int:
    """The subgroup of this work-item in its work-group (i64), as the interpreter counts."""
    return k.op("UDiv", k.i64(), work_item(k), k.c64(k.S))


# ---- coopmatrix instructions: whole subgroups, uniform operands ---------------------------------
_ACCESS = (("x", "the row position"), ("y", "the column position"), ("tensor", "the memref"))
#: coopmatrix instructions that whole subgroups must execute (E_PARTIAL), with their
#: operands that must be uniform in the subgroup (slot, as E_UNIFORM names it), as the
#: interpreter tests them.  (A prefetch is removed by lower-simt, so it is not tested.)
WHOLE_SUBGROUP = {
    **dict.fromkeys(("cooperative_matrix_load", "cooperative_matrix_store",
                     "cooperative_matrix_atomic_load", "cooperative_matrix_atomic_store",
                     "cooperative_matrix_atomic_add", "cooperative_matrix_atomic_max",
                     "cooperative_matrix_atomic_min"), _ACCESS),
    **dict.fromkeys(("cooperative_matrix_mul_add", "cooperative_matrix_reduce_add",
                     "cooperative_matrix_reduce_max", "cooperative_matrix_reduce_min"), ()),
}


class Marked(Location):
    """The location of a coopmatrix instruction before lower-simt, which hands it on to
    the instructions that replace it: the first of them emitted tests the instruction
    (``whole_subgroup``) there.  Compared by identity; pickled as a plain Location."""

    __slots__ = ("inst",)

    def __init__(self, inst: Instruction):
        loc = inst.loc
        super().__init__(loc.line, loc.col, loc.end_line, loc.end_col)
        self.inst = inst


def mark(program: Program) -> None:
    """Before lower-coopmatrix: mark the coopmatrix instructions ``WHOLE_SUBGROUP`` tests."""
    for func in program.functions:
        for inst in func.body.walk():
            if inst.opcode in WHOLE_SUBGROUP:
                inst.loc = Marked(inst)


def at_marks(emitters: dict) -> dict:
    """The emitters of checked code: each first tests the coopmatrix instruction its
    instruction replaces, if it is the first of them emitted."""
    def wrap(emit: Callable) -> Callable:
        def run(k: Kernel, inst: Instruction):
            loc = inst.loc
            if isinstance(loc, Marked) and loc not in k.tested:
                k.tested.append(loc)
                k.current = loc.inst
                whole_subgroup(k, loc.inst)
                k.current = inst
            return emit(k, inst)
        return run
    return {op: wrap(emit) for op, emit in emitters.items()}


def whole_subgroup(k: Kernel, inst: Instruction) -> None:
    """A coopmatrix instruction in SPMD code: reached by the whole subgroup (else the
    first active work-item names the first inactive one, E_PARTIAL), then its operands
    uniform (E_UNIFORM), in the interpreter's order.  Operands defined outside SPMD code
    (arguments, constants) are uniform."""
    if not k.spmd:
        return
    m, i32, i64, bt, scope = k.m, k.i32(), k.i64(), k.m.type_bool(), k.c32(SUBGROUP)
    u4 = m.type_vector(i32, 4)
    active = k.op("GroupNonUniformBallot", u4, scope, m.constant_bool(True))
    count = k.op("GroupNonUniformBallotBitCount", i32, scope, Enum("GroupOperation", "Reduce"),
                 active)
    inactive = k.op("GroupNonUniformBallotFindLSB", i32, scope, k.op("Not", u4, active))
    bad = k.op("LogicalAnd", bt, k.op("GroupNonUniformElect", bt, scope),
               k.op("INotEqual", bt, count, k.c32(k.S)))
    g = subgroup(k)
    item = k.op("IAdd", i64, k.op("IMul", i64, g, k.c64(k.S)), k.op("UConvert", i64, inactive))
    fail_if(k, bad, E_PARTIAL, [g], item=item)
    for slot, what in WHOLE_SUBGROUP[inst.opcode]:
        v = inst.slots[slot]
        if v.owner is None or v.owner.opcode == "constant" or v not in k.values:
            continue  # uniform (an argument, a constant, or folded into one)
        x = k.values[v]
        if isinstance(x, MemVal):
            parts = [k.op("ConvertPtrToU", i64, x.ptr), *x.shape, *x.stride]
        else:
            parts = [k.index(v)]
        for part in parts:
            if not isinstance(part, Static):
                uniform(k, part, 64, what)
