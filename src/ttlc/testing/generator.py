"""A seeded generator of random *valid* programs with matching inputs.

``generate(seed)`` returns a ``GeneratedCase``: the program text of one kernel, its name,
the launch grid and ``make_args()``, which builds fresh arguments (the same values on every
call).  Programs are always accepted by ``ttlc.check`` and, with their inputs, have one
well-defined result, so they can be used for crash testing of the interpreter and for
differential testing of passes and backends:

* no races: every work-group works on its own slice of every argument it writes (a batch
  mode indexed by ``group_id``, or the group member of its id); inside an SPMD region each
  work-item writes only elements no other work-item touches, and reads other work-items'
  elements only after a ``barrier``; atomics are integer additions, maxima and minima;
* no undefined arithmetic: integer divisors are forced into 1..8 (``or (and d, 7), 1``),
  shift amounts into 0..bits-1, floats are clamped to [-100, 100] before conversion to an
  integer, collective BLAS operands never alias their output;
* no uninitialised reads: local memory (``alloca``) is written completely before it is
  read; all arguments are initialised by ``make_args``;
* every index is in bounds for the generated inputs (dynamic sizes are read with ``size``
  and index arithmetic wraps with ``rem`` by a size that is at least 1).
* no dependence on sizes the attributes leave to the implementation: builtins derived
  from an unset subgroup or work-group size (ids, ``num_subgroups``, ``subgroup_size``)
  only steer loops, they are never used as data.

Floating-point results may still differ in the last bits between implementations
(accumulation order of gemm, math functions); integer results must be bit-identical.

The body mixes constants, scalar arithmetic, casts, comparisons, ``if``/``else`` with
yields, ``for`` loops with loop-carried values, views (``subview``, ``expand``, ``fuse``,
``size``), loads and stores in ``parallel`` regions and ``foreach``/``foreach_tile`` loops,
group loads (also with an offset: ``ttlc.Group``), subgroup operations, atomics, barriers,
collective BLAS (gemm, gemv, ger, axpby, hadamard, sum, cumsum) and, when the interpreter
supports them, coopmatrix load/mul_add/scale/apply/store with subgroup size 16.
"""
from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..ir.types import DYNAMIC, SCALAR_TYPES, MemrefType, promotable, promote

INT_TYPES = ("i8", "i16", "i32", "i64", "index")
FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
COMPLEX_TYPES = ("c32", "c64")
NUMBER_TYPES = INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES
#: types used by scalar expressions, weighted towards the common ones
EXPR_TYPES = ("i32", "i32", "i64", "index", "i8", "i16", "f32", "f32", "f64", "f16", "bf16",
              "c32", "c64")
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}
COMPONENT = {"c32": "f32", "c64": "f64"}
FLOAT_LITERALS = (0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 3.25, 0.125, 8.0, -0.75, 100.0, 1.5)


@dataclass
class GeneratedCase:
    """A generated program with everything needed to run it."""

    text: str
    kernel_name: str
    #: fresh arguments (arrays, ttlc.Group objects, lists of arrays, scalars), the same
    #: values on every call; arrays the kernel writes are among them
    make_args: Callable[[], list]
    grid: Tuple[int, int, int]
    seed: int = 0
    #: constructs the program contains ("gemm", "foreach", "coopmatrix", ...)
    features: Set[str] = field(default_factory=set)

    def __repr__(self) -> str:
        return f"<GeneratedCase seed={self.seed} @{self.kernel_name} grid={self.grid}>"


@dataclass
class Tensor:
    """A memref value of the body with what the generator knows about it at run time."""

    name: str
    type: MemrefType
    shape: Optional[Tuple[int, ...]]  # concrete sizes; None when they differ per work-group
    stride: Optional[Tuple[int, ...]]  # concrete strides in elements (None: unknown)
    base: str  # the argument (or alloca) whose memory it views
    writable: bool

    @property
    def elem(self) -> str:
        return self.type.element.name

    @property
    def order(self) -> int:
        return self.type.order


@dataclass
class GroupIn:
    """A read-only group argument read with per-work-item member indices."""

    name: str
    member: MemrefType


def _ftext(x: float) -> str:
    text = repr(float(x))
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"


def _dims(shape) -> str:
    return "x".join("?" if s is DYNAMIC else str(s) for s in shape)


#: the subgroup sizes generated programs may ask for (``generate``'s default)
SUBGROUP_SIZES = (4, 8, 16, 32)


class _Generator:
    def __init__(self, seed: int, coop: Optional[bool], math: bool = True,
                 subgroup_sizes: Sequence[int] = SUBGROUP_SIZES):
        self.seed = seed
        self.math = math
        self.rng = random.Random(seed)
        self.features: Set[str] = set()
        self.counter = 0
        self.args: List[Tuple[str, str]] = []  # (name, type text with attributes)
        self.makers: List[Callable[[np.random.Generator], Any]] = []
        self.prologue: List[str] = []
        self.body: List[str] = []
        self.out = self.body
        self.indent = 1
        self.depth = 0  # region nesting below the function body
        self.spmd = False
        self.loop_depth = 0
        self.scopes: List[List[Tuple[str, str]]] = [[]]
        self.caches: List[Dict[Any, str]] = [{}]
        self.tensors: List[Tensor] = []
        self.groups_in: List[GroupIn] = []
        self.budget = 0
        # launch configuration
        r = self.rng
        if 16 not in subgroup_sizes:
            raise ValueError(f"subgroup sizes {tuple(subgroup_sizes)} lack 16, which "
                             "coopmatrix programs use")
        self.coop = coop if coop is not None else (_coop_supported() and r.random() < 0.3)
        gx = r.choice((1, 1, 1, 2, 2, 3))
        gy = r.choice((1, 1, 1, 2))
        self.grid = (gx, gy, 1)
        self.batch = [gx] if gy == 1 else [gx, gy]
        if self.coop:
            self.sgs, wgx, wgy = 16, r.choice((16, 32)), r.choice((1, 2))
            self.attrs = f"subgroup_size=16, work_group_size=[{wgx},{wgy}]"
        else:
            choice = r.random()
            if choice < 0.4:
                self.sgs, self.attrs = 16, None
            elif choice < 0.55:
                self.sgs = r.choice([s for s in (8, 16) if s in subgroup_sizes])
                self.attrs = f"subgroup_size={self.sgs}"
            else:
                self.sgs = r.choice([s for s in SUBGROUP_SIZES if s in subgroup_sizes])
                wgx = self.sgs * r.choice((1, 2)) if self.sgs < 32 else 32
                wgy = r.choice((1, 2)) if wgx * 2 <= 64 else 1
                self.attrs = f"subgroup_size={self.sgs}, work_group_size=[{wgx},{wgy}]"
        # Sizes the attributes leave open are chosen by the implementation (interpreter
        # default, work-group-size pass, per target), so builtins that depend on them
        # (num_subgroups, subgroup_size, work-item and subgroup ids, the work-group size)
        # must not become leaves of values that reach memory: the program would have no
        # single result (seed 9 stored num_subgroups.x-dependent values and differed after
        # work-group-size / lower-foreach).  Such builtins are still emitted where needed
        # (loop starts and strides), just never used as data.
        self.sgs_fixed = self.attrs is not None
        self.wgs_fixed = self.attrs is not None and "work_group_size" in self.attrs
        self.kernel_name = f"k{seed % 100000}"

    # ---- emission -------------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def emit(self, line: str) -> None:
        self.out.append("    " * self.indent + line)
        self.budget += 1

    def define(self, ty: str, rhs: str, prefix: str = "v", leaf: bool = True) -> str:
        """Emit ``name = rhs : ty``; scalars become leaves of later expressions."""
        name = self.fresh(prefix)
        self.emit(f"{name} = {rhs} : {ty}")
        if leaf:
            self.scopes[-1].append((name, ty))
        return name

    @contextmanager
    def region(self, header: str, args: Sequence[Tuple[str, str]] = (), spmd: Optional[bool] = None,
               close: str = "}"):
        self.emit(header + " {")
        saved_spmd = self.spmd
        if spmd is not None:
            self.spmd = spmd
        self.indent += 1
        self.depth += 1
        self.scopes.append(list(args))
        self.caches.append({})
        try:
            yield
        finally:
            self.scopes.pop()
            self.caches.pop()
            self.depth -= 1
            self.indent -= 1
            self.spmd = saved_spmd
            self.emit(close)

    @contextmanager
    def else_region(self):
        """Continue the region just closed by region() with ``} else {``."""
        self.out[-1] += " else {"
        self.indent += 1
        self.depth += 1
        self.scopes.append([])
        self.caches.append({})
        try:
            yield
        finally:
            self.scopes.pop()
            self.caches.pop()
            self.depth -= 1
            self.indent -= 1
            self.emit("}")

    def cached(self, key, make: Callable[[], str]) -> str:
        for cache in reversed(self.caches):
            if key in cache:
                return cache[key]
        name = make()
        self.caches[-1][key] = name
        return name

    def visible(self, ty: Optional[str] = None) -> List[Tuple[str, str]]:
        out = [v for scope in self.scopes for v in scope]
        return out if ty is None else [v for v in out if v[1] == ty]

    # ---- constants -----------------------------------------------------------------------
    def const(self, ty: str, value) -> str:
        if ty == "bool":
            text = "true" if value else "false"
        elif ty in INT_TYPES:
            text = str(int(value))
        elif ty in FLOAT_TYPES:
            text = _ftext(value)
        else:
            re_, im = (value.real, value.imag) if isinstance(value, complex) else (value, 0.0)
            text = f"[{_ftext(re_)}, {_ftext(im)}]"
        key = ("const", ty, text)

        def make():
            name = self.fresh("c")
            self.emit(f"{name} = constant {text} : {ty}")
            return name
        return self.cached(key, make)

    def random_const(self, ty: str) -> str:
        r = self.rng
        if ty == "bool":
            return self.const(ty, r.random() < 0.5)
        if ty in INT_TYPES:
            bits = BITS[ty]
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            lo = max(lo, -(1 << 63) + 1)  # the smallest integer literal of the language
            x = r.random()
            if x < 0.08:
                value = r.choice((lo, hi, lo + 1, hi - 1))
            elif x < 0.15:
                value = r.randint(max(lo, -100000), min(hi, 100000))
            else:
                value = r.randint(-9, 9)
            return self.const(ty, value)
        if ty in FLOAT_TYPES:
            return self.const(ty, r.choice(FLOAT_LITERALS) * r.choice((1, 1, -1)))
        return self.const(ty, complex(r.choice(FLOAT_LITERALS), r.choice(FLOAT_LITERALS)))

    def index(self, value: int) -> str:
        return self.const("index", value)

    # ---- scalar expressions --------------------------------------------------------------
    def convert(self, name: str, src: str, dst: str) -> str:
        """A value of type dst from a value of type src (no undefined conversions)."""
        if src == dst:
            return name
        if src in COMPLEX_TYPES and dst not in COMPLEX_TYPES:
            comp = COMPONENT[src]
            op = self.rng.choice(("re", "im", "abs"))
            part = self.define(comp, f"{op} {name}")
            return self.convert(part, comp, dst)
        if src in FLOAT_TYPES and dst in INT_TYPES:
            lo = self.define(src, f"max {name}, {self.const(src, -100.0)}")
            name = self.define(src, f"min {lo}, {self.const(src, 100.0)}")
        return self.define(dst, f"cast {name}")

    def leaf(self, ty: str) -> str:
        r = self.rng
        same = self.visible(ty)
        if same and r.random() < 0.65:
            recent = same[-4:]
            return r.choice(recent if r.random() < 0.6 else same)[0]
        others = [v for v in self.visible() if v[1] in NUMBER_TYPES and v[1] != ty
                  and not (v[1] in COMPLEX_TYPES and ty == "bool")]
        if others and r.random() < 0.5:
            name, src = r.choice(others[-6:] if r.random() < 0.6 else others)
            return self.convert(name, src, ty)
        return self.random_const(ty)

    def expr(self, ty: str, depth: int) -> str:
        r = self.rng
        if depth <= 0 or self.budget > self.max_budget or r.random() < 0.25:
            return self.leaf(ty)
        x = r.random()
        if x < 0.45:
            return self.binary(ty, depth)
        if x < 0.6:
            return self.unary(ty, depth)
        if x < 0.7:
            src = r.choice([t for t in EXPR_TYPES if t != ty
                            and not (t in COMPLEX_TYPES and ty not in COMPLEX_TYPES)] or [ty])
            return self.convert(self.expr(src, depth - 1), src, ty)
        if x < 0.82:
            return self.if_expr(ty, depth)
        if x < 0.92 and self.loop_depth < 2:
            return self.for_expr(ty, depth)
        return self.leaf(ty)

    def binary(self, ty: str, depth: int) -> str:
        r = self.rng
        if ty in INT_TYPES:
            op = r.choice(("add", "sub", "mul", "div", "rem", "max", "min", "shl", "shr", "and",
                           "or", "xor"))
        elif ty in FLOAT_TYPES:
            op = r.choice(("add", "sub", "mul", "div", "rem", "max", "min"))
        else:
            op = r.choice(("add", "sub", "mul"))
        a = self.expr(ty, depth - 1)
        b = self.expr(ty, depth - 1)
        if ty in INT_TYPES and op in ("div", "rem"):
            masked = self.define(ty, f"and {b}, {self.const(ty, 7)}")
            b = self.define(ty, f"or {masked}, {self.const(ty, 1)}")
            self.features.add("int_division")
        elif op in ("shl", "shr"):
            b = self.define(ty, f"and {b}, {self.const(ty, BITS[ty] - 1)}")
            self.features.add("shift")
        self.features.add("arith")
        return self.define(ty, f"{op} {a}, {b}")

    def unary(self, ty: str, depth: int) -> str:
        r = self.rng
        if ty in FLOAT_TYPES and r.random() < 0.3:
            comp_of = [c for c, f in COMPONENT.items() if f == ty]
            if comp_of:
                src = comp_of[0]
                return self.define(ty, f"{r.choice(('re', 'im', 'abs'))} {self.expr(src, depth - 1)}")
        a = self.expr(ty, depth - 1)
        if ty in INT_TYPES:
            op = r.choice(("abs", "neg", "not"))
        elif ty in FLOAT_TYPES:
            if self.math and r.random() < 0.35:
                op = r.choice(("sin", "cos", "exp", "exp2", "log", "log2", "native_sin",
                               "native_cos", "native_exp", "native_exp2", "native_log",
                               "native_log2"))
                self.features.add("math")
            else:
                op = r.choice(("abs", "neg"))
        else:
            op = r.choice(("neg", "conj", "exp") if self.math and r.random() < 0.2 else ("neg", "conj"))
        return self.define(ty, f"{op} {a}")

    def condition(self, depth: int) -> str:
        r = self.rng
        if depth > 1 and r.random() < 0.2:
            a, b = self.condition(depth - 1), self.condition(depth - 1)
            return self.define("bool", f"{r.choice(('and', 'or', 'xor'))} {a}, {b}")
        ty = r.choice(EXPR_TYPES)
        a, b = self.expr(ty, depth - 1), self.expr(ty, depth - 1)
        if ty in COMPLEX_TYPES:
            op = r.choice(("equal", "not_equal"))
        else:
            op = r.choice(("equal", "not_equal", "greater_than", "greater_than_equal",
                           "less_than", "less_than_equal"))
        self.features.add("compare")
        return self.define("bool", f"{op} {a}, {b}")

    def if_expr(self, ty: str, depth: int) -> str:
        cond = self.condition(depth - 1)
        name = self.fresh()
        self.features.add("if")
        with self.region(f"{name} = if {cond} -> ({ty})"):
            self.emit(f"yield ({self.expr(ty, depth - 1)})")
        with self.else_region():
            self.emit(f"yield ({self.expr(ty, depth - 1)})")
        self.scopes[-1].append((name, ty))
        return name

    def loop_bounds(self, ity: str) -> Tuple[str, str, Optional[str]]:
        r = self.rng
        start = r.randint(-2, 2)
        lo = self.const(ity, start)
        varying = [v for v in self.visible(ity)]
        if self.spmd and varying and r.random() < 0.4:
            count = self.define(ity, f"and {r.choice(varying)[0]}, {self.const(ity, 3)}")
            hi = self.define(ity, f"add {lo}, {count}")
            self.features.add("varying_loop")
        else:
            hi = self.const(ity, start + r.randint(0, 4))
        step = self.const(ity, r.randint(1, 2)) if r.random() < 0.3 else None
        return lo, hi, step

    def for_expr(self, ty: str, depth: int) -> str:
        r = self.rng
        ity = r.choice(("index", "i32", "i64", "i16"))
        lo, hi, step = self.loop_bounds(ity)
        types = [ty] + ([r.choice(EXPR_TYPES)] if r.random() < 0.3 else [])
        inits = [self.expr(t, depth - 1) for t in types]
        results = [self.fresh() for _ in types]
        iv = self.fresh("i")
        carried = [self.fresh("acc") for _ in types]
        header = (f"{', '.join(results)} = for {iv} = {lo}, {hi}{', ' + step if step else ''} "
                  f"init({', '.join(f'{c}={i}' for c, i in zip(carried, inits))}) -> "
                  f"({', '.join(types)})")
        self.features.add("for")
        self.loop_depth += 1
        with self.region(header, [(iv, ity)] + list(zip(carried, types))):
            new = []
            for c, t in zip(carried, types):
                step_value = self.expr(t, depth - 1)
                if t == "bool":
                    new.append(step_value)
                    continue
                op = "add" if t in COMPLEX_TYPES else r.choice(("add", "sub", "max", "min", "mul"))
                if op in ("max", "min") and t in COMPLEX_TYPES:
                    op = "add"
                new.append(self.define(t, f"{op} {c}, {step_value}"))
            self.emit(f"yield ({', '.join(new)})")
        self.loop_depth -= 1
        for name, t in zip(results, types):
            self.scopes[-1].append((name, t))
        return results[0]

    # ---- sizes ---------------------------------------------------------------------------
    def size(self, t: Tensor, mode: int) -> str:
        return self.cached(("size", t.name, mode),
                           lambda: self.define("index", f"size {t.name}[{mode}]", "s"))

    def size1(self, t: Tensor, mode: int) -> str:
        """max(size, 1): a divisor that cannot be 0."""
        return self.cached(("size1", t.name, mode),
                           lambda: self.define("index", f"max {self.size(t, mode)}, "
                                                        f"{self.index(1)}", "s"))

    def count(self, t: Tensor) -> str:
        def make():
            n = self.index(1)
            for d in range(t.order):
                n = self.define("index", f"mul {n}, {self.size(t, d)}", "n")
            return n
        return self.cached(("count", t.name), make) if t.order else self.index(1)

    def decompose(self, t: Tensor, k: str, wrap: bool) -> List[str]:
        """Indices of the k-th element of t in column-major order (wrap: k modulo the size)."""
        idx, q = [], k
        for d in range(t.order):
            s = self.size1(t, d)
            if d == t.order - 1 and not wrap:
                idx.append(q)
            else:
                idx.append(self.define("index", f"rem {q}, {s}"))
                if d < t.order - 1:
                    q = self.define("index", f"div {q}, {s}")
        return idx

    # ---- arguments -----------------------------------------------------------------------
    def add_arg(self, prefix: str, type_text: str, maker) -> str:
        name = f"%{prefix}{len(self.args)}"
        self.args.append((name, type_text))
        self.makers.append(maker)
        return name

    def random_values(self, rng: np.random.Generator, elem: str, shape) -> np.ndarray:
        from ..runtime.values import DTYPES

        dtype = DTYPES[elem]
        if elem in INT_TYPES:
            wide = {"i8": 100, "i16": 1000}.get(elem, 100000)
            lim = wide if rng.random() < 0.2 else 9
            return rng.integers(-lim, lim + 1, size=shape).astype(dtype)
        vals = rng.integers(-16, 17, size=shape) / 4.0
        if elem in COMPLEX_TYPES:
            vals = vals + 1j * (rng.integers(-16, 17, size=shape) / 4.0)
        return np.asarray(vals).astype(dtype)

    def new_tensor(self, elem: str, shape: Tuple[int, ...], writable: bool) -> Tensor:
        """A new memref argument; returns the work-group's view of it."""
        r = self.rng
        order = len(shape)
        batched = writable or r.random() < 0.5
        full = tuple(shape) + (tuple(self.batch) if batched else ())
        # layout: packed, or padded leading modes (the array is a slice of a bigger one)
        pad = [0] * len(full)
        if full and r.random() < 0.35:
            pad[0] = r.randint(1, 3)
            if len(full) > 2 and r.random() < 0.3:
                pad[1] = r.randint(1, 2)
        base_shape = tuple(s + p for s, p in zip(full, pad))
        base_stride = MemrefType.packed_stride(base_shape)
        layout = "packed" if not any(pad) else r.choice(("static", "dynamic", "mixed"))
        if layout == "packed" and r.random() < 0.15 and full:
            layout = "dynamic"  # dynamic strides, packed array
        tshape = tuple(s if r.random() < 0.5 else DYNAMIC for s in full)
        if layout == "packed":
            tstride = MemrefType.packed_stride(tshape)
        elif layout == "static":
            tstride = tuple(base_stride)
        elif layout == "dynamic":
            tstride = tuple(DYNAMIC for _ in full)
        else:
            tstride = tuple(s if r.random() < 0.5 else DYNAMIC for s in base_stride)
        stride = _runtime_strides(full, base_stride, tstride)
        mtype = MemrefType.get(SCALAR_TYPES[elem], tshape, tstride)
        attrs = self.memref_attrs(full, stride, tshape)
        self.features.add("strided_arg" if any(pad) else "packed_arg")
        if DYNAMIC in tshape:
            self.features.add("dynamic_shape")

        def make(rng, full=full, base_shape=base_shape, elem=elem):
            values = np.asarray(self.random_values(rng, elem, base_shape))
            if values.ndim == 0:
                return values
            return np.asfortranarray(values)[tuple(slice(0, s) for s in full)]
        arg = self.add_arg("A", f"{mtype}{attrs}", make)
        base_id = arg
        if not batched:
            return self.register(Tensor(arg, mtype, tuple(shape), tuple(stride[:order]), base_id,
                                        writable))
        # the work-group's slice: subview %arg[0:s0, ..., %gid_x(, %gid_y)]
        saved, self.out = self.out, self.prologue
        saved_indent, self.indent = self.indent, 1
        try:
            slices = []
            for d, s in enumerate(shape):
                if tshape[d] is DYNAMIC and r.random() < 0.7:
                    sz = self.fresh("s")
                    self.emit(f"{sz} = size {arg}[{d}] : index")
                    slices.append(f"0:{sz}")
                else:
                    slices.append(f"0:{s}")
            slices += [self.gid[i] for i in range(len(self.batch))]
            vshape = tuple(DYNAMIC if sl.startswith("0:%") else s for sl, s in zip(slices, shape))
            vstride = tuple(st if r.random() < 0.8 else DYNAMIC for st in tstride[:order])
            vtype = MemrefType.get(SCALAR_TYPES[elem], vshape, vstride)
            view = self.fresh("t")
            self.emit(f"{view} = subview {arg}[{', '.join(slices)}] : {vtype}")
        finally:
            self.out, self.indent = saved, saved_indent
        return self.register(Tensor(view, vtype, tuple(shape), tuple(stride[:order]), base_id,
                                    writable))

    def memref_attrs(self, full, stride, tshape) -> str:
        r = self.rng
        if not full or r.random() > 0.2:
            return ""
        parts = []
        if r.random() < 0.5:
            g = [s for s in full[:1]]
            gcd = max(d for d in (1, 2, 4) if g[0] % d == 0)
            parts.append(f"shape_gcd=[{gcd}]")
        else:
            st = list(stride)
            gcds = [max(d for d in (1, 2, 4, 8) if s % d == 0) for s in st[: r.randint(1, len(st))]]
            parts.append(f"stride_gcd=[{','.join(map(str, gcds))}]")
        self.features.add("arg_attributes")
        return " {" + ", ".join(parts) + "}"

    def register(self, t: Tensor) -> Tensor:
        self.tensors.append(t)
        return t

    def new_output_group(self, elem: str, order: int) -> Tensor:
        """A group with one member per work-group, each with its own dynamic sizes."""
        r = self.rng
        n = self.grid[0] * self.grid[1]
        static = [r.randint(1, 5) if r.random() < 0.4 else DYNAMIC for _ in range(order)]
        member = MemrefType.get(SCALAR_TYPES[elem], tuple(static))
        size_text = str(n) if r.random() < 0.5 else "?"
        shapes = [tuple(s if s is not DYNAMIC else r.randint(1, 6) for s in static)
                  for _ in range(n)]

        def make(rng, shapes=shapes, elem=elem):
            return [np.asfortranarray(self.random_values(rng, elem, s)) for s in shapes]
        arg = self.add_arg("G", f"group<{member}x{size_text}>", make)
        saved, self.out = self.out, self.prologue
        saved_indent, self.indent = self.indent, 1
        try:
            view = self.fresh("t")
            self.emit(f"{view} = load {arg}[{self.member_index}] : {member}")
        finally:
            self.out, self.indent = saved, saved_indent
        self.features.add("group")
        return self.register(Tensor(view, member, None, None, arg, True))

    def new_input_group(self) -> GroupIn:
        r = self.rng
        elem = r.choice(("f32", "i32", "f64", "i16"))
        n = r.randint(1, 4)
        import ttlc

        if r.random() < 0.5:  # dynamic offset and sizes: ttlc.Group(bufs, offset, shapes)
            offset = r.randint(0, 5)
            member = MemrefType.get(SCALAR_TYPES[elem], (DYNAMIC,))
            type_text = f"group<{member}x?, offset: ?>"
            sizes = [r.randint(1, 7) for _ in range(n)]
            extra = [r.randint(0, 2) for _ in range(n)]

            def make(rng, offset=offset, sizes=sizes, extra=extra, elem=elem):
                bufs = [self.random_values(rng, elem, (offset + s + e,)) for s, e in zip(sizes, extra)]
                return ttlc.Group(bufs, offset=offset, shapes=[(s,) for s in sizes])
            self.features.add("group_offset_dynamic")
        else:  # static offset, static member shape: a plain list of the underlying arrays
            offset = r.randint(1, 4)
            m = r.randint(1, 6)
            member = MemrefType.get(SCALAR_TYPES[elem], (m,))
            type_text = f"group<{member}x{n if r.random() < 0.5 else '?'}, offset: {offset}>"

            def make(rng, offset=offset, m=m, n=n, elem=elem):
                return [self.random_values(rng, elem, (offset + m + k,)) for k in range(n)]
            self.features.add("group_offset_static")
        arg = self.add_arg("G", type_text, make)
        g = GroupIn(arg, member)
        self.groups_in.append(g)
        return g

    def new_scalar_arg(self) -> None:
        r = self.rng
        ty = r.choice(EXPR_TYPES + ("bool",))
        if ty == "bool":
            value = r.random() < 0.5
        elif ty in INT_TYPES:
            value = r.randint(-20, 20)
        elif ty in FLOAT_TYPES:
            value = r.choice(FLOAT_LITERALS)
        else:
            value = complex(r.choice(FLOAT_LITERALS), r.choice(FLOAT_LITERALS))
        from ..runtime.values import DTYPES

        def make(rng, ty=ty, value=value):
            if ty == "bool":
                return value
            if _python_number(ty):
                return value
            return DTYPES[ty].type(value)
        arg = self.add_arg("x", ty, make)
        self.scopes[0].append((arg, ty))
        self.features.add("scalar_arg")

    # ---- choosing tensors ------------------------------------------------------------------
    def tensor_for(self, elem: str, shape: Tuple[int, ...], write: bool, exclude: Set[str]) -> Tensor:
        """A tensor of exactly this element type and concrete shape (a view or a new argument)."""
        r = self.rng
        cands = [t for t in self.tensors
                 if t.elem == elem and t.shape is not None and t.order >= len(shape)
                 and (t.writable or not write) and t.base not in exclude
                 and _embeds(t.shape, shape) is not None]
        if cands and r.random() < 0.7:
            t = r.choice(cands)
            if t.shape == tuple(shape) and r.random() < 0.6:
                return t
            return self.subview_block(t, shape)
        bigger = tuple(s + (r.randint(0, 2) if r.random() < 0.3 else 0) for s in shape)
        t = self.new_tensor(elem, bigger, write or r.random() < 0.3)
        return t if bigger == tuple(shape) else self.subview_block(t, shape)

    def subview_block(self, t: Tensor, shape: Tuple[int, ...]) -> Tensor:
        """subview of t with the given concrete shape (extra modes of t are indexed away)."""
        r = self.rng
        keep = _embeds(t.shape, shape)
        assert keep is not None
        slices, vshape, vstride, cstride = [], [], [], []
        j = 0
        for d, s in enumerate(t.shape):
            if j < len(keep) and keep[j] == d:
                want = shape[j]
                off = r.randint(0, s - want)
                dyn = r.random() < 0.3
                off_text = str(off) if r.random() < 0.6 else self.index(off)
                size_text = self.index(want) if dyn else str(want)
                slices.append(f"{off_text}:{size_text}")
                vshape.append(DYNAMIC if dyn else want)
                st = t.type.stride[d]
                vstride.append(st if r.random() < 0.8 else DYNAMIC)
                cstride.append(t.stride[d])
                j += 1
            else:
                off = r.randint(0, s - 1)
                slices.append(str(off) if r.random() < 0.5 else self.index(off))
        vtype = MemrefType(t.type.element, tuple(vshape), tuple(vstride), t.type.space)
        name = self.define(str(vtype), f"subview {t.name}[{', '.join(slices)}]", "t", leaf=False)
        self.features.add("subview")
        return self.register(Tensor(name, vtype, tuple(shape), tuple(cstride), t.base, t.writable))

    def derive_view(self) -> None:
        """expand or fuse a known tensor into a new view (at the top level)."""
        r = self.rng
        known = [t for t in self.tensors if t.shape is not None and t.order >= 1]
        if not known:
            return
        t = r.choice(known)
        fusable = [d for d in range(t.order - 1)
                   if t.stride[d] * t.shape[d] == t.stride[d + 1]]
        if fusable and r.random() < 0.5:
            lo = r.choice(fusable)
            hi = lo + 1
            while hi + 1 < t.order and hi in fusable and r.random() < 0.5:
                hi += 1
            if any(t.stride[k] * t.shape[k] != t.stride[k + 1] for k in range(lo, hi)):
                hi = lo + 1
            size = 1
            for s in t.shape[lo:hi + 1]:
                size *= s
            tsize = 1
            for s in t.type.shape[lo:hi + 1]:
                tsize = DYNAMIC if tsize is DYNAMIC or s is DYNAMIC else tsize * s
            vshape = t.type.shape[:lo] + (tsize,) + t.type.shape[hi + 1:]
            vstride = t.type.stride[:lo + 1] + t.type.stride[hi + 1:]
            vstride = tuple(s if r.random() < 0.8 else DYNAMIC for s in vstride)
            vtype = MemrefType(t.type.element, vshape, vstride, t.type.space)
            name = self.define(str(vtype), f"fuse {t.name}[{lo},{hi}]", "t", leaf=False)
            self.features.add("fuse")
            self.register(Tensor(name, vtype, t.shape[:lo] + (size,) + t.shape[hi + 1:],
                                 t.stride[:lo + 1] + t.stride[hi + 1:], t.base, t.writable))
            return
        modes = [d for d in range(t.order) if t.shape[d] >= 1]
        d = r.choice(modes)
        s = t.shape[d]
        divisors = [a for a in range(1, s + 1) if s % a == 0]
        a = r.choice(divisors)
        parts = [a, s // a]
        if r.random() < 0.2 and parts[1] > 1 and parts[1] % 2 == 0:
            parts = [a, 2, parts[1] // 2]
        texts, dims = [], []
        for p in parts:
            if r.random() < 0.3:
                texts.append(self.index(p))
                dims.append(DYNAMIC)
            else:
                texts.append(str(p))
                dims.append(p)
        if t.type.shape[d] is not DYNAMIC:
            static = 1
            for x in dims:
                static *= x if x is not DYNAMIC else 1
            if t.type.shape[d] % static:
                return
        st = t.type.stride[d]
        new_stride, cst, c = [], [], t.stride[d]
        for x, p in zip(dims, parts):
            new_stride.append(st)
            cst.append(c)
            st = DYNAMIC if st is DYNAMIC or x is DYNAMIC else st * x
            c *= p
        new_stride = [s if r.random() < 0.8 else DYNAMIC for s in new_stride]
        vtype = MemrefType(t.type.element, t.type.shape[:d] + tuple(dims) + t.type.shape[d + 1:],
                           t.type.stride[:d] + tuple(new_stride) + t.type.stride[d + 1:],
                           t.type.space)
        name = self.define(str(vtype), f"expand {t.name}[{d} -> {' x '.join(texts)}]", "t", leaf=False)
        self.features.add("expand")
        self.register(Tensor(name, vtype, t.shape[:d] + tuple(parts) + t.shape[d + 1:],
                             t.stride[:d] + tuple(cst) + t.stride[d + 1:], t.base, t.writable))

    def random_shape(self, order: Optional[int] = None) -> Tuple[int, ...]:
        r = self.rng
        if order is None:
            order = r.choice((0, 1, 1, 2, 2, 2, 3))
        return tuple(r.randint(1, 6 if order < 3 else 3) for _ in range(order))

    def pick_output(self, known: bool = False) -> Tensor:
        r = self.rng
        cands = [t for t in self.tensors if t.writable and (t.shape is not None or not known)]
        if cands and r.random() < 0.6:
            return r.choice(cands)
        if not known and r.random() < 0.15:
            return self.new_output_group(r.choice(("f32", "i32", "f64", "c32")), r.choice((1, 2)))
        if r.random() < 0.1 and self.depth == 0:
            return self.new_alloca()
        elem = r.choice(EXPR_TYPES)
        return self.tensor_for(elem, self.random_shape(), True, set())

    def new_alloca(self) -> Tensor:
        """Local memory, initialised completely right away (by a parallel phase)."""
        r = self.rng
        elem = r.choice(("f32", "i32", "f64"))
        shape = self.random_shape(r.choice((1, 2)))
        mtype = MemrefType(SCALAR_TYPES[elem], shape, MemrefType.packed_stride(shape), "local")
        name = self.fresh("L")
        self.emit(f"{name} = alloca : {mtype}")
        t = Tensor(name, mtype, shape, tuple(MemrefType.packed_stride(shape)), name, True)
        self.features.add("alloca")
        self.phase_elementwise(t, own_read=False, style="parallel")  # initialise every element
        return self.register(t)

    def pick_inputs(self, exclude: Set[str], count: int) -> List[Tensor]:
        r = self.rng
        out = []
        for _ in range(count):
            cands = [t for t in self.tensors if t.base not in exclude]
            if cands and r.random() < 0.6:
                out.append(r.choice(cands))
            else:
                out.append(self.tensor_for(r.choice(EXPR_TYPES), self.random_shape(), False, exclude))
        return out

    # ---- phases ----------------------------------------------------------------------------
    def spmd_ids(self) -> Tuple[str, str]:
        # which work-item runs element k of ``for k = id, n, W`` depends on the work-group
        # size; its local id (k mod subgroup size) only on the subgroup size
        lid = self.define("i32", "subgroup_local_id", leaf=self.sgs_fixed)
        sg = self.define("i32", "subgroup_linear_id", leaf=self.wgs_fixed)
        sgs = self.define("i32", "subgroup_size", leaf=self.sgs_fixed)
        base = self.define("i32", f"mul {sg}, {sgs}", leaf=self.wgs_fixed)
        id32 = self.define("i32", f"add {base}, {lid}", leaf=self.wgs_fixed)
        return id32, self.define("index", f"cast {id32}", leaf=self.wgs_fixed)

    def load_inputs(self, inputs: List[Tensor], idx_of: Callable[[Tensor], List[str]],
                    k: str) -> None:
        """Load one element of each input (and maybe of an input group) into the scope."""
        r = self.rng
        for t in inputs:
            idx = idx_of(t)
            if t.order and r.random() < 0.2:  # through a per-work-item subview
                d = r.randrange(t.order)
                slices = [f"{i}:1" if m == d else i for m, i in enumerate(idx)]
                vtype = MemrefType(t.type.element, (1,), (t.type.stride[d],), t.type.space)
                sv = self.define(str(vtype), f"subview {t.name}[{', '.join(slices)}]", "t", leaf=False)
                self.define(t.elem, f"load {sv}[{self.index(0)}]")
                self.features.add("varying_subview")
            else:
                self.define(t.elem, f"load {t.name}[{', '.join(idx)}]")
        if self.groups_in and r.random() < 0.5:
            g = r.choice(self.groups_in)
            n = self.cached(("gsize", g.name), lambda: self.define(
                "index", f"max {self.define('index', f'size {g.name}[0]')}, {self.index(1)}"))
            j = self.define("index", f"rem {k}, {n}")
            m = self.define(str(g.member), f"load {g.name}[{j}]", "m", leaf=False)
            if g.member.shape[0] is DYNAMIC:
                size = self.define("index", f"size {m}[0]")
                size1 = self.define("index", f"max {size}, {self.index(1)}")
            else:
                size1 = self.index(g.member.shape[0])
            i = self.define("index", f"rem {k}, {size1}")
            self.define(g.member.element.name, f"load {m}[{i}]")
            self.features.add("group_load_varying")

    def element_body(self, out: Tensor, oidx: List[str], inputs: List[Tensor],
                     k: str, own_read: bool, loop_idx: Optional[List[str]] = None) -> None:
        r = self.rng
        loop_idx = loop_idx or oidx

        def idx_of(t: Tensor) -> List[str]:
            if r.random() < 0.5 or not loop_idx:
                return self.decompose(t, k, wrap=True)
            return [self.define("index", f"rem {loop_idx[d % len(loop_idx)]}, {self.size1(t, d)}")
                    for d in range(t.order)]
        self.load_inputs(inputs, idx_of, k)
        if own_read:
            self.define(out.elem, f"load {out.name}[{', '.join(oidx)}]")
        if r.random() < 0.3:
            self.convert(k, "index", r.choice(("i32", "i64", "f32")))
        value = self.expr(out.elem, r.randint(2, 4))
        target = f"{out.name}[{', '.join(oidx)}]"
        if r.random() < 0.25:
            cond = self.condition(2)
            with self.region(f"if {cond}"):
                self.emit(f"store {value}, {target}")
            with self.else_region():
                self.emit(f"store {self.expr(out.elem, 2)}, {target}")
            self.features.add("divergent_store")
        else:
            self.emit(f"store {value}, {target}")
        self.features.add("store")

    def prepare_sizes(self, tensors: Sequence[Tensor]) -> None:
        for t in tensors:
            for d in range(t.order):
                self.size1(t, d)

    def subgroup_values(self, id32: str) -> None:
        """Subgroup operations in convergent code at the top of an SPMD region."""
        r = self.rng
        if r.random() < 0.5 or not _subgroup_supported():
            return
        ty = r.choice(("i32", "i64", "i32"))
        # the subgroup a lane belongs to (and, for reductions, its size) depends on the
        # work-group size: without it fixed, neither the id (nor a cast of it, which would
        # be a leaf) nor the results may reach memory
        use_id = r.random() < 0.5 and self.wgs_fixed
        x = self.convert(id32, "i32", ty) if use_id else self.expr(ty, 1)
        op = r.choice(("subgroup_reduce_add", "subgroup_reduce_max", "subgroup_reduce_min",
                       "subgroup_inclusive_scan_add", "subgroup_exclusive_scan_add",
                       "subgroup_inclusive_scan_max", "subgroup_exclusive_scan_min"))
        self.define(ty, f"{op} {x}", leaf=self.wgs_fixed)
        if r.random() < 0.5:
            # a lane below every subgroup size the target may choose: 0 unless fixed
            k = r.randrange(self.sgs)
            lane = self.const("i32", k if self.sgs_fixed else 0)
            self.define(ty, f"subgroup_broadcast {x}, {lane}", leaf=self.wgs_fixed)
        self.features.add("subgroup_ops")

    def phase_elementwise(self, out: Optional[Tensor] = None, own_read: Optional[bool] = None,
                          style: Optional[str] = None) -> None:
        r = self.rng
        out = out or self.pick_output()
        own_read = r.random() < 0.5 if own_read is None else own_read
        inputs = self.pick_inputs({out.base}, r.randint(0, 3))
        style = style or r.choice(("parallel", "parallel", "foreach"))
        if out.order == 0:
            style = "parallel"
        self.prepare_sizes([out] + inputs)
        if style == "parallel":
            n, w = self.count(out), self.W
            with self.region("parallel", spmd=True):
                id32, id_ = self.spmd_ids()
                self.subgroup_values(id32)
                k = self.fresh("k")
                with self.region(f"for {k} = {id_}, {n}, {w}", [(k, "index")]):
                    self.loop_depth += 1
                    oidx = self.decompose(out, k, wrap=False)
                    self.element_body(out, oidx, inputs, k, own_read)
                    self.loop_depth -= 1
            self.features.add("parallel")
        else:
            ity = "index" if r.random() < 0.8 else "i32"
            lows, highs = [], []
            for d in range(out.order):
                lows.append(self.const(ity, 0))
                highs.append(self.size(out, d) if ity == "index"
                             else self.cached(("size32", out.name, d), lambda d=d: self.define(
                                 "i32", f"cast {self.size(out, d)}")))
            vars_ = [self.fresh("i") for _ in range(out.order)]
            header = (f"foreach ({', '.join(vars_)}) = ({', '.join(lows)}), "
                      f"({', '.join(highs)})")
            with self.region(header, [(v, ity) for v in vars_], spmd=True):
                oidx = vars_ if ity == "index" else [self.define("index", f"cast {v}") for v in vars_]
                k = oidx[0]
                self.element_body(out, oidx, inputs, k, own_read)
            self.features.add("foreach")

    def phase_foreach_tile(self) -> None:
        r = self.rng
        out = self.pick_output()
        if out.order == 0:
            return self.phase_elementwise(out)
        inputs = self.pick_inputs({out.base}, r.randint(0, 2))
        self.prepare_sizes([out] + inputs)
        n = out.order
        tiles = [self.sgs * r.choice((1, 1, 2))] + [r.randint(1, 4) for _ in range(n - 1)]
        vars_ = [self.fresh("i") for _ in range(n)]
        sizes = [self.fresh("ts") for _ in range(n)]
        header = (f"foreach_tile ({', '.join(vars_)}) = ({', '.join(self.index(0) for _ in vars_)}), "
                  f"({', '.join(self.size(out, d) for d in range(n))}) as ({', '.join(sizes)}) "
                  f"<= ({', '.join(map(str, tiles))})")
        own_read = r.random() < 0.5
        with self.region(header, [(v, "index") for v in vars_ + sizes], spmd=True):
            # row mod subgroup size: fixed only with the subgroup size (see __init__)
            fixed = self.sgs_fixed
            lid = self.define("index", f"cast {self.define('i32', 'subgroup_local_id', leaf=fixed)}",
                              leaf=fixed)
            sgs = self.define("index", f"cast {self.define('i32', 'subgroup_size', leaf=fixed)}",
                              leaf=fixed)
            row = self.fresh("r")
            with self.region(f"for {row} = {lid}, {sizes[0]}, {sgs}", [(row, "index")]):
                idx = [self.define("index", f"add {vars_[0]}, {row}")]
                self._tile_rest(out, inputs, vars_, sizes, idx, own_read)
        self.features.add("foreach_tile")

    def _tile_rest(self, out, inputs, vars_, sizes, idx, own_read) -> None:
        d = len(idx)
        if d == out.order:
            k = idx[0]
            self.element_body(out, idx, inputs, k, own_read)
            return
        c = self.fresh("c")
        with self.region(f"for {c} = {self.index(0)}, {sizes[d]}", [(c, "index")]):
            nxt = self.define("index", f"add {vars_[d]}, {c}")
            self._tile_rest(out, inputs, vars_, sizes, idx + [nxt],
                            own_read)

    def phase_barrier(self) -> None:
        """Write one tensor, barrier, read it at other work-items' elements into another."""
        r = self.rng
        first = self.pick_output(known=True)
        second = self.tensor_for(r.choice(EXPR_TYPES), first.shape, True, {first.base})
        inputs = self.pick_inputs({first.base, second.base}, r.randint(0, 2))
        self.prepare_sizes([first, second] + inputs)
        n = self.count(first)
        last = self.define("index", f"sub {n}, {self.index(1)}")
        with self.region("parallel", spmd=True):
            id32, id_ = self.spmd_ids()
            k = self.fresh("k")
            with self.region(f"for {k} = {id_}, {n}, {self.W}", [(k, "index")]):
                self.element_body(first, self.decompose(first, k, wrap=False), inputs, k, False)
            local = first.type.space == "local"
            self.emit(r.choice(("barrier.local", "barrier.global.local")) if local
                      else r.choice(("barrier.global", "barrier.global.local")))
            k2 = self.fresh("k")
            with self.region(f"for {k2} = {id_}, {n}, {self.W}", [(k2, "index")]):
                mirrored = self.define("index", f"sub {last}, {k2}")
                mirror_idx = self.decompose(first, mirrored, wrap=False)
                self.define(first.elem, f"load {first.name}[{', '.join(mirror_idx)}]")
                self.element_body(second, self.decompose(second, k2, wrap=False), [], k2, False)
        self.features.add("barrier")

    def phase_atomic(self) -> None:
        r = self.rng
        elem = r.choice(("i32", "i64"))
        out = self.tensor_for(elem, self.random_shape(r.choice((0, 1, 2))), True, set())
        (src,) = self.pick_inputs({out.base}, 1)
        self.prepare_sizes([out, src])
        n_src, n_out = self.count(src), self.count(out)
        op = r.choice(("atomic_add", "atomic_add", "atomic_max", "atomic_min"))
        with self.region("parallel", spmd=True):
            _, id_ = self.spmd_ids()
            k = self.fresh("k")
            with self.region(f"for {k} = {id_}, {n_src}, {self.W}", [(k, "index")]):
                src_idx = self.decompose(src, k, wrap=False)
                v = self.define(src.elem, f"load {src.name}[{', '.join(src_idx)}]")
                v = self.convert(v, src.elem, elem)
                if r.random() < 0.5:
                    v = self.define(elem, f"add {v}, {self.expr(elem, 1)}")
                j = self.define("index", f"rem {k}, {n_out}")
                target = f"{out.name}[{', '.join(self.decompose(out, j, wrap=False))}]"
                # the old value depends on the order of the work-items: never used
                self.define(elem, f"{op} {v}, {target}", leaf=False)
        self.features.add("atomic")

    def scalar_of(self, ty: str) -> str:
        same = self.visible(ty)
        if same and self.rng.random() < 0.3:
            return self.rng.choice(same)[0]
        if self.rng.random() < 0.2:
            return self.expr(ty, 1)
        return self.random_const(ty)

    def blas_types(self, need_ab: bool) -> Tuple[str, str, str, str, str]:
        r = self.rng
        for _ in range(100):
            tc = r.choice(("f32", "f32", "f64", "c32", "c64", "i32", "i64", "f16", "bf16"))
            cands = [t for t in NUMBER_TYPES if promotable(SCALAR_TYPES[t], SCALAR_TYPES[tc])]
            ta = tc if r.random() < 0.6 else r.choice(cands)
            tb = ta if r.random() < 0.6 or not need_ab else r.choice(cands)
            ab = promote(SCALAR_TYPES[ta], SCALAR_TYPES[tb])
            if ab is None or not promotable(ab, SCALAR_TYPES[tc]):
                continue
            alphas = [t for t in NUMBER_TYPES if promotable(SCALAR_TYPES[t], ab)]
            betas = [t for t in NUMBER_TYPES if promotable(SCALAR_TYPES[t], SCALAR_TYPES[tc])]
            ta_ = r.choice(alphas) if r.random() < 0.3 else ab.name
            tb_ = r.choice(betas) if r.random() < 0.3 else tc
            return ta, tb, tc, ta_, tb_
        return "f32", "f32", "f32", "f32", "f32"

    def phase_blas(self) -> None:
        r = self.rng
        op = r.choice(("gemm", "gemm", "gemv", "ger", "axpby", "axpby", "hadamard", "sum", "cumsum"))
        ta, tb, tc, talpha, tbeta = self.blas_types(op in ("gemm", "gemv", "ger", "hadamard"))
        m, n, k = (r.randint(1, 6) for _ in range(3))
        t1, t2 = r.choice("nt"), r.choice("nt")
        mods = ""
        if op == "gemm":
            a_shape = (m, k) if t1 == "n" else (k, m)
            b_shape = (k, n) if t2 == "n" else (n, k)
            shapes, c_shape, mods = [a_shape, b_shape], (m, n), f".{t1}.{t2}"
        elif op == "gemv":
            shapes, c_shape, mods = [(m, k) if t1 == "n" else (k, m), (k,)], (m,), f".{t1}"
        elif op == "ger":
            shapes, c_shape = [(m,), (n,)], (m, n)
        elif op == "hadamard":
            c_shape = self.random_shape(r.choice((1, 2)))
            shapes = [c_shape, c_shape]
        elif op == "axpby":
            c_shape = self.random_shape(r.choice((0, 1, 2, 2)))
            a_shape = c_shape
            if len(c_shape) == 2 and t1 == "t":
                a_shape = c_shape[::-1]
            shapes, mods = [a_shape], (f".{t1}" if len(c_shape) == 2 else r.choice(("", ".n", ".t")))
        elif op == "sum":
            if r.random() < 0.5:
                shapes, c_shape, mods = [(m, n)], ((m,) if t1 == "n" else (n,)), f".{t1}"
            else:
                shapes, c_shape = [(m,)], ()
        else:  # cumsum
            c_shape = self.random_shape(r.choice((1, 2, 3)))
            shapes = [c_shape]
        out = self.tensor_for(tc, c_shape, True, set())
        elems = [ta, tb][:len(shapes)]
        ins = []
        for e, s in zip(elems, shapes):
            ins.append(self.tensor_for(e, s, False, {out.base}))
        alpha = self.scalar_of(talpha)
        atomic = r.random() < 0.2
        if atomic:
            one = r.choice((0, 1))  # .atomic needs beta = constant 0 or 1
            beta = self.const(tbeta, one if tbeta in INT_TYPES else
                              float(one) if tbeta in FLOAT_TYPES else complex(one, 0))
            mods = ".atomic" + mods
        else:
            beta = self.scalar_of(tbeta)
        operands = [alpha] + [t.name for t in ins]
        if op == "cumsum":
            operands.append(str(r.randrange(len(c_shape))))
        operands += [beta, out.name]
        self.emit(f"{op}{mods} {', '.join(operands)}")
        self.features.add(op)

    def phase_coop(self) -> None:
        r = self.rng
        ta, tc = r.choice((("f16", "f32"), ("bf16", "f32"), ("f32", "f32"), ("i8", "i32"),
                           ("f64", "f64"), ("c32", "c32")))
        kt, nt = r.choice((8, 16)), r.choice((4, 8, 16))
        kblocks = r.choice((1, 1, 2))
        m = r.randint(1, 40)
        out = self.tensor_for(tc, (m, nt), True, set())
        trans_a = r.random() < 0.25
        trans_b = r.random() < 0.25
        A = self.tensor_for(ta, (kt * kblocks, m) if trans_a else (m, kt * kblocks), False, {out.base})
        B = self.tensor_for(ta, (nt, kt * kblocks) if trans_b else (kt * kblocks, nt), False, {out.base})
        checked = m % 16 != 0 or r.random() < 0.2
        mrows = self.size(out, 0)
        tiles = self.define("index", f"div {self.define('index', f'add {mrows}, {self.index(15)}')}, "
                                     f"{self.index(16)}")
        nsx = self.define("i32", "num_subgroups.x")
        nsy = self.define("i32", "num_subgroups.y")
        nsg = self.define("index", f"cast {self.define('i32', f'mul {nsx}, {nsy}')}")
        cta = f"coopmatrix<{ta}x16x{kt},matrix_a>"
        ctb = f"coopmatrix<{ta}x{kt}x{nt},matrix_b>"
        ctc = f"coopmatrix<{tc}x16x{nt},matrix_acc>"
        chk = ".rows_checked" if checked else ""
        scale = self.scalar_of(tc) if r.random() < 0.3 else None
        with self.region("parallel", spmd=True):
            sg = self.define("index", f"cast {self.define('i32', 'subgroup_linear_id')}")
            t = self.fresh("tile")
            with self.region(f"for {t} = {sg}, {tiles}, {nsg}", [(t, "index")]):
                x = self.define("index", f"mul {t}, {self.index(16)}")
                c0 = self.index(0)
                if r.random() < 0.2:
                    init = self.random_const(tc)
                    acc = self.define(ctc, f"cooperative_matrix_construct {init}", leaf=False)
                else:
                    acc = self.define(ctc, f"cooperative_matrix_load{chk} {out.name}[{x}, {c0}]",
                                      leaf=False)
                kk = self.fresh("kk")
                res = self.fresh("acc")
                carried = self.fresh("cacc")
                header = (f"{res} = for {kk} = {c0}, {self.index(kt * kblocks)}, {self.index(kt)} "
                          f"init({carried}={acc}) -> ({ctc})")
                with self.region(header, [(kk, "index")]):
                    if trans_a:
                        ach = ".t.rows_checked" if checked else ".t"
                        a = self.define(cta, f"cooperative_matrix_load{ach} {A.name}[{kk}, {x}]",
                                        leaf=False)
                    else:
                        a = self.define(cta, f"cooperative_matrix_load{chk} {A.name}[{x}, {kk}]",
                                        leaf=False)
                    if trans_b:
                        b = self.define(ctb, f"cooperative_matrix_load.t {B.name}[{c0}, {kk}]",
                                        leaf=False)
                    else:
                        b = self.define(ctb, f"cooperative_matrix_load {B.name}[{kk}, {c0}]", leaf=False)
                    d = self.define(ctc, f"cooperative_matrix_mul_add {a}, {b}, {carried}", leaf=False)
                    self.emit(f"yield ({d})")
                result = res
                if scale is not None:
                    result = self.define(ctc, f"cooperative_matrix_scale {scale}, {result}", leaf=False)
                    self.features.add("coop_scale")
                if r.random() < 0.3:
                    ii, jj, vv = self.fresh("ci"), self.fresh("cj"), self.fresh("cv")
                    name = self.fresh()
                    header = f"{name} = cooperative_matrix_apply ({ii},{jj},{vv})={result} -> {ctc}"
                    with self.region(header,
                                     [(ii, "i32"), (jj, "i32"), (vv, tc)]):
                        self.emit(f"yield ({self.expr(tc, 2)})")
                    result = name
                    self.features.add("coop_apply")
                if r.random() < 0.2 and tc not in COMPLEX_TYPES:
                    result2 = self.define(ctc, f"add {result}, {result}", leaf=False)
                    result = result2
                self.emit(f"cooperative_matrix_store{chk} {result}, {out.name}[{x}, {c0}]")
        self.features.add("coopmatrix")

    def phase_scalars(self) -> None:
        for _ in range(self.rng.randint(1, 3)):
            self.expr(self.rng.choice(EXPR_TYPES), 3)

    def phase_null(self) -> None:
        """A memref argument that may be null, read only when associated."""
        r = self.rng
        elem = r.choice(("f32", "i32"))
        present = r.random() < 0.5
        mtype = MemrefType.get(SCALAR_TYPES[elem], (DYNAMIC,))

        def make(rng, present=present, elem=elem):
            return self.random_values(rng, elem, (3,)) if present else None
        arg = self.add_arg("P", str(mtype), make)
        cond = self.define("bool", f"associated {arg}")
        name = self.fresh()
        with self.region(f"{name} = if {cond} -> ({elem})"):
            v = self.define(elem, f"load {arg}[{self.index(0)}]")
            self.emit(f"yield ({v})")
        with self.else_region():
            self.emit(f"yield ({self.const(elem, -1)})")
        self.scopes[-1].append((name, elem))
        self.features.add("null_memref")

    # ---- the program ---------------------------------------------------------------------
    def build(self) -> GeneratedCase:
        r = self.rng
        self.max_budget = 10**9
        # ids of the work-group (first lines of the body)
        self.out = self.prologue
        self.gid = [self.define("index", "group_id.x", "gid"), self.define("index", "group_id.y", "gid")]
        ngx = self.define("index", "num_groups.x", "ng")
        self.member_index = self.define("index", f"add {self.gid[0]}, "
                                                 f"{self.define('index', f'mul {self.gid[1]}, {ngx}')}")
        # implementation-defined unless the attributes fix them (see __init__)
        fixed = self.wgs_fixed
        nsx = self.define("i32", "num_subgroups.x", leaf=fixed)
        nsy = self.define("i32", "num_subgroups.y", leaf=fixed)
        sgs = self.define("i32", "subgroup_size", leaf=self.sgs_fixed)
        w32 = self.define("i32", f"mul {self.define('i32', f'mul {nsx}, {nsy}', leaf=fixed)}, {sgs}",
                          leaf=fixed)
        self.W = self.define("index", f"cast {w32}", "W", leaf=fixed)
        self.out = self.body
        for _ in range(r.randint(0, 3)):
            self.new_scalar_arg()
        if r.random() < 0.3:
            self.new_input_group()
        phases = ["elementwise"] * 4 + ["blas"] * 3 + ["scalars"] * 2 + ["foreach_tile", "barrier",
                                                                         "atomic", "view", "null"]
        if self.coop:
            phases += ["coop"] * 3
        n_phases = r.randint(2, 5)
        self.max_budget = 60
        if self.coop:
            self.phase_coop()
        for _ in range(n_phases):
            self.budget = 0
            phase = r.choice(phases)
            getattr(self, {"elementwise": "phase_elementwise", "blas": "phase_blas",
                           "scalars": "phase_scalars", "foreach_tile": "phase_foreach_tile",
                           "barrier": "phase_barrier", "atomic": "phase_atomic",
                           "view": "derive_view", "null": "phase_null",
                           "coop": "phase_coop"}[phase])()
        if not any(t.writable for t in self.tensors):
            self.phase_elementwise()
        args = ", ".join(f"{name}: {ty}" for name, ty in self.args)
        attrs = f" attributes {{{self.attrs}}}" if self.attrs else ""
        lines = [f"func @{self.kernel_name}({args}){attrs} {{"] + self.prologue + self.body + ["}"]
        text = "\n".join(lines) + "\n"
        makers, seed = list(self.makers), self.seed

        def make_args() -> list:
            rng = np.random.default_rng(seed)
            return [mk(rng) for mk in makers]
        return GeneratedCase(text, self.kernel_name, make_args, self.grid, self.seed,
                             set(self.features))


def _python_number(ty: str) -> bool:
    """Pass i32/f32/c64 scalars as Python numbers (others as NumPy scalars)."""
    return ty in ("i32", "f64", "c64")


def _runtime_strides(full, base_stride, tstride) -> Tuple[int, ...]:
    """The strides the runtime gives a slice of a packed array (ttlc.runtime.args): the
    array's own strides, except modes of size 1, which take the type's static stride or
    else the packed stride."""
    out, packed = [], 1
    for size, st, want in zip(full, base_stride, tstride):
        got = packed if size == 1 else st
        out.append(want if size == 1 and want is not DYNAMIC else got)
        packed = got * size
    return tuple(out)


def _embeds(have: Tuple[int, ...], want: Tuple[int, ...]) -> Optional[List[int]]:
    """Modes of ``have`` (in order) that can hold ``want``; None if impossible."""
    keep, d = [], 0
    for j, w in enumerate(want):
        while d < len(have) and have[d] < w:
            d += 1
        if d == len(have):
            return None
        keep.append(d)
        d += 1
    return keep


def _coop_supported() -> bool:
    from ..interp.table import SEMANTICS

    return all(op in SEMANTICS for op in ("cooperative_matrix_load", "cooperative_matrix_store",
                                          "cooperative_matrix_mul_add",
                                          "cooperative_matrix_scale", "cooperative_matrix_apply",
                                          "cooperative_matrix_construct"))


def _subgroup_supported() -> bool:
    from ..interp.table import SEMANTICS

    return "subgroup_reduce_add" in SEMANTICS and "subgroup_broadcast" in SEMANTICS


def generate(seed: int, coop: Optional[bool] = None, math: bool = True,
             subgroup_sizes: Sequence[int] = SUBGROUP_SIZES) -> GeneratedCase:
    """A random valid program and its inputs, the same for the same seed.

    ``coop``: include coopmatrix instructions (default: in about 30% of the programs when
    the interpreter implements them).  ``math``: use math functions (sin, exp, ...), whose
    results may differ in the last bits between implementations.  ``subgroup_sizes``: the
    ``subgroup_size`` attributes programs may have (a target's ``subgroup_sizes``, so that
    it accepts them all; it must include 16); the default gives the same programs as
    before the parameter existed."""
    return _Generator(int(seed), coop, math, tuple(subgroup_sizes)).build()


def cases(coop: Optional[bool] = None, math: bool = True):
    """A hypothesis strategy of GeneratedCase (shrinks towards small seeds)."""
    from hypothesis import strategies as st

    return st.integers(min_value=0, max_value=2**32 - 1).map(lambda s: generate(s, coop, math))
