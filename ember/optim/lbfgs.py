"""L-BFGS (PyTorch's algorithm and options), written with ember ops (no fused kernel).

The search direction comes from the two-loop recursion over the last
``history_size`` curvature pairs; the step is either ``lr`` (a fixed step, with
``min(1, 1/|g|_1) * lr`` on the very first iteration) or found by a line search
satisfying the strong Wolfe conditions (bracketing, then zooming with safeguarded
cubic interpolation; Nocedal & Wright, "Numerical Optimization", algorithms 3.5
and 3.6).  Scalars (step sizes, directional derivatives) are Python floats.
"""
import math

import ember as E
from ember.optim._options import check_options
from ember.optim.optimizer import Optimizer

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    r"""L-BFGS (``torch.optim.LBFGS``); ``step(closure)`` needs the closure.

    Args:
        params: the arrays to optimize (one group only: L-BFGS has no
            per-parameter options).
        lr (float): step length (default 1).
        max_iter (int): iterations per ``step`` (default 20).
        max_eval (int): closure evaluations per ``step`` (default
            ``max_iter * 5 // 4``).
        tolerance_grad (float): stop when ``max |g|`` falls to this (default 1e-7).
        tolerance_change (float): stop when the loss or the step changes less
            (default 1e-9).
        history_size (int): curvature pairs kept (default 100).
        line_search_fn: None (fixed step) or ``"strong_wolfe"``.

    ``closure()`` must clear the gradients, compute the loss, call
    ``backward()`` and return the loss; ``step`` returns its first value.
    The whole state (direction, history, counters) lives in
    ``state[first parameter]`` as in PyTorch, so ``state_dict()`` /
    ``load_state_dict()`` carry it.  Parameters are viewed as one flat vector:
    all must share one dtype and device.

    >>> import ember
    >>> w = ember.asarray([3.0, -2.0], requires_grad=True)
    >>> opt = ember.optim.LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 1.0) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 4) for v in w.tolist()]
    [1.0, 1.0]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        check_options(self, lr=lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        kinds = {(p.dtype, str(p.device)) for p in self._params}
        if len(kinds) != 1:
            raise TypeError(f"LBFGS: all parameters must share one dtype and device, got "
                            f"{sorted(str(k) for k in kinds)}")

    # ------------------------------------------------- the parameters as one vector
    def _flat_grad(self):
        parts = []
        for p in self._params:
            g = p.grad
            parts.append(E.zeros(p.size, dtype=p.dtype, device=p.device) if g is None
                         else E.reshape(g.detach(), (-1,)))
        return E.concatenate(parts) if len(parts) > 1 else E.array(parts[0], copy=True)

    def _add_to_params(self, t, d):
        """p += t * d (d: a flat vector), without recording."""
        offset = 0
        with E.no_grad():
            for p in self._params:
                n = p.size
                p += t * E.reshape(d[offset:offset + n], p.shape)
                offset += n

    def _clone_params(self):
        return [E.array(p.detach(), copy=True) for p in self._params]

    def _set_params(self, values):
        with E.no_grad():
            for p, v in zip(self._params, values):
                p[...] = v

    def _evaluate_along(self, closure, x, t, d):
        """Loss and flat gradient at x + t * d; the parameters are put back to x."""
        self._add_to_params(t, d)
        with E.enable_grad():
            loss = float(closure())
        flat_grad = self._flat_grad()
        self._set_params(x)
        return loss, flat_grad

    # --------------------------------------------------------------------- step
    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; returns the closure's first loss."""
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that reevaluates the model and "
                               "returns the loss")
        group = self.param_groups[0]
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with E.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(E.max(E.abs(flat_grad))) <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(E.dot(y, s))
                if ys > 1e-10:                       # keep the pair only if curvature > 0
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(E.dot(y, y))
                if "al" not in state:       # the two-loop recursion's scratch, as torch's
                    state["al"] = [None] * history_size
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, H_diag, state["al"])
            prev_flat_grad = E.array(flat_grad, copy=True)
            prev_loss = loss

            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(E.sum(E.abs(flat_grad)))) * lr
            else:
                t = lr
            gtd = float(E.dot(flat_grad, d))
            if gtd > -tolerance_change:             # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_params()

                def obj_func(step_len):
                    return self._evaluate_along(closure, x_init, step_len, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, t, d, loss, flat_grad, gtd, tolerance_change=tolerance_change)
                self._add_to_params(t, d)
                opt_cond = float(E.max(E.abs(flat_grad))) <= tolerance_grad
            else:
                self._add_to_params(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    with E.enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = float(E.max(E.abs(flat_grad))) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(E.max(E.abs(d * t))) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss


def _two_loop(flat_grad, old_dirs, old_stps, ro, H_diag, al):
    """-H g for the L-BFGS inverse-Hessian estimate H (the two-loop recursion);
    `al` (at least as long as the history) receives the first loop's coefficients."""
    q = -flat_grad
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = float(E.dot(old_stps[i], q)) * ro[i]
        q = q - al[i] * old_dirs[i]
    r = q * H_diag
    for i in range(len(old_dirs)):
        be_i = float(E.dot(old_dirs[i], r)) * ro[i]
        r = r + (al[i] - be_i) * old_stps[i]
    return r


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, slope g1) and (x2, f2, slope g2),
    clipped to `bounds` (default: the interval between x1 and x2); the bounds'
    midpoint where the cubic has no minimiser."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(obj_func, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step length along d satisfying the strong Wolfe conditions.

    Returns ``(loss, flat_grad, t, evaluations)``; `obj_func(t)` gives the loss and
    flat gradient at ``x + t d``."""
    d_norm = float(E.max(E.abs(d)))
    f_new, g_new = obj_func(t)
    evals = 1
    gtd_new = float(E.dot(g_new, d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    # phase 1: grow the step until an interval brackets an acceptable one
    while ls_iter < max_ls:
        sufficient = not (f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev))
        if sufficient and abs(gtd_new) <= -c2 * gtd:
            br, br_f, br_g, br_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if not sufficient or gtd_new >= 0:
            br = [t_prev, t]
            br_f, br_g, br_gtd = [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]
            break
        lo_step, hi_step = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                  bounds=(lo_step, hi_step))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = obj_func(t)
        evals += 1
        gtd_new = float(E.dot(g_new, d))
        ls_iter += 1
    if ls_iter == max_ls:
        br, br_f, br_g, br_gtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    # phase 2: shrink the bracket (zoom) until the strong Wolfe conditions hold
    insuf_progress = False
    low, high = (0, 1) if br_f[0] <= br_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(br[1] - br[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1])
        # keep t away from the ends of the bracket (at least 10% of its width)
        lo_b, hi_b = min(br), max(br)
        eps = 0.1 * (hi_b - lo_b)
        if min(hi_b - t, t - lo_b) < eps:
            if insuf_progress or t >= hi_b or t <= lo_b:
                t = hi_b - eps if abs(t - hi_b) < abs(t - lo_b) else lo_b + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(t)
        evals += 1
        gtd_new = float(E.dot(g_new, d))
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= br_f[low]:
            br[high], br_f[high], br_g[high], br_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if br_f[0] <= br_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[high] - br[low]) >= 0:
                br[high], br_f[high], br_g[high], br_gtd[high] = \
                    br[low], br_f[low], br_g[low], br_gtd[low]
            br[low], br_f[low], br_g[low], br_gtd[low] = t, f_new, g_new, gtd_new
    if len(br) == 1:
        low = 0
    return br_f[low], br_g[low], br[low], evals
