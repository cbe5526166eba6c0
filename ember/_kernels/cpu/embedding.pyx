# cython: language_level=3
"""CPU kernels of ember.nn's embedding (row gather / scatter-add) and activations.

All functions take C-contiguous NumPy views (``numpy_view`` of ember arrays) and write
into preallocated outputs; they release the GIL and split large work over threads.
The activation kernels (sigmoid, SiLU, GELU, ELU, softplus, leaky ReLU and the
backward passes, plus erf) live here until they get a module of their own.
"""
cimport cython
from cython.parallel cimport prange
from libc.string cimport memcpy, memset
from libc.stdint cimport int32_t, int64_t, uint16_t
from ember._core.elementwise cimport num_threads

ctypedef fused real:
    float
    double

ctypedef fused row_t:           # what gather_rows copies: bytes, so 16-bit floats as uint16
    float
    double
    uint16_t

ctypedef fused index_t:
    int32_t
    int64_t

cdef Py_ssize_t PAR_MIN = 32768       # elements below which threads cost more than they save


cdef inline int _nthreads(Py_ssize_t n) noexcept nogil:
    return 1 if n < PAR_MIN else num_threads()


def gather_rows(const row_t[:, ::1] weight not None, const index_t[::1] idx not None, row_t[:, ::1] out not None):
    """out[i] = weight[idx[i]] (float32, float64, or 16-bit floats viewed as uint16).
    Returns -1, or the position of the first index out of range [0, weight.shape[0])
    (nothing is written then)."""
    cdef Py_ssize_t n = idx.shape[0], D = weight.shape[1], V = weight.shape[0]
    cdef Py_ssize_t i, bad = -1
    cdef int64_t k
    cdef size_t row_bytes = D * sizeof(row_t)
    with nogil:
        for i in range(n):
            k = idx[i]
            if k < 0 or k >= V:
                bad = i
                break
        if bad < 0 and D > 0:
            if n * D >= PAR_MIN:
                for i in prange(n, schedule="static", num_threads=num_threads()):
                    memcpy(&out[i, 0], &weight[idx[i], 0], row_bytes)
            else:
                for i in range(n):
                    memcpy(&out[i, 0], &weight[idx[i], 0], row_bytes)
    return bad


def scatter_add_rows(const real[:, ::1] grad not None, const index_t[::1] idx not None, real[:, ::1] out not None,
                     int64_t padding_idx):
    """out[idx[i]] += grad[i] for every i with idx[i] != padding_idx (out is zeroed first
    by the caller).  Indices must already be validated.  Large problems are split over
    column blocks, so threads never write the same element."""
    cdef Py_ssize_t n = grad.shape[0], D = grad.shape[1]
    cdef Py_ssize_t i, j, b, j0, j1, nblocks
    cdef Py_ssize_t BLOCK = 64
    cdef int64_t k
    if D == 0 or n == 0:
        return
    nblocks = (D + BLOCK - 1) // BLOCK
    with nogil:
        if n * D >= PAR_MIN and nblocks > 1:
            for b in prange(nblocks, schedule="static", num_threads=num_threads()):
                j0 = b * BLOCK
                j1 = j0 + BLOCK
                if j1 > D:
                    j1 = D
                for i in range(n):
                    k = idx[i]
                    if k == padding_idx:
                        continue
                    for j in range(j0, j1):
                        out[k, j] += grad[i, j]
        else:
            for i in range(n):
                k = idx[i]
                if k == padding_idx:
                    continue
                for j in range(D):
                    out[k, j] += grad[i, j]


def count_rows(const index_t[::1] idx not None, int64_t[::1] counts not None):
    """counts[idx[i]] += 1 (indices already validated)."""
    cdef Py_ssize_t i, n = idx.shape[0]
    with nogil:
        for i in range(n):
            counts[idx[i]] += 1


# ---------------------------------------------------------------- activation kernels
#
# Elementwise activations and their derivatives, written in C below so that GCC
# vectorises the float32 loops: exp, erf, erfc, expm1 and log1p are branch-free
# polynomial versions (em_math.h, act_math.h; float32 accuracy within 2 ulp, measured
# over ranges of consecutive float32s in tests/test_float32_math.py).  float64 uses
# libm.  Each kernel has the shape f(x, out, n, params) or f(g, x, out, n, params).

ctypedef void (*unary_f)(const float*, float*, Py_ssize_t, const double*) noexcept nogil
ctypedef void (*unary_d)(const double*, double*, Py_ssize_t, const double*) noexcept nogil
ctypedef void (*binary_f)(const float*, const float*, float*, Py_ssize_t,
                          const double*) noexcept nogil
ctypedef void (*binary_d)(const double*, const double*, double*, Py_ssize_t,
                          const double*) noexcept nogil

cdef extern from *:
    """
    #include <math.h>
    #include <string.h>
    #include <stdint.h>

    /* Speculating both sides of a select (to vectorise it) needs no-trapping-math
       (fp-contract=fast: the AVX2 and AVX-512 clones fuse multiply-adds); on
       x86-64 Linux with GCC each kernel is also compiled for AVX-512 and AVX2 and the
       loader picks the best one for the CPU (target_clones). */
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC push_options
    #pragma GCC optimize ("no-trapping-math", "fp-contract=fast")
    #define EM_POP_OPTIONS 1
    #endif
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \
        && __GNUC__ >= 12
    #define EM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", \
                                                   "default")))
    #else
    #define EM_CLONES
    #endif

    /* em_expf, em_expm1f, em_logf, em_tanhf: the shared branch-free float32 math;
       em_erff, em_sigmoidf, em_gelu_tanhf and their *_fast versions: act_math.h; the
       exact GELU em_gelu_f / em_gelu_grad_f / em_gelu_v4: gelu_math.h; emv_exp_fast,
       emv_log_fast, em_vtanh_f32: em_vmath.h */
    #include "act_math.h"

    static inline double em_sigmoid(double x) {
        if (x >= 0) return 1.0 / (1.0 + exp(-x));
        double e = exp(x);
        return e / (1.0 + e);
    }

    #define EM_R2 0.70710678118654752440
    #define EM_RS2PI 0.39894228040143267794
    #define EM_GELU_K_D 0.79788456080286535588
    static inline double em_gelu_tanh_grad(double x) {
        double s = em_sigmoid(2.0 * EM_GELU_K_D * (x + 0.044715 * x * x * x));
        return s + x * (s * (1.0 - s)) * (2.0 * EM_GELU_K_D * (1.0 + 3 * 0.044715 * x * x));
    }

    /* ---- unary kernels: f(x, out, n, p) ---- */
    #define EM_UNARY(name, T, expr) \
        EM_CLONES static void name(const T* restrict x, T* restrict out, Py_ssize_t n, \
                                   const double* restrict p) { \
            const T p0 = (T)p[0], p1 = (T)p[1], p2 = (T)p[2]; \
            (void)p0; (void)p1; (void)p2; \
            for (Py_ssize_t i = 0; i < n; i++) { T v = x[i]; out[i] = (expr); } }
    /* float32, in blocks of EM_VBLOCK: `fast` where every v of the block passes `ok`,
       `full` elsewhere (act_math.h's *_fast versions skip the exp's clamps and NaN
       handling, which `ok` rules out) */
    #define EM_UNARY_FAST(name, ok, fast, full) \
        EM_CLONES static void name(const float* restrict x, float* restrict out, Py_ssize_t n, \
                                   const double* restrict p) { \
            const float p0 = (float)p[0], p1 = (float)p[1]; \
            (void)p0; (void)p1; \
            for (Py_ssize_t i0 = 0; i0 < n; i0 += EM_VBLOCK) { \
                Py_ssize_t m = n - i0 < EM_VBLOCK ? n - i0 : EM_VBLOCK; \
                const float* restrict xb = x + i0; \
                float* restrict ob = out + i0; \
                int bad = 0; \
                for (Py_ssize_t i = 0; i < m; i++) { float v = xb[i]; bad |= !(ok); } \
                if (!bad) { for (Py_ssize_t i = 0; i < m; i++) { float v = xb[i]; ob[i] = (fast); } } \
                else { for (Py_ssize_t i = 0; i < m; i++) { float v = xb[i]; ob[i] = (full); } } } }
    #define EM_BINARY(name, T, expr) \
        EM_CLONES static void name(const T* restrict g, const T* restrict x, T* restrict out, \
                                   Py_ssize_t n, const double* restrict p) { \
            const T p0 = (T)p[0], p1 = (T)p[1], p2 = (T)p[2]; \
            (void)p0; (void)p1; (void)p2; \
            for (Py_ssize_t i = 0; i < n; i++) { T v = x[i]; T gv = g[i]; out[i] = (expr); } }

    EM_UNARY(em_erf_f32, float, em_erff(v))
    EM_UNARY(em_erf_f64, double, erf(v))
    EM_UNARY_FAST(em_sigmoid_f32_auto, EM_SIGMOID_FAST_OK(v), em_sigmoidf_fast(v), em_sigmoidf(v))
    EM_UNARY(em_sigmoid_f64, double, em_sigmoid(v))
    EM_UNARY_FAST(em_silu_f32_auto, EM_SIGMOID_FAST_OK(v), v * em_sigmoidf_fast(v),
                  v * em_sigmoidf(v))
    /* sigmoid and SiLU: act_math.h's hand-vectorised AVX-512 kernel where em_vmath_isa()
       says AVX-512 (EMBER_MATH_ISA=avx2 or baseline picks the loops above) */
    static void em_sigmoid_f32(const float* x, float* out, Py_ssize_t n, const double* p) {
    #ifdef EMV_X86
        if (em_vmath_isa() == 2) { em_sigmoid_v4(x, out, n, 0); return; }
    #endif
        em_sigmoid_f32_auto(x, out, n, p);
    }
    static void em_silu_f32(const float* x, float* out, Py_ssize_t n, const double* p) {
    #ifdef EMV_X86
        if (em_vmath_isa() == 2) { em_sigmoid_v4(x, out, n, 1); return; }
    #endif
        em_silu_f32_auto(x, out, n, p);
    }
    EM_UNARY(em_silu_f64, double, v * em_sigmoid(v))
    /* exact GELU: gelu_math.h's AVX-512 or AVX2 kernel as em_vmath_isa() says, the
       same formula per element elsewhere (blocks with x < -12.5 or NaN: float64) */
    EM_UNARY_FAST(em_gelu_f32_auto, EM_GELU_OK(v), em_gelu_tabf(v), em_gelu_f(v))
    static void em_gelu_f32(const float* x, float* out, Py_ssize_t n, const double* p) {
    #ifdef EMV_X86
        if (em_vmath_isa() == 2) { em_gelu_v4(NULL, x, out, n); return; }
        if (em_vmath_isa() == 1) { em_gelu_v3(NULL, x, out, n); return; }
    #endif
        em_gelu_f32_auto(x, out, n, p);
    }
    EM_UNARY_FAST(em_gelu_tanh_f32, EM_GELU_TANH_FAST_OK(v), em_gelu_tanhf_fast(v),
                  em_gelu_tanhf(v))
    EM_UNARY(em_gelu_tanh_f64, double, v * em_sigmoid(2.0 * EM_GELU_K_D
                                                     * (v + 0.044715 * v * v * v)))
    EM_UNARY(em_gelu_f64, double, 0.5 * v * erfc(-v * EM_R2))
    EM_UNARY(em_leaky_f32, float, v > 0 ? v : v * p0)
    EM_UNARY(em_leaky_f64, double, v > 0 ? v : v * p0)
    /* p = (alpha, scale, input_scale) */
    EM_UNARY(em_elu_f32, float, v > 0 ? v * p1
             : (p0 * p1) * em_expm1f(v * p2))
    EM_UNARY(em_elu_f64, double, v > 0 ? v * p1 : p0 * p1 * expm1(v * p2))
    /* p = (beta, threshold); em_softplusf and its _fast version: act_math.h */
    EM_UNARY_FAST(em_softplus_f32, emv_exp_fast_ok(v * p0), em_softplusf_fast(v, p0, p1),
                  em_softplusf(v, p0, p1))
    EM_UNARY(em_softplus_f64, double, v * p0 > p1 ? v
             : (fmax(v * p0, 0.0) + log1p(exp(-fabs(v * p0)))) / p0)

    /* (NaN-preserving as PyTorch's threshold_backward: only v <= 0 blocks the gradient) */
    /* ember.tanh's kernel (em_vmath.h, picked by CPU at run time): the same bits */
    static void em_tanh_f32(const float* x, float* out, Py_ssize_t n, const double* p) {
        (void)p;
        em_vtanh_f32((const char*)x, 4, (char*)out, 4, n);
    }
    EM_UNARY(em_tanh_f64, double, tanh(v))
    /* backward passes from the output v = f(x) */
    EM_BINARY(em_tanh_bwd_f32, float, gv * (1.0f - v * v))
    EM_BINARY(em_tanh_bwd_f64, double, gv * (1.0 - v * v))
    EM_BINARY(em_sigmoid_bwd_f32, float, gv * v * (1.0f - v))
    EM_BINARY(em_sigmoid_bwd_f64, double, gv * v * (1.0 - v))

    EM_BINARY(em_relu_bwd_f32, float, v <= 0 ? 0.0f : gv)
    EM_BINARY(em_relu_bwd_f64, double, v <= 0 ? 0.0 : gv)
    EM_BINARY(em_leaky_bwd_f32, float, v > 0 ? gv : gv * p0)
    EM_BINARY(em_leaky_bwd_f64, double, v > 0 ? gv : gv * p0)
    EM_BINARY(em_hardtanh_bwd_f32, float, (v <= p0 || v >= p1) ? 0.0f : gv)
    EM_BINARY(em_hardtanh_bwd_f64, double, (v <= p0 || v >= p1) ? 0.0 : gv)
    EM_BINARY(em_silu_bwd_f32, float, gv * em_sigmoidf(v) * (1.0f + v * (1.0f - em_sigmoidf(v))))
    EM_BINARY(em_silu_bwd_f64, double, gv * em_sigmoid(v) * (1.0 + v * (1.0 - em_sigmoid(v))))
    /* in blocks of EM_VBLOCK: the table formula (vectorised, with gathers) where the
       whole block passes EM_GELU_OK, em_gelu_grad_f per element elsewhere */
    EM_CLONES static void em_gelu_bwd_f32_auto(const float* restrict g, const float* restrict x,
                                               float* restrict out, Py_ssize_t n,
                                               const double* restrict p) {
        (void)p;
        for (Py_ssize_t i0 = 0; i0 < n; i0 += EM_VBLOCK) {
            Py_ssize_t m = n - i0 < EM_VBLOCK ? n - i0 : EM_VBLOCK;
            int bad = 0;
            for (Py_ssize_t i = 0; i < m; i++) bad |= !EM_GELU_OK(x[i0 + i]);
            if (!bad) {
                for (Py_ssize_t i = 0; i < m; i++)
                    out[i0 + i] = g[i0 + i] * em_gelu_grad_tabf(x[i0 + i]);
            } else {
                for (Py_ssize_t i = 0; i < m; i++)
                    out[i0 + i] = g[i0 + i] * em_gelu_grad_f(x[i0 + i]);
            }
        }
    }
    static void em_gelu_bwd_f32(const float* g, const float* x, float* out, Py_ssize_t n,
                                const double* p) {
    #ifdef EMV_X86
        if (em_vmath_isa() == 2) { em_gelu_v4(g, x, out, n); return; }
        if (em_vmath_isa() == 1) { em_gelu_v3(g, x, out, n); return; }
    #endif
        em_gelu_bwd_f32_auto(g, x, out, n, p);
    }
    EM_BINARY(em_gelu_tanh_bwd_f32, float, gv * em_gelu_tanh_gradf(v))
    EM_BINARY(em_gelu_tanh_bwd_f64, double, gv * em_gelu_tanh_grad(v))
    EM_BINARY(em_gelu_bwd_f64, double, gv * (0.5 * erfc(-v * EM_R2)
              + v * EM_RS2PI * exp(-0.5 * v * v)))
    EM_BINARY(em_elu_bwd_f32, float, v > 0 ? gv * p1
              : gv * (p0 * p1 * p2) * em_expf(v * p2))
    EM_BINARY(em_elu_bwd_f64, double, v > 0 ? gv * p1 : gv * p0 * p1 * p2 * exp(v * p2))
    EM_BINARY(em_softplus_bwd_f32, float, v * p0 > p1 ? gv
              : gv * em_sigmoidf(v * p0))
    EM_BINARY(em_softplus_bwd_f64, double, v * p0 > p1 ? gv : gv * em_sigmoid(v * p0))

    #ifdef EM_POP_OPTIONS
    #pragma GCC pop_options
    #endif
    """
    void em_erf_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_erf_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_sigmoid_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_sigmoid_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_silu_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_silu_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_tanh_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_tanh_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_leaky_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_leaky_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_elu_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_elu_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_softplus_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_softplus_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_tanh_f32(const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_tanh_f64(const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_tanh_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_tanh_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_sigmoid_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_sigmoid_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_relu_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_relu_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_leaky_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_leaky_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_hardtanh_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_hardtanh_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_silu_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_silu_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_tanh_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_gelu_tanh_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_elu_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_elu_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil
    void em_softplus_bwd_f32(const float*, const float*, float*, Py_ssize_t, const double*) noexcept nogil
    void em_softplus_bwd_f64(const double*, const double*, double*, Py_ssize_t, const double*) noexcept nogil


cdef inline Py_ssize_t _part(Py_ssize_t n, Py_ssize_t nt) noexcept nogil:
    """Elements per thread when n are split over nt threads: one equal part each, a
    multiple of 64 (whole cache lines and AVX-512 vectors); 16384-element chunks left
    a 100k array split 4:3 over two threads."""
    return ((n + nt - 1) // nt + 63) // 64 * 64


cdef void _run_unary(const real* x, real* out, Py_ssize_t n, const double* p,
                     unary_f ff, unary_d fd) noexcept nogil:
    cdef Py_ssize_t c, lo, hi, per
    cdef int nc
    if n < PAR_MIN:
        if real is float:
            ff(x, out, n, p)
        else:
            fd(x, out, n, p)
        return
    nc = num_threads()
    per = _part(n, nc)
    for c in prange(nc, schedule="static", num_threads=nc):
        lo = c * per
        hi = lo + per
        if hi > n:
            hi = n
        if lo >= hi:
            continue
        if real is float:
            ff(x + lo, out + lo, hi - lo, p)
        else:
            fd(x + lo, out + lo, hi - lo, p)


cdef void _run_binary(const real* g, const real* x, real* out, Py_ssize_t n, const double* p,
                      binary_f ff, binary_d fd) noexcept nogil:
    cdef Py_ssize_t c, lo, hi, per
    cdef int nc
    if n < PAR_MIN:
        if real is float:
            ff(g, x, out, n, p)
        else:
            fd(g, x, out, n, p)
        return
    nc = num_threads()
    per = _part(n, nc)
    for c in prange(nc, schedule="static", num_threads=nc):
        lo = c * per
        hi = lo + per
        if hi > n:
            hi = n
        if lo >= hi:
            continue
        if real is float:
            ff(g + lo, x + lo, out + lo, hi - lo, p)
        else:
            fd(g + lo, x + lo, out + lo, hi - lo, p)


cdef int _unary(const real[::1] x, real[::1] out, str name, unary_f ff, unary_d fd,
                double a, double b, double c) except -1:
    """out = f(x; a, b, c) elementwise, after checking the lengths agree."""
    cdef double p[3]
    cdef Py_ssize_t n = x.shape[0]
    p[0] = a
    p[1] = b
    p[2] = c
    _check_len(x, out, name)
    if n > 0:
        with nogil:
            _run_unary(&x[0], &out[0], n, p, ff, fd)
    return 0


cdef int _binary(const real[::1] g, const real[::1] x, real[::1] out, str name, binary_f ff,
                 binary_d fd, double a, double b, double c) except -1:
    """out = f(g, x; a, b, c) elementwise (g: the incoming gradient), lengths checked."""
    cdef double p[3]
    cdef Py_ssize_t n = x.shape[0]
    p[0] = a
    p[1] = b
    p[2] = c
    _check_len(x, out, name)
    _check_len(g, out, name)
    if n > 0:
        with nogil:
            _run_binary(&g[0], &x[0], &out[0], n, p, ff, fd)
    return 0


def _check_len(a, b, name):
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{name}: arrays of {a.shape[0]} and {b.shape[0]} elements")


def erf(const real[::1] x not None, real[::1] out not None):
    """out = erf(x) (float32: act_math.h's em_erff, within 2 ulp; float64: libm)."""
    _unary(x, out, "erf", em_erf_f32, em_erf_f64, 0, 0, 0)


def gelu_forward(const real[::1] x not None, real[::1] out not None):
    """out = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))."""
    _unary(x, out, "gelu", em_gelu_f32, em_gelu_f64, 0, 0, 0)


def gelu_backward(const real[::1] g not None, const real[::1] x not None, real[::1] out not None):
    """out = g * (Phi(x) + x phi(x)): the derivative of exact GELU times g."""
    _binary(g, x, out, "gelu backward", em_gelu_bwd_f32, em_gelu_bwd_f64, 0, 0, 0)


def gelu_tanh_forward(const real[::1] x not None, real[::1] out not None):
    """out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as x sigmoid(2 (...))."""
    _unary(x, out, "gelu", em_gelu_tanh_f32, em_gelu_tanh_f64, 0, 0, 0)


def gelu_tanh_backward(const real[::1] g not None, const real[::1] x not None,
                       real[::1] out not None):
    """out = g times the derivative of the tanh GELU at x."""
    _binary(g, x, out, "gelu backward", em_gelu_tanh_bwd_f32, em_gelu_tanh_bwd_f64, 0, 0, 0)


def sigmoid_forward(const real[::1] x not None, real[::1] out not None):
    """out = 1 / (1 + exp(-x)), without overflow for either sign."""
    _unary(x, out, "sigmoid", em_sigmoid_f32, em_sigmoid_f64, 0, 0, 0)


def silu_forward(const real[::1] x not None, real[::1] out not None):
    """out = x * sigmoid(x)."""
    _unary(x, out, "silu", em_silu_f32, em_silu_f64, 0, 0, 0)


def silu_backward(const real[::1] g not None, const real[::1] x not None, real[::1] out not None):
    """out = g * s * (1 + x * (1 - s)) with s = sigmoid(x)."""
    _binary(g, x, out, "silu backward", em_silu_bwd_f32, em_silu_bwd_f64, 0, 0, 0)


def relu_backward(const real[::1] g not None, const real[::1] res not None, real[::1] out not None):
    """out = 0 where res <= 0, else g (one pass; the mask comes from the output)."""
    _binary(g, res, out, "relu backward", em_relu_bwd_f32, em_relu_bwd_f64, 0, 0, 0)


def leaky_relu_forward(const real[::1] x not None, double slope, real[::1] out not None):
    """out = x if x > 0 else slope * x."""
    _unary(x, out, "leaky_relu", em_leaky_f32, em_leaky_f64, slope, 0, 0)


def leaky_relu_backward(const real[::1] g not None, const real[::1] x not None, double slope, real[::1] out not None):
    """out = g if x > 0 else slope * g."""
    _binary(g, x, out, "leaky_relu backward", em_leaky_bwd_f32, em_leaky_bwd_f64, slope, 0, 0)


def hardtanh_backward(const real[::1] g not None, const real[::1] x not None, double lo, double hi,
                      real[::1] out not None):
    """out = 0 where x <= lo or x >= hi, else g."""
    _binary(g, x, out, "hardtanh backward", em_hardtanh_bwd_f32, em_hardtanh_bwd_f64, lo, hi, 0)


def elu_forward(const real[::1] x not None, double alpha, double scale, double input_scale,
                real[::1] out not None):
    """out = scale * x if x > 0 else scale * alpha * (exp(input_scale * x) - 1)."""
    _unary(x, out, "elu", em_elu_f32, em_elu_f64, alpha, scale, input_scale)


def elu_backward(const real[::1] g not None, const real[::1] x not None, double alpha, double scale,
                 double input_scale, real[::1] out not None):
    """Derivative of elu_forward times g."""
    _binary(g, x, out, "elu backward", em_elu_bwd_f32, em_elu_bwd_f64, alpha, scale, input_scale)


def softplus_forward(const real[::1] x not None, double beta, double threshold, real[::1] out not None):
    """out = log1p(exp(beta x)) / beta, or x where beta x > threshold."""
    _unary(x, out, "softplus", em_softplus_f32, em_softplus_f64, beta, threshold, 0)


def softplus_backward(const real[::1] g not None, const real[::1] x not None, double beta, double threshold,
                      real[::1] out not None):
    """out = g * sigmoid(beta x), or g where beta x > threshold."""
    _binary(g, x, out, "softplus backward", em_softplus_bwd_f32, em_softplus_bwd_f64,
            beta, threshold, 0)


def tanh_forward(const real[::1] x not None, real[::1] out not None):
    """out = tanh(x)."""
    _unary(x, out, "tanh", em_tanh_f32, em_tanh_f64, 0, 0, 0)


def tanh_backward(const real[::1] g not None, const real[::1] res not None, real[::1] out not None):
    """out = g * (1 - res^2), res = tanh(x)."""
    _binary(g, res, out, "tanh backward", em_tanh_bwd_f32, em_tanh_bwd_f64, 0, 0, 0)


def sigmoid_backward(const real[::1] g not None, const real[::1] res not None, real[::1] out not None):
    """out = g * res * (1 - res), res = sigmoid(x)."""
    _binary(g, res, out, "sigmoid backward", em_sigmoid_bwd_f32, em_sigmoid_bwd_f64, 0, 0, 0)
