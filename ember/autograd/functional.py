"""Higher-level autograd: vjp, jvp, jacobian, hessian, vhp and hvp of a function.

The signatures, return structures and errors are PyTorch's
(``torch.autograd.functional``): `inputs` is an array or a tuple of arrays
and results mirror it (a tuple exactly when a tuple was given; jacobian and
hessian nest one level per tuple).  Inputs are detached (and made to require
grad) before `func` sees them, so ``func`` is differentiated with respect to
exactly these arguments; with ``create_graph=True`` inputs that require grad
stay connected to their history and the results can be differentiated again.

Forward-mode products (jvp, hvp, forward-mode jacobians) use the double-vjp
trick: ``J v`` is the gradient, with respect to `u`, of ``<J^T u, v>``.

>>> import ember
>>> from ember.autograd.functional import jacobian
>>> x = ember.asarray([1.0, 2.0])
>>> jacobian(lambda t: t ** 2, x).tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""
from ember._core import array as _array
from ember._core.array import ndarray
from ember.autograd.function import Function

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _E():
    import ember
    return ember


class _enabled:
    """Grad mode set to `mode` inside the block (no dependency on grad_mode's classes)."""

    def __init__(self, mode):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = _array._set_grad_enabled(self.mode)

    def __exit__(self, *exc):
        _array._set_grad_enabled(self.prev)
        return False


# ---------------------------------------------------------------- tuple handling

def _as_tuple(inp, arg_name, fn_name):
    """(was it a tuple, a tuple of arrays); TypeError for anything else."""
    is_tuple = isinstance(inp, tuple)
    tup = inp if is_tuple else (inp,)
    for i, el in enumerate(tup):
        if not isinstance(el, ndarray):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either an ember array "
                            f"or a tuple of ember arrays but {where} has type "
                            f"{type(el).__name__}.")
    return is_tuple, tup


def _unpack(res, to_unpack):
    """Undo _as_tuple on a result: one flag (flat) or (outer, inner) flags (nested)."""
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            res = tuple(el[0] for el in res)
        if not outer:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _prepare(inputs, create_graph, need_graph):
    """New array objects for `inputs`: connected to their history when
    create_graph and they require grad, detached otherwise (requiring grad
    when need_graph).  Always new objects, so the function's arguments can
    be told apart from the same arrays captured by the function."""
    E = _E()
    res = []
    for x in inputs:
        if create_graph and x.requires_grad:
            res.append(E.reshape(x, tuple(x.shape)))
        else:
            d = x.detach()
            if need_graph:
                d.requires_grad = True
            res.append(d)
    return tuple(res)


def _finish(arrays, create_graph):
    """Results without history unless create_graph (nested tuples allowed)."""
    if create_graph:
        return arrays
    return tuple(a.detach() if isinstance(a, ndarray) else _finish(a, create_graph)
                 for a in arrays)


def _check_v(v, other, other_is_tuple):
    if len(v) != len(other):
        if other_is_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but "
                               f"got {len(v)}.")
        raise RuntimeError("The given v should contain a single array.")
    for i, (a, b) in enumerate(zip(v, other)):
        if tuple(a.shape) != tuple(b.shape):
            prefix = f"Entry {i} in " if other_is_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {tuple(b.shape)} but got "
                               f"{tuple(a.shape)}.")


_STRICT_MSG = {
    "hessian": ("The hessian of the user-provided function with respect to input {i} is "
                "independent of the input. This is not allowed in strict mode. You should ensure "
                "that your function is thrice differentiable and that the hessian depends on the "
                "inputs."),
    "jacobian": ("While computing the hessian, found that the jacobian of the user-provided "
                 "function with respect to input {i} is independent of the input. This is not "
                 "allowed in strict mode. You should ensure that your function is twice "
                 "differentiable and that the jacobian depends on the inputs (this would be "
                 "violated by a linear function for example)."),
    "grad_inputs": ("The gradient with respect to input {i} is independent of the inputs of the "
                    "user-provided function. This is not allowed in strict mode."),
    "outputs": ("Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when running "
                "in strict mode."),
}


def _check_requires_grad(arrays, kind, strict):
    if not strict:
        return
    for i, a in enumerate(arrays):
        if a is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if not a.requires_grad:
            raise RuntimeError(_STRICT_MSG[kind].format(i=i))


def _grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad that skips outputs not requiring grad (all None if none does)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    outs, gouts = [], []
    for o, g in zip(outputs, grad_outputs):
        if o is not None and o.requires_grad:
            outs.append(o)
            gouts.append(g)
    if not outs:
        return (None,) * len(inputs)
    E = _E()
    return E.autograd.grad(tuple(outs), tuple(inputs), tuple(gouts), retain_graph=retain_graph,
                           create_graph=create_graph, allow_unused=True)


_ZERO_MSG = {
    "back": ("The output of the user-provided function is independent of input {i}. This is "
             "not allowed in strict mode."),
    "back_trick": ("The gradient with respect to the input is independent of entry {i} in the "
                   "grad_outputs when using the double backward trick to compute forward mode "
                   "gradients. This is not allowed in strict mode."),
    "double_back": ("The jacobian of the user-provided function is independent of input {i}. "
                    "This is not allowed in strict mode."),
    "double_back_trick": ("The hessian of the user-provided function is independent of entry "
                          "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                          "prevents from using the double backward trick to replace forward "
                          "mode AD."),
}


def _fill_zeros(grads, refs, strict, create_graph, stage):
    """None gradients become zeros shaped like refs (or strict-mode errors)."""
    E = _E()
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_ZERO_MSG[stage].format(i=i))
            g = E.zeros(tuple(refs[i].shape), dtype=refs[i].dtype, device=refs[i].device)
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               f"create_graph=True.")
        res.append(g)
    return tuple(res)


def _one_hot(shape, dtype, k):
    E = _E()
    with _enabled(False):
        e = E.zeros(int(_size(shape)), dtype=dtype)
        e[k] = 1
        return E.reshape(e, tuple(shape))


def _size(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


class _Stack(Function):
    """stack along a new first axis, differentiable (whatever rules ember.stack has)."""

    @staticmethod
    def forward(ctx, *arrays):
        ctx.n = len(arrays)
        return _E().stack(arrays, axis=0)

    @staticmethod
    def backward(ctx, g):
        return tuple(g[k] for k in range(ctx.n))


def _stack(arrays, shape, dtype):
    """arrays (each of one shape) stacked on a new first axis, reshaped to `shape`."""
    E = _E()
    if not arrays:
        return E.zeros(tuple(shape), dtype=dtype)
    return E.reshape(_Stack.apply(*arrays), tuple(shape))


# ---------------------------------------------------------------- the functions

def _inputs_and_v(inputs, v, create_graph, fn_name):
    """Inputs made to require grad, and v checked against their shapes (jvp, vhp, hvp)."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _prepare(inputs, create_graph, True)
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _prepare(v, create_graph, False)
        _check_v(v, inputs, in_tuple)
    elif len(inputs) != 1 or inputs[0].size != 1:
        raise RuntimeError("The vector v can only be None if the input to the "
                           "user-provided function is a single array with a single "
                           "element.")
    return in_tuple, inputs, v


def _call(func, inputs, strict, fn_name):
    """func(*inputs) as a tuple of arrays (strict: each must depend on the inputs)."""
    out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function",
                                   fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    return out_tuple, outputs


def _last_pass(outputs, out_tuple, grads_of, wrt, v, refs, res_tuple, create_graph, strict,
               stage):
    """The final reverse pass shared by vjp/jvp/vhp/hvp, and the packing of both results."""
    with _enabled(True if create_graph else _array._is_grad_enabled()):
        res = _grad(grads_of, wrt, v, create_graph=create_graph)
        res = _fill_zeros(res, refs, strict, create_graph, stage)
    outputs = _finish(outputs, create_graph)
    res = _finish(res, create_graph)
    return _unpack(outputs, out_tuple), _unpack(res, res_tuple)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """Vector-Jacobian product: ``(func(inputs), v^T J)``.

    `v` has the shapes of func's outputs (None only for a one-element
    output).  Returns the outputs and the product with the structure of
    `inputs`.  `strict=True` raises when an output does not depend on an
    input, instead of returning zeros.

    >>> import ember
    >>> from ember.autograd.functional import vjp
    >>> x = ember.asarray([1.0, 2.0])
    >>> out, g = vjp(lambda t: t ** 2, x, ember.asarray([1.0, 10.0]))
    >>> out.tolist(), g.tolist()
    ([1.0, 4.0], [2.0, 40.0])
    """
    with _enabled(True):
        in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _call(func, inputs, strict, "vjp")
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _prepare(v, create_graph, False)
            _check_v(v, outputs, out_tuple)
        elif len(outputs) != 1 or outputs[0].size != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single array with a single element.")
    return _last_pass(outputs, out_tuple, outputs, inputs, v, inputs, in_tuple, create_graph, strict,
                      "back")


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """Jacobian-vector product: ``(func(inputs), J v)``.

    `v` has the shapes of `inputs` (None only for a one-element input); the
    product has the structure of func's outputs.  Computed with two reverse
    passes (the double-vjp trick), so func must be twice differentiable in
    the sense of having differentiable gradient rules.

    >>> import ember
    >>> from ember.autograd.functional import jvp
    >>> x = ember.asarray([1.0, 2.0])
    >>> out, t = jvp(lambda a: a ** 3, x, ember.asarray([1.0, 1.0]))
    >>> t.tolist()
    [3.0, 12.0]
    """
    with _enabled(True):
        in_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, "jvp")
        out_tuple, outputs = _call(func, inputs, strict, "jvp")
        # backward is linear in these, so their value does not matter (zeros: no inf/nan)
        E = _E()
        us = tuple(E.zeros_like(o, requires_grad=True) for o in outputs)
        grad_inputs = _grad(outputs, inputs, us, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    return _last_pass(outputs, out_tuple, grad_inputs, us, v, outputs, out_tuple, create_graph, strict,
                      "back_trick")


def _jacobian_forward(func, inputs, strict, vectorize):
    if strict:
        raise RuntimeError('ember.autograd.functional.jacobian: `strict=True` and '
                           '`strategy="forward-mode"` are not supported together (yet). Please '
                           'either set `strict=False` or `strategy="reverse-mode"`.')
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                  "Hessian is only implemented for `vectorize=True`.")
    E = _E()
    with _enabled(True):
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, False, True)
        outputs = func(*inputs)
        out_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                       "jacobian")
        us = tuple(E.zeros_like(o, requires_grad=True) for o in outputs)
        grad_inputs = _grad(outputs, inputs, us, create_graph=True)
    jac = [[None] * len(inputs) for _ in outputs]
    with _enabled(False):
        for j, x in enumerate(inputs):
            cols = [[] for _ in outputs]
            gi = grad_inputs[j]
            for k in range(x.size):
                if gi is not None and gi.requires_grad:
                    e = _one_hot(x.shape, gi.dtype, k)
                    t = _grad((gi,), us, (e,), retain_graph=True)
                else:
                    t = (None,) * len(outputs)
                for i, o in enumerate(outputs):
                    cols[i].append(t[i] if t[i] is not None
                                   else E.zeros(tuple(o.shape), dtype=o.dtype, device=o.device))
            for i, o in enumerate(outputs):
                shape = tuple(o.shape) + tuple(x.shape)
                if cols[i]:
                    jac[i][j] = E.reshape(E.stack(cols[i], axis=-1), shape)
                else:
                    jac[i][j] = E.zeros(shape, dtype=o.dtype, device=o.device)
    res = _finish(tuple(tuple(r) for r in jac), False)
    return _unpack(res, (out_tuple, in_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of `func` at `inputs`.

    For one output and one input: an array of shape
    ``output.shape + input.shape``.  With a tuple of outputs and/or inputs:
    nested tuples, ``jac[i][j]`` for output i and input j.

    `strategy="reverse-mode"` computes one row per output element (one
    backward pass each); `"forward-mode"` one column per input element (the
    double-vjp trick; as in PyTorch it needs ``vectorize=True`` and supports
    neither strict nor create_graph).  ``vectorize`` is accepted for
    compatibility: ember has no vmap, so the rows are computed one by one
    either way.

    >>> import ember
    >>> from ember.autograd.functional import jacobian
    >>> x = ember.asarray([1.0, 2.0])
    >>> y = ember.asarray([3.0, 4.0])
    >>> jx, jy = jacobian(lambda a, b: a * b, (x, y))
    >>> jx.tolist(), jy.tolist()
    ([[3.0, 0.0], [0.0, 4.0]], [[1.0, 0.0], [0.0, 2.0]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         'Hint: If your function has more outputs than inputs, "forward-mode" '
                         'tends to be more performant. Otherwise, prefer to use '
                         '"reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('ember.autograd.functional.jacobian: `create_graph=True` '
                                      'and `strategy="forward-mode"` are not supported together '
                                      '(yet). Please either set `create_graph=False` or '
                                      '`strategy="reverse-mode"`.')
        return _jacobian_forward(func, inputs, strict, vectorize)
    E = _E()
    with _enabled(True):
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _call(func, inputs, strict, "jacobian")
        if vectorize and strict:
            raise RuntimeError("ember.autograd.functional.jacobian: `strict=True` and "
                               "`vectorized=True` are not supported together. Please either "
                               "set `strict=False` or `vectorize=False`.")
        jac = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            for k in range(out.size):
                e = _one_hot(out.shape, out.dtype, k)
                vj = _grad((out,), inputs, (e,), retain_graph=True, create_graph=create_graph)
                for j, (g, x) in enumerate(zip(vj, inputs)):
                    if g is not None:
                        if strict and create_graph and not g.requires_grad:
                            raise RuntimeError(f"The jacobian of the user-provided function is "
                                               f"independent of input {i}. This is not allowed "
                                               f"in strict mode when create_graph=True.")
                        rows[j].append(g)
                    else:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is "
                                               f"independent of input {j}. This is not allowed "
                                               f"in strict mode.")
                        rows[j].append(E.zeros(tuple(x.shape), dtype=x.dtype, device=x.device))
            jac.append(tuple(_stack(r, tuple(out.shape) + tuple(x.shape), x.dtype)
                             for r, x in zip(rows, inputs)))
        jac = _finish(tuple(jac), create_graph)
        return _unpack(jac, (out_tuple, in_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function `func` at `inputs`.

    One input: an array of shape ``input.shape + input.shape``; a tuple of
    inputs: ``hess[i][j]`` for inputs i and j.  func must return one array
    with a single element.

    >>> import ember
    >>> from ember.autograd.functional import hessian
    >>> x = ember.asarray([1.0, 2.0])
    >>> hessian(lambda t: (t ** 3).sum(), x).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*inp):
        out = func(*inp)
        out_is_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict)
        if out_is_tuple or not isinstance(out, ndarray):
            raise RuntimeError("The function given to hessian should return a single array")
        if out.size != 1:
            raise RuntimeError("The array returned by the function given to hessian should "
                               "contain a single element")
        return _E().reshape(out, ())

    def jac_func(*inp):
        jac = jacobian(scalar_func, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _unpack(res, (in_tuple, in_tuple))


def _scalar_output(outputs, out_tuple, fn_name):
    if out_tuple or not isinstance(outputs[0], ndarray):
        raise RuntimeError(f"The function given to {fn_name} should return a single array")
    if outputs[0].size != 1:
        raise RuntimeError(f"The array returned by the function given to {fn_name} should "
                           f"contain a single element")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """Vector-Hessian product of a scalar function: ``(func(inputs), v^T H)``.

    >>> import ember
    >>> from ember.autograd.functional import vhp
    >>> x = ember.asarray([1.0, 2.0])
    >>> out, p = vhp(lambda t: (t ** 3).sum(), x, ember.asarray([1.0, 1.0]))
    >>> out.item(), p.tolist()
    (9.0, [6.0, 12.0])
    """
    with _enabled(True):
        in_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, "vhp")
        out_tuple, outputs = _call(func, inputs, strict, "vhp")
        _scalar_output(outputs, out_tuple, "vhp")
        jac = _grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
    return _last_pass(outputs, out_tuple, jac, inputs, v, inputs, in_tuple, create_graph, strict,
                      "double_back")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """Hessian-vector product of a scalar function: ``(func(inputs), H v)``
    (through the double-vjp trick; equal to vhp for twice continuously
    differentiable functions).

    >>> import ember
    >>> from ember.autograd.functional import hvp
    >>> x = ember.asarray([1.0, 2.0])
    >>> out, p = hvp(lambda t: t[0] ** 2 * t[1], x, ember.asarray([1.0, 0.0]))
    >>> p.tolist()
    [4.0, 2.0]
    """
    with _enabled(True):
        in_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, "hvp")
        out_tuple, outputs = _call(func, inputs, strict, "hvp")
        _scalar_output(outputs, out_tuple, "hvp")
        jac = _grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        E = _E()
        us = tuple(E.zeros_like(x, requires_grad=True) for x in inputs)
        double_back = _grad(jac, inputs, us, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    return _last_pass(outputs, out_tuple, double_back, us, v, inputs, in_tuple, create_graph, strict,
                      "double_back_trick")
