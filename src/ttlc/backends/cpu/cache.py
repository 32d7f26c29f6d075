"""The disk cache of compiled code.

Entries live in ``$TTLC_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/ttlc`` (default
``~/.cache/ttlc``), one file per key under a folder per target (``cpu/<key>.o``; the CPU
back end's runtime library is ``cpu/<key>.rtlib``; other users of this format, such as
``ttlc.autotune``, keep their own folder and suffix).
``TTLC_CACHE=0`` disables the cache (nothing is read or written).

A key is the SHA-256 of everything the code depends on (``key(...)``): the program, the
target, the options, the CPU name and features, and the ttlc and llvmlite versions
(ttlc's: ``compiler_version``, a hash of its sources).
An entry is ``MAGIC``, the SHA-256 of the payload, a newline and the payload; an entry
whose checksum does not match (a damaged file) is deleted and reported as a miss, so
the caller rebuilds it.  Entries are written to a temporary file in the same folder and
moved into place with ``os.replace``: concurrent processes never see half a file, and the
last writer wins with identical contents.
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Optional

from ...runtime import switches

MAGIC = b"TTLC-CACHE-1\n"


def enabled() -> bool:
    return switches.on("TTLC_CACHE")


def directory() -> Path:
    """The cache root (it may not exist yet)."""
    explicit = os.environ.get("TTLC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ttlc"


@functools.lru_cache(maxsize=None)
def compiler_version() -> str:
    """A hash of ttlc's sources (passes, code generator, runtime library, ...): code
    compiled by an older compiler is never reused, even when the version number did not
    change.  Part of every key of compiled code."""
    h = hashlib.sha256()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for folder, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        data = p.encode("utf-8") if isinstance(p, str) else bytes(p)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def path(target: str, k: str, suffix: str = ".o") -> Path:
    return directory() / target / f"{k}{suffix}"


def load(target: str, k: str, suffix: str = ".o") -> Optional[bytes]:
    """The payload stored under the key, or None (missing, disabled or damaged)."""
    if not enabled():
        return None
    p = path(target, k, suffix)
    try:
        data = p.read_bytes()
    except OSError:
        return None
    head = len(MAGIC) + 64 + 1
    if (len(data) >= head and data.startswith(MAGIC) and data[head - 1:head] == b"\n"
            and hashlib.sha256(data[head:]).hexdigest().encode() == data[len(MAGIC):head - 1]):
        return data[head:]
    try:  # damaged: remove it so that the rebuilt entry replaces it
        p.unlink()
    except OSError:
        pass
    return None


def store(target: str, k: str, payload: bytes, suffix: str = ".o") -> bool:
    """Write an entry atomically; False when the cache is disabled or not writable."""
    if not enabled():
        return False
    p = path(target, k, suffix)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{k[:16]}.", suffix=".tmp", dir=p.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        return False
    return True
