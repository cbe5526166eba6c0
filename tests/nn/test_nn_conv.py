"""Convolutions (ember.nn.functional.conv*, nn.Conv*) against PyTorch and finite differences."""
import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """The same data for a test whatever ran before it in this process (xdist order)."""
    global RNG
    RNG = np.random.default_rng(1234)


pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def _pair(shape, dtype=np.float32, noncontig=False):
    """(ember array, torch tensor) with the same values; both require grad."""
    a = RNG.standard_normal(shape).astype(dtype)
    if noncontig:                      # a transposed view of the same values
        base = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        e = ember.asarray(base)
        e = e.swapaxes(-1, -2) if hasattr(e, "swapaxes") else ember.swapaxes(e, -1, -2)
        assert not e.is_contiguous()
        e = e.detach()
        e.requires_grad = True
    else:
        e = ember.asarray(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    return e, t


def _compare(fe, ft, shapes, dtype=np.float32, noncontig=False):
    """Run fe(*ember arrays) and ft(*torch tensors); compare output and every gradient."""
    pairs = [_pair(s, dtype, noncontig and i == 0) if s is not None else (None, None)
             for i, s in enumerate(shapes)]
    es = [p[0] for p in pairs]
    ts = [p[1] for p in pairs]
    ye = fe(*es)
    yt = ft(*ts)
    assert ye.shape == tuple(yt.shape)
    assert ye.dtype == dtype
    tol = _tol(dtype)
    # sums of many products (unit weights: |y| ~ 100 over 576 terms; Winograd's transforms
    # round at that scale): the absolute error grows with the output's size
    yref = yt.detach().numpy()
    np.testing.assert_allclose(np.asarray(ye), yref, rtol=tol["rtol"],
                               atol=tol["atol"] * max(1.0, float(np.abs(yref).max())
                                                      if yref.size else 1.0))
    g = RNG.standard_normal(tuple(yt.shape)).astype(dtype)
    (ye * ember.asarray(g)).sum().backward()
    yt.backward(torch.tensor(g))
    for e, t in zip(es, ts):
        if e is None:
            continue
        assert e.grad is not None and e.grad.shape == e.shape
        ref = t.grad.numpy()
        # weight gradients sum many products: the absolute error grows with their size
        atol = tol["atol"] * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
        np.testing.assert_allclose(np.asarray(e.grad), ref, rtol=tol["rtol"], atol=atol)


CONV2D_CASES = [
    # x shape, w shape, kwargs
    ((2, 3, 7, 7), (4, 3, 3, 3), {}),
    ((2, 3, 7, 8), (4, 3, 3, 3), dict(stride=2, padding=1)),
    ((1, 4, 8, 9), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)),
    ((2, 3, 6, 6), (5, 3, 1, 1), {}),
    ((2, 3, 7, 7), (5, 3, 1, 1), dict(stride=2)),
    ((2, 3, 7, 6), (4, 3, 4, 3), dict(padding="same")),
    ((2, 3, 7, 6), (4, 3, 2, 2), dict(padding="same", dilation=(1, 3))),
    ((2, 3, 7, 6), (4, 3, 3, 3), dict(padding="valid")),
    ((2, 6, 6, 6), (6, 1, 3, 3), dict(groups=6, padding=1)),
    ((3, 2, 5, 5), (4, 2, 5, 5), dict(padding=2)),
    ((2, 2, 9, 9), (3, 2, 3, 3), dict(stride=3, padding=1, dilation=2)),
]


@pytest.mark.parametrize("xs,ws,kw", CONV2D_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_matches_torch(xs, ws, kw, bias):
    bs = (ws[0],) if bias else None
    _compare(lambda x, w, b: F.conv2d(x, w, b, **kw),
             lambda x, w, b: TF.conv2d(x, w, b, **kw), [xs, ws, bs])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("noncontig", [False, True])
def test_conv2d_dtypes_and_strided_input(dtype, noncontig):
    kw = dict(stride=2, padding=1, groups=2)
    _compare(lambda x, w, b: F.conv2d(x, w, b, **kw),
             lambda x, w, b: TF.conv2d(x, w, b, **kw),
             [(2, 4, 6, 7), (6, 2, 3, 3), (6,)], dtype=dtype, noncontig=noncontig)


def test_conv2d_sliced_input():
    a = RNG.standard_normal((2, 5, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    e = ember.asarray(a)[:, 1:4, ::2, 1:]
    t = torch.tensor(a)[:, 1:4, ::2, 1:]
    np.testing.assert_allclose(np.asarray(F.conv2d(e, ember.asarray(w), padding=1)),
                               TF.conv2d(t, torch.tensor(w), padding=1).numpy(), rtol=1e-4,
                               atol=1e-4)


def test_conv2d_unbatched_and_empty_batch():
    _compare(lambda x, w, b: F.conv2d(x, w, b, padding=1),
             lambda x, w, b: TF.conv2d(x, w, b, padding=1), [(3, 5, 5), (2, 3, 3, 3), (2,)])
    x = ember.zeros((0, 3, 5, 5), requires_grad=True)
    w = ember.ones((2, 3, 3, 3), requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    assert y.shape == (0, 2, 5, 5)
    y.sum().backward()
    assert x.grad.shape == x.shape
    assert np.all(np.asarray(w.grad) == 0)


CONV1D_CASES = [
    ((2, 3, 10), (4, 3, 3), {}),
    ((2, 3, 10), (4, 3, 3), dict(stride=2, padding=1)),
    ((1, 4, 11), (4, 1, 3), dict(groups=4, dilation=2, padding="same")),
    ((2, 4, 9), (6, 2, 1), dict(groups=2)),
]


@pytest.mark.parametrize("xs,ws,kw", CONV1D_CASES)
def test_conv1d_matches_torch(xs, ws, kw):
    _compare(lambda x, w, b: F.conv1d(x, w, b, **kw),
             lambda x, w, b: TF.conv1d(x, w, b, **kw), [xs, ws, (ws[0],)])


def test_conv1d_unbatched_float64():
    _compare(lambda x, w, b: F.conv1d(x, w, b, padding=1),
             lambda x, w, b: TF.conv1d(x, w, b, padding=1), [(3, 7), (2, 3, 3), (2,)],
             dtype=np.float64)


CONVT2D_CASES = [
    ((2, 4, 5, 5), (4, 3, 3, 3), {}),
    ((2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 4, 5), (4, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), groups=2,
                                      dilation=(2, 1))),
    ((2, 4, 4, 4), (4, 3, 1, 1), {}),
    ((2, 4, 4, 4), (4, 3, 2, 2), dict(stride=2)),
    ((2, 2, 4, 4), (2, 3, 3, 3), dict(stride=1, dilation=3, output_padding=2)),
]


@pytest.mark.parametrize("xs,ws,kw", CONVT2D_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose2d_matches_torch(xs, ws, kw, bias):
    groups = kw.get("groups", 1)
    bs = (ws[1] * groups,) if bias else None
    _compare(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
             lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw), [xs, ws, bs])


@pytest.mark.parametrize("kw", [{}, dict(stride=3, padding=1, output_padding=2, groups=2)])
def test_conv_transpose1d_matches_torch(kw):
    _compare(lambda x, w, b: F.conv_transpose1d(x, w, b, **kw),
             lambda x, w, b: TF.conv_transpose1d(x, w, b, **kw),
             [(2, 4, 6), (4, 3, 3), (3 * kw.get("groups", 1),)])


# ---------------------------------------------------------------- finite differences

def _f64(*shape):
    return ember.asarray(RNG.standard_normal(shape), requires_grad=True)


def test_gradcheck_conv2d():
    x, w, b = _f64(2, 4, 5, 4), _f64(4, 2, 3, 2), _f64(4)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2),
                                              groups=2), (x, w, b))


def test_gradcheck_conv2d_same_even_kernel():
    x, w = _f64(1, 2, 4, 5), _f64(3, 2, 2, 2)
    assert gradcheck(lambda x, w: F.conv2d(x, w, padding="same"), (x, w))


def test_gradcheck_conv_transpose2d():
    x, w, b = _f64(2, 2, 3, 3), _f64(2, 2, 3, 3), _f64(2)
    assert gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                        output_padding=1), (x, w, b))


def test_gradcheck_conv1d_and_transpose1d():
    x, w, b = _f64(2, 2, 6), _f64(3, 2, 3), _f64(3)
    assert gradcheck(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), (x, w, b))
    x, w = _f64(1, 2, 4), _f64(2, 3, 3)
    assert gradcheck(lambda x, w: F.conv_transpose1d(x, w, stride=2, dilation=2), (x, w))


def test_gradcheck_conv_weight_op():
    from ember.nn.functional.conv import _conv_weight
    x, g = _f64(2, 2, 5, 5), _f64(2, 4, 3, 3)
    assert gradcheck(lambda x, g: _conv_weight(x, g, (4, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1),
                                               2), (x, g))


def test_gradgradcheck_conv2d():
    x, w, b = _f64(1, 2, 4, 4), _f64(2, 2, 3, 3), _f64(2)
    assert gradgradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), (x, w, b))


def test_gradgradcheck_conv_transpose2d():
    x, w = _f64(1, 2, 3, 3), _f64(2, 1, 2, 2)
    assert gradgradcheck(lambda x, w: F.conv_transpose2d(x, w, stride=2, groups=2), (x, w))


def test_double_backward_matches_torch():
    xe, xt = _pair((2, 3, 5, 5), np.float64)
    we, wt = _pair((4, 3, 3, 3), np.float64)
    ye = F.conv2d(xe, we, padding=1)
    yt = TF.conv2d(xt, wt, padding=1)
    gx_e, = ember.autograd.grad((ye ** 2).sum(), [xe], create_graph=True)
    gx_t, = torch.autograd.grad((yt ** 2).sum(), [xt], create_graph=True)
    (gx_e ** 2).sum().backward()
    (gx_t ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(we.grad), wt.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(xe.grad), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- errors

def test_errors():
    x = ember.ones((2, 4, 5, 5))
    w = ember.ones((2, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"expected input\[2, 4, 5, 5\] to have 3 channels, "
                                           r"but got 4 channels"):
        F.conv2d(x, w)
    with pytest.raises(RuntimeError, match="4D"):
        F.conv2d(ember.ones((5, 5)), w)
    with pytest.raises(RuntimeError, match="divisible by 2"):
        F.conv2d(ember.ones((2, 4, 5, 5)), ember.ones((3, 2, 3, 3)), groups=2)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        F.conv2d(ember.ones((1, 3, 2, 2)), w)
    with pytest.raises(ValueError, match="non-positive stride"):
        F.conv2d(ember.ones((1, 3, 5, 5)), w, stride=0)
    with pytest.raises(ValueError, match="negative padding"):
        F.conv2d(ember.ones((1, 3, 5, 5)), w, padding=-1)
    with pytest.raises(ValueError, match="strided convolutions"):
        F.conv2d(ember.ones((1, 3, 5, 5)), w, stride=2, padding="same")
    with pytest.raises(ValueError, match="invalid padding string"):
        F.conv2d(ember.ones((1, 3, 5, 5)), w, padding="full")
    with pytest.raises(TypeError, match="float64.*float32|weight type"):
        F.conv2d(ember.ones((1, 3, 5, 5), dtype=np.float64), w)
    with pytest.raises(TypeError, match=r"floating-point input \(float16, bfloat16, float32 or "
                                        r"float64\), got input of dtype int32"):
        F.conv2d(ember.ones((1, 3, 5, 5), dtype=np.int32), w)
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 2 elements"):
        F.conv2d(ember.ones((1, 3, 5, 5)), w, ember.ones(3))
    with pytest.raises(ValueError, match="output padding must be smaller"):
        F.conv_transpose2d(ember.ones((1, 2, 3, 3)), w, output_padding=1)
    with pytest.raises(RuntimeError, match="to have 2 channels"):
        F.conv_transpose2d(ember.ones((1, 3, 3, 3)), w)


@pytest.mark.parametrize("xdt,wdt", [("bfloat16", "float32"), ("float16", "bfloat16"),
                                     ("float32", "float16")])
def test_mixed_16bit_dtypes_are_refused(xdt, wdt):
    """PyTorch refuses input and weight (or bias) of different dtypes, 16-bit ones
    included (they used to be widened to float32 together and accepted)."""
    x = ember.ones((1, 3, 5, 5), dtype=getattr(ember, xdt))
    w = ember.ones((2, 3, 3, 3), dtype=getattr(ember, wdt))
    with pytest.raises(TypeError, match=rf"conv2d: input type \({xdt}\) and weight type "
                       rf"\({wdt}\) should be the same \(input \[1, 3, 5, 5\] {xdt}, "
                       rf"weight \[2, 3, 3, 3\] {wdt}\)"):
        F.conv2d(x, w)
    with pytest.raises(TypeError, match=rf"conv1d: input type \({xdt}\) and bias type"):
        F.conv1d(x[0], w[:, :, 0].astype(x.dtype), ember.ones(2, dtype=getattr(ember, wdt)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_cpu_conv_runs_in_float32_and_rounds_once(dtype):
    """On the CPU a 16-bit convolution computes in float32 (PyTorch's reduced-precision
    CPU kernels accumulate in float32) and returns the input's dtype; CPU autocast keeps
    convolutions in their inputs' dtypes and runs mixed 16-bit / float32 ones in float32."""
    dt = getattr(ember, dtype)
    x32 = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w32 = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    x, w = ember.asarray(x32).astype(dt), ember.asarray(w32).astype(dt)
    y = F.conv2d(x, w, padding=1)
    assert y.dtype == dt
    ref = TF.conv2d(torch.tensor(np.asarray(x.astype(np.float32))),
                    torch.tensor(np.asarray(w.astype(np.float32))), padding=1)
    ulp = 2.0 ** (-7 if dtype == "bfloat16" else -10)      # one rounding to the 16-bit type
    np.testing.assert_allclose(np.asarray(y.astype(np.float32)), ref.numpy(), rtol=ulp,
                               atol=ulp * 1e-2)
    with ember.amp.autocast("cpu", dtype=dt):
        ym = F.conv2d(x, ember.asarray(w32), padding=1)
        with pytest.raises(TypeError, match=r"conv2d: input type \(float64\) and weight type"):
            F.conv2d(ember.asarray(x32.astype(np.float64)), w)   # autocast casts no float64
    assert ym.dtype == dt
    np.testing.assert_allclose(np.asarray(ym.astype(np.float32)), ref.numpy(), rtol=4 * ulp,
                               atol=4 * ulp)


# ---------------------------------------------------------------- modules

def _copy_params(em, tm):
    for (ne, pe), (nt, pt) in zip(em.named_parameters(), tm.named_parameters()):
        assert ne == nt and pe.shape == tuple(pt.shape)
        np.asarray(pe)[...] = pt.detach().numpy()


@pytest.mark.parametrize("cls,args,kw,xs", [
    ("Conv2d", (3, 4, 3), dict(padding=1), (2, 3, 6, 6)),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=2, groups=2, bias=False), (2, 4, 7, 6)),
    ("Conv2d", (3, 4, 3), dict(padding=2, padding_mode="reflect"), (2, 3, 6, 6)),
    ("Conv2d", (3, 4, 3), dict(padding=(1, 2), padding_mode="replicate"), (2, 3, 6, 6)),
    ("Conv2d", (3, 4, 4), dict(padding="same", padding_mode="circular"), (3, 6, 6)),
    ("Conv1d", (3, 4, 3), dict(padding=1, stride=2), (2, 3, 9)),
    ("Conv1d", (3, 4, 3), dict(padding=1, padding_mode="reflect"), (2, 3, 9)),
    ("ConvTranspose2d", (4, 2, 3), dict(stride=2, padding=1, output_padding=1), (2, 4, 4, 4)),
    ("ConvTranspose1d", (4, 2, 3), dict(stride=2), (2, 4, 5)),
])
def test_modules_match_torch(cls, args, kw, xs):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(*args, **kw)
    em = getattr(nn, cls)(*args, **kw)
    assert repr(em) == repr(tm)
    _copy_params(em, tm)
    xe, xt = _pair(xs)
    ye, yt = em(xe), tm(xt)
    np.testing.assert_allclose(np.asarray(ye), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = RNG.standard_normal(tuple(yt.shape)).astype(np.float32)
    (ye * ember.asarray(g)).sum().backward()
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(np.asarray(xe.grad), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (_, pe), (_, pt) in zip(em.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(np.asarray(pe.grad), pt.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_conv_init_bounds():
    ember.random.seed(0)
    m = nn.Conv2d(8, 16, 3)
    fan_in = 8 * 9
    bound = 1 / math.sqrt(fan_in)            # kaiming_uniform_(a=sqrt(5)) gives the same
    w, b = np.asarray(m.weight), np.asarray(m.bias)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    t = nn.ConvTranspose2d(8, 4, 3, groups=2)
    assert t.weight.shape == (8, 2, 3, 3)
    assert np.abs(np.asarray(t.bias)).max() <= 1 / math.sqrt(2 * 9)


def test_conv_transpose_output_size():
    m = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    tm = torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    _copy_params(m, tm)
    x = RNG.standard_normal((1, 4, 5, 5)).astype(np.float32)
    ye = m(ember.asarray(x), output_size=(10, 10))
    yt = tm(torch.tensor(x), output_size=(10, 10))
    assert ye.shape == (1, 2, 10, 10)
    np.testing.assert_allclose(np.asarray(ye), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="valid sizes range"):
        m(ember.asarray(x), output_size=(12, 12))


def test_module_errors():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided convolutions"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")


def test_conv2d_float64_module():
    m = nn.Conv2d(2, 3, 3, dtype=np.float64)
    assert m.weight.dtype == np.float64
    y = m(ember.ones((1, 2, 4, 4), dtype=np.float64))
    assert y.dtype == np.float64


# ---------------------------------------------------------------- both float32 code paths

@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 3, 7, 8), (4, 3, 3, 3), dict(stride=2, padding=1)),
    ((1, 4, 8, 9), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)),
    ((2, 3, 7, 6), (4, 3, 4, 3), dict(padding="same")),
    ((2, 3, 6, 6), (5, 3, 1, 1), {}),
])
def test_fast_and_gemm_paths_agree_with_torch(monkeypatch, fast, xs, ws, kw):
    """float32 runs the AVX-512 direct kernels where the CPU has them and im2col + GEMM
    otherwise: both must match PyTorch (forward, both transposed directions)."""
    from ember.nn.functional import conv as conv_mod
    if fast and not conv_mod._ck.fast_available():
        pytest.skip("no AVX-512 on this CPU")
    monkeypatch.setattr(conv_mod, "_FAST", fast)
    _compare(lambda x, w, b: F.conv2d(x, w, b, **kw),
             lambda x, w, b: TF.conv2d(x, w, b, **kw), [xs, ws, (ws[0],)])
    kt = {k: v for k, v in kw.items() if k != "padding" or v != "same"}
    xt = (xs[0], ws[0]) + xs[2:]
    groups = kw.get("groups", 1)
    _compare(lambda x, w, b: F.conv_transpose2d(x, w, b, **kt),
             lambda x, w, b: TF.conv_transpose2d(x, w, b, **kt),
             [xt, ws, (ws[1] * groups,)])


def test_large_batch_threads():
    """Enough work to run on several threads (per-sample split and weight-gradient
    partial sums)."""
    _compare(lambda x, w, b: F.conv2d(x, w, b, padding=1),
             lambda x, w, b: TF.conv2d(x, w, b, padding=1), [(16, 8, 16, 16), (8, 8, 3, 3), (8,)])
    _compare(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
             lambda x, w, b: TF.conv2d(x, w, b, stride=2, padding=1),
             [(16, 8, 16, 16), (16, 8, 3, 3), None])


@pytest.mark.parametrize("xs,ws,kw", [
    ((13, 64, 8, 8), (64, 64, 3, 3), dict(padding=1)),          # ResNet-20 stage 3, odd batch
    ((37, 16, 12, 12), (16, 16, 3, 3), dict(padding=1)),        # many weight-gradient chunks
    ((5, 32, 10, 10), (64, 32, 1, 1), dict(stride=2)),          # 1x1 stride-2 shortcut
])
def test_bias_free_threaded_chunks(xs, ws, kw):
    """No bias (the forward copies the padded-width rows out unchanged) and batches that
    split into several weight-gradient chunks over the threads, uneven ones included."""
    _compare(lambda x, w: F.conv2d(x, w, None, **kw),
             lambda x, w: TF.conv2d(x, w, None, **kw), [xs, ws])


def test_random_geometries_match_torch():
    """Random kernel sizes, strides, paddings (up to beyond the kernel's reach) and
    dilations, float32: the direct kernels' padded-row layouts (a row's right padding
    shared with the next row's left one at stride 1) against PyTorch, output and both
    gradients."""
    rng = np.random.default_rng(7)
    done = 0
    while done < 24:
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        dh, dw = (int(v) for v in rng.integers(1, 3, 2))
        sh, sw = (int(v) for v in rng.integers(1, 3, 2))
        ph, pw = (int(v) for v in rng.integers(0, 6, 2))
        H, W = (int(v) for v in rng.integers(1, 14, 2))
        if H + 2 * ph - dh * (kh - 1) < 1 or W + 2 * pw - dw * (kw - 1) < 1:
            continue
        N, C, O = (int(v) for v in rng.integers(1, 6, 3))
        kw_ = dict(stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw))
        _compare(lambda x, w: F.conv2d(x, w, None, **kw_),
                 lambda x, w: TF.conv2d(x, w, None, **kw_), [(N, C, H, W), (O, C, kh, kw)])
        done += 1


# ---------------------------------------------------------------- input gradient: both forms

@pytest.mark.parametrize("mode", [1, -1])
@pytest.mark.parametrize("xs,ws,kw", [
    ((64, 6, 14, 14), (16, 6, 5, 5), {}),                          # LeNet-5's second conv
    ((3, 1, 28, 28), (6, 1, 5, 5), dict(padding=2)),               # its first
    ((1, 3, 11, 13), (5, 3, 5, 3), dict(padding=(1, 0), dilation=(2, 1))),
    ((2, 4, 9, 7), (6, 2, 3, 2), dict(groups=2)),
    ((2, 2, 8, 9), (4, 2, 4, 4), dict(padding="same")),
    ((2, 3, 6, 30), (3, 1, 1, 7), dict(padding=(0, 2), dilation=(1, 2), groups=3)),
    ((1, 1, 5, 5), (1, 1, 5, 5), {}),
])
def test_input_gradient_scatter_and_gather_forms(mode, xs, ws, kw):
    """The float32 direct kernels compute a stride-1 input gradient either as a gather
    (each dx pixel over all taps of the padded gradient) or as a scatter (each tap's
    channel mix added at its shift), chosen by cost: both forms, forced, match PyTorch
    (the gradient of conv2d and conv_transpose2d's forward)."""
    from ember.nn.functional import conv as conv_mod
    if not conv_mod._ck.fast_available():
        pytest.skip("no AVX-512 on this CPU")
    old = conv_mod._ck._set_input_mode(mode)
    try:
        _compare(lambda x, w, b: F.conv2d(x, w, b, **kw),
                 lambda x, w, b: TF.conv2d(x, w, b, **kw), [xs, ws, (ws[0],)])
        if kw.get("padding") != "same":
            xt = (xs[0], ws[0]) + xs[2:]
            _compare(lambda x, w: F.conv_transpose2d(x, w, **kw),
                     lambda x, w: TF.conv_transpose2d(x, w, **kw), [xt, ws])
    finally:
        conv_mod._ck._set_input_mode(old)


# ---------------------------------------------------------------- forward over output channels

@pytest.mark.parametrize("mode", [0, -1])
@pytest.mark.parametrize("xs,ws,kw", [
    ((64, 6, 14, 14), (16, 6, 5, 5), {}),                          # LeNet-5's second conv
    ((1, 6, 14, 14), (16, 6, 5, 5), {}),                           # batch 1
    ((2, 3, 15, 34), (32, 3, 4, 11), {}),                          # 2 channel blocks, 24 cols
    ((3, 2, 9, 19), (16, 2, 3, 7), dict(padding=(1, 0), dilation=(1, 2))),   # OH odd, 7 cols
    ((2, 1, 11, 12), (16, 1, 3, 7), dict(stride=(2, 3))),          # phase-split source
    ((1, 2, 4, 9), (16, 2, 4, 9), dict(padding=(0, 0))),           # a single output column
    ((2, 3, 9, 6), (16, 3, 2, 3), {}),                             # weight gradient kw 3
    ((1, 3, 7, 7), (16, 3, 3, 3), {}),                             # kw 3, 9 tap rows (8 + 1)
    ((3, 4, 11, 13), (32, 4, 3, 5), dict(padding=(2, 0), dilation=(2, 1))),  # kw 5, dh 2
])
def test_forward_over_output_channels(mode, xs, ws, kw):
    """The float32 forward (and, for stride 1 and kernel width 3 or 5, the weight gradient)
    runs vectorised over output channels (16 per register, only the real outputs computed)
    where that pays; forced on and off it matches PyTorch (output and gradients), the two
    forward forms agree bit for bit, and with the fused ReLU too."""
    from ember.nn.functional import conv as conv_mod
    from ember.nn.functional import fused
    ck = conv_mod._ck
    if not ck.fast_available():
        pytest.skip("no AVX-512 on this CPU")
    pair = (lambda v: (v, v) if isinstance(v, int) else v)
    (sh, sw), (ph, pw), (dh, dw) = (pair(kw.get(k, d)) for k, d in
                                    (("stride", 1), ("padding", 0), ("dilation", 1)))
    Wq = ck._src_geometry(xs[1], xs[2], xs[3], ws[2], ws[3], sh, sw, ph, ph, pw, pw, dh, dw)[1]
    OW = (xs[3] + 2 * pw - dw * (ws[3] - 1) - 1) // sw + 1
    assert ck._chan_pays(ws[0], 1, OW, Wq)                         # the case takes the path
    old = ck._set_chan_mode(mode)
    old_b = ck._set_batch_forward(False)     # not over batch lanes (test_nn_conv_batch_input)
    try:
        _compare(lambda x, w, b: F.conv2d(x, w, b, **kw),
                 lambda x, w, b: TF.conv2d(x, w, b, **kw), [xs, ws, (ws[0],)])
        _compare(lambda x, w: F.conv2d(x, w, None, **kw),
                 lambda x, w: TF.conv2d(x, w, None, **kw), [xs, ws])
        x = RNG.standard_normal(xs).astype(np.float32)
        x.reshape(-1)[::7] = np.nan                                # NaN stays NaN in the ReLU
        w = RNG.standard_normal(ws).astype(np.float32)
        b = RNG.standard_normal(ws[0]).astype(np.float32)
        args = (kw.get("stride", 1), kw.get("padding", 0), kw.get("dilation", 1))
        ye = np.asarray(fused.conv2d_relu(ember.asarray(x), ember.asarray(w), ember.asarray(b),
                                          *args))
        yt = TF.relu(TF.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), *args))
        np.testing.assert_allclose(ye, yt.numpy(), rtol=1e-4, atol=1e-4)
        ck._set_chan_mode(-1 - mode)                               # the other form
        yo = np.asarray(fused.conv2d_relu(ember.asarray(x), ember.asarray(w), ember.asarray(b),
                                          *args))
        np.testing.assert_array_equal(ye, yo)
    finally:
        ck._set_chan_mode(old)
        ck._set_batch_forward(old_b)


def test_forward_over_output_channels_is_chosen_for_lenet_not_resnet():
    """The channel form is taken for LeNet's conv2 (10 outputs per 14-column row) and a
    32-channel wide kernel, not for ResNet's same-padded 3x3 (32 of 33) or 6 channels."""
    from ember.nn.functional import conv as conv_mod
    ck = conv_mod._ck
    if not ck.fast_available():
        pytest.skip("no AVX-512 on this CPU")
    assert ck._chan_pays(16, 1, 10, 14)
    assert ck._chan_pays(32, 1, 24, 33)
    assert not ck._chan_pays(16, 1, 32, 33)
    assert not ck._chan_pays(6, 1, 10, 14)
    assert not ck._chan_pays(16, 2, 10, 14)


@pytest.mark.parametrize("xs,ws,kw", [
    ((5, 1, 28, 28), (6, 1, 5, 5), dict(padding=2)),               # LeNet-5's conv1
    ((3, 2, 9, 11), (18, 2, 3, 3), dict(padding=1)),               # three tiles of 6 rows
    ((2, 3, 8, 7), (6, 3, 3, 2), dict(stride=2, padding=(1, 0))),
    ((2, 4, 9, 9), (12, 2, 3, 3), dict(groups=2)),                 # 6 rows per group
])
def test_weight_gradient_six_row_tiles(xs, ws, kw):
    """The float32 weight-gradient kernel tiles rows in sixes (6 x 4 entries) where the
    row count is a multiple of 6 and not of 4: the same sums in the same order as the
    4 x 6 tiles (bit-identical), and PyTorch's gradient."""
    from ember.nn.functional import conv as conv_mod
    if not conv_mod._ck.fast_available():
        pytest.skip("no AVX-512 on this CPU")
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    grads = []
    for six in (1, 0):
        old = conv_mod._ck._set_od_six(six)
        try:
            we = ember.asarray(w, requires_grad=True)
            F.conv2d(ember.asarray(x), we, **kw).sum().backward()
            grads.append(we.grad.numpy())
        finally:
            conv_mod._ck._set_od_six(old)
    np.testing.assert_array_equal(grads[0], grads[1])
    wt = torch.tensor(w, requires_grad=True)
    TF.conv2d(torch.tensor(x), wt, **kw).sum().backward()
    np.testing.assert_allclose(grads[0], wt.grad.numpy(), rtol=1e-4,
                               atol=1e-4 * max(1.0, float(np.abs(wt.grad.numpy()).max())))
