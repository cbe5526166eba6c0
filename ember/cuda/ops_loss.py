"""The losses of ember.nn.functional.loss on CUDA arrays.

* ``_cross_entropy_nc``: the fused kernels of softmax.cu (``cross_entropy_fwd`` /
  ``cross_entropy_bwd``) compute each row's loss (label smoothing included) and
  log-sum-exp; with class weights the loss and gradient are CuPy formulas on that
  log-sum-exp (the kernels know no weights).  The CPU's float64 ``scratch``
  argument is host memory and is not used: the backward recomputes the
  log-sum-exp with the forward kernel (one pass over the logits).
* ``_nll_nc``: CuPy gathers and scatters.
* The private ops of loss.py's gradient rules: ``_cross_entropy_backward``,
  ``_nll_backward`` (the first-order gradients), ``_smoothed_targets`` and ``_mean_coef``
  (the create_graph branch, whose formula is written once in loss.py).
* The elementwise losses are device-generic (their one definition in loss.py is ember
  ops); binary_cross_entropy's input range is checked on the device here
  (``_check_in_unit_interval``, reported at the next synchronisation, as the
  class-index checks).

Bad class indices raise the CPU's IndexError at the next synchronisation (the
kernels flag them without a wait: see ember.cuda._checks); the kernels never read
through them.
"""
import numpy as np

from ember.cuda._dispatch import gpu_op
from ember.cuda import _runtime as R
from ember.cuda import _checks
from ember.cuda.ops_softmax import row_grid, row_threads

__all__ = ["cross_entropy_backward", "nll_backward", "smoothed_targets", "mean_coef",
           "check_in_unit_interval"]

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)


def _acc(dt):
    """The kernels' accumulator dtype: float64 for float64, float32 otherwise."""
    return _F64 if dt == _F64 else _F32


def _cp(a):
    return None if a is None else R.as_cupy(a)


def _bad_target_error(tc, C, ignore_index, opname):
    """The CPU's IndexError for the first target outside [0, C) (not ignored); built when
    a deferred check reports, so it reads the targets then."""
    cp = R.cp()
    bad = ((tc < 0) | (tc >= C)) & (tc != ignore_index)
    where = f"{C} classes (expected 0 <= target < {C}, or ignore_index={ignore_index})"
    if not bool(cp.any(bad)):          # the targets were overwritten since the op ran
        return IndexError(f"{opname}: a target was out of bounds for {where}")
    pos = int(cp.argmax(bad))
    return IndexError(f"{opname}: target {int(tc[pos])} (at position {pos}) is out of "
                      f"bounds for {where}")


def _defer_target_check(flag, tc, C, ignore_index, opname):
    _checks.defer(flag, lambda: _bad_target_error(tc, C, ignore_index, opname))


def _check_targets(tc, C, ignore_index, opname):
    """Queue the range check of class indices tc (raised at the next synchronisation)."""
    if tc.size and _checks.checks_enabled():
        cp = R.cp()
        flag = cp.any(((tc < 0) | (tc >= C)) & (tc != ignore_index))
        _defer_target_check(flag, tc, C, ignore_index, opname)


def _row_lse(xc, tc, ignore_index, eps, opname=None):
    """(per-row unweighted loss, per-row log-sum-exp) of (N, C) cupy logits from the fused
    kernel, both in the accumulator dtype.  With `opname`, a bad target's error is queued
    (the kernel gives its row a NaN loss)."""
    cp = R.cp()
    N, C = xc.shape
    acc = _acc(xc.dtype)
    loss = cp.empty(N, dtype=acc)
    lse = cp.empty(N, dtype=acc)
    if N == 0:
        return loss, lse
    bad = cp.zeros(1, dtype=cp.int32)
    R.launch(f"ember_cross_entropy_fwd_{R.suffix(xc.dtype)}", row_grid(N), row_threads(C),
           (xc, tc, loss, lse, int(N), int(C), int(ignore_index), float(eps), bad))
    if opname is not None:
        _defer_target_check(bad, tc, C, ignore_index, opname)
    return loss, lse


def _weights(wc, tc, keep):
    """(safe targets (ignored -> 0), float64 weight of each row's target, 0 where ignored)."""
    cp = R.cp()
    ts = cp.where(keep, tc, 0)
    if wc is None:
        return ts, keep.astype(_F64)
    return ts, cp.where(keep, wc.astype(_F64)[ts], 0.0)


def _reduced(li, denom, reduction, dtype):
    """The CPU's reductions of float64 per-row losses li: none, mean (over denom), sum."""
    if reduction == 0:
        return R.from_cupy(li.astype(dtype))
    total = li.sum(dtype=_F64)
    if reduction == 1:
        total = total / denom           # 0 / 0 is NaN: every target ignored, as the CPU
    return R.from_cupy(total.astype(dtype))


# ---------------------------------------------------------------- cross-entropy

def _ce_operands(x, target, weight, label_smoothing):
    """(contiguous logits, targets, weights or None, N, C, smoothing) as CuPy arrays."""
    xc = R.cp().ascontiguousarray(R.as_cupy(x))
    N, C = xc.shape
    return xc, R.as_cupy(target), _cp(weight), N, C, float(label_smoothing)


@gpu_op("nn.functional.loss._cross_entropy_nc")
def _cross_entropy_nc(x, target, weight, ignore_index, reduction, label_smoothing, scratch):
    """Fused cross-entropy of (N, C) logits against (N,) int64 class indices (GPU)."""
    cp = R.cp()
    xc, tc, wc, N, C, eps = _ce_operands(x, target, weight, label_smoothing)
    loss, lse = _row_lse(xc, tc, ignore_index, eps, "cross_entropy")
    keep = tc != ignore_index
    ts, wt = _weights(wc, tc, keep)
    if wc is None:
        li = loss.astype(_F64)
    else:
        lse64 = lse.astype(_F64)
        x64 = xc.astype(_F64)
        xt = x64[cp.arange(N), ts]
        li = (1.0 - eps) * wt * (lse64 - xt)
        if eps != 0.0:
            w64 = wc.astype(_F64)
            li = li + (eps / C) * (w64.sum() * lse64 - x64 @ w64)
        li = cp.where(keep, li, 0.0)
    return _reduced(li, wt.sum(), reduction, xc.dtype)


def _ce_backward(g, x, target, weight, ignore_index, reduction, label_smoothing):
    """First-order gradient of _cross_entropy_nc w.r.t. the logits (GPU)."""
    cp = R.cp()
    xc, tc, wc, N, C, eps = _ce_operands(x, target, weight, label_smoothing)
    dx = cp.empty((N, C), dtype=xc.dtype)
    if N == 0 or C == 0:
        return R.from_cupy(dx)
    _, lse = _row_lse(xc, tc, ignore_index, eps)
    keep = tc != ignore_index
    ts, wt = _weights(wc, tc, keep)
    gc = R.as_cupy(g)
    if wc is None:
        acc = _acc(xc.dtype)
        if reduction == 0:
            grad, stride = cp.ascontiguousarray(gc.reshape(N).astype(acc)), 1
        else:
            grad = gc.reshape(1).astype(_F64)
            if reduction == 1:
                grad = grad / wt.sum()
            grad, stride = grad.astype(acc), 0
        R.launch(f"ember_cross_entropy_bwd_{R.suffix(xc.dtype)}", R.blocks(N * C), 256,
               (xc, tc, lse, grad, stride, dx, int(N), int(C), int(ignore_index), eps))
        return R.from_cupy(dx)
    # class weights: gx = coef * (a * p - (eps / C) * w) - coef * (1 - eps) * wt * onehot(t)
    w64 = wc.astype(_F64)
    if reduction == 0:
        c = gc.reshape(N).astype(_F64)
    else:
        c = cp.broadcast_to(gc.reshape(1).astype(_F64), (N,))
        if reduction == 1:
            c = c / wt.sum()
    c = cp.where(keep, c, 0.0)
    a = (1.0 - eps) * wt + eps * w64.sum() / C
    p = cp.exp(xc.astype(_F64) - lse.astype(_F64)[:, None])
    gx = c[:, None] * (a[:, None] * p - (eps / C) * w64[None, :])
    rows = cp.arange(N)
    gx[rows, ts] = gx[rows, ts] - c * (1.0 - eps) * wt
    gx = cp.where(keep[:, None], gx, 0.0)       # ignored rows: exactly 0 (even for NaN logits)
    return R.from_cupy(gx.astype(xc.dtype))


@gpu_op("nn.functional.loss._cross_entropy_backward")
def cross_entropy_backward(g, x, target, weight, ignore_index, reduction, label_smoothing,
                           scratch=None):
    """loss._cross_entropy_backward on the GPU (the host `scratch` is not used)."""
    if g.dtype != x.dtype:
        g = g.astype(x.dtype)
    return _ce_backward(g, x, target, weight, ignore_index, reduction, label_smoothing)


@gpu_op("nn.functional.loss._smoothed_targets")
def smoothed_targets(x, target, weight, ignore_index, label_smoothing):
    """GPU twin of the CPU kernel module's smoothed_targets: the (N, C) float64 matrix Q
    with loss_i = -sum_c Q[i, c] log_softmax(x)[i, c], and each row's target weight."""
    cp = R.cp()
    N, C = x.shape
    tc = R.as_cupy(target)
    wc = _cp(weight)
    eps = float(label_smoothing)
    keep = tc != ignore_index
    ts, wt = _weights(wc, tc, keep)
    base = wc.astype(_F64) if wc is not None else cp.ones(C, dtype=_F64)
    Q = cp.where(keep[:, None], (eps / C) * base[None, :], 0.0)     # a new (N, C) array
    rows = cp.arange(N)
    Q[rows, ts] = Q[rows, ts] + (1.0 - eps) * wt
    return R.from_cupy(Q), R.from_cupy(wt)


@gpu_op("nn.functional.loss._mean_coef")
def mean_coef(g, target, ignore_index, weight):
    """loss._mean_coef on the GPU: g over the mean reduction's denominator (0 when every
    target is ignored), without a synchronisation."""
    cp = R.cp()
    tc = R.as_cupy(target)
    _, wt = _weights(_cp(weight), tc, tc != ignore_index)
    denom = wt.sum()
    factor = cp.where(denom != 0, 1.0 / cp.where(denom != 0, denom, 1.0), 0.0)
    return g * R.from_cupy(factor.astype(g.dtype))


# ---------------------------------------------------------------- nll

@gpu_op("nn.functional.loss._nll_nc")
def _nll_nc(x, target, weight, ignore_index, reduction):
    """Negative log-likelihood of (N, C) log-probabilities at (N,) int64 indices (GPU)."""
    cp = R.cp()
    xc = R.as_cupy(x)
    tc = R.as_cupy(target)
    N, C = xc.shape
    _check_targets(tc, C, ignore_index, "nll_loss")
    keep = tc != ignore_index
    ts, wt = _weights(_cp(weight), tc, keep)
    xt = xc[cp.arange(N), ts].astype(_F64)
    li = cp.where(keep, -wt * xt, 0.0)
    return _reduced(li, wt.sum(), reduction, xc.dtype)


def _nll_grad(g, x, target, weight, ignore_index, reduction):
    cp = R.cp()
    N, C = x.shape
    tc = R.as_cupy(target)
    dx = cp.zeros((N, C), dtype=x.dtype)
    if N == 0 or C == 0:
        return R.from_cupy(dx)
    keep = tc != ignore_index
    ts, wt = _weights(_cp(weight), tc, keep)
    gc = R.as_cupy(g).astype(_F64)
    if reduction == 0:
        c = gc.reshape(N)
    else:
        c = cp.broadcast_to(gc.reshape(1), (N,))
        if reduction == 1:
            c = c / wt.sum()
    vals = cp.where(keep, -wt * c, 0.0).astype(dx.dtype)
    dx[cp.arange(N), ts] = vals             # one element per row: no collisions
    return R.from_cupy(dx)


@gpu_op("nn.functional.loss._nll_backward")
def nll_backward(g, x, target, weight, ignore_index, reduction):
    """loss._nll_backward on the GPU."""
    if g.dtype != x.dtype:
        g = g.astype(x.dtype)
    return _nll_grad(g, x, target, weight, ignore_index, reduction)


# ---------------------------------------------------------------- elementwise losses

@gpu_op("nn.functional.loss._check_in_unit_interval")
def check_in_unit_interval(x, message):
    """Queue the check that every element of GPU array x lies in [0, 1]: ValueError(message)
    at the next synchronisation (binary_cross_entropy's input check)."""
    c = R.as_cupy(x)
    if c.size and _checks.checks_enabled():
        cp = R.cp()
        _checks.defer(~cp.all((c >= 0) & (c <= 1)), lambda: ValueError(message))
