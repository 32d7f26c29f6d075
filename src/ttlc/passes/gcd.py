"""The GCD analysis printed (dump-gcd; the analysis is ``ttlc.analysis.gcd``), and local
memory layout (set-stack-ptr).

``dump-gcd`` prints, per function, ``GCD in @name`` and then, in program order (arguments
first), ``offset_gcd(%x) = N``, ``shape_gcd(%x) = [..]`` and ``stride_gcd(%x) = [..]`` for
every memref value and ``gcd(%x) = N`` for every integer value with a divisor other than 1.

**set-stack-ptr** gives every alloca its byte offset in the work-group's local memory, as
the instruction attribute ``stack_ptr`` (not part of the text: the printer writes syntax
elements only).  Allocas are placed first-fit in program order at a multiple of their
alignment (the ``alignment`` attribute, else ``target.cache_line``); the memory of an
alloca becomes free again at its ``lifetime_stop`` or at the end of the region that
holds it, so later allocas reuse it.  ``stack_size(func)`` is the local memory a
function needs.  insert-barrier uses the offsets to tell which allocas share memory.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from ..analysis.gcd import GCDAnalysis
from ..ir import rewrite
from ..ir.core import Function, Instruction, Value
from ..ir.printer import Printer
from ..ir.types import MemrefType


# ---- dump-gcd ------------------------------------------------------------------------------------
def _list(xs: Sequence[int]) -> str:
    return "[" + ",".join(str(x) for x in xs) + "]"


def dump_gcd(program, ctx):
    """Print the divisors the GCD analysis knows for integer and memref values."""
    for func in program.functions:
        analysis = GCDAnalysis(func, ctx.target)
        printer = Printer()
        printer.function(func)  # names every value as the IR printer does
        out = ctx.out
        out.write(f"GCD in @{func.name}\n")

        def show(v: Value) -> None:
            name = printer.value(v)
            info = analysis.info(v)
            if info is not None and isinstance(v.type, MemrefType):
                out.write(f"offset_gcd({name}) = {info.offset_gcd}\n")
                out.write(f"shape_gcd({name}) = {_list(info.shape_gcd)}\n")
                out.write(f"stride_gcd({name}) = {_list(info.stride_gcd)}\n")
            elif v in analysis.ints and analysis.ints[v] != 1:
                out.write(f"gcd({name}) = {analysis.ints[v]}\n")

        for arg in func.args:
            show(arg.value)
        for inst in func.body.walk():
            for r in inst.regions:
                for a in r.args:
                    show(a)
            for v in inst.results:
                show(v)
        out.write("\n")


# ---- set-stack-ptr -------------------------------------------------------------------------------
def _alignment(inst: Instruction, default: int) -> int:
    requested = inst.attrs.get("attributes", {}).get("alignment")
    return requested if isinstance(requested, int) and requested > 0 else default


def set_stack_pointers(func: Function, alignment: int) -> int:
    """Assign ``stack_ptr`` to every alloca of func; returns the local memory needed."""
    live: List[Tuple[int, int, Value]] = []  # (start, stop, value), sorted by start
    high = 0

    def place(inst: Instruction) -> None:
        nonlocal high
        t = inst.result.type
        size = t.bytes
        align = _alignment(inst, alignment)
        ptr = 0
        index = 0
        for index, (start, stop, _) in enumerate(live):
            if ptr + size <= start:
                break
            ptr = -(-max(ptr, stop) // align) * align
        else:
            index = len(live)
        live.insert(index, (ptr, ptr + size, inst.result))
        high = max(high, ptr + size)
        rewrite.set_attribute(inst, "stack_ptr", ptr)

    def free(v: Value) -> None:
        for i, entry in enumerate(live):
            if entry[2] is v:
                del live[i]
                return

    def region(r: Region) -> None:
        mine: List[Value] = []
        for inst in r.instructions:
            if inst.opcode == "alloca" and isinstance(inst.result.type, MemrefType) \
                    and None not in inst.result.type.shape and None not in inst.result.type.stride:
                place(inst)
                mine.append(inst.result)
            elif inst.opcode == "lifetime_stop":
                free(inst.slots["object"])
            for nested in inst.regions:
                region(nested)
        for v in mine:  # the region ends: its allocas are freed
            free(v)

    region(func.body)
    return high


def stack_size(func: Function) -> int:
    """Bytes of local memory func needs (after set-stack-ptr; 0 without allocas)."""
    out = 0
    for inst in func.body.walk():
        ptr = inst.attrs.get("stack_ptr") if inst.opcode == "alloca" else None
        if isinstance(ptr, int):
            out = max(out, ptr + inst.result.type.bytes)
    return out


def set_stack_ptr(program, ctx):
    """Place every alloca in local memory (attribute stack_ptr), reusing freed memory."""
    for func in program.functions:
        set_stack_pointers(func, ctx.target.cache_line)
