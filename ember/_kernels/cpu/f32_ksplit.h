/* f32_ksplit.h: one float32 product (f32_gemm.h's kernel) over several threads by ranges
 * of K, for products whose K is long against M and N (gemm.pyx decides when).
 *
 * A split by rows or columns makes every thread pack the whole of the other operand
 * (K x min(M, N) elements each); a split of K packs every element once, at the price of
 * adding the (threads - 1) M x N partial sums at the end.  In one OpenMP parallel region:
 * part p sums k in [kb[p], kb[p + 1]), part 0 into C, the others into their thread's
 * scratch (em_f32_gemm_scratch; row stride N rounded up to 16), raw (alpha 1, no bias);
 * a barrier; then each thread adds the partial sums into its share of C's rows, left to
 * right (part 0 + part 1 + ..., each addition rounded), and applies alpha and the bias
 * as the kernel's last K block does (product rounded, then the bias added, rounded).
 * An element is thus a different sequence of roundings than on one thread: the last
 * bits depend on the number of parts (deterministic for a given number).
 */
#ifndef EM_F32_KSPLIT_H
#define EM_F32_KSPLIT_H

#include "f32_gemm.h"
#ifdef _OPENMP
#include <omp.h>
#endif

enum { EM_KS_MAX_PARTS = 16 };

#ifdef EM_FG_X86

/* rows r0:r1 (N columns) of C (row stride ldc) = alpha * (C + P[0] + ... + P[np - 1])
 * + bias (NULL: none), P[q] at row stride ldp */
EM_FG_TARGET static void em_ks_reduce(ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t N, float *C,
                                      ptrdiff_t ldc, float *const *P, int np, ptrdiff_t ldp,
                                      float alpha, const float *bias) {
    const __m512 al = _mm512_set1_ps(alpha);
    const int scale = alpha != 1.0f, add = bias != NULL;
    for (ptrdiff_t i = r0; i < r1; i++) {
        float *c = C + i * ldc;
        for (ptrdiff_t j = 0; j < N; j += 16) {
            __mmask16 m = N - j >= 16 ? (__mmask16)0xffff
                                      : (__mmask16)(((uint32_t)1 << (N - j)) - 1);
            __m512 s = _mm512_maskz_loadu_ps(m, c + j);
            for (int q = 0; q < np; q++)
                s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, P[q] + i * ldp + j));
            __m512 bv = add ? _mm512_maskz_loadu_ps(m, bias + j) : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(c + j, m, em_fg_epi(s, al, bv, scale, add));
        }
    }
}

/* C (M x N, row stride ldc) = alpha * (A @ B) + bias with parts (2 ..
 * EM_KS_MAX_PARTS) ranges of K, bounds kb[0] = 0 < ... <= kb[parts] = K; strides as
 * em_f32_gemm's.  no_scratch (a testing hook) makes every scratch request fail.
 * Returns 0, or -1 when a scratch buffer or the kernel had no memory (C then holds
 * garbage: the caller computes the product another way). */
static int em_f32_gemm_ksplit(int parts, ptrdiff_t M, ptrdiff_t N, const ptrdiff_t *kb,
                              const float *A, ptrdiff_t sam, ptrdiff_t sak, const float *B,
                              ptrdiff_t sbk, ptrdiff_t sbn, float *C, ptrdiff_t ldc,
                              float alpha, const float *bias, int no_scratch) {
    float *P[EM_KS_MAX_PARTS];
    int failed[EM_KS_MAX_PARTS];
    const ptrdiff_t ldp = (N + 15) / 16 * 16;
    int bad = 0;
    if (parts < 2 || parts > EM_KS_MAX_PARTS)
        return -1;
#ifdef _OPENMP
#pragma omp parallel num_threads(parts)
#endif
    {
        int tid = 0, nth = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        nth = omp_get_num_threads();
#endif
        /* one part per thread, normally; a thread with several takes one scratch for
         * all of its parts past the first of the product */
        int mine = 0;
        for (int p = tid; p < parts; p += nth)
            mine += p > 0;
        float *scratch = mine == 0 || no_scratch ? NULL
                       : em_f32_gemm_scratch((size_t)(mine * M * ldp));
        for (int p = tid, q = 0; p < parts; p += nth) {
            float *dst = C;
            ptrdiff_t ldd = ldc, k0 = kb[p];
            failed[p] = 0;
            if (p > 0) {
                dst = scratch == NULL ? NULL : scratch + (q++) * M * ldp;
                P[p] = dst;
                ldd = ldp;
            }
            if (dst == NULL || em_f32_gemm(M, N, kb[p + 1] - k0, A + k0 * sak, sam, sak,
                                           B + k0 * sbk, sbk, sbn, dst, ldd, 1.0f, NULL) != 0)
                failed[p] = 1;
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        int any = 0;
        for (int p = 0; p < parts; p++)
            any |= failed[p];
        if (!any)
            em_ks_reduce(M * tid / nth, M * (tid + 1) / nth, N, C, ldc, P + 1, parts - 1, ldp,
                         alpha, bias);
        if (tid == 0)
            bad = any;
    }
    return bad ? -1 : 0;
}

#else   /* no AVX-512 build: never selected */

static int em_f32_gemm_ksplit(int parts, ptrdiff_t M, ptrdiff_t N, const ptrdiff_t *kb,
                              const float *A, ptrdiff_t sam, ptrdiff_t sak, const float *B,
                              ptrdiff_t sbk, ptrdiff_t sbn, float *C, ptrdiff_t ldc,
                              float alpha, const float *bias, int no_scratch) {
    (void)parts; (void)M; (void)N; (void)kb; (void)A; (void)sam; (void)sak; (void)B;
    (void)sbk; (void)sbn; (void)C; (void)ldc; (void)alpha; (void)bias; (void)no_scratch;
    return -1;
}

#endif

#endif
