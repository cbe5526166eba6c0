"""Loss functions with PyTorch's semantics: reductions ('none' | 'mean' | 'sum'), class
weights, ignore_index, label smoothing, probability targets, K-dimensional targets.

Every loss is one differentiable op (or, for K-dimensional inputs, a reshape around
one).  Cross-entropy and nll on (N, C) inputs with class-index targets run fused
kernels (ember._kernels.cpu.softmax); their first-order backward is a kernel too,
and under ``create_graph=True`` the gradient is built from ember ops so higher
derivatives work.  The elementwise losses compute with ember ops and have
gradient rules written with ember ops.
"""
import warnings

import numpy as np

import ember as _E
from ember._core.array import ndarray
from ember._core.array import _is_grad_enabled as _grad_on
from ember._api._util import as_array, numpy_view
from ember._kernels.cpu import softmax as _k
from ember.autograd.registry import defop
from ember.nn.functional.softmax import softmax as _softmax, log_softmax as _log_softmax
from ember._core.dtypes import dtype_kind, is_half_dtype

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]

_RED = {"none": 0, "mean": 1, "sum": 2}
_I64 = np.dtype(np.int64)


# ---------------------------------------------------------------- shared helpers

def _legacy_reduction(size_average, reduce):
    """PyTorch's mapping of the deprecated size_average / reduce flags to a reduction."""
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='mean'/'sum'/'none' instead.", UserWarning, stacklevel=4)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def _reduction(opname, reduction, size_average=None, reduce=None, allowed=_RED):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in allowed:
        raise ValueError(f"{opname}: {reduction!r} is not a valid value for reduction "
                         f"(expected one of {', '.join(repr(r) for r in allowed)})")
    return reduction


def _shape(s):
    return "(" + ", ".join(str(d) for d in s) + ("," if len(s) == 1 else "") + ")"


def _float_input(opname, x, what="input"):
    x = x if isinstance(x, ndarray) else as_array(x)
    if dtype_kind(x.dtype) != "f":
        raise TypeError(f"{opname}: expected a floating-point {what}, got dtype {x.dtype}")
    return x


def _pair(opname, input, target, same_shape=False):
    """input and target as ember arrays; a shape mismatch warns (and broadcasts) as in
    PyTorch, or is an error where PyTorch makes it one."""
    x = _float_input(opname, input)
    t = target if isinstance(target, ndarray) else as_array(target)
    if dtype_kind(t.dtype) not in "fiub":
        raise TypeError(f"{opname}: expected a numeric target, got dtype {t.dtype}")
    if x.shape != t.shape:
        if same_shape:
            raise ValueError(f"{opname}: target size {_shape(t.shape)} must be the same as "
                             f"input size {_shape(x.shape)}")
        try:
            np.broadcast_shapes(x.shape, t.shape)
        except ValueError:
            raise ValueError(f"{opname}: target shape {_shape(t.shape)} cannot be broadcast "
                             f"with input shape {_shape(x.shape)}") from None
        warnings.warn(f"{opname}: using a target size {_shape(t.shape)} that is different to "
                      f"the input size {_shape(x.shape)}. This will likely lead to incorrect "
                      f"results due to broadcasting. Please ensure they have the same size.",
                      UserWarning, stacklevel=4)
    return x, t


def _reduce(l, reduction):
    if reduction == "mean":
        return l.mean()
    if reduction == "sum":
        return l.sum()
    return l


def _gscale(g, reduction, args):
    """The upstream gradient spread over the loss's elements (before the local factor)."""
    if reduction == "mean":
        shapes = [a.shape for a in args if isinstance(a, ndarray)]
        n = int(np.prod(np.broadcast_shapes(*shapes))) if shapes else 1
        return g / n
    return g


def _tracked(a):
    return isinstance(a, ndarray) and a.requires_grad


# ---------------------------------------------------------------- regression losses

def _mse_grad(g, res, input, target, size_average=None, reduce=None, reduction="mean"):
    red = _reduction("mse_loss", reduction, size_average, reduce)
    d = 2 * (input - target) * _gscale(g, red, (input, target))
    return (d if _tracked(input) else None, -d if _tracked(target) else None)


@defop("nn.functional.mse_loss", grad=_mse_grad)
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean squared error ``(input - target) ** 2``, reduced by `reduction`.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.mse_loss(ember.asarray([1.0, 2.0]), ember.asarray([0.0, 0.0])).item()
    2.5
    """
    red = _reduction("mse_loss", reduction, size_average, reduce)
    x, t = _pair("mse_loss", input, target)
    d = x - t
    return _reduce(d * d, red)


def _l1_grad(g, res, input, target, size_average=None, reduce=None, reduction="mean"):
    red = _reduction("l1_loss", reduction, size_average, reduce)
    d = _E.sign(input - target) * _gscale(g, red, (input, target))
    return (d if _tracked(input) else None, -d if _tracked(target) else None)


@defop("nn.functional.l1_loss", grad=_l1_grad)
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean absolute error ``|input - target|``, reduced by `reduction`.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.l1_loss(ember.asarray([1.0, -3.0]), ember.asarray([0.0, 0.0])).item()
    2.0
    """
    red = _reduction("l1_loss", reduction, size_average, reduce)
    x, t = _pair("l1_loss", input, target)
    return _reduce(_E.abs(x - t), red)


def _smooth_l1_grad(g, res, input, target, size_average=None, reduce=None, reduction="mean",
                    beta=1.0):
    red = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    d = input - target
    if beta == 0:
        local = _E.sign(d)
    else:
        local = _E.where(_E.abs(d) < beta, d / beta, _E.sign(d))
    gd = local * _gscale(g, red, (input, target))
    return (gd if _tracked(input) else None, -gd if _tracked(target) else None)


@defop("nn.functional.smooth_l1_loss", grad=_smooth_l1_grad)
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1: ``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.smooth_l1_loss(ember.asarray([0.5, 3.0]), ember.zeros(2), reduction="none").tolist()
    [0.125, 2.5]
    """
    red = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    x, t = _pair("smooth_l1_loss", input, target)
    d = _E.abs(x - t)
    if beta == 0:
        return _reduce(d, red)
    return _reduce(_E.where(d < beta, (0.5 / beta) * d * d, d - 0.5 * beta), red)


def _huber_grad(g, res, input, target, reduction="mean", delta=1.0):
    red = _reduction("huber_loss", reduction)
    d = input - target
    local = _E.where(_E.abs(d) <= delta, d, delta * _E.sign(d))
    gd = local * _gscale(g, red, (input, target))
    return (gd if _tracked(input) else None, -gd if _tracked(target) else None)


@defop("nn.functional.huber_loss", grad=_huber_grad)
def huber_loss(input, target, reduction="mean", delta=1.0):
    """Huber loss: ``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.huber_loss(ember.asarray([0.5, 3.0]), ember.zeros(2), reduction="none").tolist()
    [0.125, 2.5]
    """
    red = _reduction("huber_loss", reduction)
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    x, t = _pair("huber_loss", input, target)
    d = _E.abs(x - t)
    return _reduce(_E.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), red)


# ---------------------------------------------------------------- binary cross-entropy

def _bce_grad(g, res, input, target, weight=None, size_average=None, reduce=None,
              reduction="mean"):
    red = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    gl = _gscale(g, red, (input, target, weight))
    if weight is not None:
        gl = gl * weight
    gx = gt = gw = None
    if _tracked(input):
        gx = (input - target) / _E.maximum((1 - input) * input, 1e-12) * gl
    if _tracked(target):
        gt = (_E.log1p(-input) - _E.log(input)) * gl
    if _tracked(weight):
        gw = _bce_terms(input, target) * _gscale(g, red, (input, target, weight))
    return (gx, gt, gw)


def _bce_terms(x, t):
    return -(t * _E.maximum(_E.log(x), -100.0) + (1 - t) * _E.maximum(_E.log1p(-x), -100.0))


@defop("nn.functional.binary_cross_entropy", grad=_bce_grad)
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """Binary cross-entropy between probabilities `input` and `target` (same shape):
    ``-w * (t * log(x) + (1 - t) * log(1 - x))``, each log clamped to >= -100 as in PyTorch.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> round(F.binary_cross_entropy(ember.asarray([0.5]), ember.asarray([1.0])).item(), 4)
    0.6931
    """
    red = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    x, t = _pair("binary_cross_entropy", input, target, same_shape=True)
    _check_probabilities(x)
    l = _bce_terms(x, t)
    if weight is not None:
        l = l * _float_input("binary_cross_entropy", weight, "weight")
    return _reduce(l, red)


_BCE_RANGE = ("binary_cross_entropy: all elements of input should be between 0 and 1 (pass "
              "logits to binary_cross_entropy_with_logits instead)")


def _check_probabilities(x):
    """binary_cross_entropy's [0, 1] check of its input."""
    _check_in_unit_interval(x, _BCE_RANGE)


@defop("nn.functional.loss._check_in_unit_interval")
def _check_in_unit_interval(x, message):
    """ValueError(message) unless every element of x lies in [0, 1]: at once on the host;
    on a GPU queued on the device and raised at the next synchronisation
    (ember/cuda/ops_loss.py, ember.cuda._checks)."""
    a = numpy_view(x)
    if a.size and not ((a >= 0) & (a <= 1)).all():
        raise ValueError(message)


def _softplus_neg(x):
    """log(1 + exp(-x)), stably."""
    return _E.maximum(-x, 0) + _E.log1p(_E.exp(-_E.abs(x)))


def _bcel_grad(g, res, input, target, weight=None, size_average=None, reduce=None,
               reduction="mean", pos_weight=None):
    red = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    g0 = _gscale(g, red, (input, target, weight))
    gl = g0 if weight is None else g0 * weight
    gx = gt = gw = None
    if _tracked(input):
        if pos_weight is None:
            gx = (1 / (1 + _E.exp(-input)) - target) * gl
        else:
            lw = (pos_weight - 1) * target + 1
            gx = ((1 - target) - lw / (1 + _E.exp(input))) * gl
    if _tracked(target):
        if pos_weight is None:
            gt = -input * gl
        else:
            gt = (-input + (pos_weight - 1) * _softplus_neg(input)) * gl
    if _tracked(weight):
        gw = _bcel_terms(input, target, pos_weight) * g0
    return (gx, gt, gw)


def _bcel_terms(x, t, pos_weight):
    if pos_weight is None:
        return (1 - t) * x + _softplus_neg(x)
    return (1 - t) * x + ((pos_weight - 1) * t + 1) * _softplus_neg(x)


@defop("nn.functional.binary_cross_entropy_with_logits", grad=_bcel_grad)
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross-entropy on logits (sigmoid folded in, computed stably), with an
    optional per-element `weight` and a `pos_weight` for positive examples (broadcast
    along the last axis).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> round(F.binary_cross_entropy_with_logits(ember.zeros(1), ember.ones(1)).item(), 4)
    0.6931
    """
    red = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    x, t = _pair("binary_cross_entropy_with_logits", input, target, same_shape=True)
    pw = None
    if pos_weight is not None:
        pw = _float_input("binary_cross_entropy_with_logits", pos_weight, "pos_weight")
        if pw.dtype != x.dtype:
            pw = pw.astype(x.dtype)
    l = _bcel_terms(x, t, pw)
    if weight is not None:
        l = l * _float_input("binary_cross_entropy_with_logits", weight, "weight")
    return _reduce(l, red)


# ---------------------------------------------------------------- KL divergence

_KL_RED = {"none": 0, "mean": 1, "sum": 2, "batchmean": 3}


def _kl_reduce(l, red, x):
    if red == "batchmean":
        s = l.sum()
        return s / x.shape[0] if x.ndim else s
    return _reduce(l, red)


def _kl_grad(g, res, input, target, size_average=None, reduce=None, reduction="mean",
             log_target=False):
    red = _reduction("kl_div", reduction, size_average, reduce, _KL_RED)
    if red == "batchmean":
        gl = g / input.shape[0] if input.ndim else g
    else:
        gl = _gscale(g, red, (input, target))
    gx = gt = None
    if _tracked(input):
        gx = -(_E.exp(target) if log_target else target) * gl
    if _tracked(target):
        if log_target:
            gt = _E.exp(target) * (target + 1 - input) * gl
        else:
            safe = _E.where(target == 0, 1, target)
            gt = _E.where(target == 0, 0, (_E.log(safe) + 1 - input) * gl)
    return (gx, gt)


@defop("nn.functional.kl_div", grad=_kl_grad)
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence with `input` as log-probabilities:
    ``target * (log(target) - input)`` (``exp(target) * (target - input)`` when
    `log_target`).  ``reduction='batchmean'`` divides the sum by the batch size (the
    mathematical KL divergence); 'mean' averages over every element, as PyTorch.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> p = ember.asarray([[0.5, 0.5]])
    >>> F.kl_div(ember.log(p), p, reduction="batchmean").item()
    0.0
    """
    red = _reduction("kl_div", reduction, size_average, reduce, _KL_RED)
    if red == "mean":
        warnings.warn("kl_div: reduction 'mean' divides the total loss by both the batch size "
                      "and the support size. 'batchmean' divides only by the batch size, and "
                      "aligns with the KL div math definition.", UserWarning, stacklevel=3)
    x, t = _pair("kl_div", input, target)
    if log_target:
        l = _E.exp(t) * (t - x)
    else:
        safe = _E.where(t == 0, 1, t)
        l = _E.where(t == 0, 0, t * _E.log(safe)) - t * x
    return _kl_reduce(l, red, x)


# ---------------------------------------------------------------- nll / cross-entropy

def _index_targets(opname, x, target, weight):
    """Check and normalise class-index targets for x of shape (C,), (N, C) or
    (N, C, d1, ...): returns (x2, t1, w, out_shape) with x2 the (M, C) view/copy of
    the logits, t1 the (M,) int64 targets, w the weight or None, out_shape the shape of
    the unreduced loss."""
    t = target if isinstance(target, ndarray) else as_array(target)
    if dtype_kind(t.dtype) not in "iu":
        raise TypeError(f"{opname}: expected class-index targets of an integer dtype (or "
                        f"class probabilities of the input's shape and a float dtype), got "
                        f"target of dtype {t.dtype} and shape {_shape(t.shape)} for input "
                        f"of shape {_shape(x.shape)}")
    if x.ndim == 0:
        raise ValueError(f"{opname}: input must have at least 1 dimension (the classes), "
                         f"got a 0-d array")
    if x.ndim == 1:
        if t.ndim != 0:
            raise ValueError(f"{opname}: for unbatched input of shape {_shape(x.shape)} the "
                             f"target must be 0-d, got shape {_shape(t.shape)}")
        expect = ()
    else:
        expect = x.shape[:1] + x.shape[2:]
        if t.shape != expect:
            if t.ndim >= 1 and x.ndim >= 1 and t.shape[:1] != x.shape[:1]:
                raise ValueError(f"{opname}: expected input batch_size ({x.shape[0]}) to match "
                                 f"target batch_size ({t.shape[0] if t.ndim else 0}): input "
                                 f"shape {_shape(x.shape)}, target shape {_shape(t.shape)}")
            raise ValueError(f"{opname}: expected target of shape {_shape(expect)} for input of "
                             f"shape {_shape(x.shape)}, got {_shape(t.shape)}")
    C = x.shape[0] if x.ndim == 1 else x.shape[1]
    if t.dtype != _I64:
        t = t.astype(_I64)
    t = _k.contig(t.reshape(-1))
    w = None
    if weight is not None:
        w = _float_input(opname, weight, "weight")
        if w.ndim != 1 or w.shape[0] != C:
            raise ValueError(f"{opname}: weight should be defined either for all {C} classes "
                             f"or no classes, but got weight of shape {_shape(w.shape)}")
        if w.requires_grad and _grad_on():
            raise RuntimeError(f"{opname}: gradients with respect to the class weight are not "
                               f"supported (as in PyTorch); pass weight.detach()")
        w = _k.contig(w.detach() if w.requires_grad else w)
        if w.dtype != x.dtype:
            w = w.astype(x.dtype)
    if x.ndim == 1:
        x2 = x.reshape(1, C)
    elif x.ndim == 2:
        x2 = x
    else:
        x2 = _E.moveaxis(x, 1, -1).reshape(-1, C)
    return x2, t, w, expect


# The device-specific pieces of the (N, C) losses' gradients are private ops whose
# bodies are the CPU kernels (ember._kernels.cpu.softmax); their GPU implementations are
# registered for the same names in ember/cuda/ops_loss.py.

def _coef(g, red, t, ignore_index, weight):
    """create_graph path: per-row factor of the upstream gradient, as an (M, 1) array."""
    if red == 0:
        return g.reshape(-1, 1)
    if red == 1:
        return _mean_coef(g, t, ignore_index, weight)
    return g


def _mean_coef_grad(gg, res, g, t, ignore_index, weight):
    return (_mean_coef(gg, t, ignore_index, weight), None, None, None)


@defop("nn.functional.loss._mean_coef", grad=_mean_coef_grad)
def _mean_coef(g, t, ignore_index, weight):
    """g over the mean reduction's denominator (the total weight of the targets not
    ignored; 0 when every target is ignored)."""
    tn = numpy_view(t)
    keep = tn != ignore_index
    denom = float(numpy_view(weight).astype(np.float64)[tn[keep]].sum()) \
        if weight is not None else float(keep.sum())
    return g / denom if denom else g * 0.0      # every target ignored: zero gradient


_smoothed_targets = defop("nn.functional.loss._smoothed_targets")(_k.smoothed_targets)


_cross_entropy_backward = defop("nn.functional.loss._cross_entropy_backward")(
    _k.cross_entropy_backward)
_nll_backward = defop("nn.functional.loss._nll_backward")(_k.nll_backward)


def _ce_nc_grad(g, res, x, target, weight, ignore_index, reduction, label_smoothing, scratch):
    if _grad_on():
        # create_graph: gx = coef * (softmax(x) * rowsum(Q) - Q), written with ember ops
        Q, _ = _smoothed_targets(x.detach(), target, weight, ignore_index, label_smoothing)
        Q = Q.astype(x.dtype)
        a = Q.sum(axis=1, keepdims=True)
        p = _softmax(x, 1)
        return (_coef(g, reduction, target, ignore_index, weight) * (p * a - Q),)
    g = _k.contig(g)
    if g.dtype != x.dtype:
        g = g.astype(x.dtype)
    return (_cross_entropy_backward(g, x, target, weight, ignore_index, reduction,
                                    label_smoothing, scratch),)


def _scratch(x):
    """The host scratch of the CPU kernels for (N, C) logits x (None on a GPU, whose
    kernels keep nothing between forward and backward)."""
    return None if x.is_cuda else _k.new_scratch(x.shape[0] + 1)


@defop("nn.functional.loss._cross_entropy_nc", grad=_ce_nc_grad)
def _cross_entropy_nc(x, target, weight, ignore_index, reduction, label_smoothing, scratch):
    """Fused cross-entropy of (N, C) logits against (N,) int64 class indices."""
    return _k.cross_entropy_forward(x, target, weight, ignore_index, reduction, label_smoothing,
                                    scratch)


def _nll_nc_grad(g, res, x, target, weight, ignore_index, reduction):
    if _grad_on():
        Q, _ = _smoothed_targets(x.detach(), target, weight, ignore_index, 0.0)
        return (-(_coef(g, reduction, target, ignore_index, weight) * Q.astype(x.dtype)),)
    g = _k.contig(g)
    if g.dtype != x.dtype:
        g = g.astype(x.dtype)
    return (_nll_backward(g, x, target, weight, ignore_index, reduction),)


@defop("nn.functional.loss._nll_nc", grad=_nll_nc_grad)
def _nll_nc(x, target, weight, ignore_index, reduction):
    """Negative log-likelihood of (N, C) log-probabilities at (N,) int64 class indices."""
    return _k.nll_forward(x, target, weight, ignore_index, reduction)


def _prob_cross_entropy(x, t, weight, red, label_smoothing):
    """Cross-entropy with class-probability targets (same shape as the input)."""
    cdim = 0 if x.ndim == 1 else 1
    C = x.shape[cdim]
    logp = _log_softmax(x, cdim)
    if label_smoothing > 0:
        t = t * (1 - label_smoothing) + label_smoothing / C
    prod = logp * t
    if weight is not None:
        w = _float_input("cross_entropy", weight, "weight")
        if w.ndim != 1 or w.shape[0] != C:
            raise ValueError(f"cross_entropy: weight should be defined either for all {C} "
                             f"classes or no classes, but got weight of shape "
                             f"{_shape(w.shape)}")
        prod = prod * w.reshape((C,) + (1,) * (x.ndim - cdim - 1))
    if red == 0:
        return -prod.sum(axis=cdim)
    s = -prod.sum()
    if red == 1:
        return s / (x.size // C if C else 0) if x.size else s / 0.0
    return s


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits and targets (log_softmax + nll in one fused op).

    `input`: (C,), (N, C) or (N, C, d1, ...) logits.  `target`: class indices of shape
    (), (N,) or (N, d1, ...) (any integer dtype), or class probabilities of the input's
    shape.  `weight`: (C,) class weights; ``reduction='mean'`` then divides by the sum
    of the weights of the non-ignored targets (NaN when every target is ignored).
    `label_smoothing` in [0, 1] mixes the target with the uniform distribution.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> logits = ember.asarray([[2.0, 0.0], [0.0, 2.0]])
    >>> round(F.cross_entropy(logits, ember.asarray([0, 1])).item(), 4)
    0.1269
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    red = _RED.get(reduction)
    if red is None:
        _reduction("cross_entropy", reduction)
    if _k.fast_nc_ok(input, target, weight) and 0.0 <= label_smoothing <= 1.0:
        return _cross_entropy_nc(input, target, weight, ignore_index, red, label_smoothing,
                                 _scratch(input))
    x = _float_input("cross_entropy", input)
    ls = float(label_smoothing)
    if not 0.0 <= ls <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {ls}")
    t = target if isinstance(target, ndarray) else as_array(target)
    if dtype_kind(t.dtype) == "f":
        if t.shape != x.shape:
            raise ValueError(f"cross_entropy: probability targets must have the input's shape "
                             f"{_shape(x.shape)}, got {_shape(t.shape)} (class-index targets "
                             f"must have an integer dtype)")
        return _prob_cross_entropy(x, t, weight, red, ls)
    x2, t1, w, out_shape = _index_targets("cross_entropy", x, t, weight)
    if is_half_dtype(x2.dtype):
        x2 = x2.astype(np.float32)
        if w is not None:
            w = w.astype(np.float32)
    loss = _cross_entropy_nc(_k.contig(x2), t1, w, int(ignore_index), red, ls, _scratch(x2))
    if red == 0 and loss.shape != out_shape:
        loss = loss.reshape(out_shape)
    return _back_to(loss, x)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of log-probabilities `input` ((C,), (N, C) or
    (N, C, d1, ...)) at class indices `target`, with PyTorch's weighting and
    ignore_index rules.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> logp = ember.log(ember.asarray([[0.25, 0.75]]))
    >>> round(F.nll_loss(logp, ember.asarray([1])).item(), 4)
    0.2877
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    red = _RED.get(reduction)
    if red is None:
        _reduction("nll_loss", reduction)
    if _k.fast_nc_ok(input, target, weight):
        return _nll_nc(input, target, weight, ignore_index, red)
    x = _float_input("nll_loss", input)
    x2, t1, w, out_shape = _index_targets("nll_loss", x, target, weight)
    if is_half_dtype(x2.dtype):
        x2 = x2.astype(np.float32)
        if w is not None:
            w = w.astype(np.float32)
    loss = _nll_nc(_k.contig(x2), t1, w, int(ignore_index), red)
    if red == 0 and loss.shape != out_shape:
        loss = loss.reshape(out_shape)
    return _back_to(loss, x)


def _back_to(loss, x):
    """The loss in the logits' dtype, except inside autocast, which keeps the float32 it
    was computed in (as PyTorch's autocast does for its float32 ops)."""
    if loss.dtype == x.dtype:
        return loss
    from ember.amp.autocast import casts_to_float32
    return loss if casts_to_float32(x) else loss.astype(x.dtype)


# The losses whose bodies are ember ops only (binary_cross_entropy's range check is a
# private op with a GPU implementation): the same body runs on GPU arrays
# (ember/cuda/_dispatch.py).
for _op in (mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
            binary_cross_entropy_with_logits, kl_div):
    _op.fn.device_generic = True
del _op
