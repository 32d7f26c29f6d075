"""Target xevm: MLIR for Intel GPUs in upstream dialects (gpu, llvm, arith, scf, math, xevm)."""
