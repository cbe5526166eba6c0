"""bfloat16 products and the bfloat16 MLP step: CPU time on one thread, for a busy host.

    python benchmarks/bf16_cputime.py            # ~1 minute
    python benchmarks/bf16_cputime.py --quick    # a few seconds
    python benchmarks/bf16_cputime.py --wall     # two threads, wall clock: the fastest of
                                                 # 400 single calls, interleaved (~1 minute)

Wall-clock timings mean little when the host's load is high (a process that waits for a
core counts the wait); ``time.process_time`` counts only the time this process ran.  ember
and PyTorch run on one thread each; the medians are of interleaved blocks of ``number``
calls in one process, with ember's bfloat16 GEMM kernel and its widen + sgemm path switched
per block (``gemm._set_bf16_kernel``).  This is a proxy: the target in ``run_all.py`` is the
two-thread wall-clock ratio, which needs a quiet host.
"""
import sys
import time

import numpy as np

import ember
from ember._kernels.cpu import gemm

try:
    import torch
except ImportError:          # pragma: no cover
    torch = None


def _cpu(f, number):
    t0 = time.process_time()
    for _ in range(number):
        f()
    return (time.process_time() - t0) / number


def _bf(x):
    return ember.asarray(x).astype(ember.bfloat16), torch.from_numpy(x).bfloat16()


def cases(batch=128):
    rng = np.random.default_rng(2)
    out = {}
    a, ta = _bf(rng.standard_normal((256, 256)).astype(np.float32))
    b, tb = _bf(rng.standard_normal((256, 256)).astype(np.float32))
    out["a @ b 256^3"] = (lambda: a @ b, lambda: ta @ tb)
    x, tx = _bf(rng.standard_normal((batch, 784)).astype(np.float32))
    w, tw = _bf(rng.standard_normal((256, 784)).astype(np.float32))
    out["F.linear 128x784, 256x784"] = (lambda: ember.nn.functional.linear(x, w),
                                        lambda: torch.nn.functional.linear(tx, tw))
    g, tg = _bf(rng.standard_normal((batch, 256)).astype(np.float32))
    out["g.T @ x (weight gradient)"] = (lambda: g.T @ x, lambda: tg.T @ tx)
    t = rng.integers(0, 10, batch)
    em = ember.nn.Sequential(ember.nn.Linear(784, 256), ember.nn.ReLU(),
                             ember.nn.Linear(256, 10)).bfloat16()
    eo = ember.optim.SGD(em.parameters(), lr=0.01)
    et = ember.asarray(t)
    tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                             torch.nn.Linear(256, 10)).bfloat16()
    to = torch.optim.SGD(tm.parameters(), lr=0.01)
    tt = torch.from_numpy(t)

    def e_step():
        eo.zero_grad()
        ember.nn.functional.cross_entropy(em(x), et).backward()
        eo.step()

    def t_step():
        to.zero_grad()
        torch.nn.functional.cross_entropy(tm(tx), tt).backward()
        to.step()
    out[f"MLP 784-256-10 SGD step (batch {batch})"] = (e_step, t_step)
    return out


def wall(calls=400):
    """ember's default threads and PyTorch's: percentiles 0 / 5 / 25 of single-call wall
    times, the three interleaved call by call (the fastest calls are those the load
    spared; still a proxy for a quiet run)."""
    on = gemm.bf16_kernel()
    for name, (fe, ft) in cases().items():
        impls = {"kernel": (fe, True), "sgemm": (fe, False), "torch": (ft, on)}
        if not on:
            del impls["kernel"]
        res = {k: [] for k in impls}
        try:
            for f, _ in impls.values():
                f(); f()
            for _ in range(calls):
                for k, (f, kern) in impls.items():
                    gemm._set_bf16_kernel(kern)
                    t0 = time.perf_counter()
                    f()
                    res[k].append(time.perf_counter() - t0)
        finally:
            gemm._set_bf16_kernel(on)
        for q in (0, 5, 25):
            m = {k: np.percentile(v, q) * 1e6 for k, v in res.items()}
            cols = ", ".join(f"{k} {v:.0f} us ({v / m['torch']:.2f}x)" for k, v in m.items())
            print(f"{name}, percentile {q}: {cols}")


def main(quick=False):
    if torch is None:
        print("PyTorch is not installed")
        return
    ember.set_num_threads(1)
    torch.set_num_threads(1)
    number, repeat = (1, 2) if quick else (10, 15)
    on = gemm.bf16_kernel()
    print(f"bfloat16 kernel available: {on}")
    for name, (fe, ft) in cases().items():
        fe(); ft()
        r = {"kernel": [], "sgemm": [], "torch": []}
        try:
            for _ in range(repeat):
                if on:
                    gemm._set_bf16_kernel(True)
                    r["kernel"].append(_cpu(fe, number))
                gemm._set_bf16_kernel(False)
                r["sgemm"].append(_cpu(fe, number))
                gemm._set_bf16_kernel(on)
                r["torch"].append(_cpu(ft, number))
        finally:
            gemm._set_bf16_kernel(on)
        m = {k: np.median(v) * 1e6 for k, v in r.items() if v}
        cols = ", ".join(f"{k} {v:.0f} us ({v / m['torch']:.2f}x)" for k, v in m.items())
        print(f"{name}: {cols}")


if __name__ == "__main__":
    if "--wall" in sys.argv:
        wall(20 if "--quick" in sys.argv else 400)
    else:
        main("--quick" in sys.argv)
