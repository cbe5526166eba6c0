"""Random numbers on CUDA devices: Philox4x32-10 (random.cu), one generator per device.

A generator is two integers, ``(seed, offset)``: every draw launches a kernel that
reads the counter space ``(element block, offset)`` under key ``seed`` and then
bumps ``offset`` by one, so nothing lives on the device and draws never overlap.
Results do not depend on the launch shape.

``seed(device, s)`` seeds one device (``manual_seed(s)``: the current one,
``manual_seed_all(s)``: every one, also those not used yet).  ``ember.random.seed``
seeds the CUDA generators too, and a generator first used after it starts from
that seed, so one call makes a program reproducible on every device.

The draw functions take ember.random's arguments plus ``device`` and return ember
arrays on that device; ember.random routes ``device='cuda'`` calls here, and
dropout's masks (the private op ``nn.functional.dropout._mask``) are ``dropout_mask``.
"""
import functools
import inspect

import numpy as np

from ember.cuda import _runtime as R
from ember.cuda._dispatch import gpu_op
from ember._core.dtypes import dtype_kind
from ember._core.util import float_draw_dtype

__all__ = ["seed", "manual_seed", "manual_seed_all", "initial_seed", "get_rng_state",
           "set_rng_state", "uniform", "normal", "standard_normal", "random", "rand", "randn",
           "integers", "randint", "bernoulli", "dropout_mask", "fill_uniform_", "fill_normal_"]

_MASK63 = (1 << 63) - 1         # seeds and offsets travel as signed 64-bit kernel arguments
_gens = {}                      # device index -> [seed, offset]
_all = {"seed": None}           # manual_seed_all's seed (None: fresh entropy per device)


def _norm_seed(s):
    """An int seed as is (mod 2**63); anything NumPy accepts as a seed, hashed."""
    if isinstance(s, (int, np.integer)):
        return int(s) & _MASK63
    return int(np.random.SeedSequence(s).generate_state(1, np.uint64)[0]) & _MASK63


def _fresh_seed():
    return int(np.random.SeedSequence().entropy) & _MASK63


def _current():
    return int(R.cp().cuda.runtime.getDevice())


def _index(device):
    """The CUDA device index named by `device` (None: the current device)."""
    if device is None:
        return _current()
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        return int(device)
    from ember._core.array import Device
    d = Device(device)
    if d.type != "cuda":
        raise ValueError(f"random (cuda): expected a CUDA device, got {d}")
    return _current() if d.index is None else int(d.index)


def _gen(idx):
    g = _gens.get(idx)
    if g is None:
        s = _all["seed"]
        g = _gens[idx] = [_fresh_seed() if s is None else _norm_seed(s), 0]
    return g


def _take(idx):
    """(seed, offset) for one draw on device idx; advances the generator."""
    g = _gen(idx)
    off = g[1]
    g[1] = (off + 1) & _MASK63
    return g[0], off


# ---------------------------------------------------------------- seeding

def seed(device, s):
    """Seed the generator of `device` (an index, 'cuda:N', an ember.Device; None: the
    current device) with `s` (None: fresh entropy)."""
    _gens[_index(device)] = [_fresh_seed() if s is None else _norm_seed(s), 0]


def manual_seed(s):
    """Seed the current CUDA device's generator."""
    seed(None, s)


def manual_seed_all(s):
    """Seed every CUDA device's generator (devices first used later start from `s` too)."""
    _all["seed"] = s
    _gens.clear()


def initial_seed(device=None):
    """The seed the device's generator started from."""
    return _gen(_index(device))[0]


def get_rng_state(device=None):
    """The device generator's state: a (seed, offset) tuple."""
    g = _gen(_index(device))
    return (g[0], g[1])


def set_rng_state(state, device=None):
    """Restore a state from ``get_rng_state``."""
    s, off = state
    _gens[_index(device)] = [int(s) & _MASK63, int(off) & _MASK63]


# ---------------------------------------------------------------- kernels

def _shape(size):
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


_float_dtype = float_draw_dtype


def _draw(kind, shape, dt, a, b, idx):
    """A new cupy array of `shape` and float dtype `dt` on device idx (the current one:
    every caller runs under its device guard): uniform [a, b) or normal (mean a, std b),
    float32 or float64 kernels (other floats: cast from float32)."""
    cp = R.cp()
    kdt = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    out = cp.empty(shape, dtype=kdt)
    n = int(out.size)
    if n:
        s, off = _take(idx)
        per = 2 if kdt == np.float64 else 4       # values per Philox call
        R.launch(f"ember_{kind}_{R.suffix(kdt)}", R.blocks((n + per - 1) // per), 256,
               (out, n, s, off, float(a), float(b)))
    return out if kdt == dt else out.astype(dt)


def _device_array(v, idx):
    """A scalar stays a Python number; an array argument becomes a cupy array on idx."""
    from ember._core.array import ndarray
    if isinstance(v, ndarray):
        if not v.is_cuda:
            raise ValueError(f"random (cuda): array argument on {v.device}, expected cuda:{idx}")
        return R.as_cupy(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return v
    return R.cp().asarray(np.asarray(v))


def _finish(c):
    return R.from_cupy(R.cp().ascontiguousarray(c))


# ---------------------------------------------------------------- draws

def _on_named_device(fn):
    """Run a draw with its `device` argument (positional or keyword) current: CuPy
    computes and allocates on the current device."""
    pos = list(inspect.signature(fn).parameters).index("device")

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if len(args) > pos:
            args = args[:pos] + (_index(args[pos]),) + args[pos + 1:]
            idx = args[pos]
        else:
            idx = kwargs["device"] = _index(kwargs.get("device"))
        return R.run_on(idx, fn, *args, **kwargs)
    return run


@_on_named_device
def uniform(low=0.0, high=1.0, size=None, dtype=None, device=None):
    """Uniform samples in [low, high) on a CUDA device (see ember.random.uniform)."""
    idx = _index(device)
    dt = _float_dtype(dtype)
    lo, hi = _device_array(low, idx), _device_array(high, idx)
    if not hasattr(lo, "shape") and not hasattr(hi, "shape"):
        return _finish(_draw("uniform", _shape(size), dt, lo, hi, idx))
    shape = _shape(size) if size is not None else np.broadcast_shapes(
        np.shape(lo), np.shape(hi))
    u = _draw("uniform", shape, np.dtype(np.float64), 0.0, 1.0, idx)
    return _finish((lo + (hi - lo) * u).astype(dt))


@_on_named_device
def normal(loc=0.0, scale=1.0, size=None, dtype=None, device=None):
    """Normal samples (mean loc, standard deviation scale) on a CUDA device."""
    idx = _index(device)
    dt = _float_dtype(dtype)
    m, s = _device_array(loc, idx), _device_array(scale, idx)
    if not hasattr(m, "shape") and not hasattr(s, "shape"):
        return _finish(_draw("normal", _shape(size), dt, m, s, idx))
    shape = _shape(size) if size is not None else np.broadcast_shapes(np.shape(m), np.shape(s))
    z = _draw("normal", shape, np.dtype(np.float64), 0.0, 1.0, idx)
    return _finish((m + s * z).astype(dt))


def standard_normal(size=None, dtype=None, device=None):
    return normal(0.0, 1.0, size, dtype, device=device)


def random(size=None, dtype=None, device=None):
    return uniform(0.0, 1.0, size, dtype, device=device)


def rand(*shape, dtype=None, device=None):
    return uniform(0.0, 1.0, shape if shape else None, dtype, device=device)


def randn(*shape, dtype=None, device=None):
    return normal(0.0, 1.0, shape if shape else None, dtype, device=device)


@_on_named_device
def integers(low, high=None, size=None, dtype=np.int64, endpoint=False, device=None):
    """Integers in [low, high) ([low, high] with endpoint) on a CUDA device."""
    if high is None:
        low, high = 0, low
    low, high = int(low), int(high) + (1 if endpoint else 0)
    if low >= high:
        raise ValueError(f"integers: low >= high ({low} >= {high})")
    idx = _index(device)
    u = _draw("uniform", _shape(size), np.dtype(np.float64), 0.0, 1.0, idx)
    cp = R.cp()
    v = cp.floor(low + u * float(high - low))
    v = cp.minimum(v, float(high - 1))          # rounding can not reach high
    return _finish(v.astype(np.dtype(dtype)))


def randint(low, high=None, size=None, dtype=np.int64, device=None):
    if high is None:
        low, high = 0, low
    return integers(low, high, size, dtype, device=device)


@_on_named_device
def bernoulli(p, size=None, dtype=None, device=None):
    """1.0 with probability p, else 0.0, on a CUDA device."""
    idx = _index(device)
    pv = _device_array(p, idx)
    shape = _shape(size) if size is not None else tuple(np.shape(pv))
    u = _draw("uniform", shape, np.dtype(np.float64), 0.0, 1.0, idx)
    return _finish((u < pv).astype(_float_dtype(dtype)))


@_on_named_device
def dropout_mask(shape, dtype, p, scaled=True, device=None):
    """dropout's mask on a CUDA device: 0 with probability p, else 1 / (1 - p) (1 when not
    `scaled`), of `dtype`.  The keep test reads a float32 Philox uniform for every dtype."""
    idx = _index(device)
    u = _draw("uniform", _shape(shape), np.dtype(np.float32), 0.0, 1.0, idx)
    dt = np.dtype(dtype)
    m = (u >= np.float32(p)).astype(dt)
    if scaled:
        m *= dt.type(1.0 / (1.0 - p))
    return _finish(m)


@gpu_op("nn.functional.dropout._mask")
def _dropout_mask(like, shape, p, scaled=True):
    return dropout_mask(shape, like.dtype, p, scaled, device=like.device)


@R.on_arrays_device
def fill_uniform_(x, low=0.0, high=1.0):
    """Overwrite CUDA array x with U(low, high) samples (for nn.init); returns x."""
    idx = _index(x.device)
    R.as_cupy(x)[...] = _draw("uniform", tuple(x.shape), np.dtype(x.dtype) if dtype_kind(x.dtype) == "f"
                              else np.dtype(np.float64), low, high, idx)
    x._bump_version()
    return x


@R.on_arrays_device
def fill_normal_(x, mean=0.0, std=1.0):
    """Overwrite CUDA array x with N(mean, std**2) samples (for nn.init); returns x."""
    idx = _index(x.device)
    R.as_cupy(x)[...] = _draw("normal", tuple(x.shape), np.dtype(x.dtype) if dtype_kind(x.dtype) == "f"
                              else np.dtype(np.float64), mean, std, idx)
    x._bump_version()
    return x
