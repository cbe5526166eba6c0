/* float32 erf, sigmoid, softplus and the tanh GELU (the exact one: gelu_math.h) for the activation kernels
 * (embedding.pyx): branch-free, so their loops vectorise, on top of em_math.h's expf;
 * at the end, a hand-vectorised AVX-512 sigmoid / SiLU kernel (em_sigmoid_v4) that
 * embedding.pyx runs where em_vmath_isa() says AVX-512.
 *
 * erf: |x| < 0.921875: x + x Q(x^2), Q a degree-5 fit of erf(sqrt z)/sqrt z - 1;
 * above, 1 - exp(P(|x|)), P a degree-6 fit of log erfc on [0.921875, 4] weighted by erfc
 * (erf is 1.0f beyond 3.92).  The coefficients are least-squares-then-Lawson (near
 * minimax) fits made for ember, rounded to float32; tests/test_float32_math.py measures
 * the errors over every float32 in ranges.  The exact GELU and its derivative:
 * gelu_math.h (included here).
 *
 * Where the loops are built with FMA (the AVX2 / AVX-512 clones of embedding.pyx),
 * the Horner steps contract to fused multiply-adds.
 *
 * The *_fast versions are the same formulas with em_vmath.h's one-scaling exp (no clamps,
 * no NaN select): the kernels run them on blocks whose inputs all keep that exp's
 * argument within [-87, 87] (EM_*_FAST_OK) and the full versions on the other blocks. */
#ifndef EMBER_ACT_MATH_H
#define EMBER_ACT_MATH_H
#include "em_math.h"
#include "em_vmath.h"
#include "gelu_math.h"

#define EM_ERF_SPLIT 0.921875f

/* erf(sqrt z) / sqrt z - 1, z in [0, 0.85] */
static inline float em_erf_q(float z) {
    float q = -6.013395614e-04f * z + 4.998001270e-03f;
    q = q * z - 2.677023225e-02f;
    q = q * z + 1.128192693e-01f;
    q = q * z - 3.761250675e-01f;
    return q * z + 1.283791512e-01f;
}

/* log erfc(v), v in [0.921875, 4] */
static inline float em_erfc_log_mid(float v) {
    float p = 1.947338314e-04f * v - 3.031594446e-03f;
    p = p * v + 2.218137495e-02f;
    p = p * v - 1.038388610e-01f;
    p = p * v - 6.372858286e-01f;
    p = p * v - 1.127615452e+00f;
    return p * v - 2.099201374e-04f;
}

static inline float em_erff(float x) {
    float ax = em_copysign_bits(x, 1.0f);
    float small = ax + ax * em_erf_q(ax * ax);
    float v = em_fsel(ax > 4.0f, 4.0f, ax);            /* NaN stays NaN */
    float big = 1.0f - emv_exp_fast(em_erfc_log_mid(v));   /* argument in [-17, -1.6] */
    return em_copysign_bits(em_fsel(ax < EM_ERF_SPLIT, small, big), x);   /* keeps -0.0 */
}

static inline float em_sigmoid_core(float x, float e) {
    /* e = exp(-|x|) <= 1: 1 / (1 + e) for x >= 0, e / (1 + e) below (one division).
     * d = 1 + e rounds; err = (1 - d) + e is that rounding exactly (d >= 1 >= e), and
     * num / (d + err) = r (1 - err / d) with 1 / d = r for x >= 0 and about 1 - r below:
     * the correction leaves exp's error and the division's (1.5 ulp at most) */
    float d = 1.0f + e;
    float err = (1.0f - d) + e;
    int pos = x >= 0.0f;
    float r = em_fsel(pos, 1.0f, e) / d;
    float inv = em_fsel(pos, r, 1.0f - r);
    return r - r * (err * inv);
}

static inline float em_sigmoidf(float x) {
    return em_sigmoid_core(x, em_expf(-em_copysign_bits(x, 1.0f)));
}

/* |x| <= 87 (NaN excluded) */
#define EM_SIGMOID_FAST_OK(x) emv_exp_fast_ok(x)
static inline float em_sigmoidf_fast(float x) {
    return em_sigmoid_core(x, emv_exp_fast(-em_copysign_bits(x, 1.0f)));
}

#define EM_GELU_K 0.79788456080286535588f      /* sqrt(2 / pi) */
#define EM_GELU_C 0.044715f

/* PyTorch's tanh GELU, 0.5 x (1 + tanh(z)) = x sigmoid(2 z), z = k (x + c x^3): the
 * sigmoid form does not cancel for negative x */
static inline float em_gelu_tanhf(float x) {
    float z2 = (2.0f * EM_GELU_K) * (x + EM_GELU_C * x * x * x);
    return x * em_sigmoidf(z2);
}

/* |x| <= 9.5: |2 z| <= 77 */
#define EM_GELU_TANH_FAST_OK(x) (em_copysign_bits((x), 1.0f) <= 9.5f)
static inline float em_gelu_tanhf_fast(float x) {
    float z2 = (2.0f * EM_GELU_K) * (x + EM_GELU_C * x * x * x);
    return x * em_sigmoidf_fast(z2);
}

/* its derivative: s + x s (1 - s) dz2/dx */
static inline float em_gelu_tanh_gradf(float x) {
    float z2 = (2.0f * EM_GELU_K) * (x + EM_GELU_C * x * x * x);
    float s = em_sigmoidf(z2);
    float dz2 = (2.0f * EM_GELU_K) * (1.0f + (3.0f * EM_GELU_C) * x * x);
    return s + x * (s * (1.0f - s)) * dz2;
}

/* ---- softplus's log1p(exp(-|z|)): y = exp(-|z|) in [0, 1], log1p(y) = y + y (y R(y)),
 * R a degree-8 fit of (log1p(y) / y - 1) / y on [0, 1] (relative error 1.3e-8 with
 * float32 coefficients, a near-minimax fit made for ember); no log, no division */
static inline float em_log1p01_poly(float y) {
    float p = -3.244023304e-03f * y + 1.985145360e-02f;
    p = p * y - 5.695951730e-02f;
    p = p * y + 1.060365289e-01f;
    p = p * y - 1.530559063e-01f;
    p = p * y + 1.967593729e-01f;
    p = p * y - 2.495413274e-01f;
    p = p * y + 3.332996368e-01f;
    p = p * y - 4.999990463e-01f;
    return y + y * (y * p);
}

/* (max(z, 0) + log1p(exp(-|z|))) / beta with z = beta v, v where z > threshold; NaN
 * stays (the _fast one: |z| <= 87, NaN excluded) */
#define EM_SOFTPLUS(name, EXP) \
static inline float name(float v, float beta, float threshold) { \
    float z = v * beta; \
    float y = EXP(emv_i2f(emv_f2i(z) | 0x80000000u));      /* exp(-|z|) */ \
    float sp = (em_fsel(z > 0.0f, z, 0.0f) + em_log1p01_poly(y)) / beta; \
    sp = em_fsel(z > threshold, v, sp); \
    return em_fsel(v != v, v, sp); \
}
EM_SOFTPLUS(em_softplusf, em_expf)
EM_SOFTPLUS(em_softplusf_fast, emv_exp_fast)

/* ---- AVX-512 sigmoid (and SiLU), hand-vectorised: exp(-|x|) from a 16-entry table of
 * 2**(j/16) (hi + lo parts, one vpermps each) and a degree-3 polynomial on
 * |r| <= ln2/32 (relative error 9e-9), the scaling by 2**k added to the exponent bits;
 * then em_sigmoid_core's division and correction of the rounding of 1 + e.  9 multiplies
 * or FMAs per 16 elements where the autovectorised form has 13 (on Zen 4 the divider is
 * a unit of its own).  Lanes of a vector with any |x| > 87 or NaN take em_sigmoidf. */
#ifdef EMV_X86
#include <immintrin.h>
#define EMV_V4_INLINE static inline __attribute__((target("arch=x86-64-v4"), always_inline))

/* exp(a) for a in [-87.3, 0] (normal results only) */
EMV_V4_INLINE __m512 emv_exp16_nonpos(__m512 a) {
    const __m512 th = _mm512_setr_ps(
        1.000000000e+00f, 1.044273734e+00f, 1.090507746e+00f, 1.138788581e+00f,
        1.189207077e+00f, 1.241857767e+00f, 1.296839595e+00f, 1.354255557e+00f,
        1.414213538e+00f, 1.476826191e+00f, 1.542210817e+00f, 1.610490322e+00f,
        1.681792855e+00f, 1.756252170e+00f, 1.834008098e+00f, 1.915206552e+00f);
    const __m512 tl = _mm512_setr_ps(
        0.000000000e+00f, 4.833470157e-08f, -1.307753994e-08f, 5.386222313e-08f,
        3.797635273e-08f, 4.496838102e-08f, -4.018999533e-08f, -1.012334927e-08f,
        2.420323497e-08f, -4.500898854e-08f, 8.070904833e-09f, 9.836217174e-09f,
        -2.475532668e-08f, -9.235770371e-09f, -1.123927795e-08f, 9.845328108e-09f);
    /* tt's low bits: m = round(a 16 / ln 2); r = a - m ln2/16 (Cody-Waite, two parts) */
    __m512 tt = _mm512_fmadd_ps(a, _mm512_set1_ps(23.083120654223414f),
                                _mm512_set1_ps(12582912.0f));
    __m512 m = _mm512_sub_ps(tt, _mm512_set1_ps(12582912.0f));
    __m512 r = _mm512_fnmadd_ps(m, _mm512_set1_ps(0.0433349609375f), a);
    r = _mm512_fnmadd_ps(m, _mm512_set1_ps(-1.326215261e-05f), r);
    __m512i ti = _mm512_castps_si512(tt);
    __m512 hi = _mm512_permutexvar_ps(ti, th), lo = _mm512_permutexvar_ps(ti, tl);  /* j = m & 15 */
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 q = _mm512_fmadd_ps(r2, _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 6.0f),
                                                   _mm512_set1_ps(0.5f)), r);   /* e^r - 1 */
    __m512 e = _mm512_add_ps(_mm512_fmadd_ps(hi, q, lo), hi);
    __m512i k = _mm512_srai_epi32(_mm512_sub_epi32(ti, _mm512_set1_epi32(0x4b400000)), 4);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(e),
                                                _mm512_slli_epi32(k, 23)));
}

/* sigmoid of 16 lanes with |x| <= 87 */
EMV_V4_INLINE __m512 emv_sigmoid16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 a = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x),
                                                   _mm512_set1_epi32((int)0x80000000u)));
    __m512 e = emv_exp16_nonpos(a);                        /* exp(-|x|) */
    __m512 d = _mm512_add_ps(one, e);
    __m512 err = _mm512_add_ps(_mm512_sub_ps(one, d), e);  /* 1 + e = d + err exactly */
    __mmask16 neg = _mm512_movepi32_mask(_mm512_castps_si512(x));
    __m512 r = _mm512_div_ps(_mm512_mask_blend_ps(neg, one, e), d);
    __m512 inv = _mm512_mask_sub_ps(r, neg, one, r);        /* 1 / d */
    return _mm512_fnmadd_ps(r, _mm512_mul_ps(err, inv), r);
}

/* out = sigmoid(x), or x sigmoid(x) with silu */
__attribute__((target("arch=x86-64-v4"), unused)) static void
em_sigmoid_v4(const float *restrict x, float *restrict out, ptrdiff_t n, int silu) {
    const __m512 lim = _mm512_set1_ps(87.0f);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        if (_mm512_cmp_ps_mask(_mm512_abs_ps(v), lim, _CMP_LE_OQ) == 0xffff) {
            __m512 s = emv_sigmoid16(v);
            _mm512_storeu_ps(out + i, silu ? _mm512_mul_ps(v, s) : s);
        } else {
            for (ptrdiff_t j = i; j < i + 16; j++)
                out[j] = silu ? x[j] * em_sigmoidf(x[j]) : em_sigmoidf(x[j]);
        }
    }
    if (i < n) {                                           /* the last n - i < 16 */
        __mmask16 mk = (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(mk, x + i);
        if (_mm512_cmp_ps_mask(_mm512_abs_ps(v), lim, _CMP_LE_OQ) == 0xffff) {
            __m512 s = emv_sigmoid16(v);
            _mm512_mask_storeu_ps(out + i, mk, silu ? _mm512_mul_ps(v, s) : s);
        } else {
            for (ptrdiff_t j = i; j < n; j++)
                out[j] = silu ? x[j] * em_sigmoidf(x[j]) : em_sigmoidf(x[j]);
        }
    }
}
#endif

#endif
