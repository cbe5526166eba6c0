"""Shape manipulation: reshape, transpose, stacking, splitting, tiling, padding.

Reshape, transpose, expand/squeeze, flip, broadcast_to, moveaxis, split and
unstack return views that share storage with their input (reshape whenever
the strides allow it, as NumPy).  Joining functions write their inputs into
one fresh array with ember's copy kernels.
"""
import builtins
import math
import operator

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._core.dtypes import _code, dtype_from_code
from ember._api._util import (as_array, numpy_view, wrap, empty_raw, normalize_axis,
                              normalize_axis_tuple, pick_axis, shape_str)

__all__ = ["reshape", "transpose", "permute_dims", "moveaxis", "swapaxes", "expand_dims",
           "squeeze", "flip", "fliplr", "flipud", "roll", "concatenate", "concat", "cat",
           "stack", "unstack", "hstack", "vstack", "dstack", "column_stack", "split",
           "array_split", "hsplit", "vsplit", "tile", "repeat", "broadcast_to",
           "broadcast_arrays", "broadcast_shapes", "ravel", "pad", "atleast_1d", "atleast_2d",
           "atleast_3d", "rot90", "unsqueeze", "permute", "resize", "trim_zeros"]


def _view(x, shape, strides, offset=None):
    return _array._as_strided(x, tuple(shape), tuple(strides),
                              _array._storage_offset_bytes(x) if offset is None else offset)


def _infer_shape(shape, size, opname):
    shape = tuple(operator.index(s) for s in shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ValueError(f"{opname}: can only specify one unknown dimension (-1), got shape {shape}")
    if builtins.any(s < -1 for s in shape):
        raise ValueError(f"{opname}: negative dimensions are not allowed, got shape {shape}")
    if neg:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"{opname}: cannot reshape array of size {size} into shape "
                             f"{shape_str(shape)}")
        shape = shape[:neg[0]] + (size // known,) + shape[neg[0] + 1:]
    if math.prod(shape) != size:
        raise ValueError(f"{opname}: cannot reshape array of size {size} into shape {shape_str(shape)}")
    return shape


def _nocopy_strides(old_shape, old_strides, new_shape, itemsize):
    """Strides that give new_shape as a view of the old layout, or None."""
    if math.prod(new_shape) == 0:
        strides, st = [], itemsize
        for s in reversed(new_shape):
            strides.append(st)
            st *= builtins.max(s, 1)
        return tuple(reversed(strides))
    olds = [(s, st) for s, st in zip(old_shape, old_strides) if s != 1]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(olds):
        while ni < len(new_shape) and new_shape[ni] == 1:
            new_strides[ni] = 0
            ni += 1
        nprod, oprod = new_shape[ni], olds[oi][0]
        oj, nj = oi, ni
        while nprod != oprod:
            if nprod < oprod:
                nj += 1
                nprod *= new_shape[nj]
            else:
                oj += 1
                oprod *= olds[oj][0]
        for k in range(oi, oj):
            if olds[k][1] != olds[k + 1][1] * olds[k + 1][0]:
                return None
        new_strides[nj] = olds[oj][1]
        for k in range(nj, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        oi, ni = oj + 1, nj + 1
    return tuple(new_strides)


def reshape(x, /, shape, *, order="C", copy=None):
    """A view with a new shape when the strides allow it, else a copy.

    One dimension may be -1 (inferred).  ``copy=True`` always copies;
    ``copy=False`` raises ValueError when a view is impossible.

    >>> import ember
    >>> x = ember.arange(6)
    >>> y = x.reshape(2, 3); y[0, 0] = 9; x[0].item()
    9
    """
    x = as_array(x)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = _infer_shape(shape, x.size, "reshape")
    if order not in ("C", "F", "A"):
        raise ValueError(f"reshape: order must be 'C', 'F' or 'A', got {order!r}")
    if order == "F":
        return transpose(reshape(transpose(x), shape[::-1], copy=copy))
    if copy:
        x = x.copy()
    strides = _nocopy_strides(x.shape, x.strides, shape, x.itemsize)
    if strides is None:
        if copy is False:
            raise ValueError(f"reshape: cannot reshape the array of shape {shape_str(x.shape)} "
                             f"into {shape_str(shape)} without copying (copy=False)")
        x = x.copy()
        strides = _nocopy_strides(x.shape, x.strides, shape, x.itemsize)
    return _view(x, shape, strides)


def ravel(x, /, order="C"):
    """The elements as a 1-d array (a view when possible).

    >>> import ember
    >>> ember.ravel(ember.ones((2, 2))).shape
    (4,)
    """
    return reshape(x, (-1,), order=order)


def permute_dims(x, /, axes):
    """A view with the axes permuted (``axes[i]`` is the input axis of output axis i).

    >>> import ember
    >>> ember.permute_dims(ember.zeros((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    x = as_array(x)
    axes = tuple(axes)
    if len(axes) != x.ndim:
        raise ValueError(f"permute_dims: axes {axes} do not match an array of {x.ndim} dimensions")
    ax = normalize_axis_tuple(axes, x.ndim, "permute_dims")
    return _view(x, [x.shape[a] for a in ax], [x.strides[a] for a in ax])


def transpose(x, /, axes=None):
    """Reverse the axes, or permute them as given (a view).

    >>> import ember
    >>> ember.transpose(ember.zeros((2, 3))).shape
    (3, 2)
    """
    x = as_array(x)
    if axes is None:
        axes = tuple(range(x.ndim))[::-1]
    return permute_dims(x, axes)


def permute(x, *dims):
    """PyTorch's spelling of ``permute_dims``.

    >>> import ember
    >>> ember.permute(ember.zeros((2, 3)), 1, 0).shape
    (3, 2)
    """
    if len(dims) == 1 and not isinstance(dims[0], int):
        dims = dims[0]
    return permute_dims(x, dims)


def moveaxis(x, source, destination, /):
    """Move axes to new positions, the others keep their order (a view).

    >>> import ember
    >>> ember.moveaxis(ember.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    x = as_array(x)
    src = normalize_axis_tuple(source if isinstance(source, (tuple, list)) else (source,), x.ndim, "moveaxis")
    dst = normalize_axis_tuple(destination if isinstance(destination, (tuple, list)) else (destination,), x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of elements")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, order)


def swapaxes(x, axis1, axis2, /):
    """Swap two axes (a view).

    >>> import ember
    >>> ember.swapaxes(ember.zeros((2, 3, 4)), 0, 2).shape
    (4, 3, 2)
    """
    x = as_array(x)
    a = normalize_axis(axis1, x.ndim, "swapaxes")
    b = normalize_axis(axis2, x.ndim, "swapaxes")
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return permute_dims(x, order)


def expand_dims(x, /, axis=0):
    """Insert length-1 axes at the given positions of the result (a view).

    >>> import ember
    >>> ember.expand_dims(ember.zeros((2, 3)), axis=(0, -1)).shape
    (1, 2, 3, 1)
    """
    x = as_array(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = x.ndim + len(axes)
    axes = normalize_axis_tuple(axes, nd, "expand_dims")
    shape, strides = list(x.shape), list(x.strides)
    for a in sorted(axes):
        shape.insert(a, 1)
        strides.insert(a, 0)
    return _view(x, shape, strides)


def unsqueeze(x, dim):
    """PyTorch's spelling of ``expand_dims`` with one axis.

    >>> import ember
    >>> ember.unsqueeze(ember.zeros(3), 0).shape
    (1, 3)
    """
    return expand_dims(x, dim)


def squeeze(x, /, axis=None):
    """Remove length-1 axes (all of them, or those given; a view).

    >>> import ember
    >>> ember.squeeze(ember.zeros((1, 3, 1)), axis=0).shape
    (3, 1)
    """
    x = as_array(x)
    if axis is None:
        keep = [i for i in range(x.ndim) if x.shape[i] != 1]
    else:
        axes = normalize_axis_tuple(axis, x.ndim, "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size "
                                 f"not equal to one (axis {a} of shape {shape_str(x.shape)})")
        keep = [i for i in range(x.ndim) if i not in axes]
    return _view(x, [x.shape[i] for i in keep], [x.strides[i] for i in keep])


def flip(x, /, axis=None):
    """Reverse the order of elements along the axes (a view with negative strides).

    >>> import ember
    >>> ember.flip(ember.arange(3)).tolist()
    [2, 1, 0]
    """
    x = as_array(x)
    axes = normalize_axis_tuple(axis, x.ndim, "flip")
    key = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))
    return x[key]


def fliplr(x):
    """Flip along axis 1.

    >>> import ember
    >>> ember.fliplr(ember.asarray([[1, 2]])).tolist()
    [[2, 1]]
    """
    return flip(x, axis=1)


def flipud(x):
    """Flip along axis 0.

    >>> import ember
    >>> ember.flipud(ember.asarray([[1], [2]])).tolist()
    [[2], [1]]
    """
    return flip(x, axis=0)


def rot90(x, k=1, axes=(0, 1)):
    """Rotate by 90 degrees in the plane of `axes` (a view).

    >>> import ember
    >>> ember.rot90(ember.asarray([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    return wrap(np.rot90(numpy_view(as_array(x)), k, axes))


def roll(x, /, shift, *, axis=None):
    """Shift elements cyclically along the axes (the flattened array when axis is None).

    >>> import ember
    >>> ember.roll(ember.arange(4), 1).tolist()
    [3, 0, 1, 2]
    """
    x = as_array(x)
    return _copy_of(np.roll(numpy_view(x), shift, axis=axis))


def _copy_of(np_arr):
    out = empty_raw(np_arr.shape, np_arr.dtype)
    numpy_view(out)[...] = np_arr
    return out


def _result_dtype(arrays, dtype, opname):
    if dtype is not None:
        return np.dtype(dtype)
    code = _code(arrays[0].dtype)
    from ember._core.dtypes import promote_codes
    for a in arrays[1:]:
        code = promote_codes(code, _code(a.dtype))
    return dtype_from_code(code)


def concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind", dim=None):
    """Join arrays along an existing axis (``axis=None`` flattens them first).

    >>> import ember
    >>> ember.concatenate([ember.zeros((1, 2)), ember.ones((2, 2))]).shape
    (3, 2)
    """
    axis = pick_axis(axis if dim is None else None, dim, "concatenate") if dim is not None else axis
    arrays = [as_array(a) for a in arrays]
    if not arrays:
        raise ValueError("concatenate: need at least one array to concatenate")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    nd = arrays[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    for a in arrays[1:]:
        if a.ndim != nd:
            raise ValueError("concatenate: all the input arrays must have the same number of "
                             "dimensions, got shapes " + " ".join(shape_str(b.shape) for b in arrays))
    ax = normalize_axis(axis, nd, "concatenate")
    base = list(arrays[0].shape)
    for a in arrays[1:]:
        for i in range(nd):
            if i != ax and a.shape[i] != base[i]:
                raise ValueError(f"concatenate: all the input array dimensions except for the "
                                 f"concatenation axis must match exactly, got shapes "
                                 + " ".join(shape_str(b.shape) for b in arrays))
    total = builtins.sum(a.shape[ax] for a in arrays)
    dt = _result_dtype(arrays, dtype, "concatenate")
    shape = tuple(base[:ax] + [total] + base[ax + 1:])
    if out is None:
        out = empty_raw(shape, dt)
    elif out.shape != shape:
        raise ValueError(f"concatenate: output array has shape {shape_str(out.shape)}, "
                         f"expected {shape_str(shape)}")
    start = 0
    pre = (slice(None),) * ax
    for a in arrays:
        n = a.shape[ax]
        if n:
            out[pre + (slice(start, start + n),)] = a
        start += n
    return out


concat = concatenate


def cat(tensors, dim=0, *, out=None):
    """PyTorch's spelling of ``concatenate``.

    >>> import ember
    >>> ember.cat([ember.ones(2), ember.zeros(1)], dim=0).tolist()
    [1.0, 1.0, 0.0]
    """
    return concatenate(tensors, axis=dim, out=out)


def stack(arrays, /, axis=0, out=None, *, dtype=None, dim=None):
    """Join arrays of the same shape along a new axis.

    >>> import ember
    >>> ember.stack([ember.zeros(3), ember.ones(3)], axis=1).shape
    (3, 2)
    """
    if dim is not None:
        axis = dim
    arrays = [as_array(a) for a in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    shape0 = arrays[0].shape
    for a in arrays[1:]:
        if a.shape != shape0:
            raise ValueError("stack: all input arrays must have the same shape, got shapes "
                             + " ".join(shape_str(b.shape) for b in arrays))
    ax = normalize_axis(axis, arrays[0].ndim + 1, "stack")
    return concatenate([expand_dims(a, ax) for a in arrays], axis=ax, out=out, dtype=dtype)


def unstack(x, /, *, axis=0):
    """Split along an axis into a tuple of views, one per index.

    >>> import ember
    >>> [a.tolist() for a in ember.unstack(ember.asarray([[1, 2], [3, 4]]), axis=1)]
    [[1, 3], [2, 4]]
    """
    x = as_array(x)
    ax = normalize_axis(axis, x.ndim, "unstack")
    pre = (slice(None),) * ax
    return tuple(x[pre + (i,)] for i in range(x.shape[ax]))


def atleast_1d(*arys):
    """Views with at least one dimension.

    >>> import ember
    >>> ember.atleast_1d(ember.asarray(5)).shape
    (1,)
    """
    res = [as_array(a) if as_array(a).ndim >= 1 else reshape(as_array(a), (1,)) for a in arys]
    return res[0] if len(res) == 1 else res


def atleast_2d(*arys):
    """Views with at least two dimensions.

    >>> import ember
    >>> ember.atleast_2d(ember.arange(3)).shape
    (1, 3)
    """
    res = []
    for a in arys:
        a = as_array(a)
        res.append(a if a.ndim >= 2 else reshape(a, (1,) * (2 - a.ndim) + a.shape))
    return res[0] if len(res) == 1 else res


def atleast_3d(*arys):
    """Views with at least three dimensions (NumPy's placement of new axes).

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
    return res[0] if len(res) == 1 else res


def hstack(tup, *, dtype=None):
    """Stack horizontally (axis 1; axis 0 for 1-d inputs).

    >>> import ember
    >>> ember.hstack([ember.ones(2), ember.zeros(2)]).tolist()
    [1.0, 1.0, 0.0, 0.0]
    """
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, axis=0 if arrs and arrs[0].ndim == 1 else 1, dtype=dtype)


def vstack(tup, *, dtype=None):
    """Stack vertically (axis 0, 1-d inputs become rows).

    >>> import ember
    >>> ember.vstack([ember.ones(2), ember.zeros(2)]).shape
    (2, 2)
    """
    return concatenate([atleast_2d(a) for a in tup], axis=0, dtype=dtype)


def dstack(tup):
    """Stack along the third axis.

    >>> import ember
    >>> ember.dstack([ember.ones(2), ember.zeros(2)]).shape
    (1, 2, 2)
    """
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def column_stack(tup):
    """Stack 1-d arrays as columns of a 2-d array.

    >>> import ember
    >>> ember.column_stack([ember.ones(2), ember.zeros(2)]).shape
    (2, 2)
    """
    cols = []
    for a in tup:
        a = as_array(a)
        cols.append(reshape(a, (a.shape[0], 1)) if a.ndim == 1 else a)
    return concatenate(cols, axis=1)


def array_split(x, indices_or_sections, axis=0):
    """Split into sub-array views; sections need not divide the axis evenly.

    >>> import ember
    >>> [a.tolist() for a in ember.array_split(ember.arange(5), 2)]
    [[0, 1, 2], [3, 4]]
    """
    x = as_array(x)
    ax = normalize_axis(axis, x.ndim, "array_split")
    n = x.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError(f"array_split: number of sections must be larger than 0, got {sections}")
        each, extra = divmod(n, sections)
        bounds = [0]
        for i in range(sections):
            bounds.append(bounds[-1] + each + (1 if i < extra else 0))
    else:
        bounds = [0] + [int(i) for i in as_array(indices_or_sections).tolist()] + [n]
    pre = (slice(None),) * ax
    return [x[pre + (slice(bounds[i], bounds[i + 1]),)] for i in range(len(bounds) - 1)]


def split(x, indices_or_sections, axis=0):
    """Split into equal sub-array views (or at the given indices).

    >>> import ember
    >>> [a.shape for a in ember.split(ember.zeros((4, 2)), 2)]
    [(2, 2), (2, 2)]
    """
    x = as_array(x)
    if isinstance(indices_or_sections, (int, np.integer)):
        ax = normalize_axis(axis, x.ndim, "split")
        if indices_or_sections <= 0 or x.shape[ax] % indices_or_sections:
            raise ValueError(f"split: array split does not result in an equal division "
                             f"(axis {ax} of length {x.shape[ax]} into {indices_or_sections})")
    return array_split(x, indices_or_sections, axis)


def hsplit(x, indices_or_sections):
    """Split along axis 1 (axis 0 for 1-d).

    >>> import ember
    >>> [a.tolist() for a in ember.hsplit(ember.arange(4), 2)]
    [[0, 1], [2, 3]]
    """
    x = as_array(x)
    return split(x, indices_or_sections, axis=1 if x.ndim > 1 else 0)


def vsplit(x, indices_or_sections):
    """Split along axis 0.

    >>> import ember
    >>> [a.shape for a in ember.vsplit(ember.zeros((4, 2)), 2)]
    [(2, 2), (2, 2)]
    """
    return split(x, indices_or_sections, axis=0)


def tile(x, repetitions, /):
    """Repeat the whole array `repetitions` times along each axis.

    >>> import ember
    >>> ember.tile(ember.asarray([1, 2]), 2).tolist()
    [1, 2, 1, 2]
    """
    return _copy_of(np.tile(numpy_view(as_array(x)), repetitions))


def repeat(x, repeats, /, *, axis=None):
    """Repeat each element `repeats` times (an int or one count per element).

    >>> import ember
    >>> ember.repeat(ember.asarray([1, 2]), 2).tolist()
    [1, 1, 2, 2]
    """
    x = as_array(x)
    r = numpy_view(as_array(repeats)) if isinstance(repeats, (ndarray, list, tuple)) else repeats
    try:
        return _copy_of(np.repeat(numpy_view(x), r, axis=axis))
    except ValueError as e:
        raise ValueError(f"repeat: {e}") from None


def broadcast_shapes(*shapes):
    """The shape that the given shapes broadcast to.

    >>> import ember
    >>> ember.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError("broadcast_shapes: shapes could not be broadcast together: "
                         + " ".join(shape_str(s) for s in shapes)) from None


def broadcast_to(x, /, shape):
    """A view of x broadcast to `shape` (stride 0 along broadcast axes).

    >>> import ember
    >>> ember.broadcast_to(ember.asarray([1, 2]), (3, 2)).tolist()
    [[1, 2], [1, 2], [1, 2]]
    """
    x = as_array(x)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
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
    return _view(x, shape, strides)


def broadcast_arrays(*arrays):
    """Views of the arrays broadcast to their common shape.

    >>> import ember
    >>> [a.shape for a in ember.broadcast_arrays(ember.zeros((2, 1)), ember.zeros(3))]
    [(2, 3), (2, 3)]
    """
    arrays = [as_array(a) for a in arrays]
    shape = broadcast_shapes(*[a.shape for a in arrays])
    return [broadcast_to(a, shape) for a in arrays]


def pad(x, pad_width, mode="constant", **kwargs):
    """Pad an array (NumPy's modes: constant, edge, reflect, symmetric, wrap, ...).

    >>> import ember
    >>> ember.pad(ember.asarray([1, 2]), 1).tolist()
    [0, 1, 2, 0]
    """
    pw = numpy_view(as_array(pad_width)) if isinstance(pad_width, ndarray) else pad_width
    kwargs = {k: (numpy_view(v) if isinstance(v, ndarray) else v) for k, v in kwargs.items()}
    try:
        return _copy_of(np.pad(numpy_view(as_array(x)), pw, mode=mode, **kwargs))
    except ValueError as e:
        raise ValueError(f"pad: {e}") from None


def resize(x, new_shape):
    """A new array of `new_shape` filled with x's elements repeated.

    >>> import ember
    >>> ember.resize(ember.asarray([1, 2, 3]), (2, 2)).tolist()
    [[1, 2], [3, 1]]
    """
    return _copy_of(np.resize(numpy_view(as_array(x)), new_shape))


def trim_zeros(filt, trim="fb"):
    """Trim leading/trailing zeros of a 1-d array (a view).

    >>> import ember
    >>> ember.trim_zeros(ember.asarray([0, 1, 2, 0])).tolist()
    [1, 2]
    """
    x = as_array(filt)
    v = numpy_view(x)
    nz = np.flatnonzero(v)
    if nz.size == 0:
        return x[0:0]
    lo = int(nz[0]) if "f" in trim else 0
    hi = int(nz[-1]) + 1 if "b" in trim else x.shape[0]
    return x[lo:hi]


def _view_dtype(x, dtype):
    """Reinterpret x's bytes as `dtype` (NumPy's ``ndarray.view(dtype)``), zero-copy."""
    x = as_array(x)
    try:
        return wrap(numpy_view(x).view(np.dtype(dtype)))
    except ValueError as e:
        raise ValueError(f"view: {e}") from None
