"""Creation functions with ``device='cuda'``: ``zeros``/``ones``/``empty``/``full``
(and their ``_like`` forms) allocate and fill on the GPU directly; ``asarray``
of a CuPy array or a CUDA DLPack producer wraps its memory without a copy;
everything else is built on the host by the same code as always (so dtypes and
values agree exactly) and copied to the GPU once.

The creation functions themselves live in ember._api.creation, which calls
:func:`create` with the host body and a way to find the other bodies (``zeros_like``
needs ``zeros``'s): this backend never imports the namespace above it.
"""
import numpy as np

from ember._core import array as _array
from ember._core.array import ndarray
from ember.cuda import _runtime as R

_FILLED = {"empty": None, "zeros": 0, "ones": 1}


def _finish(x, requires_grad):
    if requires_grad:
        x.requires_grad = True
    return x


def create(name, fn, d, args, kwargs, body_of):
    """ember.<name>(*args, device=d, **kwargs) for a CUDA Device d (made current); `fn` is
    the host body of `name`, ``body_of(other_name)`` the host body of another creation
    function."""
    return R.run_on(d.index, _create, name, fn, d, args, kwargs, body_of)


def _create(name, fn, d, args, kwargs, body_of):
    idx = d.index
    requires_grad = kwargs.pop("requires_grad", False)
    if name.endswith("_like"):
        x = args[0]
        shape = kwargs.pop("shape", None)
        shape = tuple(x.shape) if shape is None else shape
        dtype = kwargs.pop("dtype", None) or x.dtype
        base = name[:-len("_like")]
        kwargs.pop("subok", None)
        order = kwargs.pop("order", "K")
        # NumPy's layout: built C-contiguous over the axes in memory order, then permuted
        perm = None if order == "C" or not isinstance(x, ndarray) else _array._like_perm(
            x, order, _array._parse_shape(shape, name))
        if perm is not None:
            shape = tuple(_array._parse_shape(shape, name)[p] for p in perm)
        res = _create(base, body_of(base), d, (shape,) + tuple(args[1:]),
                      dict(kwargs, dtype=dtype), body_of)
        return _finish(res if perm is None else _array._with_axes(res, perm), requires_grad)
    if name in _FILLED or name == "full":
        shape = args[0]
        # the host code decides the dtype (and validates the arguments) on a 0-size array
        probe = _on_host(fn, (0,) + tuple(args[1:]), kwargs)
        x = R.empty(_array._parse_shape(shape, name), probe.dtype, idx)
        value = _FILLED.get(name) if name != "full" else (args[1] if len(args) > 1
                                                           else kwargs.get("fill_value"))
        if name == "zeros":
            R.memset0(x)
        elif value is not None:
            if isinstance(value, ndarray):
                value = value.item()
            R.as_cupy(x).fill(value)
        return _finish(x, requires_grad)
    if name in ("asarray", "array", "tensor", "from_dlpack", "ascontiguousarray"):
        res = _convert(name, fn, d, args, kwargs)
        if res is not None:
            return _finish(res, requires_grad)
    host = _on_host(fn, args, kwargs)
    if isinstance(host, tuple):                 # linspace(retstep=True)
        return (_finish(R.transfer(host[0], d), requires_grad),) + host[1:]
    return _finish(R.transfer(host, d), requires_grad)


def _on_host(fn, args, kwargs):
    """The creation body run on the host, with the CPU as default device: called while
    the default device is a GPU (a backward on GPU arrays builds eye() masks), the
    zeros() inside eye() must not land on the GPU."""
    from ember.cuda._dispatch import host_context
    with host_context():
        return fn(*args, device=_array.CPU, **kwargs)


def _convert(name, fn, d, args, kwargs):
    """asarray & co. of GPU data: zero-copy where possible; None: build on the host."""
    obj = args[0] if args else kwargs.get("obj")
    dtype = kwargs.get("dtype")
    order = kwargs.get("order")
    copy = kwargs.get("copy", True if name in ("array", "tensor") else None)
    if isinstance(obj, ndarray):
        x = obj if obj.is_cuda and obj.device == d else obj.to(d)
        moved = x is not obj
    else:
        c = R.cp()
        if isinstance(obj, c.ndarray):
            src = obj
        elif hasattr(obj, "__cuda_array_interface__"):
            src = c.asarray(obj)
        elif hasattr(obj, "__dlpack_device__") and not isinstance(obj, np.ndarray) \
                and obj.__dlpack_device__()[0] == 2:
            src = c.from_dlpack(obj)
        else:
            return None
        if src.device.id != d.index:
            src = src.copy()                # onto d, current here (CuPy copies across devices)
            moved = True
        else:
            moved = False
        x = R.from_cupy(src)
    if dtype is not None and np.dtype(R.np_dtype(dtype)) != x.dtype:
        if copy is False:
            raise ValueError(f"{name}: copy=False but converting {x.dtype} to "
                             f"{R.np_dtype(dtype)} requires a copy")
        # NumPy casts in order 'K' unless C or F is asked for ('A': F for a Fortran array)
        return x.astype(R.np_dtype(dtype), order="F" if order == "A" and x.flags.fortran
                        else (order if order in ("C", "F") else "K"))
    if copy and not moved:
        return x.copy(order="K" if order is None else order)
    if copy is False and moved:
        raise ValueError(f"{name}: copy=False but moving the data to {d} requires a copy")
    if order in ("C", "F") and not (x.flags.c_contiguous if order == "C"
                                    else x.flags.f_contiguous):
        if copy is False:
            raise ValueError(f"{name}: copy=False but order={order!r} requires a copy")
        return x.copy(order=order)
    return x
