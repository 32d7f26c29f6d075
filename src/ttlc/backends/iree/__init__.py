"""Target iree-vector: each kernel's cooperative-matrix values as MLIR ``vector`` values
with IREE's ``iree_vector_ext.to_layout`` and the target's nested layouts
(``export.py``; docs/iree-vector.md describes the export and what IREE checks of it)."""
