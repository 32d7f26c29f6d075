"""Build and load benchmarks/native.c (STREAM triad, LIBXSMM batch loop) through ctypes.

The work is split into one contiguous chunk per thread, the first run by the calling
thread and the others by ttlc's worker threads (``ttlc.backends.cpu.pool``), exactly as
ttlc launches work-groups: what a launch costs is then the same on both sides.  Without
that pool (not Linux), a Python thread pool runs the chunks.

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
import struct
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
        if not lib.ttlcbench_has_libxsmm():
            self.reasons.setdefault("libxsmm", "LIBXSMM not found (apt-get install libxsmm-dev)")

    @property
    def has_triad(self) -> bool:
        return self.lib is not None

    @property
    def has_libxsmm(self) -> bool:
        return self.lib is not None and "libxsmm" not in self.reasons

    def triad(self, a, b, c, s: float, threads: int) -> None:
        bits = struct.unpack("<q", struct.pack("<d", s))[0]
        parallel(a.size, threads, self.lib.ttlcbench_triad_chunk,
                 [a.ctypes.data, b.ctypes.data, c.ctypes.data, bits])

    def xsmm_gemm(self, A, B, C, m: int, n: int, k: int, batch: int, threads: int) -> None:
        """C[:, :, i] = A[:, :, i] @ B[:, :, i] for column-major packed batches."""
        fn = (self.lib.ttlcbench_xsmm_chunk_f32 if A.dtype.itemsize == 4
              else self.lib.ttlcbench_xsmm_chunk_f64)
        if not parallel(batch, threads, fn, [m, n, k, A.ctypes.data, B.ctypes.data,
                                             C.ctypes.data]):
            raise RuntimeError(f"LIBXSMM has no kernel for {m}x{n}x{k} {A.dtype}")

    def xsmm_strided(self, A, B, C, m: int, n: int, k: int, ld: Tuple[int, int, int],
                     strides: Tuple[int, int, int], batch: int, threads: int) -> None:
        """C_i = A_i B_i (column-major) with leading dimensions `ld` and element strides from
        one member to the next (0: one matrix shared by all members)."""
        fn = (self.lib.ttlcbench_xsmm_strided_chunk_f32 if A.dtype.itemsize == 4
              else self.lib.ttlcbench_xsmm_strided_chunk_f64)
        if not parallel(batch, threads, fn, [m, n, k, *ld, A.ctypes.data, B.ctypes.data,
                                             C.ctypes.data, *strides]):
            raise RuntimeError(f"LIBXSMM has no kernel for {m}x{n}x{k} {A.dtype}")

    def xsmm_chain(self, A, B, C, D, m: int, k: int, n: int, p: int,
                   strides: Tuple[int, int, int, int], batch: int, threads: int) -> None:
        """D_i = A_i B_i C_i (A m x k, B k x n, C n x p, packed column-major) through a
        temporary; element strides from one member to the next (0: shared)."""
        fn = (self.lib.ttlcbench_xsmm_chain_chunk_f32 if A.dtype.itemsize == 4
              else self.lib.ttlcbench_xsmm_chain_chunk_f64)
        if not parallel(batch, threads, fn, [m, k, n, p, A.ctypes.data, B.ctypes.data,
                                             C.ctypes.data, D.ctypes.data, *strides]):
            raise RuntimeError(f"LIBXSMM has no kernel for the chain {m}x{k}x{n}x{p} {A.dtype}")


#: the signature of ttlc's CPU kernels, which the *_chunk functions share
_CHUNK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_long, ctypes.c_long,
                          ctypes.c_void_p, ctypes.c_void_p)
_POOL = None
_POOL_SIZE = 0
_ERROR_RECORD = (ctypes.c_int64 * 64)()  # (the chunk functions never write it)


def parallel(count: int, threads: int, function, args) -> bool:
    """function's chunks of range(count) over `threads` threads, as ttlc launches: True
    when every chunk returned 0."""
    global _POOL, _POOL_SIZE
    address = ctypes.cast(function, ctypes.c_void_p).value
    slots = (ctypes.c_int64 * len(args))(*args)
    chunks = max(1, min(threads, count))
    if chunks > 1:
        try:
            from ttlc.backends.cpu import pool
            native = pool.NativePool.create()
        except ImportError:
            native = None
        if native is not None:
            failures = native.run(address, ctypes.addressof(slots), count, chunks, 0,
                                  ctypes.addressof(_ERROR_RECORD))
            if failures is not None:
                return not failures
    run = _CHUNK(address)
    bounds = [count * i // chunks for i in range(chunks + 1)]
    if chunks == 1:
        return run(ctypes.addressof(slots), 0, count, None, None) == 0
    if _POOL_SIZE < chunks - 1:
        _POOL = ThreadPoolExecutor(max_workers=chunks - 1, thread_name_prefix="ttlcbench")
        _POOL_SIZE = chunks - 1
    futures = [_POOL.submit(run, ctypes.addressof(slots), bounds[i], bounds[i + 1], None, None)
               for i in range(1, chunks)]
    codes = [run(ctypes.addressof(slots), bounds[0], bounds[1], None, None)]
    return not any(codes + [f.result() for f in futures])


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
