# The array object: storage + offset + shape/strides + dtype (+ autograd slots).
from ember._core.storage cimport Storage

cdef enum:
    MAXDIM = 32

cdef class ndarray:
    cdef Storage storage
    cdef char* data                  # storage.ptr + offset: the first element
    cdef Py_ssize_t offset           # bytes from storage.ptr
    cdef int ndim
    cdef int tcode                   # dtype code (ember._core.dtypes)
    cdef Py_ssize_t itemsize
    cdef Py_ssize_t size
    cdef bint c_contig
    cdef bint readonly               # writes through this array raise (NumPy's WRITEABLE flag, negated)
    cdef bint owns_storage           # the array its storage was made for (set_writeable's "base")
    cdef Py_ssize_t shape[MAXDIM]
    cdef Py_ssize_t strides[MAXDIM]  # in bytes, may be negative or zero
    cdef object _shape_tuple         # cached .shape
    cdef object _size_obj            # cached .size (an int that PyTorch code can call)
    # slots the autograd engine uses
    cdef bint _requires_grad
    cdef public object grad
    cdef public object grad_fn
    cdef public object _grad_meta    # hooks, retain_grad flag... (autograd owns it)
    cdef public int _output_nr       # which output of grad_fn this array is
    cdef public object _view_of      # (base, view_fn) when this is a differentiable view
    cdef object __weakref__

ctypedef object (*binary_hook_t)(int op, object a, object b, object out)
ctypedef object (*unary_hook_t)(int op, object a, object out)

cdef void set_elementwise_hooks(binary_hook_t b, unary_hook_t u) noexcept
cdef ndarray new_empty(int tcode, int ndim, const Py_ssize_t* shape, str opname=*)
cdef ndarray new_view(ndarray base, int ndim, const Py_ssize_t* shape,
                      const Py_ssize_t* strides, Py_ssize_t offset, int tcode)
cdef ndarray wrap_numpy(object arr)
cdef ndarray new_device_array(int tcode, int ndim, const Py_ssize_t* shape, size_t ptr,
                              Py_ssize_t nbytes, object owner, int device_index)
cdef object numpy_view(ndarray x)
cdef ndarray as_ndarray(object obj)
cdef void update_flags(ndarray x) noexcept
cdef bint is_c_contiguous(int ndim, const Py_ssize_t* shape, const Py_ssize_t* strides, Py_ssize_t itemsize) noexcept
cdef object shape_tuple(ndarray x)
cdef Py_ssize_t checked_size(int ndim, const Py_ssize_t* shape, Py_ssize_t itemsize,
                             str opname) except -1
cdef int check_writeable(ndarray x, str opname) except -1
cdef int set_writeable(ndarray x, bint flag) except -1
cdef int normalize_axis(Py_ssize_t axis, int ndim, str opname) except -1
cdef object parse_shape(object shape, str opname)

# Grad mode: a thread-local flag (ember.no_grad and friends set it).
cdef bint alloc_is_cpu() noexcept
cdef bint grad_enabled() noexcept nogil
cdef void set_grad_mode(bint on) noexcept nogil
