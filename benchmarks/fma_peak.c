/* fma_peak.c: this CPU's float32 FMA peak on one core (GFLOP/s), the ceiling any GEMM
 * kernel here can reach: 16 independent chains of 512-bit fused multiply-adds (enough to
 * cover the FMA latency), no memory traffic.  Issue #25's floor for the Transformer step
 * (benchmarks/README.md) divides the step's GEMM FLOPs by this rate.
 *
 *     cc -O2 -mavx512f -o /tmp/fma_peak benchmarks/fma_peak.c && /tmp/fma_peak
 *     (/tmp/fma_peak & /tmp/fma_peak & wait)        # both cores at once
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

int main(void) {
    __m512 acc[16];
    const __m512 mul = _mm512_set1_ps(1.0000001f), add = _mm512_set1_ps(1e-8f);
    for (int i = 0; i < 16; i++)
        acc[i] = _mm512_set1_ps((float)i);
    const long iters = 200000000;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    float sink = 0.0f;                  /* keeps the chains live */
    for (int i = 0; i < 16; i++)
        sink += _mm512_reduce_add_ps(acc[i]);
    printf("%.1f GFLOP/s per core (checksum %g)\n", (double)iters * 16 * 32 / s / 1e9,
           (double)sink);
    return 0;
}
