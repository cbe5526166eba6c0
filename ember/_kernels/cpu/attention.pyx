# cython: language_level=3
"""Fused float32 attention on the CPU: forward and first-order backward, one OpenMP region
per call over the (batch, head) pairs (attention_cpu.h has the per-pair work).

Each pair's scores, softmax and products run back to back while its operands sit in the
caches, on ember's AVX-512 GEMM (f32_gemm.h, single-threaded inside the region) and the
softmax rows of nn_simd.h: the same formulas and primitives as the unfused path of
ember.nn.functional.attention (batched GEMMs around softmax.pyx), which is what runs where
this kernel does not (no AVX-512F, other dtypes, ``_set_fused(False)``, or
``EMBER_FUSED_ATTENTION=0`` in the environment).

``forward`` and ``backward`` take NumPy arrays whose batch axes already have the
attention's (broadcast) batch shape, and return False, leaving the results incomplete,
when they cannot run (strides that are not whole elements, a GEMM without memory for its
packing buffers): the caller then runs the unfused path.
"""
from cython.parallel cimport prange, threadid
from libc.stdlib cimport malloc, free

cimport numpy as cnp
import numpy as np
import os as _os

from ember._core.elementwise cimport num_threads

cnp.import_array()

cdef extern from "attention_cpu.h" nogil:
    int em_init_cpu()
    int em_f32_gemm_supported()
    enum:
        EM_ATT_MAXB
        EM_ATT_Q
        EM_ATT_K
        EM_ATT_V
        EM_ATT_BIAS
        EM_ATT_O
        EM_ATT_P
        EM_ATT_GO
        EM_ATT_GP
        EM_ATT_DS
        EM_ATT_DQ
        EM_ATT_DK
        EM_ATT_DV
        EM_ATT_NOPS
    ctypedef struct em_att_mat:
        char* ptr
        Py_ssize_t bs[16]
        Py_ssize_t rs
        Py_ssize_t cs
    ctypedef struct em_att_args:
        Py_ssize_t nb, L, S, D, Dv
        Py_ssize_t bshape[16]
        float scale
        em_att_mat m[12]
    int em_att_forward(const em_att_args* a, Py_ssize_t t)
    int em_att_backward(const em_att_args* a, Py_ssize_t t, float* scratch)

em_init_cpu()            # nn_simd.h's AVX2 paths, chosen once per module

# below this many multiply-adds per call one thread does everything (gemm.pyx's bound)
cdef Py_ssize_t PAR_MIN_MACS = 1 << 18

cdef bint _on = em_f32_gemm_supported() != 0 and \
    _os.environ.get("EMBER_FUSED_ATTENTION", "1") != "0"

# limits: scores of at most this many elements per pair (4 MiB; larger ones leave the
# caches anyway and run the unfused path, whose GEMMs split single pairs over threads)
MAX_SCORES = 1 << 20
MAX_BATCH_DIMS = EM_ATT_MAXB


def fused_enabled():
    """Whether float32 attention may run this fused kernel (the CPU has AVX-512F and it
    was not switched off)."""
    return _on


def _set_fused(bint on):
    """Testing hook: the fused kernel on (where the CPU has AVX-512F) or off (the unfused
    path of ember.nn.functional.attention)."""
    global _on
    _on = on and em_f32_gemm_supported() != 0


cdef bint _put(em_att_args* a, int w, cnp.ndarray x, int layout=0) except -1:
    """Operand w from NumPy array x (batch axes first, then its matrix); False when a
    stride is not a whole number of float32 elements, or the matrix is not laid out as
    `layout` asks: 1 unit column stride, 2 C-contiguous (L, S)."""
    cdef int d, nd = x.ndim, nb = <int>a.nb
    cdef Py_ssize_t r = x.strides[nd - 2], c = x.strides[nd - 1]
    if r % 4 or c % 4 or nd != nb + 2:
        return False
    if layout >= 1 and c != 4 and x.shape[nd - 1] > 1:
        return False
    if layout == 2 and r != 4 * a.S and x.shape[nd - 2] > 1:
        return False
    a.m[w].ptr = <char*>cnp.PyArray_DATA(x)
    a.m[w].rs = r // 4
    a.m[w].cs = c // 4
    for d in range(nb):
        a.m[w].bs[d] = x.strides[d]
    return True


cdef bint _init(em_att_args* a, tuple bshape, Py_ssize_t L, Py_ssize_t S, Py_ssize_t D,
                Py_ssize_t Dv, double scale) except -1:
    cdef int d
    if len(bshape) > EM_ATT_MAXB:
        return False
    a.nb = len(bshape)
    for d in range(a.nb):
        a.bshape[d] = bshape[d]
    a.L, a.S, a.D, a.Dv = L, S, D, Dv
    a.scale = <float>scale
    for d in range(EM_ATT_NOPS):
        a.m[d].ptr = NULL
    return True


cdef int _threads(Py_ssize_t pairs, Py_ssize_t macs) noexcept:
    cdef int nt = num_threads()
    if macs < PAR_MIN_MACS or pairs < 2 or nt < 1:
        return 1
    return nt if nt < pairs else <int>pairs


cdef Py_ssize_t SCRATCH_GAP = 1024


cdef inline float* _slot(float* p, int i, Py_ssize_t per) noexcept nogil:
    """Thread i's scratch in block p (NULL stays NULL): past the leading gap, 64-byte
    aligned."""
    if p == NULL:
        return NULL
    return <float*>((<size_t>(p + SCRATCH_GAP + i * per) + 63) & ~(<size_t>63))


def forward(cnp.ndarray q, cnp.ndarray k, cnp.ndarray v, object bias, double scale,
            cnp.ndarray out, cnp.ndarray p):
    """out = softmax(q k^T * scale + bias) @ v and p = the softmax, per pair of the batch
    axes (all arrays have the same batch shape; bias may be None).  q (..., L, D), k (...,
    S, D), v (..., S, Dv), bias (..., L, S), out (..., L, Dv) with unit column stride, p
    (..., L, S) C-contiguous; all float32.  False when it could not run."""
    cdef em_att_args a
    cdef Py_ssize_t L = q.shape[q.ndim - 2], S = k.shape[k.ndim - 2]
    cdef Py_ssize_t D = q.shape[q.ndim - 1], Dv = v.shape[v.ndim - 1]
    cdef Py_ssize_t pairs = 1, t
    cdef int nt, fail = 0
    bshape = tuple((<object>out).shape[:-2])
    for t in bshape:
        pairs *= t
    if not _init(&a, bshape, L, S, D, Dv, scale):
        return False
    if not (_put(&a, EM_ATT_Q, q) and _put(&a, EM_ATT_K, k) and _put(&a, EM_ATT_V, v)
            and _put(&a, EM_ATT_O, out, 1) and _put(&a, EM_ATT_P, p, 2)):
        return False
    if bias is not None and not _put(&a, EM_ATT_BIAS, bias):
        return False
    nt = _threads(pairs, pairs * L * S * (D + Dv))
    with nogil:
        if nt > 1:
            for t in prange(pairs, schedule="static", num_threads=nt):
                fail += em_att_forward(&a, t) != 0
        else:
            for t in range(pairs):
                fail += em_att_forward(&a, t) != 0
    return fail == 0


def backward(object go, object gp, cnp.ndarray p, cnp.ndarray q, cnp.ndarray k,
             cnp.ndarray v, double scale, cnp.ndarray dq, cnp.ndarray dk, cnp.ndarray dv,
             object ds):
    """The first-order backward of `forward` from go (gradient of out, any strides, or
    None) and gp (of p, C-contiguous, or None): writes dq, dk, dv (unit column strides) and
    ds, the gradient of the scores before scaling (C-contiguous like p; None: not wanted,
    each thread keeps it in a scratch).  All arrays have the same batch shape.  False when
    it could not run."""
    cdef em_att_args a
    cdef Py_ssize_t L = q.shape[q.ndim - 2], S = k.shape[k.ndim - 2]
    cdef Py_ssize_t D = q.shape[q.ndim - 1], Dv = v.shape[v.ndim - 1]
    cdef Py_ssize_t pairs = 1, t, per
    cdef int nt, fail = 0
    cdef float* scratch = NULL
    bshape = tuple((<object>p).shape[:-2])
    for t in bshape:
        pairs *= t
    if not _init(&a, bshape, L, S, D, Dv, scale):
        return False
    if not (_put(&a, EM_ATT_Q, q) and _put(&a, EM_ATT_K, k) and _put(&a, EM_ATT_V, v)
            and _put(&a, EM_ATT_P, p, 2) and (ds is None or _put(&a, EM_ATT_DS, ds, 2))
            and _put(&a, EM_ATT_DQ, dq, 1) and _put(&a, EM_ATT_DK, dk, 1)
            and _put(&a, EM_ATT_DV, dv, 1)):
        return False
    if go is not None and not _put(&a, EM_ATT_GO, go):
        return False
    if gp is not None and not _put(&a, EM_ATT_GP, gp, 2):
        return False
    nt = _threads(pairs, pairs * L * S * (2 * D + 2 * Dv))
    # each thread's scratch: 64-byte aligned, with SCRATCH_GAP floats before, between and
    # after the slots (measured: two threads' slots back to back, or next to other heap
    # blocks, made the two-thread backward ~40% slower than slots 4 KiB apart)
    per = (L * S + 15) // 16 * 16 + SCRATCH_GAP
    if ds is None and pairs:
        scratch = <float*>malloc(<size_t>(nt * per + SCRATCH_GAP + 16) * sizeof(float))
        if scratch == NULL:
            return False
    try:
        with nogil:
            if nt > 1:
                for t in prange(pairs, schedule="static", num_threads=nt):
                    fail += em_att_backward(&a, t, _slot(scratch, threadid(), per)) != 0
            else:
                for t in range(pairs):
                    fail += em_att_backward(&a, t, _slot(scratch, 0, per)) != 0
    finally:
        free(scratch)
    return fail == 0

