# lit configuration for the ttlc test suite.
#
# Every test is a .ir program with RUN lines; `ttlc` and `filecheck` resolve to the
# tools of the virtual environment that runs lit (the Makefile puts .venv/bin first
# on PATH; without it we fall back to the interpreter running lit).  `not` is lit's
# builtin.
import os
import shutil
import sys

import lit.formats

config.name = "ttlc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir"]
config.excludes = ["lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.test_source_root

_bindir = os.path.dirname(sys.executable)


def _tool(name, fallback):
    """The tool next to the interpreter running lit, else on PATH, else `fallback`."""
    for candidate in (os.path.join(_bindir, name), shutil.which(name)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return fallback


_python = sys.executable
_ttlc = _tool("ttlc", f'"{_python}" -m ttlc')
_filecheck = _tool("filecheck", f'"{_python}" -m filecheck')

# Keep PATH (the Makefile's .venv/bin first) so the tools and their interpreter resolve.
config.environment["PATH"] = os.pathsep.join(
    p for p in (_bindir, os.environ.get("PATH", "")) if p)
for var in ("PYTHONPATH", "HOME", "TMPDIR", "LANG", "LC_ALL"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

# Word-bounded substitutions: `ttlc opt`, `| filecheck %s`; not inside file names.
config.substitutions.append((r"\bttlc\b", _ttlc))
config.substitutions.append((r"\bfilecheck\b", _filecheck))
config.substitutions.append(("%python", f'"{_python}"'))
