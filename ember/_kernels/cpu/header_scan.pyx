# cython: language_level=3, boundscheck=False
"""A one-pass reader of safetensors headers, for ``ember.load``.

A header is JSON of a fixed shape: an object from tensor name to
``{"dtype": ..., "shape": [...], "data_offsets": [lo, hi]}``, plus an optional
``"__metadata__"`` object of strings.  Parsing it with ``json.loads`` and then
checking each entry in Python builds a dict per tensor and walks it again, which
made a header of a million entries 1.5x slower to read than the ``safetensors``
package.  :func:`scan` reads the bytes once, checks each entry as it goes and
builds only what ``load`` keeps.

It is a fast path, not a second definition of the format: it accepts a subset of
JSON (integers without sign, fraction or exponent, no duplicate keys; strings with
escapes go through the json module's decoder) and of valid headers, and returns None for anything else, valid or
not.  ``ember.serialization`` then reads the header the general way, which
accepts every valid file and names what is wrong with an invalid one.  So a
header this module reads gives exactly what the general reader would have given.
"""
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int64_t
import gc
import json

__all__ = ["scan", "TooManyDims"]


class TooManyDims(Exception):
    """An entry's shape lists more axes than an array can have: (name, first axes).
    Raised rather than handing back to the general reader, which would build the
    whole (possibly 50-million-element) list first."""


class _Unsupported(Exception):
    """Not something this reader handles: the general reader takes over."""


cdef int64_t _INT_DIGITS = 18          # below 10**18: no overflow in int64

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* The first byte at or after i that ends or escapes a JSON string ('"', '\\' or a
       control character), eight bytes at a time: names and metadata values can be
       100 MB long, and a byte loop was the reader's slowest part. */
    static Py_ssize_t ember_string_stop(const unsigned char* p, Py_ssize_t i, Py_ssize_t n,
                                        int* nonascii) {
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t seen = 0;                         /* OR of the bytes passed: their high bits */
        while (i + 8 <= n) {
            uint64_t w, q, b;
            memcpy(&w, p + i, 8);
            q = w ^ (ones * 0x22);                 /* zero bytes where '"' */
            b = w ^ (ones * 0x5C);                 /* zero bytes where a backslash */
            if (((q - ones) & ~q & highs) | ((b - ones) & ~b & highs)
                    | ((w - ones * 0x20) & ~w & highs))
                break;                             /* some byte in this word stops */
            seen |= w;
            i += 8;
        }
        while (i < n && p[i] != 0x22 && p[i] != 0x5C && p[i] >= 0x20)
            seen |= p[i++];
        *nonascii = (seen & highs) != 0;
        return i;
    }
    """
    Py_ssize_t ember_string_stop(const unsigned char* p, Py_ssize_t i, Py_ssize_t n,
                                 int* nonascii) nogil


cdef class _Reader:
    cdef const unsigned char* p
    cdef Py_ssize_t n
    cdef Py_ssize_t i

    cdef inline void ws(self) noexcept:
        cdef unsigned char c
        while self.i < self.n:
            c = self.p[self.i]
            if c == 32 or c == 10 or c == 13 or c == 9:
                self.i += 1
            else:
                return

    cdef inline void expect(self, unsigned char c) except *:
        self.ws()
        if self.i >= self.n or self.p[self.i] != c:
            raise _Unsupported()
        self.i += 1

    cdef inline bint peek(self, unsigned char c) noexcept:
        """Skip whitespace; whether the next byte is c (not consumed)."""
        self.ws()
        return self.i < self.n and self.p[self.i] == c

    cdef Py_ssize_t string_end(self, int* nonascii) except -1:
        """After the opening quote: the index of the closing quote (escapes and
        control characters are unsupported); `nonascii` says whether a byte >= 0x80
        came before it."""
        cdef Py_ssize_t j = ember_string_stop(self.p, self.i, self.n, nonascii)
        if j < self.n and self.p[j] == 34:
            return j
        raise _Unsupported()            # an escape, a control character or no end

    cdef str string(self):
        return self._string(True)

    cdef void skip_string(self) except *:
        """A string whose value is not kept: only checked (UTF-8 when not ASCII)."""
        self._string(False)

    cdef str _string(self, bint keep):
        cdef Py_ssize_t start, end
        cdef int nonascii = 0, more = 0
        cdef bint escaped = False
        self.expect(34)
        start = self.i
        end = ember_string_stop(self.p, start, self.n, &nonascii)
        while end < self.n and self.p[end] == 92:      # a backslash: skip what it escapes
            escaped = True
            end = ember_string_stop(self.p, end + 2, self.n, &more) if end + 2 <= self.n \
                else self.n
            nonascii |= more
        if end >= self.n or self.p[end] != 34:
            raise _Unsupported()        # a control character, or no end
        self.i = end + 1
        if not keep and not nonascii and not escaped:
            return None                 # ASCII without escapes is valid: nothing to build
        try:
            if not escaped:
                return PyUnicode_DecodeUTF8(<const char*>self.p + start, end - start, NULL)
            # escapes (ember's own structure metadata is JSON in a string): the JSON
            # decoder reads the token, from strictly decoded UTF-8 as the general reader
            s = json.loads(PyUnicode_DecodeUTF8(<const char*>self.p + start - 1,
                                                end - start + 2, NULL))
        except (UnicodeDecodeError, ValueError):
            raise _Unsupported()
        if type(s) is not str:
            raise _Unsupported()
        return s

    cdef int key(self) except -1:
        """An entry's key: 0 dtype, 1 shape, 2 data_offsets."""
        cdef Py_ssize_t start, end
        cdef int nonascii = 0
        self.expect(34)
        start = self.i
        end = self.string_end(&nonascii)
        self.i = end + 1
        self.expect(58)                 # ':'
        if _is(self.p + start, end - start, b"dtype"):
            return 0
        if _is(self.p + start, end - start, b"shape"):
            return 1
        if _is(self.p + start, end - start, b"data_offsets"):
            return 2
        raise _Unsupported()

    cdef int64_t integer(self) except -1:
        cdef Py_ssize_t start
        cdef int64_t v = 0
        cdef unsigned char c
        self.ws()
        start = self.i
        while self.i < self.n and 48 <= self.p[self.i] <= 57:
            v = v * 10 + (self.p[self.i] - 48)
            self.i += 1
            if self.i - start > _INT_DIGITS:
                raise _Unsupported()
        if self.i == start or (self.p[start] == 48 and self.i - start > 1):
            raise _Unsupported()        # not a number, or a leading zero (invalid JSON)
        if self.i < self.n:
            c = self.p[self.i]
            if c == 46 or c == 101 or c == 69:      # '.', 'e', 'E': a float
                raise _Unsupported()
        return v


cdef inline bint _is(const unsigned char* s, Py_ssize_t n, bytes word) noexcept:
    cdef const char* w = word
    cdef Py_ssize_t k
    if n != len(word):
        return False
    for k in range(n):
        if s[k] != <unsigned char>w[k]:
            return False
    return True


cdef object _metadata(_Reader r, object keep):
    """``"__metadata__"``'s value: an object of strings (anything else: unsupported).
    Only the values of the keys in `keep` are built (a foreign file's metadata can be
    a 100 MB string ember never reads); the others are checked."""
    cdef dict meta = {}
    cdef set seen = set()
    cdef str k
    r.expect(123)
    if r.peek(125):
        r.i += 1
        return meta
    while True:
        k = r.string()
        if k in seen:
            raise _Unsupported()
        seen.add(k)
        r.expect(58)
        if k in keep:
            meta[k] = r.string()
        else:
            r.skip_string()
        if r.peek(44):
            r.i += 1
            continue
        r.expect(125)
        return meta


def scan(const unsigned char[::1] raw, Py_ssize_t data_start, Py_ssize_t size,
         dict dtypes not None, Py_ssize_t maxdim, int64_t max_bytes,
         keep_metadata=frozenset()):
    """Read a safetensors header (its bytes `raw`; the data section starts at byte
    `data_start` of a file of `size` bytes) with `dtypes` the safetensors dtype
    names -> NumPy dtypes.  Returns ``(entries, metadata)`` with entries
    ``(lo, hi, name, dtype, shape, strides)`` sorted by offsets and tiling the
    data section exactly, and metadata the ``__metadata__`` values of the keys in
    `keep_metadata` (None without ``__metadata__``), or None when the general
    reader must decide.  Raises TooManyDims for a shape with more than `maxdim` axes.

    >>> import numpy as np
    >>> raw = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    >>> scan(raw, 8 + len(raw), 16 + len(raw), {"F32": np.dtype("float32")}, 32, 2**62)
    ([(0, 8, 'w', dtype('float32'), [2], (4,))], None)
    """
    cdef _Reader r = _Reader()
    r.p = &raw[0] if raw.shape[0] else NULL
    r.n = raw.shape[0]
    r.i = 0
    # a million entries are three million new containers: the cyclic collector would
    # walk the growing heap again and again (2.5x the whole scan); none can form a cycle
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _scan(r, data_start, size, dtypes, maxdim, max_bytes, keep_metadata)
    except _Unsupported:
        return None
    finally:
        if collecting:
            gc.enable()


cdef object _scan(_Reader r, Py_ssize_t data_start, Py_ssize_t size, dict dtypes,
                  Py_ssize_t maxdim, int64_t max_bytes, object keep):
    cdef list entries = []
    cdef set names = set()
    cdef object meta = None
    cdef bint have_meta = False, ordered = True
    cdef int64_t lo, hi, prev_lo = -1, prev_hi = -1, pos
    cdef str name, prev_name = None
    r.expect(123)
    if r.peek(125):
        r.i += 1
    else:
        while True:
            name = r.string()
            r.expect(58)
            if name == "__metadata__":
                if have_meta:
                    raise _Unsupported()
                have_meta = True
                meta = _metadata(r, keep)
            else:
                if name in names:
                    raise _Unsupported()        # JSON keeps the last: the general reader
                names.add(name)
                e = _entry(r, name, data_start, size, dtypes, maxdim, max_bytes)
                lo, hi = e[0], e[1]
                if lo < prev_lo or (lo == prev_lo and (hi < prev_hi or (
                        hi == prev_hi and name < prev_name))):
                    ordered = False
                prev_lo, prev_hi, prev_name = lo, hi, name
                entries.append(e)
            if r.peek(44):
                r.i += 1
                continue
            r.expect(125)
            break
    r.ws()
    if r.i != r.n:
        raise _Unsupported()            # trailing bytes after the object
    if not ordered:
        entries.sort()
    pos = 0
    for e in entries:
        if e[0] != pos:
            raise _Unsupported()        # a gap or an overlap: the general reader says which
        pos = e[1]
    if data_start + pos != size:
        raise _Unsupported()
    return entries, meta


cdef tuple _entry(_Reader r, str name, Py_ssize_t data_start, Py_ssize_t size, dict dtypes,
                  Py_ssize_t maxdim, int64_t max_bytes):
    cdef object dtype = None
    cdef list shape = None
    cdef int64_t lo = -1, hi = -1, d, step, nbytes
    cdef Py_ssize_t k, nd, itemsize
    cdef int key, seen = 0
    cdef object v
    cdef tuple strides
    r.expect(123)
    for k in range(3):
        if k:
            r.expect(44)
        key = r.key()
        if seen & (1 << key):
            raise _Unsupported()
        seen |= 1 << key
        if key == 0:
            dtype = dtypes.get(r.string())
            if dtype is None:
                raise _Unsupported()
        elif key == 1:
            shape = _shape(r, name, maxdim)
        else:
            r.expect(91)
            lo = r.integer()
            r.expect(44)
            hi = r.integer()
            r.expect(93)
    r.expect(125)
    itemsize = dtype.itemsize
    nd = len(shape)
    strides = PyTuple_New(nd)
    step = itemsize
    nbytes = itemsize
    for k in range(nd - 1, -1, -1):     # C order, in bytes; overflow-checked
        d = shape[k]
        v = step
        Py_INCREF(v)
        PyTuple_SET_ITEM(strides, k, v)
        if d == 0:
            nbytes = 0
        elif step > (max_bytes - 1) // d:
            raise _Unsupported()        # too big for memory: the general reader says so
        else:
            step *= d
    if nbytes:
        nbytes = step
    if not (0 <= lo <= hi) or hi - lo != nbytes or data_start + hi > size:
        raise _Unsupported()
    return (lo, hi, name, dtype, shape, strides)


cdef list _shape(_Reader r, str name, Py_ssize_t maxdim):
    cdef list shape = []
    r.expect(91)
    if r.peek(93):
        r.i += 1
        return shape
    while True:
        shape.append(r.integer())
        if len(shape) > maxdim:
            _too_many(r, name, shape)
        if r.peek(44):
            r.i += 1
            continue
        r.expect(93)
        return shape


cdef void _too_many(_Reader r, str name, list shape) except *:
    """Read up to 40 axes (enough for the error's 80-character excerpt) and raise."""
    while len(shape) < 40 and r.peek(44):
        r.i += 1
        shape.append(r.integer())
    raise TooManyDims(name, shape)
