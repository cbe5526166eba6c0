"""``numpy.lib.stride_tricks`` for ember arrays: ``sliding_window_view`` and
``as_strided``, both views that share the input's memory (no copy).

Both are differentiable: the gradient of a view that reads an element several
times (overlapping windows) is the sum of the gradients at each place it is read
(a scatter-add), as in PyTorch's ``unfold`` / ``as_strided``.

>>> import ember
>>> from ember.lib.stride_tricks import sliding_window_view
>>> x = ember.arange(6.0)
>>> v = sliding_window_view(x, 3)
>>> v.tolist()
[[0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 4.0, 5.0]]
>>> v.mean(axis=-1).tolist()                      # a moving average
[1.0, 2.0, 3.0, 4.0]
"""
import operator

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._api._util import as_array, numpy_view, normalize_axis_tuple, shape_str, wrap
from ember.autograd.registry import defop

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["sliding_window_view", "as_strided"]


def _view(x, shape, strides, writeable):
    """A view of x's storage starting at x's first element (shares memory and version
    counter); read-only unless `writeable`."""
    v = _array._as_strided(x, tuple(shape), tuple(strides), _array._storage_offset_bytes(x))
    if writeable or x.storage.readonly:
        return v
    try:
        v.flags.writeable = False
    except (AttributeError, TypeError, ValueError):
        pass
    if not v.flags.writeable or v.is_cuda:
        return v
    # no per-view read-only flag here: a read-only wrapper of the same memory (zero-copy)
    return wrap(np.lib.stride_tricks.as_strided(numpy_view(x), tuple(shape), tuple(strides),
                                                writeable=False))


def _element_positions(shape, strides, itemsize, opname):
    """Each element's position in memory, in elements from the first one (NumPy ints)."""
    if any(st % itemsize for st in strides):
        raise NotImplementedError(f"{opname}: the gradient needs strides that are multiples "
                                  f"of the itemsize ({itemsize}), got {tuple(strides)}")
    pos = np.zeros((), dtype=np.intp)
    for k, (n, st) in enumerate(zip(shape, strides)):
        step = np.arange(n, dtype=np.intp) * (st // itemsize)
        pos = pos[..., None] + step
    return pos.reshape(tuple(shape))


def _scatter_grad(g, x_shape, x_strides, itemsize, out_shape, out_strides, opname):
    """The gradient of a strided view of x: g summed into every element each output
    element reads (index_add, so it is differentiable again)."""
    import ember as E
    out_pos = _element_positions(out_shape, out_strides, itemsize, opname).reshape(-1)
    x_pos = _element_positions(x_shape, x_strides, itemsize, opname).reshape(-1)
    if x_pos.size == 0:
        return E.zeros(tuple(x_shape), dtype=g.dtype, device=g.device)
    if np.unique(x_pos).size != x_pos.size:
        raise NotImplementedError(f"{opname}: no gradient for an input whose elements share "
                                  f"memory (shape {shape_str(x_shape)}, strides "
                                  f"{tuple(x_strides)}); pass a copy")
    lo = int(min(x_pos.min(), out_pos.min() if out_pos.size else 0))
    hi = int(max(x_pos.max(), out_pos.max() if out_pos.size else 0))
    mem = E.zeros((hi - lo + 1,), dtype=g.dtype, device=g.device)
    if out_pos.size:
        mem = E.index_add(mem, 0, out_pos - lo, E.reshape(g, (-1,)))
    return E.reshape(E.take(mem, x_pos - lo), tuple(x_shape))


def _window_geometry(x, window_shape, axis):
    """NumPy's checks and the (shape, strides) of sliding_window_view(x, ...)."""
    if np.iterable(window_shape):
        window_shape = tuple(operator.index(w) for w in window_shape)
    else:
        window_shape = (operator.index(window_shape),)
    if any(w < 0 for w in window_shape):
        raise ValueError(f"sliding_window_view: window_shape cannot contain negative values, "
                         f"got {window_shape}")
    if axis is None:
        axis = tuple(range(x.ndim))
        if len(window_shape) != len(axis):
            raise ValueError(f"sliding_window_view: since axis is None, window_shape must "
                             f"give a window for every dimension of x; got "
                             f"{len(window_shape)} window_shape elements and x.ndim is {x.ndim}")
    else:
        axis = normalize_axis_tuple(axis, x.ndim, "sliding_window_view", allow_duplicates=True)
        if len(window_shape) != len(axis):
            raise ValueError(f"sliding_window_view: window_shape and axis must have the same "
                             f"length; got {len(window_shape)} window_shape elements and "
                             f"{len(axis)} axes")
    strides = tuple(x.strides) + tuple(x.strides[ax] for ax in axis)
    trimmed = list(x.shape)
    for ax, w in zip(axis, window_shape):
        if trimmed[ax] < w:
            raise ValueError(f"sliding_window_view: window shape {window_shape} cannot be "
                             f"larger than the input array shape {shape_str(x.shape)} "
                             f"(axis {ax})")
        trimmed[ax] -= w - 1
    return tuple(trimmed) + window_shape, strides


def _sliding_window_view_grad(g, res, x, window_shape, axis=None, *, subok=False,
                              writeable=False):
    shape, strides = _window_geometry(x, window_shape, axis)
    return (_scatter_grad(g, x.shape, x.strides, x.itemsize, shape, strides,
                          "sliding_window_view"),)


@defop("sliding_window_view", grad=_sliding_window_view_grad)
def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """NumPy's ``sliding_window_view``: every window of `window_shape` over `axis`
    (None: all axes) as a view of x (the window axes last), read-only unless
    ``writeable=True``.  Differentiable (the gradient sums over overlapping windows).

    >>> import ember
    >>> from ember.lib.stride_tricks import sliding_window_view
    >>> sliding_window_view(ember.arange(12).reshape(3, 4), (2, 2)).shape
    (2, 3, 2, 2)
    >>> x = ember.arange(4.0, requires_grad=True)
    >>> sliding_window_view(x, 2).sum().backward(); x.grad.tolist()
    [1.0, 2.0, 2.0, 1.0]
    """
    x = as_array(x)
    shape, strides = _window_geometry(x, window_shape, axis)
    return _view(x, shape, strides, writeable)


def _as_strided_args(x, shape, strides):
    shape = tuple(x.shape) if shape is None else tuple(operator.index(s) for s in shape)
    strides = tuple(x.strides) if strides is None else tuple(operator.index(s) for s in strides)
    if len(shape) != len(strides):
        raise ValueError(f"as_strided: shape {shape_str(shape)} and strides {strides} must "
                         f"have the same length")
    if any(s < 0 for s in shape):
        raise ValueError(f"as_strided: negative dimensions are not allowed, got shape "
                         f"{shape_str(shape)}")
    return shape, strides


def _as_strided_grad(g, res, x, shape=None, strides=None, subok=False, writeable=True):
    shape, strides = _as_strided_args(x, shape, strides)
    return (_scatter_grad(g, x.shape, x.strides, x.itemsize, shape, strides, "as_strided"),)


@defop("as_strided", grad=_as_strided_grad)
def as_strided(x, shape=None, strides=None, subok=False, writeable=True):
    """NumPy's ``as_strided``: a view of x's memory with the given shape and strides (in
    bytes), starting at x's first element.  Unlike NumPy, a view reaching outside x's
    memory block is refused (ValueError) instead of reading arbitrary memory.
    Differentiable (elements read several times get the sum of their gradients).

    >>> import ember
    >>> from ember.lib.stride_tricks import as_strided
    >>> x = ember.arange(5)
    >>> as_strided(x, shape=(3, 3), strides=(8, 8)).tolist()
    [[0, 1, 2], [1, 2, 3], [2, 3, 4]]
    """
    if not isinstance(x, ndarray):
        x = as_array(x)
    shape, strides = _as_strided_args(x, shape, strides)
    if all(s > 0 for s in shape):
        start = _array._storage_offset_bytes(x)
        lo = start + sum(min(0, (n - 1) * st) for n, st in zip(shape, strides))
        hi = start + sum(max(0, (n - 1) * st) for n, st in zip(shape, strides)) + x.itemsize
        if lo < 0 or hi > x.storage.nbytes:
            raise ValueError(
                f"as_strided: shape {shape_str(shape)} with strides {strides} reaches bytes "
                f"[{lo - start}, {hi - start}) from the array's first element, outside its "
                f"memory (bytes [{-start}, {x.storage.nbytes - start}) of a {x.dtype} array "
                f"of shape {shape_str(x.shape)})")
    return _view(x, shape, strides, writeable)
