"""linear and bilinear: affine maps of the last axis (PyTorch's F.linear / F.bilinear).

>>> import ember
>>> import ember.nn.functional as F
>>> F.linear(ember.ones((2, 3)), ember.ones((4, 3)), ember.zeros(4)).tolist()
[[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]
"""

import numpy as np

from ember._core.array import ndarray
from ember._api._util import numpy_view, empty_raw, shape_str
from ember.autograd.registry import defop
from ember._kernels.cpu.gemm import matmul as _gemm
from ember._core.dtypes import dtype_kind
from ember._core.nn_args import linear_error as _linear_error
from ember._core.array import _is_grad_enabled as _grad_on
from ember._core.dtypes import _code as _dtype_code
from ember._kernels.cpu.reduce import reduce as _reduce

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

__all__ = ["linear", "bilinear"]


def _linear_grad(g, res, input, weight, bias=None):
    if input.ndim >= 2 and not _grad_on():
        out = _linear_grad_host(g, input, weight, bias)
        if out is not None:
            return out
    gi = gw = gb = None
    if input.ndim == 2:
        g2, x2 = g, input
    else:
        g2 = g.reshape((-1, g.shape[-1]))
    if input.requires_grad:
        gi = g @ weight
    if weight.requires_grad:
        if input.ndim != 2:
            x2 = input.reshape((-1, input.shape[-1]))
        gw = g2.T @ x2
    if bias is not None and bias.requires_grad:
        gb = g2.sum(axis=0)
    return gi, gw, gb


def _linear_grad_host(g, input, weight, bias):
    """The three gradients of a host float32/float64 linear layer straight from the
    kernels (the GEMMs and the column sum that ``@`` and ``sum(axis=0)`` run, so the
    numbers are the same) when the backward is not itself recorded; None otherwise.
    Inputs of more than 2 dimensions qualify when they and g are C-contiguous: their
    rows are then one 2-d product (not one product per leading index)."""
    dt = input.dtype
    if g.dtype != dt or weight.dtype != dt or (dt != _F32 and dt != _F64) \
            or g.ndim != input.ndim or input.is_cuda or g.is_cuda or weight.is_cuda \
            or (bias is not None and bias.is_cuda):
        return None
    if g.ndim > 2 and not (g.is_contiguous() and input.is_contiguous()):
        return None
    gi, gw = _host_gemm_grads(g, input, weight)
    gb = None
    if bias is not None and bias.requires_grad:
        gb = _reduce(g, 0, tuple(range(g.ndim - 1)), _dtype_code(dt))
    return gi, gw, gb


def _host_gemm_grads(g, input, weight):
    """(input's gradient, weight's gradient) of a host linear layer, each None unless its
    array requires grad, from the GEMM kernel into fresh arrays: ``g @ weight`` and
    ``g.T @ input`` over the rows.  g (..., out) and input (..., in) of one float dtype,
    both C-contiguous when more than 2-d."""
    dt = input.dtype
    gv, xv = numpy_view(g), numpy_view(input)
    if g.ndim != 2:
        rows = int(np.prod(g.shape[:-1]))
        gv = gv.reshape(rows, g.shape[-1])
        xv = xv.reshape(rows, input.shape[-1])
    gi = gw = None
    if input.requires_grad:
        gi = empty_raw(input.shape, dt)
        giv = numpy_view(gi)
        _gemm(gv, numpy_view(weight), giv if g.ndim == 2 else giv.reshape(xv.shape))
    if weight.requires_grad:
        gw = empty_raw(weight.shape, dt)
        _gemm(gv.T, xv, numpy_view(gw))
    return gi, gw


@defop("nn.functional.linear", grad=_linear_grad, save_args=True)
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` over the last axis: input (..., in_features),
    weight (out_features, in_features), bias (out_features,) or None.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.ones((5, 7, 3))
    >>> F.linear(x, ember.ones((2, 3))).shape
    (5, 7, 2)
    """
    if isinstance(input, ndarray) and isinstance(weight, ndarray):
        xs, ws, dt = input.shape, weight.shape, input.dtype
        if len(ws) == 2 and xs and xs[-1] == ws[1] and dt == weight.dtype and dtype_kind(dt) in "fc":
            n_out = ws[0]
            wt = numpy_view(weight).T
            out = empty_raw(xs[:-1] + (n_out,), dt)
            xv, ov = numpy_view(input), numpy_view(out)
            if len(xs) > 2 and input.is_contiguous():      # the rows as one 2-d product
                xv, ov = xv.reshape(-1, xs[-1]), ov.reshape(-1, n_out)
            if xv.ndim == 2 and dt == _F32 and isinstance(bias, ndarray) and bias.dtype == dt \
                    and bias.shape == (n_out,) and not (input.is_cuda or bias.is_cuda):
                # the bias added as the GEMM stores its result (the same numbers)
                _gemm(xv, wt, ov, bias=numpy_view(bias))
                return out
            _gemm(xv, wt, ov)
            if bias is not None:
                if not isinstance(bias, ndarray) or bias.dtype != dt or \
                        bias.shape not in ((n_out,), (), (1,)):
                    _linear_error(input, weight, bias)
                out += bias         # ember's in-place add: far cheaper than a NumPy ufunc call
            return out
    _linear_error(input, weight, bias)


def _bilinear_grad(g, res, input1, input2, weight, bias=None):
    import ember
    g1 = g2 = gw = gb = None
    if input1.requires_grad:
        g1 = ember.einsum("...o,oij,...j->...i", g, weight, input2)
    if input2.requires_grad:
        g2 = ember.einsum("...o,oij,...i->...j", g, weight, input1)
    if weight.requires_grad:
        # batch axes flattened first: summing "..." away in the output is NumPy-only
        gw = ember.einsum("no,ni,nj->oij", g.reshape((-1, g.shape[-1])),
                          input1.reshape((-1, input1.shape[-1])),
                          input2.reshape((-1, input2.shape[-1])))
    if bias is not None and bias.requires_grad:
        gb = g.reshape((-1, g.shape[-1])).sum(axis=0)
    return g1, g2, gw, gb


@defop("nn.functional.bilinear", grad=_bilinear_grad, save_args=True)
def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1 . W_o . x2 + b_o``: input1 (..., in1), input2 (..., in2),
    weight (out, in1, in2), bias (out,).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.bilinear(ember.ones((4, 2)), ember.ones((4, 3)), ember.ones((5, 2, 3))).shape
    (4, 5)
    """
    import ember
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or \
            input2.shape[-1] != weight.shape[2] or input1.shape[:-1] != input2.shape[:-1]:
        raise ValueError(f"bilinear: shapes do not match: input1 {shape_str(input1.shape)}, "
                         f"input2 {shape_str(input2.shape)}, weight {shape_str(weight.shape)} "
                         f"(expected (..., in1), (..., in2), (out, in1, in2))")
    out = ember.einsum("...i,oij,...j->...o", input1, weight, input2)
    if bias is not None:
        out = out + bias
    return out
