"""Fused layer + ReLU (ember.nn.functional.fused, nn.Sequential's fusion) against PyTorch
and finite differences; the fusion must not be observable except through speed."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.autograd import gradcheck, gradgradcheck
from ember.nn.functional import fused
from ember.nn.modules import container
from ember._kernels.cpu import fused as fk

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(2025)


@pytest.fixture(autouse=True)
def _fusion_on():
    """These tests check the Sequential fusion switched on, the convolution's too (off by
    default)."""
    before = container.fuse_enabled, container.fuse_conv_enabled
    container.fuse_enabled = container.fuse_conv_enabled = True
    yield
    container.fuse_enabled, container.fuse_conv_enabled = before


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def _pair(shape, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    return (ember.asarray(a.copy(), requires_grad=True),
            torch.tensor(a.copy(), requires_grad=True))


def _close(e, t, dtype):
    np.testing.assert_allclose(np.asarray(e), t.detach().numpy(), **_tol(dtype))


def _node_name(y):
    return repr(y.grad_fn)


# ---------------------------------------------------------------- kernels against NumPy

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 7, 1), (3, 4, 33), (0, 3, 4), (2, 3, 0), (64, 16, 1024)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_kernels_match_numpy(dtype, shape, with_bias):
    y = RNG.standard_normal(shape).astype(dtype)
    b = RNG.standard_normal(shape[1]).astype(dtype) if with_bias else None
    ref = np.maximum(y + (b[:, None] if with_bias else 0), 0)
    got = y.copy()
    fk.bias_relu(got, b)
    np.testing.assert_array_equal(got, ref)
    g = RNG.standard_normal(shape).astype(dtype)
    gx = np.empty_like(g)
    gb = np.empty(shape[1], dtype) if with_bias else None
    fk.relu_grad_bias(g, ref, gx, gb)
    np.testing.assert_array_equal(gx, np.where(ref > 0, g, 0))
    if with_bias:
        np.testing.assert_allclose(gb, np.where(ref > 0, g, 0).sum(axis=(0, 2)),
                                   rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_kernels_nan_and_errors():
    y = np.array([[[np.nan, -1.0, 2.0]]], np.float32)
    fk.bias_relu(y, None)
    assert np.isnan(y[0, 0, 0]) and y[0, 0, 1] == 0 and y[0, 0, 2] == 2
    g = np.ones_like(y)
    gx = np.empty_like(y)
    fk.relu_grad_bias(g, y, gx, None)
    assert gx.tolist() == [[[1.0, 0.0, 1.0]]]          # as ReLU's backward: NaN passes g
    with pytest.raises(ValueError, match="bias_relu"):
        fk.bias_relu(np.zeros((1, 3, 1), np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="relu_grad_bias"):
        fk.relu_grad_bias(g, np.zeros((1, 1, 2), np.float32), gx, None)


def _special_values(shape, dtype):
    """Normal values with NaN, infinities and signed zeros sprinkled in."""
    a = RNG.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    for k, v in enumerate((np.nan, np.inf, -np.inf, 0.0, -0.0)):
        flat[k * 7 % max(flat.size, 1):][:1] = v
    return a


@pytest.fixture(params=[0, 1, 2], ids=["baseline", "avx2", "avx512"])
def isa(request):
    """Each loop variant of fused_simd.h this CPU has (a lower one where it lacks it)."""
    name = fk._select_isa(request.param)
    yield name
    fk._select_isa(2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, C", [(1, 1), (3, 7), (5, 16), (4, 17), (65, 40), (2, 300),
                                     (0, 5), (3, 0)])
def test_row_kernels_every_variant_against_numpy(isa, dtype, rows, C):
    """rows_bias_relu / rows_relu_grad_bias (a linear layer's (rows, C) output, on ember
    arrays): NumPy's maximum forward (NaN kept), g where y > 0 or NaN backward, the
    column sums in float64; every variant gives the same bits."""
    y0 = _special_values((rows, C), dtype)
    b = RNG.standard_normal(C).astype(dtype)
    for bias in (b, None):
        y = ember.asarray(y0.copy())
        fk.rows_bias_relu(y, None if bias is None else ember.asarray(bias))
        ref = np.maximum(y0 + (0 if bias is None else bias), 0)
        np.testing.assert_array_equal(np.asarray(y), ref)
    g = _special_values((rows, C), dtype)[::-1].copy()
    g[np.isinf(g)] = 1.5                                  # keep the sums finite
    want = np.where((ref > 0) | np.isnan(ref), g, 0)
    gx, gb = fk.rows_relu_grad_bias(ember.asarray(g), ember.asarray(ref), True)
    np.testing.assert_array_equal(np.asarray(gx), want)
    np.testing.assert_allclose(np.asarray(gb), want.astype(np.float64).sum(axis=0),
                               rtol=1e-6 if dtype == np.float32 else 1e-13, atol=1e-6)
    assert np.asarray(gb).dtype == dtype
    gx2, gb2 = fk.rows_relu_grad_bias(ember.asarray(g), ember.asarray(ref), False)
    assert gb2 is None
    np.testing.assert_array_equal(np.asarray(gx2), want)
    fk._select_isa(0)
    _, gb0 = fk.rows_relu_grad_bias(ember.asarray(g), ember.asarray(ref), True)
    np.testing.assert_array_equal(np.asarray(gb), np.asarray(gb0))      # the same bits


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 1), (3, 4, 15), (2, 5, 16), (2, 3, 47)])
def test_channel_kernels_every_variant_against_numpy(isa, dtype, shape):
    y0 = _special_values(shape, dtype)
    b = RNG.standard_normal(shape[1]).astype(dtype)
    ref = np.maximum(y0 + b[:, None], 0)
    y = y0.copy()
    fk.bias_relu(y, b)
    np.testing.assert_array_equal(y, ref)
    g = RNG.standard_normal(shape).astype(dtype)
    gx, gb = np.empty_like(g), np.empty(shape[1], dtype)
    fk.relu_grad_bias(g, ref, gx, gb)
    want = np.where((ref > 0) | np.isnan(ref), g, 0)
    np.testing.assert_array_equal(gx, want)
    np.testing.assert_allclose(gb, want.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)


def test_row_kernels_threads_give_the_same_bits():
    """Above the parallel threshold the columns are split over threads; each column's sum
    keeps its row order, so one and two threads agree bit for bit."""
    g = RNG.standard_normal((300, 200)).astype(np.float32)
    y = np.maximum(RNG.standard_normal((300, 200)).astype(np.float32), 0)
    before = ember.get_num_threads()
    try:
        out = []
        for nt in (1, 2):
            ember.set_num_threads(nt)
            gx, gb = fk.rows_relu_grad_bias(ember.asarray(g), ember.asarray(y), True)
            out.append((np.asarray(gx), np.asarray(gb)))
            yy = ember.asarray(g.copy())
            fk.rows_bias_relu(yy, ember.asarray(g[0].copy()))
            np.testing.assert_array_equal(np.asarray(yy), np.maximum(g + g[0], 0))
    finally:
        ember.set_num_threads(before)
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


def test_row_kernels_refuse_or_decline_other_arrays():
    y = ember.zeros((4, 3))
    with pytest.raises(ValueError, match="rows_bias_relu"):
        fk.rows_bias_relu(y, ember.zeros(2))
    with pytest.raises(ValueError, match="rows_bias_relu"):
        fk.rows_bias_relu(y, ember.zeros(3, dtype=np.float64))
    with pytest.raises(ValueError, match="rows_bias_relu"):
        fk.rows_bias_relu(ember.zeros((4, 6))[:, ::2], None)
    with pytest.raises(ValueError, match="rows_bias_relu"):
        fk.rows_bias_relu(ember.zeros((4, 3), dtype=np.int32), None)
    # the backward declines (None: the caller's general path) what it cannot take
    assert fk.rows_relu_grad_bias(ember.zeros((3, 4)).T, y, True) is None
    assert fk.rows_relu_grad_bias(ember.zeros((4, 3), dtype=np.float64), y, True) is None
    assert fk.rows_relu_grad_bias(ember.zeros((4, 2)), y, False) is None


# ---------------------------------------------------------------- linear_relu

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xshape", [(6, 5), (2, 3, 5), (0, 5), (1, 5)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_relu_matches_torch(dtype, xshape, with_bias):
    xe, xt = _pair(xshape, dtype)
    we, wt = _pair((4, 5), dtype)
    be, bt = _pair((4,), dtype) if with_bias else (None, None)
    ye = fused.linear_relu(xe, we, be)
    yt = TF.relu(TF.linear(xt, wt, bt))
    _close(ye, yt, dtype)
    ge = RNG.standard_normal(yt.shape).astype(dtype)
    ye.backward(ember.asarray(ge))
    yt.backward(torch.tensor(ge))
    _close(xe.grad, xt.grad, dtype)
    _close(we.grad, wt.grad, dtype)
    if with_bias:
        _close(be.grad, bt.grad, dtype)


def test_linear_relu_broadcast_gradient_and_partial_requires_grad():
    xe, xt = _pair((7, 3), np.float32)
    we, wt = _pair((5, 3), np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    be, bt = ember.asarray(b), torch.tensor(b)              # bias without grad
    fused.linear_relu(xe, we, be).sum().backward()          # stride-0 upstream gradient
    TF.relu(TF.linear(xt, wt, bt)).sum().backward()
    _close(xe.grad, xt.grad, np.float32)
    _close(we.grad, wt.grad, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_relu_transposed_input_and_frozen_weight_match_torch(dtype):
    """A non-contiguous 2-d input (the kernel-direct backward's GEMMs read it strided)
    and a weight without grad (only the input's and the bias's gradients)."""
    a = RNG.standard_normal((5, 7)).astype(dtype)
    w = RNG.standard_normal((4, 5)).astype(dtype)
    xe, xt = ember.asarray(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    be, bt = _pair((4,), dtype)
    ge = RNG.standard_normal((7, 4)).astype(dtype)
    ye = fused.linear_relu(xe.T, ember.asarray(w), be)
    yt = TF.relu(TF.linear(xt.T, torch.tensor(w), bt))
    _close(ye, yt, dtype)
    ye.backward(ember.asarray(ge))
    yt.backward(torch.tensor(ge))
    _close(xe.grad, xt.grad, dtype)
    _close(be.grad, bt.grad, dtype)


def test_linear_relu_gradcheck_and_double_backward():
    x = ember.asarray(RNG.standard_normal((4, 3)), requires_grad=True)
    w = ember.asarray(RNG.standard_normal((5, 3)), requires_grad=True)
    b = ember.asarray(RNG.standard_normal(5), requires_grad=True)
    assert gradcheck(fused.linear_relu, (x, w, b))
    assert gradgradcheck(fused.linear_relu, (x, w, b))


def test_linear_relu_double_backward_matches_torch():
    xe, xt = _pair((4, 3), np.float64)
    we, wt = _pair((5, 3), np.float64)
    ge = ember.autograd.grad((fused.linear_relu(xe, we) ** 2).sum(), xe, create_graph=True)[0]
    gt = torch.autograd.grad((TF.relu(TF.linear(xt, wt)) ** 2).sum(), xt, create_graph=True)[0]
    _close(ge, gt, np.float64)
    (ge2,) = ember.autograd.grad((ge * ge).sum(), we)
    (gt2,) = torch.autograd.grad((gt * gt).sum(), wt)
    _close(ge2, gt2, np.float64)


def test_linear_relu_bad_input_names_the_op():
    with pytest.raises(ValueError, match="linear_relu"):
        fused.linear_relu(ember.ones((2, 3)), ember.ones((4, 2)))
    with pytest.raises(ValueError, match="linear_relu"):
        fused.linear_relu(ember.ones((2, 3), dtype=np.int64), ember.ones((4, 3), dtype=np.int64))


# ---------------------------------------------------------------- conv2d_relu

CONV_CASES = [
    # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1),
    ((2, 4, 9, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    ((3, 2, 6, 6), (5, 2, 1, 1), 2, 0, 1, 1),
    ((1, 1, 5, 5), (2, 1, 5, 5), 1, 2, 1, 1),
    ((2, 2, 6, 5), (3, 2, 2, 2), 1, "same", 1, 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv2d_relu_matches_torch(dtype, case, with_bias):
    xs, ws, s, p, d, g = case
    xe, xt = _pair(xs, dtype)
    we, wt = _pair(ws, dtype)
    be, bt = _pair((ws[0],), dtype) if with_bias else (None, None)
    ye = fused.conv2d_relu(xe, we, be, s, p, d, g)
    yt = TF.relu(TF.conv2d(xt, wt, bt, s, p, d, g))
    _close(ye, yt, dtype)
    ge = RNG.standard_normal(tuple(yt.shape)).astype(dtype)
    ye.backward(ember.asarray(ge))
    yt.backward(torch.tensor(ge))
    _close(xe.grad, xt.grad, dtype)
    _close(we.grad, wt.grad, dtype)
    if with_bias:
        _close(be.grad, bt.grad, dtype)


def test_conv2d_relu_empty_batch():
    x = ember.zeros((0, 2, 5, 5), requires_grad=True)
    w = ember.ones((3, 2, 3, 3), requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    y = fused.conv2d_relu(x, w, b, padding=1)
    assert y.shape == (0, 3, 5, 5)
    y.sum().backward()
    assert np.asarray(b.grad).tolist() == [0.0, 0.0, 0.0]
    assert np.asarray(w.grad).sum() == 0


def test_conv2d_relu_gradcheck():
    x = ember.asarray(RNG.standard_normal((2, 4, 5, 4)), requires_grad=True)
    w = ember.asarray(RNG.standard_normal((4, 2, 3, 2)), requires_grad=True)
    b = ember.asarray(RNG.standard_normal(4), requires_grad=True)
    f = lambda x, w, b: fused.conv2d_relu(x, w, b, (2, 1), 1, (1, 2), 2)  # noqa: E731
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


# ---------------------------------------------------------------- nn.Sequential's fusion

def _mlp(lib_nn, inplace=False):
    return lib_nn.Sequential(lib_nn.Linear(5, 8), lib_nn.ReLU(inplace=inplace),
                             lib_nn.Linear(8, 3), lib_nn.ReLU())


def _same_weights(em, tm):
    em.load_state_dict({k: ember.asarray(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})


@pytest.mark.parametrize("inplace", [False, True])
def test_sequential_fuses_and_matches_torch(inplace):
    torch.manual_seed(0)
    tm = _mlp(torch.nn, inplace)
    em = _mlp(nn, inplace)
    _same_weights(em, tm)
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    ye, yt = em(ember.asarray(x)), tm(torch.tensor(x))
    assert "LinearRelu" in _node_name(ye)
    _close(ye, yt, np.float32)
    ye.sum().backward()
    yt.sum().backward()
    for (n, pe), (_, pt) in zip(em.named_parameters(), tm.named_parameters()):
        _close(pe.grad, pt.grad, np.float32)


def test_sequential_hooks_see_the_pre_activation():
    """A forward hook on the Linear (or the ReLU) turns the fusion off for that pair:
    the hook gets the same arrays as without fusion."""
    torch.manual_seed(0)
    tm, em = _mlp(torch.nn), _mlp(nn)
    _same_weights(em, tm)
    seen = {}
    em[0].register_forward_hook(lambda m, i, o: seen.__setitem__("e", o))
    tm[0].register_forward_hook(lambda m, i, o: seen.__setitem__("t", o))
    pre = {}
    em[3].register_forward_pre_hook(lambda m, i: pre.__setitem__("e", i[0]))
    tm[3].register_forward_pre_hook(lambda m, i: pre.__setitem__("t", i[0]))
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    ye, yt = em(ember.asarray(x)), tm(torch.tensor(x))
    _close(seen["e"], seen["t"], np.float32)
    assert np.asarray(seen["e"]).min() < 0                 # the pre-activation, not relu's
    _close(pre["e"], pre["t"], np.float32)
    assert "LinearRelu" not in _node_name(ye)
    _close(ye, yt, np.float32)


def test_sequential_retain_grad_on_output_and_switch_off():
    torch.manual_seed(0)
    tm, em = _mlp(torch.nn), _mlp(nn)
    _same_weights(em, tm)
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    ye, yt = em(ember.asarray(x)), tm(torch.tensor(x))
    ye.retain_grad()
    yt.retain_grad()
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    _close(ye.grad, yt.grad, np.float32)
    container.fuse_enabled = False
    try:
        assert "LinearRelu" not in _node_name(em(ember.asarray(x)))
    finally:
        container.fuse_enabled = True


def test_sequential_conv_relu_matches_torch_and_keeps_other_cases():
    torch.manual_seed(0)

    def net(lib_nn):
        return lib_nn.Sequential(lib_nn.Conv2d(2, 4, 3, padding=1), lib_nn.ReLU(),
                                 lib_nn.MaxPool2d(2), lib_nn.Conv2d(4, 3, 3, stride=2,
                                                                    padding_mode="reflect",
                                                                    padding=1),
                                 lib_nn.ReLU())
    tm, em = net(torch.nn), net(nn)
    _same_weights(em, tm)
    x = RNG.standard_normal((3, 2, 8, 8)).astype(np.float32)
    ye, yt = em(ember.asarray(x)), tm(torch.tensor(x))
    _close(ye, yt, np.float32)
    assert "ConvRelu" not in _node_name(ye)          # the reflect-padded conv is not fused
    assert "ConvRelu" in repr(em[:2](ember.asarray(x)).grad_fn)
    ye.sum().backward()
    yt.sum().backward()
    for pe, pt in zip(em.parameters(), tm.parameters()):
        _close(pe.grad, pt.grad, np.float32)
    # unbatched input: not fused, still right
    ye1, yt1 = em(ember.asarray(x[0])), tm(torch.tensor(x[0]))
    _close(ye1, yt1, np.float32)


def test_sequential_of_subclass_is_not_fused():
    class MyLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2
    m = nn.Sequential(MyLinear(3, 2), nn.ReLU())
    x = ember.asarray(RNG.standard_normal((4, 3)).astype(np.float32))
    ref = F.relu(F.linear(x, m[0].weight, m[0].bias) * 2)
    np.testing.assert_allclose(np.asarray(m(x)), np.asarray(ref), rtol=1e-6)


def test_sequential_under_cpu_autocast_is_not_fused():
    """Autocast casts linear's arguments by op name: the pair runs unfused there (bfloat16
    result, as without fusion)."""
    m = _mlp(nn)
    x = ember.asarray(RNG.standard_normal((4, 5)).astype(np.float32))
    with ember.amp.autocast("cpu"):
        y = m(x)
        ref = F.relu(m[2](F.relu(m[0](x))))
    assert y.dtype == ref.dtype
    np.testing.assert_array_equal(np.asarray(y.astype(np.float32)),
                                  np.asarray(ref.astype(np.float32)))
    assert "LinearRelu" not in _node_name(y)
