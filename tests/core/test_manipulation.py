"""Shape manipulation vs NumPy, and which results are views of the input."""
import itertools

import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES, assert_matches, layouts, random_array

AxisError = np.exceptions.AxisError
SOME_DTYPES = ["bool", "int8", "uint16", "int64", "float16", "float32", "complex128"]


def shares(a, b):
    return np.shares_memory(np.asarray(a), np.asarray(b))


def E(a):
    return ember.asarray(a)


# ---------------------------------------------------------------- reshape

@pytest.mark.parametrize("dtype", ["bool", "int16", "float32", "complex128"])
def test_reshape_values_and_view_rule(dtype):
    base = random_array((2, 3, 4), dtype)
    for label, a in layouts(base):
        x = E(a)
        for new in [(24,), (4, 6), (2, 12), (-1, 3), (2, 3, 2, 2), (24, 1), (1, 2, 1, 12, 1),
                    (2, 3, 4), (6, 4), (2, -1, 4)]:
            got = x.reshape(new)
            exp = a.reshape(new)
            assert_matches(got, exp)
            # ember gives a view exactly when NumPy can
            assert shares(got, x) == np.shares_memory(exp, a), (label, new)
            if shares(got, x):
                assert got.storage is x.storage


def test_reshape_view_rule_random_strided_views():
    rng = np.random.default_rng(1)
    base = np.arange(2 * 3 * 4 * 5, dtype=np.int32).reshape(2, 3, 4, 5)
    for _ in range(150):
        a = base
        # random slicing, with steps and reversals, then a random transpose
        key = tuple(slice(None, None, int(rng.choice([1, 1, 2, -1]))) if rng.random() < 0.5
                    else slice(0, int(rng.integers(1, s + 1))) for s in base.shape)
        a = a[key].transpose(rng.permutation(4))
        if rng.random() < 0.3:
            a = a[None, ..., None]
        x = E(a)
        size = a.size
        divisors = [d for d in range(1, size + 1) if size % d == 0]
        d1 = int(rng.choice(divisors))
        rest = size // d1
        d2 = int(rng.choice([d for d in divisors if rest % d == 0]))
        for new in [(d1, rest), (d1, d2, rest // d2), (rest, 1, d1), a.shape[::-1], (-1,)]:
            exp = a.reshape(new)
            got = x.reshape(new)
            assert_matches(got, exp)
            assert shares(got, x) == np.shares_memory(exp, a), (a.shape, a.strides, new)


def test_reshape_zero_d_and_empty():
    x = E(np.float64(3.5))
    assert_matches(x.reshape(1), np.array([3.5]))
    assert_matches(x.reshape(()), np.array(3.5))
    assert_matches(E(np.array([7])).reshape(()), np.array(7))
    assert_matches(x.reshape(1, 1, -1), np.array(3.5).reshape(1, 1, -1))
    e = E(np.zeros((0, 3), np.int8))
    assert_matches(e.reshape(3, 0, 5), np.zeros((3, 0, 5), np.int8))
    assert_matches(e.reshape(2, -1), np.zeros((2, 0), np.int8))
    assert_matches(e.reshape(0), np.zeros(0, np.int8))
    with pytest.raises(ValueError):
        e.reshape(-1, 0)


def test_reshape_argument_forms():
    a = np.arange(6)
    x = E(a)
    assert_matches(x.reshape(2, 3), a.reshape(2, 3))
    assert_matches(x.reshape((2, 3)), a.reshape(2, 3))
    assert_matches(x.reshape([3, 2]), a.reshape(3, 2))
    assert_matches(ember.reshape(x, 6), a)
    assert_matches(ember.reshape(x, np.int64(6)), a)
    assert_matches(ember.reshape(x, (np.int32(3), -1)), a.reshape(3, -1))
    assert_matches(ember.reshape(a, (3, 2)), a.reshape(3, 2))       # NumPy input
    assert_matches(ember.reshape([[1, 2], [3, 4]], -1), np.array([1, 2, 3, 4]))
    with pytest.raises(TypeError):
        ember.reshape(x, (2.0, 3))


def test_reshape_errors_and_copy_flag():
    x = ember.arange(6)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of size 6 into shape \(4,\)"):
        x.reshape(4)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of size 6 into shape \(4,-1\)"):
        x.reshape(4, -1)
    with pytest.raises(ValueError, match="one unknown dimension"):
        x.reshape(-1, -1)
    with pytest.raises(ValueError, match="negative dimensions"):
        x.reshape(-2, -3)
    with pytest.raises(ValueError, match="order"):
        ember.reshape(x, (2, 3), order="X")
    t = ember.arange(6).reshape(2, 3).T
    with pytest.raises(ValueError, match="without copying"):
        ember.reshape(t, (6,), copy=False)
    with pytest.raises(ValueError, match="without copying"):
        t.view(6)
    v = ember.reshape(x, (2, 3), copy=False)
    assert shares(v, x)
    c = ember.reshape(x, (2, 3), copy=True)
    assert not shares(c, x)
    assert_matches(c, np.arange(6).reshape(2, 3))
    c2 = ember.reshape(t, (6,), copy=True)
    assert_matches(c2, np.arange(6).reshape(2, 3).T.reshape(6))
    assert_matches(x.view(3, 2), np.arange(6).reshape(3, 2))


@pytest.mark.parametrize("order", ["C", "F", "A"])
def test_reshape_orders(order):
    for label, a in layouts(random_array((3, 4), "float32")):
        x = E(a)
        for new in [(4, 3), (2, 6), (12,), (2, 2, 3)]:
            exp = np.reshape(a, new, order=order)
            got = ember.reshape(x, new, order=order)
            assert_matches(got, exp)
            assert shares(got, x) == np.shares_memory(exp, a), (label, new, order)
    f = np.asfortranarray(np.arange(6).reshape(2, 3))
    assert shares(ember.reshape(E(f), (3, 2), order="A"), E(f))
    assert_matches(ember.ravel(E(f), order="F"), f.ravel(order="F"))
    assert_matches(ember.ravel(E(f), order="K"), f.ravel(order="K"))


def test_reshape_view_writes_through():
    x = ember.zeros((2, 3))
    y = x.reshape(3, 2)
    y[0, 1] = 5
    assert x[0, 1].item() == 5
    v0 = x._version
    y[2, 1] = 1
    assert x._version == v0 + 1          # views share the version counter


def test_ravel_flatten():
    for label, a in layouts(random_array((2, 3, 4), "int32")):
        x = E(a)
        assert_matches(ember.ravel(x), a.ravel())
        # a view whenever reshape(-1) is one (NumPy's ravel copies some strided cases)
        assert shares(ember.ravel(x), x) == np.shares_memory(a.reshape(-1), a)
        if a.flags.c_contiguous:
            assert shares(ember.ravel(x), x)
        f = x.flatten()
        assert_matches(f, a.flatten())
        assert not shares(f, x)
        assert_matches(x.flatten("F"), a.flatten("F"))
        assert_matches(ember.flatten(x, 1), a.reshape(2, 12))
        assert_matches(ember.flatten(x, 0, 1), a.reshape(6, 4))
        assert_matches(ember.flatten(x, -2, -1), a.reshape(2, 12))
        assert_matches(ember.flatten(x), a.reshape(-1))
    assert_matches(ember.ravel(E(np.array(2.0))), np.array([2.0]))
    assert ember.flatten(ember.asarray(1.0)).shape == (1,)
    with pytest.raises(ValueError):
        ember.flatten(ember.zeros((2, 3)), 1, 0)


# ---------------------------------------------------------------- axes

@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 1, 0), (0, 2, 1), (-1, 0, -2)])
def test_transpose_permute(axes):
    for label, a in layouts(random_array((2, 3, 4), "float32")):
        x = E(a)
        assert_matches(ember.transpose(x, axes), np.transpose(a, axes))
        assert ember.transpose(x, axes).storage is x.storage
        if axes is not None:
            assert_matches(ember.permute_dims(x, axes), np.transpose(a, axes))
            assert_matches(ember.permute(x, *axes), np.transpose(a, axes))
            assert_matches(ember.permute(x, axes), np.transpose(a, axes))
            assert_matches(x.permute(*axes), np.transpose(a, axes))
            assert_matches(x.transpose(*axes), np.transpose(a, axes))
            assert_matches(x.transpose(axes), np.transpose(a, axes))
    assert_matches(ember.transpose(E(np.array(1))), np.array(1))
    assert_matches(ember.zeros((0, 3)).T, np.zeros((0, 3), np.float32).T)


def test_transpose_errors():
    x = ember.zeros((2, 3, 4))
    with pytest.raises(ValueError, match="permute_dims"):
        ember.permute_dims(x, (0, 1))
    with pytest.raises(ValueError, match="repeated axis"):
        ember.permute_dims(x, (0, 0, 1))
    with pytest.raises(AxisError):
        ember.permute_dims(x, (0, 1, 3))
    with pytest.raises(AxisError):
        ember.transpose(ember.zeros((2, 3)), (0, 2))


def test_moveaxis_swapaxes():
    a = random_array((2, 3, 4, 5), "int32")
    for label, arr in layouts(a):
        x = E(arr)
        for src, dst in [(0, -1), (-1, 0), (1, 1), ((0, 1), (2, 0)), ((0, 3), (-1, -2)), ([], [])]:
            assert_matches(ember.moveaxis(x, src, dst), np.moveaxis(arr, src, dst))
            assert shares(ember.moveaxis(x, src, dst), x)
        for i, j in [(0, 2), (-1, 0), (1, 1)]:
            assert_matches(ember.swapaxes(x, i, j), np.swapaxes(arr, i, j))
            assert_matches(x.swapaxes(i, j), np.swapaxes(arr, i, j))
    x = E(a)
    with pytest.raises(AxisError):
        ember.swapaxes(x, 0, 4)
    with pytest.raises(AxisError):
        ember.moveaxis(x, 4, 0)
    with pytest.raises(ValueError, match="repeated axis"):
        ember.moveaxis(x, (0, 0), (1, 2))
    with pytest.raises(ValueError, match="same number"):
        ember.moveaxis(x, (0, 1), (1,))


def test_expand_dims_squeeze():
    a = random_array((2, 3), "float64")
    x = E(a)
    for axis in [0, 1, 2, -1, -3, (0, -1), (0, 1), (3, 0), [1, 2]]:
        got = ember.expand_dims(x, axis=axis)
        assert_matches(got, np.expand_dims(a, axis=tuple(axis) if isinstance(axis, list) else axis))
        assert shares(got, x)
    assert_matches(ember.expand_dims(x, dim=1), np.expand_dims(a, 1))
    assert_matches(x.unsqueeze(1), np.expand_dims(a, 1))
    assert_matches(ember.unsqueeze(x, -1), np.expand_dims(a, -1))
    assert_matches(ember.expand_dims(E(np.array(5)), 0), np.array([5]))
    with pytest.raises(AxisError):
        ember.expand_dims(x, 3)
    with pytest.raises(AxisError):
        ember.expand_dims(x, -4)
    with pytest.raises(ValueError, match="repeated"):
        ember.expand_dims(x, (0, 0))

    s = random_array((1, 3, 1, 1), "int8")
    y = E(s)
    for axis in [None, 0, -1, (0, 2), (0, 2, 3), 2, ()]:
        got = ember.squeeze(y, axis=axis)
        assert_matches(got, np.squeeze(s, axis=axis))
        assert shares(got, y)
    assert_matches(y.squeeze(), np.squeeze(s))
    assert_matches(y.squeeze(dim=0), np.squeeze(s, 0))
    assert_matches(ember.squeeze(E(np.array(1.0))), np.array(1.0))
    assert_matches(ember.squeeze(E(np.array(1.0)), axis=0), np.squeeze(np.array(1.0), axis=0))
    assert_matches(ember.squeeze(E(np.zeros((1, 0)))), np.zeros(0))
    with pytest.raises(ValueError, match="squeeze"):
        ember.squeeze(y, axis=1)
    with pytest.raises(AxisError):
        ember.squeeze(y, axis=4)
    with pytest.raises(AxisError):
        ember.squeeze(E(np.array(1.0)), axis=1)


# ---------------------------------------------------------------- flip / rot90 / roll

@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1), -1, ()])
def test_flip(axis):
    a = random_array((3, 4), "float64")
    for label, arr in layouts(a):
        x = E(arr)
        got = ember.flip(x, axis=axis)
        assert_matches(got, np.flip(arr, axis=axis))
        assert got.storage is x.storage


def test_flip_views_write_through_and_edges():
    x = ember.arange(5)
    f = ember.flip(x)
    assert f.strides == (-8,)
    f[0] = 100
    assert x[4].item() == 100
    assert_matches(ember.flip(ember.flip(x)), np.asarray(x))
    assert_matches(ember.flip(E(np.array(3))), np.array(3))
    assert_matches(ember.flip(E(np.zeros((0, 2)))), np.zeros((0, 2)))
    assert_matches(ember.flip(x, dims=0), np.flip(np.asarray(x)))
    with pytest.raises(AxisError):
        ember.flip(x, axis=1)
    with pytest.raises(AxisError):
        ember.flip(E(np.array(3)), axis=0)
    m = random_array((2, 3), "int16")
    assert_matches(ember.fliplr(E(m)), np.fliplr(m))
    assert_matches(ember.flipud(E(m)), np.flipud(m))
    with pytest.raises(ValueError):
        ember.fliplr(ember.zeros(3))


@pytest.mark.parametrize("k", [-1, 0, 1, 2, 3, 5])
@pytest.mark.parametrize("axes", [(0, 1), (1, 0), (0, 2), (-1, -2)])
def test_rot90(k, axes):
    a = random_array((2, 3, 4), "int32")
    for label, arr in layouts(a):
        x = E(arr)
        got = ember.rot90(x, k, axes)
        assert_matches(got, np.rot90(arr, k, axes))
        assert got.storage is x.storage


def test_rot90_errors():
    with pytest.raises(ValueError):
        ember.rot90(ember.zeros(3))
    with pytest.raises(ValueError):
        ember.rot90(ember.zeros((2, 2)), axes=(0, 0))
    with pytest.raises(ValueError):
        ember.rot90(ember.zeros((2, 2)), axes=(0,))


@pytest.mark.parametrize("shift,axis", [(2, None), (-7, None), (1, 0), (5, 1), (-1, -1),
                                        ((1, 2), (0, 1)), ((1, -1), 1), (3, (0, 1)),
                                        ((1, 1), (0, 0)), (0, 0), (13, 1)])
def test_roll(shift, axis):
    a = random_array((3, 4), "float64")
    for label, arr in layouts(a):
        x = E(arr)
        got = ember.roll(x, shift, axis=axis)
        assert_matches(got, np.roll(arr, shift, axis=axis))
        assert not shares(got, x)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_roll_dtypes_and_edges(dtype):
    a = random_array((2, 5), dtype)
    assert_matches(ember.roll(E(a), 2, 1), np.roll(a, 2, 1))
    assert_matches(ember.roll(E(a), 3), np.roll(a, 3))
    z = np.zeros((0, 3), dtype)
    assert_matches(ember.roll(E(z), 1, 1), np.roll(z, 1, 1))
    s = np.array(5, dtype)
    assert_matches(ember.roll(E(s), 1), np.roll(s, 1))


def test_roll_errors():
    with pytest.raises(AxisError):
        ember.roll(ember.zeros((2, 3)), 1, axis=2)
    with pytest.raises(ValueError):
        ember.roll(ember.zeros((2, 3)), (1, 2), axis=(0, 1, 1))


# ---------------------------------------------------------------- joining

@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int8", "float32"), ("int64", "uint8"),
                                    ("bool", "int16"), ("float16", "complex64"), ("uint64", "int64"),
                                    ("int8", "uint8"), ("bool", "bool"), ("float64", "complex64")])
def test_concatenate_stack_promote(dtypes):
    a = random_array((2, 3), dtypes[0])
    b = random_array((4, 3), dtypes[1])
    assert_matches(ember.concatenate([E(a), E(b)]), np.concatenate([a, b]))
    assert_matches(ember.concatenate((E(a), b), axis=-2), np.concatenate([a, b], axis=-2))
    assert_matches(ember.concat([E(a), b], axis=None), np.concatenate([a, b], axis=None))
    assert_matches(ember.cat([E(a), E(b)], dim=0), np.concatenate([a, b]))
    c = random_array((2, 3), dtypes[1])
    assert_matches(ember.concatenate([E(a), E(c)], axis=1), np.concatenate([a, c], axis=1))
    for axis in (0, 1, 2, -1, -3):
        assert_matches(ember.stack([E(a), E(c)], axis=axis), np.stack([a, c], axis=axis))


def test_concatenate_layouts_and_many_inputs():
    base = random_array((3, 4), "int32")
    arrs = [arr for _, arr in layouts(base)]
    for axis in (0, 1, None):
        assert_matches(ember.concatenate([E(a) for a in arrs], axis=axis),
                       np.concatenate(arrs, axis=axis))
    assert_matches(ember.stack([E(a) for a in arrs], axis=1), np.stack(arrs, axis=1))
    parts = [np.zeros((0, 4), np.int32), base, np.zeros((0, 4), np.int32)]
    assert_matches(ember.concatenate([E(p) for p in parts]), np.concatenate(parts))
    one = ember.concatenate([E(base)])
    assert_matches(one, base)
    assert not shares(one, E(base))
    assert_matches(ember.concatenate(E(np.arange(6).reshape(2, 3))), np.concatenate(np.arange(6).reshape(2, 3)))
    # 0-d inputs of stack
    assert_matches(ember.stack([E(np.array(1.5)), E(np.array(2.5))]), np.stack([np.array(1.5), np.array(2.5)]))
    # an input overlapping with out
    x = ember.arange(6)
    out = ember.zeros(12, dtype=ember.int64)
    ember.concatenate([x, x], out=out)
    assert_matches(out, np.concatenate([np.arange(6)] * 2))


def test_concatenate_out_and_dtype():
    a, b = np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32)
    out = ember.zeros(5, dtype=ember.float64)
    v0 = out._version
    r = ember.concatenate([E(a), E(b)], out=out)
    assert r is out and out._version > v0
    assert_matches(out, np.concatenate([a, b]).astype(np.float64))
    assert_matches(ember.concatenate([E(a), E(b)], dtype=ember.int8), np.concatenate([a, b], dtype=np.int8))
    with pytest.raises(TypeError, match="cannot cast"):
        ember.concatenate([ember.ones(2, dtype=ember.float64)], dtype=ember.int32)
    with pytest.raises(TypeError, match="cannot cast"):
        ember.concatenate([ember.ones(2, dtype=ember.float64)], out=ember.zeros(2, dtype=ember.int32))
    assert_matches(ember.concatenate([ember.ones(2, dtype=ember.float64)], dtype=ember.int32, casting="unsafe"),
                   np.ones(2, np.int32))
    with pytest.raises(TypeError):
        ember.concatenate([E(a)], out=ember.zeros(3), dtype=ember.float32)
    with pytest.raises(ValueError, match="output array has shape"):
        ember.concatenate([E(a), E(b)], out=ember.zeros(4))
    o2 = ember.zeros((2, 3), dtype=ember.int32)
    ember.stack([E(a), E(a)], out=o2)
    assert_matches(o2, np.stack([a, a]))


def test_join_errors():
    with pytest.raises(ValueError, match=r"same number of dimensions, got shapes \(2,3\) \(3,\)"):
        ember.concatenate([ember.zeros((2, 3)), ember.zeros(3)])
    with pytest.raises(ValueError, match=r"must match exactly, got shapes \(2,3\) \(2,4\)"):
        ember.concatenate([ember.zeros((2, 3)), ember.zeros((2, 4))])
    with pytest.raises(ValueError, match="zero-dimensional"):
        ember.concatenate([ember.asarray(1.0), ember.asarray(2.0)])
    with pytest.raises(AxisError):
        ember.concatenate([ember.zeros((2, 3))], axis=2)
    with pytest.raises(ValueError, match="same shape"):
        ember.stack([ember.zeros(2), ember.zeros(3)])
    with pytest.raises(AxisError):
        ember.stack([ember.zeros(2), ember.zeros(2)], axis=2)
    with pytest.raises(ValueError, match="at least one"):
        ember.concatenate([])
    with pytest.raises(ValueError, match="at least one"):
        ember.stack([])
    with pytest.raises(ValueError):
        ember.unstack(ember.asarray(1.0))


def test_unstack():
    m = random_array((3, 4, 2), "complex64")
    for label, arr in layouts(m):
        x = E(arr)
        for axis in (0, 1, -1):
            got = ember.unstack(x, axis=axis)
            assert isinstance(got, tuple)
            exp = np.unstack(arr, axis=axis)
            assert len(got) == len(exp)
            for g, e in zip(got, exp):
                assert_matches(g, e)
                assert g.storage is x.storage


def test_hstack_vstack_dstack_column_stack():
    a, b = np.arange(3), np.arange(3, 6)
    m, n = np.arange(6).reshape(2, 3), np.arange(6, 12).reshape(2, 3)
    for f, nf in [(ember.hstack, np.hstack), (ember.vstack, np.vstack), (ember.dstack, np.dstack),
                  (ember.column_stack, np.column_stack)]:
        assert_matches(f([E(a), E(b)]), nf([a, b]))
        assert_matches(f([E(m), E(n)]), nf([m, n]))
        assert_matches(f((E(np.array(1)), E(np.array(2)))), nf((np.array(1), np.array(2))))
    assert_matches(ember.hstack([E(a), E(b.astype(np.float32))]), np.hstack([a, b.astype(np.float32)]))
    assert_matches(ember.vstack([E(a), E(b)], dtype=ember.float32), np.vstack([a, b], dtype=np.float32))
    with pytest.raises(ValueError):
        ember.vstack([])


def test_splits():
    m = np.arange(24).reshape(4, 6)
    x = E(m)
    cases = [(ember.split, np.split, 2, 0), (ember.split, np.split, 3, 1), (ember.split, np.split, [1, 3], 0),
             (ember.split, np.split, [1, 10], 1), (ember.split, np.split, [-2], 1), (ember.split, np.split, [], 0),
             (ember.array_split, np.array_split, 3, 0), (ember.array_split, np.array_split, 4, -1),
             (ember.array_split, np.array_split, 7, 0), (ember.array_split, np.array_split, [2, 2, 5], 1),
             (ember.split, np.split, np.array([1, 2]), 0)]
    for f, nf, ios, axis in cases:
        got, exp = f(x, ios, axis), nf(m, ios, axis)
        assert len(got) == len(exp)
        for g, e in zip(got, exp):
            assert_matches(g, e)
            assert g.storage is x.storage
    for got, exp in zip(ember.split(x, E(np.array([1, 3]))), np.split(m, [1, 3])):
        assert_matches(got, exp)
    for f, nf in [(ember.hsplit, np.hsplit), (ember.vsplit, np.vsplit)]:
        for got, exp in zip(f(x, 2), nf(m, 2)):
            assert_matches(got, exp)
    for got, exp in zip(ember.hsplit(E(np.arange(4)), 2), np.hsplit(np.arange(4), 2)):
        assert_matches(got, exp)
    t = np.arange(8).reshape(1, 2, 4)
    for got, exp in zip(ember.dsplit(E(t), [1]), np.dsplit(t, [1])):
        assert_matches(got, exp)
    with pytest.raises(ValueError, match="equal division"):
        ember.split(x, 5)
    with pytest.raises(ValueError):
        ember.array_split(x, 0)
    with pytest.raises(ValueError):
        ember.vsplit(ember.arange(4), 2)
    with pytest.raises(AxisError):
        ember.split(x, 2, axis=2)


# ---------------------------------------------------------------- tile / repeat

@pytest.mark.parametrize("reps", [2, (2, 1), (1, 3), (2, 2, 2), (0, 2), 1, (), (3, 1, 1, 2)])
def test_tile(reps):
    a = random_array((2, 3), "int16")
    for label, arr in layouts(a):
        got = ember.tile(E(arr), reps)
        assert_matches(got, np.tile(arr, reps))
        assert not shares(got, E(arr))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tile_repeat_dtypes(dtype):
    a = random_array((2, 3), dtype)
    assert_matches(ember.tile(E(a), (2, 2)), np.tile(a, (2, 2)))
    assert_matches(ember.repeat(E(a), 2, axis=1), np.repeat(a, 2, axis=1))
    assert_matches(ember.repeat(E(a), [1, 0, 2], axis=1), np.repeat(a, [1, 0, 2], axis=1))


def test_tile_edges():
    assert_matches(ember.tile(E(np.array(3.0)), 3), np.tile(np.array(3.0), 3))
    assert_matches(ember.tile(E(np.array(3.0)), ()), np.tile(np.array(3.0), ()))
    assert_matches(ember.tile(E(np.zeros((0, 2))), (2, 2)), np.tile(np.zeros((0, 2)), (2, 2)))
    assert_matches(ember.tile(E(np.arange(3)), [2, 2]), np.tile(np.arange(3), [2, 2]))
    with pytest.raises(ValueError):
        ember.tile(ember.arange(3), -1)


@pytest.mark.parametrize("repeats,axis", [(2, None), (3, 0), (2, 1), (2, -1), (0, 0), (1, None),
                                          ([1, 2], 0), ([0, 1, 2], 1), ([3], 1), (np.array([2, 1]), 0),
                                          (list(range(6)), None)])
def test_repeat(repeats, axis):
    a = random_array((2, 3), "float32")
    for label, arr in layouts(a):
        x = E(arr)
        assert_matches(ember.repeat(x, repeats, axis=axis), np.repeat(arr, repeats, axis=axis))
        if not isinstance(repeats, (list, np.ndarray)):
            assert_matches(x.repeat(repeats, axis=axis), np.repeat(arr, repeats, axis=axis))
    assert_matches(ember.repeat(E(a), E(np.array([1, 2])), axis=0), np.repeat(a, [1, 2], axis=0))
    assert_matches(ember.repeat(E(a), E(np.array(2)), axis=0), np.repeat(a, 2, axis=0))


def test_repeat_edges_and_errors():
    assert_matches(ember.repeat(E(np.array(4)), 3), np.repeat(np.array(4), 3))
    assert_matches(ember.repeat(E(np.zeros((0, 2))), 2, axis=1), np.repeat(np.zeros((0, 2)), 2, axis=1))
    with pytest.raises(ValueError):
        ember.repeat(ember.arange(3), -1)
    with pytest.raises(ValueError):
        ember.repeat(ember.arange(3), [1, -1, 2])
    with pytest.raises(ValueError, match="repeat"):
        ember.repeat(ember.arange(3), [1, 2])
    with pytest.raises(AxisError):
        ember.repeat(ember.arange(3), 2, axis=1)
    with pytest.raises(TypeError):
        ember.repeat(ember.arange(3), [1.5, 1, 1])


# ---------------------------------------------------------------- broadcasting

def test_broadcast_to():
    a = np.arange(3)
    for label, arr in layouts(random_array((3, 1), "int32")):
        x = E(arr)
        for shape in [(3, 1), (3, 4), (2, 3, 4), (0, 3, 1), (2, 3, 0)]:
            got = ember.broadcast_to(x, shape)
            assert_matches(got, np.broadcast_to(arr, shape))
            assert got.storage is x.storage
    x = E(a)
    b = ember.broadcast_to(x, (2, 3))
    assert shares(b, x) and b.strides[0] == 0
    assert_matches(ember.broadcast_to(E(np.array(7)), (2, 2)), np.full((2, 2), 7))
    assert_matches(ember.broadcast_to(x, 3), a)
    assert_matches(x.expand(2, -1), np.broadcast_to(a, (2, 3)))
    # a broadcast view is read-only, as in NumPy (issue #24) ...
    big = ember.broadcast_to(ember.zeros((1, 5)), (1000, 5))
    assert big.flags.writeable is np.broadcast_to(np.zeros((1, 5)), (1000, 5)).flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        big[...] = ember.arange(5000).reshape(1000, 5)
    with pytest.raises(ValueError, match="read-only"):
        big += 1
    # ... until it is made writeable (NumPy allows it): then writes must not crash
    big.flags.writeable = True
    big[...] = ember.arange(5000).reshape(1000, 5)
    big += 1
    assert big.shape == (1000, 5)
    with pytest.raises(ValueError, match="broadcast"):
        ember.broadcast_to(x, (2, 4))
    with pytest.raises(ValueError, match="broadcast"):
        ember.broadcast_to(x, ())
    with pytest.raises(ValueError, match="non-negative"):
        ember.broadcast_to(x, (-1, 3))


def test_broadcast_arrays_and_shapes():
    for shapes in [((2, 1), (3,)), ((), (4,)), ((1, 0), (5, 1)), ((2, 3),), (), ((1,), (1, 1), (1, 1, 1)),
                   ((5, 1, 4), (3, 1))]:
        assert ember.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)
    xs = ember.broadcast_arrays(ember.zeros((2, 1)), ember.zeros(3), 1.0)
    assert isinstance(xs, tuple)
    assert [v.shape for v in xs] == [(2, 3), (2, 3), (2, 3)]
    with pytest.raises(ValueError, match="broadcast_shapes"):
        ember.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError, match="broadcast_arrays"):
        ember.broadcast_arrays(ember.zeros(2), ember.zeros(3))


# ---------------------------------------------------------------- pad, atleast, misc

@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap", "linear_ramp",
                                  "maximum", "mean", "minimum"])
def test_pad(mode):
    a = random_array((3, 4), "float64")
    for label, arr in layouts(a):
        for pw in [1, (1, 2), ((1, 2), (2, 1)), ((0, 0), (3, 0))]:
            got = ember.pad(E(arr), pw, mode=mode)
            assert_matches(got, np.pad(arr, pw, mode=mode))
    assert_matches(ember.pad(E(np.arange(3)), 2, constant_values=(7, 9)),
                   np.pad(np.arange(3), 2, constant_values=(7, 9)))
    with pytest.raises(ValueError, match="pad"):
        ember.pad(ember.zeros(3), 1, mode="bogus")


def test_atleast():
    for f, nf in [(ember.atleast_1d, np.atleast_1d), (ember.atleast_2d, np.atleast_2d),
                  (ember.atleast_3d, np.atleast_3d)]:
        for shape in [(), (3,), (2, 3), (2, 3, 4), (0,)]:
            a = random_array(shape, "int8")
            x = E(a)
            got = f(x)
            assert_matches(got, nf(a))
            assert got.storage is x.storage        # a view of the input, as NumPy's
        two = f(E(np.array(1)), E(np.arange(2)))
        assert isinstance(two, tuple) and len(two) == 2
        for g, e in zip(two, nf(np.array(1), np.arange(2))):
            assert_matches(g, e)
    x = ember.arange(3)
    assert ember.atleast_2d(x).storage is x.storage


def test_resize_trim_zeros():
    assert_matches(ember.resize(E(np.arange(3)), (2, 4)), np.resize(np.arange(3), (2, 4)))
    z = np.array([0, 0, 1, 0, 2, 0])
    for trim in ["fb", "f", "b"]:
        assert_matches(ember.trim_zeros(E(z), trim), np.trim_zeros(z, trim))
    assert_matches(ember.trim_zeros(E(np.zeros(3))), np.trim_zeros(np.zeros(3)))


# ---------------------------------------------------------------- dtype views

@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "int16"), ("int16", "int64"),
                                     ("complex128", "float64"), ("float64", "uint8"), ("uint8", "bool"),
                                     ("int64", "complex128"), ("float16", "int16")])
def test_view_dtype(src, dst):
    a = random_array((4, 8), src)
    if np.dtype(src).kind == "f":
        a = np.abs(a)
    for label, arr in layouts(a):
        x = E(arr)
        try:
            exp = arr.view(dst)
        except ValueError:
            with pytest.raises(ValueError):
                x.view(dst)
            continue
        got = x.view(getattr(ember, dst))
        if np.dtype(dst) == np.bool_:
            exp = exp.astype(bool)   # compare the truth value only
            got = got.astype(ember.bool)
        else:
            assert got.storage is x.storage
        assert_matches(got, exp)


def test_view_dtype_errors_and_writes():
    x = ember.zeros(4, dtype=ember.int32)
    v = x.view(ember.int8)
    assert v.shape == (16,) and v.storage is x.storage
    v[0] = 1
    assert x[0].item() == 1
    assert x.view(ember.float32).shape == (4,)
    assert ember.zeros((3, 0), dtype=ember.int16).view(ember.int8).shape == (3, 0)
    with pytest.raises(ValueError):
        ember.zeros((3, 3), dtype=ember.int8).T.view(ember.int16)
    with pytest.raises(ValueError):
        ember.zeros(3, dtype=ember.int8).view(ember.int16)
    with pytest.raises(ValueError):
        ember.zeros((), dtype=ember.int16).view(ember.int8)
    with pytest.raises(ValueError):
        ember.zeros(5, dtype=ember.int8)[1:].view(ember.int16)   # misaligned
    with pytest.raises(TypeError):
        x.view("U4")


def test_results_are_ember_arrays():
    a = np.arange(6).reshape(2, 3)
    for r in [ember.reshape(a, 6), ember.transpose(a), ember.flip(a), ember.roll(a, 1),
              ember.concatenate([a, a]), ember.stack([a, a]), ember.tile(a, 2), ember.repeat(a, 2),
              ember.pad(a, 1), ember.broadcast_to(a, (2, 2, 3)), ember.squeeze(a), ember.rot90(a),
              *ember.split(a, 2), *ember.broadcast_arrays(a, a)]:
        assert isinstance(r, ember.ndarray)


def test_flat_parametrised_shapes_all_ops():
    """Every view op on 0-d / empty / 1-element shapes behaves like NumPy."""
    for shape in [(), (0,), (1,), (2, 0, 3), (1, 1)]:
        a = random_array(shape, "float32")
        x = E(a)
        assert_matches(ember.transpose(x), np.transpose(a))
        assert_matches(ember.flip(x), np.flip(a))
        assert_matches(ember.ravel(x), np.ravel(a))
        assert_matches(ember.squeeze(x), np.squeeze(a))
        assert_matches(ember.expand_dims(x, 0), np.expand_dims(a, 0))
        assert_matches(ember.tile(x, 2), np.tile(a, 2))
        assert_matches(ember.repeat(x, 2), np.repeat(a, 2))
        assert_matches(ember.roll(x, 1), np.roll(a, 1))
        for perm in itertools.permutations(range(a.ndim)):
            assert_matches(ember.permute_dims(x, perm), np.transpose(a, perm))
