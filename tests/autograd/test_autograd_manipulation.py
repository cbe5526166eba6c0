"""Gradient rules of shape manipulation (ember/autograd/rules/manipulation.py).

Every rule is checked against central finite differences in float64
(gradcheck) and, where PyTorch has the same function, against PyTorch's
gradients for the same values and the same upstream gradients (tuple outputs
included), over contiguous, transposed and negative-stride inputs, 0-d and
empty arrays.  A subset is checked to second order (gradgradcheck), and
views of tracked arrays (plain and written in place) are compared with PyTorch.
"""
import numpy as np
import pytest

import ember as E
from ember.autograd import gradcheck, gradgradcheck
from helpers import leaf, tleaf
from helpers import uniform as vals

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _outs(res):
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _weights(outs, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, size=tuple(o.shape)) for o in outs]


def check_torch(fn, tfn, arrays, rtol=1e-7, atol=1e-10):
    """ember and torch: same forward values, same gradients for a random upstream gradient."""
    xs = [leaf(a) for a in arrays]
    ts = [tleaf(a) for a in arrays]
    eo, to = _outs(fn(*xs)), _outs(tfn(*ts))
    assert len(eo) == len(to)
    ws = _weights(eo)
    for e, t, w in zip(eo, to, ws):
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(np.asarray(e), t.detach().numpy(), rtol=rtol, atol=atol)
    loss = sum((e * E.asarray(w)).sum() for e, w in zip(eo, ws))
    tloss = sum((t * torch.tensor(w)).sum() for t, w in zip(to, ws))
    loss.backward()
    tloss.backward()
    for x, t in zip(xs, ts):
        if t.grad is None:
            assert x.grad is None or not np.any(np.asarray(x.grad))
            continue
        assert x.grad is not None
        assert x.grad.shape == x.shape and x.grad.dtype == x.dtype
        np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=rtol, atol=atol)


# (id, ember fn, input shapes, torch fn or None)
CASES = [
    ("reshape", lambda t: E.reshape(t, (4, 3)), [(3, 4)], lambda t: t.reshape(4, 3)),
    ("reshape_T", lambda t: E.reshape(t.T, (2, 6)), [(3, 4)], lambda t: t.T.reshape(2, 6)),
    ("reshape_F", lambda t: E.reshape(t, (2, 6), order="F"), [(3, 4)],
     lambda t: t.T.reshape(6, 2).T),
    ("reshape_0d", lambda t: E.reshape(t, (1, 1)), [()], lambda t: t.reshape(1, 1)),
    ("method_reshape_view", lambda t: t.reshape(2, 2, 3).view(12), [(3, 4)],
     lambda t: t.reshape(2, 2, 3).view(12)),
    ("ravel", lambda t: E.ravel(t), [(3, 4)], lambda t: t.ravel()),
    ("ravel_negstride", lambda t: E.ravel(t[::-1, ::2]), [(3, 4)],
     lambda t: t.flip(0)[:, ::2].ravel()),
    ("ravel_F", lambda t: E.ravel(t, order="F"), [(3, 4)], lambda t: t.T.ravel()),
    ("method_flatten", lambda t: t.T.flatten(), [(3, 4)], lambda t: t.T.flatten()),
    ("flatten_dims", lambda t: E.flatten(t, 1), [(2, 3, 2)], lambda t: torch.flatten(t, 1)),
    ("flatten_0d", lambda t: E.flatten(t), [()], lambda t: torch.flatten(t)),
    ("transpose", lambda t: E.transpose(t), [(2, 3, 4)], lambda t: t.permute(2, 1, 0)),
    ("transpose_axes", lambda t: E.transpose(t, (1, -1, 0)), [(2, 3, 4)],
     lambda t: t.permute(1, 2, 0)),
    ("T", lambda t: t.T * 1, [(3, 4)], lambda t: t.T * 1),
    ("mT", lambda t: t.mT, [(2, 3, 4)], lambda t: t.mT),
    ("permute_dims", lambda t: E.permute_dims(t, (2, 0, 1)), [(2, 3, 4)],
     lambda t: t.permute(2, 0, 1)),
    ("permute", lambda t: E.permute(t, 1, 0, 2), [(2, 3, 4)], lambda t: t.permute(1, 0, 2)),
    ("method_permute", lambda t: t.permute((0, 2, 1)), [(2, 3, 4)],
     lambda t: t.permute(0, 2, 1)),
    ("matrix_transpose", lambda t: E.matrix_transpose(t), [(2, 3, 4)], lambda t: t.mT),
    ("moveaxis", lambda t: E.moveaxis(t, 0, -1), [(2, 3, 4)], lambda t: torch.moveaxis(t, 0, -1)),
    ("moveaxis_tuple", lambda t: E.moveaxis(t, (0, 1), (2, 0)), [(2, 3, 4)],
     lambda t: torch.moveaxis(t, (0, 1), (2, 0))),
    ("swapaxes", lambda t: E.swapaxes(t, 0, 2), [(2, 3, 4)], lambda t: torch.swapaxes(t, 0, 2)),
    ("expand_dims", lambda t: E.expand_dims(t, axis=(0, -1)), [(2, 3)],
     lambda t: t.unsqueeze(0).unsqueeze(-1)),
    ("unsqueeze", lambda t: E.unsqueeze(t, 1), [(2, 3)], lambda t: t.unsqueeze(1)),
    ("method_unsqueeze", lambda t: t.unsqueeze(-1), [(2, 3)], lambda t: t.unsqueeze(-1)),
    ("squeeze_all", lambda t: E.squeeze(t), [(1, 3, 1, 2)], lambda t: t.squeeze()),
    ("squeeze_axis", lambda t: E.squeeze(t, axis=2), [(1, 3, 1, 2)], lambda t: t.squeeze(2)),
    ("squeeze_dim", lambda t: E.squeeze(t, dim=0), [(1, 3)], lambda t: t.squeeze(0)),
    ("flip_all", lambda t: E.flip(t), [(3, 4)], lambda t: torch.flip(t, (0, 1))),
    ("flip_axis", lambda t: E.flip(t, axis=-1), [(2, 3, 4)], lambda t: torch.flip(t, (-1,))),
    ("flip_dims", lambda t: E.flip(t, dims=(0, 2)), [(2, 3, 4)], lambda t: torch.flip(t, (0, 2))),
    ("fliplr", lambda t: E.fliplr(t), [(3, 4)], lambda t: torch.fliplr(t)),
    ("flipud", lambda t: E.flipud(t.T), [(3, 4)], lambda t: torch.flipud(t.T)),
    ("rot90", lambda t: E.rot90(t), [(3, 4)], lambda t: torch.rot90(t)),
    ("rot90_k3", lambda t: E.rot90(t, 3, axes=(1, 2)), [(2, 3, 4)],
     lambda t: torch.rot90(t, 3, (1, 2))),
    ("rot90_k2", lambda t: E.rot90(t, -2), [(3, 4)], lambda t: torch.rot90(t, -2)),
    ("rot90_k0", lambda t: E.rot90(t, 4) * 2, [(3, 4)], lambda t: torch.rot90(t, 4) * 2),
    ("roll_flat", lambda t: E.roll(t, 5), [(3, 4)], lambda t: torch.roll(t, 5)),
    ("roll_axis", lambda t: E.roll(t, -1, axis=1), [(3, 4)], lambda t: torch.roll(t, -1, 1)),
    ("roll_tuple", lambda t: E.roll(t, (1, 2), axis=(0, 1)), [(3, 4)],
     lambda t: torch.roll(t, (1, 2), (0, 1))),
    ("roll_dims", lambda t: E.roll(t.T, 2, dims=0), [(3, 4)], lambda t: torch.roll(t.T, 2, 0)),
    ("concatenate", lambda a, b: E.concatenate([a, b], axis=1), [(2, 3), (2, 2)],
     lambda a, b: torch.cat([a, b], 1)),
    ("concatenate_neg", lambda a, b: E.concatenate((a, b.T), axis=-2), [(2, 3), (3, 1)],
     lambda a, b: torch.cat([a, b.T], -2)),
    ("concatenate_none", lambda a, b: E.concatenate([a, b], axis=None), [(2, 3), (4,)],
     lambda a, b: torch.cat([a.ravel(), b])),
    ("concatenate_repeat", lambda a: E.concatenate([a, a * 2, a]), [(2, 3)],
     lambda a: torch.cat([a, a * 2, a])),
    ("concatenate_empty", lambda a, b: E.concatenate([a, b]), [(0, 3), (2, 3)],
     lambda a, b: torch.cat([a, b])),
    ("concatenate_mixed", lambda a: E.concatenate([a, E.ones((1, 3), dtype=E.float64)]), [(2, 3)],
     lambda a: torch.cat([a, torch.ones(1, 3, dtype=torch.float64)])),
    ("concatenate_array", lambda a: E.concatenate(a, axis=1), [(3, 2, 2)],
     lambda a: torch.cat(list(a.unbind(0)), 1)),
    ("concat", lambda a, b: E.concat([a, b], axis=0), [(2, 3), (1, 3)],
     lambda a, b: torch.cat([a, b], 0)),
    ("cat", lambda a, b: E.cat([a, b], dim=1), [(2, 3), (2, 1)], lambda a, b: torch.cat([a, b], 1)),
    ("stack", lambda a, b: E.stack([a, b], axis=1), [(2, 3), (2, 3)],
     lambda a, b: torch.stack([a, b], 1)),
    ("stack_neg", lambda a, b: E.stack([a, b.T], axis=-1), [(2, 3), (3, 2)],
     lambda a, b: torch.stack([a, b.T], -1)),
    ("stack_dim", lambda a: E.stack([a, a], dim=0), [(3,)], lambda a: torch.stack([a, a], 0)),
    ("stack_array", lambda a: E.stack(a, axis=2), [(3, 2, 2)],
     lambda a: torch.stack(list(a.unbind(0)), 2)),
    ("stack_0d", lambda a, b: E.stack([a, b]), [(), ()], lambda a, b: torch.stack([a, b])),
    ("hstack_1d", lambda a, b: E.hstack([a, b]), [(2,), (3,)], lambda a, b: torch.hstack([a, b])),
    ("hstack_2d", lambda a, b: E.hstack([a, b]), [(2, 1), (2, 3)], lambda a, b: torch.hstack([a, b])),
    ("hstack_0d", lambda a, b: E.hstack([a, b]), [(), (2,)], lambda a, b: torch.hstack([a, b])),
    ("vstack", lambda a, b: E.vstack([a, b]), [(3,), (2, 3)], lambda a, b: torch.vstack([a, b])),
    ("vstack_array", lambda a: E.vstack(a), [(2, 3)], lambda a: torch.vstack(list(a.unbind(0)))),
    ("dstack", lambda a, b: E.dstack([a, b]), [(3,), (1, 3)], lambda a, b: torch.dstack([a, b])),
    ("dstack_3d", lambda a, b: E.dstack([a, b]), [(2, 2, 1), (2, 2)],
     lambda a, b: torch.dstack([a, b])),
    ("column_stack", lambda a, b: E.column_stack([a, b]), [(3,), (3, 2)],
     lambda a, b: torch.column_stack([a, b])),
    ("unstack", lambda t: E.unstack(t), [(3, 2)], lambda t: torch.unbind(t)),
    ("unstack_axis", lambda t: E.unstack(t, axis=-1), [(2, 3)], lambda t: torch.unbind(t, -1)),
    ("unstack_partial", lambda t: E.unstack(t, axis=1)[1], [(2, 3)], lambda t: torch.unbind(t, 1)[1]),
    ("split", lambda t: E.split(t, 2, axis=1), [(2, 4)], lambda t: torch.tensor_split(t, 2, 1)),
    ("split_indices", lambda t: E.split(t, [1, 3]), [(4, 2)], lambda t: torch.tensor_split(t, [1, 3])),
    ("split_one_used", lambda t: E.split(t, 3)[1] * 2, [(6,)], lambda t: torch.split(t, 2)[1] * 2),
    ("array_split", lambda t: E.array_split(t, 3), [(5, 2)], lambda t: torch.tensor_split(t, 3)),
    ("array_split_overlap", lambda t: E.array_split(t, [3, 1]), [(5,)],
     lambda t: (t[0:3], t[3:1], t[1:])),
    ("array_split_neg", lambda t: E.array_split(t, [-2], axis=0), [(5,)],
     lambda t: (t[:-2], t[-2:])),
    ("hsplit", lambda t: E.hsplit(t, 2), [(2, 4)], lambda t: torch.hsplit(t, 2)),
    ("hsplit_1d", lambda t: E.hsplit(t, [1]), [(4,)], lambda t: torch.hsplit(t, [1])),
    ("vsplit", lambda t: E.vsplit(t, [1]), [(3, 2)], lambda t: torch.vsplit(t, [1])),
    ("dsplit", lambda t: E.dsplit(t, 2), [(1, 2, 4)], lambda t: torch.dsplit(t, 2)),
    ("tile", lambda t: E.tile(t, (2, 1, 3)), [(2, 2)], lambda t: torch.tile(t, (2, 1, 3))),
    ("tile_short", lambda t: E.tile(t, 2), [(2, 3)], lambda t: torch.tile(t, (2,))),
    ("tile_zero", lambda t: E.tile(t, (0, 2)), [(2, 3)], lambda t: torch.tile(t, (0, 2))),
    ("repeat_flat", lambda t: E.repeat(t, 2), [(2, 3)], lambda t: torch.repeat_interleave(t, 2)),
    ("repeat_axis", lambda t: E.repeat(t, 3, axis=1), [(2, 3)],
     lambda t: torch.repeat_interleave(t, 3, 1)),
    ("repeat_array", lambda t: E.repeat(t, [1, 0, 3], axis=-1), [(2, 3)],
     lambda t: torch.repeat_interleave(t, torch.tensor([1, 0, 3]), -1)),
    ("repeat_ember_array", lambda t: E.repeat(t, E.asarray([2, 1]), dim=0), [(2, 3)],
     lambda t: torch.repeat_interleave(t, torch.tensor([2, 1]), 0)),
    ("method_repeat", lambda t: t.T.repeat(2, axis=0), [(2, 3)],
     lambda t: torch.repeat_interleave(t.T, 2, 0)),
    ("broadcast_to", lambda t: E.broadcast_to(t, (2, 3, 4)), [(3, 1)],
     lambda t: torch.broadcast_to(t, (2, 3, 4))),
    ("expand", lambda t: t.expand(2, -1, 4), [(3, 1)], lambda t: t.expand(2, -1, 4)),
    ("broadcast_arrays", lambda a, b: E.broadcast_arrays(a, b), [(2, 1), (3,)],
     lambda a, b: torch.broadcast_tensors(a, b)),
    ("atleast_1d", lambda t: E.atleast_1d(t) * 1, [()], lambda t: torch.atleast_1d(t) * 1),
    ("atleast_2d", lambda a, b: E.atleast_2d(a, b), [(3,), ()], lambda a, b: torch.atleast_2d(a, b)),
    ("atleast_3d", lambda a, b, c: E.atleast_3d(a, b, c), [(3,), (2, 3), ()],
     lambda a, b, c: torch.atleast_3d(a, b, c)),
    ("pad_constant", lambda t: E.pad(t, ((1, 2), (0, 1))), [(2, 3)],
     lambda t: F.pad(t, (0, 1, 1, 2))),
    ("pad_int", lambda t: E.pad(t, 1, constant_values=3.0), [(2, 3)],
     lambda t: F.pad(t, (1, 1, 1, 1), value=3.0)),
    ("pad_reflect", lambda t: E.pad(t, ((0, 0), (2, 1), (1, 3)), mode="reflect"), [(2, 3, 4)],
     lambda t: F.pad(t, (1, 3, 2, 1), mode="reflect")),
    ("pad_edge", lambda t: E.pad(t, ((0, 0), (2, 1), (1, 3)), mode="edge"), [(2, 3, 4)],
     lambda t: F.pad(t, (1, 3, 2, 1), mode="replicate")),
    ("pad_wrap", lambda t: E.pad(t, ((0, 0), (2, 1), (1, 3)), mode="wrap"), [(2, 3, 4)],
     lambda t: F.pad(t, (1, 3, 2, 1), mode="circular")),
    ("pad_symmetric", lambda t: E.pad(t.T, ((3, 1), (2, 4)), mode="symmetric"), [(3, 2)], None),
    ("diagonal", lambda t: E.diagonal(t), [(3, 4)], lambda t: torch.diagonal(t)),
    ("diagonal_offset", lambda t: E.diagonal(t, 1, 2, 0), [(3, 2, 4)],
     lambda t: torch.diagonal(t, 1, 2, 0)),
    ("diagonal_negoffset", lambda t: E.diagonal(t, offset=-1, axis1=-1, axis2=1), [(2, 3, 4)],
     lambda t: torch.diagonal(t, -1, -1, 1)),
    ("method_diagonal", lambda t: t.T.diagonal(), [(3, 4)], lambda t: t.T.diagonal()),
    ("diag_1d", lambda t: E.diag(t, 1), [(3,)], lambda t: torch.diag(t, 1)),
    ("diag_2d", lambda t: E.diag(t, -1), [(3, 4)], lambda t: torch.diag(t, -1)),
    ("tril", lambda t: E.tril(t, -1), [(2, 3, 4)], lambda t: torch.tril(t, -1)),
    ("triu", lambda t: E.triu(t.T, 1), [(3, 4)], lambda t: torch.triu(t.T, 1)),
    ("meshgrid_xy", lambda a, b: E.meshgrid(a, b), [(3,), (2,)],
     lambda a, b: torch.meshgrid(a, b, indexing="xy")),
    ("meshgrid_ij3", lambda a, b, c: E.meshgrid(a, b, c, indexing="ij"), [(3,), (2,), (2,)],
     lambda a, b, c: torch.meshgrid(a, b, c, indexing="ij")),
    ("meshgrid_sparse", lambda a, b: E.meshgrid(a, b, sparse=True), [(3,), (2,)], None),
    ("copy", lambda t: E.copy(t.T), [(3, 2)], lambda t: t.T.clone()),
    ("method_copy", lambda t: t[::-1].copy(), [(3, 2)], lambda t: t.flip(0).clone()),
    ("ascontiguousarray", lambda t: E.ascontiguousarray(t.T), [(3, 2)],
     lambda t: t.T.contiguous()),
    ("resize", lambda t: E.resize(t, (3, 3)), [(2, 2)], None),
    ("resize_shrink", lambda t: E.resize(t, 3), [(2, 3)], None),
    ("trim_zeros", lambda t: E.trim_zeros(E.concatenate([E.zeros(2, dtype=E.float64), t,
                                                          E.zeros(1, dtype=E.float64)])),
     [(3,)], None),
]


def _case_inputs(shapes, seed=0):
    return [vals(s, seed + i) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("name,fn,shapes,tfn", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(name, fn, shapes, tfn):
    xs = [leaf(a) for a in _case_inputs(shapes)]
    for x in xs:
        if x.size == 0:         # gradcheck cannot perturb an empty input
            x.requires_grad = False
    assert gradcheck(fn, xs)


TORCH_CASES = [c for c in CASES if c[3] is not None]


@pytest.mark.parametrize("name,fn,shapes,tfn", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_matches_torch(name, fn, shapes, tfn):
    check_torch(fn, tfn, _case_inputs(shapes, seed=7))


GG = ["reshape_T", "transpose_axes", "roll_tuple", "concatenate", "concatenate_none",
      "concatenate_array", "stack", "unstack", "split_indices", "array_split_neg", "tile",
      "repeat_axis", "repeat_array", "pad_constant", "pad_reflect", "diagonal_offset", "diag_2d",
      "hstack_2d", "broadcast_arrays", "meshgrid_xy"]


@pytest.mark.parametrize("name", GG)
def test_gradgradcheck(name):
    (_, fn, shapes, _) = next(c for c in CASES if c[0] == name)
    xs = [leaf(a) for a in _case_inputs(shapes)]

    def f(*ts):     # nonlinear, so the second derivative is not trivially zero
        return [o * o for o in _outs(fn(*ts))]
    assert gradgradcheck(f, xs)


# ---------------------------------------------------------------- dtypes, odd shapes, errors

def test_float32_input_gets_float32_gradient_through_mixed_concatenate():
    a = E.asarray(np.ones((2, 2), np.float32), requires_grad=True)
    b = leaf(np.ones((1, 2)))
    y = E.concatenate([a, b])
    assert y.dtype == E.float64
    (y * E.asarray([[1.0], [2.0], [3.0]])).sum().backward()
    assert a.grad.dtype == E.float32 and b.grad.dtype == E.float64
    np.testing.assert_allclose(np.asarray(a.grad), [[1, 1], [2, 2]])
    np.testing.assert_allclose(np.asarray(b.grad), [[3, 3]])


def test_empty_arrays():
    x = leaf(np.zeros((0, 3)))
    for y in (E.reshape(x, (3, 0)), E.flip(x), E.tile(x, (2, 2)), E.concatenate([x, x]),
              E.pad(x, 1), E.roll(x, 1, axis=1)):
        y.sum().backward()
    assert x.grad.shape == (0, 3)
    x = leaf(vals((2, 3)))
    (E.repeat(x, 0, axis=1).sum() + E.tile(x, 0).sum()).backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.zeros((2, 3)))


def test_split_of_an_empty_axis_and_unused_pieces():
    x = leaf(vals((4, 3)))
    a, b = E.split(x, 2)
    (b * 3).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.r_[np.zeros((2, 3)), np.full((2, 3), 3.0)])


def test_reshape_order_A_is_refused_when_it_matters():
    x = leaf(vals((2, 3)))
    with pytest.raises(RuntimeError, match="order='A'"):
        E.reshape(x, (3, 2), order="A").sum().backward()
    y = leaf(vals((2, 3)))
    E.reshape(y, (1, 2, 3, 1), order="A").sum().backward()     # C-contiguous: C order
    np.testing.assert_array_equal(np.asarray(y.grad), np.ones((2, 3)))


def test_pad_modes_without_a_gather_rule_raise_clearly():
    x = leaf(vals((3,)))
    with pytest.raises(RuntimeError, match="pad: autograd supports"):
        E.pad(x, 1, mode="mean").sum().backward()
    with pytest.raises(RuntimeError, match="reflect_type"):
        E.pad(x, 1, mode="reflect", reflect_type="odd").sum().backward()


def test_split_points_given_as_an_ember_array_raise_clearly():
    x = leaf(vals((4,)))
    with pytest.raises(RuntimeError, match="indices_or_sections"):
        E.split(x, E.asarray([1, 2]))[0].sum().backward()


def test_gradient_flows_through_a_chain_of_views():
    v = vals((2, 3, 4))
    x, t = leaf(v), tleaf(v)
    y = E.flip(E.swapaxes(x, 0, 2)[1:, ::2], axis=0).reshape(-1)
    ty = torch.flip(torch.swapaxes(t, 0, 2)[1:, ::2], (0,)).reshape(-1)
    w = vals(tuple(y.shape), 3)
    (y * E.asarray(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy())


# ---------------------------------------------------------------- views and in-place writes

def _both(v):
    return leaf(v), tleaf(v)


def _finish(x, t, ey, ty):
    (ey * ey).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(np.asarray(ey.detach()), ty.detach().numpy())
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy())


@pytest.mark.parametrize("case", ["reshape", "slice", "T", "squeeze", "diagonal", "split", "flip"])
def test_views_of_a_leaf_get_the_right_gradient(case):
    v = vals((3, 4))
    x, t = _both(v)
    ops = {
        "reshape": (lambda a: a.reshape(2, 6), lambda a: a.reshape(2, 6)),
        "slice": (lambda a: a[1:], lambda a: a[1:]),
        "T": (lambda a: a.T, lambda a: a.T),
        "squeeze": (lambda a: E.squeeze(E.expand_dims(a, 0)), lambda a: a.unsqueeze(0).squeeze()),
        "diagonal": (lambda a: E.diagonal(a), lambda a: torch.diagonal(a)),
        "split": (lambda a: E.split(a, 2, axis=1)[1], lambda a: torch.split(a, 2, 1)[1]),
        "flip": (lambda a: E.flip(a, axis=0), lambda a: torch.flip(a, (0,))),
    }[case]
    _finish(x, t, ops[0](x) * 2, ops[1](t) * 2)


def test_inplace_on_a_slice_of_a_non_leaf():
    x, t = _both(vals((3, 4)))
    y, ty = x * 1, t * 1
    y[0:2] *= 3
    ty[0:2] *= 3
    _finish(x, t, y, ty)


def test_inplace_on_the_transpose_of_a_non_leaf():
    x, t = _both(vals((3, 4)))
    y, ty = x * 1, t * 1
    v, tv = y.T, ty.T
    v += 1
    tv += 1
    _finish(x, t, y, ty)


@pytest.mark.parametrize("case", ["reshape", "T", "diagonal", "split", "unstack", "flip"])
def test_inplace_on_a_view_of_a_non_leaf_then_use_the_base(case):
    x, t = _both(vals((4, 4)))
    y, ty = x * 1, t * 1
    v, tv = {
        "reshape": lambda: (y.reshape(2, 8), ty.reshape(2, 8)),
        "T": lambda: (y.T, ty.T),
        "diagonal": lambda: (E.diagonal(y), torch.diagonal(ty)),
        "split": lambda: (E.split(y, 2)[1], ty[2:]),
        "unstack": lambda: (E.unstack(y, axis=1)[2], ty[:, 2]),
        "flip": lambda: (E.flip(y, axis=1), None),
    }[case]()
    if case == "flip":      # torch.flip copies: the same write, on the base
        v *= 2
        ty.mul_(2)
    else:
        v *= 2
        tv *= 2
    _finish(x, t, y, ty)



@pytest.mark.parametrize("case", ["reshape", "T", "diagonal"])
def test_inplace_through_a_view_then_use_the_view(case):
    x, t = _both(vals((3, 3)))
    y, ty = x * 1, t * 1
    v, tv = {
        "reshape": lambda: (y.reshape(9), ty.reshape(9)),
        "T": lambda: (y.T, ty.T),
        "diagonal": lambda: (E.diagonal(y), torch.diagonal(ty)),
    }[case]()
    v *= 2
    tv *= 2
    _finish(x, t, v, tv)


def test_a_transposed_view_taken_before_the_base_is_written():
    x, t = _both(vals((2, 3)))
    y, ty = x * 1, t * 1
    v, tv = y.T, ty.T
    y *= 2
    ty *= 2
    _finish(x, t, v, tv)


def test_a_sliced_view_taken_before_the_base_is_written():
    x, t = _both(vals((2, 3)))
    y, ty = x * 1, t * 1
    v, tv = y[:, 1:], ty[:, 1:]
    y *= 2
    ty *= 2
    _finish(x, t, v, tv)



@pytest.mark.parametrize("fn", [lambda t: E.atleast_1d(t), lambda t: E.ascontiguousarray(t),
                                lambda t: E.astype(t, E.float64, copy=False), lambda t: E.real(t)],
                         ids=["atleast_1d", "ascontiguousarray", "astype", "real"])
def test_functions_returning_their_input_keep_the_leaf_a_leaf(fn):
    x = leaf(vals((3,)))
    fn(x)
    assert x.is_leaf
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.full(3, 4.0))
