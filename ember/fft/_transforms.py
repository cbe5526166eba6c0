"""The transforms of ``numpy.fft`` / the Array API fft extension, built from the three
primitives of ember/fft/_ops.py (whose gradient rules make every one differentiable).

NumPy's signatures (``a, n, axis, norm, out`` and ``a, s, axes, norm, out``); PyTorch's
``dim=`` is accepted for ``axis`` / ``axes``.  Results keep single precision (float32 /
complex64 in, complex64 / float32 out); integers and bool compute in the default float
dtype, float16 / bfloat16 in float32.
"""
import ember as E
from ember.fft import _args as A
from ember.fft._ops import c2c, r2c, c2r

__all__ = ["fft", "ifft", "fftn", "ifftn", "fft2", "ifft2", "rfft", "irfft", "rfftn", "irfftn",
           "rfft2", "irfft2", "hfft", "ihfft", "hfftn", "ihfftn", "hfft2", "ihfft2"]


# ---------------------------------------------------------------- complex to complex

def _c2c_nd(x, s, axes, norm, inverse):
    if not axes:
        return A.as_complex(x).copy()
    if A.unique(axes):
        return c2c(x, s, axes, norm, inverse)
    for ii in reversed(range(len(axes))):       # NumPy: one pass per entry, last first
        x = c2c(x, [s[ii]], [axes[ii]], norm, inverse)
    return x


def _c2c_1d(op, inverse, a, n, axis, norm, out, dim):
    x = A.float_input(a, op)
    norm = A.check_norm(norm, op)
    n, ax = A.one_axis(x, n, A.pick(axis, dim, -1, "axis", "dim", op), op)
    return A.into_out(c2c(x, [n], [ax], norm, inverse), out, op)


def _c2c_n(op, inverse, a, s, axes, norm, out, dim):
    x = A.float_input(a, op)
    norm = A.check_norm(norm, op)
    s, axes = A.nd_axes(x, s, A.pick(axes, dim, None, "axes", "dim", op), op)
    return A.into_out(_c2c_nd(x, s, axes, norm, inverse), out, op)


def fft(a, n=None, axis=-1, norm=None, out=None, *, dim=None):
    """One-dimensional discrete Fourier transform along `axis` (``numpy.fft.fft``).

    `n` crops or zero-pads the input to n points; `norm` is "backward" (default, no
    scaling), "ortho" (1/sqrt(n)) or "forward" (1/n).

    >>> import ember
    >>> y = ember.fft.fft(ember.asarray([1.0, 2.0, 3.0, 4.0]))
    >>> y.dtype, y.real.tolist(), ember.abs(y.imag).tolist()
    (dtype('complex64'), [10.0, -2.0, -2.0, -2.0], [0.0, 2.0, 0.0, 2.0])
    """
    return _c2c_1d("fft", False, a, n, axis, norm, out, dim)


def ifft(a, n=None, axis=-1, norm=None, out=None, *, dim=None):
    """One-dimensional inverse discrete Fourier transform (``numpy.fft.ifft``).

    >>> import ember
    >>> x = ember.asarray([1.0, 2.0, 3.0, 4.0])
    >>> ember.fft.ifft(ember.fft.fft(x)).real.tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    return _c2c_1d("ifft", True, a, n, axis, norm, out, dim)


def fftn(a, s=None, axes=None, norm=None, out=None, *, dim=None):
    """N-dimensional discrete Fourier transform over `axes` (all by default).

    `s` gives the lengths (-1: the input's), over the last ``len(s)`` axes when `axes`
    is None; a repeated axis is transformed once per appearance, as in NumPy.

    >>> import ember
    >>> ember.fft.fftn(ember.asarray([[1.0, 2.0], [3.0, 4.0]])).real.tolist()
    [[10.0, -2.0], [-4.0, 0.0]]
    """
    return _c2c_n("fftn", False, a, s, axes, norm, out, dim)


def ifftn(a, s=None, axes=None, norm=None, out=None, *, dim=None):
    """N-dimensional inverse discrete Fourier transform.

    >>> import ember
    >>> ember.fft.ifftn(ember.asarray([[10.0, -2.0], [-4.0, 0.0]])).real.tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    return _c2c_n("ifftn", True, a, s, axes, norm, out, dim)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, dim=None):
    """Two-dimensional discrete Fourier transform (fftn over the last two axes).

    >>> import ember
    >>> ember.fft.fft2(ember.asarray([[1.0, 2.0], [3.0, 4.0]])).real.tolist()
    [[10.0, -2.0], [-4.0, 0.0]]
    """
    return _c2c_n("fft2", False, a, s, axes if dim is None else None, norm, out, dim)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, dim=None):
    """Two-dimensional inverse discrete Fourier transform.

    >>> import ember
    >>> ember.fft.ifft2(ember.asarray([[10.0, -2.0], [-4.0, 0.0]])).real.tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    return _c2c_n("ifft2", True, a, s, axes if dim is None else None, norm, out, dim)


# ---------------------------------------------------------------- real input / output

def _rfft_nd(x, s, axes, norm, op):
    if not axes:
        raise ValueError(f"fft.{op}: at least one axis to transform is needed")
    if A.unique(axes):
        return r2c(x, s, axes, norm)
    x = r2c(x, [s[-1]], [axes[-1]], norm)       # NumPy: the real axis, then the others
    for ii in range(len(axes) - 2, -1, -1):
        x = c2c(x, [s[ii]], [axes[ii]], norm, False)
    return x


def _irfft_nd(x, s, axes, norm, op):
    if not axes:
        raise ValueError(f"fft.{op}: at least one axis to transform is needed")
    x = A.as_complex(x)
    if A.unique(axes):
        return c2r(x, s, axes, norm)
    for ii in range(len(axes) - 1):              # NumPy: the complex axes, then the real one
        x = c2c(x, [s[ii]], [axes[ii]], norm, True)
    return c2r(x, [s[-1]], [axes[-1]], norm)


def _rfft_n(op, a, s, axes, norm, out, dim, hermitian=False):
    x = A.float_input(a, op, real=True)
    norm = A.check_norm(norm, op)
    s, axes = A.nd_axes(x, s, A.pick(axes, dim, None, "axes", "dim", op), op)
    if hermitian:       # ihfftn: conj(rfftn) with the dual norm
        return A.into_out(E.conj(_rfft_nd(x, s, axes, A.dual(norm), op)), out, op)
    return A.into_out(_rfft_nd(x, s, axes, norm, op), out, op)


def _irfft_n(op, a, s, axes, norm, out, dim, hermitian=False):
    x = A.float_input(a, op)
    norm = A.check_norm(norm, op)
    s, axes = A.nd_axes(x, s, A.pick(axes, dim, None, "axes", "dim", op), op,
                        inverse_real=True)
    if hermitian:       # hfftn: irfftn of conj(a) with the dual norm
        x = A.as_complex(x)
        return A.into_out(_irfft_nd(E.conj(x), s, axes, A.dual(norm), op), out, op)
    return A.into_out(_irfft_nd(x, s, axes, norm, op), out, op)


def rfft(a, n=None, axis=-1, norm=None, out=None, *, dim=None):
    """Discrete Fourier transform of real input: the n // 2 + 1 non-negative frequencies.

    >>> import ember
    >>> ember.fft.rfft(ember.asarray([1.0, 2.0, 3.0, 4.0])).tolist()
    [(10+0j), (-2+2j), (-2+0j)]
    """
    x = A.float_input(a, "rfft", real=True)
    norm = A.check_norm(norm, "rfft")
    n, ax = A.one_axis(x, n, A.pick(axis, dim, -1, "axis", "dim", "rfft"), "rfft")
    return A.into_out(r2c(x, [n], [ax], norm), out, "rfft")


def irfft(a, n=None, axis=-1, norm=None, out=None, *, dim=None):
    """Inverse of rfft: n real points (default 2 * (m - 1)) from m one-sided terms.

    >>> import ember
    >>> ember.fft.irfft(ember.asarray([10.0, -2 + 2j, -2.0])).tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    x = A.float_input(a, "irfft")
    norm = A.check_norm(norm, "irfft")
    n, ax = A.one_axis(x, n, A.pick(axis, dim, -1, "axis", "dim", "irfft"), "irfft",
                       inverse_real=True)
    return A.into_out(c2r(A.as_complex(x), [n], [ax], norm), out, "irfft")


def rfftn(a, s=None, axes=None, norm=None, out=None, *, dim=None):
    """N-dimensional discrete Fourier transform of real input (the last axis one-sided).

    >>> import ember
    >>> ember.fft.rfftn(ember.ones((2, 4))).tolist()
    [[(8+0j), 0j, 0j], [0j, 0j, 0j]]
    """
    return _rfft_n("rfftn", a, s, axes, norm, out, dim)


def irfftn(a, s=None, axes=None, norm=None, out=None, *, dim=None):
    """Inverse of rfftn (the last axis gives s[-1] points, default 2 * (m - 1)).

    >>> import ember
    >>> ember.fft.irfftn(ember.asarray([[8.0, 0.0, 0.0], [0.0, 0.0, 0.0]])).tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    return _irfft_n("irfftn", a, s, axes, norm, out, dim)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, dim=None):
    """rfftn over the last two axes.

    >>> import ember
    >>> ember.fft.rfft2(ember.ones((2, 2))).tolist()
    [[(4+0j), 0j], [0j, 0j]]
    """
    return _rfft_n("rfft2", a, s, axes if dim is None else None, norm, out, dim)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, dim=None):
    """irfftn over the last two axes.

    >>> import ember
    >>> ember.fft.irfft2(ember.asarray([[4.0, 0.0], [0.0, 0.0]])).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return _irfft_n("irfft2", a, s, axes if dim is None else None, norm, out, dim)


# ---------------------------------------------------------------- Hermitian input / output

def hfft(a, n=None, axis=-1, norm=None, out=None, *, dim=None):
    """Transform of a signal with Hermitian symmetry given by its first half: n real
    points (default 2 * (m - 1)); ``irfft(conj(a), n)`` with the dual norm.

    >>> import ember
    >>> ember.fft.hfft(ember.asarray([1.0, 0.0, 0.0])).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    x = A.as_complex(A.float_input(a, "hfft"))
    norm = A.check_norm(norm, "hfft")
    n, ax = A.one_axis(x, n, A.pick(axis, dim, -1, "axis", "dim", "hfft"), "hfft",
                       inverse_real=True)
    return A.into_out(c2r(E.conj(x), [n], [ax], A.dual(norm)), out, "hfft")


def ihfft(a, n=None, axis=-1, norm=None, out=None, *, dim=None):
    """Inverse of hfft: the n // 2 + 1 one-sided terms of real input,
    ``conj(rfft(a, n))`` with the dual norm.

    >>> import ember
    >>> ember.fft.ihfft(ember.asarray([1.0, 1.0, 1.0, 1.0])).tolist()
    [(1-0j), -0j, -0j]
    """
    x = A.float_input(a, "ihfft", real=True)
    norm = A.check_norm(norm, "ihfft")
    n, ax = A.one_axis(x, n, A.pick(axis, dim, -1, "axis", "dim", "ihfft"), "ihfft")
    return A.into_out(E.conj(r2c(x, [n], [ax], A.dual(norm))), out, "ihfft")


def hfftn(a, s=None, axes=None, norm=None, out=None, *, dim=None):
    """N-dimensional hfft (``scipy.fft.hfftn``, ``torch.fft.hfftn``; not in NumPy):
    ``irfftn(conj(a), s, axes)`` with the dual norm.

    >>> import ember
    >>> ember.fft.hfftn(ember.asarray([[1.0, 0.0], [0.0, 0.0]])).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return _irfft_n("hfftn", a, s, axes, norm, out, dim, hermitian=True)


def ihfftn(a, s=None, axes=None, norm=None, out=None, *, dim=None):
    """N-dimensional ihfft (``scipy.fft.ihfftn``, ``torch.fft.ihfftn``; not in NumPy):
    ``conj(rfftn(a, s, axes))`` with the dual norm.

    >>> import ember
    >>> ember.fft.ihfftn(ember.ones((2, 2))).tolist()
    [[(1-0j), -0j], [-0j, -0j]]
    """
    return _rfft_n("ihfftn", a, s, axes, norm, out, dim, hermitian=True)


def hfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, dim=None):
    """hfftn over the last two axes (SciPy's and PyTorch's ``hfft2``).

    >>> import ember
    >>> ember.fft.hfft2(ember.asarray([[1.0, 0.0], [0.0, 0.0]])).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return _irfft_n("hfft2", a, s, axes if dim is None else None, norm, out, dim,
                    hermitian=True)


def ihfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, dim=None):
    """ihfftn over the last two axes (SciPy's and PyTorch's ``ihfft2``).

    >>> import ember
    >>> ember.fft.ihfft2(ember.ones((2, 2))).tolist()
    [[(1-0j), -0j], [-0j, -0j]]
    """
    return _rfft_n("ihfft2", a, s, axes if dim is None else None, norm, out, dim,
                   hermitian=True)
