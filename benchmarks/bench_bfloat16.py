"""bfloat16 (and float16 elementwise) on the CPU: ember vs NumPy (ml_dtypes' bfloat16
ufuncs; NumPy's own float16) vs PyTorch.

    python benchmarks/bench_bfloat16.py            # the table (~1 minute)
    python benchmarks/bench_bfloat16.py --quick    # tiny sizes, a few seconds

Elementwise bfloat16 ops compute in float32 and round once; bfloat16 products run
ember's AVX512-BF16 kernel where the CPU has it (else float32 BLAS on widened operands).
The one target is issue #25's: the MLP step <= 1.0x PyTorch.  NumPy's matmul on
bfloat16 has no BLAS path, so its column there is a generic loop.  On a busy host see
also bf16_cputime.py (one-thread CPU time, and the fastest of many calls).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, make_row, torch  # noqa: E402

import ember  # noqa: E402
import ml_dtypes  # noqa: E402

BF = ml_dtypes.bfloat16


def _case(name, stmts, arrays, number, repeat, work=None, unit="GB/s", dtype="bfloat16"):
    """stmts: {lib: statement}; arrays: {name: float32 NumPy array} given to each library
    as its `dtype` array (bfloat16 or float16)."""
    ns = {"ember": {"ember": ember}, "numpy": {"np": np},
          "torch": {"torch": torch} if torch is not None else None}
    for k, v in arrays.items():
        ns["ember"][k] = ember.asarray(v).astype(getattr(ember, dtype))
        ns["numpy"][k] = v.astype(BF if dtype == "bfloat16" else np.float16)
        if torch is not None:
            ns["torch"][k] = torch.from_numpy(v).to(getattr(torch, dtype))
    impls = {lib: (stmts[lib], ns[lib]) if ns[lib] is not None and lib in stmts else None
             for lib in harness.LIBS}
    times, errors = interleaved(impls, number, repeat)
    return [make_row(name, times, errors, work=work, unit=unit)]


def elementwise(n, number, repeat):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    rows = _case(f"add bfloat16 ({n:,})", {"ember": "a + b", "numpy": "a + b", "torch": "a + b"},
                 {"a": a, "b": b}, number, repeat, work=3 * 2 * n)
    rows += _case(f"exp bfloat16 ({n:,})", {"ember": "ember.exp(a)", "numpy": "np.exp(a)",
                                            "torch": "torch.exp(a)"},
                  {"a": a}, number, repeat, work=2 * 2 * n)
    rows += _case(f"add float16 ({n:,})", {"ember": "a + b", "numpy": "a + b", "torch": "a + b"},
                  {"a": a, "b": b}, number, repeat, work=3 * 2 * n, dtype="float16")
    rows += _case(f"exp float16 ({n:,})", {"ember": "ember.exp(a)", "numpy": "np.exp(a)",
                                           "torch": "torch.exp(a)"},
                  {"a": a}, number, repeat, work=2 * 2 * n, dtype="float16")
    return rows


def reductions(n, number, repeat):
    a = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    return _case(f"sum bfloat16 ({n:,})", {"ember": "a.sum()", "numpy": "a.sum()",
                                           "torch": "a.sum()"}, {"a": a}, number, repeat,
                 work=2 * n)


def matmul(n, number, repeat):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    return _case(f"matmul bfloat16 {n}x{n}", {"ember": "a @ b", "numpy": "a @ b", "torch": "a @ b"},
                 {"a": a, "b": b}, number, repeat, work=2 * n ** 3, unit="GFLOP/s")


def mlp_step(batch, number, repeat):
    """One training step of a 784-256-10 MLP in bfloat16 (ember vs torch; NumPy has no nn)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    t = rng.integers(0, 10, batch)
    em = ember.nn.Sequential(ember.nn.Linear(784, 256), ember.nn.ReLU(), ember.nn.Linear(256, 10)).bfloat16()
    eo = ember.optim.SGD(em.parameters(), lr=0.01)
    ns = {"ember": {"m": em, "o": eo, "F": ember.nn.functional,
                    "x": ember.asarray(x).astype(ember.bfloat16), "t": ember.asarray(t)}}
    impls = {"ember": ("o.zero_grad(); F.cross_entropy(m(x), t).backward(); o.step()", ns["ember"]),
             "numpy": None, "torch": None}
    if torch is not None:
        tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                 torch.nn.Linear(256, 10)).bfloat16()
        to = torch.optim.SGD(tm.parameters(), lr=0.01)
        impls["torch"] = ("o.zero_grad(); F.cross_entropy(m(x), t).backward(); o.step()",
                          {"m": tm, "o": to, "F": torch.nn.functional,
                           "x": torch.from_numpy(x).to(torch.bfloat16), "t": torch.from_numpy(t)})
    times, errors = interleaved(impls, number, repeat)
    errors["numpy"] = "no nn"
    return [make_row(f"MLP 784-256-10 train step bfloat16 (batch {batch})", times, errors,
                     targets=(("torch", 1.0),))]       # issue #25


def run(quick=False):
    if quick:
        return harness.run_suite([], [lambda: elementwise(1000, 2, 3), lambda: reductions(1000, 2, 3),
                                      lambda: matmul(16, 2, 3), lambda: mlp_step(8, 1, 3)], True)
    return harness.run_suite([lambda: elementwise(1_000_000, 20, 25),
                              lambda: reductions(1_000_000, 20, 25),
                              lambda: matmul(256, 5, 15),
                              lambda: mlp_step(128, 5, 15)], [], False)


if __name__ == "__main__":
    harness.main(run)
