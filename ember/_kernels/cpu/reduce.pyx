"""Reduction kernels: sum, prod, max, min (and all/any through them), arg-max/min
and cumulative sums/products, over any set of axes.

The iteration is the elementwise one (ember._core.elementwise.NdIter) with
the output's strides set to 0 along reduced axes, ordered so the innermost
axis has the smallest input stride.  Then:

* innermost axis reduced -> each output element gets a line reduction
  (pairwise summation for floats, eight accumulators per block so the
  compiler vectorises), run over output elements on several threads;
* innermost axis kept -> whole rows are combined into the output with the
  generated binary loop (out = out + row), split by columns over threads;
* a full reduction of a contiguous array is split into per-thread chunks
  whose partial results are combined at the end.

Integer sums/products accumulate in int64/uint64 (inputs are cast first) and
float16 (and bfloat16) in float32, as NumPy does.
"""
cimport cython
from cython.parallel cimport prange
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libc.stdlib cimport malloc, free
from libc.math cimport NAN

from ember._core.array cimport ndarray, new_empty, new_view, MAXDIM, as_ndarray, shape_tuple
from ember._core.dtypes cimport (DTYPE_OBJS, ITEMSIZE, KIND, NTYPES, T_BOOL, T_INT8, T_INT16,
                                 T_INT32, T_INT64, T_UINT8, T_UINT16, T_UINT32, T_UINT64,
                                 T_FLOAT16, T_FLOAT32, is_half, T_FLOAT64, T_COMPLEX64, T_COMPLEX128,
                                 code_of)
from ember._core.elementwise cimport (NdIter, loop_fn, simplify, run_range, get_loop, cast, split_work,
                                      assign, num_threads, setup_operand, PAR_MIN)
from ember._core.opcodes cimport OP_ADD, OP_MULTIPLY, OP_MAXIMUM, OP_MINIMUM

import numpy as _np

cdef extern from "simd_sum.h" nogil:
    float ember_block_sum_f32_avx2(const float* a, Py_ssize_t n)
    double ember_block_sum_f64_avx2(const double* a, Py_ssize_t n)
    void ember_extreme_f32_avx2(float* out, const float* a, Py_ssize_t n, int is_max)
    void ember_extreme_f64_avx2(double* out, const double* a, Py_ssize_t n, int is_max)
    void ember_extreme_i8_avx2(int8_t* out, const int8_t* a, Py_ssize_t n, int is_max)
    void ember_extreme_i16_avx2(int16_t* out, const int16_t* a, Py_ssize_t n, int is_max)
    void ember_extreme_i32_avx2(int32_t* out, const int32_t* a, Py_ssize_t n, int is_max)
    void ember_extreme_u8_avx2(uint8_t* out, const uint8_t* a, Py_ssize_t n, int is_max)
    void ember_extreme_u16_avx2(uint16_t* out, const uint16_t* a, Py_ssize_t n, int is_max)
    void ember_extreme_u32_avx2(uint32_t* out, const uint32_t* a, Py_ssize_t n, int is_max)
    int ember_cpu_has_avx2()

# AVX2 block sums when this CPU has them (checked once at import)
cdef bint _avx2 = ember_cpu_has_avx2()


def _avx2_enabled():
    """Whether the reductions use their AVX2 block kernels on this CPU (ember.show_config)."""
    return bool(_avx2)

ctypedef void (*line_fn)(char* out, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil
ctypedef Py_ssize_t (*argline_fn)(char* tag, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil
ctypedef void (*cumline_fn)(char* out, Py_ssize_t os, char* p, Py_ssize_t s, Py_ssize_t n) noexcept nogil

cdef enum:
    R_SUM = 0
    R_PROD = 1
    R_MAX = 2
    R_MIN = 3

ctypedef fused acc_t:
    int64_t
    uint64_t
    float
    double

ctypedef fused real_t:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    float
    double

# ---------------------------------------------------------------- line kernels

cdef acc_t _pw_sum_contig(acc_t* a, Py_ssize_t n) noexcept nogil:
    """Pairwise sum of a contiguous run: blocks of <= 256 summed with 16
    independent accumulators (four SSE registers, enough to hide the add
    latency), blocks combined pairwise."""
    cdef acc_t r[16]
    cdef acc_t res
    cdef Py_ssize_t i, j, half, m
    if _avx2 and n <= 1024:
        if acc_t is float:
            return ember_block_sum_f32_avx2(a, n)
        elif acc_t is double:
            return ember_block_sum_f64_avx2(a, n)
    if n < 16:
        res = 0
        for i in range(n):
            res = res + a[i]
        return res
    if n <= 256:
        for j in range(16):
            r[j] = a[j]
        m = n - n % 16
        for i in range(16, m, 16):
            for j in range(16):
                r[j] = r[j] + a[i + j]
        for j in range(8):
            r[j] = r[j] + r[j + 8]
        res = ((r[0] + r[4]) + (r[2] + r[6])) + ((r[1] + r[5]) + (r[3] + r[7]))
        for i in range(m, n):
            res = res + a[i]
        return res
    half = n // 2
    half -= half % 32
    return _pw_sum_contig(a, half) + _pw_sum_contig(a + half, n - half)


cdef acc_t _pw_sum_strided(char* p, Py_ssize_t n, Py_ssize_t s, acc_t* tag) noexcept nogil:
    cdef acc_t r0, r1, r2, r3, r4, r5, r6, r7, res
    cdef Py_ssize_t i, half, m
    if n < 8:
        res = 0
        for i in range(n):
            res = res + (<acc_t*>(p + i * s))[0]
        return res
    if n <= 128:
        r0 = (<acc_t*>(p))[0]; r1 = (<acc_t*>(p + s))[0]
        r2 = (<acc_t*>(p + 2 * s))[0]; r3 = (<acc_t*>(p + 3 * s))[0]
        r4 = (<acc_t*>(p + 4 * s))[0]; r5 = (<acc_t*>(p + 5 * s))[0]
        r6 = (<acc_t*>(p + 6 * s))[0]; r7 = (<acc_t*>(p + 7 * s))[0]
        m = n - n % 8
        for i in range(8, m, 8):
            r0 = r0 + (<acc_t*>(p + i * s))[0]
            r1 = r1 + (<acc_t*>(p + (i + 1) * s))[0]
            r2 = r2 + (<acc_t*>(p + (i + 2) * s))[0]
            r3 = r3 + (<acc_t*>(p + (i + 3) * s))[0]
            r4 = r4 + (<acc_t*>(p + (i + 4) * s))[0]
            r5 = r5 + (<acc_t*>(p + (i + 5) * s))[0]
            r6 = r6 + (<acc_t*>(p + (i + 6) * s))[0]
            r7 = r7 + (<acc_t*>(p + (i + 7) * s))[0]
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for i in range(m, n):
            res = res + (<acc_t*>(p + i * s))[0]
        return res
    half = n // 2
    half -= half % 8
    return _pw_sum_strided(p, half, s, tag) + _pw_sum_strided(p + half * s, n - half, s, tag)


cdef void sum_into(acc_t* out, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil:
    cdef Py_ssize_t i
    cdef acc_t total = 0
    cdef acc_t* a
    if acc_t is float or acc_t is double:
        if s == sizeof(acc_t):
            total = _pw_sum_contig(<acc_t*>p, n)
        else:
            total = _pw_sum_strided(p, n, s, out)
    else:
        # integers: exact in any order, so a plain loop (vectorised when contiguous)
        if s == sizeof(acc_t):
            a = <acc_t*>p
            for i in range(n):
                total = total + a[i]
        else:
            for i in range(n):
                total = total + (<acc_t*>(p + i * s))[0]
    out[0] = out[0] + total


cdef void prod_into(acc_t* out, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil:
    cdef Py_ssize_t i
    cdef acc_t r = out[0]
    for i in range(n):
        r = r * (<acc_t*>(p + i * s))[0]
    out[0] = r


cdef inline void _extreme_into(real_t* out, char* p, Py_ssize_t n, Py_ssize_t s, bint is_max) noexcept nogil:
    """out = max (or min) of out and the line; any NaN makes it NaN."""
    cdef Py_ssize_t i
    cdef real_t m = out[0], v
    cdef bint nan = False
    if _avx2 and s == sizeof(real_t):
        # contiguous: the AVX2 kernel of this type (int64 has no AVX2 max/min)
        if real_t is float:
            ember_extreme_f32_avx2(out, <float*>p, n, is_max)
            return
        elif real_t is double:
            ember_extreme_f64_avx2(out, <double*>p, n, is_max)
            return
        elif real_t is int8_t:
            ember_extreme_i8_avx2(out, <int8_t*>p, n, is_max)
            return
        elif real_t is int16_t:
            ember_extreme_i16_avx2(out, <int16_t*>p, n, is_max)
            return
        elif real_t is int32_t:
            ember_extreme_i32_avx2(out, <int32_t*>p, n, is_max)
            return
        elif real_t is uint8_t:
            ember_extreme_u8_avx2(out, <uint8_t*>p, n, is_max)
            return
        elif real_t is uint16_t:
            ember_extreme_u16_avx2(out, <uint16_t*>p, n, is_max)
            return
        elif real_t is uint32_t:
            ember_extreme_u32_avx2(out, <uint32_t*>p, n, is_max)
            return
    if real_t is float or real_t is double:
        if m != m:
            return
    for i in range(n):
        v = (<real_t*>(p + i * s))[0]
        if (v > m) if is_max else (v < m):
            m = v
        if real_t is float or real_t is double:
            if v != v:
                nan = True
    if real_t is float or real_t is double:
        if nan:
            m = <real_t>NAN
    out[0] = m


# is_max is a constant in each caller, so the compiler specialises the loop
cdef void max_into(real_t* out, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil:
    _extreme_into(out, p, n, s, True)


cdef void min_into(real_t* out, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil:
    _extreme_into(out, p, n, s, False)


cdef inline Py_ssize_t _arg_extreme(char* p, Py_ssize_t n, Py_ssize_t s, bint is_max, real_t* tag) noexcept nogil:
    """Index of the first max (min); a NaN wins at its first occurrence (NumPy)."""
    cdef Py_ssize_t i, best_i = 0
    cdef real_t best = (<real_t*>p)[0], v
    if real_t is float or real_t is double:
        if best != best:
            return 0
        if _avx2 and s == sizeof(real_t) and n > 64:
            # the extreme value first (SIMD), then its first occurrence (or the first NaN)
            _extreme_into(&best, p, n, s, is_max)
            if best != best:
                for i in range(n):
                    v = (<real_t*>p)[i]
                    if v != v:
                        return i
            for i in range(n):
                if (<real_t*>p)[i] == best:
                    return i
            return 0
    for i in range(1, n):
        v = (<real_t*>(p + i * s))[0]
        if (v > best) if is_max else (v < best):
            best = v
            best_i = i
        elif real_t is float or real_t is double:
            if v != v:
                return i
    return best_i


cdef Py_ssize_t argmax_line(real_t* tag, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil:
    return _arg_extreme(p, n, s, True, tag)


cdef Py_ssize_t argmin_line(real_t* tag, char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil:
    return _arg_extreme(p, n, s, False, tag)


cdef void cumsum_line(acc_t* out, Py_ssize_t os, char* p, Py_ssize_t s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef acc_t r = 0
    for i in range(n):
        r = r + (<acc_t*>(p + i * s))[0]
        (<acc_t*>((<char*>out) + i * os))[0] = r


cdef void cumprod_line(acc_t* out, Py_ssize_t os, char* p, Py_ssize_t s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef acc_t r = 1
    for i in range(n):
        r = r * (<acc_t*>(p + i * s))[0]
        (<acc_t*>((<char*>out) + i * os))[0] = r

# ---------------------------------------------------------------- tables

cdef line_fn LINE[4][NTYPES]
cdef argline_fn ARGMAX[NTYPES]
cdef argline_fn ARGMIN[NTYPES]
cdef cumline_fn CUMSUM[NTYPES]
cdef cumline_fn CUMPROD[NTYPES]
cdef int _i, _j
for _i in range(4):
    for _j in range(NTYPES):
        LINE[_i][_j] = NULL
for _j in range(NTYPES):
    ARGMAX[_j] = NULL
    ARGMIN[_j] = NULL
    CUMSUM[_j] = NULL
    CUMPROD[_j] = NULL

LINE[R_SUM][T_INT64] = <line_fn>sum_into[int64_t]
LINE[R_SUM][T_UINT64] = <line_fn>sum_into[uint64_t]
LINE[R_SUM][T_FLOAT32] = <line_fn>sum_into[float]
LINE[R_SUM][T_FLOAT64] = <line_fn>sum_into[double]
LINE[R_PROD][T_INT64] = <line_fn>prod_into[int64_t]
LINE[R_PROD][T_UINT64] = <line_fn>prod_into[uint64_t]
LINE[R_PROD][T_FLOAT32] = <line_fn>prod_into[float]
LINE[R_PROD][T_FLOAT64] = <line_fn>prod_into[double]
CUMSUM[T_INT64] = <cumline_fn>cumsum_line[int64_t]
CUMSUM[T_UINT64] = <cumline_fn>cumsum_line[uint64_t]
CUMSUM[T_FLOAT32] = <cumline_fn>cumsum_line[float]
CUMSUM[T_FLOAT64] = <cumline_fn>cumsum_line[double]
CUMPROD[T_INT64] = <cumline_fn>cumprod_line[int64_t]
CUMPROD[T_UINT64] = <cumline_fn>cumprod_line[uint64_t]
CUMPROD[T_FLOAT32] = <cumline_fn>cumprod_line[float]
CUMPROD[T_FLOAT64] = <cumline_fn>cumprod_line[double]

LINE[R_MAX][T_BOOL] = <line_fn>max_into[uint8_t]
LINE[R_MIN][T_BOOL] = <line_fn>min_into[uint8_t]
ARGMAX[T_BOOL] = <argline_fn>argmax_line[uint8_t]
ARGMIN[T_BOOL] = <argline_fn>argmin_line[uint8_t]
LINE[R_MAX][T_INT8] = <line_fn>max_into[int8_t]
LINE[R_MIN][T_INT8] = <line_fn>min_into[int8_t]
ARGMAX[T_INT8] = <argline_fn>argmax_line[int8_t]
ARGMIN[T_INT8] = <argline_fn>argmin_line[int8_t]
LINE[R_MAX][T_INT16] = <line_fn>max_into[int16_t]
LINE[R_MIN][T_INT16] = <line_fn>min_into[int16_t]
ARGMAX[T_INT16] = <argline_fn>argmax_line[int16_t]
ARGMIN[T_INT16] = <argline_fn>argmin_line[int16_t]
LINE[R_MAX][T_INT32] = <line_fn>max_into[int32_t]
LINE[R_MIN][T_INT32] = <line_fn>min_into[int32_t]
ARGMAX[T_INT32] = <argline_fn>argmax_line[int32_t]
ARGMIN[T_INT32] = <argline_fn>argmin_line[int32_t]
LINE[R_MAX][T_INT64] = <line_fn>max_into[int64_t]
LINE[R_MIN][T_INT64] = <line_fn>min_into[int64_t]
ARGMAX[T_INT64] = <argline_fn>argmax_line[int64_t]
ARGMIN[T_INT64] = <argline_fn>argmin_line[int64_t]
LINE[R_MAX][T_UINT8] = <line_fn>max_into[uint8_t]
LINE[R_MIN][T_UINT8] = <line_fn>min_into[uint8_t]
ARGMAX[T_UINT8] = <argline_fn>argmax_line[uint8_t]
ARGMIN[T_UINT8] = <argline_fn>argmin_line[uint8_t]
LINE[R_MAX][T_UINT16] = <line_fn>max_into[uint16_t]
LINE[R_MIN][T_UINT16] = <line_fn>min_into[uint16_t]
ARGMAX[T_UINT16] = <argline_fn>argmax_line[uint16_t]
ARGMIN[T_UINT16] = <argline_fn>argmin_line[uint16_t]
LINE[R_MAX][T_UINT32] = <line_fn>max_into[uint32_t]
LINE[R_MIN][T_UINT32] = <line_fn>min_into[uint32_t]
ARGMAX[T_UINT32] = <argline_fn>argmax_line[uint32_t]
ARGMIN[T_UINT32] = <argline_fn>argmin_line[uint32_t]
LINE[R_MAX][T_UINT64] = <line_fn>max_into[uint64_t]
LINE[R_MIN][T_UINT64] = <line_fn>min_into[uint64_t]
ARGMAX[T_UINT64] = <argline_fn>argmax_line[uint64_t]
ARGMIN[T_UINT64] = <argline_fn>argmin_line[uint64_t]
LINE[R_MAX][T_FLOAT32] = <line_fn>max_into[float]
LINE[R_MIN][T_FLOAT32] = <line_fn>min_into[float]
ARGMAX[T_FLOAT32] = <argline_fn>argmax_line[float]
ARGMIN[T_FLOAT32] = <argline_fn>argmin_line[float]
LINE[R_MAX][T_FLOAT64] = <line_fn>max_into[double]
LINE[R_MIN][T_FLOAT64] = <line_fn>min_into[double]
ARGMAX[T_FLOAT64] = <argline_fn>argmax_line[double]
ARGMIN[T_FLOAT64] = <argline_fn>argmin_line[double]

cdef int COMBINE[4]
COMBINE[R_SUM] = OP_ADD
COMBINE[R_PROD] = OP_MULTIPLY
COMBINE[R_MAX] = OP_MAXIMUM
COMBINE[R_MIN] = OP_MINIMUM


cdef object _identity(int rop, int code):
    cdef char k = KIND[code]
    if rop == R_SUM:
        return 0
    if rop == R_PROD:
        return 1
    if k == b'f':
        return float("-inf") if rop == R_MAX else float("inf")
    if k == b'b':
        return False if rop == R_MAX else True
    info = _np.iinfo(DTYPE_OBJS[code])
    return int(info.min) if rop == R_MAX else int(info.max)

# ---------------------------------------------------------------- drivers

cdef void _lines_range(NdIter* it, line_fn f, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    """Line reductions for outer iterations [start, stop): operand 0 = input, 1 = output."""
    cdef Py_ssize_t idx[MAXDIM]
    cdef char* p0
    cdef char* p1
    cdef int nd = it.ndim, d
    cdef Py_ssize_t r = start, inner = it.shape[nd - 1], count, s_in = it.strides[0][nd - 1]
    p0 = it.ptrs[0]
    p1 = it.ptrs[1]
    for d in range(nd - 2, -1, -1):
        idx[d] = r % it.shape[d]
        r = r // it.shape[d]
        p0 += idx[d] * it.strides[0][d]
        p1 += idx[d] * it.strides[1][d]
    count = start
    while count < stop:
        f(p1, p0, inner, s_in)
        count += 1
        d = nd - 2
        while d >= 0:
            idx[d] += 1
            p0 += it.strides[0][d]
            p1 += it.strides[1][d]
            if idx[d] < it.shape[d]:
                break
            p0 -= it.strides[0][d] * it.shape[d]
            p1 -= it.strides[1][d] * it.shape[d]
            idx[d] = 0
            d -= 1


cdef void _order_by_stride(NdIter* it) noexcept nogil:
    """Sort axes by decreasing |input stride| so the innermost is the densest."""
    cdef int i, j, k
    cdef Py_ssize_t a, b, t
    for i in range(1, it.ndim):
        j = i
        while j > 0:
            a = it.strides[0][j - 1]
            b = it.strides[0][j]
            if a < 0: a = -a
            if b < 0: b = -b
            if a >= b:
                break
            t = it.shape[j]; it.shape[j] = it.shape[j - 1]; it.shape[j - 1] = t
            for k in range(it.nargs):
                t = it.strides[k][j]; it.strides[k][j] = it.strides[k][j - 1]; it.strides[k][j - 1] = t
            j -= 1


cdef int _reduce_into(ndarray x, ndarray out, int rop, bint* reduced) except -1:
    """out (already holding the identity, shaped like x with 1s on reduced axes
    squeezed away) = op-reduction of x over the axes flagged in `reduced`."""
    cdef NdIter it
    cdef int i, j = 0, nd, t, nt = num_threads()
    cdef line_fn lf = LINE[rop][x.tcode]
    cdef loop_fn bf = get_loop(COMBINE[rop], x.tcode)
    cdef Py_ssize_t outer = 1, inner, total = x.size, chunk, c, lo, hi, ncols, nchunks
    cdef bint outer_kept = True
    cdef double partial[2 * 64]
    cdef NdIter sub
    if x.size == 0:
        return 0
    it.nargs = 2
    it.ndim = x.ndim
    for i in range(x.ndim):
        it.shape[i] = x.shape[i]
        it.strides[0][i] = x.strides[i]
        if reduced[i]:
            it.strides[1][i] = 0
        else:
            it.strides[1][i] = out.strides[j]
            j += 1
    it.ptrs[0] = x.data
    it.ptrs[1] = out.data
    if it.ndim == 0:
        it.ndim = 1
        it.shape[0] = 1
        it.strides[0][0] = 0
        it.strides[1][0] = 0
    _order_by_stride(&it)
    simplify(&it)
    nd = it.ndim
    inner = it.shape[nd - 1]
    for i in range(nd - 1):
        outer *= it.shape[i]
        if it.strides[1][i] == 0 and it.shape[i] > 1:
            outer_kept = False

    if it.strides[1][nd - 1] == 0:
        # innermost axis reduced: line reductions
        with nogil:
            if nd == 1 and nt > 1 and total >= PAR_MIN:
                # one long line: a partial result per chunk, combined in chunk order
                # (so the answer does not depend on which thread ran which chunk)
                nchunks = split_work(inner, nt, 64, PAR_MIN // 4, &chunk)
                if nchunks > 64:
                    chunk = (inner + 63) // 64
                    nchunks = (inner + chunk - 1) // chunk
                for c in range(nchunks):
                    memcpy(<char*>&partial[c * 2], it.ptrs[1], x.itemsize)
                for c in prange(nchunks, schedule="dynamic", num_threads=nt):
                    lo = c * chunk
                    hi = lo + chunk
                    if hi > inner:
                        hi = inner
                    if lo < hi:
                        lf(<char*>&partial[c * 2], it.ptrs[0] + lo * it.strides[0][0], hi - lo, it.strides[0][0])
                for c in range(nchunks):
                    lf(it.ptrs[1], <char*>&partial[c * 2], 1, 0)
            elif outer_kept and nt > 1 and total >= PAR_MIN and outer >= nt:
                nchunks = split_work(outer, nt, 1, 1, &chunk)
                for c in prange(nchunks, schedule="dynamic", num_threads=nt):
                    lo = c * chunk
                    hi = lo + chunk
                    if hi > outer:
                        hi = outer
                    if lo < hi:
                        _lines_range(&it, lf, lo, hi)
            else:
                _lines_range(&it, lf, 0, outer)
        return 0

    # innermost axis kept: out = op(out, x) row by row, threads split the columns
    cdef NdIter it3
    it3.nargs = 3
    it3.ndim = nd
    for i in range(nd):
        it3.shape[i] = it.shape[i]
        it3.strides[0][i] = it.strides[1][i]
        it3.strides[1][i] = it.strides[0][i]
        it3.strides[2][i] = it.strides[1][i]
    it3.ptrs[0] = it.ptrs[1]
    it3.ptrs[1] = it.ptrs[0]
    it3.ptrs[2] = it.ptrs[1]
    with nogil:
        if nd == 2 and it.strides[1][0] == 0 and nt > 1 and total >= PAR_MIN \
                and it.shape[0] >= 4 * nt and _rows_parallel(&it, bf, x.itemsize, nt) == 0:
            pass
        elif nt > 1 and total >= PAR_MIN and inner >= 64 * nt:
            nchunks = split_work(inner, nt, 16, 64, &chunk)
            for c in prange(nchunks, schedule="dynamic", num_threads=nt):
                _run_columns(&it3, bf, c * chunk, chunk)
        else:
            run_range(&it3, bf, 0, outer)
    return 0


cdef void _rows_into(loop_fn f, char* acc, Py_ssize_t acc_step, char* x, Py_ssize_t rs,
                     Py_ssize_t cs, Py_ssize_t cols, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """acc = op(acc, x[r]) for rows lo..hi of x (acc: one row, element step acc_step)."""
    cdef NdIter sub
    sub.nargs = 3
    sub.ndim = 2
    sub.shape[0] = hi
    sub.shape[1] = cols
    sub.ptrs[0] = acc
    sub.ptrs[1] = x
    sub.ptrs[2] = acc
    sub.strides[0][0] = 0
    sub.strides[0][1] = acc_step
    sub.strides[1][0] = rs
    sub.strides[1][1] = cs
    sub.strides[2][0] = 0
    sub.strides[2][1] = acc_step
    run_range(&sub, f, lo, hi)


cdef int _rows_parallel(NdIter* it, loop_fn f, Py_ssize_t isz, int nt) noexcept nogil:
    """Reduce a 2-d operand over its first axis with each thread taking a block of
    rows (contiguous streams) into a private row, the rows then combined in block
    order (same answer whatever thread ran which block).  -1: no memory, not done."""
    cdef Py_ssize_t rows = it.shape[0], cols = it.shape[1], chunk, c, j, lo, hi
    cdef Py_ssize_t os = it.strides[1][1]
    cdef char* out = it.ptrs[1]
    cdef char* buf = <char*>malloc(nt * cols * isz)
    if buf == NULL:
        return -1
    for c in range(nt):
        for j in range(cols):
            memcpy(buf + (c * cols + j) * isz, out + j * os, isz)     # the identity
    chunk = (rows + nt - 1) // nt
    for c in prange(nt, schedule="static", num_threads=nt):
        lo = c * chunk
        hi = lo + chunk
        if hi > rows:
            hi = rows
        if lo < hi:
            _rows_into(f, buf + c * cols * isz, isz, it.ptrs[0], it.strides[0][0],
                       it.strides[0][1], cols, lo, hi)
    # the private rows are rows of a (nt, cols) array: reduce them into out, in order
    _rows_into(f, out, os, buf, cols * isz, isz, cols, 0, nt)
    free(buf)
    return 0


cdef void _run_columns(NdIter* it, loop_fn f, Py_ssize_t lo, Py_ssize_t chunk) noexcept nogil:
    cdef NdIter sub
    cdef int k, nd = it.ndim
    cdef Py_ssize_t outer = 1, hi = lo + chunk, i
    if hi > it.shape[nd - 1]:
        hi = it.shape[nd - 1]
    if lo >= hi:
        return
    sub = it[0]
    sub.shape[nd - 1] = hi - lo
    for k in range(sub.nargs):
        sub.ptrs[k] = it.ptrs[k] + lo * it.strides[k][nd - 1]
    for i in range(nd - 1):
        outer *= it.shape[i]
    run_range(&sub, f, 0, outer)

cdef inline void _next_index(NdIter* it, Py_ssize_t* idx) noexcept nogil:
    """Advance operands 0 and 1 of `it` to the next outer index (odometer order)."""
    cdef int d = it.ndim - 1
    while d >= 0:
        idx[d] += 1
        it.ptrs[0] += it.strides[0][d]
        it.ptrs[1] += it.strides[1][d]
        if idx[d] < it.shape[d]:
            return
        it.ptrs[0] -= it.strides[0][d] * it.shape[d]
        it.ptrs[1] -= it.strides[1][d] * it.shape[d]
        idx[d] = 0
        d -= 1

# ---------------------------------------------------------------- entry points

cdef int _acc_code(int rop, int code):
    """dtype the reduction runs in (inputs of other dtypes are cast first)."""
    cdef char k = KIND[code]
    if rop == R_SUM or rop == R_PROD:
        if k == b'b' or k == b'i':
            return T_INT64
        if k == b'u':
            return T_UINT64
        if is_half(code):
            return T_FLOAT32
        return code
    if is_half(code):
        return T_FLOAT32
    return code


def reduce(x, int rop, axes, int out_code=-1):
    """Reduce `x` over `axes` (a tuple of non-negative ints) with op `rop`
    (0 sum, 1 prod, 2 max, 3 min).  Returns an array without the reduced axes,
    in dtype out_code (or the accumulation dtype when -1).  Complex inputs and
    pairs without a Cython kernel go through NumPy on a view."""
    cdef ndarray a = as_ndarray(x), res
    cdef bint reduced[MAXDIM]
    cdef Py_ssize_t shape[MAXDIM]
    cdef int i, n = 0, acc
    for i in range(a.ndim):
        reduced[i] = False
    for ax in axes:
        reduced[<int>ax] = True
    for i in range(a.ndim):
        if not reduced[i]:
            shape[n] = a.shape[i]
            n += 1
    acc = _acc_code(rop, a.tcode)
    if LINE[rop][acc] == NULL:
        return None                      # caller falls back to NumPy
    if a.tcode != acc:
        a = cast(a, acc)
    res = new_empty(acc, n, shape)
    assign(res, _identity(rop, acc))
    _reduce_into(a, res, rop, reduced)
    if out_code >= 0 and out_code != acc:
        res = cast(res, out_code)
    return res


def sum_all_fast(x):
    """Sum of every element of a C-contiguous float32/float64 array (0-d result)."""
    cdef ndarray a = <ndarray?>x
    cdef ndarray res
    cdef bint reduced[MAXDIM]
    cdef int i
    if not a.c_contig or (a.tcode != T_FLOAT32 and a.tcode != T_FLOAT64):
        return None
    res = new_empty(a.tcode, 0, NULL)
    if a.size < 4096:
        if a.tcode == T_FLOAT32:
            (<float*>res.data)[0] = _pw_sum_contig(<float*>a.data, a.size)
        else:
            (<double*>res.data)[0] = _pw_sum_contig(<double*>a.data, a.size)
        return res
    for i in range(a.ndim):
        reduced[i] = True
    memcpy(res.data, b"\0\0\0\0\0\0\0\0", res.itemsize)
    _reduce_into(a, res, R_SUM, reduced)
    return res


def arg_reduce(x, int axis, bint is_max):
    """argmax/argmin along one axis (int64 result without that axis), or None
    when the dtype has no kernel (complex, float16 is widened by the caller)."""
    cdef ndarray a = as_ndarray(x), res
    cdef argline_fn f
    cdef Py_ssize_t shape[MAXDIM]
    cdef NdIter it
    cdef int i, n = 0
    cdef Py_ssize_t outer = 1, inner, total, c, j
    if is_half(a.tcode):
        a = cast(a, T_FLOAT32)
    f = ARGMAX[a.tcode] if is_max else ARGMIN[a.tcode]
    if f == NULL:
        return None
    for i in range(a.ndim):
        if i != axis:
            shape[n] = a.shape[i]
            n += 1
    res = new_empty(T_INT64, n, shape)
    inner = a.shape[axis]
    outer = res.size
    cdef Py_ssize_t s_in = a.strides[axis]
    # iterate over the kept axes with the input's and output's strides
    it.nargs = 2
    it.ndim = 0
    n = 0
    for i in range(a.ndim):
        if i != axis:
            it.shape[it.ndim] = a.shape[i]
            it.strides[0][it.ndim] = a.strides[i]
            it.strides[1][it.ndim] = res.strides[n]
            n += 1
            it.ndim += 1
    if outer == 0:
        return res
    if it.ndim == 0:
        (<int64_t*>res.data)[0] = f(NULL, a.data, inner, s_in)
        return res
    cdef Py_ssize_t idx[MAXDIM]
    cdef int d
    for d in range(it.ndim):
        idx[d] = 0
    it.ptrs[0] = a.data
    it.ptrs[1] = res.data
    with nogil:
        for c in range(outer):
            (<int64_t*>it.ptrs[1])[0] = f(NULL, it.ptrs[0], inner, s_in)
            _next_index(&it, idx)
    return res


def cumulative(x, int axis, bint is_prod, int acc_code):
    """Running sum/product along `axis` in dtype acc_code (int64, uint64,
    float32 or float64); None when that dtype has no kernel."""
    cdef ndarray a = as_ndarray(x), res
    cdef cumline_fn f = CUMPROD[acc_code] if is_prod else CUMSUM[acc_code]
    cdef Py_ssize_t idx[MAXDIM]
    cdef Py_ssize_t outer = 1, inner, c
    cdef int i
    cdef NdIter it
    if f == NULL:
        return None
    if a.tcode != acc_code:
        a = cast(a, acc_code)
    res = new_empty(acc_code, a.ndim, a.shape)
    if a.size == 0:
        return res
    inner = a.shape[axis]
    it.ndim = 0
    for i in range(a.ndim):
        if i != axis:
            it.shape[it.ndim] = a.shape[i]
            it.strides[0][it.ndim] = a.strides[i]
            it.strides[1][it.ndim] = res.strides[i]
            idx[it.ndim] = 0
            outer *= a.shape[i]
            it.ndim += 1
    cdef Py_ssize_t s_in = a.strides[axis], s_out = res.strides[axis]
    it.ptrs[0] = a.data
    it.ptrs[1] = res.data
    with nogil:
        for c in range(outer):
            f(it.ptrs[1], s_out, it.ptrs[0], s_in, inner)
            _next_index(&it, idx)
    return res
