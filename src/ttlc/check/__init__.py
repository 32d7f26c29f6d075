"""The verifier: every rule the language reference states."""
from .verifier import verify

__all__ = ["verify"]
