"""Gradient checks against central finite differences (use float64 inputs).

``gradcheck(f, inputs)`` compares, for every input that requires grad, the
Jacobian that backward computes (one vector-Jacobian product per output
element) with the one finite differences give (two forward calls per input
element).  ``gradgradcheck`` does the same for the gradient of f, i.e. checks
second derivatives (the backward pass recorded with ``create_graph=True``).
"""
import numpy as np

from ember._core.array import ndarray
from ember._core.dtypes import dtype_kind

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical gradients disagree."""


def _E():
    import ember
    return ember


def _tuple(x):
    if isinstance(x, ndarray):
        return (x,)
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return (x,)


def _outputs(func, inputs):
    outs = _tuple(func(*inputs))
    return tuple(o for o in outs if isinstance(o, ndarray))


def _differentiable_inputs(inputs):
    return [i for i, x in enumerate(inputs) if isinstance(x, ndarray) and x.requires_grad]


def _numerical_jacobian(func, inputs, idx, eps):
    """[output][input] -> (out.size, in.size) matrices by central differences."""
    E = _E()
    with E.no_grad():
        base_outs = _outputs(func, inputs)
        jac = [[np.zeros((o.size, inputs[i].size)) for i in idx] for o in base_outs]
        for k, i in enumerate(idx):
            x = inputs[i]
            if x.size == 0:
                continue
            flat = np.asarray(x).reshape(-1) if x.is_contiguous() else None
            if flat is None or not np.shares_memory(flat, np.asarray(x)):
                raise ValueError("gradcheck: inputs must be C-contiguous arrays "
                                 f"(input {i} is not); pass x.copy()")
            for j in range(x.size):
                orig = flat[j]
                flat[j] = orig + eps
                x._bump_version()
                plus = [np.array(o, dtype=np.float64).reshape(-1) for o in _outputs(func, inputs)]
                flat[j] = orig - eps
                x._bump_version()
                minus = [np.array(o, dtype=np.float64).reshape(-1) for o in _outputs(func, inputs)]
                flat[j] = orig
                x._bump_version()
                for o in range(len(base_outs)):
                    jac[o][k][:, j] = (plus[o] - minus[o]) / (2 * eps)
    return jac


def _analytical_jacobian(func, inputs, idx):
    E = _E()
    outs = _outputs(func, inputs)
    jac = [[np.zeros((o.size, inputs[i].size)) for i in idx] for o in outs]
    for o, y in enumerate(outs):
        if not y.requires_grad:
            continue
        for j in range(y.size):
            gout = np.zeros(y.size, dtype=np.dtype(y.dtype))
            gout[j] = 1
            grads = E.autograd.grad(y, [inputs[i] for i in idx],
                                    grad_outputs=E.asarray(gout.reshape(y.shape)),
                                    retain_graph=True, allow_unused=True)
            for k, g in enumerate(grads):
                if g is not None:
                    jac[o][k][j, :] = np.asarray(g, dtype=np.float64).reshape(-1)
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False, **kwargs):
    """True when backward's gradients of ``func(*inputs)`` match central finite
    differences for every input with ``requires_grad`` (use float64).

    >>> import ember
    >>> x = ember.asarray([0.5, -1.0, 2.0], dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradcheck(lambda t: (ember.sin(t) * t).sum(), (x,))
    True
    """
    inputs = _tuple(inputs)
    idx = _differentiable_inputs(inputs)
    if not idx:
        raise ValueError("gradcheck: no input requires grad; set requires_grad=True on the "
                         "inputs to check")
    for i in idx:
        x = inputs[i]
        if dtype_kind(x.dtype) == "c":
            raise NotImplementedError("gradcheck: complex inputs are not supported; check "
                                      "the real and imaginary parts as separate real inputs")
        if x.dtype != np.float64:
            import warnings
            warnings.warn(f"gradcheck: input {i} is {x.dtype}, not float64; finite "
                          f"differences will be inaccurate", stacklevel=2)
    numerical = _numerical_jacobian(func, inputs, idx, eps)
    analytical = _analytical_jacobian(func, inputs, idx)
    for o in range(len(numerical)):
        for k, i in enumerate(idx):
            n, a = numerical[o][k], analytical[o][k]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                bad = np.unravel_index(np.argmax(np.abs(a - n) - rtol * np.abs(n)), a.shape)
                msg = (f"gradcheck: Jacobian mismatch for output {o} with respect to input {i}:"
                       f" at (output element {bad[0]}, input element {bad[1]}) analytical "
                       f"{a[bad]:.8g}, numerical {n[bad]:.8g}\nnumerical:\n{n}\nanalytical:\n{a}")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, **kwargs):
    """gradcheck applied to the gradient of func: checks second derivatives.

    >>> import ember
    >>> x = ember.asarray([0.5, 1.5], dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradgradcheck(lambda t: ember.exp(t) * t, (x,))
    True
    """
    E = _E()
    inputs = _tuple(inputs)
    idx = _differentiable_inputs(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(E.asarray(rng.standard_normal(o.shape), dtype=o.dtype,
                                       requires_grad=True) for o in outs)
    else:
        grad_outputs = _tuple(grad_outputs)
    n_in = len(inputs)

    def first_grads(*args):
        ins, gouts = args[:n_in], args[n_in:]
        ys = _outputs(func, ins)
        pairs = [(y, g) for y, g in zip(ys, gouts) if y.requires_grad]
        gs = E.autograd.grad([p[0] for p in pairs], [ins[i] for i in idx],
                             grad_outputs=[p[1] for p in pairs], create_graph=True,
                             allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
