"""Gradient rules of the elementwise ops (ember/autograd/rules/elementwise.py).

Every op with a rule is checked against central finite differences in float64
(gradcheck) and against PyTorch's gradient for the same values and the same
upstream gradient, over broadcasting, non-contiguous and negative-stride
inputs, 0-d and empty arrays, float32 and mixed float32/float64 operands.
A representative subset is checked to second order (gradgradcheck).
"""
from functools import partial

import numpy as np
import pytest

import ember
from ember._kernels.cpu import optable
from ember.autograd import gradcheck, gradgradcheck
import helpers
from helpers import leaf, tleaf

torch = pytest.importorskip("torch")

F64 = ember.float64
F32 = ember.float32


# ---------------------------------------------------------------- inputs

def sample(kind, shape, seed=0):
    """float64 NumPy values of `shape` inside the domain named by `kind`."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1.0, 1.0, size=shape)
    if kind == "any":           # (-2, 2)
        return 2.0 * u
    if kind == "nz":            # |x| in (0.3, 2)
        return np.where(u < 0, -1.0, 1.0) * (0.3 + 1.7 * np.abs(u))
    if kind == "pos":           # (0.3, 3)
        return 1.65 + 1.35 * u
    if kind == "unit":          # (-0.9, 0.9)
        return 0.9 * u
    if kind == "gt1":           # (1.2, 3)
        return 2.1 + 0.9 * u
    if kind == "tan":           # (-1.2, 1.2)
        return 1.2 * u
    if kind == "log1p":         # (-0.5, 2)
        return 0.75 + 1.25 * u
    if kind == "deg":           # (-90, 90)
        return 90.0 * u
    raise ValueError(kind)


def ember_grads(fn, xs, g):
    """Gradients of fn(*xs) with upstream g (zeros where an input is unused)."""
    out = fn(*xs)
    gs = ember.autograd.grad(out, list(xs), grad_outputs=ember.asarray(g, dtype=out.dtype),
                             allow_unused=True)
    return out, [ember.zeros(x.shape, dtype=x.dtype) if gi is None else gi
                 for x, gi in zip(xs, gs)]


def torch_grads(fn, values, g):
    ts = [tleaf(v) for v in values]
    out = fn(*ts)
    gs = torch.autograd.grad(out, ts, grad_outputs=torch.as_tensor(np.asarray(g)),
                             allow_unused=True)
    return out, [torch.zeros_like(t) if gi is None else gi for t, gi in zip(ts, gs)]


assert_close = partial(helpers.close, rtol=1e-7, atol=1e-10)


def check_against_torch(efn, tfn, values, seed=1, dtype=F64, rtol=1e-7, atol=1e-10):
    """Forward values and input gradients of efn and tfn agree; returns ember's grads."""
    xs = [leaf(v, dtype) for v in values]
    out_shape = np.broadcast_shapes(*[np.shape(v) for v in values])
    g = np.random.default_rng(seed).standard_normal(out_shape)
    eout, egs = ember_grads(efn, xs, g.astype(np.dtype(dtype)))
    tout, tgs = torch_grads(tfn, [np.asarray(x, dtype=np.float64) for x in xs],
                            g.astype(np.dtype(dtype)).astype(np.float64))
    assert_close(eout, tout, rtol=rtol, atol=atol)
    for x, eg, tg in zip(xs, egs, tgs):
        assert eg.shape == x.shape
        assert eg.dtype == x.dtype
        assert_close(eg, tg, rtol=rtol, atol=atol)
    return egs


def _tcbrt(t):
    return torch.sign(t) * t.abs() ** (1.0 / 3.0)


# name -> (torch function, input domain)
UNARY = {
    "negative": (torch.neg, "any"),
    "positive": (torch.positive, "any"),
    "absolute": (torch.abs, "nz"),
    "square": (torch.square, "any"),
    "reciprocal": (torch.reciprocal, "nz"),
    "sqrt": (torch.sqrt, "pos"),
    "cbrt": (_tcbrt, "nz"),
    "exp": (torch.exp, "any"),
    "exp2": (torch.exp2, "any"),
    "expm1": (torch.expm1, "any"),
    "log": (torch.log, "pos"),
    "log2": (torch.log2, "pos"),
    "log10": (torch.log10, "pos"),
    "log1p": (torch.log1p, "log1p"),
    "sin": (torch.sin, "any"),
    "cos": (torch.cos, "any"),
    "tan": (torch.tan, "tan"),
    "arcsin": (torch.asin, "unit"),
    "arccos": (torch.acos, "unit"),
    "arctan": (torch.atan, "any"),
    "sinh": (torch.sinh, "any"),
    "cosh": (torch.cosh, "any"),
    "tanh": (torch.tanh, "any"),
    "arcsinh": (torch.asinh, "any"),
    "arccosh": (torch.acosh, "gt1"),
    "arctanh": (torch.atanh, "unit"),
    "deg2rad": (torch.deg2rad, "deg"),
    "rad2deg": (torch.rad2deg, "any"),
}

# name -> (torch function, domain of a, domain of b)
BINARY = {
    "add": (torch.add, "any", "any"),
    "subtract": (torch.sub, "any", "any"),
    "multiply": (torch.mul, "any", "any"),
    "divide": (torch.div, "any", "nz"),
    "power": (torch.pow, "pos", "any"),
    "maximum": (torch.maximum, "any", "any"),
    "minimum": (torch.minimum, "any", "any"),
    "fmax": (torch.fmax, "any", "any"),
    "fmin": (torch.fmin, "any", "any"),
    "remainder": (torch.remainder, "pos", "pos"),
    "fmod": (torch.fmod, "nz", "pos"),
    "arctan2": (torch.atan2, "nz", "nz"),
    "hypot": (torch.hypot, "nz", "nz"),
    "copysign": (torch.copysign, "nz", "nz"),
    "logaddexp": (torch.logaddexp, "any", "any"),
    "logaddexp2": (torch.logaddexp2, "any", "any"),
}

# remainder/fmod jump where a/b crosses an integer: keep finite differences away from those
_JUMPY = {"remainder", "fmod"}


def binary_values(name, shape_a, shape_b, seed=0):
    _, da, db = BINARY[name]
    if name in _JUMPY:
        # a = +-(odd + 0.5), b in {1, 2, 4, -2}: a / b stays >= 0.125 away from an integer
        rng = np.random.default_rng(seed)
        a = rng.choice([1.5, 3.5, 5.5, -1.5, -3.5], size=shape_a)
        b = rng.choice([1.0, 2.0, 4.0, -2.0], size=shape_b)
        return a, b
    return sample(da, shape_a, seed), sample(db, shape_b, seed + 100)


def ufunc(name):
    return getattr(ember, name)


# ---------------------------------------------------------------- unary ops

@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradcheck(name):
    x = leaf(sample(UNARY[name][1], (2, 3)))
    assert gradcheck(ufunc(name), (x,))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_vs_torch(name):
    tfn, dom = UNARY[name]
    check_against_torch(ufunc(name), tfn, [sample(dom, (3, 4))])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_noncontiguous(name):
    f = ufunc(name)
    dom = UNARY[name][1]
    assert gradcheck(lambda t: f(t[::-1]), (leaf(sample(dom, (4,))),))
    assert gradcheck(lambda t: f(t.T), (leaf(sample(dom, (2, 3))),))
    assert gradcheck(lambda t: f(t[:, ::-2]), (leaf(sample(dom, (2, 4))),))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_0d(name):
    tfn, dom = UNARY[name]
    x = leaf(sample(dom, ()))
    assert gradcheck(ufunc(name), (x,))
    (g,) = check_against_torch(ufunc(name), tfn, [sample(dom, ())])
    assert g.shape == ()


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_empty(name):
    x = ember.zeros((0, 3), dtype=F64, requires_grad=True)
    y = ufunc(name)(x)
    assert y.requires_grad
    y.sum().backward()
    assert x.grad.shape == (0, 3) and x.grad.dtype == F64


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32(name):
    tfn, dom = UNARY[name]
    (g,) = check_against_torch(ufunc(name), tfn, [sample(dom, (3, 4))], dtype=F32,
                               rtol=2e-5, atol=1e-5)
    assert g.dtype == F32


# ---------------------------------------------------------------- binary ops

@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradcheck(name):
    a, b = binary_values(name, (2, 3), (2, 3))
    assert gradcheck(ufunc(name), (leaf(a), leaf(b)))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_vs_torch(name):
    check_against_torch(ufunc(name), BINARY[name][0], binary_values(name, (3, 4), (3, 4)))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 1), (4,)), ((4,), (3, 1)), ((2, 3), ()), ((), (3,)),
                                    ((2, 1, 3), (4, 1))])
def test_binary_broadcast(name, shapes):
    sa, sb = shapes
    a, b = binary_values(name, sa, sb)
    ga, gb = check_against_torch(ufunc(name), BINARY[name][0], [a, b])
    assert ga.shape == sa and gb.shape == sb
    assert gradcheck(ufunc(name), (leaf(a), leaf(b)))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_noncontiguous(name):
    f = ufunc(name)
    a, b = binary_values(name, (3, 2), (2, 3))
    # a.T is a transposed view, b[::-1] a negative-stride view, b[:, ::2] a strided one
    assert gradcheck(lambda s, t: f(s.T, t[::-1]), (leaf(a), leaf(b)))
    assert gradcheck(lambda s, t: f(s.T[:, ::2], t[::-1, ::-2]), (leaf(a), leaf(b)))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_0d(name):
    a, b = binary_values(name, (), ())
    assert gradcheck(ufunc(name), (leaf(a), leaf(b)))
    ga, gb = check_against_torch(ufunc(name), BINARY[name][0], [a, b])
    assert ga.shape == () and gb.shape == ()


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_empty(name):
    _, da, db = BINARY[name]
    a = ember.zeros((0, 3), dtype=F64, requires_grad=True)
    b = leaf(sample(db, (3,)))
    c = ember.zeros((0, 3), dtype=F64, requires_grad=True)
    y = ufunc(name)(a, b) + ufunc(name)(a, c)
    assert y.shape == (0, 3) and y.requires_grad
    y.sum().backward()
    assert a.grad.shape == (0, 3) and a.grad.dtype == F64
    assert (c.grad is None) if name == "copysign" else (c.grad.shape == (0, 3))
    if name == "copysign":                  # no gradient for the sign operand
        assert b.grad is None
    else:
        assert b.grad.shape == (3,)
        np.testing.assert_array_equal(np.asarray(b.grad), np.zeros(3))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float32(name):
    ga, gb = check_against_torch(ufunc(name), BINARY[name][0],
                                 list(binary_values(name, (3, 1), (4,))), dtype=F32,
                                 rtol=2e-5, atol=1e-5)
    assert ga.dtype == F32 and gb.dtype == F32


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtypes", [(F32, F64), (F64, F32)])
def test_binary_mixed_dtypes(name, dtypes):
    a, b = binary_values(name, (3, 1), (4,))
    a = a.astype(np.dtype(dtypes[0])).astype(np.float64)   # values exactly representable
    b = b.astype(np.dtype(dtypes[1])).astype(np.float64)
    x, y = leaf(a, dtypes[0]), leaf(b, dtypes[1])
    g = np.random.default_rng(3).standard_normal((3, 4))
    out, (gx, gy) = ember_grads(ufunc(name), (x, y), g)
    assert out.dtype == F64
    assert gx.dtype == dtypes[0] and gx.shape == (3, 1)
    assert gy.dtype == dtypes[1] and gy.shape == (4,)
    _, (tx, ty) = torch_grads(BINARY[name][0], [a, b], g)
    assert_close(gx, tx, rtol=2e-6, atol=1e-6)
    assert_close(gy, ty, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("scalar", [1.5, -0.75, 2])
def test_binary_python_scalar(name, scalar):
    """A Python scalar on either side gets no gradient; the array gets torch's."""
    tfn, da, db = BINARY[name]
    f = ufunc(name)
    if name in _JUMPY:
        scalar = abs(scalar)
    tscalar = torch.tensor(float(scalar), dtype=torch.float64)
    # array op scalar
    a = sample(da, (2, 3))
    if name in _JUMPY:                                  # a / scalar at k + 0.5
        a = (np.floor(a / scalar) + 0.5) * scalar
    check_against_torch(lambda t: f(t, scalar), lambda t: tfn(t, tscalar), [a])
    # float32 array with a Python scalar: weak scalar, float32 result and gradient
    x = leaf(a, F32)
    y = f(x, scalar)
    (gx,) = ember.autograd.grad(y.sum(), x)
    assert y.dtype == F32 and gx.dtype == F32
    # scalar op array
    if name == "power" and scalar < 0:
        return                                          # (negative) ** non-integer is nan
    b = sample(db, (2, 3))
    if name in _JUMPY:                                  # scalar / b at k + 0.5
        b = np.abs(b) + 0.2
        b = scalar / (np.floor(scalar / b) + 0.5)
    check_against_torch(lambda t: f(scalar, t), lambda t: tfn(tscalar, t), [b])


def test_binary_numpy_operand():
    """A NumPy array operand is a constant: the ember one still gets its gradient."""
    a = sample("pos", (2, 3))
    b = sample("any", (2, 3))
    for name in ("multiply", "divide", "power", "maximum", "arctan2", "hypot", "subtract"):
        tfn = BINARY[name][0]
        check_against_torch(lambda t: ufunc(name)(t, b), lambda t: tfn(t, torch.tensor(b)), [a])
        check_against_torch(lambda t: ufunc(name)(a, t), lambda t: tfn(torch.tensor(a), t), [b])


# ---------------------------------------------------------------- operators

OPERATORS = {
    "x + y": lambda x, y: x + y,
    "x - y": lambda x, y: x - y,
    "x * y": lambda x, y: x * y,
    "x / y": lambda x, y: x / y,
    "x ** y": lambda x, y: abs(x) ** y,
    "-x": lambda x, y: -x * y,
    "+x": lambda x, y: +x * y,
    "abs(x)": lambda x, y: abs(x) + abs(y),
    "2 - x": lambda x, y: 2 - x + (3.5 - y),
    "2 + x": lambda x, y: 2 + x + (y + 2),
    "2 * x": lambda x, y: 2 * x + y * 2.5,
    "2 ** x": lambda x, y: 2 ** x + 0.5 ** y,
    "1 / x": lambda x, y: 1 / x + 3 / y,
    "x / 2": lambda x, y: x / 2 - y / 0.25,
    "x - 2": lambda x, y: (x - 2) * (y - 1.5),
    "x ** 2": lambda x, y: x ** 2 + y ** 3,
    "x ** 0.5": lambda x, y: abs(x) ** 0.5 + abs(y) ** -1.5,
    "x ** -1": lambda x, y: x ** -1 + y ** -2,
    "x % 2": lambda x, y: (x % 1.7) * y,
    "chain": lambda x, y: (x * y - x / (y * y + 1)) ** 2 - abs(-x) * 3,
}


@pytest.mark.parametrize("expr", sorted(OPERATORS))
def test_operators(expr):
    f = OPERATORS[expr]
    a, b = sample("nz", (3, 1), 5), sample("nz", (4,), 6)
    if expr == "x % 2":
        a = (np.floor(a / 1.7) + 0.5) * 1.7
    ga, gb = check_against_torch(f, f, [a, b])
    assert ga.shape == (3, 1) and gb.shape == (4,)
    assert gradcheck(f, (leaf(a), leaf(b)))


# a Python scalar on the left: ndarray.__radd__, __rsub__, __rmul__, __rtruediv__, __rpow__
REFLECTED = {
    "2 + x": lambda x: 2 + x,
    "2 - x": lambda x: 2 - x,
    "-1.5 * x": lambda x: -1.5 * x,
    "1 / x": lambda x: 1 / x,
    "3 / x": lambda x: 3 / x,
    "2 ** x": lambda x: 2 ** x,
    "0.5 ** x": lambda x: 0.5 ** x,
}


@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("expr", sorted(REFLECTED))
def test_reflected_operators_record(expr, dtype):
    """Each reflected operator with a Python scalar, on its own: x is the node's only
    input (the scalar stays out of the graph), the weak scalar keeps x's dtype, and the
    value and gradient equal PyTorch's (and finite differences in float64)."""
    f = REFLECTED[expr]
    v = sample("nz", (3, 4), 7)
    x = leaf(v, dtype)
    y = f(x)
    assert y.requires_grad and y.grad_fn is not None and y.dtype == dtype
    ((node, nr),) = y.grad_fn.next_functions
    assert node.name == "AccumulateGrad" and node.variable is x and nr == 0
    tol = dict(rtol=1e-7, atol=1e-10) if dtype == F64 else dict(rtol=2e-6, atol=1e-6)
    (g,) = check_against_torch(f, f, [v], dtype=dtype, **tol)
    assert g.dtype == dtype
    if dtype == F64:
        assert gradcheck(f, (leaf(v),))


# ---------------------------------------------------------------- power edge cases

def test_power_zero_to_zero():
    # array ** array: d/da 0**0 = 0 (exponent 0), d/db 0**b = 0 for b >= 0, as in PyTorch
    a, b = [0.0, 0.0, 0.0, 2.0], [0.0, 2.0, 0.5, 0.0]
    _, (ea, eb) = ember_grads(ember.power, (leaf(a), leaf(b)), np.ones(4))
    _, (ta, tb) = torch_grads(torch.pow, [a, b], np.ones(4))
    assert_close(ea, ta)
    assert_close(eb, tb)
    np.testing.assert_array_equal(np.asarray(ea)[:2], [0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(eb)[:3], [0.0, 0.0, 0.0])


def test_power_zero_base_negative_exponent():
    # 0 ** -1 = inf; PyTorch: d/db = inf * log(0) = -inf; d/da = -1 * 0**-2 = -inf
    a, b = [0.0], [-1.0]
    _, (ea, eb) = ember_grads(ember.power, (leaf(a), leaf(b)), np.ones(1))
    _, (ta, tb) = torch_grads(torch.pow, [a, b], np.ones(1))
    assert_close(ea, ta)
    assert_close(eb, tb)


@pytest.mark.parametrize("exponent", [0, 0.0, 1, 2, 3])
def test_power_scalar_exponent_at_zero(exponent):
    x = leaf([0.0, 1.5, -2.0])
    (g,) = ember.autograd.grad((x ** exponent).sum(), x)
    t = tleaf([0.0, 1.5, -2.0])
    (tg,) = torch.autograd.grad((t ** exponent).sum(), t)
    assert_close(g, tg)


def test_power_negative_base_integer_exponent():
    # (-2) ** 3: d/da = 3 * 4 = 12; d/db = (-8) * log(-2) = nan (as PyTorch)
    a, b = [-2.0, -1.5], [3.0, 2.0]
    _, (ea, eb) = ember_grads(ember.power, (leaf(a), leaf(b)), np.ones(2))
    _, (ta, tb) = torch_grads(torch.pow, [a, b], np.ones(2))
    assert_close(ea, ta)
    np.testing.assert_allclose(np.asarray(ea), [12.0, -3.0])
    assert np.isnan(np.asarray(eb)).all() and torch.isnan(tb).all()
    # with a Python-int or integer-array exponent, only the base is differentiated
    x = leaf([-2.0, -1.5, 0.5])
    assert gradcheck(lambda t: t ** 3, (x,))
    assert gradcheck(lambda t: ember.power(t, ember.asarray([3, 2, -1])), (x,))
    (g,) = ember.autograd.grad((x ** 3).sum(), x)
    np.testing.assert_allclose(np.asarray(g), 3 * np.array([-2.0, -1.5, 0.5]) ** 2)


def test_power_scalar_base():
    b = sample("any", (2, 3))
    for base in (2.0, 0.5, 3):
        check_against_torch(lambda t: base ** t, lambda t: base ** t, [b])
        assert gradcheck(lambda t: base ** t, (leaf(b),))
    # 0 ** x for x >= 0: gradient 0 (as PyTorch)
    x = leaf([0.0, 1.0, 2.5])
    (g,) = ember.autograd.grad((0.0 ** x).sum(), x)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0, 0.0])


# ---------------------------------------------------------------- max / min: ties and NaN

@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_ties_split(name):
    # PyTorch: equal operands share the gradient equally
    a, b = [1.0, 2.0, 3.0], [1.0, 0.0, 5.0]
    _, (ea, eb) = ember_grads(ufunc(name), (leaf(a), leaf(b)), np.ones(3))
    _, (ta, tb) = torch_grads(BINARY[name][0], [a, b], np.ones(3))
    assert_close(ea, ta)
    assert_close(eb, tb)
    assert np.asarray(ea)[0] == 0.5 and np.asarray(eb)[0] == 0.5


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_ties_and_nan(name):
    # PyTorch: fmax/fmin give a tie to the first operand, and skip a NaN operand
    nan = float("nan")
    a = [1.0, 2.0, nan, 4.0, nan, -1.0]
    b = [1.0, 0.0, 3.0, nan, nan, 7.0]
    g = np.arange(1.0, 7.0)
    out, (ea, eb) = ember_grads(ufunc(name), (leaf(a), leaf(b)), g)
    tout, (ta, tb) = torch_grads(BINARY[name][0], [a, b], g)
    assert_close(out, tout)
    assert_close(ea, ta)
    assert_close(eb, tb)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_nan(name):
    """A NaN operand wins the result, so it gets the gradient (the other one gets 0).

    (PyTorch gives the full gradient to both operands there; ember does not
    double-count.)"""
    nan = float("nan")
    a = [nan, 2.0, nan, 1.0]
    b = [3.0, nan, nan, 0.0]
    g = np.array([1.0, 2.0, 3.0, 4.0])
    out, (ea, eb) = ember_grads(ufunc(name), (leaf(a), leaf(b)), g)
    assert np.isnan(np.asarray(out)[:3]).all()
    big = name == "maximum"
    np.testing.assert_array_equal(np.asarray(ea), [1.0, 0.0, 3.0, 4.0 if big else 0.0])
    np.testing.assert_array_equal(np.asarray(eb), [0.0, 2.0, 0.0, 0.0 if big else 4.0])
    # broadcasting with a NaN
    x, y = leaf([[nan], [1.0]]), leaf([0.0, 2.0, nan])
    _, (gx, gy) = ember_grads(ufunc(name), (x, y), np.ones((2, 3)))
    assert gx.shape == (2, 1) and gy.shape == (3,)
    np.testing.assert_array_equal(np.asarray(gx), [[3.0], [1.0]])
    np.testing.assert_array_equal(np.asarray(gy), [1.0 if not big else 0.0, 1.0 if big else 0.0,
                                                   1.0])


def test_maximum_with_scalar_relu():
    x = leaf([-1.0, 0.0, 2.0])
    (g,) = ember.autograd.grad(ember.maximum(x, 0.0).sum(), x)
    t = tleaf([-1.0, 0.0, 2.0])
    (tg,) = torch.autograd.grad(torch.clamp_min(t, 0.0).sum(), t)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.5, 1.0])   # tie at 0 is split
    assert tg[2] == 1 and tg[0] == 0


# ---------------------------------------------------------------- other special points

def test_absolute_at_zero():
    # PyTorch: d|x|/dx at 0 is 0
    x = leaf([-2.0, 0.0, -0.0, 3.0])
    (g,) = ember.autograd.grad(ember.absolute(x).sum(), x)
    np.testing.assert_array_equal(np.asarray(g), [-1.0, 0.0, 0.0, 1.0])
    (g2,) = ember.autograd.grad(abs(x).sum(), x)
    np.testing.assert_array_equal(np.asarray(g2), [-1.0, 0.0, 0.0, 1.0])
    (g3,) = ember.autograd.grad(ember.abs(x).sum(), x)
    np.testing.assert_array_equal(np.asarray(g3), [-1.0, 0.0, 0.0, 1.0])


def test_copysign_special():
    # gradient of copysign(a, b) w.r.t. a is sign(a) * sign(b), 0 at a == 0; none for b
    a, b = [0.0, 2.0, -3.0, 1.0, 0.0], [-1.0, -1.0, -2.0, -0.0, 5.0]
    _, (ea, eb) = ember_grads(ember.copysign, (leaf(a), leaf(b)), np.ones(5))
    _, (ta, tb) = torch_grads(torch.copysign, [a, b], np.ones(5))
    assert_close(ea, ta)
    assert_close(eb, tb)


def test_aliases_share_rules():
    x = leaf(sample("unit", (2, 3)))
    for alias, name in [("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"),
                        ("asinh", "arcsinh"), ("atanh", "arctanh"), ("abs", "absolute"),
                        ("fabs", "absolute")]:
        (g1,) = ember.autograd.grad(getattr(ember, alias)(x).sum(), x)
        (g2,) = ember.autograd.grad(ufunc(name)(x).sum(), x)
        np.testing.assert_array_equal(np.asarray(g1), np.asarray(g2))
    y = leaf(sample("nz", (2, 3), 1))
    for alias, name in [("atan2", "arctan2"), ("pow", "power"), ("true_divide", "divide")]:
        def xp():
            return ember.abs(x) + 0.5 if alias == "pow" else x
        g1 = ember.autograd.grad(getattr(ember, alias)(xp(), y).sum(), [x, y])
        g2 = ember.autograd.grad(ufunc(name)(xp(), y).sum(), [x, y])
        for u, v in zip(g1, g2):
            np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


# ---------------------------------------------------------------- second order

GRADGRAD_UNARY = {"exp": "any", "log": "pos", "tanh": "any", "sin": "any", "sqrt": "pos",
                  "reciprocal": "nz", "arctan": "any", "absolute": "nz"}
GRADGRAD_BINARY = ["multiply", "divide", "power", "maximum", "minimum", "hypot", "arctan2",
                   "logaddexp"]


@pytest.mark.parametrize("name", sorted(GRADGRAD_UNARY))
def test_unary_gradgradcheck(name):
    x = leaf(sample(GRADGRAD_UNARY[name], (2, 2)))
    assert gradgradcheck(ufunc(name), (x,))


@pytest.mark.parametrize("name", GRADGRAD_BINARY)
def test_binary_gradgradcheck(name):
    a, b = binary_values(name, (2, 1), (2,))
    assert gradgradcheck(ufunc(name), (leaf(a), leaf(b)))


def test_gradgrad_scalar_operands():
    x = leaf(sample("pos", (3,)))
    assert gradgradcheck(lambda t: t ** 3 + 2 ** t - 1 / t, (x,))
    assert gradgradcheck(lambda t: ember.power(t, 0.5) * ember.exp(-t), (x,))


def test_second_derivative_values_vs_torch():
    vals = sample("pos", (4,))
    x, t = leaf(vals), tleaf(vals)
    for ef, tf in [(lambda u: ember.tanh(u) * u ** 3, lambda u: torch.tanh(u) * u ** 3),
                   (lambda u: ember.log(u) / ember.sqrt(u), lambda u: torch.log(u) / torch.sqrt(u)),
                   (lambda u: u ** u, lambda u: u ** u)]:
        (g,) = ember.autograd.grad(ef(x).sum(), x, create_graph=True)
        (gg,) = ember.autograd.grad(g.sum(), x)
        (tg,) = torch.autograd.grad(tf(t).sum(), t, create_graph=True)
        (tgg,) = torch.autograd.grad(tg.sum(), t)
        assert_close(g, tg)
        assert_close(gg, tgg)


# ---------------------------------------------------------------- non-differentiable ops

def _nondiff_call(row):
    fn = getattr(ember, row.name)
    return (lambda x: fn(x)) if row.arity == 1 else (lambda x: fn(x, 0.7))


# every row of the op table with grad=False that takes floats (class "i", the bit
# operations, refuses them), and the operator spellings
NONDIFF = {row.name: _nondiff_call(row) for row in optable.OPS
           if not row.grad and row.cls != "i"}
NONDIFF.update({
    "//": lambda x: x // 2,
    "2 //": lambda x: 2 // x,
    "<": lambda x: x < 0.5,
    "!=": lambda x: x != 1.0,
    "equal(x, x)": lambda x: ember.equal(x, x),
})


@pytest.mark.parametrize("name", sorted(NONDIFF))
def test_nondifferentiable(name):
    x = leaf([-1.3, 0.2, 2.7])
    y = NONDIFF[name](x)
    assert not y.requires_grad
    assert y.grad_fn is None


def test_floor_divide_in_graph_is_a_constant():
    z = leaf([-1.3, 0.2, 2.7])
    (g,) = ember.autograd.grad((ember.floor_divide(z, 2.0) * z).sum(), z)
    np.testing.assert_array_equal(np.asarray(g), np.floor(np.array([-1.3, 0.2, 2.7]) / 2))


# piecewise-constant functions: differentiable with derivative 0 (PyTorch's and JAX's rule)
PIECEWISE = {
    "floor": (ember.floor, torch.floor), "ceil": (ember.ceil, torch.ceil),
    "trunc": (ember.trunc, torch.trunc), "rint": (ember.rint, torch.round),
    "fix": (ember.fix, torch.fix), "sign": (ember.sign, torch.sign),
    "round": (ember.round, torch.round),
    "round_decimals": (lambda x: ember.round(x, 1), lambda t: torch.round(t, decimals=1)),
    "around": (lambda x: ember.around(x, -1), lambda t: torch.round(t, decimals=-1)),
}


def test_every_differentiable_row_of_the_op_table_is_checked_here():
    """The op table's grad=True rows are exactly the ops this file checks against
    finite differences and PyTorch (UNARY, BINARY, or PIECEWISE's zero gradients)."""
    elsewhere = {"nextafter"}           # test_nextafter_gradient_is_pytorchs (no gradcheck)
    assert set(optable.names(grad=True)) == \
        (set(UNARY) | set(BINARY) | set(PIECEWISE) | elsewhere) & set(optable.names())


@pytest.mark.parametrize("name", sorted(PIECEWISE))
@pytest.mark.parametrize("shape", [(), (0,), (3, 4)])
def test_piecewise_constant_functions_have_zero_gradient(name, shape):
    efn, tfn = PIECEWISE[name]
    vals = np.random.default_rng(3).uniform(-3, 3, shape)
    x = ember.asarray(vals, requires_grad=True)
    t = torch.tensor(vals, requires_grad=True)
    y = efn(x)
    ty = tfn(t)
    assert y.requires_grad and ty.requires_grad
    np.testing.assert_array_equal(np.asarray(y.detach()), ty.detach().numpy())
    (g,) = ember.autograd.grad((y * x).sum(), x)           # d/dx (f(x) x) = f(x) + 0
    (tg,) = torch.autograd.grad((ty * t).sum(), t)
    np.testing.assert_array_equal(np.asarray(g), tg.numpy())
    x2 = ember.asarray(vals[..., ::-1] if vals.ndim else vals, requires_grad=True)
    (g2,) = ember.autograd.grad(efn(x2).sum(), x2)
    assert np.asarray(g2).shape == shape and not np.asarray(g2).any()


@pytest.mark.parametrize("name", ["floor", "sign", "round"])
def test_piecewise_constant_second_order_is_zero(name):
    efn, _ = PIECEWISE[name]
    x = leaf([-1.3, 0.2, 2.7])
    (g,) = ember.autograd.grad(efn(x).sum(), x, create_graph=True)
    assert not np.asarray(g.detach()).any()


def test_sign_of_complex_gradient_matches_torch_sgn():
    z = np.array([1 + 2j, -0.5 + 0.1j, 0j, 3 - 4j])
    w = np.array([0.3 - 1j, 2 + 0.5j, 1 + 1j, -1 + 0j])
    x = ember.asarray(z, requires_grad=True)
    t = torch.tensor(z, requires_grad=True)
    loss = ember.real(ember.sign(x) * ember.asarray(w)).sum()
    tloss = (torch.sgn(t) * torch.tensor(w)).real.sum()
    (g,) = ember.autograd.grad(loss, x)
    (tg,) = torch.autograd.grad(tloss, t)
    np.testing.assert_allclose(np.asarray(g), tg.numpy(), rtol=1e-12, atol=1e-12)


def test_nextafter_gradient_is_pytorchs():
    # PyTorch: nextafter(a, b) is a to within one ulp: d/da = 1 (0 where a == b), d/db = 0
    a, b = [-1.3, 0.0, 2.7, np.inf], [0.5, -1.0, 2.7, 0.0]
    x, y = leaf(a), leaf(b)
    t, u = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    gx, gy = ember.autograd.grad((ember.nextafter(x, y) * 3).sum(), (x, y))
    tx, ty = torch.autograd.grad((torch.nextafter(t, u) * 3).sum(), (t, u))
    np.testing.assert_array_equal(np.asarray(gx), tx.numpy())
    np.testing.assert_array_equal(np.asarray(gy), ty.numpy())


def test_integer_outputs_never_require_grad():
    x = leaf([1.5, 2.5])
    assert not ember.floor(x).astype(ember.int64).requires_grad
    i = ember.asarray([1, 2])
    assert not (i * 2).requires_grad


# ---------------------------------------------------------------- complex (PyTorch convention)

def _complex_pair(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(np.complex64)


def _complex_check(efn, tfn, values, g, rtol=1e-5, atol=1e-5):
    xs = [ember.asarray(v, requires_grad=True) for v in values]
    ts = [torch.tensor(v, requires_grad=True) for v in values]
    eout, tout = efn(*xs), tfn(*ts)
    assert_close(eout, tout, rtol=rtol, atol=atol)
    eg = ember.autograd.grad(eout, xs, grad_outputs=ember.asarray(g.astype(np.dtype(eout.dtype))))
    tg = torch.autograd.grad(tout, ts, grad_outputs=torch.tensor(g.astype(str(tout.dtype)[6:])))
    for x, e, t in zip(xs, eg, tg):
        assert e.dtype == x.dtype and e.shape == x.shape
        assert_close(e, t, rtol=rtol, atol=atol)


def test_complex_multiply():
    a, b = _complex_pair((3, 1), 0), _complex_pair((4,), 1)
    _complex_check(ember.multiply, torch.mul, [a, b], _complex_pair((3, 4), 2))


def test_complex_exp():
    _complex_check(ember.exp, torch.exp, [_complex_pair((2, 3), 3)], _complex_pair((2, 3), 4))


def test_complex_abs():
    z = _complex_pair((2, 3), 5)
    z[0, 0] = 0                                       # |z| at 0: gradient 0
    g = np.random.default_rng(6).standard_normal((2, 3)).astype(np.float32)
    _complex_check(ember.absolute, torch.abs, [z], g)
    _complex_check(lambda t: abs(t), lambda t: abs(t), [z], g)


@pytest.mark.parametrize("name,tname", [("square", "square"), ("reciprocal", "reciprocal"),
                                        ("sqrt", "sqrt"), ("log", "log"), ("sin", "sin"),
                                        ("tanh", "tanh"), ("exp2", "exp2")])
def test_complex_unary_vs_torch(name, tname):
    z = _complex_pair((2, 3), 7)
    _complex_check(ufunc(name), getattr(torch, tname), [z], _complex_pair((2, 3), 8),
                   rtol=1e-4, atol=1e-4)


def test_complex_divide_and_real_times_complex():
    a, b = _complex_pair((2, 3), 9), _complex_pair((2, 3), 10)
    _complex_check(ember.divide, torch.div, [a, b], _complex_pair((2, 3), 11), rtol=1e-4)
    # a real input multiplied by a complex one gets the real part of its gradient
    x = sample("any", (2, 3)).astype(np.float32)
    _complex_check(lambda t: ember.abs(t * ember.asarray(b)), lambda t: abs(t * torch.tensor(b)),
                   [x], np.ones((2, 3), np.float32))


# ---------------------------------------------------------------- engine: grad mode in backward

def test_backward_runs_rules_with_grad_mode_off():
    """Without create_graph, rules run with grad mode off for the whole backward pass,
    also after a leaf has had its gradient accumulated (else rules record graphs)."""
    a = leaf([1.0, 2.0, 3.0])
    b = leaf([0.5, 0.5, 0.5])
    seen = []
    y = ember.exp(a)
    y.register_hook(lambda g: seen.append(ember.is_grad_enabled()))
    (y * b + a).sum().backward()
    assert seen == [False]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 100, 16384, 16385])
def test_tanh_backward_small_loop_matches_torch(dt, n):
    """The tanh gradient's one-loop path (small contiguous host arrays) and the
    kernel path (larger) agree with PyTorch; strided and broadcast upstream
    gradients take the kernel path."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(n)
    xn = rng.standard_normal(n).astype(dt)
    gn = rng.standard_normal(n).astype(dt)
    x = ember.asarray(xn, requires_grad=True)
    ember.tanh(x).backward(ember.asarray(gn))
    tx = torch.tensor(xn, requires_grad=True)
    torch.tanh(tx).backward(torch.tensor(gn))
    tol = 1e-6 if dt == "float32" else 1e-14
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.numpy(), rtol=tol, atol=tol)
    x.grad = None
    ember.tanh(x[::-1]).sum().backward()                  # reversed input, broadcast gradient
    np.testing.assert_allclose(np.asarray(x.grad), 1 - np.tanh(xn) ** 2, rtol=tol * 10,
                               atol=tol * 10)
