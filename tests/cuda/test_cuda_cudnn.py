"""Convolutions and batch norm through cuDNN (ember/cuda/cudnn_conv.py, cudnn_norm.py).

Emulated (``EMBER_CUDA_EMULATION=1``): cuDNN's function table, the one boundary between
ember and the library (ember/cuda/_cudnn_lib.py), is replaced by the NumPy model of
tests/cuda_emu/fake_cudnn.py, so ember's real conv2d / batch_norm paths build the
descriptors, choose and cache algorithms, size workspaces, follow the switches and
layouts and fall back, and the results and gradients are compared with PyTorch on the
CPU.  On a real GPU with cuDNN (``test_real_*``), cuDNN's results are compared with
ember's own kernels and with PyTorch on the GPU.
"""
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.cuda import _cudnn, _cudnn_lib

from cuda_helpers import GPU_MARK, DEV, HAVE_GPU, gpu, host, on_test_device

torch = pytest.importorskip("torch")
pytestmark = GPU_MARK

EMULATED = os.environ.get("EMBER_CUDA_EMULATION") == "1"
emulated_only = pytest.mark.skipif(not EMULATED, reason="the fake cuDNN needs the emulation "
                                   "(device memory is host memory there)")
TOL = {"float32": (1e-5, 1e-5), "float16": (2e-2, 2e-2), "float64": (1e-12, 1e-12)}


@pytest.fixture
def fake():
    """The NumPy model of cuDNN in place of the library, the switches at their defaults."""
    import fake_cudnn
    f = fake_cudnn.FakeCudnn()
    prev = _cudnn_lib.set_table(f)
    try:
        with ember.backends.cudnn.flags(enabled=True):
            yield f
    finally:
        _cudnn_lib.set_table(*prev)


def _rand(shape, dtype, seed):
    r = np.random.default_rng(seed).standard_normal(shape)
    return r.astype(dtype)


def _close(got, expected, dtype, scale=1.0):
    rt, at = TOL[np.dtype(dtype).name]
    g = host(got).astype(np.float64)
    np.testing.assert_allclose(g, np.asarray(expected, np.float64), rtol=rt, atol=at * scale)


def _first_math(fake):
    """The math type the first convolution descriptor was made with."""
    return next(c[1] for c in fake.calls if c[0] == "cudnnSetConvolutionMathType")


def _counts(op):
    return _cudnn.COUNTS[(op, "cudnn")], _cudnn.COUNTS[(op, "fallback")]


# ------------------------------------------------------------------ convolutions

# (x shape, weight shape, stride, padding, dilation, groups)
CONVS = [
    ((2, 4, 7, 6), (6, 4, 3, 3), 1, 1, 1, 1),
    ((2, 4, 9, 8), (4, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    ((1, 6, 8, 8), (6, 1, 3, 3), 2, 2, 2, 6),
    ((2, 3, 10), (4, 3, 3), 2, 1, 1, 1),
]


def _torch_conv(x, w, b, stride, padding, dilation, groups):
    """PyTorch's result and gradients (float64 on the CPU) for output gradient gy."""
    xt, wt, bt = (torch.tensor(np.asarray(a, np.float64), requires_grad=True) for a in (x, w, b))
    conv = torch.nn.functional.conv1d if x.ndim == 3 else torch.nn.functional.conv2d
    y = conv(xt, wt, bt, stride, padding, dilation, groups)
    gy = np.cos(np.arange(y.numel())).reshape(tuple(y.shape))
    y.backward(torch.tensor(gy))
    return y.detach().numpy(), gy, xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()


def _ember_conv(x, w, b, stride, padding, dilation, groups, gy, dtype):
    xe, we, be = (gpu(a.astype(dtype)).requires_grad_() for a in (x, w, b))
    conv = F.conv1d if x.ndim == 3 else F.conv2d
    y = conv(xe, we, be, stride, padding, dilation, groups)
    y.backward(gpu(gy.astype(dtype)))
    return y, xe.grad, we.grad, be.grad


@emulated_only
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv_forward_and_gradients_match_torch(fake, case, dtype):
    xs, ws, stride, padding, dilation, groups = CONVS[case]
    x = _rand(xs, dtype, 1)
    w = _rand(ws, dtype, 2)
    b = _rand((ws[0],), dtype, 3)
    ty, gy, tgx, tgw, tgb = _torch_conv(x, w, b, stride, padding, dilation, groups)
    y, gx, gw, gb = _ember_conv(x, w, b, stride, padding, dilation, groups, gy, dtype)
    for got, exp in ((y, ty), (gx, tgx), (gw, tgw), (gb, tgb)):
        assert got.dtype == np.dtype(dtype)
        _close(got, exp, dtype, scale=10)
    done = [r["direction"] for r in fake.runs]
    assert done == ["forward", "backward_data", "backward_filter"]
    assert {r["groups"] for r in fake.runs} == {groups}
    assert all(r["dtype"] == np.dtype(dtype) for r in fake.runs)
    # planned with tensor cores for 16-bit data, float32 with TF32 allowed (PyTorch's
    # default), then run with the math type of the algorithm chosen
    assert _first_math(fake) == (1 if dtype == "float16" else 0)
    assert fake.runs[0]["math"] == fake.algos["forward"][0].math
    assert _counts("conv2d") == (1, 0)


@emulated_only
def test_conv_float64_and_double_scalars(fake):
    xs, ws, stride, padding, dilation, groups = CONVS[1]
    x, w, b = _rand(xs, "float64", 4), _rand(ws, "float64", 5), _rand((ws[0],), "float64", 6)
    ty, gy, tgx, tgw, tgb = _torch_conv(x, w, b, stride, padding, dilation, groups)
    y, gx, gw, gb = _ember_conv(x, w, b, stride, padding, dilation, groups, gy, "float64")
    for got, exp in ((y, ty), (gx, tgx), (gw, tgw), (gb, tgb)):
        _close(got, exp, "float64")
    assert len(fake.runs) == 3


def _to(a, dtype):
    """Host array a as an ember GPU array of `dtype` (bfloat16 included)."""
    return gpu(ember.asarray(np.asarray(a, np.float32)).astype(getattr(ember, dtype)))


def _own_conv(x, w, b, gy, module=False, **geo):
    """Result and gradients (float64 host arrays) of a 16-bit GPU convolution with cuDNN
    off: ember's own kernels, the oracle of the cuDNN path."""
    with ember.backends.cudnn.flags(enabled=False):
        return _conv_grads(x, w, b, gy, module, **geo)


def _conv_grads(x, w, b, gy, module, **geo):
    xe = x.detach().requires_grad_()
    if module:
        conv = ember.nn.Conv2d(x.shape[1], w.shape[0], w.shape[2:], **geo).to(DEV)
        conv.to(x.dtype)
        with ember.no_grad():
            conv.weight[...] = w
            conv.bias[...] = b
        y = conv(xe)
        params = (conv.weight, conv.bias)
    else:
        we, be = w.detach().requires_grad_(), b.detach().requires_grad_()
        y = F.conv2d(xe, we, be, **geo)
        params = (we, be)
    y.backward(gy)
    return y, xe.grad, params[0].grad, params[1].grad


@emulated_only
@pytest.mark.parametrize("module", [False, True], ids=["F.conv2d", "nn.Conv2d"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_conv_reaches_cudnn_in_its_own_dtype(fake, dtype, module):
    """float16 and bfloat16 convolutions (forward, data and weight gradients) call cuDNN
    with tensors of their own dtype and a float32 compute type (PyTorch's pseudo-half
    configurations), tensor-core math, and agree with ember's own kernels."""
    geo = dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    x, w, b = _to(_rand((2, 4, 9, 8), np.float32, 7), dtype), \
        _to(_rand((6, 2, 3, 3), np.float32, 8), dtype), _to(_rand((6,), np.float32, 9), dtype)
    gy = _to(np.cos(np.arange(2 * 6 * 5 * 6)).reshape(2, 6, 5, 6), dtype)
    got = _conv_grads(x, w, b, gy, module, **geo)
    assert [a.dtype for a in got] == [np.dtype(getattr(ember, dtype))] * 4
    assert [r["direction"] for r in fake.runs] == ["forward", "backward_data",
                                                   "backward_filter"]
    want = np.dtype(getattr(ember, dtype))
    for r in fake.runs:
        assert r["tensor_dtypes"] == (want, want, want)
        assert r["compute"] == np.float32 and r["groups"] == 2
    assert _first_math(fake) == 1                             # CUDNN_TENSOR_OP_MATH
    assert _counts("conv2d") == (1, 0)
    own = _own_conv(x, w, b, gy, module, **geo)
    assert len(fake.runs) == 3                                # (cuDNN off: not called)
    tol = 2e-2 if dtype == "float16" else 8e-2
    for g, o in zip(got, own):
        g, o = host(g).astype(np.float64), host(o).astype(np.float64)
        np.testing.assert_allclose(g, o, rtol=tol, atol=tol * (np.abs(o).max() + 1))


@emulated_only
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_autocast_conv_runs_cudnn_in_the_autocast_dtype(fake, dtype):
    """Under CUDA autocast the convolution op casts input, weight and bias to the autocast
    dtype (not float32): cuDNN runs in it, the parameters' gradients come back float32."""
    adt = getattr(ember, dtype)
    conv = ember.nn.Conv2d(3, 4, 3, padding=1).to(DEV)
    x = gpu(_rand((2, 3, 6, 6), np.float32, 10)).requires_grad_()
    with ember.amp.autocast("cuda", dtype=adt):
        y = conv(x)
        y2 = conv(y[:, :3])                         # a 16-bit input into the next layer
    assert y.dtype == adt and y2.dtype == adt
    (y.float().sum() + y2.float().sum()).backward()
    assert conv.weight.grad.dtype == np.float32 and x.grad.dtype == np.float32
    assert [r["direction"] for r in fake.runs].count("forward") == 2
    assert all(r["tensor_dtypes"] == (np.dtype(adt),) * 3 and r["compute"] == np.float32
               for r in fake.runs)
    assert {r["direction"] for r in fake.runs} == {"forward", "backward_data",
                                                   "backward_filter"}
    with ember.backends.cudnn.flags(enabled=False), ember.amp.autocast("cuda", dtype=adt):
        own = conv(x.detach())
    tol = 2e-2 if dtype == "float16" else 8e-2
    np.testing.assert_allclose(host(y).astype(np.float64), host(own).astype(np.float64),
                               rtol=tol, atol=tol)


@emulated_only
@pytest.mark.parametrize("xdt,wdt", [("bfloat16", "float32"), ("float16", "bfloat16"),
                                     ("float32", "float16")])
def test_mixed_conv_dtypes_are_refused(fake, xdt, wdt):
    """PyTorch refuses an input and a weight (or bias) of different dtypes outside
    autocast; the error names the op, both dtypes and the shapes."""
    x, w = _to(np.ones((1, 3, 5, 5)), xdt), _to(np.ones((2, 3, 3, 3)), wdt)
    with pytest.raises(TypeError, match=rf"conv2d: input type \({xdt}\) and weight type "
                       rf"\({wdt}\) should be the same \(input \[1, 3, 5, 5\] {xdt}, "
                       rf"weight \[2, 3, 3, 3\] {wdt}\)"):
        F.conv2d(x, w)
    with pytest.raises(TypeError, match=rf"conv_transpose2d: input type \({xdt}\) and bias "
                       rf"type \({wdt}\)"):
        F.conv_transpose2d(_to(np.ones((1, 2, 5, 5)), xdt), _to(np.ones((2, 3, 3, 3)), xdt),
                           _to(np.ones(3), wdt))
    assert fake.calls == []


@emulated_only
def test_channels_last_input_runs_nhwc(fake):
    x = _rand((2, 5, 6, 7), np.float32, 9)
    w = _rand((3, 5, 3, 3), np.float32, 10)
    xe = gpu(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    assert not xe.is_contiguous()
    y = F.conv2d(xe, gpu(w), padding=1)
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=1)
    _close(y, ref.numpy(), "float32", scale=10)
    run = fake.runs[0]
    assert run["w"][1] == 1                                    # CUDNN_TENSOR_NHWC filter
    N, C, H, W = run["x"][0]
    assert run["x"][1] == [H * W * C, 1, W * C, C]             # NHWC strides
    # the result keeps the layout, as PyTorch's channels-last convolution does
    assert y.strides[1] == y.itemsize


@emulated_only
def test_second_call_hits_the_plan_cache(fake):
    x, w = gpu(_rand((2, 3, 8, 8), np.float32, 11)), gpu(_rand((4, 3, 3, 3), np.float32, 12))
    F.conv2d(x, w, padding=1)
    made = fake.count("cudnnCreateTensorDescriptor") + fake.count("cudnnCreateFilterDescriptor")
    assert made == 3 and fake.count("cudnnGetConvolutionForwardAlgorithm_v7") == 1
    F.conv2d(x, w, padding=1)
    assert fake.count("cudnnCreateTensorDescriptor") + \
        fake.count("cudnnCreateFilterDescriptor") == made
    assert fake.count("cudnnGetConvolutionForwardAlgorithm_v7") == 1
    assert fake.count("cudnnConvolutionForward") == 2
    assert fake.count("cudnnCreate") == 1                      # one handle per device
    # another shape is another plan
    F.conv2d(x[:1], w, padding=1)
    assert fake.count("cudnnGetConvolutionForwardAlgorithm_v7") == 2


@emulated_only
def test_workspace_comes_from_the_pool_with_the_algorithms_size(fake):
    x, w = gpu(_rand((2, 3, 8, 8), np.float32, 13)), gpu(_rand((4, 3, 3, 3), np.float32, 14))
    F.conv2d(x, w, padding=1)
    run = fake.runs[0]
    assert run["algo"] == 1                                   # the heuristics' first choice
    ptr, size = run["workspace"]
    assert size == 4096 and ptr and ptr % 256 == 0            # a pool block


@emulated_only
def test_calls_go_on_the_current_stream(fake):
    x, w = gpu(_rand((2, 3, 8, 8), np.float32, 15)), gpu(_rand((4, 3, 3, 3), np.float32, 16))
    with on_test_device():
        s = ember.cuda.Stream()
        with ember.cuda.stream(s):
            F.conv2d(x, w, padding=1)
        F.conv2d(x, w, padding=1)
        default = ember.cuda.current_stream().cuda_stream
    assert fake.runs[0]["stream"] == s.cuda_stream != default
    assert fake.runs[1]["stream"] == default
    assert fake.count("cudnnSetStream") == 2


@emulated_only
def test_deterministic_restricts_the_algorithms(fake):
    x = gpu(_rand((2, 3, 8, 8), np.float32, 17)).requires_grad_()
    w = gpu(_rand((4, 3, 3, 3), np.float32, 18)).requires_grad_()
    F.conv2d(x, w, padding=1).sum().backward()
    algos = {r["direction"]: r["algo"] for r in fake.runs}
    assert algos["backward_data"] == 0 and algos["backward_filter"] == 0   # fastest guess
    ember.backends.cudnn.deterministic = True
    fake.runs.clear()
    g1 = ember.autograd.grad(F.conv2d(x, w, padding=1).sum(), (x, w))
    algos = {r["direction"]: r["algo"] for r in fake.runs}
    assert algos["backward_data"] == 1 and algos["backward_filter"] == 1   # deterministic
    chosen = {d: next(a for a in fake.algos[d] if a.algo == algos[d]) for d in algos}
    assert all(a.deterministic for a in chosen.values())
    ref = [torch.tensor(host(a), requires_grad=True) for a in (x, w)]
    torch.nn.functional.conv2d(*ref, padding=1).sum().backward()
    for got, r in zip(g1, ref):
        _close(got, r.grad.numpy(), "float32", scale=10)


@emulated_only
def test_deterministic_with_no_deterministic_algorithm_falls_back(fake):
    for a in fake.algos["backward_filter"]:
        a.deterministic = False
    ember.backends.cudnn.deterministic = True
    x = _rand((2, 3, 8, 8), np.float32, 19)
    w = _rand((4, 3, 3, 3), np.float32, 20)
    we = gpu(w).requires_grad_()
    F.conv2d(gpu(x), we, padding=1).sum().backward()
    ref = torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(torch.tensor(x), ref, padding=1).sum().backward()
    _close(we.grad, ref.grad.numpy(), "float32", scale=10)
    assert "deterministic" in _cudnn.LAST_FALLBACK["conv2d weight gradient"]
    assert "backward_filter" not in [r["direction"] for r in fake.runs]


@emulated_only
def test_benchmark_times_the_algorithms_once(fake):
    ember.backends.cudnn.benchmark = True
    x, w = gpu(_rand((2, 3, 8, 8), np.float32, 21)), gpu(_rand((4, 3, 3, 3), np.float32, 22))
    y = F.conv2d(x, w, padding=1)
    F.conv2d(x, w, padding=1)
    assert fake.count("cudnnFindConvolutionForwardAlgorithmEx") == 1
    assert fake.count("cudnnGetConvolutionForwardAlgorithm_v7") == 0
    find, run = fake.runs[0], fake.runs[1]
    assert find["find"] and find["workspace"][1] == 4096 and find["workspace"][0]
    assert run["algo"] == 0                       # the fastest, not the heuristics' first
    ref = torch.nn.functional.conv2d(torch.tensor(host(x)), torch.tensor(host(w)), padding=1)
    _close(y, ref.numpy(), "float32", scale=10)   # the search's garbage is overwritten


@emulated_only
def test_not_supported_falls_back_and_is_remembered(fake):
    fake.refuse["forward"] = 3000                 # CUDNN_STATUS_NOT_SUPPORTED
    x, w = _rand((2, 3, 8, 8), np.float32, 23), _rand((4, 3, 3, 3), np.float32, 24)
    for _ in range(2):
        y = F.conv2d(gpu(x), gpu(w), padding=1)
        ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=1)
        _close(y, ref.numpy(), "float32", scale=10)
    assert fake.count("cudnnConvolutionForward") == 1          # not tried again
    assert _counts("conv2d") == (0, 2)
    assert _cudnn.LAST_FALLBACK["conv2d"] == "CUDNN_STATUS_NOT_SUPPORTED"


@emulated_only
def test_other_failures_raise_naming_op_shapes_and_dtypes(fake):
    fake.refuse["forward"] = 5000                 # CUDNN_STATUS_EXECUTION_FAILED
    x, w = gpu(_rand((2, 3, 8, 8), np.float32, 25)), gpu(_rand((4, 3, 3, 3), np.float32, 26))
    with pytest.raises(RuntimeError, match=r"conv2d \(cuDNN\): CUDNN_STATUS_EXECUTION_FAILED "
                       r"\(input \(2, 3, 8, 8\) float32, weight \(4, 3, 3, 3\) float32\)"):
        F.conv2d(x, w, padding=1)


@emulated_only
def test_unsupported_configurations_run_embers_kernels(fake):
    x, w = _rand((1, 2, 6, 6), np.float32, 27), _rand((3, 2, 2, 2), np.float32, 28)
    y = F.conv2d(gpu(x), gpu(w), padding="same")          # asymmetric padding
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding="same")
    _close(y, ref.numpy(), "float32", scale=10)
    assert fake.runs == [] and _cudnn.LAST_FALLBACK["conv2d"] == "asymmetric padding"
    # a transposed convolution whose output padding reaches beyond the plain convolution
    xt = _rand((1, 3, 4, 4), np.float32, 29)
    wt = _rand((3, 2, 3, 3), np.float32, 30)
    y = F.conv_transpose2d(gpu(xt), gpu(wt), stride=1, output_padding=1, dilation=2)
    ref = torch.nn.functional.conv_transpose2d(torch.tensor(xt), torch.tensor(wt), stride=1,
                                               output_padding=1, dilation=2)
    _close(y, ref.numpy(), "float32", scale=10)


@emulated_only
def test_conv_transpose_uses_backward_data(fake):
    x, w, b = _rand((2, 4, 5, 5), np.float32, 31), _rand((4, 3, 3, 3), np.float32, 32), \
        _rand((3,), np.float32, 33)
    y = F.conv_transpose2d(gpu(x), gpu(w), gpu(b), stride=2, padding=1)
    ref = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w),
                                               torch.tensor(b), stride=2, padding=1)
    _close(y, ref.numpy(), "float32", scale=10)
    assert [r["direction"] for r in fake.runs] == ["backward_data"]


@emulated_only
def test_disabled_or_missing_cudnn_runs_embers_kernels(fake):
    x, w = _rand((2, 3, 8, 8), np.float32, 34), _rand((4, 3, 3, 3), np.float32, 35)
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
    ember.backends.cudnn.enabled = False
    _close(F.conv2d(gpu(x), gpu(w), padding=1), ref, "float32", scale=10)
    ember.backends.cudnn.enabled = True
    assert fake.calls == []
    _cudnn_lib.set_table(None, "test: no cuDNN")
    assert not ember.backends.cudnn.is_available() and ember.backends.cudnn.version() is None
    _close(F.conv2d(gpu(x), gpu(w), padding=1), ref, "float32", scale=10)


@emulated_only
def test_no_tf32_when_float32_tf32_is_off(fake):
    fake.algos["forward"][0].math = 1             # the heuristics' first uses tensor cores
    ember.backends.cudnn.allow_tf32 = False
    x, w = gpu(_rand((2, 3, 8, 8), np.float32, 36)), gpu(_rand((4, 3, 3, 3), np.float32, 37))
    F.conv2d(x, w, padding=1)
    assert fake.runs[0]["algo"] == 0 and fake.runs[0]["math"] == 3     # CUDNN_FMA_MATH


# ------------------------------------------------------------------ batch norm

BN_SHAPES = [(4, 3, 5, 6), (6, 4), (3, 2, 7)]


def _torch_bn(x, w, b, rm, rv, training, eps, momentum=0.1):
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    wt = None if w is None else torch.tensor(w.astype(np.float64), requires_grad=True)
    bt = None if b is None else torch.tensor(b.astype(np.float64), requires_grad=True)
    rmt, rvt = torch.tensor(rm.astype(np.float64)), torch.tensor(rv.astype(np.float64))
    y = torch.nn.functional.batch_norm(xt, rmt, rvt, wt, bt, training, momentum, eps)
    gy = np.sin(np.arange(y.numel()) + 1.0).reshape(tuple(y.shape))
    y.backward(torch.tensor(gy))
    grads = [None if t is None else t.grad.numpy() for t in (xt, wt, bt)]
    return y.detach().numpy(), gy, grads, rmt.numpy(), rvt.numpy()


@emulated_only
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", BN_SHAPES)
def test_batch_norm_matches_torch(fake, shape, dtype, affine, training):
    C = shape[1]
    x = _rand(shape, dtype, 40)
    w = _rand((C,), np.float32, 41) if affine else None
    b = _rand((C,), np.float32, 42) if affine else None
    rm, rv = _rand((C,), np.float32, 43), np.abs(_rand((C,), np.float32, 44)) + 0.5
    eps = 1e-3
    ty, gy, tg, trm, trv = _torch_bn(x, w, b, rm, rv, training, eps)
    xe = gpu(x).requires_grad_()
    we = None if w is None else gpu(w).requires_grad_()
    be = None if b is None else gpu(b).requires_grad_()
    rme, rve = gpu(rm), gpu(rv)
    y = F.batch_norm(xe, rme, rve, we, be, training, 0.1, eps)
    y.backward(gpu(gy.astype(dtype)))
    scale = 1 if dtype == "float16" else 10
    _close(y, ty, dtype, scale)
    _close(xe.grad, tg[0], dtype, scale)
    if affine:
        _close(we.grad, tg[1], "float32" if dtype == "float32" else dtype, scale)
        _close(be.grad, tg[2], "float32" if dtype == "float32" else dtype, scale)
    _close(rme, trm, "float32")
    _close(rve, trv, "float32", 10)               # the variance from cuDNN's 1/std
    kinds = [r["direction"] for r in fake.runs]
    assert kinds == (["batch_norm", "batch_norm_backward"] if training
                     else ["batch_norm_eval"])    # evaluation's backward: ember's kernels
    assert fake.runs[0]["eps"] == eps


def _channels_last(a):
    """(N, C, H, W) array a (host, or ember GPU) as an ember GPU array stored channels
    last."""
    a = a if isinstance(a, ember.ndarray) else gpu(a)
    return a.permute(0, 2, 3, 1).copy().permute(0, 3, 1, 2)


def _bn_run(x, w, b, rm, rv, training, gy, eps=1e-3):
    """(y, x.grad, w.grad, b.grad, running mean, running var) of F.batch_norm on GPU x."""
    xe = x.detach().requires_grad_()
    we, be = w.detach().requires_grad_(), b.detach().requires_grad_()
    rme, rve = rm.copy(), rv.copy()
    y = F.batch_norm(xe, rme, rve, we, be, training, 0.1, eps)
    y.backward(gy)
    return y, xe.grad, we.grad, be.grad, rme, rve


def _is_channels_last(a):
    N, C, H, W = a.shape
    return a.strides == tuple(s * a.itemsize for s in (H * W * C, 1, W * C, C))


@emulated_only
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_channels_last_batch_norm_runs_nhwc(fake, dtype, training):
    """A channels-last input reaches cuDNN's batch norm as it is stored: NHWC strides, the
    persistent spatial mode in training (PyTorch's choice), the spatial mode in
    evaluation; y and the input gradient come back channels last; results agree with
    ember's own kernels and PyTorch."""
    C = 6
    xh = _rand((4, C, 5, 3), np.float32, 45)
    x = _channels_last(_to(xh, dtype))
    assert _is_channels_last(x)
    w, b = gpu(_rand((C,), np.float32, 46)), gpu(_rand((C,), np.float32, 47))
    rm, rv = gpu(_rand((C,), np.float32, 48)), gpu(np.abs(_rand((C,), np.float32, 49)) + 0.5)
    gyh = np.sin(np.arange(xh.size) + 1.0).reshape(xh.shape)
    gy = _channels_last(_to(gyh, dtype))
    got = _bn_run(x, w, b, rm, rv, training, gy)
    kinds = [r["direction"] for r in fake.runs]
    assert kinds == (["batch_norm", "batch_norm_backward"] if training
                     else ["batch_norm_eval"])
    N, C, H, W = x.shape
    for r in fake.runs:
        assert r["dims"] == [N, C, H, W] and r["strides"] == [H * W * C, 1, W * C, C]
        assert r["mode"] == (2 if training else 1)            # SPATIAL_PERSISTENT / SPATIAL
        assert r["dtype"] == np.dtype(getattr(ember, dtype))
    assert _is_channels_last(got[0]) and got[0].dtype == x.dtype
    with ember.backends.cudnn.flags(enabled=False):
        own = _bn_run(x, w, b, rm, rv, training, gy)
    assert len(fake.runs) == len(kinds)
    if training:        # the input gradient cuDNN gives back is channels last too
        xr = x.detach().requires_grad_()
        gx, = ember.autograd.grad(F.batch_norm(xr, None, None, w, b, True, 0.1, 1e-3), (xr,),
                                  gy)
        assert _is_channels_last(gx) and fake.runs[-1]["mode"] == 2
    ty, _, tg, trm, trv = _torch_bn(np.asarray(host(x), np.float64), host(w), host(b),
                                    host(rm), host(rv), training, 1e-3)
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}[dtype]
    for g, o, e in zip(got, own, (ty, *tg, trm, trv)):
        g, o = host(g).astype(np.float64), host(o).astype(np.float64)
        scale = tol * (np.abs(e).max() + 1)
        np.testing.assert_allclose(g, o, rtol=tol, atol=scale)
        if dtype == "float32":
            np.testing.assert_allclose(g, e, rtol=tol, atol=scale)


@emulated_only
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_channels_last_conv_into_batch_norm_module_stays_nhwc(fake, dtype):
    """The ResNet pattern: nn.Conv2d on a channels-last input gives a channels-last
    output, which nn.BatchNorm2d normalizes with NHWC descriptors (persistent mode) and
    no layout copy; the backward runs NHWC through both.  Running statistics and results
    agree with the same module pair on ember's own kernels."""
    adt = getattr(ember, dtype)
    conv = ember.nn.Conv2d(3, 4, 3, padding=1, bias=False).to(DEV).to(adt)
    bn = ember.nn.BatchNorm2d(4).to(DEV)
    if dtype == "bfloat16":
        bn.to(adt)
    x = _channels_last(_to(_rand((2, 3, 6, 5), np.float32, 73), dtype)).requires_grad_()
    y = bn(conv(x))
    assert _is_channels_last(y) and y.dtype == adt
    y.float().square().sum().backward()
    runs = [(r["direction"], r.get("mode"), r.get("strides") or r["x"][1]) for r in fake.runs]
    N, C, H, W = y.shape
    nhwc_y = [H * W * C, 1, W * C, C]
    assert runs[0] == ("forward", None, [6 * 5 * 3, 1, 5 * 3, 3])
    assert runs[1] == ("batch_norm", 2, nhwc_y)
    assert runs[2] == ("batch_norm_backward", 2, nhwc_y)
    assert {d for d, _, _ in runs[3:]} == {"backward_data", "backward_filter"}
    assert all(r["w"][1] == 1 for r in fake.runs if "w" in r)      # NHWC filters
    got = [host(a).astype(np.float64) for a in (y, x.grad, conv.weight.grad, bn.weight.grad,
                                                 bn.running_mean, bn.running_var)]
    conv2 = ember.nn.Conv2d(3, 4, 3, padding=1, bias=False).to(DEV).to(adt)
    bn2 = ember.nn.BatchNorm2d(4).to(DEV)
    if dtype == "bfloat16":
        bn2.to(adt)
    with ember.no_grad():
        conv2.weight[...] = conv.weight
    x2 = x.detach().requires_grad_()
    with ember.backends.cudnn.flags(enabled=False):
        y2 = bn2(conv2(x2))
        y2.float().square().sum().backward()
    own = [host(a).astype(np.float64) for a in (y2, x2.grad, conv2.weight.grad,
                                                 bn2.weight.grad, bn2.running_mean,
                                                 bn2.running_var)]
    tol = 1e-4 if dtype == "float32" else 8e-2
    for g, o in zip(got, own):
        np.testing.assert_allclose(g, o, rtol=tol, atol=tol * (np.abs(o).max() + 1))


@emulated_only
def test_contiguous_batch_norm_keeps_the_spatial_mode(fake):
    """NCHW input: the (N, C, S, 1) view, CUDNN_BATCHNORM_SPATIAL in every direction (the
    persistent mode's NCHW kernels may overflow on large values: PyTorch avoids them)."""
    x = gpu(_rand((4, 3, 5, 6), np.float32, 72)).requires_grad_()
    F.batch_norm(x, None, None, training=True).square().sum().backward()
    assert [(r["mode"], r["dims"]) for r in fake.runs] == [(1, [4, 3, 30, 1])] * 2


@emulated_only
def test_batch_norm_module_training_step(fake):
    """nn.BatchNorm2d: running statistics over several steps, then evaluation."""
    torch.manual_seed(0)
    tm = torch.nn.BatchNorm2d(3)
    em = ember.nn.BatchNorm2d(3).to(DEV)
    for step in range(3):
        x = _rand((4, 3, 5, 5), np.float32, 50 + step)
        tm(torch.tensor(x))
        em(gpu(x))
    _close(em.running_mean, tm.running_mean.numpy(), "float32")
    _close(em.running_var, tm.running_var.numpy(), "float32", 10)
    tm.eval()
    em.eval()
    x = _rand((2, 3, 5, 5), np.float32, 60)
    _close(em(gpu(x)), tm(torch.tensor(x)).detach().numpy(), "float32", 10)


@emulated_only
def test_batch_norm_not_supported_falls_back(fake):
    fake.refuse["batch_norm"] = 3000
    x = _rand((4, 3, 5, 6), np.float32, 70)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    ty, gy, tg, _, _ = _torch_bn(x, None, None, rm, rv, True, 1e-5)
    xe = gpu(x).requires_grad_()
    y = F.batch_norm(xe, gpu(rm), gpu(rv), training=True)
    y.backward(gpu(gy.astype(np.float32)))
    _close(y, ty, "float32", 100)
    _close(xe.grad, tg[0], "float32", 100)
    assert _counts("batch_norm") == (0, 1) and _counts("batch_norm backward") == (0, 1)


@emulated_only
def test_batch_norm_error_names_op_and_shape(fake):
    fake.refuse["batch_norm"] = 4000              # CUDNN_STATUS_INTERNAL_ERROR
    with pytest.raises(RuntimeError, match=r"batch_norm \(cuDNN\): CUDNN_STATUS_INTERNAL_ERROR "
                       r"\(input \(4, 3, 2\) float32"):
        F.batch_norm(gpu(_rand((4, 3, 2), np.float32, 71)), None, None, training=True)


def test_switches_forward_to_the_backend():
    f = _cudnn.FLAGS
    before = (f.enabled, f.benchmark, f.deterministic, f.allow_tf32)
    try:
        ember.backends.cudnn.benchmark = True
        assert f.benchmark is True and ember.backends.cudnn.benchmark is True
        with ember.backends.cudnn.flags(enabled=False, deterministic=True):
            assert (f.enabled, f.benchmark, f.deterministic) == (False, False, True)
        assert (f.enabled, f.benchmark, f.deterministic) == (True, True, False)
    finally:
        f.enabled, f.benchmark, f.deterministic, f.allow_tf32 = before


# ------------------------------------------------------------------ on a real GPU

real_cudnn = pytest.mark.skipif(
    EMULATED or not HAVE_GPU or not ember.backends.cudnn.is_available(),
    reason="needs a real CUDA device with cuDNN")


def _torch_gpu():
    return torch.cuda.is_available()


@real_cudnn
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_real_conv_matches_embers_kernels_and_torch(case, layout, dtype):
    xs, ws, stride, padding, dilation, groups = CONVS[case]
    if layout == "nhwc" and len(xs) == 3:
        pytest.skip("channels-last is 4-d")
    x32, w32, b32 = _rand(xs, np.float32, 80), _rand(ws, np.float32, 81), \
        _rand((ws[0],), np.float32, 82)
    edt = getattr(ember, dtype)
    ty, gy, tgx, tgw, tgb = _torch_conv(x32, w32, b32, stride, padding, dilation, groups)
    results = {}
    for enabled in (True, False):
        with ember.backends.cudnn.flags(enabled=enabled, allow_tf32=False):
            before = _counts("conv2d")[0]
            xe = gpu(ember.asarray(x32).astype(edt))
            if layout == "nhwc":
                xe = xe.permute(0, 2, 3, 1).copy().permute(0, 3, 1, 2)
            xe.requires_grad_()
            we = gpu(ember.asarray(w32).astype(edt)).requires_grad_()
            be = gpu(ember.asarray(b32).astype(edt)).requires_grad_()
            conv = F.conv1d if len(xs) == 3 else F.conv2d
            y = conv(xe, we, be, stride, padding, dilation, groups)
            y.backward(gpu(ember.asarray(gy).astype(edt)))
            results[enabled] = [host(a).astype(np.float64) for a in (y, xe.grad, we.grad, be.grad)]
            if enabled:
                assert _counts("conv2d")[0] == before + 1, _cudnn.LAST_FALLBACK
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 1e-1}[dtype]
    for got, own, exp in zip(results[True], results[False], (ty, tgx, tgw, tgb)):
        scale = np.abs(exp).max() + 1
        np.testing.assert_allclose(got, exp, rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(got, own, rtol=tol, atol=tol * scale)
    if _torch_gpu():
        tdt = getattr(torch, dtype)
        xt = torch.tensor(x32).to("cuda", tdt)
        if layout == "nhwc":
            xt = xt.contiguous(memory_format=torch.channels_last)
        conv = torch.nn.functional.conv1d if len(xs) == 3 else torch.nn.functional.conv2d
        yt = conv(xt, torch.tensor(w32).to("cuda", tdt), torch.tensor(b32).to("cuda", tdt),
                  stride, padding, dilation, groups)
        np.testing.assert_allclose(results[True][0], yt.float().cpu().numpy(), rtol=tol,
                                   atol=tol * (np.abs(ty).max() + 1))


@real_cudnn
@pytest.mark.parametrize("benchmark,deterministic", [(True, False), (False, True)])
def test_real_conv_switches(benchmark, deterministic):
    x, w = _rand((8, 16, 14, 14), np.float32, 90), _rand((32, 16, 3, 3), np.float32, 91)
    grads = []
    for _ in range(2):
        with ember.backends.cudnn.flags(enabled=True, benchmark=benchmark,
                                        deterministic=deterministic, allow_tf32=False):
            xe, we = gpu(x).requires_grad_(), gpu(w).requires_grad_()
            F.conv2d(xe, we, padding=1).square().sum().backward()
            grads.append((host(xe.grad), host(we.grad)))
    ref_x, ref_w = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(ref_x, ref_w, padding=1).square().sum().backward()
    np.testing.assert_allclose(grads[0][1], ref_w.grad.numpy(), rtol=1e-3, atol=1e-2)
    if deterministic:
        for a, b in zip(*grads):
            np.testing.assert_array_equal(a, b)


@real_cudnn
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("training", [True, False])
def test_real_batch_norm_matches_embers_kernels_and_torch(dtype, training, layout):
    C, eps = 8, 0.1                       # a large eps: the backward must not depend on it
    x = _rand((16, C, 9, 7), np.float32, 100)
    w, b = _rand((C,), np.float32, 101), _rand((C,), np.float32, 102)
    rm, rv = _rand((C,), np.float32, 103), np.abs(_rand((C,), np.float32, 104)) + 0.5
    ty, gy, tg, trm, trv = _torch_bn(x.astype(dtype), w, b, rm, rv, training, eps)
    results = {}
    for enabled in (True, False):
        with ember.backends.cudnn.flags(enabled=enabled):
            before = _counts("batch_norm")[0] + _counts("batch_norm (eval)")[0]
            xe = (_channels_last(x.astype(dtype)) if layout == "nhwc"
                  else gpu(x.astype(dtype))).requires_grad_()
            we, be = gpu(w).requires_grad_(), gpu(b).requires_grad_()
            rme, rve = gpu(rm), gpu(rv)
            y = F.batch_norm(xe, rme, rve, we, be, training, 0.1, eps)
            y.backward(gpu(gy.astype(dtype)))
            results[enabled] = [host(a).astype(np.float64)
                                for a in (y, xe.grad, we.grad, be.grad, rme, rve)]
            if enabled:
                after = _counts("batch_norm")[0] + _counts("batch_norm (eval)")[0]
                assert after == before + 1, _cudnn.LAST_FALLBACK
    tol = 1e-4 if dtype == "float32" else 2e-2
    for got, own, exp in zip(results[True], results[False], (ty, *tg, trm, trv)):
        np.testing.assert_allclose(got, exp, rtol=tol, atol=tol * 10)
        np.testing.assert_allclose(got, own, rtol=tol, atol=tol * 10)
