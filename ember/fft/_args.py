"""Argument handling shared by the ember.fft transforms: input dtypes, ``norm``,
``n`` / ``s`` and ``axis`` / ``axes`` (with PyTorch's ``dim=``), ``out=``.

The rules are NumPy 2's (``numpy/fft/_pocketfft.py``): ``s[i] == -1`` (or None)
means the input's length along that axis, ``s`` without ``axes`` applies to the
last ``len(s)`` axes, repeated axes are transformed once per appearance.
"""
import operator

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._core.dtypes import default_float_dtype, dtype_kind, is_half_dtype
from ember._api._util import as_array, normalize_axis, shape_str, into_out as _into_out

NORMS = ("backward", "ortho", "forward")
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


def check_norm(norm, op):
    """None -> "backward"; anything but NumPy's three names is a ValueError."""
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise ValueError(f"fft.{op}: invalid norm {norm!r}; expected one of 'backward', "
                         f"'ortho', 'forward' (or None)")
    return norm


def dual(norm):
    """The norm of the adjoint transform (backward <-> forward, ortho stays)."""
    return _DUAL[norm]


def pick(value, alias, default, name, alias_name, op):
    """NumPy's keyword (`name`) or PyTorch's (`alias_name`), not both (`value` left at
    `default` counts as not given)."""
    if alias is not None:
        if value is not None and value != default:
            raise TypeError(f"fft.{op}: pass either {name}= or {alias_name}=, not both")
        return alias
    if value is None and default is not None:
        raise TypeError(f"fft.{op}: {name} must be an integer, not None")
    return value


def float_input(x, op, real=False):
    """x as an ember array of a dtype the transforms compute in: float32/float64 or
    complex64/complex128.  Integers and bool go to the default float dtype (as
    ember.linalg does; NumPy's float64 under ``set_default_dtype(float64)``), float16
    and bfloat16 to float32.  real=True: complex input is a TypeError (rfft, ihfft)."""
    x = as_array(x)
    dt = x.dtype
    k = dtype_kind(dt)
    if k in "biu":
        x = x.astype(default_float_dtype())
    elif is_half_dtype(dt):
        x = x.astype(np.float32)
    elif k == "c":
        if real:
            raise TypeError(f"fft.{op}: expected a real input, got {dt} (shape "
                            f"{shape_str(x.shape)}); use fft.fft / fft.fftn for complex input")
        if dt not in _REAL_OF:
            raise TypeError(f"fft.{op}: unsupported dtype {dt}")
    elif k != "f" or (dt not in _COMPLEX_OF):
        raise TypeError(f"fft.{op}: unsupported dtype {dt} (shape {shape_str(x.shape)}); "
                        f"expected a numeric array")
    return x


def complex_dtype(dt):
    return _COMPLEX_OF.get(np.dtype(dt), np.dtype(dt))


def real_dtype(dt):
    return _REAL_OF.get(np.dtype(dt), np.dtype(dt))


def as_complex(x):
    """x cast to its complex dtype (a no-op for complex x)."""
    return x if dtype_kind(x.dtype) == "c" else x.astype(complex_dtype(x.dtype))


def _points(n, op):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"fft.{op}: the number of points must be an integer, got "
                        f"{type(n).__name__}") from None
    return n


def check_points(n, op, axis=None):
    if n < 1:
        where = "" if axis is None else f" along axis {axis}"
        raise ValueError(f"fft.{op}: invalid number of FFT data points ({n}) specified{where}")
    return n


def one_axis(x, n, axis, op, inverse_real=False):
    """(n, axis) of a 1-d transform: axis made non-negative, n defaulted to the
    input's length (irfft / hfft: 2 * (m - 1))."""
    if x.ndim == 0:
        raise np.exceptions.AxisError(f"fft.{op}: expected an array with at least one "
                                      f"dimension, got a 0-d array")
    ax = normalize_axis(axis, x.ndim, f"fft.{op}")
    m = x.shape[ax]
    if n is None:
        n = 2 * (m - 1) if (inverse_real and n is None) else m
    n = check_points(_points(n, op), op, axis)
    return n, ax


def _seq(v):
    """None, an int, or a sequence (list, tuple, 1-d array) -> None or a tuple."""
    if v is None or isinstance(v, tuple):
        return v
    try:
        return (operator.index(v),)
    except TypeError:
        return tuple(v)


def nd_axes(x, s, axes, op, inverse_real=False):
    """(s, axes) lists of an n-d transform, NumPy 2's rules (repeated axes kept)."""
    axes, s = _seq(axes), _seq(s)
    shapeless = s is None
    if axes is None:
        axes = list(range(x.ndim)) if shapeless else list(range(-len(s), 0))
        if not shapeless and len(s) > x.ndim:
            raise ValueError(f"fft.{op}: s has {len(s)} entries but the input has only "
                             f"{x.ndim} dimensions (shape {shape_str(x.shape)})")
    axes = [normalize_axis(a, x.ndim, f"fft.{op}") for a in axes]
    if x.ndim == 0 and axes:
        raise np.exceptions.AxisError(f"fft.{op}: expected an array with at least one "
                                      f"dimension, got a 0-d array")
    if shapeless:
        s = [x.shape[a] for a in axes]
    else:
        s = [None if v is None else _points(v, op) for v in s]
    if len(s) != len(axes):
        raise ValueError(f"fft.{op}: s and axes have different lengths ({len(s)} and "
                         f"{len(axes)})")
    if inverse_real and axes and shapeless:
        s[-1] = 2 * (x.shape[axes[-1]] - 1)
    s = [x.shape[a] if v is None or v == -1 else v for v, a in zip(s, axes)]
    for v, a in zip(s, axes):
        check_points(v, op, a)
    return s, axes


def unique(axes):
    return len(set(axes)) == len(axes)


def into_out(res, out, op):
    """res written into out (NumPy's ``out=``) by ``_util.into_out``, after the checks the
    transforms add: dtype a same-kind cast of res's, the same device; not for results
    that need a gradient."""
    if isinstance(out, ndarray) and out.shape == res.shape:
        if not np.can_cast(res.dtype, out.dtype, "same_kind"):
            raise TypeError(f"fft.{op}: cannot write the {res.dtype} result into out of "
                            f"dtype {out.dtype}")
        if out.device != res.device:
            raise RuntimeError(f"fft.{op}: out is on {out.device}, the result on {res.device}")
        if res.requires_grad and _array._is_grad_enabled():
            raise RuntimeError(f"fft.{op}: out= is not supported when an input requires grad "
                               f"(autograd records new arrays); drop out= or call it under "
                               f"ember.no_grad()")
    return _into_out(res, out, f"fft.{op}")
