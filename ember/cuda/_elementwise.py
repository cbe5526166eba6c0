"""Elementwise ops on GPU arrays: the operators and every ember ufunc, registered in the
one GPU dispatch under the ufunc's name (``binary(op, ...)`` / ``unary(op, ...)`` with
the op code bound); and the storage-level copies ``cast`` and ``assign``
(``x[...] = v``), which the elementwise dispatcher calls directly (copies, not ops).

The result dtype comes from the same promotion code the host uses
(``elementwise.binary_types``), so both devices agree.  Floating-point
arithmetic on float16/32/64 runs ember's kernels (elementwise.cu: a vectorised
contiguous path, an array-scalar path, a strided path for broadcasting and
views); everything else runs CuPy's ufunc of the same NumPy name, on operands
already cast to the loop dtype.
"""
import functools
import struct

import numpy as np

from ember._core import elementwise as _ew
from ember._core.array import ndarray
from ember._core.dtypes import _code, dtype_from_code
from ember.cuda import _runtime as R
from ember.cuda import _checks
from ember.cuda import _launch
from ember.cuda._kernels import function as _function
from ember.cuda._dispatch import gpu_op
from ember._core.dtypes import dtype_kind

OPNAMES = _ew.op_names()
_BINARY_KERNEL = _ew.gpu_kernels(2)     # op name -> kernel name: the op table's gpu column
_UNARY_KERNEL = _ew.gpu_kernels(1)
_MAX_KERNEL_DIMS = 8          # EMBER_MAX_DIMS in ember_common.cu
_THREADS = 256
_SCALARS = (bool, int, float, complex)



def _py_int(v):
    """A Python int (an array's .size too), not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)

def _device_of(*vals):
    for v in vals:
        if isinstance(v, ndarray) and v.is_cuda:
            return v.device
    return None


def _operand(v, dev, name):
    """An operand as a GPU array on dev or a Python scalar (host 0-d arrays and NumPy
    scalars act as scalars of their dtype, as in PyTorch)."""
    if isinstance(v, ndarray):
        if v.is_cuda:
            if v.device != dev:
                raise RuntimeError(f"{name}: expected all arrays on one device, got {dev} "
                                   f"and {v.device}")
            return v
        if v.ndim == 0:
            return R.from_host(R._array._numpy(v), dev.index)
        raise RuntimeError(f"{name}: expected all arrays on one device, got {dev} and cpu "
                           f"(shape {v.shape}); move the array with .to('{dev}')")
    if type(v) in _SCALARS:
        return v
    if isinstance(v, (np.generic, np.ndarray)):
        # host data has no device: it is copied to the GPU, like a Python scalar
        return R.from_host(np.asarray(v), dev.index)
    if isinstance(v, (list, tuple)):
        # a nested sequence: ember's dtype rules on the host, then one copy to the GPU
        return R.from_host(R._array._numpy(R._array._wrap(v)), dev.index)
    raise RuntimeError(f"{name}: expected all operands on {dev}, got host data of type "
                       f"{type(v).__name__}; convert it with ember.asarray(..., device='{dev}')")


def _shape_of(v):
    return v.shape if isinstance(v, ndarray) else ()


def _broadcast(name, sa, sb):
    try:
        return np.broadcast_shapes(sa, sb)
    except ValueError:
        raise ValueError(f"{name}: operands could not be broadcast together with shapes "
                         f"{str(tuple(sa)).replace(' ', '')} "
                         f"{str(tuple(sb)).replace(' ', '')}") from None


def _strided_args(shape, *operands):
    """StridedArgs by value: ndim, shape[8], strides[3][8] in elements (operand 0 is
    the output; broadcast axes get stride 0)."""
    nd = len(shape)
    words = [0] * (8 + 24)
    words[:nd] = shape
    for k, x in enumerate(operands):
        off = nd - x.ndim
        for i in range(x.ndim):
            if x.shape[i] != 1:
                words[8 + 8 * k + off + i] = x.strides[i] // x.itemsize
    return struct.pack("<i4x32q", nd, *words)


def _as_loop(v, dt):
    if isinstance(v, ndarray) and v.dtype != dt:
        return R.astype(v, dt)
    return v


def _kernel_ok(out_arr, *arrays):
    return all(a.ndim <= _MAX_KERNEL_DIMS for a in arrays) and out_arr.ndim <= _MAX_KERNEL_DIMS


def _overlaps(o, v):
    return isinstance(v, ndarray) and v.storage is o.storage and (
        v.data_ptr() != o.data_ptr() or v.strides != o.strides)


def binary(op, a, b, out):
    if out is None and type(a) is ndarray and type(b) is ndarray:
        y = _launch.binary_contig(op, a, b)
        if y is not None:
            return y
    dev = _device_of(a, b, out)
    return R.run_on(dev.index, _binary, op, a, b, out, dev)


def _binary(op, a, b, out, dev):
    name = OPNAMES[op]
    a = _operand(a, dev, name)
    b = _operand(b, dev, name)
    if out is not None and not (isinstance(out, ndarray) and out.is_cuda and out.device == dev):
        raise RuntimeError(f"{name}: out= must be an array on {dev}")
    types = _ew.binary_types(op, a, b)
    if types is None:                  # a Python int beyond the array's dtype: CuPy decides
        return _cupy_ufunc(name, [a, b], out, None)
    tloop, tout = (dtype_from_code(t) for t in types)
    shape = _broadcast(name, _shape_of(a), _shape_of(b))
    if out is not None and out.shape != shape:
        raise ValueError(f"{name}: output array has shape {out.shape}, but the operands "
                         f"broadcast to {shape}")
    kname = _BINARY_KERNEL.get(name)
    sfx = R.suffix(tloop)
    if kname is None or sfx is None or tout != tloop:
        return _cupy_ufunc(name, [_as_loop(a, tloop), _as_loop(b, tloop)], out, tout)
    a = _as_loop(a, tloop)
    b = _as_loop(b, tloop)
    y = out if out is not None and out.dtype == tout and not _overlaps(out, a) \
        and not _overlaps(out, b) else R.empty(shape, tout, dev.index)
    n = y.size
    if n:
        _binary_kernel(op, kname, sfx, a, b, y, shape, n)
    return _into(out, y)


def _into(out, y):
    """The result y, written into out= when one was given (and out's version bumped)."""
    if out is None:
        return y
    if y is not out:
        assign(out, y)
    out._bump_version()
    return out


def _binary_kernel(op, kname, sfx, a, b, y, shape, n):
    grid = R.blocks(n, _THREADS)
    a_arr, b_arr = isinstance(a, ndarray), isinstance(b, ndarray)
    if a_arr and b_arr:
        if a.shape == shape and b.shape == shape and a.is_contiguous() and b.is_contiguous() \
                and y.is_contiguous():
            kernel = f"ember_{kname}_{sfx}_contig"
            R.launch(kernel, R.vec_blocks(n, y.itemsize), _THREADS, (a, b, y, n))
            if a.dtype == b.dtype == y.dtype:
                _launch.register_contig(op, _code(y.dtype), y.get_device(), _function(kernel))
            return
        if _kernel_ok(y, a, b):
            R.launch(f"ember_{kname}_{sfx}_strided", grid, _THREADS,
                     (a, b, y, n, _strided_args(shape, y, a, b)))
            return
    else:
        arr, s, swap = (a, b, 0) if a_arr else (b, a, 1)
        if isinstance(s, complex):
            s = None
        if s is not None and arr.shape == shape and arr.is_contiguous() and y.is_contiguous():
            R.launch(f"ember_{kname}_{sfx}_scalar", grid, _THREADS,
                     (arr, float(s), y, n, np.int32(swap)))
            return
    res = _cupy_ufunc(OPNAMES[op], [a, b], None, y.dtype)
    R.as_cupy(y)[...] = R.as_cupy(res)


def unary(op, a, out):
    if out is None and type(a) is ndarray:
        y = _launch.unary_contig(op, a)
        if y is not None:
            return y
    dev = _device_of(a, out)
    return R.run_on(dev.index, _unary, op, a, out, dev)


def _unary(op, a, out, dev):
    name = OPNAMES[op]
    a = _operand(a, dev, name)
    if not isinstance(a, ndarray):
        a = R.from_host(np.asarray(a), dev.index)
    if out is not None and not (isinstance(out, ndarray) and out.is_cuda and out.device == dev):
        raise RuntimeError(f"{name}: out= must be an array on {dev}")
    tloop, tout = (dtype_from_code(t) for t in _ew.unary_types(op, _code(a.dtype)))
    if out is not None and out.shape != a.shape:
        raise ValueError(f"{name}: output array has shape {out.shape}, but the input has "
                         f"shape {a.shape}")
    kname = _UNARY_KERNEL.get(name)
    sfx = R.suffix(tloop)
    if kname is None or sfx is None or tout != tloop:
        return _cupy_ufunc(name, [_as_loop(a, tloop)], out, tout)
    a = _as_loop(a, tloop)
    y = out if out is not None and out.dtype == tout and not _overlaps(out, a) \
        else R.empty(a.shape, tout, dev.index)
    n = y.size
    if n:
        grid = R.blocks(n, _THREADS)
        if a.is_contiguous() and y.is_contiguous():
            kernel = f"ember_{kname}_{sfx}_contig"
            R.launch(kernel, R.vec_blocks(n, y.itemsize), _THREADS, (a, y, n))
            if a.dtype == y.dtype:
                _launch.register_contig(op, _code(y.dtype), y.get_device(), _function(kernel))
        elif _kernel_ok(y, a):
            R.launch(f"ember_{kname}_{sfx}_strided", grid, _THREADS,
                     (a, y, n, _strided_args(a.shape, y, a)))
        else:
            R.as_cupy(y)[...] = getattr(R.cp(), name)(R.as_cupy(a))
    return _into(out, y)


_HOST_VERDICT = {}     # (name, operand dtypes/types) -> None, or (exception type, message)


def _same_errors_as_host(name, operands):
    """Raise what the host raises for this op on these operand dtypes (an op NumPy has
    no loop for, such as sign of bool), and NumPy's value checks CuPy skips (an
    integer to a negative integer power); the dtype verdict is cached."""
    key = (name,) + tuple(o.dtype if isinstance(o, ndarray) else type(o) for o in operands)
    verdict = _HOST_VERDICT.get(key, False)
    if verdict is False:
        probe = [np.zeros(0, o.dtype) if isinstance(o, ndarray) else o for o in operands]
        args = [R._array._wrap(p) if isinstance(p, np.ndarray) else p for p in probe]
        try:
            # the host's own dispatch (ember.<name>(*args) without the Python layers)
            if len(args) == 2:
                _ew.call_binary(_ew._op_index(name), *args)
            else:
                _ew.call_unary(_ew._op_index(name), *args)
            verdict = None
        except Exception as err:
            verdict = (type(err), str(err))
        _HOST_VERDICT[key] = verdict
    if verdict is not None:
        raise verdict[0](verdict[1])
    if name in ("power", "float_power") or len(operands) != 2:
        base, expo = (operands + [None])[:2]
        if name == "power" and expo is not None and (
                (isinstance(expo, ndarray) and dtype_kind(expo.dtype) in "iu" and
                 isinstance(base, ndarray) and dtype_kind(base.dtype) in "iub") or
                (_py_int(expo) and isinstance(base, ndarray) and dtype_kind(base.dtype) in "iub")):
            if _py_int(expo):
                if expo < 0:
                    raise ValueError("Integers to negative integer powers are not allowed.")
            elif expo.size and _checks.checks_enabled():    # NumPy's error, without a wait
                _checks.defer(R.cp().any(R.as_cupy(expo) < 0), lambda: ValueError(
                    "Integers to negative integer powers are not allowed."))


def _cupy_ufunc(name, operands, out, tout):
    """CuPy's ufunc `name` on operands (GPU arrays or scalars) already in the loop
    dtype; the result cast to tout (None: CuPy's dtype)."""
    _same_errors_as_host(name, operands)
    c = R.cp()
    fn = getattr(c, name, None)
    if fn is None:
        raise NotImplementedError(f"ember.{name} is not implemented for CUDA arrays yet")
    args = []
    for v in operands:
        if isinstance(v, ndarray):
            args.append(R.as_cupy(v))
        elif tout is not None and type(v) in _SCALARS:
            # a scalar in the other operand's dtype: promotion was already decided
            other = next((o for o in operands if isinstance(o, ndarray)), None)
            args.append(other.dtype.type(v) if other is not None and not
                        (isinstance(v, complex) and dtype_kind(other.dtype) != "c") else v)
        else:
            args.append(v)
    fix = _FIXUPS.get(name)
    res = fn(*args) if fix is None else fix(c, fn, *args)
    if isinstance(res, tuple):                 # divmod / frexp / modf
        return tuple(R.from_cupy(r) for r in res)
    if tout is not None and res.dtype != tout:
        res = res.astype(tout)
    if out is not None:
        R.as_cupy(out)[...] = res
        out._bump_version()
        return out
    return R.from_cupy(res)


def _floor_divide(c, fn, a, b):
    """CuPy's floor_divide, but floor(a / b) where exactly one float operand is
    infinite, as the host's loop (the Array API's inf // 2 == inf, 1 // -inf == -0)."""
    res = fn(a, b)
    if res.dtype.kind != "f":
        return res
    one_inf = c.isinf(c.asarray(a)) != c.isinf(c.asarray(b))
    return c.where(one_inf, c.floor(c.true_divide(a, b)), res).astype(res.dtype, copy=False)


def _expm1(c, fn, z):
    """expm1, complex as the host's loop: exp(z) - 1 without cancellation and with
    C99's special values at infinities and NaN (CuPy's, like NumPy's, gives NaNs)."""
    if z.dtype.kind != "c":
        return fn(z)
    x, y = z.real, z.imag
    s = c.sin(0.5 * y)
    re = c.expm1(x) * c.cos(y) - 2.0 * s * s
    im = c.exp(x) * c.sin(y)
    zero_im, neg_inf = y == 0, c.isneginf(x)
    re = c.where(zero_im, c.expm1(x) + 0.0, c.where(neg_inf, -1.0, re))    # exp(-0) - 1 is +0
    im = c.where(zero_im, y, c.where(neg_inf, c.where(c.isfinite(y), c.copysign(0.0, c.sin(y)),
                                                      0.0), im))
    pos_inf_nonfinite = c.isposinf(x) & ~c.isfinite(y) & ~zero_im
    re = c.where(pos_inf_nonfinite, x, re)
    out = c.empty(z.shape, z.dtype)
    out.real[...] = re
    out.imag[...] = c.where(pos_inf_nonfinite, c.nan, im)
    return out


_FIXUPS = {"floor_divide": _floor_divide, "expm1": _expm1}


def cast(x, tcode):
    return R.astype(x, dtype_from_code(tcode))


def assign(dst, src):
    """dst[...] = src: broadcast src to dst's shape and cast to dst's dtype."""
    R.run_on(dst.get_device() if dst.is_cuda else src.get_device(), _assign, dst, src)


def _assign(dst, src):
    if not dst.is_cuda:
        # a host destination from GPU data: one device-to-host copy
        view = R._array._numpy(dst)
        view[...] = R.to_numpy(src) if isinstance(src, ndarray) else src
        return
    cd = R.as_cupy(dst)
    if type(src) in _SCALARS:
        cd[...] = src
        return
    if isinstance(src, ndarray) and src.is_cuda:
        if src.device != dst.device:
            raise RuntimeError(f"assignment: source on {src.device}, destination on "
                               f"{dst.device}; copy it with .to('{dst.device}') first")
        if src.storage is dst.storage:
            src = src.copy()             # overlapping views: read everything first
        cs = R.as_cupy(src)
    else:
        arr = R._array._numpy(src) if isinstance(src, ndarray) else np.asarray(src)
        cs = R.cp().asarray(arr)
    if cs.ndim > cd.ndim:
        lead = cs.ndim - cd.ndim
        if any(d != 1 for d in cs.shape[:lead]):
            _no_broadcast(cs.shape, cd.shape)
        cs = cs.reshape(cs.shape[lead:])
    try:
        np.broadcast_shapes(cs.shape, cd.shape)
        if np.broadcast_shapes(cs.shape, cd.shape) != cd.shape:
            raise ValueError
    except ValueError:
        _no_broadcast(cs.shape, cd.shape)
    cd[...] = cs


def _no_broadcast(src_shape, dst_shape):
    raise ValueError(f"could not broadcast input array from shape "
                     f"{str(tuple(src_shape)).replace(' ', '')} into shape "
                     f"{str(tuple(dst_shape)).replace(' ', '')}")



def _register(table):
    """Register every row of the op table as the GPU implementation of its ufunc: binary
    or unary with the row's op code bound, called as ``impl(x1, x2, out)`` /
    ``impl(x, out)`` by the elementwise dispatcher (ember/_core/elementwise.pyx)."""
    for op, row in enumerate(table):
        gpu_op(row.name)(functools.partial(binary if row.arity == 2 else unary, op))


_register(_ew.op_table())
