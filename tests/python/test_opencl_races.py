"""Checked target opencl finds data races on local memory and barriers not reached by the
whole work-group (docs/opencl.md, "Checked mode"), as the interpreter finds them.

The kernels are those of test_interp_checked.py, whose findings are checked there by
hand against the language reference, and a few more of the same kind; each runs checked
on the interpreter and on opencl.  Where the interpreter's choice among the races of a
kernel does not depend on the order it runs work-items in, the two messages must be
equal word for word.  Where it does (work-items of different subgroups racing both ways),
opencl reports the race it met first: then the two messages must name the same two
accesses (instructions and kinds), whichever of them was reported.  Race-free kernels
and uniform barriers must give no finding and the interpreter's results.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import ttlc
from interp_testing import opencl_problem
import test_interp_checked as C

PROBLEM = opencl_problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"target opencl cannot run: {PROBLEM}")


def outcomes(src: str, kernel: str, make_args, grid=(1, 1, 1)) -> dict:
    """Per target (interp, opencl), checked: the KernelError's message, or the arrays of
    the arguments after the run."""
    out = {}
    for target in ("interp", "opencl"):
        module = ttlc.compile(src, target=target, checked=True, filename=C.FILE)
        args = make_args()
        try:
            module[kernel](*args, grid=grid)
            out[target] = [np.asarray(a).copy() for a in args]
        except ttlc.KernelError as e:
            out[target] = str(e)
    return out


ROTATE = """\
func @rotate(%out: memref<f32x16>) attributes {subgroup_size = 8, work_group_size = [16, 1]} {
    %L = alloca : memref<f32x16, local>
    parallel {
        %i = subgroup_local_id : i32
        %s = subgroup_linear_id : i32
        %c8 = constant 8 : i32
        %t = mul %s, %c8 : i32
        %l = add %t, %i : i32
        %k = cast %l : index
        %x = cast %l : f32
        store %x, %L[%k]
        BARRIER
        %c1 = constant 1 : index
        %c16 = constant 16 : index
        %k1 = add %k, %c1 : index
        %k2 = rem %k1, %c16 : index
        %y = load %L[%k2] : f32
        store %y, %out[%k]
    }
}
"""

ELSE_BARRIER = """\
func @odd(%A: memref<f32x16>) attributes {subgroup_size=8, work_group_size=[8,2]} {
    parallel {
        %x = subgroup_local_id : i32
        %c3 = constant 3 : i32
        %low = less_than %x, %c3 : bool
        if %low {
            %c0 = constant 0 : index
        } else {
            barrier   ; OFFENDING
        }
    }
}
"""

RAGGED_FOREACH = """\
func @ragged(%A: memref<f32x40>, %n: index) attributes {subgroup_size=8, work_group_size=[8,2]} {
    %tmp = alloca : memref<f32x16,local>
    %c0 = constant 0 : index
    foreach (%i) = (%c0), (%n) {
        %c16 = constant 16 : index
        %j = rem %i, %c16 : index
        %v = load %A[%i] : f32
        store %v, %tmp[%j]
        barrier.local   ; OFFENDING
        %w = load %tmp[%j] : f32
        store %w, %A[%i]
        barrier.local
    }
}
"""


def _transpose(barrier):
    return (C.TRANSPOSE.replace("BARRIER", barrier), "transpose",
            lambda: (C.farray(np.arange(256).reshape(16, 16)), C.farray(np.zeros((16, 16)))),
            (1, 2, 1))


def _atomics(read, X):
    return (C.ATOMICS.replace("READ", read), "count",
            lambda: (X.copy(), np.zeros(4, np.int32)), (1, 1, 3))


def _stage(barrier):
    return (C.COOP_LOCAL.replace("BARRIER", barrier), "stage",
            lambda: (C.farray(np.arange(512).reshape(32, 16)), C.farray(np.zeros((32, 16)))),
            (1, 2, 1))


PEEK = "%peek = load %h[%bin] : i32"
HISTOGRAM = (np.arange(64, dtype=np.int32) * 7) % 4

#: kernels with a race or a divergent barrier whose finding the interpreter makes
#: whatever order work-items run in: the same message word for word
SAME_MESSAGE = {
    "write after write by two work-items of one store": (
        C.WRITE_WRITE, "last", lambda: (C.farray(np.arange(16)), C.farray(np.zeros(1))),
        (1, 1, 1)),
    "read of a neighbour's element, barrier without .local fence": (
        ROTATE.replace("BARRIER", "barrier.global"), "rotate", lambda: (np.zeros(16, np.float32),),
        (2, 1, 1)),
    "transpose through local memory, barrier without .local fence": _transpose("barrier.global"),
    "two foreach points writing one element": (
        C.FOREACH, "fold", lambda: (C.farray(np.arange(40)), 40), (1, 1, 1)),
    "barrier in an if on the subgroup id": (
        C.DIVERGENT_BARRIER, "halves", lambda: (C.farray(np.zeros(32)),), (1, 1, 2)),
    "barrier in the else branch of an if on the local id": (
        ELSE_BARRIER, "odd", lambda: (np.zeros(16, np.float32),), (2, 1, 1)),
    "barrier in a loop with a per-work-item trip count": (
        C.LOOP_BARRIER, "ragged",
        lambda: (np.where(np.arange(16) == 6, 2, 3).astype(np.int64),), (2, 1, 1)),
    "barrier in a foreach of 20 points over 16 work-items": (
        RAGGED_FOREACH, "ragged", lambda: (C.farray(np.arange(40)), 20), (1, 1, 1)),
}


@pytest.mark.parametrize("name", SAME_MESSAGE)
def test_findings_read_as_on_the_interpreter(name):
    src, kernel, make_args, grid = SAME_MESSAGE[name]
    found = outcomes(src, kernel, make_args, grid)
    assert isinstance(found["interp"], str), "the interpreter finds nothing"
    assert found["opencl"] == found["interp"]


#: kernels whose work-items of different subgroups race both ways: which access the
#: interpreter reports depends on its lockstep order
EITHER_ACCESS = {
    "read of another subgroup's writes": _transpose(""),
    "plain read of atomically updated elements": _atomics(PEEK, np.zeros(64, np.int32)),
    "coopmatrix read of another subgroup's coopmatrix store": _stage(""),
    "read of a neighbour's element across subgroups": (
        ROTATE.replace("BARRIER", ""), "rotate", lambda: (np.zeros(16, np.float32),), (1, 1, 1)),
}

_RACE = re.compile(r"^\S+?:(\S+): kernel @\w+, group .*?: data race on (local memory \S+): "
                   r"(.+?) of index .* conflicts with an? (.+?) by work-item .* at (\S+) with no "
                   r"barrier\.local")


def racing_accesses(message: str):
    """(memory, {(kind, instruction location)} of the two accesses) of a race message."""
    m = _RACE.match(message)
    assert m, message
    where, memory, kind, other_kind, other = m.groups()
    return memory, {(kind, where), (other_kind, other)}


def test_racing_accesses_are_read_from_the_message():
    message = ("f.ttl:19.18-40: kernel @t, group (0, 0, 0), work-item (4, 0): data race on "
               "local memory %tmp: read of index [0, 4] (element 64) by work-item (4, 0) "
               "conflicts with an atomic write by work-item (0, 0) at 14.13-34 with no "
               "barrier.local in between")
    assert racing_accesses(message) == ("local memory %tmp", {("read", "19.18-40"),
                                                              ("atomic write", "14.13-34")})


@pytest.mark.parametrize("name", EITHER_ACCESS)
def test_races_are_found_whichever_work_item_ran_first(name):
    src, kernel, make_args, grid = EITHER_ACCESS[name]
    found = outcomes(src, kernel, make_args, grid)
    assert isinstance(found["interp"], str), "the interpreter finds nothing"
    assert isinstance(found["opencl"], str), "opencl finds nothing"
    assert racing_accesses(found["opencl"]) == racing_accesses(found["interp"])


#: race-free kernels and barriers every work-item reaches
NO_FINDING = {
    "transpose with barrier.local": _transpose("barrier.local"),
    "transpose with barrier.global.local": _transpose("barrier.global.local"),
    "atomic additions to shared bins": _atomics("", HISTOGRAM),
    "coopmatrix staging with barrier.local": _stage("barrier.local"),
    "a rotation with barrier.local": (
        ROTATE.replace("BARRIER", "barrier.local"), "rotate",
        lambda: (np.zeros(16, np.float32),), (2, 1, 1)),
    "each work-item re-reading its own element": (
        C.SAME_ITEM, "inplace", lambda: (C.farray(np.arange(192)),), (1, 1, 1)),
    "parallel regions in turn": (C.REGIONS, "two_phases", lambda: (C.farray(np.arange(16)),),
                                 (1, 1, 1)),
    "foreach points writing distinct elements": (
        C.FOREACH, "fold", lambda: (C.farray(np.arange(40)), 20), (1, 1, 1)),
    "a loop whose trip count is the same everywhere": (
        C.LOOP_BARRIER, "ragged", lambda: (np.full(16, 3, np.int64),), (2, 1, 1)),
    "barriers in both branches of an if everybody takes": (
        C.CONVERGENT_IF, "both", lambda: (C.farray(np.zeros(32)),), (1, 1, 1)),
    "barrier in a foreach of 32 points over 16 work-items": (
        RAGGED_FOREACH, "ragged", lambda: (C.farray(np.arange(40)), 32), (1, 1, 1)),
}


@pytest.mark.parametrize("name", NO_FINDING)
def test_race_free_kernels_and_uniform_barriers_give_no_finding(name):
    src, kernel, make_args, grid = NO_FINDING[name]
    found = outcomes(src, kernel, make_args, grid)
    assert not isinstance(found["interp"], str), found["interp"]
    assert not isinstance(found["opencl"], str), found["opencl"]
    for got, want in zip(found["opencl"], found["interp"]):
        np.testing.assert_array_equal(got, want)


def test_unchecked_modules_have_no_shadow_and_no_barrier_tests():
    """The checked module of a kernel with local memory and a barrier in a loop has the
    shadow's 64-bit atomics and the work-group collectives; the unchecked one neither."""
    from ttlc.backends.spirv import codegen
    from ttlc.target import get_target

    machine = get_target("opencl")
    program = ttlc.check(RAGGED_FOREACH)
    text = {checked: codegen.generate(codegen.lower(program, machine, checked), machine,
                                      checked).text() for checked in (False, True)}
    for op in ("OpAtomicSMax", "OpGroupAny", "OpGroupAll", "Int64Atomics"):
        assert op in text[True] and op not in text[False], op


LARGE = """\
func @large(%out: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %L = alloca : memref<f32x8192,local>
    parallel {
        %i = subgroup_local_id : i32
        %k = cast %i : index
        %x = cast %i : f32
        store %x, %L[%k]
        %y = load %L[%k] : f32
        store %y, %out[%k]
    }
}
"""


def test_local_memory_the_device_lacks_is_a_compile_error():
    """32 KiB of local memory fit Intel's CPU runtime (256 KiB) unchecked; checked, the
    shadow of its reads and writes (2 x 20 bytes per element) does not: a CompileError
    saying so, not the runtime's OUT_OF_RESOURCES at launch."""
    from ttlc.backends.opencl import device

    found, _ = device.find()
    if found.device.local_mem_size >= 32768 * 11:
        pytest.skip("the device has room for the shadow")
    out = np.zeros(16, np.float32)
    ttlc.compile(LARGE, target="opencl")["large"](out)
    np.testing.assert_array_equal(out, np.arange(16))
    with pytest.raises(ttlc.CompileError, match=r"kernel @large needs 360448 bytes of local "
                                                r"memory, with the 20 bytes .* data races"):
        ttlc.compile(LARGE, target="opencl", checked=True)
