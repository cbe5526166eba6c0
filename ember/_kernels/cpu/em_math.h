/* ember's float32 exp, expm1, log, log1p, tanh, sin, cos and the 16-bit float
 * conversions: branch-free, so the loops that call them vectorise (libm's are one
 * call per element).  Used by the generated elementwise loops (ember.exp, ember.log,
 * every float16 / bfloat16 loop ...), the scalar stores of the dispatcher and the
 * activation kernels.
 *
 * Full IEEE behaviour, as NumPy's: NaN propagates, infinities and signed zeros come
 * out as they should, subnormal inputs and results are handled (2**n is applied as
 * two exact powers of two, so a subnormal result is rounded once).  Accuracy against
 * the float64 result over the whole float32 range (tests/test_float32_math.py):
 * exp 1.0 ulp, expm1 2, log 1.0, log1p 2.5, tanh 1.5; sin and cos (below 8192 in
 * magnitude; the loops use libm above) 3.5.
 *
 * Selects are written with bit masks, not `c ? a : b`: without -fno-trapping-math
 * GCC keeps a float ternary as a branch and the loop does not vectorise.
 * The polynomials are Cephes' (expf, logf, tanhf). */
#ifndef EMBER_EM_MATH_H
#define EMBER_EM_MATH_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float em_i2f(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t em_f2i(float f) { int32_t i; memcpy(&i, &f, 4); return i; }

/* a where c else b (c is 0 or 1), without a branch */
static inline uint32_t em_sel_u32(int c, uint32_t a, uint32_t b) {
    uint32_t m = 0u - (uint32_t)c;
    return (a & m) | (b & ~m);
}

/* ---- 16-bit floats <-> float32, round to nearest even, branch-free (the loops that
 * call them vectorise).  NaN stays a quiet NaN. */

/* IEEE binary16: the 15 magnitude bits moved into float32 position and scaled by
 * 2**112 give every finite value exactly (subnormals too); inf/NaN take the top
 * exponent */
static inline float em_h2f(uint16_t h) {
    uint32_t em = h & 0x7fffu;
    float f = em_i2f((int32_t)(em << 13)) * 5.192296858534828e33f;
    uint32_t bits = em_sel_u32(em >= 0x7c00u, (em << 13) | 0x7f800000u, (uint32_t)em_f2i(f));
    return em_i2f((int32_t)(bits | ((uint32_t)(h & 0x8000u) << 16)));
}

static inline uint16_t em_f2h(float f) {
    uint32_t x = (uint32_t)em_f2i(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint32_t o_big = em_sel_u32(x > 0x7f800000u, 0x7e00u, 0x7c00u);   /* NaN, or inf */
    /* below 2**-14 the FPU's rounding of x + 0.5 at 2**-24 is float16's */
    uint32_t o_sub = (uint32_t)em_f2i(em_i2f((int32_t)x) + 0.5f) - 0x3f000000u;
    /* normal range: rebias the exponent (-112 << 23), round the 13 dropped bits to even */
    uint32_t o_norm = (x - 0x37fff001u + ((x >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | em_sel_u32(x >= 0x47800000u, o_big,
                                        em_sel_u32(x < 0x38800000u, o_sub, o_norm)));
}

/* em_h2f with a signalling NaN made quiet (bit 22 set), as F16C's conversion does: the
 * float16 op loops widen with it, so fmin / fmax treat every NaN as C's quiet NaN on
 * every build (C's fminf returns NaN for a signalling one; NumPy returns the number).
 * The casts keep em_h2f, which is NumPy's widening bit for bit. */
static inline float em_h2f_quiet(uint16_t h) {
    uint32_t nan = (uint32_t)((h & 0x7fffu) > 0x7c00u);
    return em_i2f((int32_t)((uint32_t)em_f2i(em_h2f(h)) | (nan << 22)));
}

/* ---- blocks of float16 <-> float32 (contiguous), for the float16 loops: they widen a
 * block of each input into float32 buffers, compute there, and narrow the block back.
 * Where the build has F16C (the AVX2 loop modules) the conversions are its
 * instructions, 8 per instruction; elsewhere the branch-free helpers above.  Both give
 * the same bits: exact widening (a signalling NaN made quiet), narrowing rounded to
 * nearest even, and every NaN narrowed to em_f2h's quiet NaN (sign kept). */
#define EM_HALF_BLOCK 256
#if defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
static inline void em_h2f_block(const uint16_t *src, float *dst, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = em_h2f_quiet(src[i]);
}

static inline void em_f2h_block(const float *src, uint16_t *dst, ptrdiff_t n) {
    const __m128i mag_mask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    const __m128i sign_mask = _mm_set1_epi16((short)0x8000), qnan = _mm_set1_epi16(0x7e00);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        /* F16C keeps a NaN's payload; em_f2h (and so the SSE2 build) does not */
        __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, mag_mask), inf);
        h = _mm_blendv_epi8(h, _mm_or_si128(_mm_and_si128(h, sign_mask), qnan), nan);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    for (; i < n; i++)
        dst[i] = em_f2h(src[i]);
}
#else
static inline void em_h2f_block(const uint16_t *src, float *dst, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = em_h2f_quiet(src[i]);
}

static inline void em_f2h_block(const float *src, uint16_t *dst, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = em_f2h(src[i]);
}
#endif

/* a where c else b, for floats */
static inline float em_fsel(int c, float a, float b) {
    return em_i2f((int32_t)em_sel_u32(c, (uint32_t)em_f2i(a), (uint32_t)em_f2i(b)));
}

/* bfloat16 is the top half of a float32 */
static inline float em_b2f(uint16_t h) { return em_i2f((int32_t)((uint32_t)h << 16)); }

static inline uint16_t em_f2b(float f) {
    uint32_t bits = (uint32_t)em_f2i(f);
    uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    return (uint16_t)em_sel_u32((bits & 0x7fffffffu) > 0x7f800000u, (bits >> 16) | 0x40u,
                                rounded);
}

/* ---- blocks of bfloat16 <-> float32 (contiguous), for the bfloat16 loops and kernels
 * (elementwise ops, the 16-bit GEMM's operands, optimizer updates): the same bits as
 * em_b2f / em_f2b element by element, written as plain loops the compiler vectorises
 * (a widening is a shift; the narrowing an add and a select) */
static inline void em_b2f_block(const uint16_t *src, float *dst, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = em_b2f(src[i]);
}

static inline void em_f2b_block(const float *src, uint16_t *dst, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = em_f2b(src[i]);
}

/* ---- em_widen16 / em_narrow16: a contiguous run of float16 (bf16 = 0) or bfloat16
 * (bf16 = 1) widened to float32, or float32 narrowed, with em_h2f / em_f2h / em_b2f /
 * em_f2b element by element (ember's cast loops' bits), for the kernels built for the
 * baseline CPU (GEMM operands, optimizer updates): where the CPU has AVX2 the same
 * loops run compiled for it (8 lanes instead of SSE2's 4; integer code, so the same
 * bits). */
#define EM_CONVERT16_BODY(widen) \
    if (widen) { \
        if (bf16) { for (ptrdiff_t i = 0; i < n; i++) ((float *)dst)[i] = em_b2f(((const uint16_t *)src)[i]); } \
        else { for (ptrdiff_t i = 0; i < n; i++) ((float *)dst)[i] = em_h2f(((const uint16_t *)src)[i]); } \
    } else { \
        if (bf16) { for (ptrdiff_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = em_f2b(((const float *)src)[i]); } \
        else { for (ptrdiff_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = em_f2h(((const float *)src)[i]); } \
    }

__attribute__((unused)) static void em_convert16_base(int widen, int bf16, const void *src, void *dst, ptrdiff_t n) {
    EM_CONVERT16_BODY(widen)
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
__attribute__((target("avx2"), unused))
static void em_convert16_avx2(int widen, int bf16, const void *src, void *dst, ptrdiff_t n) {
    EM_CONVERT16_BODY(widen)
}
static inline void em_convert16(int widen, int bf16, const void *src, void *dst, ptrdiff_t n) {
    static int has_avx2 = -1;
    if (has_avx2 < 0)
        has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (has_avx2)
        em_convert16_avx2(widen, bf16, src, dst, n);
    else
        em_convert16_base(widen, bf16, src, dst, n);
}
#else
static inline void em_convert16(int widen, int bf16, const void *src, void *dst, ptrdiff_t n) {
    em_convert16_base(widen, bf16, src, dst, n);
}
#endif

static inline void em_widen16(int bf16, const uint16_t *src, float *dst, ptrdiff_t n) {
    em_convert16(1, bf16, src, dst, n);
}

static inline void em_narrow16(int bf16, const float *src, uint16_t *dst, ptrdiff_t n) {
    em_convert16(0, bf16, src, dst, n);
}

static inline float em_copysign_bits(float mag, float sgn) {
    return em_i2f((em_f2i(mag) & 0x7fffffff) | (int32_t)((uint32_t)em_f2i(sgn) & 0x80000000u));
}

static inline float em_expf(float x) {
    float xc = em_fsel(x < -104.0f, -104.0f, x);      /* beyond: 0 and inf anyway */
    xc = em_fsel(xc > 89.0f, 89.0f, xc);
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  /* round(x/ln2) */
    float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;              /* Cody-Waite */
    float r2 = r * r;
    float p = 1.9875691500e-4f * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    int32_t k = (int32_t)n, k1 = k >> 1;
    p = (p * em_i2f((k1 + 127) << 23)) * em_i2f((k - k1 + 127) << 23);
    return em_fsel(x != x, x, p);
}

static inline float em_expm1f(float x) {
    /* |x| < 1/2: Taylor to x**9 (remainder below float32 rounding); else exp(x) - 1 */
    float p = (1.0f / 362880.0f) * x + (1.0f / 40320.0f);
    p = p * x + (1.0f / 5040.0f);
    p = p * x + (1.0f / 720.0f);
    p = p * x + (1.0f / 120.0f);
    p = p * x + (1.0f / 24.0f);
    p = p * x + (1.0f / 6.0f);
    p = p * x + 0.5f;
    p = x + x * x * p;
    float r = em_fsel((x < 0.5f) & (x > -0.5f), p, em_expf(x) - 1.0f);
    return em_fsel(x == 0.0f, x, r);                  /* keeps -0.0 */
}

static inline float em_logf(float x) {
    /* x = m 2**e, m in [sqrt(1/2), sqrt(2)); subnormals are scaled by 2**23 first */
    int sub = x < 1.17549435e-38f;
    float xs = em_fsel(sub, x * 8388608.0f, x);
    int32_t ix = em_f2i(xs);
    int32_t e = ((ix >> 23) & 0xff) - 126 - (sub ? 23 : 0);
    float m = em_i2f((ix & 0x007fffff) | 0x3f000000);   /* [0.5, 1) */
    int low = m < 0.707106781186547524f;
    e -= low;
    float t = em_fsel(low, m + m - 1.0f, m - 1.0f);
    float z = t * t;
    float y = 7.0376836292e-2f * t - 1.1514610310e-1f;
    y = y * t + 1.1676998740e-1f;
    y = y * t - 1.2420140846e-1f;
    y = y * t + 1.4249322787e-1f;
    y = y * t - 1.6668057665e-1f;
    y = y * t + 2.0000714765e-1f;
    y = y * t - 2.4999993993e-1f;
    y = y * t + 3.3333331174e-1f;
    float fe = (float)e;
    y = y * t * z + fe * -2.12194440e-4f - 0.5f * z;
    float r = (t + y) + fe * 0.693359375f;
    r = em_fsel(x == INFINITY, x, r);
    r = em_fsel(x == 0.0f, -INFINITY, r);
    return em_fsel(x < 0.0f, NAN, em_fsel(x != x, x, r));
}

static inline float em_log1pf(float x) {
    /* Kahan: u = 1 + x rounds; log(u) * x / (u - 1) undoes that rounding */
    float u = 1.0f + x;
    float r = em_logf(u) * (x / (u - 1.0f));
    r = em_fsel(u == 1.0f, x, r);
    return em_fsel(x == INFINITY, x, r);
}

static inline float em_tanhf(float x) {
    /* an odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above */
    float z = em_copysign_bits(x, 1.0f);
    float s = x * x;
    float p = -5.70498872745e-3f * s + 2.06390887954e-2f;
    p = p * s - 5.37397155531e-2f;
    p = p * s + 1.33314422036e-1f;
    p = p * s - 3.33332819422e-1f;
    p = p * s * x + x;
    p = em_fsel(x == 0.0f, x, p);                     /* keeps -0.0 */
    float big = 1.0f - 2.0f / (em_expf(z + z) + 1.0f);
    return em_fsel(z < 0.625f, p, em_copysign_bits(big, x));
}

/* sin and cos for |x| <= EM_TRIG_MAX = 256 (Cephes sinf/cosf: x reduced by pi/4 in three
 * parts, then the sine or cosine polynomial of the octant; about 1 ulp).  Larger
 * arguments, infinities and NaN are the caller's: the elementwise loops recompute
 * those few elements with libm in a second pass. */
#define EM_TRIG_MAX 256.0f

static inline float em_trig_core(float ax, int32_t* octant) {
    int32_t j = (int32_t)(ax * 1.27323954473516f);           /* x / (pi/4) */
    j += j & 1;                                               /* to the even octant */
    float y = (float)j;
    *octant = j & 7;
    return ((ax - y * 0.78515625f) - y * 2.4187564849853515625e-4f)
           - y * 3.77489497744594108e-8f;
}

static inline float em_sin_poly(float r, float z) {
    return ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
}

static inline float em_cos_poly(float z) {
    return ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z
            + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
}

static inline float em_flip(float v, int neg) {
    return em_i2f(em_f2i(v) ^ (int32_t)((uint32_t)neg << 31));
}

static inline float em_sinf_small(float x) {
    int32_t q;
    float r = em_trig_core(em_copysign_bits(x, 1.0f), &q);
    float z = r * r;
    float v = em_fsel((q & 2) != 0, em_cos_poly(z), em_sin_poly(r, z));
    return em_flip(v, ((q & 4) != 0) ^ (em_f2i(x) < 0));     /* odd: x's sign bit */
}

static inline float em_cosf_small(float x) {
    int32_t q;
    float r = em_trig_core(em_copysign_bits(x, 1.0f), &q);
    float z = r * r;
    float v = em_fsel((q & 2) != 0, em_sin_poly(r, z), em_cos_poly(z));
    return em_flip(v, ((q + 2) & 4) != 0);
}

#endif
