"""SGD/Adam/AdamW under GradScaler on a GPU (or the emulation, where the fused kernels
run as host builds of optim.cu): the kernels take the found-inf flag and skip the
whole update on the device, Adam's step count lives on the device, and the results
are PyTorch's (CPU) and ember's CPU ones, skipped steps, backoff and growth included.
The CPU side: tests/optim/test_optim_amp_step.py."""
import numpy as np
import pytest

import ember
import ember.amp  # noqa: F401

import amp_step_oracle as oracle
from cuda_helpers import GPU_MARK

pytestmark = GPU_MARK


# every case with skipped steps after the first; a skipped first step (no state left
# behind: the flag is read once) for one SGD with momentum, one Adam and one AdamW
_RUNS = [(n, kw, "later") for n, kw in oracle.CASES] + \
    [(n, kw, "first") for n, kw in (oracle.CASES[2], oracle.CASES[3], oracle.CASES[6])]


@pytest.mark.parametrize("name, kw, pattern", _RUNS,
                         ids=[f"{n}-{p}-{i}" for i, (n, _, p) in enumerate(_RUNS)])
def test_grad_scaler_steps_follow_pytorch_and_the_cpu(name, kw, pattern):
    steps = oracle.PATTERNS[pattern]
    mine, opt = oracle.run_ember(name, kw, steps, "cuda")
    oracle.compare(mine, oracle.run_torch(name, kw, steps))
    cpu, _ = oracle.run_ember(name, kw, steps, "cpu")
    oracle.compare(mine, cpu)
    for p in opt.param_groups[0]["params"]:
        if "step" in opt.state.get(p, {}):
            step = opt.state[p]["step"]         # on the device, float32 (PyTorch's fused)
            assert step.is_cuda and step.device == p.device and step.dtype == np.float32


# the kernels' grad_scale / found_inf code is shared by every option: three cases
@pytest.mark.parametrize("name, kw", [oracle.CASES[i] for i in (2, 4, 5)],
                         ids=[oracle.CASE_IDS[i] for i in (2, 4, 5)])
def test_grad_scale_and_found_inf_set_by_hand(name, kw):
    oracle.check_grad_scale_and_found_inf(name, kw, "cuda")


def test_a_host_checkpoint_step_count_moves_to_the_device():
    """Adam state saved on the CPU (step a host 0-d array) goes on counting on the GPU."""
    rng = np.random.default_rng(0)
    init, grads = rng.standard_normal(5).astype(np.float32), rng.standard_normal((4, 5))
    wc = ember.asarray(init, requires_grad=True)
    oc = ember.optim.Adam([wc], lr=0.1)
    for g in grads[:2]:
        wc.grad = ember.asarray(g.astype(np.float32))
        oc.step()
    wg = ember.asarray(wc.detach().numpy()).to("cuda").requires_grad_(True)
    og = ember.optim.Adam([wg], lr=0.1)
    og.load_state_dict(oc.state_dict())
    for g in grads[2:]:
        wc.grad = ember.asarray(g.astype(np.float32))
        wg.grad = ember.asarray(g.astype(np.float32)).to("cuda")
        oc.step()
        og.step()
    assert og.state[wg]["step"].is_cuda and float(og.state[wg]["step"]) == 4.0
    np.testing.assert_allclose(wg.cpu().numpy(), wc.numpy(), rtol=1e-6, atol=1e-7)
    sd = og.state_dict()["state"][0]
    assert float(sd["step"]) == 4.0
