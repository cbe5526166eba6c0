# cython: language_level=3
"""Pooling kernels (float32 / float64) on a stack of planes (P, H, W).

Any leading axes (batch, channels) are flattened into P by the caller; a 1-d
pooling is a 2-d one with a unit height.  Each plane is independent, so the
work is split over planes with OpenMP when there is enough of it, and
backward kernels scatter into their own plane without races.

The arithmetic follows PyTorch's CPU kernels: max pooling keeps the first
maximum of a window (a NaN replaces the running maximum, so the last NaN
wins) and records its flat index ``iy*W + ix`` in the plane; average pooling
sums the window in the input precision and divides by the window size
(clipped to the padded input, or only the real input when
``count_include_pad`` is off, or ``divisor_override``); adaptive pooling uses
windows ``[floor(o*I/O), ceil((o+1)*I/O))``.
"""
cimport cython
cimport numpy as cnp
from cython.parallel cimport prange
from libc.string cimport memset
from libc.stdint cimport int64_t
from libc.math cimport INFINITY
from ember._core.elementwise cimport num_threads

cnp.import_array()

cdef extern from "pool_simd.h" nogil:
    int emb_pool_has_avx512()
    void emb_maxpool_k2_f32(int simd, const float* xp, float* op, int64_t* ip, int W, int OH,
                            int OW)

ctypedef fused real:
    float
    double

# AVX-512 for the 2x2 / stride-2 float32 max pooling (asked once; 0 selects SSE2)
cdef int _POOL_SIMD = emb_pool_has_avx512()


def _set_pool_simd(int on):
    """Switch the AVX-512 2x2 max pooling off (0) or back on (1, where the CPU has it);
    returns the previous setting (for tests comparing the two paths)."""
    global _POOL_SIMD
    old = _POOL_SIMD
    _POOL_SIMD = on and emb_pool_has_avx512()
    return old


# Below this many elements (input + output) one thread does the work.
cdef Py_ssize_t PAR_MIN = 65536


cdef inline int _imin(int a, int b) noexcept nogil:
    return a if a < b else b


cdef inline int _imax(int a, int b) noexcept nogil:
    return a if a > b else b


# ---------------------------------------------------------------- max pooling

cdef void _max_plane(const real* xp, real* op, int64_t* ip, int H, int W, int OH, int OW,
                     int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw) noexcept nogil:
    cdef int oy, ox, ih, iw, ih0, ih1, iw0, iw1
    cdef int64_t best_i, k
    cdef real best, v
    cdef bint t
    for oy in range(OH):
        ih0 = oy * sh - ph
        ih1 = _imin(ih0 + (kh - 1) * dh + 1, H)
        while ih0 < 0:
            ih0 = ih0 + dh
        for ox in range(OW):
            iw0 = ox * sw - pw
            iw1 = _imin(iw0 + (kw - 1) * dw + 1, W)
            while iw0 < 0:
                iw0 = iw0 + dw
            best_i = <int64_t>ih0 * W + iw0
            best = -INFINITY
            ih = ih0
            while ih < ih1:
                iw = iw0
                while iw < iw1:
                    k = <int64_t>ih * W + iw
                    v = xp[k]
                    t = (v > best) | (v != v)
                    best = v if t else best
                    best_i = k if t else best_i
                    iw = iw + dw
                ih = ih + dh
            op[<Py_ssize_t>oy * OW + ox] = best
            ip[<Py_ssize_t>oy * OW + ox] = best_i


cdef void _max_plane_k2(const real* xp, real* op, int64_t* ip, int H, int W, int OH,
                        int OW) noexcept nogil:
    """kernel 2, stride 2, no padding or dilation, every window inside: the common case."""
    cdef int oy, ox
    cdef int64_t k, best_i
    cdef real best, v
    if real is float:
        emb_maxpool_k2_f32(_POOL_SIMD, xp, op, ip, W, OH, OW)
        return
    for oy in range(OH):
        for ox in range(OW):
            k = <int64_t>(2 * oy) * W + 2 * ox
            best = xp[k]
            best_i = k
            v = xp[k + 1]
            if v > best or v != v:
                best = v
                best_i = k + 1
            v = xp[k + W]
            if v > best or v != v:
                best = v
                best_i = k + W
            v = xp[k + W + 1]
            if v > best or v != v:
                best = v
                best_i = k + W + 1
            op[<Py_ssize_t>oy * OW + ox] = best
            ip[<Py_ssize_t>oy * OW + ox] = best_i


cdef void _max_fwd(const real* x, real* out, int64_t* idx, Py_ssize_t P, int H, int W,
                   int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                   int dw, bint par) noexcept nogil:
    cdef Py_ssize_t p, plane = <Py_ssize_t>H * W, oplane = <Py_ssize_t>OH * OW
    cdef bint k2 = (kh == 2 and kw == 2 and sh == 2 and sw == 2 and ph == 0 and pw == 0
                    and dh == 1 and dw == 1 and 2 * OH <= H and 2 * OW <= W)
    if par:
        for p in prange(P, schedule="static", num_threads=num_threads()):
            if k2:
                _max_plane_k2(x + p * plane, out + p * oplane, idx + p * oplane, H, W, OH, OW)
            else:
                _max_plane(x + p * plane, out + p * oplane, idx + p * oplane, H, W, OH, OW,
                           kh, kw, sh, sw, ph, pw, dh, dw)
    else:
        for p in range(P):
            if k2:
                _max_plane_k2(x + p * plane, out + p * oplane, idx + p * oplane, H, W, OH, OW)
            else:
                _max_plane(x + p * plane, out + p * oplane, idx + p * oplane, H, W, OH, OW,
                           kh, kw, sh, sw, ph, pw, dh, dw)


cdef void _adaptive_max_plane(const real* xp, real* op, int64_t* ip, int H, int W, int OH,
                              int OW) noexcept nogil:
    cdef int oy, ox, ih, iw, ih0, ih1, iw0, iw1
    cdef int64_t best_i, k
    cdef real best, v
    cdef bint t
    for oy in range(OH):
        ih0 = (oy * H) // OH
        ih1 = ((oy + 1) * H + OH - 1) // OH
        for ox in range(OW):
            iw0 = (ox * W) // OW
            iw1 = ((ox + 1) * W + OW - 1) // OW
            best_i = <int64_t>ih0 * W + iw0
            best = -INFINITY
            for ih in range(ih0, ih1):
                for iw in range(iw0, iw1):
                    k = <int64_t>ih * W + iw
                    v = xp[k]
                    t = (v > best) | (v != v)
                    best = v if t else best
                    best_i = k if t else best_i
            op[<Py_ssize_t>oy * OW + ox] = best
            ip[<Py_ssize_t>oy * OW + ox] = best_i


cdef void _adaptive_max_fwd(const real* x, real* out, int64_t* idx, Py_ssize_t P, int H, int W,
                            int OH, int OW, bint par) noexcept nogil:
    cdef Py_ssize_t p, plane = <Py_ssize_t>H * W, oplane = <Py_ssize_t>OH * OW
    if par:
        for p in prange(P, schedule="static", num_threads=num_threads()):
            _adaptive_max_plane(x + p * plane, out + p * oplane, idx + p * oplane, H, W, OH, OW)
    else:
        for p in range(P):
            _adaptive_max_plane(x + p * plane, out + p * oplane, idx + p * oplane, H, W, OH, OW)


cdef void _scatter(const real* g, const int64_t* idx, real* dx, Py_ssize_t P, Py_ssize_t L,
                   Py_ssize_t plane, bint par) noexcept nogil:
    cdef Py_ssize_t p, l
    cdef int64_t k
    cdef real* d
    if par:
        for p in prange(P, schedule="static", num_threads=num_threads()):
            d = dx + p * plane
            memset(d, 0, plane * sizeof(real))
            for l in range(L):
                k = idx[p * L + l]
                if 0 <= k < plane:
                    d[k] += g[p * L + l]
    else:
        for p in range(P):
            d = dx + p * plane
            memset(d, 0, plane * sizeof(real))
            for l in range(L):
                k = idx[p * L + l]
                if 0 <= k < plane:
                    d[k] += g[p * L + l]


cdef void _gather(const real* src, const int64_t* idx, real* out, Py_ssize_t P, Py_ssize_t L,
                  Py_ssize_t plane, bint par) noexcept nogil:
    cdef Py_ssize_t p, l
    cdef int64_t k
    if par:
        for p in prange(P, schedule="static", num_threads=num_threads()):
            for l in range(L):
                k = idx[p * L + l]
                out[p * L + l] = src[p * plane + k] if 0 <= k < plane else 0
    else:
        for p in range(P):
            for l in range(L):
                k = idx[p * L + l]
                out[p * L + l] = src[p * plane + k] if 0 <= k < plane else 0


# ------------------------------------------------------------ average pooling

cdef void _avg_plane(const real* xp, real* op, const real* gp, real* dp, int H, int W, int OH,
                     int OW, int kh, int kw, int sh, int sw, int ph, int pw, bint include_pad,
                     int divisor, bint backward) noexcept nogil:
    """Forward (op = window means of xp) or backward (dp += gp spread over windows)."""
    cdef int oy, ox, ih, iw, ih0, ih1, iw0, iw1, pool_size
    cdef real s, div, gd
    if backward:
        memset(dp, 0, <Py_ssize_t>H * W * sizeof(real))
    for oy in range(OH):
        for ox in range(OW):
            ih0 = oy * sh - ph
            iw0 = ox * sw - pw
            ih1 = _imin(ih0 + kh, H + ph)
            iw1 = _imin(iw0 + kw, W + pw)
            pool_size = (ih1 - ih0) * (iw1 - iw0)
            ih0 = _imax(ih0, 0)
            iw0 = _imax(iw0, 0)
            ih1 = _imin(ih1, H)
            iw1 = _imin(iw1, W)
            if ih0 >= ih1 or iw0 >= iw1:
                if not backward:
                    op[<Py_ssize_t>oy * OW + ox] = 0
                continue
            if divisor != 0:
                div = <real>divisor
            elif include_pad:
                div = <real>pool_size
            else:
                div = <real>((ih1 - ih0) * (iw1 - iw0))
            if backward:
                gd = gp[<Py_ssize_t>oy * OW + ox] / div
                for ih in range(ih0, ih1):
                    for iw in range(iw0, iw1):
                        dp[<Py_ssize_t>ih * W + iw] += gd
            else:
                s = 0
                for ih in range(ih0, ih1):
                    for iw in range(iw0, iw1):
                        s = s + xp[<Py_ssize_t>ih * W + iw]
                op[<Py_ssize_t>oy * OW + ox] = s / div


cdef void _avg(const real* x, real* out, const real* g, real* dx, Py_ssize_t P, int H, int W,
               int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, bint include_pad,
               int divisor, bint backward, bint par) noexcept nogil:
    cdef Py_ssize_t p, plane = <Py_ssize_t>H * W, oplane = <Py_ssize_t>OH * OW
    if par:
        for p in prange(P, schedule="static", num_threads=num_threads()):
            _avg_plane(x + p * plane, out + p * oplane, g + p * oplane, dx + p * plane, H, W,
                       OH, OW, kh, kw, sh, sw, ph, pw, include_pad, divisor, backward)
    else:
        for p in range(P):
            _avg_plane(x + p * plane, out + p * oplane, g + p * oplane, dx + p * plane, H, W,
                       OH, OW, kh, kw, sh, sw, ph, pw, include_pad, divisor, backward)


cdef void _adaptive_avg_plane(const real* xp, real* op, const real* gp, real* dp, int H, int W,
                              int OH, int OW, bint backward) noexcept nogil:
    cdef int oy, ox, ih, iw, ih0, ih1, iw0, iw1
    cdef real s, gd
    cdef Py_ssize_t i, n
    if backward:
        memset(dp, 0, <Py_ssize_t>H * W * sizeof(real))
    if OH == 1 and OW == 1 and not backward:        # global average: one long sum
        n = <Py_ssize_t>H * W
        s = 0
        for i in range(n):
            s = s + xp[i]
        op[0] = s / H / W
        return
    for oy in range(OH):
        ih0 = (oy * H) // OH
        ih1 = ((oy + 1) * H + OH - 1) // OH
        for ox in range(OW):
            iw0 = (ox * W) // OW
            iw1 = ((ox + 1) * W + OW - 1) // OW
            if backward:
                gd = gp[<Py_ssize_t>oy * OW + ox] / (ih1 - ih0) / (iw1 - iw0)
                for ih in range(ih0, ih1):
                    for iw in range(iw0, iw1):
                        dp[<Py_ssize_t>ih * W + iw] += gd
            else:
                s = 0
                for ih in range(ih0, ih1):
                    for iw in range(iw0, iw1):
                        s = s + xp[<Py_ssize_t>ih * W + iw]
                op[<Py_ssize_t>oy * OW + ox] = s / (ih1 - ih0) / (iw1 - iw0)


cdef void _adaptive_avg(const real* x, real* out, const real* g, real* dx, Py_ssize_t P, int H,
                        int W, int OH, int OW, bint backward, bint par) noexcept nogil:
    cdef Py_ssize_t p, plane = <Py_ssize_t>H * W, oplane = <Py_ssize_t>OH * OW
    if par:
        for p in prange(P, schedule="static", num_threads=num_threads()):
            _adaptive_avg_plane(x + p * plane, out + p * oplane, g + p * oplane, dx + p * plane,
                                H, W, OH, OW, backward)
    else:
        for p in range(P):
            _adaptive_avg_plane(x + p * plane, out + p * oplane, g + p * oplane, dx + p * plane,
                                H, W, OH, OW, backward)


# ------------------------------------------------------------ Python entries

cdef int _real_type(str op, cnp.ndarray a, cnp.ndarray b) except -1:
    """The shared float dtype (NPY_FLOAT / NPY_DOUBLE) of two C-contiguous 3-d arrays."""
    if cnp.PyArray_NDIM(a) != 3 or cnp.PyArray_NDIM(b) != 3:
        raise ValueError(f"{op}: expected 3-d (planes, H, W) arrays, got {a.ndim}-d and "
                         f"{b.ndim}-d")
    if not cnp.PyArray_IS_C_CONTIGUOUS(a) or not cnp.PyArray_IS_C_CONTIGUOUS(b):
        raise ValueError(f"{op}: arrays must be C-contiguous")
    t = cnp.PyArray_TYPE(a)
    if t != cnp.PyArray_TYPE(b):
        raise TypeError(f"{op}: dtypes {a.dtype} and {b.dtype} differ")
    if t != cnp.NPY_FLOAT and t != cnp.NPY_DOUBLE:
        raise TypeError(f"{op}: only float32 and float64 are supported, got {a.dtype}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{op}: plane counts differ ({a.shape[0]} vs {b.shape[0]})")
    return t


cdef int _check_idx(str op, cnp.ndarray idx, cnp.ndarray like) except -1:
    if cnp.PyArray_TYPE(idx) != cnp.NPY_INT64 or not cnp.PyArray_IS_C_CONTIGUOUS(idx):
        raise TypeError(f"{op}: indices must be a C-contiguous int64 array, got {idx.dtype}")
    if cnp.PyArray_SIZE(idx) != cnp.PyArray_SIZE(like):
        raise ValueError(f"{op}: indices have {idx.size} elements, expected {like.size}")
    return 0


cdef inline bint _par(Py_ssize_t P, Py_ssize_t work) noexcept:
    return P > 1 and work >= PAR_MIN


def max_pool2d_forward(cnp.ndarray x not None, cnp.ndarray out not None, cnp.ndarray idx not None, int kh, int kw, int sh,
                       int sw, int ph, int pw, int dh, int dw):
    """out, idx (P, OH, OW) = window maxima of x (P, H, W) and their flat indices."""
    t = _real_type("max_pool2d", x, out)
    _check_idx("max_pool2d", idx, out)
    cdef Py_ssize_t P = x.shape[0]
    cdef int H = <int>x.shape[1], W = <int>x.shape[2], OH = <int>out.shape[1]
    cdef int OW = <int>out.shape[2]
    cdef bint par = _par(P, cnp.PyArray_SIZE(x) + cnp.PyArray_SIZE(out))
    cdef int64_t* ip = <int64_t*>cnp.PyArray_DATA(idx)
    if t == cnp.NPY_FLOAT:
        with nogil:
            _max_fwd(<const float*>cnp.PyArray_DATA(x), <float*>cnp.PyArray_DATA(out), ip, P, H,
                     W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, par)
    else:
        with nogil:
            _max_fwd(<const double*>cnp.PyArray_DATA(x), <double*>cnp.PyArray_DATA(out), ip, P,
                     H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, par)


def adaptive_max_pool2d_forward(cnp.ndarray x not None, cnp.ndarray out not None, cnp.ndarray idx not None):
    """out, idx (P, OH, OW) = adaptive-window maxima of x (P, H, W) and their flat indices."""
    t = _real_type("adaptive_max_pool2d", x, out)
    _check_idx("adaptive_max_pool2d", idx, out)
    cdef Py_ssize_t P = x.shape[0]
    cdef int H = <int>x.shape[1], W = <int>x.shape[2], OH = <int>out.shape[1]
    cdef int OW = <int>out.shape[2]
    cdef bint par = _par(P, cnp.PyArray_SIZE(x) + cnp.PyArray_SIZE(out))
    cdef int64_t* ip = <int64_t*>cnp.PyArray_DATA(idx)
    if t == cnp.NPY_FLOAT:
        with nogil:
            _adaptive_max_fwd(<const float*>cnp.PyArray_DATA(x), <float*>cnp.PyArray_DATA(out),
                              ip, P, H, W, OH, OW, par)
    else:
        with nogil:
            _adaptive_max_fwd(<const double*>cnp.PyArray_DATA(x),
                              <double*>cnp.PyArray_DATA(out), ip, P, H, W, OH, OW, par)


def index_scatter(cnp.ndarray g not None, cnp.ndarray idx not None, cnp.ndarray dx not None):
    """dx (P, H, W) = zeros, then dx[p].flat[idx[p, l]] += g[p, l] (g, idx: (P, ..., ...))."""
    t = _real_type("max_pool backward", g, dx)
    _check_idx("max_pool backward", idx, g)
    cdef Py_ssize_t P = g.shape[0], L = g.shape[1] * g.shape[2]
    cdef Py_ssize_t plane = dx.shape[1] * dx.shape[2]
    cdef bint par = _par(P, cnp.PyArray_SIZE(g) + cnp.PyArray_SIZE(dx))
    cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
    if t == cnp.NPY_FLOAT:
        with nogil:
            _scatter(<const float*>cnp.PyArray_DATA(g), ip, <float*>cnp.PyArray_DATA(dx), P, L,
                     plane, par)
    else:
        with nogil:
            _scatter(<const double*>cnp.PyArray_DATA(g), ip, <double*>cnp.PyArray_DATA(dx), P, L,
                     plane, par)


def index_gather(cnp.ndarray src not None, cnp.ndarray idx not None, cnp.ndarray out not None):
    """out[p, l] = src[p].flat[idx[p, l]] (src (P, H, W); idx, out (P, ..., ...))."""
    t = _real_type("max_pool gather", src, out)
    _check_idx("max_pool gather", idx, out)
    cdef Py_ssize_t P = src.shape[0], L = out.shape[1] * out.shape[2]
    cdef Py_ssize_t plane = src.shape[1] * src.shape[2]
    cdef bint par = _par(P, 2 * cnp.PyArray_SIZE(out))
    cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
    if t == cnp.NPY_FLOAT:
        with nogil:
            _gather(<const float*>cnp.PyArray_DATA(src), ip, <float*>cnp.PyArray_DATA(out), P, L,
                    plane, par)
    else:
        with nogil:
            _gather(<const double*>cnp.PyArray_DATA(src), ip, <double*>cnp.PyArray_DATA(out), P,
                    L, plane, par)


def avg_pool2d_forward(cnp.ndarray x not None, cnp.ndarray out not None, int kh, int kw, int sh, int sw, int ph,
                       int pw, bint count_include_pad, int divisor):
    """out (P, OH, OW) = window averages of x (P, H, W); divisor 0: no override."""
    t = _real_type("avg_pool2d", x, out)
    cdef Py_ssize_t P = x.shape[0]
    cdef int H = <int>x.shape[1], W = <int>x.shape[2], OH = <int>out.shape[1]
    cdef int OW = <int>out.shape[2]
    cdef bint par = _par(P, cnp.PyArray_SIZE(x) + cnp.PyArray_SIZE(out))
    if t == cnp.NPY_FLOAT:
        with nogil:
            _avg(<const float*>cnp.PyArray_DATA(x), <float*>cnp.PyArray_DATA(out),
                 <const float*>cnp.PyArray_DATA(out), <float*>cnp.PyArray_DATA(out), P, H, W, OH, OW, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, False, par)
    else:
        with nogil:
            _avg(<const double*>cnp.PyArray_DATA(x), <double*>cnp.PyArray_DATA(out),
                 <const double*>cnp.PyArray_DATA(out), <double*>cnp.PyArray_DATA(out), P, H, W, OH, OW, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, False, par)


def avg_pool2d_backward(cnp.ndarray g not None, cnp.ndarray dx not None, int kh, int kw, int sh, int sw, int ph,
                        int pw, bint count_include_pad, int divisor):
    """dx (P, H, W) = the gradient of avg_pool2d for output gradient g (P, OH, OW)."""
    t = _real_type("avg_pool2d backward", g, dx)
    cdef Py_ssize_t P = dx.shape[0]
    cdef int H = <int>dx.shape[1], W = <int>dx.shape[2], OH = <int>g.shape[1]
    cdef int OW = <int>g.shape[2]
    cdef bint par = _par(P, cnp.PyArray_SIZE(g) + cnp.PyArray_SIZE(dx))
    if t == cnp.NPY_FLOAT:
        with nogil:
            _avg(<const float*>cnp.PyArray_DATA(g), <float*>cnp.PyArray_DATA(dx),
                 <const float*>cnp.PyArray_DATA(g),
                 <float*>cnp.PyArray_DATA(dx), P, H, W, OH, OW, kh, kw, sh, sw, ph, pw,
                 count_include_pad, divisor, True, par)
    else:
        with nogil:
            _avg(<const double*>cnp.PyArray_DATA(g), <double*>cnp.PyArray_DATA(dx),
                 <const double*>cnp.PyArray_DATA(g),
                 <double*>cnp.PyArray_DATA(dx), P, H, W, OH, OW, kh, kw, sh, sw, ph, pw,
                 count_include_pad, divisor, True, par)


def adaptive_avg_pool2d_forward(cnp.ndarray x not None, cnp.ndarray out not None):
    """out (P, OH, OW) = adaptive-window averages of x (P, H, W)."""
    t = _real_type("adaptive_avg_pool2d", x, out)
    cdef Py_ssize_t P = x.shape[0]
    cdef int H = <int>x.shape[1], W = <int>x.shape[2], OH = <int>out.shape[1]
    cdef int OW = <int>out.shape[2]
    cdef bint par = _par(P, cnp.PyArray_SIZE(x) + cnp.PyArray_SIZE(out))
    if t == cnp.NPY_FLOAT:
        with nogil:
            _adaptive_avg(<const float*>cnp.PyArray_DATA(x), <float*>cnp.PyArray_DATA(out),
                          <const float*>cnp.PyArray_DATA(out), <float*>cnp.PyArray_DATA(out), P, H, W, OH, OW, False, par)
    else:
        with nogil:
            _adaptive_avg(<const double*>cnp.PyArray_DATA(x), <double*>cnp.PyArray_DATA(out),
                          <const double*>cnp.PyArray_DATA(out), <double*>cnp.PyArray_DATA(out), P, H, W, OH, OW, False, par)


def adaptive_avg_pool2d_backward(cnp.ndarray g not None, cnp.ndarray dx not None):
    """dx (P, H, W) = the gradient of adaptive_avg_pool2d for output gradient g (P, OH, OW)."""
    t = _real_type("adaptive_avg_pool2d backward", g, dx)
    cdef Py_ssize_t P = dx.shape[0]
    cdef int H = <int>dx.shape[1], W = <int>dx.shape[2], OH = <int>g.shape[1]
    cdef int OW = <int>g.shape[2]
    cdef bint par = _par(P, cnp.PyArray_SIZE(g) + cnp.PyArray_SIZE(dx))
    if t == cnp.NPY_FLOAT:
        with nogil:
            _adaptive_avg(<const float*>cnp.PyArray_DATA(g), <float*>cnp.PyArray_DATA(dx),
                          <const float*>cnp.PyArray_DATA(g),
                          <float*>cnp.PyArray_DATA(dx), P, H, W, OH, OW, True, par)
    else:
        with nogil:
            _adaptive_avg(<const double*>cnp.PyArray_DATA(g), <double*>cnp.PyArray_DATA(dx),
                          <const double*>cnp.PyArray_DATA(g),
                          <double*>cnp.PyArray_DATA(dx), P, H, W, OH, OW, True, par)
