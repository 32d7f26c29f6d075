"""Build and load benchmarks/native.c (STREAM triad, LIBXSMM batch loop) through ctypes.

The work is split into one contiguous chunk per thread, the first run by the calling
thread and the others by a thread pool, as ttlc's CPU runtime launches work-groups.

LIBXSMM is taken from the Debian package libxsmm-dev (`apt-get install libxsmm-dev`),
which ships static archives only: they are linked into one shared library together with
the C loop, built once with the system C compiler into ``benchmarks/results/.build`` and
rebuilt when native.c changes.  ``load()`` returns the library, and a reason for each part
that is missing (no C compiler, no LIBXSMM).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Optional, Tuple

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "native.c"
BUILD = HERE / "results" / ".build"
#: where Debian puts the LIBXSMM archives and header
XSMM_ARCHIVES = [Path("/usr/lib/libxsmm.a"), Path("/usr/lib/libxsmmnoblas.a")]
XSMM_HEADER = Path("/usr/include/libxsmm.h")


class Native:
    """The loaded helpers; ``reasons`` says why a part is missing ("triad", "libxsmm")."""

    def __init__(self, lib: Optional[ctypes.CDLL], reasons: Dict[str, str]):
        self.lib = lib
        self.reasons = dict(reasons)
        if lib is None:
            return
        p, i, l, d = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_double
        lib.ttlcbench_triad.argtypes = [l, l, p, p, p, d]
        lib.ttlcbench_triad.restype = None
        if lib.ttlcbench_has_libxsmm():
            for name in ("ttlcbench_xsmm_gemm_f32", "ttlcbench_xsmm_gemm_f64"):
                fn = getattr(lib, name)
                fn.argtypes = [i, i, i, l, l, p, p, p]
                fn.restype = i
        else:
            self.reasons.setdefault("libxsmm", "LIBXSMM not found (apt-get install libxsmm-dev)")

    @property
    def has_triad(self) -> bool:
        return self.lib is not None

    @property
    def has_libxsmm(self) -> bool:
        return self.lib is not None and "libxsmm" not in self.reasons

    def triad(self, a, b, c, s: float, threads: int) -> None:
        pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
        parallel(a.size, threads, lambda lo, hi: self.lib.ttlcbench_triad(lo, hi, pa, pb, pc, s))

    def xsmm_gemm(self, A, B, C, m: int, n: int, k: int, batch: int, threads: int) -> None:
        """C[:, :, i] = A[:, :, i] @ B[:, :, i] for column-major packed batches."""
        fn = (self.lib.ttlcbench_xsmm_gemm_f32 if A.dtype.itemsize == 4
              else self.lib.ttlcbench_xsmm_gemm_f64)
        pa, pb, pc = A.ctypes.data, B.ctypes.data, C.ctypes.data
        codes = parallel(batch, threads, lambda lo, hi: fn(m, n, k, lo, hi, pa, pb, pc))
        if any(codes):
            raise RuntimeError(f"LIBXSMM has no kernel for {m}x{n}x{k} {A.dtype}")


_POOL = None
_POOL_SIZE = 0


def parallel(count: int, threads: int, run):
    """run(begin, end) over `threads` contiguous chunks of range(count); their results."""
    global _POOL, _POOL_SIZE
    chunks = max(1, min(threads, count))
    bounds = [count * i // chunks for i in range(chunks + 1)]
    if chunks == 1:
        return [run(0, count)]
    if _POOL_SIZE < chunks - 1:
        _POOL = ThreadPoolExecutor(max_workers=chunks - 1, thread_name_prefix="ttlcbench")
        _POOL_SIZE = chunks - 1
    futures = [_POOL.submit(run, bounds[i], bounds[i + 1]) for i in range(1, chunks)]
    return [run(bounds[0], bounds[1])] + [f.result() for f in futures]


def _compile(out: Path, with_xsmm: bool) -> Tuple[bool, str]:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False, "no C compiler (cc) found"
    cmd = [cc, "-O3", "-march=native", "-shared", "-fPIC", str(SOURCE), "-o", str(out)]
    if with_xsmm:
        cmd[1:1] = ["-DHAVE_LIBXSMM"]
        cmd += [str(a) for a in XSMM_ARCHIVES] + ["-lm", "-ldl", "-lpthread"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        return False, f"{' '.join(cmd)} failed: {result.stderr.strip()[-400:]}"
    return True, ""


def load() -> Native:
    """Build (if needed) and load the helpers; never raises."""
    reasons: Dict[str, str] = {}
    with_xsmm = XSMM_HEADER.exists() and all(a.exists() for a in XSMM_ARCHIVES)
    if not with_xsmm:
        reasons["libxsmm"] = "LIBXSMM not installed (apt-get install libxsmm-dev)"
    tag = hashlib.sha256(SOURCE.read_bytes() + bytes([with_xsmm])).hexdigest()[:16]
    out = BUILD / f"libttlcbench-{tag}.so"
    if not out.exists():
        BUILD.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        ok, why = _compile(tmp, with_xsmm)
        if not ok and with_xsmm:  # keep the triad when only LIBXSMM fails to link
            reasons["libxsmm"] = f"linking LIBXSMM failed: {why}"
            ok, why = _compile(tmp, False)
        if not ok:
            reasons.update(triad=why, libxsmm=reasons.get("libxsmm", why))
            return Native(None, reasons)
        os.replace(tmp, out)
    try:
        return Native(ctypes.CDLL(str(out)), reasons)
    except OSError as e:
        reasons.update(triad=f"loading {out} failed: {e}", libxsmm=f"loading {out} failed: {e}")
        return Native(None, reasons)
