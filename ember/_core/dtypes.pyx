"""dtypes: the table behind ember's type promotion.

ember's dtype objects *are* NumPy's (``ember.float32 is numpy.float32`` and
``x.dtype`` is a ``numpy.dtype``), so dtypes compare and print exactly as
NumPy users expect.  Internally each dtype is a small integer code that
indexes the promotion table and the kernel tables.

bfloat16 is the NumPy dtype of ``ml_dtypes`` (the one JAX uses), so NumPy
views of ember's bfloat16 memory print and compute as bfloat16.  NumPy files
it under kind 'V' and promotes it with only a few dtypes; ember treats it as a
float everywhere (``dtype_kind``) and promotes it like float16: with bool,
(u)int8 it stays bfloat16; with (u)int16 and float16 it becomes float32 (as
in PyTorch, neither 16-bit float holds the other); with wider ints float64.
"""
import numpy as _np
import ml_dtypes as _ml_dtypes
import threading

_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64", "complex64",
          "complex128", "bfloat16")

bfloat16 = _ml_dtypes.bfloat16          # the scalar type, like numpy.float16
BFLOAT16 = _np.dtype(bfloat16)          # its numpy.dtype

DTYPE_OBJS = [_np.dtype(n) for n in _NAMES[:T_BFLOAT16]] + [BFLOAT16]
cdef dict _code_by_dtype = {}
cdef int _i, _j
for _i in range(NTYPES):
    _code_by_dtype[DTYPE_OBJS[_i]] = _i
    KIND[_i] = ord(DTYPE_OBJS[_i].kind)
    ITEMSIZE[_i] = DTYPE_OBJS[_i].itemsize
KIND[T_BFLOAT16] = ord('f')
for _i in range(T_BFLOAT16):
    for _j in range(T_BFLOAT16):
        PROMOTE[_i][_j] = _code_by_dtype[_np.promote_types(DTYPE_OBJS[_i], DTYPE_OBJS[_j])]
# bfloat16 promotes like float16 would, except that float16 and bfloat16 meet in float32
for _i in range(NTYPES):
    PROMOTE[_i][T_BFLOAT16] = T_FLOAT32 if _i == T_FLOAT16 else (
        T_BFLOAT16 if _i == T_BFLOAT16 else PROMOTE[_i][T_FLOAT16])
    if PROMOTE[_i][T_BFLOAT16] == T_FLOAT16:
        PROMOTE[_i][T_BFLOAT16] = T_BFLOAT16
    PROMOTE[T_BFLOAT16][_i] = PROMOTE[_i][T_BFLOAT16]

default_float = T_FLOAT32
default_complex = T_COMPLEX64

SCALAR_TYPES = tuple(d.type for d in DTYPE_OBJS)


def dtype_kind(dt):
    """NumPy's kind character of a dtype, except 'f' for bfloat16 (NumPy says 'V').

    >>> import ember
    >>> dtype_kind(ember.dtype(ember.bfloat16)), dtype_kind(ember.dtype(ember.int8))
    ('f', 'i')
    """
    k = dt.kind
    return 'f' if k == 'V' and dt == BFLOAT16 else k


def is_half_dtype(dt):
    """float16 or bfloat16 (16-bit floats that compute in float32)."""
    return dt == BFLOAT16 or dt == _np.float16


_KIND_NAMES = {"O": "object", "U": "string", "S": "bytes", "V": "structured/void",
               "M": "datetime", "m": "timedelta", "T": "string"}


def unsupported_dtype_message(dt):
    """The error text for a NumPy dtype ember has no kernels for (object, string,
    structured, datetime, extended precision...)."""
    what = _KIND_NAMES.get(dt.kind, "")
    if dt.kind == "f" or dt.kind == "c":
        what = "extended-precision"
    what = f" ({what} dtype)" if what else ""
    return (f"ember does not support {dt!r}{what}: ember supports numeric dtypes only "
            f"({', '.join(_NAMES)})")


cdef int code_of_numpy_dtype(object dt) except -1:
    cdef object c = _code_by_dtype.get(dt)
    if c is None:
        raise TypeError(unsupported_dtype_message(dt))
    return <int>c


cdef int code_of(object dtype) except -1:
    # Python's types mean what they mean in NumPy and PyTorch: float is float64,
    # complex is complex128 (the default float dtype is for Python float *values*)
    cdef object c
    if dtype is float:
        return T_FLOAT64
    if dtype is complex:
        return T_COMPLEX128
    if dtype is int:
        return T_INT64
    if dtype is bool:
        return T_BOOL
    try:
        c = _code_by_dtype.get(dtype)
    except TypeError:               # unhashable: a structured dtype's field list
        c = None
    if c is not None:
        return <int>c
    if isinstance(dtype, str) and dtype in ("float", "complex", "int", "bool"):
        return code_of({"float": float, "complex": complex, "int": int, "bool": bool}[dtype])
    if dtype is str or dtype is bytes or dtype is object:
        raise TypeError(unsupported_dtype_message(_np.dtype(dtype)))
    if isinstance(dtype, _np.ndarray) or (not isinstance(dtype, (type, _np.generic))
                                          and hasattr(dtype, "__array_namespace__")):
        # NumPy's dtype() would read an ember array's .dtype attribute; NumPy refuses arrays
        raise TypeError(f"Cannot construct a dtype from an array (got a "
                        f"{type(dtype).__name__}; pass its .dtype)")
    try:
        dt = _np.dtype(dtype)
    except TypeError:
        raise TypeError(f"data type {dtype!r} not understood") from None
    return code_of_numpy_dtype(dt)


cdef int scalar_default_code(object s) except -1:
    """dtype code for a lone Python scalar (no array to follow)."""
    if isinstance(s, bool):
        return T_BOOL
    if isinstance(s, int):
        return T_INT64
    if isinstance(s, float):
        return default_float
    if isinstance(s, complex):
        return default_complex
    raise TypeError(f"unsupported scalar type {type(s).__name__}")


cdef int weak_result(int a, object s) except -1:
    """Result code of array(code a) OP python-scalar s (NumPy 2 weak-scalar rule)."""
    cdef char k = KIND[a]
    if isinstance(s, bool):
        return a
    if isinstance(s, int):
        if k == b'b':               # bool with an int: the default int, which must hold it
            if s < -9223372036854775808 or s > 9223372036854775807:
                raise OverflowError("Python int too large to convert to C long")
            return T_INT64
        if k == b'i' or k == b'u':
            info = _np.iinfo(DTYPE_OBJS[a])
            if s < info.min or s > info.max:
                raise OverflowError(f"Python integer {s} out of bounds for {DTYPE_OBJS[a]}")
        return a
    if isinstance(s, float):
        if k == b'b' or k == b'i' or k == b'u':
            return default_float
        return a
    if isinstance(s, complex):
        if k == b'c':
            return a
        if a == T_FLOAT64:
            return T_COMPLEX128
        if k == b'f':
            return T_COMPLEX64
        return default_complex
    raise TypeError(f"unsupported operand type {type(s).__name__}")


# ---------------------------------------------------------------- public

def _code(dtype):
    return code_of(dtype)


def set_default_dtype(dtype):
    """Set the floating dtype used for Python floats and float-valued results
    of integer inputs (``float32`` unless changed; ``float64`` is the other choice).
    The environment variable ``EMBER_DEFAULT_DTYPE=float64`` sets it at import.
    Python's ``float`` as a dtype (``dtype=float``) always means float64.

    >>> import ember
    >>> ember.set_default_dtype(ember.float64)
    >>> ember.asarray([1.5]).dtype
    dtype('float64')
    >>> ember.set_default_dtype(ember.float32)
    """
    global default_float, default_complex
    cdef int c = code_of(dtype)
    if c == T_FLOAT32:
        default_float, default_complex = T_FLOAT32, T_COMPLEX64
    elif c == T_FLOAT64:
        default_float, default_complex = T_FLOAT64, T_COMPLEX128
    else:
        raise TypeError(f"set_default_dtype: only float32 and float64 are supported, got {DTYPE_OBJS[c]}")


def get_default_dtype():
    """The current default floating dtype (``float32`` unless changed).

    >>> import ember
    >>> ember.get_default_dtype()
    dtype('float32')
    """
    return DTYPE_OBJS[default_float]


def default_float_dtype():
    return DTYPE_OBJS[default_float]


def default_complex_dtype():
    return DTYPE_OBJS[default_complex]


cdef int _checked_code(int c) except -1:
    """A dtype code from Python, checked (the tables are C arrays: no bounds checks)."""
    if c < 0 or c >= NTYPES:
        raise ValueError(f"invalid ember dtype code {c} (expected 0..{NTYPES - 1})")
    return c


def dtype_from_code(int c):
    return DTYPE_OBJS[_checked_code(c)]


def promote_codes(int a, int b):
    return PROMOTE[_checked_code(a)][_checked_code(b)]


def weak_result_code(int a, s):
    return weak_result(_checked_code(a), s)


def scalar_code(s):
    return scalar_default_code(s)


def _default_from_environment():
    """EMBER_DEFAULT_DTYPE=float64 (or float32) sets the default float dtype at import,
    so NumPy programs run unchanged (as JAX_ENABLE_X64 does for JAX)."""
    import os
    value = os.environ.get("EMBER_DEFAULT_DTYPE", "").strip()
    if not value:
        return
    if value not in ("float32", "float64"):
        raise ValueError(f"EMBER_DEFAULT_DTYPE must be 'float32' or 'float64', got {value!r}")
    set_default_dtype(value)


_default_from_environment()
