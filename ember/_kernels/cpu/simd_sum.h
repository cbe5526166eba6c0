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
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

/* Blocked sum: four AVX2 registers of independent accumulators (32 floats or
 * 16 doubles), prefetching 2 KiB ahead; returns the sum of a[0..n). */
#define EMBER_BLOCK_SUM(NAME, T, VT, P, LANES)                                       \
__attribute__((target("avx2")))                                                    \
static T NAME(const T* a, ptrdiff_t n) {                                           \
    VT s0 = _mm256_setzero_##P(), s1 = s0, s2 = s0, s3 = s0;        \
    ptrdiff_t i = 0;                                                               \
    for (; i + 4 * LANES <= n; i += 4 * LANES) {                                   \
        __builtin_prefetch(a + i + 2048 / sizeof(T));                              \
        s0 = _mm256_add_##P(s0, _mm256_loadu_##P(a + i));              \
        s1 = _mm256_add_##P(s1, _mm256_loadu_##P(a + i + LANES));      \
        s2 = _mm256_add_##P(s2, _mm256_loadu_##P(a + i + 2 * LANES));  \
        s3 = _mm256_add_##P(s3, _mm256_loadu_##P(a + i + 3 * LANES));  \
    }                                                                              \
    s0 = _mm256_add_##P(_mm256_add_##P(s0, s1), _mm256_add_##P(s2, s3)); \
    T lanes[LANES];                                                                \
    _mm256_storeu_##P(lanes, s0);                                            \
    T r = 0;                                                                       \
    for (int k = 0; k < LANES; k++) r += lanes[k];                                 \
    for (; i < n; i++) r += a[i];                                                  \
    return r;                                                                      \
}

/* out[0] = max (is_max) or min of out[0] and a[0..n); a NaN anywhere gives NaN. */
#define EMBER_EXTREME(NAME, T, VT, P, LANES)                                         \
__attribute__((target("avx2")))                                                    \
static void NAME(T* out, const T* a, ptrdiff_t n, int is_max) {                    \
    T m0 = out[0];                                                                 \
    if (m0 != m0) return;                                                          \
    VT m = _mm256_set1_##P(m0), m2 = m, nan = _mm256_setzero_##P(); \
    ptrdiff_t i = 0;                                                               \
    for (; i + 2 * LANES <= n; i += 2 * LANES) {                                   \
        VT x = _mm256_loadu_##P(a + i);                             \
        VT y = _mm256_loadu_##P(a + i + LANES);                     \
        nan = _mm256_or_##P(nan, _mm256_cmp_##P(x, y, _CMP_UNORD_Q));  \
        m = is_max ? _mm256_max_##P(m, x) : _mm256_min_##P(m, x);      \
        m2 = is_max ? _mm256_max_##P(m2, y) : _mm256_min_##P(m2, y);   \
    }                                                                              \
    m = is_max ? _mm256_max_##P(m, m2) : _mm256_min_##P(m, m2);        \
    T lanes[LANES];                                                                \
    _mm256_storeu_##P(lanes, m);                                             \
    int any_nan = _mm256_movemask_##P(nan) != 0;                             \
    T r = lanes[0];                                                                \
    for (int k = 1; k < LANES; k++)                                                \
        r = is_max ? (lanes[k] > r ? lanes[k] : r) : (lanes[k] < r ? lanes[k] : r); \
    for (; i < n; i++) {                                                           \
        T v = a[i];                                                                \
        if (v != v) any_nan = 1;                                                   \
        else if (is_max ? v > r : v < r) r = v;                                    \
    }                                                                              \
    out[0] = any_nan ? (T)NAN : r;                                                 \
}

/* out[0] = max (is_max) or min of out[0] and a[0..n) for 8/16/32-bit integers. */
#define EMBER_EXTREME_INT(NAME, T, SFX)                                            \
__attribute__((target("avx2")))                                                    \
static void NAME(T* out, const T* a, ptrdiff_t n, int is_max) {                    \
    enum { LANES = 32 / sizeof(T) };                                               \
    T lanes[LANES], r = out[0];                                                    \
    ptrdiff_t i = 0;                                                               \
    if (n >= 2 * LANES) {                                                          \
        for (int k = 0; k < LANES; k++) lanes[k] = r;                              \
        __m256i m = _mm256_loadu_si256((const __m256i*)lanes), m2 = m;             \
        for (; i + 2 * LANES <= n; i += 2 * LANES) {                               \
            __m256i x = _mm256_loadu_si256((const __m256i*)(a + i));               \
            __m256i y = _mm256_loadu_si256((const __m256i*)(a + i + LANES));       \
            m = is_max ? _mm256_max_##SFX(m, x) : _mm256_min_##SFX(m, x);          \
            m2 = is_max ? _mm256_max_##SFX(m2, y) : _mm256_min_##SFX(m2, y);       \
        }                                                                          \
        m = is_max ? _mm256_max_##SFX(m, m2) : _mm256_min_##SFX(m, m2);            \
        _mm256_storeu_si256((__m256i*)lanes, m);                                   \
        for (int k = 0; k < LANES; k++)                                            \
            r = is_max ? (lanes[k] > r ? lanes[k] : r) : (lanes[k] < r ? lanes[k] : r); \
    }                                                                              \
    for (; i < n; i++) r = is_max ? (a[i] > r ? a[i] : r) : (a[i] < r ? a[i] : r); \
    out[0] = r;                                                                    \
}

EMBER_BLOCK_SUM(ember_block_sum_f32_avx2, float, __m256, ps, 8)
EMBER_BLOCK_SUM(ember_block_sum_f64_avx2, double, __m256d, pd, 4)
EMBER_EXTREME(ember_extreme_f32_avx2, float, __m256, ps, 8)
EMBER_EXTREME(ember_extreme_f64_avx2, double, __m256d, pd, 4)
EMBER_EXTREME_INT(ember_extreme_i8_avx2, int8_t, epi8)
EMBER_EXTREME_INT(ember_extreme_i16_avx2, int16_t, epi16)
EMBER_EXTREME_INT(ember_extreme_i32_avx2, int32_t, epi32)
EMBER_EXTREME_INT(ember_extreme_u8_avx2, uint8_t, epu8)
EMBER_EXTREME_INT(ember_extreme_u16_avx2, uint16_t, epu16)
EMBER_EXTREME_INT(ember_extreme_u32_avx2, uint32_t, epu32)

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
#define EMBER_NO_AVX2_STUB(NAME, T) \
static void NAME(T* out, const T* a, ptrdiff_t n, int is_max) { (void)out; (void)a; (void)n; (void)is_max; }
EMBER_NO_AVX2_STUB(ember_extreme_i8_avx2, int8_t)
EMBER_NO_AVX2_STUB(ember_extreme_i16_avx2, int16_t)
EMBER_NO_AVX2_STUB(ember_extreme_i32_avx2, int32_t)
EMBER_NO_AVX2_STUB(ember_extreme_u8_avx2, uint8_t)
EMBER_NO_AVX2_STUB(ember_extreme_u16_avx2, uint16_t)
EMBER_NO_AVX2_STUB(ember_extreme_u32_avx2, uint32_t)
static int ember_cpu_has_avx2(void) { return 0; }

#endif
#endif
