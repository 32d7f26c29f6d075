"""Data races on local memory in checked code of target cpu: what only target cpu can get
wrong (the findings themselves are compared with the interpreter's in
test_interp_checked.py, which runs on both targets, and test_differential.py).

Unchecked code must not change at all; the shadow memory lives in the scratch block,
which the runtime reuses between launches, so a launch must not see an earlier one's
accesses; many work-groups and foreach points must not wear out the actor counters.
"""
from __future__ import annotations

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

from ttlc.backends.cpu import races  # noqa: E402
from ttlc.backends.cpu.module import Artifacts  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ttlc-cache"))


SHIFT = """\
func @shift(%out: memref<f32x64>, %d: index) attributes {subgroup_size=8, work_group_size=[16,1]} {
    %L = alloca : memref<f32x16,local>
    parallel {
        %x = subgroup_local_id : i32
        %s = subgroup_linear_id : i32
        %c8 = constant 8 : i32
        %b = mul %s, %c8 : i32
        %l = add %b, %x : i32
        %i = cast %l : index
        %c16 = constant 16 : index
        %j0 = add %i, %d : index
        %j = rem %j0, %c16 : index
        %v = cast %l : f32
        store %v, %L[%j]
        %w = load %L[%j] : f32
        barrier.local
        %c1 = constant 1 : index
        %k0 = add %j, %c1 : index
        %k = rem %k0, %c16 : index
        %u = load %L[%k] : f32
        %t = add %u, %w : f32
        store %t, %out[%i]
    }
    %c0 = constant 0 : index
    %c64 = constant 64 : index
    foreach (%p) = (%c0), (%c64) {
        %c16 = constant 16 : index
        %q = rem %p, %c16 : index
        %r = load %L[%q] : f32
        store %r, %out[%p]
    }
}
"""


def test_unchecked_code_never_tracks_races(monkeypatch):
    """Unchecked code calls none of the race detection (so its IR is what it was without
    it) and has no shadow memory; checked code has both."""
    program = ttlc.check(SHIFT)
    checked = Artifacts(program, True)
    assert "check_iteration" in str(checked.lowered) and "race." in checked.ir

    def refuse(*args, **kwargs):
        raise AssertionError("unchecked code generation reached the race detection")
    for name in ("setup", "track", "interval", "barrier", "emit_check_iteration"):
        monkeypatch.setattr(races, name, refuse)
    from ttlc.backends.cpu import codegen
    monkeypatch.setitem(codegen.EMITTERS, "check_iteration", refuse)
    unchecked = Artifacts(program, False)
    assert "check_iteration" not in str(unchecked.lowered)
    assert "race." not in unchecked.ir
    assert unchecked.kernels["shift"].local_bytes == 64  # the alloca alone
    assert checked.kernels["shift"].local_bytes > 64


def test_kernels_without_local_memory_get_no_shadow():
    plain = "func @k(%a: memref<f32x4>) { parallel { %c0 = constant 0 : index\n" \
            "%x = load %a[%c0] : f32 } }"
    assert "race." not in Artifacts(ttlc.check(plain), True).ir


def test_no_finding_outlives_its_launch(monkeypatch):
    """Scratch memory (and the shadow in it) is reused by the next launch: a kernel whose
    work-items each touch their own element, shifted by one between launches, has no
    race; a stale shadow would make one (element j+1 was work-item i+1's)."""
    monkeypatch.setenv("TTLC_NUM_THREADS", "2")
    kernel = ttlc.compile(SHIFT, checked=True)["shift"]
    for d in (0, 1, 0, 5):
        out = np.zeros(64, np.float32)
        kernel(out, d, grid=(40, 1, 1))
        # work-item i stored i at element (i + d) mod 16; foreach point p copied element
        # p mod 16
        np.testing.assert_array_equal(out, np.tile((np.arange(16) - d) % 16, 4))


def test_many_work_groups_and_points_keep_races_apart():
    """Actors grow with every interval and foreach point of every work-group: after many
    of them, a race is still a race and own elements are still fine."""
    racy = SHIFT.replace("%r = load %L[%q] : f32", "%r = load %L[%q] : f32\n"
                         "        store %r, %L[%q]")
    kernel = ttlc.compile(racy, checked=True)["shift"]
    with pytest.raises(ttlc.KernelError, match=r"data race on local memory %L: .* in another "
                                               r"chunk of foreach iterations"):
        kernel(np.zeros(64, np.float32), 3, grid=(300, 1, 1))
    ttlc.compile(SHIFT, checked=True)["shift"](np.zeros(64, np.float32), 3, grid=(300, 1, 1))


NEIGHBOUR = """\
func @k(%out: memref<f32x8>) attributes {subgroup_size=4, work_group_size=[8,1]} {
    %L = alloca : memref<f32x8,local>
    parallel {
        %i = subgroup_local_id : i32
        %s = subgroup_linear_id : i32
        %c4 = constant 4 : i32
        %t = mul %s, %c4 : i32
        %l = add %t, %i : i32
        %k = cast %l : index
        %x = cast %l : f32
        %c1 = constant 1 : index
        %c8 = constant 8 : index
        %k1 = add %k, %c1 : index
        %k2 = rem %k1, %c8 : index
        %y = load %L[%k2] : f32
        store %x, %L[%k]
        store %y, %out[%k]
    }
}
"""


def test_consecutive_accesses_are_tracked_like_scattered_ones():
    """The store's lanes write consecutive elements (vector loads and stores of the
    shadow, no gathers): it still conflicts with the neighbour's read before it, and
    both targets say so in the same words."""
    messages = []
    for target in ("interp", "cpu"):
        with pytest.raises(ttlc.KernelError) as info:
            ttlc.compile(NEIGHBOUR, target=target, checked=True)["k"](np.zeros(8, np.float32))
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    # work-item (0, 0) writes element 0, which work-item (7, 0) read (index (7 + 1) mod 8)
    assert ("16.9-24: kernel @k, group (0, 0, 0), work-item (0, 0): data race on local memory "
            "%L: write of index [0] (element 0) by work-item (0, 0) conflicts with a read by "
            "work-item (7, 0) at 15.14-31") in messages[1]
