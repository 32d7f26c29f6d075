"""The ``amx`` fixture: AMX code runs on this CPU's tiles where it has them, else with its
tile instructions emulated in plain LLVM IR (``jit.EMULATE_AMX``, ``amx_emulation.py``):
the same staging, tile shapes and strides, so results against NumPy check them anywhere."""
from __future__ import annotations

import pytest

jit = pytest.importorskip("ttlc.backends.cpu.jit")

#: AMX-BF16 tiles granted to this process (else the tests emulate them)
REAL = jit.amx_usable()


@pytest.fixture
def amx(monkeypatch):
    """AMX for the test, real or emulated (its name is the value); the disk cache off, so
    that the code is compiled in the mode at hand."""
    monkeypatch.setenv("TTLC_CACHE", "0")
    saved = jit.EMULATE_AMX
    jit.EMULATE_AMX = not REAL
    jit.amx_usable.cache_clear()
    try:
        yield "real" if REAL else "emulated"
    finally:
        jit.EMULATE_AMX = saved
        jit.amx_usable.cache_clear()
