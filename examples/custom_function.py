"""Extending ember's autograd with a custom ``Function``.

A ``Function`` subclass writes an operation's forward and backward by hand;
``MyOp.apply(x)`` runs the forward and records one graph node whose backward
is yours.  Two Functions are shown:

* ``SiLU`` (``x * sigmoid(x)``): the mechanics -- ``ctx.save_for_backward``,
  ``ctx.saved_tensors``, one gradient per input -- on an op that is easy to
  check.  (The composite ``x * sigmoid(x)`` records two nodes instead of one;
  both keep ``x`` and ``sigmoid(x)`` alive for backward.)
* ``Softplus`` (``log(1 + exp(x))``): a reason to write one.  The naive
  composite overflows to ``inf`` for ``x > 88`` in float32 and its gradient
  becomes ``nan``; the Function computes a form where nothing overflows, and
  its backward is the exact ``sigmoid(x)``.

Each Function is checked the way ember checks its own ops: against finite
differences in float64 with ``ember.autograd.gradcheck`` (and
``gradgradcheck``: the backward is written with ember ops, so it is itself
differentiable), and against the composite op it replaces.  Finally the custom
``SiLU`` is used as the activation of a small network that learns ``sin(x)``,
which is saved with ``ember.save`` and reloaded.

Run:  python examples/custom_function.py [--steps N] [--out DIR] [--seed S]
"""
import argparse
import os

import numpy

import ember
import ember.nn.functional as F
from ember import nn, optim
from ember.autograd import Function, gradcheck, gradgradcheck

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


class SiLU(Function):
    """``x * sigmoid(x)`` with a hand-written backward:
    d/dx = s + x * s * (1 - s) = s * (1 + x * (1 - s)), where s = sigmoid(x)."""

    @staticmethod
    def forward(ctx, x):
        s = F.sigmoid(x)
        ctx.save_for_backward(x, s)     # checked for in-place changes before backward
        return x * s

    @staticmethod
    def backward(ctx, grad_out):
        x, s = ctx.saved_tensors
        return grad_out * s * (1 + x * (1 - s))


class Softplus(Function):
    """``log(1 + exp(x))`` computed as ``max(x, 0) + log1p(exp(-|x|))``: exp never
    sees a positive argument, so no overflow; its derivative is ``sigmoid(x)``."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ember.maximum(x, 0) + ember.log1p(ember.exp(-ember.abs(x)))

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * F.sigmoid(x)


def silu_composite(x):
    return x * F.sigmoid(x)


def softplus_naive(x):
    return ember.log(1 + ember.exp(x))


def value_and_grad(fn, x):
    """fn(x) and d(sum fn(x))/dx, for a fresh leaf copy of x."""
    x = x.detach().copy()
    x.requires_grad = True
    y = fn(x)
    y.sum().backward()
    return y.detach(), x.grad


def check(name, custom, reference, rng):
    """gradcheck / gradgradcheck in float64, then custom vs reference in float32."""
    x64 = ember.asarray(rng.standard_normal(12), dtype=ember.float64, requires_grad=True)
    assert gradcheck(custom, (x64,)), name
    assert gradgradcheck(custom, (x64,)), name
    x = ember.asarray(rng.standard_normal(1000).astype(numpy.float32) * 4)
    y, g = value_and_grad(custom, x)
    y_ref, g_ref = value_and_grad(reference, x)
    dy = float(ember.abs(y - y_ref).max())
    dg = float(ember.abs(g - g_ref).max())
    print(f"{name}: gradcheck and gradgradcheck pass (float64); vs the composite op on 1000 "
          f"float32 values: max |dy| {dy:.2e}, max |dgrad| {dg:.2e}")
    assert dy < 1e-5 and dg < 1e-5, (dy, dg)


class MLP(nn.Module):
    """1 -> 32 -> 32 -> 1 with the custom SiLU as activation."""

    def __init__(self, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(1, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 1)

    def forward(self, x):
        x = SiLU.apply(self.fc1(x))
        x = SiLU.apply(self.fc2(x))
        return self.fc3(x)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="training steps for sin(x)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=DEFAULT_OUT, help="folder for the checkpoint")
    args = parser.parse_args(argv)
    rng = numpy.random.default_rng(args.seed)
    ember.random.seed(args.seed)

    # 1. correctness: finite differences, and the composite op as oracle
    check("SiLU", SiLU.apply, silu_composite, rng)
    check("Softplus", Softplus.apply, softplus_naive, rng)

    # 2. why Softplus is a Function: the naive composite overflows
    big = ember.asarray([-100.0, 0.0, 100.0])
    y_naive, g_naive = value_and_grad(softplus_naive, big)
    y_custom, g_custom = value_and_grad(Softplus.apply, big)
    fmt = lambda a: "[" + ", ".join(f"{v:.4g}" for v in a.tolist()) + "]"   # noqa: E731
    print(f"softplus at {fmt(big)}: naive {fmt(y_naive)}, grad {fmt(g_naive)}; "
          f"custom {fmt(y_custom)}, grad {fmt(g_custom)}")
    assert bool(ember.isfinite(y_custom).all()) and bool(ember.isfinite(g_custom).all())

    # 3. what was recorded: one node for the Function, two for the composite
    x = ember.asarray(rng.standard_normal(8).astype(numpy.float32), requires_grad=True)
    node = silu_composite(x).grad_fn
    print(f"graph: custom {SiLU.apply(x).grad_fn.name}; composite {node.name} <- "
          f"{node.next_functions[1][0].name}")

    # 4. the custom op inside a network: fit sin(x) on [-pi, pi]
    xs = ember.asarray(numpy.linspace(-numpy.pi, numpy.pi, 256, dtype=numpy.float32)[:, None])
    ys = ember.sin(xs)
    model = MLP()
    opt = optim.Adam(model.parameters(), lr=1e-2)
    with ember.no_grad():
        first = float(F.mse_loss(model(xs), ys))
    for _ in range(args.steps):
        opt.zero_grad()
        loss = F.mse_loss(model(xs), ys)
        loss.backward()
        opt.step()
    with ember.no_grad():
        last = float(F.mse_loss(model(xs), ys))
    print(f"MLP with the custom SiLU fitting sin(x): mse {first:.4f} -> {last:.6f} "
          f"in {args.steps} steps")

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "custom_function_mlp.safetensors")
    ember.save({"model": model.state_dict(), "steps": args.steps}, path)
    fresh = MLP()
    fresh.load_state_dict(ember.load(path)["model"])
    with ember.no_grad():
        assert bool((fresh(xs) == model(xs)).all())
    print(f"checkpoint: {path} (reloaded: same predictions)")


if __name__ == "__main__":
    main()
