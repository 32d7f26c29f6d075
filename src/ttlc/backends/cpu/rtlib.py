"""The runtime library of generated code, and loading machine code that uses it.

LLVM's x86 back end turns some operations into calls of compiler-rt routines where the
target CPU has no instruction for them: every ``f64 -> f16`` conversion (only AVX512-FP16
has one), ``f32 <-> f16`` without F16C, bfloat16 truncation without AVX512-BF16, 128-bit
division.  A Python process has no compiler-rt, and the JIT resolves a symbol it cannot
find to address 0, so such a call would crash the process.  Therefore:

* every routine LLVM may call that the process lacks is defined here (``ROUTINES``), in
  LLVM IR that needs no routine itself (integer operations at most 64 bits wide for
  division), compiled once per process for the target CPU and registered under its
  compiler-rt name (``install``);
* ``load`` reads the undefined symbols of an object file before it is loaded and refuses
  one that references anything neither defined here nor found in the process (libm,
  libc, libmvec): ``UnresolvedSymbols``, which the module turns into a
  ``ttlc.CompileError``.

It also holds ``LAUNCH``, the entry through which a launch of one chunk calls a kernel
(``module``): its one argument, a launch's buffer, is passed by ``ctypes`` as a pointer
without argument types, which costs a third of a call with the kernel's five typed ones.

The conversions round to nearest even, keep signed zeros, infinities and NaN payloads
(NaNs become quiet), and produce subnormals exactly as IEEE 754 asks; the tests compare
them with NumPy and ml_dtypes bit for bit over every 16-bit input and edge cases of wider
ones.
"""
from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Dict, List, Tuple

import llvmlite.binding as llvm

from . import cache, jit


class UnresolvedSymbols(RuntimeError):
    """Machine code references symbols that nothing in this process defines."""

    def __init__(self, names: List[str]):
        self.names = names
        super().__init__("the machine code calls " + ", ".join(names) +
                         ", which this process does not provide")


# ==== the routines ===========================================================================
@dataclass(frozen=True)
class FloatFormat:
    """An IEEE 754 binary format: its LLVM type, exponent and significand bits."""

    llvm_type: str
    exponent_bits: int
    significand_bits: int  # without the implicit bit

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.significand_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def inf_exponent(self) -> int:
        return (1 << self.exponent_bits) - 1

    @property
    def int_type(self) -> str:
        return f"i{self.width}"


F16 = FloatFormat("half", 5, 10)
BF16 = FloatFormat("bfloat", 8, 7)
F32 = FloatFormat("float", 8, 23)
F64 = FloatFormat("double", 11, 52)

#: compiler-rt's conversion routines: name -> (source, destination)
CONVERSIONS: Dict[str, Tuple[FloatFormat, FloatFormat]] = {
    "__truncsfhf2": (F32, F16),
    "__truncdfhf2": (F64, F16),
    "__truncsfbf2": (F32, BF16),
    "__truncdfbf2": (F64, BF16),
    "__extendhfsf2": (F16, F32),
    "__extendhfdf2": (F16, F64),
    "__extendbfsf2": (BF16, F32),
}

#: compiler-rt's 128-bit division routines: name -> (signed, remainder)
DIVISIONS: Dict[str, Tuple[bool, bool]] = {
    "__udivti3": (False, False),
    "__umodti3": (False, True),
    "__divti3": (True, False),
    "__modti3": (True, True),
}


class _Lines:
    """Straight-line IR with fresh value names."""

    def __init__(self):
        self.lines: List[str] = []
        self.count = 0

    def __call__(self, text: str) -> str:
        self.count += 1
        name = f"%t{self.count}"
        self.lines.append(f"  {name} = {text}")
        return name

    def round_nearest_even(self, t: str, value: str, rest: str, halfway: int) -> str:
        """value + 1 where the dropped bits `rest` are above half, or exactly half and
        value is odd (a carry into the exponent is the right result)."""
        above = self(f"icmp ugt {t} {rest}, {halfway}")
        tie = self(f"icmp eq {t} {rest}, {halfway}")
        odd = self(f"trunc {t} {value} to i1")
        tie_odd = self(f"and i1 {tie}, {odd}")
        up = self(f"or i1 {above}, {tie_odd}")
        return self(f"add {t} {value}, " + self(f"zext i1 {up} to {t}"))


def _truncation(name: str, src: FloatFormat, dst: FloatFormat) -> str:
    """A narrowing conversion with one rounding (compiler-rt's fp_trunc, branch-free)."""
    t, W, Ms, ms = src.int_type, src.width, src.significand_bits, dst.significand_bits
    drop = Ms - ms
    src_inf = src.inf_exponent << Ms
    # source exponents of the smallest normal and of the first overflowing destination value
    underflow = (src.bias - dst.bias + 1) << Ms
    overflow = (src.bias - dst.bias + dst.inf_exponent) << Ms
    halfway = 1 << (drop - 1)
    round_mask = (1 << drop) - 1
    v = _Lines()
    x = v(f"bitcast {src.llvm_type} %a to {t}")
    ab = v(f"and {t} {x}, {(1 << (W - 1)) - 1}")
    # in range: shift the significand, rebias the exponent, round
    normal = v(f"sub {t} " + v(f"lshr {t} {ab}, {drop}") + f", {(src.bias - dst.bias) << ms}")
    normal = v.round_nearest_even(t, normal, v(f"and {t} {ab}, {round_mask}"), halfway)
    # NaN: quiet, the top bits of the payload kept
    payload = v(f"and {t} " + v(f"lshr {t} {ab}, {drop}") + f", {(1 << ms) - 1}")
    nan = v(f"or {t} {payload}, {(dst.inf_exponent << ms) | (1 << (ms - 1))}")
    # below the smallest normal: a subnormal or zero, with a sticky bit for the shifted-out bits
    exponent = v(f"lshr {t} {ab}, {Ms}")
    is_normal_src = v(f"icmp ne {t} {exponent}, 0")
    e = v(f"select i1 {is_normal_src}, {t} {exponent}, {t} 1")
    shift = v(f"sub {t} {src.bias - dst.bias + 1}, {e}")
    # (0 where both formats share the exponent range; beyond Ms + 1 everything rounds to 0)
    shift = v(f"call {t} @llvm.umin.{t}({t} {shift}, {t} {Ms + 1})")
    significand = v(f"or {t} " + v(f"and {t} {x}, {(1 << Ms) - 1}") + ", " +
                    v(f"select i1 {is_normal_src}, {t} {1 << Ms}, {t} 0"))
    lost = v(f"and {t} {significand}, " + v(f"sub {t} " + v(f"shl {t} 1, {shift}") + ", 1"))
    sticky = v(f"zext i1 " + v(f"icmp ne {t} {lost}, 0") + f" to {t}")
    denormal = v(f"or {t} " + v(f"lshr {t} {significand}, {shift}") + f", {sticky}")
    small = v.round_nearest_even(t, v(f"lshr {t} {denormal}, {drop}"),
                                 v(f"and {t} {denormal}, {round_mask}"), halfway)
    # choose
    in_range = v(f"icmp ult {t} " + v(f"sub {t} {ab}, {underflow}") + f", {overflow - underflow}")
    is_nan = v(f"icmp ugt {t} {ab}, {src_inf}")
    too_large = v(f"icmp uge {t} {ab}, {overflow}")
    out = v(f"select i1 {too_large}, {t} {dst.inf_exponent << ms}, {t} {small}")
    out = v(f"select i1 {is_nan}, {t} {nan}, {t} {out}")
    out = v(f"select i1 {in_range}, {t} {normal}, {t} {out}")
    sign = v(f"and {t} {x}, {1 << (W - 1)}")
    sign = v(f"trunc {t} " + v(f"lshr {t} {sign}, {W - dst.width}") + f" to {dst.int_type}")
    out = v(f"or {dst.int_type} " + v(f"trunc {t} {out} to {dst.int_type}") + f", {sign}")
    out = v(f"bitcast {dst.int_type} {out} to {dst.llvm_type}")
    body = "\n".join(v.lines)
    return (f"define {dst.llvm_type} @{name}({src.llvm_type} %a) {{\n{body}\n"
            f"  ret {dst.llvm_type} {out}\n}}\n")


def _extension(name: str, src: FloatFormat, dst: FloatFormat) -> str:
    """A widening conversion (exact; subnormal sources become normal numbers)."""
    s, t, ms, Ms = src.int_type, dst.int_type, src.significand_bits, dst.significand_bits
    grow = Ms - ms
    min_normal, inf = 1 << ms, src.inf_exponent << ms
    v = _Lines()
    x = v(f"bitcast {src.llvm_type} %a to {s}")
    ab = v(f"and {s} {x}, {(1 << (src.width - 1)) - 1}")
    wide = v(f"zext {s} {ab} to {t}")
    out = v(f"shl {t} {wide}, {grow}")
    if dst.exponent_bits > src.exponent_bits:  # else: the same numbers, a longer significand
        normal = v(f"add {t} {out}, {(dst.bias - src.bias) << Ms}")
        special = v(f"or {t} {out}, {dst.inf_exponent << Ms}")
        # subnormal: normalise by the leading zeros beyond those of the smallest normal
        zeros = v(f"call {s} @llvm.ctlz.{s}({s} {ab}, i1 false)")
        scale = v(f"zext {s} " + v(f"sub {s} {zeros}, {src.width - 1 - ms}") + f" to {t}")
        sub = v(f"xor {t} " + v(f"shl {t} {wide}, " + v(f"add {t} {scale}, {grow}")) + f", {1 << Ms}")
        sub_exponent = v(f"sub {t} {dst.bias - src.bias + 1}, {scale}")
        sub = v(f"or {t} {sub}, " + v(f"shl {t} {sub_exponent}, {Ms}"))
        is_normal = v(f"icmp ult {s} " + v(f"sub {s} {ab}, {min_normal}") + f", {inf - min_normal}")
        is_special = v(f"icmp uge {s} {ab}, {inf}")
        is_zero = v(f"icmp eq {s} {ab}, 0")
        out = v(f"select i1 {is_zero}, {t} 0, {t} {sub}")
        out = v(f"select i1 {is_special}, {t} {special}, {t} {out}")
        out = v(f"select i1 {is_normal}, {t} {normal}, {t} {out}")
    sign = v(f"zext {s} " + v(f"and {s} {x}, {1 << (src.width - 1)}") + f" to {t}")
    out = v(f"or {t} {out}, " + v(f"shl {t} {sign}, {dst.width - src.width}"))
    out = v(f"bitcast {t} {out} to {dst.llvm_type}")
    body = "\n".join(v.lines)
    return (f"define {dst.llvm_type} @{name}({src.llvm_type} %a) {{\n{body}\n"
            f"  ret {dst.llvm_type} {out}\n}}\n")


#: unsigned 128-bit division and remainder: 64-bit division where both fit, else one
#: restoring step per quotient bit; a zero divisor gives 0 (callers never divide by zero,
#: and a trap would end the process)
_UDIVMOD = """\
define internal { i128, i128 } @ttlc.udivmod128(i128 %n, i128 %d) {
entry:
  %zero = icmp eq i128 %d, 0
  br i1 %zero, label %done, label %nonzero
nonzero:
  %high = lshr i128 %n, 64
  %dhigh = lshr i128 %d, 64
  %either = or i128 %high, %dhigh
  %small = icmp eq i128 %either, 0
  br i1 %small, label %fast, label %loop
fast:
  %n64 = trunc i128 %n to i64
  %d64 = trunc i128 %d to i64
  %q64 = udiv i64 %n64, %d64
  %r64 = urem i64 %n64, %d64
  %qf = zext i64 %q64 to i128
  %rf = zext i64 %r64 to i128
  br label %done
loop:
  %i = phi i32 [ 127, %nonzero ], [ %i.next, %loop ]
  %q = phi i128 [ 0, %nonzero ], [ %q.next, %loop ]
  %r = phi i128 [ 0, %nonzero ], [ %r.next, %loop ]
  %ii = zext i32 %i to i128
  %nbit = lshr i128 %n, %ii
  %bit = and i128 %nbit, 1
  %rtop = lshr i128 %r, 127
  %carry = icmp ne i128 %rtop, 0
  %r2 = shl i128 %r, 1
  %r3 = or i128 %r2, %bit
  %ge = icmp uge i128 %r3, %d
  %take = or i1 %carry, %ge
  %r4 = sub i128 %r3, %d
  %r.next = select i1 %take, i128 %r4, i128 %r3
  %q2 = shl i128 %q, 1
  %qbit = zext i1 %take to i128
  %q.next = or i128 %q2, %qbit
  %i.next = sub i32 %i, 1
  %more = icmp sge i32 %i.next, 0
  br i1 %more, label %loop, label %done
done:
  %qo = phi i128 [ 0, %entry ], [ %qf, %fast ], [ %q.next, %loop ]
  %ro = phi i128 [ 0, %entry ], [ %rf, %fast ], [ %r.next, %loop ]
  %p = insertvalue { i128, i128 } undef, i128 %qo, 0
  %pq = insertvalue { i128, i128 } %p, i128 %ro, 1
  ret { i128, i128 } %pq
}
"""


def _division(name: str, signed: bool, remainder: bool) -> str:
    """C division of 128-bit integers (truncating; the remainder takes the dividend's sign)."""
    lines = []
    a, b = "%a", "%b"
    if signed:
        lines += ["  %na = sub i128 0, %a", "  %aneg = icmp slt i128 %a, 0",
                  "  %ua = select i1 %aneg, i128 %na, i128 %a",
                  "  %nb = sub i128 0, %b", "  %bneg = icmp slt i128 %b, 0",
                  "  %ub = select i1 %bneg, i128 %nb, i128 %b"]
        a, b = "%ua", "%ub"
    lines.append(f"  %qr = call {{ i128, i128 }} @ttlc.udivmod128(i128 {a}, i128 {b})")
    lines.append(f"  %u = extractvalue {{ i128, i128 }} %qr, {1 if remainder else 0}")
    out = "%u"
    if signed:
        negative = "%aneg" if remainder else "%sdiff"
        if not remainder:
            lines.append("  %sdiff = xor i1 %aneg, %bneg")
        lines += ["  %nu = sub i128 0, %u", f"  %s = select i1 {negative}, i128 %nu, i128 %u"]
        out = "%s"
    body = "\n".join(lines)
    return f"define i128 @{name}(i128 %a, i128 %b) {{\n{body}\n  ret i128 {out}\n}}\n"


#: the launch entry: ``i32 ttlc_launch(i64* block)`` calls the kernel at block[0] with the
#: slots at block + LAUNCH_HEAD (words), work-groups 0 to block[1], the scratch memory at
#: block[2] and the error record after the block[3] slots
LAUNCH = "ttlc_launch"
LAUNCH_HEAD = 4
_LAUNCH = f"""\
define i32 @{LAUNCH}(ptr %block) {{
  %kernel = load ptr, ptr %block
  %p1 = getelementptr i64, ptr %block, i64 1
  %end = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %block, i64 2
  %local = load ptr, ptr %p2
  %p3 = getelementptr i64, ptr %block, i64 3
  %count = load i64, ptr %p3
  %slots = getelementptr i64, ptr %block, i64 {LAUNCH_HEAD}
  %err = getelementptr i64, ptr %slots, i64 %count
  %rc = call i32 %kernel(ptr %slots, i64 0, i64 %end, ptr %local, ptr %err)
  ret i32 %rc
}}
"""


def source() -> str:
    """The runtime library as LLVM IR."""
    parts = [_truncation(n, s, d) if d.width < s.width else _extension(n, s, d)
             for n, (s, d) in CONVERSIONS.items()]
    parts.append(_UDIVMOD)
    parts += [_division(n, *how) for n, how in DIVISIONS.items()]
    parts.append(_LAUNCH)
    return "\n".join(parts)


#: the names the runtime library defines
ROUTINES = tuple(CONVERSIONS) + tuple(DIVISIONS) + (LAUNCH,)


# ==== installing it and checking machine code ==============================================
_LOCK = threading.Lock()
_installed: Dict[str, int] = {}
_keep: list = []


#: the suffix of the runtime library's entry in the disk cache (kernels' entries: ".o")
SUFFIX = ".rtlib"


def object_code() -> bytes:
    """The runtime library compiled for the target CPU: from the disk cache when it holds
    it (compiling it took most of a process's first cache hit), else built and stored."""
    text = source()
    key = cache.key("ttlc runtime library", cache.compiler_version(), jit.versions(), text)
    obj = cache.load("cpu", key, SUFFIX)
    if obj is None:
        obj = jit.emit_object(jit.optimize(jit.parse(text), level=2))
        cache.store("cpu", key, obj, SUFFIX)
    return obj


def install() -> Dict[str, int]:
    """Load the runtime library (once per process) and register its routines with LLVM's
    symbol table: {name: address}."""
    with _LOCK:
        if not _installed:
            obj = object_code()
            missing = [n for n in undefined_symbols(obj) if not llvm.address_of_symbol(n)]
            assert not missing, f"the runtime library itself needs {missing}"
            library = jit.Library(obj)
            for name in ROUTINES:
                address = library.address(name)
                assert address, name
                llvm.add_symbol(name, address)
                _installed[name] = address
            _keep.append(library)
        return dict(_installed)


def undefined_symbols(obj: bytes) -> List[str]:
    """Names an ELF64 object file refers to without defining them."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise ValueError("not a little-endian ELF64 object file")
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        strtab_offset = sections[link][4]
        for k in range(1, size // entsize):  # entry 0 is the null symbol
            st_name, _, _, st_shndx = struct.unpack_from("<IBBH", obj, offset + k * entsize)
            if st_shndx == 0 and st_name:  # SHN_UNDEF
                end = obj.index(b"\0", strtab_offset + st_name)
                names.append(obj[strtab_offset + st_name:end].decode())
    return names


def load(obj: bytes) -> "jit.Library":
    """Machine code loaded for running, once every symbol it references resolves;
    ``UnresolvedSymbols`` otherwise (nothing is loaded)."""
    jit.require_runnable()
    install()
    missing = sorted({n for n in undefined_symbols(obj) if not llvm.address_of_symbol(n)})
    if missing:
        raise UnresolvedSymbols(missing)
    return jit.Library(obj)

