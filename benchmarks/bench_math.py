"""float32 math on the CPU: ember vs NumPy vs PyTorch (issue #25's "float32 math" target).

    python benchmarks/bench_math.py            # the table (~1 minute)
    python benchmarks/bench_math.py --quick    # tiny sizes, a few seconds

Target: each function <= 1.0x the faster of NumPy and PyTorch, at 1M and 100k contiguous
float32 elements.  Every call writes into a fresh result (no out=), as users call them.
The functions without a NumPy ufunc take NumPy's nearest spelling (the NumPy column):
sigmoid is ``scipy.special.expit``, erf ``scipy.special.erf``, softplus
``np.logaddexp(0, x)``; gelu has none.  ember has no public ``erf``: its row times the
kernel behind ``gelu`` and ``nn.init`` (``ember._kernels.cpu.embedding.erf``) writing into
a fresh array.  PyTorch runs on 2 threads (harness), NumPy and SciPy on one.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, make_row, torch  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as EF  # noqa: E402
from ember._kernels.cpu import embedding as _K  # noqa: E402

try:
    import scipy.special as _sp
except ImportError:  # pragma: no cover
    _sp = None


def _ember_erf(x):
    out = np.empty_like(x)
    _K.erf(x, out)
    return out


# name -> (ember statement, NumPy statement or None, PyTorch statement, input domain)
FUNCS = {
    "exp": ("ember.exp(x)", "np.exp(x)", "torch.exp(x)", "normal"),
    "expm1": ("ember.expm1(x)", "np.expm1(x)", "torch.expm1(x)", "normal"),
    "log": ("ember.log(x)", "np.log(x)", "torch.log(x)", "positive"),
    "log1p": ("ember.log1p(x)", "np.log1p(x)", "torch.log1p(x)", "positive"),
    "tanh": ("ember.tanh(x)", "np.tanh(x)", "torch.tanh(x)", "normal"),
    "sin": ("ember.sin(x)", "np.sin(x)", "torch.sin(x)", "normal"),
    "sigmoid": ("EF.sigmoid(x)", "sp.expit(x)", "torch.sigmoid(x)", "normal"),
    "erf": ("erf(xn)", "sp.erf(x)", "torch.erf(x)", "normal"),
    "gelu": ("EF.gelu(x)", None, "TF.gelu(x)", "normal"),
    "gelu tanh": ("EF.gelu(x, approximate='tanh')", None, "TF.gelu(x, approximate='tanh')",
                  "normal"),
    "softplus": ("EF.softplus(x)", "np.logaddexp(0, x)", "TF.softplus(x)", "normal"),
}
TARGETED = ("exp", "log", "tanh", "sigmoid", "erf", "gelu", "gelu tanh", "softplus")


def bench_func(name, n, number, repeat):
    em_stmt, np_stmt, t_stmt, domain = FUNCS[name]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    if domain == "positive":
        x = np.abs(x) + np.float32(0.1)
    ns = {"ember": {"ember": ember, "EF": EF, "erf": _ember_erf, "x": ember.asarray(x.copy()),
                    "xn": x.copy()},
          "numpy": {"np": np, "sp": _sp, "x": x.copy()} if np_stmt and (_sp or "sp." not in np_stmt)
          else None,
          "torch": {"torch": torch, "TF": torch.nn.functional if torch else None,
                    "x": torch.from_numpy(x.copy())} if torch is not None else None}
    stmts = {"ember": em_stmt, "numpy": np_stmt, "torch": t_stmt}
    impls = {lib: (stmts[lib], ns[lib]) if ns[lib] is not None else None for lib in harness.LIBS}
    times, errors = interleaved(impls, number, repeat)
    if np_stmt is None:
        errors["numpy"] = "no NumPy function"
    targets = (("best", 1.0),) if name in TARGETED else ()
    label = f"`{name}`, {n:,} float32"
    return [make_row(label, times, errors, targets=targets, work=8 * n)]


def run(quick=False):
    cases = []
    for n, number, repeat in ((1_000_000, 10, 21), (100_000, 50, 21)):
        cases += [lambda f=f, n=n, k=number, r=repeat: bench_func(f, n, k, r) for f in FUNCS]
    quick_cases = [lambda f=f: bench_func(f, 1000, 2, 3) for f in FUNCS]
    return harness.run_suite(cases, quick_cases, quick)


if __name__ == "__main__":
    harness.main(run)
