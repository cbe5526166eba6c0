"""Sorting, searching and set functions (NumPy's algorithms on zero-copy views).

Sorts are stable by default, also ``descending=True`` (equal elements keep
their original order, as the Array API requires).
"""
import builtins
import operator

import numpy as np

from ember._api._util import as_array, numpy_view, empty_raw, normalize_axis, pick_axis
from ember._core.dtypes import dtype_kind
from ember._core.result_types import UniqueAllResult, UniqueCountsResult, UniqueInverseResult

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["sort", "argsort", "searchsorted", "unique", "unique_values", "unique_counts",
           "unique_inverse", "unique_all", "partition", "argpartition", "lexsort", "msort",
           "bincount", "histogram", "digitize", "isin", "in1d", "intersect1d", "union1d",
           "setdiff1d", "topk"]


def _ember(res):
    res = np.asarray(res)
    if dtype_kind(res.dtype) in "iu" and res.dtype != np.int64 and res.dtype.itemsize == 8:
        res = res.astype(np.int64)
    out = empty_raw(res.shape, res.dtype)
    numpy_view(out)[...] = res
    return out


def _stable_argsort(v, axis, descending):
    if not descending:
        return np.argsort(v, axis=axis, kind="stable")
    # descending and stable: sort the reversed array ascending, then map back
    n = v.shape[axis]
    rev = np.flip(v, axis=axis)
    idx = np.argsort(rev, axis=axis, kind="stable")
    idx = np.flip(idx, axis=axis)
    return (n - 1) - idx


def check_sort_arguments(x, axis, kind, order, opname):
    """NumPy's checks of sort's `kind` and `order` (ember arrays have no fields).  A 0-d
    array sorts to itself, as in PyTorch (the in-place method ``x.sort()`` follows NumPy).

    >>> import ember
    >>> from ember._api.sorting import check_sort_arguments
    >>> check_sort_arguments(ember.ones(3), -1, "stable", None, "sort") is None
    True
    """
    if kind is not None:
        if not isinstance(kind, str):
            raise TypeError(f"{opname}: sort kind must be str, not {type(kind).__name__}")
        if kind[:1].lower() not in ("q", "h", "s", "m"):
            raise ValueError(f"{opname}: sort kind must be one of 'quick', 'heap', or 'stable' "
                             f"(got {kind!r})")
    if order is not None:
        raise ValueError(f"{opname}: cannot specify order when the array has no fields")
    if axis is not None:
        operator.index(axis)        # NumPy's TypeError for a tuple, float or list axis


def argsort(x, /, *, axis=-1, descending=False, stable=True, kind=None, dim=None):
    """Indices that sort x along `axis` (stable; ``descending=True`` too).

    >>> import ember
    >>> ember.argsort(ember.asarray([3, 1, 2])).tolist()
    [1, 2, 0]
    """
    x = as_array(x)
    if dim is None:
        check_sort_arguments(x, axis, kind, None, "argsort")
    axis = pick_axis(axis if dim is None else None, dim, "argsort") if dim is not None else axis
    v = numpy_view(x)
    if axis is None:
        v = v.reshape(-1)
        axis = 0
    if x.ndim == 0:
        return _ember(np.zeros((), dtype=np.int64))
    axis = normalize_axis(axis, v.ndim, "argsort")
    return _ember(_stable_argsort(v, axis, descending).astype(np.int64))


def sort(x, /, *, axis=-1, descending=False, stable=True, kind=None, dim=None):
    """A sorted copy along `axis` (NaNs last, as NumPy).

    >>> import ember
    >>> ember.sort(ember.asarray([3, 1, 2]), descending=True).tolist()
    [3, 2, 1]
    """
    x = as_array(x)
    if dim is None:
        check_sort_arguments(x, axis, kind, None, "sort")
    axis = pick_axis(axis if dim is None else None, dim, "sort") if dim is not None else axis
    v = numpy_view(x)
    if axis is None:
        v = v.reshape(-1)
        axis = 0
    if x.ndim == 0:
        return x.copy()
    axis = normalize_axis(axis, v.ndim, "sort")
    if descending:
        idx = _stable_argsort(v, axis, True)
        return _ember(np.take_along_axis(v, idx, axis=axis))
    return _ember(np.sort(v, axis=axis, kind="stable"))


def msort(x):
    """Sort along the first axis.

    >>> import ember
    >>> ember.msort(ember.asarray([[2], [1]])).tolist()
    [[1], [2]]
    """
    return sort(x, axis=0)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Indices where x2's elements would be inserted into sorted x1.

    >>> import ember
    >>> ember.searchsorted(ember.asarray([1, 3, 5]), ember.asarray([3, 6])).tolist()
    [1, 3]
    """
    a = as_array(x1)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-dimensional, got shape {a.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    v = numpy_view(as_array(x2)) if not np.isscalar(x2) else x2
    s = numpy_view(as_array(sorter)) if sorter is not None else None
    return _ember(np.asarray(np.searchsorted(numpy_view(a), v, side=side, sorter=s), dtype=np.int64))


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, sorted=True):
    """Sorted unique elements (NumPy's ``unique`` with its optional outputs).

    >>> import ember
    >>> ember.unique(ember.asarray([3, 1, 3])).tolist()
    [1, 3]
    """
    sorted = builtins.bool(sorted)          # NumPy's truth test (an array of many raises)
    res = np.unique(numpy_view(as_array(ar)), return_index=return_index,
                    return_inverse=return_inverse, return_counts=return_counts, axis=axis,
                    equal_nan=equal_nan)
    if isinstance(res, tuple):
        return tuple(_ember(r) for r in res)
    return _ember(res)


def _unique_sorted(x, index=False, inverse=False, counts=False):
    """The Array API's unique_* outputs, sorted (NumPy 2.3+'s unique_* leave the order
    unspecified): values, then first indices, inverse indices (x's shape), counts as
    asked.  NaNs are distinct, as the standard says."""
    v = numpy_view(as_array(x))
    r = np.unique(v.reshape(-1), return_index=index, return_inverse=inverse,
                  return_counts=counts, equal_nan=False)
    r = list(r) if isinstance(r, tuple) else [r]
    if inverse:
        k = 1 + index
        r[k] = r[k].reshape(v.shape)
    return [_ember(a) for a in r]


def unique_values(x, /):
    """Array API: the unique elements, sorted (NaNs are distinct, last).

    >>> import ember
    >>> ember.unique_values(ember.asarray([1, 0, 1, 3, 2, 0])).tolist()
    [0, 1, 2, 3]
    """
    return _unique_sorted(x)[0]


def unique_counts(x, /):
    """Array API: the sorted unique elements and how often each occurs.

    >>> import ember
    >>> ember.unique_counts(ember.asarray([2, 2, 1])).counts.tolist()
    [1, 2]
    """
    return UniqueCountsResult(*_unique_sorted(x, counts=True))


def unique_inverse(x, /):
    """Array API: the sorted unique elements and the indices that rebuild x (x's shape).

    >>> import ember
    >>> ember.unique_inverse(ember.asarray([2, 1, 2])).inverse_indices.tolist()
    [1, 0, 1]
    """
    return UniqueInverseResult(*_unique_sorted(x, inverse=True))


def unique_all(x, /):
    """Array API: sorted unique values, first indices, inverse indices and counts.

    >>> import ember
    >>> ember.unique_all(ember.asarray([2, 1, 2])).indices.tolist()
    [1, 0]
    """
    return UniqueAllResult(*_unique_sorted(x, index=True, inverse=True, counts=True))


def partition(a, kth, axis=-1):
    """A copy with the k-th element in its sorted place (NumPy's ``partition``).

    >>> import ember
    >>> ember.partition(ember.asarray([3, 1, 2]), 1)[1].item()
    2
    """
    return _ember(np.partition(numpy_view(as_array(a)), kth, axis=axis))


def argpartition(a, kth, axis=-1):
    """Indices that would partition x.

    >>> import ember
    >>> ember.argpartition(ember.asarray([3, 1, 2]), 0)[0].item()
    1
    """
    return _ember(np.argpartition(numpy_view(as_array(a)), kth, axis=axis).astype(np.int64))


def lexsort(keys, axis=-1):
    """Indirect stable sort by several keys (the last key is primary).

    >>> import ember
    >>> ember.lexsort([ember.asarray([1, 0]), ember.asarray([0, 0])]).tolist()
    [1, 0]
    """
    return _ember(np.lexsort([numpy_view(as_array(k)) for k in keys], axis=axis).astype(np.int64))


def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) elements along `dim` and their indices (PyTorch).

    >>> import ember
    >>> v, i = ember.topk(ember.asarray([1, 5, 3]), 2); v.tolist(), i.tolist()
    ([5, 3], [1, 2])
    """
    from ember._api.indexing import take_along_axis
    idx = argsort(x, axis=dim, descending=largest)
    x = as_array(x)
    ax = normalize_axis(dim, x.ndim, "topk")
    if not 0 <= k <= x.shape[ax]:
        raise ValueError(f"topk: k={k} is out of range for axis {dim} of length {x.shape[ax]}")
    idx = idx[(slice(None),) * ax + (slice(0, k),)]
    return take_along_axis(x, idx, axis=ax), idx.copy()


def bincount(x, /, weights=None, minlength=0):
    """Count occurrences of each non-negative integer.

    >>> import ember
    >>> ember.bincount(ember.asarray([0, 2, 2])).tolist()
    [1, 0, 2]
    """
    w = numpy_view(as_array(weights)) if weights is not None else None
    return _ember(np.bincount(numpy_view(as_array(x)), weights=w, minlength=minlength))


def histogram(a, bins=10, range=None, density=None, weights=None):
    """Histogram of the values (counts, bin edges).

    >>> import ember
    >>> ember.histogram(ember.asarray([1.0, 2.0, 2.5]), bins=2)[0].tolist()
    [1, 2]
    """
    w = numpy_view(as_array(weights)) if weights is not None else None
    b = numpy_view(as_array(bins)) if not isinstance(bins, (int, str)) else bins
    h, e = np.histogram(numpy_view(as_array(a)), bins=b, range=range, density=density, weights=w)
    return _ember(h), _ember(e)


def digitize(x, bins, right=False):
    """Indices of the bins each value falls into.

    >>> import ember
    >>> ember.digitize(ember.asarray([0.5, 1.5]), ember.asarray([1.0])).tolist()
    [0, 1]
    """
    return _ember(np.digitize(numpy_view(as_array(x)), numpy_view(as_array(bins)), right=right).astype(np.int64))


def isin(element, test_elements, assume_unique=False, invert=False):
    """Elementwise membership test.

    >>> import ember
    >>> ember.isin(ember.asarray([1, 2]), ember.asarray([2])).tolist()
    [False, True]
    """
    return _ember(np.isin(numpy_view(as_array(element)), numpy_view(as_array(test_elements)),
                          assume_unique=assume_unique, invert=invert))


in1d = isin


def intersect1d(ar1, ar2, assume_unique=False):
    """Sorted common unique values.

    >>> import ember
    >>> ember.intersect1d(ember.asarray([1, 2]), ember.asarray([2, 3])).tolist()
    [2]
    """
    return _ember(np.intersect1d(numpy_view(as_array(ar1)), numpy_view(as_array(ar2)),
                                 assume_unique))


def union1d(ar1, ar2):
    """Sorted union of unique values.

    >>> import ember
    >>> ember.union1d(ember.asarray([1, 2]), ember.asarray([2, 3])).tolist()
    [1, 2, 3]
    """
    return _ember(np.union1d(numpy_view(as_array(ar1)), numpy_view(as_array(ar2))))


def setdiff1d(ar1, ar2, assume_unique=False):
    """Sorted unique values of a that are not in b.

    >>> import ember
    >>> ember.setdiff1d(ember.asarray([1, 2]), ember.asarray([2, 3])).tolist()
    [1]
    """
    a, b = ar1, ar2
    return _ember(np.setdiff1d(numpy_view(as_array(a)), numpy_view(as_array(b)), assume_unique))
