"""Intel Xe fast paths (target description ``pvc``): the coopmatrix instructions
``lower-simt`` keeps whole for a matrix unit, as DPAS
(``OpSubgroupMatrixMultiplyAccumulateINTEL``) and 2-D block IO
(``OpSubgroup2DBlockLoadINTEL`` / ``StoreINTEL``).

Coopmatrix values stay in the language's layout (``ttlc.ir.layout``: with I = min(rows,
S), lane p holds rows p rem I + k*I), which both fit without moving data between lanes:

* mul_add computes D^T = B^T A^T + C^T: DPAS's lanes run along the rows of A and C (M a
  multiple of 16), its M dimension along the columns of C (8 at a time).  Each lane then
  holds all it contributes: row m of A (DPAS's packed B operand), its rows of B (DPAS's A
  operand: with P = K/16 consecutive DPAS columns per lane, the DPAS column P*j + q is
  row j + 16*q of the chunk of B, a permutation of k that leaves the sum as it is) and
  its row m of C (``plan``).
* A column-major tile is a row-major 2-D block whose rows are the tile's columns: a
  block of width min(rows, S) elements and height cols gives lane p the elements of the
  language's layout, one block per S rows.  The block path needs the conditions of
  SPV_INTEL_2d_block_io (a 64-byte aligned base, a pitch of at least 64 bytes and a
  multiple of 8, the tile inside the pitch, an element coordinate multiple of 4 bytes),
  tested at run time where not known: where they fail, the elements are accessed one by
  one (the generic path), as for a local memref or a padded tile.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

from ...ir.core import Instruction
from ...ir.layout import MatrixLayout, layout_of
from ...ir.types import CoopMatrixType, ScalarType
from .arith import convert
from .builder import Enum, Lit
from .function import Kernel, MemVal, Static, Unsupported, storage_class
from .memory import address

#: DPAS lanes (its N) and the rows of C one instruction computes (its M)
LANES, ROWS = 16, 8
#: Matrix Multiply Accumulate Operands per operand type
_OPERANDS = {"f16": "MatrixAPackedFloat16INTEL|MatrixBPackedFloat16INTEL",
             "bf16": "MatrixAPackedBFloat16INTEL|MatrixBPackedBFloat16INTEL"}


@dataclass(frozen=True)
class Dpas:
    """One DPAS: registers of this work-item (in the language's layout) that make its
    operands.  ``a``: per row of DPAS's A (a column n of C), the registers of B packed
    into its 16 bits, lowest first; ``b``: per 32-bit word of DPAS's packed B, the
    registers of A packed into it, lowest first; ``c``: the registers of C (and D)."""

    k: int
    a: Tuple[Tuple[int, ...], ...]
    b: Tuple[Tuple[int, ...], ...]
    c: Tuple[int, ...]


def plan(a: CoopMatrixType, b: CoopMatrixType, c: CoopMatrixType, k: int, S: int) -> List[Dpas]:
    """The DPAS instructions of D = A B + C with k columns of A per instruction, each
    work-item contributing its registers of the language's layout (module docstring)."""
    bits = a.component.bits
    P, E = k // LANES, 32 // bits  # DPAS columns per lane; rows per 32-bit word
    la, lb, lc = (layout_of(t, S) for t in (a, b, c))

    def reg(lay: MatrixLayout, row: int, col: int) -> int:
        lane, register = lay.locate(row, col)
        assert lane == row % LANES, "the language's layout puts row r on lane r mod 16"
        return int(register)

    def pi(x: int) -> int:  # DPAS column -> row of B within the chunk
        return x // P + LANES * (x % P)

    out = []
    for i in range(0, c.rows, LANES):
        for n0 in range(0, c.cols, ROWS):
            for k0 in range(0, a.cols, k):
                out.append(Dpas(
                    k,
                    tuple(tuple(reg(lb, k0 + LANES * q, n) for q in range(P))
                          for n in range(n0, n0 + ROWS)),
                    tuple(tuple(reg(la, i, k0 + pi(E * w + e)) for e in range(E))
                          for w in range(k // E)),
                    tuple(reg(lc, i, n) for n in range(n0, n0 + ROWS))))
    return out


def _bits(k: Kernel, t: ScalarType, x: int) -> int:
    """The bits of a value of type t in memory, zero-extended to an i32."""
    mem = k.memory_type(t)
    narrow = k.m.type_int(t.bits)
    raw = k.to_memory(t, x)
    if mem != narrow:
        raw = k.op("Bitcast", narrow, raw)
    return raw if t.bits == 32 else k.op("UConvert", k.i32(), raw)


def _pack(k: Kernel, t: ScalarType, values: List[int], width: int) -> int:
    """values of type t packed into an integer of `width` bits, the first lowest."""
    i32 = k.i32()
    word = None
    for e, x in enumerate(values):
        part = _bits(k, t, x)
        if e:
            part = k.op("ShiftLeftLogical", i32, part, k.c32(e * t.bits))
        word = part if word is None else k.op("BitwiseOr", i32, word, part)
    return word if width == 32 else k.op("UConvert", k.m.type_int(width), word)


def emit_mul_add(k: Kernel, inst: Instruction):
    a, b, c = (inst.slots[s] for s in ("a", "b", "c"))
    ta, tb, tc = a.type, b.type, c.type
    td: CoopMatrixType = inst.results[0].type
    unit = k.target.matrix.mul_add(ta, tb, tc, k.S)
    if unit is None or k.S != LANES or ta.component.name not in _OPERANDS:
        raise Unsupported(inst, f"mul_add of {ta}, {tb}, {tc} (no DPAS instruction)")
    A, B, C = k.get(a), k.get(b), k.get(c)
    acc = k.scalar(tc.component)
    vec_a, vec_b = k.m.type_vector(k.m.type_int(16), ROWS), k.m.type_vector(k.i32(), ROWS)
    vec_c = k.m.type_vector(acc, ROWS)
    operands = Enum("MatrixMultiplyAccumulateOperands", _OPERANDS[ta.component.name])
    D = list(C)
    for d in plan(ta, tb, tc, unit.k, k.S):
        va = k.op("CompositeConstruct", vec_a,
                  *(_pack(k, tb.component, [B[r] for r in regs], 16) for regs in d.a))
        vb = k.op("CompositeConstruct", vec_b,
                  *(_pack(k, ta.component, [A[r] for r in regs], 32) for regs in d.b))
        vc = k.op("CompositeConstruct", vec_c, *(D[r] for r in d.c))
        r = k.op("SubgroupMatrixMultiplyAccumulateINTEL", vec_c, k.c32(d.k), va, vb, vc,
                 operands)
        for j, reg in enumerate(d.c):
            D[reg] = k.op("CompositeExtract", acc, r, Lit(j))
    return [convert(k, tc.component, td.component, x) for x in D]


# ---- 2-D block IO ------------------------------------------------------------------------------
def _blockable(k: Kernel, t: CoopMatrixType, m: MemVal) -> bool:
    """Static conditions of the block path: global memory, a real type of 1, 2 or 4 bytes,
    no padding in the layout."""
    size = t.component.bits // 8
    return (storage_class(m.type) == "CrossWorkgroup" and not t.component.is_complex
            and size in (1, 2, 4) and t.rows * t.cols % k.S == 0)


def _access(k: Kernel, inst: Instruction, t: CoopMatrixType, m: MemVal,
            block: Callable[[int, int, int, int], List[int]],
            generic: Callable[[], List[int]], types: List[int]) -> List[int]:
    """block(base, x, pitch, cols) on the block path where the run-time conditions hold,
    else generic(); the values both give (one OpPhi each)."""
    if not _blockable(k, t, m):
        return generic()
    size = t.component.bits // 8
    i64, i32, bt = k.i64(), k.i32(), k.m.type_bool()
    first = address(k, m, [inst.slots["x"], inst.slots["y"]])
    addr = k.op("ConvertPtrToU", i64, first)
    skew = k.op("BitwiseAnd", i64, addr, k.c64(63))
    pitch = k.ival(k.imul(m.stride[1], Static(size)))
    tests = [k.op("IEqual", bt, k.op("BitwiseAnd", i64, pitch, k.c64(7)), k.c64(0)),
             k.op("UGreaterThanEqual", bt, pitch, k.c64(64)),
             k.op("ULessThanEqual", bt, pitch, k.c64(1 << 24)),
             k.op("ULessThanEqual", bt, k.op("IAdd", i64, skew, k.c64(t.rows * size)), pitch)]
    if size < 4:
        tests.append(k.op("IEqual", bt, k.op("BitwiseAnd", i64, skew, k.c64(3)), k.c64(0)))
    ok = tests[0]
    for x in tests[1:]:
        ok = k.op("LogicalAnd", bt, ok, x)

    def fast():
        base = k.op("ConvertUToPtr", k.pointer(m.type), k.op("ISub", i64, addr, skew))
        x = k.op("UConvert", i32, k.op("UDiv", i64, skew, k.c64(size)))
        return block(base, x, k.op("UConvert", i32, pitch), k.c32(t.cols))

    return k.select(ok, fast, types, generic)


def block_shape(t: CoopMatrixType, S: int) -> Tuple[int, int, int]:
    """(width in elements, number of blocks, registers per block) of the block accesses
    of a tile: blocks of min(rows, S) of its rows, side by side."""
    width = min(t.rows, S)
    count = t.rows // width
    return width, count, layout_of(t, S).registers // count


def _blocks(k: Kernel, t: CoopMatrixType, x: int, data: int,
            op: Callable[[int, int, int], None]) -> None:
    """op(coordinate, destination/source pointer, width id) per block of the tile, its
    registers consecutive in `data` (a Function array)."""
    width, count, per_block = block_shape(t, k.S)
    elem = k.m.type_pointer("Function", k.memory_type(t.component))
    i32 = k.i32()
    for j in range(count):
        xj = x if j == 0 else k.op("IAdd", i32, x, k.c32(j * width))
        coord = k.op("CompositeConstruct", k.m.type_vector(i32, 2), xj, k.c32(0))
        op(coord, k.op("InBoundsAccessChain", elem, data, k.c64(j * per_block)), k.c32(width))


def _generic(k: Kernel, inst: Instruction, t: CoopMatrixType, m: MemVal,
             each: Callable[[int, int, bool, int], object]) -> List[object]:
    """each(register, pointer to its element, whether it may be padding, its column) over
    the registers of the language's layout: the elements one by one."""
    lay = layout_of(t, k.S)
    lane = k.subgroup_lane()
    out = []
    for v in range(lay.registers):
        coords = k.entry_index(t, v, lane)
        off = Static(0)
        for s, c, stride in zip("xy", coords, m.stride):
            off = k.iadd(off, k.imul(k.iadd(k.index(inst.slots[s]), c), stride))
        ptr = k.op("PtrAccessChain", k.pointer(m.type), m.ptr, k.ival(off))
        out.append(each(v, ptr, lay.padded(v), coords[1]))
    return out


def _guarded(k: Kernel, t: CoopMatrixType, padded: bool, col: int,
             body: Callable[[], List[int]], otherwise: List[int]) -> List[int]:
    """body() where the register holds a column of the matrix (always unless padded)."""
    if not padded:
        return body()
    inside = k.op("ULessThan", k.m.type_bool(), col, k.c64(t.cols))
    return k.select(inside, body, [k.scalar(t.component)] * len(otherwise), otherwise)


def emit_coop_load(k: Kernel, inst: Instruction):
    t: CoopMatrixType = inst.results[0].type
    m: MemVal = k.get(inst.slots["tensor"])
    R = layout_of(t, k.S).registers
    mem = k.memory_type(t.component)
    zero = k.number(t.component, 0)

    def block(base, x, pitch, cols):
        data = k.variable(k.m.type_array(mem, R))
        _blocks(k, t, x, data, lambda coord, dst, w: k.op(
            "Subgroup2DBlockLoadINTEL", None, k.c32(t.component.bits // 8), w, cols, k.c32(1),
            base, pitch, cols, pitch, coord, dst))
        elem = k.m.type_pointer("Function", mem)
        return [k.from_memory(t.component, k.op(
            "Load", mem, k.op("InBoundsAccessChain", elem, data, k.c64(v)))) for v in range(R)]

    def generic():
        return _generic(k, inst, t, m, lambda v, ptr, padded, col: _guarded(
            k, t, padded, col, lambda: [k.from_memory(t.component, k.op("Load", mem, ptr))],
            [zero])[0])

    return _access(k, inst, t, m, block, generic, [k.scalar(t.component)] * R)


def emit_coop_store(k: Kernel, inst: Instruction):
    a = inst.slots["value"]
    t: CoopMatrixType = a.type
    m: MemVal = k.get(inst.slots["tensor"])
    values = k.get(a)
    mem = k.memory_type(t.component)

    def block(base, x, pitch, cols):
        data = k.variable(k.m.type_array(mem, len(values)))
        elem = k.m.type_pointer("Function", mem)
        for v, value in enumerate(values):
            k.op("Store", None, k.op("InBoundsAccessChain", elem, data, k.c64(v)),
                 k.to_memory(t.component, value))
        _blocks(k, t, x, data, lambda coord, src, w: k.op(
            "Subgroup2DBlockStoreINTEL", None, k.c32(t.component.bits // 8), w, cols, k.c32(1),
            src, base, pitch, cols, pitch, coord))
        return []

    def generic():
        def store(v, ptr):
            k.op("Store", None, ptr, k.to_memory(t.component, values[v]))
            return []
        _generic(k, inst, t, m, lambda v, ptr, padded, col: _guarded(
            k, t, padded, col, lambda: store(v, ptr), []))
        return []

    _access(k, inst, t, m, block, generic, [])
    return None


EMITTERS: Dict[str, Callable] = {
    "cooperative_matrix_mul_add": emit_mul_add,
    "cooperative_matrix_load": emit_coop_load,
    "cooperative_matrix_store": emit_coop_store,
}
