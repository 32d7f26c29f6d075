"""The command line contract (README, "Using ttlc"), run as ``python -m ttlc`` in subprocesses.

``ttlc check`` exits 0 for a valid program and 1 otherwise, with diagnostics in the
``FILE:LINE.COL-ENDCOL: error: MESSAGE`` form and never a Python traceback; ``ttlc opt``
prints the canonical text; the front end does not import NumPy or llvmlite.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CANONICAL = """\
func @scale(%alpha: f32, %A: group<memref<f32x16x?>x?> {alignment=64}) attributes{subgroup_size=16} {
    %gid = group_id.x : index
    %a = load %A[%gid] : memref<f32x16x?>
    %zero = constant 0x0p+0 : f32
    axpby.atomic %alpha, %a, %zero, %a
}
"""

INVALID = "func @k(%A: memref<f32x4>) {\n    %x = load %A[%i] : f32\n}\n"


def ttlc(*args, stdin: bytes = b"", cwd=None):
    """Run ``python -m ttlc``; returns (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "ttlc", *args], input=stdin, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in out + err, out + err
    return proc.returncode, out, err


@pytest.fixture
def files(tmp_path, valid_program):
    paths = {}
    for name, data in {
        "valid.ir": valid_program.encode(),
        "invalid.ir": INVALID.encode(),
        "empty.ir": b"",
        "garbage.ir": bytes(range(256)) * 4,
        "latin1.ir": "func @k() { ; caf\u00e9\n}\n".encode("latin-1"),
        "nul.ir": b"func @k() {\x00}\n",
        "truncated.ir": valid_program.encode()[:-20],
        "deep.ir": b"func @k() " + b"{ parallel " * 5000 + b"{}" + b" }" * 5000,
        "huge_int.ir": b"func @k() { %0 = constant " + b"9" * 10**6 + b" : i32 }",
    }.items():
        (tmp_path / name).write_bytes(data)
        paths[name] = str(tmp_path / name)
    (tmp_path / "a_directory.ir").mkdir()
    paths["a_directory.ir"] = str(tmp_path / "a_directory.ir")
    paths["missing.ir"] = str(tmp_path / "missing.ir")
    return paths


def test_check_valid_program(files):
    code, out, err = ttlc("check", files["valid.ir"])
    assert (code, out, err) == (0, "", "")


def test_check_invalid_program_prints_diagnostics(files):
    code, out, err = ttlc("check", files["invalid.ir"])
    assert code == 1 and out == ""
    path = files["invalid.ir"]
    assert err.splitlines()[:3] == [f"{path}:2.18-19: error: use of undefined value %i",
                                    "    %x = load %A[%i] : f32",
                                    "                 ~~"]


@pytest.mark.parametrize("name,expected", [
    ("empty.ir", 0), ("garbage.ir", 1), ("latin1.ir", 1), ("nul.ir", 1), ("truncated.ir", 1),
    ("deep.ir", 1), ("huge_int.ir", 1), ("a_directory.ir", 1), ("missing.ir", 1),
])
def test_nasty_inputs(files, name, expected):
    for command in ("check", "opt"):
        code, out, err = ttlc(command, files[name])
        assert code == expected, (command, name, err)
        if expected:
            assert err.strip() and out == ""


def test_error_messages_name_the_file(files):
    for name in ("missing.ir", "a_directory.ir", "nul.ir"):
        _, _, err = ttlc("check", files[name])
        assert files[name] in err


def test_stdin(valid_program):
    assert ttlc("check", "-", stdin=valid_program.encode()) == (0, "", "")
    code, _, err = ttlc("check", "-", stdin=INVALID.encode())
    assert code == 1 and err.startswith("<stdin>:2.18-19: error: use of undefined value %i")
    code, _, err = ttlc("check", "-", stdin=b"\xff\xfe garbage")
    assert code == 1 and "UTF-8" in err
    assert ttlc("check", "-", stdin=b"")[0] == 0


def test_opt_prints_canonical_text(files):
    code, out, err = ttlc("opt", files["valid.ir"])
    assert (code, out, err) == (0, CANONICAL, "")


def test_opt_roundtrip_through_stdin(files):
    _, first, _ = ttlc("opt", files["valid.ir"])
    code, second, err = ttlc("opt", "-", stdin=first.encode())
    assert (code, second, err) == (0, first, "")


def test_usage_errors_do_not_trace(files):
    for args in ([], ["frobnicate"], ["check"], ["check", files["valid.ir"], "extra"],
                 ["opt", "--no-such-flag", files["valid.ir"]]):
        code, _, err = ttlc(*args)
        assert code != 0 and err
    code, out, _ = ttlc("--version")
    assert code == 0 and out.startswith("ttlc ")


def test_closed_stdout_does_not_trace(tmp_path, files):
    """``ttlc opt big.ir | head -1``: a closed pipe ends the program quietly."""
    big = tmp_path / "big.ir"
    body = "".join(f"    %c{i} = constant {i} : i32\n" for i in range(5000))
    big.write_text("func @k() {\n" + body + "}\n")
    proc = subprocess.Popen([sys.executable, "-m", "ttlc", "opt", str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert "Traceback" not in err and "Error" not in err, err
    assert code in (0, 1, 120, -13)


def test_check_does_not_import_numpy_or_llvmlite(files):
    script = (
        "import sys, ttlc.cli\n"
        f"rc = ttlc.cli.main(['check', {files['valid.ir']!r}])\n"
        "assert rc == 0, rc\n"
        "heavy = sorted(m for m in ('numpy', 'llvmlite', 'ml_dtypes') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "print('light')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "light", proc.stderr
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ttlc", "check",
                           files["valid.ir"]], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "ttlc.cli" in imported
    assert not {m for m in imported if m.split(".")[0] in ("numpy", "llvmlite")}


def test_console_script_matches_module(files):
    script = os.path.join(os.path.dirname(sys.executable), "ttlc")
    if not os.access(script, os.X_OK):
        pytest.skip("the ttlc console script is not installed next to this interpreter")
    proc = subprocess.run([script, "opt", files["valid.ir"]], capture_output=True, text=True,
                          timeout=120)
    assert (proc.returncode, proc.stdout) == (0, CANONICAL)


#: a kernel with every argument shape `ttlc run` must build inputs for: an order-0 memref,
#: static non-packed strides and a group with a dynamic offset (language reference,
#: "Memref type" and "Group type").  It writes known values, so the printed sums are known.
RUN_KERNEL = """func @k(%s: memref<f32>, %A: memref<f32x4x2,strided<2,10>>,
         %G: group<memref<f32x4>x?, offset: ?>) {
    %v = constant 2.5 : f32
    store %v, %s[]
    %z = constant 0.0 : f32
    axpby %z, %A, %z, %A
    %c0 = constant 0 : index
    %g = load %G[%c0] : memref<f32x4>
    axpby %z, %g, %z, %g
}
"""


OUT_OF_BOUNDS = """func @oob(%a: memref<f32x4>) {
    %c = constant 4 : index
    %z = constant 0.0 : f32
    store %z, %a[%c]
}
"""


@pytest.mark.parametrize("target", ["interp", "cpu", "opencl"])
def test_run_is_checked_unless_told(tmp_path, target):
    """ttlc run finds what checked mode finds (here: a store past the end) by default;
    --unchecked turns the checks off (the kernel's behaviour is then undefined, so only
    that no KernelError is reported is asserted, via a kernel without faults)."""
    from interp_testing import opencl_problem

    if target == "opencl" and opencl_problem() is not None:
        pytest.skip(f"target opencl cannot run: {opencl_problem()}")
    path = tmp_path / "oob.ir"
    path.write_text(OUT_OF_BOUNDS)
    code, out, err = ttlc("run", "--target", target, "--dim", "4", str(path))
    assert code == 1 and "out of bounds" in err, (code, out, err)
    ok = tmp_path / "ok.ir"
    ok.write_text(OUT_OF_BOUNDS.replace("constant 4", "constant 3"))
    code, out, err = ttlc("run", "--target", target, "--unchecked", str(ok))
    assert code == 0, err


@pytest.mark.parametrize("grid", ["0", "4,0", "-1"])
def test_run_refuses_a_grid_size_below_one(tmp_path, grid):
    path = tmp_path / "oob.ir"
    path.write_text(OUT_OF_BOUNDS)
    code, out, err = ttlc("run", "--target", "interp", f"--grid={grid}", str(path))
    assert code == 2 and "grid takes 1 to 3 positive sizes" in err, (code, out, err)


BATCH = """func @double(%A: memref<f32x4x?>) {
    %k = group_id.x : index
    %a = subview %A[0:4,%k] : memref<f32x4>
    %c2 = constant 2.0 : f32
    %z = constant 0.0 : f32
    axpby %c2, %a, %z, %a
}
"""


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_run_covers_the_batch_and_times_warm_runs(tmp_path, target):
    """Without --grid, a kernel reading group_id.x runs one work-group per entry of the
    generated dynamic mode (--dim): every column is doubled, once (the timed runs use
    inputs of their own)."""
    import numpy as np

    from ttlc import parse
    from ttlc.runtime.inputs import generated_inputs

    path = tmp_path / "batch.ir"
    path.write_text(BATCH)
    code, out, err = ttlc("run", "--target", target, "--dim", "6", "--repeat", "3", str(path))
    assert code == 0, err
    (A,), _ = generated_inputs(parse(BATCH).functions[0], 6, 4, 0)
    assert "grid (6, 1, 1): first run" in out and "median of 3 more" in out, out
    assert f"%A: shape (4, 6), sum {2 * float(np.sum(A, dtype=np.float64)):.6g}" in out, out
    code, out, err = ttlc("run", "--target", target, "--dim", "6", "--grid", "2", str(path))
    assert "grid (2, 1, 1)" in out, out


def test_run_says_when_a_file_holds_no_kernel(tmp_path):
    path = tmp_path / "empty.ir"
    path.write_text("; nothing here\n")
    code, out, err = ttlc("run", str(path))
    assert code == 1 and err.strip() == f"ttlc: {path} holds no kernel", err


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_run_builds_inputs_for_every_argument_kind(tmp_path, target):
    path = tmp_path / "run.ir"
    path.write_text(RUN_KERNEL)
    code, out, err = ttlc("run", "--target", target, str(path))
    assert code == 0, err
    lines = [line.strip() for line in out.splitlines()]
    assert "%s: shape (), sum 2.5" in lines
    assert "%A: shape (4, 2), sum 0" in lines
    # four members (--group-size default), each a buffer of offset 2 + 4 elements; the
    # kernel zeroed member 0 after the offset
    assert "%G[0]: buffer of 6, sum from element 2 0" in lines
    assert sum(line.startswith("%G[") for line in lines) == 4
