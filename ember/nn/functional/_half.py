"""16-bit floats through float32 kernels: widen, compute, round back once.

The CPU pooling kernels (and the GPU ones for bfloat16) are typed
float32/float64.  (Convolutions do their own widening, on the CPU only:
``conv._widened``; on the GPU float16 and bfloat16 run as themselves.)  Their 16-bit inputs are cast to float32 with the
differentiable ``astype``, so gradients flow back in the input's dtype, and
the floating results are rounded to that dtype at the end, as PyTorch's
reduced-precision CPU kernels do (float32 accumulation).
"""
import functools

import numpy as np

from ember._core.array import ndarray
from ember._core.dtypes import is_half_dtype

_F16 = np.dtype(np.float16)


def _needs_widening(x):
    # float16 on a GPU has its own kernels; everything else 16-bit is widened
    return isinstance(x, ndarray) and is_half_dtype(x.dtype) and not (x.is_cuda and x.dtype == _F16)


def _widen(v):
    return v.astype(np.float32) if isinstance(v, ndarray) and is_half_dtype(v.dtype) else v


def _narrow(v, dt):
    if isinstance(v, tuple):
        return tuple(_narrow(u, dt) for u in v)
    if isinstance(v, ndarray) and v.dtype == np.float32:
        return v.astype(dt)
    return v


def computes_in_float32(fn):
    """Decorate an nn function whose first argument is the input: a 16-bit float
    input (and any 16-bit array argument) runs in float32, floating results
    come back in the input's dtype."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        x = args[0] if args else kwargs.get("input")
        if not _needs_widening(x):
            return fn(*args, **kwargs)
        args = tuple(_widen(a) for a in args)
        kwargs = {k: _widen(v) for k, v in kwargs.items()}
        return _narrow(fn(*args, **kwargs), x.dtype)
    return run
