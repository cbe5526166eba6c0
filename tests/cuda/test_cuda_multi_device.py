"""Several GPUs in one process: every op runs on its arrays' device, whichever device is
current, and leaves the current device as it found it (PyTorch's device guard).

Needs two CUDA devices: a multi-GPU machine, or the emulation with two devices
(``EMBER_CUDA_EMULATION=1 EMBER_CUDA_EMU_DEVICES=2``, whose devices have no peer
access, so an op that computes on the wrong device fails there as on a GPU).
Results are compared with the CPU.  The whole GPU suite also runs on ``cuda:1``
with ``EMBER_TEST_CUDA_DEVICE=1`` (tests/cuda_helpers.py).
"""
import copy
from functools import partial

import numpy as np
import pytest

import ember
from ember import nn
from cuda_helpers import GPU_MARK, HAVE_GPU, host
import helpers

pytestmark = GPU_MARK + [pytest.mark.skipif(
    not HAVE_GPU or ember.cuda.device_count() < 2, reason="needs two CUDA devices")]

D0, D1 = ember.Device("cuda", 0), ember.Device("cuda", 1)


@pytest.fixture(autouse=True)
def _device_0_current():
    """Each test starts with device 0 current and must leave it so."""
    ember.cuda.set_device(0)
    yield
    assert ember.cuda.current_device() == 0, "an op left another device current"


rnd = partial(helpers.rnd, dtype=np.float32)


def on1(a):
    return ember.asarray(a).to(D1)


def same(got, expected, rtol=2e-5, atol=1e-6, device=D1):
    assert got.device == device, f"result on {got.device}, expected {device}"
    np.testing.assert_allclose(host(got), host(expected), rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", [
    lambda a, b: a + b,
    lambda a, b: a * 2.5 - b,
    lambda a, b: ember.exp(a) / (1 + b * b),
    lambda a, b: ember.maximum(a, b[0]),                     # broadcast
    lambda a, b: a.T @ b,
    lambda a, b: (a[:, ::-2] ** 2).sum(axis=0),              # negative stride, reduction
    lambda a, b: ember.sort(a, axis=1),
    lambda a, b: a[ember.asarray(np.array([2, 0, 1]), device=a.device)],
    lambda a, b: ember.where(a > 0, a, b),
    lambda a, b: ember.concatenate([a, b], axis=0),
    lambda a, b: a.astype(ember.float16).astype(ember.float32),
    lambda a, b: ember.cumsum(a, axis=1),
    lambda a, b: ember.linalg.norm(a, axis=1),
], ids=["add", "axpy", "exp_div", "broadcast", "matmul", "neg_stride_sum", "sort",
        "fancy_index", "where", "concatenate", "cast", "cumsum", "norm"])
def test_ops_on_device_1_match_the_cpu(op):
    a, b = rnd(4, 4, seed=1), rnd(4, 4, seed=2)
    same(op(on1(a), on1(b)), op(ember.asarray(a), ember.asarray(b)))


def test_contiguous_fast_path_runs_on_the_arrays_device():
    a, b = on1(rnd(1000)), on1(rnd(1000, seed=3))
    for _ in range(3):                  # the first call registers the fast path's kernel
        y = a + b
        z = -a
    same(y, ember.asarray(rnd(1000)) + ember.asarray(rnd(1000, seed=3)))
    same(z, -ember.asarray(rnd(1000)))
    with ember.cuda.device(1):          # the same op with device 1 current
        same(a + b, y)


def test_in_place_and_setitem_on_device_1():
    x = on1(rnd(3, 5))
    xc = ember.asarray(rnd(3, 5))
    x += 1
    xc += 1
    x[1] = 0.5
    xc[1] = 0.5
    x[ember.asarray(np.array([0, 2]), device=D1), 1] = -2.0
    xc[ember.asarray(np.array([0, 2])), 1] = -2.0
    same(x, xc)


def test_creation_and_random_land_on_the_named_device():
    for make in (lambda d: ember.zeros((2, 3), device=d),
                 lambda d: ember.ones((2, 3), device=d),
                 lambda d: ember.full((2, 3), 7.0, device=d),
                 lambda d: ember.arange(6, device=d),
                 lambda d: ember.eye(3, device=d),
                 lambda d: ember.random.rand(2, 3, device=d),
                 lambda d: ember.random.randn(2, 3, device=d)):
        x = make("cuda:1")
        assert x.device == D1
        np.asarray(x.cpu())                 # readable
    np.testing.assert_array_equal(host(ember.full((2, 3), 7.0, device="cuda:1")),
                                  np.full((2, 3), 7.0, np.float32))


def test_cuda_without_index_means_the_current_device():
    with ember.cuda.device(1):
        assert ember.ones(2, device="cuda").device == D1
        assert ember.ones(2).cuda().device == D1
    x = ember.ones(2, device="cuda:1")
    y = x.to("cuda")                      # PyTorch: 'cuda' is the current device (0)
    assert y.device == D0 and x.device == D1
    np.testing.assert_array_equal(host(y), np.ones(2, np.float32))
    with ember.cuda.device(1):
        assert x.to("cuda") is x and x.cuda() is x


@pytest.mark.parametrize("view", ["contiguous", "transposed", "negative_stride", "empty"])
def test_copies_between_devices_keep_the_values(view):
    a = rnd(3, 4)
    if view == "empty":
        a = a[:0]
    x0 = ember.asarray(a).to(D0)
    if view == "transposed":
        x0, a = x0.T, a.T
    elif view == "negative_stride":
        x0, a = x0[:, ::-1], a[:, ::-1]
    x1 = x0.to("cuda:1")
    assert x1.device == D1 and x1.shape == a.shape
    np.testing.assert_array_equal(host(x1), a)
    back = x1.to(D0)
    assert back.device == D0
    np.testing.assert_array_equal(host(back), a)


def test_mixing_two_gpus_in_one_op_is_an_error_naming_both():
    a, b = ember.ones(3, device="cuda:0"), ember.ones(3, device="cuda:1")
    for op in (lambda: a + b, lambda: ember.matmul(a, b), lambda: ember.stack([a, b]),
               lambda: ember.where(a > 0, a, b)):
        with pytest.raises(RuntimeError, match=r"cuda:0.*cuda:1|cuda:1.*cuda:0"):
            op()


def test_autograd_on_device_1_matches_the_cpu():
    a = rnd(5, 4)
    res = {}
    for dev in ("cpu", "cuda:1"):
        x = ember.asarray(a).to(dev).requires_grad_()
        y = (ember.tanh(x) @ x.T).sum() + ember.nn.functional.softmax(x, dim=1)[:, 0].sum()
        y.backward()
        res[dev] = (y, x.grad)
    same(res["cuda:1"][0], res["cpu"][0], rtol=1e-5)
    same(res["cuda:1"][1], res["cpu"][1], rtol=1e-5)


def test_gradient_flows_back_across_devices():
    a = rnd(3, 4)
    x = ember.asarray(a).to(D0).requires_grad_()
    y = (x * 2).to("cuda:1")                # a model split over two devices
    (y ** 2).sum().backward()
    assert x.grad.device == D0
    np.testing.assert_allclose(host(x.grad), 8 * a, rtol=1e-6)


def _model():
    ember.random.seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Dropout(0.0), nn.Linear(4 * 6 * 6, 5),
                         nn.LayerNorm(5))


@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_training_on_device_1_matches_the_cpu(opt):
    x, t = rnd(8, 2, 6, 6), np.random.default_rng(1).integers(0, 5, 8)
    base = _model()
    losses = {}
    for dev in ("cpu", "cuda:1"):
        m = copy.deepcopy(base).to(dev)
        o = (ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) if opt == "sgd"
             else ember.optim.AdamW(m.parameters(), lr=1e-2))
        xs, ts = ember.asarray(x).to(dev), ember.asarray(t).to(dev)
        out = []
        for _ in range(3):
            o.zero_grad()
            loss = nn.functional.cross_entropy(m(xs), ts)
            loss.backward()
            o.step()
            out.append(loss.item())
        losses[dev] = out
        if dev != "cpu":
            assert all(p.device == D1 for p in m.parameters())
            assert all(b.device == D1 for b in m.buffers())
    np.testing.assert_allclose(losses["cuda:1"], losses["cpu"], rtol=1e-4, atol=1e-5)


def test_one_optimizer_over_parameters_on_two_devices():
    """Model parallelism: one SGD step over parameters spread over both GPUs."""
    w0 = ember.asarray(rnd(4)).to(D0).requires_grad_()
    w1 = ember.asarray(rnd(4, seed=5)).to(D1).requires_grad_()
    loss = (w0 * w0).sum() + (w1 * 3).sum().to(D0)     # adding across GPUs needs a move
    loss.backward()
    ember.optim.SGD([w0, w1], lr=0.5).step()
    assert w0.device == D0 and w1.device == D1
    np.testing.assert_allclose(host(w0), rnd(4) * (1 - 2 * 0.5), rtol=1e-6)
    np.testing.assert_allclose(host(w1), rnd(4, seed=5) - 1.5, rtol=1e-6)


def test_autocast_and_grad_scaler_on_device_1():
    m = nn.Linear(8, 3).to("cuda:1")
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cuda", init_scale=256.0)
    x = ember.asarray(rnd(4, 8)).to(D1)
    with ember.amp.autocast("cuda", dtype=ember.float16):
        y = m(x)
        assert y.dtype == ember.float16 and y.device == D1
        loss = (y.astype(ember.float32) ** 2).mean()
    scaler.scale(loss).backward()
    before = host(m.weight).copy()
    scaler.step(opt)
    scaler.update()
    assert m.weight.device == D1 and m.weight.grad.device == D1
    assert not np.array_equal(host(m.weight), before)       # a finite step was taken


def test_deferred_index_check_on_device_1_is_reported():
    x = on1(rnd(4))
    bad = ember.asarray(np.array([0, 9]), device=D1)
    with pytest.raises(IndexError, match="out of bounds"):
        y = x[bad]
        ember.cuda.synchronize(1)
        host(y)


def test_memory_is_counted_on_the_devices_own_pool():
    before0, before1 = ember.cuda.memory_allocated(0), ember.cuda.memory_allocated(1)
    x = ember.empty((1 << 18,), dtype=ember.float32, device="cuda:1")
    assert ember.cuda.memory_allocated(1) >= before1 + x.nbytes
    assert ember.cuda.memory_allocated(0) == before0
    del x
    ember.cuda.empty_cache()


def test_streams_are_per_device():
    s1 = ember.cuda.Stream(device=1)
    assert s1.device == D1
    assert ember.cuda.current_stream(1).device == D1
    assert ember.cuda.default_stream(1).device == D1
    assert ember.cuda.current_stream().device == D0
    x = on1(rnd(16))
    with ember.cuda.stream(s1):             # makes its device current too, as in PyTorch
        assert ember.cuda.current_device() == 1
        assert ember.cuda.current_stream() == s1
        y = x * 2
    assert ember.cuda.current_device() == 0
    assert ember.cuda.current_stream(1) != s1
    s1.synchronize()
    same(y, ember.asarray(rnd(16)) * 2)


def test_asarray_of_a_cupy_array_of_another_device_copies_it():
    import cupy
    src = cupy.arange(6, dtype=cupy.float32)          # on device 0, the current one
    x = ember.asarray(src, device="cuda:1")
    assert x.device == D1
    src[0] = -1.0                                     # a copy: the source is separate
    np.testing.assert_array_equal(host(x), np.arange(6, dtype=np.float32))
    y = ember.asarray(src, device="cuda:0")           # same device: no copy
    assert y.device == D0 and host(y)[0] == -1.0


@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_device_side_skip_over_parameters_on_two_devices(opt):
    """GradScaler's found_inf on device 1 reaches the fused kernels of device 0 too (a copy
    between the devices, never through the host): set, neither device steps (Adam's step
    counts included); clear, both step as on the CPU."""
    init = [rnd(5), rnd(6, seed=3)]
    grads = [rnd(5, seed=7), rnd(6, seed=8)]
    cpu = [ember.asarray(v, requires_grad=True) for v in init]
    gpu = [ember.asarray(v).to(d).requires_grad_() for v, d in zip(init, (D0, D1))]

    def make(ps):
        return (ember.optim.SGD(ps, lr=0.1, momentum=0.9) if opt == "sgd"
                else ember.optim.AdamW(ps, lr=1e-2))
    oc, og = make(cpu), make(gpu)
    for found in (0.0, 1.0, 0.0):
        for pc, pg, g in zip(cpu, gpu, grads):
            pc.grad = ember.asarray(g)
            pg.grad = ember.asarray(g).to(pg.device)
        og.grad_scale, og.found_inf = None, ember.full((), found, dtype=ember.float32,
                                                       device=D1)
        og.step()
        del og.grad_scale, og.found_inf
        if not found:
            oc.step()
        for pc, pg in zip(cpu, gpu):
            np.testing.assert_allclose(host(pg), pc.numpy(), rtol=1e-6, atol=1e-7)
    assert [p.device for p in gpu] == [D0, D1]
    if opt == "adamw":
        assert [float(og.state[p]["step"]) for p in gpu] == [2.0, 2.0]
        assert [og.state[p]["step"].device for p in gpu] == [D0, D1]
