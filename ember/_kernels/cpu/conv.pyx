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
from cython.parallel cimport prange, parallel, threadid
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free
from ember._core.elementwise cimport num_threads
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
        for t in prange(N * C, schedule="static", num_threads=num_threads()):
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
        for t in prange(N * C, schedule="static", num_threads=num_threads()):
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


def im2col(cnp.ndarray x not None, cnp.ndarray col not None, int kh, int kw, int sh, int sw, int ph, int pw,
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


def col2im(cnp.ndarray col not None, cnp.ndarray x not None, int kh, int kw, int sh, int sw, int ph, int pw,
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


# ====================================================================== float32 fast path
#
# Direct convolutions on flat, zero-padded sources with the AVX-512 kernels of
# conv_simd.h (see there).  One sample at a time per thread, so every buffer a
# thread touches stays in its cache; no column buffer, no BLAS.  For a stride
# s the padded input is split into s*s phase planes (rows y*s + py, columns
# x*s + px), which turns every tap into a fixed offset; the input gradient is
# computed phase by phase of the gradient image in the same way.

cdef extern from "conv_simd.h" nogil:
    int emb_conv_has_avx512()
    int emb_od_six
    void emb_og(int simd, const float* A, int T, int R, const float* src, const int64_t* off,
                float* out, int64_t ldo, int64_t L)
    void emb_og_acc(int simd, const float* A, int T, int R, const float* src,
                    const int64_t* off, float* out, int64_t ldo, int64_t L)
    void emb_copy_rows(int simd, float* dst, int64_t dp, const float* src, int64_t sp,
                       int64_t rows, int64_t cols)
    void emb_split_rows(int simd, float* dE, float* dO, int64_t dp, const float* src,
                        int64_t sp, int64_t rows, int64_t nE, int64_t nO)
    void emb_interleave_rows(int simd, float* dst, int64_t dp, const float* A, const float* B,
                             int64_t ap, int64_t bp, int64_t rows, int64_t nA, int64_t nB)
    void emb_copy_rows_bias(int simd, float* dst, int64_t dp, const float* src, int64_t sp,
                            int64_t rows, int64_t cols, float bias, int relu)
    void emb_ogc(int simd, const float* A, int T, int R, const float* src, const int64_t* off,
                 float* out, int64_t OH, int64_t OW, int64_t Wq, const float* bias, int relu)
    void emb_odc(int simd, const float* gT, int64_t gn, int R, const float* src, int64_t sn,
                 const int64_t* roff, const int64_t* jo, int Tr, int KW, int NB, int64_t OH,
                 int64_t OW,
                 int64_t Wq, float* dW, int64_t ldw)
    void emb_pixel_major(int simd, const float* g, int64_t O, int64_t P, float* dst)
    void emb_odot(int simd, const float* G, int64_t gr, int64_t gn, int R, const float* src,
                  int64_t sn, const int64_t* off, int T, int64_t Lr, int NB, float* dW,
                  int64_t ldw)

cdef extern from "conv_batch.h" nogil:
    void emb_dxb(int simd, const float* g, const float* w, float* dx, int64_t nb, int64_t O,
                 int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh,
                 int64_t kw, int64_t ph0, int64_t pw0, float* gT)
    void emb_dwb(int simd, const float* x, const float* g, float* dW, int64_t nb, int64_t O,
                 int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw,
                 float* buf)
    void emb_fwb(int simd, const float* x, const float* w, const float* bias, int relu,
                 float* out, int64_t nb, int64_t O, int64_t C, int64_t H, int64_t W, int64_t OH,
                 int64_t OW, int64_t kh, int64_t kw, float* buf)

import numpy as _np

cdef int _SIMD = emb_conv_has_avx512()
cdef int64_t SLACK = 64           # zero floats after every flat source (over-reads land here)


cdef int _CHAN_MODE = 0           # -1: never vectorise the forward over output channels
cdef int _S2_MODE = 0             # -1: stride-2 row moves by the scalar loops (A/B, tests)


def _set_s2_mode(int mode):
    """0: stride-2 (along the rows) sources are split into their two column phases, and
    input-gradient phases interleaved back, a row at a time by the vector row kernels
    (``emb_split_rows`` / ``emb_interleave_rows``); -1: the scalar loops, one phase at a
    time (for A/B measurements and tests).  Returns the previous mode."""
    global _S2_MODE
    old = _S2_MODE
    _S2_MODE = mode
    return old


def _set_chan_mode(int mode):
    """0: the forward vectorises over output channels where ``_chan_pays``; -1: never (for
    A/B measurements and tests)."""
    global _CHAN_MODE
    old = _CHAN_MODE
    _CHAN_MODE = mode
    return old


cpdef bint _chan_pays(int64_t O, int64_t G, int64_t OW, int64_t Wq):
    """Whether the forward runs over output channels (16 per zmm, only real outputs) rather
    than over pixels (every pitch column computed): for one group of a multiple of 16
    channels when over a quarter of the pitch columns are not outputs (LeNet's conv2: 10
    of 14; not ResNet's same-padded 3x3, 32 of 33)."""
    return _SIMD != 0 and _CHAN_MODE == 0 and G == 1 and O % 16 == 0 and O > 0 and \
        4 * OW < 3 * Wq


cdef bint _S2_CHAN = True


def _set_s2_chan(bint on):
    """Switch the stride-2 forms over channels (``_s2_chan``) off / on (A/B, tests);
    returns the previous setting."""
    global _S2_CHAN
    old = _S2_CHAN
    _S2_CHAN = on
    return old


cpdef bint _s2_chan(int64_t R, int64_t G, int64_t sw, int64_t OH, int64_t OW, int64_t Wq):
    """Whether a stride-2 (along the rows) convolution runs over channels (16 per zmm, only
    the OH x OW real outputs) rather than over pixels (OH*Wq lanes, rounded up to 16): one
    group of a multiple of 16 channels (R: output channels for the forward and the weight
    gradient, input channels for the input gradient) where under 0.9 of the pixel form's
    lanes are outputs (ResNet-20 stage 3, 8x8 of 9-wide rows: 64 of 80; not stage 2, 256 of
    272, measured slower there)."""
    return _SIMD != 0 and _S2_MODE >= 0 and _S2_CHAN and sw == 2 and G == 1 and \
        R % 16 == 0 and R > 0 and OH * OW * 10 < 9 * _cdiv(OH * Wq, 16) * 16


def _set_od_six(int on):
    """Whether the weight-gradient kernel (emb_odot) uses 6 x 4 tiles for row counts in
    sixes (1, default) or always 4 x 6 (0; A/B measurements and tests); returns the
    previous setting."""
    global emb_od_six
    old = emb_od_six
    emb_od_six = on
    return old


def fast_available():
    """True when the AVX-512 direct-convolution kernels can run on this CPU."""
    return bool(_SIMD)


cdef inline int64_t _cdiv(int64_t a, int64_t b) noexcept nogil:
    return (a + b - 1) // b


cdef void _build_src(const float* xn, float* src, int64_t C, int64_t H, int64_t W,
                     int64_t ph0, int64_t pw0, int64_t sh, int64_t sw, int64_t Hq,
                     int64_t Wq, int64_t total) noexcept nogil:
    """src = the zero-padded planes of one sample, split into sh*sw phases."""
    cdef int64_t py, px, c, y, x, yy, plane = Hq * Wq, base, x0, x1, y0, y1, nE, nO
    cdef float* row
    cdef const float* xrow
    memset(src, 0, total * sizeof(float))
    for py in range(sh):
        # rows y with 0 <= y*sh + py - ph0 < H
        y0 = 0
        if py - ph0 < 0:
            y0 = _cdiv(ph0 - py, sh)
        y1 = 0
        if H - 1 - py + ph0 >= 0:
            y1 = (H - 1 - py + ph0) // sh + 1
        if y1 > Hq:
            y1 = Hq
        if y1 <= y0:
            continue
        if sw == 2 and _S2_MODE >= 0:
            # stride 2 along the rows: input column 2u + e goes to phase (e + pw0) % 2,
            # column u + (e + pw0) // 2; both phases of a row in one pass (vector permutes)
            nE = min((W + 1) // 2, Wq - pw0 // 2)
            nO = min(W // 2, Wq - (1 + pw0) // 2)
            if nE < 0:
                nE = 0
            if nO < 0:
                nO = 0
            for c in range(C):
                emb_split_rows(_SIMD,
                               src + (py * 2 + pw0 % 2) * C * plane + c * plane + y0 * Wq
                               + pw0 // 2,
                               src + (py * 2 + (1 + pw0) % 2) * C * plane + c * plane + y0 * Wq
                               + (1 + pw0) // 2,
                               Wq, xn + (c * H + y0 * sh + py - ph0) * W, sh * W, y1 - y0, nE,
                               nO)
            continue
        for px in range(sw):
            base = (py * sw + px) * C * plane
            # columns x with 0 <= x*sw + px - pw0 < W
            x0 = 0
            if px - pw0 < 0:
                x0 = _cdiv(pw0 - px, sw)
            x1 = 0
            if W - 1 - px + pw0 >= 0:
                x1 = (W - 1 - px + pw0) // sw + 1
            if x1 > Wq:
                x1 = Wq
            if x1 <= x0:
                continue
            for c in range(C):
                for y in range(y0, y1):
                    yy = y * sh + py - ph0
                    row = src + base + c * plane + y * Wq
                    xrow = xn + (c * H + yy) * W
                    if sw == 1:
                        memcpy(row + x0, xrow + x0 + px - pw0, (x1 - x0) * sizeof(float))
                    else:
                        for x in range(x0, x1):
                            row[x] = xrow[x * sw + px - pw0]


cdef int _f32_check(str op, tuple arrays) except -1:
    for a in arrays:
        if not isinstance(a, _np.ndarray) or a.dtype != _np.float32 or \
                not a.flags.c_contiguous or a.ndim != 4:
            raise TypeError(f"{op}: expected C-contiguous 4-d float32 arrays")
    return 0


_SRC_TABLES = {}


def _src_geometry(int64_t C, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh,
                  int64_t sw, int64_t ph0, int64_t ph1, int64_t pw0, int64_t pw1, int64_t dh,
                  int64_t dw):
    """(Hq, Wq, source length, tap offsets in (c, i, j) order) for the phase-split source
    (cached per geometry)."""
    key = (C, H, W, kh, kw, sh, sw, ph0, ph1, pw0, pw1, dh, dw)
    got = _SRC_TABLES.get(key)
    if got is not None:
        return got
    Hp = H + ph0 + ph1
    Wp = W + pw0 + pw1
    Hq = (Hp + sh - 1) // sh
    Wq = (Wp + sw - 1) // sw
    if sw == 1 and min(pw0, pw1) <= (kw - 1) * dw:
        # stride 1: a row's right padding can be the next row's left padding (the taps of
        # an output column reach pw0 columns left and pw1 right, both into zeros), so
        # rows are W + max(pw0, pw1) wide, not W + pw0 + pw1: fewer outputs computed at
        # the padding (a 3x3 on 8 columns: 9 per row instead of 10)
        Wq = W + max(pw0, pw1)
    plane = Hq * Wq
    c = _np.arange(C, dtype=_np.int64)[:, None, None]
    ii = (_np.arange(kh, dtype=_np.int64) * dh)[None, :, None]
    jj = (_np.arange(kw, dtype=_np.int64) * dw)[None, None, :]
    off = (((ii % sh) * sw + jj % sw) * C * plane + c * plane + (ii // sh) * Wq + jj // sw)
    slack = SLACK + Wq + (kw - 1) * dw
    got = (Hq, Wq, sh * sw * C * plane + slack, _np.ascontiguousarray(off.reshape(-1)))
    if len(_SRC_TABLES) > 256:
        _SRC_TABLES.clear()
    _SRC_TABLES[key] = got
    return got


def conv2d_forward_f32(x, w, b, out, int sh, int sw, int ph0, int ph1, int pw0, int pw1,
                       int dh, int dw, int groups, bint relu=False):
    """out (N, O, OH, OW) = conv2d(x (N, C, H, W), w (O, C/groups, kh, kw)) + b, and with
    ``relu`` max(that, 0) (NaN stays NaN), applied while each sample is in cache."""
    _f32_check("conv2d_forward_f32", (x, w, out))
    if _winograd_forward(x, w, b, out, sh, sw, ph0, pw0, dh, dw, groups, relu):
        return
    if sh == 1 and sw == 1 and ph0 == 0 and ph1 == 0 and pw0 == 0 and pw1 == 0 and \
            _fwd_batch_pays(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0],
                            out.shape[2], out.shape[3], w.shape[2], w.shape[3], dh, dw, groups):
        _forward_batch_f32(x, w, b, out, relu)
        return
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3]
    cdef int64_t OH = out.shape[2], OW = out.shape[3], G = groups
    cdef int64_t Og = O // G, Tg = Cg * kh * kw
    Hq_, Wq_, slen_, off_arr = _src_geometry(C, H, W, kh, kw, sh, sw, ph0, ph1, pw0, pw1, dh, dw)
    cdef int64_t Hq = Hq_, Wq = Wq_, slen = slen_, L = OH * Wq
    # packed weights: group g, tap t, output channel o -> A[(g*Tg + t)*Og + o]
    A_arr = _np.ascontiguousarray(w.reshape(G, Og, Tg).transpose(0, 2, 1))
    bias_arr = None if b is None else _np.ascontiguousarray(b, dtype=_np.float32)
    cdef const float* A = <const float*>cnp.PyArray_DATA(A_arr)
    cdef const int64_t* off = <const int64_t*>cnp.PyArray_DATA(off_arr)
    cdef const float* bias = NULL
    if bias_arr is not None:
        bias = <const float*>cnp.PyArray_DATA(bias_arr)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef float* op = <float*>cnp.PyArray_DATA(out)
    cdef bint chan = _chan_pays(O, G, OW, Wq) or _s2_chan(O, G, sw, OH, OW, Wq)
    cdef bint direct = Wq == OW and not chan
    cdef int nt = 1
    if N > 1 and N * O * Tg * L >= 200000:
        nt = num_threads()
    cdef int64_t n, g, o, oy, ox, k
    cdef float* src
    cdef float* tmp
    cdef float* dst
    cdef float* orow
    cdef const float* trow
    cdef float bv, v
    cdef int simd = _SIMD
    src = tmp = NULL
    with nogil, parallel(num_threads=nt):
        src = <float*>malloc(slen * sizeof(float))
        tmp = NULL
        if not direct and not chan:
            tmp = <float*>malloc(O * L * sizeof(float))
        for n in prange(N, schedule="static"):
            _build_src(xp + n * C * H * W, src, C, H, W, ph0, pw0, sh, sw, Hq, Wq, slen)
            if chan:
                emb_ogc(simd, A, <int>Tg, <int>O, src, off, op + n * O * OH * OW, OH, OW, Wq,
                        bias, relu)
            else:
                for g in range(G):
                    if direct:
                        dst = op + (n * O + g * Og) * L
                    else:
                        dst = tmp + g * Og * L
                    emb_og(simd, A + g * Tg * Og, <int>Tg, <int>Og, src, off + g * Tg, dst,
                           L, L)
            if chan:
                pass
            elif direct:
                if relu or bias != NULL:
                    for o in range(O):
                        bv = 0
                        if bias != NULL:
                            bv = bias[o]
                        orow = op + (n * O + o) * L
                        emb_copy_rows_bias(simd, orow, L, orow, L, 1, L, bv, relu)
            else:
                for o in range(O):
                    bv = 0
                    if bias != NULL:
                        bv = bias[o]
                    emb_copy_rows_bias(simd, op + (n * O + o) * OH * OW, OW, tmp + o * L, Wq,
                                       OH, OW, bv, relu)
        free(src)
        free(tmp)


def conv2d_weight_f32(x, gout, dwout, int sh, int sw, int ph0, int ph1, int pw0, int pw1,
                      int dh, int dw, int groups):
    """dwout (O, C/groups, kh, kw) = the weight gradient of conv2d for input x and output
    gradient gout (N, O, OH, OW)."""
    _f32_check("conv2d_weight_f32", (x, gout, dwout))
    if _winograd_weight(x, gout, dwout, sh, sw, ph0, pw0, dh, dw, groups):
        return
    if sh == 1 and sw == 1 and ph0 == 0 and ph1 == 0 and pw0 == 0 and pw1 == 0 and \
            _BATCH_WEIGHT and _fwd_batch_pays(x.shape[0], x.shape[1], x.shape[2], x.shape[3],
                                              dwout.shape[0], gout.shape[2], gout.shape[3],
                                              dwout.shape[2], dwout.shape[3], dh, dw, groups):
        _weight_batch_f32(x, gout, dwout)
        return
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = dwout.shape[0], Cg = dwout.shape[1], kh = dwout.shape[2]
    cdef int64_t kw = dwout.shape[3], OH = gout.shape[2], OW = gout.shape[3], G = groups
    cdef int64_t Og = O // G, Tg = Cg * kh * kw
    Hq_, Wq_, slen_, off_arr = _src_geometry(C, H, W, kh, kw, sh, sw, ph0, ph1, pw0, pw1, dh, dw)
    cdef int64_t Hq = Hq_, Wq = Wq_, slen = slen_, L = OH * Wq
    cdef int64_t Lr = _cdiv(L, 16) * 16
    # over output channels (emb_odc: only the real outputs, the gradient pixel-major) where
    # the forward takes that form too and the geometry is one emb_odc handles, and for the
    # stride-2 weight gradients of 16k output channels (ResNet's downsampling 3x3: the
    # pixel form computes OH*Wq lanes rounded up to 16, 80 for 64 outputs at 8x8)
    cdef bint chan = (_chan_pays(O, G, OW, Wq) and sh == 1 and sw == 1 and dw == 1 and
                      kw in (3, 5)) or (kw in (3, 5) and _s2_chan(O, G, sw, OH, OW, Wq))
    cdef int64_t glen = O * OH * OW if chan else O * Lr
    roff_arr = _np.ascontiguousarray(off_arr[::kw]) if chan else off_arr
    # tap j's offset within a tap row (the same for every channel and kernel row)
    jo_arr = _np.ascontiguousarray(off_arr[:kw] - off_arr[0]) if off_arr.size >= kw else \
        _np.zeros(kw, _np.int64)
    cdef const int64_t* roff = <const int64_t*>cnp.PyArray_DATA(roff_arr)
    cdef const int64_t* jo = <const int64_t*>cnp.PyArray_DATA(jo_arr)
    cdef int64_t P = OH * OW
    cdef const int64_t* off = <const int64_t*>cnp.PyArray_DATA(off_arr)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef const float* gp = <const float*>cnp.PyArray_DATA(gout)
    cdef float* dwp = <float*>cnp.PyArray_DATA(dwout)
    # samples per chunk: keep a chunk's sources and gradients within ~768 KiB (of a 1 MiB
    # L2): every 4 x 6 tile of emb_odot reduces its 24 accumulators once per chunk, so
    # more samples per chunk amortise that (stage 3 of ResNet-20, L = 80: NB 8 -> 16 took
    # the kernel from 75 to 82 useful GFLOP/s on one core); then the chunk count is
    # rounded up to a multiple of the threads so that no thread gets a short last chunk
    cdef int64_t NB = (768 * 1024) // ((slen + glen) * 4)
    if NB < 1:
        NB = 1
    cdef int nt = 1
    if N > 1 and N * O * Tg * L >= 200000:
        nt = num_threads()
    if NB * nt > N:
        NB = max(1, N // nt)
    cdef int64_t nchunks = _cdiv(N, NB) if N > 0 else 0
    if nt > 1 and nchunks % nt:
        nchunks = _cdiv(nchunks, nt) * nt
        NB = _cdiv(N, nchunks)
        nchunks = _cdiv(N, NB)
    if nt > nchunks:
        nt = max(1, <int>nchunks)
    cdef int64_t WN = O * Tg
    part_arr = _np.zeros((nt, WN), dtype=_np.float32)
    cdef float* part = <float*>cnp.PyArray_DATA(part_arr)
    cdef int64_t ch, n0, nb, j, n, g, o, oy
    cdef float* srcs
    cdef float* gbuf
    cdef float* grow
    cdef float* mine
    cdef int simd = _SIMD
    srcs = gbuf = NULL
    with nogil, parallel(num_threads=nt):
        srcs = <float*>malloc(NB * slen * sizeof(float))
        gbuf = <float*>malloc(NB * glen * sizeof(float))
        for ch in prange(nchunks, schedule="static"):
            mine = part + threadid() * WN
            n0 = ch * NB
            nb = N - n0
            if nb > NB:
                nb = NB
            for j in range(nb):
                n = n0 + j
                _build_src(xp + n * C * H * W, srcs + j * slen, C, H, W, ph0, pw0, sh, sw, Hq,
                           Wq, slen)
                if chan:
                    emb_pixel_major(simd, gp + n * O * P, O, P, gbuf + j * glen)
                else:
                    memset(gbuf + j * glen, 0, glen * sizeof(float))
                    for o in range(O):
                        emb_copy_rows(simd, gbuf + j * glen + o * Lr, Wq,
                                      gp + (n * O + o) * OH * OW, OW, OH, OW)
            if chan:
                emb_odc(simd, gbuf, glen, <int>O, srcs, slen, roff, jo, <int>(Tg // kw), <int>kw,
                        <int>nb, OH, OW, Wq, mine, Tg)
            else:
                for g in range(G):
                    emb_odot(simd, gbuf + g * Og * Lr, Lr, glen, <int>Og, srcs, slen,
                             off + g * Tg, <int>Tg, Lr, <int>nb, mine + g * Og * Tg, Tg)
        free(srcs)
        free(gbuf)
    _np.sum(part_arr, axis=0, out=dwout.reshape(-1))


_INPUT_TABLES = {}


def _input_tables(O, Cg, kh, kw, H, W, OH, OW, sh, sw, ph0, pw0, dh, dw, G):
    """Phase tables of the input gradient (cached per geometry): the padded gradient's
    size and top/left padding, tap offsets, indices that pack the weights, each (phase,
    group)'s first tap and tap count, each phase's (py, px, rows, columns), and the
    largest phase's flat length."""
    key = (O, Cg, kh, kw, H, W, OH, OW, sh, sw, ph0, pw0, dh, dw, G)
    got = _INPUT_TABLES.get(key)
    if got is not None:
        return got
    Og = O // G
    # the phases of dx: rows y*sh + py, columns x*sw + px; for each, the taps (o, i, j)
    # that reach it and the shift (ry, rx) of the gradient row / column they read
    phases = []
    for py in range(sh):
        for px in range(sw):
            Hph = (H - py + sh - 1) // sh if H > py else 0
            Wph = (W - px + sw - 1) // sw if W > px else 0
            ti = [(i, (py + ph0 - i * dh) // sh) for i in range(kh)
                  if (py + ph0 - i * dh) % sh == 0]
            tj = [(j, (px + pw0 - j * dw) // sw) for j in range(kw)
                  if (px + pw0 - j * dw) % sw == 0]
            phases.append((py, px, Hph, Wph, ti, tj))
    ry_all = [r for p in phases for _, r in p[4]] or [0]
    rx_all = [r for p in phases for _, r in p[5]] or [0]
    PT = max(0, -min(ry_all))
    PL = max(0, -min(rx_all))
    PB = max(0, max(p[2] for p in phases) + max(ry_all) - OH)
    PR = max(0, max(p[3] for p in phases) + max(rx_all) - OW)
    HG, WG = OH + PT + PB, OW + PL + PR
    if sw == 1 and max(p[3] for p in phases) <= OW + max(PL, PR):
        # as in _src_geometry: a row's right padding doubles as the next row's left one
        WG = OW + max(PL, PR)
    gplane = HG * WG
    widx = _np.arange(O * Cg * kh * kw, dtype=_np.int64).reshape(O, Cg, kh, kw)
    # per phase and group: taps (o, i, j) -> offsets into the padded gradient and the
    # packed weights A[t*Cg + c] = w[g*Og + o, c, i, j] (as indices into w's elements)
    nph = len(phases)
    offs, packs, tstart, ntaps, geo = [], [], [], [], []
    pos = 0
    for (py, px, Hph, Wph, ti, tj) in phases:
        for g in range(G):
            ol = _np.arange(Og, dtype=_np.int64)
            if ti and tj:
                iv = _np.array([i for i, _ in ti], dtype=_np.int64)
                jv = _np.array([j for j, _ in tj], dtype=_np.int64)
                ryv = _np.array([r for _, r in ti], dtype=_np.int64)
                rxv = _np.array([r for _, r in tj], dtype=_np.int64)
                o_g = (g * Og + ol)[:, None, None]
                offs.append((o_g * gplane + (ryv[None, :, None] + PT) * WG
                             + (rxv[None, None, :] + PL)).reshape(-1))
                wg = widx[g * Og:(g + 1) * Og][:, :, iv][:, :, :, jv]   # (Og, Cg, ni, nj)
                packs.append(_np.ascontiguousarray(wg.transpose(0, 2, 3, 1)).reshape(-1))
                T = Og * len(ti) * len(tj)
            else:
                T = 0
            tstart.append(pos)
            ntaps.append(T)
            pos += T
        geo.append((py, px, Hph, Wph))
    off_arr = _np.concatenate(offs) if offs else _np.zeros(1, _np.int64)
    pack_idx = _np.concatenate(packs) if packs else _np.zeros(1, _np.int64)
    off_arr = _np.ascontiguousarray(off_arr, dtype=_np.int64)
    ts_arr = _np.asarray(tstart, dtype=_np.int64)
    nt_arr = _np.asarray(ntaps, dtype=_np.int64)
    geo_arr = _np.asarray(geo, dtype=_np.int64).reshape(nph, 4)
    Lmax = int(max([p[2] for p in phases])) * WG
    got = (HG, WG, PT, PL, off_arr, pack_idx, ts_arr, nt_arr, geo_arr, Lmax)
    if len(_INPUT_TABLES) > 256:
        _INPUT_TABLES.clear()
    _INPUT_TABLES[key] = got
    return got


def conv2d_input_f32(gout, w, dx, int sh, int sw, int ph0, int ph1, int pw0, int pw1, int dh,
                     int dw, int groups):
    """dx (N, C, H, W) = the input gradient of conv2d (the transposed convolution of
    gout (N, O, OH, OW) with w (O, C/groups, kh, kw))."""
    _f32_check("conv2d_input_f32", (gout, w, dx))
    if _winograd_input(gout, w, dx, sh, sw, ph0, pw0, dh, dw, groups):
        return
    cdef int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3]
    cdef int64_t O = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3]
    cdef int64_t OH = gout.shape[2], OW = gout.shape[3], G = groups, Og = O // G
    if sh == 1 and sw == 1 and _INPUT_MODE >= 0 and (
            _INPUT_MODE == 1 or _scatter_pays(H, W, OH, OW, kh, kw, ph0, pw0, dh, dw)):
        if _batch_pays(N, C, H, W, O, OH, OW, kh, kw, dh, dw, G):
            _input_batch_f32(gout, w, dx, ph0, pw0)
            return
        _input_scatter_f32(gout, w, dx, ph0, pw0, dh, dw, groups)
        return
    HG_, WG_, PT, PL, off_arr, pack_idx, ts_arr, nt_arr, geo_arr, Lmax_ = _input_tables(
        O, Cg, kh, kw, H, W, OH, OW, sh, sw, ph0, pw0, dh, dw, G)
    A_arr = w.reshape(-1).take(pack_idx)
    cdef int64_t nph = geo_arr.shape[0]
    cdef int64_t HG = HG_, WG = WG_, gplane = HG * WG
    cdef int64_t cPT = PT, cPL = PL
    cdef int64_t glen = O * gplane + SLACK + 2 * WG
    cdef const int64_t* off = <const int64_t*>cnp.PyArray_DATA(off_arr)
    cdef const float* A = <const float*>cnp.PyArray_DATA(A_arr)
    cdef const int64_t* tsp = <const int64_t*>cnp.PyArray_DATA(ts_arr)
    cdef const int64_t* ntp = <const int64_t*>cnp.PyArray_DATA(nt_arr)
    cdef const int64_t* gep = <const int64_t*>cnp.PyArray_DATA(geo_arr)
    cdef int64_t Lmax = Lmax_
    cdef const float* gp = <const float*>cnp.PyArray_DATA(gout)
    cdef float* dxp = <float*>cnp.PyArray_DATA(dx)
    cdef int s2 = _S2_MODE
    cdef int nt = 1
    if N > 1 and N * O * Cg * kh * kw * OH * OW >= 200000:
        nt = num_threads()
    cdef int64_t n, o, oy, ph, gi, c, y, x, k, pyy, pxx, Hph_, Wph_, Lph
    cdef float* gsrc
    cdef float* tmp
    cdef float* drow
    cdef const float* trow
    cdef int simd = _SIMD
    gsrc = tmp = NULL
    # stride 2 along the rows: the two column phases of a dx row are kept (tmp holds every
    # phase) and written back interleaved, with full-width stores
    cdef bint pairs = sw == 2 and s2 >= 0 and W >= 2
    cdef int64_t tstride = C * Lmax + 16 if pairs else 0
    # ... and over input channels (emb_ogc, the phases written compact) where that pays
    cdef bint dchan = pairs and _s2_chan(C, G, sw, geo_arr[0, 2], geo_arr[0, 3], WG)
    cdef int64_t pa, pb
    with nogil, parallel(num_threads=nt):
        gsrc = <float*>malloc(glen * sizeof(float))
        tmp = <float*>malloc((C * Lmax + 1 + nph * tstride) * sizeof(float))
        for n in prange(N, schedule="static"):
            memset(gsrc, 0, glen * sizeof(float))
            for o in range(O):       # (one vector copy per plane, not a memcpy per row)
                emb_copy_rows(simd, gsrc + o * gplane + cPT * WG + cPL, WG,
                              gp + (n * O + o) * OH * OW, OW, OH, OW)
            for ph in range(nph):
                pyy = gep[4 * ph]
                pxx = gep[4 * ph + 1]
                Hph_ = gep[4 * ph + 2]
                Wph_ = gep[4 * ph + 3]
                if Hph_ == 0 or Wph_ == 0:
                    continue
                Lph = Hph_ * WG
                if dchan:          # one group; the phase as compact (C, Hph, Wph) planes
                    emb_ogc(simd, A + tsp[ph] * Cg, <int>ntp[ph], <int>Cg, gsrc, off + tsp[ph],
                            tmp + ph * tstride, Hph_, Wph_, WG, NULL, 0)
                else:
                    for gi in range(G):
                        k = ph * G + gi
                        emb_og(simd, A + tsp[k] * Cg, <int>ntp[k], <int>Cg, gsrc, off + tsp[k],
                               tmp + ph * tstride + gi * Cg * Lph, Lph, Lph)
                if pairs:
                    if pxx == 1:   # both column phases of rows pyy + y*sh are in tmp
                        pa = gep[4 * ph - 1] if dchan else WG     # row pitches
                        pb = Wph_ if dchan else WG
                        for c in range(C):
                            emb_interleave_rows(simd, dxp + ((n * C + c) * H + pyy) * W,
                                                sh * W, tmp + (ph - 1) * tstride + c * Hph_ * pa,
                                                tmp + ph * tstride + c * Hph_ * pb, pa, pb,
                                                Hph_, gep[4 * ph - 1], Wph_)
                    continue
                for c in range(C):
                    for y in range(Hph_):
                        drow = dxp + ((n * C + c) * H + y * sh + pyy) * W + pxx
                        trow = tmp + c * Lph + y * WG
                        if sw == 1:
                            memcpy(drow, trow, Wph_ * sizeof(float))
                        else:
                            for x in range(Wph_):
                                drow[x * sw] = trow[x]
        free(gsrc)
        free(tmp)


cdef int _INPUT_MODE = 0


def _set_input_mode(int mode):
    """How conv2d_input_f32 computes a stride-1 input gradient: 0 by cost (default),
    1 always the scatter form, -1 always the gather form (for tests and benchmarks);
    returns the previous mode."""
    global _INPUT_MODE
    old = _INPUT_MODE
    _INPUT_MODE = mode
    return old


cpdef bint _scatter_pays(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw,
                        int64_t ph0, int64_t pw0, int64_t dh, int64_t dw):
    """Whether the scatter form of a stride-1 input gradient does less work than the
    gather form: the gather form computes every dx pixel over all kh*kw taps of a
    gradient padded by up to (k-1)*d on each side (H rows of pitch WG = OW + max(PL, PR),
    the row's right padding shared with the next row's left, as _input_tables lays it
    out at stride 1), the scatter form
    only the gradient's OH rows (of dx's padded pitch Wp) per tap, plus a load and a
    store of dx per tap and 16 lanes: it is taken when its lanes are under 0.8x the
    gather's (LeNet's valid 5x5 conv2: 9 vs 13 vectors per tap row; same-padded 3x3
    convolutions keep the gather)."""
    cdef int64_t WG = OW + max(max(0, (kw - 1) * dw - pw0), max(0, W + pw0 - OW))
    cdef int64_t Wp = max(OW + (kw - 1) * dw, W + pw0)
    cdef int64_t gather = _cdiv(H * WG, 16)
    cdef int64_t scatter = _cdiv(OH * Wp, 16)
    return scatter * 10 < gather * 8


cdef bint _BATCH_INPUT = True


def _set_batch_input(bint on):
    """Whether a small stride-1 input gradient may run with the samples in the lanes
    (``_input_batch_f32``; False: the scatter form, for A/B measurements and tests);
    returns the previous setting."""
    global _BATCH_INPUT
    old = _BATCH_INPUT
    _BATCH_INPUT = on
    return old


cpdef bint _batch_pays(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,
                      int64_t OW, int64_t kh, int64_t kw, int64_t dh, int64_t dw, int64_t G):
    """Whether a stride-1 input gradient that the scatter form would take runs over
    batch lanes instead (``conv_batch.h``): AVX-512, one group, no dilation, a 3- or
    5-wide kernel, rows of at most 16 outputs (the padded dx row stays in registers), at
    least 16 samples (a tail block is masked) and indices that fit an int32."""
    return (_SIMD != 0 and _BATCH_INPUT and G == 1 and dh == 1 and dw == 1 and
            (kw == 3 or kw == 5) and 0 < OW <= 16 and OH > 0 and N >= 16 and
            16 * O * OH * OW < 2 ** 31 and 16 * C * H * W < 2 ** 31)


cdef bint _BATCH_FORWARD = True


def _set_batch_forward(bint on):
    """Whether a small valid stride-1 forward may run with the samples in the lanes
    (``_forward_batch_f32``; False: the kernels over output channels or pixels, for A/B
    measurements and tests); returns the previous setting."""
    global _BATCH_FORWARD
    old = _BATCH_FORWARD
    _BATCH_FORWARD = on
    return old


cpdef bint _fwd_batch_pays(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,
                          int64_t OW, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                          int64_t G):
    """Whether an unpadded stride-1 forward (and its weight gradient) runs over batch lanes
    (``conv_batch.h``): the
    input-gradient conditions of ``_batch_pays``, input rows of at most 20, and only
    where the forward would otherwise run over 16k output channels because the pixel
    form wastes lanes (``_chan_pays``: LeNet-5's conv2)."""
    return (_BATCH_FORWARD and W <= 20 and H >= kh and
            _batch_pays(N, C, H, W, O, OH, OW, kh, kw, dh, dw, G) and
            _chan_pays(O, G, OW, W))


def _forward_batch_f32(x, w, b, out, bint relu):
    """out = conv2d(x, w) + b (ReLU'd with ``relu``) for a valid stride-1 convolution with
    16 samples per vector (see conv_batch.h): blocks of 16 samples over the threads."""
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = w.shape[0], kh = w.shape[2], kw = w.shape[3]
    cdef int64_t OH = out.shape[2], OW = out.shape[3]
    cdef int64_t nblk = (N + 15) // 16, blk, n0, nb
    bias_arr = None if b is None else _np.ascontiguousarray(b, dtype=_np.float32)
    cdef const float* bias = NULL
    if bias_arr is not None:
        bias = <const float*>cnp.PyArray_DATA(bias_arr)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef const float* wp = <const float*>cnp.PyArray_DATA(w)
    cdef float* op = <float*>cnp.PyArray_DATA(out)
    cdef int nt = 1
    if nblk > 1:
        nt = num_threads()
    cdef float* buf = NULL
    cdef int simd = _SIMD
    cdef int rl = relu
    with nogil, parallel(num_threads=nt):
        buf = <float*>malloc(16 * (O * OH * OW + C * H * W) * sizeof(float))
        for blk in prange(nblk, schedule="static"):
            n0 = blk * 16
            nb = min(16, N - n0)
            emb_fwb(simd, xp + n0 * C * H * W, wp, bias, rl, op + n0 * O * OH * OW, nb, O, C,
                    H, W, OH, OW, kh, kw, buf)
        free(buf)


cdef bint _BATCH_WEIGHT = True


def _set_batch_weight(bint on):
    """Whether the weight gradient of a convolution that ``_fwd_batch_pays`` accepts runs
    with the samples in the lanes (``_weight_batch_f32``; False: over output channels);
    returns the previous setting."""
    global _BATCH_WEIGHT
    old = _BATCH_WEIGHT
    _BATCH_WEIGHT = on
    return old


def _weight_batch_f32(x, gout, dwout):
    """dwout = the weight gradient of a valid stride-1 conv2d with 16 samples per vector
    (see conv_batch.h): blocks of 16 samples over the threads, each thread summing into
    its own copy, the copies added at the end."""
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = dwout.shape[0], kh = dwout.shape[2], kw = dwout.shape[3]
    cdef int64_t OH = gout.shape[2], OW = gout.shape[3], K = O * C * kh * kw
    cdef int64_t nblk = (N + 15) // 16, blk, n0, nb
    cdef int nt = 1
    if nblk > 1:
        nt = num_threads()
    parts_arr = _np.zeros((nt, K), _np.float32)
    cdef float* parts = <float*>cnp.PyArray_DATA(parts_arr)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef const float* gp = <const float*>cnp.PyArray_DATA(gout)
    cdef float* buf = NULL
    cdef int simd = _SIMD
    with nogil, parallel(num_threads=nt):
        buf = <float*>malloc(16 * (O * OH * OW + C * H * W) * sizeof(float))
        for blk in prange(nblk, schedule="static"):
            n0 = blk * 16
            nb = min(16, N - n0)
            emb_dwb(simd, xp + n0 * C * H * W, gp + n0 * O * OH * OW,
                    parts + threadid() * K, nb, O, C, H, W, OH, OW, kh, kw, buf)
        free(buf)
    _np.sum(parts_arr, axis=0, out=dwout.reshape(K))


def _input_batch_f32(gout, w, dx, int64_t ph0, int64_t pw0):
    """dx = the input gradient of a stride-1 conv2d with 16 samples per vector (see
    conv_batch.h): blocks of 16 samples split over the threads."""
    cdef int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3]
    cdef int64_t O = w.shape[0], kh = w.shape[2], kw = w.shape[3]
    cdef int64_t OH = gout.shape[2], OW = gout.shape[3]
    cdef int64_t nblk = (N + 15) // 16, b, n0, nb
    cdef const float* gp = <const float*>cnp.PyArray_DATA(gout)
    cdef const float* wp = <const float*>cnp.PyArray_DATA(w)
    cdef float* dxp = <float*>cnp.PyArray_DATA(dx)
    cdef int nt = 1
    if nblk > 1:
        nt = num_threads()
    cdef float* gT = NULL
    cdef int simd = _SIMD
    with nogil, parallel(num_threads=nt):
        gT = <float*>malloc(16 * (O * OH * OW + C * H * W) * sizeof(float))
        for b in prange(nblk, schedule="static"):
            n0 = b * 16
            nb = min(16, N - n0)
            emb_dxb(simd, gp + n0 * O * OH * OW, wp, dxp + n0 * C * H * W, nb, O, C, H, W,
                    OH, OW, kh, kw, ph0, pw0, gT)
        free(gT)


def _input_scatter_f32(gout, w, dx, int64_t ph0, int64_t pw0, int64_t dh, int64_t dw,
                       int64_t groups):
    """dx = the input gradient of a stride-1 conv2d as a scatter: for each tap (i, j),
    the channel mix sum_o w[o, c, i, j] * gout[n, o] of the whole gradient image, added
    into a padded copy of dx shifted by (i*dh, j*dw).  The gradient rows are laid out at
    dx's padded pitch with zero columns past OW, so a tap's block of lanes lands on
    exactly the pixels it reaches (the zero columns add zeros next to them)."""
    cdef int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3]
    cdef int64_t O = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3]
    cdef int64_t OH = gout.shape[2], OW = gout.shape[3], G = groups, Og = O // G
    cdef int64_t Wp = max(OW + (kw - 1) * dw, W + pw0)
    cdef int64_t Hb = max(OH + (kh - 1) * dh, H + ph0)
    cdef int64_t PS = Hb * Wp + (kw - 1) * dw + 16        # dx plane stride (with a gap)
    cdef int64_t Lg = OH * Wp, L = OH * Wp
    cdef int64_t glen = O * Lg + SLACK
    # packed weights: tap (i, j), group g, output channel o, input channel c
    A_arr = _np.ascontiguousarray(
        w.reshape(G, Og, Cg, kh, kw).transpose(3, 4, 0, 1, 2)).reshape(-1)
    off_arr = _np.arange(O, dtype=_np.int64) * Lg
    cdef const float* A = <const float*>cnp.PyArray_DATA(A_arr)
    cdef const int64_t* off = <const int64_t*>cnp.PyArray_DATA(off_arr)
    cdef const float* gp = <const float*>cnp.PyArray_DATA(gout)
    cdef float* dxp = <float*>cnp.PyArray_DATA(dx)
    cdef int nt = 1
    if N > 1 and N * O * Cg * kh * kw * OH * OW >= 200000:
        nt = num_threads()
    cdef int64_t n, o, oy, i, j, gi, c, y
    cdef float* gsrc
    cdef float* D
    cdef int simd = _SIMD
    gsrc = D = NULL
    with nogil, parallel(num_threads=nt):
        gsrc = <float*>malloc(glen * sizeof(float))
        D = <float*>malloc(C * PS * sizeof(float))
        memset(gsrc, 0, glen * sizeof(float))   # columns >= OW and the slack stay zero
        for n in prange(N, schedule="static"):
            for o in range(O):
                emb_copy_rows(simd, gsrc + o * Lg, Wp, gp + (n * O + o) * OH * OW, OW, OH, OW)
            memset(D, 0, C * PS * sizeof(float))
            for i in range(kh):
                for j in range(kw):
                    for gi in range(G):
                        emb_og_acc(simd, A + ((i * kw + j) * G + gi) * Og * Cg, <int>Og,
                                   <int>Cg, gsrc, off + gi * Og,
                                   D + gi * Cg * PS + i * dh * Wp + j * dw, PS, L)
            for c in range(C):
                emb_copy_rows(simd, dxp + (n * C + c) * H * W, W, D + c * PS + ph0 * Wp + pw0,
                              Wp, H, W)
        free(gsrc)
        free(D)


# ---------------------------------------------------------------- Winograd (winograd.pyx)
# 3x3 stride-1 float32 convolutions of enough channels run as Winograd over 2x2 or 4x4
# output tiles (F(2x2, 3x3): 4 multiply-adds per output and channel pair instead of 9;
# F(4x4, 3x3): 2.25; winograd.tile / wtile pick); ``EMBER_WINOGRAD=0`` turns it off.

from ember._kernels.cpu import winograd as _wg


def _winograd_forward(x, w, b, out, int sh, int sw, int ph0, int pw0, int dh, int dw,
                      int groups, bint relu):
    """Run the forward as Winograd and return True where it applies and pays."""
    if sh != 1 or sw != 1 or dh != 1 or dw != 1 or groups != 1 or w.shape[2] != 3 or \
            w.shape[3] != 3 or not _wg.pays(w.shape[1], w.shape[0], out.shape[2],
                                            out.shape[3]):
        return False
    _wg.conv3x3_f32(x, w, b, out, ph0, pw0, False, relu)
    return True


def _winograd_input(gout, w, dx, int sh, int sw, int ph0, int pw0, int dh, int dw,
                    int groups):
    """Run the input gradient (a 3x3 stride-1 correlation of gout with the rotated,
    transposed w) as Winograd and return True where it applies and pays."""
    if sh != 1 or sw != 1 or dh != 1 or dw != 1 or groups != 1 or w.shape[2] != 3 or \
            w.shape[3] != 3 or not _wg.pays(w.shape[0], w.shape[1], dx.shape[2],
                                            dx.shape[3]):
        return False
    _wg.conv3x3_f32(gout, w, None, dx, 2 - ph0, 2 - pw0, True)
    return True


def _winograd_weight(x, gout, dwout, int sh, int sw, int ph0, int pw0, int dh, int dw,
                     int groups):
    """Run the weight gradient as Winograd (F(3x3, 2x2) over the output gradient's 2x2
    tiles) and return True where it applies and pays."""
    if sh != 1 or sw != 1 or dh != 1 or dw != 1 or groups != 1 or dwout.shape[2] != 3 or \
            dwout.shape[3] != 3 or not _wg.pays(x.shape[1], gout.shape[1], gout.shape[2],
                                                gout.shape[3], True):
        return False
    _wg.conv3x3_weight_f32(x, gout, dwout, ph0, pw0)
    return True
