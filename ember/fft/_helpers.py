"""Sample frequencies and spectrum shifts (``fftfreq``, ``rfftfreq``, ``fftshift``,
``ifftshift``)."""
import operator

import numpy as np

import ember as E
from ember._core.dtypes import default_float_dtype, dtype_kind
from ember._api._util import as_array, normalize_axis

__all__ = ["fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _freq_args(n, d, dtype, op):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"fft.{op}: n must be an integer, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"fft.{op}: n must be positive, got {n}")
    dt = default_float_dtype() if dtype is None else np.dtype(dtype)
    if dtype_kind(dt) not in "fc":
        raise TypeError(f"fft.{op}: dtype must be a floating-point dtype, got {dt}")
    return n, 1.0 / (n * float(d)), dt


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of an n-point fft with sample spacing d: ``[0, 1, ...,
    (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``.

    `dtype` (Array API) defaults to the default float dtype (float32; NumPy's float64
    under ``set_default_dtype(float64)``); values are computed in float64, then cast.

    >>> import ember
    >>> ember.fft.fftfreq(4, d=0.5).tolist()
    [0.0, 0.5, -1.0, -0.5]
    """
    n, val, dt = _freq_args(n, d, dtype, "fftfreq")
    k = np.empty(n, dtype=np.int64)
    half = (n - 1) // 2 + 1
    k[:half] = np.arange(half)
    k[half:] = np.arange(-(n // 2), 0)
    return E.asarray((k * val).astype(dt), device=device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of an n-point rfft: ``[0, 1, ..., n // 2] / (d * n)``.

    >>> import ember
    >>> ember.fft.rfftfreq(4, d=0.5).tolist()
    [0.0, 0.5, 1.0]
    """
    n, val, dt = _freq_args(n, d, dtype, "rfftfreq")
    return E.asarray((np.arange(n // 2 + 1) * val).astype(dt), device=device)


def _shift(x, axes, dim, sign, op):
    if dim is not None:
        if axes is not None:
            raise TypeError(f"fft.{op}: pass either axes= or dim=, not both")
        axes = dim
    x = as_array(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif not isinstance(axes, (list, tuple)):
        axes = (axes,)
    axes = tuple(normalize_axis(a, x.ndim, f"fft.{op}") for a in axes)
    if not axes:
        return E.roll(x, 0) if x.ndim == 0 else x[...]
    shifts = tuple(sign * (x.shape[a] // 2) for a in axes)
    return E.roll(x, shifts, axis=axes)


def fftshift(x, axes=None, *, dim=None):
    """Move the zero-frequency term to the centre (a roll by n // 2 along `axes`, all
    by default).

    >>> import ember
    >>> ember.fft.fftshift(ember.fft.fftfreq(5)).tolist()
    [-0.4000000059604645, -0.20000000298023224, 0.0, 0.20000000298023224, 0.4000000059604645]
    """
    return _shift(x, axes, dim, 1, "fftshift")


def ifftshift(x, axes=None, *, dim=None):
    """Inverse of fftshift (a roll by -(n // 2)).

    >>> import ember
    >>> ember.fft.ifftshift(ember.asarray([-2, -1, 0, 1, 2])).tolist()
    [0, 1, 2, -2, -1]
    """
    return _shift(x, axes, dim, -1, "ifftshift")
