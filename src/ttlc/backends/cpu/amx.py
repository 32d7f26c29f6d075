"""bf16 cooperative_matrix_mul_add on Intel AMX tiles.

Where the CPU has AMX-BF16 (Sapphire Rapids and later) and Linux grants the process the
tile-data state, ``D = A B + C`` with bf16 A and B and an f32 accumulator runs on
``tdpbf16ps``: 16 x 16 f32 accumulator tiles, each step a 16 x 32 by 32 x 16 product.

A coopmatrix is a column-major vector (``coop.py``); the tile instructions want rows, so
the product is computed transposed, ``C^T += B^T A^T``:

* ``C^T`` (N x M, row-major) is C's own column-major storage: tile (n, m) is 16 rows of
  16 floats, row stride M;
* ``B^T`` (N x K, row-major) is B's column-major storage: tile (n, k) is 16 rows of 32
  bf16 values, row stride K;
* ``A^T`` (K x M) must be in the "VNNI" pair layout, row k2 holding
  ``A[m, 2 k2], A[m, 2 k2 + 1]`` for each m: two columns of A interleaved per row.

The operands go through the kernel's per-thread scratch memory (where alloca lives),
padded with zeros to multiples of 16 (M, N) and 32 (K); the padding adds nothing to the
products.  Tiles 0-3 hold up to 2 x 2 accumulator tiles, 4-5 and 6-7 the operand tiles
of one k step.  The tile configuration is loaded once per kernel call and released
before the kernel returns.  The results agree with the vector path up to
the accumulation order (pairs of products are added before accumulating) and AMX's
handling of denormals (flushed to zero), which is within the floating-point tolerance
the interpreter comparison allows for reassociation.

``TTLC_AMX=0`` disables the path (the vector FMA code is used instead);
``jit.amx_usable`` decides, and requests the process's tile-data permission.
"""
from __future__ import annotations

from typing import List

from llvmlite import ir

from . import jit
from .codegen import F32, I8, I16, I32, I64, PTR, lt_size
from .coop import concat

TILE_ROWS = 16
TILE_BYTES = 64  # bytes of one tile row
K_STEP = 32  # bf16 values of one tile row
def eligible(a_type: str, b_type: str, acc_type: str) -> bool:
    """mul_add with these component types runs on AMX (bf16 x bf16 accumulated in f32)."""
    return a_type == "bf16" and b_type == "bf16" and acc_type == "f32" and jit.amx_usable()


def _ceil(x: int, m: int) -> int:
    return -(-x // m) * m


def _at(b: ir.IRBuilder, ptr: ir.Value, byte_offset: int) -> ir.Value:
    return b.gep(ptr, [ir.Constant(I64, byte_offset)], source_etype=I8)


def _column(b: ir.IRBuilder, src: ir.Value, elem: ir.Type, c: int, rows: int,
            length: int) -> ir.Value:
    """Column c of the column-major matrix with ``rows`` rows at src, zero-extended to
    ``length`` components."""
    size = lt_size(elem)
    col = b.load(_at(b, src, c * rows * size), align=size, typ=ir.VectorType(elem, rows))
    if rows == length:
        return col
    idx = [r if r < rows else rows for r in range(length)]
    return b.shuffle_vector(col, ir.Constant(col.type, None),
                            ir.Constant(ir.VectorType(I32, length), idx))


def _store_padded(b: ir.IRBuilder, v: ir.Value, rows: int, cols: int, prows: int,
                  pcols: int, dst: ir.Value, tmp: ir.Value) -> None:
    """Store the column-major rows x cols vector v as a prows x pcols matrix (zeros
    around it) at dst, through tmp when it needs padding.  Matrices are moved with
    whole-vector stores and column loads: shuffles of a whole 64 x 64 matrix would take
    LLVM seconds to compile."""
    elem = v.type.element
    size = lt_size(elem)
    if (rows, cols) == (prows, pcols):
        b.store(v, dst, align=64)
        return
    b.store(v, tmp, align=64)
    for c in range(pcols):
        column = (_column(b, tmp, elem, c, rows, prows) if c < cols
                  else ir.Constant(ir.VectorType(elem, prows), None))
        b.store(column, _at(b, dst, c * prows * size), align=4)


def _store_vnni(b: ir.IRBuilder, a: ir.Value, M: int, K: int, Mp: int, Kp: int,
                dst: ir.Value, tmp: ir.Value) -> None:
    """Store A (M x K column-major bf16 bits) as K/2 rows of pairs at dst: row k2 holds
    A[m, 2 k2], A[m, 2 k2 + 1] for m < Mp (zeros outside A).  tmp holds A meanwhile."""
    b.store(a, tmp, align=64)
    pair = [m // 2 + (m % 2) * Mp for m in range(2 * Mp)]  # interleave two columns
    for k2 in range(Kp // 2):
        cols = [_column(b, tmp, I16, k, M, Mp) if k < K
                else ir.Constant(ir.VectorType(I16, Mp), None) for k in (2 * k2, 2 * k2 + 1)]
        row = b.shuffle_vector(cols[0], cols[1], ir.Constant(ir.VectorType(I32, 2 * Mp), pair))
        b.store(row, _at(b, dst, 4 * k2 * Mp), align=4)


def _scratch(cg, nbytes: int) -> ir.Value:
    """nbytes of the kernel's per-thread scratch memory (where alloca lives), 64-byte
    aligned.  Every AMX mul_add of a kernel runs start to end without another one in
    between, so they share one area, grown when a larger product needs more."""
    offset, size = getattr(cg, "amx_scratch", (0, 0))
    if nbytes > size:
        offset = -(-cg.local_bytes // 64) * 64
        cg.local_bytes = offset + nbytes
        cg.amx_scratch = (offset, nbytes)
    return cg.b.gep(cg.local, [ir.Constant(I64, offset)], source_etype=I8)


def _config(cg) -> ir.GlobalVariable:
    """The tile configuration: palette 1, tiles 0-7 of 16 rows x 64 bytes."""
    name = "ttlc.amx.config"
    existing = cg.module.globals.get(name)
    if existing is not None:
        return existing
    data = [0] * 64
    data[0] = 1
    for t in range(8):
        data[16 + 2 * t] = TILE_BYTES  # colsb, little-endian u16
        data[48 + t] = TILE_ROWS
    gv = ir.GlobalVariable(cg.module, ir.ArrayType(I8, 64), name)
    gv.initializer = ir.Constant(ir.ArrayType(I8, 64), data)
    gv.global_constant = True
    gv.linkage = "internal"
    gv.align = 64
    return gv


_SIGNATURES = {"llvm.x86.ldtilecfg": [PTR], "llvm.x86.tilerelease": [],
               "llvm.x86.tileloadd64": [I8, PTR, I64], "llvm.x86.tilestored64": [I8, PTR, I64],
               "llvm.x86.tdpbf16ps": [I8, I8, I8]}


def _call(cg, b: ir.IRBuilder, name: str, *args) -> None:
    b.call(cg.extern(name, ir.VoidType(), _SIGNATURES[name]), list(args))


def _configure_kernel(cg) -> None:
    """Load the tile configuration once per kernel call (in the entry block) and release
    the tiles before every return: the kernel's own code is the only tile user while it
    runs, and the thread gives the state back to the OS when it is done."""
    if getattr(cg, "amx_configured", False):
        return
    cg.amx_configured = True

    def finish() -> None:
        b = ir.IRBuilder()
        b.position_at_start(cg.fn.entry_basic_block)
        _call(cg, b, "llvm.x86.ldtilecfg", b.bitcast(_config(cg), PTR))
        for block in cg.fn.blocks:
            if isinstance(block.terminator, ir.Ret):
                b.position_before(block.terminator)
                _call(cg, b, "llvm.x86.tilerelease")

    cg.finish_hooks.append(finish)


def mul_add_bf16(cg, a: ir.Value, bm: ir.Value, c: ir.Value, M: int, K: int, N: int) -> ir.Value:
    """A B + C on AMX: a (M*K) and bm (K*N) bf16 bits, c (M*N) float, all column-major;
    returns the M*N float vector."""
    b = cg.b
    Mp, Np, Kp = _ceil(M, TILE_ROWS), _ceil(N, TILE_ROWS), _ceil(K, K_STEP)

    def call(name: str, *args) -> None:
        _call(cg, b, name, *args)

    def tile(t: int) -> ir.Value:  # a tile register number
        return ir.Constant(I8, t)

    def c_tile(n: int, m: int) -> ir.Value:  # accumulator tile (n, m) of C^T
        return _at(b, c_slot, 4 * (16 * n * Mp + 16 * m))

    _configure_kernel(cg)
    c_bytes, b_bytes, a_bytes = 4 * Mp * Np, 2 * Kp * Np, 2 * Kp * Mp
    c_slot = _scratch(cg, c_bytes + b_bytes + a_bytes + max(4 * M * N, 2 * K * N, 2 * M * K))
    b_slot = _at(b, c_slot, c_bytes)
    a_slot = _at(b, c_slot, c_bytes + b_bytes)
    tmp = _at(b, c_slot, c_bytes + b_bytes + a_bytes)
    _store_padded(b, c, M, N, Mp, Np, c_slot, tmp)
    _store_padded(b, bm, K, N, Kp, Np, b_slot, tmp)
    _store_vnni(b, a, M, K, Mp, Kp, a_slot, tmp)
    c_stride, b_stride, a_stride = ir.Constant(I64, 4 * Mp), ir.Constant(I64, 2 * Kp), \
        ir.Constant(I64, 4 * Mp)
    for n0 in range(0, Np // TILE_ROWS, 2):
        ns = [n for n in (n0, n0 + 1) if n < Np // TILE_ROWS]
        for m0 in range(0, Mp // TILE_ROWS, 2):
            ms = [m for m in (m0, m0 + 1) if m < Mp // TILE_ROWS]
            acc = {(n, m): 2 * (n - n0) + (m - m0) for n in ns for m in ms}
            for (n, m), t in acc.items():
                call("llvm.x86.tileloadd64", tile(t), c_tile(n, m), c_stride)
            for k in range(Kp // K_STEP):
                for n in ns:
                    call("llvm.x86.tileloadd64", tile(4 + n - n0),
                         _at(b, b_slot, 2 * (16 * n * Kp + K_STEP * k)), b_stride)
                for m in ms:
                    call("llvm.x86.tileloadd64", tile(6 + m - m0),
                         _at(b, a_slot, 4 * (16 * k * Mp + 16 * m)), a_stride)
                for (n, m), t in acc.items():
                    call("llvm.x86.tdpbf16ps", tile(t), tile(4 + n - n0), tile(6 + m - m0))
            for (n, m), t in acc.items():
                call("llvm.x86.tilestored64", tile(t), c_tile(n, m), c_stride)
    if (Mp, Np) == (M, N):
        return b.load(c_slot, align=64, typ=c.type)
    columns = [b.load(_at(b, c_slot, 4 * col * Mp), align=4, typ=ir.VectorType(F32, M))
               for col in range(N)]
    return concat(cg, columns)

