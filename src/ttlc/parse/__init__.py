"""Lexer and parser of the Tiny Tensor Language."""
from .parser import parse

__all__ = ["parse"]
