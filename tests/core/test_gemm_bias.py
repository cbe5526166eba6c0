"""``gemm.matmul(a, b, out, alpha, bias)``: out = alpha * (a @ b) + bias over out's columns,
the addition rounded after the (scaled) product: bit for bit the numbers of ember's own
product followed by a separate float32/float64 addition, and within float32 rounding of a
NumPy float64 oracle, on every path (the float32 kernel's in-place and packed drivers,
OpenBLAS, float64, a broadcast operand, copied operands, an overlapping ``out``, K = 0,
other dtypes); a bias of the wrong shape, dtype or type is a clear error."""
import numpy as np
import pytest

from ember._kernels.cpu import gemm


def _check(a, b, bias, alpha=1.0, out=None):
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    dt = np.result_type(a.dtype, b.dtype)
    sep = gemm.matmul(a, b, np.empty(shape, dt), alpha)
    sep = (sep + bias).astype(dt)
    out = np.full(shape, np.nan, dt) if out is None else out
    got = gemm.matmul(a, b, out, alpha, bias=bias)
    assert got is out
    np.testing.assert_array_equal(got, sep)
    ref = alpha * np.matmul(a.astype(np.float64), b.astype(np.float64)) + bias
    k = a.shape[-1]
    tol = (k + 3) * 2.0 ** -24 if dt == np.float32 else (k + 3) * 2.0 ** -53
    bound = tol * (abs(alpha) * np.matmul(np.abs(a).astype(np.float64),
                                          np.abs(b).astype(np.float64)) + np.abs(bias))
    assert np.all(np.abs(got - ref) <= bound + 1e-30)


def _operands(rng, shape_a, shape_b, dt=np.float32):
    return (rng.standard_normal(shape_a).astype(dt), rng.standard_normal(shape_b).astype(dt),
            rng.standard_normal(shape_b[-1]).astype(dt))


SHAPES = [((64, 40), (40, 70)), ((1, 50), (50, 33)), ((37, 50), (50, 1)),
          ((30, 20), (20, 17)), ((5, 3, 26, 19), (3, 19, 40)), ((1, 1), (1, 1)),
          ((50, 300), (300, 45))]


@pytest.mark.parametrize("alpha", [1.0, -0.375])
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.usefixtures("f32_gemm_path")
def test_bias_float32(shapes, alpha):
    rng = np.random.default_rng(0)
    a, b, bias = _operands(rng, *shapes)
    _check(a, b, bias, alpha)
    # transposed operands (read in place or packed) and a negative-stride bias
    at = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    bt = np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)
    _check(at, bt, bias[::-1].copy()[::-1], alpha)


@pytest.mark.parametrize("mode", [1, 2])
def test_bias_kernel_drivers(mode):
    """The kernel's packed driver (several K, row and column blocks) and its in-place one
    give the same numbers: the same chain of FMAs per element."""
    if not gemm.f32_kernel():
        pytest.skip("no AVX-512F float32 kernel on this CPU")
    on, limit = gemm.f32_kernel(), gemm._f32_limit()
    rng = np.random.default_rng(1)
    gemm._set_f32_kernel(True, 1 << 62, 0)
    try:
        gemm._f32_tune(kc=40, mc=24, nc=64, mode=mode)
        for ta in (False, True):
            for tb in (False, True):
                a, b, bias = _operands(rng, (53, 130), (130, 75))
                a = np.ascontiguousarray(a.T).T if ta else a
                b = np.ascontiguousarray(b.T).T if tb else b
                _check(a, b, bias, 0.5)
                _check(a[::-1], b[:, ::2][:, ::-1].copy(), bias[:38].copy())
    finally:
        gemm._f32_tune(kc=256, mc=144, nc=1024, mode=0)
        gemm._set_f32_kernel(on, *limit)


def test_bias_float64_and_strided():
    rng = np.random.default_rng(2)
    a, b, bias = _operands(rng, (6, 30, 20), (20, 25), np.float64)
    _check(a, b, bias, 0.5)
    a, b, bias = _operands(rng, (30, 80), (40, 20))
    _check(a[:, ::2], b, bias)                          # no unit stride: copied operand
    g = np.broadcast_to(np.float32(1.5), (30, 40))       # the gradient of sum()
    _check(g, b, bias, 2.0)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bias_k0_and_empty(dt):
    rng = np.random.default_rng(3)
    a, b, bias = _operands(rng, (4, 0), (0, 6), dt)
    got = gemm.matmul(a, b, np.full((4, 6), np.nan, dt), 3.0, bias=bias)
    np.testing.assert_array_equal(got, np.broadcast_to(bias, (4, 6)))
    a, b, bias = _operands(rng, (0, 5), (5, 6), dt)
    assert gemm.matmul(a, b, np.empty((0, 6), dt), bias=bias).shape == (0, 6)
    a, b, bias = _operands(rng, (3, 5), (5, 0), dt)
    assert gemm.matmul(a, b, np.empty((3, 0), dt), bias=bias).shape == (3, 0)


def test_bias_out_overlaps_operand():
    rng = np.random.default_rng(4)
    a, b, bias = _operands(rng, (20, 20), (20, 20))
    ref = gemm.matmul(a, b, np.empty((20, 20), np.float32), 0.5) + bias
    got = gemm.matmul(a, b, a, 0.5, bias=bias)
    assert got is a
    np.testing.assert_array_equal(got, ref)


def test_bias_other_dtypes():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((7, 9)) * 4).astype(np.int64)
    b = (rng.standard_normal((9, 5)) * 4).astype(np.int64)
    bias = np.arange(5, dtype=np.int64)
    got = gemm.matmul(a, b, np.empty((7, 5), np.int64), bias=bias)
    np.testing.assert_array_equal(got, a @ b + bias)


def test_bias_errors():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 6), np.float32)
    out = np.empty((3, 6), np.float32)
    with pytest.raises(ValueError, match=r"matmul: bias of shape \(5,\).*\(3, 4\).*\(4, 6\)"):
        gemm.matmul(a, b, out, bias=np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"matmul: bias of shape \(1, 6\)"):
        gemm.matmul(a, b, out, bias=np.ones((1, 6), np.float32))
    with pytest.raises(TypeError, match="matmul: bias dtype float64 differs.*float32"):
        gemm.matmul(a, b, out, bias=np.ones(6))
    with pytest.raises(TypeError, match="matmul: bias must be a NumPy array, got list"):
        gemm.matmul(a, b, out, bias=[1.0] * 6)
