"""Target descriptions: what the middle end needs to know about a machine.

Passes read tile shapes, subgroup sizes and work-group limits from here instead of
scattering constants; each back end's registry entry (``ttlc.backends``) names the
description it compiles for.  The sizes a function runs with are computed from these
descriptions in one place, ``ttlc.target.config``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, Optional, Tuple

from ..ir.layout import MatrixLayout, NestedLayout, layout_of
from ..ir.types import CoopMatrixType, MemrefType, ScalarType


@dataclass(frozen=True)
class MatrixInstruction:
    """One multiply-add of a matrix unit: D (m x n) = A (m x k) B (k x n) + C, carried out
    by the ``subgroup_size`` work-items of a subgroup together."""

    m: int
    n: int
    k: int
    a: str  # component type names
    b: str
    acc: str
    #: the subgroup size it needs (0: any; a CPU's unit serves every subgroup size)
    subgroup_size: int

    def tiles(self, a: CoopMatrixType, b: CoopMatrixType, c: CoopMatrixType, S: int) -> bool:
        """Whether the product of these operands is a grid of this instruction's products."""
        return (self.subgroup_size in (0, S)
                and (a.component.name, b.component.name) == (self.a, self.b)
                and c.component.name == self.acc and a.rows % self.m == 0
                and c.cols % self.n == 0 and a.cols % self.k == 0)


@dataclass(frozen=True)
class BlockIO:
    """2-D block loads, stores and prefetches of a column-major tile in global memory
    (Intel's ``xevm.blockload2d`` family).  A block is ``lanes`` consecutive rows (the
    contiguous mode, one row per lane: the language's layout for a subgroup of that
    size) by a power-of-two number of columns up to ``max_height`` (``max_store_height``
    for stores); up to
    ``max_width_bytes`` of rows side by side are one load (``v_blocks``).  The memref
    must start ``base_alignment``-byte aligned, its rows be at least and a multiple of
    ``min_pitch_bytes`` wide where only a divisor is known, its column stride (the pitch)
    a multiple of ``pitch_alignment`` bytes and at least ``min_pitch_bytes``, and the
    first row of the tile ``x_alignment``-byte aligned.  A transposed load (``.t``: the
    tile's rows run along the memref's columns) of ``transpose_bytes`` elements is
    blocks of ``lanes`` tile rows by ``transpose_width`` tile columns, transposed in
    registers."""

    element_bytes: Tuple[int, ...]
    lanes: int
    max_width_bytes: int
    max_height: int
    max_store_height: int
    base_alignment: int
    min_pitch_bytes: int
    pitch_alignment: int
    x_alignment: int
    transpose_bytes: int
    transpose_width: int
    #: whether a back end's block access may stand for a checked load or store (reading
    #: zeros and writing nothing out of bounds), and for a prefetch
    checked: bool = True
    prefetch: bool = True

    def allows(self, t: ScalarType, rows: int, cols: int, transposed: bool, S: int,
               memref: MemrefType, offset_gcd: int, width_gcd: int, pitch_gcd: int,
               x_gcd: int) -> bool:
        """Whether a rows x cols tile of t from memref at a first memref row that is a
        multiple of x_gcd is block accesses (transposed: a load with ``.t``); *_gcd are
        known divisors (in elements) of the memref's first element's address, its mode
        sizes and column stride (static sizes and strides are taken from the type)."""
        e = t.bits // 8 if isinstance(t, ScalarType) and not t.is_complex else 0
        if (S != self.lanes or e not in self.element_bytes or rows % self.lanes
                or memref.space != "global" or len(memref.shape) != 2 or memref.stride[0] != 1):
            return False
        if transposed and (e != self.transpose_bytes or cols % self.transpose_width):
            return False

        def wide(static, gcd: int, align: int) -> bool:
            if static is not None:
                return static * e >= self.min_pitch_bytes and static * e % align == 0
            return gcd * e % self.min_pitch_bytes == 0 and gcd > 0

        return ((offset_gcd * e) % self.base_alignment == 0 and offset_gcd > 0
                and wide(memref.shape[0], width_gcd, 4)
                and wide(memref.stride[1], pitch_gcd, self.pitch_alignment)
                and (x_gcd * e) % self.x_alignment == 0)


@dataclass(frozen=True)
class MatrixUnit:
    """What a target's matrix hardware does natively: the multiply-adds it has, its block
    IO, and the operand layouts it needs inside a kernel.  ``lower-coopmatrix`` keeps the
    instructions it executes whole; the generic lowering handles the rest."""

    name: str = "none"
    instructions: Tuple[MatrixInstruction, ...] = ()
    block_io: Optional[BlockIO] = None
    #: units whose operands are spread over lanes in fragments of one instruction's tile:
    #: (use, component bits, the tile's layout); a matrix of whole tiles is a batch of them
    fragments: Tuple[Tuple[str, int, NestedLayout], ...] = ()
    #: where lower-linalg makes gemm's tiles whole blocks of an instruction's products
    #: (``linalg.unit_tiles``): how many m x n products of C the unit holds at once (its
    #: accumulator registers); 0 leaves the tiles as the register budget gives them
    accumulators: int = 0
    #: whether those tiles are taken for a B loaded transposed too
    transposed_b: bool = True
    #: whether the unit's products stage every operand through memory, so that a tile
    #: checked at an edge of C costs about as much per K step as a full one
    #: (``linalg.unit_tiles.staged_edges``)
    staged_operands: bool = False

    def instruction(self, a: str, b: str, acc: str) -> Optional[MatrixInstruction]:
        """The instruction multiplying a and b (component type names) into acc, if any."""
        return next((i for i in self.instructions if (i.a, i.b, i.acc) == (a, b, acc)), None)

    def mul_add(self, a: CoopMatrixType, b: CoopMatrixType, c: CoopMatrixType,
                S: int) -> Optional[MatrixInstruction]:
        """The instruction whose grid computes A B + C, if one does."""
        return next((i for i in self.instructions if i.tiles(a, b, c, S)), None)

    def storage_layout(self, t: CoopMatrixType, S: int) -> MatrixLayout:
        """How the unit holds an operand of type t inside a kernel: units with
        ``fragments`` hold each tile of an instruction's shape as its fragment says; the
        language's layout (``ir.layout``) for anything else."""
        if self.fragments:
            tile = next((n for use, bits, n in self.fragments
                         if use == t.use and bits == t.component.bits
                         and not t.component.is_complex), None)
            if tile is None or tile.lanes != S or t.rows % tile.shape[0] or t.cols % tile.shape[1]:
                return layout_of(t, S)
            return MatrixLayout(t.rows, t.cols, S, replace(
                tile, batch_tile=(t.rows // tile.shape[0], t.cols // tile.shape[1])))
        return layout_of(t, S)


#: Intel Xe matrix engines (DPAS, ``xevm.mma``) as seen from column-major memory: the
#: product is computed transposed, D^T = B^T A^T + C^T, so that DPAS's operands are
#: the language's layout in a subgroup of 16: 16 rows of A, C and D (one per lane) by
#: 1-8 columns of C (the repeat count), k = 16 (32 bytes) of f16 or bf16.  (8-bit
#: operands are not taken: DPAS wants B's rows in pairs per lane, which is not the
#: language's layout.)  Block IO after the LSC 2-D block messages.
XE_DPAS = MatrixUnit(
    "dpas",
    tuple(MatrixInstruction(16, n, 16, a, a, "f32", 16)
          for a in ("f16", "bf16") for n in (8, 4, 2, 1)),
    BlockIO(element_bytes=(1, 2, 4), lanes=16, max_width_bytes=64, max_height=32,
            max_store_height=8, base_alignment=64, min_pitch_bytes=64, pitch_alignment=16, x_alignment=4,
            transpose_bytes=4, transpose_width=8))

def _mma_fragments(bits: int) -> Tuple[Tuple[str, int, NestedLayout], ...]:
    """The mma.sync fragments of the PTX ISA (m16n8k16 for 16-bit operands, m16n8k32
    for 8-bit ones): lane = 4 g + t (g = group, t = thread in group); a 32-bit register
    holds E = 32 / bits consecutive k.  A (16 x 8E): row g (+8), columns E t .. E t + E - 1
    (+4E); B (8E x 8): rows E t .. (+4E), column g; C (16 x 8, 32-bit): row g (+8),
    columns 2 t, 2 t + 1.  Which lane holds an element is PTX's; the registers of a lane
    are numbered in the nested layout's order (row-major over its part), which for A
    differs from PTX's a0..a7 (rows + 8 before columns + 4E there)."""
    E = 32 // bits
    one, zero = (1, 1), (0, 0)
    a = NestedLayout(one, one, (2, 2), (8, 4), (1, E), zero, (4, 1))
    b = NestedLayout(one, one, (2, 1), (4, 8), (E, 1), zero, (1, 4))
    c = NestedLayout(one, one, (2, 1), (8, 4), (1, 2), zero, (4, 1))
    return (("matrix_a", bits, a), ("matrix_b", bits, b), ("matrix_acc", 32, c))


#: NVIDIA tensor cores, warp-wide mma.sync: m16n8k16 for 16-bit operands, m16n8k32 for i8
NVIDIA_MMA = MatrixUnit(
    "mma.sync",
    tuple(MatrixInstruction(16, 8, k, a, a, acc, 32)
          for a, k, acc in (("f16", 16, "f32"), ("bf16", 16, "f32"), ("i8", 32, "i32"))),
    fragments=_mma_fragments(16) + _mma_fragments(8)[:2])


@dataclass(frozen=True)
class Target:
    name: str
    #: subgroup sizes the machine supports, the preferred one first
    subgroup_sizes: Tuple[int, ...]
    #: largest number of work-items in a work-group
    max_work_group_size: int
    #: bytes of registers one subgroup may use for accumulator tiles
    register_budget: int
    #: whether work-items execute as separate SIMT threads (GPUs): coopmatrix values must
    #: then be lowered to per-work-item vectors (lower-coopmatrix)
    simt: bool
    #: cache line size in bytes (alignment of local memory, prefetch granularity)
    cache_line: int = 64
    #: bytes of one vector register where a subgroup is a set of SIMD lanes (CPUs; 0 for
    #: SIMT machines and the interpreter): work-group-size fits subgroups to it
    vector_bytes: int = 0
    #: where subgroups are SIMD lanes: whether vector FMAs take B's entry as a broadcast
    #: memory operand (AVX-512's embedded broadcast); without (AVX2) each broadcast takes a
    #: register of its own and gemm's tiles are chosen register by register
    #: (``linalg.tiles``)
    broadcast_operands: bool = True
    #: where subgroups are SIMD lanes: whether masked vector loads take their mask from a
    #: mask register (AVX-512); AVX2's masked loads (``vmaskmov``) of a batch's members
    #: ran at half the speed of the same work in full loads where they were the first to
    #: read a line (``linalg.matmul.dot_columns``)
    mask_registers: bool = True
    #: the matrix hardware (none: every coopmatrix instruction is lowered generically)
    matrix: MatrixUnit = field(default_factory=MatrixUnit)
    #: how a function that leaves its sizes to the compiler runs here (``ExecConfig.of``):
    #: 0 for one subgroup of the preferred size, as written (the interpreter); else with
    #: the sizes work-group-size chooses, a chosen work-group having at most this many
    #: work-items
    auto_work_group_limit: int = 0
    #: the largest grid (number of work-groups) per mode a launch may ask for
    max_grid: Tuple[int, int, int] = (2**31 - 1,) * 3
    #: the number types its kernels may compute with and store (None: every type of the
    #: language); a back end refuses others with a CompileError naming the instruction
    types: Optional[Tuple[str, ...]] = None
    #: the element types of atomic instructions (None: every number type)
    atomic_types: Optional[Tuple[str, ...]] = None
    #: the subgroup instructions (``subgroup_broadcast``, ``subgroup_reduce_add``, ...)
    #: it executes (None: all); a back end refuses others with a CompileError naming the
    #: instruction
    subgroup_ops: Optional[Tuple[str, ...]] = None

    def storage_layout(self, t: CoopMatrixType, S: int) -> MatrixLayout:
        """The layout a coopmatrix of type t has inside a kernel for this target."""
        return self.matrix.storage_layout(t, S)

    @property
    def default_subgroup_size(self) -> int:
        return self.subgroup_sizes[0]


TARGETS: Dict[str, Target] = {
    # the reference interpreter: any power-of-two subgroup; work-items are NumPy lanes
    "interp": Target("interp", (16, 8, 32, 1, 2, 4, 64), 1024, 64 * 1024, simt=False),
    # the CPU: a subgroup is a set of SIMD lanes (a 16 x f32 AVX-512 register preferred;
    # smaller subgroups use part of one, larger ones several); 32 zmm registers of 64 bytes.
    # The work-items of a work-group are SIMD lanes of one thread, so more lanes give
    # longer vectors (more registers, more code: coopmatrix code is emitted once per
    # subgroup), not more parallelism, which comes from work-groups on other threads:
    # chosen work-groups have one subgroup of one AVX-512 register's lanes: 16 (f32)
    # or 8 (f64) (``config.auto_limit``)
    "cpu": Target("cpu", (16, 8, 32, 4, 2, 1, 64), 1024, 32 * 64, simt=False, vector_bytes=64,
                  auto_work_group_limit=16),
    # Intel Data Center GPU Max (Ponte Vecchio): 64 KiB GRF per thread in large-GRF mode
    "pvc": Target("pvc", (16, 32), 1024, 64 * 1024, simt=True, matrix=XE_DPAS,
                  auto_work_group_limit=1024),
    # any OpenCL 3.0 device that takes SPIR-V and has subgroups (cl_khr_subgroups with
    # required sizes, as Intel's GPUs and CPU runtime offer): no matrix unit.  f16 and f64
    # arithmetic (cl_khr_fp16, cl_khr_fp64), bf16 as 16-bit storage computed in f32,
    # complex numbers as pairs, 64-bit integer atomics (cl_khr_int64_base_atomics); float
    # atomics as compare-and-swap loops
    "opencl": Target("opencl", (16, 8, 32), 1024, 64 * 1024, simt=True,
                     auto_work_group_limit=256),
    # NVIDIA GPUs: warps of 32
    "nvidia": Target("nvidia", (32,), 1024, 255 * 4 * 32, simt=True, matrix=NVIDIA_MMA,
                     auto_work_group_limit=1024, max_grid=(2**31 - 1, 65535, 65535)),
}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target description {name!r} (known: "
                         f"{', '.join(TARGETS)})") from None
