"""The ``ttlc`` command line: check, opt (print), compile (write a back end's stage), run,
layout (where a coopmatrix's elements live).

``compile`` and ``run`` take their targets from the back-end registry (``ttlc.backends``);
``opt -d`` takes a target description (``ttlc.target``).
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def _read(path: str):
    if path == "-":
        data = sys.stdin.buffer.read()
        return data, "<stdin>"
    with open(path, "rb") as f:
        return f.read(), path


def _load(args, verify: bool):
    """Read, parse and (optionally) verify the program args.file, a template specialised
    by args.defines (-D); prints diagnostics on failure."""
    from . import api
    from .diagnostics import CompileError

    path = args.file
    try:
        data, name = _read(path)
    except OSError as e:
        print(f"ttlc: cannot read {path}: {e.strerror}", file=sys.stderr)
        return None
    try:
        program = api.parse(data, name, dict(args.defines))
        if verify:
            api.check(program)
        return program
    except CompileError as e:
        print(e.format(), file=sys.stderr)
        return None


def cmd_upgrade(args) -> int:
    """Print a program of the legacy dialect in the current language."""
    from .api import upgrade
    from .diagnostics import CompileError
    from .parse.legacy import print_upgraded

    try:
        data, name = _read(args.file)
    except OSError as e:
        print(f"ttlc: cannot read {args.file}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        program = upgrade(data, name, dict(args.defines))
    except CompileError as e:
        print(e.format(), file=sys.stderr)
        return 1
    sys.stdout.write(print_upgraded(program))
    return 0


def cmd_check(args) -> int:
    return 0 if _load(args, verify=True) is not None else 1


def cmd_opt(args) -> int:
    """Verify, run the passes in order and print the program (dump passes print first)."""
    from .diagnostics import CompileError
    from .passes import PassContext, expand, get_pass, run_passes
    from .target import get_target

    try:
        names = expand(args.passes)
        for name in names:
            get_pass(name)
        target = get_target(args.device)
    except (KeyError, ValueError) as e:
        print(f"ttlc: {e.args[0]}", file=sys.stderr)
        return 2
    program = _load(args, verify=True)
    if program is None:
        return 1
    ctx = PassContext(target=target, unsafe_fp_math=args.unsafe_fp_math,
                      verify_each=args.verify_each,
                      print_after_all=sys.stderr if args.print_after_all else None)
    try:
        run_passes(program, names, ctx)
    except CompileError as e:
        sys.stdout.write(ctx.out.getvalue())
        print(e.with_source(program.source, program.filename).format(), file=sys.stderr)
        return 1
    sys.stdout.write(ctx.out.getvalue())
    sys.stdout.write(str(program))
    return 0


def _fp_option(text: str) -> bool:
    if text in ("unsafe-fp-math", "no-unsafe-fp-math"):
        return text == "unsafe-fp-math"
    raise argparse.ArgumentTypeError(f"unknown option -f{text} (known: -funsafe-fp-math, "
                                     "-fno-unsafe-fp-math)")


def cmd_run(args) -> int:
    """Run one kernel on generated inputs and print a summary of every array argument."""
    import time

    import numpy as np

    from . import api
    from .diagnostics import CompileError, KernelError
    from .runtime.args import Group
    from .runtime.inputs import generated_inputs
    from .runtime.timing import bench

    if _backend(args.target) is None:
        return 2
    program = _load(args, verify=True)
    if program is None:
        return 1
    try:
        module = api.compile(program, target=args.target, checked=args.checked)
        names = list(module)
        if not names:
            print(f"ttlc: {args.file} holds no kernel", file=sys.stderr)
            return 1
        name = args.kernel or (names[0] if len(names) == 1 else None)
        if name is None:
            print("ttlc: the program has several kernels; choose one with --kernel "
                  f"({', '.join(names)})", file=sys.stderr)
            return 2
        kernel = module[name]
        grid = args.grid or _batch_grid(kernel.func, args)
        inputs, _ = generated_inputs(kernel.func, args.dim, args.group_size, args.seed)
        start = time.perf_counter()
        kernel(*inputs, grid=grid)
        first = time.perf_counter() - start
        warm = None
        if args.repeat:  # on inputs of their own: the summary shows what one run wrote
            again, _ = generated_inputs(kernel.func, args.dim, args.group_size, args.seed)
            warm = bench(kernel, *again, grid=grid, warmup=0, runs=args.repeat)
    except (CompileError, KernelError, KeyError, ValueError, TypeError) as e:
        print(f"ttlc: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 1
    timing = f"first run {first * 1e3:.3f} ms"
    if warm is not None:
        timing += f", median of {len(warm.times)} more {warm.median * 1e3:.3f} ms"
    print(f"@{name} on {args.target}{' (checked)' if args.checked else ''}, grid "
          f"{tuple(grid)}: {timing}")
    for a, x in zip(kernel.func.args, inputs):
        members = list(getattr(x, "arrays", x)) if isinstance(x, (list, Group)) else None
        offset = x.offset if isinstance(x, Group) else 0
        for i, arr in enumerate([x] if members is None else members):
            if isinstance(arr, np.ndarray):
                label = f"%{a.value.name}" + ("" if members is None else f"[{i}]")
                where = (f"buffer of {arr.size}, sum from element {offset}" if offset
                         else f"shape {arr.shape}, sum")
                wide = np.complex128 if arr.dtype.kind == "c" else np.float64
                total = np.asarray(arr.reshape(-1, order="A")[offset:] if offset else arr,
                                   dtype=wide).sum()
                print(f"  {label}: {where} {total:.6g}")
    return 0


def _batch_grid(func, args) -> tuple:
    """The grid ``ttlc run`` uses when none is given: one work-group per member of the
    generated groups (--group-size) or per entry of a dynamic mode (--dim) when the kernel
    reads its group id, else one work-group."""
    from .ir.types import GroupType

    if not any(i.opcode == "group_id" for i in func.body.walk()):
        return (1, 1, 1)
    groups = any(isinstance(a.value.type, GroupType) for a in func.args)
    return (args.group_size if groups else args.dim, 1, 1)


def _backend(name: str):
    """The registered back end `name`, or None after saying that there is none."""
    from .backends import get_backend

    try:
        return get_backend(name)
    except ValueError as e:
        print(f"ttlc: {e}", file=sys.stderr)
        return None


def cmd_compile(args) -> int:
    """Write the output of one stage of a back end for a program."""
    from .backends import BackendUnavailable
    from .diagnostics import CompileError

    backend = _backend(args.target)
    if backend is None:
        return 2
    try:
        if args.text and args.stage is None:
            texts = [st.name for st in backend.stages if not st.binary]
            if not texts:
                raise ValueError(f"target {backend.name} has no text stage for -S")
            args.stage = texts[-1]
        stage = backend.stage(args.stage)
    except ValueError as e:
        print(f"ttlc: {e}", file=sys.stderr)
        return 2
    program = _load(args, verify=True)
    if program is None:
        return 1
    try:
        data = backend.emit(program, stage.name, checked=args.checked)
    except BackendUnavailable as e:
        print(f"ttlc: {e}", file=sys.stderr)
        return 1
    except CompileError as e:
        print(e.format(), file=sys.stderr)
        return 1
    if isinstance(data, str):
        data = data.encode()
    try:
        if args.output == "-":
            sys.stdout.buffer.write(data)
        else:
            with open(args.output, "wb") as f:
                f.write(data)
    except OSError as e:
        print(f"ttlc: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


def cmd_layout(args) -> int:
    """Print which lane and register hold each element of a coopmatrix type."""
    from .diagnostics import CompileError
    from .ir.layout import layout_of
    from .ir.layout_view import png, table
    from .ir.types import CoopMatrixType
    from .parse import parse_type
    from .target import get_target

    try:
        target = get_target(args.target)
        t = parse_type(args.type)
        if not isinstance(t, CoopMatrixType):
            raise ValueError(f"ttlc layout takes a coopmatrix type, not {t}")
        S = args.subgroup_size or target.default_subgroup_size
        if target.name != "interp" and S not in target.subgroup_sizes:
            raise ValueError(f"target {target.name} has subgroups of "
                             f"{', '.join(map(str, target.subgroup_sizes))}, not {S}")
        lay = target.storage_layout(t, S)
    except CompileError as e:
        print(e.format(), file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"ttlc: {e}", file=sys.stderr)
        return 1
    which = ("the language's layout (what extract and insert see)" if lay == layout_of(t, S)
             else f"the {target.matrix.name} unit's layout inside a kernel (extract and "
                  "insert see the language's layout)")
    rows, cols = lay.nested.shape
    print(f"// {t} in a subgroup of {S} on target {target.name}: {which}")
    print(f"// {rows}x{cols} padded matrix ({lay.rows}x{lay.cols} elements), "
          f"{lay.nested.lanes} lanes x {lay.registers} registers; cells are lane:register, "
          "* marks padding columns")
    print(lay.nested.to_iree())
    sys.stdout.write(table(lay))
    if args.png:
        try:
            with open(args.png, "wb") as f:
                f.write(png(lay))
        except OSError as e:
            print(f"ttlc: cannot write {args.png}: {e.strerror}", file=sys.stderr)
            return 1
    return 0


def _define_arg(text: str):
    """-D name=value: one preprocessor definition."""
    from .parse.preprocess import check_defines

    name, eq, value = text.partition("=")
    if not eq:
        raise argparse.ArgumentTypeError(f"-D takes name=value, not {text!r}")
    try:
        return check_defines({name: value}).popitem()
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def _add_program(p) -> None:
    """The arguments of every command that reads a program: the file and -D."""
    p.add_argument("file", help="program file, or - for standard input")
    p.add_argument("-D", dest="defines", action="append", type=_define_arg, default=[],
                   metavar="NAME=VALUE", help="define template parameter $NAME (may be "
                   "repeated; overrides a definition in the program)")


def _grid_arg(text: str):
    try:
        g = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"grid must be integers separated by commas, not {text!r}")
    if not 1 <= len(g) <= 3 or any(x < 1 for x in g):
        raise argparse.ArgumentTypeError("grid takes 1 to 3 positive sizes, e.g. 8,1,1")
    return tuple(g) + (1,) * (3 - len(g))


def build_parser() -> argparse.ArgumentParser:
    from .version import __version__
    from .backends import BACKENDS
    from .target import TARGETS

    parser = argparse.ArgumentParser(prog="ttlc", description="Compiler for the Tiny Tensor Language.")
    parser.add_argument("--version", action="version", version=f"ttlc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="parse and verify a program; exit 1 if it is invalid")
    _add_program(p)
    p.set_defaults(run=cmd_check)
    p = sub.add_parser("upgrade", help="print a program of the legacy dialect (operand types "
                                       "after the operands, immediate constants) in the "
                                       "current language")
    _add_program(p)
    p.set_defaults(run=cmd_upgrade)
    p = sub.add_parser("opt", help="verify, run passes and print the program")
    _add_program(p)
    p.add_argument("-p", "--pass", dest="passes", action="append", default=[], metavar="PASS",
                   help="run a pass or pipeline (may be repeated; -pNAME also works)")
    p.add_argument("-f", dest="unsafe_fp_math", type=_fp_option, default=False,
                   metavar="[no-]unsafe-fp-math",
                   help="allow floating-point folds that are not exact (x*0 -> 0, x+0 -> x)")
    p.add_argument("-d", "--device", default="interp", metavar="TARGET",
                   help=f"target description for passes ({', '.join(TARGETS)})")
    p.add_argument("--print-after-all", action="store_true",
                   help="print the IR to stderr after every pass")
    p.add_argument("--verify-each", action="store_true", help="verify the IR after every pass")
    p.set_defaults(run=cmd_opt)
    p = sub.add_parser("compile", help="write the output of a back end's stage (lowered "
                                       "program, LLVM IR, object file)")
    _add_program(p)
    p.add_argument("--target", "-t", required=True, metavar="TARGET",
                   help="back end: " + "; ".join(f"{b.name}: {b.description}"
                                                 for b in BACKENDS.values()))
    p.add_argument("--stage", "-s", metavar="STAGE",
                   help="what to write (default: the target's last stage): " + "; ".join(
                       f"{b.name}: " + ", ".join(f"{s.name} ({s.description})" for s in b.stages)
                       for b in BACKENDS.values() if b.stages))
    p.add_argument("-S", dest="text", action="store_true",
                   help="write the target's last text stage (e.g. spirv: spirv-text; cuda-tile: "
                        "tile-text; cpu: llvm-opt)")
    p.add_argument("-o", "--output", required=True, help="output file, or - for standard output")
    p.add_argument("--checked", action="store_true", help="compile with run-time checks")
    p.set_defaults(run=cmd_compile)
    p = sub.add_parser("run", help="run a kernel on generated inputs and print a summary")
    _add_program(p)
    p.add_argument("--kernel", "-k", help="kernel name (needed when the program has several)")
    p.add_argument("--target", default="cpu", metavar="TARGET",
                   help="back end to run on (default: cpu): " + ", ".join(
                       b.name for b in BACKENDS.values() if b.executes))
    p.add_argument("--grid", type=_grid_arg, default=None,
                   help="work-groups, e.g. 8,1,1 (default: one per group member (--group-size) "
                        "or per entry of a dynamic mode (--dim) where the kernel reads "
                        "group_id.x, else one)")
    p.add_argument("--repeat", type=int, default=5,
                   help="timed runs after the first, on fresh inputs (default 5; 0: none)")
    p.add_argument("--dim", type=int, default=16, help="size used for every dynamic mode")
    p.add_argument("--group-size", type=int, default=4, help="members of dynamic-size groups")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs")
    p.add_argument("--unchecked", dest="checked", action="store_false",
                   help="run without the run-time checks (bounds, null memrefs, barriers, "
                        "division by zero, uniformity, data races on local memory), which are on "
                        "by default: a kernel breaking the language's rules is then "
                        "undefined behaviour")
    p.add_argument("--checked", dest="checked", action="store_true",
                   help="run with the run-time checks (the default)")
    p.set_defaults(run=cmd_run, checked=True)
    p = sub.add_parser("layout", help="print which lane and register hold each element of a "
                                      "coopmatrix type (IREE nested layout and a table)")
    p.add_argument("type", help="a coopmatrix type, e.g. 'coopmatrix<f32x8x16,matrix_acc>'")
    p.add_argument("--subgroup-size", "-S", type=int, default=0,
                   help="work-items of a subgroup (default: the target's preferred size)")
    p.add_argument("--target", "-d", default="interp", metavar="TARGET",
                   help=f"target description ({', '.join(TARGETS)}; default: interp)")
    p.add_argument("--png", metavar="FILE", help="also write a picture: a square per "
                                                 "element, a colour per lane")
    p.set_defaults(run=cmd_layout)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug in ttlc: say so plainly instead of a traceback
        print(f"ttlc: internal error ({type(e).__name__}: {e}); please report this with the "
              "input that caused it", file=sys.stderr)
        return 3
