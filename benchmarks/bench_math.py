"""float32 transcendental ufuncs on the CPU: ember vs NumPy vs PyTorch.

    python benchmarks/bench_math.py            # the table (~30 s)
    python benchmarks/bench_math.py --quick    # tiny sizes, a few seconds

No target: the table records what ember's own branch-free float32 exp, expm1, log,
log1p and tanh (ember/_kernels/cpu/em_math.h, built for AVX2 where the CPU has it)
cost next to NumPy's SIMD loops and PyTorch's vectorised ones; sin stays on libm.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, make_row, torch  # noqa: E402

import ember  # noqa: E402

FUNCS = ("exp", "expm1", "log", "log1p", "tanh", "sin")


def bench_func(name, n, number, repeat):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    if name.startswith("log"):
        x = np.abs(x) + np.float32(0.1)
    ns = {"ember": {"f": getattr(ember, name), "x": ember.asarray(x.copy())},
          "numpy": {"f": getattr(np, name), "x": x.copy()},
          "torch": {"f": getattr(torch, name), "x": torch.from_numpy(x.copy())}
          if torch is not None else None}
    impls = {lib: ("f(x)", ns[lib]) if ns[lib] is not None else None for lib in harness.LIBS}
    times, errors = interleaved(impls, number, repeat)
    return [make_row(f"`{name}`, {n:,} float32", times, errors, work=8 * n)]


def run(quick=False):
    n, number, repeat = (1000, 2, 3) if quick else (1_000_000, 10, 21)
    return harness.run_suite([lambda f=f: bench_func(f, n, number, repeat) for f in FUNCS],
                             [lambda f=f: bench_func(f, n, number, repeat) for f in FUNCS],
                             quick)


if __name__ == "__main__":
    harness.main(run)
