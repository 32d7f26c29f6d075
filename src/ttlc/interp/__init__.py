"""The reference interpreter (back end "interp" of ``ttlc.backends``).

A leaf: it imports the IR, the runtime (memory model, argument checks) and the target
descriptions; nothing but the back-end registry and constant folding imports it.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Program
from ..runtime import Module
from ..runtime.args import marshal
from ..runtime.values import Memory
from ..target import ExecConfig, Target
from .machine import WorkGroup


class InterpModule(Module):
    target = "interp"

    def __init__(self, program: Program, machine: Target, checked: bool = False):
        super().__init__(program, checked, machine.max_grid)
        #: the target description whose sizes functions run with (``ExecConfig.of``)
        self.machine = machine

    def launch(self, kernel, args, grid) -> None:
        func = kernel.func
        memory = Memory()
        values = marshal(args, func.args, memory, func.name)
        config = ExecConfig.of(func, self.machine)
        with np.errstate(all="ignore"):
            for gz in range(grid[2]):
                for gy in range(grid[1]):
                    for gx in range(grid[0]):
                        wg = WorkGroup(func, memory, config, (gx, gy, gz), grid, self.checked,
                                       func.name, self.program.filename)
                        wg.run(values)


def compile(program: Program, machine: Target, checked: bool) -> InterpModule:
    """The registry's entry point (``ttlc.backends.Backend.compile``)."""
    return InterpModule(program, machine, checked)
