# The dtype table: ember's compact dtype codes, promotion and weak-scalar rules.

cdef enum:
    T_BOOL = 0
    T_INT8 = 1
    T_INT16 = 2
    T_INT32 = 3
    T_INT64 = 4
    T_UINT8 = 5
    T_UINT16 = 6
    T_UINT32 = 7
    T_UINT64 = 8
    T_FLOAT16 = 9
    T_FLOAT32 = 10
    T_FLOAT64 = 11
    T_COMPLEX64 = 12
    T_COMPLEX128 = 13
    T_BFLOAT16 = 14
    NTYPES = 15

# kind of a dtype code: 'b', 'i', 'u', 'f', 'c' (bfloat16 is 'f' here, though
# ml_dtypes gives its numpy.dtype kind 'V')
cdef char KIND[NTYPES]
cdef Py_ssize_t ITEMSIZE[NTYPES]
cdef int PROMOTE[NTYPES][NTYPES]     # -1 where there is no common type
cdef int default_float
cdef int default_complex

cdef list DTYPE_OBJS                 # code -> numpy.dtype
cdef int code_of(object dtype) except -1          # any dtype-like -> code
cdef int code_of_numpy_dtype(object dt) except -1 # a numpy.dtype -> code (fast path)
cdef int weak_result(int array_code, object scalar) except -1
cdef int scalar_default_code(object scalar) except -1
cdef inline bint is_float_kind(int code) noexcept:
    return KIND[code] == b'f'
cdef inline bint is_int_kind(int code) noexcept:
    return KIND[code] == b'i' or KIND[code] == b'u'
cdef inline bint is_complex_kind(int code) noexcept:
    return KIND[code] == b'c'
cdef inline bint is_half(int code) noexcept:
    """float16 or bfloat16: stored in 16 bits, computed in float32."""
    return code == T_FLOAT16 or code == T_BFLOAT16
