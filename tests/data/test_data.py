"""ember.data against torch.utils.data: datasets, samplers, collation, DataLoader
options and validation, and the multi-process loader (shared-memory batches,
ordering, seeding, failures, leaks, timeout, persistent workers, sharding).

Worker tests use the 'fork' start method (fast) except one 'spawn' test, and
pass a generous ``timeout=`` so that a bug shows up as an error, not a hang.
"""
import collections
import doctest
import gc
import math
import multiprocessing
import os
import random
import signal
import time
import warnings

import numpy as np
import pytest

import ember as E
import ember.data as D
from ember._api._util import numpy_view

torch = pytest.importorskip("torch")
tud = torch.utils.data

SAFE = 30        # seconds: `timeout=` of worker loaders in tests (a bug errors, never hangs)


# ------------------------------------------------------------------ helpers

def canon(x):
    """A comparable structure: arrays/tensors -> (kind, dtype, shape, values)."""
    if isinstance(x, torch.Tensor):
        return ("T", str(x.dtype).replace("torch.", ""), tuple(x.shape), x.tolist())
    if isinstance(x, E.ndarray):
        return ("T", str(x.dtype), tuple(x.shape), x.tolist())
    if isinstance(x, np.ndarray):
        return ("N", str(x.dtype), x.shape, x.tolist())
    if isinstance(x, dict):
        return ("D", type(x).__name__, {k: canon(v) for k, v in x.items()})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("NT", type(x).__name__, [canon(v) for v in x])
    if isinstance(x, tuple):
        return ("TU", [canon(v) for v in x])
    if isinstance(x, list):
        return ("L", [canon(v) for v in x])
    return ("O", type(x).__name__, x)


def _shm_names():
    prefix = f"em{os.getpid():x}_"
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))
    except FileNotFoundError:
        return []


def _children_gone(timeout=3.0):
    deadline = time.monotonic() + timeout
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.02)
    return multiprocessing.active_children() == []


@pytest.fixture
def no_leaks():
    """The test leaves no worker process and no shared-memory segment behind."""
    assert _children_gone(), "worker processes left over from an earlier test"
    yield
    gc.collect()
    assert _children_gone(), f"leaked processes: {multiprocessing.active_children()}"
    assert _shm_names() == [], f"leaked shared memory: {_shm_names()}"


def _mapping_of(addr):
    """The /proc/self/maps line of the mapping that holds address `addr`."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            if lo <= addr < hi:
                return line
    return ""


def _pids_gone(pids, timeout=3.0):
    deadline = time.monotonic() + timeout
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not any(os.path.exists(f"/proc/{p}") for p in pids)


def loader(ds, **kw):
    """An ember DataLoader; with workers: fork, and a safety timeout."""
    if kw.get("num_workers", 0) > 0:
        kw.setdefault("multiprocessing_context", "fork")
        kw.setdefault("timeout", SAFE)
    return D.DataLoader(ds, **kw)


class Squares(D.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"i": i, "x": np.full((2, 3), i * i, dtype=np.float32), "name": f"s{i}"}


def _xy(n=23, seed=0, size=4):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 3, size, size), dtype=np.float32),
            rng.integers(0, 10, n).astype(np.int64))


# ------------------------------------------------------------------ samplers

@pytest.mark.parametrize("n", [1, 7, 10])
@pytest.mark.parametrize("bs", [1, 3, 10, 11])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_matches_torch(n, bs, drop_last):
    e = D.BatchSampler(D.SequentialSampler(range(n)), bs, drop_last)
    t = tud.BatchSampler(tud.SequentialSampler(range(n)), bs, drop_last)
    assert list(e) == list(t)
    assert len(e) == len(t)


@pytest.mark.parametrize("args", [(0, False), (-1, False), (True, False), (2.0, False),
                                  (2, None), (2, 1)])
def test_batch_sampler_validation_matches_torch(args):
    with pytest.raises(ValueError) as te:
        tud.BatchSampler(range(3), *args)
    with pytest.raises(ValueError) as ee:
        D.BatchSampler(range(3), *args)
    assert str(ee.value) == str(te.value)


def test_sequential_and_subset_random_samplers():
    assert list(D.SequentialSampler(range(4))) == list(tud.SequentialSampler(range(4)))
    assert len(D.SequentialSampler(range(4))) == 4
    s = D.SubsetRandomSampler([10, 20, 30, 40], generator=E.random.default_rng(3))
    out = list(s)
    assert sorted(out) == [10, 20, 30, 40] and len(s) == 4
    assert list(D.SubsetRandomSampler([10, 20, 30, 40], generator=3)) == \
        list(D.SubsetRandomSampler([10, 20, 30, 40], generator=3))


def test_random_sampler_permutation_and_reproducibility():
    s = D.RandomSampler(range(50), generator=E.random.default_rng(0))
    a, b = list(s), list(s)
    assert sorted(a) == list(range(50)) and sorted(b) == list(range(50))
    assert a != b                                        # a new order every epoch
    s2 = D.RandomSampler(range(50), generator=E.random.default_rng(0))
    assert list(s2) == a and list(s2) == b               # same seed, same sequence
    assert list(D.RandomSampler(range(50), generator=7)) == \
        list(D.RandomSampler(range(50), generator=7))    # int seeds
    # no generator: seeded by ember.random's global generator
    E.random.seed(123)
    c = list(D.RandomSampler(range(50)))
    E.random.seed(123)
    assert list(D.RandomSampler(range(50))) == c
    assert len(s) == 50


def test_random_sampler_num_samples_and_replacement():
    s = D.RandomSampler(range(5), num_samples=12, generator=0)
    out = list(s)
    assert len(out) == len(s) == 12
    assert sorted(out[:5]) == list(range(5)) and sorted(out[5:10]) == list(range(5))
    r = D.RandomSampler(range(3), replacement=True, num_samples=100, generator=0)
    out = list(r)
    assert len(out) == 100 and set(out) <= {0, 1, 2} and len(set(out)) == 3
    assert len(D.RandomSampler(range(3), replacement=True)) == \
        len(tud.RandomSampler(range(3), replacement=True))


@pytest.mark.parametrize("kw, exc", [(dict(replacement=1), TypeError),
                                     (dict(num_samples=0), ValueError),
                                     (dict(num_samples=-3), ValueError),
                                     (dict(num_samples=2.5), ValueError)])
def test_random_sampler_validation_matches_torch(kw, exc):
    with pytest.raises(exc) as te:
        tud.RandomSampler(range(4), **kw)
    with pytest.raises(exc) as ee:
        D.RandomSampler(range(4), **kw)
    assert str(ee.value) == str(te.value)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        D.RandomSampler([])


def test_weighted_random_sampler():
    s = D.WeightedRandomSampler([0.0, 3.0, 0.0, 1.0], 4000, generator=E.random.default_rng(0))
    out = np.array(list(s))
    assert len(s) == 4000 and set(out.tolist()) == {1, 3}
    assert abs((out == 1).mean() - 0.75) < 0.04
    s = D.WeightedRandomSampler([1.0, 2.0, 3.0, 4.0], 4, replacement=False, generator=1)
    assert sorted(s) == [0, 1, 2, 3]
    assert list(D.WeightedRandomSampler([1, 2, 3], 5, generator=9)) == \
        list(D.WeightedRandomSampler([1, 2, 3], 5, generator=9))
    assert s.weights.dtype == E.float64
    # without replacement, zero weights come after every positive one (as torch.multinomial)
    for seed in range(5):
        out = list(D.WeightedRandomSampler([1.0, 0.0, 5.0, 0.0], 4, replacement=False,
                                           generator=seed))
        assert sorted(out[:2]) == [0, 2] and sorted(out[2:]) == [1, 3]
    firsts = [list(D.WeightedRandomSampler([1.0, 9.0], 2, replacement=False, generator=k))[0]
              for k in range(400)]
    assert abs(np.mean(firsts) - 0.9) < 0.06


@pytest.mark.parametrize("args", [([1.0, 2.0], 0), ([1.0, 2.0], True), ([1.0, 2.0], 3, 1),
                                  ([[1.0, 2.0]], 2)])
def test_weighted_random_sampler_validation_matches_torch(args):
    with pytest.raises(ValueError) as te:
        tud.WeightedRandomSampler(*args)
    with pytest.raises(ValueError) as ee:
        D.WeightedRandomSampler(*args)
    assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("weights, n, repl", [([0.0, 0.0], 1, True), ([1.0, -1.0], 1, True),
                                              ([1.0, 1.0], 3, False)])
def test_weighted_random_sampler_bad_distribution_raises_like_torch(weights, n, repl):
    with pytest.raises(RuntimeError):
        list(tud.WeightedRandomSampler(weights, n, replacement=repl))
    with pytest.raises(RuntimeError, match="multinomial|probability|n_sample"):
        list(D.WeightedRandomSampler(weights, n, replacement=repl))


def test_bad_generator_type():
    with pytest.raises(TypeError, match="generator must be"):
        D.RandomSampler(range(3), generator="seed")


# ------------------------------------------------------------------ datasets

def test_tensor_dataset():
    x, y = E.arange(12).reshape(6, 2), E.arange(6)
    ds = D.TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[2]
    assert a.tolist() == [4, 5] and int(b) == 2
    ds_np = D.TensorDataset(np.ones((3, 2), np.float32))     # NumPy arrays wrap, zero-copy
    assert isinstance(ds_np.tensors[0], E.ndarray) and len(ds_np) == 3
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        D.TensorDataset(E.zeros((3, 2)), E.zeros(4))
    with pytest.raises(NotImplementedError):
        D.Dataset()[0]


def test_subset_concat_chain_stack():
    s = D.Subset(list("abcdef"), [5, 0, 2])
    assert len(s) == 3 and s[0] == "f"
    assert s.__getitems__([2, 0]) == ["c", "f"]
    assert D.Subset(s, [2, 0]).__getitems__([0, 1]) == ["c", "f"]     # nested __getitems__
    c = D.ConcatDataset([[1, 2], [3], [4, 5, 6]])
    tc = tud.ConcatDataset([[1, 2], [3], [4, 5, 6]])
    assert len(c) == len(tc) and c.cumulative_sizes == tc.cumulative_sizes
    assert [c[i] for i in range(-6, 6)] == [tc[i] for i in range(-6, 6)]
    with pytest.raises(ValueError, match="absolute value of index"):
        c[-7]
    with pytest.raises(AssertionError, match="should not be an empty iterable"):
        D.ConcatDataset([])

    class It(D.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    with pytest.raises(AssertionError, match="does not support IterableDataset"):
        D.ConcatDataset([It(2)])
    ch = It(2) + It(3)
    assert isinstance(ch, D.ChainDataset) and list(ch) == [0, 1, 0, 1, 2] and len(ch) == 5
    assert isinstance(Squares(2) + Squares(3), D.ConcatDataset)
    st = D.StackDataset([1, 2], ["a", "b"])
    assert st[1] == (2, "b") and len(st) == 2 and st.__getitems__([0, 1]) == [(1, "a"), (2, "b")]
    sd = D.StackDataset(a=[1, 2], b=D.Subset([7, 8, 9], [2, 1]))
    assert sd.__getitems__([1, 0]) == [{"a": 2, "b": 8}, {"a": 1, "b": 9}]
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        D.StackDataset([1], [1, 2])


@pytest.mark.parametrize("n, lengths", [
    (10, [0.5, 0.3, 0.2]), (11, [0.5, 0.5]), (7, [1 / 3, 1 / 3, 1 / 3]), (5, [0.1, 0.9]),
    (100, [0.7, 0.2, 0.1]), (3, [0.25, 0.25, 0.25, 0.25]), (10, [3, 7]), (10, [10, 0])])
def test_random_split_lengths_match_torch(n, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = D.random_split(range(n), lengths, generator=E.random.default_rng(0))
        t = tud.random_split(range(n), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in e] == [len(s) for s in t]
    got = sorted(i for s in e for i in s)
    assert got == list(range(n))                        # a partition


def test_random_split_reproducible_and_errors():
    a = [list(s) for s in D.random_split(range(20), [0.5, 0.5], generator=4)]
    b = [list(s) for s in D.random_split(range(20), [0.5, 0.5], generator=E.random.default_rng(4))]
    assert a == b
    E.random.seed(1)
    c = [list(s) for s in D.random_split(range(20), [10, 10])]
    E.random.seed(1)
    assert [list(s) for s in D.random_split(range(20), [10, 10])] == c
    for bad in ([5, 6], [0.5, 0.6]):
        with pytest.raises(ValueError, match="Sum of input lengths"):
            D.random_split(range(10), bad)
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        D.random_split(range(10), [0.5, 1.5, -1.0])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        D.random_split(range(2), [0.9, 0.1])


# ------------------------------------------------------------------ collate

Point = collections.namedtuple("Point", "x y")


def _samples(arr):
    """The same batch of samples for both libraries (`arr` makes their arrays)."""
    return [
        [1, 2, 3],
        [1.5, 2.5],
        [True, False],
        [1, 2.5],
        [np.float32(1), np.float32(2)],
        [np.int16(1), np.int16(2)],
        [np.float64(1.5), np.float64(2)],
        [np.bool_(True), np.bool_(False)],
        [np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32)],
        [np.array(2.5), np.array(3.5)],
        [np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32)],
        [arr(np.ones((2, 2), np.float32)), arr(np.zeros((2, 2), np.float32))],
        [arr(np.array(3, np.int64)), arr(np.array(4, np.int64))],
        [arr(np.array([1, 2], np.uint8)), arr(np.array([3, 4], np.uint8))],
        ["a", "b"],
        [b"a", b"b"],
        [{"a": 1, "b": "s", "c": {"d": 2.0}}, {"a": 2, "b": "t", "c": {"d": 3.0}}],
        [Point(1, arr(np.ones(2, np.float32))), Point(2, arr(np.zeros(2, np.float32)))],
        [(1, "x"), (2, "y")],
        [[1, [2.0, "q"]], [3, [4.0, "r"]]],
        [(arr(np.ones(3, np.float64)), 1), (arr(np.zeros(3, np.float64)), 0)],
        [collections.OrderedDict(a=1), collections.OrderedDict(a=2)],
    ]


@pytest.mark.parametrize("k", range(len(_samples(np.asarray))))
def test_default_collate_matches_torch(k):
    e = D.default_collate(_samples(E.asarray)[k])
    t = tud.default_collate(_samples(torch.from_numpy)[k])
    assert canon(e) == canon(t)


@pytest.mark.parametrize("k", range(len(_samples(np.asarray))))
def test_default_convert_matches_torch(k):
    e = D.default_convert(_samples(E.asarray)[k])
    t = tud.default_convert(_samples(torch.from_numpy)[k])
    assert canon(e) == canon(t)


@pytest.mark.parametrize("batch", [[np.array(["a"]), np.array(["b"])], [object(), object()],
                                   [None, None], [np.array([object()]), np.array([object()])]])
def test_default_collate_type_errors_match_torch(batch):
    with pytest.raises(TypeError) as te:
        tud.default_collate(batch)
    with pytest.raises(TypeError) as ee:
        D.default_collate(batch)
    assert str(ee.value) == str(te.value)


def test_default_collate_shape_errors():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        D.default_collate([[1, 2], [1]])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        D.default_collate([E.zeros(2), E.zeros(3)])


def test_default_collate_mixed_dtypes_and_autograd():
    out = D.default_collate([E.zeros(2, dtype=E.float32), E.ones(2, dtype=E.float64)])
    assert out.dtype == E.float64
    a = E.ones(2, requires_grad=True)
    b = E.zeros(2, requires_grad=True)
    s = D.default_collate([a, b])
    (s * E.asarray([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert a.grad.tolist() == [1.0, 2.0] and b.grad.tolist() == [3.0, 4.0]


# ------------------------------------------------------------------ DataLoader options

BAD_OPTIONS = [
    dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
    dict(num_workers=1, prefetch_factor=-1), dict(persistent_workers=True),
    dict(sampler=[0, 1], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
    dict(batch_sampler=[[0]], shuffle=True), dict(batch_sampler=[[0]], sampler=[0]),
    dict(batch_sampler=[[0]], drop_last=True), dict(batch_size=None, drop_last=True),
    dict(multiprocessing_context="fork"), dict(num_workers=1, multiprocessing_context="nope"),
    dict(batch_size=0), dict(batch_size=-2), dict(drop_last=None),
]


@pytest.mark.parametrize("kw", BAD_OPTIONS, ids=[str(k) for k in BAD_OPTIONS])
def test_dataloader_validation_matches_torch(kw):
    with pytest.raises(ValueError) as te:
        tud.DataLoader(list(range(4)), **kw)
    with pytest.raises(ValueError) as ee:
        D.DataLoader(list(range(4)), **kw)
    assert str(ee.value) == str(te.value)


def test_dataloader_validation_more():
    with pytest.raises(TypeError, match="multiprocessing_context option should be a valid"):
        D.DataLoader([1], num_workers=1, multiprocessing_context=3)

    class It(D.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    class TIt(tud.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    for kw in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])):
        with pytest.raises(ValueError) as te:
            tud.DataLoader(TIt(), **kw)
        with pytest.raises(ValueError) as ee:
            D.DataLoader(It(), **kw)
        assert str(ee.value).split(", but")[0] == str(te.value).split(", but")[0]
    dl = D.DataLoader(list(range(4)), batch_size=2)
    for attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                 "persistent_workers"):
        with pytest.raises(ValueError, match=f"{attr} attribute should not be set after "
                                             "DataLoader is initialized"):
            setattr(dl, attr, None)
    dl.num_workers = 0                                      # other attributes may change
    with pytest.raises(AssertionError, match="timeout"):
        iter(D.DataLoader([1], timeout=1))
    assert list(D.DataLoader([1, 2], pin_memory=True)) is not None    # accepted, no-op


@pytest.mark.parametrize("n", [0, 1, 7, 10])
@pytest.mark.parametrize("bs", [1, 3, 10, None])
@pytest.mark.parametrize("drop_last", [False, True])
def test_dataloader_len_and_batches_match_torch(n, bs, drop_last):
    if bs is None and drop_last:
        return
    xs, _ = _xy(n) if n else (np.zeros((0, 3, 4, 4), np.float32), None)
    e = D.DataLoader([xs[i] for i in range(n)], batch_size=bs, drop_last=drop_last)
    t = tud.DataLoader([xs[i] for i in range(n)], batch_size=bs, drop_last=drop_last)
    assert len(e) == len(t)
    assert canon(list(e)) == canon(list(t))


@pytest.mark.parametrize("bs", [1, 2, 4, None])
@pytest.mark.parametrize("drop_last", [False, True])
def test_dataloader_len_iterable_dataset_matches_torch(bs, drop_last):
    if bs is None and drop_last:
        return

    class It(D.IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    class TIt(tud.IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    e = D.DataLoader(It(), batch_size=bs, drop_last=drop_last)
    t = tud.DataLoader(TIt(), batch_size=bs, drop_last=drop_last)
    assert len(e) == len(t)
    assert canon(list(e)) == canon(list(t))


def test_dataloader_samplers_and_collate_fn_match_torch():
    data = [{"i": i, "v": float(i) / 2} for i in range(9)]
    for kw in (dict(sampler=[8, 0, 3, 3]), dict(batch_sampler=[[1, 2], [7], [0, 0, 5]]),
               dict(sampler=D.SequentialSampler(data), batch_size=4, drop_last=True),
               dict(batch_size=4, collate_fn=lambda b: [d["i"] for d in b]),
               dict(batch_size=None, sampler=[3, 1])):
        tkw = dict(kw)
        if isinstance(kw.get("sampler"), D.SequentialSampler):
            tkw["sampler"] = tud.SequentialSampler(data)
        e, t = D.DataLoader(data, **kw), tud.DataLoader(data, **tkw)
        assert len(e) == len(t) and canon(list(e)) == canon(list(t)), kw


def test_tensor_dataset_batches_match_torch_and_fast_path():
    x, y = _xy(23)
    e = D.TensorDataset(E.asarray(x), E.asarray(y))
    t = tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    for kw in (dict(batch_size=5), dict(batch_size=5, drop_last=True), dict(batch_size=None),
               dict(batch_size=4, sampler=[22, -1, 0, 5, -23])):
        assert canon(list(D.DataLoader(e, **kw))) == canon(list(tud.DataLoader(t, **kw)))
    # a Subset of a TensorDataset, and a subclass overriding __getitem__ (no shortcut)

    class Plus1(D.TensorDataset):
        def __getitem__(self, i):
            return tuple(a + 1 for a in super().__getitem__(i))

    sub = D.random_split(e, [0.5, 0.5], generator=0)[1]
    got = list(D.DataLoader(sub, batch_size=4))
    want = [D.default_collate([sub[i] for i in range(k, min(k + 4, len(sub)))])
            for k in range(0, len(sub), 4)]
    assert canon(got) == canon(want)
    got = list(D.DataLoader(Plus1(E.asarray(x), E.asarray(y)), batch_size=6))
    assert np.array_equal(got[0][1].numpy(), y[:6] + 1)
    with pytest.raises(IndexError, match="out of bounds"):
        list(D.DataLoader(e, sampler=[23]))


def test_shuffle_reproducible_with_generator_and_global_seed():
    data = list(range(20))
    a = [b.tolist() for b in D.DataLoader(data, batch_size=6, shuffle=True, generator=5)]
    b = [b.tolist() for b in D.DataLoader(data, batch_size=6, shuffle=True,
                                          generator=E.random.default_rng(5))]
    assert a == b and sorted(sum(a, [])) == data
    E.random.seed(11)
    c = [b.tolist() for b in D.DataLoader(data, batch_size=6, shuffle=True)]
    E.random.seed(11)
    d = [b.tolist() for b in D.DataLoader(data, batch_size=6, shuffle=True)]
    assert c == d
    loader_ = D.DataLoader(data, batch_size=6, shuffle=True, generator=5)
    assert [b.tolist() for b in loader_] != [b.tolist() for b in loader_]   # per-epoch shuffle


def test_docstring_examples():
    import ember.data.collate
    import ember.data.dataloader
    import ember.data.dataset
    import ember.data.sampler
    import ember.data._worker
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    n = 0
    for mod in (ember.data, ember.data.collate, ember.data.dataloader, ember.data.dataset,
                ember.data.sampler, ember.data._worker):
        for test in finder.find(mod):
            out = []
            runner.run(test, out=out.append)
            n += len(test.examples)
            assert runner.failures == 0, "".join(out)
    assert n > 30


# ------------------------------------------------------------------ workers

def test_workers_same_batches_as_single_process(no_leaks):
    x, y = _xy(50, size=32)                            # 84 KB batches: shared memory
    ds = D.TensorDataset(E.asarray(x), E.asarray(y))
    ref = canon(list(loader(ds, batch_size=7, shuffle=True, generator=3)))
    got = canon(list(loader(ds, batch_size=7, shuffle=True, generator=3, num_workers=2)))
    assert got == ref
    # general path (per-sample __getitem__, dicts, strings), ember.random-seeded shuffle
    E.random.seed(5)
    ref = canon(list(loader(Squares(17), batch_size=4, shuffle=True)))
    E.random.seed(5)
    got = canon(list(loader(Squares(17), batch_size=4, shuffle=True, num_workers=2,
                            prefetch_factor=3)))
    assert got == ref
    # out-of-order arrivals are reordered: worker 0 is slow
    class SlowEven(Squares):
        def __getitem__(self, i):
            if get_id() == 0:
                time.sleep(0.02)
            return super().__getitem__(i)

    def get_id():
        return D.get_worker_info().id

    got = canon(list(loader(SlowEven(12), batch_size=2, num_workers=2)))
    assert got == canon(list(loader(Squares(12), batch_size=2)))


def test_worker_batches_are_zero_copy_shared_memory(no_leaks):
    x, y = _xy(16, size=32)                            # 96 KB batches: shared memory
    ds = D.TensorDataset(E.asarray(x), E.asarray(y))
    dl = loader(ds, batch_size=8, num_workers=2)
    batches = list(dl)
    del dl
    gc.collect()
    assert _shm_names() == []                          # names unlinked on arrival
    bx, by = batches[1]
    v = numpy_view(bx)
    assert "/dev/shm/em" in _mapping_of(v.__array_interface__["data"][0])   # zero-copy
    assert np.array_equal(v, x[8:]) and np.array_equal(numpy_view(by), y[8:])
    bx[0, 0, 0, 0] = 42.0                              # writable, private to this batch
    assert float(bx[0, 0, 0, 0]) == 42.0
    assert float((bx * 2).sum()) == pytest.approx(float(2 * (x[8:].sum() - x[8, 0, 0, 0] + 42)),
                                                   rel=1e-4)


class Big(D.Dataset):
    def __len__(self):
        return 9

    def __getitem__(self, i):
        return {"i": i, "x": np.full((64, 64), i, np.float32) + np.arange(64, dtype=np.float32),
                "name": f"s{i}"}


def _custom_collate(batch):
    d = D.default_collate(batch)            # in a worker: stacked into the shared segment
    xs = np.stack([b["x"] for b in batch])
    return {"ids": [b["i"] for b in batch], "np": xs,            # NumPy stays NumPy
            "em": E.asarray(xs)[:, ::2],                          # a strided copy-in
            "view": d["x"][:, ::2, 1:].T,                         # a view inside the segment
            "names": tuple(b["name"] for b in batch), "empty": E.zeros((0, 3)),
            "small": E.ones(3), "x": d["x"]}


def test_worker_custom_collate_numpy_and_batch_size_none(no_leaks):
    ref = canon(list(loader(Big(), batch_size=4, collate_fn=_custom_collate)))
    got = canon(list(loader(Big(), batch_size=4, collate_fn=_custom_collate, num_workers=2)))
    assert got == ref
    ref = canon(list(loader(Squares(5), batch_size=None)))
    got = canon(list(loader(Squares(5), batch_size=None, num_workers=2)))
    assert got == ref
    assert list(loader([], batch_size=2, num_workers=2)) == []


def test_worker_shm_disabled_gives_same_batches(no_leaks):
    x, y = _xy(20)
    ds = D.TensorDataset(E.asarray(x), E.asarray(y))
    dl = loader(ds, batch_size=6, num_workers=2)
    dl._use_shm = False                                # batches pickled through the pipe
    assert canon(list(dl)) == canon(list(loader(ds, batch_size=6)))


class SeedProbe(D.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = D.get_worker_info()
        return {"wid": info.id, "nw": info.num_workers, "seed": info.seed,
                "same_ds": info.dataset is not None and isinstance(info.dataset, SeedProbe),
                "py": random.random(), "np": float(np.random.rand()),
                "em": float(E.random.rand(1)[0]), "init": os.environ.get("EMBER_TEST_INIT", "")}


def test_worker_seeding_and_init_fn(no_leaks):
    def init(wid):
        os.environ["EMBER_TEST_INIT"] = f"init{wid}"

    def run(gen):
        return list(loader(SeedProbe(), batch_size=2, num_workers=2, generator=gen,
                           worker_init_fn=init))

    a, b, c = run(1), run(E.random.default_rng(1)), run(2)
    assert canon(a) == canon(b)                        # reproducible augmentations
    assert canon(a) != canon(c)
    seeds = {(int(bt["wid"][0]), int(bt["seed"][0])) for bt in a}
    assert len(seeds) == 2
    (w0, s0), (w1, s1) = sorted(seeds)
    assert (w0, w1) == (0, 1) and s1 == s0 + 1         # base_seed + worker_id
    for bt in a:
        wid = int(bt["wid"][0])
        assert bt["init"] == [f"init{wid}"] * 2 and bt["nw"].tolist() == [2, 2]
        assert bool(bt["same_ds"].all())
    # workers draw different streams
    w0_vals = [bt["np"].tolist() for bt in a if int(bt["wid"][0]) == 0]
    w1_vals = [bt["np"].tolist() for bt in a if int(bt["wid"][0]) == 1]
    assert w0_vals != w1_vals
    E.random.seed(3)
    d = list(loader(SeedProbe(), batch_size=2, num_workers=2))
    E.random.seed(3)
    e = list(loader(SeedProbe(), batch_size=2, num_workers=2))
    assert canon(d) == canon(e)                        # global seed drives base_seed
    assert D.get_worker_info() is None


class Faulty(D.Dataset):
    def __init__(self, bad, how):
        self.bad, self.how = bad, how

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == self.bad:
            if self.how == "value":
                raise ValueError(f"broken sample {i}")
            if self.how == "key":
                raise KeyError("missing-key")
            if self.how == "exit":
                os._exit(7)
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
        return i


def test_worker_exception_carries_traceback(no_leaks):
    dl = loader(Faulty(5, "value"), batch_size=2, num_workers=2)
    got = []
    with pytest.raises(ValueError) as ei:
        for b in dl:
            got.append(b.tolist())
    msg = str(ei.value)
    assert got == [[0, 1], [2, 3]]                     # batches before the bad one arrive
    assert "Caught ValueError in DataLoader worker process 0." in msg
    assert "Original Traceback (most recent call last):" in msg
    assert "in __getitem__" in msg and "broken sample 5" in msg
    # like PyTorch, the iterator goes on after a worker's exception
    it = iter(loader(Faulty(1, "key"), batch_size=2, num_workers=2))
    with pytest.raises(KeyError) as ei:
        next(it)
    assert "Caught KeyError in DataLoader worker process 0" in str(ei.value)
    assert "missing-key" in str(ei.value)
    assert next(it).tolist() == [2, 3]
    del it

    def bad_init(wid):
        raise RuntimeError(f"init failed in {wid}")
    with pytest.raises(RuntimeError, match="init failed in"):
        list(loader(Squares(4), batch_size=2, num_workers=2, worker_init_fn=bad_init))


@pytest.mark.parametrize("how, what", [("exit", "exit code 7"),
                                       ("kill", "killed by signal SIGKILL")])
def test_worker_death_raises_quickly(no_leaks, how, what):
    dl = loader(Faulty(5, how), batch_size=2, num_workers=2)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid \d+\) exited "
                                           rf"unexpectedly \({what}"):
        for _ in dl:
            pass
    assert time.monotonic() - t0 < 5.0
    it = iter(dl)                                      # a fresh iterator works again
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(it)
    del it


def test_no_leaks_after_break_gc_and_errors(no_leaks):
    x, y = _xy(64, size=32)
    ds = D.TensorDataset(E.asarray(x), E.asarray(y))
    it = iter(loader(ds, batch_size=4, num_workers=2, prefetch_factor=4))
    first = next(it)
    pids = [w.pid for w in it._workers]
    time.sleep(0.2)                                    # let the workers fill segments
    assert len(_shm_names()) > 0                       # batches in flight live in /dev/shm
    del it
    gc.collect()
    assert _pids_gone(pids) and _shm_names() == []
    assert np.array_equal(first[0].numpy(), x[:4])     # a held batch outlives its loader
    for b in loader(ds, batch_size=4, num_workers=2):  # break early
        break
    del b
    with pytest.raises(ValueError):
        for b in loader(Faulty(3, "value"), batch_size=1, num_workers=2):
            pass

    class Holder:                                      # an iterator inside a garbage cycle
        pass
    h = Holder()
    h.me, h.it = h, iter(loader(ds, batch_size=4, num_workers=2))
    next(h.it)
    pids = [w.pid for w in h.it._workers]
    del h
    t0 = time.monotonic()
    gc.collect()
    assert _pids_gone(pids) and time.monotonic() - t0 < 1.5


def test_shared_memory_segments_are_reused_and_retired(no_leaks):
    x, y = _xy(200, size=32)
    ds = D.TensorDataset(E.asarray(x), E.asarray(y))
    it = iter(loader(ds, batch_size=4, num_workers=2))
    for k, (bx, by) in enumerate(it):                  # each batch dropped before the next
        assert np.array_equal(bx.numpy(), x[4 * k:4 * k + 4])
    assert k == 49
    assert all(len(seen) <= 6 for seen in it._receiver.seen)   # a few per worker, reused
    del it, bx, by

    class Growing(D.Dataset):                          # batches that outgrow the segments
        def __len__(self):
            return 12

        def __getitem__(self, i):
            return np.full((1 << 13) * (i + 1), i, np.float32)   # 32 KB .. 384 KB

    got = [b.numpy() for b in loader(Growing(), batch_size=None, num_workers=2)]
    assert [(int(g[0]), g.size) for g in got] == [(i, (1 << 13) * (i + 1)) for i in range(12)]


class Sleepy(D.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(3)
        return i


def test_timeout(no_leaks):
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.3 seconds"):
        next(iter(loader(Sleepy(), batch_size=1, num_workers=1, timeout=0.3)))
    assert time.monotonic() - t0 < 2.5


def test_prefetch_factor_bounds_tasks_in_flight(no_leaks):
    for pf in (1, 3):
        it = iter(loader(Squares(40), batch_size=1, num_workers=2, prefetch_factor=pf))
        assert it._tasks_outstanding == 2 * pf
        next(it)
        assert it._tasks_outstanding <= 2 * pf
        del it


def test_persistent_workers(no_leaks):
    x, y = _xy(30)
    ds = D.TensorDataset(E.asarray(x), E.asarray(y))
    dl = loader(ds, batch_size=4, shuffle=True, generator=0, num_workers=2,
                persistent_workers=True)
    first = canon(list(dl))
    assert first == canon(list(loader(ds, batch_size=4, shuffle=True, generator=0)))
    pids = [w.pid for w in dl._iterator._workers]
    epochs = [first]
    for epoch in range(2):
        got = list(dl)
        assert sorted(sum((yb.tolist() for _, yb in got), [])) == sorted(y.tolist())
        assert [w.pid for w in dl._iterator._workers] == pids    # the same processes
        epochs.append(canon(got))
    assert epochs[1] != epochs[0]                      # reshuffled every epoch
    for i, b in enumerate(dl):                         # break mid-epoch: stale batches dropped
        if i == 1:
            break
    got = [yb.tolist() for _, yb in dl]
    assert len(got) == len(dl) and sorted(sum(got, [])) == sorted(y.tolist())
    it = dl._iterator
    del dl, b
    gc.collect()
    it._shutdown_workers()
    assert _pids_gone(pids)


class Shard(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = D.get_worker_info()
        if info is None:
            return iter(range(self.n))
        assert isinstance(info.dataset, Shard) and info.num_workers == 2
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


class TShard(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = tud.get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


@pytest.mark.parametrize("n, bs, drop_last", [(11, 2, False), (11, 2, True), (5, None, False)])
def test_iterable_dataset_sharding_matches_torch(no_leaks, n, bs, drop_last):
    e = loader(Shard(n), batch_size=bs, drop_last=drop_last, num_workers=2)
    t = tud.DataLoader(TShard(n), batch_size=bs, drop_last=drop_last, num_workers=2,
                       multiprocessing_context="fork")
    assert len(e) == len(t)
    assert canon(list(e)) == canon(list(t))


def test_iterable_dataset_persistent_workers(no_leaks):
    dl = loader(Shard(7), batch_size=2, num_workers=2, persistent_workers=True)
    ref = canon(list(loader(Shard(7), batch_size=2, num_workers=2)))
    assert canon(list(dl)) == ref
    assert canon(list(dl)) == ref                      # the workers restart their iterators
    pids = [w.pid for w in dl._iterator._workers]
    dl._iterator._shutdown_workers()
    assert _pids_gone(pids)


class OmpWork(D.Dataset):
    """Big enough ember ops to run OpenMP-parallel kernels (in the parent: yes)."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        x = E.ones(300_000, dtype=E.float32) * float(i + 1)
        out = float((x + x).sum())
        try:
            import ember.nn.functional as F
            out += float(F.gelu(x).sum())
        except (ImportError, AttributeError):
            pass
        return out


def test_forked_workers_run_threaded_kernels_after_the_parent_did(no_leaks):
    # GNU OpenMP's thread pool does not survive fork(): a forked child entering a
    # multi-threaded region would hang.  Workers run single-threaded (as PyTorch's).
    OmpWork()[0]                                       # the parent's OpenMP pool is up
    ref = [b.tolist() for b in loader(OmpWork(), batch_size=2)]
    got = [b.tolist() for b in loader(OmpWork(), batch_size=2, num_workers=2, timeout=SAFE)]
    np.testing.assert_allclose(got, ref, rtol=1e-5)    # 1 thread vs 2: summation order


def test_benchmark_runs():
    import importlib.util
    import sys
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(here, "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_data", os.path.join(here, "benchmarks", "bench_data.py"))
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        rows = bench.bench_dataloader(n=48, batch=16, repeat=1, workers=(0, 1))
    finally:
        sys.path.remove(os.path.join(here, "benchmarks"))
    assert len(rows) == 5
    for r in rows:
        assert r["times"]["ember"] > 0 and "ember" not in r["errors"], r
        assert r["rate_unit"] == "batches/s"
    assert all(r["times"]["torch"] > 0 for r in rows[:4])
    gc.collect()
    assert _children_gone() and _shm_names() == []


def test_spawn_context(no_leaks):
    x, y = _xy(12)
    ds = D.TensorDataset(E.asarray(x), E.asarray(y))
    ref = canon(list(loader(ds, batch_size=5)))
    # (a spawned worker imports ember afresh: allow for a slow import, e.g. a rebuild)
    got = canon(list(loader(ds, batch_size=5, num_workers=2, multiprocessing_context="spawn",
                            timeout=600)))
    assert got == ref


def test_worker_info_outside_workers_and_iterator_pickling():
    assert D.get_worker_info() is None
    import pickle
    with pytest.raises(NotImplementedError):
        pickle.dumps(iter(D.DataLoader([1, 2])))
    assert len(iter(D.DataLoader(list(range(5)), batch_size=2))) == 3
    assert math.isclose(len(D.DataLoader(list(range(5)), batch_size=2)), 3)
