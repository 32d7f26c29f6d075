"""LLVM through llvmlite: the host target machine, the optimisation pipeline and the JIT.

* The target machine is built from the host CPU's name and feature string
  (``llvm.get_host_cpu_name()``/``get_host_cpu_features()``), so AVX-512 (and AVX512-FP16,
  AVX512-BF16, ...) are used where the machine has them.  ``TTLC_CPU`` and
  ``TTLC_CPU_FEATURES`` override both (e.g. to test code for an older machine).
* Optimisation runs LLVM's new pass manager at O3 (``create_pass_builder`` with
  ``PipelineTuningOptions``: loop and SLP vectorisation, unrolling).
* Generated functions carry ``"prefer-vector-width"="512"`` and
  ``"min-legal-vector-width"="512"`` where the machine has AVX-512: the work-items of a
  work-group are SIMD lanes, and without the second attribute LLVM splits 512-bit vectors
  on CPUs tuned for 256-bit code.
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
import threading
from typing import Optional, Tuple

import llvmlite
import llvmlite.binding as llvm

LOCK = threading.RLock()


@functools.lru_cache(maxsize=None)
def _initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@functools.lru_cache(maxsize=None)
def host() -> Tuple[str, str]:
    """(CPU name, LLVM feature string) of the machine code is generated for."""
    _initialize()
    cpu = os.environ.get("TTLC_CPU") or llvm.get_host_cpu_name()
    features = os.environ.get("TTLC_CPU_FEATURES")
    if features is None:
        try:
            features = llvm.get_host_cpu_features().flatten()
        except RuntimeError:  # some platforms cannot report features
            features = ""
    return cpu, features


def has_feature(name: str) -> bool:
    return f"+{name}" in host()[1].split(",")


#: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): Linux asks each process to request
#: the AMX register state before its first tile instruction
_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA = 158, 0x1023, 18


@functools.lru_cache(maxsize=None)
def amx_usable() -> bool:
    """Whether generated code may use AMX-BF16 tiles (``amx.py``): the target CPU has
    them, ``TTLC_AMX=0`` does not disable them, and this process obtained the tile-data
    permission.  Part of the cache key, so a process runs cached AMX code only after
    asking for the permission itself."""
    if os.environ.get("TTLC_AMX", "1") == "0":
        return False
    if not (has_feature("amx-tile") and has_feature("amx-bf16")):
        return False
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def vector_bits() -> int:
    """Width of the widest vector registers the target has (512 with AVX-512)."""
    if has_feature("avx512f"):
        return 512
    if has_feature("avx2") or has_feature("avx"):
        return 256
    return 128


def function_attributes() -> Tuple[str, ...]:
    """String attributes for generated functions (LLVM IR syntax)."""
    bits = vector_bits()
    if bits >= 512:
        return ('"prefer-vector-width"="512"', '"min-legal-vector-width"="512"')
    return ()


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
            f"{features} vector math {sorted(vector_math())} amx {amx_usable()}")


def parse(ir_text: str) -> "llvm.ModuleRef":
    with LOCK:
        _initialize()
        mod = llvm.parse_assembly(ir_text)
        mod.triple = triple()
        mod.data_layout = data_layout()
        mod.verify()
        return mod


def optimize(mod: "llvm.ModuleRef", level: int = 3) -> "llvm.ModuleRef":
    """Run the O3 pipeline of the new pass manager on a module (in place)."""
    with LOCK:
        tm = target_machine()
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
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
