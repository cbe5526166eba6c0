"""The GPU runtime: device memory for ember arrays, and the bridge to CuPy.

A GPU array is an ordinary ``ember.ndarray`` whose Storage wraps a block from
CuPy's memory pool (the caching allocator: a freed block goes back to the
pool, not to cudaFree).  Views share the Storage as on the host.  CuPy is
imported on first use, never by ``import ember``.

>>> import ember
>>> if ember.cuda.is_available():
...     x = ember.ones(3, device="cuda")
...     print(x.device, x.sum().item())
... else:
...     print("cuda:0 3.0")
cuda:0 3.0
"""
import functools
import math

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._core.dtypes import _code, dtype_from_code, BFLOAT16
from ember._core.util import c_strides
from ember.cuda import _checks, _kernels, _launch
from ember.cuda._sources import CASTS
from ember.cuda._cupy import cp


def is_gpu(x):
    return isinstance(x, ndarray) and x.is_cuda


def current_device():
    return cp().cuda.runtime.getDevice()


def device_index(d):
    """The CUDA index of a Device (its index, or the current device when it has none)."""
    return current_device() if d.index is None else d.index


def check_device(d, opname):
    """Device('cuda'[, i]) -> the canonical Device('cuda', i) after checking i exists."""
    idx = device_index(d)
    n = cp().cuda.runtime.getDeviceCount()
    if not 0 <= idx < n:
        raise RuntimeError(f"{opname}: CUDA device {idx} does not exist "
                           f"(this machine has {n} CUDA device(s))")
    return _array._cuda_device(idx)


class _on:
    """Make CUDA device `idx` current inside the block (no-op when it already is)."""
    __slots__ = ("idx", "prev")

    def __init__(self, idx):
        self.idx = idx
        self.prev = None

    def __enter__(self):
        prev = cp().cuda.runtime.getDevice()
        if prev != self.idx:
            self.prev = prev
            cp().cuda.runtime.setDevice(self.idx)
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            cp().cuda.runtime.setDevice(self.prev)
        return False


# ---------------------------------------------------------------- the device guard
# CuPy allocates and launches on the *current* device, whatever the arrays' device;
# an op on cuda:1 arrays must run with cuda:1 current (PyTorch's device guard), and
# must leave the caller's current device as it found it.

def gpu_index(args, kwargs=None):
    """The device index of the first GPU ember array among args (and kwargs' values),
    looking one level into lists and tuples; -1 when there is none."""
    for a in args:
        if isinstance(a, ndarray):
            if a.is_cuda:
                return a.get_device()
        elif isinstance(a, (list, tuple)):
            for e in a:
                if isinstance(e, ndarray) and e.is_cuda:
                    return e.get_device()
    if kwargs:
        return gpu_index(tuple(kwargs.values()))
    return -1


def run_on(idx, fn, *args, **kwargs):
    """fn(*args, **kwargs) with CUDA device idx current (idx < 0: as it is)."""
    if idx < 0:
        return fn(*args, **kwargs)
    rt = cp().cuda.runtime
    prev = rt.getDevice()
    if idx == prev:
        return fn(*args, **kwargs)
    rt.setDevice(idx)
    try:
        return fn(*args, **kwargs)
    finally:
        rt.setDevice(prev)


def on_arrays_device(fn):
    """Decorate a GPU function so that it runs on the device of its first GPU array
    argument (for functions the nn and autograd code calls directly, outside the op
    dispatcher, which guards every public op)."""
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        return run_on(gpu_index(args, kwargs), fn, *args, **kwargs)
    return guarded


def np_dtype(dtype):
    return dtype_from_code(_code(dtype))


_BF16_OK = []


def check_bfloat16():
    """bfloat16 GPU arrays need a CuPy that knows ml_dtypes' bfloat16 (CuPy >= 14): its
    kernels, casts and cuBLAS run on them.  An older CuPy gets a clear error here,
    before any array exists, instead of failing inside CuPy later."""
    if not _BF16_OK:
        c = cp()
        try:
            from cupy._core import _dtype
            _dtype.to_cuda_dtype(BFLOAT16)
        except Exception:
            raise TypeError(f"bfloat16 arrays on the GPU need CuPy >= 14 (with ml_dtypes), "
                            f"found CuPy {c.__version__}; use float16 or float32 there") \
                from None
        _BF16_OK.append(True)


def empty(shape, dtype, device=None):
    """A new C-contiguous GPU array (uninitialised) from CuPy's memory pool.

    `device` is an int index, a Device, or None for the current device."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    dt = np_dtype(dtype)
    if dt == BFLOAT16 and not _BF16_OK:
        check_bfloat16()
    if device is None:
        idx = current_device()
    elif isinstance(device, int):
        idx = device
    else:
        idx = device_index(device)
    n = math.prod(shape)
    nbytes = n * dt.itemsize
    c = cp()
    if idx == c.cuda.runtime.getDevice():
        mem = c.cuda.alloc(nbytes)
    else:
        with _on(idx):
            mem = c.cuda.alloc(nbytes)
    return _array._wrap_device_memory(mem.ptr, nbytes, mem, idx, shape,
                                      c_strides(shape, dt.itemsize), 0, dt)


def memset0(x):
    """Zero every byte of x's memory region (x C-contiguous), asynchronously, on the
    current stream of x's device."""
    nbytes = x.size * x.itemsize
    if nbytes:
        run_on(x.get_device(), _memset0, x.data_ptr(), nbytes)


def _memset0(ptr, nbytes):
    c = cp()
    c.cuda.runtime.memsetAsync(ptr, 0, nbytes, c.cuda.get_current_stream().ptr)


def zeros(shape, dtype, device=None):
    x = empty(shape, dtype, device)
    memset0(x)
    return x


def as_cupy(x):
    """A zero-copy cupy.ndarray over ember GPU array x (it keeps x alive)."""
    if not is_gpu(x):
        raise TypeError(f"as_cupy: expected an ember array on a CUDA device, got "
                        f"{type(x).__name__}" + (f" on {x.device}" if isinstance(x, ndarray) else ""))
    c = cp()
    st = x.storage
    base = st.data_ptr
    mem = c.cuda.UnownedMemory(base, st.nbytes, x, x.get_device())
    ptr = c.cuda.MemoryPointer(mem, x.data_ptr() - base)
    return c.ndarray(x.shape, x.dtype, ptr, strides=x.strides)


def from_cupy(c_arr):
    """An ember array over cupy array c_arr's memory, without copying.

    When c_arr views an ember array's memory (made by as_cupy), the result is a
    view of that array's Storage, so views keep sharing one version counter."""
    mem = c_arr.data.mem
    owner = getattr(mem, "_owner", None)
    if isinstance(owner, ndarray) and owner.is_cuda:
        off = c_arr.data.ptr - owner.storage.data_ptr
        return _array._as_strided(owner, c_arr.shape, c_arr.strides, off, c_arr.dtype)
    # the whole allocation is the storage: offsets stay valid for negative strides
    base = mem.ptr
    return _array._wrap_device_memory(base, mem.size, c_arr, c_arr.device.id, c_arr.shape,
                                      c_arr.strides, c_arr.data.ptr - base, c_arr.dtype)


def to_numpy(x):
    """A host copy of GPU array x (waits for the GPU, then reports a failed input check
    of an earlier op: see ember.cuda._checks)."""
    return run_on(x.get_device(), _to_numpy, x)


def _to_numpy(x):
    c = cp()
    values = c.asnumpy(as_cupy(x))          # (on the current stream, which it waits for)
    _checks.flush(c.cuda.get_current_stream())
    return values


def flush_checks():
    """Report the pending GPU input checks before memory leaves ember (waits only when
    there are some)."""
    _checks.flush()


def from_host(arr, idx):
    """A GPU copy of NumPy array arr on device idx."""
    arr = np.asarray(arr)
    out = empty(arr.shape, arr.dtype, idx)
    if arr.size:
        src = arr if arr.flags.c_contiguous else arr.copy()     # (keeps 0-d arrays 0-d)
        with _on(idx):
            as_cupy(out).set(src)
    return out


def from_host_on(arr, idx):
    """Unpickling a GPU array: back on device idx when it exists, else on the host."""
    try:
        if cp().cuda.runtime.getDeviceCount() > idx:
            return from_host(arr, idx)
    except Exception:
        pass
    return _array._from_numpy(arr)


def transfer(x, d):
    """x copied to Device d (host <-> GPU, or GPU -> another GPU)."""
    if d.type == "cpu":
        return _array._wrap(to_numpy(x))
    idx = device_index(d)
    if not x.is_cuda:
        return from_host(_array._numpy(x), idx)
    out = empty(x.shape, x.dtype, idx)
    if out.size:
        _copy_across(out, x)
    return out


def _copy_across(out, x):
    """out[...] = x for C-contiguous out on another device than x, in stream order on
    both sides (PyTorch's cross-device copy_): the destination's stream waits for
    what x's stream queued before, and x's stream waits for the copy, so x's memory
    is not reused under it."""
    c = cp()
    src, dst = x.get_device(), out.get_device()
    if not x.is_contiguous():
        x = x.copy()                # (on x's device)
    with _on(src):
        src_stream = c.cuda.get_current_stream()
        ready = c.cuda.Event(disable_timing=True)
        ready.record(src_stream)
    with _on(dst):
        dst_stream = c.cuda.get_current_stream()
        dst_stream.wait_event(ready)
        as_cupy(out).data.copy_from_device_async(as_cupy(x).data, out.size * out.itemsize,
                                                 dst_stream)
        done = c.cuda.Event(disable_timing=True)
        done.record(dst_stream)
    src_stream.wait_event(done)


def astype(x, dtype):
    """A C-contiguous copy of GPU array x in dtype.  Contiguous floating casts run
    elementwise.cu's ember_cast kernels: the first one of a (dtypes, device) goes
    through the launcher below and registers the kernel with _launch's fast path,
    whose launch costs a few microseconds of host time instead of CuPy's ~40."""
    dt = np_dtype(dtype)
    code = _code(dt)
    y = _launch.cast_contig(x, code, dt.itemsize)
    if y is not None:
        return y
    return run_on(x.get_device(), _astype, x, dt, code)


_D2D = 3        # cudaMemcpyDeviceToDevice


def _astype(x, dt, code):
    if x.dtype == dt and x.size and x.is_contiguous():
        # a plain copy (x.copy(), the autograd engine's first .grad): one device-to-device
        # cudaMemcpyAsync on the current stream, as PyTorch's clone, instead of CuPy's
        # astype (tens of microseconds of host time)
        c = cp()
        y = empty(x.shape, dt, x.get_device())
        c.cuda.runtime.memcpyAsync(y.data_ptr(), x.data_ptr(), x.size * x.itemsize, _D2D,
                                   c.cuda.get_current_stream().ptr)
        return y
    pair = (suffix(x.dtype), suffix(dt))
    if pair in CASTS and x.size and x.is_contiguous():
        dev = x.get_device()
        y = empty(x.shape, dt, dev)
        name = f"ember_cast_{pair[0]}_{pair[1]}"
        launch(name, vec_blocks(x.size, max(x.itemsize, dt.itemsize)), 256, (x, y, x.size))
        _launch.register_cast(_code(x.dtype), code, dev, _kernels.function(name))
        return y
    return from_cupy(as_cupy(x).astype(dt, order="C", copy=True))


def flags(x):
    return as_cupy(x).flags


def dlpack(x, *, stream=None, max_version=None, dl_device=None, copy=None):
    """DLPack export of GPU array x (zero-copy unless copy=True)."""
    if dl_device is not None and tuple(dl_device) != (2, x.get_device()):
        raise BufferError(f"__dlpack__: cannot export a {x.device} array to device {dl_device}")
    _checks.flush()             # the consumer must not read what a failed check left
    c = as_cupy(x)
    if copy:
        c = run_on(x.get_device(), c.copy)
    bf16 = c.dtype == BFLOAT16
    if bf16:                    # exported as uint16, then tagged kDLBfloat (as on the CPU)
        c = c.view(np.uint16)
    kw = {}
    if stream is not None:
        kw["stream"] = stream
    if max_version is not None:
        kw["max_version"] = max_version
    try:
        capsule = c.__dlpack__(**kw)
    except TypeError:
        kw.pop("max_version", None)
        capsule = c.__dlpack__(**kw)
    if bf16:
        from ember._core.dlpack_bf16 import retag_as_bfloat16
        retag_as_bfloat16(capsule)
    return capsule


def suffix(dtype):
    """Kernel-name suffix for dtype ('f32', 'f64', 'f16', 'bf16'), None where ember has no
    kernel (every .cu family is instantiated for the four float types: EMBER_FOR_FLOATS)."""
    return _SUFFIX.get(np.dtype(dtype).name)


_SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def blocks(n, threads=256):
    """Grid size for a grid-stride loop over n items (a few waves; the loop does the rest)."""
    return max(1, min((n + threads - 1) // threads, 65535 * 4))


_MAX_VEC_BLOCKS = [0]


def max_resident_blocks():
    """16 blocks of 256 threads per multiprocessor: enough to fill the GPU, few enough
    that each thread streams several 16-byte vectors (measured faster than one
    vector per thread on an H100)."""
    if not _MAX_VEC_BLOCKS[0]:
        c = cp()
        sms = c.cuda.runtime.getDeviceProperties(c.cuda.runtime.getDevice())["multiProcessorCount"]
        _MAX_VEC_BLOCKS[0] = 16 * int(sms)
    return _MAX_VEC_BLOCKS[0]


def vec_blocks(n, itemsize, threads=256):
    """Grid for the vectorised contiguous kernels (16 bytes per thread per step)."""
    nvec = (n * itemsize + 15) // 16
    return max(1, min((nvec + threads - 1) // threads, max_resident_blocks()))


def launch(name, grid, block, args, shmem=0):
    """Launch ember's CUDA kernel `name` (``ember/cuda/kernels/*.cu``) as `grid` blocks of
    `block` threads with `shmem` bytes of dynamic shared memory, on the current stream of
    the current device: the one launch every backend module calls (``R.launch``).

    `args` fill the kernel's parameters in order: ember GPU arrays (their first
    element's address; each must live on the current device, as under the dispatcher's
    device guard) or CuPy arrays (passed as ember arrays over the same memory), Python
    ints (64-bit) and floats (double), ``numpy.int32`` / ``numpy.float32`` (32-bit), None
    (a null pointer), bytes (a struct).  The kernel is compiled once per device
    (``_kernels.function``); the C launcher under this (``_launch.launch``,
    cuLaunchKernel) packs the arguments."""
    c = cp()
    nd = c.ndarray
    for a in args:
        if isinstance(a, nd):
            args = tuple(from_cupy(b) if isinstance(b, nd) else b for b in args)
            break
    dev = c.cuda.runtime.getDevice()
    _launch.launch(name, _kernels.function(name, dev), grid, block, shmem,
                   c.cuda.get_current_stream().ptr, tuple(args), dev)
