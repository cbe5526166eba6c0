"""PyTorch idioms against PyTorch 2.13: the top-level names, the Tensor methods and
the clash rule (README "For PyTorch users").  Each idiom runs in ember and in
torch on the same values and the results (values, dtypes, gradients) must agree."""
import copy
import json
import pickle

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_TORCH_DTYPE = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
                "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
                "complex64": torch.complex64, "bfloat16": torch.bfloat16}


def both(a):
    """An ember array and a torch tensor holding NumPy array a's values (separate memory)."""
    a = np.asarray(a)
    return ember.asarray(a.copy()), torch.from_numpy(a.copy())


def same(e, t, rtol=1e-6, atol=1e-6):
    """ember result e equals torch result t: type of container, dtype, shape, values."""
    if isinstance(t, tuple):
        assert isinstance(e, tuple) and len(e) == len(t), (type(e), type(t))
        if hasattr(t, "_fields") or type(t).__module__ == "torch.return_types":
            assert e.values is e[0] and e.indices is e[1]
        for a, b in zip(e, t):
            same(a, b, rtol, atol)
        return
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.ndarray), type(e)
        assert _TORCH_DTYPE[str(e.dtype)] == t.dtype, (e.dtype, t.dtype)
        assert e.shape == tuple(t.shape), (e.shape, tuple(t.shape))
        tv = t.detach()
        tv = tv.float() if tv.dtype == torch.bfloat16 else tv
        ev = np.asarray(e.astype(ember.float32) if str(e.dtype) == "bfloat16" else e)
        np.testing.assert_allclose(ev, tv.numpy(), rtol=rtol, atol=atol)
        return
    assert e == t, (e, t)


RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4, 5)).astype(np.float32)
I3 = np.array([[0, 2, 1, 0], [2, 2, 0, 1], [1, 0, 0, 2]])


# ---------------------------------------------------------------- x.size

def test_size_is_numpys_int_and_pytorchs_method():
    x, t = both(np.zeros((2, 3, 4), np.float32))
    assert x.size == 24 == t.numel() and isinstance(x.size, int)
    assert x.size() == tuple(t.size()) and isinstance(x.size(), tuple)
    for d in (0, 1, 2, -1, -3):
        assert x.size(d) == t.size(d)
    assert x.size(dim=1) == t.size(dim=1)
    for d in (3, -4):
        with pytest.raises(IndexError):
            t.size(d)
        with pytest.raises(IndexError, match="out of range"):
            x.size(d)
    with pytest.raises(TypeError, match="dim must be an int"):
        x.size(1.5)


def test_size_behaves_as_an_int():
    x = ember.zeros((2, 3))
    s = x.size
    assert s + 1 == 7 and s * 2 == 12 and s // 4 == 1 and -s == -6 and s > 5 and s == 6.0
    assert hash(s) == hash(6) and {s: "a"}[6] == "a"
    assert list(range(s)) == list(range(6))
    assert f"{s:>3}|{s:x}" == "  6|6" and str(s) == repr(s) == "6"
    assert json.dumps({"n": s}) == '{"n": 6}'
    assert np.zeros(s).shape == (6,) and np.arange(12)[s] == 6 and np.int64(s) == 6
    assert [0] * s == [0] * 6 and bool(s)
    for restored in (pickle.loads(pickle.dumps(s)), copy.copy(s), copy.deepcopy(s)):
        assert restored == 6 and type(restored) is int
    assert ember.zeros((0, 3)).size == 0 and not ember.zeros((0, 3)).size
    # 0-d: the shape is (), no dimension can be asked for (as in PyTorch)
    z, tz = both(np.float32(1.0))
    assert z.size == 1 and z.size() == tuple(tz.size()) == ()
    with pytest.raises(IndexError):
        tz.size(0)
    with pytest.raises(IndexError):
        z.size(0)


def test_size_follows_views_and_reshapes():
    x = ember.arange(24).reshape(2, 3, 4)
    assert x.size() == (2, 3, 4)
    assert x[:, 1:].size() == (2, 2, 4) and x.T.size(0) == 4 and x.reshape(6, 4).size(0) == 6
    assert x[::-1, :, ::2].size == 12 and ember.asarray(np.ones((5, 2))[::2]).size() == (3, 2)


# ---------------------------------------------------------------- devices

def test_device_equality_and_hash_agree():
    D = ember.device
    pairs_equal = [(D("cpu"), D("cpu")), (D("cpu"), "cpu"), (D("cuda", 0), D("cuda:0")),
                   (D("cuda", 1), "cuda:1"), (D("cuda"), "cuda"), (D(0), D("cuda:0"))]
    for a, b in pairs_equal:
        assert a == b and hash(a) == hash(b), (a, b)
    for a, b in [(D("cuda"), D("cuda", 0)), (D("cuda", 0), "cuda"), (D("cpu"), "cuda"),
                 (D("cuda", 0), D("cuda", 1))]:
        assert a != b, (a, b)
    # PyTorch agrees where both compare devices
    assert (torch.device("cuda") == torch.device("cuda", 0)) == (D("cuda") == D("cuda", 0))
    assert len({D("cpu"), D("cpu"), "cpu"}) == 1
    assert isinstance(D("cpu"), ember.device) and ember.device is ember.Device
    assert pickle.loads(pickle.dumps(D("cuda", 1))) == "cuda:1"
    assert repr(D("cuda", 1)) == repr(torch.device("cuda", 1))


def test_device_context_sets_the_default_device():
    with ember.device("cpu") as d:
        assert d == "cpu" and ember.zeros(2).device == "cpu"
    assert ember.get_default_device() == "cpu"


# ---------------------------------------------------------------- creation: varargs shapes

@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_shape_varargs(name):
    e, t = getattr(ember, name), getattr(torch, name)
    for args in [(3, 4), (2, 3, 4), (5,), ((3, 4),), ([2, 2],)]:
        x, y = e(*args), t(*args)
        assert x.shape == tuple(y.shape) and x.dtype == ember.float32
        if name != "empty":
            same(x, y)
    x = e(2, 3, dtype=ember.int32)
    assert x.shape == (2, 3) and x.dtype == ember.int32
    assert e(size=(2, 3)).shape == tuple(t(size=(2, 3)).shape)
    # NumPy's positional dtype keeps working: a second positional that is not an int
    for dt in (np.float64, "int16", ember.int8, np.dtype("uint8")):
        x, n = e((3, 2), dt), getattr(np, name)((3, 2), dt)
        assert x.dtype == n.dtype and x.shape == n.shape
        assert e(4, dt).dtype == np.dtype(dt)
    if name != "empty":
        np.testing.assert_array_equal(np.asarray(e(3, 4)), getattr(np, name)((3, 4), np.float32))
    with pytest.raises(TypeError, match="shape twice"):
        e(3, size=(3,))


def test_full_keeps_its_value_argument():
    same(ember.full((3, 4), 1.5), torch.full((3, 4), 1.5))
    same(ember.full((2,), 7), torch.full((2,), 7))
    np.testing.assert_array_equal(np.asarray(ember.full(3, 4)), np.full(3, 4))   # NumPy's
    same(ember.full(size=(2, 2), fill_value=True), torch.full(size=(2, 2), fill_value=True))


def test_new_creation_methods():
    x, t = both(A.astype(np.float64))
    for name, args in [("new_zeros", (2, 3)), ("new_ones", ((2, 3),)), ("new_empty", (4,))]:
        r, s = getattr(x, name)(*args), getattr(t, name)(*args)
        assert r.shape == tuple(s.shape) and r.dtype == ember.float64
        if name != "new_empty":
            same(r, s)
    same(x.new_full((2, 2), 3), t.new_full((2, 2), 3))
    same(x.new_tensor([1, 2]), t.new_tensor([1, 2]))
    same(x.new_zeros(2, dtype=ember.int64), t.new_zeros(2, dtype=torch.int64))


def test_linspace_steps():
    same(ember.linspace(0, 1, steps=5), torch.linspace(0, 1, steps=5))


# ---------------------------------------------------------------- top-level names

def test_top_level_names_exist():
    names = ["manual_seed", "randn", "rand", "randn_like", "rand_like", "randint", "randint_like",
             "randperm", "from_numpy", "sigmoid", "softmax", "log_softmax", "relu", "tanh", "mm",
             "bmm", "addmm", "baddbmm", "device", "numel", "is_tensor", "tensor", "no_grad",
             "clamp", "chunk", "narrow", "gather", "scatter", "scatter_add", "index_select",
             "masked_fill", "masked_select", "unbind", "t", "swapdims", "movedim", "flatten",
             "unsqueeze", "squeeze", "permute", "cat", "stack", "topk", "sort", "argmax",
             "where", "norm", "cdist", "Size", "float", "int", "long", "double", "half",
             "bfloat16", "cfloat", "enable_grad", "set_grad_enabled", "inference_mode",
             "is_floating_point", "clone", "as_tensor", "normal", "bernoulli", "multinomial",
             "std_mean", "var_mean", "repeat_interleave", "broadcast_tensors", "cuda"]
    missing = [n for n in names if not hasattr(ember, n)]
    assert not missing, missing
    for n in ["float", "int", "long", "double", "half", "bfloat16", "cfloat", "short"]:
        assert np.dtype(getattr(ember, n)) == np.dtype(str(getattr(torch, n)).split(".")[1]), n
    # the builtins are never shadowed by `from ember import *`
    ns = {}
    exec("from ember import *", ns)
    assert "float" not in ns and "int" not in ns


def test_submodules_as_after_import_torch():
    import ember.nn
    assert ember.nn.parallel.DistributedDataParallel is not None
    from ember.utils.data import DataLoader, Dataset, TensorDataset, random_split  # noqa: F401
    import ember.utils.data.distributed
    assert ember.utils.data is ember.data
    assert ember.utils.data.distributed.DistributedSampler is ember.data.DistributedSampler
    assert ember.utils.data.DataLoader is ember.data.DataLoader
    acc = ember.accelerator
    assert acc.is_available() == bool(ember.cuda.is_available())
    assert acc.current_accelerator() == (ember.device("cuda") if acc.is_available() else None)
    with ember.backends.cudnn.flags(enabled=True):      # (the switches are global: restored)
        ember.backends.cudnn.benchmark = True
        ember.backends.cudnn.deterministic = True
        assert ember.backends.cudnn.benchmark and ember.backends.cudnn.deterministic
    assert ember.backends.mps.is_available() is False


def test_from_numpy_shares_memory_and_keeps_dtype():
    n = np.arange(6, dtype=np.float64).reshape(2, 3)
    x, t = ember.from_numpy(n), torch.from_numpy(n.copy())
    same(x, t)
    x[0, 0] = 7
    assert n[0, 0] == 7
    with pytest.raises(TypeError, match="numpy.ndarray"):
        ember.from_numpy([1, 2])
    assert ember.is_tensor(x) and not ember.is_tensor(n) and ember.numel(x) == t.numel()
    same(ember.as_tensor([1, 2], dtype=ember.float64), torch.as_tensor([1, 2], dtype=torch.float64))


def _binary(fn_e, fn_t, *arrays, rtol=1e-5, atol=1e-5):
    es, ts = zip(*[both(a) for a in arrays])
    same(fn_e(*es), fn_t(*ts), rtol=rtol, atol=atol)


def test_products():
    _binary(ember.mm, torch.mm, A, B)
    bA, bB = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))
    _binary(ember.bmm, torch.bmm, bA, bB)
    _binary(ember.mv, torch.mv, A, B[:, 0].copy())
    C = RNG.standard_normal((3, 5)).astype(np.float32)
    _binary(lambda c, a, b: ember.addmm(c, a, b, beta=0.5, alpha=2.0),
            lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), C, A, B)
    _binary(ember.addmm, torch.addmm, C[0].copy(), A, B)
    _binary(lambda c, a, b: ember.baddbmm(c, a, b, alpha=0.5),
            lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.5), np.ones((2, 3, 5)), bA, bB)
    x, t = both(A)
    same(x.mm(ember.asarray(B)), t.mm(torch.from_numpy(B)), rtol=1e-5)
    same(x.matmul(ember.asarray(B)), t.matmul(torch.from_numpy(B)), rtol=1e-5)
    with pytest.raises(RuntimeError, match="mm: .*2-d"):
        ember.mm(ember.ones(3), ember.ones((3, 2)))
    with pytest.raises(RuntimeError, match="bmm: shapes"):
        ember.bmm(ember.ones((2, 2, 3)), ember.ones((3, 3, 2)))


def test_shape_and_indexing_functions():
    x, t = both(np.arange(24.0).reshape(2, 3, 4))
    for n, d in [(2, 0), (2, 2), (3, 2), (5, 1), (1, 1)]:
        same(ember.chunk(x, n, d), torch.chunk(t, n, d))
        same(x.chunk(n, dim=d), t.chunk(n, dim=d))
    same(ember.chunk(ember.arange(0), 3), torch.chunk(torch.arange(0), 3))
    for s, d in [(1, 0), (2, 2), (3, 2), ([1, 3], 2), ([2, 1], 1)]:
        same(x.split(s, d), t.split(s, d))
        same(ember.split(x, s, dim=d), torch.split(t, s, dim=d))
    with pytest.raises(ValueError, match="do not add up"):
        x.split([1, 1], 2)
    same(ember.narrow(x, 2, 1, 2), torch.narrow(t, 2, 1, 2))
    same(x.narrow(-1, -2, 2), t.narrow(-1, -2, 2))
    with pytest.raises(IndexError, match="narrow"):
        x.narrow(0, 1, 5)
    same(ember.unbind(x, 1), torch.unbind(t, 1))
    same(x.unbind(), t.unbind())
    same(x.select(1, 2), t.select(1, 2))
    same(ember.swapdims(x, 0, 2), torch.swapdims(t, 0, 2))
    same(x.swapdims(0, 1), t.swapdims(0, 1))
    same(ember.movedim(x, 0, -1), torch.movedim(t, 0, -1))
    same(ember.t(x[0]), torch.t(t[0]))
    same(x[0].t(), t[0].t())
    same(x[0, 0].t(), t[0, 0].t())
    same(ember.flatten(x, 1), torch.flatten(t, 1))
    same(x.flatten(1), t.flatten(1))
    same(x.flatten(start_dim=0, end_dim=1), t.flatten(start_dim=0, end_dim=1))
    same(x.flatten(), t.flatten())
    same(x.view_as(ember.zeros((6, 4))), t.view_as(torch.zeros(6, 4)))
    same(x[:, :1].expand_as(x), t[:, :1].expand_as(t))
    same(x.tile(2, 1, 1), t.repeat(2, 1, 1))
    same(x.tile((1, 2)), t.tile((1, 2)))
    same(x.repeat_interleave(2, dim=1), t.repeat_interleave(2, dim=1))
    same(ember.repeat_interleave(ember.asarray([2, 0, 1])),
         torch.repeat_interleave(torch.tensor([2, 0, 1])))
    same(x.flip(0, 2), t.flip(0, 2))
    same(x.roll(1, 2), t.roll(1, 2))
    same(x[0].tril(), t[0].tril())
    same(x[0].triu(1), t[0].triu(1))
    same(ember.broadcast_tensors(x[:1], x[0, 0]), torch.broadcast_tensors(t[:1], t[0, 0]))


def test_gather_scatter():
    x, t = both(A)
    i, ti = both(I3)
    same(ember.gather(x, 1, i), torch.gather(t, 1, ti))
    same(x.gather(0, i[:2, :3]), t.gather(0, ti[:2, :3]))          # smaller index
    same(x.scatter(0, i[:, :2] % 3, x[:, :2] * 10),
         t.scatter(0, ti[:, :2] % 3, t[:, :2] * 10))
    uniq = ember.asarray([[2, 0, 1, 1], [0, 1, 2, 0]])              # no repeats within a column
    tuniq = torch.tensor([[2, 0, 1, 1], [0, 1, 2, 0]])
    same(x.scatter(0, uniq, x[:2]), t.scatter(0, tuniq, t[:2]))
    same(x.scatter(1, i % 4, 5.0), t.scatter(1, ti % 4, 5.0))
    same(ember.scatter(x, 1, i, value=-1.0), torch.scatter(t, 1, ti, value=-1.0))
    same(ember.scatter_add(x, 1, i, x), torch.scatter_add(t, 1, ti, t))
    same(x.scatter_add(0, i, x), t.scatter_add(0, ti, t))
    same(x.index_select(1, ember.asarray([3, 0])), t.index_select(1, torch.tensor([3, 0])))
    m, tm = both(A > 0)
    same(ember.masked_select(x, m), torch.masked_select(t, tm))
    same(x.masked_select(m[0]), t.masked_select(tm[0]))
    same(x.masked_fill(m, 0.5), t.masked_fill(tm, 0.5))
    with pytest.raises(RuntimeError, match="gather: index must have as many"):
        ember.gather(x, 0, ember.asarray([0, 1]))


def test_elementwise_methods():
    x, t = both(A)
    y, u = both(B[:3, :4] + 3)
    for name in ["exp", "sqrt", "abs", "neg", "sigmoid", "relu", "tanh", "square", "sin", "cos"]:
        xe, xt = (y, u) if name == "sqrt" else (x, t)
        same(getattr(xe, name)(), getattr(xt, name)(), rtol=1e-5)
    same(y.log(), u.log(), rtol=1e-5)
    same(y.rsqrt(), u.rsqrt(), rtol=1e-5)
    same(x.pow(2), t.pow(2), rtol=1e-5)
    same(y.pow(y), u.pow(u), rtol=1e-4)
    for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
        same(getattr(x, name)(y), getattr(t, name)(u))
        same(getattr(x, name)(0.0), getattr(t, name)(0.0))
    same(x.add(y, alpha=2), t.add(u, alpha=2), rtol=1e-5)
    same(x.sub(1, alpha=3), t.sub(1, alpha=3), rtol=1e-5)
    same(x.mul(y), t.mul(u), rtol=1e-5)
    for mode in [None, "floor", "trunc"]:
        same(x.div(y, rounding_mode=mode), t.div(u, rounding_mode=mode), rtol=1e-5)
    i, ti = both(I3 - 1)
    for mode in ["floor", "trunc"]:
        same(i.div(2, rounding_mode=mode), ti.div(2, rounding_mode=mode))
    same(x.clamp(-0.5, 0.5), t.clamp(-0.5, 0.5))
    same(x.clamp(min=0), t.clamp(min=0))
    same(ember.clamp(x, max=0.1), torch.clamp(t, max=0.1))
    same(x.clamp_min(0.2), t.clamp_min(0.2))
    same(ember.clamp_max(x, 0.2), torch.clamp_max(t, 0.2))
    same(x.where(x > 0, y), t.where(t > 0, u))
    same(x.softmax(1), t.softmax(1), rtol=1e-5)
    same(x.log_softmax(dim=0), t.log_softmax(dim=0), rtol=1e-5)
    same(x.logsumexp(1), t.logsumexp(1), rtol=1e-5)
    same(ember.sigmoid(x), torch.sigmoid(t), rtol=1e-5)
    same(ember.softmax(x, 1), torch.softmax(t, 1), rtol=1e-5)
    same(ember.log_softmax(x, dim=1), torch.log_softmax(t, dim=1), rtol=1e-5)
    same(ember.relu(x), torch.relu(t))
    same(ember.rsqrt(y), torch.rsqrt(u), rtol=1e-5)
    same(ember.lerp(x, y, 0.3), torch.lerp(t, u, 0.3), rtol=1e-5)
    assert x.equal(x.copy()) and not x.equal(y) and x.equal(x) == t.equal(t)


def test_dtype_methods():
    x, t = both(A * 3)
    for name in ["long", "int", "short", "char", "byte", "bool", "float", "double", "half",
                 "bfloat16"]:
        xe, xt = (abs(x), abs(t)) if name == "byte" else (x, t)
        same(getattr(xe, name)(), getattr(xt, name)(), rtol=1e-2, atol=1e-2)
    assert x.type() == "ember.FloatTensor" and t.type() == "torch.FloatTensor"
    for e, tt in [(x.long(), t.long()), (x.double(), t.double()), (x.bool(), t.bool()),
                  (x.half(), t.half()), (x.bfloat16(), t.bfloat16())]:
        assert e.type().split(".")[-1] == tt.type().split(".")[-1]
    same(x.type(ember.float64), t.type(torch.float64))
    same(x.type("torch.LongTensor"), t.type("torch.LongTensor"))
    same(x.type_as(ember.zeros(1, dtype=ember.int16)), t.type_as(torch.zeros(1, dtype=torch.int16)))
    assert x.ndimension() == t.ndimension() and x.dim() == t.dim() and x.numel() == t.numel()
    assert x.is_contiguous() == t.is_contiguous() and x.T.is_contiguous() == t.T.is_contiguous()
    same(x.T.contiguous(), t.T.contiguous())


def test_norms_and_statistics():
    x, t = both(A.astype(np.float64))
    same(ember.norm(x), torch.norm(t))
    same(x.norm(dim=1), t.norm(dim=1))
    same(x.norm(p=1, dim=0, keepdim=True), t.norm(p=1, dim=0, keepdim=True))
    same(ember.norm(x, p="nuc"), torch.norm(t, p="nuc"))
    same(ember.dist(x, x * 2, 3), torch.dist(t, t * 2, 3))
    same(ember.cdist(x, x[:2]), torch.cdist(t, t[:2]))
    same(ember.std_mean(x, 1), torch.std_mean(t, 1))
    same(ember.var_mean(x, dim=0, correction=0, keepdim=True),
         torch.var_mean(t, dim=0, correction=0, keepdim=True))


# ---------------------------------------------------------------- in place

INPLACE = [
    ("add_", lambda x, m: x.add_(m.ones(x.shape, dtype=x.dtype) if m is ember else torch.ones(x.shape), alpha=2)),
    ("sub_", lambda x, m: x.sub_(0.5)),
    ("mul_", lambda x, m: x.mul_(x * 2)),
    ("div_", lambda x, m: x.div_(2.0)),
    ("div_floor", lambda x, m: x.div_(0.3, rounding_mode="floor")),
    ("pow_", lambda x, m: x.pow_(2)),
    ("neg_", lambda x, m: x.neg_()),
    ("clamp_", lambda x, m: x.clamp_(-0.3, 0.4)),
    ("zero_", lambda x, m: x.zero_()),
    ("fill_", lambda x, m: x.fill_(2.5)),
    ("copy_", lambda x, m: x.copy_(x.flip(0) if m is torch else x.flip(0).copy())),
    ("masked_fill_", lambda x, m: x.masked_fill_(x > 0, -1.0)),
    ("scatter_", lambda x, m: x.scatter_(1, (m.asarray if m is ember else torch.tensor)(I3 % 4), 9.0)),
    ("scatter_add_", lambda x, m: x.scatter_add_(1, (m.asarray if m is ember else torch.tensor)(I3), x * 1)),
    ("index_add_", lambda x, m: x.index_add_(0, (m.asarray if m is ember else torch.tensor)([2, 0, 2]), x * 1)),
]


@pytest.mark.parametrize("name,fn", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace_methods_values_and_gradients(name, fn):
    # values: the method returns the array itself, modified
    x, t = both(A)
    r, s = fn(x, ember), fn(t, torch)
    assert r is x and s is t
    same(x, t, rtol=1e-5)
    # gradients through an in-place op on a non-leaf (PyTorch's rules)
    x, t = both(A.astype(np.float64))
    x.requires_grad_(), t.requires_grad_()
    w = RNG.standard_normal(A.shape)
    ye, yt = x * 1.5, t * 1.5
    fn(ye, ember), fn(yt, torch)
    (ye * ember.asarray(w)).sum().backward()
    (yt * torch.from_numpy(w)).sum().backward()
    same(x.grad, t.grad, rtol=1e-10, atol=1e-12)
    # a leaf that requires grad refuses in-place changes, in both
    x, t = both(A.astype(np.float64))
    x.requires_grad_(), t.requires_grad_()
    with pytest.raises(RuntimeError):
        fn(t, torch)
    with pytest.raises(RuntimeError):
        fn(x, ember)


def test_copy_and_fill_respect_dtype_and_broadcast():
    x, t = both(np.zeros((2, 3), np.int32))
    x.copy_(ember.asarray([1.7, 2.2, -3.9])), t.copy_(torch.tensor([1.7, 2.2, -3.9]))
    same(x, t)
    x.fill_(7), t.fill_(7)
    same(x, t)


def test_normal_and_uniform_fill():
    x = ember.empty((1000,), dtype=ember.float64)
    assert x.uniform_(2, 3) is x and 2 <= float(x.min()) and float(x.max()) < 3
    x.normal_(5.0, 0.1)
    assert abs(float(x.mean()) - 5.0) < 0.05 and abs(float(x.std()) - 0.1) < 0.02


# ---------------------------------------------------------------- gradients of the new functions

GRADS = [
    ("gather", lambda x, m: m.gather(x, 1, (ember.asarray if m is ember else torch.tensor)(I3))),
    ("scatter", lambda x, m: m.scatter(x, 0, (ember.asarray if m is ember else torch.tensor)([[2, 0, 1, 1]]), x[:1] * 3)),
    ("narrow", lambda x, m: m.narrow(x, 1, 1, 2)),
    ("chunk", lambda x, m: m.chunk(x, 3, 1)[1]),
    ("split", lambda x, m: x.split([1, 3], 1)[1]),
    ("unbind", lambda x, m: m.unbind(x, 1)[2]),
    ("masked_select", lambda x, m: m.masked_select(x, x > 0)),
    ("masked_fill", lambda x, m: x.masked_fill(x > 0, 0.0)),
    ("max_dim", lambda x, m: x.max(dim=1).values),
    ("min_dim", lambda x, m: m.min(x, dim=0, keepdim=True).values),
    ("sort_dim", lambda x, m: m.sort(x, dim=1, descending=True).values),
    ("topk", lambda x, m: x.topk(2, dim=1).values),
    ("median_dim", lambda x, m: m.median(x, dim=1).values),
    ("std_dim", lambda x, m: x.std(dim=1)),
    ("var_keepdim", lambda x, m: x.var(1, keepdim=True)),
    ("addmm", lambda x, m: m.addmm(x[:, :1], x, x.T, beta=0.5)),
    ("baddbmm", lambda x, m: m.baddbmm(x[None, :, :3], x[None], x.T[None], alpha=2.0)),
    ("norm", lambda x, m: m.norm(x, dim=1)),
    ("cdist", lambda x, m: m.cdist(x, x[:2] + 1)),
    ("clamp", lambda x, m: m.clamp(x, -0.5, 0.5)),
    ("lerp", lambda x, m: m.lerp(x, x * x, 0.3)),
    ("transpose", lambda x, m: m.transpose(x[None], 1, 2)),
    ("flatten", lambda x, m: x[None].flatten(1)),
    ("softmax", lambda x, m: x.softmax(1)),
    ("sigmoid", lambda x, m: m.sigmoid(x)),
]


@pytest.mark.parametrize("name,fn", GRADS, ids=[n for n, _ in GRADS])
def test_gradients_match_pytorch(name, fn):
    x, t = both(A.astype(np.float64))
    x.requires_grad_(), t.requires_grad_()
    ye, yt = fn(x, ember), fn(t, torch)
    same(ye, yt, rtol=1e-10, atol=1e-12)
    w = RNG.standard_normal(tuple(yt.shape))
    (ye * ember.asarray(w)).sum().backward()
    (yt * torch.from_numpy(w)).sum().backward()
    same(x.grad, t.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn", [lambda x: ember.gather(x, 1, ember.asarray(I3)),
                                lambda x: ember.narrow(x, 0, 1, 2) * 2,
                                lambda x: ember.scatter(x, 1, ember.asarray([[1], [0], [3]]),
                                                        x[:, :1] ** 2),
                                lambda x: ember.median(x, dim=0).values,
                                lambda x: ember.cdist(x, x[:1] + 1)])
def test_gradcheck(fn):
    x = ember.asarray(A.astype(np.float64), requires_grad=True)
    assert ember.autograd.gradcheck(fn, (x,))


# ---------------------------------------------------------------- the clash rule

def test_max_min_dim_return_values_and_indices():
    x, t = both(A)
    for k in ("max", "min"):
        for kw in [dict(dim=1), dict(dim=0, keepdim=True), dict(dim=-1, keepdim=False)]:
            r = getattr(x, k)(**kw)
            same(r, getattr(t, k)(**kw))
            assert type(r).__name__ == k and r.values is r[0]
            same(getattr(ember, k)(x, **kw), getattr(torch, k)(t, **kw))
        # PyTorch's positional dim with keepdim=: keepdim is torch-only, so PyTorch's result
        same(getattr(x, k)(1, keepdim=True), getattr(t, k)(1, keepdim=True))
        # NumPy's meaning stays without a torch keyword
        np.testing.assert_array_equal(np.asarray(getattr(x, k)(axis=1)), getattr(A, k)(axis=1))
        np.testing.assert_array_equal(np.asarray(getattr(x, k)(1)), getattr(A, k)(1))
        np.testing.assert_array_equal(np.asarray(getattr(ember, k)(x, 0)), getattr(np, k)(A, 0))
        same(getattr(x, k)(), getattr(t, k)())
        # the elementwise form
        same(getattr(x, k)(x * -1), getattr(t, k)(t * -1))
        same(getattr(ember, k)(x, x.T.T * 0), getattr(torch, k)(t, t * 0))
    with pytest.raises(TypeError, match="dim= selects"):
        x.max(0, dim=1)


def test_max_dim_on_ties_and_nan_matches_pytorch():
    a = np.array([[1.0, 3.0, 3.0], [np.nan, 2.0, np.nan], [5.0, 5.0, 5.0]], np.float32)
    x, t = both(a)
    same(x.max(dim=1), t.max(dim=1))
    same(x.min(dim=1), t.min(dim=1))


def test_argmax_argmin_dim():
    x, t = both(A)
    same(x.argmax(dim=1), t.argmax(dim=1))
    same(ember.argmin(x, dim=0, keepdim=True), torch.argmin(t, dim=0, keepdim=True))


def test_sort_and_topk_named_tuples():
    a = RNG.integers(0, 4, (3, 6)).astype(np.float32)          # ties: stable order
    x, t = both(a)
    for kw in [dict(dim=1), dict(dim=0, descending=True), dict(dim=-1, stable=True)]:
        kw_t = dict(kw, stable=True)
        same(ember.sort(x, **kw), torch.sort(t, **kw_t))
        r = x.sort(**kw)
        same(r, t.sort(**kw_t))
        assert type(r).__name__ == "sort"
    np.testing.assert_array_equal(np.asarray(ember.sort(x)), np.sort(a))         # NumPy's
    np.testing.assert_array_equal(np.asarray(ember.sort(x, descending=True)), -np.sort(-a))
    y = x.copy()
    assert y.sort() is None                                                      # in place
    np.testing.assert_array_equal(np.asarray(y), np.sort(a))
    b = RNG.standard_normal((3, 6)).astype(np.float32)           # no ties (topk order)
    x, t = both(b)
    for args, kw in [((2,), {}), ((3,), dict(dim=0)), ((2,), dict(largest=False))]:
        r = ember.topk(x, *args, **kw)
        same(r, torch.topk(t, *args, **kw))
        same(x.topk(*args, **kw), t.topk(*args, **kw))
        assert type(r).__name__ == "topk" and r.indices is r[1]


def test_median_dim():
    for shape in [(3, 4), (3, 5), (1, 4), (4,)]:
        a = RNG.standard_normal(shape).astype(np.float32)
        x, t = both(a)
        same(ember.median(x, dim=-1), torch.median(t, dim=-1))
        same(ember.median(x, dim=0, keepdim=True), torch.median(t, dim=0, keepdim=True))
        np.testing.assert_allclose(np.asarray(ember.median(x)), np.median(a), rtol=1e-6)  # NumPy's
    a = np.array([[1.0, np.nan, 3.0], [4.0, 2.0, 0.0]], np.float32)
    x, t = both(a)
    same(ember.median(x, dim=1), torch.median(t, dim=1))
    same(ember.nanmedian(x, dim=1), torch.nanmedian(t, dim=1))


def test_var_std_torch_keywords_select_torch_correction():
    x, t = both(A.astype(np.float64))
    for k in ("var", "std"):
        same(getattr(x, k)(dim=1), getattr(t, k)(dim=1))
        same(getattr(x, k)(1, keepdim=True), getattr(t, k)(1, keepdim=True))
        same(getattr(x, k)(dim=0, unbiased=False), getattr(t, k)(dim=0, unbiased=False))
        same(getattr(x, k)(dim=0, correction=0), getattr(t, k)(dim=0, correction=0))
        same(getattr(ember, k)(x, dim=1), getattr(torch, k)(t, dim=1))
        same(getattr(x, k)(unbiased=True), getattr(t, k)(unbiased=True))
        # NumPy's default without them
        np.testing.assert_allclose(np.asarray(getattr(x, k)()), getattr(A.astype(np.float64), k)())
        np.testing.assert_allclose(np.asarray(getattr(ember, k)(x, axis=1)),
                                   getattr(np, k)(A.astype(np.float64), axis=1))


def test_split_numpy_sections_and_torch_sizes():
    a = np.arange(12.0).reshape(6, 2)
    x, t = both(a)
    for e, n in zip(ember.split(x, 2), np.split(a, 2)):          # NumPy: 2 sections of 3
        np.testing.assert_array_equal(np.asarray(e), n)
    same(ember.split(x, 2, dim=0), torch.split(t, 2, dim=0))     # PyTorch: pieces of 2
    same(x.split(4), t.split(4))
    with pytest.raises(TypeError, match="either axis= .* or dim="):
        ember.split(x, 2, axis=0, dim=0)


def test_nonzero_as_tuple():
    a = np.array([[0, 1, 2], [3, 0, 0]])
    x, t = both(a)
    for e, n in zip(x.nonzero(), a.nonzero()):
        np.testing.assert_array_equal(np.asarray(e), n)
    same(x.nonzero(as_tuple=False), t.nonzero(as_tuple=False))
    same(ember.nonzero(x, as_tuple=True), torch.nonzero(t, as_tuple=True))
    same(ember.nonzero(ember.asarray(3), as_tuple=False), torch.nonzero(torch.tensor(3)))


def test_transpose_two_ints():
    a = np.arange(24.0).reshape(2, 3, 4)
    x, t = both(a)
    same(x.transpose(1, 2), t.transpose(1, 2))                   # NumPy raises here
    same(ember.transpose(x, 0, 2), torch.transpose(t, 0, 2))
    same(x.transpose(dim0=0, dim1=1), t.transpose(dim0=0, dim1=1))
    np.testing.assert_array_equal(np.asarray(x.transpose(2, 0, 1)), a.transpose(2, 0, 1))
    m, tm = both(a[0])
    # the clash no keyword tells apart: NumPy's (identity) on 2-d arrays
    np.testing.assert_array_equal(np.asarray(m.transpose(0, 1)), a[0].transpose(0, 1))
    same(m.transpose(1, 0), tm.transpose(1, 0))
    same(ember.transpose(m, 0, 1), torch.transpose(tm, 0, 1))
    same(m.swapaxes(0, 1), tm.swapaxes(0, 1))
    np.testing.assert_array_equal(np.asarray(ember.transpose(x)), a.transpose())


def test_repeat_stays_numpys_and_tile_is_pytorchs_repeat():
    a = np.arange(6).reshape(2, 3)
    x, t = both(a)
    np.testing.assert_array_equal(np.asarray(x.repeat(2, 1)), a.repeat(2, 1))
    same(x.tile(2, 1), t.repeat(2, 1))
    same(x.repeat_interleave(2, 1), t.repeat_interleave(2, 1))


def test_cross_dim():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal((3, 4)).astype(np.float32)
    (x, t), (y, u) = both(a), both(b)
    same(ember.cross(x, y, dim=0), torch.cross(t, u, dim=0), rtol=1e-5)


# ---------------------------------------------------------------- random

def test_random_shapes_dtypes_and_seeding():
    ember.manual_seed(0)
    a = ember.randn(3, 4)
    ember.manual_seed(0)
    assert (ember.randn(3, 4) == a).all() and a.shape == tuple(torch.randn(3, 4).shape)
    assert a.dtype == ember.float32
    assert ember.rand((2, 5)).shape == (2, 5) and ember.rand(2, dtype=ember.float64).dtype == np.float64
    assert ember.randn(2, 3, requires_grad=True).requires_grad
    r = ember.randint(3, 9, (1000,))
    tr = torch.randint(3, 9, (1000,))
    assert r.dtype == ember.int64 and str(tr.dtype) == "torch.int64"
    assert set(np.unique(np.asarray(r)).tolist()) == set(range(3, 9))
    assert ember.randint(5, (2, 2)).shape == (2, 2) and int(ember.randint(5, (50,)).max()) < 5
    assert ember.randint(0, 2, size=(3,), dtype=ember.int32).dtype == ember.int32
    p = ember.randperm(10)
    assert sorted(p.tolist()) == list(range(10)) and p.dtype == ember.int64
    like = ember.zeros((2, 3), dtype=ember.float64)
    for fn in (ember.rand_like, ember.randn_like):
        r = fn(like)
        assert r.shape == (2, 3) and r.dtype == ember.float64
    r = ember.randint_like(ember.zeros(100, dtype=ember.int32), 2, 4)
    assert r.dtype == ember.int32 and set(np.unique(np.asarray(r)).tolist()) == {2, 3}
    g = ember.random.default_rng(1)
    assert ember.rand(3, generator=g).shape == (3,)
    with pytest.raises(TypeError, match="randint: high and size"):
        ember.randint(5)


def test_normal_bernoulli_multinomial():
    ember.manual_seed(1)
    n = ember.normal(3.0, 0.5, size=(20000,))
    assert abs(float(n.mean()) - 3.0) < 0.02 and abs(float(n.std()) - 0.5) < 0.02
    m = ember.normal(ember.zeros((2, 3), dtype=ember.float64), 1.0)
    assert m.shape == (2, 3) and m.dtype == ember.float64
    p = ember.asarray([0.0, 1.0, 0.25])
    b = ember.bernoulli(ember.broadcast_to(p, (20000, 3)))
    freq = np.asarray(b.mean(axis=0))
    assert freq[0] == 0 and freq[1] == 1 and abs(freq[2] - 0.25) < 0.02 and b.dtype == p.dtype
    w = ember.asarray([[1.0, 0.0, 3.0], [0.0, 2.0, 2.0]])
    s = ember.multinomial(w, 20000, replacement=True)
    assert s.shape == (2, 20000) and s.dtype == ember.int64
    c0 = np.bincount(np.asarray(s[0]), minlength=3) / 20000
    c1 = np.bincount(np.asarray(s[1]), minlength=3) / 20000
    assert c0[1] == 0 and abs(c0[2] - 0.75) < 0.02 and c1[0] == 0 and abs(c1[1] - 0.5) < 0.02
    s = ember.multinomial(ember.asarray([1.0, 1.0, 0.0, 5.0]), 3)
    assert sorted(s.tolist()) == [0, 1, 3]
    with pytest.raises(ValueError, match="without replacement"):
        ember.multinomial(ember.asarray([1.0, 0.0]), 2)


def test_dim_keepdim_accepted_where_axis_is():
    x, t = both(A)
    i, ti = both(np.argsort(A, axis=1))
    same(ember.take_along_axis(x, i, dim=1), torch.take_along_dim(t, ti, dim=1))
    same(ember.take_along_dim(x, i, dim=1), torch.take_along_dim(t, ti, dim=1))
    same(ember.take_along_dim(x, i[:1, :2]), torch.take_along_dim(t, ti[:1, :2]))
    same(ember.tensor_split(x, 3, dim=1), torch.tensor_split(t, 3, dim=1))
    same(tuple(ember.array_split(x, 3, dim=1)), torch.tensor_split(t, 3, dim=1))
    same(ember.nanquantile(x, 0.25, dim=1, keepdim=True),
         torch.nanquantile(t, 0.25, dim=1, keepdim=True))
    same(ember.vecdot(x, x, dim=0), torch.linalg.vecdot(t, t, dim=0), rtol=1e-5)
    same(ember.scatter_add(x, dim=0, index=ember.asarray(I3), src=x),
         torch.scatter_add(t, dim=0, index=torch.tensor(I3), src=t))
    u, tu = both(np.array([[1, 2], [1, 2], [0, 5]]))
    same(ember.unique(u, dim=0), torch.unique(tu, dim=0))
    with pytest.raises(TypeError, match="either axis= or dim="):
        ember.take_along_axis(x, i, axis=1, dim=1)


def test_size_is_a_weak_python_int_in_arithmetic():
    # NumPy's x.size is a Python int: weak in promotion (float32 stays float32)
    x = ember.ones((2, 3), dtype=ember.float32)
    n = np.ones((2, 3), np.float32)
    for got, want in [(x / x.size, n / n.size), (x.size * x, n.size * n), (x ** x.size, n ** n.size),
                      (x.sum() / x.size, n.sum() / n.size), (ember.arange(3) + x.size, np.arange(3) + n.size)]:
        assert got.dtype == want.dtype and np.allclose(np.asarray(got), want)
    assert ember.asarray(x.size).dtype == ember.int64 and ember.asarray([x.size]).tolist() == [6]
