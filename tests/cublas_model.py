"""A NumPy model of cuBLAS's ``cublasGemmStridedBatchedEx`` for testing ember's GPU GEMM
plans on the CPU (ember/cuda/_gemm.py): it reads and writes memory exactly as cuBLAS
would from a plan's pointers, transposes, leading dimensions and batch strides
(column-major), after checking the arguments cuBLAS checks and that every element it
touches lies inside its operand."""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from ember.cuda import _gemm
from ember.cuda._gemm import OP_N, OP_T


def ptr(x):
    """The address of NumPy array x's first element (cuBLAS's operand pointer)."""
    return x.ctypes.data


class CublasModel:
    """cublasGemmStridedBatchedEx on NumPy arrays (their first element is the pointer)."""

    def __init__(self):
        self.calls = []
        self.alphas = []

    def __call__(self, p, first, second, c, alpha=1.0):
        self.calls.append((p, ptr(first), ptr(second), ptr(c)))
        self.alphas.append(alpha)
        assert 1 <= p.m and 1 <= p.n and 1 <= p.k and 1 <= p.batch
        assert max(p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch) <= 2 ** 31 - 1
        assert p.ldc >= p.m
        if p.batch > 1:
            assert p.stride_c >= p.ldc * p.n, "batches of C overlap"
        A = self._operand(first, p.transa, p.m, p.k, p.lda, p.stride_a, p.batch)
        B = self._operand(second, p.transb, p.k, p.n, p.ldb, p.stride_b, p.batch)
        isz = c.itemsize
        self._check_inside(c, p.m, p.n, p.ldc, p.stride_c, p.batch)
        C = as_strided(c, (p.batch, p.n, p.m), (p.stride_c * isz, p.ldc * isz, isz))
        C[...] = (alpha * (A @ B)).transpose(0, 2, 1).astype(c.dtype)  # C[i, j] at i + j * ldc

    @staticmethod
    def _check_inside(x, rows, cols, ld, stride, batch):
        """Every element of the stored (column-major) matrices lies inside array x."""
        isz = x.itemsize
        lo, hi = _gemm._extent(x)
        first = ptr(x)
        last = first + ((batch - 1) * stride + (rows - 1) + (cols - 1) * ld) * isz
        assert lo <= first and last + isz <= hi, "cuBLAS would read outside the operand"
        assert stride >= 0

    def _operand(self, x, trans, rows, cols, ld, stride, batch):
        """op(X) as a float64 (batch, rows, cols) array, read like cuBLAS reads it."""
        assert trans in (OP_N, OP_T)
        sr, sc = (rows, cols) if trans == OP_N else (cols, rows)     # the stored matrix
        assert ld >= max(1, sr), f"ld {ld} < rows {sr}"
        self._check_inside(x, sr, sc, ld, stride, batch)
        isz = x.itemsize
        m = as_strided(x, (batch, sc, sr), (stride * isz, ld * isz, isz)).transpose(0, 2, 1)
        m = m.astype(np.float64)
        return m if trans == OP_N else m.transpose(0, 2, 1)
