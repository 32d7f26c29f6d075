"""16-bit cooperative_matrix_mul_add on Intel AMX tiles.

Where the CPU has AMX-BF16 (Sapphire Rapids and later) and Linux grants the process the
tile-data state, ``D = A B + C`` with bf16 A and B and an f32 accumulator runs on
``tdpbf16ps``, and with f16 A and B on ``tdpfp16ps`` where the CPU also has AMX-FP16
(Granite Rapids; ``amx_products.PRODUCTS``): 16 x 16 f32 accumulator tiles, each step a
16 x ks by ks x 16 product (ks, the k step, a power of two up to 32).

A coopmatrix is a column-major vector (``coop.py``); the tile instructions want rows, so
the product is computed transposed, ``C^T += B^T A^T``:

* ``C^T`` (N x M, row-major) is C's own column-major storage: tile (n, m) is 16 rows of
  16 floats, row stride M;
* ``B^T`` (N x K, row-major) is B's column-major storage: tile (n, k) is 16 rows of ks
  16-bit values, row stride K;
* ``A^T`` (K x M) must be in the "VNNI" pair layout, row k2 holding
  ``A[m, 2 k2], A[m, 2 k2 + 1]`` for each m: two columns of A interleaved per row.

The operands go through the kernel's per-thread scratch memory (where alloca lives),
padded with zeros to multiples of 16 (M, N) and of the kernel's k step (K): its
products' largest K rounded up to a power of two, at most 32 (``k_step``; the operand
tiles are configured that wide).  The padding adds nothing to the products.  Tiles 0-3
hold up to 2 x 2 accumulator tiles, 4-5 and 6-7 the operand tiles of one k step.  The
tile configuration is loaded once per kernel call and released before the kernel
returns.

A K loop (``for`` with the accumulator as carried value, ``claim_loop``) keeps the
accumulator in tiles 0-3 for the whole loop (``TileAccumulator``): zeroed or loaded
before it, stored after it -- straight into memory when a cooperative_matrix_store of
the result follows (``TileResult``), and a single accumulator tile runs its products in
pairs of k steps (``TileAccumulator._paired``).

An operand loaded from a memref with contiguous columns and used only by AMX products
is not loaded into a vector at all (``operand_in_memory``, ``InMemory``, a
``columns.Place``): B's tiles are loaded from the memref, and A's pairs staged from its
columns, two column loads and one shuffle of 2 x 16 or 2 x 32 components per pair of k;
a transposed operand by gathers of 32-bit pairs; a checked one through masked column
loads (zeros outside the memref).  (Vectors of the whole matrix, and the shuffles that
take them apart, took LLVM up to seconds per kernel.)  Only A is staged in every step of
an unchecked B: its pair layout is not a layout of memory.  The staging is a loop over
pairs or rows (``_pair_rows``), in K loops too.

A product's result that is only updated (alpha, beta, a cast) and stored, or taken as C
by the next product, leaves the tiles for a buffer of its own and is worked on column
by column (``product``, ``TileAccumulator.leave``, ``columns.Columns``), never as a
vector of the whole matrix.

The results agree with the vector path up to the accumulation order (pairs of products
are added before accumulating) and AMX's handling of denormals (flushed to zero), which
is within the floating-point tolerance the interpreter comparison allows for
reassociation.

``TTLC_AMX=0`` disables the path (the vector FMA code is used instead);
``jit.amx_usable`` decides, and requests the process's tile-data permission.  Tests
emulate the tile instructions where the CPU has none (``jit.EMULATE_AMX``,
``amx_emulation.py``).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from llvmlite import ir

from ...ir.core import Instruction, Value
from ...ir.types import CoopMatrixType
from . import amx_emulation, jit
from .amx_products import PRODUCTS, runs_on_amx, usable
from .columns import (Column, Columns, Place, TileSource, address, i64, in_memory, region_of,
                      users_of, web)
from .arith import convert
from .coop import concat
from .function import LoopCarrier
from .scratch import at, column_loop, private_scratch, shared_scratch
from .values import (F32, I1, I8, I16, I32, I64, LLTYPE, PTR, CoopVal, HeldMatrix,
                     VectorConstant, zero_of)
from .vectors import gather, lt_size, splat_n

TILE_ROWS = 16
TILE_BYTES = 64  # bytes of one accumulator tile row (16 floats)
#: the longest k step (bf16 values of an operand tile row, 64 bytes)
MAX_K_STEP = 32
#: tile registers for accumulators (0-3): up to 2 x 2 accumulator tiles
ACCUMULATOR_TILES = 4


def _ceil(x: int, m: int) -> int:
    return -(-x // m) * m


#: matrices of at most this many components are split into columns by shuffles; larger
#: ones go through memory (shuffles of a whole 64 x 64 matrix take LLVM seconds to compile)
SHUFFLE_LIMIT = 1024


def _columns(cg, v, elem: ir.Type, rows: int, length: int,
             tmp: ir.Value) -> Callable[[Column], ir.Value]:
    """c -> column c of the column-major matrix v with ``rows`` rows, zero-extended to
    ``length`` components: v a vector (split by shuffles, or stored to tmp and loaded
    from there for large matrices) or an untransposed ``Place`` (an operand left in
    memory, ``InMemory``: its columns are loaded where they are)."""
    b = cg.b
    if not isinstance(v, Place) and v.type.count > SHUFFLE_LIMIT:
        b.store(v, tmp, align=64)
        v = Place.in_buffer(cg, tmp, rows * lt_size(elem), lt_size(elem))
    if isinstance(v, Place):
        row_mask = v.rows_inside(cg, 0, rows)
        return lambda c: v.column(cg, elem, c, rows, length, row_mask)
    n = v.type.count
    zero = zero_of(v.type)
    return lambda c: b.shuffle_vector(v, zero, VectorConstant(
        I32, [c * rows + r if r < rows else n for r in range(length)]))


def _store_padded(cg, v, elem: ir.Type, rows: int, cols: int, prows: int, pcols: int,
                  dst: ir.Value, tmp: ir.Value) -> None:
    """Store the column-major rows x cols matrix v (a vector or an untransposed ``Place``)
    of elem components as a prows x pcols matrix (zeros around it) at dst."""
    b = cg.b
    size = lt_size(elem)
    if (rows, cols) == (prows, pcols) and not isinstance(v, Place):
        b.store(v, dst, align=64)
        return
    column = _columns(cg, v, elem, rows, prows, tmp)
    for c in range(pcols):
        col = column(c) if c < cols else zero_of(ir.VectorType(elem, prows))
        b.store(col, at(b, dst, c * prows * size), align=4)


def _store_vnni(cg, a, elem: ir.Type, M: int, K: int, Mp: int, Kp: int, dst: ir.Value,
                tmp: ir.Value) -> None:
    """Store A (M x K column-major 16-bit values: a vector or a ``Place``) as Kp/2 rows of
    pairs at dst: row k2 holds A[m, 2 k2], A[m, 2 k2 + 1] for m < Mp (zeros outside A).
    Each row is two columns interleaved by one shuffle of 2 Mp components; the rows of
    whole pairs of an A in memory are a loop (``_pair_rows``)."""
    if isinstance(a, Place) and a.transposed:
        return _store_vnni_transposed(cg, a, M, K, Mp, Kp, dst, tmp)
    b = cg.b
    column = _columns(cg, a, elem, M, Mp, tmp)
    pair = VectorConstant(I32, [m // 2 + (m % 2) * Mp for m in range(2 * Mp)])

    def whole_pair(k2: ir.Value) -> None:
        k = b.mul(k2, ir.Constant(I64, 2))
        b.store(b.shuffle_vector(column(k), column(b.add(k, ir.Constant(I64, 1))), pair),
                address(cg, dst, 4 * Mp, k2, 0), align=4)
    whole = _pair_rows(cg, K, isinstance(a, Place), whole_pair)
    for k2 in range(whole, Kp // 2):
        cols = [column(k) if k < K else zero_of(ir.VectorType(elem, Mp))
                for k in (2 * k2, 2 * k2 + 1)]
        b.store(b.shuffle_vector(cols[0], cols[1], pair), at(b, dst, 4 * k2 * Mp), align=4)


def _pair_rows(cg, K: int, rolled: bool, body: Callable[[ir.Value], None]) -> int:
    """body(k2) for the rows k2 of whole pairs of K (k2 < K / 2) in a loop where
    ``rolled``, and the number of rows done so (0 where not).  Every product stages the
    pairs of an operand in memory so, in K loops too: unrolled, that staging was most
    of the kernel's code (a gemm with sizes known at run time, seven copies of the K
    loop: 0.55 s to compile, half of it with the loop), and a loop of two loads, a
    shuffle and a store per row is bound by the shuffles and stores, not by its counter
    (two more instructions on other ports; not measured: no CPU here has AMX)."""
    if not rolled or K < 4:
        return 0
    column_loop(cg, K // 2, body)
    return K // 2


def _lanes(cg, base: ir.Value, stride: ir.Value, n: int) -> ir.Value:
    """The n pointers base + i stride (bytes), i < n."""
    offsets = cg.b.mul(splat_n(cg, stride, n), VectorConstant(I64, list(range(n))))
    return cg.b.gep(splat_n(cg, base, n), [offsets], source_etype=I8)


def _store_vnni_transposed(cg, a: "Place", M: int, K: int, Mp: int, Kp: int,
                           dst: ir.Value, tmp: ir.Value) -> None:
    """``_store_vnni`` for an A loaded transposed: A's row m is the memref's column y + m
    (contiguous), whose 32-bit word k2 is the pair of row k2 of the layout; each row is
    one gather of those words from the Mp rows of A (a 16-bit one for the half pair of
    an odd K); the gathers of whole pairs are a loop, in K loops too (the gathers, not
    the loop, take the time).  A checked A's rows are first copied to tmp, zero-padded
    to Kp, in a loop (``Place.staged``): its pairs may be half inside the memref."""
    b = cg.b
    if a.bounds is not None:
        a, K = a.staged(cg, I16, M, K, Kp, tmp), Kp
    base, stride = a.at(0, 0)
    rows = _lanes(cg, base, stride, Mp)
    mask = VectorConstant(I1, [m < M for m in range(Mp)])

    def words(k2: Column) -> ir.Value:
        return b.gep(rows, [b.mul(i64(k2), ir.Constant(I64, 4))], source_etype=I8)
    whole = _pair_rows(cg, K, True, lambda k2: b.store(
        gather(cg, I32, words(k2), mask), address(cg, dst, 4 * Mp, k2, 0), align=4))
    for k2 in range(whole, Kp // 2):
        if 2 * k2 + 1 < K:
            row = gather(cg, I32, words(k2), mask)
        elif 2 * k2 < K:
            row = b.zext(gather(cg, I16, words(k2), mask), ir.VectorType(I32, Mp))
        else:
            row = zero_of(ir.VectorType(I32, Mp))
        b.store(row, at(b, dst, 4 * k2 * Mp), align=4)


def _store_b_transposed(cg, bm: "Place", elem: ir.Type, K: int, N: int, Kp: int, Np: int,
                        dst: ir.Value, tmp: ir.Value) -> None:
    """``_store_padded`` of B^T (Np rows of Kp) for a B loaded transposed: B's row k is the
    memref's column y + k (contiguous).  Rows 2 k2 and 2 k2 + 1 interleaved are the
    32-bit pairs of column k2 of B^T's rows, stored as row k2 of tmp; row n < N of B^T
    is then one gather of word n of each tmp row (the rows past N are zeros).  Both are
    loops, in K loops too: there the gathers, not the loops, take the time."""
    b = cg.b
    # B's rows are the memref's columns: in pairs as A's columns are (an N x K matrix)
    _store_vnni(cg, Place(bm.at, False, bm.bounds), elem, N, K, Np, Kp, tmp, None)
    words = _lanes(cg, tmp, ir.Constant(I64, 4 * Np), Kp // 2)
    every = VectorConstant(I1, [1] * (Kp // 2))

    def row(n: Column) -> None:
        word = b.gep(words, [b.mul(i64(n), ir.Constant(I64, 4))], source_etype=I8)
        b.store(gather(cg, I32, word, every), address(cg, dst, 2 * Kp, n, 0), align=4)
    column_loop(cg, N, row)
    for n in range(N, Np):  # B's padding columns
        b.store(zero_of(ir.VectorType(I32, Kp // 2)), at(b, dst, 2 * Kp * n), align=4)


def _scratch(cg, nbytes: int) -> ir.Value:
    """nbytes of the kernel's per-thread scratch memory (where alloca lives), 64-byte
    aligned.  Every AMX mul_add of a kernel runs start to end without another one in
    between, so they share one area (``scratch.shared_scratch``)."""
    return shared_scratch(cg, "amx", nbytes)


def k_step(cg) -> int:
    """16-bit values of one operand tile row (k per tile product) in this kernel: the
    largest K of its AMX products rounded up to a power of two, at least a pair, at most
    MAX_K_STEP (no zero padding to stage and multiply: a product with K = 4, as the
    vector path's tiles for a transposed B have, staged and multiplied 16 k's, 12 of
    them zeros, whose stores were most of such a kernel's machine code)."""
    ks = getattr(cg, "amx_k_step", None)
    if ks is None:
        k = max((i.slots["a"].type.cols for i in cg.func.body.walk()
                 if i.opcode == "cooperative_matrix_mul_add" and runs_on_amx(i)),
                default=2)
        ks = cg.amx_k_step = min(MAX_K_STEP, max(2, 1 << (k - 1).bit_length()))
    return ks


def _shape(cg, t: int) -> Tuple[int, int]:
    """Rows and bytes per row of tile register t in this kernel's configuration: 0-3
    (accumulators) 16 rows x 64 bytes, 4-5 (B^T) 16 rows x k_step 16-bit values, 6-7
    (A^T in pairs) k_step/2 rows x 64 bytes."""
    ks = k_step(cg)
    if t in (4, 5):
        return TILE_ROWS, 2 * ks
    return (ks // 2 if t in (6, 7) else TILE_ROWS), TILE_BYTES


def _config(cg) -> ir.GlobalVariable:
    """The tile configuration: palette 1, the tile shapes of ``_shape``."""
    name = f"ttlc.amx.config.k{k_step(cg)}"
    existing = cg.module.globals.get(name)
    if existing is not None:
        return existing
    data = [0] * 64
    data[0] = 1
    for t in range(8):
        rows, colsb = _shape(cg, t)
        data[16 + 2 * t] = colsb  # little-endian u16
        data[48 + t] = rows
    gv = ir.GlobalVariable(cg.module, ir.ArrayType(I8, 64), name)
    gv.initializer = ir.Constant(ir.ArrayType(I8, 64), data)
    gv.global_constant = True
    gv.linkage = "internal"
    gv.align = 64
    return gv


_SIGNATURES = {"llvm.x86.ldtilecfg": [PTR], "llvm.x86.tilerelease": [],
               "llvm.x86.tileloadd64": [I8, PTR, I64], "llvm.x86.tilestored64": [I8, PTR, I64],
               "llvm.x86.tdpbf16ps": [I8, I8, I8], "llvm.x86.tdpfp16ps": [I8, I8, I8],
               "llvm.x86.tilezero": [I8]}


def _call(cg, b: ir.IRBuilder, name: str, *args) -> None:
    if jit.EMULATE_AMX:
        return _emulate(cg, b, name, *args)
    b.call(cg.extern(name, ir.VoidType(), _SIGNATURES[name]), list(args))


def _emulate(cg, b: ir.IRBuilder, name: str, *args) -> None:
    """The tile instruction ``name`` emulated (``amx_emulation``) on the kernel's tile
    file (in its per-thread scratch memory), given the shapes of the tiles it uses."""
    offset = getattr(cg, "amx_tile_file", None)
    if offset is None:
        offset = cg.amx_tile_file = -(-cg.local_bytes // 64) * 64
        cg.local_bytes = offset + amx_emulation.TILE_FILE_BYTES
    what = name.rsplit(".", 1)[1]
    shapes: List[int] = []
    if what in ("tileloadd64", "tilestored64"):
        shapes = list(_shape(cg, args[0].constant))
    elif what.startswith("tdp"):
        rows, colsb = _shape(cg, args[0].constant)
        shapes = [rows, colsb // 4, _shape(cg, args[1].constant)[1] // 4]
    amx_emulation.call(b, what, list(args), at(b, cg.local, offset), shapes)


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


class _Slots:
    """Where one product's operands are staged in the scratch memory: C^T, B^T and A^T
    (VNNI) as padded matrices, then room for an unpadded matrix on its way in."""

    def __init__(self, cg, M: int, K: int, N: int, operands: str = "bf16"):
        self.M, self.K, self.N = M, K, N
        #: the operands' LLVM type and the tile product that multiplies them
        self.elem, self.product = LLTYPE[operands], PRODUCTS[operands][0]
        self.ks = k_step(cg)
        self.Mp, self.Np, self.Kp = _ceil(M, TILE_ROWS), _ceil(N, TILE_ROWS), _ceil(K, self.ks)
        c_bytes, b_bytes = 4 * self.Mp * self.Np, 2 * self.Kp * self.Np
        a_bytes = 2 * self.Kp * self.Mp
        b = cg.b
        self.c = _scratch(cg, c_bytes + b_bytes + 2 * a_bytes
                          + max(4 * M * N, 2 * self.Kp * self.Np, 2 * self.Mp * self.Kp))
        self.b = at(b, self.c, c_bytes)
        self.a = at(b, self.c, c_bytes + b_bytes)
        self.a_next = at(b, self.c, c_bytes + b_bytes + a_bytes)  # (paired products)
        self.tmp = at(b, self.c, c_bytes + b_bytes + 2 * a_bytes)

    def c_tile(self, b: ir.IRBuilder, n: int, m: int, base: Optional[ir.Value] = None):
        """Accumulator tile (n, m) of C^T (at base instead of the scratch's C^T)."""
        return at(b, self.c if base is None else base,
                  4 * (TILE_ROWS * n * self.Mp + TILE_ROWS * m))

    def blocks(self) -> List[Dict[Tuple[int, int], int]]:
        return _blocks(self.Mp, self.Np)


def _blocks(Mp: int, Np: int) -> List[Dict[Tuple[int, int], int]]:
    """The tiles (n, m) of a padded C^T in blocks of at most 2 x 2, each mapped to tile
    registers 0-3."""
    out = []
    for n0 in range(0, Np // TILE_ROWS, 2):
        ns = [n for n in (n0, n0 + 1) if n < Np // TILE_ROWS]
        for m0 in range(0, Mp // TILE_ROWS, 2):
            ms = [m for m in (m0, m0 + 1) if m < Mp // TILE_ROWS]
            out.append({(n, m): 2 * (n - n0) + (m - m0) for n in ns for m in ms})
    return out


def _tile(t: int) -> ir.Value:
    """A tile register number."""
    return ir.Constant(I8, t)


def _move_c(cg, s: _Slots, acc: Dict[Tuple[int, int], int], name: str,
            base: Optional[ir.Value] = None) -> None:
    """Load (tileloadd64) or store (tilestored64) the accumulator tiles acc from / to C^T
    (at base instead of the scratch's C^T)."""
    for (n, m), t in acc.items():
        _call(cg, cg.b, name, _tile(t), s.c_tile(cg.b, n, m, base), ir.Constant(I64, 4 * s.Mp))


def _result_buffer(cg, s: _Slots) -> ir.Value:
    """A buffer of its own for a result's C^T (``Columns``: read after other products)."""
    return private_scratch(cg, 4 * s.Mp * s.Np)


def _products(cg, s: _Slots, a, bm, accs: List[Dict[Tuple[int, int], int]]) -> None:
    """acc += B^T A^T on the tile registers of accs (blocks of C^T as from ``blocks``,
    possibly on other registers of 0-3); a and bm vectors or ``Place``s.  A is
    staged into the scratch first, and so is B unless its tiles are in memory
    (``_b_tiles``)."""
    b = cg.b
    b_src = _b_tiles(cg, s, bm)
    _store_vnni(cg, a, s.elem, s.M, s.K, s.Mp, s.Kp, s.a, s.tmp)
    a_stride = ir.Constant(I64, 4 * s.Mp)
    for acc in accs:
        n0, m0 = min(n for n, _ in acc), min(m for _, m in acc)
        ns, ms = sorted({n for n, _ in acc}), sorted({m for _, m in acc})
        for k in range(s.Kp // s.ks):
            for n in ns:
                _call(cg, b, "llvm.x86.tileloadd64", _tile(4 + n - n0), *b_src(n, k))
            for m in ms:
                _call(cg, b, "llvm.x86.tileloadd64", _tile(6 + m - m0),
                      at(b, s.a, 4 * (s.ks // 2 * k * s.Mp + TILE_ROWS * m)), a_stride)
            for (n, m), t in acc.items():
                _call(cg, b, s.product, _tile(t), _tile(4 + n - n0), _tile(6 + m - m0))


def _b_tiles(cg, s: _Slots, bm) -> TileSource:
    """(n, k) -> address and row stride of B^T's tile (n, k): where B is in memory when it
    is (an untransposed ``Place``, ``InMemory``) and needs no padding, else in the
    scratch, where it is staged first."""
    if isinstance(bm, Place) and bm.tiles and (s.K, s.N) == (s.Kp, s.Np):
        return lambda n, k: bm.at(s.ks * k, TILE_ROWS * n)
    b = cg.b
    if isinstance(bm, Place) and bm.transposed:
        _store_b_transposed(cg, bm, s.elem, s.K, s.N, s.Kp, s.Np, s.b, s.tmp)
    elif isinstance(bm, Place):  # B^T's rows are B's columns: zero-padded, in a loop
        bm.staged(cg, s.elem, s.N, s.K, s.Kp, s.b, s.Np)
    else:
        _store_padded(cg, bm, s.elem, s.K, s.N, s.Kp, s.Np, s.b, s.tmp)
    stride = ir.Constant(I64, 2 * s.Kp)
    return lambda n, k: (at(b, s.b, 2 * (TILE_ROWS * n * s.Kp + s.ks * k)), stride)


def _read_c(cg, s: _Slots, vt: ir.VectorType) -> ir.Value:
    """The M*N float vector of C^T's storage (column-major C)."""
    b = cg.b
    if (s.Mp, s.Np) == (s.M, s.N):
        return b.load(s.c, align=64, typ=vt)
    columns = [b.load(at(b, s.c, 4 * col * s.Mp), align=4, typ=ir.VectorType(F32, s.M))
               for col in range(s.N)]
    return concat(cg, columns)


def mul_add(cg, operands: str, a, bm, c: ir.Value, M: int, K: int, N: int,
            columns: bool = False):
    """A B + C on AMX: a (M*K) and bm (K*N) of the 16-bit type ``operands`` (vectors or
    ``Place``s), c (M*N) float, all column-major (or the address of C^T's padded
    storage, a ``Columns`` buffer); returns the M*N float vector, or with ``columns`` the
    address of the result in a buffer of its own (columns ``Mp`` floats apart)."""
    _configure_kernel(cg)
    s = _Slots(cg, M, K, N, operands)
    zero, c_base = _is_zero(c), None
    if isinstance(c.type, ir.PointerType):
        c_base = c
    elif not zero:
        _store_padded(cg, c, F32, M, N, s.Mp, s.Np, s.c, s.tmp)
    dst = _result_buffer(cg, s) if columns else None
    for acc in s.blocks():
        if zero:
            for t in acc.values():
                _call(cg, cg.b, "llvm.x86.tilezero", _tile(t))
        else:
            _move_c(cg, s, acc, "llvm.x86.tileloadd64", c_base)
        _products(cg, s, a, bm, [acc])
        _move_c(cg, s, acc, "llvm.x86.tilestored64", dst)
    return dst if columns else _read_c(cg, s, ir.VectorType(F32, M * N))


def product(cg, inst: Instruction, A, B, C):
    """D = A B + C of the AMX mul_add inst (not in a loop's tiles): where D is only
    updated and stored (``columns.web``), ``Columns`` in a buffer of its own, else a
    CoopVal; C a CoopVal or ``Columns`` (its tiles loaded from its buffer)."""
    t: CoopMatrixType = inst.results[0].type
    M, K, N = A.type.rows, A.type.cols, B.type.cols
    Mp = _ceil(M, TILE_ROWS)
    keep = t == C.type and web(cg, inst.results[0]) is not None
    cs = C.buffers(cg, 4 * Mp, _ceil(N, TILE_ROWS)) if isinstance(C, Columns) else C.mats
    out = [mul_add(cg, A.type.component.name, A.mats[g], B.mats[g], cs[g], M, K, N, keep)
           for g in range(len(cs))]
    if keep:
        return Columns.in_buffers(cg, t, out, 4 * Mp)
    return CoopVal([convert(cg, d, C.type.component, t.component) for d in out], t)


# ---- accumulators held in tiles across a loop ------------------------------------------------
class TileAccumulator(LoopCarrier):
    """A loop-carried f32 coopmatrix kept in tile registers for the whole loop (see
    ``claim_loop``): per subgroup, the C^T blocks of ``_Slots.blocks`` on their own
    registers.  A mul_add updates it in place: the loop's only use of the old value is
    that mul_add, and its result is only yielded."""

    #: the K loop stays a loop: its body stages operands in loops of its own, and LLVM
    #: unrolled a K loop of two steps (and the tile loops around it) into copies of them
    rolled = True

    def __init__(self, t: CoopMatrixType, tiles: List[Dict[Tuple[int, int], int]],
                 stored_next: bool, result: Value):
        self.type = t
        self.tiles = tiles
        self.stored_next = stored_next  # the loop's result goes to a store (TileResult)
        self.result = result  # the loop's result
        #: body copies per iteration (emit_for): a single tile pairs its products
        self.unroll = 2 if [len(acc) for acc in tiles] == [1] else 1
        self.copies = 1  # the copies emit_for gives
        self.pending: Optional[_Slots] = None  # where the first step of a pair staged A

    def enter(self, cg, init, copies: int) -> "TileAccumulator":
        """Before the loop: the tiles take the initial value (a CoopVal)."""
        self.copies = copies
        _configure_kernel(cg)
        t = self.type
        s = _Slots(cg, t.rows, 0, t.cols)
        for acc, mat in zip(self.tiles, init.mats):
            if _is_zero(mat):
                for r in acc.values():
                    _call(cg, cg.b, "llvm.x86.tilezero", _tile(r))
            else:
                _store_padded(cg, mat, F32, t.rows, t.cols, s.Mp, s.Np, s.c, s.tmp)
                _move_c(cg, s, acc, "llvm.x86.tileloadd64")
        return self

    def mul_add(self, cg, inst: Instruction, A, B) -> "TileAccumulator":
        """self += A B (inst's operands: CoopVals or ``InMemory``, 16-bit components)."""
        s = _Slots(cg, A.type.rows, A.type.cols, B.type.cols, A.type.component.name)
        if (self.copies == 2 and s.Kp == s.ks and isinstance(B, InMemory)
                and B.mats[0].tiles and (s.K, s.N) == (s.Kp, s.Np)):
            self._paired(cg, s, A.mats[0], _b_tiles(cg, s, B.mats[0]))
            return self
        assert self.pending is None, "internal error: half a pair of AMX products"
        for g, acc in enumerate(self.tiles):
            _products(cg, s, A.mats[g], B.mats[g], _by_block(acc))
        return self

    def _paired(self, cg, s: _Slots, a, b_src: TileSource) -> None:
        """One k step of a single-tile accumulator, in pairs of two successive mul_adds
        (the loop body emitted twice): both stage A and load B's tile (4, 5) where they
        are, and the second loads both A tiles (6, 7) and runs both products.  A tile
        load waits until the stores of its staged A have left the store buffer, which
        they do only after every older instruction, the last product included: staging
        two A's before the first product halves these waits."""
        b = cg.b
        half = 0 if self.pending is None else 1
        _store_vnni(cg, a, s.elem, s.M, s.K, s.Mp, s.Kp, s.a_next if half else s.a, s.tmp)
        _call(cg, b, "llvm.x86.tileloadd64", _tile(4 + half), *b_src(0, 0))
        if not half:
            self.pending = s
            return
        first, self.pending = self.pending, None
        (t,) = self.tiles[0].values()
        a_stride = ir.Constant(I64, 4 * s.Mp)
        _call(cg, b, "llvm.x86.tileloadd64", _tile(6), first.a, a_stride)
        _call(cg, b, "llvm.x86.tileloadd64", _tile(7), s.a_next, a_stride)
        for h in (0, 1):
            _call(cg, b, s.product, _tile(t), _tile(4 + h), _tile(6 + h))

    def leave(self, cg):
        """After the loop: the value as a TileResult for its store, as ``Columns`` where it
        is only updated and stored (``columns.web``), else as a CoopVal."""
        assert self.pending is None, "internal error: half a pair of AMX products"
        if self.stored_next:
            return TileResult(self)
        if web(cg, self.result) is not None:
            return self.columns(cg)
        t = self.type
        s = _Slots(cg, t.rows, 0, t.cols)
        mats = []
        for acc in self.tiles:
            _move_c(cg, s, acc, "llvm.x86.tilestored64")
            mats.append(_read_c(cg, s, ir.VectorType(F32, t.rows * t.cols)))
        return CoopVal(mats, t)

    def columns(self, cg) -> Columns:
        """The tiles stored to buffers of their own, as ``Columns``."""
        t = self.type
        s = _Slots(cg, t.rows, 0, t.cols)
        bases = []
        for acc in self.tiles:
            bases.append(_result_buffer(cg, s))
            _move_c(cg, s, acc, "llvm.x86.tilestored64", bases[-1])
        return Columns.in_buffers(cg, t, bases, 4 * s.Mp)


class InMemory:
    """The value of a cooperative_matrix_load left in memory (``operand_in_memory``): per
    subgroup, where the matrix is (``mats``: ``Place``s).  The AMX products that use it
    load B's tiles from there or stage them, and stage A's pairs, from its columns (or,
    transposed, by gathers of pairs), so the load emits no vector of the whole matrix
    (whose shuffles made most of LLVM's compile time)."""

    def __init__(self, t: CoopMatrixType, mats: List[Place]):
        self.type = t
        self.mats = mats


def operand_in_memory(cg, load: Instruction) -> Optional[InMemory]:
    """The cooperative_matrix_load ``load`` left in memory (an ``InMemory``) when every
    use of its value is as A or B of an AMX mul_add later in the same region with
    nothing between that has regions or may write memory, and each subgroup's access
    qualifies for ``columns.in_memory`` (transposed or not, checked or not); else None
    (the load is emitted)."""
    value = load.results[0]
    t = value.type
    if not (isinstance(t, CoopMatrixType) and usable(t.component.name)):
        return None
    users = users_of(cg).get(value, [])
    region = region_of(cg, load)
    if not users or region is None:
        return None
    for user in users:
        if (user.opcode != "cooperative_matrix_mul_add" or not runs_on_amx(user)
                or user.slots["c"] is value or region_of(cg, user) is not region):
            return None
        between = region.instructions[region.instructions.index(load) + 1:
                                      region.instructions.index(user)]
        if any(i.regions or not (i.opdef.pure or i.opcode == "cooperative_matrix_load")
               for i in between):
            return None
    places = [in_memory(cg, load, t.component.name, g, transposed=True)
              for g in range(cg.W // cg.S)]
    return None if any(p is None for p in places) else InMemory(t, places)


class TileResult(HeldMatrix):
    """A loop's result still in its accumulator's tiles, for the cooperative_matrix_store
    that comes next (``claim_loop``), possibly after a cast to a 16-bit matrix (``cast``):
    stored from the tiles without a trip through vectors of the whole matrix (an f32
    result straight from the tiles; a cast one through the scratch memory, column by
    column)."""

    def __init__(self, acc: TileAccumulator, t: Optional[CoopMatrixType] = None):
        self.acc = acc
        self.type = t or acc.type

    def cast(self, cg, t: CoopMatrixType) -> "TileResult":
        """The result cast to the matrix type t (converted when stored)."""
        return TileResult(self.acc, t)

    def store(self, cg, inst: Instruction) -> None:
        """An f32 result straight from the tiles into a memref where they fit as they are;
        else through ``Columns`` (converted, masked, or as coop.py stores)."""
        comp = self.type.component
        acc_comp = self.acc.type.component
        direct = [in_memory(cg, inst, comp.name, g) for g in range(len(self.acc.tiles))]
        if comp != acc_comp or any(d is None or not d.tiles for d in direct):
            cols = self.acc.columns(cg).map(
                self.type, lambda g, p: convert(cg, p, acc_comp, comp))
            return cols.store(cg, inst)
        for place, acc in zip(direct, self.acc.tiles):
            for (n, m), t in acc.items():
                _call(cg, cg.b, "llvm.x86.tilestored64", _tile(t),
                      *place.at(TILE_ROWS * m, TILE_ROWS * n))
        return None


def _by_block(acc: Dict[Tuple[int, int], int]) -> List[Dict[Tuple[int, int], int]]:
    """acc (tiles of C^T) split into the 2 x 2 blocks that share operand tiles."""
    blocks: Dict[Tuple[int, int], Dict[Tuple[int, int], int]] = {}
    for (n, m), t in acc.items():
        blocks.setdefault((n // 2, m // 2), {})[(n, m)] = t
    return list(blocks.values())


def _is_zero(v: ir.Value) -> bool:
    """v is a constant of +0.0 components."""
    if not isinstance(v, ir.Constant):
        return False
    if v.constant is None:
        return True
    return isinstance(v.constant, list) and all(
        isinstance(e, ir.Constant) and repr(e.constant) in ("0", "0.0") for e in v.constant)


def claim_loop(cg, loop: Instruction) -> Dict[int, TileAccumulator]:
    """The carried values of a (uniform) ``for`` that stay in tile registers for the whole
    loop, by their index: each must be an f32 coopmatrix used in the body only as C of
    an AMX mul_add at the body's top level, whose result is only yielded back in its
    place.  All or none: every AMX mul_add in the body must be such a one (any other
    would overwrite tiles 0-3), and together they must fit in tiles 0-3."""
    if not jit.amx_usable():
        return {}
    body = loop.regions[0]
    insts = list(body.walk())
    uses: Dict[Value, List[Instruction]] = {}
    for i in insts:
        for v in i.operands:
            uses.setdefault(v, []).append(i)
    last = body.instructions[-1] if body.instructions else None
    yielded = last.slots["values"] if last is not None and last.opcode == "yield" else []
    G = cg.W // cg.S
    claimed, mul_adds, free = {}, set(), list(range(4))
    for k, arg in enumerate(body.args[1:]):
        users = uses.get(arg, [])
        if len(users) != 1 or users[0].opcode != "cooperative_matrix_mul_add":
            continue
        ma = users[0]
        if (ma.slots["c"] is not arg or arg in (ma.slots["a"], ma.slots["b"])
                or ma not in body.instructions or not runs_on_amx(ma)
                or k >= len(yielded) or yielded[k] is not ma.results[0]
                or uses.get(ma.results[0]) != [last] or list(yielded).count(ma.results[0]) != 1):
            continue
        t: CoopMatrixType = arg.type
        n_tiles = (_ceil(t.rows, TILE_ROWS) // TILE_ROWS) * (_ceil(t.cols, TILE_ROWS) // TILE_ROWS)
        if len(free) < G * n_tiles:
            return {}
        blocks = _blocks(_ceil(t.rows, TILE_ROWS), _ceil(t.cols, TILE_ROWS))
        tiles = []
        for _ in range(G):
            regs = {nm: free.pop(0) for blk in blocks for nm in blk}
            tiles.append(regs)
        claimed[k] = TileAccumulator(t, tiles, _stored_next(cg, loop, k), loop.results[k])
        mul_adds.add(ma)
    others = [i for i in insts if i.opcode == "cooperative_matrix_mul_add"
              and i not in mul_adds and runs_on_amx(i)]
    return {} if others else claimed


def _stored_next(cg, loop: Instruction, k: int) -> bool:
    """The loop's result k (claimed, in tiles) has one use: a cooperative_matrix_store
    after the loop in its region (or a cast whose one use is such a store), with nothing
    between that has regions or is an AMX mul_add (that could change tiles 0-3) or a
    barrier (where other subgroups may run, ``phases``); and it needs no padding (its
    tiles are exactly the matrix)."""
    result = loop.results[k]
    t: CoopMatrixType = result.type
    users = users_of(cg).get(result, [])
    if len(users) == 1 and users[0].opcode == "cast":
        result = users[0].results[0]
        users = users_of(cg).get(result, [])
    region = region_of(cg, loop)
    if (t.rows % TILE_ROWS or t.cols % TILE_ROWS or len(users) != 1 or region is None
            or users[0].opcode != "cooperative_matrix_store"
            or users[0].slots["value"] is not result
            or region_of(cg, users[0]) is not region):
        return False
    between = region.instructions[region.instructions.index(loop) + 1:
                                  region.instructions.index(users[0])]
    return not any(i.regions or i.opcode == "barrier"
                   or (i.opcode == "cooperative_matrix_mul_add" and runs_on_amx(i))
                   for i in between)


