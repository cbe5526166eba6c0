"""Autograd on 'cuda': gradients computed on the GPU equal the CPU's (float64).

Each case runs the same function on CPU leaves and on copies of them on the
GPU, back-propagates the same upstream gradient, and compares the outputs and
every leaf's ``.grad`` (which must live on the GPU).  The gradient rules are
ember ops, so the backward pass itself runs on the device.  Skipped, never
faked, without a GPU (see cuda_helpers.py).
"""
from functools import partial

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from cuda_helpers import DEV, GPU_MARK, assert_on_device, assert_same, gpu, host, real_gpu
import helpers

pytestmark = GPU_MARK


rnd = partial(helpers.rnd, low=-2.0, high=2.0)


def pos(*shape, seed=0):
    return rnd(*shape, seed=seed, low=0.5, high=2.0)


def leaves(arrays, device):
    out = []
    for a in arrays:
        x = ember.asarray(a.copy()) if device == "cpu" else gpu(a)
        if a.dtype.kind == "f":
            x.requires_grad = True
        out.append(x)
    return out


def run_both(fn, arrays, rtol=1e-10, atol=1e-10):
    """Forward + backward on both devices; outputs and grads must agree."""
    results = {}
    for device in ("cpu", DEV):
        xs = leaves(arrays, device)
        y = fn(*xs)
        ys = y if isinstance(y, (tuple, list)) else (y,)
        total = None
        for i, yi in enumerate(ys):
            g = np.random.default_rng(100 + i).standard_normal(yi.shape)
            gy = ember.asarray(g.astype(np.float64)).astype(yi.dtype)
            gy = gy if device == "cpu" else gpu(gy)
            term = (yi * gy).sum()
            total = term if total is None else total + term
        total.backward()
        results[device] = (ys, [x.grad if x.requires_grad else None for x in xs])
    (yc, gc), (yg, gg) = results["cpu"], results[DEV]
    for a, b in zip(yg, yc):
        assert_same(a, b.detach(), rtol=rtol, atol=atol)
    for a, b in zip(gg, gc):
        if b is None:
            assert a is None
            continue
        assert a is not None, "no gradient on the GPU leaf"
        assert_on_device(a)
        assert_same(a, b, rtol=rtol, atol=atol)


CASES = [
    # elementwise
    ("add_broadcast", lambda a, b: a + b, [rnd(3, 4), rnd(4, seed=1)]),
    ("sub_mul", lambda a, b: (a - b) * a, [rnd(3, 4), rnd(3, 1, seed=1)]),
    ("div", lambda a, b: a / b, [rnd(3, 4), pos(3, 4, seed=1)]),
    ("pow", lambda a, b: a ** b, [pos(3, 4), rnd(3, 4, seed=1)]),
    ("pow_scalar", lambda a: a ** 3 + 2.0 ** a, [rnd(3, 4)]),
    ("scalar_ops", lambda a: (1 - a) / 2 + 3 * a, [rnd(5)]),
    ("exp_log", lambda a: ember.exp(a) + ember.log(a * a + 1), [rnd(3, 4)]),
    ("sqrt_rsqrt", lambda a: ember.sqrt(a) + 1 / ember.sqrt(a), [pos(6)]),
    ("trig", lambda a: ember.sin(a) * ember.cos(a) + ember.tan(a / 4), [rnd(3, 4)]),
    ("tanh_sinh", lambda a: ember.tanh(a) + ember.sinh(a) + ember.arctan(a), [rnd(3, 4)]),
    ("abs_sign", lambda a: ember.abs(a) * 2, [rnd(3, 4)]),
    ("maximum", lambda a, b: ember.maximum(a, b) + ember.minimum(a, b) * 2, [rnd(3, 4), rnd(3, 4, seed=1)]),
    ("where", lambda a, b: ember.where(a > 0, a, b * 2), [rnd(3, 4), rnd(4, seed=1)]),
    ("clip", lambda a: ember.clip(a, -1, 1), [rnd(3, 4)]),
    ("logaddexp", lambda a, b: ember.logaddexp(a, b), [rnd(3, 4), rnd(3, 4, seed=1)]),
    ("noncontiguous", lambda a: ember.exp(a.T[::2]) * a.T[1::2], [rnd(4, 6)]),
    ("negative_stride", lambda a: a[::-1] * a, [rnd(5)]),
    # reductions
    ("sum_axis", lambda a: ember.sum(a, axis=1), [rnd(3, 4, 5)]),
    ("sum_tuple_keepdims", lambda a: ember.sum(a, axis=(0, 2), keepdims=True), [rnd(3, 4, 5)]),
    ("mean", lambda a: a.mean(axis=-1), [rnd(3, 4)]),
    ("var_std", lambda a: ember.var(a, axis=0) + ember.std(a, axis=1, ddof=1).sum(), [rnd(4, 5)]),
    ("max_min", lambda a: ember.max(a, axis=1) + ember.min(a, axis=1), [rnd(4, 5)]),
    ("max_all", lambda a: ember.max(a), [rnd(4, 5)]),
    ("prod", lambda a: ember.prod(a, axis=0), [pos(3, 4)]),
    ("logsumexp", lambda a: ember.logsumexp(a, axis=-1), [rnd(3, 6)]),
    ("cumsum", lambda a: ember.cumsum(a, axis=1), [rnd(3, 4)]),
    # linear algebra
    ("matmul", lambda a, b: a @ b, [rnd(3, 4), rnd(4, 5, seed=1)]),
    ("matmul_batched_broadcast", lambda a, b: a @ b, [rnd(2, 3, 4), rnd(4, 2, seed=1)]),
    ("matmul_vec", lambda a, b: a @ b, [rnd(3, 4), rnd(4, seed=1)]),
    ("matmul_transposed", lambda a, b: a.T @ b, [rnd(4, 3), rnd(4, 5, seed=1)]),
    ("einsum", lambda a, b: ember.einsum("bij,bjk->bik", a, b), [rnd(2, 3, 4), rnd(2, 4, 2, seed=1)]),
    # manipulation
    ("reshape_transpose", lambda a: ember.transpose(a.reshape(4, 6), (1, 0)) * 2, [rnd(2, 3, 4)]),
    ("concatenate", lambda a, b: ember.concatenate([a, b], axis=1) ** 2, [rnd(2, 3), rnd(2, 2, seed=1)]),
    ("stack", lambda a, b: ember.stack([a, b]) * 3, [rnd(2, 3), rnd(2, 3, seed=1)]),
    ("split", lambda a: ember.split(a, 2, axis=1), [rnd(3, 4)]),
    ("pad", lambda a: ember.pad(a, ((1, 0), (2, 1))), [rnd(3, 4)]),
    ("flip_roll", lambda a: ember.roll(ember.flip(a, axis=0), 1, axis=1), [rnd(3, 4)]),
    ("tril_triu", lambda a: ember.tril(a) + ember.triu(a, 1) * 3, [rnd(4, 4)]),
    ("broadcast_to", lambda a: ember.broadcast_to(a, (3, 4)) * 2, [rnd(1, 4)]),
    ("squeeze_expand", lambda a: ember.expand_dims(ember.squeeze(a, 1), 0), [rnd(3, 1, 4)]),
    # indexing
    ("basic_index", lambda a: a[1:, ::2] * 2, [rnd(3, 4)]),
    ("int_array_index_repeats", lambda a: a[[0, 2, 2, 0]], [rnd(3, 4)]),
    ("bool_mask", lambda a: a[a > 0], [rnd(3, 4)]),
    ("take", lambda a: ember.take(a, ember.asarray(np.array([3, 0, 3]), device=a.device), axis=1),
     [rnd(3, 4)]),
    ("take_along_axis", lambda a: ember.take_along_axis(
        a, ember.asarray(np.array([[0, 0], [1, 0], [2, 2]]), device=a.device), axis=1), [rnd(3, 4)]),
    # nn functional
    ("softmax", lambda a: F.softmax(a, dim=-1), [rnd(3, 5)]),
    ("log_softmax", lambda a: F.log_softmax(a, dim=0), [rnd(3, 5)]),
    ("relu_gelu_silu", lambda a: F.relu(a) + F.gelu(a) + F.silu(a) + F.sigmoid(a), [rnd(3, 5)]),
    ("layer_norm", lambda a, w, b: F.layer_norm(a, (5,), w, b), [rnd(3, 5), rnd(5, seed=1), rnd(5, seed=2)]),
    ("layer_norm_one_element", lambda a, w, b: F.layer_norm(a, (1,), w, b) * a,
     [rnd(3, 1), rnd(1, seed=1), rnd(1, seed=2)]),
    ("piecewise_constant_zero_grad",
     lambda a: ember.floor(a) * a + ember.sign(a) + ember.round(a, 1) + ember.trunc(a) * 2,
     [rnd(3, 4)]),
    ("vector_norm_dim", lambda a: ember.linalg.vector_norm(a, 3, dim=1, keepdim=True) * a,
     [rnd(3, 4)]),
    ("matrix_norm_positional", lambda a: ember.linalg.matrix_norm(a, "fro", (0, 2), True) * a,
     [rnd(3, 4, 2)]),
    ("linear", lambda x, w, b: F.linear(x, w, b), [rnd(4, 3), rnd(5, 3, seed=1), rnd(5, seed=2)]),
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1),
     [rnd(2, 3, 6, 6), rnd(4, 3, 3, 3, seed=1), rnd(4, seed=2)]),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [rnd(2, 3, 6, 6)]),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), [rnd(2, 3, 7, 7)]),
    ("mse", lambda a, b: F.mse_loss(a, b), [rnd(4, 3), rnd(4, 3, seed=1)]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_gradient_matches_cpu(case):
    name, fn, arrays = case
    run_both(fn, arrays)


def test_cross_entropy_gradient():
    x = rnd(6, 5)
    y = np.array([0, 4, 2, 2, 1, 3])
    res = {}
    for device in ("cpu", DEV):
        xe = ember.asarray(x.copy()) if device == "cpu" else gpu(x)
        xe.requires_grad = True
        ye = ember.asarray(y) if device == "cpu" else gpu(y)
        loss = F.cross_entropy(xe, ye)
        loss.backward()
        res[device] = (loss, xe.grad)
    assert_same(res[DEV][0].detach(), res["cpu"][0].detach(), rtol=1e-10)
    assert_same(res[DEV][1], res["cpu"][1], rtol=1e-10, atol=1e-12)


def test_embedding_gradient_accumulates_repeats():
    w = rnd(10, 4)
    idx = np.array([[1, 2, 1], [9, 1, 0]])
    res = {}
    for device in ("cpu", DEV):
        we = ember.asarray(w.copy()) if device == "cpu" else gpu(w)
        we.requires_grad = True
        ie = ember.asarray(idx) if device == "cpu" else gpu(idx)
        (F.embedding(ie, we) ** 2).sum().backward()
        res[device] = we.grad
    assert_same(res[DEV], res["cpu"], rtol=1e-10)


def test_grad_accumulates_over_two_backwards_and_grad_api():
    a = rnd(3, 4)
    res = {}
    for device in ("cpu", DEV):
        x = ember.asarray(a.copy()) if device == "cpu" else gpu(a)
        x.requires_grad = True
        (x * x).sum().backward()
        (x * 3).sum().backward()
        (gx,) = ember.autograd.grad((x ** 3).sum(), [x])
        res[device] = (x.grad, gx)
    assert_same(res[DEV][0], res["cpu"][0])
    assert_same(res[DEV][1], res["cpu"][1])


def test_double_backward_on_device():
    a = rnd(5)
    res = {}
    for device in ("cpu", DEV):
        x = ember.asarray(a.copy()) if device == "cpu" else gpu(a)
        x.requires_grad = True
        (g,) = ember.autograd.grad((ember.sin(x) * x).sum(), [x], create_graph=True)
        g.sum().backward()
        res[device] = (g.detach(), x.grad)
    assert_same(res[DEV][0], res["cpu"][0])
    assert_same(res[DEV][1], res["cpu"][1])


def test_mlp_backward_matches_cpu():
    """Backward of a small MLP: every parameter's .grad on the GPU equals the CPU's."""
    from ember import nn
    ember.random.manual_seed(0)
    model_c = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                            nn.Linear(16, 3)).to(ember.float64)
    model_g = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                            nn.Linear(16, 3)).to(ember.float64)
    model_g.load_state_dict(model_c.state_dict())
    model_g.to(DEV)
    x, y = rnd(10, 8), np.random.default_rng(1).integers(0, 3, 10)
    lc = F.cross_entropy(model_c(ember.asarray(x)), ember.asarray(y))
    lg = F.cross_entropy(model_g(gpu(x)), gpu(y))
    lc.backward()
    lg.backward()
    assert_same(lg.detach(), lc.detach(), rtol=1e-10)
    for (nc, pc), (ng, pg) in zip(model_c.named_parameters(), model_g.named_parameters()):
        assert nc == ng
        assert_on_device(pg)
        assert_on_device(pg.grad)
        assert_same(pg.grad, pc.grad, rtol=1e-9, atol=1e-12)


def test_float32_gradients_close():
    a, b = rnd(32, 16).astype(np.float32), rnd(16, 8, seed=1).astype(np.float32)
    run_both(lambda x, w: ember.tanh(x @ w).sum(axis=0), [a, b], rtol=1e-4, atol=1e-5)


def test_backward_with_no_grad_and_detach_on_device():
    x = gpu(rnd(3))
    x.requires_grad = True
    with ember.no_grad():
        y = x * 2
    assert not y.requires_grad
    z = (x.detach() * x).sum()
    z.backward()
    assert_on_device(x.grad)
    np.testing.assert_allclose(host(x.grad), host(x.detach()))


@real_gpu
def test_gradient_of_gpu_leaf_with_cpu_upstream_is_an_error():
    x = gpu(rnd(3))
    x.requires_grad = True
    y = x * 2
    with pytest.raises((RuntimeError, ValueError, TypeError), match="(?s)(cuda.*cpu|cpu.*cuda)"):
        y.backward(ember.ones(3, dtype=ember.float64))
