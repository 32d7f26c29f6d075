"""The interpreter's instruction semantics: opcode -> function, composed from the tables
of its modules (``semantics.BASIC``, ``coop.COOP``) in this one place."""
from __future__ import annotations

from ..ir.ops import compose_tables
from . import coop, semantics

SEMANTICS = compose_tables(semantics.BASIC, coop.COOP)
