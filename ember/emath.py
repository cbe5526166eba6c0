"""``ember.emath`` (NumPy's ``numpy.emath``): math functions whose result is complex
when an input lies outside the real domain, instead of nan.

``sqrt(-1)`` is ``1j``; ``log(-1)`` is ``pi*1j``; ``arcsin(2)`` is complex.  When
every input is inside the domain the result is real, as from ``ember.sqrt``.
Arrays that need complex results become complex64 for float32/float16/bfloat16
input, complex128 for float64, and ember's default complex dtype for integers and
booleans (NumPy gives complex128 there; ember's default float dtype rules apply).
Written with ember's functions, so they are differentiable wherever those are.

>>> import ember
>>> ember.emath.sqrt(ember.asarray([-4.0, 4.0])).tolist()
[2j, (2+0j)]
>>> ember.emath.sqrt(ember.asarray([4.0])).tolist()
[2.0]
"""
import numpy as np

import ember as _E
from ember._core.dtypes import dtype_kind, default_complex_dtype

__all__ = ["sqrt", "log", "log2", "log10", "logn", "power", "arccos", "arcsin", "arctanh"]


def _arr(x):
    return x if isinstance(x, _E.ndarray) else _E.asarray(x)


def _complex_dtype(x):
    if x.dtype == np.float64:
        return np.complex128
    if dtype_kind(x.dtype) == "f":
        return np.complex64
    return default_complex_dtype()


def _to_complex_if(x, outside):
    """x as a complex array when a real element of it is outside the domain."""
    if dtype_kind(x.dtype) == "c":
        return x
    if x.size and bool(_E.any(outside(x))):
        return x.astype(_complex_dtype(x))
    return x


def _neg(x):
    return x < 0


def _beyond_one(x):
    return _E.abs(x) > 1


def sqrt(x):
    """Square root; complex for negative input (NumPy's ``emath.sqrt``).

    >>> import ember
    >>> complex(ember.emath.sqrt(-1.0))
    1j
    """
    return _E.sqrt(_to_complex_if(_arr(x), _neg))


def log(x):
    """Natural logarithm; complex for negative input (NumPy's ``emath.log``).

    >>> import ember
    >>> round(complex(ember.emath.log(-1.0)).imag, 6)
    3.141593
    """
    return _E.log(_to_complex_if(_arr(x), _neg))


def log2(x):
    """Base-2 logarithm; complex for negative input (NumPy's ``emath.log2``).

    >>> import ember
    >>> ember.emath.log2(ember.asarray([8.0])).tolist()
    [3.0]
    """
    x = _to_complex_if(_arr(x), _neg)
    if dtype_kind(x.dtype) == "c":
        return _E.log(x) / float(np.log(2.0))
    return _E.log2(x)


def log10(x):
    """Base-10 logarithm; complex for negative input (NumPy's ``emath.log10``).

    >>> import ember
    >>> ember.emath.log10(ember.asarray([100.0])).tolist()
    [2.0]
    """
    x = _to_complex_if(_arr(x), _neg)
    if dtype_kind(x.dtype) == "c":
        return _E.log(x) / float(np.log(10.0))
    return _E.log10(x)


def logn(n, x):
    """Logarithm of x in base n; complex where n or x is negative (NumPy's ``emath.logn``).

    >>> import ember
    >>> ember.emath.logn(2, ember.asarray([8.0])).tolist()
    [3.0]
    """
    x = _to_complex_if(_arr(x), _neg)
    n = _to_complex_if(_arr(n), _neg)
    return _E.log(x) / _E.log(n)


def power(x, p):
    """x ** p; complex where x is negative (NumPy's ``emath.power``).

    >>> import ember
    >>> z = ember.emath.power(ember.asarray([-4.0]), 0.5); z.dtype, round(complex(z[0]).imag, 4)
    (dtype('complex64'), 2.0)
    """
    return _E.power(_to_complex_if(_arr(x), _neg), p)


def arccos(x):
    """Inverse cosine; complex where ``|x| > 1`` (NumPy's ``emath.arccos``).

    >>> import ember
    >>> ember.emath.arccos(ember.asarray([1.0])).tolist()
    [0.0]
    """
    return _E.arccos(_to_complex_if(_arr(x), _beyond_one))


def arcsin(x):
    """Inverse sine; complex where ``|x| > 1`` (NumPy's ``emath.arcsin``).

    >>> import ember
    >>> ember.emath.arcsin(ember.asarray([0.0])).tolist()
    [0.0]
    """
    return _E.arcsin(_to_complex_if(_arr(x), _beyond_one))


def arctanh(x):
    """Inverse hyperbolic tangent; complex where ``|x| > 1`` (NumPy's ``emath.arctanh``).

    >>> import ember
    >>> ember.emath.arctanh(ember.asarray([0.0])).tolist()
    [0.0]
    """
    return _E.arctanh(_to_complex_if(_arr(x), _beyond_one))
