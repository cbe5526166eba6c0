"""Gradient rules of the elementwise ops (ufuncs) and their Python-level relatives.

Every row of the op table (``ember/_kernels/cpu/optable.py``) with ``grad=True`` has its
rule here, under the row's name; the rows with ``grad=False`` (comparisons, bit
operations, ``floor_divide``...) are non-differentiable from the table itself.

For complex inputs the rules follow PyTorch's convention: the gradient of a
holomorphic f is ``grad * conj(f'(z))``.
"""
import ember as E
from ember.autograd.registry import defgrad
from ember._core.dtypes import dtype_kind


def _c(x):
    """conj(x) for complex arrays, x itself otherwise (and for Python scalars)."""
    if isinstance(x, E.ndarray) and dtype_kind(x.dtype) == "c":
        return E.conj(x)
    if isinstance(x, complex):
        return x.conjugate()
    return x


def _arr(x):
    """x as an ember array: an ember array itself (asarray would refuse a tracked one in
    a recorded backward), anything else (Python or NumPy scalar, NumPy array) converted."""
    return x if isinstance(x, E.ndarray) else E.asarray(x)


def _is_num(x):
    return isinstance(x, (int, float, complex))


@defgrad("add", save_args=False)
def _(g, res, a, b):
    return g, g


@defgrad("subtract", save_args=False)
def _(g, res, a, b):
    return g, -g


@defgrad("multiply", save_args="cross")
def _(g, res, a, b):
    # "cross": each operand is kept only when the other one needs it (x * 2 keeps nothing)
    return (g * _c(b) if getattr(a, "requires_grad", False) else None,
            g * _c(a) if getattr(b, "requires_grad", False) else None)


@defgrad("divide")
def _(g, res, a, b):
    gb = None
    if isinstance(b, E.ndarray) and b.requires_grad:
        gb = -g * _c(a / (b * b))
    return g / _c(b), gb


@defgrad("power")
def _(g, res, a, b):
    ga = gb = None
    if not _is_num(a):
        a = _arr(a)
    if not _is_num(b):
        b = _arr(b)
    if isinstance(a, E.ndarray) and a.requires_grad:
        # b * a**(b-1), with 0 where b == 0 (so 0**0 has gradient 0, as in PyTorch)
        d = b * a ** (b - 1)
        if isinstance(b, E.ndarray) or b == 0:
            d = E.where(_arr(b) == 0, 0.0, d)
        ga = g * _c(d)
    if isinstance(b, E.ndarray) and b.requires_grad:
        # a**b * log(a), with 0 where a == 0 and b >= 0 (as PyTorch; log's argument is
        # replaced there rather than the product masked, so double backward has no 0 * inf)
        if isinstance(a, E.ndarray):
            la = E.log(E.where((a == 0) & (b >= 0), 1.0, a))
        else:
            la = E.log(E.where(b >= 0, 1.0, 0.0)) if a == 0 else E.log(_arr(a))
        gb = g * _c(a ** b * la)
    return ga, gb


def _pick_grad(g, take_a):
    """g routed to a where take_a, else to b."""
    zero = E.zeros((), dtype=g.dtype)
    return E.where(take_a, g, zero), E.where(take_a, zero, g)


@defgrad("maximum")
def _(g, res, a, b):
    # ties share the gradient equally (PyTorch's rule for maximum/minimum)
    a_arr, b_arr = _arr(a), _arr(b)
    ga = g * E.where(a_arr > b_arr, 1.0, E.where(a_arr == b_arr, 0.5, 0.0)).astype(g.dtype)
    gb = g * E.where(b_arr > a_arr, 1.0, E.where(a_arr == b_arr, 0.5, 0.0)).astype(g.dtype)
    return _nan_route(g, ga, gb, a_arr, b_arr)


@defgrad("minimum")
def _(g, res, a, b):
    a_arr, b_arr = _arr(a), _arr(b)
    ga = g * E.where(a_arr < b_arr, 1.0, E.where(a_arr == b_arr, 0.5, 0.0)).astype(g.dtype)
    gb = g * E.where(b_arr < a_arr, 1.0, E.where(a_arr == b_arr, 0.5, 0.0)).astype(g.dtype)
    return _nan_route(g, ga, gb, a_arr, b_arr)


@defgrad("fmax")
def _(g, res, a, b):
    # PyTorch's rule: a tie goes to a; a NaN operand is skipped (gets nothing)
    a, b = _arr(a), _arr(b)
    return _pick_grad(g, (a >= b) | E.isnan(b))


@defgrad("fmin")
def _(g, res, a, b):
    a, b = _arr(a), _arr(b)
    return _pick_grad(g, (a <= b) | E.isnan(b))


def _nan_route(g, ga, gb, a, b):
    """A NaN operand of maximum/minimum becomes the result, so it takes the gradient (a
    first when both are NaN) and the other operand gets none."""
    if not (E.any(E.isnan(a)) or E.any(E.isnan(b))):
        return ga, gb
    an, bn = E.isnan(a), E.isnan(b)
    zero = E.zeros((), dtype=g.dtype)
    ga = E.where(an, g, E.where(bn, zero, ga))
    gb = E.where(an, zero, E.where(bn, g, gb))
    return ga, gb


@defgrad("remainder")
def _(g, res, a, b):
    # a - floor(a / b) * b, as PyTorch: d/da = 1, d/db = -floor(a / b)
    gb = None
    if isinstance(b, E.ndarray) and b.requires_grad:
        gb = -g * E.floor_divide(a, b)
    return g, gb


@defgrad("fmod")
def _(g, res, a, b):
    # a - trunc(a / b) * b: d/da = 1, d/db = -trunc(a / b)
    gb = None
    if isinstance(b, E.ndarray) and b.requires_grad:
        gb = -g * E.trunc(a / b)
    return g, gb


@defgrad("arctan2")
def _(g, res, a, b):
    d = a * a + b * b
    return g * b / d, -g * a / d


@defgrad("hypot", save_result=True)
def _(g, res, a, b):
    return g * a / res, g * b / res


@defgrad("floor", "ceil", "trunc", "rint", save_args=False)
def _(g, res, a):
    # piecewise constant: derivative 0 almost everywhere (PyTorch's and JAX's zeros)
    return (E.zeros_like(g),)


@defgrad("sign", save_result=True)
def _(g, res, a):
    if dtype_kind(a.dtype) != "c":
        return (E.zeros_like(g),)       # real sign: piecewise constant
    # complex sign z/|z| is not holomorphic: grad = (g - sgn^2 * conj(g)) / (2|z|), 0 at z = 0
    r = E.absolute(a)
    safe = E.where(r == 0, 1.0, r)
    return (E.where(r == 0, 0.0, (g - res * res * E.conj(g)) / (2 * safe)),)


@defgrad("nextafter")
def _(g, res, a, b):
    # PyTorch's rule: nextafter(a, b) is a to within one ulp, so d/da = 1 (0 where a == b,
    # where the result is b) and d/db = 0
    zero = E.zeros((), dtype=g.dtype)
    return E.where(_arr(a) == _arr(b), zero, g), E.zeros_like(g)


@defgrad("copysign")
def _(g, res, a, b):
    # d/da copysign(a, b) = sign(a) * sign-of-b (0 where a == 0)
    a_arr = _arr(a)
    s = E.where(a_arr == 0, 0.0, E.sign(a_arr) * E.copysign(1.0, _arr(b)))
    return g * s.astype(g.dtype), None


@defgrad("logaddexp", save_result=True)
def _(g, res, a, b):
    return g * E.exp(a - res), g * E.exp(b - res)


@defgrad("logaddexp2", save_result=True)
def _(g, res, a, b):
    return g * E.exp2(a - res), g * E.exp2(b - res)


@defgrad("negative", save_args=False)
def _(g, res, a):
    return (-g,)


@defgrad("positive", save_args=False)
def _(g, res, a):
    return (g,)


@defgrad("absolute")
def _(g, res, a):
    if dtype_kind(a.dtype) == "c":
        r = E.absolute(a)
        return (g * E.where(r == 0, 0.0, a / E.where(r == 0, 1.0, r)),)
    return (g * E.sign(a),)


@defgrad("square")
def _(g, res, a):
    return (g * 2 * _c(a),)


@defgrad("reciprocal", save_args=False, save_result=True)
def _(g, res, a):
    return (-g * _c(res * res),)


@defgrad("sqrt", save_args=False, save_result=True)
def _(g, res, a):
    return (g / _c(2 * res),)


@defgrad("cbrt", save_args=False, save_result=True)
def _(g, res, a):
    return (g / (3 * res * res),)


@defgrad("exp", save_args=False, save_result=True)
def _(g, res, a):
    return (g * _c(res),)


@defgrad("exp2", save_args=False, save_result=True)
def _(g, res, a):
    return (g * _c(res) * 0.6931471805599453,)


@defgrad("expm1", save_args=False, save_result=True)
def _(g, res, a):
    return (g * _c(res + 1),)


@defgrad("log")
def _(g, res, a):
    return (g / _c(a),)


@defgrad("log2")
def _(g, res, a):
    return (g / _c(a * 0.6931471805599453),)


@defgrad("log10")
def _(g, res, a):
    return (g / _c(a * 2.302585092994046),)


@defgrad("log1p")
def _(g, res, a):
    return (g / _c(a + 1),)


@defgrad("sin")
def _(g, res, a):
    return (g * _c(E.cos(a)),)


@defgrad("cos")
def _(g, res, a):
    return (-g * _c(E.sin(a)),)


@defgrad("tan", save_args=False, save_result=True)
def _(g, res, a):
    return (g * _c(1 + res * res),)


@defgrad("arcsin")
def _(g, res, a):
    return (g / _c(E.sqrt(1 - a * a)),)


@defgrad("arccos")
def _(g, res, a):
    return (-g / _c(E.sqrt(1 - a * a)),)


@defgrad("arctan")
def _(g, res, a):
    return (g / _c(1 + a * a),)


@defgrad("sinh")
def _(g, res, a):
    return (g * _c(E.cosh(a)),)


@defgrad("cosh")
def _(g, res, a):
    return (g * _c(E.sinh(a)),)


@defgrad("tanh", save_args=False, save_result=True)
def _(g, res, a):
    return (g * _c(1 - res * res),)


@defgrad("arcsinh")
def _(g, res, a):
    return (g / _c(E.sqrt(a * a + 1)),)


@defgrad("arccosh")
def _(g, res, a):
    return (g / _c(E.sqrt(a * a - 1)),)


@defgrad("arctanh")
def _(g, res, a):
    return (g / _c(1 - a * a),)


@defgrad("deg2rad", save_args=False)
def _(g, res, a):
    return (g * 0.017453292519943295,)


@defgrad("rad2deg", save_args=False)
def _(g, res, a):
    return (g * 57.29577951308232,)
