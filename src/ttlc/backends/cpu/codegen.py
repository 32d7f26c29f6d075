"""LLVM IR for the CPU: one table from opcode to an emitter, like the interpreter's.

This module composes the table (``EMITTERS``) from the tables of the modules that emit
each kind of instruction, and generates a program's module (``generate``):

* ``values``: the LLVM types and the representation of values (``Cplx``, ``Lanes``,
  ``MemVal``, ``CoopVal``);
* ``function``: ``FunctionCodegen``, the state of one kernel and the walk over its regions;
  ``phases``: a parallel region run subgroup after subgroup, split at its barriers;
* ``arith`` (numbers), ``memory`` (elements and memref descriptors), ``control`` (parallel,
  for, if, barrier), ``subgroup`` (scans, reductions, broadcasts), ``coop`` (coopmatrices),
  ``coop_memory`` (their loads, stores and atomics) and ``mul_add`` (which unit computes
  a coopmatrix product: ``amx``, ``dpbf16`` or FMAs).

Each imports only the modules below it; none imports this one.

Execution model
---------------
One call of a generated kernel runs a contiguous range of work-groups on one thread.
Inside a work-group, the work-items are the lanes of SIMD vectors executed in lockstep:

* a *uniform* value (every value of a collective region, and values of SPMD regions that
  do not depend on the work-item) is an LLVM scalar; a *varying* value is an LLVM vector
  of W lanes, W the work-group size (``work_group_size[0] * work_group_size[1]``, lane
  ``x + work_group_size[0] * y``; subgroup ``lane // subgroup_size``).  Which values vary is
  decided before code generation (``ttlc.analysis.uniformity``) so that loop-carried
  values and the results of ``if`` get one representation; uniform values are broadcast
  on use;
* divergent control flow runs under a lane mask (``<W x i1>``): both sides of an ``if``
  run, each when any of its lanes is active, and merge their results with ``select``; a
  ``for`` with varying bounds loops while any lane is active and merges loop-carried
  values with ``select``.  Memory accesses are masked (``llvm.masked.*``); a varying
  index is a gather/scatter, or a plain vector load/store when the lanes turn out to
  access consecutive elements (checked at run time, folded away when LLVM can prove it);
* ``barrier`` costs nothing: the lanes are always in step;
* with more than 4 subgroups (unchecked code), a ``parallel`` region is one subgroup's
  code (W = the subgroup size) run subgroup after subgroup, and a barrier ends one such
  loop and begins the next (``phases``), so that code does not grow with the work-group;
* atomics of an SPMD region run one lane after the other, in lane order, each a real
  atomic instruction (other work-groups run on other threads);
* ``alloca`` memory lives in a per-thread scratch block given by the runtime (offsets
  are fixed at compile time), not allocated per work-group;
* integers that are known per lane up to a uniform term (work-item ids, the variables of
  loops over them) are kept as ``Lanes`` (a scalar base plus constant lane offsets), so
  consecutive accesses are plain vector loads and stores without any run-time check;
* coopmatrix values hold each subgroup's whole matrix as a vector (``coop.py``).

Numbers: integers are LLVM integers (``index`` is i64) with wrap-around arithmetic,
C division with a zero divisor giving 0, shift amounts modulo the width; ``f16`` is
``half``; ``bf16`` is kept as its 16 bits (``i16``) and computed in f32 with one
round-to-nearest-even per instruction, as the interpreter does; complex numbers are
(re, im) pairs of values, stored interleaved in memory.  Float to integer casts use
``llvm.fptosi.sat`` (truncate, saturate, NaN to 0); float min/max are
``llvm.minnum/maxnum`` (the other operand when one is NaN).

Kernel ABI
----------
Each kernel ``@name`` becomes ``i32 @ttlc.<name>(ptr args, i64 first, i64 end,
ptr local, ptr err)`` and runs the work-groups with linear ids ``first <= id < end``
(``id = x + nx * (y + ny * z)``).  ``args`` is an array of 8-byte slots (see
``abi.arg_layout``): slots 0-2 hold the grid size ``nx, ny, nz``, then per argument

* memref of order n: the data pointer (the first element, null for ``None``), the n
  mode sizes, the n strides (in elements);
* group of order n: a pointer to the member data pointers (group offset applied), a
  pointer to an int64 array with ``2 n`` entries per member (sizes, then strides), the
  number of members, and 1/0 for associated;
* scalar: its value in the slot's first bytes (``bool`` as one byte, ``bf16``/``f16``
  as their 16 bits, ``c32`` as two floats); ``c64`` takes two slots.

``local`` points to ``local_bytes`` bytes of scratch memory (64-byte aligned) for the
kernel's ``alloca``s.  The result is 0, or 1 when checked code found an error: ``err``
(16 int64) then holds the error code, the instruction, the lane and details, which the
runtime turns into a KernelError (codes ``runtime.findings.E_*``).
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

from llvmlite import ir

from ...diagnostics import CompileError, Diagnostic
from ...ir.core import Instruction, Program
from ...ir.ops import FOREACH_OPS, OPS, compose_tables
from ...ir.types import CoopMatrixType
from . import (amx, arith, columns, control, coop, coop_items, coop_memory, memory, mul_add,
               subgroup)
from .abi import KernelInfo
from .function import FunctionCodegen
from .values import Unsupported

# ==== the emitter table ==========================================================================
#: opcodes the "lower" pipeline replaces before code generation (``module.lower``): the
#: BLAS instructions and the foreach loops
LOWERED = frozenset(name for name, d in OPS.items() if d.blas is not None) | set(FOREACH_OPS)


def _on_matrices(numbers: Callable, matrices: Callable) -> Callable:
    """The emitter of an opcode with a coopmatrix form: ``matrices`` when the result is a
    coopmatrix, else ``numbers``."""
    def emit(cg: FunctionCodegen, inst: Instruction):
        if isinstance(inst.results[0].type, CoopMatrixType):
            return matrices(cg, inst)
        return numbers(cg, inst)
    return emit


def _through_amx(table: Dict[str, Callable]) -> None:
    """Loads and updates that leave matrices where AMX products want them and put them:
    a matrix only AMX products use stays in memory, where they read it
    (``amx.operand_in_memory``); a result held in AMX tiles stays there through a cast to
    its store (``amx.TileResult``); and an AMX product's result that is only updated and
    stored, with what is added to it, is worked on column by column in memory
    (``columns.EMITTERS``), never as a vector of the whole matrix."""
    def first(*emitters: Callable) -> Callable:
        def emit(cg: FunctionCodegen, inst: Instruction):
            for fn in emitters[:-1]:
                out = fn(cg, inst)
                if out is not None:
                    return out
            return emitters[-1](cg, inst)
        return emit

    def tile_result_cast(cg: FunctionCodegen, inst: Instruction):
        held = cg.raw(inst.slots["a"])
        return held.cast(cg, inst.results[0].type) if isinstance(held, amx.TileResult) else None

    table["cooperative_matrix_load"] = first(amx.operand_in_memory, columns.EMITTERS[
        "cooperative_matrix_load"], table["cooperative_matrix_load"])
    table["cast"] = first(tile_result_cast, columns.EMITTERS["cast"], table["cast"])
    for op, fn in columns.EMITTERS.items():
        if op not in ("cooperative_matrix_load", "cast"):
            table[op] = first(fn, table[op])


def _table() -> Dict[str, Callable]:
    table = compose_tables(arith.EMITTERS, memory.EMITTERS, control.EMITTERS, subgroup.EMITTERS,
                     coop.EMITTERS, coop_memory.EMITTERS, coop_items.EMITTERS,
                     mul_add.EMITTERS)
    for op, fn in coop.ELEMENTWISE.items():
        table[op] = _on_matrices(table[op], fn)
    _through_amx(table)
    missing = set(OPS) - set(table) - LOWERED - {"yield"}
    if missing:
        raise AssertionError(f"no emitter for {', '.join(sorted(missing))}")
    return table


#: opcode -> emitter (cg, instruction) -> its result(s): every instruction of a lowered
#: program but ``yield`` (which ``FunctionCodegen.emit_region`` handles)
EMITTERS: Dict[str, Callable] = _table()

#: the loop carriers of uniform loops (``FunctionCodegen.loop_carriers``)
LOOP_CARRIERS: Tuple[Callable, ...] = (amx.claim_loop, mul_add.claim_loop)


# ==== the module =================================================================================
def symbol_of(name: str) -> str:
    return "ttlc." + name


def generate(program: Program, checked: bool) -> Tuple[str, Dict[str, KernelInfo]]:
    """LLVM IR text for every kernel of a (lowered) program, and how to call them."""
    from . import jit

    module = ir.Module(name="ttlc")
    module.triple = jit.triple()
    module.data_layout = jit.data_layout()
    kernels: Dict[str, KernelInfo] = {}
    defined = []
    for func in program.functions:
        cg = FunctionCodegen(module, func, symbol_of(func.name), checked, EMITTERS,
                             LOOP_CARRIERS)
        try:
            kernels[func.name] = cg.build()
            defined.append(cg.fn)
        except Unsupported as e:
            what = e.args[0]
            if isinstance(what, Instruction):
                raise CompileError([Diagnostic(what.loc, "not supported on target cpu yet: "
                                               f"{what.opcode}")],
                                   program.source, program.filename) from None
            loc = cg.current.loc if cg.current is not None else func.loc
            raise CompileError([Diagnostic(loc, f"not supported on target cpu yet: {what}")],
                               program.source, program.filename) from None
    text = str(module)
    attrs = jit.function_attributes()
    if attrs:
        for fn in defined:  # the kernels' define lines (a search of the whole text was slow)
            line = []
            fn.descr_prototype(line)
            text = text.replace(line[0], line[0].rstrip("\n") + " #0\n", 1)
        text += "\nattributes #0 = { nounwind " + " ".join(attrs) + " }\n"
    return text, kernels
