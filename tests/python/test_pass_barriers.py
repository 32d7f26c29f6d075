"""insert-barrier, insert-lifetime-stop, work-group-size and set-stack-ptr on the interpreter.

The interpreter runs collective instructions with implicit barriers: its checked mode
forgets local-memory accesses at the start and end of every SPMD region.  A machine that
runs lowered code has no such barriers -- after lower-linalg and lower-foreach, the
barriers insert-barrier places are all there is.  The ``explicit_barriers`` fixture makes
checked mode see what such a machine sees: SPMD region boundaries no longer end the
race-tracking interval, only ``barrier.local`` does (also at collective level).  Under it,
the kernels below race without insert-barrier and are race-free with it, with results
identical to the unchanged program's; removing any one of the inserted barriers brings a
race back (so none of them is superfluous).
"""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

import ttlc
from ttlc.check.verifier import verify
from ttlc.interp import checks, table
from ttlc.ir import rewrite
from ttlc.passes import PassContext, run_passes
from ttlc.target import TARGETS, get_target
from ttlc.testing import generate


# ---- helpers ------------------------------------------------------------------------------------
@pytest.fixture
def explicit_barriers(monkeypatch):
    """Checked mode as a machine without implicit barriers around SPMD regions sees it."""
    monkeypatch.setattr(checks, "region_boundary", lambda wg: None)
    original = table.SEMANTICS["barrier"]

    def barrier(wg, inst, mask):
        if wg.checked and mask is None:  # a barrier between collective instructions
            checks.barrier(wg, inst)
        return original(wg, inst, mask)

    monkeypatch.setitem(table.SEMANTICS, "barrier", barrier)


def parse(text: str):
    return ttlc.parse(textwrap.dedent(text))


def apply(program, *passes, target="interp"):
    run_passes(program, list(passes), PassContext(target=get_target(target), verify_each=True))
    return program


def run(program, args, checked=False, grid=(1, 1, 1)):
    """Run the program's first kernel on copies of args; returns the copies."""
    args = [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]
    module = ttlc.compile(program, target="interp", checked=checked)  # finds races
    module[program.functions[0].name](*args, grid=grid)
    return args


def barriers(program):
    return [(region, inst) for f in program.functions
            for region, inst in rewrite.walk_with_parent(f.body) if inst.opcode == "barrier"]


def _arrays(args):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += [x for x in a if isinstance(x, np.ndarray)]
        elif isinstance(a, ttlc.Group):
            out += [x for x in a.arrays if isinstance(x, np.ndarray)]
    return out


#: work-item id 0..63 in a work-group of 64 (4 subgroups of 16)
ITEM = """
        %sg = subgroup_linear_id : i32
        %lid = subgroup_local_id : i32
        %c16 = constant 16 : i32
        %t = mul %sg, %c16 : i32
        %i32 = add %t, %lid : i32
        %i = cast %i32 : index
        %c1 = constant 1 : index
        %c64 = constant 64 : index
        %j1 = add %i, %c1 : index
        %j = rem %j1, %c64 : index"""

#: local memory written by one parallel region, read shifted by one work-item in the next
SHIFT = f"""
func @shift(%out: memref<f32x64>) attributes{{subgroup_size=16, work_group_size=[64,1]}} {{
    %L = alloca : memref<f32x64,local>
    parallel {{{ITEM}
        %f = cast %i32 : f32
        store %f, %L[%i]
    }}
    parallel {{{ITEM}
        %v = load %L[%j] : f32
        store %v, %out[%i]
    }}
}}
"""

#: a loop: iteration k > 0 reads what iteration k - 1 wrote (the back edge), and the
#: write of an iteration follows the read of the same iteration (write after read)
LOOP = f"""
func @loop(%out: memref<f32x64>) attributes{{subgroup_size=16, work_group_size=[64,1]}} {{
    %L = alloca : memref<f32x64,local>
    %c0 = constant 0 : index
    %c3 = constant 3 : index
    for %k=%c0,%c3 {{
        %later = greater_than %k, %c0 : bool
        if %later {{
            parallel {{{ITEM}
                %v = load %L[%j] : f32
                %o = load %out[%i] : f32
                %s = add %o, %v : f32
                store %s, %out[%i]
            }}
        }}
        parallel {{{ITEM}
            %ik = add %i, %k : index
            %f = cast %ik : f32
            store %f, %L[%i]
        }}
    }}
}}
"""

#: both branches of an if write local memory that a later region reads
BRANCHES = f"""
func @branches(%out: memref<f32x64>, %flag: i32) attributes{{subgroup_size=16, work_group_size=[64,1]}} {{
    %L = alloca : memref<f32x64,local>
    %zero = constant 0 : i32
    %c = equal %flag, %zero : bool
    if %c {{
        parallel {{{ITEM}
            %f = cast %i32 : f32
            store %f, %L[%i]
        }}
    }} else {{
        parallel {{{ITEM}
            %two = constant 2 : i32
            %d = mul %i32, %two : i32
            %f = cast %d : f32
            store %f, %L[%i]
        }}
    }}
    parallel {{{ITEM}
        %v = load %L[%j] : f32
        store %v, %out[%i]
    }}
}}
"""

#: foreach: 64 iterations on 32 work-items (two chunks), read shifted by the next foreach
FOREACH = """
func @chunks(%out: memref<f32x64>) attributes{subgroup_size=16, work_group_size=[32,1]} {
    %L = alloca : memref<f32x64,local>
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %c64 = constant 64 : index
    foreach (%i)=(%c0),(%c64) {
        %f = cast %i : f32
        store %f, %L[%i]
    }
    foreach (%i)=(%c0),(%c64) {
        %j1 = add %i, %c1 : index
        %j = rem %j1, %c64 : index
        %v = load %L[%j] : f32
        store %v, %out[%i]
    }
}
"""

SHIFTED = ((np.arange(64) + 1) % 64).astype(np.float32)

#: (kernel, arguments, expected out, number of barriers the pass inserts)
CASES = {
    "shift": (SHIFT, lambda: [np.zeros(64, np.float32)], SHIFTED, 1),
    # L_k[i] = i + k; out[i] = L_0[i+1] + L_1[i+1]; barriers: before the read (back edge)
    # and before the write (after the read of the same iteration)
    "loop": (LOOP, lambda: [np.zeros(64, np.float32)], 2 * SHIFTED + 1, 2),
    "branch_then": (BRANCHES, lambda: [np.zeros(64, np.float32), 0], SHIFTED, 1),
    "branch_else": (BRANCHES, lambda: [np.zeros(64, np.float32), 1], 2 * SHIFTED, 1),
    "foreach": (FOREACH, lambda: [np.zeros(64, np.float32)], SHIFTED, 1),
}


# ---- insert-barrier: races without it, none with it ------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_code_races_without_barriers(name, explicit_barriers):
    text, args, _, _ = CASES[name]
    with pytest.raises(ttlc.KernelError, match="data race on local memory"):
        run(parse(text), args(), checked=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_insert_barrier_makes_lowered_code_race_free(name, explicit_barriers):
    text, args, expected, count = CASES[name]
    reference = run(parse(text), args())
    program = apply(parse(text), "insert-barrier")
    assert len(barriers(program)) == count, str(program)
    assert all(inst.modifier("local") for _, inst in barriers(program)), str(program)
    out = run(program, args(), checked=True)
    np.testing.assert_array_equal(out[0], expected)
    for a, b in zip(_arrays(out), _arrays(reference)):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_inserted_barrier_is_needed(name, explicit_barriers):
    text, args, _, count = CASES[name]
    for k in range(count):
        program = apply(parse(text), "insert-barrier")
        region, inst = barriers(program)[k]
        rewrite.erase(region, inst)
        with pytest.raises(ttlc.KernelError, match="data race on local memory"):
            run(program, args(), checked=True)


def test_barrier_placement_in_loop():
    program = apply(parse(LOOP), "insert-barrier")
    body = program.functions[0].body
    loop = next(i for i in body.instructions if i.opcode == "for")
    assert not any(i.opcode == "barrier" for i in body.instructions), "none before the loop"
    then = next(i for i in loop.regions[0].instructions if i.opcode == "if").regions[0]
    assert [i.opcode for i in then.instructions] == ["barrier", "parallel"]
    ops = [i.opcode for i in loop.regions[0].instructions]
    assert ops[-2:] == ["barrier", "parallel"]


def test_insert_barrier_is_idempotent():
    for text, *_ in CASES.values():
        once = str(apply(parse(text), "insert-barrier"))
        assert str(apply(ttlc.parse(once), "insert-barrier")) == once


# ---- lowered collective instructions ------------------------------------------------------------
BLAS = """
func @blas(%A: memref<f32x32x32>, %B: memref<f32x32x32>, %C: memref<f32x32x32>) attributes{subgroup_size=16, work_group_size=[32,2]} {
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    %T = alloca : memref<f32x32x32,local>
    gemm %one, %A, %B, %zero, %T
    axpby %one, %T, %zero, %C
}
"""


def _lower(text):
    program = parse(text)
    try:
        apply(program, "insert-lifetime-stop", "lower-linalg", "lower-foreach")
    except Exception as e:  # another pass in progress: not this test's subject
        pytest.skip(f"lowering failed: {type(e).__name__}: {e}")
    return program


def test_lowered_blas_needs_the_barrier(explicit_barriers):
    rng = np.random.default_rng(1)
    args = [np.asfortranarray(rng.integers(-4, 5, (32, 32)).astype(np.float32)) for _ in range(2)]
    args.append(np.zeros((32, 32), np.float32, order="F"))
    lowered = _lower(BLAS)
    if not any(i.opcode == "parallel" for i in lowered.functions[0].body.walk()):
        pytest.skip("lower-linalg does not lower gemm/axpby yet")
    with pytest.raises(ttlc.KernelError, match="data race on local memory"):
        run(lowered, args, checked=True)
    program = apply(_lower(BLAS), "insert-barrier")
    out = run(program, args, checked=True)
    np.testing.assert_array_equal(out[2], args[0] @ args[1])


# ---- generated programs --------------------------------------------------------------------------
SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_programs_keep_results(seed, explicit_barriers):
    """insert-lifetime-stop, set-stack-ptr and insert-barrier change no result, the IR
    verifies after each, lifetimes never end too early (checked mode would say so), and
    with explicit barriers only the program is race-free."""
    case = generate(seed)
    reference = case.make_args()
    ttlc.compile(case.text, target="interp")[case.kernel_name](*reference, grid=case.grid)
    program = apply(ttlc.parse(case.text), "insert-lifetime-stop", "set-stack-ptr",
                    "insert-barrier")
    allocas = [i for f in program.functions for i in f.body.walk() if i.opcode == "alloca"]
    stops = [i.slots["object"] for f in program.functions for i in f.body.walk()
             if i.opcode == "lifetime_stop"]
    assert sorted(id(a.result) for a in allocas) == sorted(id(v) for v in stops)
    assert all(isinstance(a.attrs.get("stack_ptr"), int) for a in allocas)
    args = case.make_args()
    ttlc.compile(program, target="interp", checked=True)[case.kernel_name](*args, grid=case.grid)
    for a, b in zip(_arrays(args), _arrays(reference)):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("seed", range(20))
def test_generated_programs_lowered_are_race_free(seed, explicit_barriers):
    """After lower-linalg and lower-foreach, insert-barrier leaves no race."""
    case = generate(seed)
    program = ttlc.parse(case.text)
    try:
        apply(program, "insert-lifetime-stop", "lower-linalg", "lower-foreach")
    except Exception as e:
        pytest.skip(f"lowering failed: {type(e).__name__}: {e}")
    apply(program, "insert-barrier")
    ttlc.compile(program, target="interp", checked=True)[case.kernel_name](*case.make_args(),
                                                                 grid=case.grid)


# ---- insert-lifetime-stop -------------------------------------------------------------------------
LIFETIMES = """
func @lifetimes(%out: memref<f32x64>) attributes{subgroup_size=16, work_group_size=[64,1]} {
    %L = alloca : memref<f32x64,local>
    %M = alloca : memref<f32x8x8,local>
    %F = fuse %M[0,1] : memref<f32x64,local>
    %c0 = constant 0 : index
    %c2 = constant 2 : index
    for %k=%c0,%c2 {
        %T = alloca : memref<f32x64,local>
        parallel {
            %lid = subgroup_local_id : i32
            %sg = subgroup_linear_id : i32
            %c16 = constant 16 : i32
            %t = mul %sg, %c16 : i32
            %i32 = add %t, %lid : i32
            %i = cast %i32 : index
            %f = cast %i32 : f32
            store %f, %T[%i]
            %v = load %T[%i] : f32
            store %v, %L[%i]
            store %v, %F[%i]
        }
    }
    %one = constant 1.0 : f32
    axpby %one, %L, %one, %out
    axpby %one, %F, %one, %out
}
"""


def test_lifetime_stop_keeps_results_in_checked_mode():
    reference = run(parse(LIFETIMES), [np.ones(64, np.float32)])
    program = apply(parse(LIFETIMES), "insert-lifetime-stop")
    text = str(program)
    # %M lives as long as its view %F: it stops after the last axpby, after %L
    assert re.search(r"axpby %one, %L, %one, %out\n\s*lifetime_stop %L\n\s*axpby %one, %F, "
                     r"%one, %out\n\s*lifetime_stop %M\n}", text), text
    assert re.search(r"store %v, %F\[%i\]\n\s*}\n\s*lifetime_stop %T\n\s*}", text), text
    out = run(program, [np.ones(64, np.float32)], checked=True)
    np.testing.assert_array_equal(out[0], reference[0])
    np.testing.assert_array_equal(out[0], 1 + 2 * np.arange(64))


def test_lifetime_stop_before_a_use_is_caught():
    """The checked interpreter catches a lifetime_stop placed too early (the test above
    relies on it)."""
    program = apply(parse(LIFETIMES), "insert-lifetime-stop")
    body = program.functions[0].body
    stop = next(i for i in body.instructions if i.opcode == "lifetime_stop"
                and i.slots["object"].name == "M")
    rewrite.erase(body, stop)
    first_axpby = next(i for i in body.instructions if i.opcode == "axpby")
    rewrite.insert_before(body, first_axpby, [stop])
    with pytest.raises(ttlc.KernelError, match="after its lifetime ended"):
        run(program, [np.ones(64, np.float32)], checked=True)


# ---- work-group-size ---------------------------------------------------------------------------------
#: kernels without attributes whose results do not depend on the work-group size
INDEPENDENT = {
    "gemm": ("""
        func @gemm(%A: memref<i32x?x?>, %B: memref<i32x?x?>, %C: memref<i32x?x?>) {
            %one = constant 1 : i32
            gemm %one, %A, %B, %one, %C
        }""", lambda rng: [rng.integers(-9, 9, (40, 24)), rng.integers(-9, 9, (24, 37)),
                           rng.integers(-9, 9, (40, 37))]),
    "gemv_f64": ("""
        func @gemv(%A: memref<f64x64x32>, %x: memref<f64x32>, %y: memref<f64x64>) {
            %one = constant 1.0 : f64
            gemv %one, %A, %x, %one, %y
        }""", lambda rng: [rng.integers(-9, 9, (64, 32)).astype(np.float64),
                           rng.integers(-9, 9, 32).astype(np.float64),
                           rng.integers(-9, 9, 64).astype(np.float64)]),
    "foreach_tile": ("""
        func @tiles(%A: memref<i32x50x40>) {
            %c0 = constant 0 : index
            %c40 = constant 40 : index
            %c50 = constant 50 : index
            foreach_tile (%i,%j)=(%c0,%c0),(%c50,%c40) as (%m,%n)<=(32,8) {
                %m32 = cast %m : i32
                %n32 = cast %n : i32
                %v = load %A[%i,%j] : i32
                %s = add %m32, %n32 : i32
                %w = add %v, %s : i32
                store %w, %A[%i,%j]
            }
        }""", lambda rng: [rng.integers(-9, 9, (50, 40))]),
    "foreach": ("""
        func @items(%A: memref<i32x100>) {
            %c0 = constant 0 : index
            %c100 = constant 100 : index
            foreach (%i)=(%c0),(%c100) {
                %v = load %A[%i] : i32
                %w = mul %v, %v : i32
                store %w, %A[%i]
            }
        }""", lambda rng: [rng.integers(-9, 9, 100)]),
}


def _fortran(arrays, dtype=None):
    return [np.asfortranarray(a.astype(dtype or (np.int32 if a.dtype.kind == "i" else a.dtype)))
            for a in arrays]


@pytest.mark.parametrize("name", sorted(INDEPENDENT))
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_work_group_size_keeps_results(name, target):
    text, make = INDEPENDENT[name]
    args = _fortran(make(np.random.default_rng(7)))
    reference = run(parse(text), args)
    program = apply(parse(text), "work-group-size", target=target)
    func = program.functions[0]
    t = get_target(target)
    sgs, (x, y) = func.subgroup_size, func.work_group_size
    assert sgs in t.subgroup_sizes and x % sgs == 0 and x * y <= t.max_work_group_size
    verify(program)
    out = run(program, args, checked=True)
    for a, b in zip(out, reference):
        assert a.tobytes() == b.tobytes()


def test_work_group_size_honours_given_attributes():
    program = apply(parse("""
        func @a() attributes{work_group_size=[64,2]} {
        }
        func @b() attributes{subgroup_size=32} {
        }
        func @c() attributes{subgroup_size=8, work_group_size=[24,3]} {
        }"""), "work-group-size", target="cpu")
    a, b, c = program.functions
    assert (a.subgroup_size, a.work_group_size) == (16, (64, 2))
    assert (b.subgroup_size, b.work_group_size) == (32, (32, 1))
    assert (c.subgroup_size, c.work_group_size) == (8, (24, 3))


def test_work_group_size_rejects_what_the_target_cannot_run():
    with pytest.raises(ttlc.CompileError, match="not supported by target nvidia"):
        apply(parse("func @k() attributes{subgroup_size=16} {\n}"), "work-group-size",
              target="nvidia")
    with pytest.raises(ttlc.CompileError, match="exceeds the maximum"):
        apply(parse("func @k() attributes{work_group_size=[1024,2]} {\n}"), "work-group-size")


# ---- set-stack-ptr -------------------------------------------------------------------------------------
def test_stack_pointers_reuse_memory_and_are_not_printed():
    from ttlc.passes.gcd import stack_size

    text = """
        func @k() {
            %A = alloca : memref<f32x16,local>
            %B = alloca {alignment=4} : memref<f32x3,local>
            lifetime_stop %A
            %C = alloca : memref<f32x16,local>
            %D = alloca : memref<f64x4,local>
        }"""
    program = apply(parse(text), "set-stack-ptr")
    ptrs = {i.result.name: i.attrs["stack_ptr"] for i in program.functions[0].body.walk()
            if i.opcode == "alloca"}
    # %A [0,64) %B [64,76) (alignment 4); %A ends: %C reuses [0,64); %D at 128 (64-aligned)
    assert ptrs == {"A": 0, "B": 64, "C": 0, "D": 128}
    assert stack_size(program.functions[0]) == 160
    assert "stack_ptr" not in str(program)
    assert str(program) == str(parse(text))
