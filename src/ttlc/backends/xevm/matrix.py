"""What pvc's matrix unit executes (``ttlc.target.XE_DPAS``; ``lower-coopmatrix`` keeps
these instructions whole and lowers the rest to per-work-item code): 2-D block loads,
stores and prefetches, and the DPAS multiply-add.

Both work in the language's layout of a subgroup of 16: lane p holds rows p, p + 16, ...
of a coopmatrix, component c + N k holds column c of row block k (``ir.layout``).

* A block access of 16 rows (one per lane; the contiguous mode of column-major memory)
  by h columns gives each lane h elements, one per column, and ``v_blocks`` such blocks
  of consecutive rows follow each other in the result: exactly the language's
  components.  An M x N coopmatrix is a grid of them: columns in powers of two up to 32
  (the block heights ``xevm`` allows), row blocks in groups of up to 64 bytes (v_blocks
  4, 2 or 1 for 8-, 16- and 32-bit elements) where each block fills whole 64-byte
  registers, else one at a time; stores take one row block of up to 8 columns at a time.
  A transposed load (``.t``, 32-bit elements) reads 8 of the memref's rows by 16 of its
  columns with ``transpose=true``: lane p gets the tile's row p, one component per
  tile column, as before.
  The block's surface is the memref: its pointer, its rows in bytes (width), its columns
  (height) and its column stride in bytes (pitch); the position is the tile's (x, y).
* DPAS computes D^T = B^T A^T + C^T, which makes its operands the language's components:
  ``xevm.mma``'s a is up to 8 columns of B (its 16 rows across the lanes), its b is 16
  columns of A packed in pairs into i32 (the "VNNI" packing: a bitcast of the
  work-item's consecutive components), its c and d up to 8 columns of C and D.  Shape
  ``m`` = the columns taken (8, 4, 2 or 1), ``n`` = 16 rows, ``k`` = 16.
"""
from __future__ import annotations

from typing import Callable, Dict, List

from ...ir.core import Instruction
from ...ir.types import F32, CoopMatrixType, ScalarType
from .arith import convert
from .kernel import Kernel, MemVal

#: the subgroup size both take (``BlockIO.lanes``, the rows ``m`` of XE_DPAS's instructions)
LANES = 16


def pieces(n: int, limit: int) -> List[tuple]:
    """(offset, size) of n split into powers of two of at most limit, largest first."""
    out, at = [], 0
    while at < n:
        size = min(limit, 1 << ((n - at).bit_length() - 1))
        out.append((at, size))
        at += size
    return out


def c32(k: Kernel, value: int) -> str:
    return k.op(f"arith.constant {value} : i32")


def i32(k: Kernel, x) -> str:
    """An i64 size or position (int or SSA name) as i32, as block operations take them."""
    return c32(k, x) if isinstance(x, int) else k.op(f"arith.trunci {x} : i64 to i32")


def bits_type(t: ScalarType) -> str:
    return f"i{t.bits}"


def to_bits(k: Kernel, t: ScalarType, x: str) -> str:
    return k.op(f"arith.bitcast {x} : {k.type(t)} to {bits_type(t)}") if t.is_float else x


def from_bits(k: Kernel, t: ScalarType, x: str) -> str:
    return k.op(f"arith.bitcast {x} : {bits_type(t)} to {k.type(t)}") if t.is_float else x


def vector(k: Kernel, elems: List[str], t: str) -> str:
    """A vector<n x t> of the given elements."""
    vt = f"vector<{len(elems)}x{t}>"
    v = k.op(f"llvm.mlir.poison : {vt}")
    for j, x in enumerate(elems):
        v = k.op(f"llvm.insertelement {x}, {v}[{c32(k, j)} : i32] : {vt}")
    return v


def elements(k: Kernel, v: str, n: int, t: str) -> List[str]:
    vt = f"vector<{n}x{t}>"
    return [k.op(f"llvm.extractelement {v}[{c32(k, j)} : i32] : {vt}") for j in range(n)]


# ---- 2-D block IO -------------------------------------------------------------------------------
def blocks(k: Kernel, inst: Instruction, rows: int, cols: int, v_blocks: int, max_h: int,
           access: Callable[[str, int, int, int, int], None]) -> None:
    """Call access(operands, first row block, row blocks, first column, columns) for
    each block access of a rows x cols tile at the instruction's position (``.t``: its
    columns along the memref's rows, in pieces of the transposed width);
    ``operands`` are the six operands of the xevm block operation."""
    m: MemVal = k.get(inst.slots["tensor"])
    t = m.type.element
    e = t.bits // 8
    width = i32(k, k.imul(m.shape[0], e))
    height = i32(k, m.shape[1])
    pitch = i32(k, k.imul(m.stride[1], e))
    x, y = k.index(inst.slots["x"]), k.index(inst.slots["y"])
    io = k.target.matrix.block_io
    surface = f"{m.ptr}, {width}, {height}, {pitch}"
    if inst.modifiers.get("ta") == "t":
        for c in range(0, cols, io.transpose_width):
            for rb in range(rows // LANES):
                at = f"{i32(k, k.iadd(x, c))}, {i32(k, k.iadd(y, rb * LANES))}"
                access(f"{surface}, {at}", rb, 1, c, io.transpose_width)
        return
    for c, h in pieces(cols, max_h):
        yi = i32(k, k.iadd(y, c))
        # blocks side by side only where each fills whole registers (64 bytes)
        limit = min(v_blocks, io.max_width_bytes // (LANES * e)) if h * LANES * e % 64 == 0 \
            else 1
        for rb, nb in pieces(rows // LANES, limit):
            access(f"{surface}, {i32(k, k.iadd(x, rb * LANES))}, {yi}", rb, nb, c, h)


def _shape(t: ScalarType, h: int, nb: int = 0, transposed: bool = False) -> str:
    """The attributes of a block of 16 rows by h columns (transposed: the memref's
    rows are the h columns, 16 of its columns the rows)."""
    w, h = (h, LANES) if transposed else (LANES, h)
    attrs = f"elem_size_in_bits={t.bits} : i32, tile_width={w} : i32, tile_height={h} : i32"
    return attrs + (f", v_blocks={nb} : i32" if nb else "")


_OPERANDS = "(!llvm.ptr<1>, i32, i32, i32, i32, i32"


def emit_load(k: Kernel, inst: Instruction):
    t: CoopMatrixType = inst.results[0].type
    c, N = t.component, t.cols
    out: List[str] = [None] * k.components(t)
    transposed = inst.modifiers.get("ta") == "t"

    def load(operands: str, rb: int, nb: int, c0: int, h: int) -> None:
        r = k.op(f"xevm.blockload2d {operands} <{{{_shape(c, h, nb, transposed)}, "
                 f"transpose={str(transposed).lower()}, pack_register=false}}> : "
                 f"{_OPERANDS}) -> vector<{nb * h}x{bits_type(c)}>")
        for j, x in enumerate(elements(k, r, nb * h, bits_type(c))):
            out[c0 + j % h + N * (rb + j // h)] = from_bits(k, c, x)

    blocks(k, inst, t.rows, N, 4, k.target.matrix.block_io.max_height, load)
    return out


def emit_store(k: Kernel, inst: Instruction):
    t: CoopMatrixType = inst.slots["value"].type
    c, N = t.component, t.cols
    value = k.get(inst.slots["value"])

    def store(operands: str, rb: int, nb: int, c0: int, h: int) -> None:
        v = vector(k, [to_bits(k, c, value[c0 + j + N * rb]) for j in range(h)], bits_type(c))
        k.line(f"xevm.blockstore2d {operands}, {v} <{{{_shape(c, h)}}}> : {_OPERANDS}, "
               f"vector<{h}x{bits_type(c)}>)")

    blocks(k, inst, t.rows, N, 1, k.target.matrix.block_io.max_store_height, store)


def emit_prefetch(k: Kernel, inst: Instruction):
    c = inst.slots["tensor"].type.element

    def prefetch(operands: str, rb: int, nb: int, c0: int, h: int) -> None:
        k.line(f"xevm.blockprefetch2d {operands} <{{{_shape(c, h, nb)}}}> : {_OPERANDS})")

    blocks(k, inst, inst.attrs["rows"], inst.attrs["cols"], 4,
           k.target.matrix.block_io.max_height, prefetch)


# ---- DPAS ---------------------------------------------------------------------------------------
def emit_mul_add(k: Kernel, inst: Instruction):
    """D = A B + C as xevm.mma over 16-row blocks of A, C and D, 16-deep slices of the
    inner mode and up to 8 columns of C and D at a time (module docstring)."""
    A, B, C = (k.get(inst.slots[s]) for s in ("a", "b", "c"))
    ta, tb = inst.slots["a"].type, inst.slots["b"].type
    td: CoopMatrixType = inst.results[0].type
    ab = ta.component.name
    K, N = ta.cols, td.cols
    unit = max(i.n for i in k.target.matrix.instructions)
    out: List[str] = [None] * k.components(td)
    for rb in range(ta.rows // LANES):
        # b operands: A's row block rb, 16 columns per slice, pairs packed into i32
        packed = []
        for kb in range(K // LANES):
            half = vector(k, [A[kb * LANES + i + K * rb] for i in range(LANES)], ab)
            packed.append(k.op(f"llvm.bitcast {half} : vector<{LANES}x{ab}> to "
                               f"vector<{LANES // 2}xi32>"))
        for c0, n in pieces(N, unit):
            acc = vector(k, [C[c0 + j + N * rb] for j in range(n)], "f32")
            for kb in range(K // LANES):
                a = vector(k, [to_bits(k, tb.component, B[c0 + j + N * kb]) for j in range(n)],
                           "i16")
                acc = k.op(f"xevm.mma {a}, {packed[kb]}, {acc} {{shape=<m={n}, n={LANES}, "
                           f"k={LANES}>, types=<d=f32, a={ab}, b={ab}, c=f32>}} : "
                           f"(vector<{n}xi16>, vector<{LANES // 2}xi32>, vector<{n}xf32>) -> "
                           f"vector<{n}xf32>")
            for j, x in enumerate(elements(k, acc, n, "f32")):
                out[c0 + j + N * rb] = convert(k, F32, td.component, x)
    return out


EMITTERS: Dict[str, Callable] = {
    "cooperative_matrix_load": emit_load,
    "cooperative_matrix_store": emit_store,
    "cooperative_matrix_prefetch": emit_prefetch,
    "cooperative_matrix_mul_add": emit_mul_add,
}
