"""The kernel ABI: how the arguments of a ttlc function arrive as OpenCL kernel arguments
(docs/spirv.md says the same for the host side), in the order of the function's
parameters:

* a scalar: one argument of its type (``index`` as i64; ``bool`` as an i8, 0 or 1;
  ``bf16`` as its 16 bits, an i16; ``c32``/``c64`` as a ``float2``/``double2``);
* a memref: a pointer to its first element (``__global``, or ``__local`` for a memref of
  the local space), then one i64 per dynamic mode size and one i64 per dynamic stride,
  in mode order (static ones are constants in the code);
* a group: a ``__global`` pointer to the member pointers (the group offset not applied),
  then, if the member type has dynamic sizes or strides, a ``__global`` pointer to i64s:
  per member, its dynamic sizes then its dynamic strides; then the number of members if
  it is dynamic, then the offset (in elements) if it is dynamic.

A null memref or group is a null pointer.  Checked code (``checks``) takes one more
argument, last: a ``__global long *`` to its error buffer.
"""
from __future__ import annotations

from typing import List, Tuple

from ...ir.types import BOOL, DYNAMIC, GroupType, I8, MemrefType, ScalarType
from . import checks, races
from .builder import Enum, Lit
from .function import Cplx, GroupVal, Kernel, MemVal, Static, Unsupported


def _dynamic(t: MemrefType) -> int:
    return sum(d is DYNAMIC for d in t.shape) + sum(d is DYNAMIC for d in t.stride)


def parameters(k: Kernel) -> List[Tuple[int, str]]:
    """(type id, what) of every kernel argument, in order."""
    out: List[Tuple[int, str]] = []
    for arg in k.func.args:
        try:
            out.extend(_parameter(k, arg.value.type, arg.value.name))
        except Unsupported as e:
            raise type(e)(None, f"argument %{arg.value.name}: {e.args[1]}", *e.args[2:]) \
                from None
    return out


def _parameter(k: Kernel, t, name: str) -> List[Tuple[int, str]]:
    """(type id, name) of the kernel arguments of one parameter."""
    i64 = k.i64()
    if t == BOOL:
        return [(k.scalar(I8), name)]
    if isinstance(t, ScalarType) and t.is_complex:
        return [(k.m.type_vector(k.scalar(t.component), 2), name)]
    if isinstance(t, ScalarType):
        return [(k.memory_type(t), name)]
    if isinstance(t, MemrefType):
        return [(k.pointer(t), name)] + [
            (i64, f"{name}.{what}{mode}")
            for what, dims in (("size", t.shape), ("stride", t.stride))
            for mode, d in enumerate(dims) if d is DYNAMIC]
    if isinstance(t, GroupType):
        out = [(k.m.type_pointer("CrossWorkgroup", k.pointer(t.memref)), name)]
        if _dynamic(t.memref):
            out.append((k.m.type_pointer("CrossWorkgroup", i64), f"{name}.dims"))
        if t.size is DYNAMIC:
            out.append((i64, f"{name}.size"))
        if t.offset is DYNAMIC:
            out.append((i64, f"{name}.offset"))
        return out
    raise Unsupported(None, f"arguments of type {t}")


def define_kernel(k: Kernel) -> None:
    """The kernel's entry point (work-group size and subgroup size as execution modes),
    its function with the parameters above, and its body."""
    m, func = k.m, k.func
    fid = m.id()
    m.add("entry_point", "EntryPoint", None, None, Enum("ExecutionModel", "Kernel"), fid,
          func.name)
    k.entry = m.sections["entry_point"][-1]
    wgx, wgy = k.cfg.work_group_size
    m.add("execution_mode", "ExecutionMode", None, None, fid,
          Enum("ExecutionMode", "LocalSize"), Lit(wgx), Lit(wgy), Lit(1))
    m.add("execution_mode", "ExecutionMode", None, None, fid,
          Enum("ExecutionMode", "SubgroupSize"), Lit(k.S))
    params = parameters(k)
    if k.checked:  # the error buffer (``checks``)
        params.append((k.m.type_pointer("CrossWorkgroup", k.i64()), "ttlc.errors"))
    fn_type = m.type_function(m.type_void(), [t for t, _ in params])
    m.add("function", "Function", m.type_void(), fid, Enum("FunctionControl", "None"), fn_type)
    ids = []
    for t, name in params:
        ids.append(m.add("function", "FunctionParameter", t, m.id()))
        if name:
            m.name(ids[-1], name)
    k.block(m.id())
    k.variables_at = len(m.sections["function"])
    if k.checked:
        checks.setup(k, ids[-1])
        races.setup(k)
    bind_arguments(k, ids)
    k.emit_region(func.body)
    k.op("Return", None)
    k.op("FunctionEnd", None)
    if k.checked:
        races.finish(k)  # its functions report through checks.finish's
        checks.finish(k)


def bind_arguments(k: Kernel, ids: List[int]) -> None:
    """Give every parameter of the function its value from the kernel arguments."""
    it = iter(ids)
    for arg in k.func.args:
        t = arg.value.type
        if t == BOOL:
            x = next(it)
            k.values[arg.value] = k.op("INotEqual", k.m.type_bool(), x,
                                       k.const(k.scalar(I8), 0, 8))
        elif isinstance(t, ScalarType) and t.is_complex:
            pair, f = next(it), k.scalar(t.component)
            k.values[arg.value] = Cplx(k.op("CompositeExtract", f, pair, Lit(0)),
                                       k.op("CompositeExtract", f, pair, Lit(1)))
        elif isinstance(t, ScalarType):
            k.values[arg.value] = k.from_memory(t, next(it))
        elif isinstance(t, MemrefType):
            ptr = next(it)
            shape = [Static(d) if d is not DYNAMIC else next(it) for d in t.shape]
            stride = [Static(d) if d is not DYNAMIC else next(it) for d in t.stride]
            k.values[arg.value] = MemVal(ptr, shape, stride, t)
        elif isinstance(t, GroupType):
            ptrs = next(it)
            dope = next(it) if _dynamic(t.memref) else None
            size = Static(t.size) if t.size is not DYNAMIC else next(it)
            offset = Static(t.offset) if t.offset is not DYNAMIC else next(it)
            k.values[arg.value] = GroupVal(ptrs, dope, size, offset, t)


def member(k: Kernel, g: GroupVal, i) -> MemVal:
    """Member i (a Static or i64 id) of a group as a memref."""
    t = g.type.memref
    ptr_t = k.pointer(t)
    slot = k.op("InBoundsPtrAccessChain", k.m.type_pointer("CrossWorkgroup", ptr_t), g.ptrs,
                k.ival(i))
    ptr = k.op("Load", ptr_t, slot)
    if not (isinstance(g.offset, Static) and g.offset.value == 0):
        ptr = k.op("PtrAccessChain", ptr_t, ptr, k.ival(g.offset))
    n = _dynamic(t)
    dims = iter(range(n))

    def dim():
        j = next(dims)
        at = k.iadd(k.imul(i, Static(n)), Static(j))
        p = k.op("InBoundsPtrAccessChain", k.m.type_pointer("CrossWorkgroup", k.i64()), g.dope,
                 k.ival(at))
        return k.op("Load", k.i64(), p)

    shape = [Static(d) if d is not DYNAMIC else dim() for d in t.shape]
    stride = [Static(d) if d is not DYNAMIC else dim() for d in t.stride]
    return MemVal(ptr, shape, stride, t)
