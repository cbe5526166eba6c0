"""Gradient rules, one per op, and their installation on the public namespace.

A rule is a function ``rule(grad, result, *args, **kwargs)`` with the op's own
signature after its first two parameters; it returns one gradient per
positional argument (None where there is none, a list for a list argument).
The engine sums each gradient down to its input's shape (undoing
broadcasting) and casts it to the input's dtype, so rules need not.  Rules
are written with ember ops: with ``create_graph=True`` they are recorded too,
which is what makes gradients of any order work.

    @defgrad("multiply")
    def _(g, res, a, b):
        return g * b, g * a
"""
from ember.autograd.engine import Rule

RULES = {}              # public name -> Rule
NONDIFF = set()         # names whose float results carry no gradient on purpose

__all__ = ["defgrad", "defop", "nondifferentiable", "RULES"]


def defgrad(*names, save_args=True, save_result=False):
    """Register the decorated function as the gradient rule of `names`.

    save_args=False: the rule sees array arguments only as their shape and
    dtype (``.shape``, ``.dtype``, ``.ndim``, ``.requires_grad``); the graph
    then does not keep the inputs alive (add, sum, reshape...).
    save_args="cross" (two-operand ops such as multiply): an operand is kept only
    when the other operand requires grad (its gradient needs it); otherwise the
    rule sees its ArrayMeta.
    save_result=True: the rule's second argument is the op's output."""
    def register(fn):
        for name in names:
            rule = Rule(fn, name, bool(save_args), save_result)
            rule.save_cross = save_args == "cross"
            RULES[name] = rule
        return fn
    return register


def nondifferentiable(*names):
    """Ops whose floating-point results are constants for autograd (zeros_like...)."""
    NONDIFF.update(names)


def defop(name, grad=None, save_args=True, save_result=False):
    """Make the decorated function a differentiable op with gradient rule `grad`.

    ``grad=None``: a private helper op whose results are constants for autograd
    (a backward kernel, a statistics buffer, a random mask): never recorded, but
    routed like every op, so its GPU implementation is registered for `name` with
    ``@gpu_op`` in ``ember/cuda/ops_<family>.py`` and its callers need no device
    branch.  On host arrays it costs one call through the DiffOp.

    For ops outside the ``ember`` namespace (``ember.nn.functional``...): the
    result is a DiffOp named `name` (it pickles as ``ember.<name>``, so name it by
    its public path).  When an argument requires grad, the decorated forward runs
    with grad mode off and one node is recorded; `grad` is a rule as for
    `defgrad` (``grad(g, result, *args, **kwargs)`` returns one gradient per
    positional argument).  Written with ember ops (or other defops), the rule is
    itself differentiable.

    >>> import ember
    >>> from ember.autograd.registry import defop
    >>> def _square_grad(g, res, x):
    ...     return (2 * g * x,)
    >>> @defop("square_demo", grad=_square_grad)
    ... def square_demo(x):
    ...     return x * x
    >>> x = ember.asarray([3.0], requires_grad=True)
    >>> square_demo(x).sum().backward()
    >>> x.grad.tolist()
    [6.0]
    """
    from ember.autograd.dispatch import DiffOp

    def wrap(fn):
        if grad is None:
            return DiffOp(fn, name, None, nondiff=True)
        rule = Rule(grad, name, bool(save_args), save_result)
        rule.save_cross = save_args == "cross"
        rule.forward = fn
        RULES[name] = rule
        return DiffOp(fn, name, rule)
    return wrap
