"""LLVM through llvmlite: the host target machine, the optimisation pipeline and the JIT.

* The target machine is built from the host CPU's name and feature string
  (``llvm.get_host_cpu_name()``/``get_host_cpu_features()``), so AVX-512 (and AVX512-FP16,
  AVX512-BF16, ...) are used where the machine has them.  ``TTLC_CPU`` names another CPU
  model instead (``x86-64``, ``x86-64-v2``, ``znver4``, ...: code for an older or other
  machine, with that model's features only); code for a model with features this
  machine lacks can be emitted but not run (``require_runnable``).
* Optimisation runs LLVM's new pass manager at O3 (``create_pass_builder`` with
  ``PipelineTuningOptions``: loop vectorisation, unrolling; SLP vectorisation for the
  runtime library, not for kernels: ``module.optimize``).
* Generated functions carry ``"prefer-vector-width"="512"`` and
  ``"min-legal-vector-width"="512"`` where the machine has AVX-512: the work-items of a
  work-group are SIMD lanes, and without the second attribute LLVM splits 512-bit vectors
  on CPUs tuned for 256-bit code.
* Generated functions also carry ``"stackrealign"``: registers spilled to the stack
  (vectors of 32 or 64 bytes) land in aligned slots, whatever the caller's stack
  alignment.  Without it LLVM, finding the spills only after allocating the frame
  pointer's register, wrote them unaligned: a kernel spilling A's blocks (f64 77x24x5
  in one tile of all rows) ran at 0.70-0.72x of LIBXSMM's speed in five processes of
  six and 1.11x in the sixth; with the stack realigned at 1.10-1.13x in every one.
* Compiled code is an object file (``TargetMachine.emit_object``), loaded into an MCJIT
  execution engine that the module keeps alive as long as it is used.  Object files are
  what the disk cache stores.

Everything here is process-wide and guarded by one lock: LLVM contexts and the pass
builder are not meant to be used from several threads at once.
"""
from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import threading
from dataclasses import dataclass
from typing import Optional, Tuple

import llvmlite
import llvmlite.binding as llvm

LOCK = threading.RLock()


#: LLVM code-generation options (process-wide ``llc`` flags).  The register coalescer
#: stops joining an interval with more than 100 values after this many joins (LLVM's
#: default: 256): generated coopmatrix code is long straight-line code over wide vectors,
#: on which the coalescer's cost grows quadratically where the CPU has few vector registers
#: (AVX2: a c32 16 x 16 x 16 mul_add took 46 s to compile, 8 s with this limit).  The limit
#: changes which copies remain, not what the code computes.  (Not settable from outside:
#: LLVM ends the process on an option it does not know.)  Part of the cache key.
CODEGEN_OPTIONS = ("-large-interval-freq-threshold=10",)


@functools.lru_cache(maxsize=None)
def _initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    for option in CODEGEN_OPTIONS:
        llvm.set_option("ttlc", option)


#: features whose instructions LLVM emits only for their intrinsics, which generated code
#: never calls: a CPU model may list them where a virtual machine's CPU does not report
#: them (e.g. znver3's mwaitx and rdpru), without making its code unrunnable there
_SYSTEM_FEATURES = frozenset("""
    cldemote clflushopt clwb clzero enqcmd fsgsbase hreset invpcid kl lwp monitorx movdir64b
    movdiri mwaitx pconfig pku prefetchi prfchw ptwrite rdpid rdpru rdrnd rdseed rtm serialize
    sgx shstk tsxldtrk uintr usermsr waitpkg wbnoinvd widekl xsave xsavec xsaveopt xsaves
""".split())


@dataclass(frozen=True)
class Machine:
    """The CPU model code is generated for, with the features LLVM gives it."""

    cpu: str
    #: the feature string given to LLVM ("" for a named model: its own features)
    feature_string: str
    #: every feature the model has, as LLVM names them (avx512f, f16c, amx-tile, ...)
    features: frozenset
    #: whether this is the machine the process runs on (not a model named by TTLC_CPU)
    is_host: bool


@functools.lru_cache(maxsize=None)
def host_features() -> frozenset:
    """The features of the CPU this process runs on."""
    _initialize()
    try:
        return frozenset(k for k, v in llvm.get_host_cpu_features().items() if v)
    except RuntimeError:  # some platforms cannot report features
        return frozenset()


@functools.lru_cache(maxsize=None)
def machine() -> Machine:
    """The host CPU, or the model that ``TTLC_CPU`` names (an LLVM CPU name such as
    ``x86-64``, ``x86-64-v3``, ``znver4`` or ``sapphirerapids``; ``host`` is the default).
    ``TTLC_CPU_FEATURES`` adds LLVM feature flags (``-avx512f,+f16c``) to either."""
    _initialize()
    name = os.environ.get("TTLC_CPU", "").strip() or "host"
    extra = os.environ.get("TTLC_CPU_FEATURES", "").strip()
    if name == "host":
        try:
            base = llvm.get_host_cpu_features().flatten()
        except RuntimeError:
            base = ""
        string = ",".join(x for x in (base, extra) if x)
        cpu = llvm.get_host_cpu_name()
        features = host_features() if not extra else model_features(cpu, string)
        return Machine(cpu, string, features, True)
    return Machine(name, extra, model_features(name, extra), False)


class UnknownCPU(ValueError):
    """TTLC_CPU or TTLC_CPU_FEATURES names something LLVM does not know."""


@functools.lru_cache(maxsize=None)
def model_features(cpu: str, feature_string: str = "") -> frozenset:
    """The features LLVM gives a CPU model (plus a feature string).

    LLVM has no query for this, but its inliner has the answer: a function may be inlined
    only into a caller that has all of its features.  For every feature LLVM knows, one
    probe function with that feature added is called from one without it; where the call
    is inlined, the model has the feature.  The feature is added after the feature string
    (LLVM applies the flags in order: before it, a ``-avx512bf16`` there would remove it
    from the probe as well, and the model would seem to have it).  A name LLVM does not
    know is ``UnknownCPU``."""
    known = sorted(llvm.get_host_cpu_features()) if host_features() else []
    extra = f'{feature_string},' if feature_string else ""
    lines, attrs = [], [f'attributes #0 = {{ "target-cpu"="{cpu}" "target-features"="{feature_string}" }}']
    for i, f in enumerate(known):
        lines.append(f"define internal i32 @probe{i}(i32 %x) #{i + 1} {{\n  %y = add i32 %x, 1\n"
                     f"  ret i32 %y\n}}\ndefine i32 @call{i}(i32 %x) #0 {{\n"
                     f"  %y = call i32 @probe{i}(i32 %x)\n  ret i32 %y\n}}")
        attrs.append(f'attributes #{i + 1} = {{ "target-cpu"="{cpu}" "target-features"="{extra}+{f}" }}')
    with LOCK:
        # an unknown name is only a warning here, but a fatal error in the optimiser
        with _stderr_captured() as messages:
            tm = llvm.Target.from_triple(triple()).create_target_machine(
                cpu=cpu, features=feature_string, opt=2)
        if "not a recognized processor" in messages.text:
            raise UnknownCPU(f"TTLC_CPU={cpu!r} is not a CPU model LLVM knows (for example "
                             "x86-64, x86-64-v2, x86-64-v3, x86-64-v4, haswell, skylake-avx512, "
                             "znver4, sapphirerapids)")
        if "not a recognized feature" in messages.text:
            unknown = re.findall(r"'([^']*)' is not a recognized feature", messages.text)
            raise UnknownCPU("TTLC_CPU_FEATURES names features LLVM does not know: " +
                             ", ".join(dict.fromkeys(unknown)))
        mod = llvm.parse_assembly("\n".join(lines + attrs))
        mod.triple = triple()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
        pb.getModulePassManager().run(mod, pb)
        text = str(mod)
    have = set()
    for i, f in enumerate(known):
        body = text.split(f"@call{i}(", 1)[1].split("}", 1)[0]
        if "call " not in body:
            have.add(f)
    return frozenset(have)


class _stderr_captured:
    """What LLVM writes to the process's standard error meanwhile (its warnings about
    unknown CPU and feature names go there, not to an error code)."""

    def __enter__(self):
        import sys
        import tempfile

        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()
        return False


def host() -> Tuple[str, str]:
    """(CPU name, LLVM feature string) of the machine code is generated for."""
    m = machine()
    return m.cpu, m.feature_string


def has_feature(name: str) -> bool:
    return name in machine().features


class UnrunnableCPU(RuntimeError):
    """TTLC_CPU names a model with instructions this machine lacks."""


def missing_features(cpu: str, feature_string: str = "") -> list:
    """The features of a CPU model (plus a feature string) this machine lacks, but for
    the system instructions generated code never uses: none where it can run the code."""
    return sorted(model_features(cpu, feature_string) - host_features() - _SYSTEM_FEATURES)


def require_runnable() -> None:
    """Refuse to run code for a CPU model with features this machine lacks (it would die
    of an illegal instruction); emitting such code is fine."""
    m = machine()
    if m.is_host:
        return
    missing = missing_features(m.cpu, m.feature_string)  # m.features, cached
    if missing:
        raise UnrunnableCPU(f"TTLC_CPU={m.cpu}: this machine ({llvm.get_host_cpu_name()}) cannot "
                            f"run code for {m.cpu}; it lacks {', '.join(missing)}")


#: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): Linux asks each process to request
#: the AMX register state before its first tile instruction
_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA = 158, 0x1023, 18


#: tests set this to True to run the AMX path (``amx.py``) on machines without AMX: its
#: tile instructions are then emulated in plain LLVM IR (``amx_emulation.py``) and
#: ``amx_products.usable`` holds for bf16 and f16 (not a user option: the emulation is slow)
EMULATE_AMX = False


@functools.lru_cache(maxsize=None)
def amx_usable() -> bool:
    """Whether generated code may use AMX tiles (``amx.py``): the target CPU has them
    with AMX-BF16 (which products each 16-bit type has: ``amx_products.usable``), ``TTLC_AMX=0``
    does not disable them, and this process obtained the tile-data permission (or tests
    emulate them, ``EMULATE_AMX``).  Part of the cache key, so a process runs cached AMX
    code only after asking for the permission itself."""
    if os.environ.get("TTLC_AMX", "1") == "0":
        return False
    if EMULATE_AMX:
        return True
    if not (has_feature("amx-tile") and has_feature("amx-bf16")):
        return False
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


#: tests set this to True to run the dot-product path of bf16 mul_add (``dpbf16.py``) on
#: machines without AVX512-BF16: each vdpbf16ps is then emulated in plain LLVM IR with the
#: instruction's exact semantics (not a user option: the emulation is slow)
EMULATE_DPBF16PS = False


def bf16_dot() -> Optional[str]:
    """How bf16 mul_add's dot-product path computes (``dpbf16.py``): "vdpbf16ps" where the
    target has AVX512-BF16 (and AVX512-VL for the instruction's 128- and 256-bit forms,
    which every such CPU has, but ``TTLC_CPU_FEATURES`` may remove), "emulated" where
    tests ask for it (``EMULATE_DPBF16PS``), None where the path is not taken.  Part of
    the cache key."""
    if EMULATE_DPBF16PS:
        return "emulated"
    return "vdpbf16ps" if has_feature("avx512bf16") and has_feature("avx512vl") else None


def vector_bits() -> int:
    """Width of the widest vector registers the target has (512 with AVX-512)."""
    if has_feature("avx512f"):
        return 512
    if has_feature("avx2") or has_feature("avx"):
        return 256
    return 128


def broadcast_operands() -> bool:
    """Whether vector FMAs take a broadcast memory operand (AVX-512's embedded
    broadcast); AVX2 FMAs need the broadcast in a register."""
    return vector_bits() >= 512


def mask_registers() -> bool:
    """Whether masked vector loads and stores take their mask from a mask register
    (AVX-512); AVX2's ``vmaskmov`` takes it from a vector register."""
    return vector_bits() >= 512


def register_bytes() -> int:
    """Bytes of the vector registers a kernel's tiles may take: 32 registers with AVX-512;
    else 16, less one for the broadcast of B's entry of each FMA (AVX-512 FMAs broadcast
    it from memory, AVX2 FMAs need it in a register)."""
    bits = vector_bits()
    return (32 if bits >= 512 else 15) * bits // 8


def function_attributes() -> Tuple[str, ...]:
    """String attributes for generated functions (LLVM IR syntax)."""
    attrs: Tuple[str, ...] = ('"stackrealign"',)
    if vector_bits() >= 512:
        attrs += ('"prefer-vector-width"="512"', '"min-legal-vector-width"="512"')
    return attrs


def new_target_machine() -> "llvm.TargetMachine":
    _initialize()
    cpu, features = host()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True)


@functools.lru_cache(maxsize=None)
def target_machine() -> "llvm.TargetMachine":
    """The target machine for optimising and emitting code (an execution engine takes
    ownership of the one it is given, so each engine gets its own)."""
    return new_target_machine()


#: glibc's vector math library (libmvec): x86 ISA letter, lanes of f32 and f64 per call
_VECTOR_ISA = (("avx512f", "e", 16, 8), ("avx2", "d", 8, 4))
_VECTOR_FUNCTIONS = ("sin", "cos", "exp", "exp2", "log", "log2")


@functools.lru_cache(maxsize=None)
def vector_math() -> dict:
    """{(function, "f32"|"f64"): (symbol, lanes)} of libmvec functions usable here.

    Vector sin/cos/exp/log of the kernels call these (at most 4 ulp from the correctly
    rounded result) instead of one libm call per lane.  Empty when libmvec is missing or
    ``TTLC_VECTOR_MATH=0``."""
    if os.environ.get("TTLC_VECTOR_MATH", "1") == "0":
        return {}
    _initialize()
    try:
        llvm.load_library_permanently("libmvec.so.1")
    except RuntimeError:
        return {}
    for feature, isa, lanes32, lanes64 in _VECTOR_ISA:
        if not has_feature(feature):
            continue
        out = {}
        for fn in _VECTOR_FUNCTIONS:
            for ty, lanes, suffix in (("f32", lanes32, "f"), ("f64", lanes64, "")):
                symbol = f"_ZGV{isa}N{lanes}v_{fn}{suffix}"
                if llvm.address_of_symbol(symbol):
                    out[(fn, ty)] = (symbol, lanes)
        return out
    return {}


def triple() -> str:
    return llvm.get_process_triple()


def data_layout() -> str:
    return str(target_machine().target_data)


def versions() -> str:
    """What the generated code depends on besides the program: for cache keys."""
    cpu, features = host()
    return (f"llvmlite {llvmlite.__version__} llvm {llvm.llvm_version_info} {triple()} {cpu} "
            f"{features} vector math {sorted(vector_math())} amx {amx_usable()} "
            f"{'emulated ' if EMULATE_AMX else ''}"
            f"bf16 dot {bf16_dot()} options {' '.join(CODEGEN_OPTIONS)}")


def parse(ir_text: str) -> "llvm.ModuleRef":
    with LOCK:
        _initialize()
        mod = llvm.parse_assembly(ir_text)
        mod.triple = triple()
        mod.data_layout = data_layout()
        mod.verify()
        return mod


def optimize(mod: "llvm.ModuleRef", level: int = 3, slp: bool = True) -> "llvm.ModuleRef":
    """Run the O3 pipeline of the new pass manager on a module (in place); `slp`: with
    the SLP vectorizer (kernels go without: ``module.optimize``)."""
    with LOCK:
        tm = target_machine()
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pto.loop_vectorization = True
        pto.slp_vectorization = slp
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        mpm = pb.getModulePassManager()
        mpm.run(mod, pb)
        return mod


def emit_object(mod: "llvm.ModuleRef") -> bytes:
    with LOCK:
        return target_machine().emit_object(mod)


def emit_assembly(mod: "llvm.ModuleRef") -> str:
    with LOCK:
        return target_machine().emit_assembly(mod)


class Library:
    """Machine code loaded into an execution engine; alive as long as this object is."""

    def __init__(self, obj: bytes):
        with LOCK:
            _initialize()
            empty = llvm.parse_assembly("")
            empty.triple = triple()
            empty.data_layout = data_layout()
            self._engine = llvm.create_mcjit_compiler(empty, new_target_machine())
            self._object = llvm.ObjectFileRef.from_data(obj)
            self._engine.add_object_file(self._object)
            self._engine.finalize_object()

    def address(self, name: str) -> Optional[int]:
        with LOCK:
            addr = self._engine.get_function_address(name)
        return addr or None
