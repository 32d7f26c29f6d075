"""The Python contracts (README, "Using ttlc"): ``ttlc.parse`` / ``ttlc.check``.

* any input text gives IR or raises ``ttlc.CompileError``, never another exception;
* ``CompileError.diagnostics`` entries unpack as ``(line, column, end, message)``;
* ``str(program)`` is the canonical print, and printing is a fixed point.

Tests that need the verifier to reject parseable programs carry ``needs_verifier``
(see conftest.py): they are skipped until ``ttlc.check`` rejects a gemm in a parallel
region.
"""
from __future__ import annotations

import glob
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttlc

# a valid program touching most of the grammar, written from the reference
PROGRAM = """\
; most of the grammar in one function
func @kernel(%alpha: f32, %A: memref<f32x32x?> {alignment=64, shape_gcd=[16]}, %B: group<memref<f32x32x16>x?, offset: ?>, %n: index) attributes{subgroup_size=16, work_group_size=[32,1]} {
    %c0 = constant 0 : index
    %one = constant 0x1p+0 : f32
    %gid = group_id.x : index
    %b = load %B[%gid] : memref<f32x32x16>
    %u = subview %A[0:32,%c0:16] : memref<f32x32x16>
    %v = subview %A[0:16,%c0:16] : memref<f32x16x16,strided<1,32>>
    gemm.atomic.n.t %alpha, %b, %v, %one, %u
    %s, %t = for %i=%c0,%n init(%x=%one,%y=%alpha) -> (f32,f32) {
        %z = add %x, %y : f32
        yield (%z, %x)
    } attributes{unroll=2}
    %p = less_than %s, %t : bool
    %r = if %p -> (f32) {
        yield (%s)
    } else {
        yield (%t)
    }
    foreach_tile (%i,%j)=(%c0,%c0),(%n,%n) as (%ti,%tj)<=(32,16) {
        %m = cooperative_matrix_load.both_checked %A[%i,%j] : coopmatrix<f32x32x16,matrix_acc>
        %e = cooperative_matrix_apply (%k,%l,%w)=%m -> coopmatrix<f32x32x16,matrix_acc> {
            %q = mul %w, %r : f32
            yield (%q)
        }
        cooperative_matrix_store.both_checked %e, %A[%i,%j]
    }
    %c = constant [0x1p+0,-0x1.8p+1] : c64
    %h = constant 0x1.9ap-4 : bf16
}
"""


def expect_compile_error(text, check=False):
    """Only CompileError may escape; its diagnostics are well-formed."""
    with pytest.raises(ttlc.CompileError) as info:
        (ttlc.check if check else ttlc.parse)(text)
    diags = info.value.diagnostics
    assert diags
    for d in diags:
        line, column, end, message = d
        assert isinstance(line, int) and isinstance(column, int) and isinstance(end, int)
        assert isinstance(message, str) and message
    str(info.value)  # formatting never fails
    return diags


def no_other_exception(text):
    """parse and check give IR or CompileError (check parses as parse does, so it runs on
    the parsed program only)."""
    try:
        ttlc.check(ttlc.parse(text))
    except ttlc.CompileError as e:
        assert e.diagnostics
        str(e)


# ---- any input: IR or CompileError ----------------------------------------------------------
def test_reference_program_is_valid_and_canonical():
    program = ttlc.check(PROGRAM)
    assert str(program) == PROGRAM.split("\n", 1)[1]  # the comment is dropped
    assert ttlc.check(program) is program  # a Program is accepted as well


def test_bytes_input():
    assert str(ttlc.parse(PROGRAM.encode())) == str(ttlc.parse(PROGRAM))
    assert str(ttlc.check(bytearray(PROGRAM.encode()))) == str(ttlc.parse(PROGRAM))


def test_invalid_utf8():
    for data in (b"func @k() {\xff}", b"\x80", b"func @k() {\n  \xc3\x28\n}", b"\xed\xa0\x80"):
        diags = expect_compile_error(data)
        assert diags[0][3].startswith("input is not valid UTF-8")
    expect_compile_error(b"\xfe\xff", check=True)


def test_nul_and_control_characters():
    assert expect_compile_error("func @k() {\0}")[0] == (1, 12, 12, "unexpected character NUL")
    for text in ("\0", "func\0@k() {}", "func @k() {}\0", 'func @k() attributes{"a\0"=1} {}',
                 "func @k() {\x7f}", "\ud800", "func @\u00e9() {}", "func @k() {\x1b[0m}"):
        expect_compile_error(text)
        expect_compile_error(text, check=True)


def test_other_non_text_is_a_type_error():
    with pytest.raises(TypeError):
        ttlc.parse(42)


@pytest.mark.parametrize("depth", [101, 1000, 20000])
def test_deep_nesting_of_regions(depth):
    text = "func @k() " + "{ parallel " * depth + "{}" + " }" * depth
    expect_compile_error(text)
    cond = "func @k(%c: bool) {\n" + "if %c {\n" * depth + "}\n" * depth + "}\n"
    expect_compile_error(cond, check=True)


def test_moderate_nesting_is_fine():
    depth = 20
    text = "func @k(%c: bool) {\n" + "if %c {\n" * depth + "}\n" * depth + "}\n"
    program = ttlc.parse(text)
    assert str(ttlc.parse(str(program))) == str(program)


@pytest.mark.parametrize("depth", [101, 1000, 20000])
def test_deep_nesting_of_attributes(depth):
    arrays = 'func @k() attributes{"a"=' + "[" * depth + "]" * depth + "} {}"
    dicts = "func @k() attributes" + '{"a"=' * depth + "1" + "}" * depth + " {}"
    unclosed = 'func @k() attributes{"a"=' + "[" * depth
    for text in (arrays, dicts, unclosed):
        expect_compile_error(text, check=depth < 1000)


@pytest.mark.parametrize("template", [
    "func @k() {{ %0 = constant {} : i64 }}",
    "func @k() {{ %0 = constant -{} : i32 }}",
    "func @k() attributes{{alignment={}}} {{}}",
    "func @k(%A: memref<f32x{}>) {{}}",
    "func @k(%A: memref<f32x4>) {{ %0 = size %A[{}] : index }}",
    "func @k() {{ %0 = constant 1.{} : f64 }}",
    "func @k() {{ %0 = constant 1e{} : f64 }}",
    "func @k() {{ %0 = constant 0x1p{} : f32 }}",
    "func @k() {{ %0 = constant [{}, 1.0] : c32 }}",
])
def test_huge_numbers(template):
    text = template.format("7" * 10**6)
    no_other_exception(text)
    if "1.{}" not in template:  # a long mantissa is a valid (rounded) float
        expect_compile_error(text)


def test_leading_zeros_are_not_huge():
    program = ttlc.parse("func @k() { %0 = constant " + "0" * 10**5 + "12 : i32 }")
    assert "constant 12 : i32" in str(program)


@pytest.mark.parametrize("source", ["program", "valid_program"])
def test_every_prefix(source, valid_program):
    """Truncated programs (every prefix); suffixes and one-character deletions sampled."""
    text = PROGRAM if source == "program" else valid_program
    for i in range(len(text)):
        no_other_exception(text[:i])
        if i % 7 == 0:
            no_other_exception(text[i:])
            no_other_exception(text[:i] + text[i + 1:])


def test_every_prefix_of_the_bytes():
    data = PROGRAM.replace("0x1p+0", "1.0").encode() + "; é\n".encode()
    for i in range(len(data) - 8, len(data)):
        try:
            ttlc.parse(data[:i])
        except ttlc.CompileError:
            pass


_TOKENS = ["func", "@k", "(", ")", "{", "}", "[", "]", "<", ">", ",", "=", ":", ".", "?", "x",
           "%a", "%0", "%b", "memref", "group", "coopmatrix", "f32", "i32", "index", "bool",
           "constant", "add", "gemm", "for", "if", "else", "yield", "parallel", "load",
           "foreach_tile", "as", "<=", "->", "init", "attributes", "1", "-2", "0x1p+3", "1.5",
           "[1.0,2.0]", '"s"', "alignment", "matrix_acc", "strided", "local", "offset", "\n", ";",
           "true", "subview", "expand", "cooperative_matrix_apply", "in", "cmp", "lt", "math"]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(_TOKENS), max_size=60))
def test_random_token_soup(tokens):
    no_other_exception(" ".join(tokens))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=200))
def test_random_bytes(data):
    no_other_exception(data)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, len(PROGRAM) - 1), st.text(max_size=3))
def test_random_edits(pos, insert):
    no_other_exception(PROGRAM[:pos] + insert + PROGRAM[pos + 1:])


# ---- diagnostics ----------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("func @k(%A: memref<f32x4>) {\n    %x = load %A[%i] : f32\n}\n",
     (2, 18, 19, "use of undefined value %i")),
    ("func @k() {\n  foo\n}", (2, 3, 5, "unknown instruction 'foo'")),
    ("func @k() {\n%0 = constant 9223372036854775808 : i64\n}",
     (2, 15, 33, "integer constant out of range (-2^63+1 to 2^63-1)")),
    ("func @k(%a: i32) {\n    %a = constant 1 : i32\n}", (2, 5, 6, "redefinition of %a")),
    ("func @k() {\n    %0 = group_id.w : index\n}", (2, 19, 19, None)),
    ("func @k() {", (1, 12, 12, None)),
    ("func @k() {\n\t%0 = constant 1 : f32\n\t%1 = constant 2 : f32\n\tfoo %0\n}",
     (4, 2, 4, "unknown instruction 'foo'")),
])
def test_diagnostic_positions(text, expected):
    (line, column, end, message), *_ = expect_compile_error(text)
    assert (line, column, end) == expected[:3]
    if expected[3] is not None:
        assert message == expected[3]


def test_diagnostic_notes_and_format():
    text = "func @k(%a: i32) {\n    %a = constant 1 : i32\n}"
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.parse(text, "k.ir")
    d = info.value.diagnostics[0]
    assert d.notes and d.notes[0][0].line == 1 and d.notes[0][0].col == 9
    text = "func @k(%A: memref<f32x4>) {\n    %x = load %A[%i] : f32\n}\n"
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.parse(text, "k.ir")
    assert str(info.value) == ("k.ir:2.18-19: error: use of undefined value %i\n"
                               "    %x = load %A[%i] : f32\n"
                               "                 ~~")
    assert info.value.format() == str(info.value)


def test_unexpected_end_names_the_open_region():
    (_, _, _, message), = expect_compile_error("func @k() {\n    parallel {\n")
    assert "end of input" in message and "2.14" in message


# ---- canonical print ------------------------------------------------------------------------
MESSY = """\
; a comment line
func   @k( %A : memref<f32x4x8,strided<1,4>> , %G: group<memref<f32x4>x?, offset: 0>,%n:index)attributes{work_group_size=[16,1],subgroup_size=16}{
  %5 = constant 1.5 : f32    ; trailing comment
  %2 = constant 2 : index
  %c = cmp.lt %2, %n : bool
  axpby.n %5, %A, %5, %A
  %r = if %c -> (f32) { yield (%5) } else { %e = math.exp %5 : f32  yield(%e) }
  foreach_tile (%i)=(%2),(%n) as (%t)<=(16) { }
  parallel { %m = cooperative_matrix_load.n %A[%2,%2] : coopmatrix<f32x16x8,matrix_acc>
             %x = cooperative_matrix_apply (%a,%b,%v) in %m -> coopmatrix<f32x16x8,matrix_acc> { yield (%v) } }
  %big = constant 1e3 : f64
  %neg = constant -0.0 : f16
  %cc = constant [0.5, -2.0e0] : c32
  %at = atomic_add.work_group.relaxed %5, %A[%2,%2] : f32
}
"""

MESSY_CANONICAL = """\
func @k(%A: memref<f32x4x8>, %G: group<memref<f32x4>x?>, %n: index) attributes{work_group_size=[16,1], subgroup_size=16} {
    %0 = constant 0x1.8p+0 : f32
    %1 = constant 2 : index
    %c = less_than %1, %n : bool
    axpby %0, %A, %0, %A
    %r = if %c -> (f32) {
        yield (%0)
    } else {
        %e = exp %0 : f32
        yield (%e)
    }
    foreach_tile (%i)=(%1),(%n) as (%t)<=(16) {
    }
    parallel {
        %m = cooperative_matrix_load %A[%1,%1] : coopmatrix<f32x16x8,matrix_acc>
        %x = cooperative_matrix_apply (%a,%b,%v)=%m -> coopmatrix<f32x16x8,matrix_acc> {
            yield (%v)
        }
    }
    %big = constant 0x1.f4p+9 : f64
    %neg = constant -0x0p+0 : f16
    %cc = constant [0x1p-1,-0x1p+1] : c32
    %at = atomic_add %0, %A[%1,%1] : f32
}
"""


def test_str_of_program_is_canonical():
    program = ttlc.parse(MESSY)
    assert str(program) == MESSY_CANONICAL
    assert str(ttlc.parse(MESSY_CANONICAL)) == MESSY_CANONICAL


def test_empty_and_comment_only_programs():
    for text in ("", "\n\n", "; nothing\n", "  \t\r\n"):
        assert str(ttlc.check(text)) == ""
    assert str(ttlc.parse("func @k() {\r\n}\r\n")) == "func @k() {\n}\n"


def _corpus():
    here = os.path.dirname(__file__)
    roots = [os.path.join(here, "..", "..", "..", "shared", "conformance"),
             os.path.join(here, "..", "lit")]
    files = []
    for root in roots:
        files += sorted(glob.glob(os.path.join(root, "**", "*.ir"), recursive=True))
    return files


def test_print_is_a_fixed_point():
    texts = [PROGRAM, MESSY, MESSY_CANONICAL]
    for path in _corpus():
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    fixed = 0
    for text in texts:
        try:
            program = ttlc.parse(text)
        except ttlc.CompileError:
            continue
        printed = str(program)
        assert str(ttlc.parse(printed)) == printed
        fixed += 1
    assert fixed >= 3


# ---- the verifier: invalid but parseable programs -------------------------------------------
INVALID = [
    ("gemm in an SPMD region",
     "func @k(%A: memref<f32x4x4>) {\n    parallel {\n        %one = constant 1.0 : f32\n"
     "        gemm %one, %A, %A, %one, %A\n    }\n}\n", {4}),
    ("cooperative matrix load in a collective region",
     "func @k(%A: memref<f32x16x16>) attributes{subgroup_size=16} {\n    %c0 = constant 0 : index\n"
     "    %m = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f32x16x16,matrix_acc>\n}\n", {3}),
    ("operand types differ",
     "func @k(%a: i32, %x: f32) {\n    %0 = add %a, %x : i32\n}\n", {2}),
    ("integer literal for a float",
     "func @k() {\n    %0 = constant 1 : f32\n}\n", {2}),
    ("if with results but without else",
     "func @k(%c: bool, %x: f32) {\n    %0 = if %c -> (f32) {\n        yield (%x)\n    }\n}\n",
     {2, 4}),
    ("yield of the wrong count",
     "func @k(%n: index, %x: f32) {\n    %c0 = constant 0 : index\n"
     "    %0 = for %i=%c0,%n init(%a=%x) -> (f32) {\n        yield (%a, %a)\n    }\n}\n",
     {3, 4}),
    ("atomic with a non-constant beta",
     "func @k(%A: memref<f32x4x4>, %b: f32) {\n    gemm.atomic %b, %A, %A, %b, %A\n}\n", {2}),
    ("gemm shapes do not match",
     "func @k(%A: memref<f32x4x8>, %C: memref<f32x4x4>) {\n    %one = constant 1.0 : f32\n"
     "    gemm %one, %A, %A, %one, %C\n}\n", {3}),
    ("load with the wrong number of indices",
     "func @k(%A: memref<f32x4x4>) {\n    %c0 = constant 0 : index\n"
     "    %0 = load %A[%c0] : f32\n}\n", {3}),
    ("alloca in global memory",
     "func @k() {\n    %0 = alloca : memref<f32x4>\n}\n", {2}),
    ("coopmatrix argument",
     "func @k(%m: coopmatrix<f32x16x16,matrix_acc>) {\n}\n", {1}),
]


@pytest.mark.needs_verifier
@pytest.mark.parametrize("what,text,lines", INVALID, ids=[w for w, _, _ in INVALID])
def test_verifier_rejects(what, text, lines):
    """Rejected, with a diagnostic on one of the lines where the error is."""
    ttlc.parse(text)  # parseable
    diags = expect_compile_error(text, check=True)
    assert any(d[0] in lines for d in diags), (what, diags)


@pytest.mark.needs_verifier
def test_verifier_rejects_a_built_program():
    from ttlc.types import F32, memref

    pb = ttlc.ProgramBuilder()
    with pb.function("k", [("A", memref(F32, 4, 4))]) as (b, A):
        with b.parallel():
            one = b.constant(1.0, F32)
            b.gemm(one, A, A, one, A)
    with pytest.raises(ttlc.CompileError):
        ttlc.check(pb.program)


def test_diagnostic_shows_the_right_line_after_form_feed_in_comment():
    # the lexer counts lines by \n only; the source line shown must agree with it
    text = "func @f() {\n  ; a\x0c b\n  %x = foo\n}"
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.check(text)
    assert "\n  %x = foo\n" in str(info.value)
