"""Target "cpu" (LLVM JIT) against target "interp" (the executable semantics).

Every test runs the same program on the same inputs on both targets and compares every
array afterwards: integers bit for bit, floating point exactly for arithmetic the two
compute the same way (NaN equal to NaN, -0.0 equal to 0.0), within a few units in the
last place for math functions (libm vs NumPy).  Also: the disk cache, thread counts,
checked execution, unsupported instructions, the command line, and that the front end
never imports llvmlite.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import ttlc

llvmlite = pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

from interp_testing import COMPLEX_TYPES, DTYPES, FLOAT_TYPES, INT_TYPES  # noqa: E402
from interp_testing import EPS as ULP  # noqa: E402
from interp_testing import NUMBER_TYPES as ALL_TYPES  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Each test worker uses its own cache folder (tests of the cache set their own)."""
    root = tmp_path_factory.getbasetemp() / "ttlc-cache"
    monkeypatch.setenv("TTLC_CACHE_DIR", str(root))
    monkeypatch.delenv("TTLC_CACHE", raising=False)
    monkeypatch.delenv("TTLC_NUM_THREADS", raising=False)


def copy_args(args):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a.copy(order="K"))
        elif isinstance(a, list):
            out.append([x.copy(order="K") if isinstance(x, np.ndarray) else x for x in a])
        elif isinstance(a, ttlc.Group):
            out.append(ttlc.Group([x.copy(order="K") if isinstance(x, np.ndarray) else x
                                   for x in a.arrays], a.offset, a.shapes))
        else:
            out.append(a)
    return out


def arrays_of(args):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, list):
            out += [x for x in a if isinstance(x, np.ndarray)]
        elif isinstance(a, ttlc.Group):
            out += [x for x in a.arrays if isinstance(x, np.ndarray)]
    return out


def assert_same(got: np.ndarray, want: np.ndarray, ulps: float = 0, what: str = "") -> None:
    """Equal arrays; floats within `ulps` units in the last place (0: exactly)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "iub":
        bad = got != want
    else:
        g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        w = want.astype(g.dtype)
        parts = [(g.real, w.real), (g.imag, w.imag)] if g.dtype.kind == "c" else [(g, w)]
        bad = np.zeros(g.shape, dtype=bool)
        ulp = ULP.get({"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
                       "complex64": "c32", "complex128": "c64"}[got.dtype.name], 0)
        for x, y in parts:
            both_nan = np.isnan(x) & np.isnan(y)
            with np.errstate(invalid="ignore"):
                same = (x == y) | both_nan
                if ulps:
                    tol = ulps * ulp * np.maximum(np.abs(y), np.finfo(np.float64).tiny)
                    same |= np.isfinite(y) & (np.abs(x - y) <= tol)
            bad |= ~same
    if np.any(bad):
        idx = np.argwhere(bad)[:8]
        detail = ", ".join(f"{tuple(int(i) for i in k)}: cpu {got[tuple(k)]!r} interp "
                           f"{want[tuple(k)]!r}" for k in idx)
        raise AssertionError(f"{what}: {int(np.sum(bad))} of {bad.size} entries differ: {detail}")


_COMPILED = {}


def compiled(src: str, target: str, checked: bool = False):
    key = (src, target, checked)
    if key not in _COMPILED:
        _COMPILED[key] = ttlc.compile(textwrap.dedent(src), target=target, checked=checked)
    return _COMPILED[key]


def compare(src: str, args, grid=(1, 1, 1), kernel=None, ulps: float = 0):
    """Run src on both targets with copies of args; assert all arrays end up equal."""
    results = {}
    for target in ("interp", "cpu"):
        module = compiled(src, target)
        name = kernel or next(iter(module))
        a = copy_args(args)
        module[name](*a, grid=grid)
        results[target] = arrays_of(a)
    for k, (got, want) in enumerate(zip(results["cpu"], results["interp"])):
        assert_same(got, want, ulps, f"array {k}")
    return results["cpu"]


def farray(x, dtype) -> np.ndarray:
    x = np.asarray(x).astype(dtype)
    return x.copy() if x.ndim == 0 else np.asfortranarray(x)


# ---- inputs ---------------------------------------------------------------------------------
W = 32  # work-group size of the scalar-op kernels


def interesting(ty: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = DTYPES[ty]
    if ty in INT_TYPES:
        info = np.iinfo(dtype)
        special = [0, 1, -1, 2, -2, 3, 7, -7, info.max, info.min, info.max - 1, info.min + 1, 100, -100]
        rand = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
        vals = np.array(special + list(rand), dtype=np.int64)[:n]
        return rng.permutation(vals).astype(dtype)
    special = [0.0, -0.0, 1.0, -1.0, 1.5, -2.25, 3.0, 0.1, -7.75, 1e3, -1e4, 6e4, 1e-5,
               np.inf, -np.inf, np.nan, 1e20, -3e9, 300.5, -128.5]
    rand = list(rng.standard_normal(n) * 10)
    vals = np.array(special + rand, dtype=np.float64)[:n]
    vals = rng.permutation(vals)
    if ty in COMPLEX_TYPES:
        im = rng.permutation(np.array(rand[::-1][:n] + special, dtype=np.float64)[:n])
        return (vals + 1j * im).astype(dtype)
    with np.errstate(over="ignore"):
        return vals.astype(dtype)


def binary_ops(ty: str):
    ops = ["add", "sub", "mul", "div"]
    if ty not in COMPLEX_TYPES:
        ops += ["rem", "max", "min"]
    if ty in INT_TYPES:
        ops += ["shl", "shr", "and", "or", "xor"]
    return ops


def unary_ops(ty: str):
    if ty in INT_TYPES:
        return [("abs", ty), ("neg", ty), ("not", ty)]
    if ty in FLOAT_TYPES:
        return [("abs", ty), ("neg", ty)]
    comp = {"c32": "f32", "c64": "f64"}[ty]
    return [("neg", ty), ("conj", ty), ("abs", comp), ("re", comp), ("im", comp)]


def compare_ops(ty: str):
    if ty in COMPLEX_TYPES:
        return ["equal", "not_equal"]
    return ["equal", "not_equal", "less_than", "less_than_equal", "greater_than",
            "greater_than_equal"]


def scalar_ops_kernel(ty: str, varying: bool) -> str:
    """A kernel applying every binary, unary and comparison instruction of a type to the
    entries of A and B, in SPMD code (varying) or in a collective loop (uniform)."""
    bops, uops, cops = binary_ops(ty), unary_ops(ty), compare_ops(ty)
    comp = {"c32": "f32", "c64": "f64"}.get(ty, ty)
    lines = ["%a = load %A[%i] : T", "%b = load %B[%i] : T"]
    for k, op in enumerate(bops):
        lines += [f"%r{k} = {op} %a, %b : T", f"%c{k} = constant {k} : index",
                  f"store %r{k}, %O[%i, %c{k}]"]
    for k, (op, rt) in enumerate(uops):
        out = "%O" if rt == ty else "%R"
        lines += [f"%u{k} = {op} %a : {rt}", f"%cu{k} = constant {k} : index",
                  f"store %u{k}, {out}[%i, %cu{k}]"]
    for k, op in enumerate(cops):
        lines += [f"%p{k} = {op} %a, %b : bool",
                  f"%q{k} = if %p{k} -> (i32) {{", f"    %one{k} = constant 1 : i32",
                  f"    yield (%one{k})", "} else {", f"    %zero{k} = constant 0 : i32",
                  f"    yield (%zero{k})", "}", f"%cc{k} = constant {k} : index",
                  f"store %q{k}, %P[%i, %cc{k}]"]
    body = "\n".join(lines).replace(": T", f": {ty}")
    if varying:
        head = ("parallel {\n%lid = subgroup_local_id : i32\n%sg = subgroup_linear_id : i32\n"
                "%s16 = constant 16 : i32\n%t = mul %sg, %s16 : i32\n%t2 = add %t, %lid : i32\n"
                "%i = cast %t2 : index\n")
        body = head + body + "\n}"
    else:
        body = ("%lo = constant 0 : index\n%hi = constant 32 : index\n"
                "for %i = %lo, %hi {\n" + body + "\n}")
    nb = len(bops) + len(uops)
    return (f"func @ops(%A: memref<{ty}x{W}>, %B: memref<{ty}x{W}>, %O: memref<{ty}x{W}x{nb}>, "
            f"%R: memref<{comp}x{W}x{len(uops)}>, %P: memref<i32x{W}x{len(cops)}>) "
            "attributes {subgroup_size=16, work_group_size=[32,1]} {\n" + body + "\n}\n")


@pytest.mark.parametrize("varying", [False, True], ids=["uniform", "varying"])
@pytest.mark.parametrize("ty", ALL_TYPES)
def test_scalar_ops(ty, varying):
    src = scalar_ops_kernel(ty, varying)
    a, b = interesting(ty, W, 1), interesting(ty, W, 2)
    if ty in INT_TYPES:  # shift amounts and divisors of every kind, some zero
        b[:6] = np.array([0, 1, -1, 3, 100, 0], dtype=np.int64).astype(DTYPES[ty])
    nb = len(binary_ops(ty)) + len(unary_ops(ty))
    comp = {"c32": "f32", "c64": "f64"}.get(ty, ty)
    O = farray(np.zeros((W, nb)), DTYPES[ty])
    R = farray(np.zeros((W, len(unary_ops(ty)))), DTYPES[comp])
    P = farray(np.zeros((W, len(compare_ops(ty)))), np.int32)
    with np.errstate(all="ignore"):
        got = compare(src, [a, b, O, R, P], ulps=2 if ty in COMPLEX_TYPES else 0)
    assert got[2].any() or ty in FLOAT_TYPES  # something was computed


CASTS = ALL_TYPES


def cast_kernel(src_ty: str, varying: bool) -> str:
    targets = [t for t in CASTS if not (src_ty in COMPLEX_TYPES and t not in COMPLEX_TYPES)]
    params = ", ".join(f"%O{k}: memref<{t}x{W}>" for k, t in enumerate(targets))
    lines = ["%a = load %A[%i] : " + src_ty]
    for k, t in enumerate(targets):
        lines += [f"%r{k} = cast %a : {t}", f"store %r{k}, %O{k}[%i]"]
    body = "\n".join(lines)
    if varying:
        body = ("parallel {\n%lid = subgroup_local_id : i32\n%sg = subgroup_linear_id : i32\n"
                "%s16 = constant 16 : i32\n%t = mul %sg, %s16 : i32\n%t2 = add %t, %lid : i32\n"
                "%i = cast %t2 : index\n" + body + "\n}")
    else:
        body = ("%lo = constant 0 : index\n%hi = constant 32 : index\nfor %i = %lo, %hi {\n"
                + body + "\n}")
    return (f"func @casts(%A: memref<{src_ty}x{W}>, {params}) "
            "attributes {subgroup_size=16, work_group_size=[32,1]} {\n" + body + "\n}\n"), targets


@pytest.mark.parametrize("varying", [False, True], ids=["uniform", "varying"])
@pytest.mark.parametrize("ty", ALL_TYPES)
def test_casts(ty, varying):
    src, targets = cast_kernel(ty, varying)
    a = interesting(ty, W, 3)
    outs = [farray(np.zeros(W), DTYPES[t]) for t in targets]
    with np.errstate(all="ignore"):
        compare(src, [a] + outs)


MATH = ["cos", "sin", "exp", "exp2", "log", "log2", "native_cos", "native_sin", "native_exp",
        "native_exp2", "native_log", "native_log2"]


@pytest.mark.parametrize("varying", [False, True], ids=["uniform", "varying"])
@pytest.mark.parametrize("ty", FLOAT_TYPES + COMPLEX_TYPES)
def test_math(ty, varying):
    ops = MATH if ty in FLOAT_TYPES else ["exp", "exp2", "native_exp", "native_exp2"]
    lines = [f"%a = load %A[%i] : {ty}"]
    for k, op in enumerate(ops):
        lines += [f"%r{k} = {op} %a : {ty}", f"%c{k} = constant {k} : index",
                  f"store %r{k}, %O[%i, %c{k}]"]
    body = "\n".join(lines)
    if varying:
        body = ("parallel {\n%lid = subgroup_local_id : i32\n%sg = subgroup_linear_id : i32\n"
                "%s16 = constant 16 : i32\n%t = mul %sg, %s16 : i32\n%t2 = add %t, %lid : i32\n"
                "%i = cast %t2 : index\n" + body + "\n}")
    else:
        body = "%lo = constant 0 : index\n%hi = constant 32 : index\nfor %i = %lo, %hi {\n" + body + "\n}"
    src = (f"func @math(%A: memref<{ty}x{W}>, %O: memref<{ty}x{W}x{len(ops)}>) "
           "attributes {subgroup_size=16, work_group_size=[32,1]} {\n" + body + "\n}\n")
    rng = np.random.default_rng(4)
    x = rng.uniform(-20, 20, W)
    x[:6] = [0.0, -0.0, 1.0, np.inf, -np.inf, np.nan]
    if ty in COMPLEX_TYPES:
        x = x + 1j * rng.uniform(-4, 4, W)
        x[:6] = x[:6].real + 0j
    a = farray(x, DTYPES[ty])
    O = farray(np.zeros((W, len(ops))), DTYPES[ty])
    with np.errstate(all="ignore"):
        compare(src, [a, O], ulps=4)


# ---- control flow ---------------------------------------------------------------------------
DIVERGENT = """
func @div(%A: memref<i32x64>, %B: memref<f32x64>, %n: index) attributes {subgroup_size=16, work_group_size=[32,2]} {
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %w = add %t, %lid : i32
        %i = cast %w : index
        %two = constant 2 : i32
        %r = rem %w, %two : i32
        %zero = constant 0 : i32
        %even = equal %r, %zero : bool
        ; divergent if with results, nested
        %x, %y = if %even -> (i32, f32) {
            %three = constant 3 : i32
            %q = rem %w, %three : i32
            %z = equal %q, %zero : bool
            %inner = if %z -> (i32) {
                %m = constant 1000 : i32
                yield (%m)
            } else {
                %m2 = mul %w, %w : i32
                yield (%m2)
            }
            %f = constant 1.5 : f32
            yield (%inner, %f)
        } else {
            %neg = sub %zero, %w : i32
            %g = cast %w : f32
            yield (%neg, %g)
        }
        ; a loop with varying trip count and loop-carried values
        %c0 = constant 0 : i32
        %c1 = constant 1 : i32
        %s, %p = for %k = %c0, %w init(%acc = %c0, %prod = %y) -> (i32, f32) {
            %a2 = add %acc, %k : i32
            %h = constant 0.5 : f32
            %p2 = mul %prod, %h : f32
            yield (%a2, %p2)
        }
        ; a uniform loop inside divergent code (only odd work-items), step 3
        %odd = not %even : bool
        %u = if %odd -> (i32) {
            %lo = constant 1 : index
            %st = constant 3 : index
            %v = for %j = %lo, %n, %st init(%acc2 = %x) -> (i32) {
                %jj = cast %j : i32
                %v2 = xor %acc2, %jj : i32
                yield (%v2)
            }
            yield (%v)
        } else {
            yield (%s)
        }
        %tot = add %u, %s : i32
        store %tot, %A[%i]
        %pf = cast %x : f32
        %o = add %p, %pf : f32
        store %o, %B[%i]
    }
}
"""


def test_divergent_control_flow():
    A = np.zeros(64, np.int32)
    B = np.zeros(64, np.float32)
    compare(DIVERGENT, [A, B, 20])


LOOPS = """
func @loops(%A: memref<i64x?>, %n: i8, %m: i16) {
    ; collective loops: i8 and i16 induction variables, early exit on empty ranges, fibonacci
    %z8 = constant 0 : i8
    %one8 = constant 1 : i8
    %f0 = constant 0 : i64
    %f1 = constant 1 : i64
    %a, %b = for %k = %z8, %n init(%x = %f0, %y = %f1) -> (i64, i64) {
        %s = add %x, %y : i64
        yield (%y, %s)
    }
    %i0 = constant 0 : index
    store %a, %A[%i0]
    %z16 = constant 100 : i16
    %two16 = constant 2 : i16
    %c = for %k = %z16, %m, %two16 init(%x = %f0) -> (i64) {
        %kk = cast %k : i64
        %s = add %x, %kk : i64
        yield (%s)
    }
    %i1 = constant 1 : index
    store %c, %A[%i1]
    parallel {
        %lid = subgroup_local_id : i32
        %l = cast %lid : i8
        ; varying lower bound, uniform upper bound
        %d = for %k = %l, %n, %one8 init(%x = %f0) -> (i64) {
            %kk = cast %k : i64
            %s = add %x, %kk : i64
            yield (%s)
        }
        %li = cast %lid : index
        %two = constant 2 : index
        %pos = add %li, %two : index
        store %d, %A[%pos]
    }
}
"""


@pytest.mark.parametrize("n,m", [(10, 130), (0, 100), (-3, 7), (60, 101)])
def test_loops(n, m):
    compare(LOOPS, [np.zeros(20, np.int64), np.int8(n), np.int16(m)])


# ---- views ----------------------------------------------------------------------------------
VIEWS = """
func @views(%A: memref<f64x?x?,strided<1,?>>, %B: memref<f64x4x6x2>, %O: memref<f64x?>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %gid = group_id.x : index
    %s0 = size %A[0] : index
    %s1 = size %A[1] : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    %sub = subview %A[1:2, %gid:2] : memref<f64x2x2,strided<1,?>>
    %row = subview %A[0, 0:%s1] : memref<f64x?,strided<?>>
    %e = expand %B[1 -> 2 x 3] : memref<f64x4x2x3x2>
    %f = fuse %B[0, 1] : memref<f64x24x2>
    %ff = fuse %e[1, 3] : memref<f64x4x12>
    parallel {
        %lid = subgroup_local_id : i32
        %l = cast %lid : index
        %c4 = constant 4 : index
        %r = rem %l, %c4 : index
        %q = div %l, %c4 : index
        %q2 = rem %q, %c2 : index
        %q3 = rem %q, %c2 : index
        %v1 = load %sub[%q2, %q3] : f64
        %v2 = load %e[%r, %q2, %c1, %c1] : f64
        %k = add %l, %c4 : index
        %v3 = load %f[%k, %c1] : f64
        %c12 = constant 12 : index
        %k12 = rem %k, %c12 : index
        %v4 = load %ff[%r, %k12] : f64
        ; a subview at a varying offset (a varying memref)
        %rs = rem %l, %s1 : index
        %vw = subview %A[0:%s0, %rs] : memref<f64x?,strided<1>>
        %sz = size %vw[0] : index
        %last = sub %sz, %c1 : index
        %v5 = load %vw[%last] : f64
        %v6 = load %row[%rs] : f64
        %t1 = add %v1, %v2 : f64
        %t2 = add %v3, %v4 : f64
        %t3 = add %v5, %v6 : f64
        %t4 = add %t1, %t2 : f64
        %t5 = add %t4, %t3 : f64
        %n = size %O[0] : index
        %c16 = constant 16 : index
        %base = mul %gid, %c16 : index
        %o = add %base, %l : index
        store %t5, %O[%o]
        ; write through a varying view
        %sz1 = size %sub[1] : index
        store %t5, %vw[%c1]
    }
}
"""


def test_views(monkeypatch):
    # work-groups write what later ones read: run them in order, as the interpreter does
    monkeypatch.setenv("TTLC_NUM_THREADS", "1")
    rng = np.random.default_rng(5)
    full = np.asfortranarray(rng.standard_normal((5, 14)))  # viewed as full[:, ::2]
    B = np.asfortranarray(rng.standard_normal((4, 6, 2)))
    O = np.zeros(16 * 3)
    interp_full, cpu_full = full.copy(order="F"), full.copy(order="F")
    mi, mc = compiled(VIEWS, "interp"), compiled(VIEWS, "cpu")
    Oi, Oc = O.copy(), O.copy()
    mi["views"](interp_full[:, ::2], B.copy(order="F"), Oi, grid=(3,))
    mc["views"](cpu_full[:, ::2], B.copy(order="F"), Oc, grid=(3,))
    assert_same(Oc, Oi, what="O")
    assert_same(cpu_full, interp_full, what="A")


# ---- groups ---------------------------------------------------------------------------------
GROUPS = """
func @groups(%G: group<memref<i32x?x3>x?, offset: ?>, %H: group<memref<f32x4>x3>, %O: memref<i32x?>, %P: memref<f32x?>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %gid = group_id.x : index
    %ng = size %G[0] : index
    %g = load %G[%gid] : memref<i32x?x3>
    %rows = size %g[0] : index
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    %v = load %g[%c0, %c2] : i32
    %ok = associated %H : bool
    parallel {
        %lid = subgroup_local_id : i32
        %l = cast %lid : index
        ; a varying group index: every work-item its own member
        %m = rem %l, %ng : index
        %gm = load %G[%m] : memref<i32x?x3>
        %r = size %gm[0] : index
        %rr = sub %r, %c1 : index
        %x = load %gm[%rr, %c1] : i32
        %sum = add %x, %v : i32
        %ri = cast %r : i32
        %tot = add %sum, %ri : i32
        %c16 = constant 16 : index
        %base = mul %gid, %c16 : index
        %o = add %base, %l : index
        store %tot, %O[%o]
        %c3 = constant 3 : index
        %hm = rem %l, %c3 : index
        %c4 = constant 4 : index
        %hi = rem %l, %c4 : index
        %hw = if %ok -> (f32) {
            %h = load %H[%hm] : memref<f32x4>
            %hv = load %h[%hi] : f32
            yield (%hv)
        } else {
            %mone = constant -1.0 : f32
            yield (%mone)
        }
        store %hw, %P[%o]
        ; write through the varying member view: element (0, 0) of each member
        %one = constant 1 : i32
        %old = atomic_add %one, %gm[%c0, %c0] : i32
    }
}
"""


def test_groups():
    rng = np.random.default_rng(6)
    shapes = [(2, 3), (5, 3), (3, 3)]
    bufs = [rng.integers(-50, 50, 4 + r * 3).astype(np.int32) for r, _ in shapes]
    G = ttlc.Group(bufs, offset=4, shapes=shapes)
    H = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
    compare(GROUPS, [G, H, np.zeros(16 * 3, np.int32), np.zeros(48, np.float32)], grid=(3,))
    # a null group and plain member lists
    plain = [np.asfortranarray(rng.integers(-9, 9, (r, 3)).astype(np.int32)) for r, _ in shapes]
    compare(GROUPS, [plain, None, np.zeros(48, np.int32), np.zeros(48, np.float32)], grid=(2,))


# ---- atomics --------------------------------------------------------------------------------
def atomics_kernel(ty: str) -> str:
    minmax = "" if ty in COMPLEX_TYPES else f"""
        %m1 = atomic_max %v, %A[%c1] : {ty}
        %m2 = atomic_min %v, %A[%c2] : {ty}
        store %m1, %O[%i1]
        store %m2, %O[%i2]"""
    return f"""
func @atomics(%A: memref<{ty}x4>, %V: memref<{ty}x32>, %O: memref<{ty}x32x4>, %L: memref<{ty}x32>) attributes {{subgroup_size=16, work_group_size=[16,2]}} {{
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    %c3 = constant 3 : index
    %first = load %V[%c3] : {ty}
    %u = atomic_add %first, %A[%c3] : {ty}
    parallel {{
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %w = add %t, %lid : i32
        %i = cast %w : index
        %v = load %V[%i] : {ty}
        ; every work-item updates the same element: old values in lane order
        %a = atomic_add %v, %A[%c0] : {ty}
        %i0 = constant 0 : index
        %o0 = add %i, %i0 : index
        store %a, %O[%i, %c0]{minmax.replace("%i1", "%i, %c1").replace("%i2", "%i, %c2")}
        %l = atomic_load %A[%c3] : {ty}
        store %l, %L[%i]
        atomic_store %v, %A[%c3]
        ; a uniform value added by every work-item
        %b = atomic_add %first, %V[%i] : {ty}
        store %b, %O[%i, %c3]
    }}
}}
"""


@pytest.mark.parametrize("ty", ALL_TYPES)
def test_atomics(ty):
    rng = np.random.default_rng(7)
    if ty in INT_TYPES:
        V = rng.integers(-20, 20, 32).astype(DTYPES[ty])
    elif ty in COMPLEX_TYPES:
        V = (rng.integers(-8, 8, 32) + 1j * rng.integers(-8, 8, 32)).astype(DTYPES[ty]) / 4
    else:
        V = (rng.integers(-40, 40, 32) / 4).astype(DTYPES[ty])
    V[5] = V[9]  # ties for max/min
    A = np.zeros(4, DTYPES[ty])
    compare(atomics_kernel(ty), [A, V, farray(np.zeros((32, 4)), DTYPES[ty]),
                                 np.zeros(32, DTYPES[ty])])


ATOMIC_GRID = """
func @count(%C: memref<i64x3>, %F: memref<f64x1>) attributes {subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %one = constant 1 : i64
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %a = atomic_add %one, %C[%c0] : i64
        %lid = subgroup_local_id : i32
        %l = cast %lid : i64
        %b = atomic_max %l, %C[%c1] : i64
        %c = atomic_min %l, %C[%c2] : i64
        %h = constant 0.5 : f64
        %d = atomic_add %h, %F[%c0] : f64
    }
}
"""


def test_atomics_across_work_groups(monkeypatch):
    monkeypatch.setenv("TTLC_NUM_THREADS", "4")
    C = np.array([0, -5, 5], np.int64)
    F = np.zeros(1)
    compiled(ATOMIC_GRID, "cpu")["count"](C, F, grid=(50, 3, 2))
    assert C.tolist() == [50 * 6 * 32, 15, 0]
    assert F[0] == 50 * 6 * 32 * 0.5


# ---- local memory and barriers --------------------------------------------------------------
LOCAL = """
func @local(%A: memref<f32x?>, %O: memref<f32x?>) attributes {subgroup_size=16, work_group_size=[32,2]} {
    %tmp = alloca : memref<f32x64,local>
    %cnt = alloca {alignment=64} : memref<i32x2,local>
    %gid = group_id.x : index
    %c64 = constant 64 : index
    %base = mul %gid, %c64 : index
    %c0 = constant 0 : index
    %z = constant 0 : i32
    store %z, %cnt[%c0]
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %w = add %t, %lid : i32
        %i = cast %w : index
        %g = add %base, %i : index
        %x = load %A[%g] : f32
        store %x, %tmp[%i]
        %one = constant 1 : i32
        %old = atomic_add %one, %cnt[%c0] : i32
        barrier.local
        ; read a neighbour's value
        %c1 = constant 1 : index
        %j = add %i, %c1 : index
        %jm = rem %j, %c64 : index
        %y = load %tmp[%jm] : f32
        %n = load %cnt[%c0] : i32
        %nf = cast %n : f32
        %s = add %x, %y : f32
        %s2 = add %s, %nf : f32
        store %s2, %O[%g]
    }
}
"""


def test_local_memory_and_barrier():
    rng = np.random.default_rng(8)
    A = rng.standard_normal(64 * 5).astype(np.float32)
    compare(LOCAL, [A, np.zeros_like(A)], grid=(5,))


# ---- builtins -----------------------------------------------------------------------------
BUILTINS = """
func @ids(%O: memref<i64x64x10x?>) attributes {subgroup_size=16, work_group_size=[32,2]} {
    %gx = group_id.x : index
    %gy = group_id.y : index
    %gz = group_id.z : index
    %nx = num_groups.x : index
    %ny = num_groups.y : index
    %nz = num_groups.z : index
    %sx = num_subgroups.x : i32
    %sy = num_subgroups.y : i32
    %sz = num_subgroups.z : i32
    %ss = subgroup_size : i32
    %t1 = mul %gz, %ny : index
    %t2 = add %t1, %gy : index
    %t3 = mul %t2, %nx : index
    %g = add %t3, %gx : index
    parallel {
        %ix = subgroup_id.x : i32
        %iy = subgroup_id.y : i32
        %iz = subgroup_id.z : i32
        %lin = subgroup_linear_id : i32
        %loc = subgroup_local_id : i32
        %c16 = constant 16 : i32
        %t = mul %lin, %c16 : i32
        %w = add %t, %loc : i32
        %i = cast %w : index
        %k0 = constant 0 : index
        %k1 = constant 1 : index
        %k2 = constant 2 : index
        %k3 = constant 3 : index
        %k4 = constant 4 : index
        %k5 = constant 5 : index
        %k6 = constant 6 : index
        %k7 = constant 7 : index
        %k8 = constant 8 : index
        %k9 = constant 9 : index
        %a = cast %ix : i64
        store %a, %O[%i, %k0, %g]
        %b = cast %iy : i64
        store %b, %O[%i, %k1, %g]
        %c = cast %iz : i64
        store %c, %O[%i, %k2, %g]
        %d = cast %lin : i64
        store %d, %O[%i, %k3, %g]
        %e = cast %loc : i64
        store %e, %O[%i, %k4, %g]
        %f = cast %gx : i64
        store %f, %O[%i, %k5, %g]
        %h = cast %gy : i64
        store %h, %O[%i, %k6, %g]
        %j = cast %gz : i64
        store %j, %O[%i, %k7, %g]
        %m = mul %sx, %sy : i32
        %m2 = mul %m, %sz : i32
        %m3 = mul %m2, %ss : i32
        %n = cast %m3 : i64
        store %n, %O[%i, %k8, %g]
        %nn = cast %nz : i64
        store %nn, %O[%i, %k9, %g]
    }
}
"""


def test_builtins():
    grid = (3, 2, 2)
    out = compare(BUILTINS, [farray(np.full((64, 10, 12), -1), np.int64)], grid=grid)[0]
    assert out[:, 8].min() == 64 and out[:, 4].max() == 15 and out[:, 1].max() == 1


# ---- subgroup operations --------------------------------------------------------------------
def subgroup_kernel(ty: str) -> str:
    ops = [f"subgroup_{k}_{op}" for k in ("exclusive_scan", "inclusive_scan", "reduce")
           for op in ("add", "max", "min")]
    if ty in COMPLEX_TYPES:
        ops = [o for o in ops if o.endswith("_add")]
    lines = []
    for k, op in enumerate(ops):
        lines += [f"%r{k} = {op} %x : {ty}", f"%c{k} = constant {k} : index",
                  f"store %r{k}, %O[%i, %c{k}]"]
    n = len(ops)
    lines += [f"%b = subgroup_broadcast %x, %three : {ty}", f"%cb = constant {n} : index",
              "store %b, %O[%i, %cb]"]
    body = "\n        ".join(lines)
    return f"""
func @sg(%A: memref<{ty}x64>, %O: memref<{ty}x64x{n + 1}>) attributes {{subgroup_size=16, work_group_size=[32,2]}} {{
    parallel {{
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %w = add %t, %lid : i32
        %i = cast %w : index
        %three = constant 3 : i32
        %x = load %A[%i] : {ty}
        %five = constant 5 : i32
        %m5 = rem %w, %five : i32
        %z = constant 0 : i32
        %on = not_equal %m5, %z : bool
        if %on {{
        {body}
        }}
    }}
}}
"""


@pytest.mark.parametrize("ty", ALL_TYPES)
def test_subgroup_operations(ty):
    rng = np.random.default_rng(9)
    if ty in INT_TYPES:
        A = rng.integers(-100, 100, 64).astype(DTYPES[ty])
    elif ty in COMPLEX_TYPES:
        A = (rng.integers(-8, 8, 64) + 1j * rng.integers(-8, 8, 64)).astype(DTYPES[ty])
    else:
        A = rng.standard_normal(64).astype(DTYPES[ty])
    n = 10 if ty not in COMPLEX_TYPES else 4
    compare(subgroup_kernel(ty), [A, farray(np.zeros((64, n)), DTYPES[ty])],
            ulps=0 if ty in INT_TYPES else 1)


# ---- generated programs: tests/python/test_differential.py -----------------------------------


# ---- the disk cache -------------------------------------------------------------------------
CACHED = """
func @scale(%a: memref<f64x?>, %s: f64) attributes {subgroup_size=8} {
    parallel {
        %lid = subgroup_local_id : i32
        %i = cast %lid : index
        %x = load %a[%i] : f64
        %y = mul %x, %s : f64
        store %y, %a[%i]
    }
}
"""


def _entries(root):
    return sorted(p for p in root.rglob("*.o"))


def test_cache_hit_disable_and_repair(tmp_path, monkeypatch):
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path))
    first = ttlc.compile(CACHED, target="cpu")
    assert not first.cache_hit
    entries = _entries(tmp_path)
    assert len(entries) == 1
    second = ttlc.compile(CACHED, target="cpu")
    assert second.cache_hit
    a = np.arange(8.0)
    second["scale"](a, 2.0)
    assert a.tolist() == [2.0 * k for k in range(8)]
    # a different option is a different entry
    assert not ttlc.compile(CACHED, target="cpu", checked=True).cache_hit
    assert len(_entries(tmp_path)) == 2
    # a damaged entry is detected and rebuilt
    data = bytearray(entries[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    entries[0].write_bytes(bytes(data))
    third = ttlc.compile(CACHED, target="cpu")
    assert not third.cache_hit
    b = np.arange(8.0)
    third["scale"](b, 3.0)
    assert b.tolist() == [3.0 * k for k in range(8)]
    assert ttlc.compile(CACHED, target="cpu").cache_hit
    # a truncated entry too
    entries[0].write_bytes(entries[0].read_bytes()[:40])
    assert not ttlc.compile(CACHED, target="cpu").cache_hit
    # TTLC_CACHE=0: nothing read or written
    other = tmp_path / "off"
    monkeypatch.setenv("TTLC_CACHE_DIR", str(other))
    monkeypatch.setenv("TTLC_CACHE", "0")
    assert not ttlc.compile(CACHED, target="cpu").cache_hit
    assert not ttlc.compile(CACHED, target="cpu").cache_hit
    assert not other.exists() or not _entries(other)


def test_cache_default_location(tmp_path, monkeypatch):
    from ttlc.backends.cpu import cache

    monkeypatch.delenv("TTLC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "ttlc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.directory() == tmp_path / "home" / ".cache" / "ttlc"


# ---- threads --------------------------------------------------------------------------------
THREADS = """
func @rows(%A: memref<f32x?x?>, %B: memref<f32x?x?>) attributes {subgroup_size=16, work_group_size=[16,2]} {
    %j = group_id.x : index
    %m = size %A[0] : index
    %col = subview %A[0:%m, %j] : memref<f32x?>
    %out = subview %B[0:%m, %j] : memref<f32x?>
    parallel {
        %lid = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %w = add %t, %lid : i32
        %i0 = cast %w : index
        %c32 = constant 32 : index
        for %i = %i0, %m, %c32 {
            %x = load %col[%i] : f32
            %y = sin %x : f32
            %z = mul %y, %x : f32
            store %z, %out[%i]
        }
    }
}
"""


def test_threads_give_the_same_results(monkeypatch):
    rng = np.random.default_rng(10)
    A = np.asfortranarray(rng.standard_normal((77, 101)).astype(np.float32))
    module = compiled(THREADS, "cpu")
    outs = []
    for n in ("1", None, "3", "7"):
        if n is None:
            monkeypatch.delenv("TTLC_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("TTLC_NUM_THREADS", n)
        B = np.zeros_like(A, order="F")
        module["rows"](A, B, grid=(101,))
        outs.append(B)
    for B in outs[1:]:
        assert np.array_equal(B, outs[0])
    Bi = np.zeros_like(A, order="F")
    compiled(THREADS, "interp")["rows"](A, Bi, grid=(101,))
    assert_same(outs[0], Bi, 4)
    monkeypatch.setenv("TTLC_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="TTLC_NUM_THREADS"):
        module["rows"](A, B, grid=(101,))


def test_thread_count_is_read_at_every_launch(monkeypatch):
    """TTLC_NUM_THREADS is read directly from the process environment (cheaply), and every
    change to it, through os.environ, counts at the next launch."""
    from ttlc.backends.cpu.module import _usable_cpus, num_threads

    for value, want in (("3", 3), (" 5 ", 5), ("3", 3), (None, _usable_cpus()), ("", _usable_cpus())):
        if value is None:
            monkeypatch.delenv("TTLC_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("TTLC_NUM_THREADS", value)
        assert num_threads() == want
    for bad in ("zero", "0", "-2"):
        monkeypatch.setenv("TTLC_NUM_THREADS", bad)
        with pytest.raises(ValueError, match=f"not '{bad}'"):
            num_threads()
    monkeypatch.setenv("TTLC_NUM_THREADS", "2")
    assert num_threads() == 2


def test_empty_grid_and_argument_errors():
    module = compiled(THREADS, "cpu")
    A = np.zeros((4, 4), np.float32, order="F")
    with pytest.raises(ValueError, match="grid mode x is 0: each grid size must be a positive"):
        module["rows"](A, A.copy(order="F"), grid=(0,))
    for target in ("interp", "cpu"):
        m = compiled(THREADS, target)
        with pytest.raises(TypeError) as e:
            m["rows"](A.astype(np.float64), A, grid=(1,))
        assert "argument 0 (%A) of @rows" in str(e.value)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        module["rows"](A, grid=(1,))


# ---- the front end stays light ----------------------------------------------------------------
def test_check_does_not_import_llvmlite(tmp_path):
    f = tmp_path / "k.ttl"
    f.write_text(CACHED)
    code = ("import sys\nfrom ttlc.cli import main\nrc = main(['check', sys.argv[1]])\n"
            "heavy = [m for m in ('llvmlite', 'numpy') if m in sys.modules]\n"
            "print(rc, heavy)\n")
    out = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "0 []", out.stdout + out.stderr
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "ttlc", "check", str(f)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "llvmlite" not in out.stderr


# ---- what is not supported yet, and checked execution -----------------------------------------
def test_unsupported_instruction_is_a_compile_error(monkeypatch):
    """An instruction without an emitter is a CompileError at its location, never a crash
    or wrong code (every instruction has one now: remove one to see the error)."""
    from ttlc.backends.cpu import codegen

    monkeypatch.delitem(codegen.EMITTERS, "cooperative_matrix_store")
    src = """func @coop(%A: memref<f32x16x16>) attributes {subgroup_size=16} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x16,matrix_acc>
        cooperative_matrix_store %a, %A[%c0, %c0]
    }
}
"""
    with pytest.raises(ttlc.CompileError) as e:
        ttlc.compile(src, target="cpu")
    assert "not supported on target cpu yet: cooperative_matrix_store" in str(e.value)
    assert e.value.diagnostics[0][:2] == (5, 9)


CHECKED = """
func @bad(%A: memref<i32x?>, %d: i32, %G: group<memref<i32x4>x?>) attributes {subgroup_size=16} {
    %gid = group_id.x : index
    parallel {
        %lid = subgroup_local_id : i32
        %i = cast %lid : index
        %x = load %A[%i] : i32
        %q = div %x, %d : i32
        store %q, %A[%i]
        %c2 = constant 2 : index
        %g = load %G[%c2] : memref<i32x4>
    }
}
"""


def test_checked_execution_reports_errors():
    cpu = ttlc.compile(CHECKED, target="cpu", checked=True)
    ok = np.arange(16, dtype=np.int32)
    members = [np.zeros(4, np.int32)] * 3
    want = ok.copy()
    ttlc.compile(CHECKED, target="interp", checked=True)["bad"](want, 2, members, grid=(2,))
    got = ok.copy()
    cpu["bad"](got, 2, members, grid=(2,))
    assert np.array_equal(got, want)
    # index out of bounds: the lane, the group and the instruction's location
    with pytest.raises(ttlc.KernelError) as e:
        cpu["bad"](np.zeros(10, np.int32), 2, members, grid=(3,))
    msg = str(e.value)
    assert "<input>:7.14-30" in msg and "group (0, 0, 0)" in msg and "work-item (10, 0)" in msg
    assert "index 10 of mode 0 is out of bounds (size 10)" in msg
    with pytest.raises(ttlc.KernelError, match="integer division by zero"):
        cpu["bad"](ok.copy(), 0, members, grid=(1,))
    with pytest.raises(ttlc.KernelError, match=r"group index 2 is out of bounds \(group size 2\)"):
        cpu["bad"](ok.copy(), 1, members[:2], grid=(1,))
    # unchecked code divides by zero as 0, like the interpreter
    z = ok.copy()
    ttlc.compile(CHECKED, target="cpu")["bad"](z, 0, members, grid=(1,))
    assert not z.any()


def test_checked_error_comes_from_the_first_failing_group(monkeypatch):
    src = """func @g(%A: memref<i32x?>) attributes {subgroup_size=16} {
    %gid = group_id.x : index
    %x = load %A[%gid] : i32
}
"""
    monkeypatch.setenv("TTLC_NUM_THREADS", "4")
    module = ttlc.compile(src, target="cpu", checked=True)
    with pytest.raises(ttlc.KernelError, match=r"group \(5, 0, 0\): index 5 of mode 0"):
        module["g"](np.zeros(5, np.int32), grid=(40,))


def test_read_only_argument():
    A = np.arange(16, dtype=np.int32)
    A.flags.writeable = False
    with pytest.raises(ttlc.KernelError, match="read-only"):
        compiled(CHECKED, "cpu")["bad"](A, 2, [np.zeros(4, np.int32)] * 3, grid=(1,))


# ---- command line -----------------------------------------------------------------------------
def test_cli_compile_and_run(tmp_path):
    from ttlc.cli import main

    f = tmp_path / "k.ttl"
    f.write_text(CACHED)
    ll, obj = tmp_path / "k.ll", tmp_path / "k.o"
    assert main(["compile", "--target", "cpu", "--stage", "llvm-opt", str(f), "-o", str(ll)]) == 0
    assert 'define' in ll.read_text() and "@ttlc.scale" in ll.read_text()
    assert main(["compile", "--target", "cpu", str(f), "-o", str(obj)]) == 0
    assert obj.read_bytes()[:4] == b"\x7fELF"
    out = subprocess.run([sys.executable, "-m", "ttlc", "run", str(f)],  # cpu: the default
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "@scale on cpu" in out.stdout
    bad = tmp_path / "bad.ttl"
    bad.write_text("func @f() attributes {subgroup_size=128} { }\n")
    out = subprocess.run([sys.executable, "-m", "ttlc", "compile", "--target", "cpu", str(bad),
                          "-o", str(obj)], capture_output=True, text=True)
    assert out.returncode == 1 and "subgroup size 128 is not supported by target cpu" in out.stderr


def test_cpu_is_the_default_target():
    assert ttlc.compile(CACHED).target == "cpu"
    assert ttlc.compile(CACHED, target="interp").target == "interp"


# ---- collective BLAS (lowered to coopmatrix code) and coopmatrix instructions -------------------
def assert_close(got: np.ndarray, want: np.ndarray, ty: str, what: str = "") -> None:
    """Results of sums whose order may differ: relative to the largest entry."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if ty in INT_TYPES:
        assert np.array_equal(got, want), what
        return
    g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
    w = want.astype(g.dtype)
    tol = {"bf16": 2 ** -6, "f16": 2 ** -9}.get(ty, 64 * ULP.get(ty, 2 ** -23))
    scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=what)


def blas_compare(src: str, args, out_index: int, ty: str, grid=(1, 1, 1)):
    results = {}
    for target in ("interp", "cpu"):
        a = copy_args(args)
        module = compiled(src, target)
        module[next(iter(module))](*a, grid=grid)
        results[target] = a[out_index]
    assert_close(results["cpu"], results["interp"], ty)


def rand(shape, ty, seed):
    rng = np.random.default_rng(seed)
    if ty in INT_TYPES:
        return farray(rng.integers(-8, 8, shape), DTYPES[ty])
    x = rng.standard_normal(shape)
    if ty in COMPLEX_TYPES:
        x = x + 1j * rng.standard_normal(shape)
    return farray(x, DTYPES[ty])


def mtype(ty, shape, dynamic):
    return f"memref<{ty}" + "".join("x?" if dynamic else f"x{s}" for s in shape) + ">"


SCALARS = {"i8": 2, "i16": 2, "i32": 2, "i64": 2, "index": 2}


GEMM_CASES = [(ty, ta, tb, dyn) for ty in ("f32", "f64") for ta in "nt" for tb in "nt"
              for dyn in (False, True) if dyn or ty == "f32"]
GEMM_CASES += [("c64", "n", "t", True), ("c64", "t", "n", False), ("i32", "n", "n", True),
               ("i32", "t", "t", False)]


@pytest.mark.parametrize("ty,ta,tb,dynamic", GEMM_CASES)
def test_gemm(ty, ta, tb, dynamic):
    M, N, K = 37, 21, 19
    ashape = (M, K) if ta == "n" else (K, M)
    bshape = (K, N) if tb == "n" else (N, K)
    src = f"""func @k(%alpha: {ty}, %A: {mtype(ty, ashape, dynamic)}, %B: {mtype(ty, bshape, dynamic)},
                     %beta: {ty}, %C: {mtype(ty, (M, N), dynamic)}) {{
        gemm.{ta}.{tb} %alpha, %A, %B, %beta, %C
    }}"""
    alpha, beta = (2, -1) if ty in INT_TYPES else (0.5, 1.5)
    blas_compare(src, [alpha, rand(ashape, ty, 1), rand(bshape, ty, 2), beta, rand((M, N), ty, 3)],
                 4, ty)


@pytest.mark.parametrize("ab,c", [("f16", "f32"), ("bf16", "f32"), ("i8", "i32"), ("f16", "f16"),
                                  ("bf16", "bf16"), ("f32", "c64")])
def test_gemm_mixed_precision(ab, c):
    M, N, K = 33, 17, 40
    src = f"""func @k(%alpha: {ab}, %A: memref<{ab}x?x?>, %B: memref<{ab}x?x?>, %beta: {c},
                     %C: memref<{c}x?x?>) {{
        gemm %alpha, %A, %B, %beta, %C
    }}"""
    alpha, beta = (2, -1) if c in INT_TYPES else (0.5, 1.5)
    blas_compare(src, [alpha, rand((M, K), ab, 4), rand((K, N), ab, 5), beta, rand((M, N), c, 6)],
                 4, c)


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (16, 16, 16), (4, 9, 0), (0, 5, 3), (65, 3, 2)])
def test_gemm_shapes_and_batches(M, N, K):
    src = """func @k(%alpha: f64, %A: group<memref<f64x?x?>x?>, %B: group<memref<f64x?x?>x?>, %C: group<memref<f64x?x?>x?>) {
        %beta = constant 1.0 : f64
        %g = group_id.x : index
        %a = load %A[%g] : memref<f64x?x?>
        %b = load %B[%g] : memref<f64x?x?>
        %c = load %C[%g] : memref<f64x?x?>
        gemm.atomic %alpha, %a, %b, %beta, %c
    }"""
    A = [rand((M, K), "f64", k) for k in range(3)]
    B = [rand((K, N), "f64", 10 + k) for k in range(3)]
    C = [rand((M, N), "f64", 20 + k) for k in range(3)]
    results = {}
    for target in ("interp", "cpu"):
        c = [x.copy(order="F") for x in C]
        compiled(src, target)["k"](2.0, A, B, c, grid=(3,))
        results[target] = c
    for g, w in zip(results["cpu"], results["interp"]):
        assert_close(g, w, "f64")


@pytest.mark.parametrize("ty", ["f32", "c32", "f16"])
def test_gemv_ger_hadamard_axpby_sum_cumsum(ty):
    M, N = 29, 13
    src = f"""func @k(%A: memref<{ty}x{M}x{N}>, %x: memref<{ty}x{N}>, %y: memref<{ty}x{M}>, %C: memref<{ty}x{M}x{N}>, %D: memref<{ty}x{M}x{N}>, %s: memref<{ty}x{M}>, %E: memref<{ty}x{M}x{N}>) {{
        %alpha = constant {'[0.5, 0.25]' if ty in COMPLEX_TYPES else '0.5'} : {ty}
        %one = constant {'[1.0, 0.0]' if ty in COMPLEX_TYPES else '1.0'} : {ty}
        %zero = constant {'[0.0, 0.0]' if ty in COMPLEX_TYPES else '0.0'} : {ty}
        gemv %alpha, %A, %x, %one, %y
        ger %alpha, %y, %x, %one, %C
        hadamard %alpha, %A, %C, %zero, %D
        axpby %alpha, %D, %one, %C
        sum %one, %A, %alpha, %s
        cumsum %alpha, %A, 1, %one, %E
    }}"""
    args = [rand((M, N), ty, 1), rand((N,), ty, 2), rand((M,), ty, 3), rand((M, N), ty, 4),
            rand((M, N), ty, 5), rand((M,), ty, 6), rand((M, N), ty, 7)]
    results = {}
    for target in ("interp", "cpu"):
        a = copy_args(args)
        compiled(src, target)["k"](*a)
        results[target] = a
    for k in range(2, 7):
        assert_close(results["cpu"][k], results["interp"][k], ty, f"argument {k}")


COOP = """
func @coop(%A: memref<f32x?x?>, %B: memref<f32x20x20>, %O: memref<f32x32x16>, %X: memref<f32x64x4>, %R: memref<f32x32x2>, %Q: memref<f32x16x2>) attributes {subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %sg = subgroup_linear_id : i32
        %lid = subgroup_local_id : i32
        %sgi = cast %sg : index
        %c0 = constant 0 : index
        %c3 = constant 3 : index
        %c16 = constant 16 : index
        %row = mul %sgi, %c16 : index
        ; partial tiles: rows and columns outside A read as zero
        %a = cooperative_matrix_load.both_checked %A[%row, %c3] : coopmatrix<f32x16x16,matrix_acc>
        %bt = cooperative_matrix_load.t.rows_checked %B[%c3, %row] : coopmatrix<f32x16x16,matrix_acc>
        %s = add %a, %bt : coopmatrix<f32x16x16,matrix_acc>
        %two = constant 2.0 : f32
        %sc = cooperative_matrix_scale %two, %s : coopmatrix<f32x16x16,matrix_acc>
        ; work-item views
        %e0 = cooperative_matrix_extract %sc[0] : f32
        %e5 = cooperative_matrix_extract %sc[5] : f32
        %lf = cast %lid : f32
        %ins = cooperative_matrix_insert %lf, %sc[3] : coopmatrix<f32x16x16,matrix_acc>
        %ap = cooperative_matrix_apply (%i, %j, %v) = %ins -> coopmatrix<f32x16x16,matrix_acc> {
            %fi = cast %i : f32
            %fj = cast %j : f32
            %w = mul %fi, %fj : f32
            %z = add %v, %w : f32
            yield (%z)
        }
        ; divergent merge: odd work-items keep the applied matrix, even ones the scaled one
        %c2 = constant 2 : i32
        %par = rem %lid, %c2 : i32
        %zero = constant 0 : i32
        %odd = not_equal %par, %zero : bool
        %m = if %odd -> (coopmatrix<f32x16x16,matrix_acc>) {
            yield (%ap)
        } else {
            yield (%sc)
        }
        cooperative_matrix_store %m, %O[%row, %c0]
        %rr = cooperative_matrix_reduce_add.row %m : coopmatrix<f32x16x1,matrix_acc>
        %rc = cooperative_matrix_reduce_max.column %m : coopmatrix<f32x1x16,matrix_acc>
        %sgi1 = cast %sg : index
        cooperative_matrix_store %rr, %R[%row, %sgi1]
        %rcs = cooperative_matrix_load %O[%c0, %c0] : coopmatrix<f32x16x16,matrix_acc>
        %w = cast %lid : index
        %e0i = cast %sg : index
        %x0 = add %row, %w : index
        store %e0, %X[%x0, %c0]
        %c1 = constant 1 : index
        store %e5, %X[%x0, %c1]
        ; atomics on one tile, both subgroups
        %old = cooperative_matrix_atomic_add %sc, %Q[%c0, %c0] : coopmatrix<f32x16x2,matrix_acc>
    }
}
"""


def test_coopmatrix_instructions(monkeypatch):
    rng = np.random.default_rng(11)
    A = farray(rng.integers(-4, 4, (30, 17)), np.float32)
    B = farray(rng.integers(-4, 4, (20, 20)), np.float32)
    src = COOP.replace("%sc, %Q", "%small, %Q").replace(
        "        %old = cooperative_matrix_atomic_add",
        "        %small = cooperative_matrix_load %O[%c0, %c0] : coopmatrix<f32x16x2,matrix_acc>\n"
        "        %old = cooperative_matrix_atomic_add")
    args = [A, B, farray(np.zeros((32, 16)), np.float32), farray(np.zeros((64, 4)), np.float32),
            farray(np.zeros((32, 2)), np.float32), farray(np.ones((16, 2)), np.float32)]
    compare(src, args)


REDUCE_COLUMNS = """
func @k(%A: memref<{T}x{M}x{N}>, %S: memref<{T}x3x{N}>) attributes {{subgroup_size=8, work_group_size=[8,1]}} {{
    %c0 = constant 0 : index
    parallel {{
        %m = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<{T}x{M}x{N},matrix_acc>
        %s = cooperative_matrix_reduce_add.column %m : coopmatrix<{T}x1x{N},matrix_acc>
        %x = cooperative_matrix_reduce_max.column %m : coopmatrix<{T}x1x{N},matrix_acc>
        %n = cooperative_matrix_reduce_min.column %m : coopmatrix<{T}x1x{N},matrix_acc>
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        cooperative_matrix_store %s, %S[%c0, %c0]
        cooperative_matrix_store %x, %S[%c1, %c0]
        cooperative_matrix_store %n, %S[%c2, %c0]
    }}
}}
"""


@pytest.mark.parametrize("T,M,N", [("f64", 8, 8), ("f32", 32, 3), ("f64", 16, 5), ("i32", 8, 1),
                                   ("c64", 8, 2)])
def test_coopmatrix_reduce_columns_agree_with_numpy(T, M, N):
    """cooperative_matrix_reduce_*.column halves the rows of every column at once: the
    sums, maxima and minima of the columns, integers and multiples of 1/4 (exact in any
    order), against NumPy's (complex: no max and min, only the sums)."""
    rng = np.random.default_rng(5)
    A = rng.integers(-40, 40, (M, N)) / (1 if T == "i32" else 4)
    if T == "c64":
        A = A + 1j * rng.integers(-40, 40, (M, N)) / 4
        src = "\n".join(line for line in REDUCE_COLUMNS.format(T=T, M=M, N=N).splitlines()
                         if "%x" not in line and "%n" not in line)
    else:
        src = REDUCE_COLUMNS.format(T=T, M=M, N=N)
    A = farray(A, DTYPES[T])
    S = farray(np.zeros((3, N)), DTYPES[T])
    ttlc.compile(src, target="cpu")["k"](A, S)
    rows = 1 if T == "c64" else 3
    want = np.stack([A.sum(axis=0), A.max(axis=0), A.min(axis=0)])[:rows] if T != "c64" \
        else A.sum(axis=0)[None]
    np.testing.assert_array_equal(S[:rows], want)


ONE_ENTRY_STORE = """
func @k(%A: memref<{T}x2x3>, %s: {W}) attributes {{subgroup_size=16, work_group_size=[16,2]}} {{
    %c0 = constant 0 : index
    %c2 = constant 2 : index
    %t = subview %A[0:1, 0:3] : memref<{T}x1x3,strided<1,2>>
    parallel {{
        %sy = subgroup_id.y : i32
        %one = constant 1 : i32
        %last = equal %sy, %one : bool
        if %last {{
            %m = constant {V} : coopmatrix<{W}x16x2,matrix_acc>
            %m2 = cooperative_matrix_scale %s, %m : coopmatrix<{W}x16x2,matrix_acc>
            %h = cast %m2 : coopmatrix<{T}x16x2,matrix_acc>
            cooperative_matrix_store.both_checked %h, %t[%c0, %c2]
        }}
    }}
}}
"""


@pytest.mark.parametrize("T, W, V, dtype", [
    ("bf16", "f32", "1.5", ml_dtypes.bfloat16), ("f16", "f32", "1.5", np.float16),
    ("i16", "i32", "3", np.int16), ("i8", "i32", "3", np.int8)])
def test_coopmatrix_store_of_one_narrow_entry(T, W, V, dtype):
    """A checked store that writes a single 8/16-bit entry (A[0, 2]) writes only it: LLVM
    once turned such a store of a truncated value into a 4-byte store, clobbering A[1, 2]."""
    src = ONE_ENTRY_STORE.format(T=T, W=W, V=V)
    A = np.asfortranarray(np.full((2, 3), -1, dtype=dtype))
    want = A.copy()
    want[0, 2] = 2 * float(V)
    scale = np.dtype(np.float32 if W == "f32" else np.int32).type(2)
    ttlc.compile(src, target="cpu")["k"](A, scale, grid=(1, 1, 1))
    np.testing.assert_array_equal(A.astype(np.float32), want.astype(np.float32))


def test_gemm_i8_into_i64_one_row_strided_a():
    """gemm.n.t of i8 into i64 with a constant alpha and one row of A in a strided view
    (a generated program): the entries of B broadcast by the microkernel must be the
    right ones (LLVM for AVX-512 took B[1, j] for B[0, j] after sign-extending the
    checked load of B as a whole).  Expected values from NumPy."""
    src = """func @k(%A: memref<i8x1x5,strided<1,4>>, %B: memref<i8x5x5>, %C: memref<i64x1x5>) {
        %alpha = constant 3 : i8
        %beta = constant -6 : i64
        gemm.n.t %alpha, %A, %B, %beta, %C
    }"""
    a_buf = np.array([-1, 0, 5, 9, -9, -7, 6, 9, -5, -4, 7, -1, -4, 6, -5, -2, 3], np.int8)
    A = np.lib.stride_tricks.as_strided(a_buf, (1, 5), (1, 4))  # A = [[-1, -9, -5, -4, 3]]
    B = farray([[1, 6, 5, 9, -6], [-8, 1, -7, -7, 0], [-9, 6, -4, -2, -5], [7, -3, -7, -2, -9],
                [5, -1, -1, 8, 5]], np.int8)
    C = farray([[-8, -4, 0, 0, -7]], np.int64)
    want = 3 * (A.astype(np.int64) @ B.T.astype(np.int64)) - 6 * C
    for target in ("interp", "cpu"):
        c = C.copy(order="F")
        compiled(src, target)["k"](A, B, c, grid=(1, 1, 1))
        np.testing.assert_array_equal(c, want, err_msg=target)


# ---- checked stores of rows known at compile time -------------------------------------------
STATIC_ROWS_STORE = """
func @k(%A: memref<f32x9x3>, %C: {param})
        attributes{{subgroup_size=16, work_group_size=[16,1]}} {{
    %z = constant 0 : index
    %x = constant {x} : index
    {view}
    parallel {{
        %a = cooperative_matrix_load.rows_checked %A[%z,%z] : coopmatrix<f32x16x3,matrix_acc>
        cooperative_matrix_store.rows_checked %a, %c[%x,%z]
    }}
}}
"""
#: static: a view of 9 rows of a 12 x 3 %C; dynamic: %C is that view
STORE_TARGETS = {
    "static": ("memref<f32x12x3>", "%c = subview %C[0:9,0:3] : memref<f32x9x3,strided<1,12>>"),
    "dynamic": ("memref<f32x?x3,strided<1,?>>", "%n = size %C[0] : index\n"
                "    %c = subview %C[0:%n,0:3] : memref<f32x?x3,strided<1,?>>")}


@pytest.mark.parametrize("rows,x", [("static", 0), ("dynamic", 0), ("static", -2)])
def test_checked_rows_known_at_compile_time_are_plain_stores(tmp_path, rows, x):
    """Spec: cooperative_matrix_store (rows_checked).  9 of 16 rows at a constant position
    of a memref of 9 static rows are stored as vectors of 8 and 1 lanes (no
    llvm.masked.store, vmaskmovps without AVX-512); through a memref of dynamic rows, or
    at a negative position (rows before the memref skipped), the store stays masked.
    The rows below the 9 (the rest of %C) are left alone."""
    param, view = STORE_TARGETS[rows]
    src = STATIC_ROWS_STORE.format(param=param, view=view, x=x)
    f = tmp_path / "k.ir"
    f.write_text(src)
    out = subprocess.run([sys.executable, "-m", "ttlc", "compile", "-t", "cpu", "-s", "llvm",
                          str(f), "-o", "-"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert ("llvm.masked.store" in out.stdout) == (rows == "dynamic" or x < 0)
    A = np.asfortranarray(np.arange(1, 28, dtype=np.float32).reshape(9, 3))
    C = np.full((12, 3), -1.0, np.float32, order="F")
    ttlc.compile(src, target="cpu")["k"](A, C if rows == "static" else C[:9])
    want = np.zeros((9, 3), np.float32)  # the tile: A's 9 rows, then zeros, from row x
    want[:9 + x] = A[-x:]
    np.testing.assert_array_equal(C[:9], want)
    np.testing.assert_array_equal(C[9:], -1.0)
