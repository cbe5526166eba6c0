"""bfloat16 dtype: casts, promotion, elementwise, reductions, matmul, nn, autograd.

Oracle: torch.bfloat16 (same round-to-nearest-even), bit-exact where torch
rounds the same way (casts, + - * /, neg, abs, max/min), loose tolerance for
transcendental ops, reductions and layers (float32 accumulation, one rounding).
"""
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

BF = ember.bfloat16
NPBF = np.dtype(ml_dtypes.bfloat16)
RTOL = ATOL = 2e-2


# ---------------------------------------------------------------- helpers
def bf_np(values):
    """NumPy ml_dtypes.bfloat16 array (rounded from float32)."""
    return np.asarray(values, dtype=np.float32).astype(NPBF)


def _f32(x):
    """float32 NumPy copy of an ember array."""
    return np.asarray(x.detach().astype(ember.float32))


def rand_bf(shape, seed=0, scale=1.0):
    return bf_np(np.random.default_rng(seed).standard_normal(shape) * scale)


def to_torch(a):
    """Torch tensor from a NumPy array (bfloat16 arrays keep their bits)."""
    a = np.array(a, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    if a.dtype == NPBF:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def bits_e(x):
    """uint16 bit patterns of an ember bfloat16 array."""
    assert x.dtype == BF, f"dtype {x.dtype} is not bfloat16"
    return np.array(np.asarray(x), order="C").view(np.uint16)


def bits_t(t):
    assert t.dtype == torch.bfloat16
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def assert_bits_equal(x, t, signed_zero=True):
    """ember bf16 result equals torch bf16 result bit for bit (any NaN == any NaN)."""
    got, exp = bits_e(x), bits_t(t)
    if not signed_zero:
        got, exp = np.where(got == 0x8000, 0, got), np.where(exp == 0x8000, 0, exp)
    assert got.shape == exp.shape, f"shape {got.shape} != {exp.shape}"
    nan_g = np.isnan(got.view(NPBF).astype(np.float32))
    nan_e = np.isnan(exp.view(NPBF).astype(np.float32))
    np.testing.assert_array_equal(nan_g, nan_e)
    np.testing.assert_array_equal(got[~nan_e], exp[~nan_e])


def assert_close(x, t, rtol=RTOL, atol=ATOL, dtype=BF):
    assert x.dtype == dtype, f"dtype {x.dtype} != {dtype}"
    g = np.asarray(x.astype(ember.float32)) if dtype == BF else np.asarray(x)
    e = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
    assert g.shape == e.shape, f"shape {g.shape} != {e.shape}"
    np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)


# float32 bit patterns -> expected bf16 bits (round to nearest, ties to even)
F32_BITS = np.array([
    0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0xBF818000,  # ties even/odd, +-1 ulp
    0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF,  # near bf16 max: stays / overflows to inf
    0x00000001, 0x00008000, 0x00018000, 0x0001FFFF, 0x007FFFFF,  # subnormals
    0x80000000, 0x00000000, 0x7F800000, 0xFF800000,  # -0, +0, inf, -inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF,  # quiet/signalling NaNs
    0x3F800000, 0x40490FDB, 0xC2F6E979,  # 1, pi, -123.456
], dtype=np.uint32)
F32_EXPECTED = np.array([
    0x3F80, 0x3F82, 0x3F81, 0x3F80, 0xBF82, 0x7F7F, 0x7F80, 0x7F80, 0xFF80,
    0x0000, 0x0000, 0x0002, 0x0002, 0x0080, 0x8000, 0x0000, 0x7F80, 0xFF80,
], dtype=np.uint16)


# ---------------------------------------------------------------- 1. casts
def test_cast_float32_bits_round_to_nearest_even():
    f = F32_BITS.view(np.float32)
    y = ember.asarray(f).astype(BF)
    assert_bits_equal(y, torch.from_numpy(f.copy()).to(torch.bfloat16))
    got = bits_e(y)
    np.testing.assert_array_equal(got[:len(F32_EXPECTED)], F32_EXPECTED)
    assert np.isnan(np.asarray(y.astype(ember.float32))[18:22]).all()
    assert got[14] == 0x8000  # -0.0 keeps its sign


def test_cast_float64_to_bfloat16():
    with np.errstate(invalid="ignore"):  # signalling NaN
        f64 = F32_BITS.view(np.float32).astype(np.float64)
    # + huge/tiny, and 1 + 2**-8 + 2**-30 (torch and ml_dtypes round via float32: -> 1.0)
    vals = np.concatenate([f64, [1e300, -1e300, 1e-300, -1e-300, 3.0e38, 3.5e38,
                                 1 + 2.0**-8 + 2.0**-30, -(1 + 2.0**-8 + 2.0**-30)]])
    y = ember.asarray(vals).astype(BF)
    assert_bits_equal(y, torch.from_numpy(vals).to(torch.bfloat16))
    ok = ~np.isnan(vals)  # NaN payloads may differ
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(bits_e(y)[ok], vals.astype(NPBF).view(np.uint16)[ok])


@pytest.mark.parametrize("src", ["float16", "int8", "int32", "bool"])
def test_cast_to_bfloat16(src):
    rng = np.random.default_rng(1)
    if src == "float16":
        a = np.array([0.0, -0.0, 1.0, 1.00097656, 1.0029297, 65504.0, 6e-8, -6.1e-5,
                      np.inf, -np.inf, np.nan], np.float16)
        a = np.concatenate([a, rng.standard_normal(50).astype(np.float16)])
    elif src == "int8":
        a = np.arange(-128, 128, dtype=np.int8)
    elif src == "int32":
        a = np.array([0, 1, -1, 255, 256, 257, 258, 259, 511, 513, 1025, -65535, 2**24 - 1,
                      -(2**24) + 3, 123456], np.int32)
    else:
        a = np.array([True, False, True])
    y = ember.asarray(a).astype(BF)
    assert_bits_equal(y, torch.from_numpy(a.copy()).to(torch.bfloat16))


@pytest.mark.parametrize("dst", ["float32", "float64", "float16", "int8", "int32", "bool"])
def test_cast_from_bfloat16(dst):
    vals = [0.0, -0.0, 1.0, -1.5, 2.75, 100.5, -127.0, 126.9, 0.0039, 65504.0, 1e5, -3e38, 1e-40]
    if dst.startswith("float") or dst == "bool":
        vals += [np.inf, -np.inf, np.nan]
    if dst == "int8":
        vals = [v for v in vals if -128 < v < 128]
    a = bf_np(vals)
    got = np.asarray(ember.asarray(a).astype(getattr(ember, dst)))
    exp = to_torch(a).to(getattr(torch, dst)).numpy()
    assert got.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got, exp)
    if dst in ("float32", "float64"):  # widening is exact and round-trips
        back = ember.asarray(got).astype(BF)
        np.testing.assert_array_equal(bits_e(back), a.view(np.uint16))


def test_nan_round_trip():
    x = ember.asarray(np.array([np.nan, -np.nan, 1.0], np.float32)).astype(BF)
    assert np.isnan(np.asarray(x.astype(ember.float64))[:2]).all()
    assert np.isnan(np.asarray(x.astype(ember.float32).astype(BF).astype(ember.float32))[:2]).all()
    assert bool(ember.isnan(x)[0]) and not bool(ember.isnan(x)[2])


# ---------------------------------------------------------------- 2. promotion
PROMOTION = [("bool", "bfloat16"), ("int8", "bfloat16"), ("uint8", "bfloat16"),
             ("bfloat16", "bfloat16"), ("int16", "float32"), ("uint16", "float32"),
             ("float16", "float32"), ("float32", "float32"), ("int32", "float64"),
             ("int64", "float64"), ("uint32", "float64"), ("uint64", "float64"),
             ("float64", "float64"), ("complex64", "complex64")]


@pytest.mark.parametrize("other,expected", PROMOTION)
def test_promotion_table(other, expected):
    o, exp = getattr(ember, other), np.dtype(getattr(ember, expected))
    assert ember.result_type(BF, o) == exp
    assert ember.result_type(o, BF) == exp
    a = ember.ones((2,), dtype=BF)
    b = ember.ones((2,), dtype=o)
    for r in (a + b, b * a, ember.maximum(a, b)):
        assert r.dtype == exp
    np.testing.assert_array_equal(np.asarray((a + b).astype(ember.float64)), [2.0, 2.0])


@pytest.mark.parametrize("scalar", [2.5, 2, True, -0.1])
def test_weak_python_scalars(scalar):
    a = ember.asarray(bf_np([1.0, 3.0, -7.5]))
    assert ember.result_type(BF, scalar) == NPBF
    ta = to_torch(np.asarray(a))
    ts = torch.full_like(ta, float(scalar))  # scalar rounded to bf16, tensor-tensor op
    # (torch's own `scalar / t` is reciprocal-then-multiply: double rounding)
    for got, exp in [(a * scalar, ta * ts), (scalar + a, ts + ta),
                     (a - scalar, ta - ts), (scalar / a, ts / ta)]:
        assert_bits_equal(got, exp)


# ---------------------------------------------------------------- 3. elementwise
BINARY = {"add": (ember.add, torch.add), "subtract": (ember.subtract, torch.sub),
          "multiply": (ember.multiply, torch.mul), "divide": (ember.divide, torch.div),
          "maximum": (ember.maximum, torch.maximum), "minimum": (ember.minimum, torch.minimum)}
UNARY_EXACT = {"negative": (ember.negative, torch.neg), "abs": (ember.abs, torch.abs)}
UNARY_APPROX = {"exp": (ember.exp, torch.exp), "log": (lambda x: ember.log(ember.abs(x)),
                                                       lambda t: torch.log(torch.abs(t))),
                "sqrt": (lambda x: ember.sqrt(ember.abs(x)), lambda t: torch.sqrt(torch.abs(t))),
                "tanh": (ember.tanh, torch.tanh), "sin": (ember.sin, torch.sin)}
SHAPE_PAIRS = [((), ()), ((0,), (0,)), ((5,), ()), ((3, 4), (4,)), ((3, 1), (1, 4)),
               ((2, 0, 3), (3,)), ((2, 3, 4), (2, 3, 4))]
VIEWS = {"T": lambda a: a.T, "step": lambda a: a[:, ::2], "neg": lambda a: a[::-1],
         "neg_step": lambda a: a[::-2, 1:], "neg_T": lambda a: a[:, ::-1].T}


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_binary_shapes(name, shapes):
    fe, ft = BINARY[name]
    a, b = rand_bf(shapes[0], 1, 4), rand_bf(shapes[1], 2, 4)
    assert_bits_equal(fe(ember.asarray(a), ember.asarray(b)), ft(to_torch(a), to_torch(b)))


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("view", list(VIEWS))
def test_binary_views(name, view):
    fe, ft = BINARY[name]
    v = VIEWS[view]
    a, b = rand_bf((6, 8), 3, 4), rand_bf((6, 8), 4, 4)
    ea, eb = ember.asarray(a), ember.asarray(b)
    got = fe(v(ea), v(eb))
    assert_bits_equal(got, ft(to_torch(v(a)), to_torch(v(b))))
    # mixed: view with contiguous copy
    assert_bits_equal(fe(v(ea), ember.asarray(np.ascontiguousarray(v(b)))),
                      ft(to_torch(v(a)), to_torch(v(b))))


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_special_values(name):
    fe, ft = BINARY[name]
    sp = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.0e38, 1e-40, 7.0]
    a = bf_np(np.repeat(sp, len(sp)))
    b = bf_np(np.tile(sp, len(sp)))
    # maximum(0, -0) may be either zero (IEEE leaves it open; NumPy and torch differ)
    assert_bits_equal(fe(ember.asarray(a), ember.asarray(b)), ft(to_torch(a), to_torch(b)),
                      signed_zero=name not in ("maximum", "minimum"))


@pytest.mark.parametrize("name", list(UNARY_EXACT) + list(UNARY_APPROX))
@pytest.mark.parametrize("view", ["0d", "empty", "contig"] + list(VIEWS))
def test_unary(name, view):
    a = {"0d": rand_bf((), 5), "empty": rand_bf((0, 3), 5)}.get(view, rand_bf((6, 8), 5, 2))
    ea = ember.asarray(a)
    if view in VIEWS:
        ea, a = VIEWS[view](ea), VIEWS[view](a)
    if name in UNARY_EXACT:
        fe, ft = UNARY_EXACT[name]
        assert_bits_equal(fe(ea), ft(to_torch(a)))
    else:
        fe, ft = UNARY_APPROX[name]
        assert_close(fe(ea), ft(to_torch(a)), rtol=1e-2, atol=1e-2)


def test_unary_exact_special_values():
    a = bf_np([0.0, -0.0, np.inf, -np.inf, np.nan, -3.0e38, 1e-40, -1e-40])
    for fe, ft in UNARY_EXACT.values():
        assert_bits_equal(fe(ember.asarray(a)), ft(to_torch(a)))


# ---------------------------------------------------------------- 4. reductions
def _t(fn, **kw):  # torch reduction with NumPy's axis=None meaning "all"
    return lambda t, ax: fn(t, **kw) if ax is None else fn(t, dim=ax, **kw)


REDUCTIONS = {
    "sum": (lambda x, ax: x.sum(axis=ax), _t(torch.sum)),
    "mean": (lambda x, ax: x.mean(axis=ax), _t(torch.mean)),
    "max": (lambda x, ax: x.max(axis=ax), _t(torch.amax)),
    "min": (lambda x, ax: x.min(axis=ax), _t(torch.amin)),
    "prod": (lambda x, ax: ember.prod(x, axis=ax), _t(torch.prod)),
    "var": (lambda x, ax: x.var(axis=ax), _t(torch.var, unbiased=False)),
    "cumsum": (lambda x, ax: ember.cumsum(x, axis=ax),
               lambda t, ax: torch.cumsum(t.flatten() if ax is None else t, 0 if ax is None else ax)),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("layout", ["contig", "T"])
def test_reductions(name, axis, layout):
    a = rand_bf((4, 6, 5), 7, 0.5)
    if name == "prod":
        a = bf_np(1.0 + a.astype(np.float32) * 0.2)
    ea = ember.asarray(a)
    if layout == "T":
        ea, a = ea.transpose(2, 0, 1), a.transpose(2, 0, 1)
    fe, ft = REDUCTIONS[name]
    got, exp = fe(ea, axis), ft(to_torch(a), axis)
    if name in ("max", "min"):
        assert_bits_equal(got, exp)
    else:  # float32 accumulation, rounded once: at most a couple of bf16 ulps
        assert_close(got, exp, rtol=1e-2, atol=2e-2 if name == "cumsum" else 1e-2)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_argmax_argmin(axis):
    a = rand_bf((5, 7), 8)
    ea = ember.asarray(a)[::-1]
    f = a[::-1].astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ember.argmax(ea, axis=axis)), np.argmax(f, axis=axis))
    np.testing.assert_array_equal(np.asarray(ember.argmin(ea, axis=axis)), np.argmin(f, axis=axis))


def test_sum_accumulates_in_float32():
    # 1 + 1000 * 2**-9: bf16 accumulation would stall at 1.0; float32 gives ~2.95
    a = bf_np(np.concatenate([[1.0], np.full(1000, 2.0**-9)]))
    s = ember.asarray(a).sum()
    assert s.dtype == BF
    assert_bits_equal(s, torch.tensor(1.0 + 1000 * 2.0**-9).to(torch.bfloat16))


# ---------------------------------------------------------------- 5. matmul / einsum
@pytest.mark.parametrize("sa,sb", [((4, 5), (5, 3)), ((2, 4, 5), (2, 5, 3)),
                                   ((2, 1, 4, 5), (3, 5, 6)), ((5,), (5, 3)), ((4, 5), (5,)),
                                   ((0, 5), (5, 3))], ids=str)
def test_matmul(sa, sb):
    a, b = rand_bf(sa, 9), rand_bf(sb, 10)
    got = ember.matmul(ember.asarray(a), ember.asarray(b))
    assert_close(got, torch.matmul(to_torch(a), to_torch(b)), rtol=2e-2, atol=3e-2)
    assert_close(ember.asarray(a) @ ember.asarray(b), torch.matmul(to_torch(a), to_torch(b)),
                 rtol=2e-2, atol=3e-2)


def test_matmul_transposed_operands():
    a, b = rand_bf((5, 4), 11), rand_bf((3, 5), 12)
    got = ember.asarray(a).T @ ember.asarray(b).T
    assert_close(got, to_torch(a).T @ to_torch(b).T, rtol=2e-2, atol=3e-2)


@pytest.mark.parametrize("spec,shapes", [("ij,jk->ik", [(4, 5), (5, 3)]),
                                         ("bij,bjk->bik", [(2, 4, 5), (2, 5, 3)]),
                                         ("ij,ij->i", [(4, 5), (4, 5)]), ("ii->", [(5, 5)]),
                                         ("ij->ji", [(3, 4)])])
def test_einsum(spec, shapes):
    arrs = [rand_bf(s, 13 + i) for i, s in enumerate(shapes)]
    got = ember.einsum(spec, *[ember.asarray(a) for a in arrs])
    assert_close(got, torch.einsum(spec, *[to_torch(a) for a in arrs]), rtol=2e-2, atol=3e-2)


# ---------------------------------------------------------------- 6. nn.functional
X2, W2, B1 = rand_bf((6, 5), 20), rand_bf((3, 5), 21), rand_bf((3,), 22)
X4, W4 = rand_bf((2, 3, 8, 8), 23), rand_bf((4, 3, 3, 3), 24)
TGT = np.array([0, 2, 1, 2, 0, 1])
E, T = ember.asarray, to_torch
NN = {
    "linear": (lambda: F.linear(E(X2), E(W2), E(B1)), lambda: TF.linear(T(X2), T(W2), T(B1))),
    "relu": (lambda: F.relu(E(X2)), lambda: TF.relu(T(X2))),
    "gelu": (lambda: F.gelu(E(X2)), lambda: TF.gelu(T(X2))),
    "softmax": (lambda: F.softmax(E(X2), dim=1), lambda: TF.softmax(T(X2), dim=1)),
    "softmax0": (lambda: F.softmax(E(X2), dim=0), lambda: TF.softmax(T(X2), dim=0)),
    "log_softmax": (lambda: F.log_softmax(E(X2), dim=-1), lambda: TF.log_softmax(T(X2), dim=-1)),
    "cross_entropy": (lambda: F.cross_entropy(E(X2[:, :3]), E(TGT)),
                      lambda: TF.cross_entropy(T(X2[:, :3]), torch.from_numpy(TGT))),
    "layer_norm": (lambda: F.layer_norm(E(X2), (5,), E(X2[0]), E(X2[1])),
                   lambda: TF.layer_norm(T(X2), (5,), T(X2[0]), T(X2[1]))),
    "conv2d": (lambda: F.conv2d(E(X4), E(W4), E(B1[:1].repeat(4)), stride=2, padding=1),
               lambda: TF.conv2d(T(X4), T(W4), T(B1[:1].repeat(4)), stride=2, padding=1)),
    "max_pool2d": (lambda: F.max_pool2d(E(X4), 3, stride=2, padding=1),
                   lambda: TF.max_pool2d(T(X4), 3, stride=2, padding=1)),
    "avg_pool2d": (lambda: F.avg_pool2d(E(X4), 2), lambda: TF.avg_pool2d(T(X4), 2)),
    "embedding": (lambda: F.embedding(E(TGT), E(X2)), lambda: TF.embedding(torch.from_numpy(TGT), T(X2))),
}


@pytest.mark.parametrize("name", list(NN))
def test_nn_functional(name):
    fe, ft = NN[name]
    got, exp = fe(), ft()
    if name in ("relu", "max_pool2d", "embedding"):
        assert_bits_equal(got, exp)
    else:
        assert_close(got, exp, rtol=2e-2, atol=4e-2 if name == "conv2d" else 2e-2)


# ---------------------------------------------------------------- 7. autograd
def test_mlp_gradients_match_torch():
    rng = np.random.default_rng(30)
    x, w1, b1 = rand_bf((8, 5), 31), rand_bf((16, 5), 32, 0.5), rand_bf((16,), 33, 0.1)
    w2, b2 = rand_bf((3, 16), 34, 0.5), rand_bf((3,), 35, 0.1)
    tgt = rng.integers(0, 3, 8)
    ep = [ember.asarray(a.copy()) for a in (x, w1, b1, w2, b2)]
    for p in ep:
        p.requires_grad_(True)
    tp = [to_torch(a).requires_grad_() for a in (x, w1, b1, w2, b2)]
    le = F.cross_entropy(F.linear(F.relu(F.linear(ep[0], ep[1], ep[2])), ep[3], ep[4]),
                         ember.asarray(tgt))
    lt = TF.cross_entropy(TF.linear(TF.relu(TF.linear(tp[0], tp[1], tp[2])), tp[3], tp[4]),
                          torch.from_numpy(tgt))
    assert_close(le, lt.detach(), rtol=2e-2, atol=2e-2)
    le.backward()
    lt.backward()
    for pe, pt in zip(ep, tp):
        assert pe.grad is not None and pe.grad.dtype == BF
        assert_close(pe.grad, pt.grad, rtol=5e-2, atol=1e-2)


def test_grad_through_astype_float32_is_bfloat16():
    a = bf_np([1.0, -2.5, 0.3, 4.0])
    c = np.array([0.1, 3.0, -1.7, 2.0], np.float32)
    x = ember.asarray(a.copy())
    x.requires_grad_(True)
    y = x.astype(ember.float32)
    assert y.dtype == np.float32
    (y * ember.asarray(c)).sum().backward()
    assert x.grad.dtype == BF
    np.testing.assert_array_equal(bits_e(x.grad), c.astype(NPBF).view(np.uint16))


GRADS = {
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(2, 4, 5), (5, 3)]),
    "einsum": (lambda a, b: ember.einsum("ij,kj->ik", a, b),
               lambda a, b: torch.einsum("ij,kj->ik", a, b), [(6, 5), (3, 5)]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1, stride=2),
               lambda x, w: TF.conv2d(x, w, padding=1, stride=2), [(2, 3, 8, 8), (4, 3, 3, 3)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (5,), w, b),
                   lambda x, w, b: TF.layer_norm(x, (5,), w, b), [(6, 5), (5,), (5,)]),
    "log_softmax": (lambda x: F.log_softmax(x, dim=1), lambda x: TF.log_softmax(x, dim=1), [(6, 5)]),
    "gelu_tanh": (lambda x: ember.tanh(F.gelu(x)), lambda x: torch.tanh(TF.gelu(x)), [(6, 5)]),
    "pools": (lambda x: F.max_pool2d(x, 2) + F.avg_pool2d(x, 2),
              lambda x: TF.max_pool2d(x, 2) + TF.avg_pool2d(x, 2), [(2, 3, 8, 8)]),
    "reductions": (lambda a: a.sum(axis=0) + a.var(axis=0) + a.max(axis=0) + ember.cumsum(a, axis=1)[-1],
                   lambda a: a.sum(0) + a.var(0, unbiased=False) + a.amax(0) + torch.cumsum(a, 1)[-1],
                   [(6, 5)]),
    "broadcast_reuse_view": (lambda a, b: a[::-1] * a / (b + 3.0) + a.T.sum(axis=1),
                             lambda a, b: a.flip(0) * a / (b + 3.0) + a.T.sum(1), [(6, 5), (5,)]),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_grads_match_torch(name):
    fe, ft, shapes = GRADS[name]
    arrs = [rand_bf(s, 60 + i) for i, s in enumerate(shapes)]
    ep = [ember.asarray(a.copy()) for a in arrs]
    for p in ep:
        p.requires_grad_(True)
    tp = [to_torch(a).requires_grad_() for a in arrs]
    oe, ot = fe(*ep), ft(*tp)
    assert oe.dtype == BF
    w = rand_bf(tuple(ot.shape), 99)
    (oe * ember.asarray(w)).sum().backward()
    (ot * to_torch(w)).sum().backward()
    for pe, pt in zip(ep, tp):
        assert pe.grad is not None and pe.grad.shape == pe.shape
        assert_close(pe.grad, pt.grad, rtol=5e-2, atol=5e-2)


# ---------------------------------------------------------------- 8. NumPy interop
def test_numpy_interop():
    a = bf_np([1.5, -2.25, 3.0, 1.00390625])
    x = ember.asarray(a)
    assert x.dtype == BF and BF is ml_dtypes.bfloat16
    assert np.asarray(x).dtype == NPBF
    np.testing.assert_array_equal(np.asarray(x).view(np.uint16), a.view(np.uint16))
    assert ember.asarray(a[::-1]).tolist() == [1.0, 3.0, -2.25, 1.5]  # 1.0039 rounds to 1.0
    assert x.tolist() == [1.5, -2.25, 3.0, 1.0]
    assert x[1].item() == -2.25 and isinstance(x[1].item(), float)
    assert float(x[2]) == 3.0
    assert ember.asarray([1, 2], dtype=BF).dtype == BF
    assert ember.zeros((2, 3), dtype="bfloat16").dtype == BF


def test_dtype_introspection():
    fi = ember.finfo(BF)
    assert fi.eps == 2.0**-7
    assert float(fi.max) == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert float(fi.tiny) == 2.0**-126
    assert ember.issubdtype(BF, ember.floating)
    assert ember.isdtype(BF, "real floating")
    assert not ember.isdtype(BF, "integral")
    assert ember.can_cast(BF, ember.float32)


# ---------------------------------------------------------------- 9. Module.bfloat16
def test_module_bfloat16():
    m = ember.nn.Sequential(ember.nn.Linear(5, 4), ember.nn.ReLU(), ember.nn.LayerNorm(4))
    before = [np.asarray(p).copy() for p in m.parameters()]
    assert m.bfloat16() is m
    params = list(m.parameters())
    assert len(params) == 4
    for p, b in zip(params, before):
        assert p.dtype == BF
        np.testing.assert_array_equal(bits_e(p), b.astype(NPBF).view(np.uint16))
    y = m(ember.asarray(rand_bf((3, 5), 50)))
    assert y.dtype == BF and y.shape == (3, 4)
    y.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == BF for p in m.parameters())


def test_module_bfloat16_buffers():
    m = ember.nn.BatchNorm1d(4).bfloat16()
    bufs = dict(m.named_buffers())
    assert bufs["running_mean"].dtype == BF and bufs["running_var"].dtype == BF
    assert bufs["num_batches_tracked"].dtype == np.int64  # integer buffers untouched
    assert m.weight.dtype == BF


# ---------------------------------------------------------------- exchange and printing

def test_dlpack_with_torch_is_zero_copy_both_ways():
    x = ember.asarray([1.5, -2.25, 3.0, 7.0]).astype(ember.bfloat16)
    t = torch.from_dlpack(x)
    assert t.dtype == torch.bfloat16 and t.tolist() == [1.5, -2.25, 3.0, 7.0]
    t[0] = 9.0                                  # the same memory
    assert x[0].item() == 9.0
    tv = torch.from_dlpack(x.reshape(2, 2).T)   # a transposed view keeps its strides
    assert tv.tolist() == [[9.0, 3.0], [-2.25, 7.0]]
    src = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3).T * 0.5
    y = ember.from_dlpack(src)
    assert y.dtype == ember.bfloat16 and y.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(y.astype(ember.float32)), src.float().numpy())
    src[0, 0] = 4.0
    assert y[0, 0].item() == 4.0
    z = ember.from_dlpack(torch.ones(3, dtype=torch.bfloat16).__dlpack__())   # a bare capsule
    assert z.dtype == ember.bfloat16 and z.tolist() == [1.0, 1.0, 1.0]
    c = ember.from_dlpack(src, copy=True)
    src[0, 0] = 5.0
    assert c[0, 0].item() == 4.0


def test_repr_prints_bfloat16_values_as_floats():
    x = ember.asarray([1.5, -2.25, 3.0]).astype(ember.bfloat16)
    assert repr(x) == "array([ 1.5 , -2.25,  3.  ], dtype=bfloat16)"
    assert str(x) == "[ 1.5  -2.25  3.  ]"
    assert repr(x[2]) == "array(3., dtype=bfloat16)"
    assert repr(ember.zeros((2, 0), dtype=ember.bfloat16)) == \
        "array([], shape=(2, 0), dtype=bfloat16)"


def test_save_load_bfloat16_is_readable_by_safetensors(tmp_path):
    st_torch = pytest.importorskip("safetensors.torch")
    x = (ember.arange(6.0).reshape(2, 3) / 3).astype(ember.bfloat16)
    path = str(tmp_path / "bf16.safetensors")
    ember.save({"x": x, "s": ember.asarray(2.5).astype(ember.bfloat16)}, path)
    back = ember.load(path)
    assert back["x"].dtype == ember.bfloat16 and back["s"].shape == ()
    np.testing.assert_array_equal(np.asarray(back["x"].astype(ember.float32)),
                                  np.asarray(x.astype(ember.float32)))
    t = st_torch.load_file(path)["x"]
    assert t.dtype == torch.bfloat16
    np.testing.assert_array_equal(t.float().numpy(), np.asarray(x.astype(ember.float32)))


def test_asarray_of_a_torch_bfloat16_tensor_shares_memory():
    t = torch.arange(4, dtype=torch.bfloat16) / 4
    x = ember.asarray(t)
    assert x.dtype == ember.bfloat16 and x.tolist() == [0.0, 0.25, 0.5, 0.75]
    t[0] = 2.0
    assert x[0].item() == 2.0


def test_batchnorm_module_in_bfloat16_matches_torch():
    rng = np.random.default_rng(7)
    xv = (rng.standard_normal((6, 3, 4)) * 2 + 1).astype(np.float32)
    em = ember.nn.BatchNorm1d(3).bfloat16()
    tm = torch.nn.BatchNorm1d(3).bfloat16()
    for _ in range(2):
        y = em(ember.asarray(xv).astype(ember.bfloat16))
        ty = tm(torch.tensor(xv).bfloat16())
    assert y.dtype == ember.bfloat16 and em.running_mean.dtype == ember.bfloat16
    np.testing.assert_allclose(_f32(y), ty.detach().float().numpy(), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(_f32(em.running_mean), tm.running_mean.float().numpy(),
                               rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(_f32(em.running_var), tm.running_var.float().numpy(),
                               rtol=1e-2, atol=1e-2)
    em.eval(), tm.eval()
    np.testing.assert_allclose(_f32(em(ember.asarray(xv).astype(ember.bfloat16))),
                               tm(torch.tensor(xv).bfloat16()).detach().float().numpy(),
                               rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_recurrent_modules_in_bfloat16_match_torch(mode):
    rng = np.random.default_rng(8)
    em = getattr(ember.nn, mode)(4, 5, num_layers=2)
    tm = getattr(torch.nn, mode)(4, 5, num_layers=2)
    tm.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in em.state_dict().items()})
    em, tm = em.bfloat16(), tm.bfloat16()
    xv = rng.standard_normal((3, 2, 4)).astype(np.float32)
    out, _ = em(ember.asarray(xv).astype(ember.bfloat16))
    tout, _ = tm(torch.tensor(xv).bfloat16())
    assert out.dtype == ember.bfloat16
    np.testing.assert_allclose(_f32(out), tout.detach().float().numpy(), rtol=5e-2, atol=3e-2)


def test_numpy_long_tail_statistics_compute_in_float32():
    x = ember.full((4096,), 1.0, dtype=ember.bfloat16)
    assert ember.nansum(x).dtype == ember.bfloat16
    assert ember.nansum(x).item() == 4096.0      # a bfloat16 accumulator stops at 256
    q = ember.quantile(ember.asarray([1.0, 2.0, 3.0, 4.0]).astype(ember.bfloat16), 0.5)
    assert q.dtype == ember.bfloat16 and q.item() == 2.5


def test_pytorch_dtype_shorthands():
    x = ember.asarray([1.5, -2.25], dtype=ember.float32)
    x.requires_grad_(True)
    y = x.bfloat16()
    assert y.dtype == ember.bfloat16 and y.half().dtype == ember.float16
    assert y.float().dtype == ember.float32 and y.double().dtype == ember.float64
    assert y.is_floating_point() and not ember.arange(2).is_floating_point()
    assert not y.is_complex() and (ember.ones(1) * 1j).is_complex()
    (y.float() * 3).sum().backward()            # astype is differentiable
    assert x.grad.tolist() == [3.0, 3.0]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gelu_tanh_16bit_is_computed_in_float32(dtype):
    """Every step in 16 bits rounds tanh to -1 early and gives 0 below x of about -3;
    PyTorch (and ember) compute in float32 and round once.  Gradient too."""
    x = np.linspace(-8, 3, 221).astype(np.float32)
    e = ember.asarray(x).astype(getattr(ember, dtype)).requires_grad_()
    t = torch.from_numpy(x).to(getattr(torch, dtype)).requires_grad_()
    ye, yt = F.gelu(e, approximate="tanh"), TF.gelu(t, approximate="tanh")
    np.testing.assert_allclose(ye.astype(ember.float32).numpy(), yt.float().detach().numpy(),
                               rtol=1e-2, atol=2e-6)
    ye.astype(ember.float32).sum().backward()
    yt.float().sum().backward()
    np.testing.assert_allclose(e.grad.astype(ember.float32).numpy(), t.grad.float().numpy(),
                               rtol=1e-2, atol=2e-6)
