/* f32_gemm.h: C = A @ B for small float32 products with AVX-512 FMAs (vfmadd231ps with a
 * broadcast element of A), used by gemm.pyx in place of OpenBLAS sgemm for the products
 * where it measured faster (small M*N*K: OpenBLAS's packing and its pre-zeroing of C cost
 * more than the arithmetic there).  Selected at run time where the CPU has AVX-512F.
 *
 * Layout: the micro-kernel keeps a 12 x 32 tile of C in 24 zmm registers.  A is read in
 * place (element (i, p) at A[i * sam + p * sak]: any strides, one broadcast load per row
 * and k); B is read in place when its rows are contiguous (sbn == 1), else its 32-column
 * panels are packed (transposed 16 x 16 at a time when its columns are contiguous) into a
 * per-thread buffer.  C (unit column stride, row stride ldc) is written directly, never
 * zeroed first.  No K blocking: meant for products whose operands fit the caches.
 * Single-threaded: gemm.pyx splits the work.  Sums run in k order per element, in float32.
 */
#ifndef EM_F32_GEMM_H
#define EM_F32_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* EM_FG_MAX_PACK: the most elements of B packed (4 MiB); larger B panels are declined */
enum { EM_FG_MR = 12, EM_FG_NR = 32, EM_FG_MAX_PACK = 1 << 20 };

#if defined(__x86_64__) && defined(__GNUC__) && (defined(__clang__) || __GNUC__ >= 9)
#define EM_FG_X86 1
#endif

#ifdef EM_FG_X86
#include <immintrin.h>
#include <pthread.h>
#define EM_FG_TARGET __attribute__((target("avx512f")))

static int em_f32_gemm_supported(void) {
    static int s = -1;
    if (s < 0) {
        __builtin_cpu_init();
        s = __builtin_cpu_supports("avx512f");
    }
    return s;
}

/* per-thread packing buffer for B, grown on demand, freed when its thread exits */
typedef struct { float *buf; size_t cap; } em_fg_buf;
static pthread_key_t em_fg_key;
static pthread_once_t em_fg_once = PTHREAD_ONCE_INIT;
static int em_fg_key_ok;

static void em_fg_free_buf(void *p) {
    em_fg_buf *b = (em_fg_buf *)p;
    free(b->buf);
    free(b);
}

static void em_fg_make_key(void) {
    em_fg_key_ok = pthread_key_create(&em_fg_key, em_fg_free_buf) == 0;
}

static float *em_fg_buffer(size_t n) {
    pthread_once(&em_fg_once, em_fg_make_key);
    if (!em_fg_key_ok)
        return NULL;
    em_fg_buf *b = (em_fg_buf *)pthread_getspecific(em_fg_key);
    if (b == NULL) {
        b = (em_fg_buf *)calloc(1, sizeof(em_fg_buf));
        if (b == NULL || pthread_setspecific(em_fg_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->cap < n) {
        free(b->buf);
        size_t bytes = (n * 4 + 63) & ~(size_t)63;
        b->buf = (float *)aligned_alloc(64, bytes);
        b->cap = b->buf ? n : 0;
    }
    return b->buf;
}

/* r[j] element q -> r[q] element j (a 16 x 16 transpose of 32-bit words) */
EM_FG_TARGET static inline __attribute__((always_inline)) void em_fg_transpose16(__m512 *rf) {
    __m512i r[16], a[16], b[16];
    for (int j = 0; j < 16; j++)
        r[j] = _mm512_castps_si512(rf[j]);
    for (int k = 0; k < 8; k++) {
        a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) {
        b[4 * k] = _mm512_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm512_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm512_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm512_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
    }
    for (int e = 0; e < 4; e++) {
        __m512i c0 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0x44);
        __m512i c1 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0xEE);
        __m512i c2 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0x44);
        __m512i c3 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0xEE);
        rf[e] = _mm512_castsi512_ps(_mm512_shuffle_i32x4(c0, c2, 0x88));
        rf[4 + e] = _mm512_castsi512_ps(_mm512_shuffle_i32x4(c0, c2, 0xDD));
        rf[8 + e] = _mm512_castsi512_ps(_mm512_shuffle_i32x4(c1, c3, 0x88));
        rf[12 + e] = _mm512_castsi512_ps(_mm512_shuffle_i32x4(c1, c3, 0xDD));
    }
}

/* K x nc block of B (strides sbk, sbn) -> panels of NR columns, panel q at dst + q*K*NR,
 * element (p, j) at p * NR + j; missing columns are zeros */
EM_FG_TARGET static void em_fg_pack_b(ptrdiff_t K, ptrdiff_t nc, const float *b,
                                      ptrdiff_t sbk, ptrdiff_t sbn, float *dst) {
    for (ptrdiff_t j0 = 0; j0 < nc; j0 += EM_FG_NR) {
        ptrdiff_t nr = nc - j0 < EM_FG_NR ? nc - j0 : EM_FG_NR;
        float *d = dst + (j0 / EM_FG_NR) * K * EM_FG_NR;
        const float *bj = b + j0 * sbn;
        ptrdiff_t p0 = 0;
        if (sbk == 1) {                 /* columns contiguous: 16 x 16 transposes */
            for (; p0 + 16 <= K; p0 += 16) {
                for (int h = 0; h < 2; h++) {
                    __m512 r[16];
                    for (int j = 0; j < 16; j++)
                        r[j] = 16 * h + j < nr ? _mm512_loadu_ps(bj + (16 * h + j) * sbn + p0)
                                               : _mm512_setzero_ps();
                    em_fg_transpose16(r);
                    for (int q = 0; q < 16; q++)
                        _mm512_store_ps(d + (p0 + q) * EM_FG_NR + 16 * h, r[q]);
                }
            }
        }
        for (ptrdiff_t p = p0; p < K; p++) {
            for (ptrdiff_t j = 0; j < nr; j++)
                d[p * EM_FG_NR + j] = bj[j * sbn + p * sbk];
            for (ptrdiff_t j = nr; j < EM_FG_NR; j++)
                d[p * EM_FG_NR + j] = 0.0f;
        }
    }
}

#define EM_FG_FMA(i) do { if ((i) < MR) { \
        __m512 a_ = _mm512_set1_ps(ap[(i) * sam]); \
        c##i##a = _mm512_fmadd_ps(a_, b0, c##i##a); \
        c##i##b = _mm512_fmadd_ps(a_, b1, c##i##b); } } while (0)
#define EM_FG_ST(i) do { if ((i) < MR) { \
        _mm512_mask_storeu_ps(c + (i) * ldc, m0, _mm512_mul_ps(c##i##a, al)); \
        _mm512_mask_storeu_ps(c + (i) * ldc + 16, m1, _mm512_mul_ps(c##i##b, al)); } } while (0)

/* an MR x 32 tile (MR a constant after inlining) of C = alpha * (A @ B) over all K: row p
 * of B at b + p * sbk (columns masked by m0 / m1 for the two halves); each sum is rounded
 * to float32, then multiplied by alpha (so alpha = 1 stores the sums exactly) */
EM_FG_TARGET static inline __attribute__((always_inline)) void em_fg_tile(
        const int MR, ptrdiff_t K, const float *a, ptrdiff_t sam, ptrdiff_t sak,
        const float *b, ptrdiff_t sbk, __mmask16 m0, __mmask16 m1, float *c, ptrdiff_t ldc,
        float alpha) {
    const __m512 al = _mm512_set1_ps(alpha);
    __m512 c0a = _mm512_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a,
           c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a, c6a = c0a,
           c6b = c0a, c7a = c0a, c7b = c0a, c8a = c0a, c8b = c0a, c9a = c0a, c9b = c0a,
           c10a = c0a, c10b = c0a, c11a = c0a, c11b = c0a;
    for (ptrdiff_t p = 0; p < K; p++) {
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * sbk);
        __m512 b1 = _mm512_maskz_loadu_ps(m1, b + p * sbk + 16);
        const float *ap = a + p * sak;
        EM_FG_FMA(0); EM_FG_FMA(1); EM_FG_FMA(2); EM_FG_FMA(3); EM_FG_FMA(4); EM_FG_FMA(5);
        EM_FG_FMA(6); EM_FG_FMA(7); EM_FG_FMA(8); EM_FG_FMA(9); EM_FG_FMA(10); EM_FG_FMA(11);
    }
    EM_FG_ST(0); EM_FG_ST(1); EM_FG_ST(2); EM_FG_ST(3); EM_FG_ST(4); EM_FG_ST(5);
    EM_FG_ST(6); EM_FG_ST(7); EM_FG_ST(8); EM_FG_ST(9); EM_FG_ST(10); EM_FG_ST(11);
}
#undef EM_FG_FMA
#undef EM_FG_ST

#define EM_FG_TILE_FN(R) \
    EM_FG_TARGET static void em_fg_tile##R(ptrdiff_t K, const float *a, ptrdiff_t sam, \
            ptrdiff_t sak, const float *b, ptrdiff_t sbk, __mmask16 m0, __mmask16 m1, \
            float *c, ptrdiff_t ldc, float alpha) { \
        em_fg_tile(R, K, a, sam, sak, b, sbk, m0, m1, c, ldc, alpha); \
    }
EM_FG_TILE_FN(1) EM_FG_TILE_FN(2) EM_FG_TILE_FN(3) EM_FG_TILE_FN(4) EM_FG_TILE_FN(5)
EM_FG_TILE_FN(6) EM_FG_TILE_FN(7) EM_FG_TILE_FN(8) EM_FG_TILE_FN(9) EM_FG_TILE_FN(10)
EM_FG_TILE_FN(11) EM_FG_TILE_FN(12)
#undef EM_FG_TILE_FN

typedef void (*em_fg_tile_t)(ptrdiff_t, const float *, ptrdiff_t, ptrdiff_t, const float *,
                             ptrdiff_t, __mmask16, __mmask16, float *, ptrdiff_t, float);

/* C (M x N, row stride ldc, unit column stride) = alpha * (A (M x K, strides sam, sak) @
 * B (K x N, strides sbk, sbn)); strides in elements, any sign.  M, N >= 0; K = 0 stores zeros.
 * Returns -1 (C untouched: the caller runs another GEMM) when B needs packing beyond
 * EM_FG_MAX_PACK elements or there is no memory for it, else 0. */
EM_FG_TARGET static int em_f32_gemm(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const float *A,
                                    ptrdiff_t sam, ptrdiff_t sak, const float *B,
                                    ptrdiff_t sbk, ptrdiff_t sbn, float *C, ptrdiff_t ldc,
                                    float alpha) {
    static const em_fg_tile_t tiles[EM_FG_MR + 1] = {
        NULL, em_fg_tile1, em_fg_tile2, em_fg_tile3, em_fg_tile4, em_fg_tile5, em_fg_tile6,
        em_fg_tile7, em_fg_tile8, em_fg_tile9, em_fg_tile10, em_fg_tile11, em_fg_tile12};
    if (M <= 0 || N <= 0)
        return 0;
    const float *bsrc = B;
    ptrdiff_t bk = sbk;
    int packed = sbn != 1 && N > 1 && K > 0;
    if (packed) {
        ptrdiff_t np = (N + EM_FG_NR - 1) / EM_FG_NR * EM_FG_NR;
        if (K * np > EM_FG_MAX_PACK)
            return -1;
        float *pb = em_fg_buffer((size_t)(K * np));
        if (pb == NULL)
            return -1;
        em_fg_pack_b(K, N, B, sbk, sbn, pb);
        bsrc = pb;
        bk = EM_FG_NR;
    }
    for (ptrdiff_t jr = 0; jr < N; jr += EM_FG_NR) {
        ptrdiff_t nr = N - jr < EM_FG_NR ? N - jr : EM_FG_NR;
        uint32_t m = nr == 32 ? 0xffffffffu : (((uint32_t)1 << nr) - 1);
        __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);
        const float *bp = packed ? bsrc + (jr / EM_FG_NR) * K * EM_FG_NR : bsrc + jr;
        for (ptrdiff_t ir = 0; ir < M; ir += EM_FG_MR) {
            ptrdiff_t mr = M - ir < EM_FG_MR ? M - ir : EM_FG_MR;
            tiles[mr](K, A + ir * sam, sam, sak, bp, bk, m0, m1, C + ir * ldc + jr, ldc, alpha);
        }
    }
    return 0;
}

#else   /* no AVX-512 build: never selected */

static int em_f32_gemm_supported(void) { return 0; }

static int em_f32_gemm(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const float *A, ptrdiff_t sam,
                       ptrdiff_t sak, const float *B, ptrdiff_t sbk, ptrdiff_t sbn, float *C,
                       ptrdiff_t ldc, float alpha) {
    (void)M; (void)N; (void)K; (void)A; (void)sam; (void)sak; (void)B; (void)sbk;
    (void)sbn; (void)C; (void)ldc; (void)alpha;
    return -1;
}
#endif

#endif
