/* Native helpers of the benchmark suite (benchmarks/suite.py), built by native.py.
 *
 * Each function does the part [begin, end) of its work on the calling thread.  The *_chunk
 * forms take the signature of ttlc's CPU kernels (int f(args, begin, end, local, err), see
 * ttlc/backends/cpu/abi.py), so that native.py runs their chunks on ttlc's worker threads
 * exactly as ttlc launches its own work-groups (and no second OpenMP runtime competes with
 * PyTorch's for the cores).
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

/* args: a, b, c, s (the bits of a double) */
int ttlcbench_triad_chunk(const long *args, long begin, long end, void *local, void *err) {
    double s;
    __builtin_memcpy(&s, &args[3], sizeof s);
    ttlcbench_triad(begin, end, (double *)args[0], (const double *)args[1],
                    (const double *)args[2], s);
    return 0;
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

/* args: m, n, k, A, B, C; 1 when LIBXSMM has no kernel */
#define XSMM_CHUNK(NAME, T, BATCH)                                                             \
    int NAME(const long *args, long begin, long end, void *local, void *err) {                 \
        return BATCH((int)args[0], (int)args[1], (int)args[2], begin, end, (const T *)args[3], \
                     (const T *)args[4], (T *)args[5]) != 0;                                   \
    }

XSMM_CHUNK(ttlcbench_xsmm_chunk_f32, float, ttlcbench_xsmm_gemm_f32)
XSMM_CHUNK(ttlcbench_xsmm_chunk_f64, double, ttlcbench_xsmm_gemm_f64)
#else
int ttlcbench_has_libxsmm(void) { return 0; }
#endif
