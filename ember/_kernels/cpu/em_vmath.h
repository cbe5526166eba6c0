/* Contiguous float32 exp, log and tanh for the generated elementwise loops (ember.exp,
 * ember.log, ember.tanh) and F.tanh, built three times and picked at run time by CPU:
 * AVX-512 with fused multiply-adds (x86-64-v4, 512-bit vectors), AVX2 + FMA (x86-64-v3)
 * and the baseline (SSE2 on x86-64, no FMA).  EMBER_MATH_ISA=baseline|avx2|avx512 caps
 * the choice (tests run every variant the CPU has); em_vmath_isa() says which runs.
 *
 * The variants differ by at most an ulp here and there (fused multiply-adds round
 * once), and each is within the bounds tests/core/test_float32_math.py and
 * test_float32_sweeps.py check against float64: exp and log 1 ulp (1.002 seen for exp
 * with FMA on inputs outside the tests' samples), tanh 1.5.  Special
 * values (NaN, infinities, signed zeros, subnormal inputs and results) are NumPy's on
 * every variant.
 *
 * Work goes in blocks of EM_VBLOCK elements.  exp and log first scan a block for
 * inputs outside their common range (exp: |x| > 87 or NaN; log: anything but a
 * positive normal finite float); a block without any runs a shorter formula (exp: one
 * scaling by 2**n, no clamps; log: no subnormal scaling, no special-value selects), a
 * block with some the full one.  Both scans and formulas are branch-free, so GCC
 * vectorises them.  A strided operand goes through a buffer of one block.
 *
 * The polynomials are em_math.h's (Cephes expf, logf, tanhf); tanh is 1 - 2e / (1 + e)
 * with e = exp(-2|x|) above 0.625 in magnitude (one exp, no overflow), the odd
 * polynomial below, and x's sign put back last (so -0.0 and NaN come through). */
#ifndef EMBER_EM_VMATH_H
#define EMBER_EM_VMATH_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
/* no-trapping-math: GCC may compute both sides of a select (to vectorise it);
   fp-contract=fast: the AVX2 / AVX-512 variants fuse multiply-adds */
#pragma GCC optimize ("no-trapping-math", "fp-contract=fast")
#define EMV_POP_OPTIONS 1
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 12
#define EMV_X86 1
#define EMV_V4 __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#define EMV_V3 __attribute__((target("arch=x86-64-v3")))
#endif

#define EMV_INLINE static inline __attribute__((always_inline))
#define EM_VBLOCK 256

EMV_INLINE float emv_i2f(uint32_t i) { float f; memcpy(&f, &i, 4); return f; }
EMV_INLINE uint32_t emv_f2i(float f) { uint32_t i; memcpy(&i, &f, 4); return i; }
EMV_INLINE float emv_abs(float x) { return emv_i2f(emv_f2i(x) & 0x7fffffffu); }

/* exp(r) for |r| <= ln(2) / 2, Cephes' polynomial */
EMV_INLINE float emv_exp_poly(float r) {
    float r2 = r * r;
    float p = 1.9875691500e-4f * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return (p * r2 + r) + 1.0f;
}

/* t = x / ln 2 + 1.5 * 2**23: its low bits are n = round(x / ln 2); returns r = x - n ln 2
 * (Cody-Waite, ln 2 in two parts) */
EMV_INLINE float emv_exp_reduce(float x, float *t) {
    float tt = x * 1.44269504088896341f + 12582912.0f;
    float n = tt - 12582912.0f;
    *t = tt;
    return (x - n * 0.693359375f) - n * -2.12194440e-4f;
}

/* exp(x) for |x| <= 87 (normal results: one scaling by 2**n, n in [-126, 126]); a NaN
 * gives a NaN */
EMV_INLINE float emv_exp_fast(float x) {
    float t;
    float p = emv_exp_poly(emv_exp_reduce(x, &t));
    return p * emv_i2f((emv_f2i(t) << 23) + 0x3f800000u);
}

EMV_INLINE int emv_exp_fast_ok(float x) { return emv_abs(x) <= 87.0f; }   /* NaN: 0 */

/* exp(x) everywhere: clamped to [-104, 89] (0 and inf beyond), 2**n applied as two
 * powers of two so a subnormal result is rounded once */
EMV_INLINE float emv_exp_full(float x) {
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    float t;
    float p = emv_exp_poly(emv_exp_reduce(xc, &t));
    int32_t k = (int32_t)(emv_f2i(t) - 0x4b400000u);
    int32_t k1 = k >> 1;
    p = (p * emv_i2f((uint32_t)(k1 + 127) << 23)) * emv_i2f((uint32_t)(k - k1 + 127) << 23);
    return x != x ? x : p;
}

/* log of a positive normal float given by its bits, plus eadj to its exponent:
 * x = m 2**e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f**2 / 2 + f**3 P(f), f = m - 1 */
EMV_INLINE float emv_log_core(uint32_t ix, float eadj) {
    int32_t t = (int32_t)(ix - 0x3f3504f3u);          /* bits of sqrt(1/2) as a float32 */
    int32_t e = t >> 23;
    float f = emv_i2f(ix - ((uint32_t)e << 23)) - 1.0f;
    float fe = (float)e + eadj;
    float z = f * f;
    float y = 7.0376836292e-2f * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z + fe * -2.12194440e-4f - 0.5f * z;
    return (f + y) + fe * 0.693359375f;
}

EMV_INLINE int emv_log_fast_ok(float x) {            /* positive, normal, finite */
    return emv_f2i(x) - 0x00800000u < 0x7f000000u;
}

EMV_INLINE float emv_log_fast(float x) { return emv_log_core(emv_f2i(x), 0.0f); }

EMV_INLINE float emv_log_full(float x) {
    int sub = x < 1.17549435e-38f;                  /* subnormals scaled by 2**23 */
    float xs = sub ? x * 8388608.0f : x;
    float r = emv_log_core(emv_f2i(xs), sub ? -23.0f : 0.0f);
    r = x == INFINITY ? x : r;
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    return x != x ? x : r;
}

EMV_INLINE float emv_tanh(float x) {
    float a = emv_abs(x);
    float ac = 10.0f < a ? 10.0f : a;               /* tanh(10) is 1.0f; NaN stays */
    float e = emv_exp_fast(-2.0f * ac);
    float big = 1.0f - (e + e) / (1.0f + e);
    float s = a * a;
    float p = -5.70498872745e-3f * s + 2.06390887954e-2f;
    p = p * s - 5.37397155531e-2f;
    p = p * s + 1.33314422036e-1f;
    p = p * s - 3.33332819422e-1f;
    float small = (p * s) * a + a;
    float r = a < 0.625f ? small : big;
    return emv_i2f(emv_f2i(r) | (emv_f2i(x) & 0x80000000u));   /* r >= 0: x's sign */
}

EMV_INLINE int emv_true(float x) { (void)x; return 1; }

/* one block (m <= EM_VBLOCK elements, x and out not overlapping): the fast formula if
 * every element is in its range, else the full one */
#define EMV_BLOCK(name, attr, ok, fast, full) \
    attr static void name(const float *restrict x, float *restrict out, ptrdiff_t m) { \
        int bad = 0; \
        for (ptrdiff_t i = 0; i < m; i++) bad |= !ok(x[i]); \
        if (!bad) { for (ptrdiff_t i = 0; i < m; i++) out[i] = fast(x[i]); } \
        else { for (ptrdiff_t i = 0; i < m; i++) out[i] = full(x[i]); } }

#ifdef EMV_X86
#define EMV_VARIANTS(op, ok, fast, full) \
    EMV_BLOCK(emv_##op##_v4, EMV_V4, ok, fast, full) \
    EMV_BLOCK(emv_##op##_v3, EMV_V3, ok, fast, full) \
    EMV_BLOCK(emv_##op##_base, , ok, fast, full)
#else
#define EMV_VARIANTS(op, ok, fast, full) EMV_BLOCK(emv_##op##_base, , ok, fast, full)
#endif

EMV_VARIANTS(exp, emv_exp_fast_ok, emv_exp_fast, emv_exp_full)
EMV_VARIANTS(log, emv_log_fast_ok, emv_log_fast, emv_log_full)
EMV_VARIANTS(tanh, emv_true, emv_tanh, emv_tanh)

/* 2: AVX-512 (x86-64-v4), 1: AVX2 + FMA (x86-64-v3), 0: baseline; EMBER_MATH_ISA caps it */
static int emv_isa_cached = -1;

__attribute__((unused)) static int em_vmath_isa(void) {
    int isa = emv_isa_cached;
    if (isa >= 0)
        return isa;
    isa = 0;
#ifdef EMV_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        isa = 2;
    else if (__builtin_cpu_supports("x86-64-v3"))
        isa = 1;
#endif
    const char *cap = getenv("EMBER_MATH_ISA");
    if (cap != NULL) {
        if (strcmp(cap, "baseline") == 0)
            isa = 0;
        else if (strcmp(cap, "avx2") == 0 && isa > 1)
            isa = 1;
    }
    emv_isa_cached = isa;
    return isa;
}

typedef void (*emv_block_fn)(const float *restrict, float *restrict, ptrdiff_t);

/* out[i * so] = f(x[i * s0]), i < n, strides in bytes; x and out may be the same
 * memory (in place) or overlap */
static inline void emv_run(emv_block_fn f, const char *x, ptrdiff_t s0, char *out,
                           ptrdiff_t so, ptrdiff_t n) {
    float bx[EM_VBLOCK], bo[EM_VBLOCK];
    for (ptrdiff_t i = 0; i < n; i += EM_VBLOCK) {
        ptrdiff_t m = n - i < EM_VBLOCK ? n - i : EM_VBLOCK;
        const float *src;
        float *dst;
        if (s0 == 4) {
            src = (const float *)(x + i * 4);
        } else {
            for (ptrdiff_t j = 0; j < m; j++)
                memcpy(&bx[j], x + (i + j) * s0, 4);
            src = bx;
        }
        int out_contig = so == 4;
        char *o = out + i * so;
        /* write straight into out unless it overlaps the block read */
        if (out_contig && (src == bx || (const char *)src >= o + m * 4
                           || (const char *)src + m * 4 <= o))
            dst = (float *)o;
        else
            dst = bo;
        f(src, dst, m);
        if (dst == bo) {
            for (ptrdiff_t j = 0; j < m; j++)
                memcpy(o + j * so, &bo[j], 4);
        }
    }
}

#ifdef EMV_X86
#define EMV_PICK(op) (em_vmath_isa() == 2 ? emv_##op##_v4 \
                      : em_vmath_isa() == 1 ? emv_##op##_v3 : emv_##op##_base)
#else
#define EMV_PICK(op) emv_##op##_base
#endif

__attribute__((unused)) static void em_vexp_f32(const char *x, ptrdiff_t s0, char *out,
                                                ptrdiff_t so, ptrdiff_t n) {
    emv_run(EMV_PICK(exp), x, s0, out, so, n);
}

__attribute__((unused)) static void em_vlog_f32(const char *x, ptrdiff_t s0, char *out,
                                                ptrdiff_t so, ptrdiff_t n) {
    emv_run(EMV_PICK(log), x, s0, out, so, n);
}

__attribute__((unused)) static void em_vtanh_f32(const char *x, ptrdiff_t s0, char *out,
                                                 ptrdiff_t so, ptrdiff_t n) {
    emv_run(EMV_PICK(tanh), x, s0, out, so, n);
}

#ifdef EMV_POP_OPTIONS
#pragma GCC pop_options
#endif
#endif
