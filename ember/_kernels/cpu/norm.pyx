# cython: language_level=3
"""Normalization kernels (float32 / float64): layer norm, batch norm, group norm.

Statistics accumulate in float64: float32 data in one pass (sum and sum of
squares in float64, where cancellation is harmless), float64 data in two
passes (mean, then squared deviations).  Saved statistics (mean and 1/std)
are float64 arrays that the backward kernels reuse.

Layouts (all C-contiguous):
* layer norm: x as (M, N) rows, N the normalized size, weight/bias (N,);
* batch norm: x as (N, C, S) (S = product of the spatial sizes, 1 for 2-d
  input), statistics per channel over N and S;
* group norm: x as (N, C, S), statistics per (sample, group) over C/G*S.
Work is split over OpenMP threads (rows, or (sample, channel) runs) when
large.  The vector primitives live in nn_simd.h.
"""
cimport cython
from cython.parallel cimport prange, threadid
from libc.math cimport sqrt
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memset

from ember._core.array cimport ndarray, new_empty
from ember._core.dtypes cimport T_FLOAT32, T_FLOAT64
from ember._core.elementwise cimport num_threads

cdef extern from "nn_simd.h" nogil:
    void em_meanvar_f32(const float* x, Py_ssize_t n, double* mean, double* var)
    void em_facc_wb_f32(float* acc, float* acc2, const float* g, const float* x, float a,
                        float b, Py_ssize_t n)
    int em_init_cpu()
    double em_sum_f32(const float* x, Py_ssize_t n)
    double em_sqdev_f32(const float* x, double m, Py_ssize_t n)
    void em_sum_dot_f32(const float* a, const float* b, Py_ssize_t n, double* sa, double* sab)
    void em_sum_dot_w_f32(const float* g, const float* w, const float* x, Py_ssize_t n,
                          double* s1, double* s2)
    void em_axpb_f32(float* out, const float* x, float a, float b, Py_ssize_t n)
    void em_caxpb_f32(float* out, const float* x, float m, float a, float b, Py_ssize_t n)
    void em_affine_wb_f32(float* out, const float* x, float a, float m, const float* w,
                          const float* c, Py_ssize_t n)
    void em_gxwb_f32(float* out, const float* g, const float* w, const float* x, float a,
                     float b, float c, float m, Py_ssize_t n)
    void em_gxb_f32(float* out, const float* g, const float* x, float a, float b, float c,
                    Py_ssize_t n)
    void em_gxb_vec_f32(float* out, const float* g, const float* x, const float* a,
                        const float* b, const float* c, Py_ssize_t n)
    void em_acc_wb_f32(double* acc, double* acc2, const float* g, const float* x, double a,
                       double b, Py_ssize_t n)
    void em_acc_sumsq_f32(double* acc, double* acc2, const float* x, Py_ssize_t n)
    double em_sum_f64(const double* x, Py_ssize_t n)
    double em_sqdev_f64(const double* x, double m, Py_ssize_t n)
    void em_sum_dot_f64(const double* a, const double* b, Py_ssize_t n, double* sa, double* sab)
    void em_sum_dot_w_f64(const double* g, const double* w, const double* x, Py_ssize_t n,
                          double* s1, double* s2)
    void em_axpb_f64(double* out, const double* x, double a, double b, Py_ssize_t n)
    void em_caxpb_f64(double* out, const double* x, double m, double a, double b, Py_ssize_t n)
    void em_affine_wb_f64(double* out, const double* x, double a, double m, const double* w,
                          const double* c, Py_ssize_t n)
    void em_gxwb_f64(double* out, const double* g, const double* w, const double* x, double a,
                     double b, double c, double m, Py_ssize_t n)
    void em_gxb_f64(double* out, const double* g, const double* x, double a, double b, double c,
                    Py_ssize_t n)
    void em_gxb_vec_f64(double* out, const double* g, const double* x, const double* a,
                        const double* b, const double* c, Py_ssize_t n)
    void em_acc_wb_f64(double* acc, double* acc2, const double* g, const double* x, double a,
                       double b, Py_ssize_t n)
    void em_acc_sumsq_f64(double* acc, double* acc2, const double* x, Py_ssize_t n)
    void em_acc_sqdev_f64(double* acc, const double* x, const double* m, Py_ssize_t n)

cdef extern from "ln_simd.h" nogil:
    int em_use_avx2
    void emln_fwd_row_avx2(const float* x, const float* r, float* z, const float* w,
                           const float* b, float* y, Py_ssize_t n, double eps, double* mean,
                           double* rstd)
    void emln_bwd_row_avx2(const float* g, const float* x, const float* w, float* gx,
                           float* acc, float* acc2, Py_ssize_t n, double mean, double rstd)

em_init_cpu()            # pick the AVX2 code paths once, at import
cdef bint _ln_rows = em_use_avx2 != 0    # the fused AVX2 layer-norm rows of ln_simd.h

ctypedef fused real:
    float
    double

cdef enum:
    PAR_WORK = 32768        # elements below which one thread does everything

# ---------------------------------------------------------------- primitives

cdef inline double vsum(const real* x, Py_ssize_t n) noexcept nogil:
    if real is float:
        return em_sum_f32(x, n)
    else:
        return em_sum_f64(x, n)

cdef inline double vsqdev(const real* x, double m, Py_ssize_t n) noexcept nogil:
    if real is float:
        return em_sqdev_f32(x, m, n)
    else:
        return em_sqdev_f64(x, m, n)

cdef inline void vsum_dot(const real* a, const real* b, Py_ssize_t n, double* sa,
                          double* sab) noexcept nogil:
    if real is float:
        em_sum_dot_f32(a, b, n, sa, sab)
    else:
        em_sum_dot_f64(a, b, n, sa, sab)

cdef inline void vsum_dot_w(const real* g, const real* w, const real* x, Py_ssize_t n,
                            double* s1, double* s2) noexcept nogil:
    if real is float:
        em_sum_dot_w_f32(g, w, x, n, s1, s2)
    else:
        em_sum_dot_w_f64(g, w, x, n, s1, s2)

cdef inline void vaxpb(real* out, const real* x, real a, real b, Py_ssize_t n) noexcept nogil:
    if real is float:
        em_axpb_f32(out, x, a, b, n)
    else:
        em_axpb_f64(out, x, a, b, n)

cdef inline void vcaxpb(real* out, const real* x, real m, real a, real b,
                        Py_ssize_t n) noexcept nogil:
    """out = (x - m) * a + b"""
    if real is float:
        em_caxpb_f32(out, x, m, a, b, n)
    else:
        em_caxpb_f64(out, x, m, a, b, n)

cdef inline void vaffine_wb(real* out, const real* x, real a, real m, const real* w, const real* c,
                            Py_ssize_t n) noexcept nogil:
    """out = ((x - m) * a) * w + c (w, c may be NULL: 1, 0)"""
    if real is float:
        em_affine_wb_f32(out, x, a, m, w, c, n)
    else:
        em_affine_wb_f64(out, x, a, m, w, c, n)

cdef inline void vgxwb(real* out, const real* g, const real* w, const real* x, real a, real b,
                       real c, real m, Py_ssize_t n) noexcept nogil:
    """out = ((g * w - c) - (x - m) * b) * a"""
    if real is float:
        em_gxwb_f32(out, g, w, x, a, b, c, m, n)
    else:
        em_gxwb_f64(out, g, w, x, a, b, c, m, n)

cdef inline void vgxb(real* out, const real* g, const real* x, real a, real b, real c,
                      Py_ssize_t n) noexcept nogil:
    if real is float:
        em_gxb_f32(out, g, x, a, b, c, n)
    else:
        em_gxb_f64(out, g, x, a, b, c, n)

cdef inline void vgxb_vec(real* out, const real* g, const real* x, const real* a, const real* b,
                          const real* c, Py_ssize_t n) noexcept nogil:
    if real is float:
        em_gxb_vec_f32(out, g, x, a, b, c, n)
    else:
        em_gxb_vec_f64(out, g, x, a, b, c, n)

cdef inline void vacc_wb(double* acc, double* acc2, const real* g, const real* x, double a,
                         double m, Py_ssize_t n) noexcept nogil:
    if real is float:
        em_acc_wb_f32(acc, acc2, g, x, a, m, n)
    else:
        em_acc_wb_f64(acc, acc2, g, x, a, m, n)

cdef inline void vacc_sumsq(double* acc, double* acc2, const real* x, Py_ssize_t n) noexcept nogil:
    if real is float:
        em_acc_sumsq_f32(acc, acc2, x, n)
    else:
        em_acc_sumsq_f64(acc, acc2, x, n)


cdef inline void _row_stats(const real* x, Py_ssize_t n, double* mean, double* var) noexcept nogil:
    """Mean and (biased) variance of a contiguous run: two passes, float64 totals."""
    cdef double m
    if real is float:
        em_meanvar_f32(x, n, mean, var)
    else:
        m = vsum(x, n) / n if n else 0.0
        mean[0] = m
        var[0] = vsqdev(x, m, n) / n if n else 0.0


cdef inline void vfacc_wb(real* acc, real* acc2, const real* g, const real* x, real a, real m,
                          Py_ssize_t n) noexcept nogil:
    """acc += g * ((x - m) * a); acc2 += g, accumulators of the data's type."""
    if real is float:
        em_facc_wb_f32(acc, acc2, g, x, a, m, n)
    else:
        em_acc_wb_f64(acc, acc2, g, x, a, m, n)


cdef inline int _nt(Py_ssize_t work, Py_ssize_t items) noexcept nogil:
    cdef int nt
    if work < PAR_WORK or items < 2:
        return 1
    nt = num_threads()
    if nt > items:
        nt = <int>items
    return nt if nt > 1 else 1


cdef int _check(ndarray x, str opname) except -1:
    if x.tcode != T_FLOAT32 and x.tcode != T_FLOAT64:
        raise TypeError(f"{opname}: expected a float32 or float64 array, got dtype {x.dtype}")
    if not x.c_contig:
        raise ValueError(f"{opname}: internal error: the kernel needs C-contiguous arrays")
    return 0


cdef char* _opt(object a, ndarray like, Py_ssize_t n, str opname) except? NULL:
    """Data pointer of an optional (n,) parameter array of like's dtype (NULL for None)."""
    cdef ndarray w
    if a is None:
        return NULL
    w = <ndarray?>a
    if w.tcode != like.tcode or not w.c_contig or w.size != n:
        raise ValueError(f"{opname}: internal error: expected a contiguous ({n},) array of "
                         f"dtype {like.dtype}, got {w.dtype} of size {w.size}")
    return w.data


cdef double* _stats(ndarray s, Py_ssize_t n, str opname) except NULL:
    if s.tcode != T_FLOAT64 or not s.c_contig or s.size != n:
        raise ValueError(f"{opname}: internal error: bad statistics array")
    return <double*>s.data


cdef ndarray _vec(int tcode, Py_ssize_t n):
    cdef Py_ssize_t shape[1]
    shape[0] = n
    return new_empty(tcode, 1, shape)


def new_stats(Py_ssize_t rows, Py_ssize_t n, like=None):
    """An uninitialised (rows, n) float64 array for saved statistics (`like`, the input,
    is read by the GPU twin only: its device and dtype)."""
    cdef Py_ssize_t shape[2]
    shape[0] = rows
    shape[1] = n
    return new_empty(T_FLOAT64, 2, shape)

# ================================================================ layer norm

cdef inline void _ln_frow(const real* x, const real* w, const real* b, real* y, double* st,
                          Py_ssize_t i, Py_ssize_t M, Py_ssize_t N, double eps) noexcept nogil:
    cdef double mean, var, rstd
    if real is float:
        if _ln_rows:
            emln_fwd_row_avx2(x + i * N, NULL, NULL, w, b, y + i * N, N, eps, st + i, st + M + i)
            return
    _row_stats(x + i * N, N, &mean, &var)
    rstd = 1.0 / sqrt(var + eps)
    st[i] = mean
    st[M + i] = rstd
    # centred first ((x - mean) * rstd): a row of one element gives exactly b
    vaffine_wb(y + i * N, x + i * N, <real>rstd, <real>mean, w, b, N)


cdef void _ln_fwd(const real* x, const real* w, const real* b, real* y, double* st,
                  Py_ssize_t M, Py_ssize_t N, double eps) noexcept nogil:
    cdef Py_ssize_t i
    cdef int nt = _nt(M * N, M)
    if nt > 1:
        for i in prange(M, num_threads=nt, schedule="static"):
            _ln_frow(x, w, b, y, st, i, M, N, eps)
    else:
        for i in range(M):
            _ln_frow(x, w, b, y, st, i, M, N, eps)


def layer_norm_forward(ndarray x not None, object weight, object bias, double eps, ndarray stats not None):
    """Layer norm over the last axis of x seen as (M, N) rows (N = x.shape[-1] after the
    caller's reshape).  Fills stats ((2, M) float64: mean, 1/std) and returns y."""
    _check(x, "layer_norm")
    cdef Py_ssize_t N = x.shape[x.ndim - 1] if x.ndim else 1
    cdef Py_ssize_t M = x.size // N if N else 0
    cdef char* wp = _opt(weight, x, N, "layer_norm")
    cdef char* bp = _opt(bias, x, N, "layer_norm")
    cdef double* st = _stats(stats, 2 * M, "layer_norm")
    cdef ndarray y = new_empty(x.tcode, x.ndim, x.shape)
    if x.size == 0:
        return y
    with nogil:
        if x.tcode == T_FLOAT32:
            _ln_fwd(<float*>x.data, <float*>wp, <float*>bp, <float*>y.data, st, M, N, eps)
        else:
            _ln_fwd(<double*>x.data, <double*>wp, <double*>bp, <double*>y.data, st, M, N, eps)
    return y


cdef inline void _aln_frow(const real* x, const real* r, real* z, const real* w, const real* b,
                           real* y, double* st, Py_ssize_t i, Py_ssize_t M, Py_ssize_t N,
                           double eps) noexcept nogil:
    cdef Py_ssize_t j
    cdef real* zi = z + i * N
    if real is float:
        if _ln_rows:
            emln_fwd_row_avx2(x + i * N, r + i * N, zi, w, b, y + i * N, N, eps, st + i,
                              st + M + i)
            return
    for j in range(N):
        zi[j] = x[i * N + j] + r[i * N + j]
    _ln_frow(z, w, b, y, st, i, M, N, eps)


cdef void _aln_fwd(const real* x, const real* r, real* z, const real* w, const real* b, real* y,
                   double* st, Py_ssize_t M, Py_ssize_t N, double eps) noexcept nogil:
    cdef Py_ssize_t i
    cdef int nt = _nt(M * N, M)
    if nt > 1:
        for i in prange(M, num_threads=nt, schedule="static"):
            _aln_frow(x, r, z, w, b, y, st, i, M, N, eps)
    else:
        for i in range(M):
            _aln_frow(x, r, z, w, b, y, st, i, M, N, eps)


def add_layer_norm_forward(ndarray x not None, ndarray r not None, object weight, object bias,
                           double eps, ndarray stats not None, ndarray z=None):
    """Layer norm of z = x + r (same shape and dtype, C-contiguous) over the last axis, one
    pass per row: returns (z, y) and fills stats as `layer_norm_forward` does (the backward
    reads z).  z, when given, is the C-contiguous array of x's shape and dtype z is written
    into."""
    _check(x, "add_layer_norm")
    _check(r, "add_layer_norm")
    if r.tcode != x.tcode or r.ndim != x.ndim or tuple(r.shape) != tuple(x.shape):
        raise ValueError(f"add_layer_norm: internal error: operands {x.dtype}{tuple(x.shape)} "
                         f"and {r.dtype}{tuple(r.shape)} differ")
    cdef Py_ssize_t N = x.shape[x.ndim - 1] if x.ndim else 1
    cdef Py_ssize_t M = x.size // N if N else 0
    cdef char* wp = _opt(weight, x, N, "add_layer_norm")
    cdef char* bp = _opt(bias, x, N, "add_layer_norm")
    cdef double* st = _stats(stats, 2 * M, "add_layer_norm")
    if z is None:
        z = new_empty(x.tcode, x.ndim, x.shape)
    elif z.tcode != x.tcode or not z.c_contig or tuple(z.shape) != tuple(x.shape):
        raise ValueError(f"add_layer_norm: internal error: z buffer {z.dtype}{tuple(z.shape)} "
                         f"does not match {x.dtype}{tuple(x.shape)}")
    cdef ndarray y = new_empty(x.tcode, x.ndim, x.shape)
    if x.size == 0:
        return z, y
    with nogil:
        if x.tcode == T_FLOAT32:
            _aln_fwd(<float*>x.data, <float*>r.data, <float*>z.data, <float*>wp, <float*>bp,
                     <float*>y.data, st, M, N, eps)
        else:
            _aln_fwd(<double*>x.data, <double*>r.data, <double*>z.data, <double*>wp,
                     <double*>bp, <double*>y.data, st, M, N, eps)
    return z, y


def _set_ln_avx2(bint on):
    """Switch the fused AVX2 float32 layer-norm rows (ln_simd.h) on or off (A/B
    measurements, tests: off runs nn_simd.h's primitives row by row, as before them);
    returns the previous setting.  On only where the CPU has AVX2 and FMA."""
    global _ln_rows
    cdef bint prev = _ln_rows
    _ln_rows = on and em_use_avx2 != 0
    return prev


cdef inline void _ln_brow(const real* g, const real* x, const real* w, real* gx, double mean,
                          double rstd, Py_ssize_t N) noexcept nogil:
    cdef double s1, s2, A, B
    vsum_dot_w(g, w, x, N, &s1, &s2)
    A = s1 / N
    B = rstd * (s2 - mean * s1) / N
    # gx = rstd * (g w - A - xhat B), centred: one element gives exactly 0
    vgxwb(gx, g, w, x, <real>rstd, <real>(rstd * B), <real>A, <real>mean, N)


cdef enum:
    LN_BLOCK = 64           # rows whose weight/bias gradients are summed in the data's type


cdef void _ln_bwd_block(const real* g, const real* x, const real* w, const double* st, real* gx,
                        real* facc, double* acc, Py_ssize_t blk, Py_ssize_t M,
                        Py_ssize_t N) noexcept nogil:
    cdef Py_ssize_t i, j, r0 = blk * LN_BLOCK, r1 = r0 + LN_BLOCK
    cdef double mean, rstd
    if r1 > M:
        r1 = M
    if acc != NULL:
        memset(facc, 0, 2 * N * sizeof(real))
    for i in range(r0, r1):
        mean = st[i]
        rstd = st[M + i]
        if real is float:
            if _ln_rows:
                emln_bwd_row_avx2(g + i * N, x + i * N, w, gx + i * N if gx != NULL else NULL,
                                  facc if acc != NULL else NULL, facc + N if acc != NULL else NULL,
                                  N, mean, rstd)
                continue
        if gx != NULL:
            _ln_brow(g + i * N, x + i * N, w, gx + i * N, mean, rstd, N)
        if acc != NULL:
            vfacc_wb(facc, facc + N, g + i * N, x + i * N, <real>rstd, <real>mean, N)
    if acc != NULL:
        for j in range(2 * N):
            acc[j] += facc[j]


cdef void _ln_bwd(const real* g, const real* x, const real* w, const double* st, real* gx,
                  double* acc, Py_ssize_t M, Py_ssize_t N, int nt) noexcept nogil:
    """gx (if not NULL) and, into acc (nt * 2N doubles, zeroed; NULL: skip), per-thread
    sums of g * xhat and g (summed in blocks of LN_BLOCK rows in the data's type)."""
    cdef Py_ssize_t b, nb = (M + LN_BLOCK - 1) // LN_BLOCK
    cdef int tid
    cdef real* facc = NULL
    if acc != NULL:
        facc = <real*>malloc((2 * N * nt + 1) * sizeof(real))
        if facc == NULL:
            return
    if nt > 1:
        for b in prange(nb, num_threads=nt, schedule="static"):
            tid = threadid()
            _ln_bwd_block(g, x, w, st, gx, facc + 2 * N * tid if acc != NULL else NULL,
                          acc + 2 * N * tid if acc != NULL else NULL, b, M, N)
    else:
        for b in range(nb):
            _ln_bwd_block(g, x, w, st, gx, facc, acc, b, M, N)
    free(facc)


def layer_norm_backward(ndarray g not None, ndarray x not None, object weight, ndarray stats not None, bint need_x,
                        bint need_wb):
    """Gradients (gx, gw, gb) of layer norm (None where not needed; gw/gb are the sums of
    g * xhat and g over rows, also when there is no weight/bias: the caller picks)."""
    _check(x, "layer_norm backward")
    _check(g, "layer_norm backward")
    cdef Py_ssize_t N = x.shape[x.ndim - 1] if x.ndim else 1
    cdef Py_ssize_t M = x.size // N if N else 0
    cdef Py_ssize_t k, j
    if g.tcode != x.tcode or g.size != x.size:
        raise ValueError("layer_norm backward: internal error: gradient does not match input")
    cdef char* wp = _opt(weight, x, N, "layer_norm backward")
    cdef double* st = _stats(stats, 2 * M, "layer_norm backward")
    cdef int nt = _nt(M * N, (M + LN_BLOCK - 1) // LN_BLOCK)
    cdef ndarray gx = new_empty(x.tcode, x.ndim, x.shape) if need_x else None
    cdef ndarray gw = None, gb = None
    cdef double* acc = NULL
    if need_wb:
        gw = _vec(x.tcode, N)
        gb = _vec(x.tcode, N)
        acc = <double*>calloc(2 * N * nt + 1, sizeof(double))
        if acc == NULL:
            raise MemoryError()
    cdef char* gxp = gx.data if need_x else NULL
    try:
        if x.size:
            with nogil:
                if x.tcode == T_FLOAT32:
                    _ln_bwd(<float*>g.data, <float*>x.data, <float*>wp, st, <float*>gxp, acc, M,
                            N, nt)
                else:
                    _ln_bwd(<double*>g.data, <double*>x.data, <double*>wp, st, <double*>gxp,
                            acc, M, N, nt)
        if need_wb:
            for k in range(1, nt):
                for j in range(2 * N):
                    acc[j] += acc[2 * N * k + j]
            for j in range(N):
                if x.tcode == T_FLOAT32:
                    (<float*>gw.data)[j] = <float>acc[j]
                    (<float*>gb.data)[j] = <float>acc[N + j]
                else:
                    (<double*>gw.data)[j] = acc[j]
                    (<double*>gb.data)[j] = acc[N + j]
    finally:
        free(acc)
    return gx, gw, gb

# ================================================================ batch norm

cdef extern from "bn_simd.h" nogil:
    int emb_bn_has_avx512()
    void emb_bn_meanvar_f32(const float* x, Py_ssize_t n, double* mean, double* var,
                            int avx512)

cdef int _BN_AVX512 = emb_bn_has_avx512()


def _set_bn_avx512(bint on):
    """Batch norm's float32 statistics on the AVX-512 loop (where the CPU has it) or on
    nn_simd.h's AVX2 loop (A/B measurements, tests).  Returns whether the loop is used."""
    global _BN_AVX512
    _BN_AVX512 = emb_bn_has_avx512() if on else 0
    return bool(_BN_AVX512)


cdef inline void _bn_row_stats(const real* x, Py_ssize_t n, double* mean,
                               double* var) noexcept nogil:
    """Mean and (biased) variance of one (sample, channel) run: two passes, float64
    totals (float32: bn_simd.h's four-chain AVX-512 loop where the CPU has it)."""
    cdef double m
    if real is float:
        emb_bn_meanvar_f32(x, n, mean, var, _BN_AVX512)
    else:
        m = vsum(x, n) / n if n else 0.0
        mean[0] = m
        var[0] = vsqdev(x, m, n) / n if n else 0.0


cdef void _bn_stats(const real* x, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S, double* mean,
                    double* var, double* tmp) noexcept nogil:
    """Per-channel mean and biased variance of x (N, C, S); tmp: 2 * N * C doubles."""
    cdef Py_ssize_t i, n, c
    cdef double M = <double>N * S, s, ss, m
    cdef int nt
    for c in range(C):
        mean[c] = 0
        var[c] = 0
    if N * S == 0:
        return
    if S == 1:
        for n in range(N):
            vacc_sumsq(mean, var, x + n * C, C)
        if real is float:
            for c in range(C):
                m = mean[c] / M
                mean[c] = m
                var[c] = var[c] / M - m * m
                if var[c] < 0:
                    var[c] = 0
        else:
            for c in range(C):
                mean[c] = mean[c] / M
                var[c] = 0
            for n in range(N):
                em_acc_sqdev_f64(var, x + n * C, mean, C)
            for c in range(C):
                var[c] = var[c] / M
        return
    # per (n, c) run: mean and variance; combined per channel (Chan et al.)
    nt = _nt(N * C * S, N * C)
    if nt > 1:
        for i in prange(N * C, num_threads=nt, schedule="static"):
            _bn_row_stats(x + i * S, S, &tmp[i], &tmp[N * C + i])
    else:
        for i in range(N * C):
            _bn_row_stats(x + i * S, S, &tmp[i], &tmp[N * C + i])
    for n in range(N):
        for c in range(C):
            mean[c] += tmp[n * C + c]
    for c in range(C):
        mean[c] = mean[c] / N
    for n in range(N):
        for c in range(C):
            m = tmp[n * C + c] - mean[c]
            var[c] += tmp[N * C + n * C + c] + m * m
    for c in range(C):
        var[c] = var[c] / N


cdef void _bn_apply(const real* x, real* y, const real* scale, const real* shift, Py_ssize_t N,
                    Py_ssize_t C, Py_ssize_t S) noexcept nogil:
    """y[n, c, :] = x[n, c, :] * scale[c] + shift[c] (shift NULL: 0)."""
    cdef Py_ssize_t i, n
    cdef int nt
    if S == 1:
        for n in range(N):
            vaffine_wb(y + n * C, x + n * C, 1, 0, scale, shift, C)
        return
    nt = _nt(N * C * S, N * C)
    if nt > 1:
        for i in prange(N * C, num_threads=nt, schedule="static"):
            vaxpb(y + i * S, x + i * S, scale[i % C], shift[i % C] if shift != NULL else 0, S)
    else:
        for i in range(N * C):
            vaxpb(y + i * S, x + i * S, scale[i % C], shift[i % C] if shift != NULL else 0, S)


cdef int _ncs(ndarray x, Py_ssize_t* N, Py_ssize_t* C, Py_ssize_t* S, str opname) except -1:
    cdef int i
    if x.ndim < 2:
        raise ValueError(f"{opname}: internal error: expected (N, C, ...) input")
    N[0] = x.shape[0]
    C[0] = x.shape[1]
    S[0] = 1
    for i in range(2, x.ndim):
        S[0] *= x.shape[i]
    return 0


def batch_norm_train_forward(ndarray x not None, object weight, object bias, double eps, ndarray stats not None):
    """Batch norm with batch statistics.  Fills stats ((3, C) float64: mean, 1/std, biased
    variance) and returns y."""
    cdef Py_ssize_t N, C, S, c
    _check(x, "batch_norm")
    _ncs(x, &N, &C, &S, "batch_norm")
    cdef char* wp = _opt(weight, x, C, "batch_norm")
    cdef char* bp = _opt(bias, x, C, "batch_norm")
    cdef double* st = _stats(stats, 3 * C, "batch_norm")
    cdef ndarray y = new_empty(x.tcode, x.ndim, x.shape)
    cdef ndarray scale = _vec(x.tcode, C), shift = _vec(x.tcode, C)
    cdef double* tmp = <double*>malloc((2 * N * C + 1) * sizeof(double))
    cdef double sc
    if tmp == NULL:
        raise MemoryError()
    try:
        with nogil:
            if x.tcode == T_FLOAT32:
                _bn_stats(<float*>x.data, N, C, S, st, st + 2 * C, tmp)
            else:
                _bn_stats(<double*>x.data, N, C, S, st, st + 2 * C, tmp)
            for c in range(C):
                st[C + c] = 1.0 / sqrt(st[2 * C + c] + eps)
                if x.tcode == T_FLOAT32:
                    sc = st[C + c] * ((<float*>wp)[c] if wp != NULL else 1.0)
                    (<float*>scale.data)[c] = <float>sc
                    (<float*>shift.data)[c] = <float>(((<float*>bp)[c] if bp != NULL else 0.0)
                                                      - st[c] * sc)
                else:
                    sc = st[C + c] * ((<double*>wp)[c] if wp != NULL else 1.0)
                    (<double*>scale.data)[c] = sc
                    (<double*>shift.data)[c] = ((<double*>bp)[c] if bp != NULL else 0.0) \
                        - st[c] * sc
            if x.tcode == T_FLOAT32:
                _bn_apply(<float*>x.data, <float*>y.data, <float*>scale.data,
                          <float*>shift.data, N, C, S)
            else:
                _bn_apply(<double*>x.data, <double*>y.data, <double*>scale.data,
                          <double*>shift.data, N, C, S)
    finally:
        free(tmp)
    return y


def batch_norm_update_running(ndarray running_mean not None, ndarray running_var not None, ndarray stats not None,
                              double momentum, Py_ssize_t count):
    """running = (1 - momentum) * running + momentum * batch statistic, in place; the
    variance enters unbiased (times count / (count - 1)), as in PyTorch."""
    cdef Py_ssize_t C = stats.size // 3, c
    cdef double* st = _stats(stats, 3 * C, "batch_norm")
    cdef double unb = <double>count / (count - 1) if count > 1 else float("nan")
    for a in (running_mean, running_var):
        _check(<ndarray>a, "batch_norm running statistics")
        if (<ndarray>a).size != C:
            raise ValueError(f"batch_norm: running statistics of size {(<ndarray>a).size} do not "
                             f"match the {C} channels of the input")
    for c in range(C):
        if running_mean.tcode == T_FLOAT32:
            (<float*>running_mean.data)[c] = <float>((1 - momentum) *
                                                     (<float*>running_mean.data)[c]
                                                     + momentum * st[c])
        else:
            (<double*>running_mean.data)[c] = ((1 - momentum) * (<double*>running_mean.data)[c]
                                               + momentum * st[c])
        if running_var.tcode == T_FLOAT32:
            (<float*>running_var.data)[c] = <float>((1 - momentum) *
                                                    (<float*>running_var.data)[c]
                                                    + momentum * st[2 * C + c] * unb)
        else:
            (<double*>running_var.data)[c] = ((1 - momentum) * (<double*>running_var.data)[c]
                                              + momentum * st[2 * C + c] * unb)


cdef void _bn_grad_sums(const real* g, const real* x, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S,
                        double* sg, double* sgx, double* tmp) noexcept nogil:
    """Per-channel sums of g and g * x over N and S; tmp: 2 * N * C doubles."""
    cdef Py_ssize_t i, n, c
    cdef int nt
    for c in range(C):
        sg[c] = 0
        sgx[c] = 0
    if S == 1:
        for n in range(N):
            vacc_wb(sgx, sg, g + n * C, x + n * C, 1.0, 0.0, C)
        return
    nt = _nt(N * C * S, N * C)
    if nt > 1:
        for i in prange(N * C, num_threads=nt, schedule="static"):
            vsum_dot(g + i * S, x + i * S, S, &tmp[i], &tmp[N * C + i])
    else:
        for i in range(N * C):
            vsum_dot(g + i * S, x + i * S, S, &tmp[i], &tmp[N * C + i])
    for n in range(N):
        for c in range(C):
            sg[c] += tmp[n * C + c]
            sgx[c] += tmp[N * C + n * C + c]


cdef void _bn_gx(const real* g, const real* x, real* gx, const real* a, const real* b,
                 const real* c, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S) noexcept nogil:
    """gx[n, c, :] = g * a[c] + x * b[c] + c[c]."""
    cdef Py_ssize_t i, n
    cdef int nt
    if S == 1:
        for n in range(N):
            vgxb_vec(gx + n * C, g + n * C, x + n * C, a, b, c, C)
        return
    nt = _nt(N * C * S, N * C)
    if nt > 1:
        for i in prange(N * C, num_threads=nt, schedule="static"):
            vgxb(gx + i * S, g + i * S, x + i * S, a[i % C], b[i % C], c[i % C], S)
    else:
        for i in range(N * C):
            vgxb(gx + i * S, g + i * S, x + i * S, a[i % C], b[i % C], c[i % C], S)


def batch_norm_backward(ndarray g not None, ndarray x not None, object weight, ndarray stats not None, object running,
                        bint need_x):
    """Gradients (gx, gw, gb) of batch norm.  Training (running None): stats is the forward's
    (3, C) array and gx goes through the batch statistics.  Evaluation: running = (mean,
    1/std) float64 (C,) arrays, gx = g * weight / std.  gw, gb are the per-channel sums of
    g * xhat and g."""
    cdef Py_ssize_t N, C, S, c
    _check(x, "batch_norm backward")
    _check(g, "batch_norm backward")
    if g.tcode != x.tcode or g.size != x.size:
        raise ValueError("batch_norm backward: internal error: gradient does not match input")
    _ncs(x, &N, &C, &S, "batch_norm backward")
    cdef char* wp = _opt(weight, x, C, "batch_norm backward")
    cdef double* mean
    cdef double* rstd
    cdef double* st
    if running is None:
        st = _stats(stats, 3 * C, "batch_norm backward")
        mean = st
        rstd = st + C
    else:
        mean = _stats(<ndarray?>running[0], C, "batch_norm backward")
        rstd = _stats(<ndarray?>running[1], C, "batch_norm backward")
    cdef ndarray gw = _vec(x.tcode, C), gb = _vec(x.tcode, C)
    cdef ndarray gx = new_empty(x.tcode, x.ndim, x.shape) if need_x else None
    cdef ndarray ca = _vec(x.tcode, C), cb = _vec(x.tcode, C), cc = _vec(x.tcode, C)
    cdef double* tmp = <double*>malloc((4 * N * C + 2 * C + 1) * sizeof(double))
    cdef char* gxp = gx.data if need_x else NULL
    cdef double* sg
    cdef double* sgx
    cdef double M = <double>N * S, w, sxh, a, b, k
    if tmp == NULL:
        raise MemoryError()
    sg = tmp + 2 * N * C
    sgx = sg + C
    try:
        with nogil:
            if x.tcode == T_FLOAT32:
                _bn_grad_sums(<float*>g.data, <float*>x.data, N, C, S, sg, sgx, tmp)
            else:
                _bn_grad_sums(<double*>g.data, <double*>x.data, N, C, S, sg, sgx, tmp)
            for c in range(C):
                sxh = rstd[c] * (sgx[c] - mean[c] * sg[c])         # sum of g * xhat
                if x.tcode == T_FLOAT32:
                    w = (<float*>wp)[c] if wp != NULL else 1.0
                    (<float*>gw.data)[c] = <float>sxh
                    (<float*>gb.data)[c] = <float>sg[c]
                else:
                    w = (<double*>wp)[c] if wp != NULL else 1.0
                    (<double*>gw.data)[c] = sxh
                    (<double*>gb.data)[c] = sg[c]
                # gx = w * rstd * (g - sg / M - xhat * sxh / M) = g * a + x * b + k
                a = w * rstd[c]
                if running is None and M > 0:
                    b = -a * rstd[c] * sxh / M
                    k = -a * sg[c] / M - b * mean[c]
                else:
                    b = 0
                    k = 0
                if x.tcode == T_FLOAT32:
                    (<float*>ca.data)[c] = <float>a
                    (<float*>cb.data)[c] = <float>b
                    (<float*>cc.data)[c] = <float>k
                else:
                    (<double*>ca.data)[c] = a
                    (<double*>cb.data)[c] = b
                    (<double*>cc.data)[c] = k
            if gxp != NULL and x.size:
                if x.tcode == T_FLOAT32:
                    _bn_gx(<float*>g.data, <float*>x.data, <float*>gxp, <float*>ca.data,
                           <float*>cb.data, <float*>cc.data, N, C, S)
                else:
                    _bn_gx(<double*>g.data, <double*>x.data, <double*>gxp, <double*>ca.data,
                           <double*>cb.data, <double*>cc.data, N, C, S)
    finally:
        free(tmp)
    return gx, gw, gb


def batch_norm_eval_forward(ndarray x not None, ndarray running_mean not None, ndarray running_var not None, object weight,
                            object bias, double eps):
    """Batch norm with running statistics: y = (x - mean) / sqrt(var + eps) * w + b.
    Returns (y, mean, 1/std) with the last two as float64 (C,) arrays."""
    cdef Py_ssize_t N, C, S, c
    _check(x, "batch_norm")
    _ncs(x, &N, &C, &S, "batch_norm")
    for a in (running_mean, running_var):
        if (<ndarray>a).size != C or (<ndarray>a).ndim != 1:
            raise ValueError(f"batch_norm: running statistics of shape {a.shape} do not match "
                             f"the {C} channels of the input")
    rm = running_mean.astype("float64")
    rv = running_var.astype("float64")
    cdef char* wp = _opt(weight, x, C, "batch_norm")
    cdef char* bp = _opt(bias, x, C, "batch_norm")
    cdef ndarray mean = _vec(T_FLOAT64, C), rstd = _vec(T_FLOAT64, C)
    cdef double* m = <double*>mean.data
    cdef double* r = <double*>rstd.data
    cdef ndarray scale = _vec(x.tcode, C), shift = _vec(x.tcode, C)
    cdef ndarray y = new_empty(x.tcode, x.ndim, x.shape)
    cdef double sc
    for c in range(C):
        m[c] = (<double*>(<ndarray>rm).data)[c]
        r[c] = 1.0 / sqrt((<double*>(<ndarray>rv).data)[c] + eps)
        if x.tcode == T_FLOAT32:
            sc = r[c] * ((<float*>wp)[c] if wp != NULL else 1.0)
            (<float*>scale.data)[c] = <float>sc
            (<float*>shift.data)[c] = <float>(((<float*>bp)[c] if bp != NULL else 0.0) - m[c] * sc)
        else:
            sc = r[c] * ((<double*>wp)[c] if wp != NULL else 1.0)
            (<double*>scale.data)[c] = sc
            (<double*>shift.data)[c] = ((<double*>bp)[c] if bp != NULL else 0.0) - m[c] * sc
    if x.size:
        with nogil:
            if x.tcode == T_FLOAT32:
                _bn_apply(<float*>x.data, <float*>y.data, <float*>scale.data, <float*>shift.data,
                          N, C, S)
            else:
                _bn_apply(<double*>x.data, <double*>y.data, <double*>scale.data,
                          <double*>shift.data, N, C, S)
    return y, mean, rstd

# ================================================================ group norm

cdef void _gn_fwd(const real* x, const real* w, const real* b, real* y, double* st,
                  Py_ssize_t N, Py_ssize_t C, Py_ssize_t S, Py_ssize_t G,
                  double eps) noexcept nogil:
    cdef Py_ssize_t i
    cdef int nt = _nt(N * C * S, N * G)
    if nt > 1:
        for i in prange(N * G, num_threads=nt, schedule="static"):
            _gn_row(x, w, b, y, st, i, N, C, S, G, eps)
    else:
        for i in range(N * G):
            _gn_row(x, w, b, y, st, i, N, C, S, G, eps)


cdef inline void _gn_row(const real* x, const real* w, const real* b, real* y, double* st,
                         Py_ssize_t i, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S, Py_ssize_t G,
                         double eps) noexcept nogil:
    cdef Py_ssize_t D = C // G, L = D * S, j, c
    cdef double mean, var, rstd, a
    _row_stats(x + i * L, L, &mean, &var)
    rstd = 1.0 / sqrt(var + eps)
    st[i] = mean
    st[N * G + i] = rstd
    for j in range(D):
        c = (i % G) * D + j
        a = rstd * (<double>w[c] if w != NULL else 1.0)
        vcaxpb(y + i * L + j * S, x + i * L + j * S, <real>mean, <real>a,
               <real>(<double>b[c] if b != NULL else 0.0), S)


def group_norm_forward(ndarray x not None, Py_ssize_t G, object weight, object bias, double eps,
                       ndarray stats not None):
    """Group norm of x (N, C, ...) with G groups; fills stats ((2, N * G) float64: mean,
    1/std per sample and group) and returns y."""
    cdef Py_ssize_t N, C, S
    _check(x, "group_norm")
    _ncs(x, &N, &C, &S, "group_norm")
    if G <= 0 or C % G:
        raise ValueError(f"group_norm: internal error: {C} channels in {G} groups")
    cdef char* wp = _opt(weight, x, C, "group_norm")
    cdef char* bp = _opt(bias, x, C, "group_norm")
    cdef double* st = _stats(stats, 2 * N * G, "group_norm")
    cdef ndarray y = new_empty(x.tcode, x.ndim, x.shape)
    if x.size == 0:
        return y
    with nogil:
        if x.tcode == T_FLOAT32:
            _gn_fwd(<float*>x.data, <float*>wp, <float*>bp, <float*>y.data, st, N, C, S, G, eps)
        else:
            _gn_fwd(<double*>x.data, <double*>wp, <double*>bp, <double*>y.data, st, N, C, S, G,
                    eps)
    return y


cdef void _gn_bwd(const real* g, const real* x, const real* w, const double* st, real* gx,
                  double* db, double* ds, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S,
                  Py_ssize_t G) noexcept nogil:
    cdef Py_ssize_t i
    cdef int nt = _nt(N * C * S, N * C)
    if nt > 1:
        for i in prange(N * C, num_threads=nt, schedule="static"):
            vsum_dot(g + i * S, x + i * S, S, &db[i], &ds[i])
    else:
        for i in range(N * C):
            vsum_dot(g + i * S, x + i * S, S, &db[i], &ds[i])
    if gx == NULL:
        return
    nt = _nt(N * C * S, N * G)
    if nt > 1:
        for i in prange(N * G, num_threads=nt, schedule="static"):
            _gn_brow(g, x, w, st, gx, db, ds, i, N, C, S, G)
    else:
        for i in range(N * G):
            _gn_brow(g, x, w, st, gx, db, ds, i, N, C, S, G)


cdef inline void _gn_brow(const real* g, const real* x, const real* w, const double* st, real* gx,
                          const double* db, const double* ds, Py_ssize_t i, Py_ssize_t N,
                          Py_ssize_t C, Py_ssize_t S, Py_ssize_t G) noexcept nogil:
    cdef Py_ssize_t D = C // G, L = D * S, j, c, n = i // G
    cdef double mean = st[i], rstd = st[N * G + i], s1 = 0, s2 = 0, wc, A, B
    for j in range(D):
        c = (i % G) * D + j
        wc = <double>w[c] if w != NULL else 1.0
        s1 += wc * db[n * C + c]
        s2 += wc * ds[n * C + c]
    A = s1 / L
    B = rstd * (s2 - mean * s1) / L
    for j in range(D):
        c = (i % G) * D + j
        wc = <double>w[c] if w != NULL else 1.0
        vgxb(gx + i * L + j * S, g + i * L + j * S, x + i * L + j * S, <real>(rstd * wc),
             <real>(-rstd * rstd * B), <real>(rstd * (mean * rstd * B - A)), S)


def group_norm_backward(ndarray g not None, ndarray x not None, Py_ssize_t G, object weight, ndarray stats not None,
                        bint need_x):
    """Gradients (gx, gw, gb) of group norm; gw, gb are the per-channel sums of g * xhat
    and g."""
    cdef Py_ssize_t N, C, S, n, c, i
    _check(x, "group_norm backward")
    _check(g, "group_norm backward")
    if g.tcode != x.tcode or g.size != x.size:
        raise ValueError("group_norm backward: internal error: gradient does not match input")
    _ncs(x, &N, &C, &S, "group_norm backward")
    cdef char* wp = _opt(weight, x, C, "group_norm backward")
    cdef double* st = _stats(stats, 2 * N * G, "group_norm backward")
    cdef ndarray gx = new_empty(x.tcode, x.ndim, x.shape) if need_x else None
    cdef ndarray gw = _vec(x.tcode, C), gb = _vec(x.tcode, C)
    cdef double* tmp = <double*>calloc(2 * N * C + 1, sizeof(double))
    cdef double* db = tmp
    cdef double* ds = tmp + N * C
    cdef double sw, sb
    cdef char* gxp = gx.data if need_x else NULL
    if tmp == NULL:
        raise MemoryError()
    try:
        with nogil:
            if x.size:
                if x.tcode == T_FLOAT32:
                    _gn_bwd(<float*>g.data, <float*>x.data, <float*>wp, st,
                            <float*>gxp, db, ds, N, C, S, G)
                else:
                    _gn_bwd(<double*>g.data, <double*>x.data, <double*>wp, st,
                            <double*>gxp, db, ds, N, C, S, G)
            for c in range(C):
                sw = 0
                sb = 0
                for n in range(N):
                    i = n * G + c // (C // G)
                    sw += st[N * G + i] * (ds[n * C + c] - st[i] * db[n * C + c])
                    sb += db[n * C + c]
                if x.tcode == T_FLOAT32:
                    (<float*>gw.data)[c] = <float>sw
                    (<float*>gb.data)[c] = <float>sb
                else:
                    (<double*>gw.data)[c] = sw
                    (<double*>gb.data)[c] = sb
    finally:
        free(tmp)
    return gx, gw, gb


def contig(ndarray x not None):
    """x itself when C-contiguous, else a C-contiguous copy."""
    return x if x.c_contig else x.copy()


def kparam(p, ndarray like not None):
    """An optional weight/bias as the kernels read it: None, or a C-contiguous array of
    like's dtype (p itself when it already is one; its autograd state is irrelevant)."""
    cdef ndarray a
    if p is None:
        return None
    a = <ndarray?>p
    if a.tcode == like.tcode and a.c_contig:
        return a
    return a.detach().astype(like.dtype).copy() if a.tcode != like.tcode else a.detach().copy()
