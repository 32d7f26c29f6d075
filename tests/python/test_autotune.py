"""ttlc.autotune: the fastest candidate is chosen, the choice is stored and reused by later
processes without timing, damaged entries are tuned again, TTLC_AUTOTUNE=0 takes the
first candidate (spec: tensor-language.txt, "Functions", attributes work_group_size and
subgroup_size).

The kernel's work grows with its number of subgroups: every subgroup runs the same
dependent loop from its own starting value (the loop converges to 1.0, so every
subgroup stores the same values), so work_group_size [8, 64] and [8, 128] do 64 and 128
times the work of [8, 1] (measured on an AVX-512 machine: 9x and 40x its time).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ttlc
import ttlc.tuning
from ttlc.backends.cpu import cache

pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

SPIN = """
func @spin(%x: memref<f32x?>, %n: index) {
    parallel {
        %i = subgroup_local_id : i32
        %s = subgroup_linear_id : i32
        %t = add %s, %i : i32
        %start = cast %t : f32
        %half = constant 0.5 : f32
        %c0 = constant 0 : index
        %acc = for %k=%c0,%n init(%a=%start) -> (f32) {
            %b = mul %a, %half : f32
            %c = add %b, %half : f32
            yield (%c)
        }
        %j = cast %i : index
        store %acc, %x[%j]
    }
}
"""
FAST = {"work_group_size": [8, 1]}
SLOW = [{"work_group_size": [8, 64]}, {"work_group_size": [8, 128]}]
CONFIGS = [SLOW[0], FAST, SLOW[1]]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TTLC_AUTOTUNE", raising=False)


def args(n=20000):
    """x holds the largest subgroup (work-item i of each subgroup stores x[i])."""
    return (np.zeros(64, np.float32), n)


def no_timing(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a candidate was timed")

    monkeypatch.setattr("ttlc.runtime.timing.bench", refuse)


def test_a_slow_candidate_is_never_chosen(capsys):
    x, n = args()
    kernel = ttlc.autotune(SPIN, "spin", (x, n), CONFIGS, grid=(1,))
    assert kernel.tuning.source == "timed"
    assert kernel.tuning.config == FAST and kernel.tuning.index == 1
    assert set(kernel.tuning.times) == {0, 1, 2}
    assert kernel.tuning.times[1] * 2 < min(kernel.tuning.times[0], kernel.tuning.times[2])
    assert ttlc.parse(str(kernel.module.program)).function("spin").work_group_size == (8, 1)
    x[:] = 0
    kernel(x, n, grid=(1,))
    assert (x[:8] == 1.0).all() and (x[8:] == 0).all()
    err = capsys.readouterr().err
    assert "ttlc.autotune @spin" in err and "3/3" in err
    assert all(json.dumps(c) in err for c in CONFIGS)


def test_the_choice_is_reused_without_timing(monkeypatch):
    first = ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(1,), progress=False)
    no_timing(monkeypatch)
    again = ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(1,), progress=False)
    assert again.tuning.source == "stored" and again.tuning.config == first.tuning.config
    assert again.tuning.key == first.tuning.key and again.tuning.times == {}


def test_the_key_holds_shapes_grid_and_candidates(monkeypatch):
    first = ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(1,), progress=False)
    others = [ttlc.autotune(SPIN, "spin", (np.zeros(128, np.float32), 20000), CONFIGS,
                            grid=(1,), progress=False),
              ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(2,), progress=False),
              ttlc.autotune(SPIN, "spin", args(), CONFIGS[:2], grid=(1,), progress=False)]
    assert all(k.tuning.source == "timed" for k in others)
    assert len({first.tuning.key} | {k.tuning.key for k in others}) == 4
    # a scalar's value is not part of the key (its type is)
    no_timing(monkeypatch)
    same = ttlc.autotune(SPIN, "spin", args(n=5), CONFIGS, grid=(1,), progress=False)
    assert same.tuning.source == "stored"


RESTART = textwrap.dedent("""
    import sys, numpy as np, ttlc
    sys.path.insert(0, {tests!r})
    import test_autotune as t
    if sys.argv[1] == "again":
        def refuse(*a, **k):
            raise SystemExit("a candidate was timed")
        import ttlc.runtime.timing
        ttlc.runtime.timing.bench = refuse
    k = ttlc.autotune(t.SPIN, "spin", t.args(), t.CONFIGS, grid=(1,), progress=False)
    print(k.tuning.source, k.tuning.index)
""")


def test_the_choice_survives_a_restart(tmp_path):
    script = RESTART.format(tests=os.path.dirname(__file__))
    env = dict(os.environ)
    runs = [subprocess.run([sys.executable, "-c", script, what], env=env, capture_output=True,
                           text=True, timeout=300) for what in ("first", "again")]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split() == ["timed", "1"]
    assert runs[1].stdout.split() == ["stored", "1"]


def entry(kernel):
    return cache.path(ttlc.tuning.FOLDER, kernel.tuning.key, ttlc.tuning.SUFFIX)


@pytest.mark.parametrize("damage", ["bytes", "truncated", "not-json", "other-index",
                                    "other-config"])
def test_a_corrupt_entry_is_tuned_again(damage):
    first = ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(1,), progress=False)
    path = entry(first)
    data = path.read_bytes()
    if damage == "bytes":
        path.write_bytes(data[:-3] + b"###")
    elif damage == "truncated":
        path.write_bytes(data[:10])
    else:  # a well-formed entry (checksum right) whose content does not fit
        payload = {"not-json": b"{index: 1",
                   "other-index": json.dumps({"index": 7, "config": FAST}).encode(),
                   "other-config": json.dumps({"index": 1, "config": SLOW[0]}).encode()}[damage]
        assert cache.store(ttlc.tuning.FOLDER, first.tuning.key, payload, ttlc.tuning.SUFFIX)
    again = ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(1,), progress=False)
    assert again.tuning.source == "timed" and again.tuning.config == FAST
    assert ttlc.tuning._stored(first.tuning.key, [ttlc.tuning._config(c, 0)
                                                  for c in CONFIGS]) == 1


def test_autotune_off_takes_the_first_candidate(monkeypatch):
    monkeypatch.setenv("TTLC_AUTOTUNE", "0")
    no_timing(monkeypatch)
    kernel = ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(1,))
    assert kernel.tuning.source == "first" and kernel.tuning.config == SLOW[0]
    folder = os.path.join(os.environ["TTLC_CACHE_DIR"], ttlc.tuning.FOLDER)
    assert not os.path.exists(folder) or not os.listdir(folder)


def test_candidates_that_fail_are_skipped_and_all_failing_raises():
    bad = {"work_group_size": [8, 100000]}  # past the largest work-group
    kernel = ttlc.autotune(SPIN, "spin", args(), [bad, FAST], grid=(1,), progress=False)
    assert kernel.tuning.index == 1 and 0 in kernel.tuning.failures
    assert "exceeds the maximum" in kernel.tuning.failures[0]
    with pytest.raises(ttlc.CompileError, match="exceeds the maximum"):
        ttlc.autotune(SPIN, "spin", args(), [bad], grid=(1,), progress=False)
    with pytest.raises(TypeError, match="spin"):  # the arguments fit no candidate
        ttlc.autotune(SPIN, "spin", (np.zeros(8), 5), [FAST], grid=(1,), progress=False)


@pytest.mark.parametrize("configs,error,message", [
    ([], ValueError, "at least one"),
    ([{"tile": 4}], ValueError, "configuration 0 sets 'tile'"),
    ([FAST, {"work_group_size": [8]}], ValueError, "configuration 1: work_group_size"),
    ([{"subgroup_size": 0}], ValueError, "subgroup_size must be"),
    ([{"defines": {"n": object()}}], ValueError, "values of defines"),
    (["fast"], TypeError, "must be a dict"),
])
def test_bad_configurations_name_what_is_wrong(configs, error, message):
    with pytest.raises(error, match=message):
        ttlc.autotune(SPIN, "spin", args(), configs, grid=(1,), progress=False)


def test_an_unknown_kernel_is_named():
    with pytest.raises(ValueError, match=r"no kernel @spun .*kernels: @spin"):
        ttlc.autotune(SPIN, "spun", args(), [FAST], progress=False)


TEMPLATE = SPIN.replace("%n: index", "%unused: index").replace(
    "%c0 = constant 0 : index", "%c0 = constant 0 : index\n        %n = constant $n : index")


def test_defines_choose_between_template_parameters():
    configs = [{"defines": {"n": 400000}}, {"defines": {"n": 1000}},
               {"defines": {"n": 200000}}]
    kernel = ttlc.autotune(TEMPLATE, "spin", args(), configs, grid=(1,), progress=False)
    assert kernel.tuning.config == {"defines": {"n": 1000}}


def test_a_recipe_is_tuned_through_its_text():
    recipe = ttlc.recipes.small_gemm_batched("f32", "n", "n", 16, 16, 16)
    rng = np.random.default_rng(0)
    A, B = (np.asfortranarray(rng.standard_normal((16, 16, 50)), dtype=np.float32)
            for _ in range(2))
    C = np.zeros((16, 16, 50), np.float32, order="F")
    configs = [{"work_group_size": [16, 1]}, {"work_group_size": [16, 2]},
               {"work_group_size": [32, 1], "subgroup_size": 16}]
    kernel = ttlc.autotune(recipe.text, "gemm", (1.0, A, B, 0.0, C), configs,
                           grid=recipe.grid(C), progress=False)
    assert kernel.tuning.source == "timed" and not kernel.tuning.failures
    C[...] = rng.standard_normal(C.shape)
    want = 2.0 * np.einsum("ikx,kjx->ijx", A, B) + 0.5 * C
    kernel(2.0, A, B, 0.5, C, grid=recipe.grid(C))
    np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-4)


def test_on_a_terminal_the_progress_line_is_rewritten(monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    ttlc.autotune(SPIN, "spin", args(), [FAST, SLOW[0]], grid=(1,))
    text = screen.getvalue()
    assert text.count("\r\x1b[K") == 2 and text.endswith("\n") and text.count("\n") == 1
    assert "[##########..........] 1/2" in text and "[####################] 2/2" in text


def test_without_the_cache_every_call_tunes(monkeypatch):
    monkeypatch.setenv("TTLC_CACHE", "0")
    for _ in range(2):
        kernel = ttlc.autotune(SPIN, "spin", args(), CONFIGS, grid=(1,), progress=False)
        assert kernel.tuning.source == "timed" and kernel.tuning.config == FAST
    assert not os.path.exists(os.path.join(os.environ["TTLC_CACHE_DIR"], ttlc.tuning.FOLDER))
