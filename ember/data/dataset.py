"""Datasets (PyTorch's ``torch.utils.data`` classes).

A map-style ``Dataset`` answers ``dataset[i]`` and ``len(dataset)``; an
``IterableDataset`` is iterated.  ``TensorDataset`` slices arrays along their
first axis; ``Subset``, ``ConcatDataset``, ``ChainDataset`` and
``StackDataset`` combine datasets; ``random_split`` splits one into random,
non-overlapping ``Subset`` s.

>>> import ember
>>> from ember.data import TensorDataset
>>> ds = TensorDataset(ember.arange(6).reshape(3, 2), ember.asarray([0, 1, 0]))
>>> len(ds), [a.tolist() for a in ds[1]]
(3, [[2, 3], 1])
"""
import bisect
import itertools
import math
import warnings

import numpy as np

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
           "ChainDataset", "Subset", "random_split"]


class Dataset:
    """Base class of map-style datasets: define ``__getitem__`` (and ``__len__``).

    ``a + b`` concatenates two datasets.

    >>> from ember.data import Dataset
    >>> class Squares(Dataset):
    ...     def __getitem__(self, i): return i * i
    ...     def __len__(self): return 4
    >>> ds = Squares() + Squares()
    >>> len(ds), ds[5]
    (8, 1)
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Base class of iterable-style datasets: define ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy; use
    ``ember.data.get_worker_info()`` inside ``__iter__`` to give each worker
    its own share (otherwise each sample arrives once per worker).

    >>> from ember.data import IterableDataset, DataLoader
    >>> class Count(IterableDataset):
    ...     def __iter__(self): return iter(range(5))
    >>> [b.tolist() for b in DataLoader(Count(), batch_size=2)]
    [[0, 1], [2, 3], [4]]
    """

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


def _first_dim(t):
    shape = getattr(t, "shape", None)
    if shape is None or len(shape) == 0:
        raise ValueError("TensorDataset: every array needs at least one dimension, got a "
                         f"{type(t).__name__} of shape {shape}")
    return shape[0]


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in arrays)``; all arrays share their first
    dimension.  NumPy arrays are wrapped as ember arrays without copying.

    >>> import ember
    >>> from ember.data import TensorDataset
    >>> ds = TensorDataset(ember.ones((4, 3)), ember.arange(4))
    >>> len(ds), ds[2][0].shape, int(ds[2][1])
    (4, (3,), 2)
    """

    def __init__(self, *tensors):
        from ember._api._util import as_array
        if not tensors:
            raise ValueError("TensorDataset: need at least one array")
        tensors = tuple(as_array(t) if isinstance(t, np.ndarray) else t for t in tensors)
        n = _first_dim(tensors[0])
        if any(n != _first_dim(t) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self):
        return _first_dim(self.tensors[0])

    def _gather(self, indices, alloc):
        """The default-collated batch for `indices` (what default_collate makes of
        ``[self[i] for i in indices]``) gathered in one pass per array; None when
        that shortcut does not apply."""
        from ember._core.array import ndarray
        from ember._api._util import numpy_view
        from ember.autograd.grad_mode import is_grad_enabled
        ts = self.tensors
        if not indices or not all(type(t) is ndarray for t in ts):
            return None
        if is_grad_enabled() and any(t.requires_grad for t in ts):
            return None
        n = _first_dim(ts[0])
        try:
            idx = np.asarray(indices, dtype=np.intp)
        except (TypeError, ValueError, OverflowError):
            return None
        if idx.ndim != 1:
            return None
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(f"index {bad} is out of bounds for dimension 0 with size {n}")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
        out = []
        for t in ts:
            src = numpy_view(t)
            res, view = alloc((idx.shape[0],) + src.shape[1:], src.dtype)
            np.take(src, idx, axis=0, out=view, mode="clip")    # bounds checked above
            out.append(res)
        return out


class StackDataset(Dataset):
    """Samples of several same-length datasets side by side: a tuple (positional
    datasets) or a dict (keyword datasets).

    >>> from ember.data import StackDataset
    >>> StackDataset(x=[1, 2], y=["a", "b"])[1]
    {'x': 2, 'y': 'b'}
    """

    def __init__(self, *args, **kwargs):
        if args:
            if kwargs:
                raise ValueError("Supported either ``tuple``- (via ``args``) or"
                                 "``dict``- (via ``kwargs``) like input/output, but both types "
                                 "are given.")
            self._length = len(args[0])
            if any(self._length != len(d) for d in args):
                raise ValueError("Size mismatch between datasets")
            self.datasets = args
        elif kwargs:
            tmp = list(kwargs.values())
            self._length = len(tmp[0])
            if any(self._length != len(d) for d in tmp):
                raise ValueError("Size mismatch between datasets")
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        def column(d):
            if callable(getattr(d, "__getitems__", None)):
                items = d.__getitems__(indices)
                if len(items) != len(indices):
                    raise ValueError("Nested dataset's output size mismatch. "
                                     f"Expected {len(indices)}, got {len(items)}")
                return items
            return [d[i] for i in indices]
        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: cols[k][j] for k in cols} for j in range(len(indices))]
        cols = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols) for j in range(len(indices))]

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """Several map-style datasets one after the other.

    >>> from ember.data import ConcatDataset
    >>> ds = ConcatDataset([[1, 2], [3, 4, 5]])
    >>> len(ds), ds[2], ds[-1], ds.cumulative_sizes
    (5, 3, 5, [2, 5])
    """

    @staticmethod
    def cumsum(sequence):
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if d == 0 else idx - self.cumulative_sizes[d - 1]
        return self.datasets[d][sample_idx]


class ChainDataset(IterableDataset):
    """Several iterable datasets one after the other.

    >>> from ember.data import ChainDataset, IterableDataset
    >>> class R(IterableDataset):
    ...     def __init__(self, n): self.n = n
    ...     def __iter__(self): return iter(range(self.n))
    >>> list(ChainDataset([R(2), R(3)]))
    [0, 1, 0, 1, 2]
    """

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``.

    >>> from ember.data import Subset
    >>> s = Subset(["a", "b", "c", "d"], [3, 1])
    >>> len(s), s[0], s.__getitems__([0, 1])
    (2, 'd', ['d', 'b'])
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices
        if (type(self).__getitem__ is not Subset.__getitem__
                and type(self).__getitems__ is Subset.__getitems__):
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. "
                "When subclassing Subset and overriding __getitem__, you must also override "
                "__getitems__ to ensure DataLoader works correctly with your custom logic. "
                "A simple implementation:\n\n"
                "def __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random ``Subset`` s of the given
    lengths, or fractions summing to 1 (the remainder goes one by one to the
    first splits, as in PyTorch).  ``generator``: an ``ember.random.Generator``
    or int seed (default: ember.random's global generator).

    >>> import ember
    >>> from ember.data import random_split
    >>> a, b, c = random_split(range(10), [0.5, 0.3, 0.2], generator=ember.random.default_rng(0))
    >>> len(a), len(b), len(c), sorted(list(a) + list(b) + list(c)) == list(range(10))
    (5, 3, 2, True)
    """
    from ember.data.sampler import _normalize_generator, _numpy_rng
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(math.floor(len(dataset) * frac))
        remainder = len(dataset) - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. "
                              f"This might result in an empty dataset.", stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    for i, length in enumerate(lengths):
        if not isinstance(length, (int, np.integer)) or length < 0:
            raise ValueError(f"random_split: length at index {i} must be a non-negative int, "
                             f"got {length!r}")
    rng = _numpy_rng(_normalize_generator(generator, "random_split"))
    indices = rng.permutation(sum(lengths)).tolist()
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(itertools.accumulate(lengths), lengths)]
