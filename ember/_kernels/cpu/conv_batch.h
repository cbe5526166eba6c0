/* The input gradient of a small stride-1 float32 convolution with 16 samples in the
 * lanes of a zmm (used by conv.pyx, issue #25: LeNet-5's conv2, 6 -> 16 channels, 5x5,
 * 14x14 -> 10x10).
 *
 * The pixel-vectorised kernels (emb_og_acc) lay a 10-wide gradient row out at dx's
 * 14-float pitch and round the image to whole vectors: 100 useful outputs in 144 lanes.
 * Here every lane is a sample, so every FMA is useful (bar a batch tail that is not a
 * multiple of 16):
 *
 *   gT[((o*OH + oy)*OW + ox)*16 + l] = g[n0 + l, o, oy, ox]  (16 x 16 register transposes)
 *   dx[n0 + l, c, y, x] = sum_{o, i, j} w[o, c, i, j] * gT[o, y + ph0 - i, x + pw0 - j]
 *
 * computed a padded dx row (Wp = OW + KW - 1 <= 20 pixels) at a time in registers: per
 * (o, i) the KW weights are broadcast once, and each gradient vector feeds KW FMAs into
 * the accumulators ox .. ox + KW - 1 (a scatter along the row).  The rows are stored
 * sample-minor and go back to dx by the same transposes (a batch tail of under 16
 * samples, and a last partial tile, by masked gathers and scatters).  Loops over the row run to fixed bounds with a guard
 * so that the compiler unrolls them and keeps the accumulators in registers.
 *
 * Only called when emb_conv_has_avx512() holds; KW is 3 or 5, OW <= 16, and
 * 16 * O * OH * OW and 16 * C * H * W fit an int32 index. */
#ifndef EMBER_CONV_BATCH_H
#define EMBER_CONV_BATCH_H

#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define EMB_DXB_MAXW 20

/* r[k] <- (r[0][k], ..., r[15][k]): a 16 x 16 transpose in registers (unpacks at 32 and
 * 64 bits, then 128-bit lane shuffles). */
__attribute__((always_inline, target("avx512f"))) static inline void emb_tr16(__m512* r)
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
    }
}

/* xT[q*16 + l] = x[l*P + q] for the nb <= 16 samples of x (zeros in the other lanes). */
__attribute__((target("avx512f"))) static void emb_bt_in(const float* x, int64_t P, int64_t nb,
                                                         float* xT)
{
    const __mmask16 m = (__mmask16)((1u << nb) - 1u);
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)P));
    int64_t q = 0;
    if (nb == 16)           /* whole 16 x 16 tiles by register transposes */
        for (; q + 16 <= P; q += 16) {
            __m512 r[16];
            for (int l = 0; l < 16; l++) r[l] = _mm512_loadu_ps(x + l * P + q);
            emb_tr16(r);
            for (int k = 0; k < 16; k++) _mm512_storeu_ps(xT + (q + k) * 16, r[k]);
        }
    for (; q < P; q++)
        _mm512_storeu_ps(xT + q * 16,
                         _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, step, x + q, 4));
}

/* y[l*Q + q] = yT[q*16 + l] for the nb <= 16 samples of y. */
__attribute__((target("avx512f"))) static void emb_bt_out(const float* yT, int64_t Q,
                                                          int64_t nb, float* y)
{
    const __mmask16 m = (__mmask16)((1u << nb) - 1u);
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)Q));
    int64_t q = 0;
    if (nb == 16)
        for (; q + 16 <= Q; q += 16) {
            __m512 r[16];
            for (int k = 0; k < 16; k++) r[k] = _mm512_loadu_ps(yT + (q + k) * 16);
            emb_tr16(r);
            for (int l = 0; l < 16; l++) _mm512_storeu_ps(y + l * Q + q, r[l]);
        }
    for (; q < Q; q++)
        _mm512_mask_i32scatter_ps(y + q, m, step, _mm512_loadu_ps(yT + q * 16), 4);
}

/* The forward of a valid (unpadded) stride-1 convolution, the same way: per output
 * channel and output row the OW <= 16 outputs in registers; per (input channel, kernel
 * row) the KW weights broadcast once and each input vector of the row feeds the up to KW
 * outputs it reaches.  Bias and ReLU (NaN kept) on the way out. */
__attribute__((always_inline, target("avx512f"))) static inline void emb_fwb_rows(
    const float* xT, const float* w, const float* bias, int relu, float* oT, int64_t O,
    int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh, const int KW)
{
    for (int64_t o = 0; o < O; o++)
        for (int64_t oy = 0; oy < OH; oy++) {
            __m512 acc[16];
            const __m512 b0 = _mm512_set1_ps(bias ? bias[o] : 0.0f);
#pragma GCC unroll 16
            for (int x = 0; x < 16; x++) acc[x] = b0;
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < kh; i++) {
                    const float* wr = w + ((o * C + c) * kh + i) * KW;
                    const float* xr = xT + ((c * H + oy + i) * W) * 16;
                    __m512 wv[5];
#pragma GCC unroll 5
                    for (int j = 0; j < KW; j++) wv[j] = _mm512_set1_ps(wr[j]);
#pragma GCC unroll 20
                    for (int ix = 0; ix < EMB_DXB_MAXW; ix++) {
                        if (ix < W) {
                            __m512 xv = _mm512_loadu_ps(xr + ix * 16);
#pragma GCC unroll 5
                            for (int j = 0; j < KW; j++)
                                if (ix - j >= 0 && ix - j < 16 && ix - j < OW)
                                    acc[ix - j] = _mm512_fmadd_ps(wv[j], xv, acc[ix - j]);
                        }
                    }
                }
            float* orow = oT + (o * OH + oy) * OW * 16;
#pragma GCC unroll 16
            for (int x = 0; x < 16; x++)
                if (x < OW)
                    _mm512_storeu_ps(orow + x * 16, relu ? _mm512_max_ps(_mm512_setzero_ps(),
                                                                         acc[x]) : acc[x]);
        }
}

/* One block of nb <= 16 samples: x (N, C, H, W) and out (N, O, OH, OW) at sample n0; buf
 * holds 16 * (C * H * W + O * OH * OW) floats. */
__attribute__((target("avx512f"))) static void emb_fwb_avx512(
    const float* x, const float* w, const float* bias, int relu, float* out, int64_t nb,
    int64_t O, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh,
    int64_t kw, float* buf)
{
    float* oT = buf + 16 * C * H * W;
    emb_bt_in(x, C * H * W, nb, buf);
    if (kw == 5)
        emb_fwb_rows(buf, w, bias, relu, oT, O, C, H, W, OH, OW, kh, 5);
    else
        emb_fwb_rows(buf, w, bias, relu, oT, O, C, H, W, OH, OW, kh, 3);
    emb_bt_out(oT, O * OH * OW, nb, out);
}

/* The weight gradient of a valid stride-1 convolution, the same way: per block of 4
 * output channels, input channel and kernel row, 4 x KW accumulators of 16-lane partial
 * sums over the output pixels (per pixel 4 gradient and KW input loads for 4*KW FMAs),
 * reduced over the lanes into dW (added: dW holds a sum over blocks). */
__attribute__((always_inline, target("avx512f"))) static inline void emb_dwb_rows(
    const float* xT, const float* gT, float* dW, int64_t O, int64_t C, int64_t H, int64_t W,
    int64_t OH, int64_t OW, int64_t kh, const int KW)
{
    for (int64_t o0 = 0; o0 < O; o0 += 4)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < kh; i++) {
                __m512 acc[4][5];
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < KW; j++) acc[r][j] = _mm512_setzero_ps();
                for (int64_t oy = 0; oy < OH; oy++) {
                    const float* xr = xT + (c * H + oy + i) * W * 16;
                    const float* gr = gT + (o0 * OH + oy) * OW * 16;
                    for (int64_t ox = 0; ox < OW; ox++) {
                        __m512 gv[4], xv[5];
                        for (int r = 0; r < 4; r++)
                            gv[r] = _mm512_loadu_ps(gr + (r * OH * OW + ox) * 16);
                        for (int j = 0; j < KW; j++) xv[j] = _mm512_loadu_ps(xr + (ox + j) * 16);
                        for (int r = 0; r < 4; r++)
                            for (int j = 0; j < KW; j++)
                                acc[r][j] = _mm512_fmadd_ps(gv[r], xv[j], acc[r][j]);
                    }
                }
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < KW; j++)
                        dW[(((o0 + r) * C + c) * kh + i) * KW + j] +=
                            _mm512_reduce_add_ps(acc[r][j]);
            }
}

/* One block of nb <= 16 samples: x (N, C, H, W) and g (N, O, OH, OW) at sample n0, added
 * into dW (O, C, kh, kw); O a multiple of 4; buf holds 16 * (C * H * W + O * OH * OW)
 * floats. */
__attribute__((target("avx512f"))) static void emb_dwb_avx512(
    const float* x, const float* g, float* dW, int64_t nb, int64_t O, int64_t C, int64_t H,
    int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw, float* buf)
{
    float* gT = buf + 16 * C * H * W;
    emb_bt_in(x, C * H * W, nb, buf);
    emb_bt_in(g, O * OH * OW, nb, gT);
    if (kw == 5)
        emb_dwb_rows(buf, gT, dW, O, C, H, W, OH, OW, kh, 5);
    else
        emb_dwb_rows(buf, gT, dW, O, C, H, W, OH, OW, kh, 3);
}

__attribute__((always_inline, target("avx512f"))) static inline void emb_dxb_rows(
    const float* gT, const float* w, float* dT, int64_t O,
    int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t ph0,
    int64_t pw0, const int KW)
{
    for (int64_t c = 0; c < C; c++)
        for (int64_t y = 0; y < H; y++) {
            const int64_t yp = y + ph0;
            __m512 acc[EMB_DXB_MAXW];
#pragma GCC unroll 20
            for (int x = 0; x < EMB_DXB_MAXW; x++) acc[x] = _mm512_setzero_ps();
            int64_t i0 = yp - (OH - 1) > 0 ? yp - (OH - 1) : 0;
            int64_t i1 = yp < kh - 1 ? yp : kh - 1;
            for (int64_t o = 0; o < O; o++)
                for (int64_t i = i0; i <= i1; i++) {
                    const float* wr = w + ((o * C + c) * kh + i) * KW;
                    const float* gr = gT + ((o * OH + (yp - i)) * OW) * 16;
                    __m512 wv[5];
#pragma GCC unroll 5
                    for (int j = 0; j < KW; j++) wv[j] = _mm512_set1_ps(wr[j]);
#pragma GCC unroll 16
                    for (int ox = 0; ox < 16; ox++) {
                        if (ox < OW) {
                            __m512 gv = _mm512_loadu_ps(gr + ox * 16);
#pragma GCC unroll 5
                            for (int j = 0; j < KW; j++)
                                acc[ox + j] = _mm512_fmadd_ps(wv[j], gv, acc[ox + j]);
                        }
                    }
                }
            float* drow = dT + ((c * H + y) * W - pw0) * 16;
#pragma GCC unroll 20
            for (int x = 0; x < EMB_DXB_MAXW; x++)
                if (x >= pw0 && x < pw0 + W)
                    _mm512_storeu_ps(drow + x * 16, acc[x]);
        }
}

/* One block of nb <= 16 samples starting at g (N, O, OH, OW) / dx (N, C, H, W) sample
 * n0; w is (O, C, kh, KW); gT a buffer of 16 * (O * OH * OW + C * H * W) floats (the
 * block's gradient and its dx, sample-minor). */
__attribute__((target("avx512f"))) static void emb_dxb_avx512(
    const float* g, const float* w, float* dx, int64_t nb, int64_t O, int64_t C, int64_t H,
    int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw, int64_t ph0, int64_t pw0,
    float* gT)
{
    float* dT = gT + 16 * O * OH * OW;
    emb_bt_in(g, O * OH * OW, nb, gT);
    if (kw == 5)
        emb_dxb_rows(gT, w, dT, O, C, H, W, OH, OW, kh, ph0, pw0, 5);
    else
        emb_dxb_rows(gT, w, dT, O, C, H, W, OH, OW, kh, ph0, pw0, 3);
    emb_bt_out(dT, C * H * W, nb, dx);
}
#endif

static inline void emb_fwb(int simd, const float* x, const float* w, const float* bias,
                           int relu, float* out, int64_t nb, int64_t O, int64_t C, int64_t H,
                           int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw,
                           float* buf) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_fwb_avx512(x, w, bias, relu, out, nb, O, C, H, W, OH, OW, kh, kw, buf); return; }
#endif
    (void)simd; (void)x; (void)w; (void)bias; (void)relu; (void)out; (void)nb; (void)O;
    (void)C; (void)H; (void)W; (void)OH; (void)OW; (void)kh; (void)kw; (void)buf;
}

static inline void emb_dwb(int simd, const float* x, const float* g, float* dW, int64_t nb,
                           int64_t O, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW,
                           int64_t kh, int64_t kw, float* buf) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_dwb_avx512(x, g, dW, nb, O, C, H, W, OH, OW, kh, kw, buf); return; }
#endif
    (void)simd; (void)x; (void)g; (void)dW; (void)nb; (void)O; (void)C; (void)H; (void)W;
    (void)OH; (void)OW; (void)kh; (void)kw; (void)buf;
}

static inline void emb_dxb(int simd, const float* g, const float* w, float* dx, int64_t nb,
                           int64_t O, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW,
                           int64_t kh, int64_t kw, int64_t ph0, int64_t pw0, float* gT) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd) { emb_dxb_avx512(g, w, dx, nb, O, C, H, W, OH, OW, kh, kw, ph0, pw0, gT); return; }
#endif
    (void)simd; (void)g; (void)w; (void)dx; (void)nb; (void)O; (void)C; (void)H; (void)W;
    (void)OH; (void)OW; (void)kh; (void)kw; (void)ph0; (void)pw0; (void)gT;
}

#endif
