"""Target spirv: SPIR-V modules for OpenCL devices (``codegen`` composes the emitters and
writes the stages; ``builder`` is the module builder, ``grammar`` the Khronos tables it
reads; docs/spirv.md describes the kernel ABI)."""
