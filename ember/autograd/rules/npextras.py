"""Gradient rule of ``interp`` (NumPy's piecewise-linear interpolation).

d interp / d x is the slope of the segment x falls in (0 outside [xp[0], xp[-1]],
where the result is constant; at a knot, the segment to its right); d interp / d fp
gives each output's weight to the two knots around it (1 to fp[0] / fp[-1] beyond
the ends when left / right are not given).  Knot positions xp, complex fp with x
tracked, and ``period=`` have no gradient rule and refuse rather than drop one.
"""
import numpy as np

import ember as E
from ember.autograd.registry import defgrad
from ember._core.dtypes import dtype_kind


def _values(a):
    if isinstance(a, E.ndarray):
        return np.asarray(a.detach().cpu(), dtype=np.complex128 if dtype_kind(a.dtype) == "c"
                          else np.float64)
    return np.asarray(a, dtype=np.float64)


@defgrad("interp")
def _(g, res, x, xp, fp, left=None, right=None, period=None):
    tracked = [getattr(a, "requires_grad", False) for a in (x, xp, fp)]
    if tracked[1]:
        raise RuntimeError("interp: no gradient with respect to the knot positions xp; "
                           "detach xp")
    if period is not None:
        raise RuntimeError("interp: no gradient with period=; call it on detached inputs")
    xv, xpv, fpv = _values(x), _values(xp), _values(fp)
    n = xpv.size
    i = np.clip(np.searchsorted(xpv, xv, side="right") - 1, 0, max(n - 2, 0))
    inside = (xv >= xpv[0]) & (xv <= xpv[-1]) if n else np.zeros(xv.shape, bool)
    gx = gfp = None
    if tracked[0]:
        if dtype_kind(g.dtype) == "c" or np.iscomplexobj(fpv):
            raise RuntimeError("interp: no gradient with respect to x for complex fp")
        if n > 1:
            slope = (fpv[i + 1] - fpv[i]) / (xpv[i + 1] - xpv[i])
            slope = np.where(inside & (xv < xpv[-1]), slope, 0.0)
        else:
            slope = np.zeros(xv.shape)
        gx = g * E.asarray(slope.astype(np.float64), dtype=g.dtype, device=g.device)
    if tracked[2]:
        if n > 1:
            t = np.clip((xv - xpv[i]) / (xpv[i + 1] - xpv[i]), 0.0, 1.0)
        else:
            t = np.zeros(xv.shape)
        w_lo, w_hi = 1.0 - t, t
        below, above = xv < xpv[0], xv > xpv[-1]
        w_lo = np.where(below, 0.0 if left is not None else 1.0, np.where(above, 0.0, w_lo))
        w_hi = np.where(above, 0.0 if right is not None else 1.0, np.where(below, 0.0, w_hi))
        lo = E.asarray(w_lo.reshape(-1), dtype=g.dtype, device=g.device)
        hi = E.asarray(w_hi.reshape(-1), dtype=g.dtype, device=g.device)
        gf = E.reshape(g, (-1,))
        gfp = E.zeros((n,), dtype=g.dtype, device=g.device)
        idx = i.reshape(-1)
        gfp = E.index_add(gfp, 0, idx, gf * lo)
        gfp = E.index_add(gfp, 0, np.minimum(idx + 1, n - 1), gf * hi)
    return gx, None, gfp
