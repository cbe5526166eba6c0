"""bfloat16 products on the CPU (ember/_kernels/cpu/bf16_gemm.h through gemm.pyx) against a
float64 oracle on the same bfloat16 values and PyTorch's bfloat16 matmul.

The kernel (AVX512-BF16 dot products) sums in another order than float32-then-round, so
results are held to a rounding bound, not to bits: |got - exact| <= u16 |exact| +
(K + 2) u32 (|a| @ |b|), u16 = 2^-8 (bfloat16's unit roundoff: the one final rounding),
u32 = 2^-24 (each float32 addition of the accumulation).  Both paths (the kernel where the
CPU has AVX512-BF16, and the widen + sgemm path) are held to it.
"""
import numpy as np
import pytest

import ember
from ember._kernels.cpu import gemm
from helpers import matrix_layout

ml_dtypes = pytest.importorskip("ml_dtypes")
BF = ml_dtypes.bfloat16


def _cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512_bf16" in f.read()
    except OSError:
        return False


@pytest.fixture(params=["kernel", "sgemm"])
def path(request):
    """Run the test on either path; the kernel's case is skipped without AVX512-BF16."""
    on = gemm.bf16_kernel()
    if request.param == "kernel" and not on:
        pytest.skip("no AVX512-BF16 kernel on this CPU")
    gemm._set_bf16_kernel(request.param == "kernel")
    yield request.param
    gemm._set_bf16_kernel(on)


def _bound(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = np.matmul(a64, b64)
    k = a.shape[-1]
    return exact, 2.0 ** -8 * np.abs(exact) + (k + 2) * 2.0 ** -24 * np.matmul(
        np.abs(a64), np.abs(b64)) + 1e-30


def _check(a, b, out=None):
    exact, tol = _bound(a, b)
    if out is None:
        out = np.empty(exact.shape, BF)
    got = gemm.matmul(a, b, out)
    assert got is out and got.dtype == BF
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= tol), f"max error / bound {np.max(err / tol)} for {a.shape} @ {b.shape}"
    return got


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF)


SHAPES = [(1, 1, 1), (1, 7, 1), (5, 1, 3), (2, 3, 2), (12, 32, 32), (13, 33, 31),
          (25, 65, 33), (150, 3, 70), (2, 2, 700), (3, 1031, 5), (2, 5, 1100),
          (128, 784, 256), (256, 128, 784), (128, 10, 256), (10, 128, 256),
          (300, 200, 45)]     # the large ones split over ember's threads (rows or columns)


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_shapes(path, m, k, n):
    rng = np.random.default_rng(m * 10007 + k * 101 + n)
    _check(_rand(rng, (m, k)), _rand(rng, (k, n)))


@pytest.mark.parametrize("la,lb", [("c", "f"), ("f", "c"), ("f", "f"), ("strided", "neg"),
                                   ("neg", "step2"), ("step2", "strided"), ("neg", "neg")])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 33, 31), (37, 130, 45)])
def test_layouts(path, la, lb, m, k, n):
    rng = np.random.default_rng(7 * m + k)
    _check(matrix_layout(_rand(rng, (m, k)), la), matrix_layout(_rand(rng, (k, n)), lb))


def test_stride_zero_operands(path):
    rng = np.random.default_rng(3)
    row = _rand(rng, (1, 40))
    a = np.broadcast_to(row, (17, 40))                 # all rows the same (stride 0)
    b = np.broadcast_to(_rand(rng, (40, 1)), (40, 9))  # all columns the same
    _check(a, _rand(rng, (40, 23)))
    _check(_rand(rng, (6, 40)), b)


@pytest.mark.parametrize("sa,sb", [((4, 3, 5), (4, 5, 2)), ((1, 3, 5), (6, 5, 2)),
                                   ((3, 5), (7, 5, 4)), ((2, 1, 8, 16), (3, 16, 8)),
                                   ((5, 40, 33), (33, 20)), ((2, 3, 1, 4), (1, 3, 4, 1)),
                                   ((3, 100, 64), (64, 90)), ((1, 130, 70), (2, 70, 150))])
def test_batched_broadcast(path, sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    _check(_rand(rng, sa), _rand(rng, sb))


def test_output_layouts_and_overlap(path):
    rng = np.random.default_rng(5)
    a, b = _rand(rng, (20, 30)), _rand(rng, (30, 18))
    big = np.zeros((20, 36), BF)
    _check(a, b, big[:, ::2])                      # non-unit column stride in out
    assert np.all(big[:, 1::2].astype(np.float32) == 0)
    _check(a, b, np.zeros((18, 20), BF).T)         # transposed out
    _check(a, b, np.zeros((20, 18), BF)[::-1])     # negative row stride
    sq = _rand(rng, (16, 16))
    expect, tol = _bound(sq, sq)
    gemm.matmul(sq, sq, sq)                        # out is both operands
    assert np.all(np.abs(sq.astype(np.float64) - expect) <= tol)


def test_empty_and_zero_k(path):
    for (m, k, n) in [(0, 3, 4), (3, 4, 0), (0, 0, 0)]:
        got = gemm.matmul(np.ones((m, k), BF), np.ones((k, n), BF), np.empty((m, n), BF))
        assert got.shape == (m, n)
    got = gemm.matmul(np.ones((3, 0), BF), np.ones((0, 5), BF), np.full((3, 5), 7, BF))
    assert np.all(got.astype(np.float32) == 0)
    got = gemm.matmul(np.ones((0, 3, 4), BF), np.ones((4, 2), BF), np.empty((0, 3, 2), BF))
    assert got.shape == (0, 3, 2)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_special_values(path):
    rng = np.random.default_rng(9)
    a, b = _rand(rng, (14, 40)), _rand(rng, (40, 35))
    a[2, 5] = np.nan
    a[4, 0] = np.inf
    b[:, 7] = 0
    got = gemm.matmul(a, b, np.empty((14, 35), BF)).astype(np.float32)
    expect = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert np.array_equal(np.isnan(got), np.isnan(expect))
    assert np.array_equal(np.isinf(got), np.isinf(expect))
    fin = np.isfinite(expect)
    _, tol = _bound(np.nan_to_num(a, posinf=0), b)
    assert np.all(np.abs(got[fin] - expect[fin]) <= tol[fin])


def test_float16_unchanged():
    # float16 keeps the widen + sgemm path: bit-identical to the float32 product rounded once
    rng = np.random.default_rng(11)
    a = rng.standard_normal((9, 70)).astype(np.float16)
    b = rng.standard_normal((70, 13)).astype(np.float16)
    wide = np.empty((9, 13), np.float32)
    gemm.matmul(a.astype(np.float32), b.astype(np.float32), wide)
    got = gemm.matmul(a, b, np.empty((9, 13), np.float16))
    assert np.array_equal(got, wide.astype(np.float16))


def test_threads_agree(path):
    # the split over threads must not change a bit: each element is one thread's sum
    rng = np.random.default_rng(13)
    a, b = _rand(rng, (2, 150, 300)), _rand(rng, (300, 140))
    want = gemm.matmul(a, b, np.empty((2, 150, 140), BF))
    n = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = gemm.matmul(a, b, np.empty((2, 150, 140), BF))
    finally:
        ember.set_num_threads(n)
    assert np.array_equal(one.view(np.uint16), want.view(np.uint16))


def test_kernel_selected_where_the_cpu_has_it():
    import os
    if os.environ.get("EMBER_BF16_GEMM", "1") == "0":
        assert not gemm.bf16_kernel()
    else:
        assert gemm.bf16_kernel() == _cpu_has_bf16()


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 33, 31), (128, 784, 256), (4, 1100, 3)])
def test_against_torch(path, m, k, n):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(m + k + n)
    a, b = _rand(rng, (m, k)), _rand(rng, (k, n))
    ta = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    tb = torch.from_numpy(b.astype(np.float32)).to(torch.bfloat16)
    want = (ta @ tb).float().numpy().astype(np.float64)
    got = _check(a, b).astype(np.float64)
    _, tol = _bound(a, b)
    assert np.all(np.abs(got - want) <= 2 * tol)      # both within the bound of the oracle


@pytest.mark.parametrize("batch_shape", [(7,), (2, 3)])
def test_linear_autograd_against_torch(path, batch_shape):
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    rng = np.random.default_rng(len(batch_shape))
    x32 = rng.standard_normal(batch_shape + (37,)).astype(np.float32)
    w32 = rng.standard_normal((19, 37)).astype(np.float32)
    b32 = rng.standard_normal(19).astype(np.float32)
    g32 = rng.standard_normal(batch_shape + (19,)).astype(np.float32)
    ex, ew, eb = (ember.asarray(v).astype(ember.bfloat16) for v in (x32, w32, b32))
    for t in (ex, ew, eb):
        t.requires_grad_(True)
    y = F.linear(ex, ew, eb)
    y.backward(ember.asarray(g32).astype(ember.bfloat16))
    tx, tw, tb = (torch.from_numpy(v).to(torch.bfloat16).requires_grad_() for v in (x32, w32, b32))
    ty = torch.nn.functional.linear(tx, tw, tb)
    ty.backward(torch.from_numpy(g32).to(torch.bfloat16))

    def f64(v):
        return np.asarray(v.astype(ember.float32)).astype(np.float64)

    def t64(v):
        return v.detach().float().numpy().astype(np.float64)

    xb, wb, gb = (v.astype(BF) for v in (x32, w32, g32))
    x2, g2 = xb.reshape(-1, 37), gb.reshape(-1, 19)
    cases = [("y", y, ty, *_bound(xb, wb.T)),
             ("x.grad", ex.grad, tx.grad, *_bound(gb, wb)),
             ("w.grad", ew.grad, tw.grad, *_bound(g2.T, x2))]
    for name, got, want, exact, tol in cases:
        if name == "y":      # + bias: one more bfloat16 rounding of the sum
            exact = exact + b32.astype(BF).astype(np.float64)
            tol = 2 * tol + 2.0 ** -8 * np.abs(exact)
        assert got.dtype == ember.bfloat16
        assert np.all(np.abs(f64(got) - exact) <= tol), name
        assert np.all(np.abs(f64(got) - t64(want)) <= 2 * tol), name
    bexact = g2.astype(np.float64).sum(axis=0)
    btol = 2.0 ** -8 * np.abs(bexact) + g2.shape[0] * 2.0 ** -23 * np.abs(g2.astype(np.float64)).sum(0)
    assert np.all(np.abs(f64(eb.grad) - bexact) <= btol)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"), reason="needs Linux")
def test_short_lived_threads_free_their_buffers(path):
    # each thread's packing buffers (~2 MB here) go when it exits: RSS stays flat
    import threading
    rng = np.random.default_rng(17)
    a, b = _rand(rng, (64, 1024)), _rand(rng, (1024, 1024))
    want = gemm.matmul(a, b, np.empty((64, 1024), BF))
    bad = []

    def work():
        got = gemm.matmul(a, b, np.empty((64, 1024), BF))
        if not np.array_equal(got.view(np.uint16), want.view(np.uint16)):
            bad.append(1)

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    for t in [threading.Thread(target=work) for _ in range(3)]:
        t.start(); t.join()
    before = rss()
    for t in [threading.Thread(target=work) for _ in range(40)]:
        t.start(); t.join()
    assert not bad
    assert rss() - before < 30 * 2 ** 20
