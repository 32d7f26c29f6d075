"""Vector helpers every emitter shares: a scalar repeated in n lanes, masked loads and
gathers (zeros where the mask is off), as LLVM intrinsics through ``cg.intrinsic``, vectors
joined, and elementwise work in pieces of at most ``widest()`` lanes.

They sit below ``races``, ``memory``, ``arith``, ``coop`` and ``amx`` (and import only
``values``, ``jit`` and the IR's types), so that each of those uses the same definitions
instead of writing its own.
"""
from __future__ import annotations

import itertools
from typing import Optional

from llvmlite import ir

from ...ir.types import CoopMatrixType
from . import jit
from .values import F16, F32, F64, I1, I32, I64, PTR, Cplx, VectorConstant, undef_of, zero_of


def lt_size(lt: ir.Type) -> int:
    """Bytes of one value of the LLVM type lt (the alignment the intrinsics are given)."""
    if isinstance(lt, ir.IntType):
        return max(1, lt.width // 8)
    return {F16: 2, F32: 4, F64: 8}.get(lt, 8) if not isinstance(lt, ir.PointerType) else 8


def splat_n(cg, x, n: int):
    """A scalar (or complex scalar) repeated n times."""
    if isinstance(x, Cplx):
        return Cplx(splat_n(cg, x.re, n), splat_n(cg, x.im, n))
    vt = ir.VectorType(x.type, n)
    if isinstance(x, ir.Constant):
        return VectorConstant(x.type, [x.constant] * n)
    v = cg.b.insert_element(undef_of(vt), x, ir.Constant(I32, 0))
    return cg.b.shuffle_vector(v, undef_of(vt), VectorConstant(I32, [0] * n))


def constant_prefix(mask) -> Optional[int]:
    """k where `mask` is a constant of its first k lanes on and the rest off; else None."""
    bits = getattr(mask, "ints", None)
    if bits is None:
        return None
    k = sum(1 for _ in itertools.takewhile(lambda v: v & 1, bits))
    return None if any(v & 1 for v in bits[k:]) else k


def masked_load(cg, lt: ir.Type, p: ir.Value, mask, n: int) -> ir.Value:
    """n components of type lt at p: a plain load (mask None) or llvm.masked.load (zeros
    where the mask is off).  Without mask registers (AVX2), a constant mask of the first
    k components, k a power of two (a tile's static rows: f32 4 of 8, f64 1 or 2 of 4),
    is a plain load of those k widened with zeros: LLVM keeps such loads masked
    (``vmaskmov``), and f32 4x6x74 ran at 0.81 of LIBXSMM's speed with them, 1.26 with
    plain loads; with AVX-512's masks plain loads were as fast or up to 7% slower."""
    vt = ir.VectorType(lt, n)
    if mask is None:
        return cg.b.load(p, typ=vt, align=lt_size(lt))
    if not jit.mask_registers():
        k = constant_prefix(mask)
        if k is not None and k & (k - 1) == 0:
            if k == n:
                return cg.b.load(p, typ=vt, align=lt_size(lt))
            if k == 0:
                return zero_of(vt)
            part = cg.b.load(p, typ=ir.VectorType(lt, k), align=lt_size(lt))
            return cg.b.shuffle_vector(part, zero_of(part.type),
                                       VectorConstant(I32, [min(i, k) for i in range(n)]))
    return cg.intrinsic("llvm.masked.load", vt, [p, ir.Constant(I32, lt_size(lt)), mask,
                                                 zero_of(vt)], [vt, PTR])


def gather(cg, lt: ir.Type, ptrs: ir.Value, mask: ir.Value) -> ir.Value:
    """llvm.masked.gather of components of type lt from the vector of pointers ptrs (zeros
    where the mask is off)."""
    vt = ir.VectorType(lt, ptrs.type.count)
    return cg.intrinsic("llvm.masked.gather", vt, [ptrs, ir.Constant(I32, lt_size(lt)), mask,
                                                   zero_of(vt)], [vt, ptrs.type])


def concat(cg, pieces: list):
    """Vectors of equal length joined in order (plain or complex)."""
    if isinstance(pieces[0], Cplx):
        return Cplx(concat(cg, [p.re for p in pieces]), concat(cg, [p.im for p in pieces]))
    n = pieces[0].type.count
    total = n * len(pieces)
    vecs = list(pieces)
    while len(vecs) > 1:
        m = vecs[0].type.count
        if len(vecs) % 2:
            vecs.append(vecs[-1])  # padding, cut off below
        cat = VectorConstant(I32, range(2 * m))
        vecs = [cg.b.shuffle_vector(vecs[i], vecs[i + 1], cat) for i in range(0, len(vecs), 2)]
    out = vecs[0]
    if out.type.count != total:
        out = cg.b.shuffle_vector(out, out, VectorConstant(I32, range(total)))
    return out


def widest() -> int:
    """Lanes of the widest vector given to an elementwise instruction (``pieces``,
    ``coop.by_columns``): four of the machine's vector registers of f32 (64 with AVX-512,
    32 with AVX2).  LLVM splits wider ones into registers during instruction selection,
    slowly where the type has no native arithmetic (half without AVX512-FP16, converted
    lane by lane); narrower ones make more instructions for O3 (bf16 gemms compiled no
    faster with 32 on AVX-512, f16 ones on AVX2 a fifth faster than with 64)."""
    return jit.vector_bits() // 8


def register_lanes(size: int) -> int:
    """Components of `size` bytes in one of the machine's vector registers (at least one)."""
    return max(1, jit.vector_bits() // 8 // size)


def narrow(cg) -> bool:
    """Whether the kernel has coopmatrices of 16-bit floats: then its elementwise updates
    go by groups of columns (``coop.by_columns``) and its checked accesses take masks by
    rows and columns (``Valid``).  Other kernels keep whole vectors, which LLVM splits
    into registers fast enough where the type is native, and their machine code as it
    was (the small GEMMs' speed was measured with it)."""
    hit = cg.__dict__.get("narrow")
    if hit is None:
        hit = cg.narrow = any(isinstance(v.type, CoopMatrixType) and v.type.component.is_float
                              and v.type.component.size == 2
                              for i in cg.func.body.walk() for v in i.results)
    return hit


def column_group(cg, t) -> int:
    """The columns of the coopmatrix type t an elementwise update takes at once
    (``coop.by_columns``): the most that divide its columns and fit ``widest()`` (groups
    of one length join as they are), or 0 where it takes the whole matrix (no more than
    ``widest()`` components, one column, or a kernel not ``narrow``)."""
    M, N = t.rows, t.cols
    w = widest()
    if M * N <= w or N == 1 or not narrow(cg):
        return 0
    return max(k for k in range(1, max(1, w // M) + 1) if N % k == 0)


def pieces(cg, x, fn):
    """fn(piece) on the vector x in pieces of ``widest()`` lanes, joined; fn(x) where x is
    no wider (or not a vector).  The last piece repeats x's last lane past its end."""
    n = x.type.count if isinstance(x, ir.Value) and isinstance(x.type, ir.VectorType) else 0
    w = widest()
    if n <= w:
        return fn(x)
    b = cg.b
    out = concat(cg, [fn(b.shuffle_vector(x, x, VectorConstant(I32, [min(k + i, n - 1)
                                                                      for i in range(w)])))
                      for k in range(0, n, w)])
    if out.type.count != n:
        out = b.shuffle_vector(out, out, VectorConstant(I32, range(n)))
    return out


def in_range(cg, at: ir.Value, bound: ir.Value) -> ir.Value:
    """i1 x n: is each lane of the i64 vector at in 0 .. bound - 1?"""
    b = cg.b
    return b.and_(b.icmp_signed(">=", at, zero_of(at.type)),
                  b.icmp_signed("<", at, splat_n(cg, bound, at.type.count)))


def inside(cg, first: ir.Value, bound: ir.Value, n: int) -> ir.Value:
    """i1 x n: is first + i (i = 0 .. n - 1, i64) in 0 .. bound - 1?"""
    return in_range(cg, cg.b.add(splat_n(cg, first, n), VectorConstant(I64, range(n))), bound)


class Valid:
    """Which components of a subgroup's M x N matrix an access touches: ``rows`` (i1 x M)
    and ``cols`` (i1 x N) where the components are those of the rows and columns inside
    (None: every one), or the vector of all M N (``whole``: in checked code, and in
    kernels without 16-bit float matrices, ``narrow``).  Accesses by columns or rows
    take their masks from the two short ones: a checked access's mask as vectors of all
    its indices (<M N x i64>: 256 lanes for a 64 x 4 tile) took LLVM's O3 and
    instruction selection long to take apart."""

    def __init__(self, cg, M: int, N: int, rows: Optional[ir.Value] = None,
                 cols: Optional[ir.Value] = None, whole: Optional[ir.Value] = None,
                 row_span: Optional[tuple] = None, cols_inside: Optional[int] = None):
        self.cg, self.M, self.N = cg, M, N
        self.rows, self.cols, self._whole = rows, cols, whole
        #: the masks are ``rows`` and ``cols`` (not one of all M N): fixed when made, as
        #: ``whole`` keeps the vector it joins from them
        self.by_lines = whole is None
        #: (first, bound) where ``rows`` is ``inside(first, bound, M)`` (``row_inside``)
        self.row_span = row_span
        #: where known at compile time, how many columns are inside: the first ones
        self.cols_inside = cols_inside

    def row_inside(self, r) -> Optional[ir.Value]:
        """i1: is row r (an int, or an i64) inside (None: every row is), as one scalar
        compare where the rows are a span: a bit taken out of the vector of rows is a
        mask register's move and shifts (AVX-512), many where each row of a tile takes
        one."""
        if self.rows is None:
            return None
        b = self.cg.b
        at = ir.Constant(I64, r) if isinstance(r, int) else r
        if self.row_span is None:
            return b.extract_element(self.rows, at)
        first, bound = self.row_span
        return b.icmp_unsigned("<", b.add(first, at), bound)

    def _one(self, along: Optional[ir.Value], across: Optional[ir.Value], k: int, n: int):
        """The mask of the n components that line k of ``across`` meets ``along``."""
        if across is None:
            return along
        b = self.cg.b
        bit = splat_n(self.cg, b.extract_element(across, ir.Constant(I32, k)), n)
        return bit if along is None else b.and_(along, bit)

    def column(self, c: int) -> Optional[ir.Value]:
        """i1 x M: the components of column c (None: all)."""
        if not self.by_lines:
            return self._lanes(range(c * self.M, (c + 1) * self.M))
        return self._one(self.rows, self.cols, c, self.M)

    def row(self, r: int) -> Optional[ir.Value]:
        """i1 x N: the components of row r (None: all)."""
        if not self.by_lines:
            return self._lanes(range(r, self.M * self.N, self.M))
        return self._one(self.cols, self.rows, r, self.N)

    def _lanes(self, which) -> ir.Value:
        return self.cg.b.shuffle_vector(self._whole, self._whole, VectorConstant(I32, which))

    @property
    def whole(self) -> ir.Value:
        """i1 x M N, column-major."""
        if self._whole is None:
            cols = [self.column(c) for c in range(self.N)]
            if all(m is None for m in cols):
                self._whole = VectorConstant(I1, [1] * (self.M * self.N))
            else:
                ones = VectorConstant(I1, [1] * self.M)
                self._whole = concat(self.cg, [ones if m is None else m for m in cols])
        return self._whole
