/* 2x2 / stride-2 max pooling of one float32 plane, four outputs at a time with
 * SSE2 (part of every x86-64 CPU); a plain loop elsewhere.  A later value wins
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

static void emb_maxpool_k2_f32(const float* xp, float* op, int64_t* ip, int W, int OH, int OW) {
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
