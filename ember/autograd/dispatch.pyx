# cython: wraparound=True, boundscheck=True
"""The autograd-aware entry of every public ember function.

``ember.<name>`` is a ``DiffOp`` around the plain function: with grad mode off,
or no argument that requires grad, it calls the function straight away (one
flag test and a scan of the arguments).  Otherwise it runs the function with
grad mode off and records its gradient rule; a function without a rule refuses
to silently drop gradients when it returns floating-point arrays.
"""
cimport cython
from ember._core.array cimport ndarray, grad_enabled, set_grad_mode, alloc_is_cpu
from ember._core.array import _swap_alloc_device
from ember._core import gpu_hooks as _gpu_hooks
from ember._core.public import ops as _public_ops
from ember.autograd.engine cimport Rule, record

import inspect as _inspect
from ember._core.dtypes cimport KIND


ctypedef bint (*array_test)(object a) noexcept


cdef inline bint _tracked(object a) noexcept:
    return isinstance(a, ndarray) and (<ndarray>a)._requires_grad


cdef inline bint _dev(object a) noexcept:
    return isinstance(a, ndarray) and (<ndarray>a).storage.device_index >= 0


cdef bint _any_arg(tuple args, dict kwargs, array_test test):
    """Whether test holds for an argument, or for an item of a list/tuple argument."""
    for a in args:
        if test(a):
            return True
        if isinstance(a, (list, tuple)):
            for e in a:
                if test(e):
                    return True
    if kwargs:
        for a in kwargs.values():
            if test(a):
                return True
            if isinstance(a, (list, tuple)):
                for e in a:
                    if test(e):
                        return True
    return False


cdef inline bint _any_tracked(tuple args, dict kwargs):
    return _any_arg(args, kwargs, _tracked)


cdef inline bint _any_on_gpu(tuple args, dict kwargs):
    """Whether an array argument (also inside a list/tuple argument) is in GPU memory."""
    return _any_arg(args, kwargs, _dev)


cdef object _gpu_call = None     # ember.cuda._dispatch.call, once the GPU backend is up
                                 # (ember._core.gpu_hooks)
cdef object _autocast = None     # ember.amp's argument caster while an autocast region is open


def _set_gpu_dispatch(fn):
    global _gpu_call
    _gpu_call = fn


_gpu_hooks.on_gpu_start(_set_gpu_dispatch)     # ember.cuda's dispatcher, once it starts


def _set_autocast(fn):
    """Install (or with None remove) ``fn(name, args, kwargs) -> (args, kwargs)``, which
    every public op calls first while autocast is on (zero cost while it is off)."""
    global _autocast
    _autocast = fn


cdef bint _has_float_output(object res):
    cdef char k
    if isinstance(res, ndarray):
        k = KIND[(<ndarray>res).tcode]         # (bfloat16 is 'f' in ember's table)
        return k == b'f' or k == b'c'
    if isinstance(res, (tuple, list)):
        return any(_has_float_output(r) for r in res)
    return False


cdef int _check_out(str name, object out) except -1:
    """A read-only ``out=`` array (or one in a tuple of them) is refused before the op
    runs, whatever kernel or device would write into it (NumPy's ValueError)."""
    if out is None:
        return 0
    if isinstance(out, ndarray):
        if (<ndarray>out).readonly:
            raise ValueError(f"{name}: output array is read-only")
    elif isinstance(out, tuple):
        for o in out:
            _check_out(name, o)
    return 0


@cython.final
cdef class DiffOp:
    """A public ember function with its gradient rule (``rule`` None: no gradient)."""
    cdef public object fn
    cdef public Rule rule
    cdef public str name
    cdef public bint nondiff        # results are constants for autograd: never recorded
    cdef object _sig
    cdef dict __dict__

    def __init__(self, fn, name, rule=None, nondiff=False):
        self.fn = fn
        self.name = name
        self.rule = rule
        self.nondiff = nondiff
        self._sig = None
        for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
            if hasattr(fn, attr):
                setattr(self, attr, getattr(fn, attr))
        setattr(self, "__wrapped__", fn)

    def __repr__(self):
        return f"<ember function {self.name}>"

    def __reduce__(self):
        return (_public, (self.name,))

    def __call__(self, *args, **kwargs):
        cdef bint gpu = False
        if kwargs:
            _check_out(self.name, kwargs.get("out"))
        if _autocast is not None:
            args, kwargs = _autocast(self.name, args, kwargs)
        if _gpu_call is not None and _any_on_gpu(args, kwargs):
            gpu = True
        if not gpu and not alloc_is_cpu():
            return self._on_host(args, kwargs)
        if self.nondiff or not grad_enabled() or not _any_tracked(args, kwargs):
            if gpu:
                return _gpu_call(self, args, kwargs)
            if kwargs:
                return self.fn(*args, **kwargs)
            return self.fn(*args)       # (Cython copies kwargs for a ** call, even empty)
        return self._record(args, kwargs, gpu)

    def _on_host(self, args, kwargs):
        """A host op called from inside a GPU op: it allocates on the host again."""
        prev = _swap_alloc_device(None)
        try:
            return self(*args, **kwargs)
        finally:
            _swap_alloc_device(prev)

    cdef object _record(self, tuple args, dict kwargs, bint gpu):
        if kwargs.get("out") is not None:
            raise RuntimeError(f"{self.name}: out= is not supported when an input requires "
                               f"grad (autograd records new arrays); drop out= or call it "
                               f"under ember.no_grad()")
        if kwargs:
            for a in kwargs.values():
                if _tracked(a) or (isinstance(a, (list, tuple)) and any(_tracked(e) for e in a)):
                    args, kwargs = self._positional(args, kwargs)
                    break
            for k, a in kwargs.items():
                if _tracked(a) or (isinstance(a, (list, tuple)) and any(_tracked(e) for e in a)):
                    raise RuntimeError(
                        f"ember.{self.name}: the keyword-only argument {k}= requires grad, "
                        f"but gradients flow only to positional arguments of this function; "
                        f"pass it positionally if the signature allows, or detach it")
        set_grad_mode(False)
        try:
            res = _gpu_call(self, args, kwargs) if gpu else self.fn(*args, **kwargs)
        finally:
            set_grad_mode(True)
        if self.rule is None:
            if _has_float_output(res):
                raise RuntimeError(
                    f"ember.{self.name} does not support autograd: an input requires grad but "
                    f"this function has no gradient rule; call it on x.detach() or under "
                    f"ember.no_grad() if no gradient should flow through it")
            return res
        return record(self.rule, args, kwargs if kwargs else None, res)

    cdef tuple _positional(self, tuple args, dict kwargs):
        """Move array keyword arguments to their positions (rules see them positionally)."""
        if self._sig is None:
            self._sig = _inspect.signature(self.fn)
        bound = self._sig.bind(*args, **kwargs)
        bound.apply_defaults()      # else .args stops at the first parameter left out
        return tuple(bound.args), dict(bound.kwargs)


def _public(str name not None):
    """The public function ``ember.<name>`` (``linalg.<name>`` too): how DiffOps pickle."""
    obj = _public_ops()
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj
