"""ember.save / ember.load: checkpoints in the safetensors format, written atomically.

A checkpoint holds arrays and the plain values around them: nested dicts (string
or integer keys), lists and tuples of arrays, numbers, strings, booleans and
None -- a model's ``state_dict()``, an optimizer's, or a dict of both.

The file is a standard safetensors file: an 8-byte little-endian header length,
a JSON header naming each array's dtype, shape and byte range, then the raw
bytes.  The ``safetensors`` library (and any other reader of the format) can
read its arrays.  The nesting and the plain values go in the header's
``__metadata__`` as JSON under the key ``ember.structure``.  Loading parses JSON
and copies (or maps) bytes; it never unpickles anything, so a malicious file
cannot run code.

Saving is atomic: the bytes go to a temporary file in the destination's folder
(unnamed where the system allows), which is flushed, fsync'ed and renamed over
the destination, so a crash at any point leaves either the old checkpoint or the
new one, never a torn file, and no temporary file stays behind (see
``ember/_checkpoint_io.py``).

>>> import ember, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
>>> ember.save({"w": ember.ones((2, 2)), "step": 3}, path)
>>> ckpt = ember.load(path)
>>> ckpt["step"], ckpt["w"].shape
(3, (2, 2))
"""
import io
import json
import math
import os
import struct

import numpy as np

from ember import _checkpoint_io
from ember._core.array import CPU, Device, check_device
from ember._kernels.cpu import header_scan

__all__ = ["save", "load"]

# safetensors dtype names <-> NumPy dtypes (complex is stored as pairs of floats)
_TO_ST = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16",
          "float16": "F16", "int32": "I32", "uint32": "U32", "float32": "F32",
          "float64": "F64", "int64": "I64", "uint64": "U64", "bfloat16": "BF16"}
_FROM_ST = {v: np.dtype(k) for k, v in _TO_ST.items()}     # 'bfloat16': ml_dtypes' dtype
_COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64"}
_STRUCTURE_KEY = "ember.structure"
_FORMAT_KEY = "format"
_MAX_HEADER = 100_000_000            # the reference implementation's limit (safetensors)
_MAXDIM = 32                         # ember arrays have at most 32 axes
_MAX_BYTES = 2 ** 62                 # no array (even an empty one) spans more
_VERSION = 1
_READ_METADATA = frozenset({_STRUCTURE_KEY})     # the metadata load() reads


# ------------------------------------------------------------------ encoding

def _c_order(a):
    """a, or a C-ordered copy (np.ascontiguousarray would turn 0-d into 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


class _Encoder:
    """Walks the object: arrays become named entries, everything else JSON."""

    def __init__(self):
        self.arrays = {}         # name -> C-contiguous NumPy array
        self.complex = set()     # names stored as float pairs

    def _name(self, path):
        base = "/".join(path) or "value"
        name, i = base, 1
        while name in self.arrays:
            i += 1
            name = f"{base}#{i}"
        return name

    def encode(self, obj, path=()):
        from ember._core.array import ndarray
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return {"int": str(int(obj))} if abs(obj) >= 2 ** 53 else obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"float": repr(obj)}
        if isinstance(obj, (ndarray, np.ndarray, np.generic)):
            return self._array(obj, path)
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError(f"ember.save: dict keys must be str or int, got "
                                    f"{type(k).__name__} key {k!r} at {'/'.join(path) or 'top level'}")
                items.append([k, self.encode(v, path + (str(k),))])
            return {"dict": items}
        if isinstance(obj, (list, tuple)):
            enc = [self.encode(v, path + (str(i),)) for i, v in enumerate(obj)]
            return {"tuple" if isinstance(obj, tuple) else "list": enc}
        if hasattr(obj, "detach") and hasattr(obj, "numpy") and type(obj).__module__.startswith("torch"):
            raise TypeError(f"ember.save: a torch.Tensor at {'/'.join(path) or 'top level'}; "
                            f"convert it with ember.asarray(t.detach().numpy()) first")
        raise TypeError(f"ember.save: cannot save a {type(obj).__name__} at "
                        f"{'/'.join(path) or 'top level'}: checkpoints hold arrays, dicts, lists, "
                        f"tuples, numbers, strings, booleans and None (nothing is pickled)")

    def _array(self, obj, path):
        from ember._api._util import numpy_view
        from ember._core.array import ndarray
        if isinstance(obj, ndarray):
            a = numpy_view(obj.detach() if obj.requires_grad else obj)
        else:
            a = np.asarray(obj)
        name = self._name(path)
        kind = a.dtype.name
        if kind in _COMPLEX_PARTS:
            a = np.stack([a.real, a.imag], axis=-1)
            self.complex.add(name)
        elif kind not in _TO_ST:
            raise TypeError(f"ember.save: arrays of dtype {kind} cannot be saved "
                            f"(at {'/'.join(path) or 'top level'})")
        self.arrays[name] = _c_order(a)
        ref = {"array": name}
        if name in self.complex:
            ref["complex"] = kind
        return ref


def _header_and_layout(arrays, metadata):
    """The JSON header (padded to a multiple of 8 bytes) and the arrays in file order.
    Arrays are laid out by decreasing item size, so every one is aligned in the file
    (which is what lets ``mmap=True`` map them in place)."""
    order = sorted(arrays, key=lambda n: -arrays[n].dtype.itemsize)
    header, offset = {}, 0
    for name in order:
        a = arrays[name]
        header[name] = {"dtype": _TO_ST[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    header["__metadata__"] = metadata
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode()
    raw += b" " * (-(len(raw) + 8) % 8)
    return raw, order


def _is_file_object(f):
    return not isinstance(f, (str, bytes, os.PathLike)) and (hasattr(f, "write")
                                                                or hasattr(f, "read"))


def save(obj, f):
    """Save `obj` (arrays, nested dicts/lists/tuples of them, plain values) to `f` as a
    safetensors file: a path (written atomically) or a binary file object opened for
    writing (``io.BytesIO``, ``open(p, "wb")``), as ``torch.save(obj, f)`` accepts.

    To a path, the previous file, if any, stays intact until the new one is complete
    on disk, and a writer killed mid-save leaves no temporary file behind.  A new
    file's permissions follow the umask (0644 under umask 022); an overwritten one
    keeps its own.  Arrays that require grad are saved detached.

    >>> import ember, tempfile, os, io
    >>> path = os.path.join(tempfile.mkdtemp(), "a.safetensors")
    >>> ember.save([ember.arange(3), 1.5, None], path)
    >>> ember.load(path)[0].tolist()
    [0, 1, 2]
    >>> buf = io.BytesIO()
    >>> ember.save({"w": ember.ones(2)}, buf)
    >>> _ = buf.seek(0)
    >>> ember.load(buf)["w"].tolist()
    [1.0, 1.0]
    """
    enc = _Encoder()
    structure = enc.encode(obj)
    metadata = {_FORMAT_KEY: "ember",
                _STRUCTURE_KEY: json.dumps({"version": _VERSION, "root": structure},
                                           separators=(",", ":"), allow_nan=False)}
    header, order = _header_and_layout(enc.arrays, metadata)

    def write(out):
        out.write(struct.pack("<Q", len(header)))
        out.write(header)
        for name in order:
            a = enc.arrays[name]
            if a.size:
                out.write(memoryview(a.reshape(-1).view(np.uint8)))

    if _is_file_object(f):
        if not hasattr(f, "write"):
            raise TypeError(f"ember.save: the file object {f!r} has no write method "
                            f"(open it for writing, in binary mode)")
        write(f)
        return
    _checkpoint_io.write_atomically(os.fspath(f), write)


# ------------------------------------------------------------------ decoding

def _bad(path, what):
    return ValueError(f"ember.load: {path!s} is not a valid checkpoint: {what}")


_PICKLE_HINT = ("it looks like a PyTorch (pickle) checkpoint; ember.load reads safetensors "
                "files only and never unpickles, whatever weights_only says (convert it with "
                "safetensors.torch.save_file, or torch.load it and save the arrays with ember)")


def _read_exact(fh, n, path, what, buf=None):
    """Read exactly n bytes (into `buf`, else a new bytearray)."""
    buf = bytearray(n) if buf is None else buf
    view, got = memoryview(buf).cast("B"), 0
    while got < n:
        k = fh.readinto(view[got:])
        if not k:
            raise _bad(path, f"the file ended after {got} of the {n} bytes of {what} (truncated)")
        got += k
    return buf


def _read_layout(path, size, fh):
    """The file's entries (see _check_entries), its metadata (a dict: at least the
    values ember reads) and where its data starts: the one-pass reader when it can
    decide, else the general one."""
    raw, data_start = _read_raw_header(path, size, fh)
    try:
        fast = header_scan.scan(raw, data_start, size, _FROM_ST, _MAXDIM, _MAX_BYTES,
                                _READ_METADATA)
    except header_scan.TooManyDims as exc:
        name, axes = exc.args
        raise _bad(path, f"entry {name!r} has an invalid shape {_short(axes)} (a list "
                         f"of at most {_MAXDIM} non-negative integers)") from None
    if fast is not None:
        return fast[0], fast[1] or {}, data_start
    header, data_start = _parse_header(path, raw, data_start)
    del raw
    entries = _check_entries(path, header, data_start, size)
    meta = header.get("__metadata__") or {}
    if not isinstance(meta, dict):
        raise _bad(path, "__metadata__ is not a JSON object")
    return entries, meta, data_start


def _read_raw_header(path, size, fh):
    if size < 8:
        raise _bad(path, f"the file has {size} bytes, fewer than the 8-byte header length "
                         f"(truncated, or not a safetensors file)")
    first = bytes(_read_exact(fh, 8, path, "the header length"))
    if first[:4] == b"PK\x03\x04" or (first[:1] == b"\x80" and first[1:2] in b"\x02\x03\x04\x05"):
        raise _bad(path, _PICKLE_HINT)
    (n,) = struct.unpack("<Q", first)
    if n > _MAX_HEADER:
        raise _bad(path, f"its header claims {n} bytes, more than the format's limit of "
                         f"{_MAX_HEADER} (not a safetensors file?)")
    if 8 + n > size:
        raise _bad(path, f"its header claims {n} bytes but the file has {size} "
                         f"(truncated, or not a safetensors file)")
    raw = fh.read(n)            # one copy, no zero-filled buffer first (headers reach 100 MB)
    if len(raw) < n:            # a short read (a pipe or socket): the rest, exactly
        raw = raw + _read_exact(fh, n - len(raw), path, "the header")
    return raw, 8 + n


def _parse_header(path, raw, data_start):
    """The header as parsed JSON (the general reader: any valid JSON, precise errors)."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(path, f"its header is not valid JSON ({exc}); not a safetensors file?") from None
    except RecursionError:
        raise _bad(path, "its header is nested too deeply") from None
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    return header, data_start


def _check_entries(path, header, data_start, size):
    """Validate every entry: known dtype, sane shape, offsets that tile the data.
    Returns ``[(start, end, name, dtype, shape, strides)]`` in file order."""
    entries = []
    maxdim = _MAXDIM
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(e, dict):
            raise _bad(path, f"entry {name!r} is a {type(e).__name__}, not an object with "
                             f"dtype, shape and data_offsets")
        try:
            dt, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        except KeyError as exc:
            raise _bad(path, f"entry {name!r} lacks {exc.args[0]!r} (an entry has dtype, "
                             f"shape and data_offsets; it has {sorted(e)[:8]})") from None
        if len(e) != 3:
            raise _bad(path, f"entry {name!r} has unknown keys "
                             f"{sorted(set(e) - {'dtype', 'shape', 'data_offsets'})[:8]}")
        dtype = _FROM_ST.get(dt) if isinstance(dt, str) else None
        if dtype is None:
            raise _bad(path, f"entry {name!r} has dtype {_short(dt)}, which ember cannot "
                             f"read (known: {', '.join(sorted(_FROM_ST))})")
        if not isinstance(shape, list) or len(shape) > maxdim:
            raise _bad(path, f"entry {name!r} has an invalid shape {_short(shape)} (a list "
                             f"of at most {maxdim} non-negative integers)")
        itemsize = dtype.itemsize
        if len(shape) == 1 and type(shape[0]) is int and shape[0] >= 0:     # the common case
            strides, nbytes, step = (itemsize,), shape[0] * itemsize, shape[0] * itemsize
        else:
            strides, step = [0] * len(shape), itemsize       # C order, in bytes
            for i in range(len(shape) - 1, -1, -1):
                d = shape[i]
                if type(d) is not int or d < 0:
                    raise _bad(path, f"entry {name!r} has an invalid shape {_short(shape)}")
                strides[i] = step
                step *= d or 1
            nbytes = 0 if 0 in shape else step
        if step >= _MAX_BYTES:
            raise _bad(path, f"entry {name!r} has a shape {_short(shape)} too big for memory")
        if not (type(offs) is list and len(offs) == 2
                and type(offs[0]) is int and type(offs[1]) is int and 0 <= offs[0] <= offs[1]):
            raise _bad(path, f"entry {name!r} has invalid data_offsets {_short(offs)}")
        if offs[1] - offs[0] != nbytes:
            raise _bad(path, f"entry {name!r} of shape {_short(shape)} and dtype {dt} "
                             f"needs {nbytes} bytes but its offsets span {offs[1] - offs[0]}")
        if data_start + offs[1] > size:
            raise _bad(path, f"entry {name!r} ends at byte {data_start + offs[1]} but the file "
                             f"has {size} bytes (truncated)")
        entries.append((offs[0], offs[1], name, dtype, shape, strides))
    entries.sort()           # by offsets (names are unique, so never past them)
    pos = 0
    for lo, hi, name, *_ in entries:
        if lo != pos:
            raise _bad(path, f"entry {name!r} starts at data byte {lo}, expected {pos} "
                             f"(overlapping or missing data)")
        pos = hi
    if data_start + pos != size:
        raise _bad(path, f"the data section should end at byte {data_start + pos} but the "
                         f"file has {size} bytes (truncated or trailing garbage)")
    return entries


def _short(v):
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _decode(path, node, arrays, get):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if not isinstance(node, dict) or not node:
        raise _bad(path, f"malformed structure metadata near {_short(node)}")
    if "array" in node:
        name = node["array"]
        if not isinstance(name, str) or name not in arrays or not set(node) <= {"array",
                                                                                "complex"}:
            raise _bad(path, f"the structure refers to array {_short(name)}, which the file "
                             f"lacks" if isinstance(name, str) else
                             f"malformed array reference {_short(node)}")
        return get(name, node.get("complex"))
    if len(node) != 1:
        raise _bad(path, f"malformed structure metadata near {_short(node)}")
    (kind, val), = node.items()
    if kind == "dict" and isinstance(val, list):
        out = {}
        for item in val:
            if not (isinstance(item, list) and len(item) == 2
                    and isinstance(item[0], (str, int)) and not isinstance(item[0], bool)):
                raise _bad(path, f"malformed structure metadata (dict item {_short(item)})")
            out[item[0]] = _decode(path, item[1], arrays, get)
        return out
    if kind in ("list", "tuple") and isinstance(val, list):
        seq = [_decode(path, v, arrays, get) for v in val]
        return tuple(seq) if kind == "tuple" else seq
    if kind == "int" and isinstance(val, str):
        try:
            return int(val)
        except ValueError:
            raise _bad(path, f"malformed structure metadata (integer {_short(val)})") from None
    if kind == "float" and val in ("inf", "-inf", "nan"):
        return float(val)
    raise _bad(path, f"malformed structure metadata near {_short(node)}")


def _device_mapper(map_location):
    """map_location as torch.load takes it -> a function array -> array, or None."""
    if map_location is None:
        return None
    if callable(map_location) and not isinstance(map_location, (str, Device)):
        def call(a):
            got = map_location(a, "cpu")
            return a if got is None else got
        return call
    if isinstance(map_location, dict):      # {saved location: target}; ember saves from "cpu"
        map_location = map_location.get("cpu", map_location.get(CPU))
        if map_location is None:
            return None
    if not isinstance(map_location, (str, Device, int)):
        map_location = str(map_location)    # e.g. a torch.device
    dev = check_device(map_location, "ember.load(map_location=...)")
    return None if dev == CPU else (lambda a: a.to(dev))


def _source(f, mmap):
    """(file object, its name for messages, bytes left in it, path for mmap or None,
    whether to close it)."""
    if not _is_file_object(f):
        path = os.fspath(f)
        fh, size = _checkpoint_io.open_regular(path)
        return fh, path, size, path, True
    if not hasattr(f, "read"):
        raise TypeError(f"ember.load: the file object {f!r} has no read method")
    name = getattr(f, "name", None)
    name = name if isinstance(name, str) else f"<{type(f).__name__}>"
    if mmap:
        raise ValueError(f"ember.load: mmap=True needs a path, not a file object ({name})")
    try:
        here = f.tell()
        size = f.seek(0, os.SEEK_END) - here
        f.seek(here)
    except (AttributeError, OSError, ValueError):      # not seekable: read it all
        data = f.read()
        size, f = len(data), io.BytesIO(data)
    if not hasattr(f, "readinto"):
        data = f.read()
        size, f = len(data), io.BytesIO(data)
    return f, name, size, None, False


def load(f, map_location=None, *, weights_only=None, mmap=False):
    """Load what `ember.save` wrote, from a path or a binary file object (read from its
    current position), as ``torch.load(f, map_location=None, weights_only=...)``.

    A safetensors file written by another program loads as a dict from array
    name to array.  Nothing is ever unpickled: ember.load always behaves as
    ``torch.load(..., weights_only=True)`` does, and reads what ember.save writes
    (arrays, dicts, lists, tuples, numbers, strings, None); ``weights_only=False``
    is accepted and changes nothing (a pickle is refused either way).
    ``map_location`` moves the arrays: ``"cpu"`` (the default), ``"cuda"``, a
    ``Device``, a dict ``{"cpu": target}`` or a function ``(array, "cpu") -> array``.
    With ``mmap=True`` (a path only) the arrays map the file instead of being read
    into memory, read-only (``x.flags.writeable`` is False; ``x.copy()`` is writable).
    A truncated, corrupt or foreign file raises ``ValueError`` naming the file and
    the problem; a directory, FIFO or device is refused at once.

    >>> import ember, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "b.safetensors")
    >>> ember.save({"x": ember.zeros(4)}, path)
    >>> ember.load(path, mmap=True)["x"].shape
    (4,)
    >>> ember.load(path, map_location="cpu", weights_only=True)["x"].shape
    (4,)
    """
    from ember._api._util import numpy_view, wrap
    from ember._core.array import _as_strided
    if weights_only not in (None, True, False):
        raise TypeError(f"ember.load: weights_only must be True, False or None, "
                        f"got {weights_only!r}")
    move = _device_mapper(map_location)
    fh, path, size, mpath, close = _source(f, mmap)
    try:
        entries, meta, data_start = _read_layout(path, size, fh)
        nbytes = size - data_start
        if mmap and entries:
            # read-only: the arrays share the file's pages and can never change it
            buf, base = np.memmap(mpath, dtype=np.uint8, mode="r", shape=(size,)), data_start
        else:
            buf, base = _read_exact(fh, nbytes, path, "data", np.empty(nbytes, np.uint8)), 0
    finally:
        if close:
            fh.close()
    whole = wrap(buf)
    arrays = {e[2]: e for e in entries}

    def array(name):
        """The entry `name` as an ember view of the buffer (one storage for all)."""
        lo, _, _, dtype, shape, strides = arrays[name]
        if (base + lo) % dtype.itemsize:      # unaligned (foreign files): NumPy copies
            return wrap(np.ndarray(shape, dtype=dtype, buffer=buf, offset=base + lo))
        return _as_strided(whole, shape, strides, base + lo, dtype)
    structure = meta.get(_STRUCTURE_KEY)
    if structure is None:       # a foreign safetensors file: its arrays by name
        return {name: _moved(array(name), move) for name in arrays}
    if not isinstance(structure, str):
        raise _bad(path, f"its {_STRUCTURE_KEY} metadata is not a string")
    try:
        doc = json.loads(structure)
    except json.JSONDecodeError as exc:
        raise _bad(path, f"its ember.structure metadata is not valid JSON ({exc})") from None
    except RecursionError:
        raise _bad(path, "its ember.structure metadata is nested too deeply") from None
    if not isinstance(doc, dict) or "root" not in doc:
        raise _bad(path, "its ember.structure metadata lacks a root")
    version = doc.get("version", 0)
    if type(version) is not int:
        raise _bad(path, f"its ember.structure has a non-integer version {_short(version)}")
    if version > _VERSION:
        raise _bad(path, f"it was written by a newer ember (format version {version}, "
                         f"this one reads up to {_VERSION})")
    cache = {}

    def get(name, kind):
        """The array `name` (complex `kind` when saved as float pairs), wrapped once."""
        if name not in cache:
            a = array(name)
            if kind is not None:
                a = numpy_view(a)
                if not isinstance(kind, str) or kind not in _COMPLEX_PARTS:
                    raise _bad(path, f"array {name!r} has an unknown complex dtype {_short(kind)}")
                if a.ndim == 0 or a.shape[-1] != 2 or a.dtype.name != _COMPLEX_PARTS[kind]:
                    raise _bad(path, f"array {name!r} of shape {a.shape} and dtype {a.dtype} "
                                     f"cannot be read as {kind}")
                a = wrap((a[..., 0] + 1j * a[..., 1]).astype(kind))
            cache[name] = _moved(a, move)
        return cache[name]

    try:
        return _decode(path, doc["root"], arrays, get)
    except RecursionError:
        raise _bad(path, "its ember.structure metadata is nested too deeply") from None


def _moved(x, move):
    return x if move is None else move(x)
