"""Checked cuda-tile: data races on local memory and barriers not reached by the whole
work-group (docs/cuda-tile.md, "Checked mode"; tensor-language.txt, "Barrier" and the
local address space), run on the Tile IR interpreter (``simulate``).  Each launch must
raise, word for word, the KernelError the reference interpreter raises checked, or, where
the interpreter finds nothing, nothing and the interpreter's results.  Target cuda runs
the same table through a fake driver (tests/python/test_cuda.py).

The kernels are those of test_interp_checked.py (written from the language reference and
checked there against hand-computed findings) and a few more: a coopmatrix store racing
with scalar reads, a work-group whose size is not a power of two (the tile of work-items
has padding lanes), complex numbers, a barrier in an ``if`` on the local id.
"""
from __future__ import annotations

import os
import textwrap
from typing import Callable, NamedTuple, Optional

import numpy as np
import pytest

import ttlc
from ttlc.backends import BACKENDS
from ttlc.backends.tile import simulate, text
from ttlc.backends.tile.backend import translate

import test_interp_checked as K
import tile_testing as tt

FILE = "races.ttl"


def f32(x) -> np.ndarray:
    return np.asfortranarray(np.asarray(x, np.float32))


class Launch(NamedTuple):
    text: str
    kernel: str
    args: Callable[[], tuple]
    grid: tuple = (1, 1, 1)
    #: a phrase the finding must hold (checked by hand against the kernel), None: none
    says: Optional[str] = None


#: COOP_LOCAL's subgroups store their blocks, then each work-item reads an element of the
#: other subgroup's block: a scalar read racing with a coopmatrix store
COOP_SCALAR = K.COOP_LOCAL[:K.COOP_LOCAL.index("        %u = ")] + """\
        BARRIER
        %l = subgroup_local_id : i32
        %li = cast %l : index
        %me = add %x, %li : index
        %c32 = constant 32 : index
        %r0 = add %me, %c16 : index
        %r = rem %r0, %c32 : index
        %v = load %tmp[%r, %c0] : f32   ; OFFENDING
        store %v, %B[%me, %c0]
    }
}
"""

#: 48 work-items: a tile of 64 whose last 16 lanes never run
PADDED = """\
func @ring(%B: memref<f32x48>) attributes {subgroup_size=16, work_group_size=[16,3]} {
    %tmp = alloca : memref<c32x48,local>
    parallel {
        %x = subgroup_local_id : i32
        %y = subgroup_id.y : i32
        %c16 = constant 16 : i32
        %yy = mul %y, %c16 : i32
        %l = add %x, %yy : i32
        %i = cast %l : index
        %f = cast %l : f32
        %v = cast %f : c32
        store %v, %tmp[%i]
        BARRIER
        %c1 = constant 1 : index
        %c48 = constant 48 : index
        %j0 = add %i, %c1 : index
        %j = rem %j0, %c48 : index
        %u = load %tmp[%j] : c32   ; OFFENDING
        %r = re %u : f32
        store %r, %B[%i]
    }
}
"""

LOCAL_ID_BARRIER = """\
func @early(%A: memref<f32x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %x = subgroup_local_id : i32
        %c5 = constant 5 : i32
        %few = less_than %x, %c5 : bool
        if %few {
            barrier   ; OFFENDING
        }
    }
}
"""

#: a barrier in foreach: its last trip runs the points left, on part of the work-group
FOREACH_BARRIER = """\
func @fe(%A: memref<f32x40>, %n: index) attributes {subgroup_size=16, work_group_size=[16,1]} {
    %tmp = alloca : memref<f32x40,local>
    %c0 = constant 0 : index
    foreach (%i) = (%c0), (%n) {
        %v = load %A[%i] : f32
        store %v, %tmp[%i]
        barrier.local   ; OFFENDING
        %w = load %tmp[%i] : f32
        store %w, %A[%i]
    }
}
"""

#: FOREACH with a barrier.local in a branch no work-item takes: not an interval's end
FOREACH_UNTAKEN = K.FOREACH.replace("""        store %v, %tmp[%j]   ; OFFENDING""", """\
        %c99 = constant 99 : index
        %never = greater_than %i, %c99 : bool
        if %never {
            barrier.local
        }
        store %v, %tmp[%j]   ; OFFENDING""")

#: the interpreter reports the conflict with the kind of access made first in the interval
#: (the write)
SECOND_WRITE = K.TWO_KINDS.replace("FIRST", K.WRITE_I).replace("SECOND", K.READ_I)

A256 = lambda: (f32(np.arange(256).reshape(16, 16)), f32(np.zeros((16, 16))))  # noqa: E731
A512 = lambda: (f32(np.arange(512).reshape(32, 16)), f32(np.zeros((32, 16))))  # noqa: E731
RACE, BARRIER = "data race on local memory", "barrier not reached by all work-items"

LAUNCHES = {
    # read after write across subgroups, with no barrier, an unfenced one, and barrier.local
    "read_write": Launch(K.TRANSPOSE.replace("BARRIER", ""), "transpose", A256, (1, 2, 1),
                         "read of index [0, 1] (element 16) by work-item (1, 0) conflicts with a "
                         "write by work-item (0, 1)"),
    "read_write_unfenced": Launch(K.TRANSPOSE.replace("BARRIER", "barrier.global"), "transpose",
                                  A256, says="has no .local fence"),
    "read_write_ordered": Launch(K.TRANSPOSE.replace("BARRIER", "barrier.local"), "transpose",
                                 A256),
    # two work-items of one store on one element
    "write_write": Launch(K.WRITE_WRITE, "last", lambda: (f32(np.arange(16)), f32(np.zeros(1))),
                          says="work-item (6, 0): " + RACE),
    "first_kind_made": Launch(SECOND_WRITE, "next", lambda: (f32(np.zeros(16)),),
                              says="write of index [1] (element 1) by work-item (0, 0) conflicts "
                                   "with a write by work-item (1, 0)"),
    "atomic_atomic": Launch(K.ATOMICS.replace("READ", ""), "count",
                            lambda: (np.arange(64, dtype=np.int32) * 7 % 4, np.zeros(4, np.int32))),
    "read_atomic": Launch(K.ATOMICS.replace("READ", "%peek = load %h[%bin] : i32   ; OFFENDING"),
                          "count", lambda: (np.zeros(64, np.int32), np.zeros(4, np.int32)),
                          (1, 1, 3), "conflicts with an atomic write"),
    "same_work_item": Launch(K.SAME_ITEM, "inplace", lambda: (f32(np.arange(192)),), (2, 1, 1)),
    "coopmatrix_own_block": Launch(K.COOP_LOCAL.replace("BARRIER", "barrier.local"), "stage", A512),
    "coopmatrix_other_block": Launch(K.COOP_LOCAL.replace("BARRIER", ""), "stage", A512, (1, 2, 1),
                                     "by work-item (0, 0) (subgroup 0) conflicts with a write by "
                                     "work-item (16, 0)"),
    "coopmatrix_scalar": Launch(COOP_SCALAR.replace("BARRIER", ""), "stage", A512,
                                says="read of index [16, 0] (element 16) by work-item (0, 0) "
                                     "conflicts with a write by work-item (16, 0)"),
    "coopmatrix_scalar_ordered": Launch(COOP_SCALAR.replace("BARRIER", "barrier.local"), "stage",
                                        A512),
    "padded_complex": Launch(PADDED.replace("BARRIER", ""), "ring", lambda: (f32(np.zeros(48)),),
                             says="read of index [1] (element 1) by work-item (0, 0) conflicts "
                                  "with a write by work-item (1, 0)"),
    "padded_complex_ordered": Launch(PADDED.replace("BARRIER", "barrier.local"), "ring",
                                     lambda: (f32(np.zeros(48)),)),
    "regions": Launch(K.REGIONS, "two_phases", lambda: (f32(np.arange(16)),)),
    "foreach_points": Launch(K.FOREACH, "fold", lambda: (f32(np.arange(40)), 40),
                             says="in another chunk of foreach iterations"),
    "foreach_untaken_barrier": Launch(FOREACH_UNTAKEN, "fold", lambda: (f32(np.arange(40)), 40),
                                      says="in another chunk of foreach iterations"),
    "foreach_apart": Launch(K.FOREACH, "fold", lambda: (f32(np.arange(40)), 20)),
    # barriers: in an if on the local id, on the subgroup, in a loop of ragged trip counts
    "barrier_local_id": Launch(LOCAL_ID_BARRIER, "early", lambda: (f32(np.zeros(16)),),
                               says="work-item (5, 0): " + BARRIER + " of the work-group: "
                                    "work-item (0, 0) waits here"),
    "barrier_subgroup": Launch(K.DIVERGENT_BARRIER, "halves", lambda: (f32(np.zeros(32)),),
                               (1, 1, 2), "work-item (0, 1): " + BARRIER),
    "barrier_ragged_loop": Launch(K.LOOP_BARRIER, "ragged",
                                  lambda: (np.where(np.arange(16) == 6, 2, 3).astype(np.int64),),
                                  (2, 1, 1), "work-item (6, 0): " + BARRIER),
    "barrier_even_loop": Launch(K.LOOP_BARRIER, "ragged", lambda: (np.full(16, 3, np.int64),),
                                (2, 1, 1)),
    "barrier_foreach_whole_trips": Launch(FOREACH_BARRIER, "fe", lambda: (f32(np.arange(40)), 32)),
    "barrier_foreach_last_trip": Launch(FOREACH_BARRIER, "fe", lambda: (f32(np.arange(40)), 20),
                                        says="work-item (4, 0): " + BARRIER),
    "barrier_if_all": Launch(K.CONVERGENT_IF, "both", lambda: (f32(np.zeros(32)),)),
}


def source(launch: Launch) -> str:
    return textwrap.dedent(launch.text)


def outcome(run: Callable[[tuple], None], launch: Launch):
    """(the finding's message or None, the arguments after the launch)."""
    args = launch.args()
    try:
        run(args)
    except ttlc.KernelError as e:
        return str(e), args
    return None, args


def interpreted(launch: Launch):
    module = ttlc.compile(source(launch), target="interp", checked=True, filename=FILE)
    return outcome(lambda args: module[launch.kernel](*args, grid=launch.grid), launch)


def assert_alike(launch: Launch, got) -> None:
    """The interpreter's finding word for word, or none and its results; the finding
    holds what the kernel was written to make."""
    (want, expected), (message, args) = interpreted(launch), got
    assert message == want
    if launch.says is None:
        assert want is None, want
        for a, b in zip(args, expected):
            np.testing.assert_array_equal(a, b)
    else:
        assert launch.says in want and want.startswith(f"{FILE}:"), want
        if "OFFENDING" in launch.text:
            assert want.startswith(f"{FILE}:{K.line_of(launch.text, 'OFFENDING')}."), want


@pytest.mark.parametrize("name", LAUNCHES)
def test_races_and_barriers_are_found_as_the_interpreter_finds_them(name):
    launch = LAUNCHES[name]
    program = ttlc.parse(source(launch), FILE)
    module = translate(program, checked=True)
    k = [f.name for f in program.functions].index(launch.kernel)
    assert_alike(launch, outcome(lambda args: simulate.run(module.entries[k], program.functions[k],
                                                           args, launch.grid, FILE), launch))


def test_the_shadow_is_cleared_where_it_is_made(monkeypatch):
    """A GPU's alloca holds what was there before: with every alloca filled with ones
    (large actors everywhere), race-free launches still find nothing and racy ones what
    they found on zeroed memory."""
    zeroed = simulate.SEMANTICS["alloca"]

    def dirty(f, op, a):
        address = zeroed(f, op, a)
        element = simulate.dtype(op.results[0].type.element.pointee)
        size = op.attrs["num_elem"] * np.dtype(element).itemsize
        start = int(address[0])
        f.memory.write(np.arange(start, start + size, dtype=np.int64), np.full(size, 0x7f, np.uint8))
        return address
    monkeypatch.setitem(simulate.SEMANTICS, "alloca", dirty)
    for name in ("read_write_ordered", "coopmatrix_scalar_ordered", "foreach_apart", "read_atomic"):
        test_races_and_barriers_are_found_as_the_interpreter_finds_them(name)


def test_unchecked_and_local_free_code_has_no_shadow():
    """Unchecked code has no shadow (the kernel's alloca alone) and no barrier test;
    checked code of a kernel without local memory, or using it in collective code alone,
    has no shadow either."""
    program = ttlc.parse(source(LAUNCHES["read_write"]), FILE)
    plain, checked = (text.print_module(translate(program, checked=c)) for c in (False, True))
    assert plain.count("alloca") == 1 and checked.count("alloca") == 3  # + shadow, registers
    assert "atomic_rmw_tko" not in plain and "atomic_rmw_tko" in checked
    barrier = ttlc.parse(source(LAUNCHES["barrier_subgroup"]), FILE)
    assert "alloca" not in text.print_module(translate(barrier, checked=True))
    collective = ttlc.parse("""func @k(%A: memref<f32x4>) {
        %tmp = alloca : memref<f32x4,local>
        %c0 = constant 0 : index
        %v = load %A[%c0] : f32
        store %v, %tmp[%c0]
    }""", FILE)  # local memory outside SPMD regions: no work-items to race
    assert text.print_module(translate(collective, checked=True)).count("alloca") == 1


#: the modules tileiras compiles in ``make test`` (one of each kind of access and barrier:
#: a cooperative matrix module takes it 10 s or more at -O0); ``make fuzz``
#: (TTLC_TILE_ARCHS=all) compiles every one for both architectures
VALIDATED = list(LAUNCHES) if os.environ.get("TTLC_TILE_ARCHS") == "all" else [
    "read_write_unfenced", "coopmatrix_scalar", "padded_complex", "foreach_points", "read_atomic",
    "barrier_ragged_loop"]


@pytest.mark.parametrize("name", VALIDATED)
def test_checked_modules_are_validated_by_nvidia_tools(name):
    """tileiras compiles the checked module and tileirdisasm prints it back as ttlc prints
    it: shadow allocas, gathers, scatters and atomic min/max included."""
    if not tt.available():
        pytest.skip(tt.MISSING)
    program = ttlc.parse(source(LAUNCHES[name]), FILE)
    backend = BACKENDS["cuda-tile"]
    code, listing = (backend.emit(program, stage, checked=True) for stage in ("tilebc", "tile-text"))
    for arch in tt.archs_for(name):
        ok, log = tt.compile_cubin(code, arch)
        assert ok, (arch, log)
    assert tt.normalise(tt.disassemble(code)) == tt.normalise(listing)
