"""The OpenCL device target opencl runs on: the first one that takes SPIR-V 1.2, has
subgroups and coarse-grained buffer SVM (the kernel ABI passes pointers to pointers,
which only shared virtual memory can hold), found once per process.

Where ``OCL_ICD_VENDORS`` is unset and Intel's CPU runtime (PyPI ``intel-opencl-rt``) is
installed in this Python environment, its library is taken as the OpenCL vendor (the
ICD loader reads the variable when PyOpenCL first asks for platforms)."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import re
import sys
from dataclasses import replace
from typing import Optional, Tuple

from ...ir.ops import SUBGROUP_OPS
from ...ir.types import SCALAR_TYPES
from ...target import Target

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


#: number types and the device extension each needs (the others every device has)
TYPE_EXTENSIONS = {"f16": "cl_khr_fp16", "f64": "cl_khr_fp64", "c64": "cl_khr_fp64"}
#: atomics on 64-bit numbers (and the parts of c64)
ATOMIC64_EXTENSION = "cl_khr_int64_base_atomics"
#: subgroup instructions and the device extension each needs, besides SPIR-V 1.3: they are
#: its GroupNonUniform instructions, defined over the active work-items as the language
#: wants (target spirv, ``subgroup.py``)
SUBGROUP_EXTENSIONS = {"subgroup_broadcast": "cl_khr_subgroup_shuffle",
                       **dict.fromkeys(SUBGROUP_OPS, "cl_khr_subgroup_non_uniform_arithmetic")}
#: the tests of checked code that compare work-items of a subgroup are GroupNonUniform
#: ballots (``spirv.checks``): SPIR-V 1.3 and this extension
BALLOT_EXTENSION = "cl_khr_subgroup_ballot"


class Device:
    """A device with its context and queue, and the subgroup sizes it offers (None: it
    does not say)."""

    def __init__(self, device: "cl.Device"):
        self.device = device
        self.name = f"{device.platform.name.strip()}: {device.name.strip()}"
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.extensions = set(device.extensions.split())
        self.spirv = newest_spirv(device)
        self.subgroup_sizes: Optional[Tuple[int, ...]] = None
        if "cl_intel_required_subgroup_size" in self.extensions:
            self.subgroup_sizes = _sizes_info(device, _SUB_GROUP_SIZES_INTEL)

    def target(self, machine: Target) -> Target:
        """The target description narrowed to what this device offers: its subgroup sizes,
        the types whose extensions it has (``TYPE_EXTENSIONS``), 64-bit atomics only
        with ``ATOMIC64_EXTENSION``, subgroup instructions only with SPIR-V 1.3 and
        their ``SUBGROUP_EXTENSIONS``; its name names the device, so that errors do."""
        types = tuple(t for t in machine.types or SCALAR_TYPES
                      if t not in TYPE_EXTENSIONS or TYPE_EXTENSIONS[t] in self.extensions)
        atomics = tuple(t for t in machine.atomic_types or types if t in types and (
            SCALAR_TYPES[t].component.bits < 64 or ATOMIC64_EXTENSION in self.extensions))
        sizes = tuple(s for s in machine.subgroup_sizes
                      if self.subgroup_sizes is None or s in self.subgroup_sizes)
        offered = SUBGROUP_EXTENSIONS if machine.subgroup_ops is None else machine.subgroup_ops
        subgroup_ops = tuple(op for op in offered if self.spirv >= (1, 3)
                             and SUBGROUP_EXTENSIONS[op] in self.extensions)
        return replace(machine, name=f"{machine.name} on {self.name}", types=types,
                       atomic_types=atomics, subgroup_sizes=sizes or machine.subgroup_sizes,
                       subgroup_ops=subgroup_ops)


def lacks_ballots(dev: Device) -> Optional[str]:
    """What a device lacks of the ballots checked code takes (None: nothing)."""
    missing = ([] if dev.spirv >= (1, 3) else ["SPIR-V 1.3"]) + \
        ([] if BALLOT_EXTENSION in dev.extensions else [BALLOT_EXTENSION])
    return " and ".join(missing) or None


def newest_spirv(d: "cl.Device") -> Tuple[int, int]:
    """The newest SPIR-V version a device takes (CL_DEVICE_IL_VERSION; (0, 0): none)."""
    return max((tuple(map(int, v)) for v in re.findall(r"SPIR-V_(\d+)\.(\d+)",
                                                        getattr(d, "il_version", "") or "")),
               default=(0, 0))


def _sizes_info(device: "cl.Device", param: int) -> Optional[Tuple[int, ...]]:
    """A device query answering size_t[] that PyOpenCL does not know (through the ICD
    loader PyOpenCL uses); None where it fails."""
    try:
        return tuple(device.get_info(param))
    except (cl.Error, TypeError, ValueError):
        pass
    libs = glob.glob(os.path.join(os.path.dirname(cl.__file__), ".libs", "libOpenCL*"))
    path = libs[0] if libs else ctypes.util.find_library("OpenCL")
    if path is None:
        return None
    try:
        query = ctypes.CDLL(path).clGetDeviceInfo
    except (OSError, AttributeError):
        return None
    query.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p,
                      ctypes.POINTER(ctypes.c_size_t)]
    n = ctypes.c_size_t()
    if query(device.int_ptr, param, 0, None, ctypes.byref(n)) != 0:
        return None
    out = (ctypes.c_size_t * (n.value // ctypes.sizeof(ctypes.c_size_t)))()
    if query(device.int_ptr, param, n.value, out, None) != 0:
        return None
    return tuple(out)


def _problem(d: "cl.Device") -> Optional[str]:
    """Why target opencl cannot use a device (None: it can)."""
    if newest_spirv(d) < (1, 2):
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
