"""What a piece of GPU code asks of the GPU, counted on the emulation (no GPU needed).

Under ``EMBER_CUDA_EMULATION=1`` (after :func:`cuda_emu.install`), :func:`install`
hooks the emulation's boundaries once, and ``with counting() as c:`` then counts:

- ``c.kernels``: ember's own kernel launches (``R.launch``), by kernel name;
- ``c.gemms``: cuBLAS GEMM calls (``cublasGemmStridedBatchedEx`` through ember/cuda/_gemm);
- ``c.cupy``: CuPy calls that run a kernel: ufuncs and reductions, NumPy-API functions,
  ElementwiseKernels, ``astype``/``copy``/``fill``, indexing with index arrays and
  assignment into a device array, by name (only the outermost call counts: a CuPy
  function made of other CuPy calls is one call here, as it is one call of the user);
- ``c.memsets`` (cudaMemsetAsync), ``c.copies`` (device-to-device cudaMemcpyAsync) and
  ``c.uploads`` (host-to-device copies);
- ``c.readbacks``: every device-to-host read or wait (``.get()``, ``asnumpy``, ``item()``,
  ``tolist()``, ``bool()``/``float()``/``int()`` of a device array, ``synchronize()`` of a
  device, stream or event), each with the ember call sites that led to it.

``install(null=True)`` makes it a *null launcher*: ember kernels, GEMMs and
ElementwiseKernels are counted and skipped (their outputs keep whatever the memory
held), so a step's host cost (ember's Python, dispatch, allocation, CuPy's host side
on tiny arrays) is measured alone.  The counts do not depend on what the memory
holds; nothing of a null run's values may be used.  An emulation: real CuPy calls
cost more host time than the NumPy calls that stand in for them, and ember's
cuLaunchKernel fast path (``_launch.binary_contig``) is off here, so every
elementwise op takes the general path.
"""
import collections
import contextlib
import os
import sys
import traceback

import numpy as np

_EMBER = os.sep + "ember" + os.sep
_STATE = {"installed": False, "null": False, "counter": None, "depth": 0}


class Counter:
    """The counts of one ``counting()`` block."""

    def __init__(self, sites=False):
        self.sites = collections.Counter() if sites else None   # (cupy call, ember site)
        self.kernels = collections.Counter()
        self.gemms = 0
        self.cupy = collections.Counter()
        self.memsets = 0
        self.copies = 0                 # cudaMemcpyAsync (device to device)
        self.uploads = 0
        self.readbacks = []             # [(what, (ember call sites, innermost first))]

    @property
    def launches(self):
        """Everything that queues work on the GPU: ember kernels, GEMMs, CuPy kernels,
        memsets and device copies (uploads not included)."""
        return sum(self.kernels.values()) + self.gemms + sum(self.cupy.values()) + \
            self.memsets + self.copies

    def readback_sites(self):
        """{(what, outermost-first chain of 'file:line in function'): count}."""
        out = collections.Counter()
        for what, sites in self.readbacks:
            out[(what, tuple(reversed(sites)))] += 1
        return out

    def summary(self):
        return {"launches": self.launches, "ember_kernels": sum(self.kernels.values()),
                "gemms": self.gemms, "cupy": sum(self.cupy.values()), "memsets": self.memsets, "copies": self.copies,
                "uploads": self.uploads, "readbacks": len(self.readbacks)}


def _ember_sites(limit=6):
    """The ember frames of the current stack (innermost first), as 'path:line in fn'."""
    sites = []
    for fr in reversed(traceback.extract_stack()[:-2]):
        f = fr.filename
        i = f.rfind(_EMBER)
        if i < 0:
            continue
        sites.append(f"{f[i + 1:]}:{fr.lineno} in {fr.name}")
        if len(sites) == limit:
            break
    return tuple(sites)


def _counter():
    return _STATE["counter"]


class _Outermost:
    """Inside it, CuPy calls made by the emulation itself are not counted."""
    __slots__ = ()

    def __enter__(self):
        _STATE["depth"] += 1

    def __exit__(self, *exc):
        _STATE["depth"] -= 1
        return False


_OUTERMOST = _Outermost()


def _outermost():
    return _OUTERMOST


#: NumPy-API functions that launch nothing on a GPU (metadata, views, allocation)
NO_KERNEL = frozenset((
    "shape", "ndim", "size", "result_type", "broadcast_to", "broadcast_arrays", "transpose",
    "swapaxes", "moveaxis", "rollaxis", "expand_dims", "squeeze", "atleast_1d", "atleast_2d",
    "atleast_3d", "empty", "empty_like", "may_share_memory", "shares_memory", "iscomplexobj",
    "isrealobj", "can_cast", "promote_types", "min_scalar_type", "ndarray", "real", "imag",
    "split", "array_split", "diagonal"))
#: ... and those that copy only when they must (counted when the result is new memory)
MAYBE_COPY = frozenset(("ascontiguousarray", "asfortranarray", "reshape", "ravel",
                        "require", "astype", "asarray", "flatten"))


def _first_array(values):
    for v in values:
        if isinstance(v, np.ndarray):
            return v
        if isinstance(v, (list, tuple)):
            a = _first_array(v)
            if a is not None:
                return a
    return None


def _launches(name, args, result):
    """Whether CuPy's `name`(args) -> result ran a kernel."""
    if name in NO_KERNEL:
        return False
    if name in MAYBE_COPY:
        src = _first_array(args)
        if src is not None and isinstance(result, np.ndarray) and \
                np.may_share_memory(src, result):
            return False
    return True


def _count_cupy(name):
    c = _counter()
    if c is not None and _STATE["depth"] == 0:
        c.cupy[name] += 1
        if c.sites is not None:
            c.sites[(name, _ember_sites(1))] += 1


def _counting_now():
    return _counter() is not None and _STATE["depth"] == 0


def _call_counted(name, fn, args, kwargs, inspect_args=None):
    """fn(*args, **kwargs), counted as a CuPy kernel call `name` when it launches one."""
    if not _counting_now():
        with _outermost():
            return fn(*args, **kwargs)
    with _outermost():
        res = fn(*args, **kwargs)
    if _launches(name, args if inspect_args is None else inspect_args, res):
        _count_cupy(name)
    return res


def _readback(what):
    c = _counter()
    if c is not None and _STATE["depth"] == 0:
        c.readbacks.append((what, _ember_sites()))


@contextlib.contextmanager
def counting(sites=False):
    """Count what the block asks of the (emulated) GPU; yields a :class:`Counter`.
    ``sites``: also note the ember line of each CuPy call (``Counter.sites``; slower)."""
    if not _STATE["installed"]:
        raise RuntimeError("counting(): call tests.cuda_emu.counting.install() first")
    prev = _STATE["counter"]
    c = _STATE["counter"] = Counter(sites)
    try:
        with np.errstate(all="ignore"):     # a null run computes CuPy calls on garbage
            yield c
    finally:
        _STATE["counter"] = prev


def _wrap_method(cls, name, kind, count):
    orig = getattr(cls, name)

    def hooked(self, *args, **kwargs):
        if kind == "readback":
            _readback(f"{count}")
        elif kind == "cupy" and count(self, args):
            return _call_counted(name, orig, (self,) + args, kwargs)
        with _outermost():
            return orig(self, *args, **kwargs)
    hooked.__name__ = name
    setattr(cls, name, hooked)


def _has_array_index(self, args):
    key = args[0] if args else None
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (np.ndarray, list)) for k in items)


def install(null=False):
    """Hook the emulation (once per process; cuda_emu.install() must have run).
    ``null``: skip ember kernels, GEMMs and ElementwiseKernels (count them only)."""
    if _STATE["installed"]:
        if bool(null) != _STATE["null"]:
            raise RuntimeError("counting.install: already installed with null="
                               f"{_STATE['null']}")
        return
    import cuda_emu
    import fakecupy
    from ember.cuda import _gemm, _runtime
    if "cupy" not in sys.modules or sys.modules["cupy"] is not fakecupy:
        raise RuntimeError("counting.install: the emulation is not installed "
                           "(EMBER_CUDA_EMULATION=1 and cuda_emu.install())")
    _STATE["null"] = bool(null)

    # ember's kernels and cuBLAS: counted, run unless null
    run_kernel, run_gemm = _runtime.launch, _gemm._cublas_gemm

    def launch(name, grid, block, args, shmem=0):
        c = _counter()
        if c is not None:
            c.kernels[name] += 1
        if not _STATE["null"]:
            with _outermost():
                run_kernel(name, grid, block, args, shmem)
    _runtime.launch = launch            # R.launch, the one launch
    cuda_emu._launch_kernel = launch

    def gemm(p, first, second, out, alpha):
        c = _counter()
        if c is not None:
            c.gemms += 1
        if not _STATE["null"]:
            with _outermost():
                return run_gemm(p, first, second, out, alpha)
    _gemm._cublas_gemm = gemm

    # CuPy kernels: ufuncs (and their reductions), NumPy-API functions, module functions
    nd = fakecupy.ndarray
    prev_ufunc = nd.__array_ufunc__
    if prev_ufunc is np.ndarray.__array_ufunc__:
        # NumPy's default refuses operands whose class overrides __array_ufunc__: run the
        # ufunc on plain views as the multi-device emulation does (its device check
        # passes at once with one device)
        prev_ufunc = fakecupy._checked_ufunc
    prev_function = nd.__array_function__

    def array_ufunc(self, ufunc, method, *inputs, **kwargs):
        _count_cupy(ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}")
        with _outermost():
            return prev_ufunc(self, ufunc, method, *inputs, **kwargs)

    def array_function(self, func, types, args, kwargs):
        return _call_counted(func.__name__, prev_function, (self, func, types, args, kwargs),
                             {}, inspect_args=args)
    nd.__array_ufunc__ = array_ufunc
    nd.__array_function__ = array_function

    wrapped = fakecupy._wrapped
    made = {}       # fakecupy makes a wrapper (and reads CuPy's signature) per attribute access

    def counted_wrapped(fn, real=None):
        key = (id(fn), id(real))
        hit = made.get(key)
        if hit is not None and hit[0] is fn and hit[1] is real:
            return hit[2]
        call = wrapped(fn, real)
        name = getattr(fn, "__name__", "fn")
        allocates = name in ("empty", "empty_like", "ndarray")

        def counted(*args, **kwargs):
            if allocates:
                with _outermost():
                    return call(*args, **kwargs)
            return _call_counted(name, call, args, kwargs)
        counted.__name__ = name
        counted.__wrapped__ = fn
        if hasattr(call, "__signature__"):
            counted.__signature__ = call.__signature__
        made[key] = (fn, real, counted)
        return counted
    fakecupy._wrapped = counted_wrapped

    for name in ("asarray", "array"):
        orig = getattr(fakecupy, name)

        def upload(*args, _orig=orig, _name=name, **kwargs):
            a = args[0] if args else kwargs.get("a")
            if isinstance(a, nd):
                return _call_counted(_name, _orig, args, kwargs)
            c = _counter()
            if c is not None and _STATE["depth"] == 0 and \
                    not hasattr(a, "__cuda_array_interface__"):
                c.uploads += 1
            with _outermost():
                return _orig(*args, **kwargs)
        setattr(fakecupy, name, upload)

    always = lambda self, args: True  # noqa: E731
    for name in ("astype", "copy", "fill", "ravel", "flatten", "reshape"):
        _wrap_method(nd, name, "cupy", always)
    _wrap_method(nd, "__setitem__", "cupy", always)
    _wrap_method(nd, "__getitem__", "cupy", _has_array_index)
    set_orig = nd.set

    def set_(self, arr, stream=None):
        c = _counter()
        if c is not None and _STATE["depth"] == 0:
            c.uploads += 1
        with _outermost():
            return set_orig(self, arr, stream)
    nd.set = set_

    ek_call = fakecupy.ElementwiseKernel.__call__

    def ek(self, *args, size=None):
        _count_cupy(f"ElementwiseKernel {self.name}")
        if _STATE["null"]:
            arrs = [a for (t, _), a in zip(self.ins, args) if t == "T"]
            dt = np.result_type(*[a.dtype for a in arrs])
            return nd(np.broadcast_shapes(*[np.shape(a) for a in arrs]), dt)
        with _outermost():
            return ek_call(self, *args, size=size)
    fakecupy.ElementwiseKernel.__call__ = ek

    rt = fakecupy.runtime
    memset = type(rt).memsetAsync

    def memset_async(self, ptr, value, size, stream=0):
        c = _counter()
        if c is not None and _STATE["depth"] == 0:
            c.memsets += 1
        return memset(self, ptr, value, size, stream)
    type(rt).memsetAsync = memset_async
    memcpy = type(rt).memcpyAsync

    def memcpy_async(self, dst, src, size, kind=0, stream=0):
        c = _counter()
        if c is not None and _STATE["depth"] == 0:
            c.copies += 1
        return memcpy(self, dst, src, size, kind, stream)
    type(rt).memcpyAsync = memcpy_async

    # device -> host reads and waits
    for name in ("get", "item", "tolist", "__bool__", "__float__", "__int__", "__index__",
                 "__complex__"):
        _wrap_method(nd, name, "readback", f"ndarray.{name}")
    asnumpy = fakecupy.asnumpy

    def asnumpy_(a, *args, **kwargs):
        if isinstance(a, nd):
            _readback("cupy.asnumpy")
        with _outermost():
            return asnumpy(a, *args, **kwargs)
    fakecupy.asnumpy = asnumpy_
    for cls, name in ((fakecupy.Stream, "Stream.synchronize"),
                      (fakecupy.Device, "Device.synchronize"),
                      (fakecupy.Event, "Event.synchronize")):
        _wrap_method(cls, "synchronize", "readback", name)
    sync = type(rt).deviceSynchronize

    def device_sync(self):
        _readback("runtime.deviceSynchronize")
        return sync(self)
    type(rt).deviceSynchronize = device_sync
    _STATE["installed"] = True


def format_readbacks(counter):
    """Markdown lines: each read-back with its ember call chain (outermost first)."""
    lines = []
    for (what, chain), n in sorted(counter.readback_sites().items(), key=lambda kv: -kv[1]):
        lines.append(f"- {n}x `{what}`: " + " -> ".join(f"`{s}`" for s in chain))
    return lines
