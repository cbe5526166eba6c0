"""ember's GEMM on its own threads (ember/_kernels/cpu/gemm.pyx) against numpy.matmul."""
import itertools

import numpy as np
import pytest

import ember
from ember._kernels.cpu import gemm


def _check(a, b, rtol=None):
    expect = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = np.empty(expect.shape, a.dtype)
    got = gemm.matmul(a, b, out)
    assert got is out
    tol = rtol or (2e-5 if a.dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(out, expect, rtol=tol, atol=tol * max(1, a.shape[-1]))


def _layout(x, kind):
    """x with the same values in another memory layout."""
    if kind == "c":
        return x
    if kind == "f":             # transposed storage: BLAS sees it as trans
        return np.asfortranarray(x) if x.ndim == 2 else np.swapaxes(
            np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    if kind == "strided":       # rows with padding (ld > cols)
        big = np.zeros(x.shape[:-1] + (x.shape[-1] + 3,), x.dtype)
        big[..., :x.shape[-1]] = x
        return big[..., :x.shape[-1]]
    if kind == "step2":         # no unit stride at all: falls back to NumPy
        big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        big[..., ::2] = x
        return big[..., ::2]
    if kind == "neg":           # negative strides: falls back to NumPy
        return np.ascontiguousarray(x[..., ::-1, ::-1])[..., ::-1, ::-1]
    raise ValueError(kind)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 7, 1), (5, 1, 3), (64, 256, 256),
                                   (3, 300, 2), (257, 65, 129), (2, 2, 700)])
@pytest.mark.parametrize("la,lb", list(itertools.product(["c", "f", "strided"], repeat=2))
                         + [("step2", "c"), ("c", "neg")])
def test_2d_layouts(dtype, m, k, n, la, lb):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = _layout(rng.standard_normal((m, k)).astype(dtype), la)
    b = _layout(rng.standard_normal((k, n)).astype(dtype), lb)
    _check(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb", [((4, 3, 5), (4, 5, 2)), ((1, 3, 5), (6, 5, 2)),
                                   ((3, 5), (7, 5, 4)), ((2, 1, 8, 16), (3, 16, 8)),
                                   ((32, 64, 64), (64, 128)), ((128, 64, 32), (128, 32, 64)),
                                   ((2, 3, 1, 4), (1, 3, 4, 1))])
def test_batched_broadcast(dtype, sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    _check(a, b)
    _check(_layout(a, "f"), _layout(b, "strided"))


def test_broadcast_stride_zero_weight():
    # conv's pattern: one weight matrix against a batch (np.broadcast_to gives stride 0)
    rng = np.random.default_rng(0)
    w = np.broadcast_to(rng.standard_normal((6, 25)).astype(np.float32), (8, 6, 25))
    col = rng.standard_normal((8, 25, 100)).astype(np.float32)
    _check(w, col)


def test_output_non_contiguous_and_views():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 30))
    b = rng.standard_normal((30, 20))
    big = np.zeros((40, 50))
    out = big[:, 5:25]                       # row stride 50: a valid BLAS ldc
    gemm.matmul(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    assert (big[:, :5] == 0).all() and (big[:, 25:] == 0).all()
    outf = np.zeros((20, 40)).T              # column-major output: NumPy's path
    gemm.matmul(a, b, outf)
    np.testing.assert_allclose(outf, a @ b, rtol=1e-12)


def test_empty_and_zero_k():
    for sa, sb in [((0, 3), (3, 4)), ((2, 0), (0, 4)), ((5, 0, 3), (3, 2)), ((2, 3), (3, 0))]:
        a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
        out = np.full(np.matmul(a, b).shape, 7.0, np.float32)
        gemm.matmul(a, b, out)
        np.testing.assert_array_equal(out, np.matmul(a, b))


def test_overlap_and_other_dtypes_go_to_numpy():
    a = np.arange(16.0).reshape(4, 4)
    expect = a @ a
    gemm.matmul(a, a, a)                     # out is an operand: NumPy buffers it
    np.testing.assert_array_equal(a, expect)
    for dt in (np.int64, np.complex64, np.float16):
        x = np.arange(6).reshape(2, 3).astype(dt)
        y = np.arange(6).reshape(3, 2).astype(dt)
        out = np.empty((2, 2), dt)
        gemm.matmul(x, y, out)
        np.testing.assert_array_equal(out, x @ y)


def test_errors_are_numpys():
    with pytest.raises(ValueError):
        gemm.matmul(np.ones((2, 3)), np.ones((4, 2)), np.empty((2, 2)))
    with pytest.raises(ValueError):
        gemm.matmul(np.ones((2, 3)), np.ones((3, 2)), np.empty((3, 3)))


def test_blas_threads_restored_and_threads_agree():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not gemm.available():
        pytest.skip("no OpenBLAS found: every product goes to numpy.matmul")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        a = np.random.default_rng(2).standard_normal((300, 200)).astype(np.float32)
        ref = None
        for nt in (1, 2, 3):
            old = ember.get_num_threads()
            ember.set_num_threads(nt)
            try:
                out = gemm.matmul(a, a.T, np.empty((300, 300), np.float32))
            finally:
                ember.set_num_threads(old)
            ref = out if ref is None else ref
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
        blas = [i for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"
                and i["filepath"] == gemm.BLAS_LIBRARY]
        assert blas and blas[0]["num_threads"] == 2


def test_ember_matmul_and_linear_use_it():
    # the public ops agree with NumPy with the ember path on and off
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    w = rng.standard_normal((48, 96)).astype(np.float32)
    import ember.nn.functional as F
    results = []
    for on in (True, False):
        gemm._set_enabled(on)
        try:
            results.append((np.asarray(ember.asarray(x) @ ember.asarray(w).T),
                            np.asarray(F.linear(ember.asarray(x), ember.asarray(w)))))
        finally:
            gemm._set_enabled(True)
    for r in results:
        np.testing.assert_allclose(r[0], x @ w.T, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(r[1], x @ w.T, rtol=1e-5, atol=1e-4)


def test_fork_after_threads_does_not_hang(tmp_path):
    # GNU OpenMP's pool does not survive fork(): ember drops to one thread in the child
    import subprocess
    import sys
    script = tmp_path / "fork_child.py"
    script.write_text(
        "import os, ember\n"
        "ember.set_num_threads(2)\n"
        "x = ember.ones((600, 600))\n"
        "(x + x).sum(); x @ x\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = float((x * 2).sum()) == 720000.0 and float((x @ x)[0, 0]) == 600.0\n"
        "    os._exit(0 if ok and ember.get_num_threads() == 1 else 3)\n"
        "_, st = os.waitpid(pid, 0)\n"
        "print('child status', os.waitstatus_to_exitcode(st))\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "child status 0" in r.stdout
