"""Run the chunks of a launch on worker threads that wait in native code.

A Python thread pool costs tens of microseconds per launch (waking a worker, handing the
GIL over, waking the caller again), as much as the whole work of a batch that fits in the
caches.  Here the workers are Python threads that live inside one call into machine code
for their whole life (``ctypes`` releases the GIL), and a launch is one call,
``ttlc_parallel``, that publishes the job, runs chunk 0 on the calling thread and waits for
the others -- no Python runs between the publication of a job and its end.

Waiting spins (``pause``, and after ``YIELD_CYCLES`` also ``sched_yield``) for about
``SPIN_CYCLES`` time-stamp-counter ticks and then sleeps on a futex (looking again every
``NAP_NANOSECONDS`` in any case), so launches in a row cost a few microseconds to hand
out while an idle pool uses next to no CPU.  The code is a small LLVM module built once
per process (Linux on x86_64 and aarch64: the futex system call number is per
architecture); where it cannot be built, ``NativePool.create`` returns None and the
caller uses a Python pool.

The state is one 64-byte-aligned block of memory::

    offset  64: i32 pending          chunks handed to workers and not finished yet
    offset  68: i32 caller_sleeping  the launching thread sleeps on `pending`
    offset 132: i32 quit             workers return when they next wake
    offset 192: job: i64 kernel, args, total, chunks, locals (ptr[]), errors (ptr[]),
                rcs (i32[])
    offset 256 + 64 w: worker w's i32 ticket (bumped to give it chunk w+1 of the job) and
                i32 sleeping (it sleeps on its ticket)

Only the workers a job needs are woken, and the caller writes the next job only after
all of them finished, so a worker never reads a job while it is being written.  Chunk k
covers work-groups [total*k/chunks, total*(k+1)/chunks).  Kernel calls follow the ABI of
``abi`` (``i32 (args, first, end, local, err)``); chunk k's return code lands in
``rcs[k]``.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import platform
import threading
from typing import List, Optional, Tuple

from ...runtime import findings
from . import jit, rtlib

#: how long a thread spins before it sleeps (time-stamp-counter ticks, ~50-100 us)
SPIN_CYCLES = 200_000
#: after this many ticks of spinning, each turn also yields the CPU: the thread waited
#: for may have been woken on this thread's CPU (the scheduler puts woken threads next to
#: their waker), and would otherwise wait for the whole spin
YIELD_CYCLES = 4_000

#: a sleeping thread looks at what it waits for at least this often (nanoseconds): a
#: missed wake-up costs this much time, never a hang
NAP_NANOSECONDS = 50_000_000

#: system call numbers: SYS_futex, SYS_sched_yield
_SYSCALLS = {"x86_64": (202, 24), "aarch64": (98, 124)}
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
#: the most chunks a launch is split into (one worker thread each, but the first)
MAX_CHUNKS = 256
_STATE_BYTES = 256 + 64 * MAX_CHUNKS

_IR = r"""
declare i64 @syscall(i64, ...)

; the longest a futex sleep lasts before the sleeper looks again (struct timespec)
@nap = private constant { i64, i64 } { i64 0, i64 NAP_NANOSECONDS }
declare i64 @llvm.readcyclecounter()
PAUSE_DECLARATION

define private i32* @field(i8* %s, i64 %offset) alwaysinline {
  %p = getelementptr i8, i8* %s, i64 %offset
  %q = bitcast i8* %p to i32*
  ret i32* %q
}

define private i32* @ticket(i8* %s, i64 %w) alwaysinline {
  %o = mul i64 %w, 64
  %o2 = add i64 %o, 256
  %p = getelementptr i8, i8* %s, i64 %o2
  %q = bitcast i8* %p to i32*
  ret i32* %q
}

define private i64* @job(i8* %s, i64 %index) alwaysinline {
  %p = getelementptr i8, i8* %s, i64 192
  %q = bitcast i8* %p to i64*
  %r = getelementptr i64, i64* %q, i64 %index
  ret i64* %r
}

; wait until *%word != %seen: spin for SPIN_CYCLES ticks, then sleep on the futex while
; counting ourselves in *%sleepers
define private void @wait_change(i32* %word, i32 %seen, i32* %sleepers) {
entry:
  %t0 = call i64 @llvm.readcyclecounter()
  br label %spin
spin:
  %v = load atomic i32, i32* %word acquire, align 4
  %changed = icmp ne i32 %v, %seen
  br i1 %changed, label %done, label %again
again:
  PAUSE
  %t = call i64 @llvm.readcyclecounter()
  %dt = sub i64 %t, %t0
  %long = icmp ugt i64 %dt, SPIN_CYCLES
  br i1 %long, label %sleep, label %polite
polite:
  %yield = icmp ugt i64 %dt, YIELD_CYCLES
  br i1 %yield, label %yielding, label %spin
yielding:
  %y = call i64 (i64, ...) @syscall(i64 SCHED_YIELD)
  br label %spin
sleep:
  %old = atomicrmw add i32* %sleepers, i32 1 seq_cst
  %w = load atomic i32, i32* %word seq_cst, align 4
  %still = icmp eq i32 %w, %seen
  br i1 %still, label %futex, label %awake
futex:
  %addr = ptrtoint i32* %word to i64
  %seen64 = zext i32 %seen to i64
  %limit = ptrtoint { i64, i64 }* @nap to i64
  %r = call i64 (i64, ...) @syscall(i64 FUTEX, i64 %addr, i64 FUTEX_WAIT, i64 %seen64, i64 %limit)
  br label %awake
awake:
  %old2 = atomicrmw sub i32* %sleepers, i32 1 seq_cst
  %w2 = load atomic i32, i32* %word acquire, align 4
  %changed2 = icmp ne i32 %w2, %seen
  br i1 %changed2, label %done, label %sleep
done:
  ret void
}

define private void @wake(i32* %word, i32* %sleepers) {
entry:
  %n = load atomic i32, i32* %sleepers seq_cst, align 4
  %any = icmp ne i32 %n, 0
  br i1 %any, label %call, label %done
call:
  %addr = ptrtoint i32* %word to i64
  %r = call i64 (i64, ...) @syscall(i64 FUTEX, i64 %addr, i64 FUTEX_WAKE, i64 2147483647)
  br label %done
done:
  ret void
}

define private void @run_chunk(i8* %s, i64 %k) {
entry:
  %fp = call i64* @job(i8* %s, i64 0)
  %f = load i64, i64* %fp
  %fn = inttoptr i64 %f to i32 (i8*, i64, i64, i8*, i8*)*
  %ap = call i64* @job(i8* %s, i64 1)
  %a = load i64, i64* %ap
  %args = inttoptr i64 %a to i8*
  %tp = call i64* @job(i8* %s, i64 2)
  %total = load i64, i64* %tp
  %np = call i64* @job(i8* %s, i64 3)
  %n = load i64, i64* %np
  %lo0 = mul i64 %total, %k
  %lo = udiv i64 %lo0, %n
  %k1 = add i64 %k, 1
  %hi0 = mul i64 %total, %k1
  %hi = udiv i64 %hi0, %n
  %lp = call i64* @job(i8* %s, i64 4)
  %l = load i64, i64* %lp
  %locals = inttoptr i64 %l to i8**
  %lk = getelementptr i8*, i8** %locals, i64 %k
  %local = load i8*, i8** %lk
  %ep = call i64* @job(i8* %s, i64 5)
  %e = load i64, i64* %ep
  %errs = inttoptr i64 %e to i8**
  %ek = getelementptr i8*, i8** %errs, i64 %k
  %err = load i8*, i8** %ek
  %rc = call i32 %fn(i8* %args, i64 %lo, i64 %hi, i8* %local, i8* %err)
  %rp = call i64* @job(i8* %s, i64 6)
  %r = load i64, i64* %rp
  %rcs = inttoptr i64 %r to i32*
  %rk = getelementptr i32, i32* %rcs, i64 %k
  store i32 %rc, i32* %rk
  ret void
}

; the life of worker %w: wait for its ticket to change from %first (its value when the
; thread was started), run chunk %w+1 of the job, until told to quit
define void @ttlc_worker(i8* %s, i64 %w, i32 %first) {
entry:
  %pending = call i32* @field(i8* %s, i64 64)
  %caller = call i32* @field(i8* %s, i64 68)
  %quit = call i32* @field(i8* %s, i64 132)
  %ticket = call i32* @ticket(i8* %s, i64 %w)
  %sleeping = getelementptr i32, i32* %ticket, i64 1
  %k = add i64 %w, 1
  br label %loop
loop:
  %seen = phi i32 [ %first, %entry ], [ %now, %run ], [ %now, %tell ]
  call void @wait_change(i32* %ticket, i32 %seen, i32* %sleeping)
  %now = load atomic i32, i32* %ticket acquire, align 4
  %q = load atomic i32, i32* %quit acquire, align 4
  %stop = icmp ne i32 %q, 0
  br i1 %stop, label %exit, label %run
run:
  call void @run_chunk(i8* %s, i64 %k)
  %left = atomicrmw sub i32* %pending, i32 1 seq_cst
  %last = icmp eq i32 %left, 1
  br i1 %last, label %tell, label %loop
tell:
  call void @wake(i32* %pending, i32* %caller)
  br label %loop
exit:
  ret void
}

; bump the tickets of workers 0..%n-1 (waking those asleep)
define private void @give(i8* %s, i64 %n) {
entry:
  br label %loop
loop:
  %w = phi i64 [ 0, %entry ], [ %w1, %tell ]
  %more = icmp ult i64 %w, %n
  br i1 %more, label %tell, label %done
tell:
  %ticket = call i32* @ticket(i8* %s, i64 %w)
  %sleeping = getelementptr i32, i32* %ticket, i64 1
  %old = atomicrmw add i32* %ticket, i32 1 seq_cst
  call void @wake(i32* %ticket, i32* %sleeping)
  %w1 = add i64 %w, 1
  br label %loop
done:
  ret void
}

; let workers 0..%n-1 return
define void @ttlc_quit(i8* %s, i64 %n) {
entry:
  %quit = call i32* @field(i8* %s, i64 132)
  store atomic i32 1, i32* %quit seq_cst, align 4
  call void @give(i8* %s, i64 %n)
  ret void
}

; one launch (the job's fields are written): hand chunks 1.. to workers 0.., run chunk 0
; here, wait for the others
define void @ttlc_parallel(i8* %s) {
entry:
  %pending = call i32* @field(i8* %s, i64 64)
  %caller = call i32* @field(i8* %s, i64 68)
  %np = call i64* @job(i8* %s, i64 3)
  %n = load i64, i64* %np
  %others64 = sub i64 %n, 1
  %others = trunc i64 %others64 to i32
  store atomic i32 %others, i32* %pending seq_cst, align 4
  call void @give(i8* %s, i64 %others64)
  call void @run_chunk(i8* %s, i64 0)
  br label %check
check:
  %left = load atomic i32, i32* %pending acquire, align 4
  %done = icmp eq i32 %left, 0
  br i1 %done, label %exit, label %wait
wait:
  call void @wait_change(i32* %pending, i32 %left, i32* %caller)
  br label %check
exit:
  ret void
}
"""


class NativePool:
    """Worker threads parked in machine code, and the call that hands them a launch.

    One launch at a time uses the pool (``run`` returns None to a launch that finds it
    busy: that one runs its chunks itself), so the pool owns the per-chunk arrays a launch
    needs (scratch memory, error records, return codes) and reuses them."""

    _lock = threading.Lock()
    _instance: Optional["NativePool"] = None
    _unavailable = False

    @classmethod
    def create(cls) -> Optional["NativePool"]:
        """The process's pool, built at the first call; None where it cannot be (then
        launches use a Python pool: slower to start, same results)."""
        if cls._instance is not None or cls._unavailable:
            return cls._instance
        with cls._lock:
            if cls._instance is None and not cls._unavailable:
                numbers = _SYSCALLS.get(platform.machine())
                try:
                    if platform.system() != "Linux" or numbers is None:
                        raise OSError(f"no futex numbers for {platform.machine()}")
                    cls._instance = cls(*numbers)
                except (OSError, RuntimeError, AttributeError):  # (llvmlite, libc symbols)
                    cls._unavailable = True
            return cls._instance

    def __init__(self, futex: int, sched_yield: int):
        x86 = platform.machine() == "x86_64"
        pause = "void @llvm.x86.sse2.pause()"
        text = _IR
        for name, value in (("SPIN_CYCLES", SPIN_CYCLES), ("YIELD_CYCLES", YIELD_CYCLES),
                            ("NAP_NANOSECONDS", NAP_NANOSECONDS),
                            ("FUTEX_WAIT", _FUTEX_WAIT_PRIVATE),
                            ("FUTEX_WAKE", _FUTEX_WAKE_PRIVATE),
                            ("FUTEX", futex), ("SCHED_YIELD", sched_yield),
                            ("PAUSE_DECLARATION", "declare " + pause if x86 else ""),
                            ("PAUSE", "call " + pause if x86 else "")):
            text = text.replace(name, str(value))
        mod = jit.optimize(jit.parse(text), level=2)
        self._library = rtlib.load(jit.emit_object(mod))
        worker = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32)
        self._worker = worker(self._library.address("ttlc_worker"))
        self._parallel = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            self._library.address("ttlc_parallel"))
        self._quit = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(
            self._library.address("ttlc_quit"))
        self._memory = ctypes.create_string_buffer(_STATE_BYTES + 64)
        self._state = (ctypes.addressof(self._memory) + 63) // 64 * 64
        self._job = (ctypes.c_int64 * 7).from_address(self._state + 192)
        self._locals = (ctypes.c_void_p * MAX_CHUNKS)()
        self._scratch: List[ctypes.Array] = []  # chunk k's scratch memory, grown on demand
        self._scratch_bytes = 0
        self._records = (ctypes.c_int64 * (findings.ERR_SLOTS * MAX_CHUNKS))()
        self._errors = (ctypes.c_void_p * MAX_CHUNKS)(*(
            ctypes.addressof(self._records) + 8 * findings.ERR_SLOTS * k for k in range(MAX_CHUNKS)))
        self._rcs = (ctypes.c_int32 * MAX_CHUNKS)()
        self._job[4], self._job[5] = ctypes.addressof(self._locals), ctypes.addressof(self._errors)
        self._job[6] = ctypes.addressof(self._rcs)
        self._threads: List[threading.Thread] = []
        self._busy = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        atexit.register(self.close)

    def run(self, kernel: int, args: int, total: int, chunks: int, local_bytes: int,
            first_error: int) -> Optional[List[Tuple[int, Optional[list]]]]:
        """Run `total` work-groups of the kernel at address `kernel` in `chunks` chunks
        (chunk 0 on this thread, writing its error record at address `first_error`).
        Returns None when the pool is busy with another launch, else the failures: [] or
        [(k, record)] of the first chunk k that failed (record None for chunk 0, whose
        record is at `first_error`)."""
        assert 1 < chunks <= MAX_CHUNKS
        if not self._busy.acquire(blocking=False):
            return None
        if self._closed:  # launches from atexit handlers after close(): run serially
            self._busy.release()
            return None
        try:
            if os.getpid() != self._pid:  # a forked child has no workers
                self._threads, self._pid = [], os.getpid()
            while len(self._threads) < chunks - 1:
                self._start(len(self._threads))
            self._prepare_scratch(chunks, local_bytes)
            self._errors[0] = first_error
            ctypes.memset(self._rcs, 0, 4 * chunks)
            job = self._job
            job[0], job[1], job[2], job[3] = kernel, args, total, chunks
            self._parallel(self._state)
            for k in range(chunks):
                if self._rcs[k]:
                    e = findings.ERR_SLOTS
                    return [(k, None if k == 0 else self._records[e * k:e * (k + 1)])]
            return []
        finally:
            self._busy.release()

    def _prepare_scratch(self, chunks: int, local_bytes: int) -> None:
        """Point each chunk at 64-byte aligned scratch memory of `local_bytes` (or null)."""
        if not local_bytes:
            ctypes.memset(self._locals, 0, 8 * chunks)
            return
        if local_bytes > self._scratch_bytes:
            self._scratch, self._scratch_bytes = [], local_bytes
        while len(self._scratch) < chunks:
            self._scratch.append(ctypes.create_string_buffer(self._scratch_bytes + 64))
        for k in range(chunks):
            self._locals[k] = (ctypes.addressof(self._scratch[k]) + 63) // 64 * 64

    def _ticket(self, worker: int) -> ctypes.c_int32:
        return ctypes.c_int32.from_address(self._state + 256 + 64 * worker)

    def _start(self, index: int) -> None:
        """Start worker `index` (under the busy lock: its ticket does not move meanwhile)."""
        first = self._ticket(index).value
        t = threading.Thread(target=self._worker, args=(self._state, index, first),
                             name=f"ttlc-cpu-{index}", daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        """Let the workers return (at exit: a thread inside machine code cannot be
        interrupted otherwise)."""
        with self._busy:
            if os.getpid() != self._pid:
                return
            self._closed = True
            self._quit(self._state, len(self._threads))
            for t in self._threads:
                t.join(timeout=1.0)
            self._threads = []
