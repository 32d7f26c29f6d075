"""lower-foreach and lower-coopmatrix keep the meaning of programs.

Each program runs on the reference interpreter before and after the pass (unchecked and
checked) and must give bit-identical results; the lowered program must verify and print
as text that verifies.  The foreach programs count visits with atomics, so a point or
tile run twice or never is caught even where the stored values would agree; the apply
programs count how often the region runs per entry.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import ttlc
from ttlc.ir.rewrite import set_attribute
from ttlc.passes import PassContext, run_passes
from ttlc.passes.lower_foreach import EDGES_IN_ONE_COPY

RNG = np.random.default_rng(20240611)


# ---- harness ------------------------------------------------------------------------------
def lowered(src: str, *passes: str, edges_in_one_copy: bool = False) -> str:
    program = ttlc.parse(src)
    ttlc.check(program)
    if edges_in_one_copy:  # as lower-linalg marks the foreach_tile of a 16-bit gemm
        for func in program.functions:
            for inst in func.body.walk():
                if inst.opcode == "foreach_tile":
                    set_attribute(inst, EDGES_IN_ONE_COPY, True)
    run_passes(program, list(passes), PassContext())
    text = str(program)
    ttlc.check(text)  # the printed lowering verifies
    ttlc.check(program)  # and so does the IR itself
    return text


def run(src: str, args, checked: bool, grid=(1, 1, 1)):
    args = [a.copy(order="A") if isinstance(a, np.ndarray) else a for a in args]
    module = ttlc.compile(src, target="interp", checked=checked)
    module["k"](*args, grid=grid)
    return [a for a in args if isinstance(a, np.ndarray)]


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_results(src: str, args, passes, grid=(1, 1, 1), edges_in_one_copy=False):
    after_src = lowered(src, *passes, edges_in_one_copy=edges_in_one_copy)
    assert "foreach" not in after_src or "lower-foreach" not in passes
    for checked in (False, True):
        before = run(src, args, checked, grid)
        after = run(after_src, args, checked, grid)
        for x, y in zip(before, after):
            assert same(x, y), f"results differ (checked={checked})\n{after_src}"
    return before, after_src


def fortran(shape, dtype, fill=0):
    return np.asfortranarray(np.full(shape, fill, dtype=dtype))


# ---- foreach --------------------------------------------------------------------------------
SIZES = [((16, 1), 16), ((32, 2), 16), ((64, 4), 16), ((64, 4), 32), ((32, 2), 32)]
NP_INT = {"i32": np.int32, "index": np.int64, "i64": np.int64, "i16": np.int16, "i8": np.int8}


def foreach_kernel(n: int, ty: str, lows, highs, static: bool, sgs: int, wgs,
                   tile=None, full_test: bool = False) -> str:
    """A foreach (tile=None) or foreach_tile over n modes writing, per point, a code of
    the point (and for tiles, of the tile) into A and counting visits in C; with
    ``full_test`` the tile's code adds 10^9 where the tile is full in every mode (an
    ``and`` of each mode's ``equal`` of size and tile, as a gemm tests)."""
    names = "ijk"[:n]
    params = ["%A: memref<i32" + "x?" * n + ">", "%C: memref<i32" + "x?" * n + ">",
              "%T: memref<i32" + "x?" * n + ">"]
    pre = [f"%off = constant {OFF} : {ty}"]
    if static:
        for d in range(n):
            pre.append(f"%lo{d} = constant {lows[d]} : {ty}")
            pre.append(f"%hi{d} = constant {highs[d]} : {ty}")
    else:
        for d in range(n):
            params += [f"%lo{d}: {ty}", f"%hi{d}: {ty}"]
    vars_ = ",".join("%" + x for x in names)
    lo = ",".join(f"%lo{d}" for d in range(n))
    hi = ",".join(f"%hi{d}" for d in range(n))
    body = []

    def idx(v):  # a value of type ty, shifted by OFF, as index
        return idx_inner(body, v, ty)

    if tile is None:
        header = f"foreach ({vars_})=({lo}),({hi}) {{"
        ix = [idx("%" + x) for x in names]
        code = ["%code0 = constant 0 : i32"]
        for d, x in enumerate(names):
            code.append(f"%c{x} = cast %{x} : i32")
            code.append(f"%m{x} = constant {[1, 100, 10000][d]} : i32")
            code.append(f"%p{x} = mul %c{x}, %m{x} : i32")
            code.append(f"%code{d + 1} = add %code{d}, %p{x} : i32")
        body += code
        body.append(f"%old = load %A[{','.join(ix)}] : i32")
        body.append(f"%new = add %old, %code{n} : i32")
        body.append(f"store %new, %A[{','.join(ix)}]")
        body.append("%one = constant 1 : i32")
        body.append(f"%prev = atomic_add %one, %C[{','.join(ix)}] : i32")
    else:
        sizes = ",".join("%t" + x for x in names)
        shape = ",".join(str(t) for t in tile)
        header = f"foreach_tile ({vars_})=({lo}),({hi}) as ({sizes})<=({shape}) {{"
        # every work-item walks the rows r = lid + S k of the tile and all its columns
        body.append("%lid32 = subgroup_local_id : i32")
        body.append(f"%lid = cast %lid32 : {ty}")
        body.append(f"%sgs = constant {sgs} : {ty}")
        body.append(f"%z = constant 0 : {ty}")
        # one work-item per tile counts the tile: T[(i - lo0) / tile0, ...] += 1
        tix = []
        for d, x in enumerate(names):
            body.append(f"%d{x} = sub %{x}, %lo{d} : {ty}")
            body.append(f"%ts{x} = constant {tile[d]} : {ty}")
            body.append(f"%n{x} = div %d{x}, %ts{x} : {ty}")
            if ty != "index":
                body.append(f"%n{x}_idx = cast %n{x} : index")
            tix.append(f"%n{x}" + ("_idx" if ty != "index" else ""))
        body.append("%lid0 = constant 0 : i32")
        body.append("%first = equal %lid32, %lid0 : bool")
        body.append("if %first {")
        body.append("%tone = constant 1 : i32")
        body.append(f"%tprev = atomic_add %tone, %T[{','.join(tix)}] : i32")
        body.append("}")
        body.append("%code0 = constant 0 : i32")
        for d, x in enumerate(names):
            body.append(f"%c{x} = cast %{x} : i32")
            body.append(f"%ct{x} = cast %t{x} : i32")
            body.append(f"%m{x} = constant {[1, 100, 10000][d]} : i32")
            body.append(f"%mt{x} = constant {[1000000, 10000000, 100000000][d]} : i32")
            body.append(f"%p{x} = mul %c{x}, %m{x} : i32")
            body.append(f"%pt{x} = mul %ct{x}, %mt{x} : i32")
            body.append(f"%q{x} = add %code{d}, %p{x} : i32")
            body.append(f"%code{d + 1} = add %q{x}, %pt{x} : i32")
        code = f"%code{n}"
        if full_test:
            tests = []
            for d, x in enumerate(names):
                body.append(f"%ft{x} = constant {tile[d]} : {ty}")
                body.append(f"%full{x} = equal %t{x}, %ft{x} : bool")
                tests.append(f"%full{x}")
            for d in range(1, n):
                body.append(f"%all{d} = and {tests[0] if d == 1 else f'%all{d - 1}'}, "
                            f"{tests[d]} : bool")
            body += [f"%fv = if %all{n - 1} -> (i32) {{", "%big = constant 1000000000 : i32",
                     "yield (%big)", "} else {", "%nil = constant 0 : i32", "yield (%nil)",
                     "}", f"%code_full = add %code{n}, %fv : i32"]
            code = "%code_full"
        loops = []
        for d, x in enumerate(names):
            start, step = ("%lid", "%sgs") if d == 0 else ("%z", None)
            loops.append(f"for %r{x}={start},%t{x}" + (f",{step}" if step else "") + " {")
        inner = []
        ix = []
        for d, x in enumerate(names):
            inner.append(f"%e{x} = add %{x}, %r{x} : {ty}")
            ix.append(idx_inner(inner, f"%e{x}", ty))
        inner.append(f"store {code}, %A[{','.join(ix)}]")
        inner.append("%one = constant 1 : i32")
        inner.append(f"%prev = atomic_add %one, %C[{','.join(ix)}] : i32")
        nest = loops + inner + ["}"] * n
        body += nest
    attrs = f"attributes{{subgroup_size={sgs},work_group_size=[{wgs[0]},{wgs[1]}]}}"
    lines = [f"func @k({', '.join(params)}) {attrs} {{", *pre, header, *body, "}", "}"]
    return "\n".join(lines) + "\n"


def idx_inner(lines, v, ty):
    lines.append(f"{v}_off = add {v}, %off : {ty}")
    if ty == "index":
        return v + "_off"
    lines.append(f"{v}_idx = cast {v}_off : index")
    return v + "_idx"


#: added to every index, so that loop ranges may start below zero
OFF = 32


def run_foreach_case(n, ty, lows, highs, static, sgs, wgs, tile=None, full_test=False,
                     edges_in_one_copy=False):
    src = foreach_kernel(n, ty, lows, highs, static, sgs, wgs, tile, full_test)
    shape = tuple(max(h, 1) + OFF + 2 for h in highs)
    A = fortran(shape, np.int32, 7)
    C = fortran(shape, np.int32)
    tiles = tile or (1,) * n
    counts = [max(0, -(-(h - lo) // t)) for lo, h, t in zip(lows, highs, tiles)]
    T = fortran(tuple(c + 1 for c in counts), np.int32)
    args = [A, C, T]
    if not static:
        for d in range(n):
            args += [NP_INT[ty](lows[d]), NP_INT[ty](highs[d])]
    (A1, C1, T1), text = assert_same_results(src, args, ["lower-foreach"],
                                             edges_in_one_copy=edges_in_one_copy)
    if tile is not None:  # every tile run exactly once (and no empty remainder tile)
        expect_t = np.zeros(T.shape, np.int32)
        expect_t[tuple(slice(0, c) for c in counts)] = 1
        assert (T1 == expect_t).all()
    # independent expectation: every point of the range visited exactly once
    expect = np.zeros(shape, np.int32)
    expect[tuple(slice(lo + OFF, max(hi, lo) + OFF) for lo, hi in zip(lows, highs))] = 1
    assert (C1 == expect).all()
    assert "foreach" not in text and "parallel" in text
    return src, text


FOREACH_CASES = [
    # n, lows, highs
    (1, (0,), (100,)),
    (1, (3,), (70,)),
    (1, (5,), (5,)),       # empty
    (1, (9,), (4,)),       # empty, from > to
    (2, (0, 0), (37, 5)),
    (2, (2, 1), (19, 40)),
    (3, (0, 1, 2), (17, 3, 5)),
]


@pytest.mark.parametrize("wgs,sgs", SIZES)
@pytest.mark.parametrize("n,lows,highs", FOREACH_CASES)
@pytest.mark.parametrize("static", [True, False])
def test_foreach(n, lows, highs, wgs, sgs, static):
    run_foreach_case(n, "index", lows, highs, static, sgs, wgs)


@pytest.mark.parametrize("ty", ["i32", "i64", "i16", "i8"])
@pytest.mark.parametrize("static", [True, False])
def test_foreach_integer_types(ty, static):
    run_foreach_case(2, ty, (1, 2), (40, 7), static, 16, (32, 2))
    run_foreach_case(1, ty, (-3,), (50,), static, 16, (16, 1))


TILE_CASES = [
    # n, lows, highs, tile shape
    (1, (0,), (64,), (16,)),       # no remainder
    (1, (0,), (70,), (16,)),       # remainder
    (1, (5,), (100,), (32,)),      # non-zero lower bound
    (1, (7,), (7,), (32,)),        # empty
    (1, (0,), (10,), (32,)),       # remainder only
    (2, (0, 0), (64, 32), (32, 8)),
    (2, (0, 0), (70, 33), (32, 8)),
    (2, (3, 2), (100, 20), (32, 16)),
    (3, (0, 0, 0), (40, 5, 9), (32, 2, 4)),
    (3, (1, 2, 3), (50, 11, 7), (32, 4, 2)),
]


@pytest.mark.parametrize("wgs,sgs", SIZES)
@pytest.mark.parametrize("n,lows,highs,tile", TILE_CASES)
@pytest.mark.parametrize("static", [True, False])
def test_foreach_tile(n, lows, highs, tile, wgs, sgs, static):
    if tile[0] % sgs:
        tile = (sgs,) + tuple(tile[1:])
    run_foreach_case(n, "index", lows, highs, static, sgs, wgs, tile)


@pytest.mark.parametrize("ty", ["i32", "i64", "i16"])
@pytest.mark.parametrize("static", [True, False])
def test_foreach_tile_integer_types(ty, static):
    run_foreach_case(2, ty, (1, 2), (70, 9), static, 16, (32, 2), (32, 4))
    run_foreach_case(1, ty, (-20,), (50,), static, 16, (64, 4), (16,))


#: lows, highs, tiles of two modes: remainders in both, none, one tile in all, many tiles
EDGE_CASES = [((0, 0), (70, 33), (32, 8)), ((3, 2), (100, 20), (32, 16)),
              ((0, 0), (64, 32), (32, 8)), ((0, 0), (10, 3), (32, 8)),
              ((1, 0), (200, 70), (32, 4))]


@pytest.mark.parametrize("wgs,sgs", SIZES)
@pytest.mark.parametrize("lows,highs,tile", EDGE_CASES)
def test_foreach_tile_edges_in_three_copies(lows, highs, tile, wgs, sgs):
    """Two modes of run-time sizes and a region that tests whether its tile is full in
    both (as a gemm does): three copies of the region, the full tiles, the row
    remainder of full columns, and the column remainder, whose full rows and row
    remainder share one loop; the test of the partial mode false in the last two.
    Every tile runs once with its size, and the codes written, which depend on the
    test, are the interpreter's on the foreach_tile itself."""
    if tile[0] % sgs:
        tile = (sgs,) + tuple(tile[1:])
    _, text = run_foreach_case(2, "index", lows, highs, False, sgs, wgs, tile, True)
    assert text.count("%tprev = atomic_add") == 3
    assert text.count("constant false : bool") == 2  # the partial mode's test


@pytest.mark.parametrize("wgs,sgs", SIZES)
@pytest.mark.parametrize("lows,highs,tile", EDGE_CASES)
def test_foreach_tile_edges_in_one_copy(lows, highs, tile, wgs, sgs):
    """The same, marked ``EDGES_IN_ONE_COPY`` (as lower-linalg marks a 16-bit gemm's):
    two copies, the full tiles and all the tiles partial in either mode, the test of a
    full tile false in the second; every tile once, the codes the interpreter's."""
    if tile[0] % sgs:
        tile = (sgs,) + tuple(tile[1:])
    _, text = run_foreach_case(2, "index", lows, highs, False, sgs, wgs, tile, True, True)
    assert text.count("%tprev = atomic_add") == 2
    assert text.count("constant false : bool") == 1  # the edge copy's test


def test_foreach_tile_static_divisible_has_no_remainder_code():
    _, text = run_foreach_case(2, "index", (0, 0), (64, 32), True, 16, (32, 2), (32, 8))
    # the full tiles cover the range: one copy of the region, no guard
    assert text.count("%tprev = atomic_add") == 1
    assert " min " not in text and text.count("if ") == 1  # the body's own if


def test_foreach_tile_coopmatrix_body():
    """Tiles with coopmatrix load/store (uniform per subgroup), remainder via rows_checked."""
    src = textwrap.dedent("""\
        func @k(%A: memref<f32x?x?>, %B: memref<f32x?x?>) attributes{subgroup_size=16,work_group_size=[32,2]} {
            %c0 = constant 0 : index
            %s0 = size %A[0] : index
            %s1 = size %A[1] : index
            foreach_tile (%i,%j)=(%c0,%c0),(%s0,%s1) as (%ti,%tj)<=(32,8) {
                %c32 = constant 32 : index
                %c8 = constant 8 : index
                %short = less_than %ti, %c32 : bool
                %narrow = less_than %tj, %c8 : bool
                %partial = or %short, %narrow : bool
                %tile = if %partial -> (coopmatrix<f32x32x8,matrix_acc>) {
                    %0 = cooperative_matrix_load.both_checked %A[%i,%j] : coopmatrix<f32x32x8,matrix_acc>
                    yield (%0)
                } else {
                    %0 = cooperative_matrix_load %A[%i,%j] : coopmatrix<f32x32x8,matrix_acc>
                    yield (%0)
                }
                %two = constant 2.0 : f32
                %scaled = cooperative_matrix_scale %two, %tile : coopmatrix<f32x32x8,matrix_acc>
                if %partial {
                    cooperative_matrix_store.both_checked %scaled, %B[%i,%j]
                } else {
                    cooperative_matrix_store %scaled, %B[%i,%j]
                }
            }
        }
    """)
    for shape in [(64, 16), (70, 19), (20, 3), (130, 40)]:
        A = np.asfortranarray(RNG.standard_normal(shape).astype(np.float32))
        B = fortran(shape, np.float32, np.nan)
        (_, B1), _ = assert_same_results(src, [A, B], ["lower-foreach"])
        assert same(B1, 2 * A)


def test_foreach_in_collective_control_flow_and_several_per_function():
    src = textwrap.dedent("""\
        func @k(%A: memref<i64x?>, %n: index) attributes{subgroup_size=16,work_group_size=[32,1]} {
            %c0 = constant 0 : index
            %c3 = constant 3 : index
            for %r=%c0,%c3 {
                foreach (%i)=(%c0),(%n) {
                    %v = load %A[%i] : i64
                    %w = cast %r : i64
                    %u = add %v, %w : i64
                    store %u, %A[%i]
                }
                foreach_tile (%i)=(%c0),(%n) as (%ti)<=(32) {
                    %lid = subgroup_local_id : i32
                    %l = cast %lid : index
                    %s = constant 16 : index
                    for %e=%l,%ti,%s {
                        %x = add %i, %e : index
                        %v = load %A[%x] : i64
                        %two = constant 2 : i64
                        %u = mul %v, %two : i64
                        store %u, %A[%x]
                    }
                }
            }
        }
    """)
    for n in (1, 31, 100):
        A = np.arange(n, dtype=np.int64)
        (A1,), text = assert_same_results(src, [A, np.int64(n)], ["lower-foreach"], grid=(2, 1, 1))
        assert text.count("parallel") == 2


def test_foreach_lowering_in_lower_pipeline_positions():
    """lower-foreach followed by the verifier's view of region kinds: subgroup builtins used
    by the lowering sit inside parallel (SPMD)."""
    src = foreach_kernel(2, "index", (0, 0), (33, 3), False, 16, (32, 2), (16, 2))
    text = lowered(src, "lower-foreach")
    program = ttlc.parse(text)
    par = [i for i in program.functions[0].body.instructions if i.opcode == "parallel"]
    assert len(par) == 1
    assert not any(i.opcode.startswith("subgroup") for i in program.functions[0].body.instructions)


def test_lower_foreach_needs_sizes():
    src = textwrap.dedent("""\
        func @k(%A: memref<f32x?>) {
            %c0 = constant 0 : index
            %n = size %A[0] : index
            foreach (%i)=(%c0),(%n) {
                %z = constant 0.0 : f32
                store %z, %A[%i]
            }
        }
    """)
    program = ttlc.parse(src)
    try:
        run_passes(program, ["lower-foreach"], PassContext())
    except ttlc.CompileError as e:
        # without the work-group-size pass the attributes are required, and named
        assert "lower-foreach" in str(e) and "work_group_size" in str(e)
        assert e.diagnostics[0][0] == 4
    else:  # the work-group-size pass exists and set them
        assert program.functions[0].subgroup_size is not None
        ttlc.check(str(program))


# ---- cooperative_matrix_apply -----------------------------------------------------------------
APPLY_SHAPES = [(16, 2), (8, 4), (1, 17), (32, 16), (4, 15), (2, 9), (16, 1), (64, 3)]


def apply_kernel(M: int, N: int, ty: str, use: str, region: str, wgs=(32, 1)) -> str:
    return textwrap.dedent(f"""\
        func @k(%A: memref<{ty}x{M}x{N}>, %B: memref<{ty}x{M}x{N}x?>, %C: memref<i32x{M}x{N}x?>, %s: {ty}) attributes{{subgroup_size=16,work_group_size=[{wgs[0]},{wgs[1]}]}} {{
            parallel {{
                %c0 = constant 0 : index
                %sg = subgroup_linear_id : i32
                %g = group_id.x : index
                %sgi = cast %sg : index
                %nsg = constant {wgs[0] * wgs[1] // 16} : index
                %gs = mul %g, %nsg : index
                %slot = add %gs, %sgi : index
                %Bs = subview %B[0:{M},0:{N},%slot] : memref<{ty}x{M}x{N}>
                %Cs = subview %C[0:{M},0:{N},%slot] : memref<i32x{M}x{N}>
                %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<{ty}x{M}x{N},{use}>
                %b = cooperative_matrix_apply (%i,%j,%v)=%a -> coopmatrix<{ty}x{M}x{N},{use}> {{
                    %ii = cast %i : index
                    %jj = cast %j : index
                    %one = constant 1 : i32
                    %prev = atomic_add %one, %Cs[%ii,%jj] : i32
        {textwrap.indent(textwrap.dedent(region), " " * 12)}
                }}
                %c = add %b, %a : coopmatrix<{ty}x{M}x{N},{use}>
                cooperative_matrix_store %c, %Bs[%c0,%c0]
            }}
        }}
    """)


REGION_MASK = """\
%mask = less_than_equal %i, %j : bool
%r = if %mask -> ({ty}) {{
    %e = mul %v, %s : {ty}
    yield (%e)
}} else {{
    %z = constant {zero} : {ty}
    yield (%z)
}}
yield (%r)
"""

REGION_COORDS = """\
%fi = cast %i : {ty}
%fj = cast %j : {ty}
%k = constant {three} : {ty}
%t = mul %fj, %k : {ty}
%u = add %fi, %t : {ty}
%w = sub %v, %u : {ty}
yield (%w)
"""

ZERO = {"f32": "0.0", "f64": "0.0", "i32": "0", "i16": "0", "c32": "[0.0, 0.0]",
        "c64": "[0.0, 0.0]", "f16": "0.0"}
THREE = {"f32": "3.0", "f64": "3.0", "i32": "3", "i16": "3", "c32": "[3.0, 0.5]",
         "c64": "[3.0, -1.0]", "f16": "3.0"}
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i16": np.int16,
      "c32": np.complex64, "c64": np.complex128, "f16": np.float16}


def random_array(shape, ty):
    if ty in ("i32", "i16"):
        return np.asfortranarray(RNG.integers(-50, 50, size=shape).astype(NP[ty]))
    x = RNG.standard_normal(shape)
    if ty.startswith("c"):
        x = x + 1j * RNG.standard_normal(shape)
    return np.asfortranarray(x.astype(NP[ty]))


def run_apply_case(M, N, ty, use, region, wgs=(32, 1), grid=(2, 1, 1)):
    src = apply_kernel(M, N, ty, use, region.format(ty=ty, zero=ZERO[ty], three=THREE[ty]), wgs)
    slots = grid[0] * wgs[0] * wgs[1] // 16
    A = random_array((M, N), ty)
    B = fortran((M, N, slots), NP[ty])
    C = fortran((M, N, slots), np.int32)
    s = NP[ty](2)
    (_, B1, C1), text = assert_same_results(src, [A, B, C, s], ["lower-coopmatrix"], grid)
    assert "cooperative_matrix_apply" not in text
    assert (C1 == 1).all(), "the region must run once per entry"
    return text


@pytest.mark.parametrize("M,N", APPLY_SHAPES)
@pytest.mark.parametrize("ty", ["f32", "i32", "c32", "c64"])
def test_apply_mask(M, N, ty):
    run_apply_case(M, N, ty, "matrix_acc", REGION_MASK)


@pytest.mark.parametrize("M,N", APPLY_SHAPES)
@pytest.mark.parametrize("ty,use", [("f32", "matrix_a"), ("f64", "matrix_b"),
                                    ("i16", "matrix_acc"), ("c32", "matrix_acc")])
def test_apply_coordinates(M, N, ty, use):
    run_apply_case(M, N, ty, use, REGION_COORDS, wgs=(16, 2))


def test_apply_padding_guard_and_vector_count():
    text = run_apply_case(4, 15, "f32", "matrix_acc", REGION_COORDS)
    # 4 x 15, S = 16: I = 4, J = 16, V = 4; the last index holds columns 12..15, one pad.
    # The kernel's load (inserts), apply (both) and store (extracts) are lowered, each
    # with one padding test
    assert text.count("cooperative_matrix_extract") == 4 + 4
    assert text.count("cooperative_matrix_insert") == 4 + 4
    assert text.count("less_than %") == 3
    text = run_apply_case(32, 16, "f32", "matrix_acc", REGION_COORDS)
    assert text.count("cooperative_matrix_extract") == 32 + 32 and " rem " not in text


def test_apply_in_divergent_code_and_nested():
    src = textwrap.dedent("""\
        func @k(%A: memref<f32x8x4>, %B: memref<f32x8x4x?>) attributes{subgroup_size=16,work_group_size=[32,1]} {
            parallel {
                %c0 = constant 0 : index
                %sg = subgroup_linear_id : i32
                %sgi = cast %sg : index
                %Bs = subview %B[0:8,0:4,%sgi] : memref<f32x8x4>
                %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f32x8x4,matrix_acc>
                %lid = subgroup_local_id : i32
                %c5 = constant 5 : i32
                %low = less_than %lid, %c5 : bool
                %r = if %low -> (coopmatrix<f32x8x4,matrix_acc>) {
                    %b = cooperative_matrix_apply (%i,%j,%v)=%a -> coopmatrix<f32x8x4,matrix_acc> {
                        %inner = cooperative_matrix_apply (%p,%q,%w)=%a -> coopmatrix<f32x8x4,matrix_acc> {
                            %fp = cast %p : f32
                            %x = add %w, %fp : f32
                            yield (%x)
                        }
                        %e = cooperative_matrix_extract %inner[1] : f32
                        %fj = cast %j : f32
                        %y = mul %v, %fj : f32
                        %z = add %y, %e : f32
                        yield (%z)
                    }
                    yield (%b)
                } else {
                    yield (%a)
                }
                cooperative_matrix_store %r, %Bs[%c0,%c0]
            }
        }
    """)
    A = random_array((8, 4), "f32")
    B = fortran((8, 4, 2), np.float32)
    assert_same_results(src, [A, B], ["lower-coopmatrix"])


def test_lower_coopmatrix_needs_subgroup_size():
    src = apply_kernel(8, 4, "f32", "matrix_acc", REGION_COORDS.format(
        ty="f32", three="3.0", zero="0.0")).replace(
        " attributes{subgroup_size=16,work_group_size=[32,1]}", "")
    program = ttlc.parse(src)
    try:
        run_passes(program, ["lower-coopmatrix"], PassContext())
    except ttlc.CompileError as e:
        assert "lower-coopmatrix" in str(e) and "subgroup_size" in str(e)
    else:  # the work-group-size pass exists and set it
        assert program.functions[0].subgroup_size is not None
        ttlc.check(str(program))


def test_both_passes_in_sequence():
    """foreach_tile holding an apply: lower both, results unchanged."""
    src = textwrap.dedent("""\
        func @k(%A: memref<f32x?x?>) attributes{subgroup_size=16,work_group_size=[32,2]} {
            %c0 = constant 0 : index
            %s0 = size %A[0] : index
            %s1 = size %A[1] : index
            foreach_tile (%i,%j)=(%c0,%c0),(%s0,%s1) as (%ti,%tj)<=(16,4) {
                %t = cooperative_matrix_load.both_checked %A[%i,%j] : coopmatrix<f32x16x4,matrix_acc>
                %ti32 = cast %ti : i32
                %tj32 = cast %tj : i32
                %u = cooperative_matrix_apply (%r,%c,%v)=%t -> coopmatrix<f32x16x4,matrix_acc> {
                    %inr = less_than %r, %ti32 : bool
                    %inc = less_than %c, %tj32 : bool
                    %in = and %inr, %inc : bool
                    %w = if %in -> (f32) {
                        %e = exp %v : f32
                        yield (%e)
                    } else {
                        %z = constant 0.0 : f32
                        yield (%z)
                    }
                    yield (%w)
                }
                cooperative_matrix_store.both_checked %u, %A[%i,%j]
            }
        }
    """)
    for shape in [(32, 8), (37, 13), (5, 2)]:
        A = random_array(shape, "f32")
        assert_same_results(src, [A], ["lower-foreach", "lower-coopmatrix"])
        assert_same_results(src, [A], ["lower-coopmatrix", "lower-foreach"])


# ---- with the rest of the SIMT lowering ------------------------------------------------------
@pytest.mark.parametrize("case", [
    (2, "index", (0, 0), (70, 33), True, 16, (32, 2), (32, 8)),
    (2, "i32", (1, 2), (70, 9), False, 16, (64, 4), (16, 4)),
    (3, "index", (1, 2, 3), (50, 20, 7), True, 32, (64, 4), (32, 8, 2)),
    (2, "index", (2, 1), (19, 40), False, 16, (32, 2), None),
])
def test_foreach_through_lower_simt_pipeline(case):
    """The lowering followed by constant propagation, dead code elimination and the rest
    of ``lower-simt`` still computes the same results."""
    n, ty, lows, highs, static, sgs, wgs, tile = case
    src = foreach_kernel(n, ty, lows, highs, static, sgs, wgs, tile)
    shape = tuple(max(h, 1) + OFF + 2 for h in highs)
    tiles = tile or (1,) * n
    counts = [max(0, -(-(h - lo) // t)) for lo, h, t in zip(lows, highs, tiles)]
    args = [fortran(shape, np.int32, 7), fortran(shape, np.int32),
            fortran(tuple(c + 1 for c in counts), np.int32)]
    if not static:
        for d in range(n):
            args += [NP_INT[ty](lows[d]), NP_INT[ty](highs[d])]
    assert_same_results(src, args, ["lower-simt"])


@pytest.mark.parametrize("M,N", [(8, 4), (4, 15), (32, 16)])
def test_apply_through_lower_simt_pipeline(M, N):
    src = apply_kernel(M, N, "f32", "matrix_acc",
                       REGION_MASK.format(ty="f32", zero="0.0", three="3.0"))
    A = random_array((M, N), "f32")
    args = [A, fortran((M, N, 4), np.float32), fortran((M, N, 4), np.int32), np.float32(2)]
    _, text = assert_same_results(src, args, ["lower-simt"], grid=(2, 1, 1))
    assert "cooperative_matrix_apply" not in text
