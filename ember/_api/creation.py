"""Array creation (owned by the creation work; minimal core for now)."""
import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray, check_device
from ember._core.dtypes import _code, default_float_dtype
from ember._api._util import wrap, numpy_view, empty_raw

__all__ = ["asarray", "empty", "zeros"]


def asarray(obj, /, dtype=None, *, device=None, copy=None, requires_grad=False):
    """Convert `obj` to an ember array (no copy when it can be avoided).

    >>> import ember
    >>> ember.asarray([1.0, 2.0]).dtype
    dtype('float32')
    """
    check_device(device, "asarray")
    x = wrap(obj)
    if dtype is not None and x.dtype != np.dtype(dtype if dtype is not float else default_float_dtype()):
        if copy is False:
            raise ValueError(f"asarray: cannot convert {x.dtype} to {np.dtype(dtype)} without a copy")
        x = x.astype(dtype)
    elif copy:
        x = x.copy()
    if requires_grad:
        x.requires_grad = True
    return x


def empty(shape, *, dtype=None, device=None, requires_grad=False):
    """Uninitialised array of `shape`."""
    check_device(device, "empty")
    x = empty_raw(shape, dtype)
    if requires_grad:
        x.requires_grad = True
    return x


def zeros(shape, *, dtype=None, device=None, requires_grad=False):
    """Array of zeros."""
    x = empty(shape, dtype=dtype, device=device)
    x.fill(0)
    if requires_grad:
        x.requires_grad = True
    return x
