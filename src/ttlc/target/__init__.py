"""What the compiler knows about the machines it compiles for.

``description``: the target descriptions (``Target``, ``TARGETS``, ``get_target``) with
their matrix units; ``config``: the sizes a function runs with on one (``ExecConfig``).
"""
from .config import ExecConfig
from .description import (TARGETS, BlockIO, MatrixInstruction, MatrixUnit, Target, get_target,
                          NVIDIA_MMA, XE_DPAS)

__all__ = ["TARGETS", "BlockIO", "ExecConfig", "MatrixInstruction", "MatrixUnit", "NVIDIA_MMA",
           "Target", "XE_DPAS", "get_target"]
