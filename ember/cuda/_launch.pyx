# cython: language_level=3, boundscheck=False, wraparound=False
"""Kernel launch through the CUDA driver's cuLaunchKernel, without CuPy's argument
handling: the launch path PyTorch's speed rests on is a few C calls, and CuPy's
generic RawKernel.__call__ costs several microseconds of Python per launch.

The driver library is the one CuPy already loaded (dlopen of libcuda.so.1 finds
it); nothing here links against CUDA, so the extension builds without a toolkit.
"""
from libc.stdint cimport int64_t, int32_t, uint64_t
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_AS_STRING

from ember._core.array cimport ndarray

import numpy as _np

cdef extern from "dlfcn.h" nogil:
    void* dlopen(const char* filename, int flag)
    void* dlsym(void* handle, const char* symbol)
    char* dlerror()
    int RTLD_NOW
    int RTLD_GLOBAL

ctypedef int (*launch_fn)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, void* stream,
                          void** params, void** extra) noexcept nogil
ctypedef int (*error_fn)(int code, const char** msg) noexcept nogil
ctypedef int (*ctx_device_fn)(int* device) noexcept nogil

cdef launch_fn _launch = NULL
cdef error_fn _error_string = NULL
cdef ctx_device_fn _ctx_device = NULL       # cuCtxGetDevice: the current device

DEF MAXARGS = 40


def load_driver():
    """Find cuLaunchKernel in the CUDA driver (raises RuntimeError when absent)."""
    global _launch, _error_string, _ctx_device
    if _launch != NULL:
        return
    cdef void* h = dlopen(b"libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)
    if h == NULL:
        msg = dlerror()
        raise RuntimeError(f"ember.cuda: cannot load the CUDA driver libcuda.so.1 "
                           f"({msg.decode() if msg != NULL else 'unknown error'})")
    _launch = <launch_fn>dlsym(h, b"cuLaunchKernel")
    _error_string = <error_fn>dlsym(h, b"cuGetErrorString")
    _ctx_device = <ctx_device_fn>dlsym(h, b"cuCtxGetDevice")
    if _launch == NULL:
        raise RuntimeError("ember.cuda: the CUDA driver has no cuLaunchKernel")


cdef inline void _dims(object d, unsigned* out) except *:
    if isinstance(d, int):
        out[0] = <unsigned>d
        out[1] = 1
        out[2] = 1
    else:
        n = len(d)
        out[0] = <unsigned>d[0]
        out[1] = <unsigned>d[1] if n > 1 else 1
        out[2] = <unsigned>d[2] if n > 2 else 1


def launch(str name not None, size_t func, grid, block, unsigned shmem, size_t stream, tuple args not None,
           int device=-1):
    """Launch CUfunction `func` (kernel `name`, for messages) on `stream` of `device`
    (-1: not checked); an array argument of another device is refused, since the
    kernel would fault on its address.

    Each argument is passed by value in the kernel's parameter slot: an ember array
    as the address of its first element, int as 64-bit, float as double,
    numpy.int32 / numpy.float32 as 32-bit, None as a null pointer, bytes or a
    1-element NumPy structured array as a struct (its bytes)."""
    cdef int64_t slots[MAXARGS]
    cdef void* params[MAXARGS]
    cdef unsigned g[3]
    cdef unsigned b[3]
    cdef Py_ssize_t i, n = len(args)
    cdef double dv
    cdef float fv
    cdef int32_t iv
    cdef int rc
    cdef const char* msg = NULL
    if _launch == NULL:
        load_driver()
    if n > MAXARGS:
        raise ValueError(f"{name}: at most {MAXARGS} kernel arguments, got {n}")
    for i in range(n):
        a = args[i]
        t = type(a)
        params[i] = &slots[i]
        if isinstance(a, ndarray):
            if device >= 0 and (<ndarray>a).storage.device_index != device:
                raise RuntimeError(
                    f"ember.cuda: kernel {name} launched on cuda:{device} with argument {i} "
                    f"on {a.device} (an op ran outside its device guard; please report it)")
            slots[i] = <int64_t><size_t>(<ndarray>a).data
        elif t is int:
            if a >= 0:
                slots[i] = <int64_t><uint64_t>a
            else:
                slots[i] = <int64_t>a
        elif t is float:
            dv = a
            memcpy(&slots[i], &dv, 8)
        elif t is bool:
            slots[i] = 1 if a else 0
        elif a is None:
            slots[i] = 0
        elif t is bytes:
            params[i] = <void*>PyBytes_AS_STRING(a)
        elif t is _np.int32:
            iv = <int32_t>int(a)
            memcpy(&slots[i], &iv, 4)
        elif t is _np.float32:
            fv = <float>float(a)
            memcpy(&slots[i], &fv, 4)
        elif t is _np.float64:
            dv = float(a)
            memcpy(&slots[i], &dv, 8)
        elif t is _np.int64 or t is _np.uint64:
            slots[i] = <int64_t><uint64_t>int(a) if a >= 0 else <int64_t>int(a)
        elif t is _np.ndarray and a.size == 1 and a.dtype.fields is not None:
            params[i] = <void*><size_t>a.ctypes.data
        elif isinstance(a, int):       # int subclasses (an array's .size): 64-bit, as int
            slots[i] = <int64_t><uint64_t>int(a) if a >= 0 else <int64_t>int(a)
        else:
            raise TypeError(f"{name}: kernel argument {i} has unsupported type {t.__name__}")
    _dims(grid, g)
    _dims(block, b)
    with nogil:
        rc = _launch(<void*>func, g[0], g[1], g[2], b[0], b[1], b[2], shmem, <void*>stream,
                     params, NULL)
    if rc != 0:
        if _error_string != NULL:
            _error_string(rc, &msg)
        text = msg.decode() if msg != NULL else f"error {rc}"
        raise RuntimeError(f"ember.cuda: launching {name} (grid {grid}, block {block}, "
                           f"{shmem} bytes shared) failed: {text}")


# ---------------------------------------------------------------- the fast path
# The common case of an op on GPU arrays (same dtype, same shape, C-contiguous,
# no out=) skips the Python dispatcher: one dict lookup for the compiled kernel,
# one allocation from CuPy's pool, one cuLaunchKernel.  The general path fills
# the table the first time it launches a contiguous kernel, so only ops it has
# already validated (dtype rules included) ever take this path.
from libc.string cimport memcmp
from ember._core.array cimport new_device_array

cdef dict _contig = {}          # (op, tcode, device) -> CUfunction of the _contig kernel
cdef object _alloc = None       # cupy.cuda.alloc
cdef object _stream = None      # cupy.cuda.get_current_stream
cdef Py_ssize_t _max_blocks = 65535


def set_runtime(alloc, get_current_stream, Py_ssize_t max_blocks):
    global _alloc, _stream, _max_blocks
    _alloc = alloc
    _stream = get_current_stream
    _max_blocks = max_blocks


def register_contig(int op, int tcode, int device, size_t func):
    """Allow the fast path for (op, dtype, device) with this _contig kernel."""
    _contig[(op, tcode, device)] = func


cdef dict _casts = {}           # (source tcode, destination tcode, device) -> CUfunction


def register_cast(int src, int dst, int device, size_t func):
    """Allow the fast path for casts src -> dst on device with this ember_cast kernel."""
    _casts[(src, dst, device)] = func


cdef inline bint _is_current(int dev) noexcept:
    """Whether dev is the current device: the fast path launches and allocates there
    (cudaSetDevice makes the device's primary context current, which the driver reports
    here in a few nanoseconds; an array of another device takes the guarded path)."""
    cdef int cur = -1
    if _ctx_device == NULL or _ctx_device(&cur) != 0:
        return False
    return cur == dev


cdef inline unsigned _grid(Py_ssize_t n, Py_ssize_t itemsize) noexcept:
    # 16-byte vectors, 256 threads a block, at most _max_blocks (see runtime.vec_blocks)
    cdef Py_ssize_t g = ((n * itemsize + 15) // 16 + 255) // 256
    if g > _max_blocks:
        g = _max_blocks
    return <unsigned>(g if g > 0 else 1)


cdef unsigned long long _fast_launches = 0


def fast_launch_count():
    """How many kernels the fast path (binary_contig, unary_contig, cast_contig) has
    launched in this process: bench_gpu.py adds them to the general path's launches
    (counted at ember.cuda._runtime.launch) for its per-step launch count."""
    return _fast_launches


cdef object _run(size_t func, void** params, Py_ssize_t n, Py_ssize_t itemsize):
    global _fast_launches
    cdef size_t stream = _stream().ptr
    cdef int rc
    cdef unsigned g = _grid(n, itemsize)
    _fast_launches += 1
    with nogil:
        rc = _launch(<void*>func, g, 1, 1, 256, 1, 1, 0, <void*>stream, params, NULL)
    if rc != 0:
        raise RuntimeError(f"ember.cuda: kernel launch failed (CUDA driver error {rc})")


cdef ndarray _empty_like(ndarray a, int code, Py_ssize_t itemsize, int dev):
    """A new C-contiguous device array of a's shape in dtype `code`, from CuPy's pool."""
    cdef Py_ssize_t nbytes = a.size * itemsize
    mem = _alloc(nbytes)
    return new_device_array(code, a.ndim, a.shape, mem.ptr, nbytes, mem, dev)


cdef ndarray _map(size_t func, ndarray a, int code, Py_ssize_t itemsize, int dev):
    """y = f(a) elementwise by kernel `func(x, y, n)`, y of dtype `code`."""
    cdef int64_t n = a.size
    cdef void* params[3]
    cdef char* pa = a.data
    cdef ndarray y = _empty_like(a, code, itemsize, dev)
    cdef char* py = y.data
    params[0] = &pa
    params[1] = &py
    params[2] = &n
    _run(func, params, n, a.itemsize if a.itemsize > itemsize else itemsize)
    return y


def binary_contig(int op, ndarray a not None, ndarray b not None):
    """a <op> b by the fast path, or None when it does not apply."""
    cdef int64_t n
    cdef void* params[4]
    cdef char* pa
    cdef char* pb
    cdef char* py
    cdef ndarray y
    if a.tcode != b.tcode or not a.c_contig or not b.c_contig or a.ndim != b.ndim or \
            memcmp(a.shape, b.shape, a.ndim * sizeof(Py_ssize_t)) != 0 or a.size == 0:
        return None
    dev = a.storage.device_index
    if b.storage.device_index != dev or not _is_current(dev):
        return None
    func = _contig.get((op, a.tcode, dev))
    if func is None:
        return None
    n = a.size
    y = _empty_like(a, a.tcode, a.itemsize, dev)
    pa = a.data
    pb = b.data
    py = y.data
    params[0] = &pa
    params[1] = &pb
    params[2] = &py
    params[3] = &n
    _run(func, params, n, a.itemsize)
    return y


def unary_contig(int op, ndarray a not None):
    """<op>(a) by the fast path, or None when it does not apply."""
    if not a.c_contig or a.size == 0:
        return None
    dev = a.storage.device_index
    if not _is_current(dev):
        return None
    func = _contig.get((op, a.tcode, dev))
    if func is None:
        return None
    return _map(func, a, a.tcode, a.itemsize, dev)


def cast_contig(ndarray a not None, int dst, Py_ssize_t dst_itemsize):
    """a.astype(<dtype code dst>) by the fast path, or None when it does not apply."""
    if not a.c_contig or a.size == 0:
        return None
    dev = a.storage.device_index
    if not _is_current(dev):
        return None
    func = _casts.get((a.tcode, dst, dev))
    if func is None:
        return None
    return _map(func, a, dst, dst_itemsize, dev)
