"""ember.optim against torch.optim: parameter trajectories, state dicts, errors."""
import copy
import pickle

import numpy as np
import pytest

import ember as E
import ember.optim as eo
from ember._kernels.cpu import optim as _k

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64]
SHAPES = [(7, 5), (33,), (), (1,), (4, 3, 2)]

# (name, kwargs) for every optimizer and the option combinations worth telling apart
CONFIGS = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.02, betas=(0.3, 0.8), eps=1e-6, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, maximize=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, eps=1e-4)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, eps=1e-6, maximize=True)),
]
IDS = [name + "-" + ",".join(f"{k}={v}" for k, v in kw.items()) for name, kw in CONFIGS]


def _inits(dtype, shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(s), dtype=dtype) for s in shapes]


def _grad_fn(shapes, n_steps, seed=1):
    """Deterministic gradients depending on the current parameters (so
    differences would grow): g = (p - target) * scale + noise_k."""
    rng = np.random.default_rng(seed)
    targets = [rng.standard_normal(s) for s in shapes]
    noise = [[0.3 * rng.standard_normal(s) for s in shapes] for _ in range(n_steps)]

    def grad(k, i, p_np):
        return (p_np.astype(np.float64) - targets[i]) * 0.7 + noise[k][i]
    return grad


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return np.asarray(x.detach())


def _run(make_e, make_t, dtype, n_steps=50, shapes=SHAPES, skip=None, lr_at=None):
    """Train ember and torch side by side; returns both parameter lists."""
    inits = _inits(dtype, shapes)
    grad = _grad_fn(shapes, n_steps)
    ep = [E.asarray(a.copy(), requires_grad=True) for a in inits]
    tp = [torch.tensor(a.copy(), requires_grad=True) for a in inits]
    eopt, topt = make_e(ep), make_t(tp)
    for k in range(n_steps):
        if lr_at is not None:
            for ge, gt in zip(eopt.param_groups, topt.param_groups):
                ge["lr"] = gt["lr"] = lr_at(k, ge["lr"])
        for i, (pe, pt) in enumerate(zip(ep, tp)):
            if skip is not None and skip(k, i):
                pe.grad = None
                pt.grad = None
                continue
            pe.grad = E.asarray(grad(k, i, _np(pe)).astype(dtype))
            pt.grad = torch.tensor(grad(k, i, _np(pt)).astype(dtype))
        eopt.step()
        topt.step()
    return ep, tp, eopt, topt


def _make(name, kw):
    return ((lambda ps: getattr(eo, name)(ps, **kw)),
            (lambda ps: getattr(torch.optim, name)(ps, **kw)))


def _assert_close(ep, tp, dtype):
    rtol, atol = (2e-4, 2e-6) if dtype == np.float32 else (1e-11, 1e-13)
    for pe, pt in zip(ep, tp):
        assert _np(pe).dtype == dtype
        np.testing.assert_allclose(_np(pe), _np(pt), rtol=rtol, atol=atol)


@pytest.fixture
def exact_sqrt(monkeypatch):
    """torch's CPU sqrt is MKL's (within 1 ulp, not always correctly rounded);
    with a correctly rounded one torch's optimizers and ember's agree bit for bit."""
    if _k.kernel_variant() == "portable" or \
            torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("bit-exact comparison needs fused multiply-adds on both sides")

    def sqrt(self):
        return torch.from_numpy(np.array(np.sqrt(self.detach().numpy())))

    def sqrt_(self):
        return self.copy_(sqrt(self))
    monkeypatch.setattr(torch.Tensor, "sqrt", sqrt)
    monkeypatch.setattr(torch.Tensor, "sqrt_", sqrt_)


@pytest.fixture
def threaded():
    """Split even small groups over threads (the threshold is large by default)."""
    old = _k._set_parallel_threshold(1000)
    yield
    _k._set_parallel_threshold(old)


# ------------------------------------------------------------ trajectories
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CONFIGS, ids=IDS)
def test_trajectory_matches_torch(name, kw, dtype):
    ep, tp, _, _ = _run(*_make(name, kw), dtype)
    _assert_close(ep, tp, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CONFIGS, ids=IDS)
def test_trajectory_bit_exact_with_exact_sqrt(name, kw, dtype, exact_sqrt):
    ep, tp, eopt, topt = _run(*_make(name, kw), dtype, n_steps=30)
    for pe, pt in zip(ep, tp):
        np.testing.assert_array_equal(_np(pe), _np(pt))
    # the optimizer state agrees too
    for pe, pt in zip(ep, tp):
        se, st = eopt.state[pe], topt.state[pt]
        assert sorted(se) == sorted(st)
        for key in st:
            np.testing.assert_array_equal(_np(se[key]), _np(st[key]), err_msg=key)


@pytest.mark.parametrize("name,kw", [CONFIGS[2], CONFIGS[6], CONFIGS[12], CONFIGS[16]],
                         ids=[IDS[2], IDS[6], IDS[12], IDS[16]])
def test_portable_kernels(name, kw):
    """The loops without FMA (CPUs lacking it) agree with torch to rounding."""
    try:
        assert _k._select_kernels(0) == "portable"
        ep, tp, _, _ = _run(*_make(name, kw), np.float32, n_steps=30)
    finally:
        _k._select_kernels(2)
    _assert_close(ep, tp, np.float32)


@pytest.mark.parametrize("name,kw", [CONFIGS[1], CONFIGS[6], CONFIGS[12], CONFIGS[16]],
                         ids=[IDS[1], IDS[6], IDS[12], IDS[16]])
def test_big_parameters_threaded(name, kw, exact_sqrt, threaded):
    """Groups split over threads give the same bits."""
    shapes = [(200, 201), (70001,), (5,)]
    ep, tp, _, _ = _run(*_make(name, kw), np.float32, n_steps=2, shapes=shapes)
    for pe, pt in zip(ep, tp):
        np.testing.assert_array_equal(_np(pe), _np(pt))


@pytest.mark.parametrize("name,kw", [CONFIGS[1], CONFIGS[6], CONFIGS[12], CONFIGS[16]],
                         ids=[IDS[1], IDS[6], IDS[12], IDS[16]])
def test_missing_grads_are_skipped(name, kw):
    """Parameters whose .grad is None are skipped (their step counter does not move)."""
    skip = lambda k, i: (k + i) % 3 == 0 or (i == 1 and k < 10)   # noqa: E731
    ep, tp, eopt, topt = _run(*_make(name, kw), np.float64, n_steps=30, skip=skip)
    _assert_close(ep, tp, np.float64)
    for pe, pt in zip(ep, tp):
        if "step" in topt.state[pt]:
            assert float(eopt.state[pe]["step"]) == float(topt.state[pt]["step"])


@pytest.mark.parametrize("name,kw", [CONFIGS[1], CONFIGS[5], CONFIGS[11], CONFIGS[16]],
                         ids=[IDS[1], IDS[5], IDS[11], IDS[16]])
def test_lr_changed_between_steps(name, kw):
    lr_at = lambda k, lr: lr * 0.9 if k % 5 == 4 else lr   # noqa: E731
    ep, tp, _, _ = _run(*_make(name, kw), np.float32, n_steps=30, lr_at=lr_at)
    _assert_close(ep, tp, np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_param_groups_with_different_options(dtype):
    def groups(ps, lib):
        return [{"params": ps[:2], "lr": 0.03, "amsgrad": True},
                {"params": ps[2:4], "weight_decay": 0.2},
                {"params": ps[4:], "lr": 0.001, "betas": (0.5, 0.9)}]
    ep, tp, eopt, topt = _run(lambda ps: eo.Adam(groups(ps, E), lr=0.01),
                              lambda ps: torch.optim.Adam(groups(ps, torch), lr=0.01), dtype)
    _assert_close(ep, tp, dtype)
    assert [g["lr"] for g in eopt.param_groups] == [0.03, 0.01, 0.001]
    ep, tp, _, _ = _run(
        lambda ps: eo.SGD([{"params": ps[:3], "momentum": 0.9}, {"params": ps[3:]}], lr=0.02),
        lambda ps: torch.optim.SGD([{"params": ps[:3], "momentum": 0.9}, {"params": ps[3:]}],
                                   lr=0.02), dtype)
    _assert_close(ep, tp, dtype)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
                                     ("Adam", dict(lr=0.01, amsgrad=True)),
                                     ("AdamW", dict(lr=0.01)),
                                     ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
                                     ("Adagrad", dict(lr=0.1, lr_decay=0.01))])
def test_mlp_trained_with_autograd(name, kw):
    """A small MLP whose gradients each library computes itself."""
    rng = np.random.default_rng(3)
    shapes = [(16, 8), (16,), (3, 16), (3,)]
    inits = [(0.3 * rng.standard_normal(s)).astype(np.float32) for s in shapes]
    x = rng.standard_normal((32, 8)).astype(np.float32)
    y = rng.standard_normal((32, 3)).astype(np.float32)
    ep = [E.asarray(a.copy(), requires_grad=True) for a in inits]
    tp = [torch.tensor(a.copy(), requires_grad=True) for a in inits]
    eopt, topt = getattr(eo, name)(ep, **kw), getattr(torch.optim, name)(tp, **kw)
    xe, ye, xt, yt = E.asarray(x), E.asarray(y), torch.tensor(x), torch.tensor(y)

    def loss_e():
        eopt.zero_grad()
        h = E.tanh(xe @ ep[0].T + ep[1])
        out = h @ ep[2].T + ep[3]
        loss = ((out - ye) ** 2).mean()
        loss.backward()
        return loss

    def loss_t():
        topt.zero_grad()
        h = torch.tanh(xt @ tp[0].T + tp[1])
        loss = ((h @ tp[2].T + tp[3] - yt) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(30):
        le = eopt.step(loss_e)
        lt = topt.step(loss_t)
        np.testing.assert_allclose(float(le), lt.item(), rtol=1e-4)
    for pe, pt in zip(ep, tp):
        np.testing.assert_allclose(_np(pe), _np(pt), rtol=1e-3, atol=1e-5)


# -------------------------------------------------------------- state dict
def _torch_like_keys(sd_e, sd_t):
    assert sorted(sd_e) == sorted(sd_t) == ["param_groups", "state"]
    assert sorted(sd_e["state"]) == sorted(sd_t["state"])
    for ge, gt in zip(sd_e["param_groups"], sd_t["param_groups"]):
        assert sorted(ge) == sorted(gt)
        for key in gt:
            if key not in ("foreach", "fused"):
                assert ge[key] == gt[key], key
    for idx, st in sd_t["state"].items():
        assert sorted(sd_e["state"][idx]) == sorted(st)


@pytest.mark.parametrize("name,kw", CONFIGS[1:18:3], ids=IDS[1:18:3])
def test_state_dict_layout_like_torch(name, kw):
    groups = lambda ps: [{"params": ps[:2]}, {"params": ps[2:], "lr": 0.001}]   # noqa: E731
    me, mt = _make(name, kw)
    ep, tp, eopt, topt = _run(lambda ps: me(groups(ps)), lambda ps: mt(groups(ps)),
                              np.float32, n_steps=3)
    _torch_like_keys(eopt.state_dict(), topt.state_dict())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CONFIGS[1:18:2], ids=IDS[1:18:2])
def test_state_dict_round_trip_mid_training(name, kw, dtype):
    """25 steps, save, a fresh optimizer on copies loads the state, 25 more
    steps: identical to 50 uninterrupted steps."""
    make = lambda ps: getattr(eo, name)([{"params": ps[:3]}, {"params": ps[3:], "lr": 0.002}],
                                        **kw)   # noqa: E731
    inits = _inits(dtype)
    grad = _grad_fn(SHAPES, 50)
    ref = [E.asarray(a.copy(), requires_grad=True) for a in inits]
    ropt = make(ref)

    def train(params, opt, steps):
        for k in steps:
            for i, p in enumerate(params):
                p.grad = E.asarray(grad(k, i, _np(p)).astype(dtype))
            opt.step()

    train(ref, ropt, range(25))
    sd = pickle.loads(pickle.dumps(ropt.state_dict()))
    new = [E.asarray(_np(p).copy(), requires_grad=True) for p in ref]
    nopt = make(new)
    nopt.load_state_dict(sd)
    assert nopt.param_groups[1]["lr"] == 0.002
    train(ref, ropt, range(25, 50))
    train(new, nopt, range(25, 50))
    for a, b in zip(ref, new):
        np.testing.assert_array_equal(_np(a), _np(b))


def test_load_torch_state_dict_and_continue(exact_sqrt):
    """A torch optimizer's state_dict loads into ember's (tensors converted)."""
    kw = dict(lr=0.01, amsgrad=True, weight_decay=0.01)
    inits = _inits(np.float32)
    grad = _grad_fn(SHAPES, 40)
    tp = [torch.tensor(a.copy(), requires_grad=True) for a in inits]
    topt = torch.optim.AdamW(tp, **kw)
    for k in range(40):
        if k == 20:
            ep = [E.asarray(_np(p).copy(), requires_grad=True) for p in tp]
            eopt = eo.AdamW(ep, **kw)
            eopt.load_state_dict(topt.state_dict())
            assert isinstance(eopt.state[ep[0]]["exp_avg"], E.ndarray)
        for i, p in enumerate(tp):
            p.grad = torch.tensor(grad(k, i, _np(p)).astype(np.float32))
        topt.step()
        if k >= 20:
            for i, p in enumerate(ep):
                p.grad = E.asarray(grad(k, i, _np(p)).astype(np.float32))
            eopt.step()
    for pe, pt in zip(ep, tp):
        np.testing.assert_array_equal(_np(pe), _np(pt))


def test_load_state_dict_casts_to_param_dtype():
    p32 = E.zeros(3, requires_grad=True)
    opt = eo.SGD([p32], lr=0.1, momentum=0.9)
    p32.grad = E.ones(3)
    opt.step()
    sd = opt.state_dict()
    p64 = E.zeros(3, dtype=E.float64, requires_grad=True)
    opt64 = eo.SGD([p64], lr=0.1, momentum=0.9)
    opt64.load_state_dict(sd)
    buf = opt64.state[p64]["momentum_buffer"]
    assert buf.dtype == np.float64
    assert buf is not sd["state"][0]["momentum_buffer"]   # a copy
    p64.grad = E.ones(3, dtype=E.float64)
    opt64.step()
    np.testing.assert_allclose(_np(p64), [-0.19] * 3)   # buf = 0.9*1 + 1
    # adam keeps the step counter's own dtype
    q = E.zeros(2, dtype=E.float64, requires_grad=True)
    a = eo.Adam([q])
    q.grad = E.ones(2, dtype=E.float64)
    a.step()
    a2 = eo.Adam([E.zeros(2, requires_grad=True)])
    a2.load_state_dict(a.state_dict())
    st = list(a2.state.values())[0]
    assert st["step"].dtype == np.float32 and st["exp_avg"].dtype == np.float32


def test_load_state_dict_errors():
    a, b = E.zeros(2, requires_grad=True), E.zeros(3, requires_grad=True)
    opt = eo.Adam([a, b])
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]})
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})
    with pytest.raises(KeyError, match="param_groups"):
        opt.load_state_dict({"state": {}})
    with pytest.raises(TypeError, match="expected a dict"):
        opt.load_state_dict([1, 2])


def test_adagrad_state_is_eager():
    a = E.zeros(2, requires_grad=True)
    opt = eo.Adagrad([a], initial_accumulator_value=0.25)
    sd = opt.state_dict()
    assert float(sd["state"][0]["step"]) == 0.0
    np.testing.assert_array_equal(_np(sd["state"][0]["sum"]), [0.25, 0.25])


def test_deepcopy_and_pickle_optimizer():
    ps = [E.asarray(a, requires_grad=True) for a in _inits(np.float32)]
    opt = eo.Adam(ps, lr=0.01)
    for p in ps:
        p.grad = E.ones(p.shape)
    opt.step()
    for clone in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        cps = clone.param_groups[0]["params"]
        for p in cps:
            p.grad = E.ones(p.shape)
        clone.step()
        opt2 = copy.deepcopy(opt)
        for p in opt2.param_groups[0]["params"]:
            p.grad = E.ones(p.shape)
        opt2.step()
        for x, y in zip(cps, opt2.param_groups[0]["params"]):
            np.testing.assert_array_equal(_np(x), _np(y))
        assert float(clone.state[cps[0]]["step"]) == 2.0


# ---------------------------------------------------------------- behaviour
def test_closure_runs_with_grad_enabled_and_returns_loss():
    w = E.asarray([1.0, 2.0], requires_grad=True)
    opt = eo.SGD([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    with E.no_grad():
        loss = opt.step(closure)
    assert float(loss) == 5.0
    np.testing.assert_allclose(_np(w), [0.8, 1.6], rtol=1e-6)


def test_zero_grad():
    w = E.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    opt = eo.Adam([w])
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(_np(w.grad), [0, 0, 0])
    opt.zero_grad()
    assert w.grad is None
    opt.step()   # nothing to do: no state created
    assert len(opt.state) == 0


def test_non_contiguous_params_and_grads():
    base = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    pf = E.asarray(np.asfortranarray(base)).requires_grad_(True)
    pc = E.asarray(base.copy(), requires_grad=True)
    assert not pf.is_contiguous()
    of, oc = eo.Adam([pf], lr=0.1, amsgrad=True), eo.Adam([pc], lr=0.1, amsgrad=True)
    for k in range(3):
        g = np.sin(base * (k + 1)).astype(np.float32)
        pf.grad = E.asarray(np.asfortranarray(g))
        pc.grad = E.asarray(g)
        v0 = pf._version
        of.step()
        oc.step()
        assert pf._version > v0
    np.testing.assert_array_equal(_np(pf), _np(pc))


def test_step_bumps_version_and_keeps_identity():
    w = E.ones(4, requires_grad=True)
    w.grad = E.ones(4)
    opt = eo.SGD([w], lr=0.1, momentum=0.9)
    v0, buf_id = w._version, None
    opt.step()
    buf_id = id(opt.state[w]["momentum_buffer"])
    opt.step()
    assert w._version >= v0 + 2
    assert id(opt.state[w]["momentum_buffer"]) == buf_id


def test_param_state_mapping():
    a, b = E.zeros(2, requires_grad=True), E.zeros(2, requires_grad=True)
    opt = eo.Adam([a, b])
    assert a not in opt.state and opt.state.get(a) is None and len(opt.state) == 0
    a.grad = E.ones(2)
    opt.step()
    assert a in opt.state and b not in opt.state and len(opt.state) == 1
    assert [k is a for k in opt.state] == [True]
    assert float(opt.state[a]["step"]) == 1.0


def test_add_param_group_later():
    a, b = E.zeros(2, requires_grad=True), E.zeros(3, requires_grad=True)
    ta, tb = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    eopt, topt = eo.Adam([a], lr=0.1), torch.optim.Adam([ta], lr=0.1)
    for k in range(6):
        if k == 3:
            eopt.add_param_group({"params": b, "lr": 0.05})
            topt.add_param_group({"params": tb, "lr": 0.05})
        for p, q in ((a, ta), (b, tb)):
            g = np.linspace(-1, 1, p.size).astype(np.float32) * (k + 1)
            p.grad, q.grad = E.asarray(g), torch.tensor(g)
        eopt.step()
        topt.step()
    for p, q in ((a, ta), (b, tb)):
        np.testing.assert_allclose(_np(p), _np(q), rtol=1e-5, atol=1e-7)


def test_named_parameters_and_repr():
    a, b = E.zeros(2, requires_grad=True), E.zeros(3, requires_grad=True)
    opt = eo.SGD([("a", a), ("b", b)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["a", "b"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["a", "b"]
    assert "Parameter Group 0" in repr(opt) and "lr: 0.1" in repr(opt)


def test_step_hooks():
    w = E.zeros(2, requires_grad=True)
    w.grad = E.ones(2)
    opt = eo.SGD([w], lr=0.1)
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    h2 = opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    opt.step()
    assert calls == ["pre", "post"]
    h1.remove()
    h2.remove()
    opt.step()
    assert calls == ["pre", "post"]
    from ember.optim.optimizer import register_optimizer_step_post_hook
    h = register_optimizer_step_post_hook(lambda o, a, k: calls.append("global"))
    try:
        opt.step()
    finally:
        h.remove()
    assert calls[-1] == "global"
    seen = []
    opt.register_state_dict_pre_hook(lambda o: seen.append("sd"))
    opt.register_load_state_dict_post_hook(lambda o: seen.append("load"))
    opt.load_state_dict(opt.state_dict())
    assert seen == ["sd", "load"]


def test_parameter_class_is_accepted():
    nn = pytest.importorskip("ember.nn")
    p = nn.Parameter(E.ones(3))
    p.grad = E.ones(3)
    opt = eo.Adam([p], lr=0.5)
    opt.step()
    np.testing.assert_allclose(_np(p), [0.5] * 3, rtol=1e-6)


# -------------------------------------------------------------------- errors
@pytest.mark.parametrize("make,match", [
    (lambda ps: eo.SGD(ps, lr=-1), "Invalid learning rate: -1"),
    (lambda ps: eo.SGD(ps, lr=0.1, momentum=-0.5), "Invalid momentum value"),
    (lambda ps: eo.SGD(ps, lr=0.1, weight_decay=-1), "Invalid weight_decay value"),
    (lambda ps: eo.SGD(ps, lr=0.1, nesterov=True), "Nesterov momentum requires"),
    (lambda ps: eo.Adam(ps, lr=-1), "Invalid learning rate: -1"),
    (lambda ps: eo.Adam(ps, eps=-1), "Invalid epsilon value"),
    (lambda ps: eo.Adam(ps, betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
    (lambda ps: eo.Adam(ps, betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
    (lambda ps: eo.AdamW(ps, weight_decay=-1), "Invalid weight_decay value"),
    (lambda ps: eo.RMSprop(ps, alpha=-1), "Invalid alpha value"),
    (lambda ps: eo.RMSprop(ps, momentum=-1), "Invalid momentum value"),
    (lambda ps: eo.Adagrad(ps, lr_decay=-1), "Invalid lr_decay value"),
    (lambda ps: eo.Adagrad(ps, initial_accumulator_value=-1), "Invalid initial_accumulator"),
])
def test_invalid_hyperparameters(make, match):
    with pytest.raises(ValueError, match=match):
        make([E.zeros(2, requires_grad=True)])


def test_construction_errors():
    a = E.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        eo.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of arrays or dicts"):
        eo.SGD(a, lr=0.1)
    with pytest.raises(TypeError, match="can only optimize ember arrays"):
        eo.SGD([a, 3.0], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        eo.SGD([a * 2], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        eo.SGD([{"params": {1, 2}}], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        eo.SGD([{"params": [a]}, {"params": [a]}], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        eo.SGD([a, a], lr=0.1)
    with pytest.raises(NotImplementedError, match="differentiable"):
        eo.Adam([a], differentiable=True)


def test_step_errors():
    a = E.zeros((2, 3), requires_grad=True)
    opt = eo.Adam([a])
    a.grad = E.zeros((2, 3), dtype=E.float64)
    with pytest.raises(TypeError, match=r"Adam: parameter 0 has dtype float32 but its \.grad "
                                        r"has dtype float64"):
        opt.step()
    with pytest.raises(ValueError, match=r"parameter 0 has shape \(2, 3\) but its \.grad has "
                                         r"shape \(3, 2\)"):
        a.grad = E.zeros((3, 2))
        opt.step()
    h = E.zeros(2, dtype=E.int32)
    h.grad = E.zeros(2, dtype=E.int32)
    with pytest.raises(TypeError, match="SGD: parameter 0 has dtype int32; only floating "
                                        r"parameters \(float16, bfloat16, float32, float64\)"):
        eo.SGD([h], lr=0.1).step()
    b = E.zeros(3, requires_grad=True)
    opt = eo.SGD([b], lr=0.1, momentum=0.9)
    b.grad = E.ones(3)
    opt.step()
    opt.state[b]["momentum_buffer"] = E.zeros(4)
    with pytest.raises(ValueError, match="momentum_buffer.*C-contiguous float32 array of 3"):
        opt.step()


def test_duplicate_parameter_updated_twice_like_torch(exact_sqrt, threaded):
    a = np.linspace(-1, 1, 70000).astype(np.float32)
    for name, kw in (("SGD", dict(lr=0.1)), ("Adam", dict(lr=0.1, amsgrad=True))):
        pe = E.asarray(a.copy(), requires_grad=True)
        pt = torch.tensor(a.copy(), requires_grad=True)
        with pytest.warns(UserWarning, match="duplicate"):
            eopt = getattr(eo, name)([pe, pe], **kw)
        with pytest.warns(UserWarning, match="duplicate"):
            topt = getattr(torch.optim, name)([pt, pt], **kw)
        for k in range(3):
            pe.grad = E.asarray(a * (k + 1))
            pt.grad = torch.tensor(a * (k + 1))
            eopt.step()
            topt.step()
        np.testing.assert_array_equal(_np(pe), _np(pt))


@pytest.mark.parametrize("name", ["Adam", "RMSprop", "Adagrad", "SGD"])
def test_failed_step_changes_nothing(name):
    """A bad gradient anywhere in the group: no parameter moves, no step is counted."""
    a, b = E.ones(3, requires_grad=True), E.ones(2, requires_grad=True)
    opt = getattr(eo, name)([a, b], lr=0.1)
    a.grad, b.grad = E.ones(3), E.ones(2, dtype=E.float64)
    with pytest.raises(TypeError, match="parameter 1 has dtype float32 but its .grad"):
        opt.step()
    np.testing.assert_array_equal(_np(a), [1, 1, 1])
    if "step" in opt.state.get(a, {}):
        assert float(opt.state[a]["step"]) == 0.0
    b.grad = E.ones(2)
    opt.step()
    assert _np(a)[0] < 1
    if "step" in opt.state.get(a, {}):
        assert float(opt.state[a]["step"]) == 1.0


def test_subclass_step_calling_super_runs_hooks_once():
    class MyAdam(eo.Adam):
        def step(self, closure=None):
            return super().step(closure)

    w = E.zeros(2, requires_grad=True)
    w.grad = E.ones(2)
    opt = MyAdam([w], lr=0.1)
    calls = []
    opt.register_step_post_hook(lambda o, a, k: calls.append(1))
    opt.step()
    assert calls == [1]
    np.testing.assert_allclose(_np(w), [-0.1, -0.1], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("make", [
    lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda o, p: o.Adam(p, lr=0.05, amsgrad=True),
    lambda o, p: o.AdamW(p, lr=0.05, weight_decay=0.1),
    lambda o, p: o.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    lambda o, p: o.Adagrad(p, lr=0.1),
], ids=["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_16bit_parameters_update_in_float32(dtype, make):
    """A 16-bit parameter is updated in float32 (float32 state) and rounded once per step:
    the oracle is torch's float32 optimizer on a float32 copy re-rounded after every step."""
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, dtype)
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    grads = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(4)]
    _check_16bit_update(torch, tdt, dtype, make, w0, grads)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("make", [
    lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda o, p: o.Adam(p, lr=0.05, amsgrad=True),
    lambda o, p: o.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    lambda o, p: o.Adagrad(p, lr=0.1),
], ids=["sgd", "adam", "rmsprop", "adagrad"])
def test_16bit_update_in_blocks_matches_widened_copy(dtype, make):
    """Contiguous 16-bit parameters are updated in place a 1024-element block at a time
    (several blocks and, with the threshold lowered, several thread chunks here); a
    non-contiguous one goes through a whole float32 copy.  Both give the same bits."""
    from ember._kernels.cpu import optim as _ko
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((3, 12001)).astype(np.float32)
    grads = [rng.standard_normal((3, 12001)).astype(np.float32) for _ in range(3)]
    dt = getattr(E, dtype)
    p = E.asarray(w0).astype(dt)
    big = E.zeros((3, 24002), dtype=dt)
    big[:, ::2] = E.asarray(w0).astype(dt)
    q = big[:, ::2]
    assert p.is_contiguous() and not q.is_contiguous()
    o1, o2 = make(eo, [p]), make(eo, [q])
    old = _ko._set_parallel_threshold(1)
    try:
        for g in grads:
            p.grad = E.asarray(g).astype(dt)
            q.grad = E.asarray(g).astype(dt)[:, :]
            o1.step()
            o2.step()
            np.testing.assert_array_equal(np.asarray(p.astype(E.float32)),
                                          np.asarray(q.astype(E.float32)))
    finally:
        _ko._set_parallel_threshold(old)


def _check_16bit_update(torch, tdt, dtype, make, w0, grads):
    p = E.asarray(w0).astype(getattr(E, dtype))
    p.requires_grad_(True)
    opt = make(eo, [p])
    tp16 = torch.tensor(w0).to(tdt)
    tp32 = torch.nn.Parameter(tp16.float())
    topt = make(torch.optim, [tp32])
    for g in grads:
        p.grad = E.asarray(g).astype(getattr(E, dtype))
        opt.step()
        with torch.no_grad():
            tp32.copy_(tp16.float())
        tp32.grad = torch.tensor(g).to(tdt).float()
        topt.step()
        tp16 = tp32.detach().to(tdt)
        assert p.dtype == getattr(E, dtype)
        np.testing.assert_array_equal(np.asarray(p.astype(E.float32)), tp16.float().numpy())
    state = next(iter(opt.state.values()))
    assert all(v.dtype == np.float32 for k, v in state.items() if k != "step")
