"""Memory layout of copies: ``astype``, ``copy``, ``asarray``/``array``, ``*_like``,
``ascontiguousarray`` with NumPy's ``order`` ('C', 'F', 'A', 'K'), against NumPy.

The NumPy oracle runs on ``np.asarray(x)``, a view with x's own strides, so both
libraries copy the very same layout.  NumPy 2.4 reports all-zero strides for every
empty array (``np.empty((2, 0)).strides == (0, 0)``) where ember keeps C strides
(as ``ember.empty`` always has): for empty results only the flags are compared.
"""
import pickle

import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES, random_array

ORDERS = ["C", "F", "A", "K"]
# casting complex to real discards the imaginary part, in both libraries alike
pytestmark = pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")


def _base(shape, dtype="float64", seed=0):
    return ember.asarray(random_array(shape, dtype, np.random.default_rng(seed)))


def _inputs():
    """(label, ember array) in the layouts a copy meets; ember's own views where it
    has them, wrapped NumPy memory otherwise."""
    a = _base((2, 3, 4))
    nhwc = _base((2, 5, 6, 3))
    return [
        ("0d", _base(())),
        ("1d", _base((5,))),
        ("1d_step", _base((10,))[::3]),
        ("1d_negative", _base((6,))[::-1]),
        ("empty", _base((2, 0, 3))),
        ("empty_transposed", _base((2, 0, 3)).transpose(2, 0, 1)),
        ("c", a),
        ("f", _base((3, 4)).T),
        ("f3", a.transpose(2, 1, 0)),
        ("permuted", a.transpose(0, 2, 1)),
        ("permuted2", a.transpose(1, 2, 0)),
        ("channels_last", nhwc.transpose(0, 3, 1, 2)),
        ("negative", a[:, ::-1, ::2]),
        ("negative_permuted", a[::-1].transpose(2, 0, 1)),
        ("slice", _base((3, 4, 5))[::2, 1:, ::3]),
        ("slice_f", _base((6, 5)).T[::2]),
        ("size1_axes", _base((3, 1, 4)).transpose(2, 1, 0)),
        ("size1_inserted", _base((4, 3))[:, None, :]),
        ("size1_strided", _base((4, 3)).T[:1]),
        ("broadcast_row", ember.broadcast_to(_base((3,)), (4, 3))),
        ("broadcast_col", ember.broadcast_to(_base((4, 1)), (4, 3))),
        ("broadcast_3d", ember.broadcast_to(_base((1, 3, 1)), (2, 3, 4))),
        ("numpy_odd", ember.asarray(np.arange(120.0).reshape(4, 5, 6)[:, ::-2].swapaxes(0, 2))),
    ]


INPUTS = _inputs()
IDS = [label for label, _ in INPUTS]


def _np(x):
    """NumPy's view of x (same memory, same strides): the oracle's input."""
    v = np.asarray(x)
    assert v.strides == x.strides
    return v


def assert_layout(got, expected, what=""):
    """Same shape, dtype, values and layout (strides; flags for empty arrays)."""
    assert isinstance(got, ember.ndarray)
    assert got.shape == expected.shape, what
    assert got.dtype == expected.dtype, what
    np.testing.assert_array_equal(np.asarray(got), expected, err_msg=what)
    assert got.flags.c_contiguous == expected.flags.c_contiguous, what
    assert got.flags.f_contiguous == expected.flags.f_contiguous, what
    if expected.size:
        assert got.strides == expected.strides, f"{what}: {got.strides} != {expected.strides}"


@pytest.mark.parametrize("order", ORDERS + [None])
@pytest.mark.parametrize("label,x", INPUTS, ids=IDS)
def test_astype_layout_matches_numpy(label, x, order):
    for dt in ("float32", "int16", "complex128"):
        assert_layout(x.astype(dt, order=order), _np(x).astype(dt, order=order),
                      f"{label} astype({dt}, order={order})")


def test_astype_issue_example():
    x = ember.arange(24.0, dtype=ember.float64).reshape(2, 3, 4).transpose(0, 2, 1)
    ref = np.arange(24.0).reshape(2, 3, 4).transpose(0, 2, 1).astype(np.float32)
    assert ref.strides == (48, 4, 16)
    assert x.astype(ember.float32).strides == ref.strides


@pytest.mark.parametrize("dst", ALL_DTYPES)
@pytest.mark.parametrize("src", ["bool", "int8", "uint16", "float16", "float64", "complex64"])
def test_astype_layout_all_dtypes(src, dst):
    a = ember.asarray(random_array((3, 4, 5), src))
    for label, x in (("permuted", a.transpose(2, 0, 1)), ("negative", a[::-1, :, ::-2]),
                     ("f", a.transpose(2, 1, 0))):
        for order in ORDERS:
            assert_layout(x.astype(dst, order=order), _np(x).astype(dst, order=order),
                          f"{label} {src}->{dst} order={order}")


def test_astype_bfloat16_layout():
    """bfloat16 (no NumPy oracle for the cast): the layout of the float16 copy."""
    x = _base((2, 3, 4)).transpose(1, 2, 0)[::-1]
    for order in ORDERS:
        ref = _np(x).astype(np.float16, order=order)
        got = x.astype(ember.bfloat16, order=order)
        assert got.strides == ref.strides, order
        np.testing.assert_allclose(np.asarray(got.astype(ember.float64)), _np(x), rtol=1e-2)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("label,x", INPUTS, ids=IDS)
def test_copy_method_and_function(label, x, order):
    assert_layout(x.copy(order=order), _np(x).copy(order=order), f"{label} x.copy({order})")
    assert_layout(ember.copy(x, order=order), np.copy(_np(x), order=order),
                  f"{label} ember.copy(order={order})")


@pytest.mark.parametrize("label,x", INPUTS, ids=IDS)
def test_copy_defaults(label, x):
    assert_layout(x.copy(), _np(x).copy(), f"{label} x.copy()")           # 'C'
    assert_layout(ember.copy(x), np.copy(_np(x)), f"{label} ember.copy(x)")    # 'K'
    assert_layout(x.astype(x.dtype), _np(x).astype(x.dtype), label)          # 'K'


@pytest.mark.parametrize("order", ORDERS + [None])
@pytest.mark.parametrize("label,x", INPUTS, ids=IDS)
def test_asarray_and_array_layout(label, x, order):
    v = _np(x)
    for kw in ({}, {"dtype": "float32"}, {"dtype": "float64"}):
        for copy in (True, None):
            what = f"{label} order={order} copy={copy} {kw}"
            assert_layout(ember.array(x, order=order, copy=copy, **kw),
                          np.array(v, order=order, copy=copy, **kw), "array " + what)
            assert_layout(ember.asarray(x, order=order, copy=copy, **kw),
                          np.asarray(v, order=order, copy=copy, **kw), "asarray " + what)


@pytest.mark.parametrize("order", ORDERS + [None])
def test_asarray_copy_false_refuses_like_numpy(order):
    for label, x in INPUTS:
        v = _np(x)
        try:
            np.asarray(v, order=order, copy=False)
        except ValueError:
            with pytest.raises(ValueError, match="asarray"):
                ember.asarray(x, order=order, copy=False)
        else:
            assert ember.asarray(x, order=order, copy=False) is x, label


@pytest.mark.parametrize("order", ["C", "F"])
def test_asarray_from_lists(order):
    data = [[1, 2, 3], [4, 5, 6]]
    for kw in ({}, {"dtype": "float32"}):
        assert_layout(ember.asarray(data, order=order, **kw),
                      np.asarray(data, order=order, **kw).astype(
                          kw.get("dtype", "int64")), f"{order} {kw}")


@pytest.mark.parametrize("fn", ["empty_like", "zeros_like", "ones_like", "full_like"])
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("label,x", INPUTS, ids=IDS)
def test_like_layout(fn, label, x, order):
    v = _np(x)
    args = (7,) if fn == "full_like" else ()
    shapes = [None, tuple(reversed(x.shape)), x.shape[:-1], (2,) + x.shape]
    for shape in shapes:
        for dtype in (None, "int8"):
            got = getattr(ember, fn)(x, *args, dtype=dtype, order=order, shape=shape)
            ref = getattr(np, fn)(v, *args, dtype=dtype, order=order, shape=shape)
            what = f"{fn}({label}, order={order}, shape={shape}, dtype={dtype})"
            if fn == "empty_like":
                assert got.shape == ref.shape and got.dtype == ref.dtype, what
                assert got.flags.c_contiguous == ref.flags.c_contiguous, what
                assert got.flags.f_contiguous == ref.flags.f_contiguous, what
                if ref.size:
                    assert got.strides == ref.strides, what
            else:
                assert_layout(got, ref, what)
            assert got.flags.owndata and got.flags.writeable, what


@pytest.mark.parametrize("label,x", INPUTS, ids=IDS)
def test_ascontiguousarray(label, x):
    for dtype in (None, "float32", "float64"):
        got = ember.ascontiguousarray(x, dtype=dtype)
        assert got.flags.c_contiguous, (label, dtype)
        want = np.ascontiguousarray(_np(x), dtype=dtype)
        assert got.shape == want.shape, (label, dtype)          # ndim >= 1, as NumPy's
        np.testing.assert_array_equal(np.asarray(got), want)
    if x.flags.c_contiguous and x.ndim >= 1:
        assert ember.ascontiguousarray(x) is x


@pytest.mark.parametrize("order", ORDERS + [None])
def test_astype_copy_false_like_numpy(order):
    """``copy=False`` returns the array itself only when the dtype and order hold."""
    for label, x in INPUTS:
        v = _np(x)
        for dt in (x.dtype, np.float32):
            got = x.astype(dt, order=order, copy=False)
            ref = v.astype(dt, order=order, copy=False)
            assert (got is x) == (ref is v), (label, dt, order)
            assert_layout(got, ref, f"{label} {dt} {order}")


@pytest.mark.parametrize("order", ORDERS)
def test_result_owns_its_memory(order):
    """A laid-out copy is an ordinary owning array: flags, writes, read-only toggling,
    pickling, NumPy and DLPack export."""
    x = _base((2, 3, 4)).transpose(2, 0, 1)[::-1]
    for y in (x.astype(ember.float32, order=order), x.copy(order=order),
              ember.copy(x, order=order), ember.zeros_like(x, order=order)):
        ref = _np(y).copy()
        assert y.flags.owndata and y.flags.writeable and y.base is None
        assert y.storage.nbytes == y.size * y.itemsize
        y[0, 0, 0] = 5
        ref[0, 0, 0] = 5
        np.testing.assert_array_equal(np.asarray(y), ref)
        y.flags.writeable = False
        with pytest.raises(ValueError):
            y[0] = 1
        y.flags.writeable = True
        y[1] = 2
        ref[1] = 2
        back = pickle.loads(pickle.dumps(y))
        np.testing.assert_array_equal(np.asarray(back), ref)
        assert back.dtype == y.dtype
        assert y.numpy().strides == y.strides
        d = np.from_dlpack(y)
        assert d.strides == y.strides
        np.testing.assert_array_equal(d, ref)
        assert ember.from_dlpack(np.asarray(y)).strides == y.strides


def test_laid_out_copies_do_not_alias():
    x = _base((3, 4)).T
    y = x.astype(ember.float64, order="K")
    y[...] = 0
    assert float(np.abs(np.asarray(x)).sum()) > 0


@pytest.mark.parametrize("order", ORDERS + [None])
def test_astype_autograd_keeps_layout(order):
    torch = pytest.importorskip("torch")
    v = random_array((2, 3, 4), "float64").transpose(2, 0, 1)[:, ::-1]
    x = ember.asarray(v).requires_grad_(True)
    y = x.astype(ember.float32, order=order)
    assert y.requires_grad and y.grad_fn is not None
    assert_layout(y.detach(), v.astype(np.float32, order=order), f"order={order}")
    w = random_array(y.shape, "float32", np.random.default_rng(1))
    (y * ember.asarray(w)).sum().backward()
    t = torch.tensor(np.ascontiguousarray(v), requires_grad=True)
    (t.float() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("order", ORDERS)
def test_copy_autograd_keeps_layout(order):
    base = random_array((3, 4, 2), "float64")
    v = base.transpose(1, 2, 0)[::-1]
    x = ember.asarray(base).requires_grad_(True)      # gradcheck takes C-contiguous inputs
    for fn in (lambda a: a.copy(order=order), lambda a: ember.copy(a, order=order),
               lambda a: a.astype(ember.float64, order=order)):
        y = fn(x.transpose(1, 2, 0)[::-1])
        assert y.grad_fn is not None
        assert_layout(y.detach(), np.array(v, order=order), f"order={order}")
        assert ember.autograd.gradcheck(
            lambda a: fn(a.transpose(1, 2, 0)[::-1]) ** 2, (x,))


def test_gradient_of_layout_cast_is_cast_back():
    x = ember.asarray(random_array((4, 3), "float64").T).requires_grad_(True)
    y = x.astype(ember.float32, order="F")
    (y * 3).sum().backward()
    assert x.grad.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(x.grad), np.full(x.shape, 3.0))
