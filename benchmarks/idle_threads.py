"""Idle library threads sleep instead of spinning.  Imported by the benchmarks before NumPy
and PyTorch load (both read these at their start): on a machine with few cores, threads one
library leaves spinning take the cores the next measurement needs.  OpenMP's (PyTorch's)
wait passively; OpenBLAS's (NumPy's matmul) spin 2^4 cycles, not 2^28: with its default,
ttlc's f64 100x100x100 batch measured right after NumPy's ran at a median 82 GFLOP/s
instead of 167 (docs/performance.md, "Threads NumPy leaves spinning")."""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
