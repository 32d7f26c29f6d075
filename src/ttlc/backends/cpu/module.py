"""Back end "cpu": compile a program to machine code and run work-groups on a thread pool.

``Artifacts`` computes the stages of the registry entry (``ttlc.backends``) on demand:
the program after the "lower" pipeline for the cpu description ("lowered"), LLVM IR
(``codegen``, "llvm"), optimised (O3) LLVM IR ("llvm-opt") and object code ("object").
``CpuModule(program, machine)`` loads the object code -- from the disk cache (``cache``)
when it holds it, without lowering or generating code, else through ``Artifacts``.

A kernel's first call makes its launcher (``CpuModule.launcher``), which holds what does
not depend on the arguments.  A launch checks the arguments with ``ttlc.runtime.args``
(the same checks and errors as every target): NumPy arrays, lists of them for groups,
prepared groups and Python numbers go through ``quick`` (checks specialised to the
kernel's parameters, array layouts decided once each; a ``ttlc.PreparedGroup`` gives the
slots it keeps), anything else and every error through ``marshal``.  The launch's buffer
-- a head for ``rtlib.LAUNCH``, the slot array of the kernel ABI (see ``codegen``), the
error record -- is new per launch and written with one ``struct.pack_into``, so launches
of one kernel from several Python threads at once are independent.  The grid's
work-groups are split into contiguous chunks, one per thread: the calling thread runs
the first chunk (a single chunk is one call of ``rtlib.LAUNCH`` with the buffer), worker
threads waiting in machine code the others (``pool``; a Python thread pool where that
cannot be built).  Kernels are called through ``ctypes.CFUNCTYPE``, which releases the
GIL.  A launch uses as many threads as the process may use CPUs; ``TTLC_NUM_THREADS``
overrides it (read at every launch).

Checked mode (``checked=True``) compiles bounds checks (every index within its mode, group
indices within the group, no access through a null memref), integer division by zero,
``for`` steps that never end, barriers in divergent code, and expand/fuse consistency into
the code; the first error (lowest work-group) is raised as ``ttlc.KernelError``.  Data
races and accesses after ``lifetime_stop`` are only found by target "interp".  Without
checks, an out-of-bounds index is undefined behaviour, as in C.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import json
import os
import struct
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Dict, Optional, Tuple, Union

import numpy as np

from ...diagnostics import CompileError, Diagnostic, KernelError
from ...ir.core import Function, Program
from ...ir.types import BoolType, GroupType
from ...runtime import Module, check_grid
from ...runtime import findings
from ...runtime.findings import kernel_error, race_words
from ...target import Target
from . import abi, cache, jit, pool, rtlib, specialize

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import llvmlite.binding as llvm

_KERNEL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_void_p, ctypes.c_void_p)


def _locations(program: Program) -> str:
    """Where the functions and instructions are in the source: the cached error messages
    point there (programs that print the same may be laid out differently)."""
    out = []
    for f in program.functions:
        out.append(f.loc)
        for inst in f.body.walk():
            out.append(inst.loc)
    return " ".join(f"{x.line}.{x.col}-{x.end_line}.{x.end_col}" for x in out)


def cache_key(program: Program, checked: bool, machine: Target) -> str:
    """The program (text and source locations), the target and options, the machine and
    the compiler versions."""
    from ...version import __version__
    import llvmlite

    return cache.key("ttlc", __version__, cache.compiler_version(), "llvmlite",
                     llvmlite.__version__, f"target {machine.name}", f"checked={checked}",
                     jit.versions(), str(program), _locations(program))


def _machine() -> Target:
    """The target description the registry gives back end cpu."""
    from .. import get_backend

    return get_backend("cpu").target()


def _this_cpu(target: Target) -> Target:
    """target with its register budget cut to the register file of the CPU the code is for
    (``jit.register_bytes``: 16 ymm registers without AVX-512, where tiles chosen for 32
    zmm registers would spill) and, without AVX-512, its vector registers of 32 bytes whose
    FMAs take no broadcast operand and whose masked loads no mask register: subgroups of
    one ymm register of lanes (8 f32, 4 f64), so that gemm's tiles come in rows of one
    register, and tiles chosen register by register (``linalg.tiles``: f32 56 rows as 32 +
    16 + 8 where 16-lane subgroups computed 64)."""
    budget = min(target.register_budget, jit.register_bytes())
    vector = min(target.vector_bytes, jit.vector_bits() // 8)
    broadcast = target.broadcast_operands and jit.broadcast_operands()
    masks = target.mask_registers and jit.mask_registers()
    if (budget, vector, broadcast, masks) == (target.register_budget, target.vector_bytes,
                                              target.broadcast_operands, target.mask_registers):
        return target
    return dataclasses.replace(target, register_budget=budget, vector_bytes=vector,
                               broadcast_operands=broadcast, mask_registers=masks)


def lower(program: Program, checked: bool = False, machine: Optional[Target] = None) -> Program:
    """The program after the target-independent lowering for the CPU (a copy), with the
    sizes every function runs with (``ExecConfig.of``) written into it.

    Checked code keeps instructions whose results are unused (no dead-code elimination):
    an unused load out of bounds is still reported, as the interpreter does."""
    from ...passes import expand, lower_copy

    names = expand(["lower"])
    if checked:  # test shape rules before BLAS instructions become loops, mark the points
        # of user foreach bodies before they become loops; keep dead code
        at = names.index("lower-linalg")
        names[at:at] = ["insert-shape-checks", "insert-iteration-marks"]
        names = [n for n in names if n != "dead-code-elimination"]
    return lower_copy(program, names, description(machine or _machine()))


def description(machine: Target) -> Target:
    """The target description code for machine is lowered for: its registers cut to this
    CPU's (``_this_cpu``) and, unless machine names a matrix or dot-product unit itself,
    this CPU's (``mul_add.matrix_unit``: what the CPU features give, ``jit.versions`` being
    part of the cache key)."""
    machine = _this_cpu(machine)
    if machine.matrix.instructions:
        return machine
    from .mul_add import matrix_unit

    return replace(machine, matrix=matrix_unit())


def _internal(program: Program, what: str, e: BaseException) -> CompileError:
    loc = program.functions[0].loc if program.functions else None
    from ...ir.core import Location

    return CompileError([Diagnostic(loc or Location(1, 1, 1, 1),
                                    f"internal compiler error on target cpu ({what}: "
                                    f"{type(e).__name__}: {e})")], program.source, program.filename)


def _unsupported(program: Program, why: str) -> CompileError:
    """This machine cannot run the program's code (the CPU model, a missing routine)."""
    from ...ir.core import Location

    loc = program.functions[0].loc if program.functions else Location(1, 1, 1, 1)
    return CompileError([Diagnostic(loc, f"target cpu: {why}")], program.source, program.filename)


@contextlib.contextmanager
def collector_paused():
    """Compiling makes many objects that live until it ends (lowered IR, llvmlite's IR):
    the cyclic garbage collector's passes over them free nothing and cost a few percent
    of a compile, so it waits until the compile is done."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def optimize(mod: "llvm.ModuleRef") -> "llvm.ModuleRef":
    """LLVM's O3 on a module of kernels (in place), without the SLP vectorizer: the
    generated code is vectors already.  On 354 kernels (gemms of every type, shape and
    transposition, the examples, the lit tests, the conformance corpus) the vectorizer
    changed the code of 16 and the run time of none measurably (nor of complex gemms,
    whose scalar parts it pairs), and cost up to 64 ms of a cold compile (16-bit gemms
    with A transposed: 64 rows gathered per K step, which it tries and rejects)."""
    return jit.optimize(mod, slp=False)


class Artifacts:
    """Everything compiling a program for the CPU produces (computed on demand, once):
    the stages of the registry entry (``stage``), the kernels' ABI and the cache entry."""

    def __init__(self, program: Program, checked: bool, machine: Optional[Target] = None):
        try:
            jit.machine()  # TTLC_CPU and TTLC_CPU_FEATURES name something LLVM knows
        except jit.UnknownCPU as e:
            raise _unsupported(program, str(e)) from None
        self.program = program
        self.checked = checked
        self.machine = machine or _machine()
        self._lowered = None
        self._generated = None
        self._optimized = None

    def stage(self, name: str) -> Union[str, bytes]:
        """The output of the stage called `name` (``ttlc.backends.BACKENDS["cpu"]``)."""
        if name == "lowered":
            return str(self.lowered)
        if name == "llvm":
            return self.ir
        if name == "llvm-opt":
            return self.optimized_ir()
        if name == "object":
            return self.object_code()
        raise ValueError(f"back end cpu has no stage {name!r}")

    def description(self) -> Target:
        """The target description the program is lowered for (``lower``)."""
        return description(self.machine)

    @property
    def lowered(self) -> Program:
        if self._lowered is None:
            try:
                self._lowered = lower(self.program, self.checked, self.machine)
            except (CompileError, RecursionError):
                raise
            except Exception as e:  # a bug in a pass: never a raw exception from compile()
                raise _internal(self.program, "lowering", e) from e
        return self._lowered

    @property
    def ir(self) -> str:
        """LLVM IR text before optimisation."""
        return self._generate()[0]

    @property
    def kernels(self) -> Dict[str, "abi.KernelInfo"]:
        return self._generate()[1]

    def _generate(self):
        if self._generated is None:
            try:
                from . import codegen  # here: a cache hit needs no code generator

                self._generated = codegen.generate(self.lowered, self.checked)
            except CompileError:
                raise
            except Exception as e:
                raise _internal(self.program, "code generation", e) from e
        return self._generated

    def optimized(self):
        if self._optimized is None:
            try:
                mod = jit.parse(self.ir)
                optimize(mod)
            except RuntimeError as e:
                raise _internal(self.program, "LLVM", e) from e
            self._optimized = mod
        return self._optimized

    def optimized_ir(self) -> str:
        return str(self.optimized())

    def object_code(self) -> bytes:
        return jit.emit_object(self.optimized())

    def load_or_build(self) -> Tuple[bytes, Dict[str, "abi.KernelInfo"], bool]:
        """(object code, kernels, cache hit): from the disk cache when it has them."""
        key = cache_key(self.program, self.checked, self.machine)
        entry = cache.load("cpu", key)
        if entry is not None:
            try:
                size = int.from_bytes(entry[:8], "little")
                meta = json.loads(entry[8:8 + size].decode())
                funcs = {f.name: f for f in self.program.functions}
                kernels = {name: abi.KernelInfo.from_json(d, funcs[name])
                           for name, d in meta.items()}
                if set(kernels) == set(funcs):
                    return entry[8 + size:], kernels, True
            except (ValueError, KeyError, TypeError, IndexError):
                pass  # not an entry of this format: rebuild it
        with collector_paused():
            obj = self.object_code()
        meta = json.dumps({name: k.to_json() for name, k in self.kernels.items()}).encode()
        cache.store("cpu", key, len(meta).to_bytes(8, "little") + meta + obj)
        return obj, self.kernels, False


#: where CPython keeps the environment (``os.environ._data``, keys and values encoded) and
#: TTLC_NUM_THREADS' key there: read directly, the variable costs a dictionary lookup per
#: launch, where ``os.environ.get`` took 0.9 us (1.2 us unset: a KeyError raised and caught),
#: 2% of a launch of 64 small GEMMs
_ENVIRON = getattr(os.environ, "_data", None)
_THREADS_KEY = (os.environ.encodekey("TTLC_NUM_THREADS")
                if _ENVIRON is not None and hasattr(os.environ, "encodekey") else None)


def num_threads() -> int:
    """Threads a launch may use: TTLC_NUM_THREADS (read at every launch), else the CPUs
    this process may run on (read once)."""
    global _LAST_THREADS
    raw = (_ENVIRON.get(_THREADS_KEY) if _THREADS_KEY is not None
           else os.environ.get("TTLC_NUM_THREADS"))
    if raw is None:
        return _usable_cpus()
    if raw != _LAST_THREADS[0]:
        _LAST_THREADS = (raw, _threads_from(raw))
    return _LAST_THREADS[1]


#: the last value of TTLC_NUM_THREADS read and its thread count
_LAST_THREADS: Tuple[object, int] = (None, 0)


def _threads_from(value) -> int:
    """The thread count TTLC_NUM_THREADS=value asks for (as kept in the environment,
    perhaps encoded; empty: the usable CPUs)."""
    text = (os.environ.decodevalue(value) if isinstance(value, bytes) else value).strip()
    if text:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"TTLC_NUM_THREADS must be a positive integer, not {text!r}") from None
        if n < 1:
            raise ValueError(f"TTLC_NUM_THREADS must be a positive integer, not {text!r}")
        return n
    return _usable_cpus()


@functools.lru_cache(maxsize=None)
def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_POOL: Optional["ThreadPoolExecutor"] = None
_POOL_SIZE = 0
_POOL_LOCK = threading.Lock()


def _pool(workers: int) -> "ThreadPoolExecutor":
    """The shared pool, grown to `workers` threads (imported on first use: 10 ms)."""
    from concurrent.futures import ThreadPoolExecutor

    global _POOL, _POOL_SIZE
    with _POOL_LOCK:
        if _POOL is None or _POOL_SIZE < workers:
            old = _POOL
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ttlc-cpu")
            _POOL_SIZE = workers
            if old is not None:
                old.shutdown(wait=False)
        return _POOL


_SCRATCH = threading.local()


def _thread_scratch(local_bytes: int) -> int:
    """64-byte aligned scratch memory of at least `local_bytes` for a launch of one chunk on
    this thread, kept for the next one (as ``NativePool`` keeps its chunks'): a buffer made
    per launch cost about 3 us of a D = A B C chain's 70-90 us batch."""
    buf = getattr(_SCRATCH, "buffer", None)
    if buf is None or len(buf) < local_bytes + 64:
        buf = _SCRATCH.buffer = ctypes.create_string_buffer(local_bytes + 64)
    return (ctypes.addressof(buf) + 63) // 64 * 64


def _run_in_python(fn, address: int, total: int, chunks: int, local_bytes: int,
                   first_error: int, threaded: bool) -> list:
    """The chunks of a launch without the native pool (``pool``): on a Python thread pool
    when `threaded` (no native pool here), else one after the other on this thread (the
    native pool is busy with a launch from another thread).  Failures as
    ``NativePool.run`` gives them."""
    scratch = [ctypes.create_string_buffer(local_bytes + 64) for _ in range(chunks)
               if local_bytes]
    records = [None] + [(ctypes.c_int64 * findings.ERR_SLOTS)() for _ in range(1, chunks)]

    def run(k: int) -> int:
        local = (ctypes.addressof(scratch[k]) + 63) // 64 * 64 if scratch else 0
        err = first_error if k == 0 else ctypes.addressof(records[k])
        return fn(address, total * k // chunks, total * (k + 1) // chunks, local, err)

    if threaded and chunks > 1:
        workers = _pool(chunks - 1)
        futures = [workers.submit(run, k) for k in range(1, chunks)]
        rcs = [run(0)] + [f.result() for f in futures]
    else:
        rcs = [run(k) for k in range(chunks)]
    return [(k, None if k == 0 else records[k][:]) for k, rc in enumerate(rcs) if rc][:1]


#: struct codes of the scalars ``runtime.args.quick`` gives, each padded to its 8-byte slot
_SLOT_FORMAT = {"bool": "?7x", "i8": "b7x", "i16": "h6x", "i32": "i4x", "i64": "q", "index": "q",
                "f16": "e6x", "bf16": "H6x", "f32": "f4x", "f64": "d", "c32": "ff", "c64": "dd"}


#: the head of a launch's buffer, before its slots (``rtlib.LAUNCH``): the kernel's address,
#: the number of work-groups, the scratch memory, the slot count
_HEAD = struct.Struct(f"<{rtlib.LAUNCH_HEAD}q")
#: ``rtlib.LAUNCH``'s type: no argument types, so that ``ctypes`` passes a launch's buffer
#: (a ctypes array) as a pointer without converting it
_LAUNCH_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32)


class _Plan:
    """What a launch of one kernel needs besides its arguments: the type of its buffer
    (``_HEAD``, the slots, then the error record of the first chunk), the quick argument
    checks (``runtime.args.quick``, None when some parameter has none; they refuse
    read-only arrays for the arguments the kernel writes) and the ``struct`` layout that
    writes the head, the grid and their results into the buffer."""

    def __init__(self, func: Function, info: "abi.KernelInfo"):
        from ...runtime.args import quick

        self.buffer = ctypes.c_int64 * (rtlib.LAUNCH_HEAD + info.num_slots + findings.ERR_SLOTS)
        self.quick = quick(func.args, info.writes)
        if self.quick is not None:
            fmt = [_HEAD.format, "3q"]
            for a, lay in zip(func.args, info.slots):
                t = a.value.type
                fmt.append("q" * lay.count if lay.kind != "scalar" else
                           _SLOT_FORMAT["bool" if isinstance(t, BoolType) else t.name])
            self.struct = struct.Struct("".join(fmt))
            assert self.struct.size == _HEAD.size + 8 * info.num_slots, (fmt, info.num_slots)


class CpuModule(Module):
    target = "cpu"

    def __init__(self, program: Program, machine: Optional[Target] = None, checked: bool = False):
        machine = machine or _machine()
        super().__init__(program, checked, machine.max_grid)
        self.artifacts = Artifacts(program, checked, machine)
        obj, self.infos, self.cache_hit = self.artifacts.load_or_build()
        try:
            self._library = rtlib.load(obj)
        except (rtlib.UnresolvedSymbols, jit.UnrunnableCPU) as e:
            raise _unsupported(program, str(e)) from None
        except RuntimeError as e:
            raise _internal(program, "loading machine code", e) from e
        self._functions, self._addresses = {}, {}
        for name, info in self.infos.items():
            addr = self._library.address(info.symbol)
            if addr is None:
                raise _internal(program, "loading machine code", LookupError(info.symbol))
            self._functions[name] = _KERNEL_TYPE(addr)
            self._addresses[name] = addr
        self._plans: Dict[str, _Plan] = {}
        #: whether launches may run copies compiled for their arrays (``specialize``; a
        #: copy's own module does not)
        self.specializes = not checked

    # ---- launch ----------------------------------------------------------------------------
    def _plan(self, func: Function) -> "_Plan":
        plan = self._plans.get(func.name)
        if plan is None:
            plan = self._plans[func.name] = _Plan(func, self.infos[func.name])
        return plan

    def launcher(self, kernel):
        """A call of `kernel`, made for it once: what does not depend on the arguments is
        looked up here, and the last grid given is kept with its check (the same tuple
        object again, as a literal or the default grid, is not checked again).  A launch
        of one chunk is one call of ``rtlib.LAUNCH``.  A kernel with dynamic sizes runs
        copies compiled for the arrays of its launches (``specialize``)."""
        func = kernel.func
        name = func.name
        info = self.infos[name]
        plan = self._plan(func)
        quick, make_buffer, max_grid = plan.quick, plan.buffer, self.max_grid
        pack = None if quick is None else plan.struct.pack_into
        address, slots, local_bytes = self._addresses[name], info.num_slots, info.local_bytes
        error = rtlib.LAUNCH_HEAD + slots  # where the error record starts in the buffer
        entry = _LAUNCH_TYPE(rtlib.install()[rtlib.LAUNCH])
        # (the last tuple given as the grid, check_grid's answer, its work-groups); only a
        # tuple is remembered: a list may have changed since
        seen = (None, None, 0)

        def launch(args, grid) -> None:
            nonlocal seen
            given, checked, total = seen
            if grid is not given or type(grid) is not tuple:
                checked = check_grid(grid, max_grid)
                total = checked[0] * checked[1] * checked[2]
                seen = (grid, checked, total)
            chunks = 1 if total == 1 else min(num_threads(), total, pool.MAX_CHUNKS)
            local = _thread_scratch(local_bytes) if local_bytes and chunks == 1 else 0
            # one buffer per launch: the head, the slots, then the error record of the
            # calling thread's chunk (launches from several Python threads share nothing)
            buf = make_buffer()
            keep: list = []
            flat = None if quick is None else quick(args, keep)
            if flat is not None:
                pack(buf, 0, address, total, local, slots, *checked, *flat)
            else:  # everything else, and every error, goes through marshal
                keep = self._marshal_and_pack(info, func, args, checked, buf)
                _HEAD.pack_into(buf, 0, address, total, local, slots)
            if chunks == 1:  # the common small launch: a single call on this thread
                if entry(buf):
                    raise self._error(info, buf[error:])
            else:
                self._run_chunks(info, name, buf, total, chunks)
            del keep  # the views and arrays the slots point to, alive until here

        copies = specialize.Specializer.of(self, func)
        if copies is None:
            return launch

        def launch_specialized(args, grid) -> None:
            (copies.launcher(args) or launch)(args, grid)
        launch_specialized.copies = copies  # (what tests and tools inspect)
        return launch_specialized

    def launch(self, kernel, args, grid) -> None:
        kernel(*args, grid=grid)  # (through the kernel's launcher)

    def _marshal_and_pack(self, info, func: Function, args, grid, buf) -> list:
        """Check and convert the arguments with ``marshal``, write the slots into the
        launch's buffer `buf`; what the slots point to (to keep until the kernel ends)."""
        from ...runtime.values import Memory
        from ...runtime.args import marshal

        memory = Memory()
        values = marshal(args, func.args, memory, func.name)
        keep: list = [memory]
        slots = (ctypes.c_int64 * info.num_slots).from_buffer(buf, _HEAD.size)
        self._pack(info, func, values, memory, grid, keep, slots)
        self._check_writable(info, func, values, memory)
        return keep

    def _run_chunks(self, info, func_name: str, buf, total: int, chunks: int) -> None:
        """Run work-groups 0..total-1 in `chunks` contiguous chunks, the first on this
        thread and the others on worker threads (`buf`: the launch's buffer)."""
        address = ctypes.addressof(buf) + _HEAD.size
        error = rtlib.LAUNCH_HEAD + info.num_slots
        first_error = address + 8 * info.num_slots
        native = pool.NativePool.create()
        failures = (native.run(self._addresses[func_name], address, total, chunks,
                               info.local_bytes, first_error) if native is not None else None)
        if failures is None:  # no native pool, or another launch uses it
            failures = _run_in_python(self._functions[func_name], address, total, chunks,
                                      info.local_bytes, first_error, threaded=native is None)
        for k, record in failures:  # chunks are in group order: the first error is the lowest
            raise self._error(info, buf[error:] if record is None else record)

    def _pack(self, info, func: Function, values, memory, grid, keep: list, slots) -> None:
        """Fill the slot array of the kernel ABI (`keep` holds what it points to)."""
        from ...runtime.args import group_tables, memref_address

        slots[0], slots[1], slots[2] = grid
        for a, lay, v in zip(func.args, info.slots, values):
            k = lay.first
            if lay.kind == "memref":
                n = len(v.shape)
                slots[k] = memref_address(v, memory)
                for i in range(n):
                    slots[k + 1 + i] = int(v.shape[i])
                    slots[k + 1 + n + i] = int(v.stride[i])
            elif lay.kind == "group":
                ptrs, dopes = group_tables(v.members, memory, a.value.type.memref.order)
                keep += [ptrs, dopes]
                if v.associated:
                    slots[k] = ptrs.__array_interface__["data"][0]
                    slots[k + 1] = dopes.__array_interface__["data"][0]
                slots[k + 2] = len(v.members)
                slots[k + 3] = 1 if v.associated else 0
            else:
                data = np.asarray(v).tobytes().ljust(8 * lay.count, b"\0")
                for i in range(lay.count):
                    slots[k + i] = int.from_bytes(data[8 * i:8 * i + 8], "little", signed=True)

    def _check_writable(self, info, func: Function, values, memory) -> None:
        """A kernel that writes an argument needs writeable arrays (checked before running)."""
        for index, inst in info.writes.items():
            v = values[index]
            group = isinstance(func.args[index].value.type, GroupType)
            for i, m in enumerate(v.members if group else [v]):
                if int(m.buffer) >= 0 and not memory.buffers[int(m.buffer)].flags.writeable:
                    where = f"{self.program.filename}:{inst.loc}"
                    member = f", member {i}" if group else ""
                    raise KernelError(f"{where}: kernel @{func.name}: write to a read-only array "
                                      f"(argument {index}, %{func.args[index].value.name}{member}, "
                                      "is not writeable)")

    def _error(self, info, err) -> KernelError:
        return kernel_error(self.program.filename, info.name, err, info.instructions,
                            info.config.work_group_size, [name for *_, name in info.locals],
                            lambda d: race_words(d, info.locals, info.instructions,
                                                 info.config.work_group_size,
                                                 info.config.subgroup_size))


# ---- the registry's entry points (``ttlc.backends``) ---------------------------------------------
def compile(program: Program, machine: Target, checked: bool) -> CpuModule:
    return CpuModule(program, machine, checked)


def emit(program: Program, stage: str, machine: Target, checked: bool) -> Union[str, bytes]:
    return Artifacts(program, checked, machine).stage(stage)
