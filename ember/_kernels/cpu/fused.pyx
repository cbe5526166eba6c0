# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Fused bias + ReLU kernels for the layers (float32 / float64, in one pass each).

``y`` is a C-contiguous block seen as (N, C, L): the bias runs along C (L = 1 for a
linear layer's (rows, features) output, L = the spatial size for a convolution's
(N, C, H, W) output).

* ``bias_relu(y, b)``:            y = max(y + b[c], 0) in place (b may be None);
  NaN stays NaN, as in ``maximum``.
* ``relu_grad_bias(g, y, gx, gb)``: gx = g where y > 0 (or y is NaN) else 0 (y the
  ReLU's output), and, when gb is given, gb[c] = the sum of gx over N and L, in the
  same pass over g.

``rows_bias_relu`` and ``rows_relu_grad_bias`` are the same two passes for a linear
layer, on ember arrays (last axis = C, L = 1) straight from their pointers: no NumPy
view, no buffer acquisition (about 2 us per call at a layer's size).

The loops are fused_simd.h's, vectorised (AVX-512, AVX2 or baseline, chosen at run time
as em_vmath.h's math kernels are; ``_select_isa`` picks one for the tests).  Work is
split with OpenMP above a size threshold: the forward by rows (L = 1) or channels, the
backward by blocks of columns (L = 1) or by channels, so that each bias sum belongs to
one thread, is accumulated in double precision in a fixed order, and does not depend
on the number of threads.
"""
cimport cython
from cython.parallel cimport prange
from libc.stdlib cimport calloc, free
from ember._core.elementwise cimport num_threads
from ember._core.array cimport ndarray, new_empty
from ember._core.dtypes cimport T_FLOAT32, T_FLOAT64

cdef extern from "fused_simd.h" nogil:
    void emf_bias_relu_rows_f32(float* y, const float* b, Py_ssize_t rows, Py_ssize_t C)
    void emf_bias_relu_rows_f64(double* y, const double* b, Py_ssize_t rows, Py_ssize_t C)
    void emf_bias_relu_run_f32(float* y, float bv, Py_ssize_t L)
    void emf_bias_relu_run_f64(double* y, double bv, Py_ssize_t L)
    void emf_grad_rows_f32(const float* g, const float* y, float* gx, double* acc,
                           Py_ssize_t rows, Py_ssize_t C, Py_ssize_t c0, Py_ssize_t c1)
    void emf_grad_rows_f64(const double* g, const double* y, double* gx, double* acc,
                           Py_ssize_t rows, Py_ssize_t C, Py_ssize_t c0, Py_ssize_t c1)
    double emf_grad_run_f32(const float* g, const float* y, float* gx, Py_ssize_t L)
    double emf_grad_run_f64(const double* g, const double* y, double* gx, Py_ssize_t L)
    int emf_set_isa(int level)
    int emf_isa()

ctypedef fused real:
    float
    double

# Below this many elements one thread does the work.
cdef Py_ssize_t PAR_MIN = 32768
# columns per block when threads split a (rows, C) backward (a multiple of 16 floats)
cdef Py_ssize_t COL_BLOCK = 64

_ISAS = ("baseline", "avx2", "avx512")


def _select_isa(level=2):
    """Choose the loop variant (tests): 0 baseline, 1 at most AVX2, 2 the best this CPU
    has (EMBER_MATH_ISA caps it).  Returns the name of the one chosen."""
    return _ISAS[emf_set_isa(level)]


def isa():
    """The loop variant the kernels run: 'avx512', 'avx2' or 'baseline'."""
    return _ISAS[emf_isa()]


cdef inline void _bias_relu_rows(real* y, const real* b, Py_ssize_t rows,
                                 Py_ssize_t C) noexcept nogil:
    if real is float:
        emf_bias_relu_rows_f32(y, b, rows, C)
    else:
        emf_bias_relu_rows_f64(y, b, rows, C)


cdef inline void _bias_relu_chan(real* y, const real* b, Py_ssize_t N, Py_ssize_t C,
                                 Py_ssize_t L, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t n
    cdef real bv = 0
    if b != NULL:
        bv = b[c]
    for n in range(N):
        if real is float:
            emf_bias_relu_run_f32(y + (n * C + c) * L, bv, L)
        else:
            emf_bias_relu_run_f64(y + (n * C + c) * L, bv, L)


cdef void _bias_relu(real* y, const real* b, Py_ssize_t N, Py_ssize_t C,
                     Py_ssize_t L) noexcept nogil:
    cdef Py_ssize_t c, t, nt = 1, chunk
    if N * C * L >= PAR_MIN:
        nt = num_threads()
    if L == 1:                      # (rows, features): split the rows
        if nt > 1 and N > 1:
            chunk = (N + nt - 1) // nt
            for t in prange(nt, schedule="static", num_threads=nt):
                if t * chunk < N:
                    _bias_relu_rows(y + t * chunk * C, b, min(N - t * chunk, chunk), C)
        else:
            _bias_relu_rows(y, b, N, C)
        return
    if nt > 1 and C > 1:
        for c in prange(C, schedule="static", num_threads=nt):
            _bias_relu_chan(y, b, N, C, L, c)
    else:
        for c in range(C):
            _bias_relu_chan(y, b, N, C, L, c)


cdef inline void _grad_chan(const real* g, const real* y, real* gx, real* gb, Py_ssize_t N,
                            Py_ssize_t C, Py_ssize_t L, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t n, o
    cdef double s = 0
    for n in range(N):
        o = (n * C + c) * L
        if real is float:
            s += emf_grad_run_f32(g + o, y + o, gx + o, L)
        else:
            s += emf_grad_run_f64(g + o, y + o, gx + o, L)
    if gb != NULL:
        gb[c] = <real>s


cdef inline void _grad_rows(const real* g, const real* y, real* gx, double* acc,
                            Py_ssize_t N, Py_ssize_t C, Py_ssize_t c0,
                            Py_ssize_t c1) noexcept nogil:
    if real is float:
        emf_grad_rows_f32(g, y, gx, acc, N, C, c0, c1)
    else:
        emf_grad_rows_f64(g, y, gx, acc, N, C, c0, c1)


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
    cdef Py_ssize_t N = g.shape[0], C = g.shape[1], L = g.shape[2], c, nt = 1, nb, j
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
    cdef double* acc = NULL
    if N * C * L >= PAR_MIN:
        nt = num_threads()
    if L == 1:
        # (rows, features): the mask and the column sums in one pass, row after row;
        # threads take blocks of columns (each column's sum keeps its row order)
        if gbp != NULL:
            acc = <double*>calloc(C, sizeof(double))
            if acc == NULL:
                raise MemoryError()
        nb = (C + COL_BLOCK - 1) // COL_BLOCK
        with nogil:
            if nt > 1 and nb > 1:
                for j in prange(nb, schedule="static", num_threads=nt):
                    _grad_rows(gp, yp, gxp, acc, N, C, j * COL_BLOCK,
                               min(C, (j + 1) * COL_BLOCK))
            else:
                _grad_rows(gp, yp, gxp, acc, N, C, 0, C)
            if gbp != NULL:
                for c in range(C):
                    gbp[c] = <real>acc[c]
        free(acc)
        return
    with nogil:
        if nt > 1 and C > 1:
            for c in prange(C, schedule="static", num_threads=nt):
                _grad_chan(gp, yp, gxp, gbp, N, C, L, c)
        else:
            for c in range(C):
                _grad_chan(gp, yp, gxp, gbp, N, C, L, c)


# ------------------------------------------------- a linear layer's output, on ember arrays

cdef inline bint _host_rows(ndarray a, int tcode) noexcept:
    """C-contiguous host array of dtype `tcode` with at least one axis."""
    return a.tcode == tcode and a.c_contig and a.ndim >= 1 and a.storage.device_index < 0


def rows_bias_relu(ndarray y not None, ndarray b):
    """y = max(y + b, 0) in place over y's last axis (C): y a C-contiguous host float32 or
    float64 ember array, b a contiguous host (C,) array of its dtype or None."""
    cdef int tc = y.tcode
    if (tc != T_FLOAT32 and tc != T_FLOAT64) or not _host_rows(y, tc) or y.readonly:
        raise ValueError(f"rows_bias_relu: y must be a writable C-contiguous host float32 or "
                         f"float64 array, got {y.dtype} {y.shape}")
    cdef Py_ssize_t C = y.shape[y.ndim - 1]
    if b is not None and (not _host_rows(b, tc) or b.ndim != 1 or b.shape[0] != C):
        raise ValueError(f"rows_bias_relu: bias {b.dtype} {b.shape} does not fit the output "
                         f"{y.dtype} {y.shape} (expected ({C},), contiguous, same dtype)")
    if y.size == 0:
        return
    cdef Py_ssize_t N = y.size // C
    cdef const void* bp = NULL if b is None else <const void*>b.data
    with nogil:
        if tc == T_FLOAT32:
            _bias_relu(<float*>y.data, <const float*>bp, N, C, 1)
        else:
            _bias_relu(<double*>y.data, <const double*>bp, N, C, 1)


def rows_relu_grad_bias(ndarray g not None, ndarray y not None, bint need_bias):
    """(gx, gb): gx = g where y > 0 (or NaN) else 0, and gb = gx summed over every axis but
    the last (None unless need_bias), as new ember arrays, in one pass over g; y the ReLU
    output (C-contiguous host float32/float64).  None when g does not fit (another shape
    or dtype, not C-contiguous, on a GPU): the caller takes the general path."""
    cdef int tc = y.tcode
    cdef int d
    if (tc != T_FLOAT32 and tc != T_FLOAT64) or not _host_rows(y, tc) \
            or not _host_rows(g, tc) or g.ndim != y.ndim:
        return None
    for d in range(y.ndim):
        if g.shape[d] != y.shape[d]:
            return None
    cdef Py_ssize_t C = y.shape[y.ndim - 1]
    cdef Py_ssize_t N = y.size // C if C else 0
    cdef ndarray gx = new_empty(tc, y.ndim, y.shape, "relu_grad_bias")
    cdef ndarray gb = new_empty(tc, 1, &y.shape[y.ndim - 1], "relu_grad_bias") \
        if need_bias else None
    cdef Py_ssize_t c, j, nb, nt = 1
    cdef double* acc = NULL
    if need_bias and C > 0:
        acc = <double*>calloc(C, sizeof(double))
        if acc == NULL:
            raise MemoryError()
    if N * C >= PAR_MIN:
        nt = num_threads()
    nb = (C + COL_BLOCK - 1) // COL_BLOCK
    with nogil:
        if N * C > 0:
            if nt > 1 and nb > 1:
                for j in prange(nb, schedule="static", num_threads=nt):
                    if tc == T_FLOAT32:
                        emf_grad_rows_f32(<const float*>g.data, <const float*>y.data,
                                          <float*>gx.data, acc, N, C, j * COL_BLOCK,
                                          min(C, (j + 1) * COL_BLOCK))
                    else:
                        emf_grad_rows_f64(<const double*>g.data, <const double*>y.data,
                                          <double*>gx.data, acc, N, C, j * COL_BLOCK,
                                          min(C, (j + 1) * COL_BLOCK))
            elif tc == T_FLOAT32:
                emf_grad_rows_f32(<const float*>g.data, <const float*>y.data,
                                  <float*>gx.data, acc, N, C, 0, C)
            else:
                emf_grad_rows_f64(<const double*>g.data, <const double*>y.data,
                                  <double*>gx.data, acc, N, C, 0, C)
        if acc != NULL:
            for c in range(C):
                if tc == T_FLOAT32:
                    (<float*>gb.data)[c] = <float>acc[c]
                else:
                    (<double*>gb.data)[c] = acc[c]
    free(acc)
    return gx, gb
