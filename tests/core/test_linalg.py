"""matmul/einsum and ember.linalg vs NumPy."""
import numpy as np
import pytest

import ember
from helpers import assert_matches, layouts, random_array

FLOATS = ["float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", ["int32", "int64", "float16", "float32", "float64", "complex128", "bool"])
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 4), (4,)), ((4,), (4,)),
                                   ((2, 1, 3, 4), (5, 4, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 2))])
def test_matmul(dtype, sa, sb):
    a, b = random_array(sa, dtype), random_array(sb, dtype, np.random.default_rng(1))
    for label, arr in layouts(a):
        got = ember.asarray(arr) @ ember.asarray(b)
        assert_matches(got, np.matmul(arr, b), rtol=1e-2 if dtype == "float16" else 1e-5)


def test_matmul_mixed_dtypes_and_errors():
    a, b = random_array((2, 3), "int8"), random_array((3, 2), "float32")
    assert_matches(ember.matmul(ember.asarray(a), ember.asarray(b)), a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match=r"matmul: .*core dimension.*\(2,3\) \(4,5\)"):
        ember.ones((2, 3)) @ ember.ones((4, 5))
    with pytest.raises(ValueError, match="scalar"):
        ember.matmul(ember.asarray(1.0), ember.ones(2))
    with pytest.raises(ValueError, match="batch"):
        ember.ones((2, 2, 3)) @ ember.ones((3, 3, 2))
    out = ember.empty((2, 2))
    assert ember.matmul(ember.ones((2, 3)), ember.ones((3, 2)), out=out) is out


def test_products():
    a, b = random_array((3, 4), "float64"), random_array((4, 5), "float64", np.random.default_rng(1))
    x, y = ember.asarray(a), ember.asarray(b)
    assert_matches(ember.dot(x, y), np.dot(a, b))
    assert_matches(ember.dot(x[0], x[1]), np.dot(a[0], a[1]))
    assert_matches(ember.vdot(x, x), np.vdot(a, a))
    assert_matches(ember.inner(x, x), np.inner(a, a))
    assert_matches(ember.outer(x[0], y[0]), np.outer(a[0], b[0]))
    assert_matches(ember.tensordot(x, y, axes=1), np.tensordot(a, b, axes=1))
    assert_matches(ember.tensordot(x, x, axes=([0, 1], [0, 1])), np.tensordot(a, a, axes=([0, 1], [0, 1])))
    assert_matches(ember.einsum("ij,jk->ki", x, y), np.einsum("ij,jk->ki", a, b))
    assert_matches(ember.einsum("ii", ember.asarray(a[:3, :3])), np.einsum("ii", a[:3, :3]))
    assert_matches(ember.kron(x[:2, :2], y[:2, :2]), np.kron(a[:2, :2], b[:2, :2]))
    z = random_array((2, 3), "complex128")
    assert_matches(ember.vecdot(ember.asarray(z), ember.asarray(z)), np.sum(np.conj(z) * z, axis=-1))
    with pytest.raises(ValueError, match="einsum"):
        ember.einsum("ij,jk->ik", x, x)


def test_diagonal_trace_transpose():
    a = random_array((3, 4, 5), "float32")
    x = ember.asarray(a)
    for off in (-2, 0, 1, 7):
        for ax in ((0, 1), (1, 2), (2, 0)):
            d = ember.diagonal(x, offset=off, axis1=ax[0], axis2=ax[1])
            assert_matches(d, np.diagonal(a, off, *ax))
            assert d.storage is x.storage
            assert_matches(ember.trace(x, offset=off, axis1=ax[0], axis2=ax[1]),
                           np.trace(a, off, *ax), rtol=1e-5)
    assert_matches(ember.matrix_transpose(x), np.swapaxes(a, -1, -2))
    assert_matches(ember.linalg.diagonal(x), np.diagonal(a, 0, -2, -1))
    assert_matches(ember.linalg.trace(x), np.trace(a, 0, -2, -1), rtol=1e-5)


def spd(n, dtype, batch=()):
    rng = np.random.default_rng(0)
    m = rng.normal(size=batch + (n, n))
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.normal(size=batch + (n, n))
    return (m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_factorisations(dtype, batch):
    a = spd(4, dtype, batch)
    x = ember.asarray(a)
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    assert_matches(ember.linalg.inv(x), np.linalg.inv(a), rtol=tol, atol=tol)
    assert_matches(ember.linalg.det(x), np.linalg.det(a), rtol=tol)
    s, l = ember.linalg.slogdet(x)
    es, el = np.linalg.slogdet(a)
    assert_matches(s, es, rtol=tol)
    assert_matches(l, el, rtol=tol)
    assert_matches(ember.linalg.cholesky(x), np.linalg.cholesky(a), rtol=tol, atol=tol)
    L = np.asarray(ember.linalg.cholesky(x, upper=True))
    np.testing.assert_allclose(np.conj(np.swapaxes(L, -1, -2)) @ L, a, rtol=tol * 10, atol=tol * 10)
    w, v = ember.linalg.eigh(x)
    ew = np.linalg.eigvalsh(a)
    assert_matches(w, ew, rtol=tol, atol=tol)
    assert_matches(ember.linalg.eigvalsh(x), ew, rtol=tol, atol=tol)
    U, S, Vh = ember.linalg.svd(x, full_matrices=False)
    np.testing.assert_allclose((np.asarray(U) * np.asarray(S)[..., None, :]) @ np.asarray(Vh), a,
                               rtol=tol * 10, atol=tol * 10)
    assert_matches(ember.linalg.svdvals(x), np.linalg.svd(a, compute_uv=False), rtol=tol, atol=tol)
    q, r = ember.linalg.qr(x)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, rtol=tol * 10, atol=tol * 10)
    b = random_array(batch + (4, 2), dtype)
    assert_matches(ember.linalg.solve(x, ember.asarray(b)), np.linalg.solve(a, b), rtol=tol * 10, atol=tol)


def test_solve_vector_rule_and_errors():
    a = spd(3, "float64")
    b = np.arange(3.0)
    assert_matches(ember.linalg.solve(ember.asarray(a), ember.asarray(b)), np.linalg.solve(a, b))
    with pytest.raises(ValueError, match="square"):
        ember.linalg.inv(ember.ones((2, 3)))
    with pytest.raises(ember.linalg.LinAlgError, match="inv"):
        ember.linalg.inv(ember.zeros((2, 2)))
    with pytest.raises(ValueError, match="at least 2"):
        ember.linalg.det(ember.ones(3))
    assert ember.linalg.inv(ember.asarray([[2, 0], [0, 4]])).dtype == np.float32   # ints -> default float


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_vector_norm(ord, axis):
    a = random_array((3, 4), "float64")
    o = 2 if ord is None else ord
    got = ember.linalg.vector_norm(ember.asarray(a), ord=o, axis=axis)
    if axis is None or isinstance(axis, tuple):
        exp = np.linalg.norm(a.reshape(-1), ord=o) if axis is None else np.linalg.norm(a.reshape(-1), ord=o)
    else:
        exp = np.linalg.norm(a, ord=o, axis=axis)
    assert_matches(got, exp)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norm_and_norm(ord):
    a = random_array((2, 3, 3), "float64")
    assert_matches(ember.linalg.matrix_norm(ember.asarray(a), ord=ord), np.linalg.norm(a, ord=ord, axis=(-2, -1)))
    assert_matches(ember.linalg.norm(ember.asarray(a[0]), ord=ord), np.linalg.norm(a[0], ord=ord))


def test_other_linalg():
    a = random_array((4, 3), "float64")
    x = ember.asarray(a)
    assert_matches(ember.linalg.pinv(x), np.linalg.pinv(a), rtol=1e-8, atol=1e-12)
    assert ember.linalg.matrix_rank(x).item() == np.linalg.matrix_rank(a)
    sq = spd(3, "float64")
    assert_matches(ember.linalg.matrix_power(ember.asarray(sq), 3), np.linalg.matrix_power(sq, 3))
    assert_matches(ember.linalg.matrix_power(ember.asarray(sq), -1), np.linalg.inv(sq), rtol=1e-8)
    b = np.arange(4.0)
    sol = ember.linalg.lstsq(x, ember.asarray(b))
    assert_matches(sol.solution, np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-8)
    u, v = random_array((2, 3), "float64"), random_array((2, 3), "float64", np.random.default_rng(3))
    assert_matches(ember.linalg.cross(ember.asarray(u), ember.asarray(v)), np.cross(u, v))
    with pytest.raises(ValueError, match="3 elements"):
        ember.linalg.cross(ember.ones(2), ember.ones(2))
