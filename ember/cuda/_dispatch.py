"""Which code runs a public op when its arrays live on a GPU.

``DiffOp.__call__`` (ember/autograd/dispatch.pyx) hands every call with a GPU
array argument to :func:`call`.  Autograd is unaffected: the op records its
gradient rule as on the host, and the rule's ember ops dispatch here too.
The order of resolution:

1. a GPU implementation registered with ``@gpu_op(name)`` (ember's CUDA
   kernels, cuBLAS through CuPy, or a CuPy formulation);
2. the host implementation itself when its module builds results only from
   views, ember ops and fresh arrays (``manipulation``, ``indexing``...): it
   runs with the op's GPU as the default and the allocation device, so what it
   allocates lands there; if it needs host memory after all it raises HostOnlyError before
   touching any data, and the call goes on to
3. CuPy's function of the same name (NumPy's namespace), on zero-copy views;
4. otherwise NotImplementedError naming the op and the device.
"""
import importlib
import itertools
import pkgutil

import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray, HostOnlyError
from ember.cuda import _runtime as R

_IMPLS = {}

# host implementations that are device-generic (no CPU kernel or NumPy call
# touches array data without going through numpy_view, which refuses GPU arrays)
_GENERIC_MODULES = {"ember._api.manipulation", "ember._api.indexing", "ember._api.creation",
                    "ember._api.misc", "ember._api.sorting", "ember._api.dtype_funcs",
                    "ember._api.interop", "ember.nn.modules.rnn", "ember.lib.stride_tricks",
                    "ember._api.fperr"}

# ember keyword spellings CuPy does not know
_KW_ALIASES = {"dim": "axis", "keepdim": "keepdims"}


def gpu_op(*names):
    """Register the decorated function as the GPU implementation of the public ops
    `names` (DiffOp names: ``"sum"``, ``"linalg.norm"``, ``"nn.functional.softmax"``)."""
    def register(fn):
        for name in names:
            _IMPLS[name] = fn
        return fn
    return register


def _devices(args, kwargs):
    """The one CUDA device of the array arguments; a clear error when they are spread
    over several devices."""
    gpu = None
    cpu_shape = None
    for a in _iter_arrays(args, kwargs):
        if a.is_cuda:
            if gpu is None:
                gpu = a.device
            elif a.device != gpu:
                return gpu, a.device, a.shape
        elif a.ndim > 0:
            cpu_shape = a.shape
    if cpu_shape is not None:
        return gpu, _array.CPU, cpu_shape
    return gpu, None, None


def _iter_arrays(args, kwargs):
    for a in itertools.chain(args, kwargs.values()):
        if isinstance(a, ndarray):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (e for e in a if isinstance(e, ndarray))


class host_context:
    """Run host code on host arrays from inside a GPU op (CPU default and allocation
    device for the block)."""

    def __enter__(self):
        self.prev = _array._swap_default_device(None)
        self.prev_alloc = _array._swap_alloc_device(None)
        return self

    def __exit__(self, *exc):
        _array._swap_default_device(self.prev)
        _array._swap_alloc_device(self.prev_alloc)
        return False


def _has_numpy(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, np.ndarray) or (isinstance(a, (list, tuple)) and
                                         any(isinstance(e, np.ndarray) for e in a)):
            return True
    return False


def _upload(a, dev):
    """NumPy arrays given to an op on GPU arrays are copied to that GPU (host data has no
    device, like a Python scalar); ember arrays on another device stay an error."""
    if isinstance(a, np.ndarray):
        return R.from_host(a, dev.index)
    if isinstance(a, tuple):
        return tuple(_upload(e, dev) for e in a)
    if isinstance(a, list):
        return [_upload(e, dev) for e in a]
    return a


def call(op, args, kwargs):
    """Run public op `op` (a DiffOp) on GPU arguments."""
    name = op.name
    dev, other, other_shape = _devices(args, kwargs)
    if other is not None:
        raise RuntimeError(f"ember.{name}: expected all arrays on one device, got arrays on "
                           f"{dev} and on {other} (shape {tuple(other_shape)}); move them "
                           f"with .to('{dev}') or .cpu()")
    if _has_numpy(args, kwargs):
        args, kwargs = _upload(args, dev), {k: _upload(v, dev) for k, v in kwargs.items()}
    return R.run_on(dev.index, _call_on, op, dev, args, kwargs)


def _call_on(op, dev, args, kwargs):
    """call's body, with dev current (and the default and allocation device)."""
    name = op.name
    prev = _array._swap_default_device(dev)
    prev_alloc = _array._swap_alloc_device(dev)
    try:
        impl = _IMPLS.get(name)
        if impl is not None:
            return impl(*args, **kwargs)
        fn = op.fn
        if getattr(fn, "__module__", None) in _GENERIC_MODULES:
            try:
                return fn(*args, **kwargs)
            except HostOnlyError:
                pass
        return cupy_call(name, args, kwargs)
    finally:
        _array._swap_default_device(prev)
        _array._swap_alloc_device(prev_alloc)


def _to_cupy(a):
    if isinstance(a, ndarray):
        if a.is_cuda:
            return R.as_cupy(a)
        return a.item() if a.ndim == 0 else R.cp().asarray(_array._numpy(a))
    if isinstance(a, list):
        return [_to_cupy(e) for e in a]
    if isinstance(a, tuple):
        return tuple(_to_cupy(e) for e in a)
    return a


def _from_cupy(r):
    c = R.cp()
    if isinstance(r, c.ndarray):
        return R.from_cupy(r)
    if isinstance(r, tuple):
        return tuple(_from_cupy(e) for e in r)
    if isinstance(r, list):
        return [_from_cupy(e) for e in r]
    return r


def cupy_function(name):
    c = R.cp()
    if name.startswith("linalg."):
        return getattr(c.linalg, name[len("linalg."):], None)
    if "." in name:
        return None
    return getattr(c, name, None)


def cupy_call(name, args, kwargs):
    """ember.<name>(*args, **kwargs) computed by CuPy's function of the same name."""
    fn = cupy_function(name)
    if fn is None:
        raise NotImplementedError(
            f"ember.{name} is not implemented for CUDA arrays yet; compute it on the host "
            f"(x.cpu()) and move the result back with .to('cuda')")
    ckw = {}
    out = None
    for k, v in kwargs.items():
        if k == "out" and v is not None:
            out = v
        ckw[_KW_ALIASES.get(k, k)] = _to_cupy(v)
    try:
        res = fn(*_to_cupy(args), **ckw)
    except TypeError as err:
        raise TypeError(f"ember.{name} on cuda (through cupy.{getattr(fn, '__name__', name)}): "
                        f"{err}") from None
    if out is not None:
        out._bump_version()
        return out
    return _from_cupy(res)


LOAD_ERRORS = {}        # module name -> the exception that stopped it loading


def load_ops():
    """Import every ``ember/cuda/ops_*.py`` module (each registers its GPU ops).

    A module that fails to import is reported with a warning and recorded in
    LOAD_ERRORS; its ops then fall back to CuPy or raise NotImplementedError."""
    import warnings
    import ember.cuda as pkg
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("ops_"):
            try:
                importlib.import_module(f"ember.cuda.{info.name}")
            except Exception as err:            # keep the rest of the backend usable
                LOAD_ERRORS[info.name] = err
                warnings.warn(f"ember.cuda: {info.name} did not load "
                              f"({type(err).__name__}: {err})", RuntimeWarning)
