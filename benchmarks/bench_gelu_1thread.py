"""Exact GELU forward and backward, ember against PyTorch, each on ONE thread: medians of
interleaved batches, wall time and this thread's CPU time (the CPU time moves less on a
loaded host).  Prints markdown rows.

    OMP_NUM_THREADS=1 python benchmarks/bench_gelu_1thread.py 100000
    OMP_NUM_THREADS=1 python benchmarks/bench_gelu_1thread.py 1000000

Inputs as bench_math.py's: normal(0, 3) float32.  Forward: ``F.gelu(x)`` and
``torch.nn.functional.gelu(x)`` (a fresh result each call); backward: the kernels with an
output given (``embedding.gelu_backward(g, x, out)``, ``torch.ops.aten.gelu_backward``).
"""
import sys
import time

import numpy as np
import torch

import ember
import ember.nn.functional as EF
from ember._kernels.cpu import embedding as K

torch.set_num_threads(1)
ember.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
number = 20 if n <= 100_000 else 4
rng = np.random.default_rng(0)
x = (rng.standard_normal(n) * 3).astype(np.float32)
g = rng.standard_normal(n).astype(np.float32)
out = np.empty_like(x)
ex, tx, tg = ember.asarray(x), torch.from_numpy(x), torch.from_numpy(g)
cases = {"gelu forward": (lambda: EF.gelu(ex), lambda: torch.nn.functional.gelu(tx)),
         "gelu backward": (lambda: K.gelu_backward(g, x, out),
                           lambda: torch.ops.aten.gelu_backward(tg, tx))}
for name, fs in cases.items():
    wall, cpu = [[], []], [[], []]
    for rep in range(21):
        for k in ((0, 1) if rep % 2 else (1, 0)):
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(number):
                fs[k]()
            wall[k].append((time.perf_counter() - t0) / number)
            cpu[k].append((time.thread_time() - c0) / number)
    w = [np.median(v) * 1e6 for v in wall]
    c = [np.median(v) * 1e6 for v in cpu]
    print(f"| {name} | {n:,} | {w[0]:.1f} | {w[1]:.1f} | {w[0] / w[1]:.2f}x | {c[0]:.1f} | "
          f"{c[1]:.1f} | {c[0] / c[1]:.2f}x |", flush=True)
