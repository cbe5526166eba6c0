"""Small helpers shared by the API modules."""
import operator

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray

wrap = _array._wrap          # NumPy array / array-like -> ember array (zero-copy when possible)
numpy_view = _array._numpy   # ember array -> NumPy view of the same memory (no copy)
empty_raw = _array._empty    # (shape, dtype) -> uninitialised C-contiguous ember array


def as_array(x):
    """ember array from anything array-like (no copy for ember / NumPy arrays)."""
    return x if isinstance(x, ndarray) else wrap(x)


def pick_axis(axis, dim, opname):
    """Resolve NumPy's ``axis=`` and PyTorch's ``dim=`` alias (only one may be given)."""
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{opname}: pass either axis= or dim=, not both")
        return dim
    return axis


def norm_axis_args(axis, dim, keepdims, keepdim, opname):
    """(axis, keepdims) from NumPy's ``axis=``/``keepdims=`` or PyTorch's
    ``dim=``/``keepdim=`` aliases (at most one of each pair)."""
    axis = pick_axis(axis, dim, opname)
    return axis, bool(keepdims if keepdim is None else keepdim)


def matrix_axes(axis, opname):
    """A pair of axes (a matrix op's ``axis=``/``dim=``) as a tuple of two ints."""
    if not isinstance(axis, (tuple, list)) or len(axis) != 2:
        raise ValueError(f"{opname}: axis (dim) must be a pair of axes, got {axis!r}")
    return tuple(operator.index(a) for a in axis)


def normalize_axis(axis, ndim, opname):
    """One axis -> non-negative int, with a NumPy-style AxisError."""
    if type(axis) is int and -ndim <= axis < ndim:
        return axis + ndim if axis < 0 else axis
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{opname}: axis must be an integer, got {type(axis).__name__}") from None
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise np.exceptions.AxisError(
            f"{opname}: axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def normalize_axis_tuple(axis, ndim, opname, allow_duplicates=False):
    """None / int / sequence of ints -> tuple of non-negative axes (None = all)."""
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is int and -ndim <= axis < ndim:      # the common case, fast
        return (axis + ndim if axis < 0 else axis,)
    if isinstance(axis, (list, tuple)):
        axes = tuple(normalize_axis(a, ndim, opname) for a in axis)
    else:
        axes = (normalize_axis(axis, ndim, opname),)
    if not allow_duplicates and len(set(axes)) != len(axes):
        raise ValueError(f"{opname}: repeated axis in {axis!r}")
    return axes


def shape_str(shape):
    return str(tuple(shape)).replace(" ", "")


def into_out(res, out, opname):
    """res, or res written into `out` (an ember array of res's shape) and `out`.

    >>> import ember
    >>> from ember._api._util import into_out
    >>> o = ember.zeros(2); into_out(ember.ones(2), o, "op") is o, o.tolist()
    (True, [1.0, 1.0])
    """
    if out is None:
        return res
    if not isinstance(out, ndarray):
        raise TypeError(f"{opname}: out must be an ember array, got {type(out).__name__}")
    if out.shape != res.shape:
        raise ValueError(f"{opname}: output array has shape {shape_str(out.shape)}, expected "
                         f"{shape_str(res.shape)}")
    out[...] = res
    return out
