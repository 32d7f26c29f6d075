"""Shared fixtures, the ``needs_verifier`` marker, and the execution targets.

Every test of test_interp_*.py runs once per target (``interp``, ``cpu``, or the
module's own ``TARGETS``: test_interp_checked.py adds ``opencl`` and ``cuda``): the
autouse ``target`` fixture, parametrized here, tells interp_testing.py which one; a test
marked ``@pytest.mark.interp_only(reason=...)`` is skipped with that reason on the other
targets, and a target that cannot run here (interp_testing.cannot_run) is skipped with why.

Tests that need the verifier to reject invalid-but-parseable programs are marked
``@pytest.mark.needs_verifier``; they are skipped (with the reason) while ``ttlc.check``
still accepts a collective instruction inside an SPMD region, i.e. before the verifier
lands, so the suite stays green during that window and switches them on by itself.

The suite sets TTLC_VERIFY_EACH (unless the environment does): back ends verify their
lowered IR after every pass.
"""
from __future__ import annotations

import functools
import os

import pytest

import ttlc

# every lowering a back end runs in the suite is verified after each of its passes
# (``ttlc.passes.VERIFY_EACH``): a pass that leaves IR the language rejects fails here
# even where the back end would compile it
os.environ.setdefault("TTLC_VERIFY_EACH", "1")

#: parseable but invalid: gemm is collective and must not appear in a parallel region
VERIFIER_PROBE = """func @probe(%A: memref<f32x4x4>) {
    parallel {
        %one = constant 1.0 : f32
        gemm %one, %A, %A, %one, %A
    }
}
"""

#: a small valid program used by the API and CLI tests
VALID_PROGRAM = """; scale a batch of matrices
func @scale(%alpha: f32, %A: group<memref<f32x16x?>x?> {alignment=64}) attributes {subgroup_size=16} {
    %gid = group_id.x : index
    %a = load %A[%gid] : memref<f32x16x?>
    %zero = constant 0.0 : f32
    axpby.atomic %alpha, %a, %zero, %a
}
"""


@functools.lru_cache(maxsize=None)
def verifier_ready() -> bool:
    try:
        ttlc.check(VERIFIER_PROBE)
    except ttlc.CompileError:
        return True
    return False


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_verifier: the test needs ttlc.check to reject invalid programs")
    config.addinivalue_line(
        "markers", "interp_only(reason): a test of test_interp_*.py that runs on target "
                   "interp only (its finding is one target cpu cannot make); skipped with "
                   "the reason on the other targets")


def pytest_addoption(parser):
    parser.addoption("--targets", default=None,
                     help="comma-separated execution targets for the tests of test_interp_*.py "
                          "(default: all); `make test` runs them for target cpu alone again "
                          "under older CPU models (TTLC_CPU)")


def _runs_on_every_target(module) -> bool:
    return module.__name__.startswith("test_interp_")


def pytest_generate_tests(metafunc):
    """Every test of test_interp_*.py runs once per target (see interp_testing.py): those of
    interp_testing.TARGETS, or of the module's own ``TARGETS``."""
    if not _runs_on_every_target(metafunc.module):
        return
    import interp_testing

    chosen = metafunc.config.getoption("targets")
    targets = [t for t in getattr(metafunc.module, "TARGETS", interp_testing.TARGETS)
               if chosen is None or t in chosen.split(",")]
    skips = {t: why for t in targets if (why := interp_testing.cannot_run(t))}
    only = metafunc.definition.get_closest_marker("interp_only")
    if only:  # listed as skipped, with the reason, on the other targets
        why = only.kwargs.get("reason") or (only.args[0] if only.args else "interp only")
        skips.update({t: why for t in targets if t != "interp"})
    params = [pytest.param(t, marks=pytest.mark.skip(reason=skips[t])) if t in skips else t
              for t in targets]
    metafunc.parametrize("target", params, indirect=True)


@pytest.fixture(autouse=True)
def target(request):
    """The execution target of a test of test_interp_*.py (sets
    interp_testing.CURRENT_TARGET; on target cuda, the fake driver of cuda_testing.py is in
    place during the test); None elsewhere (a test parametrizing its own ``target``
    overrides this fixture)."""
    param = getattr(request, "param", None)
    if param is None:
        yield None
        return
    import interp_testing

    saved = interp_testing.CURRENT_TARGET
    interp_testing.CURRENT_TARGET = param
    with pytest.MonkeyPatch.context() as patch:
        if param == "cuda":
            import cuda_testing

            cuda_testing.install(patch.setattr, _fake_cuda_driver())
        yield param
    if param == "cuda":
        from ttlc.backends.cuda import driver

        driver.find.cache_clear()
    interp_testing.CURRENT_TARGET = saved


@functools.lru_cache(maxsize=None)
def _fake_cuda_driver():
    """One fake device for the whole run: modules compiled for it are cached across tests
    (interp_testing._compile) and keep launching on it."""
    import cuda_testing

    return cuda_testing.FakeDriver()


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if item.get_closest_marker("needs_verifier")]
    if marked and not verifier_ready():
        skip = pytest.mark.skip(reason="the verifier does not reject a gemm inside a parallel "
                                       "region yet (ttlc.check is still a stub)")
        for item in marked:
            item.add_marker(skip)


@pytest.fixture
def valid_program() -> str:
    return VALID_PROGRAM
