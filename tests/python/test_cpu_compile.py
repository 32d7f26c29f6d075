"""Compiling for target cpu: pieces of the pipeline that exist to make it fast stay exact.

* ``values.VectorConstant`` and ``values.UndefVector`` print as llvmlite's own vector
  constants, or in a shorter form (``splat (...)``, ``undef``) that LLVM reads as the
  same constant;
* the disk cache keys on where instructions are in the source, so that errors found by
  cached code point at the right line of a program laid out differently;
* the features of a CPU model (``TTLC_CPU``) follow ``TTLC_CPU_FEATURES``, removals
  included: code generation asks them which instructions it may use.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

from llvmlite import ir  # noqa: E402

from ttlc.backends.cpu.values import (F16, F32, F64, I1, I8, I32, I64,  # noqa: E402
                                     UndefVector, VectorConstant)
from ttlc.backends.cpu import jit  # noqa: E402


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
        for v in (0, 1) if isinstance(elem, ir.IntType) else (0.0, -0.0, 1.5):
            assert llvm_reads(VectorConstant(elem, [v] * n)) == llvm_reads(ir.Constant(vt, [v] * n))


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
