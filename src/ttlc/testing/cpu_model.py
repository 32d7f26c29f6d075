"""Code for a named CPU model, inspected in a fresh process.

ttlc reads ``TTLC_CPU`` and ``TTLC_CPU_FEATURES`` once, when it first looks at the CPU, so a
test that wants the code ttlc makes for another CPU (one with AVX-512, AMX or AVX512-BF16
where the host has none, or a baseline x86-64 where it has them) runs its script in a new
Python process with those variables set and the disk cache off.  Scripts print their
findings as JSON on their last line.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

#: an instruction that moves a vector register to or from the stack: a spill or reload
#: where a kernel's accumulators and operands are meant to stay in registers
VECTOR_STACK_ACCESS = re.compile(r"%[xyz]mm[0-9]+.*\(%rsp\)|\(%rsp\).*%[xyz]mm")


def vector_stack_accesses(assembly: str) -> list[str]:
    """The lines of `assembly` that move a vector register to or from the stack."""
    return [line for line in assembly.splitlines() if VECTOR_STACK_ACCESS.search(line)]


def host_runs(cpu: str) -> bool:
    """Whether this machine can run code compiled for ``TTLC_CPU=cpu``: ttlc's own rule
    (``jit.missing_features``, which ``jit.require_runnable`` applies before a launch)."""
    from ttlc.backends.cpu import jit
    return not jit.missing_features(cpu)


def run_for_cpu_model(cpu: str, script: str, *args: str, stdin: str | None = None,
                      features: str = "", timeout: float = 600):
    """What `script` prints as JSON on its last line, run with `args` (its ``sys.argv[1:]``)
    and `stdin` in a fresh Python process that compiles for the CPU model `cpu` with the
    feature changes `features` (``TTLC_CPU_FEATURES``, e.g. ``"-avx512bf16"``) and the disk
    cache off.  The process must succeed: else an AssertionError carries the end of its
    standard error."""
    environment = dict(os.environ, TTLC_CPU=cpu, TTLC_CPU_FEATURES=features, TTLC_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", script, *args], input=stdin,
                          env=environment, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"TTLC_CPU={cpu}: {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
