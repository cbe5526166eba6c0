/* 2x2 / stride-2 max pooling of one float32 plane: up to 16 outputs at a time with
 * AVX-512 where the CPU has it, else four at a time with SSE2 (part of every x86-64
 * CPU); a plain loop elsewhere.  A later value wins
 * when it is larger or NaN, which is PyTorch's sequential rule (window order
 * a b / c d): the a-b and c-d winners are combined the same way. */
#ifndef EMBER_POOL_SIMD_H
#define EMBER_POOL_SIMD_H

#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>

static inline __m128 emb_sel_ps(__m128 m, __m128 a, __m128 b) {   /* m ? a : b */
    return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b));
}

static inline __m128 emb_takes(__m128 v, __m128 cur) {         /* v > cur or v is NaN */
    return _mm_or_ps(_mm_cmpgt_ps(v, cur), _mm_cmpunord_ps(v, v));
}
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EMB_POOL_AVX512 1
/* AVX-512: one output row of up to 16 values per step (the row pair's two input rows
 * loaded masked and split into even / odd columns), the same NaN-aware comparisons,
 * and the int64 indices written as two 8-lane vectors. */
__attribute__((target("avx512f")))
static void emb_maxpool_k2_f32_avx512(const float* xp, float* op, int64_t* ip, int W, int OH,
                                      int OW) {
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i lane2 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i one = _mm512_set1_epi32(1), wv = _mm512_set1_epi32(W);
    for (int oy = 0; oy < OH; oy++) {
        const float* r0 = xp + (int64_t)(2 * oy) * W;
        const float* r1 = r0 + W;
        int64_t base = (int64_t)(2 * oy) * W;
        float* o = op + (int64_t)oy * OW;
        int64_t* ii = ip + (int64_t)oy * OW;
        for (int ox = 0; ox < OW; ox += 16) {
            int n = OW - ox < 16 ? OW - ox : 16;          /* outputs in this step */
            int nin = 2 * n;                                /* inputs per row */
            __mmask16 mlo = (__mmask16)(nin >= 16 ? 0xFFFF : ((1u << nin) - 1));
            __mmask16 mhi = (__mmask16)(nin <= 16 ? 0 : (nin >= 32 ? 0xFFFF : ((1u << (nin - 16)) - 1)));
            __mmask16 mo = (__mmask16)(n >= 16 ? 0xFFFF : ((1u << n) - 1));
            const float* p0 = r0 + 2 * ox;
            const float* p1 = r1 + 2 * ox;
            __m512 t0 = _mm512_maskz_loadu_ps(mlo, p0), t1 = _mm512_maskz_loadu_ps(mhi, p0 + 16);
            __m512 u0 = _mm512_maskz_loadu_ps(mlo, p1), u1 = _mm512_maskz_loadu_ps(mhi, p1 + 16);
            __m512 a = _mm512_permutex2var_ps(t0, ev, t1), b = _mm512_permutex2var_ps(t0, od, t1);
            __m512 c = _mm512_permutex2var_ps(u0, ev, u1), d = _mm512_permutex2var_ps(u0, od, u1);
            /* a later value wins when larger or NaN (PyTorch's order a b / c d) */
            __mmask16 k1 = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
            __m512 m1 = _mm512_mask_blend_ps(k1, a, b);
            __mmask16 k2 = _mm512_cmp_ps_mask(d, c, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
            __m512 m2 = _mm512_mask_blend_ps(k2, c, d);
            __mmask16 k3 = _mm512_cmp_ps_mask(m2, m1, _CMP_GT_OQ) | _mm512_cmp_ps_mask(m2, m2, _CMP_UNORD_Q);
            _mm512_mask_storeu_ps(o + ox, mo, _mm512_mask_blend_ps(k3, m1, m2));
            __m512i s1 = _mm512_maskz_mov_epi32(k1, one);
            __m512i s2 = _mm512_add_epi32(_mm512_maskz_mov_epi32(k2, one), wv);
            __m512i sel = _mm512_mask_blend_epi32(k3, s1, s2);
            /* flat index: base + 2*(ox + lane) + sel (fits int32 within a row pair) */
            __m512i rel = _mm512_add_epi32(_mm512_add_epi32(lane2, _mm512_set1_epi32(2 * ox)), sel);
            __m512i bv = _mm512_set1_epi64(base);
            __m512i lo = _mm512_add_epi64(bv, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(rel)));
            __m512i hi = _mm512_add_epi64(bv, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(rel, 1)));
            _mm512_mask_storeu_epi64(ii + ox, (__mmask8)(mo & 0xFF), lo);
            _mm512_mask_storeu_epi64(ii + ox + 8, (__mmask8)(mo >> 8), hi);
        }
    }
}

static int emb_pool_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
}
#else
static int emb_pool_has_avx512(void) { return 0; }
#endif

/* simd: emb_pool_has_avx512()'s answer (asked once by the caller) */
static void emb_maxpool_k2_f32(int simd, const float* xp, float* op, int64_t* ip, int W, int OH,
                               int OW) {
#ifdef EMB_POOL_AVX512
    if (simd && OW >= 8) {      /* (shorter rows: as fast with SSE2, measured at OW = 5) */ emb_maxpool_k2_f32_avx512(xp, op, ip, W, OH, OW); return; }
#endif
    for (int oy = 0; oy < OH; oy++) {
        const float* r0 = xp + (int64_t)(2 * oy) * W;
        const float* r1 = r0 + W;
        int64_t base = (int64_t)(2 * oy) * W;
        float* o = op + (int64_t)oy * OW;
        int64_t* ii = ip + (int64_t)oy * OW;
        int ox = 0;
#if defined(__SSE2__)
        const __m128i one = _mm_set1_epi32(1), wv = _mm_set1_epi32(W);
        for (; ox + 4 <= OW; ox += 4) {
            __m128 p0 = _mm_loadu_ps(r0 + 2 * ox), p1 = _mm_loadu_ps(r0 + 2 * ox + 4);
            __m128 q0 = _mm_loadu_ps(r1 + 2 * ox), q1 = _mm_loadu_ps(r1 + 2 * ox + 4);
            __m128 a = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0));
            __m128 b = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1));
            __m128 c = _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(2, 0, 2, 0));
            __m128 d = _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));
            __m128 t1 = emb_takes(b, a), m1 = emb_sel_ps(t1, b, a);
            __m128 t2 = emb_takes(d, c), m2 = emb_sel_ps(t2, d, c);
            __m128 t3 = emb_takes(m2, m1);
            _mm_storeu_ps(o + ox, emb_sel_ps(t3, m2, m1));
            __m128i s1 = _mm_and_si128(_mm_castps_si128(t1), one);
            __m128i s2 = _mm_add_epi32(_mm_and_si128(_mm_castps_si128(t2), one), wv);
            __m128i m3 = _mm_castps_si128(t3);
            __m128i s = _mm_or_si128(_mm_and_si128(m3, s2), _mm_andnot_si128(m3, s1));
            int32_t sv[4];
            _mm_storeu_si128((__m128i*)sv, s);
            for (int j = 0; j < 4; j++)
                ii[ox + j] = base + 2 * (ox + j) + sv[j];
        }
#endif
        for (; ox < OW; ox++) {
            int64_t k = base + 2 * ox;
            float best = r0[2 * ox];
            int64_t bi = k;
            float v = r0[2 * ox + 1];
            if (v > best || v != v) { best = v; bi = k + 1; }
            v = r1[2 * ox];
            if (v > best || v != v) { best = v; bi = k + W; }
            v = r1[2 * ox + 1];
            if (v > best || v != v) { best = v; bi = k + W + 1; }
            o[ox] = best;
            ii[ox] = bi;
        }
    }
}

#endif
