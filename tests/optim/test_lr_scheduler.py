"""ember.optim.lr_scheduler against torch.optim.lr_scheduler: the same lr sequences."""
import math
import pickle
import warnings

import numpy as np
import pytest

import ember as E
import ember.optim as eo
from ember.optim import lr_scheduler as EL

torch = pytest.importorskip("torch")
TL = torch.optim.lr_scheduler


def _opts(opt="SGD", lrs=(0.1,), **kw):
    """Twin optimizers (ember, torch) with one group per lr."""
    ep = [{"params": [E.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    tp = [{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    return getattr(eo, opt)(ep, **kw), getattr(torch.optim, opt)(tp, **kw)


def _groups_state(opt, keys=("lr", "momentum", "betas")):
    return [{k: g[k] for k in keys if k in g} for g in opt.param_groups]


def _compare(make_e, make_t, n=60, opt="SGD", lrs=(0.1, 0.03), metrics=None, **okw):
    """Step both for n epochs; lrs (and momentum/betas) must agree exactly."""
    eopt, topt = _opts(opt, lrs, **okw)
    es, ts = make_e(eopt), make_t(topt)
    assert es.get_last_lr() == ts.get_last_lr()
    seq = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(n):
            eopt.step()
            topt.step()
            if metrics is None:
                es.step()
                ts.step()
            else:
                es.step(metrics[k])
                ts.step(metrics[k])
            assert es.get_last_lr() == ts.get_last_lr(), k
            assert _groups_state(eopt) == _groups_state(topt), k
            seq.append(es.get_last_lr())
    return seq, es, eopt


# (name, ember factory, torch factory, optimizer, optimizer kwargs)
def _pair(cls, *a, **kw):
    return (lambda o: getattr(EL, cls)(o, *a, **kw)), (lambda o: getattr(TL, cls)(o, *a, **kw))


CASES = {
    "StepLR": _pair("StepLR", step_size=7, gamma=0.5),
    "MultiStepLR": _pair("MultiStepLR", milestones=[5, 12, 12, 30], gamma=0.3),
    "ExponentialLR": _pair("ExponentialLR", gamma=0.93),
    "CosineAnnealingLR": _pair("CosineAnnealingLR", T_max=17, eta_min=0.001),
    "CosineAnnealingLR-short": _pair("CosineAnnealingLR", T_max=4),
    "LambdaLR": _pair("LambdaLR", lr_lambda=lambda e: 1.0 / (1 + e)),
    "LambdaLR-per-group": _pair("LambdaLR", lr_lambda=[lambda e: 0.9 ** e, lambda e: e % 3]),
    "MultiplicativeLR": _pair("MultiplicativeLR", lr_lambda=lambda e: 0.95),
    "LinearLR": _pair("LinearLR", start_factor=0.25, end_factor=0.9, total_iters=11),
    "ConstantLR": _pair("ConstantLR", factor=0.4, total_iters=6),
    "PolynomialLR": _pair("PolynomialLR", total_iters=20, power=2.0),
    "CosineAnnealingWarmRestarts": _pair("CosineAnnealingWarmRestarts", T_0=5, T_mult=2,
                                         eta_min=0.001),
    "CyclicLR-triangular2": _pair("CyclicLR", base_lr=0.01, max_lr=0.1, step_size_up=4,
                                  step_size_down=6, mode="triangular2"),
    "CyclicLR-exp_range": _pair("CyclicLR", base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=5,
                                mode="exp_range", gamma=0.97),
    "OneCycleLR-cos": _pair("OneCycleLR", max_lr=[0.5, 0.2], total_steps=60),
    "OneCycleLR-linear-3phase": _pair("OneCycleLR", max_lr=0.5, epochs=6, steps_per_epoch=10,
                                      anneal_strategy="linear", three_phase=True,
                                      div_factor=10.0, final_div_factor=100.0,
                                      pct_start=0.25),
    "OneCycleLR-no-momentum": _pair("OneCycleLR", max_lr=0.5, total_steps=60,
                                    cycle_momentum=False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_schedule_matches_torch_sgd(case):
    me, mt = CASES[case]
    _compare(me, mt, opt="SGD", momentum=0.9)


@pytest.mark.parametrize("case", ["CyclicLR-triangular2", "OneCycleLR-cos",
                                  "OneCycleLR-linear-3phase", "CosineAnnealingLR"])
def test_schedule_matches_torch_adam_betas(case):
    """cycle_momentum drives Adam's beta1."""
    me, mt = CASES[case]
    _compare(me, mt, opt="Adam")


def test_onecycle_past_total_steps_raises():
    eopt, _ = _opts()
    s = EL.OneCycleLR(eopt, max_lr=1.0, total_steps=3)
    for _ in range(3):
        eopt.step()
        s.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        eopt.step()
        s.step()


@pytest.mark.parametrize("mode,threshold_mode,cooldown,min_lr", [
    ("min", "rel", 0, 0), ("min", "abs", 2, 0.004), ("max", "rel", 1, [0.01, 0.001]),
    ("max", "abs", 0, 0)])
def test_reduce_lr_on_plateau(mode, threshold_mode, cooldown, min_lr):
    rng = np.random.default_rng(0)
    metrics = list(np.round(np.cumsum(rng.standard_normal(80)) * 0.1, 3) + 5)
    kw = dict(mode=mode, factor=0.5, patience=3, threshold=0.01,
              threshold_mode=threshold_mode, cooldown=cooldown, min_lr=min_lr)
    seq, _, _ = _compare(lambda o: EL.ReduceLROnPlateau(o, **kw),
                         lambda o: TL.ReduceLROnPlateau(o, **kw), n=80, metrics=metrics)
    assert len({tuple(s) for s in seq}) > 1     # it did reduce


def test_reduce_lr_on_plateau_accepts_arrays_and_errors():
    eopt, _ = _opts()
    s = EL.ReduceLROnPlateau(eopt, patience=0)
    s.step(E.asarray(1.0))
    s.step(E.asarray(2.0))
    assert s.get_last_lr() == [0.1 * 0.1]
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        EL.ReduceLROnPlateau(eopt, factor=1.5)
    with pytest.raises(ValueError, match="mode avg is unknown"):
        EL.ReduceLROnPlateau(eopt, mode="avg")
    with pytest.raises(ValueError, match="expected 1 min_lrs, got 2"):
        EL.ReduceLROnPlateau(eopt, min_lr=[0.1, 0.2])


def test_chained_schedulers_on_one_optimizer():
    """Two schedulers acting on the same optimizer (the recursive forms compose)."""
    eopt, topt = _opts(lrs=(0.1, 0.05))
    es = [EL.CosineAnnealingLR(eopt, T_max=10), EL.MultiStepLR(eopt, [4, 9], gamma=0.5)]
    ts = [TL.CosineAnnealingLR(topt, T_max=10), TL.MultiStepLR(topt, [4, 9], gamma=0.5)]
    for _ in range(30):
        eopt.step()
        topt.step()
        for a, b in zip(es, ts):
            a.step()
            b.step()
        assert [g["lr"] for g in eopt.param_groups] == [g["lr"] for g in topt.param_groups]
        assert es[1].get_last_lr() == ts[1].get_last_lr()


def test_chained_scheduler_class():
    eopt, topt = _opts()
    es = EL.ChainedScheduler([EL.ConstantLR(eopt, factor=0.5, total_iters=3),
                              EL.ExponentialLR(eopt, gamma=0.9)])
    ts = TL.ChainedScheduler([TL.ConstantLR(topt, factor=0.5, total_iters=3),
                              TL.ExponentialLR(topt, gamma=0.9)])
    for _ in range(12):
        eopt.step()
        topt.step()
        es.step()
        ts.step()
        assert es.get_last_lr() == ts.get_last_lr()


@pytest.mark.parametrize("milestones", [[5], [4, 15]])
def test_sequential_lr(milestones):
    def make(L, o):
        scheds = [L.LinearLR(o, start_factor=0.1, total_iters=5),
                  L.CosineAnnealingLR(o, T_max=20, eta_min=0.001)]
        if len(milestones) == 2:
            scheds.append(L.ExponentialLR(o, gamma=0.9))
        return L.SequentialLR(o, scheds, milestones=milestones)
    _compare(lambda o: make(EL, o), lambda o: make(TL, o), n=40)


def test_sequential_lr_errors():
    eopt, _ = _opts()
    other, _ = _opts()
    a = EL.ExponentialLR(eopt, 0.9)
    with pytest.raises(ValueError, match="expects at least one scheduler"):
        EL.SequentialLR(eopt, [], milestones=[])
    with pytest.raises(ValueError, match="number of milestones"):
        EL.SequentialLR(eopt, [a], milestones=[3])
    with pytest.raises(ValueError, match="same optimizer"):
        EL.SequentialLR(eopt, [a, EL.ExponentialLR(other, 0.9)], milestones=[3])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        EL.SequentialLR(eopt, [a, EL.ReduceLROnPlateau(eopt)], milestones=[3])


@pytest.mark.parametrize("case", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                  "LinearLR", "PolynomialLR", "ConstantLR"])
def test_closed_form_with_epoch(case):
    me, mt = CASES[case]
    eopt, topt = _opts(lrs=(0.1, 0.02))
    es, ts = me(eopt), mt(topt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in [3, 7, 1, 12, 25]:
            es.step(epoch)
            ts.step(epoch)
            assert es.get_last_lr() == ts.get_last_lr()


@pytest.mark.parametrize("case", ["StepLR", "CosineAnnealingLR", "OneCycleLR-cos",
                                  "CyclicLR-triangular2", "CosineAnnealingWarmRestarts",
                                  "LambdaLR", "LinearLR"])
def test_state_dict_round_trip(case):
    """Save after 20 steps, restore into fresh optimizer + scheduler, continue:
    the same lrs as an uninterrupted run."""
    me, _ = CASES[case]
    ref, _, _ = _compare(*CASES[case], n=50)

    eopt, _ = _opts(lrs=(0.1, 0.03), momentum=0.9)
    s = me(eopt)
    for _ in range(20):
        eopt.step()
        s.step()
    osd = pickle.loads(pickle.dumps(eopt.state_dict()))
    ssd = pickle.loads(pickle.dumps(s.state_dict()))
    assert "optimizer" not in ssd

    eopt2, _ = _opts(lrs=(0.1, 0.03), momentum=0.9)
    s2 = me(eopt2)
    eopt2.load_state_dict(osd)
    s2.load_state_dict(ssd)
    for k in range(20, 50):
        eopt2.step()
        s2.step()
        assert s2.get_last_lr() == ref[k], k


def test_sequential_state_dict_round_trip():
    def make(o):
        return EL.SequentialLR(o, [EL.LinearLR(o, start_factor=0.1, total_iters=5),
                                   EL.ExponentialLR(o, gamma=0.9)], milestones=[5])
    eopt, _ = _opts()
    s = make(eopt)
    ref = []
    for _ in range(20):
        eopt.step()
        s.step()
        ref.append(s.get_last_lr())
    eopt, _ = _opts()
    s = make(eopt)
    for _ in range(8):
        eopt.step()
        s.step()
    osd, ssd = eopt.state_dict(), s.state_dict()
    eopt2, _ = _opts()
    s2 = make(eopt2)
    eopt2.load_state_dict(osd)
    s2.load_state_dict(ssd)
    for k in range(8, 20):
        eopt2.step()
        s2.step()
        assert s2.get_last_lr() == ref[k]


def test_initial_lr_and_resume():
    eopt, _ = _opts(lrs=(0.1,))
    EL.StepLR(eopt, 3)
    assert eopt.param_groups[0]["initial_lr"] == 0.1
    fresh, _ = _opts()
    with pytest.raises(KeyError, match="initial_lr"):
        EL.StepLR(fresh, 3, last_epoch=5)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        EL.StepLR(object(), 3)


def test_step_order_warning():
    eopt, _ = _opts()
    s = EL.StepLR(eopt, 3)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    eopt2, _ = _opts()
    s2 = EL.StepLR(eopt2, 3)
    eopt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()


def test_scheduler_drives_optimizer_updates():
    """The lr a scheduler writes is the one the next optimizer step uses."""
    w = E.zeros(1, requires_grad=True)
    tw = torch.zeros(1, requires_grad=True)
    eopt, topt = eo.Adam([w], lr=0.1), torch.optim.Adam([tw], lr=0.1)
    es, ts = EL.OneCycleLR(eopt, max_lr=0.3, total_steps=25), TL.OneCycleLR(topt, max_lr=0.3,
                                                                              total_steps=25)
    for k in range(25):
        g = np.array([math.sin(k)], dtype=np.float32)
        w.grad, tw.grad = E.asarray(g), torch.tensor(g)
        eopt.step()
        topt.step()
        es.step()
        ts.step()
    np.testing.assert_allclose(np.asarray(w.detach()), tw.detach().numpy(), rtol=1e-5)
