"""ember.fft on the CPU: ember vs NumPy (numpy.fft) vs PyTorch (torch.fft).

    python benchmarks/bench_fft.py            # the table (~1 minute)
    python benchmarks/bench_fft.py --quick    # tiny sizes, a few seconds

Each case runs twice for ember, once per host library behind ember.fft: SciPy's
pocketfft (``scipy.fft``, with ``workers=ember.get_num_threads()`` from 4M points on,
what ember ships) and NumPy's (``numpy.fft``, single-threaded), so the table shows the
choice.  No target: the table records the cost of the FFT library ember calls.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, make_row, torch  # noqa: E402

import ember  # noqa: E402
from ember.fft import _ops  # noqa: E402

# (label, function name, shape, dtype)
CASES = [
    ("fft 1-d", "fft", (1 << 20,), np.complex64),
    ("rfft2", "rfft2", (1024, 1024), np.float32),
    ("fft batch", "fft", (4096, 64), np.complex64),
    ("irfft batch", "irfft", (2048, 129), np.complex64),
]
QUICK = [("fft 1-d", "fft", (256,), np.complex64), ("rfft2", "rfft2", (16, 16), np.float32)]


def _library(name):
    def before():
        _ops.HOST_LIBRARY = name

    def after():
        _ops.HOST_LIBRARY = "scipy"
    return before, after


def bench_case(label, fn, shape, dtype, number, repeat):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(dtype)
    rows = []
    for lib in ("scipy", "numpy"):
        ns = {"ember": {"f": getattr(ember.fft, fn), "x": ember.asarray(x.copy())},
              "numpy": {"f": getattr(np.fft, fn), "x": x.copy()},
              "torch": {"f": getattr(torch.fft, fn), "x": torch.from_numpy(x.copy())}
              if torch is not None else None}
        impls = {k: ("f(x)", ns[k]) if ns[k] is not None else None for k in harness.LIBS}
        times, errors = interleaved(impls, number, repeat, hooks={"ember": _library(lib)})
        shape_s = "x".join(str(d) for d in shape)
        rows.append(make_row(f"`{fn}` {shape_s} {np.dtype(dtype).name} (ember via "
                             f"{lib}.fft)", times, errors, note=label))
    return rows


def run(quick=False):
    cases, number, repeat = (QUICK, 2, 3) if quick else (CASES, 3, 11)
    return harness.run_suite(
        [lambda c=c: bench_case(*c, number, repeat) for c in CASES],
        [lambda c=c: bench_case(*c, number, repeat) for c in QUICK], quick)


if __name__ == "__main__":
    harness.main(run)
