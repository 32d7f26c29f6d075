"""The OpenCL device target opencl runs on: the first one that takes SPIR-V 1.2, has
subgroups and coarse-grained buffer SVM (the kernel ABI passes pointers to pointers,
which only shared virtual memory can hold), found once per process.

Where ``OCL_ICD_VENDORS`` is unset and Intel's CPU runtime (PyPI ``intel-opencl-rt``) is
installed in this Python environment, its library is taken as the OpenCL vendor (the
ICD loader reads the variable when PyOpenCL first asks for platforms)."""
from __future__ import annotations

import functools
import os
import re
import sys
from typing import Optional, Tuple

_INTEL_CPU = os.path.join(sys.prefix, "lib", "libintelocl.so")
if "OCL_ICD_VENDORS" not in os.environ and os.path.exists(_INTEL_CPU):
    os.environ["OCL_ICD_VENDORS"] = _INTEL_CPU

import pyopencl as cl  # noqa: E402 (after the vendor is chosen)

#: what to do when no device qualifies (the message of BackendUnavailable)
INSTALL = ("install an OpenCL runtime for it, e.g. Intel's CPU runtime: pip install "
           "'ttlc[opencl]' (pyopencl, intel-opencl-rt), then set OCL_ICD_VENDORS to the "
           "runtime's libintelocl.so (in the environment's lib folder)")
#: CL_DEVICE_SUB_GROUP_SIZES_INTEL (cl_intel_required_subgroup_size)
_SUB_GROUP_SIZES_INTEL = 0x4108


class Device:
    """A device with its context and queue, and the subgroup sizes it offers (None: it
    does not say)."""

    def __init__(self, device: "cl.Device"):
        self.device = device
        self.name = f"{device.platform.name.strip()}: {device.name.strip()}"
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.subgroup_sizes: Optional[Tuple[int, ...]] = None
        if "cl_intel_required_subgroup_size" in device.extensions:
            try:
                self.subgroup_sizes = tuple(device.get_info(_SUB_GROUP_SIZES_INTEL))
            except (cl.Error, TypeError, ValueError):
                pass


def _problem(d: "cl.Device") -> Optional[str]:
    """Why target opencl cannot use a device (None: it can)."""
    versions = [tuple(map(int, v)) for v in re.findall(r"SPIR-V_(\d+)\.(\d+)",
                                                        getattr(d, "il_version", "") or "")]
    if not any(v >= (1, 2) for v in versions):
        return "takes no SPIR-V 1.2"
    try:
        subgroups = d.max_num_sub_groups
    except cl.Error:
        subgroups = 0
    if not subgroups and "subgroups" not in d.extensions:
        return "has no subgroups"
    try:
        svm = d.svm_capabilities
    except cl.Error:
        svm = 0
    if not svm & cl.device_svm_capabilities.COARSE_GRAIN_BUFFER:
        return "has no shared virtual memory"
    return None


@functools.lru_cache(maxsize=None)
def find() -> Tuple[Optional[Device], str]:
    """(the device, "") or (None, why there is none)."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        return None, f"no OpenCL platform ({e})"
    refused = []
    for p in platforms:
        try:
            devices = p.get_devices()
        except cl.Error:
            continue
        for d in devices:
            why = _problem(d)
            if why is None:
                return Device(d), ""
            refused.append(f"{d.name.strip()} {why}")
    return None, ("no OpenCL device takes SPIR-V 1.2 with subgroups and shared virtual memory"
                  + (f" ({'; '.join(refused)})" if refused else " (no device found)"))
