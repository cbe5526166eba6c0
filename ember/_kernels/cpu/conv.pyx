# cython: language_level=3
"""im2col / col2im for convolutions (float32 / float64).

A 1-d convolution is a 2-d one with a unit height.  The column buffer holds,
for sample ``n``, channel ``c`` and kernel tap ``(i, j)``, the row
``r = (c*kh + i)*kw + j`` of ``oh*ow`` input values that tap sees (zero where
it falls in the padding).  Rows live at ``col + n*sn + r*sr``, so the caller
picks the layout: ``(N, C*kh*kw, L)`` (``sn = C*kh*kw*L``, ``sr = L``) or
``(C*kh*kw, N*L)`` (``sn = L``, ``sr = N*L``).

Work is split over (sample, channel) planes with OpenMP when there is enough
of it; each plane of the image belongs to one thread, so col2im accumulates
without races.  Only the top/left padding enters here: the output size the
caller chose decides how far the bottom/right padding reaches.
"""
cimport cython
cimport numpy as cnp
from cython.parallel cimport prange
from libc.string cimport memset, memcpy

cnp.import_array()

ctypedef fused real:
    float
    double

# Below this many column elements one thread does the work: OpenMP's fork and
# join cost more than they save.
cdef Py_ssize_t PAR_MIN = 65536


cdef inline void _tap_range(int W, int OW, int sw, int off, int* ox0, int* ox1) noexcept nogil:
    """The outputs ox with 0 <= ox*sw + off < W form [ox0, ox1)."""
    cdef int a, b
    if off >= 0:
        a = 0
    else:
        a = (-off + sw - 1) // sw
    if W - 1 - off < 0:
        b = 0
    else:
        b = (W - 1 - off) // sw + 1
    if b > OW:
        b = OW
    if a > b:
        a = b
    ox0[0] = a
    ox1[0] = b


cdef void _im2col_plane(const real* xp, real* cp, Py_ssize_t sr, int H, int W,
                        int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                        int OH, int OW) noexcept nogil:
    cdef int i, j, oy, ox, iy, off, ox0, ox1
    cdef real* row
    cdef real* r
    cdef const real* xr
    for i in range(kh):
        for j in range(kw):
            row = cp + (i * kw + j) * sr
            off = j * dw - pw
            _tap_range(W, OW, sw, off, &ox0, &ox1)
            for oy in range(OH):
                iy = oy * sh - ph + i * dh
                r = row + <Py_ssize_t>oy * OW
                if iy < 0 or iy >= H:
                    memset(r, 0, OW * sizeof(real))
                    continue
                if ox0 > 0:
                    memset(r, 0, ox0 * sizeof(real))
                if ox1 < OW:
                    memset(r + ox1, 0, (OW - ox1) * sizeof(real))
                xr = xp + <Py_ssize_t>iy * W + off
                if sw == 1:
                    memcpy(r + ox0, xr + ox0, (ox1 - ox0) * sizeof(real))
                elif sw == 2:
                    for ox in range(ox0, ox1):
                        r[ox] = xr[2 * ox]
                else:
                    for ox in range(ox0, ox1):
                        r[ox] = xr[ox * sw]


cdef void _col2im_plane(const real* cp, real* xp, Py_ssize_t sr, int H, int W,
                        int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                        int OH, int OW) noexcept nogil:
    cdef int i, j, oy, ox, iy, off, ox0, ox1
    cdef const real* row
    cdef const real* r
    cdef real* xr
    memset(xp, 0, <Py_ssize_t>H * W * sizeof(real))
    for i in range(kh):
        for j in range(kw):
            row = cp + (i * kw + j) * sr
            off = j * dw - pw
            _tap_range(W, OW, sw, off, &ox0, &ox1)
            for oy in range(OH):
                iy = oy * sh - ph + i * dh
                if iy < 0 or iy >= H:
                    continue
                r = row + <Py_ssize_t>oy * OW
                xr = xp + <Py_ssize_t>iy * W + off
                if sw == 1:
                    for ox in range(ox0, ox1):
                        xr[ox] += r[ox]
                else:
                    for ox in range(ox0, ox1):
                        xr[ox * sw] += r[ox]


cdef void _im2col(const real* x, real* col, Py_ssize_t N, Py_ssize_t C, int H, int W,
                  int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                  int OH, int OW, Py_ssize_t sn, Py_ssize_t sr, bint par) noexcept nogil:
    cdef Py_ssize_t t, n, c, plane = <Py_ssize_t>H * W, ktaps = <Py_ssize_t>kh * kw
    if par:
        for t in prange(N * C, schedule="static"):
            n = t // C
            c = t - n * C
            _im2col_plane(x + t * plane, col + n * sn + c * ktaps * sr, sr, H, W,
                          kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)
    else:
        for t in range(N * C):
            n = t // C
            c = t - n * C
            _im2col_plane(x + t * plane, col + n * sn + c * ktaps * sr, sr, H, W,
                          kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)


cdef void _col2im(const real* col, real* x, Py_ssize_t N, Py_ssize_t C, int H, int W,
                  int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                  int OH, int OW, Py_ssize_t sn, Py_ssize_t sr, bint par) noexcept nogil:
    cdef Py_ssize_t t, n, c, plane = <Py_ssize_t>H * W, ktaps = <Py_ssize_t>kh * kw
    if par:
        for t in prange(N * C, schedule="static"):
            n = t // C
            c = t - n * C
            _col2im_plane(col + n * sn + c * ktaps * sr, x + t * plane, sr, H, W,
                          kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)
    else:
        for t in range(N * C):
            n = t // C
            c = t - n * C
            _col2im_plane(col + n * sn + c * ktaps * sr, x + t * plane, sr, H, W,
                          kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)


cdef int _check(str op, cnp.ndarray img, cnp.ndarray col, Py_ssize_t need) except -1:
    if cnp.PyArray_NDIM(img) != 4:
        raise ValueError(f"{op}: the image must be 4-d (N, C, H, W), got {img.ndim}-d")
    if not cnp.PyArray_IS_C_CONTIGUOUS(img) or not cnp.PyArray_IS_C_CONTIGUOUS(col):
        raise ValueError(f"{op}: image and column buffers must be C-contiguous")
    if cnp.PyArray_TYPE(img) != cnp.PyArray_TYPE(col):
        raise TypeError(f"{op}: image dtype {img.dtype} and column dtype {col.dtype} differ")
    t = cnp.PyArray_TYPE(img)
    if t != cnp.NPY_FLOAT and t != cnp.NPY_DOUBLE:
        raise TypeError(f"{op}: only float32 and float64 are supported, got {img.dtype}")
    if cnp.PyArray_SIZE(col) < need:
        raise ValueError(f"{op}: column buffer too small ({cnp.PyArray_SIZE(col)} < {need})")
    return 0


cdef Py_ssize_t _extent(Py_ssize_t N, Py_ssize_t C, int kh, int kw, int OH, int OW,
                        Py_ssize_t sn, Py_ssize_t sr):
    """One past the largest column offset the kernels touch."""
    if N == 0 or C == 0 or OH == 0 or OW == 0:
        return 0
    return (N - 1) * sn + (C * kh * kw - 1) * sr + <Py_ssize_t>OH * OW


def im2col(cnp.ndarray x, cnp.ndarray col, int kh, int kw, int sh, int sw, int ph, int pw,
           int dh, int dw, int OH, int OW, Py_ssize_t sn, Py_ssize_t sr):
    """Fill `col` (C-contiguous, rows at n*sn + r*sr) from `x` (N, C, H, W)."""
    _check("im2col", x, col, 0)
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1]
    cdef int H = <int>x.shape[2], W = <int>x.shape[3]
    if cnp.PyArray_SIZE(col) < _extent(N, C, kh, kw, OH, OW, sn, sr):
        raise ValueError("im2col: column buffer too small for the requested layout")
    cdef bint par = N * C > 1 and N * C * kh * kw * <Py_ssize_t>OH * OW >= PAR_MIN
    if cnp.PyArray_TYPE(x) == cnp.NPY_FLOAT:
        with nogil:
            _im2col(<const float*>cnp.PyArray_DATA(x), <float*>cnp.PyArray_DATA(col), N, C, H, W,
                    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, sn, sr, par)
    else:
        with nogil:
            _im2col(<const double*>cnp.PyArray_DATA(x), <double*>cnp.PyArray_DATA(col), N, C, H,
                    W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, sn, sr, par)


def col2im(cnp.ndarray col, cnp.ndarray x, int kh, int kw, int sh, int sw, int ph, int pw,
           int dh, int dw, int OH, int OW, Py_ssize_t sn, Py_ssize_t sr):
    """x (N, C, H, W) = the sum of `col`'s entries over the taps that read each pixel
    (x is overwritten, not accumulated into)."""
    _check("col2im", x, col, 0)
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1]
    cdef int H = <int>x.shape[2], W = <int>x.shape[3]
    if cnp.PyArray_SIZE(col) < _extent(N, C, kh, kw, OH, OW, sn, sr):
        raise ValueError("col2im: column buffer too small for the requested layout")
    cdef bint par = N * C > 1 and N * C * kh * kw * <Py_ssize_t>OH * OW >= PAR_MIN
    if cnp.PyArray_TYPE(x) == cnp.NPY_FLOAT:
        with nogil:
            _col2im(<const float*>cnp.PyArray_DATA(col), <float*>cnp.PyArray_DATA(x), N, C, H, W,
                    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, sn, sr, par)
    else:
        with nogil:
            _col2im(<const double*>cnp.PyArray_DATA(col), <double*>cnp.PyArray_DATA(x), N, C, H,
                    W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, sn, sr, par)
