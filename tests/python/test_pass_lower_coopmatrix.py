"""lower-coopmatrix keeps the meaning of every coopmatrix instruction it rewrites.

Each kernel runs on the reference interpreter before and after the pass, unchecked and
checked, for subgroup sizes 8, 16 and 32; the four runs must agree bit for bit, and the
result must equal what NumPy computes here from the instruction's definition in the
language reference (load/store tables with transposes and checked flags, D = A B + C,
row/column reductions).  Inputs are small integers, exact in every type, so the order in
which sums are formed cannot matter.  The lowered text must verify and contain none of
the instructions the pass rewrites.
"""
from __future__ import annotations

import itertools
import textwrap

import ml_dtypes
import numpy as np
import pytest

import ttlc
from ttlc.passes import PassContext, run_passes

NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "bf16": ml_dtypes.bfloat16,
      "f16": np.float16, "f32": np.float32, "f64": np.float64, "c32": np.complex64,
      "c64": np.complex128}
SUBGROUPS = (8, 16, 32)
LOWERED = ("cooperative_matrix_apply", "cooperative_matrix_load", "cooperative_matrix_store",
           "cooperative_matrix_atomic", "cooperative_matrix_mul_add",
           "cooperative_matrix_reduce", "cooperative_matrix_prefetch")
RNG = np.random.default_rng(7)


# ---- harness ------------------------------------------------------------------------------
def lowered(src: str) -> str:
    program = ttlc.check(src)
    run_passes(program, ["lower-coopmatrix"], PassContext())
    text = str(program)
    ttlc.check(text)
    for op in LOWERED:
        assert op not in text, f"{op} left after lower-coopmatrix:\n{text}"
    return text


def run(src: str, args, checked: bool):
    args = [a.copy(order="F") if isinstance(a, np.ndarray) else a for a in args]
    ttlc.compile(src, target="interp", checked=checked)["k"](*args, grid=(1, 1, 1))
    return [a for a in args if isinstance(a, np.ndarray)]


def results(src: str, args):
    """The arrays after the kernel, identical before and after the pass (else fails)."""
    after = lowered(src)
    runs = [run(text, args, checked) for text in (src, after) for checked in (False, True)]
    for other in runs[1:]:
        for x, y in zip(runs[0], other):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), \
                f"results differ before/after lower-coopmatrix\n{after}"
    return runs[0]


def assert_equal(got: np.ndarray, want: np.ndarray):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.complex128), want.astype(np.complex128))


def ints(shape, ty, lo=-4, hi=5):
    x = RNG.integers(lo, hi, size=shape)
    if ty.startswith("c"):
        x = x + 1j * RNG.integers(lo, hi, size=shape)
    return np.asfortranarray(x.astype(NP[ty]))


def kernel(S: int, params: str, body: str) -> str:
    return textwrap.dedent(f"""\
        func @k({params}) attributes{{subgroup_size={S},work_group_size=[{S},1]}} {{
            parallel {{
                %c0 = constant 0 : index
        {textwrap.indent(textwrap.dedent(body), " " * 8)}
            }}
        }}
    """)


def mods(transpose: bool, flag) -> str:
    return (".t" if transpose else "") + (f".{flag}" if flag else "")


# ---- which entries a load/store touches (the reference's tables) ---------------------------
def touched(M, N, x, y, shape, transpose, flag):
    """For each entry (i, j): memref index (a, b) and whether it is accessed."""
    out = {}
    for i in range(M):
        for j in range(N):
            a, b = (x + j, y + i) if transpose else (x + i, y + j)
            # rows_checked tests the memref mode the row index i runs along
            in_row = (0 <= b < shape[1]) if transpose else (0 <= a < shape[0])
            in_col = (0 <= a < shape[0]) if transpose else (0 <= b < shape[1])
            ok = (in_row or flag not in ("rows_checked", "both_checked")) and \
                 (in_col or flag not in ("cols_checked", "both_checked"))
            out[i, j] = (a, b, ok)
    return out


def placement(M, N, transpose, flag, edge):
    """Memref shape and position: guarded modes overhang the memref at the given edge,
    unguarded ones fit."""
    ext = [N, M] if transpose else [M, N]
    row_mode, col_mode = (1, 0) if transpose else (0, 1)
    guarded = {"rows_checked": {row_mode}, "cols_checked": {col_mode},
               "both_checked": {0, 1}}.get(flag, set())
    shape, pos = [], []
    for d in range(2):
        if d not in guarded:
            shape.append(ext[d] + 2)
            pos.append(1)
        elif edge == "end":  # the last two rows/columns lie beyond the memref
            shape.append(ext[d] + 1)
            pos.append(3)
        else:  # the first one lies before it
            shape.append(ext[d] + 1)
            pos.append(-1)
    return tuple(shape), pos[0], pos[1]


def spread(axes, variants, per):
    """Every combination of the values in ``axes`` with ``per`` of the ``variants``, taken
    in turn, so each variant meets many combinations without the full product."""
    combos = [sum((x if isinstance(x, tuple) else (x,) for x in combo), ())
              for combo in itertools.product(*axes)]
    step = max(1, len(variants) // per)
    return [combo + variants[(i + j * step) % len(variants)]
            for i, combo in enumerate(combos) for j in range(per)]


SHAPES = [(1, 17), (2, 9), (4, 15), (8, 4), (16, 2), (16, 16), (32, 3), (64, 5)]


# ---- load and store -------------------------------------------------------------------------
@pytest.mark.parametrize("S,M,N,transpose,flag,edge,ty,atomic", spread([SUBGROUPS, SHAPES], [
    (False, None, "end", "f32", False), (True, None, "end", "i32", False),
    (False, "rows_checked", "end", "f64", False), (True, "rows_checked", "start", "bf16", False),
    (False, "cols_checked", "start", "c32", False), (True, "cols_checked", "end", "i8", True),
    (False, "both_checked", "end", "f32", True), (True, "both_checked", "start", "f32", False),
], 4))
def test_load(S, M, N, transpose, flag, edge, ty, atomic):
    shape, x, y = placement(M, N, transpose, flag, edge)
    op = "cooperative_matrix_atomic_load" if atomic else "cooperative_matrix_load"
    dims = "x?x?" if S != 16 else f"x{shape[0]}x{shape[1]}"  # dynamic and static sizes
    src = kernel(S, f"%A: memref<{ty}{dims}>, %B: memref<{ty}x{M}x{N}>, %x: index, %y: index",
                 f"""\
        %a = {op}{mods(transpose, flag)} %A[%x,%y] : coopmatrix<{ty}x{M}x{N},matrix_acc>
        cooperative_matrix_store %a, %B[%c0,%c0]
        """)
    A = ints(shape, ty)
    want = np.zeros((M, N), NP[ty])
    for (i, j), (a, b, ok) in touched(M, N, x, y, shape, transpose, flag).items():
        if ok:
            want[i, j] = A[a, b]
    _, B = results(src, [A, np.asfortranarray(np.full((M, N), 9, NP[ty])), x, y])
    assert_equal(B, want)


@pytest.mark.parametrize("S,M,N,transpose,flag,edge,ty,atomic", spread([SUBGROUPS, SHAPES], [
    (False, None, "end", "f32", False), (True, None, "end", "c32", True),
    (False, "rows_checked", "start", "i32", False), (True, "rows_checked", "end", "f64", True),
    (False, "cols_checked", "end", "bf16", False), (True, "cols_checked", "start", "i16", False),
    (False, "both_checked", "start", "f32", False), (True, "both_checked", "end", "i32", True),
], 4))
def test_store(S, M, N, transpose, flag, edge, ty, atomic):
    shape, x, y = placement(M, N, transpose, flag, edge)
    op = "cooperative_matrix_atomic_store" if atomic else "cooperative_matrix_store"
    scope = ".subgroup.release" if atomic else ""
    src = kernel(S, f"%A: memref<{ty}x{M}x{N}>, %B: memref<{ty}x?x?>, %x: index, %y: index",
                 f"""\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<{ty}x{M}x{N},matrix_a>
        {op}{mods(transpose, flag)}{scope} %a, %B[%x,%y]
        """)
    A = ints((M, N), ty)
    B = np.asfortranarray(np.full(shape, 9, NP[ty]))
    want = B.copy()
    for (i, j), (a, b, ok) in touched(M, N, x, y, shape, transpose, flag).items():
        if ok:
            want[a, b] = A[i, j]
    _, got = results(src, [A, B, x, y])
    assert_equal(got, want)


@pytest.mark.parametrize("S", SUBGROUPS)
@pytest.mark.parametrize("M,N", [(2, 9), (8, 4), (32, 3)])
@pytest.mark.parametrize("op,ty,transpose,flag", [
    ("add", "f32", False, None), ("add", "c32", True, "both_checked"),
    ("max", "i32", False, "rows_checked"), ("min", "f64", True, "cols_checked"),
    ("max", "f32", True, "both_checked"),
])
def test_atomic_update(S, M, N, op, ty, transpose, flag):
    """The memref is updated where accessed; the result holds the previous values there
    and zero elsewhere."""
    shape, x, y = placement(M, N, transpose, flag, "end")
    src = kernel(S, f"%A: memref<{ty}x{M}x{N}>, %B: memref<{ty}x?x?>, %O: memref<{ty}x{M}x{N}>, "
                    "%x: index, %y: index", f"""\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<{ty}x{M}x{N},matrix_acc>
        %o = cooperative_matrix_atomic_{op}{mods(transpose, flag)} %a, %B[%x,%y] : coopmatrix<{ty}x{M}x{N},matrix_acc>
        cooperative_matrix_store %o, %O[%c0,%c0]
        """)
    A, B = ints((M, N), ty), ints(shape, ty)
    want_B, want_O = B.copy(), np.zeros((M, N), NP[ty])
    fn = {"add": np.add, "max": np.maximum, "min": np.minimum}[op]
    for (i, j), (a, b, ok) in touched(M, N, x, y, shape, transpose, flag).items():
        if ok:
            want_O[i, j] = want_B[a, b]
            want_B[a, b] = fn(want_B[a, b], A[i, j])
    _, got_B, got_O = results(src, [A, B, np.asfortranarray(np.full((M, N), 9, NP[ty])), x, y])
    assert_equal(got_B, want_B)
    assert_equal(got_O, want_O)


def test_atomic_update_result_unused_and_prefetch_dropped():
    src = kernel(16, "%A: memref<i32x4x15>, %B: memref<i32x4x15>", """\
        cooperative_matrix_prefetch 1, %A[%c0,%c0], 4, 15
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<i32x4x15,matrix_acc>
        %o = cooperative_matrix_atomic_add %a, %B[%c0,%c0] : coopmatrix<i32x4x15,matrix_acc>
        """)
    A, B = ints((4, 15), "i32"), ints((4, 15), "i32")
    _, got = results(src, [A, B])
    assert_equal(got, B + A)
    text = lowered(src)
    assert "prefetch" not in text and text.count("atomic_add") == 4  # V = 4 entries


# ---- mul_add --------------------------------------------------------------------------------
@pytest.mark.parametrize("S,blocks,K,N,ta,tb,tc,td", spread([SUBGROUPS, [
    (1, 1, 1), (1, 4, 5), (2, 8, 17), (1, 16, 16), (2, 32, 2), (1, 2, 40)]], [
    ("f32", "f32", "f32", "f32"), ("i8", "i8", "i32", "i32"), ("bf16", "bf16", "f32", "bf16"),
    ("f16", "f16", "f16", "f16"), ("f32", "c32", "c32", "c32"), ("i16", "i8", "i32", "f64"),
    ("f64", "f64", "f64", "f64"),
], 2))
def test_mul_add(S, blocks, K, N, ta, tb, tc, td):
    M = blocks * S
    src = kernel(S, f"%A: memref<{ta}x{M}x{K}>, %B: memref<{tb}x{K}x{N}>, "
                    f"%C: memref<{tc}x{M}x{N}>, %D: memref<{td}x{M}x{N}>", f"""\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<{ta}x{M}x{K},matrix_a>
        %b = cooperative_matrix_load %B[%c0,%c0] : coopmatrix<{tb}x{K}x{N},matrix_b>
        %c = cooperative_matrix_load %C[%c0,%c0] : coopmatrix<{tc}x{M}x{N},matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<{td}x{M}x{N},matrix_acc>
        cooperative_matrix_store %d, %D[%c0,%c0]
        """)
    A, B, C = ints((M, K), ta, -3, 4), ints((K, N), tb, -3, 4), ints((M, N), tc, -3, 4)
    exact = np.complex128 if tc.startswith("c") else np.float64 if tc[0] in "fb" else np.int64
    want = (A.astype(exact) @ B.astype(exact) + C.astype(exact)).astype(NP[td])
    *_, D = results(src, [A, B, C, np.asfortranarray(np.zeros((M, N), NP[td]))])
    assert_equal(D, want)


def test_mul_add_broadcasts_b_once_per_entry():
    """B (K x N) is broadcast entry by entry from a constant work-item; A and C are local."""
    src = kernel(16, "%A: memref<f32x32x4>, %B: memref<f32x4x3>, %D: memref<f32x32x3>", """\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f32x32x4,matrix_a>
        %b = cooperative_matrix_load %B[%c0,%c0] : coopmatrix<f32x4x3,matrix_b>
        %z = constant 0.0 : coopmatrix<f32x32x3,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %z : coopmatrix<f32x32x3,matrix_acc>
        cooperative_matrix_store %d, %D[%c0,%c0]
        """)
    text = lowered(src)
    assert text.count("subgroup_broadcast") == 4 * 3
    assert text.count(" mul %") == 2 * 3 * 4  # 2 row blocks x N x K per work-item


# ---- reduce ---------------------------------------------------------------------------------
@pytest.mark.parametrize("S,blocks,N,mode,op,ty", spread(
    [SUBGROUPS, [(1, 1), (1, 3), (2, 17), (4, 16), (1, 40)], ["row", "column"]],
    [("add", "f32"), ("add", "bf16"), ("add", "c32"), ("max", "i32"), ("min", "f64"),
     ("add", "i8"), ("max", "f16")], 2))
def test_reduce(S, blocks, N, op, ty, mode):
    M = blocks * S
    shape = (M, 1) if mode == "row" else (1, N)
    src = kernel(S, f"%A: memref<{ty}x{M}x{N}>, %R: memref<{ty}x{shape[0]}x{shape[1]}>", f"""\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<{ty}x{M}x{N},matrix_acc>
        %r = cooperative_matrix_reduce_{op}.{mode} %a : coopmatrix<{ty}x{shape[0]}x{shape[1]},matrix_acc>
        cooperative_matrix_store %r, %R[%c0,%c0]
        """)
    A = ints((M, N), ty, -4, 5)
    axis = 1 if mode == "row" else 0
    exact = A.astype(np.complex128 if ty.startswith("c") else np.float64 if ty[0] in "fb"
                     else np.int64)
    want = {"add": np.sum, "max": np.max, "min": np.min}[op](exact, axis=axis, keepdims=True)
    if ty == "i8":  # wraps around like the interpreter's i8 sum
        want = want.astype(np.int64).astype(np.int8)
    _, R = results(src, [A, np.asfortranarray(np.full(shape, 9, NP[ty]))])
    assert_equal(R, want.astype(NP[ty]))


@pytest.mark.parametrize("what", ["row", "column", "mul_add"])
def test_16_bit_floats_are_summed_in_f32(what):
    """256 + 1 + 1 is 256 when each step rounds to bf16, 258 when the sum is formed in f32
    and rounded once (as the interpreter does).  Two row blocks, so that a work-item also
    sums entries of its own before combining with others (column)."""
    S, M = 16, 32
    A = np.asfortranarray(np.ones((M, 4), ml_dtypes.bfloat16))
    A[:, 0] = A[0, :] = 256
    A[1:, 3] = 0
    if what == "mul_add":
        body = """\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<bf16x32x4,matrix_a>
        %b = constant 1.0 : coopmatrix<bf16x4x1,matrix_b>
        %c = constant 1.0 : coopmatrix<bf16x32x1,matrix_acc>
        %r = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<bf16x32x1,matrix_acc>
        """
        shape, want = (M, 1), A.astype(np.float64).sum(axis=1, keepdims=True) + 1
    else:
        shape = (M, 1) if what == "row" else (1, 4)
        body = f"""\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<bf16x32x4,matrix_acc>
        %r = cooperative_matrix_reduce_add.{what} %a : coopmatrix<bf16x{shape[0]}x{shape[1]},matrix_acc>
        """
        want = A.astype(np.float64).sum(axis=1 if what == "row" else 0, keepdims=True)
    src = kernel(S, f"%A: memref<bf16x32x4>, %R: memref<bf16x{shape[0]}x{shape[1]}>",
                 body + "cooperative_matrix_store %r, %R[%c0,%c0]\n")
    _, R = results(src, [A, np.asfortranarray(np.zeros(shape, ml_dtypes.bfloat16))])
    assert_equal(R, want.astype(ml_dtypes.bfloat16))


# ---- apply for other subgroup sizes ------------------------------------------------------------
@pytest.mark.parametrize("S", (8, 32))
@pytest.mark.parametrize("M,N", [(1, 9), (4, 15), (8, 8), (64, 3)])
def test_apply_coordinates(S, M, N):
    src = kernel(S, f"%A: memref<i32x{M}x{N}>", f"""\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<i32x{M}x{N},matrix_acc>
        %b = cooperative_matrix_apply (%i,%j,%v)=%a -> coopmatrix<i32x{M}x{N},matrix_acc> {{
            %h = constant 100 : i32
            %t = mul %i, %h : i32
            %u = add %t, %j : i32
            %w = add %v, %u : i32
            yield (%w)
        }}
        cooperative_matrix_store %b, %A[%c0,%c0]
        """)
    A = ints((M, N), "i32")
    (got,) = results(src, [A])
    i, j = np.indices((M, N))
    assert_equal(got, (A + 100 * i + j).astype(np.int32))


def test_mul_add_rows_not_multiple_is_an_error():
    """The verifier rejects such a program once the subgroup size is known; the pass,
    given one anyway (IR built without verifying), names the restriction."""
    src = textwrap.dedent("""\
        func @k(%D: memref<f32x8x4>) attributes{work_group_size=[16,1]} {
            parallel {
                %c0 = constant 0 : index
                %a = constant 1.0 : coopmatrix<f32x8x2,matrix_a>
                %b = constant 1.0 : coopmatrix<f32x2x4,matrix_b>
                %c = constant 0.0 : coopmatrix<f32x8x4,matrix_acc>
                %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<f32x8x4,matrix_acc>
                cooperative_matrix_store %d, %D[%c0,%c0]
            }
        }
    """)
    program = ttlc.parse(src)
    program.functions[0].attrs["subgroup_size"] = 16
    with pytest.raises(ttlc.CompileError) as e:
        run_passes(program, ["lower-coopmatrix"], PassContext())
    assert "multiple of the subgroup size 16" in str(e.value)
    assert "cooperative_matrix_mul_add" in str(e.value)


# ---- what the target's matrix unit keeps ----------------------------------------------------
def _lowered_for(src: str, target: str) -> str:
    from ttlc.target import get_target

    program = ttlc.check(src)
    run_passes(program, ["lower-coopmatrix"], PassContext(target=get_target(target)))
    text = str(program)
    ttlc.check(text)
    return text


DPAS_KERNEL = kernel(16, "%A: memref<bf16x32x32> {alignment=64}, %B: memref<bf16x32x16>, "
                         "%D: memref<f32x16x16>, %E: memref<f32x16x16> {alignment=64}", """\
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<bf16x16x32,matrix_a>
        %b = cooperative_matrix_load.rows_checked %B[%c0,%c0] : coopmatrix<bf16x32x16,matrix_b>
        %z = constant 0.0 : coopmatrix<f32x16x16,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %z : coopmatrix<f32x16x16,matrix_acc>
        %da = cast %d : coopmatrix<f32x16x16,matrix_a>
        %db = cast %d : coopmatrix<f32x16x16,matrix_b>
        %e = cooperative_matrix_mul_add %da, %db, %z : coopmatrix<f32x16x16,matrix_acc>
        cooperative_matrix_store %e, %E[%c0,%c0]
        """)


def aligned(a: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A column-major copy of a whose first element is alignment-byte aligned."""
    raw = np.zeros(a.nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape, order="F")
    out[...] = a
    return out


def test_a_matrix_unit_keeps_what_it_executes():
    """On pvc (DPAS: bf16 x bf16 -> f32 in 16 x 8 x 16 steps, 2-D block IO) the bf16
    product, the load of A (64-byte aligned, 32 bf16 rows = 64 bytes wide) and the store
    to E stay whole; the f32 product (no f32 DPAS here) and the load of B (alignment
    unknown) are lowered.  The interpreter's results are the same either way."""
    text = _lowered_for(DPAS_KERNEL, "pvc")
    assert text.count("cooperative_matrix_mul_add") == 1
    assert "cooperative_matrix_load %A" in text
    assert "cooperative_matrix_load.rows_checked" not in text
    assert "cooperative_matrix_store %" in text
    # the generic target lowers everything
    generic = _lowered_for(DPAS_KERNEL, "interp")
    assert not any(op in generic for op in LOWERED)
    A, B = ints((32, 32), "bf16", -2, 3), ints((32, 16), "bf16", -2, 3)
    D = A[:16].astype(np.float64) @ B.astype(np.float64)
    for version in (DPAS_KERNEL, text, generic):
        E = aligned(np.zeros((16, 16), np.float32))
        ttlc.compile(version, target="interp", checked=True)["k"](
            aligned(A), B, np.zeros((16, 16), np.float32, order="F"), E, grid=(1, 1, 1))
        assert_equal(E, (D @ D).astype(np.float32))


def test_block_io_needs_what_the_hardware_needs():
    """2-D block access on pvc: a 64-byte aligned memref whose rows are at least 64 bytes
    and whose column stride is a multiple of 16 bytes, at a row position of 4-byte
    granularity, in a subgroup of 16; else the generic per-work-item code."""
    def kept(params: str, at: str = "%c0", S: int = 16) -> bool:
        text = _lowered_for(kernel(S, params, f"""\
            %x = constant {at} : index
            %a = cooperative_matrix_load %A[%x,%c0] : coopmatrix<f16x16x8,matrix_a>
            """.replace("constant %c0", "constant 0")), "pvc")
        return "cooperative_matrix_load %A" in text

    assert kept("%A: memref<f16x32x8> {alignment=64}")
    assert kept("%A: memref<f16x32x8> {alignment=64}", "2")
    assert not kept("%A: memref<f16x32x8> {alignment=64}", "1")  # 2 bytes into a row
    assert not kept("%A: memref<f16x32x8>")  # alignment unknown
    assert not kept("%A: memref<f16x16x8> {alignment=64}")  # rows of 32 bytes
    assert not kept("%A: memref<f16x32x8,strided<1,?>> {alignment=64}")  # pitch unknown
    assert kept("%A: memref<f16x32x8,strided<1,?>> {alignment=64, stride_gcd=[1,32]}")
    assert not kept("%A: memref<f16x32x8> {alignment=64}", S=32)
    # transposed: 32-bit elements, 8 columns at a time (in registers: transpose=true)
    t = _lowered_for(kernel(16, "%A: memref<f32x32x32> {alignment=64}", """\
        %a = cooperative_matrix_load.t %A[%c0,%c0] : coopmatrix<f32x16x8,matrix_acc>
        %b = cooperative_matrix_load.t %A[%c0,%c0] : coopmatrix<f32x16x4,matrix_acc>
        """), "pvc")
    assert "cooperative_matrix_load.t %A[%c0,%c0] : coopmatrix<f32x16x8" in t
    assert "cooperative_matrix_load.t %A[%c0,%c0] : coopmatrix<f32x16x4" not in t


def test_matrix_unit_operand_layouts():
    """pvc's DPAS computes the transposed product, so that its operands are the
    language's layout: lane p holds rows p, p + 16, ..., component c + N k column c of row
    block k; B's VNNI pairs are consecutive components of A's work-item."""
    from ttlc.ir.types import CoopMatrixType, SCALAR_TYPES
    from ttlc.target import get_target

    pvc = get_target("pvc")
    b16 = pvc.storage_layout(CoopMatrixType(SCALAR_TYPES["bf16"], 32, 16, "matrix_b"), 16)
    assert [b16.element(3, v) for v in (0, 1, 2, 3, 16)] == [(3, 0), (3, 1), (3, 2), (3, 3),
                                                               (19, 0)]
    acc = pvc.storage_layout(CoopMatrixType(SCALAR_TYPES["f32"], 16, 8, "matrix_acc"), 16)
    assert [acc.element(5, v) for v in range(8)] == [(5, c) for c in range(8)]
    # a shape the unit does not take keeps the language's layout
    odd = CoopMatrixType(SCALAR_TYPES["f32"], 8, 5, "matrix_acc")
    assert pvc.storage_layout(odd, 16) == ttlc.ir.layout.layout_of(odd, 16)
    assert get_target("cpu").storage_layout(odd, 16) == ttlc.ir.layout.layout_of(odd, 16)
