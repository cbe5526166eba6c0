/* f32_gemm.h: C = alpha * (A @ B) (+ bias per column) for float32 with AVX-512 FMAs
 * (vfmadd231ps with a broadcast element of A), used by gemm.pyx in place of OpenBLAS sgemm
 * for the products where it measured faster.  Selected at run time where the CPU has
 * AVX-512F.
 *
 * The micro-kernel keeps a 12 x 32 tile of C in 24 zmm registers.  Two drivers feed it:
 * - in place (small products whose operands sit in the caches): A read where it lies
 *   (element (i, p) at A[i * sam + p * sak]), B read in place when its rows are contiguous
 *   (sbn == 1), else its 32-column panels packed whole into a per-thread buffer;
 * - packed (the rest): K in blocks of kc; per block, kc x nc of B packed into 32-column
 *   panels and mc x kc of A into 12-row panels (contiguous, read in the micro-kernel's
 *   order: the B panel stays in L1 while the A block, in L2, passes under it; transposed
 *   operands are transposed by the packing, 16 x 16 at a time).  The first K block starts
 *   its sums at zero, later ones load the partial sums back from C, so each element is
 *   the same chain of FMAs in k order as in the in-place driver.
 * C (unit column stride, row stride ldc) is written directly, never zeroed first; the
 * last K block stores alpha * sum (rounded sum, then the product rounded) and then adds
 * the bias (rounded again): the same numbers as a separate multiplication and addition.
 * Single-threaded: gemm.pyx splits the work, by rows / columns, or by ranges of K for
 * products with a long K: then each thread's partial sums go to its scratch
 * (em_f32_gemm_scratch) and em_ks_reduce (f32_ksplit.h) adds them into C, applying alpha and
 * the bias once (the order of the sum then depends on the thread count).
 */
#ifndef EM_F32_GEMM_H
#define EM_F32_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* EM_FG_MAX_PACK: the most elements of B the in-place driver packs (4 MiB) */
enum { EM_FG_MR = 12, EM_FG_NR = 32, EM_FG_MAX_PACK = 1 << 20 };

/* blocking of the packed driver (elements; mc a multiple of MR, nc of NR) and the driver
 * choice: 0 = by size (em_fg_use_packed), 1 = always packed, 2 = always in place.  Set by
 * em_f32_gemm_tune (a testing / tuning hook) while no product runs. */
static ptrdiff_t em_fg_kc = 256, em_fg_mc = 144, em_fg_nc = 1024;
static int em_fg_mode = 0;
/* the packed driver's prefetch of the next blocks (em_fg_pf_t); modes 3 / 4 of the tuning
 * hook turn it off / on */
static int em_fg_prefetch_on = 1;

static void em_f32_gemm_tune(ptrdiff_t kc, ptrdiff_t mc, ptrdiff_t nc, int mode) {
    if (kc > 0)
        em_fg_kc = kc;
    if (mc > 0)
        em_fg_mc = (mc + EM_FG_MR - 1) / EM_FG_MR * EM_FG_MR;
    if (nc > 0)
        em_fg_nc = (nc + EM_FG_NR - 1) / EM_FG_NR * EM_FG_NR;
    if (mode >= 0 && mode <= 2)
        em_fg_mode = mode;
    if (mode == 3 || mode == 4)
        em_fg_prefetch_on = mode == 4;
}

/* the packed driver's K block (gemm.pyx splits K over the threads in multiples of it) */
static ptrdiff_t em_f32_gemm_kc(void) { return em_fg_kc; }

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

/* per-thread buffers, grown on demand, freed when their thread exits: slot 0 packs the
 * operands (em_fg_buffer), slot 1 holds a thread's partial sums when gemm.pyx splits K
 * over the threads (em_f32_gemm_scratch) */
typedef struct { float *buf; size_t cap; } em_fg_buf;
static pthread_key_t em_fg_key[2];
static pthread_once_t em_fg_once = PTHREAD_ONCE_INIT;
static int em_fg_key_ok;

static void em_fg_free_buf(void *p) {
    em_fg_buf *b = (em_fg_buf *)p;
    free(b->buf);
    free(b);
}

static void em_fg_make_key(void) {
    em_fg_key_ok = pthread_key_create(&em_fg_key[0], em_fg_free_buf) == 0 &&
                   pthread_key_create(&em_fg_key[1], em_fg_free_buf) == 0;
}

static float *em_fg_slot(int slot, size_t n) {
    pthread_once(&em_fg_once, em_fg_make_key);
    if (!em_fg_key_ok)
        return NULL;
    em_fg_buf *b = (em_fg_buf *)pthread_getspecific(em_fg_key[slot]);
    if (b == NULL) {
        b = (em_fg_buf *)calloc(1, sizeof(em_fg_buf));
        if (b == NULL || pthread_setspecific(em_fg_key[slot], b) != 0) {
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

static float *em_fg_buffer(size_t n) { return em_fg_slot(0, n); }

/* the calling thread's buffer for n partial sums (64-byte aligned; NULL: no memory) */
static float *em_f32_gemm_scratch(size_t n) { return em_fg_slot(1, n); }

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

/* K x nc block of B (strides sbk, sbn; 64-byte aligned dst) -> panels of NR columns, panel q at dst + q*K*NR,
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
        if (sbn == 1) {                 /* rows contiguous: two masked loads per row */
            uint32_t m = nr == 32 ? 0xffffffffu : (((uint32_t)1 << nr) - 1);
            __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);
            for (; p0 < K; p0++) {
                _mm512_store_ps(d + p0 * EM_FG_NR, _mm512_maskz_loadu_ps(m0, bj + p0 * sbk));
                _mm512_store_ps(d + p0 * EM_FG_NR + 16,
                                _mm512_maskz_loadu_ps(m1, bj + p0 * sbk + 16));
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


/* mc x kc block of A (strides sam, sak) -> panels of MR rows, panel q at dst + q*kc*MR,
 * element (i, p) at p * MR + i; rows past mc are left unwritten (never read) */
EM_FG_TARGET static void em_fg_pack_a(ptrdiff_t mc, ptrdiff_t kc, const float *a,
                                      ptrdiff_t sam, ptrdiff_t sak, float *dst) {
    for (ptrdiff_t i0 = 0; i0 < mc; i0 += EM_FG_MR) {
        ptrdiff_t mr = mc - i0 < EM_FG_MR ? mc - i0 : EM_FG_MR;
        float *d = dst + (i0 / EM_FG_MR) * kc * EM_FG_MR;
        const float *ai = a + i0 * sam;
        const __mmask16 mrow = (__mmask16)((1u << mr) - 1);
        ptrdiff_t p0 = 0;
        if (sam == 1) {                 /* columns contiguous (a transposed A) */
            for (; p0 < kc; p0++)
                _mm512_mask_storeu_ps(d + p0 * EM_FG_MR, mrow,
                                      _mm512_maskz_loadu_ps(mrow, ai + p0 * sak));
        } else if (sak == 1) {          /* rows contiguous: 16 x 16 transposes */
            for (; p0 + 16 <= kc; p0 += 16) {
                __m512 r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = i < mr ? _mm512_loadu_ps(ai + i * sam + p0) : _mm512_setzero_ps();
                em_fg_transpose16(r);
                for (int q = 0; q < 16; q++)
                    _mm512_mask_storeu_ps(d + (p0 + q) * EM_FG_MR, mrow, r[q]);
            }
        }
        for (ptrdiff_t p = p0; p < kc; p++)
            for (ptrdiff_t i = 0; i < mr; i++)
                d[p * EM_FG_MR + i] = ai[i * sam + p * sak];
    }
}

/* a finished sum: times alpha (when scale), plus the bias (when bv is used); each step
 * rounded on its own (no fused multiply-add: the numbers of separate operations) */
EM_FG_TARGET static inline __attribute__((always_inline)) __m512 em_fg_epi(
        __m512 s, __m512 al, __m512 bv, int scale, int add) {
    if (scale)
        s = _mm512_mul_round_ps(s, al, _MM_FROUND_CUR_DIRECTION);
    if (add)
        s = _mm512_add_round_ps(s, bv, _MM_FROUND_CUR_DIRECTION);
    return s;
}

#define EM_FG_FMA(i) do { if ((i) < MR) { \
        __m512 a_ = _mm512_set1_ps(ap[(i) * sam]); \
        c##i##a = _mm512_fmadd_ps(a_, b0, c##i##a); \
        c##i##b = _mm512_fmadd_ps(a_, b1, c##i##b); } } while (0)
#define EM_FG_ST(i) do { if ((i) < MR) { \
        _mm512_mask_storeu_ps(c + (i) * ldc, m0, em_fg_epi(c##i##a, al, bv0, scale, add)); \
        _mm512_mask_storeu_ps(c + (i) * ldc + 16, m1, \
                              em_fg_epi(c##i##b, al, bv1, scale, add)); } } while (0)
#define EM_FG_ZERO \
    __m512 c0a = _mm512_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a, \
           c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a, c6a = c0a, \
           c6b = c0a, c7a = c0a, c7b = c0a, c8a = c0a, c8b = c0a, c9a = c0a, c9b = c0a, \
           c10a = c0a, c10b = c0a, c11a = c0a, c11b = c0a
#define EM_FG_STORE_ALL \
    EM_FG_ST(0); EM_FG_ST(1); EM_FG_ST(2); EM_FG_ST(3); EM_FG_ST(4); EM_FG_ST(5); \
    EM_FG_ST(6); EM_FG_ST(7); EM_FG_ST(8); EM_FG_ST(9); EM_FG_ST(10); EM_FG_ST(11)

/* an MR x 32 tile (MR a constant after inlining) of C = alpha * (A @ B) + bias over all K,
 * operands in place: row p of B at b + p * sbk (columns masked by m0 / m1 for the two
 * halves); bias (NULL: none) holds this tile's 32 columns */
EM_FG_TARGET static inline __attribute__((always_inline)) void em_fg_tile(
        const int MR, ptrdiff_t K, const float *a, ptrdiff_t sam, ptrdiff_t sak,
        const float *b, ptrdiff_t sbk, __mmask16 m0, __mmask16 m1, float *c, ptrdiff_t ldc,
        float alpha, const float *bias) {
    const __m512 al = _mm512_set1_ps(alpha);
    const int scale = alpha != 1.0f, add = bias != NULL;
    EM_FG_ZERO;
    for (ptrdiff_t p = 0; p < K; p++) {
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * sbk);
        __m512 b1 = _mm512_maskz_loadu_ps(m1, b + p * sbk + 16);
        const float *ap = a + p * sak;
        EM_FG_FMA(0); EM_FG_FMA(1); EM_FG_FMA(2); EM_FG_FMA(3); EM_FG_FMA(4); EM_FG_FMA(5);
        EM_FG_FMA(6); EM_FG_FMA(7); EM_FG_FMA(8); EM_FG_FMA(9); EM_FG_FMA(10); EM_FG_FMA(11);
    }
    __m512 bv0 = _mm512_setzero_ps(), bv1 = bv0;
    if (add) {
        bv0 = _mm512_maskz_loadu_ps(m0, bias);
        bv1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    }
    EM_FG_STORE_ALL;
}

#define EM_FG_LD(i) do { if ((i) < MR) { \
        c##i##a = _mm512_maskz_loadu_ps(m0, c + (i) * ldc); \
        c##i##b = _mm512_maskz_loadu_ps(m1, c + (i) * ldc + 16); } } while (0)
#define EM_FG_PF(i) do { if ((i) < MR) { \
        _mm_prefetch((const char *)(c + (i) * ldc), _MM_HINT_T0); \
        _mm_prefetch((const char *)(c + (i) * ldc + 31), _MM_HINT_T0); } } while (0)

/* the same tile over one K block of packed panels: A's at ap (element (i, p) at p*MR + i),
 * B's at bp (element (p, j) at p*NR + j, 64-byte aligned); the sums start at zero (first)
 * or at C's partial sums, and are stored raw, or finished (last: alpha, bias) */
EM_FG_TARGET static inline __attribute__((always_inline)) void em_fg_ptile(
        const int MR, ptrdiff_t kc, const float *ap, const float *bp, __mmask16 m0,
        __mmask16 m1, float *c, ptrdiff_t ldc, int first, int last, float alpha,
        const float *bias) {
    const __m512 al = _mm512_set1_ps(alpha);
    const int scale = last && alpha != 1.0f, add = last && bias != NULL;
    const ptrdiff_t sam = 1;
    EM_FG_ZERO;
    if (!first) {
        EM_FG_LD(0); EM_FG_LD(1); EM_FG_LD(2); EM_FG_LD(3); EM_FG_LD(4); EM_FG_LD(5);
        EM_FG_LD(6); EM_FG_LD(7); EM_FG_LD(8); EM_FG_LD(9); EM_FG_LD(10); EM_FG_LD(11);
    } else {
        EM_FG_PF(0); EM_FG_PF(1); EM_FG_PF(2); EM_FG_PF(3); EM_FG_PF(4); EM_FG_PF(5);
        EM_FG_PF(6); EM_FG_PF(7); EM_FG_PF(8); EM_FG_PF(9); EM_FG_PF(10); EM_FG_PF(11);
    }
    for (ptrdiff_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(bp);
        __m512 b1 = _mm512_load_ps(bp + 16);
        EM_FG_FMA(0); EM_FG_FMA(1); EM_FG_FMA(2); EM_FG_FMA(3); EM_FG_FMA(4); EM_FG_FMA(5);
        EM_FG_FMA(6); EM_FG_FMA(7); EM_FG_FMA(8); EM_FG_FMA(9); EM_FG_FMA(10); EM_FG_FMA(11);
        ap += EM_FG_MR;
        bp += EM_FG_NR;
    }
    __m512 bv0 = _mm512_setzero_ps(), bv1 = bv0;
    if (add) {
        bv0 = _mm512_maskz_loadu_ps(m0, bias);
        bv1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    }
    EM_FG_STORE_ALL;
}
#undef EM_FG_FMA
#undef EM_FG_ST
#undef EM_FG_ZERO
#undef EM_FG_STORE_ALL
#undef EM_FG_LD
#undef EM_FG_PF

#define EM_FG_TILE_FN(R) \
    EM_FG_TARGET static void em_fg_tile##R(ptrdiff_t K, const float *a, ptrdiff_t sam, \
            ptrdiff_t sak, const float *b, ptrdiff_t sbk, __mmask16 m0, __mmask16 m1, \
            float *c, ptrdiff_t ldc, float alpha, const float *bias) { \
        em_fg_tile(R, K, a, sam, sak, b, sbk, m0, m1, c, ldc, alpha, bias); \
    } \
    EM_FG_TARGET static void em_fg_ptile##R(ptrdiff_t kc, const float *ap, const float *bp, \
            __mmask16 m0, __mmask16 m1, float *c, ptrdiff_t ldc, int first, int last, \
            float alpha, const float *bias) { \
        em_fg_ptile(R, kc, ap, bp, m0, m1, c, ldc, first, last, alpha, bias); \
    }
EM_FG_TILE_FN(1) EM_FG_TILE_FN(2) EM_FG_TILE_FN(3) EM_FG_TILE_FN(4) EM_FG_TILE_FN(5)
EM_FG_TILE_FN(6) EM_FG_TILE_FN(7) EM_FG_TILE_FN(8) EM_FG_TILE_FN(9) EM_FG_TILE_FN(10)
EM_FG_TILE_FN(11) EM_FG_TILE_FN(12)
#undef EM_FG_TILE_FN

typedef void (*em_fg_tile_t)(ptrdiff_t, const float *, ptrdiff_t, ptrdiff_t, const float *,
                             ptrdiff_t, __mmask16, __mmask16, float *, ptrdiff_t, float,
                             const float *);
typedef void (*em_fg_ptile_t)(ptrdiff_t, const float *, const float *, __mmask16, __mmask16,
                              float *, ptrdiff_t, int, int, float, const float *);

static inline void em_fg_masks(ptrdiff_t nr, __mmask16 *m0, __mmask16 *m1) {
    uint32_t m = nr >= 32 ? 0xffffffffu : (((uint32_t)1 << nr) - 1);
    *m0 = (__mmask16)m;
    *m1 = (__mmask16)(m >> 16);
}

/* the in-place driver; -1 when B needs packing beyond EM_FG_MAX_PACK or no memory */
EM_FG_TARGET static int em_fg_inplace(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const float *A,
                                      ptrdiff_t sam, ptrdiff_t sak, const float *B,
                                      ptrdiff_t sbk, ptrdiff_t sbn, float *C, ptrdiff_t ldc,
                                      float alpha, const float *bias) {
    static const em_fg_tile_t tiles[EM_FG_MR + 1] = {
        NULL, em_fg_tile1, em_fg_tile2, em_fg_tile3, em_fg_tile4, em_fg_tile5, em_fg_tile6,
        em_fg_tile7, em_fg_tile8, em_fg_tile9, em_fg_tile10, em_fg_tile11, em_fg_tile12};
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
        __mmask16 m0, m1;
        em_fg_masks(N - jr, &m0, &m1);
        const float *bp = packed ? bsrc + (jr / EM_FG_NR) * K * EM_FG_NR : bsrc + jr;
        for (ptrdiff_t ir = 0; ir < M; ir += EM_FG_MR) {
            ptrdiff_t mr = M - ir < EM_FG_MR ? M - ir : EM_FG_MR;
            tiles[mr](K, A + ir * sam, sam, sak, bp, bk, m0, m1, C + ir * ldc + jr, ldc, alpha,
                      bias ? bias + jr : NULL);
        }
    }
    return 0;
}

/* Prefetch of the operand block the packed driver packs next, spread over the micro-tiles
 * of the current block: packing reads its source once, and an activation written by the
 * previous op is often in L3 or memory by then; fetched into L2 while the FMAs run, the
 * packing no longer waits for it.  A block of `outer` runs of `inner` cache lines, run r
 * at base + r * stride floats (a run is a row of a row-major block, or a column of a
 * transposed one); blocks with no unit stride are not prefetched. */
typedef struct {
    const char *base;
    ptrdiff_t stride_bytes, inner, per_tile, left;    /* lines per run, per tile, to go */
    ptrdiff_t run, line;                              /* the next line: run, line in run */
} em_fg_pf_t;

static inline void em_fg_pf_set(em_fg_pf_t *pf, const float *src, ptrdiff_t rows,
                                ptrdiff_t cols, ptrdiff_t s_row, ptrdiff_t s_col,
                                ptrdiff_t tiles) {
    pf->left = 0;
    if (!em_fg_prefetch_on || rows <= 0 || cols <= 0 || tiles <= 0)
        return;
    ptrdiff_t run, runs, stride;
    if (s_col == 1) {
        run = cols, runs = rows, stride = s_row;
    } else if (s_row == 1) {
        run = rows, runs = cols, stride = s_col;
    } else {
        return;
    }
    pf->base = (const char *)src;
    pf->stride_bytes = stride * (ptrdiff_t)sizeof(float);
    pf->inner = (run * (ptrdiff_t)sizeof(float) + 63) / 64 + 1;   /* +1: unaligned starts */
    pf->left = runs * pf->inner;
    pf->per_tile = (pf->left + tiles - 1) / tiles;
    pf->run = pf->line = 0;
}

/* this tile's share of the prefetches */
static inline void em_fg_pf_step(em_fg_pf_t *pf) {
    ptrdiff_t n = pf->left < pf->per_tile ? pf->left : pf->per_tile;
    pf->left -= n;
    for (; n > 0; n--) {
        _mm_prefetch(pf->base + pf->run * pf->stride_bytes + pf->line * 64, _MM_HINT_T1);
        if (++pf->line == pf->inner) {
            pf->line = 0;
            pf->run++;
        }
    }
}

/* the packed driver (see the top of the file); -1 when there is no memory for the panels */
EM_FG_TARGET static int em_fg_packed(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const float *A,
                                     ptrdiff_t sam, ptrdiff_t sak, const float *B,
                                     ptrdiff_t sbk, ptrdiff_t sbn, float *C, ptrdiff_t ldc,
                                     float alpha, const float *bias) {
    static const em_fg_ptile_t tiles[EM_FG_MR + 1] = {
        NULL, em_fg_ptile1, em_fg_ptile2, em_fg_ptile3, em_fg_ptile4, em_fg_ptile5,
        em_fg_ptile6, em_fg_ptile7, em_fg_ptile8, em_fg_ptile9, em_fg_ptile10, em_fg_ptile11,
        em_fg_ptile12};
    const ptrdiff_t KC = em_fg_kc, MC = em_fg_mc, NC = em_fg_nc;
    ptrdiff_t kcmax = K < KC ? K : KC;
    ptrdiff_t mcmax = M < MC ? (M + EM_FG_MR - 1) / EM_FG_MR * EM_FG_MR : MC;
    ptrdiff_t ncmax = N < NC ? (N + EM_FG_NR - 1) / EM_FG_NR * EM_FG_NR : NC;
    /* B's panels first (64-byte aligned: kcmax * ncmax is a multiple of 16), then A's */
    float *pb = em_fg_buffer((size_t)(kcmax * (ncmax + mcmax)));
    if (pb == NULL)
        return -1;
    float *pa = pb + kcmax * ncmax;
    em_fg_pf_t pfa, pfb;
    for (ptrdiff_t jc = 0; jc < N; jc += NC) {
        ptrdiff_t nc = N - jc < NC ? N - jc : NC;
        for (ptrdiff_t pc = 0; pc < K; pc += KC) {
            ptrdiff_t kc = K - pc < KC ? K - pc : KC;
            int first = pc == 0, last = pc + kc >= K;
            em_fg_pack_b(kc, nc, B + pc * sbk + jc * sbn, sbk, sbn, pb);
            for (ptrdiff_t ic = 0; ic < M; ic += MC) {
                ptrdiff_t mc = M - ic < MC ? M - ic : MC;
                em_fg_pack_a(mc, kc, A + ic * sam + pc * sak, sam, sak, pa);
                /* the blocks packed next: A's next row block, else (with B's next K or
                 * column block) the first row block of the next K or column block */
                ptrdiff_t ntiles = ((mc + EM_FG_MR - 1) / EM_FG_MR) *
                                   ((nc + EM_FG_NR - 1) / EM_FG_NR);
                pfb.left = 0;
                if (ic + MC < M) {
                    ptrdiff_t m2 = M - ic - MC < MC ? M - ic - MC : MC;
                    em_fg_pf_set(&pfa, A + (ic + MC) * sam + pc * sak, m2, kc, sam, sak,
                                 ntiles);
                } else {
                    ptrdiff_t p2 = pc + KC < K ? pc + KC : 0, j2 = pc + KC < K ? jc : jc + NC;
                    ptrdiff_t k2 = K - p2 < KC ? K - p2 : KC, n2 = N - j2 < NC ? N - j2 : NC;
                    pfa.left = 0;
                    if (j2 < N) {
                        em_fg_pf_set(&pfa, A + p2 * sak, M < MC ? M : MC, k2, sam, sak,
                                     ntiles);
                        em_fg_pf_set(&pfb, B + p2 * sbk + j2 * sbn, k2, n2, sbk, sbn,
                                     ntiles);
                    }
                }
                for (ptrdiff_t jr = 0; jr < nc; jr += EM_FG_NR) {
                    __mmask16 m0, m1;
                    em_fg_masks(nc - jr, &m0, &m1);
                    const float *bp = pb + (jr / EM_FG_NR) * kc * EM_FG_NR;
                    const float *bb = bias ? bias + jc + jr : NULL;
                    float *cc = C + ic * ldc + jc + jr;
                    for (ptrdiff_t ir = 0; ir < mc; ir += EM_FG_MR) {
                        ptrdiff_t mr = mc - ir < EM_FG_MR ? mc - ir : EM_FG_MR;
                        em_fg_pf_step(&pfa);
                        em_fg_pf_step(&pfb);
                        tiles[mr](kc, pa + (ir / EM_FG_MR) * kc * EM_FG_MR, bp, m0, m1,
                                  cc + ir * ldc, ldc, first, last, alpha, bb);
                    }
                }
            }
        }
    }
    return 0;
}

/* whether a product runs on the packed driver (em_fg_mode 0) */
static inline int em_fg_use_packed(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, ptrdiff_t sam,
                                   ptrdiff_t sak, ptrdiff_t sbn) {
    (void)N; (void)sam; (void)sak; (void)sbn;
    return K > em_fg_kc || M * K > 65536;
}

/* C (M x N, row stride ldc, unit column stride) = alpha * (A (M x K, strides sam, sak) @
 * B (K x N, strides sbk, sbn)) + bias (N floats, contiguous; NULL: none); strides in
 * elements, any sign.  M, N >= 0; K = 0 stores alpha * 0 + bias.  Returns -1 (C untouched:
 * the caller runs another GEMM) when there is no memory for the packing buffers, else 0. */
EM_FG_TARGET static int em_f32_gemm(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const float *A,
                                    ptrdiff_t sam, ptrdiff_t sak, const float *B,
                                    ptrdiff_t sbk, ptrdiff_t sbn, float *C, ptrdiff_t ldc,
                                    float alpha, const float *bias) {
    if (M <= 0 || N <= 0)
        return 0;
    int packed = K > 0 && (em_fg_mode == 1 ||
                           (em_fg_mode == 0 && em_fg_use_packed(M, N, K, sam, sak, sbn)));
    if (!packed && em_fg_inplace(M, N, K, A, sam, sak, B, sbk, sbn, C, ldc, alpha, bias) == 0)
        return 0;
    return K > 0 ? em_fg_packed(M, N, K, A, sam, sak, B, sbk, sbn, C, ldc, alpha, bias) : -1;
}

#else   /* no AVX-512 build: never selected */

static int em_f32_gemm_supported(void) { return 0; }

static int em_f32_gemm(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const float *A, ptrdiff_t sam,
                       ptrdiff_t sak, const float *B, ptrdiff_t sbk, ptrdiff_t sbn, float *C,
                       ptrdiff_t ldc, float alpha, const float *bias) {
    (void)M; (void)N; (void)K; (void)A; (void)sam; (void)sak; (void)B; (void)sbk;
    (void)sbn; (void)C; (void)ldc; (void)alpha; (void)bias;
    return -1;
}

static float *em_f32_gemm_scratch(size_t n) { (void)n; return NULL; }

#endif

#endif
