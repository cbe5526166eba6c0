"""Weight initialisation (PyTorch's ``torch.nn.init``): every function fills its array
in place, without recording gradients, and returns it.

Random draws come from ember.random's global state (so ``ember.manual_seed`` or
``ember.random.seed`` makes them reproducible) or from ``generator=`` (an
``ember.Generator`` or an ``ember.random.Generator``).

>>> import ember
>>> from ember.nn import init
>>> w = ember.empty((4, 3))
>>> _ = init.kaiming_uniform_(w, a=5 ** 0.5)
>>> bool((abs(w) <= 3 ** -0.5).all())
True
"""
import math
import warnings

import numpy as np

from ember._core.array import ndarray
from ember._api._util import numpy_view
from ember._kernels.cpu.gemm import one_blas_thread

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]


def _rng(generator):
    """The NumPy Generator behind `generator` (or behind ember.random's global one)."""
    if generator is None:
        import ember.random
        return ember.random._global._g
    g = getattr(generator, "_g", None)
    if g is None:
        if isinstance(generator, np.random.Generator):
            return generator
        raise TypeError(f"init: generator must be an ember.random.Generator, got "
                        f"{type(generator).__name__}")
    return g


def _check(tensor, opname):
    if not isinstance(tensor, ndarray):
        raise TypeError(f"init.{opname}: expected an ember array, got {type(tensor).__name__}")


def _fill(tensor, values):
    """Write `values` (a NumPy array or scalar) into `tensor` in place, unrecorded.
    A GPU tensor gets the same values, drawn on the host and copied over once, so a
    model initialises identically on every device for a given seed."""
    if tensor.is_cuda:
        from ember._core.elementwise import _assign
        _assign(tensor, values)
        tensor._bump_version()
        return tensor
    numpy_view(tensor)[...] = values
    tensor._bump_version()
    return tensor


def _draw_dtype(tensor):
    dt = tensor.dtype
    return dt if dt in (np.float32, np.float64) else np.float64


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table).

    linear / conv / sigmoid: 1, tanh: 5/3, relu: sqrt(2),
    leaky_relu: sqrt(2 / (1 + negative_slope^2)), selu: 3/4.

    >>> from ember.nn import init
    >>> round(init.calculate_gain("relu"), 4), round(init.calculate_gain("tanh"), 4)
    (1.4142, 1.6667)
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight: dims 1 and 0 times the receptive field size.

    >>> import ember
    >>> from ember.nn import init
    >>> init._calculate_fan_in_and_fan_out(ember.empty((16, 3, 5, 5)))
    (75, 400)
    """
    dimensions = tensor.ndim
    if dimensions < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         "2 dimensions")
    num_input_fmaps = tensor.shape[1]
    num_output_fmaps = tensor.shape[0]
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with values drawn from U(a, b).

    >>> import ember
    >>> from ember.nn import init
    >>> w = init.uniform_(ember.empty(100), -1, 1)
    >>> bool((w >= -1).all() and (w < 1).all())
    True
    """
    _check(tensor, "uniform_")
    g = _rng(generator)
    r = g.random(tensor.shape, dtype=_draw_dtype(tensor))
    r *= (b - a)
    r += a
    return _fill(tensor, r)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with values drawn from N(mean, std^2).

    >>> import ember
    >>> from ember.nn import init
    >>> init.normal_(ember.empty((2, 3)), 0.0, 0.02).shape
    (2, 3)
    """
    _check(tensor, "normal_")
    g = _rng(generator)
    r = g.standard_normal(tensor.shape, dtype=_draw_dtype(tensor))
    r *= std
    r += mean
    return _fill(tensor, r)


def _erfinv(y):
    """Inverse error function of a float64 NumPy array (Giles' approximation refined by
    two Newton steps on libm's erf: full double precision away from +-1)."""
    from ember._kernels.cpu import embedding as K
    y = np.ascontiguousarray(y, dtype=np.float64)
    w = -np.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws = w - 2.5
    p_s = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p_s = c + p_s * ws
    wl = np.sqrt(np.maximum(w, 5.0)) - 3.0
    p_l = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p_l = c + p_l * wl
    x = np.where(small, p_s, p_l) * y
    x = np.where(np.abs(y) >= 1.0, np.copysign(np.inf, y), x)
    finite = np.isfinite(x)
    if finite.any():
        e = np.empty_like(x)
        with np.errstate(all="ignore"):
            for _ in range(2):
                K.erf(np.where(finite, x, 0.0), e)
                step = (e - y) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
                x = np.where(finite, x - step, x)
    return x


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with values from N(mean, std^2) truncated to [a, b] (inverse-CDF sampling,
    PyTorch's method; `a` and `b` are absolute bounds, not in units of std).

    >>> import ember
    >>> from ember.nn import init
    >>> w = init.trunc_normal_(ember.empty(1000), std=0.02, a=-0.04, b=0.04)
    >>> bool((abs(w) <= 0.04).all())
    True
    """
    _check(tensor, "trunc_normal_")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo = norm_cdf((a - mean) / std)
    hi = norm_cdf((b - mean) / std)
    g = _rng(generator)
    u = g.uniform(2 * lo - 1, 2 * hi - 1, size=tensor.shape)
    r = _erfinv(u)
    r *= std * math.sqrt(2.0)
    r += mean
    np.clip(r, a, b, out=r)
    return _fill(tensor, r)


def constant_(tensor, val):
    """Fill with `val`.

    >>> import ember
    >>> from ember.nn import init
    >>> init.constant_(ember.empty(2), 0.5).tolist()
    [0.5, 0.5]
    """
    _check(tensor, "constant_")
    return _fill(tensor, val)


def ones_(tensor):
    """Fill with ones.

    >>> import ember
    >>> from ember.nn import init
    >>> init.ones_(ember.empty(2)).tolist()
    [1.0, 1.0]
    """
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill with zeros.

    >>> import ember
    >>> from ember.nn import init
    >>> init.zeros_(ember.empty(2)).tolist()
    [0.0, 0.0]
    """
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-d array with the identity (ones on the diagonal).

    >>> import ember
    >>> from ember.nn import init
    >>> init.eye_(ember.empty((2, 3))).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Fill a 3/4/5-d convolution weight with the Dirac delta (identity convolution).

    >>> import ember
    >>> from ember.nn import init
    >>> float(init.dirac_(ember.empty((2, 2, 3))).sum())
    2.0
    """
    _check(tensor, "dirac_")
    dims = tensor.ndim
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_chans_per_grp = sizes[0] // groups
    min_dim = min(out_chans_per_grp, sizes[1])
    r = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min_dim):
            r[(g * out_chans_per_grp + d, d) + centre] = 1
    return _fill(tensor, r)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).

    >>> import ember
    >>> from ember.nn import init
    >>> w = init.xavier_uniform_(ember.empty((3, 5)))
    >>> bool((abs(w) <= (6 / 8) ** 0.5).all())
    True
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).

    >>> import ember
    >>> from ember.nn import init
    >>> init.xavier_normal_(ember.empty((3, 5))).shape
    (3, 5)
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan), gain from
    ``calculate_gain(nonlinearity, a)``.

    >>> import ember
    >>> from ember.nn import init
    >>> w = init.kaiming_uniform_(ember.empty((8, 6)), nonlinearity="relu")
    >>> bool((abs(w) <= 1.0).all())
    True
    """
    _check(tensor, "kaiming_uniform_")
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std^2) with std = gain / sqrt(fan).

    >>> import ember
    >>> from ember.nn import init
    >>> init.kaiming_normal_(ember.empty((8, 6)), mode="fan_out").shape
    (8, 6)
    """
    _check(tensor, "kaiming_normal_")
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix (QR of a Gaussian matrix, sign-corrected),
    times `gain`; dimensions after the first are flattened.

    >>> import ember, numpy as np
    >>> from ember.nn import init
    >>> w = np.asarray(init.orthogonal_(ember.empty((3, 5))))
    >>> bool(np.allclose(w @ w.T, np.eye(3), atol=1e-5))
    True
    """
    _check(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.size == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.size // rows
    flattened = _rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flattened = flattened.T
    with one_blas_thread:
        q, r = np.linalg.qr(flattened)
    d = np.diag(r)
    q *= np.sign(d)
    if rows < cols:
        q = q.T
    return _fill(tensor, (q * gain).reshape(tensor.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-d array as a sparse matrix: in each column a fraction `sparsity` of the
    rows is zero, the rest drawn from N(0, std^2).

    >>> import ember
    >>> from ember.nn import init
    >>> w = init.sparse_(ember.empty((10, 3)), sparsity=0.5)
    >>> [int((w[:, j] == 0).sum()) for j in range(3)]
    [5, 5, 5]
    """
    _check(tensor, "sparse_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    g = _rng(generator)
    r = g.standard_normal((rows, cols)) * std
    for col in range(cols):
        r[g.permutation(rows)[:num_zeros], col] = 0
    return _fill(tensor, r)
