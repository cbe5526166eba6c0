"""ember.data.DistributedSampler against torch.utils.data.DistributedSampler.

Without shuffling the indices must be identical to PyTorch's; with shuffling the
permutation comes from NumPy (not torch.randperm), so the test checks everything else:
lengths, padding / dropping, the rank-strided split, and that the ranks of one epoch
share one permutation.
"""
import itertools

import numpy as np
import pytest

import ember.distributed as dist
from ember.data import DataLoader, DistributedSampler, TensorDataset

torch = pytest.importorskip("torch")
from torch.utils.data import DistributedSampler as TorchDS  # noqa: E402

CASES = list(itertools.product([0, 1, 2, 5, 7, 8, 10, 13], [1, 2, 3, 4], [False, True]))


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_unshuffled_indices_match_torch(n, replicas, drop_last):
    ds = list(range(n))
    if n == 0 and not drop_last:
        pytest.skip("an empty dataset makes torch's padding divide by zero")
    for rank in range(replicas):
        ours = DistributedSampler(ds, num_replicas=replicas, rank=rank, shuffle=False,
                                  drop_last=drop_last)
        theirs = TorchDS(ds, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs), (n, replicas, rank, drop_last)
        assert len(ours) == len(theirs)
        assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)


@pytest.mark.parametrize("n,replicas,drop_last",
                         [c for c in CASES if c[0] > 0])
def test_shuffled_split_has_torch_structure(n, replicas, drop_last):
    ds = list(range(n))
    for epoch in (0, 3):
        samplers = [DistributedSampler(ds, num_replicas=replicas, rank=r, shuffle=True, seed=11,
                                       drop_last=drop_last) for r in range(replicas)]
        for s in samplers:
            s.set_epoch(epoch)
        per_rank = [list(s) for s in samplers]
        torch_len = len(TorchDS(ds, num_replicas=replicas, rank=0, shuffle=True,
                                drop_last=drop_last))
        assert all(len(p) == torch_len == len(samplers[0]) for p in per_rank)
        # interleave the ranks back: the padded (or cut) permutation
        merged = [per_rank[i % replicas][i // replicas] for i in range(torch_len * replicas)]
        perm = np.random.default_rng(11 + epoch).permutation(n).tolist()
        if drop_last:
            assert merged == perm[:len(merged)]
        else:
            padded = (perm * (len(merged) // n + 1))[:len(merged)]
            assert merged == padded
            assert set(merged) == set(range(n))


def test_set_epoch_changes_the_order_and_is_reproducible():
    s = DistributedSampler(range(50), num_replicas=2, rank=1, seed=3)
    a = list(s)
    assert list(s) == a                          # same epoch: same order
    s.set_epoch(1)
    b = list(s)
    assert b != a and sorted(b) != b
    s2 = DistributedSampler(range(50), num_replicas=2, rank=1, seed=3)
    s2.set_epoch(1)
    assert list(s2) == b
    s3 = DistributedSampler(range(50), num_replicas=2, rank=1, seed=4)
    s3.set_epoch(1)
    assert list(s3) != b


def test_errors_and_defaults_from_the_process_group():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Invalid rank"):
        DistributedSampler(range(4), num_replicas=2, rank=-1)
    if dist.is_initialized():
        dist.destroy_process_group()
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))
    dist.init_process_group()
    try:
        s = DistributedSampler(range(5), shuffle=False)
        assert (s.num_replicas, s.rank, list(s)) == (1, 0, [0, 1, 2, 3, 4])
    finally:
        dist.destroy_process_group()


def test_works_as_a_dataloader_sampler():
    import ember
    ds = TensorDataset(ember.arange(10))
    seen = []
    for rank in range(3):
        s = DistributedSampler(ds, num_replicas=3, rank=rank, shuffle=True, seed=0)
        s.set_epoch(2)
        loader = DataLoader(ds, batch_size=2, sampler=s)
        got = [int(v) for (xb,) in loader for v in xb.tolist()]
        assert got == list(s)
        seen += got
    assert len(seen) == 12 and set(seen) == set(range(10))
