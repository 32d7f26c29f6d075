"""Autotuning (``ttlc.autotune``): compile and time each candidate configuration of a
kernel, keep the fastest, and remember the choice on disk so that no later process times
them again.

A configuration is a dict with any of ``work_group_size`` ([x, y]), ``subgroup_size``
and ``defines`` (values of the ``$name`` parameters of a templated program).  The choice
is stored under a key made of everything the timings depend on: the program text, the
kernel, the configurations, the argument types and shapes (never their values), the
grid, the target and checked mode, and the CPU model and features (or the machine, for
other targets).  Entries use the format of the kernel cache (``backends/cpu/cache.py``:
checksummed, written atomically; ``TTLC_CACHE=0`` and ``TTLC_CACHE_DIR`` apply) in its
folder ``autotune/``; an entry that is damaged or no longer fits the configurations is
tuned again.  ``TTLC_AUTOTUNE=0`` takes the first candidate without timing anything.
"""
from __future__ import annotations

import json
import numbers
import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import api
from .backends.cpu import cache
from .diagnostics import CompileError, KernelError
from .ir.core import Program
from .runtime import switches

#: what a configuration may set
CONFIG_KEYS = ("work_group_size", "subgroup_size", "defines")
#: the cache folder and file suffix of the stored choices
FOLDER, SUFFIX = "autotune", ".json"


@dataclass
class Tuning:
    """How ``ttlc.autotune`` chose a kernel's configuration (``kernel.tuning``)."""

    config: Dict[str, Any]
    #: the chosen candidate's position in ``configs``
    index: int
    #: "timed" (the candidates were timed now), "stored" (the choice of an earlier run),
    #: or "first" (TTLC_AUTOTUNE=0)
    source: str
    #: the cache key of the choice
    key: str
    #: median seconds of each candidate timed now (by position)
    times: Dict[int, float] = field(default_factory=dict)
    #: why candidates could not run (by position)
    failures: Dict[int, str] = field(default_factory=dict)


def enabled() -> bool:
    return switches.on("TTLC_AUTOTUNE")


def _config(c, i: int) -> Dict[str, Any]:
    """A candidate checked and normalised to JSON values; ValueError naming what is wrong."""
    if not isinstance(c, Mapping):
        raise TypeError(f"autotune: configuration {i} must be a dict, not {type(c).__name__}")
    unknown = sorted(set(c) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"autotune: configuration {i} sets {', '.join(map(repr, unknown))}; "
                         f"a configuration may set {', '.join(CONFIG_KEYS)}")
    out: Dict[str, Any] = {}
    if c.get("work_group_size") is not None:
        wgs = c["work_group_size"]
        if (not isinstance(wgs, Sequence) or len(wgs) != 2 or
                not all(isinstance(w, numbers.Integral) and not isinstance(w, bool) and w > 0
                        for w in wgs)):
            raise ValueError(f"autotune: configuration {i}: work_group_size must be two "
                             f"positive integers, not {wgs!r}")
        out["work_group_size"] = [int(w) for w in wgs]
    if c.get("subgroup_size") is not None:
        sgs = c["subgroup_size"]
        if not isinstance(sgs, numbers.Integral) or isinstance(sgs, bool) or sgs <= 0:
            raise ValueError(f"autotune: configuration {i}: subgroup_size must be a positive "
                             f"integer, not {sgs!r}")
        out["subgroup_size"] = int(sgs)
    if c.get("defines"):
        defines = c["defines"]
        if not isinstance(defines, Mapping) or not all(isinstance(k, str) for k in defines):
            raise ValueError(f"autotune: configuration {i}: defines must map parameter names "
                             f"to values, not {defines!r}")
        try:
            json.dumps(dict(defines))
        except TypeError:
            raise ValueError(f"autotune: configuration {i}: the values of defines must be "
                             f"numbers or strings, not {defines!r}") from None
        out["defines"] = dict(sorted(defines.items()))
    return out


def _parse(text: str, defines: Optional[Mapping[str, Any]], filename: str) -> Program:
    """The program of one candidate: ``$name`` parameters set by the template
    preprocessor (``ttlc.parse(text, defines=...)``)."""
    return api.parse(text, filename, defines=defines or None)


def _candidate(text: str, kernel: str, config: Dict[str, Any], filename: str) -> Program:
    program = _parse(text, config.get("defines"), filename)
    try:
        func = program.function(kernel)
    except KeyError:
        known = ", ".join("@" + f.name for f in program.functions) or "none"
        raise ValueError(f"autotune: no kernel @{kernel} in the program (kernels: {known})") \
            from None
    for name in ("work_group_size", "subgroup_size"):
        if name in config:
            func.attrs[name] = config[name]
    return program


def _describe(x) -> str:
    """An argument's type and shape (what timings depend on), never its values."""
    if x is None:
        return "null"
    if isinstance(x, (bool, numbers.Number)):
        return type(x).__name__
    if hasattr(x, "arrays"):  # ttlc.Group, ttlc.PreparedGroup
        return f"{type(x).__name__}({_describe(list(x.arrays))})"
    if isinstance(x, (list, tuple)):
        return "[" + ",".join(_describe(m) for m in x) + "]"
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        if callable(getattr(x, "stride", None)):  # torch
            strides = tuple(x.stride())
        else:
            strides = getattr(x, "strides", None)
        return f"{type(x).__name__} {x.dtype} {tuple(x.shape)} {strides}"
    return type(x).__name__


def _device(target: str) -> str:
    """The machine the timings were taken on: the CPU model and features and the threads a
    launch uses for target cpu, the platform and device for target opencl, the machine's
    architecture and processor otherwise."""
    if target == "cpu":
        from .backends.cpu import jit
        from .backends.cpu.module import num_threads

        return f"{' '.join(jit.host())} threads {num_threads()}"
    host = f"{platform.machine()} {platform.processor()} cpus {os.cpu_count()}"
    if target == "opencl":
        try:
            from .backends.opencl import device
        except ImportError:  # compiling will say what is missing
            return host
        found, why = device.find()
        return f"{host} device {found.name if found is not None else why}"
    return host


def _key(text, kernel, args, grid, target, checked, configs) -> str:
    from .version import __version__

    return cache.key("ttlc-autotune-1", __version__, text, kernel,
                     json.dumps(configs, sort_keys=True), "|".join(map(_describe, args)),
                     repr(tuple(grid) if not isinstance(grid, int) else (grid,)),
                     f"target {target} checked={checked}", _device(target))


def _stored(key: str, configs: List[Dict[str, Any]]) -> Optional[int]:
    """The position of the stored choice, or None (none, damaged, or not one of these)."""
    payload = cache.load(FOLDER, key, SUFFIX)
    if payload is None:
        return None
    try:
        entry = json.loads(payload.decode("utf-8"))
        index = entry["index"]
        if type(index) is int and 0 <= index < len(configs) and configs[index] == entry["config"]:
            return index
    except (ValueError, KeyError, TypeError):
        pass
    return None


class _Progress:
    """One line per candidate on stderr, rewritten in place on a terminal."""

    def __init__(self, kernel: str, total: int, show: bool):
        self.kernel, self.total, self.show = kernel, total, show
        self.stream = sys.stderr
        self.tty = show and getattr(self.stream, "isatty", lambda: False)()

    def update(self, done: int, config: Dict[str, Any], what: str) -> None:
        if not self.show:
            return
        width = 20
        bar = "#" * (width * done // self.total) + "." * (width - width * done // self.total)
        text = (f"ttlc.autotune @{self.kernel} [{bar}] {done}/{self.total} "
                f"{json.dumps(config, sort_keys=True)}: {what}")
        self.stream.write(("\r\x1b[K" + text) if self.tty else text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _text(text_or_program) -> str:
    if isinstance(text_or_program, Program):
        return str(text_or_program)
    return api._as_text(text_or_program, "<input>")


def autotune(text_or_program, kernel: str, args: Sequence[Any],
             configs: Sequence[Mapping[str, Any]], grid=(1, 1, 1), *, target: str = "cpu",
             checked: bool = False, seconds: float = 0.05, progress: bool = True,
             filename: str = "<input>"):
    """The kernel compiled with the fastest of `configs` for these arguments and grid.

    Each candidate is compiled and timed (``ttlc.bench``, about `seconds` each) on `args`,
    which it runs on: their contents afterwards are whatever the last run left.  A
    candidate that does not compile or run is skipped (shown in the progress line); when
    none runs, the first one's error is raised.  The choice is stored, and a later call
    with the same key, in any process, compiles it without timing.  The returned kernel's
    ``tuning`` tells what was chosen and how (``ttlc.tuning.Tuning``)."""
    from .runtime.timing import bench

    name = kernel[1:] if isinstance(kernel, str) and kernel.startswith("@") else kernel
    if not isinstance(name, str):
        raise TypeError(f"autotune: kernel must be the kernel's name, not {kernel!r}")
    text = _text(text_or_program)
    configs = [_config(c, i) for i, c in enumerate(configs)]
    if not configs:
        raise ValueError("autotune needs at least one configuration")
    args = tuple(args)

    def build(index: int):
        program = _candidate(text, name, configs[index], filename)
        return api.compile(program, target, checked, filename)[name]

    def chosen(k, index, source, key, times=None, failures=None):
        k.tuning = Tuning(configs[index], index, source, key, times or {}, failures or {})
        return k

    if not enabled():
        return chosen(build(0), 0, "first", "")
    key = _key(text, name, args, grid, target, checked, configs)
    index = _stored(key, configs)
    if index is not None:
        try:
            return chosen(build(index), index, "stored", key)
        except (CompileError, ValueError):
            pass  # this ttlc no longer compiles it: tune again
    bar = _Progress(name, len(configs), progress)
    times: Dict[int, float] = {}
    failures: Dict[int, str] = {}
    errors: Dict[int, BaseException] = {}
    best = None
    try:
        for i, config in enumerate(configs):
            try:
                k = build(i)
                times[i] = bench(k, *args, grid=grid, warmup=1, seconds=seconds).median
            except (CompileError, KernelError, TypeError, ValueError) as e:
                failures[i] = (str(e).strip().splitlines() or [type(e).__name__])[0]
                errors[i] = e
                bar.update(i + 1, config, f"skipped ({failures[i]})")
                continue
            if best is None or times[i] < times[best[0]]:
                best = (i, k)
            bar.update(i + 1, config, f"{times[i] * 1e3:.4f} ms (best {times[best[0]] * 1e3:.4f} "
                                      f"ms)")
    finally:
        bar.close()
    if best is None:
        raise errors[0]
    index, k = best
    cache.store(FOLDER, key, json.dumps({"index": index, "config": configs[index],
                                         "times": {str(i): t for i, t in times.items()}},
                                        sort_keys=True).encode("utf-8"), SUFFIX)
    return chosen(k, index, "timed", key, times, failures)


__all__ = ["CONFIG_KEYS", "Tuning", "autotune", "enabled"]
