"""Adadelta (PyTorch's numerics), written with ember ops (no fused kernel)."""
import ember as E
from ember._kernels.cpu.optim import new_step
from ember.optim.optimizer import Optimizer, _run_closure, _check_options

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
    or Adam, the update is written with ember array operations (one small
    op per term), not a fused kernel, so it runs on any device.

    >>> import ember
    >>> w = ember.asarray([1.0, -1.0], requires_grad=True)
    >>> opt = ember.optim.Adadelta([w], lr=1.0)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 6) for v in w.tolist()]
    [0.996838, -0.996838]
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_options(self, lr=lr, differentiable=differentiable)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, capturable=capturable, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)

    def step(self, closure=None):
        """Perform one optimization step; returns the closure's loss if one is given."""
        loss = None
        if closure is not None:
            loss = _run_closure(closure)
        with E.no_grad():
            for group in self.param_groups:
                lr, rho, eps = group["lr"], group["rho"], group["eps"]
                wd, maximize = group["weight_decay"], group["maximize"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    _update(p, self.state[p], lr, rho, eps, wd, maximize)
        return loss


def _update(p, st, lr, rho, eps, weight_decay, maximize):
    g = p.grad
    if g.dtype != p.dtype or g.shape != p.shape:
        raise ValueError(f"Adadelta: a parameter of shape {p.shape} and dtype {p.dtype} has a "
                         f".grad of shape {g.shape} and dtype {g.dtype}; they must match")
    if len(st) == 0:
        st["step"] = new_step()
        st["square_avg"] = E.zeros_like(p)
        st["acc_delta"] = E.zeros_like(p)
    square_avg, acc_delta = st["square_avg"], st["acc_delta"]
    st["step"] = new_step(float(st["step"]) + 1.0)
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * p
    square_avg *= rho
    square_avg += (1 - rho) * (g * g)
    std = E.sqrt(square_avg + eps)
    delta = E.sqrt(acc_delta + eps)
    delta /= std
    delta *= g
    acc_delta *= rho
    acc_delta += (1 - rho) * (delta * delta)
    p -= lr * delta
