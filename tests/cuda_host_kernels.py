"""ember's CUDA kernel sources compiled as host C++ and called through ctypes, for tests
without a GPU (see tests/cuda_host/prelude.h: one thread, one block, so the kernels
whose threads never cooperate run with their real index arithmetic).

>>> k = load("pool_conv")                                   # doctest: +SKIP
>>> k.call("ember_im2col_f32", x, col, i64(N), geom, i64(sn), i64(sr))  # doctest: +SKIP
"""
import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "ember" / "cuda" / "kernels"
PRELUDE = Path(__file__).resolve().parent / "cuda_host" / "prelude.h"
_CACHE = {}
_DIR = []


def compiler():
    """The host C++ compiler, or None."""
    return shutil.which("g++") or shutil.which("c++")


def i64(v):
    return ctypes.c_longlong(int(v))


def i32(v):
    return ctypes.c_int(int(v))


def f64(v):
    return ctypes.c_double(float(v))


def f32(v):
    return ctypes.c_float(float(v))


class Family:
    """One compiled kernels/<family>.cu."""

    def __init__(self, lib):
        self.lib = lib

    def call(self, name, *args, grid=1, block=1):
        """Run kernel `name` as a launch of `grid` blocks of `block` threads (one thread
        after another): NumPy arrays pass as pointers (their first element), None as a
        null pointer; everything else must already be a ctypes value."""
        conv = []
        for a in args:
            if isinstance(a, np.ndarray):
                conv.append(ctypes.c_void_p(a.ctypes.data))
            elif a is None:
                conv.append(ctypes.c_void_p(0))
            else:
                conv.append(a)
        fn = getattr(self.lib, name)
        fn.restype = None
        for b in range(grid):
            for t in range(block):
                self.lib.emu_set_thread(b, t, grid, block)
                fn(*conv)
        self.lib.emu_set_thread(0, 0, 1, 1)


def load(family):
    """Compile (once per source text) and load kernels/<family>.cu."""
    src = (KERNELS / f"{family}.cu").read_text() + (KERNELS / "ember_common.cu").read_text() \
        + PRELUDE.read_text()
    key = hashlib.sha256(src.encode()).hexdigest()[:16]
    if key in _CACHE:
        return _CACHE[key]
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) to build the kernels for the host")
    if not _DIR:
        _DIR.append(tempfile.mkdtemp(prefix="ember-host-kernels-"))
    out = Path(_DIR[0]) / f"{family}-{key}.so"
    cmd = [cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-x", "c++", "-include", str(PRELUDE),
           f"-I{KERNELS}", str(KERNELS / f"{family}.cu"), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"host compile of {family}.cu failed:\n{res.stderr[-4000:]}")
    fam = Family(ctypes.CDLL(str(out)))
    _CACHE[key] = fam
    return fam


class Conv2dGeom(ctypes.Structure):
    """pool_conv.cu's struct Conv2dGeom (thirteen int64 fields), passed by value."""
    _fields_ = [(n, ctypes.c_longlong) for n in
                ("C", "H", "W", "KH", "KW", "OH", "OW", "sh", "sw", "ph", "pw", "dh", "dw")]
