"""Target cuda-tile (CUDA Tile IR): the programs of its first class are emitted, compiled
by NVIDIA's ``tileiras`` for sm_90 and sm_100 and printed back by ``tileirdisasm`` as
ttlc's own text (modulo formatting); everything else is a CompileError naming the
instruction and the target.  The corpus tests run over the examples, the lit programs
and generated programs (``TTLC_TILE_SEEDS``, default 200) and as many BLAS programs:
every program is emitted or refused with a CompileError docs/cuda-tile.md lists, and
every emitted one is validated by NVIDIA's tools and run by the Tile IR simulator
against the reference interpreter.  tileiras takes a second or more per module, so in
``make test`` each module is compiled at -O0 for one of the two architectures, chosen
by its name; ``make fuzz`` compiles 500 seeds' modules for both at the default level
(see ``tile_testing``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import ttlc
from ttlc.backends import get_backend

import tile_testing as tt
from interp_testing import BAD_GRIDS

ROOT = Path(__file__).resolve().parents[2]
BACKEND = get_backend("cuda-tile")
needs_tools = pytest.mark.skipif(not tt.available(), reason=tt.MISSING)

#: the first class: collective BLAS on memrefs of static and dynamic shapes, group ids,
#: subviews, scalar arithmetic and loops.  Each must be emitted and accepted.
FIRST_CLASS = {
    "axpby_static": """
func @k(%alpha: f32, %A: memref<f32x15x13x?>, %beta: f32, %B: memref<f32x13x15x?>) {
    %g = group_id.x : index
    %a = subview %A[0:15,0:13,%g] : memref<f32x15x13>
    %b = subview %B[0:13,0:15,%g] : memref<f32x13x15>
    axpby.t %alpha, %a, %beta, %b
}""",
    "axpby_dynamic": """
func @k(%alpha: f64, %A: memref<f64x?x?>, %B: memref<f64x?x?,strided<1,?>>) {
    %zero = constant 0.0 : f64
    axpby %alpha, %A, %zero, %B
}""",
    "axpby_vector_f16": """
func @k(%alpha: f16, %A: memref<f16x100>, %beta: f16, %B: memref<f16x100>) {
    axpby %alpha, %A, %beta, %B
}""",
    "gemm_f32_static": """
func @k(%alpha: f32, %A: memref<f32x64x32x?>, %B: memref<f32x32x48x?>, %beta: f32,
        %C: memref<f32x64x48x?>) {
    %k = group_id.x : index
    %a = subview %A[0:64,0:32,%k] : memref<f32x64x32>
    %b = subview %B[0:32,0:48,%k] : memref<f32x32x48>
    %c = subview %C[0:64,0:48,%k] : memref<f32x64x48>
    gemm %alpha, %a, %b, %beta, %c
}""",
    "gemm_f16_dynamic_tt": """
func @k(%A: memref<f16x?x?>, %B: memref<f16x?x?>, %C: memref<f16x?x?>) {
    %one = constant 1.0 : f16
    gemm.t.t %one, %A, %B, %one, %C
}""",
    "gemm_f64_mixed": """
func @k(%alpha: f64, %A: memref<f32x20x100>, %B: memref<f64x100x30>, %C: memref<f64x20x30>) {
    %zero = constant 0.0 : f64
    gemm %alpha, %A, %B, %zero, %C
}""",
    "gemv_ger_hadamard": """
func @k(%A: memref<f32x?x?>, %x: memref<f32x?>, %y: memref<f32x?>, %z: memref<f32x?>) {
    %one = constant 1.0 : f32
    %two = constant 2.0 : f32
    gemv %one, %A, %x, %two, %y
    gemv.t %one, %A, %y, %one, %x
    ger %two, %x, %y, %one, %A
    hadamard %one, %x, %y, %two, %z
}""",
    "sum": """
func @k(%A: memref<f64x32x16>, %s: memref<f64>, %r: memref<f64x32>, %c: memref<f64x16>,
        %v: memref<f64x?>) {
    %one = constant 1.0 : f64
    %zero = constant 0.0 : f64
    sum %one, %A, %zero, %r
    sum.t %one, %A, %one, %c
    sum %one, %v, %zero, %s
}""",
    "groups": """
func @k(%alpha: f64, %A: group<memref<f64x?x?>x?> {alignment=64}, %B: group<memref<f64x8x?>x4>,
        %C: group<memref<f64x?x8>x?, offset: ?>, %v: group<memref<f32x?>x?, offset: 2>) {
    %k = group_id.x : index
    %a = load %A[%k] : memref<f64x?x?>
    %b = load %B[%k] : memref<f64x8x?>
    %c = load %C[%k] : memref<f64x?x8>
    %x = load %v[%k] : memref<f32x?>
    %n = size %A[0] : index
    %has = associated %a : bool
    %all = associated %A : bool
    gemm.n.t %alpha, %a, %b, %alpha, %c
}""",
    "elements": """
func @k(%A: memref<i32x?x?>, %B: memref<i16x8x?,strided<2,?>>) {
    %i = group_id.x : index
    %j = group_id.y : index
    %x = load %A[%i, %j] : i32
    %y = cast %x : i16
    %z = shl %y, %y : i16
    store %z, %B[%j, %i]
    %c = less_than %x, %x : bool
    if %c {
        store %z, %B[%i, %j]
    }
    %r = if %c -> (f32) {
        %f = cast %x : f32
        yield (%f)
    } else {
        %g = constant 1.5 : f32
        yield (%g)
    }
}""",
    "views": """
func @k(%A: memref<f32x16x?>, %B: memref<f32x4x8x?>, %C: memref<f32x2x8x?>)
        attributes {subgroup_size=32, work_group_size=[64,2]} {
    %n = size %A[1] : index
    %e = expand %A[0 -> 2x8] : memref<f32x2x8x?>
    %f = fuse %B[0, 1] : memref<f32x32x?>
    %s = subgroup_size : i32
    %ns = num_subgroups.x : i32
    %m = mul %s, %ns : i32
    %x = cast %m : f32
    %g = fuse %e[0, 1] : memref<f32x16x?>
    %h = subview %f[0:16, 0:%n] : memref<f32x16x?,strided<1,32>>
    axpby %x, %g, %x, %h
    %c = fuse %C[1, 2] : memref<f32x2x?>
    %p = size %c[1] : index
    %four = constant 4 : index
    %q = div %p, %four : index
    %d = expand %c[1 -> 4x%q] : memref<f32x2x4x?>
    %zero = constant 0.0 : f32
    %r = subview %d[1, 0:4, 0:%q] : memref<f32x4x?,strided<2,8>>
    axpby %x, %r, %zero, %r
}""",
    "cumsum": """
func @k(%A: memref<f32x?x?>, %B: memref<f32x?x?>, %v: memref<f64x50>, %w: memref<f64x50>) {
    %one = constant 1.0 : f32
    %half = constant 0.5 : f64
    cumsum %one, %A, 0, %one, %B
    cumsum %one, %B, 1, %one, %A
    cumsum %half, %v, 0, %half, %w
}""",
    "constants": """
func @k(%a: f32, %b: f64, %c: f16, %d: bf16, %A: memref<f32x4>) {
    %x = constant 0.1 : f32
    %y = constant 0.1 : f64
    %z = constant 1.5e-7 : f16
    %w = constant 3.0e38 : f32
    %v = constant 123456.789 : f64
    %u = constant -0.0 : f32
    %t = constant 2.5 : bf16
    %j = constant true : bool
    %k = not %j : bool
    %s = add %x, %a : f32
    %q = add %y, %b : f64
    %r = add %z, %c : f16
    %p = add %t, %d : bf16
    %o = add %w, %s : f32
    %n = cast %v : f32
    %m = add %u, %n : f32
    %c0 = constant 0 : index
    store %m, %A[%c0]
}""",
    "alloca": """
func @k(%A: memref<f64x?x12>, %B: memref<f64x?x12>, %C: memref<f64x?x12>) {
    %t = alloca {alignment=32} : memref<f64x12x12,local>
    %u = alloca : memref<f64x12,local>
    %zero = constant 0.0 : f64
    %one = constant 1.0 : f64
    gemm.t.n %one, %B, %B, %zero, %t
    sum %one, %t, %zero, %u
    ger %one, %u, %u, %one, %t
    gemm %one, %A, %t, %zero, %C
    barrier.global
    lifetime_stop %t
    lifetime_stop %u
}""",
    "atomic": """
func @k(%A: memref<f32x?x?>, %total: memref<f32>, %C: memref<f64x?x?>, %x: memref<f64x?>) {
    %g = group_id.x : index
    %one = constant 1.0 : f32
    %a = subview %A[0:5, %g] : memref<f32x5>
    sum.atomic %one, %a, %one, %total
    %two = constant 2.0 : f64
    %onef = constant 1.0 : f64
    ger.atomic %two, %x, %x, %onef, %C
}""",
    "integer_blas": """
func @k(%A: memref<i8x?x?>, %B: memref<i8x?x40>, %C: memref<i8x?x40>, %x: memref<i32x?>,
        %y: memref<i32x?>, %M: memref<i64x?x?>, %s: memref<i64>, %beta: i32) {
    %one = constant 1 : i8
    %two = constant 2 : i8
    gemm %two, %A, %B, %one, %C
    %three = constant 3 : i32
    hadamard %three, %x, %y, %beta, %y
    %c = constant 1 : i64
    ger.atomic %three, %x, %y, %c, %M
    sum.atomic %three, %y, %c, %s
    cumsum %c, %M, 1, %c, %M
}""",
    "scalar_loop": """
func @k(%n: i32, %x: f32, %A: memref<f32x?x?>, %B: memref<f32x?x?>) {
    %gx = group_id.x : index
    %gy = group_id.y : index
    %ng = num_groups.x : index
    %m = size %A[1] : index
    %one = constant 1 : index
    %zero = constant 0 : index
    %c = cast %n : index
    %d = mul %c, %gy : index
    %e = rem %d, %ng : index
    %f0 = shl %e, %one : index
    %f = not %f0 : index
    %g = min %f, %m : index
    %lt = less_than %g, %m : bool
    %y = cast %g : f32
    %z = mul %y, %x : f32
    %w = exp %z : f32
    %ne = not_equal %w, %x : bool
    %b = and %lt, %ne : bool
    %m0 = size %A[0] : index
    %a = subview %A[0:%m0,%gx] : memref<f32x?>
    %r = for %i = %zero, %m init(%s = %x) -> (f32) {
        %t = add %s, %w : f32
        %b2 = subview %B[0:%m0,%i] : memref<f32x?>
        axpby %t, %a, %t, %b2
        yield (%t)
    }
}""",
    "spmd_divergent": """
func @k(%A: memref<f32x?>, %B: memref<i32x?>) attributes{subgroup_size=16, work_group_size=[32,3]} {
    parallel {
        %l = subgroup_local_id : i32
        %sx = subgroup_id.x : i32
        %sy = subgroup_id.y : i32
        %lin = subgroup_linear_id : i32
        %li = cast %lin : index
        %c16 = constant 16 : index
        %li2 = mul %li, %c16 : index
        %ll = cast %l : index
        %i = add %li2, %ll : index
        %n = size %A[0] : index
        %c = less_than %i, %n : bool
        %v = if %c -> (f32) {
            %x = load %A[%i] : f32
            %two = constant 2.0 : f32
            %y = mul %x, %two : f32
            store %y, %A[%i]
            yield (%y)
        } else {
            %z = constant -1.0 : f32
            yield (%z)
        }
        %m = size %B[0] : index
        %t = add %sx, %sy : i32
        %u = cast %v : i32
        %w = add %t, %u : i32
        %in = less_than %i, %m : bool
        if %in {
            %one = constant 1 : i32
            %e = and %l, %one : i32
            %odd = equal %e, %sx : bool
            if %odd {
                store %w, %B[%i]
            }
        }
    }
}""",
    "spmd_loop": """
func @k(%A: memref<f64x?x?>, %x: memref<f64x?>, %y: memref<f64x?>)
        attributes{subgroup_size=16, work_group_size=[16,2]} {
    %g = group_id.x : index
    %m = size %A[0] : index
    %n = size %A[1] : index
    parallel {
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %zero = constant 0.0 : f64
        %sy = subgroup_id.y : i32
        %c4 = constant 4 : i32
        %s16 = shl %sy, %c4 : i32
        %l = subgroup_local_id : i32
        %r3 = or %s16, %l : i32
        %r = cast %r3 : index
        %inside = less_than %r, %m : bool
        %s = for %j = %c0, %n init(%acc = %zero) -> (f64) {
            %next = if %inside -> (f64) {
                %a = load %A[%r, %j] : f64
                %b = load %x[%j] : f64
                %p = mul %a, %b : f64
                %q = add %acc, %p : f64
                yield (%q)
            } else {
                yield (%acc)
            }
            yield (%next)
        }
        if %inside {
            store %s, %y[%r]
        }
    }
}""",
    "spmd_divergent_loop": """
func @k(%x: memref<i64x?>, %y: memref<i64x?>) attributes{subgroup_size=32, work_group_size=[96,1]} {
    %n = size %x[0] : index
    parallel {
        %s = subgroup_id.x : i32
        %l = subgroup_local_id : i32
        %c32 = constant 32 : index
        %c96 = constant 96 : index
        %si = cast %s : index
        %li = cast %l : index
        %b = mul %si, %c32 : index
        %w = add %b, %li : index
        %zero = constant 0 : i64
        %odd = rem %w, %c32 : index
        %step = add %odd, %c32 : index
        %sum = for %j = %w, %n, %step init(%acc = %zero) -> (i64) {
            %v = load %x[%j] : i64
            %a = add %acc, %v : i64
            yield (%a)
        }
        %m = size %y[0] : index
        %in = less_than %w, %m : bool
        if %in {
            %c1 = constant 1 : index
            %t = for %k = %c1, %w init(%p = %sum) -> (i64) {
                %q = cast %k : i64
                %r = xor %p, %q : i64
                yield (%r)
            }
            store %t, %y[%w]
        }
    }
}""",
    "foreach": """
func @k(%A: memref<f32x?x?>, %B: memref<f32x?x?>) attributes{subgroup_size=32, work_group_size=[32,3]} {
    %c1 = constant 1 : index
    %m = size %A[0] : index
    %n = size %A[1] : index
    foreach (%i, %j) = (%c1, %c1), (%m, %n) {
        %x = load %A[%i, %j] : f32
        %b = load %B[%i, %j] : f32
        %y = add %x, %b : f32
        store %y, %B[%i, %j]
    }
}""",
    "foreach_tile": """
func @k(%A: memref<i32x?x?>, %B: memref<i32x?x?>) attributes{subgroup_size=16, work_group_size=[32,1]} {
    %m = size %A[0] : index
    %n = size %A[1] : index
    %c0 = constant 0 : index
    foreach_tile (%i, %j) = (%c0, %c0), (%m, %n) as (%ti, %tj) <= (16, 4) {
        %l = subgroup_local_id : i32
        %li = cast %l : index
        %inside = less_than %li, %ti : bool
        if %inside {
            %r = add %i, %li : index
            %c0j = constant 0 : index
            %last = for %k = %c0j, %tj init(%acc = %l) -> (i32) {
                %c = add %j, %k : index
                %x = load %A[%r, %c] : i32
                %s = add %acc, %x : i32
                %b = load %B[%r, %c] : i32
                %u = add %s, %b : i32
                store %u, %B[%r, %c]
                yield (%s)
            }
        }
    }
}""",
    "subgroups": """
func @k(%x: memref<f16x?>, %y: memref<i32x?>, %z: memref<f32x?>) attributes{subgroup_size=16, work_group_size=[32,2]} {
    %m = size %y[0] : index
    %c16 = constant 16 : i32
    %three = constant 3 : i32
    parallel {
        %s = subgroup_linear_id : i32
        %l = subgroup_local_id : i32
        %b = mul %s, %c16 : i32
        %w0 = add %b, %l : i32
        %w = cast %w0 : index
        %in = less_than %w, %m : bool
        if %in {
            %a = load %x[%w] : f16
            %v = load %y[%w] : i32
            %r = subgroup_reduce_add %a : f16
            %mx = subgroup_reduce_max %v : i32
            %mn = subgroup_inclusive_scan_min %v : i32
            %sc = subgroup_inclusive_scan_add %a : f16
            %k = rem %s, %three : i32
            %bc = subgroup_broadcast %a, %k : f16
            %f = cast %r : f32
            %g = cast %sc : f32
            %h = cast %bc : f32
            %fg = add %f, %g : f32
            %fgh = mul %fg, %h : f32
            store %fgh, %z[%w]
            %u = sub %mx, %mn : i32
            store %u, %y[%w]
        }
    }
}""",
}


#: cooperative matrices (spec: SPMD instructions > Cooperative matrix ...): two subgroups
#: of 16 work-items with a matrix each, rows and columns that are not powers of two,
#: checked and transposed accesses, every way of combining entries
COOP = {
    "coop_mul_add_f16": """
func @k(%A: memref<f16x32x?>, %B: memref<f16x?x24>, %C: memref<f32x32x24>)
        attributes{subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %c0 = constant 0 : index
        %sg = subgroup_id.x : i32
        %r = cast %sg : index
        %c16 = constant 16 : index
        %x = mul %r, %c16 : index
        %a = cooperative_matrix_load.rows_checked %A[%x,%c0] : coopmatrix<f16x16x8,matrix_a>
        %b = cooperative_matrix_load.both_checked %B[%c0,%c0] : coopmatrix<f16x8x24,matrix_b>
        %c = cooperative_matrix_load %C[%x,%c0] : coopmatrix<f32x16x24,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<f32x16x24,matrix_acc>
        %two = constant 2.0 : f32
        %e = cooperative_matrix_scale %two, %d : coopmatrix<f32x16x24,matrix_acc>
        cooperative_matrix_store %e, %C[%x,%c0]
    }
}""",
    "coop_mul_add_mixed_transposed": """
func @k(%A: memref<f64x8x32>, %B: memref<i32x8x8>, %C: memref<f64x4x32>)
        attributes{subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %c0 = constant 0 : index
        %sg = subgroup_linear_id : i32
        %r = cast %sg : index
        %c16 = constant 16 : index
        %x = mul %r, %c16 : index
        %a = cooperative_matrix_load.t %A[%c0,%x] : coopmatrix<f64x16x8,matrix_a>
        %b = cooperative_matrix_load %B[%c0,%c0] : coopmatrix<i32x8x5,matrix_b>
        %z = constant 0.0 : coopmatrix<f64x16x5,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %z : coopmatrix<f64x16x5,matrix_acc>
        cooperative_matrix_store.t.cols_checked %d, %C[%c0,%x]
    }
}""",
    "coop_mul_add_i8": """
func @k(%A: memref<i8x16x32>, %B: memref<i8x32x16>, %C: memref<i32x16x16>)
        attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<i8x16x32,matrix_a>
        %b = cooperative_matrix_load %B[%c0,%c0] : coopmatrix<i8x32x16,matrix_b>
        %c = cooperative_matrix_load %C[%c0,%c0] : coopmatrix<i32x16x16,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<i32x16x16,matrix_acc>
        cooperative_matrix_store %d, %C[%c0,%c0]
    }
}""",
    "coop_reduce_extract_insert": """
func @k(%A: memref<f32x32x6>, %R: memref<f32x32>, %S: memref<f32x6x2>, %E: memref<f32x64x3>)
        attributes{subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %c0 = constant 0 : index
        %sg = subgroup_id.x : i32
        %r = cast %sg : index
        %c16 = constant 16 : index
        %x = mul %r, %c16 : index
        %a = cooperative_matrix_load %A[%x,%c0] : coopmatrix<f32x16x6,matrix_acc>
        %rows = cooperative_matrix_reduce_add.row %a : coopmatrix<f32x16x1,matrix_acc>
        %cols = cooperative_matrix_reduce_max.column %a : coopmatrix<f32x1x6,matrix_acc>
        %rv = subview %R[%x:16] : memref<f32x16>
        %re = expand %rv[0->16x1] : memref<f32x16x1>
        cooperative_matrix_store %rows, %re[%c0,%c0]
        cooperative_matrix_store.t %cols, %S[%c0,%r]
        %id = subgroup_linear_id : i32
        %lid = subgroup_local_id : i32
        %w = cast %lid : index
        %v = cast %id : index
        %c32 = constant 32 : index
        %y = mul %v, %c16 : index
        %p = add %y, %w : index
        %e0 = cooperative_matrix_extract %a[0] : f32
        %e5 = cooperative_matrix_extract %a[5] : f32
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        store %e0, %E[%p,%c0]
        store %e5, %E[%p,%c1]
        %f = cast %lid : f32
        %b = cooperative_matrix_insert %f, %a[3] : coopmatrix<f32x16x6,matrix_acc>
        %e3 = cooperative_matrix_extract %b[3] : f32
        store %e3, %E[%p,%c2]
        cooperative_matrix_store %b, %A[%x,%c0]
    }
}""",
    "coop_apply_divergent": """
func @k(%A: memref<i32x8x4>, %B: memref<i32x8x4>, %O: memref<i32x32>)
        attributes{subgroup_size=32, work_group_size=[32,1]} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<i32x8x4,matrix_acc>
        %lid = subgroup_local_id : i32
        %b = cooperative_matrix_apply (%i,%j,%v)=%a -> coopmatrix<i32x8x4,matrix_acc> {
            %t = mul %i, %j : i32
            %u = add %t, %v : i32
            %w = add %u, %lid : i32
            yield (%w)
        }
        %c10 = constant 10 : i32
        %odd = less_than %lid, %c10 : bool
        %m = if %odd -> (coopmatrix<i32x8x4,matrix_acc>) {
            %n = neg %b : coopmatrix<i32x8x4,matrix_acc>
            yield (%n)
        } else {
            yield (%b)
        }
        cooperative_matrix_store %m, %B[%c0,%c0]
        %q = cooperative_matrix_extract %m[0] : i32
        %l = cast %lid : index
        store %q, %O[%l]
    }
}""",
    "coop_complex_casts": """
func @k(%A: memref<c32x16x8>, %B: memref<c64x16x8>, %F: memref<f32x16x8>)
        attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<c32x16x8,matrix_acc>
        %b = cast %a : coopmatrix<c64x16x8,matrix_acc>
        cooperative_matrix_store %b, %B[%c0,%c0]
        %f = cooperative_matrix_load %F[%c0,%c0] : coopmatrix<f32x16x8,matrix_acc>
        %g = cast %f : coopmatrix<c32x16x8,matrix_acc>
        cooperative_matrix_store %g, %A[%c0,%c0]
    }
}""",
    "coop_complex_and_atomics": """
func @k(%A: memref<c32x16x8>, %B: memref<c32x8x8>, %C: memref<c64x16x8>, %F: memref<f32x16x8>,
        %I: memref<i32x16x8>, %O: memref<f32x16x8>)
        attributes{subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<c32x16x8,matrix_a>
        %b = cooperative_matrix_load.t %B[%c0,%c0] : coopmatrix<c32x8x8,matrix_b>
        %c = cooperative_matrix_load %C[%c0,%c0] : coopmatrix<c64x16x8,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<c64x16x8,matrix_acc>
        %s = constant [0.5, -1.0] : c64
        %e = cooperative_matrix_scale %s, %d : coopmatrix<c64x16x8,matrix_acc>
        %r = cooperative_matrix_reduce_add.row %e : coopmatrix<c64x16x1,matrix_acc>
        %x = cooperative_matrix_extract %r[0] : c64
        %y = cooperative_matrix_insert %x, %e[1] : coopmatrix<c64x16x8,matrix_acc>
        %sg = subgroup_linear_id : i32
        %c1 = constant 1 : i32
        %second = equal %sg, %c1 : bool
        if %second {
            cooperative_matrix_store %y, %C[%c0,%c0]
        }
        %f = cooperative_matrix_load %F[%c0,%c0] : coopmatrix<f32x16x8,matrix_acc>
        %g = cooperative_matrix_atomic_max %f, %O[%c0,%c0] : coopmatrix<f32x16x8,matrix_acc>
        %i = cooperative_matrix_atomic_load %I[%c0,%c0] : coopmatrix<i32x16x8,matrix_acc>
        %j = cooperative_matrix_atomic_add.rows_checked %i, %I[%c0,%c0] : coopmatrix<i32x16x8,matrix_acc>
        %h = add %g, %f : coopmatrix<f32x16x8,matrix_acc>
        cooperative_matrix_atomic_store %h, %F[%c0,%c0]
    }
}""",
}
FIRST_CLASS.update(COOP)

#: %l, %w and %i: the work-item's subgroup-local id and its linear id (i32 and index)
WORK_ITEM = """%l = subgroup_local_id : i32
        %g = subgroup_linear_id : i32
        %sgs = subgroup_size : i32
        %base = mul %g, %sgs : i32
        %w = add %base, %l : i32
        %i = cast %w : index"""

#: complex numbers (spec: Scalar types, Arithmetic, Math, Cast, Compare), atomics
#: (Atomic load/store/update, the .atomic BLAS forms), exclusive scans, integer gemm
MORE = {
    "complex_scalar": """
func @k(%a: c32, %A: memref<c32x16>, %B: memref<c64x?>, %r: memref<f32x4>, %T: memref<c32x16>) {
    %i = group_id.x : index
    %x = load %A[%i] : c32
    %s = add %a, %x : c32
    %p = mul %s, %x : c32
    %q = div %p, %a : c32
    %n = neg %q : c32
    %c = conj %n : c32
    %e = exp %c : c32
    %e2 = exp2 %x : c32
    %t = sub %e, %e2 : c32
    store %t, %T[%i]
    %w = cast %x : c64
    %ww = mul %w, %w : c64
    store %ww, %B[%i]
    %m = abs %x : f32
    %re = re %x : f32
    %im = im %x : f32
    %one = constant [1.0, -2.5] : c32
    %eq = equal %x, %one : bool
    %ne = not_equal %x, %a : bool
    %k = constant 0 : index
    %k1 = constant 1 : index
    %k2 = constant 2 : index
    %k3 = constant 3 : index
    store %m, %r[%k]
    store %re, %r[%k1]
    %z = if %ne -> (f32) { yield (%im) } else { yield (%re) }
    store %z, %r[%k2]
    %f = if %eq -> (f32) { yield (%re) } else { yield (%m) }
    store %f, %r[%k3]
}""",
    "complex_spmd": """
func @k(%A: memref<c64x64>, %B: memref<c64x64>)
        attributes{subgroup_size=16, work_group_size=[32,2]} {
    parallel {
        WORK_ITEM
        %x = load %A[%i] : c64
        %s = subgroup_inclusive_scan_add %x : c64
        %e = subgroup_exclusive_scan_add %x : c64
        %r = subgroup_reduce_add %x : c64
        %c3 = constant 3 : i32
        %b = subgroup_broadcast %x, %c3 : c64
        %t = add %s, %e : c64
        %u = mul %t, %b : c64
        %v = sub %u, %r : c64
        store %v, %B[%i]
    }
}""",
    "exclusive_scans": """
func @k(%A: memref<i32x32>, %B: memref<f32x32>)
        attributes{subgroup_size=8, work_group_size=[32,1]} {
    parallel {
        WORK_ITEM
        %x = load %A[%i] : i32
        %c5 = constant 5 : i32
        %odd = less_than %l, %c5 : bool
        if %odd {
            %m = subgroup_exclusive_scan_max %x : i32
            store %m, %A[%i]
        }
        %f = cast %x : f32
        %s = subgroup_exclusive_scan_add %f : f32
        %n = subgroup_exclusive_scan_min %f : f32
        %t = add %s, %n : f32
        store %t, %B[%i]
    }
}""",
    "atomics": """
func @k(%A: memref<i32x4>, %F: memref<f32x4>, %D: memref<f64x4>, %C: memref<c32x2>, %O: memref<f32x64>)
        attributes{subgroup_size=16, work_group_size=[64,1]} {
    parallel {
        WORK_ITEM
        %c4 = constant 4 : index
        %j = rem %i, %c4 : index
        %v = cast %w : f32
        %c30 = constant 30.0 : f32
        %y = sub %v, %c30 : f32
        %a = atomic_add %w, %A[%j] : i32
        %b = atomic_max %y, %F[%j] : f32
        %d = cast %y : f64
        %e = atomic_min.device.acquire_release %d, %D[%j] : f64
        %k0 = constant 0 : index
        %z = cast %y : c32
        %zz = atomic_add %z, %C[%k0] : c32
        %x = atomic_load %F[%j] : f32
        %c2 = constant 2 : i32
        %h = rem %w, %c2 : i32
        %c0 = constant 0 : i32
        %even = equal %h, %c0 : bool
        if %even {
            %q = cast %a : f32
            atomic_store %q, %O[%i]
        }
    }
}""",
    "blas_atomic_and_integer_gemm": """
func @k(%alpha: f32, %A: memref<f32x5x7>, %b: memref<f32x5>, %I: memref<i32x6x9>, %J: memref<i32x9x3>,
        %K: memref<i32x6x3>) {
    %zero = constant 0.0 : f32
    sum.atomic %alpha, %A, %zero, %b
    %one = constant 1 : i32
    gemm %one, %I, %J, %one, %K
}""",
    "complex_blas": """
func @k(%alpha: c32, %A: memref<c32x20x?>, %B: memref<f32x?x12>, %beta: c32, %C: memref<c64x20x12>,
        %x: memref<c32x?>, %y: memref<c32x20>, %z: memref<c32x12>, %S: memref<c32x20x12>, %D: memref<c32x20x20>,
        %T: memref<c32x12x20>) {
    gemm %alpha, %A, %B, %beta, %C
    %one = constant [1.0, 0.0] : c32
    gemm.n.t %alpha, %A, %A, %one, %D
    gemv %alpha, %A, %x, %beta, %y
    ger %alpha, %y, %z, %one, %S
    %zero = constant [0.0, 0.0] : c32
    axpby.t %alpha, %S, %zero, %T
    hadamard %alpha, %y, %y, %beta, %y
    sum %alpha, %S, %one, %y
    cumsum %alpha, %S, 1, %beta, %S
    sum.atomic %alpha, %A, %one, %y
}""",
}
MORE = {name: text.replace("WORK_ITEM", WORK_ITEM) for name, text in MORE.items()}
FIRST_CLASS.update(MORE)

def test_registry_entry():
    assert [(s.name, s.binary) for s in BACKEND.stages] == [("tile-text", False), ("tilebc", True)]
    assert BACKEND.stage().name == "tilebc" and not BACKEND.executes and BACKEND.machine == "nvidia"


def test_cli_writes_bytecode_and_text(tmp_path):
    from ttlc.cli import main

    src = tmp_path / "k.ir"
    src.write_text(FIRST_CLASS["axpby_dynamic"])
    assert main(["compile", "--target", "cuda-tile", str(src), "-o", str(tmp_path / "k.tilebc")]) == 0
    assert (tmp_path / "k.tilebc").read_bytes().startswith(b"\x7fTileIR\x00")
    assert main(["compile", "--target", "cuda-tile", "-S", str(src), "-o", str(tmp_path / "k.mlir")]) == 0
    assert (tmp_path / "k.mlir").read_text().startswith("cuda_tile.module @kernels {")


@pytest.mark.parametrize("name", sorted(FIRST_CLASS))
def test_first_class_is_emitted(name):
    text = BACKEND.emit(ttlc.parse(FIRST_CLASS[name]), "tile-text")
    assert text.startswith("cuda_tile.module @kernels {")
    assert isinstance(BACKEND.emit(ttlc.parse(FIRST_CLASS[name]), "tilebc"), bytes)


_TOLERANCE = {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-4, "f64": 1e-10}
#: the type of a complex number's parts
_PARTS = {"complex64": "f32", "complex128": "f64"}


def _inputs(func, seed: int):
    """Generated arguments (dynamic sizes 37: two tiles of 32 along a dynamic mode), with
    float scalars other than 1; the same values for the same seed."""
    import numpy as np
    from ttlc.runtime.inputs import generated_inputs

    args, buffers = generated_inputs(func, dim=37, group_size=3, seed=seed)
    rng = np.random.default_rng(seed)
    args = [np.float32(rng.uniform(-2, 2)) if isinstance(x, float) else x for x in args]
    return args, buffers


def _with_chosen_sizes(text: str) -> str:
    """`text` with the subgroup and work-group sizes target cuda-tile chooses written
    into every function that leaves them open, so that the reference interpreter runs
    it with the same sizes (results may depend on them)."""
    from ttlc.backends.tile.backend import tile_machine
    from ttlc.ir.printer import print_program
    from ttlc.target import ExecConfig, get_target

    program = ttlc.parse(text)
    for f in program.functions:
        if f.subgroup_size is None or f.work_group_size is None:
            try:
                config = ExecConfig.of(f, tile_machine(get_target("nvidia")), program)
            except ttlc.CompileError:
                continue
            f.attrs["subgroup_size"] = config.subgroup_size
            f.attrs["work_group_size"] = list(config.work_group_size)
    return print_program(program)


def _compare_meaning(text: str, name: str, make_args=None, grid=None,
                     any_inputs: bool = False, run=None) -> None:
    """Run function `name` of `text` on the reference interpreter and its Tile IR on the
    NumPy Tile IR interpreter, on the same inputs; compare everything they write.
    ``any_inputs``: the inputs were made without knowing the program's rules, and may break
    them (a KernelError of the reference): then there is no result to compare.  ``run(text,
    name, args, grid)``, where given, runs the Tile IR instead (target cuda's tests)."""
    import numpy as np
    from ttlc.backends.tile import simulate
    from ttlc.backends.tile.backend import translate

    text = _with_chosen_sizes(text)
    program = ttlc.parse(text)
    index = [f.name for f in program.functions].index(name)
    func = program.functions[index]
    if make_args is None:
        # several work-groups only where they work on different data (else they would race)
        grid = (2, 2, 1) if "group_id" in text else (1, 1, 1)
        make_args = lambda: _inputs(func, 7)  # noqa: E731
    expected_args, expected = make_args()
    try:
        ttlc.compile(text, target="interp")[name](*expected_args, grid=grid)
    except ttlc.KernelError:
        if any_inputs:
            return
        raise
    args, got = make_args()
    if run is None:
        simulate.run(translate(program).entries[index], func, args, grid)
    else:
        run(text, name, args, grid)
    for e, g in zip(expected, got):
        tol = _TOLERANCE.get(_PARTS.get(str(e.dtype), str(e.dtype).replace("float", "f").replace(
            "bfloat16", "bf16")), 0)
        wide = np.complex128 if np.iscomplexobj(e) else np.float64  # complex: both parts
        np.testing.assert_allclose(g.astype(wide), e.astype(wide), rtol=tol,
                                   atol=tol * max(1.0, float(np.abs(e.astype(wide)).max(initial=0))))


@pytest.mark.parametrize("name", sorted(FIRST_CLASS))
def test_meaning_matches_the_reference_interpreter(name):
    """The emitted module, run by the NumPy Tile IR interpreter, writes what the program
    writes on the reference interpreter."""
    _compare_meaning(FIRST_CLASS[name], "k")


@pytest.mark.parametrize("grid, message", BAD_GRIDS)
def test_the_simulator_refuses_grids_no_gpu_launches(grid, message):
    """The Tile IR interpreter checks its grid as every launch does (a ValueError naming
    the grid's mode and the limit), rather than running no block or an endless loop."""
    from ttlc.backends.tile import simulate
    from ttlc.backends.tile.backend import translate

    program = ttlc.parse(FIRST_CLASS["axpby_dynamic"])
    with pytest.raises(ValueError, match=message):
        simulate.run(translate(program).entries[0], program.functions[0], [], grid)


def _validate(program, archs=tt.ARCHS) -> None:
    """tileiras compiles the module for the architectures (sm_90 and sm_100); tileirdisasm
    prints it back as ttlc prints it."""
    code = BACKEND.emit(program, "tilebc")
    for arch in archs:
        ok, log = tt.compile_cubin(code, arch)
        assert ok, f"tileiras --gpu-name={arch} rejected the module:\n{log}"
    assert tt.normalise(tt.disassemble(code)) == tt.normalise(BACKEND.emit(program, "tile-text"))


@needs_tools
@pytest.mark.parametrize("name", sorted(FIRST_CLASS))
def test_first_class_validated_by_nvidia_tools(name):
    _validate(ttlc.parse(FIRST_CLASS[name]))


def test_bytecode_header_and_sections():
    """The header NVIDIA's reader expects (magic, version 13.3), the sections in the
    writer's order and the end byte."""
    code = BACKEND.emit(ttlc.parse(FIRST_CLASS["axpby_dynamic"]), "tilebc")
    assert code[:8] == b"\x7fTileIR\x00" and code[8:12] == bytes([13, 3, 0, 0])
    assert code[12] == 0x82  # functions, aligned
    assert code[-1] == 0


def test_opcodes_match_nvidia_registry():
    """Every opcode of the table is the one NVIDIA's cuTile Python encodes (generated from
    the registry, BytecodeOpcodes.td)."""
    pytest.importorskip("cuda.tile", reason=tt.MISSING)
    import cuda.tile._bytecode.encodings as enc
    from ttlc.backends.tile.ops import OPS

    source = Path(enc.__file__).read_text()
    codes = {m.group(1).lower(): int(m.group(2)) for m in re.finditer(
        r"def encode_(\w+?)(?:Tko)?Op\(.*?# Opcode\n\s+encode_varint\((\d+)", source, re.S)}
    for name, op in OPS.items():
        key = name.replace("_tko", "").replace("_", "")  # load_view_tko: LoadViewTkoOp
        assert codes.get(key) == op.opcode, f"{name}: ours 0x{op.opcode:x}, NVIDIA's {codes.get(key)}"


@pytest.mark.parametrize("text, instruction", [
    ("func @k(%a: i16, %A: memref<i16x8>) {\n axpby.atomic %a, %A, %a, %A\n}", "axpby"),
    ("func @k(%a: i16, %A: memref<i16x8>) {\n %one = constant 1 : i16\n"
     " axpby.atomic %a, %A, %one, %A\n}", "axpby"),
    ("func @k(%a: i16, %A: memref<i16x8>) {\n %i = constant 0 : index\n"
     " %o = atomic_add %a, %A[%i] : i16\n}", "atomic_add"),
    ("func @k(%a: f16, %A: memref<f16x8>) {\n %i = constant 0 : index\n"
     " %o = atomic_max %a, %A[%i] : f16\n}", "atomic_max"),
    ("func @k(%A: memref<f32x16x8>) attributes{subgroup_size=16, work_group_size=[16,1]} {\n"
     " parallel {\n %i = constant 0 : index\n"
     " %m = cooperative_matrix_load %A[%i,%i] : coopmatrix<f32x16x8,matrix_acc>\n"
     " %n = cooperative_matrix_apply (%r,%c,%v)=%m -> coopmatrix<f32x16x8,matrix_acc> {\n"
     " %s = subgroup_reduce_add %v : f32\n yield (%s)\n }\n }\n}",
     "subgroup_reduce_add"),
])
def test_outside_the_class_is_a_compile_error(text, instruction):
    with pytest.raises(ttlc.CompileError) as e:
        BACKEND.emit(ttlc.parse(text), "tilebc")
    message = e.value.diagnostics[0][3]
    assert message.startswith(f"{instruction}:") and "target cuda-tile" in message


def test_entry_names_starting_with_a_digit_are_a_compile_error():
    with pytest.raises(ttlc.CompileError, match=r"function @0: .*target cuda-tile"):
        BACKEND.emit(ttlc.parse("func @0(%A: memref<f32x8>) {\n}"), "tilebc")


_SIZES = (1, 2, 3, 5, 8, 16, 17, 33, 64, 100, None)


def blas_program(seed: int) -> str:
    """A random collective BLAS instruction of the first class: float type, sizes (each of
    m, n, k static or dynamic for every operand using it), transpositions and beta (a
    constant 0 or 1, or an argument)."""
    import random

    rng = random.Random(seed)
    ty = rng.choice(["f16", "bf16", "f32", "f64"])
    m, n, k = (rng.choice(_SIZES) for _ in range(3))
    ta, tb = rng.choice("nt"), rng.choice("nt")
    beta = rng.choice(["%zero", "%beta", "%one"])

    def op(a, b, t):
        return (b, a) if t == "t" else (a, b)
    name = rng.choice(["gemm", "gemv", "axpby", "sum", "ger", "hadamard", "cumsum"])
    shapes, mods = {
        "gemm": ((op(m, k, ta), op(k, n, tb), (m, n)), f".{ta}.{tb}"),
        "gemv": ((op(m, k, ta), (k,), (m,)), f".{ta}"),
        "axpby": ((op(m, n, ta), (m, n)), f".{ta}"),
        "sum": ((op(m, n, ta), (m,)), f".{ta}"),
        "ger": (((m,), (n,), (m, n)), ""),
        "hadamard": (((m, n), (m, n), (m, n)), ""),
        "cumsum": (((m, n), (m, n)), ""),
    }[name]
    names = "ABC"[:len(shapes)]
    params = ", ".join(f"%{x}: memref<{ty}x" + "x".join("?" if d is None else str(d) for d in s)
                       + ">" for x, s in zip(names, shapes))
    operands = [f"%{x}" for x in names]
    operands.insert(len(operands) - 1, beta)
    if name == "cumsum":
        operands.insert(1, str(rng.choice([0, 1])))  # the summed mode
    return (f"func @k(%alpha: {ty}, %beta: {ty}, {params}) {{\n"
            f"    %zero = constant 0.0 : {ty}\n    %one = constant 1.0 : {ty}\n"
            f"    {name}{mods} %alpha, {', '.join(operands)}\n}}\n")


def _corpus():
    """(name, text, generated case or None) of the examples, the valid lit programs,
    programs of ttlc's generator and BLAS programs (``blas_program``)."""
    from ttlc.testing.generator import generate

    for f in sorted((ROOT / "examples").glob("*.ir")):
        yield f"examples/{f.name}", f.read_text(), None
    for f in sorted((ROOT / "tests" / "lit").rglob("*.ir")):
        text = f.read_text(errors="replace")
        try:
            ttlc.check(text)
        except ttlc.CompileError:
            continue
        yield str(f.relative_to(ROOT)), text, None
    for seed in range(SEEDS):
        case = generate(seed)
        yield f"generated/{seed}", case.text, case
    for seed in range(SEEDS):
        yield f"blas/{seed}", blas_program(seed), None


SEEDS = int(os.environ.get("TTLC_TILE_SEEDS", "200"))
CORPUS = {name: (text, case) for name, text, case in _corpus()}


def _with_arrays(args):
    from ttlc.testing.differential import arrays_of

    return args, arrays_of(args)


def _outcome(text: str) -> str:
    """"emitted" or the CompileError's message, which must name the target."""
    try:
        BACKEND.emit(ttlc.parse(text), "tilebc")
    except ttlc.CompileError as e:
        assert "target cuda-tile" in str(e), str(e)
        return e.diagnostics[0][3]
    return "emitted"


COUNTED_SEEDS = max(SEEDS, 200)  # emitting is cheap: at least 200 generated programs
#: what docs/cuda-tile.md says target cuda-tile refuses (of the corpus: entry names
#: starting with a digit, atomic updates Tile IR has no mode for)
_DOCUMENTED_REFUSALS = re.compile(r"function @\d\w*: names starting with a digit|"
                                  r"\w*atomic\w*: atomic updates of (i8|i16|bf16|f16)")


def test_corpus_counts():
    """Every program of the corpus (with at least 200 generated ones) is emitted or
    refused with a CompileError naming the target (the counts are printed with -s)."""
    from ttlc.testing.generator import generate

    texts = [text for text, _ in CORPUS.values()]
    texts += [generate(seed).text for seed in range(SEEDS, COUNTED_SEEDS)]
    outcomes = [_outcome(text) for text in texts]
    emitted = outcomes.count("emitted")
    print(f"\ncuda-tile corpus: {emitted} emitted, {len(outcomes) - emitted} CompileError "
          f"of {len(outcomes)}")
    assert emitted >= SEEDS  # the BLAS programs at least
    refused = [o for o in outcomes if o != "emitted" and not _DOCUMENTED_REFUSALS.match(o)]
    assert not refused, f"refusals docs/cuda-tile.md does not list: {sorted(set(refused))}"


@needs_tools
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_emitted_programs_are_validated(name):
    """An emitted module is accepted by tileiras, printed back by tileirdisasm as ttlc
    prints it, and (run by the NumPy Tile IR interpreter) writes what the reference
    interpreter writes."""
    text, case = CORPUS[name]
    if _outcome(text) != "emitted":
        return
    program = ttlc.parse(text)
    _validate(program, tt.archs_for(name))
    for f in program.functions:
        if case is None:
            _compare_meaning(text, f.name, any_inputs=True)
        elif f.name == case.kernel_name:
            _compare_meaning(text, f.name, lambda: _with_arrays(case.make_args()), case.grid)
