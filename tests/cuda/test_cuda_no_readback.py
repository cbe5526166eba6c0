"""No device-to-host read-back inside a GPU training step (issue #21, "the host never
makes the GPU wait"), checked on the emulation.

tests/cuda_emu/counting.py hooks the emulated CuPy: every ``.get()``, ``asnumpy``,
``item()``, ``tolist()``, ``bool()``/``float()``/``int()`` of a device array and every
device, stream or event ``synchronize()`` is recorded with the ember call sites that led
to it.  A training step (zero_grad, forward, loss, backward, gradient clipping,
optimizer step; with autocast float16 and a GradScaler) must record none: the user
reads the loss when they ask for it (``loss.item()``), nothing else does.

Only under ``EMBER_CUDA_EMULATION=1`` (on a real GPU CuPy cannot be hooked this way).
"""
import os

import numpy as np
import pytest

import ember
from ember import nn
import ember.amp  # noqa: F401
import ember.nn.functional as F

from cuda_helpers import GPU_MARK

pytestmark = GPU_MARK + [pytest.mark.skipif(
    os.environ.get("EMBER_CUDA_EMULATION") != "1",
    reason="counts read-backs through the emulation's hooks (EMBER_CUDA_EMULATION=1)")]

VOCAB, D, SEQ, BATCH = 11, 8, 5, 3


@pytest.fixture(scope="module")
def counting():
    from cuda_emu import counting
    counting.install(null=False)
    return counting


class TinyLM(nn.Module):
    """Embedding, a linear layer, LayerNorm, GELU, a head: the op kinds of a GPT step."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.fc = nn.Linear(D, 2 * D)
        self.ln = nn.LayerNorm(2 * D)
        self.head = nn.Linear(2 * D, VOCAB)

    def forward(self, idx):
        return self.head(F.gelu(self.ln(self.fc(self.tok(idx)))))


class DeviceSkippingSGD(ember.optim.Optimizer):
    """Plain SGD that takes PyTorch's GradScaler protocol for fused optimizers
    (``_step_supports_amp_scaling``): it skips its update on the device when
    ``self.found_inf`` (set by GradScaler.step) is nonzero, so nothing is read back."""

    _step_supports_amp_scaling = True

    def __init__(self, params, lr):
        super().__init__(params, {"lr": lr})

    def step(self, closure=None):
        found = getattr(self, "found_inf", None)
        with ember.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    upd = p.grad * group["lr"]
                    if found is not None:
                        upd = ember.where(found > 0, ember.zeros_like(upd), upd)
                    p -= upd


def _data():
    rng = np.random.default_rng(0)
    idx = ember.asarray(rng.integers(0, VOCAB, (BATCH, SEQ))).to("cuda")
    target = ember.asarray(rng.integers(0, VOCAB, BATCH * SEQ)).to("cuda")
    return idx, target


def _make_step(optimizer, amp, clip=True):
    ember.random.seed(0)
    model = TinyLM().to("cuda")
    opt = optimizer(model.parameters())
    idx, target = _data()
    scaler = ember.amp.GradScaler("cuda") if amp else None

    def step():
        opt.zero_grad()
        if amp:
            with ember.amp.autocast("cuda", dtype=ember.float16):
                loss = F.cross_entropy(model(idx).reshape(-1, VOCAB), target)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss = F.cross_entropy(model(idx).reshape(-1, VOCAB), target)
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        return loss
    return step, model, scaler


def _readbacks_of_steady_step(counting, step):
    step()                      # the first step creates the optimizer state
    with counting.counting() as c:
        step()
    return c


def _sites(c):
    return "\n".join(counting_lines(c))


def counting_lines(c):
    from cuda_emu import counting
    return counting.format_readbacks(c)


def test_the_hooks_see_a_requested_read(counting):
    step, _, _ = _make_step(lambda ps: ember.optim.SGD(ps, lr=0.1), amp=False)
    with counting.counting() as c:
        loss = step()
        value = loss.item()
    assert np.isfinite(value)
    # the value, then the pending input checks (embedding, cross-entropy targets): a wait
    # for the stream and one read of their flags, all inside item()
    assert [what for what, _ in c.readbacks] == ["cupy.asnumpy", "Stream.synchronize",
                                                 "cupy.asnumpy"], _sites(c)
    assert all(any("in to_numpy" in s for s in sites) for _, sites in c.readbacks), _sites(c)
    assert c.launches > 0 and c.gemms > 0


@pytest.mark.parametrize("name, optimizer", [
    ("SGD momentum", lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-4)),
    ("Adam", lambda ps: ember.optim.Adam(ps, lr=1e-3)),
    ("AdamW", lambda ps: ember.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)),
])
def test_float32_step_with_clipping_reads_nothing_back(counting, name, optimizer):
    step, _, _ = _make_step(optimizer, amp=False)
    c = _readbacks_of_steady_step(counting, step)
    assert not c.readbacks, f"{name}: read-backs in a training step:\n{_sites(c)}"


def test_amp_step_reads_nothing_back_with_an_amp_aware_optimizer(counting):
    step, _, scaler = _make_step(lambda ps: DeviceSkippingSGD(ps, lr=0.1), amp=True)
    c = _readbacks_of_steady_step(counting, step)
    assert not c.readbacks, f"read-backs in an autocast step:\n{_sites(c)}"
    assert scaler.get_scale() == 2.0 ** 16      # read when asked (outside the step)


class HostSkippingAdam(ember.optim.Adam):
    """An Adam subclass that replaces step(): it could ignore GradScaler's flag, so it
    does not take the protocol (``_step_supports_amp_scaling`` is False for it)."""

    def step(self, closure=None):
        return super().step(closure)


def test_amp_step_of_a_plain_optimizer_reads_back_only_in_grad_scaler_step(counting):
    """An optimizer without the protocol: GradScaler.step reads the inf flag once a step,
    as PyTorch's GradScaler does with a non-fused optimizer.  No other read-back."""
    step, _, _ = _make_step(lambda ps: HostSkippingAdam(ps, lr=1e-3), amp=True)
    c = _readbacks_of_steady_step(counting, step)
    assert c.readbacks, "the inf flag must be read: the optimizer cannot skip on the device"
    for _, sites in c.readbacks:      # the flag, then the pending checks' flags (item())
        assert any("ember/amp/grad_scaler.py" in s and "in step" in s for s in sites), \
            _sites(c)


@pytest.mark.parametrize("name, optimizer", [
    ("SGD momentum", lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-4)),
    ("Adam", lambda ps: ember.optim.Adam(ps, lr=1e-3)),
    ("AdamW amsgrad", lambda ps: ember.optim.AdamW(ps, lr=1e-3, weight_decay=0.01,
                                                   amsgrad=True)),
])
def test_amp_step_reads_nothing_back(counting, name, optimizer):
    """A full autocast + GradScaler step (scale, backward, unscale_, clipping, step,
    update) with ember's SGD/Adam/AdamW: their fused kernels take the found-inf flag
    and skip on the device, Adam's step count lives there, so nothing is read back."""
    step, model, scaler = _make_step(optimizer, amp=True)
    assert scaler.is_enabled()
    before = [p.detach().cpu().numpy().copy() for p in model.parameters()]
    c = _readbacks_of_steady_step(counting, step)
    assert not c.readbacks, f"{name}: read-backs in an autocast step:\n{_sites(c)}"
    assert c.launches > 0
    after = [p.detach().cpu().numpy() for p in model.parameters()]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))   # it stepped
    assert scaler.get_scale() == 2.0 ** 16      # read when asked (outside the step)


def test_device_side_scale_update_follows_pytorch(counting):
    """GradScaler.update on the device (no read-back) against PyTorch's GradScaler on
    the CPU, through skipped steps (inf gradients), growth and backoff."""
    torch = pytest.importorskip("torch")
    infs = [False, True, False, False, False, True, False, False, False]
    kw = dict(init_scale=8.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=2)
    w = nn.Parameter(ember.ones(3, device="cuda"))
    opt = DeviceSkippingSGD([w], lr=0.5)
    scaler = ember.amp.GradScaler("cuda", **kw)
    tw = torch.nn.Parameter(torch.ones(3))
    topt = torch.optim.SGD([tw], lr=0.5)
    tscaler = torch.amp.GradScaler("cpu", **kw)
    for i, inf in enumerate(infs):
        bad = float("inf") if inf else 1.0
        loss = (w * ember.asarray([1.0, 2.0, bad], device="cuda")).sum()
        tloss = (tw * torch.tensor([1.0, 2.0, bad])).sum()
        opt.zero_grad()
        topt.zero_grad()
        with counting.counting() as c:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        assert not c.readbacks, f"step {i}:\n{_sites(c)}"
        tscaler.scale(tloss).backward()
        tscaler.step(topt)
        tscaler.update()
        assert scaler.get_scale() == tscaler.get_scale(), f"step {i}"
        assert scaler.state_dict()["_growth_tracker"] == tscaler._get_growth_tracker(), \
            f"step {i}"
        np.testing.assert_allclose(w.cpu().numpy(), tw.detach().numpy(), rtol=1e-6,
                                   err_msg=f"step {i}")


def test_device_update_then_a_plain_optimizer_keeps_the_tracker(counting):
    """Switching from the device-side update to an ordinary optimizer (host-side update)
    carries the growth tracker over, as one scaler does in PyTorch."""
    torch = pytest.importorskip("torch")
    kw = dict(init_scale=4.0, growth_interval=3)
    w = nn.Parameter(ember.ones(2, device="cuda"))
    tw = torch.nn.Parameter(torch.ones(2))
    scaler, tscaler = ember.amp.GradScaler("cuda", **kw), torch.amp.GradScaler("cpu", **kw)
    for i, (opt, topt) in enumerate([(DeviceSkippingSGD([w], lr=0.1), None)] * 2 +
                                    [(ember.optim.SGD([w], lr=0.1), None)] * 2):
        topt = torch.optim.SGD([tw], lr=0.1)
        opt.zero_grad()
        topt.zero_grad()
        scaler.scale((w * 3.0).sum()).backward()
        tscaler.scale((tw * 3.0).sum()).backward()
        scaler.step(opt)
        tscaler.step(topt)
        scaler.update()
        tscaler.update()
        assert scaler.get_scale() == tscaler.get_scale(), f"step {i}"
        assert scaler.state_dict() == tscaler.state_dict(), f"step {i}"


def test_bench_gpu_launch_count_agrees_with_the_emulation(counting):
    """benchmarks/bench_gpu.py's per-step launch count (wrapping ember's launcher and GEMM
    call, plus the fast path's counter) against the emulation's hooks, and its per-step
    host/GPU times (CUDA events: host timers on the emulation) are filled in."""
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "benchmarks")
    if bench not in sys.path:
        sys.path.append(bench)
    bench_gpu = pytest.importorskip("bench_gpu")
    step, _, _ = _make_step(lambda ps: ember.optim.Adam(ps, lr=1e-3), amp=True)
    step()
    with counting.counting() as c, bench_gpu._EmberLaunches() as counted:
        step()
    assert counted.n == sum(c.kernels.values()) + c.gemms > 0
    costs = bench_gpu.step_costs("ember", step, ember.cuda.synchronize, repeat=1)
    assert costs["launches"] == counted.n
    assert costs["host_ms"] > 0 and costs["gpu_ms"] >= 0
