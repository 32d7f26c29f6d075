"""The interpreter's instruction semantics: opcode -> function, composed from the tables
of its modules (``semantics.BASIC``, ``coop.COOP``) in this one place."""
from __future__ import annotations

from typing import Callable, Dict

from . import coop, semantics


def _compose(*tables: Dict[str, Callable]) -> Dict[str, Callable]:
    out: Dict[str, Callable] = {}
    for table in tables:
        twice = set(out) & set(table)
        assert not twice, f"semantics defined twice: {sorted(twice)}"
        out.update(table)
    return out


SEMANTICS = _compose(semantics.BASIC, coop.COOP)
