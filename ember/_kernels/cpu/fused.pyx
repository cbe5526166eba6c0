# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Fused bias + ReLU kernels for the layers (float32 / float64, in one pass each).

``y`` is a C-contiguous block seen as (N, C, L): the bias runs along C (L = 1 for a
linear layer's (rows, features) output, L = the spatial size for a convolution's
(N, C, H, W) output).

* ``bias_relu(y, b)``:            y = max(y + b[c], 0) in place (b may be None);
  NaN stays NaN, as in ``maximum``.
* ``relu_grad_bias(g, y, gx, gb)``: gx = g where y > 0 else 0 (y the ReLU's output),
  and, when gb is given, gb[c] = the sum of gx over N and L, in the same pass.

Work is split over channels with OpenMP above a size threshold; each channel
belongs to one thread, so the bias sums need no reduction across threads and
are accumulated in double precision.
"""
cimport cython
from cython.parallel cimport prange
from ember._core.elementwise cimport num_threads

ctypedef fused real:
    float
    double

# Below this many elements one thread does the work.
cdef Py_ssize_t PAR_MIN = 32768


cdef inline void _bias_relu_chan(real* y, const real* b, Py_ssize_t N, Py_ssize_t C,
                                 Py_ssize_t L, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t n, l
    cdef real bv = 0, v
    cdef real* row
    if b != NULL:
        bv = b[c]
    for n in range(N):
        row = y + (n * C + c) * L
        for l in range(L):
            v = row[l] + bv
            row[l] = 0 if v < 0 else v


cdef inline void _bias_relu_rows(real* y, const real* b, Py_ssize_t C,
                                 Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef Py_ssize_t r, c
    cdef real v
    cdef real* row
    for r in range(r0, r1):
        row = y + r * C
        if b != NULL:
            for c in range(C):
                v = row[c] + b[c]
                row[c] = 0 if v < 0 else v
        else:
            for c in range(C):
                v = row[c]
                row[c] = 0 if v < 0 else v


cdef void _bias_relu(real* y, const real* b, Py_ssize_t N, Py_ssize_t C,
                     Py_ssize_t L) noexcept nogil:
    cdef Py_ssize_t c, t, nt = 1, chunk
    if N * C * L >= PAR_MIN:
        nt = num_threads()
    if L == 1:                      # (rows, features): split the rows
        chunk = (N + nt - 1) // nt if nt > 0 else N
        if nt > 1 and N > 1:
            for t in prange(nt, schedule="static", num_threads=nt):
                _bias_relu_rows(y, b, C, t * chunk, min(N, (t + 1) * chunk))
        else:
            _bias_relu_rows(y, b, C, 0, N)
        return
    if nt > 1 and C > 1:
        for c in prange(C, schedule="static", num_threads=nt):
            _bias_relu_chan(y, b, N, C, L, c)
    else:
        for c in range(C):
            _bias_relu_chan(y, b, N, C, L, c)


cdef inline void _grad_chan(const real* g, const real* y, real* gx, real* gb, Py_ssize_t N,
                            Py_ssize_t C, Py_ssize_t L, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t n, l, o, k
    cdef double s = 0
    cdef real v, part
    cdef real lane[16]          # 16 independent partial sums: the loop vectorises
    for n in range(N):
        o = (n * C + c) * L
        for k in range(16):
            lane[k] = 0
        l = 0
        while l + 16 <= L:
            for k in range(16):     # g loaded unconditionally: a blend, no branch
                v = g[o + l + k]
                v = 0 if y[o + l + k] <= 0 else v      # NaN in y passes g, as relu's backward
                gx[o + l + k] = v
                lane[k] = lane[k] + v
            l += 16
        part = 0
        while l < L:
            v = g[o + l]
            v = 0 if y[o + l] <= 0 else v
            gx[o + l] = v
            part = part + v
            l += 1
        for k in range(16):
            part = part + lane[k]
        s += part
    if gb != NULL:
        gb[c] = <real>s


cdef void _grad_rows(const real* g, const real* y, real* gx, double* acc, Py_ssize_t C,
                     Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef Py_ssize_t r, c, o
    cdef real v
    for r in range(r0, r1):
        o = r * C
        if acc != NULL:
            for c in range(C):
                v = g[o + c]
                v = 0 if y[o + c] <= 0 else v
                gx[o + c] = v
                acc[c] += v
        else:
            for c in range(C):
                v = g[o + c]
                gx[o + c] = 0 if y[o + c] <= 0 else v


def bias_relu(real[:, :, ::1] y not None, const real[::1] b):
    """y (N, C, L) = max(y + b[c], 0) in place; `b` (C,) or None."""
    cdef Py_ssize_t N = y.shape[0], C = y.shape[1], L = y.shape[2]
    if b is not None and b.shape[0] != C:
        raise ValueError(f"bias_relu: bias has {b.shape[0]} entries, the output {C} channels")
    if N * C * L == 0:
        return
    cdef const real* bp = NULL
    if b is not None:
        bp = &b[0]
    with nogil:
        _bias_relu(&y[0, 0, 0], bp, N, C, L)


def relu_grad_bias(const real[:, :, ::1] g not None, const real[:, :, ::1] y not None,
                   real[:, :, ::1] gx not None, real[::1] gb):
    """gx = g where y > 0 (or y is NaN) else 0, all (N, C, L); gb (C,) = gx summed over
    N and L (skipped when gb is None)."""
    cdef Py_ssize_t N = g.shape[0], C = g.shape[1], L = g.shape[2], c, nt = 1
    if y.shape[0] != N or y.shape[1] != C or y.shape[2] != L or gx.shape[0] != N \
            or gx.shape[1] != C or gx.shape[2] != L:
        raise ValueError("relu_grad_bias: g, y and gx must have one shape")
    if gb is not None and gb.shape[0] != C:
        raise ValueError(f"relu_grad_bias: gb has {gb.shape[0]} entries, expected {C}")
    cdef real* gbp = NULL
    if gb is not None and C > 0:
        gbp = &gb[0]
        if N * L == 0:
            for c in range(C):
                gbp[c] = 0
    if N * C * L == 0:
        return
    cdef const real* gp = &g[0, 0, 0]
    cdef const real* yp = &y[0, 0, 0]
    cdef real* gxp = &gx[0, 0, 0]
    cdef double[::1] acc
    cdef double* accp = NULL
    if N * C * L >= PAR_MIN:
        nt = num_threads()
    if L == 1:
        if gbp != NULL:
            import numpy as np
            acc = np.zeros(C, np.float64)
            accp = &acc[0]
        # rows in order on one thread (the sums stay deterministic); a linear layer's
        # output is small next to the GEMMs around it
        with nogil:
            _grad_rows(gp, yp, gxp, accp, C, 0, N)
        if gbp != NULL:
            for c in range(C):
                gbp[c] = <real>accp[c]
        return
    with nogil:
        if nt > 1 and C > 1:
            for c in prange(C, schedule="static", num_threads=nt):
                _grad_chan(gp, yp, gxp, gbp, N, C, L, c)
        else:
            for c in range(C):
                _grad_chan(gp, yp, gxp, gbp, N, C, L, c)
