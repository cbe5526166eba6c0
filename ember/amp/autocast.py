"""Autocast: run the matmul-like ops of a region in a lower precision (PyTorch's
``torch.autocast`` semantics).

Inside ``with ember.amp.autocast('cuda'):`` the ops in ``LOWER_PRECISION_OPS``
(matmul, linear, convolution, attention...) cast their floating-point array
arguments to the autocast dtype (float16 by default), and the ops in
``FLOAT32_OPS`` (softmax, log_softmax, the losses, layer and group norm, sums
and products...) cast them to float32.  Only arrays on the region's device
type are cast, and only float16 / bfloat16 / float32 ones: float64 arrays,
integer arrays and arrays on the other device type pass unchanged (as in
PyTorch).  The casts are ``x.astype(dtype)``, recorded by autograd, so the
gradients come back in each parameter's own dtype.

How ops see it: while an enabled region is open (``_ACTIVE[0]`` > 0),
:func:`_cast_args` is installed in the dispatcher
(``ember.autograd.dispatch._set_autocast``), which calls it before running or
recording every public op; with no region open nothing is installed and
autocast costs nothing.

The state is per thread (as in PyTorch); ``_ACTIVE[0]`` counts the enabled
regions open in all threads, so a region in one thread costs the others only
the thread-local lookup in :func:`_cast_args`.

CPU autocast: the default dtype is bfloat16, as in PyTorch (``ember.bfloat16``,
ml_dtypes' NumPy dtype); ``dtype=float16`` can be asked for.  Lower precision on
the CPU saves memory, not time (16-bit arithmetic runs in float32 and rounds);
convolutions stay in float32 there (``CPU_KEEP_OPS``: the CPU convolution would
widen 16-bit inputs to float32 anyway).
"""
import functools
import threading
import warnings

import numpy as np

from ember._core.dtypes import BFLOAT16

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype",
           "is_autocast_cache_enabled", "set_autocast_enabled", "set_autocast_dtype",
           "clear_autocast_cache", "casts_to_float32", "LOWER_PRECISION_OPS",
           "FLOAT32_OPS"]

# Ops run in the autocast dtype.  Value: which positional arguments to cast
# (None: every top-level floating array argument and keyword argument);
# "list": the positional arguments and the arrays inside list/tuple arguments.
LOWER_PRECISION_OPS = {
    "matmul": None, "linalg.matmul": None, "dot": None, "vdot": None, "inner": None,
    "tensordot": None, "linalg.tensordot": None, "einsum": None, "vecdot": None,
    "linalg.vecdot": None, "linalg.multi_dot": "list",
    "nn.functional.linear": None,
    "nn.functional.conv._conv": None,
    "nn.functional.conv._conv_transpose": None,
    "nn.functional.attention._sdpa": None,
    "nn.functional.attention._self_attention_core": None,
    "nn.functional.attention._flash_attention": None,     # q, k, v and float masks
}

# Ops run in float32.  Arguments that are outputs or scratch buffers written in
# place (the normalizations' ``stats``, cross-entropy's ``scratch``) must not be
# cast (a cast is a copy), hence the explicit positions there.  Batch norm is not
# here, as in PyTorch: it keeps its input's dtype, computing 16-bit activations with
# float32 statistics and parameters (on the GPU without a widened copy).
FLOAT32_OPS = {
    "nn.functional.softmax": None, "nn.functional.log_softmax": None,
    "nn.functional.loss._cross_entropy_nc": (0, 2),
    "nn.functional.loss._nll_nc": (0, 2),
    "nn.functional.mse_loss": None, "nn.functional.l1_loss": None,
    "nn.functional.smooth_l1_loss": None, "nn.functional.huber_loss": None,
    "nn.functional.kl_div": None, "nn.functional.binary_cross_entropy": None,
    "nn.functional.binary_cross_entropy_with_logits": None,
    "nn.functional.normalization._layer_norm": (0, 1, 2),
    "nn.functional.normalization._group_norm": (0, 1, 2),
    "nn.functional.softplus": None,
    "sum": None, "prod": None, "cumsum": None, "cumprod": None, "nansum": None,
    "nanprod": None, "cumulative_sum": None, "cumulative_prod": None, "logsumexp": None,
    "linalg.norm": None, "linalg.vector_norm": None, "linalg.matrix_norm": None,
    "float_power": None,
    # the ufuncs PyTorch lists, for when they dispatch through this hook too
    "exp": None, "expm1": None, "log": None, "log10": None, "log2": None, "log1p": None,
    "reciprocal": None, "sinh": None, "cosh": None, "tan": None, "arcsin": None,
    "arccos": None, "power": None, "pow": None,
}

# Lower-precision ops that stay in their inputs' dtype on the CPU: ember's CPU
# kernels for them are float32/float64 (16-bit inputs would be widened again).
CPU_KEEP_OPS = frozenset({"nn.functional.conv._conv", "nn.functional.conv._conv_transpose"})

_DEVICE_TYPES = ("cuda", "cpu")

# enabled regions open in all threads: the dispatcher's one-integer fast test
_ACTIVE = [0]
_LOCK = threading.Lock()


_LOWER = frozenset({np.dtype(np.float16), BFLOAT16})   # the lower-precision dtypes


def _default_dtype(device_type):
    return np.dtype(np.float16) if device_type == "cuda" else BFLOAT16


class _State(threading.local):
    """Per-thread autocast state: {device_type: [enabled, dtype, cache_enabled]}."""

    def __init__(self):
        # dtype None: the device type's default, resolved when used (importing
        # ember at module import could recurse)
        self.dev = {t: [False, None, True] for t in _DEVICE_TYPES}
        self.depth = 0          # open autocast regions of this thread (the cache's life)
        self.cache = {}         # (id(param), dtype) -> (param, cast)


_STATE = _State()


def _check_device_type(device_type, where):
    if not isinstance(device_type, str):
        raise TypeError(f"{where}: device_type must be a string ('cuda' or 'cpu'), got "
                        f"{type(device_type).__name__}")
    t = device_type.split(":", 1)[0]
    if t not in _DEVICE_TYPES:
        raise ValueError(f"{where}: device_type must be 'cuda' or 'cpu', got {device_type!r}")
    return t


def _resolve_dtype(dtype, where):
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: dtype must be a floating dtype (float16, bfloat16), got "
                        f"{dtype!r}") from None


def is_autocast_enabled(device_type="cuda"):
    """Whether an enabled autocast region for `device_type` is open in this thread.

    >>> import ember, ember.amp
    >>> ember.amp.is_autocast_enabled("cpu")
    False
    >>> with ember.amp.autocast("cpu"):
    ...     ember.amp.is_autocast_enabled("cpu")
    True
    """
    t = _check_device_type(device_type, "is_autocast_enabled")
    return bool(_STATE.dev[t][0])


def get_autocast_dtype(device_type="cuda"):
    """The dtype autocast casts to on `device_type` (in this thread).

    >>> import ember, ember.amp
    >>> ember.amp.get_autocast_dtype("cuda")
    dtype('float16')
    """
    t = _check_device_type(device_type, "get_autocast_dtype")
    d = _STATE.dev[t][1]
    return d if d is not None else _default_dtype(t)


def is_autocast_cache_enabled(device_type="cuda"):
    """Whether casts of parameters are cached inside the current region."""
    t = _check_device_type(device_type, "is_autocast_cache_enabled")
    return bool(_STATE.dev[t][2])


def set_autocast_enabled(device_type, enabled):
    """Low-level switch (PyTorch's ``torch.set_autocast_enabled``); prefer the
    :class:`autocast` context manager, which restores the previous state."""
    t = _check_device_type(device_type, "set_autocast_enabled")
    st = _STATE.dev[t]
    enabled = bool(enabled)
    if st[0] != enabled:
        with _LOCK:
            _ACTIVE[0] += 1 if enabled else -1
            # the dispatcher calls the hook only while some region is enabled
            if _ACTIVE[0] == (1 if enabled else 0):
                _install(_cast_args if enabled else None)
        st[0] = enabled


def _install(fn):
    from ember.autograd import dispatch
    setter = getattr(dispatch, "_set_autocast", None)
    if setter is not None:
        setter(fn)


def set_autocast_dtype(device_type, dtype):
    """Low-level setter of the autocast dtype of `device_type` in this thread."""
    t = _check_device_type(device_type, "set_autocast_dtype")
    _STATE.dev[t][1] = _resolve_dtype(dtype, "set_autocast_dtype")


def clear_autocast_cache():
    """Drop the cached parameter casts of this thread."""
    _STATE.cache.clear()


class autocast:
    """Context manager and decorator: run the region's matmul-like ops in lower
    precision and its precision-sensitive ops in float32.

    Args:
        device_type: ``'cuda'`` or ``'cpu'``: only arrays on that device type are cast.
        dtype: the lower-precision dtype (default float16 on 'cuda', bfloat16 on
            'cpu').
        enabled: False makes the region a no-op (and disables an enclosing one).
        cache_enabled: cache the casts of leaf arrays that require grad (the
            parameters) for the life of the outermost region, so a weight used
            several times is cast once.

    >>> import ember, ember.amp
    >>> a = ember.ones((2, 3)); b = ember.ones((3, 2))
    >>> with ember.amp.autocast("cpu", dtype=ember.float16):
    ...     c = ember.matmul(a, b)
    ...     s = ember.nn.functional.softmax(c, dim=-1)
    >>> c.dtype, s.dtype
    (dtype('float16'), dtype('float32'))
    """

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=True):
        self.device = _check_device_type(device_type, "autocast")
        self.fast_dtype = None if dtype is None else _resolve_dtype(dtype, "autocast")
        self._enabled = bool(enabled)
        self._cache_enabled = bool(cache_enabled) if cache_enabled is not None else True
        self._saved = []

    def __enter__(self):
        t = self.device
        dtype = self.fast_dtype if self.fast_dtype is not None else _default_dtype(t)
        enabled = self._enabled
        if enabled and dtype not in _LOWER and dtype != np.dtype(np.float32):
            warnings.warn(f"autocast: dtype {dtype} is not supported on {t!r} (supported: "
                          f"float16, bfloat16, float32); disabling autocast", stacklevel=2)
            enabled = False
        if enabled and t == "cuda":
            import ember.cuda
            avail = getattr(ember.cuda, "is_available", None)
            if avail is not None and not avail():
                warnings.warn("autocast: device_type 'cuda' was asked for but CUDA is not "
                              "available; disabling autocast", stacklevel=2)
                enabled = False
        st = _STATE.dev[t]
        self._saved.append((st[0], st[1], st[2]))
        _STATE.depth += 1
        set_autocast_enabled(t, enabled)
        st[1] = dtype
        st[2] = self._cache_enabled
        return self

    def __exit__(self, *exc):
        t = self.device
        enabled, dtype, cache = self._saved.pop()
        set_autocast_enabled(t, enabled)
        st = _STATE.dev[t]
        st[1], st[2] = dtype, cache
        _STATE.depth -= 1
        if _STATE.depth == 0:
            _STATE.cache.clear()        # PyTorch: the cache lives as long as the outer region
        return False

    def __call__(self, func):
        """Use as a decorator: the function runs inside this region."""
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return wrapper

    def __repr__(self):
        return (f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, "
                f"enabled={self._enabled})")


def casts_to_float32(x):
    """Whether an enabled autocast region for x's device type is open in this thread:
    a public wrapper that computes a FLOAT32_OPS op in float32 and would cast the
    result back to its input's dtype (cross_entropy on float16 logits) keeps float32
    then, as PyTorch's autocast does."""
    return bool(_ACTIVE[0]) and bool(
        _STATE.dev["cuda" if getattr(x, "is_cuda", False) else "cpu"][0])


# ------------------------------------------------------------------ the dispatcher hook

_F32 = np.dtype(np.float32)
_ELIGIBLE = _LOWER | {_F32}      # the dtypes autocast may cast from


def _cast_args(name, args, kwargs):
    """The dispatcher's hook: ``(args, kwargs)`` with the floating arrays cast as
    autocast wants for op `name`, or the very same objects when nothing applies.

    Installed in ``DiffOp.__call__`` while ``_ACTIVE[0]`` is non-zero; it runs before
    the op runs or is recorded (so the casts are recorded by autograd)."""
    which = LOWER_PRECISION_OPS.get(name, 0)
    f32 = which == 0
    if f32:
        which = FLOAT32_OPS.get(name, 0)
        if which == 0:
            return args, kwargs
    devs = _STATE.dev
    if not (devs["cuda"][0] or devs["cpu"][0]):
        return args, kwargs             # regions are open, but in other threads
    from ember._core.array import ndarray
    eligible = _ELIGIBLE
    cache = _STATE.cache

    def cast(x):
        if not isinstance(x, ndarray):
            return x
        t = "cuda" if getattr(x, "is_cuda", False) else "cpu"
        st = devs[t]
        if not st[0] or x.dtype not in eligible:
            return x                    # other device type, float64, integers...
        if t == "cpu" and not f32 and name in CPU_KEEP_OPS:
            return x
        dtype = _F32 if f32 else (st[1] if st[1] is not None else _default_dtype(t))
        if x.dtype == dtype:
            return x
        if not f32 and st[2] and x.requires_grad and x.grad_fn is None:
            # a parameter: cast once per region (PyTorch's weight cast cache)
            key = (id(x), dtype)
            hit = cache.get(key)
            if hit is not None and hit[0] is x:
                return hit[1]
            out = x.astype(dtype)
            cache[key] = (x, out)
            return out
        return x.astype(dtype)

    if which is None:
        new = tuple([cast(a) for a in args])
    elif which == "list":
        new = tuple([(type(a)([cast(e) for e in a]) if isinstance(a, (list, tuple))
                      else cast(a)) for a in args])
    else:
        new = tuple([cast(a) if i in which else a for i, a in enumerate(args)])
    if kwargs and which is None:
        kwargs = {k: (v if k == "out" else cast(v)) for k, v in kwargs.items()}
    return new, kwargs
