"""The GPU GEMM plan (ember/cuda/_gemm.py), run on the CPU against a NumPy model of
cuBLAS's ``cublasGemmStridedBatchedEx``.

The model reads and writes memory exactly as cuBLAS would from the plan's pointers,
transposes, leading dimensions and batch strides (column-major), after checking the
arguments cuBLAS checks and that every byte it reads lies inside its operand, so a
wrong plan fails here rather than on a GPU.  Oracle: ``numpy.matmul``.  The GPU
side (the same plan through cuBLAS) is tests/test_cuda_ops_coverage.py and the
matmul cases at the end of this file, which need a GPU.
"""
import itertools

import numpy as np
import pytest

from ember._core.dtypes import BFLOAT16
from ember.cuda import _gemm
from ember.cuda._gemm import OP_N, OP_T

from cublas_model import CublasModel, ptr as _ptr


def _run(a, b, out=None):
    model = CublasModel()
    c = _gemm.matmul(np, a, b, out, model)
    return c, model.calls


def _tol(dt):
    return {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5,
            np.dtype(np.float16): 2e-3, BFLOAT16: 1e-2}[np.dtype(dt)]


def _check(a, b, out=None):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    c, calls = _run(a, b, out)
    assert c.shape == want.shape and c.dtype == a.dtype
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=_tol(a.dtype),
                               atol=_tol(a.dtype) * max(1, a.shape[-1]))
    if out is not None:
        assert c is out
    return c, calls


def _rand(shape, dtype=np.float64, seed=0):
    r = np.random.default_rng(seed + 7 * len(shape))
    return r.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ layouts of one matrix

def _views(rows, cols, dtype=np.float64):
    """(name, array) views of a rows x cols matrix in the layouts cuBLAS may get."""
    c = _rand((rows, cols), dtype, 1)
    yield "C", c
    yield "F", np.asfortranarray(c)
    yield "T-of-C", _rand((cols, rows), dtype, 2).T
    yield "step", _rand((2 * rows, 3 * cols), dtype, 3)[::2, ::3]
    yield "offset", _rand((rows + 1, cols + 2), dtype, 4)[1:, 2:]
    yield "neg-rows", _rand((rows, cols), dtype, 5)[::-1]
    yield "neg-cols", _rand((rows, cols), dtype, 6)[:, ::-1]
    yield "bcast-row", np.broadcast_to(_rand((1, cols), dtype, 7), (rows, cols))
    yield "bcast-col", np.broadcast_to(_rand((rows, 1), dtype, 8), (rows, cols))


SIZES = [(1, 1, 1), (1, 5, 1), (3, 1, 4), (4, 6, 1), (5, 7, 3), (8, 8, 8)]


@pytest.mark.parametrize("M,K,N", SIZES)
def test_every_layout_pair_2d(M, K, N):
    for (na, a), (nb, b) in itertools.product(_views(M, K), _views(K, N)):
        _check(a, b)


def test_transposed_and_strided_operands_are_not_copied():
    a = _rand((6, 5))
    b = _rand((4, 5)).T                                 # (5, 4), column-major
    c, calls = _check(a, b)
    (p, first, second, _), = calls
    assert first == _ptr(b) and p.transa == OP_T        # cuBLAS reads b in place, transposed
    assert second == _ptr(a) and p.transb == OP_N
    s = _rand((12, 10))[::2]                            # rows 20 elements apart
    _, calls = _check(s, _rand((10, 3)))
    assert calls[0][2] == _ptr(s) and calls[0][0].ldb == 20


def test_copies_only_what_cublas_cannot_describe():
    a = _rand((5, 4))[::-1]                             # negative row stride: copied
    _, calls = _check(a, _rand((4, 3)))
    assert calls[0][2] != _ptr(a)
    a = np.broadcast_to(_rand((1, 4)), (5, 4))          # zero row stride: copied
    _, calls = _check(a, _rand((4, 3)))
    assert calls[0][2] != _ptr(a)


# ------------------------------------------------------------------ batches

BATCH_CASES = [
    ((3, 4, 5), (5, 2)),            # shared right operand: folded into one GEMM
    ((4, 5), (3, 5, 2)),            # shared left operand (a conv weight): stride 0
    ((3, 4, 5), (3, 5, 2)),
    ((2, 3, 4, 5), (2, 3, 5, 6)),
    ((2, 1, 4, 5), (1, 3, 5, 6)),   # both broadcast: one call per outer position
    ((66, 1, 2, 3), (1, 65, 3, 2)), # ... unless that is too many calls: materialised
    ((3, 1, 4, 5), (1, 2, 5, 6)),   # split with a shared b: no fold into strided C
    ((1, 4, 5), (3, 5, 2)),
    ((3, 1, 5), (5, 2)),            # M == 1, folded
    ((3, 4, 1), (1, 2)),            # K == 1
    ((3, 4, 5), (1, 5, 1)),         # N == 1
    ((0, 4, 5), (5, 2)),            # empty batch
    ((3, 0, 5), (5, 2)),
    ((3, 4, 0), (0, 2)),            # K == 0: zeros
    ((2, 0, 4, 5), (1, 5, 2)),
]


@pytest.mark.parametrize("sa,sb", BATCH_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, BFLOAT16])
def test_batched_shapes(sa, sb, dtype):
    _check(_rand(sa, dtype), _rand(sb, dtype, 1))


@pytest.mark.parametrize("sa,sb", BATCH_CASES[:9])
def test_batched_strided_views(sa, sb):
    """Each operand as a transposed, swapped-batch, stepped and reversed view."""
    def views(shape, seed):
        x = _rand(shape, seed=seed)
        yield x
        yield np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
        if len(shape) >= 3:
            yield np.ascontiguousarray(np.swapaxes(x, 0, -3)).swapaxes(0, -3)
            yield x[::-1]
        yield _rand(shape[:-1] + (2 * shape[-1],), seed=seed)[..., ::2]
    for a, b in itertools.product(views(sa, 1), views(sb, 2)):
        _check(a, b)


def test_shared_right_operand_is_one_gemm():
    a = _rand((8, 16, 32))                              # (batch, seq, features) @ weight.T
    w = _rand((24, 32))
    _, calls = _check(a, w.T)
    (p, first, second, _), = calls
    assert p.batch == 1 and p.n == 8 * 16 and p.k == 32 and p.m == 24
    assert first == _ptr(w.T) and second == _ptr(a)
    for a in (_rand((3, 1, 10))[..., :5], _rand((3, 4, 10))[..., :5]):   # padded rows
        _, calls = _check(a, _rand((5, 2)))
        (p, _, second, _), = calls
        assert p.batch == 1 and p.ldb == 10 and second == _ptr(a)


def test_shared_left_operand_has_stride_zero():
    w = _rand((6, 27))                                  # conv weight (O, C*kh*kw)
    col = _rand((4, 27, 10))                            # im2col (N, C*kh*kw, L)
    _, calls = _check(w, col)
    (p, first, second, _), = calls
    assert p.batch == 4 and p.stride_b == 0 and second == _ptr(w) and first == _ptr(col)
    _, calls = _check(w.T[None].swapaxes(-1, -2).swapaxes(-1, -2)[0].T, col)
    assert calls[0][0].stride_b == 0


def test_attention_shapes_read_k_in_place():
    q = _rand((2, 3, 7, 4))
    kk = _rand((2, 3, 9, 4))
    _, calls = _check(q, kk.swapaxes(-1, -2))
    (p, first, second, _), = calls
    assert first == _ptr(kk) and p.transa == OP_T and p.batch == 6
    qkv = _rand((2, 7, 3, 3, 4))                        # packed (B, S, 3, H, D) projection
    q, k = qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 1, 3)
    _check(q, k.swapaxes(-1, -2))                       # head axis uneven: copied, still right


def test_grouped_conv_splits_without_copying_the_weight():
    w = _rand((3, 2, 12))                               # (G, O/G, C/G*kh*kw)
    col = _rand((5, 3, 12, 7))                          # (N, G, C/G*kh*kw, L)
    _, calls = _check(w, col)
    assert len(calls) == 3                              # one per group, batched over N
    lo, hi = _gemm._extent(w)
    for p, first, second, _ in calls:
        assert p.batch == 5 and p.stride_b == 0 and lo <= second < hi


def test_uneven_batch_is_copied():
    x = _rand((3, 4, 5, 6)).transpose(1, 0, 2, 3)       # batch axes swapped
    _check(x, _rand((4, 3, 6, 2)))


# ------------------------------------------------------------------ 1-d operands, out=

@pytest.mark.parametrize("sa,sb", [((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)),
                                   ((2, 4, 5), (5,)), ((5,), (2, 5, 3)), ((0,), (0,)),
                                   ((0,), (0, 3))])
def test_one_dimensional(sa, sb):
    c, _ = _check(_rand(sa), _rand(sb, seed=3))
    assert c.shape == np.matmul(np.ones(sa), np.ones(sb)).shape


def test_out_argument():
    a, b = _rand((3, 4, 5)), _rand((5, 2))
    out = np.empty((3, 4, 2))
    c, calls = _check(a, b, out)
    assert calls[0][3] == _ptr(out)                     # written in place
    out = np.empty((3, 2, 4)).swapaxes(-1, -2)          # not C order: through a temporary
    c, calls = _check(a, b, out)
    assert calls[0][3] != _ptr(out)
    sq = _rand((4, 4))
    want = sq @ sq
    c, calls = _run(sq, sq, sq)                         # out aliases both inputs
    np.testing.assert_allclose(sq, want, rtol=1e-12)
    assert calls[0][3] != _ptr(sq)
    v = np.empty(4)
    _check(_rand((4, 5)), _rand((5,)), v)               # 1-d result into out


def test_int32_limits_defer_to_cupy():
    p, _ = _gemm.plan((2 ** 31, 1), (1, 1), (1, 1), (1, 1))
    assert not _gemm._fits(p)


def test_matrix_layout_and_batch_stride():
    assert _gemm.matrix_layout(3, 4, 4, 1) == (OP_N, 4)
    assert _gemm.matrix_layout(3, 4, 1, 3) == (OP_T, 3)
    assert _gemm.matrix_layout(3, 4, 1, 2) is None      # columns overlap
    assert _gemm.matrix_layout(3, 4, 0, 1) is None
    assert _gemm.matrix_layout(1, 4, 0, 1) == (OP_N, 4)  # one row: its stride is unused
    assert _gemm.matrix_layout(3, 1, 5, 0) == (OP_N, 5)
    assert _gemm.batch_stride((2, 3), (30, 10)) == 10
    assert _gemm.batch_stride((2, 3), (0, 0)) == 0
    assert _gemm.batch_stride((2, 3), (10, 30)) is None
    assert _gemm.batch_stride((2, 1, 3), (30, 7, 10)) == 10
    assert _gemm.batch_stride((3,), (-10,)) is None


# ------------------------------------------------------------------ on a GPU

# the same views on NumPy and CuPy arrays: (name, fn(xp, x))
_GPU_VIEWS = [
    ("C", lambda xp, x: x),
    ("transposed", lambda xp, x: xp.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)),
    ("stepped", lambda xp, x: xp.concatenate([x, x], axis=-1)[..., ::2]),
    ("reversed rows", lambda xp, x: xp.ascontiguousarray(x[..., ::-1, :])[..., ::-1, :]),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_mm_against_cpu(dtype):
    """ember's cuBLAS dispatch on a GPU: every batch case and operand view, 16-bit
    included (CuPy's own matmul widens batched float16 and rejects batched bfloat16)."""
    import ember
    if not ember.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    cupy = pytest.importorskip("cupy")
    dt = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
    for sa, sb in BATCH_CASES + [((6, 5), (5, 4)), ((2, 3, 7, 4), (2, 3, 4, 9)), ((5,), (5,)),
                                 ((3, 4, 5), (5,))]:
        a, b = _rand(sa, dt), _rand(sb, dt, 1)
        for (na, fa), (nb, fb) in itertools.product(_GPU_VIEWS, _GPU_VIEWS):
            if (a.ndim < 2 and na != "C") or (b.ndim < 2 and nb != "C"):
                continue
            va, vb = fa(np, a), fb(np, b)
            want = np.matmul(va.astype(np.float64), vb.astype(np.float64))
            got = _gemm.mm(fa(cupy, cupy.asarray(a)), fb(cupy, cupy.asarray(b)))
            assert got.dtype == dt and got.shape == want.shape, (sa, sb, na, nb)
            np.testing.assert_allclose(cupy.asnumpy(got).astype(np.float64), want,
                                       rtol=_tol(dt) * 4, atol=_tol(dt) * 4 * max(1, sa[-1]),
                                       err_msg=f"{sa} {na} @ {sb} {nb}")
        out = cupy.empty(np.matmul(a, b).shape, dtype=dt)
        assert _gemm.mm(cupy.asarray(a), cupy.asarray(b), out=out) is out
        half = _gemm.mm(cupy.asarray(a), cupy.asarray(b), alpha=0.5)
        np.testing.assert_allclose(cupy.asnumpy(half).astype(np.float64),
                                   0.5 * np.matmul(a.astype(np.float64), b.astype(np.float64)),
                                   rtol=_tol(dt) * 4, atol=_tol(dt) * 4 * max(1, sa[-1]))


def test_batch_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"batch shapes \(2,\) and \(3,\)"):
        _run(_rand((2, 3, 4)), _rand((3, 4, 5)))


def test_alpha_scales_inside_the_gemm():
    a, b = _rand((2, 3, 4)), _rand((2, 4, 5))
    c = _gemm.matmul(np, a, b, None, CublasModel(), alpha=0.125)
    np.testing.assert_allclose(c, 0.125 * (a @ b), rtol=1e-12)
