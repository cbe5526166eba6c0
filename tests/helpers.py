"""Shared test helpers: layouts to run every op on, and NumPy-oracle asserts.

Import with ``from helpers import ...`` (conftest.py puts tests/ on sys.path).
"""
import numpy as np

import ember

ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64", "complex64", "complex128"]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
COMPLEX_DTYPES = ["complex64", "complex128"]
NUMERIC_DTYPES = INT_DTYPES + FLOAT_DTYPES + COMPLEX_DTYPES


def random_array(shape, dtype, rng=None, low=-5, high=5):
    """NumPy array of `shape` and `dtype` with small random values (no NaN)."""
    rng = np.random.default_rng(0) if rng is None else rng
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, max(high, 1), size=shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(low, high, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(low, high, size=shape) + 1j * rng.uniform(low, high, size=shape)).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def values_for(name, dtype, shape, seed=0):
    """Inputs inside ufunc `name`'s domain (the elementwise and GPU suites share them)."""
    rng = np.random.default_rng(seed)
    a = random_array(shape, dtype, rng)
    dt = np.dtype(dtype)
    kind = "f" if dt == ember.bfloat16 else dt.kind
    if name == "arccosh" and kind in "fc":
        a = np.abs(a) + 1
    if name in ("arcsin", "arccos", "arctanh") and kind == "f":
        a = (a / 6).astype(dt)
    if name in ("left_shift", "right_shift") and kind in "iu":
        a = (np.abs(a.astype(np.int64)) % (dt.itemsize * 8)).astype(dt)
    return a


def layouts(base):
    """(label, NumPy array) pairs holding base's values in different memory layouts.

    ember.asarray keeps the layout (zero-copy), so each op meets contiguous,
    transposed, step-sliced and negative-stride inputs.
    """
    out = [("contiguous", base)]
    if base.ndim >= 2:
        out.append(("transposed", np.ascontiguousarray(base.T).T))
    if base.ndim >= 1 and base.size:
        big = np.repeat(base, 2, axis=-1)
        out.append(("step2", big[..., ::2]))
        rev = np.ascontiguousarray(base[..., ::-1])
        out.append(("negative_stride", rev[..., ::-1]))
    return out


def matrix_layout(x, kind):
    """x (a stack of matrices) with the same values in another memory layout, for the
    GEMM paths: "c" as is, "f" column-major matrices, "strided" rows padded by 3,
    "step2" every other column, "neg" both matrix axes reversed."""
    if kind == "c":
        return x
    if kind == "f":
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    if kind == "strided":
        big = np.zeros(x.shape[:-1] + (x.shape[-1] + 3,), x.dtype)
        big[..., :x.shape[-1]] = x
        return big[..., :x.shape[-1]]
    if kind == "step2":
        big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        big[..., ::2] = x
        return big[..., ::2]
    if kind == "neg":
        return np.ascontiguousarray(x[..., ::-1, ::-1])[..., ::-1, ::-1]
    raise ValueError(kind)


SHAPES = [(), (0,), (1,), (5,), (3, 4), (2, 3, 4), (2, 0, 3)]


def assert_matches(got, expected, rtol=None, atol=None, check_dtype=True):
    """ember result vs NumPy oracle: type, shape, dtype and values (NaN-aware)."""
    assert isinstance(got, ember.ndarray), f"expected an ember array, got {type(got)}"
    exp = np.asarray(expected)
    g = np.asarray(got)
    assert g.shape == exp.shape, f"shape {g.shape} != {exp.shape}"
    if check_dtype:
        assert g.dtype == exp.dtype, f"dtype {g.dtype} != {exp.dtype}"
    if exp.dtype.kind in "fc" or g.dtype.kind in "fc":
        kind_dtype = np.result_type(g.dtype, exp.dtype)
        if rtol is None:
            rtol = {2: 1e-3, 4: 1e-5, 8: 1e-12, 16: 1e-12}.get(np.dtype(kind_dtype).itemsize, 1e-6)
            if np.dtype(kind_dtype).kind == "c":
                rtol = 1e-5 if np.dtype(kind_dtype).itemsize == 8 else 1e-12
        np.testing.assert_allclose(g, exp, rtol=rtol, atol=atol or 0, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, exp)



# ---------------------------------------------------------------- inputs and comparisons
# (the autograd, nn and GPU suites share these; a file whose tolerances differ binds
# them once with functools.partial, e.g. ``close = partial(helpers.close, rtol=1e-6)``)

def rnd(*shape, seed=0, scale=1.0, dtype=np.float64, low=None, high=None):
    """Standard normal values of `shape` (uniform on [low, high) when both are given)
    times `scale`, as `dtype`; complex dtypes get a random imaginary part too, drawn
    after the real part from the same generator."""
    rng = np.random.default_rng(seed)
    if (low is None) != (high is None):
        raise TypeError("rnd: pass both low= and high= (uniform values) or neither")
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, high, size=shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    if scale != 1.0:
        a = a * scale
    return a.astype(dtype)


def uniform(shape, seed=0, low=-2.0, high=2.0):
    """float64 values of `shape` (a tuple) drawn uniformly from [low, high)."""
    return rnd(*shape, seed=seed, low=low, high=high)


def leaf(values, dtype=ember.float64, copy=True):
    """An ember leaf that requires grad, holding `values` as float64 cast to `dtype`.

    ``copy=True``: from a fresh C-contiguous float64 copy of `values`; ``copy=False``:
    from ``np.asarray(values, float64)``, which shares a float64 NumPy array's memory
    and keeps its layout."""
    v = (np.array(values, dtype=np.float64, order="C") if copy
         else np.asarray(values, dtype=np.float64))
    return ember.asarray(v, dtype=dtype, requires_grad=True)


def tleaf(values):
    """The PyTorch float64 leaf (requires_grad) holding `values`, to compare with leaf()."""
    import torch
    return torch.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def to_numpy(x):
    """NumPy values of an ember array (detached), a torch tensor, or anything array-like."""
    if isinstance(x, ember.ndarray):
        return np.asarray(x.detach())
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        return x.detach().numpy()
    return np.asarray(x)


def close(got, expected, err_msg="", *, rtol=1e-7, atol=0.0):
    """assert_allclose of `got` and `expected` (ember arrays, torch tensors, NumPy arrays,
    lists or scalars; NaNs equal).  Tolerances are keyword-only, so a stray positional
    number can never become the message."""
    if not isinstance(err_msg, str):
        raise TypeError(f"close: err_msg must be a str, got {err_msg!r} (pass rtol=/atol= "
                        f"by keyword)")
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), rtol=rtol, atol=atol,
                               err_msg=err_msg)


def check_ddp_reducer_on(device):
    """Drive DistributedDataParallel's reducer by hand in a one-rank group (where DDP
    itself skips it): gradients go into buckets on `device`, are averaged by
    all_reduce and written back into the same gradient arrays, unchanged in value."""
    from ember import nn
    from ember.nn.parallel import DistributedDataParallel as DDP
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
            self.unused = nn.Linear(2, 2)          # never gets a gradient

        def forward(self, x):
            return self.body(x)
    ember.random.seed(0)
    m = Net().to(device)
    ddp = DDP(m, find_unused_parameters=True)
    x = ember.asarray(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    x = x.to(device)
    m(x).sum().backward()
    expected = {n: np.asarray(p.grad.cpu()).copy() for n, p in m.named_parameters()
                if p.grad is not None}
    before = {n: p.grad for n, p in m.named_parameters()}
    out = m(x)
    ddp._prepare_for_backward(out)          # marks the unused layer ready at once
    for b in ddp._buckets:
        assert b.data.device == m.body[0].weight.device
    for p in reversed(list(m.parameters())):
        if p.grad is not None:
            ddp._on_grad_ready(p)
    assert ddp._state == "done"
    for n, p in m.named_parameters():
        if n.startswith("unused"):
            assert p.grad is None           # unused on every rank: stays None
            continue
        assert p.grad is before[n]          # written in place
        assert p.grad.device == m.body[0].weight.device
        np.testing.assert_array_equal(np.asarray(p.grad.cpu()), expected[n])
