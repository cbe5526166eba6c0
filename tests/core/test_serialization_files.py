"""ember.save / ember.load as files: killed writers leave nothing behind, permissions
follow the umask, non-regular files are refused, malformed files are ValueErrors that
name the file, file objects and torch.load's keywords work."""
import io
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest

import ember
from ember import _checkpoint_io, serialization

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file semantics")


def _listing(folder):
    return sorted(os.listdir(folder))


@pytest.fixture(params=["unnamed", "named"])
def temp_kind(request, monkeypatch):
    """Both ways of writing: an O_TMPFILE file linked into place, a named temp file."""
    if request.param == "unnamed":
        if not _checkpoint_io.USE_UNNAMED:
            pytest.skip("no O_TMPFILE or /proc here")
    else:
        monkeypatch.setattr(_checkpoint_io, "USE_UNNAMED", False)
    return request.param


# ------------------------------------------------------------ killed writers

_CHILD = r"""
import os, sys, time
import ember
from ember import _checkpoint_io
_checkpoint_io.USE_UNNAMED = {unnamed}
real = os.fsync
def fsync(fd):          # the data is written, the file not yet in place: stop here
    real(fd)
    sys.stdout.write("ready\n"); sys.stdout.flush()
    time.sleep(600)
os.fsync = fsync
ember.save({{"big": ember.ones(16 * 2**20), "step": 2}}, {path!r})   # 64 MB
"""


@posix_only
def test_sigkilled_writer_leaves_no_temporary_after_the_next_save(tmp_path, temp_kind):
    path = tmp_path / "ckpt.safetensors"
    ember.save({"step": 1, "w": ember.ones(3)}, path)
    code = _CHILD.format(unnamed=temp_kind == "unnamed", path=str(path))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        during = _listing(tmp_path)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    after_kill = _listing(tmp_path)
    if temp_kind == "unnamed":      # nothing ever had a name but the checkpoint
        assert during == after_kill == ["ckpt.safetensors"]
    else:                           # the dead writer's named file is there ...
        assert len(after_kill) == 2 and after_kill[0].endswith(".ember-tmp")
    assert ember.load(path)["step"] == 1                 # the old checkpoint, intact
    ember.save({"step": 3}, path)                         # ... until the next save
    assert _listing(tmp_path) == ["ckpt.safetensors"]
    assert ember.load(path) == {"step": 3}


@posix_only
def test_stale_temporaries_of_live_writers_and_other_hosts_are_kept(tmp_path):
    host = _checkpoint_io._host_tag()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = {
        "dead": f".a.safetensors.{host}-{dead.pid}-0123abcd.ember-tmp",
        "alive": f".a.safetensors.{host}-{os.getppid()}-0123abcd.ember-tmp",
        "other_host": f".a.safetensors.{'0' * 8 if host != '0' * 8 else '1' * 8}-"
                      f"{dead.pid}-0123abcd.ember-tmp",
        "not_ours": f".a.safetensors.{host}-{dead.pid}.tmp",
    }
    for n in names.values():
        (tmp_path / n).write_bytes(b"x")
    ember.save({"v": 1}, tmp_path / "b.safetensors")
    left = set(_listing(tmp_path))
    assert names["dead"] not in left
    assert {names["alive"], names["other_host"], names["not_ours"]} <= left


def test_a_failing_write_leaves_no_temporary(tmp_path, temp_kind, monkeypatch):
    path = tmp_path / "c.safetensors"
    ember.save({"v": ember.ones(3)}, path)
    before = path.read_bytes()

    def crash(*a, **k):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(_checkpoint_io.os, "fsync", crash)
    with pytest.raises(OSError, match="simulated"):
        ember.save({"v": ember.zeros(100)}, path)
    assert path.read_bytes() == before
    assert _listing(tmp_path) == ["c.safetensors"]


# ------------------------------------------------------------ permissions

@posix_only
@pytest.mark.parametrize("umask, new_mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_follow_the_umask(tmp_path, temp_kind, umask, new_mode):
    old = os.umask(umask)
    try:
        ember.save({"v": ember.ones(2)}, tmp_path / "n.safetensors")
        with open(tmp_path / "plain", "wb") as f:     # the oracle: what open() gives
            f.write(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "plain").st_mode) == new_mode
    assert stat.S_IMODE(os.stat(tmp_path / "n.safetensors").st_mode) == new_mode


@posix_only
@pytest.mark.parametrize("existing", [0o644, 0o600, 0o640])
def test_overwritten_files_keep_their_permissions(tmp_path, temp_kind, existing):
    """As open(path, "wb") -- and so torch.save -- keeps them."""
    path, plain = tmp_path / "o.safetensors", tmp_path / "plain"
    for p in (path, plain):
        p.write_bytes(b"old")
        os.chmod(p, existing)
    old = os.umask(0o022)
    try:
        ember.save({"v": ember.ones(2)}, path)
        with open(plain, "wb") as f:
            f.write(b"new")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == stat.S_IMODE(os.stat(plain).st_mode) == existing
    assert ember.load(path)["v"].tolist() == [1.0, 1.0]


# ------------------------------------------------------------ non-regular files

def _returns_quickly(fn, seconds=20):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:       # noqa: BLE001 -- handed to the test
            box["error"] = exc
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "ember.load blocked"
    return box


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    box = _returns_quickly(lambda: ember.load(fifo))
    assert isinstance(box.get("error"), ValueError)
    assert "pipe.safetensors" in str(box["error"]) and "FIFO" in str(box["error"])


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="directory"):
        ember.load(tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_is_refused_at_once():
    box = _returns_quickly(lambda: ember.load("/dev/zero"))
    assert isinstance(box.get("error"), ValueError)
    assert "/dev/zero" in str(box["error"]) and "character device" in str(box["error"])


# ------------------------------------------------------------ malformed files

def _file(header, data=b""):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def _st(entry, data=b"\0" * 4):
    return _file({"a": entry}, data)


def _structure(root, version=1, arrays=None):
    meta = {"ember.structure": root if isinstance(root, str)
            else json.dumps({"version": version, "root": root})}
    return _file(dict(arrays or {}, __metadata__=meta))


_DEEP = 100_000
MALFORMED = {
    "misspelt_dtype_key": _st({"dtpye": "F32", "shape": [1], "data_offsets": [0, 4]}),
    "misspelt_shape_key": _st({"dtype": "F32", "shap": [1], "data_offsets": [0, 4]}),
    "extra_key": _st({"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}),
    "list_dtype": _st({"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}),
    "dict_dtype": _st({"dtype": {"a": 1}, "shape": [1], "data_offsets": [0, 4]}),
    "int_dtype": _st({"dtype": 3, "shape": [1], "data_offsets": [0, 4]}),
    "string_shape": _st({"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}),
    "float_dim": _st({"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}),
    "bool_dim": _st({"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}),
    "huge_dim": _st({"dtype": "F32", "shape": [2 ** 70], "data_offsets": [0, 4]}),
    "empty_but_huge_dims": _st({"dtype": "F32", "shape": [0, 2 ** 40, 2 ** 40],
                                "data_offsets": [0, 0]}, b""),
    "empty_but_dim_2_70": _st({"dtype": "F32", "shape": [0, 2 ** 70], "data_offsets": [0, 0]}, b""),
    "too_many_dims": _st({"dtype": "U8", "shape": [1] * 100, "data_offsets": [0, 1]}, b"\0"),
    "offsets_not_list": _st({"dtype": "F32", "shape": [1], "data_offsets": 4}),
    "offsets_three": _st({"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}),
    "offsets_reversed": _st({"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}),
    "offsets_negative": _st({"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}),
    "offsets_float": _st({"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4.0]}),
    "offsets_past_end": _st({"dtype": "F32", "shape": [10 ** 6], "data_offsets": [0, 4 * 10 ** 6]}),
    "entry_is_list": _file({"a": [1, 2]}),
    "entry_is_null": _file({"a": None}),
    "nested_json": _file(b"[" * _DEEP + b"]" * _DEEP),
    "nested_object": _file(b'{"a":' * _DEEP + b"1" + b"}" * _DEEP),
    "not_utf8": _file(b'{"\xff\xfe": 1}'),
    "utf16_json": _file('{"a": 1}'.encode("utf-16")),
    "header_is_string": _file(b'"abc"'),
    "header_too_big": struct.pack("<Q", 100_000_001) + b"{}",
    "header_length_2_64": b"\xff" * 8 + b"{}",
    "metadata_list": _file({"__metadata__": [1]}),
    "structure_not_string": _file({"__metadata__": {"ember.structure": {"root": 1}}}),
    "structure_not_json": _structure("{oops"),
    "structure_deep": _structure("[" * _DEEP + "]" * _DEEP),
    "structure_deep_nodes": _structure('{"version":1,"root":' + '{"list":[' * 5000 + "1"
                                       + "]}" * 5000 + "}"),
    "structure_no_root": _structure(json.dumps({"version": 1})),
    "structure_version_string": _structure(None, version="1"),
    "structure_version_list": _structure(None, version=[1]),
    "structure_newer": _structure(None, version=99),
    "structure_bare_list": _structure([1, 2]),
    "structure_empty_node": _structure({}),
    "structure_unknown_node": _structure({"set": [1]}),
    "structure_dict_not_list": _structure({"dict": {"a": 1}}),
    "structure_dict_item_bad": _structure({"dict": [[[1], 2]]}),
    "structure_dict_item_bool": _structure({"dict": [[True, 2]]}),
    "structure_list_not_list": _structure({"list": 3}),
    "structure_int_not_digits": _structure({"int": "12x"}),
    "structure_int_huge": _structure({"int": "9" * 10_000}),
    "structure_float_bad": _structure({"float": "1.5"}),
    "structure_missing_array": _structure({"array": "zz"}),
    "structure_array_name_list": _structure({"array": ["a"]}),
    "structure_array_extra_key": _structure({"array": "a", "x": 1},
                                            arrays={"a": {"dtype": "F32", "shape": [0],
                                                          "data_offsets": [0, 0]}}),
    "structure_complex_unknown": _structure({"array": "a", "complex": "complex256"},
                                            arrays={"a": {"dtype": "F32", "shape": [0, 2],
                                                          "data_offsets": [0, 0]}}),
    "structure_complex_list": _structure({"array": "a", "complex": ["complex64"]},
                                         arrays={"a": {"dtype": "F32", "shape": [0, 2],
                                                       "data_offsets": [0, 0]}}),
    "structure_complex_shape": _structure({"array": "a", "complex": "complex64"},
                                          arrays={"a": {"dtype": "F32", "shape": [0, 3],
                                                        "data_offsets": [0, 0]}}),
    "pickle": b"\x80\x04\x95" + b"\0" * 20,
    "torch_zip": b"PK\x03\x04" + b"\0" * 20,
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_every_malformed_file_is_a_value_error_naming_the_file(tmp_path, name):
    path = tmp_path / f"{name}.safetensors"
    path.write_bytes(MALFORMED[name])
    with pytest.raises(ValueError) as info:
        ember.load(path)
    msg = str(info.value)
    assert f"{name}.safetensors" in msg and "is not a valid checkpoint" in msg


def test_the_header_limit_is_the_reference_one():
    assert serialization._MAX_HEADER == 100_000_000


def test_a_pickle_message_says_what_is_supported(tmp_path):
    path = tmp_path / "t.pt"
    path.write_bytes(MALFORMED["pickle"])
    for wo in (None, True, False):
        with pytest.raises(ValueError, match="never unpickles"):
            ember.load(path, weights_only=wo)


def test_mutated_files_load_or_raise_value_error(tmp_path):
    """Random byte changes and cuts of a real checkpoint: a clean load or a ValueError
    naming the file, nothing else."""
    path = tmp_path / "m.safetensors"
    ember.save({"model": {"w": ember.arange(6.0).reshape(2, 3), "b": ember.zeros(2)},
                "step": 7, "z": ember.ones(2, dtype=ember.complex64), "t": (1, "x")}, path)
    good = path.read_bytes()
    rng = np.random.default_rng(0)
    for _ in range(300):
        raw = bytearray(good)
        for _ in range(rng.integers(1, 4)):
            pos = int(rng.integers(0, len(raw)))
            raw[pos] = int(rng.integers(0, 256))
        if rng.random() < 0.2:
            raw = raw[:int(rng.integers(0, len(raw)))]
        path.write_bytes(bytes(raw))
        try:
            ember.load(path)
        except ValueError as exc:
            assert "m.safetensors" in str(exc)


# ------------------------------------------------------------ file objects, torch.load's keywords

def _obj():
    return {"w": ember.arange(6, dtype=ember.float32).reshape(2, 3), "step": 4,
            "z": ember.asarray(np.array([1 + 2j], np.complex64))}


def _check(got):
    np.testing.assert_array_equal(np.asarray(got["w"]), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert got["step"] == 4 and got["z"].tolist() == [1 + 2j]


def test_bytesio_round_trip_from_the_current_position():
    buf = io.BytesIO()
    buf.write(b"prefix")
    ember.save(_obj(), buf)
    buf.seek(6)
    _check(ember.load(buf))                 # the checkpoint is the rest of the stream


def test_open_file_objects_round_trip(tmp_path):
    path = tmp_path / "f.safetensors"
    with open(path, "wb") as f:
        ember.save(_obj(), f)
    with open(path, "rb") as f:
        _check(ember.load(f, weights_only=True))
    _check(ember.load(path))                # the same bytes as a path gives


def test_unseekable_stream_loads():
    buf = io.BytesIO()
    ember.save(_obj(), buf)

    class Stream:
        def __init__(self, data):
            self._b = io.BytesIO(data)

        def read(self, n=-1):
            return self._b.read(n)
    _check(ember.load(Stream(buf.getvalue())))


def test_file_object_mistakes_are_clear_errors(tmp_path):
    buf = io.BytesIO()
    ember.save(_obj(), buf)
    buf.seek(0)
    with pytest.raises(ValueError, match="mmap=True needs a path"):
        ember.load(buf, mmap=True)
    with pytest.raises(TypeError, match="weights_only"):
        ember.load(buf, weights_only="yes")
    with pytest.raises(ValueError, match="BytesIO.*truncated"):
        ember.load(io.BytesIO(buf.getvalue()[:-3]))


@pytest.mark.parametrize("weights_only", [None, True, False])
def test_weights_only_is_accepted(tmp_path, weights_only):
    ember.save(_obj(), tmp_path / "w.safetensors")
    _check(ember.load(tmp_path / "w.safetensors", weights_only=weights_only))


@pytest.mark.parametrize("where", ["cpu", ember.Device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"},
                                   lambda a, loc: None, lambda a, loc: a + 0])
def test_map_location_forms(tmp_path, where):
    ember.save(_obj(), tmp_path / "l.safetensors")
    got = ember.load(tmp_path / "l.safetensors", map_location=where)
    _check(got)
    assert got["w"].device == ember.Device("cpu")


def test_map_location_function_gets_each_array_and_cpu(tmp_path):
    ember.save(_obj(), tmp_path / "l.safetensors")
    seen = []
    got = ember.load(tmp_path / "l.safetensors",
                     map_location=lambda a, loc: seen.append((a.shape, loc)) or a * 2)
    assert sorted(seen) == [((1,), "cpu"), ((2, 3), "cpu")]
    assert got["w"].tolist() == (np.arange(6).reshape(2, 3) * 2).tolist()


def test_signatures_mirror_torch():
    torch = pytest.importorskip("torch")
    import inspect
    ours, theirs = inspect.signature(ember.load), inspect.signature(torch.load)
    assert list(ours.parameters)[:2] == list(theirs.parameters)[:2] == ["f", "map_location"]
    assert ours.parameters["weights_only"].kind == theirs.parameters["weights_only"].kind
    assert list(inspect.signature(ember.save).parameters)[:2] == \
        list(inspect.signature(torch.save).parameters)[:2] == ["obj", "f"]


def test_a_torch_checkpoint_is_refused_with_the_reason(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(ValueError, match="model.pt.*PyTorch.*never unpickles"):
        ember.load(path, weights_only=False)
