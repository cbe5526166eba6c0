"""``gemm.matmul(a, b, out, alpha)``: out = alpha * (a @ b), each product element rounded to
the result's dtype and then multiplied by alpha, i.e. the same numbers as NumPy's
``np.matmul(a, b) * alpha`` computed by the same GEMM (checked bit for bit against
ember's own alpha = 1 product followed by a multiplication), on every path: the float32
kernel, OpenBLAS, float64, a broadcast (stride-0) operand, operands that need copies, an
``out`` overlapping an operand, 16-bit floats and NumPy's fallback (integers)."""
import numpy as np
import pytest

from ember._kernels.cpu import gemm


def _same_as_scaled(a, b, alpha, out=None):
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    dt = np.result_type(a.dtype, b.dtype)
    ref = gemm.matmul(a, b, np.empty(shape, dt))
    ref = (ref * dt.type(alpha)).astype(dt)
    out = np.full(shape, 7, dt) if out is None else out
    got = gemm.matmul(a, b, out, alpha)
    assert got is out
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(got.astype(np.float64),
                               alpha * np.matmul(a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-5 if dt.itemsize <= 4 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("alpha", [0.125, -3.0, 1.0, 0.0])
@pytest.mark.parametrize("shape", [((64, 32), (32, 64)), ((5, 40), (40, 33)),
                                   ((4, 3, 17, 20), (4, 3, 20, 18)), ((1, 1), (1, 1))])
@pytest.mark.usefixtures("f32_gemm_path")
def test_alpha_float32(alpha, shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape[0], dtype=np.float32)
    b = rng.standard_normal(shape[1], dtype=np.float32)
    _same_as_scaled(a, b, alpha)
    # transposed and strided operands (read in place or packed)
    _same_as_scaled(np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2),
                    b.swapaxes(-1, -2).copy().swapaxes(-1, -2), alpha)


@pytest.mark.usefixtures("f32_gemm_path")
def test_alpha_float32_attention_views():
    """The multi-head attention layout: q, k as strided head views of one packed array."""
    rng = np.random.default_rng(1)
    qkv = rng.standard_normal((3, 20, 3, 2, 24), dtype=np.float32)
    q = qkv[:, :, 0].transpose(0, 2, 1, 3)
    k = qkv[:, :, 1].transpose(0, 2, 1, 3)
    _same_as_scaled(q, k.swapaxes(-1, -2), 24 ** -0.5)
    out = np.zeros((3, 20, 2, 20), np.float32).transpose(0, 2, 1, 3)    # strided out
    _same_as_scaled(q, k.swapaxes(-1, -2), 0.3, out=out)


@pytest.mark.parametrize("alpha", [0.5, -1.25])
def test_alpha_float64(alpha):
    rng = np.random.default_rng(2)
    _same_as_scaled(rng.standard_normal((6, 30, 20)), rng.standard_normal((20, 25)), alpha)


def test_alpha_broadcast_and_copied_operands():
    rng = np.random.default_rng(3)
    g = np.broadcast_to(np.float32(1.5), (30, 40))            # the gradient of sum()
    b = rng.standard_normal((40, 20), dtype=np.float32)
    _same_as_scaled(g, b, 0.25)
    a = rng.standard_normal((30, 80), dtype=np.float32)[:, ::2]    # no unit stride
    _same_as_scaled(a, b, -2.0)


def test_alpha_out_overlaps_operand():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((20, 20), dtype=np.float32)
    b = rng.standard_normal((20, 20), dtype=np.float32)
    ref = (gemm.matmul(a, b, np.empty((20, 20), np.float32)) * np.float32(0.5))
    got = gemm.matmul(a, b, a, 0.5)
    assert got is a
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", [np.float16, np.int64])
def test_alpha_other_dtypes(dtype):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((7, 9)) * 4).astype(dtype)
    b = (rng.standard_normal((9, 5)) * 4).astype(dtype)
    ref = gemm.matmul(a, b, np.empty((7, 5), dtype))
    got = gemm.matmul(a, b, np.empty((7, 5), dtype), 2.0)
    np.testing.assert_array_equal(got, (ref * 2).astype(dtype))
