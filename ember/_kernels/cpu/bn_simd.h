/* Batch norm's per-run statistics, float32 (used by norm.pyx's batch norm only).
 *
 * emb_bn_meanvar_f32(x, n, &mean, &var): mean and biased variance of a contiguous run,
 * two passes (the second on data the first just brought into cache): the sum, then the
 * sum of squared deviations from the mean.  Each pass accumulates in float lanes over
 * blocks of 4096 elements and adds the blocks in float64, as nn_simd.h's reductions do;
 * on AVX-512 it keeps four independent 16-lane accumulators (nn_simd.h's AVX2 loop has
 * two 8-lane chains, so a 1024-element run waits on the adder's latency rather than on
 * loads), with a masked tail.  Elsewhere it is nn_simd.h's em_meanvar_f32. */
#ifndef EMBER_BN_SIMD_H
#define EMBER_BN_SIMD_H

#include <stddef.h>
#include "nn_simd.h"

#define EMB_BN_BLOCK 4096

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EMB_BN_X86 1
#define EMB_BN_T512 __attribute__((target("avx512f")))

static int emb_bn_avx512 = -1;

static inline int emb_bn_has_avx512(void) {
    if (emb_bn_avx512 < 0) {
        __builtin_cpu_init();
        emb_bn_avx512 = __builtin_cpu_supports("avx512f") != 0;
    }
    return emb_bn_avx512;
}

/* sum of one block (n <= EMB_BN_BLOCK), or of (x - m)^2 when dev */
EMB_BN_T512 static float emb_bn_block_avx512(const float* x, ptrdiff_t n, float m, int dev) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, vm = _mm512_set1_ps(m);
    ptrdiff_t i = 0;
    if (dev) {
        for (; i + 64 <= n; i += 64) {
            __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
            __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm);
            __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 32), vm);
            __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 48), vm);
            a0 = _mm512_fmadd_ps(d0, d0, a0);
            a1 = _mm512_fmadd_ps(d1, d1, a1);
            a2 = _mm512_fmadd_ps(d2, d2, a2);
            a3 = _mm512_fmadd_ps(d3, d3, a3);
        }
        for (; i + 16 <= n; i += 16) {
            __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
            a0 = _mm512_fmadd_ps(d, d, a0);
        }
        if (i < n) {
            __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
            __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + i), vm);
            a1 = _mm512_fmadd_ps(d, d, a1);
        }
    } else {
        for (; i + 64 <= n; i += 64) {
            a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
            a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
            a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
            a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
        }
        for (; i + 16 <= n; i += 16)
            a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
        if (i < n)
            a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps((__mmask16)((1u << (n - i)) - 1),
                                                         x + i));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

EMB_BN_T512 static void emb_bn_meanvar_avx512(const float* x, ptrdiff_t n, double* mean,
                                              double* var) {
    double s = 0.0, ss = 0.0, m;
    ptrdiff_t i;
    for (i = 0; i < n; i += EMB_BN_BLOCK)
        s += emb_bn_block_avx512(x + i, n - i < EMB_BN_BLOCK ? n - i : EMB_BN_BLOCK, 0.0f, 0);
    m = n ? s / n : 0.0;
    for (i = 0; i < n; i += EMB_BN_BLOCK)
        ss += emb_bn_block_avx512(x + i, n - i < EMB_BN_BLOCK ? n - i : EMB_BN_BLOCK,
                                  (float)m, 1);
    *mean = m;
    *var = n ? ss / n : 0.0;
}
#else
static inline int emb_bn_has_avx512(void) { return 0; }
#endif

/* mean and biased variance of the float32 run x[0..n) */
static inline void emb_bn_meanvar_f32(const float* x, ptrdiff_t n, double* mean, double* var,
                                      int avx512) {
#ifdef EMB_BN_X86
    if (avx512) {
        emb_bn_meanvar_avx512(x, n, mean, var);
        return;
    }
#endif
    (void)avx512;
    em_meanvar_f32(x, n, mean, var);
}

#endif
