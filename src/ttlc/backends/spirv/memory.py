"""Memory in SPIR-V: element loads and stores, atomics, ``alloca``, and the memref views
(subview, expand, fuse), which only compute a pointer, sizes and strides.

An element's address is the memref's pointer advanced by the sum of index times stride
(OpPtrAccessChain, i64 arithmetic).  An ``alloca`` is a Workgroup variable (an array of
its bytes' elements) of the kernel.  Atomics are OpAtomic* with the instruction's scope
and memory semantics (the storage class of the memref added to non-relaxed semantics, as
OpenCL requires); integer min/max are signed.  Float atomic loads and stores are
OpAtomicLoad/Store; float add/max/min are compare-and-swap loops on the bits
(OpAtomicCompareExchange on the integer of the same width), which every OpenCL device
has.  8- and 16-bit numbers are accessed through the aligned 32-bit word holding them
(loads: OpAtomicLoad of the word; stores and updates: compare-and-swap loops on it, which
leave the word's other bytes as they are).  A complex number is accessed part by part
(each part atomically).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from ...ir.core import Instruction
from ...ir.types import DYNAMIC, MemrefType, ScalarType
from .. import simt
from . import checks, races
from .abi import member
from .builder import Enum
from .arith import binary, convert
from .subgroup import wide_type
from .function import (Cplx, GroupVal, Kernel, Lacking, MemVal, Static, Unsupported,
                       storage_class)


def address(k: Kernel, m: MemVal, indices: List) -> int:
    """A pointer to element ``indices`` (Values) of a memref."""
    off = Static(0)
    for i, stride in zip(indices, m.stride):
        off = k.iadd(off, k.imul(k.index(i), stride))
    return advance(k, m, off)


def advance(k: Kernel, m: MemVal, off) -> int:
    """The memref's pointer advanced by off elements (a complex number is two
    components: the pointer is to its real part)."""
    if m.type.element.is_complex:
        off = k.imul(off, Static(2))
    if isinstance(off, Static) and off.value == 0:
        return m.ptr
    return k.op("PtrAccessChain", k.pointer(m.type), m.ptr, k.ival(off))


def _imaginary(k: Kernel, m: MemVal, ptr: int) -> int:
    return k.op("PtrAccessChain", k.pointer(m.type), ptr, k.c64(1))


def emit_load(k: Kernel, inst: Instruction):
    src = k.get(inst.slots["tensor"])
    if isinstance(src, GroupVal):
        return _member(k, src, k.index(inst.slots["index"][0]))
    t = src.type.element
    ptr = address(k, src, inst.slots["index"])
    if t.is_complex:
        f = k.memory_type(t)
        return Cplx(k.op("Load", f, ptr), k.op("Load", f, _imaginary(k, src, ptr)))
    return k.from_memory(t, k.op("Load", k.memory_type(t), ptr))


def _member(k: Kernel, g: GroupVal, i) -> MemVal:
    """Member i of a group; in checked code only read where i is inside the group (a
    null memref of no elements elsewhere)."""
    if not k.checked:
        return member(k, g, i)
    bad = checks.member_index(k, g, i)
    t = g.type.memref
    types = [k.pointer(t)] + [k.i64()] * sum(d is DYNAMIC for d in t.shape + t.stride)

    def read() -> List[int]:
        m = member(k, g, i)
        return [m.ptr] + [x for x in m.shape + m.stride if not isinstance(x, Static)]
    ids = iter(checks.guarded(k, bad, read, types))
    ptr = next(ids)
    shape = [Static(d) if d is not DYNAMIC else next(ids) for d in t.shape]
    stride = [Static(d) if d is not DYNAMIC else next(ids) for d in t.stride]
    return MemVal(ptr, shape, stride, t)


def checked_access(emit: Callable) -> Callable:
    """An element access emitter that, in checked code, tests the access first and
    performs it only where it is allowed (``checks.guarded``; a load gives zero)."""
    def run(k: Kernel, inst: Instruction):
        m = k.get(inst.slots["tensor"])
        if not k.checked or isinstance(m, GroupVal):  # a member: ``_member`` tests it
            return emit(k, inst)
        bad = checks.access(k, inst)

        def perform() -> List[int]:
            if races.tracks(k, m):
                races.access(k, inst, m, address(k, m, inst.slots["index"]),
                             inst.slots["index"])
            return [x for x in k.flatten(emit(k, inst)) if x is not None]
        if not inst.results:
            checks.guarded(k, bad, perform, [])
            return None
        t = inst.results[0].type
        return k.rebuild(t, iter(checks.guarded(k, bad, perform, k.part_types(t))))
    return run


def emit_store(k: Kernel, inst: Instruction):
    m = k.get(inst.slots["tensor"])
    ptr = address(k, m, inst.slots["index"])
    value = k.get(inst.slots["value"])
    if isinstance(value, Cplx):
        k.op("Store", None, ptr, value.re)
        k.op("Store", None, _imaginary(k, m, ptr), value.im)
        return
    k.op("Store", None, ptr, k.to_memory(m.type.element, value))


# ---- atomics -----------------------------------------------------------------------------------
_SCOPES = {"cross_device": 0, "device": 1, "work_group": 2, "subgroup": 3}
_SEMANTICS = {"relaxed": None, "acquire": "Acquire", "release": "Release",
              "acquire_release": "AcquireRelease",
              "sequentially_consistent": "SequentiallyConsistent"}


def _element(k: Kernel, inst: Instruction) -> ScalarType:
    """The element type of an atomic instruction, if this back end has atomics on it."""
    t: ScalarType = k.get(inst.slots["tensor"]).type.element
    if k.target.atomic_types is not None and t.name not in k.target.atomic_types:
        raise Lacking(inst, f"atomics on {t}", f"them on {', '.join(k.target.atomic_types)}")
    return t


def _semantics(k: Kernel, inst: Instruction, order: Optional[str]) -> int:
    storage = storage_class(k.get(inst.slots["tensor"]).type)
    names = [order, "WorkgroupMemory" if storage == "Workgroup" else "CrossWorkgroupMemory"] \
        if order else []
    return k.c32(Enum("MemorySemantics", "|".join(names) or "None").value)


@dataclass(frozen=True)
class _Cell:
    """The integer word an atomic element is accessed through: the element's own bits, or,
    for an 8- or 16-bit number, the aligned 32-bit word holding it (OpenCL has atomics on
    32- and 64-bit words only), its bits ``shift`` up from the word's lowest (OpenCL
    devices are little-endian)."""

    t: ScalarType  # the real type of the element (a part of a complex number)
    ptr: int  # pointer to the word
    word: int  # the word's integer type
    shift: Optional[int] = None  # i32 id; None: the element is the whole word


def _cell(k: Kernel, ptr: int, storage: str, t: ScalarType) -> _Cell:
    mem = k.memory_type(t)
    if t.bits >= 32:
        word = k.m.type_int(t.bits)
        return _Cell(t, ptr if mem == word else
                     k.op("Bitcast", k.m.type_pointer(storage, word), ptr), word)
    i32, i64, n = k.i32(), k.i64(), k.m.type_int(t.bits)
    byte = k.op("BitwiseAnd", i64, k.op("ConvertPtrToU", i64, ptr), k.c64(3))
    back = k.op("SNegate", i64, k.op("ShiftRightLogical", i64, byte, k.c64(t.bits // 16)))
    narrow = ptr if mem == n else k.op("Bitcast", k.m.type_pointer(storage, n), ptr)
    first = k.op("PtrAccessChain", k.m.type_pointer(storage, n), narrow, back)
    return _Cell(t, k.op("Bitcast", k.m.type_pointer(storage, i32), first), i32,
                 k.op("ShiftLeftLogical", i32, k.op("UConvert", i32, byte), k.c32(3)))


def _unpack(k: Kernel, c: _Cell, word: int) -> int:
    """The element (in registers) held by a word."""
    bits = word
    if c.shift is not None:
        bits = k.op("UConvert", k.m.type_int(c.t.bits),
                    k.op("ShiftRightLogical", c.word, word, c.shift))
    mem = k.memory_type(c.t)
    return k.from_memory(c.t, bits if mem == k.m.type_int(c.t.bits) else k.op("Bitcast", mem, bits))


def _repack(k: Kernel, c: _Cell, word: int, value: int) -> int:
    """The word with the element replaced by value (in registers)."""
    n = k.m.type_int(c.t.bits)
    mem = k.memory_type(c.t)
    bits = k.to_memory(c.t, value)
    bits = bits if mem == n else k.op("Bitcast", n, bits)
    if c.shift is None:
        return bits
    mask = k.op("ShiftLeftLogical", c.word, k.c32((1 << c.t.bits) - 1), c.shift)
    kept = k.op("BitwiseAnd", c.word, word, k.op("Not", c.word, mask))
    return k.op("BitwiseOr", c.word, kept,
                k.op("ShiftLeftLogical", c.word, k.op("UConvert", c.word, bits), c.shift))


def _atomic(k: Kernel, inst: Instruction):
    """(cells, scope id, semantics id, failure semantics id) of an atomic instruction:
    one cell per real part of the element (two for a complex number, whose parts are
    accessed atomically one by one); the failure semantics are those of a
    compare-and-swap that fails (a load: no release part)."""
    m: MemVal = k.get(inst.slots["tensor"])
    t = _element(k, inst)
    if t.component.bits == 64:
        k.m.require_capability("Int64Atomics")
    storage = storage_class(m.type)
    ptr = address(k, m, inst.slots["index"])
    ptrs = [ptr, _imaginary(k, m, ptr)] if t.is_complex else [ptr]
    order = inst.modifier("semantics")
    failure = {"release": None, "acquire_release": "Acquire"}.get(order, _SEMANTICS[order])
    return ([_cell(k, p, storage, t.component) for p in ptrs],
            k.c32(_SCOPES[inst.modifier("scope")]),
            _semantics(k, inst, _SEMANTICS[order]), _semantics(k, inst, failure))


def _pack(t: ScalarType, results: List[int]):
    return Cplx(*results) if t.is_complex else results[0]


def emit_atomic_load(k: Kernel, inst: Instruction):
    cells, scope, sem, _ = _atomic(k, inst)
    return _pack(_element(k, inst),
                 [_unpack(k, c, k.op("AtomicLoad", c.word, c.ptr, scope, sem)) for c in cells])


def emit_atomic_store(k: Kernel, inst: Instruction):
    """OpAtomicStore; an 8- or 16-bit number is a compare-and-swap loop on its word."""
    cells, scope, sem, failure = _atomic(k, inst)
    for c, x in zip(cells, k.flatten(k.get(inst.slots["value"]))):
        if c.shift is None:
            k.op("AtomicStore", None, c.ptr, scope, sem, _repack(k, c, 0, x))
        else:
            _compare_and_swap(k, c, scope, (sem, failure), lambda old, x=x: x)


def emit_atomic_update(k: Kernel, inst: Instruction):
    """Integers of 32 and 64 bits: OpAtomicIAdd/SMax/SMin; others: compare-and-swap
    loops; complex numbers part by part.  In collective code one work-item updates, and
    all get the previous value."""
    bad = checks.access(k, inst) if k.checked else None
    m = k.get(inst.slots["tensor"])
    if k.checked and races.tracks(k, m):
        checks.guarded(k, bad, lambda: races.access(k, inst, m, address(
            k, m, inst.slots["index"]), inst.slots["index"]) or [], [])
    cells, scope, sem, failure = _atomic(k, inst)
    op = inst.opcode[len("atomic_"):]
    results = []
    for c, value in zip(cells, k.flatten(k.get(inst.slots["value"]))):
        def update(c=c, value=value):
            if c.t.is_int and c.shift is None:
                name = {"add": "AtomicIAdd", "max": "AtomicSMax", "min": "AtomicSMin"}[op]
                return k.op(name, k.scalar(c.t), c.ptr, scope, sem, value)
            return _compare_and_swap(k, c, scope, (sem, failure),
                                     lambda old: binary(k, op, c.t, old, value))
        if k.checked:  # guarded inside ``once``: its broadcast needs every work-item
            update = (lambda u=update, c=c:
                      checks.guarded(k, bad, lambda: [u()], [k.scalar(c.t)])[0])
        results.append(update() if k.spmd else _once(k, c.t, update))
    return _pack(_element(k, inst), results)


def _once(k: Kernel, t: ScalarType, make: Callable[[], int]) -> int:
    """``Kernel.once`` for a value of type t (broadcast in the type OpenCL's group
    instructions take)."""
    w = wide_type(t)
    return convert(k, w, t, k.once(lambda: convert(k, t, w, make()), k.scalar(w)))


def _compare_and_swap(k: Kernel, c: _Cell, scope: int, sem,
                      update: Callable[[int], int]) -> int:
    """A loop replacing the element of a cell by update(element) atomically; the
    element's previous value.  sem: the semantics on success and on failure."""
    first = k.op("AtomicLoad", c.word, c.ptr, scope, sem[1])
    pre = k.label
    header, body, cont, merge = (k.m.id() for _ in range(4))
    k.branch(header)
    k.block(header)
    k.m.add("function", "Phi", c.word, k.m.id())
    phi = k.m.sections["function"][-1]
    k.op("LoopMerge", None, merge, cont, Enum("LoopControl", "None"))
    k.branch(body)
    k.block(body)
    old = _unpack(k, c, phi.result)
    new = _repack(k, c, phi.result, update(old))
    seen = k.op("AtomicCompareExchange", c.word, c.ptr, scope, sem[0], sem[1], new, phi.result)
    done = k.op("IEqual", k.m.type_bool(), seen, phi.result)
    k.op("BranchConditional", None, done, merge, cont)
    k.block(cont)
    k.branch(header)
    phi.operands = [first, pre, seen, cont]
    k.block(merge)
    return old


# ---- memrefs -----------------------------------------------------------------------------------
def emit_alloca(k: Kernel, inst: Instruction):
    t: MemrefType = inst.results[0].type
    if t.space != "local" or DYNAMIC in t.shape or DYNAMIC in t.stride:
        raise Unsupported(inst, f"alloca of {t}")
    # 8- and 16-bit numbers in an array of 32-bit words, so that the word an atomic on
    # one of them accesses is the variable's
    words = t.element.bits < 32
    elem = k.i32() if words else k.memory_type(t.element)
    count = max(1, t.extent) * (2 if t.element.is_complex else 1)
    array = k.m.type_array(elem, -(-count * t.element.bits // 32) if words else count)
    var = k.m.add("global", "Variable", k.m.type_pointer("Workgroup", array), k.m.id(),
                  Enum("StorageClass", "Workgroup"))
    k.local_bytes += (-(-count * t.element.bits // 32) * 4 if words
                      else count * t.element.size // (2 if t.element.is_complex else 1))
    races.alloca(k, inst, var)
    ptr = k.op("InBoundsAccessChain", k.m.type_pointer("Workgroup", elem), var, k.c64(0))
    if words:
        ptr = k.op("Bitcast", k.pointer(t), ptr)
    if k.checked:
        checks.alloca(k, inst, inst.results[0].name, t.extent * t.element.size,
                      t.element.size)
    return MemVal(ptr, [Static(d) for d in t.shape], [Static(d) for d in t.stride], t)


def emit_associated(k: Kernel, inst: Instruction):
    v = k.get(inst.slots["tensor"])
    ptr = v.ptrs if isinstance(v, GroupVal) else v.ptr
    addr = k.op("ConvertPtrToU", k.i64(), ptr)
    return k.op("INotEqual", k.m.type_bool(), addr, k.c64(0))


def emit_subview(k: Kernel, inst: Instruction):
    m: MemVal = k.get(inst.slots["tensor"])
    if k.checked:
        checks.subview(k, m, inst)
    off, shape, stride = simt.subview(k, m, inst)
    return MemVal(advance(k, m, off), shape, stride, inst.results[0].type)


def view_checked(emit: Callable, check: Callable) -> Callable:
    """A view emitter (expand, fuse) that, in checked code, first tests the spec's rules
    of the view (``check(k, memref, inst)``)."""
    def run(k: Kernel, inst: Instruction):
        if k.checked:
            check(k, k.get(inst.slots["tensor"]), inst)
        return emit(k, inst)
    return run


EMITTERS: Dict[str, Callable] = {
    "load": checked_access(emit_load),
    "store": checked_access(emit_store),
    "atomic_load": checked_access(emit_atomic_load),
    "atomic_store": checked_access(emit_atomic_store),
    **dict.fromkeys(("atomic_add", "atomic_max", "atomic_min"), emit_atomic_update),
    "alloca": emit_alloca,
    "associated": emit_associated,
    "subview": emit_subview,
    **simt.VIEW_EMITTERS,
    "expand": view_checked(simt.emit_expand, checks.expand),
    "fuse": view_checked(simt.emit_fuse, checks.fuse),
    "check_shapes": checks.emit_check_shapes,
}
