"""The reference interpreter (target "interp")."""
from __future__ import annotations

import numpy as np

from ..runtime import Module
from .machine import Config, WorkGroup
from .values import Memory


class InterpModule(Module):
    target = "interp"

    def launch(self, kernel, args, grid) -> None:
        from ..runtime.args import marshal  # here: runtime.args imports interp.values

        func = kernel.func
        memory = Memory()
        values = marshal(args, func.args, memory, func.name)
        config = Config.of(func)
        with np.errstate(all="ignore"):
            for gz in range(grid[2]):
                for gy in range(grid[1]):
                    for gx in range(grid[0]):
                        wg = WorkGroup(func, memory, config, (gx, gy, gz), grid, self.checked,
                                       func.name, self.program.filename)
                        wg.run(values)
