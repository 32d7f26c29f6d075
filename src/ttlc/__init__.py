"""ttlc: a compiler and runtime for the Tiny Tensor Language."""
from .diagnostics import CompileError, Diagnostic, KernelError
from .ir.core import Program

# The subpackages ttlc.parse and ttlc.check share their names with the functions below.
# Importing a subpackage for the first time binds it as an attribute of this package, which
# would replace the function (ttlc.check(...) working once, then "'module' object is not
# callable").  Import them now, so that the definitions below are the final bindings.
from . import parse as _parse_package, check as _check_package  # noqa: E402,F401

from .version import __version__


def parse(text: str, filename: str = "<input>", defines=None) -> Program:
    """Parse program text into IR; raises CompileError for invalid syntax or names.
    ``defines`` ({name: value}) sets template parameters (``$name``), see the language
    guide's section on templates."""
    from .api import parse as _parse

    return _parse(text, filename, defines)


def check(text_or_program, filename: str = "<input>", defines=None) -> Program:
    """Parse (if given text) and verify; raises CompileError listing every error found."""
    from .api import check as _check

    return _check(text_or_program, filename, defines)


def __getattr__(name):
    """The builder (``ttlc.ProgramBuilder``) and ``ttlc.types`` load on first use."""
    if name in ("ProgramBuilder", "Builder", "RegionOp"):
        from .ir import builder

        return getattr(builder, name)
    if name in ("Group", "PreparedGroup"):  # group arguments: see ttlc.runtime.args
        from .runtime import args

        return getattr(args, name)
    if name in ("bench", "BenchResult"):  # timing kernels: see ttlc.runtime.timing
        from .runtime import timing

        return getattr(timing, name)
    if name in ("types", "recipes", "dask"):  # ttlc.dask needs the extra ttlc[dask]
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'ttlc' has no attribute {name!r}")


def compile(text_or_program, target: str = "cpu", checked: bool = False,
            filename: str = "<input>", defines=None):
    """Compile for a back end of ``ttlc.backends`` ("cpu", the default: LLVM machine code
    for this CPU, or "interp": the reference interpreter, which also finds data races in
    checked mode); ``module["kernel"](*args, grid=...)`` runs it."""
    from .api import compile as _compile

    return _compile(text_or_program, target, checked, filename, defines)


def autotune(text_or_program, kernel, args, configs, grid=(1, 1, 1), **options):
    """The kernel compiled with the fastest of `configs` (dicts of ``work_group_size``,
    ``subgroup_size``, ``defines``) for these arguments and grid, the choice remembered on
    disk (see ``ttlc.tuning.autotune`` for the options)."""
    from .tuning import autotune as _autotune

    return _autotune(text_or_program, kernel, args, configs, grid, **options)


__all__ = ["KernelError", "compile", "autotune", "recipes", "Group", "PreparedGroup", "CompileError", "Diagnostic", "Program", "parse", "check", "__version__",
           "ProgramBuilder", "Builder", "RegionOp", "types", "bench", "BenchResult"]
