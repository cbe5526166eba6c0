"""ember.fft's three primitives on GPU arrays: cuFFT through ``cupy.fft`` (CuPy caches a
cuFFT plan per device, shape, dtype and layout) on zero-copy views of ember memory.

The public transforms (ember/fft/_transforms.py) check their arguments and cast dtypes
with ember ops on the arrays' device, then call these primitives with unique axes and
explicit lengths; the gradient rules are the host's (ember/fft/_ops.py), built from the
same primitives, so they run here too.
"""
import numpy as np

from ember.cuda import _runtime as R
from ember.cuda._dispatch import gpu_op

_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}
_REAL = {v: k for k, v in _COMPLEX.items()}


def _run(fn_name, x, s, axes, norm, dtype):
    c = R.cp()
    if x.size == 0:             # an empty batch: no cuFFT plan for zero transforms
        shape = list(x.shape)
        for n, a in zip(s, axes):
            shape[a] = n
        if fn_name == "rfftn":
            shape[axes[-1]] = s[-1] // 2 + 1
        return R.from_cupy(c.zeros(tuple(shape), dtype=dtype))
    res = getattr(c.fft, fn_name)(R.as_cupy(x), s=tuple(s), axes=tuple(axes), norm=norm)
    if res.dtype != dtype:          # keep single precision whatever CuPy's promotion
        res = res.astype(dtype)
    return R.from_cupy(res)


@gpu_op("fft._c2c")
def c2c(x, s, axes, norm, inverse):
    return _run("ifftn" if inverse else "fftn", x, s, axes, norm,
                _COMPLEX.get(x.dtype, x.dtype))


@gpu_op("fft._r2c")
def r2c(x, s, axes, norm):
    return _run("rfftn", x, s, axes, norm, _COMPLEX[x.dtype])


@gpu_op("fft._c2r")
def c2r(x, s, axes, norm):
    return _run("irfftn", x, s, axes, norm, _REAL[x.dtype])
