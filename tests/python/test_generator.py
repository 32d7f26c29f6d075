"""The random program generator (ttlc.testing.generator) against the front end and interpreter.

For a few hundred seeds: the program passes ttlc.check, printing is a fixed point, and it
runs on the interpreter without any error, unchecked and checked, with bit-identical
results.  The seeds run in two worker processes.  ``TTLC_GENERATOR_SEEDS=N`` and
``TTLC_GENERATOR_FIRST_SEED=S`` choose other seeds (e.g. for a long run); a failing seed
is reproduced with ``ttlc.testing.generate(seed)``.
"""
from __future__ import annotations

import multiprocessing
import os
import traceback

import numpy as np
import pytest

import ttlc
from ttlc.testing import GeneratedCase, generate
from ttlc.testing.generator import _coop_supported

N_SEEDS = int(os.environ.get("TTLC_GENERATOR_SEEDS", "300"))
FIRST_SEED = int(os.environ.get("TTLC_GENERATOR_FIRST_SEED", "0"))


def _arrays(args) -> list:
    """Every array an argument list refers to (members of groups too)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += [x for x in a if isinstance(x, np.ndarray)]
        elif isinstance(a, ttlc.Group):
            out += [x for x in a.arrays if isinstance(x, np.ndarray)]
    return out


def run_seed(seed: int):
    """(seed, failure or None, features)."""
    stage = "generate"
    try:
        case = generate(seed)
        stage = "check"
        program = ttlc.check(case.text)
        stage = "print"
        first = str(program)
        second = str(ttlc.parse(first))
        if first != second:
            return seed, "printing is not a fixed point", case.features
        results = []
        for checked in (False, True):
            stage = f"run (checked={checked})"
            module = ttlc.compile(program, target="interp", checked=checked)
            args = case.make_args()
            module[case.kernel_name](*args, grid=case.grid)
            results.append([a.tobytes() for a in _arrays(args)])
        if results[0] != results[1]:
            return seed, "checked and unchecked runs give different results", case.features
        return seed, None, case.features
    except Exception as e:  # any error is a failure: the programs are valid and race-free
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()
        return seed, f"{stage}: {detail[:2000]}", set()


@pytest.fixture(scope="module")
def results():
    seeds = range(FIRST_SEED, FIRST_SEED + N_SEEDS)
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform
        return [run_seed(s) for s in seeds]
    with ctx.Pool(min(2, os.cpu_count() or 1)) as pool:
        return pool.map(run_seed, seeds, chunksize=5)


def test_generated_programs_check_print_and_run(results):
    failures = [(seed, why) for seed, why, _ in results if why]
    report = "\n".join(f"seed {seed}: {why}" for seed, why in failures[:10])
    assert not failures, f"{len(failures)} of {len(results)} seeds failed:\n{report}"


def test_feature_coverage(results):
    seen = set().union(*(features for _, _, features in results))
    wanted = {"gemm", "gemv", "ger", "axpby", "hadamard", "sum", "cumsum", "parallel", "foreach",
              "foreach_tile", "barrier", "atomic", "if", "for", "compare", "arith", "math",
              "int_division", "shift", "subview", "expand", "fuse", "group", "group_load_varying",
              "group_offset_dynamic", "group_offset_static", "alloca", "null_memref",
              "divergent_store", "varying_loop", "varying_subview", "dynamic_shape",
              "strided_arg", "scalar_arg", "subgroup_ops", "arg_attributes"}
    if _coop_supported():
        wanted |= {"coopmatrix", "coop_apply", "coop_scale"}
    if N_SEEDS >= 200:
        assert wanted <= seen, f"never generated: {sorted(wanted - seen)}"


def test_generation_is_deterministic():
    for seed in (0, 1, 17, 123456):
        a, b = generate(seed), generate(seed)
        assert isinstance(a, GeneratedCase)
        assert a.text == b.text and a.grid == b.grid and a.kernel_name == b.kernel_name
        args1, args2 = a.make_args(), b.make_args()
        arrays1, arrays2 = _arrays(args1), _arrays(args2)
        assert [x.tobytes() for x in arrays1] == [x.tobytes() for x in arrays2]
        assert all(x is not y for x, y in zip(arrays1, arrays2)), "make_args must build fresh arrays"
        assert a.make_args is not None and len(a.grid) == 3


def test_coop_can_be_forced():
    if not _coop_supported():
        pytest.skip("the interpreter does not implement coopmatrix instructions yet")
    case = generate(5, coop=True)
    assert "cooperative_matrix_mul_add" in case.text and "subgroup_size=16" in case.text
    ttlc.compile(case.text, target="interp", checked=True)[case.kernel_name](*case.make_args(),
                                                                            grid=case.grid)
    assert "cooperative_matrix" not in generate(5, coop=False).text


def test_subgroup_sizes_restrict_the_attribute():
    """A target's sizes: programs ask for no other (the first 100 seeds ask for 4, 8, 16 and
    32 by default), and the default programs are unchanged."""
    import re

    def sizes(**kw):
        return {int(m) for seed in range(100)
                for m in re.findall(r"subgroup_size=(\d+)", generate(seed, **kw).text)}
    assert sizes() == {4, 8, 16, 32}
    assert sizes(subgroup_sizes=(16, 32)) == {16, 32}
    assert generate(7, subgroup_sizes=(4, 8, 16, 32)).text == generate(7).text
    with pytest.raises(ValueError, match="lack 16"):
        generate(0, subgroup_sizes=(8, 32))


def test_hypothesis_strategy():
    hypothesis = pytest.importorskip("hypothesis")
    from ttlc.testing.generator import cases

    @hypothesis.settings(max_examples=5, deadline=None, database=None)
    @hypothesis.given(cases())
    def check(case):
        ttlc.check(case.text)

    check()


@pytest.mark.parametrize("seed", [9, 17, 40, 94, 161, 181])
def test_result_does_not_depend_on_sizes_left_open(seed):
    """Without attributes, subgroup and work-group sizes are the implementation's choice
    (interpreter default [16,1]; work-group-size picks e.g. [1024,1]), so builtins that
    depend on them must not reach memory.  Seed 9 stored values computed from
    num_subgroups.x and the work-item id; lower-foreach (which runs work-group-size) then
    seemed to change argument 3."""
    from ttlc.passes import PassContext, run_passes

    case = generate(seed)
    assert "work_group_size" not in case.text.splitlines()[0]
    program = ttlc.check(case.text)
    run_passes(program, ["work-group-size"], PassContext())
    assert "work_group_size" in str(program).splitlines()[0]
    results = []
    for text in (case.text, str(program)):
        args = case.make_args()
        ttlc.compile(text, target="interp")[case.kernel_name](*args, grid=case.grid)
        results.append([a.tobytes() for a in _arrays(args)])
    assert results[0] == results[1]


def test_broadcast_lane_fits_every_subgroup_size_left_open():
    """With the subgroup size left open (a target may choose 1), subgroup_broadcast reads
    lane 0; a fixed size allows any lane below it (seed 12 used lane 11 with no size set)."""
    import re

    lanes = {True: set(), False: set()}
    for seed in range(200):
        text = generate(seed, coop=False).text
        fixed = "subgroup_size=" in text.splitlines()[0]
        consts = dict(re.findall(r"(%\w+) = constant (-?\d+) : i32", text))
        for lane in re.findall(r"subgroup_broadcast %\w+, (%\w+)", text):
            lanes[fixed].add(int(consts[lane]))
    assert lanes[False] == {0}, lanes[False]
    assert max(lanes[True]) > 0
