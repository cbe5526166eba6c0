"""nn.Sequential runs a ReLU followed by a MaxPool2d as pool, then ReLU (max pooling
commutes with ReLU): results and gradients must equal PyTorch's and the written order's,
and nothing outside the Sequential may see the swap."""
import numpy as np
import pytest

import ember
from ember import nn
from ember.autograd import gradcheck
from ember.nn.modules import container

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(77)


def _lenet(lib, dtype):
    net = lib.Sequential(lib.Conv2d(1, 3, 3, padding=1), lib.ReLU(), lib.MaxPool2d(2),
                         lib.Conv2d(3, 4, 3), lib.ReLU(), lib.MaxPool2d(2, stride=1, padding=1),
                         lib.Flatten(), lib.Linear(4 * 3 * 3, 5), lib.ReLU())
    return net.double() if dtype == np.float64 else net


def _run(net, x, g):
    xe = ember.asarray(x, requires_grad=True)
    y = net(xe)
    (y * ember.asarray(g)).sum().backward()
    return y, xe.grad, [p.grad for p in net.parameters()]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lenet_like_sequential_matches_torch_and_written_order(dtype):
    tnet = _lenet(torch.nn, dtype)
    enet = _lenet(nn, dtype)
    enet.load_state_dict({k: ember.asarray(v.detach().numpy().copy())
                          for k, v in tnet.state_dict().items()})
    # integers: many ties and exact zeros after the first layer
    x = RNG.integers(-3, 4, (3, 1, 8, 8)).astype(dtype)
    g = RNG.standard_normal((3, 5)).astype(dtype)
    xt = torch.tensor(x, requires_grad=True)
    yt = tnet(xt)
    yt.backward(torch.tensor(g))
    y1, gx1, gp1 = _run(enet, x, g)
    assert "relu" in repr(enet[:3](ember.asarray(x[:1]), ).grad_fn).lower()   # swapped
    before = container.swap_relu_pool
    container.swap_relu_pool = False
    try:
        for p in enet.parameters():
            p.grad = None
        assert "pool" in repr(enet[:3](ember.asarray(x[:1])).grad_fn).lower()
        y0, gx0, gp0 = _run(enet, x, g)
    finally:
        container.swap_relu_pool = before
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(y1), np.asarray(y0))
    np.testing.assert_array_equal(np.asarray(gx1), np.asarray(gx0))
    for a, b in zip(gp1, gp0):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(np.asarray(y1), yt.detach().numpy(), **tol)
    np.testing.assert_allclose(np.asarray(gx1), xt.grad.numpy(), **tol)
    for a, (name, p) in zip(gp1, tnet.named_parameters()):
        np.testing.assert_allclose(np.asarray(a), p.grad.numpy(), err_msg=name, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_pool_ties_zeros_nan_match_torch(dtype):
    x = RNG.integers(-2, 3, (2, 3, 6, 10)).astype(dtype)
    x[0, 1, 2, 3] = x[1, 2, 5, 0] = np.nan
    x[0, 0, :2, :2] = -1.0                          # a window with no positive value
    g = RNG.standard_normal((2, 3, 3, 5)).astype(dtype)
    xe = ember.asarray(x, requires_grad=True)
    ye = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2))(xe)
    assert "relu" in repr(ye.grad_fn).lower()
    (ye * ember.asarray(g)).sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.MaxPool2d(2))(xt)
    yt.backward(torch.tensor(g))
    np.testing.assert_array_equal(np.asarray(ye), yt.detach().numpy())
    np.testing.assert_array_equal(np.asarray(xe.grad), xt.grad.numpy())


def test_gradcheck_relu_pool_sequential():
    seq = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2), nn.ReLU(), nn.MaxPool2d(3, 1, 1))
    x = ember.asarray(RNG.standard_normal((2, 2, 6, 8)), requires_grad=True)
    assert gradcheck(seq, (x,))


def test_swap_is_not_observable():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    # a hook on the ReLU sees its full-size output (the written order runs)
    seen = []
    relu = nn.ReLU()
    relu.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    nn.Sequential(relu, nn.MaxPool2d(2))(ember.asarray(x))
    assert seen == [(1, 2, 4, 4)]
    # an inplace ReLU first in the Sequential writes into its input, as in PyTorch
    xe = ember.asarray(x.copy())
    nn.Sequential(nn.ReLU(inplace=True), nn.MaxPool2d(2))(xe)
    np.testing.assert_array_equal(np.asarray(xe), np.maximum(x, 0))
    # indices returned: they index the ReLU's output, so no swap (and the same indices)
    y, idx = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2, return_indices=True))(ember.asarray(x))
    _, it = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.MaxPool2d(2, return_indices=True))(
        torch.tensor(x))
    np.testing.assert_array_equal(np.asarray(idx), it.numpy())
    # a trailing ReLU and a ReLU before another module still run
    s = nn.Sequential(nn.ReLU(), nn.Flatten(), nn.ReLU())
    np.testing.assert_array_equal(np.asarray(s(ember.asarray(x))),
                                  np.maximum(x, 0).reshape(1, -1))
