"""dtypes and the functions that reason about them.

ember's dtypes are NumPy's scalar types (``ember.float32 is numpy.float32``),
so they compare, print and convert exactly as NumPy users expect.  Promotion
follows NumPy 2 with Python scalars "weak", except that integer inputs to
float-valued operations give ember's default float dtype (float32 unless
changed with ``ember.set_default_dtype``).
"""
import builtins

import numpy as np

from ember._core.array import ndarray
from ember._core.dtypes import (_code, promote_codes, weak_result_code, dtype_from_code,
                                scalar_code, bfloat16, BFLOAT16, dtype_kind)

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "half", "single",
           "double", "float_", "int_", "intp", "uint", "cfloat", "cdouble", "bool_",
           "dtype", "newaxis", "pi", "e", "inf", "nan", "euler_gamma",
           "finfo", "iinfo", "result_type", "can_cast", "promote_types", "isdtype",
           "generic", "number", "integer", "signedinteger", "unsignedinteger",
           "floating", "complexfloating", "inexact", "issubdtype",
           # NumPy 2's C-named scalar types (each is NumPy's own object)
           "byte", "ubyte", "short", "ushort", "intc", "uintc", "long", "ulong", "longlong",
           "ulonglong", "uintp", "csingle"]

bool = np.bool
bool_ = np.bool
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
half, single, double, float_ = np.float16, np.float32, np.float64, np.float64
int_, intp, uint = np.int64, np.intp, np.uint64
cdouble = np.complex128
cfloat = np.complex64       # PyTorch's cfloat (NumPy 2 has no such name; NumPy 1's meant complex128)
# NumPy 2's C-named aliases: NumPy's objects, so ``ember.ubyte is numpy.ubyte``.
# longdouble / clongdouble (extended precision) are refused (ember.__getattr__).
byte, ubyte, short, ushort = np.byte, np.ubyte, np.short, np.ushort
intc, uintc, long, ulong = np.intc, np.uintc, np.long, np.ulong
longlong, ulonglong, uintp, csingle = np.longlong, np.ulonglong, np.uintp, np.csingle
generic, number, integer = np.generic, np.number, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger
floating, complexfloating, inexact = np.floating, np.complexfloating, np.inexact
dtype = np.dtype
newaxis = None
pi, e, inf, nan, euler_gamma = np.pi, np.e, np.inf, np.nan, np.euler_gamma


def _as_dtype(x, opname, arrays=False):
    """A dtype from a dtype-like (an array's dtype too where `arrays`, as NumPy's and the
    Array API's can_cast/finfo/iinfo allow); None and arrays elsewhere are TypeErrors."""
    if isinstance(x, (ndarray, np.ndarray)):
        if arrays:
            return x.dtype
        raise TypeError(f"{opname}: Cannot construct a dtype from an array (pass its .dtype)")
    if x is None:
        raise TypeError(f"{opname}: None is not a dtype")
    try:
        return dtype_from_code(_code(x))
    except TypeError:
        raise TypeError(f"{opname}: {x!r} is not an ember dtype or array") from None


def issubdtype(arg1, arg2):
    """NumPy's ``issubdtype``, with bfloat16 filed under ``floating`` (and so
    ``inexact``, ``number``) as ember treats it, where NumPy only knows it as
    ``generic``.

    >>> import ember
    >>> ember.issubdtype(ember.bfloat16, ember.floating), ember.issubdtype(ember.int8, ember.floating)
    (True, False)
    """
    for arg in (arg1, arg2):
        if isinstance(arg, (ndarray, np.ndarray)):
            raise TypeError("issubdtype: Cannot construct a dtype from an array (pass its .dtype)")

    def is_bf16(t):
        try:
            return np.dtype(t) == BFLOAT16
        except TypeError:
            return False
    if is_bf16(arg1) and not is_bf16(arg2) and isinstance(arg2, type) and issubclass(arg2, np.generic):
        return arg2 in (np.floating, np.inexact, np.number, np.generic)
    return np.issubdtype(arg1, arg2)


class finfo_object:
    """Machine limits of one floating dtype, the Array API's ``finfo`` object:
    ``bits`` an int, ``eps``, ``max``, ``min``, ``smallest_normal`` (and NumPy's
    ``tiny``, ``resolution``, ``epsneg``) Python floats, ``dtype`` the real dtype;
    NumPy's other fields (``precision``, ``nmant``, ``maxexp``, ...) as NumPy
    gives them."""

    def __init__(self, info):
        self._info = info
        self.bits = int(info.bits)
        self.dtype = np.dtype(info.dtype)
        for name in ("eps", "max", "min", "smallest_normal", "tiny", "resolution", "epsneg"):
            setattr(self, name, builtins.float(getattr(info, name)))

    def __getattr__(self, name):
        if name == "_info":
            raise AttributeError(name)
        return getattr(self._info, name)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:.8g}, min={self.min:.8g}, max={self.max:.8g}, "
                f"dtype={self.dtype})")


def finfo(type):
    """Machine limits of a floating (or complex) dtype or array (Python floats, as
    the Array API requires; ``dtype`` is the real dtype of a complex one).

    >>> import ember
    >>> ember.finfo(ember.float32).eps
    1.1920928955078125e-07
    >>> ember.finfo(ember.bfloat16).eps
    0.0078125
    """
    dt = _as_dtype(type, "finfo", arrays=True)
    if dtype_kind(dt) not in "fc":
        raise ValueError(f"finfo: {dt} is not a floating point dtype (use iinfo for integers)")
    if dt == BFLOAT16:
        import ml_dtypes
        return finfo_object(ml_dtypes.finfo(dt))
    return finfo_object(np.finfo(dt))


def iinfo(type):
    """Machine limits of an integer dtype or array.

    >>> import ember
    >>> ember.iinfo(ember.int8).max
    127
    """
    dt = _as_dtype(type, "iinfo", arrays=True)
    if dtype_kind(dt) not in "iu":
        raise ValueError(f"iinfo: {dt} is not an integer dtype (use finfo for floats)")
    return np.iinfo(dt)


def result_type(*arrays_and_dtypes):
    """The dtype that ember's promotion gives for these arrays, dtypes and scalars.

    Python scalars are weak: they take the array's dtype when it can hold them.

    >>> import ember
    >>> ember.result_type(ember.int8, ember.uint8)
    dtype('int16')
    >>> ember.result_type(ember.zeros(2, dtype=ember.float16), 1.5)
    dtype('float16')
    """
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    code = None
    scalars = []
    for a in arrays_and_dtypes:
        if isinstance(a, (builtins.bool, int, float, complex)) and not isinstance(a, np.generic):
            scalars.append(a)
            continue
        c = _code(a.dtype) if isinstance(a, (ndarray, np.ndarray, np.generic)) else _code(_as_dtype(a, "result_type"))
        code = c if code is None else promote_codes(code, c)
    if code is None:
        code = scalar_code(scalars.pop(0))
    for s in scalars:
        try:
            code = weak_result_code(code, s)
        except OverflowError:
            pass        # NumPy 2: an out-of-range Python int still leaves the integer dtype
    return dtype_from_code(code)


def promote_types(type1, type2):
    """The smallest dtype both can be cast to safely (NumPy 2's table).

    >>> import ember
    >>> ember.promote_types(ember.int32, ember.float32)
    dtype('float64')
    """
    return dtype_from_code(promote_codes(_code(_as_dtype(type1, "promote_types")),
                                         _code(_as_dtype(type2, "promote_types"))))


def can_cast(from_, to, casting="safe"):
    """Whether a cast from a dtype (or array) to another is allowed by `casting`.

    >>> import ember
    >>> ember.can_cast(ember.int8, ember.float32), ember.can_cast(ember.float64, ember.int32)
    (True, False)
    """
    if isinstance(from_, (builtins.bool, int, float, complex)) and not isinstance(from_, np.generic):
        raise TypeError("can_cast: from_ must be a dtype or an array, not a Python scalar")
    return builtins.bool(np.can_cast(_as_dtype(from_, "can_cast", arrays=True), _as_dtype(to, "can_cast"),
                                     casting=casting))


_KIND_CODES = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "iu",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "iufc",
}


def isdtype(dtype, kind):
    """Array API dtype-kind test: `kind` is a dtype, a kind name, or a tuple of them.

    >>> import ember
    >>> ember.isdtype(ember.float32, "real floating"), ember.isdtype(ember.int8, ("bool", "unsigned integer"))
    (True, False)
    """
    if isinstance(dtype, (ndarray, np.ndarray)):
        raise TypeError("isdtype: expected a dtype, got an array (pass x.dtype)")
    if builtins.any(dtype is t for t in (builtins.bool, int, float, complex)):
        raise TypeError(f"isdtype: the dtype argument must be a dtype, not the Python type "
                        f"{dtype.__name__}")
    dt = _as_dtype(dtype, "isdtype")
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KIND_CODES:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of {sorted(_KIND_CODES)}")
        return dtype_kind(dt) in _KIND_CODES[kind]
    return dt == _as_dtype(kind, "isdtype")
