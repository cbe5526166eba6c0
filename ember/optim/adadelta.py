"""Adadelta (PyTorch's numerics): the reference update, written with ember ops (no fused
kernel)."""
import ember as E
from ember._kernels.cpu.optim import check_param_and_grad, new_step
from ember.optim import reference
from ember.optim._options import check_options
from ember.optim.optimizer import Optimizer, _run_closure

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    r"""Adadelta (``torch.optim.Adadelta``).

    For each parameter with a gradient ``g``::

        g = -g if maximize;  g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g                      (square_avg)
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta              (acc_delta)
        p = p - lr * delta

    Args:
        params: arrays or parameter groups to optimize.
        lr (float): scale of the update (default 1.0).
        rho (float): coefficient of the running averages (default 0.9).
        eps (float): added inside the square roots (default 1e-6).
        weight_decay (float): L2 penalty (default 0).
        maximize (bool): maximize the objective instead of minimizing.
        foreach, capturable: accepted for compatibility.
        differentiable: not supported (must be False).

    State per parameter (created at its first step): ``step`` (0-d float),
    ``square_avg`` and ``acc_delta``, in the parameter's dtype.  Unlike SGD
    or Adam, the update is ``ember.optim.reference.adadelta_step``, written
    with ember array operations (one small op per term), not a fused kernel,
    so it runs on any device.

    >>> import ember
    >>> w = ember.asarray([1.0, -1.0], requires_grad=True)
    >>> opt = ember.optim.Adadelta([w], lr=1.0)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 6) for v in w.tolist()]
    [0.996838, -0.996838]
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_options(self, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                      differentiable=differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, capturable=capturable, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults_on_load = {"foreach": None, "maximize": False, "differentiable": False,
                               "capturable": False}

    def step(self, closure=None):
        """Perform one optimization step; returns the closure's loss if one is given."""
        loss = None
        if closure is not None:
            loss = _run_closure(closure)
        with E.no_grad():
            for group in self.param_groups:
                options = dict(lr=group["lr"], rho=group["rho"], eps=group["eps"],
                               weight_decay=group["weight_decay"], maximize=group["maximize"])
                for i, p in enumerate(group["params"]):
                    if p.grad is None:
                        continue
                    grad = check_param_and_grad(p, p.grad, "Adadelta", i, p.is_cuda)
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = new_step()
                    reference.adadelta_step(p, grad, st, **options)
        return loss
