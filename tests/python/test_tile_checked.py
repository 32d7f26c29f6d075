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
    # Subview: the issue's example, a slice past the end (the launch used to write 2 floats past it)
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


def lanes_i32() -> tuple:
    return (guarded(64, np.int32, 0),)


def spmd(params: str, body: str, work_items: int = 32, before: str = "") -> str:
    """A kernel @g of subgroups of 16 whose SPMD region runs `body` (after `before`)."""
    return (f"func @g({params}) attributes {{subgroup_size=16, work_group_size=[{work_items},1]}} {{\n"
            f"{before}    parallel {{\n        %i = subgroup_local_id : i32\n{body}    }}\n}}")


#: %q: 0 in the first half of each subgroup, 1 in the second
HALVES = """\
        %eight = constant 8 : i32
        %q = div %i, %eight : i32
"""
#: %odd: the odd work-items
ODD = """\
        %two = constant 2 : i32
        %r = rem %i, %two : i32
        %one = constant 1 : i32
        %odd = equal %r, %one : bool
"""
#: the load of an 8 x 8 matrix at row %x of %A, stored to %B
LOAD_AT_X = """\
        %x = cast %q : index
        %c0 = constant 0 : index
        %m = cooperative_matrix_load.n %A[%x, %c0] : coopmatrix<f32x8x8,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %m, %B[%c0, %c0]
"""
STORE_AT_I = """\
        %k = cast %i : index
        store %x, %A[%k]
"""

#: what the language asks of the work-items of a subgroup (tensor-language.txt: the
#: cooperative matrix instructions, subgroup_broadcast, dynamically uniform operands) and
#: of local memory (alloca, lifetime_stop); work-groups of 2 subgroups of 16 (3 in a tile
#: of 4: one padding subgroup), the faulty one the lowest
SUBGROUP_FAULTS = {
    "uniform_lane": Fault(spmd("%A: memref<i32x64>", HALVES + """\
        %x = subgroup_broadcast %i, %q : i32   ; OFFENDING
""" + STORE_AT_I), "other", lanes_i32),
    "uniform_row_position": Fault(spmd("%A: memref<f32x16x8>, %B: memref<f32x8x8>", HALVES + LOAD_AT_X),
                                  "other", lambda: (matrix(16, 8), matrix(8, 8))),
    # a view per work-item, prefetched: its address differs (printed as an address, not
    # as the interpreter's offset in its buffer)
    "uniform_memref": Fault(spmd("%A: memref<f32x16x8>, %B: memref<f32x8x8>", HALVES + """\
        %x = cast %q : index
        %S = subview %A[%x:8, 0:8] : memref<f32x8x8,strided<1,16>>
        %c0 = constant 0 : index
        cooperative_matrix_prefetch 1, %S[%c0, %c0], 8, 8   ; OFFENDING
"""), "other", lambda: (matrix(16, 8), matrix(8, 8))),
    "uniform_number": Fault(spmd("%B: memref<f32x8x8>", """\
        %c5 = constant 5 : i32
        %j = div %i, %c5 : i32
        %w = cast %j : f32
        %h = constant 0.5 : f32
        %v = add %w, %h : f32
        %m = cooperative_matrix_construct %v : coopmatrix<f32x8x8,matrix_acc>   ; OFFENDING
        %c0 = constant 0 : index
        cooperative_matrix_store %m, %B[%c0, %c0]
"""), "other", lambda: (matrix(8, 8),)),
    # uniform in subgroup 0, not in subgroup 1
    "uniform_scalar": Fault(spmd("%A: memref<f32x8x8>, %B: memref<f32x8x8>", HALVES + """\
        %g = subgroup_linear_id : i32
        %qg = mul %q, %g : i32
        %w = cast %qg : f32
        %c0 = constant 0 : index
        %m = cooperative_matrix_load.n %A[%c0, %c0] : coopmatrix<f32x8x8,matrix_acc>
        %s = cooperative_matrix_scale %w, %m : coopmatrix<f32x8x8,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %s, %B[%c0, %c0]
"""), "other", lambda: (matrix(8, 8), matrix(8, 8))),
    "partial_load": Fault(spmd("%A: memref<f32x8x8>, %B: memref<f32x8x8>", """\
        %three = constant 3 : i32
        %is3 = equal %i, %three : bool
        %q = constant 0 : i32
        if %is3 {
""" + LOAD_AT_X + """\
        }
"""), "other", lambda: (matrix(8, 8), matrix(8, 8))),
    # all but work-items 16..24 of subgroup 1 (work-item 16 the first that does not run)
    "partial_reduce": Fault(spmd("%A: memref<f32x16x8>, %B: memref<f32x16x1>", """\
        %c0 = constant 0 : index
        %m = cooperative_matrix_load.n %A[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
        %g = subgroup_linear_id : i32
        %one = constant 1 : i32
        %is1 = equal %g, %one : bool
        %nine = constant 9 : i32
        %low = less_than %i, %nine : bool
        %skip = and %is1, %low : bool
        %true = constant true : bool
        %run = xor %skip, %true : bool
        if %run {
            %r = cooperative_matrix_reduce_add.row %m : coopmatrix<f32x16x1,matrix_acc>   ; OFFENDING
            cooperative_matrix_store %r, %B[%c0, %c0]
        }
""", work_items=48), "other", lambda: (matrix(16, 8), matrix(16, 1))),
    "broadcast_outside": Fault(spmd("%A: memref<i32x64>", """\
        %l = constant 16 : i32
        %x = subgroup_broadcast %i, %l : i32   ; OFFENDING
""" + STORE_AT_I), "other", lanes_i32),
    # the odd work-items broadcast from work-item 2 (work-item 1 the first that runs)
    "broadcast_inactive": Fault(spmd("%A: memref<i32x64>", ODD + """\
        if %odd {
            %x = subgroup_broadcast %i, %two : i32   ; OFFENDING
""" + STORE_AT_I + """\
        }
"""), "other", lanes_i32),
    # a subgroup's access names no work-item, as the interpreter's
    "null_coopmatrix": Fault(spmd("%A: memref<f32x8x8>, %B: memref<f32x8x8>", """\
        %c0 = constant 0 : index
        %m = cooperative_matrix_load.n %A[%c0, %c0] : coopmatrix<f32x8x8,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %m, %B[%c0, %c0]
"""), "null", lambda: (None, matrix(8, 8))),
    "lifetime_collective": Fault("""\
func @g(%A: memref<f32x4>) {
    %L = alloca : memref<f32x4,local>
    %c1 = constant 1 : index
    %v = constant 2.0 : f32
    store %v, %L[%c1]
    lifetime_stop %L
    %w = load %L[%c1] : f32   ; OFFENDING
    store %w, %A[%c1]
}""", "other", lambda: (guarded(4),)),
    # work-items 4..31 store: work-item 4 reports
    "lifetime_spmd": Fault(spmd("%A: memref<f32x32>", """\
        %g = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %gg = mul %g, %c16 : i32
        %w = add %gg, %i : i32
        %k = cast %w : index
        %v = cast %w : f32
        %c3 = constant 3 : i32
        %big = greater_than %w, %c3 : bool
        if %big {
            store %v, %L[%k]   ; OFFENDING
        }
""", before="""\
    %L = alloca : memref<f32x32,local>
    lifetime_stop %L
"""), "other", lambda: (guarded(32),)),
    # the second trip stores after the first trip's lifetime_stop
    "lifetime_loop": Fault("""\
func @g(%A: memref<f32x4>) {
    %L = alloca : memref<f32x4,local>
    %c0 = constant 0 : index
    %c2 = constant 2 : index
    %c1 = constant 1 : index
    for %i = %c0, %c2 {
        %w = load %A[%i] : f32
        store %w, %L[%c1]   ; OFFENDING
        lifetime_stop %L
    }
}""", "other", lambda: (guarded(4),)),
    "lifetime_coopmatrix": Fault(spmd("%A: memref<f32x8x8>", """\
        %c0 = constant 0 : index
        %m = cooperative_matrix_load.n %L[%c0, %c0] : coopmatrix<f32x8x8,matrix_acc>   ; OFFENDING
        cooperative_matrix_store %m, %A[%c0, %c0]
""", before="""\
    %L = alloca : memref<f32x8x8,local>
    lifetime_stop %L
"""), "other", lambda: (matrix(8, 8),)),
    "lifetime_blas": Fault("""\
func @g(%A: memref<f32x8>) {
    %L = alloca : memref<f32x8,local>
    %S = subview %L[2:4] : memref<f32x4,local>
    lifetime_stop %L
    %B = subview %A[0:4] : memref<f32x4>
    %one = constant 1.0 : f32
    axpby %one, %B, %one, %S   ; OFFENDING
}""", "other", lambda: (guarded(8),)),
}
FAULTS.update(SUBGROUP_FAULTS)

#: findings whose words differ from the interpreter's from these words on (a hint on the
#: checked flags; the interpreter names a memref by its buffer's offset, compiled code by
#: its address); every other finding reads as the interpreter's, word for word
APPROXIMATE = {"coopmatrix_load_out_of_bounds": " (use rows_checked", "uniform_memref": " disagree ("}

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
    assert message.split(APPROXIMATE[name])[0] == reference.split(APPROXIMATE[name])[0] \
        if name in APPROXIMATE else message == reference, (message, reference)
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


#: kernels that keep what the language asks of subgroups and local memory where a
#: careless test would not: a lane, number or position uniform among the running
#: work-items only (the others hold other values), coopmatrix instructions under a
#: condition uniform in each subgroup, a padding subgroup (48 work-items in a tile of 64),
#: an alloca in a loop (a new one, alive, in every trip)
PASSING = {
    "broadcast_among_the_running": spmd("%A: memref<i32x64>", ODD + """\
        %g = subgroup_linear_id : i32
        %c16 = constant 16 : i32
        %gg = mul %g, %c16 : i32
        %w = add %gg, %i : i32
        if %odd {
            %g2 = mul %g, %two : i32
            %l = add %r, %g2 : i32
            %x = subgroup_broadcast %w, %l : i32
            %k = cast %w : index
            store %x, %A[%k]
        }
""", work_items=48),
    "construct_among_the_running": spmd("%B: memref<f32x8x8>", ODD + """\
        %w = cast %r : f32
        %z = constant 0.0 : f32
        %m0 = cooperative_matrix_construct %z : coopmatrix<f32x8x8,matrix_acc>
        %m = if %odd -> (coopmatrix<f32x8x8,matrix_acc>) {
            %m1 = cooperative_matrix_construct %w : coopmatrix<f32x8x8,matrix_acc>
            %m2 = cooperative_matrix_scale %w, %m1 : coopmatrix<f32x8x8,matrix_acc>
            yield (%m2)
        } else {
            yield (%m0)
        }
        %c0 = constant 0 : index
        cooperative_matrix_store %m, %B[%c0, %c0]
"""),
    "whole_subgroups_under_a_condition": spmd(
        "%A: memref<f32x16x8>, %B: memref<f32x16x8>, %C: memref<f32x16x1>", """\
        %g = subgroup_linear_id : i32
        %one = constant 1 : i32
        %is1 = equal %g, %one : bool
        if %is1 {
            %x = cast %g : index
            %c0 = constant 0 : index
            %m = cooperative_matrix_load.n %A[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
            %n = cooperative_matrix_load.n %A[%c0, %x] : coopmatrix<f32x16x4,matrix_acc>
            %r = cooperative_matrix_reduce_add.row %m : coopmatrix<f32x16x1,matrix_acc>
            cooperative_matrix_store %r, %C[%c0, %c0]
            cooperative_matrix_store %n, %B[%c0, %x]
        }
""", work_items=48),
    "alloca_per_trip": """\
func @g(%A: memref<f32x4>) {
    %c0 = constant 0 : index
    %c2 = constant 2 : index
    %c1 = constant 1 : index
    for %i = %c0, %c2 {
        %L = alloca : memref<f32x4,local>
        %w = load %A[%i] : f32
        store %w, %L[%c1]
        %x = load %L[%c1] : f32
        %y = add %x, %x : f32
        store %y, %A[%c1]
        lifetime_stop %L
    }
}""",
}


def passing_args(name: str) -> list:
    """Distinct values in every argument (column-major matrices)."""
    program = ttlc.parse(PASSING[name], FILE)
    out = []
    for a in program.functions[0].args:
        t = a.value.type
        dtype = np.int32 if str(t.element) == "i32" else np.float32
        out.append(np.asfortranarray(np.arange(1, int(np.prod(t.shape)) + 1, dtype=dtype)
                                     .reshape(t.shape, order="F")))
    return out


@pytest.mark.parametrize("checked", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("name", PASSING)
def test_kernels_keeping_the_rules_report_nothing_and_write_what_the_interpreter_writes(name, checked):
    """Checked code finds nothing in them; checked or not, it writes what the
    interpreter writes (a uniform operand is the first running work-item's, not the
    subgroup's first work-item's)."""
    want = passing_args(name)
    ttlc.compile(PASSING[name], target="interp", checked=True, filename=FILE)["g"](*want)
    program = ttlc.parse(PASSING[name], FILE)
    got = passing_args(name)
    simulate.run(translate(program, checked=checked).entries[0], program.functions[0], got, (1, 1, 1), FILE)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("element", ["f16", "bf16", "f64", "i8"])
def test_a_non_uniform_number_of_each_type_reads_as_the_interpreters_finding(element):
    """The record holds a float's bits (a bf16 as an f32): the values read back as the
    interpreter prints them."""
    import ml_dtypes

    fault = Fault(spmd(f"%B: memref<{element}x16x16>", HALVES + f"""\
        %w = cast %q : {element}
        %m = cooperative_matrix_construct %w : coopmatrix<{element}x16x16,matrix_acc>   ; OFFENDING
        %c0 = constant 0 : index
        cooperative_matrix_store %m, %B[%c0, %c0]
"""), "other", lambda: (np.zeros((16, 16), {"f16": np.float16, "bf16": ml_dtypes.bfloat16,
                                            "f64": np.float64, "i8": np.int8}[element], order="F"),))
    program = ttlc.parse(fault.text, FILE)
    with pytest.raises(ttlc.KernelError) as e:
        simulate.run(translate(program, checked=True).entries[0], program.functions[0], fault.args(),
                     fault.grid, FILE)
    assert str(e.value) == interp_finding(fault)
    assert "(1" in str(e.value) and "0 at subgroup-local id 0)" in str(e.value)


def _first_class() -> dict:
    import test_tile_backend

    return test_tile_backend.FIRST_CLASS


@pytest.mark.parametrize("name", sorted(_first_class()))
def test_every_kind_of_kernel_checked_reports_nothing_and_writes_what_the_interpreter_writes(name):
    """The first class of target cuda-tile (one kernel of each kind: BLAS, SPMD regions,
    foreach_tile, coopmatrices, subgroup operations, allocas), checked: no finding where
    the interpreter has none, and the same results."""
    import test_tile_backend

    def run(text, kernel, args, grid):
        program = ttlc.parse(text, FILE)
        k = [f.name for f in program.functions].index(kernel)
        simulate.run(translate(program, checked=True).entries[k], program.functions[k], args, grid, FILE)
    test_tile_backend._compare_meaning(_first_class()[name], "k", run=run)


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
                                  "division_by_zero", "uniform_memref", "uniform_number",
                                  "partial_reduce", "broadcast_inactive", "lifetime_loop",
                                  "lifetime_coopmatrix"])
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
