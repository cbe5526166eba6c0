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

Saving is atomic: the bytes go to a temporary file in the destination's folder,
which is flushed, fsync'ed and renamed over the destination, so a crash at any
point leaves either the old checkpoint or the new one, never a torn file.

>>> import ember, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
>>> ember.save({"w": ember.ones((2, 2)), "step": 3}, path)
>>> ckpt = ember.load(path)
>>> ckpt["step"], ckpt["w"].shape
(3, (2, 2))
"""
import json
import math
import os
import struct
import tempfile

import numpy as np

__all__ = ["save", "load"]

# safetensors dtype names <-> NumPy dtypes (complex is stored as pairs of floats)
_TO_ST = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16",
          "float16": "F16", "int32": "I32", "uint32": "U32", "float32": "F32",
          "float64": "F64", "int64": "I64", "uint64": "U64", "bfloat16": "BF16"}
_FROM_ST = {v: np.dtype(k) for k, v in _TO_ST.items()}     # 'bfloat16': ml_dtypes' dtype
_COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64"}
_STRUCTURE_KEY = "ember.structure"
_FORMAT_KEY = "format"
_MAX_HEADER = 100 * 1024 * 1024       # the reference implementation's limit
_VERSION = 1


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


def save(obj, f):
    """Save `obj` (arrays, nested dicts/lists/tuples of them, plain values) to the
    path `f` as a safetensors file, atomically.

    The previous file at `f`, if any, stays intact until the new one is complete on
    disk.  Arrays that require grad are saved detached.

    >>> import ember, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.safetensors")
    >>> ember.save([ember.arange(3), 1.5, None], path)
    >>> ember.load(path)[0].tolist()
    [0, 1, 2]
    """
    path = os.fspath(f)
    enc = _Encoder()
    structure = enc.encode(obj)
    metadata = {_FORMAT_KEY: "ember",
                _STRUCTURE_KEY: json.dumps({"version": _VERSION, "root": structure},
                                           separators=(",", ":"), allow_nan=False)}
    header, order = _header_and_layout(enc.arrays, metadata)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(struct.pack("<Q", len(header)))
            out.write(header)
            for name in order:
                out.write(enc.arrays[name].tobytes() if enc.arrays[name].size == 0
                          else memoryview(enc.arrays[name].reshape(-1).view(np.uint8)))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:        # make the rename itself durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# ------------------------------------------------------------------ decoding

def _bad(path, what):
    return ValueError(f"ember.load: {path!s} is not a valid checkpoint: {what}")


def _read_header(path, size, fh):
    if size < 8:
        raise _bad(path, f"the file has {size} bytes, fewer than the 8-byte header length "
                         f"(truncated, or not a safetensors file)")
    (n,) = struct.unpack("<Q", fh.read(8))
    if n > _MAX_HEADER or 8 + n > size:
        raise _bad(path, f"its header claims {n} bytes but the file has {size} "
                         f"(truncated, or not a safetensors file)")
    raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(path, f"its header is not valid JSON ({exc}); not a safetensors file?") from None
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    return header, 8 + n


def _check_entries(path, header, data_start, size):
    """Validate every entry: known dtype, sane shape, offsets that tile the data."""
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    spans = []
    for name, e in entries.items():
        if not isinstance(e, dict) or set(e) < {"dtype", "shape", "data_offsets"}:
            raise _bad(path, f"entry {name!r} lacks dtype, shape or data_offsets")
        if e["dtype"] not in _FROM_ST:
            raise _bad(path, f"entry {name!r} has dtype {e['dtype']!r}, which ember cannot "
                             f"read (known: {', '.join(sorted(_FROM_ST))})")
        shape, offs = e["shape"], e["data_offsets"]
        if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                                and d >= 0 for d in shape)):
            raise _bad(path, f"entry {name!r} has an invalid shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2
                and all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
                and 0 <= offs[0] <= offs[1]):
            raise _bad(path, f"entry {name!r} has invalid data_offsets {offs!r}")
        nbytes = math.prod(shape) * _FROM_ST[e["dtype"]].itemsize
        if offs[1] - offs[0] != nbytes:
            raise _bad(path, f"entry {name!r} of shape {tuple(shape)} and dtype {e['dtype']} "
                             f"needs {nbytes} bytes but its offsets span {offs[1] - offs[0]}")
        if data_start + offs[1] > size:
            raise _bad(path, f"entry {name!r} ends at byte {data_start + offs[1]} but the file "
                             f"has {size} bytes (truncated)")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    pos = 0
    for lo, hi, name in spans:
        if lo != pos:
            raise _bad(path, f"entry {name!r} starts at data byte {lo}, expected {pos} "
                             f"(overlapping or missing data)")
        pos = hi
    if data_start + pos != size:
        raise _bad(path, f"the data section should end at byte {data_start + pos} but the "
                         f"file has {size} bytes (truncated or trailing garbage)")
    return entries


def _decode(path, node, arrays):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        raise _bad(path, "malformed structure metadata (a bare list)")
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise _bad(path, f"malformed structure metadata near {str(node)[:60]!r}")
    if "array" in node:
        name = node["array"]
        if name not in arrays:
            raise _bad(path, f"the structure refers to array {name!r}, which the file lacks")
        return arrays[name]
    if len(node) != 1:
        raise _bad(path, f"malformed structure metadata near {str(node)[:60]!r}")
    (kind, val), = node.items()
    if kind == "dict":
        if not isinstance(val, list):
            raise _bad(path, "malformed structure metadata (dict items)")
        out = {}
        for item in val:
            if not (isinstance(item, list) and len(item) == 2
                    and isinstance(item[0], (str, int))):
                raise _bad(path, "malformed structure metadata (dict item)")
            out[item[0]] = _decode(path, item[1], arrays)
        return out
    if kind in ("list", "tuple"):
        if not isinstance(val, list):
            raise _bad(path, f"malformed structure metadata ({kind})")
        seq = [_decode(path, v, arrays) for v in val]
        return tuple(seq) if kind == "tuple" else seq
    if kind == "int" and isinstance(val, str):
        return int(val)
    if kind == "float" and val in ("inf", "-inf", "nan"):
        return float(val)
    raise _bad(path, f"malformed structure metadata (unknown node {kind!r})")


def load(f, mmap=False):
    """Load what `ember.save` wrote to the path `f`.

    A safetensors file written by another program loads as a dict from array
    name to array.  With ``mmap=True`` the arrays map the file instead of being
    read into memory (copy-on-write: writing to them never changes the file).
    Nothing is unpickled.  A truncated, corrupt or foreign file raises
    ``ValueError`` naming the file and the problem.

    >>> import ember, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "b.safetensors")
    >>> ember.save({"x": ember.zeros(4)}, path)
    >>> ember.load(path, mmap=True)["x"].shape
    (4,)
    """
    from ember._api._util import wrap
    path = os.fspath(f)
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        header, data_start = _read_header(path, size, fh)
        entries = _check_entries(path, header, data_start, size)
        meta = header.get("__metadata__") or {}
        if not isinstance(meta, dict):
            raise _bad(path, "__metadata__ is not a JSON object")
        if mmap and entries:
            # copy-on-write: writes to the arrays stay private and never reach the file
            buf, base = np.memmap(path, dtype=np.uint8, mode="c", shape=(size,)), data_start
        else:
            fh.seek(data_start)
            buf, base = np.frombuffer(bytearray(fh.read(size - data_start)), dtype=np.uint8), 0
    arrays = {}
    for name, e in entries.items():
        lo, hi = e["data_offsets"]
        arrays[name] = buf[base + lo:base + hi].view(_FROM_ST[e["dtype"]]).reshape(e["shape"])
    structure = meta.get(_STRUCTURE_KEY)
    if structure is None:       # a foreign safetensors file: its arrays by name
        return {name: wrap(a) for name, a in arrays.items()}
    try:
        doc = json.loads(structure)
    except json.JSONDecodeError as exc:
        raise _bad(path, f"its ember.structure metadata is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or "root" not in doc:
        raise _bad(path, "its ember.structure metadata lacks a root")
    if doc.get("version", 0) > _VERSION:
        raise _bad(path, f"it was written by a newer ember (format version {doc.get('version')}, "
                         f"this one reads up to {_VERSION})")
    _restore_complex(path, doc["root"], arrays)
    return _decode(path, doc["root"], {name: wrap(a) for name, a in arrays.items()})


def _restore_complex(path, node, arrays):
    """Arrays saved as float pairs become complex again (found through the structure)."""
    if isinstance(node, dict):
        if "array" in node:
            kind = node.get("complex")
            name = node["array"]
            if kind is not None and name in arrays:
                if kind not in _COMPLEX_PARTS:
                    raise _bad(path, f"array {name!r} has an unknown complex dtype {kind!r}")
                a = arrays[name]
                if a.ndim == 0 or a.shape[-1] != 2 or a.dtype.name != _COMPLEX_PARTS[kind]:
                    raise _bad(path, f"array {name!r} cannot be read as {kind}")
                arrays[name] = (a[..., 0] + 1j * a[..., 1]).astype(kind)
            return
        for v in node.values():
            _restore_complex(path, v, arrays)
    elif isinstance(node, list):
        for v in node:
            _restore_complex(path, v, arrays)
