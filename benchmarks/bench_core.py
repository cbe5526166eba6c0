"""The core issue's performance table: ember vs NumPy vs PyTorch (CPU).

Run directly (``python benchmarks/bench_core.py``) to print the table, or
through ``benchmarks/run_all.py`` which also rewrites benchmarks/README.md.
Every ``bench_*`` function takes its sizes and repetition counts as
arguments (the smoke test runs them tiny) and returns a list of rows made by
``harness.make_row``.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, check_results, make_row, torch, log  # noqa: E402

import ember  # noqa: E402


def _inputs(shape, count, seed=0):
    """``count`` float32 arrays per library holding the same values, each
    library with its own memory (ember's allocated by ember)."""
    rng = np.random.default_rng(seed)
    nps = [rng.standard_normal(shape, dtype=np.float32) for _ in range(count)]
    ems = [ember.array(x) for x in nps]
    ths = [torch.from_numpy(x.copy()) for x in nps] if torch is not None else None
    return nps, ems, ths


def _case(case, stmts, names, arrays, number, repeat, warmup=3, exprs=None, blas_settle=0.0,
          **row_kw):
    """Time ``stmts[lib]`` with ``names`` bound to ``arrays[lib]`` for each library."""
    nps, ems, ths = arrays
    ns = {"numpy": dict(zip(names, nps), np=np),
          "ember": dict(zip(names, ems), ember=ember),
          "torch": dict(zip(names, ths), torch=torch) if ths is not None else None}
    impls = {lib: (None if ns[lib] is None or stmts.get(lib) is None else (stmts[lib], ns[lib]))
             for lib in harness.LIBS}
    log(f"  {case}")
    times, errors = interleaved(impls, number=number, repeat=repeat, warmup=warmup,
                                blas_settle=blas_settle)
    if exprs is None:
        exprs = stmts
    for lib, msg in check_results(exprs, ns).items():
        errors.setdefault(lib, msg)
    return make_row(case, times, errors, **row_kw)


# ------------------------------------------------------------------ case 1

def bench_small(n=100, number=10_000, repeat=31):
    """Per-call overhead: ``a + b`` and ``a.sum()`` on ``n`` float32 elements."""
    arrays = _inputs((n,), 2, seed=1)
    targets = (("torch", 0.3), ("numpy", 1.0))
    same = lambda s: {lib: s for lib in harness.LIBS}  # noqa: E731
    return [
        _case(f"`a + b`, {n} float32, per call", same("a + b"), ("a", "b"), arrays,
              number, repeat, warmup=number // 10 + 1, targets=targets),
        _case(f"`a.sum()`, {n} float32, per call", same("a.sum()"), ("a", "b"), arrays,
              number, repeat, warmup=number // 10 + 1, targets=targets),
    ]


# ------------------------------------------------------------------ case 2

def _count_label(n):
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else str(n)


def bench_large_elementwise(n=10_000_000, repeat=31):
    """``a + b`` and ``a * b + c`` on ``n`` float32, allocating the result each
    call as users write it, with GB/s; and copies, the memory-bandwidth limit."""
    arrays = _inputs((n,), 3, seed=2)
    item = 4
    label = _count_label(n)
    same = lambda s: {lib: s for lib in harness.LIBS}  # noqa: E731
    rows = [
        _case(f"`a + b`, {label} float32 (allocates result)", same("a + b"), ("a", "b", "c"),
              arrays, 1, repeat, targets=(("torch", 0.4),), work=3 * n * item),
        _case(f"`a * b + c`, {label} float32 (allocates result)", same("a * b + c"),
              ("a", "b", "c"), arrays, 1, repeat, targets=(("torch", 0.4),), work=4 * n * item),
    ]
    # Memory limit: a plain copy into a preallocated buffer (np.copyto,
    # torch copy_, ember dst[...] = src) and an allocating copy.
    nps, ems, ths = arrays
    dst = _inputs((n,), 1, seed=3)
    arrays2 = ([nps[0], dst[0][0]], [ems[0], dst[1][0]],
               [ths[0], dst[2][0]] if ths is not None else None)
    rows.append(_case(f"copy {label} float32 into preallocated dst (memory limit)",
                      {"numpy": "np.copyto(d, s)", "torch": "d.copy_(s)", "ember": "d[...] = s"},
                      ("s", "d"), arrays2, 1, repeat, exprs={lib: "d" for lib in harness.LIBS},
                      work=2 * n * item))
    rows.append(_case(f"`x.copy()`, {label} float32 (allocates; torch `x.clone()`)",
                      {"numpy": "s.copy()", "torch": "s.clone()", "ember": "s.copy()"},
                      ("s", "d"), arrays2, 1, repeat, work=2 * n * item))
    return rows


# ------------------------------------------------------------------ case 3

def bench_sum_2d(shape=(4096, 4096), repeat=25):
    """``sum`` over all elements, axis 0 and axis 1 of a float32 matrix."""
    arrays = _inputs(shape, 1, seed=4)
    nbytes = int(np.prod(shape)) * 4
    s = "x".join(map(str, shape))
    target = (("best", 1.0),)
    rows = []
    for title, e, n, t in [
            ("`a.sum()`", "a.sum()", "a.sum()", "a.sum()"),
            ("`a.sum(axis=0)`", "a.sum(axis=0)", "a.sum(axis=0)", "a.sum(dim=0)"),
            ("`a.sum(axis=1)`", "a.sum(axis=1)", "a.sum(axis=1)", "a.sum(dim=1)")]:
        rows.append(_case(f"{title}, ({s}) float32", {"ember": e, "numpy": n, "torch": t},
                          ("a",), arrays, 1, repeat, targets=target, work=nbytes))
    return rows


# ------------------------------------------------------------------ case 4

def bench_matmul(n=1024, repeat=25):
    """float32 ``a @ b`` for (n, n) matrices, with GFLOP/s."""
    arrays = _inputs((n, n), 2, seed=5)
    same = {lib: "a @ b" for lib in harness.LIBS}
    return [_case(f"`a @ b`, {n}x{n} float32", same, ("a", "b"), arrays, 1, repeat,
                  blas_settle=0.15, targets=(("numpy", 1.05),), work=2 * n ** 3,
                  unit="GFLOP/s")]


def run(quick=False):
    """All core rows; ``quick`` uses tiny sizes (for the smoke test)."""
    return harness.run_suite(
        (bench_small, bench_large_elementwise, bench_sum_2d, bench_matmul),
        (lambda: bench_small(n=100, number=10, repeat=2),
         lambda: bench_large_elementwise(n=1000, repeat=2),
         lambda: bench_sum_2d(shape=(16, 8), repeat=2),
         lambda: bench_matmul(n=8, repeat=2)), quick)


if __name__ == "__main__":
    harness.main(run)
