"""Memory in SPIR-V: element loads and stores, atomics, ``alloca``, and the memref views
(subview, expand, fuse), which only compute a pointer, sizes and strides.

An element's address is the memref's pointer advanced by the sum of index times stride
(OpPtrAccessChain, i64 arithmetic).  An ``alloca`` is a Workgroup variable (an array of
its bytes' elements) of the kernel.  Atomics are OpAtomic* with the instruction's scope
and memory semantics (the storage class of the memref added to non-relaxed semantics, as
OpenCL requires); integer min/max are signed.  Float atomic loads and stores are
OpAtomicLoad/Store; float add/max/min are compare-and-swap loops on the bits
(OpAtomicCompareExchange on the integer of the same width), which every OpenCL device
has.  A complex number is accessed part by part (each part atomically).  Atomics on 8-
and 16-bit numbers are not emitted yet.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from ...ir.core import Instruction
from ...ir.types import DYNAMIC, MemrefType, ScalarType
from .. import simt
from .abi import member
from .builder import Enum
from .arith import binary
from .function import Cplx, GroupVal, Kernel, MemVal, Static, Unsupported, storage_class


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
        return member(k, src, k.index(inst.slots["index"][0]))
    t = src.type.element
    ptr = address(k, src, inst.slots["index"])
    if t.is_complex:
        f = k.memory_type(t)
        return Cplx(k.op("Load", f, ptr), k.op("Load", f, _imaginary(k, src, ptr)))
    return k.from_memory(t, k.op("Load", k.memory_type(t), ptr))


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
        raise Unsupported(inst, f"atomics on {t}")
    if t.component.bits < 32:
        raise Unsupported(inst, f"atomics on {t}")
    return t


def _semantics(k: Kernel, inst: Instruction, order: Optional[str]) -> int:
    storage = storage_class(k.get(inst.slots["tensor"]).type)
    names = [order, "WorkgroupMemory" if storage == "Workgroup" else "CrossWorkgroupMemory"] \
        if order else []
    return k.c32(Enum("MemorySemantics", "|".join(names) or "None").value)


def _atomic(k: Kernel, inst: Instruction):
    """(parts, scope id, semantics id, failure semantics id) of an atomic instruction:
    parts are (pointer, real type) of the element, two for a complex number, whose parts
    are accessed atomically one by one; the failure semantics are those of a
    compare-and-swap that fails (a load: no release part)."""
    m: MemVal = k.get(inst.slots["tensor"])
    t = _element(k, inst)
    if t.component.bits == 64:
        k.m.require_capability("Int64Atomics")
    ptr = address(k, m, inst.slots["index"])
    parts = [(ptr, t.component)]
    if t.is_complex:
        parts.append((_imaginary(k, m, ptr), t.component))
    order = inst.modifier("semantics")
    failure = {"release": None, "acquire_release": "Acquire"}.get(order, _SEMANTICS[order])
    return (parts, k.c32(_SCOPES[inst.modifier("scope")]),
            _semantics(k, inst, _SEMANTICS[order]), _semantics(k, inst, failure))


def _pack(t: ScalarType, results: List[int]):
    return Cplx(*results) if t.is_complex else results[0]


def emit_atomic_load(k: Kernel, inst: Instruction):
    parts, scope, sem, _ = _atomic(k, inst)
    return _pack(_element(k, inst),
                 [k.op("AtomicLoad", k.scalar(t), ptr, scope, sem) for ptr, t in parts])


def emit_atomic_store(k: Kernel, inst: Instruction):
    parts, scope, sem, _ = _atomic(k, inst)
    for (ptr, t), x in zip(parts, k.flatten(k.get(inst.slots["value"]))):
        k.op("AtomicStore", None, ptr, scope, sem, x)


def emit_atomic_update(k: Kernel, inst: Instruction):
    """Integers: OpAtomicIAdd/SMax/SMin; floats: compare-and-swap loops; complex numbers
    part by part.  In collective code one work-item updates, and all get the previous
    value."""
    parts, scope, sem, failure = _atomic(k, inst)
    op = inst.opcode[len("atomic_"):]
    storage = storage_class(k.get(inst.slots["tensor"]).type)
    results = []
    for (ptr, t), value in zip(parts, k.flatten(k.get(inst.slots["value"]))):
        def update(ptr=ptr, t=t, value=value):
            if t.is_int:
                name = {"add": "AtomicIAdd", "max": "AtomicSMax", "min": "AtomicSMin"}[op]
                return k.op(name, k.scalar(t), ptr, scope, sem, value)
            return _compare_and_swap(k, ptr, storage, t, scope, (sem, failure),
                                     lambda old: binary(k, op, t, old, value))
        results.append(update() if k.spmd else k.once(update, k.scalar(t)))
    return _pack(_element(k, inst), results)


def _compare_and_swap(k: Kernel, ptr: int, storage: str, t: ScalarType, scope: int, sem,
                      update: Callable[[int], int]) -> int:
    """A loop replacing the element at ptr by update(element) atomically; the element's
    previous value.  sem: the semantics on success and on failure."""
    it = k.m.type_int(t.bits)
    ft = k.scalar(t)
    iptr = k.op("Bitcast", k.m.type_pointer(storage, it), ptr)
    first = k.op("AtomicLoad", it, iptr, scope, sem[1])
    pre = k.label
    header, body, cont, merge = (k.m.id() for _ in range(4))
    k.branch(header)
    k.block(header)
    k.m.add("function", "Phi", it, k.m.id())
    phi = k.m.sections["function"][-1]
    k.op("LoopMerge", None, merge, cont, Enum("LoopControl", "None"))
    k.branch(body)
    k.block(body)
    new = k.op("Bitcast", it, update(k.op("Bitcast", ft, phi.result)))
    seen = k.op("AtomicCompareExchange", it, iptr, scope, sem[0], sem[1], new, phi.result)
    done = k.op("IEqual", k.m.type_bool(), seen, phi.result)
    k.op("BranchConditional", None, done, merge, cont)
    k.block(cont)
    k.branch(header)
    phi.operands = [first, pre, seen, cont]
    k.block(merge)
    return k.op("Bitcast", ft, seen)


# ---- memrefs -----------------------------------------------------------------------------------
def emit_alloca(k: Kernel, inst: Instruction):
    t: MemrefType = inst.results[0].type
    if t.space != "local" or DYNAMIC in t.shape or DYNAMIC in t.stride:
        raise Unsupported(inst, f"alloca of {t}")
    elem = k.memory_type(t.element)
    array = k.m.type_array(elem, max(1, t.extent) * (2 if t.element.is_complex else 1))
    var = k.m.add("global", "Variable", k.m.type_pointer("Workgroup", array), k.m.id(),
                  Enum("StorageClass", "Workgroup"))
    ptr = k.op("InBoundsAccessChain", k.pointer(t), var, k.c64(0))
    return MemVal(ptr, [Static(d) for d in t.shape], [Static(d) for d in t.stride], t)


def emit_associated(k: Kernel, inst: Instruction):
    v = k.get(inst.slots["tensor"])
    ptr = v.ptrs if isinstance(v, GroupVal) else v.ptr
    addr = k.op("ConvertPtrToU", k.i64(), ptr)
    return k.op("INotEqual", k.m.type_bool(), addr, k.c64(0))


def emit_size(k: Kernel, inst: Instruction):
    v = k.get(inst.slots["tensor"])
    size = v.size if isinstance(v, GroupVal) else v.shape[inst.attrs["mode"]]
    return k.ival(size)


def emit_subview(k: Kernel, inst: Instruction):
    m: MemVal = k.get(inst.slots["tensor"])
    off, shape, stride = simt.subview(k, m, inst)
    return MemVal(advance(k, m, off), shape, stride, inst.results[0].type)


EMITTERS: Dict[str, Callable] = {
    "load": emit_load,
    "store": emit_store,
    "atomic_load": emit_atomic_load,
    "atomic_store": emit_atomic_store,
    **dict.fromkeys(("atomic_add", "atomic_max", "atomic_min"), emit_atomic_update),
    "alloca": emit_alloca,
    "associated": emit_associated,
    "size": emit_size,
    "subview": emit_subview,
    **simt.VIEW_EMITTERS,
}
