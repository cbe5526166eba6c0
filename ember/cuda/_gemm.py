"""Matrix products on the GPU: ember's own cuBLAS dispatch (``cublasGemmStridedBatchedEx``).

Every GPU GEMM of ember (matmul, linear, convolution, attention, adaptive pooling)
goes through :func:`mm` instead of ``cupy.matmul``, for three reasons:

- **16-bit batches.** CuPy 14's ``matmul`` widens batched float16 operands to
  float32 (a cast copy of each operand, a float32 GEMM without tensor cores and a
  cast back) and rejects batched bfloat16 (CuPy PR #10317).  Here float16 and
  bfloat16 run as themselves, accumulating in float32 (``CUBLAS_COMPUTE_32F``).
- **No copies of strided operands.** A transposed matrix (``k.swapaxes(-1, -2)``,
  ``w.T``) is passed to cuBLAS as transposed (``CUBLAS_OP_T``) instead of being
  copied, and a broadcast batch (a weight shared by every image) is a batch stride
  of 0 instead of an array of pointers built by three extra kernels.
- **One GEMM where one suffices.** ``(B, S, K) @ (K, N)`` with a shared right
  operand is one (B*S, K) @ (K, N) GEMM when the rows of the left operand are
  evenly spaced across the batch (PyTorch folds the same way).

The plan (which operand is transposed, the leading dimensions and batch strides)
is pure Python over shapes and element strides, so it is tested on the CPU with a
NumPy model of cuBLAS's column-major semantics (tests/test_cuda_gemm_plan.py); the
GPU call is the last line.  Operands whose layout cuBLAS cannot describe (negative
or zero strides inside a matrix, unevenly strided batches) are copied first, and
dtypes cuBLAS does not cover here (integers, complex) go to ``cupy.matmul``.

Row-major C = A @ B is computed as the column-major product C^T = B^T A^T, so
cuBLAS's first operand is the user's B.
"""
import math

import numpy as np

from ember._core.dtypes import BFLOAT16

__all__ = ["mm", "plan", "matrix_layout", "batch_stride"]

OP_N, OP_T = 0, 1
_INT_MAX = 2 ** 31 - 1

# cuBLAS / CUDA enums (stable in the C API): data types and compute types
_CUDA_TYPE = {np.dtype(np.float16): 2, BFLOAT16: 14, np.dtype(np.float32): 0,
              np.dtype(np.float64): 1}
_COMPUTE_32F, _COMPUTE_64F, _GEMM_DEFAULT = 68, 70, -1
_SCALARS = (np.ones(1, np.float32), np.zeros(1, np.float32), np.ones(1, np.float64),
            np.zeros(1, np.float64))      # alpha = 1, beta = 0: kept alive, host pointers
_ONE = {32: _SCALARS[0].ctypes.data, 64: _SCALARS[2].ctypes.data}
_ZERO = {32: _SCALARS[1].ctypes.data, 64: _SCALARS[3].ctypes.data}


def matrix_layout(rows, cols, s_row, s_col):
    """How cuBLAS sees the transpose of a row-major ``rows x cols`` matrix with element
    strides (s_row, s_col): ``(op, ld)`` such that ``X^T = op(M)`` for the column-major
    matrix M at the same address with leading dimension ld, or None when no (op, ld)
    describes it (negative or zero strides, overlapping rows)."""
    if cols == 1:
        s_col = 1                       # one column: its stride is never used
    if rows == 1:
        s_row = max(cols, 1) if s_col == 1 else 1
    if s_col == 1 and s_row >= max(cols, 1):
        return OP_N, s_row              # X^T is column-major (cols x rows), ld = row stride
    if s_row == 1 and s_col >= max(rows, 1):
        return OP_T, s_col              # X is column-major (rows x cols): pass it transposed
    return None


def batch_stride(sizes, strides):
    """The one element stride that walks the flattened batch axes (sizes, strides), or
    None when they are not evenly spaced.  Broadcast axes have stride 0, so a fully
    broadcast batch has stride 0 (every product reads the same matrix)."""
    stride = None
    span = 1                            # elements of the flattened axes to the right
    for size, st in zip(reversed(sizes), reversed(strides)):
        if size == 1:
            continue
        if stride is None:
            stride = st
        elif st != stride * span:
            return None
        span *= size
    if stride is None:
        return 0
    return stride if stride >= 0 else None     # (cuBLAS documents no negative strides)


class Plan:
    """One ``cublasGemmStridedBatchedEx`` call computing C (batch..., M, N), C-contiguous,
    from user operands A (batch..., M, K) and B (batch..., K, N).  ``transa``/``lda``/
    ``stride_a`` describe cuBLAS's first operand, which is the user's B."""
    __slots__ = ("transa", "transb", "m", "n", "k", "lda", "ldb", "ldc", "stride_a",
                 "stride_b", "stride_c", "batch")

    def __init__(self, transa, transb, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c,
                 batch):
        self.transa, self.transb, self.m, self.n, self.k = transa, transb, m, n, k
        self.lda, self.ldb, self.ldc = lda, ldb, ldc
        self.stride_a, self.stride_b, self.stride_c, self.batch = (stride_a, stride_b,
                                                                   stride_c, batch)

    def __repr__(self):
        return "Plan(" + ", ".join(f"{n}={getattr(self, n)}" for n in self.__slots__) + ")"


def broadcast_batch(sa, sb):
    """NumPy's broadcast of two batch shapes (tuples); ValueError when they clash."""
    if sa == sb:
        return tuple(sa)
    n = max(len(sa), len(sb))
    sa = (1,) * (n - len(sa)) + tuple(sa)
    sb = (1,) * (n - len(sb)) + tuple(sb)
    out = []
    for x, y in zip(sa, sb):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"matmul: batch shapes {sa} and {sb} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _broadcast_strides(shape, strides, batch):
    """The batch strides of an operand broadcast to the batch shape (0 on broadcast axes)."""
    lead = len(batch) - (len(shape) - 2)
    out = []
    for i, size in enumerate(batch):
        j = i - lead
        out.append(0 if j < 0 or shape[j] == 1 else strides[j])
    return out


def plan(a_shape, a_strides, b_shape, b_strides, c_stride=None):
    """The GEMM plan for a (.., M, K) @ b (.., K, N), both at least 2-d with broadcastable
    batch axes, element strides given, into C whose batch is evenly spaced by ``c_stride``
    elements (None: C-contiguous); ``(plan, None)``, or ``(None, which)`` when operand
    ``which`` ('a' or 'b') cannot be described as it is."""
    batch = broadcast_batch(a_shape[:-2], b_shape[:-2])
    M, K = a_shape[-2:]
    N = b_shape[-1]
    la = matrix_layout(M, K, a_strides[-2], a_strides[-1])
    lb = matrix_layout(K, N, b_strides[-2], b_strides[-1])
    if la is None:
        return None, "a"
    if lb is None:
        return None, "b"
    sa = batch_stride(batch, _broadcast_strides(a_shape, a_strides, batch))
    sb = batch_stride(batch, _broadcast_strides(b_shape, b_strides, batch))
    if sa is None:
        return None, "a"
    if sb is None:
        return None, "b"
    count = math.prod(batch)
    contiguous_c = c_stride is None or c_stride == M * N
    if sb == 0 and count > 1 and contiguous_c and (K == 1 or a_strides[-1] == 1):
        # B is shared: fold the batch into A's rows when they stay evenly spaced
        rs = a_strides[-2] if M > 1 else sa
        if sa == rs * M:
            fl = matrix_layout(count * M, K, rs, 1 if K == 1 else a_strides[-1])
            if fl is not None:
                M, count, la, sa = count * M, 1, fl, 0
    if count == 1:
        c_stride = 0
    elif c_stride is None:
        c_stride = M * N
    return Plan(lb[0], la[0], N, M, K, lb[1], la[1], N, sb, sa, c_stride, count), None


def _fits(p):
    return max(p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch) <= _INT_MAX


def _extent(x):
    """[lo, hi) byte range that array x (cupy or numpy) can touch."""
    lo = hi = _ptr(x)
    for size, st in zip(x.shape, x.strides):
        if size == 0:
            return lo, lo
        if st > 0:
            hi += (size - 1) * st
        else:
            lo += (size - 1) * st
    return lo, hi + x.itemsize


def _ptr(x):
    """The address of x's first element (cupy: data.ptr; numpy: ctypes.data)."""
    return x.ctypes.data if isinstance(x, np.ndarray) else x.data.ptr


def _overlaps(x, y):
    xl, xh = _extent(x)
    yl, yh = _extent(y)
    return xl < yh and yl < xh


def _elem_strides(x):
    isz = x.itemsize
    st = x.strides
    out = tuple([s // isz for s in st])
    for s, e in zip(st, out):
        if e * isz != s:
            return None
    return out


# Most GEMM calls one uneven broadcast may be split into before its operand is copied.
_MAX_SPLIT = 64


def _operand_key(x, batch, idx, j):
    """Index of operand x (batch axes right-aligned to `batch`) picking outer position idx
    (a tuple over the batch axes other than j) and keeping axis j."""
    lead = len(batch) - (x.ndim - 2)
    key = []
    it = iter(idx)
    for i in range(len(batch)):
        v = slice(None) if i == j else next(it)
        if i >= lead:
            key.append(v if i == j or x.shape[i - lead] != 1 else 0)
    return tuple(key)


def _split(a, b, batch):
    """Calls over one batch axis each, looping over the others, for operands whose
    broadcast batches do not merge into one stride ((2, 1) against (1, 3)), or None when
    that takes more than _MAX_SPLIT calls."""
    j = max(range(len(batch)), key=lambda i: batch[i])
    outer = batch[:j] + batch[j + 1:]
    if math.prod(outer) > _MAX_SPLIT:
        return None
    M, N = a.shape[-2], b.shape[-1]
    c_stride = math.prod(batch[j + 1:]) * M * N
    calls = []
    for idx in np.ndindex(*outer):
        sa = a[_operand_key(a, batch, idx, j)]
        sb = b[_operand_key(b, batch, idx, j)]
        p, _ = plan(sa.shape, _elem_strides(sa), sb.shape, _elem_strides(sb), c_stride)
        if p is None:
            return None
        calls.append((p, sa, sb, idx[:j] + (slice(None),) + idx[j:]))
    return calls


def _calls(xp, a, b, batch):
    """The GEMM calls computing a @ b: [(plan, a, b, c_key)], after copying what cuBLAS
    cannot describe (c_key None: the whole of C)."""
    for _ in range(6):
        sa, sb = _elem_strides(a), _elem_strides(b)
        if sa is None or sb is None:
            which = "a" if sa is None else "b"
        else:
            p, which = plan(a.shape, sa, b.shape, sb)
            if p is not None:
                return [(p, a, b, None)]
        x = a if which == "a" else b
        if x.flags.c_contiguous:
            # C order, yet the two broadcast batches do not merge into one stride
            calls = _split(a, b, batch) if sa is not None and sb is not None else None
            if calls is not None:
                return calls
            x = xp.broadcast_to(x, batch + x.shape[-2:])    # materialise its batch
        x = xp.ascontiguousarray(x)
        a, b = (x, b) if which == "a" else (a, x)
    raise AssertionError(f"gemm: no plan for {a.shape} @ {b.shape}")   # unreachable


def _run(xp, a, b, out, gemm, alpha):
    """C = a @ b for xp arrays a, b (same dtype, at least 2-d) through
    ``gemm(plan, b, a, c, alpha)`` (cuBLAS's operand order); None when the sizes exceed
    cuBLAS's 32-bit arguments."""
    batch = broadcast_batch(a.shape[:-2], b.shape[:-2])
    shape = batch + (a.shape[-2], b.shape[-1])
    calls = []
    if a.shape[-1] and all(shape):
        calls = _calls(xp, a, b, batch)
        if not all(_fits(p) for p, *_ in calls):
            return None
    direct = (out is not None and out.dtype == a.dtype and tuple(out.shape) == shape
              and out.flags.c_contiguous and not _overlaps(out, a) and not _overlaps(out, b))
    c = out if direct else xp.empty(shape, dtype=a.dtype)
    for p, ca, cb, key in calls:
        gemm(p, cb, ca, c if key is None else c[key], alpha)
    if not calls and c.size:
        c[...] = 0                      # K == 0: empty sums
    if out is not None and c is not out:
        out[...] = c
        return out
    return c


def matmul(xp, a, b, out, gemm, alpha=1.0):
    """NumPy-rule matmul of xp arrays a, b (1-d operands included) through ``gemm``;
    None when the sizes exceed cuBLAS's 32-bit arguments."""
    da, db = a.ndim == 1, b.ndim == 1
    if da:
        a = a.reshape(1, a.shape[0])
    if db:
        b = b.reshape(b.shape[0], 1)
    res_out = out
    if out is not None and (da or db):
        res_out = None                  # a 1-d operand's result has fewer axes: copy at the end
    c = _run(xp, a, b, res_out, gemm, alpha)
    if c is None:
        return None
    if da or db:
        shape = c.shape[:-2] + (() if da else c.shape[-2:-1]) + (() if db else c.shape[-1:])
        c = c.reshape(shape)
        if out is not None:
            out[...] = c
            return out
    return c


# ------------------------------------------------------------------ the cuBLAS call

_LIBS = []      # (cublas module, get_cublas_handle), imported on the first GEMM


def _cublas_gemm(p, first, second, c, alpha):
    """cublasGemmStridedBatchedEx on the current stream (CuPy's handle of the current
    device); 16-bit and float32 operands accumulate in float32."""
    if not _LIBS:
        import cupy
        from cupy_backends.cuda.libs import cublas
        _LIBS.append((cublas, cupy.cuda.device.get_cublas_handle))
    cublas, handle = _LIBS[0]
    dt = c.dtype
    ctype = _CUDA_TYPE[dt]
    bits = 64 if dt == np.float64 else 32
    if alpha != 1.0:                    # (read by cuBLAS during the call: host pointer mode)
        scale = np.array(alpha, np.float64 if bits == 64 else np.float32)
        one = scale.ctypes.data
    else:
        one = _ONE[bits]
    cublas.gemmStridedBatchedEx(
        handle(), p.transa, p.transb, p.m, p.n, p.k, one,
        first.data.ptr, ctype, p.lda, p.stride_a,
        second.data.ptr, ctype, p.ldb, p.stride_b,
        _ZERO[bits], c.data.ptr, ctype, p.ldc, p.stride_c,
        p.batch, _COMPUTE_64F if bits == 64 else _COMPUTE_32F, _GEMM_DEFAULT)


def mm(a, b, out=None, alpha=1.0):
    """``alpha * cupy.matmul(a, b, out=out)`` for cupy arrays, through ember's cuBLAS plan
    for float16 / bfloat16 / float32 / float64 operands of one dtype (cupy.matmul for the
    rest).  ``alpha`` scales inside the GEMM (in the accumulation type, before rounding),
    which saves a pass over the product (attention's 1/sqrt(d)).

    >>> import ember
    >>> if ember.cuda.is_available():
    ...     import cupy
    ...     from ember.cuda._gemm import mm
    ...     a = cupy.ones((2, 3, 4), dtype=cupy.float16)
    ...     print(mm(a, a.swapaxes(-1, -2)).shape)
    ... else:
    ...     print((2, 3, 3))
    (2, 3, 3)
    """
    import cupy
    if (a.dtype == b.dtype and a.dtype in _CUDA_TYPE and a.ndim and b.ndim
            and a.shape[-1] == (b.shape[-2] if b.ndim > 1 else b.shape[0])):
        c = matmul(cupy, a, b, out, _cublas_gemm, alpha)
        if c is not None:
            return c
    c = cupy.matmul(a, b, out=out)
    if alpha != 1.0:
        c *= c.dtype.type(alpha)
    return c
