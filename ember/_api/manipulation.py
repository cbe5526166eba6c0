"""Shape manipulation: reshape, transpose, stacking, splitting, tiling, padding.

Reshape, transpose, expand/squeeze, flip, broadcast_to, moveaxis, split,
unstack, rot90 and dtype views return views that share storage (and the
version counter) with their input: reshape whenever the strides allow it, as
NumPy decides.  Joining, tiling, repeating and rolling allocate one fresh
ember array and fill it with ember's broadcast-and-cast copy kernel
(``_assign``) on views of it; only per-element ``repeat`` counts and ``pad``
run NumPy on zero-copy views.
"""
import builtins
import collections.abc
import itertools
import math
import operator
import os

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._core.dtypes import _code, dtype_from_code, promote_codes
from ember._core.elementwise import _assign
from ember._api._util import as_array, numpy_view, empty_raw, shape_str, c_strides
from ember._core.dtypes import dtype_kind

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["reshape", "transpose", "permute_dims", "permute", "moveaxis", "swapaxes",
           "expand_dims", "unsqueeze", "squeeze", "flip", "fliplr", "flipud", "rot90", "roll",
           "concatenate", "concat", "cat", "stack", "unstack", "hstack", "vstack", "dstack",
           "column_stack", "split", "array_split", "hsplit", "vsplit", "dsplit", "tile",
           "repeat", "broadcast_to", "broadcast_arrays", "broadcast_shapes", "ravel", "flatten",
           "pad", "atleast_1d", "atleast_2d", "atleast_3d", "resize", "trim_zeros"]

AxisError = np.exceptions.AxisError


# ---------------------------------------------------------------- helpers

def _axis(axis, ndim, opname):
    """One axis -> non-negative int; NumPy's AxisError when out of range (also on 0-d)."""
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{opname}: axis must be an integer, got {type(axis).__name__}") from None
    if not -ndim <= a < ndim:
        raise AxisError(f"{opname}: axis {a} is out of bounds for array of dimension {ndim}")
    return a % ndim


def _axes(axis, ndim, opname, argname="axis"):
    """None / int / sequence -> tuple of distinct non-negative axes (None = all)."""
    if axis is None:
        return tuple(range(ndim))
    seq = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(_axis(a, ndim, opname) for a in seq)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{opname}: repeated axis in {argname} {tuple(seq)}")
    return axes


def _pick(axis, dim, default, opname):
    """NumPy's ``axis=`` or PyTorch's ``dim=`` (not both)."""
    if dim is None:
        return axis
    if axis is not default:
        raise TypeError(f"{opname}: pass either axis= or dim=, not both")
    return dim


def _offset(x):
    return _array._storage_offset_bytes(x)


def _view(x, shape, strides, offset=None, dtype=None):
    """A view of x's storage (strides and offset in bytes)."""
    return _array._as_strided(x, tuple(shape), tuple(strides),
                              _offset(x) if offset is None else offset, dtype)


def _shape_arg(shape, opname):
    if isinstance(shape, (ndarray, np.ndarray)):
        if dtype_kind(shape.dtype) not in "iu":
            raise TypeError(f"{opname}: a shape array must hold integers, got {shape.dtype}")
        shape = shape.tolist()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not isinstance(shape, (collections.abc.Sequence, np.ndarray)):
        # NumPy takes sequences only: a dict, set or generator is a TypeError
        raise TypeError(f"{opname}: shape must be an int or a sequence of ints, got "
                        f"{type(shape).__name__} {_short_repr(shape)}")
    if builtins.any(isinstance(s, (builtins.bool, np.bool_)) for s in shape):
        raise TypeError(f"{opname}: shape must hold integers, got a bool in {_short_repr(shape)}")
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{opname}: shape must be an int or a sequence of ints, "
                        f"got {shape!r}") from None


def _short_repr(v):
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _shapes(arrays):
    return " ".join(shape_str(a.shape) for a in arrays)


def _fill(dst, src):
    """dst[...] = src (broadcast + cast) without touching dst's version counter."""
    _assign(dst, src)


def _new_like(x, shape=None, dtype=None):
    return empty_raw(x.shape if shape is None else tuple(shape), x.dtype if dtype is None else dtype)


def _copy_of(np_arr):
    """A NumPy result copied into fresh ember memory."""
    np_arr = np.asarray(np_arr)
    out = empty_raw(np_arr.shape, np_arr.dtype)
    numpy_view(out)[...] = np_arr
    return out


def _is_f_contig(x):
    expected = x.itemsize
    for s, st in zip(x.shape, x.strides):
        if s == 0:
            return True
        if s != 1:
            if st != expected:
                return False
            expected *= s
    return True


# ---------------------------------------------------------------- reshape

def _infer_shape(shape, size, opname):
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ValueError(f"{opname}: can only specify one unknown dimension (-1), "
                         f"got shape {shape_str(shape)}")
    if builtins.any(s < -1 for s in shape):
        raise ValueError(f"{opname}: negative dimensions are not allowed, got shape "
                         f"{shape_str(shape)}")
    if neg:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"{opname}: cannot reshape array of size {size} into shape "
                             f"{shape_str(shape)}")
        shape = shape[:neg[0]] + (size // known,) + shape[neg[0] + 1:]
    if math.prod(shape) != size:
        raise ValueError(f"{opname}: cannot reshape array of size {size} into shape "
                         f"{shape_str(shape)}")
    return shape


def _nocopy_strides(old_shape, old_strides, new_shape, itemsize):
    """Strides that give new_shape as a view of the old (C-order) layout, or None.

    Runs of old axes that are contiguous with each other (stride[k] ==
    stride[k+1] * shape[k+1]) may be split and merged freely; a new axis may
    not straddle a break between such runs.
    """
    if math.prod(new_shape) == 0:
        return c_strides(new_shape, itemsize)
    olds = [(s, st) for s, st in zip(old_shape, old_strides) if s != 1]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(olds):
        while new_shape[ni] == 1:     # a length-1 new axis: any stride
            ni += 1
        nprod, oprod = new_shape[ni], olds[oi][0]
        oj, nj = oi, ni
        while nprod != oprod:         # grow the group until both sides hold the same count
            if nprod < oprod:
                nj += 1
                nprod *= new_shape[nj]
            else:
                oj += 1
                oprod *= olds[oj][0]
        for k in range(oi, oj):       # the old axes of a group must be mutually contiguous
            if olds[k][1] != olds[k + 1][1] * olds[k + 1][0]:
                return None
        new_strides[nj] = olds[oj][1]
        for k in range(nj, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        oi, ni = oj + 1, nj + 1
    return tuple(new_strides)


def _fast_shape(shape, size):
    """The shape (with -1 resolved) when it is a valid int / tuple of ints, else None."""
    if type(shape) is int:
        shape = (shape,)
    elif type(shape) is not tuple:
        return None
    n = 1
    neg = -1
    for i, s in enumerate(shape):
        if type(s) is not int:
            return None
        if s < 0:
            if s != -1 or neg >= 0:
                return None
            neg = i
        else:
            n *= s
    if neg >= 0:
        if n == 0 or size % n:
            return None
        return shape[:neg] + (size // n,) + shape[neg + 1:]
    return shape if n == size else None


_as_strided = _array._as_strided


def reshape(x, /, shape, *, order="C", copy=None):
    """A view with a new shape when the strides allow it (as NumPy decides), else a copy.

    One dimension may be -1 (inferred).  ``copy=True`` always copies;
    ``copy=False`` raises ValueError when a view is impossible.  ``order='F'``
    reads and writes the elements in column-major order.

    >>> import ember
    >>> x = ember.arange(6)
    >>> y = x.reshape(2, 3); y[0, 0] = 9; x[0].item()
    9
    """
    if not isinstance(x, ndarray):
        x = as_array(x)
    if order == "C" and not copy and x.is_contiguous():
        new = _fast_shape(shape, x.size)
        if new is not None:      # the common case: a contiguous input, a valid int shape
            st = x.itemsize
            strides = [0] * len(new)
            for i in range(len(new) - 1, -1, -1):
                strides[i] = st
                if new[i]:
                    st *= new[i]
            return _as_strided(x, new, strides, _offset(x))
    shape = _infer_shape(_shape_arg(shape, "reshape"), x.size, "reshape")
    if order == "K":
        raise ValueError("reshape: order 'K' is not permitted for reshaping")
    if order == "A":
        order = "F" if (_is_f_contig(x) and not x.is_contiguous()) else "C"
    if order == "F":
        return transpose(reshape(transpose(x), shape[::-1], copy=copy))
    if order != "C":
        raise ValueError(f"reshape: order must be one of 'C', 'F', 'A', got {order!r}")
    strides = None if copy else _nocopy_strides(x.shape, x.strides, shape, x.itemsize)
    if strides is not None:
        return _view(x, shape, strides)
    if copy is False:
        raise ValueError(f"reshape: cannot reshape the array of shape {shape_str(x.shape)} "
                         f"(strides {x.strides}) into {shape_str(shape)} without copying "
                         f"(copy=False)")
    out = empty_raw(shape, x.dtype)
    if out.size:
        _fill(_view(out, x.shape, c_strides(x.shape, x.itemsize), 0), x)
    return out


def ravel(x, /, order="C"):
    """The elements as a 1-d array (a view when the layout allows it).

    >>> import ember
    >>> ember.ravel(ember.ones((2, 2))).shape
    (4,)
    """
    if order == "K":        # memory order: a Fortran-ordered array reads as order 'A'
        order = "A"
    return reshape(x, (-1,), order=order)


def flatten(x, /, start_dim=0, end_dim=-1):
    """PyTorch's ``flatten``: merge axes ``start_dim..end_dim`` into one (a view when possible).

    (The method ``x.flatten()`` is NumPy's: always a 1-d copy.)

    >>> import ember
    >>> ember.flatten(ember.zeros((2, 3, 4)), 1).shape
    (2, 12)
    """
    x = as_array(x)
    if x.ndim == 0:
        return reshape(x, (1,))
    s = _axis(start_dim, x.ndim, "flatten")
    e = _axis(end_dim, x.ndim, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return reshape(x, x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


# ---------------------------------------------------------------- axes

def permute_dims(x, /, axes):
    """A view with the axes permuted (``axes[i]`` is the input axis of output axis i).

    >>> import ember
    >>> ember.permute_dims(ember.zeros((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    if not isinstance(x, ndarray):
        x = as_array(x)
    if isinstance(axes, (ndarray, np.ndarray)) and axes.ndim == 1:
        if dtype_kind(axes.dtype) not in "iu":
            raise TypeError(f"permute_dims: axes must be integers, got an array of {axes.dtype}")
        axes = axes.tolist()        # its elements (NumPy iterates it)
    axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
    shape, strides = x.shape, x.strides
    if sorted(axes) == list(range(len(shape))) and builtins.all(type(a) is int for a in axes):
        return _as_strided(x, [shape[a] for a in axes], [strides[a] for a in axes], _offset(x))
    for a in axes:
        operator.index(a)           # NumPy's order: each an integer (TypeError), then the count
    if len(axes) != x.ndim:
        raise ValueError(f"permute_dims: axes {axes} don't match an array of {x.ndim} "
                         f"dimensions (shape {shape_str(x.shape)})")
    ax = _axes(axes, x.ndim, "permute_dims", "axes")
    return _view(x, [x.shape[a] for a in ax], [x.strides[a] for a in ax])


def transpose(x, /, axes=None):
    """Reverse the axes, or permute them as given (a view).

    >>> import ember
    >>> ember.transpose(ember.zeros((2, 3))).shape
    (3, 2)
    """
    if not isinstance(x, ndarray):
        x = as_array(x)
    if axes is None:
        return _as_strided(x, x.shape[::-1], x.strides[::-1], _offset(x))
    return permute_dims(x, axes)


def permute(x, /, *dims):
    """PyTorch's spelling of ``permute_dims`` (``permute(x, 1, 0)`` or ``permute(x, (1, 0))``).

    >>> import ember
    >>> ember.permute(ember.zeros((2, 3)), 1, 0).shape
    (3, 2)
    """
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return permute_dims(x, dims)


def moveaxis(x, /, source, destination):
    """Move axes to new positions; the other axes keep their order (a view).

    >>> import ember
    >>> ember.moveaxis(ember.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    x = as_array(x)
    src = _axes(source, x.ndim, "moveaxis", "source")
    dst = _axes(destination, x.ndim, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have "
                         f"the same number of elements")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, order)


def swapaxes(x, /, axis1, axis2):
    """Swap two axes (a view).

    >>> import ember
    >>> ember.swapaxes(ember.zeros((2, 3, 4)), 0, 2).shape
    (4, 3, 2)
    """
    x = as_array(x)
    a = _axis(axis1, x.ndim, "swapaxes")
    b = _axis(axis2, x.ndim, "swapaxes")
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return permute_dims(x, order)


def expand_dims(x, /, axis=0, *, dim=None):
    """Insert length-1 axes; ``axis`` names their positions in the result (a view).

    >>> import ember
    >>> ember.expand_dims(ember.zeros((2, 3)), axis=(0, -1)).shape
    (1, 2, 3, 1)
    """
    x = as_array(x)
    axis = _pick(axis, dim, 0, "expand_dims")
    seq = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = _axes(seq, x.ndim + len(seq), "expand_dims")
    shape, strides = list(x.shape), list(x.strides)
    for a in sorted(axes):
        shape.insert(a, 1)
        strides.insert(a, 0)
    return _view(x, shape, strides)


def unsqueeze(x, /, dim):
    """PyTorch's spelling of ``expand_dims`` with one axis.

    >>> import ember
    >>> ember.unsqueeze(ember.zeros(3), -1).shape
    (3, 1)
    """
    return expand_dims(x, dim)


def squeeze(x, /, axis=None, *, dim=None):
    """Remove length-1 axes: all of them, or those given (which must have length 1); a view.

    >>> import ember
    >>> ember.squeeze(ember.zeros((1, 3, 1)), axis=0).shape
    (3, 1)
    """
    x = as_array(x)
    axis = _pick(axis, dim, None, "squeeze")
    if axis is None:
        keep = [i for i in range(x.ndim) if x.shape[i] != 1]
    elif x.ndim == 0:
        for a in (axis if isinstance(axis, (tuple, list)) else (axis,)):
            if operator.index(a) not in (0, -1):
                raise AxisError(f"squeeze: axis {a} is out of bounds for array of dimension 0")
        keep = []
    else:
        axes = _axes(axis, x.ndim, "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size "
                                 f"not equal to one (axis {a} of shape {shape_str(x.shape)})")
        keep = [i for i in range(x.ndim) if i not in axes]
    return _view(x, [x.shape[i] for i in keep], [x.strides[i] for i in keep])


# ---------------------------------------------------------------- reversing, rotating

def flip(x, /, axis=None, *, dims=None):
    """Reverse the order of elements along the axes (all when None): a view with
    negative strides.

    >>> import ember
    >>> ember.flip(ember.arange(3)).tolist()
    [2, 1, 0]
    """
    x = as_array(x)
    axes = _axes(_pick(axis, dims, None, "flip"), x.ndim, "flip")
    shape, strides, off = x.shape, list(x.strides), _offset(x)
    for a in axes:
        if shape[a] > 0:
            off += (shape[a] - 1) * strides[a]
        strides[a] = -strides[a]
    return _view(x, shape, strides, off)


def fliplr(x, /):
    """Reverse the columns (axis 1; needs at least 2 dimensions); a view.

    >>> import ember
    >>> ember.fliplr(ember.asarray([[1, 2]])).tolist()
    [[2, 1]]
    """
    x = as_array(x)
    if x.ndim < 2:
        raise ValueError(f"fliplr: input must be at least 2-d, got shape {shape_str(x.shape)}")
    return flip(x, axis=1)


def flipud(x, /):
    """Reverse the rows (axis 0; needs at least 1 dimension); a view.

    >>> import ember
    >>> ember.flipud(ember.asarray([1, 2])).tolist()
    [2, 1]
    """
    x = as_array(x)
    if x.ndim < 1:
        raise ValueError("flipud: input must be at least 1-d, got a 0-d array")
    return flip(x, axis=0)


def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``axes``, from the first
    axis towards the second (a view).

    >>> import ember
    >>> ember.rot90(ember.asarray([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    x = as_array(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: len(axes) must be 2, got {axes}")
    if x.ndim < 2:
        raise ValueError(f"rot90: the array must have at least 2 dimensions, got shape "
                         f"{shape_str(x.shape)}")
    a0, a1 = _axis(axes[0], x.ndim, "rot90"), _axis(axes[1], x.ndim, "rot90")
    if a0 == a1:
        raise ValueError(f"rot90: axes must be different, got {axes}")
    k = operator.index(k) % 4
    if k == 0:
        return x[...]
    if k == 2:
        return flip(x, axis=(a0, a1))
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return permute_dims(flip(x, axis=a1), perm)
    return flip(permute_dims(x, perm), axis=a1)


def roll(x, /, shift, axis=None, *, dims=None):
    """Shift elements cyclically along the axes (the flattened array when axis is None).
    ``shift`` and ``axis`` may be tuples (broadcast against each other).

    >>> import ember
    >>> ember.roll(ember.arange(4), 1).tolist()
    [3, 0, 1, 2]
    """
    x = as_array(x)
    axis = _pick(axis, dims, None, "roll")
    if np.ndim(shift) > 1 or np.ndim(axis) > 1:
        raise ValueError("roll: shift and axis must be integers or 1-d sequences")
    if axis is not None:            # every axis is checked, even with nothing to shift
        for a in np.ravel(np.asarray(axis, dtype=object)):
            _axis(operator.index(a), x.ndim, "roll")
    if axis is None:
        s = builtins.sum(operator.index(v) for v in np.asarray(shift).ravel().tolist())
        return reshape(roll(ravel(x), s, axis=0), x.shape)
    try:
        pairs = np.broadcast(np.asarray(shift), np.asarray(axis))
    except ValueError:
        raise ValueError(f"roll: shift {shift!r} and axis {axis!r} could not be broadcast "
                         f"together") from None
    if pairs.nd > 1:
        raise ValueError("roll: shift and axis must be integers or 1-d sequences")
    total = [0] * x.ndim
    for s, a in pairs:
        total[_axis(int(a), x.ndim, "roll")] += operator.index(s)
    out = _new_like(x)
    if x.size == 0:
        return out
    pieces = []
    for a in range(x.ndim):
        n = x.shape[a]
        s = total[a] % n
        if s == 0:
            pieces.append([(slice(None), slice(None))])
        else:
            pieces.append([(slice(s, n), slice(0, n - s)), (slice(0, s), slice(n - s, n))])
    for combo in itertools.product(*pieces):
        _fill(out[tuple(d for d, _ in combo)], x[tuple(s for _, s in combo)])
    return out


# ---------------------------------------------------------------- joining

def _check_dtype(dtype, opname):
    if dtype is None:
        return None
    try:
        return dtype_from_code(_code(dtype))
    except TypeError as e:
        raise TypeError(f"{opname}: {e}") from None


def _result_dtype(arrays):
    code = _code(arrays[0].dtype)
    for a in arrays[1:]:
        code = promote_codes(code, _code(a.dtype))
    return dtype_from_code(code)


def concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind", dim=None):
    """Join arrays along an existing axis (``axis=None`` flattens them first).

    The result dtype is the promotion of the inputs' dtypes (or ``dtype`` /
    ``out``'s dtype, each input cast under ``casting``).

    >>> import ember
    >>> ember.concatenate([ember.zeros((1, 2)), ember.ones((2, 2))]).shape
    (3, 2)
    """
    axis = _pick(axis, dim, 0, "concatenate")
    if isinstance(arrays, ndarray):
        arrays = unstack(arrays) if arrays.ndim else [arrays]
    arrays = [as_array(a) for a in arrays]
    if not arrays:
        raise ValueError("concatenate: need at least one array to concatenate")
    if out is not None and dtype is not None:
        raise TypeError("concatenate: pass either out= or dtype=, not both")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    nd = arrays[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated, got "
                         "shapes " + _shapes(arrays))
    for a in arrays[1:]:
        if a.ndim != nd:
            raise ValueError("concatenate: all input arrays must have the same number of "
                             "dimensions, got shapes " + _shapes(arrays))
    ax = _axis(axis, nd, "concatenate")
    base = list(arrays[0].shape)
    for a in arrays[1:]:
        for i in range(nd):
            if i != ax and a.shape[i] != base[i]:
                raise ValueError(f"concatenate: all input array dimensions except for the "
                                 f"concatenation axis {ax} must match exactly, got shapes "
                                 + _shapes(arrays))
    base[ax] = builtins.sum(a.shape[ax] for a in arrays)
    shape = tuple(base)
    if out is not None:
        if not isinstance(out, ndarray):
            raise TypeError(f"concatenate: out must be an ember array, got {type(out).__name__}")
        if out.shape != shape:
            raise ValueError(f"concatenate: output array has shape {shape_str(out.shape)}, "
                             f"expected {shape_str(shape)}")
        target = out.dtype
    else:
        target = _check_dtype(dtype, "concatenate") or _result_dtype(arrays)
    for a in arrays:
        if not np.can_cast(a.dtype, target, casting):
            raise TypeError(f"concatenate: cannot cast array data from {a.dtype} to {target} "
                            f"according to the rule {casting!r}")
    result = empty_raw(shape, target) if out is None else out
    pre = (slice(None),) * ax
    start = 0
    for a in arrays:
        n = a.shape[ax]
        if n:
            _fill(result[pre + (slice(start, start + n),)], a)
        start += n
    if out is not None:
        out._bump_version()
    return result


def concat(arrays, /, *, axis=0, out=None, dtype=None, casting="same_kind", dim=None):
    """The Array API's name for ``concatenate``.

    >>> import ember
    >>> ember.concat([ember.ones(2), ember.zeros(1)]).tolist()
    [1.0, 1.0, 0.0]
    """
    return concatenate(arrays, axis, out, dtype=dtype, casting=casting, dim=dim)


def cat(tensors, dim=0, *, out=None, axis=None):
    """PyTorch's spelling of ``concatenate``.

    >>> import ember
    >>> ember.cat([ember.ones(2), ember.zeros(1)], dim=0).tolist()
    [1.0, 1.0, 0.0]
    """
    return concatenate(tensors, axis=dim if axis is None else axis, out=out)


def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind", dim=None):
    """Join arrays of the same shape along a new axis.

    >>> import ember
    >>> ember.stack([ember.zeros(3), ember.ones(3)], axis=1).shape
    (3, 2)
    """
    axis = _pick(axis, dim, 0, "stack")
    if isinstance(arrays, ndarray):
        if arrays.ndim == 0:
            raise TypeError("stack: iteration over a 0-d array (pass a sequence of arrays)")
        arrays = unstack(arrays)
    arrays = [as_array(a) for a in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    shape0 = arrays[0].shape
    for a in arrays[1:]:
        if a.shape != shape0:
            raise ValueError("stack: all input arrays must have the same shape, got shapes "
                             + _shapes(arrays))
    ax = _axis(axis, arrays[0].ndim + 1, "stack")
    return concatenate([expand_dims(a, ax) for a in arrays], axis=ax, out=out, dtype=dtype,
                       casting=casting)


def unstack(x, /, *, axis=0, dim=None):
    """Split along an axis into a tuple of views, one per index.

    >>> import ember
    >>> [a.tolist() for a in ember.unstack(ember.asarray([[1, 2], [3, 4]]), axis=1)]
    [[1, 3], [2, 4]]
    """
    if not isinstance(x, ndarray):
        raise TypeError(f"unstack: x must be an ember array, not {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("unstack: input array must be at least 1-d, got a 0-d array")
    ax = _axis(_pick(axis, dim, 0, "unstack"), x.ndim, "unstack")
    pre = (slice(None),) * ax
    return tuple(x[pre + (i,)] for i in range(x.shape[ax]))


def _one_or_tuple(res):
    return res[0] if len(res) == 1 else tuple(res)


def atleast_1d(*arys):
    """Views with at least one dimension (one array, or a tuple for several).

    >>> import ember
    >>> ember.atleast_1d(ember.asarray(1.0)).shape
    (1,)
    """
    res = []
    for a in arys:
        a = as_array(a)
        res.append(a if a.ndim >= 1 else reshape(a, (1,)))
    return _one_or_tuple(res)


def atleast_2d(*arys):
    """Views with at least two dimensions (new axes in front).

    >>> import ember
    >>> ember.atleast_2d(ember.arange(3)).shape
    (1, 3)
    """
    res = []
    for a in arys:
        a = as_array(a)
        res.append(a if a.ndim >= 2 else reshape(a, (1,) * (2 - a.ndim) + a.shape))
    return _one_or_tuple(res)


def atleast_3d(*arys):
    """Views with at least three dimensions: (N,) -> (1, N, 1), (M, N) -> (M, N, 1).

    >>> import ember
    >>> ember.atleast_3d(ember.arange(3)).shape
    (1, 3, 1)
    """
    res = []
    for a in arys:
        a = as_array(a)
        if a.ndim == 0:
            a = reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = reshape(a, (1, a.shape[0], 1))
        elif a.ndim == 2:
            a = reshape(a, a.shape + (1,))
        res.append(a)
    return _one_or_tuple(res)


def _seq(tup, opname):
    if isinstance(tup, ndarray):
        if tup.ndim == 0:
            raise TypeError(f"{opname}: iteration over a 0-d array (pass a sequence of arrays)")
        return list(unstack(tup))
    tup = list(tup)
    if not tup:
        raise ValueError(f"{opname}: need at least one array to concatenate")
    return tup


def hstack(tup, *, dtype=None, casting="same_kind"):
    """Stack horizontally: along axis 1 (axis 0 for 1-d inputs).

    >>> import ember
    >>> ember.hstack([ember.ones(2), ember.zeros(2)]).tolist()
    [1.0, 1.0, 0.0, 0.0]
    """
    arrs = [atleast_1d(a) for a in _seq(tup, "hstack")]
    return concatenate(arrs, axis=0 if arrs[0].ndim == 1 else 1, dtype=dtype, casting=casting)


def vstack(tup, *, dtype=None, casting="same_kind"):
    """Stack vertically: along axis 0, 1-d inputs become rows.

    >>> import ember
    >>> ember.vstack([ember.ones(2), ember.zeros(2)]).shape
    (2, 2)
    """
    return concatenate([atleast_2d(a) for a in _seq(tup, "vstack")], axis=0, dtype=dtype,
                       casting=casting)


def dstack(tup):
    """Stack along the third axis (inputs made at least 3-d).

    >>> import ember
    >>> ember.dstack([ember.ones(2), ember.zeros(2)]).shape
    (1, 2, 2)
    """
    return concatenate([atleast_3d(a) for a in _seq(tup, "dstack")], axis=2)


def column_stack(tup):
    """Stack 1-d arrays as the columns of a 2-d array (2-d arrays are joined as they are).

    >>> import ember
    >>> ember.column_stack([ember.ones(2), ember.zeros(2)]).shape
    (2, 2)
    """
    cols = []
    for a in _seq(tup, "column_stack"):
        a = as_array(a)
        cols.append(reshape(a, (-1, 1)) if a.ndim < 2 else a)
    return concatenate(cols, axis=1)


# ---------------------------------------------------------------- splitting

def _check_section_count(sections, n, opname="array_split"):
    """MemoryError, at once, when the list of `sections` views could not fit in this
    machine's memory (NumPy's own loop runs until the OS kills it)."""
    if sections <= n + 1:
        return
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        phys = 1 << 40
    per_view = 256                      # bytes: less than one ember array object takes
    if sections * per_view > phys:
        raise MemoryError(f"{opname}: {sections} sections of an axis of length {n} would "
                          f"need more than {sections * per_view / 2**30:.3g} GiB for the list "
                          f"of views alone")


def array_split(ary, indices_or_sections, axis=0):
    """Split into a list of views; a number of sections need not divide the axis
    (the first ones get one more element); a sequence gives the split points.

    >>> import ember
    >>> [a.tolist() for a in ember.array_split(ember.arange(5), 2)]
    [[0, 1, 2], [3, 4]]
    """
    x = as_array(ary)
    ax = _axis(axis, x.ndim, "array_split")
    n = x.shape[ax]
    if isinstance(indices_or_sections, ndarray) and indices_or_sections.ndim == 0:
        indices_or_sections = indices_or_sections.item()
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = operator.index(indices_or_sections)
        if sections <= 0:
            raise ValueError(f"array_split: number of sections must be larger than 0, "
                             f"got {sections}")
        _check_section_count(sections, n)
        each, extra = divmod(n, sections)
        bounds = [0]
        for i in range(sections):
            bounds.append(bounds[-1] + each + (1 if i < extra else 0))
    else:
        idx = indices_or_sections
        if isinstance(idx, (ndarray, np.ndarray)) and dtype_kind(idx.dtype) not in "iu":
            raise TypeError(f"array_split: slice indices must be integers, got an array of "
                            f"{idx.dtype}")
        idx = idx.tolist() if isinstance(idx, (ndarray, np.ndarray)) else list(idx)
        bounds = [0] + [operator.index(i) for i in idx] + [n]
    pre = (slice(None),) * ax
    return [x[pre + (slice(bounds[i], bounds[i + 1]),)] for i in range(len(bounds) - 1)]


def split(ary, indices_or_sections, axis=0):
    """Split into equal sub-array views (or at the given indices).

    >>> import ember
    >>> [a.shape for a in ember.split(ember.zeros((4, 2)), 2)]
    [(2, 2), (2, 2)]
    """
    x = as_array(ary)
    if isinstance(indices_or_sections, ndarray) and indices_or_sections.ndim == 0:
        indices_or_sections = indices_or_sections.item()
    if isinstance(indices_or_sections, (int, np.integer)):
        ax = _axis(axis, x.ndim, "split")
        if indices_or_sections <= 0 or x.shape[ax] % indices_or_sections:
            raise ValueError(f"split: array split does not result in an equal division "
                             f"(axis {ax} of length {x.shape[ax]} into {indices_or_sections} "
                             f"sections)")
    return array_split(x, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    """Split along axis 1 (axis 0 for 1-d arrays).

    >>> import ember
    >>> len(ember.hsplit(ember.zeros((2, 4)), 2))
    2
    """
    x = as_array(ary)
    if x.ndim == 0:
        raise ValueError("hsplit: only works on arrays of 1 or more dimensions")
    return split(x, indices_or_sections, axis=1 if x.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    """Split along axis 0 (needs at least 2 dimensions).

    >>> import ember
    >>> len(ember.vsplit(ember.zeros((4, 2)), 2))
    2
    """
    x = as_array(ary)
    if x.ndim < 2:
        raise ValueError("vsplit: only works on arrays of 2 or more dimensions")
    return split(x, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    """Split along axis 2 (needs at least 3 dimensions).

    >>> import ember
    >>> len(ember.dsplit(ember.zeros((1, 2, 4)), 2))
    2
    """
    x = as_array(ary)
    if x.ndim < 3:
        raise ValueError("dsplit: only works on arrays of 3 or more dimensions")
    return split(x, indices_or_sections, axis=2)


# ---------------------------------------------------------------- tiling, repeating

def tile(x, repetitions, /):
    """Repeat the whole array ``repetitions`` times along each axis (missing
    leading axes of either are taken as 1).

    >>> import ember
    >>> ember.tile(ember.asarray([1, 2]), 2).tolist()
    [1, 2, 1, 2]
    """
    x = as_array(x)
    reps = _shape_arg(repetitions, "tile")
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be non-negative, got {reps}")
    d = builtins.max(len(reps), x.ndim)
    reps = (1,) * (d - len(reps)) + reps
    shp = (1,) * (d - x.ndim) + x.shape
    xst = (0,) * (d - x.ndim) + x.strides
    out = empty_raw(tuple(r * s for r, s in zip(reps, shp)), x.dtype)
    if out.size:
        inter = tuple(v for r, s in zip(reps, shp) for v in (r, s))
        src_strides = tuple(v for st in xst for v in (0, st))
        _fill(_view(out, inter, c_strides(inter, out.itemsize), 0),
              _view(x, inter, src_strides))
    return out


def repeat(x, /, repeats, *, axis=None, dim=None):
    """Repeat each element ``repeats`` times (an int, or one count per element
    along ``axis``); ``axis=None`` works on the flattened array.

    >>> import ember
    >>> ember.repeat(ember.asarray([1, 2]), 2).tolist()
    [1, 1, 2, 2]
    """
    x = as_array(x)
    axis = _pick(axis, dim, None, "repeat")
    if axis is None:
        x = ravel(x)
        ax = 0
    else:
        ax = _axis(axis, x.ndim, "repeat")
    r = repeats
    if isinstance(r, ndarray):
        r = numpy_view(r)
    if isinstance(r, (list, tuple, np.ndarray)):
        given_array = isinstance(r, np.ndarray)
        r = np.asarray(r)
        if r.ndim > 1:
            raise ValueError(f"repeat: repeats must be an int or a 1-d sequence, got shape "
                             f"{shape_str(r.shape)}")
        # an array must cast safely to integers, even when empty (NumPy's rule)
        if dtype_kind(r.dtype) not in "biu" and (r.size or given_array):
            raise TypeError(f"repeat: repeats must be integers, got dtype {r.dtype}")
        if r.size != 1:
            if (r < 0).any():
                raise ValueError("repeat: repeats may not contain negative values")
            try:
                return _copy_of(np.repeat(numpy_view(x), r.astype(np.intp), axis=ax))
            except ValueError as e:
                raise ValueError(f"repeat: {e} (array shape {shape_str(x.shape)}, "
                                 f"{r.size} repeats along axis {ax})") from None
        r = r.reshape(())[()]
    n = operator.index(r)
    if n < 0:
        raise ValueError(f"repeat: repeats may not be negative, got {n}")
    shp = x.shape
    out = empty_raw(shp[:ax] + (shp[ax] * n,) + shp[ax + 1:], x.dtype)
    if out.size:
        inter = shp[:ax] + (shp[ax], n) + shp[ax + 1:]
        st = x.strides
        _fill(_view(out, inter, c_strides(inter, out.itemsize), 0),
              _view(x, inter, st[:ax + 1] + (0,) + st[ax + 1:]))
    return out


# ---------------------------------------------------------------- broadcasting

def broadcast_shapes(*shapes):
    """The shape that the given shapes broadcast to.

    >>> import ember
    >>> ember.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    shapes = [_shape_arg(s, "broadcast_shapes") for s in shapes]
    nd = builtins.max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        if builtins.any(v < 0 for v in s):
            raise ValueError(f"broadcast_shapes: negative dimensions are not allowed, got "
                             f"{shape_str(s)}")
        for i, v in enumerate(s):
            j = nd - len(s) + i
            if v != 1:
                if out[j] != 1 and out[j] != v:
                    raise ValueError("broadcast_shapes: shapes could not be broadcast together: "
                                     + " ".join(shape_str(t) for t in shapes))
                out[j] = v
    return tuple(out)


def broadcast_to(x, /, shape):
    """A read-only view of x broadcast to ``shape`` (stride 0 along the broadcast
    axes; all elements of such an axis are one memory location, so writing through
    the view raises ValueError, as in NumPy).

    >>> import ember
    >>> ember.broadcast_to(ember.asarray([1, 2]), (3, 2)).tolist()
    [[1, 2], [1, 2], [1, 2]]
    >>> ember.broadcast_to(ember.asarray([1, 2]), (3, 2)).flags.writeable
    False
    """
    x = as_array(x)
    shape = _shape_arg(shape, "broadcast_to")
    if builtins.any(s < 0 for s in shape):
        raise ValueError(f"broadcast_to: all elements of the target shape must be "
                         f"non-negative, got {shape_str(shape)}")
    if len(shape) < x.ndim:
        raise ValueError(f"broadcast_to: cannot broadcast shape {shape_str(x.shape)} to "
                         f"{shape_str(shape)} (fewer dimensions)")
    lead = len(shape) - x.ndim
    strides = [0] * lead
    for i in range(x.ndim):
        if x.shape[i] == shape[lead + i]:
            strides.append(x.strides[i])
        elif x.shape[i] == 1:
            strides.append(0)
        else:
            raise ValueError(f"broadcast_to: operands could not be broadcast together: shape "
                             f"{shape_str(x.shape)} cannot broadcast to {shape_str(shape)}")
    v = _view(x, shape, strides)
    v.flags.writeable = False
    return v


def broadcast_arrays(*arrays):
    """Views of the arrays broadcast to their common shape (a tuple, as NumPy 2).

    An array that already has that shape comes back as it is; the others are
    ``broadcast_to`` views, read-only (NumPy 2 still lets you write into them with a
    FutureWarning: such a write changes every element that shares the memory).

    >>> import ember
    >>> [a.shape for a in ember.broadcast_arrays(ember.zeros((2, 1)), ember.zeros(3))]
    [(2, 3), (2, 3)]
    """
    arrays = [as_array(a) for a in arrays]
    try:
        shape = broadcast_shapes(*[a.shape for a in arrays])
    except ValueError:
        raise ValueError("broadcast_arrays: shapes could not be broadcast together: "
                         + _shapes(arrays)) from None
    return tuple(a if a.shape == shape else broadcast_to(a, shape) for a in arrays)


# ---------------------------------------------------------------- long tail (NumPy on views)

def pad(array, pad_width, mode="constant", **kwargs):
    """Pad an array (NumPy's modes: constant, edge, reflect, symmetric, wrap,
    linear_ramp, maximum, mean, median, minimum, empty).

    >>> import ember
    >>> ember.pad(ember.asarray([1, 2]), 1).tolist()
    [0, 1, 2, 0]
    """
    pw = numpy_view(pad_width) if isinstance(pad_width, ndarray) else pad_width
    kwargs = {k: (numpy_view(v) if isinstance(v, ndarray) else v) for k, v in kwargs.items()}
    try:
        return _copy_of(np.pad(numpy_view(as_array(array)), pw, mode=mode, **kwargs))
    except ValueError as e:
        raise ValueError(f"pad: {e}") from None


def resize(a, new_shape):
    """A new array of ``new_shape`` filled with x's elements repeated in order.

    >>> import ember
    >>> ember.resize(ember.asarray([1, 2, 3]), (2, 2)).tolist()
    [[1, 2], [3, 1]]
    """
    if isinstance(new_shape, ndarray):
        if new_shape.ndim == 0:
            raise TypeError("resize: iteration over a 0-d array (new_shape must be a shape)")
        if dtype_kind(new_shape.dtype) not in "iu":
            raise TypeError(f"resize: a shape array must hold integers, got {new_shape.dtype}")
        new_shape = tuple(new_shape.tolist())
    shape = (operator.index(new_shape),) if not isinstance(new_shape, (tuple, list)) else \
        tuple(operator.index(n) for n in new_shape)
    return _copy_of(np.resize(numpy_view(as_array(a)), shape))


def trim_zeros(filt, trim="fb"):
    """Trim leading ('f') and/or trailing ('b') zeros of a 1-d array (a view).

    >>> import ember
    >>> ember.trim_zeros(ember.asarray([0, 1, 0, 2, 0])).tolist()
    [1, 0, 2]
    """
    if not isinstance(trim, str):
        raise TypeError(f"trim_zeros: trim must be a str of 'f' and 'b', got {type(trim).__name__}")
    if set(trim.lower()) - {"f", "b"}:
        raise ValueError(f"trim_zeros: unexpected character(s) in `trim`: {trim!r} (use 'f' "
                         f"for the front, 'b' for the back)")
    x = as_array(filt)
    if x.ndim != 1:
        raise ValueError(f"trim_zeros: expected a 1-d array, got shape {shape_str(x.shape)}")
    nz = np.flatnonzero(numpy_view(x))
    if nz.size == 0:
        return x[0:0]
    trim = trim.lower()
    lo = int(nz[0]) if "f" in trim else 0
    hi = int(nz[-1]) + 1 if "b" in trim else x.shape[0]
    return x[lo:hi]


# ---------------------------------------------------------------- dtype views

def _view_dtype(x, dtype):
    """Reinterpret x's bytes as ``dtype`` (NumPy's ``ndarray.view(dtype)``), zero-copy;
    the result shares x's storage.  With a different itemsize the last axis must be
    contiguous and its byte length divisible by the new itemsize.

    >>> import ember
    >>> ember.zeros(2, dtype=ember.int32).view(ember.int16).shape
    (4,)
    """
    x = as_array(x)
    new = _check_dtype(dtype, "view")
    old_size, new_size = x.itemsize, new.itemsize
    shape, strides = list(x.shape), list(x.strides)
    if old_size != new_size:
        if x.ndim == 0:
            raise ValueError(f"view: changing the dtype of a 0d array is only supported if the "
                             f"itemsize is unchanged ({x.dtype} -> {new})")
        if shape[-1] != 1 and strides[-1] != old_size:
            raise ValueError(f"view: to change to a dtype of a different size, the last axis "
                             f"must be contiguous (shape {shape_str(x.shape)}, strides "
                             f"{tuple(x.strides)}, {x.dtype} -> {new})")
        nbytes = shape[-1] * old_size
        if nbytes % new_size:
            raise ValueError(f"view: the size of the new dtype ({new}, {new_size} bytes) must "
                             f"divide the total size in bytes of the last axis ({nbytes}) "
                             f"of the array of shape {shape_str(x.shape)} and dtype {x.dtype}")
        shape[-1] = nbytes // new_size
        strides[-1] = new_size
    align = new.alignment
    if x.data_ptr() % align or builtins.any(st % align for s, st in zip(shape, strides) if s > 1):
        raise ValueError(f"view: the {new} view of this array would not be aligned "
                         f"(address {x.data_ptr()}, strides {tuple(strides)})")
    return _view(x, shape, strides, dtype=new)
