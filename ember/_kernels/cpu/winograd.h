/* Winograd F(2x2, 3x3) for float32 3x3 stride-1 convolutions (used by winograd.pyx).
 *
 *   out[n, o, y, x] = sum_{c, i, j} in[n, c, y + i - pt, x + j - pl] * g[o, c, i, j]
 *
 * (zero outside the input; pt / pl may be negative).  The output is cut into 2x2 tiles;
 * tile (n, ty, tx) reads the 4x4 input patch at rows 2ty - pt .., columns 2tx - pl ..
 * With B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5;
 * 0 0 1] and A^T = [1 1 1 0; 0 1 -1 -1]:
 *
 *   V = B^T d B (16 values per tile and input channel)
 *   U = G g G^T (16 values per input and output channel; emb_wg_weights)
 *   M[k] = U[k]^T V[k] for each of the 16 components k: a GEMM over channels
 *   y = A^T M A (the 2x2 outputs of the tile)
 *
 * 16 multiply-adds per tile and channel pair instead of the direct form's 36.
 *
 * Work goes in blocks of at most Tp tiles (Tp a multiple of 16, at most 64; winograd.pyx
 * picks 16 for the forward, 64 for the weight gradient) held in the vector lanes: a block
 * is several whole tile rows (n, ty) when a row has at most Tp tiles, else a Tp-wide piece
 * of one row.  Per block (emb_wg_block):
 *   - input transform: V[k*VS + c*Tp + lane] (VS = C*Tp + 16: the 16 components of a
 *     channel in different L1 sets); masked loads straight from the input (the zeros of
 *     the padding), the rows' transform, then even/odd permutes for the columns: 16 tiles
 *     per vector, G = 16 / TW tile rows sharing a vector when a row has TW <= 8 tiles;
 *   - 16 GEMMs M[k] (O x lanes) = U[k]^T (O x C) V[k] (C x lanes), broadcasting U and
 *     keeping up to 6 x 64 or 12 x 16 outputs in zmm accumulators;
 *   - output transform (+ bias, ReLU) written straight into the NCHW output.
 * The weight gradient (emb_wg_wblock, below) shares the input transform.
 *
 * The functions carry a target attribute and are only called when emb_wg_simd() says
 * the CPU has AVX-512F; elsewhere the convolution does not take this path. */
#ifndef EMBER_WINOGRAD_H
#define EMBER_WINOGRAD_H

#include <stdint.h>
#include <string.h>

/* U[(k*Ci + ci)*Co + co] = (G g G^T)[k]; forward (flip 0): g = w[co, ci] with Ci = C,
 * Co = O of w (O, C, 3, 3); input gradient (flip 1): g = w[ci, co] rotated by 180
 * degrees, Ci = O, Co = C.  Computed in double, rounded once; for w's rows o0 <= o < o1
 * (threads take disjoint ranges). */
static void emb_wg_weights(const float* w, int64_t O, int64_t C, int flip, float* U,
                           int64_t o0, int64_t o1) {
    int64_t Ci = flip ? O : C, Co = flip ? C : O;
    for (int64_t o = o0; o < o1; o++)
        for (int64_t c = 0; c < C; c++) {
            const float* g = w + (o * C + c) * 9;
            double k[3][3], t[4][3], u[4][4];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    k[i][j] = flip ? g[(2 - i) * 3 + (2 - j)] : g[i * 3 + j];
            for (int j = 0; j < 3; j++) {
                t[0][j] = k[0][j];
                t[1][j] = 0.5 * (k[0][j] + k[1][j] + k[2][j]);
                t[2][j] = 0.5 * (k[0][j] - k[1][j] + k[2][j]);
                t[3][j] = k[2][j];
            }
            for (int i = 0; i < 4; i++) {
                u[i][0] = t[i][0];
                u[i][1] = 0.5 * (t[i][0] + t[i][1] + t[i][2]);
                u[i][2] = 0.5 * (t[i][0] - t[i][1] + t[i][2]);
                u[i][3] = t[i][2];
            }
            int64_t ci = flip ? o : c, co = flip ? c : o;
            for (int kk = 0; kk < 16; kk++)
                U[(kk * Ci + ci) * Co + co] = (float)u[kk / 4][kk % 4];
        }
}


/* dW[(o*C + c)*9 + i*3 + j] = (G^T Wh G)[i][j] with Wh[a][b] the sum over the nbuf
 * buffers b of Wh[b*bstride + ((a*4 + b)*C + c)*Op + o] (the weight gradient's output
 * transform; G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1]), for o0 <= o < o1 */
static void emb_wg_wout(const double* Wh, int nbuf, int64_t bstride, int64_t C, int64_t O,
                        int64_t Op, float* dW, int64_t o0, int64_t o1) {
    static const double GT[3][4] = {{1, 0.5, 0.5, 0}, {0, 0.5, -0.5, 0}, {0, 0.5, 0.5, 1}};
    (void)O;
    for (int64_t o = o0; o < o1; o++)
        for (int64_t c = 0; c < C; c++) {
            double m[4][4], t[3][4];
            for (int k = 0; k < 16; k++) {
                double v = 0.0;
                for (int b = 0; b < nbuf; b++)
                    v += Wh[b * bstride + (k * C + c) * Op + o];
                m[k / 4][k % 4] = v;
            }
            for (int i = 0; i < 3; i++)
                for (int b = 0; b < 4; b++)
                    t[i][b] = GT[i][0] * m[0][b] + GT[i][1] * m[1][b] + GT[i][2] * m[2][b] +
                              GT[i][3] * m[3][b];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    dW[(o * C + c) * 9 + i * 3 + j] =
                        (float)(t[i][0] * GT[j][0] + t[i][1] * GT[j][1] + t[i][2] * GT[j][2] +
                                t[i][3] * GT[j][3]);
        }
}

/* ------------------------------------------------------------ F(4x4, 3x3)
 *
 * The forward and the input gradient may also run as F(4x4, 3x3): 6x6 input tiles, 4x4
 * output tiles, 36 multiply-adds per tile and channel pair instead of the direct form's
 * 144 (2.25 per output instead of F(2x2, 3x3)'s 4).  Interpolation points 0, 1, -1, 1/2,
 * -2 and infinity: of the sets tried in a float32 simulation (ResNet shapes, error against
 * float64 over the largest |output|), {0, +-1, +-2} gave 2.6-5.1e-6, {0, +-1, +-1/2}
 * 2.8-5.2e-6, {0, 1, -1, 1/2, -2} 1.2-1.8e-6 (F(2x2, 3x3): 1.8-4.0e-7); see
 * benchmarks/README.md for the kernels' measured errors.
 *
 *   V = B^T d B (36 values per tile and input channel), U = G g G^T (emb_w4_weights),
 *   M[k] = U[k]^T V[k] (36 GEMMs over channels), y = A^T M A (the 4x4 outputs).
 *
 * Tile (n, ty, tx) reads input rows 4ty - pt .. 4ty - pt + 5, columns 4tx - pl .. + 5. */
static const float EMB_W4_BT[6][6] = {
    {1, -1.5f, -2, 1.5f, 1, 0},
    {0, -1, 0.5f, 2.5f, 1, 0},
    {0, 1, -2.5f, 0.5f, 1, 0},
    {0, -2, -1, 2, 1, 0},
    {0, 0.5f, -1, -0.5f, 1, 0},
    {0, 1, -1.5f, -2, 1.5f, 1}};
static const float EMB_W4_AT[4][6] = {
    {1, 1, 1, 1, 1, 0},
    {0, 1, -1, 0.5f, -2, 0},
    {0, 1, 1, 0.25f, 4, 0},
    {0, 1, -1, 0.125f, -8, 1}};
static const double EMB_W4_G[6][3] = {
    {1, 0, 0},
    {1.0 / 3, 1.0 / 3, 1.0 / 3},
    {-1.0 / 3, 1.0 / 3, -1.0 / 3},
    {-16.0 / 15, -8.0 / 15, -4.0 / 15},
    {1.0 / 15, -2.0 / 15, 4.0 / 15},
    {0, 0, 1}};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#define EMB_WG_AI static inline __attribute__((always_inline, target("avx512f")))
#define EMB_WG_T __attribute__((target("avx512f")))

static int emb_wg_simd(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
}

/* the component stride of V (C channels) or M (O channels): Tp lanes per channel plus one
 * cache line, so that the 16 components of one channel fall in different L1 sets */
static inline int64_t emb_wg_kstride(int64_t ch, int64_t Tp) {
    return ch * Tp + 16;
}

EMB_WG_AI __mmask16 emb_wg_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* lanes l of a 16-float load at column x (x + l in [0, W)) */
EMB_WG_AI __mmask16 emb_wg_cols(int64_t x, int64_t W) {
    int64_t lo = x < 0 ? -x : 0, hi = W - x;
    if (lo >= 16 || hi <= 0 || lo >= hi)
        return 0;
    return (__mmask16)(emb_wg_mask(hi) & ~emb_wg_mask(lo));
}

/* Input transform of `cnt` tiles of one tile row: input rows y0 .. y0+3, columns x0 ..
 * x0 + 2cnt + 1 of every channel of sample xn (C, H, W) -> V[k*VS + c*Tp + l], lanes l <
 * cnt (V already offset to the segment's first lane).  Masked loads straight from the
 * input give the zeros of the padding; per 16 tiles and row, three loads hold the 34
 * columns, the row transform (B^T) combines the four rows, and even/odd permutes give the
 * columns' transform (B). */
EMB_WG_T static void emb_wg_input(const float* xn, int64_t C, int64_t H, int64_t W,
                                  int64_t y0, int64_t x0, int64_t cnt, float* V, int64_t Tp,
                                  int64_t VS) {
    const int64_t nq = (cnt + 15) / 16;
    const __m512i IE = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i IO = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    /* e shifted down one lane, lane 15 from the third vector's lane 0 (es), or lane 1 (os) */
    const __m512i SE = _mm512_set_epi32(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
    const __m512i SO = _mm512_set_epi32(17, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
    for (int64_t q = 0; q < nq; q++) {
        __mmask16 mk[4][3];
        for (int i = 0; i < 4; i++) {
            int64_t y = y0 + i;
            for (int u = 0; u < 3; u++)
                mk[i][u] = (y < 0 || y >= H) ? 0 : emb_wg_cols(x0 + 32 * q + 16 * u, W);
        }
        const __mmask16 m = emb_wg_mask(cnt - 16 * q);
        const int64_t rowoff = y0 * W + x0 + 32 * q;
        for (int64_t c = 0; c < C; c++) {
            const float* p = xn + c * H * W + rowoff;
            /* the next tile row's two new input rows: the planes' rows are far apart (one
             * plane per channel), which the hardware prefetcher does not follow */
            for (int i = 4; i < 6; i++)
                for (int u = 0; u < 3; u++)
                    _mm_prefetch((const char*)(p + i * W + 16 * u), _MM_HINT_T0);
            __m512 d[4][3];
            for (int i = 0; i < 4; i++)
                for (int u = 0; u < 3; u++)
                    d[i][u] = _mm512_maskz_loadu_ps(mk[i][u], p + i * W + 16 * u);
            __m512 t[4][3];
            for (int u = 0; u < 3; u++) {
                t[0][u] = _mm512_sub_ps(d[0][u], d[2][u]);
                t[1][u] = _mm512_add_ps(d[1][u], d[2][u]);
                t[2][u] = _mm512_sub_ps(d[2][u], d[1][u]);
                t[3][u] = _mm512_sub_ps(d[1][u], d[3][u]);
            }
            float* v = V + c * Tp + 16 * q;
            for (int i = 0; i < 4; i++) {
                __m512 e = _mm512_permutex2var_ps(t[i][0], IE, t[i][1]);
                __m512 o = _mm512_permutex2var_ps(t[i][0], IO, t[i][1]);
                __m512 es = _mm512_permutex2var_ps(e, SE, t[i][2]);
                __m512 os = _mm512_permutex2var_ps(o, SO, t[i][2]);
                float* vi = v + (int64_t)(4 * i) * VS;
                _mm512_mask_storeu_ps(vi, m, _mm512_sub_ps(e, es));
                _mm512_mask_storeu_ps(vi + VS, m, _mm512_add_ps(o, es));
                _mm512_mask_storeu_ps(vi + 2 * VS, m, _mm512_sub_ps(es, o));
                _mm512_mask_storeu_ps(vi + 3 * VS, m, _mm512_sub_ps(o, os));
            }
        }
    }
}

/* M[(k*O + r)*Tp + l] for r < R, l < 16*NV: sum_c U[(k*C + c)*O + r] * V[(k*C + c)*Tp + l]
 * (U, M offset to the first output channel of the tile), added to M's values if `add` */
EMB_WG_AI void emb_wg_tile(const float* Vk, const float* Uk, float* Mk, int64_t C, int64_t O,
                           int64_t Tp, const int NV, const int R, int add) {
    __m512 acc[12][4];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 16")
        for (int v = 0; v < NV; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c++) {
        __m512 x[4];
        const float* vs = Vk + c * Tp;
        const float* us = Uk + c * O;
        _Pragma("GCC unroll 16")
        for (int v = 0; v < NV; v++)
            x[v] = _mm512_loadu_ps(vs + 16 * v);
        _Pragma("GCC unroll 16")
        for (int r = 0; r < R; r++) {
            __m512 w = _mm512_set1_ps(us[r]);
            _Pragma("GCC unroll 16")
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_fmadd_ps(w, x[v], acc[r][v]);
        }
    }
    if (add) {
        _Pragma("GCC unroll 16")
        for (int r = 0; r < R; r++)
            _Pragma("GCC unroll 16")
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_loadu_ps(Mk + r * Tp + 16 * v));
    }
    _Pragma("GCC unroll 16")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 16")
        for (int v = 0; v < NV; v++)
            _mm512_storeu_ps(Mk + r * Tp + 16 * v, acc[r][v]);
}

#define EMB_WG_TILE_FN(NV)                                                                 \
EMB_WG_T static void emb_wg_tile_nv##NV(const float* Vk, const float* Uk, float* Mk,     \
                                        int64_t C, int64_t O, int64_t Tp, int R, int ad) { \
    switch (R) {                                                                           \
    case 1: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 1, ad); break;                           \
    case 2: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 2, ad); break;                           \
    case 3: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 3, ad); break;                           \
    case 4: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 4, ad); break;                           \
    case 5: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 5, ad); break;                           \
    case 6: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 6, ad); break;                           \
    case 7: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 7, ad); break;                           \
    case 8: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 8, ad); break;                           \
    case 9: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 9, ad); break;                           \
    case 10: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 10, ad); break;                         \
    case 11: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 11, ad); break;                         \
    default: emb_wg_tile(Vk, Uk, Mk, C, O, Tp, NV, 12, ad); break;                         \
    }                                                                                      \
}
EMB_WG_TILE_FN(1)
EMB_WG_TILE_FN(2)
EMB_WG_TILE_FN(3)
EMB_WG_TILE_FN(4)

/* the K GEMMs of a block (K = 16 components for F(2x2, 3x3), 36 for F(4x4, 3x3)):
 * lanes < 16*NV; the sum over channels in chunks of CH channels, each chunk summed from
 * zero and then added (F(4x4, 3x3): the rounding of a long sequential sum, amplified by
 * the output transform, was most of its error) */
EMB_WG_T static void emb_wg_gemm(const float* V, const float* U, float* M, int64_t C,
                                 int64_t O, int64_t Tp, int NV, int K, int64_t CH) {
    const int64_t VS = emb_wg_kstride(C, Tp), MS = emb_wg_kstride(O, Tp);
    const int RB = NV == 1 ? 12 : NV == 2 ? 12 : NV == 3 ? 8 : 6;
    for (int k = 0; k < K; k++) {
        const float* Vk = V + (int64_t)k * VS;
        const float* Uk = U + (int64_t)k * C * O;
        float* Mk = M + (int64_t)k * MS;
        /* spread the output channels evenly over tiles of at most RB */
        int64_t ntile = (O + RB - 1) / RB;
        int64_t o0 = 0;
        for (int64_t tt = 0; tt < ntile; tt++) {
            int R = (int)((O - o0) / (ntile - tt));
            if ((O - o0) % (ntile - tt)) R++;
            for (int64_t c0 = 0; c0 < C; c0 += CH) {
                const float* vk = Vk + c0 * Tp;
                const float* uk = Uk + c0 * O + o0;
                const int64_t cc = C - c0 < CH ? C - c0 : CH;
                const int ad = c0 > 0;
                switch (NV) {
                case 1: emb_wg_tile_nv1(vk, uk, Mk + o0 * Tp, cc, O, Tp, R, ad); break;
                case 2: emb_wg_tile_nv2(vk, uk, Mk + o0 * Tp, cc, O, Tp, R, ad); break;
                case 3: emb_wg_tile_nv3(vk, uk, Mk + o0 * Tp, cc, O, Tp, R, ad); break;
                default: emb_wg_tile_nv4(vk, uk, Mk + o0 * Tp, cc, O, Tp, R, ad); break;
                }
            }
            o0 += R;
        }
    }
}

/* Output transform of `cnt` tiles of one tile row (M offset to its first lane): output rows
 * oy, oy+1 (if < OH), columns ox .. ox + 2cnt - 1 (those < OW) of sample outn (O, OH, OW),
 * plus bias[o] (if given), then max(., 0) if relu (NaN stays NaN). */
EMB_WG_T static void emb_wg_output(const float* M, int64_t O, int64_t Tp, int64_t cnt,
                                   float* outn, int64_t OH, int64_t OW, int64_t oy,
                                   int64_t ox, const float* bias, int relu) {
    const __m512i ILO = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i IHI = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const int two = oy + 1 < OH;
    const int64_t MS = emb_wg_kstride(O, Tp);
    const int64_t nq = (cnt + 15) / 16;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t o = 0; o < O; o++) {
        const float* mo = M + o * Tp;
        const __m512 bv = _mm512_set1_ps(bias ? bias[o] : 0.0f);
        float* r0 = outn + (o * OH + oy) * OW;
        float* r1 = r0 + OW;
        for (int64_t q = 0; q < nq; q++) {
            __m512 m[16];
            for (int k = 0; k < 16; k++)
                m[k] = _mm512_loadu_ps(mo + (int64_t)k * MS + 16 * q);
            __m512 s[4], dd[4];
            for (int j = 0; j < 4; j++) {
                s[j] = _mm512_add_ps(_mm512_add_ps(m[j], m[4 + j]), m[8 + j]);
                dd[j] = _mm512_sub_ps(_mm512_sub_ps(m[4 + j], m[8 + j]), m[12 + j]);
            }
            __m512 y00 = _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], bv));
            __m512 y01 = _mm512_sub_ps(_mm512_sub_ps(s[1], s[2]), _mm512_sub_ps(s[3], bv));
            __m512 y10 = _mm512_add_ps(_mm512_add_ps(dd[0], dd[1]), _mm512_add_ps(dd[2], bv));
            __m512 y11 = _mm512_sub_ps(_mm512_sub_ps(dd[1], dd[2]), _mm512_sub_ps(dd[3], bv));
            if (relu) {
                y00 = _mm512_max_ps(zero, y00);
                y01 = _mm512_max_ps(zero, y01);
                y10 = _mm512_max_ps(zero, y10);
                y11 = _mm512_max_ps(zero, y11);
            }
            int64_t c0 = ox + 32 * q;
            int64_t tq = cnt - 16 * q < 16 ? cnt - 16 * q : 16;
            int64_t ncol = OW - c0 < 2 * tq ? OW - c0 : 2 * tq;
            __mmask16 mlo = emb_wg_mask(ncol), mhi = emb_wg_mask(ncol - 16);
            _mm512_mask_storeu_ps(r0 + c0, mlo, _mm512_permutex2var_ps(y00, ILO, y01));
            _mm512_mask_storeu_ps(r0 + c0 + 16, mhi, _mm512_permutex2var_ps(y00, IHI, y01));
            if (two) {
                _mm512_mask_storeu_ps(r1 + c0, mlo, _mm512_permutex2var_ps(y10, ILO, y11));
                _mm512_mask_storeu_ps(r1 + c0 + 16, mhi, _mm512_permutex2var_ps(y10, IHI, y11));
            }
        }
    }
}

/* ---------------------------------------------------------- packed tile rows
 * A tile row of TW <= 16 tiles fills TW lanes; G = 16 / TW consecutive tile rows of a
 * block share one vector (tile row j of the group in lanes j*TW ..), so that the
 * transforms of small images (ResNet's 16- and 8-wide stages: TW 8 and 4) use every lane.
 * The 2TW + 2 input columns of tile row j are loaded into positions 2jTW .. of a 32-float
 * window (two vectors) by merge-masked loads, once at column offset 0 (for the even/odd
 * columns e, o) and once at offset 2 (es, os), so the even/odd permutes of the one-row
 * form apply unchanged. */

/* lanes of half h (positions 16h .. 16h + 15) of a window that belong to tile row j
 * (positions 2jTW .. 2jTW + 2TW - 1) and whose column x0 + position - 2jTW + sh is in
 * [0, W) */
EMB_WG_AI __mmask16 emb_wg_gmask(int64_t j, int64_t TW, int h, int64_t x0, int64_t sh,
                                 int64_t W) {
    int64_t lo = 2 * j * TW - 16 * h, hi = lo + 2 * TW;       /* lanes of tile row j */
    int64_t c0 = -(x0 + sh) + 2 * j * TW - 16 * h;           /* lane of column 0 */
    int64_t c1 = c0 + W;                                      /* lane of column W */
    if (lo < c0) lo = c0;
    if (hi > c1) hi = c1;
    if (lo < 0) lo = 0;
    if (hi > 16) hi = 16;
    if (hi <= lo)
        return 0;
    return (__mmask16)(emb_wg_mask(hi) & ~emb_wg_mask(lo));
}

/* Input transform of G tile rows of TW tiles (G * TW <= 16): tile row j reads rows
 * y0[j] .. y0[j] + 3, columns x0 .. of sample plane set xs[j] (C, H, W) -> lanes j*TW + k
 * of V[k*VS + c*Tp] (V offset to the group's first lane). */
EMB_WG_T static void emb_wg_input_g(const float* const* xs, const int64_t* y0, int G,
                                    int64_t TW, int64_t C, int64_t H, int64_t W, int64_t x0,
                                    float* V, int64_t Tp, int64_t VS) {
    const __m512i IE = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i IO = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __mmask16 mk[16][4][2][2];          /* [j][row i][shift 0/2][half] */
    int64_t off[16][4];                 /* [j][row i]: float offset of the row's column x0 */
    for (int j = 0; j < G; j++)
        for (int i = 0; i < 4; i++) {
            int64_t y = y0[j] + i;
            int ok = y >= 0 && y < H;
            off[j][i] = y * W + x0 - 2 * j * TW;
            for (int s = 0; s < 2; s++)
                for (int h = 0; h < 2; h++)
                    mk[j][i][s][h] = ok ? emb_wg_gmask(j, TW, h, x0, 2 * s, W) : 0;
        }
    const __mmask16 m = emb_wg_mask(G * TW);
    for (int64_t c = 0; c < C; c++) {
        __m512 d[4][2][2];
        for (int i = 0; i < 4; i++)
            for (int s = 0; s < 2; s++)
                for (int h = 0; h < 2; h++)
                    d[i][s][h] = _mm512_setzero_ps();
        for (int j = 0; j < G; j++) {
            const float* p = xs[j] + c * H * W;
            /* the next tile row's two new rows (see emb_wg_input) */
            _mm_prefetch((const char*)(p + off[j][3] + 2 * W), _MM_HINT_T0);
            _mm_prefetch((const char*)(p + off[j][3] + W + 2 * j * TW), _MM_HINT_T0);
            for (int i = 0; i < 4; i++)
                for (int s = 0; s < 2; s++)
                    for (int h = 0; h < 2; h++)
                        if (mk[j][i][s][h])
                            d[i][s][h] = _mm512_mask_loadu_ps(d[i][s][h], mk[j][i][s][h],
                                                              p + off[j][i] + 2 * s + 16 * h);
        }
        __m512 t[4][2][2];
        for (int s = 0; s < 2; s++)
            for (int h = 0; h < 2; h++) {
                t[0][s][h] = _mm512_sub_ps(d[0][s][h], d[2][s][h]);
                t[1][s][h] = _mm512_add_ps(d[1][s][h], d[2][s][h]);
                t[2][s][h] = _mm512_sub_ps(d[2][s][h], d[1][s][h]);
                t[3][s][h] = _mm512_sub_ps(d[1][s][h], d[3][s][h]);
            }
        float* v = V + c * Tp;
        for (int i = 0; i < 4; i++) {
            __m512 e = _mm512_permutex2var_ps(t[i][0][0], IE, t[i][0][1]);
            __m512 o = _mm512_permutex2var_ps(t[i][0][0], IO, t[i][0][1]);
            __m512 es = _mm512_permutex2var_ps(t[i][1][0], IE, t[i][1][1]);
            __m512 os = _mm512_permutex2var_ps(t[i][1][0], IO, t[i][1][1]);
            float* vi = v + (int64_t)(4 * i) * VS;
            _mm512_mask_storeu_ps(vi, m, _mm512_sub_ps(e, es));
            _mm512_mask_storeu_ps(vi + VS, m, _mm512_add_ps(o, es));
            _mm512_mask_storeu_ps(vi + 2 * VS, m, _mm512_sub_ps(es, o));
            _mm512_mask_storeu_ps(vi + 3 * VS, m, _mm512_sub_ps(o, os));
        }
    }
}

/* Output transform of G tile rows of TW tiles: tile row j writes rows oy[j], oy[j] + 1 (if
 * < OH) of sample outputs os_[j] (O, OH, OW), columns 0 .. 2TW - 1 (those < OW). */
EMB_WG_T static void emb_wg_output_g(const float* M, int64_t O, int64_t Tp, float* const* os_,
                                     const int64_t* oy, int G, int64_t TW, int64_t OH,
                                     int64_t OW, const float* bias, int relu) {
    const __m512i ILO = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i IHI = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const int64_t MS = emb_wg_kstride(O, Tp);
    const __m512 zero = _mm512_setzero_ps();
    __mmask16 mk[16][2][2];             /* [j][row 0/1][half] */
    int64_t off[16];
    for (int j = 0; j < G; j++) {
        off[j] = oy[j] * OW - 2 * j * TW;
        for (int h = 0; h < 2; h++) {
            __mmask16 mm = emb_wg_gmask(j, TW, h, 0, 0, OW);
            mk[j][0][h] = mm;
            mk[j][1][h] = oy[j] + 1 < OH ? mm : 0;
        }
    }
    for (int64_t o = 0; o < O; o++) {
        const float* mo = M + o * Tp;
        const __m512 bv = _mm512_set1_ps(bias ? bias[o] : 0.0f);
        __m512 m[16];
        for (int k = 0; k < 16; k++)
            m[k] = _mm512_loadu_ps(mo + (int64_t)k * MS);
        __m512 s[4], dd[4];
        for (int j = 0; j < 4; j++) {
            s[j] = _mm512_add_ps(_mm512_add_ps(m[j], m[4 + j]), m[8 + j]);
            dd[j] = _mm512_sub_ps(_mm512_sub_ps(m[4 + j], m[8 + j]), m[12 + j]);
        }
        __m512 y00 = _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], bv));
        __m512 y01 = _mm512_sub_ps(_mm512_sub_ps(s[1], s[2]), _mm512_sub_ps(s[3], bv));
        __m512 y10 = _mm512_add_ps(_mm512_add_ps(dd[0], dd[1]), _mm512_add_ps(dd[2], bv));
        __m512 y11 = _mm512_sub_ps(_mm512_sub_ps(dd[1], dd[2]), _mm512_sub_ps(dd[3], bv));
        if (relu) {
            y00 = _mm512_max_ps(zero, y00);
            y01 = _mm512_max_ps(zero, y01);
            y10 = _mm512_max_ps(zero, y10);
            y11 = _mm512_max_ps(zero, y11);
        }
        __m512 w[2][2] = {{_mm512_permutex2var_ps(y00, ILO, y01),
                           _mm512_permutex2var_ps(y00, IHI, y01)},
                          {_mm512_permutex2var_ps(y10, ILO, y11),
                           _mm512_permutex2var_ps(y10, IHI, y11)}};
        for (int j = 0; j < G; j++) {
            float* p = os_[j] + o * OH * OW + off[j];
            for (int r = 0; r < 2; r++)
                for (int h = 0; h < 2; h++)
                    if (mk[j][r][h])
                        _mm512_mask_storeu_ps(p + r * OW + 16 * h, mk[j][r][h], w[r][h]);
        }
    }
}

/* Output-gradient transform (A g A^T) of G tile rows of TW tiles: tile row j reads rows
 * oy[j], oy[j] + 1 (if < OH) of gs[j] (O, OH, OW) -> lanes j*TW + k of G_[k*GS + o*Tp]. */
EMB_WG_T static void emb_wg_gout_g(const float* const* gs, const int64_t* oy, int G,
                                   int64_t TW, int64_t O, int64_t OH, int64_t OW, float* G_,
                                   int64_t Tp, int64_t GS) {
    const __m512i IE = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i IO = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512 zero = _mm512_setzero_ps();
    __mmask16 mk[16][2][2];
    int64_t off[16];
    for (int j = 0; j < G; j++) {
        off[j] = oy[j] * OW - 2 * j * TW;
        for (int h = 0; h < 2; h++) {
            __mmask16 mm = emb_wg_gmask(j, TW, h, 0, 0, OW);
            mk[j][0][h] = mm;
            mk[j][1][h] = oy[j] + 1 < OH ? mm : 0;
        }
    }
    const __mmask16 m = emb_wg_mask(G * TW);
    for (int64_t o = 0; o < O; o++) {
        __m512 a[2][2] = {{zero, zero}, {zero, zero}};
        for (int j = 0; j < G; j++) {
            const float* p = gs[j] + o * OH * OW + off[j];
            _mm_prefetch((const char*)(p + 2 * OW + 2 * j * TW), _MM_HINT_T0);
            _mm_prefetch((const char*)(p + 3 * OW + 2 * j * TW), _MM_HINT_T0);
            for (int r = 0; r < 2; r++)
                for (int h = 0; h < 2; h++)
                    if (mk[j][r][h])
                        a[r][h] = _mm512_mask_loadu_ps(a[r][h], mk[j][r][h], p + r * OW + 16 * h);
        }
        __m512 e0 = _mm512_permutex2var_ps(a[0][0], IE, a[0][1]);
        __m512 o0 = _mm512_permutex2var_ps(a[0][0], IO, a[0][1]);
        __m512 e1 = _mm512_permutex2var_ps(a[1][0], IE, a[1][1]);
        __m512 o1 = _mm512_permutex2var_ps(a[1][0], IO, a[1][1]);
        __m512 re[4] = {e0, _mm512_add_ps(e0, e1), _mm512_sub_ps(e0, e1), _mm512_sub_ps(zero, e1)};
        __m512 ro[4] = {o0, _mm512_add_ps(o0, o1), _mm512_sub_ps(o0, o1), _mm512_sub_ps(zero, o1)};
        float* d = G_ + o * Tp;
        for (int i = 0; i < 4; i++) {
            float* di = d + (int64_t)(4 * i) * GS;
            _mm512_mask_storeu_ps(di, m, re[i]);
            _mm512_mask_storeu_ps(di + GS, m, _mm512_add_ps(re[i], ro[i]));
            _mm512_mask_storeu_ps(di + 2 * GS, m, _mm512_sub_ps(re[i], ro[i]));
            _mm512_mask_storeu_ps(di + 3 * GS, m, _mm512_sub_ps(zero, ro[i]));
        }
    }
}

/* Block b of the convolution of x (N, C, H, W) -> out (N, O, OH, OW): TH x TW tiles per
 * sample, NTR = N * TH tile rows; rpb tile rows per block when TW <= Tp, else TW is cut
 * into ceil(TW / Tp) pieces.  V: 16 * emb_wg_kstride(C, Tp) floats, M: 16 *
 * emb_wg_kstride(O, Tp) floats. */
EMB_WG_T static void emb_wg_block(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                                  int64_t pl, const float* U, int64_t O, float* out,
                                  int64_t OH, int64_t OW, int64_t TH, int64_t TW, int64_t NTR,
                                  int64_t Tp, int64_t rpb, int64_t b, const float* bias,
                                  int relu, float* V, float* M) {
    int64_t r0, r1, k0, cnt;
    if (TW <= Tp) {
        r0 = b * rpb;
        r1 = r0 + rpb < NTR ? r0 + rpb : NTR;
        k0 = 0;
        cnt = TW;
    } else {
        int64_t nch = (TW + Tp - 1) / Tp;
        r0 = b / nch;
        r1 = r0 + 1;
        k0 = (b % nch) * Tp;
        cnt = TW - k0 < Tp ? TW - k0 : Tp;
    }
    int64_t lanes = (r1 - r0) * cnt;
    int NV = (int)((lanes + 15) / 16);
    if (TW <= 8) {                   /* G tile rows per vector */
        const int64_t G = 16 / TW;
        for (int64_t g0 = r0; g0 < r1; g0 += G) {
            int ng = (int)(r1 - g0 < G ? r1 - g0 : G);
            const float* xs[16];
            int64_t y0[16];
            for (int j = 0; j < ng; j++) {
                int64_t n = (g0 + j) / TH, ty = (g0 + j) % TH;
                xs[j] = x + n * C * H * W;
                y0[j] = 2 * ty - pt;
            }
            emb_wg_input_g(xs, y0, ng, TW, C, H, W, -pl, V + (g0 - r0) * TW, Tp,
                           emb_wg_kstride(C, Tp));
        }
        emb_wg_gemm(V, U, M, C, O, Tp, NV, 16, C);
        for (int64_t g0 = r0; g0 < r1; g0 += G) {
            int ng = (int)(r1 - g0 < G ? r1 - g0 : G);
            float* os_[16];
            int64_t oy[16];
            for (int j = 0; j < ng; j++) {
                int64_t n = (g0 + j) / TH, ty = (g0 + j) % TH;
                os_[j] = out + n * O * OH * OW;
                oy[j] = 2 * ty;
            }
            emb_wg_output_g(M + (g0 - r0) * TW, O, Tp, os_, oy, ng, TW, OH, OW, bias, relu);
        }
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / TH, ty = r % TH;
        emb_wg_input(x + n * C * H * W, C, H, W, 2 * ty - pt, 2 * k0 - pl, cnt,
                     V + (r - r0) * cnt, Tp, emb_wg_kstride(C, Tp));
    }
    emb_wg_gemm(V, U, M, C, O, Tp, NV, 16, C);
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / TH, ty = r % TH;
        emb_wg_output(M + (r - r0) * cnt, O, Tp, cnt, out + n * O * OH * OW, OH, OW, 2 * ty,
                      2 * k0, bias, relu);
    }
}

/* ------------------------------------------------------------ weight gradient
 *
 *   dW[o, c, i, j] = sum_{n, y, x} g[n, o, y, x] * in[n, c, y + i - pt, x + j - pl]
 *
 * per 2x2 tile of g is F(3x3, 2x2), the transpose of the forward's F(2x2, 3x3): with
 * A = (A^T)^T (4 x 2), dW = G^T [ (A g A^T) (.) (B^T d B) ] G, so the input transform V is
 * the forward's and the sum over tiles runs in the transformed domain:
 *   Wh[k][c][o] += sum_t V[k][c][t] * Gh[k][t][o]     (16 GEMMs, K = tiles)
 * Gh is computed with tiles in the lanes, then transposed so that output channels are in
 * the lanes (16 per vector; O padded to Op, a multiple of 16, with zeros). */

/* Gh[k*GS + o*Tp + l] = (A g A^T)[k] for `cnt` tiles of one tile row (output-gradient rows
 * oy, oy + 1 (if < OH), columns ox ..); G offset to the segment's first lane. */
EMB_WG_T static void emb_wg_gout(const float* gn, int64_t O, int64_t OH, int64_t OW,
                                 int64_t oy, int64_t ox, int64_t cnt, float* G, int64_t Tp,
                                 int64_t GS) {
    const int64_t nq = (cnt + 15) / 16;
    const __m512i IE = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i IO = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const int two = oy + 1 < OH;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t q = 0; q < nq; q++) {
        const int64_t x = ox + 32 * q;
        const __mmask16 m0 = emb_wg_cols(x, OW), m1 = emb_wg_cols(x + 16, OW);
        const __mmask16 n0 = two ? m0 : 0, n1 = two ? m1 : 0;
        const __mmask16 m = emb_wg_mask(cnt - 16 * q);
        for (int64_t o = 0; o < O; o++) {
            const float* p = gn + (o * OH + oy) * OW + x;
            for (int i = 2; i < 4; i++) {          /* the next tile row's rows */
                _mm_prefetch((const char*)(p + i * OW), _MM_HINT_T0);
                _mm_prefetch((const char*)(p + i * OW + 16), _MM_HINT_T0);
            }
            __m512 a0 = _mm512_maskz_loadu_ps(m0, p), b0 = _mm512_maskz_loadu_ps(m1, p + 16);
            __m512 a1 = _mm512_maskz_loadu_ps(n0, p + OW), b1 = _mm512_maskz_loadu_ps(n1, p + OW + 16);
            __m512 e0 = _mm512_permutex2var_ps(a0, IE, b0), o0 = _mm512_permutex2var_ps(a0, IO, b0);
            __m512 e1 = _mm512_permutex2var_ps(a1, IE, b1), o1 = _mm512_permutex2var_ps(a1, IO, b1);
            /* rows: [r0, r0 + r1, r0 - r1, -r1] */
            __m512 re[4] = {e0, _mm512_add_ps(e0, e1), _mm512_sub_ps(e0, e1), _mm512_sub_ps(zero, e1)};
            __m512 ro[4] = {o0, _mm512_add_ps(o0, o1), _mm512_sub_ps(o0, o1), _mm512_sub_ps(zero, o1)};
            float* d = G + o * Tp + 16 * q;
            for (int i = 0; i < 4; i++) {
                float* di = d + (int64_t)(4 * i) * GS;
                _mm512_mask_storeu_ps(di, m, re[i]);
                _mm512_mask_storeu_ps(di + GS, m, _mm512_add_ps(re[i], ro[i]));
                _mm512_mask_storeu_ps(di + 2 * GS, m, _mm512_sub_ps(re[i], ro[i]));
                _mm512_mask_storeu_ps(di + 3 * GS, m, _mm512_sub_ps(zero, ro[i]));
            }
        }
    }
}

/* 16 x 16 transpose: rows r[0..15] (16 floats each) -> columns, in place */
EMB_WG_AI void emb_wg_tr16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 2; j++) {
            __m512d a = _mm512_castps_pd(t[4 * i + j]), b = _mm512_castps_pd(t[4 * i + j + 2]);
            r[4 * i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            r[4 * i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        }
    }
    /* r[4i + {0,1,2,3}] now hold, per 128-bit lane L, rows 4i..4i+3 at columns 4L + {0..3} */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
        }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
        r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xDD);
    }
}

/* GT[k*TS + t*Op + o] = G[k*GS + o*Tp + t] for k < K, t < 16*NV, o < Op (zero for o >= O) */
EMB_WG_T static void emb_wg_transpose(const float* G, int64_t O, int64_t Op, int64_t Tp,
                                      int64_t GS, int NV, float* GT, int64_t TS, int K) {
    for (int k = 0; k < K; k++)
        for (int64_t o0 = 0; o0 < Op; o0 += 16)
            for (int v = 0; v < NV; v++) {
                __m512 r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = o0 + i < O ? _mm512_loadu_ps(G + k * GS + (o0 + i) * Tp + 16 * v)
                                      : _mm512_setzero_ps();
                emb_wg_tr16(r);
                for (int i = 0; i < 16; i++)
                    _mm512_storeu_ps(GT + k * TS + (16 * v + i) * Op + o0, r[i]);
            }
}

/* Wh[(k*C + c)*Op + o] += sum_{t < T} V[k*VS + c*Tp + t] * GT[k*TS + t*Op + o] for c in
 * [c0, c0 + R), o in [o0, o0 + 16*NV) */
EMB_WG_AI void emb_wg_wtile(const float* Vk, const float* GTk, float* Whk, int64_t Tp,
                            int64_t Op, int64_t T, const int NV, const int R) {
    __m512 acc[12][4];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 16")
        for (int v = 0; v < NV; v++)
            acc[r][v] = _mm512_loadu_ps(Whk + r * Op + 16 * v);
    for (int64_t t = 0; t < T; t++) {
        __m512 g[4];
        _Pragma("GCC unroll 16")
        for (int v = 0; v < NV; v++)
            g[v] = _mm512_loadu_ps(GTk + t * Op + 16 * v);
        _Pragma("GCC unroll 16")
        for (int r = 0; r < R; r++) {
            __m512 w = _mm512_set1_ps(Vk[r * Tp + t]);
            _Pragma("GCC unroll 16")
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_fmadd_ps(w, g[v], acc[r][v]);
        }
    }
    _Pragma("GCC unroll 16")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 16")
        for (int v = 0; v < NV; v++)
            _mm512_storeu_ps(Whk + r * Op + 16 * v, acc[r][v]);
}

#define EMB_WG_WTILE_FN(NV)                                                                \
EMB_WG_T static void emb_wg_wtile_nv##NV(const float* Vk, const float* GTk, float* Whk,  \
                                         int64_t Tp, int64_t Op, int64_t T, int R) {       \
    switch (R) {                                                                           \
    case 1: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 1); break;                           \
    case 2: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 2); break;                           \
    case 3: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 3); break;                           \
    case 4: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 4); break;                           \
    case 5: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 5); break;                           \
    case 6: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 6); break;                           \
    case 7: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 7); break;                           \
    case 8: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 8); break;                           \
    case 9: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 9); break;                           \
    case 10: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 10); break;                         \
    case 11: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 11); break;                         \
    default: emb_wg_wtile(Vk, GTk, Whk, Tp, Op, T, NV, 12); break;                         \
    }                                                                                      \
}
EMB_WG_WTILE_FN(1)
EMB_WG_WTILE_FN(2)
EMB_WG_WTILE_FN(3)
EMB_WG_WTILE_FN(4)

/* scratch floats of one thread for the weight gradient's blocks */
static inline int64_t emb_wg_wscratch(int64_t C, int64_t O, int64_t Tp) {
    int64_t Op = (O + 15) / 16 * 16;
    return 16 * emb_wg_kstride(C, Tp) + 16 * emb_wg_kstride(O, Tp) + 16 * (Tp * Op + 16) +
           16 * C * Op;
}

/* The weight gradient's per-component products of one block, shared by the 2x2 (16
 * components) and 4x4 (36) tiles: Wb[k] += V[k] (C x T) times GT[k] (T x Op) on the
 * register tiles, then, with flush, the block's float sums added into the thread's
 * double accumulators Wh and Wb cleared. */
EMB_WG_T static void emb_wg_component_gemms(const float* V, int64_t VS, const float* GT,
                                            int64_t TS, float* Wb, double* Wh, int64_t C,
                                            int64_t Op, int64_t Tp, int64_t T, int ncomp,
                                            int flush) {
    for (int k = 0; k < ncomp; k++) {
        const float* Vk = V + k * VS;
        const float* GTk = GT + k * TS;
        float* Whk = Wb + (int64_t)k * C * Op;
        for (int64_t v0 = 0; v0 < Op / 16; v0 += 4) {
            int nv = (int)(Op / 16 - v0 < 4 ? Op / 16 - v0 : 4);
            const int RB = nv <= 2 ? 12 : nv == 3 ? 8 : 6;
            int64_t ntile = (C + RB - 1) / RB, c0 = 0;
            for (int64_t tt = 0; tt < ntile; tt++) {
                int R = (int)((C - c0) / (ntile - tt));
                if ((C - c0) % (ntile - tt)) R++;
                const float* vk = Vk + c0 * Tp;
                const float* gk = GTk + 16 * v0;
                float* wk = Whk + c0 * Op + 16 * v0;
                switch (nv) {
                case 1: emb_wg_wtile_nv1(vk, gk, wk, Tp, Op, T, R); break;
                case 2: emb_wg_wtile_nv2(vk, gk, wk, Tp, Op, T, R); break;
                case 3: emb_wg_wtile_nv3(vk, gk, wk, Tp, Op, T, R); break;
                default: emb_wg_wtile_nv4(vk, gk, wk, Tp, Op, T, R); break;
                }
                c0 += R;
            }
        }
    }
    if (!flush)
        return;
    for (int64_t i = 0; i < ncomp * C * Op; i += 16) {
        __m512 f = _mm512_loadu_ps(Wb + i);
        _mm512_storeu_ps(Wb + i, _mm512_setzero_ps());
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
        _mm512_storeu_pd(Wh + i, _mm512_add_pd(_mm512_loadu_pd(Wh + i), lo));
        _mm512_storeu_pd(Wh + i + 8, _mm512_add_pd(_mm512_loadu_pd(Wh + i + 8), hi));
    }
}

/* Block b (as in emb_wg_block) of the weight gradient: the block's products are summed
 * in float into this thread's partial sums (in S, zero at the start), which `flush` adds
 * into Wh (16 * C * Op doubles, this thread's) and zeroes: flushed every few blocks, a
 * long sum keeps the error of the direct kernels.  S: emb_wg_wscratch(C, O, Tp) floats. */
EMB_WG_T static void emb_wg_wblock(const float* x, int64_t C, int64_t H, int64_t W,
                                   int64_t pt, int64_t pl, const float* g, int64_t O,
                                   int64_t OH, int64_t OW, int64_t TH, int64_t TW,
                                   int64_t NTR, int64_t Tp, int64_t rpb, int64_t b,
                                   double* Wh, float* S, int flush) {
    int64_t r0, r1, k0, cnt;
    if (TW <= Tp) {
        r0 = b * rpb;
        r1 = r0 + rpb < NTR ? r0 + rpb : NTR;
        k0 = 0;
        cnt = TW;
    } else {
        int64_t nch = (TW + Tp - 1) / Tp;
        r0 = b / nch;
        r1 = r0 + 1;
        k0 = (b % nch) * Tp;
        cnt = TW - k0 < Tp ? TW - k0 : Tp;
    }
    const int64_t Op = (O + 15) / 16 * 16, VS = emb_wg_kstride(C, Tp);
    const int64_t GS = emb_wg_kstride(O, Tp), TS = Tp * Op + 16;
    float* V = S;
    float* G = V + 16 * VS;
    float* GT = G + 16 * GS;
    float* Wb = GT + 16 * TS;                 /* the block's sums, 16 * C * Op floats */
    const int64_t T = (r1 - r0) * cnt;
    const int NV = (int)((T + 15) / 16);
    if (TW <= 8) {                   /* G tile rows per vector */
        const int64_t NG = 16 / TW;
        for (int64_t g0 = r0; g0 < r1; g0 += NG) {
            int ng = (int)(r1 - g0 < NG ? r1 - g0 : NG);
            const float* xs[16];
            const float* gs[16];
            int64_t y0[16], oy[16];
            for (int j = 0; j < ng; j++) {
                int64_t n = (g0 + j) / TH, ty = (g0 + j) % TH;
                xs[j] = x + n * C * H * W;
                gs[j] = g + n * O * OH * OW;
                y0[j] = 2 * ty - pt;
                oy[j] = 2 * ty;
            }
            emb_wg_input_g(xs, y0, ng, TW, C, H, W, -pl, V + (g0 - r0) * TW, Tp, VS);
            emb_wg_gout_g(gs, oy, ng, TW, O, OH, OW, G + (g0 - r0) * TW, Tp, GS);
        }
    } else {
        for (int64_t r = r0; r < r1; r++) {
            int64_t n = r / TH, ty = r % TH;
            emb_wg_input(x + n * C * H * W, C, H, W, 2 * ty - pt, 2 * k0 - pl, cnt,
                         V + (r - r0) * cnt, Tp, VS);
            emb_wg_gout(g + n * O * OH * OW, O, OH, OW, 2 * ty, 2 * k0, cnt,
                        G + (r - r0) * cnt, Tp, GS);
        }
    }
    emb_wg_transpose(G, O, Op, Tp, GS, NV, GT, TS, 16);
    emb_wg_component_gemms(V, VS, GT, TS, Wb, Wh, C, Op, Tp, T, 16, flush);
}

/* U[(k*Ci + ci)*Co + co] = (G g G^T)[k], k < 36: as emb_wg_weights, for F(4x4, 3x3), in
 * double (rounded once), 8 output-side channels co per vector (scalar code took 170 ns a
 * channel pair, 0.7 ms for 64 x 64 channels on one core: more than the 8x8 layer's
 * blocks); for w's rows o0 <= o < o1 (threads take disjoint ranges). */
EMB_WG_T static void emb_w4_weights(const float* w, int64_t O, int64_t C, int flip, float* U,
                                    int64_t o0, int64_t o1) {
    const int64_t Ci = flip ? O : C, Co = flip ? C : O;
    /* pairs (ci, co): ci = c, co = o (forward) or ci = o, co = c (flip); co inner */
    const int64_t n0 = flip ? o1 - o0 : C, n1 = flip ? C : o1 - o0;
    for (int64_t a0 = 0; a0 < n0; a0++)
        for (int64_t a1 = 0; a1 < n1; a1 += 8) {
            const int nl = (int)(n1 - a1 < 8 ? n1 - a1 : 8);
            double kb[9][8];
            for (int l = 0; l < 8; l++) {
                const int64_t o = flip ? o0 + a0 : o0 + a1 + (l < nl ? l : 0);
                const int64_t c = flip ? a1 + (l < nl ? l : 0) : a0;
                const float* g = w + (o * C + c) * 9;
                for (int i = 0; i < 9; i++)
                    kb[i][l] = flip ? g[8 - i] : g[i];
            }
            __m512d k[9], t[6][3];
            for (int i = 0; i < 9; i++)
                k[i] = _mm512_loadu_pd(kb[i]);
            _Pragma("GCC unroll 6")
            for (int a = 0; a < 6; a++)
                _Pragma("GCC unroll 3")
                for (int j = 0; j < 3; j++) {
                    __m512d acc = _mm512_setzero_pd();
                    _Pragma("GCC unroll 3")
                    for (int i = 0; i < 3; i++)
                        if (EMB_W4_G[a][i] != 0.0)
                            acc = _mm512_fmadd_pd(_mm512_set1_pd(EMB_W4_G[a][i]), k[3 * i + j], acc);
                    t[a][j] = acc;
                }
            const int64_t ci = flip ? o0 + a0 : a0, co = flip ? a1 : o0 + a1;
            const __mmask16 m = (__mmask16)((1u << nl) - 1);
            _Pragma("GCC unroll 6")
            for (int a = 0; a < 6; a++)
                _Pragma("GCC unroll 6")
                for (int b = 0; b < 6; b++) {
                    __m512d acc = _mm512_setzero_pd();
                    _Pragma("GCC unroll 3")
                    for (int j = 0; j < 3; j++)
                        if (EMB_W4_G[b][j] != 0.0)
                            acc = _mm512_fmadd_pd(_mm512_set1_pd(EMB_W4_G[b][j]), t[a][j], acc);
                    _mm512_mask_storeu_ps(U + ((int64_t)(6 * a + b) * Ci + ci) * Co + co, m,
                                          _mm512_castps256_ps512(_mm512_cvtpd_ps(acc)));
                }
        }
}

/* channels per chunk of F(4x4, 3x3)'s sums over channels (emb_wg_gemm) */
#define EMB_W4_CHUNK 32

/* ------------------------------------------------------------ F(4x4, 3x3), AVX-512
 * Tiles are in the vector lanes.  A unit is one vector of 16 lanes holding segments: when
 * a tile row has TW <= 16 tiles, 16 / TW whole tile rows (lanes j*TW ..), else a piece of
 * at most 16 tiles of one row.  A block is Tp / 16 consecutive units.
 * Input transform of a unit: for each channel the 6 input rows of every segment are
 * loaded (merge-masked) into a 64-position window (tile lane t at positions 4t .. 4t + 3)
 * twice, at column shift 0 and 4 (columns 4t + 4, 4t + 5 are the next tile's, or past the
 * segment's last tile), the rows' transform (B^T) runs on the windows, two rounds of
 * even/odd permutes take out the six columns 4t + c of each tile, and the columns'
 * transform (B) runs with the tiles in the lanes. */

/* out[i] = sum_j T[i][j] in[j] for i < R, with T a constant table (inlined: the zero and
 * +-1 coefficients cost nothing or an add) */
EMB_WG_AI void emb_w4_apply(const float (*T)[6], const int R, const __m512* in, __m512* out) {
    _Pragma("GCC unroll 6")
    for (int i = 0; i < R; i++) {
        __m512 acc = _mm512_setzero_ps();
        int first = 1;
        _Pragma("GCC unroll 6")
        for (int j = 0; j < 6; j++) {
            const float c = T[i][j];
            if (c == 0.0f)
                continue;
            if (first)
                acc = c == 1.0f ? in[j] : _mm512_mul_ps(_mm512_set1_ps(c), in[j]);
            else if (c == 1.0f)
                acc = _mm512_add_ps(acc, in[j]);
            else if (c == -1.0f)
                acc = _mm512_sub_ps(acc, in[j]);
            else
                acc = _mm512_fmadd_ps(_mm512_set1_ps(c), in[j], acc);
            first = 0;
        }
        out[i] = acc;
    }
}

/* a segment of a unit: sample base (input or output planes), first row and column of its
 * first tile (input: 4ty - pt, 4k0 - pl; output: 4ty, 4k0), first lane, tiles */
typedef struct {
    const float* base;
    int64_t y0, x0, ls, cnt;
} emb_w4_seg;

/* lanes of window vector h (positions 16h ..) in segment positions [4ls, 4ls + 4cnt) whose
 * column xs + position - 4ls is in [0, W) */
EMB_WG_AI __mmask16 emb_w4_mask(int64_t ls, int64_t cnt, int h, int64_t xs, int64_t W) {
    int64_t lo = 4 * ls, hi = 4 * (ls + cnt);
    if (lo < 4 * ls - xs) lo = 4 * ls - xs;
    if (hi > 4 * ls - xs + W) hi = 4 * ls - xs + W;
    lo -= 16 * h;
    hi -= 16 * h;
    if (lo < 0) lo = 0;
    if (hi > 16) hi = 16;
    if (hi <= lo)
        return 0;
    return (__mmask16)(emb_wg_mask(hi) & ~emb_wg_mask(lo));
}

/* Input transform of one unit of ns segments (input planes (C, H, W) per segment) ->
 * V[k*VS + c*Tp + lane], k = 6i + j (V offset to the unit's first lane).  The columns
 * 4t + 4, 4t + 5 of tile t are columns 4t', 4t' + 1 of the next tile t' = t + 1 of its
 * segment, or for a segment's last tile the two columns past it, loaded into a boundary
 * vector (lanes 2j, 2j + 1 for segment j; a second one for segments 8 .. 15) whose rows'
 * transform runs with the window's.  nx[0 .. nns): the next unit's segments, whose input
 * rows are prefetched (the channel planes are far apart and the hardware prefetcher does
 * not follow). */
EMB_WG_T static void emb_w4_input(const emb_w4_seg* sg, int ns, const emb_w4_seg* nx, int nns,
                                  int64_t C, int64_t H, int64_t W, float* V, int64_t Tp,
                                  int64_t VS) {
    const __m512i IE = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i IO = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __mmask16 mk[16][6][4], bm[16][6];
    int64_t off[16][6], boff[16][6];
    int32_t i4[16], i5[16];
    const int two = ns > 8;             /* one tile per segment: both sources boundaries */
    /* lanes past the unit's tiles take a boundary lane past its segments (a zero), so that
     * V is zero there (the weight gradient sums over every lane) */
    for (int l = 0; l < 16; l++)
        i4[l] = i5[l] = (two ? 0 : 16) + (2 * ns < (two ? 32 : 16) ? 2 * ns : 0);
    for (int j = 0; j < ns; j++) {
        const int64_t ls = sg[j].ls, cnt = sg[j].cnt, bc = sg[j].x0 + 4 * cnt;
        const int bl = (2 * j) % 16;
        for (int64_t t = 0; t < cnt; t++) {
            int lane = (int)(ls + t);
            if (t + 1 < cnt) {
                i4[lane] = i5[lane] = lane + 1;
            } else {
                i4[lane] = (two ? 0 : 16) + 2 * j;
                i5[lane] = (two ? 0 : 16) + 2 * j + 1;
            }
        }
        __mmask16 cm = 0;
        for (int q = 0; q < 2; q++)
            if (bc + q >= 0 && bc + q < W)
                cm |= (__mmask16)(1u << (bl + q));
        for (int i = 0; i < 6; i++) {
            int64_t y = sg[j].y0 + i;
            int ok = y >= 0 && y < H;
            off[j][i] = y * W + sg[j].x0 - 4 * ls;
            boff[j][i] = y * W + bc - bl;
            bm[j][i] = ok ? cm : 0;
            for (int h = 0; h < 4; h++)
                mk[j][i][h] = ok ? emb_w4_mask(ls, cnt, h, sg[j].x0, W) : 0;
        }
    }
    const __m512i I4 = _mm512_loadu_si512(i4), I5 = _mm512_loadu_si512(i5);
    /* the next unit's rows: first float of each row's columns, and how many lines */
    int64_t poff[16][6];
    int nl[16];
    for (int j = 0; j < nns; j++) {
        nl[j] = (int)((4 * nx[j].cnt + 2 + 15) / 16);
        for (int i = 0; i < 6; i++) {
            int64_t y = nx[j].y0 + i, x0 = nx[j].x0 < 0 ? 0 : nx[j].x0;
            poff[j][i] = (y < 0 || y >= H) ? -1 : y * W + x0;
        }
    }
    for (int64_t c = 0; c < C; c++) {
        for (int j = 0; j < nns; j++) {
            const float* p = nx[j].base + c * H * W;
            for (int i = 0; i < 6; i++)
                if (poff[j][i] >= 0)
                    for (int q = 0; q < nl[j]; q++)
                        _mm_prefetch((const char*)(p + poff[j][i] + 16 * q), _MM_HINT_T0);
        }
        __m512 tb[6][4], bt[2][6];
        for (int h = 0; h < 4; h++) {
            __m512 d[6];
            for (int i = 0; i < 6; i++)
                d[i] = _mm512_setzero_ps();
            for (int j = 0; j < ns; j++) {
                const float* p = sg[j].base + c * H * W + 16 * h;
                for (int i = 0; i < 6; i++)
                    if (mk[j][i][h])
                        d[i] = _mm512_mask_loadu_ps(d[i], mk[j][i][h], p + off[j][i]);
            }
            __m512 t[6];
            emb_w4_apply(EMB_W4_BT, 6, d, t);
            for (int i = 0; i < 6; i++)
                tb[i][h] = t[i];
        }
        for (int half = 0; half < 1 + two; half++) {
            __m512 d[6];
            for (int i = 0; i < 6; i++)
                d[i] = _mm512_setzero_ps();
            const int j1 = ns < 8 * (half + 1) ? ns : 8 * (half + 1);
            for (int j = 8 * half; j < j1; j++) {
                const float* p = sg[j].base + c * H * W;
                for (int i = 0; i < 6; i++)
                    if (bm[j][i])
                        d[i] = _mm512_mask_loadu_ps(d[i], bm[j][i], p + boff[j][i]);
            }
            emb_w4_apply(EMB_W4_BT, 6, d, bt[half]);
        }
        float* v = V + c * Tp;
        for (int i = 0; i < 6; i++) {
            __m512 cl[6], r[6];
            __m512 e01 = _mm512_permutex2var_ps(tb[i][0], IE, tb[i][1]);
            __m512 o01 = _mm512_permutex2var_ps(tb[i][0], IO, tb[i][1]);
            __m512 e23 = _mm512_permutex2var_ps(tb[i][2], IE, tb[i][3]);
            __m512 o23 = _mm512_permutex2var_ps(tb[i][2], IO, tb[i][3]);
            cl[0] = _mm512_permutex2var_ps(e01, IE, e23);
            cl[1] = _mm512_permutex2var_ps(o01, IE, o23);
            cl[2] = _mm512_permutex2var_ps(e01, IO, e23);
            cl[3] = _mm512_permutex2var_ps(o01, IO, o23);
            if (two) {
                cl[4] = _mm512_permutex2var_ps(bt[0][i], I4, bt[1][i]);
                cl[5] = _mm512_permutex2var_ps(bt[0][i], I5, bt[1][i]);
            } else {
                cl[4] = _mm512_permutex2var_ps(cl[0], I4, bt[0][i]);
                cl[5] = _mm512_permutex2var_ps(cl[1], I5, bt[0][i]);
            }
            emb_w4_apply(EMB_W4_BT, 6, cl, r);
            for (int j = 0; j < 6; j++)
                _mm512_storeu_ps(v + (int64_t)(6 * i + j) * VS, r[j]);
        }
    }
}

/* Output transform of one unit of ns segments (output planes (O, OH, OW) per segment; M
 * offset to the unit's first lane): y = A^T M A + bias[o], max(., 0) if relu (NaN stays
 * NaN), rows y0 .. y0 + 3 (< OH), columns < OW.  Sets *bad if any y (any lane, before the
 * ReLU) is not finite: a NaN or infinity in a 6x6 input tile reaches all 16 outputs of
 * the tile (the transforms mix every row and column), not only those whose 3x3 window
 * holds it, and a large finite input may overflow in the transforms; the caller then
 * runs F(2x2, 3x3), whose transforms keep the direct form's NaN pattern. */
EMB_WG_T static void emb_w4_output(const float* M, int64_t O, int64_t Tp, const emb_w4_seg* sg,
                                   int ns, int64_t OH, int64_t OW, const float* bias,
                                   int relu, int* bad) {
    const __m512i ILO = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i IHI = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512i Q0 = _mm512_set_epi32(23, 22, 7, 6, 21, 20, 5, 4, 19, 18, 3, 2, 17, 16, 1, 0);
    const __m512i Q1 = _mm512_set_epi32(31, 30, 15, 14, 29, 28, 13, 12, 27, 26, 11, 10, 25, 24, 9, 8);
    const int64_t MS = emb_wg_kstride(O, Tp);
    const __m512 zero = _mm512_setzero_ps();
    __mmask16 mk[16][4][4];
    int64_t off[16][4];
    int64_t plane = OH * OW;
    __m512 chk = zero;                  /* y * 0 summed: NaN if any y is not finite */
    for (int j = 0; j < ns; j++)
        for (int a = 0; a < 4; a++) {
            int ok = sg[j].y0 + a < OH;
            off[j][a] = (sg[j].y0 + a) * OW + sg[j].x0 - 4 * sg[j].ls;
            for (int h = 0; h < 4; h++)
                mk[j][a][h] = ok ? emb_w4_mask(sg[j].ls, sg[j].cnt, h, sg[j].x0, OW) : 0;
        }
    for (int64_t o = 0; o < O; o++) {
        const float* mo = M + o * Tp;
        const __m512 bv = _mm512_set1_ps(bias ? bias[o] : 0.0f);
        __m512 z[4][6];
        for (int j = 0; j < 6; j++) {
            __m512 col[6];
            for (int i = 0; i < 6; i++)
                col[i] = _mm512_loadu_ps(mo + (int64_t)(6 * i + j) * MS);
            __m512 zz[4];
            emb_w4_apply(EMB_W4_AT, 4, col, zz);
            for (int a = 0; a < 4; a++)
                z[a][j] = zz[a];
        }
        for (int a = 0; a < 4; a++) {
            __m512 y[4];
            emb_w4_apply(EMB_W4_AT, 4, z[a], y);
            for (int b = 0; b < 4; b++) {
                y[b] = _mm512_add_ps(y[b], bv);
                chk = _mm512_fmadd_ps(y[b], zero, chk);
                if (relu)
                    y[b] = _mm512_max_ps(zero, y[b]);
            }
            __m512 p01l = _mm512_permutex2var_ps(y[0], ILO, y[1]);
            __m512 p01h = _mm512_permutex2var_ps(y[0], IHI, y[1]);
            __m512 p23l = _mm512_permutex2var_ps(y[2], ILO, y[3]);
            __m512 p23h = _mm512_permutex2var_ps(y[2], IHI, y[3]);
            __m512 w[4] = {_mm512_permutex2var_ps(p01l, Q0, p23l),
                           _mm512_permutex2var_ps(p01l, Q1, p23l),
                           _mm512_permutex2var_ps(p01h, Q0, p23h),
                           _mm512_permutex2var_ps(p01h, Q1, p23h)};
            for (int j = 0; j < ns; j++) {
                float* p = (float*)sg[j].base + o * plane + off[j][a];
                for (int h = 0; h < 4; h++)
                    if (mk[j][a][h])
                        _mm512_mask_storeu_ps(p + 16 * h, mk[j][a][h], w[h]);
            }
        }
    }
    if (_mm512_cmp_ps_mask(chk, chk, _CMP_UNORD_Q))
        *bad = 1;
}

/* the segments of unit u: TH x TW tiles per sample, NTR = N * TH tile rows; sample
 * planes at base + n * pstride; rows/columns of tile (ty, tx) at 4ty + dy, 4tx + dx */
static inline int emb_w4_unit(int64_t u, int64_t TH, int64_t TW, int64_t NTR,
                              const float* base, int64_t pstride, int64_t dy, int64_t dx,
                              emb_w4_seg* sg) {
    if (TW <= 16) {
        int64_t rpv = 16 / TW, r0 = u * rpv, r1 = r0 + rpv < NTR ? r0 + rpv : NTR;
        int ns = 0;
        for (int64_t r = r0; r < r1; r++, ns++) {
            sg[ns].base = base + (r / TH) * pstride;
            sg[ns].y0 = 4 * (r % TH) + dy;
            sg[ns].x0 = dx;
            sg[ns].ls = ns * TW;
            sg[ns].cnt = TW;
        }
        return ns;
    }
    int64_t nch = (TW + 15) / 16, r = u / nch, k0 = (u % nch) * 16;
    sg[0].base = base + (r / TH) * pstride;
    sg[0].y0 = 4 * (r % TH) + dy;
    sg[0].x0 = 4 * k0 + dx;
    sg[0].ls = 0;
    sg[0].cnt = TW - k0 < 16 ? TW - k0 : 16;
    return 1;
}

/* Block b of the F(4x4, 3x3) convolution of x (N, C, H, W) -> out (N, O, OH, OW): units
 * b*upb .. (b+1)*upb - 1 of NU (upb = Tp / 16).  V: 36 * emb_wg_kstride(C, Tp) floats, M:
 * 36 * emb_wg_kstride(O, Tp) floats.  *bad: as emb_w4_output. */
EMB_WG_T static void emb_w4_block(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                                  int64_t pl, const float* U, int64_t O, float* out,
                                  int64_t OH, int64_t OW, int64_t TH, int64_t TW, int64_t NTR,
                                  int64_t NU, int64_t Tp, int64_t b, const float* bias,
                                  int relu, float* V, float* M, int* bad) {
    const int64_t upb = Tp / 16, u0 = b * upb, u1 = u0 + upb < NU ? u0 + upb : NU;
    emb_w4_seg sg[16], nx[16];
    for (int64_t u = u0; u < u1; u++) {
        int ns = emb_w4_unit(u, TH, TW, NTR, x, C * H * W, -pt, -pl, sg);
        /* prefetching the next unit pays for rows of 8 tiles or more (ResNet's 32x32
         * stage: input transform 0.55-0.67 ms instead of 0.76-0.81, batch 64, one core);
         * at 16x16 and 8x8 a unit holds whole samples, the next unit's planes follow in
         * memory, and the prefetches cost 20-25% of the transform */
        int nns = TW >= 8 && u + 1 < NU ?
            emb_w4_unit(u + 1, TH, TW, NTR, x, C * H * W, -pt, -pl, nx) : 0;
        emb_w4_input(sg, ns, nx, nns, C, H, W, V + 16 * (u - u0), Tp, emb_wg_kstride(C, Tp));
    }
    emb_wg_gemm(V, U, M, C, O, Tp, (int)(u1 - u0), 36, EMB_W4_CHUNK);
    for (int64_t u = u0; u < u1; u++) {
        int ns = emb_w4_unit(u, TH, TW, NTR, out, O * OH * OW, 0, 0, sg);
        emb_w4_output(M + 16 * (u - u0), O, Tp, sg, ns, OH, OW, bias, relu, bad);
    }
}

/* ------------------------------------------------------------ F(4x4, 3x3) weight gradient
 *
 * Per 4x4 tile of the output gradient g, the transpose of F(4x4, 3x3) (F(3x3, 4x4)):
 * dW = G^T [ (A g A^T) (.) (B^T d B) ] G with A = (A^T)^T (6 x 4), so the input transform
 * V is the forward's (emb_w4_input) and the sum over tiles runs in the transformed domain:
 *   Wh[k][c][o] += sum_t V[k][c][t] * Gh[k][t][o]     (36 GEMMs, K = tiles)
 * as emb_wg_wblock does for 2x2 tiles. */

/* out[b] = sum_n AT[n][b] in[n], b < 6 (A = (A^T)^T applied to 4 values) */
EMB_WG_AI void emb_w4_apply_a(const __m512* in, __m512* out) {
    _Pragma("GCC unroll 6")
    for (int b = 0; b < 6; b++) {
        __m512 acc = _mm512_setzero_ps();
        int first = 1;
        _Pragma("GCC unroll 4")
        for (int n = 0; n < 4; n++) {
            const float c = EMB_W4_AT[n][b];
            if (c == 0.0f)
                continue;
            if (first)
                acc = c == 1.0f ? in[n] : _mm512_mul_ps(_mm512_set1_ps(c), in[n]);
            else if (c == 1.0f)
                acc = _mm512_add_ps(acc, in[n]);
            else if (c == -1.0f)
                acc = _mm512_sub_ps(acc, in[n]);
            else
                acc = _mm512_fmadd_ps(_mm512_set1_ps(c), in[n], acc);
            first = 0;
        }
        out[b] = acc;
    }
}

/* Gh[k*GS + o*Tp + lane] = (A g A^T)[k] for one unit of ns segments of output-gradient
 * tiles (planes (O, OH, OW) per segment; G_ offset to the unit's first lane); rows of the
 * next unit's segments nx[0 .. nns) are prefetched. */
EMB_WG_T static void emb_w4_gout(const emb_w4_seg* sg, int ns, const emb_w4_seg* nx, int nns,
                                 int64_t O, int64_t OH, int64_t OW, float* G_, int64_t Tp,
                                 int64_t GS) {
    const __m512i IE = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i IO = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const int64_t plane = OH * OW;
    __mmask16 mk[16][4][4];
    int64_t off[16][4], poff[16][4];
    int nl[16];
    for (int j = 0; j < ns; j++)
        for (int m = 0; m < 4; m++) {
            int ok = sg[j].y0 + m < OH;
            off[j][m] = (sg[j].y0 + m) * OW + sg[j].x0 - 4 * sg[j].ls;
            for (int h = 0; h < 4; h++)
                mk[j][m][h] = ok ? emb_w4_mask(sg[j].ls, sg[j].cnt, h, sg[j].x0, OW) : 0;
        }
    for (int j = 0; j < nns; j++) {
        nl[j] = (int)((4 * nx[j].cnt + 15) / 16);
        for (int m = 0; m < 4; m++)
            poff[j][m] = nx[j].y0 + m < OH ? (nx[j].y0 + m) * OW + nx[j].x0 : -1;
    }
    for (int64_t o = 0; o < O; o++) {
        for (int j = 0; j < nns; j++)
            for (int m = 0; m < 4; m++)
                if (poff[j][m] >= 0)
                    for (int q = 0; q < nl[j]; q++)
                        _mm_prefetch((const char*)(nx[j].base + o * plane + poff[j][m] + 16 * q),
                                     _MM_HINT_T0);
        __m512 r[4][6];
        for (int m = 0; m < 4; m++) {
            __m512 win[4], cl[4];
            for (int h = 0; h < 4; h++) {
                win[h] = _mm512_setzero_ps();
                for (int j = 0; j < ns; j++)
                    if (mk[j][m][h])
                        win[h] = _mm512_mask_loadu_ps(win[h], mk[j][m][h],
                                                      sg[j].base + o * plane + off[j][m] + 16 * h);
            }
            __m512 e01 = _mm512_permutex2var_ps(win[0], IE, win[1]);
            __m512 o01 = _mm512_permutex2var_ps(win[0], IO, win[1]);
            __m512 e23 = _mm512_permutex2var_ps(win[2], IE, win[3]);
            __m512 o23 = _mm512_permutex2var_ps(win[2], IO, win[3]);
            cl[0] = _mm512_permutex2var_ps(e01, IE, e23);
            cl[1] = _mm512_permutex2var_ps(o01, IE, o23);
            cl[2] = _mm512_permutex2var_ps(e01, IO, e23);
            cl[3] = _mm512_permutex2var_ps(o01, IO, o23);
            emb_w4_apply_a(cl, r[m]);
        }
        float* d = G_ + o * Tp;
        for (int b = 0; b < 6; b++) {
            __m512 col[4] = {r[0][b], r[1][b], r[2][b], r[3][b]}, gh[6];
            emb_w4_apply_a(col, gh);
            for (int a = 0; a < 6; a++)
                _mm512_storeu_ps(d + (int64_t)(6 * a + b) * GS, gh[a]);
        }
    }
}

/* dW[(o*C + c)*9 + i*3 + j] = (G^T Wh G)[i][j] with Wh[a][b] the sum over the nbuf
 * buffers of Wh[buf*bstride + ((6a + b)*C + c)*Op + o] (the F(4x4) weight gradient's
 * output transform, in double), for o0 <= o < o1: 8 output channels per vector (the
 * scalar form took ~170 ns a channel pair, 0.7 ms at 64 x 64 channels, as much as a
 * third of the layer) */
EMB_WG_T static void emb_w4_wout(const double* Wh, int nbuf, int64_t bstride, int64_t C,
                                 int64_t Op, float* dW, int64_t o0, int64_t o1) {
    for (int64_t c = 0; c < C; c++)
        for (int64_t ob = o0; ob < o1; ob += 8) {
            const int nl = (int)(o1 - ob < 8 ? o1 - ob : 8);
            const __mmask8 m = (__mmask8)((1u << nl) - 1);
            __m512d mm[36], t[3][6];
            for (int k = 0; k < 36; k++) {
                __m512d v = _mm512_setzero_pd();
                for (int bf = 0; bf < nbuf; bf++)
                    v = _mm512_add_pd(v, _mm512_maskz_loadu_pd(m, Wh + bf * bstride + (k * C + c) * Op + ob));
                mm[k] = v;
            }
            _Pragma("GCC unroll 3")
            for (int i = 0; i < 3; i++)
                _Pragma("GCC unroll 6")
                for (int b = 0; b < 6; b++) {
                    __m512d acc = _mm512_setzero_pd();
                    _Pragma("GCC unroll 6")
                    for (int a = 0; a < 6; a++)
                        if (EMB_W4_G[a][i] != 0.0)
                            acc = _mm512_fmadd_pd(_mm512_set1_pd(EMB_W4_G[a][i]), mm[6 * a + b], acc);
                    t[i][b] = acc;
                }
            double res[9][8];
            _Pragma("GCC unroll 3")
            for (int i = 0; i < 3; i++)
                _Pragma("GCC unroll 3")
                for (int j = 0; j < 3; j++) {
                    __m512d acc = _mm512_setzero_pd();
                    _Pragma("GCC unroll 6")
                    for (int b = 0; b < 6; b++)
                        if (EMB_W4_G[b][j] != 0.0)
                            acc = _mm512_fmadd_pd(_mm512_set1_pd(EMB_W4_G[b][j]), t[i][b], acc);
                    _mm512_storeu_pd(res[3 * i + j], acc);
                }
            for (int l = 0; l < nl; l++)
                for (int q = 0; q < 9; q++)
                    dW[((ob + l) * C + c) * 9 + q] = (float)res[q][l];
        }
}

/* scratch floats of one thread for the F(4x4) weight gradient's blocks */
static inline int64_t emb_w4_wscratch(int64_t C, int64_t O, int64_t Tp) {
    int64_t Op = (O + 15) / 16 * 16;
    return 36 * emb_wg_kstride(C, Tp) + 36 * emb_wg_kstride(O, Tp) + 36 * (Tp * Op + 16) +
           36 * C * Op;
}

/* Block b (units b*Tp/16 .. of NU, as emb_w4_block) of the F(4x4) weight gradient: as
 * emb_wg_wblock (float sums of the block's products in S, added into this thread's Wh,
 * 36 * C * Op doubles, when `flush`). */
EMB_WG_T static void emb_w4_wblock(const float* x, int64_t C, int64_t H, int64_t W,
                                   int64_t pt, int64_t pl, const float* g, int64_t O,
                                   int64_t OH, int64_t OW, int64_t TH, int64_t TW,
                                   int64_t NTR, int64_t NU, int64_t Tp, int64_t b,
                                   double* Wh, float* S, int flush) {
    const int64_t upb = Tp / 16, u0 = b * upb, u1 = u0 + upb < NU ? u0 + upb : NU;
    const int64_t Op = (O + 15) / 16 * 16, VS = emb_wg_kstride(C, Tp);
    const int64_t GS = emb_wg_kstride(O, Tp), TS = Tp * Op + 16;
    float* V = S;
    float* G = V + 36 * VS;
    float* GT = G + 36 * GS;
    float* Wb = GT + 36 * TS;                 /* the block's sums, 36 * C * Op floats */
    emb_w4_seg sg[16], nx[16];
    for (int64_t u = u0; u < u1; u++) {
        int ns = emb_w4_unit(u, TH, TW, NTR, x, C * H * W, -pt, -pl, sg);
        int nns = TW >= 8 && u + 1 < NU ?
            emb_w4_unit(u + 1, TH, TW, NTR, x, C * H * W, -pt, -pl, nx) : 0;
        emb_w4_input(sg, ns, nx, nns, C, H, W, V + 16 * (u - u0), Tp, VS);
        ns = emb_w4_unit(u, TH, TW, NTR, g, O * OH * OW, 0, 0, sg);
        nns = TW >= 8 && u + 1 < NU ? emb_w4_unit(u + 1, TH, TW, NTR, g, O * OH * OW, 0, 0, nx) : 0;
        emb_w4_gout(sg, ns, nx, nns, O, OH, OW, G + 16 * (u - u0), Tp, GS);
    }
    const int NV = (int)(u1 - u0);
    const int64_t T = 16 * NV;
    emb_wg_transpose(G, O, Op, Tp, GS, NV, GT, TS, 36);
    emb_wg_component_gemms(V, VS, GT, TS, Wb, Wh, C, Op, Tp, T, 36, flush);
}

#else  /* not x86-64 with GCC/Clang: never taken (emb_wg_simd() is 0) */

static int emb_wg_simd(void) { return 0; }
static inline int64_t emb_wg_kstride(int64_t ch, int64_t Tp) { return ch * Tp + 16; }
static inline int64_t emb_wg_wscratch(int64_t C, int64_t O, int64_t Tp) {
    (void)C; (void)O; (void)Tp;
    return 0;
}
static void emb_wg_wblock(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                          int64_t pl, const float* g, int64_t O, int64_t OH, int64_t OW,
                          int64_t TH, int64_t TW, int64_t NTR, int64_t Tp, int64_t rpb,
                          int64_t b, double* Wh, float* S, int flush) {
    (void)x; (void)C; (void)H; (void)W; (void)pt; (void)pl; (void)g; (void)O; (void)OH;
    (void)OW; (void)TH; (void)TW; (void)NTR; (void)Tp; (void)rpb; (void)b; (void)Wh; (void)S;
    (void)flush;
}
static void emb_wg_block(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                         int64_t pl, const float* U, int64_t O, float* out, int64_t OH,
                         int64_t OW, int64_t TH, int64_t TW, int64_t NTR, int64_t Tp,
                         int64_t rpb, int64_t b, const float* bias, int relu, float* V,
                         float* M) {
    (void)x; (void)C; (void)H; (void)W; (void)pt; (void)pl; (void)U; (void)O; (void)out;
    (void)OH; (void)OW; (void)TH; (void)TW; (void)NTR; (void)Tp; (void)rpb; (void)b;
    (void)bias; (void)relu; (void)V; (void)M;
}

static inline int64_t emb_w4_wscratch(int64_t C, int64_t O, int64_t Tp) {
    (void)C; (void)O; (void)Tp;
    return 0;
}
static void emb_w4_wout(const double* Wh, int nbuf, int64_t bstride, int64_t C, int64_t Op,
                        float* dW, int64_t o0, int64_t o1) {
    (void)Wh; (void)nbuf; (void)bstride; (void)C; (void)Op; (void)dW; (void)o0; (void)o1;
}
static void emb_w4_wblock(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                          int64_t pl, const float* g, int64_t O, int64_t OH, int64_t OW,
                          int64_t TH, int64_t TW, int64_t NTR, int64_t NU, int64_t Tp,
                          int64_t b, double* Wh, float* S, int flush) {
    (void)x; (void)C; (void)H; (void)W; (void)pt; (void)pl; (void)g; (void)O; (void)OH;
    (void)OW; (void)TH; (void)TW; (void)NTR; (void)NU; (void)Tp; (void)b; (void)Wh; (void)S;
    (void)flush;
}
static void emb_w4_weights(const float* w, int64_t O, int64_t C, int flip, float* U,
                           int64_t o0, int64_t o1) {
    (void)w; (void)O; (void)C; (void)flip; (void)U; (void)o0; (void)o1;
}
static void emb_w4_block(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                         int64_t pl, const float* U, int64_t O, float* out, int64_t OH,
                         int64_t OW, int64_t TH, int64_t TW, int64_t NTR, int64_t NU,
                         int64_t Tp, int64_t b, const float* bias, int relu, float* V,
                         float* M, int* bad) {
    (void)x; (void)C; (void)H; (void)W; (void)pt; (void)pl; (void)U; (void)O; (void)out;
    (void)OH; (void)OW; (void)TH; (void)TW; (void)NTR; (void)NU; (void)Tp; (void)b;
    (void)bias; (void)relu; (void)V; (void)M; (void)bad;
}

#endif
#endif
