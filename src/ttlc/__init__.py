"""ttlc: a compiler and runtime for the Tiny Tensor Language."""
from .diagnostics import CompileError, Diagnostic
from .ir.core import Program

__version__ = "0.1.0"


def parse(text: str, filename: str = "<input>") -> Program:
    """Parse program text into IR; raises CompileError for invalid syntax or names."""
    from .api import parse as _parse

    return _parse(text, filename)


def check(text_or_program, filename: str = "<input>") -> Program:
    """Parse (if given text) and verify; raises CompileError listing every error found."""
    from .api import check as _check

    return _check(text_or_program, filename)


__all__ = ["CompileError", "Diagnostic", "Program", "parse", "check", "__version__"]
