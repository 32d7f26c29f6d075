"""Differential testing: run a generated program on two targets and compare the results.

``compare_seed(seed)`` generates a program (``generator.generate``), runs it with the same
inputs on target "interp" (the reference) and target "cpu", and compares every array
the arguments refer to: integers and booleans bit for bit, floating-point numbers within
a relative tolerance per type (implementations may differ in the last bits: accumulation
order of gemm, math functions, fused operations), NaN equal to NaN.  The outcome names the
seed and, when the targets disagree, carries the program text to reproduce it.

Used by tests/python/test_differential.py (a few hundred seeds in CI) and
fuzz/fuzz_differential.py (long runs).
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

#: relative tolerance per NumPy dtype name: a few hundred units in the last place (errors
#: of reductions grow with their length); absolute tolerance scaled the same way
RTOL = {"bfloat16": 2.0 ** -5, "float16": 2.0 ** -8, "float32": 2.0 ** -16,
        "float64": 2.0 ** -40, "complex64": 2.0 ** -16, "complex128": 2.0 ** -40}


@dataclass
class Outcome:
    """What happened to one seed: ``status`` is "agree", "differ" (the results are not
    the same), "error" (an exception: a crash, a compile error on one target) or, for
    the faulty launches, "unsupported" (the target refuses the program with a
    CompileError saying what it does not support, such as the device's subgroup
    sizes)."""

    seed: int
    status: str
    detail: str = ""
    text: str = ""
    features: frozenset = frozenset()

    @property
    def ok(self) -> bool:
        return self.status == "agree"

    def report(self) -> str:
        """The failure with the program text, for a test or fuzzer log."""
        return f"seed {self.seed}: {self.status}: {self.detail}\n{self.text}"


def arrays_of(args: Sequence) -> List[np.ndarray]:
    """Every array an argument list refers to (members of groups and lists too)."""
    from .. import Group

    out: List[np.ndarray] = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += [x for x in a if isinstance(x, np.ndarray)]
        elif isinstance(a, Group):
            out += [x for x in a.arrays if isinstance(x, np.ndarray)]
    return out


def differences(got: np.ndarray, want: np.ndarray, limit: int = 6) -> Optional[str]:
    """None when got equals want (floats within RTOL), else a description of where not."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    if got.dtype.kind in "iub":
        bad = got != want
    else:
        rtol = RTOL[got.dtype.name]
        wide = np.complex128 if got.dtype.kind == "c" else np.float64
        g, w = got.astype(wide), want.astype(wide)
        pairs = [(g.real, w.real), (g.imag, w.imag)] if got.dtype.kind == "c" else [(g, w)]
        bad = np.zeros(got.shape, dtype=bool)
        scale = max((float(np.max(np.abs(y[np.isfinite(y)]), initial=0.0)) for _, y in pairs),
                    default=0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            for x, y in pairs:
                same = (x == y) | (np.isnan(x) & np.isnan(y))
                # relative to the entry, and to the array's magnitude for cancellations
                same |= np.isfinite(x) & np.isfinite(y) & (
                    np.abs(x - y) <= rtol * (np.abs(y) + 1e-3 * scale))
                bad |= ~same
    if not np.any(bad):
        return None
    where = [tuple(int(i) for i in k) for k in np.argwhere(bad)[:limit]]
    items = ", ".join(f"{k}: {got[k]} vs {want[k]}" for k in where)
    return f"{int(np.sum(bad))} of {bad.size} entries differ ({items})"


def run_case(case, target: str, checked: bool = False) -> List[np.ndarray]:
    """The arrays of a generated case after running it once on target."""
    import ttlc

    module = ttlc.compile(case.text, target=target, checked=checked)
    args = case.make_args()
    with np.errstate(all="ignore"):
        module[case.kernel_name](*args, grid=case.grid)
    return arrays_of(args)


def compare_case(case, reference: str = "interp", target: str = "cpu") -> Outcome:
    """Run a generated case on both targets and compare (see the module docstring)."""
    features = frozenset(case.features)
    results = {}
    for t in (reference, target):
        try:
            results[t] = run_case(case, t)
        except Exception as e:  # any exception is a finding: the programs are valid
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            return Outcome(case.seed, "error", f"target {t}: {detail[:3000]}", case.text, features)
    problems = []
    for k, (got, want) in enumerate(zip(results[target], results[reference])):
        diff = differences(got, want)
        if diff:
            problems.append(f"array {k}: {diff}")
    if problems:
        return Outcome(case.seed, "differ", f"{target} vs {reference}: " + "; ".join(problems),
                       case.text, features)
    return Outcome(case.seed, "agree", "", case.text, features)


def compare_seed(seed: int, reference: str = "interp", target: str = "cpu") -> Outcome:
    from .generator import generate

    try:
        case = generate(seed)
    except Exception as e:
        return Outcome(seed, "error", f"generate: {type(e).__name__}: {e}")
    return compare_case(case, reference, target)


# ---- faulty launches ---------------------------------------------------------------------------
#: kinds of finding, by what the message of a KernelError says (the same on every target)
FINDING_KINDS = (("subview of mode", "subview"), ("null memref", "null"),
                 ("group index", "group index"), ("out of bounds", "bounds"),
                 ("outside the memref", "bounds"), ("out-of-bounds", "bounds"),
                 ("do not match", "shape"), ("does not match", "shape"),
                 ("must match", "shape"), ("division by zero", "division"),
                 ("data race", "race"))


def finding(e: Exception) -> tuple:
    """(kind, source line) of a KernelError: what two targets must agree on."""
    message = str(e)
    kind = next((k for text, k in FINDING_KINDS if text in message), "other")
    where = message.split(":", 2)
    line = where[1].split(".")[0] if len(where) > 2 else "?"
    return kind, line


def _findings(case, grid, reference: str, target: str, seed: int) -> Outcome:
    """Run a case, checked, on both targets: the same kind of finding at the same
    instruction, or both none; unchecked, the interpreter may only raise KernelError."""
    import ttlc

    found = {}
    try:
        modules = {t: ttlc.compile(case.text, target=t, checked=True) for t in (reference, target)}
    except ttlc.CompileError as e:
        if "not supported" not in str(e):  # not a documented limit of the target: a bug
            return Outcome(seed, "error", f"target {target}: {str(e)[:3000]}", case.text)
        return Outcome(seed, "unsupported", str(e).splitlines()[0], case.text)
    for t in (reference, target):
        try:
            module = modules[t]
            with np.errstate(all="ignore"):
                module[case.kernel_name](*case.make_args(), grid=grid)
            found[t] = None
        except ttlc.KernelError as e:
            found[t] = finding(e) + (str(e),)
        except Exception as e:  # anything else is a finding of its own
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            return Outcome(seed, "error", f"target {t}: {detail[:3000]}", case.text)
    try:  # unchecked, the interpreter still raises nothing but KernelError
        module = ttlc.compile(case.text, target="interp")
        with np.errstate(all="ignore"):
            module[case.kernel_name](*case.make_args(), grid=grid)
    except ttlc.KernelError:
        pass
    except Exception as e:
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()
        return Outcome(seed, "error", f"target interp, unchecked: {detail[:3000]}", case.text)
    a, b = found[reference], found[target]
    if (a is None) != (b is None) or (a is not None and a[:2] != b[:2]):
        show = {t: (f[2] if f else "no finding") for t, f in found.items()}
        return Outcome(seed, "differ", f"grid {grid}: {show}", case.text)
    return Outcome(seed, "agree", a[2] if a else "no finding", case.text)


def compare_fault(seed: int, extra: int = 2, reference: str = "interp",
                  target: str = "cpu") -> Outcome:
    """Run a generated program, checked, on ``extra`` more work-groups in x than its inputs
    were made for, so that the work-groups past the batch index past their arguments
    (subviews at the group id, group members, batch modes): both targets must report the
    same kind of finding at the same instruction, or both none (programs that wrap their
    indices); unchecked, the interpreter may only raise KernelError."""
    from .generator import generate

    case = generate(seed)
    grid = (case.grid[0] + extra,) + tuple(case.grid[1:])
    return _findings(case, grid, reference, target, seed)


def compare_races(seed: int, reference: str = "interp", target: str = "cpu") -> Outcome:
    """Run a generated kernel sharing local memory between work-items
    (``races.generate_races``), checked: both targets must report the same data race at
    the same instruction, or both none."""
    from .races import generate_races

    case = generate_races(seed)
    return _findings(case, case.grid, reference, target, seed)
