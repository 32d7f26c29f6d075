"""Back end "cpu": LLVM code for the host CPU, run on a thread pool.

``codegen`` turns (lowered) ttlc IR into LLVM IR -- its docstring describes the execution
model (work-items as SIMD lanes) and the kernel ABI; ``coop`` holds the coopmatrix
instructions; ``jit`` drives LLVM through
llvmlite; ``cache`` keeps object code on disk; ``module`` implements the registry entry
(``ttlc.backends``): its stages (``Artifacts``) and the runtime (``CpuModule``).
Importing this package does not import llvmlite; ``CpuModule`` does.
"""


def __getattr__(name):
    if name == "CpuModule":
        from .module import CpuModule

        return CpuModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
