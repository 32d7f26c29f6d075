"""Which unit computes a cooperative_matrix_mul_add, and the instruction's emitter.

bf16 x bf16 (AMX-BF16) and f16 x f16 (AMX-FP16) into f32 run on AMX tiles (``amx.py``)
where the machine has them and the process may use them, else bf16 on vdpbf16ps where it
has AVX512-BF16 (``dpbf16.py``); every other product, and these where neither is there, on
the vector path's FMA microkernel (``coop.microkernel``).  The choice sits above the three
paths, which build on ``coop.py`` and know nothing of each other.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from llvmlite import ir

from ...ir.core import Instruction, Value
from ...ir.numerics import accumulate_type
from ...ir.types import CoopMatrixType, ScalarType
from ...target import MatrixInstruction, MatrixUnit
from . import amx, amx_products, coop, coop_memory, dpbf16, jit
from .arith import convert
from .columns import owner_of, users_of
from .function import FunctionCodegen, LoopCarrier
from .values import LLTYPE, CoopVal, VectorConstant
from .vectors import column_group, concat, narrow, register_lanes


def mul_add_path(a_type: str, b_type: str, acc_type: str) -> str:
    """What computes mul_add with these component types here: "AMX" (``amx.py``),
    "AVX512-BF16" (``dpbf16.py``) or "FMA" (the vector path: FMAs in the accumulation
    type, f32 for 16-bit floats)."""
    if amx_products.eligible(a_type, b_type, acc_type):
        return "AMX"
    if dpbf16.eligible(a_type, b_type, acc_type):
        return "AVX512-BF16"
    return "FMA"


#: mul_add_path -> the grain of its products (rows, columns, k of one instruction), the
#: products of that grain its accumulators hold at once, for lower-linalg's tiles,
#: whether those tiles suit a B loaded transposed (both do: AMX stages B^T's rows by
#: gathers of pairs in loops, ``amx._store_b_transposed``), and whether the products
#: stage every operand through memory (AMX, ``MatrixUnit.staged_operands``)
GRAINS = {
    "AMX": (amx.TILE_ROWS, amx.TILE_ROWS, amx.MAX_K_STEP, amx.ACCUMULATOR_TILES, True, True),
    "AVX512-BF16": (max(dpbf16.WIDTHS), 1, dpbf16.KERNEL.k_step, dpbf16.GEMM_ACCUMULATORS, True,
                    False),
}
#: the products of 16-bit operands gemm accumulates in f32 (``accumulate_type``)
SIXTEEN_BIT_PRODUCTS = (("bf16", "bf16", "f32"), ("f16", "f16", "f32"))


def matrix_unit() -> MatrixUnit:
    """This CPU's matrix or dot-product unit as the middle end sees it (``Target.matrix``
    of the cpu description, ``module.lower``): for each 16-bit product that runs on AMX or
    AVX512-BF16 here (``mul_add_path``), the grain of that path, so that gemm's tiles are
    whole blocks of it (``linalg.unit_tiles``).  f16 has one only with AMX-FP16:
    AVX512-FP16 multiplies and accumulates in f16 only, while gemm accumulates 16-bit
    floats in f32, so elsewhere f16 products are f32 FMAs on converted operands."""
    found = [(mul_add_path(*types), types) for types in SIXTEEN_BIT_PRODUCTS]
    found = [(path, types) for path, types in found if path in GRAINS]
    if not found:
        return MatrixUnit()
    insts = tuple(MatrixInstruction(*GRAINS[path][:3], *types, 0) for path, types in found)
    *_, accumulators, transposed_b, staged = GRAINS[found[0][0]]
    return MatrixUnit(found[0][0], insts, accumulators=accumulators, transposed_b=transposed_b,
                      staged_operands=staged)


def emit_mul_add(cg: FunctionCodegen, inst: Instruction):
    """D = A B + C per subgroup, in C's type (16-bit floats in f32), then cast to D's.

    The register-blocked outer-product microkernel (``microkernel``): the accumulator
    columns ``D[:, j]`` start as C's columns and take, for k = 0 .. K-1 in order,
    ``A[:, k] * B[k, j]`` (a column of A times a broadcast entry of B) with one FMA each;
    LLVM keeps the N columns in registers.  16-bit products into f32 run on AMX tiles where
    the machine has them (``amx.py``), else bf16 on vdpbf16ps where it has AVX512-BF16
    (``dpbf16.py``)."""
    coop.whole_subgroups(cg)
    A: CoopVal = cg.get(inst.slots["a"])
    B: CoopVal = cg.get(inst.slots["b"])
    C: CoopVal = cg.get(inst.slots["c"])
    D: CoopMatrixType = inst.results[0].type
    ct = C.type.component
    cd = accumulate_type(ct)
    M, N = A.type.rows, B.type.cols
    if isinstance(C, (amx.TileAccumulator, HeldPieces)):  # held its own way across a loop
        return C.mul_add(cg, inst, A, B)
    path = mul_add_path(A.type.component.name, B.type.component.name, ct.name)
    if path == "AMX":  # 16-bit products into f32 on the tile unit
        return amx.product(cg, inst, A, B, C)
    kernel = kernel_of(path, M, N, cd, observed_rows(cg, inst.results[0]))
    if cd == ct == D.component:  # (accumulated in C's type: the result as the kernel's pieces)
        pieces = []
        for g in range(coop.subgroups(cg)):
            acc = _pieces_of(cg, kernel, C, g)
            coop.update_pieces(cg, kernel, A, B, g, acc, cd)
            pieces.append(acc)
        return coop.PiecesVal(cg, kernel, pieces, D)
    out = []
    for g in range(coop.subgroups(cg)):
        d = coop.microkernel(cg, kernel, A, B, g, convert(cg, C.mats[g], ct, cd), cd)
        if cd != ct:
            d = convert(cg, d, cd, ct)
        out.append(convert(cg, d, ct, D.component))
    return CoopVal(out, D)


def kernel_of(path: str, M: int, N: int, cd: ScalarType,
              observed: Optional[int] = None) -> coop.Microkernel:
    """The microkernel of the vector paths (``mul_add_path`` "AVX512-BF16" or "FMA") for
    an M x N accumulator of cd whose first `observed` rows are observed (``observed_rows``)."""
    return dpbf16.KERNEL if path == "AVX512-BF16" else fma_kernel(M, N, cd, observed)


def fma_kernel(M: int, N: int, cd: ScalarType, observed: Optional[int] = None) -> coop.Microkernel:
    """The FMA kernel of an M x N accumulator of cd: ``StreamedA`` where FMAs take no
    broadcast operand and the tile has fewer columns than registers per column (as
    ``linalg.tiles.register_tiles`` counts them), else the base; computing only the
    registers that hold the first `observed` rows (real types), the rows anything observes
    (``mul_add.observed_rows``: f64 24 rows of a 32-row tile in three zmm, not four), the
    rows past the last whole register in fewer lanes where ``narrow_last`` allows (f64 9
    rows: a zmm and one f64)."""
    lanes = register_lanes(cd.size)
    rows = None if observed is None or cd.is_complex else -(-max(1, observed) // lanes) * lanes
    if jit.broadcast_operands() or cd.is_complex or N >= -(-M // lanes):
        if rows is not None and narrow_last(rows // lanes, observed % lanes, N):
            rows += (1 << (observed % lanes - 1).bit_length()) - lanes
        return coop.Microkernel(rows, lanes)
    return coop.StreamedA(lanes, rows)


def narrow_last(registers: int, rows: int, N: int) -> bool:
    """Whether the `rows` (fewer than a register's lanes) past the last whole register of
    a tile's column of `registers` registers and N columns are computed in a vector of
    the fewest power-of-two lanes that hold them: with AVX-512, where a zmm FMA takes two
    cycles of Zen 4's 256-bit units and an xmm or ymm one; f64 9x9x56 (a zmm and one f64
    a column) with B shared 1.10-1.12x as fast from L3 and L2.  B's entry then takes a
    register (broadcast once for both FMAs), so only where the accumulator, two of A's
    columns and a broadcast per column fit the 32 registers (f64 16x12 over 10 rows
    spilled and ran at 0.7x), and with more than one column (LLVM narrows a single
    column's FMAs itself, gemv f64 17x13, and scheduled the narrowed code worse)."""
    return (rows > 0 and N > 1 and jit.broadcast_operands()
            and registers * (N + 2) + N <= jit.register_bytes() * 8 // jit.vector_bits())


def rolled(carried: List[Any]) -> bool:
    """Whether a loop carrying values of these types must stay a loop in LLVM (its unroller
    told not to unroll it): one carrying the accumulator of a ``StreamedA`` tile, a K loop
    of mul_adds whose A is taken one register at a time.  Unrolled -- LLVM unrolls a loop
    of a few steps fully -- the steps' registers of A are joined back into whole columns
    and the FMAs reordered column by column, which needs all of A's columns at once: f32
    56x9x9 in 32x3 tiles (K = 9) loaded 36 registers of A and spilled 36 times (94 ns a
    product against 85 ns as a loop, LIBXSMM's 87-90).  Other tiles' K loops stay loops
    only where long (``control.stays_loop``) or of 3 to 7 steps
    (``control.short_tile_loop``: f32 17x13x11 in 16x5, 16x3 and 8x13 tiles, K loop of
    five steps, ran at the same speed as unrolled)."""
    return any(isinstance(t, CoopMatrixType) and isinstance(
        fma_kernel(t.rows, t.cols, accumulate_type(t.component)), coop.StreamedA) for t in carried)


def observed_rows(cg: FunctionCodegen, value: Value) -> int:
    """How many of a coopmatrix's first rows anything observes: a tile that is only
    stored with its rows checked at a constant position in static rows -- lower-linalg's
    partial tile, f64 24 rows of M in a tile of 32 -- observes those (``coop_memory.stored_rows``);
    mul_add's result observes its A's and C's rows (row r of the product is row r of A
    times B plus row r of C); a yield of a ``for`` or ``if`` passes on what the result
    (and the loop's next iteration) observes, a loop's init what its body does; any other
    use observes all rows.  The rows nothing observes are not computed
    (``fma_kernel``): their FMAs would be spent on rows no store writes."""
    table = cg.__dict__.get("observed_rows")
    if table is None:
        table = cg.observed_rows = _observed_rows(cg)
    return table.get(value, value.type.rows)


def _observed_rows(cg: FunctionCodegen) -> Dict[Value, int]:
    """``observed_rows`` of each coopmatrix value of the kernel: the least fixed point
    from nothing observed, growing by the uses until no value changes."""
    values = []
    for inst in cg.func.body.walk():
        values += [r for r in inst.results if isinstance(r.type, CoopMatrixType)]
        values += [a for region in inst.regions for a in region.args
                   if isinstance(a.type, CoopMatrixType)]
    seen = dict.fromkeys(values, 0)
    uses = users_of(cg)

    def by(user: Instruction, v: Value) -> int:
        """The rows of v its use by `user` observes."""
        op, every = user.opcode, v.type.rows
        if op == "cooperative_matrix_store" and user.slots["value"] is v:
            return coop_memory.stored_rows(user, every) or every
        if op == "cooperative_matrix_mul_add" and v is not user.slots["b"]:
            return seen[user.results[0]]
        if op == "for":  # the loop's init: what the body observes of the carried value
            args = user.regions[0].args[1:]
            return max((seen[a] for a, x in zip(args, user.slots["init"]) if x is v),
                       default=every)
        owner = owner_of(cg, user) if op == "yield" else None
        if owner is not None and owner.opcode in ("for", "if"):
            carried = (owner.regions[0].args[1:] if owner.opcode == "for"
                       else [None] * len(owner.results))
            return max((max(seen[r], seen.get(a, 0)) for r, a, x
                        in zip(owner.results, carried, user.slots["values"]) if x is v),
                       default=every)
        return every

    changed = True
    while changed:
        changed = False
        for v in reversed(values):
            rows = max((by(user, v) for user in uses.get(v, [])), default=0)
            if rows > seen[v]:
                seen[v], changed = rows, True
    return seen


def _pieces_of(cg: FunctionCodegen, kernel: coop.Microkernel, C: CoopVal, g: int) -> dict:
    """Subgroup g's matrix C as `kernel`'s accumulators (``coop.accumulator_pieces``)."""
    if isinstance(C, coop.PiecesVal):
        acc = C.pieces_for(kernel, g)
        if acc is not None:
            return acc
    mat, M = C.mats[g], C.type.rows
    if (narrow(cg) and isinstance(mat, VectorConstant)
            and len({id(e) for e in mat.constant}) == 1):
        # a splat (the zeros a K loop starts from): each piece the constant it is, rows
        # past M zeros; shuffles of the whole tile's constant were a tenth of the code
        # generation of a 16-bit gemm with run-time sizes (four tiles of 64 x 4 f32).
        # (Kernels of other types keep their machine code: ``vectors.narrow``.)
        e = mat.constant[0]
        return {(p, j): VectorConstant(e.type, [e.constant if r < M else 0
                                                for r in range(r0, r0 + lanes)])
                for j in range(C.type.cols) for p, (r0, lanes) in enumerate(kernel.pieces(M))}
    return coop.accumulator_pieces(cg, kernel, mat, M, C.type.cols)


# ---- accumulators held as their pieces across a loop ---------------------------------------------
class HeldPieces(LoopCarrier):
    """A loop-carried coopmatrix that only mul_adds of the vector paths update
    (``claim_loop``), kept for the whole loop as their microkernel's accumulators (the FMA
    kernel's, also on converted f16 operands, or ``dpbf16.KERNEL``'s), one phi per piece
    of a column and subgroup (``coop.accumulator_pieces``), and joined into the matrix
    only after the loop, where something needs it.

    Carried as the matrix, a K loop took the accumulator apart into its pieces at the top
    of every iteration and joined them again at the bottom, through a phi of the whole
    matrix (f32 32 x 3: one <128 x float>; bf16 products into f32 32 x 8: <256 x float>):
    LLVM's InstCombine and instruction selection spent most of a gemm's compile on these
    shuffles, only to find the pieces again."""

    def __init__(self, t: CoopMatrixType, kernel: coop.Microkernel):
        self.type = t
        self.kernel = kernel
        self.rolled = isinstance(self.kernel, coop.StreamedA)  # (``rolled``)
        self.pieces: List[dict] = []  # per subgroup: (piece, column) -> its current value
        self.phis: List[dict] = []  # per subgroup: (piece, column) -> its phi

    def enter(self, cg: FunctionCodegen, init: CoopVal, copies: int) -> "HeldPieces":
        self.pieces = [_pieces_of(cg, self.kernel, init, g) for g in range(coop.subgroups(cg))]
        return self

    def header(self, cg: FunctionCodegen, pre: ir.Block) -> None:
        self.phis = []
        for init in self.pieces:
            phis = {key: cg.phi_of(v.type) for key, v in init.items()}
            for key, v in init.items():
                cg.add_incoming(phis[key], v, pre)
            self.phis.append(phis)
        self.pieces = [dict(phis) for phis in self.phis]

    def mul_add(self, cg: FunctionCodegen, inst: Instruction, A: CoopVal, B: CoopVal):
        for g, acc in enumerate(self.pieces):
            coop.update_pieces(cg, self.kernel, A, B, g, acc, self.type.component)
        return self

    def latch(self, cg: FunctionCodegen, end: ir.Block) -> None:
        for phis, acc in zip(self.phis, self.pieces):
            for key, p in phis.items():
                cg.add_incoming(p, acc[key], end)

    def leave(self, cg: FunctionCodegen) -> CoopVal:
        return coop.PiecesVal(cg, self.kernel, self.phis, self.type)


def merged_pieces(cg: FunctionCodegen, incoming: list, t: CoopMatrixType):
    """The result of a uniform ``if`` that both branches give as accumulators held as
    pieces of the same split (``coop.PiecesVal``: a gemm's K remainder taken in one branch
    or not at all), merged piece by piece, one phi each; None for other values.  Merged
    as the matrix, each branch joined its pieces into one whole-tile vector and the update
    after the ``if`` took it apart again: a bf16 gemm with every size known at run time
    wrote a 64 x 4 f32 tile (``<256 x float>``) joined and split this way for each of its
    four copies of the tile code, a third of its LLVM IR.  Only in kernels of 16-bit
    floats (``vectors.narrow``): the others keep their machine code."""
    vals = [v for v, _ in incoming]
    if (not vals or not narrow(cg) or t.component.is_complex
            or not all(isinstance(v, coop.PiecesVal) for v in vals)):
        return None
    kernel = vals[0].kernel
    per_g = [[v.pieces_for(kernel, g) for v in vals] for g in range(len(vals[0].pieces))]
    if any(acc is None for accs in per_g for acc in accs):
        return None
    phis = []
    for accs in per_g:
        merged = {key: cg.phi_of(x.type) for key, x in accs[0].items()}
        for (_, blk), acc in zip(incoming, accs):
            for key, p in merged.items():
                cg.add_incoming(p, acc[key], blk)
        phis.append(merged)
    return coop.PiecesVal(cg, kernel, phis, t)


def merged_columns(cg: FunctionCodegen, incoming: list, t) -> "CoopVal | None":
    """The result of a uniform ``if`` that both branches give as a matrix whose updates
    go by groups of columns (``vectors.column_group``), merged group by group, one phi
    each, joined (an update after the ``if`` takes the groups back from the join:
    ``FoldingBuilder``); None for other values.  A gemm with beta known only at run time
    adds beta C in one branch: a phi of its whole 64 x 4 f32 tile (``<256 x float>``)
    was split by LLVM's instruction selection slowly."""
    vals = [v for v, _ in incoming]
    per = (column_group(cg, t) if isinstance(t, CoopMatrixType) and not t.component.is_complex
           else 0)
    if not per or not all(isinstance(v, CoopVal) for v in vals):
        return None
    firsts = range(0, t.cols, per)
    group_t = ir.VectorType(LLTYPE[t.component.name], per * t.rows)
    phis = [[cg.phi_of(group_t) for _ in firsts] for _ in vals[0].mats]
    for v, blk in incoming:
        with cg.b.goto_block(blk):  # (before its terminator)
            for g, ps in enumerate(phis):
                for p, c0 in zip(ps, firsts):
                    cg.add_incoming(p, coop.column_block(cg, v, g, c0, per), blk)
    return CoopVal([concat(cg, ps) for ps in phis], t)


def claim_loop(cg: FunctionCodegen, loop: Instruction) -> Dict[int, HeldPieces]:
    """The carried values of a (uniform) ``for`` held as their pieces (``HeldPieces``), by
    their index: each a real coopmatrix of its own accumulation type (f32, f64, f32
    accumulating 16-bit products; not a bf16 one) used in the body only as C of a mul_add
    on a vector path (FMA or AVX512-BF16: AMX holds its own, ``amx.claim_loop``) at the
    body's top level whose result, of C's type, is only yielded back in its place."""
    body = loop.regions[0]
    last = body.instructions[-1] if body.instructions else None
    if last is None or last.opcode != "yield":
        return {}
    yielded = last.slots["values"]
    uses = users_of(cg)  # (the body's values are used in the body alone)
    claimed = {}
    for k, arg in enumerate(body.args[1:]):
        users = uses.get(arg, [])
        if len(users) != 1 or users[0].opcode != "cooperative_matrix_mul_add" or k >= len(yielded):
            continue
        ma = users[0]
        t, a, b = arg.type, ma.slots["a"].type, ma.slots["b"].type
        path = mul_add_path(a.component.name, b.component.name, t.component.name)
        if (ma.slots["c"] is not arg or arg in (ma.slots["a"], ma.slots["b"])
                or ma not in body.instructions or ma.results[0].type != t
                or yielded[k] is not ma.results[0] or uses.get(ma.results[0]) != [last]
                or list(yielded).count(ma.results[0]) != 1
                or t.component.is_complex or accumulate_type(t.component) != t.component
                or path == "AMX"):
            continue
        claimed[k] = HeldPieces(t, kernel_of(path, t.rows, t.cols, t.component,
                                             observed_rows(cg, arg)))
    return claimed


#: the product of coopmatrices
EMITTERS: Dict[str, Callable] = {"cooperative_matrix_mul_add": emit_mul_add}
