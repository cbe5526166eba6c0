"""Shape manipulation vs NumPy, and which results are views."""
import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES, assert_matches, layouts, random_array


def shares(a, b):
    return np.shares_memory(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", ["bool", "int16", "float32", "complex128"])
@pytest.mark.parametrize("shape", [(6,), (2, 3), (3, 1, 2), (1, 6, 1), (2, 3, 1, 1)])
def test_reshape_values_and_view_rule(dtype, shape):
    base = random_array((2, 3, 4), dtype)
    for label, a in layouts(base):
        x = ember.asarray(a)
        for new in [(24,), (4, 6), (2, 12), (-1, 3), (2, 3, 2, 2), (24, 1)]:
            got = x.reshape(new)
            exp = a.reshape(new)
            assert_matches(got, exp)
            # ember gives a view exactly when NumPy can
            assert shares(got, x) == np.shares_memory(exp, a), (label, new)


def test_reshape_errors_and_copy_flag():
    x = ember.arange(6)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of size 6 into shape \(4,\)"):
        x.reshape(4)
    with pytest.raises(ValueError, match="one unknown dimension"):
        x.reshape(-1, -1)
    t = ember.arange(6).reshape(2, 3).T
    with pytest.raises(ValueError, match="without copying"):
        ember.reshape(t, (6,), copy=False)
    c = ember.reshape(x, (2, 3), copy=True)
    assert not shares(c, x)
    assert_matches(ember.reshape(x, (3, 2), order="F"), np.arange(6).reshape((3, 2), order="F"))
    assert_matches(x.view(3, 2), np.arange(6).reshape(3, 2))
    assert ember.zeros((0, 3)).reshape(3, 0, 5).shape == (3, 0, 5)
    with pytest.raises(ValueError):
        ember.zeros((0, 3)).reshape(-1, 0)


def test_reshape_view_writes_through():
    x = ember.zeros((2, 3))
    y = x.reshape(3, 2)
    y[0, 1] = 5
    assert x[0, 1].item() == 5


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 1, 0), (0, 2, 1)])
def test_transpose_permute(axes):
    a = random_array((2, 3, 4), "float32")
    x = ember.asarray(a)
    assert_matches(ember.transpose(x, axes), np.transpose(a, axes))
    assert shares(ember.transpose(x, axes), x)
    if axes is not None:
        assert_matches(ember.permute_dims(x, axes), np.transpose(a, axes))
        assert_matches(x.permute(*axes), np.transpose(a, axes))
        assert_matches(x.transpose(*axes), np.transpose(a, axes))
    with pytest.raises(ValueError):
        ember.permute_dims(x, (0, 1))


def test_axis_moving_and_inserting():
    a = random_array((2, 3, 4), "int32")
    x = ember.asarray(a)
    assert_matches(ember.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1))
    assert_matches(ember.moveaxis(x, (0, 1), (2, 0)), np.moveaxis(a, (0, 1), (2, 0)))
    assert_matches(ember.swapaxes(x, 0, 2), np.swapaxes(a, 0, 2))
    assert_matches(ember.expand_dims(x, axis=(0, -1)), np.expand_dims(a, axis=(0, -1)))
    assert_matches(x.unsqueeze(1), np.expand_dims(a, 1))
    s = np.zeros((1, 3, 1))
    assert_matches(ember.squeeze(ember.asarray(s)), np.squeeze(s))
    assert_matches(ember.squeeze(ember.asarray(s), axis=-1), np.squeeze(s, axis=-1))
    with pytest.raises(ValueError, match="squeeze"):
        ember.squeeze(ember.asarray(s), axis=1)
    with pytest.raises(np.exceptions.AxisError):
        ember.swapaxes(x, 0, 3)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1), -1])
def test_flip_roll(axis):
    a = random_array((3, 4), "float64")
    for label, arr in layouts(a):
        x = ember.asarray(arr)
        assert_matches(ember.flip(x, axis=axis), np.flip(arr, axis=axis))
        assert shares(ember.flip(x, axis=axis), x)
        assert_matches(ember.roll(x, 2, axis=axis), np.roll(arr, 2, axis=axis))


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int8", "float32"), ("int64", "uint8"),
                                    ("bool", "int16"), ("float16", "complex64")])
def test_concatenate_stack_promote(dtypes):
    a = random_array((2, 3), dtypes[0])
    b = random_array((4, 3), dtypes[1])
    assert_matches(ember.concatenate([ember.asarray(a), ember.asarray(b)]), np.concatenate([a, b]))
    assert_matches(ember.concat([ember.asarray(a), b], axis=None), np.concatenate([a, b], axis=None))
    assert_matches(ember.cat([ember.asarray(a), ember.asarray(b)], dim=0), np.concatenate([a, b]))
    c = random_array((2, 3), dtypes[1])
    for axis in (0, 1, 2, -1):
        assert_matches(ember.stack([ember.asarray(a), ember.asarray(c)], axis=axis), np.stack([a, c], axis=axis))


def test_join_errors():
    with pytest.raises(ValueError, match="same number of dimensions"):
        ember.concatenate([ember.zeros((2, 3)), ember.zeros(3)])
    with pytest.raises(ValueError, match="must match exactly"):
        ember.concatenate([ember.zeros((2, 3)), ember.zeros((2, 4))])
    with pytest.raises(ValueError, match="same shape"):
        ember.stack([ember.zeros(2), ember.zeros(3)])
    with pytest.raises(ValueError, match="at least one"):
        ember.concatenate([])


def test_hstack_vstack_column_stack_and_splits():
    a, b = np.arange(3), np.arange(3, 6)
    assert_matches(ember.hstack([ember.asarray(a), ember.asarray(b)]), np.hstack([a, b]))
    assert_matches(ember.vstack([ember.asarray(a), ember.asarray(b)]), np.vstack([a, b]))
    assert_matches(ember.column_stack([ember.asarray(a), ember.asarray(b)]), np.column_stack([a, b]))
    m = np.arange(12).reshape(4, 3)
    for got, exp in zip(ember.split(ember.asarray(m), 2), np.split(m, 2)):
        assert_matches(got, exp)
    for got, exp in zip(ember.array_split(ember.asarray(m), 3, axis=0), np.array_split(m, 3, axis=0)):
        assert_matches(got, exp)
    for got, exp in zip(ember.split(ember.asarray(m), [1, 3], axis=0), np.split(m, [1, 3], axis=0)):
        assert_matches(got, exp)
    with pytest.raises(ValueError, match="equal division"):
        ember.split(ember.asarray(m), 3)
    for got, exp in zip(ember.unstack(ember.asarray(m), axis=1), [m[:, i] for i in range(3)]):
        assert_matches(got, exp)


def test_tile_repeat_pad():
    a = np.arange(6).reshape(2, 3)
    x = ember.asarray(a)
    assert_matches(ember.tile(x, (2, 1)), np.tile(a, (2, 1)))
    assert_matches(ember.repeat(x, 2), np.repeat(a, 2))
    assert_matches(ember.repeat(x, [1, 2], axis=0), np.repeat(a, [1, 2], axis=0))
    assert_matches(x.repeat(3, axis=1), np.repeat(a, 3, axis=1))
    for mode in ("constant", "edge", "reflect", "symmetric", "wrap"):
        assert_matches(ember.pad(x, ((1, 2), (2, 1)), mode=mode), np.pad(a, ((1, 2), (2, 1)), mode=mode))


def test_broadcasting_helpers():
    a = np.arange(3)
    x = ember.asarray(a)
    b = ember.broadcast_to(x, (2, 3))
    assert_matches(b, np.broadcast_to(a, (2, 3)))
    assert shares(b, x) and b.strides[0] == 0
    assert ember.broadcast_shapes((2, 1), (3,)) == (2, 3)
    xs = ember.broadcast_arrays(ember.zeros((2, 1)), ember.zeros(3))
    assert [v.shape for v in xs] == [(2, 3), (2, 3)]
    with pytest.raises(ValueError, match="broadcast"):
        ember.broadcast_to(x, (2, 4))
    assert_matches(x.expand(2, -1), np.broadcast_to(a, (2, 3)))


def test_ravel_flatten_atleast():
    a = np.arange(6).reshape(2, 3)
    x = ember.asarray(a)
    assert_matches(ember.ravel(x), a.ravel())
    assert shares(ember.ravel(x), x)
    assert_matches(ember.ravel(x.T), a.T.ravel())
    f = x.flatten()
    assert not shares(f, x)
    assert ember.atleast_1d(ember.asarray(1.0)).shape == (1,)
    assert ember.atleast_2d(ember.arange(3)).shape == (1, 3)
    assert ember.atleast_3d(ember.arange(3)).shape == (1, 3, 1)


def test_view_dtype():
    x = ember.asarray(np.array([1.0], dtype=np.float32))
    assert_matches(x.view(ember.int32), np.array([1.0], dtype=np.float32).view(np.int32))
    with pytest.raises(ValueError):
        ember.zeros((3, 3), dtype=ember.int8).T.view(ember.int16)
