"""Lexer and parser of the Tiny Tensor Language."""
from .parser import parse, parse_type

__all__ = ["parse", "parse_type"]
