/* Fused optimizer updates (SGD, Adam/AdamW, RMSprop, Adagrad) over one
 * contiguous run of elements: one pass per element does the whole update.
 *
 * Rounding follows PyTorch's CPU kernels step by step (torch runs the
 * single-tensor path on CPU, one ATen op after another, each rounding to the
 * parameter dtype):
 *   - `a.add(b, alpha=s)` and `lerp` are fused multiply-adds in torch's
 *     vectorised kernels (vec::fmadd), so they are fma() here;
 *   - `addcmul` is `self + (s * t1) * t2`, which torch's compiler contracts to
 *     fma(s * t1, t2, self); `addcdiv` is `self + (s * t1) / t2`; the rest
 *     rounds op by op, so contraction is switched off for this file.
 *   - torch's float sqrt is MKL's vsSqrt/vdSqrt (within 1 ulp, not always
 *     correctly rounded); ours is the correctly rounded one, so results
 *     through a square root may differ from torch's in the last bit.
 * On x86-64 the loops are compiled twice: with AVX2+FMA (chosen at run time
 * when the CPU has them, as torch's AVX2/AVX-512 kernels are) and plainly
 * (then torch's DEFAULT kernels also round a*b+c twice, and so do we). */
#ifndef EMBER_OPTIM_SIMD_H
#define EMBER_OPTIM_SIMD_H

#include <math.h>
#include <stddef.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EMB_INLINE static inline __attribute__((always_inline))
#else
#define EMB_INLINE static inline
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMB_OPT_X86 1
#define EMB_TARGET_FMA __attribute__((target("avx2,fma")))
#define EMB_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,prefer-vector-width=512")))
#endif

/* fused multiply-add when use_fma (a constant after inlining), else a*b+c
 * rounded twice */
#define EMB_MADD(use_fma, FMAFN, a, b, c) ((use_fma) ? FMAFN((a), (b), (c)) : (a) * (b) + (c))

/* torch's lerp: weight w < 0.5 in magnitude -> start + w*(end-start),
 * else end + (w-1)*(end-start), both as one fmadd */
#define EMB_LERP(use_fma, FMAFN, start, end, w, wm1, small) \
    EMB_MADD(use_fma, FMAFN, (small) ? (w) : (wm1), (end) - (start), (small) ? (start) : (end))

/* ------------------------------------------------------------------ SGD */
/* mode: 0 no momentum, 1 momentum with an existing buffer, 2 first step
 * (buffer <- grad).  Scalars arrive already rounded to T. */
#define EMB_DEFINE_SGD_BODY(NAME, T, FMAFN)                                              \
EMB_INLINE void NAME(T* restrict p, const T* restrict g, T* restrict buf, ptrdiff_t n,  \
                     T sign, T wd, T mom, T omd, T nlr,                                 \
                     const int use_fma, const int has_wd, const int mode,               \
                     const int nesterov) {                                              \
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T pi = p[i];                                                                    \
        T gi = g[i] * sign;                                                             \
        if (has_wd) gi = EMB_MADD(use_fma, FMAFN, pi, wd, gi);                          \
        T u = gi;                                                                       \
        if (mode != 0) {                                                                \
            T b = (mode == 2) ? gi : EMB_MADD(use_fma, FMAFN, gi, omd, buf[i] * mom);   \
            buf[i] = b;                                                                 \
            u = nesterov ? EMB_MADD(use_fma, FMAFN, b, mom, gi) : b;                    \
        }                                                                               \
        p[i] = EMB_MADD(use_fma, FMAFN, u, nlr, pi);                                    \
    }                                                                                   \
}

#define EMB_DEFINE_SGD(NAME, BODY, T, ATTR, USE_FMA)                                     \
ATTR static void NAME(T* p, const T* g, T* buf, ptrdiff_t n, T sign, T wd, T mom,       \
                      T omd, T nlr, int has_wd, int mode, int nesterov) {               \
    if (mode == 0) {                                                                    \
        if (has_wd) BODY(p, g, buf, n, sign, wd, mom, omd, nlr, USE_FMA, 1, 0, 0);      \
        else BODY(p, g, buf, n, sign, wd, mom, omd, nlr, USE_FMA, 0, 0, 0);             \
    } else if (mode == 1) {                                                             \
        if (nesterov) {                                                                 \
            if (has_wd) BODY(p, g, buf, n, sign, wd, mom, omd, nlr, USE_FMA, 1, 1, 1);  \
            else BODY(p, g, buf, n, sign, wd, mom, omd, nlr, USE_FMA, 0, 1, 1);         \
        } else {                                                                        \
            if (has_wd) BODY(p, g, buf, n, sign, wd, mom, omd, nlr, USE_FMA, 1, 1, 0);  \
            else BODY(p, g, buf, n, sign, wd, mom, omd, nlr, USE_FMA, 0, 1, 0);         \
        }                                                                               \
    } else {                                                                            \
        BODY(p, g, buf, n, sign, wd, mom, omd, nlr, USE_FMA, has_wd, 2, nesterov);      \
    }                                                                                   \
}

/* ----------------------------------------------------------------- Adam */
/* decay: 1 - lr*wd for decoupled (AdamW) weight decay, else 1 (exact);
 * wd: the coupled (L2) weight decay when has_wd; w/wm1/small: lerp weight
 * 1-beta1; b2, omb2: beta2 and 1-beta2; bc2s: sqrt(1-beta2^t);
 * nss: -lr/(1-beta1^t). */
#define EMB_DEFINE_ADAM_BODY(NAME, T, FMAFN, SQRTFN)                                     \
EMB_INLINE void NAME(T* restrict p, const T* restrict g, T* restrict m,                 \
                     T* restrict v, T* restrict vmax, ptrdiff_t n,                      \
                     T sign, T wd, T decay, T w, T wm1, int small, T b2, T omb2,        \
                     T bc2s, T eps, T nss,                                              \
                     const int use_fma, const int has_wd, const int amsgrad) {          \
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T pi = p[i];                                                                    \
        T gi = g[i] * sign;                                                             \
        if (has_wd) gi = EMB_MADD(use_fma, FMAFN, pi, wd, gi);                          \
        pi = pi * decay;                                                                \
        T mi = m[i];                                                                    \
        mi = EMB_LERP(use_fma, FMAFN, mi, gi, w, wm1, small);                           \
        m[i] = mi;                                                                      \
        T vi = v[i] * b2;                                                               \
        vi = EMB_MADD(use_fma, FMAFN, omb2 * gi, gi, vi);                               \
        v[i] = vi;                                                                      \
        if (amsgrad) {                                                                  \
            T mx = vmax[i];                                                             \
            mx = (vi > mx || vi != vi) ? vi : mx;                                       \
            vmax[i] = mx;                                                               \
            vi = mx;                                                                    \
        }                                                                               \
        T den = SQRTFN(vi) / bc2s + eps;                                                \
        p[i] = pi + (nss * mi) / den;                                                   \
    }                                                                                   \
}

#define EMB_DEFINE_ADAM(NAME, BODY, T, ATTR, USE_FMA)                                    \
ATTR static void NAME(T* p, const T* g, T* m, T* v, T* vmax, ptrdiff_t n, T sign, T wd, \
                      T decay, T w, T wm1, int small, T b2, T omb2, T bc2s, T eps,      \
                      T nss, int has_wd, int amsgrad) {                                 \
    if (amsgrad) {                                                                      \
        if (has_wd) BODY(p, g, m, v, vmax, n, sign, wd, decay, w, wm1, small, b2, omb2, \
                         bc2s, eps, nss, USE_FMA, 1, 1);                                \
        else BODY(p, g, m, v, vmax, n, sign, wd, decay, w, wm1, small, b2, omb2,        \
                  bc2s, eps, nss, USE_FMA, 0, 1);                                       \
    } else {                                                                            \
        if (has_wd) BODY(p, g, m, v, vmax, n, sign, wd, decay, w, wm1, small, b2, omb2, \
                         bc2s, eps, nss, USE_FMA, 1, 0);                                \
        else BODY(p, g, m, v, vmax, n, sign, wd, decay, w, wm1, small, b2, omb2,        \
                  bc2s, eps, nss, USE_FMA, 0, 0);                                       \
    }                                                                                   \
}

/* -------------------------------------------------------------- RMSprop */
/* a, oma: alpha and 1-alpha; lerp weight (centered) is 1-alpha. */
#define EMB_DEFINE_RMSPROP_BODY(NAME, T, FMAFN, SQRTFN)                                  \
EMB_INLINE void NAME(T* restrict p, const T* restrict g, T* restrict sq,                \
                     T* restrict ga, T* restrict buf, ptrdiff_t n,                      \
                     T sign, T wd, T a, T oma, T w, T wm1, int small, T eps, T mom,     \
                     T nlr, const int use_fma, const int has_wd, const int centered,    \
                     const int has_mom) {                                               \
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T pi = p[i];                                                                    \
        T gi = g[i] * sign;                                                             \
        if (has_wd) gi = EMB_MADD(use_fma, FMAFN, pi, wd, gi);                          \
        T si = sq[i] * a;                                                               \
        si = EMB_MADD(use_fma, FMAFN, oma * gi, gi, si);                                \
        sq[i] = si;                                                                     \
        T avg;                                                                          \
        if (centered) {                                                                 \
            T gai = ga[i];                                                              \
            gai = EMB_LERP(use_fma, FMAFN, gai, gi, w, wm1, small);                     \
            ga[i] = gai;                                                                \
            avg = SQRTFN(EMB_MADD(use_fma, FMAFN, -gai, gai, si));                      \
        } else {                                                                        \
            avg = SQRTFN(si);                                                           \
        }                                                                               \
        avg = avg + eps;                                                                \
        if (has_mom) {                                                                  \
            T b = buf[i] * mom;                                                         \
            b = b + gi / avg;                                                           \
            buf[i] = b;                                                                 \
            p[i] = EMB_MADD(use_fma, FMAFN, b, nlr, pi);                                \
        } else {                                                                        \
            p[i] = pi + (nlr * gi) / avg;                                               \
        }                                                                               \
    }                                                                                   \
}

#define EMB_RMS_CALL(BODY, USE_FMA, W, C, M)                                             \
    BODY(p, g, sq, ga, buf, n, sign, wd, a, oma, w, wm1, small, eps, mom, nlr, USE_FMA, W, C, M)

#define EMB_DEFINE_RMSPROP(NAME, BODY, T, ATTR, USE_FMA)                                 \
ATTR static void NAME(T* p, const T* g, T* sq, T* ga, T* buf, ptrdiff_t n, T sign,      \
                      T wd, T a, T oma, T w, T wm1, int small, T eps, T mom, T nlr,     \
                      int has_wd, int centered, int has_mom) {                          \
    int k = (has_wd ? 4 : 0) | (centered ? 2 : 0) | (has_mom ? 1 : 0);                  \
    switch (k) {                                                                        \
    case 0: EMB_RMS_CALL(BODY, USE_FMA, 0, 0, 0); break;                                \
    case 1: EMB_RMS_CALL(BODY, USE_FMA, 0, 0, 1); break;                                \
    case 2: EMB_RMS_CALL(BODY, USE_FMA, 0, 1, 0); break;                                \
    case 3: EMB_RMS_CALL(BODY, USE_FMA, 0, 1, 1); break;                                \
    case 4: EMB_RMS_CALL(BODY, USE_FMA, 1, 0, 0); break;                                \
    case 5: EMB_RMS_CALL(BODY, USE_FMA, 1, 0, 1); break;                                \
    case 6: EMB_RMS_CALL(BODY, USE_FMA, 1, 1, 0); break;                                \
    default: EMB_RMS_CALL(BODY, USE_FMA, 1, 1, 1); break;                               \
    }                                                                                   \
}

/* -------------------------------------------------------------- Adagrad */
/* nclr: -lr / (1 + (step-1)*lr_decay) */
#define EMB_DEFINE_ADAGRAD_BODY(NAME, T, FMAFN, SQRTFN)                                  \
EMB_INLINE void NAME(T* restrict p, const T* restrict g, T* restrict s, ptrdiff_t n,    \
                     T sign, T wd, T eps, T nclr, const int use_fma, const int has_wd) {\
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T pi = p[i];                                                                    \
        T gi = g[i] * sign;                                                             \
        if (has_wd) gi = EMB_MADD(use_fma, FMAFN, pi, wd, gi);                          \
        T si = EMB_MADD(use_fma, FMAFN, gi, gi, s[i]);                                  \
        s[i] = si;                                                                      \
        T std = SQRTFN(si) + eps;                                                       \
        p[i] = pi + (nclr * gi) / std;                                                  \
    }                                                                                   \
}

#define EMB_DEFINE_ADAGRAD(NAME, BODY, T, ATTR, USE_FMA)                                 \
ATTR static void NAME(T* p, const T* g, T* s, ptrdiff_t n, T sign, T wd, T eps, T nclr, \
                      int has_wd) {                                                     \
    if (has_wd) BODY(p, g, s, n, sign, wd, eps, nclr, USE_FMA, 1);                      \
    else BODY(p, g, s, n, sign, wd, eps, nclr, USE_FMA, 0);                             \
}

EMB_DEFINE_SGD_BODY(emb_sgd_body_f32, float, fmaf)
EMB_DEFINE_SGD_BODY(emb_sgd_body_f64, double, fma)
EMB_DEFINE_ADAM_BODY(emb_adam_body_f32, float, fmaf, sqrtf)
EMB_DEFINE_ADAM_BODY(emb_adam_body_f64, double, fma, sqrt)
EMB_DEFINE_RMSPROP_BODY(emb_rmsprop_body_f32, float, fmaf, sqrtf)
EMB_DEFINE_RMSPROP_BODY(emb_rmsprop_body_f64, double, fma, sqrt)
EMB_DEFINE_ADAGRAD_BODY(emb_adagrad_body_f32, float, fmaf, sqrtf)
EMB_DEFINE_ADAGRAD_BODY(emb_adagrad_body_f64, double, fma, sqrt)

/* the portable variants: fused multiply-adds everywhere but on x86-64
 * without FMA (matching torch's DEFAULT kernels there) */
#if defined(EMB_OPT_X86)
#define EMB_PORTABLE_FMA 0
#else
#define EMB_PORTABLE_FMA 1
#endif

EMB_DEFINE_SGD(emb_sgd_f32_base, emb_sgd_body_f32, float, , EMB_PORTABLE_FMA)
EMB_DEFINE_SGD(emb_sgd_f64_base, emb_sgd_body_f64, double, , EMB_PORTABLE_FMA)
EMB_DEFINE_ADAM(emb_adam_f32_base, emb_adam_body_f32, float, , EMB_PORTABLE_FMA)
EMB_DEFINE_ADAM(emb_adam_f64_base, emb_adam_body_f64, double, , EMB_PORTABLE_FMA)
EMB_DEFINE_RMSPROP(emb_rmsprop_f32_base, emb_rmsprop_body_f32, float, , EMB_PORTABLE_FMA)
EMB_DEFINE_RMSPROP(emb_rmsprop_f64_base, emb_rmsprop_body_f64, double, , EMB_PORTABLE_FMA)
EMB_DEFINE_ADAGRAD(emb_adagrad_f32_base, emb_adagrad_body_f32, float, , EMB_PORTABLE_FMA)
EMB_DEFINE_ADAGRAD(emb_adagrad_f64_base, emb_adagrad_body_f64, double, , EMB_PORTABLE_FMA)

#if defined(EMB_OPT_X86)
EMB_DEFINE_SGD(emb_sgd_f32_fma, emb_sgd_body_f32, float, EMB_TARGET_FMA, 1)
EMB_DEFINE_SGD(emb_sgd_f64_fma, emb_sgd_body_f64, double, EMB_TARGET_FMA, 1)
EMB_DEFINE_ADAM(emb_adam_f32_fma, emb_adam_body_f32, float, EMB_TARGET_FMA, 1)
EMB_DEFINE_ADAM(emb_adam_f64_fma, emb_adam_body_f64, double, EMB_TARGET_FMA, 1)
EMB_DEFINE_RMSPROP(emb_rmsprop_f32_fma, emb_rmsprop_body_f32, float, EMB_TARGET_FMA, 1)
EMB_DEFINE_RMSPROP(emb_rmsprop_f64_fma, emb_rmsprop_body_f64, double, EMB_TARGET_FMA, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f32_fma, emb_adagrad_body_f32, float, EMB_TARGET_FMA, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f64_fma, emb_adagrad_body_f64, double, EMB_TARGET_FMA, 1)
EMB_DEFINE_SGD(emb_sgd_f32_512, emb_sgd_body_f32, float, EMB_TARGET_AVX512, 1)
EMB_DEFINE_SGD(emb_sgd_f64_512, emb_sgd_body_f64, double, EMB_TARGET_AVX512, 1)
EMB_DEFINE_ADAM(emb_adam_f32_512, emb_adam_body_f32, float, EMB_TARGET_AVX512, 1)
EMB_DEFINE_ADAM(emb_adam_f64_512, emb_adam_body_f64, double, EMB_TARGET_AVX512, 1)
EMB_DEFINE_RMSPROP(emb_rmsprop_f32_512, emb_rmsprop_body_f32, float, EMB_TARGET_AVX512, 1)
EMB_DEFINE_RMSPROP(emb_rmsprop_f64_512, emb_rmsprop_body_f64, double, EMB_TARGET_AVX512, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f32_512, emb_adagrad_body_f32, float, EMB_TARGET_AVX512, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f64_512, emb_adagrad_body_f64, double, EMB_TARGET_AVX512, 1)
#endif

/* ------------------------------------------------------------ dispatch */
typedef void (*emb_sgd_f32_t)(float*, const float*, float*, ptrdiff_t, float, float, float,
                              float, float, int, int, int);
typedef void (*emb_sgd_f64_t)(double*, const double*, double*, ptrdiff_t, double, double,
                              double, double, double, int, int, int);
typedef void (*emb_adam_f32_t)(float*, const float*, float*, float*, float*, ptrdiff_t,
                               float, float, float, float, float, int, float, float, float,
                               float, float, int, int);
typedef void (*emb_adam_f64_t)(double*, const double*, double*, double*, double*, ptrdiff_t,
                               double, double, double, double, double, int, double, double,
                               double, double, double, int, int);
typedef void (*emb_rmsprop_f32_t)(float*, const float*, float*, float*, float*, ptrdiff_t,
                                  float, float, float, float, float, float, int, float,
                                  float, float, int, int, int);
typedef void (*emb_rmsprop_f64_t)(double*, const double*, double*, double*, double*,
                                  ptrdiff_t, double, double, double, double, double, double,
                                  int, double, double, double, int, int, int);
typedef void (*emb_adagrad_f32_t)(float*, const float*, float*, ptrdiff_t, float, float,
                                  float, float, int);
typedef void (*emb_adagrad_f64_t)(double*, const double*, double*, ptrdiff_t, double, double,
                                  double, double, int);

static emb_sgd_f32_t emb_sgd_f32 = emb_sgd_f32_base;
static emb_sgd_f64_t emb_sgd_f64 = emb_sgd_f64_base;
static emb_adam_f32_t emb_adam_f32 = emb_adam_f32_base;
static emb_adam_f64_t emb_adam_f64 = emb_adam_f64_base;
static emb_rmsprop_f32_t emb_rmsprop_f32 = emb_rmsprop_f32_base;
static emb_rmsprop_f64_t emb_rmsprop_f64 = emb_rmsprop_f64_base;
static emb_adagrad_f32_t emb_adagrad_f32 = emb_adagrad_f32_base;
static emb_adagrad_f64_t emb_adagrad_f64 = emb_adagrad_f64_base;

/* Pick the kernels for this CPU; returns 0 for the portable loops, 1 for
 * AVX2+FMA, 2 for AVX-512.  level caps the choice (tests): 0 portable,
 * 1 at most AVX2, 2 the best the CPU has. */
static int emb_optim_select(int level) {
    emb_sgd_f32 = emb_sgd_f32_base;  emb_sgd_f64 = emb_sgd_f64_base;
    emb_adam_f32 = emb_adam_f32_base;  emb_adam_f64 = emb_adam_f64_base;
    emb_rmsprop_f32 = emb_rmsprop_f32_base;  emb_rmsprop_f64 = emb_rmsprop_f64_base;
    emb_adagrad_f32 = emb_adagrad_f32_base;  emb_adagrad_f64 = emb_adagrad_f64_base;
#if defined(EMB_OPT_X86)
    if (level > 0) {
        __builtin_cpu_init();
        if (level > 1 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2")
                && __builtin_cpu_supports("fma")) {
            emb_sgd_f32 = emb_sgd_f32_512;  emb_sgd_f64 = emb_sgd_f64_512;
            emb_adam_f32 = emb_adam_f32_512;  emb_adam_f64 = emb_adam_f64_512;
            emb_rmsprop_f32 = emb_rmsprop_f32_512;  emb_rmsprop_f64 = emb_rmsprop_f64_512;
            emb_adagrad_f32 = emb_adagrad_f32_512;  emb_adagrad_f64 = emb_adagrad_f64_512;
            return 2;
        }
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
            emb_sgd_f32 = emb_sgd_f32_fma;  emb_sgd_f64 = emb_sgd_f64_fma;
            emb_adam_f32 = emb_adam_f32_fma;  emb_adam_f64 = emb_adam_f64_fma;
            emb_rmsprop_f32 = emb_rmsprop_f32_fma;  emb_rmsprop_f64 = emb_rmsprop_f64_fma;
            emb_adagrad_f32 = emb_adagrad_f32_fma;  emb_adagrad_f64 = emb_adagrad_f64_fma;
            return 1;
        }
    }
#else
    (void)level;
#endif
    return 0;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
