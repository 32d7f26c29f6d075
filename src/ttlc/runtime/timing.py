"""Timing a kernel as benchmarks do (``ttlc.bench``): warm-up calls, then many timed calls,
the median and spread of their times, and rates from the work the caller names.

Launches return when the kernel is done, so one call's wall time is its time; the
warm-up calls pay what only a first launch pays (argument plans, caches, page faults).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence


@dataclass
class BenchResult:
    """Times (seconds) of the timed calls, and the work of one call if given."""

    times: List[float] = field(default_factory=list)
    flops: Optional[float] = None
    nbytes: Optional[float] = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> tuple:
        """(first quartile, third quartile) of the call times."""
        if len(self.times) < 2:
            return (self.times[0], self.times[0])
        q = statistics.quantiles(self.times, n=4)
        return (q[0], q[2])

    @property
    def gflops(self) -> Optional[float]:
        return None if self.flops is None else self.flops / self.median / 1e9

    @property
    def gbytes_per_s(self) -> Optional[float]:
        return None if self.nbytes is None else self.nbytes / self.median / 1e9

    def __str__(self) -> str:
        lo, hi = self.spread
        text = (f"median {self.median * 1e3:.4f} ms (quartiles {lo * 1e3:.4f}-{hi * 1e3:.4f} ms, "
                f"{len(self.times)} runs)")
        if self.gflops is not None:
            text += f", {self.gflops:.2f} GFLOP/s"
        if self.gbytes_per_s is not None:
            text += f", {self.gbytes_per_s:.2f} GB/s"
        return text


def bench(kernel, *args: Any, grid: Sequence[int] = (1, 1, 1), warmup: int = 3,
          runs: Optional[int] = None, seconds: float = 0.2, flops: Optional[float] = None,
          nbytes: Optional[float] = None) -> BenchResult:
    """Time ``kernel(*args, grid=grid)``: ``warmup`` untimed calls, then ``runs`` timed
    calls (default: as many as fit in about ``seconds``, at least 5).  ``flops`` and
    ``nbytes`` (the work of one call) give GFLOP/s and GB/s in the result."""
    if warmup < 0 or (runs is not None and runs < 1) or seconds < 0:
        raise ValueError("bench needs warmup >= 0, runs >= 1 and seconds >= 0")
    for _ in range(warmup):
        kernel(*args, grid=grid)
    result = BenchResult(flops=flops, nbytes=nbytes)
    deadline = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        kernel(*args, grid=grid)
        end = time.perf_counter()
        result.times.append(end - start)
        if runs is not None:
            if len(result.times) >= runs:
                return result
        elif len(result.times) >= 5 and end >= deadline:
            return result
