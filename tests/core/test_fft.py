"""ember.fft against NumPy (values, dtypes, errors), SciPy (hfftn / ihfftn, which NumPy
lacks) and PyTorch (gradients), plus float64 finite differences (gradcheck)."""
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember
from ember import fft as efft
from helpers import layouts, rnd

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2"]
REAL_INPUT = {"rfft", "ihfft", "rfftn", "rfft2", "ihfftn", "ihfft2"}
NORMS = [None, "backward", "ortho", "forward"]


def _input(name, shape, dtype, seed=0):
    """Random input for fft function `name` (every function takes the same values)."""
    return rnd(*shape, dtype=dtype, seed=seed)


def _close(got, exp, dtype=None):
    """ember result vs NumPy's: shape, dtype, values (to the precision of the dtype)."""
    g = np.asarray(got)
    assert isinstance(got, ember.ndarray)
    assert g.shape == exp.shape, f"shape {g.shape} != {exp.shape}"
    assert g.dtype == (exp.dtype if dtype is None else dtype), f"dtype {g.dtype} != {exp.dtype}"
    single = g.dtype in (np.float32, np.complex64)
    scale = max(1.0, float(np.abs(exp).max())) if exp.size else 1.0
    np.testing.assert_allclose(g, exp, rtol=2e-5 if single else 1e-12,
                               atol=(3e-6 if single else 1e-12) * scale)


# ---------------------------------------------------------------- values: 1-d

@pytest.mark.parametrize("name,dtype", [(f, d) for f in ONE_D for d in
                                        ("float32", "float64", "complex64", "complex128")
                                        if not (f in REAL_INPUT and d.startswith("complex"))])
@pytest.mark.parametrize("n", [None, 5, 8, 13])
@pytest.mark.parametrize("norm", NORMS)
def test_1d_matches_numpy(name, dtype, n, norm):
    a = _input(name, (3, 10), dtype)
    got = getattr(efft, name)(ember.asarray(a), n=n, norm=norm)
    _close(got, getattr(np.fft, name)(a, n=n, norm=norm))


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_1d_axes_and_layouts(name, axis):
    dtype = "float64" if name in REAL_INPUT else "complex128"
    base = _input(name, (4, 6, 7), dtype, seed=1)
    for label, a in layouts(base):
        got = getattr(efft, name)(ember.asarray(a), axis=axis)
        _close(got, getattr(np.fft, name)(a, axis=axis))
        # PyTorch's dim= spelling
        _close(getattr(efft, name)(ember.asarray(a), dim=axis), getattr(np.fft, name)(a, axis=axis))


# ---------------------------------------------------------------- values: n-d

_ND_CASES = [
    dict(),
    dict(axes=(0,)),
    dict(axes=(-1, 0)),
    dict(axes=(2, 0, 1)),
    dict(s=(3, 5), axes=(0, 2)),             # smaller / larger
    dict(s=(8, 2, 9)),
    dict(s=(-1, 6), axes=(1, 2)),             # -1: the input's length
    dict(axes=(0, 0)),                        # repeated: transformed twice
    dict(s=(4, 3), axes=(1, 1)),
    dict(axes=(2, 1, 2)),
]


@pytest.mark.parametrize("name,case", [
    (f, c) for f in N_D for c in range(len(_ND_CASES))
    if not (f.endswith("2") and any(len(v) != 2 for v in _ND_CASES[c].values()))])
@pytest.mark.parametrize("norm", NORMS)
def test_nd_matches_numpy(name, case, norm):
    kw = dict(_ND_CASES[case])
    dtype = "float64" if name in REAL_INPUT else "complex128"
    a = _input(name, (4, 6, 7), dtype, seed=case)
    got = getattr(efft, name)(ember.asarray(a), norm=norm, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # NumPy 2: s without axes
        exp = getattr(np.fft, name)(a, norm=norm, **kw)
    _close(got, exp)


@pytest.mark.parametrize("name", N_D)
def test_nd_layouts_single_precision(name):
    dtype = "float32" if name in REAL_INPUT else "complex64"
    base = _input(name, (5, 6), dtype, seed=3)
    for label, a in layouts(base):
        _close(getattr(efft, name)(ember.asarray(a)), getattr(np.fft, name)(a))


@pytest.mark.parametrize("name", ["fftn", "rfftn", "irfftn"])
def test_nd_dim_alias(name):
    dtype = "float64" if name in REAL_INPUT else "complex128"
    a = _input(name, (3, 4, 5), dtype)
    _close(getattr(efft, name)(ember.asarray(a), s=(4, 6), dim=(0, 2)),
           getattr(np.fft, name)(a, s=(4, 6), axes=(0, 2)))
    with pytest.raises(TypeError, match="axes= or dim="):
        getattr(efft, name)(ember.asarray(a), axes=(0,), dim=(0,))


def test_nd_sequences():
    a = _input("fftn", (3, 4, 5), "complex128")
    _close(efft.fftn(ember.asarray(a), s=np.array([4, 6]), axes=[0, 2]),
           np.fft.fftn(a, s=(4, 6), axes=(0, 2)))
    _close(efft.ifftn(ember.asarray(a), s=3, axes=1), np.fft.ifftn(a, s=(3,), axes=(1,)))


@pytest.mark.parametrize("name", ["hfftn", "ihfftn", "hfft2", "ihfft2"])
@pytest.mark.parametrize("kw", [dict(), dict(s=(3, 6)), dict(axes=(0, 2)), dict(s=(5, 4), axes=(2, 1))])
@pytest.mark.parametrize("norm", NORMS)
def test_hermitian_nd_matches_scipy(name, kw, norm):
    sfft = pytest.importorskip("scipy.fft")
    dtype = "float64" if name in REAL_INPUT else "complex128"
    a = _input(name, (3, 4, 5), dtype)
    if name.endswith("2") and kw.get("axes") is None and kw.get("s") is None:
        kw = dict()
    got = getattr(efft, name)(ember.asarray(a), norm=norm, **kw)
    _close(got, np.asarray(getattr(sfft, name)(a, norm=norm, **kw)))


def test_fftn_no_axes_is_a_complex_copy():
    a = np.arange(6.0).reshape(2, 3)
    got = efft.fftn(ember.asarray(a), axes=())
    _close(got, a.astype(np.complex128))


def test_0d_fftn_all_axes_is_a_copy():
    got = efft.fftn(ember.asarray(np.float64(2.5)))
    _close(got, np.asarray(2.5 + 0j))


# ---------------------------------------------------------------- dtypes

@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "ihfft", "fftn", "rfftn", "irfftn"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "int64", "uint8", "float16"])
def test_dtypes_promote_like_the_default_float(name, dtype):
    a = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    ref = getattr(np.fft, name)(a.astype(np.float32))       # float32: ember's default float
    _close(getattr(efft, name)(ember.asarray(a)), ref)
    if dtype != "float16":
        prev = ember.get_default_dtype()
        ember.set_default_dtype(np.float64)
        try:                    # NumPy's own rule (integers in float64) under the float64 default
            _close(getattr(efft, name)(ember.asarray(a)), getattr(np.fft, name)(a))
        finally:
            ember.set_default_dtype(prev)


def test_bfloat16_computes_in_float32():
    a = np.linspace(-2, 2, 8).astype(np.float32)
    x = ember.asarray(a).astype(ember.bfloat16)
    ref = np.fft.rfft(np.asarray(x.astype(ember.float32)))
    _close(efft.rfft(x), ref)
    _close(efft.fft(x), np.fft.fft(np.asarray(x.astype(ember.float32))))


def test_float32_stays_single_precision():
    a = _input("fft", (8,), "float32")
    assert efft.fft(ember.asarray(a)).dtype == np.complex64
    assert efft.rfft(ember.asarray(a)).dtype == np.complex64
    assert efft.irfft(efft.rfft(ember.asarray(a))).dtype == np.float32
    assert efft.hfft(ember.asarray(a.astype(np.complex64))).dtype == np.float32
    assert efft.ifftn(ember.asarray(a.astype(np.complex128))).dtype == np.complex128


def test_lists_are_accepted():
    _close(efft.fft([1.0, 2.0, 3.0]), np.fft.fft(np.asarray([1.0, 2.0, 3.0], np.float32)))


# ---------------------------------------------------------------- empty, 0-d, bad input

@pytest.mark.parametrize("name", ONE_D + N_D)
def test_empty_batch(name):
    dtype = "float64" if name in REAL_INPUT else "complex128"
    a = np.zeros((0, 4), dtype)
    kw = dict(axes=(1,)) if name not in ONE_D else {}
    _close(getattr(efft, name)(ember.asarray(a), **kw), getattr(np.fft, name)(a, **kw))


@pytest.mark.parametrize("name", ONE_D)
def test_errors_like_numpy(name):
    f = getattr(efft, name)
    with pytest.raises(IndexError, match=name):       # AxisError, an IndexError as NumPy's
        f(ember.asarray(np.float64(1.0)))
    with pytest.raises(ValueError, match="number of FFT data points"):
        f(ember.zeros(0, dtype=ember.float64))
    with pytest.raises(ValueError, match="number of FFT data points"):
        f(ember.ones(4), n=0)
    with pytest.raises(ValueError, match="norm"):
        f(ember.ones(4), norm="both")
    with pytest.raises(np.exceptions.AxisError):      # a ValueError and an IndexError
        f(ember.ones((2, 4)), axis=2)
    for fn, err in ((lambda: np.fft.__dict__[name](np.zeros(0)), ValueError),
                    (lambda: np.fft.__dict__[name](np.ones(4), n=0), ValueError),
                    (lambda: np.fft.__dict__[name](np.ones((2, 4)), axis=2), IndexError)):
        with pytest.raises(err):            # the oracle agrees on the error types
            fn()


@pytest.mark.parametrize("name", ["rfft", "ihfft", "rfftn", "rfft2"])
def test_real_transforms_reject_complex(name):
    with pytest.raises(TypeError, match=f"fft.{name}: expected a real input"):
        getattr(efft, name)(ember.ones((2, 2), dtype=ember.complex64))


def test_nd_errors():
    x = ember.ones((3, 4))
    with pytest.raises(ValueError, match="different lengths"):
        efft.fftn(x, s=(2, 2), axes=(0,))
    with pytest.raises(ValueError, match="number of FFT data points"):
        efft.irfftn(ember.ones((3, 1), dtype=ember.complex64))
    with pytest.raises(ValueError, match="at least one axis"):
        efft.rfftn(x, axes=())


# ---------------------------------------------------------------- out=

@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "ihfft", "fftn", "irfft2"])
def test_out(name):
    dtype = "float64" if name in REAL_INPUT else "complex128"
    a = _input(name, (4, 6), dtype)
    ref = getattr(np.fft, name)(a)
    out = ember.zeros(ref.shape, dtype=ref.dtype)
    res = getattr(efft, name)(ember.asarray(a), out=out)
    assert res is out
    _close(out, ref)
    with pytest.raises(ValueError, match=f"fft.{name}: output array has shape"):
        getattr(efft, name)(ember.asarray(a), out=ember.zeros((1,), dtype=ref.dtype))
    if ref.dtype.kind == "c":
        with pytest.raises(TypeError, match="cannot write"):
            getattr(efft, name)(ember.asarray(a), out=ember.zeros(ref.shape))


def test_out_refused_under_autograd():
    x = ember.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="out= is not supported"):
        efft.fft(x, out=ember.zeros(4, dtype=ember.complex64))


# ---------------------------------------------------------------- frequencies and shifts

@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_fftfreq(n, d):
    _close(efft.fftfreq(n, d, dtype=ember.float64), np.fft.fftfreq(n, d))
    _close(efft.rfftfreq(n, d=d, dtype=ember.float64), np.fft.rfftfreq(n, d))
    assert efft.fftfreq(n, d).dtype == ember.get_default_dtype()
    _close(efft.fftfreq(n, d), np.fft.fftfreq(n, d).astype(np.float32))
    assert efft.rfftfreq(n, d, device="cpu").device == ember.Device("cpu")


def test_fftfreq_errors():
    with pytest.raises(ValueError, match="fft.fftfreq: n must be positive"):
        efft.fftfreq(0)
    with pytest.raises(TypeError, match="fft.rfftfreq: n must be an integer"):
        efft.rfftfreq(2.5)
    with pytest.raises(TypeError, match="floating-point dtype"):
        efft.fftfreq(4, dtype=ember.int32)


@pytest.mark.parametrize("shape,axes", [
    (sh, ax) for sh in [(5,), (4, 7), (3, 4, 5), ()] for ax in [None, 0, -1, (0, 1), (1,)]
    if ax is None or (sh and (len(sh) >= 2 or ax in (0, -1)))])
def test_shifts(axes, shape):
    a = np.arange(int(np.prod(shape))).reshape(shape).astype(np.float64)
    if len(shape) == 0:
        # NumPy's fftshift fails on 0-d input (ValueError from roll); PyTorch's returns it
        _close(efft.fftshift(ember.asarray(a), axes=axes), a)
        return
    _close(efft.fftshift(ember.asarray(a), axes=axes), np.fft.fftshift(a, axes=axes))
    _close(efft.ifftshift(ember.asarray(a), axes), np.fft.ifftshift(a, axes=axes))
    if axes is not None:
        _close(efft.fftshift(ember.asarray(a), dim=axes), np.fft.fftshift(a, axes=axes))


def test_public_names():
    for name in efft.__all__:
        assert callable(getattr(efft, name)) and getattr(efft, name).__doc__
    for name in dir(np.fft):
        if not name.startswith("_") and name != "test":
            assert hasattr(efft, name), name
    assert pickle.loads(pickle.dumps(efft.rfft)) is efft.rfft


# ---------------------------------------------------------------- gradients vs PyTorch

def _torch():
    return pytest.importorskip("torch")


_GRAD_CASES = [
    # (name, input shape, kwargs)
    ("fft", (3, 8), dict()),
    ("fft", (3, 8), dict(n=5, norm="ortho")),
    ("fft", (3, 8), dict(n=11, axis=0, norm="forward")),
    ("ifft", (4, 7), dict(n=4, norm="backward")),
    ("ifft", (4, 7), dict(n=10, axis=-2)),
    ("rfft", (3, 8), dict()),
    ("rfft", (3, 7), dict(norm="ortho")),
    ("rfft", (3, 8), dict(n=5, norm="forward")),
    ("rfft", (3, 8), dict(n=12, axis=0)),
    ("irfft", (3, 5), dict()),                        # n = 8 (even)
    ("irfft", (3, 5), dict(n=9, norm="ortho")),        # odd, longer than 2(m-1)
    ("irfft", (3, 5), dict(n=4, norm="forward")),      # shorter: input cropped
    ("irfft", (3, 5), dict(n=3)),
    ("irfft", (6, 3), dict(n=14, axis=0)),             # input zero-padded
    ("hfft", (3, 5), dict()),
    ("hfft", (3, 5), dict(n=7, norm="ortho")),
    ("hfft", (3, 5), dict(n=3, norm="forward")),
    ("ihfft", (3, 8), dict()),
    ("ihfft", (3, 7), dict(n=10, norm="ortho")),
    ("ihfft", (3, 8), dict(n=5, norm="forward")),
    ("fftn", (3, 4, 5), dict()),
    ("fftn", (3, 4, 5), dict(s=(2, 7), axes=(0, 2), norm="ortho")),
    ("ifftn", (3, 4, 5), dict(s=(6, 3), norm="forward")),
    ("fft2", (3, 4, 5), dict()),
    ("ifft2", (3, 4, 5), dict(s=(5, 2))),
    ("rfftn", (3, 4, 6), dict()),
    ("rfftn", (3, 4, 6), dict(s=(5, 3), axes=(2, 0), norm="ortho")),
    ("rfft2", (3, 4, 7), dict(s=(6, 9), norm="forward")),
    ("irfftn", (3, 4, 4), dict()),
    ("irfftn", (3, 4, 4), dict(s=(5, 7), axes=(0, 2), norm="ortho")),
    ("irfftn", (3, 4, 4), dict(s=(2, 3, 4), norm="forward")),
    ("irfft2", (3, 4, 4), dict(s=(6, 5))),
    ("hfftn", (3, 4, 4), dict()),
    ("hfftn", (3, 4, 4), dict(s=(5, 7), axes=(0, 2), norm="ortho")),
    ("ihfftn", (3, 4, 6), dict(s=(4, 5), norm="forward")),
    ("hfft2", (3, 4, 4), dict(s=(5, 5))),
    ("ihfft2", (3, 4, 6), dict()),
]


def _torch_kwargs(kw):
    out = dict(kw)
    if "axis" in out:
        out["dim"] = out.pop("axis")
    if "axes" in out:
        out["dim"] = out.pop("axes")
    return out


@pytest.mark.parametrize("case,complex_input", [
    pytest.param(i, c, id=f"{_GRAD_CASES[i][0]}{i}-{'complex' if c else 'real'}")
    for i in range(len(_GRAD_CASES)) for c in (False, True)
    if not (c and _GRAD_CASES[i][0] in REAL_INPUT)])
def test_gradients_match_torch(case, complex_input):
    torch = _torch()
    name, shape, kw = _GRAD_CASES[case]
    rng = np.random.default_rng(case)
    a = rng.standard_normal(shape)
    if complex_input:
        a = a + 1j * rng.standard_normal(shape)
    x = ember.asarray(a, requires_grad=True)
    y = getattr(efft, name)(x, **kw)
    w = rng.standard_normal(y.shape) + 1j * rng.standard_normal(y.shape)
    wr, wi = ember.asarray(w.real), ember.asarray(w.imag)
    loss = ((ember.real(y) * wr + ember.imag(y) * wi).sum() if y.dtype.kind == "c"
            else (y * wr).sum())
    loss.backward()

    tx = torch.tensor(a, requires_grad=True)
    ty = getattr(torch.fft, name)(tx, **_torch_kwargs(kw))
    tl = ((ty.real * torch.tensor(w.real) + ty.imag * torch.tensor(w.imag)).sum()
          if ty.is_complex() else (ty * torch.tensor(w.real)).sum())
    tl.backward()
    np.testing.assert_allclose(np.asarray(y), ty.detach().resolve_conj().numpy(),
                               rtol=1e-10, atol=1e-10)
    assert x.grad.dtype == x.dtype
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.resolve_conj().numpy(),
                               rtol=1e-10, atol=1e-10)


def test_single_precision_gradient_dtype():
    x = ember.asarray(_input("rfft", (6,), "float32"), requires_grad=True)
    ember.abs(efft.rfft(x, n=9)).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.shape == (6,)
    h = ember.asarray(_input("rfft", (6,), "float32")).astype(ember.float16)
    h.requires_grad = True
    ember.real(efft.fft(h)).sum().backward()
    assert h.grad.dtype == np.float16


# ---------------------------------------------------------------- finite differences

def _as_real_parts(name, shape, seed):
    """Real float64 leaves (the real and imaginary parts for complex-input transforms)."""
    rng = np.random.default_rng(seed)
    parts = [ember.asarray(rng.standard_normal(shape), requires_grad=True)]
    if name not in REAL_INPUT:
        parts.append(ember.asarray(rng.standard_normal(shape), requires_grad=True))
    return parts


def _func(name, kw):
    def f(*parts):
        x = parts[0] if len(parts) == 1 else parts[0] + 1j * parts[1]
        y = getattr(efft, name)(x, **kw)
        return (ember.real(y), ember.imag(y)) if y.dtype.kind == "c" else y
    return f


@pytest.mark.parametrize("case", range(0, len(_GRAD_CASES), 2), ids=lambda i: _GRAD_CASES[i][0] + str(i))
def test_gradcheck(case):
    name, shape, kw = _GRAD_CASES[case]
    shape = shape[:-1] + (min(shape[-1], 5),) if len(shape) > 2 else shape
    parts = _as_real_parts(name, shape, case)
    assert ember.autograd.gradcheck(_func(name, kw), parts)


@pytest.mark.parametrize("name,kw", [("rfft", dict(n=5, norm="ortho")), ("irfft", dict(n=7)),
                                     ("fft", dict(n=3)), ("hfftn", dict(s=(3, 4))),
                                     ("ihfft", dict(norm="forward"))])
def test_gradgradcheck(name, kw):
    parts = _as_real_parts(name, (2, 4), 7)
    assert ember.autograd.gradgradcheck(_func(name, kw), parts)


def test_shift_gradients():
    torch = _torch()
    a = np.arange(12.0).reshape(3, 4)
    w = np.random.default_rng(0).standard_normal((3, 4))
    x = ember.asarray(a, requires_grad=True)
    (efft.fftshift(x, axes=1) * ember.asarray(w)).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    (torch.fft.fftshift(tx, dim=1) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.numpy())


def test_import_ember_stays_lazy():
    code = ("import sys, ember; assert 'ember.fft' not in sys.modules; "
            "assert 'scipy.fft' not in sys.modules; ember.fft.fftfreq(3); "
            "assert 'scipy.fft' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_numpy_fft_on_ember_arrays_runs_ember_fft():
    x = ember.asarray(_input("fft", (6,), "float64"), requires_grad=True)
    y = np.fft.rfft(x, norm="ortho")            # __array_function__ -> ember.fft.rfft
    assert isinstance(y, ember.ndarray) and y.requires_grad
    _close(y.detach(), np.fft.rfft(np.asarray(x.detach()), norm="ortho"))
