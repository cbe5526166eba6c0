/* Blocked sums of contiguous float/double runs with 32 (16) independent
 * accumulators in AVX2 registers, used as the base case of ember's pairwise
 * summation.  The AVX2 code is compiled with a target attribute and chosen at
 * run time (ember_cpu_has_avx2), so the module still runs on any x86-64 CPU;
 * elsewhere plain loops stand in. */
#ifndef EMBER_SIMD_SUM_H
#define EMBER_SIMD_SUM_H

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
static int ember_cpu_has_avx2(void) { return 0; }

#endif
#endif
