"""ember on 'cuda' against ember on the CPU: elementwise ufuncs, reductions,
matmul, manipulation, indexing, creation, casts, transfers and interop, the
ember.cuda API, and the caching allocator in steady state.

The oracle is ember's own CPU result (tested against NumPy elsewhere): each
case builds its inputs on the CPU, runs the op on the CPU and on the same data
moved to the GPU, and compares dtype, shape and values.  Skipped, never
faked, without a GPU (see cuda_helpers.py; CuPy is imported only inside tests).
"""
import operator
import warnings

import numpy as np
import pytest

import ember
from ember._core import elementwise as _ew
from cuda_helpers import (DEV, DRY, GPU_MARK, assert_on_device, assert_same, assert_same_tree,
                          cupy, gpu, host, layout_pairs, on_test_device, real_gpu,
                          settle)
from helpers import random_array, values_for

pytestmark = GPU_MARK

OPS = _ew.op_names()
UNARY = [n for n in OPS if getattr(np, n).nin == 1]
BINARY = [n for n in OPS if getattr(np, n).nin == 2]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"]


def quiet(fn, *args, **kw):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def cpu_or_error(fn, *args, **kw):
    """(result, None) or (None, exception) of the CPU run."""
    try:
        return quiet(fn, *args, **kw), None
    except Exception as exc:  # the GPU must refuse the same input the same way
        return None, exc


def check_like_cpu(fn, cpu_args, gpu_args, rtol=None, atol=None, **kw):
    """Run fn on both devices; equal results, or the same exception type."""
    exp, err = cpu_or_error(fn, *cpu_args, **kw)
    if err is not None:
        with pytest.raises(type(err)):
            try:
                quiet(fn, *gpu_args, **kw)
            finally:
                settle()            # bad indices are reported at the next synchronisation
                                    # (also when the op raised at once: nothing stays queued)
        return
    got = quiet(fn, *gpu_args, **kw)
    assert_same_tree(got, exp, rtol=rtol, atol=atol)


def loose(name, dtype):
    """Wider float tolerance for functions whose GPU libm differs by more ulp."""
    if np.dtype(dtype).kind not in "f" and name not in _ew.op_names():
        return None
    if name in ("tan", "expm1", "log1p", "power", "arccosh", "arctanh", "cbrt", "sinh", "cosh",
                "exp2", "logaddexp", "logaddexp2"):
        return {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-4, "float64": 1e-11}.get(np.dtype(dtype).name)
    return None


# ----------------------------------------------------------------- elementwise

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_ufunc(name, dtype):
    fn = getattr(ember, name)
    base = values_for(name, dtype, (3, 4))
    for label, xc, xg in layout_pairs(base):
        check_like_cpu(fn, (xc,), (xg,), rtol=loose(name, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_ufunc(name, dtype):
    fn = getattr(ember, name)
    a = values_for(name, dtype, (3, 4), 0)
    b = values_for(name, dtype, (3, 4), 1)
    if name in ("floor_divide", "remainder", "fmod", "divide") and np.dtype(dtype).kind in "iu":
        b[0, 0] = 0                       # integer division by zero: same answer as the CPU
    if name == "power" and np.dtype(dtype).kind in "iu":
        b = np.abs(b) % 4
    bc, bg = ember.asarray(b), gpu(b)
    for label, xc, xg in layout_pairs(a):
        check_like_cpu(fn, (xc, bc), (xg, bg), rtol=loose(name, dtype))
        check_like_cpu(fn, (bc, xc), (bg, xg), rtol=loose(name, dtype))


@pytest.mark.parametrize("shape", [(), (0,), (1,), (5,), (2, 0, 3), (2, 3, 4)])
@pytest.mark.parametrize("name", ["add", "multiply", "less", "maximum", "arctan2", "exp",
                                  "negative", "sqrt", "logical_not"])
def test_ufunc_0d_and_empty(name, shape):
    fn = getattr(ember, name)
    a = values_for(name, "float32", shape, 0)
    if getattr(np, name).nin == 1:
        check_like_cpu(fn, (ember.asarray(a),), (gpu(a),))
    else:
        b = values_for(name, "float32", shape, 1)
        check_like_cpu(fn, (ember.asarray(a), ember.asarray(b)), (gpu(a), gpu(b)))


@pytest.mark.parametrize("sa,sb", [((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((5,), ()),
                                   ((0, 3), (1, 3)), ((2, 1, 3), (2, 4, 1)), ((1,), (3, 1))])
@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.lt, ember.maximum, ember.hypot])
def test_broadcasting(op, sa, sb):
    a = random_array(sa, "float32")
    b = random_array(sb, "float32", np.random.default_rng(1))
    check_like_cpu(op, (ember.asarray(a), ember.asarray(b)), (gpu(a), gpu(b)))


def test_broadcast_error_matches_cpu():
    with pytest.raises(ValueError, match=r"add: operands could not be broadcast together"):
        gpu(np.zeros((2, 3))) + gpu(np.zeros((4,)))


@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("scalar", [True, 3, -2, 2.5])
@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.pow, operator.gt, ember.maximum])
def test_python_scalar_operands(op, scalar, dtype):
    a = random_array((4, 3), dtype, low=1, high=4)
    if op is operator.pow and np.dtype(dtype).kind in "iu" and scalar == -2:
        scalar = 2                          # integer ** negative integer is an error on both
    xc, xg = ember.asarray(a), gpu(a)
    check_like_cpu(op, (xc, scalar), (xg, scalar))
    check_like_cpu(op, (scalar, xc), (scalar, xg))


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_inplace_operators_and_out(dtype):
    a = random_array((3, 4), dtype, low=1, high=5)
    xc, xg = ember.asarray(a.copy()), gpu(a)
    for op in (operator.iadd, operator.imul, operator.isub):
        xc = op(xc, 2)
        xg2 = op(xg, 2)
        assert xg2 is xg                  # in place on the device
        assert_same(xg, xc)
    out_c = ember.empty((3, 4), dtype=dtype)
    out_g = ember.empty((3, 4), dtype=dtype, device=DEV)
    r = ember.add(xg, xg, out=out_g)
    assert r is out_g
    assert_same(out_g, ember.add(xc, xc, out=out_c))


# ----------------------------------------------------------------- reductions

AXES = [None, 0, -1, (0, 2), (1, 2), ()]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var", "std", "all", "any"])
def test_reductions(name, dtype, axis, keepdims):
    fn = getattr(ember, name)
    base = random_array((3, 4, 5), dtype, low=-2, high=3)
    rtol = {"float16": 5e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}.get(dtype)
    for label, xc, xg in layout_pairs(base):
        check_like_cpu(fn, (xc,), (xg,), axis=axis, keepdims=keepdims, rtol=rtol)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions(name, dtype, axis):
    fn = getattr(ember, name)
    base = random_array((3, 4, 5), dtype)
    for label, xc, xg in layout_pairs(base):
        check_like_cpu(fn, (xc,), (xg,), axis=axis)
        check_like_cpu(fn, (xc,), (xg,), axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_cumsum(dtype, axis):
    base = random_array((3, 4, 5), dtype, low=-2, high=3)
    for label, xc, xg in layout_pairs(base):
        check_like_cpu(ember.cumsum, (xc,), (xg,), axis=axis, rtol=1e-5 if dtype == "float32" else None)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logsumexp(dtype, axis, keepdims):
    base = random_array((3, 4, 5), dtype) * 10
    for label, xc, xg in layout_pairs(base):
        check_like_cpu(ember.logsumexp, (xc,), (xg,), axis=axis, keepdims=keepdims)


def test_reductions_of_empty_and_0d():
    for shape in [(), (0,), (2, 0)]:
        a = random_array(shape, "float32")
        xc, xg = ember.asarray(a), gpu(a)
        for name in ("sum", "prod", "any", "all", "mean"):
            check_like_cpu(getattr(ember, name), (xc,), (xg,))
        check_like_cpu(ember.max, (xc,), (xg,))          # error on empty, like the CPU
    a = random_array((2, 0), "float32")
    check_like_cpu(ember.sum, (ember.asarray(a),), (gpu(a),), axis=1)


def test_large_reduction_accuracy():
    a = np.random.default_rng(0).uniform(0, 1, size=(1 << 20) + 3).astype(np.float32)
    check_like_cpu(ember.sum, (ember.asarray(a),), (gpu(a),), rtol=1e-5)
    b = a[: 1024 * 1024].reshape(1024, 1024)
    for axis in (0, 1):
        check_like_cpu(ember.sum, (ember.asarray(b),), (gpu(b),), axis=axis, rtol=1e-5, atol=1e-4)
        check_like_cpu(ember.max, (ember.asarray(b),), (gpu(b),), axis=axis)


def test_reduction_dim_aliases():
    a = random_array((3, 4), "float32")
    xg, xc = gpu(a), ember.asarray(a)
    assert_same(xg.sum(dim=1, keepdim=True), xc.sum(dim=1, keepdim=True))
    assert_same(xg.mean(axis=0), xc.mean(axis=0))
    assert_same(ember.var(xg, axis=1, ddof=1), ember.var(xc, axis=1, ddof=1))


# ----------------------------------------------------------------- matmul

MATMUL_SHAPES = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)),
                 ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 5)),
                 ((0, 4), (4, 5)), ((3, 0), (0, 5)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb, dtype):
    a = random_array(sa, dtype, low=-1, high=1)
    b = random_array(sb, dtype, np.random.default_rng(1), low=-1, high=1)
    rtol = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 1e-4, "float64": 1e-12}[dtype]
    atol = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 1e-5, "float64": 1e-12}[dtype]
    check_like_cpu(ember.matmul, (ember.asarray(a), ember.asarray(b)), (gpu(a), gpu(b)),
                   rtol=rtol, atol=atol)
    check_like_cpu(operator.matmul, (ember.asarray(a), ember.asarray(b)), (gpu(a), gpu(b)),
                   rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_noncontiguous_and_large(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((130, 70)).astype(dtype)
    b = rng.standard_normal((90, 130)).astype(dtype)
    ac, ag = ember.asarray(a), gpu(a)
    bc, bg = ember.asarray(b), gpu(b)
    rtol = 1e-4 if dtype == "float32" else 1e-11
    assert_same(ag.T @ bg.T, ac.T @ bc.T, rtol=rtol, atol=1e-4)
    assert_same(ag[::2, ::-1] @ bg[:70, ::2], ac[::2, ::-1] @ bc[:70, ::2], rtol=rtol, atol=1e-4)


def test_matmul_errors_like_cpu():
    check_like_cpu(ember.matmul, (ember.ones((3, 4)), ember.ones((5, 2))),
                   (gpu(np.ones((3, 4), np.float32)), gpu(np.ones((5, 2), np.float32))))


# ----------------------------------------------------------------- manipulation

def _manip_cases():
    r = lambda *s: random_array(s, "float32")
    ri = lambda *s: random_array(s, "int64")
    idx = np.array([[0, 2, 1, 0], [1, 1, 0, 2]])
    return [
        ("reshape", lambda x: ember.reshape(x, (4, 6)), [r(2, 3, 4)]),
        ("reshape_-1", lambda x: x.reshape(-1, 2), [r(2, 3, 4)]),
        ("reshape_transposed", lambda x: x.T.reshape(-1), [r(2, 3, 4)]),
        ("transpose", lambda x: ember.transpose(x, (2, 0, 1)), [r(2, 3, 4)]),
        ("T_copy", lambda x: ember.ascontiguousarray(x.T), [r(3, 5)]),
        ("swapaxes", lambda x: ember.swapaxes(x, 0, 2), [r(2, 3, 4)]),
        ("concatenate", lambda x, y: ember.concatenate([x, y], axis=1), [r(2, 3), r(2, 4)]),
        ("concatenate_none", lambda x, y: ember.concatenate([x, y], axis=None), [r(2, 3), r(4)]),
        ("stack", lambda x, y: ember.stack([x, y], axis=-1), [r(2, 3), r(2, 3)]),
        ("split", lambda x: ember.split(x, 3, axis=1), [r(2, 6)]),
        ("split_idx", lambda x: ember.split(x, [1, 4], axis=1), [r(2, 6)]),
        ("where", lambda c, x, y: ember.where(c, x, y), [r(3, 4) > 0, r(3, 4), r(1, 4)]),
        ("where_scalar", lambda c, x: ember.where(c, x, 0.0), [r(3, 4) > 0, r(3, 4)]),
        ("take", lambda x, i: ember.take(x, i, axis=1), [r(3, 4), np.array([3, 0, 0, 2])]),
        ("take_flat", lambda x, i: ember.take(x, i), [r(3, 4), np.array([11, 0, 5])]),
        ("take_along_axis", lambda x, i: ember.take_along_axis(x, i, axis=1), [r(2, 3), idx]),
        ("pad", lambda x: ember.pad(x, ((1, 2), (0, 1))), [r(3, 4)]),
        ("pad_value", lambda x: ember.pad(x, 2, constant_values=1.5), [r(3, 4)]),
        ("pad_reflect", lambda x: ember.pad(x, ((1, 1), (2, 2)), mode="reflect"), [r(3, 4)]),
        ("flip", lambda x: ember.flip(x, axis=0), [r(3, 4)]),
        ("flip_all", lambda x: ember.flip(x), [r(3, 4)]),
        ("roll", lambda x: ember.roll(x, 2, axis=1), [r(3, 4)]),
        ("roll_flat", lambda x: ember.roll(x, -5), [r(3, 4)]),
        ("tril", lambda x: ember.tril(x), [r(4, 5)]),
        ("triu", lambda x: ember.triu(x, k=1), [r(2, 4, 5)]),
        ("broadcast_to", lambda x: ember.broadcast_to(x, (3, 4)) + 0, [r(1, 4)]),
        ("expand_squeeze", lambda x: ember.squeeze(ember.expand_dims(x, 0), 0), [r(3, 4)]),
        ("tile", lambda x: ember.tile(x, (2, 1)), [r(2, 3)]),
        ("repeat", lambda x: ember.repeat(x, 2, axis=0), [r(2, 3)]),
        ("clip", lambda x: ember.clip(x, -1, 1), [r(3, 4)]),
        ("sort", lambda x: ember.sort(x, axis=-1), [r(3, 7)]),
        ("argsort", lambda x: ember.argsort(x, axis=0), [r(5, 3)]),
        ("int_concat", lambda x, y: ember.concatenate([x, y]), [ri(2, 3), ri(1, 3)]),
        ("einsum", lambda x, y: ember.einsum("ij,jk->ik", x, y), [r(3, 4), r(4, 2)]),
        ("outer", lambda x, y: ember.outer(x, y), [r(3), r(4)]),
        ("diagonal", lambda x: ember.diagonal(x) + 0, [r(4, 4)]),
    ]


@pytest.mark.parametrize("case", _manip_cases(), ids=lambda c: c[0])
def test_manipulation(case):
    name, fn, arrays = case
    cpu_args = tuple(ember.asarray(a) for a in arrays)
    gpu_args = tuple(gpu(a) for a in arrays)
    check_like_cpu(fn, cpu_args, gpu_args)


def test_views_share_gpu_memory():
    xg = gpu(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = xg.T
    assert_on_device(v)
    assert v.data_ptr() == xg.data_ptr()
    s = xg[1:, ::2]
    s[...] = -1.0
    exp = np.arange(12, dtype=np.float32).reshape(3, 4)
    exp[1:, ::2] = -1
    np.testing.assert_array_equal(host(xg), exp)


# ----------------------------------------------------------------- indexing

def _base():
    return np.arange(60, dtype=np.float32).reshape(3, 4, 5)


GET_KEYS = [
    ("int", lambda x: x[1]),
    ("neg_int", lambda x: x[-1, 2]),
    ("slice", lambda x: x[:, 1:3]),
    ("step", lambda x: x[::2, ::-1, 1::2]),
    ("ellipsis_none", lambda x: x[..., None, 2]),
    ("scalar", lambda x: x[1, 2, 3]),
    ("list", lambda x: x[[0, 2, 2]]),
    ("list_2axes", lambda x: x[[0, 2], :, [1, 4]]),
    ("array_idx", lambda x, i: x[:, i]),
    ("array_idx_neg", lambda x, i: x[i - 4]),
    ("bool_mask", lambda x, m: x[m]),
    ("bool_mask_row", lambda x, m: x[m[:, 0, 0]]),
]


@pytest.mark.parametrize("case", GET_KEYS, ids=lambda c: c[0])
def test_getitem(case):
    name, fn = case
    a = _base()
    extra = []
    if "array" in name:
        extra = [np.array([[3, 0], [1, 1]], dtype=np.int64)]
    if "mask" in name:
        extra = [a % 3 == 0]
    cpu_args = (ember.asarray(a),) + tuple(ember.asarray(e) for e in extra)
    gpu_args = (gpu(a),) + tuple(gpu(e) for e in extra)
    check_like_cpu(fn, cpu_args, gpu_args)


def _set(key, value):
    def f(x, *args):
        x = x.copy()
        k = key(*args) if callable(key) else key
        x[k] = value(*args) if callable(value) else value
        return x
    return f


SET_CASES = [
    ("int_scalar", _set(1, 7.0), []),
    ("slice_scalar", _set((slice(None), slice(1, 3)), -2.0), []),
    ("step_array", _set((slice(None, None, 2),), lambda v: v), [np.ones((2, 4, 5), np.float32) * 3]),
    ("broadcast_row", _set((Ellipsis, 0), lambda v: v), [np.arange(4, dtype=np.float32)]),
    ("list", _set(([0, 2],), 9.0), []),
    ("array_idx", _set(lambda i: (slice(None), i), 5.0), [np.array([3, 0], dtype=np.int64)]),
    ("bool_mask", _set(lambda m: m, 0.0), [np.arange(60).reshape(3, 4, 5) % 7 == 0]),
    ("bool_mask_values", _set(lambda m, v: m, lambda m, v: v),
     [np.arange(60).reshape(3, 4, 5) % 12 == 0, np.arange(5, dtype=np.float32)]),
    ("int_from_float", _set(0, 2.7), []),
]


@pytest.mark.parametrize("case", SET_CASES, ids=lambda c: c[0])
def test_setitem(case):
    name, fn, extra = case
    a = _base()
    cpu_args = (ember.asarray(a),) + tuple(ember.asarray(e) for e in extra)
    gpu_args = (gpu(a),) + tuple(gpu(e) for e in extra)
    check_like_cpu(fn, cpu_args, gpu_args)


def test_setitem_noncontiguous_target_and_dtype_cast():
    a = _base()
    xc, xg = ember.asarray(a.copy()), gpu(a)
    xc.T[1] = 4
    xg.T[1] = 4
    xc[:, ::-1, 0] = ember.asarray(np.arange(4, dtype=np.float64))
    xg[:, ::-1, 0] = gpu(np.arange(4, dtype=np.float64))
    assert_same(xg, xc)
    ic, ig = ember.zeros((3, 4), dtype=ember.int32), ember.zeros((3, 4), dtype=ember.int32, device=DEV)
    ic[1] = 2.9
    ig[1] = 2.9
    assert_same(ig, ic)


# ----------------------------------------------------------------- creation

CREATION = [
    ("zeros", lambda **d: ember.zeros((2, 3), **d)),
    ("zeros_int", lambda **d: ember.zeros((2, 3), dtype=ember.int64, **d)),
    ("ones", lambda **d: ember.ones((4,), dtype=ember.float16, **d)),
    ("empty_shape", lambda **d: ember.empty((2, 0), **d)),
    ("full", lambda **d: ember.full((2, 2), 7.5, **d)),
    ("full_int", lambda **d: ember.full((3,), 7, **d)),
    ("full_bool", lambda **d: ember.full((3,), True, **d)),
    ("arange", lambda **d: ember.arange(10, **d)),
    ("arange_float", lambda **d: ember.arange(0.5, 3.0, 0.25, **d)),
    ("arange_neg", lambda **d: ember.arange(5, -3, -2, dtype=ember.float64, **d)),
    ("linspace", lambda **d: ember.linspace(-1, 1, 11, **d)),
    ("linspace_noend", lambda **d: ember.linspace(0, 1, 8, endpoint=False, dtype=ember.float64, **d)),
    ("eye", lambda **d: ember.eye(3, 4, k=1, **d)),
    ("asarray_list", lambda **d: ember.asarray([[1, 2], [3, 4]], **d)),
    ("asarray_numpy", lambda **d: ember.asarray(np.arange(6.0).reshape(2, 3), **d)),
    ("asarray_float32", lambda **d: ember.asarray([1.5, 2.5], dtype=ember.float32, **d)),
]


@pytest.mark.parametrize("case", CREATION, ids=lambda c: c[0])
def test_creation_with_device(case):
    name, fn = case
    got = fn(device=DEV)
    exp = fn()
    assert_on_device(got)
    if name.startswith("empty"):
        assert got.shape == exp.shape and got.dtype == exp.dtype
    else:
        assert_same(got, exp)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "dev_obj"])
def test_device_spellings(device):
    if DRY:
        pytest.skip("needs a real CUDA device")
    dev = ember.Device("cuda", 0) if device == "dev_obj" else device
    x = ember.zeros(3, device=dev)
    assert x.is_cuda and x.device == ember.Device("cuda", 0)
    assert str(x.device) == "cuda:0"
    assert x.get_device() == 0


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like", "full_like"])
def test_like_functions_keep_the_device(name):
    xg = gpu(random_array((2, 3), "float64"))
    fn = getattr(ember, name)
    got = fn(xg, 3.0) if name == "full_like" else fn(xg)
    assert_on_device(got)
    assert got.shape == (2, 3) and got.dtype == np.float64
    if name != "empty_like":
        exp = fn(ember.asarray(host(xg)), 3.0) if name == "full_like" else fn(ember.asarray(host(xg)))
        assert_same(got, exp)
    # device= overrides: a CPU copy-shape of a GPU array
    c = fn(xg, 3.0, device="cpu") if name == "full_like" else fn(xg, device="cpu")
    assert (c.device.type == "cpu")


def test_creation_requires_grad_on_device():
    x = ember.zeros((2, 2), device=DEV, requires_grad=True)
    assert_on_device(x)
    assert x.requires_grad and x.is_leaf


# ----------------------------------------------------------------- astype / copy

CASTS = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("src", CASTS)
@pytest.mark.parametrize("dst", CASTS)
def test_astype(src, dst):
    a = random_array((3, 4), src, low=-3, high=4)
    if np.dtype(src).kind == "f":
        a = (a * 1.37).astype(src)      # fractional values: truncation toward zero
    for label, xc, xg in layout_pairs(a):
        check_like_cpu(lambda x: x.astype(dst), (xc,), (xg,))


def _cast_sources(src):
    """Values that stress a cast: specials, 16-bit range edges, rounding ties, subnormals,
    random bits; 4099 of them so vector and tail paths both run."""
    rng = np.random.default_rng(7)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 65520.0,
                        65519.99, 1e-8, 6e-8, 3e-8, 2.0 ** -24, 2.0 ** -25, 1 + 2.0 ** -11,
                        1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 3.4e38, 1e-45])
    rand = rng.standard_normal(4099 - special.size) * np.exp(rng.uniform(-20, 20, 4099 - special.size))
    vals = np.concatenate([special, rand])
    if src == "bfloat16":
        return vals.astype(np.float32).astype(ember.bfloat16)
    with np.errstate(over="ignore"):
        return vals.astype(src)


@real_gpu
@pytest.mark.parametrize("src", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("dst", ["float16", "bfloat16", "float32", "float64"])
def test_float_casts_are_bit_exact(src, dst):
    """ember's cast kernels (and CuPy's, for float64 -> 16-bit) against the CPU casts,
    bit for bit (NaN as NaN), on contiguous, offset and strided inputs; twice, so both the first
    launch and the registered fast path run."""
    a = _cast_sources(src)
    xc = ember.asarray(a)
    xg = gpu(a)
    for pick in (lambda x: x, lambda x: x[1:], lambda x: x[::3], lambda x: x[::-1]):
        expected = np.asarray(pick(xc).astype(dst))
        for _ in range(2):
            got = pick(xg).astype(dst)
            assert_on_device(got)
            assert got.dtype == expected.dtype and got.shape == expected.shape
            g = host(got)
            nan = np.isnan(expected.astype(np.float64))
            # NaN payloads may differ (CUDA's conversions return their canonical NaN)
            np.testing.assert_array_equal(np.isnan(g.astype(np.float64)), nan)
            np.testing.assert_array_equal(g.view(f"u{g.itemsize}")[~nan],
                                          expected.view(f"u{expected.itemsize}")[~nan])


def test_copy_is_independent_and_on_device():
    a = random_array((3, 4), "float32")
    for label, xc, xg in layout_pairs(a):
        for cp in (lambda x: x.copy(), lambda x: ember.copy(x), lambda x: ember.array(x)):
            y = cp(xg)
            assert_same(y, xc)
            assert y.data_ptr() != xg.data_ptr()
            y[...] = 0
            assert_same(xg, xc)
    c = ember.ascontiguousarray(gpu(a).T)
    assert_on_device(c)
    assert c.is_contiguous()
    assert_same(c, ember.ascontiguousarray(ember.asarray(a).T))


# ----------------------------------------------------------------- transfers

@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64",
                                   "complex64"])
def test_round_trip_keeps_values_dtype_shape(dtype):
    a = random_array((3, 4, 5), dtype)
    for label, xc, _ in layout_pairs(a):
        for move in (lambda x: x.to(DEV), lambda x: x.to(device=DEV),
                     lambda x: x.cuda() if not DRY else x.to(DEV)):
            with on_test_device():                   # x.cuda(): to the current device
                g = move(xc)
            assert_on_device(g)
            back = g.cpu()
            assert back.device.type == "cpu"
            assert back.dtype == xc.dtype and back.shape == xc.shape
            np.testing.assert_array_equal(np.asarray(back), np.asarray(xc))


def test_to_with_dtype_and_device():
    a = random_array((2, 3), "float64")
    g = ember.asarray(a).to(DEV, ember.float32)
    assert_on_device(g)
    assert g.dtype == np.float32
    np.testing.assert_allclose(host(g), a.astype(np.float32))
    h = g.to(ember.float16)
    assert_on_device(h)
    assert h.dtype == np.float16


@real_gpu
def test_to_same_device_is_identity():
    xg = gpu(np.ones(3, np.float32))
    with on_test_device():                       # 'cuda' means the current device
        assert xg.cuda() is xg
        assert xg.to("cuda") is xg
    xc = ember.ones(3)
    assert xc.cpu() is xc


def test_empty_and_0d_transfers():
    for a in (np.zeros((0, 3), np.float32), np.array(2.5), np.array(True)):
        g = gpu(a)
        assert_on_device(g)
        assert g.shape == a.shape
        np.testing.assert_array_equal(host(g), a)


@real_gpu
def test_cupy_interop_is_zero_copy():
    cp = cupy()
    xg = gpu(np.arange(12, dtype=np.float32).reshape(3, 4))
    c = cp.asarray(xg)
    assert isinstance(c, cp.ndarray)
    assert c.data.ptr == xg.data_ptr()
    assert c.shape == (3, 4) and c.dtype == np.float32
    with on_test_device():                       # CuPy computes on the current device
        c[0, 0] = 42                             # same memory: visible through ember
    assert host(xg)[0, 0] == 42
    # a strided view keeps its strides
    ct = cp.asarray(xg.T)
    assert ct.strides == xg.T.strides
    np.testing.assert_array_equal(cp.asnumpy(ct), host(xg).T)
    # and back: ember over CuPy's memory
    src = cp.arange(10, dtype=cp.float64)
    e = ember.asarray(src)
    assert e.is_cuda and e.data_ptr() == src.data.ptr
    assert e.dtype == np.float64
    src[3] = -1
    assert host(e)[3] == -1
    np.testing.assert_array_equal(host(e * 2), cp.asnumpy(src) * 2)


@real_gpu
def test_dlpack_with_torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    xg = gpu(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(xg)
    assert t.is_cuda and t.data_ptr() == xg.data_ptr()
    assert tuple(t.shape) == (2, 3)
    np.testing.assert_array_equal(t.cpu().numpy(), host(xg))
    tt = torch.arange(8, dtype=torch.float64, device="cuda").reshape(2, 4)
    e = ember.from_dlpack(tt)
    assert e.is_cuda and e.data_ptr() == tt.data_ptr()
    tt[0, 0] = 99
    torch.cuda.synchronize()
    assert host(e)[0, 0] == 99
    np.testing.assert_array_equal(host(e.T), tt.T.cpu().numpy())


@real_gpu
def test_dlpack_bfloat16_with_torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    xg = gpu(np.arange(6, dtype=np.float32).reshape(2, 3)).astype(ember.bfloat16)
    t = torch.from_dlpack(xg)
    assert t.dtype == torch.bfloat16 and t.data_ptr() == xg.data_ptr()
    np.testing.assert_array_equal(t.float().cpu().numpy(), np.arange(6.0).reshape(2, 3))
    tt = torch.arange(8, dtype=torch.bfloat16, device="cuda").reshape(2, 4)
    e = ember.from_dlpack(tt)
    assert e.is_cuda and e.dtype == ember.bfloat16 and e.data_ptr() == tt.data_ptr()
    np.testing.assert_array_equal(host(e.astype(ember.float32)), tt.float().cpu().numpy())


# ----------------------------------------------------------------- mixing devices

DEVICE_MSG = r"(?s)(cuda.*cpu|cpu.*cuda)"


@real_gpu
@pytest.mark.parametrize("fn", [operator.add, operator.mul, ember.maximum, ember.matmul,
                                lambda a, b: ember.concatenate([a, b]),
                                lambda a, b: ember.where(a > 0, a, b)],
                         ids=["add", "mul", "maximum", "matmul", "concatenate", "where"])
def test_mixing_devices_is_an_error_naming_both(fn):
    xg = gpu(np.ones((3, 3), np.float32))
    xc = ember.ones((3, 3))
    with pytest.raises((RuntimeError, ValueError, TypeError), match=DEVICE_MSG):
        fn(xg, xc)
    with pytest.raises((RuntimeError, ValueError, TypeError), match=DEVICE_MSG):
        fn(xc, xg)


@real_gpu
def test_numpy_conversion_of_gpu_array_is_refused():
    xg = gpu(np.ones(3, np.float32))
    with pytest.raises((TypeError, RuntimeError), match="cuda"):
        np.asarray(xg)


# ----------------------------------------------------------------- host values

def test_item_tolist_repr_bool_float():
    a = random_array((2, 3), "float32")
    xc, xg = ember.asarray(a), gpu(a)
    assert xg.sum().item() == pytest.approx(xc.sum().item(), rel=1e-6)
    assert xg[1, 2].item() == xc[1, 2].item()
    assert xg.tolist() == xc.tolist()
    assert gpu(np.arange(4)).tolist() == [0, 1, 2, 3]
    assert float(xg[0, 0]) == float(xc[0, 0])
    assert int(gpu(np.array(7))) == 7
    assert bool(gpu(np.array(True))) is True
    r = repr(xg)
    if not DRY:
        assert "cuda" in r
    assert repr(xc).split("dtype")[0][:20] in r     # same values shown


# ----------------------------------------------------------------- ember.cuda API

@real_gpu
def test_cuda_api_basics():
    import ember.cuda as ec
    assert ec.is_available() is True
    assert ec.device_count() >= 1
    assert ec.current_device() == 0
    ec.synchronize()


@real_gpu
def test_streams_and_events():
    import ember.cuda as ec
    cp = cupy()
    default = ec.current_stream()
    s = ec.Stream()
    a = gpu(np.ones((1000, 1000), np.float32))
    with ec.stream(s):
        assert ec.current_stream() == s
        b = a @ a
        c = b + 1
    assert ec.current_stream() == default
    s.synchronize()
    np.testing.assert_allclose(host(c), np.full((1000, 1000), 1001.0), rtol=1e-5)
    start, end = ec.Event(enable_timing=True), ec.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        b = a @ a
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms > 0
    del cp


@real_gpu
def test_ops_are_asynchronous():
    """A long kernel returns before it finishes: the Python thread does not wait."""
    import time
    import ember.cuda as ec
    a = gpu(np.ones((4096, 4096), np.float32))
    (a @ a).sum().item()                     # warm-up (compile, cuBLAS handles)
    ec.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        b = a @ a
    queued = time.perf_counter() - t0
    ec.synchronize()
    total = time.perf_counter() - t0
    assert queued < total                    # not a timing target: only that it ran ahead
    del b


@real_gpu
def test_memory_statistics():
    import ember.cuda as ec
    ec.synchronize()
    before = ec.memory_allocated()
    x = ember.empty((1 << 20,), dtype=ember.float32, device="cuda")
    assert ec.memory_allocated() >= before + 4 * (1 << 20)
    assert ec.max_memory_allocated() >= ec.memory_allocated()
    assert ec.memory_reserved() >= ec.memory_allocated()
    del x
    assert ec.memory_allocated() <= before + 512    # freed at once (refcount), not by a GC pass
    ec.empty_cache()
    assert ec.memory_reserved() <= ec.max_memory_allocated() + (1 << 30)


@real_gpu
def test_device_properties_against_pytorch():
    import ember.cuda as ec
    torch = pytest.importorskip("torch")
    p = ec.get_device_properties(0)
    assert p.name == ec.get_device_name(0)
    assert ec.get_device_capability() == (p.major, p.minor) >= (3, 0)
    assert p.total_memory > (1 << 30) and p.multi_processor_count > 0
    assert "DeviceProperties(name=" in repr(p)
    free, total = ec.mem_get_info()
    assert 0 < free <= total and abs(total - p.total_memory) <= (64 << 20)
    assert ec.is_bf16_supported() == (p.major >= 8)
    if torch.cuda.is_available():
        t = torch.cuda.get_device_properties(0)
        assert (p.major, p.minor, p.total_memory, p.multi_processor_count) == \
            (t.major, t.minor, t.total_memory, t.multi_processor_count)
        assert ec.get_device_capability(0) == torch.cuda.get_device_capability(0)
    with pytest.raises(Exception):
        ec.get_device_properties(ec.device_count())        # no such device


@real_gpu
def test_manual_seed_reproducible():
    import ember.cuda as ec
    import ember.nn.functional as F
    x = ember.ones((64, 64), device="cuda")
    ec.manual_seed(123)
    a = F.dropout(x, p=0.5, training=True)
    b = F.dropout(x, p=0.5, training=True)
    ec.manual_seed(123)
    a2 = F.dropout(x, p=0.5, training=True)
    np.testing.assert_array_equal(host(a), host(a2))
    assert not np.array_equal(host(a), host(b))
    assert a.is_cuda


@real_gpu
def test_steady_state_does_not_allocate_from_the_driver():
    """After warm-up a loop of ops reuses the pool's blocks: CuPy's pool total
    (and ember's memory_reserved) stays constant, i.e. no cudaMalloc per op."""
    import ember.cuda as ec
    cp = cupy()
    pool = cp.get_default_memory_pool()
    rng = np.random.default_rng(0)
    x = gpu(rng.standard_normal((256, 512)).astype(np.float32))
    w = gpu(rng.standard_normal((512, 128)).astype(np.float32))

    def step():
        y = ember.tanh(x @ w) * 2 + 1
        s = ember.sum(y, axis=0)
        z = ember.maximum(y, 0)[:, ::2].mean()
        return s, z

    for _ in range(5):
        step()
    ec.synchronize()
    totals, reserved = [], []
    for _ in range(50):
        step()
        totals.append(pool.total_bytes())
        reserved.append(ec.memory_reserved())
    ec.synchronize()
    assert len(set(totals)) == 1, f"pool grew during the loop: {sorted(set(totals))}"
    assert len(set(reserved)) == 1, f"memory_reserved changed: {sorted(set(reserved))}"


# ----------------------------------------------------------------- linalg long tail
# (GPU implementations composed of other GPU ops; ember.cuda.ops_core)

_LINALG_CASES = [
    ("linalg.diagonal", lambda a, b: ember.linalg.diagonal(a, offset=1)),
    ("linalg.trace", lambda a, b: ember.linalg.trace(a)),
    ("linalg.outer", lambda a, b: ember.linalg.outer(a[0], b[1])),
    ("linalg.tensordot", lambda a, b: ember.linalg.tensordot(a, b.T, axes=1)),
    ("vecdot", lambda a, b: ember.vecdot(a, b)),
    ("linalg.vecdot", lambda a, b: ember.linalg.vecdot(a, b, axis=0)),
    ("linalg.multi_dot", lambda a, b: ember.linalg.multi_dot([a, b.T, a])),
    ("linalg.matrix_norm", lambda a, b: ember.linalg.matrix_norm(a)),
    ("linalg.matrix_norm_nuc", lambda a, b: ember.linalg.matrix_norm(a, ord="nuc")),
    ("linalg.svdvals", lambda a, b: ember.linalg.svdvals(a)),
    ("linalg.vector_norm", lambda a, b: ember.linalg.vector_norm(a, ord=3, axis=1)),
]


@pytest.mark.parametrize("name,fn", _LINALG_CASES, ids=[c[0] for c in _LINALG_CASES])
def test_linalg_long_tail(name, fn):
    a = random_array((4, 4), "float64")
    b = random_array((4, 4), "float64")
    check_like_cpu(fn, (ember.asarray(a), ember.asarray(b)), (gpu(a), gpu(b)), rtol=1e-10)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16", "int32"])
def test_spacing(dtype):
    a = np.concatenate([np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan]),
                        np.random.default_rng(0).standard_normal(50) * 10])
    if dtype == "int32":
        a = np.nan_to_num(a, posinf=5, neginf=-5)
    x = ember.asarray(a).astype(getattr(ember, dtype))
    assert_same(ember.spacing(gpu(x)), ember.spacing(x), rtol=0, atol=0)
