"""The builder (ttlc.ir.builder): every instruction family, printed and parsed back.

Each test builds a program, compares its print with canonical text written by hand from
the language reference, and checks that the text parses, prints identically, and that
the parsed IR has the same structure as the built one (the builder must produce what
the parser produces).
"""
from __future__ import annotations

import math

import pytest

import ttlc
from ttlc.ir import ops
from ttlc.ir.builder import (BF16, BOOL, C32, C64, F16, F32, F64, I8, I16, I32, I64, INDEX,
                             Builder, ProgramBuilder, RegionOp, coopmatrix, group, memref)
from ttlc.ir.core import Instruction, Program, Region, Value


# ---- helpers ------------------------------------------------------------------------------
def structure(program: Program):
    """A comparable picture of a program: opcodes, modifiers (with defaults), attributes,
    types, and operands as positions of their definitions."""
    ids = {}

    def vid(v):
        return ("v", ids.setdefault(v, len(ids)))

    def enc(x):
        if isinstance(x, Value):
            return vid(x)
        if isinstance(x, (list, tuple)):
            return [enc(y) for y in x]
        return ("c", x if not isinstance(x, float) or not math.isnan(x) else "nan")

    def region(r: Region):
        return ([(vid(a), str(a.type)) for a in r.args], [inst(i) for i in r.instructions])

    def inst(i: Instruction):
        mods = {m.slot: i.modifier(m.slot) for m in i.opdef.modifiers}
        return (i.opcode, mods, {k: enc(v) for k, v in i.slots.items()},
                {k: enc(v) for k, v in i.attrs.items()},
                [(vid(r), str(r.type)) for r in i.results], [region(r) for r in i.regions])

    return [(f.name, [(vid(a.value), str(a.value.type), a.attrs) for a in f.args], f.attrs,
             region(f.body)) for f in program.functions]


def check_built(pb: ProgramBuilder, expected: str) -> Program:
    """The built program prints as expected; the text parses to the same structure and
    prints identically (a fixed point); the program is valid."""
    text = str(pb)
    assert text == expected
    parsed = ttlc.parse(text)
    assert str(parsed) == expected
    assert structure(parsed) == structure(pb.program)
    ttlc.check(text)
    ttlc.check(pb.program)
    return parsed


BUILT = []  # every program built by the tests below, for the coverage test


def record(pb: ProgramBuilder) -> ProgramBuilder:
    BUILT.append(pb.program)
    return pb


# ---- collective BLAS-like instructions, alloca, lifetime_stop -----------------------------
BLAS_EXPECTED = """\
func @blas(%alpha: f32, %A: memref<f32x16x8>, %B: memref<f32x8x16>, %C: memref<f32x16x16>, %x: memref<f32x8>, %y: memref<f32x16>, %D: memref<f32x16x8>, %s: memref<f32>) {
    %zero = constant 0x0p+0 : f32
    %one = constant 0x1p+0 : f32
    gemm %alpha, %A, %B, %one, %C
    gemm.atomic.t.t %alpha, %B, %A, %zero, %C
    gemm.n.t %alpha, %A, %D, %one, %C
    gemm.n.t %alpha, %A, %D, %one, %C
    gemv %alpha, %A, %x, %one, %y
    gemv.atomic.t %alpha, %B, %x, %one, %y
    ger %alpha, %y, %x, %one, %A
    ger.atomic %alpha, %y, %x, %zero, %A
    hadamard %alpha, %A, %D, %one, %D
    hadamard.atomic %alpha, %A, %D, %one, %D
    axpby %alpha, %A, %one, %D
    axpby.atomic.t %alpha, %B, %zero, %D
    sum %alpha, %A, %one, %y
    sum.t %alpha, %A, %zero, %x
    sum.atomic %alpha, %x, %zero, %s
    cumsum %alpha, %A, 0, %one, %D
    cumsum.atomic %alpha, %A, 1, %one, %D
    %n = size %A[0] : index
    check_shapes.gemm.n.t [2,2,2] %n, %n, %n, %n, %n, %n
    %tmp = alloca {alignment=16} : memref<f32x16x8,local>
    axpby %alpha, %A, %zero, %tmp
    lifetime_stop %tmp
    %0 = alloca : memref<f64x4x2,local>
}
"""


def test_blas_family():
    pb = record(ProgramBuilder())
    params = [("alpha", F32), ("A", memref(F32, 16, 8)), ("B", memref(F32, 8, 16)),
              ("C", memref(F32, 16, 16)), ("x", memref(F32, 8)), ("y", memref(F32, 16)),
              ("D", memref(F32, 16, 8)), ("s", memref(F32))]
    with pb.function("blas", params) as (b, alpha, A, B, C, x, y, D, s):
        zero = b.constant(0.0, F32, name="zero")
        one = b.constant(1, F32, name="one")  # an int widens to the float type
        assert b.gemm(alpha, A, B, one, C).opcode == "gemm"  # no result: the Instruction
        b.gemm(alpha, B, A, zero, C, ta="t", tb="t", atomic=True)
        b.gemm(alpha, A, D, one, C, tb="t")  # the default .n is written to place .t
        b.op("gemm.n.t", alpha, A, D, one, C)
        b.gemv(alpha, A, x, one, y)
        b.op("gemv", alpha, B, x, one, y, "atomic", "t")  # positional modifier words
        b.ger(alpha, y, x, one, A)
        b.ger(alpha, y, x, zero, A, atomic=True)
        b.hadamard(alpha, A, D, one, D, atomic=False)
        b.hadamard(alpha, A, D, one, D, atomic=True)
        b.axpby(alpha, A, one, D, ta="n")
        b.axpby(alpha, B, zero, D, atomic=True, ta="t")
        b.sum(alpha, A, one, y)
        b.sum(alpha, A, zero, x, ta="t")
        b.op("sum.atomic", alpha, x, zero, s)
        b.cumsum(alpha, A, 0, one, D)
        b.cumsum(alpha=alpha, A=A, mode=1, beta=one, B=D, atomic=True)  # operands by slot
        n = b.size(A, 0, name="n")
        b.check_shapes("gemm", orders=[2, 2, 2], sizes=[n] * 6, tb="t")
        tmp = b.alloca(memref(F32, 16, 8, space="local"), attributes={"alignment": 16},
                       name="tmp")
        b.axpby(alpha, A, zero, tmp)
        b.lifetime_stop(tmp)
        b.alloca(result=memref(F64, 4, 2, space="local"))
    check_built(pb, BLAS_EXPECTED)


# ---- for with loop-carried values, if/else with results ------------------------------------
CONTROL_EXPECTED = """\
func @control(%A: memref<f32x?>, %n: index) {
    %c0 = constant 0 : index
    %c2 = constant 2 : index
    %init = constant 0x0p+0 : f32
    %sum, %count = for %i=%c0,%n,%c2 init(%acc=%init,%k=%c0) -> (f32,index) {
        %a = load %A[%i] : f32
        %acc2 = add %acc, %a : f32
        %k2 = add %k, %c2 : index
        yield (%acc2, %k2)
    } attributes{unroll=4}
    %pos = greater_than %sum, %init : bool
    %r = if %pos -> (f32) {
        yield (%sum)
    } else {
        %neg = neg %sum : f32
        yield (%neg)
    }
    if %pos {
        for %j=%c0,%count {
            parallel {
                store %r, %A[%j]
            }
        } attributes{unroll=true}
    } else {
        barrier
    }
    %c1 = constant 1 : i32
    %c8 = constant 8 : i32
    %0, %1 = for %2=%c1,%c8 init(%3=%c1,%4=%c1) -> (i32,i32) {
        %5 = add %3, %4 : i32
        yield (%4, %5)
    }
    if %pos {
    }
}
"""


def test_control_flow():
    pb = record(ProgramBuilder())
    with pb.function("control", [("A", memref(F32, None)), ("n", INDEX)]) as (b, A, n):
        c0 = b.constant(0, INDEX, name="c0")
        c2 = b.constant(2, INDEX, name="c2")
        init = b.constant(0.0, F32, name="init")
        loop = b.for_(c0, n, c2, init=[init, c0], attributes={"unroll": 4},
                      names=["sum", "count"], arg_names=["i", "acc", "k"])
        assert isinstance(loop, RegionOp)
        with loop as (i, acc, k):
            a = b.load(A, i, name="a")
            acc2 = b.add(acc, a, name="acc2")
            k2 = b.add(k, c2, name="k2")
            b.yield_(acc2, k2)
        total, count = loop.results
        pos = b.greater_than(total, init, name="pos")
        assert pos.type == BOOL
        branch = b.if_(pos, results=[F32], name="r")
        with branch as then:
            assert then is branch
            b.yield_([total])
        with branch.else_():
            b.yield_(b.neg(total, name="neg"))
        r = branch.result
        with b.if_(pos) as branch2:
            with b.for_(c0, count, step=None, attributes={"unroll": True},
                        arg_names=["j"]) as (j,):
                with b.parallel():
                    b.store(r, A, j)
        with branch2.else_():
            b.barrier()
        # the Fibonacci example of the reference, with unnamed values
        c1 = b.constant(1, I32, name="c1")
        c8 = b.constant(8, I32, name="c8")
        fib = b.op("for", c1, c8, init=[c1, c1])
        with fib as (_, f0, f1):
            b.yield_([f1, b.add(f0, f1)])
        assert [v.type for v in fib.results] == [I32, I32]
        with b.if_(pos):
            pass
    check_built(pb, CONTROL_EXPECTED)


# ---- foreach and foreach_tile ---------------------------------------------------------------
LOOPS_EXPECTED = """\
func @loops(%A: memref<f32x?x?>, %B: memref<f32x?x?>) attributes{subgroup_size=16} {
    %c0 = constant 0 : index
    %m = size %A[0] : index
    %n = size %A[1] : index
    foreach (%i)=(%c0),(%m) {
        check_iteration
        %v = load %A[%i,%c0] : f32
        store %v, %B[%i,%c0]
    }
    foreach (%i,%j)=(%c0,%c0),(%m,%n) {
        %v = load %A[%i,%j] : f32
        store %v, %B[%i,%j]
    }
    foreach_tile (%i,%j)=(%c0,%c0),(%m,%n) as (%ti,%tj)<=(32,16) {
        %tile = cooperative_matrix_load.both_checked %A[%i,%j] : coopmatrix<f32x32x16,matrix_acc>
        cooperative_matrix_store.both_checked %tile, %B[%i,%j]
    }
}
"""


def test_foreach_and_foreach_tile():
    pb = record(ProgramBuilder())
    mt = memref(F32, None, None)
    with pb.function("loops", [("A", mt), ("B", mt)], attributes={"subgroup_size": 16}) as (b, A, B):
        c0 = b.constant(0, INDEX, name="c0")
        m = b.size(A, 0, name="m")
        n = b.size(A, 1, name="n")
        with b.foreach((c0,), (m,), arg_names=["i"]) as (i,):
            b.check_iteration()
            v = b.load(A, [i, c0], name="v")
            b.store(v, B, [i, c0])
        with b.foreach([c0, c0], [m, n], arg_names=["i", "j"]) as (i, j):
            b.store(b.load(A, i, j, name="v"), B, i, j)
        tile_t = coopmatrix(F32, 32, 16, "matrix_acc")
        with b.foreach_tile([c0, c0], [m, n], (32, 16),
                            arg_names=["i", "j", "ti", "tj"]) as (i, j, ti, tj):
            assert ti.type == INDEX and tj.type == INDEX
            tile = b.cooperative_matrix_load(A, i, j, tile_t, checked="both_checked", name="tile")
            b.cooperative_matrix_store(tile, B, i, j, checked="both_checked")
    check_built(pb, LOOPS_EXPECTED)


# ---- parallel and every cooperative_matrix instruction --------------------------------------
COOP_EXPECTED = """\
func @coop(%A: memref<f16x64x64>, %B: memref<f16x64x64>, %C: memref<f32x64x64>, %s: f32) attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %c16 = constant 16 : index
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f16x16x8,matrix_a>
        %b = cooperative_matrix_load.t %B[%c0,%c16] : coopmatrix<f16x8x16,matrix_b>
        %zero = constant 0x0p+0 : f32
        %acc = cooperative_matrix_construct %zero : coopmatrix<f32x16x16,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %acc : coopmatrix<f32x16x16,matrix_acc>
        %e = cooperative_matrix_scale %s, %d : coopmatrix<f32x16x16,matrix_acc>
        %f = cooperative_matrix_apply (%i,%j,%v)=%e -> coopmatrix<f32x16x16,matrix_acc> {
            %below = less_than_equal %i, %j : bool
            %w = if %below -> (f32) {
                %x = exp %v : f32
                yield (%x)
            } else {
                yield (%zero)
            }
            yield (%w)
        }
        %x0 = cooperative_matrix_extract %f[0] : f32
        %g = cooperative_matrix_insert %x0, %f[1] : coopmatrix<f32x16x16,matrix_acc>
        %rows = cooperative_matrix_reduce_add.row %g : coopmatrix<f32x16x1,matrix_acc>
        %cols = cooperative_matrix_reduce_max.column %g : coopmatrix<f32x1x16,matrix_acc>
        %cmin = cooperative_matrix_reduce_min.column %g : coopmatrix<f32x1x16,matrix_acc>
        cooperative_matrix_store %g, %C[%c0,%c0]
        cooperative_matrix_store.t.both_checked %g, %C[%c16,%c0]
        cooperative_matrix_prefetch 1, %A[%c0,%c16], 16, 8
        %h = cooperative_matrix_atomic_load.cols_checked.device.acquire %C[%c0,%c0] : coopmatrix<f32x16x16,matrix_acc>
        cooperative_matrix_atomic_store.subgroup %h, %C[%c0,%c16]
        %p = cooperative_matrix_atomic_add %h, %C[%c0,%c0] : coopmatrix<f32x16x16,matrix_acc>
        %q = cooperative_matrix_atomic_max.t.release %h, %C[%c0,%c0] : coopmatrix<f32x16x16,matrix_acc>
        %r = cooperative_matrix_atomic_min.rows_checked.cross_device %h, %C[%c16,%c16] : coopmatrix<f32x16x16,matrix_acc>
        %sum = add %d, %e : coopmatrix<f32x16x16,matrix_acc>
        %half = cast %sum : coopmatrix<f16x16x16,matrix_a>
        %ones = constant 0x1p+0 : coopmatrix<f32x16x16,matrix_acc>
        %neg = neg %ones : coopmatrix<f32x16x16,matrix_acc>
    }
}
"""


def test_parallel_and_cooperative_matrix():
    pb = record(ProgramBuilder())
    params = [("A", memref(F16, 64, 64)), ("B", memref(F16, 64, 64)), ("C", memref(F32, 64, 64)),
              ("s", F32)]
    acc_t = coopmatrix(F32, 16, 16, "matrix_acc")
    with pb.function("coop", params, attributes={"subgroup_size": 16,
                                                 "work_group_size": [16, 1]}) as (b, A, B, C, s):
        par = b.parallel()
        with par as inside:
            assert inside is par and par.args == ()
            c0 = b.constant(0, INDEX, name="c0")
            c16 = b.constant(16, INDEX, name="c16")
            a = b.cooperative_matrix_load(A, c0, c0, coopmatrix("f16", 16, 8, "matrix_a"), name="a")
            bm = b.cooperative_matrix_load(B, c0, c16, result=coopmatrix(F16, 8, 16, "matrix_b"),
                                           ta="t", name="b")
            zero = b.constant(0.0, F32, name="zero")
            acc = b.cooperative_matrix_construct(zero, acc_t, name="acc")
            d = b.cooperative_matrix_mul_add(a, bm, acc, name="d")
            e = b.cooperative_matrix_scale(s, d, name="e")
            apply = b.cooperative_matrix_apply(e, name="f", arg_names=["i", "j", "v"])
            with apply as (i, j, v):
                assert (i.type, j.type, v.type) == (I32, I32, F32)
                below = b.less_than_equal(i, j, name="below")
                choose = b.if_(below, result=F32, name="w")
                with choose:
                    b.yield_(b.exp(v, name="x"))
                with choose.else_():
                    b.yield_(zero)
                b.yield_(choose.result)
            f = apply.result
            x0 = b.cooperative_matrix_extract(f, 0, name="x0")
            assert x0.type == F32
            g = b.cooperative_matrix_insert(x0, f, 1, name="g")
            assert b.cooperative_matrix_reduce_add(g, mode="row", name="rows").type == \
                coopmatrix(F32, 16, 1, "matrix_acc")
            b.cooperative_matrix_reduce_max(g, "column", name="cols")
            b.op("cooperative_matrix_reduce_min.column", g, name="cmin")
            b.cooperative_matrix_store(g, C, c0, c0)
            b.cooperative_matrix_store(g, C, c16, c0, ta="t", checked="both_checked")
            b.cooperative_matrix_prefetch(1, A, c0, c16, 16, 8)
            h = b.cooperative_matrix_atomic_load(C, c0, c0, acc_t, checked="cols_checked",
                                                 scope="device", semantics="acquire", name="h")
            b.cooperative_matrix_atomic_store(h, C, c0, c16, scope="subgroup")
            b.cooperative_matrix_atomic_add(h, C, c0, c0, acc_t, name="p")
            # the default scope is not written when only the semantics follows it
            b.cooperative_matrix_atomic_max(h, C, c0, c0, acc_t, ta="t", scope="work_group",
                                            semantics="release", name="q")
            b.op("cooperative_matrix_atomic_min.rows_checked.cross_device", h, C, c16, c16, acc_t,
                 name="r")
            total = b.add(d, e, name="sum")
            b.cast(total, coopmatrix(F16, 16, 16, "matrix_a"), name="half")
            ones = b.constant(1.0, acc_t, name="ones")
            b.neg(ones, name="neg")
    check_built(pb, COOP_EXPECTED)


# ---- subgroup instructions and SPMD builtins ------------------------------------------------
SUBGROUP_EXPECTED = """\
func @subgroup(%x: f64) attributes{subgroup_size=32, work_group_size=[64,2]} {
    parallel {
        %lid = subgroup_local_id : i32
        %sx = subgroup_id.x : i32
        %sy = subgroup_id.y : i32
        %lin = subgroup_linear_id : i32
        %sgs = subgroup_size : i32
        %b = subgroup_broadcast %x, %sx : f64
        %0 = subgroup_exclusive_scan_add %lid : i32
        %1 = subgroup_exclusive_scan_max %x : f64
        %2 = subgroup_exclusive_scan_min %lid : i32
        %3 = subgroup_inclusive_scan_add %x : f64
        %4 = subgroup_inclusive_scan_max %lid : i32
        %5 = subgroup_inclusive_scan_min %x : f64
        %6 = subgroup_reduce_add %lid : i32
        %7 = subgroup_reduce_max %x : f64
        %8 = subgroup_reduce_min %lid : i32
    }
}
"""


def test_subgroup_instructions():
    pb = record(ProgramBuilder())
    with pb.function("subgroup", [("x", F64)],
                     attributes={"subgroup_size": 32, "work_group_size": [64, 2]}) as (b, x):
        with b.parallel():
            lid = b.subgroup_local_id(name="lid")
            sx = b.subgroup_id("x", name="sx")
            b.subgroup_id(dim="y", name="sy")
            b.subgroup_linear_id(name="lin")
            b.subgroup_size(name="sgs")
            assert b.subgroup_broadcast(x, sx, name="b").type == F64
            for k, name in enumerate(ops.SUBGROUP_OPS):
                v = b.op(name, lid if k % 2 == 0 else x)
                assert v.type == (I32 if k % 2 == 0 else F64)
    check_built(pb, SUBGROUP_EXPECTED)


# ---- views: subview, expand, fuse with mixed integers and values; groups --------------------
VIEWS_EXPECTED = """\
func @views(%A: memref<f32x32x16x8>, %B: memref<f32x?x?>, %G: group<memref<f32x?x4>x?, offset: ?>) {
    %c2 = constant 2 : index
    %n = size %B[1] : index
    %0 = subview %A[4:8,%c2,0:8] : memref<f32x8x8,strided<1,512>>
    %1 = subview %B[%c2:%n,%c2] : memref<f32x?>
    %2 = subview %A[%c2:4,3:%n,%c2:1] : memref<f32x4x?x1,strided<1,32,512>>
    %3 = subview %B[%c2,1:%n] : memref<f32x?,strided<?>>
    %4 = expand %A[1->4x4] : memref<f32x32x4x4x8>
    %5 = expand %A[0->%c2 x 16] : memref<f32x?x16x16x8,strided<1,?,32,512>>
    %6 = expand %A[2->2 x %c2] : memref<f32x32x16x2x?>
    %7 = expand %B[1->%c2 x 2 x %n] : memref<f32x?x?x2x?>
    %8 = fuse %A[0,1] : memref<f32x512x8>
    %9 = fuse %A[1,2] : memref<f32x32x128>
    %10 = fuse %B[0,1] : memref<f32x?>
    %11 = subview %A[0:32,0:16,0:8] : memref<f32x32x16x8,strided<?,?,?>>
    %m = load %G[%c2] : memref<f32x?x4>
    %gs = size %G[0] : index
    %v = load %m[%c2,%c2] : f32
    %ok = associated %G : bool
}
"""


def test_views_with_mixed_entries():
    pb = record(ProgramBuilder())
    params = [("A", memref(F32, 32, 16, 8)), ("B", memref(F32, None, "?")),
              ("G", group(memref(F32, None, 4), None, offset=None))]
    with pb.function("views", params) as (b, A, B, G):
        c2 = b.constant(2, INDEX, name="c2")
        n = b.size(B, 1, name="n")
        assert b.subview(A, [(4, 8), c2, (0, 8)]).type == memref(F32, 8, 8, stride=(1, 512))
        b.subview(B, [(c2, n), (c2, 0)])
        b.subview(A, slices=[(c2, 4), (3, n), (c2, 1)])
        b.subview(B, [(c2, 0), (1, n)], result=memref(F32, None, stride=[None]))
        b.expand(A, 1, [4, 4])
        b.expand(A, 0, (c2, 16))
        b.expand(A, 2, [2, c2])
        b.expand(B, 1, [c2, 2, n])
        b.fuse(A, 0, 1)
        b.fuse(A, 1, 2)
        b.fuse(B, 0, 1)
        # a less precise result type than inferred ('?' strides) is the caller's choice
        b.subview(A, [(0, 32), (0, 16), (0, 8)], memref(F32, 32, 16, 8, stride=("?", "?", "?")))
        m = b.load(G, c2, name="m")
        assert m.type == memref(F32, None, 4)
        b.size(G, 0, name="gs")
        b.load(m, c2, c2, name="v")
        b.associated(G, name="ok")
    check_built(pb, VIEWS_EXPECTED)


# ---- constants of every type ----------------------------------------------------------------
CONSTANTS_EXPECTED = """\
func @constants() {
    %t = constant true : bool
    %f = constant false : bool
    %0 = constant -128 : i8
    %1 = constant 32767 : i16
    %2 = constant -7 : i32
    %3 = constant 9223372036854775807 : i64
    %4 = constant -9223372036854775807 : index
    %5 = constant 0x1.9ap-4 : bf16
    %6 = constant 0x1.56p-2 : bf16
    %7 = constant 0x1.998p-4 : f16
    %8 = constant 0x1.ffcp+15 : f16
    %9 = constant 0x1.99999ap-4 : f32
    %10 = constant 0x1.921fb6p+1 : f32
    %11 = constant 0x1.999999999999ap-4 : f64
    %12 = constant 0x1.921fb54442d18p+1 : f64
    %13 = constant [0x1.8p+0,-0x1p+1] : c32
    %14 = constant [0x1.99999ap-4,0x0p+0] : c32
    %15 = constant [0x1.999999999999ap-4,-0x1p-1] : c64
    %16 = constant [0x1.8p+1,0x0p+0] : c64
    %17 = constant inf : f32
    %18 = constant -inf : f64
    %19 = constant nan : f16
    %20 = constant -0x0p+0 : f64
    %21 = constant 0x1.8p+1 : f32
    %22 = constant 0x1p-24 : f16
}
"""


def test_constants_of_every_type():
    pb = record(ProgramBuilder())
    with pb.function("constants") as (b,):
        b.constant(True, BOOL, name="t")
        b.constant(False, BOOL, name="f")
        b.constant(-128, I8)
        b.constant(32767, I16)
        b.constant(-7, I32)
        b.constant(2**63 - 1, I64)
        b.constant(-(2**63 - 1), INDEX)
        b.constant(0.1, BF16)
        b.constant(1 / 3, BF16)
        b.constant(0.1, F16)
        b.constant(65504.0, F16)
        b.constant(0.1, F32)
        b.constant(math.pi, F32)
        b.constant(0.1, F64)
        b.constant(math.pi, F64)
        b.constant(complex(1.5, -2), C32)
        b.constant(0.1 + 0j, C32)  # parts rounded to f32
        b.constant(complex(0.1, -0.5), C64)
        b.constant(3, C64)  # a real number widens to complex
        b.constant(math.inf, F32)
        b.constant(-math.inf, F64)
        b.constant(math.nan, F16)
        b.constant(-0.0, F64)
        b.constant(3, F32)
        b.constant(2.0**-24, F16)  # the smallest subnormal
    check_built(pb, CONSTANTS_EXPECTED)


# ---- mixed instructions: arithmetic, comparison, math, cast, atomics, builtins, barrier -----
MIXED_EXPECTED = """\
func @mixed(%a: i32, %b: i32, %x: f32, %z: c64, %p: bool, %M: memref<f32x8>, %G: group<memref<i64x4>x2>) attributes{work_group_size=[64,1]} {
    %0 = add %a, %b : i32
    %1 = sub %a, %b : i32
    %2 = mul %a, %b : i32
    %3 = div %a, %b : i32
    %4 = rem %a, %b : i32
    %5 = max %a, %b : i32
    %6 = min %a, %b : i32
    %7 = shl %a, %b : i32
    %8 = shr %a, %b : i32
    %9 = and %a, %b : i32
    %10 = or %a, %b : i32
    %11 = xor %a, %b : i32
    %12 = and %p, %p : bool
    %13 = mul %z, %z : c64
    %14 = abs %x : f32
    %15 = neg %x : f32
    %16 = not %a : i32
    %17 = conj %z : c64
    %18 = im %z : f64
    %19 = re %z : f64
    %20 = abs %z : f64
    %21 = not %p : bool
    %22 = equal %a, %b : bool
    %23 = not_equal %z, %z : bool
    %24 = greater_than %x, %x : bool
    %25 = greater_than_equal %a, %b : bool
    %26 = less_than %x, %x : bool
    %27 = less_than_equal %a, %b : bool
    %28 = cos %x : f32
    %29 = sin %x : f32
    %30 = exp %x : f32
    %31 = exp2 %x : f32
    %32 = log %x : f32
    %33 = log2 %x : f32
    %34 = native_cos %x : f32
    %35 = native_sin %x : f32
    %36 = native_exp %x : f32
    %37 = native_exp2 %x : f32
    %38 = native_log %x : f32
    %39 = native_log2 %x : f32
    %40 = exp %z : c64
    %41 = cast %a : f32
    %42 = cast %x : c32
    %43 = cast %a : i8
    %i = constant 3 : index
    %l = atomic_load %M[%i] : f32
    atomic_store %x, %M[%i]
    atomic_store.subgroup.release %x, %M[%i]
    %aa = atomic_add %x, %M[%i] : f32
    %am = atomic_max.device.acquire_release %x, %M[%i] : f32
    %an = atomic_min.sequentially_consistent %x, %M[%i] : f32
    %al = atomic_load.cross_device %M[%i] : f32
    %gx = group_id.x : index
    %gy = group_id.y : index
    %gz = group_id.z : index
    %ng = num_groups.x : index
    %ns = num_subgroups.y : i32
    %sgs = subgroup_size : i32
    barrier
    barrier.global
    barrier.local
    barrier.global.local
    %m = load %G[%i] : memref<i64x4>
    %e = load %m[%i] : i64
    %gs = size %G[0] : index
    %assoc = associated %M : bool
}
"""


def test_mixed_instructions():
    pb = record(ProgramBuilder())
    params = [("a", I32), ("b", I32), ("x", F32), ("z", C64), ("p", BOOL), ("M", memref(F32, 8)),
              ("G", group(memref(I64, 4), 2))]
    with pb.function("mixed", params, attributes={"work_group_size": [64, 1]}) as (b, a, bb, x, z, p, M, G):
        for name in ops.ARITH_BINARY:
            assert b.op(name, a, bb).type == I32
        b.and_(p, p)
        b.mul(z, z)
        b.abs(x)
        b.neg(x)
        b.not_(a)
        b.conj(z)
        assert b.im(z).type == F64
        b.re(z)
        b.abs(z)
        b.not_(p)
        b.equal(a, bb)
        b.not_equal(z, z)
        b.greater_than(x, x)
        b.greater_than_equal(a, bb)
        b.op("cmp.lt", x, x)  # the reference's example spelling is accepted
        b.less_than_equal(a, bb)
        for name in ops.MATH_UNARY:
            assert getattr(b, name)(x).type == F32
        b.exp(z)
        b.cast(a, F32)
        b.cast(x, C32)
        b.cast(a, I8)
        i = b.constant(3, INDEX, name="i")
        b.atomic_load(M, i, name="l")
        b.atomic_store(x, M, i)
        b.atomic_store(x, M, [i], scope="subgroup", semantics="release")
        b.atomic_add(x, M, i, name="aa")
        b.atomic_max(x, M, i, scope="device", semantics="acquire_release", name="am")
        b.atomic_min(x, M, i, semantics="sequentially_consistent", name="an")
        b.op("atomic_load.cross_device", M, i, name="al")
        for d in "xyz":
            assert b.group_id(d, name="g" + d).type == INDEX
        b.num_groups(dim="x", name="ng")
        assert b.num_subgroups("y", name="ns").type == I32
        b.subgroup_size(name="sgs")
        b.barrier()
        b.barrier(global_=True)
        b.barrier(local=True)
        b.op("barrier.global.local")
        m = b.load(G, i, name="m")
        b.load(m, i, name="e")
        b.size(G, 0, name="gs")
        b.associated(M, name="assoc")
    check_built(pb, MIXED_EXPECTED)


# ---- names ----------------------------------------------------------------------------------
NAMES_EXPECTED = """\
func @names(%n: index, %0: index) {
    %i = constant 0 : index
    %r, %r_1 = for %i_1=%i,%n init(%i_2=%i,%i_3=%i) -> (index,index) {
        %i_4 = add %i_2, %i_3 : index
        yield (%i_3, %i_4)
    }
    foreach_tile (%t)=(%i),(%n) as (%t_1)<=(16) {
        %1 = add %t, %t_1 : index
    }
    %i_1 = add %r, %r_1 : index
    %2 = add %i_1, %0 : index
}
"""


def test_clashing_name_hints_are_made_unique():
    pb = record(ProgramBuilder())
    with pb.function("names", [("n", INDEX), INDEX]) as (b, n, unnamed):
        z = b.constant(0, INDEX, name="i")
        loop = b.for_(z, n, init=[z, z], arg_names=["i", "i", "i"], names=["r", "r"])
        with loop as (_, a, c):
            b.yield_(c, b.add(a, c, name="i"))
        with b.foreach_tile([z], [n], [16], arg_names=["t", "t"]) as (t, size):
            b.add(t, size)
        s = b.add(*loop.results, name="i")
        b.add(s, unnamed)
    check_built(pb, NAMES_EXPECTED)


def test_several_functions_and_parameter_attributes():
    pb = record(ProgramBuilder())
    A_t = memref(F64, None, None, stride=(1, None))
    with pb.function("first", [("A", A_t, {"alignment": 64, "shape_gcd": [8, 4],
                                           "stride_gcd": [1, 8]})],
                     attributes={"subgroup_size": 16, "work_group_size": [16, 4],
                                 "note": "made by the builder", "flags": [True, {"unroll": 2}]}) as (b, A):
        b.size(A, 0)
    with pb.function("second") as (b,):
        pass
    expected = (
        'func @first(%A: memref<f64x?x?> {alignment=64, shape_gcd=[8,4], stride_gcd=[1,8]}) '
        'attributes{subgroup_size=16, work_group_size=[16,4], "note"="made by the builder", '
        '"flags"=[true,{unroll=2}]} {\n'
        "    %0 = size %A[0] : index\n"
        "}\n"
        "func @second() {\n"
        "}\n")
    check_built(pb, expected)
    assert pb.build() is pb.program


def test_every_instruction_is_built():
    """The programs of the tests above use every instruction of the table."""
    BUILT.clear()
    for build in (test_blas_family, test_control_flow, test_foreach_and_foreach_tile,
                  test_parallel_and_cooperative_matrix, test_subgroup_instructions,
                  test_views_with_mixed_entries, test_constants_of_every_type,
                  test_mixed_instructions):
        build()
    used = {i.opcode for program in BUILT for f in program.functions for i in f.body.walk()}
    assert used == set(ops.OPS), sorted(set(ops.OPS) - used)


# ---- the API surface ------------------------------------------------------------------------
def test_exports_from_ttlc():
    assert ttlc.ProgramBuilder is ProgramBuilder
    assert ttlc.Builder is Builder
    assert ttlc.types.memref is memref
    assert ttlc.types.F32 is F32
    assert str(ttlc.types.coopmatrix(F32, 16, 8, "matrix_acc")) == "coopmatrix<f32x16x8,matrix_acc>"


def test_generated_methods_follow_the_table():
    for name in ops.OPS:
        method = getattr(Builder, name + "_" if name in ("and", "or", "not", "if", "for", "yield")
                         else name)
        assert method.__doc__ and ops.OPS[name].doc in method.__doc__
    assert "gemm(alpha, A, B, beta, C, atomic=False, ta='n', tb='n')" in Builder.gemm.__doc__


def test_type_helpers():
    assert str(memref(F32, 16, None)) == "memref<f32x16x?>"
    assert str(memref("f32", 16, None, stride=(1, 32), space="local")) == \
        "memref<f32x16x?,strided<1,32>,local>"
    assert memref(F32, 4, 8, stride=(1, 4)) == memref(F32, 4, 8)
    assert str(memref(C64)) == "memref<c64>"
    assert str(group(memref(F32, 8), None, offset=None)) == "group<memref<f32x8>x?, offset: ?>"
    assert str(group(memref(I8, "?"), 4)) == "group<memref<i8x?>x4>"
    assert str(coopmatrix(BF16, 8, 16, "matrix_b")) == "coopmatrix<bf16x8x16,matrix_b>"
    with pytest.raises(ValueError):
        memref(F32, 0)
    with pytest.raises(ValueError):
        memref(F32, 4, 4, stride=(1, 2))  # modes overlap
    with pytest.raises(ValueError):
        memref(F32, 4, stride=(1, 2))
    with pytest.raises(ValueError):
        memref(F32, 4, space="private")
    with pytest.raises(TypeError):
        memref("float", 4)
    with pytest.raises(ValueError):
        coopmatrix(F32, 16, 8, "matrix_c")
    with pytest.raises(TypeError):
        group(F32, 4)


# ---- misuse is reported at once, so printed text always parses ------------------------------
def test_builder_misuse_raises():
    pb = ProgramBuilder()
    with pb.function("bad", [("A", memref(F32, 8)), ("x", F32), ("i", INDEX)]) as (b, A, x, i):
        with pytest.raises(ValueError, match="unknown instruction"):
            b.op("frobnicate")
        with pytest.raises(TypeError, match="too many operands"):
            b.add(x, x, x)
        with pytest.raises(TypeError, match="needs its operand"):
            b.add(x)
        with pytest.raises(TypeError, match="result type"):
            b.cast(x)
        with pytest.raises(TypeError, match="result type"):
            b.constant(1.0)
        with pytest.raises(TypeError, match="does not fit"):
            b.constant(1.5, I32)
        with pytest.raises(TypeError, match="does not fit"):
            b.constant(1, BOOL)
        with pytest.raises(ValueError, match="out of range"):
            b.constant(2**63, I64)
        with pytest.raises(ValueError, match="no modifier"):
            b.gemm(x, A, A, x, A, "atomic", "q")
        with pytest.raises(ValueError, match="must be one of"):
            b.gemm(x, A, A, x, A, ta="x")
        with pytest.raises(TypeError, match="flag"):
            b.gemm(x, A, A, x, A, atomic="yes")
        with pytest.raises(TypeError, match="needs its modifier"):
            b.group_id()
        with pytest.raises(TypeError, match="no operand or modifier"):
            b.add(x, x, bogus=1)
        with pytest.raises(TypeError, match="must be a Value"):
            b.add(x, 1.0)
        with pytest.raises(ValueError, match="not an identifier"):
            b.add(x, x, name="no-dashes")
        with pytest.raises(TypeError, match="returns no value"):
            b.store(x, A, i, result=F32)
        with pytest.raises(ValueError, match="string"):
            b.alloca(memref(F32, 4, space="local"), attributes={"s": 'say "hi"'})
        with pytest.raises(ValueError, match="region arguments"):
            b.for_(i, i, init=[x], results=[F32, F32])
        loop = b.for_(i, i, init=[x])
        with loop as (_, acc):
            with pytest.raises(ValueError, match="usable only after"):
                b.add(loop.result, acc)
            inner = b.add(acc, acc)
        with pytest.raises(ValueError, match="not defined"):
            b.add(inner, x)  # defined in the loop body only
        with pytest.raises(ValueError, match="no region 1"):
            with b.parallel().else_():
                pass
    with pb.function("other") as (b2,):
        with pytest.raises(ValueError, match="not defined"):
            b2.add(x, x)  # a value of another function
    with pytest.raises(ValueError, match="already defined"):
        with pb.function("bad"):
            pass
    with pytest.raises(ValueError, match="distinct"):
        with pb.function("dup", [("a", F32), ("a", F32)]):
            pass
    with pytest.raises(ValueError, match="not an identifier"):
        with pb.function("has space"):
            pass


def test_builder_without_scope_checks_appends_anywhere():
    """A Builder on a bare region (as a pass would use it) does not check scopes."""
    program = ttlc.parse("func @k(%x: f32) {\n    %y = add %x, %x : f32\n}\n")
    body = program.functions[0].body
    x = program.functions[0].args[0].value
    y = body.instructions[0].result
    b = Builder(body)
    b.mul(x, y, name="z")
    assert b.last.opcode == "mul" and b.insertion_region is body
    assert str(program) == ("func @k(%x: f32) {\n    %y = add %x, %x : f32\n"
                            "    %z = mul %x, %y : f32\n}\n")
