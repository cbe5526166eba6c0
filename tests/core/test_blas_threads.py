"""ember ops never run NumPy's OpenBLAS thread pool (one pool: ember's OpenMP threads).

Two pools on two cores preempt each other (see ember/_kernels/cpu/gemm.pyx), so every
ember op that reaches NumPy's BLAS/LAPACK either drives it from ember's threads one
block per thread or holds it at one thread for the call.  Checked by the CPU time of
OpenBLAS's own worker threads: OpenBLAS starts them when it is loaded, so they are
the threads a child process has after importing NumPy and SciPy and before ember
starts its own; each must gain no CPU time while an ember op runs.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember._kernels.cpu import gemm

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
    reason="needs /proc and at least two cores (OpenBLAS starts no pool on one)")

# name -> the code of one ember op (a, b: 384x384 float32 arrays; v: a vector)
CASES = {
    "matmul_sum_backward": "a.grad = None\n(a @ b).sum().backward()",
    "matmul_stride0_operand": "ember.matmul(ember.broadcast_to(ember.ones((1, 384)), (384, 384)), b)",
    "matmul_transposed_out": "ember.matmul(a.detach(), b.detach(), out=o.T)",
    "matmul_complex": "c @ c",
    "matvec": "b.detach() @ v",
    "dot_nd": "ember.dot(ember.ones((4, 96, 96)), ember.ones((96, 96)))",
    "vdot": "ember.vdot(big, big)",
    "inner": "ember.inner(b.detach(), b.detach())",
    "tensordot": "ember.tensordot(b.detach(), b.detach(), axes=1)",
    "einsum": "ember.einsum('ij,jk->ik', b.detach(), b.detach())",
    "linalg_inv": "ember.linalg.inv(spd)",
    "linalg_solve": "ember.linalg.solve(spd, b.detach())",
    "linalg_svd": "ember.linalg.svd(b.detach())",
    "linalg_qr": "ember.linalg.qr(b.detach())",
    "linalg_eigh": "ember.linalg.eigh(spd)",
    "linalg_cholesky": "ember.linalg.cholesky(spd)",
    "linalg_det": "ember.linalg.det(spd)",
    "linalg_pinv": "ember.linalg.pinv(b.detach())",
    "linalg_lstsq": "ember.linalg.lstsq(spd, b.detach())",
    "linalg_multi_dot": "ember.linalg.multi_dot([b.detach(), b.detach(), b.detach()])",
    "linalg_norm_2": "ember.linalg.norm(b.detach(), ord=2)",
    "inv_backward": "s.grad = None\nember.linalg.inv(s).sum().backward()",
    "orthogonal_init": "ember.nn.init.orthogonal_(w)",
    "clip_grad_norm": "ember.nn.utils.clip_grad_norm_([p], 1.0)",
    "lstm_step": "lstm.zero_grad()\nlstm(seq)[0].sum().backward()",
}

CHILD = textwrap.dedent("""
    import json, os, sys, threading, time
    import numpy as np
    import scipy.linalg, scipy.special          # load every OpenBLAS in the process
    main = threading.get_native_id()
    blas = [int(t) for t in os.listdir("/proc/self/task") if int(t) != main]

    def cpu_ns():
        total = 0
        for t in blas:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        return total

    import ember
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    a = ember.asarray(f32(384, 384), requires_grad=True)
    b = ember.asarray(f32(384, 384), requires_grad=True)
    o = ember.empty((384, 384))
    c = ember.asarray(f32(384, 384) + 1j * f32(384, 384))
    v = ember.asarray(f32(384))
    big = ember.asarray(f32(1 << 20))
    m = f32(384, 384)
    spd = ember.asarray(m @ m.T + 384 * np.eye(384, dtype=np.float32))
    s = ember.asarray(np.asarray(spd), requires_grad=True)
    w = ember.empty((384, 384))
    p = ember.nn.Parameter(ember.asarray(f32(1 << 20)))
    p.grad = ember.asarray(f32(1 << 20))
    lstm = ember.nn.LSTM(64, 128)
    seq = ember.asarray(f32(16, 8, 64))

    # the detector sees NumPy's own threaded products (else this check proves nothing)
    x = f32(1024, 1024)
    t0 = cpu_ns()
    for _ in range(5):
        x @ x
    woke = cpu_ns() - t0
    time.sleep(0.3)                             # let the workers stop spinning
    out = {"_numpy_matmul": woke}
    for name, code in json.loads(sys.argv[1]).items():
        exec(code)                              # warm: first-call allocations, imports
        time.sleep(0.05)
        t0 = cpu_ns()
        for _ in range(3):
            exec(code)
        out[name] = cpu_ns() - t0
    print(json.dumps({"threads": len(blas), "ns": out}))
""")


@pytest.fixture(scope="module")
def blas_cpu_time():
    if not gemm.available():
        pytest.skip("ember found no OpenBLAS to drive (NumPy without OpenBLAS)")
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(CASES)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if res["threads"] == 0:
        pytest.skip("OpenBLAS started no worker threads here")
    # 5 threaded 1024^3 products give the workers tens of ms; less means no pool ran
    assert res["ns"]["_numpy_matmul"] > 20e6, res
    return res["ns"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_runs_no_openblas_thread(blas_cpu_time, name):
    # a worker that took part in a call runs for milliseconds; 2 ms allows stray wake-ups
    assert blas_cpu_time[name] < 2e6, \
        f"{name}: OpenBLAS worker threads ran {blas_cpu_time[name] / 1e6:.1f} ms"


def test_broadcast_gradient_never_reaches_numpy_matmul(monkeypatch):
    """The gradient of sum() is a stride-0 array: the backward GEMMs copy it rather
    than hand it to numpy.matmul (NumPy's threaded pool)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    an, bn = rng.standard_normal((64, 48)), rng.standard_normal((48, 32))
    for dt in (np.float32, np.float64):
        a = ember.asarray(an.astype(dt), requires_grad=True)
        b = ember.asarray(bn.astype(dt), requires_grad=True)
        calls = []
        real = np.matmul
        monkeypatch.setattr(np, "matmul", lambda *x, **k: calls.append(1) or real(*x, **k))
        (a @ b).sum().backward()
        (a[:, ::-2] @ b[::-2]).mean().backward()
        monkeypatch.setattr(np, "matmul", real)
        assert calls == []
        ta = torch.tensor(an.astype(dt), requires_grad=True)
        tb = torch.tensor(bn.astype(dt), requires_grad=True)
        (ta @ tb).sum().backward()
        (ta[:, range(47, -1, -2)] @ tb[range(47, -1, -2)]).mean().backward()
        tol = 1e-4 if dt == np.float32 else 1e-10
        np.testing.assert_allclose(np.asarray(a.grad), ta.grad.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(np.asarray(b.grad), tb.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gemm_unaddressable_layouts_match_numpy(dt):
    """Operands and outputs BLAS cannot address (stride 0, non-unit strides in both
    axes, out overlapping an operand) give numpy.matmul's result."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((6, 10)).astype(dt)
    b = rng.standard_normal((10, 7)).astype(dt)
    tol = dict(rtol=1e-5, atol=1e-5) if dt == np.float32 else dict(rtol=1e-12, atol=1e-12)
    s0 = np.broadcast_to(rng.standard_normal((1, 7)).astype(dt), (10, 7))
    both = rng.standard_normal((12, 20)).astype(dt)[::2, ::2]          # (6, 10), no unit stride
    for x, y in ((a, s0), (both, b), (np.broadcast_to(a[:1], (6, 10)), s0),
                 (rng.standard_normal((3, 6, 10)).astype(dt), b[::-1])):
        out = np.empty(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (6, 7), dt)
        np.testing.assert_allclose(gemm.matmul(x, y, out), np.matmul(x, y), **tol)
        wide = np.empty((7, 6) + out.shape[:-2], dt)                     # out not addressable
        strided = np.moveaxis(wide, (0, 1), (-1, -2))
        gemm.matmul(x, y, strided)
        np.testing.assert_allclose(strided, np.matmul(x, y), **tol)
    sq = rng.standard_normal((8, 8)).astype(dt)
    expect = sq @ sq
    gemm.matmul(sq, sq, sq)                                             # out aliases both
    np.testing.assert_allclose(sq, expect, **tol)
    assert not gemm.blas_threads_held()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gemm_constant_axis_operands_match_numpy(dt):
    """An operand constant along a matrix axis (stride 0) takes the rank-1 / repeated
    row path: same values as numpy.matmul (float64 oracle), batches broadcast, inf
    and nan propagate as in the full product, empty shapes."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 6, 10)).astype(dt)
    b = rng.standard_normal((10, 7)).astype(dt)
    tol = dict(rtol=1e-5, atol=1e-5) if dt == np.float32 else dict(rtol=1e-12, atol=1e-12)
    row_const = np.broadcast_to(a[:, :, :1], a.shape)        # a[i, k] = u[i]
    rows_equal = np.broadcast_to(a[:, :1, :], a.shape)       # every row the same
    cols_const = np.broadcast_to(b[:1, :], b.shape)          # b[k, j] = v[j]
    cols_equal = np.broadcast_to(b[:, :1], b.shape)
    scalar_a = np.broadcast_to(dt(0.25), (3, 1, 6, 10))
    cases = [(row_const, b), (rows_equal, b), (a, cols_const), (a, cols_equal),
             (scalar_a, b), (a, np.broadcast_to(dt(-2), (10, 7))),
             (rows_equal, cols_equal), (scalar_a, rng.standard_normal((2, 10, 7)).astype(dt)),
             (np.broadcast_to(dt(1), (0, 10)), b), (np.broadcast_to(dt(1), (4, 10)), b[:, :0])]
    for x, y in cases:
        out = np.empty(np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
                       + (x.shape[-2], y.shape[-1]), dt)
        got = gemm.matmul(x, y, out)
        want = np.matmul(x.astype(np.float64), y.astype(np.float64))
        np.testing.assert_allclose(got, want, **tol)
    bad = b.copy()
    bad[3, 1], bad[4, 2], bad[5, 2] = np.inf, np.inf, -np.inf
    zero_rows = np.broadcast_to(np.array([[0.0], [1.0]], dt), (2, 10))
    out = gemm.matmul(zero_rows, bad, np.empty((2, 7), dt))
    with np.errstate(invalid="ignore"):
        want = np.matmul(zero_rows.astype(np.float64), bad.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(want))
    assert not gemm.blas_threads_held()
