"""NumPy's long tail of small array utilities: ``fromiter``, ``interp``, ``indices``,
``ndindex``, ``ndenumerate``, ``packbits`` / ``unpackbits`` and ``ndarray.flat``
(``flatiter``).  Each runs NumPy's routine on zero-copy views of host memory and
returns ember arrays.

>>> import ember
>>> ember.indices((2, 3)).shape
(2, 2, 3)
"""
import builtins

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._core.dtypes import _code, dtype_from_code, default_float_dtype, default_complex_dtype
from ember._core.dtypes import dtype_kind
from ember._api._util import as_array, numpy_view, empty_raw, shape_str
from ember._core.public import ops as _public_ops

__all__ = ["fromiter", "interp", "indices", "ndindex", "ndenumerate", "packbits", "unpackbits",
           "flatiter"]


def _copy(res):
    """A NumPy result in fresh ember memory."""
    res = np.asarray(res)
    out = empty_raw(res.shape, res.dtype)
    numpy_view(out)[...] = res
    return out


def _host(x, opname):
    """x's values as NumPy (a view of host memory; a copy of GPU memory)."""
    x = as_array(x)
    return _array._host_values(x)


def _dtype(dtype, opname):
    try:
        return dtype_from_code(_code(dtype))
    except TypeError as e:
        raise TypeError(f"{opname}: {e}") from None


def fromiter(iter, dtype, count=-1, *, like=None):
    """A 1-d array from an iterable (NumPy's ``fromiter``; ``dtype=float`` is float64).

    >>> import ember
    >>> ember.fromiter((i * i for i in range(4)), dtype=int).tolist()
    [0, 1, 4, 9]
    """
    if like is not None and not isinstance(like, ndarray) and \
            not hasattr(like, "__array_function__"):
        raise TypeError(f"fromiter: the `like` argument must be an array-like that implements "
                        f"the `__array_function__` protocol, got {type(like).__name__}")
    dt = _dtype(dtype, "fromiter")
    if getattr(iter, "ndim", 1) > 1 and hasattr(iter, "__array_namespace__"):
        # NumPy's rows of a 2-d array are sequences, not elements
        raise ValueError("fromiter: setting an array element with a sequence (the "
                         f"iterable is an array of shape {tuple(iter.shape)})")
    return _copy(np.fromiter(iter, dtype=dt, count=count))


def interp(x, xp, fp, left=None, right=None, period=None):
    """One-dimensional piecewise-linear interpolation (NumPy's ``interp``).

    NumPy computes in float64 (complex128 for complex `fp`); ember returns float64
    when an input is float64, else the default float dtype (complex likewise).
    Differentiable with respect to x (the segment's slope) and fp.

    >>> import ember
    >>> ember.interp(ember.asarray([0.5, 1.5]), ember.asarray([0.0, 1.0, 2.0]),
    ...              ember.asarray([0.0, 10.0, 0.0])).tolist()
    [5.0, 5.0]
    """
    for v, what in ((left, "left"), (right, "right")):
        if getattr(v, "ndim", 0) != 0:
            raise TypeError(f"interp: {what} must be a scalar, got an array of shape "
                            f"{shape_str(v.shape)} (only 0-d arrays convert to scalars)")
    arrays = [as_array(a) for a in (x, xp, fp)]
    for a, what in zip(arrays, ("x", "xp", "fp")):
        if dtype_kind(a.dtype) not in "biufc":
            raise TypeError(f"interp: {what} must be numeric, got {a.dtype}")
    if arrays[1].ndim != 1 or arrays[2].ndim != 1:
        raise ValueError(f"interp: xp and fp must be 1-d, got shapes {shape_str(arrays[1].shape)} "
                         f"and {shape_str(arrays[2].shape)}")
    if arrays[1].shape != arrays[2].shape:
        raise ValueError(f"interp: fp and xp are not of the same length "
                         f"({arrays[2].shape[0]} and {arrays[1].shape[0]})")
    wide = builtins.any(a.dtype in (np.float64, np.complex128) for a in arrays)
    cplx = dtype_kind(arrays[2].dtype) == "c"
    out_dt = (np.complex128 if wide else default_complex_dtype()) if cplx else \
        (np.float64 if wide else default_float_dtype())
    vals = [_host(a, "interp") for a in arrays]
    vals = [v.astype(np.float64) if v.dtype.kind in "fbiu" and v.dtype != np.float64
            else v for v in vals]
    res = np.interp(vals[0], vals[1], vals[2], left=left, right=right, period=period)
    res = np.asarray(res).astype(out_dt, copy=False)
    out = _copy(res)
    return out.to(arrays[0].device) if arrays[0].is_cuda else out


def indices(dimensions, dtype=int, sparse=False):
    """Arrays of each index along each axis of a grid of shape `dimensions` (NumPy's
    ``indices``); ``sparse=True`` gives a tuple of broadcastable arrays.

    >>> import ember
    >>> ember.indices((2, 2))[1].tolist()
    [[0, 1], [0, 1]]
    """
    dt = _dtype(dtype, "indices")
    res = np.indices(tuple(dimensions), dtype=dt, sparse=sparse)
    if sparse:
        return tuple(_copy(r) for r in res)
    return _copy(res)


ndindex = np.ndindex       # an iterator of index tuples: nothing array-valued in it


class ndenumerate:
    """Pairs of (index tuple, element) over an array in C order, as NumPy's
    ``ndenumerate`` (elements are NumPy scalars, as there).

    >>> import ember
    >>> [(i, int(v)) for i, v in ember.ndenumerate(ember.asarray([[1, 2]]))]
    [((0, 0), 1), ((0, 1), 2)]
    """

    def __init__(self, arr):
        self._it = np.ndenumerate(_host(arr, "ndenumerate"))

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)


def _bits_input(a, opname):
    a = as_array(a)
    if dtype_kind(a.dtype) not in "biu":
        raise TypeError(f"{opname}: expected an array of integer or boolean type, got {a.dtype}")
    return a


def packbits(a, /, axis=None, bitorder="big"):
    """Pack the elements of a boolean or integer array into bits of uint8 (NumPy's
    ``packbits``; axis=None packs the flattened array).

    >>> import ember
    >>> ember.packbits(ember.asarray([1, 0, 1, 1, 0, 0, 0, 1], dtype=ember.uint8)).tolist()
    [177]
    """
    a = _bits_input(a, "packbits")
    out = _copy(np.packbits(_host(a, "packbits"), axis=axis, bitorder=bitorder))
    return out.to(a.device) if a.is_cuda else out


def unpackbits(a, /, axis=None, count=None, bitorder="big"):
    """Unpack uint8 elements into bits (NumPy's ``unpackbits``).

    >>> import ember
    >>> ember.unpackbits(ember.asarray([177], dtype=ember.uint8)).tolist()
    [1, 0, 1, 1, 0, 0, 0, 1]
    """
    a = as_array(a)
    if a.dtype != np.uint8:
        raise TypeError(f"unpackbits: expected an input array of unsigned byte data type "
                        f"(uint8), got {a.dtype}")
    out = _copy(np.unpackbits(_host(a, "unpackbits"), axis=axis, count=count,
                              bitorder=bitorder))
    return out.to(a.device) if a.is_cuda else out


class flatiter:
    """``x.flat``: a flat (C-order) view of an array for iteration, indexing and
    assignment, as NumPy's ``flatiter``.  Reading gives ember arrays (an int index a
    0-d array); assignment writes into the array itself (values repeat to fill, as in
    NumPy), also when it is not contiguous.

    >>> import ember
    >>> x = ember.zeros((2, 3), dtype=int)
    >>> x.flat[[1, 4]] = 7; x.tolist()
    [[0, 7, 0], [0, 7, 0]]
    >>> x.T.flat[2].item()
    7
    """

    def __init__(self, base):
        self.base = base

    def __len__(self):
        return self.base.size

    def __repr__(self):
        return f"<ember.flatiter of an array of shape {shape_str(self.base.shape)}>"

    def _flat(self):
        ember = _public_ops()
        return ember.reshape(self.base, (-1,))       # a view when the strides allow

    def __iter__(self):
        return iter(self._flat())

    def __getitem__(self, key):
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        return self._flat()[key]

    def __setitem__(self, key, value):
        ember = _public_ops()
        x = self.base
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        if isinstance(key, ndarray):
            key = numpy_view(key) if not key.is_cuda else key.cpu().numpy()
        pos = np.arange(x.size, dtype=np.intp)[key]
        if isinstance(value, ndarray) or not np.isscalar(value):
            v = ember.reshape(as_array(value), (-1,))
            if v.size != pos.size:
                if v.size == 0:
                    if pos.size:
                        raise ValueError(f"flat: cannot assign an empty array to "
                                         f"{pos.size} elements")
                    return
                v = ember.take(v, np.arange(pos.size) % v.size)
            value = ember.reshape(v, np.shape(pos))
        if np.size(pos) == 0:
            return
        if x.ndim == 0:
            x[...] = ember.reshape(as_array(value), (-1,))[-1] if np.ndim(pos) else value
        elif np.ndim(pos) == 0:
            x[np.unravel_index(int(pos), x.shape)] = value
        else:
            x[np.unravel_index(pos, x.shape)] = value

    def __array__(self, dtype=None, copy=None):
        res = np.asarray(self._flat())
        return res if dtype is None else res.astype(dtype)

    def copy(self):
        """A flattened copy of the array."""
        return self._flat().copy()


def _flatiter(x):
    return flatiter(x)
