"""Coopmatrix and subgroup semantics (to be completed)."""
