"""Fuzz tests of the front end (lexer, parser, printer, verifier).

Properties, for every input text:

* ``ttlc.check(text)`` returns a program or raises ``ttlc.CompileError``; nothing else
  escapes (no IndexError, KeyError, RecursionError, ...), and the error formats.
* When ``ttlc.parse(text)`` succeeds, printing is a fixed point:
  ``print(parse(print(p))) == print(p)``.
* When ``ttlc.check(text)`` succeeds, the printed text is accepted by ``check`` again.

Inputs come from four generators, all deterministic (derandomized hypothesis):
token soup from the language's vocabulary, syntax-directed random programs built from
the instruction table, mutations of the valid seed programs below, and mutations of the
peer corpus (``../shared/conformance/tinytc-lit``, read in place when it exists).

``fuzz/fuzz_frontend.py`` (``make fuzz``) reuses the seeds, vocabulary, generators and
the property of this file for the long run; both drive the generators through a
``Chooser`` (hypothesis draws here, ``random.Random`` there).
"""
from __future__ import annotations

import math
import os
import random
import re
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttlc
from ttlc.ir import syntax as S
from ttlc.ir.ops import ALIASES, KNOWN_ATTRIBUTE_NAMES, OPS
from ttlc.ir.types import MATRIX_USES, SCALAR_TYPES

# ---- seed programs (all valid) -------------------------------------------------------------
SEEDS: Dict[str, str] = {
    "blas": """\
; collective linear algebra on a batch
func @blas(%alpha: f32, %A: group<memref<f32x64x32>x?>, %B: memref<f32x32x48x?> {alignment=64},
           %beta: f32, %C: memref<f32x64x48x?> {shape_gcd=[16,16], stride_gcd=[1,64]},
           %x: memref<f64x?>, %y: memref<f64x?,strided<2>>, %D: memref<f32x48x32>)
        attributes {subgroup_size=16, work_group_size=[32,2]} {
    %gid = group_id.x : index
    %a = load %A[%gid] : memref<f32x64x32>
    %b = subview %B[0:32,0:48,%gid] : memref<f32x32x48>
    %c = subview %C[0:64,0:48,%gid] : memref<f32x64x48>
    gemm %alpha, %a, %b, %beta, %c
    gemm.n.t %alpha, %a, %D, %beta, %c
    %zero = constant 0.0 : f32
    %one = constant 1.0 : f32
    gemm.atomic %alpha, %a, %b, %one, %c
    %c5 = subview %c[0:64,5] : memref<f32x64>
    %b0 = subview %b[0:32,0] : memref<f32x32>
    gemv %alpha, %a, %b0, %beta, %c5
    %row = subview %c[7,0:48] : memref<f32x48,strided<64>>
    ger %alpha, %c5, %row, %beta, %c
    hadamard %alpha, %c5, %c5, %beta, %c5
    axpby.t %alpha, %D, %beta, %b
    sum %alpha, %a, %beta, %c5
    %s = subview %c[0,0] : memref<f32>
    sum %alpha, %c5, %zero, %s
    cumsum %alpha, %a, 1, %beta, %a
    %n = size %x[0] : index
    %m = size %A[0] : index
    %ok = associated %A : bool
    %twice = constant 2.0 : f64
    axpby %twice, %x, %twice, %y
}
""",
    "spmd": """\
func @spmd(%A: memref<i32x128x?>, %B: memref<f32x128>, %n: index, %flag: bool) {
    parallel {
        %lid = subgroup_local_id : i32
        %sid = subgroup_id.x : i32
        %lin = subgroup_linear_id : i32
        %sgs = subgroup_size : i32
        %nsg = num_subgroups.y : i32
        %i = cast %lid : index
        %c0 = constant 0 : index
        %c1 = constant 1 : index
        %v = load %A[%i, %c0] : i32
        %w = add %v, %lid : i32
        %x = mul %w, %sgs : i32
        %y = shl %x, %sid : i32
        %z = xor %y, %lin : i32
        %neg = neg %z : i32
        %abs = abs %neg : i32
        store %abs, %A[%i, %c0]
        %lt = less_than %v, %w : bool
        %r, %q = for %k = %c0, %n, %c1 init(%acc = %v, %f = %lt) -> (i32, bool) {
            %k32 = cast %k : i32
            %acc2 = add %acc, %k32 : i32
            %f2 = or %f, %flag : bool
            yield (%acc2, %f2)
        }
        %s = if %q -> (f32) {
            %one = constant 1.5 : f32
            yield (%one)
        } else {
            %e = cast %r : f32
            %ex = exp %e : f32
            %ln = native_log2 %ex : f32
            yield (%ln)
        }
        %bc = subgroup_broadcast %s, %lid : f32
        %red = subgroup_reduce_add %bc : f32
        %scan = subgroup_inclusive_scan_max %red : f32
        %esc = subgroup_exclusive_scan_min %v : i32
        store %scan, %B[%i]
        for %t = %c0, %n {
            barrier.global.local
        } attributes {unroll=4}
        if %flag {
            barrier
        }
    }
}
""",
    "coop": """\
func @coop(%A: memref<f16x64x?>, %B: memref<f16x?x32>, %C: memref<f32x64x32>, %K: index)
        attributes {subgroup_size=16} {
    %c0 = constant 0 : index
    %c32 = constant 32 : index
    %c64 = constant 64 : index
    foreach_tile (%i, %j) = (%c0, %c0), (%c64, %c32) as (%si, %sj) <= (32, 16) {
        %zero = constant 0.0 : f32
        %acc0 = cooperative_matrix_construct %zero : coopmatrix<f32x32x16,matrix_acc>
        %c8 = constant 8 : index
        %acc = for %k = %c0, %K, %c8 init(%c = %acc0) -> (coopmatrix<f32x32x16,matrix_acc>) {
            %a = cooperative_matrix_load.rows_checked %A[%i, %k] : coopmatrix<f16x32x8,matrix_a>
            %b = cooperative_matrix_load.t %B[%k, %j] : coopmatrix<f16x8x16,matrix_b>
            %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<f32x32x16,matrix_acc>
            yield (%d)
        }
        %two = constant 2.0 : f32
        %scaled = cooperative_matrix_scale %two, %acc : coopmatrix<f32x32x16,matrix_acc>
        %masked = cooperative_matrix_apply (%r, %q, %v) = %scaled -> coopmatrix<f32x32x16,matrix_acc> {
            %le = less_than_equal %r, %q : bool
            %out = if %le -> (f32) {
                yield (%v)
            } else {
                %z = constant 0.0 : f32
                yield (%z)
            }
            yield (%out)
        }
        %e = cooperative_matrix_extract %masked[3] : f32
        %m2 = cooperative_matrix_insert %e, %masked[0] : coopmatrix<f32x32x16,matrix_acc>
        %rows = cooperative_matrix_reduce_add.row %m2 : coopmatrix<f32x32x1,matrix_acc>
        %cols = cooperative_matrix_reduce_max.column %m2 : coopmatrix<f32x1x16,matrix_acc>
        %sum = add %m2, %masked : coopmatrix<f32x32x16,matrix_acc>
        %h = cast %sum : coopmatrix<f16x32x16,matrix_acc>
        %ha = cast %h : coopmatrix<f16x32x16,matrix_a>
        cooperative_matrix_prefetch 1, %C[%i, %j], 32, 16
        cooperative_matrix_store.both_checked %sum, %C[%i, %j]
        %old = cooperative_matrix_atomic_add %sum, %C[%i, %j] : coopmatrix<f32x32x16,matrix_acc>
        cooperative_matrix_atomic_store.n.rows_checked.device.release %sum, %C[%i, %j]
        %ld = cooperative_matrix_atomic_load.subgroup.acquire %C[%i, %j] : coopmatrix<f32x32x16,matrix_acc>
    }
}
""",
    "misc": """\
func @misc(%A: memref<f64x32x16x8>, %G: group<memref<c32x?>x4, offset: ?>, %p: i64,
           %L: memref<i64x?,strided<?>>) {
    %tmp = alloca {alignment=16} : memref<f32x16x16,local>
    %tmp2 = alloca : memref<i8x64,local>
    %e = expand %A[1->2x8] : memref<f64x32x2x8x8>
    %f = fuse %A[1,2] : memref<f64x32x128>
    %s = size %f[1] : index
    %n4 = constant 4 : index
    %e2 = expand %A[0->%n4 x 8] : memref<f64x?x8x16x8>
    %v = subview %A[4:8,%s:%n4,3] : memref<f64x8x?,strided<1,32>>
    %cb = constant true : bool
    %ci8 = constant -128 : i8
    %ci16 = constant 32767 : i16
    %ci = constant 9223372036854775807 : i64
    %cbf = constant 0.1 : bf16
    %ch = constant 0x1.8p3 : f16
    %cd = constant -1.5e-7 : f64
    %cinf = constant -inf : f32
    %cnan = constant nan : f64
    %cc = constant [1.0, -2.5] : c32
    %cz = constant [0x1p-3, inf] : c64
    %re = re %cc : f32
    %im = im %cz : f64
    %cj = conj %cc : c32
    %ab = abs %cz : f64
    %q = div %cd, %cd : f64
    %rem = rem %p, %p : i64
    %mx = max %p, %ci : i64
    %mn = min %ch, %ch : f16
    %sh = shr %p, %p : i64
    %nt = not %cb : bool
    %sn = sin %cd : f64
    %cs = native_cos %cd : f64
    %l2 = log2 %cd : f64
    %eq = equal %cc, %cc : bool
    %ne = not_equal %p, %ci : bool
    %ge = greater_than_equal %p, %ci : bool
    %gt = greater_than %cd, %cd : bool
    %c1 = constant 1 : index
    parallel {
        %x = atomic_load %L[%c1] : i64
        %y = atomic_add.device.acquire_release %p, %L[%c1] : i64
        %z = atomic_max.cross_device %p, %L[%c1] : i64
        atomic_store.subgroup.sequentially_consistent %p, %L[%c1]
        %m = load %G[%c1] : memref<c32x?>
        %gi = group_id.z : index
        %ng = num_groups.x : index
    }
    lifetime_stop %tmp2
    lifetime_stop %tmp
}

func @empty() {
}
""",
    "spellings": """\
; alternative spellings from the reference's examples, comments and odd layout
func @spellings(%0: i32, %1: f32) attributes {"vendor"="x y", work_group_size=[16,1], "n"=[1,[true,false],{}]} { ; c
  %2 = cmp.lt %0, %0 : bool ; comment
  %3=math.exp %1:f32
  %4 = if %2 -> (i32) { yield (%0) } else { yield (%0) }
  %5 = constant +7 : i32
  %6 = constant .5 : f32
  %7 = constant 5. : f64
  %8 = constant 1e3 : f32
  %9 = constant 0x1.fffffffffffffp+1023 : f64
  %10 = constant false : bool
  %11 = constant 4.94e-324 : f64
  %12 = constant 3 : coopmatrix<i32x16x8,matrix_b>
  parallel {
    %13 = cooperative_matrix_apply (%i,%j,%v) in %12 -> coopmatrix<i32x16x8,matrix_b> { yield (%v) }
  }
  for %i = %0, %5 {}
}
""",
}


def _corpus_dir() -> Optional[Path]:
    env = os.environ.get("TTLC_CONFORMANCE_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "conformance" / "tinytc-lit")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def corpus_texts() -> Dict[str, str]:
    """The peer corpus (.ir files), read in place; empty when it is not there."""
    root = _corpus_dir()
    if root is None:
        return {}
    out = {}
    for path in sorted(root.rglob("*.ir")):
        try:
            out[str(path.relative_to(root))] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return out


# ---- vocabulary ------------------------------------------------------------------------------
SCALARS = tuple(SCALAR_TYPES)
MODIFIER_WORDS = sorted({c for d in OPS.values() for m in d.modifiers for c in m.choices}
                        | {k for a in ALIASES.values() for k in a})
KEYWORDS = sorted(set(OPS) | set(ALIASES) | {
    "func", "attributes", "init", "else", "as", "in", "true", "false", "inf", "nan", "bool",
    "void", "memref", "group", "coopmatrix", "strided", "offset", "global", "local"}
    | set(MATRIX_USES) | set(KNOWN_ATTRIBUTE_NAMES) | set(SCALARS))
PUNCT = ["(", ")", "[", "]", "{", "}", "<", ">", ",", "=", ":", ".", "?", "x", "->", "<=", "+",
         "-", ";", '"', "%", "@", "*", "/", "!", "#", "\\", "'", "`", "|", "&", "^", "~", "$"]
NUMBERS = ["0", "1", "-1", "+1", "2", "3", "4", "7", "8", "16", "32", "64", "-0", "007",
           str(2**31), str(2**63 - 1), str(-(2**63 - 1)), str(2**63), str(-(2**63)), str(2**64),
           "9" * 25, "1" * 5000, "0.0", "-0.0", "1.5", ".5", "5.", "1e3", "1e-3", "1e308", "1e309",
           "-1e400", "1e-400", "4.94e-324", "0x1p-1074", "0x1.8p3", "0x1p1024", "0x.8p1", "0x1.",
           "0xFFp0", "0x", "1e", "1.e5", "0x1p", "inf", "-inf", "+inf", "nan", "-nan", "1.0e+999999",
           "0." + "0" * 400 + "1", "1" * 400 + ".0"]
LOCALS = ["%0", "%1", "%2", "%10", "%a", "%b", "%x", "%i", "%A", "%B", "%C", "%tmp", "%_", "%",
          "%9999999999999999999999", "%a_b1"]
GLOBALS = ["@f", "@main", "@0", "@", "@k_1"]
STRINGS = ['"s"', '""', '"with space"', '"unterminated', '"\x01"', '"tab\t"', '"é"', '"\\"', '"a\nb"']
ODD = ["\0", "\x01", "\x7f", "\t", "\r", "\r\n", "\n", "\x0b", "\x0c", "\u2028", "\u0085", "\ufeff",
       "é", "€", "\U0001f600", "ＡＢＣ", "١٢٣", "\ud7ff", "ß", "İ"]
GOOD_TYPES = list(SCALARS) + [
    "bool", "void", "memref<f32>", "memref<f32x4x4>", "memref<f32x?x?>", "memref<i8x16,local>",
    "memref<f64x4x8,strided<1,?>>", "memref<f32x4x4,strided<4,1>>", "memref<index>",
    "group<memref<f32x4>x?>", "group<memref<f16x8x8>x2, offset: ?>", "coopmatrix<f32x16x8,matrix_acc>",
    "coopmatrix<f16x16x16,matrix_a>", "coopmatrix<i8x8x32,matrix_b>", "coopmatrix<c64x3x5,matrix_a>"]
TYPES = GOOD_TYPES + [
    "memref<", "memref<f32x>", "memref<f32x0>", "memref<f32x-1>", "coopmatrix<f32x0x8,matrix_a>",
    "group<memref<f32>x0>", "memref<f32x" + "9" * 30 + ">", "coopmatrix<f32x16x8,matrix_x>"]
VOCAB = KEYWORDS + MODIFIER_WORDS + PUNCT + NUMBERS + LOCALS + GLOBALS + STRINGS + ODD + TYPES


# ---- the property --------------------------------------------------------------------------
class PropertyViolation(AssertionError):
    """The front end broke a property on some input (not a Python exception escaping)."""


def check_frontend(text: Union[str, bytes]) -> str:
    """Run the front end on one input; returns "accepted", "invalid" (check rejected it
    with diagnostics) or "unparsable".  Any other exception escapes to the caller;
    a broken property raises PropertyViolation."""
    try:
        program = ttlc.parse(text)
    except ttlc.CompileError as e:
        _check_error(e)
        return "unparsable"
    printed = str(program)
    try:
        reparsed = ttlc.parse(printed)
    except ttlc.CompileError as e:
        raise PropertyViolation(f"the printed program does not parse:\n{e}\n--- printed:\n{printed}")
    if str(reparsed) != printed:
        raise PropertyViolation(f"printing is not a fixed point:\n--- print(p):\n{printed}"
                                f"\n--- print(parse(print(p))):\n{reparsed}")
    try:
        ttlc.check(program)
    except ttlc.CompileError as e:
        _check_error(e)
        return "invalid"
    try:
        ttlc.check(reparsed)  # = ttlc.check(printed), without parsing it a third time
    except ttlc.CompileError as e:
        raise PropertyViolation(f"the printed program is rejected:\n{e}\n--- printed:\n{printed}")
    return "accepted"


def _check_error(e: ttlc.CompileError) -> None:
    e.format()  # what the CLI prints; must not raise
    if not e.diagnostics:
        raise PropertyViolation("CompileError without diagnostics")
    for d in e.diagnostics:
        line, col, end, message = d
        if not (isinstance(message, str) and message and line >= 1 and col >= 1):
            raise PropertyViolation(f"malformed diagnostic {tuple(d)!r}")


# ---- choosers: one generator code for hypothesis and for random.Random ----------------------
class Chooser:
    """Source of choices: ``RandomChooser`` for the long run, ``DrawChooser`` in tests."""

    def int(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, seq: Sequence):
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, p: float) -> bool:
        return self.int(0, 999) < p * 1000


class RandomChooser(Chooser):
    def __init__(self, rnd: random.Random):
        self.rnd = rnd

    def int(self, lo, hi):
        return self.rnd.randint(lo, hi)


class DrawChooser(Chooser):
    def __init__(self, data):
        self.data = data

    def int(self, lo, hi):
        return self.data.draw(st.integers(lo, hi))


# ---- generator 1: token soup -----------------------------------------------------------------
def token_soup(c: Chooser) -> str:
    """Random tokens of the language (and some that are not), randomly separated."""
    parts: List[str] = []
    if c.chance(0.5):
        parts.append(c.choice(["func @f(", "func @f() {", "func @f(%a: i32) {", "func", "%0 = "]))
    for _ in range(c.int(0, 40)):
        k = c.int(0, 9)
        if k < 6:
            parts.append(c.choice(VOCAB))
        elif k == 6:
            parts.append(str(c.int(-2**70, 2**70)))
        elif k == 7:
            parts.append(chr(c.int(0, 0x2FF)) if c.chance(0.8) else chr(c.int(0x300, 0x10FFFF)))
        elif k == 8:
            depth = c.int(1, 300)
            open_, close = c.choice([("{", "}"), ("[", "]"), ("(", ")"), ("<", ">"),
                                     ("{ parallel {", "}}"), ('{"a"=', "}")])
            parts.append(open_ * depth + (close * depth if c.chance(0.7) else ""))
        else:
            parts.append(c.choice(ODD))
        parts.append(c.choice(["", " ", " ", "\n", ", ", "\t"]))
    return "".join(parts)


# ---- generator 2: syntax-directed random programs from the instruction table -----------------
class ProgramGen:
    """Random programs, most of which parse: instructions are spelled from the table's
    syntax elements, operands are drawn from the values in scope and types are random, so
    most programs are rejected by the verifier, through all of its checks.  A "sloppy"
    program (one in three) also makes syntax and naming slips now and then."""

    OP_NAMES = sorted(OPS)

    def __init__(self, c: Chooser):
        self.c = c
        self.counter = 0
        self.sloppy = c.chance(0.33)

    def slip(self, p: float) -> bool:
        """Whether to make a deliberate mistake here (only in sloppy programs)."""
        return self.sloppy and self.c.chance(p)

    def fresh(self) -> str:
        self.counter += 1
        return "%" + (str(self.counter) if self.c.chance(0.3) else f"v{self.counter}")

    def program(self) -> str:
        return "\n".join(self.function(i) for i in range(self.c.int(1, 2)))

    def function(self, k: int) -> str:
        c = self.c
        args = []
        scope = []
        for _ in range(c.int(0 if self.sloppy else 1, 5)):
            name = self.fresh()
            text = f"{name}: {self.type()}"
            if c.chance(0.15):
                text += " " + self.dictionary()
            args.append(text)
            scope.append(name)
        head = f"func @f{k}(" + ", ".join(args) + ")"
        if c.chance(0.3):
            head += " attributes " + c.choice(
                ["{subgroup_size=16}", "{subgroup_size=32, work_group_size=[64,2]}",
                 "{work_group_size=[16,1]}", "{subgroup_size=3}", "{subgroup_size=0}",
                 "{subgroup_size=-16}", "{subgroup_size=true}", "{work_group_size=[0,-1]}",
                 '{work_group_size="x", subgroup_size=[16]}'] + [self.dictionary()])
        return head + " " + self.region(scope, 0, 0)

    def region(self, scope: List[str], depth: int, yields: int) -> str:
        c = self.c
        scope = list(scope)
        lines = []
        for _ in range(c.int(0, 8 if depth < 2 else 3)):
            lines.append(self.instruction(scope, depth))
        if yields or c.chance(0.05):
            lines.append("yield (" + ", ".join(self.use(scope) for _ in range(yields)) + ")")
        return "{\n" + "".join("    " * (depth + 1) + ln + "\n" for ln in lines) + "    " * depth + "}"

    def use(self, scope: List[str]) -> str:
        if not scope or self.slip(0.05):
            return self.c.choice(LOCALS)
        return self.c.choice(scope)

    def type(self) -> str:
        c = self.c
        k = c.int(0, 9)
        if k < 4:
            return c.choice(SCALARS)
        if k == 4:
            return c.choice(["bool", "index", "i32", "f32"])
        if k in (5, 6):
            return self.memref()
        if k == 7:
            return f"group<{self.memref()}x{c.choice(['?', '1', '4'])}" + \
                   (f", offset: {c.choice(['?', '0', '3'])}" if c.chance(0.3) else "") + ">"
        if k == 8:
            return (f"coopmatrix<{c.choice(SCALARS)}x{c.choice([1, 2, 8, 16, 32, 3])}"
                    f"x{c.choice([1, 4, 8, 16, 5])},{c.choice(MATRIX_USES)}>")
        return c.choice(TYPES if self.slip(0.5) else GOOD_TYPES)

    def memref(self) -> str:
        c = self.c
        order = c.int(0, 3)
        shape = [c.choice(["?", "1", "2", "4", "8", "16", "32", "64"]) for _ in range(order)]
        text = "memref<" + c.choice(SCALARS) + "".join("x" + s for s in shape)
        if c.chance(0.2):
            if self.slip(0.5):  # anything, overlapping modes included
                strides = [c.choice(["?", "1", "4", "16", "64", "4096"]) for _ in range(order)]
            else:  # a valid layout: each stride at least the previous one times its size
                strides, low = [], 1
                for size in shape:
                    stride = "?" if c.chance(0.25) else str(low * c.choice([1, 1, 2, 3]))
                    strides.append(stride)
                    low = None if stride == "?" or size == "?" or low is None else \
                        int(stride) * int(size)
                    low = low or 1
            text += ",strided<" + ",".join(strides) + ">"
        if c.chance(0.2):
            text += "," + c.choice(["local", "global"])
        return text + ">"

    def integer(self) -> str:
        return str(self.c.choice([0, 1, 2, 3, 4, 8, 16, 32, -1, 7, 64, 2**63 - 1, 100, -16,
                                  -(2**63 - 1), 2**62]))

    def constant(self) -> str:
        c = self.c
        return c.choice(["true", "false", self.integer(), "1.5", "-0.0", "0x1.8p1", "inf", "nan",
                         "1e38", "1e300", "[1.0, 2.0]", "[0.5, -inf]", "65504.0", "70000.0"])

    def attribute(self, depth: int = 0) -> str:
        c = self.c
        k = c.int(0, 5 if depth < 3 else 2)
        if k == 0:
            return self.integer()
        if k == 1:
            return c.choice(["true", "false"])
        if k == 2:
            return c.choice(['"s"', '""', '"x y"'])
        if k in (3, 4):
            return "[" + ",".join(self.attribute(depth + 1) for _ in range(c.int(0, 3))) + "]"
        return self.dictionary(depth + 1)

    def dictionary(self, depth: int = 0) -> str:
        c = self.c
        names = list(KNOWN_ATTRIBUTE_NAMES) + ['"vendor"', '"a"']
        chosen = [c.choice(names) for _ in range(c.int(0, 3))]
        if not self.slip(0.3):
            chosen = list(dict.fromkeys(chosen))  # no duplicate names
        return "{" + ", ".join(f"{name}={self.attribute(depth)}" for name in chosen) + "}"

    def instruction(self, scope: List[str], depth: int) -> str:
        c = self.c
        opcode = c.choice(self.OP_NAMES) if depth < 3 else c.choice(
            [o for o in self.OP_NAMES if not OPS[o].regions])
        opdef = OPS[opcode]
        text = opcode
        for mod in opdef.modifiers:
            if mod.required or c.chance(0.3):
                text += "." + c.choice(mod.choices)
        if self.slip(0.03):
            text += "." + c.choice(MODIFIER_WORDS)
        n = c.int(1, 3)  # length of loop lists
        n_results = c.int(0, 2)
        ctx = {"n": n, "results": n_results, "args": [], "scope": scope, "depth": depth,
               "opcode": opcode}
        body = "".join(self.element(e, ctx) for e in opdef.syntax)
        if body and not body.startswith(" "):
            body = " " + body
        results = []
        if opdef.has_results:
            # for and if return what their optional "-> (types)" says (none without it)
            count = ctx.get("result_count", 0 if opcode in ("for", "if") else 1)
            if self.slip(0.05):
                count = c.int(0, 3)
            results = [self.fresh() for _ in range(count)]
        elif self.slip(0.03):
            results = [self.fresh()]
        scope.extend(results)
        return (", ".join(results) + " = " if results else "") + text + body

    def element(self, e: S.Element, ctx: dict) -> str:
        c = self.c
        scope = ctx["scope"]
        if isinstance(e, S.Optional_):
            if isinstance(e.elements[0], S.Lit) and e.elements[0].text == "init":
                if not ctx["results"]:
                    return ""
            elif len(e.elements) > 1 and isinstance(e.elements[1], S.ResultTypes):
                if not ctx["results"]:
                    return ""
            elif not c.chance(0.5):
                return ""
            return "".join(self.element(x, ctx) for x in e.elements)
        if isinstance(e, S.Lit):
            if e.aliases and c.chance(0.3):
                return " " + c.choice(e.aliases) + " "
            return e.spelling if e.spelling is not None else e.text
        if isinstance(e, S.Opnd):
            return self.use(scope)
        if isinstance(e, S.OpndList):
            k = ctx["n"] if e.slot in ("from", "to") else c.int(0, 3)
            if self.slip(0.05):
                k = c.int(0, 3)
            return ", ".join(self.use(scope) for _ in range(k))
        if isinstance(e, S.Int):
            return self.integer()
        if isinstance(e, S.IntList):
            return ",".join(self.integer() for _ in range(ctx["n"]))
        if isinstance(e, S.Result):
            ctx["result_count"] = 1
            return self.type()
        if isinstance(e, S.ResultTypes):
            ctx["result_count"] = ctx["results"]
            return "(" + ",".join(self.type() for _ in range(ctx["results"])) + ")"
        if isinstance(e, S.Args):
            k = e.count if isinstance(e.count, int) else ctx["n"]
            if self.slip(0.05):
                k = c.int(1, 4)
            names = [self.fresh() for _ in range(k)]
            ctx["args"].extend(names)
            return ",".join(names)
        if isinstance(e, S.InitList):
            pairs = []
            for _ in range(ctx["results"]):
                name = self.fresh()
                ctx["args"].append(name)
                pairs.append(f"{name}={self.use(scope)}")
            return ",".join(pairs)
        if isinstance(e, S.RegionEl):
            inner = scope + (ctx["args"] if e.index == 0 else [])
            if ctx["opcode"] == "cooperative_matrix_apply":
                yields = 1
            else:  # for and if yield their results (when the header declared them)
                yields = ctx["results"] if "result_count" in ctx else 0
            return " " + self.region(inner, ctx["depth"] + 1, yields)
        if isinstance(e, S.DictAttr):
            return self.dictionary()
        if isinstance(e, S.ConstantLiteral):
            return self.constant()
        if isinstance(e, S.Slices):
            entries = []
            for _ in range(c.int(0, 3)):
                x = self.use(scope) if c.chance(0.5) else self.integer()
                if c.chance(0.6):
                    x += ":" + (self.use(scope) if c.chance(0.3) else self.integer())
                entries.append(x)
            return ",".join(entries)
        if isinstance(e, S.ExpandShape):
            return " x ".join(self.use(scope) if c.chance(0.3) else self.integer()
                              for _ in range(c.int(1, 3)))
        raise AssertionError(f"no generator for {e!r}")


def random_program(c: Chooser) -> str:
    return ProgramGen(c).program()


# ---- generator 3: mutations of valid programs ------------------------------------------------
_TOKEN_RE = re.compile(r'\s+|;[^\n]*|[%@][A-Za-z0-9_]+|"[^"\n]*"|->|<=|[A-Za-z0-9_.+-]+|.', re.S)
_NUMBER_RE = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F.]+(?:[pP][+-]?\d+)?|\d*\.?\d+(?:[eE][+-]?\d+)?)$")


def tokens_of(text: str) -> List[str]:
    return _TOKEN_RE.findall(text)


def _mutate_once(c: Chooser, text: str) -> Union[str, bytes]:
    k = c.int(0, 18)
    if k >= 16:  # whole lines: use before definition, redefinition, yields out of place
        lines = text.split("\n")
        i, j = c.int(0, len(lines) - 1), c.int(0, len(lines) - 1)
        if k == 16:
            del lines[i]
        elif k == 17:
            lines.insert(j, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    toks = tokens_of(text)
    if not toks:
        return c.choice(VOCAB)
    i = c.int(0, len(toks) - 1)
    if k == 0:  # delete a token
        del toks[i]
    elif k == 1:  # duplicate a token
        toks.insert(i, toks[i])
    elif k == 2:  # swap two tokens
        j = c.int(0, len(toks) - 1)
        toks[i], toks[j] = toks[j], toks[i]
    elif k == 3:  # replace by a vocabulary token
        toks[i] = c.choice(VOCAB)
    elif k == 4:  # insert a vocabulary token
        toks.insert(i, c.choice(VOCAB) + c.choice(["", " "]))
    elif k == 5:  # another local name that occurs in the program (type confusion, scoping)
        names = [t for t in toks if t.startswith("%")]
        locs = [j for j, t in enumerate(toks) if t.startswith("%")]
        if locs:
            toks[c.choice(locs)] = c.choice(names)
    elif k == 6:  # another type (exercises the verifier's type rules)
        spots = [j for j, t in enumerate(toks) if t in SCALAR_TYPES or t in ("bool",) or
                 t.startswith(tuple(SCALARS))]
        if spots:
            toks[c.choice(spots)] = c.choice(TYPES + list(SCALARS) * 3)
    elif k == 7:  # another number
        spots = [j for j, t in enumerate(toks) if _NUMBER_RE.match(t)]
        if spots:
            toks[c.choice(spots)] = c.choice(NUMBERS)
    elif k == 8:  # another instruction or modifier word
        spots = [j for j, t in enumerate(toks) if t in OPS or t in MODIFIER_WORDS or "." in t]
        if spots:
            j = c.choice(spots)
            toks[j] = c.choice(sorted(OPS)) + ("." + c.choice(MODIFIER_WORDS) if c.chance(0.3) else "")
    else:
        text = "".join(toks)
        n = len(text)
        p = c.int(0, n)
        if k == 9:  # truncate
            return text[:p]
        if k == 10:  # delete a span
            return text[:p] + text[p + c.int(1, 40):]
        if k == 11:  # duplicate a span
            q = min(n, p + c.int(1, 200))
            return text[:q] + text[p:q] + text[q:]
        if k == 12:  # insert a random character
            ch = c.choice(ODD) if c.chance(0.5) else chr(c.int(0, 0x17F))
            return text[:p] + ch + text[p:]
        if k == 13:  # replace a character
            return text[:p] + chr(c.int(32, 126)) + text[p + 1:]
        if k == 14:  # random bytes: invalid UTF-8 most of the time
            raw = bytes(c.int(0, 255) for _ in range(c.int(1, 4)))
            data = text.encode("utf-8")
            p = min(p, len(data))
            return data[:p] + raw + data[p:]
        # wrap the body in deep nesting
        depth = c.int(1, 120)
        brace = text.find("{")
        if brace < 0:
            return text
        return text[:brace + 1] + " parallel {" * depth + "}" * depth + text[brace + 1:]
    return "".join(toks)


def mutate(c: Chooser, text: str, max_steps: int = 4) -> Union[str, bytes]:
    """1 to max_steps random mutations; bytes once a mutation inserted raw bytes."""
    out: Union[str, bytes] = text
    for _ in range(c.int(1, max_steps)):
        if isinstance(out, bytes):
            data = bytearray(out)
            p = c.int(0, len(data))
            data[p:p] = bytes([c.int(0, 255)])
            out = bytes(data)
        else:
            out = _mutate_once(c, out)
    return out


GENERATORS: Dict[str, Callable[[Chooser, Sequence[str]], Union[str, bytes]]] = {
    "soup": lambda c, seeds: token_soup(c),
    "program": lambda c, seeds: random_program(c),
    "mutate": lambda c, seeds: mutate(c, c.choice(seeds)),
}


# ---- tests -----------------------------------------------------------------------------------
FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=list(HealthCheck))


def fuzz(n: int):
    """Deterministic (derandomized) hypothesis settings with n examples."""
    return settings(FUZZ, max_examples=n)

SEED_TEXTS = list(SEEDS.values())
CORPUS = corpus_texts()


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_is_valid_and_prints_to_a_fixed_point(name):
    assert check_frontend(SEEDS[name]) == "accepted"


@pytest.mark.skipif(not CORPUS, reason="peer corpus not found")
def test_corpus_never_crashes():
    outcomes = {name: check_frontend(text) for name, text in CORPUS.items()}
    assert outcomes.get("opt/check-ir/syntax_error0.ir", "unparsable") == "unparsable"
    assert sum(o == "accepted" for o in outcomes.values()) >= len(outcomes) // 2


def run_case(text: Union[str, bytes]) -> str:
    """check_frontend, with the input in the message when an exception escapes."""
    try:
        return check_frontend(text)
    except PropertyViolation as e:
        raise PropertyViolation(f"{e}\n--- input:\n{text!r}") from None
    except Exception as e:
        raise AssertionError(f"{type(e).__name__} escaped from the front end on input:\n"
                             f"{text!r}") from e


#: a random.Random seeded by hypothesis: fast (one draw per input) and deterministic
random_choosers = st.integers(0, 2**64 - 1).map(lambda s: RandomChooser(random.Random(s)))


@fuzz(150)
@given(st.data())
def test_token_soup_shrinkable(data):
    run_case(token_soup(DrawChooser(data)))


@fuzz(1000)
@given(random_choosers)
def test_token_soup(c):
    run_case(token_soup(c))


@fuzz(300)
@given(st.text(max_size=200))
def test_arbitrary_text(text):
    run_case(text)


@fuzz(100)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data):
    run_case(data)


@fuzz(1000)
@given(random_choosers)
def test_random_programs(c):
    run_case(random_program(c))


@fuzz(2000)
@given(random_choosers)
def test_mutated_seeds(c):
    run_case(mutate(c, c.choice(SEED_TEXTS)))


@pytest.mark.skipif(not CORPUS, reason="peer corpus not found")
@fuzz(600)
@given(random_choosers)
def test_mutated_corpus(c):
    run_case(mutate(c, c.choice(sorted(CORPUS.values()))))


def test_random_chooser_sweep():
    """The long-run generators (random.Random), a few hundred inputs with a fixed seed."""
    seeds = SEED_TEXTS + sorted(CORPUS.values())
    for i in range(300):
        c = RandomChooser(random.Random(f"ci:{i}"))
        kind = sorted(GENERATORS)[i % len(GENERATORS)]
        run_case(GENERATORS[kind](c, seeds))


def test_fast_lexer_agrees_with_the_careful_one():
    """The lexer's regex fast path must give exactly the tokens (kinds, texts, values,
    locations) of the character-by-character lexer, and the same errors."""
    from ttlc.parse.lexer import _tokenize_slow, tokenize

    def run(lex, text):
        try:
            return [(t.kind, t.text, t.loc, repr(t.value)) for t in lex(text)]
        except ttlc.CompileError as e:
            return [tuple(d) for d in e.diagnostics]

    texts = SEED_TEXTS + sorted(CORPUS.values()) + VOCAB
    for i in range(600):
        c = RandomChooser(random.Random(f"lexer:{i}"))
        text = (token_soup(c), random_program(c), mutate(c, c.choice(SEED_TEXTS)))[i % 3]
        if isinstance(text, str):
            texts.append(text)
    for text in texts:
        assert run(tokenize, text) == run(_tokenize_slow, text), repr(text)


# ---- regressions: inputs that once broke the front end ----------------------------------------
#: (input, what check must do: "accepted", "invalid", "unparsable", or a message fragment
#: of the diagnostic it must report)
REGRESSIONS = [
    # more loop variables than loop modes: the surplus name was dropped, so the printed
    # program used an undefined value (printing not a fixed point)
    ("func @f(%a: index) { foreach (%i,%j) = (%a), (%a) { %k = add %i, %j : index } }",
     "2 loop variables declared but the loop has 1 mode"),
    # foreach_tile: 3 offsets and 1 size for 2 modes were silently regrouped as 2 + 2
    ("func @f(%a: index) { foreach_tile (%i,%j,%k) = (%a,%a), (%a,%a) as (%s) <= (16,16) { } }",
     "3 loop variables declared but the loop has 2 modes"),
    ("func @f(%a: index) { foreach_tile (%i,%j) = (%a,%a), (%a,%a) as (%s) <= (16,16) { } }",
     "1 tile size declared but the loop has 2 modes"),
    # a fourth region argument of cooperative_matrix_apply was not printed
    ("func @f(%a: coopmatrix<f32x16x8,matrix_acc>) { parallel {\n"
     "  %c = cooperative_matrix_apply (%i,%j,%v,%w) = %a -> coopmatrix<f32x16x8,matrix_acc> {"
     " yield (%w) } } }", "invalid"),
    # integer literals longer than 4300 digits raised ValueError (int() digit limit)
    ("func @f() { %a = constant " + "9" * 5000 + " : i32 }", "integer constant out of range"),
    ("func @f(%a: memref<f32x" + "1" * 5000 + ">) {}", "integer constant out of range"),
    ("func @f() attributes {subgroup_size=-" + "7" * 4400 + "} {}", "integer constant out of range"),
    # float literals far beyond double range
    ("func @f() { %a = constant 1" + "0" * 400 + ".0 : f64 }", "out of the range of double"),
    ("func @f() { %a = constant 0x1p99999999999999999999 : f32 }", "out of the range of double"),
    # deep nesting is a diagnostic, not a RecursionError
    ("func @f() " + "{ parallel " * 150 + "{}" + "}" * 150, "nesting deeper than"),
    ('func @f() attributes {"a"=' + "[" * 3000 + "]" * 3000 + "} {}", "nesting deeper than"),
    # odd characters
    ("func @f() {\0}", "NUL"),
    ("\ufefffunc @f() {}", "U+FEFF"),
    ('func @f() attributes {"\u00e9"=1} {}', "not allowed in a string"),
    ("func @f(%a: f32) { ; comment with \u2028 and \0\n %b = add %a, %a : f32 }", "accepted"),
]


@pytest.mark.parametrize("text, expected", REGRESSIONS)
def test_regression(text, expected):
    outcome = run_case(text)
    if expected in ("accepted", "invalid", "unparsable"):
        assert outcome == expected
    else:
        with pytest.raises(ttlc.CompileError) as info:
            ttlc.check(text)
        assert expected in str(info.value)


def test_parse_and_check_stay_callable():
    """``ttlc.parse`` / ``ttlc.check`` share their names with the subpackages ttlc.parse and
    ttlc.check; importing those once replaced the functions by the modules (the second
    call raised "'module' object is not callable")."""
    import importlib

    for _ in range(3):
        ttlc.check("func @f() {}")
        ttlc.parse("func @f() {}")
    importlib.import_module("ttlc.parse.parser")
    importlib.import_module("ttlc.check.verifier")
    assert callable(ttlc.parse) and callable(ttlc.check)
    assert str(ttlc.check("func @f() {}")) == "func @f() {\n}\n"
