#!/usr/bin/env python3
"""Parse and check every example program with the Python API and print its canonical form.

For each ``examples/*.ir``: ``ttlc.check(text)`` parses and verifies the program, the
canonical print (``str(program)``) is shown with the time taken, and the print is parsed
again to confirm it is a fixed point.  Exits 1 if any example fails.

    python examples/demo.py [FILE.ir ...]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

try:
    import ttlc
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import ttlc


def run(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    start = time.perf_counter()
    try:
        program = ttlc.check(text, filename=str(path))
    except ttlc.CompileError as e:
        print(f"== {path.name}: FAILED", file=sys.stderr)
        print(e, file=sys.stderr)
        return False
    checked = time.perf_counter()
    canonical = str(program)
    printed = time.perf_counter()
    again = str(ttlc.check(canonical, filename=f"{path.name} (canonical)"))
    if again != canonical:
        print(f"== {path.name}: FAILED: printing is not a fixed point", file=sys.stderr)
        return False
    names = ", ".join("@" + f.name for f in program.functions)
    print(f"== {path.name}: {names}")
    print(canonical, end="")
    print(f"-- parse+check {1e3 * (checked - start):.2f} ms, "
          f"print {1e3 * (printed - checked):.2f} ms\n")
    return True


def main(argv) -> int:
    here = Path(__file__).resolve().parent
    paths = [Path(a) for a in argv] or sorted(here.glob("*.ir"))
    if not paths:
        print("no examples found", file=sys.stderr)
        return 1
    failed = [p.name for p in paths if not run(p)]
    print(f"{len(paths) - len(failed)} of {len(paths)} examples passed")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
