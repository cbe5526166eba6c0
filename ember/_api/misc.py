"""Array API odds and ends: the function form of astype, shape queries, and
the inspection namespace (``__array_namespace_info__``)."""
import numpy as np

from ember._core.array import CPU, check_device
from ember._core.dtypes import default_float_dtype, default_complex_dtype
from ember._core.array import ndarray
from ember._api._util import as_array, numpy_view

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["astype", "shape", "ndim", "size", "copyto", "__array_namespace_info__"]


def copyto(dst, src, casting="same_kind", where=True):
    """Copy `src` into `dst` in place, broadcasting, where `where` is true (NumPy's
    ``copyto``); a read-only `dst` raises ValueError.

    >>> import ember
    >>> x = ember.zeros(3); ember.copyto(x, ember.asarray([1.0, 2.0, 3.0])); x.tolist()
    [1.0, 2.0, 3.0]
    """
    if not isinstance(dst, ndarray):
        raise TypeError(f"copyto: dst must be an ember array (it is written in place), "
                        f"not {type(dst).__name__}")
    if not dst.flags.writeable:
        raise ValueError("copyto: assignment destination is read-only")
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"copyto: casting must be one of 'no', 'equiv', 'safe', "
                         f"'same_kind' or 'unsafe', got {casting!r}")
    if isinstance(src, ndarray) and not np.can_cast(src.dtype, dst.dtype, casting):
        raise TypeError(f"copyto: cannot cast array data from {src.dtype} to {dst.dtype} "
                        f"according to the rule {casting!r}")
    if where is True and (dst.is_cuda or dst.requires_grad or
                          (isinstance(src, ndarray) and (src.is_cuda or src.requires_grad))):
        if not isinstance(src, ndarray):
            np.copyto(np.empty((), dst.dtype), src, casting=casting)   # NumPy's scalar check
        dst[...] = src              # device-generic, recorded by autograd
        return
    sv = numpy_view(src) if isinstance(src, ndarray) else src
    wv = numpy_view(as_array(where)) if isinstance(where, ndarray) else where
    np.copyto(numpy_view(dst), sv, casting=casting, where=wv)
    dst._bump_version()


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` cast to `dtype` (the Array API's function form of ``x.astype``).

    >>> import ember
    >>> ember.astype(ember.asarray([1.7, -2.2]), ember.int32).tolist()
    [1, -2]
    """
    check_device(device, "astype")
    if not isinstance(x, ndarray):
        raise TypeError(f"astype: x must be an ember array, not {type(x).__name__}")
    return x.astype(dtype, copy=copy)


def shape(a):
    """The shape of an array-like, as ``numpy.shape``.

    >>> import ember
    >>> ember.shape([[1, 2, 3]])
    (1, 3)
    """
    return as_array(a).shape


def ndim(a):
    """The number of dimensions of an array-like.

    >>> import ember
    >>> ember.ndim(3.0)
    0
    """
    return as_array(a).ndim


def size(a, axis=None):
    """The number of elements, or the length of one axis.

    >>> import ember
    >>> ember.size([[1, 2, 3]], axis=1)
    3
    """
    x = as_array(a)
    return x.size if axis is None else x.shape[axis]


# the Array API's dtypes only: ember's float16 and bfloat16 are extensions the standard
# does not define (a library that lists them gets them fed to standard functions)
_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]


class _Info:
    """ember's Array API inspection namespace."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 32}

    def default_device(self):
        return CPU

    def devices(self):
        return [CPU]

    def default_dtypes(self, *, device=None):
        check_device(device, "default_dtypes")
        return {"real floating": default_float_dtype(),
                "complex floating": default_complex_dtype(),
                "integral": np.dtype("int64"),
                "indexing": np.dtype("int64")}

    def dtypes(self, *, device=None, kind=None):
        check_device(device, "dtypes")
        if kind is None:
            names = ("bool",) + _KINDS["numeric"]
        elif isinstance(kind, tuple):
            names = tuple(dict.fromkeys(n for k in kind for n in _KINDS[k]))
        elif kind in _KINDS:
            names = _KINDS[kind]
        else:
            raise ValueError(f"dtypes: unknown kind {kind!r}; expected one of {sorted(_KINDS)}")
        return {n: np.dtype(n) for n in names}


def __array_namespace_info__():
    """The Array API inspection namespace.

    >>> import ember
    >>> ember.__array_namespace_info__().default_dtypes()["real floating"]
    dtype('float32')
    """
    return _Info()
