"""The types of the language and helpers to spell them, for building programs in Python.

    from ttlc.types import F32, INDEX, memref, group, coopmatrix
    memref(F32, 16, None, stride=(1, None), space="local")  # memref<f32x16x?,strided<1,?>,local>
"""
from .ir.builder import coopmatrix, group, memref
from .ir.types import (BF16, BOOL, C32, C64, DYNAMIC, F16, F32, F64, I8, I16, I32, I64, INDEX,
                       MATRIX_USES, SCALAR_TYPES, VOID, BoolType, CoopMatrixType, GroupType,
                       MemrefType, ScalarType, Type, VoidType)

__all__ = ["memref", "group", "coopmatrix", "I8", "I16", "I32", "I64", "INDEX", "BF16", "F16",
           "F32", "F64", "C32", "C64", "BOOL", "VOID", "DYNAMIC", "MATRIX_USES", "SCALAR_TYPES",
           "Type", "VoidType", "BoolType", "ScalarType", "MemrefType", "GroupType",
           "CoopMatrixType"]
