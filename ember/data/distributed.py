"""DistributedSampler: each rank visits its own share of the dataset (PyTorch's
``torch.utils.data.DistributedSampler``, same semantics).

The indices (shuffled with seed ``seed + epoch`` when ``shuffle``; call
``set_epoch(e)`` at the start of every epoch so each epoch has a new order that is the
same on every rank) are padded by repeating the first ones until their number divides
by ``num_replicas`` (or, with ``drop_last``, cut to the largest such number), and rank
r takes every ``num_replicas``-th index starting at r.  The shuffled order comes from
NumPy's generator (``numpy.random.default_rng(seed + epoch).permutation``), so it is
not PyTorch's ``randperm`` order; everything else is identical.

>>> from ember.data import DistributedSampler
>>> [list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False)) for r in (0, 1)]
[[0, 2, 4], [1, 3, 0]]
>>> s = DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False, drop_last=True)
>>> list(s), len(s)
([1, 3], 2)
"""
import math

import numpy as np

from ember.data.sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Restricts loading to this rank's part of `dataset` (see the module docstring).

    ``num_replicas`` / ``rank`` default to the default process group's world size and
    rank (``ember.distributed.init_process_group`` must have been called).

    >>> from ember.data import DistributedSampler
    >>> s0 = DistributedSampler(range(8), num_replicas=2, rank=0, seed=1)
    >>> s1 = DistributedSampler(range(8), num_replicas=2, rank=1, seed=1)
    >>> s0.set_epoch(3); s1.set_epoch(3)
    >>> a, b = list(s0), list(s1)
    >>> len(a), sorted(a + b) == list(range(8)), a == list(s0)
    (4, True, True)
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            from ember import distributed as dist
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: num_replicas and rank were not given and "
                                   "the default process group is not initialized; call "
                                   "ember.distributed.init_process_group() first or pass "
                                   "num_replicas= and rank=")
            if num_replicas is None:
                num_replicas = dist.get_world_size()
            if rank is None:
                rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(self.dataset)
        if self.drop_last and n % self.num_replicas != 0:
            # the largest length that divides evenly: no rank gets a padded index
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Set the epoch: with ``shuffle``, each epoch gets a different order (the same
        on every rank).  Call it before creating the DataLoader iterator of each epoch."""
        self.epoch = epoch
