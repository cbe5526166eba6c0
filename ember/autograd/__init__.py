"""ember.autograd: reverse-mode automatic differentiation (define-by-run).

Ops on arrays with ``requires_grad=True`` are recorded as they run;
``y.backward()`` accumulates gradients into the leaves' ``.grad`` and
``ember.autograd.grad`` returns them.  Gradient rules are written with ember
ops, so ``create_graph=True`` gives gradients of any order.

>>> import ember
>>> x = ember.asarray([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (x * x).sum()
>>> y.backward()
>>> x.grad.tolist()
[2.0, 4.0, 6.0]
"""
import weakref as _weakref

import ember as _ember        # the namespace (being built when this imports: used in calls)
from ember._core.array import ndarray
from ember.autograd import engine as _engine
from ember.autograd.grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode,
                                      is_grad_enabled, is_inference_mode_enabled)
from ember.autograd.registry import defgrad

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "Function", "once_differentiable", "gradcheck", "gradgradcheck",
           "detect_anomaly", "set_detect_anomaly", "functional", "defgrad"]



def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, ndarray):
        return (x,)
    return tuple(x)


def _root_grads(outputs, grad_outputs, opname):
    grads = []
    for i, y in enumerate(outputs):
        if not isinstance(y, ndarray):
            raise TypeError(f"{opname}: outputs must be ember arrays, got {type(y).__name__}")
        g = grad_outputs[i] if grad_outputs is not None else None
        if g is None:
            if y.size != 1:
                raise RuntimeError(f"{opname}: grad can be implicitly created only for outputs "
                                   f"with one element; output {i} has shape "
                                   f"{tuple(y.shape)}: pass a gradient of that shape")
            g = _ember.ones(y.shape, dtype=y.dtype, device=y.device)
        else:
            g = g if isinstance(g, ndarray) else _ember.asarray(g, dtype=y.dtype)
            if tuple(g.shape) != tuple(y.shape):
                raise RuntimeError(f"{opname}: gradient {i} has shape {tuple(g.shape)} but the "
                                   f"output has shape {tuple(y.shape)}")
        if not y.requires_grad:
            raise RuntimeError(f"{opname}: output {i} does not require grad and has no grad_fn "
                               f"(no input of the ops that produced it requires grad)")
        grads.append(g)
    return tuple(grads)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into each leaf's ``.grad`` (weighted by
    `grad_tensors`; a one-element output needs none).  With `inputs`, only
    those arrays accumulate.

    >>> import ember
    >>> w = ember.ones(3, requires_grad=True)
    >>> ember.autograd.backward((w * 4).sum())
    >>> w.grad.tolist()
    [4.0, 4.0, 4.0]
    """
    outputs = _as_tuple(tensors)
    gouts = _as_tuple(grad_tensors) if not isinstance(grad_tensors, ndarray) else (grad_tensors,)
    if gouts is not None and len(gouts) != len(outputs):
        raise RuntimeError(f"backward: got {len(gouts)} gradients for {len(outputs)} outputs")
    grads = _root_grads(outputs, gouts, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    ins = _as_tuple(inputs)
    if ins is not None:
        if not ins:
            raise RuntimeError("backward: inputs= must not be empty")
        for x in ins:
            if not isinstance(x, ndarray) or not x.requires_grad:
                raise RuntimeError("backward: every array in inputs= must require grad")
    _engine.run_backward(outputs, grads, bool(retain_graph), bool(create_graph), ins, True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple), without
    touching any ``.grad``.

    >>> import ember
    >>> x = ember.asarray(3.0, requires_grad=True)
    >>> (g,) = ember.autograd.grad(x ** 3, x, create_graph=True)
    >>> g.item(), ember.autograd.grad(g, x)[0].item()
    (27.0, 18.0)
    """
    outs = _as_tuple(outputs)
    ins = _as_tuple(inputs)
    if not ins:
        raise RuntimeError("grad: inputs must not be empty")
    for i, x in enumerate(ins):
        if not isinstance(x, ndarray):
            raise TypeError(f"grad: inputs[{i}] is a {type(x).__name__}, not an ember array")
        if not x.requires_grad:
            raise RuntimeError(f"grad: inputs[{i}] (shape {tuple(x.shape)}) does not require grad")
    gouts = grad_outputs
    if gouts is not None:
        gouts = (gouts,) if isinstance(gouts, ndarray) else tuple(gouts)
        if len(gouts) != len(outs):
            raise RuntimeError(f"grad: got {len(gouts)} grad_outputs for {len(outs)} outputs")
    grads = _root_grads(outs, gouts, "grad")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    res = _engine.run_backward(outs, grads, bool(retain_graph), bool(create_graph), ins, False)
    out = []
    for i, (x, g) in enumerate(zip(ins, res)):
        if g is None:
            if materialize_grads:
                g = _ember.zeros(x.shape, dtype=x.dtype, device=x.device)
            elif not allow_unused:
                raise RuntimeError(f"grad: inputs[{i}] (shape {tuple(x.shape)}) was not used to "
                                   f"compute the outputs; pass allow_unused=True to get None")
        out.append(g)
    return tuple(out)


# ---------------------------------------------------------------- array hooks

def _retain_grad(x):
    if not x.requires_grad:
        raise RuntimeError("retain_grad: can't retain the gradient of an array that does not "
                           "require grad")
    if x.grad_fn is None:
        return                          # leaves keep their .grad anyway
    meta = _engine._meta_of(x)
    if meta.retains_grad:
        return
    meta.retains_grad = True
    ref = _weakref.ref(x)
    node = x.grad_fn
    node_ref = _weakref.ref(node)       # the hook lives on the node: no cycle through it
    nr = x._output_nr

    def keep(g):
        t = ref()
        if t is not None and t.grad_fn is node_ref():
            d = g.detach()
            t.grad = d.copy() if t.grad is None else t.grad + d
        return None
    _add_prehook(node, nr, keep)


def _retains_grad(x):
    m = x._grad_meta
    return bool(m is not None and m.retains_grad and x.grad_fn is not None)


def _add_prehook(node, nr, fn):
    if node.pre_hooks is None:
        node.pre_hooks = []
    entry = (nr, fn)
    node.pre_hooks.append(entry)
    return _engine._RemovableHandle(node.pre_hooks, entry)


def _register_hook(x, hook):
    if not x.requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on an array that does not "
                           "require grad")
    node, nr = _engine._edge(x)
    return _add_prehook(node, nr, hook)


def _register_post_accumulate_grad_hook(x, hook):
    if x.grad_fn is not None:
        raise RuntimeError("register_post_accumulate_grad_hook: only leaf arrays accumulate "
                           "gradients; this array has a grad_fn")
    if not x.requires_grad:
        raise RuntimeError("register_post_accumulate_grad_hook: the array does not require grad")
    meta = _engine._meta_of(x)
    if meta.post_accumulate_hooks is None:
        meta.post_accumulate_hooks = []
    meta.post_accumulate_hooks.append(hook)
    return _engine._RemovableHandle(meta.post_accumulate_hooks, hook)


from ember.autograd.anomaly import detect_anomaly, set_detect_anomaly       # noqa: E402
from ember.autograd.function import Function, once_differentiable           # noqa: E402
from ember.autograd.gradcheck import gradcheck, gradgradcheck               # noqa: E402
from ember.autograd import functional                                       # noqa: E402
