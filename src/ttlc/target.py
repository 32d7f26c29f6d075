"""Target descriptions: what the middle end needs to know about a machine.

Passes read tile shapes, subgroup sizes and work-group limits from here instead of
scattering constants; a backend names its description.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class Target:
    name: str
    #: subgroup sizes the machine supports, the preferred one first
    subgroup_sizes: Tuple[int, ...]
    #: largest number of work-items in a work-group
    max_work_group_size: int
    #: bytes of registers one subgroup may use for accumulator tiles
    register_budget: int
    #: whether work-items execute as separate SIMT threads (GPUs): coopmatrix values must
    #: then be lowered to per-work-item vectors (lower-coopmatrix)
    simt: bool
    #: cache line size in bytes (alignment of local memory, prefetch granularity)
    cache_line: int = 64
    #: bytes of one vector register where a subgroup is a set of SIMD lanes (CPUs; 0 for
    #: SIMT machines and the interpreter): work-group-size fits subgroups to it
    vector_bytes: int = 0

    @property
    def default_subgroup_size(self) -> int:
        return self.subgroup_sizes[0]


TARGETS: Dict[str, Target] = {
    # the reference interpreter: any power-of-two subgroup; work-items are NumPy lanes
    "interp": Target("interp", (16, 8, 32, 1, 2, 4, 64), 1024, 64 * 1024, simt=False),
    # the CPU: a subgroup is a set of SIMD lanes (a 16 x f32 AVX-512 register preferred;
    # smaller subgroups use part of one, larger ones several); 32 zmm registers of 64 bytes
    "cpu": Target("cpu", (16, 8, 32, 4, 2, 1, 64), 1024, 32 * 64, simt=False, vector_bytes=64),
    # Intel Data Center GPU Max (Ponte Vecchio): 64 KiB GRF per thread in large-GRF mode
    "pvc": Target("pvc", (16, 32), 1024, 64 * 1024, simt=True),
    # NVIDIA GPUs: warps of 32
    "nvidia": Target("nvidia", (32,), 1024, 255 * 4 * 32, simt=True),
}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r} (known: {', '.join(TARGETS)})") from None
