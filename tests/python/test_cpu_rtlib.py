"""The runtime library of generated code (backends/cpu/rtlib.py) and the symbol check.

The conversion routines are called the way LLVM calls them (from LLVM IR, with the
``half``/``bfloat`` calling convention) over every 16-bit input and over edge cases of the
wider formats (halfway points, the subnormal range, overflow, NaN payloads), and compared
bit for bit with NumPy (f16) and ml_dtypes (bf16).  The division routines are compared
with Python's integers.  Machine code that calls a routine nobody defines is refused with
a CompileError before it is loaded.
"""
from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

from ttlc.backends.cpu import jit, rtlib  # noqa: E402

_TYPES = {"half": (np.float16, np.uint16), "bfloat": (ml_dtypes.bfloat16, np.uint16),
          "float": (np.float32, np.uint32), "double": (np.float64, np.uint64)}


def _caller(routine: str, src: str, dst: str):
    """A function out[i] = routine(in[i]) for i < n, compiled and loaded like kernels."""
    text = f"""
declare {dst} @{routine}({src})
define void @apply(ptr %in, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %p = getelementptr {src}, ptr %in, i64 %i
  %x = load {src}, ptr %p
  %y = call {dst} @{routine}({src} %x)
  %q = getelementptr {dst}, ptr %out, i64 %i
  store {dst} %y, ptr %q
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""
    library = rtlib.load(jit.emit_object(jit.parse(text)))
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        library.address("apply"))

    def apply(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape, _TYPES[dst][1])
        fn(x.ctypes.data, out.ctypes.data, x.size)
        apply.library = library  # alive while used
        return out

    return apply


def _all16(dtype) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)


def _edge_cases(fmt: rtlib.FloatFormat, bits: np.dtype) -> np.ndarray:
    """Around every exponent: the smallest and largest significands, and every pattern
    of the bits just below a 16-bit format's last place (ties, above, below); random
    others; both signs; NaNs with payloads."""
    rng = np.random.default_rng(7)
    W, Ms = fmt.width, fmt.significand_bits
    exps = np.arange(0, 1 << fmt.exponent_bits, dtype=np.uint64)
    low = np.array([0, 1, 2, 3], np.uint64)
    for drop in (Ms - 10, Ms - 7):  # the bits f16 and bf16 drop
        for pat in range(8):  # the top three dropped bits
            low = np.append(low, np.uint64(pat) << np.uint64(drop - 3))
            low = np.append(low, (np.uint64(pat) << np.uint64(drop - 3)) + np.uint64(1))
    high = np.array([(1 << Ms) - 1, (1 << Ms) - 2], np.uint64)
    sig = np.concatenate([low, high, rng.integers(0, 1 << Ms, 64, dtype=np.uint64)])
    sig = np.concatenate([sig, sig | np.uint64(1 << (Ms - 10)), sig | np.uint64(1 << (Ms - 7))])
    sig &= np.uint64((1 << Ms) - 1)
    values = (exps[:, None] << np.uint64(Ms)) | sig[None, :]
    values = values.ravel()
    values = np.concatenate([values, values | np.uint64(1 << (W - 1))])
    return values.astype(bits)


@pytest.mark.parametrize("routine", [n for n, (s, d) in rtlib.CONVERSIONS.items() if d.width < s.width])
def test_truncation_rounds_like_numpy(routine):
    src, dst = rtlib.CONVERSIONS[routine]
    sdtype, sbits = _TYPES[src.llvm_type]
    ddtype, _ = _TYPES[dst.llvm_type]
    x = _edge_cases(src, sbits).view(sdtype)
    if dst.llvm_type == "bfloat" and src.llvm_type == "double":  # the exact reference is slow
        x = np.random.default_rng(3).permutation(x)[:12000]
    got = _caller(routine, src.llvm_type, dst.llvm_type)(x)
    with np.errstate(all="ignore"):
        if dst.llvm_type == "bfloat" and src.llvm_type == "double":
            # ml_dtypes goes through f32 (two roundings); the reference is exact rounding
            want = _round_f64_to_bf16(x)
        else:
            want = x.astype(ddtype).view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan]), _first_difference(x, got, want, ~nan)
    # NaN: a quiet NaN of the same sign
    g = got[nan].view(ddtype)
    assert np.isnan(g.astype(np.float32)).all()
    quiet = np.uint16(1 << (dst.significand_bits - 1))
    assert ((got[nan] & quiet) != 0).all()
    assert np.array_equal(got[nan] >> 15, (x[nan].view(sbits) >> (src.width - 1)).astype(np.uint16))


def _round_f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f64 -> bf16 with Python's exact fractions."""
    from fractions import Fraction
    import math

    out = np.empty(x.shape, np.uint16)
    for i, v in enumerate(x.tolist()):
        if math.isnan(v):
            out[i] = 0x7FC0
            continue
        sign = 0x8000 if math.copysign(1.0, v) < 0 else 0
        a = abs(v)
        if math.isinf(a):
            out[i] = sign | 0x7F80
            continue
        # candidates: every bf16 value bracketing a, picked by exact distance, ties to even
        f = np.float32(a)  # nearest f32, then the two bf16 neighbours around the exact value
        base = int(np.array(f, np.float32).view(np.uint32)) >> 16
        best = None
        for cand in (base - 1, base, base + 1, base + 2):
            if cand < 0 or cand > 0x7F80:
                continue
            cv = float(np.array(cand << 16, np.uint32).view(np.float32))
            d = abs(Fraction(cv) - Fraction(a)) if not math.isinf(cv) else None
            if d is None:
                # the overflow threshold: halfway between the largest finite and 2^128
                if Fraction(a) >= Fraction(2) ** 128 - Fraction(2) ** (127 - 8):
                    best = (Fraction(0), 0, cand)
                continue
            key = (d, cand & 1, cand)
            if best is None or key < best:
                best = key
        out[i] = sign | best[2]
    return out


def _first_difference(x, got, want, where) -> str:
    idx = np.flatnonzero((got != want) & where)
    if not len(idx):
        return ""
    i = idx[0]
    return (f"{len(idx)} differences; first: input {x[i]!r} (bits {x.view(_bits(x))[i]:#x}) gave "
            f"{got[i]:#06x}, expected {want[i]:#06x}")


def _bits(x):
    return {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.itemsize]


@pytest.mark.parametrize("routine", [n for n, (s, d) in rtlib.CONVERSIONS.items() if d.width > s.width])
def test_extension_is_exact(routine):
    src, dst = rtlib.CONVERSIONS[routine]
    sdtype, _ = _TYPES[src.llvm_type]
    ddtype, dbits = _TYPES[dst.llvm_type]
    x = _all16(sdtype)
    got = _caller(routine, src.llvm_type, dst.llvm_type)(x)
    want = x.astype(ddtype).view(dbits)
    nan = np.isnan(x.astype(np.float32))
    assert np.array_equal(got[~nan], want[~nan])
    # a NaN keeps its sign and payload (shifted into place) and stays a NaN
    shift = dst.significand_bits - src.significand_bits
    payload = (x[nan].view(np.uint16) & ((1 << src.significand_bits) - 1)).astype(dbits) << dbits(shift)
    assert np.array_equal(got[nan] & dbits((1 << dst.significand_bits) - 1), payload)
    assert np.isnan(got[nan].view(ddtype)).all()


def _int128_caller(routine: str):
    text = f"""
declare i128 @{routine}(i128, i128)
define void @apply(ptr %a, ptr %b, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %pa = getelementptr i128, ptr %a, i64 %i
  %pb = getelementptr i128, ptr %b, i64 %i
  %x = load i128, ptr %pa, align 8
  %y = load i128, ptr %pb, align 8
  %r = call i128 @{routine}(i128 %x, i128 %y)
  %po = getelementptr i128, ptr %out, i64 %i
  store i128 %r, ptr %po, align 8
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""
    library = rtlib.load(jit.emit_object(jit.parse(text)))
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        library.address("apply"))

    def apply(a, b):
        def pack(vals):
            return np.frombuffer(b"".join((v % (1 << 128)).to_bytes(16, "little") for v in vals),
                                 np.uint8).copy()

        pa, pb = pack(a), pack(b)
        out = np.zeros(16 * len(a), np.uint8)
        fn(pa.ctypes.data, pb.ctypes.data, out.ctypes.data, len(a))
        raw = out.tobytes()
        return [int.from_bytes(raw[16 * i:16 * i + 16], "little") for i in range(len(a))], library

    return apply


def _c_div(a: int, b: int, signed: bool, remainder: bool) -> int:
    if b == 0:
        return 0
    if not signed:
        return (a % b if remainder else a // b) % (1 << 128)
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return (a - q * b if remainder else q) % (1 << 128)


@pytest.mark.parametrize("routine", list(rtlib.DIVISIONS))
def test_division_matches_python(routine):
    signed, remainder = rtlib.DIVISIONS[routine]
    rng = np.random.default_rng(11)
    edges = [0, 1, 2, 3, 7, (1 << 64) - 1, 1 << 64, (1 << 64) + 1, (1 << 127) - 1, 1 << 127,
             (1 << 128) - 1, 12345678901234567890123456789]
    pairs = [(a, b) for a in edges for b in edges]
    for _ in range(400):
        bits_a, bits_b = (int(x) for x in rng.integers(1, 129, 2))
        a = int.from_bytes(rng.bytes(16), "little") >> (128 - bits_a)
        b = int.from_bytes(rng.bytes(16), "little") >> (128 - bits_b)
        pairs.append((a, b))
    if signed:  # as signed values: both signs of each
        pairs = [(s * a, t * b) for a, b in pairs for s in (1, -1) for t in (1, -1)
                 if a < (1 << 127) and b < (1 << 127)]
    a, b = zip(*pairs)
    got, _ = _int128_caller(routine)(a, b)
    want = [_c_div(x, y, signed, remainder) for x, y in pairs]
    assert got == want


def test_runtime_library_needs_nothing():
    """The routines themselves are compiled without calling any routine."""
    obj = jit.emit_object(jit.optimize(jit.parse(rtlib.source()), level=2))
    assert rtlib.undefined_symbols(obj) == []


def test_runtime_library_comes_from_the_disk_cache(tmp_path, monkeypatch):
    """Built once and stored; a later process reads it back instead of running LLVM
    (here: LLVM refuses to run and the stored object is what comes back)."""
    monkeypatch.setenv("TTLC_CACHE", "1")
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path))
    built = rtlib.object_code()
    assert rtlib.undefined_symbols(built) == [] and list((tmp_path / "cpu").iterdir())

    def refuse(*args, **kwargs):
        raise AssertionError("LLVM ran on a cache hit")

    monkeypatch.setattr(jit, "optimize", refuse)
    assert rtlib.object_code() == built
    monkeypatch.setenv("TTLC_CACHE", "0")  # no cache: built again
    with pytest.raises(AssertionError, match="LLVM ran"):
        rtlib.object_code()


def test_undefined_symbols_reads_the_object():
    text = """
declare double @sin(double)
declare half @__truncdfhf2(double)
define double @f(double %x) {
  %y = call double @sin(double %x)
  %h = call half @__truncdfhf2(double %y)
  %z = fpext half %h to double
  ret double %z
}
"""
    names = set(rtlib.undefined_symbols(jit.emit_object(jit.parse(text))))
    assert {"sin", "__truncdfhf2"} <= names
    assert "f" not in names


def test_unknown_symbol_is_refused():
    text = """
declare double @ttlc_no_such_routine(double)
define double @f(double %x) {
  %y = call double @ttlc_no_such_routine(double %x)
  ret double %y
}
"""
    with pytest.raises(rtlib.UnresolvedSymbols, match="ttlc_no_such_routine"):
        rtlib.load(jit.emit_object(jit.parse(text)))


def test_unresolved_symbol_is_a_compile_error(monkeypatch):
    """A kernel whose machine code needs a routine the process lacks fails to compile
    with a CompileError naming it (simulated: the math library's cos is hidden)."""
    real = rtlib.llvm.address_of_symbol
    monkeypatch.setattr(rtlib.llvm, "address_of_symbol",
                        lambda name: None if name.startswith("cos") or "cos" in name else real(name))
    monkeypatch.setenv("TTLC_CACHE", "0")
    text = """func @k(%x: memref<f64x4>) attributes {work_group_size=[1,1], subgroup_size=1} {
    %c0 = constant 0 : index
    %v = load %x[%c0] : f64
    %c = cos %v : f64
    store %c, %x[%c0]
}"""
    with pytest.raises(ttlc.CompileError, match="cos"):
        ttlc.compile(text)


def test_f64_to_f16_in_a_kernel():
    """The cast that made the process crash where no routine was provided: every f16
    value as f64, and halfway points between neighbouring f16 values."""
    text = """func @k(%x: memref<f64x?>, %y: memref<f16x?>) attributes {work_group_size=[16,1], subgroup_size=16} {
    %c0 = constant 0 : index
    %n = size %x[0] : index
    foreach (%i) = (%c0), (%n) {
        %v = load %x[%i] : f64
        %h = cast %v : f16
        store %h, %y[%i]
    }
}"""
    h = _all16(np.float16)
    h = h[np.isfinite(h)]
    mid = (h[:-1].astype(np.float64) + h[1:].astype(np.float64)) / 2
    x = np.concatenate([h.astype(np.float64), mid])
    y = np.zeros(x.shape, np.float16)
    ttlc.compile(text)["k"](x, y, grid=(1,))
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(y.view(np.uint16), want.view(np.uint16))
