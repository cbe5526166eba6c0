"""ember on 'cuda' against ember on the CPU for the public ops that the other
GPU suites (test_cuda_device/_nn/_autograd) never call on the GPU: joining and
splitting, sorting/searching/sets, nan-reductions and statistics, linalg,
integer and float-decomposition math, indexing and in-place writes, and the
comparison helpers (allclose & co).

Same oracle as test_cuda_device.py: every case builds NumPy inputs, runs the
op on ember CPU arrays and on copies on the test device, and compares device,
dtype, shape and values (or the exception type when the CPU refuses the input).
Decompositions that are unique only up to sign/order are compared through
invariants.  Skipped without a GPU; ``EMBER_GPU_TESTS_ON_CPU=1`` dry-runs the
cases with the device 'cpu' (see cuda_helpers.py).

Not covered (they take no array data and no device argument): can_cast,
broadcast_shapes, diag_indices, tril_indices, triu_indices.
"""
import numpy as np
import pytest

import ember
from cuda_helpers import (GPU_MARK, assert_on_device, assert_same, assert_same_tree,
                          gpu, host, layout_pairs, settle)
from helpers import random_array
from test_cuda_device import check_like_cpu, cpu_or_error, quiet

pytestmark = GPU_MARK

BF16 = ember.bfloat16
FLOATS = ["float32", "float64"]
LOW_FLOATS = ["float16", BF16]
#: float64 GPU-vs-CPU tolerance for ops built from several kernels (linalg, statistics)
R64 = 1e-10
#: float32 tolerance for solvers/factorisations (different algorithms on each device)
R32 = 2e-4
#: float32 absolute tolerance of reductions (sums of a few dozen values near zero)
A32 = 2e-5


# ----------------------------------------------------------------- inputs

def _rng(seed):
    return np.random.default_rng(seed)


def F(shape, dtype="float64", seed=0, low=-5, high=5):
    """Random floats (or ints for an integer dtype) in [low, high)."""
    return random_array(shape, dtype, _rng(seed), low, high)


def NANS(shape, dtype="float64", seed=0, frac=0.3):
    """Random floats with about ``frac`` of the entries NaN."""
    a = F(shape, "float64", seed)
    a[_rng(seed + 100).random(shape) < frac] = np.nan
    return a.astype(dtype)


def DISTINCT(shape, dtype="float64", seed=0):
    """A shuffled range (no ties: orders and indices are unique)."""
    n = int(np.prod(shape))
    return (_rng(seed).permutation(n) - n // 2).reshape(shape).astype(dtype)


def SPD(n, dtype="float64", seed=0, batch=()):
    """Well-conditioned symmetric positive definite matrices: a a^T + n I."""
    a = F(batch + (n, n), "float64", seed, -1, 1)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def WELL(shape, dtype="float64", seed=0):
    """Well-conditioned general (non-symmetric) matrices: random + n I."""
    n = shape[-1]
    a = F(shape, "float64", seed, -1, 1)
    if shape[-2] == n:
        a = a + n * np.eye(n)
    return a.astype(dtype)


def _on(conv, obj):
    """``obj`` with every NumPy array (also inside lists/tuples) turned into ember by ``conv``."""
    if isinstance(obj, np.ndarray):
        return conv(obj)
    if isinstance(obj, list):
        return [_on(conv, o) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_on(conv, o) for o in obj)
    return obj


def _cpu(a):
    return ember.asarray(a.copy())


def both(args):
    """(cpu_args, gpu_args) from NumPy args."""
    return _on(_cpu, args), _on(gpu, args)


def C(name, fn, *args, rtol=None, atol=None, error=False):
    """One table case: ``fn(*args)`` with NumPy ``args`` moved to each device.
    ``error``: the CPU refuses the input (the GPU must raise the same type)."""
    return pytest.param(fn, args, rtol, atol, error, id=name)


def run_case(fn, args, rtol, atol, error):
    cpu_args, gpu_args = both(args)
    _, err = cpu_or_error(fn, *_on(_cpu, args))
    if error:
        assert err is not None, "the CPU accepted an input this case expects it to refuse"
    else:
        assert err is None, f"the CPU failed on this case: {err!r}"
    check_like_cpu(fn, cpu_args, gpu_args, rtol=rtol, atol=atol)


# ----------------------------------------------------------------- joining / splitting / reshaping

_A34 = F((3, 4), "float32")
_B34 = F((3, 4), "float32", 1)
_V3 = F((3,), "float64")
JOIN_CASES = [
    C("atleast_1d_0d", ember.atleast_1d, np.array(2.5)),
    C("atleast_1d_many", lambda a, b, c: ember.atleast_1d(a, b, c), np.array(1.0), _V3, _A34),
    C("atleast_2d_0d", ember.atleast_2d, np.array(3, np.int64)),
    C("atleast_2d_1d", ember.atleast_2d, _V3),
    C("atleast_2d_many", lambda a, b: ember.atleast_2d(a, b), _V3, _A34),
    C("atleast_3d_0d", ember.atleast_3d, np.array(1.5, np.float32)),
    C("atleast_3d_1d", ember.atleast_3d, _V3),
    C("atleast_3d_2d", ember.atleast_3d, _A34),
    C("atleast_3d_many", lambda a, b: ember.atleast_3d(a, b), _V3, F((2, 3, 4))),
    C("broadcast_arrays", lambda a, b, c: ember.broadcast_arrays(a, b, c),
      F((3, 1)), F((1, 4), "float32"), np.array(7, np.int32)),
    C("broadcast_arrays_empty", lambda a, b: ember.broadcast_arrays(a, b), F((0, 1)), F((1, 4))),
    C("cat_dim1", lambda a, b: ember.cat([a, b], dim=1), _A34, _B34),
    C("cat_axis0", lambda a, b: ember.cat([a, b], axis=0), _A34, _B34),
    C("cat_empty", lambda a, b: ember.cat([a, b]), F((0, 4), "float32"), _A34),
    C("concat_axis0", lambda a, b: ember.concat([a, b, a]), _A34, _B34),
    C("concat_axis_none", lambda a, b: ember.concat([a, b], axis=None), _A34, F((5,), "float32")),
    C("concat_promote", lambda a, b: ember.concat([a, b], axis=-1),
      F((3, 2), "int32"), F((3, 4), "float64")),
    C("concat_dtype", lambda a, b: ember.concat([a, b], dtype=ember.float64), _A34, _B34),
    C("concat_mismatch", lambda a, b: ember.concat([a, b], axis=0), _A34, F((3, 5)), error=True),
    C("column_stack_1d", lambda a, b: ember.column_stack([a, b]), _V3, F((3,), seed=2)),
    C("column_stack_mixed", lambda a, b: ember.column_stack([a, b]), _V3, F((3, 2))),
    C("hstack_1d", lambda a, b: ember.hstack([a, b]), _V3, F((5,))),
    C("hstack_2d", lambda a, b: ember.hstack([a, b]), _A34, F((3, 2), "float32")),
    C("hstack_promote", lambda a, b: ember.hstack([a, b]), F((4,), "int32"), F((2,), "float32")),
    C("vstack_1d", lambda a, b: ember.vstack([a, b]), _V3, F((3,), seed=1)),
    C("vstack_2d", lambda a, b: ember.vstack([a, b]), _A34, F((2, 4), "float32")),
    C("vstack_0d", lambda a, b: ember.vstack([a, b]), np.array(1.0), np.array(2.0)),
    C("dstack_1d", lambda a, b: ember.dstack([a, b]), _V3, F((3,), seed=1)),
    C("dstack_2d", lambda a, b: ember.dstack([a, b]), _A34, _B34),
    C("hsplit_sections", lambda a: ember.hsplit(a, 2), _A34),
    C("hsplit_indices", lambda a: ember.hsplit(a, [1, 3]), _A34),
    C("hsplit_1d", lambda a: ember.hsplit(a, 3), F((6,))),
    C("hsplit_uneven", lambda a: ember.hsplit(a, 3), _A34, error=True),
    C("vsplit_sections", lambda a: ember.vsplit(a, 3), _A34),
    C("vsplit_indices", lambda a: ember.vsplit(a, [1, 5]), _A34),
    C("dsplit_sections", lambda a: ember.dsplit(a, 2), F((2, 3, 4))),
    C("dsplit_indices", lambda a: ember.dsplit(a, [3]), F((2, 3, 4))),
    C("meshgrid_xy", lambda a, b: ember.meshgrid(a, b), _V3, F((4,), "float64", 1)),
    C("meshgrid_ij", lambda a, b, c: ember.meshgrid(a, b, c, indexing="ij"),
      _V3, F((2,)), F((4,), seed=2)),
    C("meshgrid_sparse", lambda a, b: ember.meshgrid(a, b, sparse=True), _V3, F((4,), "float64", 1)),
    C("ix_int", lambda a, b: ember.ix_(a, b), np.array([0, 2]), np.array([1, 3, 0])),
    C("ix_bool", lambda a, b: ember.ix_(a, b), np.array([True, False, True]), np.array([2, 1])),
    C("ix_applied", lambda x, a, b: x[ember.ix_(a, b)], _A34, np.array([2, 0]), np.array([3, 1, 1])),
    C("flatten", ember.flatten, F((2, 3, 4))),
    C("flatten_range", lambda a: ember.flatten(a, 1, 2), F((2, 3, 4, 2))),
    C("flatten_0d", ember.flatten, np.array(4.0)),
    C("flatten_method", lambda a: a.flatten(), F((2, 3), "float32")),
    C("fliplr", ember.fliplr, _A34),
    C("fliplr_1d", ember.fliplr, _V3, error=True),
    C("flipud", ember.flipud, _A34),
    C("flipud_1d", ember.flipud, _V3),
    C("rot90", ember.rot90, _A34),
    C("rot90_k2", lambda a: ember.rot90(a, 2), _A34),
    C("rot90_k-1", lambda a: ember.rot90(a, -1), _A34),
    C("rot90_axes", lambda a: ember.rot90(a, 1, axes=(1, 2)), F((2, 3, 4))),
    C("permute", lambda a: ember.permute(a, 2, 0, 1), F((2, 3, 4))),
    C("permute_tuple", lambda a: ember.permute(a, (1, 0)), _A34),
    C("unsqueeze_0", lambda a: ember.unsqueeze(a, 0), _A34),
    C("unsqueeze_-1", lambda a: ember.unsqueeze(a, -1), _A34),
    C("unsqueeze_0d", lambda a: ember.unsqueeze(a, 0), np.array(2.0)),
    C("resize_grow", lambda a: ember.resize(a, (4, 5)), _A34),
    C("resize_shrink", lambda a: ember.resize(a, 5), _A34),
    C("resize_empty", lambda a: ember.resize(a, (0,)), _A34),
    C("diag_1d", ember.diag, _V3),
    C("diag_1d_k1", lambda a: ember.diag(a, 1), _V3),
    C("diag_1d_k-2", lambda a: ember.diag(a, -2), _V3),
    C("diag_2d", ember.diag, _A34),
    C("diag_2d_k1", lambda a: ember.diag(a, 1), _A34),
    C("diag_2d_k-2", lambda a: ember.diag(a, -2), _A34),
    C("diag_empty", ember.diag, F((0,))),
    C("trim_zeros_fb", ember.trim_zeros, np.array([0, 0, 1.5, 0, 2, 0])),
    C("trim_zeros_f", lambda a: ember.trim_zeros(a, "f"), np.array([0, 0, 1, 0, 2, 0], np.int32)),
    C("trim_zeros_b", lambda a: ember.trim_zeros(a, "b"), np.array([0, 3, 0, 0], np.int64)),
    C("trim_zeros_all_zero", ember.trim_zeros, np.zeros(4)),
    C("kron_2d", ember.kron, F((2, 2)), F((3, 3), seed=1)),
    C("kron_1d", ember.kron, F((3,), "float32"), F((2,), "float32", 1)),
    C("kron_int", ember.kron, F((2, 3), "int64"), F((2,), "int64", 1)),
]


@pytest.mark.parametrize("fn,args,rtol,atol,error", JOIN_CASES)
def test_join_split_reshape(fn, args, rtol, atol, error):
    run_case(fn, args, rtol, atol, error)


# ----------------------------------------------------------------- sorting / searching / sets

_SORTED = np.sort(F((8,), seed=3))
_TIES = np.array([3, 1, 2, 3, 1, 1, 4, 2, 3, 0], np.int64)
_NAN1 = np.array([2.0, np.nan, 1.0, 2.0, np.nan, -1.0, 1.0])
_KEYS = np.array([[1, 0, 1, 0, 2, 2], [3, 3, 1, 1, 0, 2]], np.int64)
_MASK34 = F((3, 4), "bool", 4)
SORT_CASES = [
    C("msort_f64", ember.msort, F((5, 3))),
    C("msort_f32", ember.msort, F((5, 3), "float32")),
    C("msort_nan", ember.msort, _NAN1),
    C("msort_int", ember.msort, F((4, 3), "int32")),
    C("msort_empty", ember.msort, F((0, 3))),
    C("lexsort", lambda k: ember.lexsort(k), _KEYS),
    C("lexsort_list", lambda a, b: ember.lexsort([a, b]), _KEYS[0], _KEYS[1]),
    C("lexsort_float", lambda k: ember.lexsort(k), np.round(F((3, 9), seed=5))),
    C("lexsort_axis0", lambda k: ember.lexsort(k, axis=0), F((2, 4, 3), "int64", 6, 0, 3)),
    C("lexsort_3_keys_ties", lambda k: ember.lexsort(k), np.array([[1, 0, 1, 0, 1, 0],
                                                                  [1, 1, 0, 0, 1, 1],
                                                                  [2, 2, 2, 2, 1, 1]])),
    C("searchsorted_left", ember.searchsorted, _SORTED, F((3, 4), seed=4)),
    C("searchsorted_right", lambda a, v: ember.searchsorted(a, v, side="right"),
      np.array([1, 2, 2, 2, 5, 7], np.int64), np.array([0, 2, 3, 7, 8], np.int64)),
    C("searchsorted_sorter", lambda a, v, s: ember.searchsorted(a, v, sorter=s),
      F((8,), seed=3), F((5,), seed=4), np.argsort(F((8,), seed=3))),
    C("searchsorted_0d", ember.searchsorted, _SORTED, np.array(0.5)),
    C("searchsorted_f32", ember.searchsorted, _SORTED.astype(np.float32), F((6,), "float32", 4)),
    C("digitize", ember.digitize, F((3, 4), seed=4), np.array([-4.0, -1.0, 0.0, 2.0, 3.5])),
    C("digitize_right", lambda x, b: ember.digitize(x, b, right=True),
      np.array([0, 1, 2, 3, 4, 5], np.int64), np.array([1, 3, 4], np.int64)),
    C("digitize_decreasing", ember.digitize, F((7,), seed=4), np.array([3.0, 0.0, -2.0])),
    C("digitize_empty", ember.digitize, F((0,)), np.array([0.0, 1.0])),
    C("isin", ember.isin, F((3, 4), "int64", 1), np.array([0, 2, -3, 4])),
    C("isin_invert", lambda a, b: ember.isin(a, b, invert=True), F((3, 4), "int64", 1), np.array([0, 2])),
    C("isin_float", ember.isin, np.array([1.5, 2.0, np.nan, 3.0]), np.array([2.0, np.nan, 1.5])),
    C("intersect1d", ember.intersect1d, _TIES, np.array([4, 3, 9, 3], np.int64)),
    C("intersect1d_float", ember.intersect1d, np.round(F((10,), seed=1)), np.round(F((8,), seed=2))),
    C("intersect1d_empty", ember.intersect1d, F((0,)), F((3,))),
    C("setdiff1d", ember.setdiff1d, _TIES, np.array([1, 4], np.int64)),
    C("setdiff1d_float", ember.setdiff1d, np.round(F((10,), seed=1)), np.round(F((8,), seed=2))),
    C("union1d", ember.union1d, _TIES, np.array([7, -1, 3], np.int64)),
    C("union1d_2d", ember.union1d, np.round(F((2, 3), seed=1)), np.round(F((4,), seed=2))),
    C("unique", ember.unique, _TIES),
    C("unique_float_2d", ember.unique, np.round(F((4, 5), "float32", 2))),
    C("unique_all_returns", lambda a: ember.unique(a, return_index=True, return_inverse=True,
                                                   return_counts=True), _TIES),
    C("unique_axis0", lambda a: ember.unique(a, axis=0),
      np.array([[1, 2], [0, 5], [1, 2], [0, 1]], np.int64)),
    C("unique_nan", ember.unique, _NAN1),
    C("unique_empty", ember.unique, F((0,))),
    C("unique_all", ember.unique_all, _TIES),
    C("unique_all_2d", ember.unique_all, np.round(F((3, 4), seed=2))),
    C("unique_counts", ember.unique_counts, _TIES),
    C("unique_inverse", ember.unique_inverse, _TIES.reshape(2, 5)),
    C("unique_values", ember.unique_values, np.round(F((3, 4), "float32", 2))),
    C("unique_values_bool", ember.unique_values, _MASK34),
    C("nonzero_2d", ember.nonzero, F((3, 4), "int64", 1, -1, 2)),
    C("nonzero_1d_float", ember.nonzero, np.array([0.0, 1.5, 0.0, -2.0, np.nan])),
    C("nonzero_bool", ember.nonzero, _MASK34),
    C("nonzero_empty", ember.nonzero, F((0, 3))),
    C("nonzero_method", lambda a: a.nonzero(), F((2, 3), "int32", 1, -1, 2)),
    C("argwhere", ember.argwhere, F((3, 4), "int64", 1, -1, 2)),
    C("argwhere_3d", ember.argwhere, F((2, 3, 2), "bool", 5)),
    C("argwhere_0d", ember.argwhere, np.array(2.0)),
    C("argwhere_empty", ember.argwhere, F((0, 2))),
    C("flatnonzero", ember.flatnonzero, F((3, 4), "int64", 1, -1, 2)),
    C("flatnonzero_float", ember.flatnonzero, np.array([[0.0, 0.5], [-0.0, 3.0]])),
    C("extract", ember.extract, _MASK34, _A34),
    C("extract_int_cond", ember.extract, F((3, 4), "int64", 1, -1, 2), _A34),
    C("compress_axis0", lambda c, x: ember.compress(c, x, axis=0), np.array([True, False, True]), _A34),
    C("compress_axis1", lambda c, x: ember.compress(c, x, axis=1), np.array([False, True, True]), _A34),
    C("compress_flat", ember.compress, np.array([True, False, False, True, True]), _A34),
    C("count_nonzero", ember.count_nonzero, F((3, 4), "int64", 1, -1, 2)),
    C("count_nonzero_axis", lambda a: ember.count_nonzero(a, axis=0), F((3, 4), "int64", 1, -1, 2)),
    C("count_nonzero_keepdims", lambda a: ember.count_nonzero(a, axis=1, keepdims=True),
      np.array([[0.0, 1.0, np.nan], [0.0, 0.0, 2.0]])),
    C("count_nonzero_bool", ember.count_nonzero, _MASK34),
    C("count_nonzero_empty", ember.count_nonzero, F((0, 3))),
    C("topk", lambda a: ember.topk(a, 3), DISTINCT((4, 6), "float32")),
    C("topk_smallest", lambda a: ember.topk(a, 2, largest=False), DISTINCT((4, 6))),
    C("topk_dim0", lambda a: ember.topk(a, 2, dim=0), DISTINCT((4, 6), "float64", 1)),
    C("topk_int", lambda a: ember.topk(a, 4), DISTINCT((10,), "int64", 2)),
    C("topk_k0", lambda a: ember.topk(a, 0), DISTINCT((5,))),
    C("topk_too_big", lambda a: ember.topk(a, 7), DISTINCT((5,)), error=True),
    C("topk_ties", lambda a: ember.topk(a, 4), _TIES),
    C("argsort_descending_ties", lambda a: ember.argsort(a, descending=True), _TIES),
    C("argsort_descending_nan", lambda a: ember.argsort(a, descending=True), _NAN1),
    C("argsort_dim", lambda a: ember.argsort(a, dim=0), _TIES.reshape(2, 5)),
    C("argsort_axis_none", lambda a: ember.argsort(a, axis=None), _TIES.reshape(2, 5)),
    C("argsort_0d", ember.argsort, np.array(2.5)),
    C("argsort_0d_axis_none", lambda a: ember.argsort(a, axis=None), np.array(2.5)),
    C("sort_0d_axis_none", lambda a: ember.sort(a, axis=None), np.array(2.5)),
    C("argsort_reversed_view", lambda a: ember.argsort(a[:, ::-2], descending=True),
      _TIES.reshape(2, 5)),
    C("sort_descending_nan", lambda a: ember.sort(a, descending=True), _NAN1),
    C("sort_descending_dim0", lambda a: ember.sort(a, dim=0, descending=True).values,
      F((4, 3), "float32")),
    C("sort_axis_none", lambda a: ember.sort(a, axis=None), F((3, 4), "int32")),
    C("sort_bad_axis", lambda a: ember.sort(a, axis=2), F((3, 4)), error=True),
    C("histogram", ember.histogram, F((50,), seed=7)),
    C("histogram_bins_range", lambda a: ember.histogram(a, bins=4, range=(-2.0, 3.0)), F((50,), seed=7)),
    C("histogram_edges", lambda a, b: ember.histogram(a, bins=b), F((50,), seed=7),
      np.array([-5.0, -1.0, 0.0, 0.5, 5.0])),
    C("histogram_weights_density", lambda a, w: ember.histogram(a, bins=6, weights=w, density=True),
      F((40,), seed=7), F((40,), seed=8, low=0, high=2)),
    C("histogram_f32", lambda a: ember.histogram(a, bins=5), F((3, 7), "float32", 7)),
    C("bincount", ember.bincount, np.array([0, 1, 1, 3, 2, 1, 7], np.int64)),
    C("bincount_weights", lambda a, w: ember.bincount(a, weights=w),
      np.array([0, 1, 1, 3, 2, 1], np.int64), F((6,), seed=1)),
    C("bincount_minlength", lambda a: ember.bincount(a, minlength=10), np.array([2, 2, 5], np.int32)),
    C("bincount_empty", ember.bincount, np.zeros(0, np.int64)),
    C("bincount_negative", ember.bincount, np.array([1, -1], np.int64), error=True),
    C("select", lambda c1, c2, a, b: ember.select([c1, c2], [a, b], default=-1.0),
      _A34 > 1, _A34 < -1, _A34, _B34),
    C("select_scalar_choices", lambda c1, c2: ember.select([c1, c2], [1, 2]), _MASK34, ~_MASK34),
    C("choose", lambda i, a, b, c: ember.choose(i, [a, b, c]), F((3, 4), "int64", 2, 0, 3),
      _A34, _B34, F((3, 4), "float32", 3)),
    C("choose_clip", lambda i, a, b: ember.choose(i, [a, b], mode="clip"),
      F((3, 4), "int64", 2, -2, 4), _A34, _B34),
    C("choose_wrap", lambda i, a, b: ember.choose(i, [a, b], mode="wrap"),
      F((3, 4), "int64", 2, -2, 4), _A34, _B34),
    C("choose_raise", lambda i, a, b: ember.choose(i, [a, b]),
      np.array([0, 2, 1], np.int64), _V3, _V3, error=True),
]


@pytest.mark.parametrize("fn,args,rtol,atol,error", SORT_CASES)
def test_sort_search_sets(fn, args, rtol, atol, error):
    run_case(fn, args, rtol, atol, error)


def _check_partition(vals_gpu, vals_cpu, kth, axis):
    """partition is unique only at ``kth``: that element, and the sets below
    and above it (compared sorted), must match the CPU's."""
    g = np.moveaxis(host(vals_gpu), axis, -1)
    e = np.moveaxis(host(vals_cpu), axis, -1)
    assert g.shape == e.shape
    for k in np.atleast_1d(kth):
        np.testing.assert_array_equal(g[..., k], e[..., k])
        np.testing.assert_array_equal(np.sort(g[..., :k], -1), np.sort(e[..., :k], -1))
        np.testing.assert_array_equal(np.sort(g[..., k + 1:], -1), np.sort(e[..., k + 1:], -1))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("kth,axis", [(2, -1), (0, -1), (5, -1), (1, 0), ([1, 3], -1)])
def test_partition_and_argpartition(dtype, kth, axis):
    base = DISTINCT((3, 6), dtype, 9)
    for label, xc, xg in layout_pairs(base):
        exp, got = ember.partition(xc, kth, axis=axis), ember.partition(xg, kth, axis=axis)
        assert_on_device(got)
        assert got.dtype == exp.dtype
        _check_partition(got, exp, kth, axis)
        ic, ig = ember.argpartition(xc, kth, axis=axis), ember.argpartition(xg, kth, axis=axis)
        assert_on_device(ig)
        assert ig.dtype == ic.dtype
        # the indices pick a permutation of each slice, partitioned like the CPU's
        idx = host(ig)
        assert (np.sort(np.moveaxis(idx, axis, -1), -1) == np.arange(base.shape[axis])).all()
        _check_partition(np.take_along_axis(base, idx, axis), np.take_along_axis(base, host(ic), axis),
                         kth, axis)


# ----------------------------------------------------------------- nan-reductions and statistics

NAN_REDUCTIONS = ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
                  "nanargmax", "nanargmin", "nanmedian"]
_STAT_RTOL = {"float16": 5e-3, BF16: 3e-2, "float32": 2e-5, "float64": R64}
_STAT_ATOL = {"float16": 5e-3, BF16: 3e-2, "float32": A32, "float64": 1e-12}


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", NAN_REDUCTIONS)
def test_nan_reductions(name, dtype, axis, keepdims):
    fn = getattr(ember, name)
    if name.startswith("nanarg") and isinstance(axis, tuple):
        axis = -1                                      # arg-reductions take one axis
    a = NANS((3, 4, 5), dtype, 11)
    check_like_cpu(fn, (_cpu(a),), (gpu(a),), axis=axis, keepdims=keepdims,
          rtol=_STAT_RTOL[dtype], atol=_STAT_ATOL[dtype])


@pytest.mark.parametrize("name", NAN_REDUCTIONS + ["median", "ptp"])
def test_nan_reductions_layouts(name):
    """Non-contiguous inputs (transposed, step-2, negative stride)."""
    fn = getattr(ember, name)
    base = NANS((4, 6), "float32", 12) if name.startswith("nan") else F((4, 6), "float32", 12)
    for label, xc, xg in layout_pairs(base):
        for axis in (None, 0, -1):
            check_like_cpu(fn, (xc,), (xg,), axis=axis, rtol=2e-5, atol=A32)


@pytest.mark.parametrize("dtype", LOW_FLOATS)
@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanmax", "nanmin", "nanmedian", "median", "ptp"])
def test_nan_reductions_low_precision(name, dtype):
    fn = getattr(ember, name)
    a = ember.asarray(NANS((4, 6), "float32", 13) if name.startswith("nan") else F((4, 6), "float32", 13))
    a = a.astype(dtype)
    for axis in (None, 1):
        check_like_cpu(fn, (a,), (gpu(a),), axis=axis, rtol=_STAT_RTOL[dtype], atol=_STAT_ATOL[dtype])


_ALLNAN = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])


@pytest.mark.parametrize("name", NAN_REDUCTIONS)
@pytest.mark.parametrize("case", ["all_nan_row", "empty", "0d", "0d_nan", "no_nan"])
def test_nan_reductions_edge_inputs(name, case):
    """All-NaN slices (NaN with a warning, or ValueError for nanarg*), empty and 0-d inputs:
    the GPU gives the CPU's answer or raises its exception type."""
    fn = getattr(ember, name)
    a, axis = {"all_nan_row": (_ALLNAN, 1), "empty": (np.zeros((0, 3)), None),
               "0d": (np.array(2.5), None), "0d_nan": (np.array(np.nan), None),
               "no_nan": (F((3, 4), "float64", 14), 0)}[case]
    check_like_cpu(fn, (_cpu(a),), (gpu(a),), axis=axis, rtol=R64)


_S = F((4, 5), "float64", 15)
_S32 = F((4, 5), "float32", 15)
_N = NANS((4, 5), "float64", 16)
_W = F((4, 5), "float64", 17, 0.1, 2)
_W34 = F((3, 4), "bool", 31)
STAT_CASES = [
    C("sum_where", lambda a, w: ember.sum(a, axis=1, where=w), _S, F((4, 5), "bool", 31), rtol=R64),
    C("sum_initial", lambda a: ember.sum(a, axis=0, initial=2.5), F((3, 4)), rtol=R64),
    C("sum_where_initial_int", lambda a, w: ember.sum(a, where=w, initial=7), F((3, 4), "int64", 3),
      _W34),
    C("sum_where_broadcast", lambda a, w: ember.sum(a, axis=0, where=w, keepdims=True), F((3, 4)),
      np.array([True, False, True, True]), rtol=R64),
    C("min_where_initial", lambda a, w: ember.min(a, axis=1, where=w, initial=0.5), F((3, 4)), _W34),
    C("max_initial", lambda a: ember.max(a, axis=0, initial=0.0), F((3, 4))),
    C("max_initial_empty", lambda a: ember.max(a, axis=0, initial=-1.0), F((0, 3))),
    C("amax_where_int", lambda a, w: ember.amax(a, where=w, initial=-100), F((3, 4), "int32", 3), _W34),
    C("min_where_no_initial", lambda a, w: ember.min(a, where=w), F((3, 4)), _W34, error=True),
    C("sum_where_empty_initial", lambda a, w: ember.sum(a, axis=1, where=w, initial=1.5), F((2, 0)),
      np.zeros((2, 0), bool)),
    C("nanvar_ddof1", lambda a: ember.nanvar(a, axis=1, ddof=1), _N, rtol=R64),
    C("nanstd_ddof1", lambda a: ember.nanstd(a, ddof=1), NANS((4, 5), "float32", 16)),
    C("nansum_dtype", lambda a: ember.nansum(a, dtype=ember.float64), NANS((4, 5), "float32", 16)),
    C("nanpercentile", lambda a: ember.nanpercentile(a, 40.0), _N, rtol=R64),
    C("nanpercentile_q_axis", lambda a, q: ember.nanpercentile(a, q, axis=1), _N,
      np.array([10.0, 50.0, 95.0]), rtol=R64),
    C("nanpercentile_keepdims", lambda a: ember.nanpercentile(a, 75.0, axis=0, keepdims=True),
      NANS((4, 5), "float32", 16)),
    C("nanpercentile_all_nan", lambda a: ember.nanpercentile(a, 50.0, axis=1), _ALLNAN),
    C("nanquantile", lambda a: ember.nanquantile(a, 0.3, axis=0), _N, rtol=R64),
    C("nanquantile_q_arr", lambda a, q: ember.nanquantile(a, q), _N, np.array([0.0, 0.5, 1.0]),
      rtol=R64),
    C("nanquantile_lower", lambda a: ember.nanquantile(a, 0.4, axis=1, method="lower"), _N),
    C("nanquantile_bad_q", lambda a: ember.nanquantile(a, 1.5), _N, error=True),
    *[C(f"nanquantile_{m}", lambda a, m=m: ember.nanquantile(a, 0.35, axis=1, method=m), _N)
      for m in ("higher", "nearest", "midpoint")],
    # NumPy's other methods, at quantiles that hit their ties, ends and interpolation
    *[C(f"nanquantile_{m}_q_arr", lambda a, q, m=m: ember.nanquantile(a, q, axis=1, method=m),
        _N, np.array([0.0, 0.1, 0.25, 0.5, 0.6, 0.75, 0.99, 1.0]), rtol=R64)
      for m in ("inverted_cdf", "averaged_inverted_cdf", "closest_observation",
                "interpolated_inverted_cdf", "hazen", "weibull", "median_unbiased",
                "normal_unbiased", "linear", "lower", "higher", "midpoint", "nearest")],
    C("nanpercentile_weibull_f32", lambda a: ember.nanpercentile(a, 90.0, axis=0,
                                                                  method="weibull"),
      NANS((4, 5), "float32", 16)),
    C("nanquantile_bad_method", lambda a: ember.nanquantile(a, 0.5, method="cubic"), _N,
      error=True),
    C("nanquantile_axes", lambda a: ember.nanquantile(a, 0.6, axis=(0, 2), keepdims=True),
      np.where(F((3, 4, 5), seed=9) > 1, np.nan, F((3, 4, 5), seed=9)), rtol=R64),
    C("nanquantile_f32_q_arr_axis", lambda a, q: ember.nanquantile(a, q, axis=0),
      _N.astype(np.float32), np.array([[0.1, 0.9], [0.5, 0.25]]), rtol=1e-6, atol=1e-6),
    C("nanquantile_int", lambda a: ember.nanquantile(a, 0.5, axis=1), F((3, 4), "int64", 2)),
    C("nanpercentile_bad_q_arr", lambda a, q: ember.nanpercentile(a, q), _N, np.array([5.0, 101.0]),
      error=True),
    C("median", ember.median, _S, rtol=R64),
    C("median_axis", lambda a: ember.median(a, axis=0), _S, rtol=R64),
    C("median_keepdims", lambda a: ember.median(a, axis=1, keepdims=True), _S32),
    C("median_3d_axes", lambda a: ember.median(a, axis=(0, 2)), F((2, 3, 4), "float64", 1), rtol=R64),
    C("median_int", lambda a: ember.median(a, axis=1), F((3, 4), "int64", 2)),
    C("median_nan", ember.median, _N),
    C("median_0d", ember.median, np.array(3.0)),
    C("median_empty", ember.median, np.zeros(0)),
    C("percentile", lambda a: ember.percentile(a, 30.0), _S, rtol=R64),
    C("percentile_axis_q", lambda a, q: ember.percentile(a, q, axis=1), _S, np.array([5.0, 50.0, 99.0]),
      rtol=R64),
    C("percentile_f32", lambda a: ember.percentile(a, 62.5, axis=0), _S32),
    C("percentile_bad_q", lambda a: ember.percentile(a, 101.0), _S, error=True),
    C("quantile", lambda a: ember.quantile(a, 0.7), _S, rtol=R64),
    C("quantile_keepdims", lambda a: ember.quantile(a, 0.25, axis=1, keepdims=True), _S32),
    C("quantile_int", lambda a: ember.quantile(a, 0.5, axis=0), F((3, 4), "int64", 2)),
    *[C(f"quantile_{m}", lambda a, m=m: ember.quantile(a, 0.45, axis=1, method=m), _S, rtol=R64)
      for m in ("lower", "higher", "nearest", "midpoint")],
    C("average", ember.average, _S, rtol=R64),
    C("average_weights", lambda a, w: ember.average(a, weights=w), _S, _W, rtol=R64),
    C("average_weights_axis", lambda a, w: ember.average(a, axis=1, weights=w), _S, _W[0], rtol=R64),
    C("average_returned", lambda a, w: ember.average(a, axis=0, weights=w, returned=True), _S,
      _W[:, 0], rtol=R64),
    C("average_f32", lambda a: ember.average(a, axis=0), _S32),
    C("average_int", ember.average, F((3, 4), "int32", 2)),
    C("average_zero_weights", lambda a, w: ember.average(a, weights=w), _S, np.zeros((4, 5)), error=True),
    C("ptp", ember.ptp, _S),
    C("ptp_axis", lambda a: ember.ptp(a, axis=1), _S32),
    C("ptp_int", lambda a: ember.ptp(a, axis=0), F((3, 4), "int32", 2)),
    C("cumprod", ember.cumprod, F((3, 4), "float64", 18, 0.5, 1.5), rtol=R64),
    C("cumprod_axis", lambda a: ember.cumprod(a, axis=0), F((3, 4), "float32", 18, 0.5, 1.5)),
    C("cumprod_int", lambda a: ember.cumprod(a, axis=1), F((3, 4), "int64", 18, -3, 4)),
    C("cumprod_dtype", lambda a: ember.cumprod(a, dtype=ember.float64), F((6,), "int32", 18, 1, 4)),
    C("cumprod_empty", ember.cumprod, F((0, 3))),
    C("cumprod_0d", ember.cumprod, np.array(2.0)),
    C("cumulative_prod", lambda a: ember.cumulative_prod(a, axis=1), F((3, 4), "float64", 18, 0.5, 1.5),
      rtol=R64),
    C("cumulative_prod_1d", ember.cumulative_prod, F((6,), "float32", 18, 0.5, 1.5)),
    C("cumulative_prod_initial", lambda a: ember.cumulative_prod(a, axis=0, include_initial=True),
      F((3, 4), "int64", 18, -3, 4)),
    C("cumulative_prod_2d_no_axis", ember.cumulative_prod, _S, error=True),
    C("cumulative_sum", lambda a: ember.cumulative_sum(a, axis=0), _S, rtol=R64),
    C("cumulative_sum_1d", ember.cumulative_sum, F((7,), "float32", 3)),
    C("cumulative_sum_initial", lambda a: ember.cumulative_sum(a, axis=1, include_initial=True), _S32),
    C("cumulative_sum_int_dtype", lambda a: ember.cumulative_sum(a, dtype=ember.int64),
      F((5,), "int32", 3)),
    C("cumulative_sum_bool", ember.cumulative_sum, np.array([True, False, True, True])),
    C("cumulative_sum_empty", ember.cumulative_sum, np.zeros(0, np.float32)),
    C("diff", ember.diff, _S),
    C("diff_n2_axis0", lambda a: ember.diff(a, n=2, axis=0), _S),
    C("diff_n0", lambda a: ember.diff(a, n=0), _S32),
    C("diff_prepend_append", lambda a: ember.diff(a, prepend=0.0, append=1.0), _S32),
    C("diff_prepend_array", lambda a, p: ember.diff(a, axis=0, prepend=p), _S, F((1, 5), seed=1)),
    C("diff_int", ember.diff, F((3, 4), "int64", 2)),
    C("diff_bool", ember.diff, np.array([True, False, False, True])),
    C("diff_too_many", lambda a: ember.diff(a, n=6), _S),
    C("diff_0d", ember.diff, np.array(1.0), error=True),
]


@pytest.mark.parametrize("fn,args,rtol,atol,error", STAT_CASES)
def test_statistics(fn, args, rtol, atol, error):
    run_case(fn, args, rtol, atol, error)


_LAYOUT_OPS = [
    ("cumprod", lambda a: ember.cumprod(a, axis=-1)),
    ("cumulative_prod", lambda a: ember.cumulative_prod(a, axis=0)),
    ("cumulative_sum", lambda a: ember.cumulative_sum(a, axis=-1)),
    ("diff", lambda a: ember.diff(a)),
    ("diff_axis0", lambda a: ember.diff(a, n=2, axis=0)),
    ("msort", lambda a: ember.msort(a)),
    ("quantile", lambda a: ember.quantile(a, 0.3, axis=1)),
    ("percentile", lambda a: ember.percentile(a, 80.0)),
    ("average", lambda a: ember.average(a, axis=0)),
    ("count_nonzero", lambda a: ember.count_nonzero(a > 1.0, axis=1)),
    ("flatnonzero", lambda a: ember.flatnonzero(a > 1.0)),
    ("unique", lambda a: ember.unique(ember.round(a))),
    ("topk", lambda a: ember.topk(a, 2)),
    ("searchsorted", lambda a: ember.searchsorted(ember.asarray(np.array([-1.0, 0.0, 2.0]), device=a.device), a)),
    ("nan_to_num", lambda a: ember.nan_to_num(ember.log(a))),
    ("fliplr", lambda a: ember.fliplr(a)),
    ("rot90", lambda a: ember.rot90(a)),
    ("kron", lambda a: ember.kron(a, a[:2, :2])),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,fn", _LAYOUT_OPS, ids=[c[0] for c in _LAYOUT_OPS])
def test_layouts(name, fn, dtype):
    """Non-contiguous inputs (transposed, step-2, negative stride) of representative ops."""
    base = F((4, 6), dtype, 19, 0.5, 1.5) if name.startswith("cum") else F((4, 6), dtype, 19)
    if name in ("topk", "unique"):
        base = DISTINCT((4, 6), dtype, 19) / 4
    for label, xc, xg in layout_pairs(base):
        check_like_cpu(fn, (xc,), (xg,), rtol=_STAT_RTOL[dtype], atol=_STAT_ATOL[dtype])


_LOW_PRECISION_OPS = [
    ("cumprod", lambda a: ember.cumprod(a, axis=1)),
    ("cumulative_sum", lambda a: ember.cumulative_sum(a, axis=0)),
    ("diff", lambda a: ember.diff(a)),
    ("msort", lambda a: ember.msort(a)),
    ("quantile", lambda a: ember.quantile(a, 0.3, axis=1)),
    ("round", lambda a: ember.round(a, 1)),
    ("nan_to_num", lambda a: ember.nan_to_num(ember.log(a))),
    ("rot90", lambda a: ember.rot90(a)),
    ("topk", lambda a: ember.topk(a, 2)),
]


@pytest.mark.parametrize("dtype", LOW_FLOATS)
@pytest.mark.parametrize("name,fn", _LOW_PRECISION_OPS, ids=[c[0] for c in _LOW_PRECISION_OPS])
def test_low_precision(name, fn, dtype):
    base = DISTINCT((4, 6), "float32", 20) / 8 if name == "topk" else F((4, 6), "float32", 20, 0.5, 1.5)
    a = ember.asarray(base).astype(dtype)
    check_like_cpu(fn, (a,), (gpu(a),), rtol=_STAT_RTOL[dtype], atol=_STAT_ATOL[dtype])


# ----------------------------------------------------------------- linalg

def _r(dtype):
    return R64 if dtype == "float64" else R32


def _linalg_cases(dt):
    r = _r(dt)
    spd, spd_b = SPD(4, dt, 21), SPD(3, dt, 22, (2,))
    well, well_b = WELL((4, 4), dt, 23), WELL((2, 3, 3), dt, 24)
    rect = WELL((5, 3), dt, 25)
    low_rank = (F((5, 2), "float64", 26) @ F((2, 4), "float64", 27)).astype(dt)
    return [
        C("cholesky", ember.linalg.cholesky, spd, rtol=r, atol=r),
        C("cholesky_upper", lambda a: ember.linalg.cholesky(a, upper=True), spd, rtol=r, atol=r),
        C("cholesky_batched", ember.linalg.cholesky, spd_b, rtol=r, atol=r),
        C("cholesky_not_pd", ember.linalg.cholesky, -spd, error=True),
        C("det", ember.linalg.det, well, rtol=r),
        C("det_batched", ember.linalg.det, well_b, rtol=r),
        C("det_singular", ember.linalg.det, low_rank[:4], rtol=r, atol=r * 100),
        C("slogdet", ember.linalg.slogdet, well, rtol=r, atol=r),
        C("slogdet_batched", ember.linalg.slogdet, well_b, rtol=r, atol=r),
        C("inv", ember.linalg.inv, well, rtol=r, atol=r),
        C("inv_batched", ember.linalg.inv, spd_b, rtol=r, atol=r),
        C("inv_singular", ember.linalg.inv, np.zeros((3, 3), dt), error=True),
        C("inv_not_square", ember.linalg.inv, rect, error=True),
        C("solve_vector", ember.linalg.solve, well, F((4,), dt, 28), rtol=r, atol=r),
        C("solve_matrix", ember.linalg.solve, spd, F((4, 2), dt, 28), rtol=r, atol=r),
        C("solve_batched", ember.linalg.solve, well_b, F((2, 3, 2), dt, 29), rtol=r, atol=r),
        C("matrix_power_3", lambda a: ember.linalg.matrix_power(a, 3), well / 4, rtol=r, atol=r),
        C("matrix_power_0", lambda a: ember.linalg.matrix_power(a, 0), well),
        C("matrix_power_1", lambda a: ember.linalg.matrix_power(a, 1), well),
        C("matrix_power_-2", lambda a: ember.linalg.matrix_power(a, -2), well, rtol=r, atol=r),
        C("matrix_power_batched", lambda a: ember.linalg.matrix_power(a, 2), well_b, rtol=r, atol=r),
        C("matrix_rank_full", ember.linalg.matrix_rank, well),
        C("matrix_rank_low", ember.linalg.matrix_rank, low_rank),
        C("matrix_rank_batched", ember.linalg.matrix_rank, well_b),
        C("matrix_rank_hermitian", lambda a: ember.linalg.matrix_rank(a, hermitian=True), spd),
        *[C(f"norm_{o}", lambda a, o=o: ember.linalg.norm(a, ord=o), well, rtol=r, atol=r)
          for o in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)],
        C("norm_vector", ember.linalg.norm, F((7,), dt, 30), rtol=r),
        *[C(f"norm_vector_{o}", lambda a, o=o: ember.linalg.norm(a, ord=o), F((7,), dt, 30), rtol=r)
          for o in (0, 1, 3, np.inf, -np.inf)],
        C("norm_axis", lambda a: ember.linalg.norm(a, axis=1, keepdims=True), rect, rtol=r),
        C("norm_axes_batched", lambda a: ember.linalg.norm(a, ord="fro", axis=(1, 2)), well_b, rtol=r),
        C("norm_empty", ember.linalg.norm, np.zeros((0,), dt)),
        C("pinv", ember.linalg.pinv, rect, rtol=r, atol=r),
        C("pinv_square", ember.linalg.pinv, well, rtol=r, atol=r),
        # (the default cutoff, 1e-15 * largest singular value as in NumPy, would invert
        # float32 round-off: pass one)
        C("pinv_low_rank", lambda a: ember.linalg.pinv(a, rtol=1e-5), low_rank, rtol=r * 10, atol=r * 10),
        C("pinv_hermitian", lambda a: ember.linalg.pinv(a, hermitian=True), spd, rtol=r, atol=r),
        *[C(f"cond_{p}", lambda a, p=p: ember.linalg.cond(a, p), well, rtol=r)
          for p in (None, "fro", 1, -1, 2, -2, np.inf)],
        C("lstsq", ember.linalg.lstsq, rect, F((5,), dt, 31), rtol=r, atol=r),
        C("lstsq_matrix", lambda a, b: ember.linalg.lstsq(a, b, rcond=None), rect, F((5, 2), dt, 31),
          rtol=r, atol=r),
        C("lstsq_square", ember.linalg.lstsq, well, F((4,), dt, 31), rtol=r, atol=r),
        C("eigvalsh", ember.linalg.eigvalsh, spd, rtol=r),
        C("eigvalsh_upper", lambda a: ember.linalg.eigvalsh(a, UPLO="U"), spd, rtol=r),
        C("eigvalsh_batched", ember.linalg.eigvalsh, spd_b, rtol=r),
        C("linalg.cross", ember.linalg.cross, F((4, 3), dt, 32), F((4, 3), dt, 33), rtol=r),
        C("linalg.cross_axis0", lambda a, b: ember.linalg.cross(a, b, axis=0),
          F((3, 2), dt, 32), F((3, 2), dt, 33), rtol=r),
        C("linalg.cross_bad_size", ember.linalg.cross, F((4, 2), dt, 32), F((4, 2), dt, 33), error=True),
    ]


LINALG_CASES = _linalg_cases("float64") + [
    pytest.param(*c.values, id=c.id + "-float32") for c in _linalg_cases("float32")]


@pytest.mark.parametrize("fn,args,rtol,atol,error", LINALG_CASES)
def test_linalg(fn, args, rtol, atol, error):
    run_case(fn, args, rtol, atol, error)


# Decompositions unique only up to the sign/phase of each vector (eigh and eig
# eigenvectors, svd U/Vh, qr Q/R columns) or order (eig) are compared through
# invariants: values as the CPU's, the reconstruction of A, orthonormality.

def _gpu_and_cpu(fn, a):
    got, exp = quiet(fn, gpu(a)), quiet(fn, _cpu(a))
    for g in got:
        assert_on_device(g)
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype and g.shape == e.shape
    return [host(g) for g in got], [host(e) for e in exp]


def _assert_orthonormal_columns(q, tol):
    eye = np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2).conj() @ q, eye, atol=tol)


_DECOMP_INPUTS = {"square": lambda dt: WELL((4, 4), dt, 40), "tall": lambda dt: WELL((5, 3), dt, 41),
                  "wide": lambda dt: WELL((3, 5), dt, 42), "batched": lambda dt: WELL((2, 4, 4), dt, 43)}


@pytest.mark.parametrize("shape", list(_DECOMP_INPUTS))
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_linalg_svd(dtype, full, shape):
    a = _DECOMP_INPUTS[shape](dtype)
    tol = 1e-10 if dtype == "float64" else 1e-4
    (u, s, vh), (_, s_cpu, _) = _gpu_and_cpu(lambda x: ember.linalg.svd(x, full_matrices=full), a)
    np.testing.assert_allclose(s, s_cpu, rtol=tol, atol=tol)            # singular values: unique
    k = s.shape[-1]
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=tol * 10)
    _assert_orthonormal_columns(u, tol * 10)
    _assert_orthonormal_columns(np.swapaxes(vh, -1, -2), tol * 10)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", list(_DECOMP_INPUTS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_linalg_qr(dtype, shape, mode):
    a = _DECOMP_INPUTS[shape](dtype)
    tol = 1e-10 if dtype == "float64" else 1e-4
    fn = lambda x: ember.linalg.qr(x, mode=mode)                        # noqa: E731
    exp, err = cpu_or_error(fn, _cpu(a))
    if err is not None:
        with pytest.raises(type(err)):
            settle(quiet(fn, gpu(a)))
        return
    got = quiet(fn, gpu(a))
    if mode == "r":
        assert_on_device(got)
        # R is unique up to the sign of each row
        np.testing.assert_allclose(np.abs(host(got)), np.abs(host(exp)), rtol=tol, atol=tol)
        return
    (q, r), (_, r_cpu) = [host(t) for t in got], [host(t) for t in exp]
    for t in got:
        assert_on_device(t)
    assert q.shape == host(exp[0]).shape and r.shape == r_cpu.shape
    np.testing.assert_allclose(q @ r, a, atol=tol * 10)                   # reconstruction
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=tol)              # R upper triangular
    np.testing.assert_allclose(np.abs(r), np.abs(r_cpu), rtol=tol, atol=tol * 10)
    _assert_orthonormal_columns(q, tol * 10)


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_linalg_eigh(dtype, batch, uplo):
    a = SPD(4, dtype, 44, batch)
    if uplo == "U":
        a = a + np.tril(np.full(a.shape, 100.0, dtype), -1)             # the unused triangle is ignored
    tol = 1e-10 if dtype == "float64" else 1e-4
    (w, v), (w_cpu, _) = _gpu_and_cpu(lambda x: ember.linalg.eigh(x, UPLO=uplo), a)
    np.testing.assert_allclose(w, w_cpu, rtol=tol, atol=tol)             # ascending eigenvalues
    sym = np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2) if uplo == "U" else \
        np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    np.testing.assert_allclose(sym @ v, v * w[..., None, :], atol=tol * 100)   # A v = w v
    _assert_orthonormal_columns(v, tol * 10)


def _sorted_complex(w):
    return np.sort_complex(np.round(w, 6))


@pytest.mark.parametrize("which", ["eig", "eigvals"])
@pytest.mark.parametrize("case", ["nonsymmetric", "symmetric", "rotation", "batched"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_linalg_eig(dtype, case, which):
    a = {"nonsymmetric": WELL((4, 4), dtype, 45), "symmetric": SPD(4, dtype, 46),
         "rotation": np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]], dtype),  # complex pair
         "batched": WELL((2, 3, 3), dtype, 47)}[case]
    tol = 1e-9 if dtype == "float64" else 1e-3
    if which == "eigvals":
        got, exp = quiet(ember.linalg.eigvals, gpu(a)), quiet(ember.linalg.eigvals, _cpu(a))
        assert_on_device(got)
        assert got.dtype == exp.dtype and got.shape == exp.shape
        # the order of eigenvalues is unspecified: compare them sorted
        g, e = host(got).reshape(-1, a.shape[-1]), host(exp).reshape(-1, a.shape[-1])
        for gi, ei in zip(g, e):
            np.testing.assert_allclose(np.sort_complex(gi), np.sort_complex(ei), rtol=tol, atol=tol)
        return
    (w, v), (w_cpu, _) = _gpu_and_cpu(ember.linalg.eig, a)
    for wi, ei in zip(w.reshape(-1, a.shape[-1]), w_cpu.reshape(-1, a.shape[-1])):
        np.testing.assert_allclose(np.sort_complex(wi), np.sort_complex(ei), rtol=tol, atol=tol)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=tol * 10)        # A v = w v
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1.0, rtol=tol)       # unit vectors


# ----------------------------------------------------------------- elementwise and integer math

def _int_cases(dt):
    a = F((3, 4), dt, 50, -30, 30)
    b = F((3, 4), dt, 51, -12, 12)
    a[0, 0], b[0, 1], a[1, 1], b[1, 1] = 0, 0, 0, 0
    return [
        C(f"gcd_{dt}", ember.gcd, a, b),
        C(f"gcd_broadcast_{dt}", ember.gcd, a, np.array([6], dt)),
        C(f"lcm_{dt}", ember.lcm, a, b),
        C(f"lcm_broadcast_{dt}", ember.lcm, np.array(4, dt), b),
        C(f"divmod_{dt}", ember.divmod, a, np.where(b == 0, 7, b).astype(dt)),
        C(f"divmod_scalar_{dt}", lambda x: ember.divmod(x, 4), a),
        C(f"divmod_neg_scalar_{dt}", lambda x: ember.divmod(x, -3), a),
        C(f"round_{dt}", ember.round, a),
        C(f"round_-1_{dt}", lambda x: ember.round(x, -1), a),
    ]


_X = F((3, 4), "float64", 52)
_X32 = F((3, 4), "float32", 52)
_SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, 1e-310, 3e38, np.inf, -np.inf, np.nan])
_CPLX = (F((3, 4), "float64", 53) + 1j * F((3, 4), "float64", 54))
MATH_CASES = [
    *_int_cases("int32"), *_int_cases("int64"),
    C("gcd_uint8", ember.gcd, F((6,), "uint8", 55, 0, 200), F((6,), "uint8", 56, 0, 200)),
    C("lcm_int_empty", ember.lcm, np.zeros(0, np.int64), np.zeros(0, np.int64)),
    C("gcd_0d", ember.gcd, np.array(12, np.int64), np.array(18, np.int64)),
    C("gcd_float", ember.gcd, _X, _X, error=True),
    *[C(f"divmod_{dt}", ember.divmod, F((3, 4), dt, 57), F((3, 4), dt, 58, 0.5, 3)) for dt in FLOATS],
    C("divmod_float_neg", ember.divmod, np.array([-7.5, 7.5, -0.0, 3.0]), np.array([2.0, -2.0, 1.0, -1.5])),
    *[C(f"ldexp_{dt}", ember.ldexp, F((3, 4), dt, 59), F((3, 4), "int32", 60, -10, 10)) for dt in FLOATS],
    C("ldexp_scalar_exp", lambda x: ember.ldexp(x, 3), _X32),
    C("ldexp_overflow", ember.ldexp, np.array([1.0, 1.0, -1.0]), np.array([2000, -2000, 2000], np.int32)),
    C("ldexp_int_mantissa", ember.ldexp, np.array([1, 3, -5], np.int32), np.array([1, 2, 3], np.int32)),
    *[C(f"frexp_{dt}", ember.frexp, F((3, 4), dt, 61)) for dt in FLOATS],
    C("frexp_special", ember.frexp, _SPECIAL),
    C("frexp_0d", ember.frexp, np.array(12.0, np.float32)),
    *[C(f"modf_{dt}", ember.modf, F((3, 4), dt, 62)) for dt in FLOATS],
    C("modf_special", ember.modf, _SPECIAL),
    *[C(f"float_power_{dt}", ember.float_power, F((3, 4), dt, 63, 0.1, 3), F((3, 4), dt, 64, -2, 2),
        rtol=R64) for dt in FLOATS],
    C("float_power_int", ember.float_power, F((3, 4), "int32", 65, 1, 5), np.array([2, 3, -1, 0], np.int32),
      rtol=R64),
    C("float_power_neg_base", ember.float_power, np.array([-2.0, -8.0]), np.array([2.0, 0.5])),
    *[C(f"round_{dt}", ember.round, F((3, 4), dt, 66)) for dt in FLOATS],
    *[C(f"round_2_{dt}", lambda x: ember.round(x, 2), F((3, 4), dt, 66)) for dt in FLOATS],
    C("round_-1", lambda x: ember.round(x, -1), F((3, 4), "float64", 66, -50, 50)),
    C("round_half_even", ember.round, np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.5])),
    C("round_method", lambda x: x.round(1), _X32),
    *[C(f"nan_to_num_{dt}", ember.nan_to_num, _SPECIAL.astype(dt)) for dt in FLOATS],
    C("nan_to_num_values", lambda x: ember.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0), _SPECIAL),
    C("nan_to_num_int", ember.nan_to_num, F((5,), "int32", 67)),
    C("nan_to_num_complex", ember.nan_to_num, np.array([complex(np.nan, 1), complex(2, np.inf)])),
    C("conj_complex128", ember.conj, _CPLX),
    C("conj_complex64", ember.conj, _CPLX.astype(np.complex64)),
    C("conj_float", ember.conj, _X32),
    C("real_complex128", ember.real, _CPLX),
    C("real_complex64", ember.real, _CPLX.astype(np.complex64)),
    C("real_float", ember.real, _X),
    C("imag_complex128", ember.imag, _CPLX),
    C("imag_complex64", ember.imag, _CPLX.astype(np.complex64)),
    C("imag_float", ember.imag, _X32),
    C("ravel_multi_index", lambda i, j: ember.ravel_multi_index((i, j), (4, 5)),
      np.array([0, 3, 2, 1]), np.array([4, 0, 2, 1])),
    C("ravel_multi_index_clip", lambda i, j: ember.ravel_multi_index((i, j), (4, 5), mode="clip"),
      np.array([0, 7, -2]), np.array([9, 0, 2])),
    C("ravel_multi_index_wrap", lambda i, j: ember.ravel_multi_index((i, j), (4, 5), mode="wrap"),
      np.array([0, 7, -2]), np.array([9, 0, 2])),
    C("ravel_multi_index_raise", lambda i, j: ember.ravel_multi_index((i, j), (4, 5)),
      np.array([0, 7]), np.array([1, 0]), error=True),
    C("unravel_index", lambda i: ember.unravel_index(i, (4, 5)), np.array([0, 7, 19, 12])),
    C("unravel_index_3d", lambda i: ember.unravel_index(i, (2, 3, 4)), np.array([[1, 23], [5, 0]])),
    C("unravel_index_0d", lambda i: ember.unravel_index(i, (4, 5)), np.array(13)),
    C("unravel_index_bad", lambda i: ember.unravel_index(i, (4, 5)), np.array([20]), error=True),
    *[C(f"dot_2d_{dt}", ember.dot, F((3, 4), dt, 70), F((4, 2), dt, 71), rtol=_r(dt))
      for dt in FLOATS],
    C("dot_1d", ember.dot, F((5,), "float64", 70), F((5,), "float64", 71), rtol=R64),
    C("dot_2d_1d", ember.dot, _X32, F((4,), "float32", 71)),
    C("dot_scalar", ember.dot, _X, np.array(2.5)),
    C("dot_3d", ember.dot, F((2, 3, 4), "float64", 70), F((4, 2), "float64", 71), rtol=R64),
    C("dot_int", ember.dot, F((3, 4), "int64", 70), F((4,), "int64", 71)),
    C("dot_mismatch", ember.dot, _X, F((3,)), error=True),
    *[C(f"inner_{dt}", ember.inner, F((3, 4), dt, 72), F((2, 4), dt, 73), rtol=_r(dt)) for dt in FLOATS],
    C("inner_1d", ember.inner, F((6,), "float64", 72), F((6,), "float64", 73), rtol=R64),
    C("inner_0d", ember.inner, np.array(3.0), _X),
    *[C(f"vdot_{dt}", ember.vdot, F((3, 4), dt, 74), F((3, 4), dt, 75), rtol=_r(dt)) for dt in FLOATS],
    C("vdot_complex", ember.vdot, _CPLX, _CPLX[::-1].copy(), rtol=R64),
    C("vdot_int", ember.vdot, F((6,), "int32", 74), F((6,), "int32", 75)),
    *[C(f"cross_{dt}", ember.cross, F((4, 3), dt, 76), F((4, 3), dt, 77), rtol=_r(dt)) for dt in FLOATS],
    C("cross_broadcast", ember.cross, F((2, 4, 3), "float64", 76), F((3,), "float64", 77), rtol=R64),
    C("cross_axis0", lambda a, b: ember.cross(a, b, axis=0), F((3, 5)), F((3, 5), seed=1), rtol=R64),
    C("cross_int", ember.cross, F((3,), "int64", 76), F((3,), "int64", 77)),
]


@pytest.mark.parametrize("fn,args,rtol,atol,error", MATH_CASES)
def test_math(fn, args, rtol, atol, error):
    run_case(fn, args, rtol, atol, error)


# ----------------------------------------------------------------- indexing and in-place writes

INDEX_CASES = [
    C("index_select_dim0", lambda x, i: ember.index_select(x, 0, i), _A34, np.array([2, 0, 2])),
    C("index_select_dim1", lambda x, i: ember.index_select(x, 1, i), _A34, np.array([3, 1])),
    C("index_select_3d", lambda x, i: ember.index_select(x, -1, i), F((2, 3, 4)), np.array([0, 0, 3])),
    C("index_select_empty", lambda x, i: ember.index_select(x, 0, i), _A34, np.zeros(0, np.int64)),
    C("index_select_int32", lambda x, i: ember.index_select(x, 0, i), F((4, 2), "int32"),
      np.array([1, 3], np.int32)),
    C("index_select_oob", lambda x, i: ember.index_select(x, 0, i), _A34, np.array([3]), error=True),
    C("take_flat", lambda x, i: ember.take(x, i), _A34, np.array([[11, 0], [-1, 5]])),
    C("take_scalar_index", lambda x: ember.take(x, 2, axis=1), _A34),
    C("take_dim", lambda x, i: ember.take(x, i, dim=0), _A34, np.array([2, -3])),
    C("take_wrap", lambda x, i: ember.take(x, i, axis=1, mode="wrap"), _A34, np.array([5, -7, 2])),
    C("take_clip", lambda x, i: ember.take(x, i, axis=0, mode="clip"), _A34, np.array([5, -7, 1])),
    C("take_out", lambda x, i: ember.take(x, i, axis=1, out=ember.empty((3, 2), dtype=x.dtype,
                                                                       device=x.device)),
      _A34, np.array([3, 0])),
    C("take_out_bad_shape", lambda x, i: ember.take(x, i, out=ember.empty((3,), dtype=x.dtype,
                                                                          device=x.device)),
      _A34, np.array([3, 0]), error=True),
    C("take_oob", lambda x, i: ember.take(x, i, axis=1), _A34, np.array([0, 4]), error=True),
    C("take_negative_oob", lambda x, i: ember.take(x, i), _A34, np.array([-13]), error=True),
    C("take_float_index", lambda x, i: ember.take(x, i), _A34, np.array([1.0]), error=True),
    C("take_bad_mode", lambda x, i: ember.take(x, i, mode="bogus"), _A34, np.array([1]),
      error=True),
    C("take_along_axis", lambda x, i: ember.take_along_axis(x, i, axis=1), _A34,
      np.array([[3, 0], [1, 1], [-1, 2]])),
    C("take_along_axis_none", lambda x, i: ember.take_along_axis(x, i, axis=None), _A34,
      np.array([11, 0, 4])),
    C("take_along_axis_oob", lambda x, i: ember.take_along_axis(x, i, axis=0), _A34,
      np.array([[0, 3, 0, 0]]), error=True),
    C("take_along_axis_ndim", lambda x, i: ember.take_along_axis(x, i, axis=0), _A34,
      np.array([0, 1]), error=True),
    C("masked_fill", lambda x, m: ember.masked_fill(x, m, -1.0), _A34, _MASK34),
    C("masked_fill_broadcast", lambda x, m: ember.masked_fill(x, m, 0.5), _A34,
      np.array([True, False, False, True])),
    C("masked_fill_int", lambda x, m: ember.masked_fill(x, m, 7), F((3, 4), "int64", 1), _MASK34),
    C("masked_fill_0d_value", lambda x, m, v: ember.masked_fill(x, m, v), _A34, _MASK34, np.array(9.0)),
    C("masked_fill_f64", lambda x, m: ember.masked_fill(x, m, np.inf), F((5,)), F((5,), "bool", 2)),
]


@pytest.mark.parametrize("fn,args,rtol,atol,error", INDEX_CASES)
def test_indexing(fn, args, rtol, atol, error):
    run_case(fn, args, rtol, atol, error)


def _setitem(key, value):
    def fn(x, *arrays):
        k = key(*arrays) if callable(key) else key
        x[k] = value(x) if callable(value) else value
    return fn


def _ember_setitem(key, value):
    def fn(x):
        ember._setitem_value(x, key, value)
    return fn


#: (id, in-place fn(x, *others), x, others): fn mutates x (its result is compared too)
INPLACE_CASES = [
    ("put", lambda x, i, v: ember.put(x, i, v), _A34, (np.array([0, 5, 11]), np.array([9.0, 8.0, 7.0]))),
    ("put_cycle_values", lambda x, i: ember.put(x, i, ember.asarray(np.array([1.0, 2.0]), device=x.device)),
     F((6,)), (np.array([0, 2, 4, 5]),)),
    ("put_scalar", lambda x: ember.put(x, [1, 3], 0.0), F((5,), "float32"), ()),
    ("put_clip", lambda x, i: ember.put(x, i, -1.0, mode="clip"), F((5,)), (np.array([-3, 2, 10]),)),
    ("put_wrap", lambda x, i: ember.put(x, i, -1.0, mode="wrap"), F((5,)), (np.array([-3, 2, 10]),)),
    ("put_raise", lambda x, i: ember.put(x, i, -1.0), F((5,)), (np.array([5]),)),
    ("put_raise_negative", lambda x, i: ember.put(x, i, -1.0), F((5,)), (np.array([1, -6]),)),
    ("put_2d_negative", lambda x, i, v: ember.put(x, i, v), _A34, (np.array([-1, 4]), np.array([1.5, 2.5]))),
    ("put_empty_values", lambda x, i, v: ember.put(x, i, v), F((5,)), (np.array([1]), np.zeros(0))),
    ("put_along_axis_oob", lambda x, i: ember.put_along_axis(x, i, 0.0, axis=1), _A34,
     (np.array([[0], [4], [1]]),)),
    ("put_int", lambda x, i, v: ember.put(x, i, v), F((2, 3), "int32"),
     (np.array([4, 1]), np.array([100, 200], np.int32))),
    ("place", lambda x, m, v: ember.place(x, m, v), _A34, (_MASK34, np.array([1.0, 2.0, 3.0]))),
    ("place_int", lambda x, m, v: ember.place(x, m, v), F((3, 4), "int64"), (_MASK34, np.array([5, -5]))),
    ("place_no_true", lambda x, m, v: ember.place(x, m, v), F((4,)), (np.zeros(4, bool), np.array([1.0]))),
    ("put_along_axis", lambda x, i, v: ember.put_along_axis(x, i, v, axis=1), _A34,
     (np.array([[0], [3], [1]]), np.array([[10.0], [20.0], [30.0]], np.float32))),
    ("put_along_axis_axis0", lambda x, i: ember.put_along_axis(x, i, -1.0, axis=0), F((3, 4)),
     (np.array([[2, 0, 1, 1]]),)),
    ("put_along_axis_argmax", lambda x: ember.put_along_axis(
        x, ember.argmax(x, axis=-1, keepdims=True), 0.0, axis=-1), F((2, 3, 4), "float64", 3), ()),
    ("put_along_axis_none", lambda x, i: ember.put_along_axis(x, i, 5.0, axis=None), F((2, 3)),
     (np.array([0, 4]),)),
    ("setitem_ellipsis", _setitem(Ellipsis, 3.0), _A34, ()),
    ("setitem_row", _setitem(1, -2.0), _A34, ()),
    ("setitem_slices", _setitem((slice(0, 3, 2), slice(None, None, -2)), 4.5), _A34, ()),
    ("setitem_mask", _setitem(lambda m: m, 0.0), _A34, (_MASK34,)),
    ("setitem_mask_values", lambda x, m: x.__setitem__(m, x[m] * 2), _A34, (_MASK34,)),
    ("setitem_int_array", _setitem(lambda i: i, 7.0), F((6,)), (np.array([0, 4, 4]),)),
    ("setitem_array_value", _setitem((slice(None), 0), lambda x: x[:, 1] * 2), _A34, ()),
    ("setitem_broadcast_row", _setitem(slice(1, None), lambda x: x[0]), _A34, ()),
    ("setitem_0d", _setitem((), 9.0), np.array(1.0), ()),
    ("setitem_empty", _setitem(slice(2, 2), 1.0), F((4,)), ()),
    ("setitem_int_dtype", _setitem(0, 3.7), F((2, 3), "int32"), ()),
    ("setitem_bool_dtype", _setitem(slice(None, 2), True), np.zeros((3,), bool), ()),
    ("_setitem_value", _ember_setitem((1, slice(None)), 5.0), _A34, ()),
    ("_setitem_value_step", _ember_setitem(slice(None, None, 3), -1.0), F((7,)), ()),
    ("setitem_transposed_view", lambda x: x.T.__setitem__((0, slice(None)), 8.0), _A34, ()),
]


@pytest.mark.parametrize("name,fn,x,others", INPLACE_CASES, ids=[c[0] for c in INPLACE_CASES])
def test_inplace(name, fn, x, others):
    """Apply the in-place op to a CPU copy and a GPU copy; both arrays (and results) must match."""
    xc, xg = _cpu(x), gpu(x)
    oc, og = both(others)
    res_c, err = cpu_or_error(fn, xc, *oc)
    if err is not None:
        with pytest.raises(type(err)):
            quiet(fn, xg, *og)
            settle(xg)
        return
    res_g = quiet(fn, xg, *og)
    assert_same(xg, xc, rtol=0, atol=0)
    if res_c is None:
        assert res_g is None
    else:
        assert_same_tree(res_g, res_c)


# ----------------------------------------------------------------- comparisons (allclose & co) and the rest

_Y = _X + 1e-9
_YN = _X.copy()
_YN[0, 1] = np.nan
_INF = np.array([[3.5, -1.5, np.inf], [0.0, -np.inf, np.nan]], np.float32)
MISC_CASES = [
    C("array_split", lambda a: ember.array_split(a, 3, axis=1), _A34),
    C("array_split_uneven", lambda a: ember.array_split(a, 2), F((5,))),
    C("fix", ember.fix, _INF),
    C("iscomplex", ember.iscomplex, _INF),
    C("isreal", ember.isreal, _INF),
    C("isneginf", ember.isneginf, _INF),
    C("isposinf", ember.isposinf, _INF),
    C("linalg_matmul", lambda a, b: ember.linalg.matmul(a, b), _A34, F((4, 2), "float32", 3)),
    C("linalg_matrix_transpose", ember.linalg.matrix_transpose, F((2, 3, 4))),
    C("ndim", ember.ndim, F((2, 3, 4))),
    C("size", ember.size, F((2, 3, 4))),
    C("size_axis", lambda a: ember.size(a, 1), F((2, 3, 4))),
    C("allclose_true", ember.allclose, _X, _Y),
    C("allclose_false", ember.allclose, _X, _X + 1e-3),
    C("allclose_tol", lambda a, b: ember.allclose(a, b, rtol=0, atol=2e-3), _X, _X + 1e-3),
    C("allclose_nan", ember.allclose, _YN, _YN),
    C("allclose_equal_nan", lambda a, b: ember.allclose(a, b, equal_nan=True), _YN, _YN),
    C("allclose_broadcast", ember.allclose, _X, _X[0]),
    C("allclose_f32", ember.allclose, _X32, _X32 * (1 + 1e-7)),
    C("allclose_inf", ember.allclose, np.array([np.inf, 1.0]), np.array([np.inf, 1.0])),
    C("allclose_empty", ember.allclose, np.zeros(0), np.zeros(0)),
    C("isclose", ember.isclose, _X, _X + F((3, 4), seed=80, low=-1e-4, high=1e-4)),
    C("isclose_equal_nan", lambda a, b: ember.isclose(a, b, equal_nan=True), _YN, _YN),
    C("isclose_inf", ember.isclose, np.array([np.inf, -np.inf, np.inf, 0.0, np.nan]),
      np.array([np.inf, np.inf, 1e308, 1e-9, np.nan])),
    C("isclose_int", ember.isclose, F((5,), "int64", 81), F((5,), "int64", 82)),
    C("isclose_0d", lambda a, b: ember.isclose(a, b, rtol=0.1), np.array(1.0), np.array(1.05)),
    C("array_equal_true", ember.array_equal, _A34, _A34),
    C("array_equal_false", ember.array_equal, _A34, _B34),
    C("array_equal_shape", ember.array_equal, _A34, _A34[:2]),
    C("array_equal_nan", ember.array_equal, _YN, _YN),
    C("array_equal_equal_nan", lambda a, b: ember.array_equal(a, b, equal_nan=True), _YN, _YN),
    C("array_equal_dtypes", ember.array_equal, np.arange(4, dtype=np.int32), np.arange(4.0)),
    C("array_equal_empty", ember.array_equal, np.zeros((0, 2)), np.zeros((0, 2))),
    C("array_equiv_broadcast", ember.array_equiv, np.tile(_V3, (4, 1)), _V3),
    C("array_equiv_false", ember.array_equiv, _A34, _B34[0]),
    C("array_equiv_shape", ember.array_equiv, _A34, F((3,), "float32")),
]


@pytest.mark.parametrize("fn,args,rtol,atol,error", MISC_CASES)
def test_misc_and_comparisons(fn, args, rtol, atol, error):
    run_case(fn, args, rtol, atol, error)


def test_device_argument_of_results():
    """Spot check: results of data-dependent shape stay on the device of the input."""
    xg = gpu(F((3, 4), "int64", 1, -1, 2))
    for r in (ember.argwhere(xg), ember.flatnonzero(xg), *ember.nonzero(xg), ember.unique(xg)):
        assert_on_device(r)
        assert r.device == xg.device
