"""ember.save / ember.load: safetensors checkpoints, atomic writes, no code on load."""
import json
import os
import pickle
import struct

import numpy as np
import pytest

import ember
from ember import serialization

DTYPES = ["bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def _same(a, b):
    assert isinstance(b, ember.ndarray)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 3), (2, 3, 4)])
def test_round_trip_dtypes_and_shapes(tmp_path, dtype, shape):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * (rng.standard_normal(shape) * 10).astype(dtype)
    path = tmp_path / "a.safetensors"
    ember.save(ember.asarray(a), path)
    _same(a, ember.load(path))
    _same(a, ember.load(path, mmap=True))


def test_nested_structure_and_plain_values(tmp_path):
    obj = {"model": {"fc.weight": ember.ones((2, 3)), "fc.bias": ember.zeros(2)},
           "optimizer": {"state": {0: {"step": 3, "exp_avg": ember.full((2,), 0.5)}},
                         "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1],
                                           "amsgrad": False, "name": None}]},
           "epoch": 7, "best": float("inf"), "nan": float("nan"), "huge": 2 ** 80,
           "tag": "run-1", "flags": [True, False], "empty": {}, "nothing": [],
           "tup": (1, (2.5, "x"))}
    path = tmp_path / "ckpt.safetensors"
    ember.save(obj, path)
    got = ember.load(path)
    assert set(got) == set(obj)
    _same(np.ones((2, 3), np.float32), got["model"]["fc.weight"])
    st = got["optimizer"]["state"]
    assert list(st) == [0] and st[0]["step"] == 3           # integer keys stay integers
    assert got["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)   # tuples stay tuples
    assert got["optimizer"]["param_groups"][0]["params"] == [0, 1]
    assert got["optimizer"]["param_groups"][0]["name"] is None
    assert got["epoch"] == 7 and got["best"] == float("inf") and np.isnan(got["nan"])
    assert got["huge"] == 2 ** 80 and got["tag"] == "run-1" and got["flags"] == [True, False]
    assert got["empty"] == {} and got["nothing"] == [] and got["tup"] == (1, (2.5, "x"))


def test_non_contiguous_negative_stride_and_grad_arrays(tmp_path):
    base = ember.arange(24, dtype=ember.float32).reshape(4, 6)
    w = ember.ones((3,), requires_grad=True)
    obj = [base.T, base[::-1, ::2], w]
    ember.save(obj, tmp_path / "v.safetensors")
    got = ember.load(tmp_path / "v.safetensors")
    _same(np.asarray(base).T, got[0])
    _same(np.asarray(base)[::-1, ::2], got[1])
    assert not got[2].requires_grad


def test_safetensors_library_reads_the_arrays(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    obj = {"a": ember.arange(6, dtype=ember.float64).reshape(2, 3), "b": [ember.ones(2)]}
    path = str(tmp_path / "x.safetensors")
    ember.save(obj, path)
    arrays = st.load_file(path)
    np.testing.assert_array_equal(arrays["a"], np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(arrays["b/0"], np.ones(2, np.float32))


def test_foreign_safetensors_file_loads_as_a_dict(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    path = str(tmp_path / "foreign.safetensors")
    st.save_file({"w": np.arange(3, dtype=np.int16), "v": np.eye(2, dtype=np.float32)}, path)
    got = ember.load(path)
    assert set(got) == {"w", "v"}
    _same(np.arange(3, dtype=np.int16), got["w"])


def test_module_and_optimizer_state_round_trip(tmp_path):
    nn = pytest.importorskip("ember.nn")
    optim = pytest.importorskip("ember.optim")
    if not hasattr(nn, "Linear") or not hasattr(optim, "Adam"):
        pytest.skip("nn.Linear / optim.Adam not available")
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    x = ember.ones((5, 3))
    model(x).sum().backward()
    opt.step()
    path = tmp_path / "train.safetensors"
    ember.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
    ckpt = ember.load(path)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model2.load_state_dict(ckpt["model"])
    opt2 = optim.Adam(model2.parameters(), lr=1e-2)
    opt2.load_state_dict(ckpt["opt"])
    for (k, v), (k2, v2) in zip(model.state_dict().items(), model2.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(np.asarray(v), np.asarray(v2))
    assert opt2.state_dict()["param_groups"][0]["lr"] == 1e-2


def test_mmap_arrays_are_read_only(tmp_path):
    path = tmp_path / "m.safetensors"
    ember.save({"x": ember.zeros(1000), "y": [ember.ones(3, dtype=ember.complex64)]}, path)
    before = path.read_bytes()
    got = ember.load(path, mmap=True)
    x = got["x"]
    assert not x.flags.writeable and not x[2:].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        x[:] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        ember.add(x, 1, out=x)
    assert path.read_bytes() == before
    c = x.copy()
    c[:] = 5.0                                  # a copy is the user's own
    assert float(c.sum()) == 5000.0 and float(x.sum()) == 0.0
    assert ember.load(path)["x"].flags.writeable                # a plain load is writable
    assert got["y"][0].tolist() == [1, 1, 1]


def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    ember.save({"v": ember.ones(3)}, path)
    before = path.read_bytes()

    def crash(*a, **k):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(serialization.os, "fsync", crash)
    with pytest.raises(OSError, match="simulated"):
        ember.save({"v": ember.zeros(100)}, path)
    assert path.read_bytes() == before                  # the old checkpoint is intact
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary file left behind


def test_killed_writer_leaves_the_previous_checkpoint(tmp_path):
    """A process killed in the middle of a save (os._exit inside the write) never tears
    the checkpoint: the file is the old one, complete and loadable."""
    import subprocess
    import sys
    path = tmp_path / "ckpt.safetensors"
    ember.save({"v": ember.ones(3)}, path)
    code = (
        "import os, ember\n"
        "from ember import serialization as s\n"
        "real = os.fdopen\n"
        "class Dying:\n"
        "    def __init__(self, f): self.f = f; self.n = 0\n"
        "    def __enter__(self): return self\n"
        "    def __exit__(self, *a): pass\n"
        "    def write(self, b):\n"
        "        self.f.write(b); self.n += 1\n"
        "        if self.n == 3: self.f.flush(); os._exit(9)\n"
        "s.os.fdopen = lambda fd, mode: Dying(real(fd, mode))\n"
        f"ember.save({{'v': ember.zeros(10**6), 'w': ember.ones(5)}}, {str(path)!r})\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path))
    assert r.returncode == 9
    got = ember.load(path)
    _same(np.ones(3, np.float32), got["v"])


def _write_raw(path, header_obj=None, data=b"", raw_header=None):
    raw = raw_header if raw_header is not None else json.dumps(header_obj).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("cut", [0, 4, 8, 20, -1])
def test_truncated_file_is_a_clear_error(tmp_path, cut):
    path = tmp_path / "t.safetensors"
    ember.save({"a": ember.ones((10, 10)), "b": 3}, path)
    raw = path.read_bytes()
    path.write_bytes(raw[:cut] if cut >= 0 else raw[:-7])
    with pytest.raises(ValueError, match="t.safetensors.*(truncated|fewer|claims|end)"):
        ember.load(path)


@pytest.mark.parametrize("header, data, match", [
    (None, b"", "not valid JSON"),
    ([1, 2], b"", "not a JSON object"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4, "needs 8 bytes"),
    ({"a": {"dtype": "X9", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "dtype 'X9'"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "invalid shape"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, "expected 0"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 12, "trailing"),
    ({"a": {"dtype": "F32"}}, b"", "lacks .shape"),
    ({"__metadata__": {"ember.structure": "{not json"}}, b"", "structure metadata is not valid"),
    ({"__metadata__": {"ember.structure": json.dumps({"version": 1, "root": {"array": "zz"}})}},
     b"", "lacks"),
    ({"__metadata__": {"ember.structure": json.dumps({"version": 99, "root": None})}},
     b"", "newer ember"),
])
def test_corrupt_header_is_a_clear_error(tmp_path, header, data, match):
    path = tmp_path / "bad.safetensors"
    if header is None:
        _write_raw(path, raw_header=b"{this is not json", data=data)
    else:
        _write_raw(path, header, data)
    with pytest.raises(ValueError, match=match) as info:
        ember.load(path)
    assert "bad.safetensors" in str(info.value)


def test_a_pickle_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(ValueError, match="evil.pt"):
        ember.load(path)
    assert not marker.exists()


def test_unsupported_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot save a function"):
        ember.save({"f": lambda: 0}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="dict keys must be str or int"):
        ember.save({(1, 2): 3}, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()
