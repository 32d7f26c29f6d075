"""A kernel's per-thread scratch memory (where alloca lives) and loops over it that LLVM
keeps rolled: the buffers of coopmatrices kept in memory (``columns.py``, ``amx.py``)
and the rows of transposed 16-bit tiles (``coop.py``).
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from .function import not_unrolled
from .values import I8, I64


def at(b: ir.IRBuilder, ptr: ir.Value, byte_offset: int) -> ir.Value:
    """ptr + byte_offset."""
    return b.gep(ptr, [ir.Constant(I64, byte_offset)], source_etype=I8)


def private_scratch(cg, nbytes: int) -> ir.Value:
    """nbytes of the kernel's per-thread scratch memory (where alloca lives), 64-byte
    aligned, for one value alone."""
    offset = -(-cg.local_bytes // 64) * 64
    cg.local_bytes = offset + nbytes
    return at(cg.b, cg.local, offset)


def shared_scratch(cg, owner: str, nbytes: int) -> ir.Value:
    """nbytes of the kernel's per-thread scratch memory, 64-byte aligned, in one area for
    all the uses of `owner` (each uses it from start to end without another in between),
    grown when a use needs more."""
    areas = cg.__dict__.setdefault("shared_scratch", {})
    offset, size = areas.get(owner, (0, 0))
    if nbytes > size:
        offset = -(-cg.local_bytes // 64) * 64
        cg.local_bytes = offset + nbytes
        areas[owner] = (offset, nbytes)
    return at(cg.b, cg.local, offset)


def column_loop(cg, n: int, body: Callable[[ir.Value], None]) -> None:
    """body(c) for the columns c = 0 .. n - 1 (i64): a loop LLVM keeps rolled (unrolled,
    the pieces of 32 or 64 columns were most of an AMX kernel's code)."""
    b = cg.b
    if n == 1:
        body(ir.Constant(I64, 0))
        return
    pre = b.block
    loop, done = cg.block("columns"), cg.block("columns.end")
    b.branch(loop)
    b.position_at_end(loop)
    c = b.phi(I64)
    c.add_incoming(ir.Constant(I64, 0), pre)
    body(c)
    nxt = b.add(c, ir.Constant(I64, 1))
    c.add_incoming(nxt, b.block)
    not_unrolled(b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I64, n)), loop, done))
    b.position_at_end(done)
