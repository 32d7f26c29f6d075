"""Back end "opencl": target spirv's modules run through PyOpenCL (docs/opencl.md)."""
