"""Sorting and selection on GPU arrays, with the CPU's signatures, results and errors:
``sort`` / ``argsort`` (stable, ``descending=`` and ``dim=`` too), ``msort``, ``topk``,
``take`` / ``index_select`` / ``take_along_axis`` and ``put_along_axis``
(``masked_fill`` is its own definition, ember/_api/indexing.py, on either device).

CuPy's functions of these names lack ember's keywords (``descending``, ``dim``) or
wrap an out-of-range index around silently; here the sorts run through CuPy's stable
sort and every index array is bounds-checked as in ember.cuda.ops_core: reads queue
the check for the next synchronisation, the in-place ``put_along_axis`` waits for it.
"""
import numpy as np

from ember._core.array import ndarray
from ember._core.dtypes import dtype_kind
from ember._core.util import normalize_axis, shape_str
from ember._core.util import into_out
from ember.cuda import _runtime as R
from ember.cuda._dispatch import gpu_op
from ember._core.result_types import UniqueAllResult, UniqueCountsResult, UniqueInverseResult
from ember.cuda.ops_core import _check_range, _index_arg, along_axis_key

_I64 = np.dtype(np.int64)


def _stable_argsort(v, axis, descending):
    """Stable argsort of CuPy array v along axis; descending keeps equal elements in
    their original order (sort the reversed array ascending, then map back)."""
    c = R.cp()
    if not descending:
        return c.argsort(v, axis=axis)
    n = v.shape[axis]
    idx = c.flip(c.argsort(c.flip(v, axis=axis), axis=axis), axis=axis)
    return (n - 1) - idx


def _sort_input(x, axis, dim, opname):
    """(CuPy view, axis) for a sort along `axis` (dim= wins, as on the CPU; None flattens)."""
    axis = dim if dim is not None else axis
    v = R.as_cupy(x)
    if axis is None:
        return v.reshape(-1), 0
    return v, normalize_axis(axis, v.ndim, opname)


@gpu_op("argsort")
def argsort(x, /, *, axis=-1, descending=False, stable=True, kind=None, dim=None):
    """Indices that sort GPU array x along `axis` (stable; ``descending=True`` too)."""
    if x.ndim == 0:                     # as on the CPU (PyTorch's rule), axis=None too
        return R.from_cupy(R.cp().zeros((), _I64))
    v, ax = _sort_input(x, axis, dim, "argsort")
    return R.from_cupy(_stable_argsort(v, ax, descending).astype(_I64, copy=False))


@gpu_op("sort")
def sort(x, /, *, axis=-1, descending=False, stable=True, kind=None, dim=None):
    """A sorted copy of GPU array x along `axis` (NaNs last; stable when descending)."""
    if x.ndim == 0:
        return x.copy()
    c = R.cp()
    v, ax = _sort_input(x, axis, dim, "sort")
    if descending:
        return R.from_cupy(c.take_along_axis(v, _stable_argsort(v, ax, True), axis=ax))
    return R.from_cupy(c.sort(v, axis=ax))


@gpu_op("msort")
def msort(x):
    """GPU array x sorted along its first axis."""
    return sort(x, axis=0)


@gpu_op("topk")
def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) elements of GPU array x along `dim`, and their indices."""
    ax = normalize_axis(dim, x.ndim, "topk")
    if not 0 <= k <= x.shape[ax]:
        raise ValueError(f"topk: k={k} is out of range for axis {dim} of length {x.shape[ax]}")
    c = R.cp()
    v = R.as_cupy(x)
    idx = _stable_argsort(v, ax, largest)[(slice(None),) * ax + (slice(0, k),)]
    idx = c.ascontiguousarray(idx.astype(_I64, copy=False))
    return R.from_cupy(c.take_along_axis(v, idx, axis=ax)), R.from_cupy(idx)


def _integer_indices(indices, device, opname):
    """indices as a CuPy integer array on `device` (the CPU's IndexError otherwise)."""
    idx = _index_arg(indices, device)
    if dtype_kind(idx.dtype) not in "iu":
        raise IndexError(f"{opname}: indices must be integers, got dtype {idx.dtype}")
    return idx


@gpu_op("take")
def take(x, /, indices, *, axis=None, out=None, mode="raise", dim=None):
    """Elements of GPU array x at `indices` along `axis` (NumPy's modes; 'raise' is
    checked at the next synchronisation)."""
    if dim is not None:
        if axis is not None:
            raise TypeError("take: pass either axis= or dim=, not both")
        axis = dim
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    c = R.cp()
    scalar = isinstance(indices, (int, np.integer)) and not isinstance(indices, (bool, np.bool_))
    idx = c.asarray(int(indices), dtype=_I64) if scalar else \
        _integer_indices(indices, x.device, "take")
    v = R.as_cupy(x)
    if axis is None:
        v, ax = v.reshape(-1), 0
    else:
        ax = normalize_axis(axis, x.ndim, "take")
    n = v.shape[ax]
    if idx.size and n == 0:
        raise IndexError(f"take: cannot do a non-empty take from an empty axis (array shape "
                         f"{shape_str(x.shape)})")
    if mode == "raise":
        _check_range(idx, n, ax, x.shape)
    elif mode == "wrap" and idx.size:
        idx = idx % n
    elif idx.size:
        idx = c.clip(idx, 0, n - 1)
    res = c.take(v, idx, axis=ax) if idx.size or n else \
        c.empty(v.shape[:ax] + idx.shape + v.shape[ax + 1:], v.dtype)
    return into_out(R.from_cupy(res), out, "take")


@gpu_op("index_select")
def index_select(x, dim, index):
    """PyTorch's ``index_select`` on a GPU array: ``take`` along `dim`."""
    return take(x, index, axis=dim)


def _along_axis(x, indices, axis, opname):
    """(CuPy x, CuPy indices, axis) for take/put_along_axis, with NumPy's shape rules."""
    v = R.as_cupy(x)
    idx = _integer_indices(indices, x.device, opname)
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(f"{opname}: when axis=None, indices must have a single "
                             f"dimension, got shape {shape_str(idx.shape)}")
        return v.reshape(-1), idx, 0
    ax = normalize_axis(axis, v.ndim, opname)
    if idx.ndim != v.ndim:
        raise ValueError(f"{opname}: indices and x must have the same number of dimensions, "
                         f"got shapes {shape_str(idx.shape)} and {shape_str(x.shape)}")
    return v, idx, ax


@gpu_op("take_along_axis")
def take_along_axis(x, /, indices, axis=-1):
    """Values of GPU array x at `indices` along `axis` (bounds checked)."""
    v, idx, ax = _along_axis(x, indices, axis, "take_along_axis")
    _check_range(idx, v.shape[ax], ax, x.shape)
    try:
        return R.from_cupy(R.cp().take_along_axis(v, idx, axis=ax))
    except (IndexError, ValueError) as e:
        raise type(e)(f"take_along_axis: {e}") from None


@gpu_op("put_along_axis")
def put_along_axis(x, /, indices, values, axis):
    """In place: GPU array x at `indices` along `axis` set to `values` (an index out of
    range raises before anything is written)."""
    v, idx, ax = _along_axis(x, indices, axis, "put_along_axis")
    _check_range(idx, v.shape[ax], ax, x.shape, wait=True)
    vals = _index_arg(values, x.device) if isinstance(values, (ndarray, np.ndarray, list)) \
        else values
    c = R.cp()
    try:
        vals = c.broadcast_to(c.asarray(vals, dtype=v.dtype), idx.shape)
        if axis is None:
            # flat positions into x itself (reshape(-1) of a strided x would be a copy)
            v, key = R.as_cupy(x), c.unravel_index(idx % max(v.size, 1), x.shape)
        else:
            key = along_axis_key(idx, ax)
        v[key] = vals
    except (IndexError, ValueError) as e:
        raise type(e)(f"put_along_axis: {e}") from None
    x._bump_version()


@gpu_op("put")
def put(x, indices, values, mode="raise"):
    """In place: the flat positions `indices` of GPU array x set to `values` (repeated
    cyclically; NumPy's modes, an index out of range raises before anything is written)."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    c = R.cp()
    idx = _integer_indices(indices, x.device, "put").reshape(-1)
    n = x.size
    if idx.size == 0:
        return
    if n == 0:
        raise IndexError("put: cannot replace in an empty array (array shape "
                         f"{shape_str(x.shape)})")
    if mode == "raise":
        _check_range(idx, n, 0, (n,), wait=True)
    idx = idx % n if mode != "clip" else c.clip(idx, 0, n - 1)
    vals = _index_arg(values, x.device) if isinstance(values, (ndarray, np.ndarray, list)) \
        else c.asarray(values)
    vals = vals.reshape(-1).astype(x.dtype, copy=False)
    if vals.size == 0:
        return
    vals = c.tile(vals, -(-idx.size // vals.size))[:idx.size]
    R.as_cupy(x)[c.unravel_index(idx, x.shape)] = vals
    x._bump_version()


@gpu_op("lexsort")
def lexsort(keys, axis=-1):
    """Indirect stable sort of GPU keys along `axis`, the last key primary: one stable
    argsort per key, least significant first (CuPy's lexsort has no axis)."""
    c = R.cp()
    if isinstance(keys, ndarray):
        ks = [R.as_cupy(keys)[i] for i in range(keys.shape[0])] if keys.ndim > 1 \
            else [R.as_cupy(keys)]
        device = keys.device
    else:
        device = next(k.device for k in keys if isinstance(k, ndarray) and k.is_cuda)
        ks = [_index_arg(k, device) for k in keys]
    if not ks:
        raise TypeError("lexsort: need a sequence of keys with length > 0")
    shape = ks[0].shape
    if any(k.shape != shape for k in ks):
        raise ValueError(f"lexsort: all keys need the same shape, got "
                         f"{[tuple(k.shape) for k in ks]}")
    if not shape:
        return R.from_cupy(c.zeros((), _I64))
    ax = normalize_axis(axis, len(shape), "lexsort")
    order = c.broadcast_to(c.arange(shape[ax], dtype=_I64).reshape(
        (-1,) + (1,) * (len(shape) - ax - 1)), shape)
    for k in ks:
        step = c.argsort(c.take_along_axis(k, order, axis=ax), axis=ax)
        order = c.take_along_axis(order, step, axis=ax)
    return R.from_cupy(c.ascontiguousarray(order.astype(_I64, copy=False)))


@gpu_op("unique")
def unique(ar, *args, sorted=True, **kwargs):
    """ember.unique of a GPU array by CuPy's, whose results are always sorted (so
    ``sorted=False``, which leaves the order unspecified, is met too)."""
    from ember.cuda._dispatch import cupy_call
    return cupy_call("unique", (ar,) + args, kwargs)


def _unique_sorted(x, index=False, inverse=False, counts=False):
    """The Array API's unique_* outputs of GPU array x by cupy.unique (sorted, NaNs
    distinct), as ember.sorting's host version: values, first indices, inverse indices
    in x's shape, counts as asked."""
    v = R.as_cupy(x)
    r = R.cp().unique(v.reshape(-1), return_index=index, return_inverse=inverse,
                      return_counts=counts, equal_nan=False)
    r = list(r) if isinstance(r, tuple) else [r]
    if inverse:
        r[1 + index] = r[1 + index].reshape(v.shape)
    return [R.from_cupy(a if a.dtype.kind not in "iu" or a.dtype.itemsize != 8
                        else a.astype(_I64, copy=False)) for a in r]


@gpu_op("unique_values")
def unique_values(x):
    """Sorted unique elements of GPU array x."""
    return _unique_sorted(x)[0]


@gpu_op("unique_counts")
def unique_counts(x):
    """Sorted unique elements of GPU array x and their counts."""
    return UniqueCountsResult(*_unique_sorted(x, counts=True))


@gpu_op("unique_inverse")
def unique_inverse(x):
    """Sorted unique elements of GPU array x and the indices that rebuild it."""
    return UniqueInverseResult(*_unique_sorted(x, inverse=True))


@gpu_op("unique_all")
def unique_all(x):
    """Sorted unique elements of GPU array x, first indices, inverse indices, counts."""
    return UniqueAllResult(*_unique_sorted(x, index=True, inverse=True, counts=True))
