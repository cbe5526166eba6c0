"""The data-loading table: ember.data.DataLoader vs torch.utils.data.DataLoader.

Run directly (``python benchmarks/bench_data.py``) to print the table.  NumPy
has no DataLoader, so its column reads ``n/a``.  Every ``bench_*`` function
takes its sizes and repetition counts as arguments (the smoke test can run
them tiny) and returns rows made by ``harness.make_row``.

The data: ``n`` float32 images of 3x32x32 and int64 labels (the same values
for both libraries), batches of 64, shuffled.  One timed call is one epoch
(``for batch in loader: pass``); the reported time is per batch (epoch time /
number of batches) and the rate is batches per second.  Each library runs
``num_workers=0`` and ``num_workers=2``; with workers the loaders keep their
workers (``persistent_workers=True``), so the figures are steady-state
throughput (worker start-up is excluded; it is a one-off cost).

Two datasets: ``TensorDataset`` itself (ember gathers a whole batch in one
pass per array when the collate function is the default one; PyTorch indexes
sample by sample and stacks), and a map-style ``Dataset`` subclass whose
``__getitem__`` returns ``(x[i], y[i])``, which takes the general path in
both libraries (per-sample indexing + default_collate).  A last row times
ember's workers with the batches pickled through the pipe instead of handed
over in shared memory (``loader._use_shm = False``), to show what the
shared-memory transport buys.

Before timing, one unshuffled epoch of each loader is compared with the
NumPy data (the first and last batch); a mismatch shows in the cell.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, make_row, torch, log, to_numpy  # noqa: E402

import ember  # noqa: E402
import ember.data  # noqa: E402


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3, 32, 32), dtype=np.float32)
    y = rng.integers(0, 10, size=n, dtype=np.int64)
    return x, y


class _EmberPairs(ember.data.Dataset):
    """(x[i], y[i]) through a plain __getitem__ (the general per-sample path)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i], self.y[i]


if torch is not None:
    class _TorchPairs(torch.utils.data.Dataset):
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __len__(self):
            return self.x.shape[0]

        def __getitem__(self, i):
            return self.x[i], self.y[i]


def _datasets(x, y, kind):
    ex, ey = ember.array(x), ember.array(y)
    if kind == "tensor":
        eds = ember.data.TensorDataset(ex, ey)
        tds = torch.utils.data.TensorDataset(torch.from_numpy(x.copy()),
                                             torch.from_numpy(y.copy())) if torch else None
    else:
        eds = _EmberPairs(ex, ey)
        tds = _TorchPairs(torch.from_numpy(x.copy()), torch.from_numpy(y.copy())) if torch else None
    return eds, tds


def _loaders(eds, tds, batch, workers, shuffle, shm=True):
    kw = dict(batch_size=batch, shuffle=shuffle, num_workers=workers,
              persistent_workers=workers > 0)
    el = ember.data.DataLoader(eds, **kw)
    el._use_shm = el._use_shm and shm
    tl = torch.utils.data.DataLoader(tds, **kw) if tds is not None else None
    return el, tl


def _check(eds, tds, x, y, batch, workers, shm):
    """Compare the first and last batch of an unshuffled epoch with the NumPy data."""
    problems = {}
    el, tl = _loaders(eds, tds, batch, workers, shuffle=False, shm=shm)
    nb = -(-x.shape[0] // batch)
    for lib, loader in (("ember", el), ("torch", tl)):
        if loader is None:
            continue
        try:
            got = list(loader)
            ok = len(got) == nb
            for k in (0, nb - 1):
                lo, hi = k * batch, min((k + 1) * batch, x.shape[0])
                bx, by = got[k]
                ok = ok and np.array_equal(to_numpy(bx), x[lo:hi]) \
                    and np.array_equal(to_numpy(by), y[lo:hi])
            if not ok:
                problems[lib] = "batches differ from the data"
        except Exception as exc:
            problems[lib] = harness._short_error(exc)
        finally:
            it = getattr(loader, "_iterator", None)
            if it is not None and hasattr(it, "_shutdown_workers"):
                it._shutdown_workers()
    return problems


def _case(case, kind, n, batch, workers, repeat, shm=True, torch_too=True):
    x, y = _data(n)
    eds, tds = _datasets(x, y, kind)
    if not torch_too:
        tds = None
    problems = _check(eds, tds, x, y, batch, workers, shm)
    el, tl = _loaders(eds, tds, batch, workers, shuffle=True, shm=shm)
    nb = len(el)
    stmt = "for _b in loader:\n    pass"
    impls = {"ember": (stmt, {"loader": el}), "numpy": None,
             "torch": (stmt, {"loader": tl}) if tl is not None else None}
    log(f"  {case}")
    try:
        times, errors = interleaved(impls, number=1, repeat=repeat, warmup=1)
    finally:
        for loader in (el, tl):
            it = getattr(loader, "_iterator", None)
            if it is not None and hasattr(it, "_shutdown_workers"):
                it._shutdown_workers()
    for lib, msg in problems.items():
        errors.setdefault(lib, msg)
    per_batch = {lib: (t / nb if t else None) for lib, t in times.items()}
    # work=1e9 makes harness's rate column read 1 / (seconds per batch) = batches/s
    return make_row(case, per_batch, errors, work=1e9, unit="batches/s")


def bench_dataloader(n=10_000, batch=64, repeat=7, workers=(0, 2)):
    """Rows: TensorDataset and a per-sample Dataset, each with every worker count;
    then ember's workers with pickled batches (no shared memory)."""
    rows = []
    for kind, label in (("tensor", "TensorDataset"), ("pairs", "Dataset.__getitem__")):
        for w in workers:
            rows.append(_case(f"{label}, {n} x 3x32x32 float32, batch {batch}, shuffle, "
                              f"num_workers={w}, per batch", kind, n, batch, w, repeat))
    w = max(workers)
    if w > 0:
        rows.append(_case(f"ember workers without shared memory (batches pickled), "
                          f"TensorDataset, num_workers={w}, per batch", "tensor", n, batch, w,
                          repeat, shm=False, torch_too=False))
    return rows


def run(quick=False):
    """All data-loading rows; ``quick`` uses tiny sizes (for a smoke test)."""
    return harness.run_suite(
        (bench_dataloader,),
        (lambda: bench_dataloader(n=200, batch=16, repeat=2),),
        quick)


if __name__ == "__main__":
    harness.main(run)
