# cython: freethreading_compatible = False
"""Refcounted storage and the CPU caching allocator.

A block returns to the allocator's cache the moment the last array (or NumPy
view) referring to its Storage dies: CPython reference counting makes that
deterministic, so no GC pass is ever needed to recycle memory.

All allocator calls run with the GIL held (Storage objects are created and
destroyed under it), so the free lists need no lock.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_RECORDS_RO, PyBUF_WRITABLE
from libc.stdlib cimport malloc, free, realloc
from libc.string cimport memset
cimport cython

cdef extern from "stdlib.h" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)

cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* Large blocks ask Linux for transparent huge pages, as NumPy does: fewer TLB
       misses in big kernels, and MPI/memcpy over big buffers ran 1.3x faster here. */
    static void em_advise_huge_pages(void* p, size_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        (void)madvise(p, n, MADV_HUGEPAGE);
    #else
        (void)p; (void)n;
    #endif
    }
    """
    void em_advise_huge_pages(void* p, size_t n) nogil

DEF ALIGN = 64
DEF HUGE_MIN = 4194304            # 4 MiB: blocks from here on are 2 MiB aligned + huge pages
DEF HUGE_ALIGN = 2097152
DEF NUM_CLASSES = 256

# ---------------------------------------------------------------- size classes
# Small blocks round up to 64 bytes; from 1 KiB on, each power of two is split
# into four classes, so at most 25% of a block is slack.

cdef inline int size_class(Py_ssize_t nbytes, Py_ssize_t* cap) noexcept nogil:
    cdef Py_ssize_t n = nbytes if nbytes > 0 else 1
    cdef int k
    cdef Py_ssize_t base, step, c
    if n > (<Py_ssize_t>1 << 60):
        # beyond any class (and beyond any machine): no rounding, so nothing can overflow
        cap[0] = n
        return NUM_CLASSES
    if n <= 1024:
        c = (n + 63) & ~(<Py_ssize_t>63)
        cap[0] = c
        return <int>(c >> 6) - 1          # classes 0..15
    k = 0
    base = 1024
    while base * 2 < n:
        base *= 2
        k += 1
    # n in (base, 2*base]
    step = base >> 2
    c = base + ((n - base + step - 1) // step) * step
    cap[0] = c
    return 16 + k * 4 + <int>((c - base) // step) - 1

cdef struct FreeList:
    void** items
    Py_ssize_t count
    Py_ssize_t cap

cdef FreeList _free[NUM_CLASSES]
memset(_free, 0, sizeof(_free))

cdef Py_ssize_t _allocated = 0        # bytes held by live storages (their capacity)
cdef Py_ssize_t _reserved = 0         # allocated + cached
cdef Py_ssize_t _peak = 0
cdef Py_ssize_t _n_alloc = 0          # requests served
cdef Py_ssize_t _n_hit = 0            # requests served from the cache
cdef Py_ssize_t _n_os_alloc = 0       # requests that went to the OS allocator
cdef Py_ssize_t _cache_limit = <Py_ssize_t>4 << 30   # bytes kept in the cache at most
cdef bint _caching = True


cdef void* _alloc(Py_ssize_t nbytes, Py_ssize_t* cap) except? NULL:
    global _allocated, _reserved, _peak, _n_alloc, _n_hit, _n_os_alloc
    cdef int cls = size_class(nbytes, cap)
    cdef void* p = NULL
    cdef FreeList* fl
    _n_alloc += 1
    if cls < NUM_CLASSES:
        fl = &_free[cls]
        if fl.count > 0:
            fl.count -= 1
            p = fl.items[fl.count]
            _n_hit += 1
            _allocated += cap[0]
            if _allocated > _peak:
                _peak = _allocated
            return p
    cdef size_t align = HUGE_ALIGN if cap[0] >= HUGE_MIN else ALIGN
    if posix_memalign(&p, align, <size_t>cap[0]) != 0 or p == NULL:
        # The cache may hold enough memory to satisfy this: give it back and retry.
        _release_cache()
        if posix_memalign(&p, align, <size_t>cap[0]) != 0 or p == NULL:
            raise MemoryError(f"ember: cannot allocate {nbytes} bytes on cpu")
    if cap[0] >= HUGE_MIN:
        em_advise_huge_pages(p, <size_t>cap[0])
    _n_os_alloc += 1
    _allocated += cap[0]
    _reserved += cap[0]
    if _allocated > _peak:
        _peak = _allocated
    return p


cdef void _dealloc(void* p, Py_ssize_t cap) noexcept:
    global _allocated, _reserved
    cdef int cls
    cdef Py_ssize_t c2
    cdef FreeList* fl
    cdef void** items
    _allocated -= cap
    cls = size_class(cap, &c2)
    if _caching and cls < NUM_CLASSES and (_reserved - _allocated) <= _cache_limit:
        fl = &_free[cls]
        if fl.count == fl.cap:
            items = <void**>realloc(fl.items, sizeof(void*) * (fl.cap * 2 + 8))
            if items == NULL:
                free(p)
                _reserved -= cap
                return
            fl.items = items
            fl.cap = fl.cap * 2 + 8
        fl.items[fl.count] = p
        fl.count += 1
        return
    free(p)
    _reserved -= cap


cdef void _release_cache() noexcept:
    global _reserved
    cdef int cls
    cdef Py_ssize_t cap, i
    for cls in range(NUM_CLASSES):
        if _free[cls].count == 0:
            continue
        cap = _class_capacity(cls)
        for i in range(_free[cls].count):
            free(_free[cls].items[i])
            _reserved -= cap
        _free[cls].count = 0


cdef Py_ssize_t _class_capacity(int cls) noexcept:
    cdef Py_ssize_t base
    cdef int k, j
    if cls < 16:
        return (cls + 1) * 64
    k = (cls - 16) // 4
    j = (cls - 16) % 4 + 1
    base = (<Py_ssize_t>1024) << k
    return base + j * (base >> 2)


# ---------------------------------------------------------------- Storage

# no_gc_clear: __dealloc__ tells owned memory from foreign memory by `owner` and
# releases `buffer`; a GC tp_clear (a reference cycle through a view) would reset
# both first, and __dealloc__ would then hand NumPy's (or CuPy's) memory to the
# allocator's free lists.
@cython.no_gc_clear
@cython.freelist(64)
@cython.final
cdef class Storage:
    """A block of memory on one device, shared by every view of it.

    ``nbytes`` is the usable size; ``version`` counts in-place writes through
    any view (autograd uses it to detect a saved array that was modified).
    """

    def __dealloc__(self):
        if self.has_buffer:
            PyBuffer_Release(&self.buffer)
            self.has_buffer = False
        elif self.owner is None and self.ptr != NULL:
            _dealloc(self.ptr, self.capacity)
        self.ptr = NULL

    @property
    def nbytes(self):
        return self.nbytes

    @property
    def device(self):
        return "cpu" if self.device_index < 0 else f"cuda:{self.device_index}"

    @property
    def is_cuda(self):
        return self.device_index >= 0

    @property
    def data_ptr(self):
        return <size_t>self.ptr

    @property
    def is_foreign(self):
        """True when the memory belongs to another object (NumPy array, buffer...)."""
        return self.owner is not None

    def __repr__(self):
        kind = "foreign" if self.owner is not None else "cached"
        return f"<ember.Storage {self.nbytes} bytes on {self.device} ({kind}), version {self.version}>"


cdef Storage new_storage(Py_ssize_t nbytes):
    cdef Storage s = Storage.__new__(Storage)
    cdef Py_ssize_t cap
    s.device_index = -1
    s.ptr = <char*>_alloc(nbytes, &cap)
    s.nbytes = nbytes
    s.capacity = cap
    return s


cdef Storage wrap_buffer(object obj, bint writable):
    """Wrap any buffer-protocol object without copying; keeps `obj` alive."""
    cdef Storage s = Storage.__new__(Storage)
    cdef int flags = PyBUF_RECORDS_RO
    if writable:
        flags |= PyBUF_WRITABLE
    s.device_index = -1
    PyObject_GetBuffer(obj, &s.buffer, flags)
    s.has_buffer = True
    s.owner = obj
    s.ptr = <char*>s.buffer.buf
    s.nbytes = s.buffer.len
    s.readonly = s.buffer.readonly
    return s


cdef Storage wrap_pointer(char* ptr, Py_ssize_t nbytes, object owner, bint readonly):
    """Wrap memory owned by `owner` (kept alive as long as the storage lives)."""
    cdef Storage s = Storage.__new__(Storage)
    s.device_index = -1
    s.ptr = ptr
    s.nbytes = nbytes
    s.owner = owner if owner is not None else True
    s.readonly = readonly
    return s


cdef Storage wrap_device_pointer(char* ptr, Py_ssize_t nbytes, object owner, int device_index):
    """Wrap CUDA device memory owned by `owner` (a CuPy memory pointer: the block goes
    back to CuPy's pool when the last view dies).  Host code never dereferences ptr."""
    cdef Storage s = wrap_pointer(ptr, nbytes, owner, False)
    s.device_index = device_index
    return s


# ---------------------------------------------------------------- public stats

def memory_stats():
    """Statistics of ember's CPU caching allocator, in bytes and counts.

    ``allocated_bytes``: held by live arrays; ``reserved_bytes``: allocated
    plus what the cache keeps for reuse; ``peak_allocated_bytes``: the most
    ever allocated at once; ``num_alloc_requests``, ``num_cache_hits`` and
    ``num_os_allocs`` count requests and where they were served from.

    >>> import ember
    >>> stats = ember.memory_stats()
    >>> stats["reserved_bytes"] >= stats["allocated_bytes"]
    True
    """
    return {
        "allocated_bytes": _allocated,
        "reserved_bytes": _reserved,
        "cached_bytes": _reserved - _allocated,
        "peak_allocated_bytes": _peak,
        "num_alloc_requests": _n_alloc,
        "num_cache_hits": _n_hit,
        "num_os_allocs": _n_os_alloc,
        "cache_limit_bytes": _cache_limit,
        "caching_enabled": bool(_caching),
    }


def reset_peak_memory_stats():
    """Set the peak to the bytes allocated now."""
    global _peak
    _peak = _allocated


def empty_cache():
    """Return every cached (unused) block to the operating system."""
    _release_cache()


def set_allocator_caching(bint enabled, cache_limit_bytes=None):
    """Turn the CPU cache on or off, and optionally bound how much it keeps.

    With caching off every freed block goes straight back to ``free()``;
    the benchmark ``benchmarks/bench_allocator.py`` compares both settings.
    """
    global _caching, _cache_limit
    _caching = enabled
    if cache_limit_bytes is not None:
        if cache_limit_bytes < 0:
            raise ValueError("set_allocator_caching: cache_limit_bytes must be >= 0")
        _cache_limit = cache_limit_bytes
    if not enabled:
        _release_cache()
