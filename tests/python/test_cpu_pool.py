"""Target "cpu": the worker threads that run a launch's chunks (backends/cpu/pool.py).

A launch splits its work-groups into one chunk per thread; chunk 0 runs on the calling
thread, the others on workers that wait in machine code.  These tests check what the
split must not change (results, the first failing work-group of checked code, scratch
memory per chunk) and the situations the pool handles apart (launches from several Python
threads at once, a process without the native pool, a forked child, interpreter exit).
Expected values come from NumPy.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ttlc

pytest.importorskip("llvmlite", reason="target cpu needs llvmlite")

from ttlc.backends.cpu import pool  # noqa: E402

pytestmark = pytest.mark.skipif(pool.NativePool.create() is None,
                                reason="the native pool needs Linux on x86_64 or aarch64")

#: each work-group g writes g*g + 1 into every entry of its column (spec: group_id, subview)
COLUMNS = """
func @columns(%X: memref<i64x8x?>) attributes {subgroup_size=8} {
    %g = group_id.x : index
    %col = subview %X[0:8, %g] : memref<i64x8>
    %i = cast %g : i64
    %sq = mul %i, %i : i64
    %one = constant 1 : i64
    %v = add %sq, %one : i64
    %c0 = constant 0 : index
    %c8 = constant 8 : index
    %c1 = constant 1 : index
    for %k = %c0, %c8, %c1 {
        store %v, %col[%k]
    }
}
"""


def expected_columns(n: int) -> np.ndarray:
    g = np.arange(n, dtype=np.int64)
    return np.broadcast_to(g * g + 1, (8, n))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TTLC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ttlc-cache"))
    monkeypatch.delenv("TTLC_NUM_THREADS", raising=False)


@pytest.mark.parametrize("threads", ["2", "3", "5", "16"])
@pytest.mark.parametrize("groups", [2, 3, 17, 1000])
def test_every_work_group_runs_once(monkeypatch, threads, groups):
    monkeypatch.setenv("TTLC_NUM_THREADS", threads)
    X = np.zeros((8, groups), np.int64, order="F")
    ttlc.compile(COLUMNS, target="cpu")["columns"](X, grid=(groups,))
    assert np.array_equal(X, expected_columns(groups))


def test_launches_in_a_row_reuse_the_workers(monkeypatch):
    monkeypatch.setenv("TTLC_NUM_THREADS", "2")
    kernel = ttlc.compile(COLUMNS, target="cpu")["columns"]
    for n in (5, 64, 2, 300):
        X = np.zeros((8, n), np.int64, order="F")
        for _ in range(50):
            kernel(X, grid=(n,))
        assert np.array_equal(X, expected_columns(n))


def test_launches_from_several_python_threads(monkeypatch):
    """One launch uses the pool at a time; the others run their chunks themselves."""
    monkeypatch.setenv("TTLC_NUM_THREADS", "2")
    kernel = ttlc.compile(COLUMNS, target="cpu")["columns"]
    results, errors = {}, []

    def work(t: int) -> None:
        try:
            n = 40 + t
            for _ in range(200):
                X = np.zeros((8, n), np.int64, order="F")
                kernel(X, grid=(n,))
                if not np.array_equal(X, expected_columns(n)):
                    results[t] = False
                    return
            results[t] = True
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == {t: True for t in range(4)}


CHECKED = """
func @late(%A: memref<i32x?>) attributes {subgroup_size=8} {
    %gid = group_id.x : index
    %x = load %A[%gid] : i32
}
"""


@pytest.mark.parametrize("size,first_bad", [(30, 30), (0, 0), (39, 39)])
def test_checked_error_names_the_first_failing_group_of_any_chunk(monkeypatch, size, first_bad):
    """40 groups on 4 threads: chunks of 10; the first failure is in chunk size // 10."""
    monkeypatch.setenv("TTLC_NUM_THREADS", "4")
    module = ttlc.compile(CHECKED, target="cpu", checked=True)
    with pytest.raises(ttlc.KernelError,
                       match=rf"group \({first_bad}, 0, 0\): index {first_bad} of mode 0 .*"
                             rf"size {size}"):
        module["late"](np.zeros(size, np.int32), grid=(40,))
    # the pool is usable again after a failing launch
    module["late"](np.zeros(40, np.int32), grid=(40,))


#: work-group local memory (spec: alloca with the local address space): each group stages
#: its column in local memory and writes it back reversed
LOCAL = """
func @reverse(%X: memref<f32x{n}x?>) attributes {{subgroup_size=8, work_group_size=[8,1]}} {{
    %tmp = alloca : memref<f32x{n},local>
    %g = group_id.x : index
    %col = subview %X[0:{n}, %g] : memref<f32x{n}>
    %c0 = constant 0 : index
    %cn = constant {n} : index
    %c1 = constant 1 : index
    %last = constant {last} : index
    for %k = %c0, %cn, %c1 {{
        %x = load %col[%k] : f32
        store %x, %tmp[%k]
    }}
    barrier
    for %k = %c0, %cn, %c1 {{
        %r = sub %last, %k : index
        %x = load %tmp[%r] : f32
        store %x, %col[%k]
    }}
}}
"""


def test_local_memory_is_private_to_each_chunk(monkeypatch):
    monkeypatch.setenv("TTLC_NUM_THREADS", "3")
    for n in (8, 4096, 16):  # the scratch memory grows, and is reused when smaller
        kernel = ttlc.compile(LOCAL.format(n=n, last=n - 1), target="cpu")["reverse"]
        X = np.asfortranarray(np.arange(n * 50, dtype=np.float32).reshape(n, 50, order="F"))
        want = X[::-1, :].copy()
        kernel(X, grid=(50,))
        assert np.array_equal(X, want)


def test_without_the_native_pool(monkeypatch):
    """Where the native pool cannot be built, a Python thread pool runs the chunks."""
    monkeypatch.setenv("TTLC_NUM_THREADS", "3")
    monkeypatch.setattr(pool.NativePool, "create", classmethod(lambda cls: None))
    X = np.zeros((8, 100), np.int64, order="F")
    ttlc.compile(COLUMNS, target="cpu")["columns"](X, grid=(100,))
    assert np.array_equal(X, expected_columns(100))
    module = ttlc.compile(CHECKED, target="cpu", checked=True)
    with pytest.raises(ttlc.KernelError, match=r"group \(25, 0, 0\)"):
        module["late"](np.zeros(25, np.int32), grid=(40,))


def _run_script(script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TTLC_NUM_THREADS="2")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_starts_its_own_workers():
    """A child has none of its parent's threads; its launches must not wait for them."""
    done = _run_script(f"""
        import os, numpy as np, ttlc
        k = ttlc.compile({COLUMNS!r}, target="cpu")["columns"]
        X = np.zeros((8, 64), np.int64, order="F")
        k(X, grid=(64,))                      # the parent's workers exist now
        pid = os.fork()
        if pid == 0:
            Y = np.zeros((8, 64), np.int64, order="F")
            k(Y, grid=(64,))
            os._exit(0 if np.array_equal(Y, X) else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert done.returncode == 0, done.stderr
    assert "child 0" in done.stdout


def test_interpreter_exits_with_workers_parked():
    done = _run_script(f"""
        import numpy as np, ttlc
        k = ttlc.compile({COLUMNS!r}, target="cpu")["columns"]
        X = np.zeros((8, 64), np.int64, order="F")
        k(X, grid=(64,))
        print("ran", int(X[0, 63]))
    """)
    assert done.returncode == 0, done.stderr
    assert f"ran {63 * 63 + 1}" in done.stdout


def test_a_pool_that_cannot_be_built_leaves_the_python_pool(monkeypatch):
    def fail(self, futex, sched_yield):
        raise RuntimeError("LLVM could not build the pool")

    monkeypatch.setattr(pool.NativePool, "_instance", None)
    monkeypatch.setattr(pool.NativePool, "_unavailable", False)
    monkeypatch.setattr(pool.NativePool, "__init__", fail)
    assert pool.NativePool.create() is None
    assert pool.NativePool._unavailable  # not tried again at every launch
    monkeypatch.setenv("TTLC_NUM_THREADS", "3")
    X = np.zeros((8, 30), np.int64, order="F")
    ttlc.compile(COLUMNS, target="cpu")["columns"](X, grid=(30,))
    assert np.array_equal(X, expected_columns(30))
