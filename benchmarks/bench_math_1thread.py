"""Per-thread cost of the float32 math in bench_math.py: ember, NumPy/SciPy and PyTorch
each on ONE thread, interleaved medians of 15 repetitions; prints markdown rows.

    python benchmarks/bench_math_1thread.py 1000000
    python benchmarks/bench_math_1thread.py 100000

For a loaded host, where 2-thread timings mean little (two OpenMP threads descheduled
by other jobs): one thread each compares the kernels' work per element.
"""
import sys
import time

import numpy as np
import scipy.special as sp
import torch

import ember
import ember.nn.functional as EF
from ember._kernels.cpu import embedding as K
torch.set_num_threads(1); ember.set_num_threads(1)
TF = torch.nn.functional
def em_erf(x):
    o = np.empty_like(x); K.erf(x, o); return o
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
number = 20 if n <= 100_000 else 5
rng = np.random.default_rng(0)
x = (rng.standard_normal(n) * 3).astype(np.float32); xp = np.abs(x) + np.float32(0.1)
ex, exp_, tx, txp = ember.asarray(x), ember.asarray(xp), torch.from_numpy(x), torch.from_numpy(xp)
C = {"exp": (lambda: ember.exp(ex), lambda: np.exp(x), lambda: torch.exp(tx)),
     "log": (lambda: ember.log(exp_), lambda: np.log(xp), lambda: torch.log(txp)),
     "tanh": (lambda: ember.tanh(ex), lambda: np.tanh(x), lambda: torch.tanh(tx)),
     "F.tanh": (lambda: EF.tanh(ex), lambda: np.tanh(x), lambda: torch.tanh(tx)),
     "sigmoid": (lambda: EF.sigmoid(ex), lambda: sp.expit(x), lambda: torch.sigmoid(tx)),
     "erf": (lambda: em_erf(x), lambda: sp.erf(x), lambda: torch.erf(tx)),
     "gelu": (lambda: EF.gelu(ex), None, lambda: TF.gelu(tx)),
     "gelu tanh": (lambda: EF.gelu(ex, approximate="tanh"), None,
                   lambda: TF.gelu(tx, approximate="tanh")),
     "softplus": (lambda: EF.softplus(ex), lambda: np.logaddexp(0, x), lambda: TF.softplus(tx))}
for name, fs in C.items():
    ts = [[] for _ in fs]
    for rep in range(15):
        for k in ([0, 1, 2] if rep % 2 else [2, 1, 0]):
            f = fs[k]
            if f is None: continue
            t = time.perf_counter()
            for _ in range(number): f()
            ts[k].append((time.perf_counter() - t) / number)
    m = [np.median(t) * 1e6 if t else float("nan") for t in ts]
    best = np.nanmin(m[1:])
    print(f"| {name} | {n:,} | {m[0]:.1f} | {m[1]:.1f} | {m[2]:.1f} | {m[0] / best:.2f}x |",
          flush=True)
