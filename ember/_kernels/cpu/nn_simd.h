/* Vector primitives for ember's softmax, loss and normalization kernels
 * (softmax.pyx, norm.pyx): row maxima, exp-and-sum, sums and sums of squares
 * with float64 accumulators, dot products.  Each works on one contiguous run.
 *
 * The loops are plain C with `#pragma omp simd` (which lets the compiler
 * reassociate the sums into vector lanes) and are compiled twice through
 * target_clones: for x86-64-v3 (AVX2 + FMA) and for the baseline, chosen once
 * at load time.  exp is a branch-free Cephes-style polynomial (about 1 ulp)
 * that vectorizes; it is only used on arguments <= ~88 (softmax shifts by the
 * row maximum first), returns exactly 0 below -87.3 and propagates NaN. */
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

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define EM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define EM_CLONES
#endif

#if defined(__GNUC__)
#define EM_INLINE static inline __attribute__((always_inline))   /* into each clone */
#else
#define EM_INLINE static inline
#endif

typedef union { float f; uint32_t u; } em_f32bits;

EM_INLINE float em_expf(float x) {
    const float magic = 12582912.0f;                 /* 1.5 * 2^23: rounds to integer */
    float xc = x < -87.5f ? -87.5f : x;              /* NaN passes through */
    float t = xc * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    em_f32bits tb, sb;
    tb.f = t;
    sb.u = (tb.u << 23) + 0x3F800000u;               /* 2^n */
    return x < -87.33654f ? 0.0f : p * sb.f;
}

/* ---- float32 ---- */

EM_CLONES static float em_max_f32(const float* x, ptrdiff_t n) {
    float m = -INFINITY;
#pragma omp simd reduction(max:m)
    for (ptrdiff_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* sum of exp(x[i] - shift); out[i] = exp(x[i] - shift) when out is not NULL */
EM_CLONES static float em_expsum_f32(float* out, const float* x, float shift, ptrdiff_t n) {
    float s = 0.0f;
    if (out) {
#pragma omp simd reduction(+:s)
        for (ptrdiff_t i = 0; i < n; i++) {
            float e = em_expf(x[i] - shift);
            out[i] = e;
            s += e;
        }
    } else {
#pragma omp simd reduction(+:s)
        for (ptrdiff_t i = 0; i < n; i++) s += em_expf(x[i] - shift);
    }
    return s;
}

/* out[i] = a * exp(x[i] - shift) + b[i]*c  (b may be NULL: + 0) */
EM_CLONES static void em_expaffine_f32(float* out, const float* x, float shift, float a,
                                       const float* b, float c, ptrdiff_t n) {
    if (b) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = a * em_expf(x[i] - shift) + b[i] * c;
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = a * em_expf(x[i] - shift) + c;
    }
}

/* out[i] = g[i] - exp(y[i]) * s   (log_softmax backward) */
EM_CLONES static void em_lsm_bwd_f32(float* out, const float* g, const float* y, float s,
                                     ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] - em_expf(y[i]) * s;
}

/* out[i] = y[i] * (g[i] - d)   (softmax backward) */
EM_CLONES static void em_sm_bwd_f32(float* out, const float* g, const float* y, float d,
                                    ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = y[i] * (g[i] - d);
}

EM_CLONES static double em_sum_f32(const float* x, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}

EM_CLONES static void em_sum_sumsq_f32(const float* x, ptrdiff_t n, double* sum, double* sumsq) {
    double s = 0.0, ss = 0.0;
#pragma omp simd reduction(+:s, ss)
    for (ptrdiff_t i = 0; i < n; i++) {
        double v = (double)x[i];
        s += v;
        ss += v * v;
    }
    *sum = s;
    *sumsq = ss;
}

/* sum((x - m)^2) */
EM_CLONES static double em_sqdev_f32(const float* x, double m, ptrdiff_t n) {
    double ss = 0.0;
#pragma omp simd reduction(+:ss)
    for (ptrdiff_t i = 0; i < n; i++) {
        double d = (double)x[i] - m;
        ss += d * d;
    }
    return ss;
}

EM_CLONES static double em_dot_f32(const float* a, const float* b, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

/* *sa = sum(a), *sab = sum(a*b) */
EM_CLONES static void em_sum_dot_f32(const float* a, const float* b, ptrdiff_t n, double* sa,
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
EM_CLONES static void em_axpb_f32(float* out, const float* x, float a, float b, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] * a + b;
}

/* out[i] = (x[i] * a + b) * w[i] + c[i]  (w, c may be NULL: 1, 0) */
EM_CLONES static void em_affine_wb_f32(float* out, const float* x, float a, float b,
                                       const float* w, const float* c, ptrdiff_t n) {
    if (w && c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] * a + b) * w[i] + c[i];
    } else if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] * a + b) * w[i];
    } else if (c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] * a + b) + c[i];
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] * a + b;
    }
}

/* out[i] = g[i] * w[i] * a + x[i] * b + c   (w may be NULL: 1) */
EM_CLONES static void em_gxwb_f32(float* out, const float* g, const float* w, const float* x,
                                  float a, float b, float c, ptrdiff_t n) {
    if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * w[i] * a + x[i] * b + c;
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a + x[i] * b + c;
    }
}

/* out[i] = g[i] * a + x[i] * b + c */
EM_CLONES static void em_gxb_f32(float* out, const float* g, const float* x, float a, float b,
                                 float c, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a + x[i] * b + c;
}

/* acc[i] += g[i] * (x[i] * a + b);  acc2[i] += g[i]   (float64 accumulators) */
EM_CLONES static void em_acc_wb_f32(double* acc, double* acc2, const float* g, const float* x,
                                    double a, double b, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        acc[i] += (double)g[i] * ((double)x[i] * a + b);
        acc2[i] += (double)g[i];
    }
}

/* ---- float64 (libm exp) ---- */

EM_CLONES static double em_max_f64(const double* x, ptrdiff_t n) {
    double m = -INFINITY;
#pragma omp simd reduction(max:m)
    for (ptrdiff_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static double em_expsum_f64(double* out, const double* x, double shift, ptrdiff_t n) {
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

static void em_expaffine_f64(double* out, const double* x, double shift, double a,
                             const double* b, double c, ptrdiff_t n) {
    if (b) {
        for (ptrdiff_t i = 0; i < n; i++) out[i] = a * exp(x[i] - shift) + b[i] * c;
    } else {
        for (ptrdiff_t i = 0; i < n; i++) out[i] = a * exp(x[i] - shift) + c;
    }
}

static void em_lsm_bwd_f64(double* out, const double* g, const double* y, double s,
                           ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] - exp(y[i]) * s;
}

EM_CLONES static void em_sm_bwd_f64(double* out, const double* g, const double* y, double d,
                                    ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = y[i] * (g[i] - d);
}

EM_CLONES static double em_sum_f64(const double* x, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += x[i];
    return s;
}

EM_CLONES static void em_sum_sumsq_f64(const double* x, ptrdiff_t n, double* sum, double* sumsq) {
    double s = 0.0, ss = 0.0;
#pragma omp simd reduction(+:s, ss)
    for (ptrdiff_t i = 0; i < n; i++) {
        s += x[i];
        ss += x[i] * x[i];
    }
    *sum = s;
    *sumsq = ss;
}

EM_CLONES static double em_sqdev_f64(const double* x, double m, ptrdiff_t n) {
    double ss = 0.0;
#pragma omp simd reduction(+:ss)
    for (ptrdiff_t i = 0; i < n; i++) {
        double d = x[i] - m;
        ss += d * d;
    }
    return ss;
}

EM_CLONES static double em_dot_f64(const double* a, const double* b, ptrdiff_t n) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (ptrdiff_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

EM_CLONES static void em_sum_dot_f64(const double* a, const double* b, ptrdiff_t n, double* sa,
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

EM_CLONES static void em_axpb_f64(double* out, const double* x, double a, double b, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] * a + b;
}

EM_CLONES static void em_affine_wb_f64(double* out, const double* x, double a, double b,
                                       const double* w, const double* c, ptrdiff_t n) {
    if (w && c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] * a + b) * w[i] + c[i];
    } else if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] * a + b) * w[i];
    } else if (c) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = (x[i] * a + b) + c[i];
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = x[i] * a + b;
    }
}

EM_CLONES static void em_gxwb_f64(double* out, const double* g, const double* w, const double* x,
                                  double a, double b, double c, ptrdiff_t n) {
    if (w) {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * w[i] * a + x[i] * b + c;
    } else {
#pragma omp simd
        for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a + x[i] * b + c;
    }
}

EM_CLONES static void em_gxb_f64(double* out, const double* g, const double* x, double a,
                                 double b, double c, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] * a + x[i] * b + c;
}

EM_CLONES static void em_acc_wb_f64(double* acc, double* acc2, const double* g, const double* x,
                                    double a, double b, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        acc[i] += g[i] * (x[i] * a + b);
        acc2[i] += g[i];
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
