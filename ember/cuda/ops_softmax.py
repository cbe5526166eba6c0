"""softmax and log_softmax (ember.nn.functional.softmax) on CUDA arrays.

The kernels of softmax.cu work on rows: a C-contiguous (rows, cols) block with
the softmax axis last.  Another axis is moved to the end first (one copy) and
the result moved back and made C-contiguous, as the CPU returns it.

The row helpers here (``row_softmax``, ``row_softmax_backward``, ``row_grid``,
``row_threads``) are shared with the loss and attention modules.
"""

import numpy as np

from ember.cuda._dispatch import gpu_op
from ember._core.nn_args import float_input, softmax_dim
from ember.cuda import _runtime as R

__all__ = ["row_softmax", "row_softmax_backward", "softmax_backward",
           "softmax", "log_softmax"]

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def row_threads(cols):
    """Threads per block for the one-block-per-row kernels: a multiple of 32, <= 1024."""
    return int(min(1024, max(32, (cols + 31) // 32 * 32)))


def row_grid(rows):
    """Blocks for the one-block-per-row kernels (they stride over rows)."""
    return int(max(1, min(rows, 65535)))


def _kernel_dtype(dt, opname):
    sfx = R.suffix(dt)
    if sfx is None:
        raise TypeError(f"{opname} (cuda): no kernel for dtype {dt}")
    return sfx


def row_softmax(c, log):
    """softmax (log_softmax) of cupy array `c` over its last axis -> new C-contiguous cupy
    array of c's shape and dtype (float16/32/64)."""
    cp = R.cp()
    c = cp.ascontiguousarray(c)
    y = cp.empty(c.shape, dtype=c.dtype)
    if c.size == 0:
        return y
    cols = int(c.shape[-1]) if c.ndim else 1
    rows = c.size // cols
    sfx = _kernel_dtype(c.dtype, "softmax")
    R.launch(f"ember_{'log_softmax' if log else 'softmax'}_{sfx}", row_grid(rows),
           row_threads(cols), (c, y, rows, cols))
    return y


def row_softmax_backward(g, y, log):
    """Input gradient of softmax (log_softmax) over the last axis from output `y` and its
    gradient `g` (cupy arrays of one shape and dtype) -> new C-contiguous cupy array."""
    cp = R.cp()
    g = cp.ascontiguousarray(g)
    y = cp.ascontiguousarray(y)
    dx = cp.empty(y.shape, dtype=y.dtype)
    if y.size == 0:
        return dx
    cols = int(y.shape[-1]) if y.ndim else 1
    rows = y.size // cols
    sfx = _kernel_dtype(y.dtype, "softmax backward")
    name = f"ember_{'log_softmax_backward' if log else 'softmax_backward'}_{sfx}"
    R.launch(name, row_grid(rows), row_threads(cols), (y, g, dx, rows, cols))
    return dx


def _along(fn, c, d, *rest):
    """fn applied over axis d of cupy array(s): d moved last, then moved back (contiguous)."""
    cp = R.cp()
    if c.ndim == 0:
        out = fn(c.reshape(1), *(r.reshape(1) for r in rest))
        return out.reshape(())
    last = c.ndim - 1
    if d == last:
        return fn(c, *rest)
    out = fn(cp.moveaxis(c, d, -1), *(cp.moveaxis(r, d, -1) for r in rest))
    return cp.ascontiguousarray(cp.moveaxis(out, -1, d))


def _forward(opname, input, dim, axis, dtype, log, stacklevel=5):
    x = float_input(opname, input, dtype)
    dt = x.dtype
    d = softmax_dim(opname, x.ndim, dim, axis, stacklevel)
    c = R.as_cupy(x)
    if R.suffix(dt) is None:        # a float dtype without kernels: compute in float32
        c = c.astype(_F32)
    y = _along(lambda a: row_softmax(a, log), c, d)
    return R.from_cupy(y if y.dtype == dt else y.astype(dt))


@gpu_op("nn.functional.softmax._softmax_backward")
@R.on_arrays_device
def softmax_backward(g, y, d, log):
    """The first-order softmax / log_softmax gradient (softmax.py's _softmax_backward)
    for ember GPU arrays g and y along axis d (>= 0)."""
    cp = R.cp()
    yc = R.as_cupy(y)
    gc = R.as_cupy(g)
    if gc.dtype != yc.dtype:
        gc = gc.astype(yc.dtype)
    if gc.shape != yc.shape:
        gc = cp.broadcast_to(gc, yc.shape)
    if R.suffix(yc.dtype) is None:
        yc, gc = yc.astype(_F32), gc.astype(_F32)
    out = _along(lambda a, b: row_softmax_backward(b, a, log), yc, d, gc)
    return R.from_cupy(out if out.dtype == y.dtype else out.astype(y.dtype))


@gpu_op("nn.functional.softmax")
def softmax(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    """softmax on CUDA (see ember.nn.functional.softmax)."""
    return _forward("softmax", input, dim, axis, dtype, False)


@gpu_op("nn.functional.log_softmax")
def log_softmax(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    """log_softmax on CUDA (see ember.nn.functional.log_softmax)."""
    return _forward("log_softmax", input, dim, axis, dtype, True)
