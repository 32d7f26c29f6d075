"""Checked execution (``ttlc.compile(..., checked=True)``) on every executing target:
interp, cpu, opencl (Intel's CPU runtime, where installed) and cuda (its launches run
on the Tile IR interpreter through the fake driver of cuda_testing.py).

One test per finding: out-of-bounds accesses (scalar, atomic, coopmatrix, group
index), values that must be dynamically uniform, barriers not reached by the whole
work-group, data races on local memory, integer division by zero, endless loops and
local memory used after ``lifetime_stop``.  Every finding raises ``ttlc.KernelError``
whose message names the kernel, the offending instruction's source location, the
group id, the work-item and the offending index or value.  Correct kernels (local
memory with barriers, atomics, coopmatrix tiles) raise nothing in checked mode and
give the same results as unchecked execution.

Kernels are written from the language reference and are valid per ``ttlc.check``.
Tests of findings target cpu does not make are marked ``interp_only`` (see
interp_testing.py).
"""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

import interp_testing
import ttlc

FILE = "checked.ttl"
#: every executing target (interp_testing.cannot_run says why one is skipped here): each
#: finding must read as on the interpreter everywhere
TARGETS = ("interp", "cpu", "opencl", "cuda")


def compile_(src: str, checked: bool = True):
    return interp_testing.compile_for_target(src, checked, FILE)


def line_of(src: str, marker: str) -> int:
    """The 1-based line of the only line of src containing marker."""
    lines = [n for n, line in enumerate(textwrap.dedent(src).splitlines(), 1) if marker in line]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def finding(src: str, kernel: str, args, grid=(1, 1, 1)) -> str:
    """Run in checked mode; the KernelError message (which must say FILE:LINE.COL-END)."""
    module = compile_(src)
    with pytest.raises(ttlc.KernelError) as info:
        module[kernel](*args, grid=grid)
    message = str(info.value)
    assert re.match(rf"{re.escape(FILE)}:\d+\.\d+(-\d+)?: ", message), message
    return message


def races_in_run_order() -> bool:
    """Target opencl runs a work-group's work-items at once: of two accesses that race
    between subgroups, the one that came second reports (docs/opencl.md), where the
    other targets report the same access and work-item every time."""
    return interp_testing.CURRENT_TARGET == "opencl"


def assert_race(message: str, kernel: str, lines) -> None:
    """A race reported at one of the two racing instructions (``lines``), whichever a
    target running work-items at once reached second."""
    assert f"@{kernel}" in message and "data race" in message and "%tmp" in message, message
    assert any(message.startswith(f"{FILE}:{n}.") for n in lines), message


def assert_names(message: str, kernel: str, line: int, group, item) -> None:
    assert f"@{kernel}" in message, message
    assert message.startswith(f"{FILE}:{line}."), message
    assert f"group {tuple(group)}" in message, message
    assert f"work-item {tuple(item)}" in message, message


def farray(x, dtype=np.float32):
    return np.asfortranarray(np.asarray(x, dtype=dtype))


# ---- 1: bounds of loads, stores, atomics and group indices --------------------------------------
SCALAR_BOUNDS = """\
func @shift(%A: memref<f32x32>, %B: memref<f32x32>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %gid = group_id.x : index
    parallel {
        %i = subgroup_local_id : i32
        %j = cast %i : index
        %c16 = constant 16 : index
        %o = mul %gid, %c16 : index
        %k = add %j, %o : index
        %c3 = constant 3 : index
        %l = add %k, %c3 : index
        %v = load %A[%k] : f32
        store %v, %B[%l]            ; OFFENDING
    }
}
"""


def test_scalar_store_out_of_bounds():
    A, B = farray(np.arange(32)), farray(np.zeros(32))
    msg = finding(SCALAR_BOUNDS, "shift", (A, B), grid=(2, 1, 1))
    # group 1, work-item 13 stores to B[16 + 13 + 3] = B[32]
    assert_names(msg, "shift", line_of(SCALAR_BOUNDS, "OFFENDING"), (1, 0, 0), (13, 0))
    assert "index 32" in msg and "size 32" in msg


ATOMIC_BOUNDS = """\
func @hist(%X: memref<i32x64>, %H: memref<i32x8>) attributes {subgroup_size=16, work_group_size=[16,2]} {
    parallel {
        %x = subgroup_local_id : i32
        %y = subgroup_id.y : i32
        %c16 = constant 16 : i32
        %yy = mul %y, %c16 : i32
        %l = add %x, %yy : i32
        %i = cast %l : index
        %v = load %X[%i] : i32
        %bin = cast %v : index
        %one = constant 1 : i32
        %old = atomic_add %one, %H[%bin] : i32   ; OFFENDING
    }
}
"""


def test_atomic_out_of_bounds():
    X = np.arange(64, dtype=np.int32) % 8
    X[20] = -1  # work-item (4, 1) of the work-group
    H = np.zeros(8, dtype=np.int32)
    msg = finding(ATOMIC_BOUNDS, "hist", (X, H))
    assert_names(msg, "hist", line_of(ATOMIC_BOUNDS, "OFFENDING"), (0, 0, 0), (4, 1))
    assert "index -1" in msg and "size 8" in msg


COOP_BOUNDS = """\
func @tiles(%A: memref<f32x40x16>, %B: memref<f32x40x16>) attributes {subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %sg = subgroup_id.x : i32
        %s = cast %sg : index
        %c16 = constant 16 : index
        %c0 = constant 0 : index
        %x = mul %s, %c16 : index
        %c12 = constant 12 : index
        %xx = add %x, %c12 : index
        %t = cooperative_matrix_load.cols_checked %A[%xx, %c0] : coopmatrix<f32x16x16,matrix_acc>   ; OFFENDING
        cooperative_matrix_store.rows_checked %t, %B[%xx, %c0]
    }
}
"""


def test_coopmatrix_load_out_of_bounds():
    """Rows 28..43 of a 40-row memref: .cols_checked does not guard the rows."""
    A, B = farray(np.ones((40, 16))), farray(np.zeros((40, 16)))
    msg = finding(COOP_BOUNDS, "tiles", (A, B))
    assert_names(msg, "tiles", line_of(COOP_BOUNDS, "OFFENDING"), (0, 0, 0), (16, 0))
    # the first component outside: row 12 of the block at row 28 + 12 = 40
    assert "(40, 0)" in msg and "40 x 16" in msg, msg


COOP_STORE_BOUNDS = """\
func @put(%A: memref<f32x16x20>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %c8 = constant 8 : index
        %one = constant 1.0 : f32
        %t = cooperative_matrix_construct %one : coopmatrix<f32x16x16,matrix_acc>
        cooperative_matrix_store.rows_checked %t, %A[%c0, %c8]   ; OFFENDING
    }
}
"""


def test_coopmatrix_store_out_of_bounds():
    """Columns 8..23 of a 20-column memref: .rows_checked does not guard the columns."""
    A = farray(np.zeros((16, 20)))
    msg = finding(COOP_STORE_BOUNDS, "put", (A,))
    assert_names(msg, "put", line_of(COOP_STORE_BOUNDS, "OFFENDING"), (0, 0, 0), (0, 0))
    assert "(0, 20)" in msg, msg


GROUP_BOUNDS = """\
func @gather(%G: group<memref<f32x4>x?>, %out: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %c5 = constant 5 : index
        %g = rem %i, %c5 : index
        %c0 = constant 0 : index
        %m = load %G[%g] : memref<f32x4>   ; OFFENDING
        %v = load %m[%c0] : f32
        store %v, %out[%i]
    }
}
"""


def test_group_index_out_of_bounds():
    members = [farray(np.full(4, k)) for k in range(4)]
    out = farray(np.zeros(16))
    msg = finding(GROUP_BOUNDS, "gather", (members, out))
    # work-item 4 loads member 4 of a group of 4
    assert_names(msg, "gather", line_of(GROUP_BOUNDS, "OFFENDING"), (0, 0, 0), (4, 0))
    assert "group index 4" in msg and "group size 4" in msg


# ---- 2: dynamically uniform values --------------------------------------------------------------
VARYING_POSITION = """\
func @skew(%A: memref<f32x64x16>, %B: memref<f32x64x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %c4 = constant 4 : i32
        %q = div %x, %c4 : i32
        %i = cast %q : index
        %c0 = constant 0 : index
        %t = cooperative_matrix_load %A[%i, %c0] : coopmatrix<f32x16x16,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %t, %B[%c0, %c0]
    }
}
"""


def test_coopmatrix_position_not_uniform():
    A, B = farray(np.ones((64, 16))), farray(np.zeros((64, 16)))
    msg = finding(VARYING_POSITION, "skew", (A, B))
    # work-items 0..3 agree on row 0, work-item 4 has row 1
    assert_names(msg, "skew", line_of(VARYING_POSITION, "OFFENDING"), (0, 0, 0), (4, 0))
    assert "uniform" in msg and "row position" in msg
    detail = msg.split("uniform", 1)[1]
    assert re.search(r"\b1\b", detail) and re.search(r"\b0\b", detail), msg


VARYING_MEMREF = """\
func @pick(%G: group<memref<f32x16x16>x?>, %B: memref<f32x16x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %c8 = constant 8 : i32
        %h = div %x, %c8 : i32
        %g = cast %h : index
        %m = load %G[%g] : memref<f32x16x16>
        %c0 = constant 0 : index
        %t = cooperative_matrix_load %m[%c0, %c0] : coopmatrix<f32x16x16,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %t, %B[%c0, %c0]
    }
}
"""


def test_coopmatrix_memref_not_uniform():
    members = [farray(np.full((16, 16), k)) for k in range(2)]
    B = farray(np.zeros((16, 16)))
    msg = finding(VARYING_MEMREF, "pick", (members, B))
    assert_names(msg, "pick", line_of(VARYING_MEMREF, "OFFENDING"), (0, 0, 0), (8, 0))
    assert "memref" in msg and "uniform" in msg


BROADCAST = """\
func @bcast(%A: memref<i32x32>, %B: memref<i32x32>) attributes {subgroup_size=16, work_group_size=[16,2]} {
    parallel {
        %x = subgroup_local_id : i32
        %y = subgroup_id.y : i32
        %c16 = constant 16 : i32
        %yy = mul %y, %c16 : i32
        %l = add %x, %yy : i32
        %i = cast %l : index
        %v = load %A[%i] : i32
        %c2 = constant 2 : i32
        %src = rem %x, %c2 : i32
        %lane = mul %src, %y : i32
        %w = subgroup_broadcast %v, %lane : i32   ; OFFENDING
        store %w, %B[%i]
    }
}
"""


def test_subgroup_broadcast_lane_not_uniform():
    """The lane is 0 in subgroup (0, 0); in subgroup (0, 1) it alternates 0, 1."""
    A, B = np.arange(32, dtype=np.int32), np.zeros(32, dtype=np.int32)
    msg = finding(BROADCAST, "bcast", (A, B), grid=(1, 2, 1))
    assert_names(msg, "bcast", line_of(BROADCAST, "OFFENDING"), (0, 0, 0), (1, 1))
    assert "lane" in msg and "uniform" in msg


CONSTRUCT = """\
func @fill(%B: memref<f32x16x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %c15 = constant 15 : i32
        %b = equal %x, %c15 : bool
        %v = if %b -> (f32) {
            %h = constant 0.5 : f32
            yield (%h)
        } else {
            %o = constant 1.0 : f32
            yield (%o)
        }
        %t = cooperative_matrix_construct %v : coopmatrix<f32x16x16,matrix_acc>   ; OFFENDING
        %c0 = constant 0 : index
        cooperative_matrix_store %t, %B[%c0, %c0]
    }
}
"""


def test_coopmatrix_construct_number_not_uniform():
    B = farray(np.zeros((16, 16)))
    msg = finding(CONSTRUCT, "fill", (B,))
    assert_names(msg, "fill", line_of(CONSTRUCT, "OFFENDING"), (0, 0, 0), (15, 0))
    assert "number" in msg and "0.5" in msg


SCALE = """\
func @scale(%A: memref<f32x16x16>, %s: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %a = load %s[%i] : f32
        %c0 = constant 0 : index
        %t = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x16,matrix_acc>
        %u = cooperative_matrix_scale %a, %t : coopmatrix<f32x16x16,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %u, %A[%c0, %c0]
    }
}
"""


def test_coopmatrix_scale_scalar_not_uniform():
    A = farray(np.ones((16, 16)))
    s = farray(np.full(16, 2.0))
    s[9] = 3.0
    msg = finding(SCALE, "scale", (A, s))
    assert_names(msg, "scale", line_of(SCALE, "OFFENDING"), (0, 0, 0), (9, 0))
    assert "3.0" in msg


FOREACH_TILE = """\
func @copy_tiles(%A: memref<f32x?x?>, %B: memref<f32x?x?>) attributes {subgroup_size=16, work_group_size=[32,2]} {
    %c0 = constant 0 : index
    %m = size %A[0] : index
    %n = size %A[1] : index
    foreach_tile (%i, %j) = (%c0, %c0), (%m, %n) as (%ti, %tj) <= (16, 8) {
        %t = cooperative_matrix_load.both_checked %A[%i, %j] : coopmatrix<f32x16x8,matrix_acc>
        %two = constant 2.0 : f32
        %u = cooperative_matrix_scale %two, %t : coopmatrix<f32x16x8,matrix_acc>
        cooperative_matrix_store.both_checked %u, %B[%i, %j]
    }
}
"""


def test_foreach_tile_offsets_are_uniform():
    """Tile offsets feed coopmatrix positions: uniform by construction, no finding."""
    A = farray(np.arange(45 * 21).reshape(45, 21))
    B1, B2 = farray(np.zeros((45, 21))), farray(np.zeros((45, 21)))
    compile_(FOREACH_TILE, checked=True)["copy_tiles"](A, B1)
    compile_(FOREACH_TILE, checked=False)["copy_tiles"](A, B2)
    np.testing.assert_array_equal(B1, 2 * A)
    np.testing.assert_array_equal(B1, B2)


# ---- 3: barriers ------------------------------------------------------------------------------
DIVERGENT_BARRIER = """\
func @halves(%A: memref<f32x32>) attributes {subgroup_size=16, work_group_size=[16,2]} {
    parallel {
        %y = subgroup_id.y : i32
        %c0 = constant 0 : i32
        %top = equal %y, %c0 : bool
        if %top {
            barrier.local   ; OFFENDING
        }
    }
}
"""


def test_barrier_in_divergent_if():
    msg = finding(DIVERGENT_BARRIER, "halves", (farray(np.zeros(32)),), grid=(1, 1, 2))
    # work-items of subgroup y = 1 never arrive
    assert_names(msg, "halves", line_of(DIVERGENT_BARRIER, "OFFENDING"), (0, 0, 0), (0, 1))
    assert "barrier" in msg


LOOP_BARRIER = """\
func @ragged(%N: memref<i64x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %n = load %N[%i] : i64
        %c0 = constant 0 : i64
        for %k = %c0, %n {
            barrier.local   ; OFFENDING
        }
    }
}
"""


def test_barrier_in_loop_with_varying_trip_count():
    N = np.full(16, 3, dtype=np.int64)
    N[6] = 2  # work-item 6 leaves after two iterations: the third barrier misses it
    msg = finding(LOOP_BARRIER, "ragged", (N,), grid=(2, 1, 1))
    assert_names(msg, "ragged", line_of(LOOP_BARRIER, "OFFENDING"), (0, 0, 0), (6, 0))


def test_barrier_in_convergent_loop_is_fine():
    """Same trip count everywhere (varying value, equal per work-item): no finding."""
    N = np.full(16, 3, dtype=np.int64)
    compile_(LOOP_BARRIER)["ragged"](N, grid=(2, 1, 1))


CONVERGENT_IF = """\
func @both(%A: memref<f32x32>) attributes {subgroup_size=16, work_group_size=[16,2]} {
    parallel {
        %x = subgroup_local_id : i32
        %c99 = constant 99 : i32
        %all = less_than %x, %c99 : bool
        %v = if %all -> (f32) {
            barrier.local
            %one = constant 1.0 : f32
            yield (%one)
        } else {
            barrier.local
            %zero = constant 0.0 : f32
            yield (%zero)
        }
        %y = subgroup_id.y : i32
        %c16 = constant 16 : i32
        %yy = mul %y, %c16 : i32
        %l = add %x, %yy : i32
        %i = cast %l : index
        store %v, %A[%i]
    }
}
"""


def test_barrier_in_if_taken_by_everybody_is_fine():
    """A varying condition that is true for all work-items: only one barrier is reached."""
    A = farray(np.zeros(32))
    compile_(CONVERGENT_IF)["both"](A)
    np.testing.assert_array_equal(A, np.ones(32))


# ---- 4: data races on local memory --------------------------------------------------------------
TRANSPOSE = """\
func @transpose(%A: memref<f32x16x16>, %B: memref<f32x16x16>) attributes {subgroup_size=16, work_group_size=[16,4]} {
    %tmp = alloca : memref<f32x16x16,local>
    parallel {
        %x = subgroup_local_id : i32
        %y = subgroup_id.y : i32
        %i = cast %x : index
        %j0 = cast %y : index
        %c0 = constant 0 : index
        %c4 = constant 4 : index
        %c16 = constant 16 : index
        for %k = %c0, %c16, %c4 {
            %j = add %j0, %k : index
            %v = load %A[%i, %j] : f32
            store %v, %tmp[%i, %j]   ; WRITE
        }
        BARRIER
        for %k = %c0, %c16, %c4 {
            %j = add %j0, %k : index
            %v = load %tmp[%j, %i] : f32   ; OFFENDING
            store %v, %B[%i, %j]
        }
    }
}
"""


@pytest.mark.parametrize("barrier", ["barrier.local", "barrier.global.local"])
def test_transpose_with_barrier_is_race_free(barrier):
    src = TRANSPOSE.replace("BARRIER", barrier)
    A = farray(np.arange(256).reshape(16, 16))
    B1, B2 = farray(np.zeros((16, 16))), farray(np.zeros((16, 16)))
    compile_(src, checked=True)["transpose"](A, B1, grid=(2, 1, 1))
    compile_(src, checked=False)["transpose"](A, B2, grid=(2, 1, 1))
    np.testing.assert_array_equal(B1, A.T)
    np.testing.assert_array_equal(B1, B2)


@pytest.mark.parametrize("barrier", ["", "barrier.global"])
def test_race_read_after_write_without_barrier(barrier):
    src = TRANSPOSE.replace("BARRIER", barrier)
    A = farray(np.arange(256).reshape(16, 16))
    msg = finding(src, "transpose", (A, farray(np.zeros((16, 16)))), grid=(1, 2, 1))
    if races_in_run_order():
        assert_race(msg, "transpose", [line_of(src, "OFFENDING"), line_of(src, "WRITE")])
        return
    # work-item (1, 0) reads tmp[0, 1], written by work-item (0, 1)
    assert_names(msg, "transpose", line_of(src, "OFFENDING"), (0, 0, 0), (1, 0))
    assert "data race" in msg and "%tmp" in msg and "[0, 1]" in msg
    assert "work-item (0, 1)" in msg and f":{line_of(src, 'WRITE')}." not in msg
    assert f" {line_of(src, 'WRITE')}." in msg  # where the conflicting write was
    if barrier:
        assert ".local" in msg  # the hint: barrier.global does not order local memory


WRITE_WRITE = """\
func @last(%A: memref<f32x16>, %B: memref<f32x1>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %tmp = alloca : memref<f32x1,local>
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %c0 = constant 0 : index
        %v = load %A[%i] : f32
        %c5 = constant 5 : i32
        %big = greater_than_equal %x, %c5 : bool
        if %big {
            store %v, %tmp[%c0]   ; OFFENDING
        }
    }
    parallel {
        %c0 = constant 0 : index
        %x = subgroup_local_id : i32
        %c0i = constant 0 : i32
        %first = equal %x, %c0i : bool
        if %first {
            %v = load %tmp[%c0] : f32
            store %v, %B[%c0]
        }
    }
}
"""


def test_race_write_write_same_instruction():
    msg = finding(WRITE_WRITE, "last", (farray(np.arange(16)), farray(np.zeros(1))))
    assert_names(msg, "last", line_of(WRITE_WRITE, "OFFENDING"), (0, 0, 0), (6, 0))
    assert "data race" in msg and "[0]" in msg and "work-item (5, 0)" in msg


ATOMICS = """\
func @count(%X: memref<i32x64>, %H: memref<i32x4>) attributes {subgroup_size=16, work_group_size=[16,4]} {
    %h = alloca : memref<i32x4,local>
    %zero = constant 0 : i32
    parallel {
        %x = subgroup_local_id : i32
        %c4 = constant 4 : i32
        %lt = less_than %x, %c4 : bool
        %y = subgroup_id.y : i32
        %c0 = constant 0 : i32
        %top = equal %y, %c0 : bool
        %init = and %lt, %top : bool
        if %init {
            %i = cast %x : index
            store %zero, %h[%i]
        }
        barrier.local
        %c16 = constant 16 : i32
        %yy = mul %y, %c16 : i32
        %l = add %x, %yy : i32
        %li = cast %l : index
        %v = load %X[%li] : i32
        %bin = cast %v : index
        %one = constant 1 : i32
        %old = atomic_add %one, %h[%bin] : i32
        READ
        barrier.local
        if %init {
            %i = cast %x : index
            %c = load %h[%i] : i32
            store %c, %H[%i]
        }
    }
}
"""


def test_atomics_do_not_race_with_atomics():
    src = ATOMICS.replace("READ", "")
    X = (np.arange(64, dtype=np.int32) * 7) % 4
    H1, H2 = np.zeros(4, np.int32), np.zeros(4, np.int32)
    compile_(src, checked=True)["count"](X, H1)
    compile_(src, checked=False)["count"](X, H2)
    np.testing.assert_array_equal(H1, np.bincount(X, minlength=4))
    np.testing.assert_array_equal(H1, H2)


def test_race_plain_read_of_atomically_updated_element():
    src = ATOMICS.replace("READ", "%peek = load %h[%bin] : i32   ; OFFENDING")
    X = np.zeros(64, dtype=np.int32)  # everybody counts into bin 0
    msg = finding(src, "count", (X, np.zeros(4, np.int32)), grid=(1, 1, 3))
    assert_names(msg, "count", line_of(src, "OFFENDING"), (0, 0, 0), (0, 0))
    assert "data race" in msg and "%h" in msg and "[0]" in msg and "atomic" in msg


#: work-item i makes two kinds of access to element i of %tmp (FIRST, then SECOND), then
#: writes element i + 1, which work-item i + 1 accessed both ways
TWO_KINDS = """\
func @next(%B: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %tmp = alloca : memref<f32x16,local>
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %f = cast %x : f32
        FIRST
        SECOND
        %c1 = constant 1 : index
        %c16 = constant 16 : index
        %j0 = add %i, %c1 : index
        %j = rem %j0, %c16 : index
        store %f, %tmp[%j]   ; OFFENDING
        store %f, %B[%i]
    }
}
"""
WRITE_I = "store %f, %tmp[%i]   ; WRITE"
READ_I = "%w = load %tmp[%i] : f32   ; READ"


@pytest.mark.parametrize("first, second, named", [(WRITE_I, READ_I, "write"),
                                                  (READ_I, WRITE_I, "read")],
                         ids=["write-first", "read-first"])
def test_race_names_the_kind_of_access_made_first(first, second, named):
    """The race of an access with several kinds of earlier access names the kind first
    made to the alloca in the interval (tmp[1] was written and read by work-item (1, 0)),
    whatever the order of the kinds."""
    src = TWO_KINDS.replace("FIRST", first).replace("SECOND", second)
    msg = finding(src, "next", (farray(np.zeros(16)),))
    if races_in_run_order():
        assert_race(msg, "next", [line_of(src, m) for m in ("OFFENDING", "WRITE", "READ")])
        return
    assert_names(msg, "next", line_of(src, "OFFENDING"), (0, 0, 0), (0, 0))
    other = line_of(src, named.upper())
    assert (f"write of index [1] (element 1) by work-item (0, 0) conflicts with a {named} by "
            f"work-item (1, 0) at {other}.") in msg, msg


SAME_ITEM = """\
func @inplace(%A: memref<f32x192>) attributes {subgroup_size=16, work_group_size=[16,4]} {
    %tmp = alloca : memref<f32x64,local>
    %g = group_id.x : index
    %c64 = constant 64 : index
    %at = mul %g, %c64 : index
    %As = subview %A[%at:64] : memref<f32x64>
    parallel {
        %x = subgroup_local_id : i32
        %y = subgroup_id.y : i32
        %c16 = constant 16 : i32
        %yy = mul %y, %c16 : i32
        %l = add %x, %yy : i32
        %i = cast %l : index
        %v = load %As[%i] : f32
        store %v, %tmp[%i]
        %w = load %tmp[%i] : f32
        %two = constant 2.0 : f32
        %d = mul %w, %two : f32
        store %d, %tmp[%i]
        %e = load %tmp[%i] : f32
        store %e, %As[%i]
    }
}
"""


def test_same_work_item_reaccess_is_fine():
    """Each work-group doubles its own 64 elements through local memory, each element by
    one work-item: three work-groups one after another on a thread see no race."""
    A = farray(np.arange(192))
    compile_(SAME_ITEM)["inplace"](A, grid=(3, 1, 1))
    np.testing.assert_array_equal(A, 2 * np.arange(192))


COOP_LOCAL = """\
func @stage(%A: memref<f32x32x16>, %B: memref<f32x32x16>) attributes {subgroup_size=16, work_group_size=[32,1]} {
    %tmp = alloca : memref<f32x32x16,local>
    parallel {
        %sg = subgroup_id.x : i32
        %s = cast %sg : index
        %c16 = constant 16 : index
        %c0 = constant 0 : index
        %x = mul %s, %c16 : index
        %t = cooperative_matrix_load %A[%x, %c0] : coopmatrix<f32x16x16,matrix_acc>
        cooperative_matrix_store %t, %tmp[%x, %c0]
        %u = cooperative_matrix_load.t %tmp[%x, %c0] : coopmatrix<f32x16x16,matrix_acc>
        BARRIER
        %c1 = constant 1 : i32
        %o = sub %c1, %sg : i32
        %os = cast %o : index
        %ox = mul %os, %c16 : index
        %v = cooperative_matrix_load %tmp[%ox, %c0] : coopmatrix<f32x16x16,matrix_acc>   ; OFFENDING
        %w = add %u, %v : coopmatrix<f32x16x16,matrix_acc>
        cooperative_matrix_store %w, %B[%x, %c0]
    }
}
"""


def test_coopmatrix_local_staging_is_race_free():
    """A subgroup re-reading its own coopmatrix store needs no barrier; the other
    subgroup's block needs barrier.local."""
    src = COOP_LOCAL.replace("BARRIER", "barrier.local")
    A = farray(np.arange(512).reshape(32, 16))
    B1, B2 = farray(np.zeros((32, 16))), farray(np.zeros((32, 16)))
    compile_(src, checked=True)["stage"](A, B1)
    compile_(src, checked=False)["stage"](A, B2)
    expected = np.vstack([A[:16].T + A[16:], A[16:].T + A[:16]])
    np.testing.assert_array_equal(B1, expected)
    np.testing.assert_array_equal(B1, B2)


def test_race_coopmatrix_other_subgroup_block():
    src = COOP_LOCAL.replace("BARRIER", "")
    A = farray(np.arange(512).reshape(32, 16))
    msg = finding(src, "stage", (A, farray(np.zeros((32, 16)))), grid=(1, 2, 1))
    if races_in_run_order():
        stores = [n for n, text in enumerate(src.splitlines(), 1)
                  if "cooperative_matrix_store %t, %tmp" in text]
        assert_race(msg, "stage", [line_of(src, "OFFENDING")] + stores)
        return
    # subgroup 0 (work-item (0, 0)) reads rows 16.. that subgroup 1 wrote
    assert_names(msg, "stage", line_of(src, "OFFENDING"), (0, 0, 0), (0, 0))
    assert "data race" in msg and "%tmp" in msg and "[16, 0]" in msg
    assert "work-item (16, 0)" in msg


REGIONS = """\
func @two_phases(%A: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %tmp = alloca : memref<f32x16,local>
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %v = load %A[%i] : f32
        store %v, %tmp[%i]
    }
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %c15 = constant 15 : index
        %j = sub %c15, %i : index
        %v = load %tmp[%j] : f32
        store %v, %A[%i]
    }
}
"""


def test_parallel_regions_end_with_implicit_barrier():
    A = farray(np.arange(16))
    compile_(REGIONS)["two_phases"](A)
    np.testing.assert_array_equal(A, np.arange(16)[::-1])


FOREACH = """\
func @fold(%A: memref<f32x40>, %n: index) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %tmp = alloca : memref<f32x40,local>
    %c0 = constant 0 : index
    foreach (%i) = (%c0), (%n) {
        %v = load %A[%i] : f32
        %c20 = constant 20 : index
        %j = rem %i, %c20 : index
        store %v, %tmp[%j]   ; OFFENDING
    }
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %v = load %tmp[%i] : f32
        store %v, %A[%i]
    }
}
"""


def test_race_between_foreach_iterations():
    """Iterations 0 and 20 write the same element; the mapping of iterations to
    work-items is implementation-defined, so that is a race (20 is the fifth item of
    the second chunk of 16).  With 20 iterations there is none."""
    A = farray(np.arange(40))
    compile_(FOREACH)["fold"](A, 20)
    np.testing.assert_array_equal(A[:16], np.arange(16))
    msg = finding(FOREACH, "fold", (farray(np.arange(40)), 40))
    assert_names(msg, "fold", line_of(FOREACH, "OFFENDING"), (0, 0, 0), (4, 0))
    assert "data race" in msg and "[0]" in msg and "work-item (0, 0)" in msg


# ---- 5: integer division by zero ----------------------------------------------------------------
DIVISION = """\
func @ratio(%A: memref<i32x32>, %B: memref<i32x32>) attributes {subgroup_size=16, work_group_size=[16,2]} {
    parallel {
        %x = subgroup_local_id : i32
        %y = subgroup_id.y : i32
        %c16 = constant 16 : i32
        %yy = mul %y, %c16 : i32
        %l = add %x, %yy : i32
        %i = cast %l : index
        %a = load %A[%i] : i32
        %b = load %B[%i] : i32
        %q = rem %a, %b : i32   ; OFFENDING
        store %q, %A[%i]
    }
}
"""


def test_division_by_zero_varying_divisor():
    A = np.arange(100, 132, dtype=np.int32)
    B = np.ones(32, dtype=np.int32)
    B[16 + 9] = 0  # work-item (9, 1) divides 125 by 0
    msg = finding(DIVISION, "ratio", (A, B))
    assert_names(msg, "ratio", line_of(DIVISION, "OFFENDING"), (0, 0, 0), (9, 1))
    assert "division by zero" in msg and "125" in msg


COOP_DIVISION = """\
func @cdiv(%A: memref<i32x16x16>, %B: memref<i32x16x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<i32x16x16,matrix_acc>
        %b = cooperative_matrix_load %B[%c0, %c0] : coopmatrix<i32x16x16,matrix_acc>
        %q = div %a, %b : coopmatrix<i32x16x16,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %q, %A[%c0, %c0]
    }
}
"""


def test_division_by_zero_coopmatrix():
    A = farray(np.arange(256).reshape(16, 16), np.int32)
    B = farray(np.ones((16, 16)), np.int32)
    B[3, 5] = 0
    msg = finding(COOP_DIVISION, "cdiv", (A, B))
    # entry (3, 5) lives in work-item 3 of the 16 x 16 layout
    assert_names(msg, "cdiv", line_of(COOP_DIVISION, "OFFENDING"), (0, 0, 0), (3, 0))
    assert "(3, 5)" in msg and str(A[3, 5]) in msg


# ---- loops that never end, local memory after lifetime_stop -------------------------------------
ENDLESS = """\
func @endless(%S: memref<i64x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %s = load %S[%i] : i64
        %c0 = constant 0 : i64
        %c8 = constant 8 : i64
        for %k = %c0, %c8, %s {   ; OFFENDING
        }
    }
}
"""


def test_for_with_non_positive_step():
    S = np.ones(16, dtype=np.int64)
    S[11] = 0
    msg = finding(ENDLESS, "endless", (S,))
    assert_names(msg, "endless", line_of(ENDLESS, "OFFENDING"), (0, 0, 0), (11, 0))
    assert "step 0" in msg


UNIFORM_ENDLESS = """\
func @spin(%A: memref<f32x4>) {
    %c0 = constant 0 : index
    %c4 = constant 4 : index
    %step = constant -1 : index
    for %k = %c0, %c4, %step {   ; OFFENDING
        %v = constant 1.0 : f32
        store %v, %A[%c0]
    }
}
"""


def test_for_with_negative_uniform_step():
    msg = finding(UNIFORM_ENDLESS, "spin", (farray(np.zeros(4)),), grid=(1, 3, 1))
    assert "@spin" in msg and msg.startswith(f"{FILE}:{line_of(UNIFORM_ENDLESS, 'OFFENDING')}.")
    assert "group (0, 0, 0)" in msg and "step -1" in msg


LIFETIME = """\
func @stale(%A: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %tmp = alloca : memref<f32x16,local>
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %v = load %A[%i] : f32
        store %v, %tmp[%i]
    }
    lifetime_stop %tmp   ; STOP
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %v = load %tmp[%i] : f32   ; OFFENDING
        store %v, %A[%i]
    }
}
"""


def test_local_memory_after_lifetime_stop():
    msg = finding(LIFETIME, "stale", (farray(np.zeros(16)),), grid=(1, 1, 2))
    assert_names(msg, "stale", line_of(LIFETIME, "OFFENDING"), (0, 0, 0), (0, 0))
    assert "lifetime" in msg and "%tmp" in msg
    assert f"{line_of(LIFETIME, 'STOP')}." in msg.split("@stale")[1]


# ---- correct kernels: same results checked and unchecked ----------------------------------------
REDUCE = """\
func @rowsum(%A: memref<f32x16x64>, %out: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,4]} {
    %part = alloca : memref<f32x16x4,local>
    parallel {
        %x = subgroup_local_id : i32
        %y = subgroup_id.y : i32
        %i = cast %x : index
        %j = cast %y : index
        %c0 = constant 0 : index
        %c4 = constant 4 : index
        %c64 = constant 64 : index
        %zero = constant 0.0 : f32
        %s = for %k = %j, %c64, %c4 init(%acc = %zero) -> (f32) {
            %v = load %A[%i, %k] : f32
            %t = add %acc, %v : f32
            yield (%t)
        }
        store %s, %part[%i, %j]
        barrier.local
        %c0i = constant 0 : i32
        %first = equal %y, %c0i : bool
        if %first {
            %r = for %k = %c0, %c4 init(%acc = %zero) -> (f32) {
                %v = load %part[%i, %k] : f32
                %t = add %acc, %v : f32
                yield (%t)
            }
            store %r, %out[%i]
        }
    }
}
"""


def test_correct_reduction_matches_unchecked():
    A = farray(np.random.default_rng(0).integers(-8, 8, (16, 64)))
    o1, o2 = farray(np.zeros(16)), farray(np.zeros(16))
    compile_(REDUCE, checked=True)["rowsum"](A, o1, grid=(2, 1, 1))
    compile_(REDUCE, checked=False)["rowsum"](A, o2, grid=(2, 1, 1))
    np.testing.assert_array_equal(o1, A.sum(axis=1))
    np.testing.assert_array_equal(o1, o2)


GEMM = """\
func @gemm(%A: memref<f32x32x16>, %B: memref<f32x16x32>, %C: memref<f32x32x32>) attributes {subgroup_size=16, work_group_size=[16,2]} {
    %c0 = constant 0 : index
    parallel {
        %sg = subgroup_id.y : i32
        %s = cast %sg : index
        %c16 = constant 16 : index
        %x = mul %s, %c16 : index
        %acc0 = constant 0.0 : coopmatrix<f32x16x32,matrix_acc>
        %a = cooperative_matrix_load %A[%x, %c0] : coopmatrix<f32x16x16,matrix_a>
        %b = cooperative_matrix_load %B[%c0, %c0] : coopmatrix<f32x16x32,matrix_b>
        %d = cooperative_matrix_mul_add %a, %b, %acc0 : coopmatrix<f32x16x32,matrix_acc>
        cooperative_matrix_store %d, %C[%x, %c0]
    }
}
"""


def test_correct_coopmatrix_gemm_matches_unchecked():
    rng = np.random.default_rng(1)
    A = farray(rng.integers(-4, 4, (32, 16)))
    B = farray(rng.integers(-4, 4, (16, 32)))
    C1, C2 = farray(np.zeros((32, 32))), farray(np.zeros((32, 32)))
    compile_(GEMM, checked=True)["gemm"](A, B, C1)
    compile_(GEMM, checked=False)["gemm"](A, B, C2)
    np.testing.assert_array_equal(C1, A @ B)
    np.testing.assert_array_equal(C1, C2)


# ---- subview rules and the shape rules of collective instructions (spec: Subview, Gemm, ...) -----
SUBVIEW = """\
func @scale(%x: memref<f32x?>, %off: index, %n: index) {
    %xs = subview %x[%off:%n] : memref<f32x?>   ; OFFENDING
    %c2 = constant 2.0 : f32
    %zero = constant 0.0 : f32
    axpby %c2, %xs, %zero, %xs
}
"""


@pytest.mark.parametrize("off, n, what", [(14, 4, "the slice overruns the mode's size 16"),
                                          (0, -2, "a negative size"),
                                          (-1, 2, "a negative offset"),
                                          (3, 0, "a dynamic size of zero is undefined")])
def test_subview_outside_its_memref(off, n, what):
    """The issue's example: a view past the end of a view of a larger buffer would write
    the caller's memory after the array passed; checked code reports it before."""
    buf = np.ones(20, np.float32)
    msg = finding(SUBVIEW, "scale", (buf[:16], off, n))
    assert msg.startswith(f"{FILE}:{line_of(SUBVIEW, 'OFFENDING')}."), msg
    assert f"offset {off} with size {n}: {what}" in msg, msg
    np.testing.assert_array_equal(buf, 1)  # nothing written


#: the sizes the shape rules compare are dynamic (the contraction's on both sides, C's);
#: op(A)'s rows and op(B)'s columns are not: the checked code of a gemm of every size
#: dynamic is a hundred times larger (8 MB of SPIR-V, minutes of Intel's OpenCL build)
BLAS_SHAPES = """\
func @mm(%A: memref<f32x4x?>, %B: memref<f32x?x4>, %C: memref<f32x?x?>) {
    %one = constant 1.0 : f32
    gemm.n.n %one, %A, %B, %one, %C   ; OFFENDING
}
func @add(%a: memref<f32x?>, %b: memref<f32x?>) {
    %one = constant 1.0 : f32
    axpby %one, %a, %one, %b   ; AXPBY
}
"""


@pytest.mark.parametrize("checked", [True, False])
def test_collective_shape_rules_at_run_time(checked):
    """Sizes breaking a collective instruction's shape rules are a KernelError naming the
    rule (the interpreter: checked or not, never letting NumPy's error through; cpu:
    checked code, by check_shapes before the lowered instruction)."""
    if not checked and interp_testing.CURRENT_TARGET != "interp":
        pytest.skip("unchecked code of this target does not test shape rules (undefined "
                    "behaviour)")
    module = compile_(BLAS_SHAPES, checked=checked)
    C = farray(np.zeros((8, 8)))
    with pytest.raises(ttlc.KernelError, match=r"columns of op\(A\) \(4x3\) do not match rows "
                                               r"of op\(B\) \(5x4\)"):
        module["mm"](farray(np.ones((4, 3))), farray(np.ones((5, 4))), C)
    with pytest.raises(ttlc.KernelError, match=r"shape of C \(8x8\) does not match op\(A\) "
                                               r"op\(B\) \(4x4\)"):
        module["mm"](farray(np.ones((4, 3))), farray(np.ones((3, 4))), C)
    np.testing.assert_array_equal(C, 0)
    with pytest.raises(ttlc.KernelError, match=rf"{FILE}:{line_of(BLAS_SHAPES, 'AXPBY')}\..*"
                                               r"shape of B \(6\) does not match shape of op\(A\) \(5\)"):
        module["add"](farray(np.ones(5)), farray(np.ones(6)))


VIEWS = """\
func @e(%x: memref<f32x?>, %n: index) {
    %y = expand %x[0 -> 4 x %n] : memref<f32x4x?>   ; EXPAND
    %c0 = constant 0 : index
    %v = load %y[%c0, %c0] : f32
    store %v, %x[%c0]
}
func @f(%x: memref<f32x4x4,strided<1,?>>) {
    %y = fuse %x[0, 1] : memref<f32x16>   ; FUSE
    %c0 = constant 0 : index
    %v = load %y[%c0] : f32
    store %v, %y[%c0]
}
"""


def test_expand_and_fuse_of_dynamic_sizes_and_strides():
    """Spec, Expand and Fuse: a dynamic product differing from the mode size, or fused
    modes whose dynamic stride is not the product of the previous ones, are undefined
    behaviour: checked code reports them at the view (nothing is written)."""
    module = compile_(VIEWS)
    x = np.zeros(12, np.float32)
    module["e"](x, 3)  # 4 x 3 = 12: fine
    with pytest.raises(ttlc.KernelError, match=rf"{FILE}:{line_of(VIEWS, 'EXPAND')}\..*expand "
                                               r"shape product 20 does not equal the mode size 12"):
        module["e"](x, 5)
    module["f"](farray(np.zeros((4, 4))))  # packed: stride 4 of mode 1
    y = farray(np.ones((8, 4)))
    with pytest.raises(ttlc.KernelError, match=rf"{FILE}:{line_of(VIEWS, 'FUSE')}\..*modes 0 and 1 "
                                               r"cannot be fused: their strides do not match"):
        module["f"](y[:4])  # stride 8 of mode 1: rows 4-7 lie between the columns
    np.testing.assert_array_equal(y, 1)


@pytest.mark.parametrize("src", [TRANSPOSE.replace("BARRIER", "barrier.local"), REDUCE, GEMM,
                                 FOREACH_TILE, ATOMICS.replace("READ", ""), REGIONS, SAME_ITEM,
                                 CONVERGENT_IF, FOREACH,
                                 COOP_LOCAL.replace("BARRIER", "barrier.local"), SCALAR_BOUNDS,
                                 DIVERGENT_BARRIER, LIFETIME, SUBVIEW, BLAS_SHAPES, VIEWS])
def test_kernels_are_valid(src):
    ttlc.check(textwrap.dedent(src))
