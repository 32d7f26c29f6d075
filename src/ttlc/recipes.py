"""Ready kernels for the two most common jobs (``ttlc.recipes``): many small GEMMs at once,
and one GEMM whose rows far outnumber its columns.

A recipe writes its program as text in the language (``Recipe.text``), so the same
kernels compile for every target: a recipe for a target that runs kernels holds the
compiled module, one for any other target that target's output (``Recipe.artifact``).
Each program has two kernels, as the reference implementation's recipes do: ``@gemm``
(C := alpha op(A) op(B) + beta C) and ``@gemm_beta0`` (beta taken as the constant 0: C is
written, never read, so NaN or uninitialised memory in C does no harm).  Both take the
same arguments (alpha, A, B, beta, C); calling the recipe picks one by beta and computes
the grid.

Leading dimensions and batch strides are static by default (packed, column-major), which
gives fully specialised code; ``DYNAMIC`` makes one a run-time value taken from the array.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

#: a size or stride that the arrays give at run time (``?`` in the memref type)
DYNAMIC = "?"

#: the element types a recipe accepts, by name and NumPy dtype name
_TYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
          "c32": "complex64", "c64": "complex128"}
_BY_DTYPE = {v: k for k, v in _TYPES.items()}

Stride = Union[int, str, None]


def element_type(dtype) -> str:
    """The language's name of a floating or complex type given by name ("f32", "c64") or
    NumPy dtype (np.float32, ml_dtypes.bfloat16, "complex64")."""
    if isinstance(dtype, str) and dtype in _TYPES:
        return dtype
    import numpy as np

    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name in _BY_DTYPE:
        return _BY_DTYPE[name]
    raise ValueError(f"recipes compute in f16, bf16, f32, f64, c32 or c64 (or their NumPy "
                     f"dtypes), not {dtype!r}")


def _transpose(value, what: str) -> str:
    table = {"n": "n", "t": "t", "N": "n", "T": "t", False: "n", True: "t"}
    if isinstance(value, (str, bool)) and value in table:
        return table[value]
    raise ValueError(f"{what} must be 'n' or 't' (or False/True), not {value!r}")


def _size(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer, not {value!r}")
    return value


def _stride(value: Stride, what: str, default: Optional[int], least: Optional[int]) -> str:
    """A static stride (at least `least`, the packed one) or "?"; None takes `default`."""
    if value is None:
        value = DYNAMIC if default is None else default
    if value == DYNAMIC:
        return DYNAMIC
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer or ttlc.recipes.DYNAMIC, not "
                         f"{value!r}")
    if least is not None and value < least:
        raise ValueError(f"{what} = {value} is smaller than {least}: the matrices would overlap")
    return str(value)


def _attributes(work_group_size, subgroup_size) -> str:
    """The function attributes fixing the sizes (the compiler chooses those left out)."""
    attrs = []
    if subgroup_size is not None:
        attrs.append(f"subgroup_size={_size(subgroup_size, 'subgroup_size')}")
    if work_group_size is not None:
        sizes = list(work_group_size) if isinstance(work_group_size, (list, tuple)) else []
        if len(sizes) != 2:
            raise ValueError(f"work_group_size must be two positive integers, not "
                             f"{work_group_size!r}")
        x, y = (_size(w, "work_group_size") for w in sizes)
        attrs.append(f"work_group_size=[{x},{y}]")
    return f" attributes{{{', '.join(attrs)}}}" if attrs else ""


def _zero(t: str) -> str:
    return "[0.0, 0.0]" if t.startswith("c") else "0.0"


def _program(t: str, params: str, attrs: str, body: str) -> str:
    """Kernels @gemm and @gemm_beta0 around one body (its ``$beta``: the parameter, or the
    constant zero)."""
    kernels = []
    for name, beta in (("gemm", "%beta"), ("gemm_beta0", "%zero")):
        kernels.append(f"func @{name}({params}){attrs} {{\n"
                       f"    %zero = constant {_zero(t)} : {t}\n"
                       + body.replace("$beta", beta) + "}\n")
    return "\n".join(kernels)


@dataclass(frozen=True)
class BlockGrid:
    """The grid of a recipe: one work-group per `size` entries of the batch mode (a class,
    not a closure, so that it pickles into the tasks of ``ttlc.dask``)."""

    size: int

    def __call__(self, extent: int) -> Tuple[int]:
        return (-(-extent // self.size),)


@dataclass
class Recipe:
    """A recipe's program, prepared for one target.  ``recipe(alpha, A, B, beta, C)`` runs
    it (``@gemm_beta0`` when beta is 0); ``kernel(beta)`` and ``grid(C)`` give what a
    launch of your own (or ``ttlc.dask.map_batches``) needs.  For a target that does not
    run kernels here (spirv, xevm, ...), ``artifact`` is its output (its last stage)."""

    name: str
    text: str
    dtype: str
    target: str
    #: the compiled module, for targets that run kernels (else None)
    module: Any
    #: the target's output, for targets that do not run kernels (else None)
    artifact: Union[str, bytes, None]
    _grid: BlockGrid
    _batch_axis: int
    #: the arguments whose extent along the batch axis must agree (A, B, C: 0, 1, 2)
    _matched: Tuple[int, ...]

    def kernel(self, beta=1):
        """``@gemm_beta0`` for beta == 0, else ``@gemm``."""
        if self.module is None:
            raise ValueError(f"recipe {self.name} was prepared for target {self.target}, which "
                             f"does not run kernels here: its output is recipe.artifact")
        return self.module["gemm_beta0" if beta == 0 else "gemm"]

    def grid(self, C) -> Tuple[int]:
        """The work-groups for the output C."""
        return self._grid(C.shape[self._batch_axis])

    def __call__(self, alpha, A, B, beta, C) -> None:
        arrays = (A, B, C)
        extents = {"ABC"[i]: getattr(arrays[i], "shape", (None,))[self._batch_axis]
                   for i in self._matched}
        if len(set(extents.values())) != 1:  # the kernel would read past the shorter one
            axis = "last mode" if self._batch_axis == -1 else "rows"
            raise ValueError(f"recipe {self.name}: the {axis} of "
                             f"{', '.join(f'{k} ({v})' for k, v in extents.items())} differ")
        grid = self.grid(C)
        if 0 in grid:  # an empty batch: nothing to compute (a launch needs work-groups)
            return
        self.kernel(beta)(alpha, A, B, beta, C, grid=grid)

    def __repr__(self) -> str:
        return f"<ttlc recipe {self.name} {self.dtype} on {self.target}>"


def _recipe(name: str, text: str, t: str, target: str, checked: bool, grid: BlockGrid,
            batch_axis: int, matched: Tuple[int, ...]) -> Recipe:
    """The recipe compiled for a target that runs kernels, or emitted for one that does
    not (a CompileError says what that target lacks)."""
    from . import api
    from .backends import get_backend

    backend = get_backend(target)
    module = artifact = None
    if backend.executes:
        module = api.compile(text, target, checked, filename="<recipe>")
    else:
        program = api.check(text, "<recipe>")
        artifact = api._guard(lambda: backend.emit(program, None, checked), program.source,
                              program.filename)
    return Recipe(name, text, t, target, module, artifact, grid, batch_axis, matched)


def small_gemm_batched(dtype, transA, transB, M: int, N: int, K: int, *,
                       ldA: Stride = None, strideA: Stride = None,
                       ldB: Stride = None, strideB: Stride = None,
                       ldC: Stride = None, strideC: Stride = None,
                       target: str = "cpu", checked: bool = False,
                       work_group_size: Optional[Sequence[int]] = None,
                       subgroup_size: Optional[int] = None) -> Recipe:
    """C_i := alpha op(A_i) op(B_i) + beta C_i for every i of a batch: A, B and C are 3-d
    column-major arrays whose last mode is the batch (op(A_i) is M x K, op(B_i) K x N, C_i
    M x N), one work-group per entry.  ``ld*`` is the stride between columns and
    ``stride*`` the stride between batch entries (default: packed; ``DYNAMIC``: from the
    array)."""
    t = element_type(dtype)
    ta, tb = _transpose(transA, "transA"), _transpose(transB, "transB")
    M, N, K = _size(M, "M"), _size(N, "N"), _size(K, "K")
    shapes = {"A": (M, K) if ta == "n" else (K, M), "B": (K, N) if tb == "n" else (N, K),
              "C": (M, N)}
    given = {"A": (ldA, strideA), "B": (ldB, strideB), "C": (ldC, strideC)}
    types, views = {}, {}
    for x, (rows, cols) in shapes.items():
        ld = _stride(given[x][0], f"ld{x}", rows, rows)
        packed = rows * cols if ld == DYNAMIC else int(ld) * cols
        stride = _stride(given[x][1], f"stride{x}", packed, None if ld == DYNAMIC else packed)
        types[x] = f"memref<{t}x{rows}x{cols}x?,strided<1,{ld},{stride}>>"
        views[x] = (f"    %{x.lower()} = subview %{x}[0:{rows},0:{cols},%i] : "
                    f"memref<{t}x{rows}x{cols},strided<1,{ld}>>\n")
    params = (f"%alpha: {t}, %A: {types['A']}, %B: {types['B']}, %beta: {t}, "
              f"%C: {types['C']}")
    body = ("    %i = group_id.x : index\n" + "".join(views.values()) +
            f"    gemm.{ta}.{tb} %alpha, %a, %b, $beta, %c\n")
    text = _program(t, params, _attributes(work_group_size, subgroup_size), body)
    return _recipe("small_gemm_batched", text, t, target, checked, BlockGrid(1), -1, (0, 1, 2))


def tall_and_skinny(dtype, M_block: int, N: int, K: int, *, M: Optional[int] = None,
                    ldA: Stride = None, ldB: Stride = None, ldC: Stride = None,
                    target: str = "cpu", checked: bool = False,
                    work_group_size: Optional[Sequence[int]] = None,
                    subgroup_size: Optional[int] = None) -> Recipe:
    """C := alpha A B + beta C for M >> N, K: A is M x K, B K x N, C M x N (column-major),
    and each work-group takes M_block rows of A and C (the last takes what remains).  M is
    given at run time unless fixed here; ``ld*`` is the stride between columns (default:
    packed, dynamic with M; ``DYNAMIC``: from the array)."""
    t = element_type(dtype)
    M_block, N, K = _size(M_block, "M_block"), _size(N, "N"), _size(K, "K")
    if M is not None:
        M = _size(M, "M")
    rows = DYNAMIC if M is None else str(M)
    ld = {"A": _stride(ldA, "ldA", M, M), "B": _stride(ldB, "ldB", K, K),
          "C": _stride(ldC, "ldC", M, M)}
    params = (f"%alpha: {t}, %A: memref<{t}x{rows}x{K},strided<1,{ld['A']}>>, "
              f"%B: memref<{t}x{K}x{N},strided<1,{ld['B']}>>, %beta: {t}, "
              f"%C: memref<{t}x{rows}x{N},strided<1,{ld['C']}>>")

    def block(size: str, indent: str) -> str:
        mode = size if size.isdigit() else DYNAMIC
        return (f"{indent}%a = subview %A[%m:{size},0:{K}] : "
                f"memref<{t}x{mode}x{K},strided<1,{ld['A']}>>\n"
                f"{indent}%c = subview %C[%m:{size},0:{N}] : "
                f"memref<{t}x{mode}x{N},strided<1,{ld['C']}>>\n"
                f"{indent}gemm.n.n %alpha, %a, %B, $beta, %c\n")

    body = ("    %g = group_id.x : index\n"
            f"    %block = constant {M_block} : index\n"
            "    %m = mul %g, %block : index\n")
    if M is not None and M % M_block == 0:
        body += block(str(M_block), "    ")
    else:  # the last work-group takes the rows that remain
        body += ("    %rows = size %C[0] : index\n"
                 "    %rest = sub %rows, %m : index\n"
                 "    %partial = less_than %rest, %block : bool\n"
                 "    if %partial {\n" + block("%rest", "        ") + "    } else {\n"
                 + block(str(M_block), "        ") + "    }\n")
    text = _program(t, params, _attributes(work_group_size, subgroup_size), body)
    return _recipe("tall_and_skinny", text, t, target, checked, BlockGrid(M_block), 0, (0, 2))


__all__ = ["DYNAMIC", "BlockGrid", "Recipe", "element_type", "small_gemm_batched",
           "tall_and_skinny"]
