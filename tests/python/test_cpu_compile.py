"""Compiling for target cpu: pieces of the pipeline that exist to make it fast stay exact.

* ``values.VectorConstant``, ``values.UndefVector`` and ``values.ZeroVector`` print as
  llvmlite's own vector constants, or in a shorter form (``splat (...)``, ``undef``,
  ``zeroinitializer``) that LLVM reads as the same constant;
* ``values.FoldingBuilder`` folds integer arithmetic on constants as LLVM would (wrapping
  like NumPy's fixed-width integers) and leaves every other instruction in place;
* the disk cache keys on where instructions are in the source, so that errors found by
  cached code point at the right line of a program laid out differently;
* the features of a CPU model (``TTLC_CPU``) follow ``TTLC_CPU_FEATURES``, removals
  included: code generation asks them which instructions it may use.
"""
from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

from llvmlite import ir  # noqa: E402

from ttlc.backends.cpu.values import (F16, F32, F64, I1, I8, I16, I32, I64,  # noqa: E402
                                     FoldingBuilder, UndefVector, VectorConstant, ZeroVector)
from ttlc.backends.cpu import jit  # noqa: E402
from ttlc.testing.cpu_model import run_for_cpu_model  # noqa: E402
from ttlc.testing.kernels import member_kernel  # noqa: E402


SPECIAL_FLOATS = [0.0, -0.0, 1.5, -2.25, 1e-45, 5e-324, 3.4028234663852886e38, 65504.0,
                  float("inf"), float("-inf"), float("nan"), 0.1, 1 / 3, 2.0 ** 60]


@pytest.mark.parametrize("elem", [I1, I8, I32, I64, F16, F32, F64], ids=str)
def test_vector_constant_prints_as_llvmlite(elem):
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 64):
        for _ in range(5):
            if isinstance(elem, ir.IntType):
                bits = elem.width
                lo, hi = (0, 2) if bits == 1 else (-2 ** (bits - 1), 2 ** (bits - 1))
                values = [int(v) for v in rng.integers(lo, hi, n)]
            else:  # (llvmlite refuses finite values beyond the range of half)
                pool = [v for v in SPECIAL_FLOATS if elem is not F16 or not abs(v) < math.inf
                        or abs(v) <= 65504]
                values = [pool[i] for i in rng.integers(len(pool), size=n)]
            expected = ir.Constant(ir.VectorType(elem, n), values)
            got = VectorConstant(elem, values)
            if n > 1 and len({repr(v) for v in values}) == 1:
                assert str(got) == f"{expected.type} splat ({expected.constant[0]})"
            else:
                assert str(got) == str(expected)
            assert llvm_reads(got) == llvm_reads(expected)
            assert str(got.type) == str(expected.type)
            assert [str(c) for c in got.constant] == [str(c) for c in expected.constant]


def llvm_reads(constant: ir.Constant) -> str:
    """The constant as LLVM prints it after reading its text (the same text for the same
    constant, however it was written)."""
    mod = jit.parse(f"@g = global {constant}\n")
    return str(mod.get_global_variable("g"))


@pytest.mark.parametrize("elem", [I1, I32, F16, F64], ids=str)
def test_short_vector_constants_are_the_same_constants(elem):
    for n in (1, 2, 16):
        vt = ir.VectorType(elem, n)
        undef = UndefVector(vt)
        assert str(undef) == f"{vt} undef"
        assert llvm_reads(undef) == llvm_reads(ir.Constant(vt, ir.Undefined))
        zero = ZeroVector(vt)
        assert str(zero) == f"{vt} zeroinitializer"
        assert llvm_reads(zero) == llvm_reads(ir.Constant(vt, None))
        for v in (0, 1) if isinstance(elem, ir.IntType) else (0.0, -0.0, 1.5):
            assert llvm_reads(VectorConstant(elem, [v] * n)) == llvm_reads(ir.Constant(vt, [v] * n))


def _builder() -> FoldingBuilder:
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [I32, ir.VectorType(I32, 4)]),
                     "f")
    return FoldingBuilder(fn.append_basic_block("entry"))


_NUMPY_INT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


@pytest.mark.parametrize("elem", [I8, I16, I32, I64], ids=str)
def test_folding_builder_wraps_like_fixed_width_integers(elem):
    b, rng = _builder(), np.random.default_rng(5)
    dtype = _NUMPY_INT[elem.width]
    info = np.iinfo(dtype)
    edge = [int(info.min), int(info.max), -1, 0, 1, 2]
    for op in ("add", "sub", "mul"):
        x = edge + [int(v) for v in rng.integers(info.min, info.max, 10, dtype=dtype)]
        y = edge[::-1] + [int(v) for v in rng.integers(info.min, info.max, 10, dtype=dtype)]
        with np.errstate(over="ignore"):
            want = getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply"}[op])(
                np.array(x, dtype), np.array(y, dtype))
        got = getattr(b, op)(VectorConstant(elem, x), VectorConstant(elem, y))
        assert isinstance(got, VectorConstant) and list(got.ints) == want.tolist(), op
        for k in range(len(x)):
            one = getattr(b, op)(ir.Constant(elem, x[k]), ir.Constant(elem, y[k]))
            assert type(one) is ir.Constant and one.constant == int(want[k]), (op, x[k], y[k])
    assert not b.block.instructions  # all folded


def test_folding_builder_keeps_what_it_cannot_fold():
    b = _builder()
    x, v = b.function.args
    four = ir.VectorType(I32, 4)
    assert b.add(x, ir.Constant(I32, 0)) is x and b.add(ir.Constant(I32, 0), x) is x
    assert b.sub(x, ir.Constant(I32, 0)) is x and b.mul(ir.Constant(I32, 1), x) is x
    assert b.mul(v, VectorConstant(I32, [1] * 4)) is v
    kept = [b.sub(ir.Constant(I32, 0), x), b.mul(x, ir.Constant(I32, 0)), b.add(x, x),
            b.mul(v, VectorConstant(I32, [1, 1, 2, 1])), b.add(v, ZeroVector(four))]
    assert [i.opname for i in kept] == ["sub", "mul", "add", "mul", "add"]
    assert b.block.instructions == kept


@pytest.mark.parametrize("elem", [I8, I32, I64], ids=str)
def test_folding_builder_compares_constants(elem):
    """Comparisons of integer constants fold to i1 constants, signed and unsigned as the
    lanes' bits read (-1 is the largest unsigned value), zeroinitializer included; i1
    constants anded fold, and ``x and true`` is x.  Against NumPy's fixed-width compares."""
    b = _builder()
    dtype = _NUMPY_INT[elem.width]
    info = np.iinfo(dtype)
    x = [int(info.min), -1, 0, 1, 2, int(info.max), 5, -7]
    y = [0, 1, -1, 1, int(info.max), int(info.min), 5, -8]
    for op, fn in (("<", np.less), ("<=", np.less_equal), (">", np.greater),
                   (">=", np.greater_equal), ("==", np.equal), ("!=", np.not_equal)):
        for signed, kind in ((True, dtype), (False, np.dtype(dtype).str.replace("i", "u"))):
            want = fn(np.array(x, dtype).astype(kind), np.array(y, dtype).astype(kind))
            cmp = b.icmp_signed if signed else b.icmp_unsigned
            got = cmp(op, VectorConstant(elem, x), VectorConstant(elem, y))
            assert isinstance(got, VectorConstant) and [int(v) for v in got.ints] == \
                want.astype(int).tolist(), (op, signed)
    vt = ir.VectorType(elem, 4)
    assert list(b.icmp_signed(">=", VectorConstant(elem, [-2, 0, 3, 1]),
                              ZeroVector(vt)).ints) == [0, 1, 1, 1]
    p, q = VectorConstant(I1, [1, 1, 0, 0]), VectorConstant(I1, [1, 0, 1, 0])
    assert list(b.and_(p, q).ints) == [1, 0, 0, 0]
    assert not b.block.instructions  # all folded
    _, v = b.function.args
    mask = b.icmp_signed("<", v, VectorConstant(I32, [1, 2, 3, 4]))  # not a constant
    assert b.and_(mask, VectorConstant(I1, [1] * 4)) is mask
    assert b.and_(mask, p) in b.block.instructions


def test_folding_builder_shuffles_constants():
    b = _builder()
    _, v = b.function.args
    a, c = [3, -1, 7, 0], [5, 6, 8, 9]
    mask = [7, 0, 2, 4, 4, 1]
    got = b.shuffle_vector(VectorConstant(I32, a), VectorConstant(I32, c),
                           VectorConstant(I32, mask))
    assert list(got.ints) == [(a + c)[k] for k in mask] and not b.block.instructions
    kept = b.shuffle_vector(v, VectorConstant(I32, c), VectorConstant(I32, mask))
    assert b.block.instructions == [kept]


def test_folding_builder_extracts_inserted_entries():
    b = _builder()
    x, v = b.function.args
    four = ir.VectorType(I32, 4)
    y = b.add(x, x)
    built = b.insert_element(b.insert_element(UndefVector(four), x, ir.Constant(I32, 2)), y,
                             ir.Constant(I32, 0))
    before = list(b.block.instructions)
    assert b.extract_element(built, ir.Constant(I32, 2)) is x
    assert b.extract_element(built, ir.Constant(I64, 0)) is y
    assert b.block.instructions == before  # nothing emitted
    kept = [b.extract_element(built, ir.Constant(I32, 1)),  # never inserted: undef
            b.extract_element(built, x),  # a position known only when run
            b.extract_element(v, ir.Constant(I32, 0))]
    assert [i.opname for i in kept] == ["extractelement"] * 3
    assert [i.operands[0] for i in kept] == [built, built, v]
    # the last insertion at a lane wins; one at a position known only when run hides
    # every lane below it in the chain
    again = b.insert_element(built, y, ir.Constant(I32, 2))
    assert b.extract_element(again, ir.Constant(I32, 2)) is y
    hidden = b.insert_element(b.insert_element(built, y, x), x, ir.Constant(I32, 3))
    assert b.extract_element(hidden, ir.Constant(I32, 3)) is x
    assert b.extract_element(hidden, ir.Constant(I32, 0)).opname == "extractelement"


def _run_shuffles(build, inputs: np.ndarray, outputs: int) -> np.ndarray:
    """Compile and run f(in, out), whose body ``build(b, x, y)`` makes from the two <8 x i32>
    vectors at ``in`` a list of <8 x i32> vectors stored to ``out`` one after the other."""
    import ctypes

    mod = ir.Module()
    mod.triple = jit.triple()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 2), "f")
    b = FoldingBuilder(fn.append_basic_block("entry"))
    src, dst = fn.args
    v8 = ir.VectorType(I32, 8)
    x = b.load(src, typ=v8, align=4)
    y = b.load(b.gep(src, [ir.Constant(I64, 8)], source_etype=I32), typ=v8, align=4)
    results = build(b, x, y)
    assert len(results) == outputs
    for k, v in enumerate(results):
        b.store(v, b.gep(dst, [ir.Constant(I64, 8 * k)], source_etype=I32), align=4)
    b.ret_void()
    library = jit.Library(jit.emit_object(jit.optimize(jit.parse(str(mod)))))
    out = np.zeros(8 * outputs, np.int32)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(library.address("f"))(
        inputs.ctypes.data, out.ctypes.data)
    return out.reshape(outputs, 8)


def test_folding_builder_traces_shuffles_to_their_sources():
    """Random chains of shuffles (of the inputs, of zeros, of earlier shuffles) compute what
    their masks say, however the builder shortens them; a vector joined from pieces and
    taken apart again is the pieces themselves."""
    rng = np.random.default_rng(11)
    inputs = np.arange(1, 17, dtype=np.int32)
    want = {}

    def build(b, x, y):
        v8 = ir.VectorType(I32, 8)
        pool = [(x, inputs[:8]), (y, inputs[8:]), (ZeroVector(v8), np.zeros(8, np.int32))]
        for _ in range(40):
            (p, pv), (q, qv) = (pool[k] for k in rng.integers(0, len(pool), 2))
            mask = [int(m) for m in rng.integers(0, 16, 8)]
            v = b.shuffle_vector(p, q, VectorConstant(I32, mask))
            pool.append((v, np.concatenate([pv, qv])[mask]))
        halves = [b.shuffle_vector(x, x, VectorConstant(I32, r)) for r in (range(4), range(4, 8))]
        joined = b.shuffle_vector(*halves, VectorConstant(I32, range(8)))
        assert b.shuffle_vector(joined, y, VectorConstant(I32, range(8))) is joined
        assert b.shuffle_vector(y, joined, VectorConstant(I32, range(8, 16))) is joined
        back = b.shuffle_vector(joined, joined, VectorConstant(I32, [2, 1, 0, 4, 5, 6, 7, 3]))
        assert back is x or back.operands[0] is x  # from x, not from the halves
        want["values"] = [v for _, v in pool[3:]]
        return [v for v, _ in pool[3:]]

    got = _run_shuffles(build, inputs, 40)
    np.testing.assert_array_equal(got, np.array(want["values"]))


def test_drop_unused_keeps_effects_and_what_they_use():
    from ttlc.backends.cpu.function import drop_unused

    b = _builder()
    x, v = b.function.args
    used = b.add(x, x)
    b.shuffle_vector(v, v, VectorConstant(I32, [1, 0]))  # unused, and so is the add below
    unused = b.mul(b.add(x, ir.Constant(I32, 3)), x)
    call = b.call(ir.Function(b.module, ir.FunctionType(I32, [I32]), "g"), [used])  # unused result
    b.ret_void()
    drop_unused(b.function)
    kept = b.block.instructions
    assert used in kept and call in kept and unused not in kept
    assert [i.opname for i in kept] == ["add", "call", "ret void"]


def test_short_vector_constants_keep_values_apart():
    """(a signed zero is not the other zero; a splat is not a vector with one lane else)"""
    assert llvm_reads(VectorConstant(F64, [-0.0] * 4)) != llvm_reads(VectorConstant(F64, [0.0] * 4))
    assert llvm_reads(VectorConstant(I32, [1] * 4)) != llvm_reads(VectorConstant(I32, [1, 1, 1, 2]))


def test_vector_constant_keeps_values_and_signed_zero_apart():
    assert str(VectorConstant(F64, [0.0, -0.0])) == str(ir.Constant(ir.VectorType(F64, 2),
                                                                       [0.0, -0.0]))
    assert str(VectorConstant(F64, [-0.0, 0.0])) != str(VectorConstant(F64, [0.0, -0.0]))
    nan = VectorConstant(F32, [math.nan])
    assert str(nan) == str(ir.Constant(ir.VectorType(F32, 1), [math.nan]))
    mixed = [ir.Constant(I32, 5), 6, ir.Constant(I32, ir.Undefined)]
    assert str(VectorConstant(I32, mixed)) == str(ir.Constant(ir.VectorType(I32, 3), mixed))


def test_vector_constant_is_a_shuffle_mask():
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.VectorType(F32, 4)]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    x = fn.args[0]
    fast = b.shuffle_vector(x, x, VectorConstant(I32, [3, 2, 1, 0]))
    slow = b.shuffle_vector(x, x, ir.Constant(ir.VectorType(I32, 4), [3, 2, 1, 0]))
    assert str(fast).split("=", 1)[1] == str(slow).split("=", 1)[1]
    with pytest.raises(IndexError):  # llvmlite's own mask check still applies
        b.shuffle_vector(x, x, VectorConstant(I32, [0, 9, 1, 2]))


OUT_OF_BOUNDS = """func @k(%x: memref<f32x?>) {
    %i = constant 10 : index
    %v = load %x[%i] : f32
    store %v, %x[%i]
}"""


def test_cached_errors_point_into_the_source_compiled(tmp_path, monkeypatch):
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path))
    for text, line, hit in ((OUT_OF_BOUNDS, 3, False), ("\n\n\n" + OUT_OF_BOUNDS, 6, False),
                            (OUT_OF_BOUNDS, 3, True)):
        module = ttlc.compile(text, target="cpu", checked=True)
        assert module.cache_hit == hit
        with pytest.raises(ttlc.KernelError, match=rf"<input>:{line}\.10-26: .* index 10 of mode 0 "
                                                   "is out of bounds"):
            module["k"](np.zeros(4, np.float32), grid=(1,))


HIT = """func @scale(%x: memref<f32x?>) {
    %c0 = constant 0 : index
    %n = size %x[0] : index
    foreach (%i) = (%c0), (%n) {
        %v = load %x[%i] : f32
        %w = mul %v, %v : f32
        store %w, %x[%i]
    }
}"""

#: compiles HIT, runs it on [0, 1, ..., 6] and reports the cache hit, the result and which
#: parts of the compiler were loaded
HIT_SCRIPT = """
import json, sys
import numpy as np
import ttlc
module = ttlc.compile({text!r}, target="cpu")
x = np.arange(7, dtype=np.float32)
module["scale"](x, grid=(1,))
print(json.dumps({{"hit": module.cache_hit, "x": x.tolist(),
                  "loaded": sorted(m for m in sys.modules if m.startswith(
                      ("ttlc.backends.cpu.codegen", "ttlc.backends.cpu.coop", "ttlc.passes")))}}))
"""


def test_cache_hit_needs_no_code_generator(tmp_path):
    """A process that finds its kernels in the disk cache loads neither the lowering
    passes nor the code generator (only the ABI in ``abi.py`` and the JIT)."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, TTLC_CACHE="1", TTLC_CACHE_DIR=str(tmp_path))
    runs = []
    # (a source file of ttlc edited between two runs changes the key: one more run then hits)
    while len(runs) < 3 and not (runs and runs[-1]["hit"]):
        proc = subprocess.run([sys.executable, "-c", HIT_SCRIPT.format(text=HIT)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    expected = (np.arange(7, dtype=np.float32) ** 2).tolist()
    miss, hit = runs[0], runs[-1]
    assert (miss["hit"], hit["hit"]) == (False, True)
    assert all(r["x"] == expected for r in runs)
    assert "ttlc.backends.cpu.codegen" in miss["loaded"]  # the check can see the modules
    assert hit["loaded"] == []


@pytest.mark.parametrize("cpu,features,lacks,has", [
    ("znver4", "", set(), {"avx512f", "avx512bw", "avx512bf16"}),
    ("znver4", "-avx512bf16", {"avx512bf16"}, {"avx512f", "avx512bw"}),
    ("znver4", "-avx512f", {"avx512f", "avx512bw", "avx512bf16"}, {"avx2", "fma"}),
    ("x86-64-v3", "+avx512f", {"avx512bw"}, {"avx512f", "avx2"}),
])
def test_feature_string_changes_the_model(cpu, features, lacks, has):
    """A removed feature (and every feature that needs it) is not the model's: code using
    it would stop LLVM with a fatal error."""
    got = jit.model_features(cpu, features)
    assert not got & lacks and has <= got


#: four adjacent scalar additions, the SLP vectorizer's textbook case
FOUR_SCALAR_SUMS = """
define void @f(ptr noalias %x, ptr noalias %y) {
""" + "".join(f"""
  %px{i} = getelementptr float, ptr %x, i64 {i}
  %py{i} = getelementptr float, ptr %y, i64 {i}
  %a{i} = load float, ptr %px{i}
  %b{i} = load float, ptr %py{i}
  %s{i} = fadd float %a{i}, %b{i}
  store float %s{i}, ptr %py{i}""" for i in range(4)) + """
  ret void
}
"""


def test_kernels_are_optimized_without_the_slp_vectorizer():
    """``cpu.module.optimize`` (every kernel's O3) leaves scalar code scalar: the SLP
    vectorizer costs up to 64 ms of a cold compile and made no kernel measurably faster
    (docs/performance.md); ``jit.optimize``'s default (the runtime library) keeps it."""
    from ttlc.backends.cpu import module

    with_slp = str(jit.optimize(jit.parse(FOUR_SCALAR_SUMS)))
    assert "fadd <4 x float>" in with_slp
    kernels = str(module.optimize(jit.parse(FOUR_SCALAR_SUMS)))
    assert "fadd float" in kernels and "<4 x float>" not in kernels


def test_spilled_vectors_land_in_aligned_stack_slots():
    """A vector live across a call is spilled; with ``jit.function_attributes`` (those of
    every kernel: ``"stackrealign"``) the prologue aligns the stack to the vector's
    width and the spill and reload are aligned moves, whatever the caller's alignment.
    Without the attribute LLVM writes such spills with unaligned moves (checked here
    too: the test shows what the attribute changes)."""
    lanes = max(2, jit.vector_bits() // 64)

    def spills(attrs) -> Tuple[List[str], bool]:
        """The mnemonics of the vector moves to and from the stack; whether the prologue
        aligns the stack to the vector's bytes."""
        asm = jit.emit_assembly(jit.parse(f"""
declare void @elsewhere()
define void @k(ptr %p) #0 {{
  %v = load <{lanes} x double>, ptr %p, align 8
  call void @elsewhere()
  %w = fadd <{lanes} x double> %v, %v
  store <{lanes} x double> %w, ptr %p, align 8
  ret void
}}
attributes #0 = {{ nounwind {" ".join(attrs)} }}
"""))
        moves = [line.split()[0].lstrip("v") for line in asm.splitlines()
                 if "(%rsp)" in line and "mm" in line]
        return moves, f"andq\t$-{lanes * 8}, %rsp" in asm

    attrs = jit.function_attributes()
    kernel = ttlc.compile(member_kernel("f64", "gemm", [("A", (8, 8), False), ("B", (8, 8), False),
                                                         ("C", (8, 8), False)]), target="cpu")
    assert '"stackrealign"' in str(kernel.artifacts.stage("llvm-opt"))  # every kernel's
    moves, realigned = spills(attrs)
    assert len(moves) >= 2 and all(m.startswith(("movap", "movdqa")) for m in moves), moves
    if lanes * 8 > 16:  # wider than the ABI's 16-byte alignment
        assert realigned
        moves, _ = spills(tuple(a for a in attrs if a != '"stackrealign"'))
        assert any(m.startswith(("movup", "movdqu")) for m in moves), moves


#: a gemm whose A tiles hold 4 static rows of a register of 8 f32 (AVX2), one per member
FOUR_ROWS = member_kernel("f32", "gemm", [("A", (4, 74), False), ("B", (74, 6), False),
                                          ("C", (4, 6), False)])

#: compiles FOUR_ROWS for the CPU TTLC_CPU names, prints whether its optimized LLVM IR has
#: a masked load, then (where `run` and the machine runs AVX2 code) the largest relative
#: error against NumPy
FOUR_ROWS_SCRIPT = """
import json, sys
import numpy as np
import ttlc
from ttlc.testing.cpu_model import host_runs
module = ttlc.compile({text!r}, target="cpu")
ir = module.artifacts.stage("llvm-opt")
error = None
if {run!r} and host_runs("x86-64-v3"):
    rng = np.random.default_rng(3)
    A, B = (np.asfortranarray(rng.standard_normal(s)).astype(np.float32)
            for s in ((4, 74, 5), (74, 6, 5)))
    C = np.full((4, 6, 5), np.nan, np.float32, order="F")
    module["member"](A, B, C, grid=(5,))
    want = np.einsum("mkb,knb->mnb", A.astype(np.float64), B.astype(np.float64))
    error = float(np.abs(C - want).max() / np.abs(want).max())
print(json.dumps({{"masked": "llvm.masked.load" in ir, "error": error}}))
"""


@pytest.mark.parametrize("cpu,masked", [("x86-64-v3", False), ("skylake-avx512", True)])
def test_static_rows_are_plain_loads_without_mask_registers(cpu, masked):
    """Without AVX-512 (TTLC_CPU=x86-64-v3, a fresh process) the A tiles' loads of 4
    static rows of 8 lanes are plain loads of 4 (``vectors.masked_load``: the masks fold
    to constants in ``FoldingBuilder``), with mask registers they stay masked; the
    results agree with NumPy."""
    script = FOUR_ROWS_SCRIPT.format(text=FOUR_ROWS, run=cpu == "x86-64-v3")
    got = run_for_cpu_model(cpu, script)
    assert got["masked"] == masked
    if got["error"] is not None:
        assert got["error"] < 1e-5


def test_code_for_a_cpu_model_in_a_fresh_process():
    """``ttlc.testing.cpu_model``, which the tests of code for named CPU models share: the
    script sees the model, its feature changes and the cache off, its last line is the
    answer, a failing script fails the test with its error, and spills are told apart from
    other stack accesses and from vector moves to memory elsewhere; `host_runs` follows
    the JIT's own rule."""
    from ttlc.testing.cpu_model import host_runs, vector_stack_accesses

    script = ("import json, os, sys\nprint('compiling')\nprint(json.dumps([sys.argv[1:], "
              "sys.stdin.read()] + [os.environ[k] for k in "
              "('TTLC_CPU', 'TTLC_CPU_FEATURES', 'TTLC_CACHE')]))")
    assert run_for_cpu_model("znver4", script, "a", "b", stdin="in", features="-avx512f") == \
        [["a", "b"], "in", "znver4", "-avx512f", "0"]
    with pytest.raises(AssertionError, match="(?s)TTLC_CPU=x86-64-v3: .*ZeroDivisionError"):
        run_for_cpu_model("x86-64-v3", "1 / 0")
    asm = "\n".join(["\tvmovups\t%zmm3, 64(%rsp)", "\tvmovaps\t(%rsp), %ymm1",
                     "\tvmovups\t%zmm3, (%rdi)", "\tmovq\t%rax, 8(%rsp)",
                     "\tvfmadd231ps\t128(%rsp), %xmm2, %xmm0"])
    assert host_runs("x86-64")  # the baseline every x86-64 machine runs
    assert vector_stack_accesses(asm) == ["\tvmovups\t%zmm3, 64(%rsp)", "\tvmovaps\t(%rsp), %ymm1",
                                          "\tvfmadd231ps\t128(%rsp), %xmm2, %xmm0"]
