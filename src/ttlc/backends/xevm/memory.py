"""Memory in MLIR (the llvm dialect): element loads and stores, group members, ``alloca``
(a work-group global of the gpu.module, address space 3) and the memref views, which only
compute a pointer, sizes and strides.  An element's address is a ``llvm.getelementptr``
of the memref's pointer by the sum of index times stride (i64)."""
from __future__ import annotations

from typing import Callable, Dict, List

from ...ir.core import Instruction
from ...ir.types import DYNAMIC, MemrefType
from .. import simt
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


def emit_load(k: Kernel, inst: Instruction):
    src = k.get(inst.slots["tensor"])
    if isinstance(src, GroupVal):
        return member(k, src, k.index(inst.slots["index"][0]))
    if src.type.element.is_complex:
        raise Unsupported(inst, f"memrefs of {src.type.element}")
    ptr = address(k, src, inst.slots["index"])
    return k.op(f"llvm.load {ptr} : {k.pointer(src.type)} -> {k.type(src.type.element)}")


def emit_store(k: Kernel, inst: Instruction):
    m = k.get(inst.slots["tensor"])
    if m.type.element.is_complex:
        raise Unsupported(inst, f"memrefs of {m.type.element}")
    ptr = address(k, m, inst.slots["index"])
    k.line(f"llvm.store {k.get(inst.slots['value'])}, {ptr} : {k.type(m.type.element)}, "
           f"{k.pointer(m.type)}")


# ---- atomics ----------------------------------------------------------------------------------
_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release",
          "acquire_release": "acq_rel", "sequentially_consistent": "seq_cst"}


def _atomic(k: Kernel, inst: Instruction):
    """(pointer, its type, element type, LLVM ordering) of an atomic instruction."""
    m: MemVal = k.get(inst.slots["tensor"])
    t = m.type.element
    if t.is_complex or t.bits < 32:
        raise Unsupported(inst, f"atomics on {t}")
    return (address(k, m, inst.slots["index"]), k.pointer(m.type), k.type(t),
            _ORDER[inst.modifier("semantics")])


def emit_atomic_load(k: Kernel, inst: Instruction):
    ptr, pt, t, order = _atomic(k, inst)
    return k.op(f"llvm.load {ptr} atomic {order} {{alignment = {int(t[1:]) // 8} : i64}} : "
                f"{pt} -> {t}")


def emit_atomic_store(k: Kernel, inst: Instruction):
    ptr, pt, t, order = _atomic(k, inst)
    k.line(f"llvm.store {k.get(inst.slots['value'])}, {ptr} atomic {order} "
           f"{{alignment = {int(t[1:]) // 8} : i64}} : {t}, {pt}")


def emit_atomic_update(k: Kernel, inst: Instruction):
    """``llvm.atomicrmw`` (integers: add, max, min; floats: fadd, fmax, fmin).  In
    collective code work-item (0, 0) alone updates, so that the update happens once per
    work-group, as the language says; its previous value is not given to the others yet
    (a use of it there is a CompileError)."""
    ptr, pt, t, order = _atomic(k, inst)
    op = inst.opcode[len("atomic_"):]
    kind = op if t.startswith("i") else "f" + op
    update = f"llvm.atomicrmw {kind} {ptr}, {k.get(inst.slots['value'])} {order} : {pt}, {t}"
    if k.spmd:
        return k.op(update)
    if inst.results and inst.results[0] in k.used():
        raise Unsupported(inst, "the previous value of an atomic update in collective code")
    x, y = (k.op(f"xevm.local_id.{d} : i32") for d in "xy")
    first = k.op(f"arith.cmpi eq, {k.op(f'arith.ori {x}, {y} : i32')}, "
                 f"{k.op('arith.constant 0 : i32')} : i32")
    k.line(f"scf.if {first} {{")
    k.depth += 1
    k.op(update)
    k.depth -= 1
    k.line("}")
    return k.const(inst.results[0].type, 0) if inst.results else None


def emit_alloca(k: Kernel, inst: Instruction):
    t: MemrefType = inst.results[0].type
    if t.space != "local" or DYNAMIC in t.shape or DYNAMIC in t.stride or t.element.is_complex:
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


def emit_size(k: Kernel, inst: Instruction):
    v = k.get(inst.slots["tensor"])
    return k.ival(v.size if isinstance(v, GroupVal) else v.shape[inst.attrs["mode"]])


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
    "size": emit_size,
    "subview": emit_subview,
    **simt.VIEW_EMITTERS,
}
