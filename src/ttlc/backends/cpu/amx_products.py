"""Which cooperative_matrix_mul_add products run on AMX tiles: the 16-bit operand types
the CPU multiplies there (``PRODUCTS``, ``usable``).  Below ``columns`` and ``amx``, which
both ask it (``columns.web`` follows a value into AMX products)."""
from __future__ import annotations

from ...ir.core import Instruction
from . import jit


#: operand component -> the tile product multiplying pairs of such values into f32 sums,
#: and the CPU feature it needs (AMX-BF16: Sapphire Rapids; AMX-FP16: Granite Rapids)
PRODUCTS = {"bf16": ("llvm.x86.tdpbf16ps", "amx-bf16"),
            "f16": ("llvm.x86.tdpfp16ps", "amx-fp16")}


def usable(operands: str) -> bool:
    """AMX multiplies 16-bit operands of this type here (``jit.amx_usable``: the tiles
    and the process's permission; the type's product among the CPU's features)."""
    return (operands in PRODUCTS and jit.amx_usable()
            and (jit.EMULATE_AMX or jit.has_feature(PRODUCTS[operands][1])))


def eligible(a_type: str, b_type: str, acc_type: str) -> bool:
    """mul_add with these component types runs on AMX (bf16 x bf16 or f16 x f16
    accumulated in f32, where the CPU has that product)."""
    return a_type == b_type and acc_type == "f32" and usable(a_type)


def runs_on_amx(inst: Instruction) -> bool:
    """The cooperative_matrix_mul_add `inst` runs on AMX (``eligible``)."""
    a, b_, c = (inst.slots[k].type for k in ("a", "b", "c"))
    return eligible(a.component.name, b_.component.name, c.component.name)
