"""Checked mode on target cuda-tile (docs/cuda-tile.md, "Checked mode"), run on the Tile IR
interpreter (``simulate``): a faulty launch must raise the KernelError the reference
interpreter raises, checked, for the same kind of finding at the same instruction, and
write nothing outside its arguments' arrays.  Target cuda runs the same table through a
fake driver (tests/python/test_cuda.py).

Each fault is a launch the language leaves undefined (tensor-language.txt: the bounds of
load and store, Subview, Expand, Fuse, the Restrictions of the BLAS instructions, group
members, atomics, cooperative matrix load and store, null memrefs, integer division);
each program marks the offending
instruction with ``; OFFENDING`` and says the kind of finding it must give (the kinds of
``ttlc.testing.differential.finding``).
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

import numpy as np
import pytest

import ttlc
from ttlc.backends.tile import simulate
from ttlc.backends.tile.backend import translate
from ttlc.backends import BACKENDS
from ttlc.testing.differential import finding

import tile_testing as tt

BACKEND = BACKENDS["cuda-tile"]

FILE = "faulty.ttl"
#: elements past each array's end that a checked kernel must leave alone
GUARD = 8


def guarded(n: int, dtype=np.float32, value=1) -> np.ndarray:
    """An array of n elements inside a larger buffer whose tail stays `value` unless a
    kernel writes past the array (``guard_intact``)."""
    return np.full(n + GUARD, value, dtype)[:n]


def guard_intact(a: np.ndarray, value=1) -> bool:
    base = a.base if a.base is not None else a
    return bool(np.all(base.reshape(-1)[a.size:] == value))


class Fault(NamedTuple):
    text: str
    kind: str
    args: Callable[[], tuple]
    grid: tuple = (1, 1, 1)




def matrix(rows: int, cols: int) -> np.ndarray:
    flat = guarded(rows * cols)
    return flat.reshape(cols, rows).T  # column-major, inside the guarded buffer


def int_matrix(rows: int, cols: int, value: int, zero_at=None) -> np.ndarray:
    """A column-major i32 matrix of `value` (0 at one entry) inside a guarded buffer of 0s."""
    m = np.full(rows * cols + GUARD, 0, np.int32)[:rows * cols].reshape(cols, rows).T
    m[...] = value
    if zero_at:
        m[zero_at] = 0
    return m


FAULTS = {
    # Subview: the example, a slice past the end (the launch used to write 2 floats past it)
    "subview_overrun": Fault("""\
func @g(%x: memref<f32x?>, %off: index) {
    %xs = subview %x[%off:4] : memref<f32x4>   ; OFFENDING
    %c2 = constant 2.0 : f32
    %zero = constant 0.0 : f32
    axpby %c2, %xs, %zero, %xs
}""", "subview", lambda: (guarded(16), 14)),
    "subview_negative_size": Fault("""\
func @g(%x: memref<f32x?>, %n: index) {
    %c0 = constant 0 : index
    %xs = subview %x[%c0:%n] : memref<f32x?>   ; OFFENDING
    %c2 = constant 2.0 : f32
    %zero = constant 0.0 : f32
    axpby %c2, %xs, %zero, %xs
}""", "subview", lambda: (guarded(16), -1)),
    # a batch of 4 launched on 6 work-groups: the subview at the group id overruns
    "batched_gemm_past_the_batch": Fault("""\
func @g(%A: memref<f32x4x4x?>, %B: memref<f32x4x4x?>, %C: memref<f32x4x4x?>) {
    %k = group_id.x : index
    %a = subview %A[0:4, 0:4, %k] : memref<f32x4x4>   ; OFFENDING
    %b = subview %B[0:4, 0:4, %k] : memref<f32x4x4>
    %c = subview %C[0:4, 0:4, %k] : memref<f32x4x4>
    %one = constant 1.0 : f32
    gemm.n.n %one, %a, %b, %one, %c
}""", "subview", lambda: tuple(guarded(64).reshape(4, 4, 4, order="F") for _ in range(3)),
        (6, 1, 1)),
    "store_out_of_bounds": Fault("""\
func @g(%x: memref<f32x?>, %i: index) {
    %v = constant 3.0 : f32
    store %v, %x[%i]   ; OFFENDING
}""", "bounds", lambda: (guarded(16), 16)),
    "load_out_of_bounds_per_work_item": Fault("""\
func @g(%x: memref<f32x16>, %y: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %l = subgroup_local_id : i32
        %i = cast %l : index
        %c3 = constant 3 : index
        %j = add %i, %c3 : index
        %v = load %x[%j] : f32   ; OFFENDING
        store %v, %y[%i]
    }
}""", "bounds", lambda: (guarded(16), guarded(16))),
    "gemm_shapes": Fault("""\
func @g(%A: memref<f32x?x?>, %B: memref<f32x?x?>, %C: memref<f32x?x?>) {
    %one = constant 1.0 : f32
    gemm.n.n %one, %A, %B, %one, %C   ; OFFENDING
}""", "shape", lambda: (matrix(4, 3), matrix(5, 4), matrix(8, 8))),
    "axpby_shapes": Fault("""\
func @g(%x: memref<f32x?>, %y: memref<f32x?>) {
    %one = constant 1.0 : f32
    axpby %one, %x, %one, %y   ; OFFENDING
}""", "shape", lambda: (guarded(5), guarded(6))),
    "expand_product": Fault("""\
func @g(%x: memref<f32x?>, %n: index) {
    %y = expand %x[0 -> 4 x %n] : memref<f32x4x?>   ; OFFENDING
    %c0 = constant 0 : index
    %v = load %y[%c0, %c0] : f32
    store %v, %x[%c0]
}""", "other", lambda: (guarded(12), 5)),
    "fuse_strides": Fault("""\
func @g(%x: memref<f32x4x4,strided<1,?>>) {
    %y = fuse %x[0, 1] : memref<f32x16>   ; OFFENDING
    %c0 = constant 0 : index
    %v = load %y[%c0] : f32
    store %v, %y[%c0]
}""", "shape", lambda: (guarded(32).reshape(8, 4, order="F")[:4, :],)),
    "group_member": Fault("""\
func @g(%G: group<memref<f32x4>x?>, %k: index) {
    %m = load %G[%k] : memref<f32x4>   ; OFFENDING
    %c0 = constant 0 : index
    %v = constant 2.0 : f32
    store %v, %m[%c0]
}""", "group index", lambda: ([guarded(4) for _ in range(4)], 4)),
    "null_memref": Fault("""\
func @g(%A: memref<f32x4x3>, %B: memref<f32x4x3>) {
    %c1 = constant 1 : index
    %v = load %A[%c1, %c1] : f32
    store %v, %B[%c1, %c1]   ; OFFENDING
}""", "null", lambda: (matrix(4, 3), None)),
    "atomic_add_out_of_bounds": Fault("""\
func @g(%h: memref<i32x8>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %i = cast %x : index
        %one = constant 1 : i32
        %old = atomic_add %one, %h[%i] : i32   ; OFFENDING
    }
}""", "bounds", lambda: (guarded(8, np.int32, 0),)),
    "coopmatrix_load_out_of_bounds": Fault("""\
func @g(%A: memref<f32x?x16>, %B: memref<f32x16x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %c0 = constant 0 : index
        %t = cooperative_matrix_load %A[%c0, %c0] : coopmatrix<f32x16x16,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %t, %B[%c0, %c0]
    }
}""", "bounds", lambda: (matrix(12, 16), matrix(16, 16))),
    "division_by_zero": Fault("""\
func @g(%x: memref<i32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %l = subgroup_local_id : i32
        %c5 = constant 5 : i32
        %d = sub %l, %c5 : i32
        %c7 = constant 7 : i32
        %q = div %c7, %d : i32   ; OFFENDING
        %i = cast %l : index
        store %q, %x[%i]
    }
}""", "division", lambda: (guarded(16, np.int32, 0),)),
    # 12 columns: the matrix tile's padding columns (16) must not count as divisors
    "coopmatrix_division_by_zero": Fault("""\
func @g(%B: memref<i32x16x12>, %C: memref<i32x16x12>) attributes {subgroup_size=16, work_group_size=[32,1]} {
    parallel {
        %seven = constant 7 : i32
        %a = cooperative_matrix_construct %seven : coopmatrix<i32x16x12,matrix_acc>
        %c0 = constant 0 : index
        %b = cooperative_matrix_load %B[%c0, %c0] : coopmatrix<i32x16x12,matrix_acc>
        %r = rem %a, %b : coopmatrix<i32x16x12,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %r, %C[%c0, %c0]
    }
}""", "division", lambda: (int_matrix(16, 12, 2, zero_at=(3, 5)), int_matrix(16, 12, 0))),
}

#: what the expand and fuse findings say (kinds of their own)
WORDS = {"expand_product": "expand shape product 20 does not equal the mode size 12",
         "fuse_strides": "modes 0 and 1 cannot be fused",
         "division_by_zero": "work-item (5, 0): integer division by zero in 'div': 7 divided by 0",
         "coopmatrix_division_by_zero": "work-item (3, 0): integer division by zero in 'rem': "
                                        "entry (3, 5) divides 7 by 0"}


def line_of(text: str) -> str:
    return str(next(n for n, line in enumerate(text.splitlines(), 1) if "OFFENDING" in line))


def interp_finding(fault: Fault) -> str:
    module = ttlc.compile(fault.text, target="interp", checked=True, filename=FILE)
    with pytest.raises(ttlc.KernelError) as e:
        module[next(iter(module))](*fault.args(), grid=fault.grid)
    return str(e.value)


def check_alike(name: str, fault: Fault, message: str, args) -> None:
    """The finding of another target: the kind and line of the interpreter's, and no
    write past any argument's array."""
    reference = interp_finding(fault)
    assert finding(Exception(message))[:2] == finding(Exception(reference))[:2], (message, reference)
    assert finding(Exception(message)) == (fault.kind, line_of(fault.text)) + \
        finding(Exception(message))[2:], message
    assert re.match(rf"{FILE}:{line_of(fault.text)}\.\d+(-\d+)?: kernel @g, group \(", message), message
    if name in WORDS:
        assert WORDS[name] in message and WORDS[name] in reference
    arrays = [a for x in args for a in (x if isinstance(x, list) else [x]) if isinstance(a, np.ndarray)]
    assert all(guard_intact(a.T if not a.flags.c_contiguous and a.ndim == 2 else a,
                            value=0 if a.dtype == np.int32 else 1) for a in arrays)


@pytest.mark.parametrize("name", FAULTS)
def test_faults_are_found_as_the_interpreter_finds_them(name):
    fault = FAULTS[name]
    program = ttlc.parse(fault.text, FILE)
    module = translate(program, checked=True)
    args = fault.args()
    with pytest.raises(ttlc.KernelError) as e:
        simulate.run(module.entries[0], program.functions[0], args, fault.grid, FILE)
    check_alike(name, fault, str(e.value), args)


def test_a_correct_launch_reports_nothing_and_computes_what_unchecked_code_does():
    """The checks of the issue's kernel pass where the slice fits, and the result is the
    interpreter's: checked code changes nothing where nothing is wrong."""
    fault = FAULTS["subview_overrun"]
    program = ttlc.parse(fault.text, FILE)
    x = np.arange(16, dtype=np.float32)
    simulate.run(translate(program, checked=True).entries[0], program.functions[0], [x, 2], (1, 1, 1))
    want = np.arange(16, dtype=np.float32)
    want[2:6] *= 2
    np.testing.assert_array_equal(x, want)


def test_unchecked_entries_have_no_record_and_no_checks():
    """Unchecked code is what it was: the entry ABI's parameters alone, no atomic
    compare-and-swap, no read of a record."""
    from ttlc.backends.tile import text
    program = ttlc.parse(FAULTS["gemm_shapes"].text, FILE)
    plain, checked = (text.print_module(translate(program, checked=c)) for c in (False, True))
    assert "atomic_cas_tko" not in plain and "atomic_cas_tko" in checked
    # each memref<f32x?x?>: its pointer, 2 sizes, 1 stride (the first is 1): %arg0..%arg11
    assert "%arg11: tile<i64>" in plain and "%arg12" not in plain
    assert "%arg12: tile<ptr<i64>>" in checked
    assert translate(program).entries[0].checked is None


@pytest.mark.parametrize("name", ["subview_overrun", "gemm_shapes", "group_member",
                                  "coopmatrix_load_out_of_bounds", "atomic_add_out_of_bounds",
                                  "division_by_zero"])
def test_checked_modules_are_validated_by_nvidia_tools(name):
    """tileiras compiles a checked module (sm_90) and tileirdisasm prints it back as ttlc
    prints it (the record's compare-and-swap included)."""
    if not tt.available():
        pytest.skip(tt.MISSING)
    program = ttlc.parse(FAULTS[name].text, FILE)
    code, listing = (BACKEND.emit(program, stage, checked=True) for stage in ("tilebc", "tile-text"))
    ok, log = tt.compile_cubin(code, "sm_90")
    assert ok, log
    assert tt.normalise(tt.disassemble(code)) == tt.normalise(listing)
