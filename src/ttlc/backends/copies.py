"""What the targets that run on device copies of host arrays (``opencl``, ``cuda``) share:
the stretches of host memory a launch's arrays cover, which arguments a kernel writes
(copied back after it) and the check that those are writeable.

Arrays that overlap (views of one array) are one stretch, copied as one, so that a
write through one view is seen through the others, as on the host.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..analysis.aliasing import UNKNOWN, Aliasing
from ..analysis.effects import ATOMIC_WRITE, WRITE, accesses
from ..diagnostics import KernelError
from ..ir.core import Function, Instruction, Program
from ..ir.types import GroupType, MemrefType
from ..runtime.values import GroupValue, Memory, MemRef


def stretches(buffers: Sequence) -> Tuple[List[Optional[Tuple[int, int]]], List[Tuple[int, int]]]:
    """Per buffer (None: none or empty) its (address, bytes), and the stretches [start,
    end) of host memory they cover, overlapping buffers merged, in address order."""
    spans = [(b.__array_interface__["data"][0], b.nbytes) if b is not None and b.nbytes
             else None for b in buffers]
    merged: List[List[int]] = []
    for start, n in sorted(s for s in spans if s is not None):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], start + n)
        else:
            merged.append([start, start + n])
    return spans, [(start, end) for start, end in merged]


def written(func: Function) -> Dict[int, Instruction]:
    """Argument index -> the first instruction that writes its memory (every memref and
    group argument when a written memref's origin is unknown)."""
    aliasing = Aliasing(func)
    index = {a.value: i for i, a in enumerate(func.args)}
    out: Dict[int, Instruction] = {}
    for inst in func.body.walk():
        for v, kind in accesses(inst):
            if kind not in (WRITE, ATOMIC_WRITE):
                continue
            for root in aliasing.roots(v):
                hits = ([i for i, a in enumerate(func.args)
                         if isinstance(a.value.type, (MemrefType, GroupType))]
                        if root is UNKNOWN else [index[root]] if root in index else [])
                for i in hits:
                    out.setdefault(i, inst)
    return out


def members(v) -> List[MemRef]:
    """The memrefs of a marshalled argument (none for a number)."""
    return v.members if isinstance(v, GroupValue) else [v] if isinstance(v, MemRef) else []


def check_writable(program: Program, func: Function, writes: Dict[int, Instruction], values,
                   memory: Memory) -> None:
    """A kernel that writes an argument needs writeable arrays (checked before running)."""
    for index, inst in writes.items():
        for i, m in enumerate(members(values[index])):
            if int(m.buffer) >= 0 and not memory.buffers[int(m.buffer)].flags.writeable:
                member = f", member {i}" if isinstance(values[index], GroupValue) else ""
                raise KernelError(f"{program.filename}:{inst.loc}: kernel @{func.name}: "
                                  f"write to a read-only array (argument {index}, "
                                  f"%{func.args[index].value.name}{member}, is not writeable)")
