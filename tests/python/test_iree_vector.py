"""Target iree-vector (docs/iree-vector.md), validated by IREE's own iree-opt (PyPI
iree-base-compiler, the ``iree`` extra): the export of every example and of generated
programs parses and verifies; a layout whose tile products do not match the vector
shape is rejected by iree-opt and refused by ttlc's own check.  The export's text is
checked by hand in tests/lit/iree/export.ir.

``TTLC_IREE_PROGRAMS`` sets how many generated programs are exported (50 in make
test, more in make fuzz).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ttlc
from ttlc.backends import get_backend
from ttlc.ir.layout import MatrixLayout, NestedLayout
from ttlc.testing.generator import generate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))
PROGRAMS = int(os.environ.get("TTLC_IREE_PROGRAMS", "50"))
BACKEND = get_backend("iree-vector")


def _iree_opt():
    for candidate in (Path(sys.executable).parent / "iree-opt", shutil.which("iree-opt")):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


IREE_OPT = _iree_opt()
needs_iree_opt = pytest.mark.skipif(
    IREE_OPT is None, reason="iree-opt is not installed (pip install -e '.[iree]', which "
                             ".ci/run does)")


def iree_opt(text: str):
    """(exit code, stderr) of iree-opt over text; modules separated by '// -----' are
    checked one by one (--split-input-file)."""
    p = subprocess.run([IREE_OPT, "--split-input-file", "-", "-o", os.devnull], input=text,
                       text=True, capture_output=True, timeout=300)
    return p.returncode, p.stderr


def export(text: str, filename: str = "<input>") -> str:
    return BACKEND.emit(_checked(text, filename))


def _checked(text: str, filename: str):
    program = ttlc.parse(text, filename)
    ttlc.check(program)
    return program


@needs_iree_opt
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_verify(path):
    out = export(path.read_text(), str(path))
    code, err = iree_opt(out)
    assert code == 0, err


@needs_iree_opt
def test_generated_programs_verify():
    """Generated programs, half of them with coopmatrix instructions, exported and
    checked by iree-opt in one run."""
    modules, with_layouts = [], 0
    for seed in range(PROGRAMS):
        out = export(generate(seed, coop=True if seed % 2 == 0 else None).text, f"gen:{seed}")
        with_layouts += "iree_vector_ext.to_layout" in out
        modules.append(out)
    code, err = iree_opt("\n// -----\n".join(modules))
    assert code == 0, err
    assert with_layouts >= PROGRAMS // 2 - 1  # the sample does exercise layouts


WRONG_LAYOUT = NestedLayout((1, 1), (1, 3), (1, 1), (4, 4), (1, 1), (0, 0), (1, 4))


@needs_iree_opt
def test_a_wrong_layout_is_rejected_by_iree_opt_and_by_ttlc():
    """Tile products 4 x 12 on a vector<4x16xf32>: IREE refuses, so does check_shape."""
    text = ("func.func @f(%a: vector<4x16xf32>) {\n"
            f"  %0 = iree_vector_ext.to_layout %a to layout({WRONG_LAYOUT.to_iree()}) : "
            "vector<4x16xf32>\n  return\n}\n")
    code, err = iree_opt(text)
    assert code != 0 and "does not match the layout" in err
    with pytest.raises(ValueError, match="does not distribute a vector of shape 4x16"):
        WRONG_LAYOUT.check_shape((4, 16))
    good = WRONG_LAYOUT.__class__.from_iree(WRONG_LAYOUT.to_iree().replace("[1, 3]", "[1, 4]"))
    assert iree_opt(text.replace(WRONG_LAYOUT.to_iree(), good.to_iree()))[0] == 0


PADDED = """func @k(%x: f32) attributes {subgroup_size=16} {
    parallel {
        %m = cooperative_matrix_construct %x : coopmatrix<f32x4x15,matrix_acc>
    }
}
"""


def test_the_export_refuses_a_layout_that_does_not_fit(monkeypatch):
    """A target whose layout does not distribute the padded matrix: CompileError naming
    the instruction and the target, no output."""
    target = BACKEND.target()
    monkeypatch.setattr(type(target), "storage_layout",
                        lambda self, t, S: MatrixLayout(t.rows, t.cols, S, WRONG_LAYOUT))
    with pytest.raises(ttlc.CompileError) as e:
        export(PADDED)
    message = e.value.format()
    assert "iree-vector: cooperative_matrix_construct" in message and "target pvc" in message
    assert "does not distribute a vector of shape 4x15" in message


COMPLEX = """func @k(%A: memref<c32x16x16>) attributes {subgroup_size=16} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<c32x16x16,matrix_acc>
        %b = add %a, %a : coopmatrix<c32x16x16,matrix_acc>
    }
}
"""


def test_complex_matrices_enter_as_arguments_with_a_mode_for_the_parts():
    out = export(COMPLEX)
    assert "func.func @k(%arg0: vector<16x16x2xf32>, %arg1: vector<16x16x2xf32>)" in out
    assert "element_tile = [1, 1, 2]" in out and "arith.addf" not in out
    if IREE_OPT:
        code, err = iree_opt(out)
        assert code == 0, err


def test_cli(tmp_path):
    src, out = tmp_path / "k.ir", tmp_path / "k.mlir"
    src.write_text(PADDED)
    p = subprocess.run([sys.executable, "-m", "ttlc", "compile", "--target", "iree-vector",
                        str(src), "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "vector<4x16xf32>" in out.read_text()


TYPES = ["i8", "i16", "i32", "i64", "index", "f16", "bf16", "f32", "f64"]
INTEGER_ONLY = {"shl", "shr", "and", "or", "xor", "not"}


def every_translation(ty: str) -> str:
    """A kernel using every translated instruction on ty: a padded shape (4 x 15 on 16
    lanes) and a whole one, casts to every real type and to matrix_a, reductions."""
    lines = []
    for shape in ("4x15", "16x16"):
        t, n = f"coopmatrix<{ty}x{shape},matrix_acc>", shape.replace("x", "_")
        lines += [f"%m{n} = cooperative_matrix_construct %x : {t}",
                  f"%s{n} = cooperative_matrix_scale %x, %m{n} : {t}"]
        lines += [f"%{op}{n} = {op} %m{n}, %s{n} : {t}" for op in
                  ("add", "sub", "mul", "div", "rem", "max", "min", "shl", "shr", "and", "or",
                   "xor") if ty.startswith("i") or op not in INTEGER_ONLY]
        lines += [f"%{op}{n} = {op} %m{n} : {t}" for op in ("abs", "neg", "not")
                  if ty.startswith("i") or op not in INTEGER_ONLY]
        lines += [f"%c{to}{n} = cast %m{n} : coopmatrix<{to}x{shape},matrix_acc>" for to in TYPES]
        lines.append(f"%a{n} = cast %m{n} : coopmatrix<{ty}x{shape},matrix_a>")
    for red in ("add", "max", "min"):
        lines += [f"%r{red} = cooperative_matrix_reduce_{red}.row %m16_16 : "
                  f"coopmatrix<{ty}x16x1,matrix_acc>",
                  f"%q{red} = cooperative_matrix_reduce_{red}.column %m16_16 : "
                  f"coopmatrix<{ty}x1x16,matrix_acc>"]
    body = "\n".join("        " + x for x in lines)
    return (f"func @k(%x: {ty}) attributes {{subgroup_size=16}} {{\n    parallel {{\n{body}\n"
            "    }\n}\n")


@needs_iree_opt
def test_every_translation_verifies():
    """Generated programs use few of the translations; this kernel, per real type, uses
    them all (padding, every cast, integer and float ops, both reductions)."""
    modules = [export(every_translation(ty), f"<{ty}>") for ty in TYPES]
    assert all("vector.insert_strided_slice" in m and "vector.multi_reduction" in m
               for m in modules)
    code, err = iree_opt("\n// -----\n".join(modules))
    assert code == 0, err
