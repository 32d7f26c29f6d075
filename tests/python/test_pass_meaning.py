"""The middle end keeps the meaning of programs: every pass, and the pipelines.

For each runnable program -- (a) the kernels of ``examples/*.ir`` on the inputs of
``examples/demo.py``, (b) the lit tests' valid kernels with memref arguments
(``tests/lit/syntax``, ``tests/lit/passes``) on generated inputs, (c) programs of
``ttlc.testing.generator`` -- and for each *step*, i.e. every single pass registered in
``ttlc.passes.PASS_MODULES`` and the pipelines ``lower`` and ``lower-simt`` (also with the
target descriptions of the real machines), the test

* runs the step on a freshly parsed program with ``verify_each=True`` (a pass that leaves
  invalid IR fails there, naming the pass), and checks the result again with ``ttlc.check``;
* checks that printing is a fixed point (print -> parse -> print gives the same text);
* runs the printed program on the interpreter and compares every array the kernel can
  reach (whole buffers, gaps of strided views included) with a run of the original
  program: integers and booleans bit for bit, floating-point values within a small
  reassociation tolerance (``RTOL``), NaN where NaN, infinities equal;
* for a subset (``checked_for``: the examples, every ``CHECKED_EVERY``-th generator seed,
  and the lit kernels for the steps that create SPMD code; everything with ``TTLC_LONG``)
  also runs the pass's own IR object in checked mode: the lowered code must raise no
  ``KernelError`` (local-memory races, out-of-bounds accesses, non-uniform operands,
  barriers in divergent code) where the original raised none, and give the same results.
  Limitation: the interpreter treats the start and end of every SPMD region as a barrier
  and tracks races on local memory only, so a barrier insert-barrier fails to place
  *between* SPMD regions cannot show up here (tests/python/test_pass_barriers.py and the
  lit tests cover its placement).

Steps that choose ``subgroup_size``/``work_group_size`` (work-group-size, and passes that
need it) may legitimately change what a program observes through ``num_subgroups``,
``subgroup_size`` and friends: the language leaves both sizes to the compiler.  The
reference run therefore uses the original program with the sizes the step chose copied
into its attributes ("pinned"), which is the meaning the step had to keep.

A step whose output prints exactly like its input still runs (verify, fixed point) but is
not executed again.  Passes whose module does not import yet are skipped with the reason.

Run length: CI runs ``CI_SEEDS`` generator seeds; ``TTLC_LONG=1`` runs ``LONG_SEEDS``
(``TTLC_PASS_SEEDS=N`` / ``TTLC_PASS_FIRST_SEED=S`` choose them explicitly).  A failure
names the case; reproduce it with ``reproduce(case_id, step)`` from this module, e.g.
``python -c "import test_pass_meaning as t; t.reproduce('gen:17', 'lower@pvc')"`` in
tests/python.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

import ttlc
from ttlc.ir.types import GroupType, MemrefType
from ttlc.passes import PASS_MODULES, PIPELINES, PassContext, expand, get_pass, run_passes
from ttlc.target import get_target
from ttlc.runtime.inputs import generated_inputs

ROOT = Path(__file__).resolve().parents[2]

LONG = os.environ.get("TTLC_LONG", "") not in ("", "0")
CI_SEEDS = 36
LONG_SEEDS = 500
N_SEEDS = int(os.environ.get("TTLC_PASS_SEEDS", LONG_SEEDS if LONG else CI_SEEDS))
FIRST_SEED = int(os.environ.get("TTLC_PASS_FIRST_SEED", "0"))
#: every CHECKED_EVERY-th generator seed also runs in checked mode (every one with TTLC_LONG)
CHECKED_EVERY = 1 if LONG else 4

#: tolerance per element type, relative to the largest magnitude in the array
#: (reassociation: lowered gemm/sum accumulate in another order).  The worst errors seen
#: over all CI cases are 4.5e-7 (f32) and 9e-16 (f64); the f64 bound would still pass a
#: value computed in f32 and converted, but not an f64 accumulation done in f32.
RTOL = {"f16": 1e-2, "bf16": 5e-2, "f32": 1e-5, "f64": 1e-10, "c32": 1e-5, "c64": 1e-10}

#: pipelines and the targets they are run for (pass contexts differ only in the target)
PIPELINE_TARGETS = {"lower": ("interp", "cpu", "pvc", "nvidia"),
                    "lower-simt": ("interp", "pvc", "nvidia")}


# ---- the steps ---------------------------------------------------------------------------
def _missing(names: Sequence[str]) -> Optional[str]:
    """Why some pass of ``names`` cannot run yet (its module does not import), or None."""
    for name in expand(names):
        try:
            get_pass(name)
        except Exception as e:  # ImportError, SyntaxError, KeyError, ... while in progress
            return f"pass {name} is not available yet ({type(e).__name__}: {e})"
    return None


@dataclass(frozen=True)
class Step:
    passes: Tuple[str, ...]
    target: str = "interp"

    @property
    def id(self) -> str:
        name = "+".join(self.passes)
        return name if self.target == "interp" else f"{name}@{self.target}"

    @property
    def is_pipeline(self) -> bool:
        return len(self.passes) == 1 and self.passes[0] in PIPELINES


STEPS: List[Step] = [Step((name,)) for name in PASS_MODULES]
STEPS += [Step((p,), t) for p, targets in PIPELINE_TARGETS.items() for t in targets]
STEP_BY_ID = {s.id: s for s in STEPS}


def step_param(step: Step):
    why = _missing(step.passes)
    marks = [pytest.mark.skip(reason=why)] if why else []
    return pytest.param(step, id=step.id, marks=marks)


# ---- inputs for kernels without an input builder: ttlc.runtime.inputs ----------------


def _arrays(args) -> List[np.ndarray]:
    """Every array an argument list refers to (group members too)."""
    out: List[np.ndarray] = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += [x for x in a if isinstance(x, np.ndarray)]
        elif isinstance(a, ttlc.Group):
            out += [x for x in a.arrays if isinstance(x, np.ndarray)]
    return out


# ---- the cases ---------------------------------------------------------------------------
#: (case id, reference program text, checked) -> results or the KernelError raised
_BASELINES: Dict[Tuple[str, str, bool], object] = {}


@dataclass
class Case:
    id: str
    text: str
    kernel: str
    #: fresh (arguments, buffers to compare), the same values on every call
    make: Callable[[], Tuple[list, List[np.ndarray]]]
    grid: Tuple[int, int, int]
    #: also run in checked mode (and require no KernelError)
    checked: bool
    #: how to rebuild the case by hand, for failure messages
    origin: str


def _load_demo():
    path = ROOT / "examples" / "demo.py"
    spec = importlib.util.spec_from_file_location("ttlc_examples_demo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE_BATCH = 2


def example_cases() -> List[Case]:
    demo = _load_demo()
    cases = []
    for path in sorted((ROOT / "examples").glob("*.ir")):
        text = path.read_text(encoding="utf-8")
        for func in ttlc.parse(text).functions:
            case = demo.CASES.get(func.name)  # (input builder, batches..., tolerance)
            if case is None:
                continue
            builder = case[0]

            def make(builder=builder):
                args = builder(np.random.default_rng(0), EXAMPLE_BATCH)[0]
                return args, _arrays(args)
            cases.append(Case(f"ex:{path.stem}@{func.name}", text, func.name, make,
                              (EXAMPLE_BATCH, 1, 1), True,
                              f"examples/{path.name} @{func.name} with examples/demo.py "
                              f"CASES[{func.name!r}][0](default_rng(0), {EXAMPLE_BATCH})"))
    return cases


LIT_DIRS = ("syntax", "passes")


def _lit_candidates():
    for sub in LIT_DIRS:
        for path in sorted((ROOT / "tests" / "lit" / sub).glob("*.ir")):
            text = path.read_text(encoding="utf-8")
            try:
                program = ttlc.check(text)
            except ttlc.CompileError:
                continue  # an invalid program (error tests)
            for func in program.functions:
                if any(isinstance(a.value.type, (MemrefType, GroupType)) for a in func.args):
                    yield f"{sub}/{path.name}", text, func.name


@functools.lru_cache(maxsize=None)
def lit_inventory() -> Tuple[Tuple[Case, ...], Tuple[Tuple[str, str], ...]]:
    """(runnable lit cases, (id, why not runnable) for the others).  A lit kernel is
    runnable when it runs on its generated inputs in checked mode without an error
    (otherwise it races or reads out of bounds on these inputs, and an unchecked run
    would be undefined)."""
    runnable, excluded = [], []
    for rel, text, name in _lit_candidates():
        cid = f"lit:{rel}@{name}"

        def make(text=text, name=name):
            func = ttlc.parse(text).function(name)
            return generated_inputs(func)
        case = Case(cid, text, name, make, (1, 1, 1), True,
                    f"tests/lit/{rel} @{name} with generated_inputs(func) of this module")
        try:
            # the checked run of the unchanged program doubles as its baseline
            _BASELINES[(cid, str(ttlc.parse(text)), True)] = run_kernel(text, case, checked=True)
        except (ttlc.KernelError, ValueError, TypeError) as e:
            excluded.append((cid, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
            continue
        runnable.append(case)
    return tuple(runnable), tuple(excluded)


def generator_cases() -> List[Case]:
    from ttlc.testing import generate

    cases = []
    for seed in range(FIRST_SEED, FIRST_SEED + N_SEEDS):
        def make(seed=seed):
            args = _generated(seed).make_args()
            return args, _arrays(args)
        gen = _generated(seed)
        cases.append(Case(f"gen:{seed}", gen.text, gen.kernel_name, make, gen.grid,
                          (seed - FIRST_SEED) % CHECKED_EVERY == 0,
                          f"ttlc.testing.generate({seed})"))
    return cases


@functools.lru_cache(maxsize=None)
def _generated(seed: int):
    from ttlc.testing import generate

    return generate(seed)


@functools.lru_cache(maxsize=None)
def all_cases() -> Dict[str, Case]:
    cases = example_cases() + list(lit_inventory()[0]) + generator_cases()
    return {c.id: c for c in cases}


# ---- running and comparing ---------------------------------------------------------------
def run_kernel(program, case: Case, checked: bool) -> List[np.ndarray]:
    module = ttlc.compile(program, target="interp", checked=checked)
    args, buffers = case.make()
    module[case.kernel](*args, grid=case.grid)
    return [np.array(b, copy=True) for b in buffers]


def pinned(text: str, after: ttlc.Program) -> ttlc.Program:
    """The original program with the subgroup and work-group sizes the step chose."""
    program = ttlc.parse(text)
    for func in program.functions:
        chosen = after.function(func.name)
        for key in ("subgroup_size", "work_group_size"):
            if key in chosen.attrs:
                func.attrs[key] = chosen.attrs[key]
    return program


def baseline(case: Case, reference: ttlc.Program, checked: bool):
    """Results of the (pinned) original program, or the KernelError it raises; cached."""
    key = (case.id, str(reference), checked)
    if key not in _BASELINES:
        try:
            _BASELINES[key] = run_kernel(reference, case, checked)
        except ttlc.KernelError as e:
            _BASELINES[key] = e
    return _BASELINES[key]


def _element_name(dtype: np.dtype) -> str:
    import ml_dtypes

    if dtype == ml_dtypes.bfloat16:
        return "bf16"
    return {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
            np.dtype(np.float64): "f64", np.dtype(np.complex64): "c32",
            np.dtype(np.complex128): "c64"}.get(np.dtype(dtype), str(dtype))


def mismatch(got: np.ndarray, want: np.ndarray) -> Optional[str]:
    """Why two result buffers differ, or None."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    name = _element_name(want.dtype)
    if name not in RTOL:  # integers, booleans: bit for bit
        if got.tobytes() == want.tobytes():
            return None
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        i = bad[0]
        return (f"{len(bad)} of {want.size} {want.dtype} elements differ, first at flat index "
                f"{i}: {got.reshape(-1)[i]} != {want.reshape(-1)[i]}")
    g = got.astype(np.complex128).reshape(-1)
    w = want.astype(np.complex128).reshape(-1)
    g_nan, w_nan = np.isnan(g), np.isnan(w)
    g_inf, w_inf = np.isinf(g), np.isinf(w)
    finite = ~(w_nan | w_inf)
    scale = max(1.0, float(np.abs(w[finite]).max())) if finite.any() else 1.0
    with np.errstate(invalid="ignore"):
        close = np.abs(g - w) <= RTOL[name] * scale
    ok = np.where(w_nan, g_nan, np.where(w_inf, g == w, close & ~g_nan & ~g_inf))
    if ok.all():
        return None
    bad = np.flatnonzero(~ok)
    i = bad[0]
    err = np.abs(g - w)[finite & ~np.isnan(g)]
    worst = float(err.max() / scale) if err.size else float("nan")
    return (f"{len(bad)} of {w.size} {name} elements differ beyond rtol {RTOL[name]} "
            f"(scale {scale:.3g}), first at flat index {i}: {got.reshape(-1)[i]} != "
            f"{want.reshape(-1)[i]}; worst relative error {worst:.3g}")


def compare(got: List[np.ndarray], want: List[np.ndarray]) -> List[str]:
    return [f"buffer {k}: {why}" for k, (g, w) in enumerate(zip(got, want))
            if (why := mismatch(g, w)) is not None]


# ---- the check ---------------------------------------------------------------------------
class StepFailed(AssertionError):
    pass


def retargeted(text: str, target_name: str) -> ttlc.Program:
    """The case's program as input for a target: sizes the target cannot run (a subgroup
    size it does not support, a work-group larger than its maximum) are dropped, so that
    work-group-size chooses them -- the reference run pins the chosen ones anyway."""
    program = ttlc.parse(text)
    target = get_target(target_name)
    for func in program.functions:
        sgs, wgs = func.subgroup_size, func.work_group_size
        if (sgs is not None and sgs not in target.subgroup_sizes) or \
                (wgs is not None and wgs[0] * wgs[1] > target.max_work_group_size):
            func.attrs.pop("subgroup_size", None)
            func.attrs.pop("work_group_size", None)
    return program


def apply(case: Case, step: Step) -> Tuple[ttlc.Program, str]:
    """Run the step on a fresh parse of the case; verify and check the fixed point."""
    program = retargeted(case.text, step.target)
    ctx = PassContext(target=get_target(step.target), verify_each=True)
    try:
        run_passes(program, list(step.passes), ctx)
    except ttlc.CompileError as e:
        if step.target != "interp" and f"target {step.target}" in str(e):
            pytest.skip(f"the program does not fit target {step.target}: "
                        f"{e.diagnostics[0].message}")
        raise StepFailed(f"{step.id} failed on a valid program:\n{e}") from None
    text = str(program)
    try:
        ttlc.check(program)
        reparsed = ttlc.check(text, filename=f"<after {step.id}>")
    except ttlc.CompileError as e:
        raise StepFailed(f"the output of {step.id} does not verify:\n{e}\n{text}") from None
    again = str(reparsed)
    if again != text:
        raise StepFailed(f"printing is not a fixed point after {step.id}:\n"
                         + _first_difference(text, again))
    return program, text


def _first_difference(a: str, b: str) -> str:
    for k, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return f"line {k}:\n  printed:   {x}\n  reprinted: {y}"
    return f"texts differ in length ({len(a)} vs {len(b)})"


#: in CI, lit kernels run checked only for the steps that create SPMD code (where races
#: and out-of-bounds accesses can appear); with TTLC_LONG every step runs checked
LIT_CHECKED_STEPS = {"lower-linalg", "lower-foreach", "lower-coopmatrix", "lower", "lower-simt"}


def checked_for(case: Case, step: Step) -> bool:
    if not case.checked:
        return False
    if LONG or not case.id.startswith("lit:"):
        return True
    return step.target == "interp" and step.passes[0] in LIT_CHECKED_STEPS


def check_meaning(case: Case, step: Step) -> None:
    program, text = apply(case, step)
    original = str(retargeted(case.text, step.target))
    if text == original:
        return  # the step changed nothing: same text, same meaning
    reference = pinned(case.text, program)
    modes = [False, True] if checked_for(case, step) else [False]
    problems = []
    for checked in modes:
        want = baseline(case, reference, checked)
        if isinstance(want, ttlc.KernelError):
            if reference is not None and str(reference) != original:
                pytest.skip(f"the original program with the sizes {step.id} chose fails in "
                            f"checked mode ({str(want).splitlines()[0][:200]}): its meaning "
                            "depends on the work-group size")
            raise StepFailed(f"the original program fails in checked mode: {want}")
        try:
            # unchecked: the printed text (what `ttlc opt` gives); checked: the IR object
            got = run_kernel(program if checked else text, case, checked)
        except ttlc.KernelError as e:
            problems.append(f"checked={checked}: new KernelError after {step.id}: {e}")
            continue
        for why in compare(got, want):
            problems.append(f"checked={checked}: {why}")
    if problems:
        raise StepFailed(f"{case.id} ({case.origin}): results change after {step.id}:\n"
                         + "\n".join(problems[:8]) + f"\n-- program after {step.id} --\n"
                         + _clip(text))


def _clip(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else text[:limit] + "\n... (clipped)"


def reproduce(case_id: str, step_id: str) -> None:
    """Run one (case, step) by hand and print the programs (for debugging)."""
    case, step = all_cases()[case_id], STEP_BY_ID[step_id]
    print(f"-- {case.id}: {case.origin} --\n{case.text}")
    program, text = apply(case, step)
    print(f"-- after {step.id} --\n{text}")
    check_meaning(case, step)
    print("meaning kept")


# ---- the tests ---------------------------------------------------------------------------
def _case_params(kind: str):
    return [pytest.param(cid, id=cid) for cid in all_cases() if cid.startswith(kind + ":")]


STEP_PARAMS = [step_param(s) for s in STEPS]
#: the examples and lit programs (gemm-heavy: the interpreter runs their SIMT form per
#: work-item, up to a minute each) take the SIMT pipeline for one GPU target in CI, both
#: with TTLC_LONG; generated programs take every step
SIMT_LONG_ONLY = set() if LONG else {"lower-simt@nvidia"}
FIXED_STEP_PARAMS = [step_param(s) for s in STEPS if s.id not in SIMT_LONG_ONLY]


@pytest.mark.parametrize("step", FIXED_STEP_PARAMS)
@pytest.mark.parametrize("case_id", _case_params("ex"))
def test_examples_keep_meaning(case_id, step):
    check_meaning(all_cases()[case_id], step)


@pytest.mark.parametrize("step", FIXED_STEP_PARAMS)
@pytest.mark.parametrize("case_id", _case_params("lit"))
def test_lit_programs_keep_meaning(case_id, step):
    check_meaning(all_cases()[case_id], step)


@pytest.mark.parametrize("step", STEP_PARAMS)
@pytest.mark.parametrize("case_id", _case_params("gen"))
def test_generated_programs_keep_meaning(case_id, step):
    check_meaning(all_cases()[case_id], step)


def test_lit_inventory():
    """Enough lit kernels run on generated inputs for the lit cases to mean something; the
    message lists those left out and why (races or out-of-bounds accesses on these
    inputs are the expected reasons)."""
    runnable, excluded = lit_inventory()
    report = "\n".join(f"  {cid}: {why}" for cid, why in excluded)
    assert len(runnable) >= 50, f"only {len(runnable)} runnable lit kernels; excluded:\n{report}"
    assert all("ValueError" not in why and "TypeError" not in why for _, why in excluded), \
        f"generated inputs do not fit some kernels:\n{report}"


def test_cases_exist():
    assert len(_case_params("ex")) >= 5
    assert len(_case_params("gen")) == N_SEEDS


def test_float_comparison_is_not_vacuous():
    """The comparison rejects what it must (a self-check of the harness)."""
    a = np.asfortranarray(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    assert mismatch(a, a.copy()) is None
    b = a.copy()
    b[1, 2] += 1e-3
    assert mismatch(b, a) is not None
    c = a.copy()
    c[0, 0] = np.nan
    assert mismatch(c, a) is not None and mismatch(c, c.copy()) is None
    assert mismatch(np.array([1, 2], np.int8), np.array([1, 3], np.int8)) is not None


RACY_WITHOUT_BARRIER = """\
func @shift(%A: memref<f32x32>) attributes{subgroup_size=16, work_group_size=[32,1]} {
    %L = alloca : memref<f32x32,local>
    parallel {
        %sg = subgroup_linear_id : i32
        %lane = subgroup_local_id : i32
        %sixteen = constant 16 : i32
        %base = mul %sg, %sixteen : i32
        %id32 = add %base, %lane : i32
        %id = cast %id32 : index
        %x = load %A[%id] : f32
        store %x, %L[%id]
        barrier.local
        %one = constant 1 : index
        %n = constant 32 : index
        %next = add %id, %one : index
        %j = rem %next, %n : index
        %y = load %L[%j] : f32
        store %y, %A[%id]
    }
}
"""


@pytest.fixture
def drop_barriers():
    """A wrong pass (test only): erases every barrier."""
    from ttlc.ir.rewrite import erase_each, functions_regions
    from ttlc.passes import PASSES, register

    @register("test-drop-barriers")
    def drop(program, ctx):
        """Erase every barrier instruction (test only)."""
        for func in program.functions:
            for region in list(functions_regions(func)):
                erase_each(region, [i for i in region.instructions if i.opcode == "barrier"])
    yield Step(("test-drop-barriers",))
    PASSES.pop("test-drop-barriers", None)


def test_checked_mode_catches_a_pass_that_makes_a_race(drop_barriers):
    """Self-test of the harness: a pass that drops a needed barrier.local is caught by
    the checked run (the unchecked interpreter runs work-items in lockstep, so the
    values alone would not show it)."""
    def make():
        a = np.asfortranarray(np.arange(32, dtype=np.float32))
        return [a], [a]
    case = Case("self:shift", RACY_WITHOUT_BARRIER, "shift", make, (1, 1, 1), True, "self-test")
    with pytest.raises(StepFailed, match="new KernelError after test-drop-barriers"):
        check_meaning(case, drop_barriers)
    case.checked = False
    check_meaning(case, drop_barriers)  # unchecked alone does not see it
