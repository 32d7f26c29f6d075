"""A seeded generator of kernels that share local memory between work-items, with and
without data races.

``generate_races(seed)`` returns a ``GeneratedCase`` whose kernel passes values between
the work-items of a work-group through one ``alloca``: SPMD phases (``parallel``,
``foreach``) of stores, loads and atomic additions at indices computed from the
work-item id (its own element, a neighbour's, a constant, one shared by two work-items,
the mirror image), with ``barrier``, ``barrier.local`` or nothing between them, and tree
reductions through local memory that are race-free unless one of their barriers is left
out.  Every index is in bounds, so that the only faults a program may have are data
races (and reads of elements nobody wrote, whose values nobody compares): checked interp
and checked cpu must report the same race at the same instruction, or both none
(``differential.compare_races``).
"""
from __future__ import annotations

import random
from typing import List

import numpy as np

from .generator import GeneratedCase

#: how an access picks its element of the N-element buffer from the id k
INDEX_FORMS = ("own", "next", "const", "pair", "mirror")


class _Kernel:
    def __init__(self, seed: int):
        r = self.rng = random.Random(seed)
        self.S = r.choice((4, 8, 16))
        self.wx, self.wy = self.S * r.choice((1, 2)), r.choice((1, 1, 2))
        self.W = self.wx * self.wy
        self.N = self.W // r.choice((1, 2)) if r.random() < 0.7 else 2 * self.W
        self.lines: List[str] = []
        self.count = 0

    def fresh(self, stem: str = "v") -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def define(self, ty: str, rhs: str) -> str:
        name = self.fresh()
        self.emit(f"{name} = {rhs} : {ty}")
        return name

    def index(self, k: str, form: str) -> str:
        """An element of the buffer chosen from k (an index) by ``form``."""
        n = self.define("index", f"constant {self.N}")
        if form == "const":
            return self.define("index", f"constant {self.rng.randrange(self.N)}")
        if form == "next":
            k = self.define("index", f"add {k}, {self.define('index', 'constant 1')}")
        elif form == "pair":
            k = self.define("index", f"div {k}, {self.define('index', 'constant 2')}")
        own = self.define("index", f"rem {k}, {n}")
        if form != "mirror":
            return own
        last = self.define("index", f"constant {self.N - 1}")
        return self.define("index", f"sub {last}, {own}")

    def access(self, k: str, what: str) -> None:
        """One store, load (its value goes to %out) or atomic addition through k."""
        i = self.index(k, self.rng.choice(INDEX_FORMS))
        if what == "store":
            v = self.define("f32", f"cast {k}")
            if self.rng.random() < 0.3:  # by some work-items only
                c = self.define("index", f"constant {self.rng.randrange(1, self.W)}")
                with self.region(f"if {self.define('bool', f'less_than {k}, {c}')}"):
                    self.emit(f"store {v}, %L[{i}]")
            else:
                self.emit(f"store {v}, %L[{i}]")
        elif what == "load":
            v = self.define("f32", f"load %L[{i}]")
            w = self.define("index", f"rem {k}, {self.define('index', f'constant {self.W}')}")
            self.emit(f"store {v}, %out[{w}]")
        else:
            one = self.define("f32", "constant 1.0")
            self.define("f32", f"atomic_add {one}, %L[{i}]")

    def region(self, header: str):
        kernel = self

        class Region:
            def __enter__(self):
                kernel.emit(header + " {")

            def __exit__(self, *exc):
                kernel.emit("}")
        return Region()

    def work_item(self) -> str:
        lid = self.define("i32", "subgroup_local_id")
        sg = self.define("i32", "subgroup_linear_id")
        base = self.define("i32", f"mul {sg}, {self.define('i32', f'constant {self.S}')}")
        return self.define("index", f"cast {self.define('i32', f'add {base}, {lid}')}")

    def phase_parallel(self) -> None:
        r = self.rng
        with self.region("parallel"):
            k = self.work_item()
            for step in range(r.randint(1, 3)):
                if step:
                    fence = r.choice(("", "barrier", "barrier.local", "barrier.local",
                                      "barrier.global.local"))
                    if fence:
                        self.emit(fence)
                self.access(k, r.choice(("store", "store", "load", "atomic")))

    def phase_foreach(self) -> None:
        r = self.rng
        lo = self.define("index", "constant 0")
        hi = self.define("index", f"constant {r.choice((self.W // 2, self.W, 2 * self.W + 3))}")
        i = self.fresh("i")
        with self.region(f"foreach ({i}) = ({lo}), ({hi})"):
            for _ in range(r.randint(1, 2)):
                self.access(i, r.choice(("store", "load", "atomic")))

    def phase_reduce(self) -> None:
        """A tree sum of the first N' elements into element 0, barrier.local between the
        steps (one of them left out now and then: a race)."""
        r = self.rng
        n = min(self.N, self.W)
        forget = r.randrange(n.bit_length() + 1) if r.random() < 0.3 else -1
        with self.region("parallel"):
            k = self.work_item()
            size = self.define("index", f"constant {n}")
            with self.region(f"if {self.define('bool', f'less_than {k}, {size}')}"):
                self.emit(f"store {self.define('f32', f'cast {k}')}, %L[{k}]")
            s, step = n // 2, 0
            while s >= 1:
                if step != forget:
                    self.emit("barrier.local")
                c = self.define("index", f"constant {s}")
                with self.region(f"if {self.define('bool', f'less_than {k}, {c}')}"):
                    a = self.define("f32", f"load %L[{k}]")
                    b = self.define("f32", f"load %L[{self.define('index', f'add {k}, {c}')}]")
                    self.emit(f"store {self.define('f32', f'add {a}, {b}')}, %L[{k}]")
                s, step = s // 2, step + 1

    def build(self, seed: int) -> GeneratedCase:
        r = self.rng
        phases = [r.choice(("parallel", "parallel", "foreach", "reduce"))
                  for _ in range(r.randint(1, 3))]
        for p in phases:
            getattr(self, f"phase_{p}")()
        head = (f"func @races(%out: memref<f32x{self.W}>) attributes "
                f"{{subgroup_size={self.S}, work_group_size=[{self.wx},{self.wy}]}} {{\n"
                f"    %L = alloca : memref<f32x{self.N},local>\n")
        text = head + "\n".join(self.lines) + "\n}\n"
        W = self.W
        return GeneratedCase(text, "races", lambda: [np.zeros(W, np.float32)],
                             (r.choice((1, 2)), 1, 1), seed, set(phases))


def generate_races(seed: int) -> GeneratedCase:
    """A kernel passing values through local memory, maybe with data races (module doc)."""
    return _Kernel(int(seed)).build(int(seed))
