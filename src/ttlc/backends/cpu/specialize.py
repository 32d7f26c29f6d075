"""Launch-time specialisation: a kernel with dynamic sizes runs code compiled for its arrays.

A kernel whose memref parameters have dynamic sizes (``memref<f64x?x?x?>``, one kernel
for every shape) is compiled without knowing them: its work-group sizes, gemm's tiles
and remainders are chosen for sizes assumed.  Through such a kernel, batched f64
56x9x56 ran at 0.42 of LIBXSMM's speed and f32 8x8x8 at 0.05, the same kernel compiled
for those sizes at 1.0-1.5.  So, as LIBXSMM dispatches code generated for each shape,
a launch whose arrays have the sizes and strides of SPECIALIZE_AFTER - 1 earlier
launches runs a copy of the function compiled for them: in the copy's types the
parameters' dynamic sizes of at most SPECIALIZED_SIZE (the sizes whose tiles are chosen
one by one; a batch of thousands stays dynamic) and all their strides are static, and
static-views carries them into the views taken of the parameters.  So are the values of
integer parameters that views take sizes from (``func @k(%m: index, ..., %A: ...)`` with
``subview %A[0:%m, ...]``), when at most SPECIALIZED_SIZE: the copy uses a constant
instead (the parameter stays, unused, so that the copy is called as the kernel is).

Earlier launches, launches after MAX_VARIANTS copies and launches with an argument that
does not fit its memref parameter's type as declared (a null memref, another dtype or
order, a static size or stride of another value: the kernel reports it) run the kernel
as compiled; groups and other scalars are passed on as they are.  A copy chooses its
subgroup and work-group sizes for its sizes, as a kernel compiled for them would, unless
the function may observe them (``config.observed_sizes``: a builtin such as
``subgroup_size``, SPMD code): then it runs with those of the kernel as compiled, so
that it computes what the kernel does.  A copy's arguments are checked as the kernel's
(same parameters, same messages).  Checked kernels are not specialised.
``TTLC_SPECIALIZE=0`` turns copies off (read when a kernel is first called); the copies
are kept in the disk cache as any program.
"""
from __future__ import annotations

import threading
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Argument, Function, Program, Region
from ...ir.ops import view_sizes
from ...ir.rewrite import clone_program, replace_all_uses, set_function_attributes
from ...ir.types import DYNAMIC, MemrefType, ScalarType
from ...runtime import switches

#: the launch with the same sizes, strides and size values that compiles the copy for
#: them (the third: a shape used once or twice does not pay for a compile)
SPECIALIZE_AFTER = 3
#: the largest dynamic size that becomes static in a copy
SPECIALIZED_SIZE = 128
#: the most copies of one kernel
MAX_VARIANTS = 32
#: the most keys whose launches are counted at once
MAX_COUNTED = 1024


def enabled() -> bool:
    return switches.on("TTLC_SPECIALIZE")


def _params(func: Function) -> List[Tuple[int, MemrefType]]:
    """(position, type) of the memref parameters with a dynamic size."""
    return [(i, a.value.type) for i, a in enumerate(func.args)
            if isinstance(a.value.type, MemrefType) and DYNAMIC in a.value.type.shape]


def _size_scalars(func: Function) -> List[int]:
    """The positions of the integer parameters a view takes a size from
    (``subview %A[0:%m, ...]``)."""
    used = {v for inst in func.body.walk() for v in view_sizes(inst)}
    return [i for i, a in enumerate(func.args)
            if isinstance(a.value.type, ScalarType) and a.value.type.is_int and a.value in used]


#: the most array layouts whose key parts a kernel's copies remember (``Specializer.key``)
LAYOUTS = 256
_UNSEEN = object()


def _memref_part(x, t: MemrefType) -> Optional[tuple]:
    """(sizes made static, or None; strides) of argument `x` for memref parameter `t`,
    or None where it does not fit the type as declared (the launch reports it)."""
    from ...runtime.args import as_array, element_strides
    from ...runtime.values import DTYPES

    if x is None:
        return None
    try:
        arr = as_array(x, "")
        if arr.ndim != t.order or arr.dtype != DTYPES[t.element.name]:
            return None
        got = element_strides(arr, "")
    except (TypeError, ValueError):
        return None  # the launch reports it
    if any(want is not DYNAMIC and want != n for want, n in zip(t.shape, arr.shape)):
        return None
    if any(want is not DYNAMIC and want != st and n > 1
           for want, st, n in zip(t.stride, got, arr.shape)):
        return None
    sizes = tuple(n if want is DYNAMIC and n <= SPECIALIZED_SIZE else None
                  for want, n in zip(t.shape, arr.shape))
    # (a mode of one entry keeps a dynamic stride: it addresses nothing, and the packed
    # stride element_strides gives it may break a static one's order)
    strides = tuple(st if want is DYNAMIC and n > 1 else want
                    for want, st, n in zip(t.stride, got, arr.shape))
    return sizes, strides


class Specializer:
    """The copies of one kernel (``CpuModule.launcher`` asks ``launcher(args)`` at each
    launch)."""

    def __init__(self, module, func: Function, params: List[Tuple[int, MemrefType]],
                 scalars: List[int]):
        self.module = module
        self.func = func
        self.params = params
        self.scalars = scalars
        self.counts: Dict[tuple, int] = {}
        #: the launcher of each key's copy, None where the copy could not be made
        self.copies: Dict[tuple, object] = {}
        #: each memref parameter's key part for a NumPy array's (parameter, dtype,
        #: shape, byte strides); None where the launch runs the kernel as compiled
        self.layouts: Dict[tuple, Optional[tuple]] = {}
        self.lock = threading.Lock()

    @classmethod
    def of(cls, module, func: Function) -> Optional["Specializer"]:
        if not module.specializes or not enabled():
            return None
        params, scalars = _params(func), _size_scalars(func)
        return cls(module, func, params, scalars) if params or scalars else None

    def key(self, args) -> Optional[tuple]:
        """Each memref parameter's (sizes made static, or None; strides), then each size
        scalar's value (or None), or None: the launch runs the kernel as compiled.  A
        NumPy array's part is remembered for its dtype, shape and byte strides
        (LAYOUTS of them): computing it took most of a launch (f64 8x8 gemm on
        ``memref<f64x?x?>`` operands: 13-16 of 21-23 us; remembered 1.7-1.9 us)."""
        if len(args) != len(self.func.args):
            return None
        parts = []
        for i, t in self.params:
            x = args[i]
            if type(x) is np.ndarray:
                layout = (i, x.dtype, x.shape, x.strides)
                part = self.layouts.get(layout, _UNSEEN)
                if part is _UNSEEN:
                    if len(self.layouts) >= LAYOUTS:
                        self.layouts.clear()
                    part = self.layouts[layout] = _memref_part(x, t)
            else:
                part = _memref_part(x, t)
            if part is None:
                return None
            parts.append(part)
        for i in self.scalars:
            x = args[i]
            small = type(x) is not bool and isinstance(x, (int, np.integer)) \
                and 0 < x <= SPECIALIZED_SIZE
            parts.append(int(x) if small else None)
        if all(s is None for sizes, _ in parts[:len(self.params)] for s in sizes) \
                and all(v is None for v in parts[len(self.params):]):
            return None
        return tuple(parts)

    def launcher(self, args):
        """The launcher of the copy for these arguments, or None (run the kernel)."""
        key = self.key(args)
        if key is None:
            return None
        copy = self.copies.get(key)
        if copy is not None or key in self.copies:
            return copy
        with self.lock:
            if key in self.copies:
                return self.copies[key]
            if len(self.copies) >= MAX_VARIANTS:
                return None
            seen = self.counts.pop(key, 0) + 1
            if seen < SPECIALIZE_AFTER:
                if len(self.counts) >= MAX_COUNTED:  # ever new shapes: start again
                    self.counts.clear()
                self.counts[key] = seen
                return None
            copy = self.copies[key] = self._compile(key)
        return copy

    def program_for(self, key: tuple) -> Program:
        """The copy of the function for `key`, alone in a program: the parameters' types
        with the key's sizes and strides; the subgroup and work-group sizes of the kernel
        as compiled where the function may observe them (``config.observed_sizes``), else
        chosen for the copy's sizes (f32 1x40x7 gets 8 lanes, as its static kernel)."""
        from ...target.config import compiled_config, observed_sizes

        module = self.module
        program = clone_program(Program([self.func], module.program.source,
                                        module.program.filename))
        func = program.functions[0]
        if observed_sizes(self.func):
            config = compiled_config(self.func, module.artifacts.description(), module.program)
            set_function_attributes(func, config.attributes(),
                                    first=("subgroup_size", "work_group_size"))
        for (i, t), (sizes, strides) in zip(self.params, key):
            shape = tuple(s if s is not None else n for s, n in zip(sizes, t.shape))
            arg: Argument = func.args[i]
            arg.value.type = MemrefType(t.element, shape, strides, t.space)
        constants = Region()
        for i, value in zip(self.scalars, key[len(self.params):]):
            if value is not None:  # the parameter stays, unused: the copy's ABI is the kernel's
                param = func.args[i].value
                constant = Builder(constants).op("constant", value, result=param.type)
                replace_all_uses(func.body, param, constant)
        func.body.instructions[:0] = constants.instructions
        return program

    def _compile(self, key: tuple):
        """The launcher of the copy for `key`; None where it cannot be compiled (the
        kernel runs as compiled: a copy is never needed for a correct result)."""
        from ...diagnostics import CompileError

        program = self.program_for(key)
        try:
            copy = type(self.module)(program, self.module.artifacts.machine)
        except CompileError:
            return None
        copy.specializes = False
        return copy.launcher(copy.kernels[self.func.name])
