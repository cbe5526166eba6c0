"""Array creation: from data, filled, ranges, grids and triangles.

Every function accepts ``dtype=``, ``device=`` (only the CPU in this build)
and ``requires_grad=``.  Memory comes from ember's caching allocator except
when wrapping existing memory (``asarray`` of a NumPy array or buffer), which
is zero-copy.
"""
import builtins
import operator
import functools
import math

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray, check_device
from ember._core.dtypes import _code, default_float_dtype, default_complex_dtype, dtype_from_code
from ember._api._util import wrap, numpy_view, empty_raw, as_array, check_order
from ember._core.dtypes import dtype_kind
from ember._core.dlpack_bf16 import import_bfloat16

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["asarray", "array", "empty", "zeros", "ones", "full", "empty_like", "zeros_like",
           "ones_like", "full_like", "arange", "linspace", "logspace", "eye", "identity",
           "meshgrid", "tril", "triu", "from_dlpack", "ascontiguousarray", "copy", "diag",
           "frombuffer", "tensor"]


def _source_device(name, args, kwargs):
    """The device an array-taking creation function inherits when no device= is
    given (``zeros_like(x)`` and ``asarray(x)`` keep x's device; a CUDA producer
    such as a CuPy array or a CUDA torch tensor stays on its GPU)."""
    if not args:
        return None
    x = args[0]
    if isinstance(x, ndarray):
        return x.device if x.is_cuda and (name.endswith("_like") or name in _KEEPS_DEVICE) else None
    if name in _KEEPS_DEVICE and (hasattr(x, "__cuda_array_interface__") or (
            hasattr(x, "__dlpack_device__") and not isinstance(x, np.ndarray)
            and x.__dlpack_device__()[0] == 2)):
        return "cuda"
    return None


_KEEPS_DEVICE = {"asarray", "array", "tensor", "from_dlpack", "ascontiguousarray"}


# Creation functions whose shape PyTorch also takes as separate ints (``zeros(3, 4)``)
# or as ``size=``: NumPy's second positional is the dtype, which an int never is, so
# both spellings keep NumPy's meaning.  (``full``'s second positional is its value.)
_SHAPE_VARARGS = {"empty", "zeros", "ones", "full"}


def _is_length(a):
    return isinstance(a, (int, np.integer)) and not isinstance(a, (builtins.bool, np.bool_))


def _shape_varargs(name, args, kwargs):
    """args with a leading run of ints gathered into one shape tuple (PyTorch's
    ``zeros(3, 4)``), and PyTorch's ``size=`` moved to the shape's place."""
    size = kwargs.pop("size", None)
    if size is not None:
        if args or "shape" in kwargs:
            raise TypeError(f"{name}: got the shape twice (size= and a shape argument)")
        return (size,) + args
    if name != "full" and len(args) > 1 and _is_length(args[0]):
        n = 1
        while n < len(args) and _is_length(args[n]):
            n += 1
        if n > 1:
            return (tuple(args[:n]),) + args[n:]
    return args


def _placed(fn):
    """Give a creation function its ``device=`` argument: the body builds on the
    host, and a CUDA device routes the call to the GPU backend instead (which
    builds there directly, or copies what the body built on the host)."""
    name = fn.__name__

    varargs = name in _SHAPE_VARARGS

    @functools.wraps(fn)
    def placed(*args, device=None, **kwargs):
        if varargs:
            args = _shape_varargs(name, args, kwargs)
        if device is None:
            src = _source_device(name, args, kwargs)
            d = check_device(src, name) if src is not None else _array._get_default_device()
        else:
            d = check_device(device, name)
        if d.type == "cpu":
            if name in _KEEPS_DEVICE and args and isinstance(args[0], ndarray) and args[0].is_cuda:
                args = (args[0].cpu(),) + args[1:]      # asarray(gpu_x, device='cpu')
            # host memory even when called from inside a GPU op (zeros_like(x, device='cpu'))
            prev = _array._swap_alloc_device(None)
            try:
                return fn(*args, device=d, **kwargs)
            finally:
                _array._swap_alloc_device(prev)
        from ember.cuda import _creation
        return _creation.create(name, fn, d, args, kwargs, _host_body)
    return placed


def _host_body(name):
    """The host body (unplaced) of creation function `name`, for the GPU backend."""
    return globals()[name].__wrapped__


def _resolve_dtype(dtype):
    if dtype is None:
        return None
    return dtype_from_code(_code(dtype))


def _finish(x, requires_grad):
    if requires_grad:
        x.requires_grad = True
    return x


@_placed
def asarray(obj, /, dtype=None, order=None, *, device=None, copy=None, requires_grad=False):
    """Convert `obj` to an ember array, without copying when possible.

    `obj` may be an ember array, a NumPy array, a (nested) list or tuple,
    a Python scalar, any buffer-protocol object or a DLPack producer.
    ``copy=True`` always copies, ``copy=False`` raises ValueError when a copy
    (or a dtype conversion) would be needed, ``copy=None`` copies only then.
    Python floats become the default float dtype (float32); NumPy arrays keep
    theirs.  ``order`` is NumPy's: ``'C'``/``'F'`` ask for that memory layout
    (copying if needed), ``None``/``'K'``/``'A'`` keep the input's.

    >>> import ember, numpy
    >>> ember.asarray([1.0, 2.0]).dtype
    dtype('float32')
    >>> a = numpy.arange(3.0); x = ember.asarray(a); a[0] = 7; x[0].item()
    7.0
    """
    if order not in (None, "K", "A", "C", "F"):
        raise ValueError(f"asarray: order must be one of 'C', 'F', 'A', 'K' or None, got {order!r}")
    dt = _resolve_dtype(dtype)
    if isinstance(obj, (list, tuple, int, float, complex)) and dt is not None:
        # build straight in the requested dtype (no detour through float64, nor through
        # the default float dtype: asarray(2.6e-260, dtype=float64) keeps the value)
        arr = np.asarray(obj, dtype=dt, order="F" if order == "F" else None)
        if dtype_kind(arr.dtype) in "OUSV":
            raise TypeError(f"asarray: cannot convert {type(obj).__name__} to a numeric array")
        x = wrap(arr)
        if copy is False:
            raise ValueError(f"asarray: copy=False but converting a {type(obj).__name__} "
                             f"requires a copy")
        return _finish(x, requires_grad)
    if copy is False and not isinstance(obj, (ndarray, np.ndarray)) and not hasattr(obj, "__dlpack__") \
            and not isinstance(obj, (bytes, bytearray, memoryview)):
        if isinstance(obj, (list, tuple, int, float, complex)):
            raise ValueError(f"asarray: copy=False but converting a {type(obj).__name__} requires a copy")
    if isinstance(obj, np.ndarray) and copy is False and not obj.dtype.isnative:
        raise ValueError("asarray: copy=False but the array's byte order needs a copy")
    x = wrap(obj)
    if dt is not None and x.dtype != dt:
        if copy is False:
            raise ValueError(f"asarray: copy=False but converting {x.dtype} to {dt} requires a copy")
        # NumPy casts in order 'K' unless C or F is asked for ('A': F for a Fortran array)
        x = x.astype(dt, order="F" if order == "A" and x.flags.fortran else
                     (order if order in ("C", "F") else "K"))
    elif copy:
        x = x.copy(order="K" if order is None else order)
    elif order in ("C", "F") and not (x.flags.c_contiguous if order == "C"
                                      else x.flags.f_contiguous):
        if copy is False:
            raise ValueError(f"asarray: copy=False but order={order!r} requires a copy")
        x = x.copy(order=order)
    return _finish(x, requires_grad)


@_placed
def array(object, dtype=None, *, copy=True, order="K", device=None, requires_grad=False,
          ndmin=0):
    """Like ``asarray`` but copies by default (NumPy's ``array``).

    ``copy=True`` always copies, ``copy=None`` only when needed and
    ``copy=False`` never (ValueError when a copy is needed), as in NumPy 2.

    >>> import ember
    >>> ember.array([[1, 2], [3, 4]]).shape
    (2, 2)
    """
    ndmin = operator.index(ndmin)
    x = asarray(object, dtype=dtype, order=order, device=device, copy=copy,
                requires_grad=False)
    if ndmin > x.ndim:
        x = x.reshape((1,) * (ndmin - x.ndim) + x.shape)
    return _finish(x, requires_grad)


@_placed
def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """PyTorch's spelling of ``array`` (always copies).

    >>> import ember
    >>> ember.tensor([1.0, 2.0], requires_grad=True).requires_grad
    True
    """
    return array(data, dtype=dtype, device=device, requires_grad=requires_grad)


@_placed
def empty(shape, dtype=None, order="C", *, device=None, requires_grad=False):
    """An uninitialised array of `shape` (contents are whatever the memory held).

    >>> import ember
    >>> ember.empty((2, 3)).shape
    (2, 3)
    """
    if order != "C":
        _check_order(order, "empty")
        return _finish(_f_order(empty_raw(_rev(shape), dtype)), requires_grad)
    return _finish(empty_raw(shape, dtype), requires_grad)


def _check_order(order, opname):
    if order not in ("C", "F"):
        raise ValueError(f"{opname}: order must be 'C' or 'F', got {order!r}")


def _rev(shape):
    return tuple(shape)[::-1] if isinstance(shape, (tuple, list)) else shape


def _f_order(x):
    """A C-contiguous array of the reversed shape, seen as a Fortran-ordered one."""
    return x.T if x.ndim > 1 else x


@_placed
def full(shape, fill_value, dtype=None, order="C", *, device=None, requires_grad=False):
    """An array of `shape` filled with `fill_value`.

    Without `dtype`: bool -> bool, int -> int64, float -> the default float
    dtype, complex -> the default complex dtype; an array fill value keeps its dtype.

    >>> import ember
    >>> ember.full((2,), 7).tolist(), ember.full((1,), 0.5).dtype
    ([7, 7], dtype('float32'))
    """
    if dtype is None:
        if isinstance(fill_value, builtins.bool):
            dtype = np.bool_
        elif isinstance(fill_value, int):
            dtype = np.int64
        elif isinstance(fill_value, float):
            dtype = default_float_dtype()
        elif isinstance(fill_value, complex):
            dtype = default_complex_dtype()
        else:
            fv = as_array(fill_value)
            if fv.ndim != 0:
                raise ValueError(f"full: fill_value must be a scalar, got an array of shape {fv.shape}")
            dtype = fv.dtype
    x = empty(shape, dtype, order, device=device)
    if isinstance(fill_value, (int, float, complex)) and not isinstance(fill_value, np.generic):
        if dtype_kind(x.dtype) in "iu" and isinstance(fill_value, int) and not isinstance(fill_value, builtins.bool):
            info = np.iinfo(x.dtype)
            if not info.min <= fill_value <= info.max:
                raise OverflowError(f"full: Python integer {fill_value} out of bounds for {x.dtype}")
        if isinstance(fill_value, float) and dtype_kind(x.dtype) in "fc" or \
                isinstance(fill_value, complex) and dtype_kind(x.dtype) == "c":
            # a scalar of x's dtype: a Python float would pass through the default
            # float dtype (float32) on its way to a float64 array
            fill_value = x.dtype.type(fill_value)
        x.fill(fill_value)
    else:
        x.fill(as_array(fill_value))
    return _finish(x, requires_grad)


@_placed
def zeros(shape, dtype=None, order="C", *, device=None, requires_grad=False):
    """An array of zeros.

    The shape may also be given as separate ints (PyTorch's ``zeros(2, 3)``) or as
    ``size=``; as in NumPy, a second positional that is not an int is the dtype.

    >>> import ember
    >>> ember.zeros((2, 2), dtype=ember.int32).tolist()
    [[0, 0], [0, 0]]
    >>> ember.zeros(2, 3).shape, ember.zeros(2, ember.int8).dtype
    ((2, 3), dtype('int8'))
    """
    if order != "C":
        _check_order(order, "zeros")
        return _finish(_f_order(_array._zeros(_rev(shape), dtype)), requires_grad)
    return _finish(_array._zeros(shape, dtype), requires_grad)


@_placed
def ones(shape, dtype=None, order="C", *, device=None, requires_grad=False):
    """An array of ones.

    >>> import ember
    >>> ember.ones(3).tolist()
    [1.0, 1.0, 1.0]
    """
    x = empty(shape, dtype, order, device=device)
    x.fill(1)
    return _finish(x, requires_grad)


def _check_subok(subok, opname):
    """NumPy reads subok as a C int: anything else is a TypeError."""
    if isinstance(subok, (ndarray, np.ndarray)):
        if subok.ndim != 0 or dtype_kind(subok.dtype) not in "biu":
            raise TypeError(f"{opname}: subok must be a bool, not an array of "
                            f"{subok.dtype} and shape {tuple(subok.shape)}")
        return
    if not -2**31 <= operator.index(subok) < 2**31:
        raise OverflowError(f"{opname}: subok={subok} does not fit in a C int")


def _like(x, dtype, shape, order="K", opname="*_like", subok=True):
    check_order(order, opname)
    _check_subok(subok, opname)
    x = as_array(x)
    return (x.shape if shape is None else shape), (x.dtype if dtype is None else dtype)


def _laid_out_like(make, x, shape, order, opname, *args, **kwargs):
    """``make(shape, *args, **kwargs)`` (a fresh C-contiguous array) laid out as NumPy
    lays out ``empty_like(x, order=order, shape=shape)``: x's memory order for 'K'."""
    perm = None
    if order != "C":
        shape = _array._parse_shape(shape, opname)
        perm = _array._like_perm(as_array(x), order, shape)
    if perm is None:
        return make(shape, *args, **kwargs)
    return _array._with_axes(make(tuple(shape[p] for p in perm), *args, **kwargs), perm)


@_placed
def empty_like(x, /, dtype=None, order="K", subok=True, shape=None, *, device=None,
               requires_grad=False):
    """An uninitialised array with x's shape and dtype, laid out in `order` (NumPy's:
    'K' keeps x's memory order, 'A' is F for a Fortran-contiguous x, else C).

    >>> import ember
    >>> ember.empty_like(ember.zeros((2, 3), dtype=ember.int8)).dtype
    dtype('int8')
    >>> ember.empty_like(ember.zeros((2, 3)).T).flags.f_contiguous
    True
    """
    s, d = _like(x, dtype, shape, order, "empty_like", subok)
    return _finish(_laid_out_like(empty, x, s, order, "empty_like", dtype=d, device=device),
                   requires_grad)


@_placed
def zeros_like(x, /, dtype=None, order="K", subok=True, shape=None, *, device=None,
               requires_grad=False):
    """Zeros with x's shape and dtype, laid out as ``empty_like``'s.

    >>> import ember
    >>> ember.zeros_like(ember.ones((2,))).tolist()
    [0.0, 0.0]
    """
    s, d = _like(x, dtype, shape, order, "zeros_like", subok)
    return _finish(_laid_out_like(zeros, x, s, order, "zeros_like", dtype=d, device=device),
                   requires_grad)


@_placed
def ones_like(x, /, dtype=None, order="K", subok=True, shape=None, *, device=None,
              requires_grad=False):
    """Ones with x's shape and dtype, laid out as ``empty_like``'s.

    >>> import ember
    >>> ember.ones_like(ember.zeros((2,), dtype=ember.int64)).tolist()
    [1, 1]
    """
    s, d = _like(x, dtype, shape, order, "ones_like", subok)
    return _finish(_laid_out_like(ones, x, s, order, "ones_like", dtype=d, device=device),
                   requires_grad)


@_placed
def full_like(x, /, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None,
              requires_grad=False):
    """`fill_value` everywhere, with x's shape and dtype, laid out as ``empty_like``'s.

    >>> import ember
    >>> ember.full_like(ember.zeros((2,), dtype=ember.int32), 3).tolist()
    [3, 3]
    """
    s, d = _like(x, dtype, shape, order, "full_like", subok)
    return _finish(_laid_out_like(full, x, s, order, "full_like", fill_value, dtype=d,
                                  device=device), requires_grad)


@_placed
def arange(start, /, stop=None, step=1, dtype=None, *, device=None, requires_grad=False):
    """Evenly spaced values in [start, stop), NumPy's length rule ``ceil((stop-start)/step)``.

    Integer arguments give int64; any float argument gives the default float dtype.

    >>> import ember
    >>> ember.arange(5).tolist(), ember.arange(0, 1, 0.25).tolist()
    ([0, 1, 2, 3, 4], [0.0, 0.25, 0.5, 0.75])
    """
    if stop is None:
        start, stop = 0, start
    start, stop, step = (_arange_arg(v) for v in (start, stop, step))
    if step == 0:
        raise ValueError("arange: step must not be zero")
    if dtype is None:
        if builtins.all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
            dtype = np.int64
        else:
            dtype = default_float_dtype()
    dt = _resolve_dtype(dtype)
    span = (stop - start) / step
    if not math.isfinite(span):
        raise ValueError(f"arange: cannot compute the length of arange({start}, {stop}, {step})")
    n = builtins.max(0, math.ceil(span))
    # NumPy computes in the target dtype from start and step; do the same
    res = np.arange(start, stop, step, dtype=dt) if dtype_kind(dt) != "b" else np.arange(start, stop, step).astype(dt)
    if len(res) != n and dtype_kind(dt) in "iu":
        res = res[:n]
    return _finish(_copy_into_ember(res), requires_grad)


def _arange_arg(v):
    """A Python/NumPy real number from an arange argument (0-d arrays included)."""
    if isinstance(v, ndarray):
        if v.ndim != 0:
            raise TypeError(f"arange: arguments must be scalars, got an array of shape {v.shape}")
        v = v.item()
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, (builtins.bool, np.bool_)):
        v = int(v)
    if not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"arange: arguments must be real numbers, got {type(v).__name__}")
    return v


def _copy_into_ember(np_arr, order="C"):
    """Copy a NumPy array into fresh ember memory (the caching allocator)."""
    if order == "F" and np_arr.ndim > 1:
        out = empty_raw(np_arr.shape[::-1], np_arr.dtype).T
    else:
        out = empty_raw(np_arr.shape, np_arr.dtype)
    numpy_view(out)[...] = np_arr
    return out


def _np_endpoint(v):
    """A linspace/logspace endpoint for NumPy: ember arrays become zero-copy views."""
    return numpy_view(v) if isinstance(v, ndarray) else v


@_placed
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             steps=None, device=None, requires_grad=False):
    """`num` evenly spaced samples from start to stop (inclusive unless ``endpoint=False``).

    Without `dtype` the result has the default float dtype (complex endpoints:
    the default complex dtype); an integer `dtype` rounds towards -inf, as
    NumPy does.  `start`/`stop` may be arrays: the samples then run along `axis`.
    ``steps=`` is PyTorch's name for `num`.

    >>> import ember
    >>> ember.linspace(0, 1, 5).tolist(), ember.linspace(0, 1, steps=3).tolist()
    ([0.0, 0.25, 0.5, 0.75, 1.0], [0.0, 0.5, 1.0])
    """
    if steps is not None:
        num = steps
    try:
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"linspace: num must be an integer, got {type(num).__name__}") from None
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    a, b = _np_endpoint(start), _np_endpoint(stop)
    if dtype is None:
        is_complex = builtins.any(np.iscomplexobj(v) for v in (a, b))
        dtype = default_complex_dtype() if is_complex else default_float_dtype()
    dt = _resolve_dtype(dtype)
    res, step = np.linspace(a, b, num, endpoint=endpoint, retstep=True, dtype=dt, axis=axis)
    x = _finish(_copy_into_ember(res), requires_grad)
    return (x, step) if retstep else x


@_placed
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, *, steps=None,
             device=None, requires_grad=False):
    """`num` samples evenly spaced on a log scale, ``base ** linspace(start, stop)``.

    Without `dtype` the result has the default float dtype; ``steps=`` is PyTorch's
    name for `num`.

    >>> import ember
    >>> ember.logspace(0, 2, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    if steps is not None:
        num = steps
    a, b = _np_endpoint(start), _np_endpoint(stop)
    if dtype is None:
        is_complex = builtins.any(np.iscomplexobj(v) for v in (a, b, base))
        dtype = default_complex_dtype() if is_complex else default_float_dtype()
    dt = _resolve_dtype(dtype)
    res = np.logspace(a, b, num, endpoint=endpoint, base=_np_endpoint(base), axis=axis)
    return _finish(_copy_into_ember(res.astype(dt, copy=False)), requires_grad)


@_placed
def eye(N, M=None, k=0, dtype=None, order="C", *, device=None, requires_grad=False):
    """A 2-d array with ones on the k-th diagonal (``N`` rows, ``M`` columns).

    Array API spelling ``eye(n_rows, n_cols, k=..., dtype=...)`` works too.

    >>> import ember
    >>> ember.eye(2, 3, k=1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    M = N if M is None else M
    try:
        N, M, k = operator.index(N), operator.index(M), operator.index(k)
    except TypeError:
        raise TypeError(f"eye: N, M and k must be integers, got {N!r}, {M!r}, {k!r}") from None
    if N < 0 or M < 0:
        raise ValueError(f"eye: negative dimensions are not allowed, got N={N}, M={M}")
    x = zeros((N, M), dtype, order)
    if N > 0 and M > 0 and -N < k < M:
        # the k-th diagonal as a strided view: one fill, no loop
        d = numpy_view(x)
        diag = np.lib.stride_tricks.as_strided(
            d[builtins.max(-k, 0):, builtins.max(k, 0):],
            shape=(builtins.min(N - builtins.max(-k, 0), M - builtins.max(k, 0)),),
            strides=(d.strides[0] + d.strides[1],))
        diag[...] = 1
    return _finish(x, requires_grad)


@_placed
def identity(n, dtype=None, *, device=None, requires_grad=False):
    """The n x n identity matrix.

    >>> import ember
    >>> ember.identity(2).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    return eye(n, dtype=dtype, device=device, requires_grad=requires_grad)


def meshgrid(*arrays, indexing="xy", sparse=False, copy=True):
    """Coordinate matrices from 1-d coordinate vectors (``indexing='xy'`` or ``'ij'``).

    Returns a list of arrays.  The outputs are fresh copies; ``copy=False``
    returns read-only broadcast views of the inputs instead and ``sparse=True``
    keeps the length-1 axes, as in NumPy.  Inputs that are not 1-d are
    flattened (NumPy's rule).

    >>> import ember
    >>> X, Y = ember.meshgrid(ember.arange(3), ember.arange(2))
    >>> X.shape, Y.tolist()
    ((2, 3), [[0, 0, 0], [1, 1, 1]])
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    # PyTorch's form meshgrid([a, b]): one list of arrays (a list of lists or numbers is
    # NumPy's one input, flattened)
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)) and arrays[0] and \
            builtins.all(isinstance(a, (ndarray, np.ndarray)) for a in arrays[0]):
        arrays = tuple(arrays[0])
    xs = [as_array(a) for a in arrays]
    grids = np.meshgrid(*[numpy_view(a) for a in xs], indexing=indexing, sparse=sparse, copy=False)
    out = [(_copy_into_ember(g) if copy else wrap(g)) for g in grids]
    return out if isinstance(out, list) else list(out)


def _tri(x, k, lower, opname):
    x = as_array(x)
    if x.ndim < 2:
        raise ValueError(f"{opname}: input must have at least 2 dimensions, got shape {x.shape}")
    k = operator.index(k)
    return _copy_into_ember(np.tril(numpy_view(x), k) if lower else np.triu(numpy_view(x), k))


def tril(x, /, k=0):
    """The lower triangle of the last two axes (elements above the k-th diagonal zeroed).

    >>> import ember
    >>> ember.tril(ember.ones((2, 2))).tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    return _tri(x, k, True, "tril")


def triu(x, /, k=0):
    """The upper triangle of the last two axes (elements below the k-th diagonal zeroed).

    >>> import ember
    >>> ember.triu(ember.ones((2, 2))).tolist()
    [[1.0, 1.0], [0.0, 1.0]]
    """
    return _tri(x, k, False, "triu")


@_placed
def from_dlpack(x, /, *, device=None, copy=None):
    """An ember array sharing memory with any DLPack producer (NumPy, PyTorch CPU...).

    >>> import ember, numpy
    >>> ember.from_dlpack(numpy.arange(3)).tolist()
    [0, 1, 2]
    """
    if type(x).__name__ == "PyCapsule":
        # a bare DLPack capsule (zero-copy); bfloat16 ones NumPy cannot read alone
        arr = import_bfloat16(x)
        res = wrap(arr) if arr is not None else wrap(x)
        return res.copy() if copy else res
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} does not implement __dlpack__")
    if isinstance(x, ndarray):
        return x.copy() if copy else x
    try:
        try:
            arr = np.from_dlpack(x, copy=copy)
        except TypeError:
            arr = np.from_dlpack(x)
    except BufferError as err:
        raise BufferError(f"from_dlpack: {err}") from None
    except RuntimeError as err:            # NumPy: "Unsupported dtype in DLTensor"
        arr = import_bfloat16(x) if x.__dlpack_device__()[0] == 1 else None
        if arr is None:
            raise BufferError(f"from_dlpack: {err}") from None
        if copy:
            arr = arr.copy()
    return wrap(arr)


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """A 1-d array viewing a buffer's bytes (zero-copy, like ``numpy.frombuffer``).

    >>> import ember
    >>> ember.frombuffer(bytearray(b"\\x01\\x02"), dtype=ember.uint8).tolist()
    [1, 2]
    """
    if dtype is float:
        dtype = np.float64
    return wrap(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def ascontiguousarray(a, dtype=None):
    """x as a C-contiguous array of at least one dimension (NumPy's: a 0-d input
    comes back with shape (1,)); no copy when it already is, with that dtype.

    >>> import ember
    >>> ember.ascontiguousarray(ember.ones((2, 3)).T).is_contiguous()
    True
    >>> ember.ascontiguousarray(ember.asarray(2.0)).shape
    (1,)
    """
    res = asarray(a, dtype=dtype, order="C")
    return res.reshape((1,)) if res.ndim == 0 else res


def copy(a, order="K", subok=False):
    """A copy of `a` in fresh memory, laid out in `order` (NumPy's: 'K', the default,
    keeps a's memory order; 'C', 'F'; 'A' is F for a Fortran-contiguous `a`, else C).

    >>> import ember
    >>> a = ember.ones(2); b = ember.copy(a); b[0] = 5; a.tolist()
    [1.0, 1.0]
    >>> ember.copy(ember.ones((2, 3)).T).flags.f_contiguous
    True
    """
    check_order(order, "copy")
    _check_subok(subok, "copy")
    return as_array(a).copy(order=order)


def diag(v, k=0):
    """Diagonal of a 2-d array, or a 2-d array with a 1-d array on its k-th diagonal.

    >>> import ember
    >>> ember.diag(ember.asarray([1, 2])).tolist()
    [[1, 0], [0, 2]]
    """
    v = as_array(v)
    if v.ndim == 1:
        n = v.shape[0] + builtins.abs(k)
        out = zeros((n, n), dtype=v.dtype)
        np.fill_diagonal(numpy_view(out)[builtins.max(-k, 0):, builtins.max(k, 0):], numpy_view(v))
        return out
    if v.ndim == 2:
        return _copy_into_ember(np.diagonal(numpy_view(v), k))
    raise ValueError(f"diag: input must be 1- or 2-dimensional, got shape {v.shape}")
