"""A CuPy stand-in over NumPy for running ember's GPU backend on the CPU (tests only).

"Device" memory is host memory; a ``cupy.ndarray`` is a NumPy subclass whose ``.data``
is a MemoryPointer as CuPy's; streams and events are trivial (everything is already
done); the memory pool counts allocations.  Together with the host build of ember's
kernels (tests/cuda_host_kernels.py) and the cuBLAS model (tests/cublas_model.py) it
lets the GPU suites run without a GPU: see tests/cuda_emu/__init__.py.  It emulates the
part of CuPy that ember uses, nothing more; a result here is never a GPU result.

Functions taken from NumPy accept only what the installed CuPy's function of that name
accepts (its signature, read from the real package, which imports without a GPU), and a
function CuPy lacks is missing here too: NumPy's broader API would otherwise hide calls
that fail on a real GPU (``cupy.clip(x, min=...)``, ``cupy.lexsort(k, axis=0)``).
"""
import contextlib
import ctypes
import inspect
import os
import sys
import types
import weakref

import numpy as np

try:
    import cupy as _REAL            # the real package, for its signatures only
except Exception:                   # pragma: no cover - CuPy not installed
    _REAL = None

__version__ = "14.2.0+ember-emulation"

# EMBER_CUDA_EMU_DEVICES=N emulates N devices without peer access, the strict case: a
# CuPy call or kernel launch given an array of a device other than the current one
# fails, as CuPy's peer-access check and an illegal-address fault would on a GPU.
N_DEVICES = max(1, int(os.environ.get("EMBER_CUDA_EMU_DEVICES", "1")))


# ------------------------------------------------------------------ memory

class Memory:
    """A block of "device" memory (cupy.cuda.Memory / UnownedMemory)."""

    def __init__(self, ptr, size, owner=None, device_id=0, keep=None):
        self.ptr, self.size, self._owner, self.device_id = int(ptr), int(size), owner, device_id
        self._keep = keep


class MemoryPointer:
    def __init__(self, mem, offset=0):
        self.mem = mem
        self.ptr = mem.ptr + int(offset)
        self.device_id = mem.device_id

    def __int__(self):
        return self.ptr

    def copy_from_device_async(self, src, size, stream=None):
        """A device-to-device copy (across devices too, as cudaMemcpyAsync with UVA)."""
        ctypes.memmove(self.ptr, src.ptr, int(size))

    def copy_from_device(self, src, size):
        ctypes.memmove(self.ptr, src.ptr, int(size))


class MemoryPool:
    """Counts the bytes of live allocations, per device (CuPy's default pool reports
    the current device's)."""

    def __init__(self):
        self._used = [0] * N_DEVICES
        self._total = [0] * N_DEVICES

    def _alloc(self, nbytes, dev):
        self._used[dev] += nbytes
        self._total[dev] = max(self._total[dev], self._used[dev])

    def _free(self, nbytes, dev):
        self._used[dev] -= nbytes

    def used_bytes(self):
        return self._used[runtime._device]

    def total_bytes(self):
        return self._total[runtime._device]

    def free_bytes(self):
        return self.total_bytes() - self.used_bytes()

    def free_all_blocks(self, stream=None):
        self._total[runtime._device] = self._used[runtime._device]

    def n_free_blocks(self):
        return 0

    def get_limit(self):
        return 0

    def set_limit(self, size=None, fraction=None):
        pass


_POOL = MemoryPool()


def alloc(nbytes):
    nbytes = int(nbytes)
    buf = np.empty(max(nbytes, 1) + 256, np.uint8)
    base = buf.ctypes.data
    ptr = (base + 255) & ~255                       # CuPy's pool hands out aligned blocks
    dev = runtime._device
    mem = Memory(ptr, nbytes, keep=buf, device_id=dev)
    _POOL._alloc(nbytes, dev)
    weakref.finalize(mem, _POOL._free, nbytes, dev)
    return MemoryPointer(mem, 0)


def UnownedMemory(ptr, size, owner, device_id=0):
    return Memory(ptr, size, owner=owner, device_id=device_id)


def _extent(shape, strides, itemsize):
    lo = hi = 0
    for n, s in zip(shape, strides):
        if n == 0:
            return 0, 0
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi + itemsize


# ------------------------------------------------------------------ ndarray

class Device:
    def __init__(self, device=None):
        self.id = 0 if device is None else int(getattr(device, "id", device))
        self._prev = None

    compute_capability = "90"

    def use(self):
        runtime.setDevice(self.id)

    def synchronize(self):
        pass

    def __enter__(self):
        self._prev = runtime.getDevice()
        runtime.setDevice(self.id)
        return self

    def __exit__(self, *exc):
        runtime.setDevice(self._prev)
        return False

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"<CUDA Device {self.id} (emulated)>"


class ndarray(np.ndarray):
    """cupy.ndarray: NumPy with CuPy's .data (a MemoryPointer), .device, .get() and .set()."""

    def __new__(cls, shape, dtype=float, memptr=None, strides=None, order="C"):
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        dtype = np.dtype(dtype)
        if memptr is None:
            mp = alloc(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
            strides = None
        else:
            mp = memptr
        if strides is None:
            st, acc = [], dtype.itemsize
            for n in (reversed(shape) if order == "C" else shape):
                st.append(acc)
                acc *= max(n, 1)
            strides = tuple(reversed(st)) if order == "C" else tuple(st)
        lo, hi = _extent(shape, strides, dtype.itemsize)
        buf = (ctypes.c_char * max(hi - lo, 1)).from_address(mp.ptr + lo)
        arr = np.ndarray(shape, dtype, buffer=buf, offset=-lo, strides=strides).view(cls)
        arr._emu_mem = mp.mem
        arr._emu_dev = mp.device_id
        return arr

    def __array_finalize__(self, obj):
        self._emu_mem = getattr(obj, "_emu_mem", None)
        # a view stays on its base's device; a fresh result is made on the current one
        self._emu_dev = getattr(obj, "_emu_dev", runtime._device)

    # CuPy wraps out-of-range integer-array indices around where NumPy raises
    # ("Differences between CuPy and NumPy"); ember's deferred checks rely on that
    def __getitem__(self, key):
        if N_DEVICES > 1 and _has_index_array(key):        # a gather kernel on a GPU
            _on_current_device("__getitem__", self, key)
        return super().__getitem__(_wrap_key(self.shape, key))

    def __setitem__(self, key, value):
        if N_DEVICES > 1:
            _on_current_device("__setitem__", self, key, value)
        super().__setitem__(_wrap_key(self.shape, key), value)

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        # CuPy returns 0-d arrays where NumPy returns scalars
        out = np.asarray(arr).view(type(self))
        return out

    @property
    def data(self):
        ptr = self.__array_interface__["data"][0]
        mem = getattr(self, "_emu_mem", None)
        if mem is not None and mem.ptr <= ptr < mem.ptr + max(mem.size, 1):
            return MemoryPointer(mem, ptr - mem.ptr)
        base = self
        while isinstance(base.base, np.ndarray):
            base = base.base
        b = base.view(np.ndarray)
        lo, hi = _extent(b.shape, b.strides, b.itemsize)
        start = b.__array_interface__["data"][0] + lo
        return MemoryPointer(Memory(start, hi - lo, keep=base, device_id=self._emu_dev),
                             ptr - start)

    @property
    def device(self):
        return Device(self._emu_dev)

    def get(self, stream=None, order="C", out=None):
        host = np.array(self.view(np.ndarray), order=order, copy=True)
        if out is not None:
            out[...] = host
            return out
        return host

    def set(self, arr, stream=None):
        self[...] = np.asarray(arr)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self.__array_interface__["data"][0], False),
                "strides": None if self.flags.c_contiguous else self.strides, "stream": 1}

    def toDlpack(self):
        return self.view(np.ndarray).__dlpack__()



def _arrays_in(values):
    for v in values:
        if isinstance(v, ndarray):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _arrays_in(v)
        elif isinstance(v, dict):
            yield from _arrays_in(tuple(v.values()))


def _has_index_array(key):
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (np.ndarray, list)) for k in items)


def _on_current_device(op, *values):
    """CuPy's check before a kernel runs: every array on the current device (the
    emulated devices have no peer access)."""
    cur = runtime._device
    for a in _arrays_in(values):
        if a._emu_dev != cur:
            raise ValueError(f"{op}: The device where the array resides ({a._emu_dev}) is "
                             f"different from the current device ({cur}). Peer access is "
                             f"unavailable between these devices. (emulated)")


def _plain(v):
    if isinstance(v, ndarray):
        return v.view(np.ndarray)
    if isinstance(v, tuple):
        return tuple(_plain(e) for e in v)
    return v


def _checked_ufunc(self, ufunc, method, *inputs, **kwargs):
    _on_current_device(f"{ufunc.__name__}.{method}", inputs, kwargs)
    out = kwargs.get("out")
    res = getattr(ufunc, method)(*_plain(inputs), **{k: _plain(v) for k, v in kwargs.items()})
    if out is not None:
        return out[0] if len(out) == 1 else out
    return _wrap(res)


def _checked_function(self, func, types, args, kwargs):
    _on_current_device(func.__name__, args, kwargs)
    return super(ndarray, self).__array_function__(func, types, args, kwargs)


def _checked_astype(self, *args, **kwargs):
    _on_current_device("astype", self)
    return np.ndarray.astype(self, *args, **kwargs)


def _copy_to_current(self, order="C"):
    """CuPy's copy() reads an array of any device into the current device."""
    out = np.ndarray.copy(self.view(np.ndarray), order=order).view(ndarray)
    out._emu_dev = runtime._device
    return out


if N_DEVICES > 1:           # the checks cost time: only where there is a second device
    ndarray.__array_ufunc__ = _checked_ufunc
    ndarray.__array_function__ = _checked_function
    ndarray.astype = _checked_astype
    ndarray.copy = _copy_to_current


def _wrap_key(shape, key):
    """key with its integer index arrays taken modulo their axis' length (CuPy's rule)."""
    items = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(k, (np.ndarray, list)) for k in items):
        return key
    n_axes = sum(np.asarray(k).ndim if isinstance(k, (np.ndarray, list)) and
                 np.asarray(k).dtype == bool else (0 if k is None or k is Ellipsis else 1)
                 for k in items)
    out, axis = [], 0
    for k in items:
        if k is Ellipsis:
            axis += len(shape) - n_axes
            out.append(k)
            continue
        if k is None:
            out.append(k)
            continue
        if isinstance(k, (np.ndarray, list)):
            arr = np.asarray(k).view(np.ndarray)
            if arr.dtype == bool:
                axis += arr.ndim
                out.append(arr)
                continue
            if arr.dtype.kind in "iu" and axis < len(shape) and shape[axis] > 0:
                arr = arr % shape[axis]
            out.append(arr)
        else:
            out.append(k)
        axis += 1
    return tuple(out) if isinstance(key, tuple) else out[0]


class _UfuncWithWrappingAt:
    """A NumPy ufunc whose .at wraps index arrays around as CuPy's scatter does."""

    def __init__(self, uf):
        self._uf = uf

    def __call__(self, *args, **kwargs):
        return self._uf(*args, **kwargs)

    def at(self, a, indices, b=None):
        key = _wrap_key(a.shape, indices)
        return self._uf.at(a, key) if b is None else self._uf.at(a, key, b)

    def __getattr__(self, name):
        return getattr(self._uf, name)


add = _UfuncWithWrappingAt(np.add)
maximum = _UfuncWithWrappingAt(np.maximum)
minimum = _UfuncWithWrappingAt(np.minimum)


def _wrap(x):
    if isinstance(x, ndarray):
        return x
    if isinstance(x, np.ndarray):
        return x.view(ndarray)
    if isinstance(x, np.generic):
        return np.asarray(x).view(ndarray)
    if isinstance(x, tuple):
        return tuple(_wrap(e) for e in x)
    if isinstance(x, list):
        return [_wrap(e) for e in x]
    return x


def _real_signature(real):
    if real is None or isinstance(real, (np.ufunc, type)):
        return None
    try:
        return inspect.signature(real)
    except (TypeError, ValueError):
        return None


def _wrapped(fn, real=None):
    """NumPy's fn with CuPy-array results; with `real` (CuPy's function of that name) the
    call must also fit CuPy's signature (the TypeError CuPy would raise otherwise)."""
    sig = _real_signature(real)

    def call(*args, **kwargs):
        kwargs.pop("stream", None)
        if sig is not None:
            try:
                sig.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{getattr(fn, '__name__', 'fn')}() {e}") from None
        return _wrap(fn(*args, **kwargs))
    if sig is not None:
        call.__signature__ = sig        # inspect.signature() sees CuPy's, as on a GPU
    call.__name__ = getattr(fn, "__name__", "fn")
    call.__wrapped__ = fn
    return call


def _from_interface(obj):
    """A zero-copy view of an object exporting __cuda_array_interface__ (ember arrays)."""
    cai = obj.__cuda_array_interface__
    dt = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    ptr = cai["data"][0]
    # CuPy asks the driver which device owns the pointer; an ember array knows it
    dev = obj.get_device() if hasattr(obj, "get_device") else runtime._device
    mem = UnownedMemory(ptr, 0, obj, device_id=dev)
    arr = ndarray(shape, dt, memptr=MemoryPointer(mem, 0), strides=strides)
    lo, hi = _extent(shape, arr.strides, dt.itemsize)
    mem.ptr, mem.size = ptr + lo, hi - lo
    return arr


def asarray(a, dtype=None, order=None, *, blocking=False):
    if isinstance(a, ndarray) and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    if not isinstance(a, np.ndarray) and hasattr(a, "__cuda_array_interface__"):
        view = _from_interface(a)
        return view if dtype is None else view.astype(dtype, copy=False)
    return _wrap(np.array(a, dtype=dtype, order=order or "K", copy=True))


def array(a, dtype=None, copy=True, order="K", ndmin=0):
    return _wrap(np.array(a, dtype=dtype, copy=True, order=order, ndmin=ndmin))


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    host = np.array(np.asarray(a).view(np.ndarray) if isinstance(a, np.ndarray) else a,
                    order=order, copy=True)
    if out is not None:
        out[...] = host
        return out
    return host


def get_array_module(*args):
    return sys.modules[__name__]


# ------------------------------------------------------------------ streams, events, runtime

class Stream:
    _ids = [0x1000]

    def __init__(self, null=False, non_blocking=False, priority=0, ptr=None):
        if null:
            self.ptr = 0
        else:
            Stream._ids[0] += 16
            self.ptr = Stream._ids[0]
        self.device_id = -1 if null else runtime._device       # CuPy's null stream: -1
        self._prev = []

    done = True

    def synchronize(self):
        pass

    def wait_event(self, event):
        pass

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def _device(self):
        return runtime._device if self.device_id < 0 else self.device_id

    def use(self):
        _STREAM[self._device()] = self
        return self

    def __enter__(self):
        d = self._device()
        self._prev.append(_STREAM.get(d, Stream.null))
        _STREAM[d] = self
        return self

    def __exit__(self, *exc):
        _STREAM[self._device()] = self._prev.pop()
        return False


Stream.null = Stream(null=True)
_STREAM = {}            # device -> its current stream (each device has its own, as in CuPy)


def get_current_stream(device_id=-1):
    return _STREAM.get(runtime._device if device_id is None or device_id < 0 else device_id,
                       Stream.null)


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.done = True
        self.ptr = id(self)
        self._t = 0.0

    def record(self, stream=None):
        import time
        self._t = time.perf_counter()

    def synchronize(self):
        pass


def get_elapsed_time(start, end):
    return (end._t - start._t) * 1e3


def _properties(device=0):
    return {"name": b"ember emulated GPU (host CPU)", "totalGlobalMem": 8 << 30,
            "multiProcessorCount": 4, "major": 9, "minor": 0, "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiProcessor": 2048, "warpSize": 32, "sharedMemPerBlock": 49152,
            "clockRate": 1_000_000, "l2CacheSize": 1 << 20, "integrated": 0,
            "pciBusID": 0, "uuid": b"\0" * 16}


class _Runtime(types.ModuleType):
    _device = 0

    def getDevice(self):
        return self._device

    def setDevice(self, d):
        if not 0 <= int(d) < N_DEVICES:
            raise RuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {d} (the "
                               f"emulation has {N_DEVICES} device(s))")
        self._device = int(d)

    def getDeviceCount(self):
        return N_DEVICES

    def deviceSynchronize(self):
        pass

    def memGetInfo(self):
        total = _properties()["totalGlobalMem"]
        return total - _POOL.used_bytes(), total

    def getDeviceProperties(self, d):
        if not 0 <= int(d) < N_DEVICES:
            raise RuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {d}")
        return _properties(d)

    def runtimeGetVersion(self):
        return 13000

    def driverGetVersion(self):
        return 13000

    def memsetAsync(self, ptr, value, size, stream=0):
        ctypes.memset(int(ptr), int(value), int(size))

    def memcpyAsync(self, dst, src, size, kind=0, stream=0):
        ctypes.memmove(int(dst), int(src), int(size))

    def memcpy(self, dst, src, size, kind=0):
        ctypes.memmove(int(dst), int(src), int(size))

    def deviceCanAccessPeer(self, a, b):
        return 0


runtime = _Runtime("cupy.cuda.runtime")


def get_default_memory_pool():
    return _POOL


def get_default_pinned_memory_pool():
    return MemoryPool()


class _CudaModule(types.ModuleType):
    pass


cuda = _CudaModule("cupy.cuda")
for _name, _obj in {"alloc": alloc, "UnownedMemory": UnownedMemory, "Memory": Memory,
                    "MemoryPointer": MemoryPointer, "MemoryPool": MemoryPool, "Device": Device,
                    "Stream": Stream, "Event": Event, "get_current_stream": get_current_stream,
                    "get_elapsed_time": get_elapsed_time, "runtime": runtime,
                    "get_device_id": lambda: runtime.getDevice(),
                    "is_available": lambda: True}.items():
    setattr(cuda, _name, _obj)
cuda.device = types.ModuleType("cupy.cuda.device")
cuda.device.get_cublas_handle = lambda: 0
cuda.device.Device = Device
cuda.memory = types.ModuleType("cupy.cuda.memory")
cuda.memory.MemoryPointer = MemoryPointer
cuda.memory.UnownedMemory = UnownedMemory


class OutOfMemoryError(MemoryError):
    """cupy.cuda.memory.OutOfMemoryError (the emulated pool never raises it)."""


cuda.memory.OutOfMemoryError = OutOfMemoryError
cuda.nvrtc = types.ModuleType("cupy.cuda.nvrtc")

_core = types.ModuleType("cupy._core")
_core._dtype = types.ModuleType("cupy._core._dtype")
_core._dtype.to_cuda_dtype = lambda dt, is_half_allowed=True: 0


def is_available():
    return True


def power(a, b, out=None, **kw):
    """CuPy's power never raises: integer powers with negative exponents give 0 there
    (NumPy raises, which would hide ember's own deferred check of them)."""
    a_, b_ = np.asarray(a), np.asarray(b)
    if a_.dtype.kind in "iu" and b_.dtype.kind in "iu" and (b_ < 0).any():
        r = np.power(a_, np.where(b_ < 0, 0, b_), **kw)
        r = np.where(b_ < 0, 0, r).astype(r.dtype)
        if out is not None:
            out[...] = r
            return out
        return _wrap(r)
    return _wrap(np.power(a, b, out=out, **kw))


def sort(a, axis=-1, kind=None):
    """CuPy's sorts are stable (thrust::stable_sort); NumPy's default is not."""
    return _wrap(np.sort(a, axis=axis, kind="stable"))


def argsort(a, axis=-1, kind=None):
    return _wrap(np.argsort(a, axis=axis, kind="stable"))


def __getattr__(name):
    """Everything else from NumPy, results as emulated device arrays."""
    if name.startswith("__"):
        raise AttributeError(name)
    obj = getattr(np, name)
    if isinstance(obj, np.ufunc) or isinstance(obj, type) or isinstance(obj, types.ModuleType):
        return obj
    if callable(obj):
        if _REAL is not None and not hasattr(_REAL, name):
            raise AttributeError(f"module 'cupy' has no attribute {name!r} (CuPy "
                                 f"{_REAL.__version__} lacks it)")
        return _wrapped(obj, getattr(_REAL, name, None))
    return obj


@contextlib.contextmanager
def _no_sync_check():
    yield


class _Wrapped(types.ModuleType):
    """A NumPy submodule (linalg, random...) with CuPy-array results."""

    def __init__(self, name, mod, real=None):
        super().__init__(name)
        self._mod = mod
        self._real = real

    def __getattr__(self, name):
        obj = getattr(self._mod, name)
        if not callable(obj) or isinstance(obj, type):
            return obj
        if self._real is not None and not hasattr(self._real, name):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return _wrapped(obj, getattr(self._real, name, None))


linalg = _Wrapped("cupy.linalg", np.linalg, getattr(_REAL, "linalg", None))
fft = _Wrapped("cupy.fft", np.fft, getattr(_REAL, "fft", None))


cupyx = types.ModuleType("cupyx")
cupyx.allow_synchronize = lambda allow: _no_sync_check()
cupyx.errstate = lambda **kw: _no_sync_check()      # NumPy's linalg raises already
cupyx.scipy = types.ModuleType("cupyx.scipy")
