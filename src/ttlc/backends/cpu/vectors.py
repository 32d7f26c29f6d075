"""Vector helpers every emitter shares: a scalar repeated in n lanes, masked loads and
gathers (zeros where the mask is off), as LLVM intrinsics through ``cg.intrinsic``.

They sit below ``races``, ``memory``, ``coop`` and ``amx`` (and import only ``values``), so
that each of those uses the same definitions instead of writing its own.
"""
from __future__ import annotations

from llvmlite import ir

from .values import F16, F32, F64, I32, PTR, Cplx, VectorConstant, undef_of, zero_of


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


def masked_load(cg, lt: ir.Type, p: ir.Value, mask, n: int) -> ir.Value:
    """n components of type lt at p: a plain load (mask None) or llvm.masked.load (zeros
    where the mask is off)."""
    vt = ir.VectorType(lt, n)
    if mask is None:
        return cg.b.load(p, typ=vt, align=lt_size(lt))
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


#: lanes of the widest vector given to an elementwise instruction (``pieces``): LLVM
#: splits wider ones into registers during instruction selection, slowly where the type
#: has no native arithmetic (half without AVX512-FP16, converted lane by lane)
WIDEST = 64


def pieces(cg, x, fn):
    """fn(piece) on the vector x in pieces of ``WIDEST`` lanes, joined; fn(x) where x is no
    wider (or not a vector).  The last piece repeats x's last lane past its end."""
    n = x.type.count if isinstance(x, ir.Value) and isinstance(x.type, ir.VectorType) else 0
    if n <= WIDEST:
        return fn(x)
    b = cg.b
    out = concat(cg, [fn(b.shuffle_vector(x, x, VectorConstant(I32, [min(k + i, n - 1)
                                                                      for i in range(WIDEST)])))
                      for k in range(0, n, WIDEST)])
    return out if out.type.count == n else b.shuffle_vector(out, out, VectorConstant(I32, range(n)))
