"""Gradient rules of indexing, sorting and selection, and of the Python-level
elementwise functions (ember/autograd/rules/indexing.py), plus ``x[key]`` and
``x[key] = v`` under autograd (the rules in ember/autograd/inplace.py).

Every rule: gradcheck in float64, and PyTorch's gradients for the same values
and upstream gradients where PyTorch has the function; a subset to second
order (gradgradcheck).
"""

import numpy as np
import pytest

import ember as E
from ember.autograd import gradcheck, gradgradcheck
from helpers import leaf, tleaf
from helpers import uniform as vals

torch = pytest.importorskip("torch")


def _outs(res):
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _float_outs(outs):
    return [o for o in outs if np.dtype(o.dtype if not hasattr(o, "is_floating_point") else
                                        str(o.dtype).replace("torch.", "")).kind in "fc"]


def check_torch(fn, tfn, arrays, rtol=1e-7, atol=1e-10, ember_in=None, torch_in=None):
    """Same forward values and gradients as torch for a random upstream gradient."""
    xs = ember_in if ember_in is not None else [leaf(a) for a in arrays]
    ts = torch_in if torch_in is not None else [tleaf(a) for a in arrays]
    eo, to = _float_outs(_outs(fn(*xs))), _float_outs(_outs(tfn(*ts)))
    assert len(eo) == len(to)
    rng = np.random.default_rng(1)
    loss = tloss = 0
    for e, t in zip(eo, to):
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(np.asarray(e), t.detach().resolve_conj().numpy(),
                                   rtol=rtol, atol=atol)
        w = rng.uniform(-1.0, 1.0, size=tuple(e.shape))
        if e.dtype.kind == "c":
            loss = loss + E.real(e * E.asarray(w)).sum()
            tloss = tloss + torch.real(t * torch.tensor(w)).sum()
        else:
            loss = loss + (e * E.asarray(w)).sum()
            tloss = tloss + (t * torch.tensor(w)).sum()
    loss.backward()
    tloss.backward()
    for x, t in zip(xs, ts):
        if not getattr(t, "requires_grad", False):
            continue
        if t.grad is None:
            assert x.grad is None or not np.any(np.asarray(x.grad))
            continue
        assert x.grad is not None and x.grad.shape == x.shape and x.grad.dtype == x.dtype
        np.testing.assert_allclose(np.asarray(x.grad), t.grad.resolve_conj().numpy(),
                                   rtol=rtol, atol=atol)


def _t(a):
    return torch.tensor(np.asarray(a))


I2 = np.array([[2, 0], [1, 2]])                     # an index array with repeats
REP = np.array([0, 2, 2, -1])
MASK = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
COND = np.array([[True, False, True], [False, True, True]])
NONFINITE = np.array([[np.inf, 0.0, np.nan], [0.0, -np.inf, 0.0]])
NONFINITE_AT = ~np.isfinite(NONFINITE) | np.array([[False, True, False], [False, False, False]])
BIDX = np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]])       # broadcasts against (2, 1)

# (id, ember fn, input shapes, torch fn or None)
CASES = [
    ("take_flat", lambda t: E.take(t, I2), [(3, 4)], lambda t: torch.take(t, _t(I2))),
    ("take_axis", lambda t: E.take(t, REP, axis=1), [(3, 4)], lambda t: t[:, _t(REP)]),
    ("take_axis_2d_idx", lambda t: E.take(t.T, I2, axis=0), [(3, 4)], lambda t: t.T[_t(I2)]),
    ("take_scalar", lambda t: E.take(t, 1, axis=-1), [(3, 4)], lambda t: t[:, 1]),
    ("take_wrap", lambda t: E.take(t, [5, -7, 1], mode="wrap"), [(4,)],
     lambda t: t[_t([1, 1, 1])]),
    ("take_clip", lambda t: E.take(t, [5, -7, 2], mode="clip", dim=0), [(4,)],
     lambda t: t[_t([3, 0, 2])]),
    ("method_take", lambda t: t.take(E.asarray(REP), axis=0), [(4, 2)], lambda t: t[_t(REP)]),
    ("index_select", lambda t: E.index_select(t, 1, E.asarray([3, 0, 3])), [(2, 4)],
     lambda t: torch.index_select(t, 1, _t([3, 0, 3]))),
    ("take_along_axis", lambda t: E.take_along_axis(t, E.asarray(np.array([[0, 0], [2, 1], [3, 3]])), 1),
     [(3, 4)], lambda t: torch.take_along_dim(t, _t([[0, 0], [2, 1], [3, 3]]), 1)),
    ("take_along_axis_bcast", lambda t: E.take_along_axis(t, BIDX, axis=0), [(2, 1)],
     lambda t: torch.take_along_dim(t, _t(BIDX), 0)),
    ("take_along_axis_bcast2", lambda t: E.take_along_axis(t, np.array([[0, 2, 2]]), axis=1),
     [(3, 3)], lambda t: torch.take_along_dim(t, _t([[0, 2, 2]]), 1)),
    ("take_along_axis_none", lambda t: E.take_along_axis(t, np.array([5, 0, 5]), axis=None),
     [(2, 3)], lambda t: torch.take_along_dim(t, _t([5, 0, 5]))),
    ("index_add", lambda x, s: E.index_add(x, 1, E.asarray([0, 2, 0]), s, alpha=2.0),
     [(2, 3), (2, 3)], lambda x, s: torch.index_add(x, 1, _t([0, 2, 0]), s, alpha=2.0)),
    ("index_add_dim", lambda x, s: E.index_add(x, 0, [1, 1], s, dim=-1), [(3, 2), (3, 2)],
     lambda x, s: torch.index_add(x, -1, _t([1, 1]), s)),
    ("index_add_0d", lambda x, s: E.index_add(x, 0, [0, 0, 0], s), [(), (3,)],
     lambda x, s: x + s.sum()),
    ("scatter_add", lambda x, s: E.scatter_add(x, 0, np.array([[1, 0], [1, 1]]), s),
     [(3, 3), (2, 2)], lambda x, s: torch.scatter_add(x, 0, _t([[1, 0], [1, 1]]), s)),
    ("compress", lambda t: E.compress([True, False, True], t, axis=1), [(2, 3)],
     lambda t: t[:, _t([True, False, True])]),
    ("compress_flat", lambda t: E.compress(np.array([0, 1, 1, 0, 1]), t), [(2, 3)],
     lambda t: t.ravel()[_t([1, 2, 4])]),
    ("extract", lambda t: E.extract(E.asarray(MASK), t), [(3, 4)],
     lambda t: torch.masked_select(t, _t(MASK))),
    ("masked_fill", lambda x, v: E.masked_fill(x, E.asarray(COND), v), [(2, 3), ()],
     lambda x, v: torch.masked_fill(x, _t(COND), v)),
    ("masked_fill_scalar", lambda x: E.masked_fill(x, COND, 5.0), [(2, 3)],
     lambda x: torch.masked_fill(x, _t(COND), 5.0)),
    ("select", lambda a, b, d: E.select([E.asarray(COND), np.array([True, True, False])], [a, b], d),
     [(2, 3), (3,), (2, 1)], None),
    ("choose", lambda a, b: E.choose(np.array([[0, 1, 1], [1, 0, 2]]), [a, b, b * 2], mode="clip"),
     [(2, 3), (3,)], None),
    ("choose_stacked", lambda c: E.choose(np.array([[0, 1, 1], [1, 0, 3]]), c, mode="wrap"),
     [(3, 1, 3)], None),
    ("bincount", lambda w: E.bincount(E.asarray([0, 2, 2, 3]), weights=w), [(4,)], None),
    ("sort", lambda t: E.sort(t), [(3, 4)], lambda t: torch.sort(t, stable=True)[0]),
    ("sort_axis0", lambda t: E.sort(t.T, axis=0), [(3, 4)], lambda t: torch.sort(t.T, 0)[0]),
    ("sort_desc", lambda t: E.sort(t, axis=-1, descending=True), [(2, 5)],
     lambda t: torch.sort(t, dim=-1, descending=True, stable=True)[0]),
    ("sort_dim", lambda t: E.sort(t, dim=0).values, [(4, 2)], lambda t: torch.sort(t, 0)[0]),
    ("sort_none", lambda t: E.sort(t, axis=None), [(2, 3)], lambda t: torch.sort(t.ravel())[0]),
    ("sort_0d", lambda t: E.sort(t), [()], lambda t: t.clone()),
    ("msort", lambda t: E.msort(t), [(3, 2)], lambda t: torch.sort(t, 0)[0]),
    ("partition", lambda t: E.partition(t, 2), [(2, 5)], None),
    ("partition_none", lambda t: E.partition(t, (1, 3), axis=None), [(2, 3)], None),
    ("topk", lambda t: E.topk(t, 2), [(3, 4)], lambda t: torch.topk(t, 2)),
    ("topk_smallest", lambda t: E.topk(t, 3, dim=0, largest=False), [(4, 2)],
     lambda t: torch.topk(t, 3, 0, largest=False)),
    ("where", lambda a, b: E.where(E.asarray(COND), a, b), [(2, 3), (3,)],
     lambda a, b: torch.where(_t(COND), a, b)),
    ("where_scalar", lambda a: E.where(COND, 0.5, a.T), [(3, 2)],
     lambda a: torch.where(_t(COND), 0.5, a.T)),
    ("where_float_cond", lambda c, a: E.where(c > 0, a, c), [(2, 3), (2, 3)],
     lambda c, a: torch.where(c > 0, a, c)),
    ("clip", lambda t: E.clip(t, -0.5, 0.7), [(3, 4)], lambda t: torch.clamp(t, -0.5, 0.7)),
    ("clip_min_only", lambda t: E.clip(t, min=0.1), [(3, 4)], lambda t: torch.clamp(t, min=0.1)),
    ("clip_max_only", lambda t: E.clip(t, max=0.1), [(3, 4)], lambda t: torch.clamp(t, max=0.1)),
    ("clip_arrays", lambda x, lo, hi: E.clip(x, lo, hi), [(3, 4), (4,), (3, 1)],
     lambda x, lo, hi: torch.clamp(x, lo, hi)),
    ("method_clip", lambda t: t.clip(-1.0, 1.0), [(3, 4)], lambda t: t.clip(-1.0, 1.0)),
    ("nan_to_num", lambda t: E.nan_to_num(E.where(NONFINITE_AT, NONFINITE, t), posinf=3.0),
     [(2, 3)], lambda t: torch.nan_to_num(torch.where(_t(NONFINITE_AT), _t(NONFINITE), t),
                                          posinf=3.0)),
    ("real", lambda t: E.real(t), [(3,)], None),
    ("imag", lambda t: E.imag(t), [(3,)], None),
    ("conj", lambda t: E.conj(t), [(3,)], lambda t: t.clone()),
    ("conjugate", lambda t: E.conjugate(t), [(3,)], lambda t: t.clone()),
    ("angle", lambda t: E.angle(t), [(3,)], None),
    ("sinc", lambda t: E.sinc(t), [(3, 4)], lambda t: torch.sinc(t)),
    ("i0", lambda t: E.i0(t * 4), [(3, 4)], lambda t: torch.i0(t * 4)),
    ("float_power", lambda a, b: E.float_power(E.abs(a) + 0.5, b), [(2, 3), (3,)],
     lambda a, b: torch.float_power(torch.abs(a) + 0.5, b)),
    ("float_power_scalar", lambda a: E.float_power(E.abs(a) + 0.5, 2.5), [(2, 3)],
     lambda a: torch.float_power(torch.abs(a) + 0.5, 2.5)),
    ("float_power_base", lambda b: E.float_power(3.0, b), [(2, 3)],
     lambda b: torch.float_power(3.0, b)),
    ("divmod", lambda a, b: E.divmod(a * 3, E.abs(b) + 0.5), [(2, 3), (2, 3)],
     lambda a, b: (torch.div(a * 3, torch.abs(b) + 0.5, rounding_mode="floor"),
                   torch.remainder(a * 3, torch.abs(b) + 0.5))),
    # (torch's ldexp gradient is 0 for negative exponents, so compare with non-negative ones)
    ("ldexp", lambda a: E.ldexp(a, E.asarray([1, 0, 3])), [(2, 3)],
     lambda a: torch.ldexp(a, _t([1, 0, 3]))),
    ("ldexp_neg", lambda a: E.ldexp(a, E.asarray([1, -2, 3])), [(2, 3)], None),
    ("frexp", lambda a: E.frexp(a * 7), [(2, 3)], lambda a: torch.frexp(a * 7)),
    ("modf", lambda a: E.modf(a * 3), [(2, 3)], None),
]


def _case_inputs(shapes, seed=0):
    return [vals(s, seed + i) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("name,fn,shapes,tfn", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(name, fn, shapes, tfn):
    xs = [leaf(a) for a in _case_inputs(shapes)]
    assert gradcheck(fn, xs)


TORCH_CASES = [c for c in CASES if c[3] is not None]


@pytest.mark.parametrize("name,fn,shapes,tfn", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_matches_torch(name, fn, shapes, tfn):
    check_torch(fn, tfn, _case_inputs(shapes, seed=5))


GG = ["take_axis", "take_along_axis_bcast2", "index_add", "scatter_add", "compress", "sort_desc",
      "sort_none", "partition", "topk", "where", "clip_arrays", "masked_fill", "choose", "sinc",
      "i0", "float_power", "select", "bincount"]


@pytest.mark.parametrize("name", GG)
def test_gradgradcheck(name):
    (_, fn, shapes, _) = next(c for c in CASES if c[0] == name)
    xs = [leaf(a) for a in _case_inputs(shapes)]

    def f(*ts):
        return [o * o for o in _float_outs(_outs(fn(*ts)))]
    assert gradgradcheck(f, xs)


# ---------------------------------------------------------------- conventions

def test_clip_at_the_bounds_follows_torch():
    v = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    check_torch(lambda t: E.clip(t, -0.5, 0.5), lambda t: torch.clamp(t, -0.5, 0.5), [v])
    lo, hi = np.array([-0.5, -0.5, 0.0, 0.5, 0.0, 3.0]), np.full(6, 0.5)
    check_torch(lambda x, a, b: E.clip(x, a, b), lambda x, a, b: torch.clamp(x, a, b), [v, lo, hi])


def test_clip_with_min_above_max_gives_the_gradient_to_max():
    x, lo, hi = leaf([0.0, 5.0, -5.0]), leaf([1.0, 1.0, 1.0]), leaf([-1.0, -1.0, -1.0])
    y = E.clip(x, lo, hi)
    np.testing.assert_array_equal(np.asarray(y.detach()), [-1.0, -1.0, -1.0])
    y.sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), [0, 0, 0])
    np.testing.assert_array_equal(np.asarray(lo.grad), [0, 0, 0])
    np.testing.assert_array_equal(np.asarray(hi.grad), [1, 1, 1])


def test_sort_ties_follow_the_stable_order_like_torch():
    v = np.array([[1.0, 0.5, 1.0, 0.5, 2.0]])
    for desc in (False, True):
        check_torch(lambda t: E.sort(t, descending=desc),
                    lambda t: torch.sort(t, descending=desc, stable=True)[0], [v])


def test_partition_puts_the_kth_gradient_on_the_kth_element():
    x = leaf([3.0, 1.0, 4.0, 1.5, 9.0])
    E.partition(x, 2)[2].backward()
    np.testing.assert_array_equal(np.asarray(x.grad), [1, 0, 0, 0, 0])


def test_round_has_zero_gradient_and_spacing_is_a_constant():
    x = leaf(vals((3,)))
    for y in (E.round(x), E.around(x, 1), x.round()):
        assert y.requires_grad            # piecewise constant: gradient 0, as PyTorch
    assert not E.spacing(x).requires_grad
    (E.round(x) * x).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.round(vals((3,))))


def test_complex_functions_match_torch():
    z = vals((4,), 1) + 1j * vals((4,), 2)
    for fn, tfn in [(E.real, torch.real), (E.imag, torch.imag), (E.angle, torch.angle),
                    (E.conj, lambda t: torch.conj(t) * 1), (lambda t: E.abs(t) * E.real(t),
                                                             lambda t: t.abs() * t.real)]:
        x = E.asarray(z, requires_grad=True)
        t = torch.tensor(z, requires_grad=True)
        check_torch(fn, tfn, None, ember_in=[x], torch_in=[t])


def test_real_and_imag_of_real_arrays():
    x = leaf(vals((3,)))
    (E.imag(x * 1) + 2 * (x * 1)).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), [2, 2, 2])
    assert E.imag(x).dtype == E.float64


def test_angle_of_real_input_has_zero_gradient():
    x = leaf([-1.0, 2.0])
    (E.angle(x) + x).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), [1, 1])


def test_nan_to_num_gradient_is_zero_where_replaced():
    x, t = leaf([0.0, 1.0, -1.0, 2.0]), tleaf([0.0, 1.0, -1.0, 2.0])
    d, td = E.asarray([0.0, 0.0, 0.0, 1.0]), torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    with np.errstate(all="ignore"):
        y = E.nan_to_num(x / d, posinf=7.0)
    ty = torch.nan_to_num(t / td, posinf=7.0)
    (y * 3).sum().backward()
    (ty * 3).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), t.grad.numpy())


def test_i0_gradient_for_large_arguments():
    v = np.array([-30.0, 0.0, 0.1, 12.0, 45.0])
    x, t = leaf(v), tleaf(v)
    E.i0(x).sum().backward()
    torch.i0(t).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=1e-12)


def test_float32_gather_gives_float32_gradient():
    x = E.asarray(np.ones((3, 2), np.float32), requires_grad=True)
    E.take(x, [0, 0, 2], axis=0).sum().backward()
    assert x.grad.dtype == E.float32
    np.testing.assert_array_equal(np.asarray(x.grad), [[2, 2], [0, 0], [1, 1]])


def test_where_condition_gets_no_gradient():
    c = leaf([1.0, -1.0])
    a = leaf([2.0, 3.0])
    y = E.where(c, a, 0.0)
    y.sum().backward()
    assert c.grad is None
    np.testing.assert_array_equal(np.asarray(a.grad), [1, 1])


# ---------------------------------------------------------------- x[key]

KEYS = [
    ("slice", lambda: (slice(1, None), slice(None, None, 2))),
    ("int", lambda: 1),
    ("int_tuple", lambda: (2, -1)),
    ("none_ellipsis", lambda: (None, Ellipsis, 1)),
    ("ellipsis_none", lambda: (Ellipsis, None)),
    ("int_array_repeats", lambda: np.array([0, 2, 2, 0, -1])),
    ("int_array_2d", lambda: (np.array([[0, 1], [1, 1]]), slice(None))),
    ("two_int_arrays", lambda: (np.array([0, 2, 0]), np.array([1, 1, 1]))),
    ("mixed", lambda: (slice(None, 2), np.array([3, 0, 3]))),
    ("bool_mask", lambda: MASK),
    ("bool_rows", lambda: np.array([True, False, True])),
    ("list", lambda: [2, 0, 0]),
]


def _ember_key(key):
    if isinstance(key, np.ndarray):
        return E.asarray(key)
    if isinstance(key, tuple):
        return tuple(_ember_key(k) for k in key)
    return key


def _torch_key(key):
    if isinstance(key, np.ndarray):
        return torch.tensor(key)
    if isinstance(key, tuple):
        return tuple(_torch_key(k) for k in key)
    return key


@pytest.mark.parametrize("name,key", KEYS, ids=[k[0] for k in KEYS])
def test_getitem_matches_torch(name, key):
    k = key()
    check_torch(lambda t: t[_ember_key(k)], lambda t: t[_torch_key(k)], [vals((3, 4))])


@pytest.mark.parametrize("name,key", KEYS, ids=[k[0] for k in KEYS])
def test_getitem_gradcheck(name, key):
    k = key()
    assert gradcheck(lambda t: t[_ember_key(k)], [leaf(vals((3, 4)))])


@pytest.mark.parametrize("key", [(slice(None, None, -1),), (slice(None), slice(3, 0, -2)),
                                 (slice(None, None, -2), np.array([0, 0, 3]))],
                         ids=["reverse", "neg_step2", "neg_step_and_array"])
def test_getitem_negative_steps(key):
    v = vals((3, 4))
    x = leaf(v)
    y = x[_ember_key(key)]
    w = vals(tuple(y.shape), 3)
    (y * E.asarray(w)).sum().backward()
    expected = np.zeros_like(v)
    np.add.at(expected, key, w)
    np.testing.assert_allclose(np.asarray(x.grad), expected)
    assert gradcheck(lambda t: t[_ember_key(key)], [leaf(v)])


def test_getitem_of_a_non_contiguous_view():
    v = vals((4, 5))
    check_torch(lambda t: t.T[1:, np.array([0, 0, 2])][::2], lambda t: t.T[1:, _t([0, 0, 2])][::2], [v])


@pytest.mark.parametrize("name", ["slice", "int_array_repeats", "bool_mask", "mixed"])
def test_getitem_gradgradcheck(name):
    k = dict(KEYS)[name]()
    assert gradgradcheck(lambda t: t[_ember_key(k)] ** 2, [leaf(vals((3, 4)))])


def test_writing_the_indexed_array_after_a_gather_is_fine():
    v = vals((3, 4))
    x, t = leaf(v), tleaf(v)
    y, ty = x * 1, t * 1
    z, tz = y[E.asarray([2, 0])], ty[_t([2, 0])]
    y += 1                  # the gather keeps only y's shape, as in torch
    ty += 1
    (z * 2).sum().backward()
    (tz * 2).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy())


def test_writing_the_index_array_after_a_gather_is_detected_or_harmless():
    v = vals((3, 4))
    x = leaf(v)
    idx = E.asarray([2, 0])
    z = (x * 1)[idx]
    idx[0] = 1
    try:
        (z * 2).sum().backward()
    except RuntimeError:
        return
    expected = np.zeros((3, 4))
    expected[[2, 0]] = 2
    np.testing.assert_allclose(np.asarray(x.grad), expected)


def test_in_place_method_sort_of_a_non_leaf():
    v = vals((2, 3))
    x, t = leaf(v), tleaf(v)
    y = x * 1
    y.sort()
    ty = torch.sort(t * 1)[0]
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy())


# ---------------------------------------------------------------- x[key] = v

SET_KEYS = [
    ("slice", lambda: (slice(1, None), slice(None, None, 2)), (2, 2)),
    ("row_bcast", lambda: 1, (4,)),
    ("scalar_bcast", lambda: (slice(None), 1), ()),
    ("int_array", lambda: np.array([0, 2]), (2, 4)),
    ("repeated_int_array", lambda: np.array([0, 0]), (1, 4)),
    ("bool_mask", lambda: MASK, (6,)),
    ("ellipsis_none", lambda: (Ellipsis, None, 2), (3, 1)),
]


@pytest.mark.parametrize("name,key,vshape", SET_KEYS, ids=[k[0] for k in SET_KEYS])
@pytest.mark.parametrize("who", ["value", "base", "both"])
def test_setitem_matches_torch(name, key, vshape, who):
    k = key()
    xv, vv = vals((3, 4)), vals(vshape, 9)
    x, t = leaf(xv), tleaf(xv)
    v, tv = leaf(vv), tleaf(vv)
    if who == "value":
        y, ty = E.zeros((3, 4), dtype=E.float64), torch.zeros(3, 4, dtype=torch.float64)
    else:
        y, ty = x * 2, t * 2
    if who == "base":
        y[_ember_key(k)] = 0.5
        ty[_torch_key(k)] = 0.5
    elif name == "repeated_int_array":       # which write wins is unspecified: same value
        y[_ember_key(k)] = v * 1
        ty[_torch_key(k)] = tv * 1
    else:
        y[_ember_key(k)] = v * 3
        ty[_torch_key(k)] = tv * 3
    w = vals((3, 4), 4)
    (y * y * E.asarray(w)).sum().backward()
    (ty * ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(y.detach()), ty.detach().numpy())
    if who != "value":
        np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy())
    if who != "base" and name != "repeated_int_array":
        np.testing.assert_allclose(np.asarray(v.grad), tv.grad.numpy())


def test_setitem_gradcheck_and_gradgradcheck():
    def f(x, v):
        y = x * 1
        y[1:, np.array([0, 2])] = v * v
        return y * x
    ins = [leaf(vals((3, 4))), leaf(vals((2, 2), 1))]
    assert gradcheck(f, ins)
    assert gradgradcheck(f, ins)


def test_setitem_into_a_leaf_that_requires_grad_raises():
    x = leaf(vals((3,)))
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 1.0


def test_inplace_on_an_advanced_index_of_a_non_leaf():
    v = vals((4, 3))
    x, t = leaf(v), tleaf(v)
    y, ty = x * 1, t * 1
    y[np.array([0, 2])] *= 3            # y[idx] = y[idx] * 3
    ty[_t([0, 2])] *= 3
    y[np.array([1, 3]), 1:] += y[:2, :2] + 2
    ty[_t([1, 3]), 1:] += ty[:2, :2] + 2
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy())


def test_put_along_axis_is_in_place_and_leaves_leaves_alone():
    # in-place index functions cannot record; they must not touch a leaf that requires grad
    x = leaf(vals((2, 3)))
    with E.no_grad():
        y = x * 1
    E.put_along_axis(y, E.asarray([[0], [2]]), 5.0, axis=1)
    np.testing.assert_array_equal(np.asarray(y)[[0, 1], [0, 2]], [5.0, 5.0])
