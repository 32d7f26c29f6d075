"""Differential testing of target cpu against the reference interpreter.

Generated programs (``ttlc.testing.generate``) run with the same inputs on "interp" and
"cpu" (``ttlc.testing.differential``): integer results must be bit-identical, floating
point within a few hundred units in the last place.  A failing seed is reported with
its program text.  ``TTLC_DIFF_SEEDS=N`` and ``TTLC_DIFF_FIRST_SEED=S`` choose other
seeds; ``make fuzz`` (fuzz/fuzz_differential.py) runs thousands.  Faulty launches
(``compare_fault``: more work-groups than the inputs have) must be reported alike, checked,
on both targets; ``TTLC_FAULT_SEEDS=N`` sets how many.  So must data races on local memory
in generated kernels that share it (``compare_races``); ``TTLC_RACE_SEEDS=N``.  Faulty
launches and data races are reported alike on target opencl too, where its runtime is
installed (``TTLC_OPENCL_FAULT_SEEDS=N``, ``TTLC_OPENCL_RACE_SEEDS=N``).  Run by the
copies target cpu compiles for the arguments of a launch, they agree as well
(``TTLC_COPY_SEEDS=N``).
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import ttlc
from interp_testing import opencl_problem

from ttlc.testing import GeneratedCase
from ttlc.testing.differential import (compare_case, compare_fault, compare_races, compare_seed,
                                       differences)

N_SEEDS = int(os.environ.get("TTLC_DIFF_SEEDS", "96"))
#: generated programs launched on more work-groups than their inputs have (make fuzz: more)
N_FAULTS = int(os.environ.get("TTLC_FAULT_SEEDS", "32"))
#: generated kernels sharing local memory, with and without data races (make fuzz: more)
N_RACES = int(os.environ.get("TTLC_RACE_SEEDS", "40"))
#: faulty launches on target opencl, where its runtime is present (make fuzz: 300); of the
#: next four seeds, three need subgroups of 4, which Intel's CPU runtime lacks
N_OPENCL_FAULTS = int(os.environ.get("TTLC_OPENCL_FAULT_SEEDS", "4"))
#: generated kernels sharing local memory on target opencl (make fuzz: more)
N_OPENCL_RACES = int(os.environ.get("TTLC_OPENCL_RACE_SEEDS", "10"))
#: generated programs run by copies compiled for their arguments, from seed
#: COPY_SEEDS_FROM on (make fuzz: more)
N_COPY_SEEDS = int(os.environ.get("TTLC_COPY_SEEDS", "32"))
COPY_SEEDS_FROM = 400
FIRST_SEED = int(os.environ.get("TTLC_DIFF_FIRST_SEED", "0"))
CHUNKS = 24


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Object code goes to this run's temporary folder, not the user's cache."""
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ttlc-cache"))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_programs_agree(chunk):
    seeds = range(FIRST_SEED + chunk, FIRST_SEED + N_SEEDS, CHUNKS)
    failures = [o for o in map(compare_seed, seeds) if not o.ok]
    assert not failures, (f"{len(failures)} of {len(seeds)} seeds differ between interp "
                          f"and cpu; the first:\n{failures[0].report()}")


@pytest.mark.parametrize("chunk", range(4))
def test_copies_compiled_for_the_arrays_agree(chunk, monkeypatch):
    """Generated programs run by the copies compiled for their arguments
    (``backends.cpu.specialize``, made at the first launch here) agree with the
    interpreter as the kernels do; copies are made for most of them."""
    from ttlc.backends.cpu import specialize

    made = []
    compile_copy = specialize.Specializer._compile

    def counted(self, key):
        launcher = compile_copy(self, key)
        made.append(launcher is not None)
        return launcher

    monkeypatch.setattr(specialize, "SPECIALIZE_AFTER", 1)
    monkeypatch.setattr(specialize.Specializer, "_compile", counted)
    seeds = range(FIRST_SEED + COPY_SEEDS_FROM + chunk,
                  FIRST_SEED + COPY_SEEDS_FROM + N_COPY_SEEDS, 4)
    failures = [o for o in map(compare_seed, seeds) if not o.ok]
    assert not failures, (f"{len(failures)} of {len(seeds)} seeds differ between interp "
                          f"and cpu's copies; the first:\n{failures[0].report()}")
    assert made and all(made), f"{made.count(False)} of {len(made)} copies not compiled"


@pytest.mark.parametrize("chunk", range(4))
def test_faulty_launches_are_found_alike(chunk):
    """Checked interp and checked cpu report the same kind of finding at the same
    instruction when a generated program runs on work-groups its inputs do not have
    (subviews and group members past the batch): ``compare_fault``."""
    seeds = range(FIRST_SEED + chunk, FIRST_SEED + N_FAULTS, 4)
    outcomes = [compare_fault(s) for s in seeds]
    failures = [o for o in outcomes if not o.ok]
    assert not failures, (f"{len(failures)} of {len(seeds)} faulty launches are reported "
                          f"differently; the first:\n{failures[0].report()}")
    assert any(o.detail != "no finding" for o in outcomes)  # faults were made


#: checked modules larger than this take Intel's CPU runtime minutes to build: left out
OPENCL_LARGEST = 1 << 20


def _checked_spirv_bytes(seed: int) -> int:
    """The size of a generated program's checked SPIR-V module for target opencl."""
    from ttlc.backends.spirv import codegen
    from ttlc.target import get_target
    from ttlc.testing import generate

    machine = get_target("opencl")
    try:
        program = ttlc.check(generate(seed).text)
        return len(codegen.generate(codegen.lower(program, machine, True), machine,
                                    True).binary())
    except ttlc.CompileError:
        return 0  # compare_fault says why


@pytest.mark.parametrize("chunk", range(2))
def test_faulty_launches_are_found_alike_on_opencl(chunk):
    """Checked target opencl reports the same kind of finding at the same instruction as
    the interpreter (``compare_fault``); programs whose subgroup size the device lacks
    and modules over ``OPENCL_LARGEST`` are left out, and at least one program must
    run."""
    problem = opencl_problem()
    if problem is not None:
        pytest.skip(f"target opencl cannot run: {problem}")
    seeds = [s for s in range(FIRST_SEED + chunk, FIRST_SEED + N_OPENCL_FAULTS, 2)
             if _checked_spirv_bytes(s) <= OPENCL_LARGEST]
    outcomes = [compare_fault(s, target="opencl") for s in seeds]
    failures = [o for o in outcomes if not o.ok and o.status != "unsupported"]
    assert not failures, (f"{len(failures)} of {len(seeds)} faulty launches are reported "
                          f"differently on opencl; the first:\n{failures[0].report()}")
    assert any(o.ok and o.detail != "no finding" for o in outcomes)


@pytest.mark.parametrize("chunk", range(2))
def test_faulty_races_are_found_alike(chunk):
    """Checked interp and checked cpu report the same data race on local memory at the
    same instruction, or both none (race-free kernels: barriers, own elements, atomics,
    tree reductions): ``compare_races``.  Both kinds of kernel must occur."""
    seeds = range(FIRST_SEED + chunk, FIRST_SEED + N_RACES, 2)
    outcomes = [compare_races(s) for s in seeds]
    failures = [o for o in outcomes if not o.ok]
    assert not failures, (f"{len(failures)} of {len(seeds)} kernels sharing local memory are "
                          f"reported differently; the first:\n{failures[0].report()}")
    assert any("data race" in o.detail for o in outcomes)
    assert any(o.detail == "no finding" for o in outcomes)


def test_faulty_races_are_found_alike_on_opencl():
    """Checked target opencl reports the same data race at the same instruction as the
    interpreter, or both none (``compare_races``); kernels whose subgroup size the device
    lacks are left out.  Both kinds of kernel must occur."""
    problem = opencl_problem()
    if problem is not None:
        pytest.skip(f"target opencl cannot run: {problem}")
    seeds = range(FIRST_SEED, FIRST_SEED + N_OPENCL_RACES)
    outcomes = [o for o in (compare_races(s, target="opencl") for s in seeds)
                if o.status != "unsupported"]
    failures = [o for o in outcomes if not o.ok]
    assert not failures, (f"{len(failures)} of {len(outcomes)} kernels sharing local memory "
                          f"are reported differently on opencl; the first:\n"
                          f"{failures[0].report()}")
    assert any("data race" in o.detail for o in outcomes)
    assert any(o.detail == "no finding" for o in outcomes)


def test_a_finding_on_one_target_only_is_a_difference(monkeypatch):
    """compare_fault can fail: when target cpu reports nothing (here: its kernels do
    nothing) where the interpreter reports a finding, the outcome is "differ"."""
    assert compare_fault(0, extra=0).detail == "no finding"  # the inputs' own grid
    found = compare_fault(0)
    assert found.ok and "kernel @" in found.detail
    real = ttlc.compile

    class Silent:
        def __getitem__(self, name):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(ttlc, "compile", lambda text, target, checked=False: Silent()
                        if target == "cpu" else real(text, target=target, checked=checked))
    outcome = compare_fault(0)
    assert outcome.status == "differ" and "no finding" in outcome.detail


COPY = """func @copy(%a: memref<i32x4>, %b: memref<i32x4>) {
    parallel {
        %i = subgroup_local_id : i32
        %k = cast %i : index
        %n = constant 4 : index
        %inside = less_than %k, %n : bool
        if %inside {
            %x = load %a[%k] : i32
            store %x, %b[%k]
        }
    }
}
"""


def test_a_wrong_result_is_found():
    """Inputs that differ on the second target (cpu) give results that differ: the
    outcome says so and carries the program."""
    calls = []

    def make_args():
        calls.append(1)
        a = np.array([1, 2, 3, 4 + (len(calls) == 2)], dtype=np.int32)
        return [a, np.zeros(4, dtype=np.int32)]

    case = GeneratedCase(COPY, "copy", make_args, (1, 1, 1), seed=-1)
    outcome = compare_case(case)
    assert outcome.status == "differ", outcome.report()
    assert "(3,): 5 vs 4" in outcome.detail and COPY in outcome.report()
    calls.clear()
    case.make_args = lambda: [np.arange(4, dtype=np.int32), np.zeros(4, dtype=np.int32)]
    assert compare_case(case).ok


@pytest.mark.parametrize("dtype", [np.int8, np.int64])
def test_integers_compare_exactly(dtype):
    a = np.arange(6, dtype=dtype)
    b = a.copy()
    assert differences(a, b) is None
    b[4] += 1
    assert "1 of 6 entries differ" in differences(b, a)


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2.0 ** -16), (np.float64, 2.0 ** -40),
                                        (np.complex64, 2.0 ** -16),
                                        (ml_dtypes.bfloat16, 2.0 ** -5)])
def test_floats_compare_within_tolerance(dtype, rtol):
    want = np.array([1.0, -3.0, 0.0, np.nan, np.inf], dtype=dtype)
    assert differences(want.copy(), want) is None
    close = want.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    close[0] *= 1 + rtol / 4
    assert differences(close.astype(dtype), want) is None
    far = want.copy()
    far[1] = dtype(-3.5)
    assert "1 of 5 entries differ" in differences(far, want)
    nan = want.copy()
    nan[2] = np.nan
    assert differences(nan, want) is not None
