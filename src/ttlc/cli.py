"""The ``ttlc`` command line: check, opt (print), and later compile/run/bench."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def _read(path: str):
    if path == "-":
        data = sys.stdin.buffer.read()
        return data, "<stdin>"
    with open(path, "rb") as f:
        return f.read(), path


def _load(path: str, verify: bool):
    """Read, parse and (optionally) verify a program; prints diagnostics on failure."""
    from . import api
    from .diagnostics import CompileError

    try:
        data, name = _read(path)
    except OSError as e:
        print(f"ttlc: cannot read {path}: {e.strerror}", file=sys.stderr)
        return None
    try:
        program = api.parse(data, name)
        if verify:
            api.check(program)
        return program
    except CompileError as e:
        print(e.format(), file=sys.stderr)
        return None


def cmd_check(args) -> int:
    return 0 if _load(args.file, verify=True) is not None else 1


def cmd_opt(args) -> int:
    for name in args.passes:
        print(f"ttlc: unknown pass '{name}' (no passes are registered yet)", file=sys.stderr)
        return 2
    program = _load(args.file, verify=True)
    if program is None:
        return 1
    sys.stdout.write(str(program))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="ttlc", description="Compiler for the Tiny Tensor Language.")
    parser.add_argument("--version", action="version", version=f"ttlc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="parse and verify a program; exit 1 if it is invalid")
    p.add_argument("file", help="program file, or - for standard input")
    p.set_defaults(run=cmd_check)
    p = sub.add_parser("opt", help="verify, run passes and print the program")
    p.add_argument("file", help="program file, or - for standard input")
    p.add_argument("-p", "--pass", dest="passes", action="append", default=[], metavar="PASS",
                   help="run a pass (may be repeated)")
    p.set_defaults(run=cmd_opt)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug in ttlc: say so plainly instead of a traceback
        print(f"ttlc: internal error ({type(e).__name__}: {e}); please report this with the "
              "input that caused it", file=sys.stderr)
        return 3
