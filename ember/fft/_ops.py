"""The three differentiable FFT primitives every ember.fft transform is built from.

- ``c2c(x, s, axes, norm, inverse)``: fftn / ifftn (x real or complex);
- ``r2c(x, s, axes, norm)``: rfftn (x real; the last axis keeps s[-1] // 2 + 1 terms);
- ``c2r(x, s, axes, norm)``: irfftn (x complex; the last axis gives s[-1] points).

Arguments arrive checked (ember/fft/_args.py): float32/64 or complex64/128 data, `axes`
unique non-negative ints, `s` the transform lengths (the input is cropped or zero-padded
to them), `norm` one of NumPy's three names.  On the host they run SciPy's pocketfft
(``scipy.fft``) on a zero-copy NumPy view; on a GPU, ember/cuda/ops_fft.py registers cuFFT
through CuPy under the same names.

Each gradient rule is the adjoint transform, written with these same primitives (so
double backward works), with PyTorch's complex convention (the gradient of a real loss
L is dL/dRe + i dL/dIm):

- c2c: the inverse-direction transform with the dual norm, cropped / zero-padded back
  to the input's lengths (the adjoint of zero-padding is cropping and vice versa);
- r2c: the one-sided gradient zero-padded to the full length s[-1], an inverse c2c with
  the dual norm, its real part (the engine takes it for real inputs);
- c2r: r2c of the gradient with the dual norm, the terms that stand for two conjugate
  frequencies (1 .. (s[-1] - 1) // 2) doubled.
"""
import numpy as np

import ember as E
from ember.autograd.registry import defop
from ember._api._util import numpy_view, wrap
from ember.fft._args import dual, complex_dtype, real_dtype

#: below this many points, scipy.fft runs on the calling thread.  Measured on the 2-core
#: machine (benchmarks/bench_fft.py's sizes, scipy.fft directly): 2 workers took 3-4x
#: longer than 1 for 262,144 and 1,048,576 points (waking the pool costs more than the
#: work it splits) and broke even at 4M and 16M points.
PARALLEL_MIN = 1 << 22

_sfft = None


def _scipy_fft():
    global _sfft
    if _sfft is None:
        import scipy.fft as sfft        # imported on the first transform: import ember stays quick
        _sfft = sfft
    return _sfft


def _workers(v, s, axes):
    """scipy.fft's worker threads: ember's thread count for big transforms, else 1.

    SciPy's pocketfft splits a call's independent 1-d transforms over its own pool.  The
    call is synchronous and made from the thread that runs ember's kernels, so its
    workers never run while that thread's OpenMP team does, and at most
    ember.get_num_threads() cores are busy, as in any ember op (set_num_threads(1)
    makes every transform single-threaded)."""
    size = 1
    for d, ax in zip(v.shape, range(v.ndim)):
        size *= s[axes.index(ax)] if ax in axes else d
    if size < PARALLEL_MIN:
        return 1
    return max(1, E.get_num_threads())


#: the host library: "scipy" (scipy.fft, chosen: see benchmarks/bench_fft.py) or "numpy"
#: (numpy.fft, NumPy 2's single-threaded pocketfft; kept for the benchmark's comparison)
HOST_LIBRARY = "scipy"


def _host(fn_name, x, s, axes, norm, out_dtype):
    v = numpy_view(x)
    if HOST_LIBRARY == "numpy":
        res = getattr(np.fft, fn_name)(v, s=s, axes=axes, norm=norm)
    else:
        fn = getattr(_scipy_fft(), fn_name)
        res = fn(v, s=s, axes=axes, norm=norm, workers=_workers(v, s, axes))
    if res.dtype != out_dtype:                  # (never for the four dtypes we pass)
        res = res.astype(out_dtype)
    return wrap(res)


def _fit(y, shape, axes):
    """y cropped / zero-padded along `axes` to the lengths in `shape` (ember ops)."""
    idx = [slice(None)] * y.ndim
    widths = [(0, 0)] * y.ndim
    crop = pad = False
    for a in axes:
        if y.shape[a] > shape[a]:
            idx[a] = slice(0, shape[a])
            crop = True
        elif y.shape[a] < shape[a]:
            widths[a] = (0, shape[a] - y.shape[a])
            pad = True
    if crop:
        y = y[tuple(idx)]
    if pad:
        y = E.pad(y, widths)
    return y


def _c2c_grad(g, res, x, s, axes, norm, inverse):
    gx = c2c(g, list(g.shape[a] for a in axes), axes, dual(norm), not inverse)
    return _fit(gx, x.shape, axes), None, None, None, None


@defop("fft._c2c", grad=_c2c_grad, save_args=False)
def c2c(x, s, axes, norm, inverse):
    """fftn (inverse=False) or ifftn of x over `axes` with lengths `s`."""
    return _host("ifftn" if inverse else "fftn", x, s, axes, norm, complex_dtype(x.dtype))


def _r2c_grad(g, res, x, s, axes, norm):
    last = axes[-1]
    full = list(g.shape)
    full[last] = s[-1]
    g = _fit(g, full, [last])                       # the one-sided spectrum, zero-padded
    gx = c2c(g, list(s), axes, dual(norm), True)
    return _fit(gx, x.shape, axes), None, None, None


@defop("fft._r2c", grad=_r2c_grad, save_args=False)
def r2c(x, s, axes, norm):
    """rfftn of real x over `axes` with lengths `s`."""
    return _host("rfftn", x, s, axes, norm, complex_dtype(x.dtype))


def _double_terms(n, dtype, ndim, axis, device):
    """Weights (1, 2, ..., 2, 1 if n is even) along `axis` of a one-sided spectrum of a
    length-n real signal, shaped to broadcast."""
    m = n // 2 + 1
    w = np.full(m, 2.0, dtype=dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    shape = [1] * ndim
    shape[axis] = m
    return E.asarray(w.reshape(shape), device=device)


def _c2r_grad(g, res, x, s, axes, norm):
    gx = r2c(g, list(g.shape[a] for a in axes), axes, dual(norm))
    gx = gx * _double_terms(s[-1], real_dtype(gx.dtype), gx.ndim, axes[-1], gx.device)
    return _fit(gx, x.shape, axes), None, None, None


@defop("fft._c2r", grad=_c2r_grad, save_args=False)
def c2r(x, s, axes, norm):
    """irfftn of complex x over `axes`, real output with lengths `s`."""
    return _host("irfftn", x, s, axes, norm, real_dtype(x.dtype))
