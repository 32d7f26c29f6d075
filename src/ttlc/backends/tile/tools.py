"""NVIDIA's Tile IR tools: ``tileiras`` (bytecode to a cubin) and ``tileirdisasm``
(bytecode to text), from the PyPI package ``cuda-tile[tileiras]`` (``nvidia/cu13/bin`` of
the Python environment) or from PATH, as cuTile looks for them."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Optional, Tuple

#: what to install when they are missing
INSTALL = "pip install 'ttlc[tile]' (NVIDIA's cuda-tile[tileiras])"


@functools.lru_cache(maxsize=None)
def tool(name: str) -> Optional[str]:
    """The path of an executable tool, None where it is not installed."""
    for base in sys.path:
        candidate = os.path.join(base, "nvidia", "cu13", "bin", name)
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name)


def tileiras(bytecode: bytes, arch: str, opt: Optional[str] = None) -> Tuple[Optional[bytes], str]:
    """(the cubin, or None where ``tileiras`` refused the module, what it said) for a GPU
    architecture (``sm_90``); `opt` its optimisation level (None: its default, 3).
    FileNotFoundError when tileiras is not installed."""
    exe = tool("tileiras")
    if exe is None:
        raise FileNotFoundError(f"NVIDIA's tileiras is not installed ({INSTALL})")
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "m.tilebc"), os.path.join(d, "m.cubin")
        with open(src, "wb") as f:
            f.write(bytecode)
        flags = [f"-O{opt}"] if opt is not None else []
        r = subprocess.run([exe, *flags, f"--gpu-name={arch}", src, "-o", out],
                           capture_output=True, text=True)
        log = r.stdout + r.stderr
        if r.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) == 0:
            return None, log
        with open(out, "rb") as f:
            return f.read(), log
