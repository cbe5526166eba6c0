# cython: language_level=3
"""Fused softmax-family and classification-loss kernels (float32 / float64).

* softmax / log_softmax forward and backward over one axis of a C-contiguous
  array seen as (outer, C, inner): inner == 1 is the row case (contiguous
  rows, the fast path); inner > 1 works on (C, inner) blocks with the
  reductions vectorised across the inner axis.  Numerically stable: each
  row is shifted by its maximum before exp.
* cross-entropy from logits and class indices on (N, C): log_softmax and the
  negative log-likelihood in one pass per row, with class weights,
  ignore_index and label smoothing; the forward leaves each row's
  log-sum-exp (and the mean's denominator) in a float64 scratch array that
  the backward reuses, so the backward is one exp per element.
* nll_loss on (N, C) log-probabilities with the same options.

Rows are split over OpenMP threads when the work is large.  The vector
primitives (exp, max, sums) live in nn_simd.h.
"""
cimport cython
from cython.parallel cimport prange
from libc.math cimport log, NAN
from libc.stdlib cimport malloc, free
from libc.string cimport memset
from libc.stdint cimport int64_t

from ember._core.array cimport ndarray, new_empty
from ember._core.dtypes cimport T_FLOAT32, T_FLOAT64, T_INT64
from ember._core.elementwise cimport num_threads

cdef extern from "nn_simd.h" nogil:
    int em_init_cpu()
    float em_max_f32(const float* x, Py_ssize_t n)
    float em_expsum_f32(float* out, const float* x, float shift, Py_ssize_t n)
    void em_expaffine_f32(float* out, const float* x, float shift, float a, const float* b,
                          float c, Py_ssize_t n)
    void em_lsm_bwd_f32(float* out, const float* g, const float* y, float s, Py_ssize_t n)
    void em_sm_bwd_f32(float* out, const float* g, const float* y, float d, Py_ssize_t n)
    double em_sum_f32(const float* x, Py_ssize_t n)
    double em_dot_f32(const float* a, const float* b, Py_ssize_t n)
    void em_axpb_f32(float* out, const float* x, float a, float b, Py_ssize_t n)
    double em_max_f64(const double* x, Py_ssize_t n)
    double em_expsum_f64(double* out, const double* x, double shift, Py_ssize_t n)
    void em_expaffine_f64(double* out, const double* x, double shift, double a,
                          const double* b, double c, Py_ssize_t n)
    void em_lsm_bwd_f64(double* out, const double* g, const double* y, double s, Py_ssize_t n)
    void em_sm_bwd_f64(double* out, const double* g, const double* y, double d, Py_ssize_t n)
    double em_sum_f64(const double* x, Py_ssize_t n)
    double em_dot_f64(const double* a, const double* b, Py_ssize_t n)
    void em_axpb_f64(double* out, const double* x, double a, double b, Py_ssize_t n)

em_init_cpu()            # pick the AVX2 code paths once, at import

ctypedef fused real:
    float
    double

cdef enum:
    PAR_WORK = 32768        # elements below which one thread does everything
    RED_NONE = 0
    RED_MEAN = 1
    RED_SUM = 2

# ---------------------------------------------------------------- primitives

cdef inline real vmax(const real* x, Py_ssize_t n) noexcept nogil:
    if real is float:
        return em_max_f32(x, n)
    else:
        return em_max_f64(x, n)

cdef inline real vexpsum(real* out, const real* x, real shift, Py_ssize_t n) noexcept nogil:
    if real is float:
        return em_expsum_f32(out, x, shift, n)
    else:
        return em_expsum_f64(out, x, shift, n)

cdef inline void vexpaffine(real* out, const real* x, real shift, real a, const real* b, real c,
                            Py_ssize_t n) noexcept nogil:
    if real is float:
        em_expaffine_f32(out, x, shift, a, b, c, n)
    else:
        em_expaffine_f64(out, x, shift, a, b, c, n)

cdef inline void vlsm_bwd(real* out, const real* g, const real* y, real s,
                          Py_ssize_t n) noexcept nogil:
    if real is float:
        em_lsm_bwd_f32(out, g, y, s, n)
    else:
        em_lsm_bwd_f64(out, g, y, s, n)

cdef inline void vsm_bwd(real* out, const real* g, const real* y, real d,
                         Py_ssize_t n) noexcept nogil:
    if real is float:
        em_sm_bwd_f32(out, g, y, d, n)
    else:
        em_sm_bwd_f64(out, g, y, d, n)

cdef inline double vsum(const real* x, Py_ssize_t n) noexcept nogil:
    if real is float:
        return em_sum_f32(x, n)
    else:
        return em_sum_f64(x, n)

cdef inline double vdot(const real* a, const real* b, Py_ssize_t n) noexcept nogil:
    if real is float:
        return em_dot_f32(a, b, n)
    else:
        return em_dot_f64(a, b, n)

cdef inline void vaxpb(real* out, const real* x, real a, real b, Py_ssize_t n) noexcept nogil:
    if real is float:
        em_axpb_f32(out, x, a, b, n)
    else:
        em_axpb_f64(out, x, a, b, n)


cdef inline int _nt(Py_ssize_t work, Py_ssize_t items) noexcept nogil:
    """Threads for `items` independent pieces of `work` elements in all."""
    cdef int nt
    if work < PAR_WORK or items < 2:
        return 1
    nt = num_threads()
    if nt > items:
        nt = <int>items
    return nt if nt > 1 else 1


cdef int _check_float(ndarray x, str opname) except -1:
    if x.tcode != T_FLOAT32 and x.tcode != T_FLOAT64:
        raise TypeError(f"{opname}: expected a float32 or float64 array, got dtype {x.dtype}")
    if not x.c_contig:
        raise ValueError(f"{opname}: internal error: the kernel needs a C-contiguous array")
    return 0


cdef void _split(ndarray x, int axis, Py_ssize_t* outer, Py_ssize_t* C, Py_ssize_t* inner) noexcept:
    cdef int i
    outer[0] = 1
    inner[0] = 1
    for i in range(axis):
        outer[0] *= x.shape[i]
    for i in range(axis + 1, x.ndim):
        inner[0] *= x.shape[i]
    C[0] = x.shape[axis] if x.ndim else 1

# ---------------------------------------------------------------- softmax forward

cdef inline void _sm_row(const real* x, real* y, Py_ssize_t C, bint logsm) noexcept nogil:
    cdef real m = vmax(x, C)
    cdef real s
    if logsm:
        s = vexpsum(<real*>NULL, x, m, C)
        vaxpb(y, x, 1, -(m + <real>log(s)), C)
    else:
        s = vexpsum(y, x, m, C)
        vaxpb(y, y, 1 / s, 0, C)


cdef void _sm_block(const real* x, real* y, Py_ssize_t C, Py_ssize_t S, bint logsm,
                    real* buf) noexcept nogil:
    """softmax over the first axis of a contiguous (C, S) block; buf: 3*S scratch."""
    cdef real* m = buf
    cdef real* s = buf + S
    cdef real* t = buf + 2 * S
    cdef Py_ssize_t c, j
    cdef const real* xr
    cdef real* yr
    for j in range(S):
        m[j] = x[j]
        s[j] = 0
    for c in range(1, C):
        xr = x + c * S
        for j in range(S):
            if xr[j] > m[j] or xr[j] != xr[j]:
                m[j] = xr[j]
    for c in range(C):
        xr = x + c * S
        yr = t if logsm else y + c * S
        for j in range(S):
            yr[j] = xr[j] - m[j]
        vexpsum(yr, yr, 0, S)
        for j in range(S):
            s[j] += yr[j]
    if logsm:
        for j in range(S):
            m[j] = m[j] + <real>log(s[j])
        for c in range(C):
            xr = x + c * S
            yr = y + c * S
            for j in range(S):
                yr[j] = xr[j] - m[j]
    else:
        for j in range(S):
            s[j] = 1 / s[j]
        for c in range(C):
            yr = y + c * S
            for j in range(S):
                yr[j] = yr[j] * s[j]


cdef void _sm_fwd(const real* x, real* y, Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner,
                  bint logsm) noexcept nogil:
    cdef Py_ssize_t i
    cdef int nt = _nt(outer * C * inner, outer)
    cdef real* buf
    if inner == 1:
        if nt > 1:
            for i in prange(outer, num_threads=nt, schedule="static"):
                _sm_row(x + i * C, y + i * C, C, logsm)
        else:
            for i in range(outer):
                _sm_row(x + i * C, y + i * C, C, logsm)
    elif nt > 1:
        for i in prange(outer, num_threads=nt, schedule="static"):
            buf = <real*>malloc(3 * inner * sizeof(real))
            if buf != NULL:
                _sm_block(x + i * C * inner, y + i * C * inner, C, inner, logsm, buf)
                free(buf)
    else:
        buf = <real*>malloc(3 * inner * sizeof(real))
        if buf != NULL:
            for i in range(outer):
                _sm_block(x + i * C * inner, y + i * C * inner, C, inner, logsm, buf)
            free(buf)


def softmax_forward(ndarray x not None, int axis, bint log_softmax, bint inplace=False):
    """softmax (or log_softmax) of a C-contiguous float array along `axis` (>= 0); with
    `inplace`, written over x (which is returned)."""
    cdef Py_ssize_t outer, C, inner
    _check_float(x, "log_softmax" if log_softmax else "softmax")
    cdef ndarray y = x if inplace else new_empty(x.tcode, x.ndim, x.shape)
    if x.size == 0:
        return y
    _split(x, axis, &outer, &C, &inner)
    with nogil:
        if x.tcode == T_FLOAT32:
            _sm_fwd(<float*>x.data, <float*>y.data, outer, C, inner, log_softmax)
        else:
            _sm_fwd(<double*>x.data, <double*>y.data, outer, C, inner, log_softmax)
    return y

# ---------------------------------------------------------------- softmax backward

cdef inline void _smb_row(const real* g, const real* y, real* gx, Py_ssize_t C,
                          bint logsm) noexcept nogil:
    if logsm:
        vlsm_bwd(gx, g, y, <real>vsum(g, C), C)
    else:
        vsm_bwd(gx, g, y, <real>vdot(g, y, C), C)


cdef void _smb_block(const real* g, const real* y, real* gx, Py_ssize_t C, Py_ssize_t S,
                     bint logsm, real* buf) noexcept nogil:
    cdef real* d = buf
    cdef real* t = buf + S
    cdef Py_ssize_t c, j
    cdef const real* gr
    cdef const real* yr
    cdef real* o
    for j in range(S):
        d[j] = 0
    for c in range(C):
        gr = g + c * S
        yr = y + c * S
        if logsm:
            for j in range(S):
                d[j] += gr[j]
        else:
            for j in range(S):
                d[j] += gr[j] * yr[j]
    for c in range(C):
        gr = g + c * S
        yr = y + c * S
        o = gx + c * S
        if logsm:
            vexpsum(t, yr, 0, S)
            for j in range(S):
                o[j] = gr[j] - t[j] * d[j]
        else:
            for j in range(S):
                o[j] = yr[j] * (gr[j] - d[j])


cdef void _sm_bwd(const real* g, const real* y, real* gx, Py_ssize_t outer, Py_ssize_t C,
                  Py_ssize_t inner, bint logsm) noexcept nogil:
    cdef Py_ssize_t i
    cdef int nt = _nt(outer * C * inner, outer)
    cdef real* buf
    if inner == 1:
        if nt > 1:
            for i in prange(outer, num_threads=nt, schedule="static"):
                _smb_row(g + i * C, y + i * C, gx + i * C, C, logsm)
        else:
            for i in range(outer):
                _smb_row(g + i * C, y + i * C, gx + i * C, C, logsm)
    elif nt > 1:
        for i in prange(outer, num_threads=nt, schedule="static"):
            buf = <real*>malloc(2 * inner * sizeof(real))
            if buf != NULL:
                _smb_block(g + i * C * inner, y + i * C * inner, gx + i * C * inner, C, inner,
                           logsm, buf)
                free(buf)
    else:
        buf = <real*>malloc(2 * inner * sizeof(real))
        if buf != NULL:
            for i in range(outer):
                _smb_block(g + i * C * inner, y + i * C * inner, gx + i * C * inner, C, inner,
                           logsm, buf)
            free(buf)


def softmax_backward(ndarray g not None, ndarray y not None, int axis, bint log_softmax,
                     bint inplace=False):
    """Input gradient of softmax (log_softmax) from its output y and the output's gradient g
    (both C-contiguous, same shape and dtype); with `inplace`, written over g (which is
    returned)."""
    cdef Py_ssize_t outer, C, inner
    opname = "log_softmax backward" if log_softmax else "softmax backward"
    _check_float(y, opname)
    _check_float(g, opname)
    if g.tcode != y.tcode or g.size != y.size:
        raise ValueError(f"{opname}: internal error: gradient {g.dtype}{g.shape} does not match "
                         f"output {y.dtype}{y.shape}")
    cdef ndarray gx = g if inplace else new_empty(y.tcode, y.ndim, y.shape)
    if y.size == 0:
        return gx
    _split(y, axis, &outer, &C, &inner)
    with nogil:
        if y.tcode == T_FLOAT32:
            _sm_bwd(<float*>g.data, <float*>y.data, <float*>gx.data, outer, C, inner, log_softmax)
        else:
            _sm_bwd(<double*>g.data, <double*>y.data, <double*>gx.data, outer, C, inner,
                    log_softmax)
    return gx

# ---------------------------------------------------------------- targets

cdef int _check_targets(ndarray x, ndarray t, object weight, str opname) except -1:
    """(N, C) float input, (N,) int64 targets, optional (C,) weight of the input's dtype."""
    if x.ndim != 2:
        raise ValueError(f"{opname}: internal error: expected 2-d input, got {x.ndim}-d")
    _check_float(x, opname)
    if t.tcode != T_INT64 or not t.c_contig or t.ndim != 1 or t.shape[0] != x.shape[0]:
        raise ValueError(f"{opname}: internal error: expected ({x.shape[0]},) int64 targets")
    if weight is not None:
        w = <ndarray?>weight
        if w.tcode != x.tcode or not w.c_contig or w.size != x.shape[1]:
            raise ValueError(f"{opname}: internal error: weight must be a contiguous "
                             f"({x.shape[1]},) array of dtype {x.dtype}")
    return 0


def find_bad_target(ndarray t not None, Py_ssize_t C, Py_ssize_t ignore_index):
    """Index of the first int64 target outside [0, C) that is not ignore_index, or -1."""
    cdef const int64_t* tp = <int64_t*>t.data
    cdef Py_ssize_t i, n = t.size
    cdef int64_t v
    cdef Py_ssize_t bad = -1
    if t.tcode != T_INT64 or not t.c_contig:
        raise ValueError("internal error: expected contiguous int64 targets")
    with nogil:
        for i in range(n):
            v = tp[i]
            if (v < 0 or v >= C) and v != ignore_index:
                bad = i
                break
    return bad


cdef int _targets_ok(ndarray t, Py_ssize_t C, Py_ssize_t ignore_index, str opname) except -1:
    cdef Py_ssize_t bad = find_bad_target(t, C, ignore_index)
    if bad >= 0:
        v = (<int64_t*>t.data)[bad]
        raise IndexError(f"{opname}: target {v} (at position {bad}) is out of bounds for "
                         f"{C} classes (expected 0 <= target < {C}, or ignore_index="
                         f"{ignore_index})")
    return 0

# ---------------------------------------------------------------- cross entropy

cdef inline double _ce_row(const real* x, Py_ssize_t C, int64_t ti, const real* w, double W,
                           double eps, double* lse_out) noexcept nogil:
    """Loss of one row (with its target's weight folded in); stores its log-sum-exp."""
    cdef real m = vmax(x, C)
    cdef double lse = <double>m + log(<double>vexpsum(<real*>NULL, x, m, C))
    cdef double wt = <double>w[ti] if w != NULL else 1.0
    cdef double loss = wt * (lse - <double>x[ti])
    cdef double sx
    lse_out[0] = lse
    if eps != 0:
        sx = vdot(w, x, C) if w != NULL else vsum(x, C)
        loss = (1 - eps) * loss + eps / C * (W * lse - sx)
    return loss


cdef void _ce_fwd(const real* x, const int64_t* t, const real* w, real* out, double* scratch,
                  Py_ssize_t N, Py_ssize_t C, int64_t ignore, int red, double eps) noexcept nogil:
    cdef Py_ssize_t i, c
    cdef double W = 0, total = 0, denom = 0, li
    cdef int64_t ti
    cdef int nt = _nt(N * C, N)
    if w != NULL:
        for c in range(C):
            W += w[c]
    else:
        W = C
    if nt > 1:
        for i in prange(N, num_threads=nt, schedule="static"):
            ti = t[i]
            if ti == ignore:
                scratch[i] = 0
                li = 0
            else:
                li = _ce_row(x + i * C, C, ti, w, W, eps, scratch + i)
                denom += <double>w[ti] if w != NULL else 1.0
            total += li
            if red == RED_NONE:
                out[i] = <real>li
    else:
        for i in range(N):
            ti = t[i]
            if ti == ignore:
                scratch[i] = 0
                li = 0
            else:
                li = _ce_row(x + i * C, C, ti, w, W, eps, scratch + i)
                denom += <double>w[ti] if w != NULL else 1.0
            total += li
            if red == RED_NONE:
                out[i] = <real>li
    scratch[N] = denom
    if red == RED_MEAN:
        out[0] = <real>(total / denom) if denom != 0 else <real>NAN
    elif red == RED_SUM:
        out[0] = <real>total


def cross_entropy_forward(ndarray x not None, ndarray t not None, object weight, Py_ssize_t ignore_index,
                          int reduction, double label_smoothing, ndarray scratch not None):
    """Cross-entropy of (N, C) logits x against (N,) int64 class indices t.

    reduction: 0 none ((N,) result), 1 mean, 2 sum (0-d result).  `scratch`: a
    contiguous float64 array of N + 1 elements that receives each row's
    log-sum-exp and the mean's denominator (for cross_entropy_backward)."""
    _check_targets(x, t, weight, "cross_entropy")
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1]
    if scratch.tcode != T_FLOAT64 or not scratch.c_contig or scratch.size != N + 1:
        raise ValueError("cross_entropy: internal error: bad scratch array")
    _targets_ok(t, C, ignore_index, "cross_entropy")
    cdef ndarray out = new_empty(x.tcode, 1 if reduction == RED_NONE else 0, x.shape)
    cdef char* wp = NULL if weight is None else (<ndarray>weight).data
    with nogil:
        if x.tcode == T_FLOAT32:
            _ce_fwd(<float*>x.data, <int64_t*>t.data, <float*>wp, <float*>out.data,
                    <double*>scratch.data, N, C, ignore_index, reduction, label_smoothing)
        else:
            _ce_fwd(<double*>x.data, <int64_t*>t.data, <double*>wp, <double*>out.data,
                    <double*>scratch.data, N, C, ignore_index, reduction, label_smoothing)
    return out


cdef inline void _ce_brow(const real* x, real* gx, Py_ssize_t C, int64_t ti, const real* w,
                          double W, double eps, double lse, double coef) noexcept nogil:
    cdef double wt = <double>w[ti] if w != NULL else 1.0
    cdef double a = (1 - eps) * wt + eps * W / C
    # gx = coef * (a * p - (eps / C) * w_c) - coef * (1 - eps) * wt * onehot(ti)
    vexpaffine(gx, x, <real>lse, <real>(coef * a), w, <real>(-coef * eps / C), C)
    gx[ti] = gx[ti] - <real>(coef * (1 - eps) * wt)


cdef void _ce_bwd(const real* g, const real* x, const int64_t* t, const real* w, real* gx,
                  const double* scratch, Py_ssize_t N, Py_ssize_t C, int64_t ignore, int red,
                  double eps) noexcept nogil:
    cdef Py_ssize_t i, c
    cdef double W = 0, coef, g0 = 0
    cdef int64_t ti
    cdef int nt = _nt(N * C, N)
    if w != NULL:
        for c in range(C):
            W += w[c]
    else:
        W = C
    if red == RED_MEAN:
        g0 = <double>g[0] / scratch[N]
    elif red == RED_SUM:
        g0 = <double>g[0]
    if nt > 1:
        for i in prange(N, num_threads=nt, schedule="static"):
            ti = t[i]
            if ti == ignore:
                memset(gx + i * C, 0, C * sizeof(real))
            else:
                coef = <double>g[i] if red == RED_NONE else g0
                _ce_brow(x + i * C, gx + i * C, C, ti, w, W, eps, scratch[i], coef)
    else:
        for i in range(N):
            ti = t[i]
            if ti == ignore:
                memset(gx + i * C, 0, C * sizeof(real))
            else:
                coef = <double>g[i] if red == RED_NONE else g0
                _ce_brow(x + i * C, gx + i * C, C, ti, w, W, eps, scratch[i], coef)


def cross_entropy_backward(ndarray g not None, ndarray x not None, ndarray t not None, object weight,
                           Py_ssize_t ignore_index, int reduction, double label_smoothing,
                           ndarray scratch not None):
    """Gradient of cross_entropy_forward's result with respect to the logits x, given the
    result's gradient g (0-d, or (N,) contiguous for reduction none) and the scratch
    array the forward filled."""
    _check_targets(x, t, weight, "cross_entropy backward")
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1]
    _check_float(g, "cross_entropy backward")
    if g.tcode != x.tcode or g.size != (N if reduction == RED_NONE else 1):
        raise ValueError("cross_entropy backward: internal error: bad gradient")
    cdef ndarray gx = new_empty(x.tcode, 2, x.shape)
    cdef char* wp = NULL if weight is None else (<ndarray>weight).data
    if N == 0 or C == 0:
        return gx
    with nogil:
        if x.tcode == T_FLOAT32:
            _ce_bwd(<float*>g.data, <float*>x.data, <int64_t*>t.data, <float*>wp,
                    <float*>gx.data, <double*>scratch.data, N, C, ignore_index, reduction,
                    label_smoothing)
        else:
            _ce_bwd(<double*>g.data, <double*>x.data, <int64_t*>t.data, <double*>wp,
                    <double*>gx.data, <double*>scratch.data, N, C, ignore_index, reduction,
                    label_smoothing)
    return gx

# ---------------------------------------------------------------- nll

cdef void _nll_fwd(const real* x, const int64_t* t, const real* w, real* out, Py_ssize_t N,
                   Py_ssize_t C, int64_t ignore, int red) noexcept nogil:
    cdef Py_ssize_t i
    cdef double total = 0, denom = 0, wt, li
    cdef int64_t ti
    for i in range(N):
        ti = t[i]
        if ti == ignore:
            li = 0
        else:
            wt = <double>w[ti] if w != NULL else 1.0
            li = -wt * <double>x[i * C + ti]
            denom += wt
        total += li
        if red == RED_NONE:
            out[i] = <real>li
    if red == RED_MEAN:
        out[0] = <real>(total / denom) if denom != 0 else <real>NAN
    elif red == RED_SUM:
        out[0] = <real>total


def nll_forward(ndarray x not None, ndarray t not None, object weight, Py_ssize_t ignore_index, int reduction):
    """Negative log-likelihood of (N, C) log-probabilities x at (N,) int64 class indices t."""
    _check_targets(x, t, weight, "nll_loss")
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1]
    _targets_ok(t, C, ignore_index, "nll_loss")
    cdef ndarray out = new_empty(x.tcode, 1 if reduction == RED_NONE else 0, x.shape)
    cdef char* wp = NULL if weight is None else (<ndarray>weight).data
    with nogil:
        if x.tcode == T_FLOAT32:
            _nll_fwd(<float*>x.data, <int64_t*>t.data, <float*>wp, <float*>out.data, N, C,
                     ignore_index, reduction)
        else:
            _nll_fwd(<double*>x.data, <int64_t*>t.data, <double*>wp, <double*>out.data, N, C,
                     ignore_index, reduction)
    return out


cdef void _nll_bwd(const real* g, const int64_t* t, const real* w, real* gx, Py_ssize_t N,
                   Py_ssize_t C, int64_t ignore, int red) noexcept nogil:
    cdef Py_ssize_t i
    cdef double denom = 0, g0 = 0, wt
    cdef int64_t ti
    memset(gx, 0, N * C * sizeof(real))
    if red == RED_MEAN:
        for i in range(N):
            ti = t[i]
            if ti != ignore:
                denom += <double>w[ti] if w != NULL else 1.0
        g0 = <double>g[0] / denom
    elif red == RED_SUM:
        g0 = <double>g[0]
    for i in range(N):
        ti = t[i]
        if ti != ignore:
            wt = <double>w[ti] if w != NULL else 1.0
            gx[i * C + ti] = <real>(-wt * (<double>g[i] if red == RED_NONE else g0))


def nll_backward(ndarray g not None, ndarray x not None, ndarray t not None, object weight, Py_ssize_t ignore_index,
                 int reduction):
    """Gradient of nll_forward's result with respect to x (x only gives shape and dtype)."""
    _check_targets(x, t, weight, "nll_loss backward")
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1]
    _check_float(g, "nll_loss backward")
    if g.tcode != x.tcode or g.size != (N if reduction == RED_NONE else 1):
        raise ValueError("nll_loss backward: internal error: bad gradient")
    cdef ndarray gx = new_empty(x.tcode, 2, x.shape)
    cdef char* wp = NULL if weight is None else (<ndarray>weight).data
    if N == 0 or C == 0:
        return gx
    with nogil:
        if x.tcode == T_FLOAT32:
            _nll_bwd(<float*>g.data, <int64_t*>t.data, <float*>wp, <float*>gx.data, N, C,
                     ignore_index, reduction)
        else:
            _nll_bwd(<double*>g.data, <int64_t*>t.data, <double*>wp, <double*>gx.data, N, C,
                     ignore_index, reduction)
    return gx


def smoothed_targets(ndarray x not None, ndarray t not None, object weight, Py_ssize_t ignore_index,
                     double label_smoothing):
    """The (N, C) matrix Q with loss_i = -sum_c Q[i, c] * log_softmax(x)[i, c] (per-row
    cross-entropy with weights and label smoothing; rows of ignored targets are 0), and
    the (N,) weight of each row's target (0 where ignored).  Used by the
    differentiable (double-backward) form of cross_entropy and nll_loss."""
    _check_targets(x, t, weight, "cross_entropy")
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], i, c
    cdef ndarray Q = new_empty(T_FLOAT64, 2, x.shape)
    cdef ndarray rw = new_empty(T_FLOAT64, 1, x.shape)
    cdef double* q = <double*>Q.data
    cdef double* r = <double*>rw.data
    cdef int64_t ti
    cdef double wt, eps = label_smoothing, wc
    w = None if weight is None else weight.astype("float64")
    cdef const double* wp = NULL if w is None else <double*>(<ndarray>w).data
    for i in range(N):
        ti = (<int64_t*>t.data)[i]
        if ti == ignore_index:
            r[i] = 0
            for c in range(C):
                q[i * C + c] = 0
            continue
        wt = wp[ti] if wp != NULL else 1.0
        r[i] = wt
        for c in range(C):
            wc = wp[c] if wp != NULL else 1.0
            q[i * C + c] = eps / C * wc
        q[i * C + ti] += (1 - eps) * wt
    return Q, rw


def contig(ndarray x not None):
    """x itself when C-contiguous, else a C-contiguous copy."""
    return x if x.c_contig else x.copy()


def new_scratch(Py_ssize_t n):
    """An uninitialised float64 array of n elements (the losses' per-row scratch)."""
    cdef Py_ssize_t shape[1]
    shape[0] = n
    return new_empty(T_FLOAT64, 1, shape)


def fast_nc_ok(x, t, weight):
    """Whether (x, t, weight) can go straight to the (N, C) kernels: x a C-contiguous
    2-d float32/float64 array, t a contiguous (N,) int64 array, weight None or a
    contiguous (C,) array of x's dtype that does not require grad."""
    cdef ndarray a, b, w
    if not isinstance(x, ndarray) or not isinstance(t, ndarray):
        return False
    a = <ndarray>x
    b = <ndarray>t
    if a.ndim != 2 or not a.c_contig or (a.tcode != T_FLOAT32 and a.tcode != T_FLOAT64):
        return False
    if b.ndim != 1 or not b.c_contig or b.tcode != T_INT64 or b.shape[0] != a.shape[0]:
        return False
    if weight is None:
        return True
    if not isinstance(weight, ndarray):
        return False
    w = <ndarray>weight
    return (w.ndim == 1 and w.c_contig and w.tcode == a.tcode and w.shape[0] == a.shape[1]
            and not w._requires_grad)
