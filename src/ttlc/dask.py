"""Batches across processes and machines on Dask (``ttlc.dask``; the extra ``ttlc[dask]``).

``map_batches(kernel, *args, outputs=...)`` runs a kernel over Dask arrays chunked along
their batch mode (the mode that ``group_id`` walks): one launch per chunk, with that
chunk's grid, and Dask arrays for the outputs.  Nothing compiled crosses a process
boundary: a task carries the program text, target, checked mode and kernel name
(``KernelSpec``), and each process compiles it once on its first task (``kernel_of``;
the on-disk kernel cache makes that a load for every process after the first on a
machine).  Tasks are plain Dask graph tasks, so the threaded, multiprocessing and
synchronous schedulers and ``dask.distributed`` all run them, and Dask re-runs the chunks
of a worker that dies.

A chunk of an output is a fresh column-major copy that the kernel writes; every other
array reaches the kernel read-only (a kernel writing it raises ``ttlc.KernelError``), so
no chunk that Dask holds is ever changed in place.
"""
from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import dask
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(f"ttlc.dask needs Dask ({e}); install it with pip install "
                      "'ttlc[dask]' (dask[array] and distributed)") from e

from . import api


@dataclass(frozen=True)
class KernelSpec:
    """What a worker needs to compile a kernel: never machine code."""

    text: str
    target: str
    checked: bool
    name: str

    @classmethod
    def of(cls, kernel) -> "KernelSpec":
        module = kernel.module
        return cls(str(module.program), module.target, module.checked, kernel.name)


_COMPILED: Dict[KernelSpec, Any] = {}
_LOCK = threading.Lock()
#: programs this process compiled for tasks of map_batches (a process compiles each once)
compiles = 0


def kernel_of(spec: KernelSpec):
    """The kernel of `spec`, compiled once per process."""
    global compiles
    with _LOCK:
        kernel = _COMPILED.get(spec)
        if kernel is None:
            kernel = api.compile(spec.text, spec.target, spec.checked)[spec.name]
            _COMPILED[spec] = kernel
            compiles += 1
    return kernel


def _one_per_entry(n: int) -> Tuple[int]:
    return (n,)


#: how each argument reaches a launch
SPLIT, OUTPUT, WHOLE, SCALAR = "split", "output", "whole", "scalar"


@dataclass(frozen=True)
class _Launch:
    """One task's instructions: the kernel, how each argument is passed, the grid."""

    spec: KernelSpec
    roles: Tuple[str, ...]
    scalars: Tuple[Any, ...]   # the scalar arguments' values (None for the others)
    axes: Tuple[int, ...]      # the batch axis of each split/output argument
    outputs: Tuple[int, ...]   # argument positions returned, in order
    grid: Callable[[int], Tuple[int, ...]]

    def __call__(self, *arrays) -> tuple:
        args, it, extent = [], iter(arrays), None
        for i, role in enumerate(self.roles):
            if role == SCALAR:
                args.append(self.scalars[i])
                continue
            x = next(it)
            if role == OUTPUT:
                x = np.array(x, order="F", copy=True)
            else:
                x = np.asarray(x, order="F").view()  # (0-d stays 0-d)
                x.flags.writeable = False
            if role in (SPLIT, OUTPUT) and extent is None:
                extent = x.shape[self.axes[i]]
            args.append(x)
        grid = self.grid(extent)
        if 0 not in grid:  # an empty chunk: nothing to compute (a launch needs work-groups)
            kernel_of(self.spec)(*args, grid=grid)
        return tuple(args[i] for i in self.outputs)


def _positions(kernel, outputs) -> Tuple[Tuple[int, ...], bool]:
    """Argument positions of `outputs` (names, with or without %, or positions), and
    whether one output was asked for (a single array is returned then)."""
    names = [a.value.name for a in kernel.func.args]
    single = isinstance(outputs, (str, int))
    out = []
    for o in ([outputs] if single else list(outputs)):
        if isinstance(o, str):
            name = o[1:] if o.startswith("%") else o
            if name not in names:
                raise ValueError(f"map_batches: @{kernel.name} has no parameter %{name} "
                                 f"(parameters: {', '.join('%' + n for n in names)})")
            out.append(names.index(name))
        elif isinstance(o, int) and not isinstance(o, bool) and 0 <= o < len(names):
            out.append(o)
        else:
            raise ValueError(f"map_batches: outputs must name parameters of @{kernel.name} "
                             f"(or give their positions), not {o!r}")
    if not out:
        raise ValueError("map_batches needs at least one output")
    return tuple(out), single


def map_batches(kernel, *args, outputs: Union[str, int, Sequence[Union[str, int]]],
                batch_axis: Optional[int] = None,
                grid: Optional[Callable[[int], Tuple[int, ...]]] = None):
    """Run `kernel` over the chunks of the Dask arrays among `args` along `batch_axis`
    (default: the last mode, or the recipe's batch mode), one launch per chunk, and
    return the Dask arrays of the arguments named in `outputs` after the kernel.

    `kernel` is a kernel of ``ttlc.compile`` (or ``ttlc.autotune``), or a
    ``ttlc.recipes`` recipe (its argument order, and its kernel picked by beta).  Dask
    arrays are rechunked to one chunk in every other mode and to the batch chunks of
    the first; anything else (scalars, NumPy arrays) goes whole to every launch.  `grid`
    maps a chunk's extent along the batch mode to the launch's grid (default: one
    work-group per entry)."""
    from .recipes import Recipe

    if isinstance(kernel, Recipe):
        if len(args) != 5:
            raise TypeError(f"map_batches: recipe {kernel.name} takes (alpha, A, B, beta, C), "
                            f"got {len(args)} arguments")
        recipe, kernel = kernel, kernel.kernel(args[3])
        grid = grid or recipe._grid
        batch_axis = recipe._batch_axis if batch_axis is None else batch_axis
    if not (hasattr(kernel, "module") and hasattr(kernel, "func")):
        raise TypeError(f"map_batches needs a kernel of ttlc.compile or a ttlc.recipes "
                        f"recipe, not {type(kernel).__name__}")
    params = kernel.func.args
    if len(args) != len(params):
        raise TypeError(f"map_batches: @{kernel.name} takes {len(params)} arguments, "
                        f"got {len(args)}")
    batch_axis = -1 if batch_axis is None else batch_axis
    grid = grid or _one_per_entry
    positions, single = _positions(kernel, outputs)
    spec = KernelSpec.of(kernel)
    with _LOCK:  # this process has the kernel already
        _COMPILED.setdefault(spec, kernel)

    roles, scalars, axes, blocks = [], [], [], []
    batch_chunks = None  # the first Dask array's, which the others follow
    for i, x in enumerate(args):
        name = f"argument {i} (%{params[i].value.name}) of @{kernel.name}"
        if isinstance(x, da.Array):
            if x.ndim == 0:
                raise ValueError(f"map_batches: {name} is a 0-d Dask array: it has no batch mode")
            if not -x.ndim <= batch_axis < x.ndim:
                raise ValueError(f"map_batches: {name} has {x.ndim} modes, no batch mode "
                                 f"{batch_axis}")
            axis = batch_axis % x.ndim
            if batch_chunks is None:
                batch_chunks = x.chunks[axis]
            if x.shape[axis] != sum(batch_chunks):
                raise ValueError(f"map_batches: {name} has {x.shape[axis]} batch entries, "
                                 f"the first Dask array {sum(batch_chunks)}")
            x = x.rechunk({a: (-1 if a != axis else batch_chunks) for a in range(x.ndim)})
            roles.append(OUTPUT if i in positions else SPLIT)
            axes.append(axis)
            blocks.append(x)
            scalars.append(None)
        elif i in positions:
            raise TypeError(f"map_batches: output {name} must be a Dask array chunked along "
                            f"the batch mode, not {type(x).__name__}")
        elif isinstance(x, np.ndarray):
            roles.append(WHOLE)
            axes.append(0)
            blocks.append(dask.delayed(x, pure=True))
            scalars.append(None)
        else:
            roles.append(SCALAR)
            axes.append(0)
            scalars.append(x)
    launch = _Launch(spec, tuple(roles), tuple(scalars), tuple(axes), positions, grid)
    token = dask.base.tokenize(spec, launch.roles, launch.scalars, launch.axes, positions,
                               grid, *blocks)
    run = f"ttlc-{kernel.name}-{token}"
    layer = {}
    for b in range(len(batch_chunks)):
        keys = []
        for role, axis, x in zip((r for r in roles if r != SCALAR),
                                 (a for a, r in zip(axes, roles) if r != SCALAR), blocks):
            if role == WHOLE:
                keys.append(x.key)
            else:
                keys.append((x.name,) + tuple(b if a == axis else 0 for a in range(x.ndim)))
        layer[(run, b)] = (launch, *keys)
    graph = HighLevelGraph.from_collections(run, layer, dependencies=blocks)
    results = []
    for j, p in enumerate(positions):
        x = blocks[[i for i, r in enumerate(roles) if r != SCALAR].index(p)]
        axis = axes[p]
        name = f"{run}-{params[p].value.name}"
        picks = {(name,) + tuple(b if a == axis else 0 for a in range(x.ndim)):
                 (operator.getitem, (run, b), j) for b in range(len(batch_chunks))}
        layers = dict(graph.layers)
        layers[name] = picks
        dependencies = dict(graph.dependencies)
        dependencies[name] = {run}
        results.append(da.Array(HighLevelGraph(layers, dependencies), name, x.chunks,
                                dtype=x.dtype, meta=np.empty((0,) * x.ndim, x.dtype)))
    return results[0] if single else tuple(results)


__all__ = ["KernelSpec", "compiles", "kernel_of", "map_batches"]
