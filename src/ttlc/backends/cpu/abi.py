"""The kernel ABI shared by the code generator and the runtime (see ``codegen``'s docstring).

Kept apart from ``codegen`` so that loading cached code (``module.CpuModule`` on a cache
hit) and launching kernels need neither the code generator nor llvmlite's IR builder.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ...ir.core import Function
from ...ir.types import GroupType, MemrefType, ScalarType
# the error record of checked code (``runtime.findings``, shared by every compiled target)
from ...runtime.findings import InstRef
from ...target.config import ExecConfig

#: slots 0-2 of the slot array: the grid size
HEADER_SLOTS = 3


# ---- argument layout ---------------------------------------------------------------------
@dataclass
class ArgSlots:
    kind: str  # "memref", "group" or "scalar"
    first: int
    count: int


def arg_layout(func: Function) -> Tuple[List[ArgSlots], int]:
    """Where each argument lives in the slot array; and the number of slots."""
    out, k = [], HEADER_SLOTS
    for a in func.args:
        t = a.value.type
        if isinstance(t, MemrefType):
            n = 1 + 2 * t.order
            out.append(ArgSlots("memref", k, n))
        elif isinstance(t, GroupType):
            n = 4
            out.append(ArgSlots("group", k, n))
        else:
            n = 2 if isinstance(t, ScalarType) and t.name == "c64" else 1
            out.append(ArgSlots("scalar", k, n))
        k += n
    return out, k


@dataclass
class KernelInfo:
    """How to call one compiled kernel (stored next to its code in the disk cache)."""

    name: str
    symbol: str
    config: ExecConfig
    slots: List[ArgSlots]
    num_slots: int
    local_bytes: int
    #: instruction table for error messages of checked code
    instructions: List[InstRef] = field(default_factory=list)
    #: argument index -> first instruction that writes its memory
    writes: Dict[int, InstRef] = field(default_factory=dict)
    #: the allocas of local memory, for messages: (offset in the scratch block, bytes,
    #: element size, name or None)
    locals: List[Tuple[int, int, int, Optional[str]]] = field(default_factory=list)

    def to_json(self) -> dict:
        loc = lambda r: [r.opcode, r.loc.line, r.loc.col, r.loc.end_line, r.loc.end_col,  # noqa: E731
                         r.shape_rule]
        return {"name": self.name, "symbol": self.symbol,
                "config": [self.config.subgroup_size, list(self.config.work_group_size)],
                "num_slots": self.num_slots, "local_bytes": self.local_bytes,
                "instructions": [loc(r) for r in self.instructions],
                "writes": {str(k): loc(r) for k, r in self.writes.items()},
                "locals": [list(x) for x in self.locals]}

    @staticmethod
    def from_json(d: dict, func: Function) -> "KernelInfo":
        from ...ir.core import Location

        def ref(x):
            rule = x[5]
            return InstRef(x[0], Location(*x[1:5]),
                           None if rule is None else (*rule[:3], tuple(rule[3])))

        slots, _ = arg_layout(func)
        sgs, wgs = d["config"]
        return KernelInfo(d["name"], d["symbol"], ExecConfig(sgs, tuple(wgs)), slots,
                          d["num_slots"], d["local_bytes"], [ref(x) for x in d["instructions"]],
                          {int(k): ref(x) for k, x in d["writes"].items()},
                          [tuple(x) for x in d["locals"]])
