"""The CUDA kernel sources in ember/cuda/kernels compile, and define exactly the
kernels ember.cuda.kernel_names lists.

Three layers, each skipped (never faked) where this machine cannot do it:
  * nvcc (the CUDA toolkit): every file to PTX, with cuda_fp16.h / cuda_bf16.h and
    with the header-less fallback; the PTX entry points must equal the listed names.
  * NVRTC through CuPy: the exact source string and options ember will use at run time.
  * a GPU: a few kernels run through CuPy and are checked against NumPy.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import ember.cuda as ec

NVCC = shutil.which("nvcc")
NVCC_ARGS = ["-ptx", "-arch=compute_80", "-std=c++17"]
_ENTRY = re.compile(r"^\s*\.(?:visible\s+)?\.entry\s+(\w+)\s*\(", re.M)
VARIANTS = ("headers", "fallback")


def _entries(ptx):
    return set(_ENTRY.findall(ptx))


# ---- always: the package itself --------------------------------------------------

def test_files_exist_and_names_are_unique():
    files = ec.kernel_files()
    assert [p.stem for p in files] == list(ec.FAMILIES)
    for p in files:
        assert p.is_file(), p
    names = [n for f in ec.FAMILIES for n in ec.kernel_names(f)]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"ember_[a-z0-9_]+", n) for n in names)
    with pytest.raises(ValueError):
        ec.kernel_names("nope")


@pytest.mark.parametrize("family", ec.FAMILIES)
def test_kernel_source_is_self_contained(family):
    src = ec.kernel_source(family)
    includes = re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', src, re.M)
    # Only the half-precision headers NVRTC gets from CuPy; no host headers.
    assert set(includes) <= {"cuda_fp16.h", "cuda_bf16.h"}, includes
    assert "#pragma once" not in src


def test_import_does_not_load_cupy(tmp_path):
    # run outside the repository: from its root, `import ember` would find the source tree
    # (not the installed, compiled package)
    code = "import sys, ember.cuda; assert 'cupy' not in sys.modules, 'cupy imported'"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


# ---- nvcc -------------------------------------------------------------------------

def _nvcc(family, variant, tmp):
    """(returncode, ptx, stderr). 'headers' compiles the file in place, as .ci/run
    does; 'fallback' compiles kernel_source() (the pasted, NVRTC-ready string)."""
    out = os.path.join(tmp, f"{family}-{variant}.ptx")
    if variant == "headers":
        src, extra = str(Path(ec.kernel_files()[ec.FAMILIES.index(family)])), []
    else:
        src = os.path.join(tmp, f"{family}-{variant}.cu")
        Path(src).write_text(ec.kernel_source(family))
        extra = list(ec.nvrtc_options(half_headers=False))
    proc = subprocess.run([NVCC, *NVCC_ARGS, *extra, "-o", out, src],
                          capture_output=True, text=True)
    ptx = Path(out).read_text() if proc.returncode == 0 else ""
    return proc.returncode, ptx, proc.stderr


@pytest.fixture(scope="module")
def nvcc_ptx():
    if NVCC is None:
        pytest.skip("nvcc (CUDA toolkit) not on PATH: the kernel sources are not compiled here")
    jobs = [(f, v) for f in ec.FAMILIES for v in VARIANTS]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda job: _nvcc(*job, tmp), jobs))
    return dict(zip(jobs, results))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("family", ec.FAMILIES)
def test_nvcc_compiles_and_defines_the_listed_kernels(nvcc_ptx, family, variant):
    rc, ptx, err = nvcc_ptx[family, variant]
    assert rc == 0, f"nvcc failed on {family}.cu ({variant}):\n{err}"
    assert "warning" not in err.lower(), err
    got, want = _entries(ptx), set(ec.kernel_names(family))
    assert not (want - got), f"listed but not compiled: {sorted(want - got)}"
    assert not (got - want), f"compiled but not listed: {sorted(got - want)}"


# ---- NVRTC through CuPy -------------------------------------------------------------

def _cupy_or_skip():
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA library that fails to load
        pytest.skip(f"cupy does not import ({type(e).__name__}: {e}); NVRTC half not run")
    return cupy


# What CuPy's RawModule adds to the caller's options at run time (CuPy 13/14);
# -ftz=true flushes float32 denormals, so results at the tiny end differ from NumPy.
CUPY_RUNTIME_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")


def _include_dirs(cupy):
    """CuPy's headers, then the first CUDA toolkit include dir that has cuda_fp16.h
    (CuPy's CUDA path, $CUDA_PATH, $CUDA_HOME, nvcc's toolkit, /usr/local/cuda)."""
    dirs = [os.path.join(os.path.dirname(cupy.__file__), "_core", "include")]
    try:
        from cupy import _environment
        roots = [_environment.get_cuda_path()]
    except Exception:
        roots = []
    roots += [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    if NVCC:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(NVCC))))
    for root in roots:
        if root and os.path.isfile(os.path.join(root, "include", "cuda_fp16.h")):
            dirs.append(os.path.join(root, "include"))
            break
    return ["-I" + d for d in dirs]


@pytest.fixture(scope="module")
def nvrtc_compile():
    """compile(source, options) -> PTX through CuPy's NVRTC binding for compute_80.
    It needs no GPU or driver (CuPy's compile_using_nvrtc does: it asks the device
    for its architecture). Skips when NVRTC itself does not load here, probed on a
    trivial kernel, so a real compile error in ember's sources still fails."""
    cupy = _cupy_or_skip()
    try:
        from cupy_backends.cuda.libs import nvrtc
    except Exception as e:
        pytest.skip(f"CuPy {cupy.__version__} has no NVRTC binding here ({type(e).__name__}: {e})")
    includes = _include_dirs(cupy)

    def compile(source, options):
        prog = nvrtc.createProgram(source, "ember.cu", [], [])
        try:
            nvrtc.compileProgram(prog, [*options, "-arch=compute_80", *CUPY_RUNTIME_OPTIONS, *includes])
        except nvrtc.NVRTCError as e:
            raise RuntimeError(f"NVRTC: {e}\n{nvrtc.getProgramLog(prog)}") from None
        ptx = nvrtc.getPTX(prog)
        return ptx.decode() if isinstance(ptx, bytes) else ptx

    try:
        compile('extern "C" __global__ void ember_probe(float* x) { x[0] = 1.0f; }', ())
    except Exception as e:
        pytest.skip(f"CuPy {cupy.__version__} imports but NVRTC does not work ({type(e).__name__}: {e})")
    return compile


@pytest.mark.parametrize("half_headers", [True, False], ids=["headers", "fallback"])
@pytest.mark.parametrize("family", ec.FAMILIES)
def test_nvrtc_compiles_and_defines_the_listed_kernels(nvrtc_compile, family, half_headers):
    if half_headers:
        try:
            nvrtc_compile("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n", ())
        except Exception as e:
            pytest.skip(f"NVRTC finds no cuda_fp16.h / cuda_bf16.h here (no CUDA toolkit headers on its "
                        f"include path: {[l for l in str(e).splitlines() if 'error' in l][:1]}); the fallback variant still runs")
    ptx = nvrtc_compile(ec.kernel_source(family), ec.nvrtc_options(half_headers=half_headers))
    got, want = _entries(ptx), set(ec.kernel_names(family))
    assert got == want, (sorted(want - got), sorted(got - want))


# ---- Philox reference (pure Python; the GPU test compares against it) --------------

def philox4x32_10(seed, offset, block):
    m = 0xFFFFFFFF
    c = [block & m, block >> 32 & m, offset & m, offset >> 32 & m]
    k0, k1 = seed & m, seed >> 32 & m
    for r in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & m, (p0 >> 32) ^ c[3] ^ k1, p0 & m]
        k0, k1 = (k0 + 0x9E3779B9) & m, (k1 + 0xBB67AE85) & m
    return c


def test_philox_reference_known_answers():
    # Random123's kat_vectors for philox4x32_10 (counter words x0..x3, key k0, k1).
    def kat(ctr, key):
        return philox4x32_10(key[0] | key[1] << 32, ctr[2] | ctr[3] << 32, ctr[0] | ctr[1] << 32)
    assert kat([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert kat([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert kat([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0]) == \
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


# ---- on a GPU -------------------------------------------------------------------------

def _gpu_or_skip():
    if os.environ.get("EMBER_CUDA_EMULATION") == "1":
        # the emulation's CuPy has no NVRTC / RawModule: these raw launches need a GPU
        # (tests/test_cuda_host_kernels.py runs the same kernels' host builds)
        pytest.skip("raw RawModule launches need a real GPU (EMBER_CUDA_EMULATION=1)")
    cupy = _cupy_or_skip()
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        pytest.skip(f"no usable CUDA driver/device ({type(e).__name__}: {e})")
    if n < 1:
        pytest.skip("no CUDA device")
    return cupy


STRIDED_DTYPE = np.dtype({"names": ["ndim", "shape", "strides"],
                          "formats": ["<i4", ("<i8", 8), ("<i8", (3, 8))],
                          "offsets": [0, 8, 72], "itemsize": 264})


def strided_args(shape, *operand_strides):
    """StridedArgs by value: strides in elements, operand 0 the output."""
    s = np.zeros(1, STRIDED_DTYPE)  # CuPy passes a 1-element structured array by value
    s["ndim"] = len(shape)
    s["shape"][0, : len(shape)] = shape
    for k, st in enumerate(operand_strides):
        s["strides"][0, k, : len(shape)] = st
    return s


GEOM_FIELDS = ("C", "H", "W", "KH", "KW", "OH", "OW", "sh", "sw", "ph", "pw", "dh", "dw")
GEOM_DTYPE = np.dtype([(f, "<i8") for f in GEOM_FIELDS])


def conv_geom(**kw):
    g = np.zeros(1, GEOM_DTYPE)
    for f in GEOM_FIELDS:
        g[f] = kw[f]
    return g


@pytest.fixture(scope="module")
def mod():
    """(cupy, get): get(family) is the RawModule ember would build at run time."""
    cupy = _gpu_or_skip()
    cache = {}

    def get(family):
        if family not in cache:
            cache[family] = cupy.RawModule(code=ec.kernel_source(family), options=ec.nvrtc_options())
        return cache[family]
    return cupy, get


class TestOnGPU:
    def test_add_contig_vectorised_and_tail(self, mod):
        cp, get = mod
        k = get("elementwise").get_function("ember_add_f32_contig")
        for n, off in [(1, 0), (1027, 0), (1027, 1)]:  # off=1: misaligned, scalar path
            a = cp.arange(n + off, dtype=cp.float32)[off:]
            b = cp.full(n, 0.5, cp.float32)
            y = cp.empty(n, cp.float32)
            k((4,), (128,), (a, b, y, np.int64(n)))
            np.testing.assert_array_equal(y.get(), a.get() + np.float32(0.5))

    def test_mul_strided_broadcast_f16(self, mod):
        cp, get = mod
        k = get("elementwise").get_function("ember_mul_f16_strided")
        a = cp.asarray(np.random.default_rng(0).standard_normal((3, 5)), cp.float16)
        b = cp.asarray(np.arange(5), cp.float16)  # broadcast along rows: stride 0
        y = cp.empty((3, 5), cp.float16)
        k((2,), (64,), (a, b, y, np.int64(15), strided_args((3, 5), (5, 1), (5, 1), (0, 1))))
        np.testing.assert_allclose(y.get().astype(np.float32),
                                   (a.get().astype(np.float32) * b.get().astype(np.float32)).astype(np.float16),
                                   rtol=1e-3)

    def test_sum_inner_and_argmax(self, mod):
        cp, get = mod
        x = cp.asarray(np.random.default_rng(1).standard_normal((7, 1000)), cp.float32)
        y = cp.empty(7, cp.float32)
        get("reduce").get_function("ember_sum_f32_inner")((7,), (256,), (x, y, np.int64(7), np.int64(1000)))
        np.testing.assert_allclose(y.get(), x.get().sum(1), rtol=1e-5, atol=1e-4)
        i = cp.empty(7, cp.int64)
        get("reduce").get_function("ember_argmax_f32_inner")((3,), (128,), (x, i, np.int64(7), np.int64(1000)))
        np.testing.assert_array_equal(i.get(), x.get().argmax(1))

    def test_softmax(self, mod):
        cp, get = mod
        x = cp.asarray(np.random.default_rng(2).standard_normal((5, 33)) * 30, cp.float64)
        y = cp.empty_like(x)
        get("softmax").get_function("ember_softmax_f64")((2,), (64,), (x, y, np.int64(5), np.int64(33)))
        e = np.exp(x.get() - x.get().max(1, keepdims=True))
        np.testing.assert_allclose(y.get(), e / e.sum(1, keepdims=True), rtol=1e-12)

    def test_uniform_matches_philox_reference(self, mod):
        cp, get = mod
        n, seed, offset = 10, 0x1234_5678_9ABC, 7
        y = cp.empty(n, cp.float32)
        get("random").get_function("ember_uniform_f32")(
            (1,), (32,), (y, np.int64(n), np.uint64(seed), np.uint64(offset), np.float64(0), np.float64(1)))
        words = [w for b in range(3) for w in philox4x32_10(seed, offset, b)][:n]
        np.testing.assert_array_equal(y.get(), np.array([(w >> 8) * 2.0 ** -24 for w in words], np.float32))

    def test_layer_norm_forward(self, mod):
        cp, get = mod
        rng = np.random.default_rng(3)
        x = rng.standard_normal((6, 300)) * 3 + 100  # large mean: what Welford is for
        g, b = rng.standard_normal(300), rng.standard_normal(300)
        X, G, B = (cp.asarray(a, cp.float32) for a in (x, g, b))
        y = cp.empty_like(X)
        mean, rstd = cp.empty(6, cp.float32), cp.empty(6, cp.float32)
        get("norm").get_function("ember_layer_norm_fwd_f32")(
            (3,), (128,), (X, G, B, y, mean, rstd, np.int64(6), np.int64(300), np.float64(1e-5)))
        xf = X.get().astype(np.float64)
        mu, var = xf.mean(1, keepdims=True), xf.var(1, keepdims=True)
        want = (xf - mu) / np.sqrt(var + 1e-5) * g.astype(np.float32) + b.astype(np.float32)
        np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(mean.get(), mu[:, 0], rtol=1e-6)

    def test_cross_entropy_forward(self, mod):
        cp, get = mod
        rng = np.random.default_rng(4)
        x = rng.standard_normal((5, 11))
        t = np.array([3, -100, 0, 10, 7], np.int64)
        loss, lse = cp.empty(5, cp.float64), cp.empty(5, cp.float64)
        bad = cp.zeros(1, cp.int32)
        get("softmax").get_function("ember_cross_entropy_fwd_f64")(
            (2,), (64,), (cp.asarray(x), cp.asarray(t), loss, lse, np.int64(5), np.int64(11),
                          np.int64(-100), np.float64(0.1), bad))
        m = x.max(1, keepdims=True)
        l = (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]
        want = 0.9 * (l - x[np.arange(5), np.maximum(t, 0)]) + 0.1 * (l - x.mean(1))
        want[1] = 0.0
        np.testing.assert_allclose(loss.get(), want, rtol=1e-12)
        np.testing.assert_allclose(lse.get(), l, rtol=1e-12)
        assert int(bad.get()[0]) == 0

    def test_im2col(self, mod):
        cp, get = mod
        N, C, H, W, K, s, p, d = 2, 3, 7, 6, 3, 2, 1, 1
        OH, OW = (H + 2 * p - d * (K - 1) - 1) // s + 1, (W + 2 * p - d * (K - 1) - 1) // s + 1
        x = np.random.default_rng(5).standard_normal((N, C, H, W)).astype(np.float32)
        col = cp.empty((N, C * K * K, OH * OW), cp.float32)
        geom = conv_geom(C=C, H=H, W=W, KH=K, KW=K, OH=OH, OW=OW, sh=s, sw=s, ph=p, pw=p, dh=d, dw=d)
        L, R = OH * OW, C * K * K
        fn = get("pool_conv").get_function("ember_im2col_f32")
        fn((4,), (128,), (cp.asarray(x), col, np.int64(N), geom, np.int64(R * L), np.int64(L)))
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        want = np.empty((N, C, K, K, OH, OW), np.float32)
        for kh in range(K):
            for kw in range(K):
                want[:, :, kh, kw] = xp[:, :, kh * d: kh * d + s * OH: s, kw * d: kw * d + s * OW: s]
        want = want.reshape(N, R, L)
        np.testing.assert_array_equal(col.get(), want)
        colt = cp.empty((R, N, L), cp.float32)        # the weight gradient's layout
        fn((4,), (128,), (cp.asarray(x), colt, np.int64(N), geom, np.int64(L), np.int64(N * L)))
        np.testing.assert_array_equal(colt.get(), want.transpose(1, 0, 2))
