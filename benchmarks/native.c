/* Native helpers of the benchmark suite (benchmarks/suite.py), built by native.py.
 *
 * Each function does the part [begin, end) of its work on the calling thread; native.py
 * splits the work over threads from Python (ctypes releases the GIL), as ttlc's CPU
 * runtime does, so that no second OpenMP runtime competes with PyTorch's for the cores.
 *
 * triad:       a[i] = b[i] + s * c[i] (STREAM's triad: the bandwidth limit).
 * xsmm_gemm_*: C_k = A_k B_k (column-major, packed, batch entries one after the other) with
 *              one LIBXSMM kernel; the loop is in C so that LIBXSMM is measured without a
 *              Python call per matrix.  Returns 0, or -1 when LIBXSMM has no kernel.
 * Without HAVE_LIBXSMM only the triad is built. */
#include <stddef.h>

int ttlcbench_has_libxsmm(void);

void ttlcbench_triad(long begin, long end, double *a, const double *b, const double *c,
                     double s) {
    for (long i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

#ifdef HAVE_LIBXSMM
#include <libxsmm.h>

int ttlcbench_has_libxsmm(void) { return 1; }

#define XSMM_BATCH(NAME, T, DISPATCH, KERNEL)                                                  \
    int NAME(int m, int n, int k, long begin, long end, const T *A, const T *B, T *C) {        \
        const T alpha = 1, beta = 0;                                                           \
        KERNEL f = DISPATCH(m, n, k, NULL, NULL, NULL, &alpha, &beta, NULL, NULL);             \
        if (!f) return -1;                                                                     \
        for (long i = begin; i < end; ++i)                                                     \
            f(A + (size_t)i * m * k, B + (size_t)i * k * n, C + (size_t)i * m * n);            \
        return 0;                                                                              \
    }

XSMM_BATCH(ttlcbench_xsmm_gemm_f32, float, libxsmm_smmdispatch, libxsmm_smmfunction)
XSMM_BATCH(ttlcbench_xsmm_gemm_f64, double, libxsmm_dmmdispatch, libxsmm_dmmfunction)
#else
int ttlcbench_has_libxsmm(void) { return 0; }
#endif
