"""Argument checks and shape arithmetic of nn ops, shared by their one definition in
ember.nn.functional and by the GPU backend's kernels for them (ember.cuda sits under
nn, so what both need lives here, under both).  Each works on ember, NumPy or CuPy
arrays alike where it takes arrays.

>>> pool_out(8, 2, 2, 0, 1, False)
4
"""
import warnings

from ember._core.array import ndarray
from ember._core.dtypes import dtype_kind
from ember._core.util import as_array, shape_str

__all__ = ["softmax_dim", "float_input", "linear_error", "pool_out", "qkv_views",
           "merged_view", "core_dims"]


def softmax_dim(opname, ndim, dim, axis, stacklevel):
    """The softmax axis as a non-negative int; dim=None picks PyTorch's legacy default."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{opname}: pass either dim= or axis=, not both")
        dim = axis
    if dim is None:
        warnings.warn(f"Implicit dimension choice for {opname} has been deprecated. "
                      f"Change the call to include dim=X as an argument.",
                      UserWarning, stacklevel=stacklevel)
        dim = 0 if ndim in (0, 1, 3) else 1
    try:
        d = int(dim)
    except TypeError:
        raise TypeError(f"{opname}: dim must be an integer, got {type(dim).__name__}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"{opname}: dimension out of range (expected to be in range of "
                         f"[{-n}, {n - 1}], but got {d})")
    return d % n


def float_input(opname, input, dtype):
    """input as an ember array in `dtype` (if given), which must be floating-point."""
    x = input if type(input) is ndarray else as_array(input)
    if dtype is not None:
        x = x.astype(dtype)
    if dtype_kind(x.dtype) != "f":
        raise TypeError(f"{opname}: expected a floating-point input, got dtype {x.dtype} "
                        f"(pass dtype= to compute in a floating-point type)")
    return x


def linear_error(input, weight, bias):
    if not isinstance(input, ndarray) or not isinstance(weight, ndarray):
        raise TypeError(f"linear: input and weight must be ember arrays, got "
                        f"{type(input).__name__} and {type(weight).__name__}")
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-d (out_features, in_features), "
                         f"got shape {shape_str(weight.shape)}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: input shape {shape_str(input.shape)} and weight shape "
                         f"{shape_str(weight.shape)} do not match: the last axis of the input "
                         f"must equal weight.shape[-1] (in_features)")
    if bias is not None and isinstance(bias, ndarray) and weight.ndim == 2 and \
            bias.shape not in ((weight.shape[0],), (), (1,)):
        raise ValueError(f"linear: bias shape {shape_str(bias.shape)} does not match "
                         f"out_features={weight.shape[0]}")
    if input.dtype != weight.dtype or (bias is not None and getattr(bias, "dtype", None)
                                        not in (None, weight.dtype)):
        raise TypeError(f"linear: dtypes must match, got input {input.dtype}, weight "
                        f"{weight.dtype}" + (f", bias {bias.dtype}" if bias is not None else "")
                        + " (convert with .astype() or module.to(dtype))")
    raise ValueError(f"linear: unsupported input shape {shape_str(input.shape)} / weight shape "
                     f"{shape_str(weight.shape)}")


def pool_out(n, k, s, p, d, ceil):
    """PyTorch's pooling output size."""
    o = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def qkv_views(a, n, h, d, bf):
    """NumPy (N, L, 3E) (bf) or (L, N, 3E) array -> q, k, v views (N, H, L, D)."""
    if bf:
        a5 = a.reshape(n, -1, 3, h, d)
        return tuple(a5[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    a5 = a.reshape(-1, n, 3, h, d)
    return tuple(a5[:, :, i].transpose(1, 2, 0, 3) for i in range(3))


def merged_view(a, n, h, d, bf):
    """NumPy (N, L, E) (bf) or (L, N, E) array -> its (N, H, L, D) view."""
    if bf:
        return a.reshape(n, -1, h, d).transpose(0, 2, 1, 3)
    return a.reshape(-1, n, h, d).transpose(1, 2, 0, 3)


def core_dims(qkv, num_heads, bf):
    n = qkv.shape[0] if bf else qkv.shape[1]
    e = qkv.shape[2] // 3
    return n, e, e // num_heads
