/* bf16_gemm.h: C = A @ B for bfloat16 A (M x K) and B (K x N) with the CPU's AVX512-BF16
 * dot products (vdpbf16ps: float32 lanes += the products of a pair of bfloat16s), float32
 * accumulators, each result rounded once (to bfloat16, round-to-nearest-even) or stored as
 * float32.  Used by gemm.pyx where the CPU has AVX512-BF16 (em_bf16_gemm_supported());
 * elsewhere the 16-bit product widens to float32 and runs sgemm.
 *
 * Layout (GotoBLAS-style): A is packed into panels of EM_BG_MR rows, B into panels of
 * EM_BG_NR columns; both hold k in pairs (element k in the low half of a 32-bit word,
 * k + 1 in the high half; an odd K gets a zero partner), so one broadcast word of A times
 * one vector of B is 16 columns' pair of products.  The micro-kernel keeps a 12 x 32 tile
 * of C in 24 registers.  Operands may have any element strides (negative, zero, transposed);
 * C has unit column stride.  Blocks: K in EM_BG_KC, rows in EM_BG_MC, columns in EM_BG_NC;
 * when K spans several blocks the float32 C accumulates (a bfloat16 C needs K <= EM_BG_KC:
 * the caller passes a float32 C otherwise).  Single-threaded: gemm.pyx splits the work.
 *
 * Denormal inputs and outputs of vdpbf16ps are flushed to zero (the instruction's rule);
 * the sum's order differs from float32-then-round, so results agree with a float32 GEMM
 * within K-dependent rounding, not bit for bit.
 */
#ifndef EM_BF16_GEMM_H
#define EM_BF16_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { EM_BG_MR = 12, EM_BG_NR = 32, EM_BG_KC = 1024, EM_BG_MC = 144, EM_BG_NC = 1024 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define EM_BG_X86 1
#endif
#if defined(__x86_64__) && defined(__clang__) && __clang_major__ >= 11
#define EM_BG_X86 1
#endif

#ifdef EM_BG_X86
#include <immintrin.h>
#include <pthread.h>
#define EM_BG_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

static int em_bf16_gemm_supported(void) {
    static int s = -1;
    if (s < 0) {
        __builtin_cpu_init();
        s = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
            && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
            && __builtin_cpu_supports("avx512bf16");
    }
    return s;
}

/* per-thread packing buffers, grown on demand and kept (OpenMP threads persist); freed
 * when their thread exits (a pthread key's destructor), so short-lived threads leak nothing */
typedef struct { uint32_t *buf[2]; size_t cap[2]; } em_bg_bufs;
static pthread_key_t em_bg_key;
static pthread_once_t em_bg_once = PTHREAD_ONCE_INIT;
static int em_bg_key_ok;

static void em_bg_free_bufs(void *p) {
    em_bg_bufs *b = (em_bg_bufs *)p;
    free(b->buf[0]);
    free(b->buf[1]);
    free(b);
}

static void em_bg_make_key(void) {
    em_bg_key_ok = pthread_key_create(&em_bg_key, em_bg_free_bufs) == 0;
}

static uint32_t *em_bg_buffer(int which, size_t words) {
    pthread_once(&em_bg_once, em_bg_make_key);
    if (!em_bg_key_ok)
        return NULL;
    em_bg_bufs *b = (em_bg_bufs *)pthread_getspecific(em_bg_key);
    if (b == NULL) {
        b = (em_bg_bufs *)calloc(1, sizeof(em_bg_bufs));
        if (b == NULL || pthread_setspecific(em_bg_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->cap[which] < words) {
        free(b->buf[which]);
        size_t bytes = (words * 4 + 63) & ~(size_t)63;
        b->buf[which] = (uint32_t *)aligned_alloc(64, bytes);
        b->cap[which] = b->buf[which] ? words : 0;
    }
    return b->buf[which];
}

static inline uint32_t em_bg_pair(const uint16_t *p, ptrdiff_t s, int has2) {
    return (uint32_t)p[0] | (has2 ? (uint32_t)p[s] << 16 : 0u);
}

/* r[j] word q -> r[q] word j (a 16 x 16 transpose of 32-bit words) */
EM_BG_TARGET static inline __attribute__((always_inline)) void em_bg_transpose16(__m512i *r) {
    __m512i a[16], b[16];
    for (int k = 0; k < 8; k++) {       /* words 4l+{0,1} / 4l+{2,3} of rows 2k, 2k+1 */
        a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) {       /* b[4k+e] lane l: word 4l+e of rows 4k..4k+3 */
        b[4 * k] = _mm512_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm512_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm512_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm512_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
    }
    for (int e = 0; e < 4; e++) {       /* 4 x 4 transpose of 128-bit lanes */
        __m512i c0 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0x44);
        __m512i c1 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0xEE);
        __m512i c2 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0x44);
        __m512i c3 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0xEE);
        r[e] = _mm512_shuffle_i32x4(c0, c2, 0x88);
        r[4 + e] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
        r[8 + e] = _mm512_shuffle_i32x4(c1, c3, 0x88);
        r[12 + e] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
    }
}

/* n lines (line stride ls) of kc elements (element stride es) -> k pairs interleaved
 * across a panel `width` lines wide (line l of pair p at d[p * width + l]); lines n..width
 * are zeros; the odd last element gets a zero partner.  The strided fallback of both
 * packers (A's rows, B's columns). */
EM_BG_TARGET static void em_bg_pack_lines(const uint16_t *src, ptrdiff_t n, ptrdiff_t ls,
                                          ptrdiff_t es, ptrdiff_t kfull, ptrdiff_t kp,
                                          ptrdiff_t width, uint32_t *d) {
    for (ptrdiff_t l = 0; l < n; l++) {
        const uint16_t *line = src + l * ls;
        uint32_t *dl = d + l;
        if (es == 1) {
            for (ptrdiff_t p = 0; p < kfull; p++) {
                uint32_t w;
                memcpy(&w, line + 2 * p, 4);
                dl[p * width] = w;
            }
        } else {
            for (ptrdiff_t p = 0; p < kfull; p++)
                dl[p * width] = em_bg_pair(line + 2 * p * es, es, 1);
        }
        if (kp > kfull)
            dl[kfull * width] = line[2 * kfull * es];
    }
    for (ptrdiff_t l = n; l < width; l++)
        for (ptrdiff_t p = 0; p < kp; p++)
            d[p * width + l] = 0;
}

/* kc x nc block of B (element strides sbk, sbn) -> panels of NR columns, kp = ceil(kc/2)
 * words per column, panel q at dst + q * kp * NR; missing columns are zeros */
EM_BG_TARGET static void em_bg_pack_b(ptrdiff_t kc, ptrdiff_t nc, const uint16_t *b,
                                      ptrdiff_t sbk, ptrdiff_t sbn, uint32_t *dst) {
    ptrdiff_t kp = (kc + 1) / 2, kfull = kc / 2;
    for (ptrdiff_t j0 = 0; j0 < nc; j0 += EM_BG_NR) {
        ptrdiff_t nr = nc - j0 < EM_BG_NR ? nc - j0 : EM_BG_NR;
        uint32_t *d = dst + (j0 / EM_BG_NR) * kp * EM_BG_NR;
        const uint16_t *bj = b + j0 * sbn;
        if (sbn == 1) {                         /* rows contiguous: widen and interleave */
            __mmask32 m = nr == 32 ? 0xffffffffu : (((__mmask32)1 << nr) - 1);
            __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);
            for (ptrdiff_t p = 0; p < kp; p++) {
                const uint16_t *r0 = bj + 2 * p * sbk;
                __m512i lo0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m0, r0));
                __m512i lo1 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, r0 + 16));
                if (2 * p + 1 < kc) {
                    const uint16_t *r1 = r0 + sbk;
                    __m512i hi0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m0, r1));
                    __m512i hi1 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, r1 + 16));
                    lo0 = _mm512_or_si512(lo0, _mm512_slli_epi32(hi0, 16));
                    lo1 = _mm512_or_si512(lo1, _mm512_slli_epi32(hi1, 16));
                }
                _mm512_store_si512((void *)(d + p * EM_BG_NR), lo0);
                _mm512_store_si512((void *)(d + p * EM_BG_NR + 16), lo1);
            }
        } else if (sbk == 1 && sbn > 0 && sbn < ((ptrdiff_t)1 << 25)) {
            /* columns contiguous: gather the pair words of 16 columns at a time */
            __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8,
                                                              7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi32((int)sbn));
            __mmask32 m = nr == 32 ? 0xffffffffu : (((__mmask32)1 << nr) - 1);
            __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);
            const uint16_t *bj16 = bj + 16 * sbn;
            ptrdiff_t p0 = 0;
            for (; p0 + 16 <= kfull; p0 += 16) {   /* 16 x 16 word blocks: transposes */
                for (int h = 0; h < 2; h++) {
                    __m512i r[16];
                    for (int j = 0; j < 16; j++)
                        r[j] = 16 * h + j < nr ? _mm512_loadu_si512(
                            (const void *)(bj + (16 * h + j) * sbn + 2 * p0))
                            : _mm512_setzero_si512();
                    em_bg_transpose16(r);
                    for (int q = 0; q < 16; q++)
                        _mm512_store_si512((void *)(d + (p0 + q) * EM_BG_NR + 16 * h), r[q]);
                }
            }
            for (ptrdiff_t p = p0; p < kfull; p++) {
                __m512i w0 = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m0, idx,
                                                         (const void *)(bj + 2 * p), 2);
                __m512i w1 = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m1, idx,
                                                         (const void *)(bj16 + 2 * p), 2);
                _mm512_store_si512((void *)(d + p * EM_BG_NR), w0);
                _mm512_store_si512((void *)(d + p * EM_BG_NR + 16), w1);
            }
            if (kp > kfull) {
                for (ptrdiff_t j = 0; j < EM_BG_NR; j++)
                    d[kfull * EM_BG_NR + j] = j < nr ? bj[j * sbn + 2 * kfull] : 0;
            }
        } else {                                /* neither axis contiguous */
            em_bg_pack_lines(bj, nr, sbn, sbk, kfull, kp, EM_BG_NR, d);
        }
    }
}

/* mc x kc block of A (element strides sam, sak) -> panels of MR rows, panel r at
 * dst + r * kp * MR; missing rows are zeros */
EM_BG_TARGET static void em_bg_pack_a(ptrdiff_t mc, ptrdiff_t kc, const uint16_t *a,
                                      ptrdiff_t sam, ptrdiff_t sak, uint32_t *dst) {
    ptrdiff_t kp = (kc + 1) / 2, kfull = kc / 2;
    for (ptrdiff_t i0 = 0; i0 < mc; i0 += EM_BG_MR) {
        ptrdiff_t mr = mc - i0 < EM_BG_MR ? mc - i0 : EM_BG_MR;
        uint32_t *d = dst + (i0 / EM_BG_MR) * kp * EM_BG_MR;
        const uint16_t *ai = a + i0 * sam;
        if (sam == 1) {                         /* columns contiguous: widen and interleave */
            __mmask16 m = (__mmask16)((1u << mr) - 1);
            for (ptrdiff_t p = 0; p < kp; p++) {
                const uint16_t *c0 = ai + 2 * p * sak;
                __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, c0));
                if (2 * p + 1 < kc) {
                    __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, c0 + sak));
                    lo = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
                }
                _mm512_mask_storeu_epi32((void *)(d + p * EM_BG_MR), 0x0fff, lo);
            }
        } else {
            em_bg_pack_lines(ai, mr, sam, sak, kfull, kp, EM_BG_MR, d);
        }
    }
}

#define EM_BG_DP(i) do { \
        __m512bh ai_ = (__m512bh)_mm512_set1_epi32(ap[(i) * ais]); \
        c##i##a = _mm512_dpbf16_ps(c##i##a, ai_, b0); \
        c##i##b = _mm512_dpbf16_ps(c##i##b, ai_, b1); \
    } while (0)
#define EM_BG_ST(i) do { \
        _mm512_store_ps(tile[i], c##i##a); _mm512_store_ps(tile[i] + 16, c##i##b); \
    } while (0)

/* the 12 x 32 tile over kp pairs; rows < mr and columns < nr go to C: stored (first K
 * block), added to (later blocks), or rounded to bfloat16 (c16).  Pair p of row i of A is
 * the word pa[p * aps + i * ais]: a packed panel (aps = MR, ais = 1) or A itself (rows
 * of contiguous pairs: aps = 1, ais = the row stride in words) */
EM_BG_TARGET static inline __attribute__((always_inline)) void em_bg_tile(
        ptrdiff_t kp, const uint32_t *pa, ptrdiff_t aps, ptrdiff_t ais, const uint32_t *pb,
        ptrdiff_t mr, ptrdiff_t nr, void *c, ptrdiff_t ldc, int c16, int accumulate) {
    __m512 c0a = _mm512_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a,
           c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a, c6a = c0a,
           c6b = c0a, c7a = c0a, c7b = c0a, c8a = c0a, c8b = c0a, c9a = c0a, c9b = c0a,
           c10a = c0a, c10b = c0a, c11a = c0a, c11b = c0a;
    for (ptrdiff_t p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512((const void *)(pb + p * EM_BG_NR));
        __m512bh b1 = (__m512bh)_mm512_load_si512((const void *)(pb + p * EM_BG_NR + 16));
        const int *ap = (const int *)(pa + p * aps);
        EM_BG_DP(0); EM_BG_DP(1); EM_BG_DP(2); EM_BG_DP(3); EM_BG_DP(4); EM_BG_DP(5);
        EM_BG_DP(6); EM_BG_DP(7); EM_BG_DP(8); EM_BG_DP(9); EM_BG_DP(10); EM_BG_DP(11);
    }
    float tile[EM_BG_MR][EM_BG_NR] __attribute__((aligned(64)));
    EM_BG_ST(0); EM_BG_ST(1); EM_BG_ST(2); EM_BG_ST(3); EM_BG_ST(4); EM_BG_ST(5);
    EM_BG_ST(6); EM_BG_ST(7); EM_BG_ST(8); EM_BG_ST(9); EM_BG_ST(10); EM_BG_ST(11);
    __mmask32 m = nr == 32 ? 0xffffffffu : (((__mmask32)1 << nr) - 1);
    __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);
    for (ptrdiff_t i = 0; i < mr; i++) {
        __m512 t0 = _mm512_load_ps(tile[i]), t1 = _mm512_load_ps(tile[i] + 16);
        if (c16) {
            uint16_t *row = (uint16_t *)c + i * ldc;
            _mm256_mask_storeu_epi16(row, m0, (__m256i)_mm512_cvtneps_pbh(t0));
            _mm256_mask_storeu_epi16(row + 16, m1, (__m256i)_mm512_cvtneps_pbh(t1));
        } else {
            float *row = (float *)c + i * ldc;
            if (accumulate) {
                t0 = _mm512_add_ps(t0, _mm512_maskz_loadu_ps(m0, row));
                t1 = _mm512_add_ps(t1, _mm512_maskz_loadu_ps(m1, row + 16));
            }
            _mm512_mask_storeu_ps(row, m0, t0);
            _mm512_mask_storeu_ps(row + 16, m1, t1);
        }
    }
}
#undef EM_BG_DP
#undef EM_BG_ST

EM_BG_TARGET static void em_bg_kernel(ptrdiff_t kp, const uint32_t *pa, const uint32_t *pb,
                                      ptrdiff_t mr, ptrdiff_t nr, void *c, ptrdiff_t ldc,
                                      int c16, int accumulate) {
    em_bg_tile(kp, pa, EM_BG_MR, 1, pb, mr, nr, c, ldc, c16, accumulate);
}

EM_BG_TARGET static void em_bg_kernel_direct(ptrdiff_t kp, const uint32_t *a, ptrdiff_t lda,
                                             const uint32_t *pb, ptrdiff_t nr, void *c,
                                             ptrdiff_t ldc, int c16, int accumulate) {
    em_bg_tile(kp, a, 1, lda, pb, EM_BG_MR, nr, c, ldc, c16, accumulate);
}

/* C (M x N, row stride ldc elements, unit column stride; bfloat16 when c16 else float32)
 * = A (M x K, strides sam, sak) @ B (K x N, strides sbk, sbn); strides in elements.
 * M, N, K > 0; c16 needs K <= EM_BG_KC.  Returns -1 when out of memory (C untouched
 * for the first block), else 0. */
EM_BG_TARGET static int em_bf16_gemm(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K,
                                     const uint16_t *A, ptrdiff_t sam, ptrdiff_t sak,
                                     const uint16_t *B, ptrdiff_t sbk, ptrdiff_t sbn,
                                     void *C, ptrdiff_t ldc, int c16) {
    ptrdiff_t kcmax = K < EM_BG_KC ? K : EM_BG_KC;
    ptrdiff_t kpmax = (kcmax + 1) / 2;
    ptrdiff_t ncmax = N < EM_BG_NC ? N : EM_BG_NC;
    ptrdiff_t mcmax = M < EM_BG_MC ? M : EM_BG_MC;
    ncmax = (ncmax + EM_BG_NR - 1) / EM_BG_NR * EM_BG_NR;
    mcmax = (mcmax + EM_BG_MR - 1) / EM_BG_MR * EM_BG_MR;
    uint32_t *pb = em_bg_buffer(0, (size_t)(kpmax * ncmax));
    uint32_t *pa = em_bg_buffer(1, (size_t)(kpmax * mcmax));
    if (pa == NULL || pb == NULL)
        return -1;
    size_t esz = c16 ? 2 : 4;
    for (ptrdiff_t jc = 0; jc < N; jc += EM_BG_NC) {
        ptrdiff_t nc = N - jc < EM_BG_NC ? N - jc : EM_BG_NC;
        for (ptrdiff_t pc = 0; pc < K; pc += EM_BG_KC) {
            ptrdiff_t kc = K - pc < EM_BG_KC ? K - pc : EM_BG_KC, kp = (kc + 1) / 2;
            em_bg_pack_b(kc, nc, B + pc * sbk + jc * sbn, sbk, sbn, pb);
            for (ptrdiff_t ic = 0; ic < M; ic += EM_BG_MC) {
                ptrdiff_t mc = M - ic < EM_BG_MC ? M - ic : EM_BG_MC;
                /* A read in place: rows of whole pairs (unit stride, even K block and row
                 * stride, aligned to 4 bytes); only a last partial row panel is packed */
                const uint16_t *ablk = A + ic * sam + pc * sak;
                int direct = sak == 1 && kc % 2 == 0 && sam % 2 == 0
                             && ((uintptr_t)ablk & 3) == 0;
                ptrdiff_t mfull = direct ? mc / EM_BG_MR * EM_BG_MR : 0;
                if (mfull < mc)
                    em_bg_pack_a(mc - mfull, kc, ablk + mfull * sam, sam, sak, pa);
                for (ptrdiff_t jr = 0; jr < nc; jr += EM_BG_NR) {
                    ptrdiff_t nr = nc - jr < EM_BG_NR ? nc - jr : EM_BG_NR;
                    const uint32_t *bp = pb + (jr / EM_BG_NR) * kp * EM_BG_NR;
                    for (ptrdiff_t ir = 0; ir < mc; ir += EM_BG_MR) {
                        ptrdiff_t mr = mc - ir < EM_BG_MR ? mc - ir : EM_BG_MR;
                        char *cp = (char *)C + ((ic + ir) * ldc + jc + jr) * esz;
                        if (ir < mfull)
                            em_bg_kernel_direct(kp, (const uint32_t *)(ablk + ir * sam), sam / 2,
                                                bp, nr, cp, ldc, c16, pc > 0);
                        else
                            em_bg_kernel(kp, pa + ((ir - mfull) / EM_BG_MR) * kp * EM_BG_MR, bp,
                                         mr, nr, cp, ldc, c16, pc > 0);
                    }
                }
            }
        }
    }
    return 0;
}

#else   /* no AVX512-BF16 build: never selected */

static int em_bf16_gemm_supported(void) { return 0; }

static int em_bf16_gemm(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const uint16_t *A,
                        ptrdiff_t sam, ptrdiff_t sak, const uint16_t *B, ptrdiff_t sbk,
                        ptrdiff_t sbn, void *C, ptrdiff_t ldc, int c16) {
    (void)M; (void)N; (void)K; (void)A; (void)sam; (void)sak; (void)B; (void)sbk;
    (void)sbn; (void)C; (void)ldc; (void)c16;
    return -1;
}
#endif

#endif
