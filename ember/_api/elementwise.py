"""Elementwise functions: NumPy's ufuncs and the Array API's names for them.

Each op of the generated table (``ember/_kernels/cpu/optable.py``) becomes an
``ember.ufunc`` object (``ember.add``, ``ember.exp``...) that calls the Cython
dispatcher directly; ``.reduce``, ``.accumulate``, ``.outer`` and ``.at``
work like NumPy's.  The Array API spellings (``acos``, ``pow``,
``bitwise_invert``...) are aliases of the same objects.
"""
import builtins
import operator

import numpy as np

from ember._core import elementwise as _ew
from ember._core.array import ndarray
from ember._core.dtypes import default_float_dtype
from ember._api._util import as_array, numpy_view, wrap, empty_raw, shape_str, into_out
from ember._core.dtypes import dtype_kind
from ember._core.public import ops as _public_ops

__all__ = ["ufunc", "where", "clip", "round", "around", "real", "imag", "conj", "conjugate",
           "isclose", "allclose", "array_equal", "array_equiv", "nan_to_num", "angle", "sinc",
           "fix", "i0", "float_power", "divmod", "frexp", "ldexp", "modf", "gcd", "lcm",
           "isreal", "iscomplex", "isposinf", "isneginf", "spacing"]


class ufunc(_ew.UfuncBase):
    """An elementwise function over broadcast arrays, like ``numpy.ufunc``.

    >>> import ember
    >>> ember.add(ember.arange(3), 10).tolist()
    [10, 11, 12]
    >>> x = ember.zeros(3); ember.add.at(x, ember.asarray([0, 0, 2]), 1.0); x.tolist()
    [2.0, 0.0, 1.0]
    """

    def __init__(self, name, nin):
        self.__name__ = name
        self.nin = nin
        self.nout = 1
        self._op = _ew._op_index(name)
        self._np = getattr(np, name)
        self.__doc__ = (f"ember.{name}: elementwise {name} with NumPy's semantics "
                        f"(broadcasting, type promotion, out=).")

    def __repr__(self):
        return f"<ember.ufunc '{self.__name__}'>"

    def _call(self, *args, out=np._NoValue, dtype=None, where=True, casting="same_kind",
              **kwargs):
        """The general call (out=, dtype=, where=); plain calls take UfuncBase's C path."""
        if len(args) == self.nin + 1:
            if out is not np._NoValue:
                raise TypeError(f"{self.__name__}: cannot specify 'out' as both a positional "
                                f"and keyword argument")
            out = args[-1]
            args = args[:-1]
        elif out is np._NoValue:
            out = None
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}: takes {self.nin} positional argument(s), got {len(args)}")
        if isinstance(out, tuple):
            if len(out) != 1:
                raise ValueError(f"{self.__name__}: out must hold exactly one array")
            out = out[0]
        if out is not None and not isinstance(out, ndarray):
            raise TypeError(f"{self.__name__}: out must be an ember array, got {type(out).__name__}")
        if kwargs:
            raise TypeError(f"{self.__name__}: unexpected keyword arguments {sorted(kwargs)}")
        if dtype is not None:
            self._check_dtype_signature(args, dtype)
            args = tuple(as_array(a).astype(dtype, copy=False) for a in args)
        if where is not True:
            return self._call_where(args, out, where)
        try:
            if self.nin == 2:
                return _ew.call_binary(self._op, args[0], args[1], out)
            return _ew.call_unary(self._op, args[0], out)
        except ValueError as err:
            if out is None:
                raise
            # NumPy lets out= take part in broadcasting: inputs stretch to out's shape
            try:
                args = tuple(_broadcast_to(a, out.shape) for a in args)
            except ValueError:
                raise err from None
            if self.nin == 2:
                return _ew.call_binary(self._op, args[0], args[1], out)
            return _ew.call_unary(self._op, args[0], out)

    def _check_dtype_signature(self, args, dtype):
        """dtype= names the loop: refuse what NumPy's type resolution refuses (no loop for
        that dtype, or inputs that do not cast to it under 'same_kind')."""
        from ember._core.dtypes import _code, dtype_from_code
        dt = dtype_from_code(_code(dtype))
        probes = []
        for a in args:
            if isinstance(a, (builtins.bool, int, float, complex)) and not isinstance(a, np.generic):
                probes.append(a)            # Python scalars stay weak, as in NumPy
            else:
                probes.append(np.empty(0, as_array(a).dtype))
        if "bfloat16" in [str(dt)] + [str(p.dtype) for p in probes if isinstance(p, np.ndarray)]:
            return                          # NumPy has no bfloat16 loops to consult
        try:
            self._np(*probes, dtype=dt)
        except TypeError as e:
            kinds = ", ".join(str(p.dtype) if isinstance(p, np.ndarray) else type(p).__name__
                              for p in probes)
            raise TypeError(f"{self.__name__}: no loop for dtype={dt} with input dtype(s) "
                            f"{kinds} ({e})") from None

    def _call_where(self, args, out, where):
        res = self(*args)
        mask = as_array(where)
        if out is None:
            out = empty_raw(res.shape, res.dtype)
        np.copyto(numpy_view(out), numpy_view(res), where=numpy_view(mask), casting="same_kind")
        out._bump_version()
        return out

    def _refuse_autograd(self, method, *arrays):
        """ufunc methods other than the differentiable delegations do not record."""
        from ember._core.array import _is_grad_enabled
        if _is_grad_enabled() and builtins.any(isinstance(a, ndarray) and a.requires_grad
                                               for a in arrays):
            raise RuntimeError(f"ember.{self.__name__}.{method} does not support autograd: an "
                               f"input requires grad; use the differentiable function "
                               f"(ember.sum, ember.max, ember.cumsum, x[idx] = ...) or detach")

    def _need_binary(self, method):
        if self.nin != 2:
            raise ValueError(f"{self.__name__}.{method}: only supported for binary functions "
                             f"({self.__name__} takes {self.nin} input)")

    def reduce(self, array, axis=0, dtype=None, out=None, keepdims=False, initial=np._NoValue,
               where=True):
        """Reduce along `axis` by repeated application (``ember.add.reduce`` is a sum).

        >>> import ember
        >>> ember.maximum.reduce(ember.asarray([[1, 5], [3, 2]]), axis=1).tolist()
        [5, 3]
        """
        ember = _public_ops()
        self._need_binary("reduce")
        dtype = _loop_dtype(dtype)
        if self.__name__ == "add" and initial is np._NoValue and where is True:
            return ember.sum(array, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
        if self.__name__ == "multiply" and initial is np._NoValue and where is True:
            return ember.prod(array, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
        if self.__name__ in ("maximum", "minimum") and initial is np._NoValue and where is True \
                and dtype is None and isinstance(array, ndarray) and array.requires_grad:
            fn = ember.max if self.__name__ == "maximum" else ember.min
            return fn(array, axis=axis, out=out, keepdims=keepdims)
        self._refuse_autograd("reduce", array)
        kw = {} if initial is np._NoValue else {"initial": initial}
        if isinstance(out, ndarray) and not out.is_cuda:
            # NumPy picks the loop from out='s dtype too (fmod has none for complex)
            self._np.reduce(numpy_view(as_array(array)), axis=axis, dtype=dtype,
                            keepdims=keepdims, where=where, out=numpy_view(out), **kw)
            out._bump_version()
            return out
        res = self._np.reduce(numpy_view(as_array(array)), axis=axis, dtype=dtype,
                              keepdims=keepdims, where=where, **kw)
        return _result(res, out, self.__name__)

    def accumulate(self, array, axis=0, dtype=None, out=None):
        """Running application along `axis` (``ember.add.accumulate`` is a cumsum).

        >>> import ember
        >>> ember.add.accumulate(ember.asarray([1, 2, 3])).tolist()
        [1, 3, 6]
        """
        self._need_binary("accumulate")
        dtype = _loop_dtype(dtype)
        ember = _public_ops()
        if isinstance(array, ndarray) and array.requires_grad and self.__name__ in ("add", "multiply"):
            fn = ember.cumsum if self.__name__ == "add" else ember.cumprod
            return fn(array, axis=axis, dtype=dtype, out=out)
        self._refuse_autograd("accumulate", array)
        res = self._np.accumulate(numpy_view(as_array(array)), axis=axis, dtype=dtype)
        return _result(res, out, self.__name__)

    def reduceat(self, array, indices, axis=0, dtype=None, out=None):
        """Reductions over slices ``array[indices[i]:indices[i+1]]`` along `axis` (NumPy's
        ``reduceat``: where ``indices[i] >= indices[i+1]`` the result is
        ``array[indices[i]]``; the last slice runs to the end).

        >>> import ember
        >>> ember.add.reduceat(ember.arange(8), [0, 4, 1, 5]).tolist()
        [6, 4, 10, 18]
        """
        self._need_binary("reduceat")
        dtype = _loop_dtype(dtype)
        self._refuse_autograd("reduceat", array)
        a = as_array(array)
        idx = numpy_view(as_array(indices)) if isinstance(indices, ndarray) else \
            np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"{self.__name__}.reduceat: indices must be integers, got "
                            f"{idx.dtype}")
        try:
            res = self._np.reduceat(numpy_view(a), idx, axis=axis, dtype=dtype)
        except IndexError as e:
            raise IndexError(f"{self.__name__}.reduceat: {e} (array shape {a.shape}, "
                             f"axis {axis})") from None
        return _result(res, out, self.__name__)

    def outer(self, a, b, /, **kwargs):
        """The op applied to every pair (a[i...], b[j...]): result shape a.shape + b.shape.

        >>> import ember
        >>> ember.multiply.outer(ember.asarray([1, 2]), ember.asarray([1, 10])).tolist()
        [[1, 10], [2, 20]]
        """
        self._need_binary("outer")
        a, b = as_array(a), as_array(b)
        return self(a.reshape(a.shape + (1,) * b.ndim), b, **kwargs)

    def at(self, a, indices, b=None, /):
        """Unbuffered in-place ``a[indices] op= b``: repeated indices accumulate.

        >>> import ember
        >>> x = ember.zeros(3); ember.add.at(x, [0, 0, 1], 1.0); x.tolist()
        [2.0, 1.0, 0.0]
        """
        if not isinstance(a, ndarray):
            raise TypeError(f"{self.__name__}.at: the first argument must be an ember array")
        self._refuse_autograd("at", a, b)
        idx = _np_index(indices)
        view = numpy_view(a)
        if not view.flags.writeable:
            raise ValueError(f"{self.__name__}.at: array is read-only")
        if self.nin == 2:
            if b is None:
                raise TypeError(f"{self.__name__}.at: needs a second operand")
            self._np.at(view, idx, numpy_view(as_array(b)) if isinstance(b, ndarray) else b)
        else:
            if b is not None:
                raise ValueError(f"{self.__name__}.at: second operand provided when the ufunc "
                                 f"is unary")
            self._np.at(view, idx)
        a._bump_version()


def _loop_dtype(dtype):
    """A ufunc method's dtype= as a NumPy dtype (TypeError for arrays and non-dtypes)."""
    if dtype is None:
        return None
    from ember._core.dtypes import _code, dtype_from_code
    return dtype_from_code(_code(dtype))


def _broadcast_to(a, shape):
    """An array argument as a read-only broadcast view of `shape` (Python scalars pass)."""
    if isinstance(a, (builtins.bool, int, float, complex)) and not isinstance(a, np.generic):
        return a
    a = as_array(a)
    if a.shape == tuple(shape):
        return a
    try:
        np.broadcast_shapes(a.shape, tuple(shape))
    except ValueError:
        raise ValueError("cannot broadcast") from None
    if np.broadcast_shapes(a.shape, tuple(shape)) != tuple(shape):
        raise ValueError("cannot broadcast")
    return wrap(np.broadcast_to(numpy_view(a), shape))


def _np_index(key):
    """Convert ember arrays inside an index to NumPy views (zero-copy)."""
    if isinstance(key, ndarray):
        return numpy_view(key)
    if isinstance(key, tuple):
        return tuple(_np_index(k) for k in key)
    if isinstance(key, list):
        return [numpy_view(k) if isinstance(k, ndarray) else k for k in key]
    return key


def _result(res, out, opname="ufunc"):
    res = np.asarray(res)
    if out is None:
        return wrap(res) if res.ndim else wrap(res.reshape(()))
    if not isinstance(out, ndarray):
        raise TypeError(f"{opname}: out must be an ember array, got {type(out).__name__}")
    if out.shape != res.shape:
        raise ValueError(f"{opname}: output array has shape {shape_str(out.shape)}, but the "
                         f"result has shape {shape_str(res.shape)}")
    if not np.can_cast(res.dtype, out.dtype, "same_kind"):
        raise TypeError(f"{opname}: cannot cast the result from {res.dtype} to the output's "
                        f"dtype {out.dtype} with casting rule 'same_kind'")
    numpy_view(out)[...] = res
    out._bump_version()
    return out


# ---------------------------------------------------------------- the ufuncs

for _row in _ew.op_table():         # one ember.ufunc per row of the op table
    globals()[_row.name] = ufunc(_row.name, _row.arity)
    __all__.append(_row.name)

_ALIASES = {
    # Array API names
    "abs": "absolute", "acos": "arccos", "acosh": "arccosh", "asin": "arcsin",
    "asinh": "arcsinh", "atan": "arctan", "atan2": "arctan2", "atanh": "arctanh",
    "bitwise_invert": "invert", "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift", "pow": "power",
    # NumPy names
    "true_divide": "divide", "mod": "remainder", "degrees": "rad2deg",
    "radians": "deg2rad", "bitwise_not": "invert",
}
for _alias, _target in _ALIASES.items():
    globals()[_alias] = globals()[_target]
    __all__.append(_alias)


class _FloatAbsolute(ufunc):
    """NumPy's ``fabs``: the absolute value of real input as a float.  Integer and bool
    input computes in ember's default float dtype (NumPy: float16/float64 by size);
    complex input is refused (use ``abs``).

    >>> import ember
    >>> ember.fabs(ember.asarray([-2, 3])).tolist()
    [2.0, 3.0]
    """

    def __init__(self):
        super().__init__("absolute", 1)
        self.__name__ = "fabs"
        self._np = np.fabs
        self.__doc__ = type(self).__doc__

    def __call__(self, *args, **kwargs):
        if args:
            x = as_array(args[0])
            kind = dtype_kind(x.dtype)
            if kind == "c":
                raise TypeError(f"fabs: not supported for complex input (dtype {x.dtype}); "
                                f"use ember.abs")
            if kind in "biu":
                args = (x.astype(default_float_dtype()),) + args[1:]
        return ufunc.__call__(self, *args, **kwargs)

    def __repr__(self):
        return "<ember.ufunc 'fabs'>"


fabs = _FloatAbsolute()
__all__.append("fabs")


# ---------------------------------------------------------------- beyond the table

def where(condition, x=np._NoValue, y=np._NoValue, /):
    """Elements of x where condition is true, else of y (broadcast, promoted).

    With only `condition`, the indices of its nonzero elements (``nonzero``).

    >>> import ember
    >>> ember.where(ember.asarray([True, False]), 1.0, ember.asarray([5.0, 6.0])).tolist()
    [1.0, 6.0]
    """
    ember = _public_ops()
    # NumPy counts the arguments given: where(c, None) is an error, not nonzero(c)
    if x is np._NoValue and y is np._NoValue:
        return ember.nonzero(condition)
    if x is np._NoValue or y is np._NoValue:
        raise ValueError("where: either both or neither of x and y must be given")
    if x is None or y is None:
        raise TypeError("where: x and y must be arrays or numbers, got None (NumPy would "
                        "make an object array; ember has none)")
    c = as_array(condition)
    dt = ember.result_type(*(v if isinstance(v, (builtins.bool, int, float, complex)) and
                             not isinstance(v, np.generic) else as_array(v) for v in (x, y)))
    try:
        shape = np.broadcast_shapes(c.shape, np.shape(x) if not isinstance(x, ndarray) else x.shape,
                                    np.shape(y) if not isinstance(y, ndarray) else y.shape)
    except ValueError:
        raise ValueError(f"where: operands could not be broadcast together with shapes "
                         f"{shape_str(c.shape)} {shape_str(np.shape(x))} {shape_str(np.shape(y))}") from None
    out = empty_raw(shape, dt)
    ov = numpy_view(out)
    xv = numpy_view(as_array(x)) if isinstance(x, ndarray) else x
    yv = numpy_view(as_array(y)) if isinstance(y, ndarray) else y
    ov[...] = yv
    np.copyto(ov, xv, where=numpy_view(c).astype(builtins.bool, copy=False), casting="unsafe")
    return out


def clip(x, /, min=None, max=None, *, out=None, a_min=np._NoValue, a_max=np._NoValue):
    """Limit values to [min, max] (either may be None); NaN propagates.

    The result dtype is the promotion of x with the bounds (Python scalar bounds
    are weak, so they keep x's dtype when of the same kind; an integer array
    clipped by Python floats gives the default float dtype).  Python integer
    bounds outside x's integer range clip nothing on that side, as in NumPy 2.
    Where ``min > max`` the result is ``max`` (NumPy's rule).

    >>> import ember
    >>> ember.clip(ember.asarray([-2, 0, 5]), 0, 3).tolist()
    [0, 0, 3]
    """
    if (a_min is np._NoValue) != (a_max is np._NoValue):
        raise TypeError("clip: NumPy's a_min and a_max are given together (or use min=/max=)")
    if a_min is not np._NoValue:
        min, max = a_min, a_max
    x = as_array(x)
    if dtype_kind(x.dtype) in "iu":
        min = _int_bound(min, x.dtype, True)
        max = _int_bound(max, x.dtype, False)
    res = x
    if min is None and max is None:
        return x.copy() if out is None else _assign_out(out, x, "clip")
    if min is not None:
        res = _ew.call_binary(_ew._op_index("maximum"), res, min, None)
    if max is not None:
        res = _ew.call_binary(_ew._op_index("minimum"), res, max, None)
    if out is not None:
        return _assign_out(out, res, "clip")
    return res


# clip's body is maximum/minimum, which run on a GPU: there it keeps the CPU's dtype and
# bound rules and its min=/max= keywords (CuPy's clip takes a_min/a_max only)
clip.device_generic = True


def _int_bound(b, dt, lower):
    """A Python-int clip bound outside dt's range: None (no effect) or the range's end."""
    if type(b) is not int:
        return b
    info = np.iinfo(dt)
    if lower:
        return None if b < info.min else builtins.min(b, int(info.max))
    return None if b > info.max else builtins.max(b, int(info.min))


def _assign_out(out, value, opname):
    """value written into out= as a ufunc does: value broadcasts to out's shape, and
    casts under 'same_kind'."""
    value = as_array(value)
    if isinstance(out, ndarray) and out.shape != value.shape:
        value = _broadcast_to(value, out.shape)     # ValueError when it cannot
    return into_out(value, out, opname)


def round(x, /, decimals=0, out=None):
    """Round half to even; `decimals` may be negative (NumPy's ``round``).

    Integer input with ``decimals >= 0`` comes back unchanged (a copy); bool
    input stays bool (NumPy gives float16 there).  ``decimals != 0`` on floats
    runs NumPy's algorithm on a zero-copy view.

    >>> import ember
    >>> ember.round(ember.asarray([0.5, 1.5, 2.567]), decimals=0).tolist()
    [0.0, 2.0, 3.0]
    """
    x = as_array(x)
    decimals = operator.index(decimals)
    if isinstance(out, ndarray) and out.shape != x.shape:
        # NumPy's round is no ufunc: out has the result's shape exactly (no broadcasting)
        raise ValueError(f"round: invalid output shape: out has shape {shape_str(out.shape)}, "
                         f"the result {shape_str(x.shape)}")
    if dtype_kind(x.dtype) in "biu" and decimals >= 0:
        return x.copy() if out is None else _assign_out(out, x, "round")
    if decimals == 0 and dtype_kind(x.dtype) == "f":
        return _ew.call_unary(_ew._op_index("rint"), x, out)
    return _result(np.round(numpy_view(x), decimals), out, "round")


around = round


def real(x, /):
    """The real part (a copy for complex input; the array itself for real input).

    >>> import ember
    >>> ember.real(ember.asarray([1 + 2j])).tolist()
    [1.0]
    """
    x = as_array(x)
    if dtype_kind(x.dtype) != "c":
        return x
    return wrap(numpy_view(x).real)


def imag(x, /):
    """The imaginary part (zeros for real input).

    >>> import ember
    >>> ember.imag(ember.asarray([1 + 2j])).tolist()
    [2.0]
    """
    x = as_array(x)
    if dtype_kind(x.dtype) != "c":
        from ember._api.creation import zeros_like
        return zeros_like(x)
    return wrap(numpy_view(x).imag)


def conj(x, /, out=None):
    """Complex conjugate (a copy of real input).

    >>> import ember
    >>> ember.conj(ember.asarray([1 + 2j])).tolist()
    [(1-2j)]
    """
    x = as_array(x)
    if dtype_kind(x.dtype) != "c":
        return x.copy() if out is None else _assign_out(out, x, "conjugate")
    return _result(np.conjugate(numpy_view(x)), out, "conjugate")


conjugate = conj


def _np_pair(a, b):
    return numpy_view(as_array(a)), numpy_view(as_array(b))


def _np_tol(t):
    """An rtol/atol for NumPy: an ember array as its NumPy view (NumPy would dispatch an
    ember array back to ember.isclose)."""
    return numpy_view(t) if isinstance(t, ndarray) else t


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|a - b| <= atol + rtol * |b|``.

    >>> import ember
    >>> ember.isclose(ember.asarray([1.0, 2.0]), 1.0).tolist()
    [True, False]
    """
    av, bv = _np_pair(a, b)
    rtol, atol = _np_tol(rtol), _np_tol(atol)
    try:
        return wrap(np.asarray(np.isclose(av, bv, rtol=rtol, atol=atol, equal_nan=equal_nan)))
    except ValueError:
        raise ValueError(f"isclose: operands could not be broadcast together with shapes "
                         f"{shape_str(av.shape)} {shape_str(bv.shape)}") from None


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element is ``isclose``.

    >>> import ember
    >>> ember.allclose(ember.ones(3), 1.0 + 1e-9)
    True
    """
    av, bv = _np_pair(a, b)
    rtol, atol = _np_tol(rtol), _np_tol(atol)
    try:
        return builtins.bool(np.allclose(av, bv, rtol=rtol, atol=atol, equal_nan=equal_nan))
    except ValueError:
        raise ValueError(f"allclose: operands could not be broadcast together with shapes "
                         f"{shape_str(av.shape)} {shape_str(bv.shape)}") from None


def array_equal(a1, a2, equal_nan=False):
    """True if both have the same shape and elements.

    >>> import ember
    >>> ember.array_equal(ember.arange(3), [0, 1, 2])
    True
    """
    av, bv = _np_pair(a1, a2)
    return builtins.bool(np.array_equal(av, bv, equal_nan=equal_nan))


def array_equiv(a1, a2):
    """True if the arrays are equal after broadcasting.

    >>> import ember
    >>> ember.array_equiv(ember.ones((2, 2)), 1.0)
    True
    """
    av, bv = _np_pair(a1, a2)
    return builtins.bool(np.array_equiv(av, bv))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN and infinities by finite numbers.

    >>> import ember
    >>> ember.nan_to_num(ember.asarray([float('nan'), 1.0])).tolist()
    [0.0, 1.0]
    """
    if not copy and not isinstance(x, ndarray):
        raise ValueError(f"nan_to_num: copy=False changes x in place, so x must be an array, "
                         f"got {type(x).__name__} (NumPy: unable to avoid a copy)")
    x = as_array(x)
    if not copy:
        np.nan_to_num(numpy_view(x), copy=False, nan=nan, posinf=posinf, neginf=neginf)
        x._bump_version()
        return x
    return wrap(np.nan_to_num(numpy_view(x), copy=True, nan=nan, posinf=posinf, neginf=neginf))


def _np_arg(a, views):
    """An argument for a NumPy function: ember arrays (also inside a tuple, as ``out=``
    may be) become zero-copy views, remembered in `views` (view id -> ember array) so that
    a view NumPy returns (its ``out``) maps back to the ember array."""
    if isinstance(a, ndarray):
        v = numpy_view(a)
        views[id(v)] = (v, a)
        return v
    if isinstance(a, tuple):
        return tuple(_np_arg(e, views) for e in a)
    return a


def _np_unary(npfunc, doc_name):
    def f(x, /, *args, **kwargs):
        xa = as_array(x)
        if dtype_kind(xa.dtype) in "biu" and npfunc in (np.sinc, np.i0, np.angle):
            xa = xa.astype(default_float_dtype())
        # ember arrays among the other arguments (a positional or keyword out=) must
        # reach NumPy as NumPy views: an ember array would dispatch back here forever
        views = {}
        args = tuple(_np_arg(a, views) for a in args)
        kwargs = {k: _np_arg(v, views) for k, v in kwargs.items()}
        res = npfunc(numpy_view(xa), *args, **kwargs)
        hit = views.get(id(res))
        if hit is not None and hit[0] is res:
            hit[1]._bump_version()
            return hit[1]               # NumPy wrote into out=: hand back the ember array
        return _result(res, None)
    f.__name__ = doc_name
    f.__doc__ = (f"ember.{doc_name}: NumPy's ``{doc_name}`` computed on ember memory.\n\n"
                 f"    >>> import ember\n    >>> ember.{doc_name}(ember.asarray([1.0])).shape\n    (1,)\n")
    return f


angle = _np_unary(np.angle, "angle")
sinc = _np_unary(np.sinc, "sinc")
fix = _np_unary(np.fix, "fix")
i0 = _np_unary(np.i0, "i0")
spacing = _np_unary(np.spacing, "spacing")
isreal = _np_unary(np.isreal, "isreal")
iscomplex = _np_unary(np.iscomplex, "iscomplex")
isposinf = _np_unary(np.isposinf, "isposinf")
isneginf = _np_unary(np.isneginf, "isneginf")


def _np_binary(npfunc, doc_name):
    def f(a, b, /):
        av = numpy_view(as_array(a)) if isinstance(a, ndarray) or not np.isscalar(a) else a
        bv = numpy_view(as_array(b)) if isinstance(b, ndarray) or not np.isscalar(b) else b
        try:
            res = npfunc(av, bv)
        except TypeError as e:          # NumPy's UFuncTypeError: name the op and dtypes
            raise TypeError(f"{doc_name}: not supported for dtypes "
                            f"{getattr(av, 'dtype', type(av).__name__)} and "
                            f"{getattr(bv, 'dtype', type(bv).__name__)} ({e})") from None
        if isinstance(res, tuple):
            return tuple(_result(r, None) for r in res)
        return _result(res, None)
    f.__name__ = doc_name
    f.__doc__ = (f"ember.{doc_name}: NumPy's ``{doc_name}`` computed on ember memory.\n\n"
                 f"    >>> import ember\n    >>> ember.{doc_name}(ember.asarray([4]), ember.asarray([6])).shape\n    (1,)\n")
    return f


float_power = _np_binary(np.float_power, "float_power")
divmod = _np_binary(np.divmod, "divmod")
divmod.__doc__ = """Floor quotient and remainder, as two arrays.

    >>> import ember
    >>> [a.tolist() for a in ember.divmod(ember.asarray([7]), ember.asarray([2]))]
    [[3], [1]]
    """
ldexp = _np_binary(np.ldexp, "ldexp")
gcd = _np_binary(np.gcd, "gcd")
lcm = _np_binary(np.lcm, "lcm")


def frexp(x, /):
    """Mantissa and exponent: ``x = m * 2**e``.

    >>> import ember
    >>> [a.tolist() for a in ember.frexp(ember.asarray([8.0]))]
    [[0.5], [4]]
    """
    m, e = np.frexp(numpy_view(as_array(x)))
    return _result(m, None), _result(e, None)


def modf(x, /):
    """Fractional and integral parts.

    >>> import ember
    >>> [a.tolist() for a in ember.modf(ember.asarray([2.5]))]
    [[0.5], [2.0]]
    """
    f, i = np.modf(numpy_view(as_array(x)))
    return _result(f, None), _result(i, None)
