# Storage: one refcounted block of memory on one device.

cdef class Storage:
    cdef char* ptr              # first byte of the block
    cdef Py_ssize_t nbytes      # bytes the user asked for
    cdef Py_ssize_t capacity    # bytes reserved (the size class); 0 for foreign memory
    cdef public Py_ssize_t version   # bumped by every in-place write through any view
    cdef readonly bint readonly     # the memory itself cannot be written (foreign read-only buffer)
    cdef bint owner_readonly        # the array the storage was made for was marked read-only
    cdef object owner           # keeps foreign memory alive (None when we own ptr)
    cdef bint has_buffer
    cdef Py_buffer buffer       # held while we wrap a buffer-protocol object
    cdef public int device_index  # -1: host memory; >= 0: memory on CUDA device N
    cdef object __weakref__

cdef Storage new_storage(Py_ssize_t nbytes)
cdef Storage wrap_buffer(object obj, bint writable)
cdef Storage wrap_pointer(char* ptr, Py_ssize_t nbytes, object owner, bint readonly)
cdef Storage wrap_device_pointer(char* ptr, Py_ssize_t nbytes, object owner, int device_index)
