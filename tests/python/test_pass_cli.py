"""``ttlc opt`` with passes: -p PASS / PIPELINE / -pNAME, unknown names, --print-after-all,
--verify-each, -f[no-]unsafe-fp-math, -d TARGET, dump passes, and errors raised by a pass.

Most tests call ``ttlc.cli.main([...])`` in-process (fast, and a pass registered with
``ttlc.passes.register`` is visible to it); a few run ``python -m ttlc`` to check the real
exit codes and that no traceback escapes.  Tests that need a pass whose module does not
import yet are skipped with the reason.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

import ttlc
from ttlc.cli import main
from ttlc.passes import (PASS_MODULES, PASSES, PIPELINES, PassContext, expand, get_pass, register,
                         run_passes)
from ttlc.target import get_target


def _missing(*names: str):
    for name in expand(names):
        try:
            get_pass(name)
        except Exception as e:
            return f"pass {name} is not available yet ({type(e).__name__}: {e})"
    return None


def needs(*names: str):
    why = _missing(*names)
    return pytest.mark.skipif(why is not None, reason=why or "")


FOLD = """func @fold(%A: memref<i32>) {
    %a = constant 2 : i32
    %b = constant 3 : i32
    %c = mul %a, %b : i32
    store %c, %A[]
}
"""

UNSAFE = """func @k(%x: f32, %A: memref<f32>) {
    %z = constant 0.0 : f32
    %y = add %x, %z : f32
    %w = mul %y, %z : f32
    store %w, %A[]
}
"""

DIV_ZERO = """func @k(%A: memref<i32>) {
    %a = constant 1 : i32
    %b = constant 0 : i32
    %c = div %a, %b : i32
    store %c, %A[]
}
"""

GEMM = """func @g(%A: memref<f64x64x32>, %B: memref<f64x32x48>, %C: memref<f64x64x48>) {
    %one = constant 1.0 : f64
    %zero = constant 0.0 : f64
    gemm %one, %A, %B, %zero, %C
}
"""

#: a valid program whose subgroup size Intel's PVC does not have
SUBGROUP_8 = """func @s(%A: memref<f32x32>) attributes{subgroup_size=8} {
    %one = constant 1.0 : f32
    axpby %one, %A, %one, %A
}
"""


@pytest.fixture
def write(tmp_path):
    def write(text: str, name: str = "prog.ir") -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write


def opt(capsys, *argv):
    """``ttlc opt ARGV`` in-process: (exit code, stdout, stderr)."""
    try:
        code = main(["opt", *argv])
    except SystemExit as e:  # argparse usage errors
        code = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    assert "internal error" not in err, err
    return code, out, err


def ttlc_process(*argv):
    proc = subprocess.run([sys.executable, "-m", "ttlc", *argv], capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def in_process(text: str, passes, target="interp", unsafe=False) -> str:
    program = ttlc.check(text)
    run_passes(program, list(passes), PassContext(target=get_target(target),
                                                  unsafe_fp_math=unsafe))
    return str(program)


def canonical(text: str) -> str:
    return str(ttlc.parse(text))


# ---- -p PASS, -p PIPELINE, -pNAME ---------------------------------------------------------
@needs("constant-propagation")
def test_single_pass(capsys, write):
    code, out, err = opt(capsys, "-p", "constant-propagation", write(FOLD))
    assert (code, err) == (0, "")
    assert "constant 6 : i32" in out
    assert out == in_process(FOLD, ["constant-propagation"])
    ttlc.check(out)


@needs("constant-propagation", "dead-code-elimination")
def test_passes_run_in_the_order_given(capsys, write):
    code, out, _ = opt(capsys, "-p", "constant-propagation", "-p", "dead-code-elimination",
                       write(FOLD))
    assert code == 0
    assert out == in_process(FOLD, ["constant-propagation", "dead-code-elimination"])
    assert " mul " not in out  # folded, then the dead mul is gone


@needs("lower")
@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_pipeline_name(capsys, write, pipeline):
    code, out, err = opt(capsys, "-p", pipeline, write(GEMM))
    assert (code, err) == (0, "")
    assert out == in_process(GEMM, [pipeline])
    assert "gemm" not in out  # lowered
    assert out == in_process(GEMM, PIPELINES[pipeline])  # a pipeline is its list of passes
    ttlc.check(out)


@needs("constant-propagation")
def test_attached_pass_name_form(capsys, write):
    path = write(FOLD)
    spaced = opt(capsys, "-p", "constant-propagation", path)
    attached = opt(capsys, "-pconstant-propagation", path)
    long_form = opt(capsys, "--pass=constant-propagation", path)
    assert spaced == attached == long_form
    assert spaced[0] == 0 and "constant 6 : i32" in spaced[1]


@needs("constant-propagation")
def test_attached_form_as_a_process(write):
    path = write(FOLD)
    code, out, err = ttlc_process("opt", "-pconstant-propagation", path)
    assert (code, err) == (0, "")
    assert out == in_process(FOLD, ["constant-propagation"])


def test_no_pass_prints_canonical_text(capsys, write):
    code, out, err = opt(capsys, write(FOLD))
    assert (code, out, err) == (0, canonical(FOLD), "")


# ---- unknown names ---------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["-p", "no-such-pass"], ["-pno-such-pass"],
                                  ["-p", "check-ir", "-p", "no-such-pass"]])
def test_unknown_pass_exits_2_and_names_the_known_ones(capsys, write, argv):
    code, out, err = opt(capsys, *argv, write(FOLD))
    assert code == 2 and out == ""
    assert "no-such-pass" in err
    for name in list(PASS_MODULES) + list(PIPELINES):
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", err), (name, err)


def test_unknown_pass_is_reported_before_reading_the_file(capsys, tmp_path):
    code, out, err = opt(capsys, "-p", "no-such-pass", str(tmp_path / "missing.ir"))
    assert code == 2 and "unknown pass 'no-such-pass'" in err


def test_unknown_pass_as_a_process(write):
    code, out, err = ttlc_process("opt", "-p", "no-such-pass", write(FOLD))
    assert code == 2 and out == "" and "unknown pass" in err and "constant-propagation" in err


def test_unknown_target_exits_2(capsys, write):
    code, out, err = opt(capsys, "-d", "no-such-target", write(FOLD))
    assert code == 2 and out == ""
    for name in ("interp", "cpu", "pvc", "nvidia"):
        assert name in err


def test_unknown_f_option_exits_2(capsys, write):
    code, out, err = opt(capsys, "-fno-such-option", write(FOLD))
    assert code == 2 and out == "" and "unsafe-fp-math" in err


# ---- --print-after-all -----------------------------------------------------------------
SECTION = re.compile(r"^; -- IR after (\S+) --\n", re.M)


def sections(err: str):
    """[(pass name, IR text)] of --print-after-all output."""
    heads = list(SECTION.finditer(err))
    return [(m.group(1), err[m.end():heads[k + 1].start() if k + 1 < len(heads) else len(err)])
            for k, m in enumerate(heads)]


@needs("lower")
def test_print_after_all_prints_one_section_per_pass(capsys, write):
    code, out, err = opt(capsys, "--print-after-all", "-p", "lower", write(GEMM))
    assert code == 0
    got = sections(err)
    assert [name for name, _ in got] == expand(["lower"])
    assert err.startswith("; -- IR after ")  # nothing else on stderr
    for name, text in got:
        assert text == canonical(text), f"section after {name} is not a canonical program"
        ttlc.check(text)
    assert got[-1][1] == out  # the last section is the final program
    # each section is the program after that prefix of the pipeline
    passes = expand(["lower"])
    for k in (0, 3, 5):
        assert got[k][1] == in_process(GEMM, passes[:k + 1]), passes[k]


@needs("constant-propagation", "dead-code-elimination")
def test_print_after_all_with_several_passes(capsys, write):
    code, out, err = opt(capsys, "--print-after-all", "-p", "constant-propagation",
                         "-p", "check-ir", "-pdead-code-elimination", write(FOLD))
    assert code == 0
    got = sections(err)
    assert [n for n, _ in got] == ["constant-propagation", "check-ir", "dead-code-elimination"]
    assert got[0][1] == got[1][1] == in_process(FOLD, ["constant-propagation"])
    assert got[2][1] == out


def test_print_after_all_without_passes_prints_nothing(capsys, write):
    code, out, err = opt(capsys, "--print-after-all", write(FOLD))
    assert (code, out, err) == (0, canonical(FOLD), "")


# ---- --verify-each ---------------------------------------------------------------------
@pytest.fixture
def broken_pass():
    """A pass that erases the first instruction of every function (its result stays used)."""
    from ttlc.ir.rewrite import erase

    @register("test-break-ir")
    def break_ir(program, ctx):
        """Erase the first instruction of each function (test only)."""
        for func in program.functions:
            erase(func.body, func.body.instructions[0])
    yield "test-break-ir"
    PASSES.pop("test-break-ir", None)


def test_verify_each_catches_a_broken_pass_and_names_it(capsys, write, broken_pass):
    path = write(FOLD)
    code, out, err = opt(capsys, "--verify-each", "-p", broken_pass, path)
    assert code == 1 and out == ""
    assert f"(IR invalid after pass {broken_pass})" in err
    assert re.search(rf"^{re.escape(path)}:\d+\.\d+-\d+: error: ", err, re.M), err
    assert "%a" in err  # the value the pass left undefined


def test_without_verify_each_the_broken_ir_goes_through(capsys, write, broken_pass):
    code, out, err = opt(capsys, "-p", broken_pass, write(FOLD))
    assert code == 0 and err == ""
    assert "%a = constant" not in out


def test_verify_each_stops_at_the_broken_pass(capsys, write, broken_pass):
    """Passes after the broken one do not run, and the later check-ir would not name it."""
    code, out, err = opt(capsys, "--verify-each", "--print-after-all", "-p", "check-ir",
                         "-p", broken_pass, "-p", "check-ir", write(FOLD))
    assert code == 1
    assert [n for n, _ in sections(err)] == ["check-ir"]
    assert f"after pass {broken_pass}" in err


@pytest.mark.parametrize("value,caught", [("1", True), ("yes", True), ("0", False),
                                          ("off", False), ("", False)])
def test_verify_each_variable_has_back_end_lowerings_verified(monkeypatch, broken_pass, value,
                                                              caught):
    """TTLC_VERIFY_EACH (docs/api.md): ``lower_copy``, the lowering every back end runs,
    verifies the IR after each pass and names the pass that broke it; unset, 0, off or
    empty, the broken IR comes out of the lowering (the back end would meet it)."""
    from ttlc.passes import VERIFY_EACH, lower_copy

    monkeypatch.setenv(VERIFY_EACH, value)
    program = ttlc.check(FOLD)
    if not caught:
        lowered = lower_copy(program, [broken_pass], get_target("cpu"))
        assert "%a = constant" not in str(lowered)
        return
    with pytest.raises(ttlc.CompileError) as e:
        lower_copy(program, [broken_pass], get_target("cpu"))
    assert f"(IR invalid after pass {broken_pass})" in str(e.value)


def test_a_later_check_ir_catches_it_without_naming_the_pass(capsys, write, broken_pass):
    code, out, err = opt(capsys, "-p", broken_pass, "-p", "check-ir", write(FOLD))
    assert code == 1 and "used where it is not defined" in err
    assert broken_pass not in err


@needs("lower")
def test_verify_each_accepts_the_pipelines(capsys, write):
    for pipeline in PIPELINES:
        code, out, err = opt(capsys, "--verify-each", "-p", pipeline, write(GEMM))
        assert (code, err) == (0, ""), pipeline
        assert out == in_process(GEMM, [pipeline])


# ---- options reach the passes ------------------------------------------------------------
@pytest.fixture
def spy_pass():
    seen = []

    @register("test-spy")
    def spy(program, ctx):
        """Record the pass context (test only)."""
        seen.append((ctx.target.name, ctx.unsafe_fp_math, ctx.verify_each,
                     ctx.print_after_all is not None))
    yield seen
    PASSES.pop("test-spy", None)


@pytest.mark.parametrize("argv, expected", [
    ([], ("interp", False, False, False)),
    (["-funsafe-fp-math"], ("interp", True, False, False)),
    (["-funsafe-fp-math", "-fno-unsafe-fp-math"], ("interp", False, False, False)),
    (["-d", "pvc"], ("pvc", False, False, False)),
    (["--device=nvidia", "--verify-each"], ("nvidia", False, True, False)),
    (["-dcpu", "--print-after-all"], ("cpu", False, False, True)),
])
def test_options_reach_the_pass_context(capsys, write, spy_pass, argv, expected):
    code, _, _ = opt(capsys, *argv, "-p", "test-spy", write(FOLD))
    assert code == 0
    assert spy_pass == [expected]


@needs("constant-propagation", "dead-code-elimination")
def test_unsafe_fp_math_allows_inexact_folds(capsys, write):
    path = write(UNSAFE)
    passes = ["-p", "constant-propagation", "-p", "dead-code-elimination"]
    code, safe, _ = opt(capsys, *passes, path)
    assert code == 0
    # x + 0 is not x for x = -0, and y * 0 is not 0 for y = inf or NaN: kept by default
    assert " add " in safe and " mul " in safe
    assert opt(capsys, "-fno-unsafe-fp-math", *passes, path)[1] == safe
    code, unsafe, _ = opt(capsys, "-funsafe-fp-math", *passes, path)
    assert code == 0
    assert " add " not in unsafe and " mul " not in unsafe
    assert unsafe == in_process(UNSAFE, ["constant-propagation", "dead-code-elimination"],
                                unsafe=True)
    ttlc.check(unsafe)


@needs("work-group-size")
def test_device_chooses_the_target_description(capsys, write):
    path = write(GEMM)
    sizes = {}
    for device in ("interp", "cpu", "pvc", "nvidia"):
        code, out, err = opt(capsys, "-d", device, "-p", "work-group-size", path)
        assert (code, err) == (0, ""), device
        assert out == in_process(GEMM, ["work-group-size"], target=device)
        sizes[device] = ttlc.parse(out).functions[0].subgroup_size
    default = opt(capsys, "-p", "work-group-size", path)[1]
    assert default == in_process(GEMM, ["work-group-size"], target="interp")
    # f64 on a SIMT target: the smallest subgroup; on the CPU: 8 f64 lanes per zmm register
    assert sizes["pvc"] == 16 and sizes["nvidia"] == 32 and sizes["cpu"] == 8


@needs("work-group-size")
def test_device_pvc_rejects_a_subgroup_size_it_does_not_have(capsys, write):
    path = write(SUBGROUP_8)
    assert opt(capsys, "-p", "work-group-size", path)[0] == 0
    code, out, err = opt(capsys, "-d", "pvc", "-p", "work-group-size", path)
    assert code == 1 and out == ""
    assert "pvc" in err and "subgroup" in err
    assert re.search(rf"^{re.escape(path)}:1\.\d+-\d+: error: ", err, re.M), err


# ---- dump passes ---------------------------------------------------------------------------
@needs("constant-propagation")
def test_dump_ir_prints_before_the_program(capsys, write):
    code, out, err = opt(capsys, "-p", "dump-ir", "-p", "constant-propagation", write(FOLD))
    assert (code, err) == (0, "")
    folded = in_process(FOLD, ["constant-propagation"])
    assert out == canonical(FOLD) + folded  # the dump shows the IR before the folding
    code, out, _ = opt(capsys, "-p", "constant-propagation", "-p", "dump-ir", write(FOLD))
    assert out == folded + folded


@needs("dump-def-use", "dump-gcd")
def test_dump_def_use_and_gcd_print_before_the_program(capsys, write):
    code, out, err = opt(capsys, "-p", "dump-gcd", "-p", "dump-def-use", write(FOLD))
    assert (code, err) == (0, "")
    program = canonical(FOLD)
    assert out.endswith(program)
    dumps = out[:-len(program)]
    gcd, def_use = dumps.find("GCD in @fold"), dumps.find("Def-use in @fold")
    assert 0 == gcd < def_use, dumps  # in the order of the passes, before the program
    assert "def %c" in dumps and "> store %c, %A[]" in dumps


@needs("dump-gcd")
def test_dump_output_is_not_on_stderr(capsys, write):
    code, out, err = opt(capsys, "--print-after-all", "-p", "dump-gcd", write(FOLD))
    assert code == 0
    assert "GCD in @fold" in out and "GCD in @fold" not in err
    assert [n for n, _ in sections(err)] == ["dump-gcd"]


# ---- errors from passes -------------------------------------------------------------------
@needs("constant-propagation")
def test_division_by_zero_in_a_pass_exits_1_with_the_diagnostic(capsys, write):
    path = write(DIV_ZERO)
    code, out, err = opt(capsys, "-p", "constant-propagation", path)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert re.fullmatch(rf"{re.escape(path)}:4\.10-25: error: division by zero.*", lines[0],
                        re.I), err
    assert lines[1] == "    %c = div %a, %b : i32"
    assert lines[2] == "         " + "~" * 16


@needs("constant-propagation")
def test_division_by_zero_as_a_process(write):
    path = write(DIV_ZERO)
    code, out, err = ttlc_process("opt", "-p", "constant-propagation", path)
    assert code == 1 and out == ""
    assert "division by zero" in err.lower() and f"{path}:4.10-25: error:" in err


@needs("constant-propagation")
def test_dumps_before_a_failing_pass_are_still_printed(capsys, write):
    code, out, err = opt(capsys, "-p", "dump-ir", "-p", "constant-propagation", write(DIV_ZERO))
    assert code == 1
    assert out == canonical(DIV_ZERO)
    assert "division by zero" in err.lower()


def test_invalid_input_exits_1_before_any_pass(capsys, write, spy_pass):
    invalid = "func @k() {\n    %x = add %y, %y : i32\n}\n"
    code, out, err = opt(capsys, "-p", "test-spy", write(invalid))
    assert code == 1 and out == "" and "error:" in err
    assert spy_pass == []
