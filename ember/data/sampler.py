"""Samplers: which indices a DataLoader visits, and in what order (PyTorch's API).

Random samplers take ``generator=``: an ``ember.random.Generator``
(``ember.random.default_rng(seed)``), a NumPy ``Generator``, or an int seed
(turned into a generator once, so successive epochs differ but a run is
reproducible).  Without one, ``RandomSampler`` draws a fresh seed from
ember.random's global generator at every epoch, so ``ember.random.seed(s)``
makes the shuffling reproducible.

>>> from ember.data import BatchSampler, SequentialSampler
>>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
[[0, 1], [2, 3], [4]]
"""
import itertools
import operator

import numpy as np

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]

_SEED_HIGH = 2 ** 63 - 1


# ------------------------------------------------------------------ generators

def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _normalize_generator(generator, where):
    """None / ember Generator / NumPy Generator stay as they are; an int seed becomes
    an ember Generator (created once, so successive draws differ)."""
    if generator is None or _is_int(generator):
        if generator is not None:
            import ember.random
            return ember.random.default_rng(int(generator))
        return None
    if hasattr(generator, "_g") and isinstance(generator._g, np.random.Generator):
        return generator
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(f"{where}: generator must be an ember.random.Generator, a NumPy Generator, "
                    f"an int seed or None, got {type(generator).__name__}")


def _numpy_rng(generator):
    """The NumPy Generator behind `generator` (None: a fresh one seeded from
    ember.random's global generator, which ``ember.random.seed`` resets)."""
    if generator is None:
        return np.random.default_rng(_global_seed())
    if isinstance(generator, np.random.Generator):
        return generator
    if _is_int(generator):
        return np.random.default_rng(int(generator))
    return generator._g            # ember.random.Generator wraps a NumPy Generator


def _global_seed():
    import ember.random
    return int(ember.random.integers(0, _SEED_HIGH))


def _draw_seed(generator):
    """A 63-bit seed from `generator` (ember.random's global generator when None)."""
    if generator is None:
        return _global_seed()
    return int(_numpy_rng(generator).integers(0, _SEED_HIGH))


# ------------------------------------------------------------------ samplers

class Sampler:
    """Base class of all samplers: subclasses define ``__iter__`` (and usually ``__len__``).

    >>> from ember.data import Sampler
    >>> class Evens(Sampler):
    ...     def __init__(self, n): self.n = n
    ...     def __iter__(self): return iter(range(0, self.n, 2))
    ...     def __len__(self): return (self.n + 1) // 2
    >>> list(Evens(5))
    [0, 2, 4]
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1 in order.

    >>> from ember.data import SequentialSampler
    >>> list(SequentialSampler(range(3)))
    [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Random order (a fresh permutation per pass), or ``num_samples`` draws with
    replacement.

    >>> import ember
    >>> from ember.data import RandomSampler
    >>> sorted(RandomSampler(range(4), generator=ember.random.default_rng(0)))
    [0, 1, 2, 3]
    >>> len(RandomSampler(range(4), replacement=True, num_samples=10))
    10
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = _normalize_generator(generator, "RandomSampler")
        if not isinstance(self.replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) \
                or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        rng = _numpy_rng(self.generator)
        m = self.num_samples
        if self.replacement:
            yield from rng.integers(0, n, size=m, dtype=np.int64).tolist()
        else:
            for _ in range(m // n):
                yield from rng.permutation(n).tolist()
            if m % n:
                yield from rng.permutation(n)[:m % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order (without replacement).

    >>> import ember
    >>> from ember.data import SubsetRandomSampler
    >>> sorted(SubsetRandomSampler([5, 7, 9], generator=ember.random.default_rng(1)))
    [5, 7, 9]
    """

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = _normalize_generator(generator, "SubsetRandomSampler")

    def __iter__(self):
        rng = _numpy_rng(self.generator)
        for i in rng.permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``.

    >>> import ember
    >>> from ember.data import WeightedRandomSampler
    >>> s = WeightedRandomSampler([0.0, 1.0, 0.0], 4, generator=ember.random.default_rng(0))
    >>> list(s)
    [1, 1, 1, 1]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given "
                             f"weights have shape {tuple(w.shape)}")
        import ember
        self.weights = ember.asarray(w)
        self._w = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = _normalize_generator(generator, "WeightedRandomSampler")

    def __iter__(self):
        w = self._w
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        total = w.sum()
        if not total > 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not self.replacement and self.num_samples > w.shape[0]:
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples "
                               "without replacement")
        rng = _numpy_rng(self.generator)
        m = self.num_samples
        if self.replacement:
            draws = rng.choice(w.shape[0], size=m, replace=True, p=w / total)
        else:
            # successive draws without replacement = the order in which independent
            # exponential clocks of rates w ring; zero weights come last, in random order
            pos = np.flatnonzero(w > 0)
            order = pos[np.argsort(rng.exponential(size=pos.size) / w[pos], kind="stable")]
            if m > pos.size:
                zeros = rng.permutation(np.flatnonzero(w == 0))
                order = np.concatenate([order, zeros])
            draws = order[:m]
        yield from draws.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size``.

    >>> from ember.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=True))
    [[0, 1], [2, 3]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        if self.drop_last:
            for batch in zip(*([it] * self.batch_size)):
                yield [*batch]
        else:
            batch = [*itertools.islice(it, self.batch_size)]
            while batch:
                yield batch
                batch = [*itertools.islice(it, self.batch_size)]

    def __len__(self):
        n = operator.index(len(self.sampler))
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size
