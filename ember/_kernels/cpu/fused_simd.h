/* Vector loops of the fused bias + ReLU kernels (fused.pyx), float32 and float64.
 *
 *   emf_bias_relu_rows:  y[r, c] = max(y[r, c] + b[c], 0) over (rows, C), b may be NULL
 *   emf_bias_relu_run:   y[l]    = max(y[l] + bv, 0) over one run of L
 *   emf_grad_rows:       gx[r, c] = y[r, c] > 0 ? g[r, c] : 0 over rows x [c0, c1), and
 *                        acc[c] += gx[r, c] in double (acc may be NULL): ReLU's backward
 *                        and the bias gradient (a column sum) in ONE pass over g
 *   emf_grad_run:        the same over one run of L, returning the run's sum (double)
 *
 * NaN: the forward keeps NaN (v < 0 is false for NaN, as ``maximum``/``relu``); the
 * backward passes g where y is NaN (only y <= 0 blocks it), as PyTorch's
 * threshold_backward.  -0.0 stays -0.0 forward.  g is loaded unconditionally and
 * selected (a blend, no branch).
 *
 * Each loop is compiled three times: AVX-512 (x86-64-v4, 512-bit vectors), AVX2 + FMA
 * (x86-64-v3) and baseline; emf_isa (em_vmath_isa()'s choice unless the caller sets it,
 * EMBER_MATH_ISA caps it) picks one.  No floating-point contraction is possible here (only
 * adds, compares and selects), so every variant gives the same bits; the column sums
 * add one row at a time in double, so they do not depend on the variant or on how the
 * columns are split over threads either. */
#ifndef EMBER_FUSED_SIMD_H
#define EMBER_FUSED_SIMD_H

#include <stddef.h>
#include "em_vmath.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
/* the selects below may be computed on both sides: vector blends */
#pragma GCC optimize ("no-trapping-math")
#endif

#define EMF_DEFINE(SFX, ATTR, T)                                                         \
ATTR static void emf_bias_relu_rows_##SFX(T *restrict y, const T *restrict b,            \
                                           ptrdiff_t rows, ptrdiff_t C) {                \
    for (ptrdiff_t r = 0; r < rows; r++) {                                              \
        T *restrict row = y + r * C;                                                    \
        if (b != NULL) {                                                                \
            for (ptrdiff_t c = 0; c < C; c++) {                                         \
                T v = row[c] + b[c];                                                    \
                row[c] = v < (T)0 ? (T)0 : v;                                           \
            }                                                                           \
        } else {                                                                        \
            for (ptrdiff_t c = 0; c < C; c++) {                                         \
                T v = row[c];                                                           \
                row[c] = v < (T)0 ? (T)0 : v;                                           \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
}                                                                                       \
ATTR static void emf_bias_relu_run_##SFX(T *restrict y, T bv, ptrdiff_t L) {             \
    for (ptrdiff_t l = 0; l < L; l++) {                                                 \
        T v = y[l] + bv;                                                                \
        y[l] = v < (T)0 ? (T)0 : v;                                                     \
    }                                                                                   \
}                                                                                       \
ATTR static void emf_grad_rows_##SFX(const T *restrict g, const T *restrict y,           \
                                      T *restrict gx, double *restrict acc,             \
                                      ptrdiff_t rows, ptrdiff_t C, ptrdiff_t c0,         \
                                      ptrdiff_t c1) {                                   \
    for (ptrdiff_t r = 0; r < rows; r++) {                                              \
        const ptrdiff_t o = r * C;                                                      \
        if (acc != NULL) {                                                              \
            for (ptrdiff_t c = c0; c < c1; c++) {                                       \
                T v = y[o + c] <= (T)0 ? (T)0 : g[o + c];                               \
                gx[o + c] = v;                                                          \
                acc[c] += (double)v;                                                    \
            }                                                                           \
        } else {                                                                        \
            for (ptrdiff_t c = c0; c < c1; c++)                                         \
                gx[o + c] = y[o + c] <= (T)0 ? (T)0 : g[o + c];                         \
        }                                                                               \
    }                                                                                   \
}                                                                                       \
ATTR static double emf_grad_run_##SFX(const T *restrict g, const T *restrict y,          \
                                       T *restrict gx, ptrdiff_t L) {                   \
    /* the mask, then the run's sum from gx (in L1) in 16 partial sums: a fixed order,  \
       the same bits on every variant.  (GCC 12 -O3 miscompiles the two in one loop     \
       with the partial sums: lanes of gx come out 0.) */                               \
    for (ptrdiff_t l = 0; l < L; l++)                                                   \
        gx[l] = y[l] <= (T)0 ? (T)0 : g[l];                                             \
    T lane[16] = {0};                                                                   \
    ptrdiff_t l = 0;                                                                    \
    for (; l + 16 <= L; l += 16)                                                        \
        for (int k = 0; k < 16; k++)                                                    \
            lane[k] += gx[l + k];                                                       \
    double s = 0;                                                                       \
    for (; l < L; l++)                                                                  \
        s += (double)gx[l];                                                             \
    for (int k = 0; k < 16; k++)                                                        \
        s += (double)lane[k];                                                           \
    return s;                                                                           \
}

#ifdef EMV_X86
EMF_DEFINE(f32_v4, EMV_V4, float)
EMF_DEFINE(f64_v4, EMV_V4, double)
EMF_DEFINE(f32_v3, EMV_V3, float)
EMF_DEFINE(f64_v3, EMV_V3, double)
#endif
EMF_DEFINE(f32_base, , float)
EMF_DEFINE(f64_base, , double)

/* the variant the kernels run: 2 AVX-512, 1 AVX2, 0 baseline; -1 until first asked */
static int emf_isa_level = -1;

static inline int emf_isa(void) {
    if (emf_isa_level < 0)
        emf_isa_level = em_vmath_isa();
    return emf_isa_level;
}

/* choose the variant (tests): at most `level`, at most what the CPU has; returns it */
static inline int emf_set_isa(int level) {
    int best = em_vmath_isa();
    emf_isa_level = level < best ? level : best;
    return emf_isa_level;
}

#ifdef EMV_X86
#define EMF_PICK(fn, T) (emf_isa() == 2 ? fn##_##T##_v4 : emf_isa() == 1 ? fn##_##T##_v3 \
                         : fn##_##T##_base)
#else
#define EMF_PICK(fn, T) fn##_##T##_base
#endif

#define EMF_ENTRY(T, CT)                                                                 \
static inline void emf_bias_relu_rows_##T(CT *y, const CT *b, ptrdiff_t rows,             \
                                          ptrdiff_t C) {                                  \
    EMF_PICK(emf_bias_relu_rows, T)(y, b, rows, C);                                      \
}                                                                                       \
static inline void emf_bias_relu_run_##T(CT *y, CT bv, ptrdiff_t L) {                    \
    EMF_PICK(emf_bias_relu_run, T)(y, bv, L);                                            \
}                                                                                       \
static inline void emf_grad_rows_##T(const CT *g, const CT *y, CT *gx, double *acc,      \
                                     ptrdiff_t rows, ptrdiff_t C, ptrdiff_t c0,          \
                                     ptrdiff_t c1) {                                    \
    EMF_PICK(emf_grad_rows, T)(g, y, gx, acc, rows, C, c0, c1);                          \
}                                                                                       \
static inline double emf_grad_run_##T(const CT *g, const CT *y, CT *gx, ptrdiff_t L) {  \
    return EMF_PICK(emf_grad_run, T)(g, y, gx, L);                                       \
}

EMF_ENTRY(f32, float)
EMF_ENTRY(f64, double)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
