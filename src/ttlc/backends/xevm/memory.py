"""Memory in MLIR (the llvm dialect): element loads and stores, group members, ``alloca``
(a work-group global of the gpu.module, address space 3) and the memref views, which only
compute a pointer, sizes and strides.  An element's address is a ``llvm.getelementptr``
of the memref's pointer by the sum of index times stride (i64).  A complex number is an
``!llvm.array<2 x T>`` in memory, accessed part by part (each part atomically)."""
from __future__ import annotations

from typing import Callable, Dict, List

from ...ir.core import Instruction
from ...ir.types import DYNAMIC, MemrefType
from .. import simt
from ..pairs import Pair
from .kernel import GroupVal, Kernel, MemVal, Unsupported, dynamic_dims, symbol


def advance(k: Kernel, ptr: str, ptr_t: str, elem: str, off) -> str:
    if off == 0:
        return ptr
    return k.op(f"llvm.getelementptr {ptr}[{k.ival(off)}] : ({ptr_t}, i64) -> {ptr_t}, {elem}")


def address(k: Kernel, m: MemVal, indices: List) -> str:
    off = 0
    for i, stride in zip(indices, m.stride):
        off = k.iadd(off, k.imul(k.index(i), stride))
    return advance(k, m.ptr, k.pointer(m.type), k.memory_type(m.type.element), off)


def member(k: Kernel, g: GroupVal, i) -> MemVal:
    """Member i of a group as a memref (its pointer, then its dynamic sizes and strides)."""
    t = g.type.memref
    slot = advance(k, g.ptrs, "!llvm.ptr<1>", "!llvm.ptr<1>", i)
    ptr = k.op(f"llvm.load {slot} : !llvm.ptr<1> -> {k.pointer(t)}")
    ptr = advance(k, ptr, k.pointer(t), k.memory_type(t.element), g.offset)
    n = dynamic_dims(t)
    dims = iter(range(n))

    def dim():
        at = advance(k, g.dope, "!llvm.ptr<1>", "i64", k.iadd(k.imul(i, n), next(dims)))
        return k.op(f"llvm.load {at} : !llvm.ptr<1> -> i64")

    shape = [d if d is not DYNAMIC else dim() for d in t.shape]
    stride = [d if d is not DYNAMIC else dim() for d in t.stride]
    return MemVal(ptr, shape, stride, t)


def parts(k: Kernel, m: MemVal, indices: List):
    """(pointer, MLIR type) of each part of an element: one, or two for a complex number
    (the real part first)."""
    ptr, t = address(k, m, indices), m.type.element
    if not t.is_complex:
        return [(ptr, k.type(t))]
    f, pt = k.type(t.component), k.pointer(m.type)
    return [(ptr, f), (advance(k, ptr, pt, f, 1), f)]


def whole(t, values: List[str]):
    """The value of an element from the values of its parts."""
    return Pair(*values) if t.is_complex else values[0]


def emit_load(k: Kernel, inst: Instruction):
    src = k.get(inst.slots["tensor"])
    if isinstance(src, GroupVal):
        return member(k, src, k.index(inst.slots["index"][0]))
    pt = k.pointer(src.type)
    return whole(src.type.element, [k.op(f"llvm.load {p} : {pt} -> {t}")
                                    for p, t in parts(k, src, inst.slots["index"])])


def emit_store(k: Kernel, inst: Instruction):
    m = k.get(inst.slots["tensor"])
    for x, (p, t) in zip(k.flatten(k.get(inst.slots["value"])),
                         parts(k, m, inst.slots["index"])):
        k.line(f"llvm.store {x}, {p} : {t}, {k.pointer(m.type)}")


# ---- atomics ----------------------------------------------------------------------------------
_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release",
          "acquire_release": "acq_rel", "sequentially_consistent": "seq_cst"}


def _atomic(k: Kernel, inst: Instruction):
    """(the parts of the element: pointer and MLIR type; the pointer type; the LLVM
    ordering and alignment) of an atomic instruction."""
    m: MemVal = k.get(inst.slots["tensor"])
    t = m.type.element
    align = (t.component if t.is_complex else t).bits // 8
    return (parts(k, m, inst.slots["index"]), k.pointer(m.type),
            f"{_ORDER[inst.modifier('semantics')]} {{alignment = {align} : i64}}")


def emit_atomic_load(k: Kernel, inst: Instruction):
    ps, pt, order = _atomic(k, inst)
    return whole(inst.results[0].type, [k.op(f"llvm.load {p} atomic {order} : {pt} -> {t}")
                                        for p, t in ps])


def emit_atomic_store(k: Kernel, inst: Instruction):
    ps, pt, order = _atomic(k, inst)
    for x, (p, t) in zip(k.flatten(k.get(inst.slots["value"])), ps):
        k.line(f"llvm.store {x}, {p} atomic {order} : {t}, {pt}")


def emit_atomic_update(k: Kernel, inst: Instruction):
    """``llvm.atomicrmw`` (integers: add, max, min; floats: fadd, fmax, fmin).  In
    collective code work-item (0, 0) alone updates, so that the update happens once per
    work-group, as the language says; where its previous value is used, that work-item
    stores it to a slot of work-group memory that all read between two barriers."""
    ps, pt, order = _atomic(k, inst)
    op = inst.opcode[len("atomic_"):]

    def update():
        return [k.op(f"llvm.atomicrmw {op if t.startswith('i') else 'f' + op} {p}, {x} "
                     f"{order} : {pt}, {t}")
                for x, (p, t) in zip(k.flatten(k.get(inst.slots["value"])), ps)]

    if k.spmd:
        old = update()
        return whole(inst.results[0].type, old) if inst.results else None
    shared = bool(inst.results) and inst.results[0] in k.used()
    if shared:
        name = symbol(f"{k.func.name}.atomic{len(k.globals)}")
        k.globals.append(f"    llvm.mlir.global internal {name}() {{addr_space = 3 : i32}} : "
                         f"!llvm.array<{len(ps)} x {ps[0][1]}>")
        slot = k.op(f"llvm.mlir.addressof {name} : !llvm.ptr<3>")
        slots = [advance(k, slot, "!llvm.ptr<3>", t, j) for j, (_, t) in enumerate(ps)]
        k.line("gpu.barrier")  # the slot's previous readers are done
    x, y = (k.op(f"xevm.local_id.{d} : i32") for d in "xy")
    first = k.op(f"arith.cmpi eq, {k.op(f'arith.ori {x}, {y} : i32')}, "
                 f"{k.op('arith.constant 0 : i32')} : i32")
    k.line(f"scf.if {first} {{")
    k.depth += 1
    old = update()
    if shared:
        for v, at, (_, t) in zip(old, slots, ps):
            k.line(f"llvm.store {v}, {at} : {t}, !llvm.ptr<3>")
    k.depth -= 1
    k.line("}")
    if not shared:
        return k.const(inst.results[0].type, 0) if inst.results else None
    k.line("gpu.barrier")
    return whole(inst.results[0].type, [k.op(f"llvm.load {at} : !llvm.ptr<3> -> {t}")
                                        for at, (_, t) in zip(slots, ps)])


def emit_alloca(k: Kernel, inst: Instruction):
    t: MemrefType = inst.results[0].type
    if t.space != "local" or DYNAMIC in t.shape or DYNAMIC in t.stride:
        raise Unsupported(inst, f"alloca of {t}")
    name = symbol(f"{k.func.name}.local{len(k.globals)}")
    k.globals.append(f"    llvm.mlir.global internal {name}() {{addr_space = 3 : i32}} : "
                     f"!llvm.array<{max(1, t.extent)} x {k.memory_type(t.element)}>")
    return MemVal(k.op(f"llvm.mlir.addressof {name} : !llvm.ptr<3>"), list(t.shape),
                  list(t.stride), t)


def emit_associated(k: Kernel, inst: Instruction):
    v = k.get(inst.slots["tensor"])
    ptr = v.ptrs if isinstance(v, GroupVal) else v.ptr
    t = "!llvm.ptr<1>" if isinstance(v, GroupVal) else k.pointer(v.type)
    null = k.op(f"llvm.mlir.zero : {t}")
    return k.op(f"llvm.icmp \"ne\" {ptr}, {null} : {t}")


def emit_subview(k: Kernel, inst: Instruction):
    m: MemVal = k.get(inst.slots["tensor"])
    off, shape, stride = simt.subview(k, m, inst)
    ptr = advance(k, m.ptr, k.pointer(m.type), k.memory_type(m.type.element), off)
    return MemVal(ptr, shape, stride, inst.results[0].type)


EMITTERS: Dict[str, Callable] = {
    "load": emit_load,
    "store": emit_store,
    "atomic_load": emit_atomic_load,
    "atomic_store": emit_atomic_store,
    **dict.fromkeys(("atomic_add", "atomic_max", "atomic_min"), emit_atomic_update),
    "alloca": emit_alloca,
    "associated": emit_associated,
    "subview": emit_subview,
    **simt.VIEW_EMITTERS,
}
