"""Compiling for target cpu: pieces of the pipeline that exist to make it fast stay exact.

* ``codegen.VectorConstant`` prints exactly as llvmlite's own vector constants;
* the disk cache keys on where instructions are in the source, so that errors found by
  cached code point at the right line of a program laid out differently.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite")

from llvmlite import ir  # noqa: E402

from ttlc.backends.cpu.codegen import F16, F32, F64, I1, I8, I32, I64, VectorConstant  # noqa: E402


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
            assert str(got) == str(expected)
            assert str(got.type) == str(expected.type)
            assert [str(c) for c in got.constant] == [str(c) for c in expected.constant]


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
