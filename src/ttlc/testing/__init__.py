"""Testing aids: a random generator of valid programs with matching inputs."""
from .generator import GeneratedCase, generate

__all__ = ["GeneratedCase", "generate"]
