/* Vector primitives for ember's softmax, loss and normalization kernels
 * (softmax.pyx, norm.pyx).  Each works on one contiguous run: row maxima,
 * exp-and-sum, sums, squared deviations, dot products, and the fused
 * elementwise updates of the normalization layers.
 *
 * float32, x86-64 with AVX2+FMA (checked at run time by em_init_cpu): the
 * exp family and the reductions are written with intrinsics and masked tails,
 * so short rows (10 classes, 64 keys) stay in vector registers.  exp is a
 * Cephes-style polynomial (about 1 ulp) used on arguments <= ~88 (softmax
 * shifts by the row maximum first); it is exactly 0 below -87.34 and keeps
 * NaN.  Reductions accumulate in float lanes over blocks of 4096 elements and
 * add the blocks in float64.
 * Everything else is plain C with `#pragma omp simd`, compiled twice through
 * target_clones (x86-64-v3 and baseline); float64 uses libm's exp. */
#ifndef EMBER_NN_SIMD_H
#define EMBER_NN_SIMD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* No-trapping math lets the compiler turn the selects in the loops below
 * into vector blends (the results are the same). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

#if defined(__GNUC__)
#define EM_STATIC static __attribute__((unused))
#else
#define EM_STATIC static
#endif

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define EM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define EM_CLONES
#endif

/* no fused multiply-add: a product rounded once, then subtracted, cancels exactly */
#if defined(__GNUC__) && !defined(__clang__)
#define EM_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define EM_NO_CONTRACT
#endif

/* ---- float32 exp family: AVX2+FMA intrinsics with masked tails (short rows, such as
 * 10 classes, stay in vector registers), scalar libm code elsewhere ---- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EM_HAVE_X86 1
#define EM_AVX2 __attribute__((target("avx2,fma")))

EM_STATIC int em_use_avx2 = 0;

EM_STATIC int em_init_cpu(void) {
    __builtin_cpu_init();
    em_use_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return em_use_avx2;
}

/* exp of 8 floats: Cephes' polynomial after n = round(x / ln 2); about 1 ulp.
 * Exactly 0 below -87.34, NaN stays NaN; meant for x <= 88. */
EM_AVX2 static inline __m256 em_exp8(__m256 x) {
    /* no clamp needed: lanes below -87.34 (-inf included) are zeroed at the end and
     * their garbage never reaches other lanes; NaN stays NaN */
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
    __m256 n = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_fmadd_ps(_mm256_fmadd_ps(p, r, one), r, one);   /* p r^2 + r + 1 */
    __m256i e = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(t), 23),
                                 _mm256_set1_epi32(0x3F800000));
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ), y);
}

/* lanes [0, r) set (1 <= r <= 7) */
EM_AVX2 static inline __m256i em_mask8(ptrdiff_t r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

EM_AVX2 static inline float em_hsum8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

EM_AVX2 static inline float em_hmax8(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

EM_AVX2 EM_STATIC float em_max_f32_avx2(const float* x, ptrdiff_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY), m2 = m;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
        m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 8));
    }
    if (i + 8 <= n) {
        m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
        i += 8;
    }
    if (i < n) {
        __m256i k = em_mask8(n - i);
        __m256 v = _mm256_maskload_ps(x + i, k);
        m2 = _mm256_max_ps(m2, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v,
                                                 _mm256_castsi256_ps(k)));
    }
    return em_hmax8(_mm256_max_ps(m, m2));
}

EM_AVX2 EM_STATIC float em_expsum_f32_avx2(float* out, const float* x, float shift, ptrdiff_t n) {
    __m256 sh = _mm256_set1_ps(shift), s = _mm256_setzero_ps(), s2 = s;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 e = em_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
        __m256 e2 = em_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), sh));
        if (out) {
            _mm256_storeu_ps(out + i, e);
            _mm256_storeu_ps(out + i + 8, e2);
        }
        s = _mm256_add_ps(s, e);
        s2 = _mm256_add_ps(s2, e2);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 e = em_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
        if (out) _mm256_storeu_ps(out + i, e);
        s = _mm256_add_ps(s, e);
    }
    if (i < n) {
        __m256i k = em_mask8(n - i);
        __m256 e = em_exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), sh));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
        if (out) _mm256_maskstore_ps(out + i, k, e);
        s2 = _mm256_add_ps(s2, e);
    }
    return em_hsum8(_mm256_add_ps(s, s2));
}

EM_AVX2 EM_STATIC void em_expaffine_f32_avx2(float* out, const float* x, float shift, float a,
                                          const float* b, float c, ptrdiff_t n) {
    __m256 sh = _mm256_set1_ps(shift), va = _mm256_set1_ps(a), vc = _mm256_set1_ps(c);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = _mm256_mul_ps(va, em_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh)));
        e = b ? _mm256_fmadd_ps(_mm256_loadu_ps(b + i), vc, e) : _mm256_add_ps(e, vc);
        _mm256_storeu_ps(out + i, e);
    }
    if (i < n) {
        __m256i k = em_mask8(n - i);
        __m256 e = _mm256_mul_ps(va, em_exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), sh)));
        e = b ? _mm256_fmadd_ps(_mm256_maskload_ps(b + i, k), vc, e) : _mm256_add_ps(e, vc);
        _mm256_maskstore_ps(out + i, k, e);
    }
}

EM_AVX2 EM_STATIC void em_lsm_bwd_f32_avx2(float* out, const float* g, const float* y, float s,
                                        ptrdiff_t n) {
    __m256 vs = _mm256_set1_ps(s);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = em_exp8(_mm256_loadu_ps(y + i));
        _mm256_storeu_ps(out + i, _mm256_fnmadd_ps(e, vs, _mm256_loadu_ps(g + i)));
    }
    if (i < n) {
        __m256i k = em_mask8(n - i);
        __m256 e = em_exp8(_mm256_maskload_ps(y + i, k));
        _mm256_maskstore_ps(out + i, k, _mm256_fnmadd_ps(e, vs, _mm256_maskload_ps(g + i, k)));
    }
}

#else
#define EM_HAVE_X86 0
EM_STATIC int em_use_avx2 = 0;
EM_STATIC int em_init_cpu(void) { return 0; }
#endif

EM_STATIC float em_max_f32(const float* x, ptrdiff_t n) {
#if EM_HAVE_X86
    if (em_use_avx2) return em_max_f32_avx2(x, n);
#endif
    float m = -INFINITY;
    for (ptrdiff_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* sum of exp(x[i] - shift); out[i] = exp(x[i] - shift) when out is not NULL */
EM_STATIC float em_expsum_f32(float* out, const float* x, float shift, ptrdiff_t n) {
#if EM_HAVE_X86
    if (em_use_avx2) return em_expsum_f32_avx2(out, x, shift, n);
#endif
    float s = 0.0f;
    for (ptrdiff_t i = 0; i < n; i++) {
        float e = expf(x[i] - shift);
        if (out) out[i] = e;
        s += e;
    }
    return s;
}

/* out[i] = a * exp(x[i] - shift) + b[i] * c  (b NULL: + c) */
EM_STATIC void em_expaffine_f32(float* out, const float* x, float shift, float a, const float* b,
                             float c, ptrdiff_t n) {
#if EM_HAVE_X86
    if (em_use_avx2) { em_expaffine_f32_avx2(out, x, shift, a, b, c, n); return; }
#endif
    for (ptrdiff_t i = 0; i < n; i++) out[i] = a * expf(x[i] - shift) + (b ? b[i] * c : c);
}

/* out[i] = g[i] - exp(y[i]) * s   (log_softmax backward) */
EM_STATIC void em_lsm_bwd_f32(float* out, const float* g, const float* y, float s, ptrdiff_t n) {
#if EM_HAVE_X86
    if (em_use_avx2) { em_lsm_bwd_f32_avx2(out, g, y, s, n); return; }
#endif
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] - expf(y[i]) * s;
}

/* out[i] = y[i] * (g[i] - d)   (softmax backward) */
EM_CLONES EM_STATIC void em_sm_bwd_f32(float* out, const float* g, const float* y, float d,
                                    ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = y[i] * (g[i] - d);
}

EM_CLONES EM_STATIC double em_sum_f32_gen(const float* x, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}

/* sum((x - m)^2) */
EM_CLONES EM_STATIC double em_sqdev_f32_gen(const float* x, double m, ptrdiff_t n) {
    double ss = 0.0;
#pragma omp simd reduction(+:ss)
    for (ptrdiff_t i = 0; i < n; i++) {
        double d = (double)x[i] - m;
        ss += d * d;
    }
    return ss;
}

EM_CLONES EM_STATIC double em_dot_f32_gen(const float* a, const float* b, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

/* *sa = sum(a), *sab = sum(a*b) */
EM_CLONES EM_STATIC void em_sum_dot_f32_gen(const float* a, const float* b, ptrdiff_t n, double* sa,
                                     double* sab) {
    double s = 0.0, sp = 0.0;
#pragma omp simd reduction(+:s, sp)
    for (ptrdiff_t i = 0; i < n; i++) {
        double va = (double)a[i];
        s += va;
        sp += va * (double)b[i];
    }
    *sa = s;
    *sab = sp;
}

/* out[i] = x[i] * a + b */
EM_CLONES EM_STATIC void em_axpb_f32(float* out, const float* x, float a, float b, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] * a + b;
}

/* out[i] = (x[i] - m) * a + b: centred first, so a value equal to the mean gives b exactly */
EM_CLONES EM_STATIC void em_caxpb_f32(float* out, const float* x, float m, float a, float b,
                                   ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] - m) * a + b;
}

/* out[i] = ((x[i] - m) * a) * w[i] + c[i]  (w, c may be NULL: 1, 0) */
EM_CLONES EM_STATIC void em_affine_wb_f32(float* out, const float* x, float a, float m,
                                       const float* w, const float* c, ptrdiff_t n) {
    if (w && c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((x[i] - m) * a) * w[i] + c[i];
    } else if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((x[i] - m) * a) * w[i];
    } else if (c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((x[i] - m) * a) + c[i];
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] - m) * a;
    }
}

/* out[i] = ((g[i] * w[i] - c) - (x[i] - m) * b) * a   (w may be NULL: 1): layer norm's
   input gradient in centred form (a row of one element gives exactly 0) */
EM_CLONES EM_NO_CONTRACT EM_STATIC void em_gxwb_f32(float* out, const float* g, const float* w,
                                                 const float* x, float a, float b, float c,
                                                 float m, ptrdiff_t n) {
    if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) {
            float p = g[i] * w[i];
            out[i] = ((p - c) - (x[i] - m) * b) * a;
        }
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((g[i] - c) - (x[i] - m) * b) * a;
    }
}

/* out[i] = g[i] * a + x[i] * b + c */
EM_CLONES EM_STATIC void em_gxb_f32(float* out, const float* g, const float* x, float a, float b,
                                 float c, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a + x[i] * b + c;
}

/* acc[i] += g[i] * ((x[i] - m) * a);  acc2[i] += g[i]   (float64 accumulators) */
EM_CLONES EM_STATIC void em_acc_wb_f32(double* acc, double* acc2, const float* g, const float* x,
                                    double a, double m, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        acc[i] += (double)g[i] * (((double)x[i] - m) * a);
        acc2[i] += (double)g[i];
    }
}

/* *s1 = sum(g * w), *s2 = sum(g * w * x)   (w NULL: 1; float64 accumulators) */
EM_CLONES EM_STATIC void em_sum_dot_w_f32_gen(const float* g, const float* w, const float* x,
                                               ptrdiff_t n,
                                       double* s1, double* s2) {
    double a = 0.0, b = 0.0;
    if (w) {
#pragma omp simd reduction(+:a, b)
        for (ptrdiff_t i = 0; i < n; i++) {
            double gw = (double)g[i] * (double)w[i];
            a += gw;
            b += gw * (double)x[i];
        }
    } else {
#pragma omp simd reduction(+:a, b)
        for (ptrdiff_t i = 0; i < n; i++) {
            a += (double)g[i];
            b += (double)g[i] * (double)x[i];
        }
    }
    *s1 = a;
    *s2 = b;
}

/* acc[i] += x[i];  acc2[i] += x[i]^2   (float64 accumulators) */
EM_CLONES EM_STATIC void em_acc_sumsq_f32(double* acc, double* acc2, const float* x, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        double v = (double)x[i];
        acc[i] += v;
        acc2[i] += v * v;
    }
}

/* out[i] = g[i] * a[i] + x[i] * b[i] + c[i] */
EM_CLONES EM_STATIC void em_gxb_vec_f32(float* out, const float* g, const float* x, const float* a,
                                     const float* b, const float* c, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a[i] + x[i] * b[i] + c[i];
}

/* ---- float32 reductions: float accumulators in blocks of 4096 elements (two
 * vectors of 8 lanes, masked tails), blocks added in float64 ---- */

#define EM_BLOCK 4096

#if EM_HAVE_X86
EM_AVX2 static inline __m256 em_load_tail(const float* x, ptrdiff_t r) {
    return _mm256_maskload_ps(x, em_mask8(r));
}

/* s += x;  for one block (n <= EM_BLOCK) */
EM_AVX2 EM_STATIC float em_bsum_avx2(const float* x, ptrdiff_t n) {
    __m256 a = _mm256_setzero_ps(), b = a;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(x + i));
        b = _mm256_add_ps(b, _mm256_loadu_ps(x + i + 8));
    }
    if (i + 8 <= n) { a = _mm256_add_ps(a, _mm256_loadu_ps(x + i)); i += 8; }
    if (i < n) b = _mm256_add_ps(b, em_load_tail(x + i, n - i));
    return em_hsum8(_mm256_add_ps(a, b));
}

/* sum (x - m)^2 for one block */
EM_AVX2 EM_STATIC float em_bsqdev_avx2(const float* x, float m, ptrdiff_t n) {
    __m256 a = _mm256_setzero_ps(), b = a, vm = _mm256_set1_ps(m);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        __m256 e = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm);
        a = _mm256_fmadd_ps(d, d, a);
        b = _mm256_fmadd_ps(e, e, b);
    }
    if (i + 8 <= n) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        a = _mm256_fmadd_ps(d, d, a);
        i += 8;
    }
    if (i < n) {
        __m256i k = em_mask8(n - i);
        __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm),
                                 _mm256_castsi256_ps(k));
        b = _mm256_fmadd_ps(d, d, b);
    }
    return em_hsum8(_mm256_add_ps(a, b));
}

/* *sa += sum(a), *sab += sum(a * b) (w NULL) or sum(a * w), sum(a * w * b) for one block */
EM_AVX2 EM_STATIC void em_bsumdot_avx2(const float* a, const float* w, const float* b, ptrdiff_t n,
                                    double* sa, double* sab) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, p0 = s0, p1 = s0;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 u = _mm256_loadu_ps(a + i), v = _mm256_loadu_ps(a + i + 8);
        if (w) {
            u = _mm256_mul_ps(u, _mm256_loadu_ps(w + i));
            v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i + 8));
        }
        s0 = _mm256_add_ps(s0, u);
        s1 = _mm256_add_ps(s1, v);
        p0 = _mm256_fmadd_ps(u, _mm256_loadu_ps(b + i), p0);
        p1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + i + 8), p1);
    }
    for (; i < n; i += 8) {
        ptrdiff_t r = n - i;
        __m256i k = r >= 8 ? _mm256_set1_epi32(-1) : em_mask8(r);
        __m256 u = _mm256_maskload_ps(a + i, k);
        if (w) u = _mm256_mul_ps(u, _mm256_maskload_ps(w + i, k));
        s0 = _mm256_add_ps(s0, u);
        p0 = _mm256_fmadd_ps(u, _mm256_maskload_ps(b + i, k), p0);
    }
    *sa += em_hsum8(_mm256_add_ps(s0, s1));
    *sab += em_hsum8(_mm256_add_ps(p0, p1));
}
#endif

EM_STATIC double em_sum_f32(const float* x, ptrdiff_t n) {
#if EM_HAVE_X86
    if (em_use_avx2) {
        double s = 0;
        for (ptrdiff_t i = 0; i < n; i += EM_BLOCK)
            s += em_bsum_avx2(x + i, n - i < EM_BLOCK ? n - i : EM_BLOCK);
        return s;
    }
#endif
    return em_sum_f32_gen(x, n);
}

EM_STATIC double em_sqdev_f32(const float* x, double m, ptrdiff_t n) {
#if EM_HAVE_X86
    if (em_use_avx2) {
        double s = 0;
        for (ptrdiff_t i = 0; i < n; i += EM_BLOCK)
            s += em_bsqdev_avx2(x + i, (float)m, n - i < EM_BLOCK ? n - i : EM_BLOCK);
        return s;
    }
#endif
    return em_sqdev_f32_gen(x, m, n);
}

/* mean and biased variance of x[0..n), two passes */
EM_STATIC void em_meanvar_f32(const float* x, ptrdiff_t n, double* mean, double* var) {
    double m = n ? em_sum_f32(x, n) / n : 0.0;
    *mean = m;
    *var = n ? em_sqdev_f32(x, m, n) / n : 0.0;
}

EM_STATIC void em_sum_dot_f32(const float* a, const float* b, ptrdiff_t n, double* sa,
                              double* sab) {
#if EM_HAVE_X86
    if (em_use_avx2) {
        *sa = 0;
        *sab = 0;
        for (ptrdiff_t i = 0; i < n; i += EM_BLOCK)
            em_bsumdot_avx2(a + i, NULL, b + i, n - i < EM_BLOCK ? n - i : EM_BLOCK, sa, sab);
        return;
    }
#endif
    em_sum_dot_f32_gen(a, b, n, sa, sab);
}

EM_STATIC void em_sum_dot_w_f32(const float* g, const float* w, const float* x, ptrdiff_t n,
                             double* s1, double* s2) {
#if EM_HAVE_X86
    if (em_use_avx2) {
        *s1 = 0;
        *s2 = 0;
        for (ptrdiff_t i = 0; i < n; i += EM_BLOCK)
            em_bsumdot_avx2(g + i, w ? w + i : NULL, x + i,
                            n - i < EM_BLOCK ? n - i : EM_BLOCK, s1, s2);
        return;
    }
#endif
    em_sum_dot_w_f32_gen(g, w, x, n, s1, s2);
}

EM_STATIC double em_dot_f32(const float* a, const float* b, ptrdiff_t n) {
    double sa, sab;
    em_sum_dot_f32(a, b, n, &sa, &sab);
    return sab;
}

/* acc[i] += g[i] * ((x[i] - m) * a);  acc2[i] += g[i]   (float accumulators) */
EM_CLONES EM_STATIC void em_facc_wb_f32(float* acc, float* acc2, const float* g, const float* x,
                                     float a, float m, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        acc[i] += g[i] * ((x[i] - m) * a);
        acc2[i] += g[i];
    }
}

/* ---- float64 (libm exp) ---- */

EM_CLONES EM_STATIC double em_max_f64(const double* x, ptrdiff_t n) {
    double m = -INFINITY;
#pragma omp simd reduction(max:m)
    for (ptrdiff_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

EM_STATIC double em_expsum_f64(double* out, const double* x, double shift, ptrdiff_t n) {
    double s = 0.0;
    if (out) {
        for (ptrdiff_t i = 0; i < n; i++) {
            double e = exp(x[i] - shift);
            out[i] = e;
            s += e;
        }
    } else {
        for (ptrdiff_t i = 0; i < n; i++) s += exp(x[i] - shift);
    }
    return s;
}

EM_STATIC void em_expaffine_f64(double* out, const double* x, double shift, double a,
                             const double* b, double c, ptrdiff_t n) {
    if (b) {
        for (ptrdiff_t i = 0; i < n; i++) out[i] = a * exp(x[i] - shift) + b[i] * c;
    } else {
        for (ptrdiff_t i = 0; i < n; i++) out[i] = a * exp(x[i] - shift) + c;
    }
}

EM_STATIC void em_lsm_bwd_f64(double* out, const double* g, const double* y, double s,
                           ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] - exp(y[i]) * s;
}

EM_CLONES EM_STATIC void em_sm_bwd_f64(double* out, const double* g, const double* y, double d,
                                    ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = y[i] * (g[i] - d);
}

EM_CLONES EM_STATIC double em_sum_f64(const double* x, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += x[i];
    return s;
}

EM_CLONES EM_STATIC double em_sqdev_f64(const double* x, double m, ptrdiff_t n) {
    double ss = 0.0;
#pragma omp simd reduction(+:ss)
    for (ptrdiff_t i = 0; i < n; i++) {
        double d = x[i] - m;
        ss += d * d;
    }
    return ss;
}

EM_CLONES EM_STATIC double em_dot_f64(const double* a, const double* b, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

EM_CLONES EM_STATIC void em_sum_dot_f64(const double* a, const double* b, ptrdiff_t n, double* sa,
                                     double* sab) {
    double s = 0.0, sp = 0.0;
#pragma omp simd reduction(+:s, sp)
    for (ptrdiff_t i = 0; i < n; i++) {
        s += a[i];
        sp += a[i] * b[i];
    }
    *sa = s;
    *sab = sp;
}

EM_CLONES EM_STATIC void em_axpb_f64(double* out, const double* x, double a, double b,
                                     ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] * a + b;
}

EM_CLONES EM_STATIC void em_caxpb_f64(double* out, const double* x, double m, double a, double b,
                                   ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] - m) * a + b;
}

EM_CLONES EM_STATIC void em_affine_wb_f64(double* out, const double* x, double a, double m,
                                       const double* w, const double* c, ptrdiff_t n) {
    if (w && c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((x[i] - m) * a) * w[i] + c[i];
    } else if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((x[i] - m) * a) * w[i];
    } else if (c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((x[i] - m) * a) + c[i];
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] - m) * a;
    }
}

EM_CLONES EM_NO_CONTRACT EM_STATIC void em_gxwb_f64(double* out, const double* g,
                                                 const double* w, const double* x, double a,
                                                 double b, double c, double m, ptrdiff_t n) {
    if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) {
            double p = g[i] * w[i];
            out[i] = ((p - c) - (x[i] - m) * b) * a;
        }
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = ((g[i] - c) - (x[i] - m) * b) * a;
    }
}

EM_CLONES EM_STATIC void em_gxb_f64(double* out, const double* g, const double* x, double a,
                                 double b, double c, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a + x[i] * b + c;
}

EM_CLONES EM_STATIC void em_acc_wb_f64(double* acc, double* acc2, const double* g, const double* x,
                                    double a, double m, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        acc[i] += g[i] * ((x[i] - m) * a);
        acc2[i] += g[i];
    }
}

/* *s1 = sum(g * w), *s2 = sum(g * w * x)   (w NULL: 1; float64 accumulators) */
EM_CLONES EM_STATIC void em_sum_dot_w_f64(const double* g, const double* w, const double* x,
                                           ptrdiff_t n,
                                       double* s1, double* s2) {
    double a = 0.0, b = 0.0;
    if (w) {
#pragma omp simd reduction(+:a, b)
        for (ptrdiff_t i = 0; i < n; i++) {
            double gw = g[i] * w[i];
            a += gw;
            b += gw * x[i];
        }
    } else {
#pragma omp simd reduction(+:a, b)
        for (ptrdiff_t i = 0; i < n; i++) {
            a += g[i];
            b += g[i] * x[i];
        }
    }
    *s1 = a;
    *s2 = b;
}

/* acc[i] += x[i];  acc2[i] += x[i]^2   (float64 accumulators) */
EM_CLONES EM_STATIC void em_acc_sumsq_f64(double* acc, double* acc2, const double* x, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        double v = x[i];
        acc[i] += v;
        acc2[i] += v * v;
    }
}

/* out[i] = g[i] * a[i] + x[i] * b[i] + c[i] */
EM_CLONES EM_STATIC void em_gxb_vec_f64(double* out, const double* g, const double* x,
                                        const double* a,
                                     const double* b, const double* c, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a[i] + x[i] * b[i] + c[i];
}

/* acc[i] += (x[i] - m[i])^2 */
EM_CLONES EM_STATIC void em_acc_sqdev_f64(double* acc, const double* x, const double* m,
                                          ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        double d = x[i] - m[i];
        acc[i] += d * d;
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
