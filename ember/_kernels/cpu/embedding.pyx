# cython: language_level=3
"""CPU kernels for ember.nn's embedding (row gather / scatter-add) and the error function.

All functions take C-contiguous NumPy views (``numpy_view`` of ember arrays) and write
into preallocated outputs; they release the GIL and split large work over threads.
``erf`` lives here because nn's GELU and ``init.trunc_normal_`` need it and no other
module provides a vectorised one (it can move to a special-functions module later).
"""
cimport cython
from cython.parallel cimport prange
from libc.string cimport memcpy, memset
from libc.stdint cimport int32_t, int64_t
from openmp cimport omp_get_max_threads
from libc.math cimport erf as c_erf, erff as c_erff, exp as c_exp, expf as c_expf
from libc.math cimport expm1 as expm1_, log1p as log1p_

ctypedef fused real:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t

cdef Py_ssize_t PAR_MIN = 32768       # elements below which threads cost more than they save


cdef inline int _nthreads(Py_ssize_t n) noexcept nogil:
    return 1 if n < PAR_MIN else omp_get_max_threads()


def gather_rows(const real[:, ::1] weight, const index_t[::1] idx, real[:, ::1] out):
    """out[i] = weight[idx[i]].  Returns -1, or the position of the first index out of
    range [0, weight.shape[0]) (nothing is written then)."""
    cdef Py_ssize_t n = idx.shape[0], D = weight.shape[1], V = weight.shape[0]
    cdef Py_ssize_t i, bad = -1
    cdef int64_t k
    cdef size_t row_bytes = D * sizeof(real)
    with nogil:
        for i in range(n):
            k = idx[i]
            if k < 0 or k >= V:
                bad = i
                break
        if bad < 0 and D > 0:
            if n * D >= PAR_MIN:
                for i in prange(n, schedule="static"):
                    memcpy(&out[i, 0], &weight[idx[i], 0], row_bytes)
            else:
                for i in range(n):
                    memcpy(&out[i, 0], &weight[idx[i], 0], row_bytes)
    return bad


def scatter_add_rows(const real[:, ::1] grad, const index_t[::1] idx, real[:, ::1] out,
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
            for b in prange(nblocks, schedule="static"):
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


def count_rows(const index_t[::1] idx, int64_t[::1] counts):
    """counts[idx[i]] += 1 (indices already validated)."""
    cdef Py_ssize_t i, n = idx.shape[0]
    with nogil:
        for i in range(n):
            counts[idx[i]] += 1


def erf(const real[::1] x, real[::1] out):
    """out = erf(x), elementwise (libm's erf / erff)."""
    cdef Py_ssize_t i, n = x.shape[0]
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                if real is float:
                    out[i] = c_erff(x[i])
                else:
                    out[i] = c_erf(x[i])
        else:
            for i in range(n):
                if real is float:
                    out[i] = c_erff(x[i])
                else:
                    out[i] = c_erf(x[i])


def gelu_forward(const real[::1] x, real[::1] out):
    """out = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef real v
    cdef double r2 = 0.70710678118654752440
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                v = x[i]
                if real is float:
                    out[i] = 0.5 * v * (1.0 + c_erff(v * <float>r2))
                else:
                    out[i] = 0.5 * v * (1.0 + c_erf(v * r2))
        else:
            for i in range(n):
                v = x[i]
                if real is float:
                    out[i] = 0.5 * v * (1.0 + c_erff(v * <float>r2))
                else:
                    out[i] = 0.5 * v * (1.0 + c_erf(v * r2))


def gelu_backward(const real[::1] g, const real[::1] x, real[::1] out):
    """out = g * (Phi(x) + x phi(x)): the derivative of exact GELU times g."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef real v, cdf, pdf
    cdef double r2 = 0.70710678118654752440
    cdef double rs2pi = 0.39894228040143267794      # 1 / sqrt(2 pi)
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                v = x[i]
                if real is float:
                    cdf = 0.5 * (1.0 + c_erff(v * <float>r2))
                    pdf = <float>rs2pi * c_expf(-0.5 * v * v)
                else:
                    cdf = 0.5 * (1.0 + c_erf(v * r2))
                    pdf = rs2pi * c_exp(-0.5 * v * v)
                out[i] = g[i] * (cdf + v * pdf)
        else:
            for i in range(n):
                v = x[i]
                if real is float:
                    cdf = 0.5 * (1.0 + c_erff(v * <float>r2))
                    pdf = <float>rs2pi * c_expf(-0.5 * v * v)
                else:
                    cdf = 0.5 * (1.0 + c_erf(v * r2))
                    pdf = rs2pi * c_exp(-0.5 * v * v)
                out[i] = g[i] * (cdf + v * pdf)


cdef inline double _sigmoid_d(double v) noexcept nogil:
    cdef double e
    if v >= 0:
        return 1.0 / (1.0 + c_exp(-v))
    e = c_exp(v)
    return e / (1.0 + e)


cdef inline float _sigmoid_f(float v) noexcept nogil:
    cdef float e
    if v >= 0:
        return 1.0 / (1.0 + c_expf(-v))
    e = c_expf(v)
    return e / (1.0 + e)


def sigmoid_forward(const real[::1] x, real[::1] out):
    """out = 1 / (1 + exp(-x)), computed without overflow for either sign."""
    cdef Py_ssize_t i, n = x.shape[0]
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                if real is float:
                    out[i] = _sigmoid_f(x[i])
                else:
                    out[i] = _sigmoid_d(x[i])
        else:
            for i in range(n):
                if real is float:
                    out[i] = _sigmoid_f(x[i])
                else:
                    out[i] = _sigmoid_d(x[i])


def silu_forward(const real[::1] x, real[::1] out):
    """out = x * sigmoid(x)."""
    cdef Py_ssize_t i, n = x.shape[0]
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                if real is float:
                    out[i] = x[i] * _sigmoid_f(x[i])
                else:
                    out[i] = x[i] * _sigmoid_d(x[i])
        else:
            for i in range(n):
                if real is float:
                    out[i] = x[i] * _sigmoid_f(x[i])
                else:
                    out[i] = x[i] * _sigmoid_d(x[i])


def silu_backward(const real[::1] g, const real[::1] x, real[::1] out):
    """out = g * s * (1 + x * (1 - s)) with s = sigmoid(x)."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef real s
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                if real is float:
                    s = _sigmoid_f(x[i])
                else:
                    s = _sigmoid_d(x[i])
                out[i] = g[i] * s * (1 + x[i] * (1 - s))
        else:
            for i in range(n):
                if real is float:
                    s = _sigmoid_f(x[i])
                else:
                    s = _sigmoid_d(x[i])
                out[i] = g[i] * s * (1 + x[i] * (1 - s))


def relu_backward(const real[::1] g, const real[::1] res, real[::1] out):
    """out = g where res > 0, else 0 (one pass; the mask comes from the output)."""
    cdef Py_ssize_t i, n = g.shape[0]
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                out[i] = g[i] if res[i] > 0 else 0
        else:
            for i in range(n):
                out[i] = g[i] if res[i] > 0 else 0


def leaky_relu_forward(const real[::1] x, double slope, real[::1] out):
    """out = x if x > 0 else slope * x."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef real s = <real>slope
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                out[i] = x[i] if x[i] > 0 else x[i] * s
        else:
            for i in range(n):
                out[i] = x[i] if x[i] > 0 else x[i] * s


def leaky_relu_backward(const real[::1] g, const real[::1] x, double slope, real[::1] out):
    """out = g if x > 0 else slope * g."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef real s = <real>slope
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                out[i] = g[i] if x[i] > 0 else g[i] * s
        else:
            for i in range(n):
                out[i] = g[i] if x[i] > 0 else g[i] * s


def hardtanh_backward(const real[::1] g, const real[::1] x, double lo, double hi,
                      real[::1] out):
    """out = g where lo < x < hi, else 0."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef real l = <real>lo, h = <real>hi
    with nogil:
        if n >= PAR_MIN:
            for i in prange(n, schedule="static"):
                out[i] = g[i] if (x[i] > l and x[i] < h) else 0
        else:
            for i in range(n):
                out[i] = g[i] if (x[i] > l and x[i] < h) else 0


def elu_forward(const real[::1] x, double alpha, double scale, double input_scale,
                real[::1] out):
    """out = scale * x if x > 0 else scale * alpha * (exp(input_scale * x) - 1)."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef double v
    with nogil:
        for i in prange(n, schedule="static", num_threads=_nthreads(n)):
            v = x[i]
            if v > 0:
                out[i] = <real>(scale * v)
            else:
                out[i] = <real>(scale * alpha * expm1_(v * input_scale))


def elu_backward(const real[::1] g, const real[::1] x, double alpha, double scale,
                 double input_scale, real[::1] out):
    """Derivative of elu_forward times g."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef double v
    with nogil:
        for i in prange(n, schedule="static", num_threads=_nthreads(n)):
            v = x[i]
            if v > 0:
                out[i] = <real>(g[i] * scale)
            else:
                out[i] = <real>(g[i] * scale * alpha * input_scale * c_exp(v * input_scale))


def softplus_forward(const real[::1] x, double beta, double threshold, real[::1] out):
    """out = log1p(exp(beta x)) / beta, or x where beta x > threshold."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef double z
    with nogil:
        for i in prange(n, schedule="static", num_threads=_nthreads(n)):
            z = x[i] * beta
            if z > threshold:
                out[i] = x[i]
            elif z > 0:
                out[i] = <real>((z + log1p_(c_exp(-z))) / beta)
            else:
                out[i] = <real>(log1p_(c_exp(z)) / beta)


def softplus_backward(const real[::1] g, const real[::1] x, double beta, double threshold,
                      real[::1] out):
    """out = g * sigmoid(beta x), or g where beta x > threshold."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef double z
    with nogil:
        for i in prange(n, schedule="static", num_threads=_nthreads(n)):
            z = x[i] * beta
            if z > threshold:
                out[i] = g[i]
            else:
                out[i] = <real>(g[i] * _sigmoid_d(z))
