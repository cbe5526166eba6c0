"""Linear algebra in the main namespace: matmul (BLAS), dot, tensordot, einsum...

GEMM runs in the BLAS that NumPy links: the result is allocated by ember and
NumPy's matmul writes into it through a zero-copy view, so ``a @ b`` costs
what NumPy's does and the memory comes from ember's allocator.
"""
import builtins
import operator

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember._kernels.cpu.gemm import matmul as _gemm, one_blas_thread
from ember._api._util import as_array, numpy_view, empty_raw, normalize_axis, shape_str
from ember._core.dtypes import dtype_kind, is_half_dtype
from ember._core.public import ops as _public_ops

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "vecdot",
           "matrix_transpose", "trace", "diagonal", "kron", "cross"]


def _promote(a, b):
    ember = _public_ops()
    dt = ember.result_type(a, b)
    return (a if a.dtype == dt else a.astype(dt)), (b if b.dtype == dt else b.astype(dt))


def matmul(x1, x2, /, *, out=None):
    """Matrix product with NumPy's rules: batched over leading axes (broadcast),
    1-d operands promoted to matrices and the added axis removed.

    >>> import ember
    >>> (ember.ones((2, 3)) @ ember.ones((3, 4))).shape
    (2, 4)
    """
    if out is None and isinstance(x1, ndarray) and isinstance(x2, ndarray) and x1.ndim == 2 \
            and x2.ndim == 2 and x1.shape[1] == x2.shape[0] and x1.dtype == x2.dtype \
            and dtype_kind(x1.dtype) in "fc":
        # the common 2-d case: straight to BLAS
        res = empty_raw((x1.shape[0], x2.shape[1]), x1.dtype)
        _gemm(numpy_view(x1), numpy_view(x2), numpy_view(res))
        return res
    a, b = as_array(x1), as_array(x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: input operands must not be scalars (0-d), got shapes "
                         f"{shape_str(a.shape)} {shape_str(b.shape)}")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if ka != kb:
        raise ValueError(f"matmul: input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {kb} is different from {ka}); shapes {shape_str(a.shape)} "
                         f"{shape_str(b.shape)}")
    a, b = _promote(a, b)
    batch_a = a.shape[:-2] if a.ndim >= 2 else ()
    batch_b = b.shape[:-2] if b.ndim >= 2 else ()
    try:
        batch = np.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        raise ValueError(f"matmul: batch dimensions could not be broadcast together, shapes "
                         f"{shape_str(a.shape)} {shape_str(b.shape)}") from None
    shape = batch + ((a.shape[-2],) if a.ndim >= 2 else ()) + ((b.shape[-1],) if b.ndim >= 2 else ())
    if out is None:
        out = empty_raw(shape, a.dtype)
    elif out.shape != shape:
        raise ValueError(f"matmul: output array has shape {shape_str(out.shape)}, expected {shape_str(shape)}")
    if dtype_kind(a.dtype) == "b":
        np.copyto(numpy_view(out), np.matmul(numpy_view(a), numpy_view(b)))
    elif a.ndim >= 2 and b.ndim >= 2:
        _gemm(numpy_view(a), numpy_view(b), numpy_view(out))
    else:
        with one_blas_thread:       # a matrix-vector product: BLAS gemv on this thread
            np.matmul(numpy_view(a), numpy_view(b), out=numpy_view(out))
    return out


def dot(a, b, out=None):
    """NumPy's dot: inner product of vectors, matrix product of 2-d arrays,
    sum product over the last axis of a and second-to-last of b in general.

    >>> import ember
    >>> ember.dot(ember.asarray([1, 2]), ember.asarray([3, 4])).item()
    11
    """
    a, b = as_array(a), as_array(b)
    if out is not None:
        # NumPy's dot takes out= only as the exact result: its dtype, shape, C order
        res = dot(a, b)
        if not isinstance(out, ndarray) or out.dtype != res.dtype or out.shape != res.shape \
                or not out.is_contiguous():
            raise ValueError(f"dot: output array is not acceptable (it must have the result's "
                             f"dtype {res.dtype} and shape {shape_str(res.shape)} and be "
                             f"C-contiguous)")
        out[...] = res
        return out
    if a.ndim <= 2 and b.ndim <= 2 and a.ndim and b.ndim:
        return matmul(a, b)
    a, b = _promote(a, b)
    try:
        with one_blas_thread:
            res = np.dot(numpy_view(a), numpy_view(b))
    except ValueError as e:
        raise ValueError(f"dot: {e} (shapes {shape_str(a.shape)} {shape_str(b.shape)})") from None
    return _to_ember(res)


def _to_ember(res, out=None):
    res = np.asarray(res)
    if out is None:
        o = empty_raw(res.shape, res.dtype)
    else:
        o = out
    numpy_view(o)[...] = res
    return o


def vdot(a, b, /):
    """Dot product of the flattened arrays, conjugating the first.

    >>> import ember
    >>> ember.vdot(ember.asarray([1j]), ember.asarray([1j])).item()
    (1+0j)
    """
    a, b = _promote(as_array(a), as_array(b))
    with one_blas_thread:
        return _to_ember(np.vdot(numpy_view(a), numpy_view(b)))


def inner(a, b, /):
    """Inner product over the last axes.

    >>> import ember
    >>> ember.inner(ember.ones(3), ember.ones(3)).item()
    3.0
    """
    a, b = _promote(as_array(a), as_array(b))
    with one_blas_thread:
        return _to_ember(np.inner(numpy_view(a), numpy_view(b)))


def outer(x1, x2, /):
    """Outer product of two vectors (flattened).

    >>> import ember
    >>> ember.outer(ember.asarray([1, 2]), ember.asarray([3, 4])).tolist()
    [[3, 4], [6, 8]]
    """
    a, b = as_array(x1), as_array(x2)
    a = a.reshape(-1, 1)
    b = b.reshape(1, -1)
    return a * b


def tensordot(x1, x2, /, *, axes=2):
    """Sum products over the given axes (an int n: last n of x1 with first n of x2).

    >>> import ember
    >>> ember.tensordot(ember.ones((2, 3)), ember.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    a, b = _promote(as_array(x1), as_array(x2))
    try:
        with one_blas_thread:
            res = np.tensordot(numpy_view(a), numpy_view(b), axes=axes)
    except (ValueError, IndexError) as e:
        raise ValueError(f"tensordot: {e} (shapes {shape_str(a.shape)} {shape_str(b.shape)})") from None
    return _to_ember(res)


def einsum(subscripts, *operands, out=None, dtype=None, optimize=True):
    """Einstein summation (NumPy's subscripts; contractions go to BLAS with optimize=True).

    >>> import ember
    >>> ember.einsum("ij,jk->ik", ember.ones((2, 3)), ember.ones((3, 2))).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    if not isinstance(subscripts, str):
        # interleaved form: einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])
        args = (subscripts,) + operands
        n_pairs = len(args) // 2          # an odd count ends with the output sublist
        ops = []
        for i in range(n_pairs):
            ops += [numpy_view(as_array(args[2 * i])), list(args[2 * i + 1])]
        if len(args) % 2:
            ops.append(list(args[-1]))
    else:
        ops = [subscripts] + [numpy_view(as_array(o)) for o in operands]
    arrays = [o for o in ops if isinstance(o, np.ndarray)]
    res_dt = None
    if dtype is None and builtins.any(is_half_dtype(a.dtype) for a in arrays):
        # 16-bit floats contract in float32 (BLAS) and round once, as matmul does
        ember = _public_ops()
        res_dt = ember.result_type(*[a.dtype for a in arrays])
        ops = [o.astype(np.float32) if isinstance(o, np.ndarray) and is_half_dtype(o.dtype) else o
               for o in ops]
    try:
        with one_blas_thread:       # optimize=True contracts through BLAS
            res = np.einsum(*ops, dtype=dtype, optimize=optimize)
    except ValueError as e:
        raise ValueError(f"einsum: {e}") from None
    if res_dt is not None:
        res = np.asarray(res).astype(res_dt)
    return _to_ember(res, out)


def vecdot(x1, x2, /, *, axis=-1):
    """Dot product of vectors along `axis` (conjugating x1), broadcasting the rest.

    >>> import ember
    >>> ember.vecdot(ember.ones((2, 3)), ember.ones(3)).tolist()
    [3.0, 3.0]
    """
    ember = _public_ops()
    a, b = _promote(as_array(x1), as_array(x2))
    nd = builtins.max(a.ndim, b.ndim)
    if not -nd <= axis < 0:
        axis = normalize_axis(axis, nd, "vecdot") - nd
    if a.shape[axis] != b.shape[axis] if (a.ndim >= -axis and b.ndim >= -axis) else True:
        raise ValueError(f"vecdot: the sizes of axis {axis} must match, got shapes "
                         f"{shape_str(a.shape)} {shape_str(b.shape)}")
    if dtype_kind(a.dtype) == "c":
        a = ember.conj(a)
    # the promoted dtype, as the standard and NumPy's vecdot (sum alone widens small ints)
    return ember.sum(a * b, axis=axis, dtype=a.dtype)


# built from ember ops: the GPU dispatch runs this same body on GPU arrays
vecdot.device_generic = True


def matrix_transpose(x, /):
    """Swap the last two axes (a view).

    >>> import ember
    >>> ember.matrix_transpose(ember.zeros((5, 2, 3))).shape
    (5, 3, 2)
    """
    x = as_array(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: input must have at least 2 dimensions, got shape {x.shape}")
    return x.mT


def diagonal(x, /, offset=0, axis1=0, axis2=1):
    """The diagonal along axis1/axis2 (a view; NumPy's defaults axis1=0, axis2=1).

    >>> import ember
    >>> ember.diagonal(ember.arange(9).reshape(3, 3)).tolist()
    [0, 4, 8]
    """
    x = as_array(x)
    offset = operator.index(offset)
    if not -2**31 <= offset < 2**31:      # NumPy takes the offset as a C int
        raise OverflowError(f"diagonal: offset {offset} does not fit in a C int")
    if x.ndim < 2:
        raise ValueError(f"diagonal: input must have at least 2 dimensions, got shape {x.shape}")
    a1 = normalize_axis(axis1, x.ndim, "diagonal")
    a2 = normalize_axis(axis2, x.ndim, "diagonal")
    if a1 == a2:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    n1, n2 = x.shape[a1], x.shape[a2]
    s1, s2 = x.strides[a1], x.strides[a2]
    off = _array._storage_offset_bytes(x)
    if offset >= 0:
        length = builtins.max(0, builtins.min(n1, n2 - offset))
        if length:
            off += offset * s2
    else:
        length = builtins.max(0, builtins.min(n1 + offset, n2))
        if length:
            off -= offset * s1
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    shape = tuple(x.shape[i] for i in rest) + (length,)
    strides = tuple(x.strides[i] for i in rest) + (s1 + s2,)
    return _array._as_strided(x, shape, strides, off)


def trace(x, /, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along a diagonal (NumPy's axis defaults).

    >>> import ember
    >>> ember.trace(ember.eye(3)).item()
    3.0
    """
    ember = _public_ops()
    d = diagonal(x, offset=offset, axis1=axis1, axis2=axis2)
    return ember.sum(d, axis=-1, dtype=dtype, out=out)


def kron(a, b):
    """Kronecker product.

    >>> import ember
    >>> ember.kron(ember.eye(2), ember.ones((1, 2))).shape
    (2, 4)
    """
    a, b = _promote(as_array(a), as_array(b))
    return _to_ember(np.kron(numpy_view(a), numpy_view(b)))


def cross(x1, x2, /, *, axis=-1, dim=None):
    """Cross product of 3-element vectors along `axis` (Array API semantics;
    ``dim=`` is PyTorch's spelling of ``axis=``).

    >>> import ember
    >>> ember.cross(ember.asarray([1.0, 0, 0]), ember.asarray([0.0, 1, 0])).tolist()
    [0.0, 0.0, 1.0]
    >>> ember.linalg.cross(ember.eye(3), ember.ones((3, 3)), dim=0).tolist()[0]
    [0.0, 1.0, -1.0]
    """
    if dim is not None:
        axis = dim
    a, b = _promote(as_array(x1), as_array(x2))
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ValueError(f"cross: vectors along axis {axis} must have 3 elements, got shapes "
                         f"{shape_str(a.shape)} {shape_str(b.shape)}")
    return _to_ember(np.cross(numpy_view(a), numpy_view(b), axis=axis))
