"""Normalization layers, functional form: layer_norm, batch_norm, group_norm,
instance_norm and normalize, with PyTorch's semantics.

layer_norm, batch_norm and group_norm are single differentiable ops on fused kernels
(ember._kernels.cpu.norm) that save their statistics (mean, 1/std) for the backward
kernel.  When the backward is itself recorded (``create_graph=True``) the gradients
are written with ember ops from the saved inputs, so higher derivatives work.
"""
import math

import numpy as np

import ember as _E
from ember._core.array import ndarray
from ember._core.array import _is_grad_enabled as _grad_on
from ember._api._util import as_array, empty_raw
from ember._kernels.cpu import norm as _k
from ember.autograd.registry import defop
from ember._core.dtypes import dtype_kind

__all__ = ["layer_norm", "batch_norm", "group_norm", "instance_norm", "normalize"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _shape(s):
    return "(" + ", ".join(str(d) for d in s) + ("," if len(s) == 1 else "") + ")"


def _float(opname, x, what="input"):
    x = x if isinstance(x, ndarray) else as_array(x)
    if dtype_kind(x.dtype) != "f":
        raise TypeError(f"{opname}: expected a floating-point {what}, got dtype {x.dtype}")
    return x


def _param(opname, p, what, shape, dtype):
    """An optional weight/bias: checked for its shape, as a contiguous array of `dtype`."""
    if p is None:
        return None
    p = _float(opname, p, what)
    if p.shape != tuple(shape):
        raise ValueError(f"{opname}: expected {what} of shape {_shape(shape)}, got "
                         f"{_shape(p.shape)}")
    return p


_kparam = _k.kparam     # None, or a contiguous array of the input's dtype


# The device-specific pieces of the ops below are private ops whose bodies are the CPU
# kernels (ember._kernels.cpu.norm); their GPU implementations are registered for the
# same names in ember/cuda/ops_norm.py and reached through the GPU dispatch.

# _new_stats(rows, n, x): the (rows, n) statistics array the forward kernels fill, on
# x's device (float64 on the host; the GPU keeps the kernels' accumulator dtype)
_new_stats = defop("nn.functional.normalization._new_stats")(_k.new_stats)
_layer_norm_backward = defop("nn.functional.normalization._layer_norm_backward")(
    _k.layer_norm_backward)
_batch_norm_backward = defop("nn.functional.normalization._batch_norm_backward")(
    _k.batch_norm_backward)
_group_norm_backward = defop("nn.functional.normalization._group_norm_backward")(
    _k.group_norm_backward)
_batch_norm_update_running = defop("nn.functional.normalization._batch_norm_update_running")(
    _k.batch_norm_update_running)


def _tracked(a):
    return isinstance(a, ndarray) and a.requires_grad


def _grad_dtype(g, x):
    g = _k.contig(g)
    return g.astype(x.dtype) if g.dtype != x.dtype else g


# ---------------------------------------------------------------- layer norm

def _layer_norm_composite(g, x, weight, k, eps):
    """Gradients of layer norm written with ember ops (differentiable again)."""
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    rstd = ((xc * xc).mean(axis=axes, keepdims=True) + eps) ** -0.5
    xhat = xc * rstd
    gh = g * weight if weight is not None else g
    gx = rstd * (gh - gh.mean(axis=axes, keepdims=True)
                 - xhat * (gh * xhat).mean(axis=axes, keepdims=True))
    return gx, (g * xhat).sum(axis=lead), g.sum(axis=lead)


def _layer_norm_grad(g, res, x, weight, bias, normalized_shape, eps, stats):
    k = len(normalized_shape)
    need_w, need_b = _tracked(weight), _tracked(bias)
    if _grad_on():
        gx, gw, gb = _layer_norm_composite(g, x, weight, k, eps)
        return (gx, gw if need_w else None, gb if need_b else None)
    xd = _k.contig(x)
    g = _grad_dtype(g, x)
    if k != 1:
        N = math.prod(normalized_shape)
        shp2 = (x.size // N if N else 0, N)
        xd, g = xd.reshape(shp2), g.reshape(shp2)
    gx, gw, gb = _layer_norm_backward(g, xd, _kparam(weight, x), stats, x.requires_grad,
                                      need_w or need_b)
    if k != 1:
        gx = gx.reshape(x.shape) if gx is not None else None
        gw = gw.reshape(normalized_shape) if need_w else None
        gb = gb.reshape(normalized_shape) if need_b else None
    return (gx, gw if need_w else None, gb if need_b else None)


@defop("nn.functional.normalization._layer_norm", grad=_layer_norm_grad)
def _layer_norm(x, weight, bias, normalized_shape, eps, stats):
    xd = _k.contig(x)
    if len(normalized_shape) == 1:
        return _k.layer_norm_forward(xd, _kparam(weight, x), _kparam(bias, x), eps, stats)
    N = math.prod(normalized_shape)
    y = _k.layer_norm_forward(xd.reshape(x.size // N if N else 0, N), _kparam(weight, x),
                              _kparam(bias, x), eps, stats)
    return y.reshape(x.shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing `normalized_shape` dimensions (mean 0, variance 1 with
    the biased estimator), then scale by `weight` and shift by `bias` (both of shape
    `normalized_shape`, optional).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> y = F.layer_norm(ember.asarray([[1.0, 3.0]]), (2,))
    >>> [round(v, 3) for v in y[0].tolist()]
    [-1.0, 1.0]
    """
    x = _float("layer_norm", input)
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) \
        else tuple(int(d) for d in normalized_shape)
    k = len(ns)
    if x.ndim < k or tuple(x.shape[x.ndim - k:]) != ns:
        raise ValueError(f"layer_norm: given normalized_shape={list(ns)}, expected input with "
                         f"shape (*, {', '.join(str(d) for d in ns)}), but got input of shape "
                         f"{_shape(x.shape)}")
    weight = _param("layer_norm", weight, "weight", ns, x.dtype)
    bias = _param("layer_norm", bias, "bias", ns, x.dtype)
    if x.dtype not in (_F32, _F64):
        from ember.amp.autocast import casts_to_float32
        y = layer_norm(x.astype(_F32), ns, None if weight is None else weight.astype(_F32),
                       None if bias is None else bias.astype(_F32), eps)
        return y if casts_to_float32(x) else y.astype(x.dtype)
    N = math.prod(ns)
    stats = _new_stats(2, x.size // N if N else 0, x)
    return _layer_norm(x, weight, bias, ns, float(eps), stats)


# ---------------------------------------------------------------- residual + layer norm

def _add_layer_norm_grad(g, res, x, r, weight, bias, eps, stats, z):
    need_w, need_b = _tracked(weight), _tracked(bias)
    if _grad_on():
        gz, gw, gb = _layer_norm_composite(g, x + r, weight, 1, eps)   # recorded: exact
    else:                                                              # to any order
        gz, gw, gb = _layer_norm_backward(_grad_dtype(g, z), z, _kparam(weight, z), stats,
                                          True, need_w or need_b)
    return gz, gz, gw if need_w else None, gb if need_b else None, None, None, None


@defop("nn.functional.normalization._add_layer_norm", grad=_add_layer_norm_grad)
def _add_layer_norm(x, r, weight, bias, eps, stats, z):
    """layer_norm(z) over the last axis, z = x + r written into the buffer `z` (saved for
    the backward), one kernel pass per row."""
    return _k.add_layer_norm_forward(_k.contig(x), _k.contig(r), _kparam(weight, x),
                                     _kparam(bias, x), eps, stats, z)[1]


def add_layer_norm_applies(x, r, normalized_shape, weight, bias):
    """Whether `add_layer_norm` runs its fused kernel on these arguments (host float32 /
    float64 arrays of one shape and dtype, normalized over the last axis only, weight and
    bias None or host arrays of that dtype and shape (n,)).

    >>> import ember
    >>> from ember.nn.functional.normalization import add_layer_norm_applies
    >>> x = ember.ones((2, 4))
    >>> add_layer_norm_applies(x, x, (4,), None, None), add_layer_norm_applies(x, x, (2, 4), None, None)
    (True, False)
    """
    if type(x) is not ndarray or type(r) is not ndarray:
        if not (isinstance(x, ndarray) and isinstance(r, ndarray)):
            return False
    dt = x.dtype
    if r.dtype != dt or (dt != _F32 and dt != _F64) or x.is_cuda or r.is_cuda:
        return False
    shape = x.shape
    if shape != r.shape or not shape or len(normalized_shape) != 1 \
            or shape[-1] != normalized_shape[0]:
        return False
    for p in (weight, bias):
        if p is not None and not (isinstance(p, ndarray) and p.dtype == dt and not p.is_cuda
                                  and p.shape == normalized_shape):
            return False
    return True


def fused_add_layer_norm(x, r, normalized_shape, weight, bias, eps):
    """``layer_norm(x + r)`` as one op where `add_layer_norm_applies`, else None (for
    callers that run their own fallback: the post-norm Transformer layers);
    `normalized_shape` a tuple of one int.

    >>> import ember
    >>> from ember.nn.functional.normalization import fused_add_layer_norm
    >>> fused_add_layer_norm(ember.ones((1, 2)), ember.asarray([[0.0, 2.0]]), (2,), None, None,
    ...                      1e-5).tolist()
    [[-0.9999949932098389, 0.9999949932098389]]
    >>> fused_add_layer_norm(ember.ones((1, 2)), ember.ones(2), (2,), None, None, 1e-5) is None
    True
    """
    if not add_layer_norm_applies(x, r, normalized_shape, weight, bias):
        return None
    n = normalized_shape[0]
    stats = _new_stats(2, x.size // n if n else 0, x)
    return _add_layer_norm(x, r, weight, bias, float(eps), stats, empty_raw(x.shape, x.dtype))


def add_layer_norm(x, r, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``layer_norm(x + r, normalized_shape, weight, bias, eps)``: the residual add and the
    normalization of a post-norm Transformer layer in one pass (host float32/float64
    arrays of one shape, one normalized axis; anything else runs the two ops).

    >>> import ember
    >>> from ember.nn.functional.normalization import add_layer_norm
    >>> y = add_layer_norm(ember.asarray([[1.0, 2.0]]), ember.asarray([[0.0, 1.0]]), (2,))
    >>> [round(v, 3) for v in y[0].tolist()]
    [-1.0, 1.0]
    """
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) \
        else tuple(int(d) for d in normalized_shape)
    y = fused_add_layer_norm(x, r, ns, weight, bias, eps)
    return layer_norm(x + r, ns, weight, bias, eps) if y is None else y


# ---------------------------------------------------------------- batch norm

def _bn_axes(x):
    return (0,) + tuple(range(2, x.ndim)), (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _bn_param(p, x):
    """A weight as the batch-norm kernels read it: the GPU kernels take any dtype (float32
    parameters with 16-bit data: the mixed kernels), the CPU ones x's dtype."""
    return (None if p is None else p.detach()) if x.is_cuda else _kparam(p, x)


def _as(a, like):
    """a in like's dtype (gradients of mixed-precision batch norm)."""
    return a if a is None or like is None or a.dtype == like.dtype else a.astype(like.dtype)


def _bn_x(x):
    """The input as the batch-norm backward kernels read it: on the GPU as it is stored (a
    channels-last input stays so for cuDNN's NHWC batch norm; the own kernels make their
    contiguous copy themselves), on the CPU C-contiguous."""
    return x if x.is_cuda else _k.contig(x)


def _bn_grads(x, weight, bias, gx, gw, gb):
    return (_as(gx, x), _as(gw, weight) if _tracked(weight) else None,
            _as(gb, bias) if _tracked(bias) else None)


def _batch_norm_train_grad(g, res, x, weight, bias, eps, stats):
    if _grad_on():
        axes, bshape = _bn_axes(x)
        mean = x.mean(axis=axes, keepdims=True)
        xc = x - mean
        rstd = ((xc * xc).mean(axis=axes, keepdims=True) + eps) ** -0.5
        xhat = xc * rstd
        gh = g * weight.reshape(bshape) if weight is not None else g
        gx = rstd * (gh - gh.mean(axis=axes, keepdims=True)
                     - xhat * (gh * xhat).mean(axis=axes, keepdims=True))
        return _bn_grads(x, weight, bias, gx, (g * xhat).sum(axis=axes), g.sum(axis=axes))
    gx, gw, gb = _batch_norm_backward(_grad_dtype(g, x), _bn_x(x), _bn_param(weight, x),
                                      stats, None, x.requires_grad)
    return _bn_grads(x, weight, bias, gx, gw, gb)


@defop("nn.functional.normalization._batch_norm_train", grad=_batch_norm_train_grad)
def _batch_norm_train(x, weight, bias, eps, stats):
    return _k.batch_norm_train_forward(_k.contig(x), _kparam(weight, x),
                                       _kparam(bias, x), eps, stats)


def _batch_norm_eval_grad(g, res, x, running_mean, running_var, weight, bias, eps):
    if _grad_on():
        axes, bshape = _bn_axes(x)
        rstd = ((running_var.detach() + eps) ** -0.5).reshape(bshape)
        scale = rstd * weight.reshape(bshape) if weight is not None else rstd
        gx = g * scale
        gw = (g * (x - running_mean.detach().reshape(bshape)) * rstd).sum(axis=axes)
        gx, gw, gb = _bn_grads(x, weight, bias, gx, gw, g.sum(axis=axes))
        return (gx, None, None, gw, gb)
    rm = _k.contig(running_mean.detach().astype(_F64))
    rstd = _k.contig(1.0 / _E.sqrt(running_var.detach().astype(_F64) + eps))
    gx, gw, gb = _bn_grads(x, weight, bias, *_batch_norm_backward(
        _grad_dtype(g, x), _bn_x(x), _bn_param(weight, x), rm, (rm, rstd), x.requires_grad))
    return (gx, None, None, gw, gb)


@defop("nn.functional.normalization._batch_norm_eval", grad=_batch_norm_eval_grad)
def _batch_norm_eval(x, running_mean, running_var, weight, bias, eps):
    y, _, _ = _k.batch_norm_eval_forward(_k.contig(x), running_mean.detach(),
                                         running_var.detach(), _kparam(weight, x),
                                         _kparam(bias, x), eps)
    return y


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalization over (N, C, ...) input, per channel C.

    training=True: normalize with the batch's statistics (biased variance) and, when
    running_mean / running_var are given, update them in place:
    ``running = (1 - momentum) * running + momentum * batch_stat`` with the unbiased
    batch variance, as PyTorch.  training=False: normalize with the running statistics.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.asarray([[1.0], [3.0]])
    >>> rm, rv = ember.zeros(1), ember.ones(1)
    >>> [round(v, 3) for v in F.batch_norm(x, rm, rv, training=True).reshape(-1).tolist()]
    [-1.0, 1.0]
    >>> [round(v, 3) for v in rm.tolist() + rv.tolist()]
    [0.2, 1.1]
    """
    x = _float("batch_norm", input)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected input of shape (N, C, ...) with at least 2 "
                         f"dimensions, got {_shape(x.shape)}")
    C = x.shape[1]
    for name, r in (("weight", weight), ("bias", bias)):
        if isinstance(r, ndarray) and r.shape != (C,):
            raise ValueError(f"batch_norm: the input has {C} channels (shape "
                             f"{_shape(x.shape)}, channels on axis 1) but {name} has shape "
                             f"{_shape(r.shape)}: expected {_shape((C,))}")
    weight = _param("batch_norm", weight, "weight", (C,), x.dtype)
    bias = _param("batch_norm", bias, "bias", (C,), x.dtype)
    for name, r in (("running_mean", running_mean), ("running_var", running_var)):
        if r is not None and (not isinstance(r, ndarray) or r.shape != (C,)):
            raise ValueError(f"batch_norm: expected {name} of shape {_shape((C,))} for input of "
                             f"shape {_shape(x.shape)}, got "
                             f"{_shape(r.shape) if hasattr(r, 'shape') else type(r).__name__}")
    if x.dtype not in (_F32, _F64) and not x.is_cuda:
        # 16-bit input on the CPU: computed in float32; 16-bit running statistics (a
        # module made with .half() / .bfloat16()) are updated in float32 and written back
        # rounded.  (The GPU kernels read 16-bit data with float32 parameters as it is.)
        wide = [r.astype(_F32) if isinstance(r, ndarray) and r.dtype not in (_F32, _F64)
                else r for r in (running_mean, running_var)]
        y = batch_norm(x.astype(_F32), wide[0], wide[1],
                       None if weight is None else weight.astype(_F32),
                       None if bias is None else bias.astype(_F32), training, momentum, eps)
        for r, w in zip((running_mean, running_var), wide):
            if w is not r and training:
                r[...] = w
        return y.astype(x.dtype)
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when "
                             "training=False (pass training=True to use batch statistics)")
        return _batch_norm_eval(x, running_mean, running_var, weight, bias, float(eps))
    count = x.size // C if C else 0
    if count <= 1 and x.size:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{_shape(x.shape)}")
    stats = _new_stats(3, C, x)
    y = _batch_norm_train(x, weight, bias, float(eps), stats)
    if (running_mean is not None or running_var is not None) and x.size:
        if momentum is None:
            raise TypeError("batch_norm: momentum must be a number (the BatchNorm modules "
                            "turn momentum=None into a cumulative average)")
        rm = running_mean if running_mean is not None else \
            _E.zeros(C, dtype=x.dtype, device=x.device)
        rv = running_var if running_var is not None else \
            _E.ones(C, dtype=x.dtype, device=x.device)
        if not (rm.is_contiguous() and rv.is_contiguous()):
            raise ValueError("batch_norm: running statistics must be contiguous arrays")
        _k_update(rm, rv, stats, float(momentum), count)
    return y


def _k_update(rm, rv, stats, momentum, count):
    _batch_norm_update_running(rm, rv, stats, momentum, count)
    rm._bump_version()
    rv._bump_version()


# ---------------------------------------------------------------- group norm

def _group_norm_grad(g, res, x, weight, bias, num_groups, eps, stats):
    need_w, need_b = _tracked(weight), _tracked(bias)
    if _grad_on():
        N = x.shape[0]
        axes, bshape = _bn_axes(x)
        xg = x.reshape(N, num_groups, -1)
        xc = xg - xg.mean(axis=-1, keepdims=True)
        rstd = ((xc * xc).mean(axis=-1, keepdims=True) + eps) ** -0.5
        xhg = xc * rstd
        xhat = xhg.reshape(x.shape)
        gh = (g * weight.reshape(bshape) if weight is not None else g).reshape(N, num_groups, -1)
        gx = rstd * (gh - gh.mean(axis=-1, keepdims=True)
                     - xhg * (gh * xhg).mean(axis=-1, keepdims=True))
        return (gx.reshape(x.shape), (g * xhat).sum(axis=axes) if need_w else None,
                g.sum(axis=axes) if need_b else None)
    gx, gw, gb = _group_norm_backward(_grad_dtype(g, x), _k.contig(x), num_groups,
                                      _kparam(weight, x), stats, x.requires_grad)
    return (gx, gw if need_w else None, gb if need_b else None)


@defop("nn.functional.normalization._group_norm", grad=_group_norm_grad)
def _group_norm(x, weight, bias, num_groups, eps, stats):
    return _k.group_norm_forward(_k.contig(x), num_groups, _kparam(weight, x),
                                 _kparam(bias, x), eps, stats)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalization: the C channels of (N, C, ...) input split into `num_groups`
    groups, each normalized per sample; then per-channel `weight` and `bias`.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> y = F.group_norm(ember.asarray([[1.0, 3.0, 5.0, 7.0]]), 2)
    >>> [round(v, 3) for v in y[0].tolist()]
    [-1.0, 1.0, -1.0, 1.0]
    """
    x = _float("group_norm", input)
    if x.ndim < 2:
        raise ValueError(f"group_norm: expected input of shape (N, C, ...) with at least 2 "
                         f"dimensions, got {_shape(x.shape)}")
    C = x.shape[1]
    G = int(num_groups)
    if G <= 0 or C % G:
        raise ValueError(f"group_norm: expected the number of channels in the input to be "
                         f"divisible by num_groups, but got input of shape {_shape(x.shape)} "
                         f"and num_groups={num_groups}")
    weight = _param("group_norm", weight, "weight", (C,), x.dtype)
    bias = _param("group_norm", bias, "bias", (C,), x.dtype)
    if x.dtype not in (_F32, _F64):
        return group_norm(x.astype(_F32), G, None if weight is None else weight.astype(_F32),
                          None if bias is None else bias.astype(_F32), eps).astype(x.dtype)
    stats = _new_stats(2, x.shape[0] * G, x)
    return _group_norm(x, weight, bias, G, float(eps), stats)


# ---------------------------------------------------------------- instance norm, normalize

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Instance normalization: each channel of each sample normalized over its spatial
    dimensions (group_norm with one channel per group).  With running statistics and
    use_input_stats, they are updated with the batch average of the instance
    statistics; use_input_stats=False normalizes with them instead.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> y = F.instance_norm(ember.asarray([[[1.0, 3.0]]]))
    >>> [round(v, 3) for v in y.reshape(-1).tolist()]
    [-1.0, 1.0]
    """
    x = _float("instance_norm", input)
    if x.ndim < 3:
        raise ValueError(f"instance_norm: expected input of shape (N, C, L, ...) with at least "
                         f"3 dimensions, got {_shape(x.shape)}")
    if not use_input_stats:
        return batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
    N, C = x.shape[0], x.shape[1]
    if x.size // (N * C if N * C else 1) <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{_shape(x.shape)}")
    y = group_norm(x, C, weight, bias, eps)
    if running_mean is not None or running_var is not None:
        with _E.no_grad():
            xs = x.detach().reshape(N, C, -1)
            n = xs.shape[-1]
            m = float(momentum)
            if running_mean is not None:
                running_mean[...] = (1 - m) * running_mean + m * xs.mean(axis=-1).mean(axis=0)
            if running_var is not None:
                v = xs.var(axis=-1, ddof=1) if n > 1 else xs.var(axis=-1)
                running_var[...] = (1 - m) * running_var + m * v.mean(axis=0)
    return y


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None, *, axis=None):
    """x / max(||x||_p, eps) along `dim` (alias `axis`).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> [round(v, 4) for v in F.normalize(ember.asarray([[3.0, 4.0]]))[0].tolist()]
    [0.6, 0.8]
    """
    if axis is not None:
        dim = axis
    x = _float("normalize", input)
    if x.ndim == 0:
        raise ValueError("normalize: expected an input with at least 1 dimension")
    n = _E.linalg.vector_norm(x, ord=p, axis=dim, keepdims=True)
    res = x / _E.maximum(n, eps)
    if out is not None:
        out[...] = res
        return out
    return res
