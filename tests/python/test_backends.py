"""The back-end registry (``ttlc.backends``), the execution configuration
(``ttlc.target.ExecConfig``) and the import rules they stand on: the runtime and the CPU
back end do not import the reference interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import ttlc
from ttlc.backends import BACKENDS, BackendUnavailable, get_backend
from ttlc.cli import main
from ttlc.target import TARGETS, ExecConfig, get_target

SCALE = """func @scale(%x: memref<f32x?>) {
    %c0 = constant 0 : index
    %n = size %x[0] : index
    foreach (%i) = (%c0), (%n) {
        %v = load %x[%i] : f32
        %w = mul %v, %v : f32
        store %w, %x[%i]
    }
}
"""


#: how error messages list the registered back ends
REGISTERED = ", ".join(BACKENDS)


# ---- the registry ---------------------------------------------------------------------------
def test_registry_lists_the_back_ends():
    assert {"cpu", "interp", "spirv", "iree-vector", "cuda-tile", "xevm"} <= set(BACKENDS)
    cpu, interp = BACKENDS["cpu"], BACKENDS["interp"]
    assert [(s.name, s.binary) for s in cpu.stages] == [
        ("lowered", False), ("llvm", False), ("llvm-opt", False), ("object", True)]
    assert cpu.stage().name == "object"  # the default: the last stage
    assert interp.stages == ()
    assert cpu.executes and interp.executes
    for b in BACKENDS.values():
        assert b.machine in TARGETS and b.target() is get_target(b.machine)
        assert b.description


def test_back_ends_load_on_first_use_only():
    script = ("import sys, ttlc, ttlc.backends, ttlc.cli\n"
              "ttlc.cli.build_parser()\n"
              "print(sorted(m for m in sys.modules if m.startswith(('ttlc.interp', "
              "'ttlc.backends.cpu', 'llvmlite', 'numpy'))))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_registered_back_end_provides_what_its_entry_promises(name):
    b = BACKENDS[name]
    if b.name == "cpu":
        pytest.importorskip("llvmlite")
    try:
        module = b.load()
    except BackendUnavailable as e:  # an optional package this machine lacks
        pytest.skip(str(e))
    assert callable(getattr(module, "compile", None)) == b.executes
    assert callable(getattr(module, "emit", None)) == bool(b.stages)


@pytest.mark.parametrize("target, package, module", [("opencl", "pyopencl", "pyopencl"),
                                                     ("cuda", "cuda-python", "cuda.bindings")])
def test_a_missing_package_is_a_compile_error_naming_it(monkeypatch, target, package, module):
    monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    folder = BACKENDS[target].module.rsplit(".", 1)[0]  # ttlc.backends.<folder>
    for name in [n for n in sys.modules if n.startswith(folder)]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ttlc.CompileError, match=f"target {target} needs {package}"):
        ttlc.compile(SCALE, target=target)


def test_unknown_target_lists_the_registered_ones():
    with pytest.raises(ValueError, match=rf"unknown target 'nope' \(registered: {REGISTERED}\)"):
        ttlc.compile(SCALE, target="nope")
    with pytest.raises(ValueError, match="'llvm-opt' is a stage of target cpu"):
        get_backend("llvm-opt")
    with pytest.raises(ValueError, match=r"unknown stage 'asm' of target cpu \(stages: lowered, "
                                         r"llvm, llvm-opt, object\)"):
        BACKENDS["cpu"].stage("asm")
    with pytest.raises(ValueError, match="target interp has no stages"):
        BACKENDS["interp"].stage()


@pytest.mark.parametrize("args, message", [
    (["compile", "--target", "nope"], f"ttlc: unknown target 'nope' (registered: {REGISTERED})"),
    (["compile", "--target", "llvm"], f"ttlc: unknown target 'llvm' (registered: {REGISTERED}); "
                                      "'llvm' is a stage of target cpu"),
    (["compile", "--target", "cpu", "--stage", "asm"],
     "ttlc: unknown stage 'asm' of target cpu (stages: lowered, llvm, llvm-opt, object)"),
    (["compile", "--target", "interp"],
     "ttlc: target interp has no stages to write (it runs kernels: ttlc run --target interp)"),
    (["run", "--target", "nope"], f"ttlc: unknown target 'nope' (registered: {REGISTERED})"),
])
def test_cli_unknown_target_or_stage(tmp_path, capsys, args, message):
    f = tmp_path / "k.ttl"
    f.write_text(SCALE)
    extra = ["-o", str(tmp_path / "out")] if args[0] == "compile" else []
    assert main([*args, str(f), *extra]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err.strip()) == ("", message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stage", [s.name for s in BACKENDS["cpu"].stages] + [None])
def test_cli_writes_every_stage_of_target_cpu(tmp_path, stage):
    llvmlite = pytest.importorskip("llvmlite.binding")
    f, out = tmp_path / "k.ttl", tmp_path / "out"
    f.write_text(SCALE)
    args = ["compile", "--target", "cpu", str(f), "-o", str(out)]
    assert main(args + (["--stage", stage] if stage else [])) == 0
    data = out.read_bytes()
    if stage == "lowered":
        lowered = ttlc.check(data.decode())  # text that verifies
        assert [f.name for f in lowered.functions] == ["scale"]
        assert lowered.functions[0].work_group_size == (16, 1)  # written by the back end
        assert "foreach" not in data.decode()  # lowered to per-work-item loops
    elif stage in ("llvm", "llvm-opt"):
        text = data.decode()
        llvmlite.parse_assembly(text).verify()
        assert "define" in text and "ttlc.scale" in text  # the kernel's entry point
    else:  # object, the default
        assert data[:4] == b"\x7fELF"


def test_lowered_stage_is_what_target_cpu_runs():
    """The sizes in the lowered stage are those the kernels run with (``ExecConfig``)."""
    pytest.importorskip("llvmlite")
    text = BACKENDS["cpu"].emit(ttlc.check(SCALE), "lowered")
    module = ttlc.compile(SCALE, target="cpu")
    assert module.infos["scale"].config == ExecConfig.of(ttlc.check(text).functions[0],
                                                         get_target("cpu"))


# ---- the execution configuration --------------------------------------------------------------
def _gemm(t: str, m: int, n: int, k: int, attrs: str = "") -> str:
    return (f"func @k(%A: memref<{t}x{m}x{k}>, %B: memref<{t}x{k}x{n}>, %C: memref<{t}x{m}x{n}>)"
            f"{attrs} {{\n    %one = constant 1.0 : {t}\n    gemm %one, %A, %B, %one, %C\n}}\n")


#: name -> (function, (subgroup size, work-group size) on interp, the same on cpu), as the
#: interpreter's Config.of and target cpu's lowering chose them before ExecConfig
SIZES = {
    "none": ("func @k() {\n}\n", (16, (16, 1)), (16, (16, 1))),
    "sgs8": ("func @k() attributes{subgroup_size=8} {\n}\n", (8, (8, 1)), (8, (8, 1))),
    "sgs32": ("func @k() attributes{subgroup_size=32} {\n}\n", (32, (32, 1)), (32, (32, 1))),
    "wgs64": ("func @k() attributes{work_group_size=[64,2]} {\n}\n", (16, (64, 2)),
              (16, (64, 2))),
    # both pick a subgroup size dividing 24 (spec, "work_group_size": the first mode is a
    # multiple of the subgroup size)
    "wgs24": ("func @k() attributes{work_group_size=[24,1]} {\n}\n", (8, (24, 1)),
              (8, (24, 1))),
    "wgs8": ("func @k() attributes{work_group_size=[8,1]} {\n}\n", (8, (8, 1)), (8, (8, 1))),
    "both": ("func @k() attributes{work_group_size=[64,4], subgroup_size=32} {\n}\n",
             (32, (64, 4)), (32, (64, 4))),
    "f32gemm": (_gemm("f32", 128, 37, 64), (16, (16, 1)), (16, (16, 1))),
    # cpu: at most one register of f64 lanes (8): one subgroup of 8; with subgroups of 4,
    # two, 4x8 and 8x4 blocks equally good (ratio 32/12), the fewer rows taken
    "f64gemm": (_gemm("f64", 128, 128, 128), (16, (16, 1)), (8, (8, 1))),
    "f64gemm_sgs4": (_gemm("f64", 128, 128, 128, " attributes{subgroup_size=4}"),
                     (4, (4, 1)), (4, (4, 2))),
    # cpu: gemm of a few rows in the fewest lanes of at least one ymm register that hold
    # them (config.narrow_lanes); more than half a register keeps a register, and so does
    # one row unless K is between half the narrow lanes and half a register's (f32 5-7,
    # f64 3: dot products of one ymm)
    "f32gemm_3rows": (_gemm("f32", 3, 40, 30), (16, (16, 1)), (8, (8, 1))),
    "f32gemm_2rows": (_gemm("f32", 2, 85, 12), (16, (16, 1)), (8, (8, 1))),
    "f64gemm_3rows": (_gemm("f64", 3, 40, 30), (16, (16, 1)), (4, (4, 1))),
    "f64gemm_5rows": (_gemm("f64", 5, 40, 30), (16, (16, 1)), (8, (8, 1))),
    "f32gemm_9rows": (_gemm("f32", 9, 9, 56), (16, (16, 1)), (16, (16, 1))),
    "f32gemm_1row": (_gemm("f32", 1, 85, 12), (16, (16, 1)), (16, (16, 1))),
    "f32gemm_1row_k7": (_gemm("f32", 1, 40, 7), (16, (16, 1)), (8, (8, 1))),
    "f32gemm_1row_k4": (_gemm("f32", 1, 40, 4), (16, (16, 1)), (16, (16, 1))),
    "f64gemm_1row_k3": (_gemm("f64", 1, 40, 3), (16, (16, 1)), (4, (4, 1))),
    "f64gemm_1row_k2": (_gemm("f64", 1, 40, 2), (16, (16, 1)), (8, (8, 1))),
    "foreach": ("func @k(%A: memref<f32x100>) {\n    %c0 = constant 0 : index\n"
                "    %c100 = constant 100 : index\n    foreach (%i)=(%c0),(%c100) {\n    }\n}\n",
                (16, (16, 1)), (16, (16, 1))),
    # tiles of 8 rows need subgroups of at most 8 on cpu
    "tiles8": ("func @k(%A: memref<f32x64x64>) {\n    %c0 = constant 0 : index\n"
               "    %c64 = constant 64 : index\n"
               "    foreach_tile (%i,%j)=(%c0,%c0),(%c64,%c64) as (%m,%n)<=(8,8) {\n    }\n}\n",
               (16, (16, 1)), (8, (16, 1))),
}


def test_narrow_lanes_only_for_gemm_alone_in_part_of_a_register():
    """config.narrow_lanes: not where the function has SPMD code of its own or other
    collective instructions, nor where one ymm register is the whole vector (AVX2)."""
    import dataclasses

    from ttlc.target.config import narrow_lanes

    cpu = get_target("cpu")
    avx2 = dataclasses.replace(cpu, vector_bytes=32, register_budget=16 * 32,
                               broadcast_operands=False)
    gemm = ttlc.check(_gemm("f32", 3, 40, 30)).functions[0]
    assert (narrow_lanes(gemm, cpu), narrow_lanes(gemm, avx2)) == (8, None)
    with_foreach = _gemm("f32", 3, 40, 30).replace(
        "    gemm", "    %c0 = constant 0 : index\n    foreach (%i)=(%c0),(%c0) {\n    }\n    gemm")
    with_gemv = _gemm("f32", 3, 40, 30).replace(
        "%C: memref<f32x3x40>)", "%C: memref<f32x3x40>, %x: memref<f32x30>, %y: memref<f32x3>)"
    ).replace("    gemm", "    gemv %one, %A, %x, %one, %y\n    gemm")
    for text in (with_foreach, with_gemv):
        assert narrow_lanes(ttlc.check(text).functions[0], cpu) is None


def _tiles(builtin: str) -> str:
    return ("func @k(%A: memref<f32x64x64>) attributes{work_group_size=[64,1]} {\n"
            "    %c0 = constant 0 : index\n    %c64 = constant 64 : index\n"
            "    foreach_tile (%i,%j)=(%c0,%c0),(%c64,%c64) as (%m,%n)<=(16,16) {\n"
            f"        %l = {builtin} : i32\n    }}\n}}\n")


#: name -> (function, what target cpu compiles it with): the given sizes where the
#: function can observe them, else what cpu would choose (the results cannot differ)
COMPILED = {
    "parallel": ("func @k() attributes{work_group_size=[64,2]} {\n    parallel {\n    }\n}\n",
                 (16, (64, 2))),
    "num_subgroups": ("func @k() attributes{work_group_size=[64,4], subgroup_size=32} {\n"
                      "    %n = num_subgroups.x : i32\n}\n", (32, (64, 4))),
    "tiles_subgroup_id": (_tiles("subgroup_linear_id"), (16, (64, 1))),
    # collective instructions only: cpu's own choice
    "collective": ("func @k() attributes{work_group_size=[64,4], subgroup_size=32} {\n}\n",
                   (16, (16, 1))),
    "f32gemm_wgs1024": (_gemm("f32", 128, 37, 64, " attributes{work_group_size=[1024,1]}"),
                        (16, (16, 1))),
    "f64gemm_wgs16": (_gemm("f64", 128, 37, 64, " attributes{work_group_size=[16,1]}"),
                      (8, (8, 1))),
    # no more work-items than cpu would choose: kept
    "collective_wgs8": ("func @k() attributes{work_group_size=[8,1]} {\n}\n", (8, (8, 1))),
    # SPMD code only in foreach_tile bodies sees its subgroup, not how many there are:
    # one subgroup of that size runs every tile
    "tiles": (_tiles("subgroup_local_id"), (16, (16, 1))),
}


@pytest.mark.parametrize("name", COMPILED)
def test_cpu_compiles_a_work_group_it_cannot_observe_as_it_chooses(name):
    pytest.importorskip("llvmlite")
    from ttlc.backends.cpu.module import lower
    from ttlc.target.config import compiled_config

    text, (sgs, wgs) = COMPILED[name]
    program = ttlc.check(text)
    config = compiled_config(program.functions[0], get_target("cpu"), program)
    assert (config.subgroup_size, config.work_group_size) == (sgs, wgs)
    func = lower(program).functions[0]
    assert (func.subgroup_size, tuple(func.work_group_size)) == (sgs, wgs)


@pytest.mark.parametrize("name", SIZES)
def test_exec_config_sizes(name):
    text, on_interp, on_cpu = SIZES[name]
    program = ttlc.check(text)
    func = program.functions[0]
    for target, (sgs, wgs) in (("interp", on_interp), ("cpu", on_cpu)):
        config = ExecConfig.of(func, get_target(target), program)
        assert (config.subgroup_size, config.work_group_size) == (sgs, wgs), target
        assert config.lanes == wgs[0] * wgs[1] and config.subgroups == config.lanes // sgs
    assert func.attrs == ttlc.check(text).functions[0].attrs  # nothing written


SIZES_SEEN = """func @k(%a: memref<i32x8>) attributes{work_group_size=[8,1]} {
    parallel {
        %i = subgroup_local_id : i32
        %s = subgroup_size : i32
        %j = cast %i : index
        store %s, %a[%j]
    }
}
"""


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_sizes_a_kernel_can_observe_are_the_given_ones(target):
    np = pytest.importorskip("numpy")
    # work_group_size [8,1] without a subgroup size: a subgroup of 8, of which the first
    # mode is a multiple (spec, "work_group_size")
    a = np.zeros(8, np.int32)
    ttlc.compile(SIZES_SEEN, target=target)["k"](a)
    assert list(a) == [8] * 8


TILED = """func @k(%A: memref<f32x64x64>, %B: memref<f32x64x64>, %C: memref<f32x64x64>)
        attributes{subgroup_size=16, work_group_size=[1024,1]} {
    %c0 = constant 0 : index
    %c64 = constant 64 : index
    foreach_tile (%i, %j) = (%c0, %c0), (%c64, %c64) as (%tm, %tn) <= (16, 16) {
        %init = cooperative_matrix_load %C[%i, %j] : coopmatrix<f32x16x16,matrix_acc>
        %c8 = constant 8 : index
        %acc = for %l = %c0, %c64, %c8 init(%x = %init) -> (coopmatrix<f32x16x16,matrix_acc>) {
            %ta = cooperative_matrix_load %A[%i, %l] : coopmatrix<f32x16x8,matrix_a>
            %tb = cooperative_matrix_load %B[%l, %j] : coopmatrix<f32x8x16,matrix_b>
            %y = cooperative_matrix_mul_add %ta, %tb, %x : coopmatrix<f32x16x16,matrix_acc>
            yield (%y)
        }
        cooperative_matrix_store %acc, %C[%i, %j]
    }
}
"""


@pytest.mark.parametrize("text", [_gemm("f32", 64, 64, 64, " attributes{work_group_size=[1024,1]}"),
                                  TILED], ids=["gemm", "tiled"])
def test_a_large_work_group_computes_the_same_on_cpu(text):
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    A, B, C = (np.asfortranarray(rng.integers(-3, 4, (64, 64)).astype(np.float32))
               for _ in range(3))
    expected = A @ B + C  # exact in f32: small integers
    for target in ("interp", "cpu"):
        out = C.copy(order="F")
        ttlc.compile(text, target=target)["k"](A, B, out)
        assert np.array_equal(out, expected), target


IDS = """func @k(%ids: memref<i32x4x1024>) attributes{subgroup_size=16, work_group_size=[WX,WY]} {
    parallel {
        %sg = subgroup_linear_id : i32
        %sx = subgroup_id.x : i32
        %sy = subgroup_id.y : i32
        %l = subgroup_local_id : i32
        %S = subgroup_size : i32
        %base = mul %sg, %S : i32
        %wi = add %base, %l : i32
        %w = cast %wi : index
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %c2 = constant 2 : index
        %c3 = constant 3 : index
        store %sg, %ids[%c0, %w]
        store %sx, %ids[%c1, %w]
        store %sy, %ids[%c2, %w]
        store %l, %ids[%c3, %w]
    }
}
"""


@pytest.mark.parametrize("wx,wy", [(16, 1), (64, 2), (1024, 1), (256, 4)])
def test_subgroups_of_a_large_work_group_run_one_after_the_other_on_cpu(wx, wy):
    """More subgroups than run in lockstep loop over the parallel region on cpu (unchecked;
    ``function.loops_over_subgroups``), each seeing its own ids (spec, "Builtin")."""
    np = pytest.importorskip("numpy")
    from ttlc.backends.cpu.function import LOCKSTEP_SUBGROUPS

    text = IDS.replace("WX", str(wx)).replace("WY", str(wy))
    ids = np.full((4, 1024), -1, np.int32, order="F")
    ttlc.compile(text, target="cpu")["k"](ids)
    w = np.arange(wx * wy)
    expected = np.stack([w // 16, (w % wx) // 16, w // wx, w % 16]).astype(np.int32)
    assert np.array_equal(ids[:, :wx * wy], expected)
    assert (ids[:, wx * wy:] == -1).all()
    if wx * wy // 16 > LOCKSTEP_SUBGROUPS:
        from ttlc.backends.cpu.module import Artifacts

        assert "subgroups.done" in Artifacts(ttlc.check(text), checked=False).ir


def test_exec_config_of_target_cpu_is_what_the_cpu_lowering_writes():
    """Unless the function asks for more work-items than it can observe (COMPILED)."""
    pytest.importorskip("llvmlite")
    from ttlc.backends.cpu.module import lower

    for name, (text, _, (sgs, wgs)) in SIZES.items():
        func = lower(ttlc.check(text)).functions[0]
        if name in ("wgs64", "wgs24", "both"):  # empty functions: cpu's choice
            assert (func.subgroup_size, tuple(func.work_group_size)) == (16, (16, 1)), name
        else:
            assert (func.subgroup_size, tuple(func.work_group_size)) == (sgs, wgs), name


def test_exec_config_checks_given_sizes_against_the_target():
    program = ttlc.check("func @k() attributes{subgroup_size=128} {\n}\n")
    with pytest.raises(ttlc.CompileError, match="subgroup size 128 is not supported by target cpu"):
        ExecConfig.of(program.functions[0], get_target("cpu"), program)
    # the interpreter runs what it is given
    assert ExecConfig.of(program.functions[0], get_target("interp")).subgroup_size == 128


# ---- import rules -------------------------------------------------------------------------------
IMPORTS = """
import json, sys
import numpy as np
import ttlc.runtime, ttlc.runtime.args, ttlc.runtime.values
runtime = sorted(m for m in sys.modules if m.startswith(("ttlc.interp", "ttlc.backends",
                                                          "ttlc.target", "ttlc.passes")))
import ttlc.backends.cpu.abi
abi = sorted(m for m in sys.modules if m.startswith("ttlc.interp"))
module = ttlc.compile({text!r}, target="cpu")
x = np.arange(5, dtype=np.float32)
module["scale"](x, grid=(1,))
print(json.dumps({{"runtime": runtime, "abi": abi, "hit": module.cache_hit, "x": x.tolist(),
                  "loaded": sorted(m for m in sys.modules if m.startswith("ttlc.interp"))}}))
"""


def test_runtime_and_cpu_back_end_import_no_interpreter(tmp_path):
    """The runtime imports no interpreter, back end, target or pass; the CPU ABI and a
    kernel loaded from the disk cache (and run) import no interpreter."""
    pytest.importorskip("llvmlite")
    env = dict(os.environ, TTLC_CACHE="1", TTLC_CACHE_DIR=str(tmp_path))
    runs = []
    while len(runs) < 3 and not (runs and runs[-1]["hit"]):  # (see test_cpu_compile)
        proc = subprocess.run([sys.executable, "-c", IMPORTS.format(text=SCALE)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    hit = runs[-1]
    assert hit["hit"] and hit["x"] == [0.0, 1.0, 4.0, 9.0, 16.0]
    assert (hit["runtime"], hit["abi"], hit["loaded"]) == ([], [], [])
