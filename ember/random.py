"""ember.random: NumPy's random streams, returning ember arrays.

Everything here draws from NumPy's own bit generators and distributions, so a
seeded program draws NumPy's numbers:

- ``default_rng(seed)`` gives a ``Generator`` over NumPy's ``default_rng(seed)``
  (PCG64): its methods draw what NumPy's draw.
- The module functions (``seed``, ``rand``, ``randn``, ``randint``, ``random``,
  ``normal``, ``uniform``, ``choice``, ``permutation``, ``shuffle``, and the other
  distributions of ``numpy.random``) draw from one global legacy state, NumPy's
  ``RandomState`` (MT19937): after ``ember.random.seed(s)`` they draw what
  ``numpy.random`` draws after ``numpy.random.seed(s)``.  ``ember.manual_seed(s)``
  (PyTorch's name) resets the same state, and ``nn.init``, dropout and
  ``ember.randn`` draw from it too, so one seed makes a program reproducible.

Dtypes: integer draws have NumPy's dtypes (int64).  Floating draws are NumPy's
float64 values, returned in ember's default float dtype (float32 unless
``ember.set_default_dtype(ember.float64)`` or ``EMBER_DEFAULT_DTYPE=float64``), or
in ``dtype=``: with float64 the values are exactly NumPy's.  The stream advances
exactly as NumPy's does in every case (``Generator.random(dtype=float32)`` and the
other methods that NumPy gives a float32 algorithm use that algorithm, as NumPy does).

>>> import ember, numpy
>>> a = ember.random.default_rng(0).random(3, dtype=ember.float64)
>>> bool((a == ember.asarray(numpy.random.default_rng(0).random(3))).all())
True
>>> ember.random.default_rng(0).random(3).dtype      # the default float dtype
dtype('float32')
"""
import operator

import numpy as np

from ember._api._util import as_array, numpy_view, empty_raw, float_draw_dtype
from ember._core.array import ndarray

__all__ = ["Generator", "default_rng", "seed", "manual_seed", "rand", "randn", "randint",
           "random", "random_sample", "ranf", "sample", "normal", "uniform", "choice",
           "permutation", "shuffle", "standard_normal", "integers", "exponential", "get_state",
           "set_state", "bernoulli", "RandomState",
           "beta", "binomial", "bytes", "chisquare", "dirichlet", "f", "gamma", "geometric",
           "gumbel", "hypergeometric", "laplace", "logistic", "lognormal", "logseries",
           "multinomial", "multivariate_normal", "negative_binomial", "noncentral_chisquare",
           "noncentral_f", "pareto", "poisson", "power", "rayleigh", "standard_cauchy",
           "standard_exponential", "standard_gamma", "standard_t", "triangular", "vonmises",
           "wald", "weibull", "zipf",
           "BitGenerator", "SeedSequence", "PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"]

# NumPy's bit generators and seed sequences themselves (states, no arrays):
# ember.random.Generator(ember.random.PCG64(seed)) is NumPy's Generator(PCG64(seed))
BitGenerator, SeedSequence = np.random.BitGenerator, np.random.SeedSequence
PCG64, PCG64DXSM, MT19937 = np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937
Philox, SFC64 = np.random.Philox, np.random.SFC64


# ---------------------------------------------------------------- conversions

def _ember(res):
    res = np.asarray(res)
    out = empty_raw(res.shape, res.dtype)
    numpy_view(out)[...] = res
    return out


_float = float_draw_dtype      # the floating dtype of a draw (None: the default float dtype)


def _np_arg(a):
    """An argument for NumPy: ember arrays as zero-copy NumPy views (host only)."""
    if isinstance(a, ndarray):
        return numpy_view(a) if not a.is_cuda else a.cpu().numpy()
    if isinstance(a, (list, tuple)) and any(isinstance(v, ndarray) for v in a):
        return type(a)(_np_arg(v) for v in a)
    return a


def _result(res, dtype=None):
    """NumPy's draw as an ember array: floats in `dtype` (None: the default float dtype),
    everything else in NumPy's dtype."""
    res = np.asarray(res)
    if res.dtype.kind == "f":
        dt = _float(dtype)
    elif dtype is not None:
        raise TypeError(f"random: dtype= applies to floating draws; this one gives {res.dtype}")
    else:
        dt = res.dtype
    out = empty_raw(res.shape, dt)
    numpy_view(out)[...] = res          # cast and copy in one pass
    return out


def _own_float_draw(method, size, dtype):
    """A draw from one of NumPy's methods that take dtype= (float32 or float64 algorithms):
    NumPy's float64 stream cast to the default dtype, unless a dtype NumPy has is asked."""
    if dtype is not None:
        dt = _float(dtype)
        if dt in (np.float32, np.float64):
            return _ember(method(size, dtype=dt))
    return _result(method(size), dtype)


def _size(shape):
    """rand(2, 3) / rand((2, 3)) / rand() -> a NumPy size."""
    if not shape:
        return None
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        if hasattr(shape[0], "__array_namespace__") or isinstance(shape[0], np.ndarray):
            raise TypeError("random: the size must be ints or a tuple of ints, not an array")
        return tuple(shape[0])
    return tuple(operator.index(s) for s in shape)


# ---------------------------------------------------------------- Generator

_FLOAT_DISTRIBUTIONS = ("beta", "chisquare", "dirichlet", "f", "gamma", "gumbel", "laplace",
                        "logistic", "lognormal", "multivariate_normal", "noncentral_chisquare",
                        "noncentral_f", "pareto", "power", "rayleigh", "standard_cauchy",
                        "standard_t", "triangular", "vonmises", "wald", "weibull")
_INT_DISTRIBUTIONS = ("binomial", "geometric", "hypergeometric", "logseries", "multinomial",
                      "negative_binomial", "poisson", "zipf")


def _zipf_bounded(args, kwargs):
    """NumPy's zipf loops forever for a > 1024 (seen with NumPy 2.4); there a draw is 1
    with probability 1 - 2**-1024 or more (1 in float64), which a = 1024 also gives."""
    if args:
        args = [np.minimum(args[0], 1024.0)] + list(args[1:])
    elif "a" in kwargs:
        kwargs = dict(kwargs, a=np.minimum(kwargs["a"], 1024.0))
    return args, kwargs


def _vonmises_bounded(args, kwargs):
    """NumPy's vonmises loops forever for kappa near 1e17 and above (seen with NumPy
    2.4): there the draws come from kappa = 1e15, whose spread around mu (3e-8 rad) is
    the nearest NumPy still draws; a documented approximation."""
    if len(args) > 1:
        args = list(args[:1]) + [np.minimum(args[1], 1e15)] + list(args[2:])
    elif "kappa" in kwargs:
        kwargs = dict(kwargs, kappa=np.minimum(kwargs["kappa"], 1e15))
    return args, kwargs


def _distribution(name, legacy):
    """A method (or module function, `legacy`) drawing NumPy's `name` distribution."""
    def draw(*args, dtype=None, **kwargs):
        src = _global._rs if legacy else args[0]._g
        args = args if legacy else args[1:]
        fn = getattr(src, name)
        args = [_np_arg(a) for a in args]
        kwargs = {k: _np_arg(v) for k, v in kwargs.items()}
        if name == "zipf":
            args, kwargs = _zipf_bounded(args, kwargs)
        elif name == "vonmises":
            args, kwargs = _vonmises_bounded(args, kwargs)
        res = fn(*args, **kwargs)
        return _result(res, dtype)
    where = "numpy.random" if legacy else "numpy.random.Generator"
    draw.__name__ = draw.__qualname__ = name
    draw.__doc__ = (f"NumPy's ``{where}.{name}`` (the same arguments and the same draws) "
                    f"as an ember array; floating results in the default float dtype or "
                    f"``dtype=``.")
    return draw


class Generator:
    """NumPy's ``Generator`` (``default_rng``) whose draws are ember arrays: the same
    arguments, the same stream, the same values (floats in the default float dtype
    unless ``dtype=`` says otherwise; see the module notes).

    >>> import ember, numpy
    >>> g = ember.random.default_rng(42)
    >>> g.integers(0, 10, size=3).tolist() == numpy.random.default_rng(42).integers(0, 10, 3).tolist()
    True
    """

    def __init__(self, seed=None):
        if isinstance(seed, np.random.BitGenerator):
            self._g = np.random.Generator(seed)
        elif isinstance(seed, np.random.Generator):
            self._g = seed
        else:
            self._g = np.random.default_rng(seed)

    @property
    def bit_generator(self):
        """The NumPy bit generator underneath (PCG64 for ``default_rng``)."""
        return self._g.bit_generator

    def __repr__(self):
        return f"ember.random.Generator({type(self._g.bit_generator).__name__})"

    def spawn(self, n_children):
        """``n_children`` independent child generators (NumPy's ``Generator.spawn``)."""
        return [Generator(g) for g in self._g.spawn(n_children)]

    def random(self, size=None, dtype=None, *, out=None):
        """Uniform [0, 1) floats (NumPy's ``Generator.random``)."""
        return _into(_own_float_draw(self._g.random, size, dtype), out)

    def standard_normal(self, size=None, dtype=None, *, out=None):
        """Standard normal floats (NumPy's ``Generator.standard_normal``)."""
        return _into(_own_float_draw(self._g.standard_normal, size, dtype), out)

    def standard_exponential(self, size=None, dtype=None, method="zig", *, out=None):
        """Standard exponential floats (NumPy's ``Generator.standard_exponential``)."""
        fn = lambda size, dtype=np.float64: self._g.standard_exponential(size, dtype, method)  # noqa: E731
        return _into(_own_float_draw(fn, size, dtype), out)

    def standard_gamma(self, shape, size=None, dtype=None, *, out=None):
        """Standard gamma floats (NumPy's ``Generator.standard_gamma``)."""
        fn = lambda size, dtype=np.float64: self._g.standard_gamma(_np_arg(shape), size, dtype)  # noqa: E731
        return _into(_own_float_draw(fn, size, dtype), out)

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=None):
        """Normal floats with mean `loc` and standard deviation `scale`."""
        return _result(self._g.normal(_np_arg(loc), _np_arg(scale), size), dtype)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=None):
        """Uniform floats in [low, high)."""
        return _result(self._g.uniform(_np_arg(low), _np_arg(high), size), dtype)

    def exponential(self, scale=1.0, size=None, dtype=None):
        """Exponential floats with the given `scale`."""
        return _result(self._g.exponential(_np_arg(scale), size), dtype)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        """Integers in [low, high) (NumPy's ``Generator.integers``)."""
        return _ember(np.asarray(self._g.integers(_np_arg(low), _np_arg(high), size,
                                                  dtype=dtype, endpoint=endpoint)))

    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        """Random sample from an array (or from arange(a) when a is an int)."""
        return _ember(np.asarray(self._g.choice(_np_arg(a), size, replace=replace,
                                                p=_np_arg(p), axis=axis, shuffle=shuffle)))

    def permutation(self, x, axis=0):
        """A permutation of arange(x), or a shuffled copy of x along `axis`."""
        if isinstance(x, (int, np.integer)):
            return _ember(self._g.permutation(x))
        return _ember(self._g.permutation(_np_arg(as_array(x)), axis=axis))

    def permuted(self, x, axis=None, out=None):
        """A copy of x with each slice along `axis` shuffled independently."""
        res = _ember(self._g.permuted(_np_arg(as_array(x)), axis=axis))
        return _into(res, out)

    def shuffle(self, x, axis=0):
        """Shuffle an ember array in place along `axis`."""
        _shuffle_into(self._g, x, axis)

    def bytes(self, length):
        """`length` random bytes (a Python ``bytes``, as in NumPy)."""
        return self._g.bytes(length)

    def bernoulli(self, p, size=None, dtype=None):
        """1.0 with probability p, else 0.0 (ember's; NumPy has no bernoulli)."""
        pv = _np_arg(p)
        shape = size if size is not None else np.shape(pv)
        return _ember((self._g.random(shape) < pv).astype(_float(dtype)))


for _name in _FLOAT_DISTRIBUTIONS + _INT_DISTRIBUTIONS:
    setattr(Generator, _name, _distribution(_name, legacy=False))


def _into(res, out):
    if out is None:
        return res
    if not isinstance(out, ndarray) or out.shape != res.shape:
        raise ValueError(f"random: out must be an ember array of shape {res.shape}")
    out[...] = res
    return out


def _shuffle_into(rng, x, axis=0):
    if not isinstance(x, ndarray):
        raise TypeError(f"shuffle: expected an ember array, got {type(x).__name__}")
    v = numpy_view(x)
    if not v.flags.writeable:
        raise ValueError("shuffle: the array is read-only")
    if axis == 0:
        rng.shuffle(v)
    else:
        rng.shuffle(v, axis=axis)
    x._bump_version()


def default_rng(seed=None):
    """A new ``Generator`` seeded with `seed` (fresh entropy when None): the same
    stream as ``numpy.random.default_rng(seed)``.

    >>> import ember
    >>> ember.random.default_rng(1).standard_normal((2, 2)).shape
    (2, 2)
    """
    if isinstance(seed, Generator):
        return seed
    return Generator(seed)


# ---------------------------------------------------------------- the global (legacy) state

_SEED_MASK64 = (1 << 64) - 1


def _legacy_state(s):
    """NumPy's RandomState for seed `s`: NumPy's legacy seeding for None, arrays and
    0 <= s < 2**32 (so the draws are numpy.random's after numpy.random.seed(s));
    larger integers (PyTorch accepts 64-bit seeds) seed MT19937 through a SeedSequence."""
    if isinstance(s, (int, np.integer)) and not isinstance(s, bool) and int(s) >= 1 << 32:
        return np.random.RandomState(np.random.MT19937(int(s)))
    return np.random.RandomState(s)


class _GlobalState:
    """The module functions' state: a NumPy ``RandomState`` (``_rs``) and a NumPy
    ``Generator`` over the same MT19937 (``_g``, for nn.init and dropout)."""

    def __init__(self, s=None):
        self.reseed(s)

    def reseed(self, s):
        if s is None:
            s = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
        self._rs = _legacy_state(s)
        self._g = np.random.Generator(self._rs._bit_generator)
        self.initial_seed = s


_global = _GlobalState(None)
def _reseed_cuda(s):
    """The CUDA generators (ember.cuda.ops_random, which keeps the seed: devices used later
    start from it) follow every seeding of the global state; no GPU is touched."""
    from ember.cuda import ops_random
    ops_random.manual_seed_all(s)


def _gpu(device):
    """The CUDA Device a draw runs on when `device` (None: the default device, as for
    ember.zeros) is one, else None (the host generator draws)."""
    from ember._core.array import Device, _get_default_device
    d = Device(_get_default_device() if device is None else device)
    return d if d.type == "cuda" else None


def _cuda():
    from ember.cuda import ops_random
    return ops_random


def seed(seed=None):
    """Reseed the global state (``numpy.random.seed``'s meaning: the module functions
    then draw NumPy's numbers), and the CUDA devices' generators.

    >>> import ember, numpy
    >>> ember.random.seed(0); numpy.random.seed(0)
    >>> bool((ember.random.rand(3, dtype=ember.float64) == ember.asarray(numpy.random.rand(3))).all())
    True
    """
    _global.reseed(seed)
    _reseed_cuda(seed)


def manual_seed(seed):
    """PyTorch's spelling of ``seed`` (the seed may be any 64-bit integer); returns
    ``ember.default_generator``.

    >>> import ember
    >>> ember.random.manual_seed(3).initial_seed()
    3
    """
    s = operator.index(seed)
    if s < 0:                      # PyTorch maps negative seeds into the unsigned range
        s &= _SEED_MASK64
    if s > _SEED_MASK64:
        raise RuntimeError(f"manual_seed: seed must be within [-2**63, 2**64), got {seed}")
    _global.reseed(s)
    _reseed_cuda(s)
    return default_generator


def get_state(legacy=True):
    """The global state, as ``numpy.random.get_state`` gives it (pass it to ``set_state``).

    >>> import ember
    >>> ember.random.get_state()[0]
    'MT19937'
    """
    return _global._rs.get_state(legacy=legacy)


def set_state(state):
    """Restore a state from ``get_state`` (or from ``numpy.random.get_state()``).

    >>> import ember
    >>> s = ember.random.get_state(); a = ember.random.rand(2); ember.random.set_state(s)
    >>> bool((a == ember.random.rand(2)).all())
    True
    """
    _global._rs.set_state(state)


def rand(*shape, dtype=None, device=None):
    """Uniform [0, 1) samples of the given shape (on `device`; None: the default device).

    >>> import ember
    >>> ember.random.rand(2, 3).shape
    (2, 3)
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().rand(*shape, dtype=dtype, device=d)
    return _result(_global._rs.random_sample(_size(shape)), dtype)


def randn(*shape, dtype=None, device=None):
    """Standard normal samples of the given shape (on `device`; None: the default device).

    >>> import ember
    >>> ember.random.randn(4).shape
    (4,)
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().randn(*shape, dtype=dtype, device=d)
    return _result(_global._rs.standard_normal(_size(shape)), dtype)


def randint(low, high=None, size=None, dtype=np.int64, device=None):
    """Integers in [low, high) (or [0, low) when high is None): ``numpy.random.randint``.

    >>> import ember
    >>> int(ember.random.randint(5, size=10).max()) < 5
    True
    """
    d = _gpu(device)
    if d is not None:
        if high is None:
            low, high = 0, low
        return _cuda().integers(low, high, size, dtype, device=d)
    return _ember(np.asarray(_global._rs.randint(_np_arg(low), _np_arg(high), size, dtype=dtype)))


def integers(low, high=None, size=None, dtype=np.int64, endpoint=False, device=None):
    """``Generator.integers``'s arguments on the global state (drawn as ``randint``).

    >>> import ember
    >>> int(ember.random.integers(0, 3, size=5).max()) < 3
    True
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().integers(low, high, size, dtype, endpoint, device=d)
    if high is None:
        low, high = 0, low
    if endpoint:
        high = high + 1
    return _ember(np.asarray(_global._rs.randint(_np_arg(low), _np_arg(high), size, dtype=dtype)))


def random(size=None, *, dtype=None, device=None):
    """Uniform [0, 1) samples (``numpy.random.random``).

    >>> import ember
    >>> ember.random.random((2,)).dtype
    dtype('float32')
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().random(size, dtype, device=d)
    return _result(_global._rs.random_sample(size), dtype)


random_sample = ranf = sample = random


def standard_normal(size=None, dtype=None, device=None):
    """Standard normal samples (``numpy.random.standard_normal``).

    >>> import ember
    >>> ember.random.standard_normal((2,)).dtype
    dtype('float32')
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().standard_normal(size, dtype, device=d)
    return _result(_global._rs.standard_normal(size), dtype)


def normal(loc=0.0, scale=1.0, size=None, dtype=None, device=None):
    """Normal samples with mean `loc` and standard deviation `scale`.

    >>> import ember
    >>> ember.random.normal(0, 1, size=(3,)).shape
    (3,)
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().normal(loc, scale, size, dtype, device=d)
    return _result(_global._rs.normal(_np_arg(loc), _np_arg(scale), size), dtype)


def uniform(low=0.0, high=1.0, size=None, dtype=None, device=None):
    """Uniform samples in [low, high).

    >>> import ember
    >>> float(ember.random.uniform(2, 3, size=5).min()) >= 2
    True
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().uniform(low, high, size, dtype, device=d)
    return _result(_global._rs.uniform(_np_arg(low), _np_arg(high), size), dtype)


def exponential(scale=1.0, size=None, dtype=None):
    """Exponential samples (``numpy.random.exponential``).

    >>> import ember
    >>> float(ember.random.exponential(1.0, size=10).min()) >= 0
    True
    """
    return _result(_global._rs.exponential(_np_arg(scale), size), dtype)


def bernoulli(p, size=None, dtype=None, device=None):
    """1.0 with probability p, else 0.0 (ember's; NumPy has no bernoulli).

    >>> import ember
    >>> ember.random.bernoulli(0.5, size=(3,)).shape
    (3,)
    """
    d = _gpu(device)
    if d is not None:
        return _cuda().bernoulli(p, size, dtype, device=d)
    pv = _np_arg(p)
    shape = size if size is not None else np.shape(pv)
    return _ember((_global._rs.random_sample(shape) < pv).astype(_float(dtype)))


def choice(a, size=None, replace=True, p=None):
    """Random sample from a 1-d array (or from arange(a) when a is an int).

    >>> import ember
    >>> ember.random.choice(5, size=3, replace=False).shape
    (3,)
    """
    return _ember(np.asarray(_global._rs.choice(_np_arg(a), size, replace=replace,
                                                p=_np_arg(p))))


def permutation(x):
    """A random permutation of arange(x), or a shuffled copy of x.

    >>> import ember
    >>> sorted(ember.random.permutation(4).tolist())
    [0, 1, 2, 3]
    """
    if isinstance(x, (int, np.integer)):
        return _ember(_global._rs.permutation(x))
    return _ember(_global._rs.permutation(_np_arg(as_array(x))))


def shuffle(x):
    """Shuffle an ember array in place along its first axis.

    >>> import ember
    >>> x = ember.arange(4); ember.random.shuffle(x); sorted(x.tolist())
    [0, 1, 2, 3]
    """
    _shuffle_into(_global._rs, x)


def standard_exponential(size=None, dtype=None):
    """Standard exponential samples (``numpy.random.standard_exponential``).

    >>> import ember
    >>> ember.random.standard_exponential(3).shape
    (3,)
    """
    return _result(_global._rs.standard_exponential(size), dtype)


def standard_gamma(shape, size=None, *, dtype=None):
    """Standard gamma samples (``numpy.random.standard_gamma``).

    >>> import ember
    >>> ember.random.standard_gamma(2.0, 3).shape
    (3,)
    """
    return _result(_global._rs.standard_gamma(_np_arg(shape), size), dtype)


def bytes(length):
    """`length` random bytes from the global state (``numpy.random.bytes``).

    >>> import ember
    >>> len(ember.random.bytes(4))
    4
    """
    return _global._rs.bytes(operator.index(length))


for _name in _FLOAT_DISTRIBUTIONS + _INT_DISTRIBUTIONS:
    _fn = _distribution(_name, legacy=True)
    _fn.__module__ = __name__
    _fn.__doc__ += ("\n\n    >>> import ember\n"
                    f"    >>> callable(ember.random.{_name})\n    True\n")
    globals()[_name] = _fn
del _name, _fn


class RandomState:
    """NumPy's legacy ``RandomState`` (MT19937) whose draws are ember arrays.

    >>> import ember, numpy
    >>> r = ember.random.RandomState(1)
    >>> r.randint(0, 100, 3).tolist() == numpy.random.RandomState(1).randint(0, 100, 3).tolist()
    True
    """

    def __init__(self, seed=None):
        self._rs = np.random.RandomState(seed)

    def seed(self, seed=None):
        self._rs.seed(seed)

    def get_state(self, legacy=True):
        return self._rs.get_state(legacy=legacy)

    def set_state(self, state):
        self._rs.set_state(state)

    def rand(self, *shape, dtype=None):
        return _result(self._rs.random_sample(_size(shape)), dtype)

    def randn(self, *shape, dtype=None):
        return _result(self._rs.standard_normal(_size(shape)), dtype)

    def shuffle(self, x):
        _shuffle_into(self._rs, x)

    def __getattr__(self, name):
        fn = getattr(self._rs, name)       # AttributeError for names NumPy lacks
        if not callable(fn):
            return fn

        def draw(*args, dtype=None, **kwargs):
            res = fn(*[_np_arg(a) for a in args], **{k: _np_arg(v) for k, v in kwargs.items()})
            if isinstance(res, (builtins_bytes, type(None))):
                return res
            return _result(res, dtype)
        draw.__name__ = name
        return draw


builtins_bytes = type(b"")


# ---------------------------------------------------------------- PyTorch's seeding

class TorchGenerator:
    """PyTorch's ``torch.Generator`` (``ember.Generator``): a seedable CPU random
    state whose draws feed ``generator=`` arguments (``nn.init``, samplers,
    ``random_split``).  ``ember.default_generator`` is the global one, the state
    that ``ember.manual_seed`` resets and the module functions draw from.

    >>> import ember
    >>> g = ember.Generator().manual_seed(7)
    >>> g.initial_seed()
    7
    """

    def __init__(self, device="cpu", *, _state=None):
        from ember._core.array import Device
        if Device(device).type != "cpu":
            raise RuntimeError(f"ember.Generator: only CPU generators are supported (got "
                               f"device={device!r}); CUDA generators are seeded with "
                               f"ember.cuda.manual_seed")
        self.device = Device("cpu")
        self._state = _GlobalState(None) if _state is None else _state

    @property
    def _g(self):
        return self._state._g          # the NumPy Generator nn.init and samplers draw from

    def manual_seed(self, seed):
        """Reseed (any 64-bit integer); returns the generator."""
        s = operator.index(seed)
        self._state.reseed(s & _SEED_MASK64 if s < 0 else s)
        if self._state is _global:
            _reseed_cuda(self._state.initial_seed)
        return self

    def seed(self):
        """Reseed from fresh entropy; returns the new seed."""
        self._state.reseed(None)
        if self._state is _global:
            _reseed_cuda(self._state.initial_seed)
        return self._state.initial_seed

    def initial_seed(self):
        """The seed this generator last started from."""
        return self._state.initial_seed

    def get_state(self):
        """The state (NumPy's MT19937 state dict); pass it to ``set_state``."""
        return {"seed": self._state.initial_seed,
                "mt19937": self._state._rs.get_state(legacy=False)}

    def set_state(self, state):
        """Restore a state from ``get_state``."""
        self._state._rs.set_state(state["mt19937"])
        self._state.initial_seed = state["seed"]

    def __repr__(self):
        return "<ember.Generator (cpu)>"


default_generator = TorchGenerator(_state=_global)


def initial_seed():
    """The seed the global state last started from (PyTorch's ``torch.initial_seed``).

    >>> import ember
    >>> _ = ember.manual_seed(5); ember.initial_seed()
    5
    """
    return _global.initial_seed


def torch_seed():
    """Reseed the global state from fresh entropy and return the seed (PyTorch's
    ``torch.seed``).

    >>> import ember
    >>> isinstance(ember.seed(), int)
    True
    """
    return default_generator.seed()
