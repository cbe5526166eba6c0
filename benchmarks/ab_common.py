"""What the A/B scripts (``ab_*.py``) share: round-robin timing with medians, and one
training step of ``bench_train.py``'s network with an ember switch off and on, PyTorch
alongside, in one process.

Round-robin order (each repetition starts one callable later) keeps any mode from always
following the same neighbour, whose warm caches would otherwise favour it.

    >>> import time
    >>> ms = round_robin({"a": lambda: None, "b": lambda: None}, time.perf_counter, 1, 3)
    >>> sorted(ms)
    ['a', 'b']
"""
import os
import time

import numpy as np

import harness


def round_robin(fns, clock, number, repeat, warmup=2):
    """{name: median ms per call} of the callables in ``fns``, each run ``number`` times
    per sample, ``repeat`` samples, after ``warmup`` untimed calls each."""
    names = list(fns)
    for k in names:
        for _ in range(warmup):
            fns[k]()
    samples = {k: [] for k in names}
    for r in range(repeat):
        for k in names[r % len(names):] + names[:r % len(names)]:
            t0 = clock()
            for _ in range(number):
                fns[k]()
            samples[k].append((clock() - t0) / number * 1e3)
    return {k: float(np.median(v)) for k, v in samples.items()}


def step_ab(net, batch, switch, repeat, wall=False, number=1, labels=("before", "after"),
            restore=True):
    """Medians (ms per step) of ``bench_train``'s ``net`` step for PyTorch and for ember
    with ``switch(False)`` (``labels[0]``) and ``switch(True)`` (``labels[1]``), in
    round-robin.  One thread and CPU time by default (a loaded machine disturbs it far
    less); ``wall`` uses two threads and wall time.  Ends with ``switch(restore)``."""
    import bench_train as bt
    import ember
    threads = 2 if wall else 1
    harness.torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    clock = time.perf_counter if wall else time.process_time
    ns = bt._namespaces(net, batch)
    code = compile(bt.STEP, "<step>", "exec")
    envs = {"torch": dict(ns["torch"]), labels[0]: dict(ns["ember"]),
            labels[1]: dict(ns["ember"])}

    def run(kind):
        if kind != "torch":
            switch(kind == labels[1])
        exec(code, envs[kind])

    try:
        return round_robin({k: (lambda k=k: run(k)) for k in envs}, clock, number, repeat)
    finally:
        switch(restore)


def describe(ms, wall, labels=("before", "after"), digits=3):
    """One line: clock, load, the medians and the ratios of a ``step_ab`` result."""
    off, on = labels
    return (f"{'wall, 2 threads' if wall else 'CPU time, 1 thread'}; load average "
            f"{os.getloadavg()[0]:.1f}; ms per step: "
            + ", ".join(f"{k} {v:.{digits}f}" for k, v in ms.items())
            + f"; {on}/{off} {ms[on] / ms[off]:.3f}, {on}/torch {ms[on] / ms['torch']:.3f}, "
            f"{off}/torch {ms[off] / ms['torch']:.3f}")
