"""SGD/Adam/AdamW under GradScaler on the CPU: they take PyTorch's protocol for fused
optimizers (``_step_supports_amp_scaling``: GradScaler hands them ``found_inf`` and they
skip their own step), with the same results as PyTorch's GradScaler and optimizers,
skipped steps (inf/NaN gradients), scale backoff and growth included.  The same
trajectories on a GPU: tests/cuda/test_cuda_optim_amp_step.py."""
import pytest

import ember
import ember.amp  # noqa: F401

import amp_step_oracle as oracle


@pytest.mark.parametrize("pattern", list(oracle.PATTERNS))
@pytest.mark.parametrize("name, kw", oracle.CASES, ids=oracle.CASE_IDS)
def test_grad_scaler_steps_follow_pytorch(name, kw, pattern):
    steps = oracle.PATTERNS[pattern]
    mine, _ = oracle.run_ember(name, kw, steps, "cpu")
    oracle.compare(mine, oracle.run_torch(name, kw, steps))


@pytest.mark.parametrize("name, kw", oracle.CASES, ids=oracle.CASE_IDS)
def test_grad_scale_and_found_inf_set_by_hand(name, kw):
    oracle.check_grad_scale_and_found_inf(name, kw, "cpu")


def test_only_the_optimizers_own_step_takes_the_flag():
    """A subclass that replaces step() would ignore found_inf: GradScaler must read the
    flag for it (the attribute is False), as for any other optimizer."""
    w = ember.asarray([1.0], requires_grad=True)

    class Custom(ember.optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    assert ember.optim.SGD([w])._step_supports_amp_scaling
    assert ember.optim.AdamW([w])._step_supports_amp_scaling
    assert not Custom([w])._step_supports_amp_scaling
    assert not getattr(ember.optim.RMSprop([w]), "_step_supports_amp_scaling", False)


def test_a_flag_of_the_wrong_size_is_refused():
    w = ember.asarray([1.0, 2.0], requires_grad=True)
    opt = ember.optim.Adam([w])
    w.grad = ember.ones(2)
    opt.found_inf = ember.zeros(2)
    with pytest.raises(ValueError, match="found_inf must have one element"):
        opt.step()
    assert w.tolist() == [1.0, 2.0]
