"""``ttlc upgrade``: the legacy dialect (spec/tensor-language-legacy.rst) in the current language.

Every grammar production and example of the legacy reference is upgraded, the printed
program is checked and run on the interpreter against NumPy; the reference's stated
result types of views are compared with the upgraded ones.  Constructs without an
equivalent are diagnostics on their line.
"""
from __future__ import annotations

import numpy as np
import pytest

import ttlc
from ttlc.ir.types import MemrefType
from ttlc.parse import parse_type
from ttlc.api import upgrade
from ttlc.parse.legacy import is_legacy, print_upgraded

rng = np.random.default_rng(16)


def upgraded(text: str) -> str:
    out = print_upgraded(upgrade(text))
    assert str(ttlc.check(out)) == str(ttlc.parse(out))  # the printed text is valid
    return out


def run(text: str, *args, kernel: str = "k", grid=(1, 1, 1)):
    module = ttlc.compile(upgraded(text), target="interp", checked=True)
    module[kernel](*args, grid=grid)


def farray(shape, dtype=np.float32):
    return np.asfortranarray(rng.standard_normal(shape).astype(dtype))


# ---- the sample code of the reference -------------------------------------------------
SAMPLE = """\
func @fused_kernel(%alpha: f32,
                     %A: group<memref<f32x16x8>>,
                     %B: memref<f32x8x8>,
                     %C: memref<f32x8x16>,
                     %D: memref<f32x16x16x?>) {
  %0 = group_id
  %1 = load %A[%0]        : group<memref<f32x16x8>> ; Returns memref<f32x16x8>
  %2 = subview %D[:,:,%0] : memref<f32x16x16x?>     ; Returns memref<f32x16x16>
  %tmp0 = alloca -> memref<f32x16x8>
  gemm.n.t 1.0, %1, %B, 0.0, %tmp0
     : f32, memref<f32x16x8>, memref<f32x8x8>, f32, memref<f32x16x8>
  gemm.n.n %alpha, %tmp0, %C, 1.0, %2
     : f32, memref<f32x16x8>, memref<f32x8x16>, f32, memref<f32x16x16>
}
"""


def test_sample_code_computes_D_plus_alpha_A_Bt_C():
    A = [farray((16, 8)) for _ in range(3)]
    B, C, D = farray((8, 8)), farray((8, 16)), farray((16, 16, 3))
    want = D.astype(np.float64).copy()
    for g in range(3):
        want[:, :, g] += 0.5 * A[g].astype(np.float64) @ B.T @ C
    run(SAMPLE, np.float32(0.5), A, B, C, D, kernel="fused_kernel", grid=(3, 1, 1))
    np.testing.assert_allclose(D, want, rtol=1e-5, atol=1e-5)


def test_names_are_kept_and_constants_materialised():
    out = upgraded(SAMPLE)
    assert "%tmp0 = alloca : memref<f32x16x8,local>" in out
    assert "%0 = group_id.x : index" in out and "%1 = load %A[%0] : memref<f32x16x8>" in out
    assert "constant 1.0 : f32" in out and "constant 0.0 : f32" in out


# ---- scalar instructions -------------------------------------------------------------
SCALARS = """\
func @k(%x: i32, %y: f64, %out: memref<i64x16>, %fout: memref<f64x4>) {
  %a = add %x, 5 : i32
  %b = sub 100, %x : i32
  %c = mul %a, %b : i32
  %d = div %c, 7 : i32
  %e = rem %c, 7 : i32
  %f = neg %x : i32
  %fa = add %y, 0.5 : f64
  %fm = mul %fa, 2 : f64
  %fn = neg %fm : f64
  %fd = div %fn, 4.0 : f64
  %g = cast %e : i32 -> i64
  %h = cast 3 : i32 -> f64
  %t0 = cmp.eq %x, 3 : i32
  %t1 = cmp.ne %x, 3 : i32
  %t2 = cmp.gt %x, 3 : i32
  %t3 = cmp.ge %x, 3 : i32
  %t4 = cmp.lt %x, 3 : i32
  %t5 = cmp.le %x, 3 : i32
  %r = cast %f : i32 -> i64
  %s = cast %d : i32 -> i64
  %v0 = if %t0 -> (i64) { yield 1 : i64 } else { yield 0 : i64 }
  %v1 = if %t1 -> (i64) { yield 1 : i64 } else { yield 0 : i64 }
  %v2 = if %t2 -> (i64) { yield 1 : i64 } else { yield 0 : i64 }
  %v3 = if %t3 -> (i64) { yield 1 : i64 } else { yield 0 : i64 }
  %v4 = if %t4 -> (i64) { yield 1 : i64 } else { yield 0 : i64 }
  %v5 = if %t5 -> (i64) { yield 1 : i64 } else { yield 0 : i64 }
  %hx = cast %x : i32 -> f64
  store %g, %out[0] : memref<i64x16>
  store %r, %out[1] : memref<i64x16>
  store %s, %out[2] : memref<i64x16>
  store %v0, %out[3] : memref<i64x16>
  store %v1, %out[4] : memref<i64x16>
  store %v2, %out[5] : memref<i64x16>
  store %v3, %out[6] : memref<i64x16>
  store %v4, %out[7] : memref<i64x16>
  store %v5, %out[8] : memref<i64x16>
  store %fd, %fout[0] : memref<f64x4>
  store %h, %fout[1] : memref<f64x4>
  store %hx, %fout[2] : memref<f64x4>
}
"""


@pytest.mark.parametrize("x", [-9, 3, 11])
def test_arithmetic_cast_and_comparisons(x):
    out, fout = np.zeros(16, np.int64), np.zeros(4)
    run(SCALARS, np.int32(x), 1.25, out, fout)
    a, b = x + 5, 100 - x
    c = a * b
    d, e = int(c / 7), c - 7 * int(c / 7)   # C's division, toward zero
    want = [e, -x, d, x == 3, x != 3, x > 3, x >= 3, x < 3, x <= 3]
    assert out[:9].tolist() == [int(w) for w in want]
    assert fout[:3].tolist() == [-((1.25 + 0.5) * 2) / 4.0, 3.0, float(x)]


def test_if_example_of_the_reference():
    text = """\
func @k(%0: i32, %out: memref<i32>) {
       %1 = cmp.lt %0, 16 : i32
       %x = if %1 -> (i32) {
           yield %0 : i32
       } else {
           yield 16 : i32
       }
       store %x, %out[] : memref<i32>
}
"""
    for v, want in ((3, 3), (20, 16)):
        out = np.zeros((), np.int32)
        run(text, np.int32(v), out)
        assert int(out) == want


def test_for_foreach_size_group_size_and_attributes():
    text = """\
func @k(%A: memref<f32x?>, %B: memref<f32x?>, %n: memref<i64>) work_group_size(16,2) subgroup_size(16) {
  %s = size %A[0] : memref<f32x?>
  foreach %i = 0, %s {
    %a = load %A[%i] : memref<f32x?>
    %b = mul %a, 3.0 : f32
    store %b, %B[%i] : memref<f32x?>
  }
  %gs = group_size
  %acc = alloca -> memref<i64>
  %z = cast 0 : i32 -> i64
  store %z, %acc[] : memref<i64>
  for %j = 1, 10, 3 : i64 {
    %old = load %acc[] : memref<i64>
    %new = add %old, %j : i64
    store %new, %acc[] : memref<i64>
  }
  %sum = load %acc[] : memref<i64>
  %gsi = cast %gs : index -> i64
  %total = add %sum, %gsi : i64
  store %total, %n[] : memref<i64>
}
"""
    out = upgraded(text)
    header = out.split("\n")[0].replace(" ", "")
    assert "work_group_size=[16,2]" in header and "subgroup_size=16" in header
    A, B, n = farray(37), np.zeros(37, np.float32), np.zeros((), np.int64)
    run(text, A, B, n)
    np.testing.assert_array_equal(B, A * np.float32(3.0))
    assert int(n) == 1 + 4 + 7 + 1   # for 1..10 step 3, plus one work-group


# ---- views: the reference's stated result types ---------------------------------------
def view_type(instruction: str, operand_type: str, extra: str = "") -> MemrefType:
    text = (f"func @k(%0: {operand_type}, %1: index, %2: index) {{\n{extra}"
            f"  %r = {instruction} : {operand_type}\n}}\n")
    program = upgrade(text)
    inst = [i for i in program.functions[0].body.walk() if i.results and i.results[0].name == "r"]
    return inst[0].results[0].type


@pytest.mark.parametrize("inst, operand, result", [
    ("expand %0[1 -> 2x8]", "memref<f32x32x16x8>", "memref<f32x32x2x8x8>"),
    ("expand %0[1 -> 2x?]", "memref<f32x32x16x8>", "memref<f32x32x2x8x8>"),
    ("expand %0[1 -> ?x8]", "memref<f32x32x16x8>", "memref<f32x32x2x8x8>"),
    ("expand %0[1 -> 2x?]", "memref<f32x32x?x8>", "memref<f32x32x2x?x8>"),
    ("expand %0[1 -> ?x8]", "memref<f32x32x?x8>", "memref<f32x32x?x8x8>"),
    ("expand %0[1 -> %1 x ?]", "memref<f32x32x?>", "memref<f32x32x?x?>"),
    ("expand %0[1 -> %1 x ?]", "memref<f32x32x16>", "memref<f32x32x?x?>"),
    ("expand %0[1 -> %1 x %2]", "memref<f32x32x?>", "memref<f32x32x?x?>"),
    ("expand %0[1 -> 4 x %1]", "memref<f32x32x?>", "memref<f32x32x4x?>"),
    ("expand %0[0->4x8]", "memref<f32x32x7,strided<2,64>>", "memref<f32x4x8x7,strided<2,8,64>>"),
    ("expand %0[0->4x?]", "memref<f32x32x7,strided<2,64>>", "memref<f32x4x8x7,strided<2,8,64>>"),
    # the reference prints these two without the last mode (memref<f32x?x8,...>,
    # memref<f32x4x?,...>); the shapes below are its rules applied by hand
    ("expand %0[0->?x4]", "memref<f32x?x7,strided<2,?>>", "memref<f32x?x4x7,strided<2,?,?>>"),
    ("expand %0[0->4x?]", "memref<f32x?x7,strided<2,?>>", "memref<f32x4x?x7,strided<2,8,?>>"),
    ("fuse %0[1,3]", "memref<f32x32x16x8x4x42>", "memref<f32x32x512x42>"),
    ("fuse %0[1,3]", "memref<f32x32x16x?x4x42,strided<1,32,?,?,?>>",
     "memref<f32x32x?x42,strided<1,32,?>>"),
    ("fuse %0[1,2]", "memref<f32x32x16x2x2,strided<1,48,768,1536>>",
     "memref<f32x32x32x2,strided<1,48,1536>>"),
    ("fuse %0[0,1]", "memref<f32x8x?x32,strided<1,?,?>>", "memref<f32x?x32,strided<1,?>>"),
    ("subview %0[4:8,8:4]", "memref<f32x32x16>", "memref<f32x8x4,strided<1,32>>"),
    ("subview %0[2:4, %1]", "memref<f32x16x8>", "memref<f32x4,strided<1>>"),
    ("subview %0[2:4, %1:1]", "memref<f64x16x8>", "memref<f64x4x1,strided<1,16>>"),
    ("subview %0[%1:4]", "memref<f32x16>", "memref<f32x4>"),
    ("subview %0[%2:%2]", "memref<f32x16>", "memref<f32x?>"),
    ("subview %0[2:4, %2:%2, 6:7]", "memref<f32x16x42x13>", "memref<f32x4x?x7,strided<1,16,672>>"),
    ("subview %0[2:4, %2:%2, 6:7]", "memref<f32x16x42x13,strided<1,?,?>>",
     "memref<f32x4x?x7,strided<1,?,?>>"),
    ("subview %0[:]", "memref<f32x16>", "memref<f32x16>"),
    ("subview %0[:]", "memref<f32x?>", "memref<f32x?>"),
    ("subview %0[5:?]", "memref<f32x16>", "memref<f32x11>"),
    ("subview %0[%2:?]", "memref<f32x16>", "memref<f32x?>"),
])
def test_view_result_types(inst, operand, result):
    """The reference's examples, where they are consistent: its ``fuse`` of a dynamic
    stride gives the second mode stride 16 behind a first mode of 32 (overlapping), here
    32; its ``subview %0[5:?]`` of 16 elements claims 13, 16 - 5 is 11."""
    got, want = view_type(inst, operand), parse_type(result)
    assert (got.element, got.shape, got.stride) == (want.element, want.shape, want.stride)


def test_views_compute_the_same_elements():
    text = """\
func @k(%A: memref<f32x8x6x?>, %B: memref<f32x?>, %n: index) {
  %e = expand %A[2 -> 2x?] : memref<f32x8x6x?>
  %f = fuse %e[0,1] : memref<f32x8x6x2x?>
  %s = subview %f[1:?, 1, %n:?] : memref<f32x48x2x?>
  sum.n 1.0, %s, 0.0, %B : f32, memref<f32x47x?,strided<1,96>>, f32, memref<f32x?>
}
"""
    A = farray((8, 6, 6))
    B = np.zeros(47, np.float32)
    run(text, A, B, 1)
    F = A.astype(np.float64).reshape(48, 2, 3, order="F")  # mode 2 as 2x3, modes 0 and 1 fused
    np.testing.assert_allclose(B, F[1:, 1, 1:].sum(axis=1), rtol=1e-5)


# ---- BLAS-like instructions ----------------------------------------------------------
BLAS = """\
func @k(%A: memref<f64x4x5>, %At: memref<f64x5x4>, %B: memref<f64x5x3>, %C: memref<f64x4x3>,
        %x: memref<f64x5>, %y: memref<f64x4>, %h: memref<f64x4>, %S: memref<f64x4x5>,
        %s: memref<f64>, %v: memref<f64x5>) {
  axpby.t 2.0, %At, 1.0, %S : f64, memref<f64x5x4>, f64, memref<f64x4x5>
  gemm.n.n.atomic 1.5, %A, %B, 1.0, %C : f64, memref<f64x4x5>, memref<f64x5x3>, f64, memref<f64x4x3>
  gemv.n 1.0, %A, %x, 0.0, %y : f64, memref<f64x4x5>, memref<f64x5>, f64, memref<f64x4>
  barrier
  hadamard_product 1.0, %y, %y, 2.0, %h : f64, memref<f64x4>, memref<f64x4>, f64, memref<f64x4>
  sum.n 1.0, %x, 0.5, %s : f64, memref<f64x5>, f64, memref<f64>
  sum.t 1.0, %A, 0.0, %v : f64, memref<f64x4x5>, f64, memref<f64x5>
  %t = alloca -> memref<f64x4x5>
  ger 1.0, %y, %x, 0.0, %t : f64, memref<f64x4>, memref<f64x5>, f64, memref<f64x4x5>
  axpby.n.atomic 1.0, %t, 1.0, %S : f64, memref<f64x4x5>, f64, memref<f64x4x5>
  lifetime_stop %t
}
"""


def test_blas_instructions():
    A, At, B, C = farray((4, 5), np.float64), farray((5, 4), np.float64), \
        farray((5, 3), np.float64), farray((4, 3), np.float64)
    x, h, S = farray(5, np.float64), farray(4, np.float64), farray((4, 5), np.float64)
    y, s, v = np.zeros(4), np.full((), 3.0), np.zeros(5)
    S0, C0, h0 = S.copy(), C.copy(), h.copy()
    run(BLAS, A, At, B, C, x, y, h, S, s, v)
    yy = A @ x
    np.testing.assert_allclose(y, yy)
    np.testing.assert_allclose(C, 1.5 * A @ B + C0)
    np.testing.assert_allclose(h, yy * yy + 2.0 * h0)
    np.testing.assert_allclose(s, x.sum() + 0.5 * 3.0)
    np.testing.assert_allclose(v, A.sum(axis=0))
    np.testing.assert_allclose(S, 2.0 * At.T + S0 + np.outer(yy, x))


def test_gemv_as_the_reference_grammar_spells_it():
    """The reference's gemv production reads ``"gemm" transpose ... "," const-or-val``."""
    text = ("func @k(%A: memref<f32x3x2>, %x: memref<f32x3>, %y: memref<f32x2>) {\n"
            "  gemm.t, 1.0, %A, %x, 0.0, %y : f32, memref<f32x3x2>, memref<f32x3>, f32, "
            "memref<f32x2>\n}\n")
    assert "gemv.t" in upgraded(text)
    A, x, y = farray((3, 2)), farray(3), np.zeros(2, np.float32)
    run(text, A, x, y)
    np.testing.assert_allclose(y, A.T @ x, rtol=1e-5)


# ---- unsigned types ------------------------------------------------------------------
def test_unsigned_wrapping_arithmetic_is_kept():
    text = """\
func @k(%a: memref<u32x4>, %b: memref<u8x4>) {
  foreach %i = 0, 4 {
    %v = load %a[%i] : memref<u32x4>
    %w = add %v, 4294967295 : u32
    store %w, %a[%i] : memref<u32x4>
    %c = cast %v : u32 -> u8
    store %c, %b[%i] : memref<u8x4>
  }
}
"""
    assert "memref<i32x4>" in upgraded(text) and "constant -1 : i32" in upgraded(text)
    a = np.array([0, 1, 300, 7], np.int32)
    b = np.zeros(4, np.int8)
    run(text, a, b)
    assert a.view(np.uint32).tolist() == [(v - 1) % 2**32 for v in (0, 1, 300, 7)]
    assert b.view(np.uint8).tolist() == [0, 1, 300 % 256, 7]


@pytest.mark.parametrize("line, message", [
    ("%r = div %x, 2 : u32", "div of unsigned integers has no equivalent"),
    ("%r = rem %x, 2 : u32", "rem of unsigned integers has no equivalent"),
    ("%r = cmp.lt %x, 2 : u32", "ordered comparison of unsigned integers has no equivalent"),
    ("%r = cast %x : u32 -> i64", "cast from unsigned i32 to i64 has no equivalent"),
    ("%r = cast %x : u32 -> f32", "cast from unsigned i32 to f32 has no equivalent"),
    ("%f = cast 1.5 : f32 -> f64\n  %r = cast %f : f64 -> u32",
     "cast from f64 to an unsigned integer has no equivalent"),
])
def test_no_equivalent_is_a_diagnostic_on_its_line(line, message):
    text = f"func @k(%x: u32) {{\n  {line}\n}}\n"
    with pytest.raises(ttlc.CompileError) as info:
        upgrade(text)
    (lineno, col, _, msg), = info.value.diagnostics
    assert lineno == text.count("\n", 0, text.index("%r")) + 1 and col == 8  # the opcode
    assert msg.startswith(message), msg
    assert is_legacy(text)


@pytest.mark.parametrize("text, where, message", [
    ("func @k(%A: memref<f32x4>) {\n  %x = load %A[0] : memref<f64x4>\n}\n", (2, 13),
     "the operand has type memref<f32x4>, not memref<f64x4>"),
    ("func @k() {\n  %x = frobnicate\n}\n", (2, 8), "unknown instruction 'frobnicate'"),
    ("func @k(%a: f32) {\n  %x = add %a, %a : f64\n}\n", (2, 3), "must be f32, not f64"),
    ("func @k() {\n  %x = add %y, 1 : i32\n}\n", (2, 12), "use of undefined value %y"),
    ("func @k(%a: memref<f32x?>) {\n  %x = alloca -> memref<f32x?>\n}\n", (2, 8),
     "alloca needs a memref of static size"),
])
def test_invalid_legacy_programs_are_diagnosed(text, where, message):
    with pytest.raises(ttlc.CompileError) as info:
        upgrade(text)
    line, col, _, msg = info.value.diagnostics[0]
    assert (line, col) == where and message in msg, info.value.format()


def test_the_current_parser_points_legacy_text_to_upgrade():
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.check(SAMPLE)
    assert "legacy dialect" in info.value.diagnostics[0].message
    assert "ttlc upgrade" in info.value.diagnostics[0].message
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.check("func @k() { %x = nonsense }")
    assert "legacy" not in info.value.format()


def test_the_documented_upgrade_is_what_ttlc_prints():
    """docs/legacy.md shows a legacy program and its upgrade: they must stay true."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "legacy.md").read_text()
    legacy = page.split("```\n", 2)[1]
    current = page.split("```ttl\n", 1)[1].split("```", 1)[0]
    assert print_upgraded(upgrade(legacy)) == current


def test_constant_conditions_bool_types_and_hex_floats():
    """``if`` on an integer constant (true), without else; i1 as bool; hex floats."""
    text = """\
func @k(%out: memref<f64x2>) {
  %t = cmp.ne 1, 2 : i32
  %b = cast %t : i1 -> i1
  if true {
    store %b2, %out[0] : memref<f64x2>
  }
}
"""
    with pytest.raises(ttlc.CompileError, match="undefined value %b2"):
        upgrade(text)
    text = text.replace("%b = cast %t : i1 -> i1\n", "%b2 = add 0x1.8p1, 0.5 : f64\n")
    out = np.zeros(2)
    run(text, out)
    assert out.tolist() == [3.5, 0.0]
    assert "if %c" in upgraded(text) and "constant true : bool" in upgraded(text)


def test_fuse_needs_two_modes():
    with pytest.raises(ttlc.CompileError, match="fuse takes the first and the last mode"):
        upgrade("func @k(%a: memref<f32x4x4>) {\n  %f = fuse %a[0] : memref<f32x4x4>\n}\n")


def test_command_line(tmp_path):
    """``ttlc upgrade -`` reads standard input; ``ttlc compile`` of a legacy file names
    ``ttlc upgrade``; the upgraded program compiles."""
    import subprocess
    import sys

    def ttlc_cli(*args, stdin=""):
        p = subprocess.run([sys.executable, "-m", "ttlc", *args], input=stdin, text=True,
                           capture_output=True, timeout=300)
        assert "Traceback" not in p.stderr
        return p.returncode, p.stdout, p.stderr

    code, out, err = ttlc_cli("upgrade", "-", stdin=SAMPLE)
    assert code == 0 and out == upgraded(SAMPLE), err
    legacy, current = tmp_path / "old.ir", tmp_path / "new.ir"
    legacy.write_text(SAMPLE)
    current.write_text(out)
    code, _, err = ttlc_cli("compile", "--target", "cpu", "--stage", "lowered", str(legacy), "-o", "-")
    assert code == 1 and f"{legacy}:2.48: error: " in err and "ttlc upgrade" in err
    code, _, err = ttlc_cli("compile", "--target", "cpu", "--stage", "lowered", str(current),
                            "-o", str(tmp_path / "out.ir"))
    assert code == 0, err
