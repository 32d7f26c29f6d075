"""Kernel texts the tests and the benchmarks share."""
from __future__ import annotations

from typing import Sequence, Tuple, Union

#: an operand of ``member_kernel``: its name, its dimensions, whether all members share it
Operand = Tuple[str, Tuple[int, ...], bool]

#: ``func @gemm``: C_i = A_i B_i for every member i of a batch, one kernel for every
#: shape (``.format(t=...)``): the sizes are dynamic, taken from the arrays by ``size``
DYNAMIC_GEMM = """
func @gemm(%A: memref<{t}x?x?x?>, %B: memref<{t}x?x?x?>, %C: memref<{t}x?x?x?>) {{
    %i = group_id.x : index
    %m = size %A[0] : index
    %k = size %A[1] : index
    %n = size %B[1] : index
    %a = subview %A[0:%m,0:%k,%i] : memref<{t}x?x?>
    %b = subview %B[0:%k,0:%n,%i] : memref<{t}x?x?>
    %c = subview %C[0:%m,0:%n,%i] : memref<{t}x?x?>
    %one = constant 1.0 : {t}
    %zero = constant 0.0 : {t}
    gemm %one, %a, %b, %zero, %c
}}
"""


def member_kernel(t: str, instruction: str, operands: Sequence[Operand], beta: float = 0.0,
                  loop: bool = False, attrs: str = "") -> str:
    """``func @member``: one `instruction` (alpha 1, `beta`) per batch member, as an
    application writes a batch of small products.  `operands` are (name, dims, shared) in
    the instruction's order: a shared operand is passed whole, the others as a memref with
    one more (dynamic) mode of members, the member's view taken by ``subview``.  The
    member is ``group_id.x``, or with `loop` each of two members a work-group takes in a
    loop."""
    params, body = [], []
    for name, dims, shared in operands:
        shape = "x".join(map(str, dims))
        if shared:
            params.append(f"%{name}: memref<{t}x{shape}>")
            continue
        params.append(f"%{name}_all: memref<{t}x{shape}x?>")
        ranges = ",".join(f"0:{d}" for d in dims)
        body.append(f"%{name} = subview %{name}_all[{ranges},%i] : memref<{t}x{shape}>")
    first, second, out = (f"%{name}" for name, _, _ in operands)
    body += [f"%one = constant 1.0 : {t}", f"%beta = constant {beta!r} : {t}",
             f"{instruction} %one, {first}, {second}, %beta, {out}"]
    if loop:
        body = ["%g = group_id.x : index", "%two = constant 2 : index",
                "%first = mul %g, %two : index", "%end = add %first, %two : index",
                "%step = constant 1 : index", "for %i = %first, %end, %step {",
                *(f"    {line}" for line in body), "}"]
    else:
        body = ["%i = group_id.x : index", *body]
    lines = "\n".join(f"    {line}" for line in body)
    return f"func @member({', '.join(params)}) {attrs + ' ' if attrs else ''}{{\n{lines}\n}}\n"


def tall_kernel(t: str, rows: Union[int, str], block: int, N: int, K: int,
                beta: float = 0.0) -> str:
    """``func @gemm``: C = A B + `beta` C with A of `rows` x K (``"?"``: known when the
    kernel runs), each work-group the rows of its block (``block`` rows from
    ``group_id.x * block``): a tall-and-skinny product as an application writes it."""
    view = f"memref<{t}x{block}x{{n}},strided<1,{rows}>>"
    return f"""func @gemm(%A: memref<{t}x{rows}x{K}>, %B: memref<{t}x{K}x{N}>, %C: memref<{t}x{rows}x{N}>) {{
    %i = group_id.x : index
    %rows = constant {block} : index
    %first = mul %i, %rows : index
    %a = subview %A[%first:{block},0:{K}] : {view.format(n=K)}
    %c = subview %C[%first:{block},0:{N}] : {view.format(n=N)}
    %one = constant 1.0 : {t}
    %beta = constant {beta!r} : {t}
    gemm %one, %a, %B, %beta, %c
}}
"""


def chain_kernel(t: str, m: int, k: int, n: int, p: int, temporary: str = "local") -> str:
    """``func @chain``: D_i = A B_i C_i for every member i (A of m x k shared, B_i of
    k x n, C_i of n x p) through a temporary of m x n: allocated in local memory
    (`temporary` "local"), as a DG code writes it, or taken from a global operand %T of
    one temporary per member ("global"), all else equal."""
    extra, tmp = {
        "local": ("", f"%tmp = alloca : memref<{t}x{m}x{n},local>"),
        "global": (f", %T: memref<{t}x{m}x{n}x?>",
                   f"%tmp = subview %T[0:{m},0:{n},%i] : memref<{t}x{m}x{n}>"),
    }[temporary]
    stop = "\n    lifetime_stop %tmp" if temporary == "local" else ""
    return f"""func @chain(%A: memref<{t}x{m}x{k}>, %B: memref<{t}x{k}x{n}x?>, %C: memref<{t}x{n}x{p}x?>,
            %D: memref<{t}x{m}x{p}x?>{extra}) {{
    %i = group_id.x : index
    %b = subview %B[0:{k},0:{n},%i] : memref<{t}x{k}x{n}>
    %c = subview %C[0:{n},0:{p},%i] : memref<{t}x{n}x{p}>
    %d = subview %D[0:{m},0:{p},%i] : memref<{t}x{m}x{p}>
    {tmp}
    %one = constant 1.0 : {t}
    %zero = constant 0.0 : {t}
    gemm %one, %A, %b, %zero, %tmp
    gemm %one, %tmp, %c, %zero, %d{stop}
}}
"""
