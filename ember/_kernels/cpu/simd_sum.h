/* AVX2 kernels for reductions of contiguous float/double runs:
 *  - blocked sums with 32 (16) independent accumulators, the base case of
 *    ember's pairwise summation;
 *  - max/min with NaN propagation (a NaN anywhere makes the result NaN).
 * The code is compiled with a target attribute and chosen at run time
 * (ember_cpu_has_avx2), so the module still runs on any x86-64 CPU;
 * elsewhere plain loops stand in. */
#ifndef EMBER_SIMD_SUM_H
#define EMBER_SIMD_SUM_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

typedef float ember_v8f __attribute__((vector_size(32)));
typedef double ember_v4d __attribute__((vector_size(32)));

__attribute__((target("avx2")))
static float ember_block_sum_f32_avx2(const float* a, ptrdiff_t n) {
    ember_v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, x0, x1, x2, x3;
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __builtin_prefetch(a + i + 512);      /* 2 KiB ahead: keeps more loads in flight */
        memcpy(&x0, a + i, 32);
        memcpy(&x1, a + i + 8, 32);
        memcpy(&x2, a + i + 16, 32);
        memcpy(&x3, a + i + 24, 32);
        s0 += x0; s1 += x1; s2 += x2; s3 += x3;
    }
    s0 = (s0 + s1) + (s2 + s3);
    float r = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
    for (; i < n; i++) r += a[i];
    return r;
}

__attribute__((target("avx2")))
static double ember_block_sum_f64_avx2(const double* a, ptrdiff_t n) {
    ember_v4d s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, x0, x1, x2, x3;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        memcpy(&x0, a + i, 32);
        memcpy(&x1, a + i + 4, 32);
        memcpy(&x2, a + i + 8, 32);
        memcpy(&x3, a + i + 12, 32);
        s0 += x0; s1 += x1; s2 += x2; s3 += x3;
    }
    s0 = (s0 + s1) + (s2 + s3);
    double r = (s0[0] + s0[1]) + (s0[2] + s0[3]);
    for (; i < n; i++) r += a[i];
    return r;
}

#include <immintrin.h>

/* out[0] = max (is_max) or min of out[0] and a[0..n); NaN propagates. */
__attribute__((target("avx2")))
static void ember_extreme_f32_avx2(float* out, const float* a, ptrdiff_t n, int is_max) {
    float m0 = out[0];
    if (m0 != m0) return;
    __m256 m = _mm256_set1_ps(m0), m2 = m, nan = _mm256_setzero_ps();
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 x = _mm256_loadu_ps(a + i), y = _mm256_loadu_ps(a + i + 8);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, y, _CMP_UNORD_Q));
        m = is_max ? _mm256_max_ps(m, x) : _mm256_min_ps(m, x);
        m2 = is_max ? _mm256_max_ps(m2, y) : _mm256_min_ps(m2, y);
    }
    m = is_max ? _mm256_max_ps(m, m2) : _mm256_min_ps(m, m2);
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    int any_nan = _mm256_movemask_ps(nan) != 0;
    float r = lanes[0];
    for (int k = 1; k < 8; k++) r = is_max ? (lanes[k] > r ? lanes[k] : r) : (lanes[k] < r ? lanes[k] : r);
    for (; i < n; i++) {
        float v = a[i];
        if (v != v) any_nan = 1;
        else if (is_max ? v > r : v < r) r = v;
    }
    out[0] = any_nan ? (float)NAN : r;
}

__attribute__((target("avx2")))
static void ember_extreme_f64_avx2(double* out, const double* a, ptrdiff_t n, int is_max) {
    double m0 = out[0];
    if (m0 != m0) return;
    __m256d m = _mm256_set1_pd(m0), m2 = m, nan = _mm256_setzero_pd();
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d x = _mm256_loadu_pd(a + i), y = _mm256_loadu_pd(a + i + 4);
        nan = _mm256_or_pd(nan, _mm256_cmp_pd(x, y, _CMP_UNORD_Q));
        m = is_max ? _mm256_max_pd(m, x) : _mm256_min_pd(m, x);
        m2 = is_max ? _mm256_max_pd(m2, y) : _mm256_min_pd(m2, y);
    }
    m = is_max ? _mm256_max_pd(m, m2) : _mm256_min_pd(m, m2);
    double lanes[4];
    _mm256_storeu_pd(lanes, m);
    int any_nan = _mm256_movemask_pd(nan) != 0;
    double r = lanes[0];
    for (int k = 1; k < 4; k++) r = is_max ? (lanes[k] > r ? lanes[k] : r) : (lanes[k] < r ? lanes[k] : r);
    for (; i < n; i++) {
        double v = a[i];
        if (v != v) any_nan = 1;
        else if (is_max ? v > r : v < r) r = v;
    }
    out[0] = any_nan ? (double)NAN : r;
}

static int ember_cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
}

#else

static float ember_block_sum_f32_avx2(const float* a, ptrdiff_t n) {
    float r = 0; for (ptrdiff_t i = 0; i < n; i++) r += a[i]; return r;
}
static double ember_block_sum_f64_avx2(const double* a, ptrdiff_t n) {
    double r = 0; for (ptrdiff_t i = 0; i < n; i++) r += a[i]; return r;
}
static void ember_extreme_f32_avx2(float* out, const float* a, ptrdiff_t n, int is_max) {
    (void)out; (void)a; (void)n; (void)is_max;   /* never called: no AVX2 here */
}
static void ember_extreme_f64_avx2(double* out, const double* a, ptrdiff_t n, int is_max) {
    (void)out; (void)a; (void)n; (void)is_max;
}
static int ember_cpu_has_avx2(void) { return 0; }

#endif
#endif
