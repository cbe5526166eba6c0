"""ember.linalg: the Array API linear-algebra extension.

Factorisations run LAPACK through NumPy on zero-copy views of ember memory (for
GPU arrays, the same code runs cuSOLVER through CuPy's linalg on views of device
memory: ``_view`` / ``_call`` / ``_ember`` pick the side); results are ember arrays.
Integer inputs are computed in the default float dtype (float32).  Singular
matrices raise ``LinAlgError``.

>>> import ember
>>> a = ember.asarray([[2.0, 0.0], [0.0, 4.0]])
>>> ember.linalg.inv(a).tolist()
[[0.5, 0.0], [0.0, 0.25]]
"""
from collections import namedtuple

import functools
import operator
import sys

import numpy as np

from ember._core.dtypes import default_float_dtype
from ember._api._util import (as_array, numpy_view, empty_raw, shape_str, norm_axis_args,
                              matrix_axes)
from ember._api.linalg_ops import (matmul, tensordot, vecdot, matrix_transpose,
                                   trace as _trace, outer as _outer, cross)
from ember._core.dtypes import dtype_kind, is_half_dtype
from ember._kernels.cpu.gemm import one_blas_thread

__all__ = ["norm", "vector_norm", "matrix_norm", "inv", "solve", "det", "slogdet", "cholesky",
           "qr", "svd", "svdvals", "eigh", "eigvalsh", "eig", "eigvals", "pinv", "matrix_rank",
           "matrix_power", "cross", "lstsq", "outer", "tensordot", "vecdot", "matmul",
           "diagonal", "trace", "matrix_transpose", "LinAlgError", "multi_dot", "cond"]

LinAlgError = np.linalg.LinAlgError

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
LstsqResult = namedtuple("LstsqResult", ["solution", "residuals", "rank", "singular_values"])


def _real_dtype(dt):
    """The real floating dtype of dt (complex64 -> float32; floats, bfloat16 included, stay)."""
    return np.dtype(np.float32) if dt == np.complex64 else (
        np.dtype(np.float64) if dt == np.complex128 else dt)


def _view(x):
    """A zero-copy view of ember array x: NumPy's on the host, CuPy's on a GPU."""
    if x.is_cuda:
        # not a dispatch (the GPU dispatch chose this body: device_generic below), a view
        from ember.cuda import _runtime
        return _runtime.as_cupy(x)
    return numpy_view(x)


def _on_gpu(v):
    """Whether v is a CuPy array (CuPy is imported once a GPU array exists)."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(v, cupy.ndarray)


def _xp(v):
    """The array module of view v: NumPy, or CuPy for a GPU view."""
    return sys.modules["cupy"] if _on_gpu(v) else np


def _lin(v):
    return _xp(v).linalg


def _float_view(x, opname, min_ndim=2, square=False):
    x = as_array(x)
    if dtype_kind(x.dtype) in "biu":
        x = x.astype(default_float_dtype())
    if is_half_dtype(x.dtype):
        x = x.astype(np.float32)
    if x.ndim < min_ndim:
        raise ValueError(f"{opname}: input must have at least {min_ndim} dimensions, got shape "
                         f"{shape_str(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{opname}: last two dimensions must be square, got shape {shape_str(x.shape)}")
    return x, _view(x)


def _ember(res, dtype=None):
    if _on_gpu(res):
        # a CuPy result stays on its GPU, wrapped without a copy (data, not a dispatch)
        from ember.cuda import _runtime
        if dtype is not None and res.dtype != dtype:
            res = res.astype(dtype)
        return _runtime.from_cupy(res)
    res = np.asarray(res)
    if dtype is not None and res.dtype != dtype:
        res = res.astype(dtype)
    out = empty_raw(res.shape, res.dtype)
    numpy_view(out)[...] = res
    return out


# the factorisations whose failure LAPACK reports as LinAlgError on the host
_RAISES_ON_SINGULAR = frozenset(("inv", "solve", "cholesky"))


def _call(opname, fn_name, *args, **kwargs):
    """numpy.linalg.<fn_name>(*args), or cupy.linalg's for a GPU view, with LAPACK's
    errors named after `opname`."""
    fn = getattr(_lin(args[0]), fn_name, None)
    if fn is None:
        raise NotImplementedError(f"linalg.{opname} is not available for CUDA arrays in "
                                  f"this CuPy; compute it on the host (x.cpu())")
    try:
        if opname in _RAISES_ON_SINGULAR and _on_gpu(args[0]):
            # CuPy ignores cuSOLVER's failure flags by default (a singular matrix would give
            # NaNs silently); raising reads them, a synchronisation, as in PyTorch
            import cupyx
            with cupyx.errstate(linalg="raise"):
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)
    except LinAlgError as e:
        raise LinAlgError(f"{opname}: {e}") from None


def inv(x, /):
    """Inverse of each square matrix in the stack.

    >>> import ember
    >>> ember.linalg.inv(ember.eye(2) * 2).tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    x, v = _float_view(x, "inv", square=True)
    return _ember(_call("inv", "inv", v), x.dtype)


def solve(x1, x2, /):
    """Solve ``x1 @ y = x2`` (x2 a vector only when 1-d, Array API 2024.12 rule).

    >>> import ember
    >>> ember.linalg.solve(ember.eye(2) * 2, ember.asarray([2.0, 4.0])).tolist()
    [1.0, 2.0]
    """
    a, av = _float_view(x1, "solve", square=True)
    b = as_array(x2)
    if dtype_kind(b.dtype) in "biu":
        b = b.astype(a.dtype)
    bv = _view(b)
    if b.ndim == 1:
        if b.shape[0] != a.shape[-1]:
            raise ValueError(f"solve: x2 has {b.shape[0]} rows, x1 has shape {shape_str(a.shape)}")
        res = _call("solve", "solve", av, bv[..., None])[..., 0]
    else:
        if b.shape[-2] != a.shape[-1]:
            raise ValueError(f"solve: shapes {shape_str(a.shape)} and {shape_str(b.shape)} are not "
                             f"compatible (x2.shape[-2] must equal x1.shape[-1])")
        res = _call("solve", "solve", av, bv)
    return _ember(res, np.result_type(a.dtype, b.dtype))


def det(x, /):
    """Determinant of each square matrix.

    >>> import ember
    >>> ember.linalg.det(ember.asarray([[1.0, 2.0], [3.0, 4.0]])).item()
    -2.0
    """
    x, v = _float_view(x, "det", square=True)
    return _ember(_call("det", "det", v), x.dtype)


def slogdet(x, /):
    """Sign and log-absolute-determinant, as ``(sign, logabsdet)``.

    >>> import ember
    >>> ember.linalg.slogdet(ember.eye(2) * 3).sign.item()
    1.0
    """
    x, v = _float_view(x, "slogdet", square=True)
    s, l = _call("slogdet", "slogdet", v)
    return SlogdetResult(_ember(s, x.dtype), _ember(l, _real_dtype(x.dtype)))


def cholesky(x, /, *, upper=False):
    """Cholesky factor L (``x = L @ L^H``), or U with ``upper=True``.

    >>> import ember
    >>> ember.linalg.cholesky(ember.eye(2) * 4).tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """
    x, v = _float_view(x, "cholesky", square=True)
    L = _call("cholesky", "cholesky", v)
    if upper:
        L = _xp(L).conj(_xp(L).swapaxes(L, -1, -2))
    return _ember(L, x.dtype)


def qr(x, /, *, mode="reduced"):
    """QR factorisation (``mode`` 'reduced' or 'complete').

    >>> import ember
    >>> q, r = ember.linalg.qr(ember.eye(2)); q.shape, r.shape
    ((2, 2), (2, 2))
    """
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    x, v = _float_view(x, "qr")
    q, r = _call("qr", "qr", v, mode=mode)
    return QRResult(_ember(q, x.dtype), _ember(r, x.dtype))


def outer(x1, x2, /):
    """The outer product of two 1-d arrays (the Array API's ``linalg.outer``, which
    unlike ``ember.outer`` does not flatten its inputs).

    >>> import ember
    >>> ember.linalg.outer(ember.asarray([1, 2]), ember.asarray([3, 4])).tolist()
    [[3, 4], [6, 8]]
    """
    a, b = as_array(x1), as_array(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"linalg.outer: input arrays must be one-dimensional, got shapes "
                         f"{a.shape} and {b.shape}")
    return _outer(a, b)


def svd(x, /, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular value decomposition ``x = U @ diag(S) @ Vh``.

    ``compute_uv=False`` returns the singular values alone, as NumPy's ``svd``
    does (the same as ``svdvals``); ``hermitian`` is NumPy's keyword (accepted,
    the general algorithm is used).

    >>> import ember
    >>> ember.linalg.svd(ember.eye(3)).S.tolist()
    [1.0, 1.0, 1.0]
    >>> ember.linalg.svd(ember.eye(2) * 3, compute_uv=False).tolist()
    [3.0, 3.0]
    """
    if hermitian:
        xa = as_array(x)
        if xa.ndim < 2 or xa.shape[-1] != xa.shape[-2]:
            raise LinAlgError(f"svd: hermitian=True needs square matrices, got shape {xa.shape}")
    if not compute_uv:
        return svdvals(x)
    x, v = _float_view(x, "svd")
    u, s, vh = _call("svd", "svd", v, full_matrices=full_matrices)
    return SVDResult(_ember(u, x.dtype), _ember(s, _real_dtype(x.dtype)), _ember(vh, x.dtype))


def svdvals(x, /):
    """Singular values, in descending order.

    >>> import ember
    >>> ember.linalg.svdvals(ember.eye(2) * 3).tolist()
    [3.0, 3.0]
    """
    x, v = _float_view(x, "svdvals")
    return _ember(_call("svdvals", "svd", v, compute_uv=False), _real_dtype(x.dtype))


def eigh(x, /, *, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices.

    >>> import ember
    >>> ember.linalg.eigh(ember.eye(2) * 2).eigenvalues.tolist()
    [2.0, 2.0]
    """
    x, v = _float_view(x, "eigh", square=True)
    w, vec = _call("eigh", "eigh", v, UPLO=UPLO)
    return EighResult(_ember(w, _real_dtype(x.dtype)), _ember(vec, x.dtype))


def eigvalsh(x, /, *, UPLO="L"):
    """Eigenvalues (ascending) of Hermitian matrices.

    >>> import ember
    >>> ember.linalg.eigvalsh(ember.eye(2)).tolist()
    [1.0, 1.0]
    """
    x, v = _float_view(x, "eigvalsh", square=True)
    return _ember(_call("eigvalsh", "eigvalsh", v, UPLO=UPLO), _real_dtype(x.dtype))


def eig(x, /):
    """Eigenvalues and right eigenvectors of general square matrices (complex when needed).

    >>> import ember
    >>> ember.linalg.eig(ember.eye(2)).eigenvalues.tolist()
    [1.0, 1.0]
    """
    x, v = _float_view(x, "eig", square=True)
    w, vec = _call("eig", "eig", v)
    return EigResult(_ember(w), _ember(vec))


def eigvals(x, /):
    """Eigenvalues of general square matrices.

    >>> import ember
    >>> ember.linalg.eigvals(ember.eye(2) * 2).tolist()
    [2.0, 2.0]
    """
    x, v = _float_view(x, "eigvals", square=True)
    return _ember(_call("eigvals", "eigvals", v))


def pinv(x, /, rcond=None, hermitian=False, *, rtol=np._NoValue):
    """Moore-Penrose pseudo-inverse.

    Singular values below ``rtol`` times the largest are treated as zero (default:
    ``max(M, N) * eps``, the Array API's and PyTorch's; NumPy's own default is
    1e-15).  ``rcond`` (NumPy's and PyTorch's second positional argument) is the
    same tolerance under its older name; give one of the two.

    >>> import ember
    >>> ember.linalg.pinv(ember.eye(2) * 2).tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    >>> ember.linalg.pinv(ember.eye(2) * 2, 1e-10, True).tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    rtol = _pinv_rtol(rcond, rtol)
    x, v = _float_view(x, "pinv")
    if rtol is None:                # the Array API's (and PyTorch's) default, not NumPy's 1e-15
        rtol = max(x.shape[-2:]) * float(np.finfo(_real_dtype(x.dtype)).eps)
    if _on_gpu(v):                  # CuPy's pinv calls it rcond
        return _ember(_call("pinv", "pinv", v, rcond=rtol), x.dtype)
    return _ember(np.linalg.pinv(v, hermitian=hermitian, rtol=rtol), x.dtype)


def _pinv_rtol(rcond, rtol):
    if rcond is not None and rtol is not np._NoValue:      # NumPy: rtol=None counts as set
        raise ValueError("pinv: give either rcond or rtol (the same tolerance), not both")
    return (None if rtol is np._NoValue else rtol) if rcond is None else rcond


def matrix_rank(x, /, *, rtol=None, tol=None, hermitian=False, atol=None):
    """Rank from the singular values above the tolerance.

    ``tol`` (NumPy) is an absolute threshold; ``atol`` with ``rtol`` is PyTorch's
    form: the threshold is ``max(atol, rtol * largest singular value)`` (rtol
    defaults to 0 when only atol is given).

    >>> import ember
    >>> ember.linalg.matrix_rank(ember.eye(3)).item()
    3
    >>> ember.linalg.matrix_rank(ember.eye(3) * ember.asarray([1.0, 1.0, 1e-3]), atol=0.01).item()
    2
    """
    if atol is not None:
        if tol is not None:
            raise TypeError("matrix_rank: give either tol (NumPy) or atol (PyTorch), not both")
    x, v = _float_view(x, "matrix_rank")
    if atol is not None:
        xp = _xp(v)
        S = _call("matrix_rank", "svd", v, compute_uv=False)
        top = S.max(axis=-1, keepdims=True) if S.shape[-1] else xp.zeros(S.shape[:-1] + (1,))
        cut = xp.maximum(xp.asarray(atol)[..., None],
                         top * xp.asarray(0.0 if rtol is None else rtol)[..., None])
        return _ember(xp.count_nonzero(S > cut, axis=-1).astype(np.int64))
    if _on_gpu(v):
        return _ember(_gpu_matrix_rank(v, rtol, tol))
    kw = {}
    if rtol is not None:
        kw["rtol"] = rtol
    if tol is not None:
        kw["tol"] = tol
    return _ember(np.asarray(np.linalg.matrix_rank(v, hermitian=hermitian, **kw), dtype=np.int64))


def _gpu_matrix_rank(v, rtol, tol):
    """NumPy's matrix_rank rule on a CuPy view (CuPy's has no rtol): singular values
    above tol, or above rtol (default max(M, N) * eps) times the largest."""
    cp = _xp(v)
    S = _call("matrix_rank", "svd", v, compute_uv=False)
    if tol is None:
        if rtol is None:
            rtol = max(v.shape[-2:]) * np.finfo(S.dtype).eps
        tol = S.max(axis=-1, keepdims=True) * cp.asarray(rtol)[..., None]
    else:
        tol = cp.asarray(tol)[..., None]
    return cp.count_nonzero(S > tol, axis=-1).astype(np.int64)


def matrix_power(x, /, n):
    """x raised to the integer power n (n < 0 inverts).

    >>> import ember
    >>> ember.linalg.matrix_power(ember.eye(2) * 2, 3).tolist()
    [[8.0, 0.0], [0.0, 8.0]]
    """
    x = as_array(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"matrix_power: input must be square matrices, got shape {shape_str(x.shape)}")
    return _ember(_call("matrix_power", "matrix_power", numpy_view(x), n))


def lstsq(a, b, rcond=None):
    """Least-squares solution of ``a @ x = b`` (solution, residuals, rank, singular values).

    >>> import ember
    >>> ember.linalg.lstsq(ember.eye(2), ember.asarray([1.0, 2.0])).solution.tolist()
    [1.0, 2.0]
    """
    a, av = _float_view(a, "lstsq")
    b = as_array(b)
    if dtype_kind(b.dtype) in "biu":
        b = b.astype(a.dtype)
    x, res, rank, sv = _call("lstsq", "lstsq", av, _view(b), rcond=rcond)
    return LstsqResult(_ember(x), _ember(res), int(rank), _ember(sv))


def vector_norm(x, /, ord=2, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Vector p-norm over the axes (the flattened array when axis is None).

    NumPy's keywords (``axis=``, ``keepdims=``, ``ord=``) and PyTorch's
    (``dim=``, ``keepdim=``, and ``ord, dim, keepdim`` as positional arguments).

    >>> import ember
    >>> ember.linalg.vector_norm(ember.asarray([3.0, 4.0])).item()
    5.0
    >>> ember.linalg.vector_norm(ember.asarray([[3.0, 4.0]]), 1, dim=1).tolist()
    [7.0]
    """
    axis, keepdims = norm_axis_args(axis, dim, keepdims, keepdim, "vector_norm")
    x = as_array(x)
    if dtype_kind(x.dtype) in "biu":
        x = x.astype(default_float_dtype())
    v = _view(x.astype(np.float32) if is_half_dtype(x.dtype) else x)   # 16-bit: in float32
    xp = _xp(v)
    if axis is None:
        v = v.reshape(-1)
        res = xp.linalg.norm(v, ord=ord)
        if keepdims:
            res = xp.reshape(res, (1,) * x.ndim)
    else:
        if not isinstance(axis, (tuple, list)):
            axis = operator.index(axis)
        res = xp.linalg.norm(v, ord=ord, axis=axis, keepdims=keepdims) if isinstance(axis, int) or \
            len(axis) == 1 else _vector_norm_axes(xp, v, ord, tuple(axis), keepdims)
    return _ember(res, _real_dtype(x.dtype))


def _vector_norm_axes(xp, v, ord, axes, keepdims):
    moved = xp.moveaxis(v, axes, tuple(range(-len(axes), 0)))
    flat = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,))
    res = xp.linalg.norm(flat, ord=ord, axis=-1)
    if keepdims:
        for a in sorted(a % v.ndim for a in axes):
            res = xp.expand_dims(res, a)
    return res


def matrix_norm(x, /, ord="fro", axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Matrix norm over two axes (``axis``/``dim``: a pair; default the last two) ('fro',
    'nuc', 1, -1, 2, -2, inf, -inf).

    NumPy's keywords (``keepdims=``, ``ord=``) and PyTorch's (``dim=``,
    ``keepdim=``, and ``ord, dim, keepdim`` as positional arguments).

    >>> import ember
    >>> round(ember.linalg.matrix_norm(ember.eye(2)).item(), 6)
    1.414214
    >>> ember.linalg.matrix_norm(ember.ones((2, 3)), 1, (0, 1), True).shape
    (1, 1)
    """
    axis, keepdims = norm_axis_args(axis, dim, keepdims, keepdim, "matrix_norm")
    axis = matrix_axes((-2, -1) if axis is None else axis, "matrix_norm")
    x, v = _float_view(x, "matrix_norm")
    return _ember(np.linalg.norm(v, ord=ord, axis=axis, keepdims=keepdims),
                  _real_dtype(x.dtype))


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's ``linalg.norm`` (vector or matrix norm depending on ord/axis).

    >>> import ember
    >>> ember.linalg.norm(ember.asarray([[3.0, 4.0]])).item()
    5.0
    """
    x = as_array(x)
    if dtype_kind(x.dtype) in "biu":
        x = x.astype(default_float_dtype())
    v = numpy_view(x.astype(np.float32) if is_half_dtype(x.dtype) else x)   # 16-bit: in float32
    return _ember(np.linalg.norm(v, ord=ord, axis=axis, keepdims=keepdims),
                  _real_dtype(x.dtype))


def cond(x, p=None):
    """Condition number.

    >>> import ember
    >>> ember.linalg.cond(ember.eye(2)).item()
    1.0
    """
    x, v = _float_view(x, "cond")
    return _ember(_call("cond", "cond", v, p))


def multi_dot(arrays):
    """Chained matrix product in the cheapest order.

    >>> import ember
    >>> ember.linalg.multi_dot([ember.eye(2), ember.ones((2, 3))]).shape
    (2, 3)
    """
    return _ember(np.linalg.multi_dot([numpy_view(as_array(a)) for a in arrays]))


def trace(x, /, *, offset=0, dtype=None):
    """Array API trace: over the last two axes.

    >>> import ember
    >>> ember.linalg.trace(ember.eye(3)).item()
    3.0
    """
    return _trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset=0, dim1=-2, dim2=-1):
    """Array API diagonal: over the last two axes (a view); ``dim1``/``dim2`` pick other
    axes (PyTorch's keywords).

    >>> import ember
    >>> ember.linalg.diagonal(ember.eye(2)).tolist()
    [1.0, 1.0]
    """
    from ember._api.linalg_ops import diagonal as _diag
    return _diag(x, offset=offset, axis1=dim1, axis2=dim2)


def _on_one_blas_thread(fn):
    """fn with NumPy's LAPACK/BLAS held at one thread for the call (the work stays on
    the calling thread, not in OpenBLAS's pool against ember's: see gemm.pyx)."""
    @functools.wraps(fn)
    def held(*args, **kwargs):
        with one_blas_thread:
            return fn(*args, **kwargs)
    return held


# every function defined here calls LAPACK/BLAS through numpy.linalg on CPU arrays
for _name in __all__:
    _fn = globals()[_name]
    if callable(_fn) and getattr(_fn, "__module__", None) == __name__ \
            and not isinstance(_fn, type):
        globals()[_name] = _on_one_blas_thread(_fn)
del _name, _fn

# The factorisations run unchanged on GPU arrays: their views and results follow the
# array's device (_view / _ember), so the GPU gets the CPU's argument checks, dtype rules
# (integers in the default float dtype, 16-bit in float32) and result types (QRResult,
# SVDResult, ...), with cuSOLVER through CuPy's linalg doing the work.  The GPU dispatch
# (ember/cuda/_dispatch.py) runs them there.
for _name in ("inv", "solve", "det", "slogdet", "cholesky", "qr", "svd", "eigh", "eigvalsh",
              "eig", "eigvals", "lstsq", "pinv", "matrix_rank", "cond", "vector_norm"):
    globals()[_name].device_generic = True
# built from views and ember ops (linalg_ops' diagonal, trace, outer), so they run
# unchanged on GPU arrays too
for _name in ("diagonal", "trace", "outer"):
    globals()[_name].device_generic = True
del _name
