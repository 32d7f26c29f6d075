"""check-ir: run the verifier (every rule of the language reference)."""
from ..check.verifier import verify


def check_ir(program, ctx):
    """Verify the program; errors stop the pipeline."""
    verify(program)
