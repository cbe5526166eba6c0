"""Named tuples that PyTorch-style calls return (``torch.return_types``).

``x.max(dim=1)``, ``ember.sort(x, dim=0)``, ``ember.topk(x, k)`` and
``ember.median(x, dim=0)`` return ``(values, indices)`` with these field
names, so both ``v, i = x.max(dim=1)`` and ``x.max(dim=1).indices`` work.

>>> import ember
>>> r = ember.asarray([[1, 5], [7, 2]]).max(dim=1)
>>> r.values.tolist(), r.indices.tolist(), type(r).__name__
([5, 7], [1, 0], 'max')
"""
from collections import namedtuple

__all__ = ["max", "min", "sort", "topk", "median", "nanmedian"]

max = namedtuple("max", ["values", "indices"])                 # noqa: A001
min = namedtuple("min", ["values", "indices"])                 # noqa: A001
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
nanmedian = namedtuple("nanmedian", ["values", "indices"])
for _t in (max, min, sort, topk, median, nanmedian):
    _t.__module__ = __name__
del _t
