"""ember.amp: autocast (state, the dispatcher hook, end to end on the CPU with float16)
and GradScaler (against torch.amp.GradScaler); GPU cases run only where a GPU is."""
import threading
import warnings

import numpy as np
import pytest

import ember
import ember.amp
from ember.amp import autocast, GradScaler
from ember.amp.autocast import _cast_args, _ACTIVE


def _gpu():
    import ember.cuda
    f = getattr(ember.cuda, "is_available", None)
    return bool(f is not None and f())


needs_gpu = pytest.mark.skipif(not _gpu(), reason="no CUDA GPU")
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)


def _wired():
    """Whether DiffOp.__call__ calls the autocast hook (the dispatcher side)."""
    a = ember.ones((2, 2))
    with autocast("cpu", dtype=ember.float16):
        return ember.matmul(a, a).dtype == F16


needs_hook = pytest.mark.skipif(not _wired(), reason="the dispatcher does not call "
                                "ember.amp.autocast._cast_args yet")


# ------------------------------------------------------------------ autocast state

def test_state_nesting_and_restore():
    assert not ember.amp.is_autocast_enabled("cpu")
    base = _ACTIVE[0]
    with autocast("cpu", dtype=ember.float16):
        assert ember.amp.is_autocast_enabled("cpu")
        assert not ember.amp.is_autocast_enabled("cuda")
        assert ember.amp.get_autocast_dtype("cpu") == F16
        assert _ACTIVE[0] == base + 1
        with autocast("cpu", enabled=False):
            assert not ember.amp.is_autocast_enabled("cpu")
            assert _ACTIVE[0] == base
        assert ember.amp.is_autocast_enabled("cpu")
        with autocast("cpu", dtype=ember.float32):
            assert ember.amp.get_autocast_dtype("cpu") == F32
        assert ember.amp.get_autocast_dtype("cpu") == F16
    assert not ember.amp.is_autocast_enabled("cpu")
    assert _ACTIVE[0] == base


def test_defaults():
    assert ember.amp.get_autocast_dtype("cuda") == F16
    # the CPU default is bfloat16, as in PyTorch
    assert ember.amp.get_autocast_dtype("cpu") == np.dtype(ember.bfloat16)


def test_exception_restores_state():
    with pytest.raises(KeyError):
        with autocast("cpu", dtype=ember.float16):
            raise KeyError("x")
    assert not ember.amp.is_autocast_enabled("cpu")


def test_decorator():
    @autocast("cpu", dtype=ember.float16)
    def f():
        return ember.amp.is_autocast_enabled("cpu"), ember.amp.get_autocast_dtype("cpu")
    assert f() == (True, F16)
    assert not ember.amp.is_autocast_enabled("cpu")


def test_thread_local():
    seen = []
    with autocast("cpu", dtype=ember.float16):
        t = threading.Thread(target=lambda: seen.append(ember.amp.is_autocast_enabled("cpu")))
        t.start()
        t.join()
    assert seen == [False]


def test_bad_arguments():
    with pytest.raises(ValueError, match="device_type"):
        autocast("tpu")
    with pytest.raises(TypeError, match="device_type"):
        autocast(0)
    with pytest.warns(UserWarning, match="not supported"):
        with autocast("cpu", dtype=ember.int32):
            assert not ember.amp.is_autocast_enabled("cpu")


@pytest.mark.skipif(_gpu(), reason="checks the no-GPU behaviour")
def test_cuda_without_gpu_is_disabled():
    import ember.cuda
    if getattr(ember.cuda, "is_available", None) is None:
        pytest.skip("ember.cuda.is_available not there yet")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with autocast("cuda"):
            assert not ember.amp.is_autocast_enabled("cuda")


# ------------------------------------------------------------------ the hook

def test_hook_outside_region_and_unknown_ops_return_the_same_objects():
    a = ember.ones(3)
    args, kw = (a,), {"axis": 0}
    with autocast("cpu", dtype=ember.float16):
        r = _cast_args("reshape", args, kw)
    assert r[0] is args and r[1] is kw
    r = _cast_args("matmul", args, kw)          # no region open
    assert r[0][0] is a


def test_hook_lower_precision():
    a = ember.ones((2, 3))
    b = ember.ones((3, 2), dtype=ember.float64)
    i = ember.ones((3,), dtype=ember.int64)
    with autocast("cpu", dtype=ember.float16):
        (ca, cb, ci, s), kw = _cast_args("matmul", (a, b, i, "x"), {"out": a, "w": a})
    assert ca.dtype == F16 and cb is b and ci is i and s == "x"
    assert kw["out"] is a and kw["w"].dtype == F16
    assert a.dtype == F32           # the argument itself is untouched


def test_hook_float32_positions():
    x = ember.ones((4, 3), dtype=ember.float16)
    w = ember.ones(3, dtype=ember.float16)
    stats = ember.zeros(3, dtype=ember.float16)   # an output buffer: must not be copied
    with autocast("cpu", dtype=ember.float16):
        (cx, cw, cb, shape, eps, cs), _ = _cast_args(
            "nn.functional.normalization._layer_norm", (x, w, None, (3,), 1e-5, stats), {})
        (sx,), _ = _cast_args("nn.functional.softmax", (x,), {})
    assert cx.dtype == F32 and cw.dtype == F32 and cb is None and cs is stats
    assert sx.dtype == F32


def test_hook_list_argument():
    a, b = ember.ones((2, 2)), ember.ones((2, 2))
    with autocast("cpu", dtype=ember.float16):
        (lst,), _ = _cast_args("linalg.multi_dot", ([a, b],), {})
    assert isinstance(lst, list) and [x.dtype for x in lst] == [F16, F16]


def test_hook_cache_for_parameters():
    w = ember.ones((3, 3), requires_grad=True)
    x = ember.ones((3, 3))
    with autocast("cpu", dtype=ember.float16):
        (x1, w1), _ = _cast_args("matmul", (x, w), {})
        (x2, w2), _ = _cast_args("matmul", (x, w), {})
        assert w1 is w2                 # a leaf that requires grad: cast once per region
        assert x1 is not x2             # other arrays: cast each time
    with autocast("cpu", dtype=ember.float16, cache_enabled=False):
        (_, w3), _ = _cast_args("matmul", (x, w), {})
        (_, w4), _ = _cast_args("matmul", (x, w), {})
        assert w3 is not w4
    with autocast("cpu", dtype=ember.float16):
        (_, w5), _ = _cast_args("matmul", (x, w), {})
    assert w5 is not w1                 # the cache ended with the region


def test_hook_casts_are_differentiable():
    x = ember.asarray(np.arange(6, dtype=np.float32).reshape(2, 3) / 7, requires_grad=True)
    w = ember.asarray(np.arange(6, dtype=np.float32).reshape(3, 2) / 5, requires_grad=True)
    with autocast("cpu", dtype=ember.float16):
        args, _ = _cast_args("matmul", (x, w), {})
        y = ember.matmul(*args)
        (ys,), _ = _cast_args("sum", (y,), {})
        loss = ember.sum(ys)
    assert y.dtype == F16 and loss.dtype == F32
    loss.backward()
    assert x.grad.dtype == F32 and w.grad.dtype == F32
    # d/dx sum(x @ w) = ones @ w.T (float16 rounding of w)
    want = np.ones((2, 2), np.float16) @ np.asarray(w.detach()).astype(np.float16).T
    np.testing.assert_allclose(np.asarray(x.grad), want.astype(np.float32), rtol=1e-3)


# ------------------------------------------------------------------ end to end (dispatcher)

@needs_hook
def test_ops_under_cpu_autocast():
    F = ember.nn.functional
    x = ember.asarray(np.random.default_rng(0).standard_normal((4, 5)), dtype=ember.float32)
    w = ember.asarray(np.random.default_rng(1).standard_normal((3, 5)), dtype=ember.float32)
    with autocast("cpu", dtype=ember.float16):
        y = F.linear(x, w)
        p = F.softmax(y, dim=-1)
        s = ember.sum(y)
        z = y + 1.0                             # not listed: runs in its inputs' dtype
        d = ember.matmul(x.astype(ember.float64), w.T.astype(ember.float64))
    assert y.dtype == F16 and p.dtype == F32 and s.dtype == F32 and z.dtype == F16
    assert d.dtype == F64                       # float64 is never autocast
    want = x.numpy().astype(np.float16) @ w.numpy().astype(np.float16).T
    np.testing.assert_allclose(y.numpy().astype(np.float32), want.astype(np.float32),
                               rtol=2e-3, atol=2e-3)


@needs_hook
def test_training_step_under_cpu_autocast():
    rng = np.random.default_rng(0)
    model = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    x = ember.asarray(rng.standard_normal((5, 6)), dtype=ember.float32)
    t = ember.asarray(rng.integers(0, 3, 5))
    with autocast("cpu", dtype=ember.float16):
        out = model(x)
        loss = ember.nn.functional.cross_entropy(out, t)
    assert out.dtype == F16
    loss.backward()
    for p in model.parameters():
        assert p.grad is not None and p.grad.dtype == F32
        assert np.isfinite(p.grad.numpy()).all()
    # against the same model run in float32: close to half precision
    ref = ember.nn.functional.cross_entropy(model(x), t)
    assert abs(float(loss) - float(ref)) < 1e-2


@needs_hook
def test_float32_wrappers_keep_float32():
    F = ember.nn.functional
    y = ember.ones((4, 3), dtype=ember.float16)
    t = ember.asarray([0, 1, 2, 0])
    with autocast("cpu", dtype=ember.float16):
        assert F.layer_norm(y, (3,)).dtype == F32
        assert F.cross_entropy(y, t).dtype == F32
        assert F.nll_loss(F.log_softmax(y, dim=-1), t).dtype == F32


# ------------------------------------------------------------------ GradScaler

def _trajectory(lib, pattern, **kw):
    """Scale, growth tracker and weights after each step, with planted inf gradients."""
    if lib == "torch":
        torch = pytest.importorskip("torch")
        w = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.05, momentum=0.9)
        scaler = torch.amp.GradScaler("cpu", **kw)
    else:
        w = ember.asarray([1.0, -2.0, 0.5], requires_grad=True)
        opt = ember.optim.SGD([w], lr=0.05, momentum=0.9)
        scaler = GradScaler("cpu", **kw)
    out = []
    for bad in pattern:
        opt.zero_grad()
        loss = (w * w * w).sum()
        scaler.scale(loss).backward()
        if bad:
            if lib == "torch":
                with torch.no_grad():
                    w.grad[1] = float("nan") if bad == 2 else float("inf")
            else:
                w.grad[1] = float("nan") if bad == 2 else float("inf")
        scaler.step(opt)
        scaler.update()
        out.append((scaler.get_scale(), scaler._get_growth_tracker(),
                    [float(v) for v in w.tolist()]))
    return out, scaler.state_dict()


@pytest.mark.parametrize("kw", [dict(init_scale=8.0, growth_interval=3),
                                dict(init_scale=2.0 ** 16, growth_factor=3.0,
                                     backoff_factor=0.25, growth_interval=2)])
def test_grad_scaler_matches_torch(kw):
    pattern = [0, 0, 0, 1, 0, 0, 2, 1, 0, 0, 0, 0, 1, 0]
    mine, sd_mine = _trajectory("ember", pattern, **kw)
    ref, sd_ref = _trajectory("torch", pattern, **kw)
    for (s1, g1, w1), (s2, g2, w2) in zip(mine, ref):
        assert s1 == s2 and g1 == g2
        np.testing.assert_allclose(w1, w2, rtol=1e-6)
    assert sd_mine == sd_ref


def test_grad_scaler_disabled_is_pass_through():
    w = ember.asarray([1.0], requires_grad=True)
    opt = ember.optim.SGD([w], lr=0.5)
    scaler = GradScaler("cpu", enabled=False)
    loss = (w * w).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [0.0]
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {} and not scaler.is_enabled()


def test_grad_scaler_unscale_then_clip_and_errors():
    w = ember.asarray([3.0, 4.0], requires_grad=True)
    opt = ember.optim.SGD([w], lr=1.0)
    scaler = GradScaler("cpu", init_scale=4.0)
    with pytest.raises(RuntimeError, match="scale"):
        scaler.unscale_(opt)                    # nothing scaled yet
    scaler.scale((w * w).sum()).backward()
    assert w.grad.tolist() == [24.0, 32.0]
    scaler.unscale_(opt)
    assert w.grad.tolist() == [6.0, 8.0]        # real gradients, ready to clip
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure"):
        scaler.step(opt, closure=lambda: None)


def test_grad_scaler_scale_lists_and_fp16_grads():
    scaler = GradScaler("cpu", init_scale=2.0)
    a, b = ember.ones(2), ember.ones(3)
    sa, (sb,) = scaler.scale([a, (b,)])
    assert sa.tolist() == [2.0, 2.0] and sb.tolist() == [2.0, 2.0, 2.0]
    w = ember.ones(2, dtype=ember.float16)
    w.grad = ember.ones(2, dtype=ember.float16)
    opt = ember.optim.SGD([ember.ones(2, requires_grad=True)], lr=0.1)
    opt.param_groups[0]["params"] = [w]
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler.unscale_(opt)


def test_grad_scaler_state_dict_round_trip_and_new_scale():
    s1 = GradScaler("cpu", init_scale=16.0, growth_interval=5)
    s1.scale(ember.ones(1))
    s1._growth_tracker = 3
    sd = s1.state_dict()
    s2 = GradScaler("cpu")
    s2.load_state_dict(sd)
    assert s2.state_dict() == sd and s2.get_scale() == 16.0
    s2.scale(ember.ones(1))
    s2.update(new_scale=5.0)
    assert s2.get_scale() == 5.0
    s2.update(new_scale=ember.asarray([7.0]))
    assert s2.get_scale() == 7.0
    with pytest.raises(RuntimeError, match="empty"):
        s2.load_state_dict({})
    with pytest.raises(RuntimeError, match="No inf checks"):
        s2.update()


@pytest.mark.skipif(_gpu(), reason="checks the no-GPU behaviour")
def test_cuda_grad_scaler_without_gpu_disables_itself():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s = GradScaler("cuda")
    assert not s.is_enabled() and any("CUDA is not available" in str(r.message) for r in rec)


# ------------------------------------------------------------------ on a GPU

@needs_gpu
@needs_hook
def test_cuda_autocast_matmul_and_softmax():
    a = ember.asarray(np.random.default_rng(0).standard_normal((8, 16)),
                      dtype=ember.float32).to("cuda")
    b = ember.asarray(np.random.default_rng(1).standard_normal((16, 4)),
                      dtype=ember.float32).to("cuda")
    with autocast("cuda"):
        c = ember.matmul(a, b)
        p = ember.nn.functional.softmax(c, dim=-1)
    assert c.dtype == F16 and p.dtype == F32 and c.is_cuda
    want = a.cpu().numpy().astype(np.float16) @ b.cpu().numpy().astype(np.float16)
    np.testing.assert_allclose(c.cpu().numpy().astype(np.float32), want.astype(np.float32),
                               rtol=1e-2, atol=1e-2)


@needs_gpu
def test_cuda_grad_scaler_skips_inf_step():
    w = ember.asarray([1.0, 2.0]).to("cuda").requires_grad_(True)
    opt = ember.optim.SGD([w], lr=0.1)
    scaler = GradScaler("cuda", init_scale=8.0)
    w.grad = ember.asarray([float("inf"), 1.0]).to("cuda")
    scaler.scale(ember.ones(1).to("cuda"))
    scaler.step(opt)
    scaler.update()
    assert w.cpu().tolist() == [1.0, 2.0] and scaler.get_scale() == 4.0
    w.grad = ember.asarray([8.0, 16.0]).to("cuda")
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(w.cpu().numpy(), [0.8, 1.6], rtol=1e-6)


_OPTIMS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    ("RMSprop", dict(lr=0.01, weight_decay=0.1)),
]


@needs_gpu
@pytest.mark.parametrize("name,kw", _OPTIMS)
def test_cuda_optimizers_match_cpu(name, kw):
    rng = np.random.default_rng(0)
    shapes = [(5, 3), (7,), (40000,), (2, 2, 2)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(4)]
    cpu = [ember.asarray(v.copy(), requires_grad=True) for v in init]
    gpu = [ember.asarray(v.copy()).to("cuda").requires_grad_(True) for v in init]
    oc = getattr(ember.optim, name)(cpu, **kw)
    og = getattr(ember.optim, name)(gpu, **kw)
    for step, gs in enumerate(grads):
        for i, (pc, pg, g) in enumerate(zip(cpu, gpu, gs)):
            if step == 1 and i == 1:
                pc.grad = pg.grad = None        # a parameter skipping a step
            else:
                pc.grad = ember.asarray(g)
                pg.grad = ember.asarray(g).to("cuda")
        oc.step()
        og.step()
    for pc, pg in zip(cpu, gpu):
        assert pg.is_cuda
        np.testing.assert_allclose(pg.cpu().numpy(), pc.numpy(), rtol=1e-5, atol=1e-5)
    sg, sc = og.state_dict()["state"], oc.state_dict()["state"]
    assert sorted(sg) == sorted(sc)
    for k in sc:
        assert sorted(sg[k]) == sorted(sc[k])
        if "step" in sc[k]:
            assert float(sg[k]["step"]) == float(sc[k]["step"])


def test_cpu_autocast_bfloat16_end_to_end_matches_torch():
    """The CPU default (bfloat16): linear runs in bfloat16, cross_entropy in float32,
    gradients come back in the parameters' float32; compared with torch's CPU autocast."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    t = np.array([0, 3, 1, 2, 3, 0])
    ew = ember.asarray(w)
    ew.requires_grad_(True)
    with autocast("cpu"):
        y = ember.nn.functional.linear(ember.asarray(x), ew)
        loss = ember.nn.functional.cross_entropy(y, ember.asarray(t))
    assert y.dtype == np.dtype(ember.bfloat16) and loss.dtype == F32
    loss.backward()
    tw = torch.tensor(w, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = torch.nn.functional.linear(torch.tensor(x), tw)
        tloss = torch.nn.functional.cross_entropy(ty, torch.tensor(t))
    assert ty.dtype == torch.bfloat16 and tloss.dtype == torch.float32
    tloss.backward()
    np.testing.assert_array_equal(np.asarray(y.detach().astype(ember.float32)), ty.detach().float().numpy())
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-6)
    assert ew.grad.dtype == F32
    np.testing.assert_allclose(np.asarray(ew.grad), tw.grad.numpy(), rtol=2e-2, atol=2e-3)
