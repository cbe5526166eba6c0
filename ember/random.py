"""ember.random: seeded random numbers (NumPy's PCG64 generator underneath).

``default_rng(seed)`` gives a ``Generator`` whose methods return ember
arrays; the module functions use a global generator that ``seed`` (or
``manual_seed``) resets, so a program is reproducible from one seed.
Floating results have ember's default float dtype (float32) unless
``dtype=`` says otherwise; ``random`` and ``standard_normal`` draw float32
directly (NumPy supports it), the other distributions draw float64 and cast.

>>> import ember
>>> a = ember.random.default_rng(0).random(3); b = ember.random.default_rng(0).random(3)
>>> bool((a == b).all()), a.dtype
(True, dtype('float32'))
"""
import sys

import numpy as np

from ember._core.dtypes import default_float_dtype
from ember._api._util import as_array, numpy_view, empty_raw
from ember._core.dtypes import dtype_kind

__all__ = ["Generator", "default_rng", "seed", "manual_seed", "rand", "randn", "randint",
           "random", "random_sample", "normal", "uniform", "choice", "permutation", "shuffle",
           "standard_normal", "integers", "exponential", "get_state", "set_state", "bernoulli"]


def _ember(res):
    res = np.asarray(res)
    out = empty_raw(res.shape, res.dtype)
    numpy_view(out)[...] = res
    return out


def _float(dtype):
    dt = np.dtype(default_float_dtype() if dtype is None else dtype)
    if dtype_kind(dt) != "f":
        raise TypeError(f"random: dtype must be a floating dtype, got {dt}")
    return dt


class Generator:
    """A random generator with NumPy's ``Generator`` methods, returning ember arrays.

    >>> import ember
    >>> g = ember.random.default_rng(42)
    >>> g.integers(0, 10, size=3).dtype
    dtype('int64')
    """

    def __init__(self, seed=None):
        self._g = np.random.default_rng(seed)

    def random(self, size=None, dtype=None, *, out=None):
        dt = _float(dtype)
        if dt in (np.float32, np.float64):
            r = self._g.random(size, dtype=dt)
        else:
            r = self._g.random(size).astype(dt)
        return _ember(r)

    def standard_normal(self, size=None, dtype=None):
        dt = _float(dtype)
        if dt in (np.float32, np.float64):
            return _ember(self._g.standard_normal(size, dtype=dt))
        return _ember(self._g.standard_normal(size).astype(dt))

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=None):
        loc = numpy_view(as_array(loc)) if hasattr(loc, "__array__") else loc
        scale = numpy_view(as_array(scale)) if hasattr(scale, "__array__") else scale
        return _ember(np.asarray(self._g.normal(loc, scale, size)).astype(_float(dtype)))

    def uniform(self, low=0.0, high=1.0, size=None, dtype=None):
        low = numpy_view(as_array(low)) if hasattr(low, "__array__") else low
        high = numpy_view(as_array(high)) if hasattr(high, "__array__") else high
        return _ember(np.asarray(self._g.uniform(low, high, size)).astype(_float(dtype)))

    def exponential(self, scale=1.0, size=None, dtype=None):
        return _ember(np.asarray(self._g.exponential(scale, size)).astype(_float(dtype)))

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        return _ember(np.asarray(self._g.integers(low, high, size, dtype=dtype, endpoint=endpoint)))

    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        a = numpy_view(as_array(a)) if not isinstance(a, (int, np.integer)) else a
        p = numpy_view(as_array(p)) if p is not None else None
        return _ember(np.asarray(self._g.choice(a, size, replace=replace, p=p, axis=axis,
                                                shuffle=shuffle)))

    def permutation(self, x, axis=0):
        if isinstance(x, (int, np.integer)):
            return _ember(self._g.permutation(x).astype(np.int64))
        return _ember(self._g.permutation(numpy_view(as_array(x)), axis=axis))

    def shuffle(self, x, axis=0):
        """Shuffle an ember array in place along `axis`."""
        v = numpy_view(x)
        self._g.shuffle(v, axis=axis)
        x._bump_version()

    def bernoulli(self, p, size=None, dtype=None):
        """1.0 with probability p, else 0.0."""
        pv = numpy_view(as_array(p)) if hasattr(p, "__array__") else p
        shape = size if size is not None else np.shape(pv)
        return _ember((self._g.random(shape) < pv).astype(_float(dtype)))


def default_rng(seed=None):
    """A new ``Generator`` seeded with `seed` (fresh entropy when None).

    >>> import ember
    >>> ember.random.default_rng(1).standard_normal((2, 2)).shape
    (2, 2)
    """
    return Generator(seed)


_global = Generator(None)
_cuda_seed = None       # the last seed(s): CUDA generators (ember.cuda.ops_random) start from it


def _gpu(device):
    """The CUDA Device a draw runs on when `device` (None: the default device, as for
    ember.zeros) is one, else None (the host generator draws)."""
    from ember._core.array import Device, _get_default_device
    d = Device(_get_default_device() if device is None else device)
    return d if d.type == "cuda" else None


def _cuda():
    from ember.cuda import ops_random
    return ops_random


def seed(s=None):
    """Reseed the global generator (the module functions draw from it), and the CUDA
    devices' generators when the GPU backend is loaded.

    >>> import ember
    >>> ember.random.seed(0); a = ember.random.rand(2); ember.random.seed(0)
    >>> bool((a == ember.random.rand(2)).all())
    True
    """
    global _global, _cuda_seed
    _global = Generator(s)
    _cuda_seed = s
    gpu = sys.modules.get("ember.cuda.ops_random")
    if gpu is not None:
        gpu.manual_seed_all(s)


manual_seed = seed


def get_state():
    """The global generator's state (a dict; pass it to ``set_state``).

    >>> import ember
    >>> isinstance(ember.random.get_state(), dict)
    True
    """
    return _global._g.bit_generator.state


def set_state(state):
    """Restore a state from ``get_state``.

    >>> import ember
    >>> s = ember.random.get_state(); a = ember.random.rand(2); ember.random.set_state(s)
    >>> bool((a == ember.random.rand(2)).all())
    True
    """
    _global._g.bit_generator.state = state


def rand(*shape, dtype=None, device=None):
    """Uniform [0, 1) samples of the given shape (on `device`; None: the default device).

    >>> import ember
    >>> ember.random.rand(2, 3).shape
    (2, 3)
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().rand(*shape, dtype=dtype, device=d)
    return _global.random(shape if shape else None, dtype=dtype)


def randn(*shape, dtype=None, device=None):
    """Standard normal samples of the given shape (on `device`; None: the default device).

    >>> import ember
    >>> ember.random.randn(4).shape
    (4,)
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().randn(*shape, dtype=dtype, device=d)
    return _global.standard_normal(shape if shape else None, dtype=dtype)


def randint(low, high=None, size=None, dtype=np.int64, device=None):
    """Integers in [low, high) (or [0, low) when high is None).

    >>> import ember
    >>> int(ember.random.randint(5, size=10).max()) < 5
    True
    """
    if high is None:
        low, high = 0, low
    d = _gpu(device)
    if d is not None:
        return _cuda().integers(low, high, size, dtype, device=d)
    return _global.integers(low, high, size=size, dtype=dtype)


def integers(low, high=None, size=None, dtype=np.int64, endpoint=False, device=None):
    """Module-level ``integers`` on the global generator (see ``Generator.integers``).

    >>> import ember
    >>> int(ember.random.integers(0, 3, size=5).max()) < 3
    True
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().integers(low, high, size, dtype, endpoint, device=d)
    return _global.integers(low, high, size=size, dtype=dtype, endpoint=endpoint)


def random(size=None, dtype=None, device=None):
    """Uniform [0, 1) samples.

    >>> import ember
    >>> ember.random.random((2,)).dtype
    dtype('float32')

    >>> import ember
    >>> int(ember.random.integers(0, 3, size=5).max()) < 3
    True
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().random(size, dtype, device=d)
    return _global.random(size, dtype=dtype)


random_sample = random


def standard_normal(size=None, dtype=None, device=None):
    """Module-level ``standard_normal`` on the global generator (see ``Generator.standard_normal``).

    >>> import ember
    >>> ember.random.standard_normal((2,)).dtype
    dtype('float32')
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().standard_normal(size, dtype, device=d)
    return _global.standard_normal(size, dtype=dtype)


def normal(loc=0.0, scale=1.0, size=None, dtype=None, device=None):
    """Normal samples with mean `loc` and standard deviation `scale`.

    >>> import ember
    >>> ember.random.normal(0, 1, size=(3,)).shape
    (3,)

    >>> import ember
    >>> ember.random.standard_normal((2,)).dtype
    dtype('float32')
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().normal(loc, scale, size, dtype, device=d)
    return _global.normal(loc, scale, size, dtype=dtype)


def uniform(low=0.0, high=1.0, size=None, dtype=None, device=None):
    """Uniform samples in [low, high).

    >>> import ember
    >>> float(ember.random.uniform(2, 3, size=5).min()) >= 2
    True
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().uniform(low, high, size, dtype, device=d)
    return _global.uniform(low, high, size, dtype=dtype)


def exponential(scale=1.0, size=None, dtype=None):
    """Module-level ``exponential`` on the global generator (see ``Generator.exponential``).

    >>> import ember
    >>> float(ember.random.exponential(1.0, size=10).min()) >= 0
    True
    """
    return _global.exponential(scale, size, dtype=dtype)


def bernoulli(p, size=None, dtype=None, device=None):
    """Module-level ``bernoulli`` on the global generator (see ``Generator.bernoulli``).

    >>> import ember
    >>> ember.random.bernoulli(0.5, size=(3,)).shape
    (3,)
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().bernoulli(p, size, dtype, device=d)
    return _global.bernoulli(p, size, dtype=dtype)


def choice(a, size=None, replace=True, p=None):
    """Random sample from a 1-d array (or from arange(a) when a is an int).

    >>> import ember
    >>> ember.random.choice(5, size=3, replace=False).shape
    (3,)

    >>> import ember
    >>> float(ember.random.exponential(1.0, size=10).min()) >= 0
    True

    >>> import ember
    >>> ember.random.bernoulli(0.5, size=(3,)).shape
    (3,)
    """
    return _global.choice(a, size, replace=replace, p=p)


def permutation(x):
    """A random permutation of arange(x), or a shuffled copy of x.

    >>> import ember
    >>> sorted(ember.random.permutation(4).tolist())
    [0, 1, 2, 3]
    """
    return _global.permutation(x)


def shuffle(x):
    """Shuffle an ember array in place along its first axis.

    >>> import ember
    >>> x = ember.arange(4); ember.random.shuffle(x); sorted(x.tolist())
    [0, 1, 2, 3]
    """
    _global.shuffle(x)
