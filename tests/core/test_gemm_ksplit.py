"""Float32 products split over the threads by ranges of K (``gemm._run_ksplit``: each
thread sums a range of K, the partial sums are added into C by rows, alpha and the bias
applied once) and batched products collapsed into one product of batch x M rows
(``_collapse_rows``), against a NumPy float64 oracle, with the switch on and off, on
1, 2 and 3 threads, for every layout the GEMM path addresses (A or B transposed, a
row-strided C, copied operands), alpha, bias, K not a multiple of the kernel's K block
and K shorter than the thread count.

Bound: with the K split an element of C is sum_p (chain of FMAs over range p), the
chains added left to right, then times alpha and plus the bias, each step one float32
rounding; at most K + parts - 1 <= K + 2 roundings fall on any product a[i,k] * b[k,j]
(a chain of length L rounds each partial sum once per FMA; the parts - 1 additions once
more), so |got - exact| <= (K + 4) u (|alpha| (|A| |B|) + |bias|), u = 2**-24
(first-order; the products here are far from overflow).  The summation order then
depends on the thread count, so results are not bit-identical across thread counts;
for the same thread count and switch they are (deterministic), and the batch collapse
keeps every element's FMA chain, so it is bit-identical to the per-entry product.
"""
import numpy as np
import pytest

import ember
from ember._kernels.cpu import gemm

pytestmark = pytest.mark.skipif(not gemm.available() or not gemm.f32_kernel(),
                                reason="needs OpenBLAS and the AVX-512 float32 kernel")


@pytest.fixture
def threads():
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)


@pytest.fixture
def ksplit_rule():
    """The split on with its default rule; the rule, the switch and the kernel's size
    limits restored afterwards."""
    on, limit = gemm.f32_kernel(), gemm._f32_limit()
    old = gemm._set_ksplit(True)
    yield
    gemm._set_ksplit(old[0], old[1], old[2], collapse=old[3])
    gemm._set_f32_kernel(on, *limit)


def _oracle(a, b, alpha, bias):
    exact = alpha * np.matmul(a.astype(np.float64), b.astype(np.float64))
    mag = abs(alpha) * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    if bias is not None:
        exact = exact + bias
        mag = mag + np.abs(bias)
    return exact, mag


def _check(a, b, alpha=1.0, bias=None, out=None, oracle=None):
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    out = np.full(shape, np.nan, np.float32) if out is None else out
    got = gemm.matmul(a, b, out, alpha, bias=bias)
    assert got is out
    exact, mag = _oracle(a, b, alpha, bias) if oracle is None else oracle
    k = a.shape[-1]
    assert np.all(np.abs(got - exact) <= (k + 4) * 2.0 ** -24 * mag + 1e-30)
    return got.copy()


def _layouts(rng, m, n, k):
    """(name, A, B) for A and B each read as stored or transposed, and a negative
    stride (the copied path)."""
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    at = np.ascontiguousarray(a.T).T            # column-major A (the g^T of dW)
    bt = np.ascontiguousarray(b.T).T            # column-major B (the W^T of forward)
    return [("nn", a, b), ("tn", at, b), ("nt", a, bt), ("tt", at, bt),
            ("neg", a[::-1], b)]


def _runs(a, b, alpha, bias, out=None):
    """The product with the split on / off on 1, 2, 3 threads, each held to the oracle;
    the K split ran (once) exactly when it was on and more than one thread ran."""
    res = {}
    oracle = _oracle(a, b, alpha, bias)
    for on in (True, False):
        gemm._set_ksplit(on)
        for nt in (1, 2, 3):
            ember.set_num_threads(nt)
            before = gemm._ksplit_runs()
            res[on, nt] = _check(a, b, alpha, bias,
                                 None if out is None else out(a.shape[0], b.shape[1]), oracle)
            ran = gemm._ksplit_runs() - before
            assert ran == (1 if on and nt > 1 else 0), (on, nt, ran)
    return res


@pytest.mark.usefixtures("threads", "ksplit_rule")
@pytest.mark.parametrize("alpha,with_bias", [(1.0, False), (-0.375, True), (2.0, False)])
@pytest.mark.parametrize("mnk", [(40, 33, 2048), (96, 64, 777), (13, 130, 700)])
def test_ksplit_layouts_alpha_bias(mnk, alpha, with_bias):
    rng = np.random.default_rng(sum(mnk))
    m, n, k = mnk
    gemm._set_ksplit(True)          # the default rule: K >= 4 max(M, N), 256 per part
    bias = rng.standard_normal(n, dtype=np.float32) if with_bias else None
    for name, a, b in _layouts(rng, m, n, k):
        res = _runs(a, b, alpha, bias)
        # one thread: no split either way, the same numbers
        np.testing.assert_array_equal(res[True, 1], res[False, 1], err_msg=name)
        # deterministic for a given thread count
        ember.set_num_threads(2)
        gemm._set_ksplit(True)
        np.testing.assert_array_equal(gemm.matmul(a, b, np.empty_like(res[True, 2]), alpha,
                                                  bias=bias), res[True, 2], err_msg=name)


@pytest.mark.usefixtures("threads", "ksplit_rule")
def test_ksplit_row_strided_out():
    """C a column slice of a wider array: its row stride is not N."""
    rng = np.random.default_rng(5)
    m, n, k = 24, 40, 1500
    gemm._set_ksplit(True)
    bias = rng.standard_normal(n, dtype=np.float32)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    wide = [None]

    def out(m_, n_):
        wide[0] = np.full((m_, n_ + 9), 7.0, np.float32)
        return wide[0][:, 3:3 + n_]

    _runs(a, b, 0.5, bias, out)
    assert np.all(wide[0][:, :3] == 7.0) and np.all(wide[0][:, 3 + n:] == 7.0)


@pytest.mark.usefixtures("threads", "ksplit_rule")
@pytest.mark.parametrize("k", [2, 3, 17, 255, 257, 513])
def test_ksplit_short_and_odd_k(k):
    """K shorter than the thread count, and K off the kernel's block of 256, with the
    rule forced (ratio 0, one element per part) and the kernel's size limits lifted."""
    gemm._set_f32_kernel(True, 1 << 62, 0)
    gemm._set_ksplit(True, ratio=0.0, min_k=1)
    rng = np.random.default_rng(k)
    m, n = (400, 700) if k < 8 else (200, 150)     # above the one-thread size
    for name, a, b in _layouts(rng, m, n, k)[:4]:
        for nt in (1, 2, 3):
            ember.set_num_threads(nt)
            before = gemm._ksplit_runs()
            _check(a, b, -1.5, rng.standard_normal(n, dtype=np.float32))
            assert gemm._ksplit_runs() - before == (1 if nt > 1 else 0), (name, nt)


@pytest.mark.usefixtures("threads", "ksplit_rule")
def test_ksplit_no_memory_falls_back():
    """A part that gets no scratch (simulated): the row / column split redoes the whole
    product, with the same numbers as the split turned off."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2048, 64), dtype=np.float32).T
    b = rng.standard_normal((2048, 48), dtype=np.float32)
    bias = rng.standard_normal(48, dtype=np.float32)
    ember.set_num_threads(2)
    gemm._set_ksplit(False)
    want = _check(a, b, 0.25, bias)
    gemm._set_ksplit(True)
    gemm._ksplit_fail_scratch(True)
    try:
        before = gemm._ksplit_runs()
        got = _check(a, b, 0.25, bias)
        assert gemm._ksplit_runs() == before
    finally:
        gemm._ksplit_fail_scratch(False)
    np.testing.assert_array_equal(got, want)


@pytest.mark.usefixtures("threads", "ksplit_rule")
@pytest.mark.parametrize("case", ["x@W", "x@W^T", "bias", "not-collapsible"])
def test_batch_collapse_same_bits(case):
    """(batch, M, K) @ (K, N): one product of batch x M rows with the switch on, bit for
    bit the per-entry product (each element the same FMA chain), on 1-3 threads."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 40, 96), dtype=np.float32)
    w = rng.standard_normal((96, 72), dtype=np.float32)
    bias = None
    if case == "x@W^T":
        w = np.ascontiguousarray(w.T).T
    elif case == "bias":
        bias = rng.standard_normal(72, dtype=np.float32)
    elif case == "not-collapsible":
        x = np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    for nt in (1, 2, 3):
        ember.set_num_threads(nt)
        gemm._set_ksplit(False)
        before = gemm._collapse_runs()
        off = _check(x, w, 0.5, bias)
        assert gemm._collapse_runs() == before
        gemm._set_ksplit(True)
        on = _check(x, w, 0.5, bias)
        assert gemm._collapse_runs() == before + (case != "not-collapsible")
        np.testing.assert_array_equal(on, off)
        np.testing.assert_array_equal(on, np.stack([_check(x[i], w, 0.5, bias)
                                                    for i in range(len(x))]))


@pytest.mark.usefixtures("threads", "ksplit_rule")
def test_ksplit_linear_weight_gradient():
    """The layer's weight gradient g^T @ x (K = rows) through autograd, against PyTorch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1024, 48), dtype=np.float32)
    w = rng.standard_normal((40, 48), dtype=np.float32)
    g = rng.standard_normal((1024, 40), dtype=np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.linear(tx, tw).backward(torch.tensor(g))
    ember.set_num_threads(2)
    gemm._set_ksplit(True)
    ex, ew = ember.asarray(x, requires_grad=True), ember.asarray(w, requires_grad=True)
    before = gemm._ksplit_runs()
    ember.nn.functional.linear(ex, ew).backward(ember.asarray(g))
    assert gemm._ksplit_runs() > before
    _, mag = _oracle(g.T, x, 1.0, None)
    assert np.all(np.abs(np.asarray(ew.grad) - tw.grad.numpy()) <= 2 * (1024 + 4) * 2.0 ** -24
                  * mag)


def test_ksplit_fewer_threads_than_parts():
    """OpenMP gives one thread where three parts were planned (OMP_THREAD_LIMIT=1): that
    thread sums all three ranges into separate scratch and reduces them."""
    import os
    import subprocess
    import sys
    code = (
        "import numpy as np, ember\n"
        "from ember._kernels.cpu import gemm\n"
        "ember.set_num_threads(3)\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.standard_normal((2048, 64), dtype=np.float32).T\n"
        "b = rng.standard_normal((2048, 48), dtype=np.float32)\n"
        "bias = rng.standard_normal(48, dtype=np.float32)\n"
        "n0 = gemm._ksplit_runs()\n"
        "got = gemm.matmul(a, b, np.empty((64, 48), np.float32), 0.5, bias=bias)\n"
        "assert gemm._ksplit_runs() == n0 + 1\n"
        "exact = 0.5 * (a.astype(np.float64) @ b) + bias\n"
        "mag = 0.5 * (np.abs(a).astype(np.float64) @ np.abs(b)) + np.abs(bias)\n"
        "assert np.all(np.abs(got - exact) <= (2048 + 4) * 2.0 ** -24 * mag)\n"
        "print('ok')\n")
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


@pytest.mark.usefixtures("threads", "ksplit_rule")
def test_ksplit_from_python_threads():
    """Two Python threads running K-split products at once (each with its OpenMP team and
    its threads' own scratch) get the numbers of a lone call."""
    import threading
    rng = np.random.default_rng(9)
    ops = [(rng.standard_normal((1500, 40 + 8 * i), dtype=np.float32).T,
            rng.standard_normal((1500, 56), dtype=np.float32)) for i in range(2)]
    ember.set_num_threads(2)
    gemm._set_ksplit(True)
    want = [gemm.matmul(a, b, np.empty((a.shape[0], 56), np.float32)) for a, b in ops]
    got = [[], []]

    def work(i):
        a, b = ops[i]
        for _ in range(8):
            got[i].append(gemm.matmul(a, b, np.empty((a.shape[0], 56), np.float32)))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(2):
        assert len(got[i]) == 8
        for g in got[i]:
            np.testing.assert_array_equal(g, want[i])
