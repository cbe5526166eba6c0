"""Which code runs a public op when its arrays live on a GPU: the one GPU dispatch.

``DiffOp.__call__`` (ember/autograd/dispatch.pyx) hands every call with a GPU
array argument to :func:`call`, with the op object itself.  The elementwise ufuncs
(``a + b``, ``ember.exp``) are not DiffOps: their C dispatcher
(ember/_core/elementwise.pyx) asks :func:`elementwise_impl` for the implementation
registered under the ufunc's name (ember/cuda/_elementwise.py registers every row of
the op table), once per op code, and keeps it until the registrations change; only
the storage-level copies (``cast``, ``assign``) bypass the registry.  Autograd is
unaffected: the op records its gradient rule as on the host, and the rule's ember
ops dispatch here too.  The op's route is resolved once and kept on the op object
(``op._gpu_route``; a change to the registrations invalidates it):

1. a GPU implementation registered with ``@gpu_op(name)`` under the op's public
   name (ember's CUDA kernels, cuBLAS through CuPy, or a CuPy formulation);
   ``registered_names()`` lists them, and the tests check that each names an op.
   An implementation returns ``NotImplemented`` for the inputs it has no kernel for
   (integer dtypes, complex...): the op's own definition then runs, as in 2 (the
   dispatcher hands the composite over; the backend never imports it);
   A function declared ``fn.device_generic = True`` where it is written (built only
   from ember ops) is its own GPU implementation.  An implementation declared
   ``fn.multi_device = True`` takes arrays of several GPUs (an optimizer step over a
   model-parallel parameter group): it is called as it is, without the one-device
   check, and places each launch on its arrays' device itself;
2. the op's own definition, when its module declares ``DEVICE_GENERIC = True``
   (views, ember ops and fresh arrays; see :func:`is_device_generic`).  It runs
   with the op's GPU as the default and the allocation device, so what it
   allocates lands there; if it needs host memory after all it raises
   HostOnlyError before touching any data, and the call goes on to
3. CuPy's function of the same name (NumPy's namespace), on zero-copy views;
4. otherwise NotImplementedError naming the op and the device.

This module never imports the layers above it: the op objects come in as arguments.
"""
import importlib
import itertools
import pkgutil
import sys

import numpy as np

from ember._core import array as _array
from ember._core import elementwise as _ew
from ember._core.array import ndarray, HostOnlyError
from ember.cuda import _runtime as R

class _Registry(dict):
    """public op name -> GPU implementation; every change bumps ``version``, which
    retires the routes cached on op objects, and drops the elementwise dispatcher's
    routes kept per op code."""
    version = 0

    def __setitem__(self, key, value):
        type(self).version += 1
        super().__setitem__(key, value)
        _ew._forget_gpu_routes()

    def __delitem__(self, key):
        type(self).version += 1
        super().__delitem__(key)
        _ew._forget_gpu_routes()


_IMPLS = _Registry()

# ember keyword spellings CuPy does not know
_KW_ALIASES = {"dim": "axis", "keepdim": "keepdims"}
# NumPy's parameter names (ember's) where CuPy's function names them otherwise
_KW_ALIASES_BY_OP = {"extract": {"arr": "a"}, "intersect1d": {"ar1": "arr1", "ar2": "arr2"},
                     "union1d": {"ar1": "arr1", "ar2": "arr2"}}


def cupy_keyword(name, keyword):
    """The name CuPy's function `name` gives ember's keyword argument `keyword`."""
    return _KW_ALIASES_BY_OP.get(name, {}).get(keyword, _KW_ALIASES.get(keyword, keyword))


def gpu_op(*names):
    """Register the decorated function as the GPU implementation of the public ops
    `names` (DiffOp names: ``"sum"``, ``"linalg.norm"``, ``"nn.functional.softmax"``)."""
    def register(fn):
        for name in names:
            _IMPLS[name] = fn
        return fn
    return register


def registered_names():
    """The public op names with a registered GPU implementation (sorted): the ops
    (``DiffOp``) and the elementwise ufuncs."""
    return sorted(_IMPLS)


def elementwise_impl(name):
    """The GPU implementation registered for elementwise op `name` (an ``ember.ufunc``):
    what ember/_core/elementwise.pyx calls for GPU operands, asked once per op code and
    kept there until the registrations change."""
    impl = _IMPLS.get(name)
    if impl is None:
        raise NotImplementedError(f"ember.{name} is not implemented for CUDA arrays (no GPU "
                                  f"implementation is registered for it)")
    return impl


def is_device_generic(fn):
    """Whether the host definition `fn` runs unchanged on GPU arrays: declared by
    ``fn.device_generic = True`` or ``DEVICE_GENERIC = True`` in its module (no CPU
    kernel or NumPy call touches array data without going through numpy_view, which
    refuses GPU arrays)."""
    if getattr(fn, "device_generic", False):
        return True
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    return bool(getattr(module, "DEVICE_GENERIC", False))


_IMPL, _GENERIC, _CUPY, _MULTI_DEVICE = 0, 1, 2, 3


def route(op):
    """(kind, function) that runs `op` on GPU arrays: a registered implementation (or the
    op's definition declared device-generic itself), the definition of a device-generic
    module (CuPy after a HostOnlyError), or CuPy's function of its name; a registered
    implementation declared multi_device is of kind _MULTI_DEVICE."""
    cached = op.__dict__.get("_gpu_route")
    if cached is not None and cached[0] == _Registry.version:
        return cached[1]
    impl = _IMPLS.get(op.name)
    if impl is not None:
        r = (_MULTI_DEVICE if getattr(impl, "multi_device", False) else _IMPL, impl)
    elif getattr(op.fn, "device_generic", False):
        r = (_IMPL, op.fn)
    elif is_device_generic(op.fn):
        r = (_GENERIC, op.fn)
    else:
        r = (_CUPY, None)
    op.__dict__["_gpu_route"] = (_Registry.version, r)
    return r


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
    kind, fn = route(op)
    if kind == _MULTI_DEVICE:
        return fn(*args, **kwargs)
    name = op.name
    dev, other, other_shape = _devices(args, kwargs)
    if other is not None:
        raise RuntimeError(f"ember.{name}: expected all arrays on one device, got arrays on "
                           f"{dev} and on {other} (shape {tuple(other_shape)}); move them "
                           f"with .to('{dev}') or .cpu()")
    if _has_numpy(args, kwargs):
        args, kwargs = _upload(args, dev), {k: _upload(v, dev) for k, v in kwargs.items()}
    return R.run_on(dev.index, _call_on, op, kind, fn, dev, args, kwargs)


def _call_on(op, kind, fn, dev, args, kwargs):
    """call's body (op's route is kind, fn), with dev current (and the default and
    allocation device)."""
    name = op.name
    prev = _array._swap_default_device(dev)
    prev_alloc = _array._swap_alloc_device(dev)
    try:
        if kind == _IMPL:
            res = fn(*args, **kwargs)
            if res is not NotImplemented:
                return res
            kind, fn = _GENERIC, op.fn
        if kind == _GENERIC:
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
        ckw[cupy_keyword(name, k)] = _to_cupy(v)
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
    import os
    import warnings
    for info in pkgutil.iter_modules([os.path.dirname(os.path.abspath(__file__))]):
        if info.name.startswith("ops_"):
            try:
                importlib.import_module(f"ember.cuda.{info.name}")
            except Exception as err:            # keep the rest of the backend usable
                LOAD_ERRORS[info.name] = err
                warnings.warn(f"ember.cuda: {info.name} did not load "
                              f"({type(err).__name__}: {err})", RuntimeWarning)
