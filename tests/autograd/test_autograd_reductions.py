"""Gradient rules of the reductions (ember/autograd/rules/reductions.py).

Every rule is checked against central finite differences in float64
(gradcheck, with a non-contiguous view made inside the function) and, where
PyTorch has the function, against PyTorch's gradient for the same values and
upstream gradient: axis None / int / negative / tuple, keepdims, the
dim=/keepdim= aliases, transposed, step-sliced and negative-stride inputs,
0-d and empty arrays.  Zeros in prod/cumprod, ties in max/min and NaNs in the
nan-reductions get their own tests.  sum, prod, var, std, logsumexp, cumsum,
cumprod, quantile and diff are checked to second order (gradgradcheck).
"""
import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from helpers import leaf, tleaf
from helpers import uniform as values

torch = pytest.importorskip("torch")

F64 = ember.float64
F32 = ember.float32

# double backward through prod/cumprod at zeros and the nan-reductions uses ember.where
WHERE_DIFF = getattr(ember.where, "rule", None) is not None
needs_where_rule = pytest.mark.skipif(not WHERE_DIFF, reason="ember.where has no gradient rule")


# ---------------------------------------------------------------- helpers

def egrad(fn, x, g, *more):
    """Gradient of fn(x, *more) w.r.t. x (and the tracked arrays of `more`)."""
    out = fn(x, *more)
    ins = [x] + [m for m in more if isinstance(m, ember.ndarray) and m.requires_grad]
    gs = ember.autograd.grad(out, ins, grad_outputs=ember.asarray(g, dtype=out.dtype),
                             allow_unused=True)
    return out, [np.asarray(gi) if gi is not None else None for gi in gs]


def compare(efn, tfn, v, seed=1, rtol=1e-9, atol=1e-12, *, more=()):
    """ember's and torch's value and gradient of fn(x) for the same x and upstream g."""
    x = leaf(v)
    out = efn(x, *[leaf(m) for m in more])
    g = np.random.default_rng(seed).uniform(-1, 1, size=out.shape)
    emore = [leaf(m) for m in more]
    out, egs = egrad(efn, x, g, *emore)
    t = tleaf(v)
    tmore = [tleaf(m) for m in more]
    tout = tfn(t, *tmore)
    np.testing.assert_allclose(np.asarray(out), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    tgs = torch.autograd.grad(tout, [t] + tmore, torch.tensor(g), allow_unused=True)
    for eg, tg in zip(egs, tgs):
        tg = np.zeros_like(v) if tg is None else tg.numpy()
        assert eg is not None and eg.shape == tg.shape
        np.testing.assert_allclose(eg, tg, rtol=rtol, atol=atol)
    return egs


def tdims(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return axis if isinstance(axis, tuple) else (axis,)


def tprod(t, dims, keepdim):
    """torch.prod over several dims (torch takes one)."""
    if t.ndim == 0:
        return t.prod()
    dims = sorted(d % t.ndim for d in dims)
    keep = [d for d in range(t.ndim) if d not in dims]
    p = t.permute(*keep, *dims).reshape(*[t.shape[d] for d in keep], -1).prod(-1)
    if keepdim:
        p = p.reshape([1 if d in dims else t.shape[d] for d in range(t.ndim)])
    return p


# views that turn a C-contiguous leaf into a (2, 3, 4) non-contiguous array
VIEWS = {
    "contiguous": ((2, 3, 4), lambda t: t, lambda t: t),
    "transposed": ((4, 3, 2), lambda t: t.T, lambda t: t.permute(2, 1, 0)),
    "step": ((2, 3, 8), lambda t: t[..., ::2], lambda t: t[..., ::2]),
    "negative": ((2, 3, 4), lambda t: t[:, ::-1], lambda t: t.flip(1)),
}

AXES = [(None, False), (0, False), (1, True), (-1, False), ((0, 2), False), ((2, 0), True),
        (None, True)]


# name -> (ember f(x, axis, keepdims), torch f(t, dims, keepdim), value range)
OPS = {
    "sum": (lambda x, a, k: ember.sum(x, axis=a, keepdims=k),
            lambda t, d, k: torch.sum(t, dim=d, keepdim=k)),
    "mean": (lambda x, a, k: ember.mean(x, axis=a, keepdims=k),
             lambda t, d, k: torch.mean(t, dim=d, keepdim=k)),
    "prod": (lambda x, a, k: ember.prod(x, axis=a, keepdims=k), tprod),
    "var": (lambda x, a, k: ember.var(x, axis=a, keepdims=k),
            lambda t, d, k: torch.var(t, dim=d, keepdim=k, correction=0)),
    "var_ddof1": (lambda x, a, k: ember.var(x, axis=a, ddof=1, keepdims=k),
                  lambda t, d, k: torch.var(t, dim=d, keepdim=k, correction=1)),
    "var_correction": (lambda x, a, k: ember.var(x, axis=a, correction=1, keepdims=k),
                       lambda t, d, k: torch.var(t, dim=d, keepdim=k, correction=1)),
    "std": (lambda x, a, k: ember.std(x, axis=a, keepdims=k),
            lambda t, d, k: torch.std(t, dim=d, keepdim=k, correction=0)),
    "std_correction": (lambda x, a, k: ember.std(x, axis=a, correction=1, keepdims=k),
                       lambda t, d, k: torch.std(t, dim=d, keepdim=k, correction=1)),
    "max": (lambda x, a, k: ember.max(x, axis=a, keepdims=k),
            lambda t, d, k: torch.amax(t, dim=d, keepdim=k)),
    "amin": (lambda x, a, k: ember.amin(x, axis=a, keepdims=k),
             lambda t, d, k: torch.amin(t, dim=d, keepdim=k)),
    "logsumexp": (lambda x, a, k: ember.logsumexp(x, axis=a, keepdims=k),
                  lambda t, d, k: torch.logsumexp(t, dim=d, keepdim=k)),
    "nansum": (lambda x, a, k: ember.nansum(x, axis=a, keepdims=k),
               lambda t, d, k: torch.nansum(t, dim=d, keepdim=k)),
    "nanmean": (lambda x, a, k: ember.nanmean(x, axis=a, keepdims=k),
                lambda t, d, k: torch.nanmean(t, dim=d, keepdim=k)),
    "ptp": (lambda x, a, k: ember.ptp(x, axis=a, keepdims=k),
            lambda t, d, k: torch.amax(t, dim=d, keepdim=k) - torch.amin(t, dim=d, keepdim=k)),
    "average": (lambda x, a, k: ember.average(x, axis=a, keepdims=k),
                lambda t, d, k: torch.mean(t, dim=d, keepdim=k)),
}


# ---------------------------------------------------------------- against torch

@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("name", list(OPS))
def test_reduction_vs_torch(name, view):
    efn, tfn = OPS[name]
    shape, ev, tv = VIEWS[view]
    v = values(shape, seed=3)
    if name == "prod":
        v = np.sign(v) * (0.5 + np.abs(v) / 2)       # no zeros here (see test_prod_zeros)
    for axis, kd in AXES:
        compare(lambda x: efn(ev(x), axis, kd),
                lambda t: tfn(tv(t), tdims(axis, 3), kd), v)


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std", "max", "amin",
                                  "logsumexp", "nansum", "nanmean"])
def test_reduction_dim_keepdim_aliases(name):
    efn, tfn = OPS[name]
    f = getattr(ember, name.split("_")[0])
    if name == "max":       # dim= selects PyTorch's max: the named tuple (values, indices)
        f = (lambda g: lambda *a, **k: g(*a, **k).values)(f)
    # dim= selects PyTorch's var/std, whose default is correction=1: OPS compares correction=0
    kw = {"correction": 0} if name in ("var", "std") else {}
    v = values((3, 4), seed=5)
    compare(lambda x: f(x, dim=1, keepdim=True, **kw), lambda t: tfn(t, (1,), True), v)
    compare(lambda x: f(x, dim=0, **kw), lambda t: tfn(t, (0,), False), v)
    if kw:
        compare(lambda x: f(x, 1, None, None, 0, True), lambda t: tfn(t, (1,), True), v)


@pytest.mark.parametrize("method,targs", [
    ("sum", dict(dim=1, keepdim=True)), ("prod", dict(dim=0)), ("mean", dict()),
    ("var", dict(dim=1, correction=1)), ("std", dict(correction=1)), ("max", dict(dim=1)),
    ("min", dict(dim=0)), ("cumsum", dict(dim=1)), ("cumprod", dict(dim=0))])
def test_array_methods(method, targs):
    v = values((3, 4), seed=6)
    tfn = lambda t, **k: getattr(torch, method)(t, **k)       # noqa: E731
    if method in ("max", "min"):    # with dim=: PyTorch's (values, indices), in both
        compare(lambda x: getattr(x, method)(**targs).values,
                lambda t: tfn(t, **targs).values, v)
        return
    compare(lambda x: getattr(x, method)(**targs), lambda t: tfn(t, **targs), v)


def test_scalar_and_empty_inputs():
    for name in ["sum", "mean", "prod", "var", "std", "max", "amin", "logsumexp"]:
        efn, tfn = OPS[name]
        compare(lambda x: efn(x, None, False), lambda t: tfn(t, (), False), np.array(1.5))
    # empty arrays: gradient of the right (empty) shape, or zeros for a reduced empty axis
    for shape, axis in [((0, 3), 0), ((2, 0), 1), ((0, 3), None), ((0,), None)]:
        for f in (ember.sum, ember.prod, ember.logsumexp, ember.nansum):
            x = leaf(np.zeros(shape))
            out = f(x, axis=axis)
            (gx,) = ember.autograd.grad(out, [x], grad_outputs=ember.ones(out.shape, dtype=F64))
            assert gx.shape == shape and gx.dtype == F64
            np.testing.assert_array_equal(np.asarray(gx), np.zeros(shape))
    x = leaf(np.zeros((0, 3)))
    for f in (ember.cumsum, ember.cumprod):
        out = f(x, axis=0)
        (gx,) = ember.autograd.grad(out, [x], grad_outputs=ember.ones(out.shape, dtype=F64))
        assert gx.shape == (0, 3)


# ---------------------------------------------------------------- finite differences

GC_OPS = {
    "sum": lambda t, a, k: ember.sum(t, axis=a, keepdims=k),
    "mean": lambda t, a, k: ember.mean(t, axis=a, keepdims=k),
    "prod": lambda t, a, k: ember.prod(t, axis=a, keepdims=k),
    "var": lambda t, a, k: ember.var(t, axis=a, ddof=1, keepdims=k),
    "std": lambda t, a, k: ember.std(t, axis=a, correction=1, keepdims=k),
    "max": lambda t, a, k: ember.max(t, axis=a, keepdims=k),
    "min": lambda t, a, k: ember.min(t, axis=a, keepdims=k),
    "amax": lambda t, a, k: ember.amax(t, axis=a, keepdims=k),
    "amin": lambda t, a, k: ember.amin(t, axis=a, keepdims=k),
    "logsumexp": lambda t, a, k: ember.logsumexp(t, axis=a, keepdims=k),
    "nansum": lambda t, a, k: ember.nansum(t, axis=a, keepdims=k),
    "nanmean": lambda t, a, k: ember.nanmean(t, axis=a, keepdims=k),
    "nanvar": lambda t, a, k: ember.nanvar(t, axis=a, ddof=1, keepdims=k),
    "nanstd": lambda t, a, k: ember.nanstd(t, axis=a, keepdims=k),
    "nanmax": lambda t, a, k: ember.nanmax(t, axis=a, keepdims=k),
    "nanmin": lambda t, a, k: ember.nanmin(t, axis=a, keepdims=k),
    "nanprod": lambda t, a, k: ember.nanprod(t, axis=a, keepdims=k),
    "ptp": lambda t, a, k: ember.ptp(t, axis=a, keepdims=k),
    "average": lambda t, a, k: ember.average(t, axis=a, keepdims=k),
    "median": lambda t, a, k: ember.median(t, axis=a, keepdims=k),
    "nanmedian": lambda t, a, k: ember.nanmedian(t, axis=a, keepdims=k),
    "quantile": lambda t, a, k: ember.quantile(t, ember.asarray([0.2, 0.5, 0.9], dtype=F64),
                                               axis=a, keepdims=k),
    "percentile": lambda t, a, k: ember.percentile(t, 35.0, axis=a, keepdims=k),
    "nanquantile": lambda t, a, k: ember.nanquantile(t, 0.3, axis=a, keepdims=k),
    "nanpercentile": lambda t, a, k: ember.nanpercentile(t, [10.0, 75.0], axis=a, keepdims=k),
}

GC_AXES = [(None, False), (1, True), (-1, False), ((0, 2), False)]


@pytest.mark.parametrize("name", list(GC_OPS))
def test_gradcheck(name):
    f = GC_OPS[name]
    x = leaf(values((4, 3, 2), seed=7))         # viewed transposed: (2, 3, 4)
    for axis, kd in GC_AXES:
        assert gradcheck(lambda t: f(t.T, axis, kd), (x,))
    y = leaf(values((2, 6), seed=8))            # viewed reversed and step-sliced: (2, 3)
    assert gradcheck(lambda t: f(t[::-1, ::2], 1, False), (y,))


NAN_OPS = ["nansum", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "nanprod",
           "nanmedian", "nanquantile", "nanpercentile"]


@pytest.mark.parametrize("name", NAN_OPS)
def test_nan_reductions_with_nans(name):
    f = GC_OPS[name]
    v = values((3, 4), seed=9)
    v[0, 1] = v[2, 0] = v[2, 3] = np.nan
    x = leaf(v)
    for axis in (None, 0, 1):
        assert gradcheck(lambda t: f(t, axis, False), (x,))
        out = f(x, axis, False)
        (gx,) = ember.autograd.grad(out, [x], grad_outputs=ember.ones(out.shape, dtype=F64))
        gx = np.asarray(gx)
        assert np.all(gx[np.isnan(v)] == 0) and np.all(np.isfinite(gx))


@pytest.mark.filterwarnings("ignore:Degrees of freedom")
def test_nan_reductions_vs_torch_with_nans():
    v = values((3, 4), seed=10)
    v[0, 1] = v[2, 0] = v[1, 1] = np.nan
    for axis in (None, 0, 1):
        d = tdims(axis, 2)
        compare(lambda x: ember.nansum(x, axis=axis), lambda t: torch.nansum(t, dim=d), v)
        compare(lambda x: ember.nanmean(x, axis=axis), lambda t: torch.nanmean(t, dim=d), v)

        def tnanvar(t, ddof):
            ok = ~torch.isnan(t)
            z = torch.where(ok, t, 0.0)
            cnt = ok.sum(dim=d, keepdim=True)
            m = z.sum(dim=d, keepdim=True) / cnt
            return (torch.where(ok, t - m, 0.0) ** 2).sum(dim=d) / (ok.sum(dim=d) - ddof)

        compare(lambda x: ember.nanvar(x, axis=axis, ddof=1), lambda t: tnanvar(t, 1), v)
        if axis != 0:       # column 1 holds one number: std 0, whose gradient ember sets to 0
            compare(lambda x: ember.nanstd(x, axis=axis), lambda t: tnanvar(t, 0).sqrt(), v)
        compare(lambda x: ember.nanquantile(x, 0.4, axis=axis),
                lambda t: torch.nanquantile(t, 0.4, dim=None if axis is None else axis), v)
        compare(lambda x: ember.nanmedian(x, axis=axis),
                lambda t: torch.nanquantile(t, 0.5, dim=None if axis is None else axis), v)


# ---------------------------------------------------------------- prod / cumprod with zeros

ZERO_CASES = {
    "one_zero_per_row": [[1.5, 0.0, -2.0, 0.5], [0.0, 3.0, 1.2, -0.7], [2.0, -1.0, 0.8, 1.1]],
    "two_zeros_in_a_row": [[1.5, 0.0, -2.0, 0.0], [0.7, 3.0, 1.2, -0.7], [0.0, 0.0, 0.0, 1.1]],
    "mixed": [[0.0, 2.0, 0.0, 1.3], [0.0, -1.5, 2.5, 0.9], [1.1, 0.6, -0.4, 2.0]],
}


@pytest.mark.parametrize("case", list(ZERO_CASES))
def test_prod_zeros_vs_torch(case):
    v = np.array(ZERO_CASES[case])
    compare(lambda x: ember.prod(x), lambda t: torch.prod(t), v)
    for axis in (0, 1, -1):
        compare(lambda x: ember.prod(x, axis=axis), lambda t: torch.prod(t, dim=axis), v)
        compare(lambda x: ember.prod(x, axis=axis, keepdims=True),
                lambda t: torch.prod(t, dim=axis, keepdim=True), v)
    compare(lambda x: ember.prod(x.T, axis=0), lambda t: torch.prod(t.T, dim=0), v)
    v3 = np.stack([v, v[::-1] + 0.25])          # (2, 3, 4): tuple axes
    compare(lambda x: ember.prod(x, axis=(0, 2)), lambda t: tprod(t, (0, 2), False), v3)
    compare(lambda x: ember.prod(x, axis=(1, 2), keepdims=True),
            lambda t: tprod(t, (1, 2), True), v3)
    assert gradcheck(lambda t: ember.prod(t, axis=1), (leaf(v),))
    assert gradcheck(lambda t: ember.prod(t, axis=(0, 2)), (leaf(v3),))


def test_prod_exact_gradient_values_at_zeros():
    x = leaf([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [4.0, 5.0, 6.0]])
    ember.prod(x, axis=1).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad),
                                  [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [30.0, 24.0, 20.0]])


@pytest.mark.parametrize("case", list(ZERO_CASES))
def test_cumprod_zeros_vs_torch(case):
    v = np.array(ZERO_CASES[case])
    for axis in (0, 1, -1):
        compare(lambda x: ember.cumprod(x, axis=axis), lambda t: torch.cumprod(t, dim=axis), v)
        compare(lambda x: ember.cumulative_prod(x, axis=axis),
                lambda t: torch.cumprod(t, dim=axis), v)
    compare(lambda x: ember.cumprod(x), lambda t: torch.cumprod(t.reshape(-1), 0), v)
    compare(lambda x: ember.cumprod(x[:, ::-1], axis=1),
            lambda t: torch.cumprod(t.flip(1), dim=1), v)
    assert gradcheck(lambda t: ember.cumprod(t, axis=1), (leaf(v),))
    assert gradcheck(lambda t: ember.cumprod(t.T, axis=1), (leaf(v),))


@needs_where_rule
@pytest.mark.parametrize("case", list(ZERO_CASES))
def test_prod_cumprod_second_order_at_zeros(case):
    v = np.array(ZERO_CASES[case])
    x = leaf(v)
    assert gradgradcheck(lambda t: ember.prod(t, axis=1), (x,))
    assert gradgradcheck(lambda t: ember.prod(t), (x,))
    assert gradgradcheck(lambda t: ember.cumprod(t, axis=1), (x,))
    assert gradgradcheck(lambda t: ember.cumprod(t, axis=0), (x,))
    # against torch: the gradient of <grad, w> (a Hessian-vector product)
    rng = np.random.default_rng(4)
    for efn, tfn in [(lambda a: ember.prod(a, axis=1), lambda a: torch.prod(a, dim=1)),
                     (lambda a: ember.cumprod(a, axis=1), lambda a: torch.cumprod(a, dim=1))]:
        x = leaf(v)
        out = efn(x)
        g = rng.uniform(-1, 1, size=out.shape)
        w = rng.uniform(-1, 1, size=v.shape)
        (gx,) = ember.autograd.grad(out, [x], grad_outputs=ember.asarray(g), create_graph=True)
        (hx,) = ember.autograd.grad((gx * ember.asarray(w)).sum(), [x])
        t = tleaf(v)
        (tg,) = torch.autograd.grad(tfn(t), [t], torch.tensor(g), create_graph=True)
        (th,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), [t])
        np.testing.assert_allclose(np.asarray(gx), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.asarray(hx), th.numpy(), rtol=1e-10, atol=1e-12)


def test_nanprod_with_zeros():
    v = np.array([[1.5, 0.0, np.nan, 2.0], [0.0, np.nan, 0.0, 1.0], [1.0, 2.0, 3.0, np.nan]])
    x = leaf(v)
    ember.nanprod(x, axis=1).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad),
                               [[0.0, 3.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [6.0, 3.0, 2.0, 0.0]])


# ---------------------------------------------------------------- ties, NaN, where=

def test_max_min_ties_split_evenly_vs_torch():
    v = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, 2.0, 2.0], [-1.0, -4.0, 0.0, -4.0]])
    for axis in (None, 0, 1, (0, 1)):
        d = tdims(axis, 2)
        for ef, tf in [(ember.max, torch.amax), (ember.amax, torch.amax),
                       (ember.min, torch.amin), (ember.amin, torch.amin)]:
            compare(lambda x: ef(x, axis=axis), lambda t: tf(t, dim=d), v)
            compare(lambda x: ef(x.T, axis=axis, keepdims=True),
                    lambda t: tf(t.T, dim=d, keepdim=True), v)
    x = leaf(v)
    ember.max(x, axis=1).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), [[0, .5, .5, 0], [.25] * 4, [0, 0, 1, 0]])


def test_max_nan_takes_the_gradient():
    x = leaf([[1.0, np.nan, 3.0], [np.nan, np.nan, 0.0], [1.0, 2.0, 2.0]])
    out = ember.max(x, axis=1)
    out.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), [[0, 1, 0], [.5, .5, 0], [0, .5, .5]])
    y = leaf([[1.0, np.nan, 3.0]])
    ember.nanmax(y).backward()
    np.testing.assert_allclose(np.asarray(y.grad), [[0, 0, 1]])


def test_max_where_initial_and_sum_where():
    v = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 4.0]])
    mask = ember.asarray([[True, False, True], [True, True, True]])
    x = leaf(v)
    ember.max(x, axis=1, where=mask, initial=-10.0).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), [[0, 0, 1], [.5, 0, .5]])
    x = leaf(v)
    ember.max(x, axis=1, initial=4.5).sum().backward()    # row 2: the initial value wins
    np.testing.assert_allclose(np.asarray(x.grad), [[0, 1, 0], [0, 0, 0]])
    x = leaf(v)
    ember.sum(x, axis=0, where=mask).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.asarray(mask, dtype=np.float64))
    assert gradcheck(lambda t: ember.sum(t, axis=1, where=mask, initial=1.0), (leaf(v),))


# ---------------------------------------------------------------- var / std / logsumexp specifics

def test_std_of_constant_slice_has_zero_gradient():
    v = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])
    egs = compare(lambda x: ember.std(x, axis=1), lambda t: torch.std(t, dim=1, correction=0), v)
    assert np.all(egs[0][0] == 0)
    compare(lambda x: ember.nanstd(x, axis=1), lambda t: torch.std(t, dim=1, correction=0), v)


def test_var_std_ddof_and_dtype_argument():
    v = values((3, 5), seed=11)
    for ddof in (0, 1, 2):
        compare(lambda x: ember.var(x, axis=1, ddof=ddof),
                lambda t: torch.var(t, dim=1, correction=ddof), v)
        compare(lambda x: ember.std(x, axis=0, ddof=ddof, keepdims=True),
                lambda t: torch.std(t, dim=0, correction=ddof, keepdim=True), v)
    x = leaf(v, F32)
    ember.var(x, axis=1, dtype=ember.float64).sum().backward()
    assert x.grad.dtype == F32


def test_logsumexp_stable():
    v = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -np.inf], [0.0, 1.0, 2.0]])
    egs = compare(lambda x: ember.logsumexp(x, axis=1), lambda t: torch.logsumexp(t, dim=1), v)
    assert np.all(np.isfinite(egs[0]))
    x = leaf(v)
    ember.logsumexp(x, axis=1).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad).sum(axis=1), 1.0)
    compare(lambda x: ember.logsumexp(x, axis=(0, 1), keepdims=True),
            lambda t: torch.logsumexp(t, dim=(0, 1), keepdim=True), v[::2])


# ---------------------------------------------------------------- cumulative

@pytest.mark.parametrize("view", list(VIEWS))
def test_cumsum_cumprod_vs_torch(view):
    shape, ev, tv = VIEWS[view]
    v = values(shape, seed=12, low=0.5, high=1.5) * np.sign(values(shape, seed=13))
    for axis in (0, 1, -1, 2):
        compare(lambda x: ember.cumsum(ev(x), axis=axis), lambda t: torch.cumsum(tv(t), dim=axis), v)
        compare(lambda x: ember.cumprod(ev(x), axis=axis),
                lambda t: torch.cumprod(tv(t), dim=axis), v)
    compare(lambda x: ember.cumsum(ev(x)), lambda t: torch.cumsum(tv(t).reshape(-1), 0), v)
    compare(lambda x: ember.cumprod(ev(x)), lambda t: torch.cumprod(tv(t).reshape(-1), 0), v)
    compare(lambda x: ember.cumsum(ev(x), dim=1), lambda t: torch.cumsum(tv(t), dim=1), v)


def test_cumulative_include_initial():
    v = values((3, 4), seed=14)
    for axis in (0, 1):
        pad = [(0, 0), (0, 0)]
        pad[axis] = (1, 0)
        compare(lambda x: ember.cumulative_sum(x, axis=axis, include_initial=True),
                lambda t: torch.nn.functional.pad(torch.cumsum(t, dim=axis),
                                                  (1, 0) if axis == 1 else (0, 0, 1, 0)), v)
        compare(lambda x: ember.cumulative_prod(x, axis=axis, include_initial=True),
                lambda t: torch.nn.functional.pad(torch.cumprod(t, dim=axis),
                                                  (1, 0) if axis == 1 else (0, 0, 1, 0), value=1.0),
                v)
    w = values((5,), seed=15)
    compare(lambda x: ember.cumulative_sum(x), lambda t: torch.cumsum(t, 0), w)
    compare(lambda x: ember.cumulative_prod(x, include_initial=True),
            lambda t: torch.nn.functional.pad(torch.cumprod(t, 0), (1, 0), value=1.0), w)
    x = leaf(values((2, 3), seed=16))
    for f in (ember.cumulative_sum, ember.cumulative_prod):
        assert gradcheck(lambda t: f(t.T, axis=1, include_initial=True), (x,))
        assert gradcheck(lambda t: f(t, axis=0), (x,))
    for f in (ember.cumsum, ember.cumprod):
        assert gradcheck(lambda t: f(t.T), (x,))
        assert gradcheck(lambda t: f(t[:, ::-1], axis=-1), (x,))


# ---------------------------------------------------------------- quantile family

def test_quantile_median_vs_torch():
    v = values((3, 5), seed=17)
    for axis in (None, 0, 1, -1):
        for kd in (False, True):
            compare(lambda x: ember.quantile(x, 0.3, axis=axis, keepdims=kd),
                    lambda t: torch.quantile(t, 0.3, dim=axis, keepdim=kd), v)
            q = [0.0, 0.25, 0.5, 1.0]
            compare(lambda x: ember.quantile(x.T, ember.asarray(q, dtype=F64), axis=axis,
                                             keepdims=kd),
                    lambda t: torch.quantile(t.T, torch.tensor(q, dtype=torch.float64),
                                             dim=axis, keepdim=kd), v)
            compare(lambda x: ember.median(x, axis=axis, keepdims=kd),
                    lambda t: torch.quantile(t, 0.5, dim=axis, keepdim=kd), v)
    for method in ("lower", "higher", "nearest", "midpoint"):
        compare(lambda x: ember.quantile(x, [0.1, 0.4, 0.75], axis=1, method=method),
                lambda t: torch.quantile(t, torch.tensor([0.1, 0.4, 0.75], dtype=torch.float64),
                                         dim=1, interpolation=method), v)
        compare(lambda x: ember.percentile(x, [10.0, 40.0], axis=0, method=method),
                lambda t: torch.quantile(t, torch.tensor([0.1, 0.4], dtype=torch.float64),
                                         dim=0, interpolation=method), v)
    x = leaf(v)
    with pytest.raises(NotImplementedError, match="weibull"):
        ember.quantile(x, 0.5, axis=1, method="weibull").sum().backward()


def test_median_ties_pick_one_element():
    x = leaf([[1.0, 2.0, 2.0, 2.0, 5.0]])
    ember.median(x, axis=1).sum().backward()
    gx = np.asarray(x.grad)
    assert gx.sum() == 1.0 and np.count_nonzero(gx) == 1 and gx[0, 1:4].sum() == 1.0


# ---------------------------------------------------------------- complex

def test_complex_vs_torch():
    rng = np.random.default_rng(30)
    v = rng.uniform(-1, 1, (3, 4)) + 1j * rng.uniform(-1, 1, (3, 4))
    vz = v.copy()
    vz[0, 1] = vz[2, 0] = vz[2, 3] = 0
    cases = [
        (lambda x: ember.sum(x, axis=1), lambda t: torch.sum(t, dim=1), v),
        (lambda x: ember.mean(x.T, axis=0), lambda t: torch.mean(t.T, dim=0), v),
        (lambda x: ember.prod(x, axis=1), lambda t: torch.prod(t, dim=1), v),
        (lambda x: ember.prod(x, axis=1), lambda t: torch.prod(t, dim=1), vz),
        (lambda x: ember.prod(x), lambda t: torch.prod(t), vz),
        (lambda x: ember.cumprod(x, axis=1), lambda t: torch.cumprod(t, dim=1), v),
        (lambda x: ember.cumprod(x, axis=1), lambda t: torch.cumprod(t, dim=1), vz),
        (lambda x: ember.cumsum(x, axis=0), lambda t: torch.cumsum(t, dim=0), v),
        (lambda x: ember.var(x, axis=1, ddof=1), lambda t: torch.var(t, dim=1), v),
        (lambda x: ember.std(x, axis=0), lambda t: torch.std(t, dim=0, correction=0), v),
        (lambda x: ember.logsumexp(x, axis=1), lambda t: torch.logsumexp(t, dim=1), v),
    ]
    for efn, tfn, vals in cases:
        x = ember.asarray(vals.astype(np.complex128), requires_grad=True)
        out = efn(x)
        g = rng.uniform(-1, 1, out.shape)
        if out.dtype.kind == "c":
            g = g + 1j * rng.uniform(-1, 1, out.shape)
        (gx,) = ember.autograd.grad(out, [x], grad_outputs=ember.asarray(g, dtype=out.dtype))
        t = torch.tensor(vals.astype(np.complex128), requires_grad=True)
        tout = tfn(t)
        np.testing.assert_allclose(np.asarray(out), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
        (tg,) = torch.autograd.grad(tout, [t], torch.tensor(g))
        assert gx.dtype == ember.complex128
        np.testing.assert_allclose(np.asarray(gx), tg.numpy(), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- average, diff

def test_average_weights_vs_torch():
    v = values((2, 3, 4), seed=18)
    w1 = np.array([1.0, 2.0, 0.5, 3.0])
    compare(lambda x: ember.average(x, axis=-1, weights=ember.asarray(w1)),
            lambda t: (t * torch.tensor(w1)).sum(-1) / w1.sum(), v)
    wf = values((2, 3, 4), seed=19, low=0.1, high=1.0)
    wt = np.ascontiguousarray(wf.T)
    compare(lambda x: ember.average(x.T, axis=(0, 2), weights=ember.asarray(wt)),
            lambda t: (t.permute(2, 1, 0) * torch.tensor(wt)).sum((0, 2))
            / torch.tensor(wt).sum((0, 2)), v)
    w2 = values((4, 2), seed=20, low=0.1, high=1.0)     # weights for axes (2, 0): shape (4, 2)
    compare(lambda x: ember.average(x, axis=(2, 0), weights=ember.asarray(w2), keepdims=True),
            lambda t: (t * torch.tensor(w2.T)[:, None, :]).sum((0, 2), keepdim=True) / w2.sum(), v)
    compare(lambda x: ember.average(x, axis=(-1, 0), weights=ember.asarray(w2)),
            lambda t: (t * torch.tensor(w2.T)[:, None, :]).sum((0, 2)) / w2.sum(), v)
    x = leaf(v)
    avg, sw = ember.average(x, axis=1, weights=ember.asarray([1.0, 2.0, 3.0]), returned=True)
    (gx,) = ember.autograd.grad(avg.sum() + sw.sum(), [x])
    np.testing.assert_allclose(np.asarray(gx), np.broadcast_to(
        np.array([1.0, 2.0, 3.0])[:, None] / 6.0, (2, 3, 4)))
    assert gradcheck(lambda t: ember.average(t.T, axis=0, weights=ember.asarray(w1)), (leaf(v),))
    # weights= is a keyword of the NumPy wrapper: no gradient can flow to it, so it must not
    # require grad (a clear error rather than a silently missing gradient)
    with pytest.raises(RuntimeError, match="weights"):
        ember.average(leaf(v), axis=-1, weights=leaf(w1))


def test_diff_vs_torch():
    v = values((3, 5), seed=21)
    for n in (0, 1, 2, 3):
        for axis in (0, 1, -1):
            compare(lambda x: ember.diff(x, n=n, axis=axis), lambda t: torch.diff(t, n, axis), v)
    compare(lambda x: ember.diff(x.T, dim=0), lambda t: torch.diff(t.T, dim=0), v)
    compare(lambda x: ember.diff(x[:, ::-1]), lambda t: torch.diff(t.flip(1)), v)
    pre, app = values((3, 2), seed=22), values((3, 1), seed=23)
    # tracked prepend / append (passed positionally) get their gradients too
    compare(lambda x, p, a: ember.diff(x, 2, -1, p, a),
            lambda t, p, a: torch.diff(t, 2, -1, p, a), v, more=(pre, app))
    compare(lambda x, p: ember.diff(x, 1, 0, p),
            lambda t, p: torch.diff(t, 1, 0, p), v, more=(values((1, 5), seed=24),))
    x = leaf(v)
    assert gradcheck(lambda t: ember.diff(t.T, n=2, axis=0, prepend=0.5, append=-1.0), (x,))


def test_diff_tracked_prepend_append_by_keyword():
    v, pre, app = values((3, 5), seed=21), values((3, 2), seed=22), values((1, 5), seed=23)
    compare(lambda x, p: ember.diff(x, prepend=p), lambda t, p: torch.diff(t, prepend=p), v,
            more=(pre,))
    compare(lambda x, a: ember.diff(x, axis=0, append=a),
            lambda t, a: torch.diff(t, dim=0, append=a), v, more=(app,))


# ---------------------------------------------------------------- second order

GG = {
    "sum": lambda t: ember.sum(t.T, axis=(0, 1), keepdims=True),
    "mean": lambda t: ember.mean(t, axis=1),
    "prod": lambda t: ember.prod(t.T, axis=0),
    "prod_all": lambda t: ember.prod(t),
    "var": lambda t: ember.var(t, axis=1, ddof=1),
    "var_all": lambda t: ember.var(t.T),
    "std": lambda t: ember.std(t, axis=0, keepdims=True),
    "logsumexp": lambda t: ember.logsumexp(t.T, axis=1),
    "cumsum": lambda t: ember.cumsum(t, axis=0),
    "cumprod": lambda t: ember.cumprod(t.T, axis=1),
    "cumprod_flat": lambda t: ember.cumprod(t),
    "max": lambda t: ember.max(t, axis=1),
    "quantile": lambda t: ember.quantile(t, 0.4, axis=1),
    "diff": lambda t: ember.diff(t, n=2, axis=1),
    "average": lambda t: ember.average(t, axis=1, weights=ember.asarray([1.0, 2.0, 3.0, 0.5])),
}


@pytest.mark.parametrize("name", list(GG))
def test_gradgradcheck(name):
    v = values((3, 4), seed=25)
    if name.startswith(("prod", "cumprod")):
        v = np.sign(v) * (0.5 + np.abs(v) / 2)
    assert gradgradcheck(GG[name], (leaf(v),))


@needs_where_rule
@pytest.mark.parametrize("name", ["nanvar", "nanstd", "nanprod"])
def test_gradgradcheck_nan_reductions(name):
    v = values((3, 4), seed=26)
    v[1, 2] = np.nan
    assert gradgradcheck(lambda t: GC_OPS[name](t, 1, False), (leaf(v),))


# ---------------------------------------------------------------- dtype

F32_CASES = {
    "sum": lambda x: ember.sum(x, axis=1), "prod": lambda x: ember.prod(x, axis=0),
    "prod_zero": lambda x: ember.prod(x * ember.asarray([[1.0], [0.0], [1.0]], dtype=F32), axis=0),
    "mean": lambda x: ember.mean(x), "var": lambda x: ember.var(x, axis=1, ddof=1),
    "std": lambda x: ember.std(x, axis=0), "max": lambda x: ember.max(x, axis=1),
    "amin": lambda x: ember.amin(x), "logsumexp": lambda x: ember.logsumexp(x, axis=1),
    "cumsum": lambda x: ember.cumsum(x, axis=1), "cumprod": lambda x: ember.cumprod(x),
    "cumulative_sum": lambda x: ember.cumulative_sum(x, axis=0, include_initial=True),
    "cumulative_prod": lambda x: ember.cumulative_prod(x, axis=1),
    "nansum": lambda x: ember.nansum(x, axis=1), "nanmean": lambda x: ember.nanmean(x),
    "nanvar": lambda x: ember.nanvar(x, axis=0), "nanstd": lambda x: ember.nanstd(x, axis=1),
    "nanmax": lambda x: ember.nanmax(x, axis=1), "nanmin": lambda x: ember.nanmin(x),
    "nanprod": lambda x: ember.nanprod(x, axis=1), "ptp": lambda x: ember.ptp(x, axis=0),
    "average": lambda x: ember.average(x, axis=1, weights=ember.asarray([1.0, 2.0, 3.0, 4.0])),
    "median": lambda x: ember.median(x, axis=1), "nanmedian": lambda x: ember.nanmedian(x),
    "quantile": lambda x: ember.quantile(x, [0.2, 0.7], axis=0),
    "percentile": lambda x: ember.percentile(x, 20.0),
    "nanquantile": lambda x: ember.nanquantile(x, 0.5, axis=1),
    "nanpercentile": lambda x: ember.nanpercentile(x, 50.0, axis=0),
    "diff": lambda x: ember.diff(x, n=2), "sum_f64": lambda x: ember.sum(x, dtype=F64),
    "prod_f64": lambda x: ember.prod(x, axis=1, dtype=F64),
    "cumsum_f64": lambda x: ember.cumsum(x, axis=0, dtype=F64),
}


@pytest.mark.parametrize("name", list(F32_CASES))
def test_float32_gradient_is_float32(name):
    v = values((3, 4), seed=27, low=0.5, high=1.5)
    x = leaf(v, F32)
    out = F32_CASES[name](x)
    out.sum().backward()
    assert x.grad.dtype == F32 and x.grad.shape == (3, 4)
    # the same in float64 gives the same gradient (up to float32 rounding)
    x64 = leaf(np.asarray(x.detach()).astype(np.float64))
    out64 = F32_CASES[name](x64)
    if out64.dtype == F64:
        out64.sum().backward()
        np.testing.assert_allclose(np.asarray(x.grad), np.asarray(x64.grad), rtol=2e-5, atol=2e-5)


def test_list_of_arrays_argument():
    """ember.f([a, b]) reduces the stacked arrays; each one gets its slice of the gradient."""
    va, vb = values((2, 3), seed=31), values((2, 3), seed=32)
    cases = [(lambda xs: ember.sum(xs, axis=0), lambda ts: torch.stack(ts).sum(0)),
             (lambda xs: ember.mean(xs, axis=(0, 2)), lambda ts: torch.stack(ts).mean((0, 2))),
             (lambda xs: ember.prod(xs), lambda ts: torch.stack(ts).prod()),
             (lambda xs: ember.max(xs, axis=1), lambda ts: torch.stack(ts).amax(1)),
             (lambda xs: ember.var(xs, axis=0), lambda ts: torch.stack(ts).var(0, correction=0)),
             (lambda xs: ember.logsumexp(xs), lambda ts: torch.stack(ts).logsumexp((0, 1, 2))),
             (lambda xs: ember.cumsum(xs, axis=0), lambda ts: torch.stack(ts).cumsum(0)),
             (lambda xs: ember.cumprod(xs, axis=2), lambda ts: torch.stack(ts).cumprod(2))]
    for efn, tfn in cases:
        a, b = leaf(va), leaf(vb)
        out = efn([a, b])
        ga, gb = ember.autograd.grad(out.sum(), [a, b])
        ta, tb = tleaf(va), tleaf(vb)
        tga, tgb = torch.autograd.grad(tfn([ta, tb]).sum(), [ta, tb])
        np.testing.assert_allclose(np.asarray(ga), tga.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.asarray(gb), tgb.numpy(), rtol=1e-10, atol=1e-12)


def test_sum_of_list_over_all_axes():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    ga, gb = ember.autograd.grad(ember.sum([a, b]), [a, b])
    np.testing.assert_array_equal(np.asarray(ga), [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(gb), [1.0, 1.0])


def test_integer_and_nondifferentiable_outputs():
    x = leaf(values((3, 4), seed=28))
    for f in (ember.argmax, ember.argmin, ember.count_nonzero, ember.nanargmax, ember.all,
              ember.any):
        r = f(x, axis=1)
        assert not r.requires_grad
