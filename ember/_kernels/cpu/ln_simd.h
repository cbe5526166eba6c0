/* Layer norm rows in float32 with AVX2+FMA (norm.pyx; used when nn_simd.h's em_use_avx2
 * is set, the plain primitives of nn_simd.h elsewhere).
 *
 * Forward, one row of n: optionally z = x + r first (the residual add of a post-norm
 * Transformer layer, stored because the backward reads it), then the mean and the
 * biased variance (two passes over the row, which sits in L1: float lanes within
 * blocks of EM_BLOCK elements, blocks added in float64, the variance of the centred
 * values), then y = ((z - mean) * rstd) * w + b.  Four independent accumulators keep
 * the short rows of a Transformer (128-1024) from waiting on the add latency.
 *
 * Backward, one row: pass 1 reads g and x once for the two row sums (sum g w and
 * sum g w (x - mean)) and, when asked, adds g * xhat and g into the caller's float
 * accumulators of the weight and bias gradients; pass 2 writes
 * gx = ((g w - A) - (x - mean) B) * rstd, the same centred form as nn_simd.h's
 * em_gxwb_f32. */
#ifndef EMBER_LN_SIMD_H
#define EMBER_LN_SIMD_H

#include "nn_simd.h"

#if EM_HAVE_X86

EM_AVX2 static inline __m256i emln_mask(ptrdiff_t r) {
    return r >= 8 ? _mm256_set1_epi32(-1) : em_mask8(r);
}

/* sum of x over one block (n <= EM_BLOCK), z = x + r stored first when r is not NULL */
EM_AVX2 static inline float emln_bsum(const float* x, const float* r, float* z, ptrdiff_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    ptrdiff_t i = 0;
    if (r) {
        for (; i + 32 <= n; i += 32) {
            __m256 u0 = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(r + i));
            __m256 u1 = _mm256_add_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(r + i + 8));
            __m256 u2 = _mm256_add_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(r + i + 16));
            __m256 u3 = _mm256_add_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(r + i + 24));
            _mm256_storeu_ps(z + i, u0);
            _mm256_storeu_ps(z + i + 8, u1);
            _mm256_storeu_ps(z + i + 16, u2);
            _mm256_storeu_ps(z + i + 24, u3);
            a0 = _mm256_add_ps(a0, u0);
            a1 = _mm256_add_ps(a1, u1);
            a2 = _mm256_add_ps(a2, u2);
            a3 = _mm256_add_ps(a3, u3);
        }
        for (; i < n; i += 8) {
            __m256i k = emln_mask(n - i);
            __m256 u = _mm256_add_ps(_mm256_maskload_ps(x + i, k), _mm256_maskload_ps(r + i, k));
            _mm256_maskstore_ps(z + i, k, u);
            a0 = _mm256_add_ps(a0, u);
        }
    } else {
        for (; i + 32 <= n; i += 32) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
        }
        for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        if (i < n) a1 = _mm256_add_ps(a1, _mm256_maskload_ps(x + i, em_mask8(n - i)));
    }
    return em_hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

/* sum (x - m)^2 over one block */
EM_AVX2 static inline float emln_bsqdev(const float* x, float m, ptrdiff_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, vm = _mm256_set1_ps(m);
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm);
        __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 16), vm);
        __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 24), vm);
        a0 = _mm256_fmadd_ps(d0, d0, a0);
        a1 = _mm256_fmadd_ps(d1, d1, a1);
        a2 = _mm256_fmadd_ps(d2, d2, a2);
        a3 = _mm256_fmadd_ps(d3, d3, a3);
    }
    for (; i < n; i += 8) {
        __m256i k = emln_mask(n - i);
        __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm),
                                 _mm256_castsi256_ps(k));
        a0 = _mm256_fmadd_ps(d, d, a0);
    }
    return em_hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

/* One forward row: (z = x + r when r is not NULL; then reading z) the mean and 1/std into
 * *mean, *rstd, and y = ((x - mean) * rstd) * w + b (w, b may be NULL: 1, 0). */
EM_AVX2 EM_STATIC void emln_fwd_row_avx2(const float* x, const float* r, float* z,
                                         const float* w, const float* b, float* y,
                                         ptrdiff_t n, double eps, double* mean, double* rstd) {
    double s = 0.0, q = 0.0, m, rs;
    ptrdiff_t i;
    for (i = 0; i < n; i += EM_BLOCK)
        s += emln_bsum(x + i, r ? r + i : NULL, r ? z + i : NULL,
                       n - i < EM_BLOCK ? n - i : EM_BLOCK);
    if (r) x = z;
    m = n ? s / n : 0.0;
    for (i = 0; i < n; i += EM_BLOCK)
        q += emln_bsqdev(x + i, (float)m, n - i < EM_BLOCK ? n - i : EM_BLOCK);
    rs = 1.0 / sqrt((n ? q / n : 0.0) + eps);
    *mean = m;
    *rstd = rs;
    const __m256 vm = _mm256_set1_ps((float)m), va = _mm256_set1_ps((float)rs);
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    if (w && b) {
        for (i = 0; i + 8 <= n; i += 8) {
            __m256 h = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), va);
            _mm256_storeu_ps(y + i, _mm256_fmadd_ps(h, _mm256_loadu_ps(w + i),
                                                    _mm256_loadu_ps(b + i)));
        }
    } else {
        for (i = 0; i + 8 <= n; i += 8) {
            __m256 h = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), va);
            _mm256_storeu_ps(y + i, _mm256_fmadd_ps(h, w ? _mm256_loadu_ps(w + i) : one,
                                                    b ? _mm256_loadu_ps(b + i) : zero));
        }
    }
    if (i < n) {
        __m256i k = em_mask8(n - i);
        __m256 h = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm), va);
        __m256 vw = w ? _mm256_maskload_ps(w + i, k) : one;
        __m256 vb = b ? _mm256_maskload_ps(b + i, k) : zero;
        _mm256_maskstore_ps(y + i, k, _mm256_fmadd_ps(h, vw, vb));
    }
}

/* One backward row (see the top of the file): gx (NULL: not wanted), and when acc is not
 * NULL acc[j] += g[j] * xhat[j], acc2[j] += g[j]. */
EM_AVX2 EM_STATIC void emln_bwd_row_avx2(const float* g, const float* x, const float* w,
                                         float* gx, float* acc, float* acc2, ptrdiff_t n,
                                         double mean, double rstd) {
    const __m256 vm = _mm256_set1_ps((float)mean), va = _mm256_set1_ps((float)rstd);
    ptrdiff_t i, j;
    double s1 = 0.0, s2 = 0.0;
    if (gx == NULL && acc == NULL) return;
    for (j = 0; j < n; j += EM_BLOCK) {
        ptrdiff_t e = n - j < EM_BLOCK ? n : j + EM_BLOCK;
        __m256 p0 = _mm256_setzero_ps(), p1 = p0, q0 = p0, q1 = p0;
        for (i = j; i + 16 <= e; i += 16) {
            __m256 g0 = _mm256_loadu_ps(g + i), g1 = _mm256_loadu_ps(g + i + 8);
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm);
            if (acc) {
                __m256 h0 = _mm256_mul_ps(d0, va), h1 = _mm256_mul_ps(d1, va);
                _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(g0, h0, _mm256_loadu_ps(acc + i)));
                _mm256_storeu_ps(acc + i + 8,
                                 _mm256_fmadd_ps(g1, h1, _mm256_loadu_ps(acc + i + 8)));
                _mm256_storeu_ps(acc2 + i, _mm256_add_ps(g0, _mm256_loadu_ps(acc2 + i)));
                _mm256_storeu_ps(acc2 + i + 8, _mm256_add_ps(g1, _mm256_loadu_ps(acc2 + i + 8)));
            }
            if (w) {
                g0 = _mm256_mul_ps(g0, _mm256_loadu_ps(w + i));
                g1 = _mm256_mul_ps(g1, _mm256_loadu_ps(w + i + 8));
            }
            p0 = _mm256_add_ps(p0, g0);
            p1 = _mm256_add_ps(p1, g1);
            q0 = _mm256_fmadd_ps(g0, d0, q0);
            q1 = _mm256_fmadd_ps(g1, d1, q1);
        }
        for (; i < e; i += 8) {
            __m256i k = emln_mask(e - i);
            __m256 g0 = _mm256_maskload_ps(g + i, k);
            __m256 d0 = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm),
                                      _mm256_castsi256_ps(k));
            if (acc) {
                __m256 h0 = _mm256_mul_ps(d0, va);
                _mm256_maskstore_ps(acc + i, k,
                                    _mm256_fmadd_ps(g0, h0, _mm256_maskload_ps(acc + i, k)));
                _mm256_maskstore_ps(acc2 + i, k, _mm256_add_ps(g0, _mm256_maskload_ps(acc2 + i, k)));
            }
            if (w) g0 = _mm256_mul_ps(g0, _mm256_maskload_ps(w + i, k));
            p0 = _mm256_add_ps(p0, g0);
            q0 = _mm256_fmadd_ps(g0, d0, q0);
        }
        s1 += em_hsum8(_mm256_add_ps(p0, p1));
        s2 += em_hsum8(_mm256_add_ps(q0, q1));
    }
    if (gx == NULL) return;
    /* gx = rstd * (g w - A - xhat * B), A = s1 / n, B = sum(g w xhat) / n */
    const __m256 vA = _mm256_set1_ps((float)(s1 / n));
    const __m256 vB = _mm256_set1_ps((float)(rstd * s2 / n * rstd));
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 gw = _mm256_loadu_ps(g + i);
        if (w) gw = _mm256_mul_ps(gw, _mm256_loadu_ps(w + i));
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        _mm256_storeu_ps(gx + i, _mm256_mul_ps(_mm256_fnmadd_ps(d, vB, _mm256_sub_ps(gw, vA)),
                                               va));
    }
    if (i < n) {
        __m256i k = em_mask8(n - i);
        __m256 gw = _mm256_maskload_ps(g + i, k);
        if (w) gw = _mm256_mul_ps(gw, _mm256_maskload_ps(w + i, k));
        __m256 d = _mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm);
        _mm256_maskstore_ps(gx + i, k,
                            _mm256_mul_ps(_mm256_fnmadd_ps(d, vB, _mm256_sub_ps(gw, vA)), va));
    }
}

#endif /* EM_HAVE_X86 */

#endif
