"""Autograd on 'cuda', continued: the gradient rules test_cuda_autograd.py and
test_cuda_nn.py never run.

Same method as test_cuda_autograd.py (whose ``run_both`` this reuses): each
case runs on CPU leaves and on GPU copies of them, back-propagates the same
upstream gradient, and compares outputs and every leaf's ``.grad`` (which must
live on the GPU), in float64 with tight tolerances unless a comment says why
not.  ``run_double`` does the same for double backward: first-order gradients
with ``create_graph=True``, then the backward of a random linear function of
them; that is what runs the ``_*_backward`` rules of the nn activations, of
conv2d, of the pools and of embedding.

Integer/bool arguments (indices, conditions, masks) are constants on the
device, never leaves.  Skipped, never faked, without a GPU (see
cuda_helpers.py); ``EMBER_GPU_TESTS_ON_CPU=1`` dry-runs the test logic on the CPU.
"""
import numpy as np
import pytest

import ember
import ember.linalg as LA
import ember.nn.functional as F
from cuda_helpers import DEV, GPU_MARK, assert_on_device, assert_same, gpu
from test_cuda_autograd import leaves, pos, rnd, run_both

pytestmark = GPU_MARK


def _to(a, device):
    a = ember.asarray(a)
    return a if device == "cpu" else gpu(a)


def run_double(fn, arrays, rtol=1e-10, atol=1e-10):
    """Double backward on both devices.  The upstream gradient is itself a leaf,
    so second-order gradients flow both into the inputs and into it (for rules
    linear in the input, e.g. relu, pools, embedding, only the latter is nonzero)."""
    results = {}
    for device in ("cpu", DEV):
        xs = leaves(arrays, device)
        y = fn(*xs)
        gy = _to(np.random.default_rng(100).standard_normal(y.shape).astype(host_dtype(y)), device)
        gy.requires_grad = True
        diff = [x for x in xs if x.requires_grad]
        gs = ember.autograd.grad(y, diff, grad_outputs=gy, create_graph=True, allow_unused=True)
        total = None
        for i, g in enumerate(gs):
            w = np.random.default_rng(200 + i).standard_normal(g.shape).astype(host_dtype(g))
            term = (g * _to(w, device)).sum()
            total = term if total is None else total + term
        total.backward()
        results[device] = ([g.detach() for g in gs], [x.grad for x in diff] + [gy.grad])
    (gc, sc), (gg, sg) = results["cpu"], results[DEV]
    for a, b in zip(gg, gc):
        assert_same(a, b, rtol=rtol, atol=atol)
    for a, b in zip(sg, sc):
        if b is None:
            assert a is None, "second-order gradient only on the GPU"
            continue
        assert a is not None, "no second-order gradient on the GPU leaf"
        assert_on_device(a)
        assert_same(a, b, rtol=rtol, atol=atol)


def host_dtype(x):
    return np.dtype(str(x.dtype))


def unit(*shape, seed=0):
    """Values in (-0.9, 0.9): inside the domain of arcsin/arccos/arctanh."""
    return rnd(*shape, seed=seed, low=-0.9, high=0.9)


def signed_pos(*shape, seed=0):
    """|values| in [0.5, 2], both signs: away from 0 (cbrt, copysign, reciprocal)."""
    return pos(*shape, seed=seed) * np.where(rnd(*shape, seed=seed + 50) > 0, 1.0, -1.0)


def distinct(*shape, seed=0):
    """A random permutation of well separated values: no ties (sort, topk, fmax...)."""
    n = int(np.prod(shape))
    v = np.random.default_rng(seed).permutation(n) * 0.37 - n * 0.15
    return v.reshape(shape).astype(np.float64)


def spd(n, seed=0, batch=()):
    """Well-conditioned symmetric positive definite matrices (distinct eigenvalues)."""
    m = rnd(*batch, n, n, seed=seed)
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def sym(a):
    """Symmetric part: cholesky/eigh read one triangle, so the leaf's gradient is
    only well defined through a symmetric function of it."""
    return (a + ember.matrix_transpose(a)) / 2


def wellcond(*shape, seed=0):
    """A random square matrix plus a dominant diagonal: far from singular."""
    return rnd(*shape, seed=seed) + shape[-1] * np.eye(shape[-1])


def cplx(a, b):
    return a + 1j * b


CASES = [
    # ---- elementwise, unary --------------------------------------------------
    ("arccos", lambda a: ember.arccos(a), [unit(3, 4)]),
    ("arcsin", lambda a: ember.arcsin(a), [unit(3, 4)]),
    ("arctanh", lambda a: ember.arctanh(a), [unit(3, 4)]),
    ("arccosh", lambda a: ember.arccosh(a), [rnd(3, 4, low=1.2, high=3.0)]),
    ("arcsinh", lambda a: ember.arcsinh(a), [rnd(3, 4)]),
    ("cbrt", lambda a: ember.cbrt(a), [signed_pos(3, 4)]),
    ("cosh_tanh", lambda a: ember.cosh(a) + ember.tanh(a), [rnd(3, 4)]),
    ("exp_exp2_expm1", lambda a: ember.exp(a) * ember.exp2(a) + ember.expm1(a), [rnd(3, 4)]),
    ("log10_log2_log1p", lambda a: ember.log10(a) + ember.log2(a) * ember.log1p(a), [pos(3, 4)]),
    ("deg2rad_rad2deg", lambda a: ember.deg2rad(a) * ember.rad2deg(a * a), [rnd(3, 4)]),
    ("negative_positive", lambda a: ember.negative(a) * ember.positive(a) ** 3, [rnd(3, 4)]),
    ("reciprocal", lambda a: ember.reciprocal(a), [signed_pos(3, 4)]),
    ("square", lambda a: ember.square(a), [rnd(3, 4)]),
    ("sinc", lambda a: ember.sinc(a), [rnd(3, 4)]),
    ("i0", lambda a: ember.i0(a), [rnd(3, 4)]),
    ("modf", lambda a: ember.modf(a * 3), [rnd(3, 4)]),
    ("nan_to_num_finite", lambda a: ember.nan_to_num(a * 2, posinf=5.0), [rnd(3, 4)]),
    # log of the negative entries is NaN, replaced: their gradient is (-)0
    ("nan_to_num_nan", lambda a: ember.nan_to_num(ember.log(a), nan=0.5), [rnd(3, 4)]),
    ("astype_roundtrip", lambda a: ember.astype(ember.astype(a, ember.float32), ember.float64) * a,
     [rnd(3, 4)]),
    ("astype_method", lambda a: a.astype(ember.float64) ** 2, [rnd(3, 4)]),
    ("copy", lambda a: ember.copy(a) * a, [rnd(3, 4)]),
    ("ascontiguousarray_of_transposed", lambda a: ember.ascontiguousarray(a.T) * 2, [rnd(3, 4)]),
    ("tanh_0d", lambda a: ember.tanh(a) * ember.exp(a), [np.array(0.7)]),
    ("exp_empty", lambda a: ember.exp(a), [rnd(0, 3)]),
    ("unary_noncontiguous", lambda a: ember.arcsinh(a.T[::2]) + ember.expm1(a.T[1::2]), [rnd(4, 6)]),
    # complex intermediates: the leaves stay real
    ("real_imag", lambda a, b: ember.real(cplx(a, b) ** 2) + ember.imag(cplx(a, b) ** 3),
     [rnd(3, 4), rnd(3, 4, seed=1)]),
    ("conj_conjugate", lambda a, b: ember.real(ember.conj(cplx(a, b)) * cplx(b, a))
     + ember.imag(ember.conjugate(cplx(a, b)) * cplx(a, a)), [rnd(3, 4), rnd(3, 4, seed=1)]),
    ("angle", lambda a, b: ember.angle(cplx(a, b)), [signed_pos(3, 4), signed_pos(3, 4, seed=1)]),
    # ---- elementwise, binary --------------------------------------------------
    ("arctan2", lambda a, b: ember.arctan2(a, b), [rnd(3, 4), signed_pos(3, 4, seed=1)]),
    ("copysign", lambda a, b: ember.copysign(a, b), [signed_pos(3, 4), signed_pos(3, 4, seed=1)]),
    ("divide_broadcast", lambda a, b: ember.divide(a, b), [rnd(3, 4), pos(4, seed=1)]),
    ("multiply_broadcast", lambda a, b: ember.multiply(a, b), [rnd(3, 1), rnd(1, 4, seed=1)]),
    ("multiply_noncontiguous", lambda a, b: ember.multiply(a.T, b[::2]), [rnd(4, 3), rnd(6, 4, seed=1)]),
    ("subtract_broadcast", lambda a, b: ember.subtract(a, b) ** 2, [rnd(2, 3, 4), rnd(3, 1, seed=1)]),
    ("multiply_empty", lambda a, b: ember.multiply(a, b), [rnd(0, 4), rnd(4, seed=1)]),
    ("float_power", lambda a, b: ember.float_power(a, b), [pos(3, 4), rnd(3, 4, seed=1)]),
    ("fmax_fmin", lambda a, b: ember.fmax(a, b) + 2 * ember.fmin(a, b),
     [distinct(3, 4), distinct(3, 4, seed=1) + 0.1]),
    ("fmod", lambda a, b: ember.fmod(a, b), [rnd(3, 4, low=-5, high=5), pos(3, 4, seed=1)]),
    ("remainder", lambda a, b: ember.remainder(a, b), [rnd(3, 4, low=-5, high=5), signed_pos(3, 4, seed=1)]),
    ("hypot", lambda a, b: ember.hypot(a, b), [signed_pos(3, 4), rnd(3, 4, seed=1)]),
    ("ldexp", lambda a, e: ember.ldexp(a, e), [rnd(3, 4), np.arange(-6, 6).reshape(3, 4)]),
    ("logaddexp2", lambda a, b: ember.logaddexp2(a, b), [rnd(3, 4), rnd(4, seed=1)]),
    # ---- joining, splitting, shape -------------------------------------------
    ("atleast_1d_2d_3d", lambda a, b: ember.atleast_1d(a) * ember.atleast_2d(b) * ember.atleast_3d(a),
     [np.array(0.3), rnd(4, seed=1)]),
    ("broadcast_arrays", lambda a, b: ember.broadcast_arrays(a, b), [rnd(3, 1), rnd(4, seed=1)]),
    ("cat", lambda a, b: ember.cat([a, b], dim=1), [rnd(2, 3), rnd(2, 2, seed=1)]),
    ("concat", lambda a, b: ember.concat([a, b], axis=0), [rnd(2, 3), rnd(1, 3, seed=1)]),
    ("column_stack", lambda a, b: ember.column_stack([a, b]), [rnd(3), rnd(3, 2, seed=1)]),
    ("hstack_vstack_dstack", lambda a, b: ember.hstack([a, b]).sum() + ember.vstack([a, b]) * ember.dstack([a, b]).sum(),
     [rnd(2, 3), rnd(2, 3, seed=1)]),
    ("hsplit", lambda a: ember.hsplit(a, 2), [rnd(3, 4)]),
    ("vsplit", lambda a: ember.vsplit(a, [1]), [rnd(3, 4)]),
    ("dsplit", lambda a: ember.dsplit(a, 2), [rnd(2, 3, 4)]),
    ("unstack", lambda a: ember.unstack(a, axis=1), [rnd(2, 3)]),
    ("meshgrid_xy", lambda a, b: ember.meshgrid(a, b), [rnd(3), rnd(4, seed=1)]),
    ("meshgrid_ij", lambda a, b: ember.meshgrid(a, b, indexing="ij"), [rnd(3), rnd(4, seed=1)]),
    ("fliplr_flipud", lambda a: ember.fliplr(a) * ember.flipud(a), [rnd(3, 3)]),
    ("rot90", lambda a: ember.rot90(a) + ember.rot90(a, k=3, axes=(1, 0)), [rnd(3, 3)]),
    ("matrix_transpose", lambda a: ember.matrix_transpose(a) * 2, [rnd(2, 3, 4)]),
    ("permute", lambda a: ember.permute(a, 2, 0, 1) ** 2, [rnd(2, 3, 4)]),
    ("ravel_of_transposed", lambda a: ember.ravel(a.T) ** 2, [rnd(3, 4)]),
    ("repeat", lambda a: ember.repeat(a, 2, axis=1) * ember.repeat(a, 2, axis=1), [rnd(3, 2)]),
    ("repeat_flat", lambda a: ember.repeat(a, 3), [rnd(2, 2)]),
    ("resize_wraps", lambda a: ember.resize(a, (5, 3)), [rnd(3, 2)]),
    ("tile", lambda a: ember.tile(a, (2, 3)), [rnd(2, 3)]),
    ("diag_vector_to_matrix", lambda a: ember.diag(a, k=1), [rnd(3)]),
    ("diag_matrix_to_vector", lambda a: ember.diag(a, k=-1), [rnd(4, 4)]),
    ("diagonal", lambda a: ember.diagonal(a, offset=1, axis1=1, axis2=2), [rnd(2, 3, 4)]),
    ("trace", lambda a: ember.trace(a) * ember.trace(a, offset=1), [rnd(3, 4)]),
    ("kron", lambda a, b: ember.kron(a, b), [rnd(2, 3), rnd(3, 2, seed=1)]),
    # ---- indexing, selection --------------------------------------------------
    ("choose", lambda i, a, b, c: ember.choose(i, [a, b, c]),
     [np.array([[0, 1, 2, 1], [2, 2, 0, 0], [1, 0, 1, 2]]), rnd(3, 4), rnd(3, 4, seed=1), rnd(4, seed=2)]),
    ("compress", lambda c, a: ember.compress(c, a, axis=1), [np.array([True, False, True, True]), rnd(3, 4)]),
    ("extract", lambda a: ember.extract(a > 0, a * 2), [rnd(3, 4)]),
    ("select", lambda a, b: ember.select([a > 0.5, a < -0.5], [a * 2, b], default=0.0),
     [rnd(3, 4), rnd(3, 4, seed=1)]),
    ("masked_fill", lambda m, a: ember.masked_fill(a * a, m, 0.5),
     [np.array([[True, False, False, True]] * 3), rnd(3, 4)]),
    ("index_select_repeats", lambda i, a: ember.index_select(a, 0, i), [np.array([2, 0, 2, 1]), rnd(3, 4)]),
    ("index_add_repeats", lambda i, x, s: ember.index_add(x, 1, i, s, alpha=2.0),
     [np.array([3, 0, 3]), rnd(2, 4), rnd(2, 3, seed=1)]),
    ("scatter_add_repeats", lambda i, x, s: ember.scatter_add(x, 1, i, s),
     [np.array([[0, 2, 0], [3, 3, 1]]), rnd(2, 4), rnd(2, 3, seed=1)]),
    # ---- sorting (no ties: the permutation is unique) --------------------------
    ("sort", lambda a: ember.sort(a, axis=1) * ember.sort(a, axis=0, descending=True), [distinct(3, 4)]),
    ("sort_noncontiguous", lambda a: ember.sort(a.T[:, ::2]), [distinct(6, 4)]),
    ("msort", lambda a: ember.msort(a), [distinct(4, 3)]),
    ("partition", lambda a: ember.partition(a, 2, axis=-1), [distinct(3, 5)]),
    ("topk_largest", lambda a: ember.topk(a, 2)[0], [distinct(3, 5)]),
    ("topk_smallest", lambda a: ember.topk(a, 3, dim=0, largest=False)[0], [distinct(4, 3)]),
    ("sort_empty", lambda a: ember.sort(a), [rnd(2, 0)]),
    # ---- products, norms, linalg reductions ----------------------------------
    ("dot", lambda a, b: ember.dot(a, b), [rnd(3, 4), rnd(4, 2, seed=1)]),
    ("dot_vectors", lambda a, b: ember.dot(a, b), [rnd(5), rnd(5, seed=1)]),
    ("inner", lambda a, b: ember.inner(a, b), [rnd(2, 4), rnd(3, 4, seed=1)]),
    ("outer", lambda a, b: ember.outer(a, b), [rnd(3), rnd(4, seed=1)]),
    ("vdot", lambda a, b: ember.vdot(a, b), [rnd(2, 3), rnd(2, 3, seed=1)]),
    ("vecdot_broadcast", lambda a, b: ember.vecdot(a, b), [rnd(2, 3, 4), rnd(4, seed=1)]),
    ("tensordot_int", lambda a, b: ember.tensordot(a, b, axes=1), [rnd(2, 3), rnd(3, 4, seed=1)]),
    ("tensordot_pairs", lambda a, b: ember.tensordot(a, b, axes=([1, 0], [0, 2])),
     [rnd(2, 3, 4), rnd(3, 5, 2, seed=1)]),
    ("cross", lambda a, b: ember.cross(a, b), [rnd(4, 3), rnd(4, 3, seed=1)]),
    ("linalg_cross", lambda a, b: LA.cross(a, b, axis=0), [rnd(3, 2), rnd(3, 2, seed=1)]),
    ("linalg_outer", lambda a, b: LA.outer(a, b), [rnd(3), rnd(2, seed=1)]),
    ("linalg_tensordot", lambda a, b: LA.tensordot(a, b, axes=2), [rnd(2, 3, 4), rnd(3, 4, 2, seed=1)]),
    ("linalg_vecdot", lambda a, b: LA.vecdot(a, b, axis=0), [rnd(3, 4), rnd(3, 4, seed=1)]),
    ("linalg_diagonal_trace", lambda a: LA.diagonal(a, offset=-1) * LA.trace(a)[..., None], [rnd(2, 3, 3)]),
    ("multi_dot", lambda a, b, c: LA.multi_dot([a, b, c]), [rnd(2, 3), rnd(3, 4, seed=1), rnd(4, 2, seed=2)]),
    ("matrix_power_3", lambda a: LA.matrix_power(a, 3), [rnd(3, 3)]),
    ("matrix_power_neg2", lambda a: LA.matrix_power(a, -2), [wellcond(3, 3)]),
    ("vector_norm_2", lambda a: LA.vector_norm(a, axis=1), [rnd(3, 4)]),
    ("vector_norm_1_inf_3", lambda a: LA.vector_norm(a, ord=1) + LA.vector_norm(a, ord=np.inf)
     + LA.vector_norm(a, ord=3, axis=0, keepdims=True), [distinct(3, 4)]),
    ("norm_default_and_axis", lambda a: LA.norm(a) + LA.norm(a, ord=1, axis=0), [signed_pos(3, 4)]),
    ("matrix_norm_fro", lambda a: LA.matrix_norm(a), [rnd(2, 3, 4)]),
    ("matrix_norm_1_inf", lambda a: LA.matrix_norm(a, ord=1) + LA.matrix_norm(a, ord=np.inf), [distinct(3, 4)]),
    # nuc/2 norm and cond go through the SVD: LAPACK and cuSOLVER differ by more than ulps
    ("matrix_norm_nuc_2", lambda a: LA.matrix_norm(a, ord="nuc") + LA.matrix_norm(a, ord=2), [rnd(3, 4)], 1e-8),
    ("cond", lambda a: LA.cond(a), [wellcond(3, 3)], 1e-8),
    ("cond_fro", lambda a: LA.cond(a, "fro"), [wellcond(3, 3)], 1e-8),
    # ---- solves and decompositions (LAPACK vs cuSOLVER: 1e-8) -----------------
    ("det_batched", lambda a: LA.det(a), [wellcond(2, 3, 3)], 1e-8),
    ("slogdet", lambda a: LA.slogdet(a)[1], [wellcond(3, 3) * -1], 1e-8),
    ("inv", lambda a: LA.inv(a), [wellcond(3, 3)], 1e-8),
    ("inv_of_transposed", lambda a: LA.inv(a.T), [wellcond(3, 3)], 1e-8),
    ("solve_matrix", lambda a, b: LA.solve(a, b), [wellcond(3, 3), rnd(3, 2, seed=1)], 1e-8),
    ("solve_batched", lambda a, b: LA.solve(a, b), [wellcond(2, 3, 3), rnd(2, 3, 1, seed=1)], 1e-8),
    ("cholesky", lambda a: LA.cholesky(sym(a)), [spd(3)], 1e-8),
    ("cholesky_upper", lambda a: LA.cholesky(sym(a), upper=True), [spd(3, seed=1)], 1e-8),
    ("lstsq", lambda a, b: LA.lstsq(a, b)[0], [rnd(5, 3), rnd(5, 2, seed=1)], 1e-8),
    ("pinv", lambda a: LA.pinv(a), [rnd(4, 3)], 1e-8),
    # eigenvalues are unique; eigenvectors only up to sign, so only V*V (sign-invariant) is used
    ("eigh", lambda a: (lambda w, v: (w, v ** 2))(*LA.eigh(sym(a))), [spd(4)], 1e-8),
    ("eigvalsh", lambda a: LA.eigvalsh(sym(a)), [spd(4, batch=(2,))], 1e-8),
    # Q and R only up to the sign of each column/row: Q*Q and R*R are sign-invariant
    ("qr", lambda a: tuple(m ** 2 for m in LA.qr(a)), [rnd(4, 3)], 1e-8),
    ("qr_square", lambda a: tuple(m ** 2 for m in LA.qr(a)), [wellcond(3, 3)], 1e-8),
    # singular vectors only up to sign: S, U*U and Vh*Vh (distinct singular values)
    ("svd_reduced", lambda a: (lambda u, s, vh: (s, u ** 2, vh ** 2))(*LA.svd(a, full_matrices=False)),
     [rnd(4, 3)], 1e-8),
    ("svd_reconstruction", lambda a: (lambda u, s, vh: (u * s[..., None, :]) @ vh)(*LA.svd(a, full_matrices=False)),
     [rnd(3, 4)], 1e-8),
    ("svdvals", lambda a: LA.svdvals(a), [rnd(2, 4, 3)], 1e-8),
    # ---- nn -----------------------------------------------------------------
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
     [rnd(2, 2, 4, 3), rnd(2, 2, 5, 3, seed=1), rnd(2, 2, 5, 2, seed=2)]),
    ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [rnd(2, 2, 4, 3), rnd(2, 2, 4, 3, seed=1), rnd(2, 2, 4, 3, seed=2)]),
    ("sdpa_bool_mask_scale", lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.5),
     [np.tril(np.ones((4, 5), bool), 1), rnd(1, 2, 4, 3), rnd(1, 2, 5, 3, seed=1), rnd(1, 2, 5, 3, seed=2)]),
    ("sdpa_float_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     [rnd(2, 4, 3), rnd(2, 5, 3, seed=1), rnd(2, 5, 3, seed=2), rnd(4, 5, seed=3)]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_gradient_matches_cpu(case):
    name, fn, arrays, *tol = case
    tol = tol[0] if tol else 1e-10
    run_both(fn, arrays, rtol=tol, atol=tol)


F32_CASES = [
    ("arcsinh_expm1", lambda a: ember.arcsinh(a) * ember.expm1(a), [rnd(8, 16)]),
    ("hypot_broadcast", lambda a, b: ember.hypot(a, b), [rnd(8, 16), rnd(16, seed=1)]),
    ("tensordot", lambda a, b: ember.tensordot(a, b, axes=([1, 2], [0, 1])), [rnd(4, 8, 6), rnd(8, 6, 5, seed=1)]),
    ("kron", lambda a, b: ember.kron(a, b), [rnd(3, 4), rnd(4, 3, seed=1)]),
    ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [rnd(2, 2, 8, 4), rnd(2, 2, 8, 4, seed=1), rnd(2, 2, 8, 4, seed=2)]),
    ("sort", lambda a: ember.sort(a, axis=0), [distinct(6, 5)]),
]


@pytest.mark.parametrize("case", F32_CASES, ids=lambda c: c[0])
def test_float32_gradient_close(case):
    name, fn, arrays = case
    run_both(fn, [a.astype(np.float32) for a in arrays], rtol=1e-4, atol=1e-5)


def test_float32_linalg_solve_close():
    a, b = wellcond(4, 4).astype(np.float32), rnd(4, 2, seed=1).astype(np.float32)
    run_both(lambda x, y: LA.solve(x, y), [a, b], rtol=1e-4, atol=1e-5)


# ---- double backward (create_graph=True) ------------------------------------
DOUBLE_CASES = [
    ("elu", lambda a: F.elu(a, alpha=0.7), [rnd(3, 5)]),
    ("gelu", lambda a: F.gelu(a), [rnd(3, 5)]),
    ("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), [rnd(3, 5)]),
    ("hardtanh", lambda a: F.hardtanh(a, -0.8, 1.2), [rnd(3, 5)]),
    ("leaky_relu", lambda a: F.leaky_relu(a, 0.1), [rnd(3, 5)]),
    ("relu", lambda a: F.relu(a), [rnd(3, 5)]),
    ("sigmoid", lambda a: F.sigmoid(a), [rnd(3, 5)]),
    ("silu", lambda a: F.silu(a), [rnd(3, 5)]),
    ("softplus", lambda a: F.softplus(a, beta=2.0, threshold=3.0), [rnd(3, 5)]),
    ("tanh", lambda a: F.tanh(a), [rnd(3, 5)]),
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1),
     [rnd(2, 3, 5, 5), rnd(4, 3, 3, 3, seed=1), rnd(4, seed=2)]),
    ("conv2d_stride", lambda x, w: F.conv2d(x, w, stride=2), [rnd(1, 2, 6, 6), rnd(3, 2, 2, 2, seed=1)]),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), [rnd(2, 3, 7, 7)]),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [rnd(2, 3, 5, 7)]),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [distinct(2, 3, 6, 6)]),
    ("embedding", lambda i, w: F.embedding(i, w), [np.array([[1, 2, 1], [9, 1, 0]]), rnd(10, 4)]),
    # a few elementwise rules whose own gradients are ember ops too
    ("arcsinh_cbrt", lambda a: ember.arcsinh(a) * ember.cbrt(a), [signed_pos(3, 4)]),
    ("hypot_arctan2", lambda a, b: ember.hypot(a, b) + ember.arctan2(a, b), [rnd(3, 4), signed_pos(3, 4, seed=1)]),
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [rnd(2, 4, 3), rnd(2, 4, 3, seed=1), rnd(2, 4, 3, seed=2)]),
    ("inv", lambda a: LA.inv(a), [wellcond(3, 3)], 1e-8),
]


@pytest.mark.parametrize("case", DOUBLE_CASES, ids=lambda c: c[0])
def test_double_backward_matches_cpu(case):
    name, fn, arrays, *tol = case
    tol = tol[0] if tol else 1e-10
    run_double(fn, arrays, rtol=tol, atol=tol)
