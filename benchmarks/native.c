/* Native helpers of the benchmark suite (benchmarks/suite.py), built by native.py.
 *
 * Each function does the part [begin, end) of its work on the calling thread.  The *_chunk
 * forms take the signature of ttlc's CPU kernels (int f(args, begin, end, local, err), see
 * ttlc/backends/cpu/abi.py), so that native.py runs their chunks on ttlc's worker threads
 * exactly as ttlc launches its own work-groups (and no second OpenMP runtime competes with
 * PyTorch's for the cores).
 *
 * triad:       a[i] = b[i] + s * c[i] (STREAM's triad: the bandwidth limit).
 * xsmm_*:     C_k = A_k B_k (column-major, batch entries one after the other, or one operand
 *              shared by all) with one LIBXSMM kernel, and the chain D_k = A_k B_k C_k; the
 *              loop is in C so that LIBXSMM is measured without a Python call per matrix.
 *              Returns 0, or nonzero when LIBXSMM has no kernel.
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

/* C_i = A_i B_i for i in [begin, end): leading dimensions lda, ldb, ldc and element strides
 * sa, sb, sc from one member to the next (0: the operand is shared by all members). */
#define XSMM_STRIDED(NAME, T, DISPATCH, KERNEL)                                                \
    int NAME(int m, int n, int k, int lda, int ldb, int ldc, long begin, long end, const T *A, \
             const T *B, T *C, long sa, long sb, long sc) {                                    \
        const T alpha = 1, beta = 0;                                                           \
        KERNEL f = DISPATCH(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, NULL, NULL);             \
        if (!f) return -1;                                                                     \
        for (long i = begin; i < end; ++i) f(A + i * sa, B + i * sb, C + i * sc);              \
        return 0;                                                                              \
    }

XSMM_STRIDED(ttlcbench_xsmm_strided_f32, float, libxsmm_smmdispatch, libxsmm_smmfunction)
XSMM_STRIDED(ttlcbench_xsmm_strided_f64, double, libxsmm_dmmdispatch, libxsmm_dmmfunction)

/* args: m, n, k, A, B, C (packed batches); 1 when LIBXSMM has no kernel */
#define XSMM_CHUNK(NAME, T, STRIDED)                                                           \
    int NAME(const long *args, long begin, long end, void *local, void *err) {                 \
        int m = (int)args[0], n = (int)args[1], k = (int)args[2];                              \
        return STRIDED(m, n, k, m, k, m, begin, end, (const T *)args[3], (const T *)args[4],   \
                       (T *)args[5], (long)m * k, (long)k * n, (long)m * n) != 0;              \
    }

XSMM_CHUNK(ttlcbench_xsmm_chunk_f32, float, ttlcbench_xsmm_strided_f32)
XSMM_CHUNK(ttlcbench_xsmm_chunk_f64, double, ttlcbench_xsmm_strided_f64)

/* args: m, n, k, lda, ldb, ldc, A, B, C, sa, sb, sc; 1 when LIBXSMM has no kernel */
#define XSMM_STRIDED_CHUNK(NAME, T, STRIDED)                                                   \
    int NAME(const long *args, long begin, long end, void *local, void *err) {                 \
        return STRIDED((int)args[0], (int)args[1], (int)args[2], (int)args[3], (int)args[4],   \
                       (int)args[5], begin, end, (const T *)args[6], (const T *)args[7],       \
                       (T *)args[8], args[9], args[10], args[11]) != 0;                        \
    }

XSMM_STRIDED_CHUNK(ttlcbench_xsmm_strided_chunk_f32, float, ttlcbench_xsmm_strided_f32)
XSMM_STRIDED_CHUNK(ttlcbench_xsmm_strided_chunk_f64, double, ttlcbench_xsmm_strided_f64)

/* D_i = (A_i B_i) C_i through a temporary T (m x n) on the stack, A m x k, B k x n, C n x p,
 * packed; args: m, k, n, p, A, B, C, D, sa, sb, sc, sd (element strides, 0: shared) */
#define XSMM_CHAIN(NAME, T, DISPATCH, KERNEL)                                                  \
    int NAME(const long *args, long begin, long end, void *local, void *err) {                 \
        int m = (int)args[0], k = (int)args[1], n = (int)args[2], p = (int)args[3];            \
        const T *A = (const T *)args[4], *B = (const T *)args[5], *C = (const T *)args[6];     \
        T *D = (T *)args[7];                                                                   \
        const T alpha = 1, beta = 0;                                                           \
        KERNEL f = DISPATCH(m, n, k, NULL, NULL, NULL, &alpha, &beta, NULL, NULL);             \
        KERNEL g = DISPATCH(m, p, n, NULL, NULL, NULL, &alpha, &beta, NULL, NULL);             \
        if (!f || !g) return 1;                                                                \
        T tmp[m * n];                                                                          \
        for (long i = begin; i < end; ++i) {                                                   \
            f(A + i * args[8], B + i * args[9], tmp);                                          \
            g(tmp, C + i * args[10], D + i * args[11]);                                        \
        }                                                                                      \
        return 0;                                                                              \
    }

XSMM_CHAIN(ttlcbench_xsmm_chain_chunk_f32, float, libxsmm_smmdispatch, libxsmm_smmfunction)
XSMM_CHAIN(ttlcbench_xsmm_chain_chunk_f64, double, libxsmm_dmmdispatch, libxsmm_dmmfunction)
#else
int ttlcbench_has_libxsmm(void) { return 0; }
#endif
