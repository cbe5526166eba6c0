"""PyTorch's top-level names, and PyTorch's meaning of a clashing name when a
torch-only keyword asks for it (the README's "For PyTorch users" table).

Every function here is written with public ember ops, so its gradient and its
GPU path are those ops' (none is an op of its own).  ``install`` puts them on
the ``ember`` namespace after autograd has wrapped the ops.

>>> import ember
>>> x = ember.asarray([[1.0, 5.0], [7.0, 2.0]])
>>> ember.max(x, axis=1).tolist(), ember.max(x, dim=1).indices.tolist()
([5.0, 7.0], [1, 0])
"""
import builtins
import functools
import operator
import sys

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray, Device
from ember import return_types
from ember._api.manipulation import _check_section_count

__all__ = ["is_tensor", "numel", "from_numpy", "as_tensor", "rand", "randn", "randint",
           "randperm", "rand_like", "randn_like", "randint_like", "normal", "bernoulli",
           "multinomial", "mm", "bmm", "mv", "addmm", "baddbmm", "clamp", "clamp_min",
           "clamp_max", "chunk", "narrow", "gather", "scatter", "masked_select", "unbind", "t",
           "swapdims", "movedim", "is_floating_point", "is_complex", "clone", "norm", "dist",
           "cdist", "rsqrt", "lerp", "broadcast_tensors", "std_mean", "var_mean", "device",
           "Size", "set_default_device", "get_default_device", "repeat_interleave",
           "take_along_dim", "tensor_split"]

E = sys.modules["ember"]        # the namespace (this module loads while it initialises)

device = Device
Size = tuple                    # x.size() and x.shape are plain tuples


def _length(a):
    return isinstance(a, (int, np.integer)) and not isinstance(a, (builtins.bool, np.bool_))


def _shape_of(size, opname):
    """PyTorch's ``*size``: separate ints, or one sequence of ints."""
    if len(size) == 1 and not _length(size[0]):
        size = size[0]
    return _array._parse_shape(size, opname)


def _axis(dim, ndim, opname):
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"{opname}: dim must be an int, got {type(dim).__name__}") from None
    if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
        raise IndexError(f"{opname}: dimension out of range (expected to be in range of "
                         f"[{-builtins.max(ndim, 1)}, {builtins.max(ndim, 1) - 1}], but got {d})")
    return d % ndim if ndim else 0


def _finish(x, requires_grad):
    if requires_grad:
        x.requires_grad_(True)
    return x


# ---------------------------------------------------------------- tensors

def is_tensor(obj):
    """True if `obj` is an ember array (PyTorch's ``is_tensor``).

    >>> import ember
    >>> ember.is_tensor(ember.zeros(2)), ember.is_tensor([1, 2])
    (True, False)
    """
    return isinstance(obj, ndarray)


def numel(x):
    """The number of elements of `x` (PyTorch's ``numel``), a plain int.

    >>> import ember
    >>> ember.numel(ember.zeros((2, 3)))
    6
    """
    return builtins.int(E.asarray(x).size)


def from_numpy(a):
    """An ember array sharing the memory of NumPy array `a` (its dtype kept).

    >>> import ember, numpy
    >>> n = numpy.zeros(2); x = ember.from_numpy(n); x[0] = 5.0
    >>> n.tolist(), x.dtype
    ([5.0, 0.0], dtype('float64'))
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(a).__name__}")
    return _array._wrap(a)


def as_tensor(data, dtype=None, device=None):
    """``asarray`` with PyTorch's name: no copy when `data` already fits.

    >>> import ember
    >>> ember.as_tensor([1, 2], dtype=ember.float64).dtype
    dtype('float64')
    """
    return E.asarray(data, dtype=dtype, device=device)


def clone(x, *, memory_format=None):
    """A copy of `x` that records for autograd (PyTorch's ``clone``).

    >>> import ember
    >>> x = ember.ones(2); y = ember.clone(x); y[0] = 5; x.tolist()
    [1.0, 1.0]
    """
    return E.asarray(x).copy()


def is_floating_point(x):
    """True for arrays of a floating dtype.

    >>> import ember
    >>> ember.is_floating_point(ember.ones(1)), ember.is_floating_point(ember.arange(2))
    (True, False)
    """
    return E.asarray(x).is_floating_point()


def is_complex(x):
    """True for arrays of a complex dtype.

    >>> import ember
    >>> ember.is_complex(ember.ones(1, dtype=ember.complex64))
    True
    """
    return E.asarray(x).is_complex()


def set_default_device(device):
    """Where creation functions put arrays when no ``device=`` is given.

    >>> import ember
    >>> ember.set_default_device("cpu"); ember.get_default_device()
    device(type='cpu')
    """
    _array._swap_default_device(_array.check_device(device if device is not None else "cpu",
                                                    "set_default_device"))


def get_default_device():
    """The device creation functions use when no ``device=`` is given.

    >>> import ember
    >>> ember.get_default_device() == "cpu"
    True
    """
    return _array._get_default_device()


# ---------------------------------------------------------------- random (PyTorch's signatures)

def _draw_float(kind, shape, dtype, device, generator, opname):
    if generator is not None:
        if device is not None and Device(device).type != "cpu":
            raise ValueError(f"{opname}: generator= draws on the host; omit device= or move "
                             f"the result with .to()")
        return (generator.random(shape, dtype=dtype) if kind == "rand"
                else generator.standard_normal(shape, dtype=dtype))
    if kind == "rand":
        return E.random.random(shape, dtype=dtype, device=device)
    return E.random.standard_normal(shape, dtype=dtype, device=device)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Uniform samples in [0, 1) of shape `size` (PyTorch's ``rand``: separate ints or
    one tuple), drawn from ``ember.random``'s global generator or `generator`.

    >>> import ember
    >>> ember.rand(2, 3).shape, ember.rand((4,)).dtype
    ((2, 3), dtype('float32'))
    """
    shape = _shape_of(size, "rand")
    return _finish(_draw_float("rand", shape, dtype, device, generator, "rand"), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Standard normal samples of shape `size` (PyTorch's ``randn``).

    >>> import ember
    >>> ember.randn(2, 3).shape, ember.randn((2, 3), requires_grad=True).requires_grad
    ((2, 3), True)
    """
    shape = _shape_of(size, "randn")
    return _finish(_draw_float("randn", shape, dtype, device, generator, "randn"), requires_grad)


def randint(*args, size=None, low=None, high=None, dtype=None, device=None,
            requires_grad=False, generator=None):
    """Integers in [low, high) of shape `size`: ``randint(high, size)`` or
    ``randint(low, high, size)`` (PyTorch's argument order; int64 by default).

    >>> import ember
    >>> x = ember.randint(0, 10, (3, 4)); x.shape, x.dtype, bool(((x >= 0) & (x < 10)).all())
    ((3, 4), dtype('int64'), True)
    """
    args = list(args)
    if size is None and args and not _length(args[-1]):
        size = args.pop()
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        if high is None:
            high = args[0]
        else:
            low = args[0]
    elif args:
        raise TypeError(f"randint: expected (high, size) or (low, high, size), got "
                        f"{len(args)} positional arguments besides the size")
    if high is None or size is None:
        raise TypeError("randint: high and size are required: randint(high, size) or "
                        "randint(low, high, size)")
    low = 0 if low is None else low
    shape = _array._parse_shape(size, "randint")
    dt = np.int64 if dtype is None else dtype
    if generator is not None:
        res = generator.integers(low, high, size=shape, dtype=np.int64).astype(dt)
    else:
        res = E.random.integers(low, high, size=shape, dtype=np.int64, device=device)
        if res.dtype != np.dtype(dt):
            res = res.astype(dt)
    return _finish(res, requires_grad)


def randperm(n, *, dtype=None, device=None, requires_grad=False, generator=None):
    """A random permutation of ``0 .. n-1`` (int64 unless `dtype` says otherwise).

    >>> import ember
    >>> sorted(ember.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"randperm: n must be non-negative, got {n}")
    res = (generator.permutation(n) if generator is not None else E.random.permutation(n))
    res = res.astype(np.int64 if dtype is None else dtype, copy=False)
    if device is not None:
        res = res.to(device)
    return _finish(res, requires_grad)


def _like_args(x, dtype, device):
    x = E.asarray(x)
    return x.shape, (x.dtype if dtype is None else dtype), (x.device if device is None else device)


def rand_like(x, *, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1) samples with x's shape, dtype and device.

    >>> import ember
    >>> ember.rand_like(ember.zeros((2, 2), dtype=ember.float64)).dtype
    dtype('float64')
    """
    shape, dtype, device = _like_args(x, dtype, device)
    return _finish(_draw_float("rand", shape, dtype, device, None, "rand_like"), requires_grad)


def randn_like(x, *, dtype=None, device=None, requires_grad=False):
    """Standard normal samples with x's shape, dtype and device.

    >>> import ember
    >>> ember.randn_like(ember.zeros((2, 3))).shape
    (2, 3)
    """
    shape, dtype, device = _like_args(x, dtype, device)
    return _finish(_draw_float("randn", shape, dtype, device, None, "randn_like"), requires_grad)


def randint_like(x, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    """Integers in [low, high) with x's shape (``randint_like(x, high)`` or
    ``randint_like(x, low, high)``) and x's dtype.

    >>> import ember
    >>> r = ember.randint_like(ember.zeros(4, dtype=ember.int32), 3); r.dtype, int(r.max()) < 3
    (dtype('int32'), True)
    """
    if high is None:
        low, high = 0, low
    shape, dtype, device = _like_args(x, dtype, device)
    res = E.random.integers(low, high, size=shape, dtype=np.int64, device=device)
    return _finish(res.astype(dtype, copy=False), requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, dtype=None, device=None, requires_grad=False,
           generator=None):
    """Normal samples: elementwise for array `mean`/`std` (broadcast), or of shape
    `size` for scalar ones (PyTorch's ``normal``).

    >>> import ember
    >>> ember.normal(2.0, 0.5, size=(3,)).shape, ember.normal(ember.zeros(4), 1.0).shape
    ((3,), (4,))
    """
    if size is not None:
        shape = _array._parse_shape(size, "normal")
    else:
        shape = E.broadcast_shapes(E.asarray(mean).shape, E.asarray(std).shape)
        if dtype is None:
            dtype = E.result_type(*(v for v in (mean, std) if isinstance(v, ndarray))) \
                if builtins.any(isinstance(v, ndarray) for v in (mean, std)) else None
        if device is None:
            for v in (mean, std):
                if isinstance(v, ndarray):
                    device = v.device
    z = _draw_float("randn", shape, dtype, device, generator, "normal")
    return _finish(z * std + mean, requires_grad)


def bernoulli(p, *, generator=None):
    """1 with probability p (elementwise), else 0, in p's dtype.

    >>> import ember
    >>> ember.bernoulli(ember.asarray([0.0, 1.0])).tolist()
    [0.0, 1.0]
    """
    p = E.asarray(p)
    u = _draw_float("rand", p.shape, p.dtype, p.device, generator, "bernoulli")
    return (u < p).astype(p.dtype)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices drawn from the categorical distributions in the rows of `input`
    (non-negative weights, 1-d or 2-d), PyTorch's ``multinomial``.

    >>> import ember
    >>> ember.multinomial(ember.asarray([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
    [1, 1]
    """
    p = E.asarray(input)
    if p.ndim not in (1, 2):
        raise ValueError(f"multinomial: input must be 1-d or 2-d, got shape {p.shape}")
    p2 = p.reshape(1, -1) if p.ndim == 1 else p
    rows, n = p2.shape
    if n == 0:
        raise ValueError("multinomial: input has no categories")
    if not E.is_floating_point(p2):
        p2 = p2.astype(E.get_default_dtype())
    if bool((p2 < 0).any()) or not bool(E.isfinite(p2).all()):
        raise ValueError("multinomial: probabilities must be finite and non-negative")
    total = p2.sum(axis=1, keepdims=True)
    if bool((total <= 0).any()):
        raise ValueError("multinomial: every row needs a positive total weight")
    q = p2 / total
    if replacement:
        u = _draw_float("rand", (rows, num_samples), q.dtype, q.device, generator, "multinomial")
        cdf = E.cumsum(q, axis=1)
        v = u * cdf[:, -1:]             # below the last cdf value: never a trailing zero weight
        idx = E.minimum((cdf[:, None, :] <= v[:, :, None]).sum(axis=2), n - 1)
    else:
        if num_samples > n:
            raise ValueError(f"multinomial: cannot draw {num_samples} samples without "
                             f"replacement from {n} categories")
        if bool(((q > 0).sum(axis=1) < num_samples).any()):
            raise ValueError("multinomial: fewer categories with positive weight than "
                             "num_samples (without replacement)")
        u = _draw_float("rand", (rows, n), q.dtype, q.device, generator, "multinomial")
        # exponential races: the num_samples smallest -log(1 - u) / q win, in order
        pos = q > 0
        keys = E.where(pos, -E.log1p(-u) / E.where(pos, q, 1.0), np.inf)
        idx = E.argsort(keys, axis=1)[:, :num_samples]
    idx = idx.astype(np.int64)
    return idx.reshape(-1) if p.ndim == 1 else idx


# ---------------------------------------------------------------- products

def _need_ndim(a, n, opname, argname):
    if a.ndim != n:
        raise RuntimeError(f"{opname}: {argname} must be a {n}-d array, got shape {a.shape}")


def mm(input, mat2):
    """The matrix product of two 2-d arrays (PyTorch's ``mm``; no broadcasting).

    >>> import ember
    >>> ember.mm(ember.ones((2, 3)), ember.ones((3, 4))).shape
    (2, 4)
    """
    a, b = E.asarray(input), E.asarray(mat2)
    _need_ndim(a, 2, "mm", "input")
    _need_ndim(b, 2, "mm", "mat2")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mm: shapes {a.shape} and {b.shape} cannot be multiplied")
    return E.matmul(a, b)


def bmm(input, mat2):
    """Batched matrix product of two 3-d arrays with the same batch size.

    >>> import ember
    >>> ember.bmm(ember.ones((5, 2, 3)), ember.ones((5, 3, 4))).shape
    (5, 2, 4)
    """
    a, b = E.asarray(input), E.asarray(mat2)
    _need_ndim(a, 3, "bmm", "input")
    _need_ndim(b, 3, "bmm", "mat2")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"bmm: shapes {a.shape} and {b.shape} cannot be multiplied "
                           f"(batch sizes must match)")
    return E.matmul(a, b)


def mv(input, vec):
    """Matrix-vector product (2-d times 1-d).

    >>> import ember
    >>> ember.mv(ember.ones((2, 3)), ember.ones(3)).tolist()
    [3.0, 3.0]
    """
    a, v = E.asarray(input), E.asarray(vec)
    _need_ndim(a, 2, "mv", "input")
    _need_ndim(v, 1, "mv", "vec")
    return E.matmul(a, v)


def _scaled_sum(input, prod, beta, alpha):
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:                   # PyTorch: input is ignored (its NaNs too)
        return prod
    return (input if beta == 1 else input * beta) + prod


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` (PyTorch's ``addmm``).

    >>> import ember
    >>> ember.addmm(ember.ones(2), ember.ones((3, 4)), ember.ones((4, 2)), alpha=0.5).tolist()[0]
    [3.0, 3.0]
    """
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)`` (PyTorch's ``baddbmm``).

    >>> import ember
    >>> ember.baddbmm(ember.zeros((2, 1, 1)), ember.ones((2, 1, 3)), ember.ones((2, 3, 1))).tolist()
    [[[3.0]], [[3.0]]]
    """
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


# ---------------------------------------------------------------- elementwise

def clamp(input, min=None, max=None):
    """Clip to [min, max] (PyTorch's name for ``clip``; one bound may be None).

    >>> import ember
    >>> ember.clamp(ember.asarray([-2.0, 0.5, 3.0]), min=0.0, max=1.0).tolist()
    [0.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return E.clip(input, min, max)


def clamp_min(input, min):
    """Elementwise ``max(input, min)``.

    >>> import ember
    >>> ember.clamp_min(ember.asarray([-1.0, 2.0]), 0.0).tolist()
    [0.0, 2.0]
    """
    return E.clip(input, min, None)


def clamp_max(input, max):
    """Elementwise ``min(input, max)``.

    >>> import ember
    >>> ember.clamp_max(ember.asarray([-1.0, 2.0]), 0.0).tolist()
    [-1.0, 0.0]
    """
    return E.clip(input, None, max)


def rsqrt(input):
    """``1 / sqrt(input)``.

    >>> import ember
    >>> ember.rsqrt(ember.asarray([4.0])).tolist()
    [0.5]
    """
    return 1.0 / E.sqrt(input)


def lerp(input, end, weight):
    """``input + weight * (end - input)``.

    >>> import ember
    >>> ember.lerp(ember.zeros(2), ember.ones(2), 0.25).tolist()
    [0.25, 0.25]
    """
    return input + weight * (end - input)


# ---------------------------------------------------------------- shapes and indexing

def _slice_along(ndim, d, sl):
    return (slice(None),) * d + (sl,)


def torch_split(x, split_size_or_sections, dim=0):
    """PyTorch's ``split``: pieces of ``split_size`` along `dim` (the last may be
    shorter), or of the given sizes.  Views of x."""
    x = E.asarray(x)
    d = _axis(dim, x.ndim, "split")
    n = x.shape[d]
    if _length(split_size_or_sections):
        size = builtins.int(split_size_or_sections)
        if size <= 0 and not (size == 0 and n == 0):
            raise ValueError(f"split: split_size must be positive, got {size}")
        if n == 0:
            return (x,)
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    else:
        sizes = [operator.index(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n or builtins.any(s < 0 for s in sizes):
            raise ValueError(f"split: sizes {sizes} do not add up to the length {n} of "
                             f"dimension {d} (shape {x.shape})")
    out, start = [], 0
    for s in sizes:
        out.append(x[_slice_along(x.ndim, d, slice(start, start + s))])
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):
    """At most `chunks` pieces of equal length ``ceil(n / chunks)`` along `dim` (the
    last may be shorter; PyTorch's ``chunk``).  Views of the input.

    >>> import ember
    >>> [c.shape for c in ember.chunk(ember.arange(5), 3)]
    [(2,), (2,), (1,)]
    """
    x = E.asarray(input)
    chunks = operator.index(chunks)
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    d = _axis(dim, x.ndim, "chunk")
    n = x.shape[d]
    if n == 0:              # PyTorch: `chunks` empty views
        _check_section_count(chunks, n, "chunk")
        return tuple(x for _ in range(chunks))
    return torch_split(x, -(-n // chunks), d)


def narrow(input, dim, start, length):
    """The view ``input[..., start:start + length, ...]`` along `dim`.

    >>> import ember
    >>> ember.narrow(ember.arange(6).reshape(2, 3), 1, 1, 2).tolist()
    [[1, 2], [4, 5]]
    """
    x = E.asarray(input)
    d = _axis(dim, x.ndim, "narrow")
    n = x.shape[d]
    start = operator.index(start)
    length = operator.index(length)
    if start < 0:
        start += n
    if not 0 <= start <= n or length < 0 or start + length > n:
        raise IndexError(f"narrow: start {start} and length {length} are out of range for "
                         f"dimension {d} of length {n}")
    return x[_slice_along(x.ndim, d, slice(start, start + length))]


def _index_grid(index, d):
    """The advanced-indexing key that addresses x at index's positions, with the
    index array itself along dim d (PyTorch's gather/scatter addressing)."""
    key = []
    for i, n in enumerate(index.shape):
        if i == d:
            key.append(index)
        else:
            shape = [1] * index.ndim
            shape[i] = n
            key.append(E.arange(n, device=index.device).reshape(shape))
    return tuple(key)


def _check_index(x, index, d, opname, src=None):
    if index.ndim != x.ndim and not (x.ndim == 0 and index.ndim <= 1):
        raise RuntimeError(f"{opname}: index must have as many dimensions as the input, "
                           f"got index shape {index.shape} and input shape {x.shape}")
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"{opname}: index must be an integer array, got {index.dtype}")
    for i, (m, n) in enumerate(zip(index.shape, x.shape)):
        if i != d and m > n:
            raise RuntimeError(f"{opname}: index shape {index.shape} is larger than input "
                               f"shape {x.shape} in dimension {i}")
        if src is not None and m > src.shape[i]:
            raise RuntimeError(f"{opname}: index shape {index.shape} is larger than src "
                               f"shape {src.shape} in dimension {i}")


def gather(input, dim, index):
    """``out[i][j] = input[index[i][j]][j]`` for dim=0 (and so on): PyTorch's
    ``gather``; index may be smaller than input in the other dimensions.

    >>> import ember
    >>> ember.gather(ember.asarray([[1, 2], [3, 4]]), 1, ember.asarray([[0, 0], [1, 0]])).tolist()
    [[1, 1], [4, 3]]
    """
    x, idx = E.asarray(input), E.asarray(index)
    d = _axis(dim, x.ndim, "gather")
    _check_index(x, idx, d, "gather")
    if x.ndim == 0:
        return x[idx.reshape(-1)].reshape(idx.shape) if idx.size else x.reshape(idx.shape)
    return x[_index_grid(idx, d)]


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of input with ``out[index[i][j]][j] = src[i][j]`` for dim=0 (and so on):
    PyTorch's ``scatter``; `src` may be a scalar (or pass ``value=``).  Which write
    wins at a repeated index is unspecified, as in PyTorch; ``ember.scatter_add``
    accumulates.

    >>> import ember
    >>> ember.scatter(ember.zeros(4), 0, ember.asarray([3, 0]), ember.asarray([5.0, 6.0])).tolist()
    [6.0, 0.0, 0.0, 5.0]
    """
    if reduce is not None:
        raise ValueError("scatter: reduce= is not supported; use ember.scatter_add for 'add'")
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: give src (an array or a scalar) or value=")
    x, idx = E.asarray(input), E.asarray(index)
    d = _axis(dim, x.ndim, "scatter")
    s = src if not isinstance(src, ndarray) else src
    _check_index(x, idx, d, "scatter", s if isinstance(s, ndarray) and s.ndim else None)
    out = x.copy()
    if isinstance(s, ndarray) and s.ndim:
        s = s[tuple(slice(0, m) for m in idx.shape)]
    out[_index_grid(idx, d)] = s
    return out


def masked_select(input, mask):
    """The elements of input where `mask` (broadcast) is true, as a 1-d array.

    >>> import ember
    >>> ember.masked_select(ember.arange(4), ember.asarray([True, False, True, False])).tolist()
    [0, 2]
    """
    x, m = E.broadcast_arrays(E.asarray(input), E.asarray(mask))
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_select: mask must be a bool array, got {m.dtype}")
    return x[m]


def unbind(input, dim=0):
    """The slices of input along `dim`, as a tuple of views.

    >>> import ember
    >>> [r.tolist() for r in ember.unbind(ember.asarray([[1, 2], [3, 4]]), 1)]
    [[1, 3], [2, 4]]
    """
    x = E.asarray(input)
    d = _axis(dim, x.ndim, "unbind")
    return tuple(x[_slice_along(x.ndim, d, i)] for i in range(x.shape[d]))


def t(input):
    """Transpose of a 2-d array; 0-d and 1-d arrays come back as they are.

    >>> import ember
    >>> ember.t(ember.ones((2, 3))).shape
    (3, 2)
    """
    x = E.asarray(input)
    if x.ndim > 2:
        raise RuntimeError(f"t: expects an array of at most 2 dimensions, got shape {x.shape}; "
                           f"use swapdims or mT")
    return x.T if x.ndim == 2 else x


def swapdims(input, dim0, dim1):
    """Swap two dimensions (a view; PyTorch's ``swapdims``/``transpose``).

    >>> import ember
    >>> ember.swapdims(ember.ones((2, 3, 4)), 0, 2).shape
    (4, 3, 2)
    """
    return E.swapaxes(input, dim0, dim1)


def movedim(input, source, destination):
    """Move dimensions to new positions (``moveaxis``).

    >>> import ember
    >>> ember.movedim(ember.ones((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    return E.moveaxis(input, source, destination)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element repeated `repeats` times along `dim` (flattened when None):
    NumPy's ``repeat`` under PyTorch's name.

    >>> import ember
    >>> ember.repeat_interleave(ember.asarray([1, 2]), 2).tolist()
    [1, 1, 2, 2]
    """
    if repeats is None:             # repeat_interleave(repeats): indices repeated
        r = E.asarray(input)
        return E.repeat(E.arange(r.shape[0], device=r.device), r, axis=0)
    return E.repeat(input, repeats, axis=dim)


def broadcast_tensors(*tensors):
    """The arrays broadcast to one shape (views), PyTorch's name for ``broadcast_arrays``.

    >>> import ember
    >>> [a.shape for a in ember.broadcast_tensors(ember.ones((2, 1)), ember.ones(3))]
    [(2, 3), (2, 3)]
    """
    return tuple(E.broadcast_arrays(*tensors))


# ---------------------------------------------------------------- norms and statistics

def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """PyTorch's ``norm``: the 2-norm of all elements by default (``'fro'``), a vector
    p-norm over `dim`, or ``'nuc'``.

    >>> import ember
    >>> float(ember.norm(ember.asarray([3.0, 4.0]))), ember.norm(ember.ones((2, 4)), dim=1).tolist()
    (5.0, [2.0, 2.0])
    """
    x = E.asarray(input)
    if dtype is not None:
        x = x.astype(dtype)
    if p == "nuc":
        return E.linalg.matrix_norm(x, ord="nuc", keepdims=keepdim) if dim is None else \
            E.linalg.matrix_norm(E.moveaxis(x, tuple(dim), (-2, -1)), ord="nuc", keepdims=keepdim)
    if p == "fro" or p is None:
        p = 2
    axis = tuple(dim) if isinstance(dim, (list, tuple)) else dim
    return E.linalg.vector_norm(x, ord=p, axis=axis, keepdims=keepdim)


def dist(input, other, p=2):
    """The p-norm of ``input - other``.

    >>> import ember
    >>> float(ember.dist(ember.zeros(2), ember.asarray([3.0, 4.0])))
    5.0
    """
    return E.linalg.vector_norm(E.asarray(input) - other, ord=p)


def cdist(x1, x2, p=2.0):
    """Pairwise p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M).

    >>> import ember
    >>> ember.cdist(ember.zeros((1, 2)), ember.asarray([[3.0, 4.0], [0.0, 1.0]])).tolist()
    [[5.0, 1.0]]
    """
    a, b = E.asarray(x1), E.asarray(x2)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"cdist: expected (..., P, M) and (..., R, M) arrays with the same M, "
                           f"got shapes {a.shape} and {b.shape}")
    return E.linalg.vector_norm(a[..., :, None, :] - b[..., None, :, :], ord=p, axis=-1)


def _torch_correction(kwargs, opname):
    """PyTorch's default for var/std: correction=1 (``unbiased=`` spells it too)."""
    unbiased = kwargs.pop("unbiased", None)
    if unbiased is not None:
        if kwargs.get("correction") is not None or kwargs.get("ddof"):
            raise TypeError(f"{opname}: pass one of unbiased=, correction= and ddof=")
        kwargs["correction"] = 1 if unbiased else 0
    elif kwargs.get("correction") is None and not kwargs.get("ddof"):
        kwargs["correction"] = 1
    return kwargs


def std_mean(input, dim=None, *, correction=None, unbiased=None, keepdim=False):
    """``(std, mean)`` over `dim` (PyTorch's ``std_mean``: correction=1 by default).

    >>> import ember
    >>> s, m = ember.std_mean(ember.asarray([1.0, 3.0])); float(s), float(m)
    (1.4142135381698608, 2.0)
    """
    kw = _torch_correction({"correction": correction, "unbiased": unbiased}, "std_mean")
    return (E.std(input, axis=dim, keepdims=keepdim, correction=kw["correction"]),
            E.mean(input, axis=dim, keepdims=keepdim))


def var_mean(input, dim=None, *, correction=None, unbiased=None, keepdim=False):
    """``(var, mean)`` over `dim` (PyTorch's ``var_mean``: correction=1 by default).

    >>> import ember
    >>> v, m = ember.var_mean(ember.asarray([1.0, 3.0])); float(v), float(m)
    (2.0, 2.0)
    """
    kw = _torch_correction({"correction": correction, "unbiased": unbiased}, "var_mean")
    return (E.var(input, axis=dim, keepdims=keepdim, correction=kw["correction"]),
            E.mean(input, axis=dim, keepdims=keepdim))


# ---------------------------------------------------------------- clashes: a torch-only keyword selects PyTorch

def _doc(op, note):
    """op's docstring with `note` (PyTorch's meaning) put before its examples."""
    doc = op.__doc__ or ""
    at = doc.find("    >>>")
    note = "\n".join("    " + line.strip() if line.strip() else "" for line in note.splitlines())
    if at < 0:
        return doc + note + "\n"
    return doc[:at] + note.strip("\n") + "\n\n" + doc[at:]


def _values_indices(kind, values, indices):
    return getattr(return_types, kind)(values, indices)


def _minmax_clash(op, arg, kind):
    @functools.wraps(op)
    def minmax(x, *args, dim=None, keepdim=None, **kwargs):
        if args and isinstance(args[0], ndarray) and not kwargs and dim is None:
            # PyTorch's max(x, other): elementwise (NumPy raises for an array axis)
            if len(args) > 1:
                raise TypeError(f"{kind}: max(input, other) takes no further arguments")
            return (E.maximum if kind == "max" else E.minimum)(x, args[0])
        if dim is None and keepdim is None:
            return op(x, *args, **kwargs)
        if dim is None:             # keepdim= alone: PyTorch's max(x, dim, keepdim=...)
            if len(args) == 1 and kwargs.get("axis") is None:
                dim, args = args[0], ()
            elif not args and kwargs.get("axis") is not None:
                dim = kwargs.pop("axis")
            else:
                raise TypeError(f"{kind}: keepdim= needs a dimension (PyTorch's "
                                f"{kind}(x, dim, keepdim) returns (values, indices))")
        elif args or kwargs.get("axis") is not None:
            raise TypeError(f"{kind}: dim= selects PyTorch's {kind} (values, indices); "
                            f"do not combine it with NumPy's axis")
        kwargs.pop("axis", None)
        keep = builtins.bool(keepdim)
        return _values_indices(kind, op(x, axis=dim, keepdims=keep, **kwargs),
                               arg(x, axis=dim, keepdims=keep))
    minmax.__doc__ = _doc(op, f"""
    PyTorch's spelling ``{kind}(x, dim=d, keepdim=False)`` returns the named tuple
    ``(values, indices)``; ``{kind}(x, other_array)`` is elementwise (``{kind}imum``).""")
    minmax.__module__, minmax.__qualname__ = "ember", kind
    return minmax


def _sort_clash(op):
    @functools.wraps(op)
    def sort(x, /, *, axis=-1, descending=False, stable=True, kind=None, dim=None):
        if dim is None:
            return op(x, axis=axis, descending=descending, stable=stable, kind=kind)
        if axis != -1:
            raise TypeError("sort: pass either axis= (NumPy: the sorted array) or dim= "
                            "(PyTorch: (values, indices)), not both")
        return return_types.sort(op(x, axis=dim, descending=descending, stable=stable),
                                 E.argsort(x, axis=dim, descending=descending, stable=stable))
    sort.__doc__ = _doc(op, """
    With PyTorch's ``dim=`` it returns the named tuple ``(values, indices)``, as
    ``torch.sort`` does (stable).""")
    sort.__module__, sort.__qualname__ = "ember", "sort"
    return sort


def _var_clash(op, name):
    @functools.wraps(op)
    def var(x, /, *args, **kwargs):
        if "dim" in kwargs or "keepdim" in kwargs or "unbiased" in kwargs:
            kwargs = _torch_correction(kwargs, name)
        return op(x, *args, **kwargs)
    var.__doc__ = _doc(op, """
    NumPy's default is ``ddof=0``; with PyTorch's ``dim=``, ``keepdim=`` or
    ``unbiased=`` the default is PyTorch's ``correction=1``.""")
    var.__module__, var.__qualname__ = "ember", name
    return var


def _median_clash(op, name):
    @functools.wraps(op)
    def median(x, *args, dim=None, keepdim=False, **kwargs):
        if dim is None:
            return op(x, *args, **kwargs)
        if args or kwargs:
            raise TypeError(f"{name}: dim= selects PyTorch's {name} (values, indices); "
                            f"do not combine it with NumPy's arguments")
        x = E.asarray(x)
        d = _axis(dim, x.ndim, name)
        key = x
        if name == "nanmedian":
            key = E.where(E.isnan(x), np.inf, x)
        n = x.shape[d] if x.ndim else 1
        if name == "nanmedian":
            cnt = (~E.isnan(x)).sum(axis=d, keepdims=True)
            k = E.maximum(cnt - 1, 0) // 2
        else:
            k = None
        order = E.argsort(key, axis=d)
        if x.ndim == 0:
            idx = E.zeros((), dtype=np.int64)
            return getattr(return_types, name)(x, idx)
        if k is None:
            pos = (n - 1) // 2
            idx = order[_slice_along(x.ndim, d, slice(pos, pos + 1))]
            if name == "median":        # a NaN anywhere: the first NaN (PyTorch)
                nan = E.isnan(x).any(axis=d, keepdims=True)
                if builtins.bool(nan.any()):
                    first_nan = E.argmax(E.isnan(x), axis=d, keepdims=True)
                    idx = E.where(nan, first_nan, idx)
        else:
            idx = E.take_along_axis(order, k, axis=d)
        vals = E.take_along_axis(x, idx, axis=d)
        if not keepdim:
            vals, idx = E.squeeze(vals, axis=d), E.squeeze(idx, axis=d)
        return getattr(return_types, name)(vals, idx)
    median.__doc__ = _doc(op, f"""
    With PyTorch's ``dim=`` it returns ``(values, indices)`` with the lower of the two
    middle values for even lengths, as ``torch.{name}`` does (NumPy averages them).""")
    median.__module__, median.__qualname__ = "ember", name
    return median


def _split_clash(op):
    @functools.wraps(op)
    def split(ary, indices_or_sections, axis=np._NoValue, *, dim=None):
        if dim is not None:
            if axis is not np._NoValue:
                raise TypeError("split: pass either axis= (NumPy: sections) or dim= "
                                "(PyTorch: piece sizes), not both")
            return torch_split(ary, indices_or_sections, dim)
        if axis is None:
            raise TypeError("split: axis must be an integer, not None")
        return op(ary, indices_or_sections, 0 if axis is np._NoValue else axis)
    split.__doc__ = _doc(op, """
    With PyTorch's ``dim=``, an int is the size of each piece (the last may be
    shorter) and a list gives the sizes, as ``torch.split`` does; NumPy's int is the
    number of equal sections and its list the split points.""")
    split.__module__, split.__qualname__ = "ember", "split"
    return split


def _nonzero_clash(op):
    @functools.wraps(op)
    def nonzero(x, /, *, as_tuple=None):
        if as_tuple is None or as_tuple:
            return op(x)
        x = E.asarray(x)
        if x.ndim == 0:
            return E.zeros((builtins.int(builtins.bool(x)), 0), dtype=np.int64, device=x.device)
        return E.stack(op(x), axis=1)
    nonzero.__doc__ = _doc(op, """
    ``as_tuple=False`` (PyTorch's default, here only when asked for) gives one
    (N, ndim) array of coordinates instead of NumPy's tuple.""")
    nonzero.__module__, nonzero.__qualname__ = "ember", "nonzero"
    return nonzero


def _transpose_clash(op):
    @functools.wraps(op)
    def transpose(x, /, *args, axes=None, dim0=None, dim1=None):
        if dim0 is not None or dim1 is not None:
            if dim0 is None or dim1 is None or args or axes is not None:
                raise TypeError("transpose: PyTorch's form takes both dim0= and dim1=")
            return E.swapaxes(x, dim0, dim1)
        if len(args) == 2:          # transpose(x, 0, 1): NumPy raises, PyTorch swaps
            return E.swapaxes(x, args[0], args[1])
        if len(args) == 1:
            if axes is not None:
                raise TypeError("transpose: axes given twice")
            axes = args[0]
        elif args:
            raise TypeError(f"transpose: expected transpose(x, axes) or transpose(x, dim0, "
                            f"dim1), got {len(args)} arguments after x")
        return op(x, axes)
    transpose.__doc__ = _doc(op, """
    ``transpose(x, dim0, dim1)`` with two ints (which NumPy rejects) swaps those two
    dimensions, as ``torch.transpose`` does.""")
    transpose.__module__, transpose.__qualname__ = "ember", "transpose"
    return transpose


def _topk_named(op):
    @functools.wraps(op)
    def topk(x, k, dim=-1, largest=True, sorted=True):
        v, i = op(x, k, dim, largest, sorted)
        return return_types.topk(v, i)
    topk.__module__, topk.__qualname__ = "ember", "topk"
    return topk


def _cross_dim(op):
    @functools.wraps(op)
    def cross(x1, x2, /, *, axis=-1, dim=None):
        return op(x1, x2, axis=axis if dim is None else dim)
    cross.__module__, cross.__qualname__ = "ember", "cross"
    return cross


def _dim_alias(op, name):
    """op with PyTorch's ``dim=``/``keepdim=`` spelling of its ``axis=``/``keepdims=``."""
    @functools.wraps(op)
    def aliased(*args, dim=None, keepdim=None, **kwargs):
        if dim is not None:
            if kwargs.get("axis") is not None:
                raise TypeError(f"{name}: pass either axis= or dim=, not both")
            kwargs["axis"] = dim
        if keepdim is not None:
            kwargs["keepdims"] = keepdim
        return op(*args, **kwargs)
    aliased.__module__, aliased.__qualname__ = "ember", name
    return aliased


# functions that take axis= but had no dim= (DESIGN: dim=/keepdim= are accepted everywhere)
_DIM_ALIASED = ("take_along_axis", "put_along_axis", "compress", "array_split", "vecdot",
                "nanquantile", "nanpercentile", "unique", "partition", "argpartition",
                "scatter_add")


def take_along_dim(input, indices, dim=None):
    """PyTorch's ``take_along_dim``: ``take_along_axis`` (of the flattened arrays when
    `dim` is None).

    >>> import ember
    >>> x = ember.asarray([[10, 30, 20]])
    >>> ember.take_along_dim(x, ember.argsort(x, axis=1), dim=1).tolist()
    [[10, 20, 30]]
    """
    if dim is None:
        return E.take_along_axis(E.asarray(input).reshape(-1), E.asarray(indices).reshape(-1),
                                 axis=0)
    return E.take_along_axis(input, indices, axis=dim)


def tensor_split(input, indices_or_sections, dim=0):
    """PyTorch's ``tensor_split``: NumPy's ``array_split`` along `dim` (views).

    >>> import ember
    >>> [p.shape for p in ember.tensor_split(ember.arange(5), 2)]
    [(3,), (2,)]
    """
    return tuple(E.array_split(input, indices_or_sections, axis=dim))


def install(ns):
    """Put the PyTorch names on `ns` (the ember module), after autograd's install."""
    for name in __all__:
        setattr(ns, name, globals()[name])
    ns.max = _minmax_clash(ns.max, ns.argmax, "max")
    ns.min = _minmax_clash(ns.min, ns.argmin, "min")
    ns.sort = _sort_clash(ns.sort)
    ns.var = _var_clash(ns.var, "var")
    ns.std = _var_clash(ns.std, "std")
    ns.median = _median_clash(ns.median, "median")
    ns.nanmedian = _median_clash(ns.nanmedian, "nanmedian")
    ns.split = _split_clash(ns.split)
    ns.nonzero = _nonzero_clash(ns.nonzero)
    ns.transpose = _transpose_clash(ns.transpose)
    ns.topk = _topk_named(ns.topk)
    ns.cross = _cross_dim(ns.cross)
    for name in _DIM_ALIASED:
        setattr(ns, name, _dim_alias(getattr(ns, name), name))
