# cython: language_level=3
"""Matrix products on ember's own OpenMP threads, one BLAS call per block.

Why: NumPy's OpenBLAS keeps its own pool of threads that spin for a long time
after each call, and ember's elementwise kernels have theirs (OpenMP).  A
training step alternates GEMMs and elementwise ops many times, so on a
2-core machine the two pools take turns preempting each other: a threaded
64x256x256 GEMM measured here went from 50 us to several ms once the other
pool was awake.  PyTorch avoids this with a single pool, and so does ember:
each GEMM is split into blocks (batch entries, then row or column panels), the
blocks run in ember's OpenMP threads, and each block is one *single-threaded*
call into the BLAS that NumPy links (OpenBLAS's thread count is held at 1 while
ember's GEMMs run, and restored afterwards, so plain NumPy code keeps its
threads).

``matmul(a, b, out)`` has ``numpy.matmul(a, b, out=out)``'s meaning for NumPy
arrays with at least two dimensions; float32/float64 operands whose matrices
BLAS can address (one unit stride) go through this path, everything else (other
dtypes, exotic strides, no OpenBLAS found) goes to ``numpy.matmul`` itself.

float32 blocks with N and K above 16 run ember's own AVX-512 kernel where the CPU has it
(``f32_gemm.h``: small products read their operands in place, larger ones are packed
and K-blocked; C written directly; faster than OpenBLAS as measured in
benchmarks/README.md; ``EMBER_F32_GEMM=0`` turns it off).  ``bias`` (one value per
output column) is added as the kernel stores C, or after the BLAS call on the other
paths.

Thread split (``_run``): whole batch entries first, else one panel of rows or columns per
thread; every block packs the whole of the other operand.  float32 products on ember's
kernel whose K is long against both sides (K >= 4 x max(M, N): the weight gradients
g^T @ x of linear layers, K = tokens) split K instead (``_run_ksplit``): each thread sums
a range of K (the kernel's K blocks where they divide evenly), the first into C, the
others into per-thread scratch, then the threads add the partial sums into C by rows and
apply alpha and the bias once.  The summation order then depends on the thread count:
such products are not bit-identical between 1 and 2 threads (each is still within the
float32 rounding bound of a K-term dot product, and the same for the same thread count).
Batched float32 products whose right operand is one matrix for the whole batch (a 3-d
``x @ W``) run as one product of batch x M rows, W packed once per thread (the same
numbers).  ``EMBER_GEMM_KSPLIT=0`` or ``_set_ksplit(False)`` turns both off.

bfloat16 products run ember's own kernel where the CPU has AVX512-BF16
(``bf16_gemm.h``: bfloat16 pair dot products, float32 accumulators, one rounding; any
strides; the same thread split); elsewhere, and for float16, the operands are widened to
float32 for BLAS and the product rounded once.
"""
cimport cython
from cython.parallel cimport prange
from libc.stdint cimport int64_t, intptr_t

cimport numpy as cnp
import numpy as np
import os as _os

from ember._core.elementwise cimport num_threads, cast, assign
from ember._core.array cimport wrap_numpy, numpy_view
from ember._core.dtypes cimport T_FLOAT32
from ember._core.dtypes import is_half_dtype

cnp.import_array()

cdef extern from "em_math.h" nogil:
    # 16-bit floats <-> float32 runs: the conversions of ember's cast loops, bit for bit
    void em_widen16(int bf16, const unsigned short*, float*, Py_ssize_t)
    void em_narrow16(int bf16, const float*, unsigned short*, Py_ssize_t)

cdef extern from "bf16_gemm.h" nogil:
    # ember's bfloat16 GEMM (AVX512-BF16 dot products; see the header)
    int em_bf16_gemm_supported()
    int em_bf16_gemm(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, const unsigned short* A,
                     Py_ssize_t sam, Py_ssize_t sak, const unsigned short* B, Py_ssize_t sbk,
                     Py_ssize_t sbn, void* C, Py_ssize_t ldc, int c16)
    enum:
        EM_BG_MR
        EM_BG_NR
        EM_BG_KC

cdef extern from "f32_gemm.h" nogil:
    # ember's small float32 GEMM (AVX-512 FMAs, C written directly; see the header)
    int em_f32_gemm_supported()
    int em_f32_gemm(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, const float* A, Py_ssize_t sam,
                    Py_ssize_t sak, const float* B, Py_ssize_t sbk, Py_ssize_t sbn, float* C,
                    Py_ssize_t ldc, float alpha, const float* bias)
    void em_f32_gemm_tune(Py_ssize_t kc, Py_ssize_t mc, Py_ssize_t nc, int mode)
    Py_ssize_t em_f32_gemm_kc()

cdef extern from "f32_ksplit.h" nogil:
    # one float32 product over the threads by ranges of K (see the header)
    int em_f32_gemm_ksplit(int parts, Py_ssize_t M, Py_ssize_t N, const Py_ssize_t* kb,
                           const float* A, Py_ssize_t sam, Py_ssize_t sak, const float* B,
                           Py_ssize_t sbk, Py_ssize_t sbn, float* C, Py_ssize_t ldc,
                           float alpha, const float* bias, int no_scratch)
    enum:
        EM_KS_MAX_PARTS

cdef extern from *:
    """
    typedef void (*em_sgemm64_t)(int, int, int, long long, long long, long long, float,
                                 const float*, long long, const float*, long long, float,
                                 float*, long long);
    typedef void (*em_dgemm64_t)(int, int, int, long long, long long, long long, double,
                                 const double*, long long, const double*, long long, double,
                                 double*, long long);
    typedef void (*em_sgemm32_t)(int, int, int, int, int, int, float, const float*, int,
                                 const float*, int, float, float*, int);
    typedef void (*em_dgemm32_t)(int, int, int, int, int, int, double, const double*, int,
                                 const double*, int, double, double*, int);
    typedef int (*em_getn_t)(void);
    typedef void (*em_setn_t)(int);
    """
    ctypedef void (*em_sgemm64_t)(int, int, int, long long, long long, long long, float,
                                  const float*, long long, const float*, long long, float,
                                  float*, long long) noexcept nogil
    ctypedef void (*em_dgemm64_t)(int, int, int, long long, long long, long long, double,
                                  const double*, long long, const double*, long long, double,
                                  double*, long long) noexcept nogil
    ctypedef void (*em_sgemm32_t)(int, int, int, int, int, int, float, const float*, int,
                                  const float*, int, float, float*, int) noexcept nogil
    ctypedef void (*em_dgemm32_t)(int, int, int, int, int, int, double, const double*, int,
                                  const double*, int, double, double*, int) noexcept nogil
    ctypedef int (*em_getn_t)() noexcept nogil
    ctypedef void (*em_setn_t)(int) noexcept nogil

cdef enum:
    ROW_MAJOR = 101
    NO_TRANS = 111
    TRANS = 112
    MAX_BATCH_DIMS = 16

# Below this many multiply-adds a GEMM runs in the calling thread: waking the
# other threads costs more than the product (64x64x64 takes ~10 us here).
cdef int64_t PAR_MIN_MACS = 1 << 18

# float32 blocks of at most this many multiply-adds run ember's kernel (f32_gemm.h)
# instead of OpenBLAS sgemm, where the CPU has AVX-512F and EMBER_F32_GEMM=0 is not set.
# Measured (benchmarks/README.md, "Packed float32 GEMM"): with the packed, K-blocked
# driver the kernel was faster than or level with OpenBLAS on every product of the
# Transformer step (up to 2^27 multiply-adds, K up to 2048, transposed A or B); larger
# products were not measured and stay on OpenBLAS
cdef bint _f32_on = em_f32_gemm_supported() != 0 and \
    _os.environ.get("EMBER_F32_GEMM", "1") != "0"
cdef int64_t _f32_max_macs = int(_os.environ.get("EMBER_F32_GEMM_MAX_MACS", 1 << 28))
# ... and more than this many columns and k (its 12 x 32 tile wastes lanes on narrower
# products, and its per-tile cost shows on shorter sums: OpenBLAS measured faster there)
cdef int64_t _f32_min_nk = 16

# K split (_run_ksplit): a float32 product on ember's kernel whose K is at least
# _ksplit_ratio times its longer side gives each thread a range of K instead of a panel
# of rows or columns (a panel split makes every thread pack the whole of the other
# operand: K x min(M, N) elements each; a K split packs each element once and adds
# (threads - 1) x M x N partial sums at the end).  Measured in benchmarks/README.md
# ("K split"); EMBER_GEMM_KSPLIT=0 turns it off, _set_ksplit is the testing switch
cdef bint _ksplit_on = _os.environ.get("EMBER_GEMM_KSPLIT", "1") != "0"
cdef double _ksplit_ratio = 4.0
# ... each part at least this long: the kernel's K block (measured: 64 x 64 x 256 in two
# parts of 128 took 1.2x the row split's time; parts of 256 and more were level or faster)
cdef int64_t _ksplit_min_k = 256
# batched float32 products on the kernel whose right operand is one matrix for the whole
# batch (x @ W over a 3-d x) run as one product of batch x M rows (_collapse_rows): W is
# packed once per thread instead of once per batch entry; the same numbers per element
cdef bint _collapse_on = _os.environ.get("EMBER_GEMM_KSPLIT", "1") != "0"
cdef int64_t _ksplit_count = 0         # K-split products run (testing: _ksplit_runs)
cdef int64_t _collapse_count = 0       # batches run as one product (testing: _collapse_runs)
cdef bint _ksplit_no_scratch = False    # testing: every scratch request fails

cdef em_sgemm64_t _sgemm64 = NULL
cdef em_dgemm64_t _dgemm64 = NULL
cdef em_sgemm32_t _sgemm32 = NULL
cdef em_dgemm32_t _dgemm32 = NULL
cdef em_getn_t _blas_get_threads = NULL
cdef em_setn_t _blas_set_threads = NULL
cdef bint _ilp64 = False
cdef bint _available = False
cdef int _active = 0           # ember GEMMs in flight (changed under the GIL)
cdef int _saved_blas_threads = 1
BLAS_LIBRARY = None


# ---------------------------------------------------------------- finding BLAS

def _addr(lib, name):
    import ctypes
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        return None


@cython.wraparound(True)
def _find_openblas():
    """The OpenBLAS that NumPy loaded: (path, {role: address}, ilp64) or None."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f
                            if "openblas" in line.rsplit("/", 1)[-1].lower()
                            and ".so" in line.rsplit("/", 1)[-1]})
    except OSError:
        return None
    # 64-bit-integer builds (NumPy wheels: scipy_openblas64) first, then plain ones
    candidates = (
        (True, "scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_",
         "scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
        (False, "scipy_cblas_sgemm", "scipy_cblas_dgemm",
         "scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
        (False, "cblas_sgemm", "cblas_dgemm", "openblas_get_num_threads",
         "openblas_set_num_threads"),
    )
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for ilp64, s, d, g, st in candidates:
            addrs = {k: _addr(lib, n) for k, n in (("s", s), ("d", d), ("get", g), ("set", st))}
            if all(addrs.values()):
                if not ilp64 and path.find("64_") >= 0 and s == "cblas_sgemm":
                    continue        # a 64-bit-integer library without suffixes: unsafe to guess
                return path, addrs, ilp64
    return None


def _install():
    global _sgemm64, _dgemm64, _sgemm32, _dgemm32, _blas_get_threads, _blas_set_threads
    global _ilp64, _available, BLAS_LIBRARY
    np.matmul(np.ones((2, 2)), np.ones((2, 2)))      # make sure NumPy's BLAS is loaded
    found = _find_openblas()
    if found is None:
        return
    path, addrs, ilp64 = found
    cdef intptr_t s = addrs["s"], d = addrs["d"], g = addrs["get"], st = addrs["set"]
    if ilp64:
        _sgemm64 = <em_sgemm64_t>s
        _dgemm64 = <em_dgemm64_t>d
    else:
        _sgemm32 = <em_sgemm32_t>s
        _dgemm32 = <em_dgemm32_t>d
    _blas_get_threads = <em_getn_t>g
    _blas_set_threads = <em_setn_t>st
    _ilp64 = ilp64
    _available = True
    BLAS_LIBRARY = path


_install()


def available():
    """Whether ember found an OpenBLAS to drive from its own threads."""
    return _available


def _set_enabled(bint on):
    """Testing hook: route every product to numpy.matmul (False) or back."""
    global _available
    _available = on and BLAS_LIBRARY is not None


# ---------------------------------------------------------------- the kernel

cdef struct Mat:
    char* base
    int trans                     # NO_TRANS or TRANS (as seen by row-major BLAS)
    int64_t ld


cdef inline bint _blas_layout(Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t s0, Py_ssize_t s1,
                              Py_ssize_t item, int* trans, int64_t* ld) noexcept:
    """How row-major BLAS sees a rows x cols matrix with byte strides (s0, s1)."""
    if rows <= 1:
        s0 = cols * item if cols > 1 else item
    if cols <= 1:
        s1 = item
    if s1 == item and s0 % item == 0 and s0 >= cols * item and s0 > 0:
        trans[0] = NO_TRANS
        ld[0] = s0 // item
        return True
    if s0 == item and s1 % item == 0 and s1 >= rows * item and s1 > 0:
        trans[0] = TRANS
        ld[0] = s1 // item
        return True
    return False


cdef inline void _call(int dt, int ta, int tb, int64_t m, int64_t n, int64_t k,
                       const char* a, int64_t lda, const char* b, int64_t ldb,
                       char* c, int64_t ldc, double alpha) noexcept nogil:
    if dt == 0:
        if _ilp64:
            _sgemm64(ROW_MAJOR, ta, tb, m, n, k, <float>alpha, <const float*>a, lda,
                     <const float*>b, ldb, 0.0, <float*>c, ldc)
        else:
            _sgemm32(ROW_MAJOR, ta, tb, <int>m, <int>n, <int>k, <float>alpha, <const float*>a,
                     <int>lda, <const float*>b, <int>ldb, 0.0, <float*>c, <int>ldc)
    else:
        if _ilp64:
            _dgemm64(ROW_MAJOR, ta, tb, m, n, k, alpha, <const double*>a, lda,
                     <const double*>b, ldb, 0.0, <double*>c, ldc)
        else:
            _dgemm32(ROW_MAJOR, ta, tb, <int>m, <int>n, <int>k, alpha, <const double*>a,
                     <int>lda, <const double*>b, <int>ldb, 0.0, <double*>c, <int>ldc)


cdef Py_ssize_t _batch_strides(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, int nb,
                               Py_ssize_t* bshape, Py_ssize_t* sa, Py_ssize_t* sb,
                               Py_ssize_t* sc):
    """c's leading nb axes (the batch) and a's, b's, c's byte strides along them (an axis
    a or b broadcasts has stride 0); returns the number of batch entries."""
    cdef int d, da, db_, nda = a.ndim, ndb = b.ndim, ndc = c.ndim
    cdef Py_ssize_t batch = 1
    for d in range(nb):
        bshape[d] = c.shape[d]
        batch *= bshape[d]
        da = d - (ndc - nda)
        db_ = d - (ndc - ndb)
        sa[d] = a.strides[da] if da >= 0 and a.shape[da] != 1 else 0
        sb[d] = b.strides[db_] if db_ >= 0 and b.shape[db_] != 1 else 0
        sc[d] = c.strides[d]
    return batch


cdef inline Py_ssize_t _batch_offsets(Py_ssize_t bi, Py_ssize_t nb, const Py_ssize_t* bshape,
                                      const Py_ssize_t* sa, const Py_ssize_t* sb,
                                      const Py_ssize_t* sc, Py_ssize_t* oa, Py_ssize_t* ob,
                                      Py_ssize_t* oc) noexcept nogil:
    """Byte offsets of batch entry bi in A, B and C (the batch index unravelled in C order)."""
    cdef Py_ssize_t d, idx
    oa[0] = ob[0] = oc[0] = 0
    for d in range(nb - 1, -1, -1):
        idx = bi % bshape[d]
        bi = bi // bshape[d]
        oa[0] += idx * sa[d]
        ob[0] += idx * sb[d]
        oc[0] += idx * sc[d]
    return 0


cdef void _add_bias(int dt, char* c, int64_t ldc, int64_t m, int64_t n,
                    const char* bias) noexcept nogil:
    """c[i, j] += bias[j] over an m x n block (row stride ldc elements): one rounding per
    element, as a separate addition."""
    cdef int64_t i, j
    cdef float* cf
    cdef const float* bf = <const float*>bias
    cdef double* cd
    cdef const double* bd = <const double*>bias
    for i in range(m):
        if dt == 0:
            cf = <float*>c + i * ldc
            for j in range(n):
                cf[j] = cf[j] + bf[j]
        else:
            cd = <double*>c + i * ldc
            for j in range(n):
                cd[j] = cd[j] + bd[j]


cdef void _block(int dt, Py_ssize_t item, Py_ssize_t t, Py_ssize_t nsplit, bint split_rows,
                 Py_ssize_t nb, const Py_ssize_t* bshape, const Py_ssize_t* sa,
                 const Py_ssize_t* sb, const Py_ssize_t* sc, Mat A, Mat B, Mat C,
                 int64_t M, int64_t N, int64_t K, double alpha,
                 const char* bias) noexcept nogil:
    """Block t: batch entry t // nsplit, panel t % nsplit of its rows (or columns)."""
    cdef Py_ssize_t bi = t // nsplit, part = t - bi * nsplit
    cdef Py_ssize_t oa, ob, oc
    cdef int64_t lo, hi, extent = M if split_rows else N
    _batch_offsets(bi, nb, bshape, sa, sb, sc, &oa, &ob, &oc)
    lo = extent * part // nsplit
    hi = extent * (part + 1) // nsplit
    if hi <= lo:
        return
    cdef const char* pa = A.base + oa
    cdef const char* pb = B.base + ob
    cdef char* pc = C.base + oc
    cdef int64_t m = M, n = N
    if split_rows:      # rows lo:hi of A and C
        pa += lo * (A.ld if A.trans == NO_TRANS else 1) * item
        pc += lo * C.ld * item
        m = hi - lo
    else:               # columns lo:hi of B and C
        pb += lo * (1 if B.trans == NO_TRANS else B.ld) * item
        pc += lo * item
        if bias != NULL:
            bias += lo * item
        n = hi - lo
    if dt == 0 and _f32_on and m * n * K <= _f32_max_macs and n > _f32_min_nk \
            and K > _f32_min_nk:
        # float32 products: ember's kernel (see _f32_max_macs)
        if em_f32_gemm(m, n, K, <const float*>pa, A.ld if A.trans == NO_TRANS else 1,
                       1 if A.trans == NO_TRANS else A.ld, <const float*>pb,
                       B.ld if B.trans == NO_TRANS else 1, 1 if B.trans == NO_TRANS else B.ld,
                       <float*>pc, C.ld, <float>alpha, <const float*>bias) == 0:
            return
    _call(dt, A.trans, B.trans, m, n, K, pa, A.ld, pb, B.ld, pc, C.ld, alpha)
    if bias != NULL:
        _add_bias(dt, pc, C.ld, m, n, bias)


cdef bint _run(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, double alpha=1.0,
               const char* bias=NULL) except -1:
    """alpha times the product (plus bias, a contiguous vector of c's dtype over its
    columns, when not NULL) through BLAS, or False when this path cannot take it."""
    cdef int nda = a.ndim, ndb = b.ndim, ndc = c.ndim
    cdef int nb = ndc - 2, d
    cdef Py_ssize_t item = c.itemsize
    cdef int dt = 0 if c.dtype.num == cnp.NPY_FLOAT32 else 1
    cdef Py_ssize_t M = c.shape[ndc - 2], N = c.shape[ndc - 1], K = a.shape[nda - 1]
    cdef Py_ssize_t bshape[MAX_BATCH_DIMS]
    cdef Py_ssize_t sa[MAX_BATCH_DIMS]
    cdef Py_ssize_t sb[MAX_BATCH_DIMS]
    cdef Py_ssize_t sc[MAX_BATCH_DIMS]
    cdef Mat A, B, C
    cdef Py_ssize_t batch = 1, nsplit, total, t
    cdef int64_t macs
    cdef bint split_rows
    cdef int nt
    global _collapse_count
    if nb > MAX_BATCH_DIMS or M == 0 or N == 0 or K == 0:
        return False
    if not _blas_layout(M, K, a.strides[nda - 2], a.strides[nda - 1], item, &A.trans, &A.ld):
        return False
    if not _blas_layout(K, N, b.strides[ndb - 2], b.strides[ndb - 1], item, &B.trans, &B.ld):
        return False
    if not _blas_layout(M, N, c.strides[ndc - 2], c.strides[ndc - 1], item, &C.trans, &C.ld) \
            or C.trans != NO_TRANS:
        return False
    batch = _batch_strides(a, b, c, nb, bshape, sa, sb, sc)
    A.base = <char*>cnp.PyArray_DATA(a)
    B.base = <char*>cnp.PyArray_DATA(b)
    C.base = <char*>cnp.PyArray_DATA(c)
    macs = <int64_t>batch * M * N * K
    nt = num_threads()
    if macs < PAR_MIN_MACS or nt <= 1:
        nt = 1
    if batch > 1 and dt == 0 and _f32_on and _collapse_on and A.trans == NO_TRANS \
            and N > _f32_min_nk and K > _f32_min_nk \
            and (batch * M + nt - 1) // nt * N * K <= _f32_max_macs \
            and _collapse_rows(nb, bshape, sa, sb, sc, M, A.ld * item, C.ld * item):
        M *= batch
        batch = 1
        nb = 0
        _collapse_count += 1
    # one block per thread: whole batch entries first, else panels of the longer of
    # rows / columns (each block repacks the other operand whole, so keep blocks few)
    split_rows = M >= N
    nsplit = 1
    if batch < nt and nt > 1:
        nsplit = (nt + batch - 1) // batch
        nsplit = min(nsplit, max(M if split_rows else N, 1))
    total = batch * nsplit
    _enter()
    try:
        if dt == 0 and batch == 1 and nt > 1 and _ksplit_on and _f32_on \
                and _run_ksplit(A, B, C, M, N, K, nt, alpha, <const float*>bias):
            return True
        with nogil:
            if nt > 1 and total > 1:
                for t in prange(total, schedule="static", num_threads=nt):
                    _block(dt, item, t, nsplit, split_rows, nb, bshape, sa, sb, sc, A, B, C,
                           M, N, K, alpha, bias)
            else:
                for t in range(total):
                    _block(dt, item, t, nsplit, split_rows, nb, bshape, sa, sb, sc, A, B, C,
                           M, N, K, alpha, bias)
    finally:
        _leave()
    return True


cdef bint _collapse_rows(int nb, const Py_ssize_t* bshape, const Py_ssize_t* sa,
                         const Py_ssize_t* sb, const Py_ssize_t* sc, Py_ssize_t M,
                         Py_ssize_t lda, Py_ssize_t ldc) noexcept:
    """Whether the batch is one product of batch x M rows: B the same matrix for every
    entry (stride 0), A's and C's entries one after another at M rows of lda / ldc bytes
    (A not transposed)."""
    cdef Py_ssize_t ea = M * lda, ec = M * ldc
    cdef int d
    for d in range(nb - 1, -1, -1):
        if bshape[d] == 1:
            continue
        if sb[d] != 0 or sa[d] != ea or sc[d] != ec:
            return False
        ea *= bshape[d]
        ec *= bshape[d]
    return True


cdef inline Py_ssize_t _kbound(Py_ssize_t K, Py_ssize_t unit, Py_ssize_t part,
                               Py_ssize_t parts) noexcept nogil:
    """Where K range `part` of `parts` starts: a multiple of unit (K at the end)."""
    cdef Py_ssize_t units = (K + unit - 1) // unit
    cdef Py_ssize_t k = units * part // parts * unit
    return k if k < K else K


cdef bint _run_ksplit(Mat A, Mat B, Mat C, int64_t M, int64_t N, int64_t K, int nt,
                      double alpha, const float* bias) noexcept:
    """A float32 product (one matrix, on ember's kernel) over nt threads by ranges of K
    (f32_ksplit.h), when its K is long against its rows and columns (_ksplit_ratio); the
    ranges are multiples of the kernel's K block where those divide evenly, else of 16.
    False (C then holds garbage that the caller's split overwrites) when the rule says
    no, or when a scratch buffer or the kernel had no memory."""
    cdef Py_ssize_t parts = nt if nt < EM_KS_MAX_PARTS else EM_KS_MAX_PARTS
    cdef Py_ssize_t longer = M if M >= N else N, unit, kc, p
    cdef Py_ssize_t kb[EM_KS_MAX_PARTS + 1]
    cdef int r
    global _ksplit_count
    if K < _ksplit_ratio * longer or N <= _f32_min_nk:
        return False
    while parts > 1 and K < parts * _ksplit_min_k:
        parts -= 1
    if parts < 2 or K // parts <= _f32_min_nk \
            or M * N * ((K + parts - 1) // parts) > _f32_max_macs:
        return False
    kc = em_f32_gemm_kc()
    unit = kc if (K + kc - 1) // kc % parts == 0 else (16 if K >= 16 * parts else 1)
    for p in range(parts + 1):
        kb[p] = _kbound(K, unit, p, parts)
    with nogil:
        r = em_f32_gemm_ksplit(<int>parts, M, N, kb, <const float*>A.base,
                               A.ld if A.trans == NO_TRANS else 1,
                               1 if A.trans == NO_TRANS else A.ld, <const float*>B.base,
                               B.ld if B.trans == NO_TRANS else 1,
                               1 if B.trans == NO_TRANS else B.ld, <float*>C.base, C.ld,
                               <float>alpha, bias, _ksplit_no_scratch)
    if r != 0:
        return False
    _ksplit_count += 1
    return True


def _ksplit_runs():
    """How many products the K split has run (testing hook)."""
    return _ksplit_count


def _collapse_runs():
    """How many batched products have run as one product of batch x M rows (testing)."""
    return _collapse_count


def _ksplit_fail_scratch(bint on):
    """Testing hook: every K split's scratch request fails (as with no memory)."""
    global _ksplit_no_scratch
    _ksplit_no_scratch = on


def _set_ksplit(bint on, ratio=None, min_k=None, collapse=None):
    """Testing / benchmarking switch: float32 products split K over the threads where
    the rule allows (True, the default) or always split rows / columns (False), and the
    batch-to-rows collapse with it (``collapse`` sets that one alone); ``ratio`` and
    ``min_k`` set the rule (K at least ratio x the longer of M and N, at least min_k per
    thread).  Returns the previous (on, ratio, min_k, collapse)."""
    global _ksplit_on, _collapse_on, _ksplit_ratio, _ksplit_min_k
    old = (_ksplit_on, _ksplit_ratio, _ksplit_min_k, _collapse_on)
    _ksplit_on = on
    _collapse_on = on if collapse is None else collapse
    if ratio is not None:
        _ksplit_ratio = ratio
    if min_k is not None:
        _ksplit_min_k = min_k
    return old


cdef inline void _enter() noexcept:
    # BLAS runs single-threaded inside ember's threads (see the module docstring);
    # the caller's setting comes back when the last ember GEMM leaves
    global _active, _saved_blas_threads
    if _active == 0:
        _saved_blas_threads = _blas_get_threads()
        if _saved_blas_threads != 1:
            _blas_set_threads(1)
    _active += 1


cdef inline void _leave() noexcept:
    global _active
    _active -= 1
    if _active == 0 and _saved_blas_threads != 1:
        _blas_set_threads(_saved_blas_threads)


cdef class _OneBlasThread:
    """``with one_blas_thread:`` NumPy's OpenBLAS runs on one thread inside.

    For the ember ops that call NumPy's BLAS/LAPACK themselves (linalg, einsum,
    tensordot, products of other dtypes): the work stays on the calling thread
    instead of waking OpenBLAS's own pool against ember's (see the module
    docstring).  Nests, and restores NumPy's setting when the last one leaves.
    """
    def __enter__(self):
        if _blas_set_threads != NULL:
            _enter()
        return self

    def __exit__(self, *exc):
        if _blas_set_threads != NULL:
            _leave()
        return False


one_blas_thread = _OneBlasThread()


def blas_threads_held():
    """Whether ember holds NumPy's OpenBLAS at one thread right now (testing hook)."""
    return _active > 0


def matmul(a, b, out, alpha=1.0, bias=None):
    """``numpy.matmul(a, b, out=out)`` with the work on ember's threads; with ``alpha``,
    ``out = alpha * (a @ b)`` (each product element rounded, then multiplied by alpha:
    the same numbers as a separate multiplication, without its pass over ``out``); with
    ``bias`` (a 1-d NumPy array of ``out``'s dtype, one value per column),
    ``out = alpha * (a @ b) + bias`` broadcast over the rows, the addition rounded after
    the product as a separate addition would be (the float32 kernel adds it as it stores
    C; the other paths add it after the product).

    ``a`` (..., M, K), ``b`` (..., K, N) and ``out`` (..., M, N) are NumPy arrays;
    batch axes broadcast as in ``numpy.matmul``.  Returns ``out``.

    >>> import numpy as np
    >>> from ember._kernels.cpu import gemm
    >>> a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    >>> gemm.matmul(a, b, np.empty((2, 4), np.float32))[0].tolist()
    [3.0, 3.0, 3.0, 3.0]
    >>> gemm.matmul(a, b, np.empty((2, 4), np.float32), alpha=0.5)[0].tolist()
    [1.5, 1.5, 1.5, 1.5]
    >>> bias = np.arange(4, dtype=np.float32)
    >>> gemm.matmul(a, b, np.empty((2, 4), np.float32), bias=bias)[1].tolist()
    [3.0, 4.0, 5.0, 6.0]
    """
    cdef cnp.ndarray na, nb_, nc, bv = None
    cdef double al = alpha
    cdef const char* bp = NULL
    if bias is not None:
        bv = _checked_bias(a, b, out, bias)
        bp = <const char*>cnp.PyArray_DATA(bv)
    if _available and type(a) is np.ndarray and type(b) is np.ndarray \
            and type(out) is np.ndarray:
        na, nb_, nc = a, b, out
        if na.ndim >= 2 and nb_.ndim >= 2 and nc.ndim == max(na.ndim, nb_.ndim) \
                and nc.flags.writeable:
            tn = nc.dtype.num
            if (tn == cnp.NPY_FLOAT32 or tn == cnp.NPY_FLOAT64) and na.dtype.num == tn \
                    and nb_.dtype.num == tn and _shapes_ok(na, nb_, nc) \
                    and not _overlaps(na, nb_, nc):
                if _run(na, nb_, nc, al, bp):
                    return out
                if _run_constant_axis(na, nb_, nc):
                    return _biased(_scaled(out, al), bv)
                # operands BLAS cannot address (a stride-0 gradient from sum(), say):
                # contiguous copies cost far less than the product and keep the work
                # on ember's threads
                if _run_copied(na, nb_, nc, al, bp):
                    return out
            elif (tn == cnp.NPY_FLOAT32 or tn == cnp.NPY_FLOAT64) and na.dtype.num == tn \
                    and nb_.dtype.num == tn and _shapes_ok(na, nb_, nc):
                # out overlaps an operand: the product goes to a fresh array first
                wide = np.empty(out.shape, out.dtype)
                if _run(na, nb_, wide, al, bp) or _run_copied(na, nb_, wide, al, bp):
                    out[...] = wide
                    return out
    if bv is not None:
        # the rarer paths below: the (scaled) product, then the bias added to it
        return _biased(matmul(a, b, out, al), bv)
    if al != 1.0:
        # the rarer paths below compute the product, then scale it (after rounding to the
        # result's dtype, as a separate multiplication would)
        return _scaled(matmul(a, b, out), al)
    if is_half_dtype(out.dtype) and a.dtype == out.dtype and b.dtype == out.dtype:
        if _bf16_on and out.dtype.name == "bfloat16" and _bf16_product(a, b, out):
            return out
        # 16-bit floats multiply in float32 (BLAS; NumPy's float16 loop is scalar
        # and bfloat16's is generic) and round once at the end, as PyTorch does.
        # The operands are widened in their own memory order (a transposed weight
        # stays transposed: BLAS reads either) and the product is rounded in one
        # threaded pass each, with the conversions of ember's cast loops
        wide = np.empty(out.shape, np.float32)
        matmul(_widened(a), _widened(b), wide)
        if type(out) is np.ndarray and (<cnp.ndarray>out).flags.c_contiguous \
                and (<cnp.ndarray>out).flags.writeable:
            _convert(wide, out, False)
        else:
            assign(wrap_numpy(out), wrap_numpy(wide))
        return out
    with one_blas_thread:       # complex, integer, empty or > 16 batch axes
        return np.matmul(a, b, out=out)


cdef cnp.ndarray _checked_bias(object a, object b, object out, object bias):
    """bias as a contiguous 1-d NumPy array of out's dtype with out's column count, or a
    TypeError / ValueError naming the shapes and dtypes."""
    if type(bias) is not np.ndarray:
        raise TypeError(f"matmul: bias must be a NumPy array, got {type(bias).__name__} "
                        f"(a {a.shape} @ b {b.shape} -> out {out.shape})")
    n = out.shape[out.ndim - 1] if out.ndim else None      # (no wraparound here)
    if bias.dtype != out.dtype:
        raise TypeError(f"matmul: bias dtype {bias.dtype} differs from the result's "
                        f"{out.dtype} (a {a.shape} @ b {b.shape} -> out {out.shape})")
    if bias.ndim != 1 or n is None or bias.shape[0] != n:
        raise ValueError(f"matmul: bias of shape {bias.shape} does not match the product's "
                         f"columns (a {a.shape} @ b {b.shape} -> out {out.shape}; expected "
                         f"bias ({n},))")
    return np.ascontiguousarray(bias)


cdef object _biased(object out, cnp.ndarray bias):
    """out += bias over its last axis (a separate addition; nothing when bias is None);
    returns out."""
    if bias is not None:
        np.add(out, bias, out=out)
    return out


cdef object _scaled(object out, double alpha):
    """out *= alpha in place (nothing when alpha is 1); returns out."""
    if alpha != 1.0:
        np.multiply(out, out.dtype.type(alpha) if out.dtype.kind in "fc" else alpha, out=out,
                    casting="unsafe")
    return out


@cython.wraparound(True)
def matmul_new(a, b):
    """``numpy.matmul(a, b)`` for NumPy arrays, on ember's threads (a new array).

    >>> import numpy as np
    >>> from ember._kernels.cpu import gemm
    >>> gemm.matmul_new(np.ones((2, 3)), np.ones((3, 1))).tolist()
    [[3.0], [3.0]]
    """
    if a.ndim < 2 or b.ndim < 2:
        with one_blas_thread:
            return np.matmul(a, b)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if a.shape[-1] != b.shape[-2]:
        with one_blas_thread:
            return np.matmul(a, b)          # NumPy's error message
    return matmul(a, b, np.empty(shape, np.result_type(a.dtype, b.dtype)))


cdef bint _run_constant_axis(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c) except -1:
    """The product when an operand's matrices are constant along an axis (stride 0:
    the broadcast gradient of ``sum()`` or ``mean()``), in O(MK + KN + MN) instead of
    O(MNK), or False for other operands.

    a constant along k (a[i, k] = u[i]): c[i, j] = u[i] * sum_k b[k, j], a rank-1
    outer product; a's rows all equal: one row times b, repeated; likewise for b.
    The sums accumulate in float64 and each element is rounded once.
    """
    cdef int nda = a.ndim, ndb = b.ndim
    cdef Py_ssize_t M = a.shape[nda - 2], K = a.shape[nda - 1], N = b.shape[ndb - 1]
    with np.errstate(all="ignore"):     # BLAS sets no floating-point warnings either
        return _constant_axis(a, b, c, M, K, N)


cdef bint _constant_axis(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, Py_ssize_t M,
                         Py_ssize_t K, Py_ssize_t N) except -1:
    cdef int nda = a.ndim, ndb = b.ndim
    if K > 1 and a.strides[nda - 1] == 0:
        np.multiply((<object>a)[..., :, :1], b.sum(axis=-2, keepdims=True, dtype=np.float64),
                    out=c)
    elif K > 1 and b.strides[ndb - 2] == 0:
        np.multiply(a.sum(axis=-1, keepdims=True, dtype=np.float64), (<object>b)[..., :1, :],
                    out=c)
    elif M > 1 and a.strides[nda - 2] == 0:
        np.copyto(c, matmul_new((<object>a)[..., :1, :], b))
    elif N > 1 and b.strides[ndb - 1] == 0:
        np.copyto(c, matmul_new(a, (<object>b)[..., :, :1]))
    else:
        return False
    return True


cdef bint _run_copied(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, double alpha=1.0,
                      const char* bias=NULL) except -1:
    """_run on C-contiguous copies of the operands (and a fresh result if c's
    layout is not addressable either), or False when even that cannot run."""
    cdef cnp.ndarray ca = np.ascontiguousarray(a), cb = np.ascontiguousarray(b)
    cdef cnp.ndarray cc = c if c.flags.c_contiguous else np.empty((<object>c).shape, c.dtype)
    if ca is a and cb is b and cc is c:
        return False                         # nothing to change: _run already said no
    if not _run(ca, cb, cc, alpha, bias):
        return False
    if cc is not c:
        c[...] = cc
    return True


cdef object _widened(object a):
    """A float32 NumPy copy of 16-bit NumPy array a: in a's memory order when a is
    C- or F-contiguous (one flat threaded pass), else C-ordered by ember's cast loops."""
    cdef cnp.ndarray x, w
    if type(a) is np.ndarray:
        x = a
        if x.flags.c_contiguous or x.flags.f_contiguous:
            w = np.empty(a.shape, np.float32, order="C" if x.flags.c_contiguous else "F")
            _convert(x, w, True)
            return w
    return numpy_view(cast(wrap_numpy(a), T_FLOAT32))


# elements per thread chunk of the conversions, and the size from which they use threads
cdef enum:
    CONVERT_CHUNK = 32768
cdef Py_ssize_t CONVERT_PAR_MIN = 1 << 17


cdef inline void _convert_chunk(bint widen, bint bf16, char* src, char* dst, Py_ssize_t lo,
                                Py_ssize_t hi) noexcept nogil:
    if widen:
        em_widen16(bf16, <unsigned short*>src + lo, <float*>dst + lo, hi - lo)
    else:
        em_narrow16(bf16, <float*>src + lo, <unsigned short*>dst + lo, hi - lo)


cdef int _convert(cnp.ndarray src, cnp.ndarray dst, bint widen) except -1:
    """dst = src converted 16-bit -> float32 (widen) or float32 -> 16-bit, element by
    element in memory order: both arrays contiguous in the same order, same size."""
    cdef Py_ssize_t n = cnp.PyArray_SIZE(src), nchunks, c, lo, hi
    cdef bint bf16 = (src.dtype if widen else dst.dtype).name == "bfloat16"
    cdef char* ps = <char*>cnp.PyArray_DATA(src)
    cdef char* pd = <char*>cnp.PyArray_DATA(dst)
    cdef int nt = num_threads()
    if n < CONVERT_PAR_MIN or nt <= 1:
        with nogil:
            _convert_chunk(widen, bf16, ps, pd, 0, n)
        return 0
    nchunks = (n + CONVERT_CHUNK - 1) // CONVERT_CHUNK
    with nogil:
        for c in prange(nchunks, schedule="static", num_threads=nt):
            lo = c * CONVERT_CHUNK
            hi = lo + CONVERT_CHUNK
            if hi > n:
                hi = n
            _convert_chunk(widen, bf16, ps, pd, lo, hi)
    return 0


cdef bint _shapes_ok(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c):
    cdef int nda = a.ndim, ndb = b.ndim, ndc = c.ndim, d, da, db_
    cdef Py_ssize_t ea, eb
    if a.shape[nda - 1] != b.shape[ndb - 2] or c.shape[ndc - 2] != a.shape[nda - 2] \
            or c.shape[ndc - 1] != b.shape[ndb - 1]:
        return False
    for d in range(ndc - 2):
        da = d - (ndc - nda)
        db_ = d - (ndc - ndb)
        ea = a.shape[da] if da >= 0 else 1
        eb = b.shape[db_] if db_ >= 0 else 1
        if (ea != 1 and ea != c.shape[d]) or (eb != 1 and eb != c.shape[d]):
            return False
    return True


cdef void _bounds(cnp.ndarray x, char** lo, char** hi) noexcept:
    cdef char* l = <char*>cnp.PyArray_DATA(x)
    cdef char* h = l
    cdef int d
    for d in range(x.ndim):
        if x.shape[d] == 0:
            lo[0] = hi[0] = l
            return
        if x.strides[d] < 0:
            l += (x.shape[d] - 1) * x.strides[d]
        else:
            h += (x.shape[d] - 1) * x.strides[d]
    cdef Py_ssize_t item = cnp.PyArray_ITEMSIZE(x)
    lo[0] = l
    hi[0] = h + item


cdef bint _overlaps(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c):
    # writing into an operand is NumPy's job (it buffers); a bounds check is enough here
    cdef char* la
    cdef char* ha
    cdef char* lb
    cdef char* hb
    cdef char* lc
    cdef char* hc
    _bounds(a, &la, &ha)
    _bounds(b, &lb, &hb)
    _bounds(c, &lc, &hc)
    return (lc < ha and la < hc) or (lc < hb and lb < hc)


# ---------------------------------------------------------------- small float32 kernel

import os as _os



def f32_kernel():
    """Whether small float32 products run ember's AVX-512 kernel (the CPU has AVX-512F
    and ``EMBER_F32_GEMM=0`` is not set) instead of OpenBLAS sgemm.

    >>> from ember._kernels.cpu import gemm
    >>> gemm.f32_kernel() in (True, False)
    True
    """
    return _f32_on


def _f32_tune(kc=0, mc=0, nc=0, mode=-1):
    """Tuning hook of the float32 kernel: the packed driver's K, row and column blocks
    (elements; 0 keeps the current value) and the driver choice (0: by size, 1: always
    packed, 2: always in place; -1 keeps it), or with mode 3 / 4 the packed driver's
    prefetch of its next blocks off / on (the driver choice kept).  Only while no product
    runs."""
    em_f32_gemm_tune(kc, mc, nc, mode)


def _set_f32_kernel(bint on, max_macs=None, min_nk=None):
    """Testing hook: small float32 products on ember's kernel (True, where the CPU has
    AVX-512F) or on OpenBLAS (False); ``max_macs`` sets the size limit per block and
    ``min_nk`` the bound that its N and K must exceed."""
    global _f32_on, _f32_max_macs, _f32_min_nk
    _f32_on = on and em_f32_gemm_supported() != 0
    if max_macs is not None:
        _f32_max_macs = max_macs
    if min_nk is not None:
        _f32_min_nk = min_nk


def _f32_limit():
    """The size limits of the small float32 kernel: (max multiply-adds per block, the
    bound its N and K must exceed)."""
    return _f32_max_macs, _f32_min_nk


# ---------------------------------------------------------------- bfloat16 kernel

cdef bint _bf16_on = em_bf16_gemm_supported() != 0 and \
    _os.environ.get("EMBER_BF16_GEMM", "1") != "0"


def bf16_kernel():
    """Whether bfloat16 products run ember's AVX512-BF16 kernel (the CPU has it and
    ``EMBER_BF16_GEMM=0`` is not set) instead of float32 BLAS on widened operands.

    >>> from ember._kernels.cpu import gemm
    >>> gemm.bf16_kernel() in (True, False)
    True
    """
    return _bf16_on


def _set_bf16_kernel(bint on):
    """Testing hook: bfloat16 products on ember's kernel (True, where the CPU has
    AVX512-BF16) or on the widen + sgemm path (False)."""
    global _bf16_on
    _bf16_on = on and em_bf16_gemm_supported() != 0


cdef bint _bf16_product(object a, object b, object out) except -1:
    """out = a @ b for bfloat16 NumPy arrays on the kernel, or False for operands it
    does not take (then the widen + sgemm path runs)."""
    cdef cnp.ndarray na, nb_, nc, wide
    if type(a) is not np.ndarray or type(b) is not np.ndarray or type(out) is not np.ndarray:
        return False
    na, nb_, nc = a, b, out
    if na.ndim < 2 or nb_.ndim < 2 or nc.ndim != max(na.ndim, nb_.ndim) \
            or not nc.flags.writeable or not _shapes_ok(na, nb_, nc):
        return False
    cdef Py_ssize_t N = nc.shape[nc.ndim - 1]
    cdef bint direct = (nc.strides[nc.ndim - 1] == 2 or N <= 1) \
        and na.shape[na.ndim - 1] <= EM_BG_KC and not _overlaps(na, nb_, nc)
    if direct:
        return _run_bf16(na, nb_, nc)
    # a float32 result first: K beyond one block accumulates in float32, or out's
    # layout / overlap needs a separate result; one rounding at the end either way
    wide = np.empty(out.shape, np.float32)
    if not _run_bf16(na, nb_, wide):
        return False
    if nc.flags.c_contiguous:
        _convert(wide, nc, False)
    else:
        assign(wrap_numpy(out), wrap_numpy(wide))
    return True


cdef inline bint _even(Py_ssize_t s) noexcept nogil:
    return s % 2 == 0


cdef bint _run_bf16(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c) except -1:
    """c = a @ b: a, b bfloat16, c bfloat16 (K <= EM_BG_KC) or float32 with unit
    column stride; any strides in a and b.  False for odd byte strides."""
    cdef int nda = a.ndim, ndb = b.ndim, ndc = c.ndim
    cdef int nb = ndc - 2, d
    cdef Py_ssize_t item = c.itemsize
    cdef bint c16 = item == 2
    cdef Py_ssize_t M = c.shape[ndc - 2], N = c.shape[ndc - 1], K = a.shape[nda - 1]
    cdef Py_ssize_t bshape[MAX_BATCH_DIMS]
    cdef Py_ssize_t sa[MAX_BATCH_DIMS]
    cdef Py_ssize_t sb[MAX_BATCH_DIMS]
    cdef Py_ssize_t sc[MAX_BATCH_DIMS]
    cdef Py_ssize_t batch = 1, nsplit = 1, total, t, units, extent
    cdef Py_ssize_t sam, sak, sbk, sbn, ldc
    cdef bint split_rows
    cdef int nt, failed = 0
    if nb > MAX_BATCH_DIMS:
        return False
    if M == 0 or N == 0:
        return True
    if K == 0:
        (<object>c)[...] = 0
        return True
    if (<intptr_t>cnp.PyArray_DATA(a)) % 2 or (<intptr_t>cnp.PyArray_DATA(b)) % 2 \
            or (<intptr_t>cnp.PyArray_DATA(c)) % item:
        return False
    for d in range(nda):
        if not _even(a.strides[d]):
            return False
    for d in range(ndb):
        if not _even(b.strides[d]):
            return False
    if N > 1 and c.strides[ndc - 1] != item or c.strides[ndc - 2] % item:
        return False
    if c16 and K > EM_BG_KC:
        return False
    sam, sak = a.strides[nda - 2] // 2, a.strides[nda - 1] // 2
    sbk, sbn = b.strides[ndb - 2] // 2, b.strides[ndb - 1] // 2
    ldc = c.strides[ndc - 2] // item
    batch = _batch_strides(a, b, c, nb, bshape, sa, sb, sc)
    if batch == 0:
        return True
    nt = num_threads()
    if <int64_t>batch * M * N * K < PAR_MIN_MACS or nt <= 1:
        nt = 1
    # split the longer side: each block packs the other operand whole (cheaper to repeat)
    split_rows = M > N
    extent = M if split_rows else N
    units = (extent + (EM_BG_MR if split_rows else EM_BG_NR) - 1) // \
        (EM_BG_MR if split_rows else EM_BG_NR)
    if batch < nt and nt > 1:
        nsplit = min((nt + batch - 1) // batch, units)
    total = batch * nsplit
    cdef const char* pa = <const char*>cnp.PyArray_DATA(a)
    cdef const char* pb = <const char*>cnp.PyArray_DATA(b)
    cdef char* pc = <char*>cnp.PyArray_DATA(c)
    with nogil:
        if nt > 1 and total > 1:
            for t in prange(total, schedule="static", num_threads=nt):
                failed += _bf16_block(t, nsplit, split_rows, units, nb, bshape, sa, sb, sc,
                                      pa, sam, sak, pb, sbk, sbn, pc, ldc, c16, M, N, K)
        else:
            for t in range(total):
                failed += _bf16_block(t, nsplit, split_rows, units, nb, bshape, sa, sb, sc,
                                      pa, sam, sak, pb, sbk, sbn, pc, ldc, c16, M, N, K)
    if failed:
        raise MemoryError(f"matmul: no memory for the bfloat16 GEMM's packing buffers "
                          f"({M}x{K} @ {K}x{N})")
    return True


cdef int _bf16_block(Py_ssize_t t, Py_ssize_t nsplit, bint split_rows, Py_ssize_t units,
                     int nb, const Py_ssize_t* bshape, const Py_ssize_t* sa,
                     const Py_ssize_t* sb, const Py_ssize_t* sc, const char* pa,
                     Py_ssize_t sam, Py_ssize_t sak, const char* pb, Py_ssize_t sbk,
                     Py_ssize_t sbn, char* pc, Py_ssize_t ldc, bint c16, Py_ssize_t M,
                     Py_ssize_t N, Py_ssize_t K) noexcept nogil:
    """Block t: batch entry t // nsplit, part t % nsplit of its row (or column) panels;
    1 when the kernel had no memory."""
    cdef Py_ssize_t bi = t // nsplit, part = t - bi * nsplit
    cdef Py_ssize_t oa, ob, oc, lo, hi, item = 2 if c16 else 4
    _batch_offsets(bi, nb, bshape, sa, sb, sc, &oa, &ob, &oc)
    lo = units * part // nsplit
    hi = units * (part + 1) // nsplit
    if hi <= lo:
        return 0
    cdef const unsigned short* A = <const unsigned short*>(pa + oa)
    cdef const unsigned short* B = <const unsigned short*>(pb + ob)
    cdef char* C = pc + oc
    if split_rows:
        lo *= EM_BG_MR
        hi = min(hi * EM_BG_MR, M)
        return em_bf16_gemm(hi - lo, N, K, A + lo * sam, sam, sak, B, sbk, sbn,
                            C + lo * ldc * item, ldc, c16) != 0
    lo *= EM_BG_NR
    hi = min(hi * EM_BG_NR, N)
    return em_bf16_gemm(M, hi - lo, K, A, sam, sak, B + lo * sbn, sbk, sbn, C + lo * item,
                        ldc, c16) != 0
