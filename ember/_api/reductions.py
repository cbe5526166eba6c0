"""Reductions: sum, prod, mean, var/std, min/max, argmin/argmax, all/any,
cumulative sums and products, count_nonzero, logsumexp, and NumPy's long tail.

The kernels are Cython (ember/_kernels/cpu/reduce.pyx); complex min/max and
the NaN-aware/statistics long tail run NumPy on zero-copy views.  Every
function takes ``axis`` (None, int or tuple), ``keepdims`` and PyTorch's
``dim``/``keepdim`` aliases.
"""
import builtins
import operator
import sys as _sys

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._core.dtypes import _code, default_float_dtype, dtype_from_code
from ember._core import elementwise as _ew
from ember._kernels.cpu import reduce as _R
from ember._api._util import (as_array, numpy_view, wrap, empty_raw, normalize_axis, into_out,
                              normalize_axis_tuple, pick_axis, shape_str)
from ember._core.dtypes import dtype_kind, is_half_dtype, BFLOAT16
from ember._core.public import ops as _public_ops
from ember._core import gpu_hooks as _gpu_hooks

__all__ = ["sum", "prod", "mean", "var", "std", "min", "max", "amin", "amax", "argmin",
           "argmax", "all", "any", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod",
           "count_nonzero", "logsumexp", "nansum", "nanprod", "nanmean", "nanvar", "nanstd",
           "nanmax", "nanmin", "nanargmax", "nanargmin", "median", "nanmedian", "quantile",
           "percentile", "nanquantile", "nanpercentile", "diff", "average", "ptp"]

_SUM, _PROD, _MAX, _MIN = 0, 1, 2, 3
_NAMES = {_SUM: "sum", _PROD: "prod", _MAX: "max", _MIN: "min"}
_NP_NAMES = {_SUM: "add", _PROD: "multiply", _MAX: "maximum", _MIN: "minimum"}


def _axes(x, axis, dim, opname):
    axis = pick_axis(axis, dim, opname)
    axes = normalize_axis_tuple(axis, x.ndim, opname)
    return () if x.ndim == 0 else axes      # axis 0 / -1 of a 0-d array reduces nothing


def _keep(res, ndim, axes):
    """res (reduced axes removed, C-contiguous) viewed with length-1 axes put back."""
    shape, strides = [], []
    j = 0
    rs = res.strides
    for i in range(ndim):
        if i in axes:
            shape.append(1)
            strides.append(0)
        else:
            shape.append(res.shape[j])
            strides.append(rs[j])
            j += 1
    return _array._as_strided(res, tuple(shape), tuple(strides), _array._storage_offset_bytes(res))


def _finish(res, ndim, axes, keepdims, out, opname):
    if keepdims is None:        # NumPy reads keepdims as a C int: None is an error
        raise TypeError(f"{opname}: keepdims must be True or False, not None")
    if not isinstance(keepdims, builtins.bool) and not -2**31 <= operator.index(keepdims) < 2**31:
        raise OverflowError(f"{opname}: keepdims={keepdims} does not fit in a C int")
    if keepdims:
        res = _keep(res, ndim, axes)
    return into_out(res, out, opname)


def _sum_dtype(dt):
    if dtype_kind(dt) == "b" or dtype_kind(dt) == "i":
        return np.dtype(np.int64)
    if dtype_kind(dt) == "u":
        return np.dtype(np.uint64)
    return dt


def _numpy_reduce(x, rop, axes, dtype):
    npf = getattr(np, _NP_NAMES[rop])
    res = npf.reduce(numpy_view(x), axis=axes, dtype=dtype)
    return wrap(np.asarray(res))


def _sum_or_prod(x, axis, dtype, out, keepdims, dim, keepdim, rop):
    opname = _NAMES[rop]
    x = as_array(x)
    keepdims = keepdims if keepdim is None else keepdim
    axes = _axes(x, axis, dim, opname)
    if dtype is not None:
        dt = dtype_from_code(_code(dtype)) if dtype is not float else default_float_dtype()
        if dt != x.dtype:
            x = x.astype(dt)
        res_dt = dt
    else:
        res_dt = _sum_dtype(x.dtype)
    if dtype_kind(x.dtype) == "c":
        res = _numpy_reduce(x, rop, axes, res_dt)
    else:
        res = _R.reduce(x, rop, axes, _code(res_dt))
        if res is None:
            res = _numpy_reduce(x, rop, axes, res_dt)
    return _finish(res, x.ndim, axes, keepdims, out, opname)


def sum(x, /, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None,
        initial=np._NoValue, where=None):
    """Sum of elements over the given axes (pairwise summation for floats).

    Integer and bool inputs sum in int64 (uint64 for unsigned); float16 and bfloat16
    sum in float32 and return their own dtype.  ``initial=None`` is NumPy's "no
    initial value": an empty sum then raises, as NumPy's does.

    >>> import ember
    >>> x = ember.arange(6).reshape(2, 3)
    >>> x.sum().item(), ember.sum(x, axis=0).tolist(), x.sum(dim=1, keepdim=True).shape
    (15, [3, 5, 7], (2, 1))
    """
    if axis is None and dim is None and dtype is None and out is None and keepdims is False \
            and not keepdim and initial is np._NoValue and where is None and isinstance(x, ndarray):
        res = _R.sum_all_fast(x)
        if res is not None:
            return res
    if initial is not np._NoValue or where is not None:
        xa = as_array(x)
        kw = {}
        if initial is not np._NoValue:
            kw["initial"] = initial
        if where is not None:
            kw["where"] = numpy_view(as_array(where))
        res = wrap(np.asarray(np.sum(numpy_view(xa), axis=pick_axis(axis, dim, "sum"),
                                     dtype=dtype, keepdims=keepdims if keepdim is None else keepdim, **kw)))
        return res if out is None else _finish(res, res.ndim, (), False, out, "sum")
    return _sum_or_prod(x, axis, dtype, out, keepdims, dim, keepdim, _SUM)


def prod(x, /, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """Product of elements over the given axes (empty product is 1).

    >>> import ember
    >>> ember.prod(ember.asarray([[1, 2], [3, 4]]), axis=1).tolist()
    [2, 12]
    """
    return _sum_or_prod(x, axis, dtype, out, keepdims, dim, keepdim, _PROD)


def _float_dtype_for(dt):
    return default_float_dtype() if dtype_kind(dt) in "biu" else dt


def _count(x, axes):
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def mean(x, /, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """Arithmetic mean; integer inputs give the default float dtype (float32), summed
    in float64 as NumPy does.

    >>> import ember
    >>> ember.mean(ember.asarray([1, 2, 3, 4])).item()
    2.5
    """
    x = as_array(x)
    keepdims = keepdims if keepdim is None else keepdim
    axes = _axes(x, axis, dim, "mean")
    res_dt = dtype_from_code(_code(dtype)) if dtype is not None else _float_dtype_for(x.dtype)
    acc_dt = np.dtype(np.float32) if is_half_dtype(res_dt) else res_dt
    if dtype_kind(x.dtype) in "biu" and dtype_kind(acc_dt) == "f":
        # NumPy accumulates integer means in float64 (an integer sum could wrap around)
        s = _sum_or_prod(x, axes, np.float64 if dtype is None else acc_dt, None, False,
                         None, None, _SUM)
        s = s if s.dtype == acc_dt else s.astype(acc_dt)
    else:
        s = _sum_or_prod(x, axes, acc_dt, None, False, None, None, _SUM)
    n = _count(x, axes)
    if n == 0:
        with np.errstate(all="ignore"):
            res = _ew.call_binary(_ew._op_index("divide"), s, float("nan") if s.size else 1.0, None)
        res = wrap(np.full(s.shape, np.nan, dtype=acc_dt)) if s.size else res
    else:
        res = _ew.call_binary(_ew._op_index("divide"), s, n, None)
    if res.dtype != res_dt:
        res = res.astype(res_dt)
    return _finish(res, x.ndim, axes, keepdims, out, "mean")


def var(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
        dim=None, keepdim=None, mean=None):
    """Variance, ``sum(|x - mean|**2) / (N - correction)`` (``ddof`` is NumPy's name).

    ``mean=`` (NumPy's) is the mean to use instead of computing it: an array shaped
    as ``x.mean(axis, keepdims=True)`` would be (or broadcasting to it).

    >>> import ember
    >>> ember.var(ember.asarray([1.0, 2.0, 3.0, 4.0]), correction=1).item()
    1.6666666269302368
    """
    x = as_array(x)
    if mean is not None and dtype_kind(x.dtype) == "b" and dtype_kind(as_array(mean).dtype) == "b":
        raise TypeError("var: bool x with a bool mean= (NumPy's boolean subtract is not "
                        "supported); pass a float mean")
    if correction is not None:
        if ddof not in (0, None) and ddof != correction:
            raise ValueError("var: ddof and correction cannot both be given")
        ddof = correction
    keepdims = keepdims if keepdim is None else keepdim
    axes = _axes(x, axis, dim, "var")
    dt = dtype_from_code(_code(dtype)) if dtype is not None else _float_dtype_for(x.dtype)
    xf = x if x.dtype == dt else x.astype(dt)
    if mean is None:
        m = globals()["mean"](xf, axis=axes, keepdims=True)
    else:
        m = _given_mean(mean, x, axes, "var")
    d = xf - m
    if dtype_kind(d.dtype) == "c":
        from ember._api.elementwise import real, imag
        sq = real(d) * real(d) + imag(d) * imag(d)
    else:
        sq = d * d
    s = sum(sq, axis=axes)
    n = _count(x, axes) - ddof
    with np.errstate(all="ignore"):
        res = _ew.call_binary(_ew._op_index("divide"), s, builtins.max(n, 0), None)
    return _finish(res, x.ndim, axes, keepdims, out, "var")


def _given_mean(mean, x, axes, opname):
    """var/std's ``mean=``: an array (or number) that broadcasts to x's reduced shape."""
    if not isinstance(mean, (ndarray, builtins.int, builtins.float, builtins.complex,
                             np.ndarray, np.generic)):
        raise TypeError(f"{opname}: mean= must be an array or a number, got "
                        f"{type(mean).__name__}")
    if type(mean) is builtins.int and dtype_kind(x.dtype) in "iu":
        np.asarray(mean, dtype=x.dtype)     # NumPy subtracts a Python int in x's dtype
    m = as_array(mean)
    kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    try:
        if np.broadcast_shapes(m.shape, kept) != kept:
            raise ValueError
    except ValueError:
        raise ValueError(f"{opname}: mean= of shape {shape_str(m.shape)} does not match the "
                         f"reduced shape {shape_str(kept)} of x {shape_str(x.shape)}") from None
    return m


def std(x, /, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
        dim=None, keepdim=None, mean=None):
    """Standard deviation, the square root of ``var``.

    >>> import ember
    >>> round(ember.std(ember.asarray([1.0, 3.0])).item(), 6)
    1.0
    """
    v = var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, correction=correction,
            dim=dim, keepdim=keepdim, mean=mean)
    res = _ew.call_unary(_ew._op_index("sqrt"), v, None)
    return _finish(res, res.ndim, (), False, out, "std")


def _minmax(x, axis, out, keepdims, dim, keepdim, initial, where, rop):
    opname = _NAMES[rop]
    x = as_array(x)
    keepdims = keepdims if keepdim is None else keepdim
    axes = _axes(x, axis, dim, opname)
    if where is not None or initial is not None:
        npf = np.max if rop == _MAX else np.min
        kw = {"initial": initial} if initial is not None else {}
        if where is not None:
            kw["where"] = numpy_view(as_array(where))
        res = wrap(np.asarray(npf(numpy_view(x), axis=axes, keepdims=keepdims, **kw)))
        return res if out is None else _finish(res, res.ndim, (), False, out, opname)
    if _count(x, axes) == 0 and x.size == 0:
        out_size = 1
        for i in range(x.ndim):
            if i not in axes:
                out_size *= x.shape[i]
        if out_size or not axes:
            full = "maximum" if rop == _MAX else "minimum"
            raise ValueError(f"{opname}: zero-size array to reduction operation {full} "
                             f"which has no identity (shape {x.shape}, axis {axis})")
    if dtype_kind(x.dtype) == "c":
        res = _numpy_reduce(x, rop, axes, None)
    else:
        res = _R.reduce(x, rop, axes, _code(x.dtype))
        if res is None:
            res = _numpy_reduce(x, rop, axes, None)
    return _finish(res, x.ndim, axes, keepdims, out, opname)


def max(x, /, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None, initial=None,
        where=None):
    """Largest element over the given axes (NaN propagates).

    Returns one array, as NumPy does (use ``argmax`` for the indices).

    >>> import ember
    >>> ember.max(ember.asarray([[1, 5], [7, 2]]), axis=0).tolist()
    [7, 5]
    """
    return _minmax(x, axis, out, keepdims, dim, keepdim, initial, where, _MAX)


def min(x, /, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None, initial=None,
        where=None):
    """Smallest element over the given axes (NaN propagates).

    >>> import ember
    >>> ember.min(ember.asarray([3.0, -1.0, 2.0])).item()
    -1.0
    """
    return _minmax(x, axis, out, keepdims, dim, keepdim, initial, where, _MIN)


amax = max
amin = min


def _arg(x, axis, out, keepdims, dim, keepdim, is_max):
    opname = "argmax" if is_max else "argmin"
    x = as_array(x)
    if isinstance(out, ndarray) and not np.can_cast(out.dtype, np.int64, "safe"):
        # NumPy's rule: out must cast safely to the index type (int8..int64, uint8..32, bool)
        raise TypeError(f"{opname}: out of dtype {out.dtype} cannot hold int64 indices "
                        f"(cast from it to int64 under 'safe')")
    axis = pick_axis(axis, dim, opname)
    keepdims = keepdims if keepdim is None else keepdim
    if axis is None:
        if x.size == 0:
            raise ValueError(f"{opname}: attempt to get {opname} of an empty sequence")
        flat = x if x.is_contiguous() else x.copy()
        flat = _array._as_strided(flat, (flat.size,), (flat.itemsize,),
                                  _array._storage_offset_bytes(flat))
        res = _R.arg_reduce(flat, 0, is_max)
        if res is None:
            res = wrap(np.asarray(getattr(np, opname)(numpy_view(flat))))
        if keepdims:
            res = _array._as_strided(res, (1,) * x.ndim, (0,) * x.ndim, _array._storage_offset_bytes(res))
        return _finish(res, res.ndim, (), False, out, opname)
    ax = normalize_axis(axis, x.ndim, opname)
    if x.shape[ax] == 0 if x.ndim else False:
        raise ValueError(f"{opname}: attempt to get {opname} of an empty sequence (axis {axis} "
                         f"of shape {x.shape} has length 0)")
    if x.ndim == 0:
        res = wrap(np.asarray(0, dtype=np.int64))
        return _finish(res, 0, (), False, out, opname)
    res = _R.arg_reduce(x, ax, is_max)
    if res is None:
        res = wrap(np.asarray(getattr(np, opname)(numpy_view(x), axis=ax)))
    return _finish(res, x.ndim, (ax,), keepdims, out, opname)


def argmax(x, /, axis=None, out=None, *, keepdims=False, dim=None, keepdim=None):
    """Index of the largest element (first occurrence; a NaN counts as largest).

    >>> import ember
    >>> ember.argmax(ember.asarray([[1, 9], [9, 2]]), axis=1).tolist()
    [1, 0]
    """
    return _arg(x, axis, out, keepdims, dim, keepdim, True)


def argmin(x, /, axis=None, out=None, *, keepdims=False, dim=None, keepdim=None):
    """Index of the smallest element (first occurrence; a NaN counts as smallest).

    >>> import ember
    >>> ember.argmin(ember.asarray([3, 1, 1])).item()
    1
    """
    return _arg(x, axis, out, keepdims, dim, keepdim, False)


def _bool_reduce(x, axis, out, keepdims, dim, keepdim, rop, opname):
    x = as_array(x)
    keepdims = keepdims if keepdim is None else keepdim
    axes = _axes(x, axis, dim, opname)
    b = x if x.dtype == np.bool_ else x.astype(np.bool_)
    res = _R.reduce(b, rop, axes, -1)
    return _finish(res, x.ndim, axes, keepdims, out, opname)


def all(x, /, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """True where every element along the axes is nonzero (empty -> True).

    >>> import ember
    >>> ember.all(ember.asarray([[True, False], [True, True]]), axis=1).tolist()
    [False, True]
    """
    return _bool_reduce(x, axis, out, keepdims, dim, keepdim, _MIN, "all")


def any(x, /, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    """True where any element along the axes is nonzero (empty -> False).

    >>> import ember
    >>> ember.any(ember.asarray([0, 0, 3])).item()
    True
    """
    return _bool_reduce(x, axis, out, keepdims, dim, keepdim, _MAX, "any")


def _cumulative(x, axis, dtype, out, dim, is_prod, opname, include_initial=False, flatten_none=True):
    x = as_array(x)
    axis = pick_axis(axis, dim, opname)
    if axis is None:
        if not flatten_none and x.ndim > 1:
            raise ValueError(f"{opname}: axis must be given for arrays with more than one "
                             f"dimension (got shape {x.shape})")
        flat = x if x.is_contiguous() else x.copy()
        x = _array._as_strided(flat, (flat.size,), (flat.itemsize,), _array._storage_offset_bytes(flat))
        ax = 0
    elif x.ndim == 0:
        raise ValueError(f"{opname}: cannot accumulate a 0-d array along an axis")
    else:
        ax = normalize_axis(axis, x.ndim, opname)
    res_dt = dtype_from_code(_code(dtype)) if dtype is not None else _sum_dtype(x.dtype)
    acc_dt = np.dtype(np.float32) if is_half_dtype(res_dt) else res_dt
    if dtype_kind(acc_dt) in "biu":
        acc_dt = _sum_dtype(acc_dt)
    res = None
    if dtype_kind(acc_dt) != "c":
        res = _R.cumulative(x, ax, is_prod, _code(acc_dt))
    if res is None:
        npf = np.cumprod if is_prod else np.cumsum
        res = wrap(np.asarray(npf(numpy_view(x), axis=ax, dtype=acc_dt)))
    if res.dtype != res_dt:
        res = res.astype(res_dt)
    if include_initial:
        shape = list(res.shape)
        shape[ax] += 1
        full = empty_raw(tuple(shape), res.dtype)
        fv = numpy_view(full)
        idx0 = [slice(None)] * len(shape)
        idx0[ax] = slice(0, 1)
        fv[tuple(idx0)] = 1 if is_prod else 0
        idx0[ax] = slice(1, None)
        fv[tuple(idx0)] = numpy_view(res)
        res = full
    if out is not None:
        return _finish(res, res.ndim, (), False, out, opname)
    return res


def cumsum(x, /, axis=None, dtype=None, out=None, *, dim=None):
    """Running sum along `axis` (the flattened array when axis is None).

    >>> import ember
    >>> ember.cumsum(ember.asarray([1, 2, 3])).tolist()
    [1, 3, 6]
    """
    return _cumulative(x, axis, dtype, out, dim, False, "cumsum")


def cumprod(x, /, axis=None, dtype=None, out=None, *, dim=None):
    """Running product along `axis` (the flattened array when axis is None).

    >>> import ember
    >>> ember.cumprod(ember.asarray([1, 2, 3])).tolist()
    [1, 2, 6]
    """
    return _cumulative(x, axis, dtype, out, dim, True, "cumprod")


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False, out=None, dim=None):
    """Array API running sum; ``include_initial`` prepends the zero.

    >>> import ember
    >>> ember.cumulative_sum(ember.asarray([1, 2]), include_initial=True).tolist()
    [0, 1, 3]
    """
    return _cumulative(x, axis, dtype, out, dim, False, "cumulative_sum", include_initial, False)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False, out=None, dim=None):
    """Array API running product; ``include_initial`` prepends the one.

    >>> import ember
    >>> ember.cumulative_prod(ember.asarray([2, 3]), include_initial=True).tolist()
    [1, 2, 6]
    """
    return _cumulative(x, axis, dtype, out, dim, True, "cumulative_prod", include_initial, False)


def count_nonzero(x, /, axis=None, *, keepdims=False, dim=None, keepdim=None):
    """Number of nonzero elements over the axes (int64).

    >>> import ember
    >>> ember.count_nonzero(ember.asarray([[0, 1], [2, 0]]), axis=0).tolist()
    [1, 1]
    """
    x = as_array(x)
    b = x if x.dtype == np.bool_ else x.astype(np.bool_)
    res = sum(b, axis=axis, keepdims=keepdims, dim=dim, keepdim=keepdim)
    return res


def logsumexp(x, /, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """``log(sum(exp(x)))`` computed stably (the max is subtracted first).

    >>> import ember
    >>> round(ember.logsumexp(ember.asarray([0.0, 0.0])).item(), 6)
    0.693147
    """
    ember = _public_ops()
    x = as_array(x)
    keepdims = keepdims if keepdim is None else keepdim
    axes = _axes(x, axis, dim, "logsumexp")
    if dtype_kind(x.dtype) in "biu":
        x = x.astype(default_float_dtype())
    if x.size == 0:
        res = ember.full(tuple(s for i, s in enumerate(x.shape) if i not in axes), float("-inf"),
                         dtype=x.dtype)
        return _keep(res, x.ndim, axes) if keepdims else res
    m = ember.max(x, axis=axes, keepdims=True)
    m = ember.where(ember.isfinite(m), m, 0).astype(x.dtype)
    s = ember.sum(ember.exp(x - m), axis=axes, keepdims=True)
    res = ember.log(s) + m
    if not keepdims:
        res = res.reshape(tuple(s for i, s in enumerate(x.shape) if i not in axes))
    return res


# built from ember ops, views and a fresh array: the GPU dispatch runs this same body
logsumexp.device_generic = True


# ---------------------------------------------------------------- NumPy's long tail

def _np_wrap(npfunc, name, takes_axis=True):
    def f(x, /, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kwargs):
        xa = as_array(x)
        kw = dict(kwargs)
        ax = pick_axis(axis, dim, name)
        if takes_axis and ax is not None:       # (an axis passed positionally is in args)
            kw["axis"] = ax
        kd = keepdims if keepdim is None else keepdim
        if kd is not None:
            kw["keepdims"] = kd
        if dtype_kind(xa.dtype) in "biu" and name in ("nanmean", "nanvar", "nanstd", "median", "nanmedian",
                                               "quantile", "percentile", "nanquantile",
                                               "nanpercentile", "average"):
            xa = xa.astype(default_float_dtype())
        narrow = None
        if xa.dtype == BFLOAT16:
            # ml_dtypes' loops would accumulate in bfloat16: compute in float32, round once
            narrow, xa = xa.dtype, xa.astype(np.float32)
        w = kw.get("where", True)
        if not isinstance(w, (builtins.bool, np.bool_, ndarray, np.ndarray, list, tuple)):
            raise TypeError(f"{name}: where= must be an array of bools, got {type(w).__name__}")
        args = tuple(numpy_view(as_array(a)) if isinstance(a, ndarray) else a for a in args)
        kw = {k: (numpy_view(v) if isinstance(v, ndarray) else v) for k, v in kw.items()}
        res = npfunc(numpy_view(xa), *args, **kw)

        def back(r):
            r = np.asarray(r)
            return wrap(r.astype(narrow) if narrow is not None and r.dtype == np.float32 else r)
        if isinstance(res, tuple):
            return tuple(back(r) for r in res)
        return back(res)
    f.__name__ = name
    f.__doc__ = (f"ember.{name}: NumPy's ``{name}`` run on ember memory (zero-copy input).\n\n"
                 f"    >>> import ember\n    >>> ember.{name}(ember.asarray([1.0, 2.0, 3.0])).ndim <= 1\n    True\n")
    return f


nansum = _np_wrap(np.nansum, "nansum")
nanprod = _np_wrap(np.nanprod, "nanprod")
nanmean = _np_wrap(np.nanmean, "nanmean")
nanvar = _np_wrap(np.nanvar, "nanvar")
nanstd = _np_wrap(np.nanstd, "nanstd")
nanmax = _np_wrap(np.nanmax, "nanmax")
nanmin = _np_wrap(np.nanmin, "nanmin")
nanargmax = _np_wrap(np.nanargmax, "nanargmax")
nanargmin = _np_wrap(np.nanargmin, "nanargmin")
median = _np_wrap(np.median, "median")
nanmedian = _np_wrap(np.nanmedian, "nanmedian")
ptp = _np_wrap(np.ptp, "ptp")
average = _np_wrap(np.average, "average")


def _no_bool_quantile(x, opname):
    """NumPy's quantiles refuse bool input (their interpolation subtracts)."""
    if dtype_kind(as_array(x).dtype) == "b":
        raise TypeError(f"{opname}: bool input is not supported (NumPy's boolean subtract); "
                        f"cast it to a number first")


def quantile(x, /, q, axis=None, *, method="linear", keepdims=False, dim=None, keepdim=None):
    """q-th quantile(s) along the axis (NumPy's methods).

    >>> import ember
    >>> ember.quantile(ember.asarray([1.0, 2.0, 3.0]), 0.5).item()
    2.0
    """
    _no_bool_quantile(x, "quantile")
    return _np_wrap(np.quantile, "quantile")(x, q, axis=axis, dim=dim, method=method,
                                             keepdims=keepdims if keepdim is None else keepdim)


def percentile(x, /, q, axis=None, *, method="linear", keepdims=False, dim=None, keepdim=None):
    """q-th percentile(s) along the axis.

    >>> import ember
    >>> ember.percentile(ember.asarray([1.0, 2.0, 3.0]), 50).item()
    2.0
    """
    _no_bool_quantile(x, "percentile")
    return _np_wrap(np.percentile, "percentile")(x, q, axis=axis, dim=dim, method=method,
                                                 keepdims=keepdims if keepdim is None else keepdim)


def nanquantile(x, /, q, axis=None, *, method="linear", keepdims=False):
    """quantile ignoring NaNs.

    >>> import ember
    >>> ember.nanquantile(ember.asarray([1.0, float('nan'), 3.0]), 0.5).item()
    2.0
    """
    _no_bool_quantile(x, "nanquantile")
    return _np_wrap(np.nanquantile, "nanquantile")(x, q, axis=axis, method=method, keepdims=keepdims)


def nanpercentile(x, /, q, axis=None, *, method="linear", keepdims=False):
    """percentile ignoring NaNs.

    >>> import ember
    >>> ember.nanpercentile(ember.asarray([1.0, float('nan'), 3.0]), 50).item()
    2.0
    """
    _no_bool_quantile(x, "nanpercentile")
    return _np_wrap(np.nanpercentile, "nanpercentile")(x, q, axis=axis, method=method, keepdims=keepdims)


def diff(x, /, n=1, axis=-1, prepend=None, append=None, *, dim=None):
    """n-th discrete difference along the axis.

    >>> import ember
    >>> ember.diff(ember.asarray([1, 4, 9])).tolist()
    [3, 5]
    """
    kw = {}
    # None is "left out", as PyTorch's diff reads it (NumPy would try to put None there)
    for name, v in (("prepend", prepend), ("append", append)):
        if v is not None:
            kw[name] = numpy_view(as_array(v)) if isinstance(v, ndarray) else v
    ax = pick_axis(axis if dim is None else None, dim, "diff")
    a = numpy_view(as_array(x))
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 1 and a.ndim:
        # NumPy loops n times even once the axis is empty (n=10**12 never returns); past
        # the axis' length every further difference is the same empty array
        a = np.diff(a, n=1, axis=ax, **kw)
        n, kw = builtins.min(int(n) - 1, a.shape[ax]), {}
    return wrap(np.asarray(np.diff(a, n=n, axis=ax, **kw)))


# the GPU backend builds the GPU form of each function here from it (ember.cuda.ops_reduce,
# which never imports this layer)
_gpu_hooks.provide_host_functions("reductions", _sys.modules[__name__])
