"""linear and bilinear (ember.nn.functional.linear) on CUDA arrays: cuBLAS GEMMs through
ember's own dispatch (``ember.cuda._gemm.mm``).  Argument checks and their messages are the CPU's (``ember._core.nn_args.linear_error``).
The gradient rules are ember ops (matmul, transpose, sum, einsum), so they need nothing here.
"""
from ember.cuda._dispatch import gpu_op
from ember._core.nn_args import linear_error
from ember.cuda import _runtime as R
from ember.cuda._gemm import mm
from ember._core.dtypes import dtype_kind

__all__ = ["linear", "bilinear"]


@gpu_op("nn.functional.linear")
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` on CUDA (see ember.nn.functional.linear)."""
    from ember._core.array import ndarray
    if isinstance(input, ndarray) and isinstance(weight, ndarray):
        xs, ws, dt = tuple(input.shape), tuple(weight.shape), input.dtype
        if len(ws) == 2 and xs and xs[-1] == ws[1] and dt == weight.dtype and dtype_kind(dt) in "fc":
            n_out = ws[0]
            if bias is not None and (not isinstance(bias, ndarray) or bias.dtype != dt
                                     or tuple(bias.shape) not in ((n_out,), (), (1,))):
                linear_error(input, weight, bias)
            x = R.as_cupy(input)
            wt = R.as_cupy(weight).T
            out = mm(x, wt)     # leading axes folded into one GEMM's rows (see _gemm)
            if bias is not None:
                out += R.as_cupy(bias)
            return R.from_cupy(out)
    linear_error(input, weight, bias)


@gpu_op("nn.functional.bilinear")
def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1 . W_o . x2 + b_o`` on CUDA: one GEMM of x1 with W, then a row-wise
    product with x2 (see ember.nn.functional.bilinear)."""
    from ember._core.util import shape_str
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or \
            input2.shape[-1] != weight.shape[2] or input1.shape[:-1] != input2.shape[:-1]:
        raise ValueError(f"bilinear: shapes do not match: input1 {shape_str(input1.shape)}, "
                         f"input2 {shape_str(input2.shape)}, weight {shape_str(weight.shape)} "
                         f"(expected (..., in1), (..., in2), (out, in1, in2))")
    cp = R.cp()
    O, I1, I2 = weight.shape
    lead = tuple(input1.shape[:-1])
    x1 = R.as_cupy(input1).reshape(-1, I1)
    x2 = R.as_cupy(input2).reshape(-1, I2)
    w = R.as_cupy(weight)
    # t[m, o, j] = sum_i x1[m, i] W[o, i, j]
    t = mm(x1, w.transpose(1, 0, 2).reshape(I1, O * I2)).reshape(-1, O, I2)
    out = mm(t, x2[:, :, None])[:, :, 0]          # (M, O): sum_j t[m, o, j] x2[m, j]
    out = R.from_cupy(cp.ascontiguousarray(out).reshape(lead + (O,)))
    if bias is not None:
        out = out + bias
    return out
