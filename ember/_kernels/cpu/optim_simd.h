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

/* ------------------------------------------------------------- options */
/* Each optimizer's options, with torch.optim's names, as the optimizer gives
 * them (double); a kernel rounds them to the parameter's type T once, on
 * entry.  The values that depend on a parameter's own step count come as
 * separate arguments. */
typedef struct {
    double lr, momentum, dampening, weight_decay;
    int nesterov, maximize;
} emb_sgd_options;

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    int amsgrad, maximize, decoupled_weight_decay;
} emb_adam_options;

typedef struct {
    double lr, alpha, eps, weight_decay, momentum;
    int centered, maximize;
} emb_rmsprop_options;

typedef struct {
    double eps, weight_decay;
    int maximize;
} emb_adagrad_options;

/* momentum_mode of an SGD step for one parameter */
enum { EMB_SGD_NO_MOMENTUM = 0, EMB_SGD_MOMENTUM = 1, EMB_SGD_FIRST_MOMENTUM = 2 };

/* ------------------------------------------------------------------ SGD */
/* momentum_mode: EMB_SGD_NO_MOMENTUM, EMB_SGD_MOMENTUM (buffer exists) or
 * EMB_SGD_FIRST_MOMENTUM (first step: momentum_buffer <- grad). */
#define EMB_DEFINE_SGD_BODY(NAME, T, FMAFN)                                              \
EMB_INLINE void NAME(T* restrict param, const T* restrict grad,                        \
                     T* restrict momentum_buffer, ptrdiff_t n,                          \
                     const emb_sgd_options* o, const int use_fma,                      \
                     const int has_weight_decay, const int momentum_mode,              \
                     const int nesterov) {                                              \
    const T grad_sign = o->maximize ? (T)-1 : (T)1;                                     \
    const T weight_decay = (T)o->weight_decay;                                          \
    const T momentum = (T)o->momentum;                                                  \
    const T one_minus_dampening = (T)(1.0 - o->dampening);                              \
    const T neg_lr = (T)(-o->lr);                                                       \
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T p = param[i];                                                                 \
        T d_p = grad[i] * grad_sign;                                                    \
        if (has_weight_decay) d_p = EMB_MADD(use_fma, FMAFN, p, weight_decay, d_p);     \
        if (momentum_mode != EMB_SGD_NO_MOMENTUM) {                                     \
            T buf = (momentum_mode == EMB_SGD_FIRST_MOMENTUM) ? d_p                     \
                : EMB_MADD(use_fma, FMAFN, d_p, one_minus_dampening,                    \
                           momentum_buffer[i] * momentum);                              \
            momentum_buffer[i] = buf;                                                   \
            d_p = nesterov ? EMB_MADD(use_fma, FMAFN, buf, momentum, d_p) : buf;        \
        }                                                                               \
        param[i] = EMB_MADD(use_fma, FMAFN, d_p, neg_lr, p);                            \
    }                                                                                   \
}

#define EMB_SGD_CALL(BODY, USE_FMA, WD, MODE, NESTEROV)                                  \
    BODY(param, grad, momentum_buffer, n, o, USE_FMA, WD, MODE, NESTEROV)

#define EMB_DEFINE_SGD(NAME, BODY, T, ATTR, USE_FMA)                                     \
ATTR static void NAME(T* param, const T* grad, T* momentum_buffer, ptrdiff_t n,         \
                      const emb_sgd_options* o, int momentum_mode) {                    \
    const int wd = o->weight_decay != 0;                                                \
    if (momentum_mode == EMB_SGD_NO_MOMENTUM) {                                         \
        if (wd) EMB_SGD_CALL(BODY, USE_FMA, 1, EMB_SGD_NO_MOMENTUM, 0);                 \
        else EMB_SGD_CALL(BODY, USE_FMA, 0, EMB_SGD_NO_MOMENTUM, 0);                    \
    } else if (momentum_mode == EMB_SGD_MOMENTUM) {                                     \
        if (o->nesterov) {                                                              \
            if (wd) EMB_SGD_CALL(BODY, USE_FMA, 1, EMB_SGD_MOMENTUM, 1);                \
            else EMB_SGD_CALL(BODY, USE_FMA, 0, EMB_SGD_MOMENTUM, 1);                   \
        } else {                                                                        \
            if (wd) EMB_SGD_CALL(BODY, USE_FMA, 1, EMB_SGD_MOMENTUM, 0);                \
            else EMB_SGD_CALL(BODY, USE_FMA, 0, EMB_SGD_MOMENTUM, 0);                   \
        }                                                                               \
    } else {                                                                            \
        EMB_SGD_CALL(BODY, USE_FMA, wd, EMB_SGD_FIRST_MOMENTUM, o->nesterov);           \
    }                                                                                   \
}

/* ----------------------------------------------------------------- Adam */
/* step_size = lr / bias_correction1 and bias_correction2_sqrt =
 * sqrt(bias_correction2), with bias_correction<k> = 1 - beta<k>**step, come
 * from the parameter's own step count.
 *
 * sqrt(v) / bias_correction2_sqrt (torch divides the float32 sqrt by the float32
 * constant c): the divider, which the sqrt and the second division also use, bounds
 * this loop (on Zen 4 the MLP benchmark's 85k float32 parameters took 33 us with three
 * divider operations per vector, 24 with two: benchmarks/README.md, "MLP step, issue
 * #25 (branch mlp3)").  So with fused multiply-adds, float32 and c in [2^-30, 1], the
 * quotient is s * y with y = RN(1 / c) (one division per call) and two Markstein
 * corrections q += (s - c q) y: after the first q is within one ulp of s / c, and then
 * (Markstein's theorem: y within half an ulp of 1 / c, q within one ulp, the residual
 * s - c q exact in an FMA) the second gives RN(s / c), the bits of the division.  c in
 * [2^-30, 1] and s = sqrt(v) <= 2^64 keep every step clear of overflow and underflow;
 * s = inf and +-0 take s * y (the residual would be NaN; -0.0 keeps its sign).  tests/optim/test_adam_cdiv.py
 * checks every float32 significand of s against the division for the c of the first
 * 17,000 steps at beta2 = 0.999 and others.  float64 and the portable build divide. */
EMB_INLINE float emb_cdiv_f32(float s, float c, float y) {
    float q = s * y;
    q = fmaf(fmaf(-q, c, s), y, q);
    q = fmaf(fmaf(-q, c, s), y, q);
    return (s == (float)INFINITY || s == 0.0f) ? s * y : q;    /* inf, and -0.0's sign */
}

/* out = emb_cdiv_f32(x, c, RN(1 / c)) elementwise, compiled as the Adam loops are (tests) */
#define EMB_DEFINE_CDIV_RUN(NAME, ATTR)                                                  \
ATTR static void NAME(const float* restrict x, float* restrict out, ptrdiff_t n,        \
                      float c) {                                                        \
    const float y = 1.0f / c;                                                           \
    for (ptrdiff_t i = 0; i < n; i++)                                                   \
        out[i] = emb_cdiv_f32(x[i], c, y);                                              \
}

#define EMB_DEFINE_ADAM_BODY(NAME, T, FMAFN, SQRTFN, CDIV)                               \
EMB_INLINE void NAME(T* restrict param, const T* restrict grad, T* restrict exp_avg,    \
                     T* restrict exp_avg_sq, T* restrict max_exp_avg_sq, ptrdiff_t n,   \
                     const emb_adam_options* o, double step_size,                       \
                     double bias_correction2_sqrt_, const int use_fma,                  \
                     const int l2_weight_decay, const int amsgrad, const int cdiv,      \
                     const int plain) {                                                 \
    const T grad_sign = o->maximize ? (T)-1 : (T)1;                                     \
    const T weight_decay = (T)o->weight_decay;                                          \
    /* AdamW: param *= 1 - lr * weight_decay (exactly 1 otherwise) */                  \
    const T param_decay = (T)((o->decoupled_weight_decay && o->weight_decay != 0)       \
                              ? 1.0 - o->lr * o->weight_decay : 1.0);                   \
    /* exp_avg = lerp(exp_avg, grad, 1 - beta1), torch's two-sided lerp */              \
    const T lerp_weight = (T)(1.0 - o->beta1);                                          \
    const T lerp_weight_minus_one = lerp_weight - (T)1;                                 \
    const int lerp_from_start = fabs(lerp_weight) < 0.5;                                \
    const T beta2 = (T)o->beta2;                                                        \
    const T one_minus_beta2 = (T)(1.0 - o->beta2);                                      \
    const T bias_correction2_sqrt = (T)bias_correction2_sqrt_;                          \
    const T inv_bias_correction2_sqrt = (T)1 / bias_correction2_sqrt;                  \
    const T eps = (T)o->eps;                                                            \
    const T neg_step_size = (T)(-step_size);                                            \
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T p = param[i];                                                                 \
        /* plain: grad_sign and param_decay are 1 (exact, so skipped), lerp from start */ \
        T g = plain ? grad[i] : grad[i] * grad_sign;                                    \
        if (l2_weight_decay) g = EMB_MADD(use_fma, FMAFN, p, weight_decay, g);          \
        if (!plain) p = p * param_decay;                                                \
        T m = EMB_LERP(use_fma, FMAFN, exp_avg[i], g, lerp_weight,                      \
                       lerp_weight_minus_one, plain || lerp_from_start);                \
        exp_avg[i] = m;                                                                 \
        T v = exp_avg_sq[i] * beta2;                                                    \
        v = EMB_MADD(use_fma, FMAFN, one_minus_beta2 * g, g, v);                        \
        exp_avg_sq[i] = v;                                                              \
        if (amsgrad) {                                                                  \
            T vmax = max_exp_avg_sq[i];                                                 \
            vmax = (v > vmax || v != v) ? v : vmax;                                     \
            max_exp_avg_sq[i] = vmax;                                                   \
            v = vmax;                                                                   \
        }                                                                               \
        T denom = (cdiv ? CDIV(SQRTFN(v), bias_correction2_sqrt,                        \
                               inv_bias_correction2_sqrt)                               \
                   : SQRTFN(v) / bias_correction2_sqrt) + eps;                          \
        param[i] = p + (neg_step_size * m) / denom;                                     \
    }                                                                                   \
}

#define EMB_ADAM_CALL(BODY, USE_FMA, L2, AMSGRAD, CDIV, PLAIN)                           \
    BODY(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, o, step_size,             \
         bias_correction2_sqrt, USE_FMA, L2, AMSGRAD, CDIV, PLAIN)

/* 0: the float32 Adam loops divide as before emb_cdiv_f32 and the plain loop (A/B timing,
 * benchmarks/ab_step.py's "adam" switch); same bits either way */
static int emb_adam_fast = 1;

/* CDIV_OK: the type has emb_cdiv (float32); it runs with FMA and c in [2^-30, 1] */
#define EMB_DEFINE_ADAM(NAME, BODY, T, ATTR, USE_FMA, CDIV_OK)                           \
ATTR static void NAME(T* param, const T* grad, T* exp_avg, T* exp_avg_sq,               \
                      T* max_exp_avg_sq, ptrdiff_t n, const emb_adam_options* o,        \
                      double step_size, double bias_correction2_sqrt) {                 \
    const int l2 = o->weight_decay != 0 && !o->decoupled_weight_decay;                  \
    const T c = (T)bias_correction2_sqrt;                                               \
    const int cdiv = (CDIV_OK) && (USE_FMA) && emb_adam_fast && c >= (T)0x1p-30        \
                     && c <= (T)1;                                                      \
    /* the usual options (no weight decay, amsgrad or maximize, beta1 > 0.5) get a loop \
       of their own without the multiplications by 1 and the lerp's select */          \
    const int plain = !o->maximize && o->weight_decay == 0 && !o->amsgrad              \
                      && fabs(1.0 - o->beta1) < 0.5;                                    \
    if (cdiv) {                                                                         \
        if (plain) EMB_ADAM_CALL(BODY, USE_FMA, 0, 0, CDIV_OK, 1);                      \
        else if (o->amsgrad) {                                                          \
            if (l2) EMB_ADAM_CALL(BODY, USE_FMA, 1, 1, CDIV_OK, 0);                     \
            else EMB_ADAM_CALL(BODY, USE_FMA, 0, 1, CDIV_OK, 0);                        \
        } else {                                                                        \
            if (l2) EMB_ADAM_CALL(BODY, USE_FMA, 1, 0, CDIV_OK, 0);                     \
            else EMB_ADAM_CALL(BODY, USE_FMA, 0, 0, CDIV_OK, 0);                        \
        }                                                                               \
    } else if (o->amsgrad) {                                                            \
        if (l2) EMB_ADAM_CALL(BODY, USE_FMA, 1, 1, 0, 0);                               \
        else EMB_ADAM_CALL(BODY, USE_FMA, 0, 1, 0, 0);                                  \
    } else {                                                                            \
        if (l2) EMB_ADAM_CALL(BODY, USE_FMA, 1, 0, 0, 0);                               \
        else EMB_ADAM_CALL(BODY, USE_FMA, 0, 0, 0, 0);                                  \
    }                                                                                   \
}

/* -------------------------------------------------------------- RMSprop */
#define EMB_DEFINE_RMSPROP_BODY(NAME, T, FMAFN, SQRTFN)                                  \
EMB_INLINE void NAME(T* restrict param, const T* restrict grad, T* restrict square_avg, \
                     T* restrict grad_avg, T* restrict momentum_buffer, ptrdiff_t n,    \
                     const emb_rmsprop_options* o, const int use_fma,                   \
                     const int has_weight_decay, const int centered,                    \
                     const int has_momentum) {                                          \
    const T grad_sign = o->maximize ? (T)-1 : (T)1;                                     \
    const T weight_decay = (T)o->weight_decay;                                          \
    const T alpha = (T)o->alpha;                                                        \
    const T one_minus_alpha = (T)(1.0 - o->alpha);                                      \
    /* centered: grad_avg = lerp(grad_avg, grad, 1 - alpha) */                          \
    const T lerp_weight = one_minus_alpha;                                              \
    const T lerp_weight_minus_one = lerp_weight - (T)1;                                 \
    const int lerp_from_start = fabs(lerp_weight) < 0.5;                                \
    const T eps = (T)o->eps;                                                            \
    const T momentum = (T)o->momentum;                                                  \
    const T neg_lr = (T)(-o->lr);                                                       \
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T p = param[i];                                                                 \
        T g = grad[i] * grad_sign;                                                      \
        if (has_weight_decay) g = EMB_MADD(use_fma, FMAFN, p, weight_decay, g);         \
        T sq = square_avg[i] * alpha;                                                   \
        sq = EMB_MADD(use_fma, FMAFN, one_minus_alpha * g, g, sq);                      \
        square_avg[i] = sq;                                                             \
        T avg;                                                                          \
        if (centered) {                                                                 \
            T ga = EMB_LERP(use_fma, FMAFN, grad_avg[i], g, lerp_weight,                \
                            lerp_weight_minus_one, lerp_from_start);                    \
            grad_avg[i] = ga;                                                           \
            avg = SQRTFN(EMB_MADD(use_fma, FMAFN, -ga, ga, sq));                        \
        } else {                                                                        \
            avg = SQRTFN(sq);                                                           \
        }                                                                               \
        avg = avg + eps;                                                                \
        if (has_momentum) {                                                             \
            T buf = momentum_buffer[i] * momentum;                                      \
            buf = buf + g / avg;                                                        \
            momentum_buffer[i] = buf;                                                   \
            param[i] = EMB_MADD(use_fma, FMAFN, buf, neg_lr, p);                        \
        } else {                                                                        \
            param[i] = p + (neg_lr * g) / avg;                                          \
        }                                                                               \
    }                                                                                   \
}

#define EMB_RMS_CALL(BODY, USE_FMA, WD, CENTERED, MOMENTUM)                              \
    BODY(param, grad, square_avg, grad_avg, momentum_buffer, n, o, USE_FMA, WD,         \
         CENTERED, MOMENTUM)

#define EMB_DEFINE_RMSPROP(NAME, BODY, T, ATTR, USE_FMA)                                 \
ATTR static void NAME(T* param, const T* grad, T* square_avg, T* grad_avg,              \
                      T* momentum_buffer, ptrdiff_t n, const emb_rmsprop_options* o) {  \
    int k = (o->weight_decay != 0 ? 4 : 0) | (o->centered ? 2 : 0)                      \
            | (o->momentum > 0 ? 1 : 0);                                                \
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
/* clr = lr / (1 + (step - 1) * lr_decay), from the parameter's own step count */
#define EMB_DEFINE_ADAGRAD_BODY(NAME, T, FMAFN, SQRTFN)                                  \
EMB_INLINE void NAME(T* restrict param, const T* restrict grad, T* restrict state_sum,  \
                     ptrdiff_t n, const emb_adagrad_options* o, double clr,             \
                     const int use_fma, const int has_weight_decay) {                   \
    const T grad_sign = o->maximize ? (T)-1 : (T)1;                                     \
    const T weight_decay = (T)o->weight_decay;                                          \
    const T eps = (T)o->eps;                                                            \
    const T neg_clr = (T)(-clr);                                                        \
    for (ptrdiff_t i = 0; i < n; i++) {                                                 \
        T p = param[i];                                                                 \
        T g = grad[i] * grad_sign;                                                      \
        if (has_weight_decay) g = EMB_MADD(use_fma, FMAFN, p, weight_decay, g);         \
        T sum = EMB_MADD(use_fma, FMAFN, g, g, state_sum[i]);                           \
        state_sum[i] = sum;                                                             \
        T std = SQRTFN(sum) + eps;                                                      \
        param[i] = p + (neg_clr * g) / std;                                             \
    }                                                                                   \
}

#define EMB_DEFINE_ADAGRAD(NAME, BODY, T, ATTR, USE_FMA)                                 \
ATTR static void NAME(T* param, const T* grad, T* state_sum, ptrdiff_t n,               \
                      const emb_adagrad_options* o, double clr) {                       \
    if (o->weight_decay != 0) BODY(param, grad, state_sum, n, o, clr, USE_FMA, 1);      \
    else BODY(param, grad, state_sum, n, o, clr, USE_FMA, 0);                           \
}

EMB_DEFINE_SGD_BODY(emb_sgd_body_f32, float, fmaf)
EMB_DEFINE_SGD_BODY(emb_sgd_body_f64, double, fma)
EMB_DEFINE_ADAM_BODY(emb_adam_body_f32, float, fmaf, sqrtf, emb_cdiv_f32)
/* float64 never takes the cdiv branch (CDIV_OK 0 below): it divides */
#define EMB_DIV_F64(s, c, y) ((s) / (c))
EMB_DEFINE_ADAM_BODY(emb_adam_body_f64, double, fma, sqrt, EMB_DIV_F64)
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
EMB_DEFINE_ADAM(emb_adam_f32_base, emb_adam_body_f32, float, , EMB_PORTABLE_FMA, 1)
EMB_DEFINE_ADAM(emb_adam_f64_base, emb_adam_body_f64, double, , EMB_PORTABLE_FMA, 0)
EMB_DEFINE_CDIV_RUN(emb_cdiv_f32_run_base, )
EMB_DEFINE_RMSPROP(emb_rmsprop_f32_base, emb_rmsprop_body_f32, float, , EMB_PORTABLE_FMA)
EMB_DEFINE_RMSPROP(emb_rmsprop_f64_base, emb_rmsprop_body_f64, double, , EMB_PORTABLE_FMA)
EMB_DEFINE_ADAGRAD(emb_adagrad_f32_base, emb_adagrad_body_f32, float, , EMB_PORTABLE_FMA)
EMB_DEFINE_ADAGRAD(emb_adagrad_f64_base, emb_adagrad_body_f64, double, , EMB_PORTABLE_FMA)

#if defined(EMB_OPT_X86)
EMB_DEFINE_SGD(emb_sgd_f32_fma, emb_sgd_body_f32, float, EMB_TARGET_FMA, 1)
EMB_DEFINE_SGD(emb_sgd_f64_fma, emb_sgd_body_f64, double, EMB_TARGET_FMA, 1)
EMB_DEFINE_ADAM(emb_adam_f32_fma, emb_adam_body_f32, float, EMB_TARGET_FMA, 1, 1)
EMB_DEFINE_ADAM(emb_adam_f64_fma, emb_adam_body_f64, double, EMB_TARGET_FMA, 1, 0)
EMB_DEFINE_CDIV_RUN(emb_cdiv_f32_run_fma, EMB_TARGET_FMA)
EMB_DEFINE_RMSPROP(emb_rmsprop_f32_fma, emb_rmsprop_body_f32, float, EMB_TARGET_FMA, 1)
EMB_DEFINE_RMSPROP(emb_rmsprop_f64_fma, emb_rmsprop_body_f64, double, EMB_TARGET_FMA, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f32_fma, emb_adagrad_body_f32, float, EMB_TARGET_FMA, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f64_fma, emb_adagrad_body_f64, double, EMB_TARGET_FMA, 1)
EMB_DEFINE_SGD(emb_sgd_f32_512, emb_sgd_body_f32, float, EMB_TARGET_AVX512, 1)
EMB_DEFINE_SGD(emb_sgd_f64_512, emb_sgd_body_f64, double, EMB_TARGET_AVX512, 1)
EMB_DEFINE_ADAM(emb_adam_f32_512, emb_adam_body_f32, float, EMB_TARGET_AVX512, 1, 1)
EMB_DEFINE_ADAM(emb_adam_f64_512, emb_adam_body_f64, double, EMB_TARGET_AVX512, 1, 0)
EMB_DEFINE_CDIV_RUN(emb_cdiv_f32_run_512, EMB_TARGET_AVX512)
EMB_DEFINE_RMSPROP(emb_rmsprop_f32_512, emb_rmsprop_body_f32, float, EMB_TARGET_AVX512, 1)
EMB_DEFINE_RMSPROP(emb_rmsprop_f64_512, emb_rmsprop_body_f64, double, EMB_TARGET_AVX512, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f32_512, emb_adagrad_body_f32, float, EMB_TARGET_AVX512, 1)
EMB_DEFINE_ADAGRAD(emb_adagrad_f64_512, emb_adagrad_body_f64, double, EMB_TARGET_AVX512, 1)
#endif

/* ------------------------------------------------------------ dispatch */
typedef void (*emb_sgd_f32_t)(float*, const float*, float*, ptrdiff_t,
                              const emb_sgd_options*, int);
typedef void (*emb_sgd_f64_t)(double*, const double*, double*, ptrdiff_t,
                              const emb_sgd_options*, int);
typedef void (*emb_adam_f32_t)(float*, const float*, float*, float*, float*, ptrdiff_t,
                               const emb_adam_options*, double, double);
typedef void (*emb_adam_f64_t)(double*, const double*, double*, double*, double*, ptrdiff_t,
                               const emb_adam_options*, double, double);
typedef void (*emb_rmsprop_f32_t)(float*, const float*, float*, float*, float*, ptrdiff_t,
                                  const emb_rmsprop_options*);
typedef void (*emb_rmsprop_f64_t)(double*, const double*, double*, double*, double*,
                                  ptrdiff_t, const emb_rmsprop_options*);
typedef void (*emb_adagrad_f32_t)(float*, const float*, float*, ptrdiff_t,
                                  const emb_adagrad_options*, double);
typedef void (*emb_adagrad_f64_t)(double*, const double*, double*, ptrdiff_t,
                                  const emb_adagrad_options*, double);

static emb_sgd_f32_t emb_sgd_f32 = emb_sgd_f32_base;
static emb_sgd_f64_t emb_sgd_f64 = emb_sgd_f64_base;
static emb_adam_f32_t emb_adam_f32 = emb_adam_f32_base;
static emb_adam_f64_t emb_adam_f64 = emb_adam_f64_base;
typedef void (*emb_cdiv_run_t)(const float*, float*, ptrdiff_t, float);
static emb_cdiv_run_t emb_cdiv_f32_run = emb_cdiv_f32_run_base;
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
    emb_cdiv_f32_run = emb_cdiv_f32_run_base;
    emb_rmsprop_f32 = emb_rmsprop_f32_base;  emb_rmsprop_f64 = emb_rmsprop_f64_base;
    emb_adagrad_f32 = emb_adagrad_f32_base;  emb_adagrad_f64 = emb_adagrad_f64_base;
#if defined(EMB_OPT_X86)
    if (level > 0) {
        __builtin_cpu_init();
        if (level > 1 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2")
                && __builtin_cpu_supports("fma")) {
            emb_sgd_f32 = emb_sgd_f32_512;  emb_sgd_f64 = emb_sgd_f64_512;
            emb_adam_f32 = emb_adam_f32_512;  emb_adam_f64 = emb_adam_f64_512;
            emb_cdiv_f32_run = emb_cdiv_f32_run_512;
            emb_rmsprop_f32 = emb_rmsprop_f32_512;  emb_rmsprop_f64 = emb_rmsprop_f64_512;
            emb_adagrad_f32 = emb_adagrad_f32_512;  emb_adagrad_f64 = emb_adagrad_f64_512;
            return 2;
        }
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
            emb_sgd_f32 = emb_sgd_f32_fma;  emb_sgd_f64 = emb_sgd_f64_fma;
            emb_adam_f32 = emb_adam_f32_fma;  emb_adam_f64 = emb_adam_f64_fma;
            emb_cdiv_f32_run = emb_cdiv_f32_run_fma;
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
