"""ember.ndarray: the array object.

An array is a view on a Storage: a byte offset, a shape, byte strides and a
dtype code.  Views (basic indexing, reshape, transpose...) share the storage
and so its version counter.  Operators go straight from the number slots to
the elementwise dispatcher (C calls, no Python frames); methods that are not
on a hot path forward to the Python-level functions of the ``ember``
namespace.
"""
cimport cython
cimport numpy as cnp
from cpython.ref cimport Py_INCREF
from cpython.object cimport PyObject
from cpython.slice cimport PySlice_GetIndicesEx
from cpython.buffer cimport PyObject_CheckBuffer
from libc.string cimport memcpy, memset

from ember._core.storage cimport Storage, new_storage, wrap_pointer, wrap_buffer, wrap_device_pointer
from ember._core.dtypes cimport (DTYPE_OBJS, ITEMSIZE, KIND, NTYPES, T_BOOL, T_INT64,
                                 T_FLOAT16, T_FLOAT32, T_FLOAT64, T_COMPLEX128, T_BFLOAT16,
                                 code_of, code_of_numpy_dtype, default_float, default_complex,
                                 scalar_default_code)
from ember._core.opcodes cimport *

import numpy as _np
import operator as _operator
from ember._core.dtypes import dtype_kind
from ember._core import gpu_hooks
from ember._core.dlpack_bf16 import CapsuleProducer as _CapsuleProducer

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    object PyArray_NewFromDescr(void* subtype, void* descr, int nd, cnp.npy_intp* dims,
                                cnp.npy_intp* strides, void* data, int flags, void* obj)

cdef extern from *:
    """
    #if defined(_MSC_VER)
    static __declspec(thread) int ember_grad_mode = 1;
    #else
    static __thread int ember_grad_mode = 1;
    #endif
    """
    int ember_grad_mode

cdef extern from *:
    """
    /* a * b into *r; nonzero when the product does not fit a Py_ssize_t */
    static inline int em_mul_overflow(Py_ssize_t a, Py_ssize_t b, Py_ssize_t* r) {
    #if defined(__GNUC__) || defined(__clang__)
        return __builtin_mul_overflow(a, b, r);
    #else
        if (a != 0 && b > PY_SSIZE_T_MAX / a) return 1;
        *r = a * b;
        return 0;
    #endif
    }
    """
    int em_mul_overflow(Py_ssize_t a, Py_ssize_t b, Py_ssize_t* r) noexcept nogil


cdef bint grad_enabled() noexcept nogil:
    return ember_grad_mode


cdef void set_grad_mode(bint on) noexcept nogil:
    global ember_grad_mode
    ember_grad_mode = on


def _is_grad_enabled():
    return ember_grad_mode != 0


def _set_grad_enabled(bint on):
    """Set this thread's grad mode; returns the previous one."""
    global ember_grad_mode
    cdef bint prev = ember_grad_mode
    ember_grad_mode = on
    return prev


# What this module calls but cannot import: the layers above it, connected once they
# exist (see ember/_wiring.py, which sets all of these and says why each is late).
#   _ember          the ember namespace (methods call ember.<fn>: reshape, matmul...)
#   _ember_untracked the same functions before autograd wrapped them: what a method calls
#                   when nothing is recorded (no dispatch cost)
#   _assign         elementwise.assign(dst, src), for x[...] = v
#   _binary/_unary  elementwise's operator entries (set by elementwise.pyx on import)
#   _gpu_backend    ember.cuda._runtime, set by ember.cuda when a GPU is first used
cdef object _ember = None
cdef object _ember_untracked = None


def _set_plain_namespace(ns):
    global _ember_untracked
    _ember_untracked = ns
cdef binary_hook_t _binary = NULL
cdef unary_hook_t _unary = NULL
cdef object _assign = None


def _set_namespace(ns, assign):
    global _ember, _assign
    _ember = ns
    _assign = assign


cdef void set_elementwise_hooks(binary_hook_t b, unary_hook_t u) noexcept:
    global _binary, _unary
    _binary = b
    _unary = u


# ---------------------------------------------------------------- devices

@cython.final
cdef class Device:
    """A device: ``Device('cpu')`` or ``Device('cuda', 0)`` (``ember.device`` too).

    It compares equal to the string that spells it, and hashes as that string:
    ``Device('cuda', 0) == 'cuda:0'``; ``Device('cuda')`` (the current CUDA device,
    unresolved) is not ``Device('cuda', 0)``, as in PyTorch.

    >>> import ember
    >>> ember.device("cuda:1") == "cuda:1", hash(ember.device("cpu")) == hash("cpu")
    (True, True)
    """
    cdef readonly str type
    cdef readonly object index

    def __init__(self, type="cpu", index=None):
        if isinstance(type, Device):
            self.type, self.index = (<Device>type).type, (<Device>type).index
            return
        if isinstance(type, int) and not isinstance(type, bool) and index is None:
            type, index = "cuda", type          # PyTorch: a bare int names a CUDA device
        if not isinstance(type, str):
            raise TypeError(f"device must be a string or ember.Device, got {type!r}")
        if ":" in type:
            type, idx = type.split(":", 1)
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise ValueError(f"unknown device type {type!r}; expected 'cpu' or 'cuda'")
        self.type = type
        self.index = index

    cdef str _key(self):
        # what equality and hashing compare: 'cpu' (any index), 'cuda' (the current
        # device, unresolved) or 'cuda:N'; a string compares equal to the one it spells
        if self.type == "cpu":
            return "cpu"
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            return self._key() == other
        if not isinstance(other, Device):
            return NotImplemented
        return self._key() == (<Device>other)._key()

    def __hash__(self):
        # equal objects hash equal, strings included: hash(Device('cpu')) == hash('cpu')
        return hash(self._key())

    def __enter__(self):
        """``with ember.device('cuda'):`` makes this the default device of creation
        functions inside the block (PyTorch's device context)."""
        _DEVICE_CONTEXTS.append(_swap_default_device(check_device(self, "device")))
        return self

    def __exit__(self, *exc):
        _swap_default_device(_DEVICE_CONTEXTS.pop())
        return False

    def __reduce__(self):
        return (Device, (self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"


CPU = Device("cpu")
cdef list _DEVICE_CONTEXTS = []     # default devices that ``with ember.device(...)`` replaced

# The GPU backend (ember.cuda._runtime), set when it initialises; None until then.
# Every GPU array is made by it, so while it is None no array lives on a GPU.
cdef object _gpu_backend = None
cdef list _CUDA_DEVICES = []        # Device('cuda', i), one object per index


def _parse_shape(shape, opname):
    """An int or sequence of ints -> a tuple of non-negative ints (checked)."""
    return parse_shape(shape, opname)


def _cuda_device(int index):
    """The Device('cuda', index) object (one per index)."""
    return cuda_device(index)


def _set_gpu_backend(backend):
    global _gpu_backend
    _gpu_backend = backend


cdef object cuda_device(int index):
    while len(_CUDA_DEVICES) <= index:
        _CUDA_DEVICES.append(Device("cuda", len(_CUDA_DEVICES)))
    return _CUDA_DEVICES[index]


# Where creation functions put arrays when no device= is given: the CPU, or a CUDA
# device inside ``with ember.device('cuda')`` / ember.set_default_device, and while a
# GPU op or a GPU backward pass runs (so constants its rules build land beside it).
cdef object _default_device = CPU


# Where host implementations allocate their results (``empty_raw``): the CPU, except
# while the GPU dispatcher runs a device-generic host implementation for GPU inputs.
# Kept apart from the default device so host code on host arrays never gets GPU
# memory (a CPU kernel writing there would crash), whatever the default device is.
cdef object _alloc_device = CPU


cdef bint alloc_is_cpu() noexcept:
    return _alloc_device is CPU


def _swap_alloc_device(d):
    global _alloc_device
    prev = _alloc_device
    _alloc_device = CPU if d is None else d
    return prev


def _get_default_device():
    return _default_device


def _swap_default_device(d):
    """Make d (a Device) the default device; returns the previous one."""
    global _default_device
    prev = _default_device
    _default_device = CPU if d is None else d
    return prev


def check_device(device, opname="ember"):
    """Validate a ``device=`` argument: ``Device`` for 'cpu', or 'cuda[:N]' when the
    GPU backend is usable (the index defaults to the current CUDA device).  None
    means the default device."""
    if device is None:
        return _default_device
    if device is CPU:
        return CPU
    if isinstance(device, int) and not isinstance(device, bool):
        device = Device("cuda", device)        # PyTorch: a bare int names a CUDA device
    d = device if isinstance(device, Device) else Device(device)
    if d.type == "cpu":
        return CPU
    if _gpu_backend is None:
        gpu_hooks.start_gpu_backend(opname, d)     # loads ember.cuda, which sets the backend
    return _gpu_backend.check_device(d, opname)


# ---------------------------------------------------------------- helpers

cdef bint is_c_contiguous(int ndim, const Py_ssize_t* shape, const Py_ssize_t* strides,
                          Py_ssize_t itemsize) noexcept:
    cdef Py_ssize_t expected = itemsize
    cdef int i
    for i in range(ndim):
        if shape[i] == 0:
            return True             # an empty array is contiguous (NumPy's flags)
    for i in range(ndim - 1, -1, -1):
        if shape[i] != 1:
            if strides[i] != expected:
                return False
            expected *= shape[i]
    return True


cdef char _copy_order(ndarray x, object order) except 0:
    """NumPy's memory order of a fresh copy of x asked for with `order`, resolved:
    b'C', b'F', or b'K' (axes by decreasing |stride|) when x is neither C- nor
    F-contiguous.  ``order=None`` is 'K'."""
    if x.ndim <= 1:
        return b'C'
    if x.c_contig:                  # (the common case first)
        return b'F' if order == "F" else b'C'
    if order == "C" or order == "F":
        return b'C' if order == "C" else b'F'
    if order == "A":
        return b'F' if _is_f_contiguous(x) else b'C'
    return b'F' if _is_f_contiguous(x) else b'K'


cdef bint layout_perm(ndarray x, object order, int* perm) except -1:
    """The axis order (outermost first) of NumPy's copy of x in `order` ('C', 'F', 'A',
    'K' or None): the copy is C-contiguous over x's axes permuted by `perm`.  'K' is
    NumPy's rule: axes sorted by decreasing |stride|, ties kept in axis order (so
    negative strides become positive and broadcast axes go innermost).  Returns True
    when perm is the identity (a plain C-contiguous copy)."""
    cdef char o = _copy_order(x, order)
    cdef int i, j, p
    cdef Py_ssize_t s
    for i in range(x.ndim):
        perm[i] = x.ndim - 1 - i if o == b'F' else i
    if o == b'K':                   # stable insertion sort on |stride|, largest first
        for i in range(1, x.ndim):
            p = perm[i]
            s = x.strides[p] if x.strides[p] >= 0 else -x.strides[p]
            j = i - 1
            while j >= 0 and (x.strides[perm[j]] if x.strides[perm[j]] >= 0
                              else -x.strides[perm[j]]) < s:
                perm[j + 1] = perm[j]
                j -= 1
            perm[j + 1] = p
    for i in range(x.ndim):
        if perm[i] != i:
            return False
    return True


def _like_perm(ndarray proto not None, order, tuple shape):
    """The axis order (outermost first) of NumPy's ``empty_like(proto, order=order,
    shape=shape)``, or None for C order: 'K' follows proto's strides when the ndim is
    unchanged (else C), 'A' is F when proto is Fortran-contiguous (else C)."""
    cdef int perm[MAXDIM]
    cdef int i, n = len(shape)
    if order == "F" or (order == "A" and _is_f_contiguous(proto) and not proto.c_contig):
        return None if n <= 1 else tuple(range(n - 1, -1, -1))
    if order == "C" or order == "A" or n != proto.ndim or layout_perm(proto, order, perm):
        return None
    return tuple([perm[i] for i in range(n)])


cdef ndarray _owner_with_axes(ndarray fresh, const int* perm):
    """An array owning `fresh`'s memory whose axis perm[i] is fresh's axis i (fresh: a
    new C-contiguous array the caller drops, so the result is the memory's one owner)."""
    cdef ndarray x = ndarray.__new__(ndarray)
    cdef int i
    for i in range(fresh.ndim):
        x.shape[perm[i]] = fresh.shape[i]
        x.strides[perm[i]] = fresh.strides[i]
    x.ndim = fresh.ndim
    x.tcode = fresh.tcode
    x.itemsize = fresh.itemsize
    x.storage = fresh.storage
    x.offset = fresh.offset
    x.readonly = fresh.readonly
    x.owns_storage = fresh.owns_storage
    update_flags(x)
    return x


def _with_axes(ndarray fresh not None, tuple perm):
    """_owner_with_axes for the creation functions (perm from _like_perm)."""
    cdef int p[MAXDIM]
    cdef int i
    if sorted(perm) != list(range(fresh.ndim)):
        raise ValueError(f"_with_axes: {perm} is not a permutation of {fresh.ndim} axes")
    for i in range(fresh.ndim):
        p[i] = perm[i]
    return _owner_with_axes(fresh, p)


cdef bint _in_order(ndarray x, object order):
    """x already satisfies ``astype(order=..., copy=False)``'s layout requirement."""
    if order is None or order == "K":
        return True
    if order == "C":
        return x.c_contig
    if order == "F":
        return _is_f_contiguous(x)
    return x.c_contig or _is_f_contiguous(x)


cdef ndarray copy_laid_out(ndarray x, int tcode, object order):
    """A fresh array (owning its memory, from the caching allocator) holding x's
    values cast to dtype `tcode`, laid out as NumPy lays out ``x.astype(dtype,
    order=order)``: see layout_perm."""
    cdef int perm[MAXDIM]
    cdef Py_ssize_t pshape[MAXDIM]
    cdef Py_ssize_t pstrides[MAXDIM]
    cdef int i
    cdef ndarray src = x, out
    if not layout_perm(x, order, perm):
        # x's axes in the copy's order: copying into a C-contiguous array runs the
        # kernel along the copy's memory order
        for i in range(x.ndim):
            pshape[i] = x.shape[perm[i]]
            pstrides[i] = x.strides[perm[i]]
        src = new_view(x, x.ndim, pshape, pstrides, x.offset, x.tcode)
    if on_gpu(src):
        out = _gpu_backend.astype(src, DTYPE_OBJS[tcode])
    else:
        out = new_empty(tcode, src.ndim, src.shape)
        _assign(out, src)
    if src is not x:
        out = _owner_with_axes(out, perm)      # back to x's axis order
    return out


cdef bint _is_f_contiguous(ndarray x) noexcept:
    """NumPy's F_CONTIGUOUS: the C test on the reversed axes."""
    cdef Py_ssize_t expected = x.itemsize
    cdef int i
    for i in range(x.ndim):
        if x.shape[i] == 0:
            return True
    for i in range(x.ndim):
        if x.shape[i] != 1:
            if x.strides[i] != expected:
                return False
            expected *= x.shape[i]
    return True


cdef int check_writeable(ndarray x, str opname) except -1:
    """ValueError (NumPy's) when x is read-only; what every write path calls first."""
    if x.readonly:
        raise ValueError(f"{opname}: assignment destination is read-only" if opname
                         else "assignment destination is read-only")
    return 0


cdef int set_writeable(ndarray x, bint flag) except -1:
    """``x.flags.writeable = flag``, with NumPy's rule: an array may become writeable
    again only when the memory is writable and the array its storage was made for (the
    "base") is writeable now; views of it follow the base."""
    if not flag:
        x.readonly = True
        if x.owns_storage:
            x.storage.owner_readonly = True
        return 0
    if not x.readonly:
        return 0
    if x.storage.readonly or (not x.owns_storage and x.storage.owner_readonly):
        raise ValueError("cannot set WRITEABLE flag to True of this array")
    x.readonly = False
    if x.owns_storage:
        x.storage.owner_readonly = False
    return 0


@cython.final
cdef class ArrayFlags:
    """NumPy's ``ndarray.flags`` for an ember array: ``c_contiguous``, ``f_contiguous``,
    ``owndata``, ``aligned`` and the settable ``writeable`` (also by item: ``flags['W']``).

    >>> import ember
    >>> x = ember.zeros(3); x.flags.writeable = False
    >>> x.flags.writeable, x[1:].flags.writeable
    (False, False)
    """
    cdef ndarray _x

    @property
    def c_contiguous(self):
        return bool(self._x.c_contig)

    @property
    def f_contiguous(self):
        return bool(_is_f_contiguous(self._x))

    @property
    def contiguous(self):
        return bool(self._x.c_contig)

    @property
    def fortran(self):
        return bool(_is_f_contiguous(self._x) and not self._x.c_contig)

    @property
    def owndata(self):
        """True for an array that owns its memory (not a view, not wrapped NumPy memory)."""
        return bool(self._x.owns_storage and self._x.offset == 0 and
                    self._x.storage.owner is None)

    @property
    def aligned(self):
        return True

    @property
    def writebackifcopy(self):
        return False

    @property
    def writeable(self):
        return not self._x.readonly

    @writeable.setter
    def writeable(self, value):
        set_writeable(self._x, bool(value))

    @property
    def behaved(self):
        return not self._x.readonly

    @property
    def carray(self):
        return bool(self._x.c_contig) and not self._x.readonly

    @property
    def farray(self):
        return bool(_is_f_contiguous(self._x) and not self._x.c_contig) and not self._x.readonly

    _KEYS = {"C": "c_contiguous", "C_CONTIGUOUS": "c_contiguous", "CONTIGUOUS": "c_contiguous",
             "F": "f_contiguous", "F_CONTIGUOUS": "f_contiguous", "FORTRAN": "f_contiguous",
             "O": "owndata", "OWNDATA": "owndata", "A": "aligned", "ALIGNED": "aligned",
             "W": "writeable", "WRITEABLE": "writeable", "X": "writebackifcopy",
             "WRITEBACKIFCOPY": "writebackifcopy", "B": "behaved", "BEHAVED": "behaved",
             "CA": "carray", "CARRAY": "carray", "FA": "farray", "FARRAY": "farray"}

    def __getitem__(self, key):
        name = ArrayFlags._KEYS.get(key.upper() if isinstance(key, str) else key)
        if name is None:
            raise KeyError(f"Unknown flag {key!r}")
        return getattr(self, name)

    def __setitem__(self, key, value):
        name = ArrayFlags._KEYS.get(key.upper() if isinstance(key, str) else key)
        if name != "writeable":
            raise KeyError(f"flags: only WRITEABLE can be set, not {key!r}")
        self.writeable = value

    def __eq__(self, other):
        if not isinstance(other, ArrayFlags):
            return NotImplemented
        names = ("c_contiguous", "f_contiguous", "owndata", "writeable")
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __repr__(self):
        names = ("C_CONTIGUOUS", "F_CONTIGUOUS", "OWNDATA", "WRITEABLE", "ALIGNED",
                 "WRITEBACKIFCOPY")
        return "\n".join(f"  {n} : {self[n]}" for n in names) + "\n"


cdef void update_flags(ndarray x) noexcept:
    cdef Py_ssize_t n = 1
    cdef int i
    for i in range(x.ndim):
        n *= x.shape[i]
    x.size = n
    x.c_contig = is_c_contiguous(x.ndim, x.shape, x.strides, x.itemsize)
    x.data = x.storage.ptr + x.offset
    x._shape_tuple = None
    x._size_obj = None


cdef object shape_tuple(ndarray x):
    cdef int i
    if x._shape_tuple is None:
        # tuple displays for the common ranks: one allocation, no intermediate list
        if x.ndim == 1:
            x._shape_tuple = (x.shape[0],)
        elif x.ndim == 2:
            x._shape_tuple = (x.shape[0], x.shape[1])
        elif x.ndim == 0:
            x._shape_tuple = ()
        else:
            x._shape_tuple = tuple([x.shape[i] for i in range(x.ndim)])
    return x._shape_tuple


cdef int normalize_axis(Py_ssize_t axis, int ndim, str opname) except -1:
    if axis < -ndim or axis >= ndim or (ndim == 0 and axis != 0 and axis != -1):
        raise _np.exceptions.AxisError(
            f"{opname}: axis {axis} is out of bounds for array of dimension {ndim}")
    if ndim == 0:
        return 0
    return <int>(axis + ndim if axis < 0 else axis)


cdef object parse_shape(object shape, str opname):
    """An int or a sequence of ints -> tuple of non-negative ints (bools are refused,
    as NumPy refuses them)."""
    if isinstance(shape, (dict, set, frozenset, str, bytes)):
        raise TypeError(f"{opname}: shape must be an int or a sequence of ints, got {shape!r}")
    if isinstance(shape, int) or hasattr(shape, "__index__") and not hasattr(shape, "__len__"):
        if isinstance(shape, (bool, _np.bool_)):
            raise TypeError(f"{opname}: shape must be an int or a sequence of ints, got {shape!r}")
        shape = (_operator.index(shape),)
    else:
        try:
            shape = tuple([_operator.index(s) if type(s) is not bool else None for s in shape])
        except TypeError:
            raise TypeError(f"{opname}: shape must be an int or a sequence of ints, got {shape!r}") from None
        if None in shape:
            raise TypeError(f"{opname}: shape must be ints, not bools, got {shape!r}")
    if len(shape) > MAXDIM:
        raise ValueError(f"{opname}: ember supports at most {MAXDIM} dimensions, got {len(shape)}")
    for s in shape:
        if s < 0:
            raise ValueError(f"{opname}: negative dimensions are not allowed, got shape {shape}")
    return shape


cdef Py_ssize_t checked_size(int ndim, const Py_ssize_t* shape, Py_ssize_t itemsize,
                             str opname) except -1:
    """The element count of an array of `shape` with `itemsize`-byte elements.

    The one place where a shape becomes a size: every allocation and every view goes
    through it, so neither the element count nor the byte size ``count * itemsize``
    can wrap around.  Raises NumPy's ValueError ("array is too big") when the bytes do
    not fit a Py_ssize_t (length-0 axes are skipped in that test, as NumPy does), and
    for negative dimensions."""
    cdef Py_ssize_t nbytes = itemsize if itemsize > 0 else 1
    cdef Py_ssize_t n = 1
    cdef bint empty = False
    cdef int i
    if ndim > MAXDIM or ndim < 0:
        raise ValueError(f"{opname}: ember supports at most {MAXDIM} dimensions, got {ndim}")
    for i in range(ndim):
        if shape[i] == 0:
            empty = True
        elif shape[i] < 0:
            raise ValueError(f"{opname}: negative dimensions are not allowed, got shape "
                             f"{tuple([shape[i] for i in range(ndim)])}")
        elif em_mul_overflow(nbytes, shape[i], &nbytes):
            raise ValueError(f"{opname}: array is too big; `arr.size * arr.dtype.itemsize` "
                             f"is larger than the maximum possible size (shape "
                             f"{tuple([shape[i] for i in range(ndim)])}, {itemsize}-byte "
                             f"elements)")
        else:
            n *= shape[i]           # <= nbytes: cannot overflow
    return 0 if empty else n


cdef ndarray _c_contiguous(int tcode, int ndim, const Py_ssize_t* shape, str opname="empty"):
    """A new array object laid out C-contiguously (shape, strides, size, flags); the
    caller gives it a storage."""
    cdef ndarray x = ndarray.__new__(ndarray)
    cdef Py_ssize_t itemsize = ITEMSIZE[tcode]
    cdef Py_ssize_t stride = itemsize
    cdef int i
    x.size = checked_size(ndim, shape, itemsize, opname)
    for i in range(ndim - 1, -1, -1):
        x.shape[i] = shape[i]
        x.strides[i] = stride
        stride *= shape[i] if shape[i] > 0 else 1
    x.ndim = ndim
    x.tcode = tcode
    x.itemsize = itemsize
    x.c_contig = True
    x.owns_storage = True
    return x


cdef ndarray new_empty(int tcode, int ndim, const Py_ssize_t* shape, str opname="empty"):
    """A fresh C-contiguous array from the caching allocator (`opname` names the op in
    the error for a shape too big to address)."""
    cdef ndarray x = _c_contiguous(tcode, ndim, shape, opname)
    x.storage = new_storage(x.size * x.itemsize)
    x.offset = 0
    x.data = x.storage.ptr
    return x


cdef ndarray new_view(ndarray base, int ndim, const Py_ssize_t* shape,
                      const Py_ssize_t* strides, Py_ssize_t offset, int tcode):
    """A view of `base`'s storage (offset in bytes from the storage start)."""
    cdef ndarray x = ndarray.__new__(ndarray)
    cdef int i
    cdef Py_ssize_t nbytes = ITEMSIZE[tcode]
    for i in range(ndim):
        x.shape[i] = shape[i]
        x.strides[i] = strides[i]
        if shape[i] != 0 and (shape[i] < 0 or em_mul_overflow(nbytes, shape[i], &nbytes)):
            checked_size(ndim, shape, ITEMSIZE[tcode], "view")     # raises, with the message
    x.ndim = ndim
    x.tcode = tcode
    x.itemsize = ITEMSIZE[tcode]
    x.storage = base.storage
    x.offset = offset
    x.readonly = base.readonly          # a view of a read-only array is read-only
    update_flags(x)
    return x


def _alias_as(ndarray base not None, type cls not None):
    """An object of `cls` (a subclass of ndarray, e.g. nn.Parameter) that views all of
    `base`'s memory with its shape and strides, without autograd history."""
    if not issubclass(cls, ndarray):
        raise TypeError(f"_alias_as: {cls.__name__} is not a subclass of ember.ndarray")
    cdef ndarray x = <ndarray>ndarray.__new__(cls)
    _view_all_of(x, base)
    return x


def _set_data(ndarray x not None, ndarray src not None):
    """Make `x` view `src`'s memory (storage, offset, shape, strides, dtype) in place,
    keeping x's identity and autograd slots (PyTorch's ``p.data = t``)."""
    _view_all_of(x, src)


cdef void _view_all_of(ndarray x, ndarray src) noexcept:
    """x's layout, memory and read-only flag become src's (x keeps its identity)."""
    cdef int i
    for i in range(src.ndim):
        x.shape[i] = src.shape[i]
        x.strides[i] = src.strides[i]
    x.ndim = src.ndim
    x.tcode = src.tcode
    x.itemsize = src.itemsize
    x.storage = src.storage
    x.offset = src.offset
    x.readonly = src.readonly
    x.owns_storage = False          # a view of src's memory, whoever made it
    update_flags(x)


cdef ndarray wrap_numpy(object obj):
    """Wrap a NumPy array's memory without copying; the array stays alive."""
    cdef cnp.ndarray arr = <cnp.ndarray>obj
    cdef int tcode, i, nd
    cdef Py_ssize_t lo = 0, hi = 0, extent
    cdef char* data
    dt = arr.dtype
    if not dt.isnative:
        arr = arr.astype(dt.newbyteorder("="))
        dt = arr.dtype
    tcode = code_of_numpy_dtype(dt)
    if not cnp.PyArray_ISALIGNED(arr):
        arr = arr.copy()
    nd = cnp.PyArray_NDIM(arr)
    if nd > MAXDIM:
        raise ValueError(f"asarray: ember supports at most {MAXDIM} dimensions, got {nd}")
    cdef ndarray x = ndarray.__new__(ndarray)
    data = <char*>cnp.PyArray_DATA(arr)
    for i in range(nd):
        x.shape[i] = cnp.PyArray_DIMS(arr)[i]
        x.strides[i] = cnp.PyArray_STRIDES(arr)[i]
        if x.shape[i] == 0:
            lo = hi = 0
        extent = (x.shape[i] - 1) * x.strides[i]
        if extent < 0:
            lo += extent
        else:
            hi += extent
    x.ndim = nd
    x.tcode = tcode
    x.itemsize = ITEMSIZE[tcode]
    x.storage = wrap_pointer(data + lo, hi - lo + x.itemsize, arr,
                             not cnp.PyArray_ISWRITEABLE(arr))
    x.readonly = x.storage.readonly
    x.owns_storage = True               # the storage was made for x (NumPy owns the memory)
    x.offset = -lo
    update_flags(x)
    return x


cdef inline bint on_gpu(ndarray x) noexcept:
    return x.storage.device_index >= 0


class HostOnlyError(TypeError):
    """A host-memory operation (a NumPy view, a CPU kernel) was given a GPU array."""


cdef object _no_host(ndarray x, str what):
    raise HostOnlyError(f"{what}: cannot convert a {x.device} array to NumPy implicitly; "
                    f"copy it to the host first with .cpu() (or ember.asnumpy(x))")


cdef object host_values(ndarray x):
    """x's values as a NumPy array: a view for host arrays, a copy for GPU arrays
    (which waits for the GPU: only value-reading methods use this)."""
    if on_gpu(x):
        return _gpu_backend.to_numpy(x)
    return numpy_view(x)


def _host_values(ndarray x not None):
    return host_values(x)


cdef ndarray new_device_array(int tcode, int ndim, const Py_ssize_t* shape, size_t ptr,
                              Py_ssize_t nbytes, object owner, int device_index):
    """A C-contiguous array over CUDA memory at ptr owned by `owner` (the launch fast path)."""
    cdef ndarray x = _c_contiguous(tcode, ndim, shape, "empty")
    x.storage = wrap_device_pointer(<char*>ptr, nbytes, owner, device_index)
    x.offset = 0
    x.data = x.storage.ptr
    return x


def _wrap_device_memory(size_t ptr, Py_ssize_t nbytes, owner, int device_index, shape,
                        strides, Py_ssize_t offset, dtype, bint readonly=False):
    """An array over CUDA device memory [ptr, ptr + nbytes) owned by `owner`; the
    first element is at ptr + offset.  Only the GPU backend calls this."""
    cdef ndarray x = ndarray.__new__(ndarray)
    cdef int i, n = len(shape)
    if n > MAXDIM:
        raise ValueError(f"ember supports at most {MAXDIM} dimensions, got {n}")
    for i in range(n):
        x.shape[i] = shape[i]
        x.strides[i] = strides[i]
    x.ndim = n
    x.tcode = code_of(dtype)
    x.itemsize = ITEMSIZE[x.tcode]
    x.storage = wrap_device_pointer(<char*>ptr, nbytes, owner, device_index)
    x.storage.readonly = readonly
    x.readonly = readonly
    x.owns_storage = True
    x.offset = offset
    update_flags(x)
    return x


cdef object numpy_view(ndarray x):
    """A NumPy array viewing x's memory (no copy); it keeps x alive."""
    cdef int flags = cnp.NPY_ARRAY_ALIGNED
    if on_gpu(x):
        # host code must never touch device memory: refuse instead of crashing
        _no_host(x, "numpy view")
    dt = DTYPE_OBJS[x.tcode]
    if not x.readonly:
        flags |= cnp.NPY_ARRAY_WRITEABLE
    Py_INCREF(dt)
    arr = PyArray_NewFromDescr(<void*>_np.ndarray, <void*>dt, x.ndim, <cnp.npy_intp*>x.shape,
                                   <cnp.npy_intp*>x.strides, <void*>x.data, flags, NULL)
    Py_INCREF(x)
    cnp.PyArray_SetBaseObject(<cnp.ndarray>arr, x)
    return arr


cdef inline bint _is_python_scalar(object o):
    # exact types: NumPy scalars (np.float64 subclasses float) keep their dtype
    cdef type t = type(o)
    return t is float or t is int or t is bool or t is complex or t is _SIZE_T


cdef object _first_leaf(object obj):
    cdef int depth = 0
    while isinstance(obj, (list, tuple)) and len(obj) > 0 and depth < 64:
        obj = obj[0]
        depth += 1
    return obj


cdef ndarray as_ndarray(object obj):
    """Anything array-like -> ember array; zero-copy where the memory allows."""
    cdef int code
    if isinstance(obj, ndarray):
        return <ndarray>obj
    if isinstance(obj, _np.ndarray):
        return wrap_numpy(obj)
    if _is_python_scalar(obj):
        code = scalar_default_code(obj)
        return wrap_numpy(_np.asarray(obj, dtype=DTYPE_OBJS[code]))
    if isinstance(obj, _np.generic):
        return wrap_numpy(_np.asarray(obj))
    if type(obj).__name__ == "PyCapsule":
        # a bare DLPack capsule ("dltensor"): NumPy consumes it through a producer shim
        return wrap_numpy(_np.from_dlpack(_CapsuleProducer(obj)))
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (list, tuple)) and \
            not hasattr(obj, "__array__") and not hasattr(obj, "__array_interface__"):
        return wrap_numpy(_np.from_dlpack(obj))
    if isinstance(obj, (list, tuple)):
        leaf = _first_leaf(obj)
        if type(leaf) is float:
            # Python floats: build straight in the default float dtype (one pass)
            try:
                arr = _np.asarray(obj, dtype=DTYPE_OBJS[default_float])
            except (TypeError, ValueError):
                arr = None      # mixed content: let NumPy infer below
            # a None in the list also reads as NaN here: NumPy makes an object array
            if arr is not None and not (arr.size and _np.isnan(arr).any()
                                        and _np.asarray(obj).dtype.kind == "O"):
                return wrap_numpy(arr)
        arr = _np.asarray(obj)
        if dtype_kind(arr.dtype) in "OUSV":
            raise TypeError(f"asarray: cannot convert {type(obj).__name__} of "
                            f"{type(leaf).__name__} to a numeric array (NumPy would make "
                            f"dtype {arr.dtype}): ember supports numeric dtypes only")
        if _is_python_scalar(leaf) and not isinstance(leaf, _np.generic):
            # Python floats and complexes take ember's default dtypes.
            if arr.dtype == _np.float64:
                arr = arr.astype(DTYPE_OBJS[default_float])
            elif arr.dtype == _np.complex128:
                arr = arr.astype(DTYPE_OBJS[default_complex])
        elif arr.dtype == _np.float64 and len(arr.shape) and arr.size == 0:
            arr = arr.astype(DTYPE_OBJS[default_float])
        return wrap_numpy(arr)
    if PyObject_CheckBuffer(obj) and not hasattr(obj, "__array__"):
        return wrap_numpy(_np.asarray(memoryview(obj)))
    try:
        arr = _np.asarray(obj)
    except TypeError:
        # a bfloat16 producer whose __array__ refuses (torch.Tensor) may still speak DLPack
        if not hasattr(obj, "__dlpack__") or obj.__dlpack_device__()[0] != 1:
            raise
        from ember._core.dlpack_bf16 import import_bfloat16
        arr = import_bfloat16(obj)
        if arr is None:
            raise
    if dtype_kind(arr.dtype) in "OUSV":
        raise TypeError(f"asarray: cannot convert object of type {type(obj).__name__} to an "
                        f"array (NumPy would make dtype {arr.dtype}): ember supports numeric "
                        f"dtypes only")
    return wrap_numpy(arr)


def _from_numpy(arr):
    """Unpickling: an ember array owning the (unpickled) NumPy array's memory."""
    if not isinstance(arr, _np.ndarray):
        raise TypeError(f"_from_numpy: expected a NumPy array, got {type(arr).__name__}")
    return wrap_numpy(arr)


def _wrap(obj):
    """Python entry: NumPy array / array-like -> ember array (zero-copy when possible)."""
    return as_ndarray(obj)


def _numpy(ndarray x not None):
    """Python entry: a zero-copy NumPy view of an ember array."""
    return numpy_view(x)


def _empty(shape, dtype=None, str opname="empty"):
    """An uninitialised C-contiguous array on the default device (the CPU unless a
    GPU op or a ``with ember.device('cuda')`` block is running)."""
    cdef Py_ssize_t dims[MAXDIM]
    cdef int i, code
    shape = parse_shape(shape, opname)
    code = default_float if dtype is None else code_of(dtype)
    for i in range(len(shape)):
        dims[i] = shape[i]
    checked_size(len(shape), dims, ITEMSIZE[code], opname)     # before any device allocates
    if _alloc_device is not CPU:
        return _gpu_backend.empty(shape, DTYPE_OBJS[code], _alloc_device)
    return new_empty(code, len(shape), dims, opname)


def _zeros(shape, dtype=None, str opname="zeros"):
    """A fresh C-contiguous array of zeros (all-zero bytes are zero in every dtype)."""
    cdef ndarray x = _empty(shape, dtype, opname)
    if on_gpu(x):
        _gpu_backend.memset0(x)
    else:
        memset(x.data, 0, x.size * x.itemsize)
    return x


def _as_strided(ndarray base not None, shape, strides, Py_ssize_t offset_bytes, dtype=None):
    """A raw view of base's storage (strides and offset in bytes); for library code."""
    cdef Py_ssize_t dims[MAXDIM]
    cdef Py_ssize_t st[MAXDIM]
    cdef int i, n = len(shape)
    cdef int code = base.tcode if dtype is None else code_of(dtype)
    if n > MAXDIM:
        raise ValueError(f"ember supports at most {MAXDIM} dimensions, got {n}")
    for i in range(n):
        dims[i] = shape[i]
        st[i] = strides[i]
    return new_view(base, n, dims, st, offset_bytes, code)


# ember.set_printoptions's options (None: NumPy's current ones); repr and str print
# host values through NumPy under them, so ember's options do not change NumPy's
_print_options = None


def _set_print_options(opts):
    global _print_options
    _print_options = opts


def _get_print_options():
    return _print_options


def _storage_offset_bytes(ndarray x not None):
    return x.offset


# ---------------------------------------------------------------- indexing

cdef object _basic_view(ndarray x, tuple key):
    """The view for a key made only of ints, slices, None and Ellipsis; None if
    the key needs advanced indexing."""
    cdef Py_ssize_t new_shape[MAXDIM]
    cdef Py_ssize_t new_strides[MAXDIM]
    cdef int consumed = 0, n_ellipsis = 0, out = 0, src = 0, i, j, rest
    cdef Py_ssize_t offset = x.offset, start, stop, step, length, idx, n
    for k in key:
        if k is None:
            continue
        if k is Ellipsis:
            n_ellipsis += 1
        elif isinstance(k, slice):
            consumed += 1
        elif isinstance(k, int) and not isinstance(k, bool):
            consumed += 1
        elif isinstance(k, _np.integer):
            consumed += 1
        else:
            return None
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, "
                         f"but {consumed} were indexed")
    cdef int n_new = 0
    for k in key:
        if k is None:
            n_new += 1
    if x.ndim - consumed + n_new > MAXDIM:
        raise IndexError(f"indexing: the result would have {x.ndim - consumed + n_new} "
                         f"dimensions; ember supports at most {MAXDIM}")
    for k in key:
        if k is None:
            new_shape[out] = 1
            new_strides[out] = 0
            out += 1
        elif k is Ellipsis:
            rest = x.ndim - consumed
            for j in range(rest):
                new_shape[out] = x.shape[src]
                new_strides[out] = x.strides[src]
                out += 1
                src += 1
        elif isinstance(k, slice):
            n = x.shape[src]
            PySlice_GetIndicesEx(k, n, &start, &stop, &step, &length)
            new_shape[out] = length
            new_strides[out] = x.strides[src] * step
            if length > 0:
                offset += start * x.strides[src]
            out += 1
            src += 1
        else:
            pyidx = _operator.index(k)
            n = x.shape[src]
            if not (-n <= pyidx < n):
                _index_fits(pyidx)
                raise IndexError(f"index {pyidx} is out of bounds for axis {src} with size {n}")
            idx = pyidx
            if idx < -n or idx >= n:
                raise IndexError(f"index {idx} is out of bounds for axis {src} with size {n}")
            if idx < 0:
                idx += n
            offset += idx * x.strides[src]
            src += 1
    while src < x.ndim:
        new_shape[out] = x.shape[src]
        new_strides[out] = x.strides[src]
        out += 1
        src += 1
    return new_view(x, out, new_shape, new_strides, offset, x.tcode)


cdef inline ndarray _index_int(ndarray x, Py_ssize_t idx):
    cdef Py_ssize_t n
    if x.ndim == 0:
        raise IndexError("too many indices for array: array is 0-dimensional, but 1 were indexed")
    n = x.shape[0]
    if idx < -n or idx >= n:
        raise IndexError(f"index {idx} is out of bounds for axis 0 with size {n}")
    if idx < 0:
        idx += n
    return new_view(x, x.ndim - 1, &x.shape[1], &x.strides[1], x.offset + idx * x.strides[0], x.tcode)


cdef int _index_fits(object key) except -1:
    """NumPy's errors for an integer index that does not fit an index variable: an
    OverflowError up to 2**64, an IndexError beyond (and below -2**63)."""
    if 9223372036854775807 < key <= 18446744073709551615:
        raise OverflowError("Python int too large to convert to C long")
    if key < -9223372036854775808 or key > 18446744073709551615:
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis "
                         "(`None`) and integer or boolean arrays are valid indices")
    return 0


cdef ndarray _index_pyint(ndarray x, object key):
    """x[key] for a Python int key of any size (out of range -> IndexError)."""
    if x.ndim == 0:
        raise IndexError("too many indices for array: array is 0-dimensional, but 1 were indexed")
    if not (-x.shape[0] <= key < x.shape[0]):
        _index_fits(key)
        raise IndexError(f"index {key} is out of bounds for axis 0 with size {x.shape[0]}")
    return _index_int(x, key)


cdef object _reshape_contiguous(ndarray x, tuple shape):
    """Fast path of reshape for a C-contiguous array and a tuple of Python ints
    (at most one -1): the view's strides are the C strides.  None when the
    shape needs the general routine (errors included, which it words)."""
    cdef Py_ssize_t dims[MAXDIM]
    cdef Py_ssize_t strides[MAXDIM]
    cdef Py_ssize_t known = 1, st
    cdef int n = len(shape), i, neg = -1
    if n > MAXDIM:
        return None
    for i in range(n):
        s = shape[i]
        if type(s) is not int:
            return None
        dims[i] = s
        if dims[i] == -1:
            if neg >= 0:
                return None
            neg = i
        elif dims[i] < 0:
            return None
        else:
            known *= dims[i]
    if neg >= 0:
        if known == 0 or x.size % known:
            return None
        dims[neg] = x.size // known
        known *= dims[neg]
    if known != x.size:
        return None
    st = x.itemsize
    for i in range(n - 1, -1, -1):
        strides[i] = st
        st *= dims[i] if dims[i] > 0 else 1
    return new_view(x, n, dims, strides, x.offset, x.tcode)


# ---------------------------------------------------------------- element assignment

cdef inline bint _is_sequence_value(object value):
    if isinstance(value, (list, tuple)):
        return True
    if isinstance(value, ndarray):
        return (<ndarray>value).ndim > 0
    return isinstance(value, _np.ndarray) and value.ndim > 0


cdef bint _int_key(object key, int ndim):
    """True when key picks one element with integers only (``x[i]``, ``x[i, j]``...)."""
    if not isinstance(key, tuple):
        key = (key,)
    if len(<tuple>key) != ndim:
        return False
    for k in <tuple>key:
        if isinstance(k, bool) or not (isinstance(k, int) or isinstance(k, _np.integer)):
            return False
    return True


cdef object _element_of_sequence(int tcode, object value):
    """``x[i] = value`` where value is a sequence: NumPy converts it to one element of
    x's dtype and fails with the error of that conversion (bool takes its truth)."""
    cdef char k = KIND[tcode]
    if isinstance(value, (list, tuple)):
        if k == b'b':
            return bool(value)
        if k == b'i' or k == b'u':
            raise TypeError(f"int() argument must be a string, a bytes-like object or a "
                            f"real number, not '{type(value).__name__}'")
        if k == b'c':
            raise TypeError(f"must be real number, not {type(value).__name__}")
        raise ValueError("setting an array element with a sequence.")
    if k == b'c':
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
    raise ValueError("setting an array element with a sequence.")


# ---------------------------------------------------------------- the array

cdef inline bint _tracking(ndarray x) noexcept:
    """True when an operation on x must be recorded for autograd."""
    return x._requires_grad and ember_grad_mode


cdef inline bint _tracked_value(object v) noexcept:
    return isinstance(v, ndarray) and (<ndarray>v)._requires_grad and ember_grad_mode


cdef inline object _ns(ndarray x):
    """Where a method finds its function: the plain one unless x is being recorded
    (or lives on a GPU: the dispatching entry then picks the GPU implementation)."""
    if _ember_untracked is None or (x._requires_grad and ember_grad_mode) or on_gpu(x):
        return _ember
    return _ember_untracked


cdef inline object _bin(int op, object a, object b):
    return _binary(op, a, b, None)


cdef inline object _inplace(int op, ndarray a, object b):
    _binary(op, a, b, a)
    return a


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
               "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
               "bool": "BoolTensor", "complex64": "ComplexFloatTensor",
               "complex128": "ComplexDoubleTensor"}
_TYPE_DTYPES = {v: k for k, v in _TYPE_NAMES.items()}


cdef object _size_arg(tuple size, str opname):
    """PyTorch's ``*size``: separate ints or one sequence."""
    if len(size) == 1 and not isinstance(size[0], int):
        return parse_shape(size[0], opname)
    return parse_shape(size, opname)


cdef object _src(ndarray self):
    """What an in-place method computes from: a recorded copy while self is in a graph
    (the op must not save the array it then overwrites), else self."""
    return self.copy() if _tracking(self) else self


cdef object _write(ndarray self, object value):
    """self[...] = value (recorded by autograd, version bumped); returns self."""
    self[...] = value
    return self


cdef object _divide(ndarray self, object other, object rounding_mode):
    if rounding_mode is None:
        return _bin(OP_DIVIDE, self, other)
    if rounding_mode == "floor":
        return _bin(OP_FLOOR_DIVIDE, self, other)
    if rounding_mode == "trunc":
        return _ember.trunc(_bin(OP_DIVIDE, self, other)).astype(
            _ember.result_type(self, other), copy=False)
    raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


def _torch_type(ndarray x, dtype):
    """x.type(dtype): see ndarray.type."""
    if dtype is None:
        tname = DTYPE_OBJS[x.tcode].name
        tname = _TYPE_NAMES.get(tname, tname)
        return ("ember.cuda." if on_gpu(x) else "ember.") + tname
    if isinstance(dtype, str):
        last = dtype.rpartition(".")[2]
        if last in _TYPE_DTYPES:
            if ".cuda." in dtype and not on_gpu(x):
                return x.to("cuda", _TYPE_DTYPES[last])
            dtype = _TYPE_DTYPES[last]
    return x.astype(dtype, copy=False)


class _Size(int):
    """``x.size``: the element count (a Python int for everything NumPy does with it),
    also callable as PyTorch's ``size``: ``x.size()`` is the shape, ``x.size(d)``
    (``x.size(dim=d)``) one length.  Pickles, copies and hashes as a plain int."""

    def __call__(self, dim=None):
        shape = self._shape
        if dim is None:
            return shape
        try:
            d = _operator.index(dim)
        except TypeError:
            raise TypeError(f"size: dim must be an int, got {type(dim).__name__}") from None
        n = len(shape)
        if not -max(n, 1) <= d < max(n, 1) or n == 0:
            raise IndexError(f"size: dimension out of range (expected to be in range of "
                             f"[{-max(n, 1)}, {max(n, 1) - 1}], but got {d}) for an array of "
                             f"shape {shape}")
        return shape[d + n if d < 0 else d]      # (this module compiles without wraparound)

    def __reduce__(self):
        return (int, (int(self),))

    def __copy__(self):
        return int(self)

    def __deepcopy__(self, memo):
        return int(self)


cdef object _SIZE_T = _Size


@cython.freelist(256)
cdef class ndarray:
    """ember's n-dimensional array (alias ``ember.Tensor``).

    Create arrays with ``ember.asarray``, ``ember.zeros``, ``ember.arange``...;
    the constructor itself is not meant to be called.

    >>> import ember
    >>> x = ember.asarray([[1.0, 2.0], [3.0, 4.0]])
    >>> (x.T @ x).sum().item()
    58.0
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("ember.ndarray cannot be constructed directly; use ember.asarray, "
                        "ember.empty, ember.zeros ...")

    # ------------------------------------------------------------ attributes
    @property
    def shape(self):
        """The array's dimensions as a tuple of ints."""
        return shape_tuple(self)

    @property
    def ndim(self):
        return self.ndim

    @property
    def size(self):
        """The number of elements, NumPy's int, which PyTorch code may also call:
        ``x.size()`` is the shape, ``x.size(d)`` the length of dimension d.

        >>> import ember
        >>> x = ember.zeros((2, 3))
        >>> x.size, x.size(), x.size(-1), isinstance(x.size, int)
        (6, (2, 3), 3, True)
        """
        if self._size_obj is None:
            self._size_obj = _Size(self.size)
            self._size_obj._shape = shape_tuple(self)
        return self._size_obj

    @property
    def dtype(self):
        return DTYPE_OBJS[self.tcode]

    @property
    def device(self):
        if self.storage.device_index >= 0:
            return cuda_device(self.storage.device_index)
        return CPU

    @property
    def is_cuda(self):
        """True when the array lives on a CUDA device."""
        return self.storage.device_index >= 0

    @property
    def is_cpu(self):
        return self.storage.device_index < 0

    def get_device(self):
        """The CUDA device index, or -1 for host arrays (PyTorch's spelling)."""
        return self.storage.device_index

    @property
    def itemsize(self):
        return self.itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def strides(self):
        """Strides in bytes, as NumPy reports them."""
        cdef int i
        return tuple([self.strides[i] for i in range(self.ndim)])

    @property
    def storage(self):
        """The Storage this array is a view of (shared with every view)."""
        return self.storage

    @property
    def _version(self):
        return self.storage.version

    def _bump_version(self):
        self.storage.version += 1

    @property
    def is_contiguous_c(self):
        return self.c_contig

    def is_contiguous(self):
        """True if the array is C-contiguous (PyTorch's spelling)."""
        return self.c_contig

    def data_ptr(self):
        """Address of the first element."""
        return <size_t>self.data

    @property
    def flags(self):
        """NumPy's flags (``x.flags.writeable = False`` makes x read-only: every write
        through x, or through a view made from x afterwards, raises ValueError)."""
        cdef ArrayFlags f = ArrayFlags.__new__(ArrayFlags)
        f._x = self
        return f

    @property
    def base(self):
        return None

    @property
    def flat(self):
        """A flat (C-order) iterator over the array that also indexes and assigns
        (NumPy's ``flatiter``)."""
        return _ember._flatiter(self)

    @flat.setter
    def flat(self, value):
        _ember._flatiter(self)[...] = value

    @property
    def T(self):
        """The array with its axes reversed (a view)."""
        cdef Py_ssize_t sh[MAXDIM]
        cdef Py_ssize_t st[MAXDIM]
        cdef int i
        if _tracking(self):
            return _ember.permute_dims(self, tuple(range(self.ndim - 1, -1, -1)))
        for i in range(self.ndim):
            sh[i] = self.shape[self.ndim - 1 - i]
            st[i] = self.strides[self.ndim - 1 - i]
        return new_view(self, self.ndim, sh, st, self.offset, self.tcode)

    @property
    def mT(self):
        """The last two axes swapped (a view); needs ndim >= 2."""
        cdef Py_ssize_t sh[MAXDIM]
        cdef Py_ssize_t st[MAXDIM]
        cdef int i
        if self.ndim < 2:
            raise ValueError(f"mT: array must have at least 2 dimensions, got shape {shape_tuple(self)}")
        if _tracking(self):
            return _ember.matrix_transpose(self)
        for i in range(self.ndim):
            sh[i] = self.shape[i]
            st[i] = self.strides[i]
        sh[self.ndim - 1], sh[self.ndim - 2] = sh[self.ndim - 2], sh[self.ndim - 1]
        st[self.ndim - 1], st[self.ndim - 2] = st[self.ndim - 2], st[self.ndim - 1]
        return new_view(self, self.ndim, sh, st, self.offset, self.tcode)

    @property
    def real(self):
        return _ember.real(self)

    @property
    def imag(self):
        return _ember.imag(self)

    # ------------------------------------------------------------ autograd slots
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        value = bool(value)
        if not value and self.grad_fn is not None:
            raise RuntimeError("requires_grad: you can only change requires_grad of leaf "
                               "arrays; use x.detach() to get an array that does not require grad")
        if value and KIND[self.tcode] != b'f' and KIND[self.tcode] != b'c':
            raise RuntimeError(f"only arrays of floating point or complex dtype can require "
                               f"gradients, got {DTYPE_OBJS[self.tcode]}")
        self._requires_grad = value

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` in place and return the array (leaves only)."""
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_: you can only change requires_grad of leaf "
                               "arrays; use x.detach() to get an array that does not require grad")
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        """True for arrays not produced by a recorded op (those accumulate ``.grad``)."""
        return self.grad_fn is None

    def detach(self):
        """A new array on the same memory, cut from the graph (does not require grad)."""
        return new_view(self, self.ndim, self.shape, self.strides, self.offset, self.tcode)

    def detach_(self):
        """Cut this array from the graph, in place."""
        if self._view_of is not None:
            raise RuntimeError("detach_: cannot detach a view of another array in place; "
                               "use x.detach()")
        self.grad_fn = None
        self._requires_grad = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this array into the ``.grad`` of the leaves
        (see ``ember.autograd.backward``)."""
        if gradient is None and inputs is None and _ember.autograd._engine._backward_scalar(
                self, create_graph if retain_graph is None else retain_graph, create_graph):
            return
        _ember.autograd.backward(self, gradient, retain_graph=retain_graph,
                             create_graph=create_graph, inputs=inputs)

    def retain_grad(self):
        """Keep ``.grad`` for this non-leaf array on backward (leaves always do)."""
        _ember.autograd._retain_grad(self)

    @property
    def retains_grad(self):
        return _ember.autograd._retains_grad(self)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this array's gradient is computed; a returned
        array replaces the gradient.  Returns a handle with ``remove()``."""
        return _ember.autograd._register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(x)`` after the gradient is accumulated into leaf ``x.grad``."""
        return _ember.autograd._register_post_accumulate_grad_hook(self, hook)

    # ------------------------------------------------------------ conversion
    def __array__(self, dtype=None, /, *, copy=None):
        if isinstance(dtype, (ndarray, _np.ndarray)):
            raise TypeError("__array__: Cannot construct a dtype from an array")
        if on_gpu(self):
            _no_host(self, "__array__")
        arr = numpy_view(self)
        if dtype is not None and _np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"__array__: cannot convert {arr.dtype} to {dtype} without a copy")
            return arr.astype(dtype)
        if copy:
            return arr.copy()
        return arr

    def numpy(self):
        """A NumPy array sharing this array's memory (no copy); host arrays only
        (``x.cpu().numpy()`` for a GPU array, as in PyTorch)."""
        if on_gpu(self):
            _no_host(self, "numpy")
        return numpy_view(self)

    def __array_namespace__(self, api_version=None):
        if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"__array_namespace__: unsupported API version {api_version!r}")
        return _ember

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if max_version is not None and not (isinstance(max_version, tuple)
                                            and len(max_version) == 2):
            raise TypeError(f"__dlpack__: max_version must be None or a tuple with two "
                            f"elements, got {type(max_version).__name__}")
        if on_gpu(self):
            return _gpu_backend.dlpack(self, stream=stream, max_version=max_version,
                             dl_device=dl_device, copy=copy)
        if stream is not None:
            raise BufferError("__dlpack__: stream must be None for CPU arrays")
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError(f"__dlpack__: cannot export a cpu array to device {dl_device}")
        arr = numpy_view(self)
        if copy:
            arr = arr.copy()
        kw = {}
        if max_version is not None:
            kw["max_version"] = max_version
        if self.tcode == T_BFLOAT16:        # NumPy's exporter knows no bfloat16
            from ember._core.dlpack_bf16 import export_bfloat16
            return export_bfloat16(arr, **kw)
        try:
            return arr.__dlpack__(**kw)
        except TypeError:
            return arr.__dlpack__()

    @property
    def __cuda_array_interface__(self):
        """CUDA Array Interface (v3) of a GPU array, so CuPy, Numba and PyTorch can
        use its memory without a copy; host arrays do not have it."""
        if not on_gpu(self):
            raise AttributeError("__cuda_array_interface__: only CUDA arrays have it "
                                 "(this array is on cpu)")
        if _gpu_backend is not None:      # the consumer must not read what a failed check left
            _gpu_backend.flush_checks()
        return {"shape": shape_tuple(self), "typestr": DTYPE_OBJS[self.tcode].str,
                "data": (<size_t>self.data, bool(self.readonly)), "version": 3,
                "strides": None if self.c_contig else
                tuple([self.strides[i] for i in range(self.ndim)]),
                "stream": None}

    def __dlpack_device__(self):
        if on_gpu(self):
            return (2, self.storage.device_index)        # kDLCUDA
        return (1, 0)

    def to_device(self, device, /, *, stream=None):
        """The array on `device` (the same array when it is already there)."""
        if device is None:
            raise TypeError("to_device: device must be a device or a str, not None")
        d = check_device(device, "to_device")
        if stream is not None and d.type == "cpu":
            raise ValueError("to_device: the stream argument is not supported for the cpu")
        return self._moved(d, False)

    def _moved(self, d, bint copy):
        """Self on device d: a copy across devices, self (or a copy if asked) otherwise.
        The copy is recorded for autograd (gradients flow back across devices)."""
        if d == self.device:
            return self.copy() if copy else self
        if _tracking(self):
            return _ember._to_device(self, d)
        return _gpu_backend.transfer(self, d)

    def cuda(self, device=None, non_blocking=False):
        """A copy on a CUDA device (self when already there)."""
        return self._moved(check_device("cuda" if device is None else
                                        (device if not isinstance(device, int) else
                                         Device("cuda", device)), "cuda"), False)

    def to(self, *args, **kwargs):
        """``x.to(device)``, ``x.to(dtype)`` or ``x.to(device, dtype)`` (PyTorch's spelling)."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to: unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, (str, Device)):
                device = a
            else:
                dtype = a
        cdef ndarray x = self
        if device is not None:
            x = x._moved(check_device(device, "to"), copy and dtype is None)
            if x is not self:
                copy = False
        if dtype is not None and code_of(dtype) != x.tcode:
            return x.astype(dtype)
        return x.copy() if copy else x

    def cpu(self):
        """A copy in host memory (self when already there)."""
        return self._moved(CPU, False)

    def tolist(self):
        return host_values(self).tolist()

    def item(self, *args):
        """The value of a one-element array as a Python scalar."""
        if args:
            return host_values(self).item(*args)
        if self.size != 1:
            raise ValueError(f"item: can only convert an array of size 1 to a Python scalar, "
                             f"got shape {shape_tuple(self)}")
        return host_values(self).item()

    def __bool__(self):
        if self.size != 1:
            raise ValueError(f"The truth value of an array with more than one element is "
                             f"ambiguous (shape {shape_tuple(self)}). Use a.any() or a.all()")
        return bool(host_values(self).item())

    def __int__(self):
        if self.size != 1:
            raise TypeError(f"only arrays of size 1 can be converted to Python scalars, got shape {shape_tuple(self)}")
        v = host_values(self).item()
        if isinstance(v, complex):
            raise TypeError("int: cannot convert a complex array to int; take .real first")
        return int(v)

    def __float__(self):
        if self.size != 1:
            raise TypeError(f"only arrays of size 1 can be converted to Python scalars, got shape {shape_tuple(self)}")
        v = host_values(self).item()
        if isinstance(v, complex):
            raise TypeError("float: cannot convert a complex array to float; take .real first")
        return float(v)

    def __complex__(self):
        if self.size != 1:
            raise TypeError(f"only arrays of size 1 can be converted to Python scalars, got shape {shape_tuple(self)}")
        return complex(host_values(self).item())

    def __index__(self):
        # NumPy's rule: integers only (a bool 0-d array is no index: PyTorch allows it)
        if self.ndim != 0 or not (KIND[self.tcode] == b'i' or KIND[self.tcode] == b'u'):
            raise TypeError(f"only integer 0-d arrays can be used as an index, got "
                            f"{DTYPE_OBJS[self.tcode]} array of shape {shape_tuple(self)}")
        return int(host_values(self).item())

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of unsized object (0-d array)")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        cdef Py_ssize_t i
        if _tracking(self):
            return (self[i] for i in range(self.shape[0]))
        return (_index_int(self, i) for i in range(self.shape[0]))

    def __repr__(self):
        if _print_options is not None:
            with _np.printoptions(**_print_options):
                return self._repr()
        return self._repr()

    def _repr(self):
        if self.tcode == T_BFLOAT16:
            # through float32 (exact): NumPy prints ml_dtypes' bfloat16 like integers ("3")
            r = repr(host_values(self).astype(_np.float32))
            r = (r[:-len("dtype=float32)")] if r.endswith("dtype=float32)") else r[:-1] + ", ") \
                + "dtype=bfloat16)"
        else:
            r = repr(host_values(self))
        if on_gpu(self):
            r = r[:-1] + f", device='{self.device}')"
        if self._requires_grad or self.grad_fn is not None:
            r = r[:-1] + (f", grad_fn=<{self.grad_fn.name}>)" if self.grad_fn is not None
                          else ", requires_grad=True)")
        return r

    def __str__(self):
        if _print_options is not None:
            with _np.printoptions(**_print_options):
                return self._str()
        return self._str()

    def _str(self):
        if self.tcode == T_BFLOAT16:
            return str(host_values(self).astype(_np.float32))
        return str(host_values(self))

    def __format__(self, spec):
        if self.ndim == 0:
            return format(host_values(self).item(), spec)
        return format(str(self), spec)

    def __reduce__(self):
        if on_gpu(self):
            return (_gpu_backend.from_host_on, (host_values(self), self.storage.device_index))
        return (_from_numpy, (numpy_view(self).copy(),))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    __hash__ = None

    # ------------------------------------------------------------ indexing
    def __getitem__(self, key):
        cdef object v
        if _tracking(self):
            return _ember._ag_getitem(self, key)
        if isinstance(key, int) and not isinstance(key, bool):
            return _index_pyint(self, key)
        if isinstance(key, tuple):
            v = _basic_view(self, <tuple>key)
        elif key is None or key is Ellipsis or isinstance(key, slice) or isinstance(key, _np.integer):
            v = _basic_view(self, (key,))
        else:
            v = None
        if v is not None:
            return v
        return _ember._getitem_advanced(self, key)

    def __setitem__(self, key, value):
        cdef object v
        if self.readonly:
            raise ValueError("assignment destination is read-only")
        if ember_grad_mode and (self._requires_grad or _tracked_value(value)):
            _ember._ag_setitem(self, key, value)
            return
        if isinstance(key, int) and not isinstance(key, bool):
            v = _index_pyint(self, key)
        elif isinstance(key, tuple):
            v = _basic_view(self, <tuple>key)
        elif key is None or key is Ellipsis or isinstance(key, slice) or isinstance(key, _np.integer):
            v = _basic_view(self, (key,))
        else:
            v = None
        if v is None:
            _ember._setitem_advanced(self, key, value)
        else:
            if (<ndarray>v).ndim == 0 and _is_sequence_value(value) and _int_key(key, self.ndim):
                value = _element_of_sequence(self.tcode, value)
            _assign(v, value)
        self.storage.version += 1

    # ------------------------------------------------------------ operators
    def __add__(self, other): return _bin(OP_ADD, self, other)
    def __radd__(self, other): return _bin(OP_ADD, other, self)
    def __iadd__(self, other): return _inplace(OP_ADD, self, other)
    def __sub__(self, other): return _bin(OP_SUBTRACT, self, other)
    def __rsub__(self, other): return _bin(OP_SUBTRACT, other, self)
    def __isub__(self, other): return _inplace(OP_SUBTRACT, self, other)
    def __mul__(self, other): return _bin(OP_MULTIPLY, self, other)
    def __rmul__(self, other): return _bin(OP_MULTIPLY, other, self)
    def __imul__(self, other): return _inplace(OP_MULTIPLY, self, other)
    def __truediv__(self, other): return _bin(OP_DIVIDE, self, other)
    def __rtruediv__(self, other): return _bin(OP_DIVIDE, other, self)
    def __itruediv__(self, other): return _inplace(OP_DIVIDE, self, other)
    def __floordiv__(self, other): return _bin(OP_FLOOR_DIVIDE, self, other)
    def __rfloordiv__(self, other): return _bin(OP_FLOOR_DIVIDE, other, self)
    def __ifloordiv__(self, other): return _inplace(OP_FLOOR_DIVIDE, self, other)
    def __mod__(self, other): return _bin(OP_REMAINDER, self, other)
    def __rmod__(self, other): return _bin(OP_REMAINDER, other, self)
    def __imod__(self, other): return _inplace(OP_REMAINDER, self, other)
    def __pow__(self, other, mod=None): return _bin(OP_POWER, self, other)
    def __rpow__(self, other, mod=None): return _bin(OP_POWER, other, self)
    def __ipow__(self, other): return _inplace(OP_POWER, self, other)
    def __and__(self, other): return _bin(OP_BITWISE_AND, self, other)
    def __rand__(self, other): return _bin(OP_BITWISE_AND, other, self)
    def __iand__(self, other): return _inplace(OP_BITWISE_AND, self, other)
    def __or__(self, other): return _bin(OP_BITWISE_OR, self, other)
    def __ror__(self, other): return _bin(OP_BITWISE_OR, other, self)
    def __ior__(self, other): return _inplace(OP_BITWISE_OR, self, other)
    def __xor__(self, other): return _bin(OP_BITWISE_XOR, self, other)
    def __rxor__(self, other): return _bin(OP_BITWISE_XOR, other, self)
    def __ixor__(self, other): return _inplace(OP_BITWISE_XOR, self, other)
    def __lshift__(self, other): return _bin(OP_LEFT_SHIFT, self, other)
    def __rlshift__(self, other): return _bin(OP_LEFT_SHIFT, other, self)
    def __ilshift__(self, other): return _inplace(OP_LEFT_SHIFT, self, other)
    def __rshift__(self, other): return _bin(OP_RIGHT_SHIFT, self, other)
    def __rrshift__(self, other): return _bin(OP_RIGHT_SHIFT, other, self)
    def __irshift__(self, other): return _inplace(OP_RIGHT_SHIFT, self, other)
    def __matmul__(self, other): return _ember.matmul(self, other)
    def __rmatmul__(self, other): return _ember.matmul(other, self)
    def __imatmul__(self, other):
        check_writeable(self, "matmul")
        res = _ember.matmul(self, other)
        if ember_grad_mode and (self._requires_grad or _tracked_value(res)):
            _ember._ag_setitem(self, Ellipsis, res)
            return self
        _assign(self, res)
        self.storage.version += 1
        return self
    def __divmod__(self, other): return (_bin(OP_FLOOR_DIVIDE, self, other), _bin(OP_REMAINDER, self, other))
    def __rdivmod__(self, other): return (_bin(OP_FLOOR_DIVIDE, other, self), _bin(OP_REMAINDER, other, self))

    def __neg__(self): return _unary(OP_NEGATIVE, self, None)
    def __pos__(self): return _unary(OP_POSITIVE, self, None)
    def __abs__(self): return _unary(OP_ABSOLUTE, self, None)
    def __invert__(self): return _unary(OP_INVERT, self, None)

    def __eq__(self, other):
        try:
            return _bin(OP_EQUAL, self, other)
        except TypeError:
            return NotImplemented
    def __ne__(self, other):
        try:
            return _bin(OP_NOT_EQUAL, self, other)
        except TypeError:
            return NotImplemented
    def __lt__(self, other): return _bin(OP_LESS, self, other)
    def __le__(self, other): return _bin(OP_LESS_EQUAL, self, other)
    def __gt__(self, other): return _bin(OP_GREATER, self, other)
    def __ge__(self, other): return _bin(OP_GREATER_EQUAL, self, other)

    # ------------------------------------------------------------ NumPy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _ember._array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _ember._array_function(func, types, args, kwargs)

    # ------------------------------------------------------------ methods
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True, *,
               device=None):
        """A copy cast to `dtype`, laid out as NumPy's: ``order='K'`` keeps x's memory
        order (axes by decreasing absolute stride, dense, strides made positive),
        'C'/'F' ask for that order, 'A' for F when x is Fortran-contiguous, else C.  ``copy=False`` returns
        self when the dtype and the order already match; NumPy's `casting` rule is
        enforced.

        >>> import ember
        >>> x = ember.ones((2, 3, 4), dtype=ember.float64).transpose(0, 2, 1)
        >>> x.astype(ember.float32).strides, x.astype(ember.float32, order="C").strides
        ((48, 4, 16), (48, 12, 4))
        """
        cdef int code = code_of(dtype)
        if not isinstance(subok, (bool, int, _np.integer, _np.bool_)):
            raise TypeError(f"astype: subok must be a bool, not {type(subok).__name__}")
        if order is not None and (not isinstance(order, str) or order not in ("C", "F", "A", "K")):
            raise (TypeError if not isinstance(order, str) else ValueError)(
                f"astype: order must be one of 'C', 'F', 'A', 'K', got {order!r}")
        if casting != "unsafe":
            if casting not in ("no", "equiv", "safe", "same_kind"):
                raise ValueError(f"astype: casting must be one of 'no', 'equiv', 'safe', "
                                 f"'same_kind', 'unsafe', got {casting!r}")
            if code != self.tcode and not _np.can_cast(DTYPE_OBJS[self.tcode],
                                                       DTYPE_OBJS[code], casting):
                raise TypeError(f"astype: cannot cast from {DTYPE_OBJS[self.tcode]} to "
                                f"{DTYPE_OBJS[code]} under casting={casting!r}")
        if device is not None:
            return self.to(device, dtype, copy=copy)
        if code == self.tcode and not copy and _in_order(self, order):
            return self
        if _tracking(self):
            if order is None or order == "K":
                return _ember.astype(self, dtype, copy=copy)
            # recorded as a cast (one op, one copy) in the resolved order
            return _ember.array(self, dtype=DTYPE_OBJS[code], copy=True,
                                order=chr(_copy_order(self, order)))
        return copy_laid_out(self, code, order)

    def copy(self, order="C"):
        """A copy in fresh memory, laid out as NumPy's: C-contiguous by default, 'F'
        Fortran-contiguous, 'A' F when x is Fortran-contiguous (else C), 'K' x's own
        memory order (see ``astype``).

        >>> import ember
        >>> x = ember.ones((2, 3)).T
        >>> x.copy().flags.c_contiguous, x.copy(order="K").flags.f_contiguous
        (True, True)
        """
        if not isinstance(order, str) or order not in ("C", "F", "A", "K"):
            raise (TypeError if not isinstance(order, str) else ValueError)(
                f"copy: order must be one of 'C', 'F', 'A', 'K', got {order!r}")
        if _tracking(self):
            return _ember.copy(self, order=order)
        return copy_laid_out(self, self.tcode, order)

    def clone(self):
        return self.copy()

    def contiguous(self):
        return self if self.c_contig else self.copy()

    def fill(self, value, /):
        """Set every element to `value`, in place (positional, as NumPy's)."""
        if self.readonly:
            raise ValueError("fill: assignment destination is read-only")
        if isinstance(value, (list, tuple)) or (isinstance(value, (ndarray, _np.ndarray))
                                                and value.ndim != 0):
            raise ValueError(f"fill: the value must be a scalar (a 0-d array at most), got "
                             f"{type(value).__name__} of shape {_np.shape(value)}")
        if ember_grad_mode and (self._requires_grad or _tracked_value(value)):
            _ember._ag_setitem(self, Ellipsis, value)
            return
        _assign(self, value)
        self.storage.version += 1

    def numel(self):
        return self.size

    # PyTorch's dtype shorthands (NumPy arrays have none of these names)
    def half(self):
        """``x.astype(float16)``, PyTorch's spelling (differentiable)."""
        return self.astype(DTYPE_OBJS[T_FLOAT16])

    def bfloat16(self):
        """``x.astype(bfloat16)``, PyTorch's spelling (differentiable)."""
        return self.astype(DTYPE_OBJS[T_BFLOAT16])

    def float(self):
        """``x.astype(float32)``, PyTorch's spelling (differentiable)."""
        return self.astype(DTYPE_OBJS[T_FLOAT32])

    def double(self):
        """``x.astype(float64)``, PyTorch's spelling (differentiable)."""
        return self.astype(DTYPE_OBJS[T_FLOAT64])

    def is_floating_point(self):
        """True for float16, bfloat16, float32 and float64 arrays (PyTorch's test).

        >>> import ember
        >>> ember.ones(2).bfloat16().is_floating_point(), ember.arange(2).is_floating_point()
        (True, False)
        """
        return KIND[self.tcode] == b'f'

    def is_complex(self):
        return KIND[self.tcode] == b'c'

    def dim(self):
        return self.ndim

    def nelement(self):
        return self.size

    def element_size(self):
        return self.itemsize

    def reshape(self, *shape, order="C", copy=None):
        """A view with a new shape when the strides allow it, else a copy (see ember.reshape)."""
        cdef object v
        if not shape:
            raise TypeError("reshape: the new shape is missing (reshape takes exactly one "
                            "shape argument)")
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        if self.c_contig and copy is None and order == "C" and type(shape) is tuple and not _tracking(self):
            v = _reshape_contiguous(self, <tuple>shape)
            if v is not None:
                return v
        return _ember.reshape(self, shape, order=order, copy=copy)

    def view(self, *args, dtype=_np._NoValue):
        """``x.view(shape...)`` reshapes without copying (PyTorch); ``x.view(dtype)``
        reinterprets the bytes (NumPy; None, given, is NumPy's float64)."""
        if dtype is _np._NoValue:
            dtype = None
        elif dtype is None:
            dtype = _np.dtype(None)
        if dtype is not None and args:
            raise TypeError("view: the dtype is given by name and by position")
        if dtype is None and len(args) == 1 and not isinstance(args[0], (int, tuple, list)):
            dtype = _np.dtype(None) if args[0] is None else args[0]     # NumPy: None is float64
            args = ()
        if dtype is not None:
            return _ember._view_dtype(self, dtype)
        if len(args) == 1 and not isinstance(args[0], int):
            args = args[0]
        return _ember.reshape(self, args, copy=False)

    def transpose(self, *axes, dim0=None, dim1=None):
        """NumPy's transpose: reverse the axes, or permute them as given.  PyTorch's
        ``transpose(dim0, dim1)`` swaps two dimensions when NumPy's reading cannot
        apply (the array is not 2-d, or ``dim0=``/``dim1=`` are given); on a 2-d array
        ``x.transpose(0, 1)`` is NumPy's (the identity): use ``swapdims``/``x.T``."""
        if dim0 is not None or dim1 is not None:
            if dim0 is None or dim1 is None or axes:
                raise TypeError("transpose: PyTorch's form takes both dim0= and dim1=")
            return _ns(self).swapaxes(self, dim0, dim1)
        if len(axes) == 2 and self.ndim != 2 and isinstance(axes[0], int) \
                and isinstance(axes[1], int):
            return _ns(self).swapaxes(self, axes[0], axes[1])
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
            axes = axes[0]
        if isinstance(axes, tuple) and not axes:    # x.transpose(): the reversal
            axes = None
        return _ember.transpose(self, axes)

    def permute(self, *dims):
        if len(dims) == 1 and not isinstance(dims[0], int):
            dims = dims[0]
        return _ember.permute_dims(self, tuple(dims))

    def swapaxes(self, axis1, axis2, /): return _ns(self).swapaxes(self, axis1, axis2)
    def squeeze(self, axis=None, *, dim=None): return _ns(self).squeeze(self, axis if dim is None else dim)
    def unsqueeze(self, dim): return _ns(self).expand_dims(self, dim)
    def flatten(self, order="C", end_dim=-1, *, start_dim=None):
        """NumPy's flatten (a copy, ``order`` 'C' or 'F'); PyTorch's ``flatten(start_dim,
        end_dim)`` when given ints (which NumPy rejects) or ``start_dim=``."""
        if not isinstance(end_dim, int):
            raise TypeError(f"flatten: end_dim must be an int, got {type(end_dim).__name__}")
        if not isinstance(order, (int, str)):
            raise TypeError(f"flatten: order must be 'C', 'F', 'A' or 'K' (or PyTorch's "
                            f"start_dim, an int), got {type(order).__name__}")
        if start_dim is not None or isinstance(order, int) or end_dim != -1:
            s = start_dim if start_dim is not None else (order if isinstance(order, int) else 0)
            return _ember.flatten(self, s, end_dim)
        return _ns(self).reshape(self, (-1,), order=order, copy=True)
    def ravel(self, order="C"): return _ns(self).ravel(self, order=order)
    def expand(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        shape = tuple(self.shape[i - len(shape) + self.ndim] if s == -1 else s
                      for i, s in enumerate(shape))
        return _ember.broadcast_to(self, shape)
    def repeat(self, repeats, axis=None): return _ember.repeat(self, repeats, axis=axis)
    def take(self, indices, axis=None): return _ember.take(self, indices, axis=axis)
    def clip(self, min=None, max=None): return _ns(self).clip(self, min, max)
    def round(self, decimals=0): return _ns(self).round(self, decimals=decimals)
    def conj(self): return _ns(self).conj(self)
    def conjugate(self): return _ns(self).conj(self)
    def nonzero(self, *, as_tuple=None): return _ember.nonzero(self, as_tuple=as_tuple)
    def diagonal(self, offset=0, axis1=0, axis2=1): return _ns(self).diagonal(self, offset=offset, axis1=axis1, axis2=axis2)
    def trace(self, offset=0, axis1=0, axis2=1, dtype=None): return _ns(self).trace(self, offset=offset, axis1=axis1, axis2=axis2, dtype=dtype)
    def dot(self, other): return _ember.dot(self, other)
    def argsort(self, axis=-1, kind=None, order=None, *, descending=False, stable=True, dim=None):
        if order is not None:
            raise ValueError("argsort: cannot specify order when the array has no fields")
        return _ember.argsort(self, axis=axis if dim is None else dim, descending=descending,
                          stable=stable, kind=kind)
    def sort(self, axis=-1, kind=None, order=None, *, descending=False, stable=True, dim=None):
        """Sort in place along `axis` (NumPy's method semantics).  With PyTorch's
        ``dim=``: a sorted copy and the indices, as the named tuple ``(values, indices)``."""
        if dim is not None:
            return _ember.sort(self, dim=dim, descending=descending, stable=stable)
        if order is not None:
            raise ValueError("sort: cannot specify order when the array has no fields")
        if axis is None:
            raise TypeError("sort: the in-place sort takes an integer axis, not None (use "
                            "ember.sort(x, axis=None) for the flattened sorted copy)")
        if self.ndim == 0:                          # NumPy's in-place sort of a 0-d array
            raise _np.exceptions.AxisError(f"sort: axis {axis} is out of bounds for array "
                                           f"of dimension 0")
        check_writeable(self, "sort")
        if _tracking(self):
            # sort a copy: the sort node must not save the array it then overwrites
            res = _ember.sort(self.copy(), axis=axis, descending=descending, stable=stable,
                          kind=kind)
            _ember._ag_setitem(self, Ellipsis, res)
            return
        res = _ember.sort(self, axis=axis, descending=descending, stable=stable, kind=kind)
        _assign(self, res)
        self.storage.version += 1

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        if axis is None and dtype is None and out is None and not keepdims and dim is None \
                and not keepdim and _tracking(self):
            return _ns(self)._ag_sum_all(self)
        return _ns(self).sum(self, axis=axis if dim is None else dim, dtype=dtype, out=out,
                      keepdims=keepdims if keepdim is None else keepdim)
    def prod(self, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        return _ns(self).prod(self, axis=axis if dim is None else dim, dtype=dtype, out=out,
                       keepdims=keepdims if keepdim is None else keepdim)
    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        return _ns(self).mean(self, axis=axis if dim is None else dim, dtype=dtype, out=out,
                       keepdims=keepdims if keepdim is None else keepdim)
    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None, dim=None, keepdim=None, unbiased=None):
        if dim is not None or keepdim is not None or unbiased is not None:
            return _ember.var(self, axis=axis, dtype=dtype, out=out, ddof=ddof, correction=correction,
                          dim=dim, keepdim=keepdim, unbiased=unbiased)
        return _ns(self).var(self, axis=axis if dim is None else dim, dtype=dtype, out=out, ddof=ddof,
                      keepdims=keepdims if keepdim is None else keepdim, correction=correction)
    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None, dim=None, keepdim=None, unbiased=None):
        if dim is not None or keepdim is not None or unbiased is not None:
            return _ember.std(self, axis=axis, dtype=dtype, out=out, ddof=ddof, correction=correction,
                          dim=dim, keepdim=keepdim, unbiased=unbiased)
        return _ns(self).std(self, axis=axis if dim is None else dim, dtype=dtype, out=out, ddof=ddof,
                      keepdims=keepdims if keepdim is None else keepdim, correction=correction)
    def min(self, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        """NumPy's ``min``; PyTorch's ``min(dim=d)`` (or with ``keepdim=``) returns the
        named tuple ``(values, indices)``, and ``min(other_array)`` is elementwise."""
        if dim is not None or keepdim is not None or isinstance(axis, ndarray):
            return _ember.min(self, *(() if axis is None else (axis,)), dim=dim, keepdim=keepdim)
        return _ns(self).min(self, axis=axis if dim is None else dim, out=out,
                      keepdims=keepdims if keepdim is None else keepdim)
    def max(self, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        """NumPy's ``max``; PyTorch's ``max(dim=d)`` (or with ``keepdim=``) returns the
        named tuple ``(values, indices)``, and ``max(other_array)`` is elementwise."""
        if dim is not None or keepdim is not None or isinstance(axis, ndarray):
            return _ember.max(self, *(() if axis is None else (axis,)), dim=dim, keepdim=keepdim)
        return _ns(self).max(self, axis=axis if dim is None else dim, out=out,
                      keepdims=keepdims if keepdim is None else keepdim)
    def argmin(self, axis=None, out=None, *, keepdims=False, dim=None, keepdim=None):
        return _ns(self).argmin(self, axis=axis if dim is None else dim, out=out,
                         keepdims=keepdims if keepdim is None else keepdim)
    def argmax(self, axis=None, out=None, *, keepdims=False, dim=None, keepdim=None):
        return _ns(self).argmax(self, axis=axis if dim is None else dim, out=out,
                         keepdims=keepdims if keepdim is None else keepdim)
    def all(self, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        return _ns(self).all(self, axis=axis if dim is None else dim, out=out,
                      keepdims=keepdims if keepdim is None else keepdim)
    def any(self, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None):
        return _ns(self).any(self, axis=axis if dim is None else dim, out=out,
                      keepdims=keepdims if keepdim is None else keepdim)
    def cumsum(self, axis=None, dtype=None, out=None, *, dim=None):
        return _ns(self).cumsum(self, axis=axis if dim is None else dim, dtype=dtype, out=out)
    def cumprod(self, axis=None, dtype=None, out=None, *, dim=None):
        return _ns(self).cumprod(self, axis=axis if dim is None else dim, dtype=dtype, out=out)

    # ------------------------------------------------------------ PyTorch's Tensor methods
    # (names NumPy's ndarray does not have; each forwards to the ember function of the
    # same meaning, so gradients and the GPU path are that function's)
    def long(self): return self.astype(DTYPE_OBJS[T_INT64])
    def int(self): return self.astype(_np.dtype(_np.int32))
    def short(self): return self.astype(_np.dtype(_np.int16))
    def char(self): return self.astype(_np.dtype(_np.int8))
    def byte(self): return self.astype(_np.dtype(_np.uint8))
    def bool(self): return self.astype(DTYPE_OBJS[T_BOOL])

    def type(self, dtype=None, non_blocking=False):
        """PyTorch's ``type``: without arguments the type name (``'ember.FloatTensor'``),
        else a copy cast to `dtype` (a dtype or such a name)."""
        return _torch_type(self, dtype)

    def type_as(self, other): return self.astype(DTYPE_OBJS[as_ndarray(other).tcode], copy=False)
    def ndimension(self): return self.ndim
    def t(self): return _ember.t(self)
    def swapdims(self, dim0, dim1): return _ns(self).swapaxes(self, dim0, dim1)
    def movedim(self, source, destination): return _ns(self).moveaxis(self, source, destination)
    def view_as(self, other): return self.view(shape_tuple(as_ndarray(other)))
    def expand_as(self, other): return self.expand(shape_tuple(as_ndarray(other)))
    def reshape_as(self, other): return self.reshape(shape_tuple(as_ndarray(other)))

    def tile(self, *dims):
        """PyTorch's ``x.tile(2, 1)`` (NumPy's ``tile``): what PyTorch's ``repeat`` does."""
        if len(dims) == 1 and not isinstance(dims[0], int):
            dims = dims[0]
        return _ns(self).tile(self, tuple(dims))

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        return _ember.repeat(self, repeats, axis=dim)

    def flip(self, *dims):
        if len(dims) == 1 and not isinstance(dims[0], int):
            dims = dims[0]
        return _ns(self).flip(self, axis=tuple(dims))

    def roll(self, shifts, dims=None): return _ns(self).roll(self, shifts, axis=dims)
    def tril(self, diagonal=0): return _ns(self).tril(self, diagonal)
    def triu(self, diagonal=0): return _ns(self).triu(self, diagonal)

    # comparisons and arithmetic under their PyTorch names
    def eq(self, other): return _bin(OP_EQUAL, self, other)
    def ne(self, other): return _bin(OP_NOT_EQUAL, self, other)
    def lt(self, other): return _bin(OP_LESS, self, other)
    def le(self, other): return _bin(OP_LESS_EQUAL, self, other)
    def gt(self, other): return _bin(OP_GREATER, self, other)
    def ge(self, other): return _bin(OP_GREATER_EQUAL, self, other)
    def equal(self, other):
        """True when `other` has this shape and the same elements (PyTorch's ``equal``)."""
        return bool(_ember.array_equal(self, other))
    def add(self, other, *, alpha=1): return _bin(OP_ADD, self, other if alpha == 1 else other * alpha)
    def sub(self, other, *, alpha=1): return _bin(OP_SUBTRACT, self, other if alpha == 1 else other * alpha)
    def mul(self, other): return _bin(OP_MULTIPLY, self, other)
    def div(self, other, *, rounding_mode=None): return _divide(self, other, rounding_mode)
    def pow(self, exponent): return _bin(OP_POWER, self, exponent)
    def neg(self): return _unary(OP_NEGATIVE, self, None)
    def abs(self): return _unary(OP_ABSOLUTE, self, None)
    def exp(self): return _ns(self).exp(self)
    def log(self): return _ns(self).log(self)
    def sqrt(self): return _ns(self).sqrt(self)
    def rsqrt(self): return _ember.rsqrt(self)
    def square(self): return _ns(self).square(self)
    def sin(self): return _ns(self).sin(self)
    def cos(self): return _ns(self).cos(self)
    def tanh(self): return _ns(self).tanh(self)
    def sigmoid(self): return _ember.sigmoid(self)
    def relu(self): return _ember.relu(self)
    def softmax(self, dim, dtype=None): return _ember.softmax(self, dim, dtype=dtype)
    def log_softmax(self, dim, dtype=None): return _ember.log_softmax(self, dim, dtype=dtype)
    def logsumexp(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return _ember.logsumexp(self, axis=axis if dim is None else dim,
                            keepdims=keepdim if keepdims is None else keepdims)
    def clamp(self, min=None, max=None): return _ember.clamp(self, min, max)
    def clamp_min(self, min): return _ember.clip(self, min, None)
    def clamp_max(self, max): return _ember.clip(self, None, max)
    def where(self, condition, other): return _ember.where(condition, self, other)
    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        return _ember.norm(self, p, dim, keepdim, dtype)
    def mm(self, mat2): return _ember.mm(self, mat2)
    def bmm(self, mat2): return _ember.bmm(self, mat2)
    def mv(self, vec): return _ember.mv(self, vec)
    def matmul(self, other): return _ember.matmul(self, other)

    # in place (PyTorch's trailing underscore): the result is written into self and self
    # is returned; autograd records it as PyTorch does (a leaf that requires grad refuses)
    def add_(self, other, *, alpha=1): return _inplace(OP_ADD, self, other if alpha == 1 else other * alpha)
    def sub_(self, other, *, alpha=1): return _inplace(OP_SUBTRACT, self, other if alpha == 1 else other * alpha)
    def mul_(self, other): return _inplace(OP_MULTIPLY, self, other)
    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return _inplace(OP_DIVIDE, self, other)
        return _write(self, _divide(_src(self), other, rounding_mode))
    def pow_(self, exponent): return _inplace(OP_POWER, self, exponent)
    def neg_(self): return _write(self, _unary(OP_NEGATIVE, self, None))
    def clamp_(self, min=None, max=None): return _write(self, _ember.clamp(_src(self), min, max))
    def zero_(self):
        self.fill(0)
        return self
    def fill_(self, value):
        self.fill(value)
        return self
    def copy_(self, src, non_blocking=False):
        """Copy `src` (broadcast, cast, from any device) into self; returns self."""
        if isinstance(src, ndarray) and (<ndarray>src).storage.device_index != self.storage.device_index:
            src = src.to(self.device)
        return _write(self, src)
    def masked_fill(self, mask, value): return _ember.masked_fill(self, mask, value)
    def masked_fill_(self, mask, value): return _write(self, _ember.masked_fill(_src(self), mask, value))
    def masked_select(self, mask): return _ember.masked_select(self, mask)
    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        """Fill with uniform samples in [a, b) (float arrays)."""
        return _write(self, _ember.rand(shape_tuple(self), dtype=self.dtype, device=self.device,
                                    generator=generator) * (b - a) + a)
    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fill with normal samples (float arrays)."""
        return _write(self, _ember.randn(shape_tuple(self), dtype=self.dtype, device=self.device,
                                     generator=generator) * std + mean)

    # indexing under PyTorch's names (dim first, as in PyTorch)
    def narrow(self, dim, start, length): return _ember.narrow(self, dim, start, length)
    def select(self, dim, index):
        """The slice at `index` along `dim` (a view; PyTorch's ``select``)."""
        cdef int d = normalize_axis(dim, self.ndim, "select")
        return self[(slice(None),) * d + (index,)]
    def split(self, split_size, dim=0):
        """PyTorch's ``split``: pieces of `split_size` along `dim` (the last may be
        shorter), or of the sizes in a list (NumPy arrays have no ``split`` method)."""
        return _ember._torch.torch_split(self, split_size, dim)
    def chunk(self, chunks, dim=0): return _ember.chunk(self, chunks, dim)
    def unbind(self, dim=0): return _ember.unbind(self, dim)
    def gather(self, dim, index): return _ember.gather(self, dim, index)
    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        return _ember.scatter(self, dim, index, src, value=value, reduce=reduce)
    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        return _write(self, _ember.scatter(_src(self), dim, index, src, value=value, reduce=reduce))
    def scatter_add(self, dim, index, src): return _ember.scatter_add(self, dim, index, src)
    def scatter_add_(self, dim, index, src): return _write(self, _ember.scatter_add(_src(self), dim, index, src))
    def index_select(self, dim, index): return _ember.index_select(self, dim, index)
    def index_add(self, dim, index, source, *, alpha=1): return _ember.index_add(self, dim, index, source, alpha=alpha)
    def index_add_(self, dim, index, source, *, alpha=1):
        return _write(self, _ember.index_add(_src(self), dim, index, source, alpha=alpha))
    def topk(self, k, dim=-1, largest=True, sorted=True): return _ember.topk(self, k, dim, largest, sorted)

    # new arrays with this array's dtype and device (PyTorch's new_*)
    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return _ember.zeros(_size_arg(size, "new_zeros"), dtype=self.dtype if dtype is None else dtype,
                        device=self.device if device is None else device, requires_grad=requires_grad)
    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return _ember.ones(_size_arg(size, "new_ones"), dtype=self.dtype if dtype is None else dtype,
                       device=self.device if device is None else device, requires_grad=requires_grad)
    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return _ember.empty(_size_arg(size, "new_empty"), dtype=self.dtype if dtype is None else dtype,
                        device=self.device if device is None else device, requires_grad=requires_grad)
    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        return _ember.full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                       device=self.device if device is None else device, requires_grad=requires_grad)
    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        return _ember.tensor(data, dtype=self.dtype if dtype is None else dtype,
                         device=self.device if device is None else device, requires_grad=requires_grad)
