"""The one-pass safetensors header reader (ember/_kernels/cpu/header_scan.pyx) against
the general one (json.loads + serialization._check_entries): whatever it accepts, it
reads exactly as the general reader does; whatever the general reader refuses, it
hands back (None) or refuses too.  Checked over generated valid headers and over
byte-level mutations of them."""
import json
import random

import numpy as np
import pytest

from ember import serialization as S
from ember._kernels.cpu import header_scan

_DTYPES = sorted(S._FROM_ST)
_NAMES = ["w", "layer.0.weight", "bias", "é", "名前", "a b", "x\"q", "back\\slash",
          "tab\tname", "__meta", "", "0", "ctrl\x01", "emoji\U0001F600"]


def _general(raw, data_start, size):
    """The general reader: (entries, metadata) or the ValueError it raises."""
    try:
        header, _ = S._parse_header("f", bytearray(raw), data_start)
        entries = S._check_entries("f", header, data_start, size)
        meta = header.get("__metadata__") or {}
        if not isinstance(meta, dict):
            raise S._bad("f", "__metadata__ is not a JSON object")
        return entries, meta
    except ValueError as exc:
        return exc


_KEEP = frozenset({"ember.structure", "k"})


def _fast(raw, data_start, size):
    try:
        got = header_scan.scan(bytearray(raw), data_start, size, S._FROM_ST, S._MAXDIM,
                               S._MAX_BYTES, _KEEP)
    except header_scan.TooManyDims:
        return "too many dims"
    return got if got is None else (got[0], got[1] or {})


def _header(rng):
    """A valid header (bytes, JSON written in varying styles) and its data size."""
    n = rng.randint(0, 6)
    names = rng.sample(_NAMES, n)
    entries, off = [], 0
    for name in names:
        dt = rng.choice(_DTYPES)
        shape = [rng.choice([0, 1, 2, 3, 5]) for _ in range(rng.randint(0, 4))]
        nbytes = int(np.prod(shape, dtype=np.int64)) * S._FROM_ST[dt].itemsize
        e = {"dtype": dt, "shape": shape, "data_offsets": [off, off + nbytes]}
        keys = list(e)
        rng.shuffle(keys)
        entries.append((name, {k: e[k] for k in keys}))
        off += nbytes
    rng.shuffle(entries)                 # file order need not be offset order
    doc = dict(entries)
    if rng.random() < 0.5:
        meta = {"format": "pt"} if rng.random() < 0.5 else {"ember.structure": '{"root":1}',
                                                             "k": "é\\"}
        items = list(doc.items())
        items.insert(rng.randint(0, len(items)), ("__metadata__", meta))
        doc = dict(items)
    style = rng.choice([dict(separators=(",", ":")), dict(indent=1), dict(),
                        dict(ensure_ascii=False, separators=(", ", " : "))])
    raw = json.dumps(doc, **style).encode()
    raw += b" " * rng.randint(0, 9)
    return raw, off


def _check_agree(raw, data_len):
    data_start = 8 + len(raw)
    size = data_start + data_len
    slow, fast = _general(raw, data_start, size), _fast(raw, data_start, size)
    if fast == "too many dims":
        assert isinstance(slow, ValueError) and "invalid shape" in str(slow), (raw, slow)
    elif fast is not None:
        assert not isinstance(slow, Exception), (raw, slow)
        assert fast[1] == {k: v for k, v in slow[1].items() if k in _KEEP}
        assert len(fast[0]) == len(slow[0])
        for f, s in zip(fast[0], slow[0]):
            assert f[:5] == s[:5] and tuple(f[5]) == tuple(s[5]), (raw, f, s)
    return slow, fast


def test_valid_headers_read_the_same_and_take_the_fast_path_unless_escaped():
    rng = random.Random(0)
    fast_hits = 0
    for _ in range(600):
        raw, data_len = _header(rng)
        slow, fast = _check_agree(raw, data_len)
        assert not isinstance(slow, Exception), slow
        assert fast is not None, raw           # escapes included
        fast_hits += fast is not None
    assert fast_hits > 100


def test_mutated_headers_never_read_differently():
    rng = random.Random(1)
    junk = [b"", b"-", b"1.5", b"1e3", b"01", b"null", b"[]", b"{}", b"\"", b",", b"}",
            b"]", b"\\", b"\xff", b"\xc3", b"99999999999999999999", b"\"F32\"", b" ",
            b"\"shape\":[1],", b"9", b"\x00"]
    for _ in range(3000):
        raw, data_len = _header(rng)
        raw = bytearray(raw)
        for _ in range(rng.randint(1, 3)):
            i = rng.randint(0, len(raw))
            j = min(len(raw), i + rng.randint(0, 4))
            raw[i:j] = rng.choice(junk)
        data_len += rng.choice([0, 0, 0, -1, 1, 4])
        if data_len >= 0:
            _check_agree(bytes(raw), data_len)


@pytest.mark.parametrize("raw, why", [
    (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
     b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "duplicate names"),
    (b'{"a\\x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "an invalid escape"),
    (b'{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', "a float axis"),
    (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}', "an extra key"),
    (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x', "trailing bytes"),
    (b'\xef\xbb\xbf{}', "a byte-order mark"),
    (b'{"__metadata__":null}', "null metadata"),
    (b'{"__metadata__":{"unread":"\xff"}}', "invalid UTF-8 in a value ember does not read"),
])
def test_what_the_fast_path_hands_back(raw, why):
    assert header_scan.scan(raw, 8 + len(raw), 8 + len(raw) + 4, S._FROM_ST, S._MAXDIM,
                            S._MAX_BYTES) is None, why


def test_offsets_out_of_order_are_sorted_as_the_general_reader_sorts_them():
    raw = (b'{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},'
           b'"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},'
           b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
           b'"y":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}')
    entries, meta = header_scan.scan(raw, 8 + len(raw), 16 + len(raw), S._FROM_ST,
                                     S._MAXDIM, S._MAX_BYTES)
    assert [e[2] for e in entries] == ["a", "y", "z", "b"] and meta is None
    _check_agree(raw, 8)


def test_a_shape_of_millions_of_axes_is_refused_without_reading_it(tmp_path):
    raw = (b'{"a":{"dtype":"U8","shape":[' + b",".join([b"1"] * 2_000_000)
           + b'],"data_offsets":[0,1]}}')
    path = tmp_path / "axes.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0")
    with pytest.raises(ValueError, match=r"axes.safetensors.*entry 'a' has an invalid shape "
                                         r"\[1, 1, .*\.\.\. \(a list of at most 32"):
        S.load(str(path))


def test_sizes_past_int64_are_handed_back_not_wrapped():
    raw = (b'{"a":{"dtype":"F64","shape":[4294967296,4294967296],'
           b'"data_offsets":[0,0]}}')
    assert header_scan.scan(raw, 8 + len(raw), 8 + len(raw), S._FROM_ST, S._MAXDIM,
                            S._MAX_BYTES) is None
    slow = _general(raw, 8 + len(raw), 8 + len(raw))
    assert "too big for memory" in str(slow)


def test_metadata_ember_does_not_read_is_checked_but_not_built():
    big = "é" * 1000 + "x" * 100_000
    raw = json.dumps({"__metadata__": {"format": "pt", "note": big,
                                       "ember.structure": '{"root": 1}'}},
                     ensure_ascii=False).encode()
    entries, meta = header_scan.scan(raw, 8 + len(raw), 8 + len(raw), S._FROM_ST, S._MAXDIM,
                                     S._MAX_BYTES, S._READ_METADATA)
    assert entries == [] and meta == {"ember.structure": '{"root": 1}'}


def test_escaped_names_and_ember_structure_read_as_the_general_reader_reads_them():
    for name in ("a\\ud800", "tab\\t", 'quote\\"', "u\\u00e9", "back\\\\slash"):
        raw = ('{"%s":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
               '"__metadata__":{"ember.structure":"{\\"root\\": 1}"}}' % name).encode()
        slow, fast = _check_agree(raw, 4)
        assert fast is not None and fast[1] == {"ember.structure": '{"root": 1}'}, name


def test_ember_checkpoints_take_the_one_pass_reader(tmp_path, monkeypatch):
    import ember
    path = str(tmp_path / "m.safetensors")
    state = {"w": ember.ones((2, 3)), "nested": {"b": ember.zeros(4), "n": 3, "s": 'q"\\'}}
    ember.save(state, path)

    def general(*a):
        raise AssertionError("the general reader ran")
    monkeypatch.setattr(S, "_parse_header", general)
    got = ember.load(path)
    assert got["nested"]["n"] == 3 and got["nested"]["s"] == 'q"\\'
    assert np.asarray(got["w"]).tolist() == [[1.0] * 3] * 2
