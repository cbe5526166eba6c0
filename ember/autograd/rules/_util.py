"""Helpers shared by gradient rules."""
from ember._api._util import normalize_axis_tuple


def axes_of(axis, ndim, opname):
    """axis (None / int / tuple) as a sorted tuple of non-negative axes."""
    return tuple(sorted(normalize_axis_tuple(axis, ndim, opname)))
