"""ember's CUDA kernel sources compiled as host C++ and called through ctypes, for tests
without a GPU (see tests/cuda_host/prelude.h): launches run block by block, either
thread by thread (kernels whose threads never cooperate) or with each block's
threads as real threads (kernels with block reductions).

>>> k = load("pool_conv")                                   # doctest: +SKIP
>>> k.call("ember_im2col_f32", x, col, i64(N), geom, i64(sn), i64(sr))  # doctest: +SKIP
"""
import ctypes
import hashlib
import shutil
import subprocess
import tempfile
import threading
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
        after another); arguments are converted by _ctypes_arg."""
        conv = [_ctypes_arg(a) for a in args]
        fn = getattr(self.lib, name)
        fn.restype = None
        for b in range(grid):
            for t in range(block):
                self.lib.emu_set_thread(b, t, grid, block)
                fn(*conv)
        self.lib.emu_set_thread(0, 0, 1, 1)

    def call_cooperative(self, name, *args, grid=1, block=32):
        """Run kernel `name` with each block's threads as real threads (ctypes releases
        the GIL during the call), for kernels that reduce across a block: __syncthreads
        and warp shuffles then behave as on a GPU.  `block` a multiple of 32, as the
        kernels require."""
        conv = [_ctypes_arg(a) for a in args]
        if block % 32 and block > 1:
            raise ValueError(f"{name}: a cooperative launch needs a multiple of 32 threads")
        fn = getattr(self.lib, name)
        fn.restype = None
        errors = []

        def run(t):
            try:
                self.lib.emu_thread(t)
                fn(*conv)
            except Exception as exc:        # pragma: no cover - reported below
                errors.append(exc)
        for b in range(grid):
            self.lib.emu_begin_block(b, grid, block)
            threads = [threading.Thread(target=run, args=(t,)) for t in range(block)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        self.lib.emu_set_thread(0, 0, 1, 1)
        if errors:
            raise errors[0]


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
    cmd = [cxx, "-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", "-x", "c++", "-include", str(PRELUDE),
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


def _ctypes_arg(a):
    """One kernel argument converted as ember's launcher converts it (_launch.pyx): an
    array as the address of its first element, int as 64-bit, float as double,
    numpy.int32 / float32 as 32-bit, None as a null pointer, bytes as a struct."""
    import ember
    if isinstance(a, ember.ndarray):
        return ctypes.c_void_p(a.data_ptr())
    if isinstance(a, np.ndarray):
        return ctypes.c_void_p(a.ctypes.data)
    if a is None:
        return ctypes.c_void_p(0)
    if isinstance(a, (ctypes._SimpleCData, ctypes.Structure)):
        return a                        # already a C value
    if isinstance(a, bytes):
        class Struct(ctypes.Structure):
            _fields_ = [("b", ctypes.c_char * len(a))]
        return Struct.from_buffer_copy(a)
    t = type(a)
    if t is np.int32:
        return ctypes.c_int(int(a))
    if t is np.float32:
        return ctypes.c_float(float(a))
    if t is float or t is np.float64:
        return ctypes.c_double(float(a))
    if t is int or t is np.int64 or (isinstance(a, int) and not isinstance(a, bool)):
        return ctypes.c_longlong(int(a))
    if t is np.uint64:
        return ctypes.c_ulonglong(int(a))
    raise TypeError(f"kernel argument of type {t.__name__}")


def ember_launch(name, grid, block, args, shmem=0, max_threads=64, max_blocks=4,
                 cooperative=True):
    """ember.cuda's launch(name, grid, block, args) on the CPU: the kernel from its family's
    host build, arguments converted as ember's launcher does.  The launch is shrunk to at
    most max_blocks (None: the whole grid) x max_threads (grid- and block-stride loops make
    that the same computation), keeping a multiple of 32 threads: block-reducing kernels
    need whole warps, and warp-per-row kernels stride by gridDim*blockDim/32.  With
    `cooperative` each block's threads run as real threads, otherwise one after another."""
    from ember.cuda._kernels import _FAMILY_OF
    fam = load(_FAMILY_OF[name])
    g = int(grid[0] if isinstance(grid, tuple) else grid)
    b = int(block[0] if isinstance(block, tuple) else block)
    b = min(b, max_threads) if b >= 32 else b
    g = g if max_blocks is None else min(g, max_blocks)
    run = fam.call_cooperative if cooperative else fam.call
    run(name, *args, grid=g, block=b)


def im2col_taps(x, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw):
    """im2col values (N, C, KH, KW, OH, OW) of x (N, C, H, W), padding read as 0."""
    N, C, H, W = x.shape
    big_h, big_w = ph + H + KH * dh + OH * sh, pw + W + KW * dw + OW * sw
    xp = np.zeros((N, C, big_h, big_w), x.dtype)
    xp[:, :, ph:ph + H, pw:pw + W] = x
    out = np.empty((N, C, KH, KW, OH, OW), x.dtype)
    for kh in range(KH):
        for kw in range(KW):
            out[:, :, kh, kw] = xp[:, :, kh * dh: kh * dh + sh * OH: sh,
                                   kw * dw: kw * dw + sw * OW: sw][:, :, :OH, :OW]
    return out
