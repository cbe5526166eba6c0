"""Small float32 products on ember's AVX-512 kernel (ember/_kernels/cpu/f32_gemm.h through
gemm.pyx) against a float64 NumPy oracle on the same float32 values.

Each element is a float32 sum in k order, so it is held to the usual forward-error bound
|got - exact| <= (K + 2) u (|a| @ |b|), u = 2^-24.  Both paths (the kernel, where the CPU
has AVX-512F, and OpenBLAS) are held to it, with every size limit forced to route the
whole product through the path under test.
"""
import numpy as np
import pytest

from ember._kernels.cpu import gemm
from helpers import matrix_layout


def _check(a, b, out=None):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = np.matmul(a64, b64)
    k = a.shape[-1]
    tol = (k + 2) * 2.0 ** -24 * np.matmul(np.abs(a64), np.abs(b64)) + 1e-37
    if out is None:
        out = np.full(exact.shape, np.nan, np.float32)     # garbage: C is never read
    got = gemm.matmul(a, b, out)
    assert got is out and got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= tol), f"max error / bound {np.max(err / tol)} for {a.shape} @ {b.shape}"
    return got


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


SHAPES = [(1, 1, 1), (1, 7, 1), (5, 1, 3), (3, 5, 7), (12, 32, 16), (13, 33, 17),
          (11, 31, 15), (24, 64, 5), (25, 65, 47), (64, 10, 256), (10, 256, 64),
          (64, 256, 64), (37, 100, 300)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.usefixtures("f32_gemm_path")
def test_shapes(m, n, k):
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    _check(_rand(rng, (m, k)), _rand(rng, (k, n)))


@pytest.mark.parametrize("la", ["c", "f", "strided", "step2", "neg"])
@pytest.mark.parametrize("lb", ["c", "f", "strided", "step2", "neg"])
@pytest.mark.usefixtures("f32_gemm_path")
def test_layouts(la, lb):
    rng = np.random.default_rng(3)
    a, b = _rand(rng, (19, 45)), _rand(rng, (45, 37))
    _check(matrix_layout(a, la), matrix_layout(b, lb))


@pytest.mark.usefixtures("f32_gemm_path")
def test_mlp_shapes():
    """The products of a 64-256-256-10 MLP step at batch 64: x @ W^T, g @ W, g^T @ x."""
    rng = np.random.default_rng(4)
    for fin, fout in ((64, 256), (256, 256), (256, 10)):
        x, w, g = _rand(rng, (64, fin)), _rand(rng, (fout, fin)), _rand(rng, (64, fout))
        _check(x, w.T)
        _check(g, w)
        _check(g.T, x)


@pytest.mark.usefixtures("f32_gemm_path")
def test_out_strided_rows():
    rng = np.random.default_rng(5)
    a, b = _rand(rng, (14, 9), ), _rand(rng, (9, 35))
    big = np.full((14, 50), 7.0, np.float32)
    _check(a, b, big[:, 5:40])
    assert np.all(big[:, :5] == 7) and np.all(big[:, 40:] == 7)


@pytest.mark.parametrize("sa,sb", [((3, 13, 20), (3, 20, 33)), ((4, 1, 6, 8), (5, 8, 2)),
                                   ((7, 5), (2, 3, 5, 40)), ((2, 0, 3, 4), (4, 5))])
@pytest.mark.usefixtures("f32_gemm_path")
def test_batched(sa, sb):
    rng = np.random.default_rng(6)
    _check(_rand(rng, sa), _rand(rng, sb))


@pytest.mark.parametrize("m,n,k", [(0, 4, 3), (4, 0, 3), (0, 0, 0), (3, 4, 0), (1, 1, 0)])
@pytest.mark.usefixtures("f32_gemm_path")
def test_empty_and_k0(m, n, k):
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    out = np.full((m, n), np.nan, np.float32)
    got = gemm.matmul(a, b, out)
    assert got is out
    np.testing.assert_array_equal(got, np.zeros((m, n), np.float32))


@pytest.mark.usefixtures("f32_gemm_path")
def test_nan_inf():
    rng = np.random.default_rng(7)
    a, b = _rand(rng, (13, 21)), _rand(rng, (21, 34))
    a[2, 5] = np.nan
    a[4, 3] = np.inf
    b[7, 30] = -np.inf
    got = gemm.matmul(a, b, np.empty((13, 34), np.float32))
    with np.errstate(all="ignore"):
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    tol = 23 * 2.0 ** -24 * np.matmul(np.abs(np.nan_to_num(a, posinf=0)).astype(np.float64),
                                      np.abs(np.nan_to_num(b, neginf=0)).astype(np.float64))
    assert np.all(np.abs(got[fin] - want[fin]) <= tol[fin])


def test_limit_routes_by_size():
    """Products above the size limit go to OpenBLAS; both give the oracle's answer."""
    on, limit = gemm.f32_kernel(), gemm._f32_limit()
    rng = np.random.default_rng(8)
    a, b = _rand(rng, (40, 50)), _rand(rng, (50, 60))
    try:
        for lim in (0, 40 * 50 * 60 - 1, 40 * 50 * 60):
            for min_nk in (0, 49, 50, 60):
                gemm._set_f32_kernel(on, lim, min_nk)
                _check(a, b)
    finally:
        gemm._set_f32_kernel(on, *limit)


@pytest.mark.usefixtures("f32_gemm_path")
def test_large_packed_b_declined():
    """A transposed B beyond the kernel's packing limit (1M elements) goes to OpenBLAS."""
    rng = np.random.default_rng(9)
    a, b = _rand(rng, (2, 2100)), _rand(rng, (520, 2100)).T
    _check(a, b)
