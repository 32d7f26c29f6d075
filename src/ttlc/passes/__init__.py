"""Pass registry, pass manager and named pipelines.

A pass is a function ``name_of_pass(program, ctx)`` in its own module, listed in
``PASS_MODULES`` under its kebab-case name (the reference implementation's name where it
has the pass); ``register`` adds passes from outside ttlc.  Passes
change IR only through ``ttlc.ir.rewrite``.  ``run_passes`` runs names in order; a name
may also be a pipeline (a named list of passes).  With ``verify_each`` the verifier
runs after every pass; with ``print_after_all`` the IR is printed after every pass.
"""
from __future__ import annotations

import importlib
import io
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, TextIO

from ..diagnostics import CompileError
from ..ir.core import Program
from ..target import Target, get_target


@dataclass
class PassContext:
    """Options every pass may read, and where dump passes write."""

    target: Target = field(default_factory=lambda: get_target("interp"))
    unsafe_fp_math: bool = False
    verify_each: bool = False
    print_after_all: Optional[TextIO] = None
    out: TextIO = field(default_factory=io.StringIO)
    #: passes that ran so far (a pass needing another can run it if missing)
    done: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class PassInfo:
    name: str
    run: Callable[[Program, PassContext], None]
    doc: str


#: passes added with ``register``
PASSES: Dict[str, PassInfo] = {}

#: the module of each pass, which defines it as a function of the pass's name (imported on
#: first use, so start-up stays light)
PASS_MODULES = {
    "check-ir": "check_ir",
    "dump-ir": "dump",
    "dump-def-use": "dump",
    "dump-gcd": "gcd",
    "set-stack-ptr": "gcd",
    "constant-propagation": "constant_propagation",
    "dead-code-elimination": "dead_code_elimination",
    "insert-barrier": "insert_barrier",
    "insert-lifetime-stop": "insert_lifetime_stop",
    "insert-shape-checks": "insert_shape_checks",
    "insert-iteration-marks": "insert_iteration_marks",
    "static-views": "static_views",
    "work-group-size": "work_group_size",
    "lower-linalg": "lower_linalg",
    "lower-foreach": "lower_foreach",
    "lower-coopmatrix": "lower_coopmatrix",
}

#: named pass lists; "lower" is the target-independent lowering every backend runs
PIPELINES: Dict[str, List[str]] = {
    "lower": ["check-ir", "static-views", "work-group-size", "insert-lifetime-stop",
              "lower-linalg", "lower-foreach", "insert-barrier", "constant-propagation",
              "dead-code-elimination"],
    "lower-simt": ["lower", "lower-coopmatrix", "constant-propagation", "dead-code-elimination"],
}


def _info(name: str, run: Callable[[Program, PassContext], None]) -> PassInfo:
    return PassInfo(name, run, (run.__doc__ or "").strip().split("\n")[0])


def register(name: str):
    """Decorator: add ``run(program, ctx)`` as pass ``name`` (passes outside ttlc, and
    tests; ttlc's own are found through ``PASS_MODULES``)."""
    def wrap(fn):
        PASSES[name] = _info(name, fn)
        return fn
    return wrap


def get_pass(name: str) -> PassInfo:
    """Pass `name`: one added with ``register``, else the function of the same name
    (dashes as underscores) in its module of ``PASS_MODULES``."""
    if name in PASSES:
        return PASSES[name]
    module = PASS_MODULES.get(name)
    if module is None:
        known = ", ".join(sorted(set(PASS_MODULES) | set(PIPELINES)))
        raise KeyError(f"unknown pass '{name}' (known passes and pipelines: {known})")
    run = getattr(importlib.import_module(f"{__name__}.{module}"), name.replace("-", "_"))
    return _info(name, run)


def expand(names: Sequence[str]) -> List[str]:
    """Pipeline names replaced by their passes, recursively."""
    out: List[str] = []
    for n in names:
        if n in PIPELINES:
            out.extend(expand(PIPELINES[n]))
        else:
            out.append(n)
    return out


def run_pass(program: Program, name: str, ctx: PassContext) -> None:
    info = get_pass(name)
    info.run(program, ctx)
    ctx.done.append(name)
    if ctx.verify_each:
        from ..check.verifier import verify

        try:
            verify(program)
        except CompileError as e:
            raise CompileError([_after(d, name) for d in e.diagnostics], e.source,
                               e.filename) from None
    if ctx.print_after_all is not None:
        ctx.print_after_all.write(f"; -- IR after {name} --\n{program}")


def ensure(program: Program, name: str, ctx: PassContext) -> None:
    """Run a pass this pass depends on, unless it already ran."""
    if name not in ctx.done:
        run_pass(program, name, ctx)


def run_passes(program: Program, names: Sequence[str], ctx: Optional[PassContext] = None) -> PassContext:
    ctx = ctx or PassContext()
    for name in expand(names):
        run_pass(program, name, ctx)
    return ctx


#: the environment variable that has ``lower_copy`` verify the IR after every pass of a
#: back end's lowering (docs/api.md; the test suite sets it: a pass that leaves IR the
#: language rejects fails there, not only where the back end happens to object)
VERIFY_EACH = "TTLC_VERIFY_EACH"


def verify_lowerings() -> bool:
    """Whether VERIFY_EACH is set to anything but nothing, 0, no, off or false."""
    value = os.environ.get(VERIFY_EACH, "").strip().lower()
    return value not in ("", "0", "no", "off", "false")


def lower_copy(program: Program, names: Sequence[str], target: Target,
               before: Optional[Dict[str, Callable[[Program], None]]] = None) -> Program:
    """A copy of the program (the original stays as it is) lowered for a back end: its
    views given the static types their sizes allow (static-views: the sizes are chosen
    for the shapes a gemm knows), the sizes each function runs with on target
    (``compiled_config``) written into it, then the passes or pipelines ``names`` run;
    errors carry the program's source.  ``before`` maps a pass to what a back end does to
    the program just before it (checked SPIR-V marks coopmatrix instructions before they
    become per-work-item code)."""
    from ..ir.rewrite import clone_program, set_function_attributes
    from ..target import ExecConfig
    from ..target.config import compiled_config
    from .static_views import static_views

    lowered = clone_program(program)
    static_views(lowered, None)
    try:
        for f in lowered.functions:
            config = compiled_config(f, target, lowered)
            if config != ExecConfig(f.subgroup_size, tuple(f.work_group_size or ())):
                set_function_attributes(f, config.attributes(),
                                        first=("subgroup_size", "work_group_size"))
        # the views are static already: the pipelines' own static-views would find nothing
        names = [n for n in expand(names) if n != "static-views"]
        ctx, start = PassContext(target=target, verify_each=verify_lowerings()), 0
        for at, name in enumerate(names):
            if before and name in before:
                run_passes(lowered, names[start:at], ctx)
                before[name](lowered)
                start = at
        run_passes(lowered, names[start:], ctx)
    except CompileError as e:
        raise e.with_source(program.source, program.filename) from None
    return lowered


def _after(d, name):
    from ..diagnostics import Diagnostic

    return Diagnostic(d.loc, f"{d.message} (IR invalid after pass {name})", d.notes)
