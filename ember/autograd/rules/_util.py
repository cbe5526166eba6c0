"""Helpers shared by gradient rules."""
import ember as E
from ember._api._util import normalize_axis_tuple


def axes_of(axis, ndim, opname):
    """axis (None / int / tuple) as a sorted tuple of non-negative axes."""
    return tuple(sorted(normalize_axis_tuple(axis, ndim, opname)))


def unreduce(g, shape, axis, keepdims, opname="reduction"):
    """The gradient of a reduction over `axis` broadcast back to the input `shape`."""
    axes = axes_of(axis, len(shape), opname)
    if not keepdims and axes:
        g = E.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return E.broadcast_to(g, tuple(shape))
