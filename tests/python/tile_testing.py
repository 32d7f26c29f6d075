"""NVIDIA's Tile IR tools for the tests of target cuda-tile: ``tileiras`` (bytecode to a
cubin) and ``tileirdisasm`` (bytecode to text), from the PyPI package ``cuda-tile[tileiras]``
(the ``tile`` extra of ttlc) or from PATH (``ttlc.backends.tile.tools``); tests skip with a
reason where they are absent.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
import zlib
from typing import Tuple

from ttlc.backends.tile.tools import tileiras, tool

ARCHS = ("sm_90", "sm_100")
#: tileiras's optimisation level: 0 in ``make test`` (half the time, the same checks of
#: the module), the default 3 in ``make fuzz`` (TTLC_TILE_OPT=3)
OPT = os.environ.get("TTLC_TILE_OPT", "0")


def archs_for(name: str) -> Tuple[str, ...]:
    """The architectures a corpus module is compiled for: both with TTLC_TILE_ARCHS=all
    (``make fuzz``); otherwise, to halve ``make test``'s time, one chosen by the name, so
    that each architecture sees about half of the corpus."""
    if os.environ.get("TTLC_TILE_ARCHS") == "all":
        return ARCHS
    return (ARCHS[zlib.crc32(name.encode()) % len(ARCHS)],)
MISSING = "NVIDIA's tileiras/tileirdisasm are not installed (pip install 'ttlc[tile]')"


def available() -> bool:
    return tool("tileiras") is not None and tool("tileirdisasm") is not None


def compile_cubin(bytecode: bytes, arch: str) -> Tuple[bool, str]:
    """Whether tileiras compiles the bytecode for `arch`, and what it said."""
    cubin, log = tileiras(bytecode, arch, OPT)
    return cubin is not None, log


def disassemble(bytecode: bytes) -> str:
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "m.tilebc")
        with open(src, "wb") as f:
            f.write(bytecode)
        r = subprocess.run([tool("tileirdisasm"), src], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout


_NAME = re.compile(r"%[A-Za-z0-9_$.-]+")  # MLIR's value names (``%cst_-1_i64``)
#: a float constant, whose digits are formatting (MLIR prints the shortest that reads back)
_FLOAT = re.compile(r"<(f16|bf16|f32|f64): ([-+0-9.eE]+|inf|nan)>")
#: where a name is defined: the results before `` = `` at the start of a line, a block or
#: entry argument (``%x: type``), a loop variable (``%i in (``), a carried value
#: (``iter_values(%a = %init``)
_RESULTS = re.compile(r"^\s*(%[\w$.:-]+(?:, %[\w$.-]+)*) = ")
_DEFINED_AFTER = re.compile(r": | in \(| = ")


def _as(element: str, digits: str) -> float:
    """The number a float literal denotes in its type."""
    import ml_dtypes
    import numpy as np

    kind = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
    return float(kind[element](float(digits)))


def normalise(text: str) -> str:
    """Text modulo formatting: the module wrapper (tileirdisasm leaves it out) dropped,
    SSA names numbered in order of definition (sibling regions may reuse a name), float
    constants as numbers, and whitespace runs collapsed."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].startswith("cuda_tile.module"):
        lines = lines[1:-1]
    current: dict = {}
    count = 0
    out = []
    for line in lines:
        m = _RESULTS.match(line)
        lhs_end = m.end(1) if m else 0
        replaced = {}
        defs = []
        for occ in _NAME.finditer(line):
            after = line[occ.end():occ.end() + 5]
            if occ.start() < lhs_end or _DEFINED_AFTER.match(after.lstrip(":0123456789")
                                                              if after.startswith(":") and
                                                              after[1:2].isdigit() else after):
                defs.append(occ)
            else:
                replaced[occ.start()] = current.get(occ.group(0), occ.group(0))
        for occ in defs:
            current[occ.group(0)] = replaced[occ.start()] = f"%v{count}"
            count += 1
        pieces, last = [], 0
        for occ in _NAME.finditer(line):
            pieces += [line[last:occ.start()], replaced[occ.start()]]
            last = occ.end()
        out.append("".join(pieces) + line[last:])
    text = _FLOAT.sub(lambda m: f"<{m.group(1)}: {_as(m.group(1), m.group(2))!r}>", " ".join(out))
    return " ".join(text.split())
