"""Gradients of the products (matmul, dot, einsum...) and of ember.linalg.

Every rule is checked against central finite differences in float64
(gradcheck), on batched and non-contiguous inputs where they apply, against
PyTorch's gradients for the same upstream gradient, and to second order
(gradgradcheck) for matmul, inv, det, solve and einsum.  Factorisations are
checked through losses that do not depend on the sign of singular/eigen
vectors (PyTorch's gauge-invariance requirement).
"""
import math

import numpy as np
import pytest

import ember as E
from ember.autograd import gradcheck, gradgradcheck
from helpers import leaf, rnd

torch = pytest.importorskip("torch")

inf = math.inf


# ---------------------------------------------------------------- helpers

def wellcond(*shape, seed=0):
    """Random square matrices (batch allowed) with a safely nonzero determinant."""
    a = rnd(*shape, seed=seed)
    return a + shape[-1] * np.eye(shape[-1])


def _outs(o):
    return tuple(o) if isinstance(o, (tuple, list)) else (o,)


def check_torch(ef, tf, *arrays, rtol=1e-9, atol=1e-10, seed=1):
    """ember and torch gradients of f(*arrays) for the same random upstream gradient."""
    xs = [leaf(a) for a in arrays]
    ys = _outs(ef(*xs))
    rng = np.random.default_rng(seed)
    gs = [rng.standard_normal(np.asarray(y).shape) for y in ys]
    eg = E.autograd.grad(list(ys), xs, grad_outputs=[E.asarray(g, dtype=E.float64) for g in gs],
                         allow_unused=True)
    ts = [torch.tensor(np.array(a, dtype=np.float64, order="C"), requires_grad=True)
          for a in arrays]
    tys = _outs(tf(*ts))
    assert len(tys) == len(ys)
    for y, ty in zip(ys, tys):
        np.testing.assert_allclose(np.asarray(y), ty.detach().numpy(), rtol=1e-8, atol=1e-10)
    tg = torch.autograd.grad(list(tys), ts, grad_outputs=[torch.tensor(g) for g in gs],
                             allow_unused=True)
    for e, t in zip(eg, tg):
        if t is None:
            assert e is None or np.allclose(np.asarray(e), 0)
            continue
        np.testing.assert_allclose(np.asarray(e), t.numpy(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- matmul

MATMUL_SHAPES = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
                 ((2, 3, 4), (4, 2)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (2, 4, 3)),
                 ((2, 3, 4), (4,)), ((1, 3, 4), (2, 4, 2))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_gradcheck_and_torch(sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    assert gradcheck(lambda x, y: E.matmul(x, y), (leaf(a), leaf(b)))
    check_torch(lambda x, y: x @ y, lambda x, y: x @ y, a, b)


def test_matmul_one_side_and_noncontiguous():
    a, b = leaf(rnd(4, 3)), E.asarray(rnd(4, 2), dtype=E.float64)
    assert gradcheck(lambda x: E.matmul(x.T, b), (a,))
    c = leaf(rnd(3, 8))
    assert gradcheck(lambda x: E.matmul(x[:, ::2], leaf(rnd(4, 2)).detach()), (c,))
    check_torch(lambda x, y: E.matmul(x.T, y[:, ::2]), lambda x, y: x.T @ y[:, ::2],
                rnd(4, 3), rnd(4, 6))


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,))])
def test_matmul_gradgradcheck(sa, sb):
    assert gradgradcheck(lambda x, y: E.matmul(x, y), (leaf(rnd(*sa)), leaf(rnd(*sb, seed=1))))


def test_matmul_complex_vs_torch():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    b = rng.standard_normal((3,)) + 1j * rng.standard_normal((3,))
    g = rng.standard_normal((2,)) + 1j * rng.standard_normal((2,))
    x, y = E.asarray(a, requires_grad=True), E.asarray(b, requires_grad=True)
    (x @ y).backward(E.asarray(g))
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (tx @ ty).backward(torch.tensor(g))
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(y.grad), ty.grad.numpy(), rtol=1e-12)


# ---------------------------------------------------------------- dot & co

@pytest.mark.parametrize("sa,sb", [((), (3,)), ((3,), ()), ((3,), (3,)), ((2, 3), (3,)),
                                   ((2, 3), (3, 2)), ((2, 2, 3), (3,)), ((2, 3), (2, 3, 2)),
                                   ((2, 1, 3), (2, 3, 2))])
def test_dot(sa, sb):
    assert gradcheck(lambda x, y: E.dot(x, y), (leaf(rnd(*sa)), leaf(rnd(*sb, seed=1))))


def test_dot_vs_torch_tensordot():
    check_torch(lambda x, y: E.dot(x, y),
                lambda x, y: torch.tensordot(x, y, dims=([2], [1])), rnd(2, 2, 3), rnd(4, 3, 2))


def test_vdot_inner_outer():
    a, b = rnd(2, 3), rnd(2, 3, seed=1)
    assert gradcheck(lambda x, y: E.vdot(x, y), (leaf(a), leaf(b)))
    check_torch(lambda x, y: E.vdot(x, y), lambda x, y: torch.vdot(x.reshape(-1), y.reshape(-1)),
                a, b)
    assert gradcheck(lambda x, y: E.inner(x, y), (leaf(rnd(2, 3)), leaf(rnd(4, 3, seed=1))))
    assert gradcheck(lambda x, y: E.inner(x, y), (leaf(rnd(2, 3)), leaf(rnd(2, 4, 3, seed=1))))
    assert gradcheck(lambda x, y: E.inner(x, y), (leaf(rnd()), leaf(rnd(2, 3, seed=1))))
    check_torch(lambda x, y: E.inner(x, y), torch.inner, rnd(2, 3), rnd(4, 3, seed=1))
    assert gradcheck(lambda x, y: E.outer(x, y), (leaf(rnd(3)), leaf(rnd(2, 2, seed=1))))
    assert gradcheck(lambda x, y: E.linalg.outer(x, y), (leaf(rnd(3)), leaf(rnd(4, seed=1))))
    check_torch(lambda x, y: E.outer(x, y), torch.outer, rnd(3), rnd(4, seed=1))


def test_vdot_complex_vs_torch():
    rng = np.random.default_rng(4)
    a = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    b = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    g = 0.7 - 0.3j
    x, y = E.asarray(a, requires_grad=True), E.asarray(b, requires_grad=True)
    E.vdot(x, y).backward(E.asarray(g))
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.vdot(tx, ty).backward(torch.tensor(g))
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(y.grad), ty.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("sa,sb,axes", [((2, 3, 4), (3, 4, 2), 2), ((2, 3), (3, 2), 1),
                                        ((2, 3), (4,), 0), ((2, 3, 4), (4, 2, 3), ([1, 2], [2, 0])),
                                        ((2, 3, 4), (4, 3), ([-1, 1], [0, -1])),
                                        ((3, 2), (2, 3), (0, 1))])
def test_tensordot(sa, sb, axes):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    assert gradcheck(lambda x, y: E.tensordot(x, y, axes=axes), (leaf(a), leaf(b)))
    dims = axes if isinstance(axes, int) else tuple(
        [d] if isinstance(d, int) else list(d) for d in axes)
    check_torch(lambda x, y: E.linalg.tensordot(x, y, axes=axes),
                lambda x, y: torch.tensordot(x, y, dims=dims), a, b)


@pytest.mark.parametrize("sa,sb,axis", [((2, 3), (3,), -1), ((3, 2), (3, 2), 0),
                                        ((2, 1, 3), (4, 3), -1)])
def test_vecdot(sa, sb, axis):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    assert gradcheck(lambda x, y: E.vecdot(x, y, axis=axis), (leaf(a), leaf(b)))
    check_torch(lambda x, y: E.linalg.vecdot(x, y, axis=axis),
                lambda x, y: torch.linalg.vecdot(x, y, dim=axis), a, b)


@pytest.mark.parametrize("sa,sb", [((2, 3), (2, 2)), ((2,), (3, 2)), ((2, 1, 2), (3,))])
def test_kron(sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    assert gradcheck(lambda x, y: E.kron(x, y), (leaf(a), leaf(b)))
    check_torch(E.kron, torch.kron, a, b)


@pytest.mark.parametrize("sa,sb,axis", [((3,), (3,), -1), ((2, 3), (3,), -1), ((3, 2), (3, 2), 0)])
def test_cross(sa, sb, axis):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    assert gradcheck(lambda x, y: E.cross(x, y, axis=axis), (leaf(a), leaf(b)))
    check_torch(lambda x, y: E.linalg.cross(x, y, axis=axis),
                lambda x, y: torch.linalg.cross(*torch.broadcast_tensors(x, y), dim=axis), a, b)


def test_trace_and_diagonal():
    x = leaf(rnd(3, 4, 2))
    assert gradcheck(lambda t: E.trace(t), (x,))
    assert gradcheck(lambda t: E.trace(t, offset=1, axis1=2, axis2=0), (x,))
    assert gradcheck(lambda t: E.diagonal(t, offset=-1, axis1=1, axis2=0), (x,))
    assert gradcheck(lambda t: E.linalg.trace(t, offset=-1), (x,))
    assert gradcheck(lambda t: E.linalg.diagonal(t, offset=1) * 1.0, (x,))
    check_torch(lambda t: E.linalg.trace(t), lambda t: torch.diagonal(t, dim1=-2, dim2=-1).sum(-1),
                rnd(3, 4, 2))


# ---------------------------------------------------------------- einsum

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("ij,jk", [(3, 4), (4, 2)]),                      # implicit output
    ("i,i->", [(3,), (3,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),  # ellipsis with batch broadcasting
    ("...i,...i", [(2, 3), (3,)]),                      # implicit with ellipsis
    ("i...->...", [(3, 2)]),
    ("ij,j->ij", [(3, 4), (1,)]),                       # size-1 label broadcast
    ("i,i,i->", [(3,), (3,), (3,)]),
    ("ijk,ik->j", [(2, 3, 4), (2, 4)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 3), (3, 2)]),
]


@pytest.mark.parametrize("subs,shapes", EINSUM_CASES)
def test_einsum_gradcheck(subs, shapes):
    xs = [leaf(rnd(*s, seed=i)) for i, s in enumerate(shapes)]
    assert gradcheck(lambda *t: E.einsum(subs, *t), tuple(xs))


@pytest.mark.parametrize("subs,shapes", [c for c in EINSUM_CASES if "...i,...i" not in c[0]])
def test_einsum_vs_torch(subs, shapes):
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    check_torch(lambda *t: E.einsum(subs, *t), lambda *t: torch.einsum(subs, *t), *arrays)


@pytest.mark.parametrize("subs,shapes", [("ij,jk->ik", [(2, 3), (3, 2)]), ("ii->i", [(2, 2)]),
                                         ("...ij,...jk->...ik", [(2, 1, 2, 3), (2, 3, 2)]),
                                         ("i,j->ij", [(2,), (3,)])])
def test_einsum_gradgradcheck(subs, shapes):
    xs = [leaf(rnd(*s, seed=i)) for i, s in enumerate(shapes)]
    assert gradgradcheck(lambda *t: E.einsum(subs, *t), tuple(xs))


def test_einsum_noncontiguous_and_constant_operand():
    x = leaf(rnd(4, 6))
    w = E.asarray(rnd(4, 2), dtype=E.float64)
    assert gradcheck(lambda t: E.einsum("ji,ik->jk", t[:, ::2].T, w), (x,))


def test_einsum_interleaved_form_is_a_clear_error():
    from ember.autograd.rules.linalg import _parse_einsum
    with pytest.raises(NotImplementedError, match="subscripts-string"):
        _parse_einsum(None, [(2, 2)])


# ---------------------------------------------------------------- inv, solve, det

def test_inv():
    a = wellcond(2, 3, 3)
    assert gradcheck(E.linalg.inv, (leaf(a),))
    assert gradgradcheck(E.linalg.inv, (leaf(a[0]),))
    check_torch(E.linalg.inv, torch.linalg.inv, a)
    assert gradcheck(lambda t: E.linalg.inv(t.mT), (leaf(a[0]),))


@pytest.mark.parametrize("sa,sb", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3, 2)),
                                   ((3, 3), (2, 3, 2)), ((2, 3, 3), (3,))])
def test_solve(sa, sb):
    a, b = wellcond(*sa), rnd(*sb, seed=1)
    assert gradcheck(E.linalg.solve, (leaf(a), leaf(b)))
    if len(sb) != 1 or len(sa) == 2:
        check_torch(E.linalg.solve, torch.linalg.solve, a, b)
    else:
        check_torch(E.linalg.solve, lambda x, y: torch.linalg.solve(x, y.expand(x.shape[:-1])),
                    a, b)


@pytest.mark.parametrize("sa,sb", [((3, 3), (3,)), ((2, 3, 3), (3, 2))])
def test_solve_gradgradcheck(sa, sb):
    assert gradgradcheck(E.linalg.solve, (leaf(wellcond(*sa)), leaf(rnd(*sb, seed=1))))


def test_det():
    a = rnd(2, 3, 3)
    assert gradcheck(E.linalg.det, (leaf(a),))
    assert gradgradcheck(E.linalg.det, (leaf(a[0]),))
    check_torch(E.linalg.det, torch.linalg.det, a)


def test_det_singular():
    # rank 2 (exactly: det is 0.0): the gradient is the cofactor matrix, as finite
    # differences confirm (PyTorch 2.13 returns zeros for this exactly singular input)
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, -1.0, 2.0]])
    assert float(E.linalg.det(E.asarray(a))) == 0.0
    assert gradcheck(E.linalg.det, (leaf(a),))
    x = leaf(a)
    E.linalg.det(x).backward()
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                     for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(np.asarray(x.grad), cof, atol=1e-10)
    assert gradcheck(E.linalg.det, (leaf(np.stack([a, wellcond(3, 3)])),))
    b = np.array([[1.0, 2.0], [2.0, 4.0]])
    x = leaf(b)
    E.linalg.det(x).backward()
    np.testing.assert_allclose(np.asarray(x.grad), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)


def test_slogdet():
    a = rnd(2, 3, 3, seed=5)               # dets of both signs
    assert gradcheck(lambda t: E.linalg.slogdet(t).logabsdet, (leaf(a),))
    assert gradcheck(lambda t: tuple(E.linalg.slogdet(t)), (leaf(a),))
    check_torch(lambda t: tuple(E.linalg.slogdet(t)), lambda t: tuple(torch.linalg.slogdet(t)), a)


# ---------------------------------------------------------------- factorisations

def _spd(t):
    n = t.shape[-1]
    return t @ t.mT + n * E.eye(n, dtype=E.float64)


def _tspd(t):
    n = t.shape[-1]
    return t @ t.mT + n * torch.eye(n, dtype=torch.float64)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)])
def test_cholesky(shape, upper):
    a = rnd(*shape)
    assert gradcheck(lambda t: E.linalg.cholesky(_spd(t), upper=upper), (leaf(a),))
    check_torch(lambda t: E.linalg.cholesky(_spd(t), upper=upper),
                lambda t: torch.linalg.cholesky(_tspd(t), upper=upper), a)


def test_cholesky_gradient_is_symmetric():
    a = rnd(3, 3)
    x = leaf(a @ a.T + 3 * np.eye(3))
    (E.linalg.cholesky(x) * E.asarray(rnd(3, 3, seed=2))).sum().backward()
    g = np.asarray(x.grad)
    np.testing.assert_allclose(g, g.T, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 4, 2)])
def test_qr(shape):
    a = rnd(*shape)
    assert gradcheck(lambda t: tuple(E.linalg.qr(t)), (leaf(a),))

    def ef(t):
        q, r = E.linalg.qr(t)
        return E.abs(q), E.abs(r)

    def tf(t):
        q, r = torch.linalg.qr(t)
        return q.abs(), r.abs()
    check_torch(ef, tf, a)


def _esvd(t):
    u, s, vh = E.linalg.svd(t, full_matrices=False)
    return E.abs(u), s, E.abs(vh), E.matmul(u * s[..., None, :], vh)


def _tsvd(t):
    u, s, vh = torch.linalg.svd(t, full_matrices=False)
    return u.abs(), s, vh.abs(), (u * s[..., None, :]) @ vh


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3)])
def test_svd(shape):
    a = rnd(*shape, seed=2)
    assert gradcheck(_esvd, (leaf(a),))
    check_torch(_esvd, _tsvd, a, rtol=1e-8, atol=1e-9)
    assert gradcheck(E.linalg.svdvals, (leaf(a),))
    check_torch(E.linalg.svdvals, torch.linalg.svdvals, a)


def test_svd_square_full_matrices_and_values_only():
    a = rnd(3, 3, seed=2)
    assert gradcheck(lambda t: E.linalg.svd(t).S, (leaf(a),))
    assert gradcheck(lambda t: E.abs(E.linalg.svd(t).U), (leaf(a),))
    # S of a matrix with repeated singular values: a finite gradient (U diag(gS) Vh)
    x = leaf(np.eye(3) * 2.0)
    E.linalg.svd(x, full_matrices=False).S.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.eye(3), atol=1e-12)


def _sym(t):
    return (t + t.mT) / 2


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, uplo):
    a = rnd(*shape, seed=3)

    def ef(t):
        w, v = E.linalg.eigh(_sym(t), UPLO=uplo)
        return w, E.abs(v)

    def tf(t):
        w, v = torch.linalg.eigh(_sym(t), UPLO=uplo)
        return w, v.abs()
    assert gradcheck(ef, (leaf(a),))
    check_torch(ef, tf, a, rtol=1e-8, atol=1e-9)
    assert gradcheck(lambda t: E.linalg.eigvalsh(_sym(t), UPLO=uplo), (leaf(a),))
    check_torch(lambda t: E.linalg.eigvalsh(_sym(t)), lambda t: torch.linalg.eigvalsh(_sym(t)), a)


def test_eigh_gradient_is_symmetric():
    x = leaf(np.asarray(_sym(E.asarray(rnd(3, 3)))))
    w, v = E.linalg.eigh(x)
    (w.sum() + (E.abs(v) * E.asarray(rnd(3, 3, seed=1))).sum()).backward()
    g = np.asarray(x.grad)
    np.testing.assert_allclose(g, g.T, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
def test_pinv(shape):
    a = rnd(*shape, seed=4)
    assert gradcheck(E.linalg.pinv, (leaf(a),))
    check_torch(E.linalg.pinv, torch.linalg.pinv, a, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("n", [1, 3, 0, -1, -2])
def test_matrix_power(n):
    a = wellcond(2, 3, 3) / 3
    assert gradcheck(lambda t: E.linalg.matrix_power(t, n), (leaf(a),))
    check_torch(lambda t: E.linalg.matrix_power(t, n), lambda t: torch.linalg.matrix_power(t, n), a)


def test_matrix_power_zero_gives_zero_gradient():
    x = leaf(rnd(3, 3))
    (E.linalg.matrix_power(x, 0) * 2.0).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.zeros((3, 3)))


@pytest.mark.parametrize("shapes", [[(3,), (3, 4), (4, 2), (2,)], [(2, 3), (3, 4), (4, 2)],
                                    [(3,), (3, 2)], [(2, 3), (3,)]])
def test_multi_dot(shapes):
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    assert gradcheck(lambda *t: E.linalg.multi_dot(list(t)), tuple(leaf(a) for a in arrays))
    check_torch(lambda *t: E.linalg.multi_dot(list(t)), lambda *t: torch.linalg.multi_dot(t),
                *arrays)


def test_multi_dot_constant_member():
    c = E.asarray(rnd(3, 3, seed=9), dtype=E.float64)
    x = leaf(rnd(2, 3))
    assert gradcheck(lambda t: E.linalg.multi_dot([t, c, t.T]), (x,))


@pytest.mark.parametrize("sb", [(5,), (5, 2)])
def test_lstsq(sb):
    a, b = rnd(5, 3, seed=6), rnd(*sb, seed=7)
    assert gradcheck(lambda x, y: E.linalg.lstsq(x, y).solution, (leaf(a), leaf(b)))
    assert gradcheck(lambda x, y: E.linalg.lstsq(x, y).residuals, (leaf(a), leaf(b)))
    assert gradcheck(lambda x, y: E.linalg.lstsq(x, y).singular_values, (leaf(a), leaf(b)))

    def tf(x, y):
        sol = torch.linalg.lstsq(x, y[:, None] if y.ndim == 1 else y).solution
        return sol[:, 0] if y.ndim == 1 else sol
    check_torch(lambda x, y: E.linalg.lstsq(x, y).solution, tf, a, b, rtol=1e-8, atol=1e-9)


def test_matrix_rank_is_not_differentiable():
    x = leaf(rnd(3, 3))
    r = E.linalg.matrix_rank(x)
    assert int(r) == 3 and not r.requires_grad


# ---------------------------------------------------------------- norms

VECTOR_NORM_CASES = [(2, None, False), (2, 1, True), (2, (0, 2), False), (2, -1, False),
                     (1, None, False), (1, 0, True), (inf, None, False), (inf, (1, 2), True),
                     (-inf, 1, False), (3, None, False), (0.5, -1, False), (0, None, False),
                     (-1.5, 2, False)]


@pytest.mark.parametrize("ord,axis,keepdims", VECTOR_NORM_CASES)
def test_vector_norm(ord, axis, keepdims):
    a = rnd(2, 3, 4, seed=8)
    f = lambda t: E.linalg.vector_norm(t, ord=ord, axis=axis, keepdims=keepdims)  # noqa: E731
    assert gradcheck(f, (leaf(a),))
    check_torch(f, lambda t: torch.linalg.vector_norm(t, ord=ord, dim=axis, keepdim=keepdims), a)


def test_vector_norm_noncontiguous():
    a = rnd(4, 6, seed=8)
    assert gradcheck(lambda t: E.linalg.vector_norm(t[:, ::2].T, axis=0), (leaf(a),))


@pytest.mark.parametrize("ord", [2, 1, 3])
def test_vector_norm_zero_vector_has_zero_gradient(ord):
    x = leaf(np.zeros(3))
    E.linalg.vector_norm(x, ord=ord).backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.zeros(3))
    y = leaf(np.zeros((2, 3)))
    E.linalg.norm(y).backward()
    np.testing.assert_array_equal(np.asarray(y.grad), np.zeros((2, 3)))


@pytest.mark.parametrize("ord", ["fro", "nuc", 2, -2, 1, -1, inf, -inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norm(ord, keepdims):
    a = rnd(2, 3, 4, seed=9)
    f = lambda t: E.linalg.matrix_norm(t, ord=ord, keepdims=keepdims)  # noqa: E731
    assert gradcheck(f, (leaf(a),))
    check_torch(f, lambda t: torch.linalg.matrix_norm(t, ord=ord, keepdim=keepdims), a,
                rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("ord,axis,keepdims,shape", [
    (None, None, False, (2, 3, 4)), (None, None, True, (3, 4)), (None, 1, False, (2, 3, 4)),
    (1, None, False, (4,)), ("nuc", None, False, (3, 4)), (inf, None, True, (3, 4)),
    (None, (0, 2), False, (2, 3, 4)), (1, (1, 0), True, (2, 3, 4)), (2, (2, 0), False, (2, 3, 4)),
    (inf, -1, False, (2, 3))])
def test_norm(ord, axis, keepdims, shape):
    a = rnd(*shape, seed=10)
    f = lambda t: E.linalg.norm(t, ord=ord, axis=axis, keepdims=keepdims)  # noqa: E731
    assert gradcheck(f, (leaf(a),))
    check_torch(f, lambda t: torch.linalg.norm(t, ord=ord, dim=axis, keepdim=keepdims), a,
                rtol=1e-8, atol=1e-9)


# ---------------------------------------------------------------- second order, beyond the core set

SECOND_ORDER = {
    "cholesky": (lambda t: E.linalg.cholesky(_spd(t)), [(3, 3)]),
    "qr": (lambda t: tuple(E.linalg.qr(t)), [(3, 2)]),
    "svd": (lambda t: (E.linalg.svd(t, full_matrices=False).S,
                       E.abs(E.linalg.svd(t, full_matrices=False).U)), [(3, 2)]),
    "eigh": (lambda t: (E.linalg.eigh(_sym(t)).eigenvalues,
                        E.abs(E.linalg.eigh(_sym(t)).eigenvectors)), [(3, 3)]),
    "pinv": (E.linalg.pinv, [(3, 2)]),
    "slogdet": (lambda t: E.linalg.slogdet(t).logabsdet, [(3, 3)]),
    "vector_norm": (lambda t: E.linalg.vector_norm(t, axis=1), [(2, 3)]),
    "matrix_norm_nuc": (lambda t: E.linalg.matrix_norm(t, ord="nuc"), [(3, 2)]),
    "matrix_power": (lambda t: E.linalg.matrix_power(t, -2), [(2, 2)]),
    "multi_dot": (lambda a, b, c: E.linalg.multi_dot([a, b, c]), [(3,), (3, 2), (2,)]),
    "tensordot": (lambda a, b: E.tensordot(a, b, axes=([0], [1])), [(3, 2), (2, 3)]),
    "kron": (E.kron, [(2,), (2, 2)]),
    "cross": (E.cross, [(3,), (3,)]),
    "trace": (lambda t: E.trace(t) * E.trace(t), [(3, 3)]),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_gradgradcheck_more(name):
    f, shapes = SECOND_ORDER[name]
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    if name == "matrix_power":
        arrays = [wellcond(2, 2)]
    assert gradgradcheck(f, tuple(leaf(a) for a in arrays))


def test_det_singular_second_order():
    assert gradgradcheck(E.linalg.det, (leaf(np.array([[1.0, 2.0], [2.0, 4.0]])),))


# ---------------------------------------------------------------- dtypes

def test_float32_gradients_keep_dtype():
    a = E.asarray(wellcond(3, 3), dtype=E.float32, requires_grad=True)
    b = E.asarray(rnd(3), dtype=E.float32, requires_grad=True)
    (E.linalg.solve(a, b).sum() + E.linalg.det(a) + E.linalg.vector_norm(b)).backward()
    assert a.grad.dtype == E.float32 and b.grad.dtype == E.float32


def test_empty_operands():
    a, b = leaf(np.ones((3, 0))), leaf(np.ones((0, 2)))
    (a @ b).sum().backward()
    assert a.grad.shape == (3, 0) and b.grad.shape == (0, 2)
    x = leaf(np.ones((0, 3)))
    E.einsum("ij->j", x).sum().backward()
    assert x.grad.shape == (0, 3)
    y = leaf(np.ones((2, 0)))
    E.linalg.vector_norm(y, axis=1).sum().backward()
    assert y.grad.shape == (2, 0)


def _c(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


COMPLEX_CASES = {
    "einsum": (lambda a, b: E.einsum("ij,jk->ik", a, b),
               lambda a, b: torch.einsum("ij,jk->ik", a, b), [(2, 3), (3, 2)]),
    "einsum_diag": (lambda a: E.einsum("ii->i", a), lambda a: torch.einsum("ii->i", a), [(3, 3)]),
    "tensordot": (lambda a, b: E.tensordot(a, b, axes=1),
                  lambda a, b: torch.tensordot(a, b, dims=1), [(2, 3), (3, 2)]),
    "inner": (E.inner, torch.inner, [(2, 3), (3,)]),
    "outer": (E.outer, torch.outer, [(2,), (3,)]),
    "vecdot": (E.vecdot, torch.linalg.vecdot, [(2, 3), (3,)]),
    "kron": (E.kron, torch.kron, [(2, 2), (2,)]),
    "cross": (E.cross, torch.linalg.cross, [(3,), (3,)]),
    "multi_dot": (lambda a, b, c: E.linalg.multi_dot([a, b, c]),
                  lambda a, b, c: torch.linalg.multi_dot([a, b, c]), [(3,), (3, 2), (2,)]),
    "solve": (lambda a, b: E.linalg.solve(a + 3 * E.eye(3), b),
              lambda a, b: torch.linalg.solve(a + 3 * torch.eye(3), b), [(3, 3), (3, 2)]),
    "inv": (lambda a: E.linalg.inv(a + 3 * E.eye(3)),
            lambda a: torch.linalg.inv(a + 3 * torch.eye(3)), [(3, 3)]),
    "det": (E.linalg.det, torch.linalg.det, [(3, 3)]),
    "slogdet": (lambda a: tuple(E.linalg.slogdet(a)), lambda a: tuple(torch.linalg.slogdet(a)),
                [(3, 3)]),
    "svdvals": (E.linalg.svdvals, torch.linalg.svdvals, [(4, 3)]),
    "pinv": (E.linalg.pinv, torch.linalg.pinv, [(4, 3)]),
    "vector_norm": (lambda a: E.linalg.vector_norm(a, ord=3),
                    lambda a: torch.linalg.vector_norm(a, ord=3), [(4,)]),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_first_order_vs_torch(name):
    ef, tf, shapes = COMPLEX_CASES[name]
    arrays = [_c(*s, seed=i) for i, s in enumerate(shapes)]
    xs = [E.asarray(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    eo, to = _outs(ef(*xs)), _outs(tf(*ts))
    rng = np.random.default_rng(5)
    gs = [rng.standard_normal(t.shape) + (1j * rng.standard_normal(t.shape) if t.is_complex()
                                          else 0) for t in to]
    eg = E.autograd.grad(list(eo), xs, grad_outputs=[E.asarray(g) for g in gs])
    tg = torch.autograd.grad(list(to), ts, grad_outputs=[torch.tensor(g) for g in gs])
    for e, t in zip(eg, tg):
        np.testing.assert_allclose(np.asarray(e), t.resolve_conj().numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, inf, -inf])
def test_cond(p):
    a = wellcond(2, 3, 3, seed=11) / 3
    assert gradcheck(lambda t: E.linalg.cond(t, p), (leaf(a),))
    if p in (None, 2, -2):
        tf = lambda t: torch.linalg.cond(t, p)  # noqa: E731
    else:   # torch.linalg.cond's backward fails for these p (an in-place op on inv's output)
        tf = lambda t: (torch.linalg.matrix_norm(t, ord=p)  # noqa: E731
                        * torch.linalg.matrix_norm(torch.linalg.inv(t), ord=p))
    check_torch(lambda t: E.linalg.cond(t, p), tf, a, rtol=1e-7, atol=1e-9)


def test_norm_numpy_integer_axis():
    a = rnd(2, 3)
    ax = np.int64(1)
    assert gradcheck(lambda t: E.linalg.norm(t, axis=ax), (leaf(a),))


# ---------------------------------------------------------------- PyTorch's and NumPy's spellings (OpInfo)

def test_vector_norm_dim_keepdim_and_positional_match_torch():
    a = rnd(3, 4, 2)
    for ord_ in (2, 1, 3.5, inf, -inf, 0):
        check_torch(lambda x: E.linalg.vector_norm(x, ord_, dim=(0, 2), keepdim=True),
                    lambda t: torch.linalg.vector_norm(t, ord_, dim=(0, 2), keepdim=True), a)
        check_torch(lambda x: E.linalg.vector_norm(x, ord_, 1, True),
                    lambda t: torch.linalg.vector_norm(t, ord_, 1, True), a)
    x = E.asarray(a)
    np.testing.assert_allclose(np.asarray(E.linalg.vector_norm(x, axis=1, keepdims=True)),
                               np.linalg.vector_norm(a, axis=1, keepdims=True), rtol=1e-12)
    with pytest.raises(TypeError, match="vector_norm: pass either axis= or dim="):
        E.linalg.vector_norm(x, axis=0, dim=0)


def test_matrix_norm_positional_and_dim_match_torch():
    a = rnd(3, 4, 5)
    for ord_ in ("fro", "nuc", 1, -1, 2, -2, inf, -inf):
        check_torch(lambda x: E.linalg.matrix_norm(x, ord_, (0, 2), True),
                    lambda t: torch.linalg.matrix_norm(t, ord_, (0, 2), True), a, rtol=1e-7)
        check_torch(lambda x: E.linalg.matrix_norm(x, ord=ord_, dim=(-1, 0), keepdim=False),
                    lambda t: torch.linalg.matrix_norm(t, ord=ord_, dim=(-1, 0)), a, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(E.linalg.matrix_norm(E.asarray(a), keepdims=True)),
                               np.linalg.matrix_norm(a, keepdims=True), rtol=1e-12)
    with pytest.raises(ValueError, match="matrix_norm: axis"):
        E.linalg.matrix_norm(E.asarray(a), dim=0)


def test_cross_dim_matches_torch():
    a, b = rnd(3, 4), rnd(3, 4, seed=1)
    check_torch(lambda x, y: E.linalg.cross(x, y, dim=0),
                lambda s, t: torch.linalg.cross(s, t, dim=0), a, b)
    np.testing.assert_allclose(np.asarray(E.cross(E.asarray(a), E.asarray(b), axis=0)),
                               np.cross(a, b, axis=0), rtol=1e-12)


def test_pinv_positional_rcond_hermitian_and_default_rtol():
    a = rnd(4, 3)
    h = a @ a.T                                      # rank 3 of 4: a cut-off is needed
    check_torch(lambda x: E.linalg.pinv(x, 1e-10), lambda t: torch.linalg.pinv(t, 1e-10), a)
    got = E.linalg.pinv(E.asarray(h), 1e-10, True)
    np.testing.assert_allclose(np.asarray(got), np.linalg.pinv(h, 1e-10, True), atol=1e-10)
    np.testing.assert_allclose(np.asarray(E.linalg.pinv(E.asarray(h), rtol=1e-10)),
                               np.linalg.pinv(h, rtol=1e-10), atol=1e-10)
    # default tolerance max(M, N) * eps (Array API, PyTorch) also in float32
    h32 = h.astype(np.float32)
    np.testing.assert_allclose(np.asarray(E.linalg.pinv(E.asarray(h32))),
                               torch.linalg.pinv(torch.tensor(h32)).numpy(), rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="pinv: give either rcond or rtol"):
        E.linalg.pinv(E.asarray(a), 1e-5, rtol=1e-5)


def test_matrix_rank_atol_matches_torch():
    a = np.diag([3.0, 1.0, 1e-3, 0.0])
    for kw in ({"atol": 0.01}, {"atol": 0.01, "rtol": 0.5}, {"atol": 1e-6}):
        assert E.linalg.matrix_rank(E.asarray(a), **kw).item() == \
            torch.linalg.matrix_rank(torch.tensor(a), **kw).item()


def test_svd_compute_uv_false_is_svdvals_with_its_gradient():
    a = rnd(4, 3)
    s = E.linalg.svd(E.asarray(a), compute_uv=False)
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    check_torch(lambda x: E.linalg.svd(x, False, False), torch.linalg.svdvals, a)
    check_torch(E.linalg.svdvals, torch.linalg.svdvals, a)
    assert gradcheck(lambda x: E.linalg.svd(x, compute_uv=False), (leaf(a),))


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (2, 3, 4)])
def test_svd_full_matrices_gradient_as_torch(shape):
    # PyTorch ignores the gradient of the null-space vectors past min(m, n)
    a = rnd(*shape)
    k = min(shape[-2:])

    def ef(x):
        u, s, vh = E.linalg.svd(x, full_matrices=True)
        return E.abs(u[..., :, :k]), s, E.abs(vh[..., :k, :])

    def tf(t):
        u, s, vh = torch.linalg.svd(t, full_matrices=True)
        return u[..., :, :k].abs(), s, vh[..., :k, :].abs()
    check_torch(ef, tf, a, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("shape", [(3, 5), (2, 2, 4), (1, 3)])
def test_qr_gradient_of_wide_matrices(shape):
    a = rnd(*shape)
    check_torch(lambda x: tuple(E.linalg.qr(x)), lambda t: tuple(torch.linalg.qr(t)), a,
                rtol=1e-8, atol=1e-10)
    assert gradcheck(lambda x: E.linalg.qr(x)[1], (leaf(a),))


def test_linalg_diagonal_dim1_dim2():
    a = rnd(3, 4, 5)
    check_torch(lambda x: E.linalg.diagonal(x, offset=1, dim1=0, dim2=2),
                lambda t: torch.linalg.diagonal(t, offset=1, dim1=0, dim2=2), a)


@pytest.mark.parametrize("method", ["linear", "lower", "midpoint"])
def test_quantile_gradient_in_q_matches_torch(method):
    x, q = rnd(3, 5), np.array([0.1, 0.5, 0.93])
    check_torch(lambda a, b: E.quantile(a, b, axis=1, method=method),
                lambda a, b: torch.quantile(a, b, dim=1, interpolation=method), x, q)
    check_torch(lambda a, b: E.nanquantile(a, b),
                lambda a, b: torch.nanquantile(a, b), x, q)


def test_diff_gradient_when_the_result_is_empty():
    a, p = rnd(2, 3), rnd(2, 2, seed=1)
    check_torch(lambda x, y: E.diff(x, 7, axis=1, prepend=y),
                lambda x, y: torch.diff(x, 7, dim=1, prepend=y), a, p)


def test_meshgrid_of_one_array_gradient():
    check_torch(lambda x: tuple(E.meshgrid(x, indexing="ij")),
                lambda t: torch.meshgrid(t, indexing="ij"), rnd(3))
