"""Compiled modules and kernel launches (README, "Running kernels")."""
from __future__ import annotations

import math
import operator
from typing import Any, Dict, Sequence, Tuple

from ..ir.core import Function, Program
from ..ir.printer import signature

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class Kernel:
    """One function of a compiled module; call it with the kernel's arguments and a grid."""

    #: how ``ttlc.autotune`` chose its configuration (``ttlc.tuning.Tuning``), else None
    tuning = None

    def __init__(self, module: "Module", func: Function):
        self.module = module
        self.func = func
        self.name = func.name
        self._launch = None  # module.launcher(self), made at the first call
        #: what help(kernel) shows: the signature and how it was compiled
        self.__doc__ = (f"{self.signature}\n\nCompiled for target {module.target}"
                        f"{', checked' if module.checked else ''}; call with the arguments "
                        "in this order and grid=(gx, gy, gz) work-groups.")

    @property
    def signature(self) -> str:
        """``func @name(%arg: type, ...) attributes{...}``, as the program text has it."""
        return signature(self.func)

    def __call__(self, *args: Any, grid: Sequence[int] = (1, 1, 1)) -> None:
        launch = self._launch
        if launch is None:
            launch = self._launch = self.module.launcher(self)
        launch(args, grid)

    def __repr__(self) -> str:
        return (f"<ttlc kernel {self.signature} on {self.module.target}"
                f"{', checked' if self.module.checked else ''}>")


class Module:
    """A verified program prepared for a target; ``module["name"]`` gives a Kernel."""

    target = "none"

    def __init__(self, program: Program, checked: bool = False,
                 max_grid: Tuple[int, int, int] = (INT32_MAX,) * 3):
        self.program = program
        self.checked = checked
        #: the largest grid size per mode the target launches (``Target.max_grid``)
        self.max_grid = max_grid
        self.kernels: Dict[str, Kernel] = {f.name: Kernel(self, f) for f in program.functions}

    def __getitem__(self, name: str) -> Kernel:
        name = name[1:] if name.startswith("@") else name
        try:
            return self.kernels[name]
        except KeyError:
            known = ", ".join("@" + k for k in self.kernels) or "none"
            raise KeyError(f"no kernel @{name} in this module (kernels: {known})") from None

    def __iter__(self):
        return iter(self.kernels)

    def __repr__(self) -> str:
        names = ", ".join("@" + k for k in self.kernels) or "no kernels"
        return f"<ttlc module on {self.target}{', checked' if self.checked else ''}: {names}>"

    def launch(self, kernel: Kernel, args, grid) -> None:
        """Run `kernel` on `args` over `grid` (checked by ``check_grid``)."""
        raise NotImplementedError

    def launcher(self, kernel: Kernel):
        """The function of (args, grid) that a call of `kernel` runs: checks the grid and
        launches.  A target whose launches cost little gives one made for the kernel."""
        def launch(args, grid) -> None:
            self.launch(kernel, args, check_grid(grid, self.max_grid))
        return launch


_ONES = {1: (1, 1), 2: (1,), 3: ()}


def check_grid(grid, limit: Tuple[int, int, int] = (INT32_MAX,) * 3) -> Tuple[int, int, int]:
    """(gx, gy, gz) from an integer or a 1-, 2- or 3-tuple of positive integers, each at
    most the target's limit (work-group ids are computed in 64-bit integers, and a launch
    that could not finish is refused rather than attempted).  A size of 0 is refused too:
    a launch of no work-group is almost always a wrong batch count, not an intent."""
    if type(grid) is tuple and len(grid) == 1:  # the commonest case, grid=(n,), quickest
        x, = grid
        if type(x) is int and 0 < x <= limit[0]:
            return (x, 1, 1)
    if type(grid) is tuple and 0 < len(grid) <= 3:  # the common case, quickly
        for x, top in zip(grid, limit):
            if type(x) is not int or not 0 < x <= top:
                break
        else:
            if math.prod(grid) <= INT64_MAX:
                return grid + _ONES[len(grid)]
    try:
        items = [grid] if not hasattr(grid, "__iter__") else list(grid)
        g = tuple(operator.index(x) for x in items)
    except TypeError:
        raise TypeError(f"grid must be an integer or a tuple of 1 to 3 integers, got "
                        f"{grid!r}") from None
    if not 1 <= len(g) <= 3:
        raise ValueError(f"grid must be 1 to 3 positive sizes, got {grid!r}")
    for mode, (x, top) in enumerate(zip(g, limit)):
        if not 0 < x <= top:
            raise ValueError(f"grid mode {'xyz'[mode]} is {x}: each grid size must be a positive "
                             f"integer within this target's limit of {top} work-groups "
                             f"(grid={grid!r})")
    if math.prod(g) > INT64_MAX:
        raise ValueError(f"grid {grid!r} has more than 2**63 - 1 work-groups, this target's limit")
    return g + (1,) * (3 - len(g))
