"""The Python entry points behind ``ttlc.parse`` and ``ttlc.check``.

They promise that any input text either gives IR or raises CompileError: internal
limits (recursion, memory for absurd sizes) are turned into diagnostics here.
"""
from __future__ import annotations

from typing import Mapping, Optional, Union

from .diagnostics import CompileError, Diagnostic
from .ir.core import Location, Program


def _guard(fn, text, filename):
    try:
        return fn()
    except CompileError:
        raise
    except RecursionError:
        raise CompileError([Diagnostic(Location(1, 1, 1, 1), "program nested too deeply")],
                           text, filename) from None
    except MemoryError:
        raise CompileError([Diagnostic(Location(1, 1, 1, 1), "program too large")],
                           text, filename) from None


def parse(text: Union[str, bytes], filename: str = "<input>",
          defines: Optional[Mapping[str, object]] = None) -> Program:
    from .parse.parser import parse as _parse

    text = _as_text(text, filename)
    return _guard(lambda: _parse(text, filename, defines), text, filename)


def check(text_or_program: Union[str, bytes, Program], filename: str = "<input>",
          defines: Optional[Mapping[str, object]] = None) -> Program:
    from .check.verifier import verify

    if isinstance(text_or_program, Program):
        if defines:
            raise ValueError("defines apply to program text, not to a parsed Program")
        program = text_or_program
    else:
        program = parse(text_or_program, filename, defines)
    _guard(lambda: verify(program), program.source, program.filename)
    return program


def upgrade(text: Union[str, bytes], filename: str = "<input>",
            defines: Optional[Mapping[str, object]] = None) -> Program:
    """A program of the legacy dialect as IR of the current language, verified (its
    diagnostics at the legacy text's lines); ``ttlc.parse.legacy.print_upgraded`` prints it."""
    from .parse.legacy import parse_legacy

    text = _as_text(text, filename)
    return check(_guard(lambda: parse_legacy(text, filename, defines), text, filename))


def _as_text(text, filename) -> str:
    if isinstance(text, (bytes, bytearray)):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CompileError([Diagnostic(Location(1, 1, 1, 1),
                                           f"input is not valid UTF-8 (byte {e.start})")],
                               None, filename) from None
    if not isinstance(text, str):
        raise TypeError(f"expected program text (str or bytes) or a Program, got {type(text).__name__}")
    return text


def compile(text_or_program, target: str = "cpu", checked: bool = False,
            filename: str = "<input>", defines: Optional[Mapping[str, object]] = None):
    """Verify a program and prepare it for a back end of ``ttlc.backends``; errors raise
    CompileError, an unknown target ValueError naming the registered ones."""
    from .backends import BackendUnavailable, get_backend

    backend = get_backend(target)
    program = check(text_or_program, filename, defines)
    try:
        backend.load()
    except BackendUnavailable as e:  # say what to install
        raise CompileError([Diagnostic(Location(1, 1, 1, 1), str(e))], program.source,
                           program.filename) from None
    return _guard(lambda: backend.compile(program, checked), program.source, program.filename)
