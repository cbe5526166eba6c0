/* AVX-512 kernels for float32 convolutions (used by conv.pyx).
 *
 * Both work on a "flat" source: one sample's (zero-padded, stride-phase-split)
 * input planes laid out so that every kernel tap t reads the source at a fixed
 * offset off[t] from the output position l.  A convolution then is
 *
 *   emb_og:   out[r*ldo + l] = sum_t A[t*R + r] * src[off[t] + l]   (0 <= l < L)
 *             (forward: r = output channel, t = (c, i, j) tap; the input
 *             gradient is the same with G as the source and flipped taps)
 *   emb_og_acc: the same, added into out (the input gradient of a stride-1
 *             convolution as a scatter: per tap (i, j) and channel c, the sum over
 *             output channels o, added into dx at the tap's shift)
 *   emb_odot: dW[r*ldw + t] += sum_n sum_l G[n*gn + r*gr + l] * src[n*sn + off[t] + l]
 *             (weight gradient: dot products over output positions)
 *
 * emb_og keeps an 8 x 48 block of outputs in registers (24 zmm accumulators;
 * per tap 3 loads + 8 broadcasts for 24 FMAs); emb_odot a 4 x 6 (or 6 x 4) block of
 * weight-gradient entries, each a 16-lane partial sum reduced at the end.
 * The caller guarantees that the source can be read (zero slack) up to 48
 * floats past off[t] + L, and for emb_odot that Lr is a multiple of 16 with
 * G zero wherever an output position does not exist.
 *
 * The functions carry a target attribute and are only called when
 * emb_conv_has_avx512() says the CPU has AVX-512F; elsewhere (and on other
 * architectures) the plain C versions below stand in. */
#ifndef EMBER_CONV_SIMD_H
#define EMBER_CONV_SIMD_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#define EMB_AI static inline __attribute__((always_inline, target("avx512f")))
#define EMB_T512 __attribute__((target("avx512f")))

static int emb_conv_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
}

/* ---------------------------------------------------------------- emb_og */

EMB_AI void emb_og_tile(const float* A, int R, const float* src, const int64_t* off, int T,
                        float* out, int64_t ldo, int64_t l, const int RB, const int V,
                        __mmask16 mlast, const int ACC)
{
    __m512 acc[8][3];
    for (int r = 0; r < RB; r++)
        for (int v = 0; v < V; v++) {
            if (!ACC)
                acc[r][v] = _mm512_setzero_ps();
            else if (v < V - 1)
                acc[r][v] = _mm512_loadu_ps(out + r * ldo + l + 16 * v);
            else
                acc[r][v] = _mm512_maskz_loadu_ps(mlast, out + r * ldo + l + 16 * v);
        }
    for (int t = 0; t < T; t++) {
        const float* s = src + off[t] + l;
        const float* a = A + (int64_t)t * R;
        __m512 x[3];
        for (int v = 0; v < V; v++)
            x[v] = _mm512_loadu_ps(s + 16 * v);
        for (int r = 0; r < RB; r++) {
            __m512 w = _mm512_set1_ps(a[r]);
            for (int v = 0; v < V; v++)
                acc[r][v] = _mm512_fmadd_ps(w, x[v], acc[r][v]);
        }
    }
    for (int r = 0; r < RB; r++) {
        float* o = out + r * ldo + l;
        for (int v = 0; v < V - 1; v++)
            _mm512_storeu_ps(o + 16 * v, acc[r][v]);
        _mm512_mask_storeu_ps(o + 16 * (V - 1), mlast, acc[r][V - 1]);
    }
}

#define EMB_OG_RB_ACC(RB, ACC, NAME)                                                       \
EMB_T512 static void NAME(const float* A, int R, const float* src,                        \
                          const int64_t* off, int T, float* out, int64_t ldo,             \
                          int64_t L) {                                                    \
    int64_t l = 0;                                                                         \
    for (; l + 48 <= L; l += 48)                                                           \
        emb_og_tile(A, R, src, off, T, out, ldo, l, RB, 3, (__mmask16)0xFFFF, ACC);        \
    int64_t rem = L - l;                                                                   \
    if (rem <= 0) return;                                                                  \
    int V = (int)((rem + 15) / 16);                                                        \
    int last = (int)(rem - 16 * (V - 1));                                                  \
    __mmask16 m = (__mmask16)(last >= 16 ? 0xFFFF : ((1u << last) - 1));                   \
    if (V == 3) emb_og_tile(A, R, src, off, T, out, ldo, l, RB, 3, m, ACC);                \
    else if (V == 2) emb_og_tile(A, R, src, off, T, out, ldo, l, RB, 2, m, ACC);           \
    else emb_og_tile(A, R, src, off, T, out, ldo, l, RB, 1, m, ACC);                       \
}
#define EMB_OG_RB(RB) EMB_OG_RB_ACC(RB, 0, emb_og_rb##RB) EMB_OG_RB_ACC(RB, 1, emb_oga_rb##RB)
EMB_OG_RB(1) EMB_OG_RB(2) EMB_OG_RB(3) EMB_OG_RB(4)
EMB_OG_RB(5) EMB_OG_RB(6) EMB_OG_RB(7) EMB_OG_RB(8)

EMB_T512 static void emb_og_avx512(const float* A, int T, int R, const float* src,
                                   const int64_t* off, float* out, int64_t ldo, int64_t L,
                                   int accumulate) {
    for (int r0 = 0; r0 < R; r0 += 8) {
        int rb = R - r0 < 8 ? R - r0 : 8;
        const float* a = A + r0;
        float* o = out + (int64_t)r0 * ldo;
        if (accumulate) {
            switch (rb) {
            case 8: emb_oga_rb8(a, R, src, off, T, o, ldo, L); break;
            case 7: emb_oga_rb7(a, R, src, off, T, o, ldo, L); break;
            case 6: emb_oga_rb6(a, R, src, off, T, o, ldo, L); break;
            case 5: emb_oga_rb5(a, R, src, off, T, o, ldo, L); break;
            case 4: emb_oga_rb4(a, R, src, off, T, o, ldo, L); break;
            case 3: emb_oga_rb3(a, R, src, off, T, o, ldo, L); break;
            case 2: emb_oga_rb2(a, R, src, off, T, o, ldo, L); break;
            default: emb_oga_rb1(a, R, src, off, T, o, ldo, L); break;
            }
            continue;
        }
        switch (rb) {
        case 8: emb_og_rb8(a, R, src, off, T, o, ldo, L); break;
        case 7: emb_og_rb7(a, R, src, off, T, o, ldo, L); break;
        case 6: emb_og_rb6(a, R, src, off, T, o, ldo, L); break;
        case 5: emb_og_rb5(a, R, src, off, T, o, ldo, L); break;
        case 4: emb_og_rb4(a, R, src, off, T, o, ldo, L); break;
        case 3: emb_og_rb3(a, R, src, off, T, o, ldo, L); break;
        case 2: emb_og_rb2(a, R, src, off, T, o, ldo, L); break;
        default: emb_og_rb1(a, R, src, off, T, o, ldo, L); break;
        }
    }
}

/* ---------------------------------------------------------------- emb_odot */

EMB_AI void emb_od_tile(const float* G, int64_t gr, int64_t gn, const float* src, int64_t sn,
                        const int64_t* off, int64_t Lr, int NB, float* dW, int64_t ldw,
                        const int RB, const int TB)
{
    __m512 acc[6][6];
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int n = 0; n < NB; n++) {
        const float* g = G + (int64_t)n * gn;
        const float* s = src + (int64_t)n * sn;
        for (int64_t l = 0; l < Lr; l += 16) {
            __m512 x[6];
            for (int t = 0; t < TB; t++)
                x[t] = _mm512_loadu_ps(s + off[t] + l);
            for (int r = 0; r < RB; r++) {
                __m512 gv = _mm512_loadu_ps(g + r * gr + l);
                for (int t = 0; t < TB; t++)
                    acc[r][t] = _mm512_fmadd_ps(gv, x[t], acc[r][t]);
            }
        }
    }
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++)
            dW[r * ldw + t] += _mm512_reduce_add_ps(acc[r][t]);
}

#define EMB_OD_CASE(RB, TB)                                                                \
    case (RB) * 8 + (TB):                                                                  \
        emb_od_tile(G, gr, gn, src, sn, off, Lr, NB, dW, ldw, RB, TB); break;

EMB_T512 static void emb_od_block(const float* G, int64_t gr, int64_t gn, const float* src,
                                  int64_t sn, const int64_t* off, int64_t Lr, int NB, float* dW,
                                  int64_t ldw, int rb, int tb) {
    switch (rb * 8 + tb) {
    EMB_OD_CASE(6, 4) EMB_OD_CASE(6, 3) EMB_OD_CASE(6, 2) EMB_OD_CASE(6, 1)
    EMB_OD_CASE(4, 6) EMB_OD_CASE(4, 5) EMB_OD_CASE(4, 4) EMB_OD_CASE(4, 3)
    EMB_OD_CASE(4, 2) EMB_OD_CASE(4, 1)
    EMB_OD_CASE(3, 6) EMB_OD_CASE(3, 5) EMB_OD_CASE(3, 4) EMB_OD_CASE(3, 3)
    EMB_OD_CASE(3, 2) EMB_OD_CASE(3, 1)
    EMB_OD_CASE(2, 6) EMB_OD_CASE(2, 5) EMB_OD_CASE(2, 4) EMB_OD_CASE(2, 3)
    EMB_OD_CASE(2, 2) EMB_OD_CASE(2, 1)
    EMB_OD_CASE(1, 6) EMB_OD_CASE(1, 5) EMB_OD_CASE(1, 4) EMB_OD_CASE(1, 3)
    EMB_OD_CASE(1, 2) EMB_OD_CASE(1, 1)
    default: break;
    }
}

/* 0: always 4 x 6 tiles (A/B measurements; conv._set_od_six) */
static int emb_od_six = 1;

EMB_T512 static void emb_odot_avx512(const float* G, int64_t gr, int64_t gn, int R,
                                     const float* src, int64_t sn, const int64_t* off, int T,
                                     int64_t Lr, int NB, float* dW, int64_t ldw) {
    /* 4 x 6 tiles; 6 x 4 where the rows come in sixes (LeNet's conv1, 6 channels: 4 + 2
     * rows re-read every source vector twice, the 2-row pass with 8 loads per 12 FMAs) */
    int RBM = (emb_od_six && R % 4 != 0 && R % 6 == 0) ? 6 : 4, TBM = RBM == 6 ? 4 : 6;
    for (int r0 = 0; r0 < R; r0 += RBM) {
        int rb = R - r0 < RBM ? R - r0 : RBM;
        for (int t0 = 0; t0 < T; t0 += TBM) {
            int tb = T - t0 < TBM ? T - t0 : TBM;
            emb_od_block(G + (int64_t)r0 * gr, gr, gn, src, sn, off + t0, Lr, NB,
                         dW + (int64_t)r0 * ldw + t0, ldw, rb, tb);
        }
    }
}

/* ---------------------------------------------------------------- emb_ogc
 * The forward vectorised over output channels instead of over pixels: one zmm holds 16
 * output channels of one output pixel, so only the OH x OW real outputs are computed (the
 * pixel-vectorised emb_og computes every one of the OH x Wq pitch positions: for LeNet's
 * conv2, 14 columns per row for 10 outputs).  A tile of RB rows x PB columns keeps RB*PB
 * accumulators; per tap one weight load and RB*PB FMAs with a broadcast source value.
 * The tile then goes out transposed (a scatter per pixel, channel o at o*OH*OW) with the bias
 * and, with relu, max(., 0) (NaN stays NaN).  Needs R (output channels) a multiple of 16;
 * out is one sample's (R, OH, OW) block. */

EMB_AI void emb_ogc_tile(const float* A, int64_t R, const float* src, const int64_t* off,
                         int T, int64_t l0, int64_t Wq, float* out, int64_t plane,
                         int64_t o0, int64_t OW, const float* bias, int relu,
                         const int RB, const int PB)
{
    __m512 acc[2][12];
    for (int r = 0; r < RB; r++)
        for (int p = 0; p < PB; p++)
            acc[r][p] = _mm512_setzero_ps();
    for (int t = 0; t < T; t++) {
        const float* s = src + off[t] + l0;
        __m512 w = _mm512_loadu_ps(A + (int64_t)t * R);
        for (int r = 0; r < RB; r++)
            for (int p = 0; p < PB; p++)
                acc[r][p] = _mm512_fmadd_ps(_mm512_set1_ps(s[r * Wq + p]), w, acc[r][p]);
    }
    const __m512 b = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    const __m512 z = _mm512_setzero_ps();
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)plane));
    for (int r = 0; r < RB; r++)
        for (int p = 0; p < PB; p++) {
            __m512 v = _mm512_add_ps(acc[r][p], b);
            if (relu)   /* v < 0 -> 0: NaN compares false and stays */
                v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, z, _CMP_LT_OQ), v, z);
            _mm512_i32scatter_ps(out + o0 + r * OW + p, idx, v, 4);
        }
}

#define EMB_OGC_CASE(RB, PB)                                                               \
    case (RB) * 16 + (PB):                                                                 \
        emb_ogc_tile(A, R, src, off, T, l0, Wq, out, plane, o0, OW, bias, relu, RB, PB);  \
        break;

EMB_T512 static void emb_ogc_block(const float* A, int64_t R, const float* src,
                                   const int64_t* off, int T, int64_t l0, int64_t Wq,
                                   float* out, int64_t plane, int64_t o0, int64_t OW,
                                   const float* bias, int relu, int rb, int pb) {
    switch (rb * 16 + pb) {
    EMB_OGC_CASE(2, 12) EMB_OGC_CASE(2, 11) EMB_OGC_CASE(2, 10) EMB_OGC_CASE(2, 9)
    EMB_OGC_CASE(2, 8) EMB_OGC_CASE(2, 7) EMB_OGC_CASE(2, 6) EMB_OGC_CASE(2, 5)
    EMB_OGC_CASE(2, 4) EMB_OGC_CASE(2, 3) EMB_OGC_CASE(2, 2) EMB_OGC_CASE(2, 1)
    EMB_OGC_CASE(1, 12) EMB_OGC_CASE(1, 11) EMB_OGC_CASE(1, 10) EMB_OGC_CASE(1, 9)
    EMB_OGC_CASE(1, 8) EMB_OGC_CASE(1, 7) EMB_OGC_CASE(1, 6) EMB_OGC_CASE(1, 5)
    EMB_OGC_CASE(1, 4) EMB_OGC_CASE(1, 3) EMB_OGC_CASE(1, 2) EMB_OGC_CASE(1, 1)
    default: break;
    }
}

EMB_T512 static void emb_ogc_avx512(const float* A, int T, int R, const float* src,
                                    const int64_t* off, float* out, int64_t OH, int64_t OW,
                                    int64_t Wq, const float* bias, int relu) {
    int64_t plane = OH * OW;
    for (int o0 = 0; o0 + 16 <= R; o0 += 16)
        for (int64_t oy = 0; oy < OH; oy += 2) {
            int rb = OH - oy < 2 ? 1 : 2;
            for (int64_t ox = 0; ox < OW; ox += 12) {
                int pb = OW - ox < 12 ? (int)(OW - ox) : 12;
                emb_ogc_block(A + o0, R, src, off, T, oy * Wq + ox, Wq,
                              out + (int64_t)o0 * plane, plane, oy * OW + ox, OW,
                              bias ? bias + o0 : NULL, relu, rb, pb);
            }
        }
}

/* ---------------------------------------------------------------- emb_odc
 * The weight gradient vectorised over output channels (kernel width 3 or 5):
 * dW[o*ldw + k*KW + j] += sum_n sum_(oy,ox)
 * gT[n*gn + (oy*OW + ox)*R + o] * src[n*sn + roff[k] + jo[j] + oy*Wq + ox], with gT the
 * gradient pixel-major (R channels per pixel, R a multiple of 16), roff[k] the source
 * offset of tap row k (channel c, kernel row i) and jo[j] tap j's offset within the row
 * (j at stride 1; at stride 2 the two column phases: 0, the phase distance, 1).  Only the real OH x OW outputs are
 * visited (emb_odot runs over every pitch column); a tile keeps KB tap rows x KW taps of
 * 16-channel partial sums, per pixel one gradient load and KB*KW FMAs with a broadcast
 * source value. */

EMB_AI void emb_odc_tile(const float* gT, int64_t gn, int64_t R, const float* src, int64_t sn,
                         const int64_t* roff, const int64_t* jo, int NB, int64_t OH,
                         int64_t OW, int64_t Wq, float* dW, int64_t ldw, const int KB,
                         const int KW)
{
    __m512 acc[8][5];
    int64_t jv[5];
    for (int j = 0; j < KW; j++)
        jv[j] = jo[j];
    for (int k = 0; k < KB; k++)
        for (int j = 0; j < KW; j++)
            acc[k][j] = _mm512_setzero_ps();
    for (int n = 0; n < NB; n++) {
        const float* g = gT + (int64_t)n * gn;
        const float* s = src + (int64_t)n * sn;
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                __m512 gv = _mm512_loadu_ps(g + (oy * OW + ox) * R);
                const float* sp = s + oy * Wq + ox;
                for (int k = 0; k < KB; k++)
                    for (int j = 0; j < KW; j++)
                        acc[k][j] = _mm512_fmadd_ps(_mm512_set1_ps(sp[roff[k] + jv[j]]), gv,
                                                    acc[k][j]);
            }
    }
    float tb[16] __attribute__((aligned(64)));
    for (int k = 0; k < KB; k++)
        for (int j = 0; j < KW; j++) {
            _mm512_store_ps(tb, acc[k][j]);
            for (int o = 0; o < 16; o++)
                dW[o * ldw + k * KW + j] += tb[o];
        }
}

#define EMB_ODC_CASE(KB, KW)                                                               \
    case (KW) * 16 + (KB):                                                                 \
        emb_odc_tile(g, gn, R, src, sn, ro, jo, NB, OH, OW, Wq, d, ldw, KB, KW); break;

EMB_T512 static void emb_odc_avx512(const float* gT, int64_t gn, int R, const float* src,
                                    int64_t sn, const int64_t* roff, const int64_t* jo,
                                    int Tr, int KW, int NB,
                                    int64_t OH, int64_t OW, int64_t Wq, float* dW,
                                    int64_t ldw) {
    int KBM = KW == 3 ? 8 : 4;
    for (int o0 = 0; o0 + 16 <= R; o0 += 16)
        for (int k0 = 0; k0 < Tr; k0 += KBM) {
            int kb = Tr - k0 < KBM ? Tr - k0 : KBM;
            const float* g = gT + o0;
            const int64_t* ro = roff + k0;
            float* d = dW + (int64_t)o0 * ldw + (int64_t)k0 * KW;
            switch (KW * 16 + kb) {
            EMB_ODC_CASE(8, 3) EMB_ODC_CASE(7, 3) EMB_ODC_CASE(6, 3) EMB_ODC_CASE(5, 3)
            EMB_ODC_CASE(4, 3) EMB_ODC_CASE(3, 3) EMB_ODC_CASE(2, 3) EMB_ODC_CASE(1, 3)
            EMB_ODC_CASE(4, 5) EMB_ODC_CASE(3, 5) EMB_ODC_CASE(2, 5) EMB_ODC_CASE(1, 5)
            default: break;
            }
        }
}

/* dst[p*O + o] = g[o*P + p] (one sample's gradient to pixel-major): 16 pixels of a
 * channel per load, one scatter. */
EMB_T512 static void emb_pixel_major_avx512(const float* g, int64_t O, int64_t P, float* dst) {
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)O));
    for (int64_t o = 0; o < O; o++) {
        const float* s = g + o * P;
        int64_t p = 0;
        for (; p + 16 <= P; p += 16)
            _mm512_i32scatter_ps(dst + p * O + o, idx, _mm512_loadu_ps(s + p), 4);
        if (p < P) {
            __mmask16 m = (__mmask16)((1u << (P - p)) - 1);
            _mm512_mask_i32scatter_ps(dst + p * O + o, m, idx, _mm512_maskz_loadu_ps(m, s + p),
                                      4);
        }
    }
}

/* Stride-2 row moves (the phase split of a stride-2 convolution):
 *   emb_even_rows: dst[y*dp + x] = src[y*sp + 2*x] for x < n (one input phase row), 16
 *                  outputs per step from two masked loads and one even-lane permute;
 *   emb_spread_rows: dst[y*dp + 2*x] = src[y*sp + x] for x < n (one input-gradient phase
 *                  row written back at stride 2), 8 values per masked store of the
 *                  even lanes.
 * Only the 2*n - 1 source floats (emb_even_rows) / destination floats (emb_spread_rows)
 * a row needs are touched. */
EMB_AI __mmask16 emb_mask16(int64_t k) {
    return (__mmask16)(k >= 16 ? 0xFFFF : (k <= 0 ? 0 : ((1u << k) - 1)));
}

EMB_T512 static void emb_even_rows_avx512(float* dst, int64_t dp, const float* src, int64_t sp,
                                          int64_t rows, int64_t n) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                         28, 30);
    for (int64_t y = 0; y < rows; y++) {
        const float* s = src + y * sp;
        float* d = dst + y * dp;
        for (int64_t x = 0; x < n; x += 16) {
            int64_t m = n - x < 16 ? n - x : 16;      /* outputs; 2m - 1 inputs */
            __m512 lo = _mm512_maskz_loadu_ps(emb_mask16(2 * m - 1), s + 2 * x);
            __m512 hi = _mm512_maskz_loadu_ps(emb_mask16(2 * m - 17), s + 2 * x + 16);
            _mm512_mask_storeu_ps(d + x, emb_mask16(m), _mm512_permutex2var_ps(lo, ev, hi));
        }
    }
}

EMB_T512 static void emb_spread_rows_avx512(float* dst, int64_t dp, const float* src,
                                            int64_t sp, int64_t rows, int64_t n) {
    const __m512i lo_i = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i hi_i = _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14,
                                           14, 15, 15);
    for (int64_t y = 0; y < rows; y++) {
        const float* s = src + y * sp;
        float* d = dst + y * dp;
        for (int64_t x = 0; x < n; x += 16) {
            int64_t m = n - x < 16 ? n - x : 16;      /* values; 2m - 1 destination floats */
            __m512 v = _mm512_maskz_loadu_ps(emb_mask16(m), s + x);
            __mmask16 e0 = (__mmask16)(emb_mask16(2 * m - 1) & 0x5555);
            __mmask16 e1 = (__mmask16)(emb_mask16(2 * m - 17) & 0x5555);
            _mm512_mask_storeu_ps(d + 2 * x, e0, _mm512_permutexvar_ps(lo_i, v));
            if (e1)
                _mm512_mask_storeu_ps(d + 2 * x + 16, e1, _mm512_permutexvar_ps(hi_i, v));
        }
    }
}

/* The two-phase forms (stride 2 along the row, both column phases in one pass):
 *   emb_split_rows: dE[y*dp + u] = src[y*sp + 2*u] (u < nE), dO[y*dp + u] =
 *                   src[y*sp + 2*u + 1] (u < nO): one input row into its two phase rows,
 *                   two loads and two permutes per 32 floats;
 *   emb_interleave_rows: dst[y*dp + 2*x] = A[y*ap + x] (x < nA), dst[y*dp + 2*x + 1] =
 *                   B[y*bp + x] (x < nB), nB == nA or nA - 1: two phase rows of an input
 *                   gradient back into one dx row with full stores. */
EMB_T512 static void emb_split_rows_avx512(float* dE, float* dO, int64_t dp, const float* src,
                                           int64_t sp, int64_t rows, int64_t nE, int64_t nO) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                         28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                         29, 31);
    int64_t nin = 2 * nE - 1 > 2 * nO ? 2 * nE - 1 : 2 * nO;     /* source floats read */
    int64_t n = nE > nO ? nE : nO;
    for (int64_t y = 0; y < rows; y++) {
        const float* s = src + y * sp;
        float* e = dE + y * dp;
        float* o = dO + y * dp;
        for (int64_t u = 0; u < n; u += 16) {
            __m512 lo = _mm512_maskz_loadu_ps(emb_mask16(nin - 2 * u), s + 2 * u);
            __m512 hi = _mm512_maskz_loadu_ps(emb_mask16(nin - 2 * u - 16), s + 2 * u + 16);
            _mm512_mask_storeu_ps(e + u, emb_mask16(nE - u), _mm512_permutex2var_ps(lo, ev, hi));
            _mm512_mask_storeu_ps(o + u, emb_mask16(nO - u), _mm512_permutex2var_ps(lo, od, hi));
        }
    }
}

EMB_T512 static void emb_interleave_rows_avx512(float* dst, int64_t dp, const float* A,
                                                const float* B, int64_t ap, int64_t bp,
                                                int64_t rows, int64_t nA, int64_t nB) {
    const __m512i lo_i = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                           7, 23);
    const __m512i hi_i = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14,
                                           30, 15, 31);
    int64_t nout = nA + nB;
    for (int64_t y = 0; y < rows; y++) {
        const float* a = A + y * ap;
        const float* b = B + y * bp;
        float* d = dst + y * dp;
        for (int64_t x = 0; x < nA; x += 16) {
            __m512 va = _mm512_maskz_loadu_ps(emb_mask16(nA - x), a + x);
            __m512 vb = _mm512_maskz_loadu_ps(emb_mask16(nB - x), b + x);
            _mm512_mask_storeu_ps(d + 2 * x, emb_mask16(nout - 2 * x),
                                  _mm512_permutex2var_ps(va, lo_i, vb));
            if (nout - 2 * x > 16)
                _mm512_mask_storeu_ps(d + 2 * x + 16, emb_mask16(nout - 2 * x - 16),
                                      _mm512_permutex2var_ps(va, hi_i, vb));
        }
    }
}

/* rows x cols floats from src (row pitch sp) to dst (row pitch dp), 16 lanes at a time
 * (masked at a row's end): short rows without a call to memcpy per row. */
EMB_T512 static void emb_copy_rows_avx512(float* dst, int64_t dp, const float* src, int64_t sp,
                                          int64_t rows, int64_t cols) {
    __mmask16 m = (__mmask16)((cols % 16) ? ((1u << (cols % 16)) - 1) : 0xFFFF);
    int64_t full = (cols % 16) ? cols - cols % 16 : cols - 16;
    for (int64_t y = 0; y < rows; y++) {
        const float* s = src + y * sp;
        float* d = dst + y * dp;
        int64_t x = 0;
        for (; x < full; x += 16)
            _mm512_storeu_ps(d + x, _mm512_loadu_ps(s + x));
        if (cols > 0)
            _mm512_mask_storeu_ps(d + x, m, _mm512_maskz_loadu_ps(m, s + x));
    }
}

/* dst[y*dp + x] = src[y*sp + x] + bias, then max(., 0) with relu (NaN stays NaN), for
 * rows x cols floats; dst may be src (same pitch). */
EMB_T512 static void emb_copy_rows_bias_avx512(float* dst, int64_t dp, const float* src,
                                               int64_t sp, int64_t rows, int64_t cols,
                                               float bias, int relu) {
    __mmask16 m = (__mmask16)((cols % 16) ? ((1u << (cols % 16)) - 1) : 0xFFFF);
    int64_t full = (cols % 16) ? cols - cols % 16 : cols - 16;
    const __m512 b = _mm512_set1_ps(bias), z = _mm512_setzero_ps();
    for (int64_t y = 0; y < rows; y++) {
        const float* s = src + y * sp;
        float* d = dst + y * dp;
        int64_t x = 0;
        for (; x < full; x += 16) {
            __m512 v = _mm512_add_ps(_mm512_loadu_ps(s + x), b);
            if (relu)   /* v < 0 -> 0: NaN compares false and stays */
                v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, z, _CMP_LT_OQ), v, z);
            _mm512_storeu_ps(d + x, v);
        }
        if (cols > 0) {
            __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, s + x), b);
            if (relu)
                v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, z, _CMP_LT_OQ), v, z);
            _mm512_mask_storeu_ps(d + x, m, v);
        }
    }
}

#else   /* not x86-64 with GCC/Clang: no AVX-512 path */

static int emb_conv_has_avx512(void) { return 0; }

#endif

/* ---------------------------------------------------------------- entry points
 * Plain C versions stand in where AVX-512 is missing (the Python layer then
 * normally takes its NumPy GEMM path instead; these keep the kernels correct). */

static void emb_og_c(const float* A, int T, int R, const float* src, const int64_t* off,
                     float* out, int64_t ldo, int64_t L, int accumulate) {
    for (int r = 0; r < R; r++) {
        float* o = out + (int64_t)r * ldo;
        if (!accumulate)
            for (int64_t l = 0; l < L; l++) o[l] = 0.0f;
        for (int t = 0; t < T; t++) {
            float a = A[(int64_t)t * R + r];
            const float* s = src + off[t];
            for (int64_t l = 0; l < L; l++) o[l] += a * s[l];
        }
    }
}

static void emb_odot_c(const float* G, int64_t gr, int64_t gn, int R, const float* src,
                       int64_t sn, const int64_t* off, int T, int64_t Lr, int NB, float* dW,
                       int64_t ldw) {
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            float acc = 0.0f;
            for (int n = 0; n < NB; n++) {
                const float* g = G + (int64_t)n * gn + (int64_t)r * gr;
                const float* s = src + (int64_t)n * sn + off[t];
                for (int64_t l = 0; l < Lr; l++) acc += g[l] * s[l];
            }
            dW[(int64_t)r * ldw + t] += acc;
        }
}

static inline void emb_og(int simd, const float* A, int T, int R, const float* src,
                          const int64_t* off, float* out, int64_t ldo, int64_t L) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_og_avx512(A, T, R, src, off, out, ldo, L, 0); return; }
#endif
    emb_og_c(A, T, R, src, off, out, ldo, L, 0);
}

/* emb_og_acc: out[r*ldo + l] += sum_t A[t*R + r] * src[off[t] + l] (the same blocking;
 * the accumulators start from out's values). */
static inline void emb_og_acc(int simd, const float* A, int T, int R, const float* src,
                              const int64_t* off, float* out, int64_t ldo, int64_t L) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_og_avx512(A, T, R, src, off, out, ldo, L, 1); return; }
#endif
    emb_og_c(A, T, R, src, off, out, ldo, L, 1);
}

/* emb_ogc: out[o*OH*OW + oy*OW + ox] = act(bias[o] + sum_t A[t*R + o] *
 * src[off[t] + oy*Wq + ox]) for one sample (R a multiple of 16; act = max(., 0) with
 * relu, NaN kept; bias may be NULL). */
static inline void emb_ogc(int simd, const float* A, int T, int R, const float* src,
                           const int64_t* off, float* out, int64_t OH, int64_t OW, int64_t Wq,
                           const float* bias, int relu) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_ogc_avx512(A, T, R, src, off, out, OH, OW, Wq, bias, relu); return; }
#endif
    for (int o = 0; o < R; o++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                float acc = 0.0f;
                for (int t = 0; t < T; t++)
                    acc += A[(int64_t)t * R + o] * src[off[t] + oy * Wq + ox];
                float v = acc + (bias ? bias[o] : 0.0f);
                out[(o * OH + oy) * OW + ox] = (relu && v < 0) ? 0.0f : v;
            }
}

/* emb_odc: the weight gradient over output channels (see emb_odc_avx512; roff[k] for the
 * Tr tap rows, taps k*KW + j at roff[k] + jo[j], KW 3 or 5, R a multiple of 16). */
static inline void emb_odc(int simd, const float* gT, int64_t gn, int R, const float* src,
                           int64_t sn, const int64_t* roff, const int64_t* jo, int Tr, int KW,
                           int NB, int64_t OH, int64_t OW, int64_t Wq, float* dW,
                           int64_t ldw) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_odc_avx512(gT, gn, R, src, sn, roff, jo, Tr, KW, NB, OH, OW, Wq, dW, ldw);
                return; }
#endif
    for (int o = 0; o < R; o++)
        for (int k = 0; k < Tr; k++)
            for (int j = 0; j < KW; j++) {
                float acc = 0.0f;
                for (int n = 0; n < NB; n++)
                    for (int64_t oy = 0; oy < OH; oy++)
                        for (int64_t ox = 0; ox < OW; ox++)
                            acc += gT[n * gn + (oy * OW + ox) * R + o] *
                                   src[n * sn + roff[k] + oy * Wq + ox + jo[j]];
                dW[(int64_t)o * ldw + k * KW + j] += acc;
            }
}

static inline void emb_pixel_major(int simd, const float* g, int64_t O, int64_t P,
                                   float* dst) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_pixel_major_avx512(g, O, P, dst); return; }
#endif
    for (int64_t o = 0; o < O; o++)
        for (int64_t p = 0; p < P; p++)
            dst[p * O + o] = g[o * P + p];
}

static inline void emb_odot(int simd, const float* G, int64_t gr, int64_t gn, int R,
                            const float* src, int64_t sn, const int64_t* off, int T, int64_t Lr,
                            int NB, float* dW, int64_t ldw) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_odot_avx512(G, gr, gn, R, src, sn, off, T, Lr, NB, dW, ldw); return; }
#endif
    emb_odot_c(G, gr, gn, R, src, sn, off, T, Lr, NB, dW, ldw);
}

static inline void emb_even_rows(int simd, float* dst, int64_t dp, const float* src,
                                 int64_t sp, int64_t rows, int64_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_even_rows_avx512(dst, dp, src, sp, rows, n); return; }
#endif
    for (int64_t y = 0; y < rows; y++)
        for (int64_t x = 0; x < n; x++)
            dst[y * dp + x] = src[y * sp + 2 * x];
}

static inline void emb_spread_rows(int simd, float* dst, int64_t dp, const float* src,
                                   int64_t sp, int64_t rows, int64_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_spread_rows_avx512(dst, dp, src, sp, rows, n); return; }
#endif
    for (int64_t y = 0; y < rows; y++)
        for (int64_t x = 0; x < n; x++)
            dst[y * dp + 2 * x] = src[y * sp + x];
}

static inline void emb_split_rows(int simd, float* dE, float* dO, int64_t dp,
                                  const float* src, int64_t sp, int64_t rows, int64_t nE,
                                  int64_t nO) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_split_rows_avx512(dE, dO, dp, src, sp, rows, nE, nO); return; }
#endif
    for (int64_t y = 0; y < rows; y++) {
        for (int64_t u = 0; u < nE; u++) dE[y * dp + u] = src[y * sp + 2 * u];
        for (int64_t u = 0; u < nO; u++) dO[y * dp + u] = src[y * sp + 2 * u + 1];
    }
}

static inline void emb_interleave_rows(int simd, float* dst, int64_t dp, const float* A,
                                       const float* B, int64_t ap, int64_t bp, int64_t rows,
                                       int64_t nA, int64_t nB) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_interleave_rows_avx512(dst, dp, A, B, ap, bp, rows, nA, nB); return; }
#endif
    for (int64_t y = 0; y < rows; y++) {
        for (int64_t x = 0; x < nA; x++) dst[y * dp + 2 * x] = A[y * ap + x];
        for (int64_t x = 0; x < nB; x++) dst[y * dp + 2 * x + 1] = B[y * bp + x];
    }
}

static inline void emb_copy_rows(int simd, float* dst, int64_t dp, const float* src,
                                 int64_t sp, int64_t rows, int64_t cols) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_copy_rows_avx512(dst, dp, src, sp, rows, cols); return; }
#endif
    for (int64_t y = 0; y < rows; y++)
        memcpy(dst + y * dp, src + y * sp, (size_t)cols * sizeof(float));
}

static inline void emb_copy_rows_bias(int simd, float* dst, int64_t dp, const float* src,
                                      int64_t sp, int64_t rows, int64_t cols, float bias,
                                      int relu) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_copy_rows_bias_avx512(dst, dp, src, sp, rows, cols, bias, relu); return; }
#endif
    for (int64_t y = 0; y < rows; y++)
        for (int64_t x = 0; x < cols; x++) {
            float v = src[y * sp + x] + bias;
            dst[y * dp + x] = (relu && v < 0) ? 0.0f : v;
        }
}

#endif
