"""Elementwise dispatch: from operands to a typed inner loop.

binary()/unary() pick the loop dtype by the promotion table (NumPy 2 rules,
Python scalars weak), cast operands that differ, broadcast, allocate the
result from the caching allocator, merge contiguous axes so strided inputs
still get long inner loops, and run the generated inner loop, split across
OpenMP threads above a size threshold with the GIL released.

An (op, dtype) pair with no generated loop runs NumPy's ufunc on zero-copy
views of the same memory, so the result still lands in ember's storage.
"""
cimport cython
from cython.parallel cimport prange
from libc.string cimport memcpy, memcmp
from libc.stdint cimport uint8_t, uint16_t, int64_t, uint64_t

from ember._core.array cimport (ndarray, MAXDIM, new_empty, new_view, as_ndarray, numpy_view,
                                set_elementwise_hooks, shape_tuple, grad_enabled)
from ember._core.dtypes cimport (DTYPE_OBJS, ITEMSIZE, KIND, NTYPES, PROMOTE, T_BOOL,
                                 T_INT64, T_FLOAT16, T_BFLOAT16, T_FLOAT32, T_FLOAT64, T_COMPLEX64,
                                 T_COMPLEX128, default_float, weak_result, scalar_default_code)
from ember._core.opcodes cimport *

import functools as _functools
import numpy as _np
from ember._kernels.cpu import optable as _optable
cdef extern from *:
    """
    /* AVX2 + FMA + F16C usable (CPU and OS): the _v3 loop modules may run.  F16C is
       read from CPUID (leaf 1, ECX bit 29): not every compiler's
       __builtin_cpu_supports knows its name. */
    #if defined(__x86_64__) && defined(__GNUC__)
    #include <cpuid.h>
    #endif
    static int ember_cpu_has_avx2_fma(void) {
    #if defined(__x86_64__) && defined(__GNUC__)
        unsigned int a, b, c, d;
        __builtin_cpu_init();
        if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29)))
            return 0;
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    #else
        return 0;
    #endif
    }
    """
    int ember_cpu_has_avx2_fma() noexcept nogil


def _loop_modules():
    """The generated loop modules for this CPU: the AVX2 build where the CPU has AVX2,
    FMA and F16C (and EMBER_NO_AVX2 is not set), else the baseline (SSE2) build."""
    import importlib
    import os
    names = ["_loops_ops0", "_loops_ops1", "_loops_ops2", "_loops_ops3", "_loops_casts"]
    if ember_cpu_has_avx2_fma() and os.environ.get("EMBER_NO_AVX2", "") in ("", "0"):
        try:
            return [importlib.import_module("ember._kernels.cpu." + n + "_v3") for n in names], \
                "avx2"
        except ImportError:         # built without the AVX2 variant (other compilers)
            pass
    return [importlib.import_module("ember._kernels.cpu." + n) for n in names], "baseline"


_mods, LOOP_ISA = _loop_modules()
_LOOP_MODULES = tuple(_mods[:4])
_loops_casts = _mods[4]
from ember._core import array as _array_mod
from ember._core.dtypes import _code as _code_of_np
from ember._core.dtypes import dtype_kind

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int ember_omp_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int ember_omp_max_threads(void) { return 1; }
    #endif
    """
    int ember_omp_max_threads() noexcept nogil

# ---------------------------------------------------------------- tables

cdef loop_fn LOOPS[NOPS][NTYPES]
cdef loop_fn CASTS[NTYPES][NTYPES]
cdef char OPCLASS[NOPS]
cdef list OPNAMES = [row.name for row in _optable.OPS]
cdef list NPUFUNCS = [getattr(_np, n) for n in OPNAMES]

cdef int _i, _j


cdef inline bint _on_dev(object a) noexcept:
    """a is an ember array in GPU memory (host loops must not touch it)."""
    return a is not None and isinstance(a, ndarray) and (<ndarray>a).storage.device_index >= 0


# The GPU backend, set by ember.cuda when it starts (ember/_wiring.py): ember imports no
# CuPy until a GPU is used, and the backend sits below this layer's users.  None: no
# array lives on a GPU, and the host loops run unconditionally.
#  _gpu_elementwise: the backend's storage-level copies, cast(x, tcode) and assign(dst,
#    src) (ember.cuda._elementwise; copies, not ops);
#  _gpu_resolve(name): the GPU implementation of elementwise op `name` in the one GPU
#    dispatch's registry (ember.cuda._dispatch.elementwise_impl), asked once per op code
#    and kept in _gpu_impls until the registry changes (_forget_gpu_routes).  The
#    backend registers ``functools.partial(kernel, op)``: that is kept as ``kernel``,
#    called with the op code first (_GPU_TAKES_OP), without partial's own call layer
#    (about 340 instructions a call); any other implementation is called as registered.
cdef object _gpu_elementwise = None
cdef object _gpu_resolve = None
cdef list _gpu_impls = [None] * NOPS
cdef bint _GPU_TAKES_OP[NOPS]


def _set_gpu_elementwise(mod, resolve):
    global _gpu_elementwise, _gpu_resolve
    _gpu_resolve = resolve
    _forget_gpu_routes()
    _gpu_elementwise = mod


def _forget_gpu_routes():
    """Drop the GPU implementations kept per op code (the registry changed)."""
    cdef Py_ssize_t i
    for i in range(NOPS):
        _gpu_impls[i] = None


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline object _gpu_impl(int op):
    """The GPU implementation of op `op`, from the dispatcher the first time."""
    cdef object f = _gpu_impls[op]
    if f is None:
        f = _gpu_resolve(OPNAMES[op])
        _GPU_TAKES_OP[op] = type(f) is _functools.partial and f.args == (op,) \
            and not f.keywords
        if _GPU_TAKES_OP[op]:
            f = f.func
        _gpu_impls[op] = f
    return f


for _i in range(NOPS):
    for _j in range(NTYPES):
        LOOPS[_i][_j] = NULL
for _m in _LOOP_MODULES:
    for _name, _code, _addr in _m.loop_addresses():
        LOOPS[OPNAMES.index(_name)][_code] = <loop_fn><size_t>_addr
for _s, _d, _addr in _loops_casts.cast_addresses():
    CASTS[_s][_d] = <loop_fn><size_t>_addr

if len(OPNAMES) != NOPS or OPNAMES.index("signbit") != OP_SIGNBIT or OPNAMES.index("add") != OP_ADD:
    raise ImportError("ember: the generated opcodes.pxd is out of date with optable.OPS "
                      "(rebuild ember)")

# How an op picks its loop dtype from the promoted input dtype: the row's class
# (optable.Op.cls): 'a' arithmetic: the promoted dtype;  'f' float-valued: integers
# go to the default float dtype;  'c' comparison/logical: promoted, output bool;
# 'i' integer/bool only.
for _i, _row in enumerate(_optable.OPS):
    OPCLASS[_i] = ord(_row.cls)

# Ops that have no bool loop but that NumPy computes for bool inputs in a wider
# integer type (e.g. bool ** bool -> int8): read NumPy's choice once, here.
cdef int BOOL_AS[NOPS]
for _i, _name in enumerate(OPNAMES):
    BOOL_AS[_i] = T_BOOL
    if LOOPS[_i][T_BOOL] == NULL and (OPCLASS[_i] == b'a' or OPCLASS[_i] == b'i'):
        try:
            with _np.errstate(all="ignore"):
                _res = NPUFUNCS[_i](*([_np.array([True, True])] * NPUFUNCS[_i].nin))
            if dtype_kind(_res.dtype) in "iu":
                BOOL_AS[_i] = _code_of_np(_res.dtype)
        except TypeError:
            pass


cdef loop_fn get_loop(int op, int tcode) noexcept:
    return LOOPS[op][tcode]

cdef loop_fn get_cast(int src, int dst) noexcept:
    return CASTS[src][dst]

# ---------------------------------------------------------------- threads

cdef int _nthreads = ember_omp_max_threads()
# Below this many elements one thread is faster than waking the others.
PAR_MIN = 65536
# Above this many elements the GIL is released while the loop runs.
cdef Py_ssize_t NOGIL_MIN = 8192

cdef int num_threads() noexcept nogil:
    return _nthreads

def set_num_threads(int n):
    """Set how many threads ember's CPU kernels use (at least 1).

    >>> import ember
    >>> ember.set_num_threads(1); ember.get_num_threads()
    1
    """
    global _nthreads
    if n < 1:
        raise ValueError(f"set_num_threads: need a positive number of threads, got {n}")
    _nthreads = n

def get_num_threads():
    """How many threads ember's CPU kernels use."""
    return _nthreads

def _omp_max_threads():
    """OpenMP's own thread count (1 in a build without OpenMP), for ember.show_config."""
    return ember_omp_max_threads()

def _set_parallel_threshold(Py_ssize_t n):
    global PAR_MIN
    PAR_MIN = n

# ---------------------------------------------------------------- iteration

cdef int setup_operand(NdIter* it, int k, ndarray x, int ndim) except -1:
    """Operand k's strides broadcast against the iteration shape it.shape[:ndim]."""
    cdef int i, j
    cdef int off = ndim - x.ndim
    if x.storage.device_index >= 0:
        # a host loop must never read device memory (it would crash the process)
        raise RuntimeError(f"ember: a {x.device} array reached a CPU kernel; mixing devices "
                           f"in one operation is not supported, move arrays with .to()")
    it.ptrs[k] = x.data
    for i in range(ndim):
        j = i - off
        if j < 0 or x.shape[j] == 1:
            it.strides[k][i] = 0
        else:
            it.strides[k][i] = x.strides[j]
    return 0


cdef void simplify(NdIter* it) noexcept nogil:
    """Drop length-1 axes and merge axes that are contiguous for every operand."""
    cdef int i, k, n = 0
    cdef bint ok
    # drop length-1 axes
    for i in range(it.ndim):
        if it.shape[i] != 1:
            it.shape[n] = it.shape[i]
            for k in range(it.nargs):
                it.strides[k][n] = it.strides[k][i]
            n += 1
    if n == 0:
        it.shape[0] = 1
        for k in range(it.nargs):
            it.strides[k][0] = 0
        n = 1
    it.ndim = n
    # merge axis i into i+1 where stride[i] == stride[i+1] * shape[i+1] for all
    n = 0
    for i in range(1, it.ndim):
        ok = True
        for k in range(it.nargs):
            if it.strides[k][n] != it.strides[k][i] * it.shape[i]:
                ok = False
                break
        if ok:
            it.shape[n] *= it.shape[i]
            for k in range(it.nargs):
                it.strides[k][n] = it.strides[k][i]
        else:
            n += 1
            it.shape[n] = it.shape[i]
            for k in range(it.nargs):
                it.strides[k][n] = it.strides[k][i]
    it.ndim = n + 1


cdef void run_range(NdIter* it, loop_fn f, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    """Run outer iterations [start, stop) of an N-d iteration (inner = last axis)."""
    cdef Py_ssize_t idx[MAXDIM]
    cdef char* p[3]
    cdef Py_ssize_t steps[3]
    cdef int nd = it.ndim, k, d
    cdef Py_ssize_t r = start, inner = it.shape[nd - 1], count
    for k in range(it.nargs):
        p[k] = it.ptrs[k]
        steps[k] = it.strides[k][nd - 1]
    for d in range(nd - 2, -1, -1):
        idx[d] = r % it.shape[d]
        r = r // it.shape[d]
        for k in range(it.nargs):
            p[k] += idx[d] * it.strides[k][d]
    count = start
    while count < stop:
        f(p, steps, inner)
        count += 1
        d = nd - 2
        while d >= 0:
            idx[d] += 1
            for k in range(it.nargs):
                p[k] += it.strides[k][d]
            if idx[d] < it.shape[d]:
                break
            for k in range(it.nargs):
                p[k] -= it.strides[k][d] * it.shape[d]
            idx[d] = 0
            d -= 1


cdef void _run_chunk_1d(NdIter* it, loop_fn f, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    cdef char* p[3]
    cdef Py_ssize_t steps[3]
    cdef int k
    for k in range(it.nargs):
        p[k] = it.ptrs[k] + start * it.strides[k][0]
        steps[k] = it.strides[k][0]
    f(p, steps, stop - start)


cdef Py_ssize_t split_work(Py_ssize_t n, int nt, Py_ssize_t align, Py_ssize_t min_chunk,
                           Py_ssize_t* chunk) noexcept nogil:
    """Cut n items into about 4 chunks per thread (at least min_chunk items each,
    multiples of align): with dynamic scheduling a thread slowed by another job
    on the machine then takes fewer chunks instead of holding up the rest."""
    cdef Py_ssize_t target = 4 * nt, c
    c = (n + target - 1) // target
    if c < min_chunk:
        c = min_chunk
    c = ((c + align - 1) // align) * align
    if c < 1:
        c = 1
    chunk[0] = c
    return (n + c - 1) // c


cdef void run(NdIter* it, loop_fn f) noexcept nogil:
    """Run a simplified iteration, on several threads when it is large."""
    cdef Py_ssize_t outer = 1, inner, total, chunk, c, nchunks, lo, hi
    cdef int d, nt = _nthreads
    for d in range(it.ndim - 1):
        outer *= it.shape[d]
    inner = it.shape[it.ndim - 1]
    total = outer * inner
    if total == 0:
        return
    if it.ndim == 1:
        if nt > 1 and total >= PAR_MIN:
            nchunks = split_work(total, nt, 64, PAR_MIN // 4, &chunk)
            for c in prange(nchunks, schedule="dynamic", num_threads=nt):
                lo = c * chunk
                hi = lo + chunk
                if hi > total:
                    hi = total
                _run_chunk_1d(it, f, lo, hi)
        else:
            _run_chunk_1d(it, f, 0, total)
        return
    if nt > 1 and total >= PAR_MIN and outer >= nt:
        nchunks = split_work(outer, nt, 1, 1, &chunk)
        for c in prange(nchunks, schedule="dynamic", num_threads=nt):
            lo = c * chunk
            hi = lo + chunk
            if hi > outer:
                hi = outer
            if lo < hi:
                run_range(it, f, lo, hi)
    else:
        run_range(it, f, 0, outer)


cdef inline void run_maybe_nogil(NdIter* it, loop_fn f, Py_ssize_t size):
    if size >= NOGIL_MIN:
        with nogil:
            run(it, f)
    else:
        run(it, f)

# ---------------------------------------------------------------- shapes

cdef str _shape_str(ndarray x):
    return str(shape_tuple(x)).replace(" ", "")


cdef int broadcast_shapes2(ndarray a, ndarray b, int* ndim, Py_ssize_t* shape, str opname) except -1:
    cdef int n = a.ndim if a.ndim > b.ndim else b.ndim
    cdef int i, ia, ib
    cdef Py_ssize_t sa, sb
    for i in range(n):
        ia = i - (n - a.ndim)
        ib = i - (n - b.ndim)
        sa = a.shape[ia] if ia >= 0 else 1
        sb = b.shape[ib] if ib >= 0 else 1
        if sa == sb or sb == 1:
            shape[i] = sa
        elif sa == 1:
            shape[i] = sb
        else:
            raise ValueError(f"{opname}: operands could not be broadcast together with shapes "
                             f"{_shape_str(a)} {_shape_str(b)}")
    ndim[0] = n
    return 0

# ---------------------------------------------------------------- scalars

cdef double complex _as_complex(object v):
    return complex(v)

cdef extern from "em_math.h" nogil:
    # float -> float16 / bfloat16, round to nearest even (the loops' own conversions)
    uint16_t em_f2h(float)
    uint16_t em_f2b(float)


cdef int write_scalar(char* buf, int code, object v) except -1:
    """Store Python scalar v into buf as dtype `code` (range already checked)."""
    cdef char k = KIND[code]
    cdef int64_t iv
    cdef uint64_t uv
    cdef double dv
    cdef double complex cv
    cdef float complex fcv
    cdef uint16_t h
    if code == T_BOOL:
        (<uint8_t*>buf)[0] = 1 if v else 0
    elif k == b'i':
        if isinstance(v, float):
            iv = <int64_t>(<double>v)
        else:
            iv = v
        if code == 1: (<signed char*>buf)[0] = <signed char>iv
        elif code == 2: (<short*>buf)[0] = <short>iv
        elif code == 3: (<int*>buf)[0] = <int>iv
        else: (<int64_t*>buf)[0] = iv
    elif k == b'u':
        uv = <uint64_t>(v if v >= 0 else v + (1 << 64))
        if code == 5: (<uint8_t*>buf)[0] = <uint8_t>uv
        elif code == 6: (<uint16_t*>buf)[0] = <uint16_t>uv
        elif code == 7: (<unsigned int*>buf)[0] = <unsigned int>uv
        else: (<uint64_t*>buf)[0] = uv
    elif k == b'f':
        if isinstance(v, complex):
            v = v.real
        dv = float(v)
        if code == T_FLOAT16 or code == T_BFLOAT16:
            h = em_f2h(<float>dv) if code == T_FLOAT16 else em_f2b(<float>dv)
            memcpy(buf, &h, 2)
        elif code == T_FLOAT32:
            (<float*>buf)[0] = <float>dv
        else:
            (<double*>buf)[0] = dv
    else:
        cv = _as_complex(v)
        if code == T_COMPLEX64:
            fcv = <float complex>cv
            memcpy(buf, &fcv, 8)
        else:
            memcpy(buf, &cv, 16)
    return 0


cdef object _int_element(int code, object v):
    """A Python int or float stored into an integer array, as NumPy converts it:
    ``int(v)`` (ValueError for NaN, OverflowError for infinities), then
    OverflowError when it does not fit the dtype -- never a silently wrapped value."""
    cdef char k = KIND[code]
    if isinstance(v, float):
        v = int(v)
    else:
        v = int(v)                   # NumPy integer scalars: exact
    if k == b'u' and ITEMSIZE[code] >= 4:       # NumPy converts these through unsigned long
        if v > 18446744073709551615:
            raise OverflowError("Python int too large to convert to C long")
    elif not -9223372036854775808 <= v <= 9223372036854775807:
        raise OverflowError("Python int too large to convert to C long")
    info = _np.iinfo(DTYPE_OBJS[code])
    if not info.min <= v <= info.max:
        raise OverflowError(f"Python integer {v} out of bounds for {DTYPE_OBJS[code]}")
    return v


cdef inline bint _int_like(ndarray x):
    """True for a missing operand or an integer/bool array."""
    return x is None or KIND[x.tcode] == b'b' or KIND[x.tcode] == b'i' or KIND[x.tcode] == b'u'


cdef object _SIZE = _array_mod._Size      # x.size: an int, weak like one


cdef inline bint _is_scalar(object o):
    """A Python scalar (weak in promotion); NumPy scalars are arrays here, as in NumPy 2."""
    cdef type t = type(o)
    return t is float or t is int or t is bool or t is complex or t is _SIZE

# ---------------------------------------------------------------- casting / copying

cdef ndarray cast(ndarray x, int tcode):
    """A C-contiguous copy of x in dtype tcode."""
    if _gpu_elementwise is not None and x.storage.device_index >= 0:
        return _gpu_elementwise.cast(x, tcode)
    cdef ndarray out = new_empty(tcode, x.ndim, x.shape)
    assign(out, x)
    return out


cdef bint _overlaps(ndarray a, ndarray b):
    """True if writing a could change what b reads (same storage, not the same view)."""
    if a.storage is not b.storage:
        return False
    if a.data == b.data and a.ndim == b.ndim and \
            memcmp(a.strides, b.strides, a.ndim * sizeof(Py_ssize_t)) == 0:
        return False
    return True


cdef int assign(ndarray dst, object src) except -1:
    """dst[...] = src: broadcast src to dst's shape, cast to dst's dtype."""
    cdef NdIter it
    cdef ndarray s
    cdef char sbuf[16]
    cdef int i
    cdef loop_fn f
    if dst.readonly:
        raise ValueError("assignment destination is read-only")
    if _gpu_elementwise is not None and (dst.storage.device_index >= 0 or _on_dev(src)):
        _gpu_elementwise.assign(dst, src)
        return 0
    if (KIND[dst.tcode] == b'i' or KIND[dst.tcode] == b'u') and isinstance(src, (int, float)) \
            and not isinstance(src, bool):
        src = _int_element(dst.tcode, src)
    if _is_scalar(src):
        write_scalar(sbuf, dst.tcode, src)
        it.nargs = 2
        it.ndim = dst.ndim
        for i in range(dst.ndim):
            it.shape[i] = dst.shape[i]
            it.strides[0][i] = 0
        it.ptrs[0] = sbuf
        setup_operand(&it, 1, dst, dst.ndim)
        simplify(&it)
        run_maybe_nogil(&it, CASTS[dst.tcode][dst.tcode], dst.size)
        return 0
    s = as_ndarray(src)
    if s.ndim > dst.ndim:
        # NumPy allows leading length-1 axes on the source
        for i in range(s.ndim - dst.ndim):
            if s.shape[i] != 1:
                raise ValueError(f"could not broadcast input array from shape "
                                 f"{_shape_str(s)} into shape {_shape_str(dst)}")
        i = s.ndim - dst.ndim
        s = new_view(s, dst.ndim, &s.shape[i], &s.strides[i], s.offset, s.tcode)
    for i in range(s.ndim):
        if s.shape[s.ndim - 1 - i] != 1 and s.shape[s.ndim - 1 - i] != dst.shape[dst.ndim - 1 - i]:
            raise ValueError(f"could not broadcast input array from shape "
                             f"{_shape_str(s)} into shape {_shape_str(dst)}")
    if dst.size == 0:
        return 0
    if _overlaps(dst, s):
        s = cast(s, s.tcode)
    it.nargs = 2
    it.ndim = dst.ndim
    for i in range(dst.ndim):
        it.shape[i] = dst.shape[i]
    setup_operand(&it, 0, s, dst.ndim)
    setup_operand(&it, 1, dst, dst.ndim)
    simplify(&it)
    run_maybe_nogil(&it, CASTS[s.tcode][dst.tcode], dst.size)
    return 0


def _assign(ndarray dst not None, src):
    assign(dst, src)

# ---------------------------------------------------------------- dispatch

cdef int _loop_dtype(int op, int promoted, str name) except -1:
    cdef char cls = OPCLASS[op]
    cdef char k = KIND[promoted]
    if cls == b'f' and (k == b'b' or k == b'i' or k == b'u'):
        return default_float
    if k == b'b' and BOOL_AS[op] != T_BOOL:
        return BOOL_AS[op]
    if cls == b'i' and (k == b'f' or k == b'c'):
        raise TypeError(f"{name}: not supported for floating point or complex input "
                        f"(dtype {DTYPE_OBJS[promoted]}); it needs integer or boolean arrays")
    return promoted


cdef int _out_dtype(int op, int loop_t) noexcept:
    if OPCLASS[op] == b'c':
        return T_BOOL
    if op == OP_ABSOLUTE and KIND[loop_t] == b'c':
        return T_FLOAT32 if loop_t == T_COMPLEX64 else T_FLOAT64
    return loop_t


cdef int _check_out(ndarray out, int tout, int ndim, Py_ssize_t* shape, str name) except -1:
    cdef int i
    if out.ndim != ndim or memcmp(out.shape, shape, ndim * sizeof(Py_ssize_t)) != 0:
        raise ValueError(f"{name}: output array has shape {_shape_str(out)}, but the result "
                         f"has shape {tuple([shape[i] for i in range(ndim)])}")
    if out.readonly:
        raise ValueError(f"{name}: output array is read-only")
    if out.tcode != tout and not _np.can_cast(DTYPE_OBJS[tout], DTYPE_OBJS[out.tcode], "same_kind"):
        raise TypeError(f"{name}: cannot cast the result from {DTYPE_OBJS[tout]} to the output's "
                        f"dtype {DTYPE_OBJS[out.tcode]} with casting rule 'same_kind'")
    return 0


cdef object _fallback(int op, list inputs, int tloop, int tout, object out, str name):
    """Run NumPy's ufunc on views of ember memory (for pairs with no generated loop)."""
    cdef list np_in = []
    for x in inputs:
        if isinstance(x, ndarray):
            np_in.append(numpy_view(<ndarray>x))
        else:
            np_in.append(x)
    uf = NPUFUNCS[op]
    try:
        if out is None:
            res = uf(*np_in, dtype=DTYPE_OBJS[tloop] if OPCLASS[op] != b'c' and tloop == tout else None)
            if not isinstance(res, _np.ndarray):
                res = _np.asarray(res)
            if res.dtype != DTYPE_OBJS[tout]:
                res = res.astype(DTYPE_OBJS[tout])
            return as_ndarray(res)
        uf(*np_in, out=numpy_view(<ndarray>out), casting="same_kind")
        (<ndarray>out).storage.version += 1
        return out
    except TypeError as e:
        dts = ", ".join(str(DTYPE_OBJS[(<ndarray>x).tcode]) if isinstance(x, ndarray)
                        else type(x).__name__ for x in inputs)
        raise TypeError(f"{name}: not supported for input dtype(s) {dts}") from None
    except ValueError as e:
        msg = str(e)
        if "broadcast" in msg:
            shapes = " ".join(str(shape_tuple(<ndarray>x)).replace(" ", "") if isinstance(x, ndarray)
                              else "()" for x in inputs)
            raise ValueError(f"{name}: operands could not be broadcast together with shapes {shapes}") from None
        raise ValueError(f"{name}: {msg}") from None


cdef int _resolve_binary(int op, ndarray x, ndarray y, object scalar, int* tloop_out,
                         int* tout_out) except -1:
    """The loop and result dtypes of a binary op (NumPy 2 promotion, Python scalars
    weak).  Returns 1 when a Python int does not fit a comparison's array dtype
    (NumPy then compares exactly), 0 otherwise; x or y is None for a scalar operand."""
    cdef int tp, tloop
    if x is not None and y is not None:
        tp = x.tcode if x.tcode == y.tcode else PROMOTE[x.tcode][y.tcode]
    else:
        try:
            tp = weak_result((x if x is not None else y).tcode, scalar)
        except OverflowError:
            if OPCLASS[op] == b'c':
                return 1
            if OPCLASS[op] != b'f':
                raise
            tp = default_float      # float-valued op of integers: the int only has to fit a float
    if OPCLASS[op] == b'c' and scalar is not None and isinstance(scalar, float) and \
            (KIND[tp] == b'f') and KIND[(x if x is not None else y).tcode] != b'f':
        tp = T_FLOAT64              # int array vs Python float: compare exactly, as NumPy does
    tloop = _loop_dtype(op, tp, OPNAMES[op])
    if OPCLASS[op] == b'f' and KIND[tloop] == b'f' and _int_like(x) and _int_like(y) \
            and (scalar is None or type(scalar) is int or type(scalar) is bool
                 or type(scalar) is _SIZE):
        tloop = default_float       # e.g. uint64 / int64 promote to float64; integers -> default float
    tloop_out[0] = tloop
    tout_out[0] = _out_dtype(op, tloop)
    return 0


cdef int _checked_op(int op) except -1:
    """An op code from Python, checked (the loop tables are C arrays)."""
    if op < 0 or op >= NOPS:
        raise ValueError(f"invalid ember op code {op} (expected 0..{NOPS - 1})")
    return op


def binary_types(int op, a, b):
    """(loop dtype, result dtype) codes of binary op `op` on a and b (arrays or Python
    scalars), as the CPU dispatcher computes them; None when NumPy must decide."""
    cdef int tloop, tout
    _checked_op(op)
    cdef ndarray x = a if isinstance(a, ndarray) else None
    cdef ndarray y = b if isinstance(b, ndarray) else None
    scalar = None
    if x is None:
        scalar = a
    elif y is None:
        scalar = b
    if _resolve_binary(op, x, y, scalar, &tloop, &tout):
        return None
    return tloop, tout


def unary_types(int op, int tcode):
    """(loop dtype, result dtype) codes of unary op `op` on dtype code `tcode`."""
    _checked_op(op)
    if tcode < 0 or tcode >= NTYPES:
        raise ValueError(f"unary_types: invalid dtype code {tcode}")
    cdef int tloop = _loop_dtype(op, tcode, OPNAMES[op])
    return tloop, _out_dtype(op, tloop)


def op_class(int op):
    """'a' arithmetic, 'c' comparison, 'f' float-valued... (the optable's class)."""
    return chr(OPCLASS[_checked_op(op)])



cdef object binary(int op, object a, object b, object out):
    cdef ndarray x = None, y = None, o
    cdef int ta, tb, tp, tloop, tout, ndim, i
    cdef Py_ssize_t shape[MAXDIM]
    cdef char sbuf[16]
    cdef NdIter it
    cdef loop_fn f
    cdef bint a_arr = isinstance(a, ndarray)
    cdef bint b_arr = isinstance(b, ndarray)
    cdef object scalar = None
    cdef bint scalar_first = False

    if out is not None and isinstance(out, ndarray) and (<ndarray>out).readonly:
        raise ValueError(f"{OPNAMES[op]}: output array is read-only")
    if _gpu_elementwise is not None and (_on_dev(a) or _on_dev(b) or _on_dev(out)):
        impl = _gpu_impl(op)
        return impl(op, a, b, out) if _GPU_TAKES_OP[op] else impl(a, b, out)
    if not a_arr and not _is_scalar(a):
        a = as_ndarray(a)
        a_arr = True
    if not b_arr and not _is_scalar(b):
        b = as_ndarray(b)
        b_arr = True
    if not a_arr and not b_arr:
        a = as_ndarray(a)           # two scalars: the first becomes a 0-d array
        a_arr = True

    if a_arr and b_arr:
        x = <ndarray>a
        y = <ndarray>b
    elif a_arr:
        x = <ndarray>a
        scalar = b
    else:
        y = <ndarray>b
        scalar = a
        scalar_first = True
    if _resolve_binary(op, x, y, scalar, &tloop, &tout):
        # the scalar does not fit the array's dtype: NumPy decides
        return _fallback(op, [x, b] if y is None else [a, y], (x if x is not None else y).tcode,
                         T_BOOL, out, OPNAMES[op])
    f = LOOPS[op][tloop]

    # operands in the loop dtype
    if x is not None and x.tcode != tloop:
        x = cast(x, tloop)
    if y is not None and y.tcode != tloop:
        y = cast(y, tloop)

    if f == NULL:
        if scalar is None:
            return _fallback(op, [x, y], tloop, tout, out, OPNAMES[op])
        return _fallback(op, [scalar, y] if scalar_first else [x, scalar], tloop, tout, out, OPNAMES[op])

    # result shape
    if x is not None and y is not None:
        if x.ndim == y.ndim and memcmp(x.shape, y.shape, x.ndim * sizeof(Py_ssize_t)) == 0:
            ndim = x.ndim
            memcpy(shape, x.shape, ndim * sizeof(Py_ssize_t))
        else:
            broadcast_shapes2(x, y, &ndim, shape, OPNAMES[op])
    elif x is not None:
        ndim = x.ndim
        memcpy(shape, x.shape, ndim * sizeof(Py_ssize_t))
    else:
        ndim = y.ndim
        memcpy(shape, y.shape, ndim * sizeof(Py_ssize_t))

    if out is None:
        o = new_empty(tout, ndim, shape)
        # the same shape as an operand: share its cached shape tuple (no new tuple
        # per result when .shape / autograd's metadata reads it)
        if x is not None and x._shape_tuple is not None and x.ndim == ndim and \
                memcmp(x.shape, shape, ndim * sizeof(Py_ssize_t)) == 0:
            o._shape_tuple = x._shape_tuple
    else:
        o = <ndarray?>out
        _check_out(o, tout, ndim, shape, OPNAMES[op])
        if o.tcode != tout:
            # compute in the loop dtype, then cast into out
            res = binary(op, x if x is not None else scalar, y if y is not None else scalar, None)
            assign(o, res)
            o.storage.version += 1
            return o
        if x is not None and _overlaps(o, x):
            x = cast(x, x.tcode)
        if y is not None and _overlaps(o, y):
            y = cast(y, y.tcode)
        o.storage.version += 1
    if o.size == 0:
        return o

    it.nargs = 3
    it.ndim = ndim
    memcpy(it.shape, shape, ndim * sizeof(Py_ssize_t))
    if x is not None:
        setup_operand(&it, 0, x, ndim)
    else:
        write_scalar(sbuf, tloop, scalar)
        it.ptrs[0] = sbuf
        for i in range(ndim):
            it.strides[0][i] = 0
    if y is not None:
        setup_operand(&it, 1, y, ndim)
    else:
        write_scalar(sbuf, tloop, scalar)
        it.ptrs[1] = sbuf
        for i in range(ndim):
            it.strides[1][i] = 0
    setup_operand(&it, 2, o, ndim)
    simplify(&it)
    run_maybe_nogil(&it, f, o.size)
    return o


cdef object unary(int op, object a, object out):
    if out is not None and isinstance(out, ndarray) and (<ndarray>out).readonly:
        raise ValueError(f"{OPNAMES[op]}: output array is read-only")
    if _gpu_elementwise is not None and (_on_dev(a) or _on_dev(out)):
        impl = _gpu_impl(op)
        return impl(op, a, out) if _GPU_TAKES_OP[op] else impl(a, out)
    cdef ndarray x = as_ndarray(a), o
    cdef int tloop = _loop_dtype(op, x.tcode, OPNAMES[op])
    cdef int tout = _out_dtype(op, tloop)
    cdef loop_fn f = LOOPS[op][tloop]
    cdef NdIter it
    if x.tcode != tloop:
        x = cast(x, tloop)
    if f == NULL:
        return _fallback(op, [x], tloop, tout, out, OPNAMES[op])
    if out is None:
        o = new_empty(tout, x.ndim, x.shape)
        o._shape_tuple = x._shape_tuple          # same shape: share the cached tuple
    else:
        o = <ndarray?>out
        _check_out(o, tout, x.ndim, x.shape, OPNAMES[op])
        if o.tcode != tout:
            assign(o, unary(op, x, None))
            o.storage.version += 1
            return o
        if _overlaps(o, x):
            x = cast(x, x.tcode)
        o.storage.version += 1
    if o.size == 0:
        return o
    it.nargs = 2
    it.ndim = x.ndim
    memcpy(it.shape, x.shape, x.ndim * sizeof(Py_ssize_t))
    setup_operand(&it, 0, x, x.ndim)
    setup_operand(&it, 1, o, x.ndim)
    simplify(&it)
    run_maybe_nogil(&it, f, o.size)
    return o


# autograd's recording entry points (ember.autograd.engine registers them when it is
# imported: the engine sits above this module and calls back into it).  The operators
# call them when grad mode is on and an operand requires grad (two flag tests on the
# hot path); NULL until then.
cdef ag_binary_t _autograd_binary = NULL
cdef ag_unary_t _autograd_unary = NULL


cdef void set_autograd_hooks(ag_binary_t b, ag_unary_t u) noexcept:
    global _autograd_binary, _autograd_unary
    _autograd_binary = b
    _autograd_unary = u


cdef inline bint _needs_grad(object a) noexcept:
    return isinstance(a, ndarray) and (<ndarray>a)._requires_grad


cdef object binary_ag(int op, object a, object b, object out):
    """binary() that records for autograd when it must (what the operators call)."""
    return _binary_hook(op, a, b, out)


cdef object unary_ag(int op, object a, object out):
    return _unary_hook(op, a, out)


cdef object _binary_hook(int op, object a, object b, object out):
    if (_needs_grad(a) or _needs_grad(b) or (out is not None and _needs_grad(out))) \
            and grad_enabled() and _autograd_binary != NULL:
        return _autograd_binary(op, a, b, out)
    return binary(op, a, b, out)

cdef object _unary_hook(int op, object a, object out):
    if (_needs_grad(a) or (out is not None and _needs_grad(out))) and grad_enabled() \
            and _autograd_unary != NULL:
        return _autograd_unary(op, a, out)
    return unary(op, a, out)

set_elementwise_hooks(_binary_hook, _unary_hook)


# ---------------------------------------------------------------- Python entry points

def _op_index(str name not None):
    return OPNAMES.index(name)


cdef class UfuncBase:
    """The C fast path of ember.ufunc calls: ``f(x)`` / ``f(x, y)`` with no keywords go
    straight to the dispatcher; anything else goes to the Python method ``_call``."""
    cdef int op_code
    cdef public int nin

    @property
    def _op(self):
        return self.op_code

    @_op.setter
    def _op(self, int op):
        self.op_code = _checked_op(op)

    def __call__(self, *args, **kwargs):
        if not kwargs:
            if self.nin == 2 and len(args) == 2:
                return _binary_hook(self.op_code, args[0], args[1], None)
            if self.nin == 1 and len(args) == 1:
                return _unary_hook(self.op_code, args[0], None)
        return self._call(*args, **kwargs)


def call_binary(int op, a, b, out=None):
    return _binary_hook(_checked_op(op), a, b, out)


def call_unary(int op, a, out=None):
    return _unary_hook(_checked_op(op), a, out)


def has_loop(str name not None, dtype):
    """True when (op, dtype) runs a generated Cython loop (not the NumPy fallback)."""
    from ember._core.dtypes import _code
    return LOOPS[OPNAMES.index(name)][_code(dtype)] != NULL


def op_names():
    """The elementwise ops' names, in op-code order (the rows of optable.OPS)."""
    return list(OPNAMES)


def op_table():
    """The rows of the op table (``optable.Op``: name, arity, cls, loops, gpu, grad), in
    op-code order: what the API, autograd, the GPU backend and the tests read."""
    return list(_optable.OPS)


def gpu_kernels(int arity):
    """{op name: GPU kernel name} of the ops of this arity with their own kernel in
    ember/cuda/kernels/elementwise.cu (the table's ``gpu`` column)."""
    return {row.name: row.gpu for row in _optable.OPS if row.arity == arity and row.gpu}
