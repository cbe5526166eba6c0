"""Small pure-Python helpers shared by every layer above the core (the API modules,
the GPU backend, nn): axis and shape arguments, ``out=``, C strides.

``ember._api._util`` re-exports them for the API modules.
"""
import builtins
import operator

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._core.dtypes import default_float_dtype, dtype_kind

wrap = _array._wrap          # NumPy array / array-like -> ember array (zero-copy when possible)
numpy_view = _array._numpy   # ember array -> NumPy view of the same memory (no copy)
empty_raw = _array._empty    # (shape, dtype) -> uninitialised C-contiguous ember array

__all__ = ["can_cast_same_kind", "check_order", "wrap", "numpy_view", "empty_raw", "as_array", "np_of", "pick_axis", "norm_axis_args",
           "matrix_axes", "normalize_axis", "normalize_axis_tuple", "c_strides",
           "float_draw_dtype", "check_index_add", "shape_str", "into_out"]


def as_array(x):
    """ember array from anything array-like (no copy for ember / NumPy arrays)."""
    return x if isinstance(x, ndarray) else wrap(x)


def np_of(x):
    """NumPy view of x's memory; x may be any array-like."""
    return numpy_view(as_array(x))


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
    if isinstance(axis, (builtins.bool, np.bool_)):
        raise TypeError(f"{opname}: axis must be an integer, not a bool")
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


def c_strides(shape, itemsize):
    """The strides of a C-contiguous array of `shape` (sizes 0 count as 1).

    >>> c_strides((2, 3), 4)
    (12, 4)
    """
    strides, st = [], itemsize
    for s in reversed(shape):
        strides.append(st)
        st *= builtins.max(s, 1)
    return tuple(reversed(strides))


def float_draw_dtype(dtype):
    """The floating dtype of a random draw (None: the default float dtype); the host
    generators (ember.random) and the GPU's (ember.cuda.ops_random) share the rule.

    >>> float_draw_dtype("float64")
    dtype('float64')
    """
    dt = np.dtype(default_float_dtype() if dtype is None else dtype)
    if dtype_kind(dt) != "f":
        raise TypeError(f"random: dtype must be a floating dtype, got {dt}")
    return dt


def check_index_add(x, ax, idx, src):
    """index_add's argument checks (idx: the index array of either device)."""
    if idx.ndim > 1:
        raise ValueError(f"index_add: index must be 1-dimensional, got shape {shape_str(idx.shape)}")
    if dtype_kind(idx.dtype) not in "iu" and idx.size:
        raise IndexError(f"index_add: index must hold integers, got dtype {idx.dtype}")
    n = idx.size
    expected = x.shape[:ax] + (n,) + x.shape[ax + 1:] if x.ndim else (n,)
    if src.shape != expected and not (x.ndim == 0 and src.size == n):
        raise ValueError(f"index_add: source has shape {shape_str(src.shape)}, expected "
                         f"{shape_str(expected)} for x of shape {shape_str(x.shape)} and "
                         f"{n} indices along axis {ax}")
    if not np.can_cast(src.dtype, x.dtype, "same_kind"):
        raise TypeError(f"index_add: cannot add source of dtype {src.dtype} into x of dtype "
                        f"{x.dtype}")


def shape_str(shape):
    return str(tuple(shape)).replace(" ", "")


def into_out(res, out, opname):
    """res, or res written into `out` (an ember array of res's shape) and `out`.

    >>> import ember
    >>> from ember._core.util import into_out
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
    if not can_cast_same_kind(res.dtype, out.dtype):
        raise TypeError(f"{opname}: cannot cast the result from {res.dtype} to the output's "
                        f"dtype {out.dtype} with casting rule 'same_kind'")
    out[...] = res
    return out


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def can_cast_same_kind(src, dst):
    """NumPy's ``can_cast(src, dst, "same_kind")``, with bfloat16 a floating dtype.

    >>> import ember
    >>> from ember._core.util import can_cast_same_kind
    >>> can_cast_same_kind(ember.float64, ember.float16), can_cast_same_kind(ember.float32, ember.int64)
    (True, False)
    """
    src, dst = np.dtype(src), np.dtype(dst)
    ks, kd = dtype_kind(src), dtype_kind(dst)
    if ks == kd:
        return True
    if {ks, kd} == {"u", "i"}:          # unsigned to a wider signed type only
        return builtins.bool(np.can_cast(src, dst, "same_kind"))
    return _KIND_RANK.get(ks, 9) <= _KIND_RANK.get(kd, -1)


def check_order(order, opname, allowed="CFAK"):
    """NumPy's check of an ``order=`` argument: a str, one of `allowed` (or None).

    >>> from ember._core.util import check_order
    >>> check_order("K", "copy") is None
    True
    """
    if order is None:
        return
    if not isinstance(order, str):
        raise TypeError(f"{opname}: order must be str, not {type(order).__name__}")
    if order.upper() not in allowed or len(order) != 1:
        raise ValueError(f"{opname}: order must be one of {', '.join(map(repr, allowed))} "
                         f"(got {order!r})")
