"""Control flow on every target (interp, cpu): for, if, parallel, foreach, foreach_tile.

Uniform control flow runs in the collective region; divergent control flow runs in SPMD
regions where every work-item has its own condition or trip count (lane masks).
Expected results are computed with plain Python loops.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from interp_testing import farray, run


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


# ---- for ------------------------------------------------------------------------------
def test_for_fibonacci_reference_example():
    """The reference's example, verbatim apart from the stores."""
    src = """func @k(%out: memref<i64x2>) {
        %from = constant 2 : i32
        %to = constant 6 : i32
        %f0 = constant 0 : i64
        %f1 = constant 1 : i64
        %fn_1, %fn = for %n=%from,%to init(%fn_2=%f0,%fn_1=%f1) -> (i64,i64) {
            %fn = add %fn_2, %fn_1 : i64
            yield (%fn_1, %fn)
        }
        ; %fn_1 contains the fourth Fibonacci number and %fn the fifth Fibonacci number
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        store %fn_1, %out[%c0]
        store %fn, %out[%c1]
    }"""
    out = np.zeros(2, np.int64)
    run(src, out)
    assert out.tolist() == [fib(4), fib(5)] == [3, 5]


def test_for_fibonacci_spmd_varying_trip_counts():
    """The same loop with a per-work-item upper bound (0 to 40 iterations, some lanes
    never enter the loop) inside an SPMD region."""
    src = """func @k(%to: memref<i32x?>, %out: memref<i64x?x2>) {
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %n = size %to[0] : index
        foreach (%i) = (%c0), (%n) {
            %from = constant 2 : i32
            %t = load %to[%i] : i32
            %f0 = constant 0 : i64
            %f1 = constant 1 : i64
            %fn_1, %fn = for %k=%from,%t init(%fn_2=%f0,%fn_1=%f1) -> (i64,i64) {
                %fn = add %fn_2, %fn_1 : i64
                yield (%fn_1, %fn)
            }
            store %fn_1, %out[%i, %c0]
            store %fn, %out[%i, %c1]
        }
    }"""
    to = np.asarray([2 + (k * 7) % 41 for k in range(37)] + [0, 1, -5], np.int32)
    out = farray(np.full((len(to), 2), -1), np.int64)
    run(src, to, out)
    for t, (a, b) in zip(to, out.tolist()):
        trips = max(0, t - 2)
        assert (a, b) == (fib(trips), fib(trips + 1)), t


@pytest.mark.parametrize("ty", ["i16", "i32", "index"])
def test_for_step_uniform(ty):
    """A collective loop with a step: the trip variable takes from, from+step, ... < to."""
    src = f"""func @k(%out: memref<{ty}x64>, %cnt: memref<i32>, %lo: {ty}, %hi: {ty}, %st: {ty}) {{
        %z = constant 0 : i32
        %last = for %k = %lo, %hi, %st init(%c = %z) -> (i32) {{
            %ki = cast %k : index
            %ci = cast %c : index
            store %k, %out[%ci]
            %one = constant 1 : i32
            %c2 = add %c, %one : i32
            yield (%c2)
        }}
        store %last, %cnt[]
    }}"""
    for lo, hi, st in [(3, 40, 5), (-7, 8, 3), (0, 0, 1), (5, 1, 1), (0, 63, 1), (10, 11, 100)]:
        out = np.full(64, -99, dtype={"i16": np.int16, "i32": np.int32, "index": np.int64}[ty])
        cnt = np.zeros((), np.int32)
        run(src, out, cnt, lo, hi, st)
        expected = list(range(lo, hi, st))
        assert int(cnt) == len(expected)
        assert out[:len(expected)].tolist() == expected
        assert (out[len(expected):] == -99).all()


def test_for_step_spmd_varying_loop_carried():
    """Per work-item from/to/step and three loop-carried values of different types;
    a nested loop whose bounds depend on the outer trip variable (triangular)."""
    src = """func @k(%lo: memref<index x?>, %hi: memref<index x?>, %st: memref<index x?>,
                     %out: memref<i64x?x4>) {
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        %n = size %lo[0] : index
        foreach (%i) = (%c0), (%n) {
            %a = load %lo[%i] : index
            %b = load %hi[%i] : index
            %s = load %st[%i] : index
            %zero = constant 0 : i64
            %one = constant 1.0 : f64
            %zi = constant 0 : i32
            %sum, %prod, %cnt = for %k = %a, %b, %s init(%acc = %zero, %p = %one, %c = %zi)
                    -> (i64, f64, i32) {
                %k64 = cast %k : i64
                %acc2 = add %acc, %k64 : i64
                %half = constant 0.5 : f64
                %p2 = mul %p, %half : f64
                %inc = constant 1 : i32
                %c2i = add %c, %inc : i32
                yield (%acc2, %p2, %c2i)
            }
            ; triangular: sum over k in [a, b) of (number of j in [0, k mod 5))
            %five = constant 5 : index
            %tri = for %k = %a, %b init(%t = %zero) -> (i64) {
                %m = rem %k, %five : index
                %t2 = for %j = %c0, %m init(%u = %t) -> (i64) {
                    %one64 = constant 1 : i64
                    %u2 = add %u, %one64 : i64
                    yield (%u2)
                }
                yield (%t2)
            }
            %c64 = cast %cnt : i64
            ; 0.5^cnt * 2^40 is exact
            %scale = constant 1099511627776.0 : f64
            %ps = mul %prod, %scale : f64
            %pi = cast %ps : i64
            store %sum, %out[%i, %c0]
            store %pi, %out[%i, %c1]
            store %c64, %out[%i, %c2]
            store %tri, %out[%i, %c3]
        }
    }"""
    rng = np.random.default_rng(1)
    n = 45
    lo = rng.integers(-20, 20, n)
    hi = rng.integers(-10, 40, n)
    st = rng.integers(1, 7, n)
    out = farray(np.full((n, 4), -1), np.int64)
    run(src, lo.astype(np.int64), hi.astype(np.int64), st.astype(np.int64), out)
    for k in range(n):
        ks = list(range(lo[k], hi[k], st[k]))
        # C remainder: negative k gives a negative m, so the inner loop does not run
        tri = sum(max(0, int(np.fmod(x, 5))) for x in range(lo[k], hi[k]))
        assert out[k].tolist() == [sum(ks), 2 ** 40 >> len(ks) if len(ks) <= 40 else 0,
                                   len(ks), tri], k


def test_for_uniform_bounds_in_divergent_branch():
    """A loop with uniform bounds inside a divergent if: only active lanes store."""
    src = """func @k(%x: memref<i32x?>, %out: memref<i32x?x8>) {
        %c0 = constant 0 : index
        %n = size %x[0] : index
        foreach (%i) = (%c0), (%n) {
            %v = load %x[%i] : i32
            %z = constant 0 : i32
            %p = greater_than %v, %z : bool
            if %p {
                %c8 = constant 8 : index
                %s = for %k = %c0, %c8 init(%a = %v) -> (i32) {
                    store %a, %out[%i, %k]
                    %a2 = add %a, %a : i32
                    yield (%a2)
                }
            }
        }
    }"""
    x = np.asarray([3, -1, 0, 5, 7, -2, 1, 9, 2, -3, 4, 11, 6, -8, 8, 10, 12, -1, 13], np.int32)
    out = farray(np.full((len(x), 8), -7), np.int32)
    run(src, x, out)
    for k, v in enumerate(x):
        assert out[k].tolist() == ([v << j for j in range(8)] if v > 0 else [-7] * 8)


# ---- if -------------------------------------------------------------------------------------
IF_EXAMPLE = """
        %c16a = constant 16 : i32
        %1 = less_than %0, %c16a : bool
        %x = if %1 -> (i32) {
            yield (%0)
        } else {
            %c16 = constant 16 : i32
            yield (%c16)
        }
"""


def test_if_yield_reference_example_uniform():
    src = f"""func @k(%in: memref<i32x?>, %out: memref<i32x?>) {{
        %c0 = constant 0 : index
        %n = size %in[0] : index
        for %i = %c0, %n {{
            %0 = load %in[%i] : i32
            {IF_EXAMPLE}
            store %x, %out[%i]
        }}
    }}"""
    x = np.asarray([-5, 0, 15, 16, 17, 100, 3], np.int32)
    out = np.zeros_like(x)
    run(src, x, out)
    assert out.tolist() == np.minimum(x, 16).tolist()


def test_if_yield_reference_example_divergent():
    src = f"""func @k(%in: memref<i32x?>, %out: memref<i32x?>) {{
        %c0 = constant 0 : index
        %n = size %in[0] : index
        foreach (%i) = (%c0), (%n) {{
            %0 = load %in[%i] : i32
            {IF_EXAMPLE}
            store %x, %out[%i]
        }}
    }}"""
    x = np.arange(-20, 45, 3).astype(np.int32)
    out = np.zeros_like(x)
    run(src, x, out)
    assert out.tolist() == np.minimum(x, 16).tolist()


NESTED_IF = """func @k(%in: memref<i32x?>, %out: memref<i32x?x3>) {
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c2 = constant 2 : index
    %n = size %in[0] : index
    foreach (%i) = (%c0), (%n) {
        %v = load %in[%i] : i32
        %zero = constant 0 : i32
        %m10 = constant -10 : i32
        %two = constant 2 : i32
        %neg = less_than %v, %zero : bool
        %cls, %f = if %neg -> (i32, f32) {
            %small = less_than %v, %m10 : bool
            %r1, %f1 = if %small -> (i32, f32) {
                %a = constant 0 : i32
                %fa = constant 0.5 : f32
                yield (%a, %fa)
            } else {
                %b = constant 1 : i32
                %fb = constant 1.5 : f32
                yield (%b, %fb)
            }
            yield (%r1, %f1)
        } else {
            %r = rem %v, %two : i32
            %even = equal %r, %zero : bool
            %r2 = if %even -> (i32) {
                %c = constant 2 : i32
                yield (%c)
            } else {
                %d = constant 3 : i32
                yield (%d)
            }
            %f2 = cast %v : f32
            yield (%r2, %f2)
        }
        store %cls, %out[%i, %c0]
        %fi = cast %f : i32
        store %fi, %out[%i, %c1]
        ; if without else and without results, divergent stores
        %big = greater_than %v, %two : bool
        if %big {
            %odd = not_equal %cls, %two : bool
            if %odd {
                %x = constant 77 : i32
                store %x, %out[%i, %c2]
            } else {
                %y = constant 66 : i32
                store %y, %out[%i, %c2]
            }
        }
    }
}
"""


def test_nested_if_divergent():
    x = np.asarray(list(range(-25, 30, 2)) + list(range(-4, 9)), np.int32)
    out = farray(np.full((len(x), 3), -1), np.int32)
    run(NESTED_IF, x, out)
    for k, v in enumerate(x.tolist()):
        cls = (0 if v < -10 else 1) if v < 0 else (2 if v % 2 == 0 else 3)
        f = (0.5 if v < -10 else 1.5) if v < 0 else float(v)
        third = -1 if v <= 2 else (77 if cls != 2 else 66)
        assert out[k].tolist() == [cls, int(f), third], v


def test_if_uniform_condition_in_spmd_region():
    """A uniform condition inside an SPMD region takes one branch for all work-items."""
    src = """func @k(%flag: i32, %out: memref<i32x?>) {
        parallel {
            %z = constant 0 : i32
            %p = not_equal %flag, %z : bool
            %l = subgroup_local_id : i32
            %li = cast %l : index
            %v = if %p -> (i32) {
                yield (%l)
            } else {
                %m = constant -1 : i32
                yield (%m)
            }
            store %v, %out[%li]
        }
    }"""
    for flag, expected in ((1, list(range(16))), (0, [-1] * 16)):
        out = np.zeros(16, np.int32)
        run(src, flag, out)
        assert out.tolist() == expected


# ---- parallel ----------------------------------------------------------------------------
def test_parallel_each_work_item_once_and_barrier():
    """parallel runs the region once per work-item; after a barrier every work-item sees
    the stores of the others (local memory)."""
    src = """func @k(%out: memref<i32x?x?>) attributes {subgroup_size=16, work_group_size=[32,2]} {
        %tmp = alloca : memref<i32x64, local>
        %g = group_id.x : index
        parallel {
            %sl = subgroup_linear_id : i32
            %s = subgroup_size : i32
            %l = subgroup_local_id : i32
            %t = mul %sl, %s : i32
            %lane = add %t, %l : i32
            %li = cast %lane : index
            %gi = cast %g : i32
            %hundred = constant 100 : i32
            %gv = mul %gi, %hundred : i32
            %v = add %lane, %gv : i32
            store %v, %tmp[%li]
            barrier.local
            %one = constant 1 : i32
            %n1 = add %lane, %one : i32
            %w = constant 64 : i32
            %n2 = rem %n1, %w : i32
            %ni = cast %n2 : index
            %u = load %tmp[%ni] : i32
            store %u, %out[%li, %g]
        }
    }"""
    out = farray(np.full((64, 3), -1), np.int32)
    run(src, out, grid=(3, 1, 1))
    for g in range(3):
        assert out[:, g].tolist() == [(k + 1) % 64 + 100 * g for k in range(64)]


# ---- foreach --------------------------------------------------------------------------------
FOREACH = {
    1: """func @k(%cnt: memref<i32x?>, %val: memref<i64x?>, %f0: index, %t0: index){attrs} {{
        foreach (%i) = (%f0), (%t0) {{
            %one = constant 1 : i32
            %o = atomic_add %one, %cnt[%i] : i32
            %v = cast %i : i64
            store %v, %val[%i]
        }}
    }}""",
    2: """func @k(%cnt: memref<i32x?x?>, %val: memref<i64x?x?>, %f0: index, %t0: index,
                  %f1: i32, %t1: i32){attrs} {{
        foreach (%i, %j) = (%f0, %f1), (%t0, %t1) {{
            %one = constant 1 : i32
            %ji = cast %j : index
            %o = atomic_add %one, %cnt[%i, %ji] : i32
            %a = cast %i : i64
            %b = cast %j : i64
            %h = constant 1000 : i64
            %bh = mul %b, %h : i64
            %v = add %a, %bh : i64
            store %v, %val[%i, %ji]
        }}
    }}""",
    3: """func @k(%cnt: memref<i32x?x?x?>, %val: memref<i64x?x?x?>, %f0: index, %t0: index,
                  %f1: index, %t1: index, %f2: index, %t2: index){attrs} {{
        foreach (%i, %j, %k) = (%f0, %f1, %f2), (%t0, %t1, %t2) {{
            %one = constant 1 : i32
            %o = atomic_add %one, %cnt[%i, %j, %k] : i32
            %a = cast %i : i64
            %b = cast %j : i64
            %c = cast %k : i64
            %h = constant 1000 : i64
            %bh = mul %b, %h : i64
            %hh = mul %h, %h : i64
            %ch = mul %c, %hh : i64
            %v0 = add %a, %bh : i64
            %v = add %v0, %ch : i64
            store %v, %val[%i, %j, %k]
        }}
    }}""",
}


@pytest.mark.parametrize("attrs", ["", " attributes {subgroup_size=16, work_group_size=[32,2]}"])
@pytest.mark.parametrize("ranges", [
    [(3, 50)], [(0, 16)], [(5, 5)], [(7, 2)],
    [(1, 7), (2, 13)], [(0, 16), (0, 4)], [(0, 3), (4, 4)],
    [(0, 5), (1, 4), (2, 7)], [(2, 3), (0, 17), (1, 2)],
])
def test_foreach_covers_every_point_once(ranges, attrs):
    n = len(ranges)
    src = FOREACH[n].format(attrs=attrs)
    shape = tuple(max(t, f, 1) + 1 for f, t in ranges)
    cnt = farray(np.zeros(shape), np.int32)
    val = farray(np.full(shape, -1), np.int64)
    args = []
    for d, (f, t) in enumerate(ranges):
        if n == 2 and d == 1:
            args += [np.int32(f), np.int32(t)]
        else:
            args += [f, t]
    run(src, cnt, val, *args)
    expected = np.zeros(shape, np.int32)
    expected_val = np.full(shape, -1, np.int64)
    for point in itertools.product(*(range(f, t) for f, t in ranges)):
        expected[point] = 1
        expected_val[point] = sum(p * 1000 ** d for d, p in enumerate(point))
    np.testing.assert_array_equal(cnt, expected)
    np.testing.assert_array_equal(val, expected_val)


def test_foreach_negative_lower_bound_and_bool_loop_carried():
    """foreach over [-5, 7) with i32 variables; a varying loop carrying a bool (parity)."""
    src = """func @k(%out: memref<i32x?x2>) {
        %lo = constant -5 : i32
        %hi = constant 7 : i32
        foreach (%i) = (%lo), (%hi) {
            %five = constant 5 : i32
            %p = add %i, %five : i32
            %pi = cast %p : index
            %c0 = constant 0 : index
            %c1 = constant 1 : index
            store %i, %out[%pi, %c0]
            %zero = constant 0 : i32
            %f = constant false : bool
            %odd = for %k = %zero, %p init(%b = %f) -> (bool) {
                %t = constant true : bool
                %nb = xor %b, %t : bool
                yield (%nb)
            }
            %r = if %odd -> (i32) {
                %one = constant 1 : i32
                yield (%one)
            } else {
                yield (%zero)
            }
            store %r, %out[%pi, %c1]
        }
    }"""
    out = farray(np.full((12, 2), -9), np.int32)
    run(src, out)
    assert out[:, 0].tolist() == list(range(-5, 7))
    assert out[:, 1].tolist() == [k % 2 for k in range(12)]


def test_foreach_inside_collective_loop():
    """A foreach in each iteration of a collective for loop sees the trip variable."""
    src = """func @k(%out: memref<i32x?x?>) {
        %c0 = constant 0 : index
        %m = size %out[0] : index
        %n = size %out[1] : index
        for %j = %c0, %n {
            foreach (%i) = (%c0), (%m) {
                %ii = cast %i : i32
                %jj = cast %j : i32
                %v = sub %ii, %jj : i32
                store %v, %out[%i, %j]
            }
        }
    }"""
    out = farray(np.zeros((37, 5)), np.int32)
    run(src, out)
    assert (out == np.arange(37)[:, None] - np.arange(5)[None, :]).all()


# ---- foreach_tile ------------------------------------------------------------------------
TILE_EXAMPLE = """func @k(%A: memref<f32x?x?>, %B: memref<f32x?x?>, %rec: memref<index x3x2x4>,
                   %cnt: memref<i32x3x2>){attrs} {{
    %c0 = constant 0 : index
    %c70 = size %A[0] : index
    %c64 = size %A[1] : index
    foreach_tile (%i,%j)=(%c0,%c0),(%c70,%c64) as (%ti,%tj)<=(32,32) {{
        %c32 = constant 32 : index
        %k0 = constant 0 : index
        %k1 = constant 1 : index
        %k2 = constant 2 : index
        %k3 = constant 3 : index
        %bi = div %i, %c32 : index
        %bj = div %j, %c32 : index
        store %i, %rec[%bi, %bj, %k0]
        store %j, %rec[%bi, %bj, %k1]
        store %ti, %rec[%bi, %bj, %k2]
        store %tj, %rec[%bi, %bj, %k3]
        %one = constant 1 : i32
        %o = atomic_add %one, %cnt[%bi, %bj] : i32
        ; copy the tile: work-item l of the subgroup copies rows l, l+S, ... < ti
        %l = subgroup_local_id : i32
        %li = cast %l : index
        %s = subgroup_size : i32
        %si = cast %s : index
        %is_remainder = less_than %ti, %c32 : bool
        for %r = %li, %ti, %si {{
            for %c = %k0, %tj {{
                %row = add %i, %r : index
                %col = add %j, %c : index
                %x = load %A[%row, %col] : f32
                %y = if %is_remainder -> (f32) {{
                    %neg = neg %x : f32
                    yield (%neg)
                }} else {{
                    yield (%x)
                }}
                store %y, %B[%row, %col]
            }}
        }}
    }}
}}
"""


@pytest.mark.parametrize("attrs,sgs", [
    ("", 16),
    (" attributes {subgroup_size=16, work_group_size=[32,2]}", 16),
    (" attributes {subgroup_size=32}", 32),
    (" attributes {subgroup_size=8, work_group_size=[16,3]}", 8),
])
def test_foreach_tile_reference_remainder_example(attrs, sgs):
    """70 x 64 with 32 x 32 tiles: offsets (0|32|64, 0|32), sizes min(32, to - var), each
    tile taken by exactly one subgroup; the remainder tile (ti = 6) is negated."""
    A = farray(np.arange(70 * 64).reshape(70, 64), np.float32)
    B = farray(np.zeros((70, 64)), np.float32)
    rec = farray(np.full((3, 2, 4), -1), np.int64)
    cnt = farray(np.zeros((3, 2)), np.int32)
    run(TILE_EXAMPLE.format(attrs=attrs), A, B, rec, cnt)
    for bi in range(3):
        for bj in range(2):
            i, j = 32 * bi, 32 * bj
            assert rec[bi, bj].tolist() == [i, j, min(32, 70 - i), min(32, 64 - j)]
    assert (cnt == sgs).all()  # all work-items of one subgroup
    expected = A.copy()
    expected[64:] *= -1
    np.testing.assert_array_equal(B, expected)


def test_foreach_tile_1d_and_3d_offsets():
    """Tiles of a range not starting at zero; 3-D with tile shape (16, 3, 2)."""
    src = """func @k(%rec: memref<index x?x2>, %rec3: memref<i32x?x?x?x3>) {
        %c5 = constant 5 : index
        %c100 = constant 100 : index
        foreach_tile (%i) = (%c5), (%c100) as (%t) <= (16) {
            %k0 = constant 0 : index
            %k1 = constant 1 : index
            %c16 = constant 16 : index
            %d = sub %i, %c5 : index
            %b = div %d, %c16 : index
            store %i, %rec[%b, %k0]
            store %t, %rec[%b, %k1]
        }
        %a0 = constant 1 : i32
        %a1 = constant 40 : i32
        %b0 = constant 2 : i32
        %b1 = constant 10 : i32
        %d0 = constant 0 : i32
        %d1 = constant 5 : i32
        foreach_tile (%x, %y, %z) = (%a0, %b0, %d0), (%a1, %b1, %d1) as (%sx, %sy, %sz) <= (16, 3, 2) {
            %k0 = constant 0 : index
            %k1 = constant 1 : index
            %k2 = constant 2 : index
            %c16 = constant 16 : i32
            %c3 = constant 3 : i32
            %c2 = constant 2 : i32
            %x0 = sub %x, %a0 : i32
            %y0 = sub %y, %b0 : i32
            %bx = div %x0, %c16 : i32
            %by = div %y0, %c3 : i32
            %bz = div %z, %c2 : i32
            %ix = cast %bx : index
            %iy = cast %by : index
            %iz = cast %bz : index
            store %sx, %rec3[%ix, %iy, %iz, %k0]
            store %sy, %rec3[%ix, %iy, %iz, %k1]
            store %sz, %rec3[%ix, %iy, %iz, %k2]
        }
    }"""
    rec = farray(np.full((7, 2), -1), np.int64)
    rec3 = farray(np.full((3, 3, 3, 3), -1), np.int32)
    run(src, rec, rec3)
    assert rec[:6].tolist() == [[5 + 16 * k, min(16, 95 - 16 * k)] for k in range(6)]
    assert (rec[6] == -1).all()
    for bx, by, bz in itertools.product(range(3), range(3), range(3)):
        x, y, z = 1 + 16 * bx, 2 + 3 * by, 3 * 0 + 2 * bz
        assert rec3[bx, by, bz].tolist() == [min(16, 40 - x), min(3, 10 - y), min(2, 5 - z)]


# ---- the widest work-groups ---------------------------------------------------------------------
WIDE = """func @k(%A: memref<f32x?>, %B: memref<f32x?>, %C: memref<i32x?>) attributes {subgroup_size=SGS, work_group_size=[WGX,WGY]} {
    %tmp = alloca : memref<f32xW,local>
    parallel {
        %x = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %s = subgroup_size : i32
        %t = mul %sg, %s : i32
        %l = add %t, %x : i32
        %i = cast %l : index
        %a = load %A[%i] : f32
        %two = constant 2.0 : f32
        %b = mul %a, %two : f32
        store %b, %tmp[%i]
        barrier.local
        %n = constant W : index
        %one = constant 1 : index
        %j0 = add %i, %one : index
        %j = rem %j0, %n : index
        %c = load %tmp[%j] : f32
        %zero = constant 0.0 : f32
        %pos = greater_than %c, %zero : bool
        %r = if %pos -> (f32) {
            yield (%c)
        } else {
            %d = neg %c : f32
            yield (%d)
        }
        store %r, %B[%i]
        %sum = subgroup_inclusive_scan_add %l : i32
        store %sum, %C[%i]
    }
}"""


@pytest.mark.parametrize("wgx,wgy,sgs", [(1024, 1, 16), (64, 16, 4)])
def test_work_group_of_1024_work_items(wgx, wgy, sgs):
    """The largest work-group: local memory, a barrier, divergent if, a subgroup scan."""
    w = wgx * wgy
    src = (WIDE.replace("SGS", str(sgs)).replace("WGX", str(wgx)).replace("WGY", str(wgy))
           .replace("W", str(w)))
    A = np.random.default_rng(7).standard_normal(w).astype(np.float32)
    B, C = np.zeros(w, np.float32), np.zeros(w, np.int32)
    run(src, A, B, C)
    np.testing.assert_array_equal(B, np.abs(np.roll(A * 2, -1)))
    ids = np.arange(w).reshape(-1, sgs)
    np.testing.assert_array_equal(C, np.cumsum(ids, axis=1).ravel())
