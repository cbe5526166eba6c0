"""What ember's cuDNN ops share: the switches, one handle per device (and thread) bound to
ember's current stream, descriptors, workspace from the memory pool, the plan caches,
and the rule for a status that is not success.

The switches are PyTorch's ``torch.backends.cudnn`` ones (``ember.backends.cudnn``
forwards to :data:`FLAGS`): ``enabled`` (use cuDNN at all), ``benchmark`` (time every
algorithm once per configuration with ``cudnnFind*AlgorithmEx`` and keep the fastest,
instead of cuDNN's heuristic ``cudnnGet*Algorithm_v7`` order), ``deterministic`` (only
algorithms cuDNN reports deterministic) and ``allow_tf32`` (float32 convolutions may
use TF32 tensor cores).

A cuDNN op returns ``None`` when ember's own kernels must run instead: cuDNN is disabled
or missing, the dtype or geometry is one it does not take, or cuDNN answered a status
other than success while the configuration was being planned, or NOT_SUPPORTED when
it ran.  Such a configuration is remembered and not tried again.  Any other failure
while running raises RuntimeError naming the op, the shapes, dtypes and the status.
:data:`COUNTS` counts, per op, the calls cuDNN ran and the ones that fell back (the GPU
check reads them: a silent fallback would otherwise look like success).
"""
import collections
import ctypes
import threading

import numpy as np

from ember.cuda import _cudnn_lib as L
from ember.cuda import _runtime as R

__all__ = ["FLAGS", "COUNTS", "usable", "handle", "Fallback", "check", "tensor_desc",
           "filter_desc", "conv_desc", "workspace", "scalars", "cudnn_dtype", "plans",
           "channels_last", "in_layout", "empty", "NCHW", "NHWC"]


class _Flags:
    """The switches (module attributes of ``ember.backends.cudnn``)."""
    __slots__ = ("enabled", "benchmark", "deterministic", "allow_tf32")

    def __init__(self):
        self.enabled, self.benchmark, self.deterministic, self.allow_tf32 = True, False, False, True

    def key(self):
        return (self.benchmark, self.deterministic, self.allow_tf32)


FLAGS = _Flags()
#: (op, "cudnn" | "fallback") -> calls
COUNTS = collections.Counter()
#: op -> the reason of its last fallback (a status name, or what was not supported)
LAST_FALLBACK = {}


class Fallback(Exception):
    """Raised inside a cuDNN op: run ember's own kernels for this configuration."""


def usable():
    """The function table when cuDNN may run now (enabled and loaded), else None."""
    return L.lib() if FLAGS.enabled else None


def cudnn_dtype(dtype):
    """cudnnDataType_t of a NumPy dtype, or None when cuDNN has none for it."""
    name = np.dtype(dtype).name
    return L.DATA.get(name)


def check(status, op, what):
    """Raise Fallback for a status other than success (while planning)."""
    if status != L.SUCCESS:
        raise Fallback(f"{what}: {L.status_name(status)}")


def run_failed(status, op, detail):
    """A status other than success from an op's execution: NOT_SUPPORTED -> Fallback, any
    other -> RuntimeError naming op and `detail` (the shapes and dtypes)."""
    if L.is_not_supported(status):
        raise Fallback(L.status_name(status))
    raise RuntimeError(f"{op} (cuDNN): {L.status_name(status)} ({detail})")


# ---------------------------------------------------------------- handles and streams
_handles = {}           # (device, thread) -> [handle, stream bound to it]
_lock = threading.Lock()


def handle(t, op):
    """The cuDNN handle of the current device and thread, bound to ember's current stream
    (cudnnSetStream only when the stream changed)."""
    cp = R.cp()
    key = (cp.cuda.runtime.getDevice(), threading.get_ident())
    entry = _handles.get(key)
    if entry is None:
        h = ctypes.c_void_p()
        check(t.cudnnCreate(h), op, "cudnnCreate")
        entry = _handles[key] = [h.value, None]
    stream = cp.cuda.get_current_stream().ptr
    if entry[1] != stream:
        check(t.cudnnSetStream(entry[0], stream), op, "cudnnSetStream")
        entry[1] = stream
    return entry[0]


# ---------------------------------------------------------------- descriptors

def _ints(values):
    return (ctypes.c_int * len(values))(*[int(v) for v in values])


def tensor_desc(t, op, dtype, dims, strides):
    """A tensor descriptor (dims and strides in elements)."""
    d = ctypes.c_void_p()
    check(t.cudnnCreateTensorDescriptor(d), op, "cudnnCreateTensorDescriptor")
    check(t.cudnnSetTensorNdDescriptor(d.value, dtype, len(dims), _ints(dims), _ints(strides)),
          op, f"cudnnSetTensorNdDescriptor{tuple(dims)}")
    return d.value


def filter_desc(t, op, dtype, fmt, dims):
    """A filter descriptor: dims (K, C/groups, kh, kw), layout `fmt` (NCHW or NHWC)."""
    d = ctypes.c_void_p()
    check(t.cudnnCreateFilterDescriptor(d), op, "cudnnCreateFilterDescriptor")
    check(t.cudnnSetFilterNdDescriptor(d.value, dtype, fmt, len(dims), _ints(dims)), op,
          f"cudnnSetFilterNdDescriptor{tuple(dims)}")
    return d.value


def conv_desc(t, op, pad, stride, dil, groups, compute, math):
    d = ctypes.c_void_p()
    check(t.cudnnCreateConvolutionDescriptor(d), op, "cudnnCreateConvolutionDescriptor")
    check(t.cudnnSetConvolution2dDescriptor(d.value, pad[0], pad[1], stride[0], stride[1],
                                            dil[0], dil[1], L.CROSS_CORRELATION, compute),
          op, "cudnnSetConvolution2dDescriptor")
    check(t.cudnnSetConvolutionGroupCount(d.value, groups), op, "cudnnSetConvolutionGroupCount")
    check(t.cudnnSetConvolutionMathType(d.value, math), op, "cudnnSetConvolutionMathType")
    return d.value


#: axis orders (outermost first) of an (N, C, H, W) array: NCHW, and NHWC (channels last)
NCHW, NHWC = (0, 1, 2, 3), (0, 2, 3, 1)


def channels_last(c):
    """Whether 4-d cupy array c is stored as (N, H, W, C) and not also as (N, C, H, W):
    ember has no memory_format flag, a channels-last array is one with those strides
    (``x.permute(0, 2, 3, 1).copy().permute(0, 3, 1, 2)``, PyTorch's
    ``x.contiguous(memory_format=torch.channels_last)``)."""
    return (c.ndim == 4 and not c.flags.c_contiguous
            and c.transpose(0, 2, 3, 1).flags.c_contiguous)


def in_layout(c, order):
    """cupy c (N, C, H, W) stored in axis order `order` (c itself when it already is)."""
    cp = R.cp()
    if order == NCHW:
        return cp.ascontiguousarray(c)
    return cp.ascontiguousarray(c.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def empty(shape, dtype, order):
    """A new cupy array of logical shape (N, C, H, W) stored in axis order `order`."""
    cp = R.cp()
    if order == NCHW:
        return cp.empty(shape, dtype=dtype)
    n, c, h, w = shape
    return cp.empty((n, h, w, c), dtype=dtype).transpose(0, 3, 1, 2)


def contiguous_strides(dims, order):
    """Element strides of a contiguous tensor with `dims` (N, C, ...) stored in axis
    `order` (outermost first): NCHW is (0, 1, 2, 3), NHWC (0, 2, 3, 1)."""
    strides = [0] * len(dims)
    s = 1
    for ax in reversed(order):
        strides[ax] = s
        s *= int(dims[ax])
    return strides


# ---------------------------------------------------------------- host scalars, workspace
_F1, _F0 = ctypes.c_float(1.0), ctypes.c_float(0.0)
_D1, _D0 = ctypes.c_double(1.0), ctypes.c_double(0.0)
_SCALARS = {False: (ctypes.addressof(_F1), ctypes.addressof(_F0)),
            True: (ctypes.addressof(_D1), ctypes.addressof(_D0))}


def scalars(double):
    """(address of 1, address of 0) in the compute type: double for float64 data, float
    otherwise (cuDNN's alpha / beta)."""
    return _SCALARS[bool(double)]


def workspace(nbytes):
    """(pointer, owner) of `nbytes` of device memory from CuPy's pool (ember's allocator),
    on the current stream: dropping `owner` after the call is queued is safe, the pool
    reuses a block in stream order.  (0, None) for none."""
    if not nbytes:
        return 0, None
    mem = R.cp().cuda.alloc(int(nbytes))
    return mem.ptr, mem


def out_of_memory():
    """The exception class a failed pool allocation raises."""
    return R.cp().cuda.memory.OutOfMemoryError


# ---------------------------------------------------------------- plan caches
_caches = []


def plans():
    """A new plan cache (a dict: configuration key -> plan, or a Fallback reason); every
    cache is emptied when the library is replaced."""
    c = {}
    _caches.append(c)
    return c


def reset():
    """Forget every handle, descriptor and plan (the library changed), and the counts."""
    _handles.clear()
    for c in _caches:
        c.clear()
    COUNTS.clear()
    LAST_FALLBACK.clear()


L.on_change(reset)


def fell_back(op, cache, key, reason):
    """Record that `op` runs ember's kernels for `key` (remembered in `cache` when given)."""
    if cache is not None and key is not None:
        cache[key] = reason
    COUNTS[(op, "fallback")] += 1
    LAST_FALLBACK[op] = reason
    return None


def ran(op):
    COUNTS[(op, "cudnn")] += 1


def small_enough(*shapes):
    """Whether every shape is non-empty with fewer than 2**31 elements (cuDNN's legacy API
    indexes with 32-bit ints; empty arrays are left to ember's kernels)."""
    for s in shapes:
        n = 1
        for d in s:
            n *= int(d)
        if n >= 2 ** 31 or n == 0:
            return False
    return True
