# cython: language_level=3
"""Winograd F(2x2, 3x3) and F(4x4, 3x3) for float32 3x3 stride-1 convolutions (kernels in
winograd.h).

``conv3x3_f32`` computes ``out[n, o, y, x] = sum_{c,i,j} x[n, c, y+i-pt, x+j-pl] *
g[o, c, i, j]`` (zero outside ``x``), with ``g = w`` (the forward) or ``g[o, c] =
w[c, o]`` rotated by 180 degrees (``flip``: the input gradient), as F(4x4, 3x3) or
F(2x2, 3x3) as ``tile`` says.  conv.pyx calls it where ``pays`` says it beats the direct
kernels, and ``conv3x3_weight_f32`` (the weight gradient of the forward: F(3x3, 2x2) over
2x2 tiles of the output gradient, or F(3x3, 4x4) over 4x4 tiles as ``wtile`` says).
``EMBER_WINOGRAD`` (read at import): 0 turns Winograd off, 2 forces the 2x2 tiles and 4
the 4x4 tiles (all three passes) for every eligible shape; ``_set_mode`` does the same at
run time.
"""
cimport cython
cimport numpy as cnp
from cython.parallel cimport prange, parallel, threadid
from libc.stdint cimport int64_t
from ember._core.elementwise cimport num_threads

import os as _os
import numpy as _np

cnp.import_array()


cdef float* _scratch(int nt, int64_t n, int64_t* stride, list keep) except NULL:
    """Zeroed scratch of n floats for each of nt threads (thread t's at the result plus
    t * stride[0]), allocated here with the GIL: no memory raises MemoryError instead of
    crashing inside the parallel region.  The NumPy array that owns it goes into keep.
    Slots are 4 KiB apart plus a line (attention_cpu.h measured back-to-back per-thread
    slots slower)."""
    stride[0] = (n + 15) // 16 * 16 + 1040
    arr = _np.zeros(nt * stride[0], dtype=_np.float32)
    keep.append(arr)
    return <float*>cnp.PyArray_DATA(arr)

cdef extern from "winograd.h" nogil:
    int emb_wg_simd()
    int64_t emb_wg_kstride(int64_t ch, int64_t Tp)
    void emb_wg_weights(const float* w, int64_t O, int64_t C, int flip, float* U,
                        int64_t o0, int64_t o1)
    void emb_w4_weights(const float* w, int64_t O, int64_t C, int flip, float* U,
                        int64_t o0, int64_t o1)
    void emb_w4_block(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                      int64_t pl, const float* U, int64_t O, float* out, int64_t OH,
                      int64_t OW, int64_t TH, int64_t TW, int64_t NTR, int64_t NU,
                      int64_t Tp, int64_t b, const float* bias, int relu, float* V,
                      float* M, int* bad)
    void emb_wg_block(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                      int64_t pl, const float* U, int64_t O, float* out, int64_t OH,
                      int64_t OW, int64_t TH, int64_t TW, int64_t NTR, int64_t Tp,
                      int64_t rpb, int64_t b, const float* bias, int relu, float* V,
                      float* M)
    int64_t emb_wg_wscratch(int64_t C, int64_t O, int64_t Tp)
    void emb_wg_wblock(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                       int64_t pl, const float* g, int64_t O, int64_t OH, int64_t OW,
                       int64_t TH, int64_t TW, int64_t NTR, int64_t Tp, int64_t rpb,
                       int64_t b, double* Wh, float* S, int flush)
    int64_t emb_w4_wscratch(int64_t C, int64_t O, int64_t Tp)
    void emb_w4_wblock(const float* x, int64_t C, int64_t H, int64_t W, int64_t pt,
                       int64_t pl, const float* g, int64_t O, int64_t OH, int64_t OW,
                       int64_t TH, int64_t TW, int64_t NTR, int64_t NU, int64_t Tp,
                       int64_t b, double* Wh, float* S, int flush)
    void emb_w4_wout(const double* Wh, int nbuf, int64_t bstride, int64_t C, int64_t Op,
                     float* dW, int64_t o0, int64_t o1)
    void emb_wg_wout(const double* Wh, int nbuf, int64_t bstride, int64_t C, int64_t O,
                     int64_t Op, float* dW, int64_t o0, int64_t o1)

cdef int _SIMD = emb_wg_simd()
cdef int _MODE = {"0": -1, "2": 2, "4": 4}.get(_os.environ.get("EMBER_WINOGRAD", ""), 0)
cdef int64_t _CALLS = 0
cdef int64_t _CALLS4 = 0
cdef bint _F4_ON = True


def available():
    """True when the Winograd kernels can run here (AVX-512F) and are switched on."""
    return bool(_SIMD) and _MODE >= 0


def _set_mode(int mode):
    """0: Winograd where ``pays`` says so, 4x4 or 2x2 tiles as ``tile`` (forward, input
    gradient) and ``wtile`` (weight gradient) say; -1: never; 1 or 2: Winograd for every
    eligible shape, 2x2 tiles; 4: for every eligible shape, 4x4 tiles (tests).
    ``EMBER_WINOGRAD`` = 0, 2 or 4 at import sets -1, 2 or 4.  Returns the previous mode."""
    global _MODE
    old = _MODE
    _MODE = mode
    return old


def _calls():
    """How many convolutions ran through Winograd in this process (for tests)."""
    return _CALLS


def _calls_f4():
    """How many of them ran as F(4x4, 3x3) (for tests)."""
    return _CALLS4


cpdef bint pays(int64_t Ci, int64_t Co, int64_t OH, int64_t OW, bint weight=False):
    """Whether a 3x3 stride-1 convolution with Ci input and Co output channels and an
    OH x OW output runs faster as Winograd than as the direct kernels: its forward (or
    input gradient) with ``weight`` False, its weight gradient with ``weight`` True.  The
    transforms cost per channel what the direct form spends on a few output channels, so
    both channel counts must be large enough.  Measured on one core, batch 64 (Winograd /
    direct time; benchmarks/README.md): forward and input gradient 0.65-0.79x at 8-16
    channels and 32x32, 0.35-0.5x at 64-128 channels and 4x4-8x8, 0.74-0.91x at 256
    channels and 8x8, but 1.1x for 3 -> 16 channels (ResNet's stem); the weight gradient
    0.91x at 16 -> 16 and 32x32 but 1.0-1.3x at 8-16 channels with either below 16, and
    1.02x at 256 -> 256 channels and 8x8."""
    if not _SIMD or _MODE < 0:
        return False
    if _MODE > 0:
        return True
    if OH < 4 or OW < 4:
        return False
    if weight:
        return Ci >= 16 and Co >= 16 and Ci + Co <= 384
    return Ci >= 8 and Co >= 8


cpdef int tile(int64_t Ci, int64_t Co, int64_t OH, int64_t OW):
    """The output tile (4 or 2) of the Winograd forward or input gradient of a 3x3
    stride-1 convolution with Ci input and Co output channels and an OH x OW output, where
    ``pays`` says Winograd runs: F(4x4, 3x3) where it measured faster than F(2x2, 3x3).
    Measured on one core (F(4x4) / F(2x2) time, forward and input gradient; batch 64
    unless given; benchmarks/README.md): 0.86-0.87x at 16 -> 16 channels and 32x32,
    0.62-0.65x at 32 -> 32 and 16x16, 0.64-0.71x at 64 -> 64 and 8x8, 0.5-0.8x at 64-256
    channels and 4x4-12x12, but 0.9-1.1x with 8 channels on either side and 1.0-1.2x at
    6x6 (four 4x4 tiles cover 8x8: 78% more outputs computed than kept, against none for
    2x2 tiles)."""
    if _MODE == 4:
        return 4
    if _MODE > 0 or not _F4_ON:
        return 2
    if Ci < 16 or Co < 16:
        return 2
    # outputs computed by 4x4 tiles, against 2x2 tiles: at most 1.2x as many
    if 5 * ((OH + 3) // 4) * ((OW + 3) // 4) * 16 > 6 * ((OH + 1) // 2) * ((OW + 1) // 2) * 4:
        return 2
    return 4


def _blocks(int64_t N, int64_t C, int64_t O, int64_t OH, int64_t OW, int64_t Tp):
    """(TH, TW, NTR, Tp, rpb, nblocks): tiles per column and row of a sample, tile rows in
    all, lanes per block (at most the given Tp), tile rows per block (when a row fits a
    block) and blocks."""
    cdef int64_t TH = (OH + 1) // 2, TW = (OW + 1) // 2, NTR = N * TH
    # tiles per block: the block's V and M (16 (C + O) Tp floats) within ~640 KiB of L2
    while Tp > 16 and 64 * (C + O) * Tp > 640 * 1024:
        Tp //= 2
    cdef int64_t rpb = 1, nblocks
    if TW <= Tp:
        rpb = Tp // TW
        nblocks = (NTR + rpb - 1) // rpb
    else:
        nblocks = NTR * ((TW + Tp - 1) // Tp)
    return TH, TW, NTR, Tp, rpb, nblocks


def conv3x3_f32(x, w, b, out, int64_t pt, int64_t pl, bint flip, bint relu=False):
    """out (N, Co, OH, OW) = the 3x3 stride-1 correlation of x (N, Ci, H, W) with w
    (Co, Ci, 3, 3), or with w (Ci, Co, 3, 3) rotated by 180 degrees if ``flip``, input
    offset by (pt, pl) rows/columns, plus b (Co,), then ReLU if ``relu``.  Arrays are
    C-contiguous float32."""
    global _CALLS
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = out.shape[1], OH = out.shape[2], OW = out.shape[3]
    cdef int64_t wo = w.shape[0], wc = w.shape[1]
    if (wc, wo) != ((O, C) if flip else (C, O)) or tuple(w.shape[2:]) != (3, 3) or \
            out.shape[0] != N:
        raise ValueError(f"conv3x3_f32: shapes x {x.shape}, w {w.shape}, out {out.shape} "
                         f"do not match (flip={flip})")
    _CALLS += 1
    if N == 0 or O == 0 or OH == 0 or OW == 0:
        return
    if C == 0:
        out[...] = 0 if b is None else _np.asarray(b, dtype=_np.float32).reshape(O, 1, 1)
        if relu:
            _np.maximum(out, 0, out=out)
        return
    cdef int nt = 1
    if N * C * O * OH * OW >= 100000:
        nt = num_threads()
    if tile(C, O, OH, OW) == 4 and _conv3x3_f4(x, w, b, out, pt, pl, flip, relu, nt):
        return
    U_arr = _np.empty(16 * C * O, dtype=_np.float32)
    cdef float* U = <float*>cnp.PyArray_DATA(U_arr)
    cdef const float* wp = <const float*>cnp.PyArray_DATA(w)
    cdef int part
    bias_arr = None if b is None else _np.ascontiguousarray(b, dtype=_np.float32)
    cdef const float* bias = NULL
    if bias_arr is not None:
        bias = <const float*>cnp.PyArray_DATA(bias_arr)
    cdef int64_t TH, TW, NTR, Tp, rpb, nblocks
    # 16 tiles per block: V and M of a block stay in L1 (ResNet-20's layers, one core,
    # batch 64, C harness: 2.2-2.3 ms instead of 2.5 ms at 64 tiles for 16 channels,
    # 1.6-1.8 instead of 1.8 for 32, the same for 64)
    TH, TW, NTR, Tp, rpb, nblocks = _blocks(N, C, O, OH, OW, 16)
    cdef int64_t vlen = 16 * emb_wg_kstride(C, Tp), mlen = 16 * emb_wg_kstride(O, Tp)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef float* op = <float*>cnp.PyArray_DATA(out)
    if nblocks < 2:
        nt = 1
    cdef int64_t blk, vs
    cdef float* V
    cdef float* M
    keep = []
    cdef float* Vb = _scratch(nt, vlen + mlen, &vs, keep)
    # one parallel region (each fork/join costs a wake-up of the other thread, a whole
    # time slice on a loaded machine): the weight transform in slices, a barrier, the blocks
    with nogil, parallel(num_threads=nt):
        V = Vb + threadid() * vs
        M = V + vlen
        for part in prange(nt, schedule="static"):
            emb_wg_weights(wp, wo, wc, flip, U, part * wo // nt, (part + 1) * wo // nt)
        for blk in prange(nblocks, schedule="static"):
            emb_wg_block(xp, C, H, W, pt, pl, U, O, op, OH, OW, TH, TW, NTR, Tp, rpb, blk,
                         bias, relu, V, M)


def _conv3x3_f4(x, w, b, out, int64_t pt, int64_t pl, bint flip, bint relu, int nt):
    """conv3x3_f32 as F(4x4, 3x3) on nt threads (arguments checked by the caller).  False
    where an output came out NaN or infinite (a non-finite input or weight, or an overflow
    in the transforms): the caller then runs F(2x2, 3x3), which gives NaN exactly where
    the direct form does (F(4x4, 3x3) spreads it over whole 4x4 tiles)."""
    global _CALLS4
    _CALLS4 += 1
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = out.shape[1], OH = out.shape[2], OW = out.shape[3]
    cdef int64_t wo = w.shape[0], wc = w.shape[1]
    U_arr = _np.empty(36 * C * O, dtype=_np.float32)
    cdef float* U = <float*>cnp.PyArray_DATA(U_arr)
    cdef const float* wp = <const float*>cnp.PyArray_DATA(w)
    bias_arr = None if b is None else _np.ascontiguousarray(b, dtype=_np.float32)
    cdef const float* bias = NULL
    if bias_arr is not None:
        bias = <const float*>cnp.PyArray_DATA(bias_arr)
    cdef int64_t TH = (OH + 3) // 4, TW = (OW + 3) // 4, NTR = N * TH, NU
    if TW <= 16:
        NU = (NTR + 16 // TW - 1) // (16 // TW)
    else:
        NU = NTR * ((TW + 15) // 16)
    # 16 lanes (one unit) per block: V and M of a block in L1/L2 (C harness, batch 64, one
    # core: 32 lanes gave the same time at 64 channels and 8x8)
    cdef int64_t Tp = 16
    cdef int64_t nblocks = (NU + Tp // 16 - 1) // (Tp // 16)
    cdef int64_t vlen = 36 * emb_wg_kstride(C, Tp), mlen = 36 * emb_wg_kstride(O, Tp)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef float* op = <float*>cnp.PyArray_DATA(out)
    if nblocks < 2:
        nt = 1
    cdef int64_t blk, vs
    cdef int part
    cdef float* V
    cdef float* M
    bad_arr = _np.zeros(nt, dtype=_np.int32)
    cdef int* bad = <int*>cnp.PyArray_DATA(bad_arr)
    keep = []
    cdef float* Vb = _scratch(nt, vlen + mlen, &vs, keep)
    with nogil, parallel(num_threads=nt):
        V = Vb + threadid() * vs
        M = V + vlen
        for part in prange(nt, schedule="static"):
            emb_w4_weights(wp, wo, wc, flip, U, part * wo // nt, (part + 1) * wo // nt)
        for blk in prange(nblocks, schedule="static"):
            emb_w4_block(xp, C, H, W, pt, pl, U, O, op, OH, OW, TH, TW, NTR, NU, Tp, blk,
                         bias, relu, V, M, bad + threadid())
    return not bad_arr.any()


def _set_f4(bint on):
    """With the cost rule (mode 0), whether ``tile`` may pick F(4x4, 3x3) (benchmarks:
    False is the F(2x2, 3x3)-only rule).  Returns the previous setting."""
    global _F4_ON
    old = _F4_ON
    _F4_ON = on
    return old


def conv3x3_weight_f32(x, g, dw, int64_t pt, int64_t pl):
    """dw (O, C, 3, 3) = sum over n, y, x of g[n, o, y, x] * x[n, c, y + i - pt, x + j - pl]
    (zero outside x): the weight gradient of ``conv3x3_f32`` (flip 0) for input x (N, C,
    H, W) and output gradient g (N, O, OH, OW), over 2x2 or 4x4 tiles of g as ``wtile``
    says.  Arrays are C-contiguous float32."""
    global _CALLS
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = g.shape[1], OH = g.shape[2], OW = g.shape[3]
    if tuple(dw.shape) != (O, C, 3, 3) or g.shape[0] != N:
        raise ValueError(f"conv3x3_weight_f32: shapes x {x.shape}, g {g.shape}, dw "
                         f"{dw.shape} do not match")
    _CALLS += 1
    if N == 0 or O == 0 or C == 0 or OH == 0 or OW == 0:
        dw[...] = 0
        return
    if wtile(C, O, OH, OW) == 4:
        _conv3x3_weight_f4(x, g, dw, pt, pl)
        return
    cdef int64_t TH, TW, NTR, Tp, rpb, nblocks
    # 64 tiles per block: the accumulators of Wh are loaded and stored once per block
    # (16 tiles per block: 3.3-3.7 ms instead of 3.3 for 16 channels, 2.4 instead of 1.85
    # for 64; 32 tiles: 2.0 instead of 1.9 for 64)
    TH, TW, NTR, Tp, rpb, nblocks = _blocks(N, C, O, OH, OW, 64)
    cdef int64_t Op = (O + 15) // 16 * 16, whlen = 16 * C * Op
    cdef int64_t slen = emb_wg_wscratch(C, O, Tp)
    cdef int nt = 1
    if nblocks > 1 and N * C * O * OH * OW >= 100000:
        nt = num_threads()
        if nt > nblocks:
            nt = <int>nblocks
    Wh_arr = _np.zeros((nt, whlen), dtype=_np.float64)
    cdef double* Wh = <double*>cnp.PyArray_DATA(Wh_arr)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef const float* gp = <const float*>cnp.PyArray_DATA(g)
    cdef int64_t blk, b0, b1
    cdef float* S
    cdef float* dwp = <float*>cnp.PyArray_DATA(dw)
    cdef int part, nbuf = nt
    cdef int64_t ss
    keep = []
    cdef float* Sb = _scratch(nt, slen, &ss, keep)
    # one parallel region: the blocks (a contiguous run per thread, its float partial sums
    # added into double every 8 blocks and at its end), a barrier, the output transform
    with nogil, parallel(num_threads=nt):
        S = Sb + threadid() * ss
        for part in prange(nbuf, schedule="static"):
            b0 = part * nblocks // nbuf
            b1 = (part + 1) * nblocks // nbuf
            for blk in range(b0, b1):
                emb_wg_wblock(xp, C, H, W, pt, pl, gp, O, OH, OW, TH, TW, NTR, Tp, rpb, blk,
                              Wh + part * whlen, S, (blk - b0) % 8 == 7 or blk == b1 - 1)
        for part in prange(nbuf, schedule="static"):
            emb_wg_wout(Wh, nbuf, whlen, C, O, Op, dwp, part * O // nbuf,
                        (part + 1) * O // nbuf)


cpdef int wtile(int64_t Ci, int64_t Co, int64_t OH, int64_t OW):
    """The output-gradient tile (4 or 2) of the Winograd weight gradient of a 3x3 stride-1
    convolution (Ci input, Co output channels, OH x OW output) where ``pays`` says
    Winograd runs: F(3x3, 4x4) (the transpose of F(4x4, 3x3)) or F(3x3, 2x2), by the
    forward's rule (``tile``).  Measured on one core, batch 64 (F(3x3, 4x4) / F(3x3, 2x2)
    time): 0.69-0.71x at 16 -> 16 channels and 32x32 and at 32 -> 32 and 16x16, 0.76x at
    64 -> 64 and 8x8, 0.78x at 128 -> 128 and 8x8, 0.90x at 16 -> 16 and 8x8."""
    if _MODE == 4:
        return 4
    if _MODE > 0 or not _F4_ON:
        return 2
    return tile(Ci, Co, OH, OW)


def _conv3x3_weight_f4(x, g, dw, int64_t pt, int64_t pl):
    """conv3x3_weight_f32 over 4x4 tiles of the output gradient (arguments checked by the
    caller)."""
    global _CALLS4
    _CALLS4 += 1
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef int64_t O = g.shape[1], OH = g.shape[2], OW = g.shape[3]
    cdef int64_t TH = (OH + 3) // 4, TW = (OW + 3) // 4, NTR = N * TH, NU
    if TW <= 16:
        NU = (NTR + 16 // TW - 1) // (16 // TW)
    else:
        NU = NTR * ((TW + 15) // 16)
    # tiles per block: V, Gh and their transpose (~108 (C + O) Tp floats) within ~640 KiB
    cdef int64_t Tp = 64
    while Tp > 16 and 432 * (C + O) * Tp > 640 * 1024:
        Tp //= 2
    cdef int64_t nblocks = (NU + Tp // 16 - 1) // (Tp // 16)
    cdef int64_t Op = (O + 15) // 16 * 16, whlen = 36 * C * Op
    cdef int64_t slen = emb_w4_wscratch(C, O, Tp)
    cdef int nt = 1
    if nblocks > 1 and N * C * O * OH * OW >= 100000:
        nt = num_threads()
        if nt > nblocks:
            nt = <int>nblocks
    Wh_arr = _np.zeros((nt, whlen), dtype=_np.float64)
    cdef double* Wh = <double*>cnp.PyArray_DATA(Wh_arr)
    cdef const float* xp = <const float*>cnp.PyArray_DATA(x)
    cdef const float* gp = <const float*>cnp.PyArray_DATA(g)
    cdef int64_t blk, b0, b1
    cdef float* S
    cdef float* dwp = <float*>cnp.PyArray_DATA(dw)
    cdef int part, nbuf = nt
    cdef int64_t ss
    keep = []
    cdef float* Sb = _scratch(nt, slen, &ss, keep)
    with nogil, parallel(num_threads=nt):
        S = Sb + threadid() * ss
        for part in prange(nbuf, schedule="static"):
            b0 = part * nblocks // nbuf
            b1 = (part + 1) * nblocks // nbuf
            for blk in range(b0, b1):
                emb_w4_wblock(xp, C, H, W, pt, pl, gp, O, OH, OW, TH, TW, NTR, NU, Tp, blk,
                              Wh + part * whlen, S, (blk - b0) % 8 == 7 or blk == b1 - 1)
        for part in prange(nbuf, schedule="static"):
            emb_w4_wout(Wh, nbuf, whlen, C, Op, dwp, part * O // nbuf, (part + 1) * O // nbuf)
