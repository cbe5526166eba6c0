"""Advanced indexing and index-based functions.

Basic indexing (ints, slices, None, Ellipsis) is done in Cython by the array
type and returns views.  Keys with integer or boolean arrays come here and
follow NumPy's rules exactly: they run NumPy's indexing on a zero-copy view
of ember's memory (the result of advanced indexing is always a copy; an
assignment writes straight through the view).
"""
import builtins
import operator

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._api._util import as_array, numpy_view, wrap, empty_raw, normalize_axis, shape_str, into_out
from ember._core.util import check_index_add as _check_index_add
from ember._core.dtypes import dtype_kind
from ember._core.public import ops as _public_ops

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["take", "take_along_axis", "put_along_axis", "nonzero", "argwhere", "flatnonzero",
           "compress", "extract", "index_add", "put", "place", "diag_indices", "tril_indices",
           "triu_indices", "ix_", "select", "choose", "scatter_add", "index_select",
           "masked_fill", "unravel_index", "ravel_multi_index"]


def _np_key(key):
    """The key with ember arrays (also inside tuples and lists) as NumPy views."""
    if isinstance(key, ndarray):
        return numpy_view(key)
    if isinstance(key, tuple):
        return tuple(_np_key(k) for k in key)
    if isinstance(key, list) and builtins.any(isinstance(k, (ndarray, list)) for k in key):
        return [_np_key(k) for k in key]
    return key


def _copy_of(np_arr):
    """A NumPy result copied into fresh ember memory."""
    np_arr = np.asarray(np_arr)
    out = empty_raw(np_arr.shape, np_arr.dtype)
    numpy_view(out)[...] = np_arr
    return out


def _result(res, x, xv):
    """Wrap NumPy's indexing result: a view of x's storage when NumPy returned a
    view (e.g. ``x[True]``), else the fresh array itself (zero-copy)."""
    res = np.asarray(res)
    if res.base is not None and np.may_share_memory(res, xv):
        off = _array._storage_offset_bytes(x) + (res.ctypes.data - xv.ctypes.data)
        return _array._as_strided(x, res.shape, res.strides, off)
    return wrap(res)


def _getitem_advanced(x, key):
    """``x[key]`` for keys with integer/boolean arrays, lists, bool scalars or
    0-d ember arrays (NumPy's rules; the result is a copy)."""
    if x.is_cuda:
        from ember.cuda import ops_core
        return ops_core.getitem_advanced(x, key)
    xv = numpy_view(x)
    try:
        res = xv[_np_key(key)]
    except IndexError as e:
        raise IndexError(f"index: {e} (array shape {shape_str(x.shape)})") from None
    return _result(res, x, xv)


def _setitem_advanced(x, key, value):
    """``x[key] = value`` for keys with integer/boolean arrays (NumPy's rules,
    value broadcast and cast; written straight into x's memory)."""
    if x.is_cuda:
        from ember.cuda import ops_core
        return ops_core.setitem_advanced(x, key, value)
    if isinstance(value, ndarray):
        value = numpy_view(value)
    elif isinstance(value, (list, tuple)) and builtins.any(isinstance(v, ndarray) for v in value):
        value = numpy_view(as_array(value))
    try:
        numpy_view(x)[_np_key(key)] = value
    except IndexError as e:
        raise IndexError(f"index assignment: {e} (array shape {shape_str(x.shape)})") from None
    except ValueError as e:
        raise ValueError(f"index assignment: {e} (array shape {shape_str(x.shape)})") from None


def take(x, /, indices, *, axis=None, out=None, mode="raise", dim=None):
    """Elements at ``indices`` along ``axis`` (of the flattened array when axis is
    None); negative indices count from the end.  ``mode`` is NumPy's
    ('raise', 'wrap' or 'clip').

    >>> import ember
    >>> ember.take(ember.asarray([[1, 2], [3, 4]]), ember.asarray([1, 0]), axis=1).tolist()
    [[2, 1], [4, 3]]
    """
    x = as_array(x)
    if dim is not None:
        if axis is not None:
            raise TypeError("take: pass either axis= or dim=, not both")
        axis = dim
    if isinstance(indices, (int, np.integer)) and not isinstance(indices, (bool, np.bool_)):
        idx = indices
    else:
        idx = numpy_view(as_array(indices))
        if dtype_kind(idx.dtype) not in "iu":
            raise IndexError(f"take: indices must be integers, got dtype {idx.dtype}")
    if axis is not None:
        axis = normalize_axis(axis, x.ndim, "take")
    n = x.size if axis is None else x.shape[axis]
    if mode == "wrap" and n:
        # NumPy wraps by repeated subtraction (10**18 would loop for minutes): the
        # remainder is the same index
        idx = np.mod(np.asarray(idx, dtype=np.int64), n)
    try:
        res = np.take(numpy_view(x), idx, axis=axis, mode=mode)
    except IndexError as e:
        raise IndexError(f"take: {e} (array shape {shape_str(x.shape)})") from None
    return into_out(wrap(np.asarray(res)), out, "take")


def index_select(x, dim, index):
    """PyTorch's ``index_select``: ``take`` along `dim` with a 1-d index.

    >>> import ember
    >>> ember.index_select(ember.asarray([[1, 2], [3, 4]]), 1, ember.asarray([1])).tolist()
    [[2], [4]]
    """
    return take(x, index, axis=dim)


def take_along_axis(x, /, indices, axis=-1):
    """Pick values with an index array that matches x's shape except along `axis`.

    >>> import ember
    >>> x = ember.asarray([[10, 30, 20]]); i = ember.argsort(x, axis=1)
    >>> ember.take_along_axis(x, i, axis=1).tolist()
    [[10, 20, 30]]
    """
    x = as_array(x)
    try:
        return _copy_of(np.take_along_axis(numpy_view(x), numpy_view(as_array(indices)), axis=axis))
    except (IndexError, ValueError) as e:
        raise type(e)(f"take_along_axis: {e}") from None


def put_along_axis(x, /, indices, values, axis):
    """In place: ``x[..., indices, ...] = values`` along `axis` (the counterpart of take_along_axis).

    >>> import ember
    >>> x = ember.zeros((1, 3)); ember.put_along_axis(x, ember.asarray([[2]]), 5.0, axis=1); x.tolist()
    [[0.0, 0.0, 5.0]]
    """
    _inplace_target(x, "put_along_axis")
    v = numpy_view(as_array(values)) if isinstance(values, ndarray) else values
    try:
        np.put_along_axis(numpy_view(x), numpy_view(as_array(indices)), v, axis=axis)
    except (IndexError, ValueError) as e:
        raise type(e)(f"put_along_axis: {e}") from None
    x._bump_version()


def nonzero(x, /):
    """Indices of the nonzero elements, one int64 array per dimension.

    >>> import ember
    >>> [a.tolist() for a in ember.nonzero(ember.asarray([[0, 1], [2, 0]]))]
    [[0, 1], [1, 0]]
    """
    x = as_array(x)
    if x.ndim == 0:
        raise ValueError("nonzero: calling nonzero on 0d arrays is not allowed; "
                         "use atleast_1d(x).nonzero() instead")
    return tuple(wrap(i.astype(np.int64, copy=False)) for i in np.nonzero(numpy_view(x)))


def argwhere(x, /):
    """Indices of nonzero elements, one row per element.

    >>> import ember
    >>> ember.argwhere(ember.asarray([0, 3, 0, 4])).tolist()
    [[1], [3]]
    """
    return _copy_of(np.argwhere(numpy_view(as_array(x))).astype(np.int64))


def flatnonzero(x, /):
    """Indices of nonzero elements of the flattened array.

    >>> import ember
    >>> ember.flatnonzero(ember.asarray([[0, 1], [1, 0]])).tolist()
    [1, 2]
    """
    return _copy_of(np.flatnonzero(numpy_view(as_array(x))).astype(np.int64))


def compress(condition, x, axis=None):
    """Slices of x where `condition` is true along `axis`.

    >>> import ember
    >>> ember.compress([True, False, True], ember.arange(3)).tolist()
    [0, 2]
    """
    c = numpy_view(as_array(condition))
    return _copy_of(np.compress(c, numpy_view(as_array(x)), axis=axis))


def extract(condition, arr):
    """Elements of `arr` where condition is true (flattened).

    >>> import ember
    >>> ember.extract(ember.asarray([True, False]), ember.asarray([1, 2])).tolist()
    [1]
    """
    return _copy_of(np.extract(numpy_view(as_array(condition)), numpy_view(as_array(arr))))


def _inplace_target(x, opname):
    """The array an in-place function writes into: an ember array (TypeError, as NumPy
    gives, for anything else) that is writeable (NumPy's ValueError)."""
    if not isinstance(x, ndarray):
        raise TypeError(f"{opname}: argument 1 must be an ember array (it is modified in "
                        f"place), not {type(x).__name__}")
    if not x.flags.writeable:
        raise ValueError(f"{opname}: assignment destination is read-only")


def place(x, mask, vals):
    """In place: put `vals` (cycled) where `mask` is true.

    >>> import ember
    >>> x = ember.zeros(3); ember.place(x, ember.asarray([1, 0, 1]), ember.asarray([7.0])); x.tolist()
    [7.0, 0.0, 7.0]
    """
    _inplace_target(x, "place")
    np.place(numpy_view(x), numpy_view(as_array(mask)), numpy_view(as_array(vals)))
    x._bump_version()


def put(a, ind, v, mode="raise"):
    """In place: ``x.flat[indices] = values``.

    >>> import ember
    >>> x = ember.zeros(3); ember.put(x, ember.asarray([2]), ember.asarray([5.0])); x.tolist()
    [0.0, 0.0, 5.0]
    """
    x = a
    _inplace_target(x, "put")
    # values that are not arrays go to NumPy as they are: it converts them into x's dtype
    # with its range checks (-1.5 into uint32, 300.0 into int8 are OverflowErrors)
    vals = numpy_view(v) if isinstance(v, ndarray) else v
    idx = numpy_view(as_array(ind))
    if mode == "wrap" and x.size and idx.size and dtype_kind(idx.dtype) in "iu":
        # NumPy wraps an index by repeated subtraction: 10**18 into 16 elements would loop
        # for minutes; the remainder is the same index
        idx = np.mod(idx.astype(np.int64, copy=False), x.size)
    np.put(numpy_view(x), idx, vals, mode=mode)
    x._bump_version()


def index_add(x, axis, index, source, *, alpha=1, dim=None):
    """A copy of x with ``alpha * source`` added at ``index`` along ``axis``
    (PyTorch's ``index_add``; unbuffered like ``numpy.add.at``, so repeated
    indices accumulate).  ``source`` has x's shape with ``len(index)`` along ``axis``.

    >>> import ember
    >>> ember.index_add(ember.zeros(3), 0, ember.asarray([0, 0, 2]), ember.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    x = as_array(x)
    if dim is not None:
        axis = dim
    ax = normalize_axis(axis, x.ndim, "index_add")
    idx = numpy_view(as_array(index))
    src = as_array(source)
    _check_index_add(x, ax, idx, src)
    idx = idx.reshape(-1).astype(np.intp, copy=False)
    out = x.copy()
    sv = numpy_view(src)
    if alpha != 1:
        sv = sv * alpha
    if x.ndim == 0:
        ov, key, sv = numpy_view(out).reshape(1), idx, sv.reshape(-1)
    else:
        ov, key = numpy_view(out), (slice(None),) * ax + (idx,)
    try:
        np.add.at(ov, key, sv.astype(x.dtype, copy=False))
    except IndexError as e:
        raise IndexError(f"index_add: {e} (x shape {shape_str(x.shape)})") from None
    return out


def scatter_add(x, axis, index, src):
    """PyTorch's ``scatter_add``: a copy of x with src added at positions given by
    `index` (same shape as src) along `axis`; duplicates accumulate.

    >>> import ember
    >>> ember.scatter_add(ember.zeros(3), 0, ember.asarray([2, 2]), ember.ones(2)).tolist()
    [0.0, 0.0, 2.0]
    """
    x = as_array(x)
    ax = normalize_axis(axis, x.ndim, "scatter_add")
    idx = numpy_view(as_array(index))
    s = numpy_view(as_array(src))
    if idx.shape != s.shape:
        raise ValueError(f"scatter_add: index shape {shape_str(idx.shape)} must match src shape "
                         f"{shape_str(s.shape)}")
    out = x.copy()
    grids = list(np.indices(idx.shape, sparse=True))
    grids[ax] = idx
    np.add.at(numpy_view(out), tuple(grids), s)
    return out


def masked_fill(x, mask, value):
    """A copy of x with `value` where `mask` is true (PyTorch's ``masked_fill``).

    >>> import ember
    >>> ember.masked_fill(ember.zeros(3), ember.asarray([True, False, True]), 1.0).tolist()
    [1.0, 0.0, 1.0]
    """
    x = as_array(x)
    # the public where: it runs on the arrays' device
    return _public_ops().where(mask, value, x).astype(x.dtype, copy=False)


# built from ember ops alone (no host-only step): the GPU dispatch runs this same body
masked_fill.device_generic = True


def diag_indices(n, ndim=2):
    """Indices of the main diagonal of an n x ... x n array.

    >>> import ember
    >>> [i.tolist() for i in ember.diag_indices(2)]
    [[0, 1], [0, 1]]
    """
    return tuple(_copy_of(i.astype(np.int64)) for i in np.diag_indices(operator.index(n),
                                                                        operator.index(ndim)))


def tril_indices(n, k=0, m=None):
    """Indices of the lower triangle of an (n, m) array.

    >>> import ember
    >>> [i.tolist() for i in ember.tril_indices(2)]
    [[0, 1, 1], [0, 0, 1]]
    """
    m = None if m is None else operator.index(m)
    return tuple(_copy_of(i.astype(np.int64)) for i in np.tril_indices(operator.index(n),
                                                                       operator.index(k), m))


def triu_indices(n, k=0, m=None):
    """Indices of the upper triangle of an (n, m) array.

    >>> import ember
    >>> [i.tolist() for i in ember.triu_indices(2)]
    [[0, 0, 1], [0, 1, 1]]
    """
    m = None if m is None else operator.index(m)
    return tuple(_copy_of(i.astype(np.int64)) for i in np.triu_indices(operator.index(n),
                                                                       operator.index(k), m))


def ix_(*args):
    """Open mesh index arrays for cross-product indexing.

    >>> import ember
    >>> [i.shape for i in ember.ix_(ember.asarray([0, 1]), ember.asarray([2]))]
    [(2, 1), (1, 1)]
    """
    return tuple(wrap(a) for a in np.ix_(*[numpy_view(as_array(a)) for a in args]))


def select(condlist, choicelist, default=0):
    """Elements from `choicelist` by the first true condition.

    >>> import ember
    >>> x = ember.arange(4); ember.select([x < 2], [x * 10], default=-1).tolist()
    [0, 10, -1, -1]
    """
    return _copy_of(np.select([numpy_view(as_array(c)) for c in condlist],
                              [numpy_view(as_array(c)) for c in choicelist], default))


def choose(a, choices, mode="raise"):
    """Build an array from an index array and a list of choices.

    >>> import ember
    >>> ember.choose(ember.asarray([0, 1]), [ember.asarray([1, 2]), ember.asarray([3, 4])]).tolist()
    [1, 4]
    """
    return _copy_of(np.choose(numpy_view(as_array(a)), [numpy_view(as_array(c)) for c in choices],
                              mode=mode))


def unravel_index(indices, shape):
    """Flat indices -> tuple of coordinate arrays.

    >>> import ember
    >>> [i.tolist() for i in ember.unravel_index(ember.asarray([5]), (2, 3))]
    [[1], [2]]
    """
    return tuple(_copy_of(np.asarray(i, dtype=np.int64)) for i in
                 np.unravel_index(numpy_view(as_array(indices)), shape))


def ravel_multi_index(multi_index, dims, mode="raise"):
    """Coordinate arrays -> flat indices.

    >>> import ember
    >>> ember.ravel_multi_index((ember.asarray([1]), ember.asarray([2])), (2, 3)).tolist()
    [5]
    """
    if isinstance(dims, ndarray):
        dims = numpy_view(dims)             # NumPy's own checks of an array of dims
    return _copy_of(np.asarray(np.ravel_multi_index(tuple(numpy_view(as_array(i)) for i in multi_index),
                                                    dims, mode=mode), dtype=np.int64))
