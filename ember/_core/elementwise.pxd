# The elementwise dispatcher: promotion, broadcasting, axis merging and the
# (OpenMP) N-d loop driver around the generated inner loops.
from ember._core.array cimport ndarray, MAXDIM

ctypedef void (*loop_fn)(char** args, const Py_ssize_t* steps, Py_ssize_t n) noexcept nogil

cdef struct NdIter:
    int ndim
    int nargs
    Py_ssize_t shape[MAXDIM]
    Py_ssize_t strides[3][MAXDIM]
    char* ptrs[3]

cdef loop_fn get_loop(int op, int tcode) noexcept
cdef loop_fn get_cast(int src, int dst) noexcept
cdef int broadcast_shapes2(ndarray a, ndarray b, int* ndim, Py_ssize_t* shape, str opname) except -1
cdef void simplify(NdIter* it) noexcept nogil
cdef void run(NdIter* it, loop_fn f) noexcept nogil
cdef Py_ssize_t split_work(Py_ssize_t n, int nt, Py_ssize_t align, Py_ssize_t min_chunk, Py_ssize_t* chunk) noexcept nogil
cdef void run_range(NdIter* it, loop_fn f, Py_ssize_t start, Py_ssize_t stop) noexcept nogil
cdef int write_scalar(char* buf, int code, object v) except -1
cdef Py_ssize_t PAR_MIN
cdef int setup_operand(NdIter* it, int k, ndarray x, int ndim) except -1
cdef object binary(int op, object a, object b, object out)
cdef object unary(int op, object a, object out)
cdef int assign(ndarray dst, object src) except -1
cdef ndarray cast(ndarray x, int tcode)
cdef int num_threads() noexcept nogil

ctypedef object (*ag_binary_t)(int op, object a, object b, object out)
ctypedef object (*ag_unary_t)(int op, object a, object out)
cdef void set_autograd_hooks(ag_binary_t b, ag_unary_t u) noexcept
cdef object binary_ag(int op, object a, object b, object out)
cdef object unary_ag(int op, object a, object out)
