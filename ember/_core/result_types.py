"""The Array API's named results of ``unique_all`` / ``unique_counts`` /
``unique_inverse``, shared by the host definitions (ember._api.sorting) and the GPU
backend (ember.cuda.ops_select), which sits under them.

>>> UniqueCountsResult([1], [2]).counts
[2]
"""
from collections import namedtuple

__all__ = ["UniqueAllResult", "UniqueCountsResult", "UniqueInverseResult"]

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])
